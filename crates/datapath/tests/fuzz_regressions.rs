//! Replays the committed inputs of the `gro`, `gso_tunnel`, `gso_udp`, `gso_ufo` and
//! `csum_pending` fuzz targets (`tests/data/fuzz/<target>/*`) through the checks the targets
//! run, which live in `fuzz/src/<target>.rs`, path-imported here so that both use one copy.

#[path = "../../../fuzz/src/csum_pending.rs"]
mod csum_pending;
#[path = "../../../fuzz/src/gro.rs"]
mod gro;
#[path = "../../../fuzz/src/gso_tunnel.rs"]
mod gso_tunnel;
#[path = "../../../fuzz/src/gso_udp.rs"]
mod gso_udp;
#[path = "../../../fuzz/src/gso_ufo.rs"]
mod gso_ufo;
#[path = "../../../fuzz/src/ones_sum.rs"]
mod ones_sum;
#[path = "../../../fuzz/src/replay.rs"]
mod replay;

#[test]
fn gso_tunnel_inputs() {
    replay::replay(
        env!("CARGO_MANIFEST_DIR"),
        "gso_tunnel",
        gso_tunnel::check_gso_tunnel,
    );
}

#[test]
fn gro_inputs() {
    replay::replay(env!("CARGO_MANIFEST_DIR"), "gro", gro::check_gro);
}

#[test]
fn the_inputs_reach_the_merge() {
    let input = |name: &str| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/fuzz/gro/");
        std::fs::read(format!("{dir}{name}")).unwrap()
    };
    assert_eq!(gro::merged_frames(&input("whole-super-frame")), 1);
    // A flipped payload byte breaks a checksum: the run stops at that segment.
    assert_eq!(gro::merged_frames(&input("a-payload-byte-flipped")), 2);
    // The same over IPv6.
    assert_eq!(gro::merged_frames(&input("ipv6-whole-super-frame")), 1);
    assert_eq!(gro::merged_frames(&input("ipv6-a-payload-byte-flipped")), 2);
    // Three segments repeated as another connection's, each after its own: the two
    // connections' segments alternate, and each makes its super-frame.
    assert_eq!(gro::merged_frames(&input("interleaved-connections")), 2);
}

#[test]
fn the_gso_tunnel_inputs_reach_the_segments() {
    let input = |name: &str| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/fuzz/gso_tunnel/");
        std::fs::read(format!("{dir}{name}")).unwrap()
    };
    let n = |name: &str| gso_tunnel::segments_after_push(&input(name));
    assert_eq!(n("vxlan-ipv4"), Some(3000usize.div_ceil(536)));
    assert_eq!(n("geneve-ipv6-underlay-csum"), Some(3));
    assert_eq!(n("vxlan-csum-inner-ipv6"), Some(3));
    assert_eq!(n("geneve-vlan-tagged"), Some(3));
    // UDP (USO) ones: 3 024 bytes of datagrams.
    assert_eq!(n("udp-vxlan-ipv4"), Some(3024usize.div_ceil(536)));
    assert_eq!(n("udp-geneve-ipv6-underlay-csum"), Some(3));
    for refused in [
        "not-tcp",
        "mss-too-small",
        "truncated-tcp-header",
        "udp-ufo",
    ] {
        assert_eq!(n(refused), None, "{refused}");
    }
}

#[test]
fn gso_udp_inputs() {
    replay::replay(
        env!("CARGO_MANIFEST_DIR"),
        "gso_udp",
        gso_udp::check_gso_udp,
    );
}

#[test]
fn the_gso_udp_inputs_reach_the_datagrams() {
    let input = |name: &str| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/fuzz/gso_udp/");
        std::fs::read(format!("{dir}{name}")).unwrap()
    };
    let n = |name: &str| gso_udp::datagrams(&input(name));
    assert_eq!(n("ipv4"), Some(6));
    assert_eq!(n("ipv4-id-wraps-short-last"), Some(4));
    assert_eq!(n("ipv6-vlan-no-l3"), Some(3));
    for refused in [
        "tcp",
        "too-many-datagrams",
        "udp-header-cut",
        "ipv4-fragment",
    ] {
        assert_eq!(n(refused), None, "{refused}");
    }
}

#[test]
fn gso_ufo_inputs() {
    replay::replay(
        env!("CARGO_MANIFEST_DIR"),
        "gso_ufo",
        gso_ufo::check_gso_ufo,
    );
}

#[test]
fn csum_pending_inputs() {
    replay::replay(
        env!("CARGO_MANIFEST_DIR"),
        "csum_pending",
        csum_pending::check_csum_pending,
    );
}

#[test]
fn the_gso_ufo_inputs_reach_the_fragments() {
    let input = |name: &str| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/fuzz/gso_ufo/");
        std::fs::read(format!("{dir}{name}")).unwrap()
    };
    let n = |name: &str| gso_ufo::fragments(&input(name));
    assert_eq!(n("ipv4"), Some(3));
    assert_eq!(n("ipv4-fits"), Some(1));
    assert_eq!(n("ipv6-vlan-no-l3"), Some(3));
    assert_eq!(n("ipv6-hop-by-hop-routing-dest"), Some(4));
    for refused in [
        "tcp",
        "size-not-multiple-of-8",
        "too-many-fragments",
        "udp-header-cut",
        "ipv4-fragment",
    ] {
        assert_eq!(n(refused), None, "{refused}");
    }
}

#[test]
fn the_csum_pending_inputs_reach_the_checksum() {
    let input = |name: &str| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/fuzz/csum_pending/");
        std::fs::read(format!("{dir}{name}")).unwrap()
    };
    let at = |name: &str| csum_pending::found(&input(name)).map(|a| (a.l4, a.offset));
    assert_eq!(at("ipv4-udp"), Some((34, 6)));
    assert_eq!(at("ipv6-tcp-hop-by-hop"), Some((62, 16)));
    assert_eq!(at("ipv4-udp-sum-zero"), Some((34, 6)));
    assert_eq!(at("qinq-ipv4-udp-padded"), Some((42, 6)));
    assert_eq!(at("l3-ipv4-udp"), Some((20, 6)));
    assert_eq!(at("l3-ipv6-tcp"), Some((48, 16)));
    for refused in ["ipv4-fragment", "ipv6-tcp-cut"] {
        assert_eq!(at(refused), None, "{refused}");
    }
}
