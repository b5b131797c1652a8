//! Per-flow variation: the fields a stream can vary (`ipv4.src`, `udp[1].sport`, ...), where
//! each is in a built frame, and the value flow `i` gives it, `inc` (a step per flow, wrapping
//! in the range) or `random` (a hash of the seed, the field's name and `i`, the same on every
//! run). What TRex calls its field engine and pktgen its ranges; here a field's value is written
//! into a frame with `write_field`, which keeps every checksum that covers it valid.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use super::checksum::{Site, set_bytes};
use super::layer::is_tunnel_udp;
use super::template::Layout;
use super::{BuildError, FrameSpec, Layer, LayerKind, Template, parse_mac_addr};

/// A field that can vary per flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldKind {
    /// `eth.src`
    EthSrc,
    /// `eth.dst`
    EthDst,
    /// `vlan.vid`
    VlanVid,
    /// `vlan.pcp`
    VlanPcp,
    /// `ipv4.src`
    Ipv4Src,
    /// `ipv4.dst`
    Ipv4Dst,
    /// `ipv4.tos`
    Ipv4Tos,
    /// `ipv4.ttl`
    Ipv4Ttl,
    /// `ipv6.src`
    Ipv6Src,
    /// `ipv6.dst`
    Ipv6Dst,
    /// `ipv6.fl`
    Ipv6Fl,
    /// `udp.sport`
    UdpSport,
    /// `udp.dport`
    UdpDport,
    /// `tcp.sport`
    TcpSport,
    /// `tcp.dport`
    TcpDport,
    /// `vxlan.vni`
    VxlanVni,
    /// `geneve.vni`
    GeneveVni,
    /// `gre.key`
    GreKey,
    /// `mpls.label`
    MplsLabel,
}

impl FieldKind {
    /// Every field.
    pub const ALL: [FieldKind; 19] = [
        FieldKind::EthSrc,
        FieldKind::EthDst,
        FieldKind::VlanVid,
        FieldKind::VlanPcp,
        FieldKind::Ipv4Src,
        FieldKind::Ipv4Dst,
        FieldKind::Ipv4Tos,
        FieldKind::Ipv4Ttl,
        FieldKind::Ipv6Src,
        FieldKind::Ipv6Dst,
        FieldKind::Ipv6Fl,
        FieldKind::UdpSport,
        FieldKind::UdpDport,
        FieldKind::TcpSport,
        FieldKind::TcpDport,
        FieldKind::VxlanVni,
        FieldKind::GeneveVni,
        FieldKind::GreKey,
        FieldKind::MplsLabel,
    ];

    /// The layer it is in.
    pub const fn layer(self) -> LayerKind {
        use FieldKind as F;
        match self {
            F::EthSrc | F::EthDst => LayerKind::Eth,
            F::VlanVid | F::VlanPcp => LayerKind::Vlan,
            F::Ipv4Src | F::Ipv4Dst | F::Ipv4Tos | F::Ipv4Ttl => LayerKind::Ipv4,
            F::Ipv6Src | F::Ipv6Dst | F::Ipv6Fl => LayerKind::Ipv6,
            F::UdpSport | F::UdpDport => LayerKind::Udp,
            F::TcpSport | F::TcpDport => LayerKind::Tcp,
            F::VxlanVni => LayerKind::Vxlan,
            F::GeneveVni => LayerKind::Geneve,
            F::GreKey => LayerKind::Gre,
            F::MplsLabel => LayerKind::Mpls,
        }
    }

    /// The field's name within its layer.
    pub const fn name(self) -> &'static str {
        use FieldKind as F;
        match self {
            F::EthSrc | F::Ipv4Src | F::Ipv6Src => "src",
            F::EthDst | F::Ipv4Dst | F::Ipv6Dst => "dst",
            F::VlanVid => "vid",
            F::VlanPcp => "pcp",
            F::Ipv4Tos => "tos",
            F::Ipv4Ttl => "ttl",
            F::Ipv6Fl => "fl",
            F::UdpSport | F::TcpSport => "sport",
            F::UdpDport | F::TcpDport => "dport",
            F::VxlanVni | F::GeneveVni => "vni",
            F::GreKey => "key",
            F::MplsLabel => "label",
        }
    }

    /// Width in bits.
    pub const fn bits(self) -> u32 {
        use FieldKind as F;
        match self {
            F::EthSrc | F::EthDst => 48,
            F::VlanVid => 12,
            F::VlanPcp => 3,
            F::Ipv4Src | F::Ipv4Dst | F::GreKey => 32,
            F::Ipv4Tos | F::Ipv4Ttl => 8,
            F::Ipv6Src | F::Ipv6Dst => 128,
            F::Ipv6Fl | F::MplsLabel => 20,
            F::UdpSport | F::UdpDport | F::TcpSport | F::TcpDport => 16,
            F::VxlanVni | F::GeneveVni => 24,
        }
    }

    /// Largest value.
    pub const fn max(self) -> u128 {
        if self.bits() == 128 {
            u128::MAX
        } else {
            (1u128 << self.bits()) - 1
        }
    }

    /// Its counterpart in a reversed stream (source ↔ destination).
    pub(super) const fn swapped(self) -> FieldKind {
        use FieldKind as F;
        match self {
            F::EthSrc => F::EthDst,
            F::EthDst => F::EthSrc,
            F::Ipv4Src => F::Ipv4Dst,
            F::Ipv4Dst => F::Ipv4Src,
            F::Ipv6Src => F::Ipv6Dst,
            F::Ipv6Dst => F::Ipv6Src,
            F::UdpSport => F::UdpDport,
            F::UdpDport => F::UdpSport,
            F::TcpSport => F::TcpDport,
            F::TcpDport => F::TcpSport,
            other => other,
        }
    }

    /// Reads a value written as a string: a MAC address for Ethernet fields, an address for IP
    /// addresses, else a decimal or `0x` hexadecimal number.
    pub fn parse_value(self, s: &str) -> Result<u128, String> {
        use FieldKind as F;
        let s = s.trim();
        let v = match self {
            F::EthSrc | F::EthDst => mac_to_u128(parse_mac_addr(s)?.0),
            F::Ipv4Src | F::Ipv4Dst => u128::from(
                s.parse::<Ipv4Addr>()
                    .map_err(|_| format!("'{s}' is not an IPv4 address"))?
                    .to_bits(),
            ),
            F::Ipv6Src | F::Ipv6Dst => s
                .parse::<Ipv6Addr>()
                .map_err(|_| format!("'{s}' is not an IPv6 address"))?
                .to_bits(),
            _ => {
                let (digits, radix) = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                    Some(h) => (h, 16),
                    None => (s, 10),
                };
                u128::from_str_radix(digits, radix).map_err(|_| format!("'{s}' is not a number"))?
            }
        };
        self.check_value(v)?;
        Ok(v)
    }

    /// `Err` when `v` does not fit the field.
    pub fn check_value(self, v: u128) -> Result<(), String> {
        if v > self.max() {
            return Err(format!(
                "{v} does not fit {} ({} bits)",
                self.name(),
                self.bits()
            ));
        }
        Ok(())
    }

    /// Where the field is in a layer at offset `at`; `None` if the layer lacks it (a GRE
    /// header without key).
    pub(super) fn slot(self, layer: &Layer, at: usize) -> Option<Slot> {
        use FieldKind as F;
        let s = |off: usize, len: usize, mask: u128, shift: u32| {
            Some(Slot {
                off: at + off,
                len,
                mask,
                shift,
            })
        };
        match (self, layer) {
            (F::EthDst, _) => s(0, 6, 0xffff_ffff_ffff, 0),
            (F::EthSrc, _) => s(6, 6, 0xffff_ffff_ffff, 0),
            (F::VlanVid, _) => s(0, 2, 0x0fff, 0),
            (F::VlanPcp, _) => s(0, 2, 0xe000, 13),
            (F::Ipv4Tos, _) => s(1, 1, 0xff, 0),
            (F::Ipv4Ttl, _) => s(8, 1, 0xff, 0),
            (F::Ipv4Src, _) => s(12, 4, 0xffff_ffff, 0),
            (F::Ipv4Dst, _) => s(16, 4, 0xffff_ffff, 0),
            (F::Ipv6Fl, _) => s(0, 4, 0xf_ffff, 0),
            (F::Ipv6Src, _) => s(8, 16, u128::MAX, 0),
            (F::Ipv6Dst, _) => s(24, 16, u128::MAX, 0),
            (F::UdpSport | F::TcpSport, _) => s(0, 2, 0xffff, 0),
            (F::UdpDport | F::TcpDport, _) => s(2, 2, 0xffff, 0),
            (F::VxlanVni | F::GeneveVni, _) => s(4, 3, 0xff_ffff, 0),
            (F::GreKey, Layer::Gre(g)) => {
                g.key?;
                s(if g.checksum { 8 } else { 4 }, 4, 0xffff_ffff, 0)
            }
            (F::GreKey, _) => None,
            (F::MplsLabel, _) => s(0, 4, 0xffff_f000, 12),
        }
    }
}

/// A field of one layer of a template: `LAYER[INDEX].FIELD`, the index counting layers of that
/// kind from the outermost (0, the default, may be left out: `ipv4.src`, `ipv4[1].src`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FieldRef {
    /// The field.
    pub field: FieldKind,
    /// Which layer of the field's kind.
    pub index: usize,
}

impl FromStr for FieldRef {
    type Err = String;

    fn from_str(s: &str) -> Result<FieldRef, String> {
        let bad = || {
            format!(
                "'{s}': expected LAYER.FIELD or LAYER[INDEX].FIELD, fields: {}",
                FieldKind::ALL
                    .iter()
                    .map(|f| format!("{}.{}", f.layer(), f.name()))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let (layer, field) = s.rsplit_once('.').ok_or_else(bad)?;
        let (layer, index) = match layer.split_once('[') {
            Some((l, rest)) => {
                let i = rest
                    .strip_suffix(']')
                    .and_then(|i| i.parse::<usize>().ok())
                    .ok_or_else(bad)?;
                (l, i)
            }
            None => (layer, 0),
        };
        let kind = LayerKind::from_name(layer).ok_or_else(bad)?;
        let field = FieldKind::ALL
            .into_iter()
            .find(|f| f.layer() == kind && f.name() == field)
            .ok_or_else(bad)?;
        Ok(FieldRef { field, index })
    }
}

impl fmt::Display for FieldRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.index == 0 {
            write!(f, "{}.{}", self.field.layer(), self.field.name())
        } else {
            write!(
                f,
                "{}[{}].{}",
                self.field.layer(),
                self.index,
                self.field.name()
            )
        }
    }
}

/// How a field varies over the flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VaryOp {
    /// Flow `i` gets `from + (i × step) mod (to - from + 1)`.
    Inc {
        /// Increment per flow.
        step: u64,
    },
    /// Flow `i` gets a pseudo-random value in `[from, to]`, a function of the seed, the field
    /// and `i`.
    Random,
}

/// One varied field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vary {
    /// The field.
    pub field: FieldRef,
    /// How it varies.
    pub op: VaryOp,
    /// Lowest value (default: the template's value).
    pub from: Option<u128>,
    /// Highest value (default: the field's largest).
    pub to: Option<u128>,
}

/// Where a field is in a frame: `len` big-endian bytes at `off`, the field being the bits of
/// `mask` shifted left by `shift`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Slot {
    off: usize,
    len: usize,
    mask: u128,
    shift: u32,
}

impl Slot {
    fn read(&self, frame: &[u8]) -> u128 {
        let v = frame[self.off..self.off + self.len]
            .iter()
            .fold(0u128, |a, &b| (a << 8) | u128::from(b));
        (v & self.mask) >> self.shift
    }
}

/// A varied field, resolved.
#[derive(Clone, Debug)]
pub(super) struct Plan {
    pub(super) slot: Slot,
    op: VaryOp,
    from: u128,
    span: u128,
    key: u64,
}

impl Plan {
    pub(super) fn value(&self, flow: u64, seed: u64) -> u128 {
        let off = match self.op {
            // step < 2^64 and flow < 2^64: the product fits 128 bits.
            VaryOp::Inc { step } => u128::from(flow) * u128::from(step),
            VaryOp::Random => random128(seed, self.key, flow),
        };
        let off = if self.span == 0 { off } else { off % self.span };
        self.from.wrapping_add(off)
    }
}

impl FrameSpec {
    /// Resolves the varied fields against the (possibly reversed) template.
    pub(super) fn plans(&self, tpl: &Template, layout: &Layout) -> Result<Vec<Plan>, BuildError> {
        let mut plans: Vec<Plan> = Vec::with_capacity(self.vary.len());
        let mut seen: Vec<FieldRef> = Vec::new();
        for (vi, v) in self.vary.iter().enumerate() {
            let name = v.field.to_string();
            let err = |key: &'static str, message: String| BuildError::Vary {
                index: vi,
                field: name.clone(),
                key,
                message,
            };
            if seen.contains(&v.field) {
                return Err(err("field", format!("{name} is varied twice")));
            }
            seen.push(v.field);
            // The layer in the template as given (before reversal).
            let kind = v.field.field.layer();
            let Some(li) = self
                .template
                .layers
                .iter()
                .enumerate()
                .filter(|(_, l)| l.kind() == kind)
                .nth(v.field.index)
                .map(|(i, _)| i)
            else {
                let have = self
                    .template
                    .layers
                    .iter()
                    .filter(|l| l.kind() == kind)
                    .count();
                return Err(err(
                    "field",
                    format!(
                        "the template has {have} {kind} layer(s), no {kind}[{}]",
                        v.field.index
                    ),
                ));
            };
            let field = if self.reversed
                && !(kind == LayerKind::Udp && is_tunnel_udp(&self.template.layers, li))
            {
                v.field.field.swapped()
            } else {
                v.field.field
            };
            let Some(slot) = field.slot(&tpl.layers[li], layout.offs[li]) else {
                return Err(err(
                    "field",
                    format!(
                        "{name}: the {kind} layer has no such field (a GRE key must be set to vary it)"
                    ),
                ));
            };
            let max = v.field.field.max();
            let from = match v.from {
                Some(f) => f,
                // The template's own value, read from a frame of it.
                None => {
                    let f = tpl.emit(layout, layout.header_len, false);
                    slot.read(&f)
                }
            };
            let to = v.to.unwrap_or(max);
            if from > max {
                return Err(err(
                    "from",
                    format!(
                        "{from:#x} does not fit {name} ({} bits)",
                        v.field.field.bits()
                    ),
                ));
            }
            if to > max {
                return Err(err(
                    "to",
                    format!(
                        "{to:#x} does not fit {name} ({} bits)",
                        v.field.field.bits()
                    ),
                ));
            }
            if from > to {
                return Err(err("to", format!("to ({to:#x}) is below from ({from:#x})")));
            }
            if let VaryOp::Inc { step: 0 } = v.op {
                return Err(err("step", "step must be at least 1".into()));
            }
            plans.push(Plan {
                slot,
                op: v.op,
                from,
                // 0 stands for 2^128 (the whole IPv6 address space).
                span: (to - from).wrapping_add(1),
                key: fnv1a(name.as_bytes()),
            });
        }
        Ok(plans)
    }
}

/// Writes `value` into a field and updates every checksum that covers it.
pub(super) fn write_field(frame: &mut [u8], sites: &[Site], slot: &Slot, value: u128) {
    let mut b = [0u8; 16];
    let n = slot.len;
    b[..n].copy_from_slice(&frame[slot.off..slot.off + n]);
    let old = b[..n].iter().fold(0u128, |a, &x| (a << 8) | u128::from(x));
    let new = (old & !slot.mask) | ((value << slot.shift) & slot.mask);
    for (i, x) in b[..n].iter_mut().enumerate() {
        *x = (new >> (8 * (n - 1 - i))) as u8;
    }
    set_bytes(frame, sites, slot.off, &b[..n], usize::MAX, sites.len());
}

fn fnv1a(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &c| {
        (h ^ u64::from(c)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn random128(seed: u64, key: u64, i: u64) -> u128 {
    let a = splitmix64(seed ^ splitmix64(key ^ splitmix64(i)));
    let b = splitmix64(a ^ 0x6a09_e667_f3bc_c909);
    (u128::from(a) << 64) | u128::from(b)
}

fn mac_to_u128(m: [u8; 6]) -> u128 {
    m.iter().fold(0u128, |a, &b| (a << 8) | u128::from(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::FrameSize;
    use crate::build::fixtures::*;
    use crate::stamp::Stamp;

    #[test]
    fn field_names() {
        let f: FieldRef = "ipv4[1].src".parse().unwrap();
        assert_eq!((f.field, f.index), (FieldKind::Ipv4Src, 1));
        assert_eq!(f.to_string(), "ipv4[1].src");
        assert_eq!(
            "udp.sport".parse::<FieldRef>().unwrap().to_string(),
            "udp.sport"
        );
        for bad in [
            "ipv4",
            "ipv4.foo",
            "ip.src",
            "ipv4[x].src",
            "ipv4[1.src",
            "udp.src",
        ] {
            assert!(bad.parse::<FieldRef>().is_err(), "{bad}");
        }
        assert_eq!(
            FieldKind::Ipv4Src.parse_value("10.0.3.232"),
            Ok(0x0a00_03e8)
        );
        assert_eq!(
            FieldKind::EthSrc.parse_value("00:00:00:00:01:ff"),
            Ok(0x1ff)
        );
        assert_eq!(FieldKind::VlanVid.parse_value("0xfff"), Ok(4095));
        assert!(FieldKind::VlanVid.parse_value("4096").is_err());
        assert!(FieldKind::Ipv6Src.parse_value("10.0.0.1").is_err());
    }

    #[test]
    fn inc_variation() {
        let mut s = FrameSpec::new(combos()[0].clone());
        s.flows = 1000;
        s.vary = vec![
            vary(
                "ipv4.src",
                VaryOp::Inc { step: 1 },
                Some(0x0a00_0001),
                Some(0x0a00_03e8),
            ),
            vary("udp.sport", VaryOp::Inc { step: 7 }, Some(1024), Some(1033)),
            vary("ipv4.tos", VaryOp::Inc { step: 1 }, None, None),
        ];
        let fs = s.compile().unwrap();
        assert!(fs.precomputed());
        let st = Stamp::default();
        for k in [0u64, 1, 2, 999, 1000, 1001, 123_456] {
            let f = fs.frame(k, &st);
            let i = k % 1000;
            assert_eq!(&f[26..30], &(0x0a00_0001u32 + i as u32).to_be_bytes());
            assert_eq!(
                u16::from_be_bytes([f[34], f[35]]),
                1024 + (i * 7 % 10) as u16
            );
            // tos from the template's 0, up to 255, then around.
            assert_eq!(f[15], (i % 256) as u8);
            verify(&s.template.layers, &f).unwrap();
            assert_eq!(f, reference(&s, k, &st));
        }
    }

    #[test]
    fn inc_wraps_whole_fields() {
        // The whole IPv6 space (span 2^128) and a field at its maximum.
        let mut s = FrameSpec::new(combos()[1].clone());
        s.sizes = FrameSize::Fixed(128);
        s.flows = 5;
        s.vary = vec![
            vary("ipv6.src", VaryOp::Inc { step: u64::MAX }, Some(0), None),
            vary("vlan.vid", VaryOp::Inc { step: 1 }, Some(4094), Some(4095)),
            vary("tcp.dport", VaryOp::Inc { step: 1 }, Some(65535), None),
        ];
        let fs = s.compile().unwrap();
        for k in 0..10 {
            let f = fs.frame(k, &Stamp::default());
            let i = u128::from(k % 5);
            assert_eq!(&f[26..42], &(i * u128::from(u64::MAX)).to_be_bytes());
            assert_eq!(
                u16::from_be_bytes([f[14], f[15]]) & 0xfff,
                4094 + (i % 2) as u16
            );
            assert_eq!(&f[60..62], &[0xff, 0xff]);
            verify(&s.template.layers, &f).unwrap();
        }
    }

    #[test]
    fn random_variation() {
        let mut s = FrameSpec::new(combos()[3].clone());
        s.sizes = FrameSize::Fixed(128);
        s.flows = 1000;
        s.vary = vec![
            vary("udp[1].sport", VaryOp::Random, Some(1024), Some(65535)),
            vary("geneve.vni", VaryOp::Random, Some(1), Some(3)),
        ];
        let fs = s.compile().unwrap();
        let again = s.compile().unwrap();
        let mut seen = std::collections::HashSet::new();
        let mut vnis = std::collections::HashSet::new();
        for k in 0..1000 {
            let f = fs.frame(k, &Stamp::default());
            assert_eq!(f, again.frame(k, &Stamp::default()));
            let sport = u16::from_be_bytes([f[96], f[97]]);
            assert!(sport >= 1024);
            seen.insert(sport);
            let vni = u32::from_be_bytes([0, f[50], f[51], f[52]]);
            assert!((1..=3).contains(&vni));
            vnis.insert(vni);
            verify(&s.template.layers, &f).unwrap();
        }
        assert!(seen.len() > 950, "{} distinct", seen.len());
        assert_eq!(vnis.len(), 3);
        s.seed = 2;
        let other = s.compile().unwrap();
        assert!(
            (0..10).any(|k| other.frame(k, &Stamp::default()) != fs.frame(k, &Stamp::default()))
        );
    }

    #[test]
    fn vary_errors() {
        let mut s = FrameSpec::new(combos()[0].clone());
        let key = |s: &FrameSpec| match s.compile() {
            Err(BuildError::Vary { key, .. }) => key,
            other => panic!("{other:?}"),
        };
        s.vary = vec![vary("ipv4[1].src", VaryOp::Random, None, None)];
        assert_eq!(key(&s), "field");
        s.vary = vec![vary("tcp.sport", VaryOp::Random, None, None)];
        assert_eq!(key(&s), "field");
        s.vary = vec![vary("udp.sport", VaryOp::Random, Some(5), Some(4))];
        assert_eq!(key(&s), "to");
        s.vary = vec![vary("udp.sport", VaryOp::Random, Some(70000), None)];
        assert_eq!(key(&s), "from");
        s.vary = vec![vary("udp.sport", VaryOp::Inc { step: 0 }, None, None)];
        assert_eq!(key(&s), "step");
        s.vary = vec![
            vary("udp.sport", VaryOp::Random, None, None),
            vary("udp.sport", VaryOp::Random, None, None),
        ];
        assert_eq!(key(&s), "field");
        // A GRE header without key has no key to vary.
        let mut s = FrameSpec::new(combos()[10].clone());
        s.sizes = FrameSize::Fixed(200);
        s.vary = vec![vary("gre.key", VaryOp::Random, None, None)];
        assert_eq!(key(&s), "field");
    }
}
