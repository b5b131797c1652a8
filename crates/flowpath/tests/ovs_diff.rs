//! Open vSwitch 3.1's own test scenarios, run against OVS and flowpath by `scripts/ovs-diff`:
//! those that pass today, so that flowpath printing something else than OVS where OVS's
//! tests look fails here. The whole comparison (hundreds of scenarios, half an hour) is
//! `scripts/ovs-diff` itself, whose results list every scenario that still differs and why.
//!
//! Needs root and Open vSwitch (the script installs Debian's `openvswitch-source` and `m4`
//! when they are missing); otherwise it prints `SKIP` with the reason and passes.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Scenarios that print the same on both switches today, by OVS's title (as in
/// `scripts/ovs-diff --list`), each done in a few seconds (`ofproto - ofport_request` passes
/// too but takes two minutes). One that starts to differ is a regression; one that is not
/// found any more (a title changed upstream) fails too, so the list cannot shrink unseen.
const PASSING: &[&str] = &[
    "MPLS xlate action - patch-port",
    "ofproto-dpif - revalidator/wait",
    "ofproto-dpif - resubmit",
    "ofproto-dpif - goto table",
    "ofproto-dpif - registers",
    "ofproto-dpif - extended registers",
    "ofproto-dpif - extended-extended registers",
    "ofproto-dpif - copy-field into extended registers",
    "ofproto-dpif - masked set-field into metadata",
    "ofproto-dpif - output",
    "ofproto-dpif - dec_ttl without arguments at offset 32 in ofpacts",
    "ofproto-dpif - dec_ttl with arguments at offset 32 in ofpacts",
    "ofproto-dpif - note at offset 24 in ofpacts",
    "ofproto-dpif - note action deep inside ofpacts",
    "ofproto-dpif - output, OFPP_NONE ingress port",
    "ofproto-dpif - exit",
    "ofproto-dpif - ofproto/trace command 2",
    "ofproto-dpif - ofproto/trace from dpctl output",
    "ofproto-dpif - MAC learning",
    "ofproto-dpif - truncate and output to patch port",
    "ofproto-dpif - ovs-appctl dpif/dump-flows",
    "ofproto-dpif - ovs-appctl dpif/get-flow",
    "ofproto-dpif - ovs-appctl dpif/get-flow - pmd",
    "ofproto-dpif - MPLS actions that result in a userspace action",
    "ofproto-dpif - MPLS actions that result in a drop",
    "ofproto-dpif megaflow - port classification",
    "ofproto-dpif megaflow - L2 classification",
    "ofproto-dpif megaflow - L4 classification",
    "ofproto-dpif megaflow - normal",
    "ofproto-dpif megaflow - normal - pmd",
    "ofproto-dpif megaflow - mpls",
    "ofproto-dpif megaflow - resubmit port action",
    "ofproto-dpif megaflow - resubmit table action",
    "ofproto-dpif megaflow - goto_table action",
    "ofproto-dpif megaflow - move action",
    "ofproto-dpif megaflow - set dl_dst",
    "ofproto-dpif megaflow - set dl_dst with match on dl_src",
    "ofproto-dpif - forward resubmit",
    "ofproto-dpif - backward resubmit",
    "ofproto-dpif - infinite resubmit",
    "ofproto-dpif - exponential resubmit chain",
    "ofproto-dpif - vlan matching",
    "ofproto-dpif - trace (unchanged)",
    "ofproto-dpif - conntrack - output action",
    "ofproto-dpif - conntrack - ct_label datapath flow",
    "ofproto-dpif - conntrack - no output",
    "ofproto-dpif - conntrack - tcp port reuse",
    "ofproto-dpif - conntrack - disable tcp sequence checking",
    "ofproto-dpif - conntrack - ofproto/trace",
    "ofproto-dpif - nat - ofproto/trace",
    "tunnel - ECN decapsulation",
    "tunnel - neighbor entry add and deletion",
    "ofproto-dpif - group chaining",
    "ofproto-dpif - all group in action list",
    "ofproto-dpif - indirect group in action list",
    "MPLS xlate action - group bucket",
    "ofproto - group add then bridge delete (OpenFlow 1.3)",
    "ofproto-dpif - write actions",
    "ofproto-dpif - clear actions",
    "ofproto-dpif - all group in action set",
    "ofproto-dpif - indirect group in action set",
    "ofproto-dpif - patch port with action set",
    "ofproto-dpif - fast failover group",
    "ofproto-dpif - push-pop",
    "ofproto-dpif - patch ports - no additional clone",
    "ofproto-dpif megaflow - push action",
    "ofproto-dpif megaflow - learning",
    "ofproto-dpif - stack too deep",
    "ofproto-dpif - load and move order",
    "ofproto-dpif - patch ports - meter (clone)",
    "ofproto-dpif - resubmit with recirculation",
    "ofproto-dpif - resubmit with tun_id",
    "ofproto-dpif - recirculation after resubmit",
    "ofproto-dpif - debug_slow action",
    "ofproto - mod flow with cookie change (OpenFlow 1.0)",
    "ofproto - mod flow with cookie change (NXM)",
    "ofproto-dpif - Default Table Miss - OF1.0 (OFPTC_TABLE_MISS_CONTROLLER)",
    "tunnel - too long nested attributes",
    "ofproto-dpif - output/flood flags",
    "ofproto-dpif - dec_ttl",
    "ofproto - bundle open (OpenFlow 1.4)",
    "ofproto - bundle commit, different flags (OpenFlow 1.4)",
    "ofproto - failing bundle add message (OpenFlow 1.3)",
    "ofproto - flow monitoring - (OpenFlow 1.3)",
    "ofproto - flow_mod with out_port matching (OpenFlow 1.1)",
    "ofproto-dpif - packet-in reasons (Openflow 1.4)",
    "ofproto-dpif packet-out controller",
    "ofproto-dpif packet-out goto_table",
    "ofproto-dpif - conntrack - ct_clear",
    "ofproto - feature request, config request",
    "ofproto - set OpenFlow port number",
    "ofproto - mod-port (OpenFlow 1.0)",
    "ofproto - mod-port (OpenFlow 1.2)",
    "ofproto - mod-port (OpenFlow 1.4)",
    "ofproto - controller role (OpenFlow 1.2)",
    "ofproto - controller role (OpenFlow 1.4)",
    "ofproto - controller role (OpenFlow 1.3)",
    "ofproto - requestforward (OpenFlow 1.4)",
    "ofproto - NXT requestforward (OpenFlow 1.0)",
    "ofproto - ONF requestforward (OpenFlow 1.3)",
    "ofproto - asynchronous message control (OpenFlow 1.0)",
    "ofproto - asynchronous message control (OpenFlow 1.2)",
    "ofproto - asynchronous message control (OpenFlow 1.3)",
    "ofproto - asynchronous message control (OpenFlow 1.5)",
    "learning action - delete_learned feature",
    "ofproto-dpif - VLAN+MPLS handling",
    "ofproto - bundle packet-out (OpenFlow 1.4)",
    "ofproto - bundle packet-out, failing bundle commit (OpenFlow 1.4)",
    "ofproto - bundle packet-out makes bundle commit to fail(OpenFlow 1.4)",
    "ofproto - packet-out from controller (OpenFlow 1.5)",
    "ofproto - packet-out with metadata and userdata (NXT_PACKET_IN2)",
    "ofproto - packet-out with set_field metadata (OpenFlow 1.5)",
    "ofproto - packet-out with set_field metadata with packet_type PT_ETH (OpenFlow 1.5)",
    "ofproto - packet-out with metadata (NXM)",
    "ofproto - packet-out with metadata (OpenFlow 1.2)",
    "ofproto - packet-out with metadata and dual set_field (OpenFlow 1.3)",
    "ofproto-dpif - ofproto/trace-packet-out",
    "learning action - limit",
];

/// `text` as a regular expression that matches exactly it.
fn regex_escape(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn ovs_scenarios_that_agree_still_agree() {
    let test = "ovs_scenarios_that_agree_still_agree";
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIP {test}: needs root (ovs-vswitchd runs as in OVS's test suite)");
        return;
    }
    let results = std::env::temp_dir().join(format!("ovs-diff-test-{}", std::process::id()));
    let titles: Vec<String> = PASSING.iter().map(|t| regex_escape(t)).collect();
    let filter = format!("^\\S+ ({})$", titles.join("|"));
    let out = Command::new(repo().join("scripts/ovs-diff"))
        .arg("--flowpath")
        .arg(env!("CARGO_BIN_EXE_flowpath"))
        .args(["--jobs", "4", "--filter", &filter, "--results"])
        .arg(results.join("results.txt"))
        .output()
        .expect("scripts/ovs-diff runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    if out.status.code() == Some(77) {
        eprintln!("SKIP {test}: {}", stdout.trim());
        return;
    }
    let json = std::fs::read(results.join("results.json")).unwrap_or_else(|e| {
        panic!(
            "no results ({e}); scripts/ovs-diff said:\n{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let _ = std::fs::remove_dir_all(&results);
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let scenarios = v["scenarios"].as_array().unwrap();
    let mut problems = Vec::new();
    for title in PASSING {
        match scenarios.iter().find(|s| s["title"] == *title) {
            None => problems.push(format!("{title}: not among OVS's scenarios any more")),
            Some(s) if s["result"] != "PASS" => problems.push(format!(
                "{title}: {} -- {}\n{}",
                s["result"].as_str().unwrap_or("?"),
                s["reason"].as_str().unwrap_or(""),
                s["details"].as_str().unwrap_or("")
            )),
            Some(_) => {}
        }
    }
    assert!(
        problems.is_empty(),
        "scenarios that printed the same on OVS and flowpath no longer do:\n{}",
        problems.join("\n")
    );
    let summary = format!(
        "{} passed, 0 failed (0 explained, 0 unexplained), 0 skipped",
        PASSING.len()
    );
    assert!(
        stdout.lines().last() == Some(summary.as_str()),
        "expected the summary '{summary}', got:\n{stdout}"
    );
}
