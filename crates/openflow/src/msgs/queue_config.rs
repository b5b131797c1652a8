//! A port's queues and their rates: `OFPT_QUEUE_GET_CONFIG_REQUEST`/`REPLY` (OpenFlow 1.0 to
//! 1.3) and the `OFPST_QUEUE_DESC` statistics that replace them from 1.4, as OVS's
//! `lib/ofp-queue.c` reads and writes them (`ovs-ofctl queue-get-config`).
//!
//! A rate is in tenths of a percent of the port's speed; a queue without one has none on the
//! wire and `None` here. Before 1.2 a queue does not repeat its port; from 1.4 each queue is a
//! statistics entry with properties.

use super::port::{port_from_ofp11, port_to_ofp11, pull_port, put_port};
use super::{Reader, finish, put_prop, put16, put32, start, zeros};
use crate::error::OfpErr;
use crate::header::Version;
use crate::msgs::port::OFPP_ANY;
use crate::msgs::stats::OFPQ_ALL;
use crate::msgtype::{EncodeError, Message, MsgType, NotInVersion};

/// `OFPP_MAX`: ports from here on are reserved.
const OFPP_MAX: u32 = 0xff00;
/// Queue property: minimum rate.
const OFPQT_MIN_RATE: u16 = 1;
/// Queue property: maximum rate.
const OFPQT_MAX_RATE: u16 = 2;

/// A queue-config request (or 1.4's queue description request).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueConfigRequest {
    /// The port, in OpenFlow 1.0's numbering ([`OFPP_ANY`] for all, from 1.1 on).
    pub port: u32,
    /// The queue ([`OFPQ_ALL`] for all; only 1.4 on can name one).
    pub queue: u32,
}

impl QueueConfigRequest {
    /// Appends the request in `version`.
    pub fn encode(&self, version: Version, xid: u32, out: &mut Vec<u8>) {
        match version {
            Version::Of10 => {
                let at = start(MsgType::Ofpt10QueueGetConfigRequest, version, xid, out);
                put16(out, self.port as u16);
                zeros(out, 2);
                let _ = finish(out, at);
            }
            Version::Of11 | Version::Of12 | Version::Of13 => {
                let at = start(MsgType::Ofpt11QueueGetConfigRequest, version, xid, out);
                put32(out, port_to_ofp11(self.port));
                zeros(out, 4);
                let _ = finish(out, at);
            }
            Version::Of14 | Version::Of15 => {
                let at = start(MsgType::Ofpst14QueueDescRequest, version, xid, out);
                put32(out, port_to_ofp11(self.port));
                put32(out, self.queue);
                let _ = finish(out, at);
            }
        }
    }

    /// Reads the request (OVS's `ofputil_decode_queue_get_config_request`): a reserved port
    /// other than "any" (and 1.0's "any" too) is `OFPQOFC_BAD_PORT`.
    pub fn decode(msg: &Message<'_>) -> Result<Self, OfpErr> {
        let mut r = Reader::new(msg.body);
        let (port, queue) = match msg.msg_type {
            MsgType::Ofpt10QueueGetConfigRequest => (u32::from(r.u16()?), OFPQ_ALL),
            MsgType::Ofpt11QueueGetConfigRequest => {
                let port = port_from_ofp11(r.u32()?)?;
                if port == OFPP_ANY {
                    return Ok(QueueConfigRequest {
                        port,
                        queue: OFPQ_ALL,
                    });
                }
                (port, OFPQ_ALL)
            }
            MsgType::Ofpst14QueueDescRequest => {
                let port = port_from_ofp11(r.u32()?)?;
                return Ok(QueueConfigRequest {
                    port,
                    queue: r.u32()?,
                });
            }
            _ => return Err(OfpErr::OfpbrcBadType),
        };
        if port >= OFPP_MAX {
            return Err(OfpErr::OfpqofcBadPort);
        }
        Ok(QueueConfigRequest { port, queue })
    }
}

/// One queue's configuration (OVS's `struct ofputil_queue_config`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    /// The port, in OpenFlow 1.0's numbering.
    pub port: u32,
    /// The queue.
    pub queue: u32,
    /// The guaranteed rate, if any.
    pub min_rate: Option<u16>,
    /// The most rate, if any (OpenFlow 1.2 on).
    pub max_rate: Option<u16>,
}

impl QueueConfig {
    fn put(&self, version: Version, out: &mut Vec<u8>) {
        let start = out.len();
        let len_at;
        if version >= Version::Of14 {
            put32(out, port_to_ofp11(self.port));
            put32(out, self.queue);
            len_at = out.len();
            put16(out, 0);
            zeros(out, 6);
            for (kind, rate) in [
                (OFPQT_MIN_RATE, self.min_rate),
                (OFPQT_MAX_RATE, self.max_rate),
            ] {
                if let Some(r) = rate {
                    put_prop(out, kind, &[(r >> 8) as u8, r as u8, 0, 0]);
                }
            }
        } else {
            put32(out, self.queue);
            if version >= Version::Of12 {
                put32(out, port_to_ofp11(self.port));
            }
            len_at = out.len();
            put16(out, 0);
            zeros(out, if version >= Version::Of12 { 6 } else { 2 });
            for (kind, rate) in [
                (OFPQT_MIN_RATE, self.min_rate),
                (OFPQT_MAX_RATE, self.max_rate),
            ] {
                if let Some(r) = rate {
                    put16(out, kind);
                    put16(out, 16);
                    zeros(out, 4);
                    put16(out, r);
                    zeros(out, 6);
                }
            }
        }
        let len = (out.len() - start) as u16;
        out[len_at..len_at + 2].copy_from_slice(&len.to_be_bytes());
    }

    /// A queue of `len` bytes whose `head`-byte header was read: the length checked as OVS
    /// checks it (`OFPBRC_BAD_LEN`), the queue without rates, and its properties' bytes.
    fn start<'a>(
        r: &mut Reader<'a>,
        port: u32,
        queue: u32,
        len: usize,
        head: usize,
    ) -> Result<(QueueConfig, &'a [u8]), OfpErr> {
        if len < head || len - head > r.rest().len() || !len.is_multiple_of(8) {
            return Err(OfpErr::OfpbrcBadLen);
        }
        let q = QueueConfig {
            port,
            queue,
            min_rate: None,
            max_rate: None,
        };
        Ok((q, r.take(len - head)?))
    }

    /// Reads one queue of a 1.0-1.3 reply whose header named `port`.
    fn pull10(version: Version, port: u32, r: &mut Reader<'_>) -> Result<QueueConfig, OfpErr> {
        let (queue, len, head) = if version < Version::Of12 {
            let queue = r.u32()?;
            let len = r.u16()?;
            r.skip(2)?;
            (queue, usize::from(len), 8)
        } else {
            let queue = r.u32()?;
            r.skip(4)?;
            let len = r.u16()?;
            r.skip(6)?;
            (queue, usize::from(len), 16)
        };
        let (mut q, props) = QueueConfig::start(r, port, queue, len, head)?;
        let mut props = Reader::new(props);
        while !props.is_empty() {
            let rest = props.rest();
            if rest.len() < 8 {
                return Err(OfpErr::OfpbrcBadLen);
            }
            let kind = u16::from_be_bytes([rest[0], rest[1]]);
            let plen = usize::from(u16::from_be_bytes([rest[2], rest[3]]));
            if plen < 8 || plen > rest.len() || !plen.is_multiple_of(8) {
                return Err(OfpErr::OfpbrcBadLen);
            }
            let mut p = Reader::new(props.take(plen)?);
            p.skip(8)?;
            let rate = if matches!(kind, OFPQT_MIN_RATE | OFPQT_MAX_RATE) {
                if plen != 16 {
                    return Err(OfpErr::OfpbrcBadLen);
                }
                Some(p.u16()?)
            } else {
                None
            };
            match kind {
                OFPQT_MIN_RATE => q.min_rate = rate,
                OFPQT_MAX_RATE => q.max_rate = rate,
                _ => {}
            }
        }
        Ok(q)
    }

    /// Reads one queue description (1.4 on).
    fn pull14(r: &mut Reader<'_>) -> Result<QueueConfig, OfpErr> {
        let port = port_from_ofp11(r.u32()?)?;
        let queue = r.u32()?;
        let len = usize::from(r.u16()?);
        r.skip(6)?;
        let (mut q, props) = QueueConfig::start(r, port, queue, len, 16)?;
        for p in super::props(props) {
            let p = p?;
            let rate = || -> Result<u16, OfpErr> {
                let b = p.payload.get(..2).ok_or(OfpErr::OfpbpcBadLen)?;
                Ok(u16::from_be_bytes([b[0], b[1]]))
            };
            match (p.kind, p.experimenter) {
                (OFPQT_MIN_RATE, None) => q.min_rate = Some(rate()?),
                (OFPQT_MAX_RATE, None) => q.max_rate = Some(rate()?),
                _ => super::unknown_prop(&p, true)?,
            }
        }
        Ok(q)
    }
}

/// The reply to the queue-config request `request` listing `queues` (OVS answers a port
/// without queues with none): one message before 1.4, statistics replies from 1.4.
pub fn encode_reply(
    request: &Message<'_>,
    queues: &[QueueConfig],
) -> Result<Vec<Vec<u8>>, EncodeError> {
    let req = QueueConfigRequest::decode(request).map_err(|_| NotInVersion {
        msg_type: request.msg_type,
        version: Version::from_wire(request.version).unwrap_or(Version::Of10),
    })?;
    if request.msg_type == MsgType::Ofpst14QueueDescRequest {
        return super::stats_replies(request, queues, QueueConfig::put);
    }
    let version = Version::from_wire(request.version).unwrap_or(Version::Of10);
    let t = if version == Version::Of10 {
        MsgType::Ofpt10QueueGetConfigReply
    } else {
        MsgType::Ofpt11QueueGetConfigReply
    };
    let mut out = Vec::new();
    let at = start(t, version, request.xid, &mut out);
    put_port(version, req.port, 8, &mut out);
    for q in queues {
        q.put(version, &mut out);
    }
    finish(&mut out, at)?;
    Ok(vec![out])
}

/// The queues of one reply (OVS's `ofputil_pull_queue_get_config_reply`).
pub fn decode_reply(msg: &Message<'_>) -> Result<Vec<QueueConfig>, OfpErr> {
    let version = super::version_of(msg)?;
    let mut r = Reader::new(msg.body);
    let mut v = Vec::new();
    match msg.msg_type {
        MsgType::Ofpt10QueueGetConfigReply | MsgType::Ofpt11QueueGetConfigReply => {
            let port = pull_port(version, &mut r, 8)?;
            while !r.is_empty() {
                v.push(QueueConfig::pull10(version, port, &mut r)?);
            }
        }
        MsgType::Ofpst14QueueDescReply => {
            while !r.is_empty() {
                v.push(QueueConfig::pull14(&mut r)?);
            }
        }
        _ => return Err(OfpErr::OfpbrcBadType),
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{hex, msg, ofctl, ovs_reply};
    use super::*;
    use crate::msgtype;
    use proptest::prelude::*;

    /// What ovs-ofctl queue-get-config sends, and what a running ovs-vswitchd answers for a
    /// port with only its default queue: queue 0, no rates.
    #[test]
    fn as_ovs_ofctl_and_ovs_vswitchd_send_them() {
        for (label, want) in [
            (
                "queue-get-config-of10",
                QueueConfigRequest {
                    port: 1,
                    queue: OFPQ_ALL,
                },
            ),
            (
                "queue-get-config-of13",
                QueueConfigRequest {
                    port: 1,
                    queue: OFPQ_ALL,
                },
            ),
            (
                "queue-get-config-of14",
                QueueConfigRequest { port: 1, queue: 2 },
            ),
        ] {
            let m = &ofctl(label)[0];
            let d = msg(m);
            assert_eq!(QueueConfigRequest::decode(&d).unwrap(), want, "{label}");
            let mut out = Vec::new();
            want.encode(Version::from_wire(d.version).unwrap(), d.xid, &mut out);
            assert_eq!(&out, m, "{label}");
        }
        for label in [
            "queue-get-config-of10",
            "queue-get-config-of13",
            "queue-desc-of14",
        ] {
            let (req, replies) = ovs_reply(label);
            let q = decode_reply(&msg(&replies[0])).unwrap();
            let default = QueueConfig {
                port: 1,
                queue: 0,
                min_rate: None,
                max_rate: None,
            };
            assert_eq!(q, [default], "{label}");
            let out = encode_reply(&msg(&req), &q).unwrap();
            assert_eq!(hex(&out[0]), hex(&replies[0]), "{label}");
        }
    }

    #[test]
    fn requests_refuse_reserved_ports() {
        // (version, port, queue, what OVS reads)
        let cases = [
            (Version::Of10, 1, OFPQ_ALL, Ok(1)),
            (
                Version::Of10,
                OFPP_ANY,
                OFPQ_ALL,
                Err(OfpErr::OfpqofcBadPort),
            ),
            (Version::Of13, OFPP_ANY, OFPQ_ALL, Ok(OFPP_ANY)),
            (Version::Of12, 0xfffe, OFPQ_ALL, Err(OfpErr::OfpqofcBadPort)),
            (Version::Of15, 2, 5, Ok(2)),
        ];
        for (v, port, queue, want) in cases {
            let mut m = Vec::new();
            QueueConfigRequest { port, queue }.encode(v, 1, &mut m);
            let got = QueueConfigRequest::decode(&msg(&m));
            assert_eq!(got.map(|r| r.port), want, "{v} {port:#x}");
            if let Ok(r) = got {
                assert_eq!(r.queue, queue);
            }
        }
    }

    proptest! {
        #[test]
        fn replies_round_trip(
            v in 1u8..=6,
            queues in proptest::collection::vec((any::<u32>(), any::<Option<u16>>(), any::<Option<u16>>()), 0..5),
        ) {
            let v = Version::from_wire(v).unwrap();
            let mut req = Vec::new();
            QueueConfigRequest { port: 3, queue: OFPQ_ALL }.encode(v, 1, &mut req);
            let queues: Vec<_> = queues
                .into_iter()
                .map(|(queue, min_rate, max_rate)| QueueConfig { port: 3, queue, min_rate, max_rate })
                .collect();
            let m = encode_reply(&msg(&req), &queues).unwrap();
            prop_assert_eq!(decode_reply(&msg(&m[0])).unwrap(), queues);
        }

        #[test]
        fn random_bodies_never_panic(v in 1u8..=6, body in proptest::collection::vec(any::<u8>(), 0..120)) {
            let v = Version::from_wire(v).unwrap();
            for t in [MsgType::Ofpt10QueueGetConfigReply, MsgType::Ofpt11QueueGetConfigReply, MsgType::Ofpst14QueueDescReply] {
                let mut m = Vec::new();
                if t.encode(v, 0, &body, &mut m).is_ok() && let Ok(d) = msgtype::decode(&m) {
                    let _ = decode_reply(&d);
                }
            }
        }
    }
}
