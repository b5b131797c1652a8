//! OpenFlow's message types as Open vSwitch names them: from a message's first bytes to the
//! [`MsgType`] it is (and the [`OfpType`] it means), and back to the header bytes that begin it
//! in a given version.
//!
//! A message is identified by more than the header's type byte. Vendor (experimenter)
//! messages add a vendor id and a 32-bit subtype (Nicira's `NXT_*`, the ONF's `ONFT_*`);
//! statistics (multipart) messages add a 16-bit statistics type after the header, with OpenFlow
//! 1.0's 12-byte form (`struct ofp10_stats_msg`) and 1.1's 16-byte one that pads the body to 8
//! bytes; vendor statistics (`NXST_*`, `ONFST_*`) add a vendor and a subtype after that.
//!
//! The forms, their versions and the sizes their bodies may have are OVS's
//! (`include/openvswitch/ofp-msgs.h`), generated into the `table` module by
//! `scripts/gen-ofp-msgs`. A message that fits no form gets OVS's error for it
//! (`OFPBRC_BAD_TYPE`, `OFPBRC_BAD_STAT`, `OFPBRC_BAD_VENDOR`, `OFPBRC_BAD_SUBTYPE`) and one
//! whose length its form does not allow `OFPBRC_BAD_LEN`. [`multipart`] splits statistics
//! replies across messages and reassembles requests sent in parts, as OVS does.

pub mod multipart;
mod table;

pub use table::{MsgType, OfpType};

use crate::error::OfpErr;
use crate::header::{self, HEADER_LEN, NX_VENDOR_ID, ONF_VENDOR_ID, Version};

/// `OFPT_VENDOR` / `OFPT_EXPERIMENTER`: the type of every vendor message.
const OFPT_VENDOR: u8 = 4;
/// OpenFlow 1.0's `OFPT_STATS_REQUEST`.
const OFPT10_STATS_REQUEST: u8 = 16;
/// OpenFlow 1.0's `OFPT_STATS_REPLY`.
const OFPT10_STATS_REPLY: u8 = 17;
/// `OFPT_MULTIPART_REQUEST`, OpenFlow 1.1 on.
const OFPT11_STATS_REQUEST: u8 = 18;
/// `OFPT_MULTIPART_REPLY`, OpenFlow 1.1 on.
const OFPT11_STATS_REPLY: u8 = 19;
/// `OFPST_VENDOR` / `OFPMP_EXPERIMENTER`: the statistics type of vendor statistics.
const OFPST_VENDOR: u16 = 0xffff;

/// The header family a message form is carried in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderKind {
    /// A standard message: the header's type.
    Ofpt,
    /// Standard statistics (multipart): the statistics type.
    Ofpst,
    /// A Nicira vendor message: the subtype.
    Nxt,
    /// Nicira vendor statistics: the subtype.
    Nxst,
    /// An ONF experimenter message: the subtype.
    Onft,
    /// ONF experimenter statistics: the subtype.
    Onfst,
}

/// One message form, as the generated table lists it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawInfo {
    raw: MsgType,
    name: &'static str,
    kind: HeaderKind,
    /// The header type, statistics type or vendor subtype, by `kind`.
    number: u32,
    /// The first and last wire versions of the form.
    versions: (u8, u8),
    /// For statistics: whether a reply (else a request).
    reply: bool,
    /// The body's fixed part, after the headers.
    min_body: u16,
    /// The size of the body's repeated part: 0 when the body is exactly `min_body`, 1 for any
    /// length from `min_body` on.
    extra: u16,
    ofptype: OfpType,
}

/// What tells message forms apart: OVS's `struct ofphdrs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct WireId {
    version: u8,
    msg_type: u8,
    stat: u16,
    vendor: u32,
    subtype: u32,
}

impl WireId {
    /// The length of the headers: OpenFlow's, then the vendor's or the statistics' (OVS's
    /// `ofphdrs_len`).
    fn headers_len(&self) -> usize {
        if self.msg_type == OFPT_VENDOR {
            return 16;
        }
        match (self.version, self.msg_type) {
            (1, OFPT10_STATS_REQUEST | OFPT10_STATS_REPLY) if self.stat == OFPST_VENDOR => 24,
            (1, OFPT10_STATS_REQUEST | OFPT10_STATS_REPLY) => 12,
            (2..=6, OFPT11_STATS_REQUEST | OFPT11_STATS_REPLY) if self.stat == OFPST_VENDOR => 24,
            (2..=6, OFPT11_STATS_REQUEST | OFPT11_STATS_REPLY) => 16,
            _ => HEADER_LEN,
        }
    }
}

/// Whether `msg_type` is a statistics request or reply in wire version `version`.
fn is_stats(version: u8, msg_type: u8) -> bool {
    match version {
        1 => matches!(msg_type, OFPT10_STATS_REQUEST | OFPT10_STATS_REPLY),
        2..=6 => matches!(msg_type, OFPT11_STATS_REQUEST | OFPT11_STATS_REPLY),
        _ => false,
    }
}

/// Whether `msg_type` is a statistics request in wire version `version`.
fn is_stats_request(version: u8, msg_type: u8) -> bool {
    match version {
        1 => msg_type == OFPT10_STATS_REQUEST,
        2..=6 => msg_type == OFPT11_STATS_REQUEST,
        _ => false,
    }
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Reads the identifying headers of `msg` (OVS's `ofphdrs_decode`).
fn wire_id(msg: &[u8]) -> Result<WireId, OfpErr> {
    let need = |n: usize| {
        if msg.len() < n {
            Err(OfpErr::OfpbrcBadLen)
        } else {
            Ok(())
        }
    };
    need(HEADER_LEN)?;
    let mut id = WireId {
        version: msg[0],
        msg_type: msg[1],
        stat: 0,
        vendor: 0,
        subtype: 0,
    };
    if id.msg_type == OFPT_VENDOR {
        need(16)?;
        id.vendor = be32(msg, 8);
        if id.vendor != NX_VENDOR_ID && id.vendor != ONF_VENDOR_ID {
            return Err(OfpErr::OfpbrcBadVendor);
        }
        id.subtype = be32(msg, 12);
    } else if id.version == 1 && matches!(id.msg_type, OFPT10_STATS_REQUEST | OFPT10_STATS_REPLY) {
        need(12)?;
        id.stat = be16(msg, 8);
        if id.stat == OFPST_VENDOR {
            need(16)?;
            id.vendor = be32(msg, 12);
            if id.vendor != NX_VENDOR_ID {
                return Err(OfpErr::OfpbrcBadVendor);
            }
            need(24)?;
            id.subtype = be32(msg, 16);
        }
    } else if id.version != 1 && matches!(id.msg_type, OFPT11_STATS_REQUEST | OFPT11_STATS_REPLY) {
        need(16)?;
        id.stat = be16(msg, 8);
        if id.stat == OFPST_VENDOR {
            need(24)?;
            id.vendor = be32(msg, 16);
            if id.vendor != NX_VENDOR_ID && id.vendor != ONF_VENDOR_ID {
                return Err(OfpErr::OfpbrcBadVendor);
            }
            id.subtype = be32(msg, 20);
        }
    }
    Ok(id)
}

impl RawInfo {
    /// The identifying headers of this form in wire version `version` (which it must exist in).
    fn wire_id(&self, version: u8) -> WireId {
        let stats = |reply: bool| match (version, reply) {
            (1, false) => OFPT10_STATS_REQUEST,
            (1, true) => OFPT10_STATS_REPLY,
            (_, false) => OFPT11_STATS_REQUEST,
            (_, true) => OFPT11_STATS_REPLY,
        };
        let mut id = WireId {
            version,
            msg_type: 0,
            stat: 0,
            vendor: 0,
            subtype: 0,
        };
        match self.kind {
            HeaderKind::Ofpt => id.msg_type = self.number as u8,
            HeaderKind::Nxt | HeaderKind::Onft => {
                id.msg_type = OFPT_VENDOR;
                id.subtype = self.number;
            }
            HeaderKind::Ofpst => {
                id.msg_type = stats(self.reply);
                id.stat = self.number as u16;
            }
            HeaderKind::Nxst | HeaderKind::Onfst => {
                id.msg_type = stats(self.reply);
                id.stat = OFPST_VENDOR;
                id.subtype = self.number;
            }
        }
        id.vendor = match self.kind {
            HeaderKind::Nxt | HeaderKind::Nxst => NX_VENDOR_ID,
            HeaderKind::Onft | HeaderKind::Onfst => ONF_VENDOR_ID,
            HeaderKind::Ofpt | HeaderKind::Ofpst => 0,
        };
        id
    }

    fn in_version(&self, version: u8) -> bool {
        (self.versions.0..=self.versions.1).contains(&version)
    }

    /// Whether a message of `len` bytes with `headers_len` bytes of headers has a body this
    /// form allows (OVS's `ofpraw_check_length`).
    fn length_ok(&self, headers_len: usize, len: usize) -> bool {
        let min = headers_len + usize::from(self.min_body);
        match self.extra {
            0 => len == min,
            1 => len >= min,
            n => len >= min && (len - min).is_multiple_of(usize::from(n)),
        }
    }
}

/// The form of the message `id` identifies.
fn lookup(id: &WireId) -> Result<&'static RawInfo, OfpErr> {
    table::TABLE
        .iter()
        .find(|r| r.in_version(id.version) && r.wire_id(id.version) == *id)
        .ok_or(if id.vendor != 0 {
            OfpErr::OfpbrcBadSubtype
        } else if is_stats(id.version, id.msg_type) {
            OfpErr::OfpbrcBadStat
        } else {
            OfpErr::OfpbrcBadType
        })
}

/// A message whose type and length were recognised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    /// The message's form.
    pub msg_type: MsgType,
    /// The wire version.
    pub version: u8,
    /// The transaction id.
    pub xid: u32,
    /// For a statistics message, the flags of its statistics header (`OFPSF_REPLY_MORE`,
    /// `OFPSF_REQ_MORE`); 0 otherwise.
    pub stats_flags: u16,
    /// The body: what follows the headers [`MsgType`] implies.
    pub body: &'a [u8],
}

/// Identifies the message `msg` (header included; bytes past the header's length are not
/// read) and checks its length against its form, with OVS's error when either fails.
pub fn decode(msg: &[u8]) -> Result<Message<'_>, OfpErr> {
    let h = header::Header::parse(msg).ok_or(OfpErr::OfpbrcBadLen)?;
    let msg = msg
        .get(..usize::from(h.length))
        .ok_or(OfpErr::OfpbrcBadLen)?;
    let id = wire_id(msg)?;
    let info = lookup(&id)?;
    let headers_len = id.headers_len();
    if !info.length_ok(headers_len, msg.len()) {
        return Err(OfpErr::OfpbrcBadLen);
    }
    Ok(Message {
        msg_type: info.raw,
        version: h.version,
        xid: h.xid,
        stats_flags: if is_stats(id.version, id.msg_type) {
            be16(msg, 10)
        } else {
            0
        },
        body: &msg[headers_len..],
    })
}

/// The message type of `msg` without checking its length against its form (OVS's
/// `ofpraw_decode_partial`): what a switch needs to name the message an error is about.
pub fn decode_type(msg: &[u8]) -> Result<MsgType, OfpErr> {
    Ok(lookup(&wire_id(msg)?)?.raw)
}

/// A message form asked for in a version it does not exist in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{} does not exist in {version}", .msg_type.name())]
pub struct NotInVersion {
    /// The form.
    pub msg_type: MsgType,
    /// The version asked for.
    pub version: Version,
}

impl MsgType {
    fn info(self) -> &'static RawInfo {
        // The table lists the forms in the enum's order.
        &table::TABLE[self as usize]
    }

    /// OVS's name for the message, as `ovs-ofctl` prints it: `OFPT_FEATURES_REPLY`,
    /// `OFPST_PORT_DESC request`, `NXT_FLOW_MOD`, `ONFT_BUNDLE_CONTROL`.
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// What the message means, whatever its form.
    pub fn kind(self) -> OfpType {
        self.info().ofptype
    }

    /// The header family the form travels in.
    pub fn header_kind(self) -> HeaderKind {
        self.info().kind
    }

    /// Whether the form exists in `version`.
    pub fn in_version(self, version: Version) -> bool {
        self.info().in_version(version.wire())
    }

    /// Whether the form is a statistics (multipart) request or reply.
    pub fn is_stats(self) -> bool {
        matches!(
            self.info().kind,
            HeaderKind::Ofpst | HeaderKind::Nxst | HeaderKind::Onfst
        )
    }

    /// The length of the headers that begin the form in `version`, body excluded.
    pub fn headers_len(self, version: Version) -> usize {
        self.info().wire_id(version.wire()).headers_len()
    }

    /// The reply form of a statistics request form in `version` (OVS's
    /// `ofpraw_stats_request_to_reply`).
    pub fn stats_reply(self, version: Version) -> Option<MsgType> {
        let info = self.info();
        if !self.is_stats() || info.reply || !info.in_version(version.wire()) {
            return None;
        }
        let mut id = info.wire_id(version.wire());
        id.msg_type += 1;
        lookup(&id).ok().map(|r| r.raw)
    }

    /// Every form, in OVS's order.
    pub fn all() -> impl Iterator<Item = MsgType> {
        table::TABLE.iter().map(|r| r.raw)
    }

    /// Appends the headers of a message of this form in `version` to `out`, with transaction
    /// id `xid`, a length of 0 that [`header::finish`] fills in and statistics flags of 0.
    /// Returns where the message starts.
    pub fn start(
        self,
        version: Version,
        xid: u32,
        out: &mut Vec<u8>,
    ) -> Result<usize, NotInVersion> {
        let info = self.info();
        if !info.in_version(version.wire()) {
            return Err(NotInVersion {
                msg_type: self,
                version,
            });
        }
        let id = info.wire_id(version.wire());
        let at = header::start(out, id.version, id.msg_type, xid);
        if id.msg_type == OFPT_VENDOR {
            out.extend_from_slice(&id.vendor.to_be_bytes());
            out.extend_from_slice(&id.subtype.to_be_bytes());
        } else if is_stats(id.version, id.msg_type) {
            out.extend_from_slice(&id.stat.to_be_bytes());
            out.extend_from_slice(&0u16.to_be_bytes());
            if id.version != 1 {
                out.extend_from_slice(&[0; 4]);
            }
            if id.stat == OFPST_VENDOR {
                out.extend_from_slice(&id.vendor.to_be_bytes());
                out.extend_from_slice(&id.subtype.to_be_bytes());
                if id.version == 1 {
                    out.extend_from_slice(&[0; 4]);
                }
            }
        }
        Ok(at)
    }

    /// A whole message of this form: its headers then `body`.
    pub fn encode(
        self,
        version: Version,
        xid: u32,
        body: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        let at = self.start(version, xid, out)?;
        out.extend_from_slice(body);
        header::finish(out, at).map_err(|e| {
            out.truncate(at);
            EncodeError::TooLong(e)
        })
    }
}

impl OfpType {
    /// The form of this message in `version`: OVS's standard form where one exists, else its
    /// extension's (Nicira's, then the ONF's).
    pub fn msg_type(self, version: Version) -> Option<MsgType> {
        let mut forms = table::TABLE
            .iter()
            .filter(|r| r.ofptype == self && r.in_version(version.wire()));
        let first = forms.clone().next()?;
        Some(
            forms
                .find(|r| matches!(r.kind, HeaderKind::Ofpt | HeaderKind::Ofpst))
                .unwrap_or(first)
                .raw,
        )
    }
}

/// Why a message could not be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// The form does not exist in the version.
    #[error(transparent)]
    NotInVersion(#[from] NotInVersion),
    /// The message would exceed 65535 bytes.
    #[error(transparent)]
    TooLong(#[from] header::TooLong),
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const FIXTURES: &str = include_str!("../../../testdata/openflow/msgtypes.txt");

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// Every form in every version, with short, long and repeated bodies, and unknown types,
    /// statistics, vendors and subtypes: named, or refused, as `ovs-ofctl ofp-print` does.
    #[test]
    fn types_and_errors_agree_with_ovs() {
        let mut n = 0;
        for line in FIXTURES.lines().filter(|l| !l.starts_with('#')) {
            let (hex, ovs) = line.split_once(' ').unwrap();
            let ours = match decode(&unhex(hex)) {
                Ok(m) => m.msg_type.name().to_string(),
                Err(e) => format!("error {e}"),
            };
            assert_eq!(ours, ovs, "{hex}");
            n += 1;
        }
        assert!(n > 1500);
    }

    #[test]
    fn every_form_reads_back_in_every_version_it_has() {
        for t in MsgType::all() {
            for v in Version::ALL.into_iter().filter(|&v| t.in_version(v)) {
                let info = t.info();
                let body = vec![0; usize::from(info.min_body)];
                let mut m = Vec::new();
                t.encode(v, 0x55, &body, &mut m).unwrap();
                let d = decode(&m).unwrap();
                assert_eq!(
                    (d.msg_type, d.version, d.xid),
                    (t, v.wire(), 0x55),
                    "{t:?} {v}"
                );
                assert_eq!(d.body.len(), body.len());
                assert_eq!(m.len(), t.headers_len(v) + body.len());
                assert_eq!(decode_type(&m), Ok(t));
            }
        }
    }

    #[test]
    fn forms_by_meaning_version_and_reply() {
        use MsgType as M;
        let of = |t: OfpType, v| t.msg_type(v);
        assert_eq!(
            of(OfpType::BarrierRequest, Version::Of10),
            Some(M::Ofpt10BarrierRequest)
        );
        assert_eq!(
            of(OfpType::BarrierRequest, Version::Of15),
            Some(M::Ofpt11BarrierRequest)
        );
        assert_eq!(of(OfpType::FlowMod, Version::Of10), Some(M::Ofpt10FlowMod));
        assert_eq!(
            of(OfpType::BundleControl, Version::Of13),
            Some(M::Onft13BundleControl)
        );
        assert_eq!(
            of(OfpType::BundleControl, Version::Of14),
            Some(M::Ofpt14BundleControl)
        );
        assert_eq!(of(OfpType::MeterMod, Version::Of10), None);
        assert_eq!(M::NxtFlowMod.kind(), OfpType::FlowMod);
        assert_eq!(
            M::Ofpst10PortDescRequest.stats_reply(Version::Of13),
            Some(M::Ofpst11PortDescReply)
        );
        assert_eq!(
            M::NxstFlowRequest.stats_reply(Version::Of10),
            Some(M::NxstFlowReply)
        );
        assert_eq!(M::OfptEchoRequest.stats_reply(Version::Of10), None);
        assert_eq!(M::Ofpst10PortDescRequest.name(), "OFPST_PORT_DESC request");
        let mut m = Vec::new();
        assert_eq!(
            M::Ofpt13MeterMod.start(Version::Of10, 0, &mut m),
            Err(NotInVersion {
                msg_type: M::Ofpt13MeterMod,
                version: Version::Of10
            })
        );
        assert!(m.is_empty());
    }

    #[test]
    fn truncated_and_short_messages_are_bad_lengths() {
        assert_eq!(decode(&[1, 0, 0]), Err(OfpErr::OfpbrcBadLen));
        // The header says 16 bytes, 8 are there.
        assert_eq!(
            decode(&[1, 0, 0, 16, 0, 0, 0, 0]),
            Err(OfpErr::OfpbrcBadLen)
        );
        assert_eq!(decode(&[1, 0, 0, 4, 0, 0, 0, 0]), Err(OfpErr::OfpbrcBadLen));
        // Bytes past the header's length are not the message's.
        let m = decode(&[1, 2, 0, 8, 0, 0, 0, 9, 0xee]).unwrap();
        assert_eq!((m.msg_type, m.body), (MsgType::OfptEchoRequest, &[][..]));
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode(&b);
            let _ = decode_type(&b);
        }

        #[test]
        fn headers_survive_random_tails(
            form in 0..table::TABLE.len(),
            v in 0u8..6,
            xid: u32,
            reps in 0usize..4,
        ) {
            let t = table::TABLE[form].raw;
            let info = t.info();
            // One of the versions the form exists in.
            let (lo, hi) = (info.versions.0, info.versions.1.min(6));
            let v = Version::from_wire(lo + v % (hi - lo + 1)).unwrap();
            let len = usize::from(info.min_body) + reps * usize::from(info.extra);
            let mut m = Vec::new();
            t.encode(v, xid, &vec![0xa5; len], &mut m).unwrap();
            let d = decode(&m).unwrap();
            prop_assert_eq!((d.msg_type, d.xid, d.body.len()), (t, xid, len));
        }
    }
}
