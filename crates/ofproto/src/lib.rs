//! The OpenFlow layer: bridges, OpenFlow ports and multi-table flow tables, and the translation
//! of a packet through them into datapath actions.
//!
//! Its foundations are the pipeline's key model and the `ovs-ofctl` flow syntax:
//! - [`pipekey`]: the key an OpenFlow table matches on (the datapath [`flow::FlowKey`] plus
//!   registers and metadata), masks and matches over it;
//! - [`fields`]: the OpenFlow field table (OVS's meta-flow): names, where each field lives in
//!   the key, widths, maskability, writability and prerequisites, with generic accessors;
//! - [`syntax`]: parsing and printing of flows and actions in the syntax of `ovs-ofctl`
//!   (ovs-fields(7), ovs-actions(7), ovs-ofctl(8)), printed as `ovs-ofctl dump-flows` does.
#![forbid(unsafe_code)]

pub mod action_set;
pub mod bfd;
pub mod bond;
pub mod bond_lacp;
pub mod bond_rebalance;
pub mod bond_show;
pub mod bridge;
pub mod classifier;
pub mod coverage;
pub mod fields;
pub mod flow_events;
pub mod flow_removed;
pub mod group;
pub mod lacp;
pub mod lacp_port;
pub mod learn;
pub mod meter;
pub mod mirror;
pub mod ofproto;
pub mod patch_stats;
pub mod pipe_lock;
pub mod pipekey;
pub mod port_config;
pub mod port_status;
pub mod recirc;
pub mod syntax;
pub mod table_config;
pub mod table_stats;
pub mod tun_md;
pub mod tunnel;
pub mod xlate;
