//! IPv4 and IPv6 fragment reassembly in front of connection tracking (OVS's `lib/ipf.c`).
//!
//! The tracker needs a datagram's L4 header and its full length, and only the first fragment
//! carries the one while no fragment knows the other. [`Reassembler::push`] holds fragments until
//! their datagram is complete and then hands back *all the original fragments*, in offset order,
//! with what the tracker needs ([`Datagram`]): the switch forwards the fragments it received, it
//! never emits a rebuilt packet. A datagram is keyed by (zone, source, destination, protocol,
//! identification) for IPv4 (RFC 791 §3.2) and by (zone, source, destination, identification)
//! for IPv6 (RFC 8200 §4.5, where the protocol is not part of the key).
//!
//! What is refused, and why ([`FragDrop`]):
//! - overlapping fragments discard the whole datagram, and the fragments that come after it until
//!   it would have expired (RFC 5722 for IPv6; the same for IPv4, as Linux does since
//!   CVE-2018-5391); an exact duplicate is dropped alone (RFC 5722 §4 allows it);
//! - a fragment that contradicts the datagram's end (a second last fragment with another end,
//!   data past the end) discards the datagram, as Linux's `ip_frag_queue` does;
//! - non-last fragments shorter than a minimum (OVS's `min_frag_size`), or whose data is not a
//!   multiple of 8 bytes (RFC 8200 §4.5), are dropped;
//! - the first fragment must hold the whole header chain up to and including the L4 header
//!   (RFC 7112 for IPv6; for IPv4 the tiny-fragment rule of RFC 1858);
//! - a datagram may not grow past 65535 bytes (RFC 791 / RFC 8200 payload length);
//! - the number of fragments held, overall and per datagram, is bounded.
//!
//! An IPv6 atomic fragment (offset 0, M clear; RFC 6946) is not a fragment: it comes back as
//! [`Verdict::NotFragment`] with its L4 offset past the fragment header.
//!
//! Cost: nothing is allocated per packet. A datagram owns one `Vec<T>`, which is moved into the
//! [`Datagram`] when it completes; its bookkeeping vector is recycled. Expiry walks a FIFO of
//! deadlines (all datagrams share one timeout), so [`Reassembler::expire`] touches only what is
//! due.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::fmt;

use wire::ipv6::{FRAGMENT_HEADER_LEN, HEADER_LEN as IPV6_HEADER_LEN};
use wire::{
    IpProtocol, Ipv4Packet, Ipv6ExtHeader, Ipv6FragmentHeader, Ipv6FragmentRepr, Ipv6Packet,
};

/// Largest IPv4 total length and IPv6 payload length (both 16-bit fields).
const MAX_IP_LEN: usize = 65535;

/// Reassembly limits. [`Default`] gives OVS's defaults (`lib/ipf.c`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FragConfig {
    /// Reassemble IPv4 fragments; when off they are refused as [`FragDrop::Disabled`].
    pub enabled_v4: bool,
    /// Reassemble IPv6 fragments.
    pub enabled_v6: bool,
    /// Fragments held at once, all datagrams together (OVS `nfrag_max`, 1000).
    pub max_frags: usize,
    /// Smallest IPv4 non-last fragment, IP header included (OVS `min_v4_frag_size`, 1200).
    pub min_frag_size_v4: usize,
    /// Smallest IPv6 non-last fragment, IPv6 header included (OVS `min_v6_frag_size`, 1280: the
    /// IPv6 minimum MTU, which every fragmenting sender can fill).
    pub min_frag_size_v6: usize,
    /// How long a datagram may wait for its fragments, from its first one (OVS 15 s).
    pub timeout_ms: u64,
    /// Fragments one datagram may have (OVS's IPv4 `max_v4_frag_list_size`: 65535 bytes split
    /// into minimum-size fragments, 58).
    pub max_frags_per_datagram: usize,
}

impl FragConfig {
    /// Smallest `min_frag_size_*` [`check`](Self::check) accepts (OVS's `*_FRAG_SIZE_LBOUND`).
    pub const MIN_FRAG_SIZE_LBOUND: usize = 400;
    /// Largest `max_frags` [`check`](Self::check) accepts (OVS `IPF_NFRAG_UBOUND`).
    pub const MAX_FRAGS_UBOUND: usize = 5000;

    /// Fragments needed to carry a 65535-byte IPv4 datagram in fragments of `min_frag_size`
    /// bytes with maximal headers: OVS's per-datagram bound.
    pub const fn v4_frags_per_datagram(min_frag_size: usize) -> usize {
        const MAX_HDR: usize = 60;
        let per = if min_frag_size > MAX_HDR + 8 {
            min_frag_size - MAX_HDR
        } else {
            8
        };
        (MAX_IP_LEN - MAX_HDR).div_ceil(per)
    }

    /// Checks values given by an operator against OVS's bounds. [`Reassembler`] itself takes
    /// any configuration (tests use small fragments); the control plane calls this first.
    pub fn check(&self) -> Result<(), FragConfigError> {
        if self.min_frag_size_v4 < Self::MIN_FRAG_SIZE_LBOUND
            || self.min_frag_size_v6 < Self::MIN_FRAG_SIZE_LBOUND
        {
            return Err(FragConfigError::MinFragSize);
        }
        if self.max_frags > Self::MAX_FRAGS_UBOUND {
            return Err(FragConfigError::MaxFrags);
        }
        if self.max_frags_per_datagram == 0 {
            return Err(FragConfigError::MaxFragsPerDatagram);
        }
        if self.timeout_ms == 0 {
            return Err(FragConfigError::Timeout);
        }
        Ok(())
    }
}

impl Default for FragConfig {
    fn default() -> Self {
        FragConfig {
            enabled_v4: true,
            enabled_v6: true,
            max_frags: 1000,
            min_frag_size_v4: 1200,
            min_frag_size_v6: 1280,
            timeout_ms: 15_000,
            max_frags_per_datagram: Self::v4_frags_per_datagram(1200),
        }
    }
}

/// Why [`FragConfig::check`] refused a configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FragConfigError {
    /// A minimum fragment size is below [`FragConfig::MIN_FRAG_SIZE_LBOUND`].
    #[error("minimum fragment size below {}", FragConfig::MIN_FRAG_SIZE_LBOUND)]
    MinFragSize,
    /// `max_frags` is above [`FragConfig::MAX_FRAGS_UBOUND`].
    #[error("maximum fragments above {}", FragConfig::MAX_FRAGS_UBOUND)]
    MaxFrags,
    /// `max_frags_per_datagram` is zero.
    #[error("maximum fragments per datagram must be at least 1")]
    MaxFragsPerDatagram,
    /// `timeout_ms` is zero.
    #[error("fragment timeout must be positive")]
    Timeout,
}

/// Why a fragment was refused. Every refused fragment is counted under one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(usize)]
pub enum FragDrop {
    /// Reassembly is off for this IP version.
    Disabled,
    /// Truncated or inconsistent headers, a zero-length fragment, a non-last fragment whose
    /// data is not a multiple of 8 bytes, or a first fragment without its whole L4 header.
    Malformed,
    /// A non-last fragment shorter than the configured minimum.
    TooSmall,
    /// The datagram would exceed 65535 bytes.
    TooLong,
    /// `max_frags` fragments are already held.
    TableFull,
    /// The datagram reached `max_frags_per_datagram` (the whole datagram is discarded).
    TooManyFrags,
    /// The fragment overlaps one already held (the whole datagram is discarded).
    Overlap,
    /// The fragment contradicts the datagram's known end (the whole datagram is discarded).
    Inconsistent,
    /// An exact copy of a fragment already held (the datagram is kept).
    Duplicate,
    /// A fragment of a datagram already discarded, arriving before that datagram's deadline.
    Discarded,
    /// Held past the timeout without completing (from [`Reassembler::expire`]).
    Timeout,
}

impl FragDrop {
    /// Number of reasons.
    pub const COUNT: usize = 11;
    /// Every reason, in discriminant order.
    pub const ALL: [FragDrop; Self::COUNT] = [
        FragDrop::Disabled,
        FragDrop::Malformed,
        FragDrop::TooSmall,
        FragDrop::TooLong,
        FragDrop::TableFull,
        FragDrop::TooManyFrags,
        FragDrop::Overlap,
        FragDrop::Inconsistent,
        FragDrop::Duplicate,
        FragDrop::Discarded,
        FragDrop::Timeout,
    ];

    /// Counter name, for display.
    pub const fn name(self) -> &'static str {
        match self {
            FragDrop::Disabled => "disabled",
            FragDrop::Malformed => "malformed",
            FragDrop::TooSmall => "too_small",
            FragDrop::TooLong => "too_long",
            FragDrop::TableFull => "table_full",
            FragDrop::TooManyFrags => "too_many_frags",
            FragDrop::Overlap => "overlap",
            FragDrop::Inconsistent => "inconsistent",
            FragDrop::Duplicate => "duplicate",
            FragDrop::Discarded => "discarded",
            FragDrop::Timeout => "timeout",
        }
    }
}

impl fmt::Display for FragDrop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Counters of one IP version (OVS reports v4 and v6 apart: `dpctl/ipf-get-status`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FragCounters {
    /// Fragments taken into a datagram.
    pub accepted: u64,
    /// Datagrams completed.
    pub completed: u64,
    /// Fragments handed back in completed datagrams.
    pub completed_frags: u64,
    /// Fragments refused or discarded, by reason (indexed by `FragDrop as usize`).
    pub drops: [u64; FragDrop::COUNT],
}

impl FragCounters {
    /// Fragments dropped for `reason`.
    pub fn dropped(&self, reason: FragDrop) -> u64 {
        self.drops[reason as usize]
    }

    /// Adds `other` in (aggregation of per-thread counters on read).
    pub fn merge(&mut self, other: &FragCounters) {
        self.accepted += other.accepted;
        self.completed += other.completed;
        self.completed_frags += other.completed_frags;
        for (d, o) in self.drops.iter_mut().zip(other.drops) {
            *d += o;
        }
    }
}

/// Counters of a [`Reassembler`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FragStats {
    /// IPv4 fragments.
    pub v4: FragCounters,
    /// IPv6 fragments.
    pub v6: FragCounters,
}

impl FragStats {
    /// The counters of one IP version.
    pub fn family(&self, ipv6: bool) -> &FragCounters {
        if ipv6 { &self.v6 } else { &self.v4 }
    }

    /// Both versions added together.
    pub fn total(&self) -> FragCounters {
        let mut t = self.v4.clone();
        t.merge(&self.v6);
        t
    }

    /// Adds `other` in.
    pub fn merge(&mut self, other: &FragStats) {
        self.v4.merge(&other.v4);
        self.v6.merge(&other.v6);
    }

    fn family_mut(&mut self, ipv6: bool) -> &mut FragCounters {
        if ipv6 { &mut self.v6 } else { &mut self.v4 }
    }
}

/// A datagram being reassembled, as `dpctl/ipf-get-status -m` lists it (OVS's `ipf_list`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct FragList {
    /// IPv6 (else IPv4).
    pub ipv6: bool,
    /// Source address (IPv4 in the first 4 bytes).
    pub src: [u8; 16],
    /// Destination address (IPv4 in the first 4 bytes).
    pub dst: [u8; 16],
    /// Identification.
    pub ident: u32,
    /// Conntrack zone.
    pub zone: u16,
    /// IPv4 protocol; 0 for IPv6, whose key has none (as OVS's).
    pub proto: u8,
    /// Fragments held.
    pub n_frags: usize,
    /// The first fragment (offset 0) is held.
    pub first: bool,
    /// The last fragment (M clear) is held.
    pub last: bool,
}

impl FragList {
    fn of<T>(k: &DatagramKey, p: &Pending<T>) -> FragList {
        FragList {
            ipv6: k.ipv6,
            src: k.src,
            dst: k.dst,
            ident: k.ident,
            zone: k.zone,
            proto: k.proto,
            n_frags: p.pkts.len(),
            first: p.first.is_some(),
            last: p.total.is_some(),
        }
    }

    /// OVS's name for the list's state (`ipf_state_name`): which ends have arrived.
    pub fn state_name(&self) -> &'static str {
        match (self.first, self.last) {
            (true, true) => "first/last frag",
            (true, false) => "first frag",
            (false, true) => "last frag",
            (false, false) => "other frag",
        }
    }
}

/// A reassembler's report ([`Reassembler::status`]); the reports of several (one per PMD
/// thread) add up with [`FragStatus::merge`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FragStatus {
    /// The configuration in force.
    pub config: FragConfig,
    /// Fragments held.
    pub held: usize,
    /// Counters.
    pub stats: FragStats,
    /// Datagrams waiting, when asked for.
    pub lists: Vec<FragList>,
}

impl FragStatus {
    /// Adds `other`'s fragments, counters and lists in (the configuration stays `self`'s).
    pub fn merge(&mut self, other: FragStatus) {
        self.held += other.held;
        self.stats.merge(&other.stats);
        self.lists.extend(other.lists);
        self.lists.sort_unstable();
    }
}

/// Where a packet's fragment lies in its datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FragPos {
    /// Identification (IPv4's 16 bits, widened).
    pub ident: u32,
    /// Offset of this fragment's data in the datagram's fragmentable part, in bytes.
    pub offset: usize,
    /// More fragments follow (MF / M).
    pub more: bool,
    /// Offset in the frame of the fragment's data: after the IPv4 header, or after the IPv6
    /// fragment header.
    pub data_ofs: usize,
    /// Length of the fragment's data.
    pub data_len: usize,
    /// Bytes the reassembled datagram carries ahead of the fragmentable part: the IPv4 header
    /// length, or the IPv6 extension headers before the fragment header (the fixed header not
    /// counted, as in the payload length).
    pub unfrag_len: usize,
}

impl FragPos {
    /// End of the fragment's data in the datagram's fragmentable part.
    pub const fn end(&self) -> usize {
        self.offset + self.data_len
    }
}

/// What [`FragInfo::parse`] read from a packet's IP header (and IPv6 extension headers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FragInfo {
    /// Offset of the IP header in the frame.
    pub l3_ofs: usize,
    /// The upper-layer protocol. For a non-first IPv6 fragment, the fragment header's next
    /// header (only the first fragment's chain is authoritative).
    pub proto: IpProtocol,
    /// Offset of the L4 header in the frame: past the IPv4 header, or past every IPv6 extension
    /// header (an atomic fragment's fragment header included). For a non-first fragment there
    /// is no L4 header and this is the fragment's data offset.
    pub l4_ofs: usize,
    /// End of the IP packet in the frame (any L2 padding after it excluded).
    pub ip_end: usize,
    /// An IPv6 atomic fragment (fragment header with offset 0 and M clear; RFC 6946).
    pub atomic: bool,
    /// The fragment's position; `None` for a whole packet (atomic fragments included).
    pub frag: Option<FragPos>,
}

impl FragInfo {
    /// Parses the IPv4 (`ipv6 == false`) or IPv6 header at `l3` in `frame`. `Err` is always
    /// [`FragDrop::Malformed`]: a header that does not fit, a bad version or length field, a
    /// truncated extension header chain, two fragment headers, or a first fragment that stops
    /// before the end of its L4 header.
    pub fn parse(frame: &[u8], l3: usize, ipv6: bool) -> Result<FragInfo, FragDrop> {
        parse(frame, l3, ipv6).map(|p| p.info)
    }

    /// L4 bytes of this packet (for a whole packet, the datagram's L4 length).
    pub const fn l4_len(&self) -> usize {
        self.ip_end.saturating_sub(self.l4_ofs)
    }

    /// Whether this is the first fragment (offset 0, more to come).
    pub fn is_first(&self) -> bool {
        self.frag.is_some_and(|f| f.offset == 0)
    }
}

/// A complete datagram: its fragments and what tracking needs from them.
#[derive(Debug, PartialEq, Eq)]
pub struct Datagram<T> {
    /// The original fragments in offset order; `frags[0]` is the first fragment (offset 0).
    pub frags: Vec<T>,
    /// Offset of the IP header in `frags[0]`'s frame.
    pub l3_ofs: usize,
    /// Offset of the L4 header in `frags[0]`'s frame (after the IPv4 header, or after the IPv6
    /// extension headers, the fragment header and any fragmentable-part extension headers).
    pub l4_ofs: usize,
    /// L4 bytes of the whole datagram (L4 header included).
    pub l4_len: usize,
    /// Upper-layer protocol, from the first fragment.
    pub proto: IpProtocol,
    /// IPv6 datagram.
    pub ipv6: bool,
    /// Zone the datagram was reassembled in.
    pub zone: u16,
}

/// What [`Reassembler::push`] did with a packet.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict<T> {
    /// Not a fragment (IPv6 atomic fragments included): the packet is handed back to be tracked
    /// as it is, with what was parsed.
    NotFragment(T, FragInfo),
    /// Held; nothing to do now.
    Held,
    /// The packet completed its datagram.
    Complete(Datagram<T>),
    /// Refused: the packet is handed back to be dropped (or marked invalid); it was counted.
    Drop(T, FragDrop),
    /// The packet doomed its datagram: the datagram's fragments and, last, the packet itself,
    /// all counted under the reason and handed back to be dropped.
    DropDatagram(Vec<T>, FragDrop),
}

/// A datagram's identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct DatagramKey {
    src: [u8; 16],
    dst: [u8; 16],
    ident: u32,
    zone: u16,
    /// IPv4 protocol; 0 for IPv6.
    proto: u8,
    ipv6: bool,
}

/// One held fragment's place, beside its packet in `Pending::pkts`.
#[derive(Clone, Copy, Debug)]
struct Piece {
    start: usize,
    end: usize,
    data_ofs: usize,
    more: bool,
}

/// What the first fragment told about the datagram.
#[derive(Clone, Copy, Debug)]
struct FirstFrag {
    l3_ofs: usize,
    l4_ofs: usize,
    /// Bytes between the fragment data's start and the L4 header (IPv6 extension headers of the
    /// fragmentable part; 0 for IPv4).
    l4_skip: usize,
    unfrag_len: usize,
    proto: IpProtocol,
}

/// A datagram being reassembled, or a discarded one kept until its deadline so that its later
/// fragments are refused too (RFC 5722).
struct Pending<T> {
    serial: u64,
    /// Held fragments, sorted by offset; `pieces[i]` describes `pkts[i]`.
    pkts: Vec<T>,
    pieces: Vec<Piece>,
    held_bytes: usize,
    /// End of the datagram's data, once the last fragment came.
    total: Option<usize>,
    first: Option<FirstFrag>,
    discarded: bool,
}

/// A deadline in the expiry FIFO. Entries of datagrams that completed stay until popped or
/// compacted; `serial` tells them from a later datagram with the same key.
struct Expiry {
    deadline: u64,
    serial: u64,
    key: DatagramKey,
}

/// Spare bookkeeping vectors kept for reuse.
const SPARE_PIECES: usize = 64;

/// Fragment reassembly for one datapath (or one thread of it).
pub struct Reassembler<T> {
    cfg: FragConfig,
    table: HashMap<DatagramKey, Pending<T>>,
    expiry: VecDeque<Expiry>,
    spare: Vec<Vec<Piece>>,
    held: usize,
    discarded: usize,
    next_serial: u64,
    stats: FragStats,
}

impl<T: AsRef<[u8]>> Reassembler<T> {
    /// A reassembler with `cfg`, taken as is (see [`FragConfig::check`]).
    pub fn new(cfg: FragConfig) -> Self {
        Reassembler {
            cfg,
            table: HashMap::new(),
            expiry: VecDeque::new(),
            spare: Vec::new(),
            held: 0,
            discarded: 0,
            next_serial: 0,
            stats: FragStats::default(),
        }
    }

    /// Takes in one packet whose IPv4 (`ipv6 == false`) or IPv6 header is at `l3` in
    /// `pkt.as_ref()`, in conntrack zone `zone`, at `now_ms`.
    ///
    /// A packet whose IP header cannot be read is refused as [`FragDrop::Malformed`], fragment
    /// or not. Callers with a parsed flow key skip this call for packets that are not fragments.
    pub fn push(&mut self, pkt: T, l3: usize, ipv6: bool, zone: u16, now_ms: u64) -> Verdict<T> {
        let parsed = match parse(pkt.as_ref(), l3, ipv6) {
            Ok(p) => p,
            Err(reason) => return self.refuse(pkt, ipv6, reason),
        };
        let Some(pos) = parsed.info.frag else {
            return Verdict::NotFragment(pkt, parsed.info);
        };
        if let Err(reason) = self.check_fragment(&parsed.info, &pos, ipv6) {
            return self.refuse(pkt, ipv6, reason);
        }
        // Table full is judged before the lookup, as OVS does: a held fragment is never evicted
        // for a newcomer.
        if self.held >= self.cfg.max_frags {
            return self.refuse(pkt, ipv6, FragDrop::TableFull);
        }
        let key = DatagramKey {
            src: parsed.src,
            dst: parsed.dst,
            ident: pos.ident,
            zone,
            proto: if ipv6 { 0 } else { parsed.info.proto.0 },
            ipv6,
        };
        let cfg_max_per = self.cfg.max_frags_per_datagram;
        let p = match self.table.entry(key) {
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(v) => {
                let serial = self.next_serial;
                self.next_serial += 1;
                let deadline = now_ms.saturating_add(self.cfg.timeout_ms);
                self.expiry.push_back(Expiry {
                    deadline,
                    serial,
                    key,
                });
                v.insert(Pending {
                    serial,
                    pkts: Vec::with_capacity(4),
                    pieces: self.spare.pop().unwrap_or_default(),
                    held_bytes: 0,
                    total: None,
                    first: None,
                    discarded: false,
                })
            }
        };
        if p.discarded {
            return self.refuse(pkt, ipv6, FragDrop::Discarded);
        }
        let piece = Piece {
            start: pos.offset,
            end: pos.end(),
            data_ofs: pos.data_ofs,
            more: pos.more,
        };
        let idx = match place(p, &piece, pkt.as_ref(), cfg_max_per) {
            Ok(idx) => idx,
            Err(FragDrop::Duplicate) => return self.refuse(pkt, ipv6, FragDrop::Duplicate),
            Err(reason) => return self.discard(key, pkt, ipv6, reason),
        };
        p.pkts.insert(idx, pkt);
        p.pieces.insert(idx, piece);
        p.held_bytes += piece.end - piece.start;
        if !piece.more {
            p.total = Some(piece.end);
        }
        if piece.start == 0 {
            let info = &parsed.info;
            p.first = Some(FirstFrag {
                l3_ofs: info.l3_ofs,
                l4_ofs: info.l4_ofs,
                l4_skip: info.l4_ofs.saturating_sub(pos.data_ofs),
                unfrag_len: pos.unfrag_len,
                proto: info.proto,
            });
        }
        self.held += 1;
        self.stats.family_mut(ipv6).accepted += 1;
        // Pieces never overlap and all end within `total`, so as many bytes as `total` means
        // every byte is there.
        if p.total != Some(p.held_bytes) {
            return Verdict::Held;
        }
        self.finish(key, ipv6, zone)
    }

    /// Moves the fragments of datagrams whose deadline passed into `out` (counted as
    /// [`FragDrop::Timeout`]) for the caller to free, and forgets discarded datagrams whose
    /// deadline passed. Costs the number of datagrams due, not the table's size.
    pub fn expire(&mut self, now_ms: u64, out: &mut Vec<T>) {
        while let Some(e) = self.expiry.front() {
            if now_ms <= e.deadline {
                break;
            }
            let Some(e) = self.expiry.pop_front() else {
                break;
            };
            // A datagram that completed, or a later one under the same key, is not due.
            let mut p = match self.table.entry(e.key) {
                Entry::Occupied(o) if o.get().serial == e.serial => o.remove(),
                _ => continue,
            };
            if p.discarded {
                self.discarded -= 1;
                continue;
            }
            let n = p.pkts.len();
            self.held -= n;
            self.stats.family_mut(e.key.ipv6).drops[FragDrop::Timeout as usize] += n as u64;
            out.append(&mut p.pkts);
            self.recycle(p.pieces);
        }
    }

    /// Counters.
    pub fn stats(&self) -> &FragStats {
        &self.stats
    }

    /// Fragments held.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Datagrams being reassembled (discarded ones waiting for their deadline not counted).
    pub fn datagrams(&self) -> usize {
        self.table.len() - self.discarded
    }

    /// The configuration in force.
    pub fn config(&self) -> &FragConfig {
        &self.cfg
    }

    /// Replaces the configuration. Fragments already held stay (a lower `max_frags` refuses new
    /// ones until enough complete or expire); a new timeout applies to new datagrams.
    pub fn set_config(&mut self, cfg: FragConfig) {
        self.cfg = cfg;
    }

    /// What `dpctl/ipf-get-status` reports: the configuration, the counters, the fragments
    /// held and, with `lists`, the datagrams waiting for fragments (discarded ones, which hold
    /// none, left out), in key order.
    pub fn status(&self, lists: bool) -> FragStatus {
        let mut out = Vec::new();
        if lists {
            out.extend(
                self.table
                    .iter()
                    .filter(|(_, p)| !p.discarded)
                    .map(|(k, p)| FragList::of(k, p)),
            );
            out.sort_unstable();
        }
        FragStatus {
            config: self.cfg.clone(),
            held: self.held,
            stats: self.stats.clone(),
            lists: out,
        }
    }

    /// Checks that need nothing but the fragment: enabled, sizes, alignment, length.
    fn check_fragment(&self, info: &FragInfo, pos: &FragPos, ipv6: bool) -> Result<(), FragDrop> {
        let (enabled, min) = if ipv6 {
            (self.cfg.enabled_v6, self.cfg.min_frag_size_v6)
        } else {
            (self.cfg.enabled_v4, self.cfg.min_frag_size_v4)
        };
        if !enabled {
            return Err(FragDrop::Disabled);
        }
        if pos.data_len == 0 || (pos.more && !pos.data_len.is_multiple_of(8)) {
            return Err(FragDrop::Malformed);
        }
        if pos.more && info.ip_end - info.l3_ofs < min {
            return Err(FragDrop::TooSmall);
        }
        if pos.unfrag_len + pos.end() > MAX_IP_LEN {
            return Err(FragDrop::TooLong);
        }
        Ok(())
    }

    /// Hands the completed datagram at `key` out.
    fn finish(&mut self, key: DatagramKey, ipv6: bool, zone: u16) -> Verdict<T> {
        let Some(mut p) = self.table.remove(&key) else {
            return Verdict::Held;
        };
        let total = p.held_bytes;
        let first = p.first.filter(|f| f.unfrag_len + total <= MAX_IP_LEN);
        let pkts = std::mem::take(&mut p.pkts);
        self.held -= pkts.len();
        self.recycle(std::mem::take(&mut p.pieces));
        let Some(first) = first else {
            // The first fragment's header is longer than the last one's, and the datagram
            // overflows only with it.
            return self.bury(key, p, pkts, FragDrop::TooLong);
        };
        self.compact();
        let c = self.stats.family_mut(ipv6);
        c.completed += 1;
        c.completed_frags += pkts.len() as u64;
        Verdict::Complete(Datagram {
            frags: pkts,
            l3_ofs: first.l3_ofs,
            l4_ofs: first.l4_ofs,
            l4_len: total.saturating_sub(first.l4_skip),
            proto: first.proto,
            ipv6,
            zone,
        })
    }

    /// Discards the datagram at `key` because of `pkt`.
    fn discard(&mut self, key: DatagramKey, pkt: T, ipv6: bool, reason: FragDrop) -> Verdict<T> {
        let Some(mut p) = self.table.remove(&key) else {
            return self.refuse(pkt, ipv6, reason);
        };
        let mut pkts = std::mem::take(&mut p.pkts);
        self.held -= pkts.len();
        self.recycle(std::mem::take(&mut p.pieces));
        pkts.push(pkt);
        self.bury(key, p, pkts, reason)
    }

    /// Counts `pkts` as dropped for `reason` and leaves a discarded entry in the datagram's
    /// place until its deadline, bounded like the fragments themselves.
    fn bury(
        &mut self,
        key: DatagramKey,
        mut p: Pending<T>,
        pkts: Vec<T>,
        r: FragDrop,
    ) -> Verdict<T> {
        self.stats.family_mut(key.ipv6).drops[r as usize] += pkts.len() as u64;
        if self.discarded < self.cfg.max_frags {
            p.discarded = true;
            p.first = None;
            p.total = None;
            p.held_bytes = 0;
            self.discarded += 1;
            self.table.insert(key, p);
        } else {
            self.compact();
        }
        Verdict::DropDatagram(pkts, r)
    }

    fn refuse(&mut self, pkt: T, ipv6: bool, reason: FragDrop) -> Verdict<T> {
        self.stats.family_mut(ipv6).drops[reason as usize] += 1;
        Verdict::Drop(pkt, reason)
    }

    fn recycle(&mut self, mut pieces: Vec<Piece>) {
        if self.spare.len() < SPARE_PIECES && pieces.capacity() > 0 {
            pieces.clear();
            self.spare.push(pieces);
        }
    }

    /// Drops expiry entries of datagrams that are gone once they outnumber the live ones, so
    /// the FIFO stays proportional to the table whatever the completion rate.
    fn compact(&mut self) {
        if self.expiry.len() > 2 * self.table.len() + 64 {
            let table = &self.table;
            self.expiry
                .retain(|e| table.get(&e.key).is_some_and(|p| p.serial == e.serial));
        }
    }
}

/// Finds where `piece` goes among `p`'s pieces, or why it cannot.
fn place<T: AsRef<[u8]>>(
    p: &Pending<T>,
    piece: &Piece,
    frame: &[u8],
    max_per_datagram: usize,
) -> Result<usize, FragDrop> {
    let idx = p.pieces.partition_point(|q| q.start < piece.start);
    if let Some(q) = p.pieces.get(idx)
        && q.start == piece.start
        && q.end == piece.end
        && q.more == piece.more
    {
        let len = piece.end - piece.start;
        let held = p.pkts[idx].as_ref().get(q.data_ofs..q.data_ofs + len);
        if held.is_some() && held == frame.get(piece.data_ofs..piece.data_ofs + len) {
            return Err(FragDrop::Duplicate);
        }
    }
    let prev_overlaps = idx > 0 && p.pieces[idx - 1].end > piece.start;
    let next_overlaps = p.pieces.get(idx).is_some_and(|q| q.start < piece.end);
    if prev_overlaps || next_overlaps {
        return Err(FragDrop::Overlap);
    }
    let held_end = p.pieces.last().map_or(0, |q| q.end);
    let contradicts = match (p.total, piece.more) {
        (Some(total), true) => piece.end > total,
        (Some(total), false) => piece.end != total,
        (None, true) => false,
        (None, false) => held_end > piece.end,
    };
    if contradicts {
        return Err(FragDrop::Inconsistent);
    }
    if p.pieces.len() >= max_per_datagram {
        return Err(FragDrop::TooManyFrags);
    }
    Ok(idx)
}

/// A parsed packet: what is public, and the addresses of the key.
struct Parsed {
    info: FragInfo,
    src: [u8; 16],
    dst: [u8; 16],
}

/// Smallest L4 header the tracker reads, which a first fragment must hold whole.
fn min_l4_len(proto: IpProtocol) -> usize {
    match proto {
        IpProtocol::TCP => 20,
        IpProtocol::SCTP => 12,
        IpProtocol::UDP | IpProtocol::ICMP | IpProtocol::ICMPV6 => 8,
        _ => 0,
    }
}

fn parse(frame: &[u8], l3: usize, ipv6: bool) -> Result<Parsed, FragDrop> {
    let ip = frame.get(l3..).ok_or(FragDrop::Malformed)?;
    if ipv6 {
        parse_v6(ip, l3)
    } else {
        parse_v4(ip, l3)
    }
}

fn parse_v4(ip: &[u8], l3: usize) -> Result<Parsed, FragDrop> {
    let p = Ipv4Packet::new_checked(ip).map_err(|_| FragDrop::Malformed)?;
    let hlen = p.header_len();
    let total = usize::from(p.total_len());
    let proto = p.protocol();
    let mut src = [0; 16];
    let mut dst = [0; 16];
    src[..4].copy_from_slice(&p.src_addr().octets());
    dst[..4].copy_from_slice(&p.dst_addr().octets());
    let offset = usize::from(p.frag_offset()) * 8;
    let more = p.more_frags();
    let frag = (more || offset != 0).then_some(FragPos {
        ident: u32::from(p.ident()),
        offset,
        more,
        data_ofs: l3 + hlen,
        data_len: total - hlen,
        unfrag_len: hlen,
    });
    if offset == 0 && more && total - hlen < min_l4_len(proto) {
        return Err(FragDrop::Malformed);
    }
    let info = FragInfo {
        l3_ofs: l3,
        proto,
        l4_ofs: l3 + hlen,
        ip_end: l3 + total,
        atomic: false,
        frag,
    };
    Ok(Parsed { info, src, dst })
}

fn parse_v6(ip: &[u8], l3: usize) -> Result<Parsed, FragDrop> {
    let p = Ipv6Packet::new_checked(ip).map_err(|_| FragDrop::Malformed)?;
    let plen = usize::from(p.payload_len());
    let src = p.src_addr().octets();
    let dst = p.dst_addr().octets();
    let payload = &ip[IPV6_HEADER_LEN..IPV6_HEADER_LEN + plen];
    let base = l3 + IPV6_HEADER_LEN;
    let mut next = p.next_header();
    // A jumbogram (payload length 0) cannot be fragmented; leave it to the tracker.
    if plen == 0 {
        let info = FragInfo {
            l3_ofs: l3,
            proto: next,
            l4_ofs: base,
            ip_end: base,
            atomic: false,
            frag: None,
        };
        return Ok(Parsed { info, src, dst });
    }
    // Walk the chain; each step consumes at least 8 bytes, so the loop ends.
    let mut off = 0;
    let mut frag: Option<(Ipv6FragmentRepr, usize)> = None;
    loop {
        let rest = payload.get(off..).ok_or(FragDrop::Malformed)?;
        match next {
            IpProtocol::HOPOPT | IpProtocol::IPV6_ROUTE | IpProtocol::IPV6_OPTS => {
                let h = Ipv6ExtHeader::new_checked(rest).map_err(|_| FragDrop::Malformed)?;
                next = h.next_header();
                off += h.header_len();
            }
            IpProtocol::IPV6_FRAG => {
                if frag.is_some() {
                    return Err(FragDrop::Malformed);
                }
                let h = Ipv6FragmentHeader::new_checked(rest).map_err(|_| FragDrop::Malformed)?;
                let f = Ipv6FragmentRepr::parse(&h).map_err(|_| FragDrop::Malformed)?;
                frag = Some((f, off));
                off += FRAGMENT_HEADER_LEN;
                next = f.next_header;
                if f.frag_offset != 0 {
                    // What follows is the middle of the datagram, not a header.
                    break;
                }
            }
            _ => break,
        }
    }
    // Every header walked was checked to fit, so this holds; the subtractions below rely on it.
    if off > plen {
        return Err(FragDrop::Malformed);
    }
    let ip_end = base + plen;
    let mut info = FragInfo {
        l3_ofs: l3,
        proto: next,
        l4_ofs: base + off,
        ip_end,
        atomic: false,
        frag: None,
    };
    let Some((f, frag_hdr_ofs)) = frag else {
        return Ok(Parsed { info, src, dst });
    };
    let offset = usize::from(f.frag_offset) * 8;
    if offset == 0 && !f.more_frags {
        info.atomic = true;
        return Ok(Parsed { info, src, dst });
    }
    let data_ofs = base + frag_hdr_ofs + FRAGMENT_HEADER_LEN;
    if offset == 0 && ip_end - info.l4_ofs < min_l4_len(next) {
        return Err(FragDrop::Malformed);
    }
    info.frag = Some(FragPos {
        ident: f.ident,
        offset,
        more: f.more_frags,
        data_ofs,
        data_len: ip_end - data_ofs,
        unfrag_len: frag_hdr_ofs,
    });
    Ok(Parsed { info, src, dst })
}

#[cfg(test)]
mod tests {
    use super::*;

    const _: () = {
        const fn send<T: Send>() {}
        send::<Reassembler<Vec<u8>>>();
    };

    #[test]
    fn defaults_are_ovs() {
        let c = FragConfig::default();
        assert_eq!(
            (
                c.max_frags,
                c.min_frag_size_v4,
                c.min_frag_size_v6,
                c.timeout_ms
            ),
            (1000, 1200, 1280, 15_000)
        );
        // DIV_ROUND_UP(65535 - 60, 1200 - 60) in ipf_init.
        assert_eq!(c.max_frags_per_datagram, 58);
        assert_eq!(c.check(), Ok(()));
        let low = FragConfig {
            min_frag_size_v4: 399,
            ..c.clone()
        };
        assert_eq!(low.check(), Err(FragConfigError::MinFragSize));
        let many = FragConfig {
            max_frags: 5001,
            ..c
        };
        assert_eq!(many.check(), Err(FragConfigError::MaxFrags));
    }

    #[test]
    fn drop_names_are_distinct_and_ordered() {
        for (i, r) in FragDrop::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
            assert_eq!(r.to_string(), r.name());
        }
        let mut names: Vec<_> = FragDrop::ALL.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FragDrop::COUNT);
    }

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn small() -> FragConfig {
        FragConfig {
            min_frag_size_v4: 0,
            min_frag_size_v6: 0,
            ..FragConfig::default()
        }
    }

    // orig = IP(src="10.0.0.1", dst="10.0.0.2", id=0x1234)/UDP(sport=1234, dport=5678)/Raw(bytes(range(64)))
    // [Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")/f for f in fragment(orig, fragsize=24)]
    // scapy: len(orig[UDP]) == 72; the UDP header starts at 14 + orig.ihl * 4 == 34.
    const V4_F0: &str = concat!(
        "02000000000202000000000108004500002c123420004011348b0a0000010a00000204d2162e0048ec57000102030405",
        "060708090a0b0c0d0e0f",
    );
    const V4_F1: &str = concat!(
        "02000000000202000000000108004500002c12342003401134880a0000010a000002101112131415161718191a1b1c1d",
        "1e1f2021222324252627",
    );
    const V4_F2: &str = concat!(
        "02000000000202000000000108004500002c12340006401154850a0000010a00000228292a2b2c2d2e2f303132333435",
        "363738393a3b3c3d3e3f",
    );
    // raw(orig[UDP])
    const V4_L4: &str = concat!(
        "04d2162e0048ec57000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324252627",
        "28292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f",
    );

    // orig6 = IPv6(src="2001:db8::1", dst="2001:db8::2")/IPv6ExtHdrHopByHop()/IPv6ExtHdrRouting()
    //     /IPv6ExtHdrFragment(id=0xabcdef01)/IPv6ExtHdrDestOpt()/UDP(sport=1234, dport=5678)
    //     /Raw(bytes(range(100)))
    // [Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")/f for f in fragment6(orig6, 120)]
    // scapy: len(IPv6(raw(orig6))[UDP]) == 108; in the first fragment, re-parsed,
    // len(first) - len(first[UDP]) == 86 (14 + 40 + hop-by-hop 8 + routing 8 + fragment 8 +
    // destination options 8, the last in the fragmentable part).
    const V6_F0: &str = concat!(
        "02000000000202000000000186dd600000000050004020010db800000000000000000000000120010db8000000000000",
        "0000000000022b000104000000002c000000000000003c000001abcdef01110001040000000004d2162e006cecd30001",
        "02030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324252627",
    );
    const V6_F1: &str = concat!(
        "02000000000202000000000186dd600000000050004020010db800000000000000000000000120010db8000000000000",
        "0000000000022b000104000000002c000000000000003c000039abcdef0128292a2b2c2d2e2f30313233343536373839",
        "3a3b3c3d3e3f404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f",
    );
    const V6_F2: &str = concat!(
        "02000000000202000000000186dd60000000001c004020010db800000000000000000000000120010db8000000000000",
        "0000000000022b000104000000002c000000000000003c000070abcdef0160616263",
    );
    // raw(IPv6(raw(orig6))[UDP])
    const V6_L4: &str = concat!(
        "04d2162e006cecd3000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324252627",
        "28292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f5051525354555657",
        "58595a5b5c5d5e5f60616263",
    );

    // Ether(raw(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
    //     /IPv6(src="2001:db8::1", dst="2001:db8::2")/IPv6ExtHdrFragment(id=7)/TCP(sport=80, dport=1234)))
    // scapy: len(at) - len(at[TCP]) == 62, len(at[TCP]) == 20.
    const V6_ATOMIC: &str = concat!(
        "02000000000202000000000186dd60000000001c2c4020010db800000000000000000000000120010db8000000000000",
        "0000000000020600000000000007005004d20000000000000000500220002f4c0000",
    );

    /// The datagram's L4 bytes, rebuilt from its fragments (what a tracker that reassembled would
    /// see), to compare with scapy's original.
    fn l4_bytes(d: &Datagram<Vec<u8>>) -> Vec<u8> {
        let mut data = Vec::new();
        for f in &d.frags {
            let pos = FragInfo::parse(f, 14, d.ipv6).unwrap().frag.unwrap();
            data.extend_from_slice(&f[pos.data_ofs..pos.data_ofs + pos.data_len]);
        }
        let first = FragInfo::parse(&d.frags[0], 14, d.ipv6)
            .unwrap()
            .frag
            .unwrap();
        data.split_off(d.l4_ofs - first.data_ofs)
    }

    fn run(r: &mut Reassembler<Vec<u8>>, frags: &[Vec<u8>], ipv6: bool) -> Datagram<Vec<u8>> {
        let (last, rest) = frags.split_last().unwrap();
        for f in rest {
            assert_eq!(r.push(f.clone(), 14, ipv6, 0, 0), Verdict::Held);
        }
        match r.push(last.clone(), 14, ipv6, 0, 0) {
            Verdict::Complete(d) => d,
            v => panic!("expected completion, got {v:?}"),
        }
    }

    /// Every order of three fragments: in order, reversed, first last, last first, ...
    const ORDERS: [[usize; 3]; 6] = [
        [0, 1, 2],
        [2, 1, 0],
        [1, 2, 0],
        [2, 0, 1],
        [0, 2, 1],
        [1, 0, 2],
    ];

    #[test]
    fn scapy_v4_every_order() {
        let frags = [unhex(V4_F0), unhex(V4_F1), unhex(V4_F2)];
        for order in ORDERS {
            let mut r = Reassembler::new(small());
            let pushed: Vec<_> = order.iter().map(|&i| frags[i].clone()).collect();
            let d = run(&mut r, &pushed, false);
            assert_eq!(d.frags, frags, "order {order:?}");
            assert_eq!((d.l3_ofs, d.l4_ofs, d.l4_len), (14, 34, 72));
            assert_eq!(d.proto, IpProtocol::UDP);
            assert_eq!(l4_bytes(&d), unhex(V4_L4));
            assert_eq!(r.held(), 0);
            assert_eq!(r.datagrams(), 0);
            assert_eq!(r.stats().v4.accepted, 3);
            assert_eq!(
                (r.stats().v4.completed, r.stats().v4.completed_frags),
                (1, 3)
            );
        }
    }

    #[test]
    fn scapy_v6_every_order() {
        let frags = [unhex(V6_F0), unhex(V6_F1), unhex(V6_F2)];
        for order in ORDERS {
            let mut r = Reassembler::new(small());
            let pushed: Vec<_> = order.iter().map(|&i| frags[i].clone()).collect();
            let d = run(&mut r, &pushed, true);
            assert_eq!(d.frags, frags, "order {order:?}");
            assert_eq!((d.l3_ofs, d.l4_ofs, d.l4_len), (14, 86, 108));
            assert_eq!(d.proto, IpProtocol::UDP);
            assert!(d.ipv6);
            assert_eq!(l4_bytes(&d), unhex(V6_L4));
            assert_eq!(r.stats().v6.completed, 1);
            assert_eq!(r.stats().v4, FragCounters::default());
        }
    }

    #[test]
    fn scapy_v6_positions() {
        let f0 = FragInfo::parse(&unhex(V6_F0), 14, true).unwrap();
        let p0 = f0.frag.unwrap();
        // Fragment header after hop-by-hop and routing: 16 unfragmentable extension bytes.
        assert_eq!((p0.offset, p0.more, p0.ident), (0, true, 0xabcd_ef01));
        assert_eq!((p0.unfrag_len, p0.data_ofs, p0.data_len), (16, 78, 56));
        assert_eq!((f0.l4_ofs, f0.proto), (86, IpProtocol::UDP));
        let f2 = FragInfo::parse(&unhex(V6_F2), 14, true).unwrap();
        let p2 = f2.frag.unwrap();
        assert_eq!((p2.offset, p2.more, p2.end()), (112, false, 116));
        // A non-first fragment names the fragment header's next header.
        assert_eq!(f2.proto, IpProtocol::IPV6_OPTS);
    }

    #[test]
    fn scapy_v6_atomic_is_not_a_fragment() {
        let mut r = Reassembler::new(FragConfig::default());
        let pkt = unhex(V6_ATOMIC);
        let Verdict::NotFragment(back, info) = r.push(pkt.clone(), 14, true, 0, 0) else {
            panic!("atomic fragment held or dropped");
        };
        assert_eq!(back, pkt);
        assert!(info.atomic);
        assert_eq!(info.frag, None);
        assert_eq!(
            (info.l4_ofs, info.l4_len(), info.proto),
            (62, 20, IpProtocol::TCP)
        );
        assert_eq!(r.held(), 0);
    }

    #[test]
    fn scapy_duplicate_is_dropped_alone() {
        let mut r = Reassembler::new(small());
        let f = [unhex(V4_F0), unhex(V4_F1), unhex(V4_F2)];
        assert_eq!(r.push(f[1].clone(), 14, false, 0, 0), Verdict::Held);
        assert_eq!(
            r.push(f[1].clone(), 14, false, 0, 0),
            Verdict::Drop(f[1].clone(), FragDrop::Duplicate)
        );
        assert_eq!(r.push(f[0].clone(), 14, false, 0, 0), Verdict::Held);
        assert!(matches!(
            r.push(f[2].clone(), 14, false, 0, 0),
            Verdict::Complete(_)
        ));
        assert_eq!(r.stats().v4.dropped(FragDrop::Duplicate), 1);
    }

    #[test]
    fn status_lists_waiting_datagrams_with_ovs_states() {
        let mut r = Reassembler::new(small());
        // IPv4: the last fragment, then the first; IPv6: a middle one only.
        r.push(unhex(V4_F2), 14, false, 5, 0);
        assert_eq!(r.status(true).lists[0].state_name(), "last frag");
        r.push(unhex(V4_F0), 14, false, 5, 0);
        r.push(unhex(V6_F1), 14, true, 0, 0);
        let st = r.status(true);
        assert_eq!(st.held, 3);
        assert_eq!(st.stats.v4.accepted, 2);
        assert_eq!(st.config, small());
        let mut src = [0; 16];
        src[..4].copy_from_slice(&[10, 0, 0, 1]);
        let mut dst = [0; 16];
        dst[..4].copy_from_slice(&[10, 0, 0, 2]);
        assert_eq!(
            st.lists[0],
            FragList {
                ipv6: false,
                src,
                dst,
                ident: 0x1234,
                zone: 5,
                proto: 17,
                n_frags: 2,
                first: true,
                last: true,
            }
        );
        assert_eq!(st.lists[0].state_name(), "first/last frag");
        assert_eq!(
            (st.lists[1].ipv6, st.lists[1].ident, st.lists[1].proto),
            (true, 0xabcdef01, 0)
        );
        assert_eq!(st.lists[1].state_name(), "other frag");
        assert!(r.status(false).lists.is_empty());
        // Two threads' reports add up; the lists stay in key order.
        let mut sum = r.status(true);
        sum.merge(r.status(true));
        assert_eq!(
            (sum.held, sum.stats.v4.accepted, sum.lists.len()),
            (6, 4, 4)
        );
        assert!(sum.lists.is_sorted());
        // A completed datagram leaves the list.
        r.push(unhex(V4_F1), 14, false, 5, 0);
        let st = r.status(true);
        assert_eq!((st.held, st.lists.len()), (1, 1));
        assert_eq!(st.stats.v4.completed_frags, 3);
    }

    #[test]
    fn completed_datagrams_leave_no_growth() {
        let mut r = Reassembler::new(small());
        let f = [unhex(V4_F0), unhex(V4_F1), unhex(V4_F2)];
        for _ in 0..1000 {
            run(&mut r, &f, false);
        }
        // Deadlines of completed datagrams are compacted away; bookkeeping vectors are reused.
        assert!(r.expiry.len() <= 2 * r.table.len() + 65);
        assert_eq!(r.spare.len(), 1);
        assert_eq!(r.stats().v4.completed, 1000);
    }

    #[test]
    fn min_l4_lengths() {
        assert_eq!(min_l4_len(IpProtocol::TCP), 20);
        assert_eq!(min_l4_len(IpProtocol::UDP), 8);
        assert_eq!(min_l4_len(IpProtocol::GRE), 0);
    }
}
