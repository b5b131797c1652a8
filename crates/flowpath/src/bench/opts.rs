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
}
