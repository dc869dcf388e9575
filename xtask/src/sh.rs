//! Running system commands (`ip`, `nft`, `iperf3`, OVS tools) with errors that say what failed.

use std::io::Write;
use std::process::{Command, Stdio};

use anyhow::{bail, Context};

/// Now in UTC, RFC 3339 to the second (`date -u`), empty if `date` fails: when a run started.
pub fn utc_now() -> String {
    run("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .map(|d| d.trim().to_owned())
        .unwrap_or_default()
}

/// The machine's 1-minute load average (`/proc/loadavg`), 0 if unreadable.
pub fn load_1min() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(0.0)
}

/// The running xtask binary, to start it again (the WAN emulator, experiment runs): derefs to
/// its path.
///
/// When cargo relinked `target/release/xtask` while this process ran (a test stage builds the
/// workspace), [`std::env::current_exe`] names a deleted file (`… (deleted)`) that cannot be
/// executed. Then the running image (`/proc/self/exe`, which still reads) is copied to a file of
/// our own in the temporary directory, removed again when this value is dropped: keep it until
/// the child has started. The child runs the very code that is running now, not whatever cargo
/// built since.
#[derive(Debug)]
pub struct SelfExe {
    path: std::path::PathBuf,
    temporary: bool,
}

impl std::ops::Deref for SelfExe {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.path
    }
}

impl Drop for SelfExe {
    fn drop(&mut self) {
        if self.temporary {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// See [`SelfExe`].
pub fn self_exe() -> anyhow::Result<SelfExe> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COPIES: AtomicU32 = AtomicU32::new(0);
    let exe = std::env::current_exe().context("locate the running xtask binary")?;
    if !exe.to_string_lossy().ends_with(" (deleted)") && exe.exists() {
        return Ok(SelfExe {
            path: exe,
            temporary: false,
        });
    }
    let n = COPIES.fetch_add(1, Ordering::Relaxed);
    let copy = std::env::temp_dir().join(format!("mms-xtask-self-{}-{n}", std::process::id()));
    let out = SelfExe {
        path: copy.clone(),
        temporary: true,
    };
    std::fs::copy("/proc/self/exe", &copy)
        .with_context(|| format!("copy the running xtask image to {}", copy.display()))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("chmod {}", copy.display()))?;
    Ok(out)
}

#[cfg(test)]
mod self_exe_tests {
    #[test]
    fn the_running_binary_is_found_and_exists() {
        let exe = super::self_exe().unwrap();
        assert!(exe.exists(), "{}", exe.display());
    }
}

/// Runs `prog args...`, returns stdout; a non-zero exit is an error carrying stderr.
pub fn run(prog: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("spawn {prog}"))?;
    if !out.status.success() {
        bail!(
            "`{prog} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Like [`run`] but ignores failure (for best-effort clean-up); returns whether it succeeded.
pub fn try_run(prog: &str, args: &[&str]) -> bool {
    Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Runs `prog args...` inside network namespace `ns` (`ip netns exec`).
pub fn ns(ns: &str, prog: &str, args: &[&str]) -> anyhow::Result<String> {
    let mut full = vec!["netns", "exec", ns, prog];
    full.extend_from_slice(args);
    run("ip", &full)
}

/// Feeds `lines` to `ip -n <ns> -batch -` (one `ip` command per line, much faster than one
/// process per command).
pub fn ip_batch(ns: &str, lines: &[String]) -> anyhow::Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    let mut child = Command::new("ip")
        .args(["-n", ns, "-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("spawn ip -batch")?;
    {
        let stdin = child.stdin.as_mut().context("ip -batch stdin")?;
        for l in lines {
            writeln!(stdin, "{l}").context("write to ip -batch")?;
        }
    }
    let out = child.wait_with_output().context("wait for ip -batch")?;
    if !out.status.success() {
        bail!(
            "ip -n {ns} -batch failed: {}\ncommands:\n{}",
            String::from_utf8_lossy(&out.stderr).trim(),
            lines.join("\n")
        );
    }
    Ok(())
}

/// Loads an nftables ruleset into namespace `ns` (`nft -f -`).
pub fn nft(ns: &str, ruleset: &str) -> anyhow::Result<()> {
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("spawn nft")?;
    child
        .stdin
        .as_mut()
        .context("nft stdin")?
        .write_all(ruleset.as_bytes())
        .context("write nft ruleset")?;
    let out = child.wait_with_output().context("wait for nft")?;
    if !out.status.success() {
        bail!(
            "nft -f in {ns} failed: {}\nruleset:\n{ruleset}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// True when `prog` is on PATH.
pub fn have(prog: &str) -> bool {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|d| d.join(prog).is_file()))
        .unwrap_or(false)
}

/// A `cargo` command (the `CARGO` that runs us, else `cargo` from `PATH`) for a nested build,
/// without the variables cargo sets for the crate that runs it (`CARGO_MANIFEST_DIR`,
/// `CARGO_PKG_*`, `OUT_DIR`, ...). Build scripts such as ring's declare `rerun-if-env-changed`
/// on those names, so a nested build that inherits xtask's (or a test's) values re-runs them and
/// recompiles ring, rustls and everything above them, ~2 minutes each time on 2 cores.
pub fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    without_crate_vars(&mut cmd);
    cmd
}

/// Removes from `cmd`'s environment the variables cargo set for the crate that runs us (see
/// [`cargo`]).
pub fn without_crate_vars(cmd: &mut Command) -> &mut Command {
    for (key, _) in std::env::vars_os() {
        if key.to_str().is_some_and(is_crate_var) {
            cmd.env_remove(&key);
        }
    }
    cmd
}

/// Whether cargo sets `name` for the crate it builds or runs (not for cargo itself).
fn is_crate_var(name: &str) -> bool {
    [
        "CARGO_PKG_",
        "CARGO_MANIFEST_",
        "CARGO_CRATE_",
        "CARGO_BIN_",
    ]
    .iter()
    .any(|p| name.starts_with(p))
        || matches!(
            name,
            "CARGO_PRIMARY_PACKAGE" | "CARGO_TARGET_TMPDIR" | "OUT_DIR" | "CARGO_RUSTC_CURRENT_DIR"
        )
}

#[cfg(test)]
mod tests {
    use super::is_crate_var;

    #[test]
    fn only_the_crate_variables_are_cleared() {
        for v in [
            "CARGO_MANIFEST_DIR",
            "CARGO_MANIFEST_PATH",
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
            "CARGO_CRATE_NAME",
            "CARGO_BIN_EXE_xtask",
            "CARGO_PRIMARY_PACKAGE",
            "OUT_DIR",
        ] {
            assert!(is_crate_var(v), "{v}");
        }
        for v in [
            "CARGO",
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_TERM_COLOR",
            "PATH",
        ] {
            assert!(!is_crate_var(v), "{v}");
        }
    }
}
