//! A cell of the matrix (one scenario, frame size and number of flows): its runs, each kept
//! as the JSON `flowpath bench` wrote and read back into the figures the report uses, and the
//! medians over the runs that count (those whose forwarding check passed), with a note saying
//! why the others do not. Rates in Gbps are of the frames as the switch receives them
//! (encapsulated, for tunnel traffic), at L2 and with L1's preamble and gap.

use netdev::anchor_traffic;

use super::compare_ovs::SideBySide;
use crate::bench;

/// Preamble, start-of-frame delimiter and inter-frame gap: what a frame takes on the wire
/// beyond its bytes (L1 rate).
pub(super) const L1_OVERHEAD: usize = 20;

/// The figures of one run the report uses (a subset of `BenchResult`, read back from its JSON:
/// the same for the runs made here and those compare-ovs saved).
#[derive(Clone, Debug, serde::Deserialize)]
pub(super) struct Figures {
    pub(super) mpps: f64,
    pub(super) sink_mpps: f64,
    pub(super) seconds: f64,
    pub(super) cycles_per_packet: f64,
    pub(super) passes_per_packet: f64,
    /// Absent from reports written before the simple match.
    #[serde(default)]
    pub(super) simple_hit_pct: f64,
    pub(super) emc_hit_pct: f64,
    pub(super) megaflow_hit_pct: f64,
    pub(super) rx_packets: u64,
    pub(super) sink_packets: u64,
    pub(super) stage_cycles_per_packet: Vec<(String, f64)>,
    pub(super) forwarded_ok: bool,
    pub(super) failure: Option<String>,
}

/// One run of a cell: its JSON as written to report.json and, unless it failed to run, its
/// figures.
pub(super) struct Run {
    pub(super) json: serde_json::Value,
    pub(super) outcome: Result<Figures, String>,
}

impl Run {
    pub(super) fn from_json(json: serde_json::Value) -> Run {
        let outcome = serde_json::from_value::<Figures>(json.clone())
            .map_err(|e| format!("unreadable benchmark result: {e}"));
        Run { json, outcome }
    }

    pub(super) fn error(e: String) -> Run {
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
    pub(super) fn problem(&self) -> Option<String> {
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
pub(super) struct Median {
    pub(super) mpps: f64,
    pub(super) sink_mpps: f64,
    /// Of the frames received (see `wire_frame_size`).
    pub(super) gbps_l2: f64,
    /// `gbps_l2` with 20 B of preamble and inter-frame gap per frame.
    pub(super) gbps_l1: f64,
    /// Received packets the sinks did not get, percent.
    pub(super) drop_pct: f64,
    pub(super) cycles_per_packet: f64,
    pub(super) passes_per_packet: f64,
    pub(super) simple_hit_pct: f64,
    pub(super) emc_hit_pct: f64,
    pub(super) megaflow_hit_pct: f64,
    /// Median of each stage on its own.
    pub(super) stage_cycles_per_packet: Vec<(String, f64)>,
    /// `cycles_per_packet` beyond the stages' medians (polling, the loop itself), at least 0.
    pub(super) other_cycles_per_packet: f64,
    /// Measurement window.
    pub(super) seconds: f64,
}

/// One cell of the matrix.
#[derive(serde::Serialize)]
pub(super) struct Cell {
    pub(super) scenario: String,
    /// The plain frame's size or, for tunnel traffic, the inner frame's (FCS included).
    pub(super) frame_size: usize,
    /// The size of the frames the switch receives, FCS included (tunnel traffic: encapsulated).
    pub(super) wire_frame_size: Option<usize>,
    pub(super) flows: usize,
    /// Every run: its `BenchResult`, or `{"error": ...}` when it could not run.
    pub(super) runs: Vec<serde_json::Value>,
    pub(super) valid_runs: usize,
    pub(super) median: Option<Median>,
    /// Why the cell has no figures, or fewer valid runs than runs.
    pub(super) note: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) compare_ovs: Option<SideBySide>,
}

pub(super) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The size of the frames a scenario receives for `frame_size`, FCS included.
pub(super) fn wire_frame_size(scenario: &str, frame_size: usize) -> Option<usize> {
    let &(_, kind) = bench::ANCHOR_SCENARIOS
        .iter()
        .chain(bench::OWN_SCENARIOS)
        .find(|(n, _)| *n == scenario)?;
    Some(anchor_traffic::frame(kind, 0, frame_size).len() + 4)
}

impl Cell {
    pub(super) fn new(scenario: &str, frame_size: usize, flows: usize, runs: Vec<Run>) -> Cell {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::markdown::{Notes, shown};

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(Vec::new()).is_nan());
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
