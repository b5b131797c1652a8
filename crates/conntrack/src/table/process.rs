//! The per-packet path of `ct()` (OVS's `conntrack_execute` and `process_one`): a packet's
//! headers are checked and its tuple made ([`crate::key`]), its connection looked up in the
//! PMD's cache and then the table, and updated by its protocol's tracker (TCP's window, UDP's
//! and ICMP's first packet and reply); a packet of no connection is `+new` and, on commit,
//! starts one, within the limits, with its NAT translation and its ALG. The packet's
//! connection metadata ([`CtMeta`]) is written in place and the NAT rewrite returned for the
//! caller to apply.
//!
//! A connection committed with a helper (`helper=ftp|tftp`, [`crate::alg`]) has its packets
//! read for announcements of data connections, which become expectations; a new connection
//! that an expectation names is `+rel`, related to its parent. Under NAT the FTP helper also
//! rewrites the announced address and the connection keeps the sequence adjustment the
//! rewrite calls for ([`NatRewrite::alg`]).

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering::Relaxed};

use super::cache::Bucket;
use super::expiry::{EXPIRE_PER_BURST, note_expiry};
use super::nat::rewrite_for;
use super::{
    Conn, ConnRef, Conntrack, CtCache, Entry, Key, Kind, Locked, NatRewrite, NatSpec, TimeoutClass,
    Traits, shard_of,
};
use crate::alg::{self, Helper};
use crate::key::{self, ICMP, ICMPV6, Invalid, TCP, Tuple};
use crate::state::*;
use crate::tcp::{Segment, TcpConn, Update};

/// The packets [`Conntrack::process_batch`] parses before it tracks them in a large table
/// (`Conntrack::track_ahead`): a PMD's burst.
pub(super) const BURST: usize = 32;

/// [`Conntrack::process_batch`] asks for each packet's bucket and connection ahead of its turn
/// only in a table of more connections than this. Fewer stay in the core's caches with their
/// buckets (a connection's first two lines and its bucket's, about 750 KiB at this many), and
/// asking costs a packet more than it saves: `docs/performance.md` has the measurements.
const PREFETCH_FROM: u32 = 4096;

/// The arguments of one `ct()` action.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtArgs {
    pub zone: u16,
    pub commit: bool,
    pub force: bool,
    /// Set the connection's mark: value, mask.
    pub mark: Option<(u32, u32)>,
    /// Set the connection's label: value, mask.
    pub label: Option<(u128, u128)>,
    pub nat: Option<NatSpec>,
    /// The ALG a committed connection gets (`helper=ftp|tftp`).
    pub helper: Option<Helper>,
}

impl CtArgs {
    /// Whether the action is a commit that writes the mark or the label.
    #[inline(always)]
    pub fn writes_mark_or_label(&self) -> bool {
        self.commit && (self.mark.is_some() || self.label.is_some())
    }

    /// The mark and label such a commit makes of a connection's `(mark, label)`.
    #[inline(always)]
    pub fn mark_label_after(&self, (mark, label): (u32, u128)) -> (u32, u128) {
        (
            self.mark.map_or(mark, |(v, m)| (mark & !m) | (v & m)),
            self.label.map_or(label, |(v, m)| (label & !m) | (v & m)),
        )
    }
}

/// Connection metadata a packet carries: what `ct()` wrote, what later passes match.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtMeta {
    /// [`crate::state`] bits; 0 when never tracked.
    pub state: u8,
    pub zone: u16,
    pub mark: u32,
    pub label: u128,
    /// The connection's original-direction tuple (valid when `state` has TRK without INV).
    pub orig: Tuple,
    /// Where the PMD's cache holds the packet's connection (the low 32 bits of the hash of
    /// the tuple it was found by); 0 when it has none. A later `ct()` of the same packet in
    /// the same zone can take the connection from there ([`Conntrack::recheck`]).
    pub conn_ref: u32,
}

/// A packet as the tracker sees it.
#[derive(Clone, Copy, Debug)]
pub struct CtPacket<'a> {
    /// The frame.
    pub frame: &'a [u8],
    /// Offset of its IPv4 or IPv6 header.
    pub l3: usize,
    pub v6: bool,
    /// For the first fragment of a reassembled datagram: the datagram's L4 length.
    pub frag_l4_len: Option<usize>,
    /// Its headers and checksums were checked by an earlier `ct()` (skip the checks).
    pub verified: bool,
    /// An earlier `ct()` in the same zone translated it (NAT): look it up by its connection's
    /// translated tuple.
    pub natted: bool,
}

/// How a packet reaches [`Conntrack`]'s `update`, for the ALGs.
#[derive(Clone, Copy, Debug)]
enum AlgView<'a> {
    /// As it arrived: its TCP header and payload, which a helper reads.
    Fresh(&'a [u8]),
    /// Translated, ALG adjustments included, by an earlier `ct(nat)` of the zone: not read or
    /// adjusted again.
    Natted,
    /// Not read: not TCP, or the first fragment of a reassembled datagram (adjusted only).
    Skip,
}

impl Conntrack {
    /// Tracks one packet under `args`. Writes the packet's connection metadata into `md` and
    /// returns the NAT rewrite to apply, if any.
    pub fn process(
        &self,
        cache: &mut CtCache,
        pkt: &CtPacket<'_>,
        md: &mut CtMeta,
        args: &CtArgs,
        now: u64,
    ) -> Option<NatRewrite> {
        let parsed = Self::parse(pkt, args.zone);
        let mut rw = None;
        self.track(cache, pkt, &parsed, md, &mut rw, args, now);
        if !cache.pending.is_empty() {
            self.expire(cache, now, 0);
        }
        rw
    }

    /// [`Self::process`] for a batch: `out[i]` receives packet `i`'s metadata and rewrite. In a
    /// table of a few connections, which stay in the core's caches with their buckets, each
    /// packet is parsed and tracked in turn; in a larger one, the batch's connections are
    /// asked for ahead of their packets (`Self::track_ahead`).
    pub fn process_batch(
        &self,
        cache: &mut CtCache,
        pkts: &[CtPacket<'_>],
        out: &mut [(CtMeta, Option<NatRewrite>)],
        args: &CtArgs,
        now: u64,
    ) {
        let conns = self.n_conns.load(Relaxed);
        cache.fit(conns, pkts.len());
        if conns > PREFETCH_FROM {
            self.track_ahead(cache, pkts, out, args, now);
        } else {
            // Asked for ahead, connections at hand would cost each packet its bucket searched
            // twice and its parse kept for later, and save it nothing. The common packet's
            // parse is used as it is made (`Self::parse_fast`), in registers: stored and read
            // back at once, its few-byte fields read as wide words waited for their stores.
            // Any other packet is tracked as in a large table (`Self::track`).
            for (pkt, (md, nat)) in pkts.iter().zip(out) {
                if let Some(p) = Self::parse_fast(pkt, args.zone) {
                    if !self.track_cached(cache, pkt, &p, md, nat, args, now) {
                        self.process_parsed(cache, pkt, &Ok(p), md, nat, args, now);
                    }
                } else {
                    let parsed = Self::parse_general(pkt, args.zone);
                    self.track(cache, pkt, &parsed, md, nat, args, now);
                }
            }
        }
        self.expire(cache, now, EXPIRE_PER_BURST);
    }

    /// [`Self::process_batch`] in two steps a burst: every packet's headers are parsed and its
    /// cache bucket asked for, then each packet is tracked. A packet's connection is asked for
    /// as soon as its bucket can have arrived: during the parsing, `BUCKET_LEAD` packets after
    /// its own, and for the last packets of a burst `CONN_AHEAD` packets before its turn, so
    /// that the cache misses overlap each other and the work.
    #[inline(always)]
    fn track_ahead(
        &self,
        cache: &mut CtCache,
        pkts: &[CtPacket<'_>],
        out: &mut [(CtMeta, Option<NatRewrite>)],
        args: &CtArgs,
        now: u64,
    ) {
        const CONN_AHEAD: usize = 8;
        // About a memory access's latency (400 cycles here) of parsing.
        const BUCKET_LEAD: usize = 16;
        // The cache's scratch keeps a burst's worth of entries: nothing is allocated per burst.
        let mut parsed = std::mem::take(&mut cache.parsed);
        for (chunk, outs) in pkts.chunks(BURST).zip(out.chunks_mut(BURST)) {
            // Each packet's result is parsed into its place (`Self::parse_into`).
            let parsed = &mut parsed[..chunk.len()];
            for (j, pkt) in chunk.iter().enumerate() {
                let p = &mut parsed[j];
                Self::parse_into(pkt, args.zone, p);
                if let Ok(p) = p {
                    cache.prefetch_bucket(p.hash);
                }
                // Without this, a burst's first connections were asked for only once it was
                // parsed, and its first packet waited for its connection a whole miss.
                if let Some(Ok(q)) = j.checked_sub(BUCKET_LEAD).map(|k| &parsed[k]) {
                    cache.prefetch_conn(q.hash);
                }
            }
            // The packets whose connection was asked for: `parsed[..asked]`; the others
            // `CONN_AHEAD` packets before their turn at least.
            let asked = parsed.len().saturating_sub(BUCKET_LEAD);
            for p in parsed[asked..].iter().take(CONN_AHEAD).flatten() {
                cache.prefetch_conn(p.hash);
            }
            for (i, ((pkt, o), p)) in chunk.iter().zip(outs.iter_mut()).zip(&*parsed).enumerate() {
                if let Some(Ok(ahead)) = parsed.get(asked + i + CONN_AHEAD) {
                    cache.prefetch_conn(ahead.hash);
                }
                let (md, nat) = o;
                self.track(cache, pkt, p, md, nat, args, now);
            }
        }
        cache.parsed = parsed;
    }

    #[inline(always)]
    fn parse(pkt: &CtPacket<'_>, zone: u16) -> Result<key::Parsed, Invalid> {
        let mut out = Err(Invalid::L3);
        Self::parse_into(pkt, zone, &mut out);
        out
    }

    /// Parses `pkt` into `out`, the common case in line ([`Self::parse_fast`]). Each way of
    /// parsing stores its own result into `out`: a result made either way and then moved, the
    /// move read the tuple's few-byte fields back as wide words while their stores were still
    /// in the store buffer, and waited for them.
    #[inline(always)]
    fn parse_into(pkt: &CtPacket<'_>, zone: u16, out: &mut Result<key::Parsed, Invalid>) {
        if let Some(p) = Self::parse_fast(pkt, zone) {
            *out = Ok(p);
        } else {
            *out = Self::parse_general(pkt, zone);
        }
    }

    /// [`key::parse_fast`] of `pkt`.
    #[inline(always)]
    fn parse_fast(pkt: &CtPacket<'_>, zone: u16) -> Option<key::Parsed> {
        let checks = !pkt.verified;
        key::parse_fast(pkt.frame, pkt.l3, pkt.v6, zone, pkt.frag_l4_len, checks)
    }

    /// [`key::parse_general`] of `pkt`.
    #[inline(always)]
    fn parse_general(pkt: &CtPacket<'_>, zone: u16) -> Result<key::Parsed, Invalid> {
        let checks = !pkt.verified;
        key::parse_general(pkt.frame, pkt.l3, pkt.v6, zone, pkt.frag_l4_len, checks)
    }

    /// Tracks one parsed packet, any kind: its metadata into `md`, the NAT rewrite it needs (if
    /// any) into `nat` (out-parameters: what they hold is moved once, not through return
    /// values). Out of line: in the burst's loop its registers cost the commonest packets more
    /// than the call does the others.
    #[allow(clippy::too_many_arguments)]
    fn process_parsed(
        &self,
        cache: &mut CtCache,
        pkt: &CtPacket<'_>,
        parsed: &Result<key::Parsed, Invalid>,
        md: &mut CtMeta,
        nat: &mut Option<NatRewrite>,
        args: &CtArgs,
        now: u64,
    ) {
        md.zone = args.zone;
        // Set again below when the connection is cached (`md` may hold an earlier packet's).
        md.conn_ref = 0;
        *nat = None;
        let p = match parsed {
            Ok(p) => p,
            Err(e) => {
                self.counters.invalid[*e as usize].fetch_add(1, Relaxed);
                self.invalid(md);
                return;
            }
        };
        let t = &p.tuple;
        if p.related {
            return self.process_related(cache, t, md, nat, args, now);
        }
        // A TCP segment, and what an ALG reads of it (not a datagram's first fragment alone).
        let mut view = AlgView::Skip;
        let seg = if t.proto == TCP {
            let b = &pkt.frame[p.l4..(p.l4 + p.l4_len).min(pkt.frame.len())];
            if pkt.frag_l4_len.is_none() {
                view = AlgView::Fresh(b);
            }
            match Segment::parse_with_len(b, p.l4_len) {
                Some(s) => Some(s),
                None => {
                    self.counters.invalid[Invalid::L4 as usize].fetch_add(1, Relaxed);
                    self.invalid(md);
                    return;
                }
            }
        } else {
            None
        };
        if pkt.natted {
            // An earlier ct() of this zone translated the packet: its tuple is the other
            // direction's, reversed. It is tracked, not translated again.
            let r = t.reverse();
            let tracked = self.with_conn(cache, &r, r.hash(), now, |c, reply, _, pending| {
                let mut earlier = false;
                // Not translated again: the rewrite is dropped.
                let ok = self.update(
                    c,
                    !reply,
                    seg.as_ref(),
                    md,
                    &mut None,
                    args,
                    now,
                    AlgView::Natted,
                    &mut earlier,
                );
                if earlier {
                    note_expiry(pending, c);
                }
                ok
            });
            if tracked == Some(true) {
                return;
            }
        }
        let found = self.with_conn(
            cache,
            t,
            p.hash,
            now,
            #[inline(always)]
            |c, reply, cached, pending| {
                // `force`: a connection seen from this side is started anew from here.
                if reply && args.force && args.commit {
                    return Some(c.clone());
                }
                let mut earlier = false;
                if self.update(
                    c,
                    reply,
                    seg.as_ref(),
                    md,
                    nat,
                    args,
                    now,
                    view,
                    &mut earlier,
                ) {
                    if earlier {
                        note_expiry(pending, c);
                    }
                    md.conn_ref = if cached { p.hash as u32 } else { 0 };
                    None
                } else {
                    // The segment reopens a closed TCP connection: start a new one.
                    Some(c.clone())
                }
            },
        );
        let stale = match found {
            Some(None) => return,
            Some(Some(c)) => Some(c),
            None => None,
        };
        self.start(cache, p, seg.as_ref(), stale, md, nat, args, now);
    }

    /// Tracks one parsed packet. The commonest, a UDP or ICMP packet (not an error about
    /// another) of a connection in the PMD's cache, which no earlier `ct(nat)` translated,
    /// under an action without `force`, in line, as [`Self::process_parsed`] would; any other
    /// through that.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn track(
        &self,
        cache: &mut CtCache,
        pkt: &CtPacket<'_>,
        parsed: &Result<key::Parsed, Invalid>,
        md: &mut CtMeta,
        nat: &mut Option<NatRewrite>,
        args: &CtArgs,
        now: u64,
    ) {
        if let Ok(p) = parsed
            && self.track_cached(cache, pkt, p, md, nat, args, now)
        {
            return;
        }
        self.process_parsed(cache, pkt, parsed, md, nat, args, now);
    }

    /// [`Self::track`]'s in-line part: tracks a UDP or ICMP packet (not an error about another)
    /// of a connection in the PMD's cache, which no earlier `ct(nat)` translated, under an
    /// action without `force`. False for any other packet, of which nothing is written.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn track_cached(
        &self,
        cache: &mut CtCache,
        pkt: &CtPacket<'_>,
        p: &key::Parsed,
        md: &mut CtMeta,
        nat: &mut Option<NatRewrite>,
        args: &CtArgs,
        now: u64,
    ) -> bool {
        if p.related || p.tuple.proto == TCP || pkt.natted || args.force {
            return false;
        }
        let Some((c, reply)) =
            Bucket::of(&cache.buckets, p.hash).and_then(|b| b.get(p.hash, &p.tuple, now))
        else {
            return false;
        };
        md.zone = args.zone;
        *nat = None;
        let mut earlier = false;
        // A datagram never reopens its connection.
        let seg = None;
        self.update(
            &c,
            reply,
            seg,
            md,
            nat,
            args,
            now,
            AlgView::Skip,
            &mut earlier,
        );
        if earlier {
            note_expiry(&mut cache.pending, &c);
        }
        md.conn_ref = p.hash as u32;
        true
    }

    /// A packet of no connection, or of one it reopens (`stale`, taken out first): out of
    /// line, so that the path of known connections keeps its registers.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn start(
        &self,
        cache: &mut CtCache,
        p: &key::Parsed,
        seg: Option<&Segment>,
        stale: Option<ConnRef>,
        md: &mut CtMeta,
        nat: &mut Option<NatRewrite>,
        args: &CtArgs,
        now: u64,
    ) {
        if let Some(c) = stale {
            self.remove(&c);
        }
        *nat = self.new_conn(cache, p, seg, md, args, now);
    }

    /// An ICMP error (tuple `t`, of the packet it quotes): tracked by the connection of the
    /// quoted packet, in the other direction.
    #[cold]
    #[inline(never)]
    fn process_related(
        &self,
        cache: &mut CtCache,
        t: &Tuple,
        md: &mut CtMeta,
        nat: &mut Option<NatRewrite>,
        args: &CtArgs,
        now: u64,
    ) {
        // An ICMP error: the connection of the packet it carries, in the other direction.
        let r = t.reverse();
        let found = self.with_conn(cache, &r, r.hash(), now, |c, reply, _, _| {
            md.state = TRK | REL | if reply { RPL } else { 0 };
            md.mark = c.mark.load(Relaxed);
            md.label = c.label();
            md.orig = c.orig;
            // NAT: the error, and the packet it quotes, are translated as the connection's
            // own packets of their directions are.
            let f = c.nat_flags();
            if args.nat.is_some() && f != 0 {
                md.state |= f;
                *nat = Some(NatRewrite {
                    icmp_error: true,
                    ..rewrite_for(c, reply)
                });
            }
        });
        if found.is_none() {
            self.counters.related_unknown.fetch_add(1, Relaxed);
            self.invalid(md);
        }
    }

    /// A later `ct()` of a packet an earlier `ct()` of this zone already tracked (its
    /// connection at `conn_ref` in the cache, its original tuple `orig`): as OVS does for a
    /// packet whose connection is cached (`process_one_fast`), the packet is not tracked
    /// again; a commit only writes the mark and label. A `ct(nat)` is answered so only for a
    /// packet an earlier `ct(nat)` of the zone translated (`natted`), which is not translated
    /// again. Returns the connection's mark and label, or `None` when the connection is not at
    /// hand (or the action asks for `force`, or for NAT of a packet not translated yet): then
    /// [`Self::process`] the packet.
    #[inline]
    pub fn recheck(
        &self,
        cache: &CtCache,
        conn_ref: u32,
        orig: &Tuple,
        args: &CtArgs,
        natted: bool,
        now: u64,
    ) -> Option<(u32, u128)> {
        if conn_ref == 0 || (args.nat.is_some() && !natted) || args.force {
            return None;
        }
        // The number of buckets divides 2^32, so the bucket is the same as the full hash's.
        let c = cache.bucket(u64::from(conn_ref))?.orig_of(conn_ref)?;
        if !c.alive(now) || !c.orig.same(orig) {
            return None;
        }
        if args.writes_mark_or_label() {
            return Some(self.set_mark_label(&c, args));
        }
        Some((c.mark.load(Relaxed), c.label()))
    }

    fn invalid(&self, md: &mut CtMeta) -> Option<NatRewrite> {
        md.state = TRK | INV;
        md.mark = 0;
        md.label = 0;
        md.conn_ref = 0;
        None
    }

    /// Runs `f` on the alive connection of `t` (hash `h`): the connection, whether `t` is its
    /// reply direction, whether the PMD's cache holds it (at `h`'s slot: a later `ct()` of the
    /// packet finds it there, [`Self::recheck`]), and the cache's list of connections to queue
    /// for expiry. `None` when there is none. A cache hit takes no lock and no reference
    /// count; on a miss `f` runs under the read lock of the table's shard, and the connection
    /// goes into the cache only as [`CtCache::admit`] says.
    #[inline]
    fn with_conn<R>(
        &self,
        cache: &mut CtCache,
        t: &Tuple,
        h: u64,
        now: u64,
        f: impl FnOnce(&ConnRef, bool, bool, &mut Vec<(u64, u64, ConnRef)>) -> R,
    ) -> Option<R> {
        if let Some((c, reply)) = Bucket::of(&cache.buckets, h).and_then(|b| b.get(h, t, now)) {
            return Some(f(&c, reply, true, &mut cache.pending));
        }
        let map = self.shards[shard_of(h)].read().unwrap();
        let e = map.get(&Key { h, t: *t }).filter(|e| e.conn.alive(now))?;
        if !cache.admit(h) {
            return Some(f(&e.conn, e.reply, false, &mut cache.pending));
        }
        let e = e.clone();
        drop(map);
        Some(match Bucket::put(&mut cache.buckets, cache.size, h, e) {
            Ok((c, reply)) => f(&c, reply, true, &mut cache.pending),
            Err(e) => f(&e.conn, e.reply, false, &mut cache.pending),
        })
    }

    /// A packet of an existing connection: its metadata into `md`, its NAT rewrite (if any)
    /// into `nat`. False when the packet reopens the connection (TCP); then neither is
    /// written.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn update(
        &self,
        c: &Conn,
        reply: bool,
        seg: Option<&Segment>,
        md: &mut CtMeta,
        nat: &mut Option<NatRewrite>,
        args: &CtArgs,
        now: u64,
        view: AlgView<'_>,
        earlier: &mut bool,
    ) -> bool {
        let mut alg_rw = None;
        let est = match c.traits.kind() {
            Kind::Tcp => {
                let arrived = *seg.expect("TCP packets come with their segment");
                let mut seg = arrived;
                let mut l = c.locked.lock().unwrap();
                // An ALG resized earlier payload: the tracker sees each sender's own numbering.
                let adj = l.alg.as_deref().map(|a| a.adj).filter(|a| !a.is_zero());
                if let Some(a) = &adj {
                    match view {
                        AlgView::Natted => seg.seq = a.unshift_seq(reply, seg.seq),
                        _ if seg.flags & crate::tcp::ACK != 0 => {
                            seg.ack = seg.ack.wrapping_add_signed(a.ack_offset(reply, seg.ack));
                        }
                        _ => {}
                    }
                }
                let tcp = l.tcp.as_mut().expect("a TCP connection has its state");
                match tcp.update(&seg, reply, !self.tcp_seq_chk.load(Relaxed)) {
                    Update::Valid => {
                        let class = TimeoutClass::of_tcp(tcp.timeout());
                        if tcp.timer_refreshed() {
                            *earlier |= c.touch(class, now);
                        } else {
                            c.class.store(class as u8, Relaxed);
                        }
                        let est = tcp.established();
                        if c.traits.helper().is_some() || adj.is_some() {
                            let translate = args.nat.is_some() && c.nat_flags() != 0;
                            match self.alg_tcp(c, &mut l, reply, &arrived, view, translate, now) {
                                Ok(rw) => alg_rw = rw,
                                Err(()) => {
                                    drop(l);
                                    self.invalid(md);
                                    return true;
                                }
                            }
                        }
                        est
                    }
                    Update::Invalid => {
                        drop(l);
                        self.counters.tcp_invalid.fetch_add(1, Relaxed);
                        self.invalid(md);
                        return true;
                    }
                    Update::Reopen => return false,
                }
            }
            Kind::Udp | Kind::Icmp => {
                let seen = reply || c.reply_seen.load(Relaxed);
                if reply && !c.reply_seen.load(Relaxed) {
                    c.reply_seen.store(true, Relaxed);
                }
                let class = match (c.traits.kind(), seen) {
                    (Kind::Udp, true) => TimeoutClass::UdpMultiple,
                    (Kind::Udp, false) => TimeoutClass::UdpSingle,
                    (_, true) => TimeoutClass::IcmpReply,
                    (_, false) => TimeoutClass::IcmpFirst,
                };
                *earlier |= c.touch(class, now);
                if c.traits.helper() == Some(Helper::Tftp) && !reply {
                    self.tftp_expect(c, now);
                }
                seen
            }
        };
        let mut state = TRK | if est { EST } else { NEW };
        if reply {
            state |= RPL;
        }
        // A related connection keeps its parent's mark and label (OVS).
        (md.mark, md.label) = if args.writes_mark_or_label() && !c.traits.related() {
            self.set_mark_label(c, args)
        } else {
            (c.mark.load(Relaxed), c.label())
        };
        md.orig = c.orig;
        if c.traits.related() {
            state |= REL;
            md.orig = Self::parent_of(c);
        }
        if args.nat.is_some() {
            let f = c.nat_flags();
            if f != 0 {
                state |= f;
                *nat = Some(NatRewrite {
                    alg: alg_rw,
                    ..rewrite_for(c, reply)
                });
            }
        }
        md.state = state;
        true
    }

    /// The FTP helper's part of a valid TCP segment of `c` (whose lock is `l`): an
    /// announcement is recorded as an expectation; when the packet is translated
    /// (`translate`), the announced address is rewritten and the sequence numbers adjusted.
    /// `Err` for a malformed announcement (the packet is `+inv`).
    #[allow(clippy::too_many_arguments)]
    #[cold]
    fn alg_tcp(
        &self,
        c: &Conn,
        l: &mut Locked,
        reply: bool,
        seg: &Segment,
        view: AlgView<'_>,
        translate: bool,
        now: u64,
    ) -> Result<Option<alg::AlgRewrite>, ()> {
        let (mut edit, mut delta) = (None, 0);
        if let AlgView::Fresh(l4) = view
            && c.traits.helper() == Some(Helper::Ftp)
            && seg.payload_len != 0
        {
            let ctl = alg::Control {
                helper: Helper::Ftp,
                orig: &c.orig,
                reply_tuple: &c.reply,
                id: c.id,
                mark: c.mark.load(Relaxed),
                label: c.label_held(),
                reply,
                nat: translate,
            };
            let out = alg::inspect(&ctl, l4, now);
            if out.invalid {
                self.expectations.count(alg::AlgCounter::BadMessage);
                return Err(());
            }
            if out.incomplete {
                self.expectations.count(alg::AlgCounter::Incomplete);
            }
            if let Some(e) = out.expectation {
                self.expectations.insert(e, now);
            }
            (edit, delta) = (out.edit, out.delta);
        }
        if !translate || matches!(view, AlgView::Natted) {
            return Ok(None);
        }
        let a = l.alg.get_or_insert_with(Default::default);
        if edit.is_some() {
            a.adj.record(reply, seg.seq, delta);
        }
        if edit.is_none() && a.adj.is_zero() {
            return Ok(None);
        }
        Ok(Some(alg::AlgRewrite {
            payload: edit,
            seq: a.adj.seq_offset(reply, seg.seq),
            ack: if seg.flags & crate::tcp::ACK != 0 {
                a.adj.ack_offset(reply, seg.ack)
            } else {
                0
            },
        }))
    }

    /// The TFTP helper: a packet of the request's direction expects the server's answer.
    #[cold]
    fn tftp_expect(&self, c: &Conn, now: u64) {
        let ctl = alg::Control {
            helper: Helper::Tftp,
            orig: &c.orig,
            reply_tuple: &c.reply,
            id: c.id,
            mark: c.mark.load(Relaxed),
            label: c.label(),
            reply: false,
            nat: false,
        };
        if let Some(e) = alg::inspect(&ctl, &[], now).expectation {
            self.expectations.insert(e, now);
        }
    }

    /// A related connection's parent's original tuple (what it reports as its own).
    #[cold]
    fn parent_of(c: &Conn) -> Tuple {
        let l = c.locked.lock().unwrap();
        l.alg.as_ref().and_then(|a| a.parent).unwrap_or(c.orig)
    }

    /// A commit's `mark` and `label` writes, serialized by the connection's lock. Returns
    /// the mark and label after them (the packet's). A commit that finds them as it would
    /// write them (every packet's of an established connection, in OVN's pipelines) writes
    /// nothing and takes no lock.
    #[inline]
    fn set_mark_label(&self, c: &Conn, args: &CtArgs) -> (u32, u128) {
        let now = (c.mark.load(Relaxed), c.label());
        if args.mark_label_after(now) == now {
            return now;
        }
        Self::write_mark_label(c, args)
    }

    /// [`Self::set_mark_label`] when it changes them: under the connection's lock.
    #[cold]
    fn write_mark_label(c: &Conn, args: &CtArgs) -> (u32, u128) {
        let _l = c.locked.lock().unwrap();
        let (mark, label) = args.mark_label_after((c.mark.load(Relaxed), c.label_held()));
        if args.mark.is_some() {
            c.mark.store(mark, Relaxed);
        }
        if args.label.is_some() {
            c.store_label(label);
        }
        (mark, label)
    }

    /// A packet of no connection: `+new`, and committed when asked.
    #[inline(always)]
    fn new_conn(
        &self,
        cache: &mut CtCache,
        p: &key::Parsed,
        seg: Option<&Segment>,
        md: &mut CtMeta,
        args: &CtArgs,
        now: u64,
    ) -> Option<NatRewrite> {
        let (t, h) = (&p.tuple, p.hash);
        // The protocol state of a connection this packet starts, if it may start one: made
        // once, on the stack, and put on the heap only by a commit that needs a new box
        // (a segment tracked without commit, or refused at a limit, allocates nothing).
        let start = || -> Option<(Kind, Option<TcpConn>, TimeoutClass)> {
            Some(match t.proto {
                TCP => {
                    let c = TcpConn::new(seg?)?;
                    let class = TimeoutClass::of_tcp(c.timeout());
                    (Kind::Tcp, Some(c), class)
                }
                ICMP | ICMPV6 if key::icmp_is_request(t) => {
                    (Kind::Icmp, None, TimeoutClass::IcmpFirst)
                }
                ICMP | ICMPV6 => return None,
                // UDP, and other protocols tracked by addresses alone (OVS's "other").
                _ => (Kind::Udp, None, TimeoutClass::UdpFirst),
            })
        };
        let Some((kind, tcp, class)) = start() else {
            let c = if t.proto == TCP {
                &self.counters.tcp_invalid
            } else {
                &self.counters.invalid[Invalid::Unsupported as usize]
            };
            c.fetch_add(1, Relaxed);
            return self.invalid(md);
        };
        // An expectation names the connection: it is related to the expectation's parent.
        let exp = if self.expectations.is_empty() {
            None
        } else {
            self.expectations
                .find(t, now)
                .filter(|e| self.parent_alive(e, now))
        };
        md.state = TRK | NEW | if exp.is_some() { REL } else { 0 };
        md.mark = exp.as_ref().map_or(0, |e| e.mark);
        md.label = exp.as_ref().map_or(0, |e| e.label);
        md.orig = exp.as_ref().map_or(*t, |e| e.parent);
        if !args.commit {
            return None;
        }
        if !self.reserve(t.zone) {
            self.counters.limit_refused.fetch_add(1, Relaxed);
            return None;
        }
        let policy = self.policy_cached(cache, t.zone);
        let nat = args.nat.filter(|n| n.kind.is_some() && exp.is_none());
        // A related connection is translated as its parent's counterpart, by any `nat`.
        let exp_nat = exp.as_ref().filter(|_| args.nat.is_some());
        let helper = args.helper.filter(|h| h.proto() == t.proto);
        // A second try only for NAT: a concurrent commit may have taken the tuple picked.
        for attempt in 0..if nat.is_some() { 2 } else { 1 } {
            let mut reply = t.reverse();
            if let Some(e) = exp_nat {
                reply = e.nat_reply(t);
            }
            if let Some(n) = &nat {
                match self.nat_pick(t, n, now, attempt) {
                    Some(r) => reply = r,
                    None => {
                        self.release(t.zone);
                        self.counters.nat_exhausted.fetch_add(1, Relaxed);
                        return self.invalid(md);
                    }
                }
            }
            // A second attempt starts from the same state (the first one's connection went).
            let tcp = tcp.clone();
            let nat_action = match nat.and_then(|n| n.kind) {
                Some(crate::NatKind::Src) => crate::state::SNAT,
                Some(crate::NatKind::Dst) => crate::state::DNAT,
                None => 0,
            };
            let moved = super::nat::Moved::of(t, &reply);
            let nat_state = super::nat::nat_state(nat_action, kind, t, &reply, moved);
            let ms = policy.ms(class);
            let id = self.next_id.fetch_add(1, Relaxed);
            let (mark, label) = exp.as_ref().map_or((0, 0), |e| (e.mark, e.label));
            let alg = (exp.is_some() || helper.is_some()).then(|| {
                Box::new(alg::ConnAlg {
                    parent: exp.as_ref().map(|e| e.parent),
                    ..Default::default()
                })
            });
            // A connection of the PMD's pool is set up in place: no allocation.
            let mut pooled = cache.pool.pop();
            let conn = if let Some(c) = pooled.as_mut().and_then(ConnRef::get_mut) {
                c.orig = *t;
                c.reply = reply;
                c.id = id;
                c.traits = Traits::new(kind, helper, exp.is_some());
                *c.expires.get_mut() = now + ms;
                *c.refreshed.get_mut() = (now >> 10) as u32;
                c.queue = cache.queue as u8;
                c.nat = nat_state;
                c.moved = moved;
                *c.queued.get_mut() = now + ms;
                *c.dead.get_mut() = false;
                *c.reply_seen.get_mut() = false;
                *c.class.get_mut() = class as u8;
                *c.mark.get_mut() = mark;
                *c.labeled.get_mut() = label != 0;
                *c.label_words[0].get_mut() = label as u64;
                *c.label_words[1].get_mut() = (label >> 64) as u64;
                if !Arc::ptr_eq(&c.policy, &policy) {
                    c.policy = policy.clone();
                }
                let l = c
                    .locked
                    .get_mut()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                // The pooled connection's box, if it has one, takes the new state in place.
                match (&mut l.tcp, tcp) {
                    (Some(held), Some(tcp)) => **held = tcp,
                    (held, tcp) => *held = tcp.map(Box::new),
                }
                l.alg = alg;
                pooled.expect("a pooled connection")
            } else {
                ConnRef::new(Conn {
                    orig: *t,
                    reply,
                    id,
                    traits: Traits::new(kind, helper, exp.is_some()),
                    expires: AtomicU64::new(now + ms),
                    refreshed: AtomicU32::new((now >> 10) as u32),
                    queue: cache.queue as u8,
                    nat: nat_state,
                    moved,
                    queued: AtomicU64::new(now + ms),
                    dead: AtomicBool::new(false),
                    reply_seen: AtomicBool::new(false),
                    class: AtomicU8::new(class as u8),
                    mark: AtomicU32::new(mark),
                    labeled: AtomicBool::new(label != 0),
                    label_seq: AtomicU32::new(0),
                    policy: policy.clone(),
                    label_words: [
                        AtomicU64::new(label as u64),
                        AtomicU64::new((label >> 64) as u64),
                    ],
                    locked: Mutex::new(Locked {
                        tcp: tcp.map(Box::new),
                        alg,
                    }),
                })
            };
            (md.mark, md.label) = if exp.is_none() && (args.mark.is_some() || args.label.is_some())
            {
                self.set_mark_label(&conn, args)
            } else {
                (conn.mark.load(Relaxed), conn.label())
            };
            if self.insert(&conn, now).is_err() {
                if conn.dead.swap(true, Relaxed) && !self.reserve(t.zone) {
                    // A flush counted this one out already and no room is left.
                    self.counters.limit_refused.fetch_add(1, Relaxed);
                    md.mark = 0;
                    md.label = 0;
                    return None;
                }
                continue;
            }
            self.counters.committed.fetch_add(1, Relaxed);
            cache.pending.push((ms, now + ms, conn.clone()));
            if exp.is_some() {
                self.expectations.take_for(t, now);
            }
            if helper == Some(Helper::Tftp) {
                self.tftp_expect(&conn, now);
            }
            let nat_flags = conn.nat_flags();
            let rw = ((nat.is_some() || exp_nat.is_some()) && nat_flags != 0)
                .then(|| rewrite_for(&conn, false));
            // A connection the cache cannot hold is found in the table.
            if cache.put(h, Entry { conn, reply: false }).is_ok() {
                md.conn_ref = h as u32;
            }
            if rw.is_some() {
                md.state |= nat_flags;
            }
            return rw;
        }
        self.release(t.zone);
        self.counters.insert_conflicts.fetch_add(1, Relaxed);
        md.mark = 0;
        md.label = 0;
        None
    }
}
