//! Options of a `vhostuser` / `vhostuserclient` port (OVS's names: `vhost-server-path`,
//! `n_rxq`, `mtu_request`, `mac`, `csum_offload`, `tso`; flowpath's `gro`), and the virtio and vhost-user
//! features they make the port offer.

use std::path::PathBuf;

use vhost::vhost_user::message::VhostUserProtocolFeatures;
use wire::EthernetAddress;

use super::features::*;
use crate::afpacket::{PortError, flag, unknown_option};

/// Options of a `vhostuser` / `vhostuserclient` port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VhostOptions {
    /// The socket (`vhost-server-path`): created by a `vhostuser` port (default
    /// `$TMPDIR/flowpath/PORT`), connected to by a `vhostuserclient` one (required).
    pub path: Option<PathBuf>,
    /// Connect to the socket rather than listen on it (`vhostuserclient`).
    pub client: bool,
    /// Queue pairs offered (`n_rxq`, default 1): the port has this many rx queues.
    pub queues: usize,
    /// MTU told to the guest (`mtu_request`), with `VIRTIO_NET_F_MTU`.
    pub mtu: Option<u16>,
    /// MAC address told to the guest (`mac`), with `VIRTIO_NET_F_MAC`.
    pub mac: Option<[u8; 6]>,
    /// Offer `CSUM` (`csum_offload`, default true): the guest may send partial checksums,
    /// which rx completes.
    pub csum_offload: bool,
    /// Offer `HOST_TSO4/6` and `HOST_ECN` (`tso`, default true, only with `csum_offload`): the
    /// guest may send TCP super-frames; and `GUEST_CSUM`, `GUEST_TSO4/6` and `GUEST_ECN`: the
    /// switch hands the guest TCP super-frames whole where it takes them.
    pub tso: bool,
    /// Generic receive offload toward the guest (`gro`, default true, with `tso`): each TCP
    /// connection's segments that continue each other in a transmit burst are merged into
    /// super-frames ([`datapath::gro`]) when the guest takes super-frames.
    pub gro: bool,
}

impl Default for VhostOptions {
    fn default() -> Self {
        VhostOptions {
            path: None,
            client: false,
            queues: 1,
            mtu: None,
            mac: None,
            csum_offload: true,
            tso: true,
            gro: true,
        }
    }
}

impl VhostOptions {
    /// Option names [`VhostOptions::set`] takes.
    pub const KEYS: &'static [&'static str] = &[
        "vhost-server-path",
        "n_rxq",
        "mtu_request",
        "mac",
        "csum_offload",
        "tso",
        "gro",
    ];

    /// Options for port type `kind` (`vhostuser` or `vhostuserclient`).
    pub fn for_kind(kind: &str) -> Result<VhostOptions, PortError> {
        let client = match kind {
            "vhostuser" => false,
            "vhostuserclient" => true,
            _ => {
                return Err(PortError::BadOption(format!(
                    "'{kind}' is not a vhost type"
                )));
            }
        };
        Ok(VhostOptions {
            client,
            ..VhostOptions::default()
        })
    }

    /// Sets option `key` from its text form.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), PortError> {
        let bad = |what: &str| PortError::BadOption(format!("{key}: '{value}' {what}"));
        match key {
            "vhost-server-path" => {
                if value.is_empty() {
                    return Err(bad("is empty"));
                }
                self.path = Some(PathBuf::from(value));
            }
            "n_rxq" => self.queues = value.trim().parse().map_err(|_| bad("is not a number"))?,
            "mtu_request" => {
                self.mtu = Some(value.trim().parse().map_err(|_| bad("is not a number"))?)
            }
            "mac" => self.mac = Some(mac_option(value).ok_or_else(|| bad("is not a MAC address"))?),
            "csum_offload" => self.csum_offload = flag(key, value)?,
            "tso" => self.tso = flag(key, value)?,
            "gro" => self.gro = flag(key, value)?,
            _ => return Err(unknown_option(key, self.kind(), Self::KEYS)),
        }
        Ok(())
    }

    /// Checks the values without opening anything.
    pub fn check(&self) -> Result<(), PortError> {
        if !(1..=16).contains(&self.queues) {
            return Err(PortError::BadOption(format!(
                "n_rxq: {} is not between 1 and 16",
                self.queues
            )));
        }
        if let Some(m) = self.mtu
            && !(68..=9702).contains(&m)
        {
            return Err(PortError::BadOption(format!(
                "mtu_request: {m} is not between 68 and 9702"
            )));
        }
        if self.client && self.path.is_none() {
            return Err(PortError::BadOption(
                "type vhostuserclient needs option vhost-server-path (the socket the VM or \
                 application serves)"
                    .into(),
            ));
        }
        Ok(())
    }

    pub(super) fn kind(&self) -> &'static str {
        if self.client {
            "vhostuserclient"
        } else {
            "vhostuser"
        }
    }

    /// The socket path for port `name`.
    pub fn socket(&self, name: &str) -> PathBuf {
        self.path
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("flowpath").join(name))
    }

    /// The virtio features offered.
    pub(super) fn features(&self) -> u64 {
        // `IN_ORDER`: both directions use chains in the order they were made available (a
        // frame that does not fit gives its chains back unused), which DPDK's vhost library
        // offers too; a DPDK guest then takes its cheaper in-order paths.
        let mut f = F_VERSION_1
            | F_MRG_RXBUF
            | F_CTRL_VQ
            | F_MQ
            | F_INDIRECT_DESC
            | F_IN_ORDER
            | F_PROTOCOL_FEATURES;
        if self.csum_offload {
            f |= F_CSUM;
            if self.tso {
                f |= F_HOST_TSO4 | F_HOST_TSO6 | F_HOST_ECN | F_HOST_USO | F_HOST_UFO;
                f |= F_GUEST_CSUM | F_GUEST_TSO4 | F_GUEST_TSO6 | F_GUEST_ECN;
                f |= F_GUEST_USO4 | F_GUEST_USO6 | F_GUEST_UFO;
            }
        }
        if self.mac.is_some() {
            f |= F_MAC;
        }
        if self.mtu.is_some() {
            f |= F_MTU;
        }
        if self.mac.is_some() || self.mtu.is_some() {
            f |= F_STATUS;
        }
        f
    }

    pub(super) fn protocol_features(&self) -> VhostUserProtocolFeatures {
        let mut p = VhostUserProtocolFeatures::MQ | VhostUserProtocolFeatures::REPLY_ACK;
        if self.mac.is_some() || self.mtu.is_some() {
            p |= VhostUserProtocolFeatures::CONFIG;
        }
        p
    }
}

/// The value of option `mac` (of either end of vhost-user): a MAC address as
/// [`EthernetAddress`] reads it, white space around it ignored.
pub(crate) fn mac_option(value: &str) -> Option<[u8; 6]> {
    value.trim().parse::<EthernetAddress>().ok().map(|a| a.0)
}
