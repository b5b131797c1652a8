//! Statistics about the switch, its tables, ports and queues: `OFPST_DESC`, `OFPST_TABLE`,
//! `OFPST_PORT` and `OFPST_QUEUE` requests and replies in each version's structures, as OVS's
//! `lib/ofp-port.c`, `ofp-table.c` and `ofp-queue.c` read and write them.
//!
//! Replies go through [`crate::msgtype::multipart::Replies`], so a long one is split
//! between entries. OpenFlow 1.4's port statistics carry their Ethernet error counters and
//! OVS's RFC 2819 size-bucket counters (Intel's experimenter property) as properties; a counter
//! a port does not have is `u64::MAX`, as OVS reports it.

use super::{
    Reader, finish, get_name, props, put_name, put_prop, put16, put32, put64, start, stats_replies,
    unknown_prop, version_of, zeros,
};
use crate::error::OfpErr;
use crate::header::Version;
use crate::msgs::port::{OFPP_ANY, port_from_ofp11, port_to_ofp11, pull_port, put_port};
use crate::msgtype::{EncodeError, Message, MsgType};

/// Appends a statistics request with no body, of form `t`.
fn encode_empty(t: MsgType, version: Version, xid: u32, out: &mut Vec<u8>) {
    let at = start(t, version, xid, out);
    let _ = finish(out, at);
}

/// `OFPST_DESC` reply: what the switch is (`struct ofp_desc_stats`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DescStats {
    /// Manufacturer (at most 255 bytes on the wire).
    pub mfr_desc: String,
    /// Hardware.
    pub hw_desc: String,
    /// Software.
    pub sw_desc: String,
    /// Serial number (at most 31 bytes).
    pub serial_num: String,
    /// The datapath, as a human reads it.
    pub dp_desc: String,
}

/// Appends an `OFPST_DESC` request.
pub fn encode_desc_request(version: Version, xid: u32, out: &mut Vec<u8>) {
    encode_empty(MsgType::OfpstDescRequest, version, xid, out);
}

impl DescStats {
    /// The reply to the description request `request`.
    pub fn encode_reply(&self, request: &Message<'_>) -> Result<Vec<u8>, EncodeError> {
        let mut v = stats_replies(request, std::slice::from_ref(self), |d, _, b| {
            put_name(b, &d.mfr_desc, 256);
            put_name(b, &d.hw_desc, 256);
            put_name(b, &d.sw_desc, 256);
            put_name(b, &d.serial_num, 32);
            put_name(b, &d.dp_desc, 256);
        })?;
        Ok(v.remove(0))
    }

    /// Reads a description reply.
    pub fn decode(msg: &Message<'_>) -> Result<Self, OfpErr> {
        super::expect(msg, &[MsgType::OfpstDescReply])?;
        let mut r = Reader::new(msg.body);
        Ok(DescStats {
            mfr_desc: get_name(r.take(256)?),
            hw_desc: get_name(r.take(256)?),
            sw_desc: get_name(r.take(256)?),
            serial_num: get_name(r.take(32)?),
            dp_desc: get_name(r.take(256)?),
        })
    }
}

/// One table's statistics, with the descriptive fields OpenFlow 1.0 to 1.2 also carry (what
/// a version lacks is 0 when read).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableStats {
    /// The table.
    pub table_id: u8,
    /// Its name (1.0-1.2; at most 31 bytes).
    pub name: String,
    /// Flows in the table.
    pub active_count: u32,
    /// Packets looked up in the table.
    pub lookup_count: u64,
    /// Packets that matched a flow.
    pub matched_count: u64,
    /// The most flows the table takes (1.0-1.2).
    pub max_entries: u32,
    /// Wildcardable fields: OpenFlow 1.0's `OFPFW10_*`, 1.1's `OFPFW11_*`, 1.2's OXM bitmap.
    pub wildcards: u64,
    /// Matchable fields: 1.1's `OFPFMF11_*`, 1.2's OXM bitmap.
    pub match_fields: u64,
    /// Instructions (1.1, 1.2: `1 << OFPIT_*`).
    pub instructions: u32,
    /// Actions in write-actions (1.1, 1.2).
    pub write_actions: u32,
    /// Actions in apply-actions (1.1, 1.2).
    pub apply_actions: u32,
    /// Fields set-field may write in write-actions (1.2, OXM bitmap).
    pub write_setfields: u64,
    /// Fields set-field may write in apply-actions (1.2).
    pub apply_setfields: u64,
    /// Metadata bits the table can match (1.2).
    pub metadata_match: u64,
    /// Metadata bits the table can write (1.2).
    pub metadata_write: u64,
    /// The table's config (1.1, 1.2).
    pub config: u32,
}

/// Appends an `OFPST_TABLE` request.
pub fn encode_table_stats_request(version: Version, xid: u32, out: &mut Vec<u8>) {
    encode_empty(MsgType::OfpstTableRequest, version, xid, out);
}

impl TableStats {
    fn put(&self, version: Version, b: &mut Vec<u8>) {
        b.push(self.table_id);
        match version {
            Version::Of10 => {
                zeros(b, 3);
                put_name(b, &self.name, 32);
                put32(b, self.wildcards as u32);
                put32(b, self.max_entries);
            }
            Version::Of11 => {
                zeros(b, 7);
                put_name(b, &self.name, 32);
                put32(b, self.wildcards as u32);
                put32(b, self.match_fields as u32);
                put32(b, self.instructions);
                put32(b, self.write_actions);
                put32(b, self.apply_actions);
                put32(b, self.config);
                put32(b, self.max_entries);
            }
            Version::Of12 => {
                zeros(b, 7);
                put_name(b, &self.name, 32);
                put64(b, self.match_fields);
                put64(b, self.wildcards);
                put32(b, self.write_actions);
                put32(b, self.apply_actions);
                put64(b, self.write_setfields);
                put64(b, self.apply_setfields);
                put64(b, self.metadata_match);
                put64(b, self.metadata_write);
                put32(b, self.instructions);
                put32(b, self.config);
                put32(b, self.max_entries);
            }
            _ => zeros(b, 3),
        }
        put32(b, self.active_count);
        put64(b, self.lookup_count);
        put64(b, self.matched_count);
    }

    fn pull(version: Version, r: &mut Reader<'_>) -> Result<TableStats, OfpErr> {
        let mut t = TableStats {
            table_id: r.u8()?,
            ..TableStats::default()
        };
        match version {
            Version::Of10 => {
                r.skip(3)?;
                t.name = get_name(r.take(32)?);
                t.wildcards = u64::from(r.u32()?);
                t.max_entries = r.u32()?;
            }
            Version::Of11 => {
                r.skip(7)?;
                t.name = get_name(r.take(32)?);
                t.wildcards = u64::from(r.u32()?);
                t.match_fields = u64::from(r.u32()?);
                t.instructions = r.u32()?;
                t.write_actions = r.u32()?;
                t.apply_actions = r.u32()?;
                t.config = r.u32()?;
                t.max_entries = r.u32()?;
            }
            Version::Of12 => {
                r.skip(7)?;
                t.name = get_name(r.take(32)?);
                t.match_fields = r.u64()?;
                t.wildcards = r.u64()?;
                t.write_actions = r.u32()?;
                t.apply_actions = r.u32()?;
                t.write_setfields = r.u64()?;
                t.apply_setfields = r.u64()?;
                t.metadata_match = r.u64()?;
                t.metadata_write = r.u64()?;
                t.instructions = r.u32()?;
                t.config = r.u32()?;
                t.max_entries = r.u32()?;
            }
            _ => r.skip(3)?,
        }
        t.active_count = r.u32()?;
        t.lookup_count = r.u64()?;
        t.matched_count = r.u64()?;
        Ok(t)
    }
}

/// The replies to the table statistics request `request`.
pub fn encode_table_stats_reply(
    request: &Message<'_>,
    tables: &[TableStats],
) -> Result<Vec<Vec<u8>>, EncodeError> {
    stats_replies(request, tables, TableStats::put)
}

/// The tables of one table statistics reply message.
pub fn decode_table_stats_reply(msg: &Message<'_>) -> Result<Vec<TableStats>, OfpErr> {
    super::expect(
        msg,
        &[
            MsgType::Ofpst10TableReply,
            MsgType::Ofpst11TableReply,
            MsgType::Ofpst12TableReply,
            MsgType::Ofpst13TableReply,
        ],
    )?;
    let version = version_of(msg)?;
    let mut r = Reader::new(msg.body);
    let mut v = Vec::new();
    while !r.is_empty() {
        v.push(TableStats::pull(version, &mut r)?);
    }
    Ok(v)
}

/// `OFPST_PORT` request: the port asked about, or [`OFPP_ANY`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortStatsRequest {
    /// The port, in OpenFlow 1.0's numbering.
    pub port_no: u32,
}

impl PortStatsRequest {
    /// Appends the request in `version`.
    pub fn encode(&self, version: Version, xid: u32, out: &mut Vec<u8>) {
        let t = if version == Version::Of10 {
            MsgType::Ofpst10PortRequest
        } else {
            MsgType::Ofpst11PortRequest
        };
        let at = start(t, version, xid, out);
        put_port(version, self.port_no, 8, out);
        let _ = finish(out, at);
    }

    /// Reads a port statistics request.
    pub fn decode(msg: &Message<'_>) -> Result<Self, OfpErr> {
        super::expect(
            msg,
            &[MsgType::Ofpst10PortRequest, MsgType::Ofpst11PortRequest],
        )?;
        let port_no = pull_port(version_of(msg)?, &mut Reader::new(msg.body), 8)?;
        Ok(PortStatsRequest { port_no })
    }
}

/// `OFPPSPT14_ETHERNET`: the Ethernet counters of OpenFlow 1.4 port statistics.
const OFPPSPT14_ETHERNET: u16 = 0;
/// Intel's experimenter id, whose properties OVS uses for more port counters.
const INTEL_VENDOR_ID: u32 = 0x0000_aa01;
/// `INTEL_PORT_STATS_RFC2819`: the RFC 2819 counters by packet size.
const INTEL_PORT_STATS_RFC2819: u32 = 1;
/// `OFPPROP_EXP`'s property type.
const OFPPROP_EXPERIMENTER: u16 = 0xffff;
/// The length of `struct ofp14_port_stats` before its properties.
const OFP14_PORT_STATS_LEN: usize = 80;

/// One port's counters (OVS's `struct ofputil_port_stats`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortStats {
    /// The port, in OpenFlow 1.0's numbering.
    pub port_no: u32,
    /// Packets received.
    pub rx_packets: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Received packets dropped.
    pub rx_dropped: u64,
    /// Packets to send dropped.
    pub tx_dropped: u64,
    /// Receive errors.
    pub rx_errors: u64,
    /// Send errors.
    pub tx_errors: u64,
    /// Frame alignment errors.
    pub rx_frame_err: u64,
    /// Overruns.
    pub rx_over_err: u64,
    /// CRC errors.
    pub rx_crc_err: u64,
    /// Collisions.
    pub collisions: u64,
    /// Seconds the port has existed (OpenFlow 1.3 on; `u32::MAX` when unknown).
    pub duration_sec: u32,
    /// And nanoseconds beyond them.
    pub duration_nsec: u32,
    /// OVS's RFC 2819 counters (OpenFlow 1.4 on), in the order of Intel's property: received
    /// packets of 1-64, 65-127, 128-255, 256-511, 512-1023, 1024-1522 and 1523+ bytes; the
    /// same sent; multicast sent, broadcast received and sent; undersized, oversize,
    /// fragmented and jabber errors.
    pub rfc2819: [u64; 21],
}

impl Default for PortStats {
    /// Every counter unknown.
    fn default() -> Self {
        PortStats {
            port_no: 0,
            rx_packets: u64::MAX,
            tx_packets: u64::MAX,
            rx_bytes: u64::MAX,
            tx_bytes: u64::MAX,
            rx_dropped: u64::MAX,
            tx_dropped: u64::MAX,
            rx_errors: u64::MAX,
            tx_errors: u64::MAX,
            rx_frame_err: u64::MAX,
            rx_over_err: u64::MAX,
            rx_crc_err: u64::MAX,
            collisions: u64::MAX,
            duration_sec: u32::MAX,
            duration_nsec: u32::MAX,
            rfc2819: [u64::MAX; 21],
        }
    }
}

impl PortStats {
    fn main_counters(&self) -> [u64; 8] {
        [
            self.rx_packets,
            self.tx_packets,
            self.rx_bytes,
            self.tx_bytes,
            self.rx_dropped,
            self.tx_dropped,
            self.rx_errors,
            self.tx_errors,
        ]
    }

    fn set_main_counters(&mut self, r: &mut Reader<'_>) -> Result<(), OfpErr> {
        for c in [
            &mut self.rx_packets,
            &mut self.tx_packets,
            &mut self.rx_bytes,
            &mut self.tx_bytes,
            &mut self.rx_dropped,
            &mut self.tx_dropped,
            &mut self.rx_errors,
            &mut self.tx_errors,
        ] {
            *c = r.u64()?;
        }
        Ok(())
    }

    fn set_ethernet_counters(&mut self, r: &mut Reader<'_>) -> Result<(), OfpErr> {
        self.rx_frame_err = r.u64()?;
        self.rx_over_err = r.u64()?;
        self.rx_crc_err = r.u64()?;
        self.collisions = r.u64()?;
        Ok(())
    }

    fn put(&self, version: Version, b: &mut Vec<u8>) {
        let ethernet = [
            self.rx_frame_err,
            self.rx_over_err,
            self.rx_crc_err,
            self.collisions,
        ];
        if version >= Version::Of14 {
            let start = b.len();
            put16(b, 0);
            zeros(b, 2);
            put32(b, port_to_ofp11(self.port_no));
            put32(b, self.duration_sec);
            put32(b, self.duration_nsec);
            self.main_counters().iter().for_each(|&c| put64(b, c));
            let mut eth = Vec::with_capacity(36);
            zeros(&mut eth, 4);
            ethernet.iter().for_each(|&c| put64(&mut eth, c));
            put_prop(b, OFPPSPT14_ETHERNET, &eth);
            let mut rfc = Vec::with_capacity(180);
            put32(&mut rfc, INTEL_VENDOR_ID);
            put32(&mut rfc, INTEL_PORT_STATS_RFC2819);
            zeros(&mut rfc, 4);
            self.rfc2819.iter().for_each(|&c| put64(&mut rfc, c));
            put_prop(b, OFPPROP_EXPERIMENTER, &rfc);
            let len = (b.len() - start) as u16;
            b[start..start + 2].copy_from_slice(&len.to_be_bytes());
            return;
        }
        put_port(version, self.port_no, 8, b);
        self.main_counters().iter().for_each(|&c| put64(b, c));
        ethernet.iter().for_each(|&c| put64(b, c));
        if version == Version::Of13 {
            put32(b, self.duration_sec);
            put32(b, self.duration_nsec);
        }
    }

    fn pull(version: Version, r: &mut Reader<'_>) -> Result<PortStats, OfpErr> {
        let mut s = PortStats::default();
        if version >= Version::Of14 {
            let mut h = Reader::new(r.take(OFP14_PORT_STATS_LEN)?);
            let len = usize::from(h.u16()?);
            if len < OFP14_PORT_STATS_LEN || len - OFP14_PORT_STATS_LEN > r.rest().len() {
                return Err(OfpErr::OfpbrcBadLen);
            }
            h.skip(2)?;
            s.port_no = port_from_ofp11(h.u32()?)?;
            s.duration_sec = h.u32()?;
            s.duration_nsec = h.u32()?;
            s.set_main_counters(&mut h)?;
            for p in props(r.take(len - OFP14_PORT_STATS_LEN)?) {
                let p = p?;
                match (p.kind, p.experimenter) {
                    (OFPPSPT14_ETHERNET, None) => {
                        if p.payload.len() != 36 {
                            return Err(OfpErr::OfpbpcBadLen);
                        }
                        s.set_ethernet_counters(&mut Reader::new(&p.payload[4..]))?;
                    }
                    (_, Some((INTEL_VENDOR_ID, INTEL_PORT_STATS_RFC2819))) => {
                        if p.payload.len() != 172 {
                            return Err(OfpErr::OfpbpcBadLen);
                        }
                        let mut c = Reader::new(&p.payload[4..]);
                        for v in &mut s.rfc2819 {
                            *v = c.u64()?;
                        }
                    }
                    _ => unknown_prop(&p, true)?,
                }
            }
            return Ok(s);
        }
        let size = if version == Version::Of13 { 112 } else { 104 };
        let mut e = Reader::new(r.take(size)?);
        s.port_no = pull_port(version, &mut e, 8)?;
        s.set_main_counters(&mut e)?;
        s.set_ethernet_counters(&mut e)?;
        if version == Version::Of13 {
            s.duration_sec = e.u32()?;
            s.duration_nsec = e.u32()?;
        }
        Ok(s)
    }
}

/// The replies to the port statistics request `request`.
pub fn encode_port_stats_reply(
    request: &Message<'_>,
    ports: &[PortStats],
) -> Result<Vec<Vec<u8>>, EncodeError> {
    stats_replies(request, ports, PortStats::put)
}

/// The ports of one port statistics reply message.
pub fn decode_port_stats_reply(msg: &Message<'_>) -> Result<Vec<PortStats>, OfpErr> {
    super::expect(
        msg,
        &[
            MsgType::Ofpst10PortReply,
            MsgType::Ofpst11PortReply,
            MsgType::Ofpst13PortReply,
            MsgType::Ofpst14PortReply,
        ],
    )?;
    let version = version_of(msg)?;
    let mut r = Reader::new(msg.body);
    let mut v = Vec::new();
    while !r.is_empty() {
        v.push(PortStats::pull(version, &mut r)?);
    }
    Ok(v)
}

/// `OFPQ_ALL`: every queue.
pub const OFPQ_ALL: u32 = 0xffff_ffff;

/// `OFPST_QUEUE` request: a port's queue, or every one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueStatsRequest {
    /// The port ([`OFPP_ANY`] for all), in OpenFlow 1.0's numbering.
    pub port_no: u32,
    /// The queue, or [`OFPQ_ALL`].
    pub queue_id: u32,
}

impl Default for QueueStatsRequest {
    fn default() -> Self {
        QueueStatsRequest {
            port_no: OFPP_ANY,
            queue_id: OFPQ_ALL,
        }
    }
}

/// OpenFlow 1.0's `OFPP_ALL`, which a 1.0 queue request uses for every port.
const OFPP_ALL: u32 = 0xfffc;

impl QueueStatsRequest {
    /// Appends the request in `version` (OpenFlow 1.0 says every port with `OFPP_ALL`).
    pub fn encode(&self, version: Version, xid: u32, out: &mut Vec<u8>) {
        if version == Version::Of10 {
            let at = start(MsgType::Ofpst10QueueRequest, version, xid, out);
            let port = if self.port_no == OFPP_ANY {
                OFPP_ALL
            } else {
                self.port_no
            };
            put16(out, port as u16);
            zeros(out, 2);
            put32(out, self.queue_id);
            let _ = finish(out, at);
        } else {
            let at = start(MsgType::Ofpst11QueueRequest, version, xid, out);
            put32(out, port_to_ofp11(self.port_no));
            put32(out, self.queue_id);
            let _ = finish(out, at);
        }
    }

    /// Reads a queue statistics request (OpenFlow 1.0's `OFPP_ALL` is any port).
    pub fn decode(msg: &Message<'_>) -> Result<Self, OfpErr> {
        let mut r = Reader::new(msg.body);
        match msg.msg_type {
            MsgType::Ofpst10QueueRequest => {
                let port = u32::from(r.u16()?);
                r.skip(2)?;
                Ok(QueueStatsRequest {
                    port_no: if port == OFPP_ALL { OFPP_ANY } else { port },
                    queue_id: r.u32()?,
                })
            }
            MsgType::Ofpst11QueueRequest => Ok(QueueStatsRequest {
                port_no: port_from_ofp11(r.u32()?)?,
                queue_id: r.u32()?,
            }),
            _ => Err(OfpErr::OfpbrcBadType),
        }
    }
}

/// One queue's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueStats {
    /// The port, in OpenFlow 1.0's numbering.
    pub port_no: u32,
    /// The queue.
    pub queue_id: u32,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Packets dropped on overrun.
    pub tx_errors: u64,
    /// Seconds the queue has existed (1.3 on; `u32::MAX` when unknown).
    pub duration_sec: u32,
    /// And nanoseconds beyond.
    pub duration_nsec: u32,
}

impl QueueStats {
    fn put(&self, version: Version, b: &mut Vec<u8>) {
        if version >= Version::Of14 {
            put16(b, 48);
            zeros(b, 6);
        }
        put_port(version, self.port_no, 4, b);
        put32(b, self.queue_id);
        put64(b, self.tx_bytes);
        put64(b, self.tx_packets);
        put64(b, self.tx_errors);
        if version >= Version::Of13 {
            put32(b, self.duration_sec);
            put32(b, self.duration_nsec);
        }
    }

    fn pull(version: Version, r: &mut Reader<'_>) -> Result<QueueStats, OfpErr> {
        let mut e = if version >= Version::Of14 {
            let mut h = *r;
            let len = usize::from(h.u16()?);
            if len < 48 {
                return Err(OfpErr::OfpbrcBadLen);
            }
            let mut e = Reader::new(r.take(len)?);
            e.skip(8)?;
            e
        } else {
            Reader::new(r.take(if version == Version::Of13 { 40 } else { 32 })?)
        };
        let port_no = pull_port(version, &mut e, 4)?;
        let mut q = QueueStats {
            port_no,
            queue_id: e.u32()?,
            tx_bytes: e.u64()?,
            tx_packets: e.u64()?,
            tx_errors: e.u64()?,
            duration_sec: u32::MAX,
            duration_nsec: u32::MAX,
        };
        if version >= Version::Of13 {
            q.duration_sec = e.u32()?;
            q.duration_nsec = e.u32()?;
        }
        Ok(q)
    }
}

/// The replies to the queue statistics request `request` (a switch without queues sends an
/// empty one).
pub fn encode_queue_stats_reply(
    request: &Message<'_>,
    queues: &[QueueStats],
) -> Result<Vec<Vec<u8>>, EncodeError> {
    stats_replies(request, queues, QueueStats::put)
}

/// The queues of one queue statistics reply message.
pub fn decode_queue_stats_reply(msg: &Message<'_>) -> Result<Vec<QueueStats>, OfpErr> {
    super::expect(
        msg,
        &[
            MsgType::Ofpst10QueueReply,
            MsgType::Ofpst11QueueReply,
            MsgType::Ofpst13QueueReply,
            MsgType::Ofpst14QueueReply,
        ],
    )?;
    let version = version_of(msg)?;
    let mut r = Reader::new(msg.body);
    let mut v = Vec::new();
    while !r.is_empty() {
        v.push(QueueStats::pull(version, &mut r)?);
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{hex, msg, ofctl, unhex};
    use super::*;
    use crate::msgtype;
    use proptest::prelude::*;

    #[test]
    fn requests_as_ovs_ofctl_sends_them() {
        for (label, port) in [
            ("dump-ports-of10", OFPP_ANY),
            ("dump-ports-of13", 2),
            ("dump-ports-of14", OFPP_ANY),
        ] {
            let m = &ofctl(label)[0];
            let d = msg(m);
            let req = PortStatsRequest::decode(&d).unwrap();
            assert_eq!(req.port_no, port, "{label}");
            let mut out = Vec::new();
            req.encode(Version::from_wire(d.version).unwrap(), d.xid, &mut out);
            assert_eq!(&out, m, "{label}");
        }
        for (label, req) in [
            ("queue-stats-of10", QueueStatsRequest::default()),
            (
                "queue-stats-of13",
                QueueStatsRequest {
                    port_no: 1,
                    queue_id: 2,
                },
            ),
        ] {
            let m = &ofctl(label)[0];
            let d = msg(m);
            assert_eq!(QueueStatsRequest::decode(&d).unwrap(), req, "{label}");
            let mut out = Vec::new();
            req.encode(Version::from_wire(d.version).unwrap(), d.xid, &mut out);
            assert_eq!(&out, m, "{label}");
        }
        let mut out = Vec::new();
        encode_table_stats_request(Version::Of13, 2, &mut out);
        assert_eq!(out, ofctl("dump-tables-of13")[0]);
        out.clear();
        encode_desc_request(Version::Of15, 2, &mut out);
        assert_eq!(out, ofctl("dump-desc-of15")[0]);
    }

    /// What a running ovs-vswitchd answers for its description, 254 tables and queues.
    #[test]
    fn stats_as_ovs_vswitchd_answers() {
        use super::super::testutil::ovs_reply;
        let (req, replies) = ovs_reply("desc-of13");
        let d = DescStats::decode(&msg(&replies[0])).unwrap();
        assert_eq!(
            (d.mfr_desc.as_str(), d.hw_desc.as_str()),
            ("Nicira, Inc.", "Open vSwitch")
        );
        assert_eq!(hex(&d.encode_reply(&msg(&req)).unwrap()), hex(&replies[0]));
        for label in ["table-stats-of10", "table-stats-of13"] {
            let (req, replies) = ovs_reply(label);
            let t: Vec<_> = replies
                .iter()
                .flat_map(|m| decode_table_stats_reply(&msg(m)).unwrap())
                .collect();
            assert_eq!(t.len(), 254, "{label}");
            assert_eq!(t[0].active_count, 1);
            let out = encode_table_stats_reply(&msg(&req), &t).unwrap();
            assert_eq!(out.len(), replies.len());
            for (a, b) in out.iter().zip(&replies) {
                assert_eq!(hex(a), hex(b), "{label}");
            }
        }
        let (req, replies) = ovs_reply("queue-stats-of13");
        let q = decode_queue_stats_reply(&msg(&replies[0])).unwrap();
        assert_eq!(q.len(), 2);
        assert_eq!(
            (q[0].port_no, q[0].tx_bytes, q[0].duration_sec),
            (1, u64::MAX, u32::MAX)
        );
        assert_eq!(
            QueueStatsRequest::decode(&msg(&req)).unwrap(),
            QueueStatsRequest::default()
        );
        let out = encode_queue_stats_reply(&msg(&req), &q).unwrap();
        assert_eq!(hex(&out[0]), hex(&replies[0]));
    }

    /// `OFPST_TABLE reply - OF1.0` of OVS's tests/ofp-print.at.
    #[test]
    fn table_stats_of10_as_ovs_prints_it() {
        let m = unhex(
            "0111004c00000001 0003000000000000 636c617373696669 6572000000000000 \
             0000000000000000 0000000000000000 003fffff00100000 0000000b00000000 \
             0000000000000000 00000000",
        );
        let t = decode_table_stats_reply(&msg(&m)).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].name, "classifier");
        assert_eq!((t[0].active_count, t[0].max_entries), (11, 1_048_576));
        assert_eq!(t[0].wildcards, 0x3fffff);
        let mut req = Vec::new();
        encode_table_stats_request(Version::Of10, 1, &mut req);
        let back = encode_table_stats_reply(&msg(&req), &t).unwrap();
        assert_eq!(hex(&back[0]), hex(&m));
    }

    /// `OFPST_PORT reply - OF1.4` of OVS's tests/ofp-print.at: read, then written back as
    /// OVS writes it, with the RFC 2819 property OVS always adds (all unknown here).
    #[test]
    fn port_stats_of14_as_ovs_prints_it() {
        let m = unhex(
            "0513008800000002 0004000000000000 0078000000000002 00000001000f4240 \
             0000000000019556 0000000000000088 00000000025d0898 0000000000002cf8 \
             0000000000000000 0000000000000000 0000000000000000 0000000000000000 \
             0000002800000000 00000000000000fc 00000000000000fd 00000000000000fe \
             00000000000000ff",
        );
        let p = decode_port_stats_reply(&msg(&m)).unwrap();
        assert_eq!(p.len(), 1);
        let p = &p[0];
        assert_eq!(
            (p.port_no, p.duration_sec, p.duration_nsec),
            (2, 1, 1_000_000)
        );
        assert_eq!(
            (p.rx_packets, p.rx_bytes, p.tx_packets),
            (103766, 39651480, 136)
        );
        assert_eq!((p.rx_frame_err, p.collisions), (252, 255));
        assert_eq!(p.rfc2819, [u64::MAX; 21]);
        let mut req = Vec::new();
        PortStatsRequest { port_no: OFPP_ANY }.encode(Version::Of14, 2, &mut req);
        let back = encode_port_stats_reply(&msg(&req), std::slice::from_ref(p)).unwrap();
        let mut want = m.clone();
        want[2..4].copy_from_slice(&(0x88u16 + 184).to_be_bytes());
        want[16..18].copy_from_slice(&(0x78u16 + 184).to_be_bytes());
        want.extend_from_slice(&unhex("ffff00b8 0000aa01 00000001 00000000"));
        want.extend_from_slice(&[0xff; 168]);
        assert_eq!(hex(&back[0]), hex(&want));
        assert_eq!(decode_port_stats_reply(&msg(&back[0])).unwrap()[0], *p);
    }

    #[test]
    fn desc_reply_round_trips() {
        let d = DescStats {
            mfr_desc: "Nicira, Inc.".into(),
            hw_desc: "Open vSwitch".into(),
            sw_desc: "3.1.0".into(),
            serial_num: "None".into(),
            dp_desc: "br0".into(),
        };
        let mut req = Vec::new();
        encode_desc_request(Version::Of10, 1, &mut req);
        let m = d.encode_reply(&msg(&req)).unwrap();
        assert_eq!(m.len(), 12 + 1056);
        assert_eq!(&m[..16], unhex("0111042c00000001 000000004e696369"));
        assert_eq!(DescStats::decode(&msg(&m)).unwrap(), d);
    }

    fn arb_stats() -> impl Strategy<Value = PortStats> {
        (
            0u32..0xff00,
            any::<[u64; 12]>(),
            any::<(u32, u32)>(),
            any::<[u64; 21]>(),
        )
            .prop_map(|(port_no, c, (ds, dn), rfc2819)| PortStats {
                port_no,
                rx_packets: c[0],
                tx_packets: c[1],
                rx_bytes: c[2],
                tx_bytes: c[3],
                rx_dropped: c[4],
                tx_dropped: c[5],
                rx_errors: c[6],
                tx_errors: c[7],
                rx_frame_err: c[8],
                rx_over_err: c[9],
                rx_crc_err: c[10],
                collisions: c[11],
                duration_sec: ds,
                duration_nsec: dn,
                rfc2819,
            })
    }

    proptest! {
        #[test]
        fn port_stats_round_trip(v in 1u8..=6, ports in proptest::collection::vec(arb_stats(), 0..4)) {
            let v = Version::from_wire(v).unwrap();
            let mut req = Vec::new();
            PortStatsRequest { port_no: OFPP_ANY }.encode(v, 1, &mut req);
            let msgs = encode_port_stats_reply(&msg(&req), &ports).unwrap();
            let back = decode_port_stats_reply(&msg(&msgs[0])).unwrap();
            let want: Vec<_> = ports.iter().cloned().map(|mut p| {
                if v < Version::Of13 {
                    (p.duration_sec, p.duration_nsec) = (u32::MAX, u32::MAX);
                }
                if v < Version::Of14 {
                    p.rfc2819 = [u64::MAX; 21];
                }
                p
            }).collect();
            prop_assert_eq!(back, want);
        }

        #[test]
        fn table_and_queue_stats_round_trip(v in 1u8..=6, id: u8, active: u32, lookup: u64, q: (u32, u64, u64)) {
            let v = Version::from_wire(v).unwrap();
            let t = TableStats {
                table_id: id,
                name: if v <= Version::Of12 { "t".into() } else { String::new() },
                active_count: active,
                lookup_count: lookup,
                matched_count: lookup / 2,
                max_entries: if v <= Version::Of12 { 1_000_000 } else { 0 },
                ..TableStats::default()
            };
            let mut req = Vec::new();
            encode_table_stats_request(v, 1, &mut req);
            let m = encode_table_stats_reply(&msg(&req), std::slice::from_ref(&t)).unwrap();
            prop_assert_eq!(decode_table_stats_reply(&msg(&m[0])).unwrap(), vec![t]);

            let qs = QueueStats {
                port_no: 3,
                queue_id: q.0,
                tx_bytes: q.1,
                tx_packets: q.2,
                tx_errors: 0,
                duration_sec: if v >= Version::Of13 { 5 } else { u32::MAX },
                duration_nsec: if v >= Version::Of13 { 6 } else { u32::MAX },
            };
            let mut req = Vec::new();
            QueueStatsRequest::default().encode(v, 1, &mut req);
            let m = encode_queue_stats_reply(&msg(&req), &[qs]).unwrap();
            prop_assert_eq!(decode_queue_stats_reply(&msg(&m[0])).unwrap(), vec![qs]);
        }

        #[test]
        fn random_bodies_never_panic(v in 1u8..=6, body in proptest::collection::vec(any::<u8>(), 0..300)) {
            let v = Version::from_wire(v).unwrap();
            for t in [MsgType::Ofpst14PortReply, MsgType::Ofpst14QueueReply, MsgType::Ofpst10TableReply] {
                let mut m = Vec::new();
                if t.encode(v, 0, &body, &mut m).is_ok() && let Ok(d) = msgtype::decode(&m) {
                    let _ = decode_port_stats_reply(&d);
                    let _ = decode_queue_stats_reply(&d);
                    let _ = decode_table_stats_reply(&d);
                }
            }
        }
    }
}
