//! The bond commands, as OVS's `ofproto/bond.c` registers them: `bond/list`, `bond/show
//! [PORT]`, `bond/migrate PORT HASH MEMBER`, `bond/set-active-member`, `bond/enable-member`, `bond/disable-member` (and their
//! older `*-slave` names) and `bond/hash MAC [VLAN] [BASIS]`.

use std::sync::Arc;
use std::time::Instant;

use ofproto::bond_show;
use ofproto::ofproto::Ofproto;
use unixctl::Registry;

/// Registers the bond commands.
pub fn register(reg: &Registry, of: &Arc<Ofproto>) {
    let of2 = of.clone();
    let _ = reg.register("bond/list", "", 0, 0, move |_| {
        Ok(bond_show::list(&of2.bonds()))
    });
    let of2 = of.clone();
    let _ = reg.register("bond/show", "[port]", 0, 1, move |args| {
        let now = Instant::now();
        let bonds = of2.bonds();
        match args.first() {
            Some(name) => bonds
                .iter()
                .find(|b| &b.config.name == name)
                .map(|b| bond_show::details(b, now))
                .ok_or_else(|| "no such bond".to_owned()),
            None => Ok(bonds.iter().map(|b| bond_show::details(b, now)).collect()),
        }
    });
    for name in ["bond/set-active-member", "bond/set-active-slave"] {
        let of2 = of.clone();
        let usage = if name.ends_with("member") {
            "port member"
        } else {
            ""
        };
        let _ = reg.register(name, usage, 2, 2, move |args| {
            of2.with_bond(&args[0], |b| b.set_active(&args[1]))
        });
    }
    for (name, enable) in [
        ("bond/enable-member", true),
        ("bond/disable-member", false),
        ("bond/enable-slave", true),
        ("bond/disable-slave", false),
    ] {
        let of2 = of.clone();
        let usage = if name.ends_with("member") {
            "port member"
        } else {
            ""
        };
        let _ = reg.register(name, usage, 2, 2, move |args| {
            of2.with_bond(&args[0], |b| {
                let i = b.member_index(&args[1]).ok_or("no such member")?;
                b.enable_member(i, enable);
                b.choose_active_if_needed();
                Ok(if enable { "enabled" } else { "disabled" }.to_owned())
            })
        });
    }
    let of2 = of.clone();
    let _ = reg.register("bond/migrate", "port hash member", 3, 3, move |args| {
        of2.with_bond(&args[0], |b| b.migrate(&args[1], &args[2]))
    });
    let _ = reg.register("bond/hash", "mac [vlan] [basis]", 1, 3, hash);
}

/// `bond/hash MAC [VLAN] [BASIS]`: the bucket of a source address.
fn hash(args: &[String]) -> Result<String, String> {
    let vlan = match args.get(1) {
        Some(v) => v.parse::<u32>().map_err(|_| "invalid vlan")?,
        None => 0,
    };
    let basis = match args.get(2) {
        Some(v) => v.parse::<u32>().map_err(|_| "invalid basis")?,
        None => 0,
    };
    let mac = ofproto::tunnel::parse_mac(&args[0]).map_err(|_| "invalid mac")?;
    let h = ofproto::bond::hash_mac(mac, vlan as u16, basis) as usize % ofproto::bond::BUCKETS;
    Ok(h.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_answer_as_ovs_s() {
        let reg = Registry::new("test");
        let of = Ofproto::new();
        register(&reg, &of);
        let run = |args: &[&str]| reg.dispatch::<&str>(args[0], &args[1..]);
        assert_eq!(
            run(&["bond/list"]),
            Ok("bond\ttype\trecircID\tmembers\n".into())
        );
        assert_eq!(run(&["bond/show"]), Ok(String::new()));
        assert_eq!(run(&["bond/show", "b"]), Err("no such bond\n".into()));
        assert_eq!(
            run(&["bond/set-active-slave", "b", "p"]),
            Err("no such bond\n".into())
        );
        assert_eq!(run(&["bond/hash", "50:54:00:00:00:01"]), Ok("144\n".into()));
        assert_eq!(
            run(&["bond/hash", "50:54:00:00:00:01", "10", "7"]),
            Ok("70\n".into())
        );
        assert_eq!(run(&["bond/hash", "nonsense"]), Err("invalid mac\n".into()));
    }
}
