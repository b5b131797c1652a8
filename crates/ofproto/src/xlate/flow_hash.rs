//! The hashes `multipath` (and `bundle`) compute over a packet's fields, as OVS computes them
//! (`flow_hash_fields()` with `jhash` and the Murmur3-based `hash_add`/`hash_finish` of its
//! portable build), so that a link chosen here is the link OVS chooses, and the megaflow
//! bits each set of fields consults (`flow_mask_hash_fields()`).
//!
//! The algorithms are Bob Jenkins' lookup3 mixing (public domain) and Austin Appleby's
//! MurmurHash3 steps (public domain); the byte layouts hashed are those of OVS's structures,
//! with words read in the host's (little-endian) order as OVS reads them on x86.

use flow::key::nw_frag;

use crate::pipekey::{PipeKey, PipeMask};

fn jhash_mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*c) ^ c.rotate_left(4);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a) ^ a.rotate_left(6);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b) ^ b.rotate_left(8);
    *b = b.wrapping_add(*a);
    *a = a.wrapping_sub(*c) ^ c.rotate_left(16);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a) ^ a.rotate_left(19);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b) ^ b.rotate_left(4);
    *b = b.wrapping_add(*a);
}

fn jhash_final(a: &mut u32, b: &mut u32, c: &mut u32) {
    *c = (*c ^ *b).wrapping_sub(b.rotate_left(14));
    *a = (*a ^ *c).wrapping_sub(c.rotate_left(11));
    *b = (*b ^ *a).wrapping_sub(a.rotate_left(25));
    *c = (*c ^ *b).wrapping_sub(b.rotate_left(16));
    *a = (*a ^ *c).wrapping_sub(c.rotate_left(4));
    *b = (*b ^ *a).wrapping_sub(a.rotate_left(14));
    *c = (*c ^ *b).wrapping_sub(b.rotate_left(24));
}

/// OVS's `jhash_bytes()`.
pub(super) fn jhash_bytes(p: &[u8], basis: u32) -> u32 {
    let word = |b: &[u8]| {
        let mut w = [0u8; 4];
        w[..b.len()].copy_from_slice(b);
        u32::from_le_bytes(w)
    };
    let init = 0xdead_beef_u32
        .wrapping_add(p.len() as u32)
        .wrapping_add(basis);
    let (mut a, mut b, mut c) = (init, init, init);
    let mut rest = p;
    while rest.len() >= 12 {
        a = a.wrapping_add(word(&rest[0..4]));
        b = b.wrapping_add(word(&rest[4..8]));
        c = c.wrapping_add(word(&rest[8..12]));
        jhash_mix(&mut a, &mut b, &mut c);
        rest = &rest[12..];
    }
    if !rest.is_empty() {
        let mut tail = [0u8; 12];
        tail[..rest.len()].copy_from_slice(rest);
        a = a.wrapping_add(word(&tail[0..4]));
        b = b.wrapping_add(word(&tail[4..8]));
        c = c.wrapping_add(word(&tail[8..12]));
        jhash_final(&mut a, &mut b, &mut c);
    }
    c
}

/// OVS's `hash_add()` (Murmur3's block step).
pub(crate) fn hash_add(hash: u32, data: u32) -> u32 {
    let mut h = hash;
    if data != 0 {
        let d = data
            .wrapping_mul(0xcc9e_2d51)
            .rotate_left(15)
            .wrapping_mul(0x1b87_3593);
        h ^= d;
    }
    h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64)
}

fn hash_add64(hash: u32, data: u64) -> u32 {
    hash_add(hash_add(hash, data as u32), (data >> 32) as u32)
}

/// OVS's `hash_finish()` (Murmur3's finalizer).
pub(crate) fn hash_finish(hash: u32, last: u32) -> u32 {
    let mut h = hash ^ last;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// OVS's `hash_2words()`.
pub(super) fn hash_2words(x: u32, y: u32) -> u32 {
    hash_finish(hash_add(hash_add(x, 0), y), 8)
}

const ETH_TYPE_IP: u16 = 0x0800;
const ETH_TYPE_IPV6: u16 = 0x86dd;

fn xor_eth(f: &PipeKey) -> [u8; 6] {
    let (s, d) = (f.dp.eth_src().0, f.dp.eth_dst().0);
    std::array::from_fn(|i| s[i] ^ d[i])
}

fn vid_xor(f: &PipeKey) -> u16 {
    (f.dp.vlan_tci() ^ f.dp.vlan2_tci()) & 0x0fff
}

/// The addresses XORed, 16 bytes (IPv4 in the first four), or `None` outside IP.
fn xor_addrs(f: &PipeKey) -> Option<[u8; 16]> {
    let mut out = [0u8; 16];
    match f.dp.eth_type() {
        ETH_TYPE_IP => {
            let (s, d) = (f.dp.nw_src().octets(), f.dp.nw_dst().octets());
            (0..4).for_each(|i| out[i] = s[i] ^ d[i]);
        }
        ETH_TYPE_IPV6 => {
            let (s, d) = (f.dp.ipv6_src().octets(), f.dp.ipv6_dst().octets());
            (0..16).for_each(|i| out[i] = s[i] ^ d[i]);
        }
        _ => return None,
    }
    Some(out)
}

fn symmetric_l4(f: &PipeKey, basis: u32) -> u32 {
    // OVS's struct: the addresses (16), eth_type, vlan_tci, tp_port, eth_addr (6), ip_proto;
    // 32 bytes with padding, all zero but what is set.
    let mut b = [0u8; 32];
    let et = f.dp.eth_type();
    b[16..18].copy_from_slice(&et.to_be_bytes());
    b[18..20].copy_from_slice(&vid_xor(f).to_be_bytes());
    b[22..28].copy_from_slice(&xor_eth(f));
    if let Some(a) = xor_addrs(f) {
        b[..16].copy_from_slice(&a);
        let proto = f.dp.nw_proto();
        b[28] = proto;
        if proto == 6 || proto == 132 {
            b[20..22].copy_from_slice(&(f.dp.tp_src() ^ f.dp.tp_dst()).to_be_bytes());
        }
    }
    jhash_bytes(&b, basis)
}

fn symmetric_l2(f: &PipeKey, basis: u32) -> u32 {
    if f.dp.packet_type() != 0 {
        return 0;
    }
    let mut b = [0u8; 12];
    b[0..2].copy_from_slice(&f.dp.eth_type().to_be_bytes());
    b[2..4].copy_from_slice(&vid_xor(f).to_be_bytes());
    b[4..10].copy_from_slice(&xor_eth(f));
    let mut h = basis;
    for w in b.chunks(4) {
        h = hash_add(h, u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
    }
    hash_finish(h, basis)
}

fn symmetric_l3l4(f: &PipeKey, basis: u32, udp: bool) -> u32 {
    let Some(a) = xor_addrs(f) else {
        return symmetric_l2(f, basis);
    };
    let mut h = basis;
    if f.dp.eth_type() == ETH_TYPE_IP {
        h = hash_add(h, u32::from_le_bytes([a[0], a[1], a[2], a[3]]));
    } else {
        for w in a.chunks(8) {
            h = hash_add64(h, u64::from_le_bytes(w.try_into().expect("8 bytes")));
        }
    }
    let proto = f.dp.nw_proto();
    h = hash_add(h, proto.into());
    if f.dp.nw_frag() & nw_frag::MASK == 0 && (proto == 6 || proto == 132 || (udp && proto == 17)) {
        let ports = (f.dp.tp_src() ^ f.dp.tp_dst()).to_be_bytes();
        h = hash_add(h, u16::from_le_bytes(ports).into());
    }
    hash_finish(h, basis)
}

fn symmetric_l3(f: &PipeKey, basis: u32) -> u32 {
    // OVS's struct: the addresses (16) and eth_type; 20 bytes with padding.
    let mut b = [0u8; 20];
    b[16..18].copy_from_slice(&f.dp.eth_type().to_be_bytes());
    if let Some(a) = xor_addrs(f) {
        b[..16].copy_from_slice(&a);
    }
    jhash_bytes(&b, basis)
}

/// OVS's `flow_hash_fields()`: `fields` is an index into
/// [`crate::syntax::HASH_FIELDS`].
pub(super) fn flow_hash_fields(f: &PipeKey, fields: u16, basis: u16) -> u32 {
    let basis = u32::from(basis);
    let et = f.dp.eth_type();
    match fields {
        0 => jhash_bytes(&f.dp.eth_src().0, basis),
        1 => symmetric_l4(f, basis),
        2 => symmetric_l3l4(f, basis, false),
        3 => symmetric_l3l4(f, basis, true),
        4 | 5 => match et {
            ETH_TYPE_IP => {
                let a = if fields == 4 {
                    f.dp.nw_src()
                } else {
                    f.dp.nw_dst()
                };
                jhash_bytes(&a.octets(), basis)
            }
            ETH_TYPE_IPV6 => {
                let a = if fields == 4 {
                    f.dp.ipv6_src()
                } else {
                    f.dp.ipv6_dst()
                };
                jhash_bytes(&a.octets(), basis)
            }
            _ => basis,
        },
        _ => symmetric_l3(f, basis),
    }
}

/// OVS's `flow_mask_hash_fields()`: the bits the hash of `fields` consulted.
pub(super) fn mask_hash_fields(f: &PipeKey, wc: &mut PipeMask, fields: u16) {
    let et = f.dp.eth_type();
    let ip = et == ETH_TYPE_IP;
    let ipv6 = et == ETH_TYPE_IPV6;
    let w = &mut wc.dp;
    let addrs = |w: &mut flow::Mask, src: bool, dst: bool| {
        if ip {
            if src {
                w.set_nw_src([255; 4].into());
            }
            if dst {
                w.set_nw_dst([255; 4].into());
            }
        } else if ipv6 {
            if src {
                w.set_ipv6_src(u128::MAX.into());
            }
            if dst {
                w.set_ipv6_dst(u128::MAX.into());
            }
        }
    };
    let proto = f.dp.nw_proto();
    let unfragmented = f.dp.nw_frag() & nw_frag::MASK == 0;
    match fields {
        0 => {
            w.set_eth_src(flow::EthAddr([0xff; 6]));
        }
        1 => {
            w.set_eth_src(flow::EthAddr([0xff; 6]))
                .set_eth_dst(flow::EthAddr([0xff; 6]));
            addrs(w, true, true);
            if ip || ipv6 {
                w.set_nw_proto(0xff);
                // UDP ports are not hashed; ICMP's type and code are the low byte.
                if proto != 17 {
                    let m = if proto == 1 { 0xff } else { 0xffff };
                    w.set_tp_src(m).set_tp_dst(m);
                }
            }
            let (t1, t2) = (w.vlan_tci(), w.vlan2_tci());
            w.set_vlan_tci(t1 | 0x1fff).set_vlan2_tci(t2 | 0x1fff);
        }
        2 | 3 => {
            if fields == 3 && (ip || ipv6) && proto == 17 && unfragmented {
                w.set_tp_src(0xffff).set_tp_dst(0xffff);
            }
            if ip || ipv6 {
                addrs(w, true, true);
                w.set_nw_proto(0xff);
                if (proto == 6 || proto == 132) && unfragmented {
                    w.set_tp_src(0xffff).set_tp_dst(0xffff);
                }
            }
        }
        4 => addrs(w, true, false),
        5 => addrs(w, false, true),
        _ => addrs(w, true, true),
    }
}
