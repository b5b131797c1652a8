//! `Datapath.capabilities`: what the datapath can do, under the keys OVS 3.1's userspace
//! datapath writes (`get_datapath_cap()` in `ofproto/ofproto-dpif.c`), each value saying what
//! flowpath's datapath does. `ovn-controller` reads them to choose its flows (`ct_zero_snat`,
//! `ct_flush`, `max_hash_alg`...), so a capability flowpath lacks is written `false`, not left
//! out.

use std::collections::BTreeMap;

/// The capabilities, as the column holds them.
pub(crate) fn capabilities() -> BTreeMap<String, String> {
    const CAPS: &[(&str, &str)] = &[
        // Two VLAN headers and three MPLS label stack entries in the flow key.
        ("max_vlan_headers", "2"),
        ("max_mpls_depth", "3"),
        ("recirc", "true"),
        ("ct_state", "true"),
        ("ct_zone", "true"),
        ("ct_mark", "true"),
        ("ct_label", "true"),
        ("ct_state_nat", "true"),
        ("ct_orig_tuple", "true"),
        ("ct_orig_tuple6", "true"),
        ("nd_ext", "true"),
        ("masked_set_action", "true"),
        ("tnl_push_pop", "true"),
        ("ufid", "true"),
        ("trunc", "true"),
        ("clone", "true"),
        // Nested sample()/clone() (to a depth of 10, as OVS's userspace datapath); OVS writes
        // whether the probe passed, not the depth.
        ("sample_nesting", "true"),
        // A commit may carry an event mask, and it changes nothing: as in OVS's userspace
        // datapath, which probes true for it, no one listens for connection events.
        ("ct_eventmask", "true"),
        ("ct_clear", "true"),
        // hash(l4) and its symmetric form.
        ("max_hash_alg", "1"),
        ("check_pkt_len", "true"),
        // Zone timeout policies (CT_Timeout_Policy).
        ("ct_timeout", "true"),
        ("explicit_drop_action", "true"),
        // `ct(commit,nat(src))` with no address keeps the connection's address and port,
        // moving the port only when the tuple is taken (all-zero SNAT, as OVS's).
        ("ct_zero_snat", "true"),
        // NXT_CT_FLUSH with a tuple match (and NXT_CT_FLUSH_ZONE).
        ("ct_flush", "true"),
        // Balance-tcp bonds' `lb_output(ID)` (datapath::bond).
        ("lb_output_action", "true"),
        // `add_mpls`, what `encap(mpls)` translates to (rewrite::add_mpls).
        ("add_mpls", "true"),
    ];
    CAPS.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The lines `ovs-vswitchd` logs (module `ofproto_dpif`, `check_support()`) when it opens a
/// datapath, in its order and words, saying what `caps` says: "Datapath supports ct_clear
/// action", "VLAN header stack length probed as 2"... Tools and tests grep the log for them
/// (OVN's system tests skip what needs `ct_zero_snat` without its line).
pub(crate) fn support_lines(dpif: &str, caps: &BTreeMap<String, String>) -> Vec<String> {
    const ORDER: &[(&str, &str)] = &[
        ("recirc", "recirculation"),
        ("max_vlan_headers", "VLAN header stack length probed as"),
        ("max_mpls_depth", "MPLS label stack length probed as"),
        ("trunc", "truncate action"),
        ("ufid", "unique flow ids"),
        ("clone", "clone action"),
        ("sample_nesting", "Max sample nesting level probed as"),
        ("ct_eventmask", "eventmask in conntrack action"),
        ("ct_clear", "ct_clear action"),
        ("max_hash_alg", "Max dp_hash algorithm probed to be"),
        ("check_pkt_len", "check_pkt_len action"),
        ("ct_timeout", "timeout policy in conntrack action"),
        ("ct_zero_snat", "ct_zero_snat"),
        ("add_mpls", "add_mpls action"),
        ("ct_state", "ct_state"),
        ("ct_zone", "ct_zone"),
        ("ct_mark", "ct_mark"),
        ("ct_label", "ct_label"),
        ("ct_state_nat", "ct_state_nat"),
        ("ct_orig_tuple", "ct_orig_tuple"),
        ("ct_orig_tuple6", "ct_orig_tuple6"),
        ("nd_ext", "IPv6 ND Extensions"),
    ];
    let mut out = Vec::new();
    for (key, words) in ORDER {
        let Some(v) = caps.get(*key) else { continue };
        let line = match (*key, v.as_str()) {
            // OVS writes whether nesting works; it logs the depth it probed (10 here).
            ("sample_nesting", _) => format!("{words} 10"),
            ("max_vlan_headers" | "max_mpls_depth" | "max_hash_alg", n) => format!("{words} {n}"),
            (_, "true") => format!("Datapath supports {words}"),
            _ => format!("Datapath does not support {words}"),
        };
        out.push(format!("{dpif}: {line}"));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_key_of_ovs_3_1s_netdev_datapath_is_there() {
        let caps = super::capabilities();
        let ovs = "max_vlan_headers max_mpls_depth recirc ct_state ct_zone ct_mark ct_label \
                   ct_state_nat ct_orig_tuple ct_orig_tuple6 nd_ext masked_set_action \
                   tnl_push_pop ufid trunc clone sample_nesting ct_eventmask ct_clear \
                   max_hash_alg check_pkt_len ct_timeout explicit_drop_action lb_output_action \
                   ct_zero_snat add_mpls ct_flush";
        for k in ovs.split_whitespace() {
            assert!(caps.contains_key(k), "{k}");
        }
        assert_eq!(caps.len(), ovs.split_whitespace().count());
        // Booleans are written as OVS writes them (`get_datapath_cap()`), numbers only where
        // OVS writes a number.
        for (k, v) in &caps {
            let numeric = matches!(
                k.as_str(),
                "max_vlan_headers" | "max_mpls_depth" | "max_hash_alg"
            );
            assert_eq!(numeric, v.parse::<u32>().is_ok(), "{k}={v}");
        }
    }

    #[test]
    fn the_support_lines_say_what_the_capabilities_say_in_ovs_words() {
        let lines = super::support_lines("netdev@flowpath", &super::capabilities());
        assert_eq!(lines[0], "netdev@flowpath: Datapath supports recirculation");
        assert_eq!(
            lines[1],
            "netdev@flowpath: VLAN header stack length probed as 2"
        );
        for want in [
            "netdev@flowpath: Datapath supports ct_zero_snat",
            "netdev@flowpath: Datapath supports ct_clear action",
            "netdev@flowpath: Max sample nesting level probed as 10",
            "netdev@flowpath: Datapath supports eventmask in conntrack action",
            "netdev@flowpath: Datapath supports add_mpls action",
            "netdev@flowpath: Datapath supports IPv6 ND Extensions",
        ] {
            assert!(lines.iter().any(|l| l == want), "{want}: {lines:#?}");
        }
    }
}
