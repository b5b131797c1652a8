//! The unix socket of a vhost-user port, at either end of the protocol: listening on it or
//! connecting to it, again every [`RECONNECT`] while there is no peer and after the peer left;
//! and stopping the control thread that waits on it (DPDK's `lib/vhost/socket.c` does the
//! same for its ports).

use crate::log::{PEER, log, log_rl};
use std::io;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::thread::JoinHandle;
use std::time::Duration;
use vlog::Level;

use super::lock;
use crate::afpacket::PortError;

/// How often a `vhostuserclient` port tries to connect while there is no peer.
pub const RECONNECT: Duration = Duration::from_millis(250);

/// Binds the socket at `path` for a port that listens (an error names option `key`, `path`
/// and the reason). A socket left by an earlier run is replaced; anything else at the path is
/// not.
pub(crate) fn listen(path: &Path, key: &str) -> Result<UnixListener, PortError> {
    let io_err = |what: String| move |source| PortError::Io { what, source };
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir).map_err(io_err(format!("creating {}", dir.display())))?;
    }
    if let Ok(m) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if !m.file_type().is_socket() {
            return Err(PortError::BadOption(format!(
                "{key}: {} exists and is not a socket",
                path.display()
            )));
        }
        std::fs::remove_file(path).map_err(io_err(format!(
            "removing the old socket {}",
            path.display()
        )))?;
    }
    let l = UnixListener::bind(path).map_err(io_err(format!("listening on {}", path.display())))?;
    l.set_nonblocking(true)
        .map_err(io_err(format!("listening on {}", path.display())))?;
    Ok(l)
}

/// Stops a port's control thread: tells it to (`stop`), shuts its connection down so that a
/// read it is blocked in returns, and waits for it.
pub(crate) fn stop_control(
    stop: &AtomicBool,
    conn: &Mutex<Option<UnixStream>>,
    control: Option<JoinHandle<()>>,
) {
    stop.store(true, Relaxed);
    if let Some(c) = lock(conn).as_ref() {
        let _ = c.shutdown(std::net::Shutdown::Both);
    }
    if let Some(t) = control {
        let _ = t.join();
    }
}

/// Sleeps `d` in small steps; false when the port is closing (`stop`).
pub(crate) fn nap(stop: &AtomicBool, d: Duration) -> bool {
    let step = Duration::from_millis(20);
    let mut left = d;
    while !stop.load(Relaxed) {
        if left.is_zero() {
            return true;
        }
        let s = left.min(step);
        std::thread::sleep(s);
        left -= s;
    }
    false
}

/// Where a control thread finds its peer: accepted on a listening socket or, without one,
/// connected to `path`.
pub(crate) struct Peer<'a> {
    /// `vhost` or `virtio_user`, for the log lines.
    kind: &'static str,
    name: &'a str,
    listener: Option<UnixListener>,
    path: &'a Path,
    /// The "waiting" line was printed since the last connection.
    told_waiting: bool,
}

impl<'a> Peer<'a> {
    pub(crate) fn new(
        kind: &'static str,
        name: &'a str,
        listener: Option<UnixListener>,
        path: &'a Path,
    ) -> Peer<'a> {
        Peer {
            kind,
            name,
            listener,
            path,
            told_waiting: false,
        }
    }

    /// Whether the port listens (rather than connects).
    pub(crate) fn listens(&self) -> bool {
        self.listener.is_some()
    }

    /// The next connection; `None` (after a nap) when there is none yet, or the port is
    /// closing (`stop`): the caller checks and asks again.
    pub(crate) fn next(&mut self, stop: &AtomicBool) -> Option<UnixStream> {
        let (kind, name) = (self.kind, self.name);
        let stream = match &self.listener {
            Some(l) => match l.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    nap(stop, Duration::from_millis(20));
                    return None;
                }
                Err(e) => {
                    log_rl(
                        &PEER,
                        Level::Warn,
                        &format!("{kind} port '{name}': accept: {e}"),
                    );
                    nap(stop, RECONNECT);
                    return None;
                }
            },
            None => match UnixStream::connect(self.path) {
                Ok(s) => s,
                Err(e) => {
                    if !self.told_waiting {
                        self.told_waiting = true;
                        log(
                            Level::Info,
                            &format!(
                                "{kind} port '{name}': waiting for {} ({e}); retrying every {} \
                                 ms",
                                self.path.display(),
                                RECONNECT.as_millis()
                            ),
                        );
                    }
                    nap(stop, RECONNECT);
                    return None;
                }
            },
        };
        self.told_waiting = false;
        Some(stream)
    }
}
