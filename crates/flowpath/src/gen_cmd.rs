//! `flowpath gen`: the traffic generator (crate `trafgen`) on flowpath's ports.
//!
//! `flowpath gen STREAMS.toml` sends the file's streams and prints per stream what came back;
//! `flowpath gen ndr STREAMS.toml` searches the no-drop rate. The stream file's `[[port]]`
//! tables take every port type `flowpath run` has (opened by the same code), plus the
//! generator's own: `loopback` (frames come back, with a rate limit, drops and delay: a test
//! instrument) and `virtio_user` (the VM side of a vhost-user socket).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use clap::{Args, Subcommand};
use datapath::dpif::Datapath;
use datapath::port::Port;
use trafgen::engine::{self, RunOpts, Session};
use trafgen::inproc::LinkPort;
use trafgen::ndr::{self, NdrOpts};
use trafgen::stream::{self, Rate, Stream, StreamFile};

use crate::config::PortConf;
use crate::switch;

/// `flowpath gen` arguments.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct GenArgs {
    #[command(subcommand)]
    pub sub: Option<GenSub>,
    #[command(flatten)]
    pub run: GenRun,
}

#[derive(Subcommand)]
pub enum GenSub {
    /// Search the highest rate with no loss (RFC 2544 binary search; with --loss-tolerance,
    /// the partial drop rate). Rates are shares of the stream file's rates.
    Ndr(NdrArgs),
}

/// `flowpath gen STREAMS.toml`.
#[derive(Args)]
pub struct GenRun {
    /// The stream file (TOML).
    pub streams: Option<PathBuf>,
    /// Sending time in seconds (default: the file's `duration`, else 10).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Every stream at this rate instead of the file's (`2Mpps`, `500kpps`, `max`, `10Gbps`).
    #[arg(long)]
    pub rate: Option<String>,
    #[command(flatten)]
    pub common: Common,
}

/// What `gen` and `gen ndr` share.
#[derive(Args)]
pub struct Common {
    /// Receiving time after the last packet (of each trial), milliseconds.
    #[arg(long, default_value_t = 200)]
    pub drain_ms: u64,
    /// Print one JSON object instead of the text.
    #[arg(long)]
    pub json: bool,
    /// No progress lines.
    #[arg(long, short)]
    pub quiet: bool,
    /// Run the switch of this configuration in the same process: its ports of type `gen`
    /// are linked to the stream file's ports of type `switch` of the same name (in-process
    /// replay: no NIC, no kernel; the switch's PMD on its core, the generator on core 0).
    #[arg(long, value_name = "CONFIG")]
    pub switch: Option<PathBuf>,
}

/// `flowpath gen ndr STREAMS.toml`.
#[derive(Args)]
pub struct NdrArgs {
    /// The stream file (TOML); its rates are the search's upper bound.
    pub streams: PathBuf,
    /// Each trial's sending time in seconds.
    #[arg(long, default_value_t = 2.0)]
    pub trial: f64,
    /// Stop when the interval is narrower than this percentage of the full rate.
    #[arg(long, default_value_t = 0.5)]
    pub resolution: f64,
    /// Percentage of packets a passing trial may lose (0: no-drop rate; above: partial drop
    /// rate).
    #[arg(long, default_value_t = 0.0)]
    pub loss_tolerance: f64,
    /// Every stream's upper bound instead of the file's rate.
    #[arg(long)]
    pub max_rate: Option<String>,
    /// A failing trial in which the generator paused longer than this many milliseconds
    /// (descheduled, then catching up in bursts) is run again.
    #[arg(long, default_value_t = 1.0)]
    pub pause_limit_ms: f64,
    /// How many times such a trial is run again at most (0: never).
    #[arg(long, default_value_t = 2)]
    pub repeats: u32,
    #[command(flatten)]
    pub common: Common,
}

/// Reads and compiles a stream file, printing every problem with its line.
fn load(path: &Path) -> anyhow::Result<StreamFile> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    let base = path.parent().unwrap_or(Path::new("."));
    stream::parse(&text, base).map_err(|errs| {
        let lines: Vec<String> = errs
            .iter()
            .map(|e| format!("{}: {e}", path.display()))
            .collect();
        anyhow!("bad stream file:\n{}", lines.join("\n"))
    })
}

/// The switch of `flowpath gen --switch`, running in this process.
struct InProcSwitch {
    dp: Option<Arc<Mutex<Datapath>>>,
    stop: Arc<AtomicBool>,
    revalidator: Option<std::thread::JoinHandle<()>>,
    /// The generator's ends of the links to the switch's `gen` ports, by port name.
    links: HashMap<String, LinkPort>,
}

impl InProcSwitch {
    /// Builds and starts the switch of `config`, its `gen` ports linked to ends kept for the
    /// generator, and a revalidator thread as `flowpath run` has.
    fn start(config: &Path) -> anyhow::Result<InProcSwitch> {
        let cfg = switch::load(config)?;
        let base = config.parent().map(Path::to_path_buf).unwrap_or_default();
        let of = switch::build_ofproto(&cfg, &base)?;
        let mut links = HashMap::new();
        let dp = switch::build_with(&cfg, &of, |p| {
            if p.kind == "gen" {
                let (sw, g) = trafgen::inproc::link(&p.name);
                links.insert(p.name.clone(), g);
                return Ok(Box::new(sw) as Box<dyn Port>);
            }
            switch::open_config_port(&cfg, p, &base)
        })?;
        if links.is_empty() {
            bail!(
                "{}: the switch has no port of type gen to link the generator to",
                config.display()
            );
        }
        let dp = Arc::new(Mutex::new(dp));
        let stop = Arc::new(AtomicBool::new(false));
        let revalidator = {
            let (dp, stop) = (dp.clone(), stop.clone());
            std::thread::Builder::new()
                .name("revalidator".into())
                .spawn(move || {
                    let mut last = std::time::Instant::now();
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(10));
                        switch::revalidate_when_due(&of, &dp, &mut last);
                    }
                })
                .context("starting the revalidator")?
        };
        // The switch's PMDs sit on cores 1.. by default; the generator takes core 0.
        if let Err(e) = datapath::dpif::pin_current_thread(0) {
            eprintln!("flowpath gen: cannot pin the generator to core 0: {e}");
        }
        Ok(InProcSwitch {
            dp: Some(dp),
            stop,
            revalidator: Some(revalidator),
            links,
        })
    }
}

impl Drop for InProcSwitch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.revalidator.take() {
            let _ = t.join();
        }
        // The revalidator held the only other reference.
        if let Some(dp) = self.dp.take().and_then(|d| Arc::try_unwrap(d).ok())
            && let Ok(dp) = dp.into_inner()
        {
            drop(dp.stop());
        }
    }
}

/// Opens the file's ports: the generator's own types here, the rest as `flowpath run` does;
/// `switch` ports are the generator's ends of the in-process switch's links.
fn open_ports(
    file: &StreamFile,
    base: &Path,
    mut switch: Option<&mut InProcSwitch>,
) -> anyhow::Result<Vec<(String, Box<dyn Port>)>> {
    let mut out = Vec::new();
    for d in &file.ports {
        let port: Box<dyn Port> = match d.kind.as_str() {
            "switch" => {
                let Some(sw) = switch.as_deref_mut() else {
                    bail!(
                        "port {} (line {}): type switch needs --switch CONFIG (a switch in this process)",
                        d.name,
                        d.line
                    );
                };
                if !d.options.is_empty() {
                    bail!(
                        "port {} (line {}): type switch takes no options",
                        d.name,
                        d.line
                    );
                }
                let mut names: Vec<&String> = sw.links.keys().collect();
                names.sort();
                let names = names
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ");
                let l = sw.links.remove(&d.name).ok_or_else(|| {
                    anyhow!(
                        "port {} (line {}): the switch has no gen port of that name (its gen ports: {names})",
                        d.name,
                        d.line
                    )
                })?;
                Box::new(l)
            }
            "loopback" => {
                let im = trafgen::loopback::Impairments::from_options(&d.options)
                    .map_err(|e| anyhow!("port {} (line {}): {e}", d.name, d.line))?;
                Box::new(trafgen::loopback::LoopbackPort::new(&d.name, im))
            }
            "virtio_user" => open_virtio_user(&d.name, &d.options, base)
                .map_err(|e| anyhow!("port {} (line {}): {e}", d.name, d.line))?,
            _ => {
                let conf = PortConf {
                    name: d.name.clone(),
                    kind: d.kind.clone(),
                    ofport: None,
                    options: d.options.clone().into_iter().collect(),
                    tag: None,
                    trunks: Vec::new(),
                    vlan_mode: None,
                };
                switch::open_port(&conf, None, base)
                    .with_context(|| format!("stream file line {}", d.line))?
            }
        };
        out.push((d.name.clone(), port));
    }
    Ok(out)
}

/// A `virtio_user` port: the VM side of a vhost-user socket. Options: `path` (the socket,
/// relative to the stream file), `server` (true: listen, for a `vhostuserclient` peer),
/// `queues`, `queue_size`, `mac`.
fn open_virtio_user(name: &str, o: &toml::Table, base: &Path) -> anyhow::Result<Box<dyn Port>> {
    use netdev::virtio_user::{VirtioUserOptions, VirtioUserPort};
    let mut opts = VirtioUserOptions::default();
    for (k, v) in o {
        let text = match v {
            toml::Value::String(s) if k == "path" => base.join(s).display().to_string(),
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(_) | toml::Value::Boolean(_) => v.to_string(),
            _ => bail!("option {k}: expected a string, number or boolean, not {v}"),
        };
        opts.set(k, &text)?;
    }
    opts.check()?;
    Ok(Box::new(VirtioUserPort::open(name, opts)?))
}

/// Starts the in-process switch (with `--switch`), opens the stream file's ports and waits
/// for their links. The switch runs until the returned guard is dropped (after the session).
fn start(
    file: &StreamFile,
    path: &Path,
    c: &Common,
) -> anyhow::Result<(Session, Option<InProcSwitch>)> {
    let base = path.parent().unwrap_or(Path::new("."));
    let mut switch = c.switch.as_deref().map(InProcSwitch::start).transpose()?;
    let session = Session::new(open_ports(file, base, switch.as_mut())?)?;
    links_up(&session)?;
    Ok((session, switch))
}

/// Waits for every port's link (a virtio_user port's back-end, a kernel interface).
fn links_up(session: &Session) -> anyhow::Result<()> {
    let down = session.wait_links(LINK_WAIT);
    if let Some(p) = down.first() {
        bail!(
            "port {p} ({}): link still down after {} s",
            session.port_description(p).unwrap_or_default(),
            LINK_WAIT.as_secs()
        );
    }
    Ok(())
}

/// How long the ports have to come up.
const LINK_WAIT: Duration = Duration::from_secs(10);

/// The streams with `--rate` applied.
fn with_rate(mut streams: Vec<Stream>, rate: Option<&str>) -> anyhow::Result<Vec<Stream>> {
    if let Some(r) = rate {
        let r = stream::parse_rate(r, None).map_err(|e| anyhow!("--rate: {e}"))?;
        for s in &mut streams {
            s.rate = r;
        }
    }
    Ok(streams)
}

fn positive_secs(what: &str, s: f64) -> anyhow::Result<Duration> {
    if !(s.is_finite() && s > 0.0 && s <= 86_400.0) {
        bail!("{what}: expected seconds in (0, 86400], not {s}");
    }
    Ok(Duration::from_secs_f64(s))
}

/// `flowpath gen ...`.
pub fn run(a: GenArgs, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    match a.sub {
        Some(GenSub::Ndr(n)) => ndr_cmd(n, out),
        None => send_cmd(a.run, out),
    }
}

fn send_cmd(a: GenRun, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let Some(path) = a.streams else {
        bail!(
            "a stream file is needed: flowpath gen STREAMS.toml (or flowpath gen ndr STREAMS.toml)"
        );
    };
    let file = load(&path)?;
    let duration = positive_secs("--duration", a.duration.unwrap_or(file.duration))?;
    let streams = with_rate(file.streams.clone(), a.rate.as_deref())?;
    let c = &a.common;
    let (mut session, _switch) = start(&file, &path, c)?;
    let quiet = c.quiet || c.json;
    let r = session.run(
        &streams,
        &RunOpts {
            duration,
            drain: Duration::from_millis(c.drain_ms),
            scale: 1.0,
        },
        &mut |p| {
            if !quiet {
                engine::print_progress(p)
            }
        },
    )?;
    if !quiet {
        engine::end_progress();
    }
    if c.json {
        writeln!(out, "{}", serde_json::to_string(&r)?)?;
    } else {
        write!(out, "{}", engine::report_text(&r))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn ndr_cmd(a: NdrArgs, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let file = load(&a.streams)?;
    let trial = positive_secs("--trial", a.trial)?;
    if !(a.resolution > 0.0 && a.resolution < 100.0) {
        bail!(
            "--resolution: expected a percentage in (0, 100), not {}",
            a.resolution
        );
    }
    if !(0.0..100.0).contains(&a.loss_tolerance) {
        bail!(
            "--loss-tolerance: expected a percentage in [0, 100), not {}",
            a.loss_tolerance
        );
    }
    if !(a.pause_limit_ms.is_finite() && a.pause_limit_ms > 0.0 && a.pause_limit_ms <= 60_000.0) {
        bail!(
            "--pause-limit-ms: expected milliseconds in (0, 60000], not {}",
            a.pause_limit_ms
        );
    }
    let pause_limit = Duration::from_secs_f64(a.pause_limit_ms / 1e3);
    let streams = with_rate(file.streams.clone(), a.max_rate.as_deref())?;
    if let Some(s) = streams.iter().find(|s| matches!(s.rate, Rate::Max)) {
        bail!(
            "stream {}: rate = \"max\" has no upper bound to search below; give it a rate or use --max-rate",
            s.name
        );
    }
    let c = &a.common;
    let (mut session, _switch) = start(&file, &a.streams, c)?;
    let o = NdrOpts {
        trial,
        drain: Duration::from_millis(c.drain_ms),
        resolution: a.resolution / 100.0,
        loss_tolerance: a.loss_tolerance / 100.0,
        pause_limit,
        repeats: a.repeats,
    };
    let quiet = c.quiet || c.json;
    let res = ndr::search(
        &mut session,
        &streams,
        &o,
        &mut |t| {
            if !quiet {
                eprintln!(
                    "trial at {:6.2}%: sent {} ({:.3} Gbps L1), lost {} ({:.4}%): {}{}{}",
                    t.scale * 100.0,
                    engine::rate_text(t.tx_pps),
                    t.tx_l1_bps / 1e9,
                    t.lost,
                    t.loss_pct,
                    if t.pass { "pass" } else { "fail" },
                    if t.generator_limited {
                        " (the generator sent below the asked rate)"
                    } else {
                        ""
                    },
                    if t.disturbed {
                        format!(
                            " (the generator paused {}, over the limit: disturbed)",
                            engine::ns_text(t.longest_pause_ns)
                        )
                    } else {
                        String::new()
                    }
                );
            }
        },
        &mut |_| {},
    )?;
    if c.json {
        writeln!(out, "{}", serde_json::to_string(&res)?)?;
    } else {
        let what = if o.loss_tolerance > 0.0 {
            format!("PDR ({}% loss)", a.loss_tolerance)
        } else {
            "NDR".to_string()
        };
        if res.at_rate.is_none() {
            writeln!(
                out,
                "{what}: no trial passed (even the lowest rate lost packets)"
            )?;
        } else {
            writeln!(
                out,
                "{what}: {} ({:.3} Gbps L1), {:.2}% of the streams' rates, after {} trials of {} s",
                engine::rate_text(res.pps),
                res.l1_bps / 1e9,
                res.scale * 100.0,
                res.trials.len(),
                a.trial
            )?;
            if let Some(r) = &res.at_rate {
                write!(out, "{}", engine::report_text(r))?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
