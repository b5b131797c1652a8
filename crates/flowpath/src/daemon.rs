//! `flowpath run` as a Unix daemon that behaves as `ovs-vswitchd` does (OVS 3.1's
//! `lib/daemon-unix.c`, `lib/unixctl.c`, `lib/dirs.c`), so that an operator's habits, `ovs-ctl`,
//! logrotate and systemd units carry over:
//!
//! - `--detach`: fork, the child starts a new session, and the parent exits 0 only once the
//!   child says it is ready (control socket bound, OpenFlow listeners open), or exits with the
//!   child's failure status;
//! - `--monitor`: a supervising parent that restarts the daemon when it dies of a crash signal
//!   (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGPIPE, SIGALRM, SIGXCPU, SIGXFSZ), at most
//!   once per 10 seconds, and exits when the daemon ends any other way (`exit`, SIGTERM,
//!   SIGKILL), as OVS's monitor does;
//! - `--pidfile[=FILE]`: a pidfile locked as OVS locks it ([`pidfile`]), removed at exit;
//! - `--unixctl=SOCKET`: the control socket's path.
//!
//! Where files go depends on the mode ([`Layout`]). Configured from OVSDB, flowpath stands in
//! for `ovs-vswitchd` and uses its names: `$OVS_RUNDIR` (default `/var/run/openvswitch`) for the
//! pidfile `ovs-vswitchd.pid` and the control socket `ovs-vswitchd.PID.ctl`, `$OVS_LOGDIR`
//! (default `/var/log/openvswitch`) for `ovs-vswitchd.log`, so `ovs-appctl` with no `-t` and
//! Debian's logrotate script find it. Configured from a TOML file, the run directory and
//! `flowpath.ctl`/`flowpath.log`/`flowpath.pid` stay flowpath's own; with a pidfile
//! `DIR/NAME.pid`, the control socket goes where `ovs-appctl -t NAME` looks for it,
//! `DIR/NAME.PID.ctl`.

pub mod pidfile;

mod monitor;

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use self::pidfile::Pidfile;

/// The daemon options of `flowpath run`, spelled as `ovs-vswitchd`'s.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct DaemonArgs {
    /// Run in the background: return once the switch is ready (control socket bound).
    #[arg(long)]
    pub detach: bool,
    /// Keep a monitor process that restarts the switch if it crashes (dies of SIGSEGV,
    /// SIGABRT, SIGBUS...), at most once per 10 seconds.
    #[arg(long)]
    pub monitor: bool,
    /// With --detach, stay in the current directory instead of changing to /.
    #[arg(long)]
    pub no_chdir: bool,
    /// Write the switch's pid to FILE (relative to the run directory), locked as OVS does, so
    /// a second instance refuses to start (default: ovs-vswitchd.pid in OVSDB mode,
    /// flowpath.pid otherwise, in the run directory).
    #[arg(long, num_args = 0..=1, require_equals = true, value_name = "FILE")]
    pub pidfile: Option<Option<PathBuf>>,
    /// With --pidfile, start even if another instance holds it.
    #[arg(long, requires = "pidfile")]
    pub overwrite_pidfile: bool,
    /// The control socket (relative to the run directory). Default: ovs-vswitchd.PID.ctl in
    /// OVSDB mode; otherwise NAME.PID.ctl beside a pidfile NAME.pid, else flowpath.ctl.
    #[arg(long, value_name = "SOCKET")]
    pub unixctl: Option<PathBuf>,
    /// Lock the process's memory (mlockall), as ovs-vswitchd --mlockall.
    #[arg(long)]
    pub mlockall: bool,
    /// Accepted for ovs-vswitchd's command line (ovs-ctl passes it); flowpath does not
    /// confine itself.
    #[arg(long, hide = true)]
    pub no_self_confinement: bool,
}

/// Where a mode puts its run-time files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Run directory: pidfile, control socket, OpenFlow `BRIDGE.mgmt` sockets.
    pub rundir: PathBuf,
    /// Directory of the default log file.
    pub logdir: PathBuf,
    /// The name files are named after: `ovs-vswitchd` in OVSDB mode, else `flowpath`.
    pub program: &'static str,
    /// OVSDB mode: the control socket is `RUNDIR/PROGRAM.PID.ctl`, as OVS's.
    ovs_names: bool,
}

impl Layout {
    /// flowpath's own names (TOML mode): `--rundir` or the default run directory
    /// (`$FLOWPATH_RUNDIR`, `/run/flowpath` for root, ...), where the log goes too.
    pub fn flowpath(rundir: Option<&Path>) -> Layout {
        let rundir = absolute(
            rundir
                .map(Path::to_path_buf)
                .unwrap_or_else(crate::switch::default_rundir),
        );
        Layout {
            logdir: rundir.clone(),
            rundir,
            program: "flowpath",
            ovs_names: false,
        }
    }

    /// `ovs-vswitchd`'s names (OVSDB mode): `--rundir`, else `$OVS_RUNDIR`, else
    /// `/var/run/openvswitch`; logs in `$OVS_LOGDIR`, else `/var/log/openvswitch`.
    pub fn ovs_vswitchd(rundir: Option<&Path>) -> Layout {
        Layout {
            rundir: absolute(rundir.map_or_else(ovs_rundir, Path::to_path_buf)),
            logdir: absolute(ovs_logdir()),
            program: "ovs-vswitchd",
            ovs_names: true,
        }
    }

    /// The log file of `--log-file` given without a name.
    pub fn default_log_file(&self) -> PathBuf {
        self.logdir.join(format!("{}.log", self.program))
    }

    /// The database `ovs-vswitchd` connects to when none is named: `unix:RUNDIR/db.sock`.
    pub fn default_database(&self) -> String {
        format!("unix:{}", self.rundir.join("db.sock").display())
    }

    fn default_pidfile(&self) -> PathBuf {
        self.rundir.join(format!("{}.pid", self.program))
    }
}

/// OVS's run directory: `$OVS_RUNDIR`, else `/var/run/openvswitch` (Debian's build).
pub fn ovs_rundir() -> PathBuf {
    env_dir("OVS_RUNDIR", "/var/run/openvswitch")
}

/// OVS's log directory: `$OVS_LOGDIR`, else `/var/log/openvswitch`.
pub fn ovs_logdir() -> PathBuf {
    env_dir("OVS_LOGDIR", "/var/log/openvswitch")
}

/// An empty variable counts as unset, as in OVS's `lib/dirs.c`.
fn env_dir(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(default), PathBuf::from)
}

/// The control socket of the flowpath whose run directory is `rundir`: `flowpath.ctl`, or
/// for one started with `--pidfile`, `flowpath.PID.ctl` of the pid its pidfile names (found as
/// `ovs-appctl -t flowpath` finds it).
pub fn control_socket_in(rundir: &Path) -> PathBuf {
    let fixed = unixctl::socket_path(rundir);
    if fixed.exists() {
        return fixed;
    }
    // A switch with a pidfile (flowpath's, or ovs-vswitchd's names in OVSDB mode), then an
    // OVSDB-mode switch given `--unixctl=ovs-vswitchd.ctl`, as OVS's test setups name it.
    for program in ["flowpath", "ovs-vswitchd"] {
        if let Ok(pid) = pidfile::read(&rundir.join(format!("{program}.pid"))) {
            return rundir.join(format!("{program}.{pid}.ctl"));
        }
    }
    let ovs = rundir.join("ovs-vswitchd.ctl");
    if ovs.exists() {
        return ovs;
    }
    fixed
}

/// `path` made absolute against the current directory, so that it still names the same file
/// after a detached daemon changes to `/`.
pub fn absolute(path: PathBuf) -> PathBuf {
    std::path::absolute(&path).unwrap_or(path)
}

/// Where the control socket goes; the pid part is known only in the daemon process.
#[derive(Clone, Debug)]
enum SocketName {
    Fixed(PathBuf),
    /// `DIR/NAME.PID.ctl`.
    PerPid(PathBuf, String),
}

/// The daemon process's side of daemonizing: the pidfile it holds, the parent waiting for it
/// to be ready, and the control socket's path. Dropping it removes the pidfile.
#[derive(Debug)]
pub struct Daemon {
    detach: bool,
    chdir: bool,
    /// The pipe to the process waiting for our startup (the `--detach` parent or the
    /// monitor); one byte on it says "ready", its closing without one says "failed".
    ready: Option<OwnedFd>,
    socket: SocketName,
    /// Held for as long as the switch runs; dropping it removes the file.
    _pidfile: Option<Pidfile>,
}

impl Daemon {
    /// Daemonizes as `args` ask: in the process that returns, the switch is to be started;
    /// the others (the `--detach` parent, the monitor) never return. Must run before any
    /// thread is started (an OVSDB connection's included), since `fork` copies only the
    /// calling thread; a thread found running is an error.
    pub fn start(args: &DaemonArgs, layout: &Layout) -> anyhow::Result<Daemon> {
        let pidfile_path = args.pidfile.as_ref().map(|p| match p {
            Some(p) => layout.rundir.join(p),
            None => layout.default_pidfile(),
        });
        let socket = match (&args.unixctl, &pidfile_path) {
            (Some(s), _) => SocketName::Fixed(layout.rundir.join(s)),
            _ if layout.ovs_names => {
                SocketName::PerPid(layout.rundir.clone(), layout.program.to_string())
            }
            (None, Some(pidfile)) => {
                let dir = pidfile.parent().map(Path::to_path_buf).unwrap_or_default();
                let name = pidfile.file_stem().unwrap_or_default();
                SocketName::PerPid(dir, name.to_string_lossy().into_owned())
            }
            (None, None) => SocketName::Fixed(unixctl::socket_path(&layout.rundir)),
        };
        let mut ready = None;
        if args.detach || args.monitor {
            check_single_threaded()?;
        }
        if args.detach {
            match fork_and_wait_for_startup()? {
                Forked::Parent { .. } => std::process::exit(0),
                Forked::Child(fd) => ready = Some(fd),
            }
            rustix::process::setsid().context("setsid")?;
        }
        if args.monitor {
            // Rust's runtime catches SIGSEGV to report stack overflows and swallows one sent
            // by `kill`: a SIGSEGV must end the daemon, as a crash does, for the monitor to
            // see it (OVS's handler re-raises it likewise).
            // SAFETY: restoring the default disposition installs no code of ours.
            unsafe { libc::signal(libc::SIGSEGV, libc::SIG_DFL) };
            match fork_and_wait_for_startup()? {
                Forked::Parent { child } => {
                    // The daemon is up: let the --detach parent go, then watch over it.
                    notify_ready(ready.take());
                    if args.detach {
                        redirect_stdio_to_null();
                    }
                    ready = Some(monitor::run(child)?);
                }
                Forked::Child(fd) => ready = Some(fd),
            }
        }
        let pidfile = match pidfile_path {
            Some(path) => {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)
                        .with_context(|| format!("pidfile directory {}", dir.display()))?;
                }
                Some(Pidfile::create(&path, args.overwrite_pidfile)?)
            }
            None => None,
        };
        if args.mlockall {
            // SAFETY: mlockall takes flags only and touches no memory of ours.
            if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
                vlog_warn(&format!("mlockall failed: {}", io::Error::last_os_error()));
            }
        }
        Ok(Daemon {
            detach: args.detach,
            chdir: !args.no_chdir,
            ready,
            socket,
            _pidfile: pidfile,
        })
    }

    /// The control socket's path.
    pub fn control_socket(&self) -> PathBuf {
        match &self.socket {
            SocketName::Fixed(p) => p.clone(),
            SocketName::PerPid(dir, name) => dir.join(format!("{name}.{}.ctl", std::process::id())),
        }
    }

    /// Startup is done (as OVS's `daemonize_complete`): the waiting parent may exit 0, and a
    /// detached daemon leaves the terminal (standard streams to /dev/null) and, unless
    /// `--no-chdir`, the current directory. Later calls do nothing. A TOML configuration is
    /// done once its control socket and OpenFlow listeners are up; `ovs-vswitchd` is done
    /// once the transaction of its first configuration (the one setting `cur_cfg`) has
    /// committed, so that `ovs-vsctl` run right after finds the switch configured.
    pub fn complete(&mut self) {
        if self.ready.is_none() {
            return;
        }
        notify_ready(self.ready.take());
        if self.detach {
            if self.chdir {
                let _ = std::env::set_current_dir("/");
            }
            redirect_stdio_to_null();
        }
    }
}

/// The outcome of [`fork_and_wait_for_startup`] in each process.
enum Forked {
    /// In the parent, once the child said it is ready.
    Parent { child: i32 },
    /// In the child: the pipe end to say "ready" on.
    Child(OwnedFd),
}

/// Forks; the parent waits until the child writes its "ready" byte. A child that exits with a
/// failure status first makes the parent exit with that status (its error is already on the
/// terminal); one that dies otherwise is an error.
fn fork_and_wait_for_startup() -> anyhow::Result<Forked> {
    let (rx, tx) = pipe()?;
    match fork()? {
        None => {
            drop(rx);
            Ok(Forked::Child(tx))
        }
        Some(child) => {
            drop(tx);
            let mut byte = [0u8; 1];
            let mut rx = File::from(rx);
            let n = loop {
                match rx.read(&mut byte) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    r => break r.unwrap_or(0),
                }
            };
            if n == 1 {
                return Ok(Forked::Parent { child });
            }
            let status = monitor::wait(child)?;
            if let Some(code) = status.exit_code().filter(|&c| c != 0) {
                std::process::exit(code);
            }
            bail!("fork child died before signaling startup ({status})")
        }
    }
}

/// `fork(2)`: `None` in the child, the child's pid in the parent.
fn fork() -> anyhow::Result<Option<i32>> {
    // SAFETY: the caller checked that this process runs a single thread, so the child's copy
    // holds no lock or state of a thread that does not exist in it and may run any code.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()).context("fork"),
        0 => Ok(None),
        pid => Ok(Some(pid)),
    }
}

/// A close-on-exec pipe: (read end, write end).
fn pipe() -> anyhow::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error()).context("pipe");
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn notify_ready(fd: Option<OwnedFd>) {
    if let Some(fd) = fd {
        // A parent that went away does not need the news.
        let _ = File::from(fd).write_all(&[0]);
    }
}

/// Points standard input, output and error at /dev/null (a detached daemon has no terminal).
fn redirect_stdio_to_null() {
    let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    else {
        return;
    };
    for fd in 0..=2 {
        // SAFETY: both descriptors are open; dup2 replaces `fd` atomically with a copy of
        // /dev/null's, which Rust's standard streams keep using through the same numbers.
        unsafe { libc::dup2(null.as_raw_fd(), fd) };
    }
}

/// `fork` in a process with several threads would leave the child with locks held by threads
/// it does not have.
fn check_single_threaded() -> anyhow::Result<()> {
    let n = std::fs::read_dir("/proc/self/task").map_or(1, Iterator::count);
    if n > 1 {
        bail!("cannot daemonize: {n} threads already running");
    }
    Ok(())
}

fn vlog_warn(msg: &str) {
    if let Some(m) = vlog::module("daemon_unix") {
        m.log(vlog::Level::Warn, msg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ovsdb_mode_uses_ovs_vswitchd_s_names() {
        let l = Layout::ovs_vswitchd(Some(Path::new("/r")));
        assert_eq!(
            l.default_log_file().file_name().unwrap(),
            "ovs-vswitchd.log"
        );
        assert_eq!(l.default_database(), "unix:/r/db.sock");
        let d = Daemon::start(&DaemonArgs::default(), &l).unwrap();
        assert_eq!(
            d.control_socket(),
            PathBuf::from(format!("/r/ovs-vswitchd.{}.ctl", std::process::id()))
        );
        let args = DaemonArgs {
            unixctl: Some("x.ctl".into()),
            ..DaemonArgs::default()
        };
        let d = Daemon::start(&args, &l).unwrap();
        assert_eq!(d.control_socket(), PathBuf::from("/r/x.ctl"));
    }

    #[test]
    fn toml_mode_keeps_flowpath_ctl_unless_a_pidfile_names_the_socket() {
        let dir = std::env::temp_dir().join(format!("fp-daemon-layout-{}", std::process::id()));
        let l = Layout::flowpath(Some(&dir));
        assert_eq!(l.default_log_file(), dir.join("flowpath.log"));
        let d = Daemon::start(&DaemonArgs::default(), &l).unwrap();
        assert_eq!(d.control_socket(), dir.join("flowpath.ctl"));
        let args = DaemonArgs {
            pidfile: Some(Some("ovs-vswitchd.pid".into())),
            ..DaemonArgs::default()
        };
        let d = Daemon::start(&args, &l).unwrap();
        assert!(dir.join("ovs-vswitchd.pid").exists());
        assert_eq!(
            d.control_socket(),
            dir.join(format!("ovs-vswitchd.{}.ctl", std::process::id()))
        );
        drop(d);
        assert!(!dir.join("ovs-vswitchd.pid").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
