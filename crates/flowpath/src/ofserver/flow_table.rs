//! Flow mods and flow statistics over OpenFlow, applied to the bridge's tables through the
//! same [`Ofproto`] functions as `ofctl/add-flow`, `mod-flows`, `del-flows` and `dump-flows`,
//! so that a flow has one path into the tables whichever way it comes: `OFPT_FLOW_MOD` of
//! every version and `NXT_FLOW_MOD` (add, modify, modify-strict, delete, delete-strict), and
//! flow and aggregate statistics requests (`OFPST_FLOW`, `NXST_FLOW`, `OFPMP_FLOW` and their
//! aggregate twins) answered in the request's form.

use ofproto::bridge::overlaps;
use ofproto::ofproto::Ofproto;
use ofproto::pipekey::PipeMatch;
use ofproto::syntax::{FlowModFlags, FlowSpec};
use openflow::error::OfpErr;
use openflow::flow_mod::{FlowModCommand, OFPTT_ALL, decode_flow_mod};
use openflow::flow_stats::{
    AggregateStats, classify, decode_flow_stats_request, encode_aggregate_reply,
    encode_flow_stats_reply,
};
use openflow::header::Version;
use openflow::nxm::TlvLens;

/// Applies the flow mod `msg` (header included) to `bridge`; `table_id` is whether the
/// connection turned on `NXT_FLOW_MOD_TABLE_ID`.
pub(crate) fn flow_mod(
    of: &Ofproto,
    bridge: &str,
    msg: &[u8],
    table_id: bool,
) -> Result<(), OfpErr> {
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
    let s = &fm.spec;
    if matches!(
        fm.command,
        FlowModCommand::Add | FlowModCommand::Modify | FlowModCommand::ModifyStrict
    ) {
        of.check_meters(bridge, &s.actions)
            .map_err(super::meter_table::ofp_err)?;
    }
    match fm.command {
        FlowModCommand::Add => {
            if s.flags.0 & FlowModFlags::CHECK_OVERLAP != 0 && overlaps_any(of, bridge, s)? {
                return Err(OfpErr::OfpfmfcOverlap);
            }
            of.add_flow_spec(bridge, s)
                .map_err(|e| refused(&e, OfpErr::OfpbrcBadTableId))
        }
        FlowModCommand::Modify | FlowModCommand::ModifyStrict => {
            let strict = fm.command == FlowModCommand::ModifyStrict;
            of.mod_flows_spec(bridge, s, strict)
                .map(drop)
                .map_err(|e| refused(&e, OfpErr::OfpbrcEperm))
        }
        FlowModCommand::Delete | FlowModCommand::DeleteStrict => {
            let strict = fm.command == FlowModCommand::DeleteStrict;
            of.del_flows_spec(bridge, Some(s), strict)
                .map(drop)
                .map_err(|_| OfpErr::OfpbrcEperm)
        }
    }
}

/// The error for a flow the pipeline refused with `why`: a group its actions use does not
/// exist (`OFPBAC_BAD_OUT_GROUP`, as OVS's `ofproto_check_ofpacts()`), else `other`.
fn refused(why: &str, other: OfpErr) -> OfpErr {
    if why.starts_with("OFPBAC_BAD_OUT_GROUP") {
        OfpErr::OfpbacBadOutGroup
    } else {
        other
    }
}

/// Whether a rule of the table of `s` with its priority overlaps its match (OVS's
/// `check_overlap` test).
fn overlaps_any(of: &Ofproto, bridge: &str, s: &FlowSpec) -> Result<bool, OfpErr> {
    let table = FlowSpec {
        match_: PipeMatch::catchall(),
        cookie: 0,
        cookie_mask: 0,
        out_port: None,
        out_group: None,
        ..s.clone()
    };
    let rules = of
        .flow_entries(bridge, Some(&table))
        .map_err(|_| OfpErr::OfpbrcEperm)?;
    Ok(rules
        .iter()
        .any(|(r, _)| r.priority == s.priority && overlaps(&r.match_, &s.match_)))
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
    let rows = of
        .flow_entries(bridge, Some(&filter))
        .map_err(|_| OfpErr::OfpbrcEperm)?;
    let at = out.len();
    let r = if req.aggregate {
        let agg = rows
            .iter()
            .fold(AggregateStats::default(), |mut a, (_, s)| {
                a.packet_count += s.n_packets;
                a.byte_count += s.n_bytes;
                a.flow_count += 1;
                a
            });
        encode_aggregate_reply(&agg, proto, xid, out)
    } else {
        encode_flow_stats_reply(&rows, proto, xid, tlv, out)
    };
    r.map_err(|_| {
        out.truncate(at);
        OfpErr::OfpbrcBadLen
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
