//! `flowpath`: the userspace virtual switch's command-line tool.
//!
//! - `flowpath extract [FILE.pcap] [--in-port N] [--summary]`: every packet's datapath flow key
//!   in OVS's datapath flow format (or counts per protocol and per malformation reason). Without
//!   a file it reads the sample capture built into the binary.
//! - `flowpath flow parse 'DATAPATH FLOW'`: parses a datapath flow (key with masks, optional
//!   statistics, `actions:`) and prints it in canonical form; bad syntax exits 1 naming the
//!   column and what was expected there.

mod bench;
mod bfd_cmd;
mod bond_cmd;
mod commands;
pub mod config;
mod controller_cmd;
mod coverage_cmd;
mod daemon;
mod demo;
mod dpctl_cmd;
mod dpdk;
mod dpif_show_cmd;
mod dummy_cmd;
mod extract_cmd;
mod gen_cmd;
mod group_cmd;
mod lacp_cmd;
mod memory_cmd;
mod meter_cmd;
mod metrics;
mod of_cmd;
mod ofserver;
mod port_ops;
mod port_stats_cmd;
mod report;
mod run_cmd;
mod switch;
mod top;
mod top_cmd;
mod upcall_cmd;
mod vlog_cmd;
mod vswitchd;

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "flowpath", version, about = "A userspace virtual switch", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print each packet's datapath flow key, one line per packet, in OVS's datapath flow format.
    Extract {
        /// A pcap file (classic libpcap format). Without it, the built-in sample capture.
        file: Option<PathBuf>,
        /// The datapath input port to put in the keys.
        #[arg(long, default_value_t = 1)]
        in_port: u32,
        /// Print counts per protocol and per malformation reason instead of the keys.
        #[arg(long)]
        summary: bool,
    },
    /// Measure a scenario's forwarding rate and cycles per packet, in-process (replay source,
    /// sink), and check what was forwarded.
    #[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
    Bench {
        #[command(subcommand)]
        command: Option<BenchCommand>,
        /// Scenario, as the OVS-DPDK anchor defines it: p2p, p2p_l3 (plain traffic);
        /// vxlan_decap, vxlan_decap_csum0, mplsogre_decap, geneve_decap, geneve_decap_csum0,
        /// vxlan_encap (tunnels); io_floor_vxlan, io_floor_mplsogre, io_floor_geneve (p2p fed
        /// the tunnel traffic as received); gre_decap (flowpath's own: mplsogre_decap without
        /// MPLS); pvp (flowpath's own: p2p's traffic through a VM, dpdk-testpmd on a
        /// vhost-user port, and back); ct (p2p through the connection tracker, the anchor's
        /// pipeline); ct_nat (flowpath's own: ct with source NAT); ct_ovn (flowpath's own:
        /// OVN's ACL pipeline of a logical switch, four ct() in two zones, always programmed
        /// by its OpenFlow rules); ct_setup (flowpath's own:
        /// ct with zone 0's UDP timeouts at 0 s, so every packet sets up a connection; reports
        /// setups per second and checks one commit per packet); ct_flood (flowpath's own: ct
        /// while one packet in two is a new connection and the table's limit is twice --flows,
        /// so the flood fills it and is refused; fails unless every established packet is
        /// forwarded and no established connection evicted). --write-pcap writes any
        /// scenario's traffic.
        #[arg(required = true)]
        scenario: Option<String>,
        /// Number of distinct flows in the traffic.
        #[arg(long, default_value_t = 1000)]
        flows: usize,
        /// Replay this capture instead of generated traffic (e.g. the OVS-DPDK anchor's pcaps).
        #[arg(long, conflicts_with = "write_pcap")]
        pcap: Option<PathBuf>,
        /// Frame size in bytes including the 4-byte FCS, as in RFC 2544 tables; for tunnel
        /// traffic, the inner frame's (MPLSoGRE: the inner IPv4 packet plus 18).
        #[arg(long, default_value_t = 64)]
        frame_size: usize,
        /// Write the scenario's traffic (what it replays with these --flows and --frame-size,
        /// byte for byte the anchor's pcap of that kind) to FILE and exit without measuring.
        #[arg(long, value_name = "FILE")]
        write_pcap: Option<PathBuf>,
        /// Print the scenario's OpenFlow rules (bridge br0, p0 port 1, p1 port 2), one a line
        /// as `ovs-ofctl add-flows` reads them, and exit without measuring.
        #[arg(long, conflicts_with = "write_pcap")]
        print_openflow: bool,
        /// Measurement window in seconds (after a warm-up).
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Number of PMD threads.
        #[arg(long, default_value_t = 1)]
        pmds: usize,
        /// Exact-match cache on or off.
        #[arg(long, default_value = "on", value_parser = ["on", "off"])]
        emc: String,
        /// Print one JSON object instead of the report.
        #[arg(long)]
        json: bool,
        /// Program the switch with the scenario's OpenFlow rules (bridge br0, misses
        /// translated by the OpenFlow pipeline) instead of preinstalled datapath flows.
        #[arg(long)]
        openflow: bool,
        /// With --openflow: also offer this many packets per second of never-cached flows on a
        /// second source (an upcall storm), to see what it costs the cached traffic.
        #[arg(long)]
        storm: Option<f64>,
        /// The source and sink: flowpath's in-process replay port and sampling sink, or the
        /// OVS-DPDK anchor's DPDK net_pcap (infinite_rx) into net_null (every scenario but
        /// pvp; a build with the cargo feature dpdk).
        #[arg(long, default_value = "replay", value_parser = ["replay", "dpdk"])]
        io: String,
    },
    /// Run the switch in the foreground from a configuration file, or from an OVSDB server's
    /// Open_vSwitch database as ovs-vswitchd.
    Run {
        /// The TOML configuration.
        #[arg(long, required_unless_present = "ovsdb")]
        config: Option<PathBuf>,
        /// Take the configuration from this ovsdb-server (unix:PATH or tcp:IP:PORT; with no
        /// value unix:RUNDIR/db.sock, RUNDIR being --rundir, $OVS_RUNDIR or
        /// /var/run/openvswitch), as ovs-vswitchd does, and write back what ovs-vswitchd
        /// writes. Files are then named as ovs-vswitchd's (ovs-vswitchd.pid,
        /// ovs-vswitchd.PID.ctl, ovs-vswitchd.log in $OVS_LOGDIR or /var/log/openvswitch).
        #[arg(
            long,
            conflicts_with = "config",
            value_name = "TARGET",
            num_args = 0..=1,
            default_missing_value = ""
        )]
        ovsdb: Option<String>,
        /// With --ovsdb: interfaces of kernel-backed types are dummy ports, for tests
        /// without root; with =override, as ovs-vswitchd's, every type but patch is. In
        /// either mode controllers may also use OVS's test actions (debug_recirc, debug_slow).
        #[arg(
            long,
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "",
            value_name = "override",
            value_parser = ["", "system", "override"]
        )]
        enable_dummy: Option<String>,
        /// Directory of the control socket flowpath.ctl (default: $FLOWPATH_RUNDIR,
        /// /run/flowpath for root, $XDG_RUNTIME_DIR/flowpath, /tmp/flowpath-UID).
        #[arg(long)]
        rundir: Option<PathBuf>,
        /// Exit once every finite source (pcap rx ports) is exhausted and everything queued
        /// has been sent.
        #[arg(long)]
        until_idle: bool,
        /// Log to this file (default, with no value: flowpath.log in the run directory), at
        /// each module's file level (`vlog/set`, `vlog/reopen`).
        #[arg(long, num_args = 0..=1, value_name = "FILE")]
        log_file: Option<Option<PathBuf>>,
        /// Log levels, in OVS's syntax: MODULE:DESTINATION:LEVEL, any part omitted (as
        /// ovs-vswitchd's -v, e.g. -vconsole:off, -vdpif_netdev:file:dbg). Repeatable.
        #[arg(short = 'v', long = "verbose", value_name = "SPEC")]
        verbose: Vec<String>,
        #[command(flatten)]
        daemon: daemon::DaemonArgs,
    },
    /// Send a command to a running switch's control socket (as ovs-appctl -t does).
    Ctl {
        /// Directory of the control socket (as for run).
        #[arg(long)]
        rundir: Option<PathBuf>,
        /// The command, e.g. dpctl/dump-flows, then its arguments.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Run the switch on its built-in default: the L3-VPN over VXLAN (decapsulation to a VM
    /// port and encapsulation back) on in-memory ports, a live line per second, the datapath
    /// flows and pmd-perf-show at the end. No NIC, root or configuration needed.
    Demo {
        /// How long to run.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Also open the control socket DIR/flowpath.ctl, to poke the demo with ovs-appctl.
        #[arg(long)]
        rundir: Option<PathBuf>,
    },
    /// Validate a configuration file, as `run` would load it, and report every problem with
    /// its line (exit 1 when there is one).
    CheckConfig {
        /// The TOML configuration.
        file: PathBuf,
    },
    /// OpenFlow table commands on a running switch, as ovs-ofctl gives them: add-flow BRIDGE
    /// FLOW, add-flows BRIDGE FILE, mod-flows [--strict] BRIDGE FLOW, del-flows [--strict]
    /// BRIDGE [FLOW], dump-flows BRIDGE [FLOW], show BRIDGE; groups: add-group, mod-group,
    /// insert-buckets, remove-buckets BRIDGE GROUP, add-groups BRIDGE FILE, del-groups
    /// BRIDGE [GROUP], dump-groups, dump-group-stats BRIDGE [GROUP_ID];
    /// meters: add-meter and mod-meter BRIDGE METER, del-meters, dump-meters and meter-stats
    /// BRIDGE [METER], meter-features BRIDGE.
    // The text is clap's --help as well, where [FLOW] is a command-line convention, not a link.
    #[allow(rustdoc::broken_intra_doc_links)]
    Ofctl {
        /// Directory of the control socket (as for run).
        #[arg(long)]
        rundir: Option<PathBuf>,
        /// The command and its arguments.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Traffic generator: send the streams of a stream file (TOML) on flowpath's port types
    /// and count per stream what comes back (loss, reordering, latency); `gen ndr` searches
    /// the no-drop rate.
    Gen(gen_cmd::GenArgs),
    /// A live view of a running switch, refreshed every second: rates, busy shares and cycles
    /// per packet by stage per PMD thread, the busiest ports, drops by reason (`q` or Ctrl-C
    /// quits; plain blocks of text when stdout is not a terminal).
    Top(top::TopArgs),
    /// Datapath flows in OVS's text format.
    Flow {
        #[command(subcommand)]
        command: FlowCommand,
    },
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Run a matrix of scenarios x frame sizes x flows (each cell several times, medians) and
    /// write report.md (tables), report.json (every run) and PNG plots to a directory;
    /// with --compare-ovs, OVS-DPDK side by side through scripts/compare-ovs.
    Report(Box<report::ReportArgs>),
    /// What the machine itself charges a vhost-user round trip: a cache line's round trip
    /// between the PMD's core and the guest's (two pinned threads passing one line), and
    /// memcpy's cost for 1514-byte frames from PVP's working sets and from memory; and what
    /// a line read at random from memory costs, one after another and 32 at once, and a line
    /// then the line it names (a connection's cache bucket, then the connection), 32 at once.
    Host {
        /// The two cores, as PMD,GUEST (`flowpath bench pvp` puts its PMD on 1, the guest on 0).
        #[arg(long, default_value = "1,0", value_parser = parse_core_pair)]
        cores: (usize, usize),
        /// Time to measure for, in seconds, half for the line and half for the copies (the
        /// random lines a quarter more, at most a second).
        #[arg(long, default_value_t = 4.0)]
        seconds: f64,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// `A,B`: two core numbers.
fn parse_core_pair(s: &str) -> Result<(usize, usize), String> {
    let (a, b) = s.split_once(',').ok_or("two cores, as A,B")?;
    let core = |c: &str| c.trim().parse::<usize>().map_err(|e| format!("{c:?}: {e}"));
    Ok((core(a)?, core(b)?))
}

#[derive(Subcommand)]
enum FlowCommand {
    /// Parse a datapath flow and print it back in canonical form.
    Parse {
        /// A flow as `dpctl/dump-flows` prints it or `dpctl/add-flow` takes it, e.g.
        /// 'in_port(1),eth_type(0x0800),ipv4(dst=10.1.0.0/255.255.0.0), actions:2'.
        flow: String,
    },
}

/// The command line tool: parses the arguments, runs the command, and gives its exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let result = match cli.command {
        Command::Extract {
            file,
            in_port,
            summary,
        } => extract_cmd::run(file.as_deref(), in_port, summary, &mut out),
        Command::Flow {
            command: FlowCommand::Parse { flow },
        } => flow_parse(&flow, &mut out),
        Command::Bench {
            command: Some(BenchCommand::Report(args)),
            ..
        } => report::run(&args, &mut out),
        Command::Bench {
            command:
                Some(BenchCommand::Host {
                    cores,
                    seconds,
                    json,
                }),
            ..
        } => bench_host(cores, seconds, json, &mut out),
        Command::Bench {
            command: None,
            scenario: Some(scenario),
            flows,
            pcap,
            frame_size,
            write_pcap,
            print_openflow,
            seconds,
            pmds,
            emc,
            json,
            openflow,
            storm,
            io,
        } => {
            let o = bench::BenchOpts {
                scenario,
                pcap,
                flows,
                frame_size,
                seconds,
                pmds,
                emc: emc == "on",
                json,
                openflow,
                storm,
                io: bench::BenchIo::parse(&io).expect("clap checked it"),
            };
            match write_pcap {
                _ if print_openflow => openflow_cmd(&o.scenario, &mut out),
                Some(path) => write_traffic(&o, &path, &mut out),
                None => bench_cmd(&o, &mut out),
            }
        }
        Command::Bench { scenario: None, .. } => {
            unreachable!("clap requires a scenario without a subcommand")
        }
        Command::Run {
            config,
            ovsdb,
            enable_dummy,
            rundir,
            until_idle,
            log_file,
            verbose,
            daemon,
        } => run(
            config.as_deref(),
            ovsdb.as_deref(),
            enable_dummy.as_deref(),
            rundir.as_deref(),
            until_idle,
            log_file,
            &verbose,
            &daemon,
        ),
        Command::Ctl { rundir, command } => ctl(rundir.as_deref(), &command, &mut out),
        Command::CheckConfig { file } => check_config(&file, &mut out),
        Command::Ofctl { rundir, command } => ofctl(rundir.as_deref(), &command, &mut out),
        Command::Demo { seconds, rundir } => demo::run(seconds, rundir.as_deref(), &mut out),
        Command::Gen(a) => gen_cmd::run(a, &mut out),
        Command::Top(a) => top::run(&a, &mut out),
    };
    let result = result.and_then(|code| out.flush().map(|_| code).map_err(Into::into));
    match result {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("flowpath: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `flowpath run`: logging set up, then daemonized as asked (the process that goes on is the
/// switch), then the switch; the pidfile goes when the switch ends.
#[allow(clippy::too_many_arguments)] // run's command line, one argument per option group
fn run(
    config: Option<&std::path::Path>,
    ovsdb: Option<&str>,
    enable_dummy: Option<&str>,
    rundir: Option<&std::path::Path>,
    until_idle: bool,
    log_file: Option<Option<PathBuf>>,
    verbose: &[String],
    daemon_args: &daemon::DaemonArgs,
) -> anyhow::Result<ExitCode> {
    // OVSDB mode takes ovs-vswitchd's names and directories; a TOML configuration flowpath's.
    let layout = match ovsdb {
        Some(_) => daemon::Layout::ovs_vswitchd(rundir),
        None => daemon::Layout::flowpath(rundir),
    };
    setup_logging(verbose, log_file, &layout)?;
    // A detached daemon leaves the current directory: name the configuration absolutely.
    let config = config.map(|c| daemon::absolute(c.to_path_buf()));
    let target = ovsdb.map(|t| match t {
        "" => layout.default_database(),
        t => t.to_owned(),
    });
    let source = match (&config, &target) {
        (Some(c), _) => run_cmd::Source::File(c),
        (None, Some(target)) => run_cmd::Source::Ovsdb {
            target,
            dummy: match enable_dummy {
                None => vswitchd::DummyLevel::Off,
                Some("override") => vswitchd::DummyLevel::Override,
                Some(_) => vswitchd::DummyLevel::Kernel,
            },
        },
        (None, None) => anyhow::bail!("run needs --config FILE or --ovsdb [TARGET]"),
    };
    // As OVS's --enable-dummy, also OVS's test actions from controllers (debug_recirc,
    // debug_slow).
    if enable_dummy.is_some() {
        openflow::actions::enable_debug_actions();
        // And OVS's dummy-internal LOCAL ports, which netdev-dummy/receive feeds.
        netdev::dummy::enable_internal_rx();
    }
    let mut daemon = daemon::Daemon::start(daemon_args, &layout)?;
    run_cmd::run(source, &layout.rundir, until_idle, &mut daemon)
}

/// `run`'s `-v SPEC`s and `--log-file [FILE]` (default: the layout's, flowpath.log in the run
/// directory for a TOML configuration).
fn setup_logging(
    verbose: &[String],
    log_file: Option<Option<PathBuf>>,
    layout: &daemon::Layout,
) -> anyhow::Result<()> {
    for spec in verbose {
        vlog::set(spec).map_err(|e| anyhow::anyhow!("-v {spec}: {e}"))?;
    }
    if let Some(file) = log_file {
        let file = daemon::absolute(file.unwrap_or_else(|| layout.default_log_file()));
        if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| anyhow::anyhow!("log file {}: {e}", file.display()))?;
        }
        vlog::set_log_file(&file)
            .map_err(|e| anyhow::anyhow!("log file {}: {e}", file.display()))?;
    }
    Ok(())
}

/// A reader that went away (`flowpath extract | head`) is not an error.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<io::Error>()
        .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
}

/// `flowpath ctl`: one request on the control socket. As ovs-appctl: the reply on stdout and
/// exit 0, or the error on stderr and exit 2.
fn ctl(
    rundir: Option<&std::path::Path>,
    command: &[String],
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    use anyhow::Context;
    let dir = rundir
        .map(PathBuf::from)
        .unwrap_or_else(switch::default_rundir);
    let sock = daemon::control_socket_in(&dir);
    let mut c = unixctl::Client::connect(&sock).with_context(|| {
        format!(
            "cannot connect to {} (is flowpath running?)",
            sock.display()
        )
    })?;
    match c
        .call(&command[0], &command[1..])
        .with_context(|| format!("{}", sock.display()))?
    {
        Ok(text) => {
            write!(out, "{text}")?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprint!("{e}");
            eprintln!("flowpath: {}: server returned an error", sock.display());
            Ok(ExitCode::from(2))
        }
    }
}

/// `flowpath check-config FILE`.
fn check_config(file: &std::path::Path, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let cfg = match switch::load(file) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("flowpath: {e:#}");
            return Ok(ExitCode::FAILURE);
        }
    };
    // Flows files and patch peers are checked by building the OpenFlow side.
    let base = file.parent().map(PathBuf::from).unwrap_or_default();
    if let Err(e) = switch::build_ofproto(&cfg, &base) {
        eprintln!("flowpath: {}: {e:#}", file.display());
        return Ok(ExitCode::FAILURE);
    }
    let ports: usize = cfg.bridge.iter().map(|b| b.port.len()).sum();
    let flows: usize = cfg
        .bridge
        .iter()
        .map(|b| b.flows.as_ref().map_or(0, Vec::len))
        .sum();
    writeln!(
        out,
        "{}: ok ({} bridges, {ports} ports, {flows} inline flows)",
        file.display(),
        cfg.bridge.len()
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `flowpath ofctl COMMAND ARGS`: the `ofctl/` control commands; `add-flows` reads its file
/// here, as ovs-ofctl does, and sends the text.
fn ofctl(
    rundir: Option<&std::path::Path>,
    command: &[String],
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let mut args = command.to_vec();
    let known = [
        "add-flow",
        "add-flows",
        "mod-flows",
        "del-flows",
        "dump-flows",
        "dump-ports",
        "show",
        "add-tlv-map",
        "del-tlv-map",
        "dump-tlv-map",
        "add-group",
        "add-groups",
        "mod-group",
        "del-groups",
        "insert-buckets",
        "remove-buckets",
        "dump-groups",
        "dump-group-stats",
        "dump-group-features",
        "add-meter",
        "mod-meter",
        "del-meter",
        "del-meters",
        "dump-meters",
        "meter-stats",
        "meter-features",
    ];
    if !known.contains(&args[0].as_str()) {
        eprintln!(
            "flowpath: ofctl: unknown command '{}' (known: {})",
            args[0],
            known.join(", ")
        );
        return Ok(ExitCode::from(2));
    }
    if matches!(args[0].as_str(), "add-flows" | "add-groups") && args.len() == 3 {
        let text = if args[2] == "-" {
            io::read_to_string(io::stdin())?
        } else {
            std::fs::read_to_string(&args[2]).map_err(|e| anyhow::anyhow!("{}: {e}", args[2]))?
        };
        args[2] = text;
    }
    args[0] = format!("ofctl/{}", args[0]);
    ctl(rundir, &args, out)
}

fn bench_cmd(o: &bench::BenchOpts, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let r = bench::run(o)?;
    if o.json {
        writeln!(out, "{}", serde_json::to_string(&r)?)?;
    } else {
        write!(out, "{}", bench::report(&r))?;
    }
    // A run that forwarded nothing or the wrong bytes is a failure, not a figure.
    Ok(if r.forwarded_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `flowpath bench host`.
fn bench_host(
    (a, b): (usize, usize),
    seconds: f64,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let r = bench::host::run(a, b, seconds)?;
    if json {
        writeln!(out, "{}", serde_json::to_string(&r)?)?;
    } else {
        write!(out, "{}", bench::host::report(&r))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `flowpath bench SCENARIO --write-pcap FILE`.
/// `flowpath bench SCENARIO --print-openflow`.
fn openflow_cmd(scenario: &str, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    for r in bench::openflow_rules(scenario)? {
        writeln!(out, "{r}")?;
    }
    Ok(ExitCode::SUCCESS)
}

fn write_traffic(
    o: &bench::BenchOpts,
    path: &std::path::Path,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let (n, kind) = bench::write_traffic(o, path)?;
    writeln!(
        out,
        "{}: {n} frames of {kind} traffic ({} B frames), the input of {}",
        path.display(),
        o.frame_size,
        o.scenario
    )?;
    Ok(ExitCode::SUCCESS)
}

fn flow_parse(text: &str, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let mut names = flow::odp::PortNames::new();
    match flow::odp::parse_flow(text, &mut names) {
        Ok(f) => {
            writeln!(out, "{}", f.format(Some(&names), None))?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("flowpath: bad datapath flow: {e}");
            eprintln!("  {text}");
            eprintln!("  {:>width$}", "^", width = e.column());
            Ok(ExitCode::FAILURE)
        }
    }
}
