//! Statistics (multipart) framing: the flags of a statistics message and the replies to a
//! statistics request, split across as many messages as their entries need.
//!
//! A reply longer than one message's 65535 bytes is sent as several messages of the same form
//! and transaction id, every one but the last with `OFPSF_REPLY_MORE` set. As OVS does
//! (`ofpmp_postappend`), the split falls between entries: an entry that does not fit the
//! current message moves whole into a new one.

use super::{Message, MsgType, NotInVersion};
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
    /// Replies of form `reply` in `version` with transaction id `xid`, with no entries yet.
    pub fn new(reply: MsgType, version: Version, xid: u32) -> Result<Replies, NotInVersion> {
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
        let flags = u16::from_be_bytes([self.msgs[last][10], self.msgs[last][11]]);
        self.msgs[last][10..12].copy_from_slice(&(flags | OFPSF_REPLY_MORE).to_be_bytes());
        self.msgs.push(next);
    }

    /// The body of the message being filled, for parts that refer back to what they wrote.
    pub fn current(&mut self) -> &mut Vec<u8> {
        let last = self.msgs.len() - 1;
        &mut self.msgs[last]
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
