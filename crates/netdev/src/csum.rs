//! Software completion of partial (offloaded) checksums where a virtio-net header puts
//! them (a TCP or UDP one is left pending instead, [`datapath::csum_pending`]), as a NIC does for
//! `CHECKSUM_PARTIAL` (include/linux/skbuff.h; virtio 1.x 5.1.6.2): the stack has put the
//! folded (not inverted) pseudo-header sum in the checksum field, and the completion is the
//! complement of the ones' complement sum from `csum_start` to the end of the packet, stored
//! at `csum_start + csum_offset`, 0 sent as 0xffff (`skb_checksum_help`: `csum_fold(csum) ?:
//! CSUM_MANGLED_0`).

use wire::checksum;

/// Completes the partial checksum of `frame` whose summing starts at `start` and whose
/// field is at `start + offset`. False (and `frame` untouched) when the field does not
/// lie inside the frame.
pub(crate) fn complete(frame: &mut [u8], start: usize, offset: usize) -> bool {
    let Some(at) = start.checked_add(offset) else {
        return false;
    };
    let Some(field) = frame.get(at..at.saturating_add(2)) else {
        return false;
    };
    if field.len() != 2 {
        return false;
    }
    // `start <= at < frame.len()`, so the slice is in range.
    let c = match !checksum::data(&frame[start..]) {
        0 => 0xffff,
        c => c,
    };
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// `frame` with `partial` in its checksum field at `at`: what the stack hands over.
    fn partial(frame: &str, at: usize, partial: u16) -> Vec<u8> {
        let mut f = hex(frame);
        f[at..at + 2].copy_from_slice(&partial.to_be_bytes());
        f
    }

    fn field(f: &[u8], at: usize) -> u16 {
        u16::from_be_bytes([f[at], f[at + 1]])
    }

    // Vectors computed independently (Python, RFC 1071 sum over the pseudo-header and
    // the segment); the partial value is the folded pseudo-header sum.

    /// UDP/IPv4 192.168.0.1:1234 -> 192.168.0.199:53, 13 bytes of payload (odd).
    const V4_UDP: &str = "020000000002020000000001080045000029000040004011b8abc0a80001c0\
                          a800c704d200350015000068656c6c6f20776f726c642101";
    /// TCP/IPv6 fd00::1:80 -> fd00::2:443 behind a hop-by-hop header, 3 bytes of data.
    const V6_TCP: &str = "02000000000202000000000186dd60000000001f0040fd0000000000000000\
                          00000000000001fd00000000000000000000000000000206000104000000000050\
                          01bb010203040a0b0c0d5018ffff00000000616263";
    /// UDP/IPv4 10.0.0.1:7 -> 10.0.0.2:9 whose checksum computes to 0: sent as 0xffff.
    const V4_UDP_ZERO: &str = "02000000000202000000000108004500002000000000401166cb0a000001\
                               0a00000200070009000c000071497a7a";

    #[test]
    fn completes_known_vectors() {
        // csum_start at the L4 header, csum_offset 6 (UDP) or 16 (TCP).
        let mut f = partial(V4_UDP, 40, 0x823f);
        assert!(complete(&mut f, 34, 6));
        assert_eq!(field(&f, 40), 0xe5b4);

        let mut f = partial(V6_TCP, 78, 0xfa21);
        assert!(complete(&mut f, 62, 16));
        assert_eq!(field(&f, 78), 0xd539);

        let mut f = partial(V4_UDP_ZERO, 40, 0x1420);
        assert!(complete(&mut f, 34, 6));
        assert_eq!(field(&f, 40), 0xffff);
    }

    #[test]
    fn refuses_offsets_that_do_not_fit_without_panicking() {
        let mut b = [0u8; 8];
        assert!(!complete(&mut b, 4, 3));
        assert!(!complete(&mut b, 9, 0));
        assert!(!complete(&mut b, usize::MAX, 1));
        assert!(!complete(&mut b, 1, usize::MAX));
        assert!(!complete(&mut b, 65535, 65535));
        assert_eq!(b, [0; 8]);
        assert!(complete(&mut b, 0, 6));
        assert_eq!(b, [0, 0, 0, 0, 0, 0, 0xff, 0xff]);
    }

    #[test]
    fn any_frame_is_handled_without_panicking() {
        let mut seed = 0x1234_5678u32;
        for len in 0..200 {
            let mut f: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 17;
                    seed ^= seed << 5;
                    seed as u8
                })
                .collect();
            complete(&mut f, len / 3, len / 2);
        }
    }
}
