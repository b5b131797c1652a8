//! Meters end to end: an OpenFlow meter and a flow whose first instruction is `meter:1`
//! become the datapath action `meter(0)`, and two PMD threads, each polling one queue of a
//! generator offering more than the meter's rate, pass together about the rate plus the burst
//! and drop the rest, counted per band and in the PMDs' drop counters. Counts are asserted
//! against the time measured, with generous bounds: a loaded 2-core machine may starve a PMD
//! for a while, which lowers what passes but never raises it above rate × time + burst (and a
//! batch's worth of tokens per PMD, the tolerance of sharing the buckets).

use std::sync::Arc;
use std::time::{Duration, Instant};

use datapath::dpif::{Datapath, DatapathBuilder, DpConfig};
use netdev::memory::{ReplayPort, SampleSpec, SinkPort};
use ofproto::bridge::{OfPort, VlanMode};
use ofproto::meter::{
    MeterBand, MeterConfig, MeterModError, OFPM13_ALL, OFPMBT13_DROP, OFPMF13_BURST, OFPMF13_PKTPS,
    OFPMF13_STATS,
};
use ofproto::ofproto::Ofproto;

fn udp(sport: u16) -> Vec<u8> {
    let mut p = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0];
    p.extend_from_slice(&[0x45, 0, 0, 28, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1]);
    p.extend_from_slice(&[10, 0, 0, 2]);
    p.extend_from_slice(&[(sport >> 8) as u8, sport as u8, 7, 208, 0, 8, 0, 0]);
    p.resize(60, 0);
    p
}

fn port(name: &str, ofport: u32) -> OfPort {
    OfPort {
        name: name.into(),
        ofport,
        dp_port: Some(ofport),
        peer: None,
        vlan: VlanMode::default(),
    }
}

/// Two PMDs; port 1 replays `pps` packets a second on each of its two queues; port 2 counts.
fn start(of: &Arc<Ofproto>, pps: f64) -> Datapath {
    let cfg = DpConfig {
        pmd_cores: vec![None, None],
        ..DpConfig::default()
    };
    let mut b = DatapathBuilder::new(cfg);
    let o = of.clone();
    b.set_upcall(Box::new(move || o.upcall_handler()));
    let frames = (0..64).map(|i| udp(1000 + i)).collect();
    b.add_port(
        1,
        Box::new(ReplayPort::new("p1", "gen", frames, 2).with_rate(pps)),
    )
    .unwrap();
    let keep = SampleSpec { max: 0, every: 1 };
    b.add_port(2, Box::new(SinkPort::new("p2", keep))).unwrap();
    b.start().unwrap()
}

fn pktps_meter(id: u32, rate: u32, burst: u32) -> MeterConfig {
    MeterConfig {
        meter_id: id,
        flags: OFPMF13_PKTPS | OFPMF13_BURST | OFPMF13_STATS,
        bands: vec![MeterBand {
            band_type: OFPMBT13_DROP,
            rate,
            burst_size: burst,
            prec_level: 0,
        }],
    }
}

#[test]
fn a_1000_pktps_meter_passes_its_rate_and_burst_over_two_pmds() {
    let of = Ofproto::new();
    of.add_bridge("br0").unwrap();
    of.add_port("br0", port("p1", 1)).unwrap();
    of.add_port("br0", port("p2", 2)).unwrap();
    // No meter yet: a flow naming one is refused.
    assert!(
        of.add_flow("br0", "in_port=1,actions=meter:1,output:2")
            .is_err()
    );
    let mut dp = start(&of, 2500.0);
    // The bucket is full when the meter is made and earns from then on: the time counts from
    // here.
    let t0 = Instant::now();
    of.add_meter(&mut dp, "br0", &pktps_meter(1, 1000, 100))
        .unwrap();
    assert_eq!(
        of.add_meter(&mut dp, "br0", &pktps_meter(1, 5, 0)),
        Err(MeterModError::MeterExists)
    );
    of.add_flow("br0", "in_port=1,actions=meter:1,output:2")
        .unwrap();
    of.revalidate(&mut dp);
    std::thread::sleep(Duration::from_millis(1500));
    let s = of.meter_stats(&dp, "br0", 1).unwrap().remove(0);
    let elapsed = t0.elapsed().as_secs_f64();
    assert_eq!(s.flow_count, 1);
    let (dropped, dropped_bytes) = s.bands[0];
    assert_eq!(dropped_bytes, dropped * 60);
    let passed = s.packet_in_count - dropped;
    // At most the burst, the rate over the time, and a batch per PMD; at least half the rate
    // over the time (the offered 5000 packets/s is five times the rate).
    let most = 100.0 + 1000.0 * elapsed + 64.0;
    assert!(
        (passed as f64) <= most && (passed as f64) >= 500.0 * elapsed.min(1.0),
        "{passed} passed in {elapsed:.2}s ({s:?})"
    );
    assert!(dropped > 0, "{s:?}");
    eprintln!(
        "{passed} of {} packets passed in {elapsed:.2}s (at most {most:.0})",
        s.packet_in_count
    );
    // The PMDs counted the same drops, and sent on what passed.
    let total = dp.total_stats();
    assert!(total.meter_drops >= dropped, "{total:?}");
    assert!(dp.pmd_drop_show().contains("meter band exceeded"));
    let tx = dp.port_counters("p2").unwrap().tx_packets;
    let most_tx = 100.0 + 1000.0 * t0.elapsed().as_secs_f64() + 64.0;
    assert!(tx as f64 <= most_tx, "{tx} sent, at most {most_tx:.0}");
    let flows = dp.dump_flows(false);
    assert!(flows.contains("actions:meter(0),2"), "{flows}");

    // Deleting the meter deletes its flow; the packets then miss the table and are dropped.
    assert_eq!(of.del_meter(&mut dp, "br0", OFPM13_ALL), 1);
    assert!(of.flow_entries("br0", None).unwrap().is_empty());
    assert_eq!(
        of.meter_stats(&dp, "br0", 1),
        Err(MeterModError::UnknownMeter)
    );
    assert!(dp.meter_stats(0).is_none());
    of.revalidate(&mut dp);
    assert!(!dp.dump_flows(false).contains("meter("));
    dp.stop();
}

#[test]
fn modify_keeps_the_datapath_meter_and_restarts_its_counters() {
    let of = Ofproto::new();
    of.add_bridge("br0").unwrap();
    let mut dp = DatapathBuilder::new(DpConfig::default()).start().unwrap();
    of.add_meter(&mut dp, "br0", &pktps_meter(7, 10, 1))
        .unwrap();
    of.add_meter(&mut dp, "br0", &pktps_meter(8, 10, 1))
        .unwrap();
    assert_eq!(of.meter_dp_id("br0", 7), Some(0));
    assert_eq!(of.meter_dp_id("br0", 8), Some(1));
    assert!(of.meter_admits(&dp, "br0", 7, 60));
    assert!(!of.meter_admits(&dp, "br0", 7, 60));
    assert!(of.meter_admits(&dp, "br0", 99, 60));
    assert_eq!(dp.meter_stats(0).unwrap().bands, vec![(1, 60)]);
    of.modify_meter(&mut dp, "br0", &pktps_meter(7, 20, 2))
        .unwrap();
    assert_eq!(of.meter_dp_id("br0", 7), Some(0));
    assert_eq!(dp.meter_stats(0).unwrap().packets, 0);
    assert_eq!(
        of.modify_meter(&mut dp, "br0", &pktps_meter(9, 20, 2)),
        Err(MeterModError::UnknownMeter)
    );
    assert_eq!(of.meter_configs("br0", 7).unwrap()[0].bands[0].rate, 20);
    // Freed datapath ids are handed out again, lowest first.
    of.del_meter(&mut dp, "br0", 7);
    of.add_meter(&mut dp, "br0", &pktps_meter(9, 1, 0)).unwrap();
    assert_eq!(of.meter_dp_id("br0", 9), Some(0));
    dp.stop();
}
