//! Comparing what stock `ovs-ofctl` prints against flowpath with what it printed against
//! `ovs-vswitchd` 3.1: recordings in sections (`== COMMAND` and the output lines), and the
//! normalization that removes what varies between runs; and reading OpenFlow messages off a
//! socket, with hex for the bytes, and an OpenFlow 1.3 client of a bridge's socket.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

/// The sections of a recording: (command, output lines); `#` lines are comments.
pub fn sections(recording: &str) -> Vec<(String, Vec<String>)> {
    let mut v: Vec<(String, Vec<String>)> = Vec::new();
    for l in recording.lines().filter(|l| !l.starts_with('#')) {
        match l.strip_prefix("== ") {
            Some(cmd) => v.push((cmd.to_owned(), Vec::new())),
            None => v.last_mut().expect("a section first").1.push(l.to_owned()),
        }
    }
    v
}

/// `line` without what varies between runs: transaction ids, durations, ages, Ethernet
/// addresses, the datapath id, socket paths, continuations' bridge ids and the time of
/// `ovs-ofctl`'s own log lines (`2026-11-30T11:00:35Z|00001|ofp_match|WARN|...`).
pub fn normalize(line: &str) -> String {
    let line = match line.split_once('|') {
        Some((time, rest)) if time.len() == 20 && time.ends_with('Z') && time.contains('T') => {
            format!("TIME|{rest}")
        }
        _ => line.to_owned(),
    };
    let mut out = Vec::new();
    for w in line.split(' ') {
        let w = if let Some(i) = w.find("xid=0x") {
            format!(
                "{}xid=X{}",
                &w[..i],
                if w.ends_with("):") { "):" } else { ")" }
            )
        } else if w.starts_with("duration=") {
            "duration=X,".to_owned()
        } else if let Some(i) = w.find(",duration=") {
            // Group statistics: `group_id=1,duration=0.540s,ref_count=0,...`.
            let rest = &w[i + 10..];
            let end = rest.find(',').unwrap_or(rest.len());
            format!("{},duration=X{}", &w[..i], &rest[end..])
        } else if w.starts_with("duration:") {
            "duration:X".to_owned()
        } else if w.starts_with("idle_age=") || w.starts_with("hard_age=") {
            continue;
        } else if w.starts_with("addr:") {
            "addr:X".to_owned()
        } else if w.starts_with("continuation.bridge=") {
            // A continuation's bridge id: random in each run of a switch.
            "continuation.bridge=X".to_owned()
        } else if w.starts_with("dpid:") {
            "dpid:X".to_owned()
        } else if w.starts_with("unix:") {
            // The switch's socket, in a run directory of its own (`talking to unix:...`).
            "unix:X".to_owned()
        } else {
            w.to_owned()
        };
        out.push(w);
    }
    out.join(" ")
}

/// Whether `ovs-ofctl` can be run.
pub fn ovs_ofctl_missing() -> bool {
    Command::new("ovs-ofctl").arg("--version").output().is_err()
}

/// `ovs-ofctl ARGS` (`cmd` split at white space) with `OVS_RUNDIR` at `rundir`.
pub fn ofctl(rundir: &Path, cmd: &str) -> Output {
    Command::new("ovs-ofctl")
        .args(cmd.split_whitespace())
        .env("OVS_RUNDIR", rundir)
        .output()
        .unwrap()
}

/// Standard output then standard error, as lines.
pub fn text(o: &Output) -> Vec<String> {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
    .lines()
    .map(str::to_owned)
    .collect()
}

/// A difference report for `cmd` when `want` (OVS's lines) and `got` (flowpath's) differ
/// once normalized; a flow dump in the classifier's order (no `--sort`/`--rsort`) is compared
/// as a set after its first line.
pub fn compare(cmd: &str, want: &[String], got: &[String]) -> Option<String> {
    let mut want: Vec<String> = want.iter().map(|l| normalize(l)).collect();
    let mut got: Vec<String> = got.iter().map(|l| normalize(l)).collect();
    if cmd.contains("dump-flows") && !cmd.contains("sort") {
        for v in [&mut want, &mut got] {
            if v.len() > 1 {
                v[1..].sort();
            }
        }
    }
    // A flow monitor's update message lists the flows one change touched (a delete of many)
    // in OVS's classifier order: each message's updates are compared as a set.
    if cmd.starts_with("background") {
        for v in [&mut want, &mut got] {
            sort_runs(v, |l| l.starts_with(" event="));
        }
    }
    // Connections are listed in hash order by OVS: only the set is compared.
    if cmd.contains("dump-conntrack") {
        want.sort();
        got.sort();
    }
    (want != got).then(|| {
        format!(
            "== {cmd}\n-- OVS:\n{}\n-- flowpath:\n{}",
            want.join("\n"),
            got.join("\n")
        )
    })
}

/// Sorts each run of consecutive lines of `v` that `member` takes.
fn sort_runs(v: &mut [String], member: impl Fn(&str) -> bool) {
    let mut i = 0;
    while i < v.len() {
        let n = v[i..].iter().take_while(|l| member(l)).count();
        v[i..i + n].sort();
        i += n.max(1);
    }
}

/// The bytes of hex text `s` (an even number of hex digits).
pub fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// `b` as lower-case hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The next OpenFlow message on `s`, header included.
pub fn read_msg(s: &mut impl Read) -> std::io::Result<Vec<u8>> {
    let mut m = vec![0; 8];
    s.read_exact(&mut m)?;
    let len = usize::from(u16::from_be_bytes([m[2], m[3]]));
    m.resize(len.max(8), 0);
    s.read_exact(&mut m[8..])?;
    Ok(m)
}

/// An OpenFlow 1.3 connection to `mgmt` (a bridge's `.mgmt` socket), past its hellos.
pub fn client(mgmt: &Path) -> UnixStream {
    client_of(mgmt, 4, Duration::from_secs(5))
}

/// A connection to `mgmt` of OpenFlow wire version `version` alone (4 is 1.3, 5 is 1.4),
/// past its hellos, whose reads wait at most `timeout`.
pub fn client_of(mgmt: &Path, version: u8, timeout: Duration) -> UnixStream {
    let mut s = UnixStream::connect(mgmt).unwrap();
    s.set_read_timeout(Some(timeout)).unwrap();
    // OFPT_HELLO with a version bitmap element naming `version` only.
    let mut hello = vec![version, 0, 0, 16, 0, 0, 0, 0, 0, 1, 0, 8];
    hello.extend((1u32 << version).to_be_bytes());
    s.write_all(&hello).unwrap();
    let reply = read_msg(&mut s).unwrap();
    assert_eq!(reply[1], 0, "{}", hex(&reply));
    s
}

/// What the switch answers to `request` before the barrier sent after it (hex, echoes
/// aside).
pub fn exchange(s: &mut UnixStream, request: &[u8]) -> Vec<String> {
    s.write_all(request).unwrap();
    s.write_all(&unhex("0414000800007777")).unwrap();
    let mut v = Vec::new();
    loop {
        let m = read_msg(s).unwrap();
        if m[4..8] == [0, 0, 0x77, 0x77] {
            return v;
        }
        if m[1] != 2 && m[1] != 3 {
            v.push(hex(&m));
        }
    }
}

/// The OpenFlow 1.3 port status messages among `msgs` (hex), as (reason, port number), both
/// in hex.
pub fn port_statuses(msgs: &[String]) -> Vec<(String, String)> {
    msgs.iter()
        .filter(|m| &m[2..4] == "0c")
        .map(|m| (m[16..18].to_owned(), m[32..40].to_owned()))
        .collect()
}
