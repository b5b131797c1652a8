//! Oracle tests against Open vSwitch's `ovs-ofctl`.
//!
//! `tests/data/flows.txt` is a corpus of flows; `flows.golden` holds what `ovs-ofctl -F nxm
//! parse-flows` prints for each (see `scripts/gen-ofctl-golden` for why that invocation is the
//! one whose printing matches `dump-flows`). For every flow, our `dump-flows --no-stats` line
//! must equal OVS's. `bad_flows.txt` lists flows we reject, with our error message, and
//! `bad_flows.golden` records that `ovs-ofctl` rejects them too (or silently drops the offending
//! field, "normalized"). The golden tests need no OVS; `live_*` re-run `ovs-ofctl` when it is
//! installed and say so when it is not.

use std::path::PathBuf;
use std::process::Command;

use ofproto::syntax::{FlowKind, NoPortNames, parse_flow};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn read(name: &str) -> String {
    std::fs::read_to_string(data(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Flow lines of a corpus, as `add-flows` reads them: `#` starts a comment, blank lines skipped.
fn corpus_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

fn golden_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// Turns what `ovs-ofctl parse-flow` prints after "ADD " (`ofputil_flow_mod_format()`:
/// `table:3 priority=5,in_port=1 cookie:0x10 idle:10 hard:20 send_flow_rem actions=drop`)
/// into the line `dump-flows --no-stats` prints for the same flow (`ofputil_flow_stats_format()`:
/// `cookie=0x10, table=3, idle_timeout=10, hard_timeout=20, send_flow_rem priority=5,in_port=1
/// actions=drop`).
fn flow_mod_to_dump(raw: &str) -> String {
    let (head, actions) = raw
        .split_once("actions=")
        .unwrap_or_else(|| panic!("no actions in {raw:?}"));
    let mut tokens = head.split_whitespace().peekable();
    let mut table = 0u32;
    if let Some(t) = tokens.peek().and_then(|t| t.strip_prefix("table:")) {
        // 255 ("any table") adds to table 0.
        table = t.parse().unwrap();
        if table == 255 {
            table = 0;
        }
        tokens.next();
    }
    const ITEMS: [&str; 9] = [
        "cookie:",
        "idle:",
        "hard:",
        "importance:",
        "pri:",
        "buf:",
        "out_port:",
        "send_flow_rem",
        "check_overlap",
    ];
    let mut m = "";
    if let Some(t) = tokens.peek()
        && !ITEMS.iter().any(|i| t.starts_with(i))
    {
        m = t;
        tokens.next();
    }
    let (mut cookie, mut idle, mut hard, mut importance) = (None, None, None, None);
    let mut flags = String::new();
    for t in tokens {
        if let Some(v) = t.strip_prefix("cookie:") {
            cookie = Some(v.to_string());
        } else if let Some(v) = t.strip_prefix("idle:") {
            idle = Some(v.to_string());
        } else if let Some(v) = t.strip_prefix("hard:") {
            hard = Some(v.to_string());
        } else if let Some(v) = t.strip_prefix("importance:") {
            importance = Some(v.to_string());
        } else if t == "send_flow_rem" || t == "check_overlap" {
            flags.push_str(t);
            flags.push(' ');
        } else {
            panic!("unexpected {t:?} in {raw:?}");
        }
    }
    let mut out = String::new();
    if let Some(c) = cookie {
        out.push_str(&format!("cookie={c}, "));
    }
    if table != 0 {
        out.push_str(&format!("table={table}, "));
    }
    if let Some(v) = idle {
        out.push_str(&format!("idle_timeout={v}, "));
    }
    if let Some(v) = hard {
        out.push_str(&format!("hard_timeout={v}, "));
    }
    out.push_str(&flags);
    if let Some(v) = importance {
        out.push_str(&format!("importance={v}, "));
    }
    if !m.is_empty() {
        out.push_str(m);
        out.push(' ');
    }
    out.push_str("actions=");
    out.push_str(actions);
    out
}

fn ours(flow: &str) -> Result<String, String> {
    // `-F nxm parse-flows` prints the flow mod OpenFlow 1.0 with NXM carries.
    parse_flow(flow, FlowKind::Add, &NoPortNames)
        .map(|f| f.as_openflow10().to_string())
        .map_err(|e| e.to_string())
}

fn compare(flows: &[String], raw: &[String]) -> Vec<String> {
    let mut failures = Vec::new();
    for (flow, raw) in flows.iter().zip(raw) {
        let want = flow_mod_to_dump(raw);
        match ours(flow) {
            Ok(got) if got == want => {}
            Ok(got) => failures.push(format!("{flow}\n  ovs:  {want}\n  ours: {got}")),
            Err(e) => failures.push(format!("{flow}\n  ovs:  {want}\n  ours: error: {e}")),
        }
    }
    failures
}

#[test]
fn corpus_matches_ovs_ofctl_golden() {
    let flows = corpus_lines(&read("flows.txt"));
    let golden = golden_lines(&read("flows.golden"));
    assert!(flows.len() >= 150, "corpus has only {} flows", flows.len());
    assert_eq!(
        flows.len(),
        golden.len(),
        "flows.golden is stale: run scripts/gen-ofctl-golden"
    );
    let failures = compare(&flows, &golden);
    assert!(
        failures.is_empty(),
        "{} of {} flows differ from ovs-ofctl:\n{}",
        failures.len(),
        flows.len(),
        failures.join("\n")
    );
}

#[test]
fn flow_mod_conversion() {
    assert_eq!(
        flow_mod_to_dump("table:3 priority=5,in_port=1 cookie:0x10 idle:10 hard:20 actions=drop"),
        "cookie=0x10, table=3, idle_timeout=10, hard_timeout=20, priority=5,in_port=1 actions=drop"
    );
    assert_eq!(
        flow_mod_to_dump("table:255 send_flow_rem actions=NORMAL"),
        "send_flow_rem actions=NORMAL"
    );
}

/// `flows.dump` (written by `scripts/gen-ofctl-golden --switch`) holds what a real
/// `ovs-vswitchd` dumps for each corpus flow added alone: the check that `parse-flows` output
/// is what `dump-flows` prints. Flow-mod flags are left out of our line: OpenFlow 1.0 flow
/// statistics do not carry them. Flows the dummy switch refuses (tunnel metadata without a TLV
/// map, the hidden table 254) are skipped.
#[test]
fn corpus_matches_switch_dump() {
    let flows = corpus_lines(&read("flows.txt"));
    let dump = golden_lines(&read("flows.dump"));
    assert_eq!(
        flows.len(),
        dump.len(),
        "flows.dump is stale: run scripts/gen-ofctl-golden --switch"
    );
    let mut failures = Vec::new();
    let mut refused = 0;
    for (flow, want) in flows.iter().zip(&dump) {
        if want.starts_with("refused: ") {
            refused += 1;
            // Tunnel metadata without a TLV map, the hidden table, and the fields only the
            // switch's own flows match (`dp_hash`, `recirc_id` other than 0).
            assert!(
                flow.contains("tun_metadata")
                    || flow.contains("table=254")
                    || flow.contains("dp_hash"),
                "unexpected refusal of {flow}: {want}"
            );
            continue;
        }
        let got = match ours(flow) {
            Ok(s) => s
                .replace("send_flow_rem ", "")
                .replace("check_overlap ", ""),
            Err(e) => format!("error: {e}"),
        };
        if &got != want {
            failures.push(format!("{flow}\n  switch: {want}\n  ours:   {got}"));
        }
    }
    assert!(refused < 20, "{refused} flows refused by the switch");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A bad flow: the text, our expected error, and ovs-ofctl's recorded verdict.
struct Bad {
    flow: String,
    error: String,
    verdict: String,
}

fn bad_flows() -> Vec<Bad> {
    let lines = corpus_lines(&read("bad_flows.txt"));
    let verdicts = golden_lines(&read("bad_flows.golden"));
    assert_eq!(
        lines.len(),
        verdicts.len(),
        "bad_flows.golden is stale: run scripts/gen-ofctl-golden"
    );
    lines
        .iter()
        .zip(verdicts)
        .map(|(l, verdict)| {
            let (flow, error) = l
                .split_once('\t')
                .unwrap_or_else(|| panic!("bad_flows.txt: no tab in {l:?}"));
            Bad {
                flow: flow.to_string(),
                error: error.to_string(),
                verdict,
            }
        })
        .collect()
}

/// Whether ovs-ofctl refused the flow or dropped part of it.
fn ovs_objects(verdict: &str) -> bool {
    verdict.starts_with("rejected: ") || verdict.starts_with("normalized: ")
}

#[test]
fn bad_flows_are_rejected_like_ovs() {
    let bad = bad_flows();
    assert!(bad.len() >= 30, "only {} bad flows", bad.len());
    let mut failures = Vec::new();
    for b in &bad {
        match parse_flow(&b.flow, FlowKind::Add, &NoPortNames) {
            Ok(f) => failures.push(format!("{}: accepted as {f}", b.flow)),
            Err(e) if e.to_string() != b.error => {
                failures.push(format!("{}:\n  want: {}\n  got:  {e}", b.flow, b.error))
            }
            Err(_) => {}
        }
        if !ovs_objects(&b.verdict) {
            failures.push(format!("{}: ovs-ofctl accepts it ({})", b.flow, b.verdict));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn ofctl() -> Option<String> {
    let bin = std::env::var("OVS_OFCTL").unwrap_or_else(|_| "ovs-ofctl".to_string());
    match Command::new(&bin).arg("--version").output() {
        Ok(o) if o.status.success() => Some(bin),
        _ => None,
    }
}

fn flow_mod_lines(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| l.split_once("): ADD ").map(|(_, r)| r.to_string()))
        .collect()
}

#[test]
fn live_ovs_ofctl_agrees_on_corpus() {
    let Some(bin) = ofctl() else {
        eprintln!("skipped: ovs-ofctl not installed (set OVS_OFCTL to use another binary)");
        return;
    };
    let out = Command::new(&bin)
        .args(["-F", "nxm", "parse-flows"])
        .arg(data("flows.txt"))
        .output()
        .expect("run ovs-ofctl");
    assert!(
        out.status.success(),
        "ovs-ofctl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let live = flow_mod_lines(&String::from_utf8_lossy(&out.stdout));
    let flows = corpus_lines(&read("flows.txt"));
    assert_eq!(live.len(), flows.len());
    let failures = compare(&flows, &live);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let golden = golden_lines(&read("flows.golden"));
    if live != golden {
        eprintln!("note: flows.golden differs from this ovs-ofctl's output (another version?)");
    }
}

#[test]
fn live_ovs_ofctl_objects_to_bad_flows() {
    let Some(bin) = ofctl() else {
        eprintln!("skipped: ovs-ofctl not installed (set OVS_OFCTL to use another binary)");
        return;
    };
    let mut failures = Vec::new();
    for b in bad_flows() {
        let out = Command::new(&bin)
            .args(["-F", "nxm", "parse-flow", &b.flow])
            .output()
            .expect("run ovs-ofctl");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let objects = !out.status.success()
            || stdout.contains("decode error")
            || stderr.contains("normalization changed");
        if !objects {
            failures.push(format!("{}: ovs-ofctl accepts it: {stdout}", b.flow));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
