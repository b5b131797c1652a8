//! Port mirroring: a bridge's mirrors (OVS's `Mirror` table, `ofproto-dpif-mirror.c`), what
//! each selects and where its copies go, and the packets and bytes each has sent.
//!
//! A mirror selects the packets that arrive on its source ports, those that leave by its
//! destination ports (or every port, `select_all`), optionally only in some VLANs, and sends
//! a copy to its output port, or floods it in its output VLAN (RSPAN). An output port is
//! reserved for mirroring: what arrives on it is dropped and NORMAL never forwards to it.
//! Translation makes the copies ([`crate::xlate`]'s `mirror` module); the revalidator credits
//! each mirror with the packets of the megaflows that copied through it.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Most mirrors a bridge has (OVS's `MAX_MIRRORS`): translation tracks them in a bitmap.
pub const MAX_MIRRORS: usize = 32;

/// What a mirror is configured to do. Ports are named (their interfaces' names).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MirrorConfig {
    pub name: String,
    /// Every port is a source and a destination.
    pub select_all: bool,
    /// Packets received on these ports are mirrored.
    pub select_src: BTreeSet<String>,
    /// Packets sent by these ports are mirrored.
    pub select_dst: BTreeSet<String>,
    /// Only packets in these VLANs (empty: all).
    pub select_vlan: BTreeSet<u16>,
    /// The port copies go to.
    pub output_port: Option<String>,
    /// The VLAN copies are flooded in, when there is no output port.
    pub output_vlan: Option<u16>,
    /// Bytes of each copy kept (OVS's `snaplen`, 14 to 65535); 0 keeps the whole packet, as
    /// does 65535.
    pub snaplen: u16,
}

/// A mirror of a bridge: its configuration and counters.
#[derive(Debug, Default)]
pub struct Mirror {
    pub config: MirrorConfig,
    tx_packets: AtomicU64,
    tx_bytes: AtomicU64,
}

impl Mirror {
    /// A mirror configured as `config`, its counters starting from `counters`.
    pub fn new(config: MirrorConfig, counters: (u64, u64)) -> Mirror {
        Mirror {
            config,
            tx_packets: AtomicU64::new(counters.0),
            tx_bytes: AtomicU64::new(counters.1),
        }
    }

    /// Whether packets received on port `name` are mirrored.
    pub fn selects_src(&self, name: &str) -> bool {
        self.config.select_all || self.config.select_src.contains(name)
    }

    /// Whether packets sent by port `name` are mirrored.
    pub fn selects_dst(&self, name: &str) -> bool {
        self.config.select_all || self.config.select_dst.contains(name)
    }

    /// Whether `other` sends its copies where this one does (one copy serves both).
    pub fn same_output(&self, other: &Mirror) -> bool {
        (self.config.output_port.is_some() || self.config.output_vlan.is_some())
            && self.config.output_port == other.config.output_port
            && self.config.output_vlan == other.config.output_vlan
    }

    /// Whether port `name` is this mirror's output (reserved for it).
    pub fn outputs_to(&self, name: &str) -> bool {
        self.config.output_port.as_deref() == Some(name)
    }

    /// Counts `packets` packets of `bytes` bytes sent.
    pub fn credit(&self, packets: u64, bytes: u64) {
        self.tx_packets.fetch_add(packets, Relaxed);
        self.tx_bytes.fetch_add(bytes, Relaxed);
    }

    /// Packets and bytes sent so far.
    pub fn counters(&self) -> (u64, u64) {
        (self.tx_packets.load(Relaxed), self.tx_bytes.load(Relaxed))
    }
}

/// The mirrors `configs` describe, keeping the counters of those that were already there
/// under the same name (OVS keeps a reconfigured mirror's statistics). At most
/// [`MAX_MIRRORS`]; the rest are returned by name.
pub fn reconfigure(
    old: &[std::sync::Arc<Mirror>],
    configs: Vec<MirrorConfig>,
) -> (Vec<std::sync::Arc<Mirror>>, Vec<String>) {
    let mut out = Vec::new();
    let mut refused = Vec::new();
    for c in configs {
        if out.len() == MAX_MIRRORS {
            refused.push(c.name);
            continue;
        }
        let counters = old
            .iter()
            .find(|m| m.config.name == c.name)
            .map_or((0, 0), |m| m.counters());
        out.push(std::sync::Arc::new(Mirror::new(c, counters)));
    }
    (out, refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(name: &str, out: &str) -> MirrorConfig {
        MirrorConfig {
            name: name.into(),
            select_dst: ["p2".to_owned()].into(),
            output_port: Some(out.into()),
            ..MirrorConfig::default()
        }
    }

    #[test]
    fn a_reconfigured_mirror_keeps_its_counters_and_the_33rd_is_refused() {
        let (old, _) = reconfigure(&[], vec![cfg("m0", "p4")]);
        old[0].credit(3, 300);
        let mut many = vec![cfg("m0", "p3")];
        many.extend((1..=MAX_MIRRORS).map(|i| cfg(&format!("m{i}"), "p4")));
        let (new, refused) = reconfigure(&old, many);
        assert_eq!(new.len(), MAX_MIRRORS);
        assert_eq!(new[0].counters(), (3, 300));
        assert_eq!(new[1].counters(), (0, 0));
        assert_eq!(refused, vec![format!("m{MAX_MIRRORS}")]);
        assert!(new[0].selects_dst("p2") && !new[0].selects_src("p2"));
        assert!(new[1].same_output(&new[2]) && !new[0].same_output(&new[1]));
    }
}
