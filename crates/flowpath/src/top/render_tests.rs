//! The screen drawn from fixed rates: its exact text for a small switch, and its bounds
//! (every line within the width, the whole within the height) for large and extreme ones.

use super::*;

fn stages() -> Vec<String> {
    [
        "rx", "extract", "emc", "megaflow", "upcall", "actions", "tx",
    ]
    .map(String::from)
    .to_vec()
}

fn pmd(core: usize, pps: f64) -> PmdRates {
    PmdRates {
        core_id: Some(core),
        busy_pct: 97.25,
        rx_pps: pps,
        stage_cpp: vec![21.0, 38.4, 17.0, 9.5, 0.2, 44.0, 31.0],
        cpp: 161.1,
        emc_pct: 92.5,
        megaflow_pct: 7.49,
        upcall_pct: 0.01,
    }
}

fn port(name: &str, pps: f64) -> PortRates {
    PortRates {
        name: name.into(),
        link_up: true,
        rx_pps: pps,
        tx_pps: pps * 0.99,
        rx_mbps: pps * 64.0 * 8.0 / 1e6,
        tx_mbps: pps * 0.99 * 64.0 * 8.0 / 1e6,
        drops_ps: pps * 0.01,
        errors_ps: 0.0,
    }
}

fn small() -> Rates {
    let mut down = port("vhu-vm1", 0.0);
    down.link_up = false;
    Rates {
        uptime_secs: 3723.0,
        secs: 1.0,
        megaflows: 1024,
        rx_pps: 7_400_000.0,
        tx_pps: 7_326_000.0,
        stages: stages(),
        pmds: vec![pmd(2, 3_700_000.0), pmd(3, 3_700_000.0)],
        ports: vec![port("dpdk0", 7_400_000.0), port("dpdk1", 12_500.0), down],
        drops: vec![
            ("upcall_lost".into(), 1520.0),
            ("tunnel_pop_truncated".into(), 3.0),
        ],
    }
}

/// Many PMDs and ports, long names, every drop reason dropping.
fn big() -> Rates {
    let mut r = small();
    r.pmds = (0..12).map(|c| pmd(c, 1e6 * c as f64)).collect();
    r.ports = (0..200)
        .map(|i| port(&format!("a-rather-long-port-name-{i}"), 1e3 * i as f64))
        .collect();
    r.drops = (0..30)
        .map(|i| (format!("some_drop_reason_{i}"), 1e6 / (i + 1) as f64))
        .collect();
    r
}

fn assert_fits(lines: &[String], width: usize, height: usize) {
    assert!(
        lines.len() <= height,
        "{} lines:\n{}",
        lines.len(),
        lines.join("\n")
    );
    for l in lines {
        assert!(
            l.chars().count() <= width,
            "{} columns: {l:?}",
            l.chars().count()
        );
    }
}

#[test]
fn a_small_switch_at_80x24() {
    let lines = render(&small(), 80, Some(24));
    let expected = "\
flowpath top  up 1h02m03s  2 PMDs  1024 megaflows  rx 7.40 Mpps  tx 7.33 Mpps

core busy%  rx pps cyc/pk   rx  ext  emc   mf  upc  act   tx  emc%   mf%  upc%
   2  97.2    3.7M    161   21   38   17   10    0   44   31  92.5   7.5   0.0
   3  97.2    3.7M    161   21   38   17   10    0   44   31  92.5   7.5   0.0

port                    rx pps    tx pps  rx Mbit/s  tx Mbit/s   drop/s  err/s
dpdk0                     7.4M      7.3M     3788.8     3750.9      74k      0
dpdk1                      12k       12k        6.4        6.3      125      0
vhu-vm1 (down)               0         0        0.0        0.0        0      0

drops/s:  upcall_lost 1.5k  tunnel_pop_truncated 3";
    assert_eq!(lines.join("\n"), expected);
    assert_fits(&lines, 80, 24);
}

#[test]
fn a_big_switch_is_cut_to_the_terminal() {
    for (w, h) in [(80, 24), (100, 40), (40, 10), (80, 8), (10, 3), (1, 1)] {
        let lines = render(&big(), w, Some(h));
        assert_fits(&lines, w, h);
    }
    let lines = render(&big(), 80, Some(24));
    assert_eq!(lines.len(), 24);
    // The busiest ports are the ones kept.
    assert!(lines.iter().any(|l| l.starts_with("... ")), "{lines:#?}");
    let drops: Vec<&String> = lines.iter().filter(|l| l.contains("some_drop")).collect();
    assert_eq!(drops.len(), MAX_DROP_LINES, "{lines:#?}");
    assert!(drops[1].ends_with("more"), "{}", drops[1]);
}

#[test]
fn without_a_height_every_row_is_there() {
    let lines = render(&big(), 80, None);
    assert_eq!(
        lines.iter().filter(|l| l.contains("a-rather-long")).count(),
        200
    );
    assert!(lines.iter().all(|l| l.chars().count() <= 80));
}

#[test]
fn extreme_figures_stay_in_their_columns() {
    let mut r = small();
    r.uptime_secs = 1e9;
    r.megaflows = u64::MAX;
    r.rx_pps = 1e15;
    for p in &mut r.pmds {
        p.rx_pps = 1e15;
        p.stage_cpp = vec![1e12; 7];
        p.cpp = 1e13;
        p.busy_pct = 100.0;
        p.emc_pct = 100.0;
    }
    let lines = render(&r, 80, Some(24));
    assert_fits(&lines, 80, 24);
    // The PMD rows are as wide as their heading: no figure pushed the next column.
    assert_eq!(lines[3].len(), lines[2].len(), "{}\n{}", lines[2], lines[3]);
}

#[test]
fn figures_in_five_characters() {
    for (x, s) in [
        (0.4, "0"),
        (999.0, "999"),
        (1500.0, "1.5k"),
        (12_345.0, "12k"),
        (7_400_000.0, "7.4M"),
        (64e6, "64M"),
        (1.2e9, "1.2G"),
    ] {
        assert_eq!(si(x), s);
    }
    assert_eq!(duration(12.0), "12s");
    assert_eq!(duration(184.0), "3m04s");
    assert_eq!(duration(90_061.0), "1d01h01m");
}
