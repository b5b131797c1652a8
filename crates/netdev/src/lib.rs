//! Port backends implementing the datapath's [`datapath::port::Port`]: in-memory `replay` and
//! `sink` ports, and `pcap` file ports; plus the classic pcap file format they and the
//! command-line tools read and write.
#![forbid(unsafe_code)]

pub mod anchor_traffic;
pub mod memory;
pub mod pcap;
pub mod pcap_port;
