//! A TCP segment that starts no connection, or starts one in a connection the PMD's pool had
//! kept, allocates nothing: a SYN flood through `ct()` without `commit`, or one refused at the
//! table's limit, costs the heap nothing, and a steady churn of short-lived TCP connections
//! reuses the pooled connections' protocol state in place. Counted with a global allocator
//! that tallies allocations per thread, so that tests running side by side do not count into
//! each other's figures.

use conntrack::state::*;
use conntrack::{Conntrack, CtArgs, CtCache, CtMeta, CtPacket, TimeoutClass};
use hugemem::thread_allocs;

mod common;
use common::{batch, ipv4_frame, packet};

#[global_allocator]
static A: hugemem::CountingAlloc = hugemem::CountingAlloc;

/// Eth/IPv4/TCP SYN from `10.64.x.y:40000` (the address by `i`) to `10.1.0.2:80`, checksums
/// computed.
fn syn(i: u32) -> Vec<u8> {
    let [_, x, y, z] = i.to_be_bytes();
    let mut l4 = Vec::new();
    l4.extend_from_slice(&40000u16.to_be_bytes());
    l4.extend_from_slice(&80u16.to_be_bytes());
    l4.extend_from_slice(&1000u32.to_be_bytes()); // seq
    l4.extend_from_slice(&0u32.to_be_bytes()); // ack
    l4.extend_from_slice(&[0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]); // SYN, window, csum, urgent
    ipv4_frame([10, 64 | x, y, z], [10, 1, 0, 2], 6, l4, 16)
}

/// Allocations `ct.process_batch` makes for `frames` (the batch's own vectors made first).
fn allocs_of_batch(
    ct: &Conntrack,
    cache: &mut CtCache,
    frames: &[Vec<u8>],
    args: &CtArgs,
    now: u64,
) -> (u64, Vec<u8>) {
    let pkts: Vec<CtPacket<'_>> = frames.iter().map(|f| packet(f)).collect();
    let mut out = vec![(CtMeta::default(), None); pkts.len()];
    let before = thread_allocs();
    ct.process_batch(cache, &pkts, &mut out, args, now);
    let n = thread_allocs() - before;
    (n, out.iter().map(|(md, _)| md.state).collect())
}

/// SYNs `from..from + 32`.
fn syns(from: u32) -> Vec<Vec<u8>> {
    (from..from + 32).map(syn).collect()
}

/// A SYN flood through `ct()` without `commit` (a pipeline's first pass, which commits only
/// what a later table allows): every SYN is `+trk+new`, and none allocates.
#[test]
fn a_syn_that_is_not_committed_allocates_nothing() {
    let ct = Conntrack::new();
    let mut cache = CtCache::new();
    let args = CtArgs::default();
    let _ = batch(&ct, &mut cache, &syns(0), &args, 1);
    for round in 1..8 {
        let (allocs, states) = allocs_of_batch(&ct, &mut cache, &syns(round * 32), &args, 1);
        assert!(states.iter().all(|&s| s == TRK | NEW), "{states:?}");
        assert_eq!(allocs, 0, "round {round}: 32 SYNs not committed");
    }
    assert_eq!(ct.n_conns(), 0);
}

/// A SYN flood over the table's limit: every SYN past it is `+trk+new`, refused, and none of
/// them allocates.
#[test]
fn a_syn_refused_at_the_limit_allocates_nothing() {
    let ct = Conntrack::new();
    ct.set_maxconns(64);
    let mut cache = CtCache::new();
    let args = CtArgs {
        commit: true,
        ..Default::default()
    };
    for from in [0, 32, 64] {
        let _ = batch(&ct, &mut cache, &syns(from), &args, 1);
    }
    assert_eq!(ct.n_conns(), 64);
    for round in 3..10 {
        let (allocs, states) = allocs_of_batch(&ct, &mut cache, &syns(round * 32), &args, 1);
        assert!(states.iter().all(|&s| s == TRK | NEW), "{states:?}");
        assert_eq!(allocs, 0, "round {round}: 32 SYNs refused at the limit");
    }
    assert_eq!(ct.n_conns(), 64);
    // The warm-up's third burst was refused too.
    assert_eq!(ct.stats().limit_refused, 8 * 32);
}

/// Short-lived TCP connections (a SYN each, `tcp_syn_sent` at 0 s): each expires by the next
/// burst and goes to the PMD's pool, and the next SYN's connection is set up in one of them,
/// its TCP state included, without an allocation.
#[test]
fn a_syn_committed_into_a_pooled_connection_allocates_nothing() {
    let ct = Conntrack::new();
    ct.set_timeouts(Some(0), &[(TimeoutClass::TcpSynSent, 0)]);
    let mut cache = CtCache::new();
    let args = CtArgs {
        commit: true,
        ..Default::default()
    };
    // Warm: the pool, the table's shards and the expiry queue reach their sizes.
    let mut now = 1;
    for round in 0..64 {
        let _ = batch(&ct, &mut cache, &syns(round * 32), &args, now);
        now += 1;
    }
    let committed = ct.stats().committed;
    for round in 64..72 {
        let (allocs, states) = allocs_of_batch(&ct, &mut cache, &syns(round * 32), &args, now);
        assert!(states.iter().all(|&s| s == TRK | NEW), "{states:?}");
        assert_eq!(allocs, 0, "round {round}: 32 SYNs committed");
        now += 1;
    }
    assert_eq!(ct.stats().committed, committed + 8 * 32);
}
