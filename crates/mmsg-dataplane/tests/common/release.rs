//! The workspace's release binaries for tests that run them as processes (`mmsg`, `ssc`,
//! `xtask`). Also included by `crates/controller/tests/ofc_netns.rs` (`#[path]`), so every test
//! builds them the same way.
#![allow(dead_code, clippy::unwrap_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Release binary `bin` (`mmsg`, `ssc` or `xtask`), built through cargo and found from its JSON
/// messages. The build selects the packages every build of the binaries selects
/// (`xtask::mmsg::PACKAGES`): cargo unifies the dependencies' features over the selection, so
/// with the same selection this reuses the release build of `cargo xtask`, the testbed tests and
/// the benchmarks instead of compiling the dependency tree again with other features.
pub fn cargo_bin(bin: &str) -> PathBuf {
    let mut cmd = Command::new(env!("CARGO"));
    // Without the variables cargo set for this test crate: ring's build script reruns (and
    // everything above it recompiles) when `CARGO_MANIFEST_DIR`, `CARGO_PKG_*`, ... change.
    for (key, _) in std::env::vars_os() {
        let k = key.to_string_lossy();
        if [
            "CARGO_PKG_",
            "CARGO_MANIFEST_",
            "CARGO_CRATE_",
            "CARGO_BIN_",
        ]
        .iter()
        .any(|p| k.starts_with(p))
            || [
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
                "OUT_DIR",
                "CARGO_RUSTC_CURRENT_DIR",
            ]
            .contains(&k.as_ref())
        {
            cmd.env_remove(&key);
        }
    }
    let out = cmd
        .current_dir(workspace_root())
        .args(["build", "--release"])
        .args(["-p", "xtask", "-p", "mmsg-dataplane", "-p", "controller"])
        .args(["--bin", bin, "--message-format=json"])
        .output()
        .unwrap_or_else(|e| panic!("run cargo build: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cargo build --release --bin {bin} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["target"]["name"] == bin)
        .find_map(|v| v["executable"].as_str().map(PathBuf::from))
        .unwrap_or_else(|| panic!("cargo did not report the {bin} executable"))
}

/// The release `xtask`, built once per test process; later calls run it directly, so the timing
/// of `link cut` does not depend on cargo's start-up or a rebuild.
pub fn xtask_bin() -> &'static Path {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| cargo_bin("xtask"))
}
