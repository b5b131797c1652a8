//! `--compare-ovs` and `--from-compare-ovs`: the matrix run by `scripts/compare-ovs`, OVS-DPDK's
//! runs and flowpath's interleaved on the same machine, and the script's output read back into
//! the report's cells: flowpath's runs from `raw/*.flowpath.json`, both switches' medians from
//! `results.tsv`, and why OVS's failed runs failed from its check and setup files.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use super::ReportArgs;
use super::cell::{Cell, Run};
use super::matrix::Matrix;

/// One switch's figures in compare-ovs's `results.tsv`: medians over its valid runs.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub(super) struct SwitchFigures {
    pub(super) mpps: Option<f64>,
    pub(super) cycles_per_packet: Option<f64>,
    pub(super) passes_per_packet: Option<f64>,
    /// The scenario's cycles/pkt minus those of its I/O floor on the same frames and flows.
    pub(super) switching_cycles: Option<f64>,
    pub(super) valid_runs: usize,
    pub(super) runs: usize,
}

/// A cell as compare-ovs measured it.
#[derive(Clone, Debug, serde::Serialize)]
pub(super) struct SideBySide {
    pub(super) ovs: SwitchFigures,
    pub(super) flowpath: SwitchFigures,
    pub(super) flowpath_over_ovs_pps: Option<f64>,
    /// Why OVS's runs that do not count failed, from compare-ovs's raw files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) ovs_failures: Option<String>,
}

/// compare-ovs's machine-readable medians, in its output directory.
pub(super) const RESULTS_TSV: &str = "results.tsv";

/// `scripts/compare-ovs`: in the current directory or one above it, beside the executable or
/// above it, or in the source tree this binary was built from.
pub(super) fn find_compare_ovs() -> anyhow::Result<PathBuf> {
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
pub(super) fn run_compare_ovs(
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
pub(super) fn load_compare_ovs(m: &Matrix, dir: &Path) -> anyhow::Result<Vec<Cell>> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
