//! Datapath actions in executable form.
//!
//! A megaflow's actions arrive as OVS datapath actions (`flow::odp::Action`, what
//! `dpctl/add-flow` and the slow path produce) and are compiled once, when the flow is
//! installed, into a [`DpAction`] list: set-field actions become masked writes with the mask
//! already expanded, so that executing them per packet is loads, masks and stores plus
//! incremental checksum updates.
//!
//! Header rewrites live in [`crate::rewrite`]; forwarding actions (output, recirculation,
//! clone, truncation, hash) are executed by the PMD, which owns the tx batches.

use std::net::{Ipv4Addr, Ipv6Addr};

use flow::key::VLAN_CFI;
use flow::odp::{Action, Attr, DpKey, HashAlg};

/// One executable datapath action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DpAction {
    /// Send to a datapath port.
    Output(u32),
    /// Truncate the packet to at most this many bytes for the next output only.
    Trunc(u32),
    /// Run the packet through the datapath again with this recirculation id.
    Recirc(u32),
    /// Send to the member of bond N (`lb_output(N)`) that the packet's 5-tuple hash picks
    /// ([`crate::bond`]); like an output, on copies unless it is the last action.
    LbOutput(u32),
    /// Decapsulate (`tnl_pop`) and run the packet through the datapath again as received on
    /// this tunnel port, with the outer headers' metadata (see [`crate::tunnel`]). Like an
    /// output, it takes the packets when it is the last action and copies them otherwise.
    TnlPop(u32),
    /// `push_eth` directly followed by `pop_mpls`, fused by [`compile`]: how an MPLS-over-L3
    /// tunnel's label is terminated (an L3 MPLS packet becomes an Ethernet frame of what the
    /// label carried). The new header is written over the label instead of being pushed and
    /// then moved forward; the result is the two actions' in sequence in every case.
    PushEthPopMpls {
        /// Source address of the pushed Ethernet header.
        src: [u8; 6],
        /// Destination address of the pushed Ethernet header.
        dst: [u8; 6],
        /// `pop_mpls`'s ethertype: what the popped label carried, written into the new header.
        eth_type: u16,
    },
    /// Push a tunnel header (`tnl_push`): the prebuilt template, with lengths, checksums and
    /// the UDP source port filled in per packet. Output is the next action's job.
    TnlPush(Box<TnlTemplate>),
    /// Send a copy to the slow path (`userspace(...)`, e.g. a packet-in for a controller), with
    /// the action's user data (its cookie: the bytes of `userdata(...)`, or the text of a typed
    /// cookie such as `controller(...)`); the packet goes on with the following actions. The
    /// copy goes to the PMD's [`crate::upcall_queue::UpcallQueue`].
    Userspace(Box<[u8]>),
    /// Set the datapath hash from the 5-tuple (`hash(l4(basis))`), symmetric when `sym`.
    Hash {
        /// `sym_l4`: both directions of a connection get the same hash.
        sym: bool,
        /// The seed the hash starts from.
        basis: u32,
    },
    /// Run these actions on a copy of the packet, then continue with the original.
    Clone(Box<[DpAction]>),
    /// Push a VLAN tag (`tci` without the CFI presence bit).
    PushVlan {
        /// The tag's ethertype: 0x8100 (802.1Q) or 0x88a8 (802.1ad).
        tpid: u16,
        /// PCP, DEI and VID as they go on the wire.
        tci: u16,
    },
    /// Pop the outer VLAN tag.
    PopVlan,
    /// Push an MPLS label stack entry (as on the wire) and set the ethertype.
    PushMpls {
        /// Label, traffic class, bottom-of-stack bit and TTL, in wire layout.
        lse: u32,
        /// The frame's new ethertype: 0x8847 (unicast) or 0x8848 (multicast).
        eth_type: u16,
    },
    /// Put an MPLS label stack entry in front of the whole packet (`add_mpls`, what OpenFlow's
    /// `encap(mpls)` becomes): whatever the packet was (an Ethernet frame too) becomes the
    /// payload of an L3 MPLS packet, packet type `(1, eth_type)`.
    AddMpls {
        /// Label, traffic class, bottom-of-stack bit and TTL, in wire layout.
        lse: u32,
        /// The packet type's ethertype: 0x8847 (unicast) or 0x8848 (multicast).
        eth_type: u16,
    },
    /// Pop the outer MPLS entry; the new ethertype says what follows.
    PopMpls {
        /// The ethertype of what follows the popped entry (an MPLS one if entries remain).
        eth_type: u16,
    },
    /// Masked write of the outer MPLS label stack entry.
    SetMpls {
        /// The bits to write, already masked.
        lse: u32,
        /// Which bits of the label stack entry are written.
        mask: u32,
    },
    /// Masked write of the Ethernet addresses.
    SetEth(SetEth),
    /// Make an L3 packet (packet_type `(1, ethertype)`) an Ethernet frame: prepend an
    /// Ethernet header with these addresses and the packet type's ethertype.
    PushEth {
        /// Source address of the new Ethernet header.
        src: [u8; 6],
        /// Destination address of the new Ethernet header.
        dst: [u8; 6],
    },
    /// Make an Ethernet frame an L3 packet: remove the Ethernet header and any VLAN tags; the
    /// packet type becomes `(1, ethertype)`.
    PopEth,
    /// Masked write of IPv4 fields, with checksum updates.
    SetIpv4(SetIpv4),
    /// Masked write of IPv6 fields, with transport checksum updates.
    SetIpv6(SetIpv6),
    /// Masked write of TCP, UDP or SCTP ports, with checksum updates.
    SetL4(SetL4),
    /// Masked write of the Ethernet/IPv4 ARP fields (`set(arp(...))`).
    SetArp(Box<SetArp>),
    /// Write of the ICMP or ICMPv6 type and code (`set(icmp(...))`, `set(icmpv6(...))`), with
    /// the checksum updated.
    SetIcmp(SetIcmp),
    /// Masked write of an IPv6 neighbour solicitation's or advertisement's target and
    /// link-layer address options (`set(nd(...))`), with the ICMPv6 checksum updated.
    SetNd(Box<SetNd>),
    /// Send through the connection tracker (`ct(...)`): sets the packet's connection state,
    /// zone, mark, label and tuple, commits, applies NAT. The packet goes on with the next
    /// action (a `recirc` to match on the result).
    Ct(Box<conntrack::CtArgs>),
    /// Forget the packet's connection state (`ct_clear`).
    CtClear,
    /// Set the packet's QoS priority (`set(skb_priority(N))`, what `set_queue` and `enqueue`
    /// translate to): the bits of `mask` from `value` (stored masked). Executing it changes
    /// nothing: no port type here has queues, so outputs would ignore the priority (as OVS's
    /// netdev ports without QoS do), and the flow key has no field that would let a later
    /// pass match it, so the packet does not carry it.
    SetPriority {
        /// The priority, already masked.
        value: u32,
        /// Which bits are written (all ones for an unmasked set).
        mask: u32,
    },
    /// Set the packet's mark (`set(skb_mark(N))`, what a write of `pkt_mark` translates to):
    /// the bits of `mask` from `value` (stored masked). The packet carries it in its
    /// metadata, which a later pass's key matches and a packet-in reports.
    SetMark {
        /// The mark, already masked.
        value: u32,
        /// Which bits are written (all ones for an unmasked set).
        mask: u32,
    },
    /// Run the packets through datapath meter N (`meter(N)`, see [`crate::meter`]): those a
    /// band fires on are dropped, the others go on with the next action.
    Meter(u32),
    /// Drop the packets, counted under the reason translation gave (OVS's explicit drop
    /// action with its `xlate_error`); the slow path adds it to a megaflow whose actions are
    /// empty because translation failed. Printed as the empty list is, `drop`.
    Drop(crate::xlate_drop::XlateDrop),
    /// `check_pkt_len(size=N,gt(...),le(...))`: packets longer than `size` bytes take the
    /// `gt` actions, the others the `le` ones; on copies unless it is the last action.
    CheckPktLen {
        /// The length in bytes a frame is compared with.
        size: u16,
        /// The actions of a frame longer than `size`.
        gt: Box<[DpAction]>,
        /// The actions of a frame of `size` bytes or fewer.
        le: Box<[DpAction]>,
    },
}

/// `set(eth(src=,dst=))`: value and mask per address (values stored masked), and the same as
/// the words the rewrite applies to the frame's first 12 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetEth {
    /// New source address bits (already masked).
    pub src: [u8; 6],
    /// Which source address bits are written.
    pub src_mask: [u8; 6],
    /// New destination address bits (already masked).
    pub dst: [u8; 6],
    /// Which destination address bits are written.
    pub dst_mask: [u8; 6],
    /// Bytes 0-7 and 8-11 of the destination and source addresses, value and mask, in memory
    /// order.
    words: EthWords,
}

/// [`SetEth`] as two masked writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EthWords {
    pub val_lo: u64,
    pub val_hi: u32,
    pub mask_lo: u64,
    pub mask_hi: u32,
}

impl SetEth {
    /// A masked write of the addresses (values are masked here).
    pub fn new(src: [u8; 6], src_mask: [u8; 6], dst: [u8; 6], dst_mask: [u8; 6]) -> SetEth {
        let src = masked6(src, src_mask);
        let dst = masked6(dst, dst_mask);
        let lo = |d: [u8; 6], s: [u8; 6]| {
            u64::from_ne_bytes([d[0], d[1], d[2], d[3], d[4], d[5], s[0], s[1]])
        };
        let hi = |s: [u8; 6]| u32::from_ne_bytes([s[2], s[3], s[4], s[5]]);
        SetEth {
            src,
            src_mask,
            dst,
            dst_mask,
            words: EthWords {
                val_lo: lo(dst, src),
                val_hi: hi(src),
                mask_lo: lo(dst_mask, src_mask),
                mask_hi: hi(src_mask),
            },
        }
    }

    /// The write as two masked words.
    #[inline]
    pub(crate) fn words(&self) -> &EthWords {
        &self.words
    }
}

/// `set(ipv4(src=,dst=,tos=,ttl=))`: value and mask per field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetIpv4 {
    /// New source address bits (already masked).
    pub src: Ipv4Addr,
    /// Which source address bits are written.
    pub src_mask: Ipv4Addr,
    /// New destination address bits (already masked).
    pub dst: Ipv4Addr,
    /// Which destination address bits are written.
    pub dst_mask: Ipv4Addr,
    /// New TOS byte bits, DSCP and ECN (already masked).
    pub tos: u8,
    /// Which TOS bits are written.
    pub tos_mask: u8,
    /// New TTL bits (already masked).
    pub ttl: u8,
    /// Which TTL bits are written.
    pub ttl_mask: u8,
}

/// `set(ipv6(src=,dst=,label=,tclass=,hlimit=))`: value and mask per field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetIpv6 {
    /// New source address bits (already masked).
    pub src: Ipv6Addr,
    /// Which source address bits are written.
    pub src_mask: Ipv6Addr,
    /// New destination address bits (already masked).
    pub dst: Ipv6Addr,
    /// Which destination address bits are written.
    pub dst_mask: Ipv6Addr,
    /// New flow label bits (already masked, within the low 20 bits).
    pub label: u32,
    /// Which flow label bits are written (within [`IPV6_LABEL_MASK`]).
    pub label_mask: u32,
    /// New traffic class bits, DSCP and ECN (already masked).
    pub tclass: u8,
    /// Which traffic class bits are written.
    pub tclass_mask: u8,
    /// New hop limit bits (already masked).
    pub hlimit: u8,
    /// Which hop limit bits are written.
    pub hlimit_mask: u8,
}

/// Which transport a [`SetL4`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L4Proto {
    /// `set(tcp(...))`: the TCP checksum is updated incrementally.
    Tcp,
    /// `set(udp(...))`: the UDP checksum is updated unless it is zero (none).
    Udp,
    /// `set(sctp(...))`: SCTP's CRC32C over the SCTP packet is recomputed.
    Sctp,
}

/// `set(tcp(src=,dst=))`, `set(udp(...))`, `set(sctp(...))`: value and mask per port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetL4 {
    /// The transport header the ports are in, which decides the checksum update.
    pub proto: L4Proto,
    /// New source port bits (already masked).
    pub src: u16,
    /// Which source port bits are written.
    pub src_mask: u16,
    /// New destination port bits (already masked).
    pub dst: u16,
    /// Which destination port bits are written.
    pub dst_mask: u16,
}

/// `set(arp(sip=,tip=,op=,sha=,tha=))`: value (already masked) and mask per field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetArp {
    /// Sender protocol address.
    pub sip: [u8; 4],
    /// Which sender protocol address bits are written.
    pub sip_mask: [u8; 4],
    /// Target protocol address.
    pub tip: [u8; 4],
    /// Which target protocol address bits are written.
    pub tip_mask: [u8; 4],
    /// Opcode (the key holds its low 8 bits: a whole-byte mask writes the 16-bit field).
    pub op: u8,
    /// Which opcode bits are written.
    pub op_mask: u8,
    /// Sender hardware address.
    pub sha: [u8; 6],
    /// Which sender hardware address bits are written.
    pub sha_mask: [u8; 6],
    /// Target hardware address.
    pub tha: [u8; 6],
    /// Which target hardware address bits are written.
    pub tha_mask: [u8; 6],
}

/// `set(icmp(type=,code=))` or `set(icmpv6(...))`: value (already masked) and mask per field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetIcmp {
    /// ICMPv6 rather than ICMP (which header the packet must carry).
    pub v6: bool,
    /// Message type.
    pub icmp_type: u8,
    /// Which type bits are written.
    pub type_mask: u8,
    /// Message code.
    pub code: u8,
    /// Which code bits are written.
    pub code_mask: u8,
}

/// `set(nd(target=,sll=,tll=))`: value (already masked) and mask per field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetNd {
    /// The solicitation's or advertisement's target address.
    pub target: Ipv6Addr,
    /// Which target bits are written.
    pub target_mask: Ipv6Addr,
    /// The source link-layer address option's address (written only where the option is).
    pub sll: [u8; 6],
    /// Which source link-layer address bits are written.
    pub sll_mask: [u8; 6],
    /// The target link-layer address option's address (written only where the option is).
    pub tll: [u8; 6],
    /// Which target link-layer address bits are written.
    pub tll_mask: [u8; 6],
}

/// Why an action list cannot be compiled for this datapath.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// An action this datapath does not execute (yet).
    #[error("action '{0}' is not supported by this datapath yet")]
    Unsupported(&'static str),
    /// A `set(...)` of an attribute this datapath cannot write.
    #[error("action 'set({})' is not supported by this datapath yet", .0.name())]
    UnsupportedSet(Attr),
    /// A masked set that asks to change a field no datapath can write (the IP protocol and
    /// fragment type), as the Linux datapath's `validate_set()` refuses it.
    #[error("set({attr}) cannot write the read-only field '{field}'")]
    ReadOnly {
        /// The set's attribute: `ipv4` or `ipv6`.
        attr: &'static str,
        /// The read-only field it names: `proto` or `frag`.
        field: &'static str,
    },
    /// An action whose arguments make no sense to execute.
    #[error("invalid {action}: {reason}")]
    Invalid {
        /// The action's name as in the text format (`push_vlan`, `ct`, `tnl_push`...).
        action: &'static str,
        /// What is wrong with its arguments.
        reason: &'static str,
    },
}

/// The bytes of a tunnel header as `tnl_push` prepends them (OVS builds the same template once
/// per tunnel and destination), with where the per-packet fields are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TnlTemplate {
    /// Ethernet, IPv4 or IPv6, then UDP and VXLAN/GENEVE, or GRE.
    pub header: Box<[u8]>,
    /// Offset of the outer IP header.
    pub ip_ofs: usize,
    /// Whether the outer IP header is IPv6.
    pub ipv6: bool,
    /// Offset of the UDP header of a UDP-based tunnel.
    pub udp_ofs: Option<usize>,
    /// Fill in the UDP checksum (`csum=true`; the template's `csum` is non-zero).
    pub udp_csum: bool,
    /// Offset of the GRE header when it carries a checksum.
    pub gre_csum_ofs: Option<usize>,
    /// IPv4: the ones'-complement sum of the template's IP header without its checksum and
    /// with a zero total length; a packet's header checksum is this sum plus its length,
    /// folded and inverted.
    pub ip_sum: u16,
    /// The UDP source port is the template's zero: take it from the packet's hash.
    pub entropy: bool,
    /// The outer ECN bits for each inner ECN field: when the template's own are 0 (Not-ECT),
    /// as translation makes them, the inner field copied with CE (3) as ECT(0) (2), as OVS's
    /// and Linux's tunnels push it (RFC 3168 §9.1.1's full functionality); all 0 for a template
    /// that sets its own ECN bits, which are kept.
    pub ecn_map: [u8; 4],
    /// The template's second IP header byte (IPv4's TOS; IPv6's traffic class low nibble and
    /// flow label high nibble), which the push writes with the packet's ECN bits or'ed in
    /// rather than read back what it has just copied (the read-back cost `vxlan_encap` 1-1.5
    /// cycles a packet in interleaved `flowpath bench` runs, though one instruction fewer).
    pub ip_byte1: u8,
    /// The lowest entropy UDP source port ([`egress_port_range`]'s minimum when built).
    ///
    /// [`egress_port_range`]: crate::rewrite::egress_port_range
    pub port_min: u16,
    /// How many entropy source ports there are from `port_min` (the range's maximum less its
    /// minimum; 0 makes every port `port_min`).
    pub port_span: u16,
    /// ERSPAN: the GRE sequence number's offset and the tunnel port's counter it is taken
    /// from, and for version 2 the timestamp's offset (written per packet, as OVS's
    /// `netdev_erspan_push_header()`).
    pub erspan: Option<ErspanFields>,
}

/// The per-packet fields of an ERSPAN header ([`TnlTemplate::erspan`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErspanFields {
    /// Offset of the GRE sequence number.
    pub seq_ofs: usize,
    /// Offset of version 2's timestamp.
    pub ts_ofs: Option<usize>,
    /// The sequence counter of the tunnel's datapath port.
    pub seq: GreSeq,
}

/// A tunnel datapath port's GRE sequence counter, shared by every template that pushes
/// through that port (OVS counts per tunnel netdev). Two are equal when they are the same
/// counter.
#[derive(Clone, Debug)]
pub struct GreSeq(std::sync::Arc<std::sync::atomic::AtomicU32>);

impl PartialEq for GreSeq {
    fn eq(&self, o: &GreSeq) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &o.0)
    }
}

impl Eq for GreSeq {}

impl GreSeq {
    /// The counter of tunnel datapath port `tnl_port` (made at its first use).
    pub fn of_port(tnl_port: u32) -> GreSeq {
        use std::collections::HashMap;
        use std::sync::{Arc, Mutex, OnceLock, atomic::AtomicU32};
        static PORTS: OnceLock<Mutex<HashMap<u32, Arc<AtomicU32>>>> = OnceLock::new();
        let mut m = PORTS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        GreSeq(Arc::clone(m.entry(tnl_port).or_default()))
    }

    /// The next sequence number.
    #[inline]
    pub fn next(&self) -> u32 {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
}

impl TnlTemplate {
    /// The template of a `tnl_push` header through tunnel datapath port `tnl_port` (whose
    /// GRE sequence an ERSPAN header counts).
    pub fn build(h: &flow::odp::TnlHeader, tnl_port: u32) -> Result<TnlTemplate, CompileError> {
        use flow::odp::{TnlIp, TnlL4};
        let mut b = Vec::with_capacity(h.size as usize);
        b.extend_from_slice(&h.eth_dst.0);
        b.extend_from_slice(&h.eth_src.0);
        b.extend_from_slice(&h.dl_type.to_be_bytes());
        let ip_ofs = b.len();
        let proto_of = |l4: &TnlL4| match l4 {
            TnlL4::Gre { .. } | TnlL4::Erspan { .. } => 47u8,
            _ => 17,
        };
        let ipv6 = match &h.ip {
            TnlIp::V4 {
                src,
                dst,
                tos,
                ttl,
                frag,
                ..
            } => {
                b.extend_from_slice(&[0x45, *tos, 0, 0, 0, 0]);
                b.extend_from_slice(&frag.to_be_bytes());
                b.extend_from_slice(&[*ttl, proto_of(&h.l4), 0, 0]);
                b.extend_from_slice(&src.octets());
                b.extend_from_slice(&dst.octets());
                false
            }
            TnlIp::V6 {
                src,
                dst,
                label,
                tclass,
                hlimit,
                ..
            } => {
                let w = (6u32 << 28) | (u32::from(*tclass) << 20) | (label & 0xfffff);
                b.extend_from_slice(&w.to_be_bytes());
                b.extend_from_slice(&[0, 0, proto_of(&h.l4), *hlimit]);
                b.extend_from_slice(&src.octets());
                b.extend_from_slice(&dst.octets());
                true
            }
        };
        let l4_ofs = b.len();
        let (port_min, port_max) = crate::rewrite::egress_port_range();
        let udp = |b: &mut Vec<u8>, u: &flow::odp::TnlUdp| {
            b.extend_from_slice(&u.src.to_be_bytes());
            b.extend_from_slice(&u.dst.to_be_bytes());
            b.extend_from_slice(&[0, 0, 0, 0]);
        };
        let mut t = TnlTemplate {
            header: Box::new([]),
            ip_ofs,
            ipv6,
            udp_ofs: None,
            udp_csum: false,
            gre_csum_ofs: None,
            ip_sum: 0,
            entropy: false,
            ecn_map: [0; 4],
            ip_byte1: b[ip_ofs + 1],
            port_min,
            port_span: port_max - port_min,
            erspan: None,
        };
        let outer_ecn = match &h.ip {
            TnlIp::V4 { tos, .. } => tos & 3,
            TnlIp::V6 { tclass, .. } => tclass & 3,
        };
        if outer_ecn == 0 {
            t.ecn_map = [0, 1, 2, 2];
        }
        match &h.l4 {
            TnlL4::Vxlan { udp: u, flags, vni } => {
                udp(&mut b, u);
                b.extend_from_slice(&flags.to_be_bytes());
                b.extend_from_slice(&(vni << 8).to_be_bytes());
                (t.udp_ofs, t.udp_csum) = (Some(l4_ofs), u.csum != 0);
            }
            TnlL4::Geneve {
                udp: u,
                oam,
                crit,
                vni,
                options,
            } => {
                udp(&mut b, u);
                if options.len() % 4 != 0 || options.len() > 252 {
                    return Err(CompileError::Invalid {
                        action: "tnl_push",
                        reason: "GENEVE options must be whole 4-byte words, at most 252 bytes",
                    });
                }
                b.push((options.len() / 4) as u8);
                b.push((u8::from(*oam) << 7) | (u8::from(*crit) << 6));
                b.extend_from_slice(&0x6558u16.to_be_bytes());
                b.extend_from_slice(&(vni << 8).to_be_bytes());
                b.extend_from_slice(options);
                (t.udp_ofs, t.udp_csum) = (Some(l4_ofs), u.csum != 0);
            }
            TnlL4::Udp(u) => {
                udp(&mut b, u);
                (t.udp_ofs, t.udp_csum) = (Some(l4_ofs), u.csum != 0);
            }
            TnlL4::Gre {
                flags,
                proto,
                csum,
                key,
                seq,
            } => {
                b.extend_from_slice(&flags.to_be_bytes());
                b.extend_from_slice(&proto.to_be_bytes());
                if csum.is_some() {
                    t.gre_csum_ofs = Some(l4_ofs);
                    b.extend_from_slice(&[0, 0, 0, 0]);
                }
                if let Some(k) = key {
                    b.extend_from_slice(&k.to_be_bytes());
                }
                if let Some(s) = seq {
                    b.extend_from_slice(&s.to_be_bytes());
                }
            }
            TnlL4::Erspan {
                ver,
                sid,
                idx,
                dir,
                hwid,
            } => {
                // GRE with a sequence number (RFC 2890) carrying ERSPAN type II (version 1)
                // or type III (version 2).
                let proto: u16 = if *ver == 1 { 0x88be } else { 0x22eb };
                b.extend_from_slice(&0x1000u16.to_be_bytes());
                b.extend_from_slice(&proto.to_be_bytes());
                let seq_ofs = b.len();
                b.extend_from_slice(&[0; 4]);
                // Version, VLAN 0; COS, encapsulation type and truncation 0, session id.
                b.push(ver << 4);
                b.push(0);
                b.extend_from_slice(&(sid & 0x3ff).to_be_bytes());
                let mut ts_ofs = None;
                if *ver == 1 {
                    b.extend_from_slice(&(idx & 0xf_ffff).to_be_bytes());
                } else {
                    ts_ofs = Some(b.len());
                    b.extend_from_slice(&[0; 6]);
                    // P and FT 0, the hardware id's upper 2 bits; its lower 4, the direction,
                    // granularity 0 and O 0.
                    b.push((hwid >> 4) & 3);
                    b.push((hwid & 0xf) << 4 | (dir & 1) << 3);
                }
                t.erspan = Some(ErspanFields {
                    seq_ofs,
                    ts_ofs,
                    seq: GreSeq::of_port(tnl_port),
                });
            }
            TnlL4::Gtpu { .. } => return Err(CompileError::Unsupported("tnl_push(gtpu)")),
        }
        // `size` is informative: OVS's own examples carry sizes that disagree with their
        // fields (a GRE header with a key given as 38 bytes), and the fields are what is pushed.
        if !ipv6 {
            let sum = wire::checksum::data(&b[ip_ofs..ip_ofs + 20]);
            t.ip_sum = sum;
            b[ip_ofs + 10..ip_ofs + 12].copy_from_slice(&(!sum).to_be_bytes());
        }
        t.entropy = t.udp_ofs.is_some_and(|u| b[u] == 0 && b[u + 1] == 0);
        t.header = b.into_boxed_slice();
        Ok(t)
    }
}

/// Compiles OVS datapath actions (as parsed by [`flow::odp::parse_actions`]) into executable
/// [`DpAction`]s: the slow part (mask expansion, validation) is done once per flow install.
///
/// Semantics chosen where OVS leaves room:
/// * `set(attr(...))` takes the per-field masks the text carries: a field given without `/mask`
///   is written whole, a field not given is left alone. A set that gives every writable field
///   exactly is OVS's non-masked `OVS_ACTION_ATTR_SET`.
/// * The non-masked `set(ipv4(...))`/`set(ipv6(...))` carries `proto` and `frag` too; OVS fills
///   them from the flow and both its datapaths ignore them on execution, so they are ignored
///   here. A *masked* set that names `proto` or `frag` asks to change them, which no datapath
///   can do; like the Linux datapath it is refused ([`CompileError::ReadOnly`]).
/// * `push_vlan`'s TCI loses the CFI "tag present" bit, as `eth_push_vlan()` clears it; a TPID
///   other than 0x8100/0x88a8 and a `push_mpls` or `add_mpls` to a non-MPLS ethertype are
///   refused (OVS's userspace executor would silently do nothing for the latter).
/// * `set(mpls(...))` writes the outer label stack entry only, so it must carry one.
pub fn compile(actions: &[Action]) -> Result<Vec<DpAction>, CompileError> {
    let mut out = Vec::with_capacity(actions.len());
    for a in actions {
        let c = compile_one(a)?;
        if let (DpAction::PopMpls { eth_type }, Some(last)) = (&c, out.last_mut())
            && let DpAction::PushEth { src, dst } = *last
        {
            *last = DpAction::PushEthPopMpls {
                src,
                dst,
                eth_type: *eth_type,
            };
            continue;
        }
        out.push(c);
    }
    Ok(out)
}

fn compile_one(a: &Action) -> Result<DpAction, CompileError> {
    use CompileError::{Invalid, Unsupported};
    Ok(match a {
        Action::Output(p) => DpAction::Output(*p),
        Action::Trunc(n) => DpAction::Trunc(*n),
        Action::Recirc(id) => DpAction::Recirc(*id),
        Action::Hash { alg, basis } => DpAction::Hash {
            sym: *alg == HashAlg::SymL4,
            basis: *basis,
        },
        Action::Clone(inner) => DpAction::Clone(compile(inner)?.into_boxed_slice()),
        Action::PushVlan { tpid, tci } => {
            if *tpid != 0x8100 && *tpid != 0x88a8 {
                return Err(Invalid {
                    action: "push_vlan",
                    reason: "tpid must be 0x8100 or 0x88a8",
                });
            }
            DpAction::PushVlan {
                tpid: *tpid,
                tci: tci & !VLAN_CFI,
            }
        }
        Action::PopVlan => DpAction::PopVlan,
        Action::PushMpls { lse, eth_type } => {
            if !is_mpls_ethertype(*eth_type) {
                return Err(Invalid {
                    action: "push_mpls",
                    reason: "eth_type must be 0x8847 or 0x8848",
                });
            }
            DpAction::PushMpls {
                lse: *lse,
                eth_type: *eth_type,
            }
        }
        Action::PopMpls { eth_type } => DpAction::PopMpls {
            eth_type: *eth_type,
        },
        Action::Set(k) => compile_set(k)?,
        Action::LbOutput(id) => DpAction::LbOutput(*id),
        Action::Meter(id) => DpAction::Meter(*id),
        Action::TnlPop(port) => DpAction::TnlPop(*port),
        Action::TnlPush(t) => {
            DpAction::TnlPush(Box::new(TnlTemplate::build(&t.header, t.tnl_port)?))
        }
        Action::Userspace(u) => DpAction::Userspace(match &u.cookie {
            flow::odp::UserCookie::None => Box::default(),
            flow::odp::UserCookie::Userdata(b) => b.clone().into_boxed_slice(),
            flow::odp::UserCookie::Text(t) => t.as_bytes().into(),
        }),
        Action::AddMpls { lse, eth_type } => {
            if !is_mpls_ethertype(*eth_type) {
                return Err(Invalid {
                    action: "add_mpls",
                    reason: "eth_type must be 0x8847 or 0x8848",
                });
            }
            DpAction::AddMpls {
                lse: *lse,
                eth_type: *eth_type,
            }
        }
        Action::PushEth { src, dst } => DpAction::PushEth {
            src: src.0,
            dst: dst.0,
        },
        Action::PopEth => DpAction::PopEth,
        Action::Ct(ct) => DpAction::Ct(Box::new(compile_ct(ct)?)),
        Action::CtClear => DpAction::CtClear,
        // Sampling every packet is a clone (OVS's translation writes a controller meter so);
        // other probabilities are not implemented.
        Action::Sample {
            probability: u32::MAX,
            actions,
        } => DpAction::Clone(compile(actions)?.into_boxed_slice()),
        Action::Sample { .. } => return Err(Unsupported("sample")),
        Action::CheckPktLen { size, gt, le } => DpAction::CheckPktLen {
            size: *size,
            gt: compile(gt)?.into_boxed_slice(),
            le: compile(le)?.into_boxed_slice(),
        },
        Action::DecTtl(_) => return Err(Unsupported("dec_ttl")),
        Action::PopNsh => return Err(Unsupported("pop_nsh")),
        Action::Psample { .. } => return Err(Unsupported("psample")),
    })
}

/// `ct(...)` as the tracker's arguments. The helpers are `ftp` and `tftp`
/// ([`conntrack::alg`]); timeout policies named in the action are not supported yet, zone
/// timeout policies are (`dpctl`).
fn compile_ct(ct: &flow::odp::CtAction) -> Result<conntrack::CtArgs, CompileError> {
    use conntrack::{NatKind, NatSpec};
    let helper = match ct.helper.as_deref() {
        None => None,
        Some(name) => Some(
            conntrack::alg::Helper::from_name(name)
                .ok_or(CompileError::Unsupported("ct(helper=...)"))?,
        ),
    };
    if ct.timeout.is_some() {
        return Err(CompileError::Unsupported("ct(timeout=...)"));
    }
    let nat = match &ct.nat {
        None => None,
        Some(n) => {
            let to16 = |a: Option<std::net::IpAddr>| -> [u8; 16] {
                let mut b = [0u8; 16];
                match a {
                    Some(std::net::IpAddr::V4(v)) => b[..4].copy_from_slice(&v.octets()),
                    Some(std::net::IpAddr::V6(v)) => b = v.octets(),
                    None => {}
                }
                b
            };
            let kind = n.kind.map(|k| match k {
                flow::odp::NatKind::Src => NatKind::Src,
                flow::odp::NatKind::Dst => NatKind::Dst,
            });
            if n.ip_min.is_none() && n.proto_min != 0 && kind.is_none() {
                return Err(CompileError::Invalid {
                    action: "ct",
                    reason: "nat with a port range needs src or dst",
                });
            }
            let max = n.ip_max.or(n.ip_min);
            if let (Some(a), Some(b)) = (n.ip_min, max)
                && (a.is_ipv4() != b.is_ipv4() || a > b)
            {
                return Err(CompileError::Invalid {
                    action: "ct",
                    reason: "nat address range is empty or mixes families",
                });
            }
            if n.proto_max != 0 && n.proto_max < n.proto_min {
                return Err(CompileError::Invalid {
                    action: "ct",
                    reason: "nat port range is empty",
                });
            }
            Some(NatSpec {
                kind,
                addr_min: to16(n.ip_min),
                addr_max: to16(max),
                has_addr: n.ip_min.is_some(),
                port_min: n.proto_min,
                port_max: if n.proto_max == 0 {
                    n.proto_min
                } else {
                    n.proto_max
                },
                persistent: n.persistent,
                random: n.random,
            })
        }
    };
    Ok(conntrack::CtArgs {
        zone: ct.zone,
        commit: ct.commit || ct.force_commit,
        force: ct.force_commit,
        mark: ct.mark,
        label: ct.label,
        nat,
        helper,
    })
}

fn is_mpls_ethertype(t: u16) -> bool {
    t == 0x8847 || t == 0x8848
}

fn masked6(v: [u8; 6], m: [u8; 6]) -> [u8; 6] {
    core::array::from_fn(|i| v[i] & m[i])
}

fn masked_v4(v: Ipv4Addr, m: Ipv4Addr) -> Ipv4Addr {
    Ipv4Addr::from_bits(v.to_bits() & m.to_bits())
}

fn masked_v6(v: Ipv6Addr, m: Ipv6Addr) -> Ipv6Addr {
    Ipv6Addr::from_bits(v.to_bits() & m.to_bits())
}

/// `set(attr(...))`: one key attribute with its mask; values are stored already masked.
fn compile_set(k: &DpKey) -> Result<DpAction, CompileError> {
    let Some(first) = k.attrs.items.first() else {
        return Err(CompileError::Invalid {
            action: "set",
            reason: "no key attribute",
        });
    };
    let (key, mask) = (&k.key, &k.mask);
    Ok(match first.attr {
        Attr::Eth => DpAction::SetEth(SetEth::new(
            key.eth_src().0,
            mask.eth_src().0,
            key.eth_dst().0,
            mask.eth_dst().0,
        )),
        Attr::Ipv4 => {
            let exact = mask.nw_src() == Ipv4Addr::BROADCAST
                && mask.nw_dst() == Ipv4Addr::BROADCAST
                && mask.nw_tos() == u8::MAX
                && mask.nw_ttl() == u8::MAX;
            check_read_only(exact, "ipv4", mask.nw_proto(), mask.nw_frag())?;
            DpAction::SetIpv4(SetIpv4 {
                src: masked_v4(key.nw_src(), mask.nw_src()),
                src_mask: mask.nw_src(),
                dst: masked_v4(key.nw_dst(), mask.nw_dst()),
                dst_mask: mask.nw_dst(),
                tos: key.nw_tos() & mask.nw_tos(),
                tos_mask: mask.nw_tos(),
                ttl: key.nw_ttl() & mask.nw_ttl(),
                ttl_mask: mask.nw_ttl(),
            })
        }
        Attr::Ipv6 => {
            let label_mask = mask.ipv6_label() & IPV6_LABEL_MASK;
            let exact = mask.ipv6_src().to_bits() == u128::MAX
                && mask.ipv6_dst().to_bits() == u128::MAX
                && label_mask == IPV6_LABEL_MASK
                && mask.nw_tos() == u8::MAX
                && mask.nw_ttl() == u8::MAX;
            check_read_only(exact, "ipv6", mask.nw_proto(), mask.nw_frag())?;
            DpAction::SetIpv6(SetIpv6 {
                src: masked_v6(key.ipv6_src(), mask.ipv6_src()),
                src_mask: mask.ipv6_src(),
                dst: masked_v6(key.ipv6_dst(), mask.ipv6_dst()),
                dst_mask: mask.ipv6_dst(),
                label: key.ipv6_label() & label_mask,
                label_mask,
                tclass: key.nw_tos() & mask.nw_tos(),
                tclass_mask: mask.nw_tos(),
                hlimit: key.nw_ttl() & mask.nw_ttl(),
                hlimit_mask: mask.nw_ttl(),
            })
        }
        attr @ (Attr::Tcp | Attr::Udp | Attr::Sctp) => DpAction::SetL4(SetL4 {
            proto: match attr {
                Attr::Tcp => L4Proto::Tcp,
                Attr::Udp => L4Proto::Udp,
                _ => L4Proto::Sctp,
            },
            src: key.tp_src() & mask.tp_src(),
            src_mask: mask.tp_src(),
            dst: key.tp_dst() & mask.tp_dst(),
            dst_mask: mask.tp_dst(),
        }),
        Attr::Arp => DpAction::SetArp(Box::new(SetArp {
            sip: masked_v4(key.nw_src(), mask.nw_src()).octets(),
            sip_mask: mask.nw_src().octets(),
            tip: masked_v4(key.nw_dst(), mask.nw_dst()).octets(),
            tip_mask: mask.nw_dst().octets(),
            op: key.nw_proto() & mask.nw_proto(),
            op_mask: mask.nw_proto(),
            sha: masked6(key.arp_sha().0, mask.arp_sha().0),
            sha_mask: mask.arp_sha().0,
            tha: masked6(key.arp_tha().0, mask.arp_tha().0),
            tha_mask: mask.arp_tha().0,
        })),
        attr @ (Attr::Icmp | Attr::Icmpv6) => {
            // The key keeps type and code in the low bytes of the two port fields.
            let (t, tm) = (key.tp_src() as u8, mask.tp_src() as u8);
            let (c, cm) = (key.tp_dst() as u8, mask.tp_dst() as u8);
            DpAction::SetIcmp(SetIcmp {
                v6: attr == Attr::Icmpv6,
                icmp_type: t & tm,
                type_mask: tm,
                code: c & cm,
                code_mask: cm,
            })
        }
        Attr::Nd => DpAction::SetNd(Box::new(SetNd {
            target: masked_v6(key.nd_target(), mask.nd_target()),
            target_mask: mask.nd_target(),
            sll: masked6(key.arp_sha().0, mask.arp_sha().0),
            sll_mask: mask.arp_sha().0,
            tll: masked6(key.arp_tha().0, mask.arp_tha().0),
            tll_mask: mask.arp_tha().0,
        })),
        Attr::SkbPriority => DpAction::SetPriority {
            value: k.attrs.skb_priority & k.attrs.skb_priority_mask,
            mask: k.attrs.skb_priority_mask,
        },
        Attr::SkbMark => DpAction::SetMark {
            value: key.pkt_mark() & mask.pkt_mark(),
            mask: mask.pkt_mark(),
        },
        Attr::Mpls => {
            if k.attrs.mpls_lses > 1 {
                return Err(CompileError::Invalid {
                    action: "set(mpls)",
                    reason: "it writes exactly one label stack entry",
                });
            }
            DpAction::SetMpls {
                lse: key.mpls_lse0() & mask.mpls_lse0(),
                mask: mask.mpls_lse0(),
            }
        }
        other => return Err(CompileError::UnsupportedSet(other)),
    })
}

/// The 20 bits of an IPv6 flow label.
pub const IPV6_LABEL_MASK: u32 = 0x000f_ffff;

/// `proto` and `frag` of an IP set: ignored in the non-masked form (`exact`), refused when a
/// masked set names them.
fn check_read_only(
    exact: bool,
    attr: &'static str,
    proto: u8,
    frag: u8,
) -> Result<(), CompileError> {
    if exact {
        return Ok(());
    }
    if proto != 0 {
        return Err(CompileError::ReadOnly {
            attr,
            field: "proto",
        });
    }
    if frag != 0 {
        return Err(CompileError::ReadOnly {
            attr,
            field: "frag",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use flow::odp::{PortNames, parse_actions};

    fn compiled(text: &str) -> Result<Vec<DpAction>, CompileError> {
        let parsed = parse_actions(text, &mut PortNames::new())
            .unwrap_or_else(|e| panic!("parse {text}: {e}"));
        compile(&parsed)
    }

    fn one(text: &str) -> DpAction {
        let mut v = compiled(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(v.len(), 1, "{text}");
        v.pop().unwrap()
    }

    fn v4(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    fn v6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn forwarding_actions() {
        assert_eq!(
            compiled("1,trunc(100),recirc(0x2a),hash(l4(0)),hash(sym_l4(5))").unwrap(),
            vec![
                DpAction::Output(1),
                DpAction::Trunc(100),
                DpAction::Recirc(0x2a),
                DpAction::Hash {
                    sym: false,
                    basis: 0
                },
                DpAction::Hash {
                    sym: true,
                    basis: 5
                },
            ]
        );
        assert_eq!(compiled("drop").unwrap(), vec![]);
        assert_eq!(
            compiled("clone(push_vlan(vid=10,pcp=1),clone(2)),pop_vlan,3").unwrap(),
            vec![
                DpAction::Clone(
                    vec![
                        DpAction::PushVlan {
                            tpid: 0x8100,
                            tci: 0x200a
                        },
                        DpAction::Clone(vec![DpAction::Output(2)].into()),
                    ]
                    .into()
                ),
                DpAction::PopVlan,
                DpAction::Output(3),
            ]
        );
    }

    #[test]
    fn tunnel_pop_and_ethernet_push_pop() {
        assert_eq!(
            compiled("tnl_pop(4),clone(tnl_pop(5))").unwrap(),
            vec![
                DpAction::TnlPop(4),
                DpAction::Clone(vec![DpAction::TnlPop(5)].into())
            ]
        );
        assert_eq!(
            compiled("push_eth(src=00:00:00:00:00:01,dst=52:54:00:a0:91:10),pop_eth").unwrap(),
            vec![
                DpAction::PushEth {
                    src: [0, 0, 0, 0, 0, 1],
                    dst: [0x52, 0x54, 0, 0xa0, 0x91, 0x10]
                },
                DpAction::PopEth
            ]
        );
        // push_eth directly followed by pop_mpls is one fused action; apart, they stay two.
        assert_eq!(
            compiled(
                "push_eth(src=00:00:00:00:00:01,dst=52:54:00:a0:91:10),pop_mpls(eth_type=0x800),2"
            )
            .unwrap(),
            vec![
                DpAction::PushEthPopMpls {
                    src: [0, 0, 0, 0, 0, 1],
                    dst: [0x52, 0x54, 0, 0xa0, 0x91, 0x10],
                    eth_type: 0x0800
                },
                DpAction::Output(2)
            ]
        );
        assert_eq!(
            compiled(
                "push_eth(src=00:00:00:00:00:01,dst=52:54:00:a0:91:10),2,pop_mpls(eth_type=0x800)"
            )
            .unwrap()
            .len(),
            3
        );
    }

    #[test]
    fn vlan_and_mpls() {
        // The CFI bit the text form implies is not part of the pushed TCI.
        assert_eq!(
            one("push_vlan(tpid=0x88a8,vid=4095,pcp=7)"),
            DpAction::PushVlan {
                tpid: 0x88a8,
                tci: 0xefff
            }
        );
        assert_eq!(
            one("push_vlan(vid=5,pcp=0,cfi=0)"),
            DpAction::PushVlan {
                tpid: 0x8100,
                tci: 5
            }
        );
        assert_eq!(
            one("push_mpls(label=100,tc=1,ttl=64,bos=1,eth_type=0x8847)"),
            DpAction::PushMpls {
                lse: 100 << 12 | 1 << 9 | 1 << 8 | 64,
                eth_type: 0x8847
            }
        );
        assert_eq!(
            one("add_mpls(label=7,tc=2,ttl=9,bos=0,eth_type=0x8848)"),
            DpAction::AddMpls {
                lse: 7 << 12 | 2 << 9 | 9,
                eth_type: 0x8848
            }
        );
        assert_eq!(
            one("pop_mpls(eth_type=0x800)"),
            DpAction::PopMpls { eth_type: 0x0800 }
        );
        assert_eq!(
            one("set(mpls(label=1,tc=0,ttl=64,bos=1))"),
            DpAction::SetMpls {
                lse: 1 << 12 | 1 << 8 | 64,
                mask: u32::MAX
            }
        );
        assert_eq!(
            one("set(mpls(ttl=5))"),
            DpAction::SetMpls { lse: 5, mask: 0xff }
        );
    }

    #[test]
    fn set_skb_mark() {
        assert_eq!(
            one("set(skb_mark(0xaa))"),
            DpAction::SetMark {
                value: 0xaa,
                mask: u32::MAX
            }
        );
        assert_eq!(
            one("set(skb_mark(0x1234/0xff))"),
            DpAction::SetMark {
                value: 0x34,
                mask: 0xff
            }
        );
    }

    #[test]
    fn set_skb_priority() {
        assert_eq!(
            one("set(skb_priority(0x10001))"),
            DpAction::SetPriority {
                value: 0x10001,
                mask: u32::MAX
            }
        );
        // Masked: only the masked bits are written.
        assert_eq!(
            one("set(skb_priority(0x1235/0xff))"),
            DpAction::SetPriority {
                value: 0x35,
                mask: 0xff
            }
        );
    }

    #[test]
    fn set_eth_masked_and_not() {
        assert_eq!(
            one("set(eth(src=00:01:02:03:04:05,dst=52:54:00:a0:91:99))"),
            DpAction::SetEth(SetEth::new(
                [0, 1, 2, 3, 4, 5],
                [0xff; 6],
                [0x52, 0x54, 0, 0xa0, 0x91, 0x99],
                [0xff; 6],
            ))
        );
        // Values are stored under their masks.
        assert_eq!(
            one("set(eth(dst=52:54:00:a0:91:99/ff:ff:ff:00:00:00))"),
            DpAction::SetEth(SetEth::new(
                [0; 6],
                [0; 6],
                [0x52, 0x54, 0, 0, 0, 0],
                [0xff, 0xff, 0xff, 0, 0, 0],
            ))
        );
    }

    #[test]
    fn set_ipv4() {
        let exact = SetIpv4 {
            src: v4("1.1.1.1"),
            src_mask: Ipv4Addr::BROADCAST,
            dst: v4("2.2.2.2"),
            dst_mask: Ipv4Addr::BROADCAST,
            tos: 0,
            tos_mask: 0xff,
            ttl: 64,
            ttl_mask: 0xff,
        };
        // The non-masked form: proto and frag are carried and ignored.
        assert_eq!(
            one("set(ipv4(src=1.1.1.1,dst=2.2.2.2,proto=6,tos=0,ttl=64,frag=no))"),
            DpAction::SetIpv4(exact)
        );
        assert_eq!(
            one("set(ipv4(src=1.1.1.1/255.255.255.0,ttl=9))"),
            DpAction::SetIpv4(SetIpv4 {
                src: v4("1.1.1.0"),
                src_mask: v4("255.255.255.0"),
                dst: Ipv4Addr::UNSPECIFIED,
                dst_mask: Ipv4Addr::UNSPECIFIED,
                tos: 0,
                tos_mask: 0,
                ttl: 9,
                ttl_mask: 0xff,
            })
        );
        assert_eq!(
            compiled("set(ipv4(src=1.1.1.1,proto=17))"),
            Err(CompileError::ReadOnly {
                attr: "ipv4",
                field: "proto"
            })
        );
        let e = compiled("set(ipv4(ttl=1,frag=later))").unwrap_err();
        assert_eq!(
            e.to_string(),
            "set(ipv4) cannot write the read-only field 'frag'"
        );
    }

    #[test]
    fn set_ipv6() {
        assert_eq!(
            one(
                "set(ipv6(src=2001:db8::1,dst=2001:db8::2,label=0,proto=6,tclass=0,hlimit=64,frag=no))"
            ),
            DpAction::SetIpv6(SetIpv6 {
                src: v6("2001:db8::1"),
                src_mask: Ipv6Addr::from_bits(u128::MAX),
                dst: v6("2001:db8::2"),
                dst_mask: Ipv6Addr::from_bits(u128::MAX),
                label: 0,
                label_mask: IPV6_LABEL_MASK,
                tclass: 0,
                tclass_mask: 0xff,
                hlimit: 64,
                hlimit_mask: 0xff,
            })
        );
        let DpAction::SetIpv6(s) = one("set(ipv6(label=0x12345/0xff))") else {
            panic!("not a set(ipv6)");
        };
        assert_eq!(
            (s.label, s.label_mask, s.src_mask),
            (0x45, 0xff, Ipv6Addr::UNSPECIFIED)
        );
        assert!(matches!(
            compiled("set(ipv6(hlimit=1,proto=58))"),
            Err(CompileError::ReadOnly { field: "proto", .. })
        ));
    }

    #[test]
    fn set_ports() {
        assert_eq!(
            one("set(tcp(dst=80))"),
            DpAction::SetL4(SetL4 {
                proto: L4Proto::Tcp,
                src: 0,
                src_mask: 0,
                dst: 80,
                dst_mask: 0xffff
            })
        );
        assert_eq!(
            one("set(udp(src=0x1234/0xff00,dst=53))"),
            DpAction::SetL4(SetL4 {
                proto: L4Proto::Udp,
                src: 0x1200,
                src_mask: 0xff00,
                dst: 53,
                dst_mask: 0xffff
            })
        );
        assert!(matches!(
            one("set(sctp(src=1,dst=2))"),
            DpAction::SetL4(SetL4 {
                proto: L4Proto::Sctp,
                ..
            })
        ));
    }

    #[test]
    fn ct_actions_compile_to_the_trackers_arguments() {
        let a = compiled(
            "ct(commit,zone=5,mark=0x2a/0xff,nat(src=10.0.0.1-10.0.0.9:1000-2000,random)),ct_clear",
        )
        .unwrap();
        let DpAction::Ct(ct) = &a[0] else {
            panic!("{a:?}")
        };
        assert_eq!(
            (ct.zone, ct.commit, ct.force, ct.mark),
            (5, true, false, Some((0x2a, 0xff)))
        );
        let n = ct.nat.unwrap();
        assert_eq!(n.kind, Some(conntrack::NatKind::Src));
        assert_eq!(
            (&n.addr_min[..4], &n.addr_max[..4]),
            (&[10, 0, 0, 1][..], &[10, 0, 0, 9][..])
        );
        assert_eq!((n.port_min, n.port_max, n.random), (1000, 2000, true));
        assert_eq!(a[1], DpAction::CtClear);
        let DpAction::Ct(ct) = &compiled("ct(force_commit)").unwrap()[0] else {
            panic!()
        };
        assert!(ct.commit && ct.force);
        for (text, helper) in [
            ("ct(commit,helper=ftp)", conntrack::alg::Helper::Ftp),
            ("ct(commit,helper=tftp)", conntrack::alg::Helper::Tftp),
        ] {
            let DpAction::Ct(ct) = &compiled(text).unwrap()[0] else {
                panic!()
            };
            assert_eq!(ct.helper, Some(helper), "{text}");
        }
        for bad in [
            "ct(nat(src=10.0.0.9-10.0.0.1))",
            "ct(nat(src=10.0.0.1:20-10))",
        ] {
            assert!(
                matches!(compiled(bad), Err(CompileError::Invalid { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn check_pkt_len_compiles_both_branches() {
        assert_eq!(
            compiled("check_pkt_len(size=200,gt(1),le(set(eth(src=00:00:00:00:00:09)),2))")
                .unwrap()[0],
            DpAction::CheckPktLen {
                size: 200,
                gt: vec![DpAction::Output(1)].into(),
                le: compiled("set(eth(src=00:00:00:00:00:09)),2")
                    .unwrap()
                    .into(),
            }
        );
    }

    #[test]
    fn a_sample_of_every_packet_is_a_clone() {
        // As OVS writes a controller action with a meter.
        assert_eq!(
            compiled("sample(sample=100.0%,actions(meter(0),2)),1").unwrap(),
            vec![
                DpAction::Clone(vec![DpAction::Meter(0), DpAction::Output(2)].into()),
                DpAction::Output(1),
            ]
        );
    }

    #[test]
    fn unsupported_actions_are_named() {
        for (text, name) in [
            (
                "tnl_push(tnl_port(2152),header(size=50,type=110,eth(dst=00:00:00:00:00:02,src=00:00:00:00:00:01,dl_type=0x0800),ipv4(src=1.1.1.1,dst=2.2.2.2,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,dst=2152,csum=0x0),gtpu(flags=0x30,msgtype=255,teid=0x7b)),out_port(1))",
                "tnl_push(gtpu)",
            ),
            ("ct(helper=sip)", "ct(helper=...)"),
            ("sample(sample=50%,actions(1))", "sample"),
            ("dec_ttl(le_1(1))", "dec_ttl"),
            ("clone(1,dec_ttl(le_1(1)))", "dec_ttl"),
        ] {
            let e = compiled(text).unwrap_err();
            assert_eq!(e, CompileError::Unsupported(name), "{text}");
            assert_eq!(
                e.to_string(),
                format!("action '{name}' is not supported by this datapath yet")
            );
        }
        for (text, attr) in [
            (
                "set(tunnel(tun_id=0x64,dst=10.1.2.9,ttl=64,tp_dst=4789,flags(df|key)))",
                Attr::Tunnel,
            ),
            ("set(ct_mark(0x1))", Attr::CtMark),
        ] {
            let e = compiled(text).unwrap_err();
            assert_eq!(e, CompileError::UnsupportedSet(attr), "{text}");
            assert_eq!(
                e.to_string(),
                format!(
                    "action 'set({})' is not supported by this datapath yet",
                    attr.name()
                )
            );
        }
    }

    #[test]
    fn invalid_arguments() {
        assert!(matches!(
            compiled("push_vlan(tpid=0x0800,vid=1,pcp=0)"),
            Err(CompileError::Invalid {
                action: "push_vlan",
                ..
            })
        ));
        assert!(matches!(
            compiled("push_mpls(label=1,tc=0,ttl=64,bos=1,eth_type=0x800)"),
            Err(CompileError::Invalid {
                action: "push_mpls",
                ..
            })
        ));
        assert!(matches!(
            compiled("add_mpls(label=1,tc=0,ttl=64,bos=1,eth_type=0x6558)"),
            Err(CompileError::Invalid {
                action: "add_mpls",
                ..
            })
        ));
        assert!(matches!(
            compiled("set(mpls(label=1,tc=0,ttl=64,bos=0,label=2,tc=0,ttl=64,bos=1))"),
            Err(CompileError::Invalid {
                action: "set(mpls)",
                ..
            })
        ));
    }
}
