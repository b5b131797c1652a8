//! SCTP common header and chunks (RFC 9260 §3), with the CRC32C checksum (RFC 3309,
//! RFC 9260 appendix A).
//!
//! The view covers the 12-byte common header; chunks are walked with [`SctpChunkIter`]. The
//! checksum covers the whole packet with the checksum field zeroed, so the buffer must be exactly
//! the SCTP packet (the IP payload).

use crate::checksum::Crc32c;
use crate::{Error, Result, get_u16, get_u32, set_u16, set_u32};

mod field {
    use crate::Field;
    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const VERIF_TAG: Field = 4..8;
    pub const CHECKSUM: Field = 8..12;
    pub const CHUNKS: usize = 12;
}

/// Length of the common header.
pub const HEADER_LEN: usize = field::CHUNKS;

/// Chunk types (RFC 9260 §3.2).
pub mod chunk_type {
    /// Payload data.
    pub const DATA: u8 = 0;
    /// Initiation.
    pub const INIT: u8 = 1;
    /// Initiation acknowledgement.
    pub const INIT_ACK: u8 = 2;
    /// Selective acknowledgement.
    pub const SACK: u8 = 3;
    /// Heartbeat request.
    pub const HEARTBEAT: u8 = 4;
    /// Heartbeat acknowledgement.
    pub const HEARTBEAT_ACK: u8 = 5;
    /// Abort.
    pub const ABORT: u8 = 6;
    /// Shutdown.
    pub const SHUTDOWN: u8 = 7;
    /// State cookie.
    pub const COOKIE_ECHO: u8 = 10;
    /// Cookie acknowledgement.
    pub const COOKIE_ACK: u8 = 11;
}

/// One chunk: type, flags, and the value (length field minus the 4-byte chunk header; padding
/// excluded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SctpChunk<'a> {
    /// Chunk type.
    pub chunk_type: u8,
    /// Chunk flags.
    pub flags: u8,
    /// Chunk value.
    pub value: &'a [u8],
}

impl SctpChunk<'_> {
    /// The chunk's length field (header and value, without padding).
    #[inline]
    pub fn length(&self) -> usize {
        4 + self.value.len()
    }
}

/// Iterates the chunks after the common header; yields one `Err(BadLength)` and stops on a
/// length below 4 or past the buffer. Padding after the last chunk may be absent.
#[derive(Debug, Clone)]
pub struct SctpChunkIter<'a> {
    data: &'a [u8],
}

impl<'a> SctpChunkIter<'a> {
    /// Iterates over chunk bytes.
    pub const fn new(data: &'a [u8]) -> Self {
        SctpChunkIter { data }
    }
}

impl<'a> Iterator for SctpChunkIter<'a> {
    type Item = Result<SctpChunk<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.data.is_empty() {
            return None;
        }
        if self.data.len() < 4 {
            self.data = &[];
            return Some(Err(Error::Truncated));
        }
        let len = usize::from(get_u16(self.data, 2..4));
        if len < 4 || len > self.data.len() {
            self.data = &[];
            return Some(Err(Error::BadLength));
        }
        let chunk = SctpChunk {
            chunk_type: self.data[0],
            flags: self.data[1],
            value: &self.data[4..len],
        };
        let next = len.next_multiple_of(4).min(self.data.len());
        self.data = &self.data[next..];
        Some(Ok(chunk))
    }
}

/// A view of an SCTP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SctpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SctpPacket<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        SctpPacket { buffer }
    }

    /// Wraps a buffer after checking that it holds the common header.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Err(Truncated)` if the buffer is shorter than the common header.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The underlying buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Verification tag.
    #[inline]
    pub fn verification_tag(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::VERIF_TAG)
    }

    /// The stored CRC32C value. RFC 9260 appendix A transmits the CRC least significant byte
    /// first (the reflected CRC's natural order), so this reads the field little-endian.
    #[inline]
    pub fn checksum(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::CHECKSUM];
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }

    /// CRC32C of the packet with the checksum field taken as zero.
    pub fn compute_checksum(&self) -> u32 {
        let b = self.buffer.as_ref();
        let mut c = Crc32c::new();
        c.update(&b[..field::CHECKSUM.start]);
        c.update(&[0; 4]);
        c.update(&b[field::CHECKSUM.end..]);
        c.finish()
    }

    /// True if the stored checksum is correct.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        self.checksum() == self.compute_checksum()
    }

    /// Iterates the chunks.
    #[inline]
    pub fn chunks(&self) -> SctpChunkIter<'_> {
        SctpChunkIter::new(&self.buffer.as_ref()[field::CHUNKS..])
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> SctpPacket<&'a T> {
    /// The chunk bytes after the common header.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::CHUNKS..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SctpPacket<T> {
    /// Sets the source port.
    #[inline]
    pub fn set_src_port(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), field::SRC_PORT, value);
    }

    /// Sets the destination port.
    #[inline]
    pub fn set_dst_port(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), field::DST_PORT, value);
    }

    /// Sets the verification tag.
    #[inline]
    pub fn set_verification_tag(&mut self, value: u32) {
        set_u32(self.buffer.as_mut(), field::VERIF_TAG, value);
    }

    /// Stores a CRC32C value (least significant byte first, see `checksum`).
    #[inline]
    pub fn set_checksum(&mut self, value: u32) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&value.to_le_bytes());
    }

    /// Computes and stores the checksum.
    #[inline]
    pub fn fill_checksum(&mut self) {
        let c = self.compute_checksum();
        self.set_checksum(c);
    }

    /// The chunk bytes, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::CHUNKS..]
    }
}

/// The meaning of the SCTP common header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SctpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Verification tag.
    pub verification_tag: u32,
}

impl SctpRepr {
    /// Reads a checked header (the checksum is not verified).
    pub fn parse<T: AsRef<[u8]>>(packet: &SctpPacket<T>) -> Result<SctpRepr> {
        packet.check_len()?;
        Ok(SctpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            verification_tag: packet.verification_tag(),
        })
    }

    /// Bytes `emit` writes (12).
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the common header with a zero checksum; call `fill_checksum` once the chunks are
    /// in place.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut SctpPacket<T>) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_verification_tag(self.verification_tag);
        packet.set_checksum(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // INIT from port 5000 to 80, tag 0; one INIT chunk with a 1-byte-unpadded trailer chunk.
    const INIT: [u8; 32] = [
        0x13, 0x88, 0x00, 0x50, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // common
        0x01, 0x00, 0x00, 0x14, 0x11, 0x22, 0x33, 0x44, 0x00, 0x01, 0x00, 0x00, 0x00, 0x0a, 0x00,
        0x0a, 0x55, 0x66, 0x77, 0x88, // INIT: tag, a_rwnd, streams, initial TSN
    ];

    #[test]
    fn chunks_and_crc() {
        let mut b = INIT;
        let mut p = SctpPacket::new_unchecked(&mut b[..]);
        p.fill_checksum();
        assert!(p.verify_checksum());
        let c = p.checksum();
        // The CRC goes on the wire least significant byte first.
        assert_eq!(b[8..12], c.to_le_bytes());
        let p = SctpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(
            (p.src_port(), p.dst_port(), p.verification_tag()),
            (5000, 80, 0)
        );
        let chunks: Vec<_> = p.chunks().collect();
        assert_eq!(chunks.len(), 1);
        let ch = chunks[0].unwrap();
        assert_eq!(
            (ch.chunk_type, ch.flags, ch.length()),
            (chunk_type::INIT, 0, 20)
        );
        let r = SctpRepr::parse(&p).unwrap();
        let mut out = b;
        out[..12].fill(0xee);
        let mut q = SctpPacket::new_unchecked(&mut out[..]);
        r.emit(&mut q);
        q.fill_checksum();
        assert_eq!(out, b);
        // Any bit flip is caught.
        let mut bad = b;
        bad[20] ^= 0x10;
        assert!(!SctpPacket::new_checked(&bad[..]).unwrap().verify_checksum());
    }

    #[test]
    fn crc_known_value() {
        // The CRC32C of the packet bytes with the checksum field zeroed, cross-checked by the
        // generic routine (which has RFC 3720 vectors).
        let p = SctpPacket::new_checked(&INIT[..]).unwrap();
        assert_eq!(p.compute_checksum(), crate::checksum::crc32c(&INIT));
    }

    #[test]
    fn malformed_chunks() {
        assert_eq!(
            SctpPacket::new_checked(&INIT[..11]).unwrap_err(),
            Error::Truncated
        );
        let mut b = INIT;
        b[15] = 3; // chunk length below 4
        let p = SctpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.chunks().collect::<Vec<_>>(), [Err(Error::BadLength)]);
        b[15] = 21; // past the buffer
        let p = SctpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.chunks().collect::<Vec<_>>(), [Err(Error::BadLength)]);
        let p = SctpPacket::new_checked(&INIT[..14]).unwrap();
        assert_eq!(p.chunks().collect::<Vec<_>>(), [Err(Error::Truncated)]);
        // A 5-byte chunk followed by its 3 padding bytes, then a 4-byte chunk.
        let mut b = INIT[..12].to_vec();
        b.extend_from_slice(&[0, 3, 0, 5, 0xaa, 0, 0, 0, 11, 0, 0, 4]);
        let p = SctpPacket::new_checked(&b[..]).unwrap();
        let c: Vec<_> = p.chunks().map(Result::unwrap).collect();
        assert_eq!(
            c[0],
            SctpChunk {
                chunk_type: 0,
                flags: 3,
                value: &[0xaa]
            }
        );
        assert_eq!(
            c[1],
            SctpChunk {
                chunk_type: 11,
                flags: 0,
                value: &[]
            }
        );
    }
}
