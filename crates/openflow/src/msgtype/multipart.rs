//! Statistics (multipart) framing: the flags of a statistics message, the replies to a
//! statistics request split across as many messages as their entries need, and the reassembly
//! of a request sent in several parts.
//!
//! A reply longer than one message's 65535 bytes is sent as several messages of the same form
//! and transaction id, every one but the last with `OFPSF_REPLY_MORE` set. As OVS does
//! (`ofpmp_postappend`), the split falls between entries: an entry that does not fit the
//! current message moves whole into a new one. From OpenFlow 1.3 a request may come in parts
//! too (`OFPMPF_REQ_MORE`); [`Assembler`] collects them as OVS's `ofpmp_assembler` does.

use std::collections::HashMap;

use super::{Message, MsgType, NotInVersion, is_stats_request, lookup, wire_id};
use crate::error::OfpErr;
use crate::header::{self, MAX_MESSAGE_LEN, TooLong, Version};

/// `OFPSF_REPLY_MORE` / `OFPMPF_REPLY_MORE`: more replies follow this one.
pub const OFPSF_REPLY_MORE: u16 = 1;
/// `OFPMPF_REQ_MORE` (OpenFlow 1.3 on): more requests follow this one.
pub const OFPMPF_REQ_MORE: u16 = 1;

/// Whether more messages of a statistics request or reply follow this one.
pub fn more(msg: &Message<'_>) -> bool {
    msg.stats_flags & OFPSF_REPLY_MORE != 0
}

/// The replies to one statistics request, being built.
#[derive(Clone, Debug)]
pub struct Replies {
    /// The finished messages, then the one being filled.
    msgs: Vec<Vec<u8>>,
    /// The length of each message's headers (copied to every message).
    headers_len: usize,
}

impl Replies {
    /// Replies of form `reply` (a statistics reply) in `version` with transaction id `xid`,
    /// with no entries yet.
    pub(crate) fn new(reply: MsgType, version: Version, xid: u32) -> Result<Replies, NotInVersion> {
        let mut first = Vec::with_capacity(1024);
        reply.start(version, xid, &mut first)?;
        Ok(Replies {
            headers_len: first.len(),
            msgs: vec![first],
        })
    }

    /// The replies to the statistics request `request`: its reply form, version and
    /// transaction id. `None` when `request` is not a statistics request.
    pub fn for_request(request: &Message<'_>) -> Option<Replies> {
        let version = Version::from_wire(request.version)?;
        let reply = request.msg_type.stats_reply(version)?;
        Replies::new(reply, version, request.xid).ok()
    }

    /// Appends to the body of the current message what `write` appends to it (one body part,
    /// such as one port's statistics, in OVS's `ofpmp_append` sense); when that makes the
    /// message too long, the part moves to a new message and the previous one gets
    /// `OFPSF_REPLY_MORE`.
    pub fn push(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        let last = self.msgs.len() - 1;
        let start = self.msgs[last].len();
        write(&mut self.msgs[last]);
        if self.msgs[last].len() <= MAX_MESSAGE_LEN || start == self.headers_len {
            return;
        }
        let mut next = Vec::with_capacity(self.msgs[last].len() - start + self.headers_len);
        next.extend_from_slice(&self.msgs[last][..self.headers_len]);
        next.extend_from_slice(&self.msgs[last][start..]);
        self.msgs[last].truncate(start);
        // Statistics headers are at least 12 bytes, their flags at 10..12.
        if let Some(f) = self.msgs[last].get_mut(10..12) {
            let flags = u16::from_be_bytes([f[0], f[1]]) | OFPSF_REPLY_MORE;
            f.copy_from_slice(&flags.to_be_bytes());
        }
        self.msgs.push(next);
    }

    /// The messages, their lengths written; an error when one part alone is longer than a
    /// message can be.
    pub fn finish(mut self) -> Result<Vec<Vec<u8>>, TooLong> {
        for m in &mut self.msgs {
            header::finish(m, 0)?;
        }
        Ok(self.msgs)
    }
}

/// How long a partly received request waits for its next part, in milliseconds.
const PART_TIMEOUT_MS: u64 = 1000;
/// The most bytes one request's parts may add up to (table features requests can pass 1 MB).
const MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

/// A request whose last part has not come yet.
#[derive(Debug)]
struct Partial {
    msg_type: MsgType,
    parts: Vec<Vec<u8>>,
    size: usize,
    has_body: bool,
    deadline_ms: u64,
}

/// The statistics requests of one connection that are arriving in parts, by transaction id
/// (OVS's `ofpmp_assembler`).
#[derive(Debug, Default)]
pub struct Assembler {
    partial: HashMap<u32, Partial>,
}

impl Assembler {
    /// Takes one received message at time `now_ms`. A message that is not a statistics
    /// request comes straight back; a request part waits for the rest (`Ok(None)`); the last
    /// part returns the whole request, its parts in order, without the parts that had no body
    /// (one is kept if none had). A part of another type than the first is `OFPBRC_BAD_STAT`,
    /// parts adding up to more than 4 MB `OFPBRC_MULTIPART_BUFFER_OVERFLOW`, a request whose
    /// form needs a body and whose parts have none `OFPBRC_BAD_LEN`; the partial request is
    /// then dropped.
    pub fn execute(&mut self, msg: Vec<u8>, now_ms: u64) -> Result<Option<Vec<Vec<u8>>>, OfpErr> {
        let (Some(&version), Some(&msg_type)) = (msg.first(), msg.get(1)) else {
            return Ok(Some(vec![msg]));
        };
        if !is_stats_request(version, msg_type) {
            return Ok(Some(vec![msg]));
        }
        let id = wire_id(&msg)?;
        let info = lookup(&id)?;
        let headers_len = id.headers_len();
        let has_body = msg.len() > headers_len;
        if has_body && !info.length_ok(headers_len, msg.len()) {
            return Err(OfpErr::OfpbrcBadLen);
        }
        let xid = u32::from_be_bytes([msg[4], msg[5], msg[6], msg[7]]);
        let p = self.partial.entry(xid).or_insert_with(|| Partial {
            msg_type: info.raw,
            parts: Vec::new(),
            size: 0,
            has_body: false,
            deadline_ms: 0,
        });
        p.deadline_ms = now_ms + PART_TIMEOUT_MS;
        if p.msg_type != info.raw {
            self.partial.remove(&xid);
            return Err(OfpErr::OfpbrcBadStat);
        }
        p.size += msg.len();
        if p.size > MAX_REQUEST_BYTES {
            self.partial.remove(&xid);
            return Err(OfpErr::OfpbrcMultipartBufferOverflow);
        }
        let more = version >= Version::Of13.wire()
            && u16::from_be_bytes([msg[10], msg[11]]) & OFPMPF_REQ_MORE != 0;
        p.has_body |= has_body;
        if !more && !p.has_body && info.min_body != 0 {
            self.partial.remove(&xid);
            return Err(OfpErr::OfpbrcBadLen);
        }
        p.parts.push(msg);
        if more {
            return Ok(None);
        }
        let mut parts = self
            .partial
            .remove(&xid)
            .map(|p| p.parts)
            .unwrap_or_default();
        if parts.len() > 1 {
            let first = parts[0].clone();
            parts.retain(|m| m.len() > headers_len);
            if parts.is_empty() {
                parts.push(first);
            }
        }
        Ok(Some(parts))
    }

    /// A request whose next part did not come within a second of the last, by time `now_ms`:
    /// its first part, to report `OFPBRC_MULTIPART_REQUEST_TIMEOUT` about. It is dropped.
    pub fn expired(&mut self, now_ms: u64) -> Option<Vec<u8>> {
        let xid = *self
            .partial
            .iter()
            .find(|(_, p)| now_ms >= p.deadline_ms)?
            .0;
        self.partial
            .remove(&xid)
            .and_then(|p| p.parts.into_iter().next())
    }

    /// When the next partial request times out, if any is waiting.
    pub fn next_deadline_ms(&self) -> Option<u64> {
        self.partial.values().map(|p| p.deadline_ms).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msgtype::decode;

    #[test]
    fn long_replies_split_between_parts_with_the_more_flag() {
        let mut r = Replies::new(MsgType::Ofpst13PortReply, Version::Of13, 9).unwrap();
        // 112-byte port statistics: 584 fit in 65535 - 16 bytes.
        for i in 0..1000u32 {
            r.push(|b| b.extend_from_slice(&[i as u8; 112]));
        }
        let msgs = r.finish().unwrap();
        assert_eq!(msgs.len(), 2);
        let (a, b) = (decode(&msgs[0]).unwrap(), decode(&msgs[1]).unwrap());
        assert_eq!(
            (a.msg_type, a.xid, more(&a)),
            (MsgType::Ofpst13PortReply, 9, true)
        );
        assert_eq!(
            (b.msg_type, b.xid, more(&b)),
            (MsgType::Ofpst13PortReply, 9, false)
        );
        assert_eq!(a.body.len(), 584 * 112);
        assert_eq!(b.body.len(), 416 * 112);
        assert_eq!(b.body[0], 584u32 as u8);
    }

    /// A table features request in three parts: the first and last with bodies, the middle
    /// one empty (dropped), as OpenFlow 1.3 allows.
    #[test]
    fn requests_in_parts_are_reassembled() {
        let part = |more: bool, body: &[u8]| {
            let mut m = Vec::new();
            MsgType::Ofpst13TableFeaturesRequest
                .encode(Version::Of13, 7, body, &mut m)
                .unwrap();
            m[11] = u8::from(more);
            m
        };
        let mut a = Assembler::default();
        assert_eq!(a.execute(part(true, &[1; 8]), 0), Ok(None));
        assert_eq!(a.execute(part(true, &[]), 10), Ok(None));
        assert_eq!(a.next_deadline_ms(), Some(1010));
        let whole = a.execute(part(false, &[2; 16]), 20).unwrap().unwrap();
        assert_eq!(whole, [part(true, &[1; 8]), part(false, &[2; 16])]);
        assert_eq!(a.next_deadline_ms(), None);
        // Anything else passes straight through.
        let echo = vec![4, 2, 0, 8, 0, 0, 0, 1];
        assert_eq!(a.execute(echo.clone(), 0), Ok(Some(vec![echo])));
        // A part of another type, a request that needs a body and has none, a timeout.
        assert_eq!(a.execute(part(true, &[]), 0), Ok(None));
        let mut desc = Vec::new();
        MsgType::OfpstDescRequest
            .encode(Version::Of13, 7, &[], &mut desc)
            .unwrap();
        assert_eq!(a.execute(desc, 0), Err(OfpErr::OfpbrcBadStat));
        let mut meter = Vec::new();
        MsgType::Ofpst13MeterRequest
            .encode(Version::Of13, 8, &[0; 8], &mut meter)
            .unwrap();
        meter.truncate(16);
        meter[3] = 16;
        assert_eq!(a.execute(meter, 0), Err(OfpErr::OfpbrcBadLen));
        assert_eq!(a.execute(part(true, &[]), 0), Ok(None));
        assert_eq!(a.expired(999), None);
        assert_eq!(a.expired(1000), Some(part(true, &[])));
        assert_eq!(a.next_deadline_ms(), None);
    }

    #[test]
    fn replies_follow_their_request_s_form_version_and_xid() {
        // OF1.0 NXST_FLOW request (an empty match), as ovs-ofctl dump-flows sends it.
        let mut req = Vec::new();
        MsgType::NxstFlowRequest
            .encode(
                Version::Of10,
                3,
                &[0xff, 0xff, 0, 0, 0, 0, 0xff, 0],
                &mut req,
            )
            .unwrap();
        let msgs = Replies::for_request(&decode(&req).unwrap())
            .unwrap()
            .finish()
            .unwrap();
        assert_eq!(
            msgs,
            [[
                1, 17, 0, 24, 0, 0, 0, 3, 0xff, 0xff, 0, 0, 0, 0, 0x23, 0x20, 0, 0, 0, 0, 0, 0, 0,
                0
            ]]
        );
        let mut req = Vec::new();
        MsgType::OfptFeaturesRequest
            .encode(Version::Of10, 3, &[], &mut req)
            .unwrap();
        assert!(Replies::for_request(&decode(&req).unwrap()).is_none());
    }
}
