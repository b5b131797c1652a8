//! OpenFlow on the wire: the messages of OpenFlow 1.0 to 1.5 with the Nicira (NX) and ONF
//! extensions that Open vSwitch speaks, as bytes.
//!
//! - [`header`]: the 8-byte header every message starts with, protocol versions and the
//!   framing of a byte stream into messages;
//! - [`hello`]: version negotiation (the hello message and its version bitmap element);
//! - [`conn`]: connections: listeners, controllers, negotiation, liveness and the event loop;
//! - [`error`]: every error OVS knows, by name, and the `OFPT_ERROR` messages that carry them;
//! - [`msgtype`]: every message type OVS knows, from and to its headers, and multipart framing;
//! - [`msgs`]: the messages other than flows, packets and groups (switch, ports, statistics,
//!   configuration, roles, meters, TLV maps, bundles);
//! - [`nxm`]: NXM and OXM field headers, and matches encoded as `nx_match` and OXM;
//! - [`match10`]: OpenFlow 1.0's fixed match, and whether a match fits it;
//! - [`match11`]: OpenFlow 1.1's fixed match, likewise;
//! - [`actions`]: actions and instructions of every version, Nicira's extensions included;
//! - [`flow_mod`]: flow_mod messages of every version, Nicira's NXM form included;
//! - [`flow_stats`]: flow and aggregate statistics requests and replies;
//! - [`flow_removed`]: the notification of a flow's removal.
//!
//! The codec maps the wire forms onto the OpenFlow layer's own model ([`ofproto`]'s matches,
//! actions and flows), so that a flow added over a connection and one added with the
//! `ovs-ofctl` syntax are the same thing.
#![forbid(unsafe_code)]

pub mod actions;
mod be;
pub mod conn;
pub mod error;
pub mod flow_mod;
pub mod flow_removed;
pub mod flow_stats;
pub mod header;
pub mod hello;
pub mod match10;
pub mod match11;
pub mod msgs;
pub mod msgtype;
pub mod nxm;
