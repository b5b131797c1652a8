//! The `ct()` action on a group: each packet through the connection tracker (shared by the
//! PMDs, with this PMD's cache of its lookups), which sets its connection state and may
//! translate it (NAT); IP fragments wait in the PMD's reassembler for their datagram. Part of
//! the actions stage (`ct_packets`, `ct_not_ip`, `ct_frags_held`, `ct_frag_drops`).

use arrayvec::ArrayVec;

use crate::packet::{Batch, MAX_BURST, Packet};

use super::Pmd;

impl Pmd {
    /// `ct(...)`: runs each packet of `batch` through the connection tracker, which sets its
    /// connection state and may translate it (NAT). A packet that is not IP is `+trk+inv`. IP
    /// fragments are held by the PMD's reassembler until their datagram is complete; then all
    /// its fragments go on (after the batch's other packets) with the state the first one got.
    ///
    /// `rekey`: the batch is its pass's, its keys in `keys` at its packets' places; each packet
    /// translated is then given its new addresses and ports there too, so that a next pass may
    /// take its key from this one's instead of parsing it again.
    ///
    /// Returns whether the batch holds the same packets in the same order (no fragments), and,
    /// with `rekey`, its keys still describe its headers (every translation was of an IPv4 TCP
    /// or UDP packet, made again in its key).
    pub(super) fn conntrack(
        &mut self,
        args: &conntrack::CtArgs,
        batch: &mut Batch,
        rekey: bool,
    ) -> bool {
        let writes = args.writes_mark_or_label();
        // A packet an earlier ct() of this zone tracked keeps what that one said, as a packet
        // keeps its reference to the connection in the kernel's datapath: unless this one
        // has a translation to make, or writes a mark or label the packet does not show
        // already, the connection is not even looked at. A packet an earlier ct(nat) of the
        // zone translated is not translated again (OVS's `handle_nat` on a packet's cached
        // connection), so a ct(nat) keeps it too. A commit whose writes the packet shows
        // already (OVN's commits of a connection's mark and label, once they are set) changes
        // nothing of what the earlier ct() found: it takes effect as if made then.
        let keep = !args.force;
        let nat = args.nat.is_some();
        if keep && all_kept(batch, args, nat) {
            // The common second ct() of a pipeline: nothing to track, not even the clock.
            self.stats.ct_packets += batch.len() as u64;
            return true;
        }
        let now = conntrack::now_ms();
        let ct = self
            .conntrack
            .get_or_insert_with(|| std::sync::Arc::new(conntrack::Conntrack::new()));
        // The packets tracked here (IP, not fragments): their places in the batch and
        // families; the others are not IP (`+inv`) or fragments, or their earlier state
        // stands (`ct_ml` has what a commit wrote for those rechecked).
        let mut idx = [0u8; MAX_BURST];
        let mut v6s = [false; MAX_BURST];
        let mut not_ip = 0u32;
        let mut frags = false;
        // Filled as packets are taken, not made whole first: 32 placeholders cost every
        // tracked burst a dozen stores a packet.
        let mut pkts = ArrayVec::<conntrack::CtPacket<'_>, MAX_BURST>::new();
        self.ct_ml.clear();
        for (i, p) in batch.packets().iter().enumerate().take(MAX_BURST) {
            // The frame, taken once: each taking is a bounds check.
            let frame = p.data();
            let l3 = p.meta.l3;
            let Some(v6) = crate::ct::version_in(frame, l3) else {
                not_ip |= 1 << i;
                continue;
            };
            if crate::ct::fragment_in(frame, usize::from(l3), v6) {
                frags = true;
                continue;
            }
            let tracked = p.meta.ct_state != 0;
            let natted = natted(p, args.zone);
            if tracked {
                if keep && (!nat || natted) && kept(p, args, writes) {
                    continue;
                }
                // Tracked by an earlier ct() of this zone: not again (`Conntrack::recheck`).
                if let Some((conn_ref, orig)) = crate::ct::cached(p, args.zone, v6)
                    && let Some((mark, label)) =
                        ct.recheck(&self.ct_cache, conn_ref, &orig, args, natted, now)
                {
                    // What the packet shows already needs no write (a commit of a connection
                    // whose mark and label hold, as OVN's are once set).
                    if writes && !crate::ct::has_mark_and_label(p, mark, label) {
                        self.ct_ml.push((i as u8, mark, label));
                    }
                    continue;
                }
            }
            idx[pkts.len()] = i as u8;
            v6s[pkts.len()] = v6;
            pkts.push(conntrack::CtPacket {
                frame,
                l3: usize::from(l3),
                v6,
                frag_l4_len: None,
                // An earlier ct() checked the headers (rewrites since keep them valid), or
                // the checksums need no check (`crate::ct::csum_trusted`).
                verified: tracked || crate::ct::csum_trusted(p, v6),
                natted,
            });
        }
        let n = pkts.len();
        let out = &mut self.ct_out[..n];
        ct.process_batch(&mut self.ct_cache, &pkts, out, args, now);
        // Their frames are written below.
        drop(pkts);
        let pkts = batch.packets_mut();
        let mut keys_hold = true;
        for ((&i, &v6), (md, nat)) in idx.iter().zip(&v6s).zip(self.ct_out[..n].iter()) {
            let p = &mut pkts[usize::from(i)];
            crate::ct::store(p, md);
            if let Some(rw) = nat {
                if !crate::ct::apply_nat(p, rw, v6, &md.orig, true) {
                    self.stats.rewrite_errors += 1;
                }
                keys_hold &= !rekey
                    || crate::ct::rekey_nat(p, rw, v6, &md.orig, &mut self.keys[usize::from(i)]);
            }
        }
        for &(i, mark, label) in &self.ct_ml {
            crate::ct::set_mark_label(&mut pkts[usize::from(i)], mark, label);
        }
        let mut bits = not_ip;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            self.ct_not_ip(&mut batch.packets_mut()[i], args.zone);
        }
        if batch.len() > MAX_BURST {
            frags |= self.ct_past_burst(args, batch, now);
            // Those packets' keys were not made again.
            keys_hold &= !(rekey && nat);
        }
        self.stats.ct_packets += batch.len() as u64;
        if frags {
            self.ct_fragments(args, batch, now);
        }
        !frags && keys_hold
    }

    /// A packet that is not IP through `ct()`: `+trk+inv`, counted.
    pub(super) fn ct_not_ip(&mut self, p: &mut Packet, zone: u16) {
        let md = conntrack::CtMeta {
            state: conntrack::state::TRK | conntrack::state::INV,
            zone,
            ..Default::default()
        };
        crate::ct::store(p, &md);
        self.stats.ct_not_ip += 1;
    }

    /// The packets of a `ct()` batch past a burst's worth (a batch that grew): one at a time.
    /// Returns whether there are fragments among them.
    #[cold]
    pub(super) fn ct_past_burst(
        &mut self,
        args: &conntrack::CtArgs,
        batch: &mut Batch,
        now: u64,
    ) -> bool {
        let mut frags = false;
        for p in &mut batch.packets_mut()[MAX_BURST..] {
            match crate::ct::ip_version(p) {
                None => self.ct_not_ip(p, args.zone),
                Some(v6) if crate::ct::maybe_fragment(p, v6) => frags = true,
                Some(v6) => {
                    self.ct_one(args, p, v6, None, now);
                }
            }
        }
        frags
    }

    /// Tracks one packet (or the first fragment of a datagram, `frag_l4_len` its L4 length)
    /// and applies any NAT; returns its metadata and the rewrite, for a datagram's other
    /// fragments.
    pub(super) fn ct_one(
        &mut self,
        args: &conntrack::CtArgs,
        p: &mut Packet,
        v6: bool,
        frag_l4_len: Option<usize>,
        now: u64,
    ) -> (conntrack::CtMeta, Option<conntrack::NatRewrite>) {
        let ct = self
            .conntrack
            .get_or_insert_with(|| std::sync::Arc::new(conntrack::Conntrack::new()));
        let mut md = conntrack::CtMeta::default();
        let pkt = conntrack::CtPacket {
            frame: p.data(),
            l3: usize::from(p.meta.l3),
            v6,
            frag_l4_len,
            // As in `conntrack` above: checked already, or no check needed.
            verified: p.meta.ct_state != 0 || crate::ct::csum_trusted(p, v6),
            natted: natted(p, args.zone),
        };
        let nat = ct.process(&mut self.ct_cache, &pkt, &mut md, args, now);
        crate::ct::store(p, &md);
        if let Some(rw) = &nat
            && !crate::ct::apply_nat(p, rw, v6, &md.orig, true)
        {
            self.stats.rewrite_errors += 1;
        }
        (md, nat)
    }

    /// The fragments of a `ct()` batch: into the reassembler; the fragments of datagrams
    /// they complete come back at the end of the batch, tracked.
    #[inline(never)]
    pub(super) fn ct_fragments(&mut self, args: &conntrack::CtArgs, batch: &mut Batch, now: u64) {
        let mut done = Vec::new();
        // Not `unwrap_or_default`: see `copy_batch`.
        #[allow(clippy::unwrap_or_default)]
        let mut keep = self.spare.pop().unwrap_or_else(Batch::new);
        for p in batch.drain() {
            // The first pass tracked everything else (NAT does not touch what this reads).
            let Some(v6) =
                crate::ct::ip_version(&p).filter(|&v6| crate::ct::maybe_fragment(&p, v6))
            else {
                keep.push(p);
                continue;
            };
            let l3 = usize::from(p.meta.l3);
            match self.reasm.push(p, l3, v6, args.zone, now) {
                conntrack::frag::Verdict::NotFragment(mut p, _) => {
                    self.ct_one(args, &mut p, v6, None, now);
                    keep.push(p);
                }
                conntrack::frag::Verdict::Held => self.stats.ct_frags_held += 1,
                conntrack::frag::Verdict::Complete(dg) => done.push(dg),
                conntrack::frag::Verdict::Drop(p, _) => {
                    self.stats.ct_frag_drops += 1;
                    self.pool.free(p);
                }
                conntrack::frag::Verdict::DropDatagram(ps, _) => {
                    for p in ps {
                        self.stats.ct_frag_drops += 1;
                        self.pool.free(p);
                    }
                }
            }
        }
        for dg in done {
            let mut frags = dg.frags.into_iter();
            let Some(mut first) = frags.next() else {
                continue;
            };
            let (md, nat) = self.ct_one(args, &mut first, dg.ipv6, Some(dg.l4_len), now);
            keep.push(first);
            for mut p in frags {
                crate::ct::store(&mut p, &md);
                if let Some(rw) = &nat
                    && !crate::ct::apply_nat(&mut p, rw, dg.ipv6, &md.orig, false)
                {
                    self.stats.rewrite_errors += 1;
                }
                keep.push(p);
            }
        }
        std::mem::swap(batch, &mut keep);
        self.recycle(keep);
    }
}

/// Whether every packet of `batch` (a burst at most) is IP, not a fragment, and keeps what an
/// earlier `ct()` of the zone found in the PMD's cache (and, for a `ct(nat)`, translated): what
/// `ct(args)` leaves as it is, packet by packet, in [`Pmd::conntrack`]'s loop.
#[inline]
fn all_kept(batch: &Batch, args: &conntrack::CtArgs, nat: bool) -> bool {
    let writes = args.writes_mark_or_label();
    batch.len() <= MAX_BURST
        && batch.packets().iter().all(|p| {
            kept(p, args, writes) && (!nat || natted(p, args.zone)) && {
                let (frame, l3) = (p.data(), p.meta.l3);
                crate::ct::version_in(frame, l3)
                    .is_some_and(|v6| !crate::ct::fragment_in(frame, usize::from(l3), v6))
            }
        })
}

/// Whether an earlier `ct()` of `args`' zone found the packet's connection in the PMD's cache
/// and, when `args` commits a mark or label (`writes`), the packet shows what the commit makes
/// of them already.
#[inline(always)]
fn kept(p: &Packet, args: &conntrack::CtArgs, writes: bool) -> bool {
    crate::ct::cached_ref(p, args.zone) && (!writes || crate::ct::commit_shown(p, args))
}

/// Whether an earlier `ct()` in `zone` translated the packet.
#[inline]
fn natted(p: &Packet, zone: u16) -> bool {
    p.meta.ct_state & (conntrack::state::SNAT | conntrack::state::DNAT) != 0
        && p.meta.ct_zone == zone
}
