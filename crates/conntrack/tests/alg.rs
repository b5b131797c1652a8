//! The FTP and TFTP ALGs through [`Conntrack::process`] (`src/alg.rs` wired into
//! `src/table.rs`), with scripted sessions of built packets and explicit clocks.
//!
//! The expected behaviour is OVS's userspace conntrack (`lib/conntrack.c`): a control connection
//! committed with `helper=ftp` (`alg=ftp`) or `helper=tftp` expects its data connection, whose
//! first packet is then `+new+rel` and which, committed, stays `+rel` with its parent's mark,
//! label and original tuple; under NAT the announced address is rewritten and later sequence
//! and acknowledgment numbers are adjusted by the length change.

use std::net::IpAddr;

use conntrack::alg::{AlgCounter, AlgRewrite, EXPECT_TIMEOUT_MS, Helper};
use conntrack::state::*;
use conntrack::{
    Conntrack, CtArgs, CtCache, CtMeta, CtPacket, NatKind, NatRewrite, NatSpec, Tuple,
};

mod common;
use common::{fold, sum};

const ETH: usize = 14;
const TCP: u8 = 6;
const UDP: u8 = 17;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn key(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v) => {
            let mut k = [0; 16];
            k[..4].copy_from_slice(&v.octets());
            k
        }
        IpAddr::V6(v) => v.octets(),
    }
}

/// Ethernet, IPv4 or IPv6, and `l4` (its checksum at `csum_at` filled in).
fn build(src: IpAddr, dst: IpAddr, proto: u8, mut l4: Vec<u8>, csum_at: usize) -> Vec<u8> {
    let v6 = src.is_ipv6();
    let (s, d) = (key(src), key(dst));
    let alen = if v6 { 16 } else { 4 };
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&s[..alen]);
    pseudo.extend_from_slice(&d[..alen]);
    pseudo.extend_from_slice(&[0, proto]);
    pseudo.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    let c = fold(sum(&pseudo) + sum(&l4));
    l4[csum_at..csum_at + 2].copy_from_slice(&c.to_be_bytes());
    let mut f = vec![0u8; ETH];
    f[12..14].copy_from_slice(if v6 { &[0x86, 0xdd] } else { &[0x08, 0x00] });
    if v6 {
        let mut h = vec![0u8; 40];
        h[0] = 0x60;
        h[4..6].copy_from_slice(&(l4.len() as u16).to_be_bytes());
        h[6] = proto;
        h[7] = 64;
        h[8..24].copy_from_slice(&s);
        h[24..40].copy_from_slice(&d);
        f.extend_from_slice(&h);
    } else {
        let mut h = vec![0u8; 20];
        h[0] = 0x45;
        h[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
        h[8] = 64;
        h[9] = proto;
        h[12..16].copy_from_slice(&s[..4]);
        h[16..20].copy_from_slice(&d[..4]);
        let c = fold(sum(&h));
        h[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&h);
    }
    f.extend_from_slice(&l4);
    f
}

/// A TCP segment: flags as scapy spells them.
#[allow(clippy::too_many_arguments)]
fn tcp(
    src: IpAddr,
    sport: u16,
    dst: IpAddr,
    dport: u16,
    flags: &str,
    seq: u32,
    ack: u32,
    payload: &[u8],
) -> Vec<u8> {
    let mut b = vec![0u8; 20];
    b[0..2].copy_from_slice(&sport.to_be_bytes());
    b[2..4].copy_from_slice(&dport.to_be_bytes());
    b[4..8].copy_from_slice(&seq.to_be_bytes());
    b[8..12].copy_from_slice(&ack.to_be_bytes());
    b[12] = 5 << 4;
    b[13] = flags
        .chars()
        .map(|c| match c {
            'F' => 0x01,
            'S' => 0x02,
            'R' => 0x04,
            'P' => 0x08,
            'A' => 0x10,
            _ => panic!("flag {c}"),
        })
        .fold(0, |a, b| a | b);
    b[14..16].copy_from_slice(&29200u16.to_be_bytes());
    b.extend_from_slice(payload);
    build(src, dst, TCP, b, 16)
}

fn udp(src: IpAddr, sport: u16, dst: IpAddr, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&sport.to_be_bytes());
    b.extend_from_slice(&dport.to_be_bytes());
    b.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(payload);
    build(src, dst, UDP, b, 6)
}

/// The TCP payload of a frame built here.
fn tcp_payload(frame: &[u8]) -> &[u8] {
    let l4 = ETH + if frame[ETH] >> 4 == 6 { 40 } else { 20 };
    &frame[l4 + usize::from(frame[l4 + 12] >> 4) * 4..]
}

fn tcp_l4(frame: &[u8]) -> &[u8] {
    &frame[ETH + if frame[ETH] >> 4 == 6 { 40 } else { 20 }..]
}

struct Ct {
    ct: Conntrack,
    cache: CtCache,
}

impl Ct {
    fn new() -> Ct {
        Ct {
            ct: Conntrack::new(),
            cache: CtCache::new(),
        }
    }

    fn run_as(
        &mut self,
        frame: &[u8],
        args: &CtArgs,
        now: u64,
        natted: bool,
    ) -> (CtMeta, Option<NatRewrite>) {
        let pkt = CtPacket {
            frame,
            l3: ETH,
            v6: frame[ETH] >> 4 == 6,
            frag_l4_len: None,
            verified: false,
            natted,
        };
        let mut md = CtMeta::default();
        let rw = self.ct.process(&mut self.cache, &pkt, &mut md, args, now);
        (md, rw)
    }

    fn run(&mut self, frame: &[u8], args: &CtArgs, now: u64) -> (CtMeta, Option<NatRewrite>) {
        self.run_as(frame, args, now, false)
    }

    fn state(&mut self, frame: &[u8], args: &CtArgs, now: u64) -> u8 {
        self.run(frame, args, now).0.state
    }
}

fn track(zone: u16) -> CtArgs {
    CtArgs {
        zone,
        ..Default::default()
    }
}

fn commit(zone: u16) -> CtArgs {
    CtArgs {
        commit: true,
        ..track(zone)
    }
}

fn with_helper(a: CtArgs, h: Helper) -> CtArgs {
    CtArgs {
        helper: Some(h),
        ..a
    }
}

fn with_nat(a: CtArgs, n: NatSpec) -> CtArgs {
    CtArgs { nat: Some(n), ..a }
}

fn snat(addr: &str, ports: (u16, u16)) -> NatSpec {
    NatSpec {
        kind: Some(NatKind::Src),
        addr_min: key(ip(addr)),
        addr_max: key(ip(addr)),
        has_addr: true,
        port_min: ports.0,
        port_max: ports.1,
        ..NatSpec::default()
    }
}

fn dnat(addr: &str) -> NatSpec {
    NatSpec {
        kind: Some(NatKind::Dst),
        ..snat(addr, (0, 0))
    }
}

fn names(state: u8) -> String {
    conntrack::state::NAMES
        .iter()
        .filter(|(b, _)| state & b != 0)
        .map(|(_, n)| format!("+{n}"))
        .collect()
}

macro_rules! assert_state {
    ($got:expr, $want:expr) => {{
        let (g, w): (u8, u8) = ($got, $want);
        assert_eq!(names(g), names(w));
    }};
}

/// A control connection's handshake: client `c:cport` to server `s:21` committed with
/// `commit_args`, the server answering to `seen` (the client as the server sees it). Client
/// sequence numbers start at 1000 (first data byte 1001), the server's at 5000.
fn handshake(
    t: &mut Ct,
    c: IpAddr,
    cport: u16,
    s: IpAddr,
    seen: (IpAddr, u16),
    commit_args: &CtArgs,
    later: &CtArgs,
) {
    let (md, _) = t.run(&tcp(c, cport, s, 21, "S", 1000, 0, b""), commit_args, 0);
    assert_eq!(md.state & (TRK | NEW), TRK | NEW, "{}", names(md.state));
    let st = t.state(&tcp(s, 21, seen.0, seen.1, "SA", 5000, 1001, b""), later, 1);
    assert_eq!(st & (EST | RPL | INV), EST | RPL, "{}", names(st));
    let st = t.state(&tcp(c, cport, s, 21, "A", 1001, 5001, b""), later, 2);
    assert_eq!(st & (EST | INV), EST, "{}", names(st));
}

/// Active FTP without NAT: the `PORT` command expects the server's connection from any source
/// port to the announced port; its first packet is `+new+rel` with the parent's mark, label and
/// tuple; committed, the data connection stays `+rel` and keeps them.
#[test]
fn active_ftp_data_connection_is_related() {
    let mut t = Ct::new();
    let (c, s) = (ip("10.1.1.1"), ip("10.1.1.2"));
    let ctl_commit = CtArgs {
        mark: Some((0x5, u32::MAX)),
        label: Some((7, u128::MAX)),
        ..with_helper(commit(1), Helper::Ftp)
    };
    handshake(&mut t, c, 40000, s, (c, 40000), &ctl_commit, &track(1));
    let st = t.state(
        &tcp(s, 21, c, 40000, "PA", 5001, 1001, b"220 ok\r\n"),
        &track(1),
        3,
    );
    assert_state!(st, TRK | EST | RPL);
    let port = b"PORT 10,1,1,1,156,65\r\n";
    let (md, rw) = t.run(&tcp(c, 40000, s, 21, "PA", 1001, 5009, port), &track(1), 4);
    assert_state!(md.state, TRK | EST);
    assert_eq!(rw, None);
    assert_eq!(t.ct.expectations().len(), 1);
    let parent = md.orig;

    // The server connects from port 20 (any port would do) to 40001.
    let data_syn = tcp(s, 20, c, 40001, "S", 9000, 0, b"");
    let (md, _) = t.run(&data_syn, &track(1), 5);
    assert_state!(md.state, TRK | NEW | REL);
    assert_eq!((md.mark, md.label, md.orig), (5, 7, parent));
    let other_sport = tcp(s, 2020, c, 40001, "S", 9000, 0, b"");
    assert_state!(t.state(&other_sport, &track(1), 5), TRK | NEW | REL);
    // Another port, another zone: not expected.
    assert_state!(
        t.state(&tcp(s, 20, c, 40002, "S", 1, 0, b""), &track(1), 5),
        TRK | NEW
    );
    assert_state!(t.state(&data_syn, &track(2), 5), TRK | NEW);

    // Committed (its own mark is ignored: a related connection keeps its parent's).
    let data_commit = CtArgs {
        mark: Some((0x99, u32::MAX)),
        ..commit(1)
    };
    let (md, _) = t.run(&data_syn, &data_commit, 6);
    assert_state!(md.state, TRK | NEW | REL);
    assert_eq!((md.mark, md.label, md.orig), (5, 7, parent));
    assert!(t.ct.expectations().is_empty(), "used once");
    assert_eq!(t.ct.expectations().stats().get(AlgCounter::Used), 1);
    let (md, _) = t.run(
        &tcp(c, 40001, s, 20, "SA", 7000, 9001, b""),
        &data_commit,
        7,
    );
    assert_state!(md.state, TRK | EST | REL | RPL);
    assert_eq!((md.mark, md.label, md.orig), (5, 7, parent));
    // The expectation was used: a second connection to the port is not related.
    assert_state!(t.state(&other_sport, &track(1), 8), TRK | NEW);
    let d = t.ct.dump(Some(1), 8);
    assert_eq!(d.len(), 2);
    assert!(
        d.iter()
            .any(|i| i.orig.dport == 40001 && i.mark == 5 && i.label == 7)
    );
}

/// Without `helper=ftp` on the commit, a `PORT` command expects nothing (OVS: the helper is
/// what gives the connection an ALG, not the port).
#[test]
fn no_helper_no_expectation() {
    let mut t = Ct::new();
    let (c, s) = (ip("10.1.1.1"), ip("10.1.1.2"));
    handshake(&mut t, c, 40000, s, (c, 40000), &commit(1), &track(1));
    let port = b"PORT 10,1,1,1,156,65\r\n";
    t.run(&tcp(c, 40000, s, 21, "PA", 1001, 5001, port), &track(1), 3);
    assert!(t.ct.expectations().is_empty());
    assert_state!(
        t.state(&tcp(s, 20, c, 40001, "S", 1, 0, b""), &track(1), 4),
        TRK | NEW
    );
}

/// Passive FTP over IPv6 (RFC 2428 `229`): the client's connection to the announced port is
/// related; `EPRT |2|` works the same way for active mode.
#[test]
fn ipv6_epsv_and_eprt() {
    let mut t = Ct::new();
    let (c, s) = (ip("fd00::1"), ip("fd00::2"));
    handshake(
        &mut t,
        c,
        40000,
        s,
        (c, 40000),
        &with_helper(commit(0), Helper::Ftp),
        &track(0),
    );
    let epsv = b"229 Entering Extended Passive Mode (|||6446|)\r\n";
    let st = t.state(&tcp(s, 21, c, 40000, "PA", 5001, 1001, epsv), &track(0), 3);
    assert_state!(st, TRK | EST | RPL);
    let data = tcp(c, 40001, s, 6446, "S", 1, 0, b"");
    assert_state!(t.state(&data, &commit(0), 4), TRK | NEW | REL);
    let eprt = b"EPRT |2|fd00::1|5282|\r\n";
    let st = t.state(
        &tcp(c, 40000, s, 21, "PA", 1001, 5001 + epsv.len() as u32, eprt),
        &track(0),
        5,
    );
    assert_state!(st, TRK | EST);
    let data = tcp(s, 20, c, 5282, "S", 1, 0, b"");
    assert_state!(t.state(&data, &track(0), 6), TRK | NEW | REL);
}

/// SNAT of the control connection to a longer address: the `PORT` command's address is
/// rewritten (5 bytes longer), later client sequence numbers move by +5 and the server's
/// acknowledgments by -5 (the tracker sees the client's own numbering, so the server's
/// acknowledgment of the longer payload is in window); the data connection from the server to
/// the translated address is related and translated back to the client.
#[test]
fn ftp_snat_rewrites_port_and_adjusts_sequence_numbers() {
    let mut t = Ct::new();
    let (c, s, n) = (ip("10.1.1.1"), ip("192.0.2.9"), ip("203.0.113.200"));
    let nat = || with_nat(track(1), NatSpec::default());
    let ctl = with_helper(
        with_nat(commit(1), snat("203.0.113.200", (0, 0))),
        Helper::Ftp,
    );
    handshake(&mut t, c, 40000, s, (n, 40000), &ctl, &nat());

    let port = b"PORT 10,1,1,1,156,65\r\n";
    let cmd = tcp(c, 40000, s, 21, "PA", 1001, 5001, port);
    let (md, rw) = t.run(&cmd, &nat(), 3);
    assert_state!(md.state, TRK | EST | SNAT);
    let rw = rw.unwrap();
    assert_eq!(rw.src, Some((key(n), 40000)));
    let a = rw.alg.unwrap();
    assert_eq!(
        (a.seq, a.ack),
        (0, 0),
        "the rewritten segment keeps its numbers"
    );
    let edit = a.payload.unwrap();
    // The text becomes the translated source address, the one the NAT rewrite writes.
    assert_eq!(edit.delta(&key(n)), 5);
    let new = edit.apply_to(tcp_l4(&cmd), &rw.src.unwrap().0).unwrap();
    assert_eq!(&new[20..], b"PORT 203,0,113,200,156,65\r\n");
    // A retransmission is rewritten again, but shifts nothing more.
    let (_, rw) = t.run(&cmd, &nat(), 3);
    assert_eq!(rw.unwrap().alg.unwrap(), a);

    // The server acknowledges the 27 bytes it got: 1028 for it, 1023 for the client.
    let ack = tcp(
        s,
        21,
        n,
        40000,
        "A",
        5001,
        1001 + port.len() as u32 + 5,
        b"",
    );
    let (md, rw) = t.run(&ack, &nat(), 4);
    assert_state!(md.state, TRK | EST | RPL | SNAT);
    let rw = rw.unwrap();
    assert_eq!(rw.dst, Some((key(c), 40000)));
    assert_eq!(
        rw.alg,
        Some(AlgRewrite {
            payload: None,
            seq: 0,
            ack: -5
        })
    );
    // The client's next command is shifted by +5.
    let list = tcp(
        c,
        40000,
        s,
        21,
        "PA",
        1001 + port.len() as u32,
        5001,
        b"LIST\r\n",
    );
    let (md, rw) = t.run(&list, &nat(), 5);
    assert_state!(md.state, TRK | EST | SNAT);
    assert_eq!(
        rw.unwrap().alg,
        Some(AlgRewrite {
            payload: None,
            seq: 5,
            ack: 0
        })
    );
    // Seen again after that ct(nat) translated it (shifted, from the translated address):
    // tracked as the same segment, not adjusted twice.
    let list_natted = tcp(
        n,
        40000,
        s,
        21,
        "PA",
        1006 + port.len() as u32,
        5001,
        b"LIST\r\n",
    );
    let (md, rw) = t.run_as(
        &list_natted,
        &with_nat(commit(1), NatSpec::default()),
        5,
        true,
    );
    assert_state!(md.state, TRK | EST | SNAT);
    assert_eq!(rw, None);
    // Without nat in the ct(): tracked (the acknowledgment still adjusted for the tracker),
    // nothing rewritten.
    let (md, rw) = t.run(&ack, &track(1), 6);
    assert_state!(md.state, TRK | EST | RPL);
    assert_eq!(rw, None);

    // The data connection: server to the translated address and the announced port.
    let data_syn = tcp(s, 20, n, 40001, "S", 9000, 0, b"");
    let (md, _) = t.run(&data_syn, &nat(), 7);
    assert_state!(md.state, TRK | NEW | REL);
    let (md, rw) = t.run(&data_syn, &with_nat(commit(1), NatSpec::default()), 7);
    assert_state!(md.state, TRK | NEW | REL | DNAT);
    let rw = rw.unwrap();
    assert_eq!(
        (rw.src, rw.dst, rw.alg),
        (None, Some((key(c), 40001)), None)
    );
    let (md, rw) = t.run(&tcp(c, 40001, s, 20, "SA", 7000, 9001, b""), &nat(), 8);
    assert_state!(md.state, TRK | EST | REL | RPL | DNAT);
    assert_eq!(rw.unwrap().src, Some((key(n), 40001)));
}

/// DNAT of the control connection (a server behind a virtual address): the `227` reply's
/// private address becomes the virtual one (4 bytes shorter); the server's later sequence
/// numbers move by -4, the client's acknowledgments by +4; the client's data connection to the
/// virtual address is related and translated to the server.
#[test]
fn ftp_dnat_rewrites_pasv_reply() {
    let mut t = Ct::new();
    let (c, vip, srv) = (ip("198.51.100.7"), ip("10.0.0.100"), ip("172.16.100.200"));
    let nat = || with_nat(track(1), NatSpec::default());
    let ctl = with_helper(with_nat(commit(1), dnat("172.16.100.200")), Helper::Ftp);
    // The handshake as the tracker sees it: the server answers from its own address.
    let (md, _) = t.run(&tcp(c, 50000, vip, 21, "S", 1000, 0, b""), &ctl, 0);
    assert_state!(md.state, TRK | NEW | DNAT);
    let st = t.state(&tcp(srv, 21, c, 50000, "SA", 5000, 1001, b""), &nat(), 1);
    assert_state!(st, TRK | EST | RPL | DNAT);
    assert_state!(
        t.state(&tcp(c, 50000, vip, 21, "A", 1001, 5001, b""), &nat(), 2),
        TRK | EST | DNAT
    );
    let pasv = b"227 Entering Passive Mode (172,16,100,200,39,16).\r\n";
    let reply = tcp(srv, 21, c, 50000, "PA", 5001, 1001, pasv);
    let (md, rw) = t.run(&reply, &nat(), 3);
    assert_state!(md.state, TRK | EST | RPL | DNAT);
    let rw = rw.unwrap();
    assert_eq!(rw.src, Some((key(vip), 21)));
    let edit = rw.alg.unwrap().payload.unwrap();
    assert_eq!(edit.delta(&key(vip)), -4);
    assert_eq!(
        &edit.apply_to(tcp_l4(&reply), &rw.src.unwrap().0).unwrap()[20..],
        b"227 Entering Passive Mode (10,0,0,100,39,16).\r\n"
    );
    assert_eq!(tcp_payload(&reply), pasv);
    // The client acknowledges the shorter reply: +4 back to the server's numbering.
    let ack = tcp(
        c,
        50000,
        vip,
        21,
        "A",
        1001,
        5001 + pasv.len() as u32 - 4,
        b"",
    );
    let (md, rw) = t.run(&ack, &nat(), 4);
    assert_state!(md.state, TRK | EST | DNAT);
    assert_eq!(
        rw.unwrap().alg,
        Some(AlgRewrite {
            payload: None,
            seq: 0,
            ack: 4
        })
    );
    let more = tcp(
        srv,
        21,
        c,
        50000,
        "PA",
        5001 + pasv.len() as u32,
        1001,
        b"150 ok\r\n",
    );
    assert_eq!(t.run(&more, &nat(), 5).1.unwrap().alg.unwrap().seq, -4);

    // The client connects to the virtual address: related, translated to the server.
    let data_syn = tcp(c, 50001, vip, 39 * 256 + 16, "S", 1, 0, b"");
    let (md, rw) = t.run(&data_syn, &with_nat(commit(1), NatSpec::default()), 6);
    assert_state!(md.state, TRK | NEW | REL | DNAT);
    assert_eq!(rw.unwrap().dst, Some((key(srv), 39 * 256 + 16)));
}

/// An announcement naming a third host is refused (`+inv`, counted); one cut by a segment
/// boundary is ignored (no expectation, not invalid, counted).
#[test]
fn bad_and_split_announcements() {
    let mut t = Ct::new();
    let (c, s) = (ip("10.1.1.1"), ip("10.1.1.2"));
    handshake(
        &mut t,
        c,
        40000,
        s,
        (c, 40000),
        &with_helper(commit(1), Helper::Ftp),
        &track(1),
    );
    let bounce = b"PORT 10,9,9,9,156,65\r\n";
    let st = t.state(
        &tcp(c, 40000, s, 21, "PA", 1001, 5001, bounce),
        &track(1),
        3,
    );
    assert_state!(st, TRK | INV);
    assert_eq!(t.ct.expectations().stats().get(AlgCounter::BadMessage), 1);
    // A command split over two segments.
    let (a, b) = b"PORT 10,1,1,1,156,65\r\n".split_at(9);
    let st = t.state(&tcp(c, 40000, s, 21, "PA", 1023, 5001, a), &track(1), 4);
    assert_state!(st, TRK | EST);
    let st = t.state(&tcp(c, 40000, s, 21, "PA", 1032, 5001, b), &track(1), 5);
    assert_state!(st, TRK | EST);
    assert!(t.ct.expectations().is_empty());
    assert_eq!(t.ct.expectations().stats().get(AlgCounter::Incomplete), 1);
}

/// An expectation goes when its parent goes (flushed), and expires unused.
#[test]
fn expectations_go_with_parent_and_expire() {
    let mut t = Ct::new();
    let (c, s) = (ip("10.1.1.1"), ip("10.1.1.2"));
    let ftp = with_helper(commit(1), Helper::Ftp);
    handshake(&mut t, c, 40000, s, (c, 40000), &ftp, &track(1));
    let port = b"PORT 10,1,1,1,156,65\r\n";
    t.run(&tcp(c, 40000, s, 21, "PA", 1001, 5001, port), &track(1), 3);
    assert_eq!(t.ct.expectations().len(), 1);
    let data_syn = tcp(s, 20, c, 40001, "S", 1, 0, b"");
    assert_state!(t.state(&data_syn, &track(1), 4), TRK | NEW | REL);
    t.ct.flush(Some(1), None);
    assert!(t.ct.expectations().is_empty());
    assert_state!(t.state(&data_syn, &track(1), 5), TRK | NEW);

    // A second session; its expectation expires unused.
    handshake(&mut t, c, 40010, s, (c, 40010), &ftp, &track(1));
    t.run(&tcp(c, 40010, s, 21, "PA", 1001, 5001, port), &track(1), 10);
    // Kept alive by traffic, the parent outlives the expectation.
    let noop = tcp(c, 40010, s, 21, "PA", 1023, 5001, b"NOOP\r\n");
    t.run(&noop, &track(1), EXPECT_TIMEOUT_MS - 1000);
    assert_state!(
        t.state(&data_syn, &track(1), EXPECT_TIMEOUT_MS),
        TRK | NEW | REL
    );
    assert_state!(
        t.state(&data_syn, &track(1), EXPECT_TIMEOUT_MS + 11),
        TRK | NEW
    );
    t.ct.sweep(EXPECT_TIMEOUT_MS + 11);
    assert!(t.ct.expectations().is_empty());
    assert_eq!(t.ct.expectations().stats().get(AlgCounter::Expired), 1);
}

/// The table's bound: an announcement beyond it is refused and counted, the data connection
/// then is not related.
#[test]
fn expectation_bound() {
    let mut t = Ct::new();
    t.ct.expectations().set_max(1);
    let (c, s) = (ip("10.1.1.1"), ip("10.1.1.2"));
    let ftp = with_helper(commit(1), Helper::Ftp);
    handshake(&mut t, c, 40000, s, (c, 40000), &ftp, &track(1));
    handshake(&mut t, c, 40001, s, (c, 40001), &ftp, &track(1));
    let port = |p: u8| format!("PORT 10,1,1,1,200,{p}\r\n").into_bytes();
    t.run(
        &tcp(c, 40000, s, 21, "PA", 1001, 5001, &port(1)),
        &track(1),
        3,
    );
    t.run(
        &tcp(c, 40001, s, 21, "PA", 1001, 5001, &port(2)),
        &track(1),
        3,
    );
    assert_eq!(t.ct.expectations().len(), 1);
    assert_eq!(t.ct.expectations().stats().get(AlgCounter::Refused), 1);
    assert_state!(
        t.state(&tcp(s, 20, c, 200 * 256 + 1, "S", 1, 0, b""), &track(1), 4),
        TRK | NEW | REL
    );
    assert_state!(
        t.state(&tcp(s, 20, c, 200 * 256 + 2, "S", 1, 0, b""), &track(1), 4),
        TRK | NEW
    );
}

/// TFTP: a read request committed with `helper=tftp` expects the server's answer from any port
/// to the client's port; committed, the transfer is related both ways.
#[test]
fn tftp_reply_is_related() {
    let mut t = Ct::new();
    let (c, s) = (ip("10.1.1.1"), ip("10.1.1.2"));
    let rrq = udp(c, 1069, s, 69, b"\x00\x01boot.img\x00octet\x00");
    let args = CtArgs {
        mark: Some((3, u32::MAX)),
        ..with_helper(commit(1), Helper::Tftp)
    };
    let (md, _) = t.run(&rrq, &args, 0);
    assert_state!(md.state, TRK | NEW);
    let parent = md.orig;
    let data = udp(s, 3333, c, 1069, b"\x00\x03\x00\x01data");
    let (md, _) = t.run(&data, &track(1), 1);
    assert_state!(md.state, TRK | NEW | REL);
    assert_eq!((md.mark, md.orig), (3, parent));
    let (md, _) = t.run(&data, &commit(1), 1);
    assert_state!(md.state, TRK | NEW | REL);
    let ack = udp(c, 1069, s, 3333, b"\x00\x04\x00\x01");
    assert_state!(t.state(&ack, &commit(1), 2), TRK | EST | REL | RPL);
    assert_state!(t.state(&data, &track(1), 3), TRK | EST | REL);
    // Not to another client port; and helper=ftp on UDP gives no ALG.
    assert_state!(
        t.state(&udp(s, 3334, c, 1070, b"x"), &track(1), 3),
        TRK | NEW
    );
    let rrq2 = udp(c, 1071, s, 69, b"\x00\x01x\x00octet\x00");
    t.run(&rrq2, &with_helper(commit(1), Helper::Ftp), 4);
    assert_state!(
        t.state(&udp(s, 3335, c, 1071, b"x"), &track(1), 5),
        TRK | NEW
    );
}

/// TFTP behind SNAT with a port range: the answer comes to the translated address and port,
/// and is translated back to the client's own.
#[test]
fn tftp_with_snat_and_port_translation() {
    let mut t = Ct::new();
    let (c, s, n) = (ip("10.1.1.1"), ip("192.0.2.9"), ip("203.0.113.1"));
    let rrq = udp(c, 1069, s, 69, b"\x00\x01boot.img\x00octet\x00");
    let args = with_helper(
        with_nat(commit(1), snat("203.0.113.1", (2000, 2000))),
        Helper::Tftp,
    );
    let (md, rw) = t.run(&rrq, &args, 0);
    assert_state!(md.state, TRK | NEW | SNAT);
    assert_eq!(rw.unwrap().src, Some((key(n), 2000)));
    let data = udp(s, 3333, n, 2000, b"\x00\x03\x00\x01data");
    let (md, rw) = t.run(&data, &with_nat(commit(1), NatSpec::default()), 1);
    assert_state!(md.state, TRK | NEW | REL | DNAT);
    assert_eq!(rw.unwrap().dst, Some((key(c), 1069)));
    let e = t.ct.dump(Some(1), 1);
    let related = e.iter().find(|i| i.orig.sport == 3333).unwrap();
    assert_eq!(
        related.reply,
        Tuple {
            src: key(c),
            sport: 1069,
            dst: key(s),
            dport: 3333,
            zone: 1,
            proto: UDP,
            ..Tuple::default()
        }
    );
}

/// A long IPv6 session behind SNAT: every `EPRT` grows by 31 bytes, so the shift passes the
/// tracker's acknowledgment tolerance (a window and a fragment, 67035 bytes) while the
/// client's sequence numbers wrap around 2^32; every segment stays valid because the tracker
/// sees the server's acknowledgments in the client's numbering.
#[test]
fn long_session_shift_passes_ack_window_and_wraps() {
    let mut t = Ct::new();
    let (c, s) = (ip("fd00::1"), ip("2001:db8::21"));
    let n = ip("2001:db8:ffff:ffff:ffff:ffff:ffff:fffe");
    let delta = (n.to_string().len() - "fd00::1".len()) as i32;
    assert_eq!(delta, 31);
    let nat = || with_nat(track(0), NatSpec::default());
    let ctl = with_helper(
        with_nat(commit(0), snat(&n.to_string(), (0, 0))),
        Helper::Ftp,
    );
    let isn = u32::MAX - 30_000;
    let mut cseq = isn.wrapping_add(1);
    t.run(&tcp(c, 40000, s, 21, "S", isn, 0, b""), &ctl, 0);
    let st = t.state(&tcp(s, 21, n, 40000, "SA", 5000, cseq, b""), &nat(), 0);
    assert_state!(st, TRK | EST | RPL | SNAT);
    let mut shift: i32 = 0;
    for k in 0..2500u32 {
        let cmd = format!("EPRT |2|fd00::1|{}|\r\n", 10000 + k);
        let (md, rw) = t.run(
            &tcp(c, 40000, s, 21, "PA", cseq, 5001, cmd.as_bytes()),
            &nat(),
            1,
        );
        assert_state!(md.state, TRK | EST | SNAT);
        let a = rw.unwrap().alg.unwrap();
        assert_eq!(a.seq, shift, "command {k}");
        assert_eq!(a.payload.unwrap().delta(&key(n)), delta);
        cseq = cseq.wrapping_add(cmd.len() as u32);
        shift += delta;
        // The server acknowledges what it got, in its (shifted) numbering.
        let ack = tcp(
            s,
            21,
            n,
            40000,
            "A",
            5001,
            cseq.wrapping_add_signed(shift),
            b"",
        );
        let (md, rw) = t.run(&ack, &nat(), 1);
        assert_state!(md.state, TRK | EST | RPL | SNAT);
        assert_eq!(rw.unwrap().alg.unwrap().ack, -shift, "ack {k}");
    }
    assert!(shift > 0xffff + 1500);
    assert!(cseq < isn, "wrapped");
    assert!(t.ct.expectations().len() <= conntrack::alg::MAX_PER_PARENT);
}
