//! The decap fast path tier: on a tunnel's underlay port, the few megaflows whose only action
//! is `tnl_pop` ([`DecapFlow`](crate::decap::DecapFlow)) are compared with each key right after extraction, a masked
//! compare cheaper than an EMC probe. When the whole batch hits and pops to one tunnel port,
//! it is decapsulated in place and runs its next pass at once as received there, without the
//! grouping, the actions and the recirculation queue ([`Pmd::decap_in_place`]); otherwise
//! the hits only skip the later tiers. Counted as `decap_hits` (and `tnl_pops`); the lookup's
//! cycles under `emc`, the pop's under `actions`.
//!
//! A batch just received is tried first with no extraction at all ([`Pmd::decap_rx`]): the
//! outer pass fused into the decap, on six header words of a common-shape frame.

use flow::FlowKey;

use crate::decap::MAX_DECAP_FLOWS;
use crate::packet::{Batch, MAX_BURST};

use super::super::extract::{meta_word, only_port_and_recirc};
use super::super::recirc::pop_one;
use super::super::{Pmd, Stage};
use super::Pass;

impl Pmd {
    /// The outer pass of a batch just received on a tunnel's underlay port, fused into the
    /// decap: when every packet is a frame of the common shape whose words
    /// ([`flow::ipv4_fast_words`]) match one of the port's decap megaflows
    /// ([`crate::decap::lookup_outer`]), all popping to one tunnel port, they are popped in
    /// place as by the decap fast path, with no key written, no extraction and no second
    /// compare, and the tunnel port is returned for their next pass. Otherwise nothing has
    /// changed but the packets' header offsets, and the batch takes the usual way.
    #[inline]
    pub(in crate::pmd) fn decap_rx(&mut self, batch: &mut Batch, in_port: u32) -> Option<u32> {
        let c = self.cls.port(in_port)?;
        if c.decap.is_empty() {
            return None;
        }
        let t0 = self.stamp();
        let mut which = [0u8; MAX_BURST];
        let mut tcp_flags = [0u16; MAX_BURST];
        for (i, p) in batch.packets_mut().iter_mut().enumerate() {
            let m = &p.meta;
            if !only_port_and_recirc(m) || p.is_lent() {
                return None;
            }
            let w0 = meta_word(m.in_port, m.recirc_id);
            let ([w1, w2, w3, w4, w5], layers) = flow::ipv4_fast_words(p.data())?;
            which[i] = crate::decap::lookup_outer(&c.decap, &[w0, w1, w2, w3, w4, w5])? as u8;
            tcp_flags[i] = flow::extract::tcp_flags_of_word(w5);
            p.meta.l2_5 = layers.l2_5;
            p.meta.l3 = layers.l3;
            p.meta.l4 = layers.l4;
        }
        let n = batch.len();
        let port = self.decap_in_place(batch, in_port, &which, |_, i| tcp_flags[i])?;
        self.stats.batches += 1;
        self.count_decap_hits(n as u64);
        let t = self.stamp();
        self.add_stage(Stage::Actions, t0, t);
        Some(port)
    }

    /// The decap fast path tier: the packets no tier before found whose key matches one of
    /// the port's decap megaflows get it in `hits`. Returns the tunnel port when every packet
    /// hit and the batch was popped in place ([`Self::decap_in_place`]): its next pass
    /// starts at once, as received there.
    #[inline(always)]
    pub(in crate::pmd) fn decap_fast_path(
        &mut self,
        batch: &mut Batch,
        pass: &mut Pass,
    ) -> Option<u32> {
        if self.cls.decap(pass.in_port).is_empty() {
            return None;
        }
        let mut which = [0u8; MAX_BURST];
        // A simple packet's key is partial: whatever the decap compare says of it does not
        // count.
        let fast = self.decap_lookup(pass.in_port, pass.n, &mut which) & pass.todo;
        if fast != 0 {
            self.count_decap_hits(u64::from(fast.count_ones()));
        }
        if fast == pass.all()
            && let Some(port) =
                self.decap_in_place(batch, pass.in_port, &which, |k, i| k[i].tcp_flags())
        {
            return Some(port);
        }
        let flows = self.cls.decap(pass.in_port);
        let mut bits = fast;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            self.hits[i] = Some(flows[usize::from(which[i])].flow);
        }
        pass.todo &= !fast;
        None
    }

    /// Counts `n` packets the decap fast path found.
    #[inline]
    pub(in crate::pmd) fn count_decap_hits(&mut self, n: u64) {
        self.stats.decap_hits += n;
        self.count_cached(n);
    }

    /// The decap fast path's lookup: the packets of the batch (of `n`) whose key matches one
    /// of `in_port`'s decap megaflows, as a bit mask, with the megaflow's index in `which`.
    #[inline]
    pub(in crate::pmd) fn decap_lookup(
        &mut self,
        in_port: u32,
        n: usize,
        which: &mut [u8; MAX_BURST],
    ) -> u32 {
        let flows = self.cls.decap(in_port);
        let mut bits = 0u32;
        for (i, k) in self.keys[..n].iter().enumerate() {
            if let Some(j) = crate::decap::lookup(flows, k) {
                which[i] = j as u8;
                bits |= 1 << i;
            }
        }
        bits
    }

    /// Runs the decap megaflows `which` (indices into `in_port`'s decap list, one per packet)
    /// on the whole batch: credits their statistics, then pops every packet in place, making
    /// it arrive on the tunnel port with recirc_id 0 (dropping, counted, what does not
    /// decapsulate). Returns the tunnel port, or `None`, leaving everything as it was, when
    /// the packets pop to more than one port.
    pub(in crate::pmd) fn decap_in_place(
        &mut self,
        batch: &mut Batch,
        in_port: u32,
        which: &[u8; MAX_BURST],
        tcp_flags_of: impl Fn(&[FlowKey], usize) -> u16,
    ) -> Option<u32> {
        let n = batch.len();
        let flows = self.cls.decap(in_port);
        let port = flows[usize::from(which[0])].port;
        if which[..n]
            .iter()
            .any(|&j| flows[usize::from(j)].port != port)
        {
            return None;
        }
        // Flow statistics, once per megaflow, as a group's would be.
        let mut packets = [0u64; MAX_DECAP_FLOWS];
        let mut bytes = [0u64; MAX_DECAP_FLOWS];
        let mut tcp_flags = [0u16; MAX_DECAP_FLOWS];
        for (i, p) in batch.packets().iter().enumerate() {
            let j = usize::from(which[i]) % MAX_DECAP_FLOWS;
            packets[j] += 1;
            bytes[j] += p.len() as u64;
            tcp_flags[j] |= tcp_flags_of(&self.keys, i);
        }
        let now = self.iter_tsc;
        for (j, d) in flows.iter().enumerate() {
            if packets[j] > 0
                && let Some(f) = self.flows.get_mut(d.flow)
            {
                f.stats.packets += packets[j];
                f.stats.bytes += bytes[j];
                f.stats.used_tsc = now;
                f.stats.tcp_flags |= tcp_flags[j];
            }
        }
        let kind = self.tunnel_kind(port);
        let mut dropped = 0u32;
        for (i, p) in batch.packets_mut().iter_mut().enumerate() {
            if !pop_one(&mut self.stats, p, port, kind) {
                dropped |= 1 << i;
            }
        }
        if dropped != 0 {
            batch.remove(dropped, &mut self.pool);
        }
        Some(port)
    }
}
