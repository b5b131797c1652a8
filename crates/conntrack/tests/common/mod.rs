//! Helpers the conntrack integration tests share (each test binary uses some of them).

use conntrack::{Conntrack, CtArgs, CtCache, CtMeta, CtPacket};

/// Ones'-complement sum of big-endian 16-bit words (odd tail padded with zero): the tests'
/// own Internet checksum, independent of `wire::checksum`, so that fixtures do not check the
/// code with itself.
pub fn sum(data: &[u8]) -> u64 {
    data.chunks(2)
        .map(|c| u64::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)])))
        .sum()
}

/// Folds a [`sum`] to 16 bits and complements it: the checksum field's value.
pub fn fold(mut s: u64) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// Eth/IPv4 frame `src` → `dst` of protocol `proto` carrying `l4`, the IPv4 checksum and the
/// transport checksum (the 16 bits at `csum_at` in `l4`, over the pseudo-header) computed; a
/// UDP checksum that comes out 0 is sent as 0xffff.
#[allow(dead_code)]
pub fn ipv4_frame(
    src: [u8; 4],
    dst: [u8; 4],
    proto: u8,
    mut l4: Vec<u8>,
    csum_at: usize,
) -> Vec<u8> {
    let mut f = vec![0u8; 14];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let [hi, lo] = (20 + l4.len() as u16).to_be_bytes();
    let mut ip = vec![0x45, 0, hi, lo, 0, 1, 0, 0, 64, proto, 0, 0];
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    let c = fold(sum(&ip));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&src);
    pseudo.extend_from_slice(&dst);
    pseudo.extend_from_slice(&[0, proto]);
    pseudo.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    let c = match fold(sum(&pseudo) + sum(&l4)) {
        0 if proto == 17 => 0xffff,
        c => c,
    };
    l4[csum_at..csum_at + 2].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&l4);
    f
}

/// The tracker's view of an Ethernet frame with its IP header at 14 (IPv4 or IPv6 by its
/// version), nothing checked before.
#[allow(dead_code)]
pub fn packet(f: &[u8]) -> CtPacket<'_> {
    CtPacket {
        frame: f,
        l3: 14,
        v6: f[14] >> 4 == 6,
        frag_l4_len: None,
        verified: false,
        natted: false,
    }
}

/// The metadata `process_batch` gives `frames`, as one batch.
#[allow(dead_code)]
pub fn batch(
    ct: &Conntrack,
    cache: &mut CtCache,
    frames: &[Vec<u8>],
    args: &CtArgs,
    now: u64,
) -> Vec<CtMeta> {
    let pkts: Vec<CtPacket<'_>> = frames.iter().map(|f| packet(f)).collect();
    let mut out = vec![(CtMeta::default(), None); pkts.len()];
    ct.process_batch(cache, &pkts, &mut out, args, now);
    out.into_iter().map(|(md, _)| md).collect()
}
