//! Helpers shared by the `flowpath` binary's integration tests.
#![allow(dead_code)] // Each test binary uses part of it.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub mod netns;
pub mod ofctl;
pub mod ovsdb;

/// A configuration of bridge br0 with one port `port` of `kind` and `options` (a TOML inline
/// table's body).
pub fn one_port(port: &str, kind: &str, options: &str) -> String {
    format!(
        "[[bridge]]\nname = \"br0\"\n\n[[bridge.port]]\nname = \"{port}\"\n\
         type = \"{kind}\"\noptions = {{ {options} }}\n"
    )
}

/// `flowpath check-config FILE` on a configuration with one port `port` of `kind` and
/// `options` (a TOML inline table's body): exit code and stderr.
pub fn check_config(dir: &Path, port: &str, kind: &str, options: &str) -> (Option<i32>, String) {
    let f = dir.join("check.toml");
    std::fs::write(&f, one_port(port, kind, options)).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_flowpath"))
        .arg("check-config")
        .arg(&f)
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A scratch directory, emptied now and removed when the guard goes.
pub fn scratch_dir(name: &str) -> (PathBuf, RmDir) {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    (dir.clone(), RmDir(dir))
}

/// Removes its directory on drop.
pub struct RmDir(PathBuf);

impl Drop for RmDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A child process killed (and reaped) when dropped.
pub struct Reap(pub Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Reap {
    /// Waits up to `limit` for the process to end.
    pub fn wait(&mut self, limit: Duration) -> Result<ExitStatus, String> {
        let t = Instant::now();
        loop {
            match self.0.try_wait() {
                Ok(Some(s)) => return Ok(s),
                Ok(None) if t.elapsed() > limit => {
                    let _ = self.0.kill();
                    return Err(format!("still running after {limit:?}: killed"));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    pub fn stderr(&mut self) -> String {
        let mut s = String::new();
        if let Some(e) = self.0.stderr.as_mut() {
            let _ = e.read_to_string(&mut s);
        }
        s
    }
}

/// A switch's configuration in `dir` that forwards until stopped: replay port p0 replays
/// the 8-packet capture (copied to `dir/in.pcap`) through one datapath flow to sink port p1.
/// The path of the file written, `dir/sw.toml`.
pub fn replay_to_sink(dir: &Path) -> PathBuf {
    let pcap = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pcap/plain_8.pcap");
    std::fs::copy(pcap, dir.join("in.pcap")).unwrap();
    let cfg = dir.join("sw.toml");
    std::fs::write(
        &cfg,
        r#"
[datapath]
dp-flows = ["in_port(p0),eth_type(0x0800),ipv4(frag=no), actions:p1"]

[[bridge]]
name = "br0"

[[bridge.port]]
name = "p0"
type = "replay"
options = { pcap = "in.pcap" }

[[bridge.port]]
name = "p1"
type = "sink"
"#,
    )
    .unwrap();
    cfg
}

/// `flowpath run` on `config` with its run directory `rundir`, output discarded, once its
/// control socket is there (20 s at most): the process, killed when the guard goes.
pub fn start_switch(config: &Path, rundir: &Path) -> Reap {
    let child = Reap(
        Command::new(env!("CARGO_BIN_EXE_flowpath"))
            .args(["run", "--config"])
            .arg(config)
            .arg("--rundir")
            .arg(rundir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let t = Instant::now();
    while !rundir.join("flowpath.ctl").exists() {
        assert!(t.elapsed() < Duration::from_secs(20), "no control socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// `flowpath run` on `config`, which must fail at once: exit code and stderr.
pub fn run_fails(dir: &Path, config: &str) -> (Option<i32>, String) {
    let f = dir.join("run.toml");
    std::fs::write(&f, config).unwrap();
    let mut c = Reap(
        Command::new(env!("CARGO_BIN_EXE_flowpath"))
            .arg("run")
            .arg("--config")
            .arg(&f)
            .arg("--rundir")
            .arg(dir.join("run"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let s = c
        .wait(Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("{config}: {e}"));
    let err = c.stderr();
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        !dir.join("run/flowpath.ctl").exists(),
        "no control socket left behind"
    );
    (s.code(), err)
}

/// `flowpath ctl --rundir RUNDIR ARGS...`: a command to a running switch.
pub fn ctl(rundir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_flowpath"))
        .arg("ctl")
        .arg("--rundir")
        .arg(rundir)
        .args(args)
        .output()
        .unwrap()
}

/// The standard output of a command that must succeed.
pub fn ok(o: std::process::Output) -> String {
    assert!(o.status.success(), "{o:?}");
    String::from_utf8(o.stdout).unwrap()
}

/// The dump's flows without statistics, sorted (OVS's tests' `strip_used | sort`).
pub fn dp_flows(rundir: &Path) -> Vec<String> {
    let dump = ok(ctl(rundir, &["dpif/dump-flows", "br0"]));
    let mut v: Vec<String> = dump
        .lines()
        .filter(|l| l.contains(", actions:") && !l.starts_with("flow-dump"))
        .map(|l| {
            let (key, rest) = l.split_once(", packets:").unwrap();
            let actions = rest.split_once("actions:").unwrap().1;
            format!("{key}, actions:{actions}")
        })
        .collect();
    v.sort();
    v
}

/// A TCP port on 127.0.0.1 free a moment ago, for a server under test to listen on.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET http://ADDR/PATH` with `headers` (`Name: value\r\n` lines): the status code and the
/// body, or `None` when nothing answers.
pub fn http_get(addr: &str, path: &str, headers: &str) -> Option<(u16, String)> {
    use std::io::Write;
    let mut c = std::net::TcpStream::connect(addr).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Connection: close\r\n\r\n"
    )
    .ok()?;
    let mut resp = String::new();
    c.read_to_string(&mut resp).ok()?;
    let (head, body) = resp.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}

/// A `flowpath gen` stream of 100 UDP flows (64-byte frames) from port `tx` to `rx` at `rate`,
/// `extra` lines added to the stream.
pub fn udp_stream(name: &str, tx: &str, rx: &str, rate: &str, extra: &str) -> String {
    format!(
        r#"
[[stream]]
name = "{name}"
tx = "{tx}"
rx = "{rx}"
flows = 100
frame_size = 64
rate = "{rate}"
layers = [
  {{ type = "eth", src = "02:00:00:00:00:01", dst = "02:00:00:00:00:02" }},
  {{ type = "ipv4", src = "10.0.0.1", dst = "10.0.0.2" }},
  {{ type = "udp", sport = 1024, dport = 2000 }},
]
vary = [ {{ field = "udp.sport", op = "inc", from = 1024, to = 1123 }} ]
{extra}
"#
    )
}

/// The ones' complement sum of `data` from `init`, folded and inverted: a header's or
/// segment's checksum field, or 0 when the checksum in it is right. The tests' own, so that
/// the switch's checksums are not checked with its own code.
pub fn csum(data: &[u8], init: u32) -> u16 {
    let mut s = init;
    for c in data.chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// `f` of every one of `items`, on `workers` threads at once (each taking the next item not
/// yet taken): the results in the order of `items`. For independent checks that spend their
/// time waiting (a switch's timers, its start), whose waits then overlap. A panic in `f`
/// fails the caller.
pub fn each_at_once<I: Sync, T: Send>(
    items: &[I],
    workers: usize,
    f: impl Fn(&I) -> T + Sync,
) -> Vec<T> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done: std::sync::Mutex<Vec<Option<T>>> =
        std::sync::Mutex::new(items.iter().map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..workers.clamp(1, items.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let out = f(item);
                    done.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(out);
                }
            });
        }
    });
    let done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.into_iter()
        .map(|o| o.expect("every item done"))
        .collect()
}

/// Whether process `pid` runs. One that exited and waits for its reaper (a zombie) does not:
/// a detached daemon's reaper is init, which may reap only every few seconds.
pub fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with(['Z', 'X']))
    })
}
