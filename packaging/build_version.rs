//! Build script shared by `mmsg` and `ssc` (`build = "../../packaging/build_version.rs"` in
//! their Cargo.toml): sets `MMS_VERSION_LONG`, the text of `--version` after the program name:
//! `0.1.0 (commit 4c03258, static, features: none)`.
//!
//! The commit comes from `MMS_GIT_COMMIT` if set (builds from a source tarball), else from
//! `git rev-parse --short=12 HEAD`, else `unknown` (no git, no `.git`): a build never fails for
//! want of version control.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-env-changed=MMS_GIT_COMMIT");
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = match std::env::var("MMS_GIT_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_owned(),
        _ => {
            // Rebuild when HEAD moves: HEAD itself (branch switch, detached commit) and the
            // ref it names (a commit on the branch, loose or packed), wherever this checkout
            // keeps them. Only files that exist: cargo reruns on every build for a missing one.
            let mut watch = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
            watch.extend(git(&dir, &["symbolic-ref", "-q", "HEAD"]));
            for f in &watch {
                if let Some(p) = git(&dir, &["rev-parse", "--git-path", f]) {
                    let p = dir.join(p);
                    if p.exists() {
                        println!("cargo:rerun-if-changed={}", p.display());
                    }
                }
            }
            git(&dir, &["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into())
        }
    };
    let link = if std::env::var("CARGO_CFG_TARGET_FEATURE")
        .unwrap_or_default()
        .split(',')
        .any(|f| f == "crt-static")
    {
        "static"
    } else {
        "dynamic"
    };
    let mut features: Vec<String> = std::env::vars()
        .filter_map(|(k, _)| k.strip_prefix("CARGO_FEATURE_").map(str::to_owned))
        .map(|f| f.to_lowercase().replace('_', "-"))
        .filter(|f| f != "default")
        .collect();
    features.sort();
    let features = if features.is_empty() {
        "none".to_owned()
    } else {
        features.join(",")
    };
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!(
        "cargo:rustc-env=MMS_VERSION_LONG={version} (commit {commit}, {link}, features: {features})"
    );
}
