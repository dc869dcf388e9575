//! `mmsg`: the MMS gateway daemon (see the crate docs of `mmsg_dataplane`).

use clap::{Parser, Subcommand};

/// MMS gateway (MMSG): carries IP traffic between branches over multipath TCP.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the gateway (not built yet: issue #4).
    Run,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Run => anyhow::bail!("mmsg run: the IPoMP dataplane is not built yet (issue #4)"),
    }
}
