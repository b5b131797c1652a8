//! Instruction counts (valgrind/callgrind, via gungraun) of the per-PMD lookups: EMC hits and
//! megaflow (dpcls) hits. Each benchmark looks up a batch of 32 keys, as one PMD rx burst does;
//! divide by 32 for instructions per key. Keys are extracted from 64-byte Eth/IPv4/UDP frames
//! (the `plain` seed traffic), so they have the words and hash the datapath will see.

use std::hint::black_box;

use datapath::dpcls::Dpcls;
use datapath::emc::Emc;
use flow::{FlowKey, Mask, Match, extract};
use gungraun::{library_benchmark, library_benchmark_group, main};

const BATCH: usize = 32;

fn eth_ipv4_udp(sport: u16, dport: u16, src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    let mut p = vec![
        0x8c, 0xdc, 0xd4, 0xab, 0x5b, 0xf0, 0x8c, 0xdc, 0xd4, 0xab, 0x58, 0x48, 8, 0,
    ];
    p.extend_from_slice(&[0x45, 0, 0, 28, 0, 1, 0, 0, 64, 17, 0, 0]);
    p.extend_from_slice(&src);
    p.extend_from_slice(&dst);
    p.extend_from_slice(&[sport.to_be_bytes(), dport.to_be_bytes(), [0, 8], [0, 0]].concat());
    p.resize(60, 0);
    p
}

/// The keys and hashes of 32 frames to 32 destinations (one flow each), as extracted on port 1.
fn keys() -> (Vec<FlowKey>, Vec<u32>) {
    let mut keys = vec![FlowKey::new(); BATCH];
    let mut hashes = vec![0; BATCH];
    for (i, (k, h)) in keys.iter_mut().zip(hashes.iter_mut()).enumerate() {
        k.set_in_port(1);
        let p = eth_ipv4_udp(1024, 2000, [10, 0, 0, 1], [10, 1, 0, i as u8]);
        *h = extract(&p, k).hash;
    }
    (keys, hashes)
}

/// A flow handle as the datapath will use it: flow-table index in the high half, generation in
/// the low half; the lookup checks the generation against the table's.
type Handle = u64;

struct EmcInput {
    emc: Emc<Handle>,
    keys: Vec<FlowKey>,
    hashes: Vec<u32>,
    generations: Vec<u32>,
    out: Vec<Option<Handle>>,
}

fn emc_filled() -> EmcInput {
    let (keys, hashes) = keys();
    let mut emc = Emc::new();
    emc.set_insert_inv_prob(1);
    let generations = vec![3u32; BATCH];
    for (i, (k, &h)) in keys.iter().zip(&hashes).enumerate() {
        assert!(emc.insert(k, h, ((i as u64) << 32) | 3));
    }
    EmcInput {
        emc,
        keys,
        hashes,
        generations,
        out: vec![None; BATCH],
    }
}

#[library_benchmark]
#[bench::emc_hit(emc_filled())]
fn emc_lookup(input: EmcInput) -> EmcInput {
    let mut input = input;
    let refs: [&FlowKey; BATCH] = core::array::from_fn(|i| &input.keys[i]);
    let generations = &input.generations;
    let hits = input
        .emc
        .lookup_batch(&refs, &input.hashes, &mut input.out, |f| {
            generations[(f >> 32) as usize] == f as u32
        });
    assert_eq!(black_box(hits), BATCH);
    input
}

struct DpclsInput {
    cls: Dpcls<u32>,
    keys: Vec<FlowKey>,
    out: Vec<Option<u32>>,
}

/// A megaflow mask as ofproto makes for an L3 route plus an L4 ACL: eth_type, nw_dst, nw_proto,
/// tp_dst and nw_frag (words 1, 3, 4).
fn hit_mask() -> Mask {
    let mut m = Mask::new();
    m.set_eth_type(0xffff)
        .set_nw_dst([255; 4].into())
        .set_nw_proto(0xff)
        .set_tp_dst(0xffff)
        .set_nw_frag(0xff);
    m
}

/// Four masks the benchmark keys miss in (their rules name other addresses and ports).
fn miss_masks() -> [Mask; 4] {
    let mut a = Mask::new();
    a.set_eth_type(0xffff).set_nw_src([255; 4].into());
    let mut b = Mask::new();
    b.set_eth_dst(flow::EthAddr::BROADCAST);
    let mut c = Mask::new();
    c.set_eth_type(0xffff)
        .set_nw_dst([255, 255, 0, 0].into())
        .set_tp_src(0xffff);
    let mut d = Mask::new();
    d.set_eth_type(0xffff)
        .set_nw_dst([255, 255, 255, 0].into())
        .set_nw_proto(0xff)
        .set_tp_dst(0xffff)
        .set_nw_ttl(0xff);
    [a, b, c, d]
}

/// A classifier with 1000 megaflows in the subtable the keys hit and 100 in each of four
/// others, with the hit subtable at `rank` (1-based, 1 or 5).
fn dpcls_with_hit_at(rank: usize) -> DpclsInput {
    let mut cls = Dpcls::new();
    let mut next = 0u32;
    let add_hit = |cls: &mut Dpcls<u32>| {
        for i in 0..1000u32 {
            let mut k = FlowKey::new();
            let [_, _, x, y] = i.to_be_bytes();
            k.set_eth_type(0x0800)
                .set_nw_dst([10, 1, x, y].into())
                .set_nw_proto(17)
                .set_tp_dst(2000);
            cls.insert(&Match::new(&k, &hit_mask()), i).unwrap();
        }
    };
    if rank == 1 {
        add_hit(&mut cls);
    }
    for m in miss_masks() {
        for i in 0..100u32 {
            let mut k = FlowKey::new();
            k.set_eth_type(0x0800)
                .set_eth_dst(flow::EthAddr([2, 0, 0, 0, 0, i as u8]))
                .set_nw_src([192, 168, 0, i as u8].into())
                .set_nw_dst([172, 16 + i as u8, i as u8, 0].into())
                .set_nw_proto(6)
                .set_tp_src(7 + i as u16)
                .set_tp_dst(2000)
                .set_nw_ttl(1);
            next += 1;
            cls.insert(&Match::new(&k, &m), 10_000 + next).unwrap();
        }
    }
    if rank != 1 {
        add_hit(&mut cls);
    }
    assert_eq!(cls.n_subtables(), 5);
    DpclsInput {
        cls,
        keys: keys().0,
        out: vec![None; BATCH],
    }
}

#[library_benchmark]
#[bench::dpcls_hit_rank1(dpcls_with_hit_at(1))]
#[bench::dpcls_hit_rank5(dpcls_with_hit_at(5))]
fn dpcls_lookup(input: DpclsInput) -> DpclsInput {
    let mut input = input;
    let refs: [&FlowKey; BATCH] = core::array::from_fn(|i| &input.keys[i]);
    let hits = input.cls.lookup_batch(&refs, &mut input.out);
    assert_eq!(black_box(hits), BATCH);
    input
}

library_benchmark_group!(name = lookups; benchmarks = emc_lookup, dpcls_lookup);
main!(library_benchmark_groups = lookups);
