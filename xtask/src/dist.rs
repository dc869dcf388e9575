//! `cargo xtask dist` (issue #21, docs/install.md): the static release binaries of `mmsg` and
//! `ssc`, their split debug info, man pages and shell completions, and the Debian packages
//! `mms-gateway` and `mms-controller` ([`crate::dist_deb`]).
//!
//! Order: one cargo build of both binaries (`--profile dist`, `+crt-static` on the GNU target:
//! the musl target cannot be installed here), then per binary: debug info into `<bin>.debug`
//! (`objcopy --only-keep-debug`), strip with a debuglink, check that `file` and `ldd` call it
//! static and that `<bin> --version` runs in an empty network namespace, generate the man pages
//! and completions with the binary itself (`generate-assets`); then the packages
//! ([`crate::dist_deb`]), the install check ([`crate::dist_install`]) and the install test
//! on the 2x2 testbed ([`crate::dist_enrol`]: `ssc init`, zero-touch `mmsg enrol`, TLS
//! tunnels, traffic). Every check
//! that fails is an error: CI runs this as one stage of `cargo xtask test`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{ensure, Context};
use serde_json::Value;

pub use crate::dist_bin::Binary;
use crate::dist_bin::{check_static, version_in_empty_netns};

/// The target of the static build (DESIGN §1).
pub const TARGET: &str = "x86_64-unknown-linux-gnu";

/// `--lto`: the link-time optimisation of the dist profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lto {
    /// Whole-program LTO (`lto = "fat"` in `[profile.dist]`): smallest, slowest to link.
    Fat,
    /// ThinLTO (`CARGO_PROFILE_DIST_LTO=thin`): parallel, faster to build.
    Thin,
    /// No LTO and 16 codegen units (`CARGO_PROFILE_DIST_LTO=off`,
    /// `CARGO_PROFILE_DIST_CODEGEN_UNITS=16`): the fastest build, what `cargo xtask test` uses
    /// to check the packaging, the static linking and the install. Not for shipped packages.
    Off,
}

/// What `cargo xtask dist` does.
#[derive(Debug, Clone)]
pub struct Options {
    /// The workspace root.
    pub root: PathBuf,
    /// Where the binaries, debug files, assets and packages go.
    pub out: PathBuf,
    /// LTO mode.
    pub lto: Lto,
}

/// What `cargo xtask dist` made.
#[derive(Debug)]
pub struct Report {
    /// Wall-clock seconds of the cargo build.
    pub build_secs: f64,
    /// The two binaries.
    pub binaries: Vec<Binary>,
    /// The two packages.
    pub packages: Vec<crate::dist_deb::Package>,
}

/// The binaries: (package, bin).
const BINS: [(&str, &str); 2] = [("mmsg-dataplane", "mmsg"), ("controller", "ssc")];

/// `cargo xtask dist` (also the last stage of `cargo xtask test`): [`run`] into `out` (default
/// `<target dir>/mms-dist`), then the total time.
pub fn main(root: PathBuf, lto: Lto, out: Option<PathBuf>) -> anyhow::Result<()> {
    let t = Instant::now();
    let out = out.unwrap_or_else(|| {
        std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("target"))
            .join("mms-dist")
    });
    let report = run(&Options { root, out, lto })?;
    println!(
        "==> dist: ok in {:.0} s (cargo build {:.0} s)",
        t.elapsed().as_secs_f64(),
        report.build_secs
    );
    Ok(())
}

/// Runs the whole of `cargo xtask dist`.
pub fn run(o: &Options) -> anyhow::Result<Report> {
    crate::deps::ensure()?;
    for tool in ["objcopy", "file", "ldd", "dpkg-deb", "unshare", "gzip"] {
        ensure!(
            crate::sh::have(tool),
            "`{tool}` is needed for cargo xtask dist"
        );
    }
    let t = Instant::now();
    let built = build(&o.root, o.lto)?;
    let build_secs = t.elapsed().as_secs_f64();
    println!("==> dist build ({:?} LTO): {build_secs:.0} s", o.lto);
    for d in ["bin", "debug", "assets", "root"] {
        let d = o.out.join(d);
        if d.exists() {
            std::fs::remove_dir_all(&d).with_context(|| format!("clean {}", d.display()))?;
        }
        std::fs::create_dir_all(&d).with_context(|| format!("create {}", d.display()))?;
    }
    let mut binaries = Vec::new();
    for ((_, name), exe) in BINS.iter().zip(built) {
        binaries.push(finish(name, &exe, &o.out)?);
    }
    for b in &binaries {
        let (full, stripped, debug) = b.sizes;
        println!(
            "{:<5} {:>6.1} MiB stripped ({:.1} MiB with debug info; {} {:.1} MiB)  {}",
            b.name,
            mib(stripped),
            mib(full),
            b.debug.display(),
            mib(debug),
            b.version
        );
    }
    let packages = crate::dist_deb::build_all(&o.root, &o.out, &binaries)?;
    for p in &packages {
        println!(
            "{:<15} {:>6.1} MiB  {}",
            p.name,
            mib(p.size),
            p.deb.display()
        );
    }
    let root = packages
        .first()
        .map(|p| p.root.clone())
        .context("no package")?;
    crate::dist_install::run(&root, &o.out.join("scratch"))?;
    crate::dist_enrol::run(&root, &o.root, &o.out.join("scratch-enrol"))?;
    Ok(Report {
        build_secs,
        binaries,
        packages,
    })
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The cargo build of both binaries; returns their paths in [`BINS`] order.
fn build(root: &Path, lto: Lto) -> anyhow::Result<Vec<PathBuf>> {
    let mut rustflags = std::env::var("RUSTFLAGS").unwrap_or_default();
    if !rustflags.is_empty() {
        rustflags.push(' ');
    }
    rustflags.push_str("-C target-feature=+crt-static");
    let mut cmd = crate::sh::cargo();
    cmd.current_dir(root)
        .args(["build", "--profile", "dist", "--target", TARGET])
        .env("RUSTFLAGS", rustflags)
        .env(
            "CARGO_PROFILE_DIST_LTO",
            match lto {
                Lto::Fat => "fat",
                Lto::Thin => "thin",
                Lto::Off => "off",
            },
        );
    if lto == Lto::Off {
        cmd.env("CARGO_PROFILE_DIST_CODEGEN_UNITS", "16");
    }
    for (package, bin) in BINS {
        cmd.args(["-p", package, "--bin", bin]);
    }
    println!("==> cargo build --profile dist --target {TARGET} (+crt-static, {lto:?} LTO)");
    let out = cmd
        .arg("--message-format=json-render-diagnostics")
        .stderr(Stdio::inherit())
        .output()
        .context("run cargo build")?;
    ensure!(out.status.success(), "cargo build --profile dist failed");
    let mut found = std::collections::BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let name = v.pointer("/target/name").and_then(Value::as_str);
        if let (Some(name), Some(exe)) = (name, v.get("executable").and_then(Value::as_str)) {
            found.insert(name.to_owned(), PathBuf::from(exe));
        }
    }
    BINS.iter()
        .map(|(_, bin)| {
            found
                .remove(*bin)
                .with_context(|| format!("cargo did not report {bin}"))
        })
        .collect()
}

fn size(p: &Path) -> anyhow::Result<u64> {
    Ok(std::fs::metadata(p)
        .with_context(|| format!("stat {}", p.display()))?
        .len())
}

/// Split, strip, check and generate the assets of one binary.
fn finish(name: &'static str, exe: &Path, out: &Path) -> anyhow::Result<Binary> {
    let path = out.join("bin").join(name);
    let debug = out.join("debug").join(format!("{name}.debug"));
    std::fs::copy(exe, &path).with_context(|| format!("copy {}", exe.display()))?;
    let full = size(&path)?;
    let dbg = debug.to_string_lossy().into_owned();
    let bin = path.to_string_lossy().into_owned();
    crate::sh::run("objcopy", &["--only-keep-debug", &bin, &dbg])?;
    // The debuglink names the file only; gdb finds it next to the binary or in
    // /usr/lib/debug/.build-id (build id kept: `file` prints it).
    crate::sh::run(
        "objcopy",
        &["--strip-all", &format!("--add-gnu-debuglink={dbg}"), &bin],
    )?;
    check_static(&path)?;
    let version = version_in_empty_netns(&path)?;
    ensure!(
        version.starts_with(&format!("{name} ")) && version.contains("(commit "),
        "{name} --version printed {version:?}"
    );
    ensure!(
        version.contains(", static,"),
        "{name} --version does not say static: {version:?}"
    );
    let assets = out.join("assets").join(name);
    let st = Command::new(&path)
        .arg("generate-assets")
        .arg("--out-dir")
        .arg(&assets)
        .status()
        .with_context(|| format!("run {name} generate-assets"))?;
    ensure!(st.success(), "{name} generate-assets failed");
    Ok(Binary {
        name,
        sizes: (full, size(&path)?, size(&debug)?),
        path,
        debug,
        version,
        assets,
    })
}
