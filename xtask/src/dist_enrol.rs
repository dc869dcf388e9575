//! The install test of `cargo xtask dist` (issue #21 "Must show", docs/ops.md §8): both
//! packages unpacked with `dpkg -x` into a throw-away root, the 2x2 testbed
//! (`examples/testbed-2x2.toml`, network namespaces, no OVS), and from the unpacked root only
//! the commands docs/ops.md §3–4 shows: `ssc init`, `ssc run`, `ssc import`,
//! `ssc enrol-token`, then per gateway `mmsg enrol --write-config` (zero-touch: one token, one
//! command), `mmsg check` and `mmsg run` from the written config. Passes when ping and a short
//! iperf3 cross between the two LANs over the TLS tunnels.
//!
//! `ssc` runs in the testbed's `inet` namespace (the WAN routers); each gateway reaches it at
//! its first WAN next hop (`198.18.10.1`, `198.18.20.1`). What differs from a real install:
//! paths point into the scratch directory (`--config`, `--state-dir`, `--dir`,
//! `--write-config`, `--controller-cache`), and the daemons are started directly rather than
//! by systemd (the unit start itself is [`crate::dist_install`]'s check).

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use serde_json::Value;

use crate::testbed::{self, host_addr, ns_gw, ns_host, ns_inet};

/// Longest wait for both gateways' tunnels (4 connections each way, 4 subflows each).
const TUNNELS_TIMEOUT: Duration = Duration::from_secs(45);
/// iperf3 seconds: enough to see the TLS tunnels carry a bulk flow, short for CI.
const IPERF_SECS: &str = "3";
/// The smallest goodput accepted (Mbit/s): the 2x2 uplinks allow ~50; the margin is for a
/// machine loaded by parallel builds.
const MIN_MBPS: f64 = 2.0;

/// A daemon we started; SIGTERM (then SIGKILL) by PID on drop.
struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Daemon {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        testbed::stop_pids(&[self.child.id()], Duration::from_secs(5));
        let _ = self.child.wait();
    }
}

/// Runs `cmd`, fails with its stderr.
fn ok(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("spawn {cmd:?}"))?;
    ensure!(
        out.status.success(),
        "{cmd:?} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn in_ns(ns: &str, prog: &Path) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).arg(prog);
    c
}

/// The install test: `root` is the unpacked packages (`usr/bin/ssc`, `usr/bin/mmsg`), `repo`
/// the workspace (the 2x2 topology and inventory), `scratch` a directory for everything else.
pub fn run(root: &Path, repo: &Path, scratch: &Path) -> anyhow::Result<()> {
    for tool in ["ip", "ping", "iperf3"] {
        ensure!(
            crate::sh::have(tool),
            "`{tool}` is needed for the install test"
        );
    }
    let t = Instant::now();
    if scratch.exists() {
        std::fs::remove_dir_all(scratch).with_context(|| format!("clean {}", scratch.display()))?;
    }
    std::fs::create_dir_all(scratch)?;
    let topo = crate::topology::parse(
        &std::fs::read_to_string(repo.join("examples/testbed-2x2.toml"))
            .context("read examples/testbed-2x2.toml")?,
    )?;
    let prefix = format!("inx{}", std::process::id() % 1000);
    testbed::run_on(&topo, &prefix, || on_testbed(root, repo, scratch, &prefix))?;
    println!(
        "==> install test: ssc init, 2 gateways enrolled zero-touch, TLS tunnels, ping + iperf3 ok in {:.0} s",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

fn on_testbed(root: &Path, repo: &Path, dir: &Path, prefix: &str) -> anyhow::Result<()> {
    let ssc = root.join("usr/bin/ssc");
    let mmsg = root.join("usr/bin/mmsg");
    let inet = ns_inet(prefix);
    // Replies of a local process in `inet` would be diverted into the WAN emulator (which only
    // forwards between branches): the controller's own addresses route normally.
    for a in ["198.18.10.1", "198.18.20.1"] {
        crate::sh::run(
            "ip",
            &[
                "-n", &inet, "rule", "add", "pref", "90", "from", a, "lookup", "main",
            ],
        )?;
    }

    // docs/ops.md §3: the controller.
    let cfg = dir.join("etc/ssc.toml");
    let state = dir.join("var/lib/ssc");
    let init = ok(Command::new(&ssc)
        .arg("init")
        .arg("--config")
        .arg(&cfg)
        .arg("--state-dir")
        .arg(&state)
        .args(["--public-address", "198.18.10.1:6691"]))?;
    let fingerprint = init
        .split("(fingerprint ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .context("ssc init printed no CA fingerprint")?
        .to_owned();
    ensure!(
        init.contains("--write-config"),
        "ssc init does not print the zero-touch command: {init}"
    );
    let log = dir.join("ssc.log");
    let mut child = in_ns(&inet, &ssc)
        .arg("run")
        .arg("--config")
        .arg(&cfg)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .context("start ssc")?;
    // ssc prints its listeners on stdout; a thread keeps reading it (a closed pipe would fail
    // its later prints) and hands over the REST API line.
    let (tx, rx) = std::sync::mpsc::channel();
    if let Some(o) = child.stdout.take() {
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(o).lines().map_while(Result::ok) {
                if let Some(a) = l.trim().strip_prefix("ssc: REST API listening on ") {
                    let _ = tx.send(a.to_owned());
                }
            }
        });
    }
    let ssc_proc = Daemon { child, log };
    let api = rx
        .recv_timeout(Duration::from_secs(30))
        .with_context(|| format!("ssc did not start: {}", ssc_proc.log()))?;
    let token = std::fs::read_to_string(state.join("ssc.token"))
        .context("the bootstrap token of ssc init")?;
    let ssc_cli = |args: &[&str]| {
        ok(in_ns(&inet, &ssc)
            .args(args)
            .args(["--api", &api])
            .env("SSC_TOKEN", token.trim()))
    };
    ssc_cli(&[
        "import",
        "--inventory",
        &repo
            .join("examples/inventory-2x2.toml")
            .display()
            .to_string(),
        "--paths",
        &repo.join("examples/paths-2x2.toml").display().to_string(),
    ])?;
    let ca = state.join("ca/ca.pem");

    // docs/ops.md §4: one token and one command per gateway, then run from the written file.
    let mut gws = Vec::new();
    for b in [1u8, 2] {
        let out = ssc_cli(&["enrol-token", "--branch", &b.to_string()])?;
        let tok = out.lines().next().context("no token")?.trim().to_owned();
        let gw = dir.join(format!("gw{b}"));
        let written = gw.join("mmsg.toml");
        let ns = ns_gw(prefix, b);
        let o = ok(in_ns(&ns, &mmsg)
            .args([
                "enrol",
                "--controller",
                &format!("tls:198.18.{}.1:6691", 10 * b),
            ])
            .args(["--branch", &b.to_string(), "--ca-fingerprint", &fingerprint])
            .arg("--ca")
            .arg(&ca)
            .arg("--dir")
            .arg(gw.join("tls"))
            .arg("--write-config")
            .arg(&written)
            .arg("--controller-cache")
            .arg(gw.join("controller-config.json"))
            .env("MMSG_ENROL_TOKEN", &tok))?;
        ensure!(o.contains("config written to"), "mmsg enrol: {o}");
        ok(Command::new(&mmsg)
            .arg("check")
            .arg("--config")
            .arg(&written))?;
        let log = gw.join("mmsg.log");
        let control = gw.join("mmsg.sock");
        let child = in_ns(&ns, &mmsg)
            .arg("run")
            .arg("--config")
            .arg(&written)
            .arg("--control")
            .arg(&control)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .context("start mmsg")?;
        gws.push((Daemon { child, log }, control));
    }
    let logs = || {
        let mut s = format!("--- ssc ---\n{}", ssc_proc.log());
        for (i, (d, _)) in gws.iter().enumerate() {
            s.push_str(&format!("\n--- gw{} ---\n{}", i + 1, d.log()));
        }
        s
    };
    let deadline = Instant::now() + TUNNELS_TIMEOUT;
    loop {
        let up = gws
            .iter()
            .all(|(_, c)| status(&mmsg, c).is_some_and(|s| all_up(&s)));
        if up {
            break;
        }
        if Instant::now() > deadline {
            bail!("TLS tunnels not up within {TUNNELS_TIMEOUT:?}\n{}", logs());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    for (_, c) in &gws {
        let s = status(&mmsg, c).context("mmsg status")?;
        ensure!(
            s.pointer("/tls/serial").and_then(Value::as_u64).is_some()
                && s.pointer("/controller/source").and_then(Value::as_str) == Some("controller"),
            "not on TLS with the controller's config: {s}"
        );
    }
    let (h1, h2) = (ns_host(prefix, 1, 0), ns_host(prefix, 2, 0));
    let dst = host_addr(2, 0).to_string();
    crate::sh::ns(&h1, "ping", &["-c", "3", "-i", "0.2", "-W", "2", &dst]).with_context(logs)?;
    let server = crate::iperf::Server::start(&h2, 5201, None)?;
    let v = crate::iperf::client(&h1, &["-c", &dst, "-t", IPERF_SECS, "-p", "5201"])
        .with_context(logs)?;
    server.wait(Duration::from_secs(5));
    let mbps = crate::iperf::tcp_received_mbps(&v).context("iperf3 goodput")?;
    println!(
        "==> install test: ping h1 -> h2 ok, iperf3 h1 -> h2 {mbps:.1} Mbit/s over TLS tunnels"
    );
    ensure!(
        mbps > MIN_MBPS,
        "iperf3 {mbps:.1} Mbit/s ≤ {MIN_MBPS}\n{}",
        logs()
    );
    drop(gws);
    drop(ssc_proc);
    Ok(())
}

/// `mmsg status --json` of the daemon behind `control` (`None` while it does not answer).
fn status(mmsg: &Path, control: &Path) -> Option<serde_json::Value> {
    let out = Command::new(mmsg)
        .args(["status", "--json", "--control"])
        .arg(control)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).ok())
        .flatten()
}

/// Both directions' 4 connections up with 4 established subflows each.
fn all_up(s: &Value) -> bool {
    let Some(conns) = s.get("connections").and_then(Value::as_array) else {
        return false;
    };
    let field = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let count = |d: &str| {
        conns
            .iter()
            .filter(|c| field(c, "direction").as_deref() == Some(d))
            .count()
    };
    count("out") == 4
        && count("in") == 4
        && conns.iter().all(|c| {
            field(c, "state").as_deref() == Some("up")
                && c.get("subflows")
                    .and_then(Value::as_array)
                    .is_some_and(|sf| {
                        sf.iter()
                            .filter(|x| field(x, "state").as_deref() == Some("established"))
                            .count()
                            == 4
                    })
        })
}
