//! `flowpath bench report`: a matrix of scenarios × frame sizes × flows run through the
//! binary, written as report.md, report.json and PNG plots; the side-by-side report made from
//! scripts/compare-ovs's output (a fixture from a real run); bad arguments refused before
//! anything runs. No figure is asserted beyond being there: the machine's speed is not tested.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_flowpath")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A scratch directory, emptied now and removed when the guard goes.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("flowpath-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn report(args: &[&str], out: &Path) -> Output {
    Command::new(bin())
        .args(["bench", "report"])
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

/// The body rows of the table under `### {title}` in `section`: their cells after the row
/// header(s).
fn table<'a>(section: &'a str, title: &str) -> Vec<Vec<&'a str>> {
    let start = section
        .find(&format!("### {title}"))
        .unwrap_or_else(|| panic!("no table '{title}' in:\n{section}"));
    section[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect()
}

/// The part of report.md about `scenario`.
fn section<'a>(md: &'a str, scenario: &str) -> &'a str {
    let start = md
        .find(&format!("\n## {scenario}\n"))
        .unwrap_or_else(|| panic!("no section {scenario} in:\n{md}"));
    let rest = &md[start + 1..];
    match rest[3..].find("\n## ") {
        Some(end) => &rest[..end + 3],
        None => rest,
    }
}

fn number(cell: &str) -> f64 {
    cell.parse()
        .unwrap_or_else(|_| panic!("'{cell}' is not a number"))
}

/// A decoded RGB(A) PNG: width, height, bytes per pixel, pixels.
fn png(path: &Path) -> (u32, u32, usize, Vec<u8>) {
    let d = png::Decoder::new(std::fs::File::open(path).unwrap());
    let mut r = d.read_info().unwrap();
    let mut buf = vec![0; r.output_buffer_size()];
    let info = r.next_frame(&mut buf).unwrap();
    let bpp = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("{}: colour type {other:?}", path.display()),
    };
    buf.truncate(info.buffer_size());
    (info.width, info.height, bpp, buf)
}

/// Pixels of the plot area (inside the axes' margins) in a colour, not white, black or grey:
/// data drawn there.
fn coloured_pixels(path: &Path) -> usize {
    let (w, h, bpp, px) = png(path);
    let mut n = 0;
    // Plot area: right of the y labels, above the x labels, left of the legend column.
    for y in 60..h - 100 {
        for x in 100..w - 220 {
            let i = (y * w + x) as usize * bpp;
            let (r, g, b) = (px[i], px[i + 1], px[i + 2]);
            if r.abs_diff(g) > 20 || g.abs_diff(b) > 20 || r.abs_diff(b) > 20 {
                n += 1;
            }
        }
    }
    n
}

/// Pixels of exactly this colour anywhere.
fn pixels_of(path: &Path, rgb: (u8, u8, u8)) -> usize {
    let (_, _, bpp, px) = png(path);
    px.chunks(bpp).filter(|p| (p[0], p[1], p[2]) == rgb).count()
}

/// p2p and vxlan_decap at 64, 1518 and 9000 B (the tunnel's inner frame: 9050 B received)
/// with 8 and 1000 flows: every cell has figures in every table, in the JSON, and the plots
/// are PNGs of their size with data in them.
#[test]
fn report_of_a_small_matrix() {
    let d = Scratch::new("bench-report");
    let out = d.0.join("report");
    let o = report(
        &[
            "--scenarios",
            "p2p,vxlan_decap",
            "--frame-sizes",
            "64,1518,9000",
            "--flows",
            "8,1000",
            "--seconds",
            "0.2",
            "--runs",
            "1",
        ],
        &out,
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("(12 cells, 0 n/a)"), "{t}");

    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    for head in [
        "- Command: `flowpath bench report --scenarios p2p,vxlan_decap",
        "- Date: ",
        "TSC ",
    ] {
        assert!(md.contains(head), "{head} missing from:\n{md}");
    }
    assert!(md.contains("- Machine: "), "{md}");
    assert!(!md.contains("n/a"), "{md}");
    for s in ["p2p", "vxlan_decap"] {
        let sec = section(&md, s);
        for title in ["Throughput (Mpps)", "Cycles per packet\n"] {
            let rows = table(sec, title.trim_end());
            assert_eq!(rows.len(), 3, "{title}:\n{sec}");
            for (row, size) in rows.iter().zip(["64", "1518", "9000"]) {
                assert_eq!(row[0], size, "{sec}");
                assert_eq!(row.len(), 3, "{sec}");
                for c in &row[1..] {
                    assert!(number(c) > 0.0, "{title}: {c}\n{sec}");
                }
            }
        }
        for row in table(sec, "Throughput (Gbps, L2 / L1)") {
            for c in &row[1..] {
                let (l2, l1) = c.split_once(" / ").unwrap();
                assert!(number(l1) >= number(l2) && number(l2) > 0.0, "{c}\n{sec}");
            }
        }
        // Stages: rx extract emc megaflow upcall actions tx, other, total, passes.
        let stages = table(sec, "Cycles per packet by stage");
        assert_eq!(stages.len(), 6, "{sec}");
        for row in &stages {
            assert_eq!(row.len(), 12, "{sec}");
            row[2..]
                .iter()
                .for_each(|c| assert!(number(c) >= 0.0, "{c}"));
        }
        let summary = table(sec, "Summary");
        assert_eq!(summary.len(), 6, "{sec}");
        assert!(summary.iter().all(|r| r[12] == "1/1"), "{sec}");
        // p2p's megaflow is the simple match's; the decapsulation's are not.
        let simple = if s == "p2p" { 99.0..=100.0 } else { 0.0..=0.0 };
        assert!(
            summary.iter().all(|r| simple.contains(&number(r[9]))),
            "{sec}"
        );
    }
    // The tunnel's Gbps are of the encapsulated frames.
    assert!(
        md.contains("64 B → 114 B, 1518 B → 1568 B, 9000 B → 9050 B"),
        "{md}"
    );

    let js: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let cells = js["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 12);
    for s in ["p2p", "vxlan_decap"] {
        for z in [64, 1518, 9000] {
            for n in [8, 1000] {
                let c = cells
                    .iter()
                    .find(|c| c["scenario"] == s && c["frame_size"] == z && c["flows"] == n)
                    .unwrap_or_else(|| panic!("no cell {s} {z} {n}"));
                let run = &c["runs"][0];
                assert_eq!(run["forwarded_ok"], true, "{c}");
                assert_eq!(run["frame_size"], z, "{c}");
                assert_eq!(c["valid_runs"], 1, "{c}");
                assert!(c["median"]["mpps"].as_f64().unwrap() > 0.0, "{c}");
                assert_eq!(
                    c["median"]["stage_cycles_per_packet"]
                        .as_array()
                        .unwrap()
                        .len(),
                    7,
                    "{c}"
                );
            }
        }
    }
    assert_eq!(js["machine"]["tsc_hz"].as_u64().map(|h| h > 0), Some(true));

    for s in ["p2p", "vxlan_decap"] {
        let p = out.join(format!("{s}_throughput.png"));
        let (w, h, _, _) = png(&p);
        assert_eq!((w, h), (1024, 640), "{}", p.display());
        assert!(
            coloured_pixels(&p) > 500,
            "{}: nothing plotted",
            p.display()
        );
        let p = out.join(format!("{s}_cycles.png"));
        let (w, h, _, _) = png(&p);
        assert_eq!((w, h), (1280, 720), "{}", p.display());
        assert!(coloured_pixels(&p) > 5000, "{}: no bars", p.display());
    }
}

/// Bad matrices are refused, naming what is wrong, before anything runs (no output
/// directory is made).
#[test]
fn bad_arguments_are_refused() {
    let d = Scratch::new("bench-report-args");
    let out = d.0.join("never");
    let cases: &[(&[&str], &str)] = &[
        (
            &["--scenarios", "p2p,nosuch"],
            "--scenarios: unknown scenario 'nosuch'",
        ),
        (&["--scenarios", ""], "--scenarios: empty list"),
        (
            &["--frame-sizes", "63"],
            "--frame-sizes: 63 is outside 64..=9000",
        ),
        (
            &["--frame-sizes", "64,9001"],
            "--frame-sizes: 9001 is outside 64..=9000",
        ),
        (&["--frame-sizes", " , "], "--frame-sizes: empty list"),
        (
            &["--frame-sizes", "64B"],
            "--frame-sizes: '64B' is not a whole number",
        ),
        (&["--flows", "8,0"], "--flows: 0 flows"),
        (&["--flows", ""], "--flows: empty list"),
        (&["--runs", "0"], "--runs must be at least 1"),
        (&["--seconds", "0"], "--seconds must be a positive number"),
        (&["--compare-ovs", "--openflow"], "cannot be used with"),
        (
            &["--from-compare-ovs", "/nonexistent"],
            "/nonexistent/results.tsv not found",
        ),
    ];
    for (args, want) in cases {
        let o = report(args, &out);
        let t = text(&o);
        assert_eq!(o.status.code().map(|c| c != 0), Some(true), "{args:?}: {t}");
        assert!(t.contains(want), "{args:?}: wanted '{want}' in: {t}");
        assert!(!out.exists(), "{args:?} made {}", out.display());
    }
}

/// compare-ovs's results.tsv, as `scripts/compare-ovs -s "p2p vxlan_decap" -f "8 1000" -z 64
/// -n 1 -t 2` wrote it (TAB-separated), plus a cell (p2p, 100000 flows) made up here where
/// neither switch gave a valid run.
const RESULTS_TSV: &str = "\
scenario\tframe_bytes\tflows\tswitch\tkpps\tcycles_per_pkt\tpasses_per_pkt\tvalid_runs\truns\tswitching_cycles
p2p\t64\t8\tovs\t7768\t322\t1\t1\t1\t-
p2p\t64\t8\tflowpath\t12066\t203\t1\t1\t1\t-
p2p\t64\t1000\tovs\t7107\t352\t1\t1\t1\t-
p2p\t64\t1000\tflowpath\t12136\t202\t1\t1\t1\t-
vxlan_decap\t64\t8\tovs\t2432\t1028\t2\t1\t1\t-
vxlan_decap\t64\t8\tflowpath\t5098\t487\t2\t1\t1\t-
vxlan_decap\t64\t1000\tovs\t2212\t1130\t2\t1\t1\t-
vxlan_decap\t64\t1000\tflowpath\t4531\t548\t2\t1\t1\t-
p2p\t64\t100000\tovs\t-\t-\t-\t0\t1\t-
p2p\t64\t100000\tflowpath\t-\t-\t-\t0\t1\t-
";

/// The flowpath runs of that session (compare-ovs's raw/*.flowpath.json), p2p's.
const RAW_P2P_8: &str = r#"{"scenario":"p2p","traffic":"plain","flows":8,"frame_size":64,"pmds":1,"emc":true,"openflow":false,"sink_mpps":12.066205221645351,"seconds":2.0000720654665924,"mpps":12.066189222221853,"cycles_per_packet":203.29403012806233,"cycles_per_sink_packet":203.29376056632168,"passes_per_packet":1.0,"emc_hit_pct":100.0,"megaflow_hit_pct":0.0,"subtable_lookups_per_hit":0.0,"upcalls":0,"lost_upcalls":0,"deferred_upcalls":0,"rx_packets":24133248,"sink_packets":24133280,"samples_checked":256,"forwarded_ok":true,"stage_cycles_per_packet":[["rx",39.361961058867834],["extract",69.03888941927751],["emc",56.22435438445749],["megaflow",1.4640489336536882],["upcall",1.2209945383232295],["actions",28.63894565704542],["tx",1.644143133986772]],"stage_accounting_cycles_per_packet":7.360268125}"#;
const RAW_P2P_1000: &str = r#"{"scenario":"p2p","traffic":"plain","flows":1000,"frame_size":64,"pmds":1,"emc":true,"openflow":false,"sink_mpps":12.136215716867186,"seconds":2.0000620099611925,"mpps":12.136151718851444,"cycles_per_packet":202.41570076713867,"cycles_per_sink_packet":202.41463336659913,"passes_per_packet":1.0,"emc_hit_pct":100.0,"megaflow_hit_pct":0.0,"subtable_lookups_per_hit":0.0,"upcalls":0,"lost_upcalls":0,"deferred_upcalls":0,"rx_packets":24273056,"sink_packets":24273184,"samples_checked":256,"forwarded_ok":true,"stage_cycles_per_packet":[["rx",37.65195326043824],["extract",68.20364621578759],["emc",58.38456097163868],["megaflow",1.0407277105940018],["upcall",1.2844881995905253],["actions",28.309227400126296],["tx",1.6809189580413773]],"stage_accounting_cycles_per_packet":6.969108125}"#;

/// From compare-ovs's output: flowpath's figures are its runs of the session, OVS's its
/// medians, the ratio theirs; a cell without valid runs is n/a with the reason (flowpath's
/// error) in a footnote; the plots carry OVS.
#[test]
fn side_by_side_from_compare_ovs_output() {
    let d = Scratch::new("bench-report-cmp");
    let cmp = d.0.join("cmp");
    std::fs::create_dir_all(cmp.join("raw")).unwrap();
    std::fs::write(cmp.join("results.tsv"), RESULTS_TSV).unwrap();
    let raw = cmp.join("raw");
    std::fs::write(raw.join("p2p_8_64_r1.flowpath.json"), RAW_P2P_8).unwrap();
    std::fs::write(raw.join("p2p_1000_64_r1.flowpath.json"), RAW_P2P_1000).unwrap();
    std::fs::write(raw.join("p2p_100000_64_r1.flowpath.json"), "").unwrap();
    std::fs::write(
        raw.join("p2p_100000_64_r1.flowpath.json.err"),
        "flowpath: made-up failure for the test\n",
    )
    .unwrap();
    let out = d.0.join("report");
    let cmp_arg = cmp.to_str().unwrap();
    let o = report(
        &[
            "--scenarios",
            "p2p",
            "--frame-sizes",
            "64",
            "--flows",
            "8,1000,100000",
            "--from-compare-ovs",
            cmp_arg,
        ],
        &out,
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("(3 cells, 1 n/a)"), "{t}");

    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("from `scripts/compare-ovs`"), "{md}");
    let sec = section(&md, "p2p");
    let mpps = table(sec, "Throughput (Mpps)");
    assert_eq!(mpps[0][1..3], ["12.07", "12.14"], "{sec}");
    assert!(mpps[0][3].starts_with("n/a[^"), "{sec}");
    let side = table(sec, "Side by side with OVS-DPDK");
    assert_eq!(side.len(), 3, "{sec}");
    // frame, flows, OVS Mpps, flowpath Mpps, ratio, OVS cycles, flowpath cycles, passes...
    assert_eq!(
        side[0][..7],
        ["64", "8", "7.77", "12.07", "1.55", "322", "203"],
        "{sec}"
    );
    assert_eq!(
        side[1][..7],
        ["64", "1000", "7.11", "12.14", "1.71", "352", "202"],
        "{sec}"
    );
    assert!(side[2][2].starts_with("n/a[^"), "{sec}");
    assert_eq!(side[2][11], "0/1 / 0/1", "{sec}");
    assert!(
        md.contains("p2p 64 B, 100000 flows: flowpath: made-up failure for the test"),
        "{md}"
    );
    assert!(md.contains("OVS: 0 of 1 runs valid"), "{md}");

    let js: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(js["source"], "compare-ovs (an earlier run)");
    let c = &js["cells"][0];
    assert_eq!(c["compare_ovs"]["ovs"]["mpps"], 7.768);
    assert_eq!(c["compare_ovs"]["flowpath"]["cycles_per_packet"], 203.0);
    let ratio = c["compare_ovs"]["flowpath_over_ovs_pps"].as_f64().unwrap();
    assert!((ratio - 12.066 / 7.768).abs() < 1e-9, "{ratio}");
    let run_mpps = c["runs"][0]["mpps"].as_f64().unwrap();
    assert!((run_mpps - 12.066189).abs() < 1e-6, "{run_mpps}");
    assert_eq!(js["cells"][2]["median"], serde_json::Value::Null);

    // OVS's bars (dark grey) beside flowpath's, OVS's dashed line in the throughput plot.
    let p = out.join("p2p_cycles.png");
    assert!(
        pixels_of(&p, (90, 90, 90)) > 5000,
        "{}: no OVS bars",
        p.display()
    );
    let p = out.join("p2p_throughput.png");
    assert!(
        coloured_pixels(&p) > 500,
        "{}: nothing plotted",
        p.display()
    );
}
