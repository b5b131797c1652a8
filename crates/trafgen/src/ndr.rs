//! The no-drop rate search of RFC 2544 (§26.1): the highest offered rate at which nothing is
//! lost, by binary search over trials of a fixed duration; with a loss tolerance above zero,
//! the partial drop rate (PDR) of later methodologies (RFC 9004's relaxed criteria, as CSIT
//! and TRex use them).
//!
//! The rates searched are shares of the streams' own rates (`scale` 0..=1 of what the stream
//! file says, all streams together), so a file whose rates are the line rate searches the
//! whole range. The first trial is at the full rate; if it passes, that is the answer. Then
//! the search halves the interval between the highest passing and lowest failing rate until
//! it is narrower than the resolution. A trial in which the generator could not send at the
//! rate it was asked (its port refused, or its thread was too slow) is reported as such: its
//! offered rate is the rate actually sent.
//!
//! The generator is a thread on a shared machine: when it is away longer than the device's
//! buffering allows, it catches up in bursts that the device drops through no fault of its
//! own. A failing trial in which the generator paused longer than `pause_limit` is therefore
//! run again, up to `repeats` times; every attempt is reported, and the last one decides.

use serde::Serialize;
use std::time::Duration;

use crate::engine::{EngineError, Progress, RunOpts, RunReport, Session};
use crate::stream::Stream;

/// How the search goes.
#[derive(Clone, Debug)]
pub struct NdrOpts {
    /// Each trial's sending time.
    pub trial: Duration,
    /// Receiving time after each trial.
    pub drain: Duration,
    /// Stop when the interval is narrower than this share of the full rate (0.005: 0.5 %).
    pub resolution: f64,
    /// Share of the sent packets a passing trial may lose: 0 for NDR, e.g. 0.005 for a PDR at
    /// 0.5 %.
    pub loss_tolerance: f64,
    /// A failing trial whose generator paused longer than this is run again.
    pub pause_limit: Duration,
    /// How many times a trial is run again at most.
    pub repeats: u32,
}

impl Default for NdrOpts {
    fn default() -> Self {
        NdrOpts {
            trial: Duration::from_secs(2),
            drain: Duration::from_millis(200),
            resolution: 0.005,
            loss_tolerance: 0.0,
            pause_limit: Duration::from_millis(1),
            repeats: 2,
        }
    }
}

/// One trial.
#[derive(Clone, Debug, Serialize)]
pub struct Trial {
    pub scale: f64,
    /// Packets per second actually sent, all streams.
    pub tx_pps: f64,
    pub rx_pps: f64,
    pub tx_l1_bps: f64,
    pub tx_packets: u64,
    pub lost: u64,
    pub loss_pct: f64,
    pub pass: bool,
    /// The generator sent less than 99 % of the rate it was asked for.
    pub generator_limited: bool,
    /// The generator's longest pause while sending, nanoseconds.
    pub longest_pause_ns: u64,
    /// The trial failed while the generator paused longer than the limit: it is run again
    /// (unless it was the last attempt).
    pub disturbed: bool,
}

/// The answer.
#[derive(Clone, Debug, Serialize)]
pub struct NdrResult {
    /// The highest passing trial's share of the full rate (0: none passed).
    pub scale: f64,
    /// Its rates, all streams (0 when none passed).
    pub pps: f64,
    pub l1_bps: f64,
    pub loss_tolerance_pct: f64,
    pub trials: Vec<Trial>,
    /// The passing trial's full report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at_rate: Option<RunReport>,
}

/// What the streams would send per second at `scale` (for the generator-limited check);
/// `None` when one of them is `max`.
fn asked_pps(streams: &[Stream], scale: f64) -> Option<f64> {
    use crate::stream::Rate;
    let mut sum = 0.0;
    for s in streams {
        match s.rate {
            Rate::Max => return None,
            Rate::Pps(p) => sum += p * scale,
            // Bits: the sent rate is checked in bits below.
            Rate::L1Bps(_) => return None,
        }
    }
    Some(sum)
}

fn asked_bps(streams: &[Stream], scale: f64) -> Option<f64> {
    use crate::stream::Rate;
    let mut sum = 0.0;
    for s in streams {
        match s.rate {
            Rate::L1Bps(b) => sum += b * scale,
            _ => return None,
        }
    }
    Some(sum)
}

/// Runs one trial at `scale`.
fn trial(
    session: &mut Session,
    streams: &[Stream],
    o: &NdrOpts,
    scale: f64,
    progress: &mut dyn FnMut(&Progress),
) -> Result<(Trial, RunReport), EngineError> {
    let r = session.run(
        streams,
        &RunOpts {
            duration: o.trial,
            drain: o.drain,
            scale,
        },
        progress,
    )?;
    let tx_pps: f64 = r.streams.iter().map(|s| s.tx_pps).sum();
    let tx_l1_bps: f64 = r.streams.iter().map(|s| s.tx_l1_bps).sum();
    let limited = match (asked_pps(streams, scale), asked_bps(streams, scale)) {
        (Some(p), _) => tx_pps < p * 0.99,
        (_, Some(b)) => tx_l1_bps < b * 0.99,
        _ => false,
    };
    let tx = r.tx_packets();
    let lost: u64 = r.streams.iter().map(|s| s.lost).sum();
    let pass = tx > 0 && lost as f64 <= o.loss_tolerance * tx as f64;
    let t = Trial {
        scale,
        tx_pps,
        rx_pps: r.streams.iter().map(|s| s.rx_pps).sum(),
        tx_l1_bps,
        tx_packets: tx,
        lost,
        loss_pct: r.loss_ratio() * 100.0,
        pass,
        generator_limited: limited,
        longest_pause_ns: r.longest_pause_ns,
        disturbed: !pass && r.longest_pause_ns as u128 > o.pause_limit.as_nanos(),
    };
    Ok((t, r))
}

/// Searches the no-drop (or partial-drop) rate. `on_trial` sees each trial as it ends.
pub fn search(
    session: &mut Session,
    streams: &[Stream],
    o: &NdrOpts,
    on_trial: &mut dyn FnMut(&Trial),
    progress: &mut dyn FnMut(&Progress),
) -> Result<NdrResult, EngineError> {
    let mut trials = Vec::new();
    let mut best: Option<(Trial, RunReport)> = None;
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    let mut scale = 1.0;
    loop {
        let mut attempt = 0;
        let (t, r) = loop {
            let (t, r) = trial(session, streams, o, scale, progress)?;
            on_trial(&t);
            trials.push(t.clone());
            if !t.disturbed || attempt == o.repeats {
                break (t, r);
            }
            attempt += 1;
        };
        if t.pass {
            lo = scale;
            best = Some((t, r));
        } else {
            hi = scale;
        }
        if hi - lo <= o.resolution || lo >= 1.0 {
            break;
        }
        scale = (lo + hi) / 2.0;
    }
    let (pps, l1_bps, at_rate) = match best {
        Some((t, r)) => (t.tx_pps, t.tx_l1_bps, Some(r)),
        None => (0.0, 0.0, None),
    };
    Ok(NdrResult {
        scale: lo,
        pps,
        l1_bps,
        loss_tolerance_pct: o.loss_tolerance * 100.0,
        trials,
        at_rate,
    })
}
