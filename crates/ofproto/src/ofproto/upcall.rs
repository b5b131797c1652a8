//! The slow path's side of the datapath (OVS's `ofproto-dpif-upcall.c`): the upcall handler
//! that translates a miss and installs its megaflow, revalidation of the installed megaflows,
//! and the settings and figures operators see through `upcall/show`,
//! `upcall/disable-megaflows` and `upcall/enable-megaflows`.
//!
//! A barrier (and a bundle's commit) must not be answered before the megaflows that the changes
//! before it made stale are gone from the PMDs. A full round asks every PMD for its megaflows,
//! which costs a round trip to each PMD thread (milliseconds when the PMD's core is shared);
//! [`Ofproto::sync_megaflows`] instead re-checks the megaflows the slow path knows it installed
//! (those the last round found, and those installed since, recorded under the same read lock
//! as their translation, so no change of the tables can fall between the two) and asks the
//! PMDs only to remove the stale ones.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use datapath::actions::{DpAction, compile};
use datapath::dpif::Datapath;
use datapath::packet::Packet;
use datapath::pmd::{UpcallHandler, UpcallResult};
use datapath::xlate_drop::XlateDrop;
use flow::FlowKey;

use super::{Ofproto, Revalidation};
use crate::xlate::translate;

/// The upcall layer's switch and the revalidator's figures.
pub(super) struct UpcallState {
    /// Megaflows are on (OVS's `enable_megaflows`); off, every upcall installs an exact-match
    /// flow.
    megaflows: AtomicBool,
    dump: Mutex<DumpStats>,
    /// The megaflows the slow path installed, as the last round found them plus those
    /// installed since: (match, datapath actions). `None` once more were installed since a
    /// round than [`MAX_KNOWN_SINCE`]: then a barrier does a full round.
    known: Mutex<Option<Vec<Known>>>,
    /// Entries added to `known` since the last round.
    known_since: std::sync::atomic::AtomicUsize,
    /// The generation [`Ofproto::sync_megaflows`] or a round last brought the PMDs to.
    synced: std::sync::atomic::AtomicU64,
}

/// A megaflow the slow path installed: the key it was translated from, its match and actions.
type Known = (FlowKey, flow::Match, Box<[flow::odp::Action]>);

/// How many megaflows upcalls may record between two rounds. A record is about 1.8 KB (a
/// key and a match): 4096 of them are 7 MiB, what a miss storm can make this hold beyond the
/// datapath's flows. Past it a barrier does a full round, as it did before records were kept.
const MAX_KNOWN_SINCE: usize = 4096;

impl Default for UpcallState {
    fn default() -> Self {
        UpcallState {
            megaflows: AtomicBool::new(true),
            dump: Mutex::new(DumpStats::default()),
            known: Mutex::new(Some(Vec::new())),
            known_since: Default::default(),
            synced: Default::default(),
        }
    }
}

/// What the revalidator saw in its rounds, as `upcall/show` reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DumpStats {
    /// Datapath flows in the last round (one per PMD that holds a megaflow).
    pub current: usize,
    /// A running average over the rounds (each round halves the weight of the ones before,
    /// as OVS's).
    pub avg: usize,
    /// The most in one round.
    pub max: usize,
    /// How long the last round took.
    pub duration: Duration,
}

impl UpcallState {
    pub(super) fn dumped(&self, flows: usize, took: Duration) {
        let mut d = self.dump.lock().unwrap_or_else(|e| e.into_inner());
        d.current = flows;
        d.avg = (d.avg + flows) / 2;
        d.max = d.max.max(flows);
        d.duration = took;
    }
}

impl Ofproto {
    /// Turns megaflows on or off (`upcall/enable-megaflows`, `upcall/disable-megaflows`). The
    /// caller flushes the datapath's flows, as OVS does, so that every flow from now on is of
    /// the new kind.
    pub fn set_megaflows(&self, on: bool) {
        self.upcall.megaflows.store(on, Ordering::Relaxed);
        self.changed();
    }

    /// Whether megaflows are on.
    pub fn megaflows(&self) -> bool {
        self.upcall.megaflows.load(Ordering::Relaxed)
    }

    /// The revalidator's figures.
    pub fn dump_stats(&self) -> DumpStats {
        *self.upcall.dump.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `upcall/show` in OVS's format, for datapath `dp_name` with `flow_limit`: the
    /// megaflows now, their average and most as the revalidation rounds sampled them (as OVS,
    /// `max` is 0 until the first round), the last round's duration, then each revalidator
    /// thread's megaflow count (one thread, here: the main thread's revalidator). No
    /// `offloaded flows` line: as OVS's netdev datapath without `hw-offload`.
    pub fn upcall_show(&self, dp_name: &str, flow_limit: usize, flows_now: usize) -> String {
        let d = self.dump_stats();
        format!(
            "{dp_name}:\n  flows         : (current {flows_now}) (avg {}) (max {}) (limit \
             {flow_limit})\n  dump duration : {}ms\n  ufid enabled : true\n\n  1: (keys \
             {flows_now})\n",
            d.avg,
            d.max,
            d.duration.as_millis()
        )
    }

    /// The mask a megaflow for `key` is installed (and revalidated) with: translation's
    /// `mask`, made datapath-shaped ([`megaflow_mask`]), or every bit when megaflows are off.
    pub(super) fn install_mask(&self, key: &FlowKey, mask: &flow::Mask) -> flow::Mask {
        if self.megaflows() {
            megaflow_mask(key, mask)
        } else {
            flow::Mask::exact()
        }
    }

    /// The match a megaflow for `key` is installed with, after a translation that consulted
    /// `mask`.
    fn installed_match(&self, key: &FlowKey, mask: &flow::Mask) -> flow::Match {
        let mut mask = self.install_mask(key, mask);
        mask.set_in_port(u32::MAX);
        flow::Match::new(key, &mask)
    }

    /// Whether the megaflow `m` with `actions`, installed by translating `key`, is stale in
    /// the tables `p` (its translation's actions or mask changed, or it waits for a tunnel
    /// neighbour, which is asked for again every round); returns the translation too.
    fn stale(
        &self,
        p: &crate::xlate::Pipeline,
        key: &FlowKey,
        m: &flow::Match,
        actions: &[flow::odp::Action],
    ) -> (bool, crate::xlate::XlateOut) {
        let x = translate(p, key, false, None);
        let mut mask = self.install_mask(key, &x.mask);
        mask.set_in_port(u32::MAX);
        let stale = mask != *m.mask() || x.actions.as_slice() != actions || x.neigh_pending;
        (stale, x)
    }

    /// Records a megaflow an upcall installs (called under the read lock its translation was
    /// made under).
    fn record_installed(&self, key: &FlowKey, m: flow::Match, actions: &[flow::odp::Action]) {
        let mut known = self.upcall.known.lock().unwrap_or_else(|e| e.into_inner());
        if self.upcall.known_since.fetch_add(1, Ordering::Relaxed) >= MAX_KNOWN_SINCE {
            *known = None;
        }
        if let Some(k) = known.as_mut() {
            k.push((key.clone(), m, actions.into()));
        }
    }

    /// Brings the PMDs' megaflows in line with the tables: when the tables changed since the
    /// PMDs were last brought in line, the megaflows the slow path installed are re-translated
    /// and the stale ones removed, with no round trip to the PMDs when none is stale. What a
    /// barrier's reply waits for.
    pub fn sync_megaflows(&self, dp: &Mutex<Datapath>) {
        let generation = self.generation();
        if generation == self.upcall.synced.load(Ordering::Acquire) {
            return;
        }
        let stale: Option<Vec<flow::Match>> = {
            // The tables' read lock first, as upcalls take it before recording.
            let p = self.read();
            let known = self.upcall.known.lock().unwrap_or_else(|e| e.into_inner());
            known.as_ref().map(|k| {
                k.iter()
                    .filter(|(key, m, a)| self.stale(&p, key, m, a).0)
                    .map(|(_, m, _)| m.clone())
                    .collect()
            })
        };
        let Some(stale) = stale else {
            if let Ok(mut d) = dp.lock() {
                self.revalidate(&mut d);
            }
            return;
        };
        if !stale.is_empty() {
            if let Ok(mut d) = dp.lock() {
                for m in &stale {
                    if d.remove_flow(m) > 0 {
                        crate::coverage::DPIF_FLOW_DEL.inc();
                    }
                }
            }
            let mut known = self.upcall.known.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(k) = known.as_mut() {
                k.retain(|(_, m, _)| !stale.contains(m));
            }
        }
        self.upcall.synced.store(generation, Ordering::Release);
    }

    /// One revalidation round: re-translates every megaflow the slow path installed, removes
    /// those whose translation (actions or mask) changed or that wait for a tunnel neighbour,
    /// credits the megaflows' new packets
    /// to the rules they went through, and expires rules whose timeouts passed.
    pub fn revalidate(&self, dp: &mut Datapath) -> Revalidation {
        let started = Instant::now();
        let generation = self.generation();
        let mut r = Revalidation::default();
        // Upcalls from now on record into a fresh list; what they installed before is in the
        // dump.
        let mut known: Vec<Known> = {
            let mut k = self.upcall.known.lock().unwrap_or_else(|e| e.into_inner());
            self.upcall.known_since.store(0, Ordering::Relaxed);
            k.replace(Vec::new()).unwrap_or_default()
        };
        known.clear();
        let flows = dp.flows();
        // A megaflow exists once per PMD that installed it: sum, per ufid, what each instance
        // counted since the last round.
        let mut credited = self.credited.lock().unwrap_or_else(|e| e.into_inner());
        let mut now_credited = HashMap::with_capacity(flows.len());
        let mut by_ufid: HashMap<u128, (&datapath::flow_table::Megaflow, u64, u64, u64)> =
            HashMap::new();
        for f in &flows {
            let mf = &f.flow;
            if !mf.expires {
                continue; // installed by dpctl, not by translation
            }
            let instance = (mf.ufid, mf.installed_tsc);
            let (p0, b0) = credited.get(&instance).copied().unwrap_or((0, 0));
            now_credited.insert(instance, (mf.stats.packets, mf.stats.bytes));
            let e = by_ufid.entry(mf.ufid).or_insert((mf, 0, 0, 0));
            e.1 += mf.stats.packets.saturating_sub(p0);
            e.2 += mf.stats.bytes.saturating_sub(b0);
            e.3 = e.3.max(mf.stats.used_tsc);
        }
        *credited = now_credited;
        drop(credited);
        let mut stale = Vec::new();
        let mut credits = Vec::new();
        let mut bond_credits = Vec::new();
        let mut lessons = Vec::new();
        // The recirculation ids the datapath's megaflows mention (as their pass or in their
        // actions) stay; others are freed once unused for the grace period.
        let mut recirc_ids = std::collections::HashSet::new();
        for f in &flows {
            if f.flow.key.recirc_id() != 0 {
                recirc_ids.insert(f.flow.key.recirc_id());
            }
            crate::recirc::ids_in_actions(&f.flow.odp_actions, &mut recirc_ids);
        }
        {
            let p = self.read();
            recirc_ids.extend(super::bond::bond_recirc_ids(&p.bridges));
            r.recirc_freed = p.recirc.sweep(&recirc_ids, Instant::now());
            for (mf, dpk, dby, used) in by_ufid.into_values() {
                r.flows += 1;
                // A flow still waiting for a tunnel neighbour goes every round too: the next
                // packet's upcall asks again, so a lost request is repeated about once a
                // round rather than never while traffic keeps the flow alive.
                let (is_stale, x) = self.stale(&p, &mf.key, &mf.m, &mf.odp_actions);
                if is_stale {
                    stale.push(mf.m.clone());
                } else {
                    let actions = mf.odp_actions.iter().cloned().collect();
                    known.push((mf.key.clone(), mf.m.clone(), actions));
                }
                if dpk > 0 {
                    credits.extend(x.rules.iter().map(|&rule| (rule, dpk, dby)));
                    super::group::credit_groups(&p, &x.groups, dpk, dby);
                    crate::xlate::credit_mirrors(&p, &x.mirrors, dpk, dby);
                    crate::patch_stats::credit_patches(&p, &x.patches, dpk, dby);
                    crate::table_stats::credit_tables(&p, &x.tables, dpk);
                    bond_credits.extend(x.bond_buckets.iter().map(|&(b, d, h)| (b, d, h, dby)));
                    // Packets that hit the megaflow refresh what it learned.
                    let l = super::learn::Lessons::of(&x, mf.stats.tcp_flags);
                    if !l.is_empty() {
                        lessons.push((used, mf.ufid, l));
                    }
                }
            }
        }
        {
            let now = Instant::now();
            // Rules expire when no commit is staging changes: the next round sees them.
            let serial = match self.flow_mods.try_lock() {
                Ok(g) => Some(g),
                Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => None,
            };
            let mut p = self.write();
            self.credit_rules(&mut p, credits, now);
            self.credit_bond_buckets(&mut p.bridges, bond_credits);
            p.patch_stats.prune(&p);
            // In the order of the megaflows' last packets, so that what those packets learn
            // is applied in the order they came (a `learn` with a `limit` keeps the first
            // packet's flow, as an upcall would have), not in the hash map's.
            lessons.sort_unstable_by_key(|&(used, ufid, _)| (used, ufid));
            for (_, _, l) in lessons {
                if self.apply_lessons(&mut p, l, now) {
                    self.changed();
                }
            }
            for b in &mut p.bridges {
                if serial.is_some() {
                    r.expired_rules += b.expire_rules(now);
                }
                if let Ok(mut m) = b.mac.lock() {
                    m.expire(now);
                }
            }
        }
        for m in &stale {
            if dp.remove_flow(m) > 0 {
                r.removed += 1;
            }
        }
        crate::coverage::DPIF_FLOW_DEL.add(r.removed as u64);
        crate::coverage::REVALIDATE_ROUND.inc();
        {
            let mut k = self.upcall.known.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(k) = k.as_mut() {
                k.append(&mut known);
            }
        }
        if r.expired_rules > 0 {
            self.changed();
        }
        self.upcall.synced.store(generation, Ordering::Release);
        self.revalidated.store(self.generation(), Ordering::Release);
        // The datapath's count, as `upcall/show`'s `current` (a flow held by two PMDs counts
        // twice, as in OVS's per-PMD tables).
        self.upcall.dumped(flows.len(), started.elapsed());
        r
    }
}

/// The mask a megaflow is installed with: translation's, but with the outer VLAN's VID and
/// CFI exact when translation did not look at the tag, as OVS's userspace datapath installs
/// it (`dpif-netdev.c`, `handle_packet_upcall()`): OVS's datapath key cannot say "any tag or
/// none", so its dumps show a tagged packet's megaflow with `vlan(vid=V,pcp=P/0x0)` and an
/// untagged one as matching "no tag". Revalidation compares with the same mask.
/// A tagged packet's TPID is part of its outer ethertype there, always exact.
fn megaflow_mask(key: &FlowKey, mask: &flow::Mask) -> flow::Mask {
    let mut m = mask.clone();
    if m.vlan_tci() == 0 {
        m.set_vlan_tci(0x0fff | flow::key::VLAN_CFI);
    }
    if key.vlan_tci() & flow::key::VLAN_CFI != 0 {
        m.set_vlan_tpid(0xffff);
    }
    m
}

/// The datapath's slow path: translate, compile, install.
pub(super) struct OfUpcall(pub(super) Arc<Ofproto>);

impl UpcallHandler for OfUpcall {
    fn upcall(&mut self, key: &FlowKey, pkt: &Packet) -> UpcallResult {
        if vlog::dpif_netdev().enabled(vlog::Level::Dbg) {
            log_miss(key, pkt);
        }
        let x = {
            let p = self.0.read();
            let x = translate(&p, key, true, None);
            // Group counters are atomics: the missed packet counts for them now.
            super::group::credit_groups(&p, &x.groups, 1, pkt.len() as u64);
            crate::xlate::credit_mirrors(&p, &x.mirrors, 1, pkt.len() as u64);
            crate::patch_stats::credit_patches(&p, &x.patches, 1, pkt.len() as u64);
            crate::table_stats::credit_tables(&p, &x.tables, 1);
            let m = self.0.installed_match(key, &x.mask);
            self.0.record_installed(key, m, &x.actions);
            x
        };
        if !x.learned.is_empty() || x.neigh_learned {
            self.0.changed();
        }
        self.0
            .learn_from(super::learn::Lessons::of(&x, key.tcp_flags()));
        // The missed packet counts for the rules and bond buckets now; the megaflow it
        // installs counts only the packets that hit it (OVS's xlate with resubmit_stats).
        self.0.owe_rules(&x.rules, pkt.len() as u64);
        self.0.owe_bond_buckets(&x.bond_buckets, pkt.len() as u64);
        // A packet-out whose actions do not compile is not sent; the packet is still handled.
        let packet_outs = x
            .packet_outs
            .into_iter()
            .filter_map(|po| {
                Some(datapath::pmd::PacketOut {
                    actions: compile(&po.actions).ok()?,
                    frame: po.frame,
                    in_port: po.in_port,
                })
            })
            .collect();
        match compile(&x.actions) {
            Ok(mut compiled) => {
                crate::coverage::DPIF_FLOW_PUT.inc();
                // A failed translation's drop counts under its reason, as OVS's explicit drop
                // action does; the megaflow still prints as `drop`.
                if let Some(why) = x
                    .drop
                    .or_else(|| x.failed.and_then(XlateDrop::from_text))
                    .filter(|_| compiled.is_empty())
                {
                    compiled.push(DpAction::Drop(why));
                }
                UpcallResult::Install {
                    mask: Box::new(self.0.install_mask(key, &x.mask)),
                    actions: x.actions,
                    compiled,
                    packet_outs,
                    skb_priority_mask: x.skb_priority_mask,
                }
            }
            Err(_) => UpcallResult::Drop,
        }
    }
}

/// The debug line of a miss (OVS's `dp_netdev_upcall()` with `vlog/set dpif_netdev:dbg`): the
/// packet's whole key as the datapath has it, then the packet as OpenFlow sees it, with its
/// UDP or TCP checksum.
fn log_miss(key: &FlowKey, pkt: &Packet) {
    let attrs = flow::odp::KeyAttrs::megaflow(key, &flow::Mask::exact());
    let flow = flow::odp::DpFlow {
        key: key.clone(),
        mask: flow::Mask::exact(),
        attrs,
        ..Default::default()
    };
    let line = flow.format(None, None);
    let key_text = line.strip_suffix(", actions:drop").unwrap_or(&line);
    let mut shown = crate::pipekey::PipeKey::new();
    shown.dp = key.clone();
    let mut packet = String::new();
    super::format_flow(&mut packet, &shown);
    // The packet alone has no input port: OVS prints its flow without one.
    let packet = match packet.split_once(",in_port=") {
        Some((head, rest)) => {
            let tail = rest.split_once(',').map_or("", |(_, t)| t);
            format!("{head},{tail}")
        }
        None => packet,
    };
    let mut packet = packet;
    let data = pkt.data();
    let l4 = usize::from(pkt.meta.l4);
    let csum_at = match key.nw_proto() {
        17 => Some(("udp_csum", 6)),
        6 => Some(("tcp_csum", 16)),
        _ => None,
    };
    if let Some((name, at)) = csum_at
        && matches!(key.eth_type(), 0x0800 | 0x86dd)
        && let Some(c) = data.get(l4 + at..l4 + at + 2)
    {
        let _ = std::fmt::Write::write_fmt(
            &mut packet,
            format_args!(" {name}:{:x}", u16::from_be_bytes([c[0], c[1]])),
        );
    }
    vlog::dpif_netdev().log(
        vlog::Level::Dbg,
        &format!("netdev@flowpath: miss upcall:\n{key_text}\n{packet}"),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A miss storm between two rounds (every packet a new megaflow, most over the flow
    /// limit) costs the record of what upcalls installed a few MiB at most, not a copy of
    /// every key the storm brought.
    #[test]
    fn a_miss_storm_between_rounds_keeps_the_record_of_installs_small() {
        let of = Ofproto::new();
        let mut key = FlowKey::new();
        key.set_in_port(1).set_eth_type(0x0800);
        let mask = flow::Mask::exact();
        for i in 0..100_000u32 {
            key.set_nw_src(std::net::Ipv4Addr::from(i));
            of.record_installed(&key, flow::Match::new(&key, &mask), &[]);
        }
        assert!(
            of.upcall.known.lock().unwrap().is_none(),
            "past the cap the record is dropped"
        );
        let bound = MAX_KNOWN_SINCE * std::mem::size_of::<Known>();
        assert!(
            bound <= 8 << 20,
            "{MAX_KNOWN_SINCE} records of {} bytes: {bound} bytes",
            std::mem::size_of::<Known>()
        );
    }

    #[test]
    fn megaflows_off_installs_exact_flows_and_upcall_show_is_ovs_s_layout() {
        let of = Ofproto::new();
        let mut key = FlowKey::new();
        key.set_in_port(1).set_eth_type(0x0800);
        let mut mask = flow::Mask::new();
        mask.set_in_port(u32::MAX);
        assert_ne!(of.install_mask(&key, &mask), flow::Mask::exact());
        of.set_megaflows(false);
        assert!(!of.megaflows());
        assert_eq!(of.install_mask(&key, &mask), flow::Mask::exact());
        of.upcall.dumped(4, Duration::from_millis(3));
        of.upcall.dumped(2, Duration::from_millis(1));
        assert_eq!(
            of.upcall_show("netdev@flowpath", 200000, 2),
            "netdev@flowpath:\n  flows         : (current 2) (avg 2) (max 4) (limit 200000)\n  \
             dump duration : 1ms\n  ufid enabled : true\n\n  1: (keys 2)\n"
        );
    }
}
