//! `flowpath bench ct_flood`: `ct`'s established flows while a flood of new connections fills
//! the connection table to its limit. No established packet may be lost, no established
//! connection evicted, and the flood must fill the table and then be refused at the limit.

use std::process::Command;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_flowpath")
}

/// A one-second run, with datapath flows and through OpenFlow, passes its own checks and
/// reports zero established loss, the flood's commits up to the limit and its refusals.
#[test]
fn bench_ct_flood_keeps_established_traffic() {
    for openflow in [false, true] {
        let mut args = vec![
            "bench",
            "ct_flood",
            "--flows",
            "500",
            "--seconds",
            "1",
            "--json",
        ];
        if openflow {
            args.push("--openflow");
        }
        let o = Command::new(bin()).args(&args).output().unwrap();
        let t = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(o.status.success(), "{args:?}: {t}");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["forwarded_ok"], true, "{args:?}: {t}");
        let f = &v["ct_flood"];
        assert_eq!(f["established_lost"], 0, "{args:?}: {t}");
        assert_eq!(f["established_evicted"], 0, "{args:?}: {t}");
        assert_eq!(f["invalid"], 0, "{args:?}: {t}");
        assert_eq!(f["ct_limit"], 1000, "{args:?}: {t}");
        assert_eq!(f["ct_connections"], 1000, "{args:?}: {t}");
        // The flood took the room left by the 500 established connections, then was refused.
        assert_eq!(f["flood_committed"], 500, "{args:?}: {t}");
        let flood = f["flood_packets"].as_u64().unwrap();
        let refused = f["flood_refused"].as_u64().unwrap();
        assert!(refused > 0 && refused + 500 <= flood + 64, "{args:?}: {t}");
        assert!(
            f["established_forwarded"].as_u64().unwrap() > 0,
            "{args:?}: {t}"
        );
        assert!(f["fill_secs"].as_f64().is_some(), "{args:?}: {t}");
    }
}

/// The human-readable report names both sources' figures.
#[test]
fn bench_ct_flood_report() {
    let o = Command::new(bin())
        .args(["bench", "ct_flood", "--flows", "100", "--seconds", "0.3"])
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("established: ") && t.contains(" 0 lost"), "{t}");
    assert!(t.contains("refused at the limit 200"), "{t}");
    assert!(t.contains("200 connections at the end"), "{t}");
}
