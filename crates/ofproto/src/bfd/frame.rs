//! The Ethernet frames BFD control packets travel in (RFC 5881 single hop: IPv4, UDP to port
//! 3784, TTL 255), as OVS builds them: Ethernet destination 00:23:20:00:00:01 unless
//! configured, IP precedence "internetwork control", no UDP checksum.

use std::net::Ipv4Addr;

use flow::EthAddr;

use super::msg::{MSG_LEN, Msg, UDP_PORT};

/// The Ethernet destination OVS gives BFD frames by default.
pub const DEFAULT_ETH_DST: EthAddr = EthAddr([0x00, 0x23, 0x20, 0x00, 0x00, 0x01]);

/// Where a frame goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Addrs {
    pub eth_src: EthAddr,
    pub eth_dst: EthAddr,
    pub ip_src: Ipv4Addr,
    pub ip_dst: Ipv4Addr,
    pub udp_src: u16,
}

fn ip_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The frame of control packet `m`.
pub fn compose(a: &Addrs, m: &Msg) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + 20 + 8 + MSG_LEN);
    f.extend_from_slice(&a.eth_dst.0);
    f.extend_from_slice(&a.eth_src.0);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let tot = (20 + 8 + MSG_LEN) as u16;
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[1] = 0xc0;
    ip[2..4].copy_from_slice(&tot.to_be_bytes());
    ip[8] = 255;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&a.ip_src.octets());
    ip[16..20].copy_from_slice(&a.ip_dst.octets());
    let c = ip_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&a.udp_src.to_be_bytes());
    f.extend_from_slice(&UDP_PORT.to_be_bytes());
    f.extend_from_slice(&((8 + MSG_LEN) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&m.encode());
    f
}

/// A received frame's IP TTL and UDP payload, when it is IPv4 UDP (after at most two VLAN
/// tags), not a later fragment; `None` otherwise.
pub fn udp_payload(frame: &[u8]) -> Option<(u8, &[u8])> {
    let mut at = 12;
    let mut ethertype = u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]);
    for _ in 0..2 {
        if ethertype != 0x8100 && ethertype != 0x88a8 {
            break;
        }
        at += 4;
        ethertype = u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]);
    }
    if ethertype != 0x0800 {
        return None;
    }
    let ip = frame.get(at + 2..)?;
    let ihl = usize::from(*ip.first()? & 0x0f) * 4;
    if ip[0] >> 4 != 4 || ihl < 20 || ip.len() < ihl + 8 || ip[9] != 17 {
        return None;
    }
    let frag_off = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
    if frag_off != 0 {
        return None;
    }
    let tot = usize::from(u16::from_be_bytes([ip[2], ip[3]])).min(ip.len());
    let udp = ip.get(ihl..tot)?;
    if udp.len() < 8 {
        return None;
    }
    let udp_len = usize::from(u16::from_be_bytes([*udp.get(4)?, *udp.get(5)?]));
    let end = udp_len.clamp(8, udp.len());
    Some((ip[8], udp.get(8..end)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bfd::msg::State;

    #[test]
    fn a_composed_frame_reads_back() {
        let a = Addrs {
            eth_src: EthAddr([2, 0, 0, 0, 0, 1]),
            eth_dst: DEFAULT_ETH_DST,
            ip_src: Ipv4Addr::new(169, 254, 1, 1),
            ip_dst: Ipv4Addr::new(169, 254, 1, 0),
            udp_src: 49152,
        };
        let m = Msg {
            version: 1,
            diag: 0,
            state: State::Down,
            flags: 0,
            mult: 3,
            length: 24,
            my_disc: 5,
            your_disc: 0,
            min_tx_us: 1_000_000,
            min_rx_us: 1_000_000,
            min_rx_echo_us: 0,
        };
        let f = compose(&a, &m);
        assert_eq!(f.len(), 66);
        assert_eq!(ip_checksum(&f[14..34]), 0);
        let (ttl, p) = udp_payload(&f).unwrap();
        assert_eq!(ttl, 255);
        assert_eq!(Msg::decode(p), Ok(m));
        assert_eq!(udp_payload(&f[..40]), None);
        // An IP total length that leaves less than a UDP header.
        let mut short = f.clone();
        short[16..18].copy_from_slice(&26u16.to_be_bytes());
        assert_eq!(udp_payload(&short), None);
        assert_eq!(udp_payload(&[]), None);
    }
}
