//! What `flowpath bench` is asked to run: the scenario and its traffic, the datapath's
//! settings, and how the figures are reported.

/// Benchmark options.
#[derive(Clone, Debug)]
pub struct BenchOpts {
    pub scenario: String,
    /// Replay this capture instead of the generated traffic (`flows` is then its frame count).
    pub pcap: Option<std::path::PathBuf>,
    pub flows: usize,
    pub frame_size: usize,
    pub seconds: f64,
    pub pmds: usize,
    pub emc: bool,
    pub json: bool,
    /// Program the switch with the scenario's OpenFlow rules (misses translated by the
    /// OpenFlow pipeline) instead of preinstalled datapath flows.
    pub openflow: bool,
    /// With `openflow`: a second source (p2) offering this many packets per second, each of a
    /// flow not seen for a while, so each is a miss: an upcall storm beside the cached traffic.
    pub storm: Option<f64>,
    /// The ports the traffic enters and leaves by.
    pub io: BenchIo,
}

/// The ports of a benchmark's source and sink.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BenchIo {
    /// flowpath's in-process replay port (each packet copied into a pool buffer) and a sink
    /// that samples what it is sent.
    #[default]
    Replay,
    /// The OVS-DPDK anchor's I/O: DPDK's `net_pcap` replaying the traffic forever
    /// (`infinite_rx=1`) into `net_null` (`no-rx=1`), through flowpath's `dpdk` ports.
    Dpdk,
}

impl BenchIo {
    /// `replay` or `dpdk`.
    pub fn parse(s: &str) -> Option<BenchIo> {
        match s {
            "replay" => Some(BenchIo::Replay),
            "dpdk" => Some(BenchIo::Dpdk),
            _ => None,
        }
    }
}
