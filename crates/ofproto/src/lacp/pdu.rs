//! LACPDUs (IEEE 802.1AX-2008 section 5.4.2): the slow-protocols frame (ethertype 0x8809,
//! destination 01:80:c2:00:00:02) carrying subtype 1, version 1, the actor's and the
//! partner's information (TLVs 1 and 2, 20 bytes each), the collector TLV (3, 16 bytes) and
//! the terminator, 110 bytes in all, as OVS reads and writes them (`lib/lacp.c`).

use flow::EthAddr;

/// The slow protocols' ethertype.
pub const ETH_TYPE_SLOW: u16 = 0x8809;
/// The slow protocols' multicast destination.
pub const ETH_DST: EthAddr = EthAddr([0x01, 0x80, 0xc2, 0x00, 0x00, 0x02]);
/// The length of a LACPDU after the Ethernet header.
pub const PDU_LEN: usize = 110;

/// Actor and partner state bits.
pub mod state {
    pub const ACTIVITY: u8 = 0x01;
    pub const TIMEOUT: u8 = 0x02;
    pub const AGGREGATION: u8 = 0x04;
    pub const SYNC: u8 = 0x08;
    pub const COLLECTING: u8 = 0x10;
    pub const DISTRIBUTING: u8 = 0x20;
    pub const DEFAULTED: u8 = 0x40;
    pub const EXPIRED: u8 = 0x80;
    /// Each bit with the word `lacp/show` gives it, in order.
    pub const NAMES: [(u8, &str); 8] = [
        (ACTIVITY, "activity"),
        (TIMEOUT, "timeout"),
        (AGGREGATION, "aggregation"),
        (SYNC, "synchronized"),
        (COLLECTING, "collecting"),
        (DISTRIBUTING, "distributing"),
        (DEFAULTED, "defaulted"),
        (EXPIRED, "expired"),
    ];
}

/// One side's information in a LACPDU (15 bytes on the wire).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Info {
    pub sys_priority: u16,
    pub sys_id: EthAddr,
    pub key: u16,
    pub port_priority: u16,
    pub port_id: u16,
    pub state: u8,
}

impl Info {
    fn read(b: &[u8]) -> Info {
        let be = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
        let mut sys_id = [0; 6];
        sys_id.copy_from_slice(&b[2..8]);
        Info {
            sys_priority: be(0),
            sys_id: EthAddr(sys_id),
            key: be(8),
            port_priority: be(10),
            port_id: be(12),
            state: b[14],
        }
    }

    fn write(&self, b: &mut [u8]) {
        b[0..2].copy_from_slice(&self.sys_priority.to_be_bytes());
        b[2..8].copy_from_slice(&self.sys_id.0);
        b[8..10].copy_from_slice(&self.key.to_be_bytes());
        b[10..12].copy_from_slice(&self.port_priority.to_be_bytes());
        b[12..14].copy_from_slice(&self.port_id.to_be_bytes());
        b[14] = self.state;
    }

    /// The fields a change of which needs a LACPDU sent at once (802.1AX 5.4.11's
    /// "need to transmit"): port, priorities, system, key, and the activity, timeout,
    /// synchronization and aggregation bits.
    pub fn tx_equal(&self, o: &Info) -> bool {
        use state::*;
        (self.state ^ o.state) & (ACTIVITY | TIMEOUT | SYNC | AGGREGATION) == 0
            && self.port_id == o.port_id
            && self.port_priority == o.port_priority
            && self.key == o.key
            && self.sys_priority == o.sys_priority
            && self.sys_id == o.sys_id
    }

    /// The words of `lacp/show` for `state`, each after a space.
    pub fn state_words(state: u8) -> String {
        state::NAMES
            .iter()
            .filter(|(bit, _)| state & bit != 0)
            .map(|(_, w)| format!(" {w}"))
            .collect()
    }
}

/// What a slow-protocols frame holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pdu {
    /// A LACPDU: the sender (actor) and what it knows of us (partner).
    Lacp { actor: Info, partner: Info },
    /// A marker PDU (subtype 2): counted, not answered (as OVS).
    Marker,
}

/// Why a frame is not a LACPDU OVS takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bad {
    /// Shorter than a LACPDU.
    Short(usize),
    /// Not ethertype 0x8809.
    NotSlow,
    /// A subtype or TLV type or length other than a LACPDU's.
    Unparsable,
}

impl std::fmt::Display for Bad {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bad::Short(n) => write!(f, "{n}-byte PDU shorter than {PDU_LEN} bytes"),
            Bad::NotSlow => f.write_str("not a slow protocols frame"),
            Bad::Unparsable => f.write_str("not a LACP or marker PDU"),
        }
    }
}

/// Decodes the PDU after the Ethernet header (`pdu`), as OVS's `parse_lacp_packet()`: at
/// least 110 bytes, then subtype 1 with TLVs 1 and 2 of 20 bytes is a LACPDU, subtype 2 a
/// marker, anything else bad. The version and the reserved bytes are not checked.
pub fn decode(pdu: &[u8]) -> Result<Pdu, Bad> {
    if pdu.len() < PDU_LEN {
        return Err(Bad::Short(pdu.len()));
    }
    match pdu[0] {
        1 if pdu[2] == 1 && pdu[3] == 20 && pdu[22] == 2 && pdu[23] == 20 => Ok(Pdu::Lacp {
            actor: Info::read(&pdu[4..19]),
            partner: Info::read(&pdu[24..39]),
        }),
        2 => Ok(Pdu::Marker),
        _ => Err(Bad::Unparsable),
    }
}

/// Decodes a whole untagged Ethernet frame's PDU.
pub fn decode_frame(frame: &[u8]) -> Result<Pdu, Bad> {
    if frame.len() < 14 {
        return Err(Bad::Short(0));
    }
    if u16::from_be_bytes([frame[12], frame[13]]) != ETH_TYPE_SLOW {
        return Err(Bad::NotSlow);
    }
    decode(&frame[14..])
}

/// The 110 bytes of a LACPDU from `actor` about `partner` (collector delay 0).
pub fn encode(actor: &Info, partner: &Info) -> [u8; PDU_LEN] {
    let mut p = [0u8; PDU_LEN];
    p[0] = 1;
    p[1] = 1;
    p[2] = 1;
    p[3] = 20;
    actor.write(&mut p[4..19]);
    p[22] = 2;
    p[23] = 20;
    partner.write(&mut p[24..39]);
    p[42] = 3;
    p[43] = 16;
    p
}

/// The frame of a LACPDU sent from `src`.
pub fn compose(src: EthAddr, actor: &Info, partner: &Info) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + PDU_LEN);
    f.extend_from_slice(&ETH_DST.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&ETH_TYPE_SLOW.to_be_bytes());
    f.extend_from_slice(&encode(actor, partner));
    f
}

/// What follows the Ethernet header and any VLAN tags of `frame` (after the ethertype).
pub fn after_ethernet(frame: &[u8]) -> &[u8] {
    let mut at = 12;
    while frame.len() >= at + 2 && matches!([frame[at], frame[at + 1]], [0x81, 0] | [0x88, 0xa8]) {
        at += 4;
    }
    frame.get(at + 2..).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(n: u8) -> Info {
        Info {
            sys_priority: 65534,
            sys_id: EthAddr([2, 0, 0, 0, 0, n]),
            key: 5,
            port_priority: 65535,
            port_id: u16::from(n),
            state: state::ACTIVITY | state::SYNC,
        }
    }

    #[test]
    fn a_pdu_reads_back() {
        let f = compose(EthAddr([2, 0, 0, 0, 0, 9]), &info(1), &info(2));
        assert_eq!(f.len(), 124);
        assert_eq!(
            decode_frame(&f),
            Ok(Pdu::Lacp {
                actor: info(1),
                partner: info(2)
            })
        );
    }

    #[test]
    fn bad_pdus_are_refused() {
        let f = compose(EthAddr([2, 0, 0, 0, 0, 9]), &info(1), &info(2));
        assert_eq!(decode_frame(&f[..100]), Err(Bad::Short(86)));
        let mut m = f.clone();
        m[14] = 2;
        assert_eq!(decode_frame(&m), Ok(Pdu::Marker));
        let mut b = f.clone();
        b[17] = 19;
        assert_eq!(decode_frame(&b), Err(Bad::Unparsable));
        let mut e = f;
        e[12] = 8;
        assert_eq!(decode_frame(&e), Err(Bad::NotSlow));
        assert_eq!(decode_frame(&[]), Err(Bad::Short(0)));
    }

    #[test]
    fn state_words_as_ovs_s() {
        assert_eq!(
            Info::state_words(0x3d),
            " activity aggregation synchronized collecting distributing"
        );
    }
}
