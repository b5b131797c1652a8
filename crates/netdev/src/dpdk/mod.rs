//! DPDK ethdev ports (`type = "dpdk"`, cargo feature `dpdk`): any device DPDK drives, a NIC
//! by PCI address or a virtual device (`net_pcap`, `net_tap`, `net_af_packet`, `net_memif`,
//! `net_ring`...), named by OVS's `dpdk-devargs`.
//!
//! [`eal`] starts DPDK's environment once per process from OVS's `dpdk-*` settings;
//! [`ethdev`] is the port: devargs lookup or hot plug, RSS over `n_rxq` rx queues, a tx queue
//! per PMD thread (shared behind a lock when the device has fewer), link state, device
//! counters and xstats. The bindings are the in-tree `dpdk-sys` crate, a C shim over DPDK's
//! inline fast path.
//!
//! A frame received on a DPDK port crosses the datapath in its mbuf, which is laid out as the
//! switch's own packet buffers are ([`mbuf`]), and leaves by another DPDK port in the same
//! mbuf: zero copy. Frames from other kinds of ports are copied into a fresh mbuf on the way
//! out.

pub mod eal;
pub mod ethdev;
mod mbuf;

use std::ffi::CStr;

pub use eal::{DpdkInit, Eal, EalOptions};
pub use ethdev::{DpdkPort, DpdkPortOptions};

/// What can go wrong starting DPDK or one of its ports.
#[derive(Debug, thiserror::Error)]
pub enum DpdkError {
    /// The environment (EAL) did not start.
    #[error("DPDK initialization failed: {0}")]
    Init(String),
    /// A DPDK port was asked for while DPDK is not running.
    #[error(
        "DPDK is not initialized: set dpdk-init=true (Address family not supported by protocol)"
    )]
    NotInitialized,
    /// A setting has a value that cannot be used.
    #[error("{key}: {why}")]
    Setting {
        /// The setting's name (`n_rxq`, `dpdk-socket-mem`).
        key: &'static str,
        /// Why the value is refused.
        why: String,
    },
    /// `dpdk-devargs` named nothing DPDK can attach.
    #[error("Error attaching device '{devargs}' to DPDK: {cause}")]
    Devargs {
        /// The devargs as given.
        devargs: String,
        /// DPDK's reason.
        cause: String,
    },
    /// Another port already drives the device `dpdk-devargs` names.
    #[error("'{name}' is trying to use device '{devargs}' which is already in use by '{by}'")]
    InUse {
        /// The port being opened.
        name: String,
        /// Its devargs.
        devargs: String,
        /// The port that has the device.
        by: String,
    },
    /// A DPDK call failed while the port was set up.
    #[error("{call}: {cause}")]
    Call {
        /// The DPDK function that failed.
        call: String,
        /// DPDK's reason.
        cause: String,
    },
}

/// DPDK's text for error number `err` (positive or negative).
pub(crate) fn strerror(err: i32) -> String {
    // SAFETY: rte_strerror returns a pointer to a static or thread-local NUL-terminated string
    // that stays valid until the next call on this thread; it is copied at once.
    unsafe { CStr::from_ptr(dpdk_sys::fp_strerror(err.abs())) }
        .to_string_lossy()
        .into_owned()
}
