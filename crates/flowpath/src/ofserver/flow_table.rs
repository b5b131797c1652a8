//! Flow mods and flow statistics over OpenFlow, applied to the bridge's tables through the
//! same [`Ofproto`] functions as `ofctl/add-flow`, `mod-flows`, `del-flows` and `dump-flows`,
//! so that a flow has one path into the tables whichever way it comes: `OFPT_FLOW_MOD` of
//! every version and `NXT_FLOW_MOD` (add, modify, modify-strict, delete, delete-strict), and
//! flow and aggregate statistics requests (`OFPST_FLOW`, `NXST_FLOW`, `OFPMP_FLOW` and their
//! aggregate twins) answered in the request's form.

use ofproto::bridge::INTERNAL_TABLE;
use ofproto::fields::FieldId;
use ofproto::ofproto::{BundleCommit, FlowModError, FlowModOp, Ofproto};
use ofproto::pipekey::PipeMatch;
use ofproto::syntax::{FlowModFlags, FlowSpec};
use openflow::error::OfpErr;
use openflow::flow_mod::{FlowModCommand, OFPTT_ALL, decode_flow_mod};
use openflow::flow_stats::{
    AggregateStats, FlowStatsWriter, classify, decode_flow_stats_request, encode_aggregate_reply,
};
use openflow::header::Version;
use openflow::nxm::TlvLens;

/// The flow mod `msg` (header included) as the tables take it; `table_id` is whether the
/// connection turned on `NXT_FLOW_MOD_TABLE_ID`.
/// Checks flow mod `msg` (header included) as OVS checks one added to a bundle
/// (`ofproto_flow_mod_init()`): what [`decode`] refuses.
pub(crate) fn check_flow_mod(msg: &[u8], table_id: bool) -> Result<(), OfpErr> {
    decode(msg, table_id).map(drop)
}

fn decode(msg: &[u8], table_id: bool) -> Result<(FlowModOp, FlowSpec), OfpErr> {
    let mut fm = decode_flow_mod(msg, table_id)?;
    // In OpenFlow 1.0 and 1.1 an add always resets counters (OVS's
    // `ofputil_decode_flow_mod_flags()`), which later versions' statistics show.
    if msg.first().is_some_and(|&v| v < Version::Of12.wire()) && fm.command == FlowModCommand::Add {
        fm.spec.flags.0 |= FlowModFlags::RESET_COUNTS;
    }
    // An add that names no table (all ones, as ovs-ofctl sends it once flow mods carry table
    // ids) goes to table 0, as OVS's `add_flow_init()` puts it.
    if fm.command == FlowModCommand::Add && fm.spec.table == OFPTT_ALL {
        fm.spec.table = 0;
    }
    // Only the switch's own flows may match recirculation ids and datapath hashes (OVS's
    // `add_flow_init()`, which a modify goes through too).
    if matches!(
        fm.command,
        FlowModCommand::Add | FlowModCommand::Modify | FlowModCommand::ModifyStrict
    ) && !has_default_hidden_fields(&fm.spec.match_)
    {
        return Err(OfpErr::OfpbrcEperm);
    }
    // The internal table is read-only (OVS's `add_flow_init()`).
    if fm.command == FlowModCommand::Add && usize::from(fm.spec.table) == INTERNAL_TABLE {
        return Err(OfpErr::OfpbrcEperm);
    }
    let op = match fm.command {
        FlowModCommand::Add => FlowModOp::Add,
        FlowModCommand::Modify => FlowModOp::Modify { strict: false },
        FlowModCommand::ModifyStrict => FlowModOp::Modify { strict: true },
        FlowModCommand::Delete => FlowModOp::Delete { strict: false },
        FlowModCommand::DeleteStrict => FlowModOp::Delete { strict: true },
    };
    Ok((op, fm.spec))
}

/// Whether `m` leaves the fields only the switch's own flows may match at their defaults
/// (OVS's `minimatch_has_default_hidden_fields()`): `recirc_id` 0 or any, `dp_hash` any.
fn has_default_hidden_fields(m: &PipeMatch) -> bool {
    let (k, mk) = (m.key(), m.mask());
    let (recirc, hash) = (FieldId::RECIRC_ID.field(), FieldId::DP_HASH.field());
    recirc.get(k) == 0
        && matches!(recirc.get_mask(mk), 0 | 0xffff_ffff)
        && hash.get(k) | hash.get_mask(mk) == 0
}

/// Applies the flow mod `msg` (header included) to `bridge`; `table_id` is whether the
/// connection turned on `NXT_FLOW_MOD_TABLE_ID`.
pub(crate) fn flow_mod(
    of: &Ofproto,
    bridge: &str,
    msg: &[u8],
    table_id: bool,
) -> Result<(), OfpErr> {
    let (op, s) = decode(msg, table_id)?;
    if of.unmapped_tun_md(bridge, &s).is_some() {
        return Err(OfpErr::NxfmfcInvalidTlvField);
    }
    if of.tun_md_overrun(bridge, &s).is_some() {
        return Err(OfpErr::OfpbacBadSetLen);
    }
    if matches!(op, FlowModOp::Add | FlowModOp::Modify { .. }) {
        of.check_meters(bridge, &s.actions)
            .map_err(super::meter_table::ofp_err)?;
    }
    match op {
        FlowModOp::Add => {
            if s.flags.0 & FlowModFlags::CHECK_OVERLAP != 0
                && of.overlaps(bridge, &s).map_err(|_| OfpErr::OfpbrcEperm)?
            {
                return Err(OfpErr::OfpfmfcOverlap);
            }
            of.add_flow_spec(bridge, &s)
                .map_err(|e| refused(&e, OfpErr::OfpbrcBadTableId))
        }
        FlowModOp::Modify { strict } => of
            .mod_flows_spec(bridge, &s, strict)
            .map(drop)
            .map_err(|e| refused(&e, OfpErr::OfpbrcEperm)),
        FlowModOp::Delete { strict } => of
            .del_flows_spec(bridge, Some(&s), strict)
            .map(drop)
            .map_err(|_| OfpErr::OfpbrcEperm),
    }
}

/// The error for a flow the pipeline refused with `why`: a group its actions use does not
/// exist (`OFPBAC_BAD_OUT_GROUP`, as OVS's `ofproto_check_ofpacts()`), the internal table
/// (`OFPBRC_EPERM`), else `other`.
fn refused(why: &str, other: OfpErr) -> OfpErr {
    if why.starts_with("OFPBAC_BAD_OUT_GROUP") {
        OfpErr::OfpbacBadOutGroup
    } else if why.starts_with("OFPBRC_EPERM") {
        OfpErr::OfpbrcEperm
    } else {
        other
    }
}

/// Stages the flow mod `msg` (header included) in a bundle's commit, with the error OVS gives
/// when it fails.
pub(crate) fn stage_flow_mod(
    commit: &mut BundleCommit<'_>,
    msg: &[u8],
    table_id: bool,
) -> Result<(), OfpErr> {
    let (op, s) = decode(msg, table_id)?;
    commit.flow_mod(op, &s).map_err(|e| match e {
        FlowModError::NoBridge => OfpErr::OfpbrcEperm,
        FlowModError::BadTableId => OfpErr::OfpbrcBadTableId,
        FlowModError::ReadOnlyTable => OfpErr::OfpbrcEperm,
        FlowModError::Overlap => OfpErr::OfpfmfcOverlap,
        FlowModError::BadOutGroup => OfpErr::OfpbacBadOutGroup,
        FlowModError::Meter(e) => super::meter_table::ofp_err(e),
        FlowModError::UnmappedTlvField(_) => OfpErr::NxfmfcInvalidTlvField,
        FlowModError::TlvFieldOverrun(_) => OfpErr::OfpbacBadSetLen,
    })
}

/// Appends the reply to the flow or aggregate statistics request `msg` (header included),
/// for `bridge`'s flows, in the request's form; `tlv` gives the widths of the tunnel
/// metadata fields the bridge maps.
pub(crate) fn flow_stats(
    of: &Ofproto,
    bridge: &str,
    msg: &[u8],
    tlv: &TlvLens,
    out: &mut Vec<u8>,
) -> Result<(), OfpErr> {
    let req = decode_flow_stats_request(msg)?;
    let (proto, _, _, _) = classify(msg).ok_or(OfpErr::OfpbrcBadStat)?;
    let xid = msg
        .get(4..8)
        .map_or(0, |x| u32::from_be_bytes([x[0], x[1], x[2], x[3]]));
    let filter = FlowSpec {
        table: req.table,
        priority: 0,
        cookie: req.cookie,
        cookie_mask: req.cookie_mask,
        new_cookie: None,
        modify_cookie: false,
        idle_timeout: 0,
        hard_timeout: 0,
        importance: 0,
        flags: FlowModFlags(0),
        out_port: req.out_port,
        out_group: req.out_group,
        match_: req.match_,
        actions: Vec::new(),
        has_actions: false,
    };
    let at = out.len();
    // The flows are encoded as the tables are walked, not copied out first.
    let mut failed = None;
    let r = if req.aggregate {
        let mut agg = AggregateStats::default();
        of.for_each_flow_entry(bridge, Some(&filter), |_, s| {
            agg.packet_count += s.n_packets;
            agg.byte_count += s.n_bytes;
            agg.flow_count += 1;
        })
        .map_err(|_| OfpErr::OfpbrcEperm)?;
        encode_aggregate_reply(&agg, proto, xid, out)
    } else {
        let mut w = FlowStatsWriter::new(proto, xid, tlv, out);
        of.for_each_flow_entry(bridge, Some(&filter), |f, s| {
            if failed.is_none() {
                failed = w.push(f, s).err();
            }
        })
        .map_err(|_| OfpErr::OfpbrcEperm)?;
        match failed {
            Some(e) => Err(e),
            None => w.finish(),
        }
    };
    r.map_err(|_| {
        out.truncate(at);
        OfpErr::OfpbrcBadLen
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofproto::pipekey::PipeMatch;

    #[test]
    fn a_catchall_delete_empties_the_tables_and_stats_see_it() {
        let of = Ofproto::new();
        of.add_bridge("br0").unwrap();
        of.add_flow("br0", "priority=5,actions=drop").unwrap();
        // OpenFlow 1.3 OFPMP_AGGREGATE for every table.
        let mut req = vec![
            4, 18, 0, 56, 0, 0, 0, 9, 0, 2, 0, 0, 0, 0, 0, 0, 0xff, 0, 0, 0, 0xff, 0xff, 0xff,
            0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0,
        ];
        req.extend([0; 16]);
        req.extend([0, 1, 0, 4, 0, 0, 0, 0]);
        let mut out = Vec::new();
        flow_stats(&of, "br0", &req, &TlvLens::default(), &mut out).unwrap();
        assert_eq!(out[1], 19, "{out:?}");
        assert_eq!(&out[32..36], &[0, 0, 0, 1], "one flow: {out:?}");
        let all = FlowSpec {
            table: 255,
            match_: PipeMatch::catchall(),
            ..of.flow_entries("br0", None).unwrap()[0].0.clone()
        };
        of.del_flows_spec("br0", Some(&all), false).unwrap();
        assert!(of.flow_entries("br0", None).unwrap().is_empty());
    }
}
