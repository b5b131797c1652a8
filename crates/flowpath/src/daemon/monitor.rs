//! `--monitor`: the supervising process of OVS's `monitor_daemon` (`lib/daemon-unix.c`). It
//! waits for the daemon; a daemon killed by a crash signal is started again (a fresh fork of
//! the monitor, which runs the startup anew), at most once per 10 seconds and with core dumps
//! off after the first one; a daemon that ends any other way (exit, SIGTERM, SIGKILL) ends the
//! monitor too, with status 0. The messages are OVS's (`1 crashes: pid 42 died, killed
//! (Segmentation fault), restarting`), logged by the `daemon_unix` module.

use std::fmt;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::{Forked, fork_and_wait_for_startup};

/// Signals that mean the daemon crashed (OVS's list, documented in its `daemon.man`).
const CRASH_SIGNALS: [i32; 9] = [
    libc::SIGABRT,
    libc::SIGALRM,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGPIPE,
    libc::SIGSEGV,
    libc::SIGXCPU,
    libc::SIGXFSZ,
];

/// Restarts are at least this far apart.
const RESTART_INTERVAL: Duration = Duration::from_secs(10);

/// A child's wait status.
#[derive(Clone, Copy, Debug)]
pub(super) struct Status(i32);

impl Status {
    /// The exit code, if the process exited.
    pub(super) fn exit_code(self) -> Option<i32> {
        libc::WIFEXITED(self.0).then(|| libc::WEXITSTATUS(self.0))
    }

    fn crashed(self) -> bool {
        libc::WIFSIGNALED(self.0) && CRASH_SIGNALS.contains(&libc::WTERMSIG(self.0))
    }

    fn core_dumped(self) -> bool {
        libc::WIFSIGNALED(self.0) && libc::WCOREDUMP(self.0)
    }
}

/// As OVS's `process_status_msg`: `exit status 1`, `killed (Segmentation fault), core dumped`.
impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        if libc::WIFEXITED(s) {
            write!(f, "exit status {}", libc::WEXITSTATUS(s))?;
        } else if libc::WIFSIGNALED(s) {
            write!(f, "killed ({})", signal_name(libc::WTERMSIG(s)))?;
        } else if libc::WIFSTOPPED(s) {
            write!(f, "stopped ({})", signal_name(libc::WSTOPSIG(s)))?;
        } else {
            write!(f, "terminated abnormally ({s:x})")?;
        }
        if self.core_dumped() {
            f.write_str(", core dumped")?;
        }
        Ok(())
    }
}

/// The C library's description of a signal (what OVS prints), for those a daemon dies of.
fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "Hangup",
        libc::SIGINT => "Interrupt",
        libc::SIGQUIT => "Quit",
        libc::SIGILL => "Illegal instruction",
        libc::SIGTRAP => "Trace/breakpoint trap",
        libc::SIGABRT => "Aborted",
        libc::SIGBUS => "Bus error",
        libc::SIGFPE => "Floating point exception",
        libc::SIGKILL => "Killed",
        libc::SIGUSR1 => "User defined signal 1",
        libc::SIGSEGV => "Segmentation fault",
        libc::SIGUSR2 => "User defined signal 2",
        libc::SIGPIPE => "Broken pipe",
        libc::SIGALRM => "Alarm clock",
        libc::SIGTERM => "Terminated",
        libc::SIGSTOP => "Stopped (signal)",
        libc::SIGTSTP => "Stopped",
        libc::SIGXCPU => "CPU time limit exceeded",
        libc::SIGXFSZ => "File size limit exceeded",
        _ => return format!("signal {sig}"),
    };
    name.to_string()
}

/// Waits for process `pid` to end.
pub(super) fn wait(pid: i32) -> anyhow::Result<Status> {
    let status = wait_quietly(pid);
    // The monitor waits for days: its log file may have been rotated meanwhile, so it goes
    // on in the file that now has the name (OVS's monitor closes and reopens it likewise).
    let _ = vlog::reopen();
    status
}

fn wait_quietly(pid: i32) -> anyhow::Result<Status> {
    let mut status = 0;
    loop {
        // SAFETY: `status` is a valid int for waitpid to fill.
        if unsafe { libc::waitpid(pid, &mut status, 0) } == pid {
            return Ok(Status(status));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e).context("waitpid failed");
        }
    }
}

/// Watches over the daemon `pid`. Returns only in a restarted daemon, with the pipe on which
/// it says it is ready; the monitor itself exits.
pub(super) fn run(mut pid: i32) -> anyhow::Result<OwnedFd> {
    let log = vlog::module("daemon_unix");
    let say = |level, msg: &str| {
        if let Some(m) = log {
            m.log(level, msg);
        }
    };
    let mut crashes = 0u32;
    let mut last_restart: Option<Instant> = None;
    let mut status = wait(pid)?;
    loop {
        if !status.crashed() {
            say(
                vlog::Level::Info,
                &format!("pid {pid} died, {status}, exiting"),
            );
            std::process::exit(0);
        }
        crashes += 1;
        let what = format!("{crashes} crashes: pid {pid} died, {status}");
        if status.core_dumped() {
            // One core is enough to debug with; more would fill the disk.
            let off = rustix::process::Rlimit {
                current: Some(0),
                maximum: Some(0),
            };
            if let Err(e) = rustix::process::setrlimit(rustix::process::Resource::Core, off) {
                say(
                    vlog::Level::Warn,
                    &format!("failed to disable core dumps: {e}"),
                );
            }
        }
        if let Some(wake) = last_restart
            .map(|t| t + RESTART_INTERVAL)
            .filter(|&w| w > Instant::now())
        {
            say(
                vlog::Level::Warn,
                &format!("{what}, waiting until 10 seconds since last restart"),
            );
            std::thread::sleep(wake - Instant::now());
        }
        last_restart = Some(Instant::now());
        say(vlog::Level::Err, &format!("{what}, restarting"));
        match fork_and_wait_for_startup() {
            Ok(Forked::Child(fd)) => return Ok(fd),
            Ok(Forked::Parent { child }) => {
                pid = child;
                status = wait(pid)?;
            }
            // The new daemon died before it was ready (a failure exit already ended the
            // monitor with its status): try again, as OVS does.
            Err(e) => say(vlog::Level::Err, &format!("{e:#}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_read_as_ovs_prints_them() {
        // Wait statuses as the kernel encodes them: exit code in the second byte, the signal
        // in the low seven bits, 0x80 for a core dump.
        assert_eq!(Status(1 << 8).to_string(), "exit status 1");
        assert_eq!(Status(1 << 8).exit_code(), Some(1));
        let segv = Status(libc::SIGSEGV | 0x80);
        assert_eq!(segv.to_string(), "killed (Segmentation fault), core dumped");
        assert!(segv.crashed());
        let kill = Status(libc::SIGKILL);
        assert_eq!(kill.to_string(), "killed (Killed)");
        assert!(!kill.crashed(), "SIGKILL is an operator's, not a crash");
        assert!(!Status(libc::SIGTERM).crashed());
        assert_eq!(kill.exit_code(), None);
    }
}
