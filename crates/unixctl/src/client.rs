//! A unixctl client: what `ovs-appctl` does, as a library, plus several requests per connection.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::framer::{FrameError, Framer};
use crate::proto;

/// How long [`Client::call`] waits for a reply unless told otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Replies can be large (flow dumps); this only guards against a runaway server.
const MAX_REPLY_BYTES: usize = 1 << 30;

/// A connection to a control socket.
#[derive(Debug)]
pub struct Client {
    stream: UnixStream,
    path: PathBuf,
    framer: Framer,
    next_id: u64,
    timeout: Option<Duration>,
    /// Set when a call failed mid-way: the stream may hold a late reply, so it is not reused.
    broken: bool,
}

impl Client {
    /// Connects to the socket at `path`, with [`DEFAULT_TIMEOUT`] for each call.
    pub fn connect(path: impl AsRef<Path>) -> io::Result<Client> {
        let path = path.as_ref().to_path_buf();
        let stream = UnixStream::connect(&path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot connect to {}: {e}", path.display()),
            )
        })?;
        Ok(Client {
            stream,
            path,
            framer: Framer::new(MAX_REPLY_BYTES),
            next_id: 0,
            timeout: Some(DEFAULT_TIMEOUT),
            broken: false,
        })
    }

    /// Sets how long one call may take, from sending to the whole reply (`None`: no limit).
    pub fn set_timeout(&mut self, timeout: Option<Duration>) {
        self.timeout = timeout;
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `method` with `args` on the server: `Ok(Ok(text))` for a result, `Ok(Err(text))` for
    /// an error reply, `Err` when the exchange itself failed (then the client is unusable).
    pub fn call<S: AsRef<str>>(
        &mut self,
        method: &str,
        args: &[S],
    ) -> io::Result<Result<String, String>> {
        if self.broken {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "an earlier call on this connection failed; reconnect",
            ));
        }
        let result = self.transact(method, args);
        if result.is_err() {
            self.broken = true;
        }
        result
    }

    fn transact<S: AsRef<str>>(
        &mut self,
        method: &str,
        args: &[S],
    ) -> io::Result<Result<String, String>> {
        let id = self.next_id;
        self.next_id += 1;
        let deadline = self.timeout.map(|t| Instant::now() + t);

        self.stream.set_write_timeout(self.remaining(deadline)?)?;
        self.stream
            .write_all(&proto::encode_request(id, method, args))
            .map_err(|e| self.timed_out(e))?;

        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            match self.framer.next_frame() {
                Ok(Some(frame)) => return proto::decode_reply(&frame, id),
                Ok(None) => {}
                Err(FrameError::NotAnObject) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "server sent something that is not a JSON object",
                    ));
                }
                Err(FrameError::TooLarge) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("reply exceeds {MAX_REPLY_BYTES} bytes"),
                    ));
                }
            }
            self.stream.set_read_timeout(self.remaining(deadline)?)?;
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    let when = if self.framer.in_message() {
                        "in the middle of a reply"
                    } else {
                        "without replying"
                    };
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!(
                            "{}: server closed the connection {when}",
                            self.path.display()
                        ),
                    ));
                }
                Ok(n) => self.framer.push(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.timed_out(e)),
            }
        }
    }

    /// Time left before `deadline`, as a socket timeout (`None`: no limit).
    fn remaining(&self, deadline: Option<Instant>) -> io::Result<Option<Duration>> {
        match deadline {
            None => Ok(None),
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Ok(Some(left)),
                _ => Err(self.timed_out(io::ErrorKind::TimedOut.into())),
            },
        }
    }

    /// Socket timeouts surface as `WouldBlock`; report them as a timeout of the call.
    fn timed_out(&self, e: io::Error) -> io::Error {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "{}: no reply within {:?}",
                    self.path.display(),
                    self.timeout.unwrap_or_default()
                ),
            ),
            _ => e,
        }
    }
}
