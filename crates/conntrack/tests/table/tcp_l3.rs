//! The connection table's tests of TCP and the L3 checks (helpers in `../table.rs`).

use super::*;

// ---------------------------------------------------------------------------------------------
// TCP
// ---------------------------------------------------------------------------------------------

/// The one connection's (state name, timeout) at `now`. The table moves an expiry only when
/// it moves by a second or more (`Conn::touch`), so a timeout may read up to one second short
/// of the class's value right after a packet: such a value is reported as the class's.
fn tcp_dump(t: &Ct, now: u64) -> (&'static str, u64) {
    let d = t.dump(now);
    assert_eq!(d.len(), 1, "{d:?}");
    let secs = d[0].timeout_secs;
    let class = u64::from(t.ct.timeouts(None)[d[0].class as usize]);
    let secs = if secs + 1 == class { class } else { secs };
    (d[0].tcp_state.unwrap(), secs)
}

/// §3: the reference's crafted session: handshake, data, FIN from the client, its ACK, FIN
/// from the server, last ACK; states and timeouts as `dump-conntrack -s` prints them.
#[test]
fn tcp_handshake_data_fin_close() {
    let mut t = Ct::new();
    let syn = build(
        a(),
        b(),
        &tcp_opts(1111, 2222, "S", 1000, 0, 8192, &SYN_OPTS, &[]),
    );
    let synack = build(
        b(),
        a(),
        &tcp_opts(2222, 1111, "SA", 5000, 1001, 8192, &SYN_OPTS, &[]),
    );
    let c = |fl: &str, seq, ack, data: &[u8]| {
        build(a(), b(), &tcp_opts(1111, 2222, fl, seq, ack, 64, &[], data))
    };
    let s = |fl: &str, seq, ack| build(b(), a(), &tcp(2222, 1111, fl, seq, ack, 64));
    assert_state!(t.st(&syn, &commit(5), 0), TRK | NEW);
    assert_eq!(tcp_dump(&t, 0), ("SYN_SENT", 30));
    assert_state!(t.st(&synack, &track(5), 100), TRK | EST | RPL);
    let (st, tmo) = tcp_dump(&t, 100);
    assert_eq!(st, "ESTABLISHED");
    assert!(tmo <= 30);
    assert_state!(t.st(&c("A", 1001, 5001, b""), &track(5), 200), TRK | EST);
    assert_eq!(tcp_dump(&t, 200), ("ESTABLISHED", 86400));
    assert_state!(
        t.st(&c("PA", 1001, 5001, b"hello"), &track(5), 300),
        TRK | EST
    );
    assert_state!(t.st(&s("A", 5001, 1006), &track(5), 400), TRK | EST | RPL);
    assert_eq!(tcp_dump(&t, 400), ("ESTABLISHED", 86400));
    assert_state!(t.st(&c("FA", 1006, 5001, b""), &track(5), 500), TRK | EST);
    assert_eq!(tcp_dump(&t, 500), ("CLOSING", 900));
    assert_state!(t.st(&s("A", 5001, 1007), &track(5), 600), TRK | EST | RPL);
    assert_eq!(
        tcp_dump(&t, 600).0,
        "TIME_WAIT",
        "FIN_WAIT_2 prints as TIME_WAIT"
    );
    assert_state!(t.st(&s("FA", 5001, 1007), &track(5), 700), TRK | EST | RPL);
    assert_eq!(tcp_dump(&t, 700), ("TIME_WAIT", 45));
    assert_state!(t.st(&c("A", 1007, 5002, b""), &track(5), 800), TRK | EST);
    assert_eq!(tcp_dump(&t, 800), ("TIME_WAIT", 30));
    assert!(t.dump(30_800).is_empty());
    assert_eq!(t.ct.sweep(30_800), 1);
    assert_eq!(t.ct.n_conns(), 0);
}

/// §3: SYN answered by RST-ACK, and an established connection reset by the client: TIME_WAIT,
/// 30 s. A new SYN on the closed tuple replaces the connection (same count).
#[test]
fn tcp_rst_and_reopen() {
    let mut t = Ct::new();
    let syn = build(a(), b(), &tcp(1112, 2223, "S", 1000, 0, 8192));
    t.st(&syn, &commit(5), 0);
    let ra = build(b(), a(), &tcp(2223, 1112, "RA", 0, 1001, 0));
    assert_state!(t.st(&ra, &track(5), 10), TRK | EST | RPL);
    assert_eq!(tcp_dump(&t, 10), ("TIME_WAIT", 30));
    let id = t.dump(10)[0].id;
    let syn2 = build(a(), b(), &tcp(1112, 2223, "S", 77_000, 0, 8192));
    assert_state!(t.st(&syn2, &commit(5), 20), TRK | NEW);
    let d = t.dump(20);
    assert_eq!(d.len(), 1);
    assert_ne!(d[0].id, id, "a new connection");
    assert_eq!(d[0].tcp_state, Some("SYN_SENT"));
    assert_eq!(t.ct.n_conns(), 1);

    let mut t = Ct::new();
    tcp_handshake(&mut t, 0, a(), b());
    let rst = build(a(), b(), &tcp(1111, 2222, "R", 1001, 0, 0));
    assert_state!(t.st(&rst, &track(5), 10), TRK | EST);
    assert_eq!(tcp_dump(&t, 10), ("TIME_WAIT", 30));
}

/// A reopening SYN without commit still ends the old connection (OVS `CT_UPDATE_NEW` expires
/// it) and is `+new`; counts follow.
#[test]
fn tcp_reopen_without_commit_removes_old() {
    let mut t = Ct::new();
    t.st(
        &build(a(), b(), &tcp(1112, 2223, "S", 1000, 0, 8192)),
        &commit(5),
        0,
    );
    t.st(
        &build(b(), a(), &tcp(2223, 1112, "RA", 0, 1001, 0)),
        &track(5),
        10,
    );
    assert_state!(
        t.st(
            &build(a(), b(), &tcp(1112, 2223, "S", 9000, 0, 8192)),
            &track(5),
            20
        ),
        TRK | NEW
    );
    assert_counts(&t.ct, 20);
}

/// A SYN-ACK cannot create a connection (`tcp_valid_new`); neither can SYN+FIN+RST or a
/// segment without flags (§2a, §9). `tcp_invalid` counts them.
#[test]
fn tcp_invalid_creators() {
    let mut t = Ct::new();
    for fl in ["SA", "SFR", "SF", "SR", ""] {
        let f = build(a(), b(), &tcp(1111, 2222, fl, 1, 1, 100));
        assert_state!(t.st(&f, &commit(5), 0), TRK | INV, "flags {fl:?}");
    }
    assert_eq!(t.ct.stats().tcp_invalid, 5);
    assert_eq!(t.ct.n_conns(), 0);
    assert!(t.dump(0).is_empty());
}

/// §2a: a segment of an unknown connection (bare ACK) is picked up mid-stream: `+new`, an entry
/// in SYN_SENT with the first-packet timeout.
#[test]
fn tcp_midstream_pickup() {
    let mut t = Ct::new();
    let f = build(ip("10.1.1.48"), b(), &tcp(1, 2, "A", 12345, 777, 100));
    assert_state!(t.st(&f, &commit(5), 0), TRK | NEW);
    assert_eq!(tcp_dump(&t, 0), ("SYN_SENT", 30));
}

/// §9: an out-of-window segment on an established connection is `+inv` with sequence checking
/// on and `+est` with it off.
#[test]
fn tcp_out_of_window_and_liberal() {
    let mut t = Ct::new();
    let src = ip("10.1.1.41");
    t.st(
        &build(src, b(), &tcp(1111, 2222, "S", 1000, 0, 8192)),
        &commit(5),
        0,
    );
    t.st(
        &build(b(), src, &tcp(2222, 1111, "SA", 5000, 1001, 8192)),
        &track(5),
        1,
    );
    assert_state!(
        t.st(
            &build(src, b(), &tcp(1111, 2222, "A", 1001, 5001, 8192)),
            &track(5),
            2
        ),
        TRK | EST
    );
    let far = build(
        src,
        b(),
        &tcp_opts(1111, 2222, "PA", 900_000_000, 5001, 8192, &[], b"x"),
    );
    let (md, _) = t.run(&far, &track(5), 3);
    assert_state!(md.state, TRK | INV);
    assert_eq!(t.ct.stats().tcp_invalid, 1);
    assert!(t.ct.tcp_seq_chk());
    t.ct.set_tcp_seq_chk(false);
    assert_state!(t.st(&far, &track(5), 4), TRK | EST);
    assert_eq!(tcp_dump(&t, 4).0, "ESTABLISHED");
    assert_eq!(t.ct.stats().tcp_invalid, 1);
    t.ct.set_tcp_seq_chk(true);
}

/// The table's checks of the TCP header before the tracker sees it: bad checksum, header
/// shorter than 20, data offset beyond the segment, data offset below 5.
#[test]
fn tcp_bad_headers() {
    let mut t = Ct::new();
    let syn = tcp(1111, 2222, "S", 1000, 0, 8192);
    let bad = build_with(a(), b(), &syn, &opt(|o| o.bad_l4_csum = true));
    assert_state!(t.st(&bad, &commit(0), 0), TRK | INV);
    assert_eq!(t.invalid(Invalid::L4), 1);
    let mut short = syn.clone();
    short.bytes.truncate(16);
    short.csum_at = None;
    assert_state!(t.st(&build(a(), b(), &short), &commit(0), 0), TRK | INV);
    let mut doff = syn.clone();
    doff.bytes[12] = 0xf0;
    assert_state!(t.st(&build(a(), b(), &doff), &commit(0), 0), TRK | INV);
    let mut doff4 = syn.clone();
    doff4.bytes[12] = 0x40;
    assert_state!(t.st(&build(a(), b(), &doff4), &commit(0), 0), TRK | INV);
    assert_eq!(t.invalid(Invalid::L4), 4);
    assert_eq!(t.ct.n_conns(), 0);
}

// ---------------------------------------------------------------------------------------------
// L3 checks
// ---------------------------------------------------------------------------------------------

/// §9: bad IP header checksum → `invalid_l3`; bad UDP checksum → `invalid_l4`; a zero UDP
/// checksum is fine on IPv4, not on IPv6; bad ICMP checksums too.
#[test]
fn checksum_errors() {
    let mut t = Ct::new();
    let u = udp(1, 2, b"abc");
    let f = build_with(ip("10.1.1.44"), b(), &u, &opt(|o| o.bad_l3_csum = true));
    assert_state!(t.st(&f, &commit(0), 0), TRK | INV);
    assert_eq!(t.invalid(Invalid::L3), 1);
    let f = build_with(ip("10.1.1.43"), b(), &u, &opt(|o| o.bad_l4_csum = true));
    assert_state!(t.st(&f, &commit(0), 0), TRK | INV);
    assert_eq!(t.invalid(Invalid::L4), 1);
    let f = build_with(a6(), b6(), &u, &opt(|o| o.bad_l4_csum = true));
    assert_state!(t.st(&f, &commit(0), 0), TRK | INV);
    let f = build_with(a6(), b6(), &u, &opt(|o| o.zero_udp_csum = true));
    assert_state!(
        t.st(&f, &commit(0), 0),
        TRK | INV,
        "IPv6 UDP needs a checksum"
    );
    let f = build_with(a(), b(), &echo(8, 1, 1), &opt(|o| o.bad_l4_csum = true));
    assert_state!(t.st(&f, &commit(0), 0), TRK | INV);
    let f = build_with(a6(), b6(), &echo(128, 1, 1), &opt(|o| o.bad_l4_csum = true));
    assert_state!(t.st(&f, &commit(0), 0), TRK | INV);
    assert_eq!(t.invalid(Invalid::L4), 5);
    assert_eq!(t.ct.n_conns(), 0);
    let f = build_with(a(), b(), &u, &opt(|o| o.zero_udp_csum = true));
    assert_state!(
        t.st(&f, &commit(0), 0),
        TRK | NEW,
        "IPv4 UDP checksum 0: not checked"
    );
    assert_eq!(t.ct.n_conns(), 1);
    assert_eq!(t.invalid(Invalid::L3), 1);
}

/// `verified` (an earlier `ct()` checked the packet) skips the checksums.
#[test]
fn verified_packets_skip_checksums() {
    let f = build_with(
        a(),
        b(),
        &udp(1, 2, b"abc"),
        &opt(|o| {
            o.bad_l4_csum = true;
            o.bad_l3_csum = true;
        }),
    );
    assert_commits_new(&CtPacket {
        verified: true,
        natted: false,
        ..packet(&f)
    });
}

/// Truncated and inconsistent IPv4 headers: `invalid_l3`. A truncated UDP header or a UDP
/// length that disagrees with the IP length: `invalid_l4`.
#[test]
fn truncated_headers() {
    let mut t = Ct::new();
    let good = udp_ab();
    // Frame ends inside the IP header.
    for n in [ETH, ETH + 1, ETH + 19] {
        assert_state!(t.st_raw(&good[..n], false), TRK | INV, "{n} bytes");
    }
    // IHL below 5.
    let mut f = good.clone();
    f[ETH] = 0x44;
    fix_ip4_csum(&mut f);
    assert_state!(t.st(&f, &commit(0), 0), TRK | INV);
    // Total length beyond the frame.
    let mut f = good.clone();
    f[ETH + 3] += 1;
    fix_ip4_csum(&mut f);
    assert_state!(t.st(&f, &commit(0), 0), TRK | INV);
    // Total length below the header.
    let mut f = good.clone();
    f[ETH + 2..ETH + 4].copy_from_slice(&19u16.to_be_bytes());
    fix_ip4_csum(&mut f);
    assert_state!(t.st(&f, &commit(0), 0), TRK | INV);
    // Version 6 in an IPv4 frame.
    let mut f = good.clone();
    f[ETH] = 0x65;
    assert_state!(t.st_raw(&f, false), TRK | INV);
    let l3 = t.invalid(Invalid::L3);
    assert_eq!(l3, 7);
    // IP says 4 bytes of UDP.
    let mut f = good.clone();
    f.truncate(ETH + 24);
    f[ETH + 2..ETH + 4].copy_from_slice(&24u16.to_be_bytes());
    fix_ip4_csum(&mut f);
    assert_state!(t.st(&f, &commit(0), 0), TRK | INV);
    // UDP length longer than the datagram.
    let mut f = good.clone();
    f[ETH + 25] += 1;
    assert_state!(t.st(&f, &commit(0), 0), TRK | INV);
    assert_eq!(t.invalid(Invalid::L4), 2);
    assert_eq!(t.invalid(Invalid::L3), l3);
    // IPv6: payload length beyond the frame; frame ends in the fixed header.
    let u6 = build(a6(), b6(), &udp(1, 2, b"x"));
    assert_state!(t.st_raw(&u6[..u6.len() - 1], true), TRK | INV);
    assert_state!(t.st_raw(&u6[..ETH + 39], true), TRK | INV);
    assert_eq!(t.invalid(Invalid::L3), l3 + 2);
    assert_eq!(t.ct.n_conns(), 0);
    // Ethernet padding after a good datagram is fine.
    let f = build_with(a(), b(), &udp(3333, 4444, b"a"), &opt(|o| o.pad = 17));
    assert_state!(t.st(&f, &commit(0), 0), TRK | NEW);
    assert_eq!(t.ct.n_conns(), 1);
}

impl Ct {
    /// A frame with `v6` as given (not read from the frame, which may be too short).
    fn st_raw(&mut self, f: &[u8], v6: bool) -> u8 {
        let pkt = CtPacket {
            frame: f,
            l3: ETH,
            v6,
            frag_l4_len: None,
            verified: false,
            natted: false,
        };
        self.st_pkt(&pkt)
    }

    /// `pkt` committed in zone 0 at time 0: its state.
    fn st_pkt(&mut self, pkt: &CtPacket<'_>) -> u8 {
        self.run_pkt(pkt, &commit(0), 0).0.state
    }
}

/// `pkt` committed on an empty table: new, and the table's one connection.
fn assert_commits_new(pkt: &CtPacket<'_>) {
    let mut t = Ct::new();
    assert_state!(t.st_pkt(pkt), TRK | NEW);
    assert_eq!(t.ct.n_conns(), 1);
}

/// IPv4 options (IHL 6 and 15) are stepped over; the reply without options matches.
#[test]
fn ipv4_options() {
    let mut t = Ct::new();
    // Router alert (4 bytes).
    let f = build_with(
        a(),
        b(),
        &udp(3333, 4444, b"a"),
        &opt(|o| o.ip_opts = vec![0x94, 4, 0, 0]),
    );
    assert_eq!(f[ETH], 0x46);
    assert_state!(t.st(&f, &commit(0), 0), TRK | NEW);
    assert_eq!(t.dump(0)[0].orig, tuple(UDP, a(), 3333, b(), 4444, 0));
    assert_state!(t.st(&udp_ba(), &track(0), 1), TRK | EST | RPL);
    // Forty bytes of NOPs and EOL: IHL 15.
    let mut opts = vec![1u8; 39];
    opts.push(0);
    let f = build_with(
        a(),
        b(),
        &tcp(5, 6, "S", 1, 0, 100),
        &opt(|o| o.ip_opts = opts),
    );
    assert_eq!(f[ETH], 0x4f);
    assert_state!(t.st(&f, &commit(0), 2), TRK | NEW);
    assert_eq!(t.ct.n_conns(), 2);
}

/// IPv6 extension headers (hop-by-hop, routing, destination options, an atomic fragment
/// header) before UDP and TCP: tracked under the upper-layer protocol; the reply without them
/// matches.
#[test]
fn ipv6_extension_headers() {
    let mut t = Ct::new();
    let exts = opt(|o| o.exts = vec![hbh(), routing(), dstopts()]);
    let f = build_with(a6(), b6(), &udp(3333, 4444, b"abc"), &exts);
    assert_state!(t.st(&f, &commit(0), 0), TRK | NEW);
    assert_eq!(t.dump(0)[0].orig, tuple(UDP, a6(), 3333, b6(), 4444, 0));
    assert_state!(
        t.st(&build(b6(), a6(), &udp(4444, 3333, b"x")), &track(0), 1),
        TRK | EST | RPL
    );
    let f = build_with(a6(), b6(), &tcp(1, 2, "S", 1, 0, 100), &exts);
    assert_state!(t.st(&f, &commit(0), 2), TRK | NEW);
    assert_eq!(t.ct.n_conns(), 2);
    // An ICMPv6 echo behind a hop-by-hop header.
    let f = build_with(a6(), b6(), &echo(128, 9, 1), &opt(|o| o.exts = vec![hbh()]));
    assert_state!(t.st(&f, &commit(0), 3), TRK | NEW);
    // A truncated extension header chain.
    let mut f = build_with(a6(), b6(), &udp(1, 2, b""), &opt(|o| o.exts = vec![hbh()]));
    f.truncate(ETH + 44);
    f[ETH + 5] = 4;
    assert_state!(t.st(&f, &commit(0), 4), TRK | INV);
}

/// Fragments reaching `ct()` without reassembly: IPv4 first fragment (MF), later fragments,
/// IPv6 later fragment and first fragment: `+inv`, `invalid_fragment`. DF alone is not a
/// fragment.
#[test]
fn fragments_without_reassembly_are_invalid() {
    let mut t = Ct::new();
    let u = udp(5, 6, &[b'A'; 64]);
    for frag in [0x2000u16, 0x0010, 0x2010, 0x1fff] {
        let f = build_with(ip("10.1.1.51"), b(), &u, &opt(|o| o.frag = frag));
        assert_state!(t.st(&f, &commit(0), 0), TRK | INV, "frag field {frag:#x}");
    }
    for (off, more) in [(0, true), (8, true), (8, false)] {
        let f = build_with(a6(), b6(), &u, &opt(|o| o.exts = vec![frag6(off, more)]));
        assert_state!(t.st(&f, &commit(0), 0), TRK | INV, "v6 frag {off} {more}");
    }
    assert_eq!(t.invalid(Invalid::Fragment), 7);
    assert_eq!(t.ct.n_conns(), 0);
    let f = build_with(a(), b(), &u, &opt(|o| o.frag = 0x4000));
    assert_state!(t.st(&f, &commit(0), 0), TRK | NEW, "DF");
}

/// The first fragment of a reassembled datagram, with `frag_l4_len` the datagram's L4 length:
/// tracked (its checksum cannot be checked).
#[test]
fn reassembled_first_fragment_is_tracked() {
    let whole = udp(5, 6, &[b'A'; 3000]);
    let mut f = build_with(ip("10.1.1.51"), b(), &whole, &opt(|o| o.frag = 0x2000));
    // Keep the first 1200 bytes of IP payload, as the first fragment carries.
    f.truncate(ETH + 20 + 1200);
    f[ETH + 2..ETH + 4].copy_from_slice(&1220u16.to_be_bytes());
    fix_ip4_csum(&mut f);
    assert_commits_new(&CtPacket {
        frag_l4_len: Some(3008),
        ..packet(&f)
    });
}
