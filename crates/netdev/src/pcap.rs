//! Classic libpcap capture files (the format of tcpdump's `-w`, scapy's `wrpcap` and DPDK's
//! `net_pcap`): a 24-byte global header, then a 16-byte record header before each packet.
//!
//! Both byte orders and both timestamp resolutions (microsecond magic `0xa1b2c3d4`, nanosecond
//! magic `0xa1b23c4d`) are read. pcapng is not: a pcapng file is rejected with a clear error.
//! A damaged file yields every packet before the damage, then an error; it never panics.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;

/// Link type of Ethernet captures.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Largest record a reader accepts; bigger lengths mean a damaged file.
pub const MAX_RECORD: u32 = 256 * 1024;

const MAGIC_USEC: u32 = 0xa1b2_c3d4;
const MAGIC_NSEC: u32 = 0xa1b2_3c4d;
const MAGIC_PCAPNG: u32 = 0x0a0d_0d0a;

/// Errors reading or writing a capture file.
#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error("not a pcap file (magic {0:#010x})")]
    BadMagic(u32),
    #[error("pcapng files are not supported; convert with `editcap -F pcap IN OUT`")]
    Pcapng,
    #[error("file ends inside the global header")]
    ShortHeader,
    #[error("unsupported link type {0} (only Ethernet, 1)")]
    LinkType(u32),
    #[error("record {index}: {what}")]
    BadRecord { index: u64, what: String },
}

/// One captured packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Timestamp in nanoseconds since the epoch.
    pub ts_nanos: u64,
    /// Length of the packet on the wire (may exceed `data.len()` for snapped captures).
    pub orig_len: u32,
    /// The captured bytes.
    pub data: Vec<u8>,
}

/// Reads records from a classic pcap stream.
pub struct PcapReader<R> {
    inner: R,
    swapped: bool,
    nanos: bool,
    link_type: u32,
    index: u64,
    failed: bool,
}

impl PcapReader<BufReader<File>> {
    /// Opens a file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, PcapError> {
        Self::new(BufReader::new(File::open(path)?))
    }
}

/// Reads until `buf` is full or the stream ends; returns how many bytes were read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl<R: Read> PcapReader<R> {
    /// Reads the global header from `inner`.
    pub fn new(mut inner: R) -> Result<Self, PcapError> {
        let mut h = [0u8; 24];
        let n = read_full(&mut inner, &mut h)?;
        if n >= 4 && u32::from_le_bytes([h[0], h[1], h[2], h[3]]) == MAGIC_PCAPNG {
            return Err(PcapError::Pcapng);
        }
        if n < 24 {
            return Err(PcapError::ShortHeader);
        }
        let le = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let (swapped, nanos) = match le {
            MAGIC_USEC => (false, false),
            MAGIC_NSEC => (false, true),
            m if m.swap_bytes() == MAGIC_USEC => (true, false),
            m if m.swap_bytes() == MAGIC_NSEC => (true, true),
            m => return Err(PcapError::BadMagic(m)),
        };
        let mut me = PcapReader {
            inner,
            swapped,
            nanos,
            link_type: 0,
            index: 0,
            failed: false,
        };
        me.link_type = me.u32_at(&h, 20);
        if me.link_type != LINKTYPE_ETHERNET {
            return Err(PcapError::LinkType(me.link_type));
        }
        Ok(me)
    }

    fn u32_at(&self, b: &[u8], o: usize) -> u32 {
        let v = u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        if self.swapped { v.swap_bytes() } else { v }
    }

    /// The next record into `data` (reusing its allocation); `Ok(None)` at the end of the file.
    pub fn next_into(&mut self, data: &mut Vec<u8>) -> Result<Option<(u64, u32)>, PcapError> {
        let mut h = [0u8; 16];
        let n = read_full(&mut self.inner, &mut h)?;
        if n == 0 {
            return Ok(None);
        }
        let index = self.index;
        let bad = |what: String| PcapError::BadRecord { index, what };
        if n < 16 {
            return Err(bad(format!(
                "file ends inside the record header ({n} of 16 bytes)"
            )));
        }
        let (sec, frac) = (self.u32_at(&h, 0) as u64, self.u32_at(&h, 4) as u64);
        let (incl, orig) = (self.u32_at(&h, 8), self.u32_at(&h, 12));
        if incl > MAX_RECORD {
            return Err(bad(format!("captured length {incl} is implausible")));
        }
        data.resize(incl as usize, 0);
        let got = read_full(&mut self.inner, data)?;
        if got < incl as usize {
            return Err(bad(format!(
                "file ends inside the packet ({got} of {incl} bytes)"
            )));
        }
        self.index += 1;
        let ts = sec * 1_000_000_000 + if self.nanos { frac } else { frac * 1000 };
        Ok(Some((ts, orig)))
    }
}

impl<R: Read> Iterator for PcapReader<R> {
    type Item = Result<Record, PcapError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let mut data = Vec::new();
        match self.next_into(&mut data) {
            Ok(Some((ts_nanos, orig_len))) => Some(Ok(Record {
                ts_nanos,
                orig_len,
                data,
            })),
            Ok(None) => None,
            Err(e) => {
                // Stop after the first damage: what follows cannot be framed.
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// Reads a whole file.
pub fn read_file(path: impl AsRef<Path>) -> Result<Vec<Record>, PcapError> {
    PcapReader::open(path)?.collect()
}

/// Writes a classic little-endian microsecond pcap stream.
pub struct PcapWriter<W: Write> {
    inner: W,
}

impl PcapWriter<BufWriter<File>> {
    /// Creates (truncates) a file.
    pub fn create(path: impl AsRef<Path>) -> Result<Self, PcapError> {
        Self::new(BufWriter::new(File::create(path)?))
    }
}

impl<W: Write> PcapWriter<W> {
    /// Writes the global header (snaplen 262144, Ethernet).
    pub fn new(mut inner: W) -> Result<Self, PcapError> {
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&MAGIC_USEC.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        h.extend_from_slice(&MAX_RECORD.to_le_bytes());
        h.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        inner.write_all(&h)?;
        Ok(PcapWriter { inner })
    }

    /// Appends one packet.
    pub fn write(&mut self, ts_nanos: u64, data: &[u8]) -> Result<(), PcapError> {
        let sec = (ts_nanos / 1_000_000_000) as u32;
        let usec = ((ts_nanos % 1_000_000_000) / 1000) as u32;
        let len = data.len() as u32;
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&sec.to_le_bytes());
        h[4..8].copy_from_slice(&usec.to_le_bytes());
        h[8..12].copy_from_slice(&len.to_le_bytes());
        h[12..16].copy_from_slice(&len.to_le_bytes());
        self.inner.write_all(&h)?;
        self.inner.write_all(data)?;
        Ok(())
    }

    /// Pushes buffered records to the file.
    pub fn flush(&mut self) -> Result<(), PcapError> {
        self.inner.flush()?;
        Ok(())
    }

    /// Flushes and returns the inner writer.
    pub fn finish(mut self) -> Result<W, PcapError> {
        self.inner.flush()?;
        Ok(self.inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn file_with(pkts: &[&[u8]]) -> Vec<u8> {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        for (i, p) in pkts.iter().enumerate() {
            w.write(i as u64 * 1000, p).unwrap();
        }
        w.finish().unwrap()
    }

    #[test]
    fn round_trip() {
        let bytes = file_with(&[&[1, 2, 3], &[4; 60]]);
        let recs: Vec<_> = PcapReader::new(&bytes[..])
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].data, [1, 2, 3]);
        assert_eq!(recs[1].ts_nanos, 1000);
        assert_eq!(recs[1].orig_len, 60);
    }

    #[test]
    fn big_endian_nanosecond_file() {
        let mut b = Vec::new();
        b.extend_from_slice(&MAGIC_NSEC.to_be_bytes());
        b.extend_from_slice(&[
            0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 1,
        ]);
        b.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 5, 0, 0, 0, 2, 0, 0, 0, 2, 0xaa, 0xbb]);
        let r: Vec<_> = PcapReader::new(&b[..])
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(r[0].ts_nanos, 1_000_000_005);
        assert_eq!(r[0].data, [0xaa, 0xbb]);
    }

    #[test]
    fn damage_is_an_error_after_the_good_records() {
        let mut bytes = file_with(&[&[1, 2, 3], &[4; 60]]);
        bytes.truncate(bytes.len() - 10);
        let recs: Vec<_> = PcapReader::new(&bytes[..]).unwrap().collect();
        assert_eq!(recs.len(), 2);
        assert!(recs[0].is_ok());
        let e = recs[1].as_ref().unwrap_err().to_string();
        assert!(e.contains("record 1: file ends inside the packet"), "{e}");

        // An implausible length stops the reader for good, even if bytes follow.
        let mut bytes = file_with(&[&[1, 2, 3], &[4; 60], &[5; 60]]);
        let rec1 = 24 + 16 + 3;
        bytes[rec1 + 8..rec1 + 12].copy_from_slice(&u32::MAX.to_le_bytes());
        let recs: Vec<_> = PcapReader::new(&bytes[..]).unwrap().collect();
        assert_eq!(recs.len(), 2);
        assert!(
            recs[1]
                .as_ref()
                .unwrap_err()
                .to_string()
                .contains("implausible")
        );
    }

    #[test]
    fn rejects_pcapng_and_garbage() {
        let ng = [0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0];
        assert!(matches!(PcapReader::new(&ng[..]), Err(PcapError::Pcapng)));
        let junk = [0x42u8; 24];
        assert!(matches!(
            PcapReader::new(&junk[..]),
            Err(PcapError::BadMagic(_))
        ));
        assert!(matches!(
            PcapReader::new(&[0xd4u8, 0xc3][..]),
            Err(PcapError::ShortHeader)
        ));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut b = file_with(&[]);
            b.extend(tail);
            if let Ok(r) = PcapReader::new(&b[..]) {
                for rec in r.take(100) {
                    let _ = rec;
                }
            }
        }
    }
}
