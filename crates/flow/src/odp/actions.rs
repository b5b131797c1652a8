//! Datapath actions in OVS's text form: `set(eth(dst=...)),tnl_push(...),2`.
//!
//! Formats follow `format_odp_action()` in OVS's `lib/odp-util.c`; the grammar accepted is
//! that of `odp_actions_from_string()`. Actions are typed so the datapath can execute them
//! without reparsing; the tunnel header of `tnl_push` keeps its fields so a tunnel
//! implementation can build the template from them.

use std::fmt::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::key::{DpKey, KeyFmt, KeyParser, put_geneve_opts, put_mpls_lse};
use super::names::{PortNames, put_port};
use super::parse::{Cursor, PResult, ParseErrorKind, hash_x, put_hex};
use crate::key::{EthAddr, GENEVE_OPTS_MAX, VLAN_CFI};

/// Deepest nesting of `clone(`, `sample(`, `check_pkt_len(` and `dec_ttl(`.
pub const MAX_ACTION_DEPTH: usize = 16;

/// One datapath action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send to a port: `2` or `vm0`.
    Output(u32),
    /// `lb_output(N)`: output to a balanced bond.
    LbOutput(u32),
    /// `trunc(N)`: truncate the packet for the next output.
    Trunc(u32),
    /// `meter(N)`.
    Meter(u32),
    /// `recirc(0xN)`.
    Recirc(u32),
    /// `tnl_pop(port)`: decapsulate and continue as if received on the tunnel port.
    TnlPop(u32),
    /// `tnl_push(...)`: encapsulate with a prebuilt header and output.
    TnlPush(Box<TnlPush>),
    /// `userspace(pid=N,...)`: send to the slow path.
    Userspace(Box<Userspace>),
    /// `set(attr(...))`, masked when the mask is not all ones; one attribute.
    Set(Box<DpKey>),
    /// `push_vlan([tpid=0x88a8,]vid=N,pcp=N[,cfi=0])`; `tci` includes [`VLAN_CFI`].
    PushVlan {
        /// Tag protocol identifier: 0x8100 (802.1Q, not printed) or 0x88a8 (802.1ad).
        tpid: u16,
        /// Tag control information: PCP in bits 13-15, VID in bits 0-11, and [`VLAN_CFI`]
        /// unless `cfi=0` was given.
        tci: u16,
    },
    /// `pop_vlan`.
    PopVlan,
    /// `push_mpls(label=,tc=,ttl=,bos=,eth_type=0x8847)`; `lse` as on the wire.
    PushMpls {
        /// The label stack entry pushed: label, TC, bottom of stack and TTL (RFC 3032 §2.1).
        lse: u32,
        /// The MPLS ethertype the frame gets: 0x8847 (unicast) or 0x8848 (multicast).
        eth_type: u16,
    },
    /// `add_mpls(...)`: like `push_mpls`, for L3 packets.
    AddMpls {
        /// The label stack entry added: label, TC, bottom of stack and TTL (RFC 3032 §2.1).
        lse: u32,
        /// The MPLS ethertype the packet gets: 0x8847 (unicast) or 0x8848 (multicast).
        eth_type: u16,
    },
    /// `pop_mpls(eth_type=0x800)`.
    PopMpls {
        /// The ethertype of what the popped label carried (0x800 for IPv4, 0x8847 when more
        /// labels follow).
        eth_type: u16,
    },
    /// `push_eth(src=,dst=)`.
    PushEth {
        /// Source address of the new Ethernet header.
        src: EthAddr,
        /// Destination address of the new Ethernet header.
        dst: EthAddr,
    },
    /// `pop_eth`.
    PopEth,
    /// `hash(l4(N))` or `hash(sym_l4(N))`.
    Hash {
        /// Which fields are hashed.
        alg: HashAlg,
        /// Seed mixed into the hash; the result becomes the packet's `dp_hash`.
        basis: u32,
    },
    /// `ct(...)` or bare `ct`.
    Ct(Box<CtAction>),
    /// `ct_clear`.
    CtClear,
    /// `clone(actions)`.
    Clone(Vec<Action>),
    /// `sample(sample=P%,actions(...))`; `probability` out of `u32::MAX`.
    Sample {
        /// Chance that a packet is sampled, scaled so that `u32::MAX` is 100%.
        probability: u32,
        /// The actions a sampled packet goes through.
        actions: Vec<Action>,
    },
    /// `check_pkt_len(size=N,gt(...),le(...))`.
    CheckPktLen {
        /// The length in bytes the packet is compared with.
        size: u16,
        /// The actions for a packet longer than `size`.
        gt: Vec<Action>,
        /// The actions for a packet of `size` bytes or fewer.
        le: Vec<Action>,
    },
    /// `dec_ttl(le_1(actions))`: the actions run when the TTL would drop to zero.
    DecTtl(Vec<Action>),
    /// `pop_nsh()`.
    PopNsh,
    /// `psample(group=N[,cookie=0x...])`.
    Psample {
        /// The Linux psample group the sample goes to.
        group: u32,
        /// Up to 16 bytes of user data sent with the sample.
        cookie: Option<Vec<u8>>,
    },
}

/// Hash algorithm of [`Action::Hash`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HashAlg {
    /// `l4`: 5-tuple hash.
    L4,
    /// `sym_l4`: symmetric 5-tuple hash.
    SymL4,
}

/// `tnl_push(tnl_port(N),header(...),out_port(N))`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TnlPush {
    /// The datapath port of the tunnel the header belongs to.
    pub tnl_port: u32,
    /// The datapath port the encapsulated packet is sent on.
    pub out_port: u32,
    /// The encapsulation header, outer Ethernet to tunnel protocol.
    pub header: TnlHeader,
}

/// The encapsulation header of a `tnl_push`, field by field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TnlHeader {
    /// Header length in bytes.
    pub size: u32,
    /// `OVS_VPORT_TYPE_*`: 3 GRE, 4 VXLAN, 5 GENEVE, 107/108 ERSPAN, 109 IP6GRE, 110 GTP-U.
    pub tnl_type: u32,
    /// Outer Ethernet destination: the next hop towards the remote tunnel endpoint.
    pub eth_dst: EthAddr,
    /// Outer Ethernet source: the address of the interface the underlay route leaves by.
    pub eth_src: EthAddr,
    /// Outer ethertype: 0x0800 for an IPv4 underlay, 0x86dd for IPv6.
    pub dl_type: u16,
    /// Outer IP header.
    pub ip: TnlIp,
    /// The tunnel protocol's headers after the outer IP header.
    pub l4: TnlL4,
}

/// Outer IP header of a [`TnlHeader`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TnlIp {
    /// `ipv4(src=,dst=,proto=,tos=,ttl=,frag=0x4000)`; `frag` is the raw fragment field.
    V4 {
        /// Local tunnel endpoint.
        src: Ipv4Addr,
        /// Remote tunnel endpoint.
        dst: Ipv4Addr,
        /// IP protocol of the tunnel: 17 (UDP) or 47 (GRE).
        proto: u8,
        /// Type of service (DSCP and ECN).
        tos: u8,
        /// TTL the encapsulated packet leaves with.
        ttl: u8,
        /// Flags and fragment offset as on the wire: 0x4000 is Don't Fragment.
        frag: u16,
    },
    /// `ipv6(src=,dst=,label=,proto=,tclass=,hlimit=)`.
    V6 {
        /// Local tunnel endpoint.
        src: Ipv6Addr,
        /// Remote tunnel endpoint.
        dst: Ipv6Addr,
        /// Flow label (20 bits, RFC 6437).
        label: u32,
        /// Next header of the tunnel: 17 (UDP) or 47 (GRE).
        proto: u8,
        /// Traffic class (DSCP and ECN).
        tclass: u8,
        /// Hop limit the encapsulated packet leaves with.
        hlimit: u8,
    },
}

/// `udp(src=,dst=,csum=0x0)` of a UDP-based tunnel header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TnlUdp {
    /// Source port; OVS writes 0 and derives the port from the inner packet's hash, for
    /// ECMP entropy.
    pub src: u16,
    /// Destination port: the tunnel's (4789 VXLAN, 6081 GENEVE, 2152 GTP-U by default).
    pub dst: u16,
    /// Checksum field; non-zero asks for the outer UDP checksum to be computed.
    pub csum: u16,
}

/// The tunnel protocol part of a [`TnlHeader`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TnlL4 {
    /// `udp(...),vxlan(flags=0x8000000,vni=0x64)`.
    Vxlan {
        /// The outer UDP header.
        udp: TnlUdp,
        /// The VXLAN header's first word: 0x08000000 is the I flag, a valid VNI (RFC 7348 §5).
        flags: u32,
        /// The 24-bit VXLAN network identifier.
        vni: u32,
    },
    /// `udp(...),geneve([oam,][crit,]vni=0x..[,options(...)])`; options as on the wire.
    Geneve {
        /// The outer UDP header.
        udp: TnlUdp,
        /// The O bit: the packet is an OAM (control) message (RFC 8926 §3.4).
        oam: bool,
        /// The C bit: the options include a critical one.
        crit: bool,
        /// The 24-bit virtual network identifier.
        vni: u32,
        /// The option TLVs, at most 252 bytes.
        options: Vec<u8>,
    },
    /// `udp(...),gtpu(flags=0x..,msgtype=N,teid=0x..)`.
    Gtpu {
        /// The outer UDP header.
        udp: TnlUdp,
        /// The GTP-U header's first byte: version, protocol type and the E, S and PN flags
        /// (3GPP TS 29.281 §5.1).
        flags: u8,
        /// The message type: 255 for G-PDU, a user packet.
        msgtype: u8,
        /// The tunnel endpoint identifier.
        teid: u32,
    },
    /// `gre((flags=0x..,proto=0x..)[,csum=0x..][,key=0x..][,seq=0x..])`.
    Gre {
        /// The GRE flags and version: C (0x8000), K (0x2000) and S (0x1000) say which of the
        /// optional fields follow (RFC 2784, RFC 2890).
        flags: u16,
        /// The payload's protocol type: 0x6558 for Ethernet, else an ethertype.
        proto: u16,
        /// The checksum field, present with the C bit.
        csum: Option<u16>,
        /// The key, present with the K bit: the tunnel's `tun_id`.
        key: Option<u32>,
        /// The sequence number, present with the S bit.
        seq: Option<u32>,
    },
    /// `erspan(ver=1,sid=0x..,idx=0x..)` or `erspan(ver=2,sid=0x..,dir=N,hwid=0x..)`: GRE
    /// with a sequence number (flags 0x1000, protocol 0x88be for version 1, 0x22eb for 2)
    /// and an ERSPAN header, as OVS writes it (the sequence number and version 2's timestamp
    /// are written per packet).
    Erspan {
        /// 1 (type II) or 2 (type III).
        ver: u8,
        /// The 10-bit session id: the tunnel's key.
        sid: u16,
        /// Version 1's 20-bit index.
        idx: u32,
        /// Version 2's direction bit (0 ingress, 1 egress).
        dir: u8,
        /// Version 2's 6-bit hardware id.
        hwid: u8,
    },
    /// A bare `udp(...)` header (bare UDP tunnels).
    Udp(TnlUdp),
}

/// `userspace(pid=N[,cookie][,actions][,tunnel_out_port=P])`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Userspace {
    /// Netlink port id of the handler the kernel datapath sends the upcall to; kept as given.
    pub pid: u32,
    /// What the slow path is told about why the packet came up.
    pub cookie: UserCookie,
    /// `,actions`: the packet's actions are attached to the upcall.
    pub actions: bool,
    /// `tunnel_out_port=P`: the tunnel port the packet is being output to, so that a sampler
    /// (sFlow, IPFIX) can report the egress tunnel.
    pub tunnel_out_port: Option<u32>,
}

/// The user data of a `userspace` action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UserCookie {
    /// No cookie: `userspace(pid=N)` alone, or with only `actions` or `tunnel_out_port`.
    None,
    /// `userdata(0a0b...)`: raw bytes.
    Userdata(Vec<u8>),
    /// A typed OVS cookie kept as its text: `controller(...)`, `slow_path(...)`, `sFlow(...)`,
    /// `flow_sample(...)` or `ipfix(...)`. Ports inside are not translated by [`PortNames`].
    Text(String),
}

/// `ct(...)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CtAction {
    /// `commit`: enter the connection into the table, so later packets find it.
    pub commit: bool,
    /// `force_commit`: commit, and first delete an existing connection whose original
    /// direction is the packet's reply direction.
    pub force_commit: bool,
    /// Zone; 0 (the default zone) is not printed.
    pub zone: u16,
    /// `mark=V/M`.
    pub mark: Option<(u32, u32)>,
    /// `label=V[/M]`.
    pub label: Option<(u128, u128)>,
    /// `helper=NAME`: the application-layer gateway for the connection (`ftp`, `tftp`).
    pub helper: Option<String>,
    /// `timeout=NAME`: the timeout policy for the connection.
    pub timeout: Option<String>,
    /// `nat...`: address translation for the connection.
    pub nat: Option<CtNat>,
}

/// `nat[(src|dst[=IP[-IP][:PORT[-PORT]]][,persistent][,hash][,random])]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CtNat {
    /// Source or destination NAT; `None` for a bare `nat`, which only applies the translation
    /// an existing connection already has.
    pub kind: Option<NatKind>,
    /// First address of the range to translate to; `None` when `nat(src)` or `nat(dst)`
    /// names no range.
    pub ip_min: Option<IpAddr>,
    /// Last address of the range; `None` for a single address.
    pub ip_max: Option<IpAddr>,
    /// First port of the range; 0 for none.
    pub proto_min: u16,
    /// Last port of the range; 0 for none.
    pub proto_max: u16,
    /// `persistent`: the same translated address for the same source address.
    pub persistent: bool,
    /// `hash`: choose the translated port from a hash of the connection's tuple.
    pub hash: bool,
    /// `random`: choose the translated port from a random starting point.
    pub random: bool,
}

/// Source or destination NAT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NatKind {
    /// `src`: rewrite the source address and port (SNAT).
    Src,
    /// `dst`: rewrite the destination address and port (DNAT).
    Dst,
}

// ---------------------------------------------------------------------------------------------
// Parsing.

pub(crate) struct ActionParser<'n> {
    pub(crate) names: &'n mut PortNames,
    depth: usize,
}

impl<'n> ActionParser<'n> {
    pub(crate) fn new(names: &'n mut PortNames) -> Self {
        ActionParser { names, depth: 0 }
    }

    /// A comma-separated list. At top level it ends at the end of the input or at ", " (the
    /// `dp-extra-info` that may follow in a dump line); nested, at ')'. `drop` alone is the
    /// empty list.
    pub(crate) fn parse_list(&mut self, c: &mut Cursor<'_>, nested: bool) -> PResult<Vec<Action>> {
        let mut v = Vec::new();
        let ends = |b: Option<u8>| match b {
            None => !nested,
            Some(b')') => nested,
            Some(b',' | b' ') => !nested,
            _ => false,
        };
        if c.rest().starts_with("drop") && ends(c.peek_at(4)) {
            c.pos += 4;
            return Ok(v);
        }
        if nested && c.peek() == Some(b')') {
            return Ok(v);
        }
        loop {
            v.push(self.parse_action(c)?);
            if nested {
                if c.peek() == Some(b')') {
                    return Ok(v);
                }
                if !c.eat(b',') {
                    return Err(c.expected("',' or ')' after action"));
                }
            } else {
                match c.peek() {
                    None | Some(b' ') => return Ok(v),
                    Some(b',') if matches!(c.peek_at(1), Some(b' ') | None) => return Ok(v),
                    Some(b',') => c.pos += 1,
                    _ => return Err(c.expected("',' after action")),
                }
            }
        }
    }

    fn parse_nested(&mut self, c: &mut Cursor<'_>) -> PResult<Vec<Action>> {
        if self.depth >= MAX_ACTION_DEPTH {
            return Err(c.err(ParseErrorKind::TooDeep(MAX_ACTION_DEPTH)));
        }
        self.depth += 1;
        let r = self.parse_list(c, true);
        self.depth -= 1;
        r
    }

    fn port(&mut self, c: &mut Cursor<'_>) -> PResult<u32> {
        if c.peek().is_some_and(|b| b.is_ascii_digit()) {
            return c.u32("port");
        }
        let n = c.name_token();
        if n.is_empty() {
            return Err(c.expected("port number or name"));
        }
        Ok(self.names.number_or_allocate(n))
    }

    fn parse_action(&mut self, c: &mut Cursor<'_>) -> PResult<Action> {
        let start = c.pos;
        if c.peek().is_some_and(|b| b.is_ascii_digit()) {
            let p = c.u32("output port")?;
            if c.peek()
                .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
            {
                return Err(c.expected("',' after output port number"));
            }
            return Ok(Action::Output(p));
        }
        let w = c.name_token();
        if w.is_empty() {
            return Err(c.expected("action"));
        }
        if !c.eat(b'(') {
            return Ok(match w {
                "pop_vlan" => Action::PopVlan,
                "pop_eth" => Action::PopEth,
                "ct" => Action::Ct(Box::default()),
                "ct_clear" => Action::CtClear,
                "drop" => {
                    return Err(c.invalid_at(start, "drop must be the only action"));
                }
                name => Action::Output(self.names.number_or_allocate(name)),
            });
        }
        let a = match w {
            "set" => {
                let mut kp = KeyParser::new(self.names);
                kp.parse_attr(c, 0)?;
                let k = kp.finish();
                Action::Set(Box::new(k))
            }
            "push_vlan" => self.parse_push_vlan(c)?,
            "push_mpls" | "add_mpls" => {
                let lse = parse_lse(c)?;
                expect_kv(c, ",eth_type")?;
                let eth_type = c.u16("eth_type")?;
                if w == "push_mpls" {
                    Action::PushMpls { lse, eth_type }
                } else {
                    Action::AddMpls { lse, eth_type }
                }
            }
            "pop_mpls" => {
                expect_kv(c, "eth_type")?;
                Action::PopMpls {
                    eth_type: c.u16("eth_type")?,
                }
            }
            "push_eth" => {
                expect_kv(c, "src")?;
                let src = c.mac()?;
                expect_kv(c, ",dst")?;
                let dst = c.mac()?;
                Action::PushEth { src, dst }
            }
            "recirc" => Action::Recirc(c.u32("recirc id")?),
            "meter" => Action::Meter(c.u32("meter id")?),
            "lb_output" => Action::LbOutput(c.u32("bond id")?),
            "trunc" => Action::Trunc(c.u32("length")?),
            "tnl_pop" => Action::TnlPop(self.port(c)?),
            "tnl_push" => self.parse_tnl_push(c)?,
            "hash" => {
                let alg = if c.eat_str("l4(") {
                    HashAlg::L4
                } else if c.eat_str("sym_l4(") {
                    HashAlg::SymL4
                } else {
                    return Err(c.expected("hash algorithm l4( or sym_l4("));
                };
                let basis = c.u32("hash basis")?;
                c.expect(b')', "')' after hash basis")?;
                Action::Hash { alg, basis }
            }
            "userspace" => self.parse_userspace(c)?,
            "ct" => Action::Ct(Box::new(parse_ct(c)?)),
            "clone" => Action::Clone(self.parse_nested(c)?),
            "sample" => {
                expect_kv(c, "sample")?;
                let at = c.pos;
                while c.peek().is_some_and(|b| b.is_ascii_digit() || b == b'.') {
                    c.pos += 1;
                }
                let pct: f64 = c.slice(at, c.pos).parse().map_err(|_| {
                    c.err_at(at, ParseErrorKind::Expected("sampling percentage".into()))
                })?;
                if !(0.0..=100.0).contains(&pct) {
                    return Err(c.err_at(
                        at,
                        ParseErrorKind::OutOfRange {
                            what: "sampling percentage",
                            max: 100,
                        },
                    ));
                }
                c.expect_str("%,actions(", "'%,actions(' after sampling percentage")?;
                let probability = (u32::MAX as f64 * (pct / 100.0) + 0.5)
                    .floor()
                    .clamp(0.0, u32::MAX as f64) as u32;
                let actions = self.parse_nested(c)?;
                c.expect(b')', "')' closing actions(")?;
                Action::Sample {
                    probability,
                    actions,
                }
            }
            "check_pkt_len" => {
                expect_kv(c, "size")?;
                let size = c.u16("size")?;
                c.expect_str(",gt(", "',gt(' in check_pkt_len")?;
                let gt = self.parse_nested(c)?;
                c.expect_str("),le(", "'),le(' in check_pkt_len")?;
                let le = self.parse_nested(c)?;
                c.expect(b')', "')' closing le(")?;
                Action::CheckPktLen { size, gt, le }
            }
            "dec_ttl" => {
                c.expect_str("le_1(", "'le_1(' in dec_ttl")?;
                let acts = self.parse_nested(c)?;
                c.expect(b')', "')' closing le_1(")?;
                Action::DecTtl(acts)
            }
            "pop_nsh" => Action::PopNsh,
            "psample" => {
                expect_kv(c, "group")?;
                let group = c.u32("group")?;
                let cookie = if c.eat_str(",cookie=") {
                    let at = c.pos;
                    if !c.eat_str("0x") {
                        return Err(c.expected("0x-prefixed cookie"));
                    }
                    let d = c.pos;
                    while c.peek().is_some_and(|b| b.is_ascii_hexdigit()) {
                        c.pos += 1;
                    }
                    if c.pos == d || c.pos - d > 32 {
                        return Err(c.invalid_at(at, "cookie must be 1 to 16 bytes of hex"));
                    }
                    Some(hex_to_bytes(c.slice(d, c.pos)))
                } else {
                    None
                };
                Action::Psample { group, cookie }
            }
            "pop_vlan" | "pop_eth" | "ct_clear" => {
                return Err(c.err_at(
                    c.pos - 1,
                    ParseErrorKind::Expected(format!("',' after {w}").into()),
                ));
            }
            _ => return Err(c.err_at(start, ParseErrorKind::UnknownAction(w.to_owned()))),
        };
        c.expect(b')', "')' closing action")?;
        Ok(a)
    }

    fn parse_push_vlan(&mut self, c: &mut Cursor<'_>) -> PResult<Action> {
        let mut tpid = 0x8100u16;
        if c.eat_str("tpid=") {
            tpid = c.u16("tpid")?;
            c.expect(b',', "',' after tpid")?;
        }
        expect_kv(c, "vid")?;
        let vid = c.uint(0xfff, "vid")? as u16;
        expect_kv(c, ",pcp")?;
        let pcp = c.uint(7, "pcp")? as u16;
        let cfi = if c.eat_str(",cfi=") {
            c.uint(1, "cfi")? as u16
        } else {
            1
        };
        Ok(Action::PushVlan {
            tpid,
            tci: vid | (pcp << 13) | if cfi != 0 { VLAN_CFI } else { 0 },
        })
    }

    fn parse_userspace(&mut self, c: &mut Cursor<'_>) -> PResult<Action> {
        expect_kv(c, "pid")?;
        let pid = c.u32("pid")?;
        let mut u = Userspace {
            pid,
            cookie: UserCookie::None,
            actions: false,
            tunnel_out_port: None,
        };
        while c.eat(b',') {
            let at = c.pos;
            let w = c.word();
            match w {
                "actions" => u.actions = true,
                "tunnel_out_port" => {
                    c.expect(b'=', "'=' after tunnel_out_port")?;
                    u.tunnel_out_port = Some(self.port(c)?);
                }
                "userdata" if matches!(u.cookie, UserCookie::None) => {
                    c.expect(b'(', "'(' after userdata")?;
                    let d = c.pos;
                    while c.peek().is_some_and(|b| b.is_ascii_hexdigit()) {
                        c.pos += 1;
                    }
                    if !(c.pos - d).is_multiple_of(2) {
                        return Err(c.expected("an even number of hex digits in userdata"));
                    }
                    u.cookie = UserCookie::Userdata(hex_to_bytes(c.slice(d, c.pos)));
                    c.expect(b')', "')' after userdata")?;
                }
                "sFlow" | "slow_path" | "flow_sample" | "ipfix" | "controller"
                    if matches!(u.cookie, UserCookie::None) =>
                {
                    c.expect(b'(', "'(' after cookie type")?;
                    c.balanced("')' closing userspace cookie")?;
                    c.pos += 1;
                    u.cookie = UserCookie::Text(c.slice(at, c.pos).to_owned());
                }
                _ => {
                    c.pos = at;
                    return Err(c.expected("userspace option (userdata, controller, slow_path, sFlow, flow_sample, ipfix, actions, tunnel_out_port)"));
                }
            }
        }
        Ok(Action::Userspace(Box::new(u)))
    }

    fn parse_tnl_push(&mut self, c: &mut Cursor<'_>) -> PResult<Action> {
        c.expect_str("tnl_port(", "'tnl_port(' in tnl_push")?;
        let tnl_port = self.port(c)?;
        c.expect_str("),header(", "'),header(' in tnl_push")?;
        expect_kv(c, "size")?;
        let size = c.u32("size")?;
        expect_kv(c, ",type")?;
        let tnl_type = c.u32("type")?;
        c.expect_str(",eth(", "',eth(' in tnl_push header")?;
        expect_kv(c, "dst")?;
        let eth_dst = c.mac()?;
        expect_kv(c, ",src")?;
        let eth_src = c.mac()?;
        expect_kv(c, ",dl_type")?;
        let dl_type = c.hex_u32("dl_type")?;
        if dl_type > 0xffff {
            return Err(c.expected("16-bit dl_type"));
        }
        c.expect_str("),", "'),' after tnl_push eth(")?;
        let ip = if c.eat_str("ipv4(") {
            expect_kv(c, "src")?;
            let src = c.ipv4()?;
            expect_kv(c, ",dst")?;
            let dst = c.ipv4()?;
            expect_kv(c, ",proto")?;
            let proto = c.u8("proto")?;
            expect_kv(c, ",tos")?;
            let tos = c.u8("tos")?;
            expect_kv(c, ",ttl")?;
            let ttl = c.u8("ttl")?;
            expect_kv(c, ",frag")?;
            let frag = c.hex_u32("frag")?;
            if frag > 0xffff {
                return Err(c.expected("16-bit frag"));
            }
            TnlIp::V4 {
                src,
                dst,
                proto,
                tos,
                ttl,
                frag: frag as u16,
            }
        } else if c.eat_str("ipv6(") {
            expect_kv(c, "src")?;
            let src = c.ipv6()?;
            expect_kv(c, ",dst")?;
            let dst = c.ipv6()?;
            expect_kv(c, ",label")?;
            let label = c.uint(0xfffff, "label")? as u32;
            expect_kv(c, ",proto")?;
            let proto = c.u8("proto")?;
            expect_kv(c, ",tclass")?;
            let tclass = c.u8("tclass")?;
            expect_kv(c, ",hlimit")?;
            let hlimit = c.u8("hlimit")?;
            TnlIp::V6 {
                src,
                dst,
                label,
                proto,
                tclass,
                hlimit,
            }
        } else {
            return Err(c.expected("ipv4( or ipv6( in tnl_push header"));
        };
        c.expect_str("),", "'),' after tnl_push ip header")?;
        let l4 = if c.eat_str("udp(") {
            expect_kv(c, "src")?;
            let src = c.u16("src")?;
            expect_kv(c, ",dst")?;
            let dst = c.u16("dst")?;
            expect_kv(c, ",csum")?;
            let csum = c.hex_u32("csum")?;
            if csum > 0xffff {
                return Err(c.expected("16-bit csum"));
            }
            let udp = TnlUdp {
                src,
                dst,
                csum: csum as u16,
            };
            c.expect(b')', "')' after udp fields")?;
            if !c.eat(b',') {
                TnlL4::Udp(udp)
            } else if c.eat_str("vxlan(") {
                expect_kv(c, "flags")?;
                let flags = c.hex_u32("flags")?;
                expect_kv(c, ",vni")?;
                let vni = c.hex_u32("vni")?;
                c.expect(b')', "')' after vxlan fields")?;
                TnlL4::Vxlan { udp, flags, vni }
            } else if c.eat_str("geneve(") {
                let oam = c.eat_str("oam,");
                let crit = c.eat_str("crit,");
                expect_kv(c, "vni")?;
                let vni = c.u32("vni")?;
                let mut options = Vec::new();
                if c.eat_str(",options(") {
                    let mut scratch = PortNames::new();
                    let mut kp = KeyParser::new(&mut scratch);
                    kp.parse_geneve_opts(c)?;
                    let mut b = [0u8; GENEVE_OPTS_MAX];
                    let n = kp.out.key.tun_geneve_opts(&mut b);
                    options.extend_from_slice(&b[..n]);
                }
                c.expect(b')', "')' after geneve fields")?;
                TnlL4::Geneve {
                    udp,
                    oam,
                    crit,
                    vni,
                    options,
                }
            } else if c.eat_str("gtpu(") {
                expect_kv(c, "flags")?;
                let flags = c.u8("flags")?;
                expect_kv(c, ",msgtype")?;
                let msgtype = c.u8("msgtype")?;
                expect_kv(c, ",teid")?;
                let teid = c.hex_u32("teid")?;
                c.expect(b')', "')' after gtpu fields")?;
                TnlL4::Gtpu {
                    udp,
                    flags,
                    msgtype,
                    teid,
                }
            } else {
                return Err(c.expected("vxlan(, geneve( or gtpu( after udp("));
            }
        } else if c.eat_str("gre((") {
            expect_kv(c, "flags")?;
            let flags = c.hex_u32("flags")?;
            expect_kv(c, ",proto")?;
            let proto = c.hex_u32("proto")?;
            if flags > 0xffff || proto > 0xffff {
                return Err(c.expected("16-bit GRE flags and proto"));
            }
            c.expect(b')', "')' after GRE flags and proto")?;
            let csum = if c.eat_str(",csum=") {
                Some(c.hex_u32("csum")? as u16)
            } else {
                None
            };
            let key = if c.eat_str(",key=") {
                Some(c.hex_u32("key")?)
            } else {
                None
            };
            let seq = if c.eat_str(",seq=") {
                Some(c.hex_u32("seq")?)
            } else {
                None
            };
            c.expect(b')', "')' after gre fields")?;
            TnlL4::Gre {
                flags: flags as u16,
                proto: proto as u16,
                csum,
                key,
                seq,
            }
        } else if c.eat_str("erspan(ver=") {
            let ver = c.u32("ver")?;
            expect_kv(c, ",sid")?;
            let sid = c.hex_u32("sid")?;
            let (mut idx, mut dir, mut hwid) = (0, 0, 0);
            match ver {
                1 => {
                    expect_kv(c, ",idx")?;
                    idx = c.hex_u32("idx")?;
                }
                2 => {
                    expect_kv(c, ",dir")?;
                    dir = c.u32("dir")?;
                    expect_kv(c, ",hwid")?;
                    hwid = c.hex_u32("hwid")?;
                }
                _ => return Err(c.expected("ERSPAN version 1 or 2")),
            }
            if sid > 0x3ff || idx > 0xf_ffff || dir > 1 || hwid > 0x3f {
                return Err(c.expected("a 10-bit sid, 20-bit idx, 1-bit dir and 6-bit hwid"));
            }
            c.expect(b')', "')' after erspan fields")?;
            TnlL4::Erspan {
                ver: ver as u8,
                sid: sid as u16,
                idx,
                dir: dir as u8,
                hwid: hwid as u8,
            }
        } else {
            return Err(c.expected("udp(, gre( or erspan( in tnl_push header"));
        };
        c.expect_str("),out_port(", "'),out_port(' in tnl_push")?;
        let out_port = self.port(c)?;
        c.expect(b')', "')' after out_port")?;
        let header = TnlHeader {
            size,
            tnl_type,
            eth_dst,
            eth_src,
            dl_type: dl_type as u16,
            ip,
            l4,
        };
        Ok(Action::TnlPush(Box::new(TnlPush {
            tnl_port,
            out_port,
            header,
        })))
    }
}

/// `name=` (with any leading literal such as `,`).
fn expect_kv(c: &mut Cursor<'_>, name: &'static str) -> PResult<()> {
    if c.eat_str(name) && c.eat(b'=') {
        Ok(())
    } else {
        Err(c.expected(format!("'{}='", name)))
    }
}

fn hex_to_bytes(s: &str) -> Vec<u8> {
    let s = s.as_bytes();
    let odd = s.len() % 2;
    let mut v = Vec::with_capacity(s.len() / 2 + 1);
    let digit = |b: u8| (b as char).to_digit(16).unwrap_or(0) as u8;
    if odd == 1 {
        v.push(digit(s[0]));
    }
    for pair in s[odd..].chunks(2) {
        v.push(digit(pair[0]) << 4 | digit(pair[1]));
    }
    v
}

/// `label=N,tc=N,ttl=N,bos=N` as an LSE.
fn parse_lse(c: &mut Cursor<'_>) -> PResult<u32> {
    expect_kv(c, "label")?;
    let label = c.uint(0xfffff, "label")? as u32;
    expect_kv(c, ",tc")?;
    let tc = c.uint(7, "tc")? as u32;
    expect_kv(c, ",ttl")?;
    let ttl = c.u8("ttl")? as u32;
    expect_kv(c, ",bos")?;
    let bos = c.uint(1, "bos")? as u32;
    Ok(label << 12 | tc << 9 | bos << 8 | ttl)
}

/// A hex number as C's `%x` scans it: optional `0x`, hex digits.
fn scan_x(c: &mut Cursor<'_>, what: &'static str) -> PResult<u32> {
    let at = c.pos;
    if !(c.eat_str("0x") || c.eat_str("0X")) || !c.peek().is_some_and(|b| b.is_ascii_hexdigit()) {
        c.pos = at;
    }
    let d = c.pos;
    while c.peek().is_some_and(|b| b.is_ascii_hexdigit()) {
        c.pos += 1;
    }
    if c.pos == d {
        return Err(c.expected(format!("hex number for {what}")));
    }
    u32::from_str_radix(c.slice(d, c.pos), 16).map_err(|_| {
        c.err_at(
            at,
            ParseErrorKind::OutOfRange {
                what,
                max: u32::MAX.into(),
            },
        )
    })
}

fn u128_value(c: &mut Cursor<'_>, what: &'static str) -> PResult<u128> {
    let mut b = [0u8; 16];
    c.int_bytes(&mut b, what)?;
    Ok(u128::from_be_bytes(b))
}

/// The inside of `ct(...)`, up to (not including) the closing ')'.
fn parse_ct(c: &mut Cursor<'_>) -> PResult<CtAction> {
    let mut ct = CtAction::default();
    if c.peek() == Some(b')') {
        return Ok(ct);
    }
    loop {
        let at = c.pos;
        let w = c.word();
        match w {
            "commit" => ct.commit = true,
            "force_commit" => ct.force_commit = true,
            "zone" => {
                c.expect(b'=', "'=' after zone")?;
                ct.zone = c.u16("zone")?;
            }
            "mark" => {
                c.expect(b'=', "'=' after mark")?;
                let v = scan_x(c, "mark")?;
                let m = if c.eat(b'/') {
                    scan_x(c, "mark mask")?
                } else {
                    u32::MAX
                };
                ct.mark = Some((v, m));
            }
            "label" => {
                c.expect(b'=', "'=' after label")?;
                let v = u128_value(c, "label")?;
                let m = if c.eat(b'/') {
                    u128_value(c, "label mask")?
                } else {
                    u128::MAX
                };
                ct.label = Some((v, m));
            }
            "helper" | "timeout" => {
                c.expect(b'=', "'=' after helper or timeout")?;
                let s = c.name_token();
                if s.is_empty() {
                    return Err(c.expected("a name"));
                }
                if w == "helper" {
                    ct.helper = Some(s.to_owned());
                } else {
                    ct.timeout = Some(s.to_owned());
                }
            }
            "nat" => ct.nat = Some(parse_nat(c)?),
            _ => {
                c.pos = at;
                return Err(c.expected(
                    "ct option (commit, force_commit, zone, mark, label, helper, timeout, nat)",
                ));
            }
        }
        if c.peek() == Some(b')') {
            return Ok(ct);
        }
        if !c.eat(b',') {
            return Err(c.expected("',' or ')' after ct option"));
        }
    }
}

fn parse_nat_addr(c: &mut Cursor<'_>) -> PResult<IpAddr> {
    if c.eat(b'[') {
        let a = c.ipv6()?;
        c.expect(b']', "']' after IPv6 address")?;
        return Ok(IpAddr::V6(a));
    }
    let at = c.pos;
    match c.ipv4() {
        Ok(a) => Ok(IpAddr::V4(a)),
        Err(_) => {
            c.pos = at;
            c.ipv6()
                .map(IpAddr::V6)
                .map_err(|_| c.expected("IPv4 or IPv6 address"))
        }
    }
}

/// `nat` or `nat(...)` (after the word `nat`).
fn parse_nat(c: &mut Cursor<'_>) -> PResult<CtNat> {
    let mut n = CtNat::default();
    if !c.eat(b'(') {
        return Ok(n);
    }
    let at = c.pos;
    n.kind = match c.word() {
        "src" => Some(NatKind::Src),
        "dst" => Some(NatKind::Dst),
        _ => {
            c.pos = at;
            return Err(c.expected("src or dst in nat("));
        }
    };
    if c.eat(b'=') {
        n.ip_min = Some(parse_nat_addr(c)?);
        if c.eat(b'-') {
            n.ip_max = Some(parse_nat_addr(c)?);
        }
        if c.eat(b':') {
            n.proto_min = c.u16("port")?;
            if c.eat(b'-') {
                n.proto_max = c.u16("port")?;
            }
        }
    }
    while c.eat(b',') {
        let at = c.pos;
        match c.word() {
            "persistent" => n.persistent = true,
            "hash" => n.hash = true,
            "random" => n.random = true,
            _ => {
                c.pos = at;
                return Err(c.expected("nat flag (persistent, hash, random)"));
            }
        }
    }
    c.expect(b')', "')' closing nat(")?;
    Ok(n)
}

// ---------------------------------------------------------------------------------------------
// Printing.

/// Appends `actions` as OVS prints them (`drop` when empty).
pub fn format_actions_into(out: &mut String, actions: &[Action], names: Option<&PortNames>) {
    if actions.is_empty() {
        out.push_str("drop");
        return;
    }
    for (i, a) in actions.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        a.write(out, names);
    }
}

impl Action {
    fn write(&self, out: &mut String, names: Option<&PortNames>) {
        match self {
            Action::Output(p) => put_port(out, names, *p),
            Action::LbOutput(n) => {
                let _ = write!(out, "lb_output({n})");
            }
            Action::Trunc(n) => {
                let _ = write!(out, "trunc({n})");
            }
            Action::Meter(n) => {
                let _ = write!(out, "meter({n})");
            }
            Action::Recirc(n) => {
                out.push_str("recirc(");
                hash_x(out, (*n).into());
                out.push(')');
            }
            Action::TnlPop(p) => {
                out.push_str("tnl_pop(");
                put_port(out, names, *p);
                out.push(')');
            }
            Action::TnlPush(t) => t.write(out, names),
            Action::Userspace(u) => u.write(out, names),
            Action::Set(k) => {
                out.push_str("set(");
                if let Some(item) = k.attrs.items.first() {
                    let masked = KeyFmt {
                        key: &k.key,
                        mask: Some(&k.mask),
                        attrs: &k.attrs,
                        names,
                        verbose: false,
                    };
                    if masked.is_exact(item.attr, item.depth) {
                        KeyFmt {
                            key: &k.key,
                            mask: None,
                            attrs: &k.attrs,
                            names,
                            verbose: true,
                        }
                        .write_attr(out, item.attr, item.depth);
                    } else {
                        masked.write_attr(out, item.attr, item.depth);
                    }
                }
                out.push(')');
            }
            Action::PushVlan { tpid, tci } => {
                out.push_str("push_vlan(");
                if *tpid != 0x8100 {
                    let _ = write!(out, "tpid=0x{tpid:04x},");
                }
                let _ = write!(out, "vid={},pcp={}", tci & 0xfff, tci >> 13);
                if tci & VLAN_CFI == 0 {
                    out.push_str(",cfi=0");
                }
                out.push(')');
            }
            Action::PopVlan => out.push_str("pop_vlan"),
            Action::PushMpls { lse, eth_type } | Action::AddMpls { lse, eth_type } => {
                out.push_str(if matches!(self, Action::PushMpls { .. }) {
                    "push_mpls("
                } else {
                    "add_mpls("
                });
                put_mpls_lse(out, *lse);
                let _ = write!(out, ",eth_type={eth_type:#x})");
            }
            Action::PopMpls { eth_type } => {
                let _ = write!(out, "pop_mpls(eth_type={eth_type:#x})");
            }
            Action::PushEth { src, dst } => {
                let _ = write!(out, "push_eth(src={src},dst={dst})");
            }
            Action::PopEth => out.push_str("pop_eth"),
            Action::Hash { alg, basis } => {
                let a = match alg {
                    HashAlg::L4 => "l4",
                    HashAlg::SymL4 => "sym_l4",
                };
                let _ = write!(out, "hash({a}({basis}))");
            }
            Action::Ct(ct) => ct.write(out),
            Action::CtClear => out.push_str("ct_clear"),
            Action::Clone(acts) => {
                out.push_str("clone(");
                format_actions_into(out, acts, names);
                out.push(')');
            }
            Action::Sample {
                probability,
                actions,
            } => {
                let pct = 100.0 * *probability as f64 / u32::MAX as f64;
                let _ = write!(out, "sample(sample={pct:.1}%,actions(");
                format_actions_into(out, actions, names);
                out.push_str("))");
            }
            Action::CheckPktLen { size, gt, le } => {
                let _ = write!(out, "check_pkt_len(size={size},gt(");
                format_actions_into(out, gt, names);
                out.push_str("),le(");
                format_actions_into(out, le, names);
                out.push_str("))");
            }
            Action::DecTtl(acts) => {
                out.push_str("dec_ttl(le_1(");
                format_actions_into(out, acts, names);
                out.push_str("))");
            }
            Action::PopNsh => out.push_str("pop_nsh()"),
            Action::Psample { group, cookie } => {
                let _ = write!(out, "psample(group={group}");
                if let Some(ck) = cookie {
                    out.push_str(",cookie=");
                    put_hex(out, ck);
                }
                out.push(')');
            }
        }
    }
}

impl TnlPush {
    fn write(&self, out: &mut String, names: Option<&PortNames>) {
        let h = &self.header;
        out.push_str("tnl_push(tnl_port(");
        put_port(out, names, self.tnl_port);
        let _ = write!(
            out,
            "),header(size={},type={},eth(dst={},src={},dl_type=0x{:04x}),",
            h.size, h.tnl_type, h.eth_dst, h.eth_src, h.dl_type
        );
        match &h.ip {
            TnlIp::V4 {
                src,
                dst,
                proto,
                tos,
                ttl,
                frag,
            } => {
                let _ = write!(out, "ipv4(src={src},dst={dst},proto={proto},tos=");
                hash_x(out, (*tos).into());
                let _ = write!(out, ",ttl={ttl},frag={frag:#x}),");
            }
            TnlIp::V6 {
                src,
                dst,
                label,
                proto,
                tclass,
                hlimit,
            } => {
                let _ = write!(
                    out,
                    "ipv6(src={src},dst={dst},label={label},proto={proto},tclass={tclass:#x},hlimit={hlimit}),"
                );
            }
        }
        let udp = |out: &mut String, u: &TnlUdp| {
            let _ = write!(out, "udp(src={},dst={},csum={:#x}),", u.src, u.dst, u.csum);
        };
        match &h.l4 {
            TnlL4::Vxlan { udp: u, flags, vni } => {
                udp(out, u);
                let _ = write!(out, "vxlan(flags={flags:#x},vni={vni:#x})");
            }
            TnlL4::Geneve {
                udp: u,
                oam,
                crit,
                vni,
                options,
            } => {
                udp(out, u);
                out.push_str("geneve(");
                if *oam {
                    out.push_str("oam,");
                }
                if *crit {
                    out.push_str("crit,");
                }
                let _ = write!(out, "vni={vni:#x}");
                if !options.is_empty() {
                    out.push_str(",options(");
                    put_geneve_opts(out, options, None, false);
                    out.push(')');
                }
                out.push(')');
            }
            TnlL4::Gtpu {
                udp: u,
                flags,
                msgtype,
                teid,
            } => {
                udp(out, u);
                let _ = write!(
                    out,
                    "gtpu(flags={flags:#x},msgtype={msgtype},teid={teid:#x})"
                );
            }
            TnlL4::Gre {
                flags,
                proto,
                csum,
                key,
                seq,
            } => {
                let _ = write!(out, "gre((flags={flags:#x},proto={proto:#x})");
                if let Some(v) = csum {
                    let _ = write!(out, ",csum={v:#x}");
                }
                if let Some(v) = key {
                    let _ = write!(out, ",key={v:#x}");
                }
                if let Some(v) = seq {
                    let _ = write!(out, ",seq={v:#x}");
                }
                out.push(')');
            }
            TnlL4::Erspan {
                ver,
                sid,
                idx,
                dir,
                hwid,
            } => {
                if *ver == 1 {
                    let _ = write!(out, "erspan(ver=1,sid={sid:#x},idx={idx:#x})");
                } else {
                    let _ = write!(out, "erspan(ver=2,sid={sid:#x},dir={dir},hwid={hwid:#x})");
                }
            }
            TnlL4::Udp(u) => {
                udp(out, u);
                out.pop();
            }
        }
        out.push_str("),out_port(");
        put_port(out, names, self.out_port);
        out.push_str("))");
    }
}

impl Userspace {
    fn write(&self, out: &mut String, names: Option<&PortNames>) {
        let _ = write!(out, "userspace(pid={}", self.pid);
        match &self.cookie {
            UserCookie::None => {}
            UserCookie::Userdata(b) => {
                out.push_str(",userdata(");
                for x in b {
                    let _ = write!(out, "{x:02x}");
                }
                out.push(')');
            }
            UserCookie::Text(t) => {
                out.push(',');
                out.push_str(t);
            }
        }
        if self.actions {
            out.push_str(",actions");
        }
        if let Some(p) = self.tunnel_out_port {
            out.push_str(",tunnel_out_port=");
            put_port(out, names, p);
        }
        out.push(')');
    }
}

impl CtAction {
    fn write(&self, out: &mut String) {
        out.push_str("ct");
        let any = self.commit
            || self.force_commit
            || self.zone != 0
            || self.mark.is_some()
            || self.label.is_some()
            || self.helper.is_some()
            || self.timeout.is_some()
            || self.nat.is_some();
        if !any {
            return;
        }
        out.push('(');
        if self.commit {
            out.push_str("commit,");
        }
        if self.force_commit {
            out.push_str("force_commit,");
        }
        if self.zone != 0 {
            let _ = write!(out, "zone={},", self.zone);
        }
        if let Some((v, m)) = self.mark {
            out.push_str("mark=");
            hash_x(out, v.into());
            out.push('/');
            hash_x(out, m.into());
            out.push(',');
        }
        if let Some((v, m)) = self.label {
            out.push_str("label=");
            put_hex(out, &v.to_be_bytes());
            if m != u128::MAX {
                out.push('/');
                put_hex(out, &m.to_be_bytes());
            }
            out.push(',');
        }
        if let Some(h) = &self.helper {
            let _ = write!(out, "helper={h},");
        }
        if let Some(t) = &self.timeout {
            let _ = write!(out, "timeout={t},");
        }
        if let Some(n) = &self.nat {
            n.write(out);
        }
        if out.ends_with(',') {
            out.pop();
        }
        out.push(')');
    }
}

impl CtNat {
    fn write(&self, out: &mut String) {
        out.push_str("nat");
        let Some(kind) = self.kind else { return };
        out.push('(');
        out.push_str(match kind {
            NatKind::Src => "src",
            NatKind::Dst => "dst",
        });
        if let Some(min) = self.ip_min {
            out.push('=');
            let bracket = self.proto_min != 0;
            let put = |out: &mut String, a: IpAddr| match a {
                IpAddr::V4(a) => {
                    let _ = write!(out, "{a}");
                }
                IpAddr::V6(a) if bracket => {
                    let _ = write!(out, "[{a}]");
                }
                IpAddr::V6(a) => {
                    let _ = write!(out, "{a}");
                }
            };
            put(out, min);
            if let Some(max) = self.ip_max.filter(|m| *m != min && !m.is_unspecified()) {
                out.push('-');
                put(out, max);
            }
            if self.proto_min != 0 {
                let _ = write!(out, ":{}", self.proto_min);
                if self.proto_max != 0 && self.proto_max != self.proto_min {
                    let _ = write!(out, "-{}", self.proto_max);
                }
            }
        }
        out.push(',');
        if self.persistent {
            out.push_str("persistent,");
        }
        if self.hash {
            out.push_str("hash,");
        }
        if self.random {
            out.push_str("random,");
        }
        out.pop();
        out.push(')');
    }
}

/// Parses an action list as `dpctl/add-flow` takes it (`drop` for none), with or without a
/// leading `actions:`.
pub fn parse_actions(text: &str, names: &mut PortNames) -> Result<Vec<Action>, super::ParseError> {
    let mut c = Cursor::new(text);
    c.skip_spaces();
    c.eat_str("actions:");
    let acts = ActionParser::new(names).parse_list(&mut c, false)?;
    c.skip_spaces();
    if !c.at_end() {
        return Err(c.expected("end of actions"));
    }
    Ok(acts)
}

/// Prints an action list; `names` turns port numbers into names.
pub fn format_actions(actions: &[Action], names: Option<&PortNames>) -> String {
    let mut s = String::new();
    format_actions_into(&mut s, actions, names);
    s
}
