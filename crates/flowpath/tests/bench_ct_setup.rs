//! `flowpath bench ct_setup`: the connection setup rate. Every packet of the window must have
//! set up (committed) a connection of its own, with datapath flows and through OpenFlow, and
//! the figure is reported as setups per second.

use std::process::{Command, Output};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_flowpath")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A short run passes its own check (one commit per sink packet), forwards every packet in
/// two passes, and reports the commits as setups per second; the flows come round many times
/// in the window, so a tracker that kept them alive would fail it.
#[test]
fn bench_ct_setup_commits_a_connection_per_packet() {
    for openflow in [false, true] {
        let mut args = vec![
            "bench",
            "ct_setup",
            "--flows",
            "30",
            "--seconds",
            "0.5",
            "--json",
        ];
        if openflow {
            args.push("--openflow");
        }
        let o = Command::new(bin()).args(&args).output().unwrap();
        let t = text(&o);
        assert!(o.status.success(), "{args:?}: {t}");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["forwarded_ok"], true, "{args:?}: {t}");
        assert_eq!(v["passes_per_packet"], 2.0, "{args:?}: {t}");
        assert_eq!(v["lost_upcalls"], 0, "{args:?}: {t}");
        let sink = v["sink_packets"].as_u64().unwrap();
        let setups = v["ct_setups"].as_u64().unwrap();
        // Round the 30 flows many times (no rate is asserted: a slow machine still sends a
        // few hundred packets in the window): each packet a new connection, not one per flow.
        assert!(sink > 10 * 30, "{args:?}: {t}");
        assert!(setups.abs_diff(sink) * 100 <= sink, "{args:?}: {t}");
        let rate = v["ct_setups_per_sec"].as_f64().unwrap();
        let secs = v["seconds"].as_f64().unwrap();
        assert!((rate * secs - setups as f64).abs() < 1.0, "{args:?}: {t}");
    }
    // The human-readable report names the figure.
    let o = Command::new(bin())
        .args(["bench", "ct_setup", "--flows", "1000", "--seconds", "0.3"])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("connection setups: "), "{t}");
    assert!(t.contains("cycles/setup"), "{t}");
}

/// `--write-pcap` gives OVS the frames `ct_setup` replays: `ct`'s plain UDP flows.
#[test]
fn ct_setup_traffic_is_cts() {
    let d = std::env::temp_dir().join(format!("flowpath-ct-setup-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let mut pcaps = Vec::new();
    for s in ["ct", "ct_setup"] {
        let p = d.join(format!("{s}.pcap"));
        let o = Command::new(bin())
            .args(["bench", s, "--flows", "1000", "--write-pcap"])
            .arg(&p)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        pcaps.push(std::fs::read(&p).unwrap());
    }
    assert_eq!(pcaps[0], pcaps[1]);
    let _ = std::fs::remove_dir_all(&d);
}
