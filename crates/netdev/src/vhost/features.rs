//! The virtio-net feature bits (virtio 1.x §5.1.3, §6) that the two ends of vhost-user
//! negotiate, and their names as `dpif/show` and a port's `options()` print them.

use std::fmt::Write as _;

// Feature bits (virtio 1.x §5.1.3, §6; vhost-user's own bit 30).
pub(crate) const F_CSUM: u64 = 1 << 0;
pub(crate) const F_GUEST_CSUM: u64 = 1 << 1;
pub(crate) const F_MTU: u64 = 1 << 3;
pub(crate) const F_MAC: u64 = 1 << 5;
pub(crate) const F_GUEST_TSO4: u64 = 1 << 7;
pub(crate) const F_GUEST_TSO6: u64 = 1 << 8;
pub(crate) const F_GUEST_ECN: u64 = 1 << 9;
pub(crate) const F_GUEST_UFO: u64 = 1 << 10;
pub(crate) const F_HOST_TSO4: u64 = 1 << 11;
pub(crate) const F_HOST_TSO6: u64 = 1 << 12;
pub(crate) const F_HOST_ECN: u64 = 1 << 13;
pub(crate) const F_HOST_UFO: u64 = 1 << 14;
pub(crate) const F_MRG_RXBUF: u64 = 1 << 15;
pub(crate) const F_STATUS: u64 = 1 << 16;
pub(crate) const F_CTRL_VQ: u64 = 1 << 17;
pub(crate) const F_MQ: u64 = 1 << 22;
pub(crate) const F_INDIRECT_DESC: u64 = 1 << 28;
pub(crate) const F_PROTOCOL_FEATURES: u64 = 1 << 30;
pub(crate) const F_VERSION_1: u64 = 1 << 32;
pub(crate) const F_IN_ORDER: u64 = 1 << 35;
pub(crate) const F_GUEST_USO4: u64 = 1 << 54;
pub(crate) const F_GUEST_USO6: u64 = 1 << 55;
pub(crate) const F_HOST_USO: u64 = 1 << 56;

/// Names of the feature bits `dpif/show` and a `virtio_user` port's `options()` print.
const FEATURE_NAMES: &[(u64, &str)] = &[
    (F_CSUM, "CSUM"),
    (F_GUEST_CSUM, "GUEST_CSUM"),
    (F_MTU, "MTU"),
    (F_MAC, "MAC"),
    (F_GUEST_TSO4, "GUEST_TSO4"),
    (F_GUEST_TSO6, "GUEST_TSO6"),
    (F_GUEST_ECN, "GUEST_ECN"),
    (F_GUEST_UFO, "GUEST_UFO"),
    (F_HOST_TSO4, "HOST_TSO4"),
    (F_HOST_TSO6, "HOST_TSO6"),
    (F_HOST_ECN, "HOST_ECN"),
    (F_HOST_UFO, "HOST_UFO"),
    (F_MRG_RXBUF, "MRG_RXBUF"),
    (F_STATUS, "STATUS"),
    (F_CTRL_VQ, "CTRL_VQ"),
    (F_MQ, "MQ"),
    (F_INDIRECT_DESC, "INDIRECT_DESC"),
    (F_PROTOCOL_FEATURES, "PROTOCOL_FEATURES"),
    (F_VERSION_1, "VERSION_1"),
    (F_IN_ORDER, "IN_ORDER"),
    (F_GUEST_USO4, "GUEST_USO4"),
    (F_GUEST_USO6, "GUEST_USO6"),
    (F_HOST_USO, "HOST_USO"),
];

/// The text form of the feature bits in `f`.
pub(crate) fn feature_names(f: u64) -> String {
    let mut s = String::new();
    for &(bit, name) in FEATURE_NAMES {
        if f & bit != 0 {
            if !s.is_empty() {
                s.push('|');
            }
            s.push_str(name);
        }
    }
    let rest = FEATURE_NAMES.iter().fold(f, |r, (bit, _)| r & !bit);
    if rest != 0 {
        let _ = write!(s, "{}{rest:#x}", if s.is_empty() { "" } else { "|" });
    }
    s
}
