//! Invariant checks of the `pcap_file` fuzz target, shared with the crash-regression test
//! (`crates/netdev/tests/fuzz_regressions.rs` path-imports this file), so that a committed
//! input is replayed through exactly the checks that found it.
//!
//! The input's first byte picks how many bytes each read of the underlying stream returns (1
//! to 64, or all at once for 0), the rest is a capture file as a `pcap` port or `flowpath
//! gen` would open it:
//! - the reader yields records, then at most one error, then nothing;
//! - every record is at most [`MAX_RECORD`] bytes and the records together are no longer than
//!   the file, whatever lengths the headers claim;
//! - the records, written again with [`PcapWriter`], read back with the same bytes and the
//!   same timestamps (to the microsecond the writer keeps), whatever the file's byte order
//!   and timestamp resolution.

use std::io::{self, Read};

use netdev::pcap::{MAX_RECORD, PcapReader, PcapWriter, Record};

/// A stream that returns at most `step` bytes a read.
struct Trickle<'a> {
    data: &'a [u8],
    step: usize,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(self.step).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// Runs every check on `data`.
pub fn check_pcap_file(data: &[u8]) {
    let Some((&sel, file)) = data.split_first() else {
        return;
    };
    let step = match sel % 65 {
        0 => usize::MAX,
        n => usize::from(n),
    };
    let Ok(reader) = PcapReader::new(Trickle { data: file, step }) else {
        return;
    };
    let mut records: Vec<Record> = Vec::new();
    let mut failed = false;
    for r in reader {
        assert!(!failed, "a record after an error");
        match r {
            Ok(rec) => {
                assert!(rec.data.len() <= MAX_RECORD as usize);
                records.push(rec);
            }
            Err(_) => failed = true,
        }
    }
    // A 24-byte global header, then a 16-byte header before each record.
    let total: usize = 24 + records.iter().map(|r| 16 + r.data.len()).sum::<usize>();
    assert!(
        total <= file.len(),
        "{total} bytes of records in {}",
        file.len()
    );

    let mut w = PcapWriter::new(Vec::new()).expect("write to memory");
    for r in &records {
        w.write(r.ts_nanos, &r.data).expect("write to memory");
    }
    let written = w.finish().expect("write to memory");
    let again: Vec<Record> = PcapReader::new(&written[..])
        .expect("a written file opens")
        .collect::<Result<_, _>>()
        .expect("a written file reads");
    assert_eq!(again.len(), records.len());
    for (a, r) in again.iter().zip(&records) {
        assert_eq!(a.data, r.data);
        assert_eq!(a.orig_len as usize, r.data.len());
        // The writer keeps microseconds and 32-bit seconds.
        if r.ts_nanos / 1_000_000_000 <= u64::from(u32::MAX) {
            assert_eq!(a.ts_nanos, r.ts_nanos / 1000 * 1000, "timestamp");
        }
    }
}
