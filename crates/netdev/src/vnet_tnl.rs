//! The virtio-net header of UDP-tunnel GSO (virtio 1.4's
//! `VIRTIO_NET_F_HOST_UDP_TUNNEL_GSO` and `_CSUM`; Linux's tun with
//! `TUN_F_UDP_TUNNEL_GSO` and `TUN_F_UDP_TUNNEL_GSO_CSUM`, 6.17 and later): a super-frame
//! encapsulated in a UDP tunnel (VXLAN, GENEVE) crosses whole, for the receiver to segment.
//!
//! Layout (`struct virtio_net_hdr_v1_hash_tunnel`, [`HDR_LEN`] bytes): the 12-byte header of
//! [`crate::vnet`], the hash value (two u16), hash report and padding (u16 each), then
//! `outer_th_offset` (the outer UDP header) and `inner_nh_offset` (the inner IP header),
//! little-endian. Linux's tun reads and writes the tunnel fields only when the device's
//! header size (`TUNSETVNETHDRSZ`) is at least that.
//!
//! An encapsulated TCP super-frame: `gso_type` the inner `TCPV4`/`TCPV6` (with `ECN`)
//! OR-ed with `GSO_UDP_TUNNEL_IPV4` or `GSO_UDP_TUNNEL_IPV6` for the outer IP version;
//! `NEEDS_CSUM` (required) with `csum_start` at the inner TCP header and `csum_offset` 16,
//! the inner TCP checksum field the inner pseudo-header sum; `hdr_len` all headers;
//! `gso_size` the MSS; with an outer UDP checksum, flag `F_UDP_TUNNEL_CSUM` and the outer
//! UDP checksum field the outer pseudo-header sum (without it, the field 0). Linux checks
//! that the outer UDP header lies after an Ethernet and an outer IP header, the inner IP
//! header after the UDP header, and the inner TCP header after the inner IP header.
//! An encapsulated UDP super-frame (USO in a tunnel, which Linux 6.17's
//! `virtio_net_hdr_tnl_to_skb` takes, unlike UFO): `gso_type` `UDP_L4` (never `ECN`) OR-ed
//! with the tunnel bit; `NEEDS_CSUM` with `csum_start` at the inner UDP header and
//! `csum_offset` 6, the inner UDP checksum field the inner pseudo-header sum; `gso_size` the
//! datagram size; the outer checksum as for TCP. Linux reads the inner IP version from the
//! inner header itself and checks the inner UDP header lies after it.
//!
//! Received (`accept`): such a frame (from a kernel VXLAN device routed into the tap, or
//! another switch's underlay bridged to it) goes on whole (`Rx::Whole`) when it is a TCP
//! or UDP (`UDP_L4`: USO in a tunnel) one in VXLAN or GENEVE: its tunnel header is one
//! [`datapath::gso_tunnel::inner_l3_after`] reads, and its outer lengths fit 16 bits, which
//! are then written as the whole frame's (the sender may have left them 0) so that the outer
//! headers parse as a packet's. It enters the datapath as one packet marked
//! [`PacketMeta::tunnel_gso`](datapath::packet::PacketMeta::tunnel_gso), `gso_size` the MSS
//! or the datagram size, its inner TCP or UDP checksum the pseudo-header sum as the kernel
//! left it, its outer UDP checksum field the pseudo-header sum when `F_UDP_TUNNEL_CSUM` is
//! set (the checksum marked good for `tnl_pop`: each segment gets its own), else 0;
//! [`datapath::gso_tunnel`] says what becomes of it. Any other (a tunnel header of another
//! layout, outer lengths past 16 bits) is cut into its segments on receive (`RxTunnel`) by
//! the segmentation the datapath uses after a `tnl_push`, so that the rest of the switch sees
//! ordinary encapsulated packets: an inner UDP super-frame into its datagrams
//! ([`datapath::gso_udp`]), the outer checksum then summed over each whole datagram. An inner
//! UFO one is a counted `rx_drop_gso_type` (Linux refuses it too); one whose offsets or
//! headers do not match is `rx_drop_gso_header`, one that makes more than
//! [`datapath::gso_udp::MAX_SEGMENTS`] datagrams `rx_drop_gso_size`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use datapath::gso::{MIN_MSS, TcpSuper};
use datapath::gso_tunnel::{Inner, Outer};
use datapath::gso_udp::UdpSuper;
use datapath::packet::{Batch, Packet, Pool, RX_CSUM_L4_GOOD};

use crate::vnet::{F_NEEDS_CSUM, GSO_ECN, GSO_TCPV4, GSO_TCPV6, GSO_UDP_L4, RxDrop, why_super};

/// Bytes of `virtio_net_hdr_v1_hash_tunnel`.
pub const HDR_LEN: usize = 24;
/// `gso_type` bit: a UDP tunnel over IPv4 (`VIRTIO_NET_HDR_GSO_UDP_TUNNEL_IPV4`).
pub(crate) const GSO_UDP_TUNNEL_IPV4: u8 = 0x20;
/// `gso_type` bit: a UDP tunnel over IPv6 (`VIRTIO_NET_HDR_GSO_UDP_TUNNEL_IPV6`).
pub(crate) const GSO_UDP_TUNNEL_IPV6: u8 = 0x40;
/// Both tunnel bits.
pub(crate) const GSO_UDP_TUNNEL: u8 = GSO_UDP_TUNNEL_IPV4 | GSO_UDP_TUNNEL_IPV6;
/// `flags` bit: the outer UDP checksum is to be completed for each segment
/// (`VIRTIO_NET_HDR_F_UDP_TUNNEL_CSUM`).
pub(crate) const F_UDP_TUNNEL_CSUM: u8 = 0x08;
/// Offset of `outer_th_offset`.
const OUTER_TH: usize = 20;
/// Offset of `inner_nh_offset`.
const INNER_NH: usize = 22;

/// The header of encapsulated super-frame `p` for a receiver that takes UDP-tunnel GSO,
/// after making its lengths and checksum fields what that needs
/// ([`datapath::gso_tunnel::prepare_partial`]). `None` (frame as it was, or with only its
/// length fields rewritten) when it is neither TCP nor UDP (USO) in UDP over IP, or its outer
/// lengths do not fit.
pub(crate) fn gso_hdr(p: &mut Packet) -> Option<[u8; HDR_LEN]> {
    let Ok((inner, outer)) = datapath::gso_tunnel::prepare_partial(p) else {
        // Not TCP in UDP (or too long): an inner UDP super-frame ([`udp_gso_hdr`]), or none.
        return udp_gso_hdr(p);
    };
    let mut ty = if inner.ipv6 { GSO_TCPV6 } else { GSO_TCPV4 };
    if datapath::gso::has_cwr(p, &inner) {
        ty |= GSO_ECN;
    }
    ty |= if outer.ipv6 {
        GSO_UDP_TUNNEL_IPV6
    } else {
        GSO_UDP_TUNNEL_IPV4
    };
    let mut h = [0u8; HDR_LEN];
    h[0] = F_NEEDS_CSUM | if outer.csum { F_UDP_TUNNEL_CSUM } else { 0 };
    h[1] = ty;
    let mut put = |at: usize, v: usize| h[at..at + 2].copy_from_slice(&(v as u16).to_le_bytes());
    put(2, inner.hdr_len);
    put(4, inner.mss);
    put(6, inner.l4);
    put(8, 16);
    put(OUTER_TH, outer.l4);
    put(INNER_NH, inner.l3);
    Some(h)
}

/// [`gso_hdr`] of an encapsulated UDP super-frame (module documentation).
fn udp_gso_hdr(p: &mut Packet) -> Option<[u8; HDR_LEN]> {
    let (inner, outer) = datapath::gso_tunnel::prepare_partial_udp(p).ok()?;
    let tunnel = if outer.ipv6 {
        GSO_UDP_TUNNEL_IPV6
    } else {
        GSO_UDP_TUNNEL_IPV4
    };
    let mut h = [0u8; HDR_LEN];
    h[0] = F_NEEDS_CSUM | if outer.csum { F_UDP_TUNNEL_CSUM } else { 0 };
    h[1] = GSO_UDP_L4 | tunnel;
    let mut put = |at: usize, v: usize| h[at..at + 2].copy_from_slice(&(v as u16).to_le_bytes());
    put(2, inner.hdr_len());
    put(4, inner.size);
    put(6, inner.l4);
    put(8, 6);
    put(OUTER_TH, outer.l4);
    put(INNER_NH, inner.l3);
    Some(h)
}

/// A received encapsulated super-frame, handed on as its segments: as many each burst as
/// the batch has room for.
pub(crate) struct RxTunnel {
    p: Packet,
    inner: Inner,
    outer: Outer,
    next: usize,
    n: usize,
    /// The offsets a received packet has before extraction, for every segment.
    l3: u16,
    l4: u16,
}

impl RxTunnel {
    fn new(p: Packet, inner: Inner, outer: Outer, l3: u16, l4: u16) -> RxTunnel {
        let n = inner.n_segments(&p);
        RxTunnel {
            p,
            inner,
            outer,
            next: 0,
            n,
            l3,
            l4,
        }
    }

    /// Moves segments into `batch` while it has room; returns the count and their bytes.
    /// Done ([`Self::done`]) when the last one went.
    pub(crate) fn drain(&mut self, pool: &mut Pool, batch: &mut Batch) -> (usize, u64) {
        let (mut n, mut bytes) = (0, 0u64);
        while self.next < self.n && batch.room() > 0 {
            let mut s = self.inner.segment(&self.p, self.next, &self.outer, pool);
            s.meta.l3 = self.l3;
            s.meta.l4 = self.l4;
            bytes += s.len() as u64;
            batch.push(s);
            self.next += 1;
            n += 1;
        }
        (n, bytes)
    }

    /// Whether every segment went.
    pub(crate) fn done(&self) -> bool {
        self.next >= self.n
    }

    /// The super-frame, to free once done.
    pub(crate) fn into_packet(self) -> Packet {
        self.p
    }
}

/// A received encapsulated super-frame, as the datapath gets it.
pub(crate) enum Rx {
    /// Whole: a TCP or UDP (USO) one in VXLAN or GENEVE
    /// ([`datapath::gso_tunnel::inner_l3_after`] finds its inner IP header where the header
    /// says), `gso_size` the MSS or datagram size, marked
    /// ([`datapath::packet::PacketMeta::tunnel_gso`]); `udp` for USO inside.
    Whole { p: Packet, udp: bool },
    /// Cut on receive: a tunnel header of another kind, or outer lengths past 16 bits.
    Cut(RxTunnel),
}

/// Counters of the encapsulated super-frames a port received (its `xstats`), which its rx
/// queues share.
#[derive(Debug, Default)]
pub(crate) struct RxCounts {
    /// TCP ones handed on whole (`rx_tnl_gso_whole`).
    tcp_whole: AtomicU64,
    /// UDP (USO) ones handed on whole (`rx_tnl_uso_whole`).
    udp_whole: AtomicU64,
    /// Ones cut on receive (`rx_tnl_gso_cut`).
    cut: AtomicU64,
    /// Their segments (`rx_tnl_gso_cut_segments`).
    cut_segments: AtomicU64,
}

impl RxCounts {
    /// Counts `rx`, as [`accept`] took it.
    pub(crate) fn count(&self, rx: &Rx) {
        match rx {
            Rx::Whole { udp: false, .. } => self.tcp_whole.fetch_add(1, Relaxed),
            Rx::Whole { udp: true, .. } => self.udp_whole.fetch_add(1, Relaxed),
            Rx::Cut(t) => {
                self.cut_segments.fetch_add(t.n as u64, Relaxed);
                self.cut.fetch_add(1, Relaxed)
            }
        };
    }

    /// The counters by their `xstats` names.
    pub(crate) fn xstats(&self) -> impl Iterator<Item = (String, u64)> + '_ {
        [
            ("rx_tnl_gso_whole", &self.tcp_whole),
            ("rx_tnl_uso_whole", &self.udp_whole),
            ("rx_tnl_gso_cut", &self.cut),
            ("rx_tnl_gso_cut_segments", &self.cut_segments),
        ]
        .into_iter()
        .map(|(name, n)| (name.to_owned(), n.load(Relaxed)))
    }
}

/// Takes the received frame `p` whose header `hdr` ([`HDR_LEN`] bytes) has a tunnel bit in
/// its `gso_type`: an encapsulated super-frame kept whole or cut on receive, or why it is
/// dropped (module documentation). `p` is handed back on error, for the caller to free.
pub(crate) fn accept(hdr: &[u8], mut p: Packet) -> Result<Rx, (RxDrop, Packet)> {
    match check(hdr, &mut p) {
        Ok((inner, outer, l3, l4)) => {
            if datapath::gso_tunnel::inner_l3_after(p.data(), outer.l4) == Some(inner.l3())
                && datapath::gso_tunnel::set_outer_lengths(&mut p, &outer).is_ok()
            {
                let m = &mut p.meta;
                (m.l3, m.l4) = (l3, l4);
                m.set_tunnel_gso(true);
                if outer.csum {
                    // To be completed for each segment: nothing for `tnl_pop` to verify.
                    m.rx_csum = RX_CSUM_L4_GOOD;
                }
                let udp = matches!(inner, Inner::Udp(_));
                return Ok(Rx::Whole { p, udp });
            }
            Ok(Rx::Cut(RxTunnel::new(p, inner, outer, l3, l4)))
        }
        Err(e) => Err((e, p)),
    }
}

/// [`accept`] cutting every frame it takes (the cut an output makes of one kept whole).
#[cfg(test)]
fn cut(hdr: &[u8], mut p: Packet) -> Result<RxTunnel, (RxDrop, Packet)> {
    match check(hdr, &mut p) {
        Ok((inner, outer, l3, l4)) => Ok(RxTunnel::new(p, inner, outer, l3, l4)),
        Err(e) => Err((e, p)),
    }
}

/// [`accept`]'s checks: the headers where `hdr` says, of the kinds it says.
fn check(hdr: &[u8], p: &mut Packet) -> Result<(Inner, Outer, u16, u16), RxDrop> {
    let Some(h) = hdr.get(..HDR_LEN) else {
        return Err(RxDrop::GsoType);
    };
    let tunnel = h[1] & GSO_UDP_TUNNEL;
    let inner_ty = h[1] & !(GSO_UDP_TUNNEL | GSO_ECN);
    let udp = inner_ty == GSO_UDP_L4;
    let known = matches!(inner_ty, GSO_TCPV4 | GSO_TCPV6) || udp && h[1] & GSO_ECN == 0;
    if tunnel == GSO_UDP_TUNNEL || !known {
        return Err(RxDrop::GsoType);
    }
    let csum_offset = if udp { 6 } else { 16 };
    if h[0] & F_NEEDS_CSUM == 0 || u16::from_le_bytes([h[8], h[9]]) != csum_offset {
        return Err(RxDrop::GsoHeader);
    }
    let le = |at: usize| usize::from(u16::from_le_bytes([h[at], h[at + 1]]));
    let gso_size = le(4) as u16;
    if gso_size < if udp { 1 } else { MIN_MSS } {
        return Err(RxDrop::GsoSize);
    }
    let (inner_nh, outer_th, csum_start) = (le(INNER_NH), le(OUTER_TH), le(6));
    if inner_nh >= p.len() || outer_th + 8 > p.len() {
        return Err(RxDrop::GsoHeader);
    }
    let (l3, l4) = (p.meta.l3, p.meta.l4);
    p.meta.gso_size = gso_size;
    p.meta.l3 = inner_nh as u16;
    // The outer checksum as the flag says: 0 (none), or on (its field is rewritten per
    // segment, so any value but 0 says so).
    let csum = h[0] & F_UDP_TUNNEL_CSUM != 0;
    let f = p.data_mut();
    let c = if csum {
        u16::from_be_bytes([f[outer_th + 6], f[outer_th + 7]]).max(1)
    } else {
        0
    };
    f[outer_th + 6..outer_th + 8].copy_from_slice(&c.to_be_bytes());
    let inner = if udp {
        Inner::Udp(UdpSuper::of(p).map_err(why_super)?)
    } else {
        let t = TcpSuper::of(p).map_err(why_super)?;
        if t.ipv6 != (inner_ty == GSO_TCPV6) {
            return Err(RxDrop::GsoHeader);
        }
        Inner::Tcp(t)
    };
    let outer = Outer::around(p, inner.l3())
        .map_err(why_super)?
        .ok_or(RxDrop::GsoHeader)?;
    let outer_v6 = tunnel == GSO_UDP_TUNNEL_IPV6;
    if inner.l4() != csum_start || outer.l4 != outer_th || outer.ipv6 != outer_v6 {
        return Err(RxDrop::GsoHeader);
    }
    Ok((inner, outer, l3, l4))
}

/// For the `vnet_tnl` fuzz target and its regression test (not an API): the first
/// [`HDR_LEN`] bytes of `data` as the header the kernel wrote, the rest as the frame, received
/// as a tap that took UDP-tunnel GSO receives it. Returns the segments it made (0 for a
/// refused frame, with the reason). Checks what must hold of every segment: no longer than
/// the super-frame's headers plus one MSS (or datagram size), and their payloads together the
/// super-frame's. A frame kept whole (TCP or UDP inside) is popped as VXLAN and as GENEVE
/// (each a pop or a counted drop), then cut as an output cuts it.
#[doc(hidden)]
pub fn fuzz_rx(data: &[u8]) -> (usize, Option<&'static str>) {
    let Some((hdr, frame)) = data.split_at_checked(HDR_LEN) else {
        return (0, Some("short"));
    };
    let mut pool = Pool::new(64, 0);
    let p = pool.packet_from(frame, 1);
    let mut t = match accept(hdr, p) {
        Ok(Rx::Cut(t)) => t,
        Ok(Rx::Whole { p, .. }) => return (fuzz_whole(p, &mut pool), None),
        Err((e, p)) => {
            pool.free(p);
            return (0, Some(e.name()));
        }
    };
    let (hdr_len, mss) = (t.inner.hdr_len(), t.inner.size());
    let payload = frame.len() - hdr_len;
    let (mut n, mut got) = (0, 0);
    let mut batch = Batch::new();
    while !t.done() {
        let (k, _) = t.drain(&mut pool, &mut batch);
        assert!(k > 0, "no progress");
        for s in batch.drain() {
            assert!(s.len() <= hdr_len + mss, "segment of {} bytes", s.len());
            assert_eq!(s.meta.gso_size, 0);
            got += s.len() - hdr_len;
            n += 1;
            pool.free(s);
        }
    }
    assert_eq!(got, payload, "the payload, cut");
    pool.free(t.into_packet());
    (n, None)
}

/// [`fuzz_rx`] of a frame kept whole.
fn fuzz_whole(mut p: Packet, pool: &mut Pool) -> usize {
    use datapath::tunnel::{TunnelKind, tnl_pop};
    for kind in [TunnelKind::VXLAN, TunnelKind::GENEVE] {
        let mut c = pool.copy_of(&p, p.len());
        if tnl_pop(&mut c, kind).is_ok() {
            assert!(!c.meta.tunnel_gso(), "popped: a plain super-frame");
        }
        pool.free(c);
    }
    datapath::gso_tunnel::settle_received(&mut p).expect("a frame kept whole settles");
    let t = Inner::of(&p).expect("its inner TCP or UDP headers");
    let o = Outer::around(&p, t.l3())
        .ok()
        .flatten()
        .expect("its outer headers");
    let n = t.n_segments(&p);
    let (hdr_len, size) = (t.hdr_len(), t.size());
    let mut got = 0;
    for k in 0..n {
        let s = t.segment(&p, k, &o, pool);
        assert!(s.len() <= hdr_len + size, "segment of {} bytes", s.len());
        assert_eq!(s.meta.gso_size, 0);
        got += s.len() - hdr_len;
        pool.free(s);
    }
    assert_eq!(got, p.len() - hdr_len, "the payload, cut");
    pool.free(p);
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use datapath::actions::{DpAction, TnlTemplate};
    use flow::odp::PortNames;
    use std::net::{Ipv4Addr, Ipv6Addr};
    use wire::{IpProtocol, checksum};

    /// A `tnl_push` of VXLAN or GENEVE (with a 4-byte option) over IPv4 or IPv6, the outer UDP
    /// checksum on or off; and the tunnel header's length.
    fn template(geneve: bool, ipv6: bool, csum: bool) -> (TnlTemplate, usize) {
        let (eth_type, ip, ip_len) = if ipv6 {
            let ip = "ipv6(src=fd01::1,dst=fd01::2,label=0,proto=17,tclass=0x0,hlimit=64)";
            ("0x86dd", ip, 40)
        } else {
            let ip = "ipv4(src=172.31.250.1,dst=172.31.250.2,proto=17,tos=0,ttl=64,frag=0x4000)";
            ("0x0800", ip, 20)
        };
        let (ty, port, tnl, tlen) = if geneve {
            let g = "geneve(crit,vni=0x7b,options({class=0xffff,type=0x80,len=4,0xa}))";
            (5, 6081, g, 16)
        } else {
            (4, 4789, "vxlan(flags=0x8000000,vni=0x64)", 8)
        };
        let csum = if csum { "0xffff" } else { "0x0" };
        let size = 14 + ip_len + 8 + tlen;
        let text = format!(
            "tnl_push(tnl_port(9),header(size={size},type={ty},eth(dst=8c:dc:d4:ab:58:48,\
             src=8c:dc:d4:ab:5b:f0,dl_type={eth_type}),{ip},udp(src=0,dst={port},csum={csum}),\
             {tnl}),out_port(0))"
        );
        let acts = flow::odp::parse_actions(&text, &mut PortNames::new()).unwrap();
        let compiled = datapath::actions::compile(&acts).unwrap();
        let DpAction::TnlPush(t) = &compiled[0] else {
            panic!("not a push")
        };
        ((**t).clone(), tlen)
    }

    /// A TCP super-frame with `payload` bytes (IPv4 or IPv6, 12 bytes of TCP options).
    fn super_frame(ipv6: bool, payload: usize) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
        let tcp_len = (32 + payload) as u16;
        if ipv6 {
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
            f.extend_from_slice(&tcp_len.to_be_bytes());
            f.extend_from_slice(&[6, 64]);
            f.extend_from_slice(&"fd00::1".parse::<Ipv6Addr>().unwrap().octets());
            f.extend_from_slice(&"fd00::2".parse::<Ipv6Addr>().unwrap().octets());
        } else {
            f.extend_from_slice(&[0x08, 0x00, 0x45, 0x00]);
            f.extend_from_slice(&(20 + tcp_len).to_be_bytes());
            f.extend_from_slice(&[0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        }
        f.extend_from_slice(&[0x9c, 0x40, 0x13, 0x89, 0, 0, 0, 1, 0, 0, 0, 1]);
        f.extend_from_slice(&[0x80, 0x18, 0x01, 0xf5, 0xbe, 0xef, 0, 0]);
        f.extend_from_slice(&[1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 7]);
        f.extend((0..payload).map(|i| (i * 7) as u8));
        f
    }

    fn le(h: &[u8], at: usize) -> usize {
        usize::from(u16::from_le_bytes([h[at], h[at + 1]]))
    }

    fn pseudo(f: &[u8], l3: usize, proto: IpProtocol, len: usize) -> u16 {
        if f[l3] >> 4 == 6 {
            let a = |o: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&f[o..o + 16]).unwrap());
            checksum::pseudo_header_v6(&a(l3 + 8), &a(l3 + 24), proto, len as u32)
        } else {
            let a = |o: usize| Ipv4Addr::from(<[u8; 4]>::try_from(&f[o..o + 4]).unwrap());
            checksum::pseudo_header_v4(&a(l3 + 12), &a(l3 + 16), proto, len as u16)
        }
    }

    /// Whether the checksum of the L4 header at `l4` (IP header at `l3`) verifies.
    fn verifies(f: &[u8], l3: usize, l4: usize, proto: IpProtocol) -> bool {
        let ph = pseudo(f, l3, proto, f.len() - l4);
        checksum::combine(&[ph, checksum::data(&f[l4..])]) == 0xffff
    }

    #[test]
    fn encapsulated_tcp_super_frames_cross_whole_and_are_kept_whole_on_receive() {
        let mut pool = Pool::new(256, 0);
        each_shape(|g, o, i, c, what| round_trip(&mut pool, g, o, i, c, what));
    }

    /// Calls `f` for every tunnel shape: VXLAN or GENEVE, IPv4 or IPv6 outside and inside,
    /// the outer checksum off or on, with a text naming it.
    fn each_shape(mut f: impl FnMut(bool, bool, bool, bool, &str)) {
        for geneve in [false, true] {
            for outer_v6 in [false, true] {
                for inner_v6 in [false, true] {
                    for csum in [false, true] {
                        let what = format!(
                            "geneve {geneve} outer v6 {outer_v6} inner v6 {inner_v6} csum {csum}"
                        );
                        f(geneve, outer_v6, inner_v6, csum, &what);
                    }
                }
            }
        }
    }

    fn round_trip(
        pool: &mut Pool,
        geneve: bool,
        outer_v6: bool,
        inner_v6: bool,
        csum: bool,
        what: &str,
    ) {
        let (t, tlen) = template(geneve, outer_v6, csum);
        let mut p = Packet::from_slice(&super_frame(inner_v6, 5000));
        p.meta.l3 = 14;
        p.meta.gso_size = 1400;
        datapath::gso_tunnel::push(&mut p, &t).unwrap();
        let h = gso_hdr(&mut p).expect(what);
        let ol4 = 14 + if outer_v6 { 40 } else { 20 };
        let il3 = ol4 + 8 + tlen + 14;
        let il4 = il3 + if inner_v6 { 40 } else { 20 };
        let outer_bit = if outer_v6 {
            GSO_UDP_TUNNEL_IPV6
        } else {
            GSO_UDP_TUNNEL_IPV4
        };
        let inner_ty = if inner_v6 { GSO_TCPV6 } else { GSO_TCPV4 };
        assert_eq!(h[1], outer_bit | inner_ty, "{what}");
        let flags = F_NEEDS_CSUM | if csum { F_UDP_TUNNEL_CSUM } else { 0 };
        assert_eq!(h[0], flags, "{what}");
        assert_eq!((le(&h, 2), le(&h, 4)), (il4 + 32, 1400), "{what}");
        assert_eq!((le(&h, 6), le(&h, 8)), (il4, 16), "{what}");
        assert_eq!((le(&h, OUTER_TH), le(&h, INNER_NH)), (ol4, il3), "{what}");
        assert!(h[10..OUTER_TH].iter().all(|&b| b == 0), "{what}");
        // The checksum fields hold the pseudo-header sums Linux's segmentation expects.
        let f = p.data();
        let be = |at: usize| u16::from_be_bytes([f[at], f[at + 1]]);
        assert_eq!(
            be(il4 + 16),
            pseudo(f, il3, IpProtocol::TCP, f.len() - il4),
            "{what}"
        );
        let udp = if csum {
            pseudo(f, 14, IpProtocol::UDP, f.len() - ol4)
        } else {
            0
        };
        assert_eq!(be(ol4 + 6), udp, "{what}");
        assert_eq!(usize::from(be(ol4 + 4)), f.len() - ol4, "{what}");
        // What the kernel would hand a reader: the same header and frame.
        let segs = received_whole(pool, &h, f, outer_v6, false, what);
        let mut payload = 0;
        for f in &segs {
            assert!(verifies(f, il3, il4, IpProtocol::TCP), "{what}: inner TCP");
            outer_csum_holds(f, ol4, csum, what);
            payload += f.len() - il4 - 32;
        }
        assert_eq!(payload, 5000, "{what}");
        pool.free(p);
    }

    /// Segment `f`'s outer UDP checksum (its header at `ol4`): verifies when `csum`, else 0.
    fn outer_csum_holds(f: &[u8], ol4: usize, csum: bool, what: &str) {
        if csum {
            assert!(verifies(f, 14, ol4, IpProtocol::UDP), "{what}: outer UDP");
        } else {
            assert_eq!(&f[ol4 + 6..ol4 + 8], &[0, 0], "{what}");
        }
    }

    /// Receives frame `f` behind header `h` as a tap that took UDP-tunnel GSO does: kept whole
    /// as it came (TCP or, `udp`, UDP inside), and with its outer lengths 0 (Linux's for a
    /// frame beyond 64 KiB) made the whole frame's, for the switch to parse its outer headers.
    /// Returns the segments (datagrams) an output cuts the whole frame into, checked to be
    /// byte for byte those the cut on receive makes.
    fn received_whole(
        pool: &mut Pool,
        h: &[u8],
        f: &[u8],
        outer_v6: bool,
        udp: bool,
        what: &str,
    ) -> Vec<Vec<u8>> {
        let ol4 = 14 + if outer_v6 { 40 } else { 20 };
        let q = pool.packet_from(f, 3);
        let Ok(Rx::Whole { p: whole, udp: u }) = accept(h, q) else {
            panic!("{what}: refused or cut")
        };
        assert_eq!(u, udp, "{what}: its inner kind");
        assert_eq!(whole.data(), f, "{what}: kept as it came");
        let mut z = f.to_vec();
        z[ol4 + 4..ol4 + 6].fill(0);
        if outer_v6 {
            z[18..20].fill(0);
        } else {
            z[16..18].fill(0);
            z[24..26].fill(0);
            let c = !checksum::data(&z[14..34]);
            z[24..26].copy_from_slice(&c.to_be_bytes());
        }
        let Ok(Rx::Whole { p: w, .. }) = accept(h, pool.packet_from(&z, 3)) else {
            panic!("{what}: lengths 0 refused or cut")
        };
        assert_eq!(w.data(), f, "{what}: lengths 0");
        pool.free(w);
        let cut_whole = cut_as_output(whole, pool);
        let Ok(mut rx) = cut(h, pool.packet_from(f, 3)) else {
            panic!("{what}: refused")
        };
        let segs = drain_all(&mut rx, pool, what);
        pool.free(rx.into_packet());
        assert_eq!(segs.len(), cut_whole.len(), "{what}");
        for (k, (s, w)) in segs.iter().zip(&cut_whole).enumerate() {
            assert!(s == w, "{what}: segment {k} as an output cuts it");
        }
        segs
    }

    /// Every segment `rx` hands on, as bytes.
    fn drain_all(rx: &mut RxTunnel, pool: &mut Pool, what: &str) -> Vec<Vec<u8>> {
        let mut batch = Batch::new();
        let mut segs = vec![];
        while !rx.done() {
            let (n, _) = rx.drain(pool, &mut batch);
            assert!(n > 0, "{what}");
            for s in batch.drain() {
                assert_eq!(s.meta.gso_size, 0, "{what}");
                segs.push(s.data().to_vec());
                pool.free(s);
            }
        }
        segs
    }

    /// The segments of frame `p`, received whole, as an output that does not take it whole
    /// cuts it ([`datapath::super_frame::Cut`]).
    fn cut_as_output(mut p: Packet, pool: &mut Pool) -> Vec<Vec<u8>> {
        assert!(p.meta.tunnel_gso() && p.meta.gso_size != 0);
        datapath::gso_tunnel::settle_received(&mut p).unwrap();
        let cut = datapath::super_frame::Cut::of(&p).unwrap();
        let segs = (0..cut.n_segments(&p))
            .map(|k| {
                let s = cut.segment(&p, k, pool);
                let v = s.data().to_vec();
                pool.free(s);
                v
            })
            .collect();
        pool.free(p);
        segs
    }

    /// A UDP super-frame with `payload` bytes (IPv4 or IPv6).
    fn udp_super_frame(ipv6: bool, payload: usize) -> Vec<u8> {
        let mut f = super_frame(ipv6, 0);
        let l4 = if ipv6 { 54 } else { 34 };
        f.truncate(l4);
        let udp_len = (8 + payload) as u16;
        if ipv6 {
            f[18..20].copy_from_slice(&udp_len.to_be_bytes());
            f[20] = 17;
        } else {
            f[16..18].copy_from_slice(&(20 + udp_len).to_be_bytes());
            f[23] = 17;
        }
        f.extend_from_slice(&[0x9c, 0x40, 0x13, 0x89]);
        f.extend_from_slice(&udp_len.to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend((0..payload).map(|i| (i * 5) as u8));
        f
    }

    /// The header a kernel writes for a UDP super-frame of 1000-byte datagrams that a plain
    /// `tnl_push` of `t` (`tlen` bytes of tunnel header) encapsulated in `f`.
    fn udp_hdr(outer_v6: bool, inner_v6: bool, csum: bool, tlen: usize) -> [u8; HDR_LEN] {
        let ol4 = 14 + if outer_v6 { 40 } else { 20 };
        let il3 = ol4 + 8 + tlen + 14;
        let il4 = il3 + if inner_v6 { 40 } else { 20 };
        let mut h = [0u8; HDR_LEN];
        h[0] = F_NEEDS_CSUM | if csum { F_UDP_TUNNEL_CSUM } else { 0 };
        h[1] = GSO_UDP_L4
            | if outer_v6 {
                GSO_UDP_TUNNEL_IPV6
            } else {
                GSO_UDP_TUNNEL_IPV4
            };
        for (at, v) in [
            (2, il4 + 8),
            (4, 1000),
            (6, il4),
            (8, 6),
            (OUTER_TH, ol4),
            (INNER_NH, il3),
        ] {
            h[at..at + 2].copy_from_slice(&(v as u16).to_le_bytes());
        }
        h
    }

    #[test]
    fn an_inner_udp_super_frame_is_kept_whole_on_receive() {
        let mut pool = Pool::new(64, 0);
        for (outer_v6, inner_v6, csum) in [
            (false, false, true),
            (true, true, false),
            (false, true, true),
        ] {
            let what = format!("outer v6 {outer_v6} inner v6 {inner_v6} csum {csum}");
            let (t, tlen) = template(false, outer_v6, csum);
            let mut p = Packet::from_slice(&udp_super_frame(inner_v6, 3000));
            p.meta.l3 = 14;
            datapath::rewrite::tnl_push(&mut p, &t).unwrap();
            let ol4 = 14 + if outer_v6 { 40 } else { 20 };
            let il3 = ol4 + 8 + tlen + 14;
            let il4 = il3 + if inner_v6 { 40 } else { 20 };
            let mut h = udp_hdr(outer_v6, inner_v6, csum, tlen);
            let segs = received_whole(&mut pool, &h, p.data(), outer_v6, true, &what);
            assert_eq!(segs.len(), 3, "{what}");
            for f in &segs {
                assert_eq!(f.len(), il4 + 8 + 1000, "{what}");
                assert!(verifies(f, il3, il4, IpProtocol::UDP), "{what}: inner UDP");
                if csum {
                    assert!(verifies(f, 14, ol4, IpProtocol::UDP), "{what}: outer UDP");
                } else {
                    assert_eq!(&f[ol4 + 6..ol4 + 8], &[0, 0], "{what}");
                }
            }
            // With the TCP checksum offset it is not what its type says.
            h[8] = 16;
            let q = pool.packet_from(p.data(), 3);
            let Err((e, q)) = accept(&h, q) else {
                panic!("{what}: taken")
            };
            assert_eq!(e, RxDrop::GsoHeader, "{what}");
            pool.free(q);
            // A datagram size that makes more than 128 datagrams (UDP_MAX_SEGMENTS).
            h[8] = 6;
            h[4..6].copy_from_slice(&20u16.to_le_bytes());
            let q = pool.packet_from(p.data(), 3);
            let Err((e, q)) = accept(&h, q) else {
                panic!("{what}: taken")
            };
            assert_eq!(e, RxDrop::GsoSize, "{what}");
            pool.free(q);
        }
    }

    #[test]
    fn a_tunnel_header_of_another_layout_is_cut_on_receive() {
        let mut pool = Pool::new(64, 0);
        let (t, tlen) = template(false, false, true);
        let mut p = Packet::from_slice(&udp_super_frame(false, 3000));
        p.meta.l3 = 14;
        datapath::rewrite::tnl_push(&mut p, &t).unwrap();
        // VXLAN's reserved bytes holding GENEVE's protocol (Transparent Ethernet Bridging):
        // read as GENEVE, its inner IP header is not where the kernel's header says.
        p.data_mut()[42 + 2..42 + 4].copy_from_slice(&[0x65, 0x58]);
        let h = udp_hdr(false, false, true, tlen);
        let Ok(Rx::Cut(mut rx)) = accept(&h, pool.packet_from(p.data(), 3)) else {
            panic!("refused or whole")
        };
        let segs = drain_all(&mut rx, &mut pool, "cut");
        pool.free(rx.into_packet());
        assert_eq!(segs.len(), 3);
        let il4 = 14 + 20 + 8 + tlen + 14 + 20;
        for f in &segs {
            assert!(verifies(f, il4 - 20, il4, IpProtocol::UDP), "inner UDP");
            assert!(verifies(f, 14, 34, IpProtocol::UDP), "outer UDP");
        }
    }

    #[test]
    fn encapsulated_udp_super_frames_cross_whole_as_udp_l4_in_a_tunnel() {
        let mut pool = Pool::new(64, 0);
        each_shape(|g, o, i, c, what| udp_round_trip(&mut pool, g, o, i, c, what));
    }

    fn udp_round_trip(
        pool: &mut Pool,
        geneve: bool,
        outer_v6: bool,
        inner_v6: bool,
        csum: bool,
        what: &str,
    ) {
        let (t, tlen) = template(geneve, outer_v6, csum);
        let mut p = Packet::from_slice(&udp_super_frame(inner_v6, 3500));
        p.meta.l3 = 14;
        p.meta.gso_size = 1200;
        datapath::gso_tunnel::push(&mut p, &t).unwrap();
        let h = gso_hdr(&mut p).expect(what);
        let ol4 = 14 + if outer_v6 { 40 } else { 20 };
        let il3 = ol4 + 8 + tlen + 14;
        let il4 = il3 + if inner_v6 { 40 } else { 20 };
        let outer_bit = if outer_v6 {
            GSO_UDP_TUNNEL_IPV6
        } else {
            GSO_UDP_TUNNEL_IPV4
        };
        assert_eq!(h[1], outer_bit | GSO_UDP_L4, "{what}");
        let flags = F_NEEDS_CSUM | if csum { F_UDP_TUNNEL_CSUM } else { 0 };
        assert_eq!(h[0], flags, "{what}");
        assert_eq!((le(&h, 2), le(&h, 4)), (il4 + 8, 1200), "{what}");
        assert_eq!((le(&h, 6), le(&h, 8)), (il4, 6), "{what}");
        assert_eq!((le(&h, OUTER_TH), le(&h, INNER_NH)), (ol4, il3), "{what}");
        assert!(h[10..OUTER_TH].iter().all(|&b| b == 0), "{what}");
        let f = p.data();
        let be = |at: usize| u16::from_be_bytes([f[at], f[at + 1]]);
        assert_eq!(
            usize::from(be(il4 + 4)),
            f.len() - il4,
            "{what}: inner UDP length"
        );
        assert_eq!(
            be(il4 + 6),
            pseudo(f, il3, IpProtocol::UDP, f.len() - il4),
            "{what}: inner pseudo-header sum"
        );
        let udp = if csum {
            pseudo(f, 14, IpProtocol::UDP, f.len() - ol4)
        } else {
            0
        };
        assert_eq!(be(ol4 + 6), udp, "{what}");
        assert_eq!(usize::from(be(ol4 + 4)), f.len() - ol4, "{what}");
        // What the kernel would hand a reader: the same header and frame, kept whole.
        let segs = received_whole(pool, &h, f, outer_v6, true, what);
        assert_eq!(segs.len(), 3, "{what}");
        for f in &segs {
            assert!(verifies(f, il3, il4, IpProtocol::UDP), "{what}: inner UDP");
            outer_csum_holds(f, ol4, csum, what);
        }
        pool.free(p);
    }

    #[test]
    fn refused_headers_name_their_reason() {
        let mut pool = Pool::new(64, 0);
        let frame = [0u8; 200];
        let mut h = [0u8; HDR_LEN];
        h[0] = F_NEEDS_CSUM;
        h[8] = 16;
        h[4..6].copy_from_slice(&1400u16.to_le_bytes());
        let why = |h: &[u8], pool: &mut Pool| {
            let p = pool.packet_from(&frame, 1);
            match accept(h, p) {
                Ok(Rx::Cut(t)) => {
                    pool.free(t.into_packet());
                    None
                }
                Ok(Rx::Whole { p, .. }) => {
                    pool.free(p);
                    None
                }
                Err((e, p)) => {
                    pool.free(p);
                    Some(e)
                }
            }
        };
        h[1] = GSO_UDP_TUNNEL | GSO_TCPV4;
        assert_eq!(why(&h, &mut pool), Some(RxDrop::GsoType));
        h[1] = GSO_UDP_TUNNEL_IPV4 | GSO_UDP_L4 | GSO_ECN;
        assert_eq!(
            why(&h, &mut pool),
            Some(RxDrop::GsoType),
            "USO with ECN inside"
        );
        h[1] = GSO_UDP_TUNNEL_IPV4 | 3;
        assert_eq!(why(&h, &mut pool), Some(RxDrop::GsoType), "UFO inside");
        h[1] = GSO_UDP_TUNNEL_IPV4 | GSO_TCPV4;
        assert_eq!(why(&h[..12], &mut pool), Some(RxDrop::GsoType), "short");
        h[0] = 0;
        assert_eq!(why(&h, &mut pool), Some(RxDrop::GsoHeader), "no csum");
        h[0] = F_NEEDS_CSUM;
        h[4..6].copy_from_slice(&8u16.to_le_bytes());
        assert_eq!(why(&h, &mut pool), Some(RxDrop::GsoSize));
        h[4..6].copy_from_slice(&1400u16.to_le_bytes());
        h[OUTER_TH..OUTER_TH + 2].copy_from_slice(&60000u16.to_le_bytes());
        assert_eq!(why(&h, &mut pool), Some(RxDrop::GsoHeader), "offsets");
        h[OUTER_TH..OUTER_TH + 2].copy_from_slice(&34u16.to_le_bytes());
        h[INNER_NH..INNER_NH + 2].copy_from_slice(&64u16.to_le_bytes());
        // A frame of zeros: no inner IP header there.
        assert_eq!(why(&h, &mut pool), Some(RxDrop::GsoHeader), "headers");
    }
}
