//! Replays real Linux TCP sessions through the window tracker.
//!
//! The captures in `tests/data/tcp_*.pcap` were made by `tests/data/make_tcp_pcaps.sh` (run as
//! root from that directory; it uses `tests/data/tcp_session.py` for both ends): two network
//! namespaces joined by a veth pair (`ip netns add`, `ip link add h1c0 netns C type veth peer
//! name h1s0 netns S`), offloads off (`ethtool -K dev tso off gso off gro off`), one
//! `tcpdump -Z root -i h1s0 -s 128 -U -w FILE tcp port 5001` per session on the server's end,
//! headers only (lengths come from the IP header). The sessions:
//!
//! - `tcp_client_close`: client sends 12000 bytes, shuts down first; server answers and closes.
//! - `tcp_server_close`: client sends 5 bytes; server sends 3000 and closes first.
//! - `tcp_simultaneous_close`: both shut down at the same instant while each drops the FINs it
//!   receives for 100 ms (`iptables -A INPUT -p tcp --tcp-flags FIN FIN -j DROP`), so the
//!   FINs cross on the wire and are retransmitted: a true simultaneous close.
//! - `tcp_rst_abort`: client sends 8 bytes, then closes with `SO_LINGER` {1, 0}: RST.
//! - `tcp_no_wscale`: as client_close with `sysctl net.ipv4.tcp_window_scaling=0` on the client.
//! - `tcp_loss_retransmit`: as client_close with 30% of the segments each side receives dropped
//!   after the capture point (`iptables -A INPUT -p tcp -m statistic --mode random
//!   --probability 0.3 -j DROP`; this kernel has no netem): retransmitted SYN, SYN+ACK, data
//!   and FIN, duplicate ACKs with SACK blocks.
//! - `tcp_zero_window`: server with `SO_RCVBUF` 2048 does not read for 2 s while the client
//!   sends 20000 bytes: zero windows and window probes.
//! - `tcp_keepalive`: client with `SO_KEEPALIVE`, `TCP_KEEPIDLE` 1, `TCP_KEEPINTVL` 1 idles for
//!   3.5 s: keep-alive probes (sequence number one below the next).
//!
//! The first SYN's sender is the originator.

use conntrack::tcp::{Segment, TcpConn, TcpTimeout, Update};

/// One TCP segment of a capture, with its direction.
struct Packet {
    seg: Segment,
    /// Sent by the responder.
    reply: bool,
}

/// Reads an Ethernet/IPv4/TCP capture (classic pcap, microsecond or nanosecond, either byte
/// order) into segments, oriented by the first SYN.
fn read_pcap(name: &str) -> Vec<Packet> {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let magic = <[u8; 4]>::try_from(&data[..4]).unwrap();
    let le = match magic {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => true,
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => false,
        _ => panic!("{name}: not a pcap file"),
    };
    let u32_at = |b: &[u8], at: usize| {
        let v = <[u8; 4]>::try_from(&b[at..at + 4]).unwrap();
        if le {
            u32::from_le_bytes(v)
        } else {
            u32::from_be_bytes(v)
        }
    };
    assert_eq!(u32_at(&data, 20), 1, "{name}: link type must be Ethernet");

    let mut out = Vec::new();
    let mut originator: Option<[u8; 6]> = None;
    let mut at = 24;
    while at + 16 <= data.len() {
        let caplen = u32_at(&data, at + 8) as usize;
        let frame = &data[at + 16..at + 16 + caplen];
        at += 16 + caplen;
        // Ethernet II, IPv4 only: the sessions are IPv4 over veth, untagged.
        assert_eq!(&frame[12..14], &[0x08, 0x00], "{name}: not IPv4");
        let ip = &frame[14..];
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        assert_eq!(ip[9], 6, "{name}: not TCP");
        let l4_len = total - ihl;
        // Captured bytes of the segment: the snap length cuts the payload, never the header.
        let tcp = &ip[ihl..ip.len().min(total)];
        let seg = Segment::parse_with_len(tcp, l4_len).expect("real TCP header parses");
        let mut src = [0u8; 6];
        src[..4].copy_from_slice(&ip[12..16]);
        src[4..].copy_from_slice(&tcp[..2]);
        let orig = *originator.get_or_insert_with(|| {
            assert_eq!(seg.flags & 0x12, 0x02, "{name}: must start with a SYN");
            src
        });
        out.push(Packet {
            seg,
            reply: src != orig,
        });
    }
    assert!(!out.is_empty(), "{name}: empty");
    out
}

/// What a replay ended with.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    state: &'static str,
    peers: (&'static str, &'static str),
    timeout: TcpTimeout,
    wscales: (u8, u8),
}

/// Replays a session, asserting every segment is valid; returns the end state and the indices
/// of the segments that went through OVS's loose path (accepted without re-arming the timer).
fn replay(packets: &[Packet], liberal: bool) -> (Outcome, Vec<usize>) {
    let mut conn = TcpConn::new(&packets[0].seg).expect("a SYN creates a connection");
    let mut loose = Vec::new();
    for (i, p) in packets.iter().enumerate().skip(1) {
        let r = conn.update(&p.seg, p.reply, liberal);
        assert_eq!(
            r,
            Update::Valid,
            "segment {i}: {:?}, reply {}",
            p.seg,
            p.reply
        );
        if !conn.timer_refreshed() {
            loose.push(i);
        }
    }
    let outcome = Outcome {
        state: conn.state_name(),
        peers: conn.peer_states(),
        timeout: conn.timeout(),
        wscales: conn.wscales(),
    };
    (outcome, loose)
}

/// Both FINs sent and acknowledged: what `dpctl/dump-conntrack` shows as TIME_WAIT.
fn closed(wscales: (u8, u8)) -> Outcome {
    Outcome {
        state: "TIME_WAIT",
        peers: ("FIN_WAIT_2", "FIN_WAIT_2"),
        timeout: TcpTimeout::Close,
        wscales,
    }
}

/// Replays strictly and liberally (same result expected: every segment is in window), and
/// checks the end state; also that the session's data, moved far out of its window at any
/// point, is invalid (but passes in liberal mode), and that its SYN reopens it at the end.
fn check(name: &str, want: Outcome) -> Vec<Packet> {
    let packets = read_pcap(name);
    let (strict, loose) = replay(&packets, false);
    assert_eq!(strict, want, "{name}");
    assert!(
        loose.is_empty(),
        "{name}: loose path for segments {loose:?}"
    );
    let (liberal, _) = replay(&packets, true);
    assert_eq!(liberal, want, "{name} (liberal)");

    let mut conn = TcpConn::new(&packets[0].seg).unwrap();
    for (i, p) in packets.iter().enumerate().skip(1) {
        if p.seg.payload_len > 0 {
            let mut far = p.seg;
            far.seq = far.seq.wrapping_add(1 << 30);
            let r = conn.clone().update(&far, p.reply, false);
            assert_eq!(r, Update::Invalid, "{name}: segment {i} moved 2^30 on");
            assert_eq!(conn.clone().update(&far, p.reply, true), Update::Valid);
        }
        conn.update(&p.seg, p.reply, false);
    }
    assert_eq!(
        conn.update(&packets[0].seg, false, false),
        Update::Reopen,
        "{name}"
    );
    packets
}

#[test]
fn client_closes_first() {
    let p = check("tcp_client_close.pcap", closed((10, 10)));
    // The client's FIN comes before the server's.
    let first_fin = p.iter().find(|p| p.seg.flags & 0x01 != 0).unwrap();
    assert!(!first_fin.reply);
}

#[test]
fn server_closes_first() {
    let p = check("tcp_server_close.pcap", closed((10, 10)));
    let first_fin = p.iter().find(|p| p.seg.flags & 0x01 != 0).unwrap();
    assert!(first_fin.reply);
}

#[test]
fn simultaneous_close() {
    let p = check("tcp_simultaneous_close.pcap", closed((10, 10)));
    // Both FINs are on the wire before anything acknowledges either.
    let fins: Vec<usize> = (0..p.len())
        .filter(|&i| p[i].seg.flags & 0x01 != 0)
        .collect();
    assert!(p[fins[0]].reply != p[fins[1]].reply && fins[1] == fins[0] + 1);
}

#[test]
fn rst_abort() {
    let p = check(
        "tcp_rst_abort.pcap",
        Outcome {
            state: "TIME_WAIT",
            peers: ("TIME_WAIT", "TIME_WAIT"),
            timeout: TcpTimeout::Close,
            wscales: (10, 10),
        },
    );
    assert_eq!(p.last().unwrap().seg.flags & 0x04, 0x04);
    // A RST one byte further on than the stream is still taken; three bytes further is not.
    let (head, last) = p.split_at(p.len() - 1);
    let mut conn = TcpConn::new(&head[0].seg).unwrap();
    for q in &head[1..] {
        assert_eq!(conn.update(&q.seg, q.reply, false), Update::Valid);
    }
    for (delta, want) in [(1, Update::Valid), (3, Update::Invalid)] {
        let mut rst = last[0].seg;
        rst.seq = rst.seq.wrapping_add(delta);
        assert_eq!(conn.clone().update(&rst, false, false), want, "+{delta}");
    }
}

#[test]
fn no_window_scaling() {
    let p = check("tcp_no_wscale.pcap", closed((0, 0)));
    assert!(p.iter().all(|p| p.seg.wscale.is_none()));
}

#[test]
fn loss_and_retransmissions() {
    let p = check("tcp_loss_retransmit.pcap", closed((10, 10)));
    // The capture holds segments sent twice (SYN, SYN+ACK, data): each repeat is valid too.
    let repeats = p
        .iter()
        .enumerate()
        .filter(|(i, a)| {
            seq_len(&a.seg) > 0
                && p[..*i].iter().any(|b| {
                    b.reply == a.reply && b.seg.seq == a.seg.seq && b.seg.flags == a.seg.flags
                })
        })
        .count();
    assert!(repeats >= 3, "only {repeats} retransmissions");
}

#[test]
fn zero_window_and_probes() {
    let p = check("tcp_zero_window.pcap", closed((10, 0)));
    assert!(p.iter().any(|p| p.reply && p.seg.window == 0));
}

#[test]
fn keepalives() {
    let p = check("tcp_keepalive.pcap", closed((10, 10)));
    // Keep-alive probes: empty, from the client, one below its next sequence number.
    let data_end = p
        .iter()
        .filter(|q| !q.reply && q.seg.payload_len > 0)
        .map(|q| q.seg.seq.wrapping_add(q.seg.payload_len))
        .next_back()
        .unwrap();
    let probes = p
        .iter()
        .filter(|q| !q.reply && q.seg.payload_len == 0 && q.seg.seq == data_end.wrapping_sub(1))
        .count();
    assert!(probes >= 2, "{probes} keep-alives");
}

/// Sequence space of a segment (payload, SYN, FIN), for finding retransmissions.
fn seq_len(s: &Segment) -> u32 {
    s.payload_len + u32::from(s.flags & 0x02 != 0) + u32::from(s.flags & 0x01 != 0)
}

/// Every session picked up mid-stream, at every segment after the handshake: OVS then assumes
/// the largest window scale both ways, and the rest of the session must stay valid.
#[test]
fn mid_stream_pickup() {
    for name in [
        "tcp_client_close.pcap",
        "tcp_server_close.pcap",
        "tcp_simultaneous_close.pcap",
        "tcp_no_wscale.pcap",
        "tcp_zero_window.pcap",
        "tcp_keepalive.pcap",
    ] {
        let p = read_pcap(name);
        for start in 3..p.len() {
            // Only the originator's segments are offered as the first one (the caller would
            // otherwise orient the connection the other way round).
            if p[start].reply || p[start].seg.flags & 0x01 != 0 {
                continue;
            }
            let mut conn = TcpConn::new(&p[start].seg).expect("mid-stream segment creates");
            assert_eq!(conn.peer_flags(), (0x08, 0x08));
            for (i, q) in p.iter().enumerate().skip(start + 1) {
                let r = conn.update(&q.seg, q.reply, false);
                assert_eq!(r, Update::Valid, "{name}: from {start}, segment {i}");
            }
        }
    }
}
