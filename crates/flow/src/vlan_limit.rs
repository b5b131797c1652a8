//! How many VLAN headers flow extraction parses (OVS's `other_config:vlan-limit`, its
//! `flow_vlan_limit`): one process-wide setting, as in OVS. Further tags are payload: the
//! frame's ethertype is the first TPID not parsed, and its L3 is not looked at.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The most VLAN headers a key holds.
pub const MAX_VLAN_HEADERS: usize = 2;

static LIMIT: AtomicUsize = AtomicUsize::new(MAX_VLAN_HEADERS);

/// Sets the limit as OVS reads `vlan-limit`: 0 (or less) means as many as the key holds,
/// anything else is capped at that.
pub fn set_vlan_limit(limit: i64) {
    let n = match usize::try_from(limit) {
        Ok(0) | Err(_) => MAX_VLAN_HEADERS,
        Ok(n) => n.min(MAX_VLAN_HEADERS),
    };
    LIMIT.store(n, Ordering::Relaxed);
}

/// How many VLAN headers extraction parses now (1 or 2).
#[inline]
pub fn vlan_limit() -> usize {
    LIMIT.load(Ordering::Relaxed)
}
