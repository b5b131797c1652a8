//! Sequence adjustment (Linux's `nf_ct_seqadj`): when an ALG rewrites an address in a
//! control connection's payload under NAT, the text may change length, which shifts every
//! later sequence number of that direction and every later acknowledgment of the other.
//! [`SeqAdjust`] keeps the shift per direction and the sequence number where it starts, so
//! that retransmissions of earlier segments keep their numbers; the datapath applies the
//! offsets ([`super::AlgRewrite`]) and the TCP tracker sees each sender's own numbering.

/// `a` comes after `b` in sequence space (RFC 9293 §3.4, modulo 2^32).
#[inline]
fn seq_after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// The shift of one direction's sequence numbers: segments that start after `pos` (as their
/// sender numbers them) move by `after`, earlier ones (retransmissions) by `before`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SeqShift {
    pub pos: u32,
    pub before: i32,
    pub after: i32,
}

/// The sequence adjustment of a connection whose payload an ALG resized: a [`SeqShift`] per
/// direction (`[original, reply]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SeqAdjust {
    pub dir: [SeqShift; 2],
}

impl SeqAdjust {
    /// Nothing to adjust.
    #[inline]
    pub fn is_zero(&self) -> bool {
        self.dir.iter().all(|s| s.before == 0 && s.after == 0)
    }

    /// Records that the segment of direction `reply` starting at `seq` (its sender's number)
    /// grew by `delta` bytes. A retransmission of the segment last resized, or of one before it,
    /// changes nothing (its resize is already counted).
    pub fn record(&mut self, reply: bool, seq: u32, delta: i32) {
        let s = &mut self.dir[usize::from(reply)];
        if delta == 0 {
            return;
        }
        if s.before == s.after || seq_after(seq, s.pos) {
            s.pos = seq;
            s.before = s.after;
            s.after = s.after.wrapping_add(delta);
        }
    }

    /// What to add to the sequence number `seq` of a segment of direction `reply`.
    #[inline]
    pub fn seq_offset(&self, reply: bool, seq: u32) -> i32 {
        let s = &self.dir[usize::from(reply)];
        if seq_after(seq, s.pos) {
            s.after
        } else {
            s.before
        }
    }

    /// What to add to the acknowledgment number `ack` of a segment of direction `reply`, which
    /// acknowledges the other direction's shifted numbers: the shift taken back.
    #[inline]
    pub fn ack_offset(&self, reply: bool, ack: u32) -> i32 {
        let s = &self.dir[usize::from(!reply)];
        let off = if seq_after(ack.wrapping_add_signed(s.before.wrapping_neg()), s.pos) {
            s.after
        } else {
            s.before
        };
        off.wrapping_neg()
    }

    /// The sender's sequence number of a segment of direction `reply` already shifted (seen
    /// again after an earlier `ct(nat)` applied the adjustment).
    #[inline]
    pub fn unshift_seq(&self, reply: bool, shifted: u32) -> u32 {
        let s = &self.dir[usize::from(reply)];
        let off = if seq_after(shifted.wrapping_add_signed(s.before.wrapping_neg()), s.pos) {
            s.after
        } else {
            s.before
        };
        shifted.wrapping_add_signed(off.wrapping_neg())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn seq_adjust_basic() {
        let mut a = SeqAdjust::default();
        assert!(a.is_zero());
        // The client's PORT at seq 1000 (20 bytes) grew by 5.
        a.record(false, 1000, 5);
        assert_eq!(
            a.seq_offset(false, 1000),
            0,
            "the resized segment keeps its number"
        );
        assert_eq!(a.seq_offset(false, 1020), 5);
        assert_eq!(a.seq_offset(false, 900), 0, "an earlier retransmission");
        // The server acknowledges 1025 (translated): 1020 for the client.
        assert_eq!(a.ack_offset(true, 1025), -5);
        assert_eq!(a.ack_offset(true, 1000), 0);
        // A retransmitted PORT does not count twice.
        a.record(false, 1000, 5);
        assert_eq!(a.seq_offset(false, 1020), 5);
        // A second PORT later shrinks by 2.
        a.record(false, 2000, -2);
        assert_eq!(a.seq_offset(false, 2000), 5);
        assert_eq!(a.seq_offset(false, 2020), 3);
        assert_eq!(a.ack_offset(true, 2025), -3);
        assert_eq!(a.unshift_seq(false, 2023), 2020);
        assert_eq!(a.seq_offset(true, 5), 0);
    }

    #[test]
    fn seq_adjust_wraps() {
        let mut a = SeqAdjust::default();
        let pos = u32::MAX - 10;
        a.record(true, pos, 7);
        let later = pos.wrapping_add(30); // wrapped past zero
        assert_eq!(a.seq_offset(true, later), 7);
        assert_eq!(a.ack_offset(false, later.wrapping_add(7)), -7);
        assert_eq!(a.unshift_seq(true, later.wrapping_add(7)), later);
        assert_eq!(a.seq_offset(true, pos.wrapping_sub(100)), 0);
    }

    proptest! {
        /// Shifting then unshifting gives the sender's number back, and an acknowledgment of
        /// shifted data maps to the sender's numbering, across wraparound.
        #[test]
        fn seq_adjust_inverse(pos: u32, d1 in -20i32..20, d2 in -20i32..20, gap in 100u32..1_000_000, len in 30u32..60, k in 0u32..10_000) {
            let mut a = SeqAdjust::default();
            a.record(false, pos, d1);
            let pos2 = pos.wrapping_add(gap);
            a.record(false, pos2, d2);
            // A segment after the second resize.
            let seq = pos2.wrapping_add(len).wrapping_add(k);
            let shifted = seq.wrapping_add_signed(a.seq_offset(false, seq));
            prop_assert_eq!(shifted, seq.wrapping_add_signed(d1 + d2));
            prop_assert_eq!(a.unshift_seq(false, shifted), seq);
            prop_assert_eq!(shifted.wrapping_add_signed(a.ack_offset(true, shifted)), seq);
            // A segment between the two resizes.
            let mid = pos.wrapping_add(len).wrapping_add(k % (gap - len));
            let s2 = mid.wrapping_add_signed(a.seq_offset(false, mid));
            prop_assert_eq!(s2, mid.wrapping_add_signed(d1));
            prop_assert_eq!(a.unshift_seq(false, s2), mid);
        }
    }
}
