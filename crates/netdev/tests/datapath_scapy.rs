//! The whole datapath against scapy: for every case of `testdata/actions/` (input frame, OVS
//! datapath actions, expected frame built by scapy with checksums computed from scratch), a pcap
//! port feeds the input through a PMD thread, a megaflow installed as `dpctl/add-flow` would
//! (`in_port(p0)` → the case's actions, then output to `p1`) acts on it, and the capture written
//! by pcap port `p1` must equal scapy's frame byte for byte.
//!
//! Cases where the header an action needs is missing (`error:*`) must come out unchanged: the
//! datapath counts the failed rewrite and carries on with the remaining actions.

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
        let want = if result == "ok" {
            frames(&fixtures().join(expected))
        } else {
            frames(&input)
        };
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
