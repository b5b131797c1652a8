//! The userspace datapath: per-PMD caches and the megaflow classifier a packet batch passes
//! through after key extraction (the exact-match cache, then the per-port dpcls), the actions
//! and tunnel termination.
#![warn(missing_docs)]

pub mod actions;
pub mod bond;
pub mod csum_pending;
pub mod ct;
pub mod doorbell;
pub mod dpcls;
pub mod dpif;
pub mod emc;
pub mod flow_table;
pub mod gro;
pub mod gso;
pub mod gso_inner;
pub mod gso_tunnel;
pub mod gso_udp;
pub mod gso_ufo;
pub mod meter;
pub mod packet;
pub mod pmd;
pub mod port;
pub mod rewrite;
pub mod super_frame;
pub mod tnl_md;
pub mod tsc;
pub mod tunnel;
pub mod tx_gso;
pub mod upcall_queue;
pub mod xlate_drop;
