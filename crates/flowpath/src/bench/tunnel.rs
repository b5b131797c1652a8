//! The anchor's tunnel scenarios for `flowpath bench`, built through the OpenFlow pipeline from
//! a configuration as a user would write it (underlay bridge with its address, tunnel ports,
//! flows), with the source port `p0` replaying the anchor's frames and sinks `p1`...:
//! - `vxlan_decap` (`_csum0`): L3-VPN over VXLAN, Phy → VM: `tnl_pop`, then VNI 100 to
//!   192.168.2.16 gets the VM's Ethernet address and goes to `p1`.
//! - `mplsogre_decap`: GRE (key 0, legacy_l3) carrying MPLS labels 812-815, each label popped
//!   and sent to its VM port `p1`..`p4`, without another pass after `pop_mpls`.
//! - `gre_decap`: `mplsogre_decap` without MPLS, GRE carrying the IPv4 packet itself, sent to
//!   `p1`..`p4` by its destination: the reference for what `pop_mpls` costs.
//! - `geneve_decap` (`_csum0`): GENEVE VNI 3 with the OVN option (class 0x0102, type 0x80)
//!   matched as `tun_metadata0`.
//! - `vxlan_encap`: VM → Phy: `set_field:100->tun_id`, output to the tunnel; push and output to
//!   the underlay's `p1` in one pass.

use std::sync::{Arc, Mutex};

use anyhow::anyhow;
use datapath::dpif::Datapath;
use datapath::port::Port;
use netdev::memory::{ReplayPort, SampleSpec, SinkPort};

/// What feeds a tunnel scenario and takes its output.
pub enum Io {
    /// The frames, replayed by `p0`; in-memory sinks.
    Replay(Vec<Vec<u8>>),
    /// DPDK's source for `p0` and its sinks, one per sink port in [`TunnelScenario::sinks`]
    /// order.
    Dpdk(Box<dyn Port>, Vec<Box<dyn Port>>),
}

/// What a sink keeps of the frames it gets.
pub type Samples = Arc<Mutex<Vec<Vec<u8>>>>;

/// A tunnel scenario.
pub struct TunnelScenario {
    /// The switch, as a configuration file (ports `p0`, `p1`.. are replaced by the source and
    /// sinks).
    config: &'static str,
    /// The frame a sink must receive for an input frame, with the bytes `normalize` clears
    /// cleared.
    pub expect: fn(&[u8]) -> Vec<u8>,
    /// Clears what varies per packet in a sampled frame (the UDP entropy port of an
    /// encapsulation).
    pub normalize: fn(&[u8]) -> Vec<u8>,
    /// The sink ports.
    pub sinks: &'static [&'static str],
}

const VXLAN_UNDERLAY: &str = r#"
[[bridge]]
name = "br-phy"
hwaddr = "8c:dc:d4:ab:5b:f0"
ip = ["10.1.2.8/24"]
flows = ["actions=NORMAL"]
"#;

const VXLAN_DECAP: &str = r#"
[[bridge.port]]
name = "p0"
type = "sink"

[[bridge]]
name = "br-int"
flows = ["in_port=vxlan0,tun_id=100,ip,nw_dst=192.168.2.16 actions=mod_dl_dst:52:54:00:a0:91:99,output:p1"]
[[bridge.port]]
name = "vxlan0"
type = "vxlan"
options = { remote_ip = "10.1.2.9", key = "flow" }
[[bridge.port]]
name = "p1"
type = "sink"
"#;

const MPLSOGRE_DECAP: &str = r#"
[[bridge.port]]
name = "p0"
type = "sink"

[[bridge]]
name = "br-int"
flows = ["in_port=gre0,mpls,mpls_label=812 actions=pop_mpls:0x0800,mod_dl_dst:52:54:00:a0:91:10,output:p1",
         "in_port=gre0,mpls,mpls_label=813 actions=pop_mpls:0x0800,mod_dl_dst:52:54:00:a0:91:11,output:p2",
         "in_port=gre0,mpls,mpls_label=814 actions=pop_mpls:0x0800,mod_dl_dst:52:54:00:a0:91:12,output:p3",
         "in_port=gre0,mpls,mpls_label=815 actions=pop_mpls:0x0800,mod_dl_dst:52:54:00:a0:91:13,output:p4"]
[[bridge.port]]
name = "gre0"
type = "gre"
options = { remote_ip = "10.1.2.9", key = "flow", packet_type = "legacy_l3" }
[[bridge.port]]
name = "p1"
type = "sink"
[[bridge.port]]
name = "p2"
type = "sink"
[[bridge.port]]
name = "p3"
type = "sink"
[[bridge.port]]
name = "p4"
type = "sink"
"#;

const GRE_DECAP: &str = r#"
[[bridge.port]]
name = "p0"
type = "sink"

[[bridge]]
name = "br-int"
flows = ["in_port=gre0,ip,nw_dst=192.168.2.16 actions=mod_dl_dst:52:54:00:a0:91:10,output:p1",
         "in_port=gre0,ip,nw_dst=192.168.3.16 actions=mod_dl_dst:52:54:00:a0:91:11,output:p2",
         "in_port=gre0,ip,nw_dst=192.168.4.16 actions=mod_dl_dst:52:54:00:a0:91:12,output:p3",
         "in_port=gre0,ip,nw_dst=192.168.5.16 actions=mod_dl_dst:52:54:00:a0:91:13,output:p4"]
[[bridge.port]]
name = "gre0"
type = "gre"
options = { remote_ip = "10.1.2.9", key = "flow", packet_type = "legacy_l3" }
[[bridge.port]]
name = "p1"
type = "sink"
[[bridge.port]]
name = "p2"
type = "sink"
[[bridge.port]]
name = "p3"
type = "sink"
[[bridge.port]]
name = "p4"
type = "sink"
"#;

const GENEVE: &str = r#"
[[bridge]]
name = "br-phy"
hwaddr = "3c:fd:fe:ee:4a:2c"
ip = ["172.17.2.60/24"]
flows = ["actions=NORMAL"]
[[bridge.port]]
name = "p0"
type = "sink"

[[bridge]]
name = "br-int"
tlv-map = ["{class=0x102,type=0x80,len=4}->tun_metadata0"]
flows = ["in_port=geneve0,tun_id=3,tun_metadata0=0x30002 actions=mod_dl_dst:fa:16:3e:20:ab:99,output:p1"]
[[bridge.port]]
name = "geneve0"
type = "geneve"
options = { remote_ip = "172.17.2.160", key = "flow" }
[[bridge.port]]
name = "p1"
type = "sink"
"#;

const VXLAN_ENCAP: &str = r#"
[[bridge.port]]
name = "p1"
type = "sink"

[[bridge]]
name = "br-int"
flows = ["in_port=p0 actions=set_field:100->tun_id,output:vxlan0"]
[[bridge.port]]
name = "p0"
type = "sink"
[[bridge.port]]
name = "vxlan0"
type = "vxlan"
options = { remote_ip = "10.1.2.9", key = "flow" }

[tunnel]
neigh = ["br-phy 10.1.2.9 8c:dc:d4:ab:58:48"]
"#;

/// `frame[ofs..]` with Ethernet destination `dst`.
fn inner(frame: &[u8], ofs: usize, dst: [u8; 6]) -> Vec<u8> {
    let mut f = frame.get(ofs..).unwrap_or_default().to_vec();
    if f.len() >= 6 {
        f[..6].copy_from_slice(&dst);
    }
    f
}

fn same(f: &[u8]) -> Vec<u8> {
    f.to_vec()
}

/// The VXLAN header flowpath pushes for `vxlan_encap`, UDP source port and IP checksum
/// cleared (see `clear_entropy`).
fn vxlan_encap_expect(f: &[u8]) -> Vec<u8> {
    let mut h = vec![
        0x8c, 0xdc, 0xd4, 0xab, 0x58, 0x48, 0x8c, 0xdc, 0xd4, 0xab, 0x5b, 0xf0, 8, 0,
    ];
    let ip_len = (20 + 8 + 8 + f.len()) as u16;
    h.extend_from_slice(&[
        0x45,
        0,
        (ip_len >> 8) as u8,
        ip_len as u8,
        0,
        0,
        0x40,
        0,
        64,
        17,
        0,
        0,
    ]);
    h.extend_from_slice(&[10, 1, 2, 8, 10, 1, 2, 9]);
    let udp_len = (8 + 8 + f.len()) as u16;
    h.extend_from_slice(&[0, 0, 0x12, 0xb5, (udp_len >> 8) as u8, udp_len as u8, 0, 0]);
    h.extend_from_slice(&[0x08, 0, 0, 0, 0, 0, 100, 0]);
    h.extend_from_slice(f);
    h
}

/// Clears the outer UDP source port (entropy from the inner hash) and the IPv4 identification
/// and checksum of an encapsulated frame.
fn clear_entropy(f: &[u8]) -> Vec<u8> {
    let mut f = f.to_vec();
    for i in [18, 19, 24, 25, 34, 35] {
        if let Some(b) = f.get_mut(i) {
            *b = 0;
        }
    }
    f
}

/// The scenario called `name`.
pub fn scenario(name: &str) -> Option<TunnelScenario> {
    Some(match name {
        "vxlan_decap" | "vxlan_decap_csum0" => TunnelScenario {
            config: "vxlan_decap",
            expect: |f| inner(f, 50, [0x52, 0x54, 0, 0xa0, 0x91, 0x99]),
            normalize: same,
            sinks: &["p1"],
        },
        "mplsogre_decap" => TunnelScenario {
            config: "mplsogre_decap",
            // Outer Ethernet, IPv4, GRE with key, one MPLS entry: the IPv4 packet at 46 gets
            // an Ethernet header with the VM's address, from the label.
            expect: |f| {
                let label = f.get(42..45).map_or(0, |l| {
                    (u32::from(l[0]) << 12) | (u32::from(l[1]) << 4) | (u32::from(l[2]) >> 4)
                });
                let vm = 0x10 + (label.saturating_sub(812) as u8);
                let mut out = vec![0x52, 0x54, 0, 0xa0, 0x91, vm, 0, 0, 0, 0, 0, 0, 8, 0];
                out.extend_from_slice(f.get(46..).unwrap_or_default());
                out
            },
            normalize: same,
            sinks: &["p1", "p2", "p3", "p4"],
        },
        "gre_decap" => TunnelScenario {
            config: "gre_decap",
            // Outer Ethernet, IPv4, GRE with key: the IPv4 packet at 42 gets an Ethernet
            // header with the VM's address, from its destination 192.168.(2 + vm).16.
            expect: |f| {
                let vm = 0x10 + f.get(42 + 18).map_or(0, |b| b.saturating_sub(2));
                let mut out = vec![0x52, 0x54, 0, 0xa0, 0x91, vm, 0, 0, 0, 0, 0, 0, 8, 0];
                out.extend_from_slice(f.get(42..).unwrap_or_default());
                out
            },
            normalize: same,
            sinks: &["p1", "p2", "p3", "p4"],
        },
        "geneve_decap" | "geneve_decap_csum0" => TunnelScenario {
            config: "geneve_decap",
            expect: |f| inner(f, 58, [0xfa, 0x16, 0x3e, 0x20, 0xab, 0x99]),
            normalize: same,
            sinks: &["p1"],
        },
        "vxlan_encap" => TunnelScenario {
            config: "vxlan_encap",
            expect: vxlan_encap_expect,
            normalize: clear_entropy,
            sinks: &["p1"],
        },
        _ => return None,
    })
}

impl TunnelScenario {
    /// The configuration text, with the datapath settings of the run.
    fn config_text(&self, emc: bool) -> String {
        let body = match self.config {
            "vxlan_decap" => format!("{VXLAN_UNDERLAY}{VXLAN_DECAP}"),
            "mplsogre_decap" => format!("{VXLAN_UNDERLAY}{MPLSOGRE_DECAP}"),
            "gre_decap" => format!("{VXLAN_UNDERLAY}{GRE_DECAP}"),
            "geneve_decap" => GENEVE.to_owned(),
            _ => format!("{VXLAN_UNDERLAY}{VXLAN_ENCAP}"),
        };
        format!(
            "[datapath]\nemc-insert-inv-prob = {}\n{body}",
            if emc { 100 } else { 0 }
        )
    }

    /// Starts the switch on `io`: with [`Io::Replay`], its frames replayed on `p0` (with
    /// `n_rxq` queues) and sinks sampling what they get (the first sink's samples are
    /// returned); with [`Io::Dpdk`], DPDK's ports in their places (nothing sampled).
    pub fn start(
        &self,
        io: Io,
        label: &str,
        n_rxq: usize,
        sample: SampleSpec,
        emc: bool,
    ) -> anyhow::Result<(Datapath, Samples)> {
        let cfg = crate::config::parse(&self.config_text(emc))
            .map_err(|e| anyhow!("scenario configuration: {}", e[0]))?;
        let of = crate::switch::build_ofproto(&cfg, std::path::Path::new("."))?;
        let (mut frames, mut dpdk) = match io {
            Io::Replay(frames) => (Some(frames), None),
            Io::Dpdk(source, sinks) => {
                let sinks: Vec<Option<Box<dyn Port>>> = sinks.into_iter().map(Some).collect();
                (None, Some((Some(source), sinks)))
            }
        };
        let mut samples = None;
        let dp = crate::switch::build_with(&cfg, &of, |p| {
            if let Some((source, sinks)) = &mut dpdk {
                let port = if p.name == "p0" {
                    source.take()
                } else {
                    let i = self.sinks.iter().position(|s| *s == p.name);
                    i.and_then(|i| sinks.get_mut(i)?.take())
                };
                return port.ok_or_else(|| anyhow!("no DPDK port left for {}", p.name));
            }
            Ok(if p.name == "p0" {
                Box::new(ReplayPort::new(
                    "p0",
                    label,
                    frames.take().unwrap_or_default(),
                    n_rxq,
                ))
            } else if p.name == self.sinks[0] {
                let s = SinkPort::new(&p.name, sample);
                samples = Some(s.samples());
                Box::new(s)
            } else {
                Box::new(SinkPort::new(&p.name, SampleSpec::default()))
            })
        })?;
        let samples = match dpdk {
            Some(_) => Samples::default(),
            None => samples.ok_or_else(|| anyhow!("scenario without its sink"))?,
        };
        Ok((dp, samples))
    }
}
