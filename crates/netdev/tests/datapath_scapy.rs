//! The whole datapath against scapy: for every case of `testdata/actions/` (input frame, OVS
//! datapath actions, expected frame built by scapy with checksums computed from scratch), a pcap
//! port feeds the input through a PMD thread, a megaflow installed as `dpctl/add-flow` would
//! (`in_port(p0)` → the case's actions, then output to `p1`) acts on it, and the capture written
//! by pcap port `p1` must equal scapy's frame byte for byte.
//!
//! Cases where the header an action needs is missing (`error:*`) must come out unchanged: the
//! datapath counts the failed rewrite and carries on with the remaining actions.
//!
//! A UDP tunnel push takes its source port from a hash of the inner headers that only flowpath
//! knows (the fixtures were made for hash 0): for those cases the expected frame gets the port
//! `rewrite::entropy_hash` gives the input frame, and its UDP checksum, if it has one,
//! recomputed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use datapath::dpif::{DatapathBuilder, DpConfig};
use netdev::pcap::read_file;
use netdev::pcap_port::PcapPort;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/actions")
}

fn frames(p: &Path) -> Vec<Vec<u8>> {
    read_file(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .into_iter()
        .map(|r| r.data)
        .collect()
}

/// Runs `input` through a datapath whose only flow is `in_port(p0)` → `actions`, then `p1`.
fn through_datapath(input: &Path, actions: &str, out: &Path) -> Vec<Vec<u8>> {
    let mut b = DatapathBuilder::new(DpConfig::default());
    b.add_port(
        1,
        Box::new(PcapPort::open("p0", Some(input), None).unwrap()),
    )
    .unwrap();
    b.add_port(2, Box::new(PcapPort::open("p1", None, Some(out)).unwrap()))
        .unwrap();
    b.add_flow("in_port(p0)", &format!("{actions},p1"))
        .unwrap_or_else(|e| panic!("{actions}: {e}"));
    let dp = b.start().unwrap();
    let t = Instant::now();
    while !dp.drained() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the datapath never went idle"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    drop(dp.stop());
    frames(out)
}

/// Puts into `frame` (a UDP-tunnelled copy of `inner`) the source port the datapath derives
/// from `inner`'s entropy hash, in OVS's range (32768 + hash * 28232 / 2^32), and fixes its
/// checksum.
fn with_entropy_port(frame: &mut [u8], inner: &[u8]) {
    let (ip, v6) = match u16::from_be_bytes([frame[12], frame[13]]) {
        0x0800 => (14, false),
        0x86dd => (14, true),
        _ => return,
    };
    let proto = if v6 { frame[ip + 6] } else { frame[ip + 9] };
    if proto != 17 {
        return;
    }
    let u = ip + if v6 { 40 } else { 20 };
    let mut key = flow::FlowKey::new();
    let ex = flow::extract(inner, &mut key);
    let mut p = datapath::packet::Packet::from_slice(inner);
    (p.meta.l2_5, p.meta.l3, p.meta.l4) = (ex.layers.l2_5, ex.layers.l3, ex.layers.l4);
    let hash = datapath::rewrite::entropy_hash(&p);
    let port = 32768 + ((u64::from(hash) * (61000 - 32768)) >> 32) as u16;
    frame[u..u + 2].copy_from_slice(&port.to_be_bytes());
    if frame[u + 6] == 0 && frame[u + 7] == 0 {
        return;
    }
    frame[u + 6..u + 8].copy_from_slice(&[0, 0]);
    let len = (frame.len() - u) as u16;
    let ph = if v6 {
        let a =
            |o: usize| std::net::Ipv6Addr::from(<[u8; 16]>::try_from(&frame[o..o + 16]).unwrap());
        wire::checksum::pseudo_header_v6(
            &a(ip + 8),
            &a(ip + 24),
            wire::IpProtocol::UDP,
            u32::from(len),
        )
    } else {
        let a =
            |o: usize| std::net::Ipv4Addr::new(frame[o], frame[o + 1], frame[o + 2], frame[o + 3]);
        wire::checksum::pseudo_header_v4(&a(ip + 12), &a(ip + 16), wire::IpProtocol::UDP, len)
    };
    let c = !wire::checksum::combine(&[ph, wire::checksum::data(&frame[u..])]);
    frame[u + 6..u + 8].copy_from_slice(&(if c == 0 { 0xffff } else { c }).to_be_bytes());
}

#[test]
fn every_rewrite_case_through_the_datapath_matches_scapy() {
    let dir = std::env::temp_dir().join(format!("flowpath-dp-scapy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = std::fs::read_to_string(fixtures().join("MANIFEST")).unwrap();
    let mut cases = 0;
    let mut failures = Vec::new();
    for line in manifest
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let f: Vec<&str> = line.split('\t').collect();
        let (name, result, input, expected, actions) = (f[0], f[1], f[2], f[3], f[4]);
        let input = fixtures().join(input);
        let got = through_datapath(&input, actions, &dir.join(format!("{name}.pcap")));
        let mut want = if result == "ok" {
            frames(&fixtures().join(expected))
        } else {
            frames(&input)
        };
        if name.starts_with("tnl_push") {
            let inputs = frames(&input);
            for (w, i) in want.iter_mut().zip(&inputs) {
                with_entropy_port(w, i);
            }
        }
        if got != want {
            failures.push(format!(
                "{name} ({actions}): got {} frames, want {}",
                got.len(),
                want.len()
            ));
        }
        cases += 1;
    }
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(cases >= 50, "only {cases} cases in the manifest");
    assert!(
        failures.is_empty(),
        "{} of {cases} cases differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Which tunnel port a `DECAP` case's kind names.
fn tunnel_port(kind: &str) -> datapath::tunnel::TunnelPort {
    use datapath::tunnel::{TunnelKind, TunnelPort};
    TunnelPort::with_default_name(match kind {
        "vxlan" => TunnelKind::VXLAN,
        "geneve" => TunnelKind::GENEVE,
        "gre" => TunnelKind::Gre,
        _ => panic!("unknown tunnel kind {kind}"),
    })
}

/// Runs `input` through a datapath with a tunnel port: `in_port(p0)` → `tnl_pop(tunnel)`, and
/// a second-pass flow `second` (key text) → `actions` (which end with an output to `p1`).
/// Returns what `p1` captured and the counters.
fn decap_through_datapath(
    input: &Path,
    kind: &str,
    second: &str,
    actions: &str,
    out: &Path,
) -> (Vec<Vec<u8>>, datapath::pmd::PmdStats, String) {
    let mut b = DatapathBuilder::new(DpConfig::default());
    b.add_port(
        1,
        Box::new(PcapPort::open("p0", Some(input), None).unwrap()),
    )
    .unwrap();
    b.add_port(2, Box::new(PcapPort::open("p1", None, Some(out)).unwrap()))
        .unwrap();
    let tnl = tunnel_port(kind);
    let name = datapath::port::Port::name(&tnl).to_owned();
    b.add_port(5, Box::new(tnl)).unwrap();
    b.add_flow("in_port(p0)", &format!("tnl_pop({name})"))
        .unwrap();
    let second = second.replace("TNL", &name);
    b.add_flow(&second, actions)
        .unwrap_or_else(|e| panic!("{second} -> {actions}: {e}"));
    let dp = b.start().unwrap();
    let t = Instant::now();
    while !dp.drained() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the datapath never went idle"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let stats = dp.total_stats();
    let drops = dp.pmd_drop_show();
    drop(dp.stop());
    (frames(out), stats, drops)
}

/// Every `tnl_pop` case of `testdata/actions/DECAP` through the whole datapath: the outer frame
/// arrives on `p0`, a megaflow pops it to the case's tunnel port, and the second pass's
/// megaflow, which matches the tunnel metadata and packet type the case expects exactly (so a
/// wrong field is a miss), runs the case's actions and outputs to `p1`; the capture must be
/// scapy's frame. Drop cases must send nothing and count one drop under their reason.
#[test]
fn every_decap_case_through_the_datapath_matches_scapy() {
    let dir = std::env::temp_dir().join(format!("flowpath-dp-decap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = std::fs::read_to_string(fixtures().join("DECAP")).unwrap();
    let mut cases = 0;
    let mut failures = Vec::new();
    for line in manifest
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let f: Vec<&str> = line.split('\t').collect();
        let (name, result, kind, input) = (f[0], f[1], f[2], fixtures().join(f[3]));
        let out = dir.join(format!("{name}.pcap"));
        cases += 1;
        if let Some(reason) = result.strip_prefix("drop:") {
            let (got, stats, drops) =
                decap_through_datapath(&input, kind, "in_port(TNL)", "p1", &out);
            let counted = datapath::tunnel::TnlPopDrop::ALL
                .iter()
                .zip(stats.tnl_pop_drops)
                .find(|(d, _)| d.name() == reason)
                .map(|(_, n)| n);
            let shown = drops
                .lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == [reason, "1"]);
            if !got.is_empty() || counted != Some(1) || stats.tnl_pops != 0 || !shown {
                failures.push(format!(
                    "{name}: {} frames out, {reason} counted {counted:?}, pops {}\n{drops}",
                    got.len(),
                    stats.tnl_pops
                ));
            }
            continue;
        }
        let (key, actions, expected) = (f[5], f[6], fixtures().join(f[7]));
        let (got, stats, _) = decap_through_datapath(
            &input,
            kind,
            &format!("{key},in_port(TNL)"),
            &format!("{actions},p1"),
            &out,
        );
        if got != frames(&expected) || stats.tnl_pops != 1 {
            failures.push(format!(
                "{name}: got {} frames (pops {}, lost upcalls {}), want the expected one",
                got.len(),
                stats.tnl_pops,
                stats.lost_upcalls
            ));
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(cases >= 40, "only {cases} cases in DECAP");
    assert!(
        failures.is_empty(),
        "{} of {cases} cases differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
