//! report.md: the report as Markdown tables, per scenario throughput (Mpps, Gbps at L2 and
//! L1) and cycles per packet by frame size and parallel flows, cycles split by pipeline stage,
//! the TRex-style summary per cell and, with compare-ovs, both switches side by side. A figure
//! that could not be measured, or whose runs did not all count, gets a footnote saying why.

use std::fmt::Write as _;
use std::path::PathBuf;

use super::Report;
use super::cell::{Cell, L1_OVERHEAD, Median, median, wire_frame_size};
use super::compare_ovs::SwitchFigures;

/// Footnotes of report.md, numbered as they are first referred to.
#[derive(Default)]
pub(super) struct Notes(pub(super) Vec<String>);

impl Notes {
    /// The reference to `text`'s footnote (added if new).
    pub(super) fn refer(&mut self, text: String) -> String {
        let i = match self.0.iter().position(|t| *t == text) {
            Some(i) => i,
            None => {
                self.0.push(text);
                self.0.len() - 1
            }
        };
        format!("[^{}]", i + 1)
    }
}

/// The display of a cell's figure: the number, `n/a` with a footnote when it has none, and a
/// footnote after the number when some of its runs did not count.
pub(super) fn shown(c: &Cell, notes: &mut Notes, f: impl Fn(&Median) -> String) -> String {
    let what = || {
        format!(
            "{} {} B, {} flows: {}",
            c.scenario,
            c.frame_size,
            c.flows,
            c.note.as_deref().unwrap_or("no valid run")
        )
    };
    match &c.median {
        None => format!("n/a{}", notes.refer(what())),
        Some(m) if c.note.is_some() => format!("{}{}", f(m), notes.refer(what())),
        Some(m) => f(m),
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |x| format!("{x:.digits$}"))
}

pub(super) fn markdown(r: &Report, plots: &[PathBuf]) -> String {
    let mut o = String::new();
    let mut notes = Notes::default();
    let w = &mut o;
    let _ = writeln!(w, "# flowpath benchmark report\n");
    let _ = writeln!(w, "- Command: `{}`", r.command);
    let _ = writeln!(w, "- Date: {}", r.date);
    let _ = writeln!(
        w,
        "- Machine: {}, {} logical CPUs ({} available to this process), TSC {:.3} GHz, Linux {}",
        r.machine.cpu,
        r.machine.logical_cpus,
        r.machine.available_cpus,
        r.machine.tsc_hz as f64 / 1e9,
        r.machine.kernel
    );
    let _ = writeln!(
        w,
        "- Build: flowpath {} ({}){}",
        env!("CARGO_PKG_VERSION"),
        r.build,
        if r.build == "debug" {
            ": an unoptimised build, whose figures say nothing about performance"
        } else {
            ""
        }
    );
    let window = median(
        r.cells
            .iter()
            .filter_map(|c| c.median.as_ref().map(|m| m.seconds))
            .collect(),
    );
    match &r.compare_ovs_dir {
        None => {
            let _ = writeln!(
                w,
                "- Figures: `flowpath bench` in-process (replay source and sink in memory, one \
                 PMD thread, EMC on{}), {} of {} s each after a warm-up; medians over the \
                 valid runs (a run is valid when the sink received what the source sent, \
                 sampled frames checked byte for byte).",
                if r.openflow {
                    ", OpenFlow rules translated on misses"
                } else {
                    ", datapath flows preinstalled"
                },
                match r.requested_runs {
                    1 => "one run per cell".to_owned(),
                    n => format!("{n} runs per cell (every cell once, then again, ...)"),
                },
                r.requested_seconds
            );
        }
        Some(dir) => {
            let _ = writeln!(
                w,
                "- Figures: from `scripts/compare-ovs` ({}): OVS-DPDK (Debian's) and flowpath \
                 measured in one session, runs interleaved, {} s windows. Every flowpath figure \
                 in this report is from compare-ovs's flowpath runs (`raw/*.flowpath.json`, \
                 medians over the valid runs taken here); none from a separate run. The side-by-side \
                 tables show both switches' medians as compare-ovs computed them \
                 (`results.tsv`; its own table is `table.md` when run by this command).{}",
                dir.display(),
                if window.is_nan() {
                    "-".to_owned()
                } else {
                    format!("{window:.1}")
                },
                if r.source == "compare-ovs" {
                    ""
                } else {
                    " Made from an earlier run: the date and machine above are this report's."
                }
            );
        }
    }
    let _ = writeln!(
        w,
        "- Frame size: the plain frame's or, for tunnel traffic, the inner frame's, FCS \
         included. Cycles are TSC cycles of PMD busy time per packet received."
    );
    let _ = writeln!(
        w,
        "- Plots: {}\n",
        plots
            .iter()
            .map(|p| format!("`{}`", p.file_name().unwrap_or_default().to_string_lossy()))
            .collect::<Vec<_>>()
            .join(", ")
    );

    for s in &r.scenarios {
        let cells: Vec<&Cell> = r.cells.iter().filter(|c| c.scenario == *s).collect();
        let cell = |z: usize, n: usize| {
            cells
                .iter()
                .find(|c| c.frame_size == z && c.flows == n)
                .copied()
        };
        let _ = writeln!(w, "## {s}\n");
        let flow_cols: String = r.flows.iter().map(|n| format!(" {n} flows |")).collect();
        let align: String = r.flows.iter().map(|_| "---:|").collect();
        let matrix =
            |w: &mut String, notes: &mut Notes, title: &str, f: &dyn Fn(&Median) -> String| {
                let _ = writeln!(w, "### {title}\n");
                let _ = writeln!(w, "| frame size (B) |{flow_cols}");
                let _ = writeln!(w, "|---:|{align}");
                for &z in &r.frame_sizes {
                    let _ = write!(w, "| {z} |");
                    for &n in &r.flows {
                        let v = cell(z, n).map_or("-".to_owned(), |c| shown(c, notes, f));
                        let _ = write!(w, " {v} |");
                    }
                    let _ = writeln!(w);
                }
                let _ = writeln!(w);
            };
        matrix(
            w,
            &mut notes,
            "Throughput (Mpps) by frame size and parallel flows",
            &|m| format!("{:.2}", m.mpps),
        );
        let wire: Vec<String> = r
            .frame_sizes
            .iter()
            .filter_map(|&z| {
                wire_frame_size(s, z)
                    .filter(|&x| x != z)
                    .map(|x| format!("{z} B → {x} B"))
            })
            .collect();
        let _ = writeln!(
            w,
            "L2: the frames as received{}; L1: with {L1_OVERHEAD} B of preamble and \
             inter-frame gap per frame.\n",
            if wire.is_empty() {
                String::new()
            } else {
                format!(" (encapsulated: {})", wire.join(", "))
            }
        );
        matrix(w, &mut notes, "Throughput (Gbps, L2 / L1)", &|m| {
            format!("{:.2} / {:.2}", m.gbps_l2, m.gbps_l1)
        });
        matrix(w, &mut notes, "Cycles per packet", &|m| {
            format!("{:.0}", m.cycles_per_packet)
        });

        // Per-stage split, one row per cell.
        let stages: Vec<String> = cells
            .iter()
            .find_map(|c| c.median.as_ref())
            .map(|m| {
                m.stage_cycles_per_packet
                    .iter()
                    .map(|s| s.0.clone())
                    .collect()
            })
            .unwrap_or_default();
        let _ = writeln!(w, "### Cycles per packet by stage\n");
        let _ = writeln!(
            w,
            "Medians of each stage; `other` is the total's median beyond them (polling, the \
             loop).\n"
        );
        let _ = writeln!(
            w,
            "| frame size (B) | flows |{} other | total | passes/pkt |",
            stages.iter().map(|s| format!(" {s} |")).collect::<String>()
        );
        let _ = writeln!(
            w,
            "|---:|---:|{}---:|---:|---:|",
            stages.iter().map(|_| "---:|").collect::<String>()
        );
        for c in &cells {
            let _ = write!(w, "| {} | {} |", c.frame_size, c.flows);
            match &c.median {
                Some(m) => {
                    for (_, v) in &m.stage_cycles_per_packet {
                        let _ = write!(w, " {v:.1} |");
                    }
                    let _ = write!(
                        w,
                        " {:.1} | {} | {:.2} |",
                        m.other_cycles_per_packet,
                        shown(c, &mut notes, |m| format!("{:.0}", m.cycles_per_packet)),
                        m.passes_per_packet
                    );
                }
                None => {
                    let na = shown(c, &mut notes, |_| String::new());
                    for _ in 0..stages.len() + 1 {
                        let _ = write!(w, " - |");
                    }
                    let _ = write!(w, " {na} | - |");
                }
            }
            let _ = writeln!(w);
        }
        let _ = writeln!(w);

        // Seed 002's TRex summary.
        let _ = writeln!(w, "### Summary\n");
        let _ = writeln!(
            w,
            "| frame size (B) | flows | Mpps | sink Mpps | Gbps L2 | Gbps L1 | drop % | \
             cycles/pkt | passes/pkt | simple match % | EMC hit % | megaflow hit % | valid runs |"
        );
        let _ = writeln!(
            w,
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for c in &cells {
            let mpps = shown(c, &mut notes, |m| format!("{:.2}", m.mpps));
            let _ = write!(w, "| {} | {} | {mpps} |", c.frame_size, c.flows);
            match &c.median {
                Some(m) => {
                    let _ = write!(
                        w,
                        " {:.2} | {:.2} | {:.2} | {:.2} | {:.0} | {:.2} | {:.1} | {:.1} | {:.1} |",
                        m.sink_mpps,
                        m.gbps_l2,
                        m.gbps_l1,
                        m.drop_pct,
                        m.cycles_per_packet,
                        m.passes_per_packet,
                        m.simple_hit_pct,
                        m.emc_hit_pct,
                        m.megaflow_hit_pct
                    );
                }
                None => {
                    let _ = write!(w, "{}", " - |".repeat(9));
                }
            }
            let _ = writeln!(w, " {}/{} |", c.valid_runs, c.runs.len());
        }
        let _ = writeln!(w);

        if cells.iter().any(|c| c.compare_ovs.is_some()) {
            let _ = writeln!(w, "### Side by side with OVS-DPDK (scripts/compare-ovs)\n");
            let _ = writeln!(
                w,
                "Both switches as compare-ovs measured them in one session, runs interleaved; \
                 switching cycles = cycles/pkt minus the I/O floor's (p2p or io_floor_*) on the \
                 same frames and flows, `-` when the floor was not run.\n"
            );
            let _ = writeln!(
                w,
                "| frame size (B) | flows | OVS Mpps | flowpath Mpps | flowpath/OVS | OVS \
                 cycles/pkt | flowpath cycles/pkt | OVS passes/pkt | flowpath passes/pkt | OVS \
                 switching cycles | flowpath switching cycles | valid runs OVS / flowpath |"
            );
            let _ = writeln!(
                w,
                "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            );
            for c in &cells {
                let Some(x) = &c.compare_ovs else {
                    let why = notes.refer(format!(
                        "{} {} B, {} flows: {}",
                        c.scenario,
                        c.frame_size,
                        c.flows,
                        c.note.as_deref().unwrap_or("not measured by compare-ovs")
                    ));
                    let _ = writeln!(
                        w,
                        "| {} | {} | n/a{why} |{}",
                        c.frame_size,
                        c.flows,
                        " - |".repeat(9)
                    );
                    continue;
                };
                let mut side = |f: &SwitchFigures, name: &str, v: Option<f64>, d: usize| {
                    if f.mpps.is_some() {
                        opt(v, d)
                    } else {
                        let why = match (name, &x.ovs_failures) {
                            ("OVS", Some(w)) => format!(": {w}"),
                            _ => String::new(),
                        };
                        format!(
                            "n/a{}",
                            notes.refer(format!(
                                "{} {} B, {} flows: {name}: {} of {} runs valid{why}",
                                c.scenario, c.frame_size, c.flows, f.valid_runs, f.runs,
                            ))
                        )
                    }
                };
                let (o, f) = (&x.ovs, &x.flowpath);
                let row = [
                    side(o, "OVS", o.mpps, 2),
                    side(f, "flowpath", f.mpps, 2),
                    opt(x.flowpath_over_ovs_pps, 2),
                    side(o, "OVS", o.cycles_per_packet, 0),
                    side(f, "flowpath", f.cycles_per_packet, 0),
                    side(o, "OVS", o.passes_per_packet, 2),
                    side(f, "flowpath", f.passes_per_packet, 2),
                    opt(o.switching_cycles, 0),
                    opt(f.switching_cycles, 0),
                    format!("{}/{} / {}/{}", o.valid_runs, o.runs, f.valid_runs, f.runs),
                ];
                let _ = writeln!(
                    w,
                    "| {} | {} | {} |",
                    c.frame_size,
                    c.flows,
                    row.join(" | ")
                );
            }
            let _ = writeln!(w);
        }
    }
    if !notes.0.is_empty() {
        let _ = writeln!(w, "## Notes\n");
        for (i, n) in notes.0.iter().enumerate() {
            let _ = writeln!(w, "[^{}]: {}", i + 1, n.replace('\n', " "));
        }
    }
    o
}
