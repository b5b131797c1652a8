//! Tunnel termination checked against frames scapy built: every case of
//! `testdata/actions/DECAP` (made by `scripts/gen-action-fixtures.py`, scapy 2.8.0).
//!
//! Each case runs as the PMD runs it: extraction of the outer frame fills the header offsets,
//! `tnl_pop` decapsulates for the case's tunnel kind, then the next pass's key is built from
//! the packet's metadata (in_port, packet type, the tunnel metadata area) and extracted. The
//! decapsulated bytes must equal scapy's inner frame (or L3 packet), the key's tunnel fields
//! and packet type the ones the manifest gives in OVS's flow syntax, and the second pass's
//! actions must leave scapy's expected frame. Drop cases must fail with the named reason.

use std::path::{Path, PathBuf};

use datapath::actions::compile;
use datapath::packet::{NO_OFS, Packet, TnlMd};
use datapath::pmd::key_metadata;
use datapath::rewrite;
use datapath::tunnel::{TunnelKind, tnl_pop};
use flow::FlowKey;
use flow::key::GENEVE_OPTS_MAX;
use flow::odp::{PortNames, parse_actions, parse_key};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/actions")
}

/// The one frame of a classic little-endian pcap (what the generator writes).
fn one_frame(path: &Path) -> Vec<u8> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&b[..4], &[0xd4, 0xc3, 0xb2, 0xa1], "{}", path.display());
    let incl = u32::from_le_bytes([b[32], b[33], b[34], b[35]]) as usize;
    assert_eq!(b.len(), 40 + incl, "{}: one frame", path.display());
    b[40..].to_vec()
}

struct Case {
    name: String,
    result: String,
    kind: TunnelKind,
    input: Vec<u8>,
    inner: Option<Vec<u8>>,
    key: String,
    actions: String,
    expected: Option<Vec<u8>>,
}

fn kind(s: &str) -> TunnelKind {
    match s {
        "vxlan" => TunnelKind::VXLAN,
        "geneve" => TunnelKind::GENEVE,
        "gre" => TunnelKind::Gre,
        _ => panic!("unknown tunnel kind {s}"),
    }
}

fn cases() -> Vec<Case> {
    let dir = fixtures();
    let manifest = std::fs::read_to_string(dir.join("DECAP")).expect("testdata/actions/DECAP");
    manifest
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 8, "bad manifest line: {l}");
            let opt = |s: &str| (s != "-").then(|| one_frame(&dir.join(s)));
            Case {
                name: f[0].to_owned(),
                result: f[1].to_owned(),
                kind: kind(f[2]),
                input: one_frame(&dir.join(f[3])),
                inner: opt(f[4]),
                key: f[5].to_owned(),
                actions: f[6].to_owned(),
                expected: opt(f[7]),
            }
        })
        .collect()
}

/// The outer frame as the first pass leaves it: a received packet with its offsets extracted.
fn received(frame: &[u8]) -> Packet {
    let mut p = Packet::from_slice(frame);
    p.meta.in_port = 1;
    let mut key = FlowKey::new();
    key_metadata(&p, &mut key);
    let x = flow::extract(p.data(), &mut key);
    p.meta.l2_5 = x.layers.l2_5;
    p.meta.l3 = x.layers.l3;
    p.meta.l4 = x.layers.l4;
    p
}

/// Makes a popped packet arrive on tunnel port 7, as the PMD does.
fn arrive_on_tunnel_port(p: &mut Packet) {
    p.meta.in_port = 7;
    p.meta.recirc_id = 0;
}

/// The key of the next pass, as the PMD builds it.
fn next_pass_key(p: &mut Packet) -> FlowKey {
    let mut key = FlowKey::new();
    key_metadata(p, &mut key);
    let x = flow::extract(p.data(), &mut key);
    p.meta.l2_5 = x.layers.l2_5;
    p.meta.l3 = x.layers.l3;
    p.meta.l4 = x.layers.l4;
    key
}

fn geneve_opts(k: &FlowKey) -> Vec<u8> {
    let mut b = [0u8; GENEVE_OPTS_MAX];
    let n = k.tun_geneve_opts(&mut b);
    b[..n].to_vec()
}

/// The tunnel fields and packet type of a key, for comparison and messages.
fn tunnel_fields(k: &FlowKey) -> String {
    format!(
        "tun_id={:#x} src={} dst={} ipv6_src={} ipv6_dst={} tos={:#x} ttl={} tp_src={} \
         tp_dst={} flags={:#x} geneve={:02x?} packet_type={:#x}",
        k.tun_id(),
        k.tun_ipv4_src(),
        k.tun_ipv4_dst(),
        k.tun_ipv6_src(),
        k.tun_ipv6_dst(),
        k.tun_tos(),
        k.tun_ttl(),
        k.tun_tp_src(),
        k.tun_tp_dst(),
        k.tun_flags(),
        geneve_opts(k),
        k.packet_type()
    )
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn decapsulation_matches_scapy() {
    let cases = cases();
    assert!(cases.len() >= 40, "only {} cases", cases.len());
    let mut failures = Vec::new();
    let mut reasons = std::collections::BTreeSet::new();
    for c in &cases {
        let mut p = received(&c.input);
        let got = tnl_pop(&mut p, c.kind);
        let result = match got {
            Ok(()) => "ok".to_owned(),
            Err(e) => {
                reasons.insert(e.name());
                format!("drop:{}", e.name())
            }
        };
        if result != c.result {
            failures.push(format!("{}: {result}, expected {}", c.name, c.result));
            continue;
        }
        let (Some(inner), Some(expected)) = (&c.inner, &c.expected) else {
            continue;
        };
        if p.data() != &inner[..] {
            failures.push(format!(
                "{}: inner\n  got      {}\n  expected {}",
                c.name,
                hex(p.data()),
                hex(inner)
            ));
            continue;
        }
        assert_ne!(p.meta.tunnel, TnlMd::None, "{}", c.name);
        arrive_on_tunnel_port(&mut p);
        assert_eq!(
            (p.meta.l2_5, p.meta.l3, p.meta.l4),
            (NO_OFS, NO_OFS, NO_OFS),
            "{}",
            c.name
        );
        let key = next_pass_key(&mut p);
        let want = parse_key(&c.key, &mut PortNames::new())
            .unwrap_or_else(|e| panic!("{}: {}: {e}", c.name, c.key))
            .key;
        if tunnel_fields(&key) != tunnel_fields(&want) {
            failures.push(format!(
                "{}: key\n  got      {}\n  expected {}",
                c.name,
                tunnel_fields(&key),
                tunnel_fields(&want)
            ));
        }
        assert_eq!(key.in_port(), 7, "{}", c.name);
        // The second pass's actions (rewrite errors are counted by the datapath, which goes
        // on; the padded case's set(eth) on a 4-byte payload is one).
        let parsed = parse_actions(&c.actions, &mut PortNames::new()).unwrap();
        for a in compile(&parsed).unwrap() {
            let _ = rewrite::apply(&mut p, &a);
        }
        if p.data() != &expected[..] {
            failures.push(format!(
                "{}: after {}\n  got      {}\n  expected {}",
                c.name,
                c.actions,
                hex(p.data()),
                hex(expected)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Every drop reason a packet can have is exercised (a port that is not a tunnel's is the
    // datapath's business: tests/datapath.rs in netdev).
    for r in datapath::tunnel::TnlPopDrop::ALL {
        if r.name() != "tunnel_pop_bad_port" {
            assert!(reasons.contains(r.name()), "no case for {}", r.name());
        }
    }
}

/// A second recirculation after the pop keeps the tunnel metadata: the buffer's area travels
/// with the packet, whatever the pass.
#[test]
fn tunnel_metadata_survives_copies_and_later_passes() {
    let c = cases()
        .into_iter()
        .find(|c| c.name == "decap_geneve_option")
        .expect("the GENEVE case");
    let mut p = received(&c.input);
    tnl_pop(&mut p, c.kind).unwrap();
    arrive_on_tunnel_port(&mut p);
    let first = tunnel_fields(&next_pass_key(&mut p));
    // A recirculation: new recirc_id, same packet.
    p.meta.recirc_id = 0x2a;
    let again = next_pass_key(&mut p);
    assert_eq!(tunnel_fields(&again), first);
    assert_eq!(again.recirc_id(), 0x2a);
    // A copy (clone, non-final output) in a recycled pool buffer carries it too; a packet
    // received into a recycled buffer does not.
    let mut pool = datapath::packet::Pool::new(4, 0);
    let mut c2 = pool.copy_of(&p, usize::MAX);
    assert_eq!(tunnel_fields(&next_pass_key(&mut c2)), first);
    pool.free(c2);
    let fresh = pool.packet_from(p.data(), 1);
    assert_eq!(fresh.meta.tunnel, TnlMd::None);
    let mut k = FlowKey::new();
    key_metadata(&fresh, &mut k);
    assert_eq!(k.tun_id(), 0);
    assert_eq!(geneve_opts(&k), Vec::<u8>::new());
    // Pushes never reach the area: a header longer than the headroom moves the frame to a
    // bigger buffer, area and all.
    p.push_front(datapath::packet::HEADROOM + 100).fill(0xee);
    p.pull_front(datapath::packet::HEADROOM + 100);
    assert_eq!(tunnel_fields(&next_pass_key(&mut p)), first);
}
