//! `flowpath bench --io dpdk`: the source and sink of the OVS-DPDK anchor, so that flowpath's
//! totals are measured on the I/O OVS's are. The traffic is written to a capture, which DPDK's
//! `net_pcap` replays forever (`infinite_rx=1`: each packet copied into a fresh mbuf, as the
//! anchor feeds OVS), and the switch's output goes to `net_null` with `no-rx=1` (freed and
//! counted), both through flowpath's `dpdk` ports. DPDK starts once per process, with
//! `--no-pci` as the anchor's OVS, on hugepages when some are free and on ordinary memory
//! otherwise (`docs/dpdk.md`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, bail};
use datapath::port::Port;

/// The capture `net_pcap` reads, removed when the benchmark ends.
pub(super) struct Capture(PathBuf);

impl Drop for Capture {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A benchmark's DPDK ports.
pub(super) struct DpdkIo {
    /// p0: the traffic, replayed forever.
    pub(super) source: Box<dyn Port>,
    /// p1 (and p2.. of the tunnel scenarios with several): each frees and counts.
    pub(super) sinks: Vec<Box<dyn Port>>,
    /// The capture behind the source, which must outlive it.
    pub(super) capture: Capture,
}

/// The source for `frames` and `n_sinks` sinks, named `sinks[i]`.
pub(super) fn ports(frames: &[Vec<u8>], sinks: &[&str]) -> anyhow::Result<DpdkIo> {
    if !cfg!(feature = "dpdk") {
        bail!(
            "--io dpdk: flowpath was built without DPDK (cargo build --release -p flowpath \
             --features dpdk)"
        );
    }
    // vdev names are the process's: a second benchmark in one process takes new ones.
    static RUN: AtomicUsize = AtomicUsize::new(0);
    let n = RUN.fetch_add(1, Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("flowpath-bench-{}-{n}.pcap", std::process::id()));
    let f = std::fs::File::create(&path).with_context(|| format!("{}", path.display()))?;
    netdev::anchor_traffic::write_pcap(std::io::BufWriter::new(f), frames)
        .with_context(|| format!("{}", path.display()))?;
    let capture = Capture(path);
    // As the anchor runs OVS: virtual devices only, no PCI device probed, 1 GB (the source's
    // pool holds the whole capture: 100 000 flows and four sinks outgrow 512 MB).
    let settings = crate::dpdk::DpdkSettings::from_keys(|k| match k {
        "dpdk-init" => Some("true".to_owned()),
        "dpdk-extra" => Some("--no-pci".to_owned()),
        "dpdk-socket-mem" => Some("1024".to_owned()),
        _ => None,
    });
    crate::dpdk::start(&settings)?;
    let devargs = |v: String| vec![("dpdk-devargs".to_owned(), v)];
    // net_pcap with infinite_rx holds the whole capture in mbufs of the port's pool.
    let mut source_opts = devargs(format!(
        "net_pcap_bench{n},rx_pcap={},infinite_rx=1",
        capture.0.display()
    ));
    source_opts.push(("n_mbufs".to_owned(), frames.len().to_string()));
    let source = crate::dpdk::open_port("p0", &source_opts)?;
    let sinks = sinks
        .iter()
        .enumerate()
        .map(|(i, name)| {
            crate::dpdk::open_port(name, &devargs(format!("net_null_bench{n}_{i},no-rx=1")))
        })
        .collect::<anyhow::Result<_>>()?;
    Ok(DpdkIo {
        source,
        sinks,
        capture,
    })
}
