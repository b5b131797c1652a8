//! `flowpath top`: a live view of a running switch in the terminal, refreshed every second —
//! rates, busy shares and cycles per packet by stage per PMD thread, the busiest ports, drops
//! by reason — for an operator at an 80x24 console.
//!
//! It asks the switch's control socket for `top/snapshot` (every counter at once, as JSON;
//! see `top_cmd`) at each interval, turns the last two readings into rates (`rates`), lays
//! them out for the terminal's size (`render`) and draws them (`terminal`). A reading costs the
//! switch what `pmd-stats-show` and `port/stats` cost: each PMD thread hands over its counters
//! between two of its iterations, and the ports' counters are read as they are.

mod rates;
mod render;
pub mod snapshot;
mod terminal;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};

use rates::Rates;
use snapshot::Snapshot;
use terminal::{Terminal, Wake};

/// `flowpath top`'s options.
#[derive(clap::Args)]
pub struct TopArgs {
    /// The switch's control socket, as `ovs-appctl -t` takes it (default: the one in
    /// --rundir, found as `flowpath ctl` finds it).
    #[arg(short = 't', long = "target", value_name = "SOCKET")]
    target: Option<PathBuf>,
    /// Directory of the control socket (as for run).
    #[arg(long, conflicts_with = "target")]
    rundir: Option<PathBuf>,
    /// Seconds between screens (rates are over this interval).
    #[arg(long, default_value_t = 1.0, value_name = "SECS", value_parser = interval)]
    interval: f64,
    /// Draw one screen and exit (`-n 1`).
    #[arg(long, conflicts_with = "count")]
    once: bool,
    /// Draw COUNT screens and exit (default: until `q` or Ctrl-C).
    #[arg(short = 'n', value_name = "COUNT", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
}

fn interval(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.01 => Ok(x),
        _ => Err(format!("'{s}' is not a number of seconds of at least 0.01")),
    }
}

/// Runs the view until its count of screens, `q`, Ctrl-C, or the switch's end (an error
/// naming the socket).
pub fn run(args: &TopArgs, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let sock = match (&args.target, &args.rundir) {
        (Some(t), _) => t.clone(),
        (None, dir) => crate::daemon::control_socket_in(
            &dir.clone().unwrap_or_else(crate::switch::default_rundir),
        ),
    };
    let mut client = unixctl::Client::connect(&sock).with_context(|| {
        format!(
            "cannot connect to {} (is flowpath running?)",
            sock.display()
        )
    })?;
    let count = if args.once { Some(1) } else { args.count };
    let pause = Duration::from_secs_f64(args.interval);
    let mut term = Terminal::open(count.is_none())?;
    let mut prev = read(&mut client, &sock)?;
    let mut last: Option<Rates> = None;
    let mut drawn = 0;
    while count.is_none_or(|n| drawn < n) {
        match term.wait(pause)? {
            Wake::Quit => break,
            // The last screen again, fitted to the new size; the next reading comes a whole
            // interval later (its rates are over the time between readings all the same).
            Wake::Resize => {
                if let Some(r) = &last {
                    let (width, height) = term.size();
                    term.draw(out, &render::render(r, width, height))?;
                }
                continue;
            }
            Wake::Timeout => {}
        }
        let cur = read(&mut client, &sock)?;
        let rates = Rates::between(&prev, &cur);
        let (width, height) = term.size();
        term.draw(out, &render::render(&rates, width, height))?;
        drawn += 1;
        prev = cur;
        last = Some(rates);
    }
    Ok(ExitCode::SUCCESS)
}

/// One `top/snapshot` reading; a switch that stopped answering is an error that says so.
fn read(client: &mut unixctl::Client, sock: &Path) -> anyhow::Result<Snapshot> {
    let text = match client.call::<&str>("top/snapshot", &[]) {
        Ok(Ok(text)) => text,
        Ok(Err(e)) => bail!("{}: top/snapshot: {}", sock.display(), e.trim_end()),
        Err(e) => {
            return Err(anyhow!("the switch at {} went away ({e})", sock.display()));
        }
    };
    serde_json::from_str(&text)
        .with_context(|| format!("{}: top/snapshot: unreadable reply", sock.display()))
}
