//! The OVS-DPDK anchor's traffic, made by flowpath: every kind of its `gen_pcaps.py` (scapy
//! 2.8.0) for 8, 1000 and 100000 flows, written as pcap with the anchor's fixed timestamps,
//! must hash to the anchor's `pcaps.sha256` (copied to `data/anchor-pcaps.sha256`); the frame
//! size must match scapy's at 300 bytes (`data/anchor-pcaps-size300.sha256`); and
//! `flowpath bench SCENARIO --write-pcap` must write the traffic the anchor feeds SCENARIO.
//! The `io_floor_*` scenarios (p2p fed the tunnel traffic) run and forward it unchanged.
//!
//! Hashes come from `sha256sum` (coreutils), so no hashing crate is needed.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use netdev::anchor_traffic::{DEFAULT_FRAME_SIZE, TrafficKind, frames, write_pcap};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_flowpath")
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `sha256sum`'s lines (`HASH  FILE`), by file name; `#` lines are comments.
fn expected_hashes(name: &str) -> HashMap<String, String> {
    let t = std::fs::read_to_string(data(name)).unwrap();
    t.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (hash, file) = l.split_once("  ").unwrap_or_else(|| panic!("bad line {l}"));
            (file.trim().to_owned(), hash.to_owned())
        })
        .collect()
}

fn sha256(bytes: &[u8]) -> String {
    let mut child = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sha256sum (coreutils) must be installed");
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
    String::from_utf8(o.stdout).unwrap()[..64].to_owned()
}

fn pcap_bytes(kind: TrafficKind, n: usize, size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    write_pcap(&mut out, &frames(kind, n, size)).unwrap();
    out
}

/// Every kind at the given flow counts, against the anchor's hashes.
fn check_anchor_hashes(counts: &[usize]) {
    let want = expected_hashes("anchor-pcaps.sha256");
    let mut wrong = Vec::new();
    for kind in TrafficKind::ALL {
        for &n in counts {
            let file = format!("{kind}_{n}.pcap");
            let want = want
                .get(&file)
                .unwrap_or_else(|| panic!("no hash for {file}"));
            let got = sha256(&pcap_bytes(kind, n, DEFAULT_FRAME_SIZE));
            if &got != want {
                wrong.push(format!("{file}: {got}, the anchor's {want}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "not the anchor's bytes (compare with gen_pcaps.py's output):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_kind_is_the_anchors_pcap_for_8_and_1000_flows() {
    check_anchor_hashes(&[8, 1000]);
}

/// 100000 flows: 6 pcaps of 6-12 MB, about a second in a debug build.
#[test]
fn every_kind_is_the_anchors_pcap_for_100000_flows() {
    check_anchor_hashes(&[100_000]);
}

/// `--frame-size` as `gen_pcaps.py`'s `size` (seed 000's table has MPLSoGRE at 64 and 300).
#[test]
fn frame_size_300_is_scapys() {
    let want = expected_hashes("anchor-pcaps-size300.sha256");
    assert_eq!(want.len(), 8);
    for (file, hash) in &want {
        let (stem, n) = file.trim_end_matches(".pcap").rsplit_once('_').unwrap();
        let kind = TrafficKind::from_name(stem).unwrap();
        let got = sha256(&pcap_bytes(kind, n.parse().unwrap(), 300));
        assert_eq!(&got, hash, "{file} at 300 bytes");
    }
}

fn temp(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("flowpath-anchor-{tag}-{}.pcap", std::process::id()))
}

/// `--write-pcap` writes, for each scenario of the anchor (those flowpath runs and those it
/// does not run yet), the anchor's pcap of the kind that scenario is fed.
#[test]
fn write_pcap_writes_the_traffic_the_anchor_feeds_each_scenario() {
    let want = expected_hashes("anchor-pcaps.sha256");
    let scenarios = [
        ("p2p", "plain"),
        ("p2p_l3", "plain"),
        ("vxlan_decap", "vxlan_l3vpn"),
        ("vxlan_decap_csum0", "vxlan_l3vpn_csum0"),
        ("mplsogre_decap", "mplsogre"),
        ("geneve_decap", "geneve"),
        ("geneve_decap_csum0", "geneve_csum0"),
        ("vxlan_encap", "plain"),
        ("ct", "plain"),
        ("io_floor_vxlan", "vxlan_l3vpn"),
        ("io_floor_mplsogre", "mplsogre"),
        ("io_floor_geneve", "geneve"),
    ];
    let f = temp("write");
    for (scenario, kind) in scenarios {
        let o = Command::new(bin())
            .args(["bench", scenario, "--flows", "1000", "--write-pcap"])
            .arg(&f)
            .output()
            .unwrap();
        assert!(o.status.success(), "{scenario}: {}", text(&o));
        assert!(
            text(&o).contains(&format!("1000 frames of {kind} traffic")),
            "{}",
            text(&o)
        );
        let got = sha256(&std::fs::read(&f).unwrap());
        assert_eq!(got, want[&format!("{kind}_1000.pcap")], "{scenario}");
    }
    let o = Command::new(bin())
        .args([
            "bench",
            "mplsogre_decap",
            "--flows",
            "8",
            "--frame-size",
            "300",
        ])
        .arg("--write-pcap")
        .arg(&f)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let got = sha256(&std::fs::read(&f).unwrap());
    assert_eq!(
        got,
        expected_hashes("anchor-pcaps-size300.sha256")["mplsogre_8.pcap"]
    );
    let _ = std::fs::remove_file(&f);

    let o = Command::new(bin())
        .args(["bench", "vxlan", "--write-pcap"])
        .arg(&f)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains("unknown scenario 'vxlan'"),
        "{}",
        text(&o)
    );
    assert!(!f.exists());
}

/// The I/O floor of the tunnel traffic: p2p fed the encapsulated frames forwards every one
/// unchanged in one pass, through generated traffic and through the same frames read from
/// the pcap `--write-pcap` made; also through the OpenFlow pipeline.
#[test]
fn io_floor_scenarios_forward_the_tunnel_traffic() {
    let f = temp("floor");
    for (scenario, kind) in [
        ("io_floor_vxlan", "vxlan_l3vpn"),
        ("io_floor_mplsogre", "mplsogre"),
        ("io_floor_geneve", "geneve"),
    ] {
        let o = Command::new(bin())
            .args(["bench", scenario, "--flows", "1000", "--write-pcap"])
            .arg(&f)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        let pcap = f.to_str().unwrap();
        for extra in [&[][..], &["--pcap", pcap][..], &["--openflow"][..]] {
            let o = Command::new(bin())
                .args([
                    "bench",
                    scenario,
                    "--flows",
                    "1000",
                    "--seconds",
                    "0.3",
                    "--json",
                ])
                .args(extra)
                .output()
                .unwrap();
            let t = text(&o);
            assert!(o.status.success(), "{scenario} {extra:?}: {t}");
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(v["forwarded_ok"], true, "{t}");
            assert_eq!(v["flows"], 1000, "{t}");
            assert_eq!(v["passes_per_packet"], 1.0, "{t}");
            assert_eq!(v["lost_upcalls"], 0, "{t}");
            let traffic = v["traffic"].as_str().unwrap();
            if extra.is_empty() {
                assert_eq!(traffic, kind, "{t}");
            }
        }
    }
    let _ = std::fs::remove_file(&f);
}

/// The anchor's scenarios flowpath cannot run yet (those `flowpath bench --help` lists as such)
/// are refused by name (`scripts/compare-ovs` reports such a cell as n/a on this message),
/// unknown names as unknown.
#[test]
fn scenarios_flowpath_lacks_are_named_as_such() {
    let o = Command::new(bin())
        .args(["bench", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(o.stdout).unwrap();
    let not_yet: Vec<&str> = help
        .split_once("does not run yet:")
        .map(|(_, rest)| rest.split("Options:").next().unwrap())
        .unwrap_or("")
        .split([',', '.', '\n'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    for s in &not_yet {
        assert!(
            s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
            "not a scenario name: '{s}' (help: {help})"
        );
        let o = Command::new(bin())
            .args(["bench", s, "--seconds", "0.1"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{s}: {}", text(&o));
        assert!(
            text(&o).contains(&format!("scenario '{s}' is not in flowpath yet")),
            "{}",
            text(&o)
        );
    }
    let o = Command::new(bin())
        .args(["bench", "nosuch", "--seconds", "0.1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains("unknown scenario 'nosuch'"),
        "{}",
        text(&o)
    );
}
