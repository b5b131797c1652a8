//! `netdev-dummy/receive`: injects packets into a `dummy` port of the running switch, as OVS's
//! command of that name does for its test suite. A packet is given in hex, or as a datapath
//! flow (`in_port(1),eth(...),eth_type(0x0800),ipv4(...),udp(...)`) from which the packet is
//! composed as OVS composes it (64 bytes of payload where the protocol carries one, or
//! padded to `--len N` bytes). `netdev-dummy/set-admin-state` brings a dummy port (or every
//! one) administratively up or down, which its OpenFlow port shows as `PORT_DOWN` and
//! `LINK_DOWN` and which makes it dead for fast-failover groups and `bundle`, as OVS's.

use std::sync::Arc;

use ofproto::ofproto::Ofproto;
use unixctl::Registry;

/// The smallest `--len` OVS takes (an Ethernet frame without its FCS).
const ETH_TOTAL_MIN: usize = 60;

/// Registers `netdev-dummy/receive` and `netdev-dummy/set-admin-state`.
pub fn register(reg: &Registry, of: &Arc<Ofproto>) {
    let of = of.clone();
    let _ = reg.register(
        "netdev-dummy/set-admin-state",
        "[netdev] up|down",
        1,
        2,
        move |a| set_admin_state(&of, a).map(|()| "OK".to_owned()),
    );
    let _ = reg.register(
        "netdev-dummy/receive",
        "name [--qid queue_id] packet|flow [--len packet_len]",
        2,
        usize::MAX,
        |a| receive(a).map(|()| String::new()),
    );
}

/// `netdev-dummy/set-admin-state [NETDEV] up|down` (OVS's messages for a bad state or port).
fn set_admin_state(of: &Ofproto, args: &[String]) -> Result<(), String> {
    let state = args.last().map(|s| s.to_ascii_lowercase());
    let up = match state.as_deref() {
        Some("up") => true,
        Some("down") => false,
        _ => return Err("Invalid Admin State".into()),
    };
    let names = match args {
        [name, _] => {
            netdev::dummy::injector(name).ok_or("Unknown Dummy Interface")?;
            vec![name.clone()]
        }
        _ => netdev::dummy::names(),
    };
    for n in names {
        // A dummy port no bridge has (yet) has no OpenFlow state to change.
        let _ = of.set_admin_state(&n, up);
    }
    Ok(())
}

fn receive(args: &[String]) -> Result<(), String> {
    let injector = netdev::dummy::injector(&args[0]).ok_or("no such dummy netdev")?;
    let mut rest = &args[1..];
    if let [q, id, more @ ..] = rest
        && q == "--qid"
    {
        // A dummy port has one rx queue.
        if id.parse::<u32>() != Ok(0) {
            return Err("bad rx queue id.".into());
        }
        rest = more;
    }
    let mut frames = Vec::with_capacity(rest.len());
    while let [arg, more @ ..] = rest {
        rest = more;
        if let Ok(bytes) = flow::hex::eth_from_hex(arg) {
            frames.push(bytes);
            continue;
        }
        let mut len = None;
        if let [l, n, more @ ..] = rest
            && l == "--len"
        {
            let n: usize = n.parse().unwrap_or(0);
            if n < ETH_TOTAL_MIN {
                return Err("too small packet len".into());
            }
            len = Some(n);
            rest = more;
        }
        let mut names = flow::odp::PortNames::new();
        let key = flow::odp::parse_key(arg, &mut names)
            .map_err(|e| format!("{arg}: {e}"))?
            .packet_key();
        let frame = match len {
            Some(n) => flow::compose_sized(&key, n)
                .ok_or_else(|| format!("{arg}: the headers alone are longer than {n} bytes"))?,
            None => flow::compose(&key, 64),
        };
        frames.push(frame);
    }
    injector.inject(frames)?;
    // As OVS's for a port its main thread polls: the reply comes once the packets are handled.
    injector.settle(std::time::Duration::from_secs(2));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_in_hex_or_as_flows_reach_the_port_and_bad_input_is_refused() {
        let port = netdev::dummy::DummyPort::new("dummy-cmd-p1");
        let inj = netdev::dummy::injector("dummy-cmd-p1").unwrap();
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let flow = "in_port(1),eth(src=50:54:00:00:00:01,dst=50:54:00:00:00:02),\
                    eth_type(0x0800),ipv4(src=10.0.0.1,dst=10.0.0.2,proto=17,tos=0,ttl=64,\
                    frag=no),udp(src=1,dst=2)";
        let hex = "5054000000025054000000010800";
        receive(&a(&["dummy-cmd-p1", flow, hex, flow, "--len", "128"])).unwrap();
        assert_eq!(inj.pending(), 3);
        // Hex with blanks and line breaks between byte pairs, as OVS's tests write packets.
        receive(&a(&["dummy-cmd-p1", "505400000002 50540000\n0001 08 00"])).unwrap();
        assert_eq!(inj.pending(), 4);
        let e = |v: &[&str]| receive(&a(v)).unwrap_err();
        assert_eq!(e(&["nope", hex]), "no such dummy netdev");
        assert_eq!(e(&["dummy-cmd-p1", "--qid", "3", hex]), "bad rx queue id.");
        assert_eq!(
            e(&["dummy-cmd-p1", flow, "--len", "20"]),
            "too small packet len"
        );
        assert!(e(&["dummy-cmd-p1", "in_port(1),eth("]).starts_with("in_port(1),eth(: "));
        // Nothing of a refused command is queued.
        assert_eq!(inj.pending(), 4);
        drop(port);
    }

    #[test]
    fn set_admin_state_brings_a_dummy_port_down_and_up_with_ovs_errors() {
        let _port = netdev::dummy::DummyPort::new("dummy-cmd-adm");
        let of = Ofproto::new();
        of.add_bridge("br0").unwrap();
        let p = ofproto::bridge::OfPort {
            name: "dummy-cmd-adm".into(),
            ofport: 1,
            dp_port: Some(1),
            peer: None,
            vlan: Default::default(),
        };
        of.add_port("br0", p).unwrap();
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let live = || of.pipe.read().unwrap().bridge("br0").unwrap().port_live(1);
        set_admin_state(&of, &a(&["dummy-cmd-adm", "DOWN"])).unwrap();
        assert!(!live());
        set_admin_state(&of, &a(&["up"])).unwrap();
        assert!(live());
        assert_eq!(
            set_admin_state(&of, &a(&["dummy-cmd-adm", "sideways"])),
            Err("Invalid Admin State".into())
        );
        assert_eq!(
            set_admin_state(&of, &a(&["nope", "down"])),
            Err("Unknown Dummy Interface".into())
        );
    }
}
