use super::*;
use crate::stamp::Stamp;

const PORTS: &str = r#"
[[port]]
name = "p0"
type = "loopback"

[[port]]
name = "p1"
type = "afpacket"
options = { interface = "veth1", queues = 2 }
"#;

fn parse_ok(text: &str) -> StreamFile {
    match parse(text, Path::new(".")) {
        Ok(f) => f,
        Err(e) => panic!(
            "{}",
            e.iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        ),
    }
}

/// The one error of `text` (ports prepended), as (line within `text`, key).
fn one_err(text: &str) -> (usize, String, String) {
    let all = format!("{PORTS}{text}");
    let errs = parse(&all, Path::new(".")).expect_err("an error");
    assert_eq!(errs.len(), 1, "{errs:?}");
    let e = &errs[0];
    let ports_lines = PORTS.lines().count();
    (e.line - ports_lines, e.key.clone(), e.to_string())
}

#[test]
fn full_example() {
    let text = format!(
        r#"duration = 2.5
{PORTS}
[[stream]]
name = "geneve"
tx = "p0"
rx = "p1"
direction = "bi"
flows = 1000
frame_size = 128
rate = "1.5Mpps"
stamp = true
seed = 7
layers = [
  {{ type = "eth", src = "ec:0d:9a:44:2c:f5", dst = "3c:fd:fe:ee:4a:2c" }},
  {{ type = "vlan", vid = 177 }},
  {{ type = "ipv4", src = "172.17.2.160", dst = "172.17.2.60" }},
  {{ type = "udp", sport = 57025 }},
  {{ type = "geneve", vni = 3, options = [ {{ class = 0x0102, type = 0x80, data = "00030002" }} ] }},
  {{ type = "eth", src = "fa:16:3e:e4:0a:cf", dst = "fa:16:3e:20:ab:56" }},
  {{ type = "ipv4", src = "192.168.1.61", dst = "192.168.1.16" }},
  {{ type = "udp", sport = 1024, dport = 2000 }},
]
vary = [
  {{ field = "udp[1].sport", op = "inc", from = 1024, to = 2023 }},
  {{ field = "ipv4[1].src", op = "random", from = "192.168.1.1", to = "192.168.1.254" }},
]

[[stream]]
name = "imix"
tx = "p1"
frame_size = "imix"
rate = "50%"
line_rate = "10Gbps"
layers = [ {{ type = "eth" }}, {{ type = "ipv4" }}, {{ type = "udp" }} ]
"#
    );
    let f = parse_ok(&text);
    assert_eq!(f.duration, 2.5);
    assert_eq!(f.ports.len(), 2);
    assert_eq!(
        (f.ports[1].name.as_str(), f.ports[1].kind.as_str()),
        ("p1", "afpacket")
    );
    assert_eq!(
        f.ports[1]
            .options
            .get("queues")
            .and_then(|v| v.as_integer()),
        Some(2)
    );
    assert_eq!(f.ports[0].line, 3);
    let names: Vec<(&str, u16, &str, &str)> = f
        .streams
        .iter()
        .map(|s| (s.name.as_str(), s.id, s.tx.as_str(), s.rx.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("geneve", 0, "p0", "p1"),
            ("geneve.rev", 1, "p1", "p0"),
            ("imix", 2, "p1", "p1")
        ]
    );
    assert_eq!(f.streams[0].rate, Rate::Pps(1.5e6));
    assert_eq!(f.streams[2].rate, Rate::L1Bps(5e9));
    let g = &f.streams[0].frames;
    assert_eq!((g.flows(), g.max_len(), g.period()), (1000, 124, 1000));
    let st = Stamp {
        stream: 0,
        seq: 1,
        tx_ns: 2,
    };
    let fr = g.frame(5, &st);
    assert_eq!(u16::from_be_bytes([fr[96], fr[97]]), 1029);
    assert_eq!(&fr[12..16], &[0x81, 0x00, 0x00, 177]);
    assert_eq!(crate::stamp::find_stamp(&fr), Some(st));
    let r = f.streams[1].frames.frame(5, &st);
    assert_eq!(u16::from_be_bytes([r[98], r[99]]), 1029);
    assert_eq!(f.streams[2].frames.max_len(), 1514);
}

#[test]
fn defaults() {
    let f = parse_ok(&format!(
        "{PORTS}[[stream]]\nname = \"s\"\ntx = \"p0\"\nlayers = [{{ type = \"eth\" }}, {{ type = \"ipv4\" }}, {{ type = \"udp\" }}]\n"
    ));
    assert_eq!(f.duration, 10.0);
    let s = &f.streams[0];
    assert_eq!((s.rx.as_str(), s.rate), ("p0", Rate::Max));
    assert_eq!(
        (s.frames.flows(), s.frames.max_len(), s.frames.stamped()),
        (1, 60, true)
    );
    let f = parse_ok(&format!(
        "{PORTS}[[stream]]\nname = \"s\"\ntx = \"p0\"\nframe_size = 128\nlayers = [{{ type = \"eth\" }}, {{ type = \"ipv6\" }}, {{ type = \"tcp\", flags = \"SA\" }}]\n"
    ));
    assert_eq!(f.streams[0].frames.frame(0, &Stamp::default())[67], 0x12);
}

#[test]
fn hex_and_pcap_templates() {
    // Ether/IPv4/UDP from the anchor's plain kind, 60 bytes: frame size 64 by default.
    let hex = "8cdcd4ab5bf08cdcd4ab584808004500002e00010000401166bb0a0000010a010002040007d0\
               001adfe6000000000000000000000000000000000000";
    let f = parse_ok(&format!(
        "{PORTS}[[stream]]\nname = \"h\"\ntx = \"p0\"\nstamp = false\nhex = \"{hex}\"\n"
    ));
    let fr = f.streams[0].frames.frame(0, &Stamp::default());
    assert_eq!(fr, build::parse_hex(hex).unwrap());

    let dir = std::env::temp_dir().join(format!("trafgen-stream-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut w = netdev::pcap::PcapWriter::create(dir.join("one.pcap")).unwrap();
    w.write(0, &build::parse_hex(hex).unwrap()).unwrap();
    w.finish().unwrap();
    let text = format!(
        "{PORTS}[[stream]]\nname = \"p\"\ntx = \"p0\"\npcap = \"one.pcap\"\nframe_size = 128\nflows = 4\nvary = [{{ field = \"udp.sport\" }}]\n"
    );
    let f = parse(&text, &dir).unwrap();
    let fr = f.streams[0].frames.frame(3, &Stamp::default());
    assert_eq!(fr.len(), 124);
    assert_eq!(&fr[34..36], &[0x04, 0x03]);
    let e = parse(&text.replace("one.pcap", "none.pcap"), &dir).unwrap_err();
    assert_eq!((e[0].key.as_str(), e[0].line), ("pcap", 13));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn rates() {
    assert_eq!(parse_rate("max", None), Ok(Rate::Max));
    assert_eq!(parse_rate("1.5Mpps", None), Ok(Rate::Pps(1.5e6)));
    assert_eq!(parse_rate("800kpps", None), Ok(Rate::Pps(8e5)));
    assert_eq!(parse_rate("1000pps", None), Ok(Rate::Pps(1000.0)));
    assert_eq!(parse_rate("1000", None), Ok(Rate::Pps(1000.0)));
    assert_eq!(parse_rate("2.5Gbps", None), Ok(Rate::L1Bps(2.5e9)));
    assert_eq!(parse_rate(" 100 Mbps ", None), Ok(Rate::L1Bps(1e8)));
    assert_eq!(parse_rate("50%", Some(10e9)), Ok(Rate::L1Bps(5e9)));
    assert!(parse_rate("50%", None).unwrap_err().contains("line_rate"));
    for bad in [
        "", "fast", "0pps", "-1pps", "1Xpps", "150%", "0%", "nanpps", "1e400pps",
    ] {
        assert!(parse_rate(bad, Some(1e9)).is_err(), "{bad}");
    }
    assert_eq!(parse_bps("10Gbps"), Ok(1e10));
    assert!(parse_bps("10Mpps").is_err());
}

const S: &str = "[[stream]]\nname = \"s\"\ntx = \"p0\"\n";
const L: &str = "layers = [{ type = \"eth\" }, { type = \"ipv4\" }, { type = \"udp\" }]\n";

#[test]
fn syntax_error() {
    let (line, key, _) = one_err(&format!("{S}rate = \n"));
    assert_eq!((line, key.as_str()), (4, ""));
}

#[test]
fn unknown_keys() {
    assert_eq!(one_err(&format!("durations = 3\n{S}{L}")).0..=1, 1..=1);
    let (line, key, msg) = one_err(&format!("durations = 3\n{S}{L}"));
    assert_eq!((line, key.as_str()), (1, "durations"));
    assert!(msg.contains("unknown key"), "{msg}");
    let (line, key, msg) = one_err(&format!("{S}rat = \"1Mpps\"\n{L}"));
    assert_eq!((line, key.as_str()), (4, "rat"));
    assert!(msg.starts_with("line "), "{msg}");
    assert!(
        msg.contains("stream \"s\" key \"rat\": unknown key"),
        "{msg}"
    );
    let (line, key, _) = one_err(&format!(
        "{S}layers = [\n  {{ type = \"eth\" }},\n  {{ type = \"vlan\", vlan_id = 3 }},\n]\n"
    ));
    assert_eq!((line, key.as_str()), (6, "layers[1].vlan_id"));
    let (line, key, _) = one_err(&format!(
        "{S}{L}vary = [\n {{ field = \"udp.sport\", stepp = 2 }},\n]\n"
    ));
    assert_eq!((line, key.as_str()), (6, "vary[0].stepp"));
    let (line, key, _) = one_err("[[port]]\nname = \"p2\"\ntype = \"x\"\nofport = 3\n");
    assert_eq!((line, key.as_str()), (4, "ofport"));
    let (line, key, _) = one_err(&format!(
        "{S}layers = [{{ type = \"eth\" }}, {{ type = \"ipv4\" }}, {{ type = \"udp\" }}, {{ type = \"geneve\", options = [{{ class = 1, typ = 2 }}] }}]\n"
    ));
    assert_eq!((line, key.as_str()), (4, "layers[3].options[0].typ"));
}

#[test]
fn wrong_types() {
    let (line, key, _) = one_err(&format!("{S}flows = \"ten\"\n{L}"));
    assert_eq!((line, key.as_str()), (4, "flows"));
    let (line, key, _) = one_err(&format!("{S}stamp = 1\n{L}"));
    assert_eq!((line, key.as_str()), (4, "stamp"));
    let (line, key, _) = one_err(&format!(
        "{S}layers = [{{ type = \"eth\" }}, {{ type = \"vlan\", vid = \"3\" }}]\n"
    ));
    assert_eq!((line, key.as_str()), (4, "layers[1].vid"));
    let (line, key, _) = one_err(&format!("duration = \"long\"\n{S}{L}"));
    assert_eq!((line, key.as_str()), (1, "duration"));
    let (line, key, _) = one_err(&format!("{S}rate = true\n{L}"));
    assert_eq!((line, key.as_str()), (4, "rate"));
    let (line, key, _) = one_err(&format!("{S}{L}vary = \"udp.sport\"\n"));
    assert_eq!((line, key.as_str()), (5, "vary"));
    let (line, key, _) = one_err(&format!("{S}direction = \"both\"\n{L}"));
    assert_eq!((line, key.as_str()), (4, "direction"));
}

#[test]
fn unknown_layer_type_or_field() {
    let (line, key, msg) = one_err(&format!(
        "{S}layers = [\n {{ type = \"eth\" }},\n {{ type = \"ip\" }},\n]\n"
    ));
    assert_eq!((line, key.as_str()), (6, "layers[1].type"));
    assert!(msg.contains("unknown layer type \"ip\""), "{msg}");
    let (line, key, _) = one_err(&format!("{S}{L}vary = [{{ field = \"ipv4.source\" }}]\n"));
    assert_eq!((line, key.as_str()), (5, "vary[0].field"));
    let (line, key, _) = one_err(&format!(
        "{S}{L}vary = [{{ field = \"udp.sport\", op = \"dec\" }}]\n"
    ));
    assert_eq!((line, key.as_str()), (5, "vary[0].op"));
    let (line, key, _) = one_err(&format!(
        "{S}layers = [{{ type = \"eth\" }}, {{ type = \"ipv4\" }}, {{ type = \"tcp\", flags = \"SX\" }}]\n"
    ));
    assert_eq!((line, key.as_str()), (4, "layers[2].flags"));
}

#[test]
fn bad_addresses() {
    let (line, key, _) = one_err(&format!(
        "{S}layers = [\n {{ type = \"eth\", src = \"00:11:22:33:44\" }},\n]\n"
    ));
    assert_eq!((line, key.as_str()), (5, "layers[0].src"));
    let (line, key, _) = one_err(&format!(
        "{S}layers = [{{ type = \"eth\" }}, {{ type = \"ipv4\", dst = \"10.0.0.256\" }}]\n"
    ));
    assert_eq!((line, key.as_str()), (4, "layers[1].dst"));
    let (line, key, _) = one_err(&format!(
        "{S}layers = [{{ type = \"eth\" }}, {{ type = \"ipv6\", src = \"10.0.0.1\" }}]\n"
    ));
    assert_eq!((line, key.as_str()), (4, "layers[1].src"));
    let (line, key, _) = one_err(&format!(
        "{S}{L}vary = [{{ field = \"ipv4.src\", from = \"10.0.0.1\", to = \"10.0.0\" }}]\n"
    ));
    assert_eq!((line, key.as_str()), (5, "vary[0].to"));
}

#[test]
fn undeclared_ports() {
    let (line, key, msg) =
        one_err("[[stream]]\nname = \"s\"\ntx = \"p9\"\nlayers = [{ type = \"eth\" }]\n");
    assert_eq!((line, key.as_str()), (3, "tx"));
    assert!(msg.contains("no [[port]] named \"p9\""), "{msg}");
    let (line, key, _) = one_err(&format!("{S}rx = \"nope\"\n{L}"));
    assert_eq!((line, key.as_str()), (4, "rx"));
    let (line, key, _) = one_err("[[stream]]\nname = \"s\"\nlayers = [{ type = \"eth\" }]\n");
    assert_eq!((line, key.as_str()), (1, "tx"));
}

#[test]
fn duplicate_names() {
    let (line, key, _) = one_err(&format!("{S}{L}\n{S}{L}"));
    assert_eq!((line, key.as_str()), (6, "name"));
    let (line, key, _) = one_err(&format!(
        "{S}direction = \"bi\"\n{L}\n[[stream]]\nname = \"s.rev\"\ntx = \"p0\"\n{L}"
    ));
    assert_eq!((line, key.as_str()), (7, "name"));
    let (line, key, _) = one_err("[[port]]\nname = \"p0\"\ntype = \"tap\"\n");
    assert_eq!((line, key.as_str()), (2, "name"));
}

#[test]
fn frame_too_small() {
    let vxlan = "layers = [{ type = \"eth\" }, { type = \"ipv4\" }, { type = \"udp\" }, { type = \"vxlan\" }, { type = \"eth\" }, { type = \"ipv4\" }, { type = \"udp\" }]\n";
    let (line, key, msg) = one_err(&format!("{S}frame_size = 100\n{vxlan}"));
    assert_eq!((line, key.as_str()), (4, "frame_size"));
    assert!(
        msg.ends_with(
            "frame_size 100 is too small for these headers: 92 bytes + 16-byte stamp + 4 FCS"
        ),
        "{msg}"
    );
    // Without frame_size (64): the stream's line.
    let (line, key, _) = one_err(&format!("{S}{vxlan}"));
    assert_eq!((line, key.as_str()), (1, "frame_size"));
    // Without the stamp the headers fit.
    assert!(
        parse(
            &format!("{PORTS}{S}frame_size = 100\nstamp = false\n{vxlan}"),
            Path::new(".")
        )
        .is_ok()
    );
    let (_, key, _) = one_err(&format!("{S}frame_size = \"imix\"\n{vxlan}"));
    assert_eq!(key, "frame_size");
}

#[test]
fn sizes_out_of_range() {
    let (line, key, _) = one_err(&format!("{S}frame_size = 63\n{L}"));
    assert_eq!((line, key.as_str()), (4, "frame_size"));
    let (line, key, _) = one_err(&format!("{S}frame_size = 9001\n{L}"));
    assert_eq!((line, key.as_str()), (4, "frame_size"));
    let (line, key, _) = one_err(&format!("{S}frame_size = [\n 64,\n 10000,\n]\n{L}"));
    assert_eq!((line, key.as_str()), (6, "frame_size[1]"));
    let (line, key, _) = one_err(&format!("{S}frame_size = []\n{L}"));
    assert_eq!((line, key.as_str()), (4, "frame_size"));
    let (line, key, _) = one_err(&format!("{S}frame_size = \"jumbo\"\n{L}"));
    assert_eq!((line, key.as_str()), (4, "frame_size"));
}

#[test]
fn zero_flows() {
    let (line, key, _) = one_err(&format!("{S}flows = 0\n{L}"));
    assert_eq!((line, key.as_str()), (4, "flows"));
    let (line, key, _) = one_err(&format!("{S}flows = -3\n{L}"));
    assert_eq!((line, key.as_str()), (4, "flows"));
}

#[test]
fn vary_on_missing_field() {
    let (line, key, msg) = one_err(&format!(
        "{S}{L}vary = [\n  {{ field = \"udp.sport\" }},\n  {{ field = \"ipv4[1].src\" }},\n]\n"
    ));
    assert_eq!((line, key.as_str()), (7, "vary[1].field"));
    assert!(msg.contains("no ipv4[1]"), "{msg}");
    let (line, key, _) = one_err(&format!(
        "{S}{L}vary = [\n  {{ field = \"udp.sport\", from = 9, to = 3 }},\n]\n"
    ));
    assert_eq!((line, key.as_str()), (6, "vary[0].to"));
    let (line, key, _) = one_err(&format!(
        "{S}{L}vary = [\n  {{ field = \"udp.sport\", from = 70000 }},\n]\n"
    ));
    assert_eq!((line, key.as_str()), (6, "vary[0].from"));
    let (line, key, _) = one_err(&format!(
        "{S}{L}vary = [\n  {{ field = \"udp.sport\", op = \"random\", step = 2 }},\n]\n"
    ));
    assert_eq!((line, key.as_str()), (6, "vary[0].step"));
}

#[test]
fn layer_order_and_templates() {
    let (line, key, msg) = one_err(&format!(
        "{S}layers = [\n {{ type = \"eth\" }},\n {{ type = \"udp\" }},\n]\n"
    ));
    assert_eq!((line, key.as_str()), (6, "layers[1].type"));
    assert!(msg.contains("udp cannot follow eth"), "{msg}");
    let (line, key, _) = one_err(S);
    assert_eq!((line, key.as_str()), (1, "layers"));
    let (line, key, _) = one_err(&format!("{S}{L}hex = \"00\"\n"));
    assert_eq!((line, key.as_str()), (5, "hex"));
    let (line, key, _) = one_err(&format!("{S}hex = \"0g\"\n"));
    assert_eq!((line, key.as_str()), (4, "hex"));
    let (line, key, _) = one_err(&format!("{S}hex = \"00112233\"\n"));
    assert_eq!((line, key.as_str()), (4, "hex"));
    let (line, key, _) = one_err(&format!(
        "{S}layers = [{{ type = \"eth\" }}, {{ type = \"ipv4\" }}, {{ type = \"udp\" }},\n {{ type = \"geneve\", options = [{{ class = 1, type = 2, data = \"001122\" }}] }}]\n"
    ));
    assert_eq!((line, key.as_str()), (5, "layers[3].options[0].data"));
    let (line, key, _) = one_err(&format!(
        "{S}layers = [{{ type = \"eth\" }}, {{ type = \"vlan\", tpid = 0x1234 }}]\n"
    ));
    assert_eq!((line, key.as_str()), (4, "layers[1].tpid"));
}

#[test]
fn bad_rates() {
    let (line, key, _) = one_err(&format!("{S}rate = \"fast\"\n{L}"));
    assert_eq!((line, key.as_str()), (4, "rate"));
    let (line, key, msg) = one_err(&format!("{S}rate = \"50%\"\n{L}"));
    assert_eq!((line, key.as_str()), (4, "rate"));
    assert!(msg.contains("line_rate"), "{msg}");
    let (line, key, _) = one_err(&format!("{S}line_rate = \"10Mpps\"\n{L}"));
    assert_eq!((line, key.as_str()), (4, "line_rate"));
    let (_, key, _) = one_err(&format!("{S}rate = 0\n{L}"));
    assert_eq!(key, "rate");
    let f = parse_ok(&format!("{PORTS}{S}rate = 2000\n{L}"));
    assert_eq!(f.streams[0].rate, Rate::Pps(2000.0));
    let f = parse_ok(&format!("{PORTS}{S}rate = \"10%\"\nline_rate = 1e9\n{L}"));
    assert_eq!(f.streams[0].rate, Rate::L1Bps(1e8));
    let (_, key, _) = one_err(&format!("{S}line_rate = -1\n{L}"));
    assert_eq!(key, "line_rate");
}

#[test]
fn several_errors_each_reported() {
    let errs = parse(
        &format!("{PORTS}{S}flows = 0\nrat = 1\n{L}\n[[stream]]\nname = \"t\"\ntx = \"zz\"\n{L}"),
        Path::new("."),
    )
    .unwrap_err();
    let keys: Vec<&str> = errs.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, ["flows", "rat", "tx"]);
}
