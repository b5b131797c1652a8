//! A private `ovsdb-server` with the Open_vSwitch schema (the copy in `testdata/ovsdb/`), in a
//! temporary directory of its own, for the tests that talk to the real server. Tests skip (with
//! a printed reason) when Debian's `ovsdb-server`, `ovsdb-tool` or `ovs-vsctl` is not installed.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub fn schema_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/ovsdb/vswitch.ovsschema")
}

pub fn schema() -> ovsdb::Schema {
    let text = std::fs::read_to_string(schema_path()).expect("testdata/ovsdb/vswitch.ovsschema");
    ovsdb::Schema::from_json(&serde_json::from_str(&text).unwrap()).unwrap()
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

pub struct Sandbox {
    pub dir: PathBuf,
    /// `unix:DIR/db.sock`
    pub target: String,
    /// `ptcp:` port, when asked for.
    pub tcp_port: Option<u16>,
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

impl Sandbox {
    /// A fresh database (`ovs-vsctl init` done) served on a unix socket, and on tcp too when
    /// `tcp` is set. `None` when the tools are missing.
    pub fn start(name: &str, tcp: bool) -> Option<Sandbox> {
        for tool in ["ovsdb-server", "ovsdb-tool", "ovs-vsctl", "ovs-appctl"] {
            if !have(tool) {
                eprintln!("skipped: {tool} is not installed");
                return None;
            }
        }
        let dir = std::env::temp_dir().join(format!("ovsdb-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sb = Sandbox {
            target: format!("unix:{}", dir.join("db.sock").display()),
            tcp_port: tcp.then(free_port),
            dir,
        };
        run(Command::new("ovsdb-tool")
            .arg("create")
            .arg(sb.dir.join("conf.db"))
            .arg(schema_path()));
        sb.start_server();
        sb.vsctl(&["init"]);
        Some(sb)
    }

    pub fn start_server(&self) {
        let d = &self.dir;
        let mut cmd = Command::new("ovsdb-server");
        cmd.arg(d.join("conf.db"))
            .arg(format!("--remote=punix:{}", d.join("db.sock").display()))
            .arg(format!(
                "--unixctl={}",
                d.join("ovsdb-server.ctl").display()
            ))
            .arg(format!(
                "--pidfile={}",
                d.join("ovsdb-server.pid").display()
            ))
            .arg(format!(
                "--log-file={}",
                d.join("ovsdb-server.log").display()
            ))
            .args(["--detach", "--no-chdir", "-vjsonrpc:file:dbg"]);
        if let Some(port) = self.tcp_port {
            cmd.arg(format!("--remote=ptcp:{port}:127.0.0.1"));
        }
        run(&mut cmd);
    }

    /// Kills the server as a crash would (SIGKILL), leaving its database file.
    pub fn kill_server(&self) {
        let pid = std::fs::read_to_string(self.dir.join("ovsdb-server.pid")).unwrap();
        run(Command::new("kill").arg("-9").arg(pid.trim()));
        let _ = std::fs::remove_file(self.dir.join("db.sock"));
        let _ = std::fs::remove_file(self.dir.join("ovsdb-server.pid"));
    }

    pub fn tcp_target(&self) -> String {
        format!("tcp:127.0.0.1:{}", self.tcp_port.expect("started with tcp"))
    }

    /// `ovs-vsctl --no-wait ARGS` on this database.
    pub fn vsctl(&self, args: &[&str]) -> String {
        run(Command::new("ovs-vsctl")
            .arg(format!("--db={}", self.target))
            .args(["--no-wait", "--timeout=10"])
            .args(args))
    }

    /// `ovsdb-client ARGS` with this database's socket appended after the first argument.
    pub fn ovsdb_client(&self, cmd: &str, rest: &[&str]) -> String {
        run(Command::new("ovsdb-client")
            .args(["-f", "json", cmd, &self.target])
            .args(rest))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("ovsdb-server.log")).unwrap_or_default()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = Command::new("ovs-appctl")
            .arg("-t")
            .arg(self.dir.join("ovsdb-server.ctl"))
            .arg("exit")
            .output();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Polls `f` until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}
