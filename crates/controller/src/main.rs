//! `ssc`: the MMS SD-WAN system controller (see the crate docs of `controller`).

use clap::{Parser, Subcommand};

/// MMS SD-WAN system controller (SSC): inventory, path groups and OpenFlow for every gateway.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the controller (not built yet: issue #5).
    Run,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Run => anyhow::bail!("ssc run: the controller is not built yet (issue #5)"),
    }
}
