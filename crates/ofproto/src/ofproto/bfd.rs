//! What the BFD sessions change in the pipeline: which packets a port hands to its session,
//! and the port's liveness, which follows the session's forwarding.

use super::Ofproto;
use crate::bfd::RxFilter;

impl Ofproto {
    /// Port `ofport` of `bridge` hands the packets `rx` picks to its BFD session (none when
    /// `None`). `None` when there is no such port; otherwise whether that changed anything.
    pub fn set_bfd_rx(&self, bridge: &str, ofport: u32, rx: Option<RxFilter>) -> Option<bool> {
        self.update_port_config(bridge, ofport, |c| {
            let changed = c.bfd_rx != rx || (rx.is_none() && c.bfd_down);
            c.bfd_rx = rx;
            if rx.is_none() {
                c.bfd_down = false;
            }
            changed
        })
    }

    /// Port `ofport` of `bridge` is live only while its BFD session forwards.
    pub fn set_bfd_forwarding(&self, bridge: &str, ofport: u32, forwarding: bool) -> Option<bool> {
        self.update_port_config(bridge, ofport, |c| {
            let changed = c.bfd_down == forwarding;
            c.bfd_down = !forwarding;
            changed
        })
    }

    /// A packet translation gave the BFD slow path (datapath key `key`, which tells the
    /// bridge and port it entered by): to the port's session.
    pub fn bfd_receive(&self, key: &flow::FlowKey, frame: &[u8]) {
        let entry = {
            let p = self.read();
            let mut wc = crate::pipekey::PipeMask::new();
            match p.receive(key, &mut wc) {
                Some(Ok((b, ofport, _))) => Some((p.bridges[b].name.clone(), ofport)),
                _ => None,
            }
        };
        match entry {
            Some((bridge, ofport)) => self.bfd.receive(&bridge, ofport, frame),
            None => {
                self.bfd
                    .refused
                    .no_session
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                crate::coverage::BFD_RX_IGNORED.inc();
            }
        }
    }

    fn update_port_config(
        &self,
        bridge: &str,
        ofport: u32,
        f: impl FnOnce(&mut crate::port_config::PortConfig) -> bool,
    ) -> Option<bool> {
        let changed = {
            let mut p = self.pipe.write().unwrap_or_else(|e| e.into_inner());
            let b = p.bridge_mut(bridge)?;
            if !b.ports.contains_key(&ofport) {
                return None;
            }
            f(b.port_config.entry(ofport).or_default())
        };
        if changed {
            self.changed();
        }
        Some(changed)
    }
}
