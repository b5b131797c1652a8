//! The differential `ovs-vsctl` check: every script in `testdata/ovsdb/scripts/` (`NAME.cmds`)
//! runs against `flowpath run --ovsdb` on a private `ovsdb-server`, and what `ovs-vsctl`
//! printed and what the switch wrote into the columns `ovs-vswitchd` owns must be what they
//! were against `ovs-vswitchd` 3.1 (`NAME.ovs`, recorded by `scripts/capture-vsctl-script`,
//! which describes the script syntax), once normalised (`common::ovsdb`). Every `ovs-vsctl`
//! runs with `--timeout=5`, so a switch that does not advance `cur_cfg` shows as `exit 142`.
//!
//! Where flowpath differs for a reason (a type OVS has and flowpath does not), `NAME.explained`
//! says so, rule by rule: `#` lines giving the reason, then `- LINE` (what OVS printed) and
//! `+ LINE` (what flowpath prints instead), rules apart by a blank line; a rule that no longer
//! matches anything fails the check, so explanations cannot go stale. Scripts that still differ
//! in ways flowpath is yet to fix are named, each with its reason, in `known-differences`;
//! their differences are printed, and the check fails when an unlisted script differs or a
//! listed one agrees.
//!
//! Scripts run four at a time, each on its own database and switch.
//! `VSCTL_SCRIPT=NAME` runs one script; `VSCTL_SCRIPT_SHOW=1` prints flowpath's output;
//! `VSCTL_SWITCH=ovs` runs the scripts against `ovs-vswitchd` instead (explanations unused),
//! which checks that this harness and the capture script agree. Skipped, with the reason
//! printed, without `ovsdb-server`/`ovs-vsctl` or without a flowpath that has `run --ovsdb`.

mod common;

use std::path::{Path, PathBuf};

use common::each_at_once;
use common::ovsdb::{
    Sandbox, Switch, missing, normalise, shell_words, show_owned, show_types, sort_tree,
};

fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/ovsdb/scripts")
}

/// What one script item printed, as the recording's lines.
fn run_item(sb: &mut Sandbox, item: &str) -> Vec<String> {
    match item {
        "show-owned" => return show_owned(sb),
        "show-types" => return show_types(sb),
        "restart-switch" => {
            let rc = sb.restart_switch();
            return if rc == 0 {
                Vec::new()
            } else {
                vec![format!("exit {rc}")]
            };
        }
        _ => {}
    }
    if let Some(secs) = item.strip_prefix("sleep ") {
        std::thread::sleep(std::time::Duration::from_secs_f64(
            secs.trim().parse().unwrap(),
        ));
        return Vec::new();
    }
    let args = shell_words(item);
    let (rc, out, err) = match args.split_first() {
        Some((first, rest)) if first == "appctl" => sb.appctl(rest),
        _ => sb.vsctl(&args, 5),
    };
    let mut lines: Vec<String> = normalise(&out, &sb.dir)
        .lines()
        .map(str::to_owned)
        .collect();
    if args.last().is_some_and(|a| a == "show") {
        lines = sort_tree(&lines);
    }
    lines.extend(
        normalise(&err, &sb.dir)
            .lines()
            .map(|l| format!("stderr: {l}")),
    );
    if rc != 0 {
        lines.push(format!("exit {rc}"));
    }
    lines
}

/// Runs script `name` on a fresh database and switch: the recording's lines (no header).
fn run_script(name: &str, switch: Switch) -> Vec<String> {
    let cmds = std::fs::read_to_string(scripts_dir().join(format!("{name}.cmds"))).unwrap();
    let mut sb = Sandbox::new(&format!("fp-vsctl-{name}"), switch);
    sb.start_switch();
    let mut out = Vec::new();
    for item in cmds.lines().map(str::trim) {
        if item.is_empty() || item.starts_with('#') {
            continue;
        }
        out.push(format!("== {item}"));
        out.extend(run_item(&mut sb, item));
    }
    out
}

/// One rule of a `NAME.explained` file: where OVS printed `ovs`, flowpath prints `flowpath`.
#[derive(Debug, PartialEq)]
struct Explanation {
    why: String,
    ovs: Vec<String>,
    flowpath: Vec<String>,
}

fn parse_explanations(text: &str) -> Vec<Explanation> {
    let mut rules = Vec::new();
    for block in text.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let mut e = Explanation {
            why: String::new(),
            ovs: Vec::new(),
            flowpath: Vec::new(),
        };
        for l in block.lines() {
            if let Some(w) = l.strip_prefix('#') {
                e.why += w.trim();
                e.why.push(' ');
            } else if let Some(o) = l.strip_prefix("- ") {
                e.ovs.push(o.to_owned());
            } else if let Some(f) = l.strip_prefix("+ ") {
                e.flowpath.push(f.to_owned());
            } else {
                panic!("explanation line neither `#`, `- ` nor `+ `: {l:?}");
            }
        }
        assert!(
            !e.why.is_empty(),
            "an explanation without a reason: {block}"
        );
        assert!(
            !e.ovs.is_empty(),
            "an explanation without `- ` lines: {block}"
        );
        rules.push(e);
    }
    rules
}

/// The recording with every rule applied wherever its `- ` lines occur, in order; the rules
/// that matched nothing.
fn apply(recorded: &[String], rules: &[Explanation]) -> (Vec<String>, Vec<String>) {
    let mut lines = recorded.to_vec();
    let mut unused = Vec::new();
    for r in rules {
        let mut out = Vec::new();
        let mut i = 0;
        let mut hits = 0;
        while i < lines.len() {
            if lines[i..].starts_with(&r.ovs) {
                out.extend(r.flowpath.iter().cloned());
                i += r.ovs.len();
                hits += 1;
            } else {
                out.push(lines[i].clone());
                i += 1;
            }
        }
        if hits == 0 {
            unused.push(format!("- {}", r.ovs.join(" / ")));
        }
        lines = out;
    }
    (lines, unused)
}

/// The recording's sections (`== ITEM` and its lines).
fn sections(lines: &[String]) -> Vec<&[String]> {
    let starts: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with("== "))
        .chain([lines.len()])
        .collect();
    starts.windows(2).map(|w| &lines[w[0]..w[1]]).collect()
}

/// The sections where `want` and `got` differ, as `== ITEM` then `- ` and `+ ` lines.
fn differences(want: &[String], got: &[String]) -> Vec<String> {
    let (w, g) = (sections(want), sections(got));
    let mut out = Vec::new();
    for (a, b) in w.iter().zip(&g) {
        assert_eq!(
            a[0], b[0],
            "the recording is not of this script: re-capture it"
        );
        if a != b {
            out.push(a[0].clone());
            out.extend(
                a[1..]
                    .iter()
                    .filter(|l| !b.contains(l))
                    .map(|l| format!("- {l}")),
            );
            out.extend(
                b[1..]
                    .iter()
                    .filter(|l| !a.contains(l))
                    .map(|l| format!("+ {l}")),
            );
        }
    }
    assert_eq!(
        w.len(),
        g.len(),
        "the recording is not of this script: re-capture it"
    );
    out
}

/// Scripts checked at once. Each has its own database and switch, and most of a script's
/// time is its `sleep`s (a stats or LACP interval passing), which then overlap.
const AT_ONCE: usize = 4;

/// Runs script `name` against `switch` and compares it with OVS's recording: what to print
/// about it, and whether it agrees (no difference, no explanation left unused).
fn check_script(name: &str, switch: Switch, show: bool) -> (String, bool) {
    let recorded = std::fs::read_to_string(scripts_dir().join(format!("{name}.ovs")))
        .unwrap_or_else(|_| panic!("{name}.ovs: run scripts/capture-vsctl-script {name}"));
    let recorded: Vec<String> = recorded
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    let explained = scripts_dir().join(format!("{name}.explained"));
    let rules = match (switch, std::fs::read_to_string(explained)) {
        (Switch::Flowpath, Ok(text)) => parse_explanations(&text),
        _ => Vec::new(),
    };
    let (want, unused) = apply(&recorded, &rules);
    let got = run_script(name, switch);
    let mut report = String::new();
    if show {
        report += &format!("# {name}\n{}\n", got.join("\n"));
    }
    let diffs = differences(&want, &got);
    if diffs.is_empty() && unused.is_empty() {
        report += &format!("{name}: agrees\n");
        return (report, true);
    }
    report += &format!("{name}: differs\n{}\n", diffs.join("\n"));
    for u in &unused {
        report += &format!("{name}: explanation matches nothing: {u}\n");
    }
    (report, false)
}

#[test]
fn vsctl_scripts() {
    let switch = match std::env::var("VSCTL_SWITCH").as_deref() {
        Ok("ovs") => Switch::Ovs,
        _ => Switch::Flowpath,
    };
    if let Some(why) = missing(switch) {
        eprintln!("skipped: {why}");
        return;
    }
    let mut names: Vec<String> = std::fs::read_dir(scripts_dir())
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            (p.extension()? == "cmds").then(|| p.file_stem().unwrap().to_str().unwrap().to_owned())
        })
        .collect();
    names.sort();
    if let Ok(one) = std::env::var("VSCTL_SCRIPT") {
        names.retain(|n| *n == one);
        assert!(!names.is_empty(), "no script {one}");
    }
    let show = std::env::var_os("VSCTL_SCRIPT_SHOW").is_some();
    let mut failed = Vec::new();
    let checked = each_at_once(&names, AT_ONCE, |n| check_script(n, switch, show));
    for (name, (report, agrees)) in names.iter().zip(checked) {
        print!("{report}");
        if !agrees {
            failed.push(name.clone());
        }
    }
    // The scripts that still differ, each with its reason, are listed in `known-differences`:
    // the check fails when another script differs, and when a listed one agrees (the list
    // must shrink as flowpath catches up).
    let known: Vec<String> = match switch {
        Switch::Flowpath => known_differences()
            .into_iter()
            .filter(|k| names.contains(k))
            .collect(),
        Switch::Ovs => Vec::new(),
    };
    let new: Vec<&String> = failed.iter().filter(|f| !known.contains(f)).collect();
    let stale: Vec<&String> = known.iter().filter(|k| !failed.contains(k)).collect();
    assert!(
        new.is_empty() && stale.is_empty(),
        "scripts that differ and are not in known-differences: {new:?}; listed there but agree \
         now (take them out): {stale:?}"
    );
}

/// The script names of `testdata/ovsdb/scripts/known-differences`: `NAME # reason` lines.
fn known_differences() -> Vec<String> {
    let text = std::fs::read_to_string(scripts_dir().join("known-differences")).unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (name, why) = l.split_once('#').expect("NAME # reason");
            assert!(!why.trim().is_empty(), "no reason: {l}");
            name.trim().to_owned()
        })
        .collect()
}

#[test]
fn splits_like_a_shell() {
    assert_eq!(
        shell_words(r#"set interface p1 options:key="a b\x\"" 'c\d' e\ f"#),
        [
            "set",
            "interface",
            "p1",
            r#"options:key=a b\x""#,
            r"c\d",
            "e f"
        ]
    );
}

#[test]
fn explanations_replace_lines_and_go_stale() {
    let rules = parse_explanations(
        "# flowpath has no afxdp\n- types [afxdp, gre]\n+ types [gre]\n\n\
         # gone\n- never printed\n",
    );
    assert_eq!(rules[0].why, "flowpath has no afxdp ");
    let rec: Vec<String> = ["== show-types", "types [afxdp, gre]"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let (lines, unused) = apply(&rec, &rules);
    assert_eq!(lines, ["== show-types", "types [gre]"]);
    assert_eq!(unused, ["- never printed"]);
}
