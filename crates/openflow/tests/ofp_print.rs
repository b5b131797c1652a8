//! What this crate's message encoders write, read back by Open vSwitch: every message below is
//! given to `ovs-ofctl ofp-print`, which must name it as [`MsgType::name`] does, find nothing
//! malformed, and print the text expected of it. Skips, saying so, when `ovs-ofctl` is not
//! installed (the unit tests still check the bytes recorded from OVS).

use std::process::Command;

use flow::EthAddr;
use ofproto::tunnel::TlvMapping;
use openflow::header::Version;
use openflow::msgs::async_config::AsyncConfig;
use openflow::msgs::bundle::{BundleAdd, BundleCtrl, BundleCtrlType, OFPBF_ATOMIC, OFPBF_ORDERED};
use openflow::msgs::ct_flush::{CtFlush, CtTuple};
use openflow::msgs::group_stats::{
    GroupStats, OFPG_ALL, encode_group_stats_reply, encode_group_stats_request,
};
use openflow::msgs::meter::{
    self, MeterBand, MeterCommand, MeterConfig, MeterMod, MeterRequestKind, MeterStats,
    OFPMBT13_DROP, OFPMF13_KBPS, OFPMF13_STATS,
};
use openflow::msgs::nicira::{self, FlowFormat, PacketInFormat};
use openflow::msgs::port::{
    OFPP_ANY, OFPPC_NO_FLOOD, PhyPort, PortDescRequest, PortMod, PortReason, PortStatus,
};
use openflow::msgs::queue_config::{self, QueueConfig, QueueConfigRequest};
use openflow::msgs::role::RoleStatus;
use openflow::msgs::role::{Role, RoleMsg};
use openflow::msgs::stats::OFPQ_ALL;
use openflow::msgs::stats::{
    self, DescStats, PortStats, PortStatsRequest, QueueStats, QueueStatsRequest, TableStats,
};
use openflow::msgs::switch::{self, FeaturesReply, FragHandling, SwitchConfig};
use openflow::msgs::table_mod::{
    self, OFPTR_VACANCY_UP, TableDesc, TableMiss, TableMod, TableStatus,
};
use openflow::msgs::tlv::{TlvCommand, TlvMap, TlvTableMod, TlvTableReply};
use openflow::msgtype::{self, MsgType};

fn port(n: u32) -> PhyPort {
    PhyPort {
        port_no: n,
        hw_addr: EthAddr([0x50, 0x54, 0, 0, 0, n as u8]),
        name: format!("eth{n}"),
        config: 0,
        state: 0,
        curr: 0x2008,
        advertised: 0x280f,
        supported: 0x280f,
        peer: 0,
        curr_speed: 100_000,
        max_speed: 100_000,
    }
}

/// The request a reply answers, as bytes.
fn request(f: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
    let mut m = Vec::new();
    f(&mut m);
    m
}

/// Every message to check, with text OVS must print for it.
fn messages() -> Vec<(Vec<u8>, &'static str)> {
    let mut v: Vec<(Vec<u8>, &'static str)> = Vec::new();
    let mut one = |f: &dyn Fn(&mut Vec<u8>), want: &'static str| {
        let mut m = Vec::new();
        f(&mut m);
        v.push((m, want));
    };
    for ver in Version::ALL {
        one(
            &|m| {
                FeaturesReply {
                    datapath_id: 0x1234,
                    n_buffers: 0,
                    n_tables: 254,
                    auxiliary_id: 0,
                    capabilities: switch::OFPUTIL_C_FLOW_STATS | switch::OFPUTIL_C_PORT_STATS,
                    actions: if ver == Version::Of10 {
                        switch::OFP10_ALL_ACTIONS
                    } else {
                        0
                    },
                    ports: vec![port(1), port(2)],
                }
                .encode(ver, 1, m)
                .unwrap()
            },
            "n_tables:254, n_buffers:0",
        );
        one(
            &|m| {
                SwitchConfig {
                    frag: FragHandling::Reassemble,
                    miss_send_len: 128,
                    invalid_ttl_to_controller: None,
                }
                .encode_set(ver, 2, m)
            },
            "frags=reassemble miss_send_len=128",
        );
        one(
            &|m| {
                PortStatus {
                    reason: PortReason::Add,
                    desc: port(3),
                }
                .encode(ver, m)
            },
            "ADD: 3(eth3): addr:50:54:00:00:00:03",
        );
        one(
            &|m| {
                PortMod {
                    port_no: 3,
                    hw_addr: EthAddr([0x50, 0x54, 0, 0, 0, 3]),
                    config: 0,
                    mask: if ver == Version::Of10 {
                        OFPPC_NO_FLOOD
                    } else {
                        1
                    },
                    advertise: 0x2008,
                }
                .encode(ver, 3, m)
            },
            "port: 3: addr:50:54:00:00:00:03",
        );
        one(&|m| switch::encode_barrier_request(ver, 4, m), "");
        one(
            &|m| switch::encode_echo_request(ver, 5, b"hi", m),
            "2 bytes of payload",
        );
        let pdr = request(|m| PortDescRequest { port: OFPP_ANY }.encode(ver, 6, m));
        let ports = [port(1), port(2)];
        one(
            &|m| {
                *m = openflow::msgs::port::encode_port_desc_reply(
                    &msgtype::decode(&pdr).unwrap(),
                    &ports,
                )
                .unwrap()
                .remove(0)
            },
            " 2(eth2): addr:50:54:00:00:00:02",
        );
        let desc = request(|m| stats::encode_desc_request(ver, 7, m));
        one(
            &|m| {
                *m = DescStats {
                    mfr_desc: "flowpath".into(),
                    dp_desc: "br0".into(),
                    ..DescStats::default()
                }
                .encode_reply(&msgtype::decode(&desc).unwrap())
                .unwrap()
            },
            "Manufacturer: flowpath",
        );
        let tsr = request(|m| stats::encode_table_stats_request(ver, 8, m));
        one(
            &|m| {
                *m = stats::encode_table_stats_reply(
                    &msgtype::decode(&tsr).unwrap(),
                    &[TableStats {
                        table_id: 0,
                        active_count: 3,
                        lookup_count: 10,
                        matched_count: 7,
                        max_entries: 1_000_000,
                        ..TableStats::default()
                    }],
                )
                .unwrap()
                .remove(0)
            },
            "active=3, lookup=10, matched=7",
        );
        let psr = request(|m| PortStatsRequest { port_no: OFPP_ANY }.encode(ver, 9, m));
        one(
            &|m| {
                *m = stats::encode_port_stats_reply(
                    &msgtype::decode(&psr).unwrap(),
                    &[PortStats {
                        port_no: 1,
                        rx_packets: 5,
                        rx_bytes: 500,
                        ..PortStats::default()
                    }],
                )
                .unwrap()
                .remove(0)
            },
            "port  1: rx pkts=5, bytes=500",
        );
        let qsr = request(|m| QueueStatsRequest::default().encode(ver, 10, m));
        one(
            &|m| {
                *m = stats::encode_queue_stats_reply(
                    &msgtype::decode(&qsr).unwrap(),
                    &[QueueStats {
                        port_no: 1,
                        queue_id: 2,
                        tx_bytes: 3,
                        tx_packets: 4,
                        tx_errors: 5,
                        duration_sec: u32::MAX,
                        duration_nsec: u32::MAX,
                    }],
                )
                .unwrap()
                .remove(0)
            },
            "port 1 queue 2: bytes=3, pkts=4, errors=5",
        );
        one(
            &|m| {
                RoleMsg {
                    role: Role::Primary,
                    generation_id: Some(9),
                }
                .encode_request(ver, 11, m)
            },
            "role=primary",
        );
        one(
            &|m| AsyncConfig::ovs_default(ver).encode_set(ver, 12, 0b111, m),
            "PACKET_IN: no_match action",
        );
        one(
            &|m| nicira::encode_set_packet_in_format(PacketInFormat::NxtPacketIn2, ver, 13, m),
            "format=nxt_packet_in2",
        );
        one(
            &|m| nicira::encode_flow_mod_table_id(true, ver, 14, m),
            "): enable",
        );
        one(
            &|m| nicira::encode_ct_flush_zone(7, ver, 15, m),
            "zone_id=7",
        );
        one(
            &|m| {
                TlvTableMod {
                    command: TlvCommand::Add,
                    mappings: vec![TlvMap {
                        index: 3,
                        mapping: TlvMapping {
                            class: 0x102,
                            kind: 0x80,
                            len: 8,
                        },
                    }],
                }
                .encode(ver, 16, m)
                .unwrap()
            },
            "0x102  0x80       8  tun_metadata3",
        );
        let tlv = request(|m| openflow::msgs::tlv::encode_tlv_table_request(ver, 17, m));
        one(
            &|m| {
                TlvTableReply::ovs_empty()
                    .encode(&msgtype::decode(&tlv).unwrap(), m)
                    .unwrap()
            },
            "max option space=256 max fields=64",
        );
        if ver >= Version::Of13 {
            one(
                &|m| {
                    MeterMod {
                        command: MeterCommand::Add,
                        flags: OFPMF13_KBPS | OFPMF13_STATS,
                        meter_id: 5,
                        bands: vec![MeterBand {
                            band_type: OFPMBT13_DROP,
                            rate: 1000,
                            burst_size: 0,
                            prec_level: 0,
                        }],
                    }
                    .encode(ver, 18, m)
                    .unwrap()
                },
                "ADD meter=5 kbps stats bands=\ntype=drop rate=1000",
            );
            let mr = request(|m| {
                meter::encode_meter_request(MeterRequestKind::Config, 5, ver, 19, m).unwrap()
            });
            one(
                &|m| {
                    *m = meter::encode_meter_config_reply(
                        &msgtype::decode(&mr).unwrap(),
                        &[MeterConfig {
                            meter_id: 5,
                            flags: OFPMF13_KBPS,
                            bands: vec![MeterBand {
                                band_type: OFPMBT13_DROP,
                                rate: 10,
                                burst_size: 0,
                                prec_level: 0,
                            }],
                        }],
                    )
                    .unwrap()
                    .remove(0)
                },
                "meter=5 kbps bands=\ntype=drop rate=10",
            );
            let ms = request(|m| {
                meter::encode_meter_request(MeterRequestKind::Stats, 5, ver, 20, m).unwrap()
            });
            one(
                &|m| {
                    *m = meter::encode_meter_stats_reply(
                        &msgtype::decode(&ms).unwrap(),
                        &[MeterStats {
                            meter_id: 5,
                            flow_count: 1,
                            packet_in_count: 2,
                            byte_in_count: 3,
                            duration_sec: 4,
                            duration_nsec: 0,
                            bands: vec![(6, 7)],
                        }],
                    )
                    .unwrap()
                    .remove(0)
                },
                "meter:5 flow_count:1 packet_in_count:2 byte_in_count:3",
            );
            let ctl = BundleCtrl {
                bundle_id: 3,
                ctrl_type: BundleCtrlType::CommitRequest,
                flags: OFPBF_ATOMIC | OFPBF_ORDERED,
            };
            one(
                &|m| ctl.encode(ver, 21, m).unwrap(),
                "bundle_id=0x3 type=COMMIT_REQUEST flags=atomic ordered",
            );
            let mut inner = Vec::new();
            PortMod {
                port_no: 1,
                hw_addr: EthAddr([0x50, 0x54, 0, 0, 0, 1]),
                config: 1,
                mask: 1,
                advertise: 0,
            }
            .encode(ver, 22, &mut inner);
            one(
                &|m| {
                    BundleAdd {
                        bundle_id: 3,
                        flags: OFPBF_ATOMIC,
                        msg: &inner,
                    }
                    .encode(ver, m)
                    .unwrap()
                },
                "bundle_id=0x3 flags=atomic",
            );
        }
    }
    one(
        &|m| nicira::encode_set_flow_format(FlowFormat::Nxm, 23, m),
        "format=nxm",
    );
    for ver in Version::ALL {
        let qr = request(|m| {
            QueueConfigRequest {
                port: 1,
                queue: OFPQ_ALL,
            }
            .encode(ver, 24, m)
        });
        one(
            &|m| {
                *m = queue_config::encode_reply(
                    &msgtype::decode(&qr).unwrap(),
                    &[QueueConfig {
                        port: 1,
                        queue: 3,
                        min_rate: Some(500),
                        max_rate: None,
                    }],
                )
                .unwrap()
                .remove(0)
            },
            "queue 3:",
        );
        one(
            &|m| encode_group_stats_request(OFPG_ALL, ver, 25, m),
            "group_id=ALL",
        );
        let gr = request(|m| encode_group_stats_request(OFPG_ALL, ver, 26, m));
        one(
            &|m| {
                *m = encode_group_stats_reply(
                    &msgtype::decode(&gr).unwrap(),
                    &[GroupStats {
                        group_id: 9,
                        ref_count: 1,
                        packet_count: 2,
                        byte_count: 3,
                        duration_sec: 4,
                        duration_nsec: 0,
                        buckets: vec![(5, 6)],
                    }],
                )
                .unwrap()
                .remove(0)
            },
            "group_id=9",
        );
        one(
            &|m| {
                CtFlush {
                    ip_proto: 17,
                    orig: CtTuple {
                        src_port: 53,
                        ..CtTuple::default()
                    },
                    reply: CtTuple::default(),
                    zone: Some(3),
                }
                .encode(ver, 27, m)
            },
            "zone=3",
        );
        if ver >= Version::Of11 {
            one(
                &|m| {
                    TableMod {
                        table_id: 4,
                        miss: TableMiss::Drop,
                        eviction: Some(true),
                        vacancy_events: Some(false),
                        eviction_flags: None,
                        vacancy: None,
                    }
                    .encode(ver, 28, m)
                    .unwrap()
                },
                "table_id=4",
            );
        }
        if ver >= Version::Of13 {
            one(
                &|m| {
                    RoleStatus {
                        role: Role::Secondary,
                        reason: 0,
                        generation_id: 7,
                    }
                    .encode(ver, m)
                    .unwrap()
                },
                "role=secondary generation_id=7",
            );
        }
        if ver >= Version::Of14 {
            let tr = request(|m| table_mod::encode_table_desc_request(ver, 29, m).unwrap());
            one(
                &|m| {
                    *m = table_mod::encode_table_desc_reply(
                        &msgtype::decode(&tr).unwrap(),
                        &[TableDesc::ovs(0), TableDesc::ovs(1)],
                    )
                    .unwrap()
                    .remove(0)
                },
                "eviction_flags=OTHER|IMPORTANCE|LIFETIME",
            );
            one(
                &|m| {
                    TableStatus {
                        reason: OFPTR_VACANCY_UP,
                        desc: TableDesc {
                            vacancy_events: true,
                            vacancy: Some((20, 80, 85)),
                            ..TableDesc::ovs(7)
                        },
                    }
                    .encode(ver, m)
                    .unwrap()
                },
                "vacancy=on vacancy_down=20% vacancy_up=80% vacancy=85%",
            );
        }
    }
    v
}

#[test]
fn ovs_ofctl_reads_what_we_write_or_skips() {
    if Command::new("ovs-ofctl").arg("--version").output().is_err() {
        eprintln!(
            "SKIPPED ovs_ofctl_reads_what_we_write_or_skips: ovs-ofctl is not on PATH; install \
             openvswitch-common to have OVS read this crate's messages"
        );
        return;
    }
    let mut failures = Vec::new();
    for (m, want) in messages() {
        let hex: String = m.iter().map(|b| format!("{b:02x}")).collect();
        let out = Command::new("ovs-ofctl")
            .args(["ofp-print", &hex])
            .output()
            .expect("ovs-ofctl runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let name = msgtype::decode(&m).unwrap().msg_type.name();
        let first = text.lines().next().unwrap_or("");
        let ok = out.status.success()
            && first.starts_with(name)
            && !text.contains("decode error")
            && !text.contains("***")
            && text.contains(want);
        if !ok {
            failures.push(format!(
                "{hex}\n  want {name:?} and {want:?}, OVS printed:\n{text}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Every form this test writes is named after the form OVS reads.
    assert!(MsgType::all().count() > 150);
}
