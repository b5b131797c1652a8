//! `flowpath`: the userspace virtual switch's command-line tool.
//!
//! - `flowpath extract [FILE.pcap] [--in-port N] [--summary]`: every packet's datapath flow key
//!   in OVS's datapath flow format (or counts per protocol and per malformation reason). Without
//!   a file it reads the sample capture built into the binary.
//! - `flowpath flow parse 'DATAPATH FLOW'`: parses a datapath flow (key with masks, optional
//!   statistics, `actions:`) and prints it in canonical form; bad syntax exits 1 naming the
//!   column and what was expected there.

mod extract_cmd;

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
    /// Datapath flows in OVS's text format.
    Flow {
        #[command(subcommand)]
        command: FlowCommand,
    },
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

fn main() -> ExitCode {
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

/// A reader that went away (`flowpath extract | head`) is not an error.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<io::Error>()
        .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
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
