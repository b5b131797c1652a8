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
//! The plots' text is drawn with DejaVu Sans built into the binary (`assets/`, Bitstream Vera
//! licence beside it), so that no system font is looked up.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use netdev::anchor_traffic;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use crate::bench;

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

/// Largest and smallest frame size the report takes (FCS included).
const FRAME_SIZES: std::ops::RangeInclusive<usize> = 64..=9000;

/// Preamble, start-of-frame delimiter and inter-frame gap: what a frame takes on the wire
/// beyond its bytes (L1 rate).
const L1_OVERHEAD: usize = 20;

/// The matrix to run, checked.
#[derive(Debug, PartialEq)]
struct Matrix {
    scenarios: Vec<String>,
    /// Ascending.
    frame_sizes: Vec<usize>,
    /// Ascending.
    flows: Vec<usize>,
}

/// The comma-separated items of `option`'s value, trimmed, each once in first-seen order.
fn list<'a>(option: &str, text: &'a str) -> anyhow::Result<Vec<&'a str>> {
    let mut v: Vec<&str> = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if !v.contains(&item) {
            v.push(item);
        }
    }
    if v.is_empty() {
        bail!("{option}: empty list");
    }
    Ok(v)
}

/// The numbers of `option`'s list, ascending.
fn numbers(option: &str, text: &str) -> anyhow::Result<Vec<usize>> {
    let mut v = list(option, text)?
        .into_iter()
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| anyhow::anyhow!("{option}: '{s}' is not a whole number"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

impl Matrix {
    fn parse(a: &ReportArgs) -> anyhow::Result<Matrix> {
        let scenarios: Vec<String> = list("--scenarios", &a.scenarios)?
            .into_iter()
            .map(str::to_owned)
            .collect();
        if let Some(s) = scenarios
            .iter()
            .find(|s| !bench::SCENARIOS.contains(&s.as_str()))
        {
            bail!(
                "--scenarios: unknown scenario '{s}' (flowpath bench runs: {})",
                bench::SCENARIOS.join(", ")
            );
        }
        let frame_sizes = numbers("--frame-sizes", &a.frame_sizes)?;
        if let Some(z) = frame_sizes.iter().find(|z| !FRAME_SIZES.contains(z)) {
            bail!(
                "--frame-sizes: {z} is outside {}..={} bytes",
                FRAME_SIZES.start(),
                FRAME_SIZES.end()
            );
        }
        let flows = numbers("--flows", &a.flows)?;
        if flows.first() == Some(&0) {
            bail!("--flows: 0 flows: a run needs at least one");
        }
        if let Some(n) = flows.iter().find(|&&n| n > anchor_traffic::MAX_FLOWS) {
            bail!("--flows: {n} is more than {}", anchor_traffic::MAX_FLOWS);
        }
        if !(a.seconds.is_finite() && a.seconds > 0.0) {
            bail!("--seconds must be a positive number of seconds");
        }
        if a.runs == 0 {
            bail!("--runs must be at least 1");
        }
        Ok(Matrix {
            scenarios,
            frame_sizes,
            flows,
        })
    }

    fn cells(&self) -> impl Iterator<Item = (&str, usize, usize)> + '_ {
        self.scenarios.iter().flat_map(move |s| {
            self.frame_sizes
                .iter()
                .flat_map(move |&z| self.flows.iter().map(move |&n| (s.as_str(), z, n)))
        })
    }
}

/// The figures of one run the report uses (a subset of `BenchResult`, read back from its JSON:
/// the same for the runs made here and those compare-ovs saved).
#[derive(Clone, Debug, serde::Deserialize)]
struct Figures {
    mpps: f64,
    sink_mpps: f64,
    seconds: f64,
    cycles_per_packet: f64,
    passes_per_packet: f64,
    /// Absent from reports written before the simple match.
    #[serde(default)]
    simple_hit_pct: f64,
    emc_hit_pct: f64,
    megaflow_hit_pct: f64,
    rx_packets: u64,
    sink_packets: u64,
    stage_cycles_per_packet: Vec<(String, f64)>,
    forwarded_ok: bool,
    failure: Option<String>,
}

/// One run of a cell: its JSON as written to report.json and, unless it failed to run, its
/// figures.
struct Run {
    json: serde_json::Value,
    outcome: Result<Figures, String>,
}

impl Run {
    fn from_json(json: serde_json::Value) -> Run {
        let outcome = serde_json::from_value::<Figures>(json.clone())
            .map_err(|e| format!("unreadable benchmark result: {e}"));
        Run { json, outcome }
    }

    fn error(e: String) -> Run {
        Run {
            json: serde_json::json!({ "error": e }),
            outcome: Err(e),
        }
    }

    /// The figures if the run counts: it ran and its forwarding check passed.
    fn valid(&self) -> Option<&Figures> {
        self.outcome.as_ref().ok().filter(|f| f.forwarded_ok)
    }

    /// Why the run does not count, if it does not.
    fn problem(&self) -> Option<String> {
        match &self.outcome {
            Err(e) => Some(e.clone()),
            Ok(f) if !f.forwarded_ok => Some(
                f.failure
                    .clone()
                    .unwrap_or_else(|| "the forwarding check failed".to_owned()),
            ),
            Ok(_) => None,
        }
    }
}

/// A cell's medians over its valid runs.
#[derive(Clone, Debug, serde::Serialize)]
struct Median {
    mpps: f64,
    sink_mpps: f64,
    /// Of the frames received (see `wire_frame_size`).
    gbps_l2: f64,
    /// `gbps_l2` with 20 B of preamble and inter-frame gap per frame.
    gbps_l1: f64,
    /// Received packets the sinks did not get, percent.
    drop_pct: f64,
    cycles_per_packet: f64,
    passes_per_packet: f64,
    simple_hit_pct: f64,
    emc_hit_pct: f64,
    megaflow_hit_pct: f64,
    /// Median of each stage on its own.
    stage_cycles_per_packet: Vec<(String, f64)>,
    /// `cycles_per_packet` beyond the stages' medians (polling, the loop itself), at least 0.
    other_cycles_per_packet: f64,
    /// Measurement window.
    seconds: f64,
}

/// One switch's figures in compare-ovs's `results.tsv`: medians over its valid runs.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
struct SwitchFigures {
    mpps: Option<f64>,
    cycles_per_packet: Option<f64>,
    passes_per_packet: Option<f64>,
    /// The scenario's cycles/pkt minus those of its I/O floor on the same frames and flows.
    switching_cycles: Option<f64>,
    valid_runs: usize,
    runs: usize,
}

/// A cell as compare-ovs measured it.
#[derive(Clone, Debug, serde::Serialize)]
struct SideBySide {
    ovs: SwitchFigures,
    flowpath: SwitchFigures,
    flowpath_over_ovs_pps: Option<f64>,
    /// Why OVS's runs that do not count failed, from compare-ovs's raw files.
    #[serde(skip_serializing_if = "Option::is_none")]
    ovs_failures: Option<String>,
}

/// One cell of the matrix.
#[derive(serde::Serialize)]
struct Cell {
    scenario: String,
    /// The plain frame's size or, for tunnel traffic, the inner frame's (FCS included).
    frame_size: usize,
    /// The size of the frames the switch receives, FCS included (tunnel traffic: encapsulated).
    wire_frame_size: Option<usize>,
    flows: usize,
    /// Every run: its `BenchResult`, or `{"error": ...}` when it could not run.
    runs: Vec<serde_json::Value>,
    valid_runs: usize,
    median: Option<Median>,
    /// Why the cell has no figures, or fewer valid runs than runs.
    note: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    compare_ovs: Option<SideBySide>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The size of the frames a scenario receives for `frame_size`, FCS included.
fn wire_frame_size(scenario: &str, frame_size: usize) -> Option<usize> {
    let &(_, kind) = bench::ANCHOR_SCENARIOS
        .iter()
        .chain(bench::OWN_SCENARIOS)
        .find(|(n, _)| *n == scenario)?;
    Some(anchor_traffic::frame(kind, 0, frame_size).len() + 4)
}

impl Cell {
    fn new(scenario: &str, frame_size: usize, flows: usize, runs: Vec<Run>) -> Cell {
        let valid: Vec<Figures> = runs.iter().filter_map(Run::valid).cloned().collect();
        let problems: Vec<(usize, String)> = runs
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.problem().map(|p| (i + 1, p)))
            .collect();
        let wire = wire_frame_size(scenario, frame_size);
        let note = if problems.is_empty() {
            None
        } else {
            let why = if problems.iter().all(|(_, p)| *p == problems[0].1) {
                problems[0].1.clone()
            } else {
                problems
                    .iter()
                    .map(|(i, p)| format!("run {i}: {p}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            Some(if valid.is_empty() {
                why
            } else {
                format!(
                    "{} of {} runs valid (the others: {why})",
                    valid.len(),
                    runs.len()
                )
            })
        };
        let median = (!valid.is_empty()).then(|| {
            let m = |f: fn(&Figures) -> f64| median(valid.iter().map(f).collect());
            let mpps = m(|f| f.mpps);
            let stages: Vec<(String, f64)> = valid[0]
                .stage_cycles_per_packet
                .iter()
                .enumerate()
                .map(|(i, (name, _))| {
                    let v = valid
                        .iter()
                        .filter_map(|f| f.stage_cycles_per_packet.get(i).map(|s| s.1))
                        .collect();
                    (name.clone(), median(v))
                })
                .collect();
            let cycles = m(|f| f.cycles_per_packet);
            let staged: f64 = stages.iter().map(|s| s.1).sum();
            let bits = |overhead: usize| {
                wire.map_or(f64::NAN, |w| mpps * ((w + overhead) * 8) as f64 / 1e3)
            };
            Median {
                mpps,
                sink_mpps: m(|f| f.sink_mpps),
                gbps_l2: bits(0),
                gbps_l1: bits(L1_OVERHEAD),
                drop_pct: m(|f| {
                    100.0 * (1.0 - f.sink_packets as f64 / f.rx_packets.max(1) as f64).max(0.0)
                }),
                cycles_per_packet: cycles,
                passes_per_packet: m(|f| f.passes_per_packet),
                simple_hit_pct: m(|f| f.simple_hit_pct),
                emc_hit_pct: m(|f| f.emc_hit_pct),
                megaflow_hit_pct: m(|f| f.megaflow_hit_pct),
                stage_cycles_per_packet: stages,
                other_cycles_per_packet: (cycles - staged).max(0.0),
                seconds: m(|f| f.seconds),
            }
        });
        Cell {
            scenario: scenario.to_owned(),
            frame_size,
            wire_frame_size: wire,
            flows,
            valid_runs: valid.len(),
            runs: runs.into_iter().map(|r| r.json).collect(),
            median,
            note,
            compare_ovs: None,
        }
    }
}

/// The machine the report was made on.
#[derive(serde::Serialize)]
struct Machine {
    cpu: String,
    logical_cpus: usize,
    available_cpus: usize,
    tsc_hz: u64,
    kernel: String,
}

fn machine() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .and_then(|r| r.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let logical_cpus = cpuinfo
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count();
    Machine {
        cpu,
        logical_cpus,
        available_cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        tsc_hz: datapath::tsc::hz(),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default(),
    }
}

/// `secs` since the Unix epoch as a UTC date and time (proleptic Gregorian calendar).
fn utc_date(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let t = secs % 86_400;
    // Days since 0000-03-01, counted in 400-year eras of 146097 days; March-based years put
    // the leap day last.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        t / 3600,
        t % 3600 / 60,
        t % 60
    )
}

/// The command line as a shell would take it back.
fn command_line() -> String {
    std::env::args()
        .enumerate()
        .map(|(i, a)| {
            let a = if i == 0 {
                Path::new(&a)
                    .file_name()
                    .map_or(a.clone(), |f| f.to_string_lossy().into_owned())
            } else {
                a
            };
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.,/=:+@".contains(c));
            if plain {
                a
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
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

/// compare-ovs's machine-readable medians, in its output directory.
const RESULTS_TSV: &str = "results.tsv";

/// `scripts/compare-ovs`: in the current directory or one above it, beside the executable or
/// above it, or in the source tree this binary was built from.
fn find_compare_ovs() -> anyhow::Result<PathBuf> {
    let mut bases: Vec<PathBuf> = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        bases.extend(cwd.ancestors().map(Path::to_path_buf));
    }
    if let Ok(exe) = std::env::current_exe() {
        bases.extend(exe.ancestors().skip(1).map(Path::to_path_buf));
    }
    bases.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."));
    bases
        .iter()
        .map(|b| b.join("scripts/compare-ovs"))
        .find(|p| p.is_file())
        .with_context(|| {
            "--compare-ovs: scripts/compare-ovs not found (looked in the current directory and \
             its parents, beside the executable and in the source tree it was built from); \
             run it from the flowpath repository"
        })
}

/// Runs compare-ovs on the matrix into `dir`: its per-run lines go to stderr as it prints
/// them, its Markdown table to `dir/table.md`.
fn run_compare_ovs(
    script: &Path,
    m: &Matrix,
    a: &ReportArgs,
    dir: &Path,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let join = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join(" ");
    let table = dir.join("table.md");
    writeln!(
        out,
        "running {} into {} ({} cells x {} runs; its progress on stderr, its table in {})",
        script.display(),
        dir.display(),
        m.cells().count(),
        a.runs,
        table.display()
    )?;
    out.flush()?;
    let status = std::process::Command::new(script)
        .arg("-s")
        .arg(m.scenarios.join(" "))
        .arg("-f")
        .arg(join(&m.flows))
        .arg("-z")
        .arg(join(&m.frame_sizes))
        .arg("-n")
        .arg(a.runs.to_string())
        .arg("-t")
        .arg(a.seconds.to_string())
        .arg("-o")
        .arg(dir)
        .stdout(std::fs::File::create(&table).with_context(|| format!("{}", table.display()))?)
        .status()
        .with_context(|| format!("{}", script.display()))?;
    if !status.success() {
        bail!(
            "{} failed ({status}); see its messages above",
            script.display()
        );
    }
    Ok(())
}

/// One line of compare-ovs's results.tsv.
#[derive(Debug, PartialEq)]
struct CompareRow {
    scenario: String,
    frame_size: usize,
    flows: usize,
    /// `ovs` or `flowpath`.
    switch: String,
    figures: SwitchFigures,
}

/// Parses compare-ovs's results.tsv (columns found by their header names).
fn parse_results_tsv(text: &str) -> anyhow::Result<Vec<CompareRow>> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines.next().context("empty file")?;
    let names: Vec<&str> = header.split('\t').collect();
    let col = |name: &str| {
        names
            .iter()
            .position(|n| *n == name)
            .with_context(|| format!("no column '{name}' in the header"))
    };
    let [
        scenario,
        frame,
        flows,
        switch,
        kpps,
        cycles,
        passes,
        valid,
        runs,
        switching,
    ] = [
        "scenario",
        "frame_bytes",
        "flows",
        "switch",
        "kpps",
        "cycles_per_pkt",
        "passes_per_pkt",
        "valid_runs",
        "runs",
        "switching_cycles",
    ]
    .map(col);
    let (scenario, frame, flows, switch) = (scenario?, frame?, flows?, switch?);
    let (kpps, cycles, passes, valid, runs, switching) =
        (kpps?, cycles?, passes?, valid?, runs?, switching?);
    lines
        .map(|(i, l)| {
            let f: Vec<&str> = l.split('\t').collect();
            let line = i + 1;
            let get = |c: usize| {
                f.get(c)
                    .copied()
                    .with_context(|| format!("line {line}: too few columns"))
            };
            let num = |c: usize| -> anyhow::Result<Option<f64>> {
                match get(c)? {
                    "-" => Ok(None),
                    s => s
                        .parse::<f64>()
                        .map(Some)
                        .with_context(|| format!("line {line}: '{s}' is not a number")),
                }
            };
            let count = |c: usize| -> anyhow::Result<usize> {
                let s = get(c)?;
                s.parse()
                    .with_context(|| format!("line {line}: '{s}' is not a count"))
            };
            Ok(CompareRow {
                scenario: get(scenario)?.to_owned(),
                frame_size: count(frame)?,
                flows: count(flows)?,
                switch: get(switch)?.to_owned(),
                figures: SwitchFigures {
                    mpps: num(kpps)?.map(|k| k / 1e3),
                    cycles_per_packet: num(cycles)?,
                    passes_per_packet: num(passes)?,
                    switching_cycles: num(switching)?,
                    valid_runs: count(valid)?,
                    runs: count(runs)?,
                },
            })
        })
        .collect()
}

/// The cells of the matrix from compare-ovs's output in `dir`: flowpath's runs from its
/// `raw/*.flowpath.json`, both switches' medians from results.tsv.
fn load_compare_ovs(m: &Matrix, dir: &Path) -> anyhow::Result<Vec<Cell>> {
    let tsv = dir.join(RESULTS_TSV);
    let text = std::fs::read_to_string(&tsv).with_context(|| {
        format!(
            "{} (written by scripts/compare-ovs of this version)",
            tsv.display()
        )
    })?;
    let rows = parse_results_tsv(&text).with_context(|| format!("{}", tsv.display()))?;
    let mut by_cell: HashMap<(&str, usize, usize, &str), &SwitchFigures> = HashMap::new();
    for r in &rows {
        by_cell.insert((&r.scenario, r.frame_size, r.flows, &r.switch), &r.figures);
    }
    Ok(m.cells()
        .map(|(s, z, n)| {
            let ovs = by_cell.get(&(s, z, n, "ovs"));
            let fp = by_cell.get(&(s, z, n, "flowpath"));
            let (Some(&ovs), Some(&fp)) = (ovs, fp) else {
                let mut c = Cell::new(s, z, n, Vec::new());
                c.note = Some(format!("not in {}", tsv.display()));
                return c;
            };
            let runs = (1..=fp.runs)
                .map(|r| {
                    let raw = dir.join(format!("raw/{s}_{n}_{z}_r{r}.flowpath.json"));
                    match std::fs::read_to_string(&raw) {
                        Ok(t) if !t.trim().is_empty() => match serde_json::from_str(&t) {
                            Ok(v) => Run::from_json(v),
                            Err(e) => Run::error(format!("{}: {e}", raw.display())),
                        },
                        _ => {
                            // flowpath bench printed no result: its error is beside it.
                            let err = std::fs::read_to_string(raw.with_extension("json.err"))
                                .unwrap_or_default();
                            Run::error(match err.lines().find(|l| !l.trim().is_empty()) {
                                Some(l) => l.trim().to_owned(),
                                None => format!("{}: no result", raw.display()),
                            })
                        }
                    }
                })
                .collect();
            let mut c = Cell::new(s, z, n, runs);
            if fp.runs == 0 {
                c.note = Some("compare-ovs ran no flowpath run for this cell".to_owned());
            }
            c.compare_ovs = Some(SideBySide {
                ovs: ovs.clone(),
                flowpath: fp.clone(),
                flowpath_over_ovs_pps: fp
                    .mpps
                    .zip(ovs.mpps)
                    .filter(|&(_, o)| o > 0.0)
                    .map(|(f, o)| f / o),
                ovs_failures: ovs_failures(dir, s, z, n, ovs.runs),
            });
            c
        })
        .collect())
}

/// Why OVS's runs of a cell failed, as compare-ovs's raw files say: its check
/// (`*.ovs.check.txt`, e.g. "source p0 rx 0, sinks p1 tx 0: FAILED") and the first error of
/// the setup (`*.ovs.setup.txt`, e.g. a port OVS could not add). None when every run passed.
fn ovs_failures(dir: &Path, s: &str, z: usize, n: usize, runs: usize) -> Option<String> {
    let why: Vec<String> = (1..=runs)
        .filter_map(|r| {
            let raw = dir.join(format!("raw/{s}_{n}_{z}_r{r}.ovs"));
            let read = |ext: &str| {
                std::fs::read_to_string(raw.with_extension(format!("ovs.{ext}")))
                    .unwrap_or_default()
            };
            let check = read("check.txt").trim().to_owned();
            if check.ends_with(": ok") {
                return None;
            }
            let setup = read("setup.txt");
            let error = setup
                .lines()
                .find(|l| l.to_ascii_lowercase().contains("error"))
                .map(str::trim);
            let mut w = format!("run {r}: ");
            w += match (check.is_empty(), error) {
                (false, Some(e)) => format!("{check} (setup: {e})"),
                (false, None) => check,
                (true, Some(e)) => format!("setup: {e}"),
                (true, None) => "failed (see compare-ovs's raw/ files)".to_owned(),
            }
            .as_str();
            Some(w)
        })
        .collect();
    (!why.is_empty()).then(|| why.join("; "))
}

// ---------------------------------------------------------------------------------------------
// report.md

/// Footnotes of report.md, numbered as they are first referred to.
#[derive(Default)]
struct Notes(Vec<String>);

impl Notes {
    /// The reference to `text`'s footnote (added if new).
    fn refer(&mut self, text: String) -> String {
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
fn shown(c: &Cell, notes: &mut Notes, f: impl Fn(&Median) -> String) -> String {
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

fn flows_label(n: f64) -> String {
    let n = n.round();
    if n >= 1e6 && n % 1e6 == 0.0 {
        format!("{}M", n / 1e6)
    } else if n >= 1e3 && n % 1e3 == 0.0 {
        format!("{}k", n / 1e3)
    } else {
        format!("{n}")
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |x| format!("{x:.digits$}"))
}

fn markdown(r: &Report, plots: &[PathBuf]) -> String {
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

// ---------------------------------------------------------------------------------------------
// Plots

/// DejaVu Sans (Bitstream Vera licence, `assets/DejaVuSans.LICENSE`).
static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// The font family plotters is given: the plots draw their text themselves ([`Pen`]), but
/// plotters must have a font for what it lays out (empty tick labels).
const SANS: &str = "sans-serif";

/// Plot area background, tick and grid colours.
const GRID: RGBColor = RGBColor(225, 225, 225);

/// Throughput plots' size in pixels.
pub const THROUGHPUT_PLOT: (u32, u32) = (1024, 640);
/// Cycle plots' height; their width is at least 1280, more for many bars.
pub const CYCLES_PLOT_HEIGHT: u32 = 720;
/// The legend column at the right of every plot.
const LEGEND_WIDTH: u32 = 200;

/// Cycle plots' width for `bars` bars.
fn cycles_plot_width(bars: usize) -> u32 {
    1280.max(34 * bars as u32 + 300)
}

/// Line colours (frame sizes), distinguishable from each other.
const LINES: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
    RGBColor(127, 127, 127),
];

/// Stage colours in pipeline order (rx, extract, emc, megaflow, upcall, actions, tx), then
/// `other`.
const STAGES: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(23, 190, 207),
    RGBColor(227, 119, 194),
    RGBColor(199, 199, 199),
];

/// OVS's bars.
const OVS: RGBColor = RGBColor(90, 90, 90);

type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;

fn pe(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("drawing a plot: {e}")
}

/// Draws text with the built-in font. (plotters' own ab_glyph text drops each glyph's left
/// side bearing, which spaces digits unevenly: "57 016".)
struct Pen {
    font: ab_glyph::FontRef<'static>,
}

impl Pen {
    fn new() -> anyhow::Result<Pen> {
        static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let ok = *REGISTERED
            .get_or_init(|| plotters::style::register_font(SANS, FontStyle::Normal, FONT).is_ok());
        let font = ab_glyph::FontRef::try_from_slice(FONT).ok().filter(|_| ok);
        Ok(Pen {
            font: font.context("the built-in font could not be loaded")?,
        })
    }

    /// Draws `s` at `at` (pixels of `area`), `size` pixels high, anchored by `h` and `v`;
    /// `up` turns it a quarter counter-clockwise (read bottom to top).
    #[allow(clippy::too_many_arguments)]
    fn text(
        &self,
        area: &Area,
        s: &str,
        at: (i32, i32),
        size: f32,
        (h, v): (HPos, VPos),
        up: bool,
        color: RGBColor,
    ) -> anyhow::Result<()> {
        use ab_glyph::{Font, ScaleFont};
        let font = self.font.as_scaled(size);
        let height = font.ascent() - font.descent();
        let mut glyphs = Vec::new();
        let mut caret = 0.0f32;
        let mut prev = None;
        for c in s.chars() {
            let id = font.glyph_id(c);
            if let Some(p) = prev {
                caret += font.kern(p, id);
            }
            glyphs.push(id.with_scale_and_position(size, ab_glyph::point(caret, font.ascent())));
            caret += font.h_advance(id);
            prev = Some(id);
        }
        // Whole pixels: a fractional shift rounded per pixel would skip a row or column
        // where the shifted coordinates cross zero.
        let dx = match h {
            HPos::Left => 0.0,
            HPos::Center => -caret / 2.0,
            HPos::Right => -caret,
        }
        .round() as i32;
        let dy = match v {
            VPos::Top => 0.0,
            VPos::Center => -height / 2.0,
            VPos::Bottom => -height,
        }
        .round() as i32;
        let mut pixels = Vec::new();
        for g in glyphs {
            if let Some(o) = self.font.outline_glyph(g) {
                let b = o.px_bounds();
                o.draw(|x, y, cover| {
                    let tx = b.min.x as i32 + x as i32 + dx;
                    let ty = b.min.y as i32 + y as i32 + dy;
                    pixels.push((tx, ty, cover));
                });
            }
        }
        for (tx, ty, cover) in pixels {
            let p = if up {
                (at.0 + ty, at.1 - tx)
            } else {
                (at.0 + tx, at.1 + ty)
            };
            area.draw_pixel(p, &color.mix(f64::from(cover.min(1.0))))
                .map_err(pe)?;
        }
        Ok(())
    }
}

/// Ticks from 0 to `top` at the round step (1, 2 or 5 times a power of ten) nearest to a
/// sixth of it.
fn ticks(top: f64) -> Vec<f64> {
    let raw = (top / 6.0).max(f64::MIN_POSITIVE);
    let p = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .min_by(|a, b| (a / raw).ln().abs().total_cmp(&(b / raw).ln().abs()))
        .unwrap_or(p);
    (0..)
        .map(|i| i as f64 * step)
        .take_while(|&t| t <= top * (1.0 + 1e-9))
        .collect()
}

/// A tick value as a label: no more decimals than the step needs.
fn tick_label(t: f64, step: f64) -> String {
    let d = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    format!("{t:.d$}")
}

fn plot_all(r: &Report, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let pen = Pen::new()?;
    let mut files = Vec::new();
    for s in &r.scenarios {
        let p = dir.join(format!("{s}_throughput.png"));
        throughput_plot(&pen, r, s, &p).with_context(|| format!("{}", p.display()))?;
        files.push(p);
        let p = dir.join(format!("{s}_cycles.png"));
        cycles_plot(&pen, r, s, &p).with_context(|| format!("{}", p.display()))?;
        files.push(p);
    }
    Ok(files)
}

/// A legend entry's sample, drawn in the area with its left end at the given point.
type Swatch = Box<dyn Fn(&Area, i32, i32) -> anyhow::Result<()>>;

/// Marks on a line sample.
#[derive(Clone, Copy)]
enum Mark {
    None,
    Dot,
    Triangle,
}

/// A line sample, dashed or solid, with a mark in its middle.
fn line_swatch(color: RGBColor, dashed: bool, mark: Mark) -> Swatch {
    Box::new(move |area, x, y| {
        let dashes: &[(i32, i32)] = if dashed {
            &[(0, 8), (13, 21), (26, 30)]
        } else {
            &[(0, 30)]
        };
        for &(a, b) in dashes {
            area.draw(&PathElement::new(
                vec![(x + a, y), (x + b, y)],
                color.stroke_width(3),
            ))
            .map_err(pe)?;
        }
        match mark {
            Mark::None => Ok(()),
            Mark::Dot => area
                .draw(&Circle::new((x + 15, y), 4, color.filled()))
                .map_err(pe),
            Mark::Triangle => area
                .draw(&TriangleMarker::new((x + 15, y), 6, color.filled()))
                .map_err(pe),
        }
    })
}

/// A filled box sample.
fn box_swatch(color: RGBColor) -> Swatch {
    Box::new(move |area, x, y| {
        area.draw(&Rectangle::new(
            [(x, y - 6), (x + 30, y + 6)],
            color.filled(),
        ))
        .map_err(pe)
    })
}

/// Draws `entries` as a column in `area` (the legend column), under `title`.
fn legend(pen: &Pen, area: &Area, title: &str, entries: &[(Swatch, String)]) -> anyhow::Result<()> {
    let left = (HPos::Left, VPos::Center);
    let mut y = 80;
    pen.text(area, title, (10, y), 16.0, left, false, BLACK)?;
    y += 30;
    for (swatch, label) in entries {
        swatch(area, 10, y)?;
        pen.text(area, label, (50, y), 15.0, left, false, BLACK)?;
        y += 26;
    }
    Ok(())
}

/// The labels of a chart drawn on `root`: title above `plot` (the plotting area's corners in
/// pixels), axis descriptions below and left of it.
fn titles(
    pen: &Pen,
    root: &Area,
    plot: ((i32, i32), (i32, i32)),
    title: &str,
    x_desc: &str,
    y_desc: &str,
) -> anyhow::Result<()> {
    let ((x0, y0), (x1, y1)) = plot;
    let center = (HPos::Center, VPos::Center);
    pen.text(root, title, ((x0 + x1) / 2, 24), 21.0, center, false, BLACK)?;
    pen.text(
        root,
        x_desc,
        ((x0 + x1) / 2, y1 + 62),
        16.0,
        center,
        false,
        BLACK,
    )?;
    pen.text(
        root,
        y_desc,
        (x0 - 66, (y0 + y1) / 2),
        16.0,
        center,
        true,
        BLACK,
    )?;
    Ok(())
}

/// Grid lines across the plotting area `plot` at the pixel rows `ys` and columns `xs`, with
/// tick marks, and the two axes.
fn grid(root: &Area, plot: ((i32, i32), (i32, i32)), ys: &[i32], xs: &[i32]) -> anyhow::Result<()> {
    let ((x0, y0), (x1, y1)) = plot;
    let line = |a: (i32, i32), b: (i32, i32), c: RGBColor| {
        root.draw(&PathElement::new(vec![a, b], c.stroke_width(1)))
            .map_err(pe)
    };
    for &y in ys {
        line((x0, y), (x1, y), GRID)?;
        line((x0 - 5, y), (x0, y), BLACK)?;
    }
    for &x in xs {
        line((x, y0), (x, y1), GRID)?;
        line((x, y1), (x, y1 + 5), BLACK)?;
    }
    line((x0, y0), (x0, y1), BLACK)?;
    line((x0, y1), (x1, y1), BLACK)
}

/// The y axis' tick labels, left of the plotting area at each tick's height.
fn y_tick_labels(
    pen: &Pen,
    root: &Area,
    ticks: &[f64],
    at: impl Fn(f64) -> (i32, i32),
) -> anyhow::Result<()> {
    let step = if ticks.len() > 1 {
        ticks[1] - ticks[0]
    } else {
        1.0
    };
    for &t in ticks {
        let (x, y) = at(t);
        let l = tick_label(t, step);
        pen.text(
            root,
            &l,
            (x - 8, y),
            14.0,
            (HPos::Right, VPos::Center),
            false,
            BLACK,
        )?;
    }
    Ok(())
}

/// "n runs" for titles.
fn runs_text(cells: &[&Cell]) -> String {
    match cells.iter().map(|c| c.runs.len()).max().unwrap_or(0) {
        1 => "1 run".to_owned(),
        n => format!("median of {n} runs"),
    }
}

/// Throughput (Mpps) against parallel flows, a line per frame size (and with compare-ovs a
/// dashed one for OVS).
fn throughput_plot(pen: &Pen, r: &Report, s: &str, path: &Path) -> anyhow::Result<()> {
    let (w, h) = THROUGHPUT_PLOT;
    let root = BitMapBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(pe)?;
    let (area, side) = root.split_horizontally(w - LEGEND_WIDTH);
    let cells: Vec<&Cell> = r.cells.iter().filter(|c| c.scenario == s).collect();
    let ovs = |c: &Cell| c.compare_ovs.as_ref().and_then(|x| x.ovs.mpps);
    let compare = cells.iter().any(|c| c.compare_ovs.is_some());
    let top = cells
        .iter()
        .flat_map(|c| [c.median.as_ref().map(|m| m.mpps), ovs(c)])
        .flatten()
        .fold(0.0, f64::max);
    let top = if top > 0.0 { top * 1.12 } else { 1.0 };
    let y_ticks = ticks(top);
    let flows: Vec<f64> = r.flows.iter().map(|&n| n as f64).collect();
    let (lo, hi) = (flows[0] / 2.0, flows[flows.len() - 1] * 2.0);
    let mut chart = ChartBuilder::on(&area)
        .margin_top(50)
        .margin_right(20)
        .x_label_area_size(80)
        .y_label_area_size(90)
        .build_cartesian_2d((lo..hi).log_scale(), 0f64..top)
        .map_err(pe)?;
    let plot = (
        chart.backend_coord(&(lo, top)),
        chart.backend_coord(&(hi, 0.0)),
    );
    let ys: Vec<i32> = y_ticks
        .iter()
        .map(|&t| chart.backend_coord(&(lo, t)).1)
        .collect();
    let xs: Vec<i32> = flows
        .iter()
        .map(|&f| chart.backend_coord(&(f, 0.0)).0)
        .collect();
    grid(&root, plot, &ys, &xs)?;
    titles(
        pen,
        &root,
        plot,
        &format!("{s}: throughput vs parallel flows ({})", runs_text(&cells)),
        "parallel flows (log scale)",
        "Mpps",
    )?;
    y_tick_labels(pen, &root, &y_ticks, |t| chart.backend_coord(&(lo, t)))?;
    for &f in &flows {
        let (x, y) = chart.backend_coord(&(f, 0.0));
        pen.text(
            &root,
            &flows_label(f),
            (x, y + 10),
            14.0,
            (HPos::Center, VPos::Top),
            false,
            BLACK,
        )?;
    }
    let mut entries: Vec<(Swatch, String)> = Vec::new();
    for (i, &z) in r.frame_sizes.iter().enumerate() {
        let color = LINES[i % LINES.len()];
        let row: Vec<&&Cell> = cells.iter().filter(|c| c.frame_size == z).collect();
        let pts: Vec<(f64, f64)> = row
            .iter()
            .filter_map(|c| c.median.as_ref().map(|m| (c.flows as f64, m.mpps)))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(pe)?;
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))
            .map_err(pe)?;
        if compare {
            let o: Vec<(f64, f64)> = row
                .iter()
                .filter_map(|c| ovs(c).map(|v| (c.flows as f64, v)))
                .collect();
            chart
                .draw_series(DashedLineSeries::new(
                    o.clone(),
                    8,
                    5,
                    color.stroke_width(2),
                ))
                .map_err(pe)?;
            chart
                .draw_series(o.iter().map(|&p| TriangleMarker::new(p, 6, color.filled())))
                .map_err(pe)?;
        }
        let na = row.iter().filter(|c| c.median.is_none()).count();
        let ovs_na = row.iter().filter(|c| compare && ovs(c).is_none()).count();
        let label = match (na, ovs_na) {
            (0, 0) => format!("{z} B"),
            (na, 0) => format!("{z} B ({na} n/a)"),
            (0, o) => format!("{z} B (OVS {o} n/a)"),
            (na, o) => format!("{z} B ({na} n/a, OVS {o})"),
        };
        entries.push((line_swatch(color, false, Mark::None), label));
    }
    if compare {
        entries.push((line_swatch(BLACK, false, Mark::Dot), "flowpath".to_owned()));
        entries.push((
            line_swatch(BLACK, true, Mark::Triangle),
            "OVS-DPDK".to_owned(),
        ));
    }
    legend(pen, &side, "frame size", &entries)?;
    root.present().map_err(pe)?;
    Ok(())
}

/// Cycles per packet by stage, a stacked bar per cell (grouped by frame size), with
/// compare-ovs OVS's total beside each.
fn cycles_plot(pen: &Pen, r: &Report, s: &str, path: &Path) -> anyhow::Result<()> {
    let cells: Vec<&Cell> = r.cells.iter().filter(|c| c.scenario == s).collect();
    let compare = cells.iter().any(|c| c.compare_ovs.is_some());
    let ovs = |c: &Cell| c.compare_ovs.as_ref().and_then(|x| x.ovs.cycles_per_packet);
    let n = cells.len();
    let w = cycles_plot_width(n * if compare { 2 } else { 1 });
    let h = CYCLES_PLOT_HEIGHT;
    let root = BitMapBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(pe)?;
    let (area, side) = root.split_horizontally(w - LEGEND_WIDTH);
    let top = cells
        .iter()
        .flat_map(|c| {
            [
                c.median
                    .as_ref()
                    .map(|m| m.cycles_per_packet.max(stacked(m))),
                ovs(c),
            ]
        })
        .flatten()
        .fold(0.0, f64::max);
    let top = if top > 0.0 { top * 1.1 } else { 1.0 };
    let y_ticks = ticks(top);
    let right = n.max(1) as f64;
    let mut chart = ChartBuilder::on(&area)
        .margin_top(50)
        .margin_right(20)
        .x_label_area_size(80)
        .y_label_area_size(90)
        .build_cartesian_2d(0f64..right, 0f64..top)
        .map_err(pe)?;
    let plot = (
        chart.backend_coord(&(0.0, top)),
        chart.backend_coord(&(right, 0.0)),
    );
    let ys: Vec<i32> = y_ticks
        .iter()
        .map(|&t| chart.backend_coord(&(0.0, t)).1)
        .collect();
    grid(&root, plot, &ys, &[])?;
    titles(
        pen,
        &root,
        plot,
        &format!("{s}: cycles per packet by stage ({})", runs_text(&cells)),
        "parallel flows, grouped by frame size",
        "TSC cycles per packet",
    )?;
    y_tick_labels(pen, &root, &y_ticks, |t| chart.backend_coord(&(0.0, t)))?;
    let above = (HPos::Center, VPos::Bottom);
    // A figure above a bar (or n/a on the axis), `x` its centre.
    let value = |x: f64, v: Option<f64>| -> anyhow::Result<()> {
        let (px, py) = chart.backend_coord(&(x, v.unwrap_or(0.0)));
        let t = v.map_or("n/a".to_owned(), |v| format!("{v:.0}"));
        pen.text(&root, &t, (px, py - 3), 12.0, above, false, BLACK)
    };
    for (i, c) in cells.iter().enumerate() {
        let x = i as f64;
        let (a, b) = if compare {
            (x + 0.08, x + 0.48)
        } else {
            (x + 0.2, x + 0.8)
        };
        if let Some(m) = &c.median {
            let mut y = 0.0;
            let parts = m
                .stage_cycles_per_packet
                .iter()
                .map(|s| s.1)
                .chain([m.other_cycles_per_packet]);
            for (k, v) in parts.enumerate() {
                let color = STAGES[k.min(STAGES.len() - 1)];
                chart
                    .plotting_area()
                    .draw(&Rectangle::new([(a, y), (b, y + v)], color.filled()))
                    .map_err(pe)?;
                y += v;
            }
            chart
                .plotting_area()
                .draw(&Rectangle::new([(a, 0.0), (b, y)], BLACK.stroke_width(1)))
                .map_err(pe)?;
        }
        value(
            (a + b) / 2.0,
            c.median.as_ref().map(|m| m.cycles_per_packet),
        )?;
        if compare {
            let (a, b) = (x + 0.52, x + 0.92);
            if let Some(v) = ovs(c) {
                chart
                    .plotting_area()
                    .draw(&Rectangle::new([(a, 0.0), (b, v)], OVS.filled()))
                    .map_err(pe)?;
            }
            value((a + b) / 2.0, ovs(c))?;
        }
    }
    // The x labels: flows under each cell, the frame size under each group, lines between
    // groups.
    let under = (HPos::Center, VPos::Top);
    let mut i = 0;
    while i < n {
        let z = cells[i].frame_size;
        let j = i + cells[i..].iter().take_while(|c| c.frame_size == z).count();
        for (k, c) in cells[i..j].iter().enumerate() {
            let (px, py) = chart.backend_coord(&((i + k) as f64 + 0.5, 0.0));
            pen.text(
                &root,
                &flows_label(c.flows as f64),
                (px, py + 8),
                14.0,
                under,
                false,
                BLACK,
            )?;
        }
        let (px, py) = chart.backend_coord(&((i + j) as f64 / 2.0, 0.0));
        pen.text(
            &root,
            &format!("{z} B"),
            (px, py + 30),
            15.0,
            under,
            false,
            BLACK,
        )?;
        if i > 0 {
            chart
                .draw_series(LineSeries::new(
                    [(i as f64, 0.0), (i as f64, top)],
                    RGBColor(150, 150, 150).stroke_width(1),
                ))
                .map_err(pe)?;
        }
        i = j;
    }
    // Legend, top of the stack first.
    let names: Vec<String> = cells
        .iter()
        .find_map(|c| c.median.as_ref())
        .map(|m| {
            m.stage_cycles_per_packet
                .iter()
                .map(|s| s.0.clone())
                .collect()
        })
        .unwrap_or_else(|| {
            datapath::pmd::Stage::ALL
                .iter()
                .map(|s| s.name().to_owned())
                .collect()
        });
    let mut entries: Vec<(Swatch, String)> = Vec::new();
    let labels: Vec<String> = names.into_iter().chain(["other".to_owned()]).collect();
    for (k, l) in labels.iter().enumerate().rev() {
        entries.push((box_swatch(STAGES[k.min(STAGES.len() - 1)]), l.clone()));
    }
    if compare {
        entries.push((box_swatch(OVS), "OVS-DPDK total".to_owned()));
    }
    let title = if compare { "flowpath stage" } else { "stage" };
    legend(pen, &side, title, &entries)?;
    root.present().map_err(pe)?;
    Ok(())
}

/// The height of a cell's stacked bar.
fn stacked(m: &Median) -> f64 {
    m.stage_cycles_per_packet.iter().map(|s| s.1).sum::<f64>() + m.other_cycles_per_packet
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(scenarios: &str, sizes: &str, flows: &str) -> ReportArgs {
        ReportArgs {
            scenarios: scenarios.into(),
            frame_sizes: sizes.into(),
            flows: flows.into(),
            seconds: 1.0,
            runs: 1,
            out: "x".into(),
            compare_ovs: false,
            from_compare_ovs: None,
            openflow: false,
        }
    }

    fn err(a: &ReportArgs) -> String {
        format!("{:#}", Matrix::parse(a).unwrap_err())
    }

    #[test]
    fn matrix_is_checked_sorted_and_deduplicated() {
        let m = Matrix::parse(&args(" p2p,vxlan_decap,p2p", "1518, 64,64", "1000,8")).unwrap();
        assert_eq!(m.scenarios, ["p2p", "vxlan_decap"]);
        assert_eq!(m.frame_sizes, [64, 1518]);
        assert_eq!(m.flows, [8, 1000]);
        assert_eq!(m.cells().count(), 8);
        assert!(err(&args("nosuch", "64", "8")).contains("unknown scenario 'nosuch'"));
        assert!(err(&args("", "64", "8")).contains("--scenarios: empty list"));
        assert!(err(&args("p2p", ",", "8")).contains("--frame-sizes: empty list"));
        assert!(err(&args("p2p", "63", "8")).contains("63 is outside 64..=9000"));
        assert!(err(&args("p2p", "9001", "8")).contains("9001 is outside"));
        assert!(err(&args("p2p", "64B", "8")).contains("'64B' is not a whole number"));
        assert!(err(&args("p2p", "64", "8,0")).contains("0 flows"));
        let mut a = args("p2p", "64", "8");
        a.runs = 0;
        assert!(err(&a).contains("--runs"));
        a.runs = 1;
        a.seconds = f64::NAN;
        assert!(err(&a).contains("--seconds"));
    }

    #[test]
    fn dates_are_utc() {
        assert_eq!(utc_date(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc_date(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc_date(1_700_000_000), "2023-11-14 22:13:20 UTC");
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(Vec::new()).is_nan());
    }

    /// compare-ovs's results.tsv (lines of a real run): columns found by name, "-" as no
    /// figure, Kpps as Mpps; malformed lines named.
    #[test]
    fn compare_ovs_results() {
        let tsv = "scenario\tframe_bytes\tflows\tswitch\tkpps\tcycles_per_pkt\t\
                   passes_per_pkt\tvalid_runs\truns\tswitching_cycles\n\
                   p2p\t64\t8\tovs\t7768\t322\t1\t1\t1\t-\n\
                   vxlan_decap\t64\t1000\tflowpath\t4531\t548\t2\t1\t1\t-\n\
                   io_floor_vxlan\t64\t8\tflowpath\t-\t-\t-\t0\t0\t-\n\
                   vxlan_decap\t64\t8\tovs\t2212.5\t1130\t2\t2\t3\t905\n";
        let rows = parse_results_tsv(tsv).unwrap();
        assert_eq!(rows.len(), 4);
        assert_eq!(
            rows[0],
            CompareRow {
                scenario: "p2p".into(),
                frame_size: 64,
                flows: 8,
                switch: "ovs".into(),
                figures: SwitchFigures {
                    mpps: Some(7.768),
                    cycles_per_packet: Some(322.0),
                    passes_per_packet: Some(1.0),
                    switching_cycles: None,
                    valid_runs: 1,
                    runs: 1,
                },
            }
        );
        assert_eq!(rows[1].switch, "flowpath");
        assert_eq!(rows[2].figures.mpps, None);
        assert_eq!(rows[2].figures.runs, 0);
        assert_eq!(rows[3].figures.mpps, Some(2.2125));
        assert_eq!(rows[3].figures.switching_cycles, Some(905.0));
        assert_eq!((rows[3].figures.valid_runs, rows[3].figures.runs), (2, 3));
        // Columns in another order, one more column: found by name.
        let moved = "flows\tscenario\tframe_bytes\tswitch\tnew\tkpps\tcycles_per_pkt\t\
                     passes_per_pkt\tvalid_runs\truns\tswitching_cycles\n\
                     8\tp2p\t64\tovs\tx\t7768\t322\t1\t1\t1\t-\n";
        assert_eq!(parse_results_tsv(moved).unwrap()[0], rows[0]);
        let e = parse_results_tsv("scenario\tflows\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no column 'frame_bytes'"), "{e}");
        let bad = tsv.replace("7768", "77x8");
        let e = format!("{:#}", parse_results_tsv(&bad).unwrap_err());
        assert!(e.contains("line 2: '77x8' is not a number"), "{e}");
        assert!(parse_results_tsv("").is_err());
    }

    fn run_json(mpps: f64, ok: bool) -> serde_json::Value {
        serde_json::json!({
            "mpps": mpps, "sink_mpps": mpps, "seconds": 1.0, "cycles_per_packet": 2500.0 / mpps,
            "passes_per_packet": 1.0, "emc_hit_pct": 100.0, "megaflow_hit_pct": 0.0,
            "rx_packets": 1000, "sink_packets": if ok { 1000 } else { 0 },
            "stage_cycles_per_packet": [["rx", 10.0], ["tx", 20.0]],
            "forwarded_ok": ok,
            "failure": if ok { None } else { Some("the sink received nothing") },
        })
    }

    /// A cell's medians are over its valid runs; runs that failed or could not run are
    /// named in its note, and a cell without a valid run has no figures.
    #[test]
    fn cells_keep_valid_runs_and_say_why_others_do_not() {
        let runs = vec![
            Run::from_json(run_json(10.0, true)),
            Run::from_json(run_json(99.0, false)),
            Run::from_json(run_json(20.0, true)),
            Run::error("--frame-size must be between 60 and 9018 bytes".into()),
        ];
        let c = Cell::new("p2p", 64, 8, runs);
        let m = c.median.as_ref().unwrap();
        assert_eq!((m.mpps, m.cycles_per_packet), (15.0, 187.5));
        assert_eq!(m.stage_cycles_per_packet[1], ("tx".to_owned(), 20.0));
        assert_eq!(m.other_cycles_per_packet, 187.5 - 30.0);
        assert!((m.gbps_l2 - 15.0 * 64.0 * 8.0 / 1e3).abs() < 1e-9);
        assert!((m.gbps_l1 - 15.0 * 84.0 * 8.0 / 1e3).abs() < 1e-9);
        assert_eq!((c.valid_runs, c.runs.len()), (2, 4));
        let note = c.note.as_deref().unwrap();
        assert!(note.starts_with("2 of 4 runs valid"), "{note}");
        assert!(note.contains("run 2: the sink received nothing"), "{note}");
        assert!(note.contains("run 4: --frame-size must be"), "{note}");

        let c = Cell::new("p2p", 64, 8, vec![Run::error("no such thing".into())]);
        assert!(c.median.is_none());
        assert_eq!(c.note.as_deref(), Some("no such thing"));
        let mut notes = Notes::default();
        assert_eq!(shown(&c, &mut notes, |m| format!("{}", m.mpps)), "n/a[^1]");
        assert_eq!(notes.0, ["p2p 64 B, 8 flows: no such thing"]);
    }

    /// Tunnel traffic is received encapsulated: VXLAN adds 50 bytes to the inner frame.
    #[test]
    fn wire_frames() {
        assert_eq!(wire_frame_size("p2p", 64), Some(64));
        assert_eq!(wire_frame_size("vxlan_decap", 64), Some(114));
        assert_eq!(wire_frame_size("vxlan_decap", 9000), Some(9050));
    }
}
