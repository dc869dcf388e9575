//! `ssc`: the MMS SD-WAN system controller (see the crate docs of `controller`).
//!
//! `ssc run` serves the REST API over the inventory database; `ssc check` validates a config and
//! its database; every other subcommand is a client of a running `ssc run` (`--api`, `--token`).
//! This file parses the arguments, starts the logs and dispatches: [`server`] builds and runs the
//! daemon (`run`, `check`), [`cli`] holds the client commands, one module per resource.
use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod auto;
mod cli;
mod server;

use cli::credentials::{CaCommand, EnrolTokenArgs, RevokeArgs, TokenCommand};
use cli::inventory::{BranchCommand, FlowsArgs, GroupCommand, ImportArgs, PortCommand};
use cli::settings::SettingsCommand;
use cli::status::WeightsArgs;
use cli::ClientArgs;
use server::{CheckArgs, RunArgs};

/// MMS SD-WAN system controller (SSC): inventory, path groups and flows for every gateway.
///
/// `ssc run` serves the REST API (inventory, path groups, settings, compiled flows, statistics)
/// and the OpenFlow 1.3 server that programs every gateway's OVS: each switch (datapath id =
/// branch id) is reconciled by cookie when it connects, every change is pushed in the order
/// destination → transit → source with a barrier per step, and flow/port statistics are polled.
/// With `--gateway-listen` / `--gateway-unix` it also serves the gateway channel: every `mmsg`
/// registers and gets its remotes, path groups and WRR weights, pushed on every change
/// (docs/gwchan.md). `ssc` also runs the gateway CA: one-time enrolment tokens
/// (`ssc enrol-token`), issuing, renewing and revoking gateway certificates, mutual TLS on the
/// gateway channel (`--gateway-tls-listen`) and OpenFlow over TLS (`--openflow-tls-listen`).
/// REST tokens have roles (`ssc token add --role read-only|admin`) and expire (`--ttl`,
/// default 30 days, `never` on request). The CRL is re-signed every 3.5 days and pushed to
/// the connected gateways.
#[derive(Debug, Parser)]
#[command(name = "ssc", version = env!("MMS_VERSION_LONG"), about, long_about)]
struct Cli {
    /// Log format on stderr: `text` (colours only on a terminal) or `json` (one object per line).
    #[arg(
        long,
        env = "SSC_LOG_FORMAT",
        value_enum,
        default_value = "text",
        global = true
    )]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    /// Human-readable lines (ANSI colours only when stderr is a terminal).
    Text,
    /// One JSON object per line (`timestamp`, `level`, `fields`, `target`).
    Json,
}

/// The log subscriber: stderr, level from `RUST_LOG` (default `info`).
fn init_logs(format: LogFormat) {
    let builder = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder.json().with_ansi(false).init(),
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// First run: write a commented starter config (kept if it exists), create the gateway CA
    /// and a bootstrap admin token (shown once), and print the commands that enrol a gateway.
    /// Works offline; never overwrites anything.
    Init(cli::init::InitArgs),
    /// Serve the REST API, the OpenFlow server that programs the gateways' OVS, and the gateway
    /// channel that configures every mmsg.
    Run(RunArgs),
    /// Validate the config file and its database (schema version, every rule, flows compile).
    Check(CheckArgs),
    /// Replace the whole inventory (and path groups) from TOML files, through the API.
    Import(ImportArgs),
    /// Print the whole inventory as TOML (the `--inventory` form of `ssc import`).
    Export(ClientArgs),
    /// Branches: list, show, add, modify, remove.
    Branch {
        #[command(subcommand)]
        command: BranchCommand,
    },
    /// WAN ports of a branch: add, modify, remove.
    Port {
        #[command(subcommand)]
        command: PortCommand,
    },
    /// Path groups per ordered branch pair: list, set, remove.
    PathGroup {
        #[command(subcommand)]
        command: GroupCommand,
    },
    /// Settings of the automatic path configuration: show, set.
    Settings {
        #[command(subcommand)]
        command: SettingsCommand,
    },
    /// The compiled flow table of one branch's OVS (read-only).
    Flows(FlowsArgs),
    /// The whole network on one screen: problems first, every branch (gateway, switch, ports,
    /// tunnels) and every pair (path groups up, Mbit/s, WRR weights).
    Status(ClientArgs),
    /// Statistics collected from the switches: per branch, pair, path group and member path.
    Stats(ClientArgs),
    /// WRR weights of the path groups of every ordered pair (or of one pair).
    Weights(WeightsArgs),
    /// Gateways on the gateway channel: connected or not, config version sent and acked, last
    /// report.
    Gateways(ClientArgs),
    /// Adaptive path groups (seed 003): per ordered pair its achieved rate ξ, achievable rate ζ,
    /// status and last change (switch on with `ssc settings set --adaptive true`).
    Adaptive(ClientArgs),
    /// The API's health.
    Health(ClientArgs),
    /// The gateway CA: `ssc ca init` creates it (else the first `ssc run` does).
    Ca {
        #[command(subcommand)]
        command: CaCommand,
    },
    /// Print a one-time enrolment token for a branch (`mmsg enrol --token`); shown once, only
    /// its hash is stored; used once; expires after --ttl.
    EnrolToken(EnrolTokenArgs),
    /// Revoke every certificate of a branch or one serial; the CRL is re-signed, used by the
    /// TLS listeners from the next handshake and pushed at once to every connected gateway of
    /// protocol 3 (older ones get it with their next credentials).
    Revoke(RevokeArgs),
    /// Certificates the gateway CA issued.
    Certificates(ClientArgs),
    /// REST API tokens with roles and expiry: add (prints the token once), list, remove.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Write the man pages (`man/`) and shell completions (`completions/`) of `ssc` into
    /// --out-dir (`cargo xtask dist` packages them).
    #[command(hide = true)]
    GenerateAssets {
        /// Output directory.
        #[arg(long)]
        out_dir: std::path::PathBuf,
    },
}

fn main() -> ExitCode {
    match main_inner() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line with the whole context chain, e.g.
            // `ssc: error: database /x.redb: database /x.redb does not exist (...)`.
            eprintln!("ssc: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn main_inner() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_logs(cli.log_format);
    match cli.command {
        Command::Init(args) => cli::init::init(args),
        Command::Run(args) => server::run(args),
        Command::Check(args) => server::check(args),
        Command::Import(args) => cli::inventory::import(args),
        Command::Export(c) => cli::inventory::export(c),
        Command::Branch { command } => cli::inventory::branch(command),
        Command::Port { command } => cli::inventory::port(command),
        Command::PathGroup { command } => cli::inventory::path_group(command),
        Command::Settings { command } => cli::settings::settings(command),
        Command::Flows(args) => cli::inventory::flows(args),
        Command::Status(c) => cli::overview::status(c),
        Command::Stats(c) => cli::status::stats(c),
        Command::Health(c) => cli::status::health(c),
        Command::Ca { command } => cli::credentials::ca(command),
        Command::EnrolToken(a) => cli::credentials::enrol_token(a),
        Command::Revoke(a) => cli::credentials::revoke(a),
        Command::Certificates(c) => cli::credentials::certificates(c),
        Command::Token { command } => cli::credentials::token(command),
        Command::Weights(args) => cli::status::weights(args),
        Command::Gateways(c) => cli::status::gateways(c),
        Command::Adaptive(c) => cli::status::adaptive(c),
        Command::GenerateAssets { out_dir } => generate_assets(&out_dir),
    }
}

/// `ssc generate-assets`: `man/ssc*.1` and `completions/{ssc.bash,_ssc,ssc.fish}`.
fn generate_assets(out: &std::path::Path) -> anyhow::Result<()> {
    use anyhow::Context;
    use clap::CommandFactory;
    let man = out.join("man");
    let comp = out.join("completions");
    for d in [&man, &comp] {
        std::fs::create_dir_all(d).with_context(|| format!("create {}", d.display()))?;
    }
    clap_mangen::generate_to(Cli::command(), &man).context("man pages")?;
    for shell in [
        clap_complete::Shell::Bash,
        clap_complete::Shell::Zsh,
        clap_complete::Shell::Fish,
    ] {
        clap_complete::generate_to(shell, &mut Cli::command(), "ssc", &comp)
            .with_context(|| format!("{shell} completions"))?;
    }
    Ok(())
}
