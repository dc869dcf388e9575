//! What the e2e system is brought up with: its [`Options`], the branches of the paper's testbed and
//! the bearer token of its `ssc`.

use std::path::{Path, PathBuf};

use mpa::config::StripingConfig;

/// Bearer token of the system's `ssc` (a throwaway instance on loopback).
pub const TOKEN: &str = "e2e-token-0123456789abcdef0123";
/// The branches of the paper's testbed.
pub const BRANCHES: [u8; 5] = [1, 2, 3, 4, 5];

/// How to bring the system up.
#[derive(Debug, Clone)]
pub struct Options {
    /// The repository root (examples, cargo workspace).
    pub root: PathBuf,
    /// Name prefix of the testbed (namespaces, state directory).
    pub prefix: String,
    /// `selection_policy` of every `mmsg` (`rr`, `wrr`, `throughput`).
    pub selection_policy: String,
    /// SDC polling interval of `ssc` (`--stats-interval`), e.g. `500ms`.
    pub stats_interval: String,
    /// The `xtask` binary to run `testbed up` with (its WAN emulator re-executes the binary that
    /// built the testbed, so a test binary must not build it in-process). `None`: in-process,
    /// when the caller is the `xtask` binary itself.
    pub xtask: Option<PathBuf>,
    /// `true`: static `mmsg` configs with every remote written into the file
    /// ([`mmsg_config`](super::mmsg_config)), no gateway channel (useful to tell a
    /// controller-channel problem from a dataplane one). `false` (default): each `mmsg` takes its
    /// remotes, path groups and weights from `ssc` over the gateway channel
    /// ([`mmsg_controller_config`](super::mmsg_controller_config), docs/gwchan.md).
    pub static_configs: bool,
    /// The path groups `ssc` imports (default `examples/paths-paper-table2.toml`). Controller mode
    /// only; groups must go from branch 1 to branch 2 (experiments use subsets of Table II).
    pub paths: Option<PathBuf>,
    /// A `[striping]` table for every `mmsg` config (docs/mpa.md "Striping";
    /// [`mmsg::striping`](crate::mmsg::striping)).
    pub striping: Option<StripingConfig>,
    /// Every `mmsg` config's `connections_per_group` (default 1; docs/mmsg.md "Connections per
    /// path group").
    pub connections_per_group: u8,
    /// `true` (default): every tunnel connection runs TLS 1.3 with mutual authentication
    /// (docs/security.md): a CA made for the run issues each gateway's certificate
    /// ([`mmsg::provision_tls`](crate::mmsg::provision_tls)) and every `mmsg` config gets a
    /// `[tls]` table. `false`: clear tunnels (the paper's set-up), opted out explicitly with
    /// `[tls] mode = "clear"` plus `mmsg run --insecure-clear-tunnels` (`mmsg` warns
    /// `TUNNELS IN CLEAR TEXT`).
    pub tls: bool,
    /// `Some(ADDR)`: every `mmsg` runs with `--metrics-listen ADDR` (inside its own namespace,
    /// so one loopback address serves all five; docs/metrics.md). `None` (default): off.
    pub metrics_listen: Option<String>,
    /// Where the system's logs, sockets and TLS files go; `None` (default):
    /// `$TMPDIR/mms-e2e-<prefix>`, where the next bring-up overwrites the logs. An
    /// experiment gives each of its systems its own directory, so a repetition that went wrong
    /// in an early system still has its gateways' logs when the run ends.
    pub log_dir: Option<PathBuf>,
}

impl Options {
    /// Defaults: round robin, stats every 500 ms.
    pub fn new(root: &Path, prefix: &str) -> Options {
        Options {
            root: root.to_owned(),
            prefix: prefix.to_owned(),
            selection_policy: "rr".to_owned(),
            stats_interval: "500ms".to_owned(),
            xtask: None,
            static_configs: false,
            paths: None,
            striping: None,
            connections_per_group: 1,
            tls: true,
            metrics_listen: None,
            log_dir: None,
        }
    }

    /// The directory of [`Options::log_dir`]: as given, or `$TMPDIR/mms-e2e-<prefix>`.
    pub fn log_dir(&self) -> PathBuf {
        self.log_dir
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join(format!("mms-e2e-{}", self.prefix)))
    }
}
