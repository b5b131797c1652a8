//! Instruction counts (valgrind/callgrind, via gungraun) of key extraction plus the datapath hash
//! for the seed scenarios' frames. Each benchmark processes a batch of 32 frames, as one PMD rx
//! burst does; divide by 32 for instructions per packet (`scripts/insns-report` does and checks
//! the budgets recorded in `docs/performance.md`).

use std::hint::black_box;

use flow::{FlowKey, extract};
use gungraun::{library_benchmark, library_benchmark_group, main};

const BATCH: usize = 32;

fn eth_ipv4(proto: u8, l4: &[u8], src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    let mut p = vec![
        0x8c, 0xdc, 0xd4, 0xab, 0x5b, 0xf0, 0x8c, 0xdc, 0xd4, 0xab, 0x58, 0x48, 8, 0,
    ];
    let tot = (20 + l4.len()) as u16;
    p.extend_from_slice(&[
        0x45,
        0,
        (tot >> 8) as u8,
        tot as u8,
        0,
        1,
        0,
        0,
        64,
        proto,
        0,
        0,
    ]);
    p.extend_from_slice(&src);
    p.extend_from_slice(&dst);
    p.extend_from_slice(l4);
    p
}

fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let len = (8 + payload.len()) as u16;
    let mut u = [
        sport.to_be_bytes(),
        dport.to_be_bytes(),
        len.to_be_bytes(),
        [0, 0],
    ]
    .concat();
    u.extend_from_slice(payload);
    u
}

/// 64-byte frame (60 bytes + FCS): Eth/IPv4/UDP, the `plain` seed traffic.
fn plain(i: usize) -> Vec<u8> {
    let mut p = eth_ipv4(
        17,
        &udp(1024 + i as u16, 2000, &[]),
        [10, 0, 0, 1],
        [10, 1, 0, 2],
    );
    p.resize(60, 0);
    p
}

/// VXLAN L3-VPN frame as received (the outer headers are what the first pass extracts).
fn vxlan(i: usize) -> Vec<u8> {
    let mut inner = plain(i);
    inner[..6].copy_from_slice(&[0x52, 0x54, 0, 0xa0, 0x91, 0x02]);
    let mut payload = vec![0x08, 0, 0, 0, 0, 0, 100, 0];
    payload.extend(inner);
    eth_ipv4(
        17,
        &udp(49152 + i as u16, 4789, &payload),
        [10, 1, 2, 9],
        [10, 1, 2, 8],
    )
}

/// MPLSoGRE frame: Eth/IPv4/GRE(key)/MPLS/IPv4/UDP.
fn mplsogre(i: usize) -> Vec<u8> {
    let label = 812 + (i as u32 % 4);
    let mut gre = vec![0x20, 0x00, 0x88, 0x47, 0, 0, 0, 0];
    gre.extend_from_slice(&((label << 12) | 0x100 | 4).to_be_bytes());
    gre.extend_from_slice(
        &eth_ipv4(
            17,
            &udp(1024, 2000, &[]),
            [192, 168, 1, 1],
            [192, 168, 2, 16],
        )[14..],
    );
    eth_ipv4(47, &gre, [10, 1, 2, 9], [10, 1, 2, 8])
}

fn batch(make: fn(usize) -> Vec<u8>) -> (Vec<Vec<u8>>, Vec<FlowKey>) {
    let pkts = (0..BATCH).map(make).collect();
    let mut keys = vec![FlowKey::new(); BATCH];
    for k in &mut keys {
        k.set_in_port(1);
    }
    (pkts, keys)
}

#[library_benchmark]
#[bench::ipv4_udp_64b(batch(plain))]
#[bench::vxlan_outer(batch(vxlan))]
#[bench::mplsogre_outer(batch(mplsogre))]
fn extract_and_hash(input: (Vec<Vec<u8>>, Vec<FlowKey>)) -> (u32, Vec<Vec<u8>>, Vec<FlowKey>) {
    let (pkts, mut keys) = input;
    let mut acc = 0u32;
    for (p, k) in pkts.iter().zip(keys.iter_mut()) {
        acc ^= extract(p, k).hash;
    }
    // Hand the buffers back so that freeing them is not counted.
    (black_box(acc), pkts, keys)
}

library_benchmark_group!(name = extraction; benchmarks = extract_and_hash);
main!(library_benchmark_groups = extraction);
