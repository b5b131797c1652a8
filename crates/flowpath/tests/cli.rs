//! The `flowpath` command line, run as a user runs it.

use std::path::PathBuf;
use std::process::{Command, Output};

fn flowpath(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flowpath"))
        .args(args)
        .output()
        .expect("run flowpath")
}

fn testdata(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/pcap")
        .join(name);
    p.to_str().unwrap().to_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

#[test]
fn extract_prints_one_ovs_key_per_packet() {
    let o = flowpath(&["extract", &testdata("plain_8.pcap"), "--in-port", "3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<_> = out.lines().collect();
    assert_eq!(lines.len(), 8);
    assert_eq!(
        lines[1],
        "recirc_id(0),in_port(3),eth(src=8c:dc:d4:ab:58:48,dst=8c:dc:d4:ab:5b:f0),\
         eth_type(0x0800),ipv4(src=10.0.0.1,dst=10.1.0.2,proto=17,tos=0,ttl=64,frag=no),\
         udp(src=1025,dst=2000)"
    );
}

#[test]
fn extract_keys_parse_back() {
    // Every key printed for the fixtures is valid datapath flow syntax.
    for f in [
        "vlan.pcap",
        "mpls.pcap",
        "ipv6.pcap",
        "arp.pcap",
        "tcp.pcap",
    ] {
        let o = flowpath(&["extract", &testdata(f)]);
        assert!(o.status.success(), "{f}: {}", stderr(&o));
        for line in stdout(&o).lines() {
            let flow = format!("{line}, actions:drop");
            let p = flowpath(&["flow", "parse", &flow]);
            assert!(p.status.success(), "{f}: {line}: {}", stderr(&p));
            assert_eq!(stdout(&p).trim_end(), flow);
        }
    }
}

#[test]
fn extract_summary_counts_protocols_and_reasons() {
    let o = flowpath(&["extract", &testdata("truncated.pcap"), "--summary"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("packets: 24\n"), "{out}");
    assert!(out.contains("by malformation:"), "{out}");
    for reason in ["runt", "tcp_truncated", "ipv4_bad_total_len", "nd_invalid"] {
        assert!(
            out.lines().any(|l| l.trim_start().starts_with(reason)),
            "{reason}: {out}"
        );
    }
}

#[test]
fn extract_without_a_file_reads_the_built_in_sample() {
    let o = flowpath(&["extract", "--summary"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("ipv4/udp"));
}

#[test]
fn extract_reports_damage_after_the_good_packets() {
    let dir = std::env::temp_dir().join(format!("flowpath-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut bytes = std::fs::read(testdata("plain_8.pcap")).unwrap();
    bytes.truncate(bytes.len() - 5);
    let damaged = dir.join("damaged.pcap");
    std::fs::write(&damaged, &bytes).unwrap();
    let o = flowpath(&["extract", damaged.to_str().unwrap()]);
    assert!(!o.status.success());
    assert_eq!(stdout(&o).lines().count(), 7);
    assert!(
        stderr(&o).contains("record 7: file ends inside the packet"),
        "{}",
        stderr(&o)
    );

    let o = flowpath(&["extract", dir.join("missing.pcap").to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("missing.pcap"), "{}", stderr(&o));
    std::fs::write(
        dir.join("text.pcap"),
        "hello, this is a text file and not a capture at all",
    )
    .unwrap();
    let o = flowpath(&["extract", dir.join("text.pcap").to_str().unwrap()]);
    assert!(stderr(&o).contains("not a pcap file"), "{}", stderr(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn flow_parse_prints_canonical_form() {
    let o = flowpath(&[
        "flow",
        "parse",
        "ufid:f6295150-9399-4436-a6a0-03c28c0f2163, recirc_id(0),in_port(p0),eth_type(0x0800),\
         ipv4(dst=10.1.2.8,proto=47,frag=no), packets:5, bytes:480, used:0.000s, actions:tnl_pop(gre_sys)",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "ufid:f6295150-9399-4436-a6a0-03c28c0f2163, recirc_id(0),in_port(p0),eth_type(0x0800),\
         ipv4(dst=10.1.2.8,proto=47,frag=no), packets:5, bytes:480, used:0.000s, actions:tnl_pop(gre_sys)\n"
    );
}

#[test]
fn flow_parse_error_names_the_column() {
    let o = flowpath(&[
        "flow",
        "parse",
        "in_port(1),eth(src=00:11:22:33:44:zz), actions:2",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("column 35: expected hex digits"), "{err}");
    let o = flowpath(&[
        "flow",
        "parse",
        "in_port(1),eth_type(0x0800), actions:push_vlan(vid=5000)",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("column 52: vid out of range"),
        "{}",
        stderr(&o)
    );
}

/// Without the cargo feature `dpdk`, `bench --io dpdk` says how to get it.
#[cfg(not(feature = "dpdk"))]
#[test]
fn bench_on_dpdk_io_needs_the_dpdk_build() {
    let o = flowpath(&["bench", "p2p", "--io", "dpdk", "--seconds", "1"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--io dpdk: flowpath was built without DPDK"),
        "{}",
        stderr(&o)
    );
}

/// `bench host` prints the machine's line round trip, copy costs and random lines' costs, as
/// text and JSON; bad cores and windows are errors or a reason, never a panic.
#[test]
fn bench_host_reports_line_round_trip_and_copy_costs() {
    let o = flowpath(&["bench", "host", "--cores", "0,0", "--seconds", "0.3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("cache line round trip: not measured: the two cores must differ"),
        "{out}"
    );
    assert_eq!(out.matches("memcpy of 1514 bytes").count(), 3, "{out}");
    assert!(out.contains("random 64-byte lines of 256 MiB"), "{out}");
    assert!(
        out.contains("a line then the line it names, 32 pairs at once:"),
        "{out}"
    );
    assert!(
        out.contains("a stream of random lines, each asked for before its read:")
            && out.contains("each 32 reads ahead")
            && out.contains("each 128 reads ahead"),
        "{out}"
    );
    let o = flowpath(&[
        "bench",
        "host",
        "--cores",
        "0,0",
        "--seconds",
        "0.3",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["copies"].as_array().unwrap().len(), 3);
    assert!(v["copies"][0]["gbytes_per_second"].as_f64().unwrap() > 0.0);
    let lines = &v["random_lines"];
    assert!(lines["dependent"].as_f64().unwrap() > 0.0, "{lines}");
    assert!(lines["burst"].as_f64().unwrap() > 0.0, "{lines}");
    assert!(lines["pairs"].as_f64().unwrap() > 0.0, "{lines}");
    assert!(
        lines["pairs_cached_first"].as_f64().unwrap() > 0.0,
        "{lines}"
    );
    assert_eq!(lines["cached_first_bytes"], 4 << 20, "{lines}");
    let from = lines["pairs_first_from"].as_array().unwrap();
    assert_eq!(from.len(), 2, "{lines}");
    assert_eq!(
        (&from[0][0], &from[1][0]),
        (&(16 << 20).into(), &(64 << 20).into())
    );
    assert!(from.iter().all(|p| p[1].as_f64().unwrap() > 0.0), "{lines}");
    let ahead = lines["stream_ahead"].as_array().unwrap();
    assert_eq!(ahead.len(), 2, "{lines}");
    assert_eq!((&ahead[0][0], &ahead[1][0]), (&32.into(), &128.into()));
    assert!(
        ahead.iter().all(|p| p[1].as_f64().unwrap() > 0.0),
        "{lines}"
    );
    for bad in [
        &["--cores", "1"][..],
        &["--cores", "a,b"],
        &["--seconds", "0"],
    ] {
        let mut args = vec!["bench", "host"];
        args.extend_from_slice(bad);
        let o = flowpath(&args);
        assert!(!o.status.success(), "{args:?} accepted");
        assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    }
}
