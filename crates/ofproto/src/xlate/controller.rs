//! The `controller` action and output to `CONTROLLER` (OVS's `xlate_controller_action()`):
//! translation freezes what a packet-in needs (bridge, the rule's table, input port,
//! registers and metadata, tunnel, whether conntrack ran, the action's user data) under a
//! recirculation id and emits a datapath `userspace(controller(...))` action whose cookie
//! names it; the datapath hands the packet, as the actions before left it, to the slow path,
//! which sends the packet-ins.
//!
//! `controller(pause)` also ends translation there: the actions that would have run after it
//! are frozen as for a recirculation ([`super::freeze`]), and the cookie says
//! `continuation=1`, so that the packet-in carries them to the controller, which may send
//! them back with `NXT_RESUME` to go on where the pipeline stopped.

use flow::odp::Action;

use super::{Ctx, NodeKind};
use crate::recirc::{FrozenAction, FrozenState};
use crate::syntax::{Controller, PacketInReason};

/// `OFPR_ACTION` and OVS's private `OFPR_EXPLICIT_MISS`.
const OFPR_ACTION: u8 = 1;
const OFPR_EXPLICIT_MISS: u8 = 6;

/// A `controller(pause)` waiting for translation to finish freezing.
#[derive(Clone, Debug)]
pub(super) struct Pause {
    reason: u8,
    max_len: u16,
    id: u16,
    meter_id: Option<u32>,
    userdata: Vec<u8>,
}

/// The packet-in reason code of `r` (OVS's `enum ofp_packet_in_reason`).
pub(super) fn reason_code(r: PacketInReason) -> u8 {
    match r {
        PacketInReason::NoMatch => 0,
        PacketInReason::Action => 1,
        PacketInReason::InvalidTtl => 2,
        PacketInReason::ActionSet => 3,
        PacketInReason::Group => 4,
        PacketInReason::PacketOut => 5,
    }
}

impl Ctx<'_> {
    /// `controller(...)`: a packet-in with the action's reason, length, controller id and
    /// user data; with `pause`, translation stops here and the packet-in carries the rest.
    pub(super) fn controller_action(&mut self, c: &Controller) {
        let reason = reason_code(c.reason);
        if c.pause {
            self.pause = Some(Pause {
                reason,
                max_len: c.max_len,
                id: c.id,
                meter_id: c.meter_id,
                userdata: c.userdata.clone(),
            });
            self.trigger_freeze();
            return;
        }
        self.controller_with(reason, c.max_len, c.id, &c.userdata, c.meter_id);
    }

    /// With a meter, as OVS's `put_controller_user_action()`: the packet-in just emitted goes
    /// in a sample of every packet, `sample(sample=100.0%,actions(meter(M),userspace(...)))`,
    /// so that the meter limits the packet-ins and nothing else; a paused packet-in's too (OVS
    /// 3.1.5's "Fix continuations with associated metering": OVN polices its DHCP and other
    /// paused packet-ins with control-plane meters). Without a meter of its own, a packet-in
    /// goes through the bridge's controller meter (`meter=controller`, OpenFlow's
    /// `OFPM_CONTROLLER`) if it has one, as OVS's `xlate_controller_action()` meters every
    /// packet-in. A meter the bridge does not have limits nothing.
    fn meter_packet_in(&mut self, meter_id: Option<u32>) {
        let meter_id = meter_id.unwrap_or(crate::meter::OFPM13_CONTROLLER);
        let meter = self.br().meters.dp_id(meter_id);
        if let Some(dp) = meter
            && matches!(self.out.last(), Some(Action::Userspace(_)))
        {
            let up = self.out.pop().expect("just matched");
            self.out.push(Action::Sample {
                probability: u32::MAX,
                actions: vec![Action::Meter(dp), up],
            });
        }
    }

    /// Output to `CONTROLLER` (and the pipeline's own packet-ins, such as `invalid_ttl`).
    pub(super) fn controller(&mut self, reason: u8, max_len: u16, id: u16) {
        self.controller_with(reason, max_len, id, &[], None);
    }

    fn controller_with(
        &mut self,
        reason: u8,
        max_len: u16,
        id: u16,
        userdata: &[u8],
        meter_id: Option<u32>,
    ) {
        let state = self.packet_in_state(Vec::new(), userdata.to_vec());
        self.emit_controller(state, reason, max_len, id, false);
        self.meter_packet_in(meter_id);
    }

    /// Ends a translation that `controller(pause)` froze (instead of `recirc(ID)`): the frozen
    /// actions go with the packet-in.
    pub(super) fn finish_pause(&mut self, p: Pause, actions: Vec<FrozenAction>) {
        let state = self.packet_in_state(actions, p.userdata);
        self.emit_controller(state, p.reason, p.max_len, p.id, true);
        self.meter_packet_in(p.meter_id);
    }

    /// What a packet-in tells of the pipeline here: the rule's table, the input port,
    /// registers, metadata, tunnel and conntrack, with `actions` left to run.
    fn packet_in_state(&self, actions: Vec<FrozenAction>, userdata: Vec<u8>) -> FrozenState {
        FrozenState {
            bridge: self.br().name.clone(),
            table: self.table_id,
            in_port: self.flow.dp.in_port(),
            meta: self.flow.meta,
            tunnel: crate::recirc::tunnel_snapshot(&self.flow.dp),
            conntracked: self.conntracked,
            actions,
            stack: self.stack.clone(),
            action_set: self.action_set.actions.clone(),
            userdata,
            mirrors: self.mirrors,
            packet_out: false,
        }
    }

    fn emit_controller(
        &mut self,
        state: FrozenState,
        reason: u8,
        max_len: u16,
        id: u16,
        continuation: bool,
    ) {
        let reason = if reason == OFPR_ACTION && self.rule_is_miss {
            OFPR_EXPLICIT_MISS
        } else {
            reason
        };
        let Some(recirc_id) = self.pipe.recirc.intern(state) else {
            self.trace_add(NodeKind::Error, "Failed to allocate recirculation id");
            self.res.failed = Some("No recirculation context");
            self.exit = true;
            return;
        };
        self.br()
            .n_controller
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.commit();
        let cookie = if self.rule_cookie == 0 {
            "0".to_owned()
        } else {
            format!("{:#x}", self.rule_cookie)
        };
        let dont_send = u8::from(self.trace.is_some() && !self.learn);
        let continuation = u8::from(continuation);
        self.out
            .push(Action::Userspace(Box::new(flow::odp::Userspace {
                pid: 0,
                cookie: flow::odp::UserCookie::Text(format!(
                    "controller(reason={reason},dont_send={dont_send},\
                     continuation={continuation},recirc_id={recirc_id},rule_cookie={cookie},\
                     controller_id={id},max_len={max_len})"
                )),
                actions: false,
                tunnel_out_port: None,
            })));
    }
}
