//! Bundles (`OFPT_BUNDLE_CONTROL`, `OFPT_BUNDLE_ADD_MESSAGE`; ONF's in OpenFlow 1.3), one set
//! per connection as OVS's `ofproto/bundles.c` keeps them: opened explicitly or by their first
//! message, closed, committed or discarded, with OVS's errors (`OFPBFC_BAD_ID`,
//! `OFPBFC_BUNDLE_CLOSED`, `OFPBFC_BAD_FLAGS`; a bundle is dropped on any of them). Each added
//! message is checked when it is added; a commit applies them in order.
//!
//! A commit is atomic for flow mods, whatever its flags say (as OVS's, for everything but
//! port mods): they are staged in order in the bridge's next table version ([`commit`]), which
//! packets do not see, and the version is published only once every message succeeded. When
//! one fails, the staged flow changes are reverted, the flow tables are exactly as they were,
//! and the failing message gets OVS's error for it before the commit gets `OFPBFC_MSG_FAILED`.
//!
//! Flow and group mods and packet-outs are bundled here (a flow may use a group an earlier
//! message of the bundle adds). Group mods are applied in their place in the commit but the
//! group table is not versioned: a group change is visible at once and stays if a later message
//! fails. A packet-out is translated in its place, its lookups seeing the flow mods staged
//! before it, and a group or meter it names must exist then; the packet goes through the
//! datapath only once the whole commit succeeded, with the actions so translated (OVS's
//! `ofproto_packet_out_start()`, then `_finish()`). Port mods are not served yet and are
//! refused when added.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ofproto::flow_events::{Origin, with_origin};
use ofproto::ofproto::Ofproto;
use openflow::conn::ConnId;
use openflow::error::OfpErr;
use openflow::header::Version;
use openflow::msgs::bundle::{BundleAdd, BundleCtrl, BundleCtrlType};
use openflow::msgtype::{MsgType, OfpType};

use super::packet_out::{self, Prepared};

/// Bundles a connection may hold open at once.
const MAX_BUNDLES: usize = 64;
/// Bytes of messages one connection's bundles may hold.
const MAX_BYTES: usize = 256 << 20;

/// How long a bundle may go without an open, add or close before it is dropped with
/// `OFPBFC_TIMEOUT`, in milliseconds: OVS's default, or `other_config:bundle-idle-timeout`.
static IDLE_TIMEOUT_MS: AtomicU64 = AtomicU64::new(DEFAULT_IDLE_TIMEOUT_MS);
const DEFAULT_IDLE_TIMEOUT_MS: u64 = 10_000;

/// Sets the bundles' idle timeout to `secs` seconds, OVS's default (10) for 0 (OVS's
/// `connmgr_set_bundle_idle_timeout()`).
pub(crate) fn set_idle_timeout(secs: u64) {
    let ms = match secs {
        0 => DEFAULT_IDLE_TIMEOUT_MS,
        s => s.saturating_mul(1000),
    };
    IDLE_TIMEOUT_MS.store(ms, Ordering::Relaxed);
}

fn idle_timeout() -> Duration {
    Duration::from_millis(IDLE_TIMEOUT_MS.load(Ordering::Relaxed))
}

/// A bundle being filled.
#[derive(Clone, Debug)]
struct Bundle {
    flags: u16,
    closed: bool,
    /// The messages, header included, in order.
    msgs: Vec<Vec<u8>>,
    /// The message that opened it (header included), which its timeout error carries.
    opened_by: Vec<u8>,
    /// When it was last opened, added to or closed.
    used: Instant,
}

impl Bundle {
    fn new(flags: u16, opened_by: &[u8]) -> Bundle {
        Bundle {
            flags,
            closed: false,
            msgs: Vec::new(),
            opened_by: opened_by.to_vec(),
            used: Instant::now(),
        }
    }
}

/// Why a commit failed: the failing message (header included) and its error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MsgFailed {
    pub(crate) msg: Vec<u8>,
    pub(crate) error: OfpErr,
}

/// The transaction id in message `m`'s header (0 for a message too short to have one).
fn xid(m: &[u8]) -> u32 {
    m.get(4..8)
        .map_or(0, |x| u32::from_be_bytes([x[0], x[1], x[2], x[3]]))
}

/// Appends the `OFPBFC_TIMEOUT` error owed for a bundle that expired, carrying (and in the
/// version and xid of) `opened_by`, the message that opened it ([`Bundles::expire`]).
pub(crate) fn encode_timeout(opened_by: &[u8], out: &mut Vec<u8>) {
    if let Some(&version) = opened_by.first() {
        openflow::error::encode(
            OfpErr::OfpbfcTimeout,
            version,
            xid(opened_by),
            opened_by,
            out,
        );
    }
}

/// Commits a bundle's messages (headers included) to `bridge` atomically; `version` is the
/// connection's OpenFlow version, `table_id` whether it turned on `NXT_FLOW_MOD_TABLE_ID`. On
/// failure nothing changed (but group mods), and the failing message is returned with its
/// error; on success, what the commit leaves to do ([`Committed`]).
/// Flow monitors are told each change as the connection `conn`'s bundled request's.
pub(crate) fn commit(
    of: &Ofproto,
    conn: ConnId,
    version: Version,
    bridge: &str,
    msgs: &[Vec<u8>],
    table_id: bool,
) -> Result<Committed, MsgFailed> {
    let fail = |msg: &[u8], error| MsgFailed {
        msg: msg.to_vec(),
        error,
    };
    let mut staged = of
        .begin_bundle(bridge)
        .map_err(|_| fail(&[], OfpErr::OfpbrcEperm))?;
    let mut done = Committed::default();
    for m in msgs {
        let decoded = openflow::msgtype::decode(m).map(|d| (d.msg_type.kind(), d.xid));
        let r = match decoded {
            Ok((OfpType::FlowMod, xid)) => {
                let origin = Origin { conn: conn.0, xid };
                with_origin(origin, || {
                    super::flow_table::stage_flow_mod(&mut staged, m, table_id)
                })
            }
            Ok((OfpType::GroupMod, xid)) => super::group_table::stage_group_mod(&mut staged, m)
                .map(|gm| done.group_mods.push((xid, gm))),
            Ok((OfpType::PacketOut, _)) => {
                packet_out::prepare_bundled(of, bridge, staged.version(), version, m)
                    .map(|p| done.prepared.extend(p))
            }
            Ok(_) => Err(OfpErr::OfpbrcBadType),
            Err(e) => Err(e),
        };
        // Dropping what is staged reverts it.
        r.map_err(|e| fail(m, e))?;
    }
    staged.finish();
    Ok(done)
}

/// What a bundle's commit leaves to do once it is in force.
#[derive(Debug, Default)]
pub(crate) struct Committed {
    /// The packet-outs translated in the commit, to be run.
    pub(crate) prepared: Vec<Prepared>,
    /// The group mods, with their transaction ids, to be forwarded to the connections that
    /// asked for them (requestforward), as a group mod outside a bundle is.
    pub(crate) group_mods: Vec<(u32, ofproto::group::GroupMod)>,
}

/// Appends what OVS sends when a commit fails: the failing message's error (carrying that
/// message, with its xid), then `OFPBFC_MSG_FAILED` for the commit request `commit_req`.
pub(crate) fn encode_failure(
    f: &MsgFailed,
    version: openflow::header::Version,
    commit_req: &[u8],
    out: &mut Vec<u8>,
) {
    if !f.msg.is_empty() {
        openflow::error::encode(f.error, version.wire(), xid(&f.msg), &f.msg, out);
    }
    openflow::error::encode(
        OfpErr::OfpbfcMsgFailed,
        version.wire(),
        xid(commit_req),
        commit_req,
        out,
    );
}

/// A connection's bundles, by id.
#[derive(Clone, Debug, Default)]
pub(crate) struct Bundles {
    open: BTreeMap<u32, Bundle>,
    bytes: usize,
}

impl Bundles {
    fn remove(&mut self, id: u32) -> Option<Bundle> {
        let b = self.open.remove(&id)?;
        self.bytes -= b.msgs.iter().map(Vec::len).sum::<usize>();
        Some(b)
    }

    /// Drops the bundles idle for longer than the idle timeout (OVS's
    /// `bundle_remove_expired()`); returns the messages that opened them, each owed an
    /// `OFPBFC_TIMEOUT` error.
    pub(crate) fn expire(&mut self, now: Instant) -> Vec<Vec<u8>> {
        let limit = idle_timeout();
        let idle: Vec<u32> = self
            .open
            .iter()
            .filter(|(_, b)| now.saturating_duration_since(b.used) >= limit)
            .map(|(&id, _)| id)
            .collect();
        idle.into_iter()
            .filter_map(|id| self.remove(id))
            .map(|b| b.opened_by)
            .collect()
    }

    /// A bundle control (`raw` is the message, header included); `commit` is handed a
    /// committed bundle's messages to carry out (see [`commit`]; when one fails it says
    /// `OFPBFC_MSG_FAILED`). On success the reply is due (the caller sends it, or has
    /// `commit` send it when the commit is done).
    pub(crate) fn control(
        &mut self,
        c: &BundleCtrl,
        raw: &[u8],
        commit: impl FnOnce(Vec<Vec<u8>>) -> Result<(), OfpErr>,
    ) -> Result<(), OfpErr> {
        let id = c.bundle_id;
        match c.ctrl_type {
            BundleCtrlType::OpenRequest => {
                if self.remove(id).is_some() {
                    return Err(OfpErr::OfpbfcBadId);
                }
                if self.open.len() >= MAX_BUNDLES {
                    return Err(OfpErr::OfpbfcOutOfBundles);
                }
                self.open.insert(id, Bundle::new(c.flags, raw));
            }
            BundleCtrlType::CloseRequest => {
                let b = self.open.get_mut(&id).ok_or(OfpErr::OfpbfcBadId)?;
                if b.closed || b.flags != c.flags {
                    let e = if b.closed {
                        OfpErr::OfpbfcBundleClosed
                    } else {
                        OfpErr::OfpbfcBadFlags
                    };
                    self.remove(id);
                    return Err(e);
                }
                b.closed = true;
                b.used = Instant::now();
            }
            BundleCtrlType::CommitRequest => {
                let b = self.remove(id).ok_or(OfpErr::OfpbfcBadId)?;
                if b.flags != c.flags {
                    return Err(OfpErr::OfpbfcBadFlags);
                }
                commit(b.msgs)?;
            }
            BundleCtrlType::DiscardRequest => {
                self.remove(id).ok_or(OfpErr::OfpbfcBadId)?;
            }
            _ => return Err(OfpErr::OfpbfcBadType),
        }
        Ok(())
    }

    /// A bundled message of type `t` (`raw` the add message, header included), already
    /// checked by `check`: stored in its bundle (opened by it if need be).
    pub(crate) fn add(
        &mut self,
        a: &BundleAdd<'_>,
        raw: &[u8],
        t: MsgType,
        check: impl FnOnce(&[u8]) -> Result<(), OfpErr>,
    ) -> Result<(), OfpErr> {
        if !matches!(
            t.kind(),
            OfpType::FlowMod | OfpType::GroupMod | OfpType::PacketOut
        ) {
            return Err(OfpErr::OfpbrcBadType);
        }
        check(a.msg)?;
        if self.bytes + a.msg.len() > MAX_BYTES {
            return Err(OfpErr::OfpbfcMsgTooMany);
        }
        if !self.open.contains_key(&a.bundle_id) && self.open.len() >= MAX_BUNDLES {
            return Err(OfpErr::OfpbfcOutOfBundles);
        }
        let b = self
            .open
            .entry(a.bundle_id)
            .or_insert_with(|| Bundle::new(a.flags, raw));
        if b.closed || b.flags != a.flags {
            let e = if b.closed {
                OfpErr::OfpbfcBundleClosed
            } else {
                OfpErr::OfpbfcBadFlags
            };
            self.remove(a.bundle_id);
            return Err(e);
        }
        b.msgs.push(a.msg.to_vec());
        b.used = Instant::now();
        self.bytes += a.msg.len();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctrl(id: u32, t: BundleCtrlType, flags: u16) -> BundleCtrl {
        BundleCtrl {
            bundle_id: id,
            ctrl_type: t,
            flags,
        }
    }

    fn add<'a>(id: u32, flags: u16, msg: &'a [u8]) -> BundleAdd<'a> {
        BundleAdd {
            bundle_id: id,
            flags,
            msg,
        }
    }

    /// An OpenFlow 1.4 flow mod of `text` (`ovs-ofctl` syntax) with transaction id `xid`.
    fn flow_mod(text: &str, command: openflow::flow_mod::FlowModCommand, xid: u32) -> Vec<u8> {
        use ofproto::syntax::{FlowKind, NoPortNames, parse_flow};
        use openflow::flow_mod::{FlowMod, NO_BUFFER, Protocol, encode_flow_mod};
        let kind = match command {
            openflow::flow_mod::FlowModCommand::Add => FlowKind::Add,
            _ => FlowKind::ModOrDel,
        };
        let fm = FlowMod {
            command,
            spec: parse_flow(text, kind, &NoPortNames).unwrap(),
            buffer_id: NO_BUFFER,
        };
        let mut out = Vec::new();
        let proto = Protocol::new(openflow::header::Version::Of14);
        encode_flow_mod(&fm, proto, xid, &Default::default(), &mut out).unwrap();
        out
    }

    fn dump(of: &Ofproto) -> Vec<String> {
        of.flow_entries("br0", None)
            .unwrap()
            .iter()
            .map(|(f, _)| f.format_dump(None, &ofproto::syntax::NoPortNames))
            .collect()
    }

    #[test]
    fn a_commit_is_all_or_nothing_and_a_failure_names_its_message() {
        use openflow::flow_mod::FlowModCommand::{Add, Delete};
        let of = Ofproto::new();
        of.add_bridge("br0").unwrap();
        of.add_flow("br0", "priority=5,arp,actions=drop").unwrap();
        let before = dump(&of);
        let msgs = [
            flow_mod("priority=9,ip,actions=output:1", Add, 1),
            flow_mod("arp", Delete, 2),
            flow_mod("check_overlap,priority=9,tcp,actions=drop", Add, 3),
        ];
        let f = commit(
            &of,
            ConnId(1),
            openflow::header::Version::Of14,
            "br0",
            &msgs,
            false,
        )
        .unwrap_err();
        assert_eq!((f.error, &f.msg), (OfpErr::OfpfmfcOverlap, &msgs[2]));
        assert_eq!(dump(&of), before);
        // The failing message's error carries it and its xid; then the commit's.
        let req = [5, 33, 0, 16, 0, 0, 0, 7, 0, 0, 0, 1, 0, 4, 0, 1];
        let mut out = Vec::new();
        encode_failure(&f, openflow::header::Version::Of14, &req, &mut out);
        let first = usize::from(u16::from_be_bytes([out[2], out[3]]));
        assert_eq!(&out[4..8], &[0, 0, 0, 3]);
        assert_eq!(&out[12..12 + msgs[2].len()], &msgs[2][..]);
        assert_eq!(&out[first + 4..first + 8], &[0, 0, 0, 7]);
        commit(
            &of,
            ConnId(1),
            openflow::header::Version::Of14,
            "br0",
            &msgs[..2],
            false,
        )
        .unwrap();
        assert_eq!(dump(&of), ["priority=9,ip actions=output:1"]);
    }

    /// An OpenFlow 1.4 packet-out from port 6 of `actions` with transaction id `xid`.
    fn packet_out(actions: &str, xid: u32) -> Vec<u8> {
        use openflow::msgs::packet_out::{PacketOut, port_match};
        let spec = ofproto::syntax::parse_flow(
            &format!("actions={actions}"),
            ofproto::syntax::FlowKind::Add,
            &ofproto::syntax::NoPortNames,
        )
        .unwrap();
        let po = PacketOut {
            buffer_id: openflow::msgs::packet_in::NO_BUFFER,
            metadata: port_match(6),
            actions: spec.actions,
            packet: vec![
                0, 1, 2, 3, 4, 5, 0, 0x10, 0x20, 0x30, 0x40, 0x50, 0x12, 0x34,
            ],
        };
        let mut out = Vec::new();
        po.encode(Version::Of14, xid, &Default::default(), &mut out)
            .unwrap();
        out
    }

    #[test]
    fn a_bundled_packet_out_is_translated_in_its_place_and_can_fail_the_commit() {
        use openflow::flow_mod::FlowModCommand::Add;
        let of = Ofproto::new();
        of.add_bridge("br0").unwrap();
        let p1 = ofproto::bridge::OfPort {
            name: "p1".into(),
            ofport: 1,
            dp_port: Some(1),
            peer: None,
            vlan: Default::default(),
        };
        of.add_port("br0", p1).unwrap();
        let before = dump(&of);
        // Group 3 does not exist: the commit fails on the packet-out, after the flow mod.
        let msgs = [
            flow_mod("in_port=6,actions=output:1", Add, 1),
            packet_out("group:3", 2),
        ];
        let f = commit(&of, ConnId(1), Version::Of14, "br0", &msgs, false).unwrap_err();
        assert_eq!((f.error, &f.msg), (OfpErr::OfpbacBadOutGroup, &msgs[1]));
        assert_eq!(dump(&of), before);
        // Through the tables, the packet-out sees the flow the bundle staged before it.
        let msgs = [
            flow_mod("in_port=6,actions=output:1", Add, 1),
            packet_out("resubmit(,0)", 2),
        ];
        let prepared = commit(&of, ConnId(1), Version::Of14, "br0", &msgs, false)
            .unwrap()
            .prepared;
        assert_eq!(prepared.len(), 1);
        assert_eq!(
            prepared[0].actions,
            [datapath::actions::DpAction::Output(1)],
            "{prepared:?}"
        );
    }

    #[test]
    fn bundles_open_fill_commit_and_fail_as_ovs_s() {
        use BundleCtrlType::*;
        let mut b = Bundles::default();
        let ok = |_: &[u8]| Ok(());
        let committed = |_: Vec<Vec<u8>>| Ok(());
        let fm = MsgType::Ofpt11FlowMod;
        b.control(&ctrl(1, OpenRequest, 3), b"req", committed)
            .unwrap();
        assert_eq!(
            b.control(&ctrl(1, OpenRequest, 3), b"req", committed),
            Err(OfpErr::OfpbfcBadId)
        );
        // Opened by its first message; messages kept in order.
        b.add(&add(2, 3, b"one"), b"req", fm, ok).unwrap();
        b.add(&add(2, 3, b"two"), b"req", fm, ok).unwrap();
        assert_eq!(
            b.add(&add(2, 1, b"x"), b"req", fm, ok),
            Err(OfpErr::OfpbfcBadFlags)
        );
        b.add(&add(2, 3, b"one"), b"req", fm, ok).unwrap();
        b.add(&add(2, 3, b"two"), b"req", fm, ok).unwrap();
        b.control(&ctrl(2, CloseRequest, 3), b"req", committed)
            .unwrap();
        assert_eq!(
            b.add(&add(2, 3, b"x"), b"req", fm, ok),
            Err(OfpErr::OfpbfcBundleClosed)
        );
        b.add(&add(2, 3, b"one"), b"req", fm, ok).unwrap();
        b.add(&add(2, 3, b"two"), b"req", fm, ok).unwrap();
        let mut seen = Vec::new();
        b.control(&ctrl(2, CommitRequest, 3), b"req", |msgs| {
            seen.extend(msgs.iter().cloned());
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, [b"one".to_vec(), b"two".to_vec()]);
        assert_eq!(
            b.control(&ctrl(2, CommitRequest, 3), b"req", committed),
            Err(OfpErr::OfpbfcBadId)
        );
        assert_eq!(
            b.add(&add(3, 0, b"x"), b"req", MsgType::Ofpt11PortMod, ok),
            Err(OfpErr::OfpbrcBadType)
        );
        // The second open of bundle 1 dropped it, as OVS drops it.
        assert_eq!(
            b.control(&ctrl(1, DiscardRequest, 0), b"req", committed),
            Err(OfpErr::OfpbfcBadId)
        );
        b.add(&add(4, 0, b"x"), b"req", fm, ok).unwrap();
        b.control(&ctrl(4, DiscardRequest, 0), b"req", committed)
            .unwrap();
        assert_eq!(b.bytes, 0);
        assert!(b.open.is_empty());
    }

    #[test]
    fn idle_bundles_expire_with_the_message_that_opened_them() {
        use BundleCtrlType::*;
        let mut b = Bundles::default();
        let ok = |_: &[u8]| Ok(());
        let committed = |_: Vec<Vec<u8>>| Ok(());
        let fm = MsgType::Ofpt11FlowMod;
        b.control(&ctrl(1, OpenRequest, 0), b"open 1", committed)
            .unwrap();
        b.add(&add(2, 0, b"m"), b"add 2", fm, ok).unwrap();
        let t0 = Instant::now();
        assert!(b.expire(t0).is_empty());
        let late = t0 + idle_timeout();
        // Bundle 1 used again later than 2: only 2 goes.
        b.open.get_mut(&1).unwrap().used = t0 + Duration::from_secs(5);
        assert_eq!(b.expire(late), [b"add 2".to_vec()]);
        assert_eq!(b.bytes, 0);
        assert_eq!(
            b.expire(late + Duration::from_secs(5)),
            [b"open 1".to_vec()]
        );
        assert!(b.open.is_empty());
    }
}
