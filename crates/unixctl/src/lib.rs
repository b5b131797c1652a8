//! The control socket ("unixctl"), wire-compatible with Open vSwitch's: JSON-RPC 1.0 over a unix
//! stream socket, so that the stock `ovs-appctl -t PATH COMMAND ARGS...` drives flowpath and
//! `flowpath ctl` can do the same without OVS installed.
//!
//! The protocol, as OVS 3.1's `ovs-appctl` and `ovsdb-server` speak it (observed on the wire):
//!
//! - messages are JSON objects written back to back, with no newline or length framing;
//! - a request is `{"id":0,"method":"dpif/show","params":["br0"]}`: every argument is a string,
//!   `ovs-appctl` always uses id 0, sends exactly one request and closes after the reply; its
//!   `-T`/`--timeout` is a client-side alarm and never reaches the wire;
//! - a success reply is `{"id":0,"result":"TEXT","error":null}`, printed by `ovs-appctl` as is,
//!   exit status 0;
//! - an error reply is `{"id":0,"error":"TEXT"}` (OVS omits `result`; `ovs-appctl` also accepts
//!   `"result":null`): `ovs-appctl` writes TEXT to stderr followed by
//!   `ovs-appctl: PATH: server returned an error`, exit status 2;
//! - the server appends `\n` to any non-empty reply text that does not already end in one.
//!
//! [`Registry`] holds the commands (with OVS's built-ins `list-commands` and `version`),
//! [`Server`] serves a registry on a socket, [`Client`] calls commands on a server.

#![deny(unsafe_code)]

mod client;
mod framer;
mod proto;
mod registry;
mod server;

use std::path::{Path, PathBuf};

pub use client::{Client, DEFAULT_TIMEOUT};
pub use registry::{Handler, Registry};
pub use server::{Server, ServerConfig};

/// File name of flowpath's control socket inside its run directory.
pub const SOCKET_NAME: &str = "flowpath.ctl";

/// The default control socket of a flowpath whose run directory is `rundir`.
pub fn socket_path(rundir: impl AsRef<Path>) -> PathBuf {
    rundir.as_ref().join(SOCKET_NAME)
}

/// Errors of command registration and of creating a control socket.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A live server already answers on the socket path.
    #[error("another process is already listening on control socket {}", path.display())]
    AlreadyListening { path: PathBuf },
    /// The path exists and is not a socket; it is left alone.
    #[error("{} exists and is not a socket; refusing to replace it", path.display())]
    NotASocket { path: PathBuf },
    /// The path does not fit in `sockaddr_un.sun_path`.
    #[error("control socket path {} is too long ({len} bytes, at most {max})", path.display())]
    PathTooLong {
        path: PathBuf,
        len: usize,
        max: usize,
    },
    /// An I/O error while creating the socket.
    #[error("could not create control socket {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A command of that name is already registered.
    #[error("command \"{0}\" is already registered")]
    DuplicateCommand(String),
    /// A command name must be non-empty and free of whitespace and control characters.
    #[error("invalid command name {0:?}")]
    InvalidCommandName(String),
    /// `min_args` is greater than `max_args`.
    #[error("command \"{name}\": min_args {min} is greater than max_args {max}")]
    InvalidArgRange {
        name: String,
        min: usize,
        max: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_path_is_rundir_slash_flowpath_ctl() {
        assert_eq!(
            socket_path("/var/run/flowpath"),
            PathBuf::from("/var/run/flowpath/flowpath.ctl")
        );
        assert_eq!(socket_path("rel"), PathBuf::from("rel/flowpath.ctl"));
    }
}
