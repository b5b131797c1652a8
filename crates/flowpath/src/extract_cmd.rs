//! `flowpath extract`: a capture's packets reduced to datapath flow keys.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use flow::odp::KeyAttrs;
use flow::{FlowKey, Malformed, extract};
use netdev::pcap::PcapReader;

/// The built-in sample: the seed scenarios' traffic (plain, VXLAN L3-VPN, MPLSoGRE, GENEVE with
/// the OVN option) and a few protocols and malformed frames, from the test fixtures.
pub(crate) const SAMPLE: &[(&str, &[u8])] = &[
    (
        "plain_8",
        include_bytes!("../../../testdata/pcap/plain_8.pcap"),
    ),
    (
        "vxlan_l3vpn_8",
        include_bytes!("../../../testdata/pcap/vxlan_l3vpn_8.pcap"),
    ),
    (
        "mplsogre_8",
        include_bytes!("../../../testdata/pcap/mplsogre_8.pcap"),
    ),
    (
        "geneve_8",
        include_bytes!("../../../testdata/pcap/geneve_8.pcap"),
    ),
    ("vlan", include_bytes!("../../../testdata/pcap/vlan.pcap")),
    ("arp", include_bytes!("../../../testdata/pcap/arp.pcap")),
    ("ipv6", include_bytes!("../../../testdata/pcap/ipv6.pcap")),
    (
        "truncated",
        include_bytes!("../../../testdata/pcap/truncated.pcap"),
    ),
];

/// Counts for `--summary`.
#[derive(Default)]
struct Summary {
    packets: u64,
    by_protocol: BTreeMap<String, u64>,
    by_reason: BTreeMap<Malformed, u64>,
}

impl Summary {
    fn print(&self, out: &mut impl Write) -> std::io::Result<()> {
        let malformed: u64 = self.by_reason.values().sum();
        writeln!(out, "packets: {}", self.packets)?;
        writeln!(out, "malformed: {malformed}")?;
        writeln!(out, "by protocol:")?;
        let mut protos: Vec<_> = self.by_protocol.iter().collect();
        protos.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (p, n) in protos {
            writeln!(out, "  {p:<24} {n:>10}")?;
        }
        if malformed > 0 {
            writeln!(out, "by malformation:")?;
            for (r, n) in &self.by_reason {
                writeln!(out, "  {:<24} {n:>10}", r.name())?;
            }
        }
        Ok(())
    }
}

pub fn run(
    file: Option<&Path>,
    in_port: u32,
    summary: bool,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let mut s = Summary::default();
    let mut key = FlowKey::new();
    match file {
        Some(path) => {
            let f = std::fs::File::open(path).with_context(|| format!("{}", path.display()))?;
            let r = PcapReader::new(std::io::BufReader::new(f))
                .with_context(|| format!("{}", path.display()))?;
            each_packet(r, in_port, summary, &mut key, &mut s, out)
                .with_context(|| format!("{}", path.display()))?;
        }
        None => {
            for (name, bytes) in SAMPLE {
                let r = PcapReader::new(*bytes).with_context(|| format!("sample {name}"))?;
                each_packet(r, in_port, summary, &mut key, &mut s, out)
                    .with_context(|| format!("sample {name}"))?;
            }
        }
    }
    if summary {
        s.print(out)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Extracts every packet of `r`. Keys of the packets before a damaged record are printed
/// before the error is returned.
fn each_packet<R: Read>(
    mut r: PcapReader<R>,
    in_port: u32,
    summary: bool,
    key: &mut FlowKey,
    s: &mut Summary,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let mut data = Vec::new();
    let mut line = String::new();
    // Every field of an extracted key is exact.
    let exact = flow::Mask::exact();
    while r.next_into(&mut data)?.is_some() {
        key.clear();
        key.set_in_port(in_port);
        let x = extract(&data, key);
        s.packets += 1;
        if summary {
            *s.by_protocol.entry(protocol_label(key, &x)).or_default() += 1;
            if let Some(why) = x.malformed {
                *s.by_reason.entry(why).or_default() += 1;
            }
        } else {
            line.clear();
            let attrs = KeyAttrs::from_flow(key);
            flow::odp::format_key_into(&mut line, key, &exact, &attrs, None, None);
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

/// A short name of a packet's protocols for the summary, e.g. `vlan/ipv4/udp`.
fn protocol_label(k: &FlowKey, x: &flow::Extracted) -> String {
    let mut l = String::new();
    if k.vlan_tci() & flow::key::VLAN_CFI != 0 {
        l.push_str(if k.vlan2_tci() & flow::key::VLAN_CFI != 0 {
            "qinq/"
        } else {
            "vlan/"
        });
    }
    let l4 = |k: &FlowKey, v6: bool| -> String {
        if k.nw_frag() & flow::key::nw_frag::LATER != 0 {
            return "fragment".into();
        }
        match (k.nw_proto(), v6) {
            (6, _) => "tcp".into(),
            (17, _) => "udp".into(),
            (132, _) => "sctp".into(),
            (1, false) => "icmp".into(),
            (58, true) => "icmpv6".into(),
            (47, _) => "gre".into(),
            (p, _) => format!("proto {p}"),
        }
    };
    let ip = matches!(k.eth_type(), 0x0800 | 0x86dd);
    if ip && x.layers.l3 == flow::extract::NO_LAYER {
        l.push_str(if k.eth_type() == 0x0800 {
            "ipv4 (invalid header)"
        } else {
            "ipv6 (invalid header)"
        });
        return l;
    }
    match k.eth_type() {
        0x0800 => l.push_str(&format!("ipv4/{}", l4(k, false))),
        0x86dd => l.push_str(&format!("ipv6/{}", l4(k, true))),
        0x0806 => l.push_str("arp"),
        0x8035 => l.push_str("rarp"),
        0x8847 | 0x8848 => l.push_str("mpls"),
        t => l.push_str(&format!("eth_type 0x{t:04x}")),
    }
    l
}
