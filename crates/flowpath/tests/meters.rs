//! Meters driven by `flowpath ofctl` on a running switch with dummy ports: a meter and a flow
//! that uses it, packets injected with `netdev-dummy/receive`, and what passed and what the
//! band dropped in `meter-stats`, `dpif-netdev/pmd-drop-show` and the datapath flow
//! (`meter(0)`, OVS's first datapath meter); the text commands' errors are OVS's.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{scratch_dir, start_switch};

const CONFIG: &str = r#"
[[bridge]]
name = "br0"

[[bridge.port]]
name = "p1"
type = "dummy"
ofport = 1

[[bridge.port]]
name = "p2"
type = "dummy"
ofport = 2
"#;

fn flowpath(rundir: &Path, cmd: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flowpath"))
        .args([cmd, "--rundir"])
        .arg(rundir)
        .args(args)
        .output()
        .unwrap()
}

fn ok(o: Output) -> String {
    assert!(o.status.success(), "{o:?}");
    String::from_utf8(o.stdout).unwrap()
}

fn err(o: Output) -> String {
    assert!(!o.status.success(), "{o:?}");
    String::from_utf8(o.stderr).unwrap()
}

/// The number after `key` in `text`.
fn count(text: &str, key: &str) -> u64 {
    let at = text
        .find(key)
        .unwrap_or_else(|| panic!("no {key} in {text}"))
        + key.len();
    let digits: String = text[at..]
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}

#[test]
fn a_meter_drops_what_exceeds_its_burst_and_counts_it() {
    let (dir, _rm) = scratch_dir("fp-meters");
    let cfg = dir.join("sw.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let run = dir.join("run");
    let _sw = start_switch(&cfg, &run);
    let ofctl = |args: &[&str]| flowpath(&run, "ofctl", args);
    // Refused: a flow naming a missing meter, a DSCP remark band, a meter that exists.
    let e = err(ofctl(&[
        "add-flow",
        "br0",
        "in_port=1,actions=meter:1,output:2",
    ]));
    assert!(e.contains("OFPMMFC_INVALID_METER"), "{e}");
    let m = "meter=1,pktps,burst,stats,bands=type=drop,rate=1,burst_size=5";
    ok(ofctl(&["add-meter", "br0", m]));
    let e = err(ofctl(&["add-meter", "br0", m]));
    assert!(e.contains("OFPMMFC_METER_EXISTS"), "{e}");
    let dscp = "meter=2,kbps,bands=type=dscp_remark,rate=1,prec_level=1";
    assert!(err(ofctl(&["add-meter", "br0", dscp])).contains("OFPMMFC_BAD_BAND"));
    let e = err(ofctl(&["add-meter", "br0", "meter=3,kbps"]));
    assert!(e.contains("must specify bands"), "{e}");
    assert_eq!(
        ok(ofctl(&["dump-meters", "br0"])),
        "meter=1 pktps burst stats bands=\ntype=drop rate=1 burst_size=5\n"
    );
    assert!(ok(ofctl(&["meter-features", "br0"])).starts_with("max_meter:262144 max_bands:8"));
    ok(ofctl(&[
        "add-flow",
        "br0",
        "in_port=1,actions=meter:1,output:2",
    ]));

    // 20 packets at once: the 5 of the burst pass (and what 1 packet/s earns meanwhile).
    let pkt = "in_port(1),eth(src=50:54:00:00:00:01,dst=50:54:00:00:00:02),eth_type(0x0800),\
               ipv4(src=10.0.0.1,dst=10.0.0.2,proto=17,tos=0,ttl=64,frag=no),udp(src=1,dst=2)";
    let mut args = vec!["netdev-dummy/receive", "p1"];
    args.extend([pkt; 20]);
    ok(flowpath(&run, "ctl", &args));
    let stats = ok(ofctl(&["meter-stats", "br0", "meter=1"]));
    assert!(
        stats.starts_with("meter:1 flow_count:1 packet_in_count:20 "),
        "{stats}"
    );
    let dropped = count(&stats, "0: packet_count:");
    assert!((12..=15).contains(&dropped), "{stats}");
    let drops = ok(flowpath(&run, "ctl", &["dpif-netdev/pmd-drop-show"]));
    assert_eq!(count(&drops, "meter band exceeded"), dropped, "{drops}");
    let dp = ok(flowpath(&run, "ctl", &["dpctl/dump-flows"]));
    assert!(dp.contains("actions:meter(0),2"), "{dp}");

    // Deleting the meter deletes its flow.
    ok(ofctl(&["del-meters", "br0"]));
    assert_eq!(ok(ofctl(&["dump-meters", "br0"])), "");
    let flows = ok(ofctl(&["dump-flows", "br0"]));
    assert!(!flows.contains("meter"), "{flows}");
    let e = err(ofctl(&["meter-stats", "br0", "meter=1"]));
    assert!(e.contains("OFPMMFC_UNKNOWN_METER"), "{e}");
}

/// A switch with meter 1 (1 packet a second, no burst) and the flow `in_port=1,actions=ACTIONS`,
/// after 20 packets from p1: its `dpctl/dump-flows` and `meter-stats` of meter 1.
fn twenty_packets_through(name: &str, actions: &str) -> (String, String) {
    twenty_packets_metered(name, "1", actions)
}

/// [`twenty_packets_through`] with meter `meter` (`1`, `controller`) rather than 1.
fn twenty_packets_metered(name: &str, meter: &str, actions: &str) -> (String, String) {
    let (dir, _rm) = scratch_dir(name);
    let cfg = dir.join("sw.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let run = dir.join("run");
    let _sw = start_switch(&cfg, &run);
    let ofctl = |args: &[&str]| flowpath(&run, "ofctl", args);
    ok(ofctl(&[
        "add-meter",
        "br0",
        &format!("meter={meter},pktps,bands=type=drop,rate=1"),
    ]));
    ok(ofctl(&[
        "add-flow",
        "br0",
        &format!("in_port=1,actions={actions}"),
    ]));
    let pkt = "in_port(1),eth(src=50:54:00:00:00:01,dst=50:54:00:00:00:02),eth_type(0x0800),\
               ipv4(src=10.0.0.1,dst=10.0.0.2,proto=17,tos=0,ttl=64,frag=no),udp(src=1,dst=2)";
    let mut args = vec!["netdev-dummy/receive", "p1"];
    args.extend([pkt; 20]);
    ok(flowpath(&run, "ctl", &args));
    let flows = ok(flowpath(&run, "ctl", &["dpctl/dump-flows"]));
    let stats = ok(ofctl(&["meter-stats", "br0", &format!("meter={meter}")]));
    (flows, stats)
}

#[test]
fn a_controller_action_s_meter_limits_its_packet_ins_only() {
    let (flows, _) =
        twenty_packets_through("fp-meters-controller", "controller(meter_id=1),output:2");
    // OVS 3.1's datapath actions for the same flow: the meter and the packet-in in a sample
    // of every packet, the output outside it.
    assert!(
        flows.contains("actions:sample(sample=100.0%,actions(meter(0),userspace(pid=0,controller(")
            && flows.contains("))),2"),
        "{flows}"
    );
}

/// The controller meter (`meter=controller`, OpenFlow's `OFPM_CONTROLLER`) limits the
/// packet-ins of a `controller` action without a meter of its own, as OVS's
/// `xlate_controller_action()` puts every packet-in under it.
#[test]
fn the_controller_meter_limits_the_packet_ins() {
    let (flows, stats) =
        twenty_packets_metered("fp-meters-ctlmeter", "controller", "controller,output:2");
    assert!(
        flows.contains("actions:sample(sample=100.0%,actions(meter(0),userspace(pid=0,controller(")
            && flows.contains("))),2"),
        "{flows}"
    );
    assert!(stats.contains("meter:controller "), "{stats}");
    assert!(stats.contains(" packet_in_count:20 "), "{stats}");
    let dropped = count(&stats, "0: packet_count:");
    assert!(dropped >= 12, "{stats}");
}

/// `controller(pause,meter_id=N)`, as OVN sends for DHCP, DNS and its other paused packet-ins
/// under a control-plane (CoPP) meter: the meter limits the paused packet-ins as it limits the
/// plain ones (OVS 3.1.5's fix; 3.1.0 left them unmetered, so a DHCP storm reached the
/// controller whole).
#[test]
fn a_paused_controller_action_s_meter_limits_its_packet_ins() {
    let (flows, stats) =
        twenty_packets_through("fp-meters-pause", "controller(pause,meter_id=1),output:2");
    assert!(
        flows.contains("actions:sample(sample=100.0%,actions(meter(0),userspace(pid=0,controller(")
            && flows.contains("continuation=1"),
        "{flows}"
    );
    assert!(stats.contains(" packet_in_count:20 "), "{stats}");
    let dropped = count(&stats, "0: packet_count:");
    assert!(dropped >= 12, "{stats}");
}
