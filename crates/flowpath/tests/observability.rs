//! `coverage/show`, `coverage/read-counter`, `memory/show` and `upcall/show` have the shape
//! ovs-vswitchd 3.1 gives them: the same bridge (netdev, two dummy ports, made by `ovs-vsctl`
//! through a private `ovsdb-server`) run by Debian's `ovs-vswitchd` and by `flowpath run
//! --ovsdb`, the same commands through `ovs-appctl`, and their replies compared line by line
//! with the figures taken out (the figures differ: the events counted and the hidden rules are
//! not the same). Skipped, with the reason printed, without OVS's tools or root.

mod common;

use std::process::Command;

use common::ovsdb::{Sandbox, Switch, missing, words};

/// Both switches' replies to `command`, after the same configuration: (OVS's, flowpath's).
struct Replies {
    ovs: Vec<(i32, String, String)>,
    flowpath: Vec<(i32, String, String)>,
}

const COMMANDS: [&[&str]; 5] = [
    &["coverage/show"],
    &["coverage/read-counter", "bridge_reconfigure"],
    &["coverage/read-counter", "no_such_event"],
    &["memory/show"],
    &["upcall/show"],
];

fn replies() -> Option<Replies> {
    for s in [Switch::Ovs, Switch::Flowpath] {
        if let Some(why) = missing(s) {
            eprintln!("skipped: {why}");
            return None;
        }
    }
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: ovs-vswitchd's sandbox needs root");
        return None;
    }
    let run = |switch| {
        let mut sb = Sandbox::new("fp-observability", switch);
        sb.start_switch();
        let add = [
            "add-br br0 -- set bridge br0 datapath_type=netdev",
            "add-port br0 p1 -- set interface p1 type=dummy",
            "add-port br0 p2 -- set interface p2 type=dummy",
        ];
        for a in add {
            let (rc, _, err) = sb.vsctl(&common::ovsdb::shell_words(a), 10);
            assert_eq!(rc, 0, "{a}: {err}");
        }
        assert_eq!(sb.wait_configured(), 0);
        // OVS adds each thread's counts to the totals once a second: wait for the bridge's.
        let t = std::time::Instant::now();
        loop {
            let r: Vec<(i32, String, String)> = COMMANDS.iter().map(|c| appctl(&sb, c)).collect();
            if r[0].1.contains("\nbridge_reconfigure ") || t.elapsed().as_secs() > 10 {
                return r;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    };
    Some(Replies {
        ovs: run(Switch::Ovs),
        flowpath: run(Switch::Flowpath),
    })
}

/// `ovs-appctl -t DIR/ovs-vswitchd.ctl COMMAND...`: exit status, stdout, stderr.
fn appctl(sb: &Sandbox, command: &[&str]) -> (i32, String, String) {
    let o = Command::new("ovs-appctl")
        .arg("-t")
        .arg(sb.dir.join("ovs-vswitchd.ctl"))
        .args(words(command))
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// An event line of `coverage/show` is OVS's `printf` format to the byte: parsed, then
/// printed again the same.
fn event_line(l: &str) -> Option<(String, u64)> {
    let name = l.get(..24)?.trim_end();
    let rest: Vec<&str> = l.get(24..)?.split_whitespace().collect();
    let [a, b, c, "total:", t] = rest.as_slice() else {
        return None;
    };
    let rate = |s: &str| s.strip_suffix("/sec")?.parse::<f64>().ok();
    let (a, b, c, t) = (rate(a)?, rate(b)?, rate(c)?, t.parse::<u64>().ok()?);
    let again = format!("{name:<24} {a:5.1}/sec {b:9.3}/sec {c:13.4}/sec   total: {t}");
    (again == l && !name.contains(' ')).then(|| (name.to_owned(), t))
}

/// `coverage/show`'s events, checked line by line.
fn coverage_events(text: &str) -> Vec<(String, u64)> {
    let lines: Vec<&str> = text.lines().collect();
    let head = lines[0];
    let hash = head
        .strip_prefix(
            "Event coverage, avg rate over last: 5 seconds, last minute, last hour,  hash=",
        )
        .and_then(|h| h.strip_suffix(':'))
        .unwrap_or_else(|| panic!("header: {head:?}"));
    assert!(
        hash.len() == 8
            && hash
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
        "{head}"
    );
    let last = lines[lines.len() - 1];
    let never = last.strip_suffix(" events never hit").expect(last);
    assert!(never.parse::<u32>().is_ok(), "{last}");
    lines[1..lines.len() - 1]
        .iter()
        .map(|l| event_line(l).unwrap_or_else(|| panic!("event line {l:?}")))
        .collect()
}

/// Figures out: every run of digits becomes `N`.
fn shape(text: &str) -> String {
    let mut out = String::new();
    let mut in_number = false;
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !in_number {
                out.push('N');
            }
            in_number = true;
        } else {
            out.push(c);
            in_number = false;
        }
    }
    out
}

#[test]
fn the_replies_have_ovs_vswitchd_s_shape() {
    let Some(r) = replies() else { return };
    let (ovs, fp) = (&r.ovs, &r.flowpath);

    // coverage/show: both well formed; both counted the reconfiguration (OVS's other
    // threads add theirs to its totals later).
    assert_eq!((ovs[0].0, fp[0].0), (0, 0), "{ovs:?} {fp:?}");
    let has = |events: &[(String, u64)], e: &str| events.iter().any(|(n, _)| n == e);
    let ovs_events = coverage_events(&ovs[0].1);
    let fp_events = coverage_events(&fp[0].1);
    assert!(has(&ovs_events, "bridge_reconfigure"), "OVS: {}", ovs[0].1);
    for e in ["bridge_reconfigure", "ofproto_update_port"] {
        assert!(has(&fp_events, e), "flowpath: {}", fp[0].1);
    }

    // coverage/read-counter: a number, or OVS's error.
    for rep in [&ovs[1], &fp[1]] {
        assert_eq!(rep.0, 0);
        assert!(rep.1.trim_end().parse::<u64>().unwrap() > 0, "{rep:?}");
        assert!(
            rep.1.ends_with('\n') && rep.1.lines().count() == 1,
            "{rep:?}"
        );
    }
    assert_eq!(ovs[2].0, fp[2].0);
    assert_eq!(ovs[2].1, fp[2].1);
    assert!(fp[2].2.starts_with("No such counter\n"), "{:?}", fp[2]);

    // memory/show: one line of sorted `name:count`; OVS's names all there.
    let pairs = |s: &str| -> Vec<(String, u64)> {
        assert!(s.ends_with('\n') && s.lines().count() == 1, "{s:?}");
        let (mut out, mut name) = (Vec::new(), String::new());
        for word in s.trim_end().split(' ') {
            // A name may have spaces ("udpif keys"): its words come before the count.
            match word.rsplit_once(':') {
                Some((k, v)) => {
                    out.push((name.clone() + k, v.parse().unwrap()));
                    name.clear();
                }
                None => name = name + word + " ",
            }
        }
        assert!(name.is_empty(), "{s:?}");
        out
    };
    let (om, fm) = (pairs(&ovs[3].1), pairs(&fp[3].1));
    for list in [&om, &fm] {
        assert!(list.windows(2).all(|w| w[0].0 < w[1].0), "{list:?}");
        assert!(list.iter().all(|(_, v)| *v > 0), "{list:?}");
    }
    for (k, _) in &om {
        assert!(fm.iter().any(|(f, _)| f == k), "{k} missing: {fm:?}");
    }
    // The same ports, and the database replica counted as OVS's IDL counts it.
    let get = |l: &[(String, u64)], name: &str| l.iter().find(|(k, _)| k == name).map(|p| p.1);
    for name in ["ports", "idl-cells-Open_vSwitch"] {
        assert_eq!(get(&om, name), get(&fm, name), "{name}: {om:?} {fm:?}");
    }

    // upcall/show: the same lines, figures and the datapath's name aside.
    let upcall = |s: &str| shape(s.split_once(":\n").unwrap().1);
    assert_eq!(
        upcall(&ovs[4].1),
        upcall(&fp[4].1),
        "{}\n{}",
        ovs[4].1,
        fp[4].1
    );
}
