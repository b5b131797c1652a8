//! Control commands of the group table, as `ovs-ofctl` names them (`flowpath ofctl add-group
//! br0 ...` sends `ofctl/add-group`): `add-group`, `add-groups`, `mod-group`, `del-groups`,
//! `insert-buckets`, `remove-buckets`, `dump-groups`, `dump-group-stats` and
//! `dump-group-features`. They go through
//! the same [`Ofproto`] functions as the OpenFlow server's group mods, with `ovs-ofctl`'s text
//! syntax (ovs-ofctl(8) "Group Syntax") and its messages for what it refuses.

use std::sync::Arc;

use ofproto::group::{GroupCommand, OFPG_ALL};
use ofproto::ofproto::Ofproto;
use unixctl::Registry;

/// A group id argument of `dump-groups`/`dump-group-stats` (`group_id=N` or `N`, `all`).
fn group_arg(a: Option<&String>) -> Result<u32, String> {
    let Some(s) = a else {
        return Ok(OFPG_ALL);
    };
    let v = s.strip_prefix("group_id=").unwrap_or(s);
    if v.eq_ignore_ascii_case("all") {
        return Ok(OFPG_ALL);
    }
    v.parse::<u32>()
        .map_err(|_| format!("invalid group id {v}"))
}

/// What `ovs-ofctl dump-group-features` prints for OVS 3.1's bridges in OpenFlow 1.0, after
/// its header line: the four types, 0xffffff00 groups of each, every OpenFlow 1.0 action.
fn group_features_text() -> String {
    let mut s = String::from(" Group table:\n    Types:  0xf\n    Capabilities:  0x7\n");
    for t in ["all", "select", "indirect", "fast failover"] {
        s.push_str(&format!(
            "    {t} group:\n       max_groups=0xffffff00\n       actions: output enqueue \
             set_vlan_vid set_vlan_pcp strip_vlan mod_dl_src mod_dl_dst mod_nw_src mod_nw_dst \
             mod_nw_tos mod_tp_src mod_tp_dst\n"
        ));
    }
    s
}

/// Registers the group commands.
pub fn register(reg: &Registry, of: &Arc<Ofproto>) {
    let r = |name: &str,
             usage: &str,
             min: usize,
             max: usize,
             f: fn(&Ofproto, &[String]) -> Result<String, String>| {
        let of = of.clone();
        let _ = reg.register(name, usage, min, max, move |a| f(&of, a));
    };
    let mods: [(&str, GroupCommand); 3] = [
        ("ofctl/add-group", GroupCommand::Add),
        ("ofctl/insert-buckets", GroupCommand::InsertBucket),
        ("ofctl/remove-buckets", GroupCommand::RemoveBucket),
    ];
    for (name, cmd) in mods {
        let of = of.clone();
        let _ = reg.register(name, "BRIDGE GROUP", 2, 2, move |a| {
            of.group_text(&a[0], cmd, &a[1]).map(|_| String::new())
        });
    }
    // `--may-create` makes it OVS's add-or-modify.
    r(
        "ofctl/mod-group",
        "[--may-create] BRIDGE GROUP",
        2,
        3,
        |of, a| {
            let (cmd, a) = match a {
                [flag, rest @ ..] if flag == "--may-create" => (GroupCommand::AddOrMod, rest),
                _ => (GroupCommand::Modify, a),
            };
            let [bridge, group] = a else {
                return Err("usage: ofctl/mod-group [--may-create] BRIDGE GROUP".into());
            };
            of.group_text(bridge, cmd, group).map(|_| String::new())
        },
    );
    r("ofctl/add-groups", "BRIDGE GROUPS-TEXT", 2, 2, |of, a| {
        of.add_groups(&a[0], &a[1]).map(|_| String::new())
    });
    // `--strict` means nothing to groups (ovs-ofctl takes it and sends the same).
    r(
        "ofctl/del-groups",
        "[--strict] BRIDGE [GROUP]",
        1,
        3,
        |of, a| {
            let a = match a {
                [flag, rest @ ..] if flag == "--strict" => rest,
                _ => a,
            };
            let Some(bridge) = a.first() else {
                return Err("usage: ofctl/del-groups [--strict] BRIDGE [GROUP]".into());
            };
            let text = a.get(1).map_or("", String::as_str);
            of.group_text(bridge, GroupCommand::Delete, text)
                .map(|_| String::new())
        },
    );
    r("ofctl/dump-groups", "BRIDGE [GROUP]", 1, 2, |of, a| {
        of.dump_groups(&a[0], group_arg(a.get(1))?)
    });
    r("ofctl/dump-group-features", "BRIDGE", 1, 1, |of, a| {
        of.dump_groups(&a[0], OFPG_ALL)?;
        Ok(group_features_text())
    });
    r("ofctl/dump-group-stats", "BRIDGE [GROUP]", 1, 2, |of, a| {
        of.dump_group_stats(&a[0], group_arg(a.get(1))?)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_arguments_are_ids_or_all() {
        assert_eq!(group_arg(None), Ok(OFPG_ALL));
        assert_eq!(group_arg(Some(&"group_id=5".into())), Ok(5));
        assert_eq!(group_arg(Some(&"7".into())), Ok(7));
        assert_eq!(group_arg(Some(&"ALL".into())), Ok(OFPG_ALL));
        assert!(group_arg(Some(&"x".into())).is_err());
    }

    /// As `ovs-ofctl dump-group-features br0` printed it against ovs-vswitchd 3.1.
    #[test]
    fn group_features_are_ovs_s() {
        let want = include_str!("../../../testdata/openflow/scripts/groups-features.ovs");
        let want: String = want
            .lines()
            .skip_while(|l| !l.starts_with("NXST_GROUP_FEATURES reply"))
            .skip(1)
            .take_while(|l| !l.starts_with("=="))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(group_features_text(), want);
    }

    #[test]
    fn groups_through_the_text_commands() {
        let of = Ofproto::new();
        of.add_bridge("br0").unwrap();
        of.group_text(
            "br0",
            GroupCommand::Add,
            "group_id=1,type=select,bucket=weight:5,output:1,bucket=output:2",
        )
        .unwrap();
        assert_eq!(
            of.group_text(
                "br0",
                GroupCommand::Add,
                "group_id=1,type=all,bucket=output:1"
            ),
            Err("OFPGMFC_GROUP_EXISTS".into())
        );
        of.add_groups(
            "br0",
            "group_id=2,type=all,bucket=output:3\n# a comment\nmodify group_id=1,type=indirect,bucket=output:2\n",
        )
        .unwrap();
        of.group_text(
            "br0",
            GroupCommand::AddOrMod,
            "group_id=3,type=all,bucket=output:1",
        )
        .unwrap();
        of.group_text("br0", GroupCommand::Delete, "group_id=3")
            .unwrap();
        assert_eq!(
            of.dump_groups("br0", OFPG_ALL).unwrap(),
            " group_id=1,type=indirect,bucket=bucket_id:0,actions=output:2\n \
             group_id=2,type=all,bucket=bucket_id:0,actions=output:3\n"
        );
        of.add_flow("br0", "actions=group:2").unwrap();
        assert!(
            of.add_flow("br0", "priority=5,actions=group:9")
                .unwrap_err()
                .starts_with("OFPBAC_BAD_OUT_GROUP")
        );
        let stats = of.dump_group_stats("br0", 2).unwrap();
        assert!(stats.contains("ref_count=1,packet_count=0"), "{stats}");
        // Deleting the group deletes the flow that uses it.
        of.group_text("br0", GroupCommand::Delete, "group_id=2")
            .unwrap();
        assert_eq!(of.flow_entries("br0", None).unwrap().len(), 0);
        of.group_text("br0", GroupCommand::Delete, "").unwrap();
        assert_eq!(of.dump_groups("br0", OFPG_ALL).unwrap(), "");
    }
}
