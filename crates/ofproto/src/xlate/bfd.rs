//! BFD control packets a port with a BFD session receives go to the slow path's session
//! instead of the OpenFlow tables (OVS's `process_special()` with `bfd_should_process_flow()`):
//! the megaflow matches what the check looked at and its action is
//! `userspace(pid=0,slow_path(bfd))`, so that every such packet keeps coming up.

use flow::odp::{Action, UserCookie, Userspace};

use super::Ctx;

impl Ctx<'_> {
    /// Whether the packet entering by `ofport` is its BFD session's, unwildcarding what
    /// decides it.
    fn is_bfd(&mut self, ofport: u32) -> bool {
        let Some(f) = self.br().port_config(ofport).bfd_rx else {
            return false;
        };
        let k = &self.flow.dp;
        let m = &mut self.wc.dp;
        if let Some(mac) = f.remote_dst_mac {
            m.set_eth_dst(flow::EthAddr([0xff; 6]));
            if k.eth_dst() != mac {
                return false;
            }
        }
        if k.eth_type() != 0x0800 {
            return false;
        }
        m.set_nw_proto(0xff);
        if k.nw_proto() != 17 || k.nw_frag() & flow::key::nw_frag::LATER != 0 {
            return false;
        }
        m.set_tp_dst(0xffff);
        if k.tp_dst() != crate::bfd::msg::UDP_PORT {
            return false;
        }
        if let Some(ip) = f.src_ip {
            m.set_nw_dst(std::net::Ipv4Addr::BROADCAST);
            if k.nw_dst() != ip {
                return false;
            }
        }
        if f.check_tnl_key {
            m.set_tun_id(u64::MAX);
            return k.tun_id() == 0;
        }
        true
    }

    /// Sends the packet to the BFD session of port `ofport` when it is one of its control
    /// packets; whether it did.
    pub(super) fn process_bfd(&mut self, ofport: u32) -> bool {
        if !self.is_bfd(ofport) {
            return false;
        }
        self.res.slow_bfd = true;
        self.out.push(Action::Userspace(Box::new(Userspace {
            pid: 0,
            cookie: UserCookie::Text(crate::bfd::SLOW_PATH_COOKIE.into()),
            actions: false,
            tunnel_out_port: None,
        })));
        true
    }
}
