//! QoS queues: `set_queue`, `enqueue` and `pop_queue` (OVS's xlate_set_queue_action(),
//! xlate_enqueue_action() and its OFPACT_POP_QUEUE case). The queue a packet leaves on is its
//! `skb_priority`; the userspace datapath maps a queue id to the same number
//! (dpif-netdev's queue_to_priority()). A change reaches the datapath as
//! `set(skb_priority(N))`, committed before the next output like any other field
//! ([`Ctx::commit_priority`]). Each of the three actions makes the megaflow match the packet's
//! priority, as OVS's do.

use super::*;

impl Ctx<'_> {
    /// `set_queue:QUEUE`: the packet's priority from now on.
    pub(super) fn set_queue(&mut self, queue: u32) {
        self.wc.meta.skb_priority = u32::MAX;
        self.flow.meta.skb_priority = queue;
    }

    /// `pop_queue`: back to the priority the packet came with.
    pub(super) fn pop_queue(&mut self) {
        self.wc.meta.skb_priority = u32::MAX;
        let orig = self.orig_skb_priority;
        if self.flow.meta.skb_priority != orig {
            self.flow.meta.skb_priority = orig;
            let q = if orig == 0 {
                "0".to_owned()
            } else {
                format!("{orig:#x}")
            };
            self.note(format_args!("queue = {q}"));
        }
    }

    /// `enqueue:PORT:QUEUE`: an output to `port` with the priority of `queue`, for that
    /// output only. Enqueueing to the input port needs `IN_PORT`, else it does nothing.
    pub(super) fn enqueue(&mut self, port: u32, queue: u32) {
        self.wc.meta.skb_priority = u32::MAX;
        let in_port = self.flow.dp.in_port();
        let port = match port {
            OFPP_IN_PORT => in_port,
            p if p == in_port => return,
            p => p,
        };
        let saved = self.flow.meta.skb_priority;
        self.flow.meta.skb_priority = queue;
        self.output_port(port, port == in_port);
        self.flow.meta.skb_priority = saved;
    }

    /// The `set(skb_priority(N))` that gives the packet the flow's priority, if it differs
    /// from the one the datapath's packet has (OVS's commit_set_priority_action()).
    pub(super) fn commit_priority(&mut self) -> Option<Action> {
        let p = self.flow.meta.skb_priority;
        if p == self.base_skb_priority {
            return None;
        }
        self.base_skb_priority = p;
        self.wc.meta.skb_priority = u32::MAX;
        let mut attrs = KeyAttrs::default();
        attrs.push(Attr::SkbPriority, 0);
        attrs.skb_priority = p;
        attrs.skb_priority_mask = u32::MAX;
        Some(Action::Set(Box::new(DpKey {
            key: FlowKey::new(),
            mask: Mask::new(),
            attrs,
        })))
    }
}
