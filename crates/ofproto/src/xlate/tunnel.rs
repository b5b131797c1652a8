//! Native tunnels in translation (OVS's `tnl-ports`, `tnl-neigh-cache` and the tunnel parts of
//! `ofproto-dpif-xlate.c`): terminating a tunnel packet sent to a bridge's LOCAL port
//! (`tnl_pop`), snooping ARP and neighbour advertisements for the neighbour table, and
//! tunnel output (`tnl_push` with the outer header built from the route and neighbour, then the
//! underlay bridge's own translation), with GENEVE options mapped to and from `tun_metadata`.

use super::*;

impl Ctx<'_> {
    /// For a packet sent to the bridge's local port: the tunnel datapath port that terminates
    /// it when it is addressed to the bridge (its Ethernet and an IP address) and to a tunnel's
    /// protocol and port, as OVS's `terminate_native_tunnel`. ARP replies and neighbour
    /// advertisements to the bridge are snooped on the way.
    pub(super) fn terminate_native_tunnel(&mut self) -> Option<u32> {
        let pipe = self.pipe;
        let br = &pipe.bridges[self.bridge];
        let hw = br.hwaddr?;
        if br.addrs.is_empty() {
            return None;
        }
        self.wc.dp.set_eth_dst(EthAddr::BROADCAST);
        // ARP is snooped whatever its Ethernet destination: a gratuitous ARP is broadcast.
        if self.flow.dp.eth_type() == 0x0806 {
            self.snoop_arp();
            return None;
        }
        if self.flow.dp.eth_dst() != hw {
            return None;
        }
        let f = &self.flow.dp;
        let dst = match f.eth_type() {
            0x0800 => {
                self.wc.dp.set_nw_dst(std::net::Ipv4Addr::BROADCAST);
                IpAddr::V4(f.nw_dst())
            }
            0x86dd => {
                self.wc.dp.set_ipv6_dst(std::net::Ipv6Addr::from(u128::MAX));
                IpAddr::V6(f.ipv6_dst())
            }
            _ => return None,
        };
        if !br.addrs.iter().any(|(a, _)| *a == dst) {
            return None;
        }
        self.wc.dp.set_nw_proto(0xff);
        let proto = f.nw_proto();
        if proto == 58 {
            self.snoop_nd();
            return None;
        }
        let udp_port = match proto {
            17 => {
                self.wc.dp.set_tp_dst(0xffff);
                Some(f.tp_dst())
            }
            47 => None,
            _ => return None,
        };
        for b in &pipe.bridges {
            for (ofp, t) in &b.tunnels {
                let listens = match udp_port {
                    // ERSPAN ports only send (mirror outputs): GRE takes what arrives.
                    Some(p) => !t.kind.is_gre() && t.dst_port == p,
                    None => t.kind == TunnelType::Gre,
                };
                let local_ok = match t.local_ip {
                    Some(FlowOr::Fixed(l)) => l == dst,
                    _ => true,
                };
                if listens
                    && local_ok
                    && let Some(dp) = b.ports.get(ofp).and_then(|p| p.dp_port)
                {
                    self.note(format_args!(
                        "native tunnel termination: tnl_pop on {}",
                        t.dp_port_name()
                    ));
                    return Some(dp);
                }
            }
        }
        None
    }

    /// Learns the sender of an ARP reply to one of this bridge's addresses, or of a
    /// gratuitous ARP (request or reply whose sender and target addresses are the same: a host
    /// announcing its, perhaps new, Ethernet address), as a tunnel neighbour, as OVS's
    /// `tnl_arp_snoop`.
    pub(super) fn snoop_arp(&mut self) {
        let br = &self.pipe.bridges[self.bridge];
        let f = &self.flow.dp;
        self.wc
            .dp
            .set_nw_proto(0xff)
            .set_nw_src(std::net::Ipv4Addr::BROADCAST)
            .set_nw_dst(std::net::Ipv4Addr::BROADCAST)
            .set_arp_sha(EthAddr::BROADCAST);
        let tpa = IpAddr::V4(f.nw_dst());
        let reply_to_us = f.nw_proto() == 2 && br.addrs.iter().any(|(a, _)| *a == tpa);
        let gratuitous = f.nw_src() == f.nw_dst();
        if f.arp_sha() == EthAddr::ZERO || !(reply_to_us || gratuitous) {
            return;
        }
        self.learn_neigh(IpAddr::V4(f.nw_src()), f.arp_sha());
    }

    /// Learns the target of a neighbour advertisement to this bridge as a tunnel neighbour.
    pub(super) fn snoop_nd(&mut self) {
        let f = &self.flow.dp;
        self.wc
            .dp
            .set_tp_src(0xffff)
            .set_nd_target(std::net::Ipv6Addr::from(u128::MAX))
            .set_arp_tha(EthAddr::BROADCAST);
        // ICMPv6 type 136 (neighbour advertisement) with a target link-layer address.
        if f.tp_src() != 136 || f.arp_tha() == EthAddr::ZERO {
            return;
        }
        self.learn_neigh(IpAddr::V6(f.nd_target()), f.arp_tha());
    }

    pub(super) fn learn_neigh(&mut self, ip: IpAddr, mac: EthAddr) {
        if !self.learn {
            return;
        }
        let name = self.br().name.clone();
        if self.pipe.underlay.set_neigh(&name, ip, mac, false) {
            self.res.neigh_learned = true;
            self.note(format_args!(
                "learned tunnel neighbour {ip} at {mac} on {name}"
            ));
        }
    }

    /// Output to a tunnel port: the outer header from the port's options, the route and the
    /// neighbour; `tnl_push`; then the underlay bridge's pipeline as a packet from its local
    /// port (NORMAL there picks the physical port). All in one datapath pass, inside a clone
    /// unless it is the last action (see `translate`).
    pub(super) fn tunnel_output(&mut self, t: &TunnelConfig, tnl_dp_port: u32) {
        let pipe = self.pipe;
        self.note("output to native tunnel");
        let remote = match t.remote_ip {
            FlowOr::Fixed(a) => a,
            FlowOr::Flow => {
                let (_, dst) = tunnel_endpoints(&self.flow.dp);
                if dst.is_ipv4() {
                    self.wc.dp.set_tun_ipv4_dst(std::net::Ipv4Addr::BROADCAST);
                } else {
                    self.wc
                        .dp
                        .set_tun_ipv6_dst(std::net::Ipv6Addr::from(u128::MAX));
                }
                if dst.is_unspecified() {
                    self.note("tunnel destination not set (remote_ip=flow); dropping");
                    return;
                }
                dst
            }
        };
        let key = match t.out_key {
            Some(FlowOr::Fixed(k)) => Some(k),
            Some(FlowOr::Flow) => {
                self.wc.dp.set_tun_id(u64::MAX);
                Some(self.flow.dp.tun_id())
            }
            None => None,
        };
        // ERSPAN's session id has 10 bits (OVS's netdev_erspan_build_header() fails).
        if t.kind == TunnelType::Erspan && key.unwrap_or(0) > 0x3ff {
            self.note("ERSPAN session id (the key) over 10 bits; dropping");
            return;
        }
        // What the outer header inherits is matched whether or not the tunnel can be routed
        // (OVS's tnl_port_send() before the native tunnel's route lookup).
        let et = self.flow.dp.eth_type();
        let is_ip = matches!(et, 0x0800 | 0x86dd);
        let tos = match t.tos {
            Inherit::Fixed(v) => v,
            // DSCP only: the datapath's push copies the ECN field from each packet
            // (`tnl_push` with a Not-ECT template), so the megaflow need not match it.
            Inherit::Inherit if is_ip => {
                let m = self.wc.dp.nw_tos();
                self.wc.dp.set_nw_tos(m | 0xfc);
                self.flow.dp.nw_tos() & 0xfc
            }
            Inherit::Inherit => 0,
        };
        let ttl = match t.ttl {
            Inherit::Fixed(v) => v,
            Inherit::Inherit if is_ip => {
                self.wc.dp.set_nw_ttl(0xff);
                self.flow.dp.nw_ttl()
            }
            Inherit::Inherit => 64,
        };
        let Some(route) = pipe.underlay.route(&pipe.bridges, remote) else {
            self.note(format_args!(
                "native tunnel routing failed for {remote}; dropping"
            ));
            return;
        };
        let src = match t.local_ip {
            Some(FlowOr::Fixed(a)) => a,
            Some(FlowOr::Flow) => {
                let (src, _) = tunnel_endpoints(&self.flow.dp);
                if src.is_ipv4() {
                    self.wc.dp.set_tun_ipv4_src(std::net::Ipv4Addr::BROADCAST);
                } else {
                    self.wc
                        .dp
                        .set_tun_ipv6_src(std::net::Ipv6Addr::from(u128::MAX));
                }
                src
            }
            None => route.src,
        };
        let Some(ubr) = pipe.bridges.iter().position(|b| b.name == route.bridge) else {
            return;
        };
        let under = &pipe.bridges[ubr];
        self.note(format_args!("tunneling to {remote} via {}", under.name));
        let Some(smac) = under.hwaddr else {
            self.note(format_args!(
                "bridge {} has no hwaddr; dropping",
                under.name
            ));
            return;
        };
        let Some(dmac) = pipe.underlay.lookup_neigh(route.next_hop) else {
            self.note(format_args!(
                "neighbour {} unresolved on bridge {}: sending {} request; dropping",
                route.next_hop,
                under.name,
                if route.next_hop.is_ipv4() {
                    "ARP"
                } else {
                    "ND"
                },
            ));
            self.neigh_request(ubr, smac, route.src, route.next_hop);
            return;
        };
        self.note(format_args!(
            "tunneling from {smac} {src} to {dmac} {remote}"
        ));
        let l3 = match t.packet_type {
            PtMode::LegacyL2 => false,
            PtMode::LegacyL3 => true,
            PtMode::Ptap => self.flow.dp.packet_type() != 0,
        };
        let options = if t.kind == TunnelType::Geneve {
            self.geneve_options()
        } else {
            Vec::new()
        };
        self.commit();
        let mut sub = Vec::new();
        if l3 && self.base.packet_type() == 0 {
            sub.push(Action::PopEth);
        }
        let header = tnl_header(&TnlParams {
            t,
            src,
            dst: remote,
            smac,
            dmac,
            key,
            tos,
            ttl,
            payload: if l3 { et } else { 0x6558 },
            options,
            oam: self.flow.dp.tun_flags() & flow::key::tun_flags::OAM != 0,
        });
        let (dl_type, outer_proto) = (header.dl_type, if t.kind.is_gre() { 47 } else { 17 });
        let local_dp = under.ports.get(&OFPP_LOCAL).and_then(|p| p.dp_port);
        sub.push(Action::TnlPush(Box::new(flow::odp::TnlPush {
            tnl_port: tnl_dp_port,
            out_port: local_dp.unwrap_or(0),
            header,
        })));
        // The underlay bridge sees the encapsulated packet coming from its local port.
        let mut outer = PipeKey::new();
        outer
            .dp
            .set_in_port(OFPP_LOCAL)
            .set_eth_src(smac)
            .set_eth_dst(dmac)
            .set_eth_type(dl_type)
            .set_nw_proto(outer_proto)
            .set_nw_tos(tos)
            .set_nw_ttl(ttl);
        match (src, remote) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                outer.dp.set_nw_src(s).set_nw_dst(d);
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                outer.dp.set_ipv6_src(s).set_ipv6_dst(d);
            }
            _ => {
                self.note("tunnel endpoints of different IP versions; dropping");
                return;
            }
        }
        if outer_proto == 17 {
            outer.dp.set_tp_dst(t.dst_port);
        }
        let outer_out = self.xlate_from_local(ubr, outer);
        if !outer_out
            .iter()
            .any(|a| matches!(a, Action::Output(_) | Action::Clone(_)))
        {
            self.note("the underlay bridge sent the tunnel packet nowhere");
            return;
        }
        sub.extend(outer_out);
        self.out.push(Action::Clone(sub));
    }

    /// The actions for a packet with key `key` that bridge `ubr` receives from its local
    /// port: the underlay part of a tunnel output, or a packet the slow path sends. The packet
    /// is made from the configuration, not from the packet being translated, so what the
    /// underlay's tables consult says nothing about the megaflow: the mask is restored.
    pub(super) fn xlate_from_local(&mut self, ubr: usize, mut key: PipeKey) -> Vec<Action> {
        key.dp.set_in_port(OFPP_LOCAL);
        let saved_out = std::mem::take(&mut self.out);
        let saved = (
            self.bridge,
            std::mem::replace(&mut self.flow, key.clone()),
            std::mem::replace(&mut self.base, key.dp),
            self.in_port,
            self.wc.clone(),
        );
        self.bridge = ubr;
        self.in_port = OFPP_LOCAL;
        self.depth += 1;
        let node = self.trace_bridge();
        self.under(node, |c| c.do_table(0));
        self.depth -= 1;
        let out = std::mem::replace(&mut self.out, saved_out);
        (self.bridge, self.flow, self.base, self.in_port, self.wc) = saved;
        self.exit = false;
        out
    }

    /// Asks for the MAC address of tunnel next hop `target` on underlay bridge `ubr`: an ARP
    /// request (IPv4) or a neighbour solicitation (IPv6) from the bridge's address, sent
    /// through the bridge's tables as from its local port, as OVS's `tnl_send_arp_request`.
    /// The reply comes back to the bridge and is snooped (`snoop_arp`, `snoop_nd`), which
    /// revalidates the flows that needed it. Only with side effects allowed (upcalls,
    /// `ofproto/trace -generate`), not in revalidation.
    pub(super) fn neigh_request(&mut self, ubr: usize, smac: EthAddr, src: IpAddr, target: IpAddr) {
        self.res.neigh_pending = true;
        if !self.learn {
            return;
        }
        let frame = crate::tunnel::neigh_request(smac, src, target);
        let mut key = PipeKey::new();
        flow::extract::extract(&frame, &mut key.dp);
        let actions = self.xlate_from_local(ubr, key);
        if actions.is_empty() {
            self.note("the underlay bridge sent the neighbour request nowhere");
            return;
        }
        let pipe = self.pipe;
        let in_port = pipe.bridges[ubr]
            .ports
            .get(&OFPP_LOCAL)
            .and_then(|p| p.dp_port)
            .unwrap_or(u32::MAX);
        self.res.packet_outs.push(PacketOut {
            frame,
            in_port,
            actions,
        });
    }

    /// The GENEVE options to send: the flow's present `tun_metadata` fields, through the TLV
    /// map of the bridge the packet is in, in field order.
    pub(super) fn geneve_options(&mut self) -> Vec<u8> {
        let table = &self.pipe.bridges[self.bridge].tlv_map;
        let ones = [0xff; crate::tun_md::TUN_METADATA_MAX_LEN];
        for (n, m) in table.iter() {
            crate::tun_md::set_present(&mut self.wc.meta, n);
            if crate::tun_md::present(&self.flow.meta, n) {
                let loc = crate::tun_md::loc(n);
                let len = usize::from(m.len);
                crate::tun_md::write(&mut self.wc.dp.0, &mut self.wc.meta, loc, &ones[..len]);
            }
        }
        crate::tun_md::to_geneve(table, &self.flow.dp, &self.flow.meta)
    }
}

/// The outer addresses of a decapsulated packet (IPv4 when its IPv4 destination is set).
pub(super) fn tunnel_endpoints(k: &FlowKey) -> (IpAddr, IpAddr) {
    if !k.tun_ipv4_dst().is_unspecified() || k.tun_ipv6_dst().is_unspecified() {
        (IpAddr::V4(k.tun_ipv4_src()), IpAddr::V4(k.tun_ipv4_dst()))
    } else {
        (IpAddr::V6(k.tun_ipv6_src()), IpAddr::V6(k.tun_ipv6_dst()))
    }
}

/// What choosing a tunnel port consults: the outer addresses, the key and the flags OVS
/// matches (`flags(-df+csum+key)`).
pub(super) fn tunnel_wc(k: &FlowKey, wc: &mut PipeMask) {
    let (src, _) = tunnel_endpoints(k);
    if src.is_ipv4() {
        wc.dp
            .set_tun_ipv4_src(std::net::Ipv4Addr::BROADCAST)
            .set_tun_ipv4_dst(std::net::Ipv4Addr::BROADCAST);
    } else {
        wc.dp
            .set_tun_ipv6_src(std::net::Ipv6Addr::from(u128::MAX))
            .set_tun_ipv6_dst(std::net::Ipv6Addr::from(u128::MAX));
    }
    use flow::key::tun_flags::{CSUM, DONT_FRAGMENT, KEY};
    wc.dp
        .set_tun_id(u64::MAX)
        .set_tun_tos(u8::MAX)
        .set_tun_flags(DONT_FRAGMENT | CSUM | KEY);
}

/// The ECN field on decapsulation (RFC 6040 §4.2, OVS's `tnl_process_ecn()`): an outer CE
/// marks an inner ECN-capable IP packet CE too; an inner packet that is not ECN-capable is
/// dropped (`false`), as congestion cannot be signalled to it. The inner ECN bits are matched
/// whenever the outer field is CE.
pub(super) fn tunnel_ecn(flow: &mut FlowKey, wc: &mut PipeMask) -> bool {
    const CE: u8 = 3;
    if !matches!(flow.eth_type(), 0x0800 | 0x86dd) || flow.tun_tos() & CE != CE {
        return true;
    }
    let m = wc.dp.nw_tos();
    wc.dp.set_nw_tos(m | CE);
    let tos = flow.nw_tos();
    if tos & CE == 0 {
        return false;
    }
    flow.set_nw_tos(tos | CE);
    true
}

/// Rewrites a key's raw GENEVE options (as the datapath has them) into the `tun_metadata`
/// fields of the bridge's TLV map. An unknown critical option, a mapped option of another
/// length, or a malformed option area is an error (OVS drops such packets).
pub(crate) fn geneve_to_fields(
    map: &TunTable,
    k: &mut FlowKey,
    meta: &mut PipeMeta,
) -> Result<(), String> {
    let mut raw = [0u8; flow::key::GENEVE_OPTS_MAX];
    let n = k.tun_geneve_opts(&mut raw);
    crate::tun_md::clear_all(k, meta);
    let mut i = 0;
    while i < n {
        if i + 4 > n {
            return Err("truncated option header".into());
        }
        let class = u16::from_be_bytes([raw[i], raw[i + 1]]);
        let kind = raw[i + 2];
        let len = usize::from(raw[i + 3] & 0x1f) * 4;
        let Some(value) = raw.get(i + 4..i + 4 + len).filter(|_| i + 4 + len <= n) else {
            return Err("option longer than the option area".into());
        };
        match map.find(class, kind) {
            Some((field, m)) => {
                if usize::from(m.len) != len {
                    return Err(format!(
                        "option class={class:#x},type={kind:#x} has {len} bytes, the TLV map \
                         says {}",
                        m.len
                    ));
                }
                crate::fields::set_tun_md_wide(k, meta, field, value);
            }
            None if kind & 0x80 != 0 => {
                return Err(format!(
                    "unknown critical option class={class:#x},type={kind:#x}"
                ));
            }
            None => {}
        }
        i += 4 + len;
    }
    Ok(())
}

/// Turns what the tables consulted of the `tun_metadata` fields into the datapath mask: the
/// datapath key holds the options raw, so any consulted field (or an error decided on the
/// options) makes the option length and bytes exact.
pub(super) fn geneve_mask(wc: &mut PipeMask, key: &FlowKey, force: bool) {
    if !force && !crate::tun_md::any(&wc.dp, &wc.meta) {
        return;
    }
    crate::tun_md::clear_all(&mut wc.dp, &mut wc.meta);
    let n = usize::from(key.tun_geneve_len()).min(flow::key::GENEVE_OPTS_MAX);
    wc.dp
        .set_tun_geneve_len(0xff)
        .set_tun_geneve_opt_bytes(0, &[0xffu8; flow::key::GENEVE_OPTS_MAX][..n]);
}

/// What an outer header is made of.
pub(super) struct TnlParams<'a> {
    t: &'a TunnelConfig,
    src: IpAddr,
    dst: IpAddr,
    smac: EthAddr,
    dmac: EthAddr,
    key: Option<u64>,
    tos: u8,
    ttl: u8,
    /// GRE protocol: 0x6558 for Ethernet, else the L3 payload's ethertype.
    payload: u16,
    options: Vec<u8>,
    /// The flow's `oam` tunnel flag, kept through the output as OVS keeps the public flags:
    /// GENEVE's O bit.
    oam: bool,
}

/// The `tnl_push` header of a tunnel (the datapath fills lengths, checksums and the UDP
/// source port per packet).
pub(super) fn tnl_header(p: &TnlParams) -> flow::odp::TnlHeader {
    use flow::odp::{TnlHeader, TnlIp, TnlL4, TnlUdp};
    let t = p.t;
    let proto = if t.kind.is_gre() { 47 } else { 17 };
    let (dl_type, ip, ip_len) = match (p.src, p.dst) {
        (IpAddr::V6(s), IpAddr::V6(d)) => (
            0x86dd,
            TnlIp::V6 {
                src: s,
                dst: d,
                label: 0,
                proto,
                tclass: p.tos,
                hlimit: p.ttl,
            },
            40,
        ),
        (s, d) => {
            let v4 = |a: IpAddr| match a {
                IpAddr::V4(a) => a,
                IpAddr::V6(_) => std::net::Ipv4Addr::UNSPECIFIED,
            };
            (
                0x0800,
                TnlIp::V4 {
                    src: v4(s),
                    dst: v4(d),
                    proto,
                    tos: p.tos,
                    ttl: p.ttl,
                    frag: if t.df_default { 0x4000 } else { 0 },
                },
                20,
            )
        }
    };
    // Asks the datapath for a UDP checksum.
    let udp = TnlUdp {
        src: 0,
        dst: t.dst_port,
        csum: if t.csum { 0xffff } else { 0 },
    };
    let key = p.key.unwrap_or(0);
    let (l4, l4_len) = match t.kind {
        TunnelType::Vxlan => (
            TnlL4::Vxlan {
                udp,
                flags: 0x0800_0000,
                vni: (key & 0xff_ffff) as u32,
            },
            16,
        ),
        TunnelType::Geneve => (
            TnlL4::Geneve {
                udp,
                oam: p.oam,
                crit: p.options.chunks(4).next().is_some() && has_critical(&p.options),
                vni: (key & 0xff_ffff) as u32,
                options: p.options.clone(),
            },
            16 + p.options.len(),
        ),
        TunnelType::Gre => {
            let flags = if t.csum { 0x8000 } else { 0 } | if p.key.is_some() { 0x2000 } else { 0 };
            (
                TnlL4::Gre {
                    flags,
                    proto: p.payload,
                    csum: t.csum.then_some(0),
                    key: p.key.map(|k| k as u32),
                    seq: None,
                },
                4 + if t.csum { 4 } else { 0 } + if p.key.is_some() { 4 } else { 0 },
            )
        }
        TunnelType::Erspan => {
            let e = t.erspan.unwrap_or_default();
            (
                TnlL4::Erspan {
                    ver: e.ver,
                    // The session id is the key's low 10 bits (checked before).
                    sid: (key & 0x3ff) as u16,
                    idx: e.idx,
                    dir: e.dir,
                    hwid: e.hwid,
                },
                // GRE with a sequence number, the ERSPAN header and its version's fields.
                8 + 4 + if e.ver == 1 { 4 } else { 8 },
            )
        }
    };
    TnlHeader {
        size: (14 + ip_len + l4_len) as u32,
        tnl_type: t.kind.vport_type(ip_len == 40),
        eth_dst: p.dmac,
        eth_src: p.smac,
        dl_type,
        ip,
        l4,
    }
}

/// Whether a GENEVE option area has a critical option (type bit 0x80).
pub(super) fn has_critical(opts: &[u8]) -> bool {
    let mut i = 0;
    while i + 4 <= opts.len() {
        if opts[i + 2] & 0x80 != 0 {
            return true;
        }
        i += 4 + usize::from(opts[i + 3] & 0x1f) * 4;
    }
    false
}
