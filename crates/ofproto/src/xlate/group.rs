//! Translation of the `group` action (OVS's `xlate_group_action()`, ovs-actions(7) "Group
//! Actions").
//!
//! - `all` and `indirect`: every bucket runs, each on what amounts to a copy of the packet:
//!   the flow is restored after a bucket, so the next output commits the changes back (as OVS
//!   does, without the datapath's `clone`).
//! - `fast_failover`: the first live bucket: one without a watch, or whose watched port is a
//!   live port of the bridge ([`crate::port_config`]), or whose watched group has a live bucket (chains up to 128 links deep).
//! - `select`: one live bucket of weight above zero, chosen by a hash. `hash` with `fields`
//!   hashes the given fields (masked) and the megaflow matches them; the default method
//!   without `dp_hash` hashes the symmetric L4 fields, which the megaflow then matches; with
//!   `dp_hash` (a select group's default when its weights allow) the datapath hashes: this
//!   pass ends with `hash(ALG(BASIS)),recirc(ID)`, the group action and the actions after it
//!   frozen, and the next pass picks the bucket of `dp_hash & mask` from the group's table,
//!   its megaflow matching those bits of `dp_hash`: a connection keeps its bucket, and no
//!   megaflow depends on a field it does not match.
//!
//! A bucket's actions run as an OpenFlow action set (OVS's `ofpacts_execute_action_set()`):
//! the last pop/push/TTL action of each kind in the set's order, then the field writes in
//! order, then one final action (`group`, else `output`, else `resubmit`, else `ct`); a bucket
//! without a final action does nothing. Each use of a group is recorded in
//! [`XlateOut::groups`](super::XlateOut) so that its packets count for it and its bucket.

use flow::odp::{Action, HashAlg};

use super::{Ctx, NodeKind, OfAction};
use crate::fields::FieldId;
use crate::group::{Bucket, Group, GroupType, OFPG_ANY, Selection};
use crate::syntax::{OFPP_ANY, OFPP_CONTROLLER};

/// Deepest chain of watched groups followed for liveness (OVS's `MAX_LIVENESS_RECURSION`).
const MAX_LIVENESS_DEPTH: usize = 128;

impl Ctx<'_> {
    /// `group:ID` in a rule of `table`. Returns false when the group does not exist: the
    /// rest of the action list is not translated (OVS's behaviour), the pipeline goes on.
    pub(super) fn group_action(&mut self, group_id: u32, table: usize) -> bool {
        if self.resource_exhausted() {
            return true;
        }
        let pipe = self.pipe;
        let Some(g) = pipe.bridges[self.bridge].groups.get(group_id) else {
            self.trace_add(
                NodeKind::Warn,
                format_args!("output to nonexistent group {group_id}"),
            );
            return false;
        };
        match g.group_type {
            GroupType::All | GroupType::Indirect => {
                for i in 0..g.buckets.len() {
                    self.group_bucket(g, i, table);
                }
                self.res.groups.push((self.bridge, group_id, None));
            }
            GroupType::Select | GroupType::FastFailover => {
                let pick = if g.group_type == GroupType::Select {
                    self.pick_select(g, table)
                } else {
                    self.first_live_bucket(g, 0)
                };
                match pick {
                    Some(i) => {
                        self.note(format_args!("using bucket {}", g.buckets[i].bucket_id));
                        self.group_bucket(g, i, table);
                        self.res.groups.push((self.bridge, group_id, Some(i)));
                    }
                    None => self.note("no live bucket"),
                }
            }
        }
        true
    }

    /// Runs bucket `i` of `g` on a copy of the flow (OVS's `xlate_group_bucket()`).
    fn group_bucket(&mut self, g: &Group, i: usize, table: usize) {
        let b = &g.buckets[i];
        let node = self.trace_add(NodeKind::Action, format_args!("bucket {}", b.bucket_id));
        let (flow, was_mpls) = (self.flow.clone(), self.was_mpls);
        let list = crate::action_set::execute_order(&b.actions);
        self.depth += 1;
        let in_bucket = std::mem::replace(&mut self.in_group_bucket, true);
        if !list.is_empty() {
            self.under(node, |c| c.do_actions(&list, table));
        }
        self.in_group_bucket = in_bucket;
        self.depth -= 1;
        if self.freezing {
            self.finish_freezing();
        }
        // What the bucket did to the flow stays in the bucket; an exit or an MPLS label
        // problem in it does not end the actions after the group.
        self.flow = flow;
        self.was_mpls = was_mpls;
        self.exit = false;
        if self.res.failed == Some("Too many MPLS labels") {
            self.res.failed = None;
        }
    }

    /// Whether `b`, a bucket of `g`, is live (OVS's `bucket_is_alive()`).
    fn bucket_is_alive(&mut self, g: &Group, b: &Bucket, depth: usize) -> bool {
        if depth >= MAX_LIVENESS_DEPTH {
            self.trace_add(
                NodeKind::Error,
                format_args!("bucket chaining exceeded {MAX_LIVENESS_DEPTH} links"),
            );
            return false;
        }
        if g.group_type == GroupType::Select && b.weight == 0 {
            return false;
        }
        if !b.has_liveness() {
            return true;
        }
        let port_live = b.watch_port != OFPP_ANY
            && b.watch_port != OFPP_CONTROLLER
            && self.br().port_live(b.watch_port);
        port_live || (b.watch_group != OFPG_ANY && self.group_is_alive(b.watch_group, depth + 1))
    }

    fn group_is_alive(&mut self, id: u32, depth: usize) -> bool {
        let pipe = self.pipe;
        match pipe.bridges[self.bridge].groups.get(id) {
            Some(g) => self.first_live_bucket(g, depth).is_some(),
            None => false,
        }
    }

    /// The first live bucket of `g` (a fast-failover group's choice).
    fn first_live_bucket(&mut self, g: &Group, depth: usize) -> Option<usize> {
        for (i, b) in g.buckets.iter().enumerate() {
            if self.bucket_is_alive(g, b, depth) {
                return Some(i);
            }
            self.not_live(b);
        }
        None
    }

    fn not_live(&mut self, b: &Bucket) {
        if self.trace.is_none() {
            return;
        }
        let mut why = String::new();
        if b.watch_port != OFPP_ANY {
            why.push_str("port ");
            crate::syntax::format_port(&mut why, b.watch_port, &crate::syntax::NoPortNames);
        }
        if b.watch_group != OFPG_ANY {
            if !why.is_empty() {
                why.push_str(" and ");
            }
            // OVS's words, which call the group a port.
            why.push_str(&format!("port {}", b.watch_group));
        }
        self.note(format_args!(
            "bucket {}: not live due to {why}",
            b.bucket_id
        ));
    }

    /// The live bucket with the best score for hash `basis` (OVS's
    /// `group_best_live_bucket()`): each bucket's id hashed with the basis, times its weight;
    /// the last best wins a tie.
    fn best_live_bucket(&mut self, g: &Group, basis: u32) -> Option<usize> {
        let mut best = None;
        let mut best_score = 0u32;
        for (i, b) in g.buckets.iter().enumerate() {
            if self.bucket_is_alive(g, b, 0) {
                let score = (hash::hash_int(b.bucket_id, basis) & 0xffff) * u32::from(b.weight);
                if score >= best_score {
                    best = Some(i);
                    best_score = score;
                }
                self.note(format_args!("bucket {}: score {score}", b.bucket_id));
            } else {
                self.not_live(b);
            }
        }
        best
    }

    /// A select group's bucket (OVS's `pick_select_group()`).
    fn pick_select(&mut self, g: &Group, table: usize) -> Option<usize> {
        if self.was_mpls {
            // The hash may need what the popped label hid: the next pass picks.
            self.trigger_freeze();
            self.freeze_unroll(&[OfAction::Group(g.group_id)], table);
            return None;
        }
        match &g.selection {
            Selection::Default => {
                let basis = self.symmetric_l4_hash();
                self.best_live_bucket(g, basis)
            }
            Selection::Hash => {
                let basis = self.fields_hash(g);
                self.best_live_bucket(g, basis)
            }
            Selection::DpHash {
                symmetric,
                basis,
                mask,
                map,
            } => {
                let dp_hash = self.flow.dp.dp_hash();
                // Zero is no hash yet: every hash the datapath computes is non-zero.
                if dp_hash == 0 {
                    let alg = if *symmetric {
                        HashAlg::SymL4
                    } else {
                        HashAlg::L4
                    };
                    self.pending_hash = Some(Action::Hash { alg, basis: *basis });
                    self.trigger_freeze();
                    self.freeze_unroll(&[OfAction::Group(g.group_id)], table);
                    return None;
                }
                let m = self.wc.dp.dp_hash();
                self.wc.dp.set_dp_hash(m | mask);
                // From the hash's own value on, the first live bucket: the weights still
                // spread the packets when some buckets are down.
                for k in 0..=*mask {
                    let i = map[(dp_hash.wrapping_add(k) & mask) as usize];
                    if self.bucket_is_alive(g, &g.buckets[i], 0) {
                        return Some(i);
                    }
                }
                None
            }
        }
    }

    /// The default method's hash: Ethernet addresses and type, VLAN id, IP addresses and
    /// protocol, L4 ports, the same both ways; the megaflow matches all of them.
    fn symmetric_l4_hash(&mut self) -> u32 {
        let mut fields = vec![FieldId::ETH_SRC, FieldId::ETH_DST, FieldId::ETH_TYPE];
        let f = &self.flow.dp;
        if f.vlan_tci() & flow::key::VLAN_CFI != 0 {
            fields.push(FieldId::VLAN_VID);
        }
        let (ipv4, ipv6) = (f.eth_type() == 0x0800, f.eth_type() == 0x86dd);
        if ipv4 {
            fields.extend([FieldId::IPV4_SRC, FieldId::IPV4_DST]);
        }
        if ipv6 {
            fields.extend([FieldId::IPV6_SRC, FieldId::IPV6_DST]);
        }
        if ipv4 || ipv6 {
            fields.push(FieldId::IP_PROTO);
            if matches!(f.nw_proto(), 6 | 17 | 132) {
                fields.extend([FieldId::TCP_SRC, FieldId::TCP_DST]);
            }
        }
        // Each source/destination pair goes in as the XOR of the two, so both directions
        // of a connection hash alike.
        let mut words: Vec<u128> = Vec::new();
        let mut pending: Option<u128> = None;
        for id in fields {
            let field = id.field();
            field.unwildcard(&mut self.wc);
            let v = field.get(&self.flow);
            let paired = matches!(
                id,
                FieldId::ETH_SRC
                    | FieldId::ETH_DST
                    | FieldId::IPV4_SRC
                    | FieldId::IPV4_DST
                    | FieldId::IPV6_SRC
                    | FieldId::IPV6_DST
                    | FieldId::TCP_SRC
                    | FieldId::TCP_DST
            );
            match (paired, pending.take()) {
                (true, None) => pending = Some(v),
                (true, Some(p)) => words.push(p ^ v),
                (false, p) => {
                    words.extend(p);
                    words.push(v);
                }
            }
        }
        let mut h = 0;
        for w in words {
            h = hash::hash_bytes(&w.to_be_bytes(), h);
        }
        h
    }

    /// The `hash` method's hash: each of the group's fields whose prerequisites the packet
    /// meets, masked, from a basis of the method's parameter (OVS's
    /// `pick_hash_fields_select_group()`); the megaflow matches the masked bits.
    fn fields_hash(&mut self, g: &Group) -> u32 {
        let mut basis = hash::hash_u64(g.props.selection_method_param);
        for &(id, mask) in &g.props.fields {
            let f = id.field();
            if !f.prereq.is_met(&self.flow) {
                continue;
            }
            let v = f.get(&self.flow) & mask;
            let n = f.n_bytes.min(16);
            basis = hash::hash_bytes(&v.to_be_bytes()[16 - n..], basis);
            let mut m = crate::pipekey::PipeKey::new();
            f.set(&mut m, mask);
            let mut add = crate::pipekey::PipeMask::new();
            add.dp.0 = m.dp.0.clone();
            add.meta = m.meta;
            self.wc.union_with(&add);
        }
        basis
    }
}

/// The hashes a select group chooses by: MurmurHash3's 32-bit mixing steps, as OVS's
/// `lib/hash.h` builds its hashes from them, so that a bucket's score for a given basis is
/// the one OVS computes.
pub mod hash {
    // Murmur3's steps, as `multipath` and `bundle` hash with them.
    use super::super::flow_hash::{hash_add as add, hash_finish as finish};

    /// A 32-bit word with a basis (OVS's `hash_int()`).
    pub fn hash_int(x: u32, basis: u32) -> u32 {
        finish(add(add(x, 0), basis), 8)
    }

    /// A 64-bit word (OVS's `hash_uint64()`).
    pub fn hash_u64(x: u64) -> u32 {
        finish(add(add(0, x as u32), (x >> 32) as u32), 8)
    }

    /// Bytes with a basis (OVS's `hash_bytes()`): whole 32-bit words as the host reads them,
    /// then the tail zero-padded.
    pub fn hash_bytes(b: &[u8], basis: u32) -> u32 {
        let mut h = basis;
        let mut chunks = b.chunks_exact(4);
        for c in &mut chunks {
            h = add(h, u32::from_ne_bytes([c[0], c[1], c[2], c[3]]));
        }
        let tail = chunks.remainder();
        if !tail.is_empty() {
            let mut w = [0u8; 4];
            w[..tail.len()].copy_from_slice(tail);
            h = add(h, u32::from_ne_bytes(w));
        }
        finish(h, b.len() as u32)
    }
}
