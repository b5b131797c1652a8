//! The matrix a report runs: scenarios × frame sizes × parallel flows, read from
//! `flowpath bench report`'s comma-separated options and checked before anything runs
//! (known scenarios, frame sizes in range, at least one flow, sorted and each once).

use anyhow::bail;
use netdev::anchor_traffic;

use super::ReportArgs;
use crate::bench;

/// Largest and smallest frame size the report takes (FCS included).
const FRAME_SIZES: std::ops::RangeInclusive<usize> = 64..=9000;

/// The matrix to run, checked.
#[derive(Debug, PartialEq)]
pub(super) struct Matrix {
    pub(super) scenarios: Vec<String>,
    /// Ascending.
    pub(super) frame_sizes: Vec<usize>,
    /// Ascending.
    pub(super) flows: Vec<usize>,
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
    pub(super) fn parse(a: &ReportArgs) -> anyhow::Result<Matrix> {
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

    pub(super) fn cells(&self) -> impl Iterator<Item = (&str, usize, usize)> + '_ {
        self.scenarios.iter().flat_map(move |s| {
            self.frame_sizes
                .iter()
                .flat_map(move |&z| self.flows.iter().map(move |&n| (s.as_str(), z, n)))
        })
    }
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
}
