//! Helpers of the tests that run `flowpath run` between network namespaces (`ports_netns.rs`,
//! `conntrack_netns.rs`): commands run in and out of namespaces, a test's namespaces and files
//! ([`Env`], removed on drop), veth pairs, and the switch ([`Switch`], killed on drop).
//!
//! Every name is made from the process id and a tag per test, and every interface lives in the
//! test's own namespaces, so a guard that deletes the namespaces removes everything, however the
//! test ends. A running switch busy-polls a core (its PMD thread): the tests that run one take
//! [`slot`] for their duration, one switch at a time per test binary.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::Reap;

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_flowpath")
}

/// One switch at a time (see the module docs). A test that failed while holding it does not
/// stop the others.
pub fn slot() -> MutexGuard<'static, ()> {
    static SLOT: Mutex<()> = Mutex::new(());
    SLOT.lock().unwrap_or_else(|e| e.into_inner())
}

// ---- processes -------------------------------------------------------------------------------

/// Whether `tool` is an executable file on `$PATH`.
pub fn in_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| {
            std::fs::metadata(d.join(tool))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Runs a command; its stdout, or what went wrong with its stderr.
pub fn run(args: &[&str]) -> Result<String, String> {
    let o = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{args:?}: {e}"))?;
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    if !o.status.success() {
        return Err(format!(
            "{args:?}: {}: {}{}",
            o.status,
            out,
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(out)
}

pub fn must(args: &[&str]) -> String {
    run(args).unwrap_or_else(|e| panic!("{e}"))
}

/// `args` run inside namespace `ns`.
pub fn in_ns<'a>(ns: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["ip", "netns", "exec", ns];
    v.extend_from_slice(args);
    v
}

/// Polls `f` every 20 ms until it holds or `limit` passes.
pub fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    loop {
        if f() {
            return true;
        }
        if t.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---- the test's namespaces -------------------------------------------------------------------

/// How one test binary names what its [`Env`]s make.
pub struct Names {
    /// Prefix of the namespaces: `PREFIX-TAG-SUFFIX`.
    pub netns: &'static str,
    /// Prefix of the directory (in the temporary directory): `PREFIX-TAG`.
    pub dir: &'static str,
    /// What root is needed for, in the SKIP line.
    pub root_for: &'static str,
    /// The longest interface name [`Env::ifname`] may make (15 bytes at most, less to leave
    /// room for a `.NN` VLAN suffix).
    pub ifname_max: usize,
}

/// The namespaces and files of one test, removed on drop.
pub struct Env {
    /// Process id and the test's short tag: part of every name.
    pub tag: String,
    pub dir: PathBuf,
    netns: Vec<String>,
    names: &'static Names,
}

impl Drop for Env {
    fn drop(&mut self) {
        for n in self.netns.iter().rev() {
            let _ = run(&["ip", "netns", "del", n]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Env {
    /// The environment of `test` (short tag `short`, two characters), or `None` after a SKIP
    /// line when this is not root, a tool is missing or namespaces do not work.
    pub fn new(test: &str, short: &str, tools: &[&str], names: &'static Names) -> Option<Env> {
        if !is_root() {
            eprintln!("SKIP {test}: needs root ({})", names.root_for);
            return None;
        }
        if let Some(t) = tools.iter().find(|t| !in_path(t)) {
            eprintln!("SKIP {test}: no '{t}' on PATH");
            return None;
        }
        let tag = format!("{}{short}", std::process::id());
        let dir = std::env::temp_dir().join(format!("{}-{tag}", names.dir));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let env = Env {
            tag,
            dir,
            netns: Vec::new(),
            names,
        };
        let probe = format!("{}-{}-probe", names.netns, env.tag);
        if run(&["ip", "netns", "add", &probe]).is_err() {
            eprintln!("SKIP {test}: 'ip netns add' does not work here");
            return None;
        }
        let _ = run(&["ip", "netns", "del", &probe]);
        Some(env)
    }

    /// A new namespace `PREFIX-TAG-SUFFIX`, loopback up, IPv6 off (no stray solicitations).
    pub fn netns(&mut self, suffix: &str) -> String {
        let n = format!("{}-{}-{suffix}", self.names.netns, self.tag);
        let _ = run(&["ip", "netns", "del", &n]);
        must(&["ip", "netns", "add", &n]);
        self.netns.push(n.clone());
        must(&["ip", "-n", &n, "link", "set", "lo", "up"]);
        must(&in_ns(
            &n,
            &[
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ],
        ));
        n
    }

    /// An interface name `SUFFIX` + tag, at most [`Names::ifname_max`] bytes.
    pub fn ifname(&self, suffix: &str) -> String {
        let n = format!("{suffix}{}", self.tag);
        assert!(
            n.len() <= self.names.ifname_max,
            "interface name {n} too long"
        );
        n
    }

    pub fn path(&self, f: &str) -> PathBuf {
        self.dir.join(f)
    }

    pub fn write(&self, f: &str, text: &str) -> PathBuf {
        let p = self.path(f);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// A file of `size` random bytes (incompressible, no repeating pattern).
    pub fn data_file(&self, f: &str, size: u64) -> PathBuf {
        let p = self.path(f);
        let mut r = File::open("/dev/urandom").unwrap().take(size);
        let n = std::io::copy(&mut r, &mut File::create(&p).unwrap()).unwrap();
        assert_eq!(n, size);
        p
    }
}

/// A veth pair `a` (in `ns_a`) / `b` (in `ns_b`), created in place, both up.
pub fn veth(a: &str, ns_a: &str, b: &str, ns_b: &str) {
    must(&[
        "ip", "link", "add", a, "netns", ns_a, "type", "veth", "peer", "name", b, "netns", ns_b,
    ]);
    must(&["ip", "-n", ns_a, "link", "set", a, "up"]);
    must(&["ip", "-n", ns_b, "link", "set", b, "up"]);
}

/// `ping -c COUNT` from `ns` to `dst`: every echo answered.
pub fn ping(ns: &str, dst: &str, count: u32) -> Result<(), String> {
    let c = count.to_string();
    let out = run(&in_ns(
        ns,
        &["ping", "-c", &c, "-i", "0.2", "-W", "2", "-q", dst],
    ))?;
    if out.contains(&format!(" {count} received")) {
        Ok(())
    } else {
        Err(format!("ping {dst} from {ns}: {out}"))
    }
}

/// A `ping` from `ns` to `dst` that must go unanswered (`count` echoes, 1 s for each answer),
/// started: [`check_no_ping`] checks it.
pub fn no_ping(ns: &str, dst: &str, count: u32) -> Reap {
    Reap(
        Command::new("ip")
            .args(["netns", "exec", ns, "ping", "-c", &count.to_string()])
            .args(["-i", "0.2", "-W", "1", "-q", dst])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// Waits for a ping of [`no_ping`] (`what`): none of its echoes may have been answered.
pub fn check_no_ping(mut c: Reap, what: &str) {
    let s = c.wait(Duration::from_secs(10)).unwrap();
    let mut out = String::new();
    let _ = c.0.stdout.as_mut().unwrap().read_to_string(&mut out);
    assert!(
        !s.success() && out.contains(" 0 received"),
        "{what} must not be answered: {out}"
    );
}

// ---- configuration ---------------------------------------------------------------------------

/// A configuration with bridge `br0`, its flows, and `ports`.
pub fn config(flows: &[impl AsRef<str>], ports: &[String]) -> String {
    let f: Vec<String> = flows
        .iter()
        .map(|f| format!("\"{}\"", f.as_ref()))
        .collect();
    format!(
        "[[bridge]]\nname = \"br0\"\nflows = [{}]\n{}",
        f.join(", "),
        ports.concat()
    )
}

// ---- the switch --------------------------------------------------------------------------------

/// A `flowpath run` child, killed on drop.
pub struct Switch {
    child: Option<Child>,
    config: PathBuf,
    rundir: PathBuf,
    dir: PathBuf,
    runs: usize,
}

impl Drop for Switch {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Switch {
    /// Starts `flowpath run` on `config` and waits for its control socket.
    pub fn start(env: &Env, config: &Path) -> Switch {
        let mut s = Switch {
            child: None,
            config: config.to_owned(),
            rundir: env.path("run"),
            dir: env.dir.clone(),
            runs: 0,
        };
        s.spawn();
        s.wait_ready();
        s
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join(format!("flowpath.{}.log", self.runs))
    }

    /// Starts the process (a new run, with a log of its own); does not wait.
    pub fn spawn(&mut self) {
        assert!(self.child.is_none(), "already running");
        self.runs += 1;
        let log = File::create(self.log_path()).unwrap();
        self.child = Some(
            Command::new(bin())
                .arg("run")
                .arg("--config")
                .arg(&self.config)
                .arg("--rundir")
                .arg(&self.rundir)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap(),
        );
    }

    /// The current run's output.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Waits for the control socket; panics with the log when the switch exits first.
    pub fn wait_ready(&mut self) {
        let sock = self.rundir.join("flowpath.ctl");
        let t = Instant::now();
        while !sock.exists() {
            if let Some(s) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                panic!("flowpath exited ({s}) before its socket:\n{}", self.log());
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "no control socket after 20 s:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// `flowpath ctl COMMAND...`: the reply, or the error.
    pub fn ctl(&self, args: &[&str]) -> Result<String, String> {
        let mut v = vec![bin(), "ctl", "--rundir", self.rundir.to_str().unwrap()];
        v.extend_from_slice(args);
        run(&v)
    }

    pub fn ctl_ok(&self, args: &[&str]) -> String {
        self.ctl(args)
            .unwrap_or_else(|e| panic!("{e}\nflowpath log:\n{}", self.log()))
    }

    /// `flowpath ofctl COMMAND...`.
    pub fn ofctl(&self, args: &[&str]) -> String {
        let mut v = vec![bin(), "ofctl", "--rundir", self.rundir.to_str().unwrap()];
        v.extend_from_slice(args);
        run(&v).unwrap_or_else(|e| panic!("{e}\nflowpath log:\n{}", self.log()))
    }

    /// Whether the switch has control command `cmd` (`list-commands`).
    pub fn has_command(&self, cmd: &str) -> bool {
        self.ctl_ok(&["list-commands"])
            .lines()
            .any(|l| l.split_whitespace().next() == Some(cmd))
    }

    /// Stops the switch with `ctl exit`; it must exit cleanly, without a panic, and remove its
    /// control socket.
    pub fn stop(&mut self) {
        self.ctl_ok(&["exit"]);
        let mut c = Reap(self.child.take().expect("not running"));
        let s = c
            .wait(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("flowpath did not exit: {e}\n{}", self.log()));
        let log = self.log();
        assert!(s.success(), "flowpath exited with {s}:\n{log}");
        assert!(!log.contains("panicked"), "{log}");
        assert!(
            !self.rundir.join("flowpath.ctl").exists(),
            "the control socket is removed on exit"
        );
    }
}

/// Whether files `a` and `b` have the same bytes; what differs when not.
pub fn same_bytes(a: &Path, b: &Path) -> Result<(), String> {
    let (la, lb) = (
        std::fs::metadata(a).map_err(|e| e.to_string())?.len(),
        std::fs::metadata(b).map_err(|e| e.to_string())?.len(),
    );
    if la != lb {
        return Err(format!("sent {la} bytes, received {lb}"));
    }
    let (mut fa, mut fb) = (File::open(a).unwrap(), File::open(b).unwrap());
    let (mut ba, mut bb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    let mut at = 0u64;
    while at < la {
        let n = (la - at).min(ba.len() as u64) as usize;
        fa.read_exact(&mut ba[..n]).map_err(|e| e.to_string())?;
        fb.read_exact(&mut bb[..n]).map_err(|e| e.to_string())?;
        // Slices compare with memcmp, fast in a debug build too; the offset only on a mismatch.
        if ba[..n] != bb[..n] {
            let i = (0..n).find(|&i| ba[i] != bb[i]).unwrap_or(0);
            return Err(format!("first difference at byte {}", at + i as u64));
        }
        at += n as u64;
    }
    Ok(())
}

/// Sends file `src` over TCP (`nc`) from namespace `from` to `to_ip:port` in namespace `to`,
/// and checks that the receiver got the same bytes. The time the transfer took.
pub fn tcp_transfer(
    env: &Env,
    src: &Path,
    from: &str,
    to: &str,
    to_ip: &str,
    port: u16,
) -> Result<Duration, String> {
    let dst = env.path(&format!("received-{port}"));
    let p = port.to_string();
    let mut server = Reap(
        Command::new("ip")
            .args(["netns", "exec", to, "nc", "-l", to_ip, &p])
            .stdin(Stdio::null())
            .stdout(File::create(&dst).unwrap())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let listening = wait_until(Duration::from_secs(5), || {
        run(&in_ns(to, &["ss", "-Hltn", &format!("sport = :{port}")])).is_ok_and(|o| {
            // ss writes an IPv6 address in brackets.
            o.contains(&format!("{to_ip}:{port}")) || o.contains(&format!("[{to_ip}]:{port}"))
        })
    });
    if !listening {
        return Err(format!("nc -l {to_ip} {port} in {to}: not listening"));
    }
    let t = Instant::now();
    let mut client = Reap(
        Command::new("ip")
            .args(["netns", "exec", from, "nc", "-N", "-w", "10", to_ip, &p])
            .stdin(File::open(src).unwrap())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let cs = client.wait(Duration::from_secs(90))?;
    let ss = server.wait(Duration::from_secs(15))?;
    let took = t.elapsed();
    if !cs.success() || !ss.success() {
        return Err(format!(
            "nc client {cs} ({}), server {ss} ({})",
            client.stderr().trim(),
            server.stderr().trim()
        ));
    }
    let r = same_bytes(src, &dst);
    let _ = std::fs::remove_file(&dst);
    r.map(|_| took)
}
