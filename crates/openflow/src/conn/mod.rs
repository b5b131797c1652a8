//! OpenFlow connections: the transport and liveness layer that `ovs-vswitchd`'s `vconn`,
//! `rconn`, `pvconn` and connection manager provide, as a library the switch runs on its own
//! control-plane thread, never on a packet-processing one.
//!
//! - [`target`]: `tcp:`, `unix:`, `ptcp:`, `punix:` targets in OVS's syntax, confined to the
//!   run directory, and every bridge's `.mgmt` and `.snoop` listeners;
//! - [`socket`]: non-blocking streams and listeners.

pub mod socket;
pub mod target;

pub use socket::PUNIX_MODE;
pub use target::{OFP_PORT, Target, TargetError, bridge_targets};
