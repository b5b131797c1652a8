//! Classic libpcap files: a 24-byte global header, then 16-byte record headers each followed by
//! the captured bytes. Both byte orders and both the microsecond (0xa1b2c3d4) and nanosecond
//! (0xa1b23c4d) magics are accepted.

/// A whole capture.
#[derive(Debug)]
pub struct Pcap {
    /// Timestamps are in nanoseconds (else microseconds).
    pub nanosecond: bool,
    /// The file was written big-endian.
    pub big_endian: bool,
    /// Link type (1 = Ethernet).
    pub linktype: u32,
    /// Snapshot length.
    pub snaplen: u32,
    /// Records in file order.
    pub records: Vec<Record>,
}

/// One captured packet.
#[derive(Debug)]
pub struct Record {
    /// Timestamp in nanoseconds since the epoch.
    pub ts_nanos: u64,
    /// Original length on the wire.
    pub orig_len: u32,
    /// Captured bytes.
    pub data: Vec<u8>,
}

impl Pcap {
    /// Parses a whole file.
    pub fn parse(b: &[u8]) -> Result<Pcap, String> {
        let hdr = b.get(..24).ok_or("file shorter than the global header")?;
        let magic = u32::from_le_bytes(hdr[..4].try_into().unwrap());
        let (big_endian, nanosecond) = match magic {
            0xa1b2_c3d4 => (false, false),
            0xa1b2_3c4d => (false, true),
            0xd4c3_b2a1 => (true, false),
            0x4d3c_b2a1 => (true, true),
            m => return Err(format!("bad magic {m:#010x}")),
        };
        let u16_at = |s: &[u8], o: usize| {
            let a = [s[o], s[o + 1]];
            if big_endian {
                u16::from_be_bytes(a)
            } else {
                u16::from_le_bytes(a)
            }
        };
        let u32_at = |s: &[u8], o: usize| {
            let a = [s[o], s[o + 1], s[o + 2], s[o + 3]];
            if big_endian {
                u32::from_be_bytes(a)
            } else {
                u32::from_le_bytes(a)
            }
        };
        let (major, minor) = (u16_at(hdr, 4), u16_at(hdr, 6));
        if (major, minor) != (2, 4) {
            return Err(format!("unsupported version {major}.{minor}"));
        }
        let snaplen = u32_at(hdr, 16);
        let linktype = u32_at(hdr, 20);
        let mut records = Vec::new();
        let mut off = 24;
        while off < b.len() {
            let rh = b
                .get(off..off + 16)
                .ok_or_else(|| format!("truncated record header at {off}"))?;
            let (sec, frac) = (u64::from(u32_at(rh, 0)), u64::from(u32_at(rh, 4)));
            let incl = u32_at(rh, 8) as usize;
            let orig_len = u32_at(rh, 12);
            off += 16;
            let data = b
                .get(off..off + incl)
                .ok_or_else(|| format!("truncated record at {off}"))?;
            off += incl;
            let ts_nanos = sec * 1_000_000_000 + if nanosecond { frac } else { frac * 1000 };
            records.push(Record {
                ts_nanos,
                orig_len,
                data: data.to_vec(),
            });
        }
        Ok(Pcap {
            nanosecond,
            big_endian,
            linktype,
            snaplen,
            records,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(big: bool, nano: bool) -> Vec<u8> {
        let w32 = |v: u32| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let w16 = |v: u16| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut f = Vec::new();
        f.extend_from_slice(&w32(if nano { 0xa1b2_3c4d } else { 0xa1b2_c3d4 }));
        f.extend_from_slice(&w16(2));
        f.extend_from_slice(&w16(4));
        f.extend_from_slice(&[0; 8]);
        f.extend_from_slice(&w32(65535));
        f.extend_from_slice(&w32(1));
        for (sec, frac, data) in [(1u32, 5u32, &b"abc"[..]), (2, 999, &b""[..])] {
            f.extend_from_slice(&w32(sec));
            f.extend_from_slice(&w32(frac));
            f.extend_from_slice(&w32(data.len() as u32));
            f.extend_from_slice(&w32(60));
            f.extend_from_slice(data);
        }
        f
    }

    #[test]
    fn all_four_magics() {
        for big in [false, true] {
            for nano in [false, true] {
                let p = Pcap::parse(&file(big, nano)).unwrap();
                assert_eq!(
                    (p.big_endian, p.nanosecond, p.linktype, p.snaplen),
                    (big, nano, 1, 65535)
                );
                assert_eq!(p.records.len(), 2);
                assert_eq!(p.records[0].data, b"abc");
                assert_eq!(p.records[0].orig_len, 60);
                let unit = if nano { 1 } else { 1000 };
                assert_eq!(p.records[0].ts_nanos, 1_000_000_000 + 5 * unit);
                assert_eq!(p.records[1].ts_nanos, 2_000_000_000 + 999 * unit);
            }
        }
    }

    #[test]
    fn rejects_garbage() {
        assert!(Pcap::parse(&[0; 10]).is_err());
        assert!(Pcap::parse(&[0; 24]).is_err());
        let mut f = file(false, false);
        f.pop();
        assert!(Pcap::parse(&f).is_err());
    }
}
