//! The text of `lacp/show` and `lacp/show-stats`, as OVS 3.1's `lib/lacp.c` prints them.

use std::fmt::Write;

use super::Lacp;
use super::pdu::Info;

/// The member indexes of `l` in name order.
fn by_name(l: &Lacp) -> Vec<usize> {
    let mut order: Vec<usize> = (0..l.members.len()).collect();
    order.sort_by(|&a, &b| l.members[a].name.cmp(&l.members[b].name));
    order
}

fn info(s: &mut String, who: &str, i: &Info) {
    let _ = writeln!(s, "  {who} sys_id: {}", i.sys_id);
    let _ = writeln!(s, "  {who} sys_priority: {}", i.sys_priority);
    let _ = writeln!(s, "  {who} port_id: {}", i.port_id);
    let _ = writeln!(s, "  {who} port_priority: {}", i.port_priority);
    let _ = writeln!(s, "  {who} key: {}", i.key);
    let _ = writeln!(s, "  {who} state:{}", Info::state_words(i.state));
}

/// `lacp/show` of one bond (OVS's `lacp_print_details()`).
pub fn details(l: &Lacp) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "---- {} ----", l.name);
    let _ = writeln!(
        s,
        "  status: {}{}",
        if l.settings.active {
            "active"
        } else {
            "passive"
        },
        if l.negotiated { " negotiated" } else { "" }
    );
    let _ = writeln!(s, "  sys_id: {}", l.settings.sys_id);
    let _ = writeln!(s, "  sys_priority: {}", l.settings.sys_priority);
    let key = l.key().map_or("none".to_owned(), |k| k.to_string());
    let _ = writeln!(s, "  aggregation key: {key}");
    let _ = writeln!(
        s,
        "  lacp_time: {}",
        if l.settings.fast { "fast" } else { "slow" }
    );
    for i in by_name(l) {
        let m = &l.members[i];
        let _ = writeln!(
            s,
            "\nmember: {}: {} {}",
            m.name,
            m.status.name(),
            if m.attached { "attached" } else { "detached" }
        );
        let _ = writeln!(s, "  port_id: {}", m.settings.port_id);
        let _ = writeln!(s, "  port_priority: {}", m.settings.port_priority);
        let _ = writeln!(s, "  may_enable: {}\n", l.may_enable_now(i));
        info(&mut s, "actor", &l.actor(i));
        s.push('\n');
        info(&mut s, "partner", &m.partner);
    }
    s
}

/// `lacp/show-stats` of one bond (OVS's `lacp_print_stats()`).
pub fn stats(l: &Lacp) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "---- {} statistics ----", l.name);
    for i in by_name(l) {
        let m = &l.members[i];
        let c = &m.stats;
        let _ = writeln!(s, "\nmember: {}:", m.name);
        let _ = writeln!(s, "  TX PDUs: {}", c.tx);
        let _ = writeln!(s, "  RX PDUs: {}", c.rx);
        let _ = writeln!(s, "  RX Bad PDUs: {}", c.rx_bad);
        let _ = writeln!(s, "  RX Marker Request PDUs: {}", c.rx_marker);
        let _ = writeln!(s, "  Link Expired: {}", c.link_expired);
        let _ = writeln!(s, "  Link Defaulted: {}", c.link_defaulted);
        let _ = writeln!(s, "  Carrier Status Changed: {}", c.carrier_changed);
    }
    s
}
