//! Slow-protocols frames (ethertype 0x8809) a bond member (or a Port's one Interface) with
//! LACP receives go to its LACP instead of the OpenFlow tables (OVS's `process_special()` with `lacp_process_packet()`):
//! the megaflow's action is `userspace(pid=0,slow_path(lacp))`, so every LACPDU comes up.

use flow::odp::{Action, UserCookie, Userspace};

use super::Ctx;

/// The `userspace` action cookie of the frames translation gives LACP.
pub const SLOW_PATH_COOKIE: &str = "slow_path(lacp)";

impl Ctx<'_> {
    /// Sends the packet to LACP when it entered by `ofport`, a member of a bond with LACP or
    /// the interface of a single-interface Port with LACP, and is a slow-protocols frame;
    /// whether it did.
    pub(super) fn process_lacp(&mut self, ofport: u32) -> bool {
        let has_lacp = (self.bond_member(ofport)).is_some_and(|(b, _)| b.lacp.is_some())
            || (self.br().lacp_ports.iter()).any(|l| l.ofport == Some(ofport));
        if !has_lacp {
            return false;
        }
        self.wc.dp.set_eth_type(0xffff);
        if self.flow.dp.eth_type() != crate::lacp::pdu::ETH_TYPE_SLOW {
            return false;
        }
        self.res.slow_lacp = true;
        self.out.push(Action::Userspace(Box::new(Userspace {
            pid: 0,
            cookie: UserCookie::Text(SLOW_PATH_COOKIE.into()),
            actions: false,
            tunnel_out_port: None,
        })));
        true
    }
}
