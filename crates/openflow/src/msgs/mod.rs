//! The OpenFlow messages other than flows, packets and groups, by family as OVS splits them
//! (`lib/ofp-switch.c`, `ofp-port.c`, `ofp-monitor.c`, `ofp-meter.c`, `ofp-bundle.c`...): typed
//! structs with an encoder that writes the form each version uses and a decoder that reads
//! every form, refusing what OVS refuses with OVS's error.
//!
//! - [`switch`]: features, switch configuration, barriers, echoes;
//! - [`port`]: the port structure of each version, port descriptions, status and port mods;
//! - [`stats`]: switch description, table, port and queue statistics;
//! - [`queue_config`]: a port's queues and their rates;
//! - [`group_mod`]: group mods and group descriptions;
//! - [`group_stats`]: group statistics and group features;
//! - [`role`] and [`async_config`]: controller roles and the asynchronous messages a connection
//!   asks for;
//! - [`requestforward`]: group and meter mods forwarded to the other controllers;
//! - [`nicira`]: Nicira's connection settings (flow format, packet-in format, table ids in flow
//!   mods, controller id) and `NXT_CT_FLUSH_ZONE`; [`ct_flush`]: `NXT_CT_FLUSH` by tuple;
//! - [`tlv`]: the Geneve option (TLV) map;
//! - [`meter`]: meter mods, statistics, configuration and features;
//! - [`table_features`]: table features requests and replies;
//! - [`table_mod`]: a table's configuration, set and described;
//! - [`bundle`]: bundle control and bundled messages;
//! - [`decode`]: any received message read by the codec of its family; [`encode`]: a read
//!   message written again in the form it was read from.
//!
//! Every decoder takes a [`Message`] whose type and length
//! [`msgtype::decode`](crate::msgtype::decode) already checked, so it reads only the body;
//! encoders append whole messages to a buffer.

pub mod async_config;
pub mod bundle;
pub mod ct_flush;
pub mod decode;
pub mod encode;
pub mod flow_monitor;
pub mod group_mod;
pub mod group_stats;
pub mod meter;
pub mod nicira;
pub mod packet_in;
pub mod packet_out;
pub mod port;
pub mod queue_config;
pub mod requestforward;
pub mod role;
pub mod stats;
pub mod switch;
pub mod table_features;
pub mod table_mod;
pub mod tlv;

use crate::error::OfpErr;
use crate::header::{self, Version};
use crate::msgtype::{EncodeError, Message, MsgType, NotInVersion, multipart::Replies};

/// Reads big-endian fields from a body; running short is `OFPBRC_BAD_LEN`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Self {
        Reader { b }
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], OfpErr> {
        if self.b.len() < n {
            return Err(OfpErr::OfpbrcBadLen);
        }
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(head)
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], OfpErr> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, OfpErr> {
        Ok(self.array::<1>()?[0])
    }

    pub(crate) fn u16(&mut self) -> Result<u16, OfpErr> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, OfpErr> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, OfpErr> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    pub(crate) fn skip(&mut self, n: usize) -> Result<(), OfpErr> {
        self.take(n).map(|_| ())
    }

    /// What is left.
    pub(crate) fn rest(&self) -> &'a [u8] {
        self.b
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.b.is_empty()
    }
}

pub(crate) fn put16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn put32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn put64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn zeros(out: &mut Vec<u8>, n: usize) {
    out.resize(out.len() + n, 0);
}

/// A name field (port, table, description): the bytes up to the first NUL, at most `len - 1`
/// of them as OVS's `ovs_strlcpy` keeps them. A byte that is not part of UTF-8 text reads as
/// `?`, one byte for one, so that the name still fits its field when written again (a
/// replacement character would take three).
pub(crate) fn get_name(field: &[u8]) -> String {
    let max = field.len().saturating_sub(1);
    let end = field[..max].iter().position(|&c| c == 0).unwrap_or(max);
    let mut name = String::with_capacity(end);
    for chunk in field[..end].utf8_chunks() {
        name.push_str(chunk.valid());
        name.extend(std::iter::repeat_n('?', chunk.invalid().len()));
    }
    name
}

/// Writes `name` into a NUL-padded field of `len` bytes, cut to `len - 1` bytes.
pub(crate) fn put_name(out: &mut Vec<u8>, name: &str, len: usize) {
    let b = name.as_bytes();
    let n = b.len().min(len - 1);
    out.extend_from_slice(&b[..n]);
    zeros(out, len - n);
}

/// Begins a message of form `t`: its headers.
pub(crate) fn start(t: MsgType, version: Version, xid: u32, out: &mut Vec<u8>) -> usize {
    // Every encoder here picks a form that exists in the version it is given.
    t.start(version, xid, out)
        .expect("the encoders choose forms by version")
}

/// Ends the message begun at `at`, removing it when it is too long.
pub(crate) fn finish(out: &mut Vec<u8>, at: usize) -> Result<(), EncodeError> {
    header::finish(out, at).map_err(|e| {
        out.truncate(at);
        EncodeError::TooLong(e)
    })
}

/// The replies to the statistics request `request`: `put` appends each entry in the request's
/// version, and the entries are split across messages as they need.
pub(crate) fn stats_replies<T>(
    request: &Message<'_>,
    entries: &[T],
    put: impl Fn(&T, Version, &mut Vec<u8>),
) -> Result<Vec<Vec<u8>>, EncodeError> {
    let version = Version::from_wire(request.version);
    let mut r = version
        .and_then(|_| Replies::for_request(request))
        .ok_or(NotInVersion {
            msg_type: request.msg_type,
            version: version.unwrap_or(Version::Of10),
        })?;
    let version = version.unwrap_or(Version::Of10);
    for e in entries {
        r.push(|b| put(e, version, b));
    }
    Ok(r.finish()?)
}

/// `msg` must be of one of `types`; otherwise `OFPBRC_BAD_TYPE` (a caller's mistake OVS would
/// assert on, here an error).
pub(crate) fn expect(msg: &Message<'_>, types: &[MsgType]) -> Result<(), OfpErr> {
    if types.contains(&msg.msg_type) {
        Ok(())
    } else {
        Err(OfpErr::OfpbrcBadType)
    }
}

/// The version of a decoded message (always one this crate speaks for a typed message).
pub(crate) fn version_of(msg: &Message<'_>) -> Result<Version, OfpErr> {
    Version::from_wire(msg.version).ok_or(OfpErr::OfpbrcBadVersion)
}

/// `OFPPROP_EXP`: the first property type that carries an experimenter id.
const OFPPROP_EXPERIMENTER: u16 = 0xffff;

/// One property of an OpenFlow 1.4 property list (`struct ofp_prop_header`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Prop<'a> {
    /// The property type.
    pub(crate) kind: u16,
    /// For an experimenter property, its experimenter id and type.
    pub(crate) experimenter: Option<(u32, u32)>,
    /// The property after its header, without padding.
    pub(crate) payload: &'a [u8],
}

/// The properties of `b`, each padded to 8 bytes, as OVS's `ofpprop_pull` reads them: a
/// property whose length is short or runs past the list is `OFPBPC_BAD_LEN`, an experimenter
/// property with id 0 `OFPBPC_BAD_EXPERIMENTER`.
pub(crate) fn props(b: &[u8]) -> impl Iterator<Item = Result<Prop<'_>, OfpErr>> {
    let mut rest = b;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let r = next_prop(rest);
        match r {
            Ok((p, next)) => {
                rest = next;
                Some(Ok(p))
            }
            Err(e) => {
                rest = &[];
                Some(Err(e))
            }
        }
    })
}

fn next_prop(b: &[u8]) -> Result<(Prop<'_>, &[u8]), OfpErr> {
    if b.len() < 4 {
        return Err(OfpErr::OfpbpcBadLen);
    }
    let kind = u16::from_be_bytes([b[0], b[1]]);
    let len = usize::from(u16::from_be_bytes([b[2], b[3]]));
    let padded = len.next_multiple_of(8);
    if len < 4 || padded > b.len() {
        return Err(OfpErr::OfpbpcBadLen);
    }
    let (experimenter, payload) = if kind == OFPPROP_EXPERIMENTER {
        if len < 12 {
            return Err(OfpErr::OfpbpcBadLen);
        }
        let id = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
        if id == 0 {
            return Err(OfpErr::OfpbpcBadExperimenter);
        }
        let t = u32::from_be_bytes([b[8], b[9], b[10], b[11]]);
        (Some((id, t)), &b[12..len])
    } else {
        (None, &b[4..len])
    };
    Ok((
        Prop {
            kind,
            experimenter,
            payload,
        },
        &b[padded..],
    ))
}

/// OVS's answer to a property it does not know: ignored when `loose`, else
/// `OFPBPC_BAD_TYPE` (`OFPBPC_BAD_EXP_TYPE` for an experimenter's).
pub(crate) fn unknown_prop(p: &Prop<'_>, loose: bool) -> Result<(), OfpErr> {
    match (loose, p.experimenter) {
        (true, _) => Ok(()),
        (false, None) => Err(OfpErr::OfpbpcBadType),
        (false, Some(_)) => Err(OfpErr::OfpbpcBadExpType),
    }
}

/// Appends a property of type `kind` with `payload`, padded to 8 bytes.
pub(crate) fn put_prop(out: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    put16(out, kind);
    put16(out, (4 + payload.len()) as u16);
    out.extend_from_slice(payload);
    zeros(
        out,
        (4 + payload.len()).next_multiple_of(8) - (4 + payload.len()),
    );
}

/// A property's payload as one big-endian 32-bit value (`ofpprop_parse_be32`).
pub(crate) fn prop_u32(p: &Prop<'_>) -> Result<u32, OfpErr> {
    let a: [u8; 4] = p.payload.try_into().map_err(|_| OfpErr::OfpbpcBadLen)?;
    Ok(u32::from_be_bytes(a))
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Helpers the message tests share: hex, and the requests `ovs-ofctl` sent.

    use crate::msgtype::{self, Message};

    pub(crate) fn unhex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    pub(crate) fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    const OFCTL: &str = include_str!("../../../../testdata/openflow/ofctl-requests.txt");

    /// The messages `ovs-ofctl` sent for the command labelled `label`
    /// (`scripts/capture-ofctl-requests`).
    pub(crate) fn ofctl(label: &str) -> Vec<Vec<u8>> {
        let v: Vec<_> = OFCTL
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .filter(|(l, _)| *l == label)
            .map(|(_, h)| unhex(h))
            .collect();
        assert!(!v.is_empty(), "no capture labelled {label}");
        v
    }

    const OVS: &str = include_str!("../../../../testdata/openflow/ovs-replies.txt");

    /// The lines of kind `kind` (`request`, `reply`, ...) recorded for `label` from a running
    /// ovs-vswitchd (`scripts/capture-ovs-replies`).
    pub(crate) fn ovs_lines(label: &str, kind: &str) -> Vec<String> {
        OVS.lines()
            .filter_map(|l| {
                let mut f = l.split('\t');
                (f.next() == Some(label) && f.next() == Some(kind))
                    .then(|| f.next().unwrap_or("").to_string())
            })
            .collect()
    }

    /// A request and what a running ovs-vswitchd answered to it.
    pub(crate) fn ovs_reply(label: &str) -> (Vec<u8>, Vec<Vec<u8>>) {
        let req = ovs_lines(label, "request");
        let replies = ovs_lines(label, "reply").iter().map(|h| unhex(h)).collect();
        (unhex(req.first().expect(label)), replies)
    }

    /// Decodes a message that must decode.
    pub(crate) fn msg(b: &[u8]) -> Message<'_> {
        msgtype::decode(b).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_pad_to_8_and_refuse_what_ovs_refuses() {
        let mut b = Vec::new();
        put_prop(&mut b, 0, &[1, 2, 3, 4]);
        put_prop(&mut b, 7, &[9; 6]);
        assert_eq!(b.len(), 8 + 16);
        let v: Vec<_> = props(&b).collect::<Result<_, _>>().unwrap();
        assert_eq!(v[0].payload, [1, 2, 3, 4]);
        assert_eq!((v[1].kind, v[1].payload), (7, &[9; 6][..]));
        assert_eq!(prop_u32(&v[0]), Ok(0x0102_0304));
        assert_eq!(prop_u32(&v[1]), Err(OfpErr::OfpbpcBadLen));
        // Too short, running past the end, experimenter 0.
        assert_eq!(
            props(&[0, 0, 0, 3, 0, 0, 0, 0]).next(),
            Some(Err(OfpErr::OfpbpcBadLen))
        );
        assert_eq!(
            props(&[0, 0, 0, 12, 0, 0, 0, 0]).next(),
            Some(Err(OfpErr::OfpbpcBadLen))
        );
        assert_eq!(props(&[0, 0]).next(), Some(Err(OfpErr::OfpbpcBadLen)));
        let exp = [0xff, 0xff, 0, 12, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0];
        assert_eq!(props(&exp).next(), Some(Err(OfpErr::OfpbpcBadExperimenter)));
        let exp = [0xff, 0xff, 0, 12, 0, 0, 0x23, 0x20, 0, 0, 0, 1, 0, 0, 0, 0];
        let p = props(&exp).next().unwrap().unwrap();
        assert_eq!(p.experimenter, Some((0x2320, 1)));
        assert_eq!(unknown_prop(&p, false), Err(OfpErr::OfpbpcBadExpType));
        assert_eq!(unknown_prop(&p, true), Ok(()));
    }

    #[test]
    fn names_stop_at_nul_and_keep_room_for_one() {
        let mut b = Vec::new();
        put_name(&mut b, "br0", 16);
        assert_eq!(b.len(), 16);
        assert_eq!(get_name(&b), "br0");
        b.clear();
        put_name(&mut b, "a-name-longer-than-16", 16);
        assert_eq!(get_name(&b), "a-name-longer-t");
        assert_eq!(get_name(&[b'x'; 16]), "xxxxxxxxxxxxxxx");
    }
}
