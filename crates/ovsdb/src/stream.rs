//! The byte streams an OVSDB client connects over, named as OVS names them: `unix:PATH` and
//! `tcp:IP:PORT` (`tcp:[IPV6]:PORT` for IPv6). OVS sends inactivity probes (an `echo` after
//! 5 s of silence, a disconnect after 5 s more) on tcp but not on unix sockets, where the
//! kernel tells both ends when the other goes away; [`Target::probe_interval`] says which.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// Where to connect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Unix(String),
    Tcp(String),
}

impl Target {
    /// Parses `unix:PATH` or `tcp:HOST:PORT`.
    pub fn parse(s: &str) -> Result<Target, String> {
        if let Some(path) = s.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(format!("{s}: missing socket path"));
            }
            return Ok(Target::Unix(path.to_owned()));
        }
        if let Some(addr) = s.strip_prefix("tcp:") {
            let Some((host, port)) = addr.rsplit_once(':') else {
                return Err(format!("{s}: tcp target needs IP:PORT"));
            };
            if host.is_empty() || port.parse::<u16>().is_err() {
                return Err(format!("{s}: tcp target needs IP:PORT"));
            }
            return Ok(Target::Tcp(addr.to_owned()));
        }
        Err(format!(
            "{s}: unknown connection method (expected unix: or tcp:)"
        ))
    }

    /// How long a silent connection waits before it probes with an `echo`, if at all.
    pub fn probe_interval(&self) -> Option<Duration> {
        match self {
            Target::Unix(_) => None,
            Target::Tcp(_) => Some(Duration::from_secs(5)),
        }
    }

    pub fn connect(&self) -> io::Result<Stream> {
        match self {
            Target::Unix(path) => UnixStream::connect(path).map(Stream::Unix),
            Target::Tcp(addr) => {
                let addr = addr
                    .strip_prefix('[')
                    .map_or(addr.clone(), |a| a.replacen(']', "", 1));
                let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
                for sa in resolve(&addr)? {
                    match TcpStream::connect_timeout(&sa, Duration::from_secs(5)) {
                        Ok(s) => {
                            s.set_nodelay(true)?;
                            return Ok(Stream::Tcp(s));
                        }
                        Err(e) => last = e,
                    }
                }
                Err(last)
            }
        }
    }
}

fn resolve(addr: &str) -> io::Result<Vec<std::net::SocketAddr>> {
    // "::1:6640" after the brackets are gone: split the port off the end.
    if let Some((host, port)) = addr.rsplit_once(':')
        && let (Ok(ip), Ok(port)) = (host.parse::<std::net::IpAddr>(), port.parse::<u16>())
    {
        return Ok(vec![(ip, port).into()]);
    }
    Ok(addr.to_socket_addrs()?.collect())
}

/// A connected stream.
#[derive(Debug)]
pub enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    pub fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
    }

    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_read_timeout(t),
            Stream::Tcp(s) => s.set_read_timeout(t),
        }
    }

    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_write_timeout(t),
            Stream::Tcp(s) => s.set_write_timeout(t),
        }
    }

    /// Closes both directions, waking a thread blocked reading.
    pub fn shutdown(&self) {
        let _ = match self {
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
        };
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.flush(),
            Stream::Tcp(s) => s.flush(),
        }
    }
}
