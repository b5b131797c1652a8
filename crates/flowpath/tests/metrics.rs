//! The Prometheus endpoint of `flowpath run` (`[metrics] listen`): a scrape of a switch that
//! forwarded a capture agrees with `pmd-stats-show` and `port/stats`; clients that send
//! garbage, a huge header or nothing do not stop the switch or the next scrape; a port in use
//! is logged and the switch runs on; Prometheus's own `promtool check metrics` accepts the
//! exposition and a real `prometheus` server scrapes it (both skipped, with the reason
//! printed, where Debian's `prometheus` package is not installed); every metric the Grafana
//! dashboard queries is one the endpoint serves.

mod common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::netns::{in_path, wait_until};
use common::{Reap, ctl, free_port, http_get, ok, scratch_dir, start_switch};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/pcap")
        .join(name)
}

/// A switch forwarding `plain_8.pcap` (8 packets, read once) from a pcap port to a sink
/// through one datapath flow, its metrics on `addr`; it runs until killed.
fn start_forwarding(dir: &Path, addr: &str) -> (Reap, PathBuf) {
    std::fs::copy(fixture("plain_8.pcap"), dir.join("in.pcap")).unwrap();
    let cfg = dir.join("sw.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[datapath]
dp-flows = ["in_port(p0),eth_type(0x0800),ipv4(frag=no), actions:p1"]

[[bridge]]
name = "br0"

[[bridge.port]]
name = "p0"
type = "pcap"
options = {{ rx_pcap = "in.pcap" }}

[[bridge.port]]
name = "p1"
type = "sink"

[metrics]
listen = "{addr}"
"#
        ),
    )
    .unwrap();
    let rundir = dir.join("run");
    let sw = start_switch(&cfg, &rundir);
    assert!(
        wait_until(Duration::from_secs(20), || {
            ok(ctl(&rundir, &["dpif-netdev/pmd-stats-show"])).contains("packets received: 8")
        }),
        "the capture was not forwarded"
    );
    (sw, rundir)
}

/// A scrape: the exposition, once the endpoint answers (it starts with the switch).
fn scrape(addr: &str) -> String {
    let t = Instant::now();
    loop {
        match http_get(addr, "/metrics", "") {
            Some((200, body)) => return body,
            other => assert!(
                t.elapsed() < Duration::from_secs(10),
                "no scrape from {addr}: {other:?}"
            ),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The value of sample `name{labels}` (labels as written, in order; "" for none).
fn value(text: &str, name: &str, labels: &str) -> Option<f64> {
    let want = if labels.is_empty() {
        format!("{name} ")
    } else {
        format!("{name}{{{labels}}} ")
    };
    text.lines()
        .find_map(|l| l.strip_prefix(&want))
        .and_then(|v| v.trim().parse().ok())
}

/// The number after `what` in `text` (`packets received: 8`).
fn figure(text: &str, what: &str) -> f64 {
    let rest = &text[text.find(what).unwrap_or_else(|| panic!("{what}: {text}")) + what.len()..];
    rest.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find(|w| !w.is_empty())
        .unwrap()
        .parse()
        .unwrap()
}

/// Every metric name a scrape serves: its samples' and its families' (`# TYPE`).
fn served_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for l in text.lines() {
        let name = match l.strip_prefix("# TYPE ") {
            Some(t) => t.split(' ').next(),
            None if l.starts_with('#') => None,
            None => l.split(['{', ' ']).next(),
        };
        names.extend(name.filter(|n| !n.is_empty()).map(str::to_owned));
    }
    names
}

#[test]
fn a_scrape_agrees_with_pmd_stats_show_and_port_stats() {
    let (dir, _rm) = scratch_dir("fp-metrics-values");
    let addr = format!("127.0.0.1:{}", free_port());
    let (_sw, rundir) = start_forwarding(&dir, &addr);
    let m = scrape(&addr);
    let pmd = ok(ctl(&rundir, &["dpif-netdev/pmd-stats-show"]));
    let core = pmd
        .lines()
        .next()
        .and_then(|l| l.split("core_id ").nth(1))
        .unwrap()
        .trim_end_matches(':')
        .to_owned();
    let core = if core == "NON_PMD" {
        "none".into()
    } else {
        core
    };
    let l = format!("pmd=\"0\",core=\"{core}\"");
    let pmd_value = |name: &str, extra: &str| {
        value(&m, name, &format!("{l}{extra}")).unwrap_or_else(|| panic!("{name}{extra}:\n{m}"))
    };
    assert_eq!(
        pmd_value("flowpath_pmd_rx_packets_total", ""),
        figure(&pmd, "packets received:")
    );
    assert_eq!(pmd_value("flowpath_pmd_rx_packets_total", ""), 8.0);
    for (tier, what) in [
        ("emc", "emc hits:"),
        ("megaflow", "megaflow hits:"),
        ("simple", "simple match hits:"),
        ("decap", "decap fast path hits:"),
    ] {
        assert_eq!(
            pmd_value(
                "flowpath_pmd_cache_hits_total",
                &format!(",tier=\"{tier}\"")
            ),
            figure(&pmd, what),
            "{tier}"
        );
    }
    assert_eq!(
        pmd_value("flowpath_pmd_upcalls_total", ""),
        figure(&pmd, "miss with success upcall:")
    );
    assert_eq!(
        pmd_value("flowpath_pmd_lost_upcalls_total", ""),
        figure(&pmd, "miss with failed upcall:")
    );
    // The cycle counters go on between the two reads: only that they are there.
    assert!(pmd_value("flowpath_pmd_busy_cycles_total", "") > 0.0);
    assert!(pmd_value("flowpath_pmd_stage_cycles_total", ",stage=\"rx\"") >= 0.0);

    let p0 = ok(ctl(&rundir, &["port/stats", "p0"]));
    let p1 = ok(ctl(&rundir, &["port/stats", "p1"]));
    let total = |s: &str| s.lines().find(|l| l.contains("total")).unwrap().to_owned();
    let port = |name: &str, port: &str| {
        value(&m, name, &format!("port=\"{port}\"")).unwrap_or_else(|| panic!("{name} {port}"))
    };
    assert_eq!(
        port("flowpath_port_rx_packets_total", "p0"),
        figure(&total(&p0), "rx packets:")
    );
    assert_eq!(
        port("flowpath_port_rx_bytes_total", "p0"),
        figure(&total(&p0), "bytes:")
    );
    assert_eq!(
        port("flowpath_port_tx_packets_total", "p1"),
        figure(&total(&p1), "tx packets:")
    );
    assert_eq!(port("flowpath_port_tx_packets_total", "p1"), 8.0);
    assert_eq!(port("flowpath_port_link_up", "p0"), 1.0);
    assert_eq!(value(&m, "flowpath_megaflows", ""), Some(1.0));
    assert_eq!(value(&m, "flowpath_megaflow_limit", ""), Some(200000.0));
    assert_eq!(
        value(&m, "flowpath_openflow_rules", "bridge=\"br0\",table=\"0\""),
        Some(1.0)
    );
    assert_eq!(value(&m, "flowpath_conntrack_connections", ""), Some(0.0));
    assert_eq!(
        value(
            &m,
            "flowpath_pmd_dropped_packets_total",
            &format!("{l},reason=\"no_output_action\"")
        ),
        Some(0.0)
    );
    // HELP and TYPE once per family, with its samples together.
    let mut seen = BTreeSet::new();
    let mut current = String::new();
    for line in m.lines() {
        if let Some(t) = line.strip_prefix("# TYPE ") {
            current = t.split(' ').next().unwrap().to_owned();
            assert!(seen.insert(current.clone()), "{current} twice");
        } else if !line.starts_with('#') {
            assert!(line.starts_with(current.as_str()), "{line} after {current}");
        }
    }

    // OpenMetrics when asked for, and 404 elsewhere.
    let (status, om) = http_get(
        &addr,
        "/metrics",
        "Accept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5\r\n",
    )
    .unwrap();
    assert_eq!(status, 200);
    assert!(om.ends_with("# EOF\n"), "{om}");
    assert!(
        om.contains("# TYPE flowpath_pmd_rx_packets counter\n"),
        "{om}"
    );
    assert_eq!(http_get(&addr, "/", "").unwrap().0, 404);
}

#[test]
fn bad_clients_do_not_stop_the_switch_or_the_next_scrape() {
    let (dir, _rm) = scratch_dir("fp-metrics-bad");
    let addr = format!("127.0.0.1:{}", free_port());
    let (mut sw, rundir) = start_forwarding(&dir, &addr);
    scrape(&addr);
    // Garbage, then a header that never ends.
    let mut g = TcpStream::connect(&addr).unwrap();
    g.write_all(b"\x16\x03\x01\x02\x00garbage\r\n\r\n").unwrap();
    let mut answer = String::new();
    g.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = g.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    let mut huge = TcpStream::connect(&addr).unwrap();
    let _ = huge.write_all(b"GET /metrics HTTP/1.1\r\nX-Long: ");
    let chunk = vec![b'a'; 64 * 1024];
    for _ in 0..16 {
        if huge.write_all(&chunk).is_err() {
            break;
        }
    }
    let mut answer = String::new();
    huge.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let _ = huge.read_to_string(&mut answer);
    // The answer may be lost when the server closes with unread bytes (a reset).
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 431"),
        "{answer}"
    );
    // Clients that connect and say nothing, more than the endpoint serves or answers 503 at
    // once: the next is turned away at once (503, or closed unanswered), not left waiting.
    let silent: Vec<TcpStream> = (0..20)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    let t = Instant::now();
    let turned_away = http_get(&addr, "/metrics", "");
    assert!(
        matches!(turned_away, None | Some((503, _)) | Some((200, _))),
        "{turned_away:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    // The switch answers its control socket meanwhile.
    assert!(ok(ctl(&rundir, &["dpif-netdev/pmd-stats-show"])).contains("packets received: 8"));
    drop(silent);
    let m = scrape(&addr);
    assert!(m.contains("flowpath_pmd_rx_packets_total{"), "{m}");
    assert!(sw.0.try_wait().unwrap().is_none(), "the switch stopped");
}

#[test]
fn a_port_in_use_is_logged_and_the_switch_runs_on() {
    let (dir, _rm) = scratch_dir("fp-metrics-inuse");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let cfg = dir.join("sw.toml");
    std::fs::write(
        &cfg,
        format!("[[bridge]]\nname = \"br0\"\n\n[metrics]\nlisten = \"{addr}\"\n"),
    )
    .unwrap();
    let rundir = dir.join("run");
    let mut sw = Reap(
        Command::new(env!("CARGO_BIN_EXE_flowpath"))
            .args(["run", "--config"])
            .arg(&cfg)
            .arg("--rundir")
            .arg(&rundir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    assert!(
        wait_until(Duration::from_secs(20), || rundir
            .join("flowpath.ctl")
            .exists()),
        "no control socket"
    );
    assert!(ok(ctl(&rundir, &["dpif-netdev/pmd-stats-show"])).contains("packets received"));
    ok(ctl(&rundir, &["exit"]));
    sw.wait(Duration::from_secs(20)).unwrap();
    let err = sw.stderr();
    assert!(
        err.contains(&format!("|metrics|ERR|cannot listen on {addr}: "))
            && err.contains("the metrics endpoint is off"),
        "{err}"
    );
}

/// Whether Debian's `prometheus` package's `tool` is here; prints why the test is skipped
/// when not.
fn have(tool: &str, test: &str) -> bool {
    if in_path(tool) {
        return true;
    }
    println!("{test}: skipped: {tool} is not installed (apt-get install prometheus)");
    false
}

#[test]
fn promtool_accepts_the_exposition() {
    if !have("promtool", "promtool_accepts_the_exposition") {
        return;
    }
    let (dir, _rm) = scratch_dir("fp-metrics-promtool");
    let addr = format!("127.0.0.1:{}", free_port());
    let (_sw, _rundir) = start_forwarding(&dir, &addr);
    let m = scrape(&addr);
    let mut c = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(m.as_bytes()).unwrap();
    let o = c.wait_with_output().unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // promtool's lint also fails on advice; the exposition has none to take.
    assert!(
        o.status.success() && report.trim().is_empty(),
        "{report}\n{m}"
    );
}

#[test]
fn prometheus_scrapes_the_switch() {
    if !have("prometheus", "prometheus_scrapes_the_switch") {
        return;
    }
    let (dir, _rm) = scratch_dir("fp-metrics-prometheus");
    let addr = format!("127.0.0.1:{}", free_port());
    let (_sw, _rundir) = start_forwarding(&dir, &addr);
    let web = format!("127.0.0.1:{}", free_port());
    std::fs::write(
        dir.join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: flowpath\n    static_configs:\n      \
             - targets: ['{addr}']\n"
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let _prom = Reap(
        Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={web}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let query = |q: &str| {
        http_get(&web, &format!("/api/v1/query?query={q}"), "")
            .map(|(_, body)| body)
            .unwrap_or_default()
    };
    let t = Instant::now();
    let mut up = String::new();
    while t.elapsed() < Duration::from_secs(60) {
        up = query("up");
        if up.contains(r#""job":"flowpath""#) && up.contains(r#","1"]"#) {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let log = std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
    assert!(up.contains(r#","1"]"#), "up: {up}\n{log}");
    let rx = query("flowpath_pmd_rx_packets_total");
    assert!(
        rx.contains(r#""pmd":"0""#) && rx.contains(r#","8"]"#),
        "{rx}"
    );
    let p1 = query("flowpath_port_tx_packets_total%7Bport%3D%22p1%22%7D");
    assert!(p1.contains(r#","8"]"#), "{p1}");
}

#[test]
fn every_metric_the_dashboard_queries_is_served() {
    let dashboard =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../packaging/grafana/flowpath.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&dashboard).unwrap()).unwrap();
    assert!(json["schemaVersion"].as_u64().unwrap() >= 36);
    let templating = json["templating"]["list"].as_array().unwrap();
    assert!(
        templating
            .iter()
            .any(|v| v["type"] == "datasource" && v["query"] == "prometheus"),
        "no Prometheus datasource variable"
    );
    fn exprs(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v) {
                        ("expr", serde_json::Value::String(s)) => out.push(s.clone()),
                        _ => exprs(v, out),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| exprs(v, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    exprs(&json, &mut all);
    assert!(all.len() >= 10, "{all:?}");
    let mut used = BTreeSet::new();
    for e in &all {
        let mut rest = e.as_str();
        while let Some(i) = rest.find("flowpath_") {
            let name: String = rest[i..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            rest = &rest[i + name.len()..];
            used.insert(name);
        }
    }

    let (dir, _rm) = scratch_dir("fp-metrics-dashboard");
    let addr = format!("127.0.0.1:{}", free_port());
    let (_sw, _rundir) = start_forwarding(&dir, &addr);
    let served = served_names(&scrape(&addr));
    let missing: Vec<&String> = used.difference(&served).collect();
    assert!(missing.is_empty(), "queried, not served: {missing:?}");
}
