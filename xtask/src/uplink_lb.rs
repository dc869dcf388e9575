//! `cargo xtask experiment uplink-lb`: seed 004's experiment (§7, Fig. 6/9/10) on `mmsg`'s
//! external traffic load balancing (`[internet]`, `docs/mmsg.md`).
//!
//! Topology (namespaces `<prefix>-{h,g,i}`, like `crates/mmsg-dataplane/tests/netns_uplink_lb.rs`):
//! LAN host `h` — gateway `g` (two uplinks `wan0`, `wan1`) — "internet" `i` with a web server at
//! 198.18.99.1. Each uplink is shaped with `tbf` in both directions (download: `i`'s egress
//! towards `g`; upload and ACKs: `g`'s egress) to the scenario's rates: 10 + 10 Mbit/s (§7.1) and
//! 10 + 5 Mbit/s (our non-uniform case; the paper's §7.2 used 10 + 20).
//!
//! Per scenario and mode, `reps` times: 100 HTTP GETs of a 100 kB file, 20 at a time, one TCP
//! connection each (like `ab -n 100 -c 20`, §7.1 with C = 20), by a small Python client
//! ([`CLIENT_PY`]); the total time is measured by the client. Modes:
//! - `single`, `rr`, `mbw`, `wrr`: `mmsg run` in `g` with `[internet] policy = ...` and the
//!   scenario's capacities, client in `h` (through the gateway's SNAT).
//! - `mptcp`: no `mmsg`; the client runs in `g` itself as a host multihomed on both uplinks (in-
//!   kernel path manager, a `subflow` endpoint per uplink, policy routing per source address),
//!   through `mptcpize`, against the same server run through `mptcpize` (port 8081).
//!
//! `mmsg` only programs the kernel here (the data path is the kernel's forwarding and NAT), so
//! its debug build is used. Results: `results/uplink-lb.{json,md}` and `results/uplink-lb.svg`.
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use mpa::config::{Config, UplinkPolicy};

use crate::mmsg::{self, Profile};
use crate::{sh, stats};

/// The web server's address (on `lo` of the internet namespace).
const SERVER: &str = "198.18.99.1";
/// File size of each download (Fig. 9: 100 kB).
pub const FILE_BYTES: usize = 100_000;
/// Downloads per run (§7.1: 100 HTTP requests).
pub const REQUESTS: usize = 100;
/// Concurrency (§7.1: C = 20).
pub const CONCURRENCY: usize = 20;
/// The modes, in report order.
pub const MODES: [&str; 5] = ["single", "rr", "mbw", "wrr", "mptcp"];
/// Paper: load balancing vs single link (abstract, §9).
pub const PAPER_GAIN_VS_SINGLE: f64 = 0.55;
/// Paper: load balancing vs MPTCP.
pub const PAPER_GAIN_VS_MPTCP: f64 = 0.10;

/// The download client: N GETs, C at a time, a new connection each; prints one JSON line.
pub const CLIENT_PY: &str = r#"
import http.client, json, sys, threading, time
host, port, path, n, c = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
lock = threading.Lock()
state = {"next": 0, "ok": 0, "bytes": 0, "errors": 0}
def worker():
    while True:
        with lock:
            if state["next"] >= n:
                return
            state["next"] += 1
        try:
            conn = http.client.HTTPConnection(host, port, timeout=60)
            conn.request("GET", path, headers={"Connection": "close"})
            body = conn.getresponse().read()
            conn.close()
            with lock:
                state["ok"] += 1
                state["bytes"] += len(body)
        except Exception:
            with lock:
                state["errors"] += 1
t0 = time.monotonic()
threads = [threading.Thread(target=worker) for _ in range(c)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps({"total_s": time.monotonic() - t0, "ok": state["ok"], "bytes": state["bytes"], "errors": state["errors"]}))
"#;

/// Options of the run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Repository root.
    pub root: PathBuf,
    /// Namespace name prefix.
    pub prefix: String,
    /// Repetitions per (scenario, mode).
    pub reps: u32,
    /// Output directory.
    pub out_dir: PathBuf,
}

/// One run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    /// Total time of the 100 downloads, s.
    pub total_s: f64,
    /// Application goodput, Mbit/s.
    pub goodput_mbit: f64,
    /// Downloads that completed.
    pub ok: u64,
    /// Bytes received on each uplink of the gateway during the run.
    pub uplink_rx_bytes: Vec<u64>,
}

/// All runs of one mode in one scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModeResult {
    /// `single`, `rr`, `mbw`, `wrr` or `mptcp`.
    pub mode: String,
    /// The runs.
    pub runs: Vec<Run>,
    /// Median total time, s.
    pub median_s: f64,
}

/// One scenario (uplink rates).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Scenario {
    /// The uplink rates, Mbit/s.
    pub rates_mbit: Vec<u32>,
    /// Per mode.
    pub modes: Vec<ModeResult>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// Requests per run.
    pub requests: usize,
    /// File size, bytes.
    pub file_bytes: usize,
    /// Concurrency.
    pub concurrency: usize,
    /// The scenarios.
    pub scenarios: Vec<Scenario>,
}

struct Namespaces(Vec<String>);

impl Drop for Namespaces {
    fn drop(&mut self) {
        for ns in &self.0 {
            let _ = sh::try_run("ip", &["netns", "del", ns]);
        }
    }
}

/// A process we started, stopped by its PID on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let pid = self.0.id().to_string();
        let _ = sh::try_run("kill", &["-TERM", &pid]);
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn ip(ns: &str, args: &str) -> anyhow::Result<()> {
    let a: Vec<&str> = args.split_whitespace().collect();
    sh::ns(ns, "ip", &a).map(|_| ())
}

struct Topo {
    _guard: Namespaces,
    h: String,
    g: String,
    i: String,
}

fn topology(prefix: &str, rates: &[u32]) -> anyhow::Result<Topo> {
    let (h, g, i) = (
        format!("{prefix}-h"),
        format!("{prefix}-g"),
        format!("{prefix}-i"),
    );
    for ns in [&h, &g, &i] {
        let _ = sh::try_run("ip", &["netns", "del", ns]);
    }
    let guard = Namespaces(vec![h.clone(), g.clone(), i.clone()]);
    for ns in [&h, &g, &i] {
        sh::run("ip", &["netns", "add", ns])?;
        ip(ns, "link set lo up")?;
    }
    sh::run(
        "ip",
        &[
            "link", "add", "h0", "netns", &h, "type", "veth", "peer", "name", "lan0", "netns", &g,
        ],
    )?;
    ip(&h, "addr add 198.19.1.2/24 dev h0")?;
    ip(&h, "link set h0 up")?;
    ip(&h, "route add default via 198.19.1.1")?;
    ip(&g, "addr add 198.19.1.1/24 dev lan0")?;
    ip(&g, "link set lan0 up")?;
    for (k, rate) in rates.iter().enumerate() {
        let (wan, r) = (format!("wan{k}"), format!("r{k}"));
        sh::run(
            "ip",
            &[
                "link", "add", &wan, "netns", &g, "type", "veth", "peer", "name", &r, "netns", &i,
            ],
        )?;
        ip(&g, &format!("addr add 198.18.1{k}.2/24 dev {wan}"))?;
        ip(&g, &format!("link set {wan} up"))?;
        ip(&i, &format!("addr add 198.18.1{k}.1/24 dev {r}"))?;
        ip(&i, &format!("link set {r} up"))?;
        // Both directions at the uplink's rate; a 50 ms queue like a modem's.
        for (ns, dev) in [(&i, &r), (&g, &wan)] {
            sh::ns(
                ns,
                "tc",
                &[
                    "qdisc",
                    "add",
                    "dev",
                    dev,
                    "root",
                    "tbf",
                    "rate",
                    &format!("{rate}mbit"),
                    "burst",
                    "16kb",
                    "latency",
                    "50ms",
                ],
            )?;
        }
        // Per-source policy routing for the MPTCP mode (mmsg adds the same itself).
        ip(
            &g,
            &format!(
                "route add default via 198.18.1{k}.1 dev {wan} table {}",
                100 + k
            ),
        )?;
        ip(
            &g,
            &format!(
                "rule add from 198.18.1{k}.2 lookup {} pref {}",
                100 + k,
                1000 + k
            ),
        )?;
    }
    ip(&g, "route add default via 198.18.10.1 dev wan0")?;
    ip(&i, &format!("addr add {SERVER}/32 dev lo"))?;
    sh::ns(&g, "sysctl", &["-qw", "net.ipv4.ip_forward=1"])?;
    // Cubic everywhere (the paper's and DESIGN §4's choice; this host defaults to bbr): the
    // server is the sender of every download in every mode.
    for ns in [&h, &g, &i] {
        sh::ns(
            ns,
            "sysctl",
            &["-qw", "net.ipv4.tcp_congestion_control=cubic"],
        )?;
    }
    Ok(Topo {
        _guard: guard,
        h,
        g,
        i,
    })
}

fn spawn_logged(ns: &str, prog: &[&str], log: &Path) -> anyhow::Result<Proc> {
    let f = std::fs::File::create(log).with_context(|| format!("create {}", log.display()))?;
    let child = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(prog)
        .env("MMSG_LOG", "info")
        .stdin(Stdio::null())
        .stdout(f.try_clone()?)
        .stderr(f)
        .spawn()
        .with_context(|| format!("spawn {prog:?} in {ns}"))?;
    Ok(Proc(child))
}

fn wait_http(ns: &str, port: u16) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if sh::ns(
            ns,
            "curl",
            &[
                "-sf",
                "-o",
                "/dev/null",
                &format!("http://{SERVER}:{port}/f"),
            ],
        )
        .is_ok()
        {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("web server on port {port} did not answer")
}

fn rx_bytes(g: &str, n: usize) -> Vec<u64> {
    (0..n)
        .map(|k| {
            sh::ns(
                g,
                "cat",
                &[&format!("/sys/class/net/wan{k}/statistics/rx_bytes")],
            )
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
        })
        .collect()
}

#[derive(Deserialize)]
struct ClientOut {
    total_s: f64,
    ok: u64,
    bytes: u64,
}

fn one_run(
    ns: &str,
    mptcp: bool,
    port: u16,
    script: &Path,
    g: &str,
    n: usize,
) -> anyhow::Result<Run> {
    let before = rx_bytes(g, n);
    let mut args: Vec<String> = Vec::new();
    if mptcp {
        args.extend(["mptcpize".into(), "run".into()]);
    }
    args.extend([
        "python3".into(),
        script.display().to_string(),
        SERVER.into(),
        port.to_string(),
        "/f".into(),
        REQUESTS.to_string(),
        CONCURRENCY.to_string(),
    ]);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let (prog, rest) = a.split_first().context("empty command")?;
    let out = sh::ns(ns, prog, rest)?;
    let c: ClientOut =
        serde_json::from_str(out.trim()).with_context(|| format!("client said {out:?}"))?;
    let after = rx_bytes(g, n);
    // Bytes → Mbit/s over the run.
    #[allow(clippy::cast_precision_loss)]
    let goodput_mbit = c.bytes as f64 * 8.0 / c.total_s.max(1e-6) / 1e6;
    Ok(Run {
        total_s: c.total_s,
        goodput_mbit,
        ok: c.ok,
        uplink_rx_bytes: after
            .iter()
            .zip(&before)
            .map(|(a, b)| a.saturating_sub(*b))
            .collect(),
    })
}

/// The gateway config of one `policy` (`single`, `rr`, `mbw`, `wrr`): one `[[wan]]` per uplink
/// (`wan<k>`, `198.18.1<k>.2/24`) and `[internet]` with the uplinks' capacities.
pub fn mmsg_config(policy: &str, rates: &[u32]) -> anyhow::Result<Config> {
    let mut wan = Vec::new();
    for k in 0..rates.len() {
        let net = u8::try_from(10 + k).context("too many uplinks")?;
        wan.push(mmsg::wan_port(
            &format!("wan{k}"),
            Ipv4Addr::new(198, 18, net, 2),
            24,
            Ipv4Addr::new(198, 18, net, 1),
        ));
    }
    let mut c = mmsg::config(1, wan)?;
    c.internet.policy = UplinkPolicy::deserialize(serde_json::Value::from(policy))
        .with_context(|| format!("uplink policy {policy:?}"))?;
    c.internet.capacity_mbit = Some(rates.to_vec());
    c.internet.measure_interval_ms = 500;
    Ok(c)
}

fn wait_status(bin: &Path, control: &Path) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if let Ok(v) = mmsg::status(bin, control) {
            if v.get("internet").is_some_and(|i| !i.is_null()) {
                return Ok(());
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("mmsg did not come up")
}

fn scenario(opts: &Options, bin: &Path, rates: &[u32], dir: &Path) -> anyhow::Result<Scenario> {
    let topo = topology(&opts.prefix, rates)?;
    let www = dir.join("www");
    std::fs::create_dir_all(&www)?;
    std::fs::write(www.join("f"), vec![b'x'; FILE_BYTES])?;
    let script = dir.join("client.py");
    std::fs::write(&script, CLIENT_PY)?;
    let www_s = www.display().to_string();
    let _tcp_server = spawn_logged(
        &topo.i,
        &[
            "python3",
            "-m",
            "http.server",
            "8080",
            "--bind",
            SERVER,
            "--directory",
            &www_s,
        ],
        &dir.join("http-tcp.log"),
    )?;
    // MPTCP on both ends for the mptcp mode: the server accepts extra subflows, the client
    // opens one from each uplink address.
    for ns in [&topo.i, &topo.g] {
        sh::ns(
            ns,
            "ip",
            &[
                "mptcp",
                "limits",
                "set",
                "subflow",
                "8",
                "add_addr_accepted",
                "8",
            ],
        )?;
    }
    for k in 0..rates.len() {
        sh::ns(
            &topo.g,
            "ip",
            &[
                "mptcp",
                "endpoint",
                "add",
                &format!("198.18.1{k}.2"),
                "dev",
                &format!("wan{k}"),
                "subflow",
            ],
        )?;
    }
    let _mptcp_server = spawn_logged(
        &topo.i,
        &[
            "mptcpize",
            "run",
            "python3",
            "-m",
            "http.server",
            "8081",
            "--bind",
            SERVER,
            "--directory",
            &www_s,
        ],
        &dir.join("http-mptcp.log"),
    )?;
    wait_http(&topo.i, 8080)?;
    wait_http(&topo.i, 8081)?;
    // Mutual TLS with a CA made for the run (TLS is the default, issue #17; no remote here, so
    // no tunnel uses it).
    let tls = mmsg::provision_tls(&dir.join("tls"), "MMS uplink-lb CA", &[1])?;
    let mut modes = Vec::new();
    for mode in MODES {
        let mut runs = Vec::new();
        let mmsg = if mode == "mptcp" {
            None
        } else {
            let config = dir.join(format!("mmsg-{mode}.toml"));
            mmsg::write_config(
                &config,
                &format!("xtask uplink-lb: policy {mode}"),
                &mpa::config::Config {
                    tls: tls.get(&1).cloned(),
                    ..mmsg_config(mode, rates)?
                },
            )?;
            let control = dir.join(format!("{mode}.sock"));
            let p = spawn_logged(
                &topo.g,
                &[
                    &bin.display().to_string(),
                    "run",
                    "--config",
                    &config.display().to_string(),
                    "--control",
                    &control.display().to_string(),
                ],
                &dir.join(format!("mmsg-{mode}.log")),
            )?;
            wait_status(bin, &control)?;
            Some(p)
        };
        for rep in 0..opts.reps {
            // Between runs a stop signal ends the experiment; `Drop` stops `mmsg` and deletes
            // the namespaces.
            crate::stop::check()?;
            let r = if mode == "mptcp" {
                one_run(&topo.g, true, 8081, &script, &topo.g, rates.len())?
            } else {
                one_run(&topo.h, false, 8080, &script, &topo.g, rates.len())?
            };
            eprintln!(
                "  {rates:?} {mode:<6} rep {rep}: {:.2} s  {:.1} Mbit/s  ok {}  rx per uplink {:?}",
                r.total_s, r.goodput_mbit, r.ok, r.uplink_rx_bytes
            );
            runs.push(r);
        }
        drop(mmsg);
        let t: Vec<f64> = runs.iter().map(|r| r.total_s).collect();
        modes.push(ModeResult {
            mode: mode.to_owned(),
            median_s: stats::median_or_nan(&t),
            runs,
        });
    }
    Ok(Scenario {
        rates_mbit: rates.to_vec(),
        modes,
    })
}

/// Runs both scenarios and writes the results.
pub fn run(opts: &Options) -> anyhow::Result<Report> {
    crate::deps::ensure()?;
    let bin = mmsg::build_mmsg(&opts.root, Profile::Debug)?;
    let dir = std::env::temp_dir().join(format!("{}-uplink-lb", opts.prefix));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let mut scenarios = Vec::new();
    for rates in [[10, 10], [10, 5]] {
        eprintln!("uplink-lb: uplinks {rates:?} Mbit/s");
        scenarios.push(
            scenario(opts, &bin, &rates, &dir).with_context(|| format!("scenario {rates:?}"))?,
        );
    }
    let report = Report {
        requests: REQUESTS,
        file_bytes: FILE_BYTES,
        concurrency: CONCURRENCY,
        scenarios,
    };
    std::fs::create_dir_all(&opts.out_dir)?;
    std::fs::write(
        opts.out_dir.join("uplink-lb.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    std::fs::write(opts.out_dir.join("uplink-lb.md"), markdown(&report))?;
    std::fs::write(opts.out_dir.join("uplink-lb.svg"), svg(&report))?;
    println!("{}", markdown(&report));
    Ok(report)
}

/// Rewrites the markdown and SVG from `out_dir/uplink-lb.json`.
pub fn replot(out_dir: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(out_dir.join("uplink-lb.json"))?;
    let report: Report = serde_json::from_str(&text)?;
    std::fs::write(out_dir.join("uplink-lb.md"), markdown(&report))?;
    std::fs::write(out_dir.join("uplink-lb.svg"), svg(&report))?;
    Ok(())
}

fn med(s: &Scenario, mode: &str) -> Option<f64> {
    s.modes.iter().find(|m| m.mode == mode).map(|m| m.median_s)
}

/// The markdown report: per scenario, median time, goodput, gain vs single and vs MPTCP.
pub fn markdown(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# External traffic load balancing (seed 004 §7): {} downloads of {} kB, {} at a time\n",
        r.requests,
        r.file_bytes / 1000,
        r.concurrency
    );
    let _ = writeln!(
        s,
        "Generated by `cargo xtask experiment uplink-lb` (`xtask/src/uplink_lb.rs`). Total time = \
         median over the repetitions; gain = time(reference) / time(mode) − 1 (throughput gain). \
         Paper: +{:.0} % vs single link, +{:.0} % vs MPTCP.\n",
        PAPER_GAIN_VS_SINGLE * 100.0,
        PAPER_GAIN_VS_MPTCP * 100.0
    );
    for sc in &r.scenarios {
        let total: u32 = sc.rates_mbit.iter().sum();
        let _ = writeln!(
            s,
            "## Uplinks {} Mbit/s\n",
            sc.rates_mbit
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(" + ")
        );
        // Ideal: the bytes at the aggregate rate.
        #[allow(clippy::cast_precision_loss)]
        let ideal = (r.requests * r.file_bytes) as f64 * 8.0 / (f64::from(total) * 1e6);
        let _ = writeln!(s, "Ideal (all bytes at {total} Mbit/s): {ideal:.2} s.\n");
        let _ = writeln!(
            s,
            "| mode | runs (s) | median (s) | goodput (Mbit/s) | vs single | vs MPTCP | bytes per uplink (last run) |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|---|");
        let single = med(sc, "single");
        let mptcp = med(sc, "mptcp");
        for m in &sc.modes {
            let runs = m
                .runs
                .iter()
                .map(|x| format!("{:.2}", x.total_s))
                .collect::<Vec<_>>()
                .join(", ");
            #[allow(clippy::cast_precision_loss)]
            let goodput = (r.requests * r.file_bytes) as f64 * 8.0 / m.median_s / 1e6;
            let gain = |reference: Option<f64>| {
                reference.map_or_else(String::new, |t| {
                    format!("{:+.0} %", (t / m.median_s - 1.0) * 100.0)
                })
            };
            let split = m
                .runs
                .last()
                .map(|x| {
                    x.uplink_rx_bytes
                        .iter()
                        .map(|b| format!("{:.1} MB", *b as f64 / 1e6))
                        .collect::<Vec<_>>()
                        .join(" / ")
                })
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "| {} | {runs} | {:.2} | {goodput:.1} | {} | {} | {split} |",
                m.mode,
                m.median_s,
                gain(single),
                gain(mptcp)
            );
        }
        s.push('\n');
    }
    s
}

/// A grouped bar chart: median total time per mode, one group per scenario.
pub fn svg(r: &Report) -> String {
    let (w, h, left, top, bottom) = (640.0, 320.0, 50.0, 30.0, 50.0);
    let max = r
        .scenarios
        .iter()
        .flat_map(|s| s.modes.iter().map(|m| m.median_s))
        .filter(|x| x.is_finite())
        .fold(1.0_f64, f64::max)
        .ceil();
    let colors = ["#888888", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"];
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <text x=\"{}\" y=\"18\" text-anchor=\"middle\">{} downloads of {} kB (C = {}): total time (s, median)</text>\n",
        w / 2.0,
        r.requests,
        r.file_bytes / 1000,
        r.concurrency
    );
    let plot_h = h - top - bottom;
    let _ = writeln!(
        s,
        "<line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{}\" stroke=\"black\"/>",
        h - bottom
    );
    for t in 0..=4 {
        let v = max * f64::from(t) / 4.0;
        let y = h - bottom - plot_h * f64::from(t) / 4.0;
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{y:.1}\" text-anchor=\"end\">{v:.1}</text><line x1=\"{left}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>",
            left - 4.0,
            w - 10.0
        );
    }
    #[allow(clippy::cast_precision_loss)]
    let group_w = (w - left - 20.0) / r.scenarios.len().max(1) as f64;
    for (gi, sc) in r.scenarios.iter().enumerate() {
        #[allow(clippy::cast_precision_loss)]
        let gx = left + 10.0 + group_w * gi as f64;
        #[allow(clippy::cast_precision_loss)]
        let bar_w = (group_w - 30.0) / sc.modes.len().max(1) as f64;
        for (mi, m) in sc.modes.iter().enumerate() {
            let v = if m.median_s.is_finite() {
                m.median_s
            } else {
                0.0
            };
            let bh = plot_h * v / max;
            #[allow(clippy::cast_precision_loss)]
            let x = gx + bar_w * mi as f64;
            let _ = writeln!(
                s,
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"10\">{}</text><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"10\">{v:.2}</text>",
                h - bottom - bh,
                bar_w - 4.0,
                colors.get(mi % colors.len()).unwrap_or(&"black"),
                x + (bar_w - 4.0) / 2.0,
                h - bottom + 12.0,
                m.mode,
                x + (bar_w - 4.0) / 2.0,
                h - bottom - bh - 3.0
            );
        }
        let label = sc
            .rates_mbit
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(" + ");
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">uplinks {label} Mbit/s</text>",
            gx + (group_w - 30.0) / 2.0,
            h - bottom + 30.0
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        let mode = |m: &str, t: f64| ModeResult {
            mode: m.to_owned(),
            runs: vec![Run {
                total_s: t,
                goodput_mbit: 80.0 / t,
                ok: 100,
                uplink_rx_bytes: vec![5_000_000, 5_000_000],
            }],
            median_s: t,
        };
        Report {
            requests: 100,
            file_bytes: 100_000,
            concurrency: 20,
            scenarios: vec![Scenario {
                rates_mbit: vec![10, 10],
                modes: vec![mode("single", 8.0), mode("rr", 4.0), mode("mptcp", 5.0)],
            }],
        }
    }

    #[test]
    fn markdown_gains() {
        let m = markdown(&report());
        assert!(
            m.contains("| rr | 4.00 | 4.00 | 20.0 | +100 % | +25 % |"),
            "{m}"
        );
        assert!(m.contains("Ideal (all bytes at 20 Mbit/s): 4.00 s."), "{m}");
    }

    #[test]
    fn svg_has_a_bar_per_mode() {
        let s = svg(&report());
        assert_eq!(s.matches("<rect").count(), 3);
        assert!(s.ends_with("</svg>\n"));
    }

    #[test]
    fn config_is_the_text_it_replaced() {
        let text = "branch_id = 1\nlan_prefixes = [\"198.19.1.0/24\"]\n\
            [[wan]]\nname = \"wan0\"\naddress = \"198.18.10.2/24\"\ngateway = \"198.18.10.1\"\n\
            [[wan]]\nname = \"wan1\"\naddress = \"198.18.11.2/24\"\ngateway = \"198.18.11.1\"\n\
            [internet]\npolicy = \"wrr\"\ncapacity_mbit = [10, 5]\nmeasure_interval_ms = 500\n";
        assert_eq!(
            Config::parse(text).unwrap(),
            mmsg_config("wrr", &[10, 5]).unwrap()
        );
    }

    #[test]
    fn median_of_even_and_odd() {
        assert!((stats::median_or_nan(&[3.0, 1.0, 2.0]) - 2.0).abs() < 1e-9);
        assert!((stats::median_or_nan(&[4.0, 1.0, 2.0, 3.0]) - 2.5).abs() < 1e-9);
    }
}
