//! One OpenFlow connection's settings, as `ovs-vswitchd`'s `ofconn` keeps them: the bridge it
//! manages, its controller role, how many bytes of a packet it wants in a packet-in (and so
//! whether it wants asynchronous messages at all), which asynchronous messages it asked for,
//! and the Nicira flow and packet-in formats it chose.
//!
//! The service-connection rule (`ofconn_receives_async_msg()`): a connection accepted on a
//! listener (`ovs-ofctl`, `ovn-controller` on `BRIDGE.mgmt`) starts with `miss_send_len` 0
//! and is sent no asynchronous message until it sets a non-zero one; a connection to a
//! controller starts at 128 bytes. A set-async on a service connection without one gives it
//! 128 bytes too.

use openflow::conn::{ConnInfo, Role as ConnRole};
use openflow::header::Version;
use openflow::msgs::async_config::{AsyncConfig, AsyncMsg};
use openflow::msgs::nicira::{FlowFormat, PacketInFormat};
use openflow::msgs::role::Role;

/// `OFP_DEFAULT_MISS_SEND_LEN`: a controller connection's packet-in size.
const DEFAULT_MISS_SEND_LEN: u16 = 128;

/// `OFPR_ACTION`: a packet-in by an output to the controller.
const OFPR_ACTION: u32 = 1;
/// OpenFlow 1.4's refinements of `OFPR_ACTION`: `OFPR_ACTION_SET`, `OFPR_GROUP` and
/// `OFPR_PACKET_OUT`.
const OFPR14_ACTION_BITS: u32 = 1 << 3 | 1 << 4 | 1 << 5;

/// A connection's settings.
#[derive(Clone, Debug)]
pub(crate) struct OfConn {
    /// The bridge it manages.
    pub(crate) bridge: String,
    /// The version negotiated.
    pub(crate) version: Version,
    /// Service or primary (controller) connection.
    pub(crate) kind: ConnRole,
    /// Its controller role (equal until it asks for another).
    pub(crate) role: Role,
    /// Bytes of a packet sent in a packet-in; 0 on a service connection: no asynchronous
    /// messages.
    pub(crate) miss_send_len: u16,
    /// Whether packets with an invalid TTL go to it (OpenFlow 1.0 to 1.2's flag).
    pub(crate) invalid_ttl_to_controller: bool,
    /// The asynchronous messages it wants, by role.
    pub(crate) async_config: AsyncConfig,
    /// `NXT_SET_FLOW_FORMAT`'s choice (OpenFlow 1.0 only).
    pub(crate) flow_format: FlowFormat,
    /// `NXT_SET_PACKET_IN_FORMAT`'s choice.
    pub(crate) packet_in_format: PacketInFormat,
    /// `NXT_FLOW_MOD_TABLE_ID`: whether flow mods carry a table id in their command's high
    /// byte.
    pub(crate) flow_mod_table_id: bool,
    /// `NXT_SET_CONTROLLER_ID`'s id.
    pub(crate) controller_id: u16,
}

impl OfConn {
    /// A connection that just finished its hello exchange, on `bridge`.
    pub(crate) fn new(bridge: &str, info: &ConnInfo) -> OfConn {
        OfConn {
            bridge: bridge.to_owned(),
            version: info.version,
            kind: info.role,
            role: Role::Equal,
            miss_send_len: if info.role == ConnRole::Primary {
                DEFAULT_MISS_SEND_LEN
            } else {
                0
            },
            invalid_ttl_to_controller: false,
            async_config: AsyncConfig::ovs_default(info.version),
            flow_format: FlowFormat::OpenFlow10,
            packet_in_format: PacketInFormat::Standard,
            flow_mod_table_id: false,
            controller_id: 0,
        }
    }

    /// Whether an asynchronous message of type `oam` for `reason` (its bit number in the
    /// masks) goes to this connection (OVS's `ofconn_receives_async_msg()`).
    pub(crate) fn receives_async(&self, oam: AsyncMsg, reason: u32) -> bool {
        if self.kind == ConnRole::Service && self.miss_send_len == 0 {
            return false;
        }
        let masks = if self.role == Role::Secondary {
            &self.async_config.secondary
        } else {
            &self.async_config.primary
        };
        masks[oam as usize] & (1 << reason) != 0
    }

    /// Takes the asynchronous configuration a set-async asked for (OVS's
    /// `handle_nxt_set_async_config()`): a service connection that had not set a
    /// `miss_send_len` gets the default one, and so the messages it asked for.
    pub(crate) fn set_async_config(&mut self, config: AsyncConfig) {
        self.store_async_config(config);
        if self.kind == ConnRole::Service && self.miss_send_len == 0 {
            self.miss_send_len = DEFAULT_MISS_SEND_LEN;
        }
    }

    /// Keeps an asynchronous configuration as OVS's `ofconn_set_async_config()` does: before
    /// OpenFlow 1.4, which split `OFPR_ACTION` into finer reasons (action set, group,
    /// packet-out), asking for packet-ins "by action" asks for all of them.
    pub(crate) fn store_async_config(&mut self, mut config: AsyncConfig) {
        if self.version < Version::Of14 {
            for masks in [&mut config.primary, &mut config.secondary] {
                let m = &mut masks[AsyncMsg::PacketIn as usize];
                if *m & 1 << OFPR_ACTION != 0 {
                    *m |= OFPR14_ACTION_BITS;
                }
            }
        }
        self.async_config = config;
    }

    /// Whether it may change the switch (a secondary controller may not: OVS's
    /// `reject_secondary_controller()`).
    pub(crate) fn may_modify(&self) -> bool {
        !(self.kind == ConnRole::Primary && self.role == Role::Secondary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openflow::conn::ConnId;

    fn info(role: ConnRole) -> ConnInfo {
        ConnInfo {
            id: ConnId(1),
            version: Version::Of13,
            role,
            monitor_backlog: (0, 0),
        }
    }

    #[test]
    fn a_service_connection_gets_no_async_message_until_it_sets_miss_send_len() {
        let mut c = OfConn::new("br0", &info(ConnRole::Service));
        assert_eq!(c.miss_send_len, 0);
        assert!(!c.receives_async(AsyncMsg::PortStatus, 0));
        c.miss_send_len = 65535;
        assert!(c.receives_async(AsyncMsg::PortStatus, 0));
        let c = OfConn::new("br0", &info(ConnRole::Primary));
        assert_eq!(c.miss_send_len, 128);
        assert!(c.receives_async(AsyncMsg::PortStatus, 0));
    }

    #[test]
    fn a_set_async_turns_on_a_service_connection_s_async_messages() {
        let mut c = OfConn::new("br0", &info(ConnRole::Service));
        let mut a = AsyncConfig::default();
        a.primary[AsyncMsg::RequestForward as usize] = 1;
        c.set_async_config(a);
        assert_eq!(c.miss_send_len, 128);
        assert!(c.receives_async(AsyncMsg::RequestForward, 0));
        assert!(!c.receives_async(AsyncMsg::PortStatus, 0));
        // Before OpenFlow 1.4, "by action" means every finer reason of 1.4 (packet-out: 5).
        let mut a = AsyncConfig::default();
        a.primary[AsyncMsg::PacketIn as usize] = 1 << OFPR_ACTION;
        c.set_async_config(a);
        assert!(c.receives_async(AsyncMsg::PacketIn, 5));
        let mut c14 = OfConn::new(
            "br0",
            &ConnInfo {
                version: Version::Of14,
                ..info(ConnRole::Service)
            },
        );
        c14.set_async_config(a);
        assert!(!c14.receives_async(AsyncMsg::PacketIn, 5));
        assert!(c14.receives_async(AsyncMsg::PacketIn, 1));
        // A length already set is kept.
        let mut c = OfConn::new("br0", &info(ConnRole::Service));
        c.miss_send_len = 65535;
        c.set_async_config(a);
        assert_eq!(c.miss_send_len, 65535);
    }

    #[test]
    fn only_a_secondary_controller_may_not_modify() {
        let mut c = OfConn::new("br0", &info(ConnRole::Primary));
        assert!(c.may_modify());
        c.role = Role::Secondary;
        assert!(!c.may_modify());
        let mut s = OfConn::new("br0", &info(ConnRole::Service));
        s.role = Role::Secondary;
        assert!(s.may_modify());
    }
}
