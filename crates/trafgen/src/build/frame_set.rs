//! A stream's frames: a [`FrameSpec`] (template, frame sizes, flows, varied fields, stamp,
//! direction) compiled into a [`FrameSet`], which writes packet `k` of the stream into a
//! buffer or a whole burst into a batch. When a period of frames fits [`PRECOMPUTE_LIMIT`]
//! they are built once and each packet is a copy and its stamp; otherwise each packet is a
//! per-size base frame with the varied fields patched in. Either way the flow and the frame of
//! packet `k` are found without a division ([`FastMod`]).

use std::fmt;
use std::sync::Arc;

use super::checksum::Site;
use super::fast_mod::FastMod;
use super::template::check_size;
use super::vary::{Plan, write_field};
use super::{
    BuildError, DEFAULT_SEED, FCS_LEN, IMIX_CYCLE, MAX_FLOWS, MAX_SIZES, MIN_FRAME_SIZE,
    PRECOMPUTE_LIMIT, Template, Vary,
};
use crate::stamp::{STAMP_LEN, Stamp};

/// The sizes of a stream's frames (FCS included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameSize {
    /// Every frame this size.
    Fixed(usize),
    /// [`IMIX_CYCLE`].
    Imix,
    /// These sizes in turn.
    Cycle(Vec<usize>),
}

impl FrameSize {
    /// The sizes in the order frames take them.
    pub fn cycle(&self) -> Vec<usize> {
        match self {
            FrameSize::Fixed(s) => vec![*s],
            FrameSize::Imix => IMIX_CYCLE.to_vec(),
            FrameSize::Cycle(v) => v.clone(),
        }
    }
}

impl Default for FrameSize {
    fn default() -> Self {
        FrameSize::Fixed(MIN_FRAME_SIZE)
    }
}

/// Everything that makes a stream's frames.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameSpec {
    /// Headers and payload.
    pub template: Template,
    /// Frame sizes.
    pub sizes: FrameSize,
    /// Number of flows, 1..=[`MAX_FLOWS`].
    pub flows: u64,
    /// Varied fields.
    pub vary: Vec<Vary>,
    /// Seed of `random` variation.
    pub seed: u64,
    /// Frames carry a [`Stamp`].
    pub stamp: bool,
    /// Build the reversed stream: [`Template::reversed`], each varied field moved to its
    /// counterpart (`ipv4.src` → `ipv4.dst`) with the same values, so that reversed flow `i`
    /// answers flow `i`.
    pub reversed: bool,
}

impl FrameSpec {
    /// 64-byte stamped frames of one flow.
    pub fn new(template: Template) -> FrameSpec {
        FrameSpec {
            template,
            sizes: FrameSize::default(),
            flows: 1,
            vary: Vec::new(),
            seed: DEFAULT_SEED,
            stamp: true,
            reversed: false,
        }
    }

    /// The same spec for the other direction (see [`FrameSpec::reversed`]).
    pub fn to_reversed(&self) -> FrameSpec {
        FrameSpec {
            reversed: !self.reversed,
            ..self.clone()
        }
    }

    /// Checks everything and builds the frames.
    pub fn compile(&self) -> Result<FrameSet, BuildError> {
        self.compile_with_limit(PRECOMPUTE_LIMIT)
    }

    /// [`FrameSpec::compile`], precomputing frames up to `limit` bytes.
    fn compile_with_limit(&self, limit: usize) -> Result<FrameSet, BuildError> {
        if self.flows == 0 || self.flows > MAX_FLOWS {
            return Err(BuildError::Flows(self.flows));
        }
        let cycle = self.sizes.cycle();
        if cycle.is_empty() || cycle.len() > MAX_SIZES {
            return Err(BuildError::Sizes(format!(
                "a list of 1 to {MAX_SIZES} frame sizes is needed, not {}",
                cycle.len()
            )));
        }
        self.template.check()?;
        let headers = self.template.header_len();
        for &s in &cycle {
            check_size(s, headers, self.stamp)?;
        }
        let tpl = if self.reversed {
            self.template.reversed()
        } else {
            self.template.clone()
        };
        let layout = tpl.layout();
        let plans = self.plans(&tpl, &layout)?;

        // One base frame (template values) per distinct size.
        let mut sizes: Vec<usize> = cycle.clone();
        sizes.sort_unstable();
        sizes.dedup();
        let bases: Vec<Base> = sizes
            .iter()
            .map(|&s| {
                let frame = tpl.emit(&layout, s - FCS_LEN, self.stamp);
                Base { frame }
            })
            .collect();
        let cycle_base: Vec<usize> = cycle
            .iter()
            .map(|s| sizes.binary_search(s).unwrap_or(0))
            .collect();
        let clen = cycle.len() as u64;
        let period = lcm(self.flows, clen);
        let max_len = sizes.iter().max().copied().unwrap_or(MIN_FRAME_SIZE) - FCS_LEN;

        let per_cycle: u128 = cycle_base
            .iter()
            .map(|&b| bases[b].frame.len() as u128)
            .sum();
        let bytes_needed = u128::from(period / clen) * per_cycle
            + u128::from(period) * (std::mem::size_of::<Entry>() + FrameSet::SHORT_FRAME) as u128;
        let mode = if bytes_needed <= limit as u128 {
            let mut bytes = Vec::with_capacity(bytes_needed as usize);
            let mut index = Vec::with_capacity(period as usize);
            for k in 0..period {
                let b = &bases[cycle_base[(k % clen) as usize]];
                let off = bytes.len();
                bytes.extend_from_slice(&b.frame);
                // A short frame takes a whole block, zero-padded, for write_burst's fixed copy.
                bytes.resize(off + b.frame.len().max(FrameSet::SHORT_FRAME), 0);
                let f = &mut bytes[off..off + b.frame.len()];
                for p in &plans {
                    write_field(
                        f,
                        &layout.sites,
                        &p.slot,
                        p.value(k % self.flows, self.seed),
                    );
                }
                index.push(Entry {
                    off: off as u32,
                    len: b.frame.len() as u16,
                });
            }
            Mode::Pre { bytes, index }
        } else {
            Mode::Patch {
                bases,
                cycle: cycle_base,
                plans,
                sites: layout.sites.clone(),
                flows_mod: FastMod::new(self.flows),
                cycle_mod: FastMod::new(clen),
            }
        };
        Ok(FrameSet {
            inner: Arc::new(Inner {
                spec: self.clone(),
                flows: self.flows,
                period,
                period_mod: FastMod::new(period),
                max_len,
                stamped: self.stamp,
                seed: self.seed,
                mode,
            }),
        })
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn lcm(a: u64, b: u64) -> u64 {
    a / gcd(a, b) * b
}

/// Writes the stamp into the last 16 bytes (zero until now). The stamp sums to a
/// ones'-complement zero (see [`crate::stamp`]), so every checksum that covers it stays valid.
#[inline(always)]
fn put_stamp(frame: &mut [u8], stamp: &Stamp) {
    let n = frame.len();
    if let Some(tail) = frame
        .get_mut(n.saturating_sub(STAMP_LEN)..)
        .and_then(|t| <&mut [u8; STAMP_LEN]>::try_from(t).ok())
    {
        stamp.write_to(tail);
    }
}

/// A precomputed frame: where it is.
#[derive(Clone, Copy, Debug)]
struct Entry {
    off: u32,
    len: u16,
}

#[derive(Clone, Debug)]
struct Base {
    frame: Vec<u8>,
}

#[derive(Clone)]
enum Mode {
    /// Every frame of a period, back to back.
    Pre { bytes: Vec<u8>, index: Vec<Entry> },
    /// Per packet: a base frame of the size, then the varied fields patched in.
    Patch {
        bases: Vec<Base>,
        cycle: Vec<usize>,
        plans: Vec<Plan>,
        sites: Vec<Site>,
        flows_mod: FastMod,
        cycle_mod: FastMod,
    },
}

struct Inner {
    spec: FrameSpec,
    flows: u64,
    period: u64,
    period_mod: FastMod,
    max_len: usize,
    stamped: bool,
    seed: u64,
    mode: Mode,
}

/// A stream's frames, compiled from a [`FrameSpec`]; cheap to clone (shared).
#[derive(Clone)]
pub struct FrameSet {
    inner: Arc<Inner>,
}

impl fmt::Debug for FrameSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.inner;
        f.debug_struct("FrameSet")
            .field("flows", &s.flows)
            .field("period", &s.period)
            .field("max_len", &s.max_len)
            .field("stamped", &s.stamped)
            .field("precomputed", &self.precomputed())
            .finish()
    }
}

impl FrameSet {
    /// Number of flows.
    pub fn flows(&self) -> u64 {
        self.inner.flows
    }

    /// Packets before the sequence repeats: the least common multiple of the flows and the
    /// length of the size cycle (packet `k` is flow `k mod flows` with size `k mod n` of the
    /// cycle).
    pub fn period(&self) -> u64 {
        self.inner.period
    }

    /// The longest frame, without FCS: a buffer this long takes any packet.
    pub fn max_len(&self) -> usize {
        self.inner.max_len
    }

    /// Whether frames carry a stamp.
    pub fn stamped(&self) -> bool {
        self.inner.stamped
    }

    /// Whether the frames of a period are precomputed (else `write` patches fields per packet).
    pub fn precomputed(&self) -> bool {
        matches!(self.inner.mode, Mode::Pre { .. })
    }

    /// The spec it was compiled from.
    pub fn spec(&self) -> &FrameSpec {
        &self.inner.spec
    }

    /// Writes the stream's packet `k` (flow `k mod flows`, size `k mod n` of the cycle of `n`
    /// sizes) into `buf` and returns its length (no FCS). With [`FrameSet::stamped`], `stamp`
    /// is its last 16 bytes and every checksum that covers them is valid. Returns 0 and writes
    /// nothing if `buf` is shorter than the frame ([`FrameSet::max_len`] always suffices).
    #[inline]
    pub fn write(&self, k: u64, stamp: &Stamp, buf: &mut [u8]) -> usize {
        let s = &*self.inner;
        match &s.mode {
            Mode::Pre { bytes, index } => {
                let Some(&e) = index.get(s.period_mod.rem(k) as usize) else {
                    return 0;
                };
                let (off, len) = (e.off as usize, usize::from(e.len));
                let (Some(dst), Some(src)) = (buf.get_mut(..len), bytes.get(off..off + len)) else {
                    return 0;
                };
                dst.copy_from_slice(src);
                if s.stamped {
                    put_stamp(dst, stamp);
                }
                len
            }
            Mode::Patch {
                bases,
                cycle,
                plans,
                sites,
                flows_mod,
                cycle_mod,
            } => {
                let flow = flows_mod.rem(k);
                let Some(b) = cycle
                    .get(cycle_mod.rem(k) as usize)
                    .and_then(|&i| bases.get(i))
                else {
                    return 0;
                };
                let len = b.frame.len();
                let Some(dst) = buf.get_mut(..len) else {
                    return 0;
                };
                dst.copy_from_slice(&b.frame);
                for p in plans {
                    write_field(dst, sites, &p.slot, p.value(flow, s.seed));
                }
                if s.stamped {
                    put_stamp(dst, stamp);
                }
                len
            }
        }
    }

    /// Appends packets `k, k+1, ..` (`n` of them, at most the batch's room) to `batch`, in
    /// buffers from `pool`, as [`FrameSet::write`] would write them, stamped with sequence
    /// numbers from `stamp.seq` on and `stamp`'s stream and time. The send loop's form of
    /// `write`: one division per burst rather than per packet. Returns the bytes written (FCS
    /// excluded).
    pub fn write_burst(
        &self,
        k: u64,
        n: usize,
        stamp: &Stamp,
        pool: &mut datapath::packet::Pool,
        batch: &mut datapath::packet::Batch,
    ) -> u64 {
        let n = n.min(batch.room());
        let s = &*self.inner;
        let mut bytes = 0u64;
        let Mode::Pre { bytes: all, index } = &s.mode else {
            // Patched frames: packet by packet.
            for i in 0..n as u64 {
                let mut p = pool.packet_with_len(s.max_len, 0);
                let st = Stamp {
                    seq: stamp.seq.wrapping_add(i as u32),
                    ..*stamp
                };
                let len = self.write(k + i, &st, p.data_mut());
                p.truncate(len);
                bytes += len as u64;
                batch.push(p);
            }
            return bytes;
        };
        let mut i = s.period_mod.rem(k) as usize;
        for j in 0..n {
            let Some(&e) = index.get(i) else { break };
            let (off, len) = (e.off as usize, usize::from(e.len));
            let mut p;
            if len <= Self::SHORT_FRAME {
                // A short frame's block is padded to SHORT_FRAME bytes: one fixed-size copy
                // (two vector moves, no call to memcpy), then the padding cut off.
                let Some(Ok(src)) = all
                    .get(off..off + Self::SHORT_FRAME)
                    .map(<&[u8; Self::SHORT_FRAME]>::try_from)
                else {
                    break;
                };
                p = pool.packet_with_len(Self::SHORT_FRAME, 0);
                if let Ok(d) = <&mut [u8; Self::SHORT_FRAME]>::try_from(p.data_mut()) {
                    *d = *src;
                }
                p.truncate(len);
            } else {
                let Some(src) = all.get(off..off + len) else {
                    break;
                };
                p = pool.packet_with_len(len, 0);
                p.data_mut().copy_from_slice(src);
            }
            let dst = p.data_mut();
            if s.stamped {
                let seq = stamp.seq.wrapping_add(j as u32);
                put_stamp(dst, &Stamp { seq, ..*stamp });
            }
            bytes += len as u64;
            batch.push(p);
            i += 1;
            if i == index.len() {
                i = 0;
            }
        }
        bytes
    }

    /// Frames up to this long are precomputed in blocks of this size and copied as one block
    /// by [`FrameSet::write_burst`].
    const SHORT_FRAME: usize = 64;

    /// The frame of packet `k` in a new vector (for tests and tools; the send loop uses
    /// [`FrameSet::write`]).
    pub fn frame(&self, k: u64, stamp: &Stamp) -> Vec<u8> {
        let mut v = vec![0u8; self.max_len()];
        let n = self.write(k, stamp, &mut v);
        v.truncate(n);
        v
    }

    /// The stream reversed, for `direction = "bi"`: MACs, IP addresses and L4 ports swapped in
    /// every layer, tunnel endpoints too (not the ports of UDP carrying VXLAN or GENEVE), and
    /// the same variation on the swapped fields, so reversed flow `i` answers flow `i`.
    pub fn reversed(&self) -> Result<FrameSet, BuildError> {
        self.inner.spec.to_reversed().compile()
    }
}
#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::build::fixtures::*;
    use crate::build::{FieldKind, FieldRef, IMIX_CYCLE, Vary, VaryOp};

    #[test]
    fn too_small() {
        let mut s = FrameSpec::new(combos()[2].clone());
        assert_eq!(
            s.compile().unwrap_err().to_string(),
            "frame_size 64 is too small for these headers: 92 bytes + 16-byte stamp + 4 FCS"
        );
        s.stamp = false;
        assert_eq!(
            s.compile().unwrap_err().to_string(),
            "frame_size 64 is too small for these headers: 92 bytes + 4 FCS"
        );
        s.sizes = FrameSize::Fixed(96);
        assert!(s.compile().is_ok());
        s.sizes = FrameSize::Fixed(9001);
        assert!(matches!(s.compile(), Err(BuildError::Sizes(_))));
        s.sizes = FrameSize::Cycle(vec![]);
        assert!(matches!(s.compile(), Err(BuildError::Sizes(_))));
        s.sizes = FrameSize::Fixed(128);
        s.flows = 0;
        assert!(matches!(s.compile(), Err(BuildError::Flows(0))));
    }

    #[test]
    fn imix_cycle() {
        assert_eq!(IMIX_CYCLE.iter().filter(|&&s| s == 64).count(), 7);
        assert_eq!(IMIX_CYCLE.iter().filter(|&&s| s == 594).count(), 4);
        assert_eq!(IMIX_CYCLE.iter().filter(|&&s| s == 1518).count(), 1);
        let mut s = FrameSpec::new(combos()[0].clone());
        s.sizes = FrameSize::Imix;
        s.flows = 1000;
        let fs = s.compile().unwrap();
        assert_eq!(fs.period(), 3000);
        assert_eq!(fs.max_len(), 1514);
        let mut buf = vec![0u8; fs.max_len()];
        for k in 0..48 {
            let n = fs.write(k, &Stamp::default(), &mut buf);
            assert_eq!(n + 4, IMIX_CYCLE[(k % 12) as usize]);
            verify(&s.template.layers, &buf[..n]).unwrap();
        }
        s.sizes = FrameSize::Cycle(vec![64, 65, 1518]);
        s.flows = 3;
        assert_eq!(s.compile().unwrap().period(), 3);
        s.flows = 4;
        assert_eq!(s.compile().unwrap().period(), 12);
    }

    #[test]
    fn stamp_roundtrip_and_checksums() {
        for t in combos() {
            for size in [165, 200, 1517, 1518] {
                let mut s = FrameSpec::new(t.clone());
                s.sizes = FrameSize::Fixed(size);
                let fs = s.compile().unwrap();
                assert!(fs.stamped());
                let st = Stamp {
                    stream: 7,
                    seq: 0xdead_beef,
                    tx_ns: 0x4567_89ab_cdef,
                };
                let f = fs.frame(0, &st);
                assert_eq!(f.len(), size - 4);
                assert_eq!(crate::stamp::find_stamp(&f), Some(st));
                verify(&t.layers, &f).unwrap_or_else(|e| panic!("{t:?} {size}: {e}"));
                assert_eq!(f, reference(&s, 0, &st));
            }
        }
    }

    #[test]
    fn etherparse_agrees() {
        use etherparse::{NetHeaders, PacketHeaders, TransportHeader};
        let st = Stamp {
            stream: 1,
            seq: 2,
            tx_ns: 3,
        };
        for (t, size) in [
            (&combos()[0], 65usize),
            (&combos()[1], 100),
            (&combos()[7], 91),
        ] {
            let mut s = FrameSpec::new(t.clone());
            s.sizes = FrameSize::Fixed(size);
            let f = s.compile().unwrap().frame(0, &st);
            let h = PacketHeaders::from_ethernet_slice(&f).unwrap();
            let payload = &f[t.header_len()..];
            let (net, tr) = (h.net.unwrap(), h.transport.unwrap());
            let (stored, computed) = match (&net, &tr) {
                (NetHeaders::Ipv4(ip, _), TransportHeader::Udp(u)) => {
                    assert_eq!(ip.header_checksum, ip.calc_header_checksum());
                    (u.checksum, u.calc_checksum_ipv4(ip, payload).unwrap())
                }
                (NetHeaders::Ipv4(ip, _), TransportHeader::Tcp(u)) => {
                    assert_eq!(ip.header_checksum, ip.calc_header_checksum());
                    (u.checksum, u.calc_checksum_ipv4(ip, payload).unwrap())
                }
                (NetHeaders::Ipv6(ip, _), TransportHeader::Tcp(u)) => {
                    (u.checksum, u.calc_checksum_ipv6(ip, payload).unwrap())
                }
                other => panic!("{other:?}"),
            };
            assert_eq!(stored, computed, "{t:?}");
        }
    }

    #[test]
    fn reversed_answers_forward() {
        let mut s = FrameSpec::new(combos()[2].clone());
        s.sizes = FrameSize::Fixed(128);
        s.flows = 100;
        s.vary = vec![
            vary(
                "ipv4[1].src",
                VaryOp::Random,
                Some(0xc0a8_0101),
                Some(0xc0a8_01ff),
            ),
            vary("udp[1].sport", VaryOp::Inc { step: 1 }, Some(1024), None),
            vary("udp.sport", VaryOp::Inc { step: 1 }, Some(49152), None),
        ];
        let fwd = s.compile().unwrap();
        let rev = fwd.reversed().unwrap();
        let st = Stamp::default();
        for k in [0, 1, 57, 99] {
            let (f, r) = (fwd.frame(k, &st), rev.frame(k, &st));
            // Outer: MACs and addresses swapped; the VXLAN port stays the destination.
            assert_eq!((&f[0..6], &f[6..12]), (&r[6..12], &r[0..6]));
            assert_eq!((&f[26..30], &f[30..34]), (&r[30..34], &r[26..30]));
            assert_eq!(&f[34..38], &r[34..38]);
            // Inner: addresses and ports swapped, flow for flow.
            assert_eq!((&f[76..80], &f[80..84]), (&r[80..84], &r[76..80]));
            assert_eq!((&f[84..86], &f[86..88]), (&r[86..88], &r[84..86]));
            verify(&s.template.layers, &r).unwrap();
            assert_eq!(r, reference(&s.to_reversed(), k, &st));
        }
        // Reversing twice is the forward stream.
        let back = rev.reversed().unwrap();
        assert_eq!(back.frame(3, &st), fwd.frame(3, &st));
    }

    #[test]
    fn patched_frames_equal_precomputed() {
        let mut s = FrameSpec::new(combos()[3].clone());
        s.sizes = FrameSize::Cycle(vec![128, 129, 300]);
        s.flows = 7;
        s.vary = vec![
            vary("ipv4.src", VaryOp::Inc { step: 3 }, None, None),
            vary("ipv4[1].ttl", VaryOp::Random, None, None),
            vary("eth[1].dst", VaryOp::Random, None, None),
            vary("vlan.pcp", VaryOp::Inc { step: 1 }, None, None),
            vary("geneve.vni", VaryOp::Inc { step: 1 }, Some(1), Some(5)),
        ];
        let pre = s.compile().unwrap();
        let patch = s.compile_with_limit(0).unwrap();
        assert!(pre.precomputed() && !patch.precomputed());
        assert_eq!(pre.period(), patch.period());
        for k in 0..50 {
            let st = Stamp {
                stream: k as u16,
                seq: k as u32 * 77,
                tx_ns: k * 1_000_003,
            };
            let (a, b) = (pre.frame(k, &st), patch.frame(k, &st));
            assert_eq!(a, b, "packet {k}");
            assert_eq!(a, reference(&s, k, &st));
        }
        // A buffer too short gets nothing.
        assert_eq!(pre.write(0, &Stamp::default(), &mut [0u8; 10]), 0);
        assert_eq!(patch.write(0, &Stamp::default(), &mut [0u8; 10]), 0);
    }

    #[test]
    fn a_burst_equals_its_packets_written_one_by_one() {
        use datapath::packet::{Batch, Pool};
        let mut s = FrameSpec::new(combos()[3].clone());
        s.sizes = FrameSize::Cycle(vec![128, 129, 300]);
        s.flows = 7;
        s.vary = vec![vary("ipv4.src", VaryOp::Inc { step: 3 }, None, None)];
        let mut pool = Pool::new(64, 0);
        for fs in [s.compile().unwrap(), s.compile_with_limit(0).unwrap()] {
            // Bursts that wrap the period (21 packets) at different places, odd sequences.
            for k0 in [0u64, 5, 19, 20, 1000] {
                let st = Stamp {
                    stream: 3,
                    seq: u32::MAX - 4,
                    tx_ns: 123_456_789,
                };
                let mut b = Batch::new();
                let bytes = fs.write_burst(k0, 32, &st, &mut pool, &mut b);
                assert_eq!(b.len(), 32);
                assert_eq!(bytes, b.bytes());
                for (i, p) in b.packets().iter().enumerate() {
                    let one = Stamp {
                        seq: st.seq.wrapping_add(i as u32),
                        ..st
                    };
                    assert_eq!(p.data(), fs.frame(k0 + i as u64, &one), "k {k0} + {i}");
                }
                pool.free_batch(&mut b);
            }
        }
    }

    /// A random variation list for a template: fields it has, random ranges.
    fn arb_spec() -> impl Strategy<Value = (FrameSpec, bool)> {
        let n = combos().len();
        (
            0..n,
            proptest::collection::vec(64usize..700, 1..4),
            1u64..2000,
            any::<bool>(),
            any::<u64>(),
            proptest::collection::vec(
                (
                    0usize..19,
                    0usize..2,
                    any::<bool>(),
                    any::<u128>(),
                    any::<u128>(),
                    1u64..1000,
                ),
                0..5,
            ),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(ti, sizes, flows, stamp, seed, vs, reversed, patch)| {
                let template = combos()[ti].clone();
                let mut vary: Vec<Vary> = Vec::new();
                for (fi, idx, rnd, a, b, step) in vs {
                    let field = FieldKind::ALL[fi];
                    let have = template
                        .layers
                        .iter()
                        .filter(|l| l.kind() == field.layer())
                        .count();
                    if have == 0 {
                        continue;
                    }
                    let f = FieldRef {
                        field,
                        index: idx % have,
                    };
                    if vary.iter().any(|v| v.field == f) {
                        continue;
                    }
                    let li = template
                        .layers
                        .iter()
                        .enumerate()
                        .filter(|(_, l)| l.kind() == field.layer())
                        .nth(f.index)
                        .unwrap()
                        .0;
                    if field.slot(&template.layers[li], 0).is_none() {
                        continue;
                    }
                    let (a, b) = (a & field.max(), b & field.max());
                    let (from, to) = (a.min(b), a.max(b));
                    vary.push(Vary {
                        field: f,
                        op: if rnd {
                            VaryOp::Random
                        } else {
                            VaryOp::Inc { step }
                        },
                        from: Some(from),
                        to: Some(to),
                    });
                }
                let headers = template.header_len();
                let sizes = sizes.into_iter().map(|s| s.max(headers + 20)).collect();
                (
                    FrameSpec {
                        template,
                        sizes: FrameSize::Cycle(sizes),
                        flows,
                        vary,
                        seed,
                        stamp,
                        reversed,
                    },
                    patch,
                )
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn every_frame_is_valid((spec, patch) in arb_spec(), ks in proptest::collection::vec(any::<u64>(), 8), stream: u16, seq: u32, tx_ns: u64) {
            let fs = if patch { spec.compile_with_limit(0) } else { spec.compile() }.unwrap();
            let st = Stamp { stream, seq, tx_ns };
            let layers = if spec.reversed { spec.template.reversed().layers } else { spec.template.layers.clone() };
            let mut buf = vec![0u8; fs.max_len()];
            for k in ks.into_iter().chain(0..4) {
                let n = fs.write(k, &st, &mut buf);
                let f = &buf[..n];
                prop_assert!(verify(&layers, f).is_ok(), "{:?}", verify(&layers, f));
                prop_assert_eq!(f, &reference(&spec, k, &st)[..]);
                if spec.stamp {
                    let carried = Stamp { tx_ns: tx_ns & crate::stamp::TX_NS_MASK, ..st };
                    prop_assert_eq!(crate::stamp::find_stamp(f), Some(carried));
                }
            }
        }

        #[test]
        fn stamping_any_frame_keeps_checksums((spec, _) in arb_spec(), stamps in proptest::collection::vec((any::<u16>(), any::<u32>(), any::<u64>()), 1..8)) {
            let mut spec = spec;
            spec.stamp = true;
            let fs = spec.compile().unwrap();
            let layers = if spec.reversed { spec.template.reversed().layers } else { spec.template.layers.clone() };
            for (i, (stream, seq, tx_ns)) in stamps.into_iter().enumerate() {
                let st = Stamp { stream, seq, tx_ns };
                let f = fs.frame(i as u64, &st);
                prop_assert!(verify(&layers, &f).is_ok());
            }
        }
    }
}
