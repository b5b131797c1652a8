//! The payload stamp: 16 bytes at the very end of every generated frame that name the stream,
//! number the packet and carry its send time, so that the receiving side can count loss,
//! reordering and latency per stream without any state shared with the sender.
//!
//! Layout (big endian, the last 16 bytes of the frame as held in a buffer, FCS excluded):
//!
//! ```text
//!  0       2        4                8                       14       16
//!  +-------+--------+----------------+------------------------+--------+
//!  | magic | stream | seq            | tx_ns (48 bits)        | comp   |
//!  +-------+--------+----------------+------------------------+--------+
//! ```
//!
//! magic `u16` ([`STAMP_MAGIC`], "F10E": *flo*wpath *e*cho), stream `u16`, seq `u32`, tx_ns
//! the low 48 bits of the send time (78 hours), and `comp`, which makes the ones'-complement
//! sum of the 16 bytes 0xffff, a zero: a stamp written over 16 zero bytes leaves every checksum
//! that covers it (UDP, TCP, an outer UDP; at any byte offset) valid as it was, so the sender
//! precomputes frames with their checksums once and stamps them with no update.
//! The stamp is the tail of the innermost payload, so it stays the frame's tail
//! whatever a switch pushes or pops in front of it (VLAN tags, MPLS labels, tunnel headers).
//! A frame that a switch shortened below the 60-byte Ethernet minimum comes back padded with
//! zeros after the stamp; [`find_stamp`] looks for that case too.

/// Length of the stamp in bytes.
pub const STAMP_LEN: usize = 16;

/// The first two bytes of every stamp ("F10E": flowpath echo). A frame whose tail does not
/// start with it carries no stamp.
pub const STAMP_MAGIC: u16 = 0xF10E;

/// Shortest Ethernet frame without FCS: shorter frames are padded with zeros to it.
const MIN_FRAME_NO_FCS: usize = 60;

/// What a generated frame carries at its tail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Stamp {
    /// The stream's id ([`crate::stream::Stream::id`]).
    pub stream: u16,
    /// Sequence number of the packet within its stream.
    pub seq: u32,
    /// Send time in nanoseconds on the sender's clock; the stamp keeps the low 48 bits
    /// ([`TX_NS_MASK`]).
    pub tx_ns: u64,
}

/// The bits of [`Stamp::tx_ns`] a stamp carries.
pub const TX_NS_MASK: u64 = (1 << 48) - 1;

impl Stamp {
    /// The 16 bytes as they go on the wire.
    #[inline]
    pub fn to_bytes(&self) -> [u8; STAMP_LEN] {
        let mut b = [0u8; STAMP_LEN];
        self.write_to(&mut b);
        b
    }

    /// Reads 16 bytes; `None` without the magic.
    #[inline]
    pub fn from_bytes(b: &[u8; STAMP_LEN]) -> Option<Stamp> {
        if u16::from_be_bytes([b[0], b[1]]) != STAMP_MAGIC {
            return None;
        }
        Some(Stamp {
            stream: u16::from_be_bytes([b[2], b[3]]),
            seq: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            tx_ns: u64::from_be_bytes([0, 0, b[8], b[9], b[10], b[11], b[12], b[13]]),
        })
    }

    /// Writes the 16 bytes into `b`, `comp` last.
    #[inline(always)]
    pub fn write_to(&self, b: &mut [u8; STAMP_LEN]) {
        let head = (u32::from(STAMP_MAGIC) << 16) | u32::from(self.stream);
        let t = self.tx_ns & TX_NS_MASK;
        b[0..4].copy_from_slice(&head.to_be_bytes());
        b[4..8].copy_from_slice(&self.seq.to_be_bytes());
        b[8..14].copy_from_slice(&t.to_be_bytes()[2..]);
        // The other seven words' sum, modulo 0xffff (2^16 = 1 there, so 32-bit pieces add as
        // their two halves), folded; `comp` is its complement.
        let w = u64::from(head) + u64::from(self.seq) + (t >> 16) + (t & 0xffff);
        let w = (w & 0xffff_ffff) + (w >> 32);
        let w = (w & 0xffff) + (w >> 16);
        let w = (w & 0xffff) + (w >> 16);
        let f = ((w & 0xffff) + (w >> 16)) as u16;
        b[14..16].copy_from_slice(&(!f).to_be_bytes());
    }
}

/// Reads the stamp from the last 16 bytes of a received frame (see the module's layout). `None` when the magic is absent or the frame is shorter.
///
/// A frame of exactly 60 bytes (the Ethernet minimum, FCS excluded) whose tail is not a stamp
/// may be a shorter frame padded by the last hop (a switch popped a tag from a 64-byte frame):
/// then the stamp is looked for just before the trailing zeros.
pub fn find_stamp(frame: &[u8]) -> Option<Stamp> {
    let n = frame.len();
    let tail: &[u8; STAMP_LEN] = frame.get(n.checked_sub(STAMP_LEN)?..)?.try_into().ok()?;
    if let Some(s) = Stamp::from_bytes(tail) {
        return Some(s);
    }
    if n != MIN_FRAME_NO_FCS {
        return None;
    }
    // Padding is at most what a 14-byte Ethernet header plus a stamp leaves of 60 bytes.
    let zeros = frame.iter().rev().take_while(|&&b| b == 0).count();
    (1..=zeros.min(n - STAMP_LEN)).find_map(|pad| {
        let at = n - pad - STAMP_LEN;
        let b: &[u8; STAMP_LEN] = frame[at..at + STAMP_LEN].try_into().ok()?;
        Stamp::from_bytes(b)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn layout() {
        let s = Stamp {
            stream: 0x0102,
            seq: 0x0304_0506,
            tx_ns: 0xffff_090a_0b0c_0d0e,
        };
        let b = s.to_bytes();
        assert_eq!(
            b[..14],
            [
                0xf1, 0x0e, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e
            ]
        );
        // f10e + 0102 + 0304 + 0506 + 090a + 0b0c + 0d0e folds to 0x1b3f; comp = !0x1b3f.
        assert_eq!(b[14..], [0xe4, 0xc0]);
        assert_eq!(wire::checksum::data(&b), 0xffff);
    }

    #[test]
    fn short_or_unstamped_frames() {
        assert_eq!(find_stamp(&[]), None);
        assert_eq!(
            find_stamp(&[0xf1, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            None
        );
        assert_eq!(find_stamp(&[0u8; 64]), None);
        assert_eq!(find_stamp(&[0u8; 60]), None);
        let mut f = [0u8; 60];
        f[44] = 0xf1;
        assert_eq!(find_stamp(&f), None, "magic at the wrong place");
    }

    #[test]
    fn padded_minimum_frame() {
        // A 64-byte frame (60 without FCS) whose VLAN tag was popped: 56 bytes, padded to 60.
        let s = Stamp {
            stream: 3,
            seq: 9,
            tx_ns: 0,
        };
        let mut f = vec![0xaau8; 40];
        f.extend_from_slice(&s.to_bytes());
        f.resize(60, 0);
        assert_eq!(find_stamp(&f), Some(s));
        // Not for longer frames: only the tail counts there.
        f.resize(61, 0);
        assert_eq!(find_stamp(&f), None);
    }

    proptest! {
        #[test]
        fn roundtrip(stream: u16, seq: u32, tx_ns: u64, head in proptest::collection::vec(any::<u8>(), 0..100)) {
            let s = Stamp { stream, seq, tx_ns };
            let mut f = head.clone();
            f.extend_from_slice(&s.to_bytes());
            prop_assert_eq!(find_stamp(&f), Some(Stamp { tx_ns: tx_ns & TX_NS_MASK, ..s }));
            // The stamp sums to a ones'-complement zero, at either byte parity.
            prop_assert_eq!(wire::checksum::data(&s.to_bytes()) % 0xffff, 0);
            let mut odd = vec![0u8];
            odd.extend_from_slice(&s.to_bytes());
            prop_assert_eq!(wire::checksum::data(&odd) % 0xffff, 0);
        }
    }
}
