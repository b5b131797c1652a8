//! `ofproto/trace-packet-out`: the trace of a packet-out, as OVS's
//! `ofproto_unixctl_trace_actions()` prints it. The arguments are `ofproto/trace`'s, then the
//! packet-out's actions (`ovs-ofctl` syntax); the actions run in place of the first table's
//! lookup, from no rule, and the trace reads as `ofproto/trace`'s. `-consistent` (OVS checks
//! the actions against the flow as an OpenFlow connection's would be) is accepted; the actions
//! are checked as the text parser and the bridge's groups check them.

use super::{Names, Ofproto};
use crate::syntax::{FlowKind, NoPortNames, parse_flow};

impl Ofproto {
    /// `ofproto/trace-packet-out [-consistent] {[DPNAME] ODP_FLOW | BRIDGE BR_FLOW}
    /// [OPTIONS...] [PACKET] ACTIONS`.
    pub fn trace_packet_out(&self, args: &[String]) -> Result<String, String> {
        let args: Vec<&String> = args.iter().filter(|a| *a != "-consistent").collect();
        let [first, rest @ .., actions] = args.as_slice() else {
            return Err("ofproto/trace-packet-out needs a flow and actions".into());
        };
        let text = format!("actions={actions}");
        let spec = {
            let p = self.read();
            match p.bridge(first) {
                Some(b) => parse_flow(&text, FlowKind::Add, &Names(b)),
                None => parse_flow(&text, FlowKind::Add, &NoPortNames),
            }
            .map_err(|e| e.to_string())?
        };
        let rest: Vec<String> = rest.iter().map(|s| s.to_string()).collect();
        self.trace_with(first, &rest, false, Some(&spec.actions))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn switch() -> std::sync::Arc<Ofproto> {
        let of = Ofproto::new();
        of.add_bridge("br0").unwrap();
        for (name, port) in [("p1", 1), ("p2", 2)] {
            let port = crate::bridge::OfPort {
                name: name.into(),
                ofport: port,
                dp_port: Some(port),
                peer: None,
                vlan: Default::default(),
            };
            of.add_port("br0", port).unwrap();
        }
        of.add_flow("br0", "in_port=1,actions=output:2").unwrap();
        of
    }

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_packet_out_s_actions_are_traced_in_place_of_the_first_lookup() {
        let of = switch();
        let t = of
            .trace_packet_out(&args(&[
                "br0",
                "in_port=1",
                "mod_vlan_vid:123,resubmit(,0)",
            ]))
            .unwrap();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[4..8],
            [
                "    mod_vlan_vid:123",
                "    resubmit(,0)",
                " 0. in_port=1, priority 32768",
                "    output:2"
            ],
            "{t}"
        );
        assert!(
            t.ends_with("Datapath actions: push_vlan(vid=123,pcp=0),2\n"),
            "{t}"
        );
    }

    #[test]
    fn a_packet_out_to_a_missing_group_is_refused() {
        let of = switch();
        let e = of
            .trace_packet_out(&args(&["-consistent", "br0", "in_port=1", "group:5"]))
            .unwrap_err();
        assert_eq!(e, "Bad actions: OFPBAC_BAD_OUT_GROUP");
        assert!(of.trace_packet_out(&args(&["br0"])).is_err());
    }
}
