//! The `pcap` port: receives the packets of a capture file once (`rx_pcap`) and writes what it
//! is sent to a capture file (`tx_pcap`). For tests and for running a flow table over a capture
//! (`flowpath run --until-idle`); not a performance port.
//!
//! The capture is read whole when the port opens, so a bad file is an error at configuration
//! time, not a surprise in a PMD thread. Several PMD threads may send to the same port: their
//! tx queues share the writer behind a mutex taken once per burst.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use datapath::packet::{Batch, Pool};
use datapath::port::{Port, PortCounters, QueueStats, RxQueue, TxQueue};

use crate::pcap::{PcapError, PcapWriter, read_file};

type Writer = Arc<Mutex<Option<PcapWriter<BufWriter<File>>>>>;

/// A port backed by capture files.
pub struct PcapPort {
    name: String,
    rx_path: Option<PathBuf>,
    tx_path: Option<PathBuf>,
    frames: Option<Vec<Vec<u8>>>,
    writer: Writer,
    rx_stats: Arc<QueueStats>,
    tx_stats: Arc<QueueStats>,
}

impl PcapPort {
    /// Opens the port: reads `rx` whole (if given) and creates `tx` (if given).
    pub fn open(name: &str, rx: Option<&Path>, tx: Option<&Path>) -> Result<PcapPort, PcapError> {
        let frames = match rx {
            Some(p) => Some(read_file(p)?.into_iter().map(|r| r.data).collect()),
            None => None,
        };
        let writer = match tx {
            Some(p) => Some(PcapWriter::create(p)?),
            None => None,
        };
        Ok(PcapPort {
            name: name.to_owned(),
            rx_path: rx.map(Path::to_path_buf),
            tx_path: tx.map(Path::to_path_buf),
            frames,
            writer: Arc::new(Mutex::new(writer)),
            rx_stats: QueueStats::shared(),
            tx_stats: QueueStats::shared(),
        })
    }
}

struct PcapRxq {
    frames: std::vec::IntoIter<Vec<u8>>,
    in_port: u32,
    stats: Arc<QueueStats>,
}

impl RxQueue for PcapRxq {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        let mut n = 0;
        let mut bytes = 0;
        while batch.room() > 0 {
            let Some(f) = self.frames.next() else { break };
            bytes += f.len() as u64;
            batch.push(pool.packet_from(&f, self.in_port));
            n += 1;
        }
        self.stats.add_rx(n as u64, bytes);
        n
    }

    fn exhausted(&self) -> bool {
        self.frames.len() == 0
    }
}

struct PcapTxq {
    writer: Writer,
    stats: Arc<QueueStats>,
}

impl TxQueue for PcapTxq {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        let n = batch.len() as u64;
        let bytes = batch.bytes();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let mut ok = false;
        if let Ok(mut w) = self.writer.lock()
            && let Some(w) = w.as_mut()
        {
            ok = batch
                .packets()
                .iter()
                .all(|p| w.write(now, p.data()).is_ok());
        }
        if ok {
            self.stats.add_tx(n, bytes);
        } else {
            // No tx file configured, or writing failed: the packets are lost, and counted.
            self.stats.tx_dropped.fetch_add(n, Relaxed);
        }
        pool.free_batch(batch);
    }

    fn flush(&mut self) {
        if let Ok(mut w) = self.writer.lock()
            && let Some(w) = w.as_mut()
            && w.flush().is_err()
        {
            self.stats.errors.fetch_add(1, Relaxed);
        }
    }
}

impl Port for PcapPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "pcap"
    }

    fn options(&self) -> String {
        let mut o = Vec::new();
        if let Some(p) = &self.rx_path {
            o.push(format!("rx_pcap={}", p.display()));
        }
        if let Some(p) = &self.tx_path {
            o.push(format!("tx_pcap={}", p.display()));
        }
        format!("{{{}}}", o.join(", "))
    }

    fn n_rxq(&self) -> usize {
        usize::from(self.rx_path.is_some())
    }

    fn take_rxq(&mut self, q: usize, in_port: u32) -> Option<Box<dyn RxQueue>> {
        if q != 0 {
            return None;
        }
        let frames = self.frames.take()?;
        Some(Box::new(PcapRxq {
            frames: frames.into_iter(),
            in_port,
            stats: self.rx_stats.clone(),
        }))
    }

    fn open_txq(&mut self) -> Box<dyn TxQueue> {
        Box::new(PcapTxq {
            writer: self.writer.clone(),
            stats: self.tx_stats.clone(),
        })
    }

    fn counters(&self) -> PortCounters {
        let mut c = self.rx_stats.snapshot();
        c += self.tx_stats.snapshot();
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcap::PcapWriter;

    #[test]
    fn reads_once_and_writes_what_it_is_sent() {
        let dir = std::env::temp_dir().join(format!("netdev-pcap-port-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let input = dir.join("in.pcap");
        let mut w = PcapWriter::create(&input).unwrap();
        for i in 0..40u8 {
            w.write(0, &[i; 64]).unwrap();
        }
        w.finish().unwrap();
        let output = dir.join("out.pcap");

        let mut port = PcapPort::open("p0", Some(&input), Some(&output)).unwrap();
        let mut rxq = port.take_rxq(0, 1).unwrap();
        let mut txq = port.open_txq();
        let mut pool = Pool::new(64, 0);
        let mut b = Batch::new();
        assert_eq!(rxq.recv(&mut pool, &mut b), 32);
        txq.send(&mut b, &mut pool);
        assert!(!rxq.exhausted());
        assert_eq!(rxq.recv(&mut pool, &mut b), 8);
        assert!(rxq.exhausted());
        txq.send(&mut b, &mut pool);
        assert_eq!(rxq.recv(&mut pool, &mut b), 0);
        txq.flush();
        let back = read_file(&output).unwrap();
        assert_eq!(back.len(), 40);
        assert_eq!(back[39].data, vec![39u8; 64]);
        assert_eq!(port.counters().tx_packets, 40);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_bad_capture_is_an_open_error() {
        let dir = std::env::temp_dir().join(format!("netdev-pcap-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bad = dir.join("bad.pcap");
        std::fs::write(&bad, b"this is not a capture file at all").unwrap();
        assert!(PcapPort::open("p0", Some(&bad), None).is_err());
        assert!(PcapPort::open("p0", Some(&dir.join("missing.pcap")), None).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
