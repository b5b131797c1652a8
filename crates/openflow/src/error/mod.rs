//! OpenFlow errors: every error Open vSwitch 3.1 knows, by its OVS name ([`OfpErr`]), and the
//! `OFPT_ERROR` message that carries one in a given protocol version.
//!
//! An error's type and code differ between versions, and an extension error travels three ways:
//! a standard type and code; in OpenFlow 1.0 and 1.1 a Nicira vendor error (type `NXET_VENDOR`
//! 0xb0c2, code `NXVC_VENDOR_ERROR` 0, then the vendor id, type and code); from 1.2 on an
//! experimenter error (type 0xffff, the experimenter type as its code, then the experimenter id).
//! The table of numbers is generated (`error/table.rs`, by `scripts/gen-ofp-errors`).

mod table;

pub use table::OfpErr;

use crate::header::{self, HEADER_LEN, MAX_MESSAGE_LEN, NX_VENDOR_ID, OFPT_ERROR, ONF_VENDOR_ID};

/// Who defines an error's numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    /// The OpenFlow specification.
    Standard,
    /// Open vSwitch's Nicira extensions.
    Nicira,
    /// The ONF's extensions.
    Onf,
}

impl Vendor {
    /// The vendor (experimenter) id on the wire; 0 for the standard.
    pub fn id(self) -> u32 {
        match self {
            Vendor::Standard => 0,
            Vendor::Nicira => NX_VENDOR_ID,
            Vendor::Onf => ONF_VENDOR_ID,
        }
    }
}

const OF: Vendor = Vendor::Standard;
const NX: Vendor = Vendor::Nicira;
const ONF: Vendor = Vendor::Onf;

/// One encoding of an error: for wire versions `versions.0..=versions.1`, the vendor's type and
/// code (a vendor error from OpenFlow 1.2 on has a type only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WireCode {
    /// Who defines the numbers.
    pub vendor: Vendor,
    /// The first and last wire versions this encoding is for.
    pub versions: (u8, u8),
    /// The error type (an experimenter error's type from 1.2 on).
    pub err_type: u16,
    /// The error code, when the encoding has one.
    pub code: Option<u16>,
}

const fn w(vendor: Vendor, first: u8, last: u8, err_type: u16, code: Option<u16>) -> WireCode {
    WireCode {
        vendor,
        versions: (first, last),
        err_type,
        code,
    }
}

/// `OFPET12_EXPERIMENTER`: an experimenter error, OpenFlow 1.2 on.
const OFPET12_EXPERIMENTER: u16 = 0xffff;
/// `NXET_VENDOR`: a Nicira vendor error in OpenFlow 1.0 and 1.1.
const NXET_VENDOR: u16 = 0xb0c2;
/// `NXVC_VENDOR_ERROR`: the code of an `NXET_VENDOR` error.
const NXVC_VENDOR_ERROR: u16 = 0;

impl OfpErr {
    /// OVS's name, as `ovs-ofctl` prints it: `OFPBRC_BAD_TYPE`.
    pub fn name(self) -> &'static str {
        entry(self).1
    }

    /// The encoding of the error in wire version `version`, if it has one there.
    pub fn wire_code(self, version: u8) -> Option<WireCode> {
        entry(self)
            .2
            .iter()
            .find(|c| (c.versions.0..=c.versions.1).contains(&version))
            .copied()
    }

    /// The error OVS reads from an `OFPT_ERROR` of wire version `version` with these numbers
    /// (a vendor error's code is `None` from 1.2 on); the first in OVS's order when one encoding
    /// stands for two errors.
    pub fn from_wire(
        version: u8,
        vendor: Vendor,
        err_type: u16,
        code: Option<u16>,
    ) -> Option<Self> {
        table::TABLE.iter().find_map(|(e, _, codes)| {
            codes
                .iter()
                .any(|c| {
                    (c.versions.0..=c.versions.1).contains(&version)
                        && c.vendor == vendor
                        && c.err_type == err_type
                        && c.code == code
                })
                .then_some(*e)
        })
    }

    /// Every error, in OVS's order.
    pub fn all() -> impl Iterator<Item = OfpErr> {
        table::TABLE.iter().map(|(e, _, _)| *e)
    }
}

impl std::fmt::Display for OfpErr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::error::Error for OfpErr {}

fn entry(e: OfpErr) -> &'static (OfpErr, &'static str, &'static [WireCode]) {
    // The table lists the errors in the enum's order.
    &table::TABLE[e as usize]
}

/// Appends to `out` the `OFPT_ERROR` message of wire version `version` (OpenFlow 1.0's form for
/// a version this crate does not speak) with transaction id `xid` that reports `err`, followed
/// by `data`: the offending request (cut to fit the message), or a hello failure's text. An
/// error with no encoding in that version is sent as `NXBRC_UNENCODABLE_ERROR`, as OVS does.
pub fn encode(err: OfpErr, version: u8, xid: u32, data: &[u8], out: &mut Vec<u8>) {
    let version = if crate::header::Version::from_wire(version).is_some() {
        version
    } else {
        1
    };
    let c = err
        .wire_code(version)
        .or_else(|| OfpErr::NxbrcUnencodableError.wire_code(version))
        .expect("NXBRC_UNENCODABLE_ERROR is encodable in every version");
    let at = header::start(out, version, OFPT_ERROR, xid);
    match (c.vendor, c.code) {
        (Vendor::Standard, code) => {
            out.extend_from_slice(&c.err_type.to_be_bytes());
            out.extend_from_slice(&code.unwrap_or(0).to_be_bytes());
        }
        (v, Some(code)) if version <= 2 => {
            out.extend_from_slice(&NXET_VENDOR.to_be_bytes());
            out.extend_from_slice(&NXVC_VENDOR_ERROR.to_be_bytes());
            out.extend_from_slice(&v.id().to_be_bytes());
            out.extend_from_slice(&c.err_type.to_be_bytes());
            out.extend_from_slice(&code.to_be_bytes());
        }
        (v, _) => {
            out.extend_from_slice(&OFPET12_EXPERIMENTER.to_be_bytes());
            out.extend_from_slice(&c.err_type.to_be_bytes());
            out.extend_from_slice(&v.id().to_be_bytes());
        }
    }
    let room = MAX_MESSAGE_LEN - (out.len() - at);
    out.extend_from_slice(&data[..data.len().min(room)]);
    let _ = header::finish(out, at);
}

/// An `OFPT_ERROR` message read back: the error (when OVS knows its numbers) and the data after
/// the numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorMsg<'a> {
    /// The error, or `None` for numbers OVS does not know.
    pub error: Option<OfpErr>,
    /// The numbers as sent: vendor, type, code.
    pub raw: (Vendor, u16, Option<u16>),
    /// What follows the numbers: the offending request, or a text.
    pub data: &'a [u8],
}

/// Decodes an `OFPT_ERROR` message (header included); `None` when it is too short for its form
/// or names a vendor that is not Nicira's or the ONF's.
pub fn decode(msg: &[u8]) -> Option<ErrorMsg<'_>> {
    let h = header::Header::parse(msg)?;
    let end = usize::from(h.length).min(msg.len());
    let body = msg.get(HEADER_LEN..end)?;
    let be16 = |b: &[u8], i: usize| Some(u16::from_be_bytes([*b.get(i)?, *b.get(i + 1)?]));
    let be32 = |b: &[u8], i: usize| Some(u32::from_be_bytes(b.get(i..i + 4)?.try_into().ok()?));
    let (t, c) = (be16(body, 0)?, be16(body, 2)?);
    let vendor_of = |id| match id {
        NX_VENDOR_ID => Some(Vendor::Nicira),
        ONF_VENDOR_ID => Some(Vendor::Onf),
        _ => None,
    };
    let (raw, data) = if h.version <= 2 && t == NXET_VENDOR && c == NXVC_VENDOR_ERROR {
        let v = vendor_of(be32(body, 4)?)?;
        ((v, be16(body, 8)?, Some(be16(body, 10)?)), &body[12..])
    } else if h.version >= 3 && t == OFPET12_EXPERIMENTER {
        ((vendor_of(be32(body, 4)?)?, c, None), &body[8..])
    } else {
        ((Vendor::Standard, t, Some(c)), &body[4..])
    };
    Some(ErrorMsg {
        error: OfpErr::from_wire(h.version, raw.0, raw.1, raw.2),
        raw,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(err: OfpErr, version: u8, data: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        encode(err, version, 0x42, data, &mut m);
        m
    }

    #[test]
    fn the_table_is_in_the_enum_s_order() {
        for (i, (e, name, codes)) in table::TABLE.iter().enumerate() {
            assert_eq!(*e as usize, i, "{name}");
            assert!(!codes.is_empty(), "{name}");
        }
    }

    /// The three forms, checked against `ovs-ofctl ofp-print` of OVS 3.1.
    #[test]
    fn standard_nicira_and_experimenter_forms() {
        let req = [1, 0xfe, 0, 8, 0, 0, 0, 0x42];
        // OF1.0 OFPBRC_BAD_TYPE: (1,1).
        assert_eq!(
            enc(OfpErr::OfpbrcBadType, 1, &req),
            [[1, 1, 0, 20, 0, 0, 0, 0x42, 0, 1, 0, 1].as_slice(), &req].concat()
        );
        // OFPBRC_BAD_TABLE_ID is Nicira's (1,512) in OF1.0, the standard's (1,9) after.
        let m = enc(OfpErr::OfpbrcBadTableId, 1, &[]);
        assert_eq!(
            m,
            [
                1, 1, 0, 20, 0, 0, 0, 0x42, 0xb0, 0xc2, 0, 0, 0, 0, 0x23, 0x20, 0, 1, 2, 0
            ]
        );
        assert_eq!(decode(&m).unwrap().error, Some(OfpErr::OfpbrcBadTableId));
        assert_eq!(enc(OfpErr::OfpbrcBadTableId, 4, &[])[8..], [0, 1, 0, 9]);
        // NXBRC_NXM_INVALID from OF1.2 on: experimenter type 2.
        let m = enc(OfpErr::NxbrcNxmInvalid, 4, b"x");
        assert_eq!(
            m,
            [
                4, 1, 0, 17, 0, 0, 0, 0x42, 0xff, 0xff, 0, 2, 0, 0, 0x23, 0x20, b'x'
            ]
        );
        let d = decode(&m).unwrap();
        assert_eq!(
            (d.error, d.data),
            (Some(OfpErr::NxbrcNxmInvalid), b"x".as_slice())
        );
    }

    #[test]
    fn every_error_round_trips_in_every_version_it_has() {
        for e in OfpErr::all() {
            for v in 1..=6u8 {
                let Some(c) = e.wire_code(v) else {
                    continue;
                };
                let m = enc(e, v, &[]);
                let back = decode(&m).unwrap().error.unwrap();
                // Some numbers stand for two errors in one version (OVS's "expected
                // duplications"): they read back as the first.
                let b = back.wire_code(v).unwrap();
                assert_eq!(
                    (b.vendor, b.err_type, b.code),
                    (c.vendor, c.err_type, c.code),
                    "{e} in {v}"
                );
            }
        }
    }

    #[test]
    fn oversized_data_is_cut_to_fit_and_short_messages_do_not_decode() {
        let m = enc(OfpErr::OfpbrcBadLen, 4, &[7; 70_000]);
        assert_eq!(m.len(), MAX_MESSAGE_LEN);
        assert_eq!(u16::from_be_bytes([m[2], m[3]]), u16::MAX);
        assert_eq!(decode(&[1, 1, 0, 10, 0, 0, 0, 0, 0, 1]), None);
        assert_eq!(decode(&[4, 1, 0, 12, 0, 0, 0, 0, 0xff, 0xff, 0, 2]), None);
    }
}
