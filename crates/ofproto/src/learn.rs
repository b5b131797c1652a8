//! The `learn` action (ovs-actions(7) "The learn action", OVS's `lib/learn.c`): a flow that,
//! when a packet passes it, adds or refreshes another flow built from the packet's fields.
//!
//! A [`Learn`] holds the new flow's table, timeouts, priority, cookie and flags, and a list of
//! [`LearnSpec`]s, each copying bits from the packet (a subfield) or an immediate value into
//! the new flow's match (`NXM_OF_IP_SRC[]`, `eth_type=0x800`), into a `load` action of it, or
//! into an `output` action. [`Learn::execute`] builds the flow a packet teaches
//! (OVS's `learn_execute()`: a strict modify, so that an existing one is refreshed), and
//! [`Learn::unwildcard`] marks the packet bits it read, which the megaflow must match
//! (`learn_mask()`).
//!
//! Parsing and printing of the text form live in the action syntax; the wire form
//! (`NXAST_LEARN`, `NXAST_LEARN2`) in the OpenFlow codec.

use crate::fields::{Subfield, ones};
use crate::pipekey::{PipeKey, PipeMask, PipeMatch};
use crate::syntax::{FlowModFlags, FlowSpec, OFPP_ALL, OFPP_FLOOD, OFPP_IN_PORT, OFPP_LOCAL};
use crate::syntax::{OFPP_MAX, OfAction};

/// `NX_LEARN_F_SEND_FLOW_REM`.
pub const NX_LEARN_F_SEND_FLOW_REM: u16 = 1;
/// `NX_LEARN_F_DELETE_LEARNED`.
pub const NX_LEARN_F_DELETE_LEARNED: u16 = 2;
/// `NX_LEARN_F_WRITE_RESULT`.
pub const NX_LEARN_F_WRITE_RESULT: u16 = 4;

/// Where a spec's bits come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LearnSrc {
    /// Bits of the packet being translated.
    Field(Subfield),
    /// A constant (right-aligned, `n_bits` wide).
    Imm(u128),
}

/// Where a spec's bits go in the learned flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LearnDst {
    /// Its match.
    Match(Subfield),
    /// A `load` action of it.
    Load(Subfield),
    /// An `output` action of it, to the port the bits name.
    Output,
}

/// One `learn` spec (OVS's `ofpact_learn_spec`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LearnSpec {
    pub n_bits: u32,
    pub src: LearnSrc,
    pub dst: LearnDst,
}

/// `learn(...)` (OVS's `ofpact_learn`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Learn {
    /// The table the flow goes to (1 by default).
    pub table: u8,
    /// 0 is permanent.
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    /// Timeouts the learned flow gets once it sees a FIN or RST (0: none).
    pub fin_idle_timeout: u16,
    pub fin_hard_timeout: u16,
    pub priority: u16,
    pub cookie: u64,
    /// `NX_LEARN_F_*`.
    pub flags: u16,
    /// Most flows this action may have learned at once (0: no limit).
    pub limit: u32,
    /// The bit that receives whether learning succeeded (with `NX_LEARN_F_WRITE_RESULT`).
    pub result_dst: Option<Subfield>,
    pub specs: Vec<LearnSpec>,
}

impl Default for Learn {
    /// OVS's defaults: table 1, permanent, the default priority, no cookie, flags or specs.
    fn default() -> Learn {
        Learn {
            table: 1,
            idle_timeout: 0,
            hard_timeout: 0,
            fin_idle_timeout: 0,
            fin_hard_timeout: 0,
            priority: crate::syntax::DEFAULT_PRIORITY,
            cookie: 0,
            flags: 0,
            limit: 0,
            result_dst: None,
            specs: Vec::new(),
        }
    }
}

impl LearnSpec {
    /// The spec's value for a packet whose flow is `flow`, right-aligned.
    fn value(&self, flow: &PipeKey) -> u128 {
        match self.src {
            LearnSrc::Field(sf) => sf.read(flow),
            LearnSrc::Imm(v) => v & ones(self.n_bits),
        }
    }
}

impl Learn {
    /// Whether learned flows go when the flow that learned them does (`delete_learned`).
    pub fn delete_learned(&self) -> bool {
        self.flags & NX_LEARN_F_DELETE_LEARNED != 0
    }

    /// Marks in `wc` every packet bit the action reads: the learned flow depends on them, so
    /// the megaflow must match them (OVS's `learn_mask()`).
    pub fn unwildcard(&self, wc: &mut PipeMask) {
        for s in &self.specs {
            if let LearnSrc::Field(sf) = s.src {
                sf.unwildcard(wc);
            }
        }
    }

    /// The flow a packet whose flow is `flow` teaches (OVS's `learn_execute()`).
    pub fn execute(&self, flow: &PipeKey) -> FlowSpec {
        let (mut key, mut mask) = (PipeKey::new(), PipeMask::new());
        let mut actions = Vec::new();
        if self.fin_idle_timeout != 0 || self.fin_hard_timeout != 0 {
            actions.push(OfAction::FinTimeout {
                idle: self.fin_idle_timeout,
                hard: self.fin_hard_timeout,
            });
        }
        for s in &self.specs {
            let v = s.value(flow);
            match s.dst {
                LearnDst::Match(dst) => match_subfield(&mut key, &mut mask, dst, v),
                LearnDst::Load(dst) => {
                    crate::syntax::push_set_field(
                        &mut actions,
                        dst.field,
                        (v & ones(dst.n_bits)) << dst.ofs,
                        dst.mask(),
                    );
                }
                LearnDst::Output => {
                    if s.n_bits <= 16 || v >> 16 == 0 {
                        let port = (v & 0xffff) as u32;
                        if port < OFPP_MAX
                            || matches!(port, OFPP_IN_PORT | OFPP_FLOOD | OFPP_LOCAL)
                            || port == OFPP_ALL
                        {
                            actions.push(OfAction::Output { port, max_len: 0 });
                        }
                    }
                }
            }
        }
        let mut flags = 0;
        if self.flags & NX_LEARN_F_SEND_FLOW_REM != 0 {
            flags |= FlowModFlags::SEND_FLOW_REM;
        }
        FlowSpec {
            table: self.table,
            priority: self.priority,
            cookie: self.cookie,
            cookie_mask: 0,
            new_cookie: None,
            modify_cookie: false,
            idle_timeout: self.idle_timeout,
            hard_timeout: self.hard_timeout,
            importance: 0,
            flags: FlowModFlags(flags),
            out_port: None,
            out_group: None,
            match_: PipeMatch::new(&key, &mask),
            actions,
            has_actions: true,
        }
    }
}

/// Adds `dst = v` to a match under construction, keeping what it already matches of the
/// field (OVS's `mf_write_subfield()` on a match).
pub fn match_subfield(key: &mut PipeKey, mask: &mut PipeMask, dst: Subfield, v: u128) {
    let f = dst.field.field();
    let (cur_v, cur_m) = if f.is_matched(mask) {
        (f.get(key) & f.get_mask(mask), f.get_mask(mask))
    } else {
        (0, 0)
    };
    let new_v = (cur_v & !dst.mask()) | ((v & ones(dst.n_bits)) << dst.ofs);
    let new_m = cur_m | dst.mask();
    let new_m = if new_m == f.value_mask() {
        f.full_mask()
    } else {
        new_m
    };
    if f.match_set(key, mask, new_v, new_m).is_err() {
        // A field that takes no mask, written in part: its bits all the same.
        dst.write(key, v);
        dst.unwildcard(mask);
    }
}
