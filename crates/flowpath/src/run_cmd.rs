//! `flowpath run --config FILE [--rundir DIR] [--until-idle]`: the switch, with its control
//! socket (`DIR/flowpath.ctl` by default, see [`crate::daemon`] for `--unixctl`, `--pidfile`
//! and `--detach`) speaking OVS's unixctl protocol (so `ovs-appctl -t SOCKET COMMAND` works),
//! stopped cleanly by SIGINT, SIGTERM, SIGHUP or the `exit` command (`exit --cleanup` also
//! removes the internal ports' TAP devices, which otherwise persist for the next run, as
//! ovs-vswitchd's removes its ports). Every bridge listens for
//! OpenFlow connections on `DIR/BRIDGE.mgmt` (and `DIR/BRIDGE.snoop`), so that `ovs-ofctl` with
//! `OVS_RUNDIR=DIR` manages it, and connects to (or listens for) the controllers its
//! configuration names.
//!
//! `flowpath run --ovsdb [TARGET]` starts with no bridge and takes its configuration from an
//! `ovsdb-server` instead, as `ovs-vswitchd` does (see `vswitchd`), with ovs-vswitchd's file
//! names (`ovs-vswitchd.pid`, `ovs-vswitchd.PID.ctl`) in OVS's run directory.
//!
//! With `[metrics] listen` (or `other_config:metrics-listen` under `--ovsdb`) the switch also
//! serves its counters to Prometheus (see `metrics`).

use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, anyhow};
use unixctl::Server;

use crate::commands::registry;
use crate::daemon::Daemon;
use crate::ofserver::{BridgeControl, ControllerSettings, OfServer};
use crate::switch::{build, build_ofproto, load, revalidate_when_due};

/// Where the switch's configuration comes from.
pub enum Source<'a> {
    /// A TOML file.
    File(&'a Path),
    /// An OVSDB server's Open_vSwitch database (`unix:PATH`, `tcp:IP:PORT`); `dummy` says
    /// which interface types are dummy ports (OVS's `--enable-dummy`).
    Ovsdb {
        target: &'a str,
        dummy: crate::vswitchd::DummyLevel,
    },
}

/// Runs the switch until a signal, `exit`, or (with `until_idle`) the end of its finite
/// sources.
pub fn run(
    source: Source,
    rundir: &Path,
    until_idle: bool,
    daemon: &mut Daemon,
) -> anyhow::Result<ExitCode> {
    let (cfg, base) = match source {
        Source::File(path) => (
            load(path)?,
            path.parent().map(Path::to_path_buf).unwrap_or_default(),
        ),
        // No bridge until the database says; the datapath's defaults.
        Source::Ovsdb { .. } => (
            crate::config::parse("").map_err(|_| anyhow!("empty configuration"))?,
            std::path::PathBuf::new(),
        ),
    };
    let rundir = rundir.to_path_buf();
    let of = build_ofproto(&cfg, &base)?;
    crate::dpdk::start(&cfg.datapath.dpdk_settings())?;
    let dp = build(&cfg, &base, &of)?;
    let stop = Arc::new(AtomicBool::new(false));
    // SIGHUP too, as OVS's fatal signals: log rotation uses `vlog/reopen`, not a signal.
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    let dp = Arc::new(Mutex::new(dp));
    std::fs::create_dir_all(&rundir)
        .with_context(|| format!("run directory {}", rundir.display()))?;
    let sock = daemon.control_socket();
    let controllers = ControllerSettings::new(&rundir);
    for br in &cfg.bridge {
        let control = BridgeControl::from_config(br).map_err(|e| anyhow!(e))?;
        // A bridge with controllers has no NORMAL flow (OVS flushes it as the first
        // controller comes); flows the configuration gives stay.
        if control.has_controllers(&br.name, &rundir)
            && br.flows.is_none()
            && br.flows_file.is_none()
        {
            of.del_flows(&br.name, None, false)
                .map_err(|e| anyhow!(e))?;
        }
        controllers.init(&br.name, control);
    }
    let reg = registry(dp.clone(), of.clone(), &base, stop.clone());
    crate::controller_cmd::register(&reg, &of, &controllers);
    let server =
        Server::bind(&sock, reg).with_context(|| format!("control socket {}", sock.display()))?;
    eprintln!("flowpath: running; control socket {}", sock.display());
    // OpenFlow: every bridge's BRIDGE.mgmt and BRIDGE.snoop, served on their own thread.
    let ofserver = OfServer::start(&rundir, of.clone(), dp.clone(), controllers.clone())
        .with_context(|| format!("OpenFlow listeners in {}", rundir.display()))?;
    // A metrics address that cannot be listened on is logged; the switch runs without it.
    let metrics = Arc::new(crate::metrics::Metrics::new(dp.clone(), of.clone()));
    let _ = metrics.set_listen(cfg.metrics.listen_addr());
    let vswitchd = match source {
        Source::Ovsdb { target, dummy } => Some(crate::vswitchd::Vswitchd::start(
            crate::vswitchd::Options {
                target: target.to_owned(),
                rundir: rundir.clone(),
                dummy,
            },
            of.clone(),
            dp.clone(),
            controllers,
            metrics.clone(),
        )),
        Source::File(_) => {
            crate::coverage_cmd::BRIDGE_RECONFIGURE.inc();
            None
        }
    };
    // Ready: a --detach parent may return now.
    daemon.complete();

    // The revalidator.
    let mut last = std::time::Instant::now();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(10));
        if until_idle && dp.lock().map(|d| d.drained()).unwrap_or(true) {
            break;
        }
        revalidate_when_due(&of, &dp, &mut last);
        crate::coverage_cmd::run(&dp);
    }
    if let Some(v) = vswitchd {
        v.stop();
    }
    let _ = metrics.set_listen(None);
    drop(metrics);
    server.shutdown();
    ofserver.stop();
    let dp = Arc::try_unwrap(dp).map_err(|_| anyhow!("datapath still in use"))?;
    let dp = dp
        .into_inner()
        .map_err(|_| anyhow!("datapath lock poisoned"))?;
    let mut ports = dp.stop();
    if crate::dpctl_cmd::CLEANUP.load(Ordering::Relaxed) {
        for (_, p) in &mut ports {
            if let Err(e) = p.release_device() {
                eprintln!("flowpath: exit --cleanup: port {}: {e}", p.name());
            }
        }
    }
    drop(ports);
    Ok(ExitCode::SUCCESS)
}
