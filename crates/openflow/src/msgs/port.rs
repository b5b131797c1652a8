//! Ports on the wire: the port structure of each version (OpenFlow 1.0's 48-byte
//! `ofp10_phy_port`, 1.1-1.3's 64-byte `ofp11_port`, 1.4's `ofp14_port` with an Ethernet
//! property), and the messages that carry them: port descriptions (`OFPST_PORT_DESC`), port
//! status (`OFPT_PORT_STATUS`) and port mods (`OFPT_PORT_MOD`), as OVS's `lib/ofp-port.c`
//! reads and writes them.
//!
//! A port is held in OVS's version-neutral terms: OpenFlow 1.0 port numbers (the reserved ports
//! at `0xfff8..=0xffff`, as `ofproto` numbers them; 1.1's 32-bit numbers map onto them),
//! OpenFlow 1.0's config bits, OVS's state bits, and 1.1's feature bits (1.0 numbers the media
//! and pause bits 4 lower).

use flow::EthAddr;

use super::{
    Reader, finish, get_name, props, put_name, put_prop, put16, put32, start, unknown_prop,
    version_of, zeros,
};
use crate::error::OfpErr;
use crate::header::Version;
use crate::msgtype::{EncodeError, Message, MsgType};

/// Port config: administratively down.
pub const OFPPC_PORT_DOWN: u32 = 1 << 0;
/// Port config (OpenFlow 1.0 only): no 802.1D spanning tree.
pub const OFPPC_NO_STP: u32 = 1 << 1;
/// Port config: drop every packet received.
pub const OFPPC_NO_RECV: u32 = 1 << 2;
/// Port config (OpenFlow 1.0 only): drop received 802.1D STP packets.
pub const OFPPC_NO_RECV_STP: u32 = 1 << 3;
/// Port config (OpenFlow 1.0 only): not part of a flood.
pub const OFPPC_NO_FLOOD: u32 = 1 << 4;
/// Port config: drop packets forwarded to the port.
pub const OFPPC_NO_FWD: u32 = 1 << 5;
/// Port config: no packet-ins for the port.
pub const OFPPC_NO_PACKET_IN: u32 = 1 << 6;
/// The config bits OpenFlow 1.0 has.
const OFPPC10_ALL: u32 = 0x7f;
/// The config bits OpenFlow 1.1 on has.
const OFPPC11_ALL: u32 = OFPPC_PORT_DOWN | OFPPC_NO_RECV | OFPPC_NO_FWD | OFPPC_NO_PACKET_IN;

/// Port state: no physical link.
pub const OFPPS_LINK_DOWN: u32 = 1 << 0;
/// Port state (OpenFlow 1.1 on): blocked.
pub const OFPPS_BLOCKED: u32 = 1 << 1;
/// Port state (OpenFlow 1.1 on): live, for fast-failover groups.
pub const OFPPS_LIVE: u32 = 1 << 2;
/// Port state (OpenFlow 1.0 only): the spanning tree state's two bits.
pub const OFPPS_STP_MASK: u32 = 3 << 8;
const OFPPS10_ALL: u32 = OFPPS_LINK_DOWN | OFPPS_STP_MASK;
const OFPPS11_ALL: u32 = OFPPS_LINK_DOWN | OFPPS_BLOCKED | OFPPS_LIVE;

/// `OFPP_MAX`: the first reserved OpenFlow 1.0 port number.
const OFPP_MAX: u32 = 0xff00;
/// `OFPP_ANY` (`OFPP_NONE` in OpenFlow 1.0).
pub const OFPP_ANY: u32 = 0xffff;
/// The distance between OpenFlow 1.1's reserved port numbers and 1.0's.
const OFPP11_OFFSET: u32 = 0xffff_0000;

/// An OpenFlow 1.1+ port number as OpenFlow 1.0 numbers it (OVS's `ofputil_port_from_ofp11`):
/// numbers between 1.0's last port and 1.1's reserved ones are `OFPBAC_BAD_OUT_PORT`.
pub fn port_from_ofp11(port: u32) -> Result<u32, OfpErr> {
    if port < OFPP_MAX {
        Ok(port)
    } else if port >= OFPP_MAX + OFPP11_OFFSET {
        Ok(port - OFPP11_OFFSET)
    } else {
        Err(OfpErr::OfpbacBadOutPort)
    }
}

/// An OpenFlow 1.0 port number as OpenFlow 1.1 on numbers it.
pub fn port_to_ofp11(port: u32) -> u32 {
    let port = port & 0xffff;
    if port < OFPP_MAX {
        port
    } else {
        port + OFPP11_OFFSET
    }
}

/// Appends port number `port` as `version` writes it in a field of `width` bytes (statistics
/// and their requests): 16 bits in OpenFlow 1.0, 32 after, then zeros.
pub(crate) fn put_port(version: Version, port: u32, width: usize, out: &mut Vec<u8>) {
    if version == Version::Of10 {
        put16(out, port as u16);
        zeros(out, width - 2);
    } else {
        put32(out, port_to_ofp11(port));
        zeros(out, width - 4);
    }
}

/// Reads a port number written by [`put_port`], in OpenFlow 1.0's numbering.
pub(crate) fn pull_port(version: Version, r: &mut Reader<'_>, width: usize) -> Result<u32, OfpErr> {
    if version == Version::Of10 {
        let p = u32::from(r.u16()?);
        r.skip(width - 2)?;
        Ok(p)
    } else {
        let p = port_from_ofp11(r.u32()?)?;
        r.skip(width - 4)?;
        Ok(p)
    }
}

/// OpenFlow 1.0's feature bits in 1.1's numbering (the media and pause bits move up by 4).
fn features_from_ofp10(f: u32) -> u32 {
    (f & 0x7f) | ((f & 0xf80) << 4)
}

fn features_to_ofp10(f: u32) -> u32 {
    (f & 0x7f) | ((f & 0xf800) >> 4)
}

/// The speed in kbps the feature bits `f` (1.1 numbering) stand for, 0 for none: what OVS
/// gives a port read from OpenFlow 1.0, which has no speeds.
fn features_to_kbps(f: u32) -> u32 {
    const SPEEDS: [(u32, u32); 7] = [
        (1 << 9, 1_000_000_000),
        (1 << 8, 100_000_000),
        (1 << 7, 40_000_000),
        (1 << 6, 10_000_000),
        (3 << 4, 1_000_000),
        (3 << 2, 100_000),
        (3, 10_000),
    ];
    SPEEDS
        .iter()
        .find(|(bits, _)| f & bits != 0)
        .map_or(0, |&(_, kbps)| kbps)
}

/// `OFPPDPT14_ETHERNET`: the Ethernet property of an OpenFlow 1.4 port.
const OFPPDPT14_ETHERNET: u16 = 0;
/// `OFPPMPT14_ETHERNET`: the Ethernet property of an OpenFlow 1.4 port mod.
const OFPPMPT14_ETHERNET: u16 = 0;
/// The length of `struct ofp14_port` before its properties.
const OFP14_PORT_LEN: usize = 40;

/// A port's description (OVS's `struct ofputil_phy_port`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhyPort {
    /// The port number, in OpenFlow 1.0's numbering.
    pub port_no: u32,
    /// The port's Ethernet address.
    pub hw_addr: EthAddr,
    /// The port's name (at most 15 bytes on the wire).
    pub name: String,
    /// `OFPPC_*` bits.
    pub config: u32,
    /// `OFPPS_*` bits.
    pub state: u32,
    /// Current features (`OFPPF_*`, OpenFlow 1.1's numbering).
    pub curr: u32,
    /// Features advertised.
    pub advertised: u32,
    /// Features supported.
    pub supported: u32,
    /// Features the peer advertises.
    pub peer: u32,
    /// Current speed in kbps.
    pub curr_speed: u32,
    /// Maximum speed in kbps.
    pub max_speed: u32,
}

impl PhyPort {
    /// Appends the port in `version`'s structure (OVS's `ofputil_put_phy_port`).
    pub fn put(&self, version: Version, out: &mut Vec<u8>) {
        match version {
            Version::Of10 => {
                put16(out, self.port_no as u16);
                out.extend_from_slice(&self.hw_addr.0);
                put_name(out, &self.name, 16);
                put32(out, self.config & OFPPC10_ALL);
                put32(out, self.state & OFPPS10_ALL);
                for f in [self.curr, self.advertised, self.supported, self.peer] {
                    put32(out, features_to_ofp10(f));
                }
            }
            Version::Of11 | Version::Of12 | Version::Of13 => {
                put32(out, port_to_ofp11(self.port_no));
                zeros(out, 4);
                out.extend_from_slice(&self.hw_addr.0);
                zeros(out, 2);
                put_name(out, &self.name, 16);
                put32(out, self.config & OFPPC11_ALL);
                put32(out, self.state & OFPPS11_ALL);
                self.put_ethernet(out);
            }
            Version::Of14 | Version::Of15 => {
                put32(out, port_to_ofp11(self.port_no));
                put16(out, (OFP14_PORT_LEN + 32) as u16);
                zeros(out, 2);
                out.extend_from_slice(&self.hw_addr.0);
                zeros(out, 2);
                put_name(out, &self.name, 16);
                put32(out, self.config & OFPPC11_ALL);
                put32(out, self.state & OFPPS11_ALL);
                let mut eth = Vec::with_capacity(28);
                zeros(&mut eth, 4);
                self.put_ethernet(&mut eth);
                put_prop(out, OFPPDPT14_ETHERNET, &eth);
            }
        }
    }

    /// The features and speeds, as OpenFlow 1.1's port and 1.4's Ethernet property end.
    fn put_ethernet(&self, out: &mut Vec<u8>) {
        for f in [self.curr, self.advertised, self.supported, self.peer] {
            put32(out, f & 0xffff);
        }
        put32(out, self.curr_speed);
        put32(out, self.max_speed);
    }

    /// Reads the next port of `version`'s structure from `r` (OVS's `ofputil_pull_phy_port`):
    /// `None` when `r` is empty.
    pub(crate) fn pull(version: Version, r: &mut Reader<'_>) -> Result<Option<PhyPort>, OfpErr> {
        if r.is_empty() {
            return Ok(None);
        }
        let p = match version {
            Version::Of10 => {
                let mut p = Reader::new(r.take(48)?);
                let port_no = u32::from(p.u16()?);
                let hw_addr = EthAddr(p.array()?);
                let name = get_name(p.take(16)?);
                let config = p.u32()? & OFPPC10_ALL;
                let state = p.u32()? & OFPPS10_ALL;
                let curr = features_from_ofp10(p.u32()?);
                let advertised = features_from_ofp10(p.u32()?);
                let supported = features_from_ofp10(p.u32()?);
                let peer = features_from_ofp10(p.u32()?);
                PhyPort {
                    port_no,
                    hw_addr,
                    name,
                    config,
                    state,
                    curr,
                    advertised,
                    supported,
                    peer,
                    curr_speed: features_to_kbps(curr),
                    max_speed: features_to_kbps(supported),
                }
            }
            Version::Of11 | Version::Of12 | Version::Of13 => {
                let mut p = Reader::new(r.take(64)?);
                let port_no = port_from_ofp11(p.u32()?)?;
                p.skip(4)?;
                let mut port = Self::pull_common(port_no, &mut p)?;
                port.pull_ethernet(&mut p)?;
                port
            }
            Version::Of14 | Version::Of15 => {
                let mut p = Reader::new(r.take(OFP14_PORT_LEN)?);
                let port_no = p.u32()?;
                let len = usize::from(p.u16()?);
                if len < OFP14_PORT_LEN || len - OFP14_PORT_LEN > r.rest().len() {
                    return Err(OfpErr::OfpbrcBadLen);
                }
                let port_no = port_from_ofp11(port_no)?;
                p.skip(2)?;
                let mut port = Self::pull_common(port_no, &mut p)?;
                for prop in props(r.take(len - OFP14_PORT_LEN)?) {
                    let prop = prop?;
                    match (prop.kind, prop.experimenter) {
                        (OFPPDPT14_ETHERNET, None) => {
                            if prop.payload.len() != 28 {
                                return Err(OfpErr::OfpbpcBadLen);
                            }
                            port.pull_ethernet(&mut Reader::new(&prop.payload[4..]))?;
                        }
                        _ => unknown_prop(&prop, true)?,
                    }
                }
                port
            }
        };
        Ok(Some(p))
    }

    /// The address, name, config and state of an OpenFlow 1.1+ port, after its number.
    fn pull_common(port_no: u32, p: &mut Reader<'_>) -> Result<PhyPort, OfpErr> {
        let hw_addr = EthAddr(p.array()?);
        p.skip(2)?;
        let name = get_name(p.take(16)?);
        Ok(PhyPort {
            port_no,
            hw_addr,
            name,
            config: p.u32()? & OFPPC11_ALL,
            state: p.u32()? & OFPPS11_ALL,
            curr: 0,
            advertised: 0,
            supported: 0,
            peer: 0,
            curr_speed: 0,
            max_speed: 0,
        })
    }

    fn pull_ethernet(&mut self, p: &mut Reader<'_>) -> Result<(), OfpErr> {
        self.curr = p.u32()? & 0xffff;
        self.advertised = p.u32()? & 0xffff;
        self.supported = p.u32()? & 0xffff;
        self.peer = p.u32()? & 0xffff;
        self.curr_speed = p.u32()?;
        self.max_speed = p.u32()?;
        Ok(())
    }
}

/// Every port of a body made of `version`'s port structures.
pub(crate) fn pull_ports(version: Version, body: &[u8]) -> Result<Vec<PhyPort>, OfpErr> {
    let mut r = Reader::new(body);
    let mut ports = Vec::new();
    while let Some(p) = PhyPort::pull(version, &mut r)? {
        ports.push(p);
    }
    Ok(ports)
}

/// `OFPST_PORT_DESC` request: the port asked about (OpenFlow 1.5 on; before, every port).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortDescRequest {
    /// The port, or [`OFPP_ANY`].
    pub port: u32,
}

impl PortDescRequest {
    /// Appends the request in `version`.
    pub fn encode(&self, version: Version, xid: u32, out: &mut Vec<u8>) {
        if version >= Version::Of15 {
            let at = start(MsgType::Ofpst15PortDescRequest, version, xid, out);
            put32(out, port_to_ofp11(self.port));
            zeros(out, 4);
            let _ = finish(out, at);
        } else {
            let at = start(MsgType::Ofpst10PortDescRequest, version, xid, out);
            let _ = finish(out, at);
        }
    }

    /// Reads a port description request.
    pub fn decode(msg: &Message<'_>) -> Result<Self, OfpErr> {
        match msg.msg_type {
            MsgType::Ofpst10PortDescRequest => Ok(PortDescRequest { port: OFPP_ANY }),
            MsgType::Ofpst15PortDescRequest => Ok(PortDescRequest {
                port: port_from_ofp11(Reader::new(msg.body).u32()?)?,
            }),
            _ => Err(OfpErr::OfpbrcBadType),
        }
    }
}

/// The replies to the port description request `request`: `ports` in as many messages as
/// they need.
pub fn encode_port_desc_reply(
    request: &Message<'_>,
    ports: &[PhyPort],
) -> Result<Vec<Vec<u8>>, EncodeError> {
    super::stats_replies(request, ports, PhyPort::put)
}

/// The ports of one port description reply message.
pub fn decode_port_desc_reply(msg: &Message<'_>) -> Result<Vec<PhyPort>, OfpErr> {
    super::expect(
        msg,
        &[
            MsgType::Ofpst10PortDescReply,
            MsgType::Ofpst11PortDescReply,
            MsgType::Ofpst14PortDescReply,
        ],
    )?;
    pull_ports(version_of(msg)?, msg.body)
}

/// Why a port status was sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PortReason {
    /// `OFPPR_ADD`.
    Add = 0,
    /// `OFPPR_DELETE`.
    Delete = 1,
    /// `OFPPR_MODIFY`.
    Modify = 2,
}

/// `OFPT_PORT_STATUS`: a port was added, removed or changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortStatus {
    /// Why.
    pub reason: PortReason,
    /// The port as it is now.
    pub desc: PhyPort,
}

impl PortStatus {
    /// Appends the message in `version` (transaction id 0, as OVS sends it).
    pub fn encode(&self, version: Version, out: &mut Vec<u8>) {
        let t = match version {
            Version::Of10 => MsgType::Ofpt10PortStatus,
            Version::Of11 | Version::Of12 | Version::Of13 => MsgType::Ofpt11PortStatus,
            Version::Of14 | Version::Of15 => MsgType::Ofpt14PortStatus,
        };
        let at = start(t, version, 0, out);
        out.push(self.reason as u8);
        zeros(out, 7);
        self.desc.put(version, out);
        let _ = finish(out, at);
    }

    /// Reads a port status; an unknown reason is `NXBRC_BAD_REASON`.
    pub fn decode(msg: &Message<'_>) -> Result<Self, OfpErr> {
        super::expect(
            msg,
            &[
                MsgType::Ofpt10PortStatus,
                MsgType::Ofpt11PortStatus,
                MsgType::Ofpt14PortStatus,
            ],
        )?;
        let mut r = Reader::new(msg.body);
        let reason = match r.u8()? {
            0 => PortReason::Add,
            1 => PortReason::Delete,
            2 => PortReason::Modify,
            _ => return Err(OfpErr::NxbrcBadReason),
        };
        r.skip(7)?;
        let desc = PhyPort::pull(version_of(msg)?, &mut r)?.ok_or(OfpErr::OfpbrcBadLen)?;
        Ok(PortStatus { reason, desc })
    }
}

/// `OFPT_PORT_MOD`: change a port's config (OVS's `struct ofputil_port_mod`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortMod {
    /// The port, in OpenFlow 1.0's numbering.
    pub port_no: u32,
    /// The port's address, which must match (a check that it is the port meant).
    pub hw_addr: EthAddr,
    /// The new values of the `OFPPC_*` bits in `mask`.
    pub config: u32,
    /// The `OFPPC_*` bits to change.
    pub mask: u32,
    /// Features to advertise (1.1's numbering), 0 to leave them.
    pub advertise: u32,
}

impl PortMod {
    /// Appends the message in `version`.
    pub fn encode(&self, version: Version, xid: u32, out: &mut Vec<u8>) {
        match version {
            Version::Of10 => {
                let at = start(MsgType::Ofpt10PortMod, version, xid, out);
                put16(out, self.port_no as u16);
                out.extend_from_slice(&self.hw_addr.0);
                put32(out, self.config & OFPPC10_ALL);
                put32(out, self.mask & OFPPC10_ALL);
                put32(out, features_to_ofp10(self.advertise));
                zeros(out, 4);
                let _ = finish(out, at);
            }
            Version::Of11 | Version::Of12 | Version::Of13 => {
                let at = start(MsgType::Ofpt11PortMod, version, xid, out);
                self.put_ofp11(out);
                put32(out, self.advertise & 0xffff);
                zeros(out, 4);
                let _ = finish(out, at);
            }
            Version::Of14 | Version::Of15 => {
                let at = start(MsgType::Ofpt14PortMod, version, xid, out);
                self.put_ofp11(out);
                if self.advertise != 0 {
                    put_prop(
                        out,
                        OFPPMPT14_ETHERNET,
                        &(self.advertise & 0xffff).to_be_bytes(),
                    );
                }
                let _ = finish(out, at);
            }
        }
    }

    fn put_ofp11(&self, out: &mut Vec<u8>) {
        put32(out, port_to_ofp11(self.port_no));
        zeros(out, 4);
        out.extend_from_slice(&self.hw_addr.0);
        zeros(out, 2);
        put32(out, self.config & OFPPC11_ALL);
        put32(out, self.mask & OFPPC11_ALL);
    }

    /// Reads a port mod (OVS's `ofputil_decode_port_mod`, strict about properties as a switch
    /// is); config bits outside the mask are cleared.
    pub fn decode(msg: &Message<'_>) -> Result<Self, OfpErr> {
        let mut r = Reader::new(msg.body);
        let mut pm = match msg.msg_type {
            MsgType::Ofpt10PortMod => PortMod {
                port_no: u32::from(r.u16()?),
                hw_addr: EthAddr(r.array()?),
                config: r.u32()? & OFPPC10_ALL,
                mask: r.u32()? & OFPPC10_ALL,
                advertise: features_from_ofp10(r.u32()?),
            },
            MsgType::Ofpt11PortMod | MsgType::Ofpt14PortMod => {
                let port_no = port_from_ofp11(r.u32()?)?;
                r.skip(4)?;
                let hw_addr = EthAddr(r.array()?);
                r.skip(2)?;
                let mut pm = PortMod {
                    port_no,
                    hw_addr,
                    config: r.u32()? & OFPPC11_ALL,
                    mask: r.u32()? & OFPPC11_ALL,
                    advertise: 0,
                };
                if msg.msg_type == MsgType::Ofpt11PortMod {
                    pm.advertise = r.u32()? & 0xffff;
                } else {
                    for prop in props(r.rest()) {
                        let prop = prop?;
                        match (prop.kind, prop.experimenter) {
                            (OFPPMPT14_ETHERNET, None) => {
                                pm.advertise = super::prop_u32(&prop)? & 0xffff;
                            }
                            _ => unknown_prop(&prop, false)?,
                        }
                    }
                }
                pm
            }
            _ => return Err(OfpErr::OfpbrcBadType),
        };
        pm.config &= pm.mask;
        Ok(pm)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{hex, msg, ofctl, unhex};
    use super::*;
    use crate::msgtype;
    use proptest::prelude::*;

    fn port(n: u32) -> PhyPort {
        PhyPort {
            port_no: n,
            hw_addr: EthAddr([0xaa, 0xbb, 0xcc, 0xdd, 0xee, n as u8]),
            name: format!("p{n}"),
            config: OFPPC_PORT_DOWN,
            state: OFPPS_LINK_DOWN,
            curr: 0x2820,
            advertised: 0x282f,
            supported: 0x282f,
            peer: 0,
            curr_speed: 1_000_000,
            max_speed: 1_000_000,
        }
    }

    /// The OF1.0 and OF1.4 port status of OVS's tests/ofp-print.at (OFPT_PORT_STATUS - OF1.0
    /// and OF1.4), which `ovs-ofctl ofp-print` reads back as the same port.
    #[test]
    fn port_status_as_ovs_prints_it() {
        let of10 = unhex(
            "010c004000000000 0200000000000000 0003505400000001 6574683000000000 \
             0000000000000000 0000000100000001 000002080000028f 0000028f00000000",
        );
        let ps = PortStatus::decode(&msg(&of10)).unwrap();
        assert_eq!(ps.reason, PortReason::Modify);
        assert_eq!((ps.desc.port_no, ps.desc.name.as_str()), (3, "eth0"));
        assert_eq!(
            (ps.desc.config, ps.desc.state),
            (OFPPC_PORT_DOWN, OFPPS_LINK_DOWN)
        );
        // 100MB-FD AUTO_NEG, in OpenFlow 1.1's numbering; 100 Mbps from the features.
        assert_eq!((ps.desc.curr, ps.desc.supported), (0x2008, 0x280f));
        assert_eq!((ps.desc.curr_speed, ps.desc.max_speed), (100_000, 100_000));
        let mut out = Vec::new();
        ps.encode(Version::Of10, &mut out);
        assert_eq!(hex(&out), hex(&of10));

        let of14 = unhex(
            "050c005800000000 0200000000000000 0000000300480000 5054000000010000 \
             6574683000000000 0000000000000000 0000000000000000 0000002000000000 \
             000020080000280f 0000280f00000000 000186a0000186a0",
        );
        let ps14 = PortStatus::decode(&msg(&of14)).unwrap();
        assert_eq!(ps14.desc.config, 0);
        assert_eq!((ps14.desc.curr, ps14.desc.curr_speed), (0x2008, 100_000));
        let mut out = Vec::new();
        ps14.encode(Version::Of14, &mut out);
        assert_eq!(hex(&out), hex(&of14));
    }

    /// The port descriptions a running ovs-vswitchd sends in OpenFlow 1.0, 1.3 and 1.5.
    #[test]
    fn port_desc_as_ovs_vswitchd_answers() {
        for label in ["port-desc-of10", "port-desc-of13", "port-desc-of15"] {
            let (req, replies) = super::super::testutil::ovs_reply(label);
            let ports = decode_port_desc_reply(&msg(&replies[0])).unwrap();
            assert_eq!(ports[0].name, "p1", "{label}");
            assert_eq!(ports.last().unwrap().port_no, 0xfffe);
            let req = msg(&req);
            assert_eq!(PortDescRequest::decode(&req).unwrap().port, OFPP_ANY);
            let out = encode_port_desc_reply(&req, &ports).unwrap();
            assert_eq!(hex(&out[0]), hex(&replies[0]), "{label}");
        }
    }

    #[test]
    fn port_desc_requests_as_ovs_ofctl_sends_them() {
        for label in ["dump-ports-desc-of10", "dump-ports-desc-of15"] {
            let m = &ofctl(label)[0];
            let d = msg(m);
            let req = PortDescRequest::decode(&d).unwrap();
            assert_eq!(req.port, OFPP_ANY);
            let mut out = Vec::new();
            req.encode(Version::from_wire(d.version).unwrap(), d.xid, &mut out);
            assert_eq!(&out, m);
        }
        let m = &ofctl("show-of13")[1];
        assert_eq!(PortDescRequest::decode(&msg(m)).unwrap().port, OFPP_ANY);
    }

    #[test]
    fn port_mod_as_ovs_ofctl_sends_it() {
        let m = &ofctl("mod-port-of10")[1];
        let pm = PortMod::decode(&msg(m)).unwrap();
        assert_eq!(
            pm,
            PortMod {
                port_no: 1,
                hw_addr: EthAddr([0xaa, 0xbb, 0xcc, 0xdd, 0xee, 1]),
                config: OFPPC_NO_FLOOD,
                mask: OFPPC_NO_FLOOD,
                advertise: 0,
            }
        );
        let mut out = Vec::new();
        pm.encode(Version::Of10, 4, &mut out);
        assert_eq!(&out, m);
        // OpenFlow 1.3's port mod, and 1.4's with no Ethernet property when nothing is
        // advertised.
        for (label, v, config) in [
            ("mod-port-of13", Version::Of13, OFPPC_PORT_DOWN),
            ("mod-port-of14", Version::Of14, OFPPC_NO_PACKET_IN),
        ] {
            let m = &ofctl(label)[1];
            let pm = PortMod::decode(&msg(m)).unwrap();
            assert_eq!(
                (pm.port_no, pm.config, pm.mask, pm.advertise),
                (1, config, config, 0)
            );
            let mut out = Vec::new();
            pm.encode(v, 4, &mut out);
            assert_eq!(&out, m, "{label}");
        }
        let m = &ofctl("dump-ports-desc-port-of15")[0];
        let req = PortDescRequest::decode(&msg(m)).unwrap();
        assert_eq!(req.port, 1);
        let mut out = Vec::new();
        req.encode(Version::Of15, 2, &mut out);
        assert_eq!(&out, m);
    }

    #[test]
    fn port_numbers_between_the_ranges_are_refused() {
        assert_eq!(port_from_ofp11(0xfffffffe), Ok(0xfffe));
        assert_eq!(port_from_ofp11(7), Ok(7));
        assert_eq!(port_from_ofp11(0xff00), Err(OfpErr::OfpbacBadOutPort));
        assert_eq!(port_to_ofp11(0xfffd), 0xfffffffd);
    }

    #[test]
    fn long_port_lists_split_across_replies() {
        let mut req = Vec::new();
        PortDescRequest { port: OFPP_ANY }.encode(Version::Of10, 5, &mut req);
        let ports: Vec<_> = (1..=2000).map(port).collect();
        let msgs = encode_port_desc_reply(&msg(&req), &ports).unwrap();
        assert_eq!(msgs.len(), 2);
        let mut back = Vec::new();
        for m in &msgs {
            back.extend(decode_port_desc_reply(&msg(m)).unwrap());
        }
        assert_eq!(back.len(), 2000);
        assert_eq!(back[1999].name, "p2000");
    }

    fn arb_port(v: Version) -> impl Strategy<Value = PhyPort> {
        (
            0u32..0xff00,
            any::<[u8; 6]>(),
            "[a-z0-9]{0,15}",
            any::<u32>(),
            any::<u32>(),
            any::<[u16; 4]>(),
            any::<u32>(),
            any::<u32>(),
        )
            .prop_map(move |(n, mac, name, config, state, f, cs, ms)| {
                let mut p = PhyPort {
                    port_no: n,
                    hw_addr: EthAddr(mac),
                    name,
                    config: config
                        & if v == Version::Of10 {
                            OFPPC10_ALL
                        } else {
                            OFPPC11_ALL
                        },
                    state: state
                        & if v == Version::Of10 {
                            OFPPS10_ALL
                        } else {
                            OFPPS11_ALL
                        },
                    curr: u32::from(f[0]),
                    advertised: u32::from(f[1]),
                    supported: u32::from(f[2]),
                    peer: u32::from(f[3]),
                    curr_speed: cs,
                    max_speed: ms,
                };
                if v == Version::Of10 {
                    for f in [
                        &mut p.curr,
                        &mut p.advertised,
                        &mut p.supported,
                        &mut p.peer,
                    ] {
                        *f = features_from_ofp10(features_to_ofp10(*f));
                    }
                    p.curr_speed = features_to_kbps(p.curr);
                    p.max_speed = features_to_kbps(p.supported);
                }
                p
            })
    }

    proptest! {
        #[test]
        fn port_status_round_trips(
            (v, desc) in (1u8..=6).prop_flat_map(|v| {
                let v = Version::from_wire(v).unwrap();
                (Just(v), arb_port(v))
            }),
            reason in 0usize..3,
        ) {
            let reason = [PortReason::Add, PortReason::Delete, PortReason::Modify][reason];
            let ps = PortStatus { reason, desc };
            let mut out = Vec::new();
            ps.encode(v, &mut out);
            prop_assert_eq!(PortStatus::decode(&msg(&out)).unwrap(), ps);
        }

        #[test]
        fn port_mod_round_trips(v in 1u8..=6, n in 0u32..0xff00, config: u32, mask: u32, adv: u16) {
            let v = Version::from_wire(v).unwrap();
            let all = if v == Version::Of10 { OFPPC10_ALL } else { OFPPC11_ALL };
            let mut adv = u32::from(adv);
            if v == Version::Of10 {
                adv = features_from_ofp10(features_to_ofp10(adv));
            }
            let pm = PortMod {
                port_no: n,
                hw_addr: EthAddr([1, 2, 3, 4, 5, 6]),
                config: config & mask & all,
                mask: mask & all,
                advertise: adv,
            };
            let mut out = Vec::new();
            pm.encode(v, 1, &mut out);
            prop_assert_eq!(PortMod::decode(&msg(&out)).unwrap(), pm);
        }

        #[test]
        fn random_bodies_never_panic(t in 0usize..3, v in 1u8..=6, body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let ts = [MsgType::Ofpt14PortStatus, MsgType::Ofpt14PortMod, MsgType::Ofpst14PortDescReply];
            let mut m = Vec::new();
            let v = Version::from_wire(v).unwrap();
            if ts[t].encode(v, 0, &body, &mut m).is_ok() && let Ok(d) = msgtype::decode(&m) {
                let _ = PortStatus::decode(&d);
                let _ = PortMod::decode(&d);
                let _ = decode_port_desc_reply(&d);
            }
        }
    }
}
