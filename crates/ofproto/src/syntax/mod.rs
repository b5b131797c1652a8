//! Flows in the syntax of `ovs-ofctl` (ovs-ofctl(8) "Flow Syntax", ovs-fields(7),
//! ovs-actions(7)): parsing what `add-flow`, `add-flows`, `mod-flows` and `del-flows` take, and
//! printing what `dump-flows` prints.
//!
//! Printing reproduces `ovs-ofctl dump-flows`: OVS's order of match fields and shorthands
//! (`priority=10,ip,nw_dst=10.1.0.0/16`), and actions as OVS prints the ones it holds. A field
//! write keeps the form it was written in (`load:` or `set_field:`, `mod_nw_ttl:` or
//! `set_field:->nw_ttl`, [`WriteForm`]), so parsing a printed flow gives the same [`FlowSpec`];
//! [`FlowSpec::as_openflow10`] gives the flow as a switch holds it once `ovs-ofctl` sent it with
//! its default protocol (OpenFlow 1.0 with Nicira extensions: `mod_dl_dst:...`,
//! `load:0x1->NXM_NX_REG0[0..3]`), which is how text loaded into the switch is held.
//! `tests/oracle.rs` checks a corpus against `ovs-ofctl` itself.
//!
//! Deliberate differences from `ovs-ofctl`, all where it would silently change a flow:
//! - a match field whose prerequisite is missing (`nw_dst=10.0.0.1` without `ip`, `tcp_flags`
//!   in a UDP flow, `icmp6,mpls`) is an error (`prerequisite ip missing for nw_dst`);
//!   `ovs-ofctl` drops or reinterprets such fields when it encodes the flow, and OpenFlow 1.2+
//!   switches reject them (`OFPBMC_BAD_PREREQ`);
//! - actions a switch would reject when decoding an OpenFlow 1.0 flow mod are rejected here
//!   (`mod_nw_ttl` without `ip`, `ct(nat(src=...))` without `commit`);
//! - `goto_table:N` stays `goto_table:N` (OVS degrades it to `resubmit(,N)` over OpenFlow 1.0);
//! - `set_field:...->dl_vlan`/`dl_vlan_pcp` mean `mod_vlan_vid`/`mod_vlan_pcp` (OVS encodes
//!   them incorrectly over OpenFlow 1.0);
//! - OpenFlow 1.1+ actions (`push_vlan`, `meter`) are accepted and printed as OpenFlow 1.1+
//!   prints them, where `ovs-ofctl` with OpenFlow 1.0 has no protocol to send them in;
//! - where OVS's printing loses information the printed form keeps it, so that it parses back:
//!   `resubmit(1,,ct)` (OVS prints `resubmit:1`), `tun_metadata0=0x5/0xffff` (OVS prints
//!   `0x5`); `nat(src,hash)` flags without an address range, which OVS does not print, are
//!   dropped when parsing; tunnel-metadata values with 1-bits outside their mask are refused.

mod actions;
mod flow;
pub mod group;
mod lex;
mod matching;
mod meter;
mod ports;
pub(crate) mod value;

pub use actions::{
    BUNDLE_ALGORITHMS, BUNDLE_MAX_MEMBERS, Bundle, Controller, Ct, CtZone, HASH_FIELDS,
    MAX_NESTING, MP_ALGORITHMS, Multipath, Nat, NatAddrs, NatKind, OfAction, PacketInReason,
    Sample, SampleDirection, WriteForm, as_openflow10, format_actions, packet_type, push_set_field,
};
pub use flow::{
    FlowKind, FlowModFlags, FlowSpec, FlowStats, LineError, parse_flow, parse_flows_file,
};
pub use matching::{DEFAULT_PRIORITY, format_match};
pub use meter::{
    MeterText, format_meter_config, format_meter_features, format_meter_stats, parse_meter,
};
pub use ports::{
    NoPortNames, OFPP_ALL, OFPP_ANY, OFPP_CONTROLLER, OFPP_FLOOD, OFPP_IN_PORT, OFPP_LOCAL,
    OFPP_MAX, OFPP_NORMAL, OFPP_TABLE, OFPP_UNSET, PortNames, format_port, parse_port,
    reserved_port_name,
};

use crate::fields::Prereq;

/// Appends connection-state flags as OVS's `format_flags(..., '|')` prints them
/// (`new|trk`; `0` for none).
pub fn format_ct_state(out: &mut String, state: u8) {
    value::put_flags(out, value::CT_STATE_NAMES, u32::from(state));
}

/// Why a flow did not parse. The message names the offending token and the reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SyntaxError {
    #[error("unknown field '{0}'")]
    UnknownField(String),
    #[error("unknown action '{0}'")]
    UnknownAction(String),
    #[error("unsupported action '{0}'")]
    Unsupported(String),
    #[error("prerequisite {prereq} missing for {field}")]
    MissingPrereq { field: String, prereq: Prereq },
    #[error("bad value '{value}' for {field}: {reason}")]
    BadValue {
        field: String,
        value: String,
        reason: String,
    },
    #[error("{}", bad_action(action, arg, reason))]
    BadAction {
        action: String,
        arg: String,
        reason: String,
    },
    #[error("field '{0}' is read-only")]
    ReadOnly(String),
    #[error("missing actions= (a flow to add needs actions)")]
    MissingActions,
    #[error("'{keyword}' not allowed here: {reason}")]
    NotAllowed { keyword: String, reason: String },
}

fn bad_action(action: &str, arg: &str, reason: &str) -> String {
    if arg.is_empty() {
        format!("bad action {action}: {reason}")
    } else {
        format!("bad argument '{arg}' for {action}: {reason}")
    }
}
