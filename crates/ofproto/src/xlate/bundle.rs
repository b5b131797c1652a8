//! `bundle` and `bundle_load` in translation (OVS's `bundle_execute()`): a live member is
//! chosen, `active_backup` the first one, `hrw` the one whose weight (the hash of the packet's
//! fields, [`super::flow_hash`], mixed with the member's index) is highest; `bundle` outputs
//! to it, `bundle_load` writes its number (`OFPP_NONE` when no member is live). A member is
//! live when it is a live port of the bridge (neither administratively down nor without link,
//! [`crate::port_config`]) or a reserved port other than `CONTROLLER`.

use super::Ctx;
use super::flow_hash::{flow_hash_fields, hash_2words, mask_hash_fields};
use super::stack::report_subfield;
use crate::syntax::{
    Bundle, OFPP_ALL, OFPP_ANY, OFPP_CONTROLLER, OFPP_FLOOD, OFPP_IN_PORT, OFPP_NORMAL, OFPP_TABLE,
};

impl Ctx<'_> {
    fn member_live(&self, port: u32) -> bool {
        match port {
            OFPP_IN_PORT | OFPP_TABLE | OFPP_NORMAL | OFPP_FLOOD | OFPP_ALL | OFPP_ANY => true,
            OFPP_CONTROLLER => false,
            p => self.br().port_live(p),
        }
    }

    /// The member `b` chooses, `OFPP_NONE` (0xffff) when none is live.
    fn bundle_choose(&mut self, b: &Bundle) -> u32 {
        if b.algorithm == 0 {
            return b
                .members
                .iter()
                .copied()
                .find(|&m| self.member_live(m))
                .unwrap_or(OFPP_ANY);
        }
        if b.members.len() > 1 {
            mask_hash_fields(&self.flow, &mut self.wc, b.fields);
        }
        let hash = flow_hash_fields(&self.flow, b.fields, b.basis);
        let mut best: Option<(u32, u32)> = None;
        for (i, &m) in b.members.iter().enumerate() {
            if self.member_live(m) {
                let w = hash_2words(i as u32, hash);
                if best.is_none_or(|(_, bw)| w > bw) {
                    best = Some((m, w));
                }
            }
        }
        best.map_or(OFPP_ANY, |(m, _)| m)
    }

    pub(super) fn bundle(&mut self, b: &Bundle) {
        let port = self.bundle_choose(b);
        match &b.dst {
            Some(dst) => {
                dst.unwildcard(&mut self.wc);
                dst.write(&mut self.flow, port.into());
                if self.trace.is_some() {
                    let text = report_subfield(dst, &self.flow);
                    self.note(text);
                }
            }
            None => self.output(port, 0),
        }
    }
}
