//! Keeping a built frame's checksums valid while its bytes change: where each IPv4 header,
//! UDP, TCP and GRE checksum is and which bytes (and pseudo-header addresses) it covers
//! ([`Site`]), and the incremental update of RFC 1624 (eqn. 3) that [`set_bytes`] applies to
//! every checksum covering a change, then to the outer checksums covering those, as a tunnel's
//! UDP checksum covers the inner headers'.

/// A checksum in a frame: where it is and which bytes it covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Site {
    /// Offset of the 16-bit checksum field.
    pub(super) pos: usize,
    /// Start of the covered bytes (parity reference).
    pub(super) start: usize,
    /// End of the covered bytes; `None`: to the end of the frame.
    pub(super) end: Option<usize>,
    /// The pseudo-header's addresses (source then destination), covered too: (start, len).
    pub(super) pseudo: Option<(usize, usize)>,
    /// UDP: a computed 0 is sent as 0xffff.
    pub(super) udp: bool,
}

impl Site {
    /// The offset that byte `o` is counted from if the checksum covers it.
    fn base_of(&self, o: usize, frame_len: usize) -> Option<usize> {
        if o >= self.start && o < self.end.unwrap_or(frame_len) {
            return Some(self.start);
        }
        match self.pseudo {
            Some((s, n)) if o >= s && o < s + n => Some(s),
            _ => None,
        }
    }
}

/// Replaces the bytes at `off` with `new` and updates the checksums that cover them (RFC 1624
/// eqn. 3), then the checksums that cover those checksums, and so on (`depth` bounds it).
/// `skip` is the site whose own checksum field this change is.
pub(super) fn set_bytes(
    frame: &mut [u8],
    sites: &[Site],
    off: usize,
    new: &[u8],
    skip: usize,
    depth: usize,
) {
    let n = new.len();
    let old_sum = wire::checksum::data(&frame[off..off + n]);
    let new_sum = wire::checksum::data(new);
    frame[off..off + n].copy_from_slice(new);
    if old_sum == new_sum || depth == 0 {
        return;
    }
    for (si, s) in sites.iter().enumerate() {
        if si == skip {
            continue;
        }
        let Some(base) = s.base_of(off, frame.len()) else {
            continue;
        };
        // Bytes at an odd distance from the start of the sum count byte-swapped (RFC 1071).
        let (o, nw) = if (off - base) & 1 == 1 {
            (old_sum.swap_bytes(), new_sum.swap_bytes())
        } else {
            (old_sum, new_sum)
        };
        let c = u16::from_be_bytes([frame[s.pos], frame[s.pos + 1]]);
        let mut c2 = !wire::checksum::combine(&[!c, !o, nw]);
        if s.udp && c2 == 0 {
            c2 = 0xffff;
        }
        set_bytes(frame, sites, s.pos, &c2.to_be_bytes(), si, depth - 1);
    }
}
