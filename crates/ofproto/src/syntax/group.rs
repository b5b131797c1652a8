//! Groups in the syntax of `ovs-ofctl` (ovs-ofctl(8) "Group Syntax"): parsing what
//! `add-group`, `mod-group`, `del-groups`, `insert-buckets` and `remove-buckets` take, with
//! `ovs-ofctl`'s messages for what it refuses, and printing a group as `dump-groups` and
//! OpenFlow group mods print it (`group_id=1,type=select,bucket=bucket_id:0,weight:5,
//! actions=output:1`).
//!
//! As in OVS, the buckets are parsed last (a select group's buckets weigh 1 by default,
//! other groups' 0), everything after a bucket's `actions=` (or any key it does not know) is
//! its action list, and a bucket's id is printed only in OpenFlow 1.0 and 1.5, whose group
//! messages carry it.

use std::fmt::Write;

use super::lex::{KeyValues, parse_uint};
use super::matching::match_field;
use super::ports::{OFPP_ANY, PortNames, format_port, parse_port};
use super::value::{parse_field_value, put_field_value};
use super::{FlowKind, OfAction, format_actions, parse_flow};
use crate::group::{
    BUCKET_ALL, BUCKET_FIRST, BUCKET_LAST, BUCKET_MAX, Bucket, GroupCommand, GroupDesc, GroupMod,
    GroupProps, GroupType, OFPG_ALL, OFPG_ANY, OFPG_MAX, valid_watch_port,
};

/// Longest selection method name, with its terminating zero (`NTR_MAX_SELECTION_METHOD_LEN`).
pub const MAX_SELECTION_METHOD_LEN: usize = 16;

/// Parses a group for `command` as `ovs-ofctl` does (`parse_ofp_group_mod_str()`); `None`
/// lets a leading word say the command (`add`, `modify`, `add_or_mod`, `delete`,
/// `insert_bucket`, `remove_bucket`; none is `add`), as in `add-groups` files.
pub fn parse_group_mod(
    text: &str,
    command: Option<GroupCommand>,
    names: &dyn PortNames,
) -> Result<GroupMod, String> {
    let mut text = text.trim_start_matches([' ', '\t', '\r', '\n']);
    let command = match command {
        Some(c) => c,
        None => {
            let len = text
                .find([',', ' ', '\t', '\r', '\n'])
                .unwrap_or(text.len());
            let word = &text[..len];
            let c = [
                ("add", GroupCommand::Add),
                ("delete", GroupCommand::Delete),
                ("modify", GroupCommand::Modify),
                ("add_or_mod", GroupCommand::AddOrMod),
                ("insert_bucket", GroupCommand::InsertBucket),
                ("remove_bucket", GroupCommand::RemoveBucket),
            ]
            .into_iter()
            .find(|(w, _)| w.starts_with(word) && !word.is_empty())
            .map(|(_, c)| c);
            if c.is_some() {
                text = &text[len..];
            }
            c.unwrap_or(GroupCommand::Add)
        }
    };
    let (has_type, has_buckets, has_cmd_bucket, cmd_bucket_all) = match command {
        GroupCommand::Add | GroupCommand::Modify | GroupCommand::AddOrMod => {
            (true, true, false, false)
        }
        GroupCommand::Delete => (false, false, false, false),
        GroupCommand::InsertBucket => (false, true, true, false),
        GroupCommand::RemoveBucket => (false, false, true, true),
    };
    let mut gm = GroupMod::new(command, OFPG_ANY);
    if command == GroupCommand::Delete && text.is_empty() {
        gm.group_id = OFPG_ALL;
        return Ok(gm);
    }
    let (head, buckets) = match text.find("bucket=") {
        Some(i) => {
            if !has_buckets {
                return Err("bucket is not needed".into());
            }
            (&text[..i], Some(&text[i..]))
        }
        None => (text, None),
    };
    let mut had_type = false;
    let mut had_cmd_bucket = false;
    for (name, value) in KeyValues::new(head) {
        match name {
            "command_bucket_id" => {
                if !has_cmd_bucket {
                    return Err("command bucket id is not needed".into());
                }
                gm.command_bucket_id = match value {
                    "all" => BUCKET_ALL,
                    "first" => BUCKET_FIRST,
                    "last" => BUCKET_LAST,
                    _ => {
                        let id = u32_of(value)?;
                        if id > BUCKET_MAX && ![BUCKET_FIRST, BUCKET_LAST, BUCKET_ALL].contains(&id)
                        {
                            return Err(format!("invalid command bucket id {id}"));
                        }
                        id
                    }
                };
                if gm.command_bucket_id == BUCKET_ALL && !cmd_bucket_all {
                    return Err("command_bucket_id=all is not permitted".into());
                }
                had_cmd_bucket = true;
            }
            "group_id" => {
                gm.group_id = if value == "all" {
                    OFPG_ALL
                } else {
                    let id = u32_of(value)?;
                    if id != OFPG_ALL && id > OFPG_MAX {
                        return Err(format!("invalid group id {id}"));
                    }
                    id
                };
            }
            "type" => {
                if !has_type {
                    return Err("type is not needed".into());
                }
                gm.group_type = match value {
                    "all" => GroupType::All,
                    "select" => GroupType::Select,
                    "indirect" => GroupType::Indirect,
                    "ff" | "fast_failover" => GroupType::FastFailover,
                    _ => return Err(format!("invalid group type {value}")),
                };
                had_type = true;
            }
            "selection_method" => {
                if !has_type {
                    return Err("selection method is not needed".into());
                }
                if value.len() >= MAX_SELECTION_METHOD_LEN {
                    return Err(format!(
                        "selection method is longer than {} bytes long",
                        MAX_SELECTION_METHOD_LEN - 1
                    ));
                }
                gm.props.selection_method = value.to_owned();
            }
            "selection_method_param" => {
                if !has_type {
                    return Err("selection method param is not needed".into());
                }
                gm.props.selection_method_param = parse_uint(value, u128::from(u64::MAX))
                    .map_err(|_| format!("invalid numeric format {value}"))?
                    as u64;
            }
            "fields" => {
                if !has_type {
                    return Err("fields are not needed".into());
                }
                parse_fields(value, names, &mut gm.props)?;
            }
            _ => return Err(format!("unknown keyword {name}")),
        }
    }
    if gm.group_id == OFPG_ANY {
        return Err("must specify a group_id".into());
    }
    if has_type && !had_type {
        return Err("must specify a type".into());
    }
    if gm.props.selection_method != "hash" && !gm.props.fields.is_empty() {
        return Err("fields may only be specified with \"selection_method=hash\"".into());
    }
    if gm.props.selection_method.is_empty() && gm.props.selection_method_param != 0 {
        return Err("selection_method_param is only allowed with \"selection_method\"".into());
    }
    if has_cmd_bucket {
        if !(cmd_bucket_all || had_cmd_bucket) {
            return Err("must specify a command bucket id".into());
        }
    } else if had_cmd_bucket {
        return Err("command bucket id is not needed".into());
    }
    if let Some(b) = buckets {
        // Each "bucket=" starts one; its text runs to the next.
        for part in b.split("bucket=").skip(1) {
            let bucket = parse_bucket(part, gm.group_type, names)?;
            if command != GroupCommand::InsertBucket
                && gm.group_type != GroupType::Select
                && bucket.weight != 0
            {
                return Err("Only select groups can have bucket weights.".into());
            }
            gm.buckets.push(bucket);
        }
    }
    if gm.group_type == GroupType::Indirect && gm.buckets.len() > 1 {
        return Err("Indirect groups can have at most one bucket.".into());
    }
    Ok(gm)
}

fn u32_of(s: &str) -> Result<u32, String> {
    parse_uint(s, u128::from(u32::MAX))
        .map(|v| v as u32)
        .map_err(|_| format!("invalid numeric format {s}"))
}

/// One bucket's text (OVS's `parse_bucket_str()`).
fn parse_bucket(s: &str, t: GroupType, names: &dyn PortNames) -> Result<Bucket, String> {
    let mut b = Bucket::new(t, Vec::new());
    let mut actions = String::new();
    for (key, value) in KeyValues::new(s) {
        match key.to_ascii_lowercase().as_str() {
            "weight" => {
                b.weight = parse_uint(value, 0xffff)
                    .map_err(|_| format!("invalid numeric format {value}"))?
                    as u16;
            }
            "watch_port" => match parse_port(value, names) {
                Some(p) if valid_watch_port(p) => b.watch_port = p,
                _ => return Err(format!("{value}: invalid watch_port")),
            },
            "watch_group" => {
                let g = u32_of(value)?;
                if g > OFPG_MAX {
                    return Err(format!("invalid watch_group id {g}"));
                }
                b.watch_group = g;
            }
            "bucket_id" => {
                let id = u32_of(value)?;
                if id > BUCKET_MAX {
                    return Err(format!("invalid bucket_id id {id}"));
                }
                b.bucket_id = id;
            }
            "action" | "actions" => {
                let _ = write!(actions, "{value},");
            }
            _ if value.is_empty() => {
                let _ = write!(actions, "{key},");
            }
            _ => {
                let _ = write!(actions, "{key}({value}),");
            }
        }
    }
    if actions.is_empty() {
        return Err("bucket must specify actions".into());
    }
    if t == GroupType::FastFailover && !b.has_liveness() {
        return Err("fast failover bucket requires watch_port or watch_group".into());
    }
    actions.pop();
    b.actions = parse_bucket_actions(&actions, names)?;
    Ok(b)
}

/// Bucket actions: the action syntax of flows, without a flow whose match would pin down
/// what a field write needs (OVS checks buckets against no match). The actions parse as those
/// of a flow that matches everything, else of the first protocol whose prerequisites they
/// meet; the error is the one for the flow that matches everything.
fn parse_bucket_actions(actions: &str, names: &dyn PortNames) -> Result<Vec<OfAction>, String> {
    const PROTOCOLS: [&str; 10] = [
        "", "tcp,", "udp,", "sctp,", "icmp,", "tcp6,", "udp6,", "sctp6,", "icmp6,", "arp,",
    ];
    let mut first = None;
    for p in PROTOCOLS {
        match parse_flow(&format!("{p}actions={actions}"), FlowKind::Add, names) {
            Ok(f) => return Ok(f.actions),
            Err(e) => {
                first.get_or_insert(e);
            }
        }
    }
    Err(first.map_or_else(String::new, |e| e.to_string()))
}

/// `fields(NAME[=MASK],...)` of a `hash` select group (OVS's `parse_select_group_field()`).
fn parse_fields(s: &str, names: &dyn PortNames, props: &mut GroupProps) -> Result<(), String> {
    for (name, value) in KeyValues::new(s) {
        let id = match_field(name).ok_or_else(|| format!("{s}: unknown field {name}"))?;
        if props.fields.iter().any(|&(f, _)| f == id) {
            return Err(format!("{name}: duplicate field"));
        }
        let f = id.field();
        let mask = if value.is_empty() {
            f.full_mask()
        } else {
            let (m, _) = parse_field_value(f, value, names)?;
            if m == 0 && !id.is_tun_metadata() {
                return Err(format!(
                    "{s}: values are wildcards here and must not be all-zeros"
                ));
            }
            m
        };
        props.fields.push((id, mask));
    }
    props.fields.sort_by_key(|&(f, _)| f.index());
    Ok(())
}

/// Appends a group as OVS's `ofp_print_group()` does: `group_id=N`, its type unless
/// `suppress_type` (bucket commands), its selection method, then its buckets. `bucket_ids`
/// says whether bucket ids are printed (OpenFlow 1.0 and 1.5).
pub fn format_group(
    out: &mut String,
    g: &GroupDesc,
    bucket_ids: bool,
    suppress_type: bool,
    names: &dyn PortNames,
) {
    let (t, props) = (g.group_type, &g.props);
    let _ = write!(out, "group_id={}", g.group_id);
    if !suppress_type {
        let _ = write!(out, ",type={}", t.name());
    }
    if !props.selection_method.is_empty() {
        let _ = write!(out, ",selection_method={}", props.selection_method);
        if props.selection_method_param != 0 {
            let _ = write!(
                out,
                ",selection_method_param={}",
                props.selection_method_param
            );
        }
        match props.fields.len() {
            0 => {}
            1 => {
                out.push_str(",fields=");
                format_fields(out, &props.fields, names);
            }
            _ => {
                out.push_str(",fields(");
                format_fields(out, &props.fields, names);
                out.push(')');
            }
        }
    }
    out.push(',');
    for b in &g.buckets {
        out.push_str("bucket=");
        if bucket_ids {
            put_bucket_id(out, "bucket_id:", b.bucket_id);
        }
        if b.weight != u16::from(t == GroupType::Select) {
            let _ = write!(out, "weight:{},", b.weight);
        }
        if b.watch_port != OFPP_ANY {
            out.push_str("watch_port:");
            format_port(out, b.watch_port, names);
            out.push(',');
        }
        if b.watch_group != OFPG_ANY {
            let _ = write!(out, "watch_group:{},", b.watch_group);
        }
        out.push_str("actions=");
        format_actions(out, &b.actions, names);
        out.push(',');
    }
    if out.ends_with(',') {
        out.pop();
    }
}

/// Appends `label` and a bucket id (`first`, `last`, `all` or the number), then a comma.
pub fn put_bucket_id(out: &mut String, label: &str, id: u32) {
    out.push_str(label);
    match id {
        BUCKET_FIRST => out.push_str("first"),
        BUCKET_LAST => out.push_str("last"),
        BUCKET_ALL => out.push_str("all"),
        _ => {
            let _ = write!(out, "{id}");
        }
    }
    out.push(',');
}

fn format_fields(
    out: &mut String,
    fields: &[(crate::fields::FieldId, u128)],
    names: &dyn PortNames,
) {
    for (i, &(id, mask)) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let f = id.field();
        out.push_str(f.name);
        let full = f.full_mask();
        if mask != full {
            out.push('=');
            put_field_value(out, f, mask, full, names);
        }
    }
}

/// The group mod as `ovs-ofctl` prints an OpenFlow group mod (after the message's header
/// line): ` ADD group_id=1,type=all,bucket=actions=output:1`; bucket commands print their
/// `command_bucket_id` and no type.
pub fn format_group_mod(out: &mut String, gm: &GroupMod, bucket_ids: bool, names: &dyn PortNames) {
    let _ = write!(out, " {} ", gm.command.name());
    let bucket_cmd = matches!(
        gm.command,
        GroupCommand::InsertBucket | GroupCommand::RemoveBucket
    );
    if bucket_cmd && bucket_ids {
        put_bucket_id(out, "command_bucket_id:", gm.command_bucket_id);
    }
    let desc = GroupDesc {
        group_id: gm.group_id,
        group_type: gm.group_type,
        buckets: gm.buckets.clone(),
        props: gm.props.clone(),
    };
    format_group(out, &desc, bucket_ids, bucket_cmd, names);
}
