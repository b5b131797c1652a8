//! The control socket server: one accept thread, one thread per connection.
//!
//! Threads keep the code plain blocking I/O; the number of connection threads is capped
//! ([`ServerConfig::max_connections`]) and each read and write has a timeout, so a slow or
//! hostile peer holds one thread for a bounded time and never delays other clients. Requests on
//! one connection are answered in order, one at a time, as OVS does.
//!
//! The socket file is created with mode 0600 without a window in which it is reachable with
//! looser permissions: it is bound inside a fresh 0700 directory, chmod'ed, then renamed into
//! place (which also atomically replaces a stale socket). The process umask is left alone, since
//! it is shared with other threads.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::framer::{FrameError, Framer};
use crate::proto;
use crate::{Error, Registry};

/// Longest path that fits in `sockaddr_un.sun_path` with its terminating NUL on Linux.
const MAX_SOCKET_PATH: usize = 107;

/// Tunables of a [`Server`].
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Connections served at once; further ones are answered with an error and closed.
    pub max_connections: usize,
    /// Largest request accepted, in bytes; a longer one gets an error reply and the connection
    /// is closed.
    pub max_message_bytes: usize,
    /// A connection that sends nothing for this long is closed (`None`: never).
    pub idle_timeout: Option<Duration>,
    /// A connection whose peer does not take a reply within this long is closed.
    pub write_timeout: Option<Duration>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_connections: 64,
            max_message_bytes: 1 << 20,
            idle_timeout: Some(Duration::from_secs(120)),
            write_timeout: Some(Duration::from_secs(30)),
        }
    }
}

/// A control socket being served. Dropping it (or [`Server::shutdown`]) stops the threads and
/// removes the socket file.
#[derive(Debug)]
pub struct Server {
    path: PathBuf,
    /// Device and inode of the socket file we created, so that we never remove a successor's.
    file_id: (u64, u64),
    shared: Arc<Shared>,
    /// Dropping this end wakes the accept thread (its end becomes readable: EOF).
    wake: Option<UnixStream>,
    accept_thread: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    registry: Registry,
    config: ServerConfig,
    /// Open connections, by id, as clones that shutdown can close under their threads.
    conns: Mutex<HashMap<u64, UnixStream>>,
}

impl Shared {
    fn conns(&self) -> std::sync::MutexGuard<'_, HashMap<u64, UnixStream>> {
        self.conns.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Server {
    /// Serves `registry` on a new socket at `path` with the default [`ServerConfig`].
    pub fn bind(path: impl AsRef<Path>, registry: Registry) -> Result<Server, Error> {
        Self::bind_with(path, registry, ServerConfig::default())
    }

    /// Serves `registry` on a new socket at `path`. A socket file nobody listens on is replaced;
    /// a live one, or a file that is not a socket, is an error.
    pub fn bind_with(
        path: impl AsRef<Path>,
        registry: Registry,
        config: ServerConfig,
    ) -> Result<Server, Error> {
        let path = path.as_ref().to_path_buf();
        let io_err = |source| Error::Io {
            path: path.clone(),
            source,
        };
        let len = path.as_os_str().len();
        if len > MAX_SOCKET_PATH {
            return Err(Error::PathTooLong {
                path,
                len,
                max: MAX_SOCKET_PATH,
            });
        }
        check_existing(&path)?;
        let listener = bind_private(&path).map_err(io_err)?;
        let meta = fs::symlink_metadata(&path).map_err(io_err)?;
        let file_id = (meta.dev(), meta.ino());
        listener.set_nonblocking(true).map_err(io_err)?;

        let (wake, wake_rx) = UnixStream::pair().map_err(io_err)?;
        let shared = Arc::new(Shared {
            registry,
            config,
            conns: Mutex::new(HashMap::new()),
        });
        let accept_shared = Arc::clone(&shared);
        let accept_thread = thread::Builder::new()
            .name("unixctl-accept".into())
            .spawn(move || accept_loop(&listener, &wake_rx, &accept_shared));
        let accept_thread = match accept_thread {
            Ok(t) => t,
            Err(e) => {
                let _ = fs::remove_file(&path);
                return Err(io_err(e));
            }
        };
        Ok(Server {
            path,
            file_id,
            shared,
            wake: Some(wake),
            accept_thread: Some(accept_thread),
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The registry being served (another handle to it).
    pub fn registry(&self) -> &Registry {
        &self.shared.registry
    }

    /// Connections currently open.
    pub fn active_connections(&self) -> usize {
        self.shared.conns().len()
    }

    /// Removes the socket file, closes every connection and waits for all threads to end
    /// (including any handler still running). Must not be called from a command handler, which
    /// would wait for itself: have the handler signal the owner instead (as `exit` would).
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(accept_thread) = self.accept_thread.take() else {
            return;
        };
        // Only remove the file if it is still ours: a later server may have replaced it.
        if let Ok(meta) = fs::symlink_metadata(&self.path)
            && (meta.dev(), meta.ino()) == self.file_id
        {
            let _ = fs::remove_file(&self.path);
        }
        drop(self.wake.take());
        let _ = accept_thread.join();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Refuses a live socket or a non-socket at `path`; a dead socket is left for the rename to
/// replace.
fn check_existing(path: &Path) -> Result<(), Error> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(Error::Io {
            path: path.to_path_buf(),
            source,
        }),
        Ok(meta) if !meta.file_type().is_socket() => Err(Error::NotASocket {
            path: path.to_path_buf(),
        }),
        Ok(_) => match UnixStream::connect(path) {
            Ok(_) => Err(Error::AlreadyListening {
                path: path.to_path_buf(),
            }),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(()),
            Err(source) => Err(Error::Io {
                path: path.to_path_buf(),
                source,
            }),
        },
    }
}

/// Binds a listener inside a private directory next to `path`, makes it 0600 and moves it to
/// `path`.
fn bind_private(path: &Path) -> io::Result<UnixListener> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let tmp_dir = dir.join(format!(
        ".unixctl-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    fs::DirBuilder::new().mode(0o700).create(&tmp_dir)?;
    let tmp_sock = tmp_dir.join("s");
    let result = (|| {
        let listener = UnixListener::bind(&tmp_sock)?;
        fs::set_permissions(&tmp_sock, fs::Permissions::from_mode(0o600))?;
        fs::rename(&tmp_sock, path)?;
        Ok(listener)
    })();
    let _ = fs::remove_file(&tmp_sock);
    let _ = fs::remove_dir(&tmp_dir);
    result
}

fn accept_loop(listener: &UnixListener, wake: &UnixStream, shared: &Arc<Shared>) {
    let mut threads: Vec<JoinHandle<()>> = Vec::new();
    let mut next_id = 0u64;
    loop {
        match poll_readable(&[listener.as_raw_fd(), wake.as_raw_fd()], -1) {
            Ok(ready) if ready[1] => break,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
        // Drain the backlog; the listener is non-blocking.
        loop {
            match listener.accept() {
                Ok((stream, _)) => {
                    threads.retain(|t| !t.is_finished());
                    next_id += 1;
                    if let Some(t) = spawn_connection(next_id, stream, shared) {
                        threads.push(t);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    // Out of descriptors or similar: back off instead of spinning, but stay
                    // responsive to shutdown.
                    if matches!(poll_readable(&[wake.as_raw_fd()], 100), Ok(r) if r[0]) {
                        return finish(threads, shared);
                    }
                    break;
                }
            }
        }
    }
    finish(threads, shared);
}

/// Closes every connection's reading side under its thread and waits for the threads: a
/// request being answered (`exit` among them) still gets its reply, within the write timeout,
/// and then the thread reads the end of the connection.
fn finish(threads: Vec<JoinHandle<()>>, shared: &Shared) {
    for stream in shared.conns().values() {
        let _ = stream.shutdown(std::net::Shutdown::Read);
    }
    for t in threads {
        let _ = t.join();
    }
}

fn spawn_connection(id: u64, stream: UnixStream, shared: &Arc<Shared>) -> Option<JoinHandle<()>> {
    // Accepted sockets do not inherit O_NONBLOCK on Linux, but make sure.
    if stream.set_nonblocking(false).is_err() {
        return None;
    }
    {
        let mut conns = shared.conns();
        if conns.len() >= shared.config.max_connections {
            drop(conns);
            let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
            let msg = format!(
                "too many control connections (at most {})",
                shared.config.max_connections
            );
            let _ = (&stream).write_all(&proto::encode_reply(
                &serde_json::Value::Null,
                &Err(msg + "\n"),
            ));
            return None;
        }
        conns.insert(id, stream.try_clone().ok()?);
    }
    let conn_shared = Arc::clone(shared);
    let spawned = thread::Builder::new()
        .name("unixctl-conn".into())
        .spawn(move || {
            serve_connection(&stream, &conn_shared);
            conn_shared.conns().remove(&id);
        });
    match spawned {
        Ok(t) => Some(t),
        Err(_) => {
            shared.conns().remove(&id);
            None
        }
    }
}

/// Reads requests and answers them in order until the peer closes, times out, or breaks the
/// protocol (then it gets an error reply, if one can be addressed, and is closed).
fn serve_connection(stream: &UnixStream, shared: &Shared) {
    let config = &shared.config;
    if stream.set_read_timeout(config.idle_timeout).is_err()
        || stream.set_write_timeout(config.write_timeout).is_err()
    {
        return;
    }
    let mut framer = Framer::new(config.max_message_bytes);
    let mut chunk = vec![0u8; 64 * 1024];
    let mut out = stream;
    loop {
        loop {
            let (reply, keep_open) = match framer.next_frame() {
                Ok(None) => break,
                Ok(Some(frame)) => answer(&frame, &shared.registry),
                Err(FrameError::NotAnObject) => (
                    proto::encode_reply(
                        &serde_json::Value::Null,
                        &Err("invalid JSON-RPC message: not a JSON object\n".into()),
                    ),
                    false,
                ),
                Err(FrameError::TooLarge) => (
                    proto::encode_reply(
                        &serde_json::Value::Null,
                        &Err(format!(
                            "JSON-RPC message exceeds {} bytes\n",
                            config.max_message_bytes
                        )),
                    ),
                    false,
                ),
            };
            if out.write_all(&reply).is_err() || !keep_open {
                return;
            }
        }
        match out.read(&mut chunk) {
            // EOF, possibly in the middle of a message: nothing to answer.
            Ok(0) => return,
            Ok(n) => framer.push(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // Idle timeout, reset, or shutdown.
            Err(_) => return,
        }
    }
}

/// The reply to one message, and whether the connection stays usable.
fn answer(frame: &[u8], registry: &Registry) -> (Vec<u8>, bool) {
    match proto::parse_request(frame) {
        Ok(req) => {
            let outcome = registry.execute_json(&req.method, &req.params);
            (proto::encode_reply(&req.id, &outcome), true)
        }
        Err(bad) => (
            proto::encode_reply(&bad.id, &Err(format!("{}\n", bad.reason))),
            false,
        ),
    }
}

/// Waits until one of `fds` is readable (or hung up), for at most `timeout_ms` (-1: forever);
/// returns which ones are.
#[allow(unsafe_code)]
fn poll_readable<const N: usize>(fds: &[RawFd; N], timeout_ms: i32) -> io::Result<[bool; N]> {
    let mut pollfds = fds.map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    // SAFETY: `pollfds` is an exclusively borrowed, initialised array of `N` pollfd structs that
    // outlives the call, and `N` is passed as its length. poll(2) only writes `revents`. The
    // descriptors belong to objects the caller keeps alive for the duration of the call.
    let n = unsafe { libc::poll(pollfds.as_mut_ptr(), N as libc::nfds_t, timeout_ms) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(pollfds.map(|p| p.revents != 0))
}
