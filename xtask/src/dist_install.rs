//! The install check of `cargo xtask dist` (docs/install.md): both packages unpacked into a
//! throw-away root (never the host's `/etc` or systemd), each daemon started from there the way
//! its unit starts it (`ExecStartPre` check, then run, each in its own new network namespace
//! so the packaged listen addresses collide with nothing) with a `NOTIFY_SOCKET` of ours in
//! place of systemd's: the check passes when `READY=1` arrives while the daemon runs, and
//! `STOPPING=1` plus a clean exit follow SIGTERM (`Type=notify`, `systemctl stop`).
//!
//! What differs from a real install, and only this: state paths (`/var/lib/ssc`, the
//! gateway's `/etc/mms/tls`) point into the throw-away root, the gateway runs with `--no-setup`
//! and `--control` in the scratch directory, and its TLS credentials come from
//! [`crate::mmsg::provision_tls`] instead of an enrolment.

use std::io::ErrorKind;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};

/// Longest wait for `READY=1` (a static binary on a busy 2-core machine starts in well under a
/// second; the margin is for load from parallel builds).
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest wait for the exit after SIGTERM (the units' `TimeoutStopSec`).
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// Runs both daemons from `root` (the unpacked packages) with scratch state in `scratch`.
pub fn run(root: &Path, scratch: &Path) -> anyhow::Result<()> {
    if scratch.exists() {
        std::fs::remove_dir_all(scratch).with_context(|| format!("clean {}", scratch.display()))?;
    }
    std::fs::create_dir_all(scratch).with_context(|| format!("create {}", scratch.display()))?;
    controller(root, &scratch.join("ssc"))?;
    gateway(root, &scratch.join("mmsg"))?;
    Ok(())
}

/// `ssc` with the packaged `/etc/mms/ssc.toml`; `/var/lib/ssc` → `dir` and the bootstrap token
/// made as the postinst makes it.
fn controller(root: &Path, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let packaged = std::fs::read_to_string(root.join("etc/mms/ssc.toml"))
        .context("read the packaged ssc.toml")?;
    let config = packaged.replace("/var/lib/ssc/", &format!("{}/", dir.display()));
    ensure!(
        config != packaged,
        "the packaged ssc.toml has no /var/lib/ssc paths"
    );
    let cfg = dir.join("ssc.toml");
    std::fs::write(&cfg, config).context("write ssc.toml")?;
    let token = dir.join("ssc.token");
    let st = Command::new("sh")
        .arg("-c")
        .arg("umask 077; head -c 24 /dev/urandom | base64 > \"$0\"")
        .arg(&token)
        .status()
        .context("make the token")?;
    ensure!(st.success(), "make the bootstrap token");
    let ssc = root.join("usr/bin/ssc");
    let script = format!(
        "ip link set lo up && {ssc} check --config-only --config {cfg} && exec {ssc} run --config {cfg}",
        ssc = ssc.display(),
        cfg = cfg.display()
    );
    let started = notify_cycle("ssc", dir, &script)?;
    println!("==> install check: ssc from the package READY after {started:.1} s, stopped cleanly");
    ensure!(
        dir.join("ca").join("ca.pem").exists(),
        "ssc did not create its CA next to the database"
    );
    Ok(())
}

/// `mmsg` with the packaged `/etc/mms/mmsg.toml` (TLS on, controller unreachable: it starts
/// anyway and retries); the WAN port `wan0` of the file is one end of a veth pair (this kernel
/// has no dummy links).
fn gateway(root: &Path, dir: &Path) -> anyhow::Result<()> {
    let tls = crate::mmsg::provision_tls(&dir.join("tls"), "dst-install", &[1])?;
    let t = tls.get(&1).context("branch 1 credentials")?;
    let packaged = std::fs::read_to_string(root.join("etc/mms/mmsg.toml"))
        .context("read the packaged mmsg.toml")?;
    let mut config = packaged.clone();
    for (from, to) in [
        ("/etc/mms/tls/ca.pem", &t.ca_file),
        ("/etc/mms/tls/gw.pem", &t.cert_file),
        ("/etc/mms/tls/gw.key", &t.key_file),
        ("/etc/mms/tls/crl.pem", &t.crl_file),
    ] {
        ensure!(
            config.contains(from),
            "the packaged mmsg.toml has no {from}"
        );
        let to = to.as_deref().context("provision_tls wrote no such file")?;
        config = config.replace(from, &to.display().to_string());
    }
    let cfg = dir.join("mmsg.toml");
    std::fs::write(&cfg, config).context("write mmsg.toml")?;
    let mmsg = root.join("usr/bin/mmsg");
    let script = format!(
        "ip link set lo up && ip link add wan0 type veth peer name wan0p \
         && ip addr add 198.18.10.2/24 dev wan0 && ip link set wan0p up && ip link set wan0 up \
         && {mmsg} check --config {cfg} \
         && exec {mmsg} run --config {cfg} --no-setup --path-manager kernel --control {ctl}",
        mmsg = mmsg.display(),
        cfg = cfg.display(),
        ctl = dir.join("mmsg.sock").display()
    );
    let started = notify_cycle("mmsg", dir, &script)?;
    println!(
        "==> install check: mmsg from the package READY after {started:.1} s (TLS on), stopped cleanly"
    );
    Ok(())
}

/// Starts `script` under `sh` in a new network namespace with `NOTIFY_SOCKET` pointing at a
/// socket of ours; waits for `READY=1`, sends SIGTERM, waits for `STOPPING=1` and exit 0.
/// Returns the seconds until `READY=1`.
fn notify_cycle(name: &str, dir: &Path, script: &str) -> anyhow::Result<f64> {
    let sock_path = dir.join("notify.sock");
    let _ = std::fs::remove_file(&sock_path);
    let sock = UnixDatagram::bind(&sock_path).context("bind the notify socket")?;
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).context("create log")?;
    let t = Instant::now();
    let mut child = Command::new("unshare")
        .args(["--net", "--", "sh", "-c", script])
        .env("NOTIFY_SOCKET", &sock_path)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .with_context(|| format!("start {name}"))?;
    let result = cycle(name, &sock, &mut child, t);
    if child.try_wait().ok().flatten().is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    result.with_context(|| format!("{name} log: {}", dir.join(format!("{name}.log")).display()))
}

fn cycle(name: &str, sock: &UnixDatagram, child: &mut Child, t: Instant) -> anyhow::Result<f64> {
    wait_for(sock, child, "READY=1", READY_TIMEOUT)
        .with_context(|| format!("{name}: no READY=1"))?;
    let ready = t.elapsed().as_secs_f64();
    ensure!(
        child.try_wait()?.is_none(),
        "{name} exited right after READY=1"
    );
    let pid = libc::pid_t::try_from(child.id()).context("pid")?;
    // SAFETY: kill has no memory preconditions; `pid` is our own child (sh exec'd the daemon,
    // so it is the daemon itself), not yet reaped.
    ensure!(
        unsafe { libc::kill(pid, libc::SIGTERM) } == 0,
        "kill {name}"
    );
    wait_for(sock, child, "STOPPING=1", STOP_TIMEOUT)
        .with_context(|| format!("{name}: no STOPPING=1 after SIGTERM"))?;
    let deadline = Instant::now() + STOP_TIMEOUT;
    loop {
        if let Some(st) = child.try_wait()? {
            ensure!(st.success(), "{name} exited with {st} after SIGTERM");
            return Ok(ready);
        }
        if Instant::now() > deadline {
            bail!("{name} still running {STOP_TIMEOUT:?} after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Reads notify datagrams until one has the line `want`; fails early when the child exits.
fn wait_for(
    sock: &UnixDatagram,
    child: &mut Child,
    want: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    sock.set_read_timeout(Some(Duration::from_millis(200)))?;
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        match sock.recv(&mut buf) {
            Ok(n) => {
                let msg = String::from_utf8_lossy(buf.get(..n).unwrap_or_default());
                if msg.lines().any(|l| l == want) {
                    return Ok(());
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if let Some(st) = child.try_wait()? {
                    bail!("exited with {st} before {want}");
                }
            }
            Err(e) => return Err(e).context("recv on the notify socket"),
        }
    }
    bail!("no {want} within {timeout:?}")
}
