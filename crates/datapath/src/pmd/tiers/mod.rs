//! The lookup tiers of a pass: the ways a packet's megaflow is found, cheapest first. Each
//! tier is a function over the batch that looks up only the packets no tier before it found
//! ([`Pass::todo`]), writes each hit's megaflow into the PMD's `hits`, and counts its hits;
//! what the last one leaves goes to the upcall. Megaflows do not overlap, so whichever tier
//! finds a packet finds the megaflow any other would have.
//!
//! In order ([`Pmd::input`](super::Pmd::input) calls them so):
//! 1. the simple match (`simple.rs`): on a port with megaflows that look at metadata, the
//!    ethertype and the IP protocol alone, a plain frame's megaflow from its metadata words
//!    (and protocol), in extraction's loop, with no key, hash or EMC entry; a batch
//!    recirculated from a pass it found whole is found again from the first packet's
//!    megaflow and each packet's metadata (`simple_hits`; cycles under `extract`);
//! 2. the decap fast path (`decap.rs`): a masked compare with the port's megaflows whose only
//!    action is `tnl_pop`; when the whole batch hits, it is popped in place and goes to its
//!    next pass at once (`decap_hits`; cycles under `emc`, the pop's under `actions`). A batch
//!    just received is tried before extraction, on its header words alone (`Pmd::decap_rx`);
//! 3. the EMC (`emc.rs`): exact-match cache, full key compare (`emc_hits`; `emc`), not on a
//!    port the linear match holds;
//! 4. the linear match (`linear.rs`): on a port whose few megaflows are of a few masks, a
//!    compare per mask that stands in for the EMC and dpcls; in extraction's loop on a port without decap
//!    megaflows (`megaflow_hits`; cycles under `extract` then, else `megaflow`); for a
//!    recirculated batch that reuses its keys, the metadata match (`recirc_meta.rs`) finds
//!    most packets from the first one's megaflow and their metadata alone;
//! 5. the megaflow classifier, dpcls (`dpcls.rs`): subtables in rank order, a hit entered in
//!    the EMC (`megaflow_hits`, `subtable_lookups`; `megaflow`).
//!
//! Each tier's file holds its lookup structure (the fast paths' lists, kept in step with the
//! flow table by `flows.rs`) and its function over the batch; `masked_words.rs` holds the
//! compare the fast paths share, `key_meta.rs` the metadata compare of the later passes'
//! tiers. A new tier is a file here with its function over the
//! [`Pass`], and a line in `Pmd::input`. This module also holds each input port's lookup
//! structures ([`Classifiers`]).

mod decap;
mod dpcls;
mod emc;
mod key_meta;
mod linear;
mod masked_words;
mod recirc_meta;
mod simple;

use crate::dpcls::Dpcls;
use crate::flow_table::FlowRef;
pub(super) use decap::{DecapFlow, MAX_DECAP_FLOWS};
pub(super) use linear::{LinearMatches, MAX_LINEAR_FLOWS};
pub(super) use recirc_meta::MetaSplit;
pub(super) use simple::SimpleFlow;

/// What the tiers of one pass know of its batch, handed from each to the next.
pub(super) struct Pass {
    /// The port the batch is classified on: whose lookup structures the tiers use.
    pub in_port: u32,
    /// Packets in the batch.
    pub n: usize,
    /// The packets no tier has found yet, bit `i` for packet `i` (each packet found has its
    /// megaflow in `hits`); what is left after the last tier goes to the upcall. The packets
    /// the simple match found are never in it: their keys are partial (no packet field but
    /// the TCP flags), so no later compare may look at them.
    pub todo: u32,
    /// The port's megaflows are all in its linear match, which is then its whole classifier:
    /// the EMC and dpcls are not looked at.
    pub linear: bool,
    /// The linear match looked every packet up in extraction's loop: only its hits, `early`,
    /// are left to count.
    pub looked: bool,
    pub early: u32,
}

impl Pass {
    /// A pass of `n` packets on `in_port` after extraction: `simple` the packets the simple
    /// match found, `early` those the linear match found in extraction's loop, if it ran.
    #[inline(always)]
    pub fn new(in_port: u32, n: usize, linear: bool, simple: u32, early: Option<u32>) -> Pass {
        let mut pass = Pass {
            in_port,
            n,
            todo: 0,
            linear,
            looked: early.is_some(),
            early: early.unwrap_or(0),
        };
        pass.todo = pass.all() & !(simple | pass.early);
        pass
    }

    /// Every packet of the batch, as a bit mask.
    #[inline(always)]
    pub fn all(&self) -> u32 {
        ((1u64 << self.n) - 1) as u32
    }
}

/// The lookup structures of one input port: its megaflow classifier, its decap fast path and
/// its simple match.
pub(super) struct PortCls {
    pub(super) port: u32,
    pub(super) dpcls: Dpcls<FlowRef>,
    /// Megaflows of this port whose only action is `tnl_pop` (at most
    /// [`MAX_DECAP_FLOWS`]).
    pub(super) decap: Vec<DecapFlow>,
    /// Megaflows of this port that the simple match finds (at most
    /// [`MAX_DECAP_FLOWS`]; see [`SimpleFlow`]).
    pub(super) simple: Vec<SimpleFlow>,
    /// Megaflows of this port for the linear match (at most [`MAX_LINEAR_FLOWS`]; see
    /// [`LinearMatches`]): used only while they are all of the port's megaflows.
    pub(super) linear: LinearMatches,
    /// Hits of the linear match, one subtable lookup each.
    pub(super) linear_lookups: u64,
}

/// The per-port classifiers of one PMD (a handful of ports: linear search).
pub(super) struct Classifiers {
    pub(super) by_port: Vec<PortCls>,
}

impl Classifiers {
    pub(in crate::pmd) fn port_mut(&mut self, port: u32) -> Option<&mut PortCls> {
        self.by_port.iter_mut().find(|c| c.port == port)
    }

    pub(in crate::pmd) fn get_mut(&mut self, port: u32) -> Option<&mut Dpcls<FlowRef>> {
        self.port_mut(port).map(|c| &mut c.dpcls)
    }

    pub(in crate::pmd) fn get_or_create(&mut self, port: u32) -> &mut Dpcls<FlowRef> {
        let i = match self.by_port.iter().position(|c| c.port == port) {
            Some(i) => i,
            None => {
                self.by_port.push(PortCls {
                    port,
                    dpcls: Dpcls::new(),
                    decap: Vec::with_capacity(MAX_DECAP_FLOWS),
                    simple: Vec::with_capacity(MAX_DECAP_FLOWS),
                    linear: LinearMatches::default(),
                    linear_lookups: 0,
                });
                self.by_port.len() - 1
            }
        };
        &mut self.by_port[i].dpcls
    }

    /// The lookup structures of `port`, if it has any.
    #[inline]
    pub(in crate::pmd) fn port(&self, port: u32) -> Option<&PortCls> {
        self.by_port.iter().find(|c| c.port == port)
    }

    /// The decap megaflows of `port` (none for a port without any).
    #[inline]
    pub(in crate::pmd) fn decap(&self, port: u32) -> &[DecapFlow] {
        self.port(port).map_or(&[], |c| &c.decap)
    }

    /// The simple-match megaflows of `port` (none for a port without any).
    #[inline]
    pub(in crate::pmd) fn simple(&self, port: u32) -> &[SimpleFlow] {
        self.port(port).map_or(&[], |c| &c.simple)
    }

    /// Whether `port`'s megaflows are all in its linear match (and it has some).
    #[inline]
    pub(in crate::pmd) fn is_linear(&self, port: u32) -> bool {
        self.port(port)
            .is_some_and(|c| !c.linear.is_empty() && c.linear.len() == c.dpcls.len())
    }
}
