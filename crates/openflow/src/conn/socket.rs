//! The sockets under OpenFlow connections: non-blocking TCP and Unix-domain streams, the
//! listeners that accept them, and the non-blocking connect of an active target (OVS's
//! `stream`/`pstream` layer under `vconn`).
//!
//! Everything here is non-blocking, so one control-plane thread can multiplex every listener
//! and connection. A `punix:` listener's socket file gets its mode before it is bound (an
//! `fchmod` of the socket, which Linux applies to the file `bind` creates), so it is never
//! reachable with looser permissions; a stale socket file left by an earlier run is replaced,
//! and the file is removed when the listener is dropped.

use std::fs;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};

use super::Target;

/// The mode of a `punix:` socket file: only its owner (root, for a switch) may connect, as
/// for OVS's `BRIDGE.mgmt`.
pub const PUNIX_MODE: u32 = 0o700;

/// Connections a listener lets wait for `accept`.
const BACKLOG: i32 = 64;

/// A connected byte stream.
#[derive(Debug)]
pub(crate) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    fn from_fd(fd: OwnedFd, tcp: bool) -> Stream {
        if tcp {
            let s = TcpStream::from(fd);
            // OpenFlow messages are small and request-reply: Nagle would only add latency.
            let _ = s.set_nodelay(true);
            Stream::Tcp(s)
        } else {
            Stream::Unix(UnixStream::from(fd))
        }
    }

    /// Shuts both directions down: the peer sees the end, and a poll reports it at once.
    pub(crate) fn shutdown(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
            Stream::Unix(s) => s.shutdown(std::net::Shutdown::Both),
        }
    }

    /// The error a non-blocking connect ended with, once the socket is writable.
    pub(crate) fn connect_result(&self) -> io::Result<()> {
        match rustix::net::sockopt::socket_error(self)? {
            Ok(()) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

impl AsFd for Stream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Stream::Tcp(s) => s.as_fd(),
            Stream::Unix(s) => s.as_fd(),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Starts connecting to an active target. `Ok((stream, true))` when the connection is already
/// made, `Ok((stream, false))` when it is in progress: the stream becomes writable when it
/// ends, and [`Stream::connect_result`] tells how.
pub(crate) fn connect(target: &Target) -> io::Result<(Stream, bool)> {
    let flags = SocketFlags::NONBLOCK | SocketFlags::CLOEXEC;
    let (fd, result, tcp) = match target {
        Target::Tcp(addr) => {
            let family = match addr {
                SocketAddr::V4(_) => AddressFamily::INET,
                SocketAddr::V6(_) => AddressFamily::INET6,
            };
            let fd = rustix::net::socket_with(family, SocketType::STREAM, flags, None)?;
            let r = rustix::net::connect(&fd, addr);
            (fd, r, true)
        }
        Target::Unix(path) => {
            let fd =
                rustix::net::socket_with(AddressFamily::UNIX, SocketType::STREAM, flags, None)?;
            let r = rustix::net::connect(&fd, &SocketAddrUnix::new(path.as_path())?);
            (fd, r, false)
        }
        Target::PTcp(_) | Target::PUnix(_) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a passive target cannot be connected to",
            ));
        }
    };
    match result {
        Ok(()) => Ok((Stream::from_fd(fd, tcp), true)),
        Err(rustix::io::Errno::INPROGRESS) if tcp => Ok((Stream::from_fd(fd, tcp), false)),
        Err(e) => Err(e.into()),
    }
}

/// A listening socket.
#[derive(Debug)]
pub(crate) enum Listener {
    Tcp(TcpListener),
    /// A Unix-domain listener and the socket file it removes when dropped.
    Unix(UnixListener, PathBuf),
}

impl Listener {
    /// Listens on a passive target; a `punix:` socket file gets mode `mode`.
    pub(crate) fn bind(target: &Target, mode: u32) -> io::Result<Listener> {
        match target {
            Target::PTcp(addr) => {
                let l = TcpListener::bind(addr)?;
                l.set_nonblocking(true)?;
                Ok(Listener::Tcp(l))
            }
            Target::PUnix(path) => bind_unix(path, mode),
            Target::Tcp(_) | Target::Unix(_) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an active target cannot be listened on",
            )),
        }
    }

    /// The target this listener is bound to: a `ptcp:` with port 0 says the port it got.
    pub(crate) fn local_target(&self) -> io::Result<Target> {
        Ok(match self {
            Listener::Tcp(l) => Target::PTcp(l.local_addr()?),
            Listener::Unix(_, p) => Target::PUnix(p.clone()),
        })
    }

    /// A connection waiting to be accepted, non-blocking like every stream here.
    pub(crate) fn accept(&self) -> io::Result<Stream> {
        let s = match self {
            Listener::Tcp(l) => {
                let (s, _) = l.accept()?;
                let _ = s.set_nodelay(true);
                Stream::Tcp(s)
            }
            Listener::Unix(l, _) => Stream::Unix(l.accept()?.0),
        };
        match &s {
            Stream::Tcp(t) => t.set_nonblocking(true)?,
            Stream::Unix(u) => u.set_nonblocking(true)?,
        }
        Ok(s)
    }
}

impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Listener::Tcp(l) => l.as_fd(),
            Listener::Unix(l, _) => l.as_fd(),
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix(_, path) = self {
            let _ = fs::remove_file(path);
        }
    }
}

fn bind_unix(path: &Path, mode: u32) -> io::Result<Listener> {
    // A socket file left by a switch that did not exit cleanly: replace it, as OVS does. Any
    // other kind of file is not ours to remove.
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => fs::remove_file(path)?,
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists and is not a socket", path.display()),
            ));
        }
        Err(_) => {}
    }
    let flags = SocketFlags::NONBLOCK | SocketFlags::CLOEXEC;
    let fd = rustix::net::socket_with(AddressFamily::UNIX, SocketType::STREAM, flags, None)?;
    // Before bind: the file bind creates takes the socket's mode (less the umask).
    rustix::fs::fchmod(&fd, rustix::fs::Mode::from_raw_mode(mode))?;
    rustix::net::bind(&fd, &SocketAddrUnix::new(path)?)?;
    rustix::net::listen(&fd, BACKLOG)?;
    Ok(Listener::Unix(UnixListener::from(fd), path.to_path_buf()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_punix_socket_file_is_owner_only_and_removed_with_its_listener() {
        let dir = std::env::temp_dir().join(format!("of-socket-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("br0.mgmt");
        // A stale socket file is replaced.
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        let l = Listener::bind(&Target::PUnix(path.clone()), PUNIX_MODE).unwrap();
        let m = fs::symlink_metadata(&path).unwrap();
        assert!(m.file_type().is_socket());
        assert_eq!(m.permissions().mode() & 0o777 & !0o022, 0o700);
        assert_eq!(m.permissions().mode() & 0o077, 0);
        let (s, done) = connect(&Target::Unix(path.clone())).unwrap();
        assert!(done);
        let accepted = l.accept().unwrap();
        drop((s, accepted));
        drop(l);
        assert!(fs::symlink_metadata(&path).is_err());
        // A regular file is not replaced.
        fs::write(&path, b"x").unwrap();
        assert!(Listener::bind(&Target::PUnix(path.clone()), PUNIX_MODE).is_err());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn tcp_connects_in_the_background() {
        let l = Listener::bind(&Target::PTcp("127.0.0.1:0".parse().unwrap()), 0).unwrap();
        let Target::PTcp(addr) = l.local_target().unwrap() else {
            unreachable!()
        };
        assert_ne!(addr.port(), 0);
        let (s, _) = connect(&Target::Tcp(addr)).unwrap();
        let mut fds = [rustix::event::PollFd::new(
            &s,
            rustix::event::PollFlags::OUT,
        )];
        rustix::event::poll(&mut fds, None).unwrap();
        s.connect_result().unwrap();
        l.accept().unwrap();
    }
}
