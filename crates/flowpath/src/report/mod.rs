//! `flowpath bench report`: the in-process benchmark ([`crate::bench`]) over a matrix of
//! scenarios × frame sizes × parallel flows, each cell run several times and reduced to the
//! median, written to a directory as
//! - `report.md`: Markdown tables in the layout of the seeds' measurements: throughput by frame
//!   size (rows) and parallel L4 flows (columns) as in seed 000, the TRex summary of seed 002
//!   (Mpps, Gbps at L2 and L1, drop rate, CPU cost per frame size) and the OVS-DPDK anchor's
//!   cycles and passes per packet, with the cycles split by pipeline stage;
//! - `report.json`: every run's `BenchResult`, the medians, and OVS's figures when compared;
//! - PNG plots per scenario: throughput against flows (one line per frame size), and cycles per
//!   packet by stage as stacked bars per cell.
//!
//! With `--compare-ovs` the matrix is run by `scripts/compare-ovs` instead, OVS-DPDK and
//! flowpath interleaved in one session, and every flowpath figure of the report comes from the
//! flowpath runs of that session (its `raw/*.flowpath.json`), set beside OVS's medians (its
//! `results.tsv`). A cell that could not be measured is `n/a` with the reason in a footnote;
//! the rest of the matrix still runs.
//!
//! # Parts
//!
//! * `matrix`: the options read into the matrix of cells to run;
//! * `cell`: a cell's runs and their medians;
//! * `compare_ovs`: running `scripts/compare-ovs` and reading its output back into cells;
//! * `provenance`: the machine, date and command line a report records;
//! * `markdown`: report.md;
//! * `plot`: the PNG plots, whose text is drawn with DejaVu Sans built into the binary
//!   (`assets/`, Bitstream Vera licence beside it), so that no system font is looked up.
//!
//! This module holds the options, the report as report.json has it, and `run`, which runs
//! the matrix in process (or has compare-ovs run it) and writes the three outputs.

mod cell;
mod compare_ovs;
mod markdown;
mod matrix;
mod plot;
mod provenance;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};

use crate::bench;
use cell::{Cell, Run};
use compare_ovs::{RESULTS_TSV, find_compare_ovs, load_compare_ovs, run_compare_ovs};
use markdown::markdown;
use matrix::Matrix;
use plot::plot_all;
use provenance::{Machine, command_line, machine, utc_date};

/// `flowpath bench report`'s options.
#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// Scenarios, comma-separated, as `flowpath bench` names them.
    #[arg(long, default_value = "p2p,vxlan_decap")]
    pub scenarios: String,
    /// Frame sizes in bytes, comma-separated, 64 to 9000, FCS included (for tunnel traffic the
    /// inner frame's, as `flowpath bench --frame-size`).
    #[arg(long, default_value = "64,128,256,512,1024,1518,9000")]
    pub frame_sizes: String,
    /// Numbers of parallel flows, comma-separated.
    #[arg(long, default_value = "8,1000,100000")]
    pub flows: String,
    /// Measurement window of each run in seconds (after a warm-up).
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Runs per cell (all cells once, then all again, ...); the report shows the median.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Directory to write report.md, report.json and the plots to.
    #[arg(long, default_value = "bench-report")]
    pub out: PathBuf,
    /// Run the matrix with scripts/compare-ovs instead: OVS-DPDK and flowpath interleaved in
    /// one session, side by side (needs root; installs OVS-DPDK; per cell and run about 10 s
    /// plus twice --seconds). Its output goes to OUT/compare-ovs.
    #[arg(long)]
    pub compare_ovs: bool,
    /// Make the side-by-side report from what scripts/compare-ovs already wrote to DIR (its
    /// -o), without running anything.
    #[arg(long, value_name = "DIR", conflicts_with = "compare_ovs")]
    pub from_compare_ovs: Option<PathBuf>,
    /// Program the switch with the scenarios' OpenFlow rules instead of preinstalled datapath
    /// flows (as `flowpath bench --openflow`).
    #[arg(long, conflicts_with_all = ["compare_ovs", "from_compare_ovs"])]
    pub openflow: bool,
}

/// The whole report, as report.json has it.
#[derive(serde::Serialize)]
struct Report {
    command: String,
    date: String,
    machine: Machine,
    /// `release`, or `debug` (whose figures are not performance figures).
    build: &'static str,
    /// `in-process`, `compare-ovs`, or `compare-ovs (an earlier run)` (`--from-compare-ovs`:
    /// the machine and date are then this report's, not necessarily the measurements').
    source: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    compare_ovs_dir: Option<PathBuf>,
    requested_seconds: f64,
    requested_runs: usize,
    openflow: bool,
    scenarios: Vec<String>,
    frame_sizes: Vec<usize>,
    flows: Vec<usize>,
    cells: Vec<Cell>,
}

/// `flowpath bench report`.
pub fn run(a: &ReportArgs, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let m = Matrix::parse(a)?;
    // compare-ovs's output directory, when the figures come from there.
    let compare_dir = if let Some(dir) = &a.from_compare_ovs {
        if !dir.join(RESULTS_TSV).is_file() {
            bail!(
                "--from-compare-ovs: {} not found (a directory scripts/compare-ovs wrote with -o)",
                dir.join(RESULTS_TSV).display()
            );
        }
        Some(dir.clone())
    } else if a.compare_ovs {
        let script = find_compare_ovs()?;
        if !rustix::process::geteuid().is_root() {
            bail!(
                "--compare-ovs needs root: {} sets up hugepages, a network namespace and the \
                 OVS-DPDK daemons (and installs OVS-DPDK if missing)",
                script.display()
            );
        }
        std::fs::create_dir_all(&a.out).with_context(|| format!("{}", a.out.display()))?;
        let dir = std::path::absolute(a.out.join("compare-ovs"))?;
        std::fs::create_dir_all(&dir).with_context(|| format!("{}", dir.display()))?;
        run_compare_ovs(&script, &m, a, &dir, out)?;
        Some(dir)
    } else {
        None
    };
    std::fs::create_dir_all(&a.out).with_context(|| format!("{}", a.out.display()))?;
    let cells = match &compare_dir {
        None => run_in_process(&m, a, out)?,
        Some(dir) => load_compare_ovs(&m, dir)?,
    };
    let report = Report {
        command: command_line(),
        date: utc_date(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        ),
        machine: machine(),
        build: if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        source: match (&compare_dir, a.from_compare_ovs.is_some()) {
            (None, _) => "in-process",
            (Some(_), false) => "compare-ovs",
            (Some(_), true) => "compare-ovs (an earlier run)",
        },
        compare_ovs_dir: compare_dir,
        requested_seconds: a.seconds,
        requested_runs: a.runs,
        openflow: a.openflow,
        scenarios: m.scenarios.clone(),
        frame_sizes: m.frame_sizes.clone(),
        flows: m.flows.clone(),
        cells,
    };
    let plots = plot_all(&report, &a.out)?;
    let md = a.out.join("report.md");
    std::fs::write(&md, markdown(&report, &plots)).with_context(|| format!("{}", md.display()))?;
    let js = a.out.join("report.json");
    std::fs::write(&js, serde_json::to_string_pretty(&report)? + "\n")
        .with_context(|| format!("{}", js.display()))?;
    let na = report.cells.iter().filter(|c| c.median.is_none()).count();
    writeln!(
        out,
        "wrote {}, {} and {} plots to {} ({} cells, {na} n/a)",
        md.file_name().unwrap_or_default().to_string_lossy(),
        js.file_name().unwrap_or_default().to_string_lossy(),
        plots.len(),
        a.out.display(),
        report.cells.len()
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Runs the matrix here, repetition as the outer loop (every cell once, then every cell
/// again, ...) so that drift of the machine hits all cells alike.
fn run_in_process(m: &Matrix, a: &ReportArgs, out: &mut impl Write) -> anyhow::Result<Vec<Cell>> {
    let cells: Vec<(&str, usize, usize)> = m.cells().collect();
    let mut runs: Vec<Vec<Run>> = cells.iter().map(|_| Vec::new()).collect();
    // Warm-up as bench::run takes it, plus setting up.
    let per_run = a.seconds + (a.seconds / 3.0).clamp(0.5, 2.0) + 0.3;
    writeln!(
        out,
        "{} cells x {} runs, about {:.0} s",
        cells.len(),
        a.runs,
        per_run * (cells.len() * a.runs) as f64
    )?;
    out.flush()?;
    let total = cells.len() * a.runs;
    let mut k = 0;
    for r in 1..=a.runs {
        for (i, &(scenario, frame_size, flows)) in cells.iter().enumerate() {
            k += 1;
            // A run that could not start (not a measurement: e.g. a frame size the scenario
            // cannot take) would fail alike again.
            if runs[i].iter().any(|r| r.outcome.is_err()) {
                continue;
            }
            let o = bench::BenchOpts {
                scenario: scenario.to_owned(),
                pcap: None,
                flows,
                frame_size,
                seconds: a.seconds,
                pmds: 1,
                emc: true,
                json: false,
                openflow: a.openflow,
                storm: None,
                io: bench::BenchIo::Replay,
            };
            let run =
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| bench::run(&o))) {
                    Ok(Ok(res)) => Run::from_json(serde_json::to_value(&res)?),
                    Ok(Err(e)) => Run::error(format!("{e:#}")),
                    Err(p) => Run::error(format!(
                        "the benchmark panicked: {}",
                        p.downcast_ref::<String>()
                            .map(String::as_str)
                            .or_else(|| p.downcast_ref::<&str>().copied())
                            .unwrap_or("(no message)")
                    )),
                };
            let what = match (&run.outcome, run.problem()) {
                (Ok(f), None) => {
                    format!("{:.2} Mpps, {:.0} cycles/pkt", f.mpps, f.cycles_per_packet)
                }
                (_, p) => format!("n/a: {}", p.unwrap_or_default()),
            };
            writeln!(
                out,
                "[{k}/{total}] run {r}/{} {scenario} {frame_size} B {flows} flows: {what}",
                a.runs
            )?;
            out.flush()?;
            runs[i].push(run);
        }
    }
    Ok(cells
        .into_iter()
        .zip(runs)
        .map(|((s, z, n), runs)| Cell::new(s, z, n, runs))
        .collect())
}
