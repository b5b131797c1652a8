//! Options of a `virtio_user` port, by the names of DPDK's `net_virtio_user` devargs (`path`,
//! `server`, `queues`, `queue_size`, `mac`): set from their text and checked before anything is
//! opened.

use std::path::PathBuf;

use crate::afpacket::{PortError, flag, unknown_option};
use crate::vhost::mac_option;

/// Ring size when not configured: DPDK's `virtio_user` default.
pub const DEFAULT_QUEUE_SIZE: u16 = 256;
/// Largest ring (the virtio maximum for a split ring).
pub const MAX_QUEUE_SIZE: u16 = 32768;
/// Most queue pairs: vring indexes travel in 8 bits of `SET_VRING_KICK` / `_CALL`.
pub const MAX_QUEUES: usize = 128;

/// Options of a `virtio_user` port (DPDK's `net_virtio_user` devargs by the same names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VirtioUserOptions {
    /// The vhost-user socket (`path`): the back-end's to connect to, or ours to listen on
    /// with `server`.
    pub path: PathBuf,
    /// Listen on `path` and accept the back-end (`server`), rather than connect to it.
    pub server: bool,
    /// Queue pairs (`queues`, default 1): the port has this many rx queues. Fewer are used
    /// when the back-end offers fewer.
    pub queues: usize,
    /// Descriptors per ring (`queue_size`, default [`DEFAULT_QUEUE_SIZE`]): a power of two.
    pub queue_size: u16,
    /// The port's MAC address (`mac`), for whoever builds frames for it; the device is not
    /// told (the switch does not filter).
    pub mac: Option<[u8; 6]>,
}

impl Default for VirtioUserOptions {
    fn default() -> Self {
        VirtioUserOptions {
            path: PathBuf::new(),
            server: false,
            queues: 1,
            queue_size: DEFAULT_QUEUE_SIZE,
            mac: None,
        }
    }
}

impl VirtioUserOptions {
    /// Option names [`VirtioUserOptions::set`] takes.
    pub const KEYS: &'static [&'static str] = &["path", "server", "queues", "queue_size", "mac"];

    /// Defaults, with the socket at `path`.
    pub fn new(path: impl Into<PathBuf>) -> VirtioUserOptions {
        VirtioUserOptions {
            path: path.into(),
            ..VirtioUserOptions::default()
        }
    }

    /// Sets option `key` from its text form.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), PortError> {
        let bad = |what: &str| PortError::BadOption(format!("{key}: '{value}' {what}"));
        match key {
            "path" => {
                if value.is_empty() {
                    return Err(bad("is empty"));
                }
                self.path = PathBuf::from(value);
            }
            "server" => self.server = flag(key, value)?,
            "queues" => self.queues = value.trim().parse().map_err(|_| bad("is not a number"))?,
            "queue_size" => {
                self.queue_size = value.trim().parse().map_err(|_| bad("is not a number"))?
            }
            "mac" => self.mac = Some(mac_option(value).ok_or_else(|| bad("is not a MAC address"))?),
            _ => return Err(unknown_option(key, "virtio_user", Self::KEYS)),
        }
        Ok(())
    }

    /// Checks the values without opening anything.
    pub fn check(&self) -> Result<(), PortError> {
        if self.path.as_os_str().is_empty() {
            return Err(PortError::BadOption(
                "type virtio_user needs option path (the vhost-user socket)".into(),
            ));
        }
        if !(1..=MAX_QUEUES).contains(&self.queues) {
            return Err(PortError::BadOption(format!(
                "queues: {} is not between 1 and {MAX_QUEUES}",
                self.queues
            )));
        }
        if !self.queue_size.is_power_of_two() || !(2..=MAX_QUEUE_SIZE).contains(&self.queue_size) {
            return Err(PortError::BadOption(format!(
                "queue_size: {} is not a power of two between 2 and {MAX_QUEUE_SIZE}",
                self.queue_size
            )));
        }
        Ok(())
    }
}
