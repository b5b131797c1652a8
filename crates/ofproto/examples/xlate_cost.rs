//! How long one translation takes (the slow path's cost per upcall): a bridge with the storm
//! rules of `flowpath bench --storm` plus the p2p_l3 routes, 200000 distinct packets.
//! `cargo run --release -p ofproto --example xlate_cost`
use std::time::Instant;

use flow::FlowKey;
use ofproto::bridge::{OfPort, VlanMode};
use ofproto::ofproto::Ofproto;
use ofproto::xlate::translate;

fn main() {
    let of = Ofproto::new();
    of.add_bridge("br0").unwrap();
    for o in 1..=3 {
        of.add_port(
            "br0",
            OfPort {
                name: format!("p{o}"),
                ofport: o,
                dp_port: Some(o),
                peer: None,
                vlan: VlanMode::default(),
            },
        )
        .unwrap();
    }
    for f in [
        "priority=30,in_port=3,dl_src=02:ff:ff:ff:ff:ff,actions=drop",
        "priority=29,in_port=3,actions=drop",
        "priority=10,ip,nw_dst=10.1.0.0/16,actions=mod_dl_dst:52:54:00:00:00:01,output:2",
        "priority=0,actions=drop",
    ] {
        of.add_flow("br0", f).unwrap();
    }
    let n = 200_000u32;
    let keys: Vec<FlowKey> = (0..n)
        .map(|i| {
            let mut k = FlowKey::new();
            k.set_in_port(if i % 2 == 0 { 3 } else { 1 })
                .set_eth_src(flow::EthAddr([
                    2,
                    0xaa,
                    0,
                    (i >> 16) as u8,
                    (i >> 8) as u8,
                    i as u8,
                ]))
                .set_eth_type(0x0800)
                .set_nw_dst([10, 1, (i >> 8) as u8, i as u8].into())
                .set_nw_proto(17);
            k
        })
        .collect();
    let pipe = of.pipe.read().unwrap();
    let t = Instant::now();
    let mut acts = 0;
    for k in &keys {
        acts += translate(&pipe, k, true, None).actions.len();
    }
    let e = t.elapsed();
    println!(
        "{n} translations in {:.3} s: {:.2} us each ({acts} actions)",
        e.as_secs_f64(),
        e.as_secs_f64() * 1e6 / f64::from(n)
    );
}
