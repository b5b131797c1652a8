//! The text of `bond/show` and `bond/list`, as OVS 3.1's `ofproto/bond.c` prints them.

use std::fmt::Write;
use std::time::Instant;

use crate::bond::Bond;

/// `bond/list`: a header, then one line per bond with its mode, recirculation id (0 for
/// none) and members. OVS lists bonds and members in the order of its hash tables, the
/// members' keyed by memory addresses (so not the same from one run to the next); here they
/// are in configuration order.
pub fn list(bonds: &[Bond]) -> String {
    let mut s = String::from("bond\ttype\trecircID\tmembers\n");
    for b in bonds {
        let members: Vec<&str> = b.members.iter().map(|m| m.name.as_str()).collect();
        let _ = writeln!(
            s,
            "{}\t{}\t{}\t{}",
            b.config.name,
            b.config.mode.name(),
            b.recirc_id,
            members.join(", ")
        );
    }
    s
}

fn ms_until(t: Instant, now: Instant) -> i128 {
    if t >= now {
        (t - now).as_millis() as i128
    } else {
        -((now - t).as_millis() as i128)
    }
}

/// `bond/show` of one bond (OVS's `bond_print_details()`).
pub fn details(b: &Bond, now: Instant) -> String {
    let c = &b.config;
    let mut s = String::new();
    let _ = writeln!(s, "---- {} ----", c.name);
    let _ = writeln!(s, "bond_mode: {}", c.mode.name());
    if b.may_recirc() {
        let _ = writeln!(
            s,
            "bond may use recirculation: yes, Recirc-ID : {}",
            b.recirc_id
        );
    } else {
        s.push_str("bond may use recirculation: no, Recirc-ID : -1\n");
    }
    let _ = writeln!(s, "bond-hash-basis: {}", c.basis);
    if b.use_lb_output() {
        let _ = writeln!(s, "lb_output action: enabled, bond-id: {}", b.recirc_id);
    } else {
        s.push_str("lb_output action: disabled, bond-id: -1\n");
    }
    if c.mode == crate::bond::BondMode::BalanceSlb {
        let _ = writeln!(s, "all members active: {}", c.all_members_active);
    }
    let _ = writeln!(s, "updelay: {} ms", c.updelay);
    let _ = writeln!(s, "downdelay: {} ms", c.downdelay);
    if b.is_balanced() {
        let _ = writeln!(s, "next rebalance: {} ms", ms_until(b.next_rebalance, now));
    }
    let _ = writeln!(s, "lacp_status: {}", b.lacp_status().name());
    let _ = writeln!(s, "lacp_fallback_ab: {}", c.lacp_fallback_ab);
    let primary = c.primary.as_deref();
    let found = primary.is_some_and(|p| b.member_index(p).is_some());
    let _ = writeln!(
        s,
        "active-backup primary: {}{}",
        primary.unwrap_or("<none>"),
        if primary.is_some() && !found {
            " (no such member)"
        } else {
            ""
        }
    );
    let holder = b.members.iter().find(|m| m.mac == b.active_mac);
    let _ = writeln!(
        s,
        "active member mac: {}({})",
        b.active_mac,
        holder.map_or("none", |m| m.name.as_str())
    );
    let mut order: Vec<usize> = (0..b.members.len()).collect();
    order.sort_by(|&x, &y| b.members[x].name.cmp(&b.members[y].name));
    for i in order {
        let m = &b.members[i];
        let state = if m.enabled { "enabled" } else { "disabled" };
        let _ = writeln!(s, "\nmember {}: {state}", m.name);
        if b.active == Some(i) {
            s.push_str("  active member\n");
        }
        if let Some(t) = m.delay_expires {
            let which = if m.enabled { "downdelay" } else { "updelay" };
            let _ = writeln!(s, "  {which} expires in {} ms", ms_until(t, now));
        }
        let _ = writeln!(s, "  may_enable: {}", m.may_enable);
        if !b.is_balanced() {
            continue;
        }
        // Each of its buckets with a recent load of at least 1 kB.
        for (h, _) in (b.buckets.iter().enumerate()).filter(|(_, x)| **x == Some(i)) {
            let kb = b.load[h] / 1024;
            if kb != 0 {
                let _ = writeln!(s, "  hash {h}: {kb} kB load");
            }
        }
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bond::{BondConfig, BondMode};
    use flow::EthAddr;

    #[test]
    fn show_and_list_read_as_ovs_s() {
        let mac = |n| EthAddr([0xaa, 0x55, 0xaa, 0x55, 0, n]);
        let mut c = BondConfig::new(
            "bond0",
            BondMode::ActiveBackup,
            &[("p1", mac(0x1e)), ("p2", mac(0x1f))],
        );
        c.primary = Some("p1".into());
        let now = Instant::now();
        let b = Bond::new(c, now);
        // OVS 3.1's answer (testdata/ovsdb/scripts/bonds.ovs).
        let want = "---- bond0 ----\nbond_mode: active-backup\n\
            bond may use recirculation: no, Recirc-ID : -1\nbond-hash-basis: 0\n\
            lb_output action: disabled, bond-id: -1\nupdelay: 0 ms\ndowndelay: 0 ms\n\
            lacp_status: off\nlacp_fallback_ab: false\nactive-backup primary: p1\n\
            active member mac: aa:55:aa:55:00:1e(p1)\n\nmember p1: enabled\n  active member\n\
            \x20 may_enable: true\n\nmember p2: enabled\n  may_enable: true\n\n";
        assert_eq!(details(&b, now), want);
        assert_eq!(
            list(std::slice::from_ref(&b)),
            "bond\ttype\trecircID\tmembers\nbond0\tactive-backup\t0\tp1, p2\n"
        );
        // A balanced bond's line has its recirculation id, as OVS's (`bond0\tbalance-tcp\t1\t`
        // after `add-bond ... bond_mode=balance-tcp`, the bridge's first).
        let mut t = b.clone();
        t.config.mode = BondMode::BalanceTcp;
        t.recirc_id = 1;
        assert_eq!(
            list(&[t]),
            "bond\ttype\trecircID\tmembers\nbond0\tbalance-tcp\t1\tp1, p2\n"
        );
    }
}
