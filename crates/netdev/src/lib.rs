//! Port backends. For now: the classic pcap file format, which the pcap port, the replay port and
//! the command-line tools read and write.
#![forbid(unsafe_code)]

pub mod pcap;
