//! Packet templates and the frames of a stream.
//!
//! A [`Template`] is a stack of headers ([`Layer`]s, outermost first) and a payload. It comes
//! from a description (a stream file's `layers`), or from a frame's bytes (`hex`, a capture's
//! first packet) through [`Template::dissect`], which reads the headers it knows into the same
//! model and keeps the rest as opaque payload. A [`FrameSpec`] adds what makes a stream of it:
//! frame sizes, the number of flows and the fields that vary per flow, whether frames carry a
//! [stamp](crate::stamp); [`FrameSpec::compile`] turns it into a [`FrameSet`], whose
//! [`FrameSet::write`] produces the stream's packets one by one.
//!
//! # Conventions
//!
//! * **Frame size** counts the whole outer frame as on the wire, the 4-byte FCS included (as in
//!   RFC 2544): a `frame_size` of 64 is 60 bytes in a buffer. The innermost payload is
//!   zero-padded (or a template's payload cut) to make it so; every length field follows.
//!   Sizes are 64..=9000, a list cycled through, or the simple IMIX [`IMIX_CYCLE`].
//! * **The stamp** is the last 16 bytes of the frame, the tail of the innermost payload. The
//!   headers, the stamp and the FCS must fit the frame size (without the stamp when a stream
//!   sends unstamped frames).
//! * **Derived fields** are derived as scapy does: EtherTypes, IP protocols, GRE and GENEVE
//!   protocol types from the next layer; UDP ports 4789 (both) before VXLAN and destination
//!   6081 before GENEVE when not given; MPLS bottom of stack on the last entry of a stack;
//!   every length and checksum. Fields left out take scapy's defaults (IPv4 id 1, TTL 64;
//!   UDP ports 53; TCP ports 20 → 80, flags S, window 8192; IPv6 hop limit 64; Dot1Q VID 1;
//!   MPLS label 3, TTL 0), except where scapy asks the host (Ethernet addresses:
//!   00:00:00:00:00:00 → ff:ff:ff:ff:ff:ff; IP addresses: 127.0.0.1 and ::1 both ways) and the
//!   GENEVE protocol type with nothing after it (0x6558, where scapy writes 0). VXLAN is RFC
//!   7348's (flags 0x08, as scapy's `VXLAN(flags=0x08)`).
//! * **Flow `i`** (0-based) gets, for each varied field, `inc`: `from + (i × step) mod (to -
//!   from + 1)`; `random`: a value in `[from, to]` drawn from a hash of the seed, the field's
//!   name and `i`, the same on every run. Packet `k` of the stream is flow `k mod flows` with
//!   the `k mod n`-th of the `n` frame sizes of the cycle.
//! * Every IPv4 header, UDP (unless disabled), TCP and GRE (when present) checksum is correct
//!   in every frame, stamp included. Checksums inside an opaque payload are not maintained.
//!
//! # Speed
//!
//! When the frames of a whole period (see [`FrameSet::period`]) fit [`PRECOMPUTE_LIMIT`] they
//! are built once, with a zero stamp; [`FrameSet::write`] is then a copy and the stamp, which
//! sums to a ones'-complement zero ([`crate::stamp`]) and so changes no checksum. Otherwise
//! `write` patches the varied fields into a per-size frame and updates the checksums that
//! cover them, incrementally (RFC 1624).
//!
//! # Parts
//!
//! * `layer`: the header types, [`Layer`] and [`LayerKind`], and what a layer derives from
//!   the next;
//! * `template`: [`Template`], checked and emitted as a frame of any size;
//! * `dissect`: a frame's bytes read back into a template ([`Template::dissect`]);
//! * `vary`: the fields that vary per flow ([`FieldKind`], [`FieldRef`], [`Vary`]) and the
//!   value each flow gives them;
//! * `checksum`: where a frame's checksums are, and their incremental update;
//! * `frame_set`: [`FrameSpec`] compiled into a [`FrameSet`], precomputed or patched, and the
//!   send loop's `write` and `write_burst`;
//! * `fast_mod`: the division-free remainder that indexes flows and frames.
//!
//! This module holds what they share: the limits, [`BuildError`], and the text forms of hex
//! bytes and MAC addresses.

use wire::EthernetAddress;

mod checksum;
mod dissect;
mod fast_mod;
#[cfg(test)]
mod fixtures;
mod frame_set;
mod layer;
mod template;
mod vary;

pub use frame_set::{FrameSet, FrameSize, FrameSpec};
pub use layer::{Eth, Geneve, Gre, Ipv4, Ipv6, Layer, LayerKind, Mpls, Tcp, Udp, Vlan, Vxlan};
pub use template::Template;
pub use vary::{FieldKind, FieldRef, Vary, VaryOp};

/// The Ethernet FCS: counted in frame sizes, absent from buffers.
pub const FCS_LEN: usize = 4;
/// Smallest frame size (FCS included).
pub const MIN_FRAME_SIZE: usize = 64;
/// Largest frame size (FCS included).
pub const MAX_FRAME_SIZE: usize = 9000;
/// The simple IMIX (7 × 64, 4 × 594, 1 × 1518 bytes), in the order its 12 packets are sent:
/// the large frames spread out rather than in bursts.
pub const IMIX_CYCLE: [usize; 12] = [64, 594, 64, 64, 594, 64, 1518, 64, 594, 64, 64, 594];
/// Frames of a period are precomputed when they (with their index) take at most this many bytes.
pub const PRECOMPUTE_LIMIT: usize = 64 << 20;
/// Most flows a stream can have.
pub const MAX_FLOWS: u64 = 1 << 32;
/// Most entries in a list of frame sizes.
pub const MAX_SIZES: usize = 4096;
/// The seed of `random` variation when none is given.
pub const DEFAULT_SEED: u64 = 1;

/// Why a template, frame sizes or variation cannot make frames.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The frame bytes (hex, capture) are not a usable template.
    #[error("{0}")]
    Template(String),
    /// Layer `index` (0-based) has a bad `key`.
    #[error("layer {index} ({kind}): {message}")]
    Layer {
        /// Position of the layer.
        index: usize,
        /// Its kind.
        kind: LayerKind,
        /// The offending field (`type` when the layer cannot be where it is).
        key: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A frame size does not fit the headers.
    #[error(
        "frame_size {size} is too small for these headers: {headers} bytes{} + 4 FCS",
        if *.stamp { " + 16-byte stamp" } else { "" }
    )]
    TooSmall {
        /// The frame size.
        size: usize,
        /// Bytes of headers.
        headers: usize,
        /// Whether a stamp had to fit.
        stamp: bool,
    },
    /// Frame sizes out of range or an empty or too long list.
    #[error("{0}")]
    Sizes(String),
    /// `flows` is 0 or above [`MAX_FLOWS`].
    #[error("flows must be 1 to {MAX_FLOWS}, not {0}")]
    Flows(u64),
    /// Variation `index` (0-based) has a bad `key`.
    #[error("vary {index} ({field}): {message}")]
    Vary {
        /// Position in the variation list.
        index: usize,
        /// The field it names.
        field: String,
        /// The offending key: `field`, `from`, `to` or `step`.
        key: &'static str,
        /// What is wrong.
        message: String,
    },
}

/// Hex digits to bytes; spaces, colons and newlines between byte pairs are ignored.
pub fn parse_hex(s: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = s
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b':')
        .collect();
    if !digits.len().is_multiple_of(2) {
        return Err(format!(
            "{} hex digits: expected an even number",
            digits.len()
        ));
    }
    digits
        .chunks_exact(2)
        .map(|p| {
            let hi = (p[0] as char).to_digit(16);
            let lo = (p[1] as char).to_digit(16);
            match (hi, lo) {
                (Some(h), Some(l)) => Ok((h * 16 + l) as u8),
                _ => Err(format!(
                    "'{}{}' is not a hex byte",
                    p[0] as char, p[1] as char
                )),
            }
        })
        .collect()
}

/// Reads a MAC address (`xx:xx:xx:xx:xx:xx`, also with `-`; as [`EthernetAddress`] reads it).
pub fn parse_mac_addr(s: &str) -> Result<EthernetAddress, String> {
    let s = s.trim();
    s.parse()
        .map_err(|_| format!("'{s}' is not a MAC address (xx:xx:xx:xx:xx:xx)"))
}
