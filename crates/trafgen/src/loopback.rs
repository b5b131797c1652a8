//! `loopback`: a port whose transmitted frames come back on its own receive queue, with the
//! impairments a test of the generator needs: a rate limit (a token bucket: frames beyond it are
//! dropped, as by a link or a switch that cannot keep up), a share of frames dropped, and a
//! delay. With it the generator's loss, latency and no-drop-rate figures are checked against
//! known answers, with no switch and no kernel in between.
//!
//! Options (stream file `[[port]]` with `type = "loopback"`): `rate_pps` (no limit when absent),
//! `burst` (token bucket depth in frames; default 5 ms at `rate_pps`, at least 32; the bucket
//! starts with at most 32 tokens and refills while idle, so a run passes `rate_pps` × time plus
//! at most the depth, and a sender that stalls less than 5 ms and then catches up loses
//! nothing),
//! `drop_every` (drop every Nth frame offered; 0: none), `delay_us` (each frame returns that
//! long after it was sent), `stall_at` and `stall_us` (the `stall_at`th send of the tx queue,
//! counted from 1, blocks the sender that long: a generator descheduled once).
//!
//! It is a test instrument: the queue between its two halves is behind a mutex, which only
//! its own tx and rx (normally on one generator thread) take.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use datapath::packet::{Batch, Packet, Pool};
use datapath::port::{Port, PortCounters, QueueStats, RxQueue, TxQueue};

/// A loopback port's impairments.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Impairments {
    pub rate_pps: Option<f64>,
    pub burst: Option<u32>,
    pub drop_every: u64,
    pub delay: Duration,
    /// The send (counted from 1) that blocks for `stall`; 0: none.
    pub stall_at: u64,
    pub stall: Duration,
}

impl Impairments {
    /// From a `[[port]]`'s `options` table; unknown keys and bad values are errors naming
    /// the key.
    pub fn from_options(o: &toml::Table) -> Result<Impairments, String> {
        let mut im = Impairments::default();
        for (k, v) in o {
            let num = || {
                v.as_float()
                    .or_else(|| v.as_integer().map(|i| i as f64))
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .ok_or_else(|| format!("option {k}: expected a number >= 0, not {v}"))
            };
            match k.as_str() {
                "rate_pps" => {
                    let r = num()?;
                    if r == 0.0 {
                        return Err("option rate_pps: must be > 0".into());
                    }
                    im.rate_pps = Some(r);
                }
                "burst" => im.burst = Some(num()?.max(1.0) as u32),
                "drop_every" => im.drop_every = num()? as u64,
                "delay_us" => im.delay = Duration::from_nanos((num()? * 1000.0) as u64),
                "stall_at" => im.stall_at = num()? as u64,
                "stall_us" => im.stall = Duration::from_nanos((num()? * 1000.0) as u64),
                _ => {
                    return Err(format!(
                        "unknown option {k} (loopback takes rate_pps, burst, drop_every, delay_us, stall_at, stall_us)"
                    ));
                }
            }
        }
        Ok(im)
    }
}

struct Shared {
    /// Frames on their way back, with when they are due.
    queue: VecDeque<(Instant, Packet)>,
    tokens: f64,
    last: Option<Instant>,
    offered: u64,
}

/// The port. One rx and one tx queue.
pub struct LoopbackPort {
    name: String,
    im: Impairments,
    shared: Arc<Mutex<Shared>>,
    rx_taken: bool,
    rx: Arc<QueueStats>,
    tx: Arc<QueueStats>,
}

/// Frames held on the way back at most (beyond: dropped and counted).
const QUEUE_CAP: usize = 1 << 16;

impl LoopbackPort {
    pub fn new(name: &str, im: Impairments) -> LoopbackPort {
        LoopbackPort {
            name: name.to_owned(),
            im,
            shared: Arc::new(Mutex::new(Shared {
                queue: VecDeque::with_capacity(1024),
                tokens: 0.0,
                last: None,
                offered: 0,
            })),
            rx_taken: false,
            rx: QueueStats::shared(),
            tx: QueueStats::shared(),
        }
    }
}

impl Port for LoopbackPort {
    fn name(&self) -> &str {
        &self.name
    }
    fn kind(&self) -> &'static str {
        "loopback"
    }
    fn options(&self) -> String {
        let mut o = Vec::new();
        if let Some(r) = self.im.rate_pps {
            o.push(format!("rate_pps={r}"));
        }
        if self.im.drop_every > 0 {
            o.push(format!("drop_every={}", self.im.drop_every));
        }
        if !self.im.delay.is_zero() {
            o.push(format!("delay_us={}", self.im.delay.as_secs_f64() * 1e6));
        }
        if self.im.stall_at > 0 {
            o.push(format!(
                "stall_at={}, stall_us={}",
                self.im.stall_at,
                self.im.stall.as_secs_f64() * 1e6
            ));
        }
        if o.is_empty() {
            String::new()
        } else {
            format!("{{{}}}", o.join(", "))
        }
    }
    fn n_rxq(&self) -> usize {
        1
    }
    fn take_rxq(&mut self, q: usize, in_port: u32) -> Option<Box<dyn RxQueue>> {
        if q != 0 || self.rx_taken {
            return None;
        }
        self.rx_taken = true;
        Some(Box::new(LoopRx {
            shared: self.shared.clone(),
            stats: self.rx.clone(),
            in_port,
        }))
    }
    fn open_txq(&mut self) -> Box<dyn TxQueue> {
        let rate = self.im.rate_pps;
        let depth = self
            .im
            .burst
            .map(f64::from)
            .unwrap_or_else(|| rate.map_or(f64::INFINITY, |r| (r * 0.005).max(32.0)));
        Box::new(LoopTx {
            shared: self.shared.clone(),
            stats: self.tx.clone(),
            im: self.im,
            depth,
            sends: 0,
        })
    }
    fn counters(&self) -> PortCounters {
        let mut c = self.rx.snapshot();
        c += self.tx.snapshot();
        c
    }
}

struct LoopTx {
    shared: Arc<Mutex<Shared>>,
    stats: Arc<QueueStats>,
    im: Impairments,
    depth: f64,
    /// Sends so far (for `stall_at`).
    sends: u64,
}

impl TxQueue for LoopTx {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        self.sends += 1;
        if self.sends == self.im.stall_at {
            std::thread::sleep(self.im.stall);
        }
        let now = Instant::now();
        let due = now + self.im.delay;
        let mut s = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = self.im.rate_pps {
            let dt = s.last.map_or(0.0, |l| now.duration_since(l).as_secs_f64());
            s.tokens = if s.last.is_none() {
                self.depth.min(32.0)
            } else {
                (s.tokens + dt * r).min(self.depth)
            };
            s.last = Some(now);
        }
        let (mut sent, mut bytes, mut dropped) = (0, 0, 0);
        for p in batch.drain() {
            s.offered += 1;
            let shed = self.im.drop_every > 0 && s.offered.is_multiple_of(self.im.drop_every);
            let limited = self.im.rate_pps.is_some() && s.tokens < 1.0;
            if shed || limited || s.queue.len() >= QUEUE_CAP {
                dropped += 1;
                pool.free(p);
                continue;
            }
            if self.im.rate_pps.is_some() {
                s.tokens -= 1.0;
            }
            sent += 1;
            bytes += p.len() as u64;
            s.queue.push_back((due, p));
        }
        drop(s);
        self.stats.count_tx(sent, bytes, dropped, 0);
    }
}

struct LoopRx {
    shared: Arc<Mutex<Shared>>,
    stats: Arc<QueueStats>,
    in_port: u32,
}

impl RxQueue for LoopRx {
    fn recv(&mut self, _pool: &mut Pool, batch: &mut Batch) -> usize {
        let mut s = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        if s.queue.is_empty() {
            return 0;
        }
        let now = Instant::now();
        let (mut n, mut bytes) = (0, 0);
        while batch.room() > 0 {
            match s.queue.front() {
                Some((due, _)) if *due <= now => {}
                _ => break,
            }
            let Some((_, mut p)) = s.queue.pop_front() else {
                break;
            };
            p.meta = datapath::packet::PacketMeta::received(self.in_port);
            bytes += p.len() as u64;
            n += 1;
            batch.push(p);
        }
        drop(s);
        self.stats.count_rx(n as u64, bytes, 0, 0);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch_of(pool: &mut Pool, n: usize) -> Batch {
        let mut b = Batch::new();
        for i in 0..n {
            b.push(pool.packet_from(&[i as u8; 60], 0));
        }
        b
    }

    #[test]
    fn frames_come_back_in_order_and_every_nth_is_dropped() {
        let mut port = LoopbackPort::new(
            "l",
            Impairments {
                drop_every: 4,
                ..Default::default()
            },
        );
        let mut rx = port.take_rxq(0, 7).unwrap();
        let mut tx = port.open_txq();
        let mut pool = Pool::new(64, 64);
        let mut b = batch_of(&mut pool, 8);
        tx.send(&mut b, &mut pool);
        let mut got = Batch::new();
        assert_eq!(rx.recv(&mut pool, &mut got), 6);
        let firsts: Vec<u8> = got.packets().iter().map(|p| p.data()[0]).collect();
        assert_eq!(firsts, [0, 1, 2, 4, 5, 6]);
        assert!(got.packets().iter().all(|p| p.meta.in_port == 7));
        let c = port.counters();
        assert_eq!((c.tx_packets, c.tx_dropped, c.rx_packets), (6, 2, 6));
        assert!(port.take_rxq(0, 1).is_none());
    }

    #[test]
    fn the_rate_limit_passes_its_burst_then_its_rate() {
        let mut port = LoopbackPort::new(
            "l",
            Impairments {
                rate_pps: Some(1000.0),
                burst: Some(10),
                ..Default::default()
            },
        );
        let mut tx = port.open_txq();
        let mut pool = Pool::new(64, 64);
        let mut b = batch_of(&mut pool, 32);
        tx.send(&mut b, &mut pool);
        assert_eq!(
            port.counters().tx_packets,
            10,
            "the bucket starts full (10 <= 32)"
        );
        std::thread::sleep(Duration::from_millis(5));
        let mut b = batch_of(&mut pool, 32);
        tx.send(&mut b, &mut pool);
        let sent = port.counters().tx_packets;
        assert!((14..=20).contains(&sent), "about 5 more tokens: {sent}");
    }

    #[test]
    fn delayed_frames_wait() {
        let mut port = LoopbackPort::new(
            "l",
            Impairments {
                delay: Duration::from_millis(30),
                ..Default::default()
            },
        );
        let mut rx = port.take_rxq(0, 1).unwrap();
        let mut tx = port.open_txq();
        let mut pool = Pool::new(64, 64);
        let mut b = batch_of(&mut pool, 3);
        tx.send(&mut b, &mut pool);
        let mut got = Batch::new();
        assert_eq!(rx.recv(&mut pool, &mut got), 0);
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(rx.recv(&mut pool, &mut got), 3);
    }

    #[test]
    fn bad_options_name_the_key() {
        let t: toml::Table = toml::from_str("rate_pps = -1").unwrap();
        assert!(
            Impairments::from_options(&t)
                .unwrap_err()
                .contains("rate_pps")
        );
        let t: toml::Table = toml::from_str("speed = 1").unwrap();
        assert!(Impairments::from_options(&t).unwrap_err().contains("speed"));
        let t: toml::Table = toml::from_str("rate_pps = 5e5\ndelay_us = 20").unwrap();
        let im = Impairments::from_options(&t).unwrap();
        assert_eq!(im.rate_pps, Some(5e5));
        assert_eq!(im.delay, Duration::from_micros(20));
    }
}
