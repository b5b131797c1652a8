//! Driving DPDK's `dpdk-testpmd` as a vhost-user front-end (`net_virtio_user`, no hugepages,
//! no PCI) from a test: interactive mode on a pipe, one command at a time, each waited for
//! until the next prompt.
#![allow(dead_code)] // Each test binary uses part of it.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// testpmd is installed; a scratch directory for sockets. One test of a binary at a time
/// holds one: each testpmd keeps a core busy.
pub struct Testpmd {
    tag: String,
    dir: PathBuf,
    _one_at_a_time: MutexGuard<'static, ()>,
}

static ONE: Mutex<()> = Mutex::new(());

impl Testpmd {
    /// `None`, with a SKIP line, when `dpdk-testpmd` is missing.
    pub fn available(test: &str) -> Option<Testpmd> {
        let ok = Command::new("dpdk-testpmd")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !ok {
            eprintln!("SKIP {test}: dpdk-testpmd is not installed (Debian package dpdk-dev)");
            return None;
        }
        let guard = ONE.lock().unwrap_or_else(|e| e.into_inner());
        let tag = format!("fp{}{test}", std::process::id());
        let dir = std::env::temp_dir().join(&tag);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Some(Testpmd {
            tag,
            dir,
            _one_at_a_time: guard,
        })
    }

    pub fn dir(&self) -> PathBuf {
        self.dir.clone()
    }

    /// DPDK's EAL arguments for a testpmd of this test: two cores, no hugepages, no shared
    /// configuration, no PCI, and this helper's file prefix (whose runtime directory the drop
    /// removes).
    pub fn eal_args(&self) -> Vec<String> {
        let mut a: Vec<String> = [
            "-l",
            "0,1",
            "--no-huge",
            "--no-shconf",
            "-m",
            "512",
            "--no-pci",
        ]
        .map(String::from)
        .into();
        a.push(format!("--file-prefix={}", self.tag));
        a
    }

    /// testpmd with one `net_virtio_user0` port of devargs `devargs` (`path=...[,server=1]`),
    /// starting: [`Running::cmd`] waits for its prompt.
    pub fn spawn(&self, devargs: &str) -> Running {
        self.spawn_n(devargs, 1)
    }

    /// The same with `queues` queue pairs (and as many forwarding queues).
    pub fn spawn_n(&self, devargs: &str, queues: usize) -> Running {
        self.spawn_with(devargs, queues, &[])
    }

    /// [`Testpmd::spawn`] forwarding in `mode` (`txonly`, `rxonly`, `macswap`...) from the
    /// start (`--auto-start`): a `server=1` testpmd starts as soon as a back-end connects.
    pub fn spawn_fwd(&self, devargs: &str, mode: &str) -> Running {
        let fwd = format!("--forward-mode={mode}");
        self.spawn_with(devargs, 1, &[&fwd, "--auto-start"])
    }

    /// [`Testpmd::spawn_n`] with more testpmd arguments (after `--`).
    pub fn spawn_with(&self, devargs: &str, queues: usize, extra: &[&str]) -> Running {
        // Unbuffered: command output must be there when the next prompt is.
        let mut cmd = without_sigpipe("stdbuf");
        cmd.args(["-o0", "-e0", "dpdk-testpmd"])
            .args(self.eal_args())
            .args([
                "--vdev",
                &format!("net_virtio_user0,{devargs},queues={queues}"),
                "--",
                "-i",
                &format!("--rxq={queues}"),
                &format!("--txq={queues}"),
                "--total-num-mbufs=16384",
                // Starting to forward must not drain what the switch already put in the
                // rings: that drain is not in the port's counters, and counts must match.
                "--no-flush-rx",
            ])
            .args(extra);
        Running::start(cmd)
    }
}

/// Held by every test that starts a process or counts this process's descriptors: the
/// reconnect tests compare the descriptors after their first and last cycles, and a pipe to
/// another test's child open at one snapshot and not the other looked like a leak (or its
/// reverse).
pub static SERIAL: Mutex<()> = Mutex::new(());

/// [`SERIAL`], whatever a test that panicked holding it left.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A command for `program` that runs with SIGPIPE ignored, as QEMU runs: testpmd, as the
/// vhost-user server, writes its next request into a connection the switch has just closed
/// (the reconnect tests close it on purpose), and with SIGPIPE at its default (which Rust's
/// `Command` restores in a child) it dies of that write instead of seeing EPIPE and waiting for
/// the next connection. An ignored signal stays ignored across `exec`.
fn without_sigpipe(program: &str) -> Command {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "trap '' PIPE; exec \"$0\" \"$@\"", program]);
    cmd
}

/// `out` without testpmd's asynchronous event lines ("Port 0: link state change event"), each
/// taken out with the line breaks around it: its interrupt thread prints them whenever the
/// event comes, in the middle of a prompt too ("t", the line, "estpmd> ").
fn without_events(out: &str) -> String {
    let mut s = String::with_capacity(out.len());
    let mut rest = out;
    while let Some(i) = rest.find("\nPort ") {
        let line = &rest[i + 1..];
        let end = line.find('\n');
        let text = end.map_or(line, |e| &line[..e]);
        let is_event = text
            .strip_prefix("Port ")
            .and_then(|t| t.split_once(": "))
            .is_some_and(|(port, what)| {
                !port.is_empty()
                    && port.bytes().all(|b| b.is_ascii_digit())
                    && what.ends_with(" event")
            });
        match (is_event, end) {
            (true, Some(e)) => {
                s.push_str(&rest[..i]);
                rest = &line[e + 1..];
            }
            _ => {
                s.push_str(&rest[..i + 1]);
                rest = line;
            }
        }
    }
    s.push_str(rest);
    s
}

impl Running {
    /// Starts `cmd` with its standard streams piped. Its standard output and error are kept
    /// apart: written at once, a line on standard error could cut a prompt on standard output
    /// in two in a shared copy (`t` + `Error during enabling promiscuous mode...` +
    /// `estpmd> `), and the prompt was never seen.
    fn start(mut cmd: Command) -> Running {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("dpdk-testpmd");
        let (out, err): (Arc<Mutex<String>>, Arc<Mutex<String>>) = Default::default();
        let mut readers = Vec::new();
        for (mut pipe, out) in [
            (
                Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
                Arc::clone(&out),
            ),
            (Box::new(child.stderr.take().unwrap()), Arc::clone(&err)),
        ] {
            readers.push(thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = pipe.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    out.lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }));
        }
        let stdin = child.stdin.take().unwrap();
        Running {
            child,
            stdin,
            out,
            err,
            readers,
        }
    }
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        // DPDK's runtime directory of the processes run with this file prefix.
        let run = match std::env::var_os("XDG_RUNTIME_DIR") {
            Some(d) if !is_root() => PathBuf::from(d),
            _ => PathBuf::from("/var/run"),
        };
        let _ = std::fs::remove_dir_all(run.join("dpdk").join(&self.tag));
    }
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// A running testpmd.
pub struct Running {
    child: Child,
    stdin: ChildStdin,
    /// What it wrote on its standard output (prompts, command output) and error.
    out: Arc<Mutex<String>>,
    err: Arc<Mutex<String>>,
    /// The threads copying its stdout and stderr into `out` and `err`, joined once it has
    /// exited (so that a test counting its own threads, descriptors or mappings sees them
    /// gone).
    readers: Vec<thread::JoinHandle<()>>,
}

/// testpmd's counters of port 0.
#[derive(Debug, Default)]
pub struct Stats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
}

impl Running {
    fn prompts(&self) -> usize {
        without_events(&self.out.lock().unwrap())
            .matches("testpmd> ")
            .count()
    }

    fn wait_prompts(&mut self, n: usize) {
        let end = Instant::now() + Duration::from_secs(30);
        while self.prompts() < n {
            if let Ok(Some(st)) = self.child.try_wait() {
                thread::sleep(Duration::from_millis(100));
                panic!("testpmd exited ({st}):\n{}", self.output());
            }
            assert!(
                Instant::now() < end,
                "testpmd did not come to its prompt:\n{}",
                self.output()
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits for the first prompt (a `server=1` testpmd shows it once a back-end connected).
    pub fn ready(&mut self) {
        self.wait_prompts(1);
    }

    /// Runs one command and waits for the next prompt.
    pub fn cmd(&mut self, c: &str) {
        self.ready();
        let n = self.prompts();
        writeln!(self.stdin, "{c}").unwrap();
        self.stdin.flush().unwrap();
        self.wait_prompts(n + 1);
    }

    /// Everything testpmd printed so far: its standard output, then its standard error.
    pub fn output(&self) -> String {
        let (out, err) = (self.out.lock().unwrap(), self.err.lock().unwrap());
        format!("{out}{err}")
    }

    /// `show port stats 0`.
    pub fn port_stats(&mut self) -> Stats {
        let from = self.out.lock().unwrap().len();
        self.cmd("show port stats 0");
        let text = self.out.lock().unwrap()[from..].to_owned();
        let num = |key: &str| -> u64 {
            let i = text
                .find(key)
                .unwrap_or_else(|| panic!("no {key} in {text}"));
            text[i + key.len()..]
                .split_whitespace()
                .next()
                .and_then(|s| s.parse().ok())
                .unwrap()
        };
        Stats {
            rx_packets: num("RX-packets:"),
            rx_bytes: num("RX-bytes:"),
            tx_packets: num("TX-packets:"),
            tx_bytes: num("TX-bytes:"),
        }
    }

    /// Kills it at once (SIGKILL: a crashed VM) and waits for it to be gone.
    pub fn kill(self) {
        drop(self);
    }

    /// `quit`, and waits for it to exit.
    pub fn quit(mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        let end = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            if Instant::now() > end {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Its pipes are closed now: the readers see the end of them.
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
    }
}

/// What [`without_sigpipe`] starts has SIGPIPE ignored (bit 13, `1 << 12`, of `SigIgn` in its
/// `/proc/self/status`), what `Command` starts has not.
#[test]
fn testpmd_runs_with_sigpipe_ignored() {
    let _serial = serial();
    let ignored = |mut cmd: Command| {
        let out = cmd.arg("/proc/self/status").output().expect("cat");
        let status = String::from_utf8_lossy(&out.stdout).into_owned();
        let mask = status
            .lines()
            .find_map(|l| l.strip_prefix("SigIgn:"))
            .map(|m| u64::from_str_radix(m.trim(), 16).expect("hex"))
            .expect("SigIgn");
        mask & 1 << 12 != 0
    };
    assert!(ignored(without_sigpipe("cat")));
    assert!(!ignored(Command::new("cat")));
}

/// A shell playing testpmd: it prints the first letter of its prompt, runs `between` (after
/// 0.2 s), then the rest of the prompt (after 0.2 s more), and reads its input away. Returns it
/// once its prompt was seen.
fn prompt_cut_by(between: &str) -> Running {
    let mut cmd = Command::new("sh");
    let script = format!(
        "printf t; sleep 0.2; {between}; sleep 0.2; printf 'estpmd> '; exec cat >/dev/null"
    );
    cmd.args(["-c", &script]);
    let mut r = Running::start(cmd);
    r.ready();
    r
}

/// A prompt cut in two by a line on standard error is still a prompt.
#[test]
fn a_prompt_is_seen_whatever_standard_error_writes_meanwhile() {
    let _serial = serial();
    let r = prompt_cut_by("echo 'Error during enabling promiscuous mode' >&2");
    assert!(
        r.output()
            .contains("Error during enabling promiscuous mode")
    );
    r.kill();
}

/// A prompt cut in two on standard output by one of testpmd's asynchronous event lines (its
/// interrupt thread prints "Port 0: link state change event" whenever the link changes, as
/// every vhost-user reconnection does) is still a prompt: CI saw "t", the event, "estpmd> ".
#[test]
fn a_prompt_is_seen_whatever_an_event_line_cuts_it_with() {
    let _serial = serial();
    prompt_cut_by("printf '\\nPort 0: link state change event\\n'").kill();
}
