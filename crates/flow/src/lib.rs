//! The flow layer: the datapath's flow key, masks and matches, extraction of a key from a
//! packet in one pass, the datapath hash, and OVS's datapath flow text format.
// `deny`, not `forbid`: the hash module allows two fenced intrinsic calls (CRC32C, prefetch).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod compose;
pub mod extract;
pub mod hash;
pub mod hex;
pub mod key;
pub mod odp;
pub mod vlan_limit;

pub use compose::{compose, compose_sized};
pub use extract::{
    Extracted, Layers, Malformed, extract, extract_simple, extract_unhashed, ipv4_fast_words,
    simple_fields,
};
pub use key::{EthAddr, FlowKey, FlowWords, Mask, Match};
