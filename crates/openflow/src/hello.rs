//! Version negotiation: the hello message each side sends first, with its optional version
//! bitmap element (OpenFlow 1.3.1 §7.5.1, `OFPHET_VERSIONBITMAP`), and the choice of the
//! highest version both sides allow.
//!
//! As Open vSwitch does, a hello carries the highest allowed version in its header and a
//! bitmap only when the allowed set is not every version from 1.0 up to that one (a peer that
//! reads no bitmap takes the header's version and all before it); a peer's hello without a
//! bitmap allows every version up to its header's; of a bitmap only the first 32-bit word
//! counts (no version above 31 exists), and a bit for version 0 is ignored.

use std::fmt;

use crate::header::{self, OFPT_HELLO, Version};

/// `OFPHET_VERSIONBITMAP`, the hello element that lists versions.
const OFPHET_VERSIONBITMAP: u16 = 1;

/// A set of OpenFlow wire versions, bit `v` for version `v` (as the hello bitmap has them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct VersionSet(pub u32);

impl VersionSet {
    /// Every version this crate speaks: OpenFlow 1.0 to 1.5.
    pub const ALL: VersionSet = VersionSet(0b111_1110);

    /// The set of the given versions.
    pub fn of(versions: &[Version]) -> VersionSet {
        VersionSet(versions.iter().fold(0, |s, v| s | 1 << v.wire()))
    }

    /// Every version from 1 up to wire version `v`: what a hello without a bitmap allows.
    pub fn up_to(v: u8) -> VersionSet {
        VersionSet(((1u64 << (u32::from(v) + 1).min(32)) as u32).wrapping_sub(1) & !1)
    }

    /// The set with no version.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether wire version `v` is in the set.
    pub fn contains(self, v: u8) -> bool {
        v < 32 && self.0 & 1 << v != 0
    }

    /// The versions in both sets.
    pub fn and(self, other: VersionSet) -> VersionSet {
        VersionSet(self.0 & other.0)
    }

    /// The highest wire version in the set.
    pub fn highest(self) -> Option<u8> {
        (self.0 != 0).then(|| 31 - self.0.leading_zeros() as u8)
    }

    /// Whether the set is every version from 1.0 up to its highest (then a hello needs no
    /// bitmap).
    fn is_prefix(self) -> bool {
        ((self.0 >> 1) + 1).is_power_of_two()
    }
}

impl fmt::Display for VersionSet {
    /// As OVS's log lines and errors put it: `version 0x04`, `version 0x06 and earlier`,
    /// `versions 0x01, 0x04`, `no versions`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(top) = self.highest() else {
            return f.write_str("no versions");
        };
        if self.0.is_power_of_two() {
            return write!(f, "version 0x{top:02x}");
        }
        if self.is_prefix() {
            return write!(f, "version 0x{top:02x} and earlier");
        }
        f.write_str("versions ")?;
        let mut first = true;
        for v in (0..32u8).filter(|&v| self.contains(v)) {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(f, "0x{v:02x}")?;
        }
        Ok(())
    }
}

/// Appends a hello that offers `allowed` (not empty) to `out`.
pub fn encode(allowed: VersionSet, xid: u32, out: &mut Vec<u8>) {
    let top = allowed.highest().unwrap_or(Version::Of10.wire());
    let at = header::start(out, top, OFPT_HELLO, xid);
    if !allowed.is_prefix() {
        out.extend_from_slice(&OFPHET_VERSIONBITMAP.to_be_bytes());
        out.extend_from_slice(&8u16.to_be_bytes());
        out.extend_from_slice(&allowed.0.to_be_bytes());
    }
    // A hello is at most 16 bytes: it always fits.
    let _ = header::finish(out, at);
}

/// What a peer's hello (the whole message, header included) says it allows: the versions of
/// its bitmap, else every version up to its header's. `complete` is false when the hello held
/// something not understood (an unknown element, a malformed bitmap), which OVS only logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerHello {
    /// The versions the peer allows.
    pub versions: VersionSet,
    /// Whether every element of the hello was understood.
    pub complete: bool,
}

/// Decodes a peer's hello; a message too short for a header allows nothing.
pub fn decode(msg: &[u8]) -> PeerHello {
    let Some(h) = header::Header::parse(msg) else {
        return PeerHello {
            versions: VersionSet(0),
            complete: false,
        };
    };
    let end = usize::from(h.length).clamp(header::HEADER_LEN, msg.len().max(header::HEADER_LEN));
    let mut body = msg.get(header::HEADER_LEN..end).unwrap_or(&[]);
    let mut versions = VersionSet::up_to(h.version);
    let mut complete = true;
    while !body.is_empty() {
        let Some(e) = body.first_chunk::<4>() else {
            return PeerHello {
                versions,
                complete: false,
            };
        };
        let (kind, len) = (
            u16::from_be_bytes([e[0], e[1]]),
            usize::from(u16::from_be_bytes([e[2], e[3]])),
        );
        let padded = len.next_multiple_of(8);
        if len < 4 || body.len() < padded {
            return PeerHello {
                versions,
                complete: false,
            };
        }
        match (kind, bitmap(&body[4..len])) {
            (OFPHET_VERSIONBITMAP, Some(b)) => versions = b,
            _ => complete = false,
        }
        body = &body[padded..];
    }
    PeerHello { versions, complete }
}

/// A version bitmap element's versions: its first word without version 0, if that leaves any.
fn bitmap(words: &[u8]) -> Option<VersionSet> {
    if words.is_empty() || !words.len().is_multiple_of(4) {
        return None;
    }
    let first = u32::from_be_bytes([words[0], words[1], words[2], words[3]]) & !1;
    (first != 0).then_some(VersionSet(first))
}

/// The version a connection speaks: the highest both sides allow.
pub fn negotiate(ours: VersionSet, theirs: VersionSet) -> Result<Version, Incompatible> {
    ours.and(theirs)
        .highest()
        .and_then(Version::from_wire)
        .ok_or(Incompatible { ours, theirs })
}

/// No version in common. Its text is what OVS sends in the `OFPHFC_INCOMPATIBLE` error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("We support {ours}, you support {theirs}, no common versions.")]
pub struct Incompatible {
    /// The versions this side allows.
    pub ours: VersionSet,
    /// The versions the peer allows.
    pub theirs: VersionSet,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(allowed: VersionSet) -> Vec<u8> {
        let mut m = Vec::new();
        encode(allowed, 0x1234, &mut m);
        m
    }

    /// The bytes OVS 3.1 sends (`ovs-ofctl ofp-print` reads them back the same): no bitmap
    /// for 1.0-1.5, a bitmap for 1.5 alone (as `ovn-controller` offers) or for 1.0 and 1.3.
    #[test]
    fn hellos_carry_a_bitmap_only_when_the_versions_are_not_a_prefix() {
        assert_eq!(hello(VersionSet::ALL), [6, 0, 0, 8, 0, 0, 0x12, 0x34]);
        assert_eq!(
            hello(VersionSet::of(&[Version::Of15])),
            [6, 0, 0, 16, 0, 0, 0x12, 0x34, 0, 1, 0, 8, 0, 0, 0, 0x40]
        );
        assert_eq!(
            hello(VersionSet::of(&[Version::Of10, Version::Of13])),
            [4, 0, 0, 16, 0, 0, 0x12, 0x34, 0, 1, 0, 8, 0, 0, 0, 0x12]
        );
        assert_eq!(hello(VersionSet::of(&[Version::Of10])).len(), 8);
    }

    #[test]
    fn peers_allow_their_bitmap_or_every_version_up_to_their_header() {
        for set in [
            VersionSet::ALL,
            VersionSet::of(&[Version::Of15]),
            VersionSet::of(&[Version::Of10, Version::Of13]),
        ] {
            assert_eq!(
                decode(&hello(set)),
                PeerHello {
                    versions: set,
                    complete: true
                }
            );
        }
        // A later version's hello without a bitmap: everything up to it.
        let p = decode(&[9, 0, 0, 8, 0, 0, 0, 0]);
        assert_eq!(p.versions, VersionSet(0b11_1111_1110));
        // Version 0 in a bitmap is ignored; an unknown element is skipped but noted; a bitmap
        // of nothing is not understood and leaves the header's versions.
        let p = decode(&[4, 0, 0, 16, 0, 0, 0, 0, 0, 1, 0, 8, 0, 0, 0, 0x11]);
        assert_eq!(p.versions, VersionSet(0x10));
        let p = decode(&[4, 0, 0, 16, 0, 0, 0, 0, 0, 7, 0, 8, 0, 0, 0, 0x11]);
        assert_eq!((p.versions, p.complete), (VersionSet::up_to(4), false));
        let p = decode(&[4, 0, 0, 16, 0, 0, 0, 0, 0, 1, 0, 8, 0, 0, 0, 1]);
        assert_eq!((p.versions, p.complete), (VersionSet::up_to(4), false));
        // Truncated elements do not read past the message.
        let p = decode(&[4, 0, 0, 12, 0, 0, 0, 0, 0, 1, 0, 8]);
        assert!(!p.complete);
        assert_eq!(decode(&[1, 0]).versions, VersionSet(0));
    }

    #[test]
    fn negotiation_takes_the_highest_common_version_or_says_why_not() {
        let of = VersionSet::of;
        assert_eq!(
            negotiate(VersionSet::ALL, VersionSet::up_to(4)),
            Ok(Version::Of13)
        );
        assert_eq!(
            negotiate(of(&[Version::Of10, Version::Of13]), VersionSet::ALL),
            Ok(Version::Of13)
        );
        let e = negotiate(of(&[Version::Of10]), of(&[Version::Of15])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "We support version 0x01, you support version 0x06, no common versions."
        );
        assert_eq!(VersionSet::ALL.to_string(), "version 0x06 and earlier");
        assert_eq!(
            of(&[Version::Of10, Version::Of13, Version::Of14]).to_string(),
            "versions 0x01, 0x04, 0x05"
        );
        assert_eq!(VersionSet(0).to_string(), "no versions");
    }
}
