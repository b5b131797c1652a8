//! A private Open vSwitch database for the OVSDB tests, and the normalisation that makes what
//! `ovs-vsctl` prints and what a switch writes comparable between runs and switches.
//!
//! [`Sandbox`] is a scratch directory with a fresh `conf.db` (Debian's `vswitch.ovsschema`,
//! OVS 3.1) served by a private `ovsdb-server` on `DIR/db.sock`, and one switch driving it:
//! `flowpath run --ovsdb unix:DIR/db.sock --enable-dummy=override --rundir DIR`, or Debian's
//! `ovs-vswitchd` with dummy ports only (`--enable-dummy=override --disable-system
//! --disable-system-route`) to check the harness itself. `scripts/ovsdb_sandbox.py` and `scripts/capture-vsctl-script` are the same
//! recipe and the same normalisation in Python, for recording what `ovs-vswitchd` does; the
//! rules are listed there and at [`normalise`] and [`show_owned`], and must stay the same.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Reap, RmDir, scratch_dir};

/// The schema Debian's `openvswitch-common` installs.
pub const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

/// `ovs-vsctl`'s arguments that add bridge br0 to the userspace datapath.
pub const ADD_BR0: &[&str] = &[
    "add-br",
    "br0",
    "--",
    "set",
    "bridge",
    "br0",
    "datapath_type=netdev",
];

/// Which program drives the private database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Switch {
    /// `flowpath run --ovsdb`.
    Flowpath,
    /// Debian's `ovs-vswitchd`, with dummy ports only.
    Ovs,
}

/// Why the OVSDB tests cannot run here, if they cannot: a missing tool or schema, or a
/// flowpath without `run --ovsdb`.
pub fn missing(switch: Switch) -> Option<String> {
    let mut tools = vec!["ovsdb-tool", "ovsdb-server", "ovs-vsctl", "ovs-appctl"];
    if switch == Switch::Ovs {
        tools.push("ovs-vswitchd");
    }
    for t in tools {
        if Command::new(t).arg("--version").output().is_err() {
            return Some(format!("{t} is not installed"));
        }
    }
    if !Path::new(SCHEMA).exists() {
        return Some(format!("{SCHEMA} is missing"));
    }
    if switch == Switch::Flowpath {
        let help = Command::new(env!("CARGO_BIN_EXE_flowpath"))
            .args(["run", "--help"])
            .output()
            .unwrap();
        if !String::from_utf8_lossy(&help.stdout).contains("--ovsdb") {
            return Some("this flowpath has no `run --ovsdb`".to_owned());
        }
    }
    None
}

/// A private `ovsdb-server` and a switch in a scratch directory, all stopped when dropped.
pub struct Sandbox {
    pub dir: PathBuf,
    /// `unix:DIR/db.sock`.
    pub db: String,
    switch: Switch,
    child: Option<Reap>,
    syncs: u32,
    _rm: RmDir,
}

impl Sandbox {
    /// A fresh database (`ovs-vsctl init` done), no switch yet.
    pub fn new(name: &str, switch: Switch) -> Sandbox {
        let (dir, rm) = scratch_dir(name);
        let d = dir.display().to_string();
        let sb = Sandbox {
            db: format!("unix:{d}/db.sock"),
            dir,
            switch,
            child: None,
            syncs: 0,
            _rm: rm,
        };
        sb.run(&["ovsdb-tool", "create", &format!("{d}/conf.db"), SCHEMA]);
        sb.run(&[
            "ovsdb-server",
            "--detach",
            "--no-chdir",
            &format!("--pidfile={d}/ovsdb-server.pid"),
            &format!("--remote=punix:{d}/db.sock"),
            &format!("--unixctl={d}/ovsdb-server.ctl"),
            &format!("--log-file={d}/ovsdb-server.log"),
            &format!("{d}/conf.db"),
        ]);
        sb.run(&["ovs-vsctl", &format!("--db={}", sb.db), "--no-wait", "init"]);
        sb
    }

    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        for v in ["OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVS_SYSCONFDIR"] {
            c.env(v, &self.dir);
        }
        c
    }

    fn run(&self, argv: &[&str]) {
        let o = self.command(argv[0]).args(&argv[1..]).output().unwrap();
        assert!(o.status.success(), "{argv:?}: {o:?}");
    }

    /// Starts the switch; returns once it is running (not once it has configured anything).
    pub fn start_switch(&mut self) {
        self.start_switch_in(None);
    }

    /// Starts the switch, in network namespace `netns` with real devices (no
    /// `--enable-dummy`) when one is given.
    pub fn start_switch_in(&mut self, netns: Option<&str>) {
        let d = self.dir.display().to_string();
        match self.switch {
            Switch::Ovs => {
                let (pidfile, unixctl, logfile) = (
                    format!("--pidfile={d}/ovs-vswitchd.pid"),
                    format!("--unixctl={d}/ovs-vswitchd.ctl"),
                    format!("--log-file={d}/ovs-vswitchd.log"),
                );
                let mut argv = match netns {
                    Some(ns) => vec!["ip", "netns", "exec", ns, "ovs-vswitchd"],
                    None => vec!["ovs-vswitchd", "--enable-dummy=override"],
                };
                argv.extend([
                    "--detach",
                    "--no-chdir",
                    &pidfile,
                    &unixctl,
                    "--disable-system",
                    "--disable-system-route",
                    &logfile,
                    &self.db,
                ]);
                self.run(&argv);
            }
            Switch::Flowpath => {
                let log = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(self.dir.join("flowpath.log"))
                    .unwrap();
                let mut c = match netns {
                    Some(ns) => {
                        let mut c = self.command("ip");
                        c.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_flowpath")]);
                        c
                    }
                    None => self.command(env!("CARGO_BIN_EXE_flowpath")),
                };
                c.args(["run", "--ovsdb", &self.db, "--rundir", &d]);
                if netns.is_none() {
                    c.arg("--enable-dummy=override");
                }
                let child = c
                    .arg(format!("--unixctl={d}/ovs-vswitchd.ctl"))
                    .stdin(Stdio::null())
                    .stdout(log.try_clone().unwrap())
                    .stderr(log)
                    .spawn()
                    .unwrap();
                self.child = Some(Reap(child));
                let t = Instant::now();
                while !self.dir.join("ovs-vswitchd.ctl").exists() && t.elapsed().as_secs() < 20 {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }

    /// Stops the switch and waits until it is gone.
    pub fn stop_switch(&mut self) {
        match self.switch {
            Switch::Flowpath => {
                if let Some(mut c) = self.child.take() {
                    let _ = Command::new("kill")
                        .arg(c.0.id().to_string())
                        .stderr(Stdio::null())
                        .status();
                    let _ = c.wait(Duration::from_secs(10));
                }
            }
            Switch::Ovs => self.appctl_exit("ovs-vswitchd"),
        }
    }

    /// `ovs-appctl -t DIR/NAME.ctl exit`, then waits for NAME's pidfile to go.
    fn appctl_exit(&self, name: &str) {
        let ctl = self.dir.join(format!("{name}.ctl"));
        if !ctl.exists() {
            return;
        }
        let _ = self
            .command("ovs-appctl")
            .arg("-t")
            .arg(&ctl)
            .arg("exit")
            .output();
        let pid = self.dir.join(format!("{name}.pid"));
        let t = Instant::now();
        while pid.exists() && t.elapsed().as_secs() < 10 {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the switch and starts it again, and waits until it has read the database.
    pub fn restart_switch(&mut self) -> i32 {
        self.stop_switch();
        self.start_switch();
        self.wait_configured()
    }

    /// `ovs-vsctl --db=... [--timeout=T] ARGS`: exit status, stdout, stderr.
    pub fn vsctl(&self, args: &[String], timeout: u32) -> (i32, String, String) {
        let mut c = self.command("ovs-vsctl");
        c.arg(format!("--db={}", self.db));
        if timeout > 0 {
            c.arg(format!("--timeout={timeout}"));
        }
        let o = c.args(args).output().unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    /// `ovs-appctl ARGS` against the switch: (exit status, stdout, stderr).
    pub fn appctl(&self, args: &[String]) -> (i32, String, String) {
        let o = self
            .command("ovs-appctl")
            .arg("-t")
            .arg(self.dir.join("ovs-vswitchd.ctl"))
            .arg("--timeout=5")
            .args(args)
            .output()
            .unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    /// `ovs-vsctl ARGS` with a 10-second timeout, which must succeed: its output.
    pub fn vsctl_strs(&self, args: &[&str]) -> String {
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        let (rc, out, err) = self.vsctl(&args, 10);
        assert_eq!(rc, 0, "ovs-vsctl {args:?}: {err}");
        out
    }

    /// `ovs-appctl ARGS`: its output.
    pub fn appctl_strs(&self, args: &[&str]) -> String {
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        self.appctl(&args).1
    }

    /// A change that makes `ovs-vsctl` wait until the switch has caught up (`cur_cfg`): how a
    /// restarted switch is known to have read the database. The exit status.
    pub fn wait_configured(&mut self) -> i32 {
        self.syncs += 1;
        let set = format!("external_ids:vsctl-sync={}", self.syncs);
        self.vsctl(&words(&["set", "Open_vSwitch", ".", &set]), 30)
            .0
    }

    /// The rows of `table` (`_uuid` and `columns`), as `ovs-vsctl -f json -d json list` gives
    /// them: column name to OVSDB JSON datum, `_uuid` a bare string.
    pub fn rows(&self, table: &str, columns: &[&str]) -> Vec<serde_json::Map<String, Value>> {
        let cols = format!("--columns=_uuid,{}", columns.join(","));
        let (rc, out, err) = self.vsctl(
            &words(&["-f", "json", "-d", "json", &cols, "list", table]),
            5,
        );
        assert_eq!(rc, 0, "list {table}: {err}");
        let j: Value = serde_json::from_str(&out).unwrap();
        let heads: Vec<String> = j["headings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_str().unwrap().to_owned())
            .collect();
        j["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let mut m: serde_json::Map<String, Value> = heads
                    .iter()
                    .cloned()
                    .zip(r.as_array().unwrap().iter().cloned())
                    .collect();
                let u = m["_uuid"][1].clone();
                m.insert("_uuid".to_owned(), u);
                m
            })
            .collect()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.stop_switch();
        self.appctl_exit("ovsdb-server");
    }
}

/// Owned strings of `args`.
pub fn words(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

/// `line` split as a shell splits a command line: white space separates words, quotes group
/// and are removed, a backslash takes the next character literally (in double quotes only
/// before `"`, `\`, `$` and `` ` ``; never in single quotes), as Python's `shlex.split` does.
pub fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if let Some(w) = cur.take() {
                    words.push(w);
                }
            }
            '\'' => {
                let w = cur.get_or_insert_with(String::new);
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    w.push(c);
                }
            }
            '"' => {
                let w = cur.get_or_insert_with(String::new);
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => w.push(c),
                            Some(c) => {
                                w.push('\\');
                                w.push(c);
                            }
                            None => w.push('\\'),
                        },
                        c => w.push(c),
                    }
                }
            }
            '\\' => cur.get_or_insert_with(String::new).extend(chars.next()),
            c => cur.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(cur);
    words
}

/// The columns `ovs-vswitchd` writes (vswitchd/bridge.c), per table; `next_cfg` is shown
/// beside `cur_cfg`.
const OWNED: &[(&str, &[&str])] = &[
    (
        "Open_vSwitch",
        &["cur_cfg", "next_cfg", "dpdk_initialized", "dpdk_version"],
    ),
    (
        "Bridge",
        &["datapath_id", "datapath_version", "status", "rstp_status"],
    ),
    ("Port", &["status", "statistics", "bond_active_slave"]),
    (
        "Interface",
        &[
            "ofport",
            "error",
            "admin_state",
            "link_state",
            "link_resets",
            "link_speed",
            "duplex",
            "mtu",
            "mac_in_use",
            "ifindex",
            "status",
            "statistics",
            "lacp_current",
            "bfd_status",
        ],
    ),
    ("Controller", &["is_connected", "role", "status"]),
    ("Datapath", &["capabilities"]),
];

/// The columns that name a row in [`show_owned`] or decide its normalisation (read, not shown).
fn context(table: &str) -> &'static [&'static str] {
    match table {
        "Open_vSwitch" => &["datapaths"],
        "Bridge" => &["name", "other_config", "controller"],
        "Port" => &["name"],
        "Interface" => &["name", "mac"],
        "Controller" => &["target"],
        _ => &[],
    }
}

/// An OVSDB JSON atom as [`show_owned`] prints it: strings quoted, UUIDs `<uuid>`.
fn atom(a: &Value) -> String {
    match a {
        Value::Array(v) if v.len() == 2 && (v[0] == "uuid" || v[0] == "named-uuid") => {
            "<uuid>".to_owned()
        }
        Value::String(_) => a.to_string(),
        _ => a.to_string(),
    }
}

/// How [`datum`] shows a map's values.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Values {
    All,
    /// Times and ages read `*` (`sec_since_*`, `*_time`, `duration`).
    TimesHidden,
    /// Every value reads `*`.
    KeysOnly,
}

/// An OVSDB JSON datum as [`show_owned`] prints it: `[a, b]`, `{k=v, ...}` or the atom.
fn datum(d: &Value, values: Values) -> String {
    let pairs = |v: &Value| v.as_array().cloned().unwrap_or_default();
    match d.as_array().map(|v| (v[0].as_str(), v)) {
        Some((Some("set"), v)) => {
            let items: Vec<String> = pairs(&v[1]).iter().map(atom).collect();
            format!("[{}]", items.join(", "))
        }
        Some((Some("map"), v)) => {
            let items: Vec<String> = pairs(&v[1])
                .iter()
                .map(|kv| {
                    let k = kv[0].as_str().unwrap_or_default();
                    let hide = values == Values::KeysOnly
                        || (values == Values::TimesHidden
                            && (k.starts_with("sec_since")
                                || k.ends_with("_time")
                                || k == "duration"));
                    let v = if hide { "*".to_owned() } else { atom(&kv[1]) };
                    format!("{}={v}", atom(&kv[0]))
                })
                .collect();
            format!("{{{}}}", items.join(", "))
        }
        _ => atom(d),
    }
}

/// The string pairs of a map datum.
fn string_map(d: &Value) -> Vec<(String, String)> {
    d.get(1)
        .and_then(Value::as_array)
        .map(|v| {
            v.iter()
                .map(|kv| {
                    let s = |x: &Value| x.as_str().unwrap_or_default().to_owned();
                    (s(&kv[0]), s(&kv[1]))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The UUIDs in a set (or a single UUID atom).
fn uuids(d: &Value) -> Vec<String> {
    match d.as_array() {
        Some(v) if v[0] == "set" => v[1]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u[1].as_str().unwrap().to_owned())
            .collect(),
        Some(v) if v[0] == "uuid" => vec![v[1].as_str().unwrap().to_owned()],
        _ => Vec::new(),
    }
}

/// The datapath ids a Bridge's `other_config` asks for (`datapath-id`, or from `hwaddr`).
fn asked_dpids(other_config: &Value) -> Vec<Value> {
    let mut v = Vec::new();
    for (k, val) in string_map(other_config) {
        match k.as_str() {
            "datapath-id" => v.push(Value::String(val)),
            "hwaddr" => v.push(Value::String(format!(
                "0000{}",
                val.replace(':', "").to_lowercase()
            ))),
            _ => {}
        }
    }
    v
}

/// The columns the switch owns, of every row, one `TABLE ROW COLUMN VALUE` line each, rows in
/// name order (a Controller is `BRIDGE:TARGET`, a Datapath its `Open_vSwitch.datapaths` key).
/// Statistics keep their keys only, status values that are times read `*`, a `datapath_id` not
/// asked for by `other_config` reads `<dpid>`, and `mac_in_use` reads `<mac>` unless the
/// Interface's `mac` is set.
pub fn show_owned(sb: &Sandbox) -> Vec<String> {
    let mut tables = Vec::new();
    for (t, cols) in OWNED {
        let all: Vec<&str> = cols.iter().chain(context(t)).copied().collect();
        tables.push((*t, *cols, sb.rows(t, &all)));
    }
    let mut ctl_bridge = std::collections::HashMap::new();
    let mut dp_name = std::collections::HashMap::new();
    for (t, _, rows) in &tables {
        for r in rows {
            match *t {
                "Bridge" => {
                    for u in uuids(&r["controller"]) {
                        ctl_bridge.insert(u, r["name"].as_str().unwrap().to_owned());
                    }
                }
                "Open_vSwitch" => {
                    for kv in r["datapaths"][1].as_array().unwrap() {
                        let k = kv[0].as_str().unwrap().to_owned();
                        dp_name.insert(kv[1][1].as_str().unwrap().to_owned(), k);
                    }
                }
                _ => {}
            }
        }
    }
    let mut lines = Vec::new();
    for (t, cols, rows) in &tables {
        let mut named: Vec<(String, &serde_json::Map<String, Value>)> = rows
            .iter()
            .map(|r| {
                let uuid = r["_uuid"].as_str().unwrap();
                let name = match *t {
                    "Open_vSwitch" => ".".to_owned(),
                    "Controller" => format!(
                        "{}:{}",
                        ctl_bridge.get(uuid).map_or("?", String::as_str),
                        r["target"].as_str().unwrap_or_default()
                    ),
                    "Datapath" => dp_name.get(uuid).cloned().unwrap_or_else(|| "?".into()),
                    _ => r["name"].as_str().unwrap_or_default().to_owned(),
                };
                (name, r)
            })
            .collect();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, r) in named {
            for c in *cols {
                let v = &r[*c];
                let empty = *v == serde_json::json!(["set", []]);
                let s = match *c {
                    "statistics" => datum(v, Values::KeysOnly),
                    "status" => datum(v, Values::TimesHidden),
                    "datapath_id" if !empty && !asked_dpids(&r["other_config"]).contains(v) => {
                        "<dpid>".to_owned()
                    }
                    "mac_in_use" if !empty && r["mac"] == serde_json::json!(["set", []]) => {
                        "<mac>".to_owned()
                    }
                    _ => datum(v, Values::All),
                };
                lines.push(hide_dummy_macs(&format!("{t} {name} {c} {s}")));
            }
        }
    }
    lines
}

/// `Open_vSwitch` `datapath_types` and `iface_types`, one line each.
pub fn show_types(sb: &Sandbox) -> Vec<String> {
    let r = &sb.rows("Open_vSwitch", &["datapath_types", "iface_types"])[0];
    ["datapath_types", "iface_types"]
        .iter()
        .map(|c| format!("Open_vSwitch . {c} {}", datum(&r[*c], Values::All)))
        .collect()
}

/// `ovs-vsctl show` output with every line's children (deeper-indented lines below it) sorted,
/// recursively: OVS prints ports in hash order.
pub fn sort_tree(lines: &[String]) -> Vec<String> {
    struct Node<'a>(&'a str, Vec<Node<'a>>);
    fn build<'a>(lines: &'a [String], i: &mut usize, indent: usize) -> Vec<Node<'a>> {
        let mut nodes = Vec::new();
        while *i < lines.len() {
            let l = lines[*i].as_str();
            let depth = l.len() - l.trim_start_matches(' ').len();
            if depth < indent {
                break;
            }
            *i += 1;
            let kids = build(lines, i, depth + 1);
            nodes.push(Node(l, kids));
        }
        nodes
    }
    fn flat(mut nodes: Vec<Node<'_>>, out: &mut Vec<String>) {
        nodes.sort_by(|a, b| a.0.cmp(b.0));
        for Node(head, kids) in nodes {
            out.push(head.to_owned());
            flat(kids, out);
        }
    }
    let mut out = Vec::new();
    flat(build(lines, &mut 0, 0), &mut out);
    out
}

/// `text` without what varies between runs: the scratch directory reads `$DIR`, any UUID
/// `<uuid>`, log lines lose their time and sequence number, and `ovs-vsctl`'s own warnings of a
/// slow machine (`timeval|WARN|`: long poll intervals) go, and a dummy device's own address
/// (`aa:55:aa:55:xx:xx`, numbered in the order the switch made its devices, which OVS counts
/// differently) reads `aa:55:aa:55:<n>`.
pub fn normalise(text: &str, dir: &Path) -> String {
    let text = text.replace(&dir.display().to_string(), "$DIR");
    let lines: Vec<String> = text
        .split('\n')
        .map(strip_log_prefix)
        .filter(|l| !l.starts_with("timeval|WARN|"))
        .map(str::to_owned)
        .collect();
    hide_dummy_macs(&hide_uuids(&lines.join("\n")))
}

/// Every `aa:55:aa:55:xx:xx` (lower-case hex) as `aa:55:aa:55:<n>`.
fn hide_dummy_macs(s: &str) -> String {
    const PREFIX: &str = "aa:55:aa:55:";
    let hex = |c: u8| c.is_ascii_digit() || (b'a'..=b'f').contains(&c);
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(n) = rest.find(PREFIX) {
        let tail = &rest.as_bytes()[n + PREFIX.len()..];
        let numbered = tail.len() >= 5
            && hex(tail[0])
            && hex(tail[1])
            && tail[2] == b':'
            && hex(tail[3])
            && hex(tail[4]);
        out.push_str(&rest[..n + PREFIX.len()]);
        rest = &rest[n + PREFIX.len()..];
        if numbered {
            out.push_str("<n>");
            rest = &rest[5..];
        }
    }
    out.push_str(rest);
    out
}

/// `2026-01-01T00:00:00Z|00002|vsctl|WARN|...` without the time and sequence number.
fn strip_log_prefix(line: &str) -> &str {
    let b = line.as_bytes();
    let stamp = b.len() > 21
        && b[..20].iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
        && b[20] == b'|';
    if !stamp {
        return line;
    }
    let rest = &line[21..];
    match rest.find('|') {
        Some(n) if n > 0 && rest[..n].bytes().all(|c| c.is_ascii_digit()) => &rest[n + 1..],
        _ => line,
    }
}

/// Every `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (lower-case hex) replaced by `<uuid>`.
fn hide_uuids(s: &str) -> String {
    const DASHES: [usize; 4] = [8, 13, 18, 23];
    let is_uuid = |w: &[u8]| {
        w.iter().enumerate().all(|(i, c)| {
            if DASHES.contains(&i) {
                *c == b'-'
            } else {
                c.is_ascii_digit() || (b'a'..=b'f').contains(c)
            }
        })
    };
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        if b.len() - i >= 36 && is_uuid(&b[i..i + 36]) {
            out.push_str("<uuid>");
            i += 36;
        } else {
            let c = s[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}
