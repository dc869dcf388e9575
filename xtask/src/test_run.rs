//! `cargo xtask test`: one debug build of every test binary in the workspace, then the binaries
//! run in stages, each with its own test-thread setting, and a table of the slowest at the end.
//!
//! `cargo test -p xtask` after `cargo test --workspace --exclude xtask` resolves the
//! dependencies' features over another set of packages, so it compiled the dependency tree a
//! second time (~100 s on 2 cores). Here one `cargo test --workspace --all-targets --no-run`
//! builds everything once and the binaries run as cargo would run them (working directory and
//! `CARGO_MANIFEST_DIR` of their package). cargo-nextest does the same and more, but it is not
//! installed on a fresh machine and compiling it would cost CI more than it saves.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::Value;

/// One test executable cargo built.
#[derive(Debug, Clone)]
pub struct TestBinary {
    /// Its package (`mpa`, `xtask`, ...).
    pub package: String,
    /// Its target kind (`lib`, `bin`, `test`, `bench`, `example`).
    pub kind: String,
    /// Its target name (`netns_tunnel`, ...).
    pub name: String,
    /// The executable.
    pub exe: PathBuf,
    /// Its package's directory (where cargo runs it).
    pub dir: PathBuf,
}

/// Which test binaries a stage runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Every binary of the crates other than xtask: unit, property, golden tests and their netns
    /// tests (tests that need namespaces serialise themselves).
    Crates,
    /// xtask's own unit tests (library and binary).
    XtaskUnit,
    /// xtask's integration tests: testbed, emulator and whole-system tests, which measure
    /// timing, so one test at a time.
    Testbed,
}

impl Stage {
    /// The name printed for the stage.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Crates => "crate tests",
            Stage::XtaskUnit => "xtask unit tests",
            Stage::Testbed => "netns testbed tests",
        }
    }

    fn holds(self, b: &TestBinary) -> bool {
        let xtask = b.package == "xtask";
        match self {
            Stage::Crates => !xtask,
            Stage::XtaskUnit => xtask && matches!(b.kind.as_str(), "lib" | "bin"),
            Stage::Testbed => xtask && b.kind == "test",
        }
    }

    fn args(self) -> &'static [&'static str] {
        match self {
            Stage::Testbed => &["--test-threads=1"],
            Stage::Crates | Stage::XtaskUnit => &[],
        }
    }
}

/// The time one binary ran.
#[derive(Debug, Clone)]
pub struct Timing {
    /// `package/kind/name`.
    pub what: String,
    /// Wall-clock time.
    pub took: Duration,
    /// Whether it passed.
    pub ok: bool,
}

/// `cargo test --workspace --all-targets --no-run`: builds every test binary once and returns
/// them in cargo's order.
pub fn build(root: &Path) -> anyhow::Result<Vec<TestBinary>> {
    let t = Instant::now();
    println!("==> build: cargo test --workspace --all-targets --no-run");
    let out = crate::sh::cargo()
        .current_dir(root)
        .args(["test", "--workspace", "--all-targets", "--no-run"])
        .arg("--message-format=json-render-diagnostics")
        .stderr(Stdio::inherit())
        .output()
        .context("run cargo test --no-run")?;
    if !out.status.success() {
        bail!("cargo test --no-run failed");
    }
    let mut bins = parse(&String::from_utf8_lossy(&out.stdout));
    // Cargo reports them as they finish compiling; run them in a fixed order.
    bins.sort_by(|a, b| (&a.package, &a.kind, &a.name).cmp(&(&b.package, &b.kind, &b.name)));
    println!(
        "==> build: {} test binaries in {:.0} s",
        bins.len(),
        t.elapsed().as_secs_f64()
    );
    Ok(bins)
}

/// The test executables in cargo's JSON messages.
fn parse(messages: &str) -> Vec<TestBinary> {
    messages
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| {
            v.get("reason").and_then(Value::as_str) == Some("compiler-artifact")
                && v.pointer("/profile/test").and_then(Value::as_bool) == Some(true)
        })
        .filter_map(|v| {
            let text = |pointer: &str| v.pointer(pointer).and_then(Value::as_str);
            let manifest = Path::new(text("/manifest_path")?);
            Some(TestBinary {
                package: package_name(text("/package_id")?)?.to_owned(),
                kind: text("/target/kind/0")?.to_owned(),
                name: text("/target/name")?.to_owned(),
                exe: PathBuf::from(text("/executable")?),
                dir: manifest.parent()?.to_path_buf(),
            })
        })
        .collect()
}

/// The package name in a cargo package id: `path+file:///work/crates/mpa#0.1.0` (directory
/// named like the package), `path+file:///work/crates/types#mms-types@0.1.0`, or the old
/// `mpa 0.1.0 (path+file:///...)`.
fn package_name(id: &str) -> Option<&str> {
    if let Some((_, frag)) = id.rsplit_once('#') {
        return match frag.split_once('@') {
            Some((name, _)) => Some(name),
            None => id
                .split_once('#')
                .and_then(|(url, _)| url.rsplit('/').next()),
        };
    }
    id.split_whitespace().next()
}

/// Runs the binaries of `stage` one after the other, as `cargo test` would, printing each
/// one's outcome; fails after the stage if any failed (all of them run).
pub fn run(stage: Stage, bins: &[TestBinary], timings: &mut Vec<Timing>) -> anyhow::Result<()> {
    let t = Instant::now();
    println!("==> {}", stage.name());
    let mut failed = Vec::new();
    for b in bins.iter().filter(|b| stage.holds(b)) {
        let what = format!("{}/{}/{}", b.package, b.kind, b.name);
        println!("     Running {what} ({})", b.exe.display());
        let started = Instant::now();
        let ok = command(b)
            .args(stage.args())
            .status()
            .with_context(|| format!("run {}", b.exe.display()))?
            .success();
        timings.push(Timing {
            what: what.clone(),
            took: started.elapsed(),
            ok,
        });
        if !ok {
            failed.push(what);
        }
    }
    println!(
        "==> {}: {} in {:.0} s",
        stage.name(),
        if failed.is_empty() { "ok" } else { "FAILED" },
        t.elapsed().as_secs_f64()
    );
    if !failed.is_empty() {
        bail!("{} failed: {}", stage.name(), failed.join(", "));
    }
    Ok(())
}

/// The binary as cargo runs it: in its package's directory, with that package's
/// `CARGO_MANIFEST_DIR` and `CARGO_PKG_NAME` instead of xtask's (`CARGO` stays).
fn command(b: &TestBinary) -> Command {
    let mut cmd = Command::new(&b.exe);
    crate::sh::without_crate_vars(&mut cmd)
        .current_dir(&b.dir)
        .env("CARGO_MANIFEST_DIR", &b.dir)
        .env("CARGO_MANIFEST_PATH", b.dir.join("Cargo.toml"))
        .env("CARGO_PKG_NAME", &b.package);
    cmd
}

/// The `n` slowest binaries as a table.
pub fn slowest(timings: &[Timing], n: usize) -> comfy_table::Table {
    let mut sorted: Vec<&Timing> = timings.iter().collect();
    sorted.sort_by_key(|t| std::cmp::Reverse(t.took));
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::ASCII_MARKDOWN);
    table.set_header(["test binary", "s", "result"]);
    for t in sorted.into_iter().take(n) {
        table.add_row([
            t.what.clone(),
            format!("{:.1}", t.took.as_secs_f64()),
            if t.ok { "ok" } else { "FAILED" }.to_owned(),
        ]);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_names_from_every_id_form() {
        assert_eq!(
            package_name("path+file:///work/main/crates/mpa#0.1.0"),
            Some("mpa")
        );
        assert_eq!(
            package_name("path+file:///work/main/crates/types#mms-types@0.1.0"),
            Some("mms-types")
        );
        assert_eq!(
            package_name("xtask 0.1.0 (path+file:///work/main/xtask)"),
            Some("xtask")
        );
    }

    #[test]
    fn test_executables_are_found_and_staged() {
        let msgs = [
            r#"{"reason":"compiler-artifact","package_id":"path+file:///r/crates/mpa#0.1.0","manifest_path":"/r/crates/mpa/Cargo.toml","target":{"kind":["lib"],"name":"mpa"},"profile":{"test":true},"executable":"/r/target/debug/deps/mpa-1"}"#,
            r#"{"reason":"compiler-artifact","package_id":"path+file:///r/crates/mpa#0.1.0","manifest_path":"/r/crates/mpa/Cargo.toml","target":{"kind":["lib"],"name":"mpa"},"profile":{"test":false},"executable":null}"#,
            r#"{"reason":"compiler-artifact","package_id":"path+file:///r/xtask#0.1.0","manifest_path":"/r/xtask/Cargo.toml","target":{"kind":["test"],"name":"e2e"},"profile":{"test":true},"executable":"/r/target/debug/deps/e2e-2"}"#,
            r#"{"reason":"compiler-artifact","package_id":"path+file:///r/xtask#0.1.0","manifest_path":"/r/xtask/Cargo.toml","target":{"kind":["bin"],"name":"xtask"},"profile":{"test":true},"executable":"/r/target/debug/deps/xtask-3"}"#,
            r#"{"reason":"build-finished","success":true}"#,
            "not json",
        ]
        .join("\n");
        let bins = parse(&msgs);
        assert_eq!(bins.len(), 3, "{bins:?}");
        assert_eq!(bins[0].package, "mpa");
        assert_eq!(bins[0].dir, PathBuf::from("/r/crates/mpa"));
        let staged = |s: Stage| -> Vec<&str> {
            bins.iter()
                .filter(|b| s.holds(b))
                .map(|b| b.name.as_str())
                .collect()
        };
        assert_eq!(staged(Stage::Crates), ["mpa"]);
        assert_eq!(staged(Stage::XtaskUnit), ["xtask"]);
        assert_eq!(staged(Stage::Testbed), ["e2e"]);
    }
}
