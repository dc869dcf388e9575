//! The logs of `mmsg` (issue #19): `tracing` to stderr, filtered by `MMSG_LOG` (default `info`),
//! as text or one JSON object per line (`--log-format json`). ANSI colours only when stderr is a
//! terminal: a log written to a file or a pipe (systemd, `2>log`) has no escape codes.
//!
//! The state changes an operator greps for are INFO/WARN lines with the same field names in
//! both formats: `remote` (branch), `group`, `class`, `conn` (`out-b2-g0-type2`), `wan_port`,
//! `version` (docs/metrics.md, "Logs").

use std::io::IsTerminal;

/// `--log-format`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (colours only on a terminal).
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `fields`, `target`, `span`).
    Json,
}

/// Installs the global subscriber: level from the environment variable `filter_env` (e.g.
/// `MMSG_LOG=debug`), default `info`.
pub fn init(format: LogFormat, filter_env: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env(filter_env)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder.json().with_ansi(false).init(),
    }
}
