//! What the PMD tests share: a port that feeds fixed frames, one that keeps what it is sent,
//! and frames.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use datapath::packet::{Batch, Pool};
use datapath::pmd::{DropUpcalls, Pmd, PmdConfig, PolledRxq, UpcallHandler};
use datapath::port::{RxQueue, TxQueue};

/// A PMD (upcalls dropped) polling port 1, fed `frames` on every poll.
pub fn fed_pmd(config: PmdConfig, frames: Vec<Vec<u8>>) -> Pmd {
    fed_pmd_with(config, Box::new(DropUpcalls), frames)
}

/// [`fed_pmd`] with the slow path `upcalls`.
pub fn fed_pmd_with(
    config: PmdConfig,
    upcalls: Box<dyn UpcallHandler>,
    frames: Vec<Vec<u8>>,
) -> Pmd {
    let mut pmd = Pmd::new(config, upcalls);
    pmd.add_rxq(PolledRxq {
        port_no: 1,
        queue_id: 0,
        rxq: Box::new(Feed::new(frames)),
        cycles: 0,
    });
    pmd
}

/// Sends its frames (as many as a batch takes) on every poll, as received on port 1.
#[derive(Clone, Default)]
pub struct Feed(pub Arc<Mutex<Vec<Vec<u8>>>>);

impl Feed {
    pub fn new(frames: Vec<Vec<u8>>) -> Feed {
        Feed(Arc::new(Mutex::new(frames)))
    }
}

impl RxQueue for Feed {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        let frames = self.0.lock().unwrap();
        let n = batch.room().min(frames.len());
        for f in &frames[..n] {
            batch.push(pool.packet_from(f, 1));
        }
        n
    }
}

/// Keeps what it is sent.
#[derive(Clone, Default)]
pub struct Keep(pub Arc<Mutex<Vec<Vec<u8>>>>);

impl Keep {
    /// What it was sent since the last call.
    pub fn take(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

impl TxQueue for Keep {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        let mut got = self.0.lock().unwrap();
        for p in batch.packets() {
            got.push(p.data().to_vec());
        }
        pool.free_batch(batch);
    }
}

/// An IPv4/UDP frame from 10.0.0.1:1000 to 10.0.0.`dst`:`dport`, `seq` in its payload.
pub fn udp_frame(dst: u8, dport: u16, seq: u8) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    f.extend_from_slice(&[
        0x45, 0, 0, 30, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, dst,
    ]);
    f.extend_from_slice(&1000u16.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&[0, 10, 0, 0, seq, 0]);
    f
}

/// Delivers its frames (each with its `gso_size`, 0 for an ordinary frame) once, a burst at
/// a time, marking bursts that hold a super-frame.
pub struct VecRxq {
    pub frames: Vec<(Vec<u8>, u16)>,
    pub next: usize,
}

impl RxQueue for VecRxq {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        let mut n = 0;
        while batch.room() > 0 && self.next < self.frames.len() {
            let (f, mss) = &self.frames[self.next];
            let mut p = pool.packet_from(f, 1);
            if *mss != 0 {
                p.meta.gso_size = *mss;
                batch.mark_gso();
            }
            batch.push(p);
            self.next += 1;
            n += 1;
        }
        n
    }
}

/// What a [`CaptureTxq`] was sent: each frame with its `gso_size`.
pub type Sent = Arc<Mutex<Vec<(Vec<u8>, u16)>>>;

/// A transmit queue that keeps what it is sent, with the offloads it says it takes: TCP
/// segmentation, UDP segmentation, and encapsulated super-frames whole (a tap with UDP-tunnel
/// GSO).
pub struct CaptureTxq {
    pub tso: bool,
    pub uso: bool,
    pub tnl: bool,
    pub sent: Sent,
}

impl TxQueue for CaptureTxq {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        let mut s = self.sent.lock().unwrap();
        s.extend(
            batch
                .packets()
                .iter()
                .map(|p| (p.data().to_vec(), p.meta.gso_size)),
        );
        pool.free_batch(batch);
    }
    fn tso(&self) -> bool {
        self.tso
    }
    fn uso(&self) -> bool {
        self.uso
    }
    fn tnl_gso(&self) -> bool {
        self.tnl
    }
}

/// The fields of a test frame's Ethernet and IP headers that the tests vary.
#[derive(Clone, Copy, Default)]
pub struct IpHead {
    pub ipv6: bool,
    /// A VLAN tag (VID 7) after the Ethernet addresses.
    pub vlan: bool,
    /// IPv4's type of service, identification and header checksum field (left as given).
    pub tos: u8,
    pub id: u16,
    pub csum: u16,
}

/// Ethernet (02:00:00:00:00:01 to 02:00:00:00:00:02) and an IPv4 header (10.0.0.1 to
/// 10.0.0.2, DF, TTL 64) or an IPv6 one (fd00::1 to fd00::2, hop limit 64) for `l4_len`
/// bytes of protocol `proto` after it.
pub fn eth_ip(h: IpHead, proto: u8, l4_len: usize) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
    if h.vlan {
        f.extend_from_slice(&[0x81, 0x00, 0x00, 0x07]);
    }
    if h.ipv6 {
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
        f.extend_from_slice(&(l4_len as u16).to_be_bytes());
        f.extend_from_slice(&[proto, 64]);
        f.extend_from_slice(&"fd00::1".parse::<std::net::Ipv6Addr>().unwrap().octets());
        f.extend_from_slice(&"fd00::2".parse::<std::net::Ipv6Addr>().unwrap().octets());
    } else {
        f.extend_from_slice(&[0x08, 0x00, 0x45, h.tos]);
        f.extend_from_slice(&((20 + l4_len) as u16).to_be_bytes());
        f.extend_from_slice(&h.id.to_be_bytes());
        f.extend_from_slice(&[0x40, 0, 64, proto]);
        f.extend_from_slice(&h.csum.to_be_bytes());
        f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
    }
    f
}

/// Commits the connection of the IPv4 `frame` (its IP header after a 14-byte Ethernet header)
/// in `ct` under `args`, as a PMD's first packet of it would.
pub fn commit_frame(ct: &conntrack::Conntrack, frame: &[u8], args: &conntrack::CtArgs) {
    let pkt = conntrack::CtPacket {
        frame,
        l3: 14,
        v6: false,
        frag_l4_len: None,
        verified: false,
        natted: false,
    };
    let mut md = conntrack::CtMeta::default();
    let now = conntrack::now_ms();
    ct.process(&mut conntrack::CtCache::new(), &pkt, &mut md, args, now);
}
