use super::*;

#[test]
fn metrics_listen_is_an_address_and_a_bad_one_is_reported_on_its_line() {
    let c =
        parse("[metrics]\nlisten = \"127.0.0.1:9477\"\n").unwrap_or_else(|e| panic!("{}", e[0]));
    assert_eq!(
        c.metrics.listen_addr(),
        Some("127.0.0.1:9477".parse().unwrap())
    );
    assert_eq!(parse("").unwrap().metrics.listen_addr(), None);
    let e = parse("[[bridge]]\nname = \"br0\"\n\n[metrics]\nlisten = \"localhost\"\n").unwrap_err();
    assert_eq!(e.len(), 1);
    assert_eq!(
        e[0].to_string(),
        "line 5: metrics: listen: 'localhost' is not an address to listen on: expected \
         IP:PORT, e.g. 127.0.0.1:9477"
    );
    let e = parse("[metrics]\nport = 1\n").unwrap_err();
    assert!(
        e[0].to_string().contains("unknown field `port`"),
        "{}",
        e[0]
    );
}

#[test]
fn the_example_parses() {
    let c = parse(
        r#"
[datapath]
pmd-cpu-mask = "0x2"
emc-insert-inv-prob = 100
dp-flows = ["in_port(p0),eth_type(0x0800),ipv4(frag=no), actions:p1"]

[[bridge]]
name = "br0"

[[bridge.port]]
name = "p0"
type = "pcap"
ofport = 1
options = { rx_pcap = "in.pcap" }

[[bridge.port]]
name = "p1"
type = "pcap"
ofport = 2
options = { tx_pcap = "out.pcap" }
"#,
    )
    .unwrap();
    assert_eq!(c.bridge[0].port.len(), 2);
    assert_eq!(
        split_dp_flow(&c.datapath.dp_flows[0]),
        Some(("in_port(p0),eth_type(0x0800),ipv4(frag=no)", "p1"))
    );
}

#[test]
fn tunnel_configuration_is_checked() {
    let base = "[[bridge]]\nname = \"br-phy\"\nhwaddr = \"8c:dc:d4:ab:5b:f0\"\nip = [\"10.1.2.8/24\"]\n\
                [[bridge]]\nname = \"br-int\"\n[[bridge.port]]\nname = \"vx\"\ntype = \"vxlan\"\n";
    let ok = parse(&format!(
        "{base}options = {{ remote_ip = \"10.1.2.9\", key = \"flow\", csum = true }}\n\
         [[bridge.port]]\nname = \"gre0\"\ntype = \"gre\"\n\
         options = {{ remote_ip = \"10.1.2.9\", packet_type = \"legacy_l3\" }}\n\
         [[bridge.port]]\nname = \"vx2\"\ntype = \"vxlan\"\n\
         options = {{ remote_ip = \"10.1.2.10\", key = 7 }}\n\
         [tunnel]\nroute = [\"10.9.0.0/16 br-phy 10.1.2.1\"]\nneigh = [\"br-phy 10.1.2.9 02:00:00:00:00:01\"]\n"
    ))
    .unwrap();
    // The two VXLAN tunnels share a datapath port; GRE has its own, after the others.
    let dp: Vec<_> = ok
        .ports()
        .iter()
        .map(|p| (p.port.name.clone(), p.dp_port))
        .collect();
    assert_eq!(
        dp,
        vec![
            ("vx".into(), Some(1)),
            ("gre0".into(), Some(2)),
            ("vx2".into(), Some(1))
        ]
    );
    let err = |text: &str| {
        parse(text)
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    };
    let e = err(&format!("{base}options = {{ key = \"flow\" }}\n"));
    assert!(
        e.contains("line 10: port 'vx'") && e.contains("needs remote_ip"),
        "{e}"
    );
    let e = err(&format!(
        "{base}options = {{ remote_ip = \"10.1.2.9\", dst_port = 0 }}\n"
    ));
    assert!(e.contains("dst_port"), "{e}");
    let e = err(&format!(
        "{base}options = {{ remote_ip = \"x\" }}\n[tunnel]\nneigh = [\"br-x 1.2.3.4 zz\"]\nroute = [\"10.0.0.0/40 br-phy\"]\n"
    ));
    assert!(e.contains("not an IPv4 or IPv6 address"), "{e}");
    assert!(e.contains("no bridge 'br-x'"), "{e}");
    assert!(e.contains("bad prefix length"), "{e}");
    let e = err(
        "[[bridge]]\nname = \"b\"\nip = [\"10.0.0.1\"]\ntlv-map = [\"{class=1,type=2,len=3}->tun_metadata0\"]\n",
    );
    assert!(e.contains("expected ADDR/LEN"), "{e}");
    assert!(e.contains("ip needs hwaddr"), "{e}");
    assert!(e.contains("multiple of 4"), "{e}");
    let e = err("[[bridge]]\nname = \"b\"\n[[bridge.port]]\nname = \"c\"\ntype = \"internal\"\n");
    assert!(e.contains("takes the bridge's name"), "{e}");
}

#[test]
fn ofport_numbers_are_in_range_and_distinct() {
    let port = |name: &str, ofport: &str| {
        format!("[[bridge.port]]\nname = \"{name}\"\ntype = \"dummy\"\n{ofport}")
    };
    let bridge = |ports: &[String]| format!("[[bridge]]\nname = \"b\"\n{}", ports.concat());
    let err = |text: &str| {
        let errs = parse(text).unwrap_err();
        errs.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    };
    let e = err(&bridge(&[port("p", "ofport = 70000\n")]));
    assert!(e.contains("ofport 70000 is not in 1 to 65279"), "{e}");
    let e = err(&bridge(&[port("p", "ofport = 0\n")]));
    assert!(e.contains("ofport 0 is not in 1 to 65279"), "{e}");
    let e = err(&bridge(&[port("p", "ofport = 2\n"), port("q", "")]));
    assert!(
        e.contains("port 'q': OpenFlow port 2 (by its position) is also port 'p''s"),
        "{e}"
    );
    let e = err(&bridge(&[
        port("p", "ofport = 5\n"),
        port("q", "ofport = 5\n"),
    ]));
    assert!(
        e.contains("port 'q': OpenFlow port 5 is also port 'p''s"),
        "{e}"
    );
    assert!(parse(&bridge(&[port("p", "ofport = 65279\n"), port("q", "")])).is_ok());
}

#[test]
fn errors_name_their_line() {
    let e = parse("[datapath]\nemc-insert-inv-prob = \"x\"\n").unwrap_err();
    assert_eq!(e[0].line, Some(2), "{}", e[0]);
    let e = parse("[datapath]\nbogus-knob = 1\n").unwrap_err();
    assert_eq!(e[0].line, Some(2), "{}", e[0]);
    assert!(e[0].message.contains("bogus-knob"), "{}", e[0]);
    let e = parse(
        "[datapath]\npmd-cpu-mask = \"zz\"\n[[bridge]]\nname = \"b\"\n[[bridge.port]]\nname = \"q\"\ntype = \"warp\"\n",
    )
    .unwrap_err();
    assert_eq!(e.len(), 2);
    assert_eq!(e[0].line, Some(6), "{}", e[0]);
    assert!(e[0].message.contains("unknown type 'warp'"));
    assert_eq!(e[1].line, Some(2), "{}", e[1]);
    // A bad option is reported on its port's options line, even when the port's name
    // appears before it (in a flow, as a bridge's name).
    let e = parse(
        "[[bridge]]\nname = \"p1\"\nflows = [\"in_port=p1 actions=drop\"]\n\
         [[bridge.port]]\nname = \"x\"\ntype = \"sink\"\n\
         [[bridge.port]]\nname = \"p1\"\ntype = \"afpacket\"\noptions = { n_rxq = 0 }\n",
    )
    .unwrap_err();
    assert_eq!(e[0].line, Some(10), "{}", e[0]);
    assert!(e[0].message.contains("port 'p1': n_rxq"), "{}", e[0]);
    let e = parse(
        "[[bridge]]\nname = \"b\"\n[[bridge.port]]\nname = \"q\"\ntype = \"sink\"\n\
         tag = 10\nvlan_mode = \"qinq\"\n",
    )
    .unwrap_err();
    assert!(e[0].message.contains("vlan_mode qinq"), "{}", e[0]);
    assert!(
        parse(
            "[[bridge]]\nname = \"b\"\n[[bridge.port]]\nname = \"q\"\ntype = \"sink\"\n\
         tag = 10\nvlan_mode = \"native-untagged\"\n",
        )
        .is_ok()
    );
    assert!(
        parse(
            "[[bridge]]\nname = \"b\"\n[[bridge.port]]\nname = \"q\"\ntype = \"sink\"\n\
         tag = 10\nvlan_mode = \"dot1q-tunnel\"\n",
        )
        .is_ok()
    );
}

const CT: &str = r#"
[conntrack]
maxconns = 100000
tcp_seq_chk = false
default_limit = 50
ipf_v4 = true
ipf_v6 = false
ipf_min_frag_v4 = 1000
ipf_min_frag_v6 = 1100
ipf_max_nfrags = 500

[conntrack.default_timeouts]
udp_first = 45

[[conntrack.zone]]
zone = 5
limit = 1000
tcp_established = 3600

[[conntrack.zone]]
zone = 7
icmp_first = 5
"#;

#[test]
fn conntrack_section_parses_and_applies() {
    use conntrack::TimeoutClass as T;
    let c = parse(CT).unwrap_or_else(|e| panic!("{}", e[0]));
    let ct = conntrack::Conntrack::new();
    c.conntrack.apply(&ct);
    assert_eq!(ct.maxconns(), 100000);
    assert!(!ct.tcp_seq_chk());
    assert_eq!(ct.default_limit(), 50);
    assert_eq!(ct.zone_limits(), vec![(5, 1000)]);
    let d = ct.timeouts(None);
    assert_eq!(d[T::UdpFirst as usize], 45);
    assert_eq!(
        d[T::TcpEstablished as usize],
        T::TcpEstablished.default_secs()
    );
    let z5 = ct.timeouts(Some(5));
    assert_eq!(z5[T::TcpEstablished as usize], 3600);
    // A zone's policy starts from the default policy as configured.
    assert_eq!(z5[T::UdpFirst as usize], 45);
    assert_eq!(ct.timeouts(Some(7))[T::IcmpFirst as usize], 5);
    assert_eq!(ct.timeouts(Some(9)), d);
    let f = c.conntrack.frag_config();
    assert_eq!(
        (
            f.enabled_v4,
            f.enabled_v6,
            f.min_frag_size_v4,
            f.min_frag_size_v6,
            f.max_frags
        ),
        (true, false, 1000, 1100, 500)
    );
    assert_eq!(f.max_frags_per_datagram, 70);
    assert_eq!(f.check(), Ok(()));
    // Nothing given: nothing changes.
    let none = parse("").unwrap();
    assert_eq!(
        none.conntrack.frag_config(),
        conntrack::frag::FragConfig::default()
    );
    let ct = conntrack::Conntrack::new();
    none.conntrack.apply(&ct);
    assert_eq!(ct.maxconns(), conntrack::table::DEFAULT_MAXCONNS);
    assert!(ct.tcp_seq_chk());
}

#[test]
fn conntrack_errors_name_line_and_key() {
    let errs = |text: &str| -> Vec<String> {
        parse(text)
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    assert_eq!(
        errs("[conntrack]\nmaxconns = \"x\"\n"),
        ["line 2: maxconns: invalid type: string \"x\", expected u32"]
    );
    assert_eq!(
        errs("[conntrack]\n\ntcp_seq_chk = 1\n"),
        ["line 3: tcp_seq_chk: invalid type: integer `1`, expected a boolean"]
    );
    assert_eq!(
        errs("[conntrack]\ndefault_limit = -1\n"),
        ["line 2: default_limit: invalid value: integer `-1`, expected u32"]
    );
    assert!(
        errs("[conntrack]\nmaxconn = 1\n")[0]
            .starts_with("line 2: unknown field `maxconn`, expected one of `maxconns`"),
    );
    assert_eq!(
        errs(
            "[conntrack]\nipf_min_frag_v4 = 300\nipf_min_frag_v6 = 399\nipf_max_nfrags = 5001\n\
             ipf_min_frag_v6x = 1\n"
        ),
        [
            "line 5: unknown field `ipf_min_frag_v6x`, expected one of `maxconns`, `tcp_seq_chk`, \
          `default_limit`, `default_timeouts`, `zone`, `ipf_v4`, `ipf_v6`, `ipf_min_frag_v4`, \
          `ipf_min_frag_v6`, `ipf_max_nfrags`"
        ]
    );
    assert_eq!(
        errs("[conntrack]\nipf_min_frag_v4 = 300\nipf_min_frag_v6 = 399\nipf_max_nfrags = 5001\n"),
        [
            "line 2: conntrack: ipf_min_frag_v4 = 300: below 400, the smallest OVS allows",
            "line 3: conntrack: ipf_min_frag_v6 = 399: below 400, the smallest OVS allows",
            "line 4: conntrack: ipf_max_nfrags = 5001: above 5000, the largest OVS allows",
        ]
    );
    let classes = "tcp_syn_sent, tcp_syn_recv, tcp_established, tcp_fin_wait, \
                   tcp_time_wait, tcp_close, udp_first, udp_single, udp_multiple, \
                   icmp_first, icmp_reply";
    assert_eq!(
        errs("[conntrack]\n[conntrack.default_timeouts]\nudp_first = -5\nudp_last = 5\n"),
        [
            "line 3: conntrack default_timeouts: udp_first = -5: expected seconds \
             (0-4294967295)"
                .to_string(),
            format!(
                "line 4: conntrack default_timeouts: unknown timeout class 'udp_last' \
                 (known: {classes})"
            ),
        ]
    );
    let e = errs(
        "[[conntrack.zone]]\nzone = 5\nlimit = 10\n\
         [[conntrack.zone]]\nzone = 70000\n\
         [[conntrack.zone]]\nlimit = 3\n\
         [[conntrack.zone]]\nzone = 5\n\
         [[conntrack.zone]]\nzone = 6\nlimit = \"many\"\ntcp_established = 1.5\n\
         tcp_unack = 3\n",
    );
    assert_eq!(
        e,
        [
            "line 5: conntrack zone entry 2: zone = 70000: expected a zone (0-65535)".to_string(),
            "line 6: conntrack zone entry 3: needs zone".to_string(),
            "line 9: conntrack zone 5: given twice".to_string(),
            "line 12: conntrack zone 6: limit = \"many\": expected connections \
             (0-4294967295; 0: none committed)"
                .to_string(),
            "line 13: conntrack zone 6: tcp_established = 1.5: expected seconds \
             (0-4294967295)"
                .to_string(),
            format!(
                "line 14: conntrack zone 6: unknown key 'tcp_unack' (known: zone, limit, \
                 {classes})"
            ),
        ]
    );
}
