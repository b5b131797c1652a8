//! Conjunctive matches (ovs-fields(7) "Conjunctive Match Fields"), looked up as OVS's
//! classifier does (`classifier_lookup__()` in `lib/classifier.c`).
//!
//! A rule whose actions are `conjunction(ID,K/N)` is one clause of conjunctive match ID: it
//! never matches by itself (a *soft* match). The lookup's main loop collects the best soft match
//! of every subtable it visits beside the best ordinary (*hard*) match. If soft matches outrank
//! the hard one, their highest priority is examined: when the soft matches at that priority
//! cover all N clauses of some ID, the table is looked up again with `conj_id=ID` (soft matches
//! ignored), and a rule found there is the answer. Otherwise the soft matches at that priority
//! give way to rules of lower priority with the same match, and the next priority is examined,
//! until none outranks the hard match.
//!
//! The wildcards stay sound because every step is a lookup of the same key: the main loop and
//! each `conj_id` lookup OR in the bits they consulted, and which clauses matched is a function
//! of those bits. `conj_id` itself is not in the datapath key; it is only set during the
//! second lookup.

use super::{Classifier, Entry, RuleId, Version, hash_masked};
use crate::bridge::Rule;
use crate::pipekey::{PipeKey, PipeMask};
use crate::syntax::OfAction;

/// A rule that may be part of conjunctive matches.
pub trait Conjunctive {
    /// Calls `f(id, clause, n_clauses)` for each `conjunction` action; returns whether there
    /// was any (whether the rule is a soft match).
    fn clauses(&self, f: &mut dyn FnMut(u32, u8, u8)) -> bool;
}

impl Conjunctive for Rule {
    fn clauses(&self, f: &mut dyn FnMut(u32, u8, u8)) -> bool {
        // Conjunctions come only with notes (the syntax and the codec refuse anything else):
        // the first other action says whether there are any.
        let first = self
            .actions
            .iter()
            .find(|a| !matches!(a, OfAction::Note(_)));
        if !matches!(first, Some(OfAction::Conjunction { .. })) {
            return false;
        }
        let mut any = false;
        for a in &self.actions {
            if let OfAction::Conjunction {
                id,
                clause,
                n_clauses,
            } = a
            {
                any = true;
                f(*id, *clause, *n_clauses);
            }
        }
        any
    }
}

/// A soft match: the rule and its priority.
type Soft = (RuleId, u16);

/// The clauses of conjunction `id` seen so far at the priority being examined (OVS's
/// `conjunctive_match`): bits of absent clauses start set, so all ones means complete.
struct Partial {
    id: u32,
    clauses: u64,
}

/// OVS's `find_conjunctive_match()`: adds the clauses of `value` to `partials` and returns the
/// first conjunction they complete. Only conjunctions of at most `max_n_clauses` clauses can
/// complete with that many soft matches.
fn find_conjunctive_match<T: Conjunctive>(
    value: &T,
    max_n_clauses: usize,
    partials: &mut Vec<Partial>,
) -> Option<u32> {
    let mut done = None;
    value.clauses(&mut |id, clause, n_clauses| {
        if done.is_some() || usize::from(n_clauses) > max_n_clauses {
            return;
        }
        let i = match partials.iter().position(|p| p.id == id) {
            Some(i) => i,
            None => {
                // As OVS's: 64 clauses shift by 0, so such a conjunction starts complete.
                partials.push(Partial {
                    id,
                    clauses: u64::MAX << (n_clauses & 63),
                });
                partials.len() - 1
            }
        };
        let p = &mut partials[i];
        p.clauses |= 1u64.checked_shl(u32::from(clause)).unwrap_or(0);
        if p.clauses == u64::MAX {
            done = Some(p.id);
        }
    });
    done
}

impl<T: Conjunctive> Classifier<T> {
    /// The highest-priority rule matching `key`, conjunctive matches included (OVS's
    /// `classifier_lookup()`); ORs into `wc` every bit of `key` the answer depended on.
    /// `key.meta.conj_id` is set during the lookups of complete conjunctions and restored.
    pub fn lookup_conjunctive(&self, key: &mut PipeKey, wc: &mut PipeMask) -> Option<RuleId> {
        self.lookup_conjunctive_in(key, self.version, wc)
    }

    /// [`Self::lookup_conjunctive`] among the rules visible in `version` (a bundle's
    /// packet-out sees the flow mods staged before it).
    pub fn lookup_conjunctive_in(
        &self,
        key: &mut PipeKey,
        version: Version,
        wc: &mut PipeMask,
    ) -> Option<RuleId> {
        let mut soft: Vec<Soft> = Vec::new();
        let hard = self.lookup_pass(key, version, wc, &mut |id, e: &Entry<T>| {
            let is_soft = e.value.clauses(&mut |_, _, _| {});
            if is_soft {
                soft.push((id, e.priority));
            }
            is_soft
        });
        let (mut hard, mut hard_pri) = match hard {
            Some((id, p)) => (Some(id), i32::from(p)),
            None => (None, -1),
        };
        if soft.iter().all(|&(_, p)| i32::from(p) <= hard_pri) {
            return hard;
        }
        loop {
            soft.retain(|&(_, p)| i32::from(p) > hard_pri);
            let Some(soft_pri) = soft.iter().map(|&(_, p)| p).max() else {
                break;
            };
            let n_soft_pri = soft.iter().filter(|&&(_, p)| p == soft_pri).count();
            let mut partials = Vec::new();
            for &(id, p) in &soft {
                if p != soft_pri {
                    continue;
                }
                let e = self.entries[id]
                    .as_ref()
                    .expect("soft matches are live rules");
                if let Some(conj_id) = find_conjunctive_match(&e.value, n_soft_pri, &mut partials) {
                    let saved = key.meta.conj_id;
                    key.meta.conj_id = conj_id;
                    let found = self.lookup_pass(key, version, wc, &mut |_, e: &Entry<T>| {
                        e.value.clauses(&mut |_, _, _| {})
                    });
                    key.meta.conj_id = saved;
                    if let Some((rule, _)) = found {
                        return Some(rule);
                    }
                }
            }
            // No complete conjunction at this priority: rules of lower priority with the same
            // match as these soft matches may match softly or hard instead.
            let mut next = Vec::with_capacity(soft.len());
            for &(id, p) in &soft {
                if p != soft_pri {
                    next.push((id, p));
                    continue;
                }
                if let Some((lower, lp)) = self.next_identical(id) {
                    let e = self.entries[lower].as_ref().expect("listed rules are live");
                    if e.value.clauses(&mut |_, _, _| {}) {
                        next.push((lower, lp));
                    } else if i32::from(lp) > hard_pri {
                        hard = Some(lower);
                        hard_pri = i32::from(lp);
                    }
                }
            }
            soft = next;
        }
        hard
    }
}

impl<T> Classifier<T> {
    /// The next rule below `id`, in priority, with exactly its match (OVS's
    /// `next_visible_rule_in_list()`).
    fn next_identical(&self, id: RuleId) -> Option<(RuleId, u16)> {
        let e = self.entries.get(id)?.as_ref()?;
        let m = e.m.expand();
        let st = self.subtables.iter().find(|s| s.mask == *m.mask())?;
        let list = st.rules.get(&hash_masked(m.key(), m.mask()))?;
        let at = list.iter().position(|&r| r == id)?;
        list[at + 1..].iter().find_map(|&r| {
            let o = self.entries[r].as_ref()?;
            (o.m == e.m).then_some((r, o.priority))
        })
    }
}

#[cfg(test)]
mod tests;
