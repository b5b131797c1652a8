//! Rewrites of the link-layer headers: Ethernet addresses (`set(eth)`), 802.1Q/802.1ad tags
//! (`push_vlan`, `pop_vlan`, as OVS's `eth_push_vlan()` and `eth_pop_vlan()`), MPLS label
//! stack entries (RFC 3032: `push_mpls`, `pop_mpls`, `set(mpls)`), and the conversions between
//! an Ethernet frame and an L3 packet (`push_eth`, `pop_eth`, OVS's `push_eth()` and
//! `pop_eth()`). Each keeps the packet's header offsets current.

use wire::EtherType;

use crate::actions::SetEth;
use crate::packet::{NO_OFS, Packet};

use super::RewriteError::{self, *};
use super::{
    ETH_HLEN, ETH_TYPE_OFS, MPLS_BOS, MPLS_HLEN, VLAN_CFI, VLAN_HLEN, at, be16, be32, masked,
    put16, put32, shift,
};

#[inline]
fn is_vlan(t: u16) -> bool {
    EtherType(t).is_vlan()
}

/// Offset of the first byte after the L2 header (MACs, every VLAN tag, ethertype): where an
/// MPLS label stack begins.
pub(crate) fn l2_end(d: &[u8]) -> Option<usize> {
    if d.len() < ETH_HLEN {
        return None;
    }
    let mut p = ETH_TYPE_OFS;
    while is_vlan(be16(d, p)) {
        p += VLAN_HLEN;
        if p + 2 > d.len() {
            return None;
        }
    }
    Some(p + 2)
}

/// `Ok` for an Ethernet frame, [`RewriteError::NotEthernet`] for an L3 packet.
#[inline]
fn ethernet(pkt: &Packet) -> Result<(), RewriteError> {
    if pkt.meta.packet_type == 0 {
        Ok(())
    } else {
        Err(NotEthernet)
    }
}

/// `push_eth(src=,dst=)`: prepends an Ethernet header to an L3 packet, with the ethertype of
/// its packet type, and makes it an Ethernet frame.
pub fn push_eth(pkt: &mut Packet, src: &[u8; 6], dst: &[u8; 6]) -> Result<(), RewriteError> {
    let pt = pkt.meta.packet_type;
    if pt >> 16 != 1 {
        return Err(NotL3);
    }
    let h = pkt.push_front(ETH_HLEN);
    h[..6].copy_from_slice(dst);
    h[6..12].copy_from_slice(src);
    h[12..14].copy_from_slice(&(pt as u16).to_be_bytes());
    let m = &mut pkt.meta;
    m.packet_type = 0;
    for o in [&mut m.l2_5, &mut m.l3, &mut m.l4] {
        shift(o, ETH_HLEN as isize, 0);
    }
    Ok(())
}

/// `push_eth` then `pop_mpls` ([`crate::actions::DpAction::PushEthPopMpls`]). On an L3 MPLS packet
/// (the label stack at offset 0) the four label bytes and ten bytes in front of them take the new
/// Ethernet header, and the offsets end where the two steps would put them; any other packet takes
/// the two steps.
pub fn push_eth_pop_mpls(
    pkt: &mut Packet,
    src: &[u8; 6],
    dst: &[u8; 6],
    eth_type: u16,
) -> Result<(), RewriteError> {
    let pt = pkt.meta.packet_type;
    if pt >> 16 != 1
        || !matches!(pt as u16, 0x8847 | 0x8848)
        || pkt.meta.l2_5 != 0
        || pkt.len() < MPLS_HLEN
    {
        // As the two actions run: the second also on a packet the first refused.
        let first = push_eth(pkt, src, dst);
        return pop_mpls(pkt, eth_type).and(first);
    }
    let bos = be32(pkt.data(), 0) & MPLS_BOS != 0;
    pkt.push_front(ETH_HLEN - MPLS_HLEN);
    let Some(h) = pkt.data_mut().first_chunk_mut::<ETH_HLEN>() else {
        return Err(Runt);
    };
    h[..6].copy_from_slice(dst);
    h[6..12].copy_from_slice(src);
    h[12..14].copy_from_slice(&eth_type.to_be_bytes());
    let m = &mut pkt.meta;
    m.packet_type = 0;
    let no_l3 = m.l3 == NO_OFS;
    // After push_eth every offset moves by 14; pop_mpls then removes the label at 14.
    for o in [&mut m.l3, &mut m.l4] {
        shift(o, ETH_HLEN as isize, 0);
        shift(o, -(MPLS_HLEN as isize), ETH_HLEN + MPLS_HLEN);
    }
    if bos {
        m.l2_5 = NO_OFS;
        if no_l3 {
            m.l3 = ETH_HLEN as u16;
        }
    } else {
        m.l2_5 = ETH_HLEN as u16;
    }
    Ok(())
}

/// `pop_eth`: removes the Ethernet header and any VLAN tags (everything in front of the MPLS
/// label stack or L3 header) and makes the packet an L3 packet whose packet type is the
/// ethertype that stood in front of it.
pub fn pop_eth(pkt: &mut Packet) -> Result<(), RewriteError> {
    ethernet(pkt)?;
    let d = pkt.data();
    let from = |o: u16| at(o, d.len(), 0).filter(|&o| o >= ETH_HLEN);
    let ofs = match from(pkt.meta.l2_5).or_else(|| from(pkt.meta.l3)) {
        Some(o) => o,
        None => l2_end(d).ok_or(Runt)?,
    };
    let eth_type = be16(d, ofs - 2);
    pkt.pull_front(ofs);
    let m = &mut pkt.meta;
    m.packet_type = (1 << 16) | u32::from(eth_type);
    for o in [&mut m.l2_5, &mut m.l3, &mut m.l4] {
        shift(o, -(ofs as isize), ofs);
    }
    Ok(())
}

/// `set(eth(src=,dst=))`: masked write of the MAC addresses.
pub fn set_eth(pkt: &mut Packet, s: &SetEth) -> Result<(), RewriteError> {
    ethernet(pkt)?;
    let Some(h) = pkt.data_mut().first_chunk_mut::<ETH_HLEN>() else {
        return Err(Runt);
    };
    // Both addresses at once, as an 8-byte and a 4-byte masked write prepared at compile time.
    let w = s.words();
    let lo = u64::from_ne_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]);
    let hi = u32::from_ne_bytes([h[8], h[9], h[10], h[11]]);
    h[..8].copy_from_slice(&((lo & !w.mask_lo) | w.val_lo).to_ne_bytes());
    h[8..12].copy_from_slice(&((hi & !w.mask_hi) | w.val_hi).to_ne_bytes());
    Ok(())
}

/// `push_vlan`: inserts a tag after the MAC addresses, in front of any tag already there.
/// `tci` is written without the CFI bit, as OVS's `eth_push_vlan()` does.
pub fn push_vlan(pkt: &mut Packet, tpid: u16, tci: u16) -> Result<(), RewriteError> {
    ethernet(pkt)?;
    if pkt.len() < ETH_HLEN {
        return Err(Runt);
    }
    let tag = pkt.insert_at(ETH_TYPE_OFS, VLAN_HLEN);
    put16(tag, 0, tpid);
    put16(tag, 2, tci & !VLAN_CFI);
    let m = &mut pkt.meta;
    for o in [&mut m.l2_5, &mut m.l3, &mut m.l4] {
        shift(o, VLAN_HLEN as isize, 0);
    }
    Ok(())
}

/// `pop_vlan`: removes the outer VLAN tag; an untagged frame is left as it is (`Ok`).
pub fn pop_vlan(pkt: &mut Packet) -> Result<(), RewriteError> {
    ethernet(pkt)?;
    let d = pkt.data();
    if d.len() < ETH_HLEN {
        return Err(Runt);
    }
    if !is_vlan(be16(d, ETH_TYPE_OFS)) {
        return Ok(());
    }
    if d.len() < ETH_HLEN + VLAN_HLEN {
        return Err(Runt);
    }
    pkt.remove_at(ETH_TYPE_OFS, VLAN_HLEN);
    let m = &mut pkt.meta;
    for o in [&mut m.l2_5, &mut m.l3, &mut m.l4] {
        shift(o, -(VLAN_HLEN as isize), ETH_HLEN + VLAN_HLEN);
    }
    Ok(())
}

/// `push_mpls`: inserts `lse` (as on the wire, TTL included) in front of the label stack, or
/// between L2 and L3 on a packet without one, and writes `eth_type` as the ethertype in front
/// of it. `eth_type` should be an MPLS ethertype (the compiler checks it).
pub fn push_mpls(pkt: &mut Packet, lse: u32, eth_type: u16) -> Result<(), RewriteError> {
    ethernet(pkt)?;
    let len = pkt.len();
    let ofs = match at(pkt.meta.l2_5, len, 0) {
        Some(o) if o >= ETH_HLEN => o,
        Some(_) => return Err(NoMpls),
        None => l2_end(pkt.data()).ok_or(Runt)?,
    };
    let entry = pkt.insert_at(ofs, MPLS_HLEN);
    put32(entry, 0, lse);
    // The bytes in front of the entry moved with the frame start: the ethertype is still just
    // before `ofs`.
    put16(pkt.data_mut(), ofs - 2, eth_type);
    let m = &mut pkt.meta;
    m.l2_5 = ofs as u16;
    shift(&mut m.l3, MPLS_HLEN as isize, 0);
    shift(&mut m.l4, MPLS_HLEN as isize, 0);
    Ok(())
}

/// `add_mpls`: puts `lse` (as on the wire) in front of the whole packet, as OVS's `add_mpls()`
/// does for `encap(mpls)`: an Ethernet frame or an L3 packet alike becomes the payload of an L3
/// MPLS packet whose packet type is `(1, eth_type)`. `eth_type` should be an MPLS ethertype
/// (the compiler checks it).
pub fn add_mpls(pkt: &mut Packet, lse: u32, eth_type: u16) -> Result<(), RewriteError> {
    put32(pkt.push_front(MPLS_HLEN), 0, lse);
    let m = &mut pkt.meta;
    m.packet_type = (1 << 16) | u32::from(eth_type);
    m.l2_5 = 0;
    shift(&mut m.l3, MPLS_HLEN as isize, 0);
    shift(&mut m.l4, MPLS_HLEN as isize, 0);
    Ok(())
}

/// `pop_mpls(eth_type=)`: removes the outer label stack entry and writes `eth_type` as the
/// ethertype in front of what follows. After the bottom entry, L3 starts where the stack was.
/// On an L3 MPLS packet (no Ethernet header) the packet type becomes what `eth_type` says:
/// an Ethernet frame for 0x6558 (Transparent Ethernet Bridging), else `(1, eth_type)`, as
/// OVS's `pop_mpls()` has it.
pub fn pop_mpls(pkt: &mut Packet, eth_type: u16) -> Result<(), RewriteError> {
    if pkt.meta.packet_type >> 16 == 1 && is_mpls_type(pkt.meta.packet_type as u16) {
        return pop_l3_mpls(pkt, eth_type);
    }
    ethernet(pkt)?;
    let ofs = match at(pkt.meta.l2_5, pkt.len(), MPLS_HLEN) {
        Some(o) if o >= ETH_HLEN => o,
        _ => return Err(NoMpls),
    };
    let d = pkt.data_mut();
    let bos = be32(d, ofs) & MPLS_BOS != 0;
    put16(d, ofs - 2, eth_type);
    pkt.remove_at(ofs, MPLS_HLEN);
    let m = &mut pkt.meta;
    if bos {
        m.l2_5 = NO_OFS;
        if m.l3 == NO_OFS {
            m.l3 = ofs as u16;
        } else {
            shift(&mut m.l3, -(MPLS_HLEN as isize), ofs + MPLS_HLEN);
        }
    } else {
        shift(&mut m.l3, -(MPLS_HLEN as isize), ofs + MPLS_HLEN);
    }
    shift(&mut m.l4, -(MPLS_HLEN as isize), ofs + MPLS_HLEN);
    Ok(())
}

/// [`pop_mpls`] on an L3 MPLS packet: the label stack starts the packet.
fn pop_l3_mpls(pkt: &mut Packet, eth_type: u16) -> Result<(), RewriteError> {
    if pkt.len() < MPLS_HLEN {
        return Err(Runt);
    }
    let bos = be32(pkt.data(), 0) & MPLS_BOS != 0;
    pkt.pull_front(MPLS_HLEN);
    let m = &mut pkt.meta;
    m.packet_type = match eth_type {
        ETH_TYPE_TEB => 0,
        t => (1 << 16) | u32::from(t),
    };
    let ethernet = m.packet_type == 0;
    m.l2_5 = if bos || ethernet { NO_OFS } else { 0 };
    if bos && !ethernet && m.l3 == NO_OFS {
        m.l3 = 0;
    } else {
        shift(&mut m.l3, -(MPLS_HLEN as isize), MPLS_HLEN);
    }
    shift(&mut m.l4, -(MPLS_HLEN as isize), MPLS_HLEN);
    Ok(())
}

#[inline]
fn is_mpls_type(t: u16) -> bool {
    matches!(t, 0x8847 | 0x8848)
}

/// Ethertype of an Ethernet frame carried whole (RFC 1701's Transparent Ethernet Bridging).
const ETH_TYPE_TEB: u16 = 0x6558;

/// `set(mpls(...))`: masked write of the outer label stack entry.
pub fn set_mpls(pkt: &mut Packet, lse: u32, mask: u32) -> Result<(), RewriteError> {
    let ofs = at(pkt.meta.l2_5, pkt.len(), MPLS_HLEN).ok_or(NoMpls)?;
    let d = pkt.data_mut();
    let new = masked(be32(d, ofs), lse, mask);
    put32(d, ofs, new);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use wire::Ipv4Packet;

    use super::super::set_ipv4;
    use super::super::tests::{MACS, extracted, frame_v4, v4};
    use crate::actions::SetIpv4;

    #[test]
    fn push_and_pop_vlan_move_the_offsets() {
        let f = frame_v4(false, v4(1), v4(2), 0, 64, (1, 2), b"hi", true);
        let mut p = extracted(&f);
        assert_eq!((p.meta.l3, p.meta.l4), (14, 34));
        push_vlan(&mut p, 0x8100, 0x1000 | 0x2064).unwrap();
        assert_eq!(&p.data()[12..18], &[0x81, 0x00, 0x20, 0x64, 0x08, 0x00]);
        assert_eq!((p.meta.l2_5, p.meta.l3, p.meta.l4), (NO_OFS, 18, 38));
        push_vlan(&mut p, 0x88a8, 7).unwrap();
        assert_eq!(
            &p.data()[12..20],
            &[0x88, 0xa8, 0, 7, 0x81, 0x00, 0x20, 0x64]
        );
        assert_eq!((p.meta.l3, p.meta.l4), (22, 42));
        pop_vlan(&mut p).unwrap();
        pop_vlan(&mut p).unwrap();
        assert_eq!(p.data(), &f[..]);
        assert_eq!((p.meta.l3, p.meta.l4), (14, 34));
        // Untagged: nothing to pop.
        pop_vlan(&mut p).unwrap();
        assert_eq!(p.data(), &f[..]);
    }

    #[test]
    fn mpls_push_pop_round_trip() {
        let f = frame_v4(true, v4(1), v4(2), 0, 64, (1, 2), b"", true);
        let mut p = extracted(&f);
        push_mpls(&mut p, 100 << 12 | 0x100 | 64, 0x8847).unwrap();
        assert_eq!(&p.data()[12..18], &[0x88, 0x47, 0x00, 0x06, 0x41, 0x40]);
        assert_eq!((p.meta.l2_5, p.meta.l3, p.meta.l4), (14, 18, 38));
        push_mpls(&mut p, 200 << 12 | 63, 0x8847).unwrap();
        assert_eq!((p.meta.l2_5, p.meta.l3), (14, 22));
        set_mpls(&mut p, 5, 0xff).unwrap();
        assert_eq!(&p.data()[14..18], &[0x00, 0x0c, 0x80, 0x05]);
        pop_mpls(&mut p, 0x8847).unwrap();
        assert_eq!((p.meta.l2_5, p.meta.l3), (14, 18));
        pop_mpls(&mut p, 0x0800).unwrap();
        assert_eq!(p.data(), &f[..]);
        assert_eq!((p.meta.l2_5, p.meta.l3, p.meta.l4), (NO_OFS, 14, 34));
        assert_eq!(pop_mpls(&mut p, 0x0800), Err(NoMpls));
    }

    #[test]
    fn pop_mpls_after_extraction_sets_l3() {
        // Extraction stops at the label stack; after the bottom entry L3 starts there.
        let mut f = MACS.to_vec();
        f.extend_from_slice(&[0x88, 0x47, 0x00, 0x06, 0x41, 0x04]);
        f.extend_from_slice(&frame_v4(false, v4(1), v4(2), 0, 64, (1, 2), b"", true)[14..]);
        let mut p = extracted(&f);
        assert_eq!((p.meta.l2_5, p.meta.l3), (14, NO_OFS));
        pop_mpls(&mut p, 0x0800).unwrap();
        assert_eq!((p.meta.l2_5, p.meta.l3), (NO_OFS, 14));
        set_ipv4(
            &mut p,
            &SetIpv4 {
                src: v4(0),
                src_mask: v4(0),
                dst: v4(0),
                dst_mask: v4(0),
                tos: 0,
                tos_mask: 0,
                ttl: 9,
                ttl_mask: 0xff,
            },
        )
        .unwrap();
        assert!(Ipv4Packet::new_unchecked(&p.data()[14..]).verify_checksum());
    }

    #[test]
    fn pop_eth_and_push_eth_move_the_offsets_and_the_packet_type() {
        let f = frame_v4(false, v4(1), v4(2), 0, 64, (1, 2), b"hi", true);
        let mut p = extracted(&f);
        push_vlan(&mut p, 0x8100, 5).unwrap();
        pop_eth(&mut p).unwrap();
        assert_eq!(p.data(), &f[ETH_HLEN..]);
        assert_eq!(p.meta.packet_type, 0x1_0800);
        assert_eq!((p.meta.l2_5, p.meta.l3, p.meta.l4), (NO_OFS, 0, 20));
        // The Ethernet actions refuse an L3 packet and leave it alone.
        let set = SetEth::new([0; 6], [0; 6], [9; 6], [0xff; 6]);
        assert_eq!(set_eth(&mut p, &set), Err(NotEthernet));
        assert_eq!(push_vlan(&mut p, 0x8100, 1), Err(NotEthernet));
        assert_eq!(pop_mpls(&mut p, 0x0800), Err(NotEthernet));
        assert_eq!(pop_eth(&mut p), Err(NotEthernet));
        assert_eq!(p.data(), &f[ETH_HLEN..]);
        // The L3 rewrites still find their headers.
        set_ipv4(
            &mut p,
            &SetIpv4 {
                src: v4(0),
                src_mask: v4(0),
                dst: v4(0),
                dst_mask: v4(0),
                tos: 0,
                tos_mask: 0,
                ttl: 3,
                ttl_mask: 0xff,
            },
        )
        .unwrap();
        assert!(Ipv4Packet::new_unchecked(p.data()).verify_checksum());
        push_eth(&mut p, &[2, 0, 0, 0, 0, 1], &[2, 0, 0, 0, 0, 2]).unwrap();
        assert_eq!(p.meta.packet_type, 0);
        assert_eq!(&p.data()[..14], &[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0]);
        assert_eq!((p.meta.l3, p.meta.l4), (14, 34));
        assert_eq!(push_eth(&mut p, &[0; 6], &[0; 6]), Err(NotL3));
        // Without offsets (not extracted), pop_eth finds the end of the tags itself.
        let mut q = Packet::from_slice(&p.data()[..20]);
        pop_eth(&mut q).unwrap();
        assert_eq!((q.len(), q.meta.packet_type), (6, 0x1_0800));
        let mut runt = Packet::from_slice(&[0; 10]);
        assert_eq!(pop_eth(&mut runt), Err(Runt));
    }

    /// OVS's "Encap Decap MPLS xlate action" (tests/mpls-xlate.at) on the bytes:
    /// `add_mpls,push_eth` on one bridge, `pop_eth,pop_mpls(eth_type=0x6558)` on the next.
    #[test]
    fn add_mpls_carries_an_ethernet_frame_and_pop_mpls_gets_it_back() {
        let f = frame_v4(false, v4(1), v4(2), 0, 64, (1, 2), b"hi", true);
        let mut p = extracted(&f);
        add_mpls(&mut p, 64 | MPLS_BOS, 0x8847).unwrap();
        assert_eq!(p.meta.packet_type, 0x1_8847);
        assert_eq!(&p.data()[..4], &[0, 0, 0x01, 0x40]);
        assert_eq!(&p.data()[4..], &f[..]);
        assert_eq!((p.meta.l2_5, p.meta.l3, p.meta.l4), (0, 18, 38));
        let (src, dst) = ([0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 2]);
        push_eth(&mut p, &src, &dst).unwrap();
        assert_eq!(p.meta.packet_type, 0);
        assert_eq!(
            &p.data()[..18],
            &[
                0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0x88, 0x47, 0, 0, 0x01, 0x40
            ]
        );
        assert_eq!(&p.data()[18..], &f[..]);
        assert_eq!((p.meta.l2_5, p.meta.l3), (14, 32));
        pop_eth(&mut p).unwrap();
        assert_eq!(p.meta.packet_type, 0x1_8847);
        pop_mpls(&mut p, ETH_TYPE_TEB).unwrap();
        assert_eq!(p.data(), &f[..]);
        assert_eq!(p.meta.packet_type, 0);
        assert_eq!((p.meta.l2_5, p.meta.l3, p.meta.l4), (NO_OFS, 14, 34));
    }

    #[test]
    fn add_mpls_stacks_on_an_l3_packet_and_pops_back_to_it() {
        let f = frame_v4(false, v4(1), v4(2), 0, 64, (1, 2), b"hi", true);
        let mut p = extracted(&f);
        pop_eth(&mut p).unwrap();
        add_mpls(&mut p, 1 << 12 | MPLS_BOS | 9, 0x8847).unwrap();
        add_mpls(&mut p, 2 << 12 | 8, 0x8848).unwrap();
        assert_eq!(p.meta.packet_type, 0x1_8848);
        assert_eq!(&p.data()[..8], &[0, 0, 0x20, 8, 0, 0, 0x11, 9]);
        assert_eq!((p.meta.l2_5, p.meta.l3, p.meta.l4), (0, 8, 28));
        pop_mpls(&mut p, 0x8847).unwrap();
        assert_eq!(
            (p.meta.packet_type, p.meta.l2_5, p.meta.l3),
            (0x1_8847, 0, 4)
        );
        pop_mpls(&mut p, 0x0800).unwrap();
        assert_eq!(p.data(), &f[ETH_HLEN..]);
        assert_eq!(p.meta.packet_type, 0x1_0800);
        assert_eq!((p.meta.l2_5, p.meta.l3, p.meta.l4), (NO_OFS, 0, 20));
        // Not extracted: the popped bottom entry leaves L3 at the front.
        let mut q = Packet::from_slice(&[0, 0, 0x11, 9, 0x45]);
        q.meta.packet_type = 0x1_8847;
        q.meta.l2_5 = 0;
        pop_mpls(&mut q, 0x0800).unwrap();
        assert_eq!((q.len(), q.meta.l3), (1, 0));
        let mut runt = Packet::from_slice(&[0; 3]);
        runt.meta.packet_type = 0x1_8847;
        assert_eq!(pop_mpls(&mut runt, 0x0800), Err(Runt));
    }

    proptest! {
        /// The fused `push_eth,pop_mpls` leaves every packet as the two actions in sequence
        /// do: L3 MPLS packets with one or more labels, other L3 and Ethernet packets, any
        /// header offsets.
        #[test]
        fn push_eth_pop_mpls_is_the_two_in_sequence(
            pt in prop_oneof![
                Just(1u32 << 16 | 0x8847), Just(1 << 16 | 0x8848), Just(1 << 16 | 0x0800), Just(0u32)
            ],
            labels in 0usize..3,
            bos_first in any::<bool>(),
            body in proptest::collection::vec(any::<u8>(), 0..80),
            ofs in proptest::array::uniform3(0u16..200),
            eth_type in prop_oneof![Just(0x0800u16), Just(0x8847), Just(0x86dd)],
        ) {
            let mut frame = Vec::new();
            for i in 0..labels {
                let bos = if i + 1 == labels { 1 } else { u32::from(bos_first && i == 0) };
                frame.extend_from_slice(&((812 + i as u32) << 12 | bos << 8 | 64).to_be_bytes());
            }
            frame.extend_from_slice(&body);
            let pick = |o: u16| match o % 5 { 0 => NO_OFS, 1 => 0, _ => o % 100 };
            let packet = || {
                let mut p = Packet::from_slice(&frame);
                p.meta.packet_type = pt;
                p.meta.l2_5 = pick(ofs[0]);
                p.meta.l3 = pick(ofs[1]);
                p.meta.l4 = pick(ofs[2]);
                p
            };
            let (mut a, mut b) = (packet(), packet());
            let (src, dst) = ([0, 0, 0, 0, 0, 1], [0x52, 0x54, 0, 0xa0, 0x91, 0x10]);
            let fused = push_eth_pop_mpls(&mut a, &src, &dst, eth_type);
            let first = push_eth(&mut b, &src, &dst);
            let second = pop_mpls(&mut b, eth_type);
            prop_assert_eq!(fused.is_ok(), first.is_ok() && second.is_ok());
            prop_assert_eq!(a.data(), b.data());
            let m = |p: &Packet| (p.meta.packet_type, p.meta.l2_5, p.meta.l3, p.meta.l4);
            prop_assert_eq!(m(&a), m(&b));
        }
    }
}
