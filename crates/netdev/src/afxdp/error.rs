//! Why an `afxdp` port could not open: [`AfXdpError`] for the caller, and the failure the
//! opening code builds before the port's name is known to the message, with the hints that
//! point to a fallback (generic mode, an `afpacket` port).

use std::io;

use crate::bpf::BpfError;

/// Why an `afxdp` port could not open.
#[derive(Debug, thiserror::Error)]
#[error("afxdp port {port}: {msg}")]
pub struct AfXdpError {
    pub port: String,
    pub msg: String,
    /// The kernel's errno, when a system call failed.
    pub errno: Option<i32>,
    /// Whether the failure means this kernel, driver or process cannot do AF_XDP at all
    /// (no AF_XDP sockets, `bpf()` not permitted, XDP not attachable), as opposed to a
    /// configuration mistake.
    pub unsupported: bool,
}

/// A failure inside the opening, before the port name is known to the message.
pub(super) struct Fail {
    pub(super) msg: String,
    pub(super) errno: Option<i32>,
    pub(super) unsupported: bool,
}

impl Fail {
    /// A failure with no errno.
    pub(super) fn msg(msg: impl Into<String>) -> Fail {
        Fail {
            msg: msg.into(),
            errno: None,
            unsupported: false,
        }
    }

    /// The same, marked as meaning "this system cannot do AF_XDP".
    pub(super) fn unsupported(mut self) -> Fail {
        self.unsupported = true;
        self
    }

    pub(super) fn io(what: impl Into<String>, e: &io::Error) -> Fail {
        Fail {
            msg: format!("{}: {e}", what.into()),
            errno: e.raw_os_error(),
            unsupported: false,
        }
    }

    pub(super) fn bpf(e: &BpfError, hint: &str) -> Fail {
        let errno = e.errno();
        let unsupported = matches!(
            errno,
            Some(libc::EPERM | libc::ENOSYS | libc::EOPNOTSUPP | libc::EACCES)
        );
        Fail {
            msg: format!("{e}{hint}"),
            errno,
            unsupported,
        }
    }
}

pub(super) const FALLBACK_HINT: &str = "; use xdp_mode=generic, or a port of type=afpacket";
pub(super) const AFPACKET_HINT: &str = "; use a port of type=afpacket";
