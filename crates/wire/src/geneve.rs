//! GENEVE (RFC 8926): an 8-byte base header followed by up to 252 bytes of TLV options.
//!
//! ```text
//! |Ver|  Opt Len  |O|C|    Rsvd.  |          Protocol Type        |
//! |        Virtual Network Identifier (VNI)       |    Reserved   |
//! |                    Variable-Length Options                    |
//! ```
//! Each option: class (16 bits), type (8 bits, the high bit is "critical"), 3 reserved bits, a
//! 5-bit length in 4-byte words, then the data.

use crate::{Error, EtherType, OptionBytes, Result, get_u16, get_u32, set_u16, set_u32};

mod field {
    use crate::Field;
    pub const VER_OPTLEN: usize = 0;
    pub const FLAGS: usize = 1;
    pub const PROTOCOL: Field = 2..4;
    pub const VNI_RSVD: Field = 4..8;
    pub const OPTIONS: usize = 8;
}

/// Length of the GENEVE base header.
pub const HEADER_LEN: usize = field::OPTIONS;
/// Largest option area (Opt Len is 6 bits of 4-byte words).
pub const MAX_OPTIONS_LEN: usize = 63 * 4;
/// Largest option data (5-bit length in 4-byte words).
pub const MAX_OPTION_DATA_LEN: usize = 31 * 4;

/// Option bytes of a GENEVE header.
pub type GeneveOptions = OptionBytes<MAX_OPTIONS_LEN>;

const FLAG_O: u8 = 0x80;
const FLAG_C: u8 = 0x40;
const OPTION_CRITICAL: u8 = 0x80;

/// One GENEVE option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GeneveOption<'a> {
    /// Option class (namespace; 0x0102 is OVN).
    pub class: u16,
    /// Type, as on the wire: the high bit is the critical bit.
    pub option_type: u8,
    /// The three reserved bits before the length.
    pub reserved: u8,
    /// Data (a multiple of 4 bytes, at most 124).
    pub data: &'a [u8],
}

impl GeneveOption<'_> {
    /// Critical: a receiver that does not understand the option must drop the packet.
    #[inline]
    pub const fn critical(&self) -> bool {
        self.option_type & OPTION_CRITICAL != 0
    }

    /// Length in bytes on the wire (4 + data).
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        4 + self.data.len()
    }

    /// Appends the option to an option area; `Err(BadOption)` if the data is not a multiple of
    /// 4 bytes, longer than 124, or does not fit.
    pub fn push_to(&self, options: &mut GeneveOptions) -> Result<()> {
        let n = self.data.len();
        if !n.is_multiple_of(4)
            || n > MAX_OPTION_DATA_LEN
            || options.len() + 4 + n > MAX_OPTIONS_LEN
        {
            return Err(Error::BadOption);
        }
        let [c0, c1] = self.class.to_be_bytes();
        options.push(&[
            c0,
            c1,
            self.option_type,
            (self.reserved << 5) | (n / 4) as u8,
        ])?;
        options.push(self.data)
    }
}

/// Iterates GENEVE options; yields one `Err(BadOption)` and stops if an option runs past the
/// option area.
#[derive(Debug, Clone)]
pub struct GeneveOptionIter<'a> {
    data: &'a [u8],
}

impl<'a> GeneveOptionIter<'a> {
    /// Iterates over an option area.
    pub const fn new(data: &'a [u8]) -> Self {
        GeneveOptionIter { data }
    }
}

impl<'a> Iterator for GeneveOptionIter<'a> {
    type Item = Result<GeneveOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.data.is_empty() {
            return None;
        }
        let Some(&[c0, c1, option_type, rl]) = self.data.first_chunk::<4>() else {
            self.data = &[];
            return Some(Err(Error::BadOption));
        };
        let end = 4 + usize::from(rl & 0x1f) * 4;
        let Some((opt, rest)) = self.data.split_at_checked(end) else {
            self.data = &[];
            return Some(Err(Error::BadOption));
        };
        self.data = rest;
        Some(Ok(GeneveOption {
            class: u16::from_be_bytes([c0, c1]),
            option_type,
            reserved: rl >> 5,
            data: &opt[4..],
        }))
    }
}

/// A view of a GENEVE header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenevePacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> GenevePacket<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        GenevePacket { buffer }
    }

    /// Wraps a buffer after `check_len`.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks: base header fits (`Truncated`), version is 0 (`BadVersion`), options fit
    /// (`Truncated`).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 0 {
            return Err(Error::BadVersion);
        }
        if len < self.header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The underlying buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Version (0 on a checked view).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_OPTLEN] >> 6
    }

    /// Length of the option area in bytes.
    #[inline]
    pub fn options_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_OPTLEN] & 0x3f) * 4
    }

    /// Header length: 8 plus the options.
    #[inline]
    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.options_len()
    }

    /// O: OAM (control) packet.
    #[inline]
    pub fn oam(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & FLAG_O != 0
    }

    /// C: critical options are present.
    #[inline]
    pub fn critical(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & FLAG_C != 0
    }

    /// Protocol type of the payload (TEB for Ethernet).
    #[inline]
    pub fn protocol_type(&self) -> EtherType {
        EtherType(get_u16(self.buffer.as_ref(), field::PROTOCOL))
    }

    /// Virtual network identifier, 24 bits.
    #[inline]
    pub fn vni(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::VNI_RSVD) >> 8
    }

    /// The option area.
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[field::OPTIONS..self.header_len()]
    }

    /// Iterates the options.
    #[inline]
    pub fn options_iter(&self) -> GeneveOptionIter<'_> {
        GeneveOptionIter::new(self.options())
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> GenevePacket<&'a T> {
    /// The payload after the options.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> GenevePacket<T> {
    /// Sets version and option length (bytes, a multiple of 4, at most 252).
    #[inline]
    pub fn set_version_and_options_len(&mut self, version: u8, options_len: usize) {
        self.buffer.as_mut()[field::VER_OPTLEN] = (version << 6) | ((options_len / 4) as u8 & 0x3f);
    }

    /// Sets the O and C flags (the reserved bits are cleared).
    #[inline]
    pub fn set_flags(&mut self, oam: bool, critical: bool) {
        self.buffer.as_mut()[field::FLAGS] =
            if oam { FLAG_O } else { 0 } | if critical { FLAG_C } else { 0 };
    }

    /// Sets the protocol type.
    #[inline]
    pub fn set_protocol_type(&mut self, value: EtherType) {
        set_u16(self.buffer.as_mut(), field::PROTOCOL, value.0);
    }

    /// Sets the VNI (low 24 bits); keeps the reserved byte.
    #[inline]
    pub fn set_vni(&mut self, value: u32) {
        let rsvd = self.buffer.as_ref()[field::VNI_RSVD.end - 1];
        set_u32(
            self.buffer.as_mut(),
            field::VNI_RSVD,
            (value << 8) | u32::from(rsvd),
        );
    }

    /// The payload, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }
}

/// The meaning of a GENEVE header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GeneveRepr {
    /// O: OAM packet.
    pub oam: bool,
    /// C: critical options present.
    pub critical: bool,
    /// Protocol type of the payload.
    pub protocol_type: EtherType,
    /// VNI, 0..=0xffffff.
    pub vni: u32,
    /// The option area as on the wire (build it with `GeneveOption::push_to`).
    pub options: GeneveOptions,
}

impl GeneveRepr {
    /// Reads a checked header; `Err(BadOption)` if an option runs past the option area.
    /// Reserved bits of the base header are ignored (RFC 8926 §3.4).
    pub fn parse<T: AsRef<[u8]>>(packet: &GenevePacket<T>) -> Result<GeneveRepr> {
        packet.check_len()?;
        for opt in packet.options_iter() {
            opt?;
        }
        Ok(GeneveRepr {
            oam: packet.oam(),
            critical: packet.critical(),
            protocol_type: packet.protocol_type(),
            vni: packet.vni(),
            options: GeneveOptions::from_slice(packet.options())?,
        })
    }

    /// Iterates the options.
    pub fn options_iter(&self) -> GeneveOptionIter<'_> {
        GeneveOptionIter::new(self.options.as_slice())
    }

    /// Bytes `emit` writes: 8 plus the options rounded up to 4.
    #[inline]
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.options.len().next_multiple_of(4)
    }

    /// Writes the header and options, with zero reserved fields.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut GenevePacket<T>) {
        let olen = self.options.len().next_multiple_of(4);
        packet.set_version_and_options_len(0, olen);
        packet.set_flags(self.oam, self.critical);
        packet.set_protocol_type(self.protocol_type);
        set_u32(
            packet.buffer.as_mut(),
            field::VNI_RSVD,
            (self.vni & 0x00ff_ffff) << 8,
        );
        let o = &mut packet.buffer.as_mut()[field::OPTIONS..field::OPTIONS + olen];
        let n = self.options.len();
        o[..n].copy_from_slice(self.options.as_slice());
        o[n..].fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The seed GENEVE header: optlen 2 words, TEB, VNI 3, OVN option class 0x0102 type 0x80
    // length 1 with data 00 03 00 02.
    const SEED: [u8; 16] = [
        0x02, 0x00, 0x65, 0x58, 0x00, 0x00, 0x03, 0x00, 0x01, 0x02, 0x80, 0x01, 0x00, 0x03, 0x00,
        0x02,
    ];

    #[test]
    fn seed_header() {
        let p = GenevePacket::new_checked(&SEED[..]).unwrap();
        assert_eq!((p.version(), p.options_len(), p.header_len()), (0, 8, 16));
        assert_eq!((p.oam(), p.critical()), (false, false));
        assert_eq!((p.protocol_type(), p.vni()), (EtherType::TEB, 3));
        let opts: Vec<_> = p.options_iter().map(Result::unwrap).collect();
        assert_eq!(opts.len(), 1);
        assert_eq!((opts[0].class, opts[0].option_type), (0x0102, 0x80));
        assert!(opts[0].critical());
        assert_eq!(opts[0].data, &[0, 3, 0, 2]);
        let r = GeneveRepr::parse(&p).unwrap();
        let mut rebuilt = GeneveOptions::new();
        opts[0].push_to(&mut rebuilt).unwrap();
        assert_eq!(rebuilt, r.options);
        let mut out = [0xffu8; 16];
        r.emit(&mut GenevePacket::new_unchecked(&mut out[..]));
        assert_eq!(out, SEED);
    }

    #[test]
    fn errors() {
        assert_eq!(
            GenevePacket::new_checked(&SEED[..7]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            GenevePacket::new_checked(&SEED[..15]).unwrap_err(),
            Error::Truncated
        );
        let mut b = SEED;
        b[0] |= 0x40;
        assert_eq!(
            GenevePacket::new_checked(&b[..]).unwrap_err(),
            Error::BadVersion
        );
        let mut b = SEED;
        b[11] = 0x02; // option claims 8 data bytes, area has 4
        let p = GenevePacket::new_checked(&b[..]).unwrap();
        assert_eq!(GeneveRepr::parse(&p), Err(Error::BadOption));
        let mut o = GeneveOptions::new();
        let bad = GeneveOption {
            class: 1,
            option_type: 2,
            reserved: 0,
            data: &[1, 2, 3],
        };
        assert_eq!(bad.push_to(&mut o), Err(Error::BadOption));
        let big = GeneveOption {
            class: 1,
            option_type: 2,
            reserved: 0,
            data: &[0; 128],
        };
        assert_eq!(big.push_to(&mut o), Err(Error::BadOption));
    }

    #[test]
    fn max_options() {
        // Two 124-byte options fill 256 > 252 bytes: the second must be refused.
        let mut o = GeneveOptions::new();
        let a = GeneveOption {
            class: 0xffff,
            option_type: 0x01,
            reserved: 0,
            data: &[7; 124],
        };
        a.push_to(&mut o).unwrap();
        assert_eq!(a.push_to(&mut o), Err(Error::BadOption));
        let b = GeneveOption {
            class: 0xffff,
            option_type: 0x81,
            reserved: 0,
            data: &[9; 120],
        };
        b.push_to(&mut o).unwrap();
        assert_eq!(o.len(), 252);
        let r = GeneveRepr {
            oam: true,
            critical: true,
            protocol_type: EtherType::IPV6,
            vni: 0xfffffe,
            options: o,
        };
        let mut out = [0u8; 260];
        r.emit(&mut GenevePacket::new_unchecked(&mut out[..]));
        let p = GenevePacket::new_checked(&out[..]).unwrap();
        assert_eq!(p.options_len(), 252);
        assert_eq!(GeneveRepr::parse(&p).unwrap(), r);
        assert_eq!(
            p.options_iter().filter(|o| o.unwrap().critical()).count(),
            1
        );
    }
}
