use super::*;
use crate::syntax::NoPortNames;
use crate::syntax::group::{format_group, parse_group_mod};

fn parse(cmd: GroupCommand, text: &str) -> GroupMod {
    parse_group_mod(text, Some(cmd), &NoPortNames).unwrap()
}

fn dump(t: &GroupTable, id: u32) -> String {
    let mut s = String::new();
    format_group(
        &mut s,
        &t.get(id).unwrap().desc(),
        true,
        false,
        &NoPortNames,
    );
    s
}

fn apply(t: &mut GroupTable, cmd: GroupCommand, text: &str) -> Result<GroupModDone, GroupError> {
    let gm = parse(cmd, text);
    gm.check()?;
    t.apply(&gm, Instant::now())
}

/// The bucket commands as `ovs-vswitchd` applied them (recorded with `ovs-ofctl -O
/// OpenFlow15 insert-buckets`/`remove-buckets` and `dump-groups`).
#[test]
fn bucket_commands_insert_and_remove_as_ovs_does() {
    use GroupCommand::*;
    let mut t = GroupTable::default();
    apply(
        &mut t,
        Add,
        "group_id=5,type=select,selection_method=hash,fields(ip_src,nw_proto),\
         bucket=bucket_id:7,weight:5,actions=output:1,bucket=bucket_id=8,output:2",
    )
    .unwrap();
    let ins = "bucket=bucket_id:1,actions=output:3";
    apply(
        &mut t,
        InsertBucket,
        &format!("group_id=5,command_bucket_id=first,{ins}"),
    )
    .unwrap();
    apply(
        &mut t,
        InsertBucket,
        "group_id=5,command_bucket_id=last,bucket=bucket_id:9,actions=output:3",
    )
    .unwrap();
    apply(
        &mut t,
        InsertBucket,
        "group_id=5,command_bucket_id=8,bucket=bucket_id:10,actions=output:3",
    )
    .unwrap();
    assert_eq!(
        apply(
            &mut t,
            InsertBucket,
            "group_id=5,command_bucket_id=8,bucket=bucket_id:10,actions=output:3"
        ),
        Err(GroupError::BucketExists)
    );
    assert_eq!(
        dump(&t, 5),
        "group_id=5,type=select,selection_method=hash,fields(ip_src,nw_proto),\
         bucket=bucket_id:1,weight:0,actions=output:3,bucket=bucket_id:7,weight:5,\
         actions=output:1,bucket=bucket_id:8,actions=output:2,bucket=bucket_id:10,weight:0,\
         actions=output:3,bucket=bucket_id:9,weight:0,actions=output:3"
    );
    apply(&mut t, RemoveBucket, "group_id=5,command_bucket_id=10").unwrap();
    assert_eq!(
        apply(&mut t, RemoveBucket, "group_id=5,command_bucket_id=99"),
        Err(GroupError::UnknownBucket)
    );
    apply(&mut t, RemoveBucket, "group_id=5,command_bucket_id=first").unwrap();
    assert_eq!(
        dump(&t, 5),
        "group_id=5,type=select,selection_method=hash,fields(ip_src,nw_proto),\
         bucket=bucket_id:7,weight:5,actions=output:1,bucket=bucket_id:8,actions=output:2,\
         bucket=bucket_id:9,weight:0,actions=output:3"
    );
    apply(&mut t, RemoveBucket, "group_id=5").unwrap();
    assert_eq!(
        dump(&t, 5),
        "group_id=5,type=select,selection_method=hash,fields(ip_src,nw_proto)"
    );
    assert_eq!(
        apply(&mut t, RemoveBucket, "group_id=6"),
        Err(GroupError::UnknownGroup)
    );
}

#[test]
fn add_modify_delete_with_ovs_errors() {
    use GroupCommand::*;
    let mut t = GroupTable::default();
    apply(&mut t, Add, "group_id=1,type=all,bucket=output:1").unwrap();
    assert_eq!(
        apply(&mut t, Add, "group_id=1,type=all,bucket=output:2"),
        Err(GroupError::GroupExists)
    );
    assert_eq!(
        apply(&mut t, Modify, "group_id=9,type=indirect,bucket=output:2"),
        Err(GroupError::UnknownGroup)
    );
    assert_eq!(
        apply(&mut t, Add, "group_id=all,type=all,bucket=output:1"),
        Err(GroupError::InvalidGroup)
    );
    // Watching is for select and fast-failover groups; indirect groups have one bucket.
    assert_eq!(
        apply(
            &mut t,
            Add,
            "group_id=2,type=all,bucket=watch_port:5,output:1"
        ),
        Err(GroupError::WatchUnsupported)
    );
    let created = t.get(1).unwrap().created;
    apply(&mut t, Modify, "group_id=1,type=select,bucket=output:3").unwrap();
    assert_eq!(t.get(1).unwrap().created, created);
    assert_eq!(t.get(1).unwrap().group_type, GroupType::Select);
    apply(&mut t, AddOrMod, "group_id=2,type=indirect,bucket=output:2").unwrap();
    let done = apply(&mut t, Delete, "").unwrap();
    assert_eq!(done.deleted, vec![1, 2]);
    assert!(t.is_empty());
    // Deleting what does not exist is no error.
    assert_eq!(apply(&mut t, Delete, "group_id=7").unwrap().deleted, vec![]);
}

#[test]
fn indirect_groups_need_exactly_one_bucket() {
    let gm = GroupMod {
        group_type: GroupType::Indirect,
        ..GroupMod::new(GroupCommand::Add, 2)
    };
    assert_eq!(gm.check(), Err(GroupError::InvalidGroup));
}

/// `ovs-ofctl`'s messages for what it refuses.
#[test]
fn text_errors_are_ovs_ofctl_s() {
    let e = |cmd, s: &str| parse_group_mod(s, Some(cmd), &NoPortNames).unwrap_err();
    use GroupCommand::*;
    assert_eq!(
        e(Add, "group_id=1,type=bogus,bucket=output:1"),
        "invalid group type bogus"
    );
    assert_eq!(
        e(Add, "type=all,bucket=output:1"),
        "must specify a group_id"
    );
    assert_eq!(e(Add, "group_id=1"), "must specify a type");
    assert_eq!(
        e(
            Add,
            "group_id=1,type=indirect,bucket=output:1,bucket=output:2"
        ),
        "Indirect groups can have at most one bucket."
    );
    assert_eq!(
        e(Add, "group_id=1,type=fast_failover,bucket=output:1"),
        "fast failover bucket requires watch_port or watch_group"
    );
    assert_eq!(
        e(Add, "group_id=1,type=all,bucket=weight:5,output:1"),
        "Only select groups can have bucket weights."
    );
    assert_eq!(e(Add, "group_id=1,foo=2"), "unknown keyword foo");
    assert_eq!(
        e(InsertBucket, "group_id=1,bucket=output:1"),
        "must specify a command bucket id"
    );
    assert_eq!(
        e(
            InsertBucket,
            "group_id=1,command_bucket_id=all,bucket=output:1"
        ),
        "command_bucket_id=all is not permitted"
    );
    assert_eq!(
        e(Delete, "group_id=1,bucket=output:1"),
        "bucket is not needed"
    );
    assert_eq!(
        e(Add, "group_id=1,type=select,fields(ip_src),bucket=output:1"),
        "fields may only be specified with \"selection_method=hash\""
    );
    assert_eq!(
        e(
            Add,
            "group_id=1,type=select,selection_method_param=1,bucket=output:1"
        ),
        "selection_method_param is only allowed with \"selection_method\""
    );
}

/// A select group's buckets get the hash values by weight (Webster's method), at least 16.
#[test]
fn dp_hash_table_spreads_by_weight() {
    let b = |w| Bucket {
        weight: w,
        ..Bucket::new(GroupType::Select, Vec::new())
    };
    let (mask, map) = dp_hash_map(&[b(10), b(20)], 0).unwrap();
    assert_eq!(mask, 15);
    let n0 = map.iter().filter(|&&i| i == 0).count();
    assert_eq!((n0, 16 - n0), (5, 11));
    let (mask, map) = dp_hash_map(&[b(1), b(1), b(1)], 0).unwrap();
    assert_eq!(mask, 15);
    assert_eq!(&map[..6], &[0, 1, 2, 0, 1, 2]);
    // Too uneven for 256 values: the default method hashes in the slow path.
    assert_eq!(dp_hash_map(&[b(1), b(300)], 256), None);
    assert_eq!(dp_hash_map(&[b(0)], 0), None);
    assert_eq!(
        selection(&[b(1), b(300)], &GroupProps::default()),
        Selection::Default
    );
}

#[test]
fn flows_using_groups_are_found() {
    let acts = vec![OfAction::Clone(vec![OfAction::Group(4)])];
    let mut t = GroupTable::default();
    assert_eq!(missing_group(&t, &acts), Some(4));
    apply(
        &mut t,
        GroupCommand::Add,
        "group_id=4,type=all,bucket=output:1",
    )
    .unwrap();
    assert_eq!(missing_group(&t, &acts), None);
    assert!(uses_group(&acts, 4));
    assert!(!uses_group(&acts, 5));
}

/// Bucket actions are checked against no match, as OVS checks them: a write of an IP field
/// needs no `ip` in a bucket.
#[test]
fn bucket_actions_need_no_match() {
    let gm = parse(
        GroupCommand::Add,
        "group_id=1,type=all,bucket=set_field:192.168.3.90->ip_src,output:2,\
         bucket=mod_tp_dst:80,set_field:::1->ipv6_dst,output:3",
    );
    assert_eq!(gm.buckets.len(), 2);
    let e = parse_group_mod(
        "group_id=1,type=all,bucket=set_field:10.0.0.1->ip_src,set_field:::1->ipv6_dst,output:2",
        Some(GroupCommand::Add),
        &NoPortNames,
    );
    assert_eq!(e.unwrap_err(), "prerequisite ip missing for ip_src");
}

#[test]
fn groups_are_counted_by_type() {
    use GroupCommand::*;
    let mut t = GroupTable::default();
    apply(&mut t, Add, "group_id=1,type=all,bucket=output:1").unwrap();
    apply(&mut t, Add, "group_id=2,type=all,bucket=output:1").unwrap();
    apply(&mut t, Modify, "group_id=2,type=select,bucket=output:1").unwrap();
    assert_eq!(t.n_by_type, [1, 1, 0, 0]);
    apply(&mut t, Delete, "group_id=1").unwrap();
    assert_eq!(t.n_by_type, [0, 1, 0, 0]);
    apply(&mut t, Delete, "").unwrap();
    assert_eq!(t.n_by_type, [0; 4]);
}

#[test]
fn a_group_in_an_action_set_is_used() {
    // `write_actions(group:1234)` refers to the group as `group:1234` does: OVS counts the
    // rule in the group's ref_count and refuses it when the group is missing.
    let actions = [OfAction::WriteActions(vec![OfAction::Group(1234)])];
    assert!(uses_group(&actions, 1234));
    assert_eq!(missing_group(&GroupTable::default(), &actions), Some(1234));
}
