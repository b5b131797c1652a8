//! The megaflows of one PMD thread: slots addressed by [`FlowRef`] (index plus generation), so
//! that the EMC and the classifiers hold small `Copy` handles and a deleted flow is recognised
//! by its generation, with no sweep (see `emc` for how lookups check liveness).

use std::num::NonZeroU32;
use std::sync::Arc;

use flow::odp::KeyAttrs;
use flow::{FlowKey, Mask, Match};

use crate::actions::DpAction;

/// A handle to a megaflow of one PMD: slot index and the slot's generation when the flow was
/// installed. Generations start at 1, so that `Option<FlowRef>` takes 8 bytes and is handed
/// back in a register: a lookup's result built in memory from two 4-byte stores was read
/// back as one 8-byte load, which the store buffer cannot serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowRef {
    /// The flow's slot in the PMD's flow table.
    pub idx: u32,
    /// The slot's generation when the flow was installed; a handle whose generation no longer
    /// matches names a deleted flow.
    pub generation: NonZeroU32,
}

const _: () = assert!(size_of::<Option<FlowRef>>() == 8);

/// Never a live flow: no table has that many slots.
impl Default for FlowRef {
    fn default() -> FlowRef {
        FlowRef::first(u32::MAX)
    }
}

impl FlowRef {
    /// The handle of slot `idx`'s first flow (generation 1).
    pub const fn first(idx: u32) -> FlowRef {
        FlowRef {
            idx,
            generation: NonZeroU32::MIN,
        }
    }
}

/// The generation after `g`, never 0.
fn next_generation(g: NonZeroU32) -> NonZeroU32 {
    NonZeroU32::new(g.get().wrapping_add(1)).unwrap_or(NonZeroU32::MIN)
}

/// Per-flow counters, updated once per batch of packets that hit the flow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowStats {
    /// Packets that hit the flow.
    pub packets: u64,
    /// Bytes of the packets that hit the flow.
    pub bytes: u64,
    /// TSC value of the last hit, 0 for never.
    pub used_tsc: u64,
    /// OR of the TCP flags seen.
    pub tcp_flags: u16,
}

/// A megaflow: what it matches, what it does, how it prints, what it has seen.
#[derive(Clone, Debug)]
pub struct Megaflow {
    /// The unique flow id (`ufid:` in dumps and `dpctl/get-flow`), derived from the masked key
    /// and mask ([`crate::pmd::ufid_of`]) for slow-path and `dpctl/add-flow` flows alike.
    pub ufid: u128,
    /// The masked key and mask the classifier (dpcls) and EMC match packets against.
    pub m: Match,
    /// The key it was installed with: the first packet's for a flow the slow path installed
    /// (as OVS's dpif-netdev keeps it), the one given for `dpctl/add-flow`. Dumps print it
    /// under the mask, values outside the mask included (`src=10.0.0.2/255.255.255.252`,
    /// `dst=10.0.0.5/0.0.0.0` when verbose); lookups use `m`, whose key is masked.
    pub key: FlowKey,
    /// Which attributes the text form shows (`dpctl/add-flow` input, or derived).
    pub attrs: KeyAttrs,
    /// Actions as given, for dumps.
    pub odp_actions: Arc<[flow::odp::Action]>,
    /// Actions compiled for execution.
    pub actions: Arc<[DpAction]>,
    /// Packets, bytes, last use and TCP flags of the packets that hit it.
    pub stats: FlowStats,
    /// Whether the flow expires when idle (`max-idle`): true for flows the slow path installed
    /// on a miss, false for flows installed by configuration or `dpctl/add-flow`, which stay
    /// until removed.
    pub expires: bool,
    /// TSC value when the PMD installed it (the idle clock of a flow never used).
    pub installed_tsc: u64,
}

impl Megaflow {
    /// Which key bits the flow matches on (the megaflow's wildcards are the zero bits).
    pub fn mask(&self) -> &Mask {
        self.m.mask()
    }
}

/// A megaflow is about 2 KB (its key and match): slots hold it boxed, so that growing the
/// table under an upcall storm moves pointers, not flows.
struct Slot {
    generation: NonZeroU32,
    flow: Option<Box<Megaflow>>,
}

/// Slots of megaflows with generation-tagged handles.
#[derive(Default)]
pub struct FlowTable {
    slots: Vec<Slot>,
    free: Vec<u32>,
    len: usize,
}

impl FlowTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of flows.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Stores a flow and returns its handle.
    pub fn insert(&mut self, f: Megaflow) -> FlowRef {
        self.len += 1;
        match self.free.pop() {
            Some(idx) => {
                let s = &mut self.slots[idx as usize];
                s.generation = next_generation(s.generation);
                s.flow = Some(Box::new(f));
                FlowRef {
                    idx,
                    generation: s.generation,
                }
            }
            None => {
                self.slots.push(Slot {
                    generation: NonZeroU32::MIN,
                    flow: Some(Box::new(f)),
                });
                FlowRef::first((self.slots.len() - 1) as u32)
            }
        }
    }

    /// Whether `r` still names a flow.
    #[inline]
    pub fn is_live(&self, r: FlowRef) -> bool {
        self.slots
            .get(r.idx as usize)
            .is_some_and(|s| s.generation == r.generation && s.flow.is_some())
    }

    /// The flow `r` names, if it is still there.
    #[inline]
    pub fn get(&self, r: FlowRef) -> Option<&Megaflow> {
        let s = self.slots.get(r.idx as usize)?;
        if s.generation == r.generation {
            s.flow.as_deref()
        } else {
            None
        }
    }

    /// The flow `r` names, writable.
    #[inline]
    pub fn get_mut(&mut self, r: FlowRef) -> Option<&mut Megaflow> {
        let s = self.slots.get_mut(r.idx as usize)?;
        if s.generation == r.generation {
            s.flow.as_deref_mut()
        } else {
            None
        }
    }

    /// Removes the flow `r` names; its handle stops being live at once.
    pub fn remove(&mut self, r: FlowRef) -> Option<Megaflow> {
        let s = self.slots.get_mut(r.idx as usize)?;
        if s.generation != r.generation {
            return None;
        }
        let f = s.flow.take()?;
        // Bump now so that stale handles die even before the slot is reused.
        s.generation = next_generation(s.generation);
        self.free.push(r.idx);
        self.len -= 1;
        Some(*f)
    }

    /// Every live flow with its handle.
    pub fn iter(&self) -> impl Iterator<Item = (FlowRef, &Megaflow)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| {
            s.flow.as_deref().map(|f| {
                (
                    FlowRef {
                        idx: i as u32,
                        generation: s.generation,
                    },
                    f,
                )
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mf(port: u32) -> Megaflow {
        let mut k = FlowKey::new();
        k.set_in_port(port);
        let mut m = Mask::new();
        m.set_in_port(u32::MAX);
        Megaflow {
            ufid: port as u128,
            m: Match::new(&k, &m),
            key: k,
            attrs: KeyAttrs::default(),
            odp_actions: Arc::from(vec![]),
            actions: Arc::from(vec![]),
            stats: FlowStats::default(),
            expires: false,
            installed_tsc: 0,
        }
    }

    #[test]
    fn removed_handles_die_and_slots_are_reused() {
        let mut t = FlowTable::new();
        let a = t.insert(mf(1));
        let b = t.insert(mf(2));
        assert!(t.is_live(a) && t.is_live(b));
        assert_eq!(t.remove(a).unwrap().ufid, 1);
        assert!(!t.is_live(a));
        assert!(t.get(a).is_none());
        assert!(t.remove(a).is_none());
        let c = t.insert(mf(3));
        assert_eq!(c.idx, a.idx, "the slot is reused");
        assert_ne!(c.generation, a.generation, "with a new generation");
        assert!(!t.is_live(a));
        assert!(!t.is_live(FlowRef::default()));
        assert_eq!(t.len(), 2);
        assert_eq!(t.iter().count(), 2);
    }
}
