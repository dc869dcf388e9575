//! What the netns integration tests share: the repository root, commands in a namespace, the
//! tool check and the options of the paper system with this build's `xtask`.
// Each test binary uses only some of these.
#![allow(dead_code, clippy::expect_used, clippy::panic, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `cmd` in namespace `ns`; its stdout (panics on failure).
pub fn ns_run(ns: &str, cmd: &[&str]) -> String {
    let (prog, args) = cmd.split_first().expect("a command");
    xtask::sh::ns(ns, prog, args).unwrap_or_else(|e| panic!("{ns}: {e:#}"))
}

/// Runs this build's `xtask` with `args` in the repository root (it starts the WAN emulator from
/// its own image, which a test binary cannot); echoes the lines of its stdout and stderr that
/// start with `progress` as `MEASURE` and panics, with both streams, when it fails.
pub fn xtask(args: &[&str], progress: &str) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("run xtask {args:?}: {e}"));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    for line in stdout.lines().chain(stderr.lines()) {
        if line.starts_with(progress) {
            eprintln!("MEASURE {line}");
        }
    }
    assert!(
        out.status.success(),
        "xtask {args:?} failed:\n{stdout}{stderr}"
    );
    out
}

/// Fails (never skips) when one of `tools` is not installed.
pub fn require_tools(tools: &[&str]) {
    for tool in tools {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .unwrap()
            .status
            .success();
        assert!(
            found,
            "{tool} is missing: this test needs iproute2, iperf3 and Open vSwitch 3.1"
        );
    }
}

/// [`xtask::e2e::Options`] of the paper system on testbed `prefix`, run by this build's `xtask`.
pub fn e2e_options(prefix: &str) -> xtask::e2e::Options {
    let mut opts = xtask::e2e::Options::new(&root(), prefix);
    opts.xtask = Some(PathBuf::from(env!("CARGO_BIN_EXE_xtask")));
    opts
}

/// [`xtask::congestion::RunOptions`] (also the adaptive runner's) on testbed `prefix`, run by
/// this build's `xtask`.
pub fn run_options(prefix: String) -> xtask::congestion::RunOptions {
    xtask::congestion::RunOptions {
        root: root(),
        prefix,
        xtask: Some(PathBuf::from(env!("CARGO_BIN_EXE_xtask"))),
    }
}

/// A one-off iperf3 server in namespace `ns` on `port` that writes its JSON report to `json` (an
/// old report there is removed first); `extra`: more server arguments (e.g. `-i 0.5`).
pub fn json_log_server(ns: &str, port: u16, json: &Path, extra: &[&str]) -> xtask::iperf::Server {
    let _ = std::fs::remove_file(json);
    let mut args = vec![
        "--json".to_owned(),
        "--logfile".to_owned(),
        json.display().to_string(),
    ];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    xtask::iperf::Server::start_with(ns, &[], port, &args).unwrap()
}
