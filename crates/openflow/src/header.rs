//! The OpenFlow header (`struct ofp_header`: version, type, length, transaction id), the protocol
//! versions 1.0 to 1.5, and the framing of a byte stream into whole messages.
//!
//! Every OpenFlow message of every version starts with the same 8 bytes, and the four message
//! types a connection needs before it knows the peer's version (hello, error, echo request and
//! reply) have the same numbers in all of them; the other numbers differ between OpenFlow 1.0
//! and later versions.

use std::fmt;

/// Length of the OpenFlow header.
pub const HEADER_LEN: usize = 8;

/// The largest message: the header's 16-bit length.
pub const MAX_MESSAGE_LEN: usize = u16::MAX as usize;

/// `OFPT_HELLO`, in every version.
pub const OFPT_HELLO: u8 = 0;
/// `OFPT_ERROR`, in every version.
pub const OFPT_ERROR: u8 = 1;
/// `OFPT_ECHO_REQUEST`, in every version.
pub const OFPT_ECHO_REQUEST: u8 = 2;
/// `OFPT_ECHO_REPLY`, in every version.
pub const OFPT_ECHO_REPLY: u8 = 3;
/// `OFPT_VENDOR` (OpenFlow 1.0) or `OFPT_EXPERIMENTER` (1.1 and later).
pub const OFPT_EXPERIMENTER: u8 = 4;

/// The Nicira vendor (experimenter) id of Open vSwitch's extensions.
pub const NX_VENDOR_ID: u32 = 0x0000_2320;
/// The ONF experimenter id (bundles for OpenFlow 1.3, among others).
pub const ONF_VENDOR_ID: u32 = 0x4f4e_4600;

/// An OpenFlow protocol version, as the header's first byte carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Version {
    /// OpenFlow 1.0 (wire 0x01).
    Of10 = 1,
    /// OpenFlow 1.1 (0x02).
    Of11 = 2,
    /// OpenFlow 1.2 (0x03).
    Of12 = 3,
    /// OpenFlow 1.3 (0x04).
    Of13 = 4,
    /// OpenFlow 1.4 (0x05).
    Of14 = 5,
    /// OpenFlow 1.5 (0x06).
    Of15 = 6,
}

impl Version {
    /// Every version, oldest first.
    pub const ALL: [Version; 6] = [
        Version::Of10,
        Version::Of11,
        Version::Of12,
        Version::Of13,
        Version::Of14,
        Version::Of15,
    ];

    /// The version with wire number `v`.
    pub fn from_wire(v: u8) -> Option<Version> {
        Version::ALL.get(usize::from(v).checked_sub(1)?).copied()
    }

    /// The wire number.
    pub fn wire(self) -> u8 {
        self as u8
    }

    /// The name `ovs-ofctl -O` and OVS's `protocols` column use: `OpenFlow13`.
    pub fn name(self) -> &'static str {
        match self {
            Version::Of10 => "OpenFlow10",
            Version::Of11 => "OpenFlow11",
            Version::Of12 => "OpenFlow12",
            Version::Of13 => "OpenFlow13",
            Version::Of14 => "OpenFlow14",
            Version::Of15 => "OpenFlow15",
        }
    }

    /// The version named `name` ([`Version::name`]), or by its number (`1.3`).
    pub fn from_name(name: &str) -> Option<Version> {
        Version::ALL
            .into_iter()
            .find(|v| v.name().eq_ignore_ascii_case(name) || v.number() == name)
    }

    /// The version's number as people write it: `1.3`.
    pub fn number(self) -> &'static str {
        match self {
            Version::Of10 => "1.0",
            Version::Of11 => "1.1",
            Version::Of12 => "1.2",
            Version::Of13 => "1.3",
            Version::Of14 => "1.4",
            Version::Of15 => "1.5",
        }
    }
}

impl fmt::Display for Version {
    /// As `ovs-ofctl` prints a message's version: `OF1.3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OF{}", self.number())
    }
}

/// The header of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The wire version byte (a [`Version`] for every version this crate speaks; a hello may
    /// carry a later one).
    pub version: u8,
    /// The message type, whose meaning depends on the version.
    pub msg_type: u8,
    /// The length of the whole message, header included.
    pub length: u16,
    /// The transaction id a reply repeats.
    pub xid: u32,
}

impl Header {
    /// The header at the start of `buf`, if it holds 8 bytes.
    pub fn parse(buf: &[u8]) -> Option<Header> {
        let h = buf.first_chunk::<HEADER_LEN>()?;
        Some(Header {
            version: h[0],
            msg_type: h[1],
            length: u16::from_be_bytes([h[2], h[3]]),
            xid: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
        })
    }

    /// Appends the header's 8 bytes to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.push(self.version);
        out.push(self.msg_type);
        out.extend_from_slice(&self.length.to_be_bytes());
        out.extend_from_slice(&self.xid.to_be_bytes());
    }
}

/// A stream that does not carry OpenFlow: a header whose length cannot hold the header itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("OpenFlow message length {0} is shorter than its header")]
pub struct FramingError(pub u16);

/// The length of the message at the start of `buf`: `Ok(Some(n))` when its first `n` bytes are
/// a whole message, `Ok(None)` when more bytes are needed to tell or to complete it.
pub fn message_len(buf: &[u8]) -> Result<Option<usize>, FramingError> {
    let Some(h) = Header::parse(buf) else {
        return Ok(None);
    };
    let n = usize::from(h.length);
    if n < HEADER_LEN {
        return Err(FramingError(h.length));
    }
    Ok((buf.len() >= n).then_some(n))
}

/// Begins a message in `out`: a header with a length of 0, which [`finish`] fills in.
/// Returns where the message starts.
pub fn start(out: &mut Vec<u8>, version: u8, msg_type: u8, xid: u32) -> usize {
    let at = out.len();
    Header {
        version,
        msg_type,
        length: 0,
        xid,
    }
    .write(out);
    at
}

/// Ends the message [`start`] began at `at`: writes its length into its header. A message
/// longer than [`MAX_MESSAGE_LEN`] is an error the caller must split or refuse.
pub fn finish(out: &mut [u8], at: usize) -> Result<(), TooLong> {
    let n = out.len() - at;
    let len = u16::try_from(n).map_err(|_| TooLong(n))?;
    out[at + 2..at + 4].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// A message that would not fit the header's 16-bit length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("OpenFlow message of {0} bytes exceeds 65535")]
pub struct TooLong(pub usize);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_by_wire_number_and_name() {
        assert_eq!(Version::from_wire(0), None);
        assert_eq!(Version::from_wire(4), Some(Version::Of13));
        assert_eq!(Version::from_wire(7), None);
        assert_eq!(Version::from_name("OpenFlow15"), Some(Version::Of15));
        assert_eq!(Version::from_name("openflow10"), Some(Version::Of10));
        assert_eq!(Version::from_name("1.4"), Some(Version::Of14));
        assert_eq!(Version::Of13.to_string(), "OF1.3");
    }

    #[test]
    fn framing_waits_for_whole_messages_and_refuses_short_lengths() {
        let mut m = Vec::new();
        let at = start(&mut m, 4, OFPT_ECHO_REQUEST, 7);
        m.extend_from_slice(b"ping");
        finish(&mut m, at).unwrap();
        assert_eq!(m, [4, 2, 0, 12, 0, 0, 0, 7, b'p', b'i', b'n', b'g']);
        assert_eq!(message_len(&m[..7]), Ok(None));
        assert_eq!(message_len(&m[..11]), Ok(None));
        assert_eq!(message_len(&m), Ok(Some(12)));
        m.extend_from_slice(&[1, 0]);
        assert_eq!(message_len(&m), Ok(Some(12)));
        assert_eq!(message_len(&[1, 0, 0, 7, 0, 0, 0, 0]), Err(FramingError(7)));
        let mut big = Vec::new();
        let at = start(&mut big, 1, 0, 0);
        big.resize(70_000, 0);
        assert_eq!(finish(&mut big, at), Err(TooLong(70_000)));
    }
}
