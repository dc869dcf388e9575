//! The two static binaries of `cargo xtask dist` as built and checked (docs/install.md §1): the
//! checks shared by [`crate::dist`] (after the build) and [`crate::dist_deb`] (after unpacking
//! a package): static per `file` and `ldd`, `--version` in an empty network namespace.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, ensure, Context};

/// One static binary as built and checked.
#[derive(Debug, Clone)]
pub struct Binary {
    /// `mmsg` or `ssc`.
    pub name: &'static str,
    /// The stripped executable in `out/bin`.
    pub path: PathBuf,
    /// Its split debug info (`out/debug/<name>.debug`).
    pub debug: PathBuf,
    /// Size before stripping, stripped size, size of the debug file (bytes).
    pub sizes: (u64, u64, u64),
    /// `--version` as printed in an empty network namespace.
    pub version: String,
    /// Man pages and completions (`out/assets/<name>/{man,completions}`).
    pub assets: PathBuf,
}

/// `file` must say statically linked (static-pie counts) and `ldd` must find no libraries.
pub fn check_static(path: &Path) -> anyhow::Result<()> {
    let p = path.to_string_lossy();
    let file = crate::sh::run("file", &["-b", &p])?;
    println!("file {}: {}", path.display(), file.trim());
    ensure!(
        file.contains("statically linked") || file.contains("static-pie linked"),
        "{} is not static: {file}",
        path.display()
    );
    ensure!(
        file.contains("x86-64"),
        "{} is not x86-64: {file}",
        path.display()
    );
    // ldd exits 1 for "not a dynamic executable"; for static-pie it prints "statically linked".
    let ldd = Command::new("ldd").arg(path).output().context("run ldd")?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&ldd.stdout),
        String::from_utf8_lossy(&ldd.stderr)
    );
    println!("ldd {}: {}", path.display(), text.trim());
    if text.contains("=>") || text.contains("ld-linux") {
        bail!("{} links shared libraries: {text}", path.display());
    }
    ensure!(
        text.contains("statically linked") || text.contains("not a dynamic executable"),
        "ldd {}: {text}",
        path.display()
    );
    Ok(())
}

/// `<bin> --version` in a new, empty network namespace (only a down `lo`): the binary needs
/// neither the network nor any file of the build machine to start.
pub fn version_in_empty_netns(path: &Path) -> anyhow::Result<String> {
    let out = Command::new("unshare")
        .arg("--net")
        .arg("--")
        .arg(path)
        .arg("--version")
        .env_clear()
        .output()
        .context("run unshare --net")?;
    ensure!(
        out.status.success(),
        "{} --version in an empty netns: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
