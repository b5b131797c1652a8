//! `OFPT_PACKET_OUT`, a controller's way of sending a packet through the switch, in each
//! version's layout (OVS's `ofputil_decode_packet_out()` and `ofputil_encode_packet_out()`):
//! OpenFlow 1.0's (16-bit input port), 1.1 to 1.4's (32-bit input port) and 1.5's (an OXM
//! match of the packet's metadata, which must give the input port). The actions follow, then
//! the packet, unless the message names a buffered packet (this switch buffers none).

use ofproto::pipekey::{PipeKey, PipeMask, PipeMatch};
use ofproto::syntax::OfAction;

use super::{Reader, finish, put16, put32, start, zeros};
use crate::actions::{FlowCtx, decode_actions, encode_actions};
use crate::error::OfpErr;
use crate::header::Version;
use crate::msgtype::{Message, MsgType};
use crate::nxm::{self, TlvLens};

/// `OFPP_MAX`, `OFPP_CONTROLLER`, `OFPP_LOCAL`, `OFPP_NONE` in the pipeline's port space
/// (OpenFlow 1.0's 16 bits, as OVS's `ofp_port_t`).
pub const OFPP_MAX: u32 = 0xff00;
pub const OFPP_CONTROLLER: u32 = 0xfffd;
pub const OFPP_LOCAL: u32 = 0xfffe;
pub const OFPP_NONE: u32 = 0xffff;

/// A decoded packet-out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketOut {
    /// [`super::packet_in::NO_BUFFER`], or a buffer this switch does not have.
    pub buffer_id: u32,
    /// The packet's metadata: `in_port` always; OpenFlow 1.5 may give more (registers,
    /// metadata, tunnel fields).
    pub metadata: PipeMatch,
    pub actions: Vec<OfAction>,
    /// The packet (empty when a buffer is named).
    pub packet: Vec<u8>,
}

impl PacketOut {
    /// The input port.
    pub fn in_port(&self) -> u32 {
        self.metadata.key().dp.in_port()
    }

    /// Decodes a packet-out of any version, with OVS's errors: a bad match or actions, an
    /// OpenFlow 1.5 match without `in_port` or an input port no port can have
    /// (`OFPBRC_BAD_PORT`).
    pub fn decode(msg: &Message<'_>) -> Result<PacketOut, OfpErr> {
        let version = super::version_of(msg)?;
        let mut r = Reader::new(msg.body);
        let buffer_id = r.u32()?;
        let (metadata, actions_len) = match msg.msg_type {
            MsgType::Ofpt15PacketOut => {
                let actions_len = usize::from(r.u16()?);
                r.skip(2)?;
                let (m, n) = nxm::pull_oxm_match(r.rest())?;
                r.skip(n)?;
                if m.mask().dp.in_port() == 0 {
                    return Err(OfpErr::OfpbrcBadPort);
                }
                (m, actions_len)
            }
            MsgType::Ofpt11PacketOut => {
                let port = r.u32()?;
                let actions_len = usize::from(r.u16()?);
                r.skip(6)?;
                let port = nxm::port_from_ofp11(port).ok_or(OfpErr::OfpbacBadOutPort)?;
                (port_match(u32::from(port)), actions_len)
            }
            MsgType::Ofpt10PacketOut => {
                let port = r.u16()?;
                let actions_len = usize::from(r.u16()?);
                (port_match(u32::from(port)), actions_len)
            }
            _ => return Err(OfpErr::OfpbrcBadType),
        };
        let acts = r.take(actions_len).map_err(|_| OfpErr::OfpbrcBadLen)?;
        let actions = decode_actions(version, acts)?;
        let port = metadata.key().dp.in_port();
        if port >= OFPP_MAX && port != OFPP_LOCAL && port != OFPP_NONE && port != OFPP_CONTROLLER {
            return Err(OfpErr::OfpbrcBadPort);
        }
        let packet = if buffer_id == super::packet_in::NO_BUFFER {
            r.rest().to_vec()
        } else {
            Vec::new()
        };
        Ok(PacketOut {
            buffer_id,
            metadata,
            actions,
            packet,
        })
    }

    /// Appends the packet-out for `version`, transaction id `xid`.
    pub fn encode(
        &self,
        version: Version,
        xid: u32,
        tlv: &TlvLens,
        out: &mut Vec<u8>,
    ) -> Result<(), crate::actions::EncodeError> {
        let at;
        let len_at;
        let port = self.in_port();
        match version {
            Version::Of10 => {
                at = start(MsgType::Ofpt10PacketOut, version, xid, out);
                put32(out, self.buffer_id);
                put16(out, port as u16);
                len_at = out.len();
                put16(out, 0);
            }
            Version::Of15 => {
                at = start(MsgType::Ofpt15PacketOut, version, xid, out);
                put32(out, self.buffer_id);
                len_at = out.len();
                put16(out, 0);
                zeros(out, 2);
                nxm::put_oxm_match(out, version, &self.metadata, tlv);
            }
            _ => {
                at = start(MsgType::Ofpt11PacketOut, version, xid, out);
                put32(out, self.buffer_id);
                put32(out, nxm::port_to_ofp11(port as u16) as u32);
                len_at = out.len();
                put16(out, 0);
                zeros(out, 6);
            }
        }
        let acts = out.len();
        if let Err(e) = encode_actions(version, &self.actions, FlowCtx::default(), out) {
            out.truncate(at);
            return Err(e);
        }
        let n = (out.len() - acts) as u16;
        out[len_at..len_at + 2].copy_from_slice(&n.to_be_bytes());
        out.extend_from_slice(&self.packet);
        finish(out, at).map_err(|_| crate::actions::EncodeError {
            action: "packet_out",
            version: version.number(),
        })
    }
}

/// A metadata match that gives only the input port.
pub fn port_match(port: u32) -> PipeMatch {
    let mut key = PipeKey::new();
    let mut mask = PipeMask::new();
    key.dp.set_in_port(port);
    mask.dp.set_in_port(u32::MAX);
    PipeMatch::new(&key, &mask)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msgs::testutil::unhex;
    use crate::msgtype;

    #[test]
    fn a_packet_out_round_trips_in_every_version() {
        let po = PacketOut {
            buffer_id: u32::MAX,
            metadata: port_match(OFPP_CONTROLLER),
            actions: vec![OfAction::Output {
                port: 2,
                max_len: 0,
            }],
            packet: vec![0xab; 60],
        };
        for v in Version::ALL {
            let mut out = Vec::new();
            po.encode(v, 7, &TlvLens::default(), &mut out).unwrap();
            let m = msgtype::decode(&out).unwrap();
            assert_eq!(PacketOut::decode(&m).unwrap(), po, "{v:?}");
        }
    }

    #[test]
    fn ovs_ofctl_packet_out_of_1_0_is_read() {
        // What `ovs-ofctl ofp-print` reads as `in_port=1 actions=output:2 data_len=10`.
        let b = unhex("010d002200000002ffffffff00010008000000080002000000000000000000010000");
        let m = msgtype::decode(&b).unwrap();
        let po = PacketOut::decode(&m).unwrap();
        assert_eq!(po.in_port(), 1);
        assert_eq!(po.packet, unhex("00000000000000010000"));
    }

    #[test]
    fn bad_input_ports_are_refused() {
        let po = PacketOut {
            buffer_id: u32::MAX,
            metadata: port_match(0xff01),
            actions: vec![],
            packet: vec![1; 14],
        };
        let mut out = Vec::new();
        po.encode(Version::Of13, 1, &TlvLens::default(), &mut out)
            .unwrap();
        let m = msgtype::decode(&out).unwrap();
        assert_eq!(PacketOut::decode(&m), Err(OfpErr::OfpbrcBadPort));
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let n = (seed % 96) as usize;
            let mut b: Vec<u8> = (0..n)
                .map(|i| (seed.rotate_left(i as u32 * 7) & 0xff) as u8)
                .collect();
            if b.len() >= 8 {
                b[0] = 1 + (seed % 6) as u8;
                b[1] = 13;
                b[2..4].copy_from_slice(&(n as u16).to_be_bytes());
            }
            if let Ok(m) = msgtype::decode(&b) {
                let _ = PacketOut::decode(&m);
            }
        }
    }
}
