//! A bridge's bonds ([`crate::bond`]): set by configuration (Ports of several Interfaces), run
//! against their members' carrier, and the `bond/*` commands' work.

use std::time::Instant;

use super::Ofproto;
use crate::bond::{Bond, BondConfig};
use crate::bridge::Bridge;

impl Ofproto {
    /// Sets bridge `bridge`'s bonds to `configs`. A bond that stays (by name) keeps which
    /// members are enabled and its active member. Whether anything changed.
    pub fn set_bonds(&self, bridge: &str, configs: Vec<BondConfig>) -> Result<bool, String> {
        let now = Instant::now();
        let mut p = self.write();
        let b = p
            .bridge_mut(bridge)
            .ok_or_else(|| format!("no bridge named {bridge}"))?;
        let unchanged = b.bonds.len() == configs.len()
            && b.bonds.iter().zip(&configs).all(|(o, c)| &o.config == c);
        if unchanged {
            return Ok(false);
        }
        let old = std::mem::take(&mut b.bonds);
        // The new bonds' runs say again which members LACP keeps from being live.
        for n in old.iter().flat_map(|d| &d.members).filter_map(|m| m.ofport) {
            b.port_config.entry(n).or_default().lacp_down = false;
        }
        b.bonds = configs
            .into_iter()
            .map(|c| {
                let mut bond = Bond::new(c, now);
                if let Some(o) = old.iter().find(|o| o.config.name == bond.config.name) {
                    bond.keep_state(o);
                }
                bond
            })
            .collect();
        // A balanced bond has a recirculation id while it stays balanced (OVS's
        // `bond_reconfigure()`), bound to a frozen state that names it.
        let wanted: Vec<(usize, crate::recirc::FrozenState)> = (b.bonds.iter().enumerate())
            .filter(|(_, d)| d.config.mode != crate::bond::BondMode::ActiveBackup)
            .filter(|(_, d)| d.recirc_id == 0)
            .map(|(i, d)| (i, bond_frozen_state(&b.name, &d.config.name)))
            .collect();
        let ids: Vec<(usize, u32)> = wanted
            .into_iter()
            .map(|(i, st)| (i, p.recirc.intern(st).unwrap_or(0)))
            .collect();
        let b = p
            .bridge_mut(bridge)
            .ok_or_else(|| format!("no bridge named {bridge}"))?;
        for (i, id) in ids {
            b.bonds[i].recirc_id = id;
        }
        run_bridge_bonds(b, now);
        drop(p);
        self.changed();
        Ok(true)
    }

    /// Periodic work of every bond: members' ports and carrier, delays, the active member.
    pub fn run_bonds(&self) {
        let now = Instant::now();
        let changed = {
            let mut p = self.write();
            let mut changed = false;
            for b in &mut p.bridges {
                changed |= run_bridge_bonds(b, now);
                changed |= super::lacp_port::run_bridge_lacp_ports(b, now);
            }
            changed
        };
        if changed {
            self.changed();
        }
    }

    /// Runs `f` on the bond called `name`, then the bond's periodic work (as OVS's main loop
    /// does right after a command); `Err("no such bond")` when there is none.
    pub fn with_bond<T>(
        &self,
        name: &str,
        f: impl FnOnce(&mut Bond) -> Result<T, String>,
    ) -> Result<T, String> {
        let now = Instant::now();
        let r = {
            let mut p = self.write();
            let b = p
                .bridges
                .iter_mut()
                .find(|b| b.bonds.iter().any(|d| d.config.name == name))
                .ok_or("no such bond")?;
            let i = b.bonds.iter().position(|d| d.config.name == name);
            let r = f(&mut b.bonds[i.unwrap_or_default()]);
            run_bridge_bonds(b, now);
            r
        };
        self.changed();
        r
    }

    /// The recirculation ids of every bond (kept whether or not a megaflow mentions them).
    pub fn bond_recirc_ids(&self) -> Vec<u32> {
        let p = self.read();
        bond_recirc_ids(&p.bridges)
    }

    /// The buckets of every bond that outputs with `lb_output` (by its id, the bond's
    /// recirculation id): each bucket's datapath port, [`datapath::bond::NO_MEMBER`] for a
    /// bucket with no enabled member (OVS's `bond_add_lb_output_buckets()`).
    pub fn lb_output_tables(&self) -> Vec<(u32, datapath::bond::BucketMap)> {
        let p = self.read();
        let mut out = Vec::new();
        for b in &p.bridges {
            for d in b.bonds.iter().filter(|d| d.use_lb_output()) {
                let map = std::array::from_fn(|i| {
                    d.member_for_dp_hash(i as u32)
                        .and_then(|m| m.ofport)
                        .and_then(|n| b.ports.get(&n)?.dp_port)
                        .unwrap_or(datapath::bond::NO_MEMBER)
                });
                out.push((d.recirc_id, map));
            }
        }
        out
    }

    /// The ids of the bonds that output with `lb_output` and are due to rebalance: their
    /// buckets' byte counters are wanted ([`Self::account_lb_output`]) before the next
    /// [`Self::run_bonds`].
    pub fn lb_output_due(&self) -> Vec<u32> {
        let now = Instant::now();
        let p = self.read();
        (p.bridges.iter().flat_map(|b| &b.bonds))
            .filter(|d| d.use_lb_output() && d.is_balanced() && now >= d.next_rebalance)
            .map(|d| d.recirc_id)
            .collect()
    }

    /// What the datapath counted for each bucket of `lb_output` bond `id` (totals), for its
    /// rebalancing.
    pub fn account_lb_output(&self, id: u32, totals: &[u64]) {
        let mut p = self.write();
        let bonds = p.bridges.iter_mut().flat_map(|b| &mut b.bonds);
        if let Some(d) = bonds
            .into_iter()
            .find(|d| d.recirc_id == id && d.use_lb_output())
        {
            d.account_buckets(totals);
        }
    }

    /// Every bond with its bridge, in bridge then configuration order.
    pub fn bonds(&self) -> Vec<Bond> {
        let p = self.read();
        p.bridges.iter().flat_map(|b| b.bonds.clone()).collect()
    }
}

/// The recirculation ids of the bonds of `bridges`.
pub(crate) fn bond_recirc_ids(bridges: &[Bridge]) -> Vec<u32> {
    bridges
        .iter()
        .flat_map(|b| b.bonds.iter().map(|d| d.recirc_id))
        .filter(|&id| id != 0)
        .collect()
}

/// Bytes sent through a bond bucket: (bridge index, bond index, bucket, bytes).
pub(crate) type BucketCredit = (usize, usize, usize, u64);

/// How many bucket credits upcalls may queue before one settles them itself.
const MAX_PENDING_BOND_CREDITS: usize = 4096;

impl Ofproto {
    /// A missed packet of `bytes` went out through `buckets` (bridge, bond, bucket): its bytes
    /// count for their load at the next revalidation, so that an upcall never waits for the
    /// pipeline's write lock.
    pub(super) fn owe_bond_buckets(&self, buckets: &[(usize, usize, usize)], bytes: u64) {
        if buckets.is_empty() {
            return;
        }
        let mut q = self
            .pending_bond_credits
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        q.extend(buckets.iter().map(|&(b, d, h)| (b, d, h, bytes)));
        // Between revalidations under a storm of misses, settled here when the pipeline is
        // free, so that the queue stays bounded.
        if q.len() >= MAX_PENDING_BOND_CREDITS {
            drop(q);
            if let Ok(mut p) = self.pipe.try_write() {
                self.credit_bond_buckets(&mut p.bridges, Vec::new());
            }
        }
    }

    /// Adds `credits` (what megaflows sent) and what upcalls owe to the buckets' load.
    pub(super) fn credit_bond_buckets(&self, bridges: &mut [Bridge], credits: Vec<BucketCredit>) {
        let owed = std::mem::take(
            &mut *self
                .pending_bond_credits
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        credit_bond_buckets(bridges, credits.into_iter().chain(owed));
    }
}

/// Adds the bytes sent through bond buckets to the buckets' load (OVS's `bond_account()`
/// and post-recirculation rule stats).
fn credit_bond_buckets(bridges: &mut [Bridge], credits: impl Iterator<Item = BucketCredit>) {
    for (b, d, h, bytes) in credits {
        let bond = bridges.get_mut(b).and_then(|b| b.bonds.get_mut(d));
        if let Some(bond) = bond.filter(|d| d.is_balanced() && h < d.load.len()) {
            bond.load[h] += bytes;
        }
    }
}

/// The frozen state bond `bond` of bridge `bridge` recirculates with: table 254 (OVS's
/// internal table, where its post-recirculation rules are), its name as user data.
fn bond_frozen_state(bridge: &str, bond: &str) -> crate::recirc::FrozenState {
    let mut userdata = crate::bond::RECIRC_STATE_PREFIX.to_vec();
    userdata.extend_from_slice(bond.as_bytes());
    crate::recirc::FrozenState {
        bridge: bridge.to_owned(),
        table: 254,
        in_port: crate::syntax::OFPP_ANY,
        meta: Default::default(),
        tunnel: None,
        conntracked: false,
        actions: Vec::new(),
        stack: Vec::new(),
        action_set: Vec::new(),
        userdata,
        mirrors: 0,
    }
}

/// What a bond sends so that the peer switch relearns (OVS's `bundle_send_learning_packets()`):
/// on bridge `bridge`, out of member port `port`, one RARP from each address learned in a VLAN
/// on a port other than the bond.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LearningPackets {
    pub bridge: String,
    pub port: u32,
    pub addrs: Vec<(flow::EthAddr, u16)>,
}

impl Ofproto {
    /// The learning packets bonds owe since the last call (each bond's flag is taken).
    pub fn take_learning_packets(&self) -> Vec<LearningPackets> {
        let now = Instant::now();
        let mut p = self.write();
        let mut out = Vec::new();
        for b in &mut p.bridges {
            let entries = b.mac.lock().map(|m| m.entries(now)).unwrap_or_default();
            for bond in &mut b.bonds {
                if !std::mem::take(&mut bond.send_learning_packets)
                    || !bond.may_send_learning_packets()
                {
                    continue;
                }
                let Some(port) = bond.active.and_then(|i| bond.members[i].ofport) else {
                    continue;
                };
                let bundle = bond.bundle_port();
                let addrs = entries
                    .iter()
                    .filter(|e| Some(e.0) != bundle)
                    .map(|e| (e.2, e.1))
                    .collect();
                out.push(LearningPackets {
                    bridge: b.name.clone(),
                    port,
                    addrs,
                });
            }
        }
        out
    }
}

impl Ofproto {
    /// The LACPDUs bonds owe since the last call: (bridge, member port, frame).
    pub fn take_lacp_pdus(&self) -> Vec<(String, u32, Vec<u8>)> {
        let mut p = self.write();
        let mut out = Vec::new();
        for b in &mut p.bridges {
            for bond in &mut b.bonds {
                for (port, frame) in std::mem::take(&mut bond.lacp_tx) {
                    out.push((b.name.clone(), port, frame));
                }
            }
            for l in &mut b.lacp_ports {
                for (port, frame) in std::mem::take(&mut l.tx) {
                    out.push((b.name.clone(), port, frame));
                }
            }
        }
        out
    }

    /// A packet translation gave the LACP slow path (datapath key `key`, which tells the
    /// bridge and port it entered by): to the LACP of the port's bond or single-interface
    /// Port, which then runs.
    pub fn lacp_receive(&self, key: &flow::FlowKey, frame: &[u8]) {
        let now = Instant::now();
        let changed = {
            let mut p = self.write();
            let mut wc = crate::pipekey::PipeMask::new();
            let Some(Ok((bi, ofport, _))) = p.receive(key, &mut wc) else {
                return;
            };
            let b = &mut p.bridges[bi];
            if let Some(l) = super::lacp_port::lacp_port_on(b, ofport) {
                l.receive(frame, now);
                super::lacp_port::run_bridge_lacp_ports(b, now)
            } else {
                let Some(bond) = b.bonds.iter_mut().find(|d| d.member_on(ofport).is_some()) else {
                    return;
                };
                let i = bond.member_on(ofport).unwrap_or_default();
                bond.lacp_receive(i, frame, now) && run_bridge_bonds(b, now)
            }
        };
        if changed {
            self.changed();
        }
    }
}

/// Runs the bonds of `b`: each member's OpenFlow port and carrier. Whether forwarding
/// changed. Logs what changed.
fn run_bridge_bonds(b: &mut Bridge, now: Instant) -> bool {
    let mut changed = false;
    for i in 0..b.bonds.len() {
        for m in 0..b.bonds[i].members.len() {
            let port = b.port_number(&b.bonds[i].members[m].name);
            if b.bonds[i].members[m].ofport != port {
                b.bonds[i].members[m].ofport = port;
                changed = true;
            }
        }
        let configs = &b.port_config;
        let up = |m: &crate::bond::BondMember| {
            m.ofport
                .is_some_and(|n| !configs.get(&n).is_some_and(|c| c.link_down))
        };
        changed |= b.bonds[i].run(now, up);
        changed |= set_lacp_liveness(b, i);
        for e in std::mem::take(&mut b.bonds[i].events) {
            if let Some(m) = vlog::module("bond") {
                m.log(vlog::Level::Info, &e);
            }
        }
    }
    changed
}

/// Bond `i`'s members with carrier are live only while its LACP (when it has LACP) lets them
/// carry traffic, as OVS's `may_enable_port()`. Whether any member's liveness changed.
fn set_lacp_liveness(b: &mut Bridge, i: usize) -> bool {
    let mut changed = false;
    let has_lacp = b.bonds[i].lacp.is_some();
    for m in 0..b.bonds[i].members.len() {
        let member = &b.bonds[i].members[m];
        let Some(n) = member.ofport else { continue };
        let c = b.port_config.entry(n).or_default();
        let down = has_lacp && !c.link_down && !member.may_enable;
        changed |= c.lacp_down != down;
        c.lacp_down = down;
    }
    changed
}

impl Bridge {
    /// Each bond's name and the address of its active member (`bond_active_slave`; all
    /// zeros once no member is active, as OVS writes it). A method of the bridge, not of
    /// [`Ofproto`]: its callers already hold the pipeline.
    pub fn bond_active_macs(&self) -> Vec<(String, Option<flow::EthAddr>)> {
        self.bonds
            .iter()
            .map(|d| (d.config.name.clone(), Some(d.active_mac)))
            .collect()
    }
}
