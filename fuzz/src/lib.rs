//! Invariant checks of the `flow` fuzz targets, shared with the crash-regression test
//! (`crates/flow/tests/fuzz_regressions.rs` path-imports this file), so that a committed crash
//! input is replayed through exactly the checks that found it.
//!
//! The checks assert properties, not just absence of panics: extraction is deterministic, its
//! returned hash is the key's hash, it keeps the caller's metadata, and a reused key buffer gives
//! the same key as a fresh one; the datapath flow text format is a fixed point of print ∘ parse.

use flow::extract::NO_LAYER;
use flow::key::{METADATA_WORDS, PACKET_WORDS, VLAN_CFI, nw_frag};
use flow::odp::{PortNames, format_actions, parse_actions, parse_flow, parse_key};
use flow::{FlowKey, extract};

/// Number of metadata variants [`meta_key`] chooses from.
pub const META_VARIANTS: u8 = 8;

/// The key a packet arrives with, before extraction, by variant `sel` (taken modulo
/// [`META_VARIANTS`]): none, port and recirculation, tunnel (including GENEVE options in the
/// high words), L3 packet types (IPv4, IPv6, MPLS), conntrack with an explicit Ethernet packet
/// type, and a packet type in a namespace extraction does not parse.
pub fn meta_key(sel: u8) -> FlowKey {
    let mut k = FlowKey::new();
    match sel % META_VARIANTS {
        0 => {}
        1 => {
            k.set_in_port(3).set_recirc_id(9);
        }
        2 => {
            k.set_in_port(1)
                .set_tun_id(0x64)
                .set_tun_ipv4_src([192, 168, 1, 1].into())
                .set_tun_ipv4_dst([192, 168, 1, 2].into())
                .set_tun_ttl(64)
                .set_tun_flags(flow::key::tun_flags::KEY)
                .set_tun_tp_dst(6081)
                .set_tun_geneve_opts(&[0x01, 0x02, 0x80, 0x01, 0, 0, 0, 7]);
        }
        3 => {
            k.set_packet_type((1 << 16) | 0x0800);
        }
        4 => {
            k.set_in_port(2).set_packet_type((1 << 16) | 0x86dd);
        }
        5 => {
            k.set_packet_type((1 << 16) | 0x8847);
        }
        6 => {
            // Word 11 present with packet_type 0: extraction must still parse Ethernet.
            k.set_ct_state(0x22)
                .set_ct_zone(5)
                .set_ct_mark(1)
                .set_ct_label(0xdead_beef)
                .set_packet_type(0);
        }
        _ => {
            k.set_packet_type((2 << 16) | 1);
        }
    }
    k
}

/// Packets that fill many packet words (VLAN word 5, IPv6 and ND words, MPLS, ARP hardware
/// addresses), extracted into a key before the packet under test to leave stale words behind.
fn prior_packets() -> [Vec<u8>; 4] {
    const MACS: [u8; 12] = [2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    let eth = |types: &[u8]| [&MACS[..], types].concat();

    // QinQ, IPv6 with a hop-by-hop header, Neighbor Solicitation with both link-layer options.
    let mut nd = eth(&[0x88, 0xa8, 0x20, 0x05, 0x81, 0x00, 0x00, 0x64, 0x86, 0xdd]);
    nd.extend_from_slice(&[0x6a, 0xbc, 0xde, 0xf1, 0, 48, 0, 255]);
    nd.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    nd.extend_from_slice(&[0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 2]);
    nd.extend_from_slice(&[58, 0, 1, 4, 0, 0, 0, 0]);
    nd.extend_from_slice(&[135, 0, 0, 0, 0, 0, 0, 0]);
    nd.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    nd.extend_from_slice(&[1, 1, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]);
    nd.extend_from_slice(&[2, 1, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66]);

    // Four MPLS label stack entries.
    let mut mpls = eth(&[0x88, 0x47]);
    for (label, bos) in [(812u32, 0u32), (813, 0), (814, 0), (815, 1)] {
        mpls.extend_from_slice(&((label << 12) | (bos << 8) | 4).to_be_bytes());
    }
    mpls.extend_from_slice(&[
        0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ]);

    // 802.1Q, IPv4 with a fragment-free TCP segment carrying all flags.
    let mut tcp = eth(&[0x81, 0x00, 0xe0, 0x07, 0x08, 0x00]);
    tcp.extend_from_slice(&[0x45, 0xb8, 0, 40, 0, 1, 0x40, 0, 7, 6, 0, 0]);
    tcp.extend_from_slice(&[10, 1, 2, 3, 10, 4, 5, 6]);
    tcp.extend_from_slice(&[
        0x12, 0x34, 0x56, 0x78, 0, 0, 0, 1, 0, 0, 0, 0, 0x51, 0xff, 1, 0,
    ]);
    tcp.extend_from_slice(&[0, 0, 0, 0]);

    // ARP reply.
    let mut arp = eth(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 2]);
    arp.extend_from_slice(&[0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 10, 0, 0, 1]);
    arp.extend_from_slice(&[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 10, 0, 0, 2]);

    [nd, mpls, tcp, arp]
}

/// `flow::extract` on `data[1..]` with the metadata of variant `data[0]`.
pub fn check_extract(data: &[u8]) {
    let Some((&sel, pkt)) = data.split_first() else {
        return;
    };
    let meta = meta_key(sel);

    let mut key = meta.clone();
    let x = extract(pkt, &mut key);

    // The returned hash is the datapath hash of the key as stored.
    assert_eq!(
        x.hash,
        key.hash(0),
        "returned hash differs from key.hash(0)"
    );

    // Layer offsets lie within the packet and in header order.
    let l = x.layers;
    for (name, o) in [("l2_5", l.l2_5), ("l3", l.l3), ("l4", l.l4)] {
        assert!(
            o == NO_LAYER || (o as usize) <= pkt.len(),
            "{name} offset {o} past the packet ({} bytes)",
            pkt.len()
        );
    }
    if l.l4 != NO_LAYER {
        assert!(
            l.l3 != NO_LAYER && l.l3 < l.l4,
            "l4 without l3 before it: {l:?}"
        );
    }
    if l.l2_5 != NO_LAYER && l.l3 != NO_LAYER {
        assert!(l.l2_5 < l.l3, "MPLS after L3: {l:?}");
    }

    // Metadata is the caller's: same words present, same values.
    assert_eq!(
        key.map() & METADATA_WORDS,
        meta.map() & METADATA_WORDS,
        "extraction changed the metadata presence map"
    );
    let mut m = meta.map() & METADATA_WORDS;
    while m != 0 {
        let i = m.trailing_zeros() as usize;
        m &= m - 1;
        assert_eq!(
            key.word(i),
            meta.word(i),
            "extraction changed metadata word {i}"
        );
    }

    // Field encodings stay within their ranges.
    assert_eq!(
        key.nw_frag() & !nw_frag::MASK,
        0,
        "nw_frag {:#x}",
        key.nw_frag()
    );
    assert_eq!(
        key.tcp_flags() & !0x0fff,
        0,
        "tcp_flags {:#x}",
        key.tcp_flags()
    );
    assert_eq!(
        key.ipv6_label() & !0xf_ffff,
        0,
        "ipv6_label {:#x}",
        key.ipv6_label()
    );
    for tci in [key.vlan_tci(), key.vlan2_tci()] {
        assert!(
            tci == 0 || tci & VLAN_CFI != 0,
            "VLAN TCI {tci:#x} without CFI"
        );
    }
    if key.vlan_tci() == 0 {
        assert_eq!(key.vlan2_tci(), 0, "inner VLAN without an outer one");
    }

    // Deterministic: a second extraction into a fresh key is the same key and result.
    let mut again = meta.clone();
    let y = extract(pkt, &mut again);
    assert!(
        key.exact_eq(&again),
        "second extraction differs:\n{key:?}\n{again:?}"
    );
    assert_eq!(x, y);

    // A reused key gives the same key as a fresh one: no stale word survives, whether the key
    // held another packet's fields or arbitrary garbage in every packet word.
    for prior in prior_packets() {
        let mut reused = meta.clone();
        extract(&prior, &mut reused);
        let z = extract(pkt, &mut reused);
        assert!(
            key.exact_eq(&reused),
            "reused key differs:\n{key:?}\n{reused:?}"
        );
        assert_eq!(x, z, "reused key gives a different result");
    }
    let mut dirty = meta.clone();
    let mut m = PACKET_WORDS;
    while m != 0 {
        let i = m.trailing_zeros() as usize;
        m &= m - 1;
        dirty.put_word(i, 0xa5a5_5a5a_0f0f_f0f0 ^ i as u64);
    }
    dirty.mark_words(PACKET_WORDS);
    let z = extract(pkt, &mut dirty);
    assert!(
        key.exact_eq(&dirty),
        "dirty key differs:\n{key:?}\n{dirty:?}"
    );
    assert_eq!(x, z, "dirty key gives a different result");
}

/// Each of `parse_flow`, `parse_key` and `parse_actions` on `data` (when UTF-8): whatever
/// parses prints (without port names) to text that parses again and prints identically. The
/// re-parsed value may differ from the first: as in OVS, the non-verbose form leaves out
/// attributes whose mask is all zero (`in_port(1),udp()` prints `in_port(1)`).
pub fn check_odp(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };

    if let Ok(f) = parse_flow(text, &mut PortNames::new()) {
        let printed = f.format(None, None);
        let g = parse_flow(&printed, &mut PortNames::new())
            .unwrap_or_else(|e| panic!("printed flow does not parse: {e}\n{text:?}\n{printed}"));
        assert_eq!(
            g.format(None, None),
            printed,
            "flow reprint differs\n{text:?}"
        );
    }

    if let Ok(k) = parse_key(text, &mut PortNames::new()) {
        let printed = k.format(None, None);
        let g = parse_key(&printed, &mut PortNames::new())
            .unwrap_or_else(|e| panic!("printed key does not parse: {e}\n{text:?}\n{printed}"));
        assert_eq!(
            g.format(None, None),
            printed,
            "key reprint differs\n{text:?}"
        );
    }

    if let Ok(a) = parse_actions(text, &mut PortNames::new()) {
        let printed = format_actions(&a, None);
        let g = parse_actions(&printed, &mut PortNames::new())
            .unwrap_or_else(|e| panic!("printed actions do not parse: {e}\n{text:?}\n{printed}"));
        assert_eq!(
            format_actions(&g, None),
            printed,
            "actions reprint differs\n{text:?}"
        );
    }
}
