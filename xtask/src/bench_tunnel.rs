//! `cargo xtask bench tunnel`: what the IP-over-MPTCP tunnel costs against end-to-end MPTCP
//! over the same paths (issue #4).
//!
//! Topology: `examples/testbed-2x2-unlimited.toml`, two branches with two unlimited internet
//! uplinks each and no delay or loss. With no impairment the testbed installs no diversion rule,
//! so the WAN emulator is not in the path; the run checks it (`emu0` counters stay at zero) and
//! records it. All three measurements therefore cross the same kernel-forwarded paths and are
//! limited only by CPU.
//!
//! Each repetition runs, in this order (alternating, so drift and other load on the machine hit
//! every variant alike):
//! 1. `mmsg` in both gateways with TUN offload (GSO super-packets) and `[tls]` (the default,
//!    encrypted tunnel; credentials made with `crates/pki` in the testbed's state directory):
//!    iperf3 TCP h1 → h2 through the tunnel (one connection, 2 × 2 subflows, userspace PM), CPU
//!    seconds of both `mmsg` processes (`/proc/<pid>/stat` utime + stime) over the inner bytes,
//!    then the idle ping overhead;
//! 2. the same in clear (the example configs with `[tls] mode = "clear"`, run with
//!    `--insecure-clear-tunnels`): `tunnel_clear_mbps`, and
//!    `tls_ratio = tunnel_mbps / tunnel_clear_mbps` (aim ≥ 0.9, docs/security.md);
//! 3. the same as 1 with `mmsg` restarted with `--no-offload`;
//! 4. `mmsg` stopped; end-to-end MPTCP between the gateways' WAN addresses (iperf3 under
//!    `mptcpize`, in-kernel PM with `subflow fullmesh` client endpoints and the server's second
//!    address `signal`led, as `bench table1` does); the distinct subflow address pairs are
//!    sampled with `ss` mid-transfer (4 expected).
//!
//! Idle ping overhead per gateway = (median RTT h1 → h2 through the tunnel − median RTT gw1 → gw2
//! between the WAN addresses 1a → 2a) / 2, from `ping -c 200 -i 0.01`. The LAN hops (h1 → gw1,
//! h2 → gw2) are measured too and reported beside it.
//!
//! Results: medians over the repetitions (with min and max), `ratio = tunnel_mbps /
//! direct_mptcp_mbps` (aim ≥ 0.85), ping overhead (aim ≤ 50 µs per gateway).
//!
//! `--metrics-overhead` runs instead only variant 1, alternately without and with `/metrics`
//! (`--metrics-listen` on both `mmsg` and a scraper once a second): [`overhead`].

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::mmsg::{self, Profile};
use crate::stats::median;
use crate::topology::{self, PortKind, Topology};
use crate::{deps, iperf, sh, testbed};

mod options;
mod report;
use options::OMIT_SECS;
pub use options::{Options, TOPOLOGY_FILE};
use report::summarize;
pub use report::{print_table, Details, Rep, Report, Spread, Transfer, TunnelRun};

/// Where each `mmsg` serves `/metrics` in the `--metrics-overhead` runs (inside its own
/// namespace; [`crate::bench_tunnel_overhead`]).
pub(crate) const METRICS: &str = "127.0.0.1:9477";

const TOPOLOGY: &str = include_str!("../../examples/testbed-2x2-unlimited.toml");
/// iperf3 port of the tunnel measurements (h2).
const PORT_TUNNEL: u16 = 5321;
/// iperf3 port of the end-to-end MPTCP measurement (gw2).
const PORT_DIRECT: u16 = 5322;
/// Pings per RTT measurement and their interval (s): 200 × 10 ms = 2 s.
const PING_COUNT: &str = "200";
const PING_INTERVAL: &str = "0.01";
/// How long `mmsg` gets to bring every connection up with its n × m subflows.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// WAN addresses of the direct measurements: 1a (client) → 2a (server), 2b is signalled.
const GW1_A: &str = "198.18.10.2";
const GW1_B: &str = "198.18.11.2";
const GW2_A: &str = "198.18.20.2";
const GW2_B: &str = "198.18.21.2";

/// The topology of a run: [`TOPOLOGY`], or the same two branches with every uplink limited to
/// `uplink_mbit` both ways (64 KiB queues would starve a fast line: default queue, 100 ms).
pub fn topology_text(uplink_mbit: Option<f64>) -> String {
    match uplink_mbit {
        None => TOPOLOGY.to_owned(),
        Some(r) => {
            let wan = format!("wan = [{{ rate_mbit = {r} }}, {{ rate_mbit = {r} }}]");
            TOPOLOGY.replace("wan = [{}, {}]", &wan)
        }
    }
}

/// Round-trip times in µs from `ping` output (`time=0.085 ms` per reply).
pub fn ping_rtts_us(out: &str) -> Vec<f64> {
    out.lines()
        .filter_map(|l| {
            let t = l.split("time=").nth(1)?;
            let ms: f64 = t.split_whitespace().next()?.parse().ok()?;
            Some(ms * 1000.0)
        })
        .collect()
}

/// utime + stime of a process in clock ticks (`/proc/<pid>/stat` fields 14 and 15).
pub fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) may contain spaces: count fields after its closing ')'.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let mut f = rest.split_whitespace().skip(11);
    Some(f.next()?.parse::<u64>().ok()? + f.next()?.parse::<u64>().ok()?)
}

fn cpu_secs(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("read /proc/{pid}/stat"))?;
    let ticks = parse_cpu_ticks(&stat).context("parse /proc/<pid>/stat")?;
    // SAFETY: sysconf has no preconditions; it only reads a system constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Ok(ticks as f64 / if hz > 0 { hz as f64 } else { 100.0 })
}

/// (busy, total) jiffies of the whole machine from `/proc/stat`.
fn machine_jiffies() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3)? + v.get(4)?;
    Some((total - idle, total))
}

/// Busy share of all CPUs between two `machine_jiffies` samples, percent.
fn busy_pct(a: Option<(u64, u64)>, b: Option<(u64, u64)>) -> Option<f64> {
    let ((b0, t0), (b1, t1)) = (a?, b?);
    (t1 > t0).then(|| 100.0 * (b1 - b0) as f64 / (t1 - t0) as f64)
}

/// A pair of `mmsg` daemons (gw1, gw2), stopped by PID on drop.
pub(crate) struct Mmsg {
    bin: PathBuf,
    gws: Vec<(Child, PathBuf)>,
}

impl Drop for Mmsg {
    fn drop(&mut self) {
        for (child, _) in &mut self.gws {
            // SAFETY: kill(2) on the PID of a child we spawned and have not reaped yet.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        }
        for (child, _) in &mut self.gws {
            let deadline = Instant::now() + Duration::from_secs(5);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Mmsg {
    /// Starts `mmsg run` in gw1 and gw2 (`ip netns exec` execs it, so the child's PID is
    /// `mmsg`'s) and waits until every connection is up with `n_m` established subflows.
    pub(crate) fn start(
        opts: &Options,
        bin: &Path,
        offload: bool,
        tls: bool,
        n_m: usize,
        tag: &str,
        metrics: bool,
    ) -> anyhow::Result<Mmsg> {
        let dir = testbed::state_dir(&opts.prefix);
        let mut m = Mmsg {
            bin: bin.to_owned(),
            gws: Vec::new(),
        };
        for b in [1u8, 2] {
            let control = dir.join(format!("bench-mmsg-gw{b}.sock"));
            let log = std::fs::File::create(dir.join(format!("bench-mmsg-gw{b}-{tag}.log")))?;
            let config = if tls {
                tls_config(opts, b)?
            } else {
                clear_config(opts, b)?
            };
            let mut cmd = Command::new("ip");
            cmd.args(["netns", "exec", &testbed::ns_gw(&opts.prefix, b)])
                .arg(bin)
                .arg("run")
                .arg("--config")
                .arg(&config)
                .args(mmsg::run_flags_of(&config)?)
                .arg("--control")
                .arg(&control);
            if !offload {
                cmd.arg("--no-offload");
            }
            if metrics {
                cmd.args(["--metrics-listen", METRICS]);
            }
            let child = cmd
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .spawn()
                .context("start mmsg")?;
            m.gws.push((child, control));
        }
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let ready = m.gws.iter().all(|(_, c)| {
                status(&m.bin, c).is_some_and(|s| {
                    s.get("offload").and_then(serde_json::Value::as_bool) == Some(offload)
                        && all_up(&s, n_m)
                })
            });
            if ready {
                return Ok(m);
            }
            for (child, _) in &mut m.gws {
                if let Ok(Some(st)) = child.try_wait() {
                    bail!("mmsg exited at start ({st}); logs in {}", dir.display());
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "mmsg (offload {offload}) did not bring every connection up with {n_m} \
                     subflows within {} s (logs in {})",
                    START_TIMEOUT.as_secs(),
                    dir.display()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn pids(&self) -> Vec<u32> {
        self.gws.iter().map(|(c, _)| c.id()).collect()
    }

    fn statuses(&self) -> Vec<Option<serde_json::Value>> {
        self.gws.iter().map(|(_, c)| status(&self.bin, c)).collect()
    }
}

/// Where [`mmsg::provision_tls`] puts the run's CA and the certificates of gw1 and gw2.
pub(crate) fn tls_dir(opts: &Options) -> PathBuf {
    testbed::state_dir(&opts.prefix).join("bench-tls")
}

/// The example config of branch `b` in clear on purpose (the `tunnel_clear_mbps` variant that
/// `tls_ratio` compares against): `[tls] mode = "clear"`, run with `--insecure-clear-tunnels`.
fn clear_config(opts: &Options, b: u8) -> anyhow::Result<PathBuf> {
    let mut c = mmsg::example(&opts.root, b)?;
    c.tls = Some(mmsg::clear_tls());
    let out = testbed::state_dir(&opts.prefix).join(format!("bench-gw{b}-clear.toml"));
    mmsg::write_config(
        &out,
        &format!("examples/mmsg-branch{b}.toml in clear (bench tunnel's clear variant)"),
        &c,
    )?;
    Ok(out)
}

/// The example config of branch `b` with a `[tls]` section pointing at [`tls_dir`]'s files.
fn tls_config(opts: &Options, b: u8) -> anyhow::Result<PathBuf> {
    let mut c = mmsg::example(&opts.root, b)?;
    c.tls = Some(mmsg::tls_files(&tls_dir(opts), b));
    let out = testbed::state_dir(&opts.prefix).join(format!("bench-gw{b}-tls.toml"));
    mmsg::write_config(
        &out,
        &format!("examples/mmsg-branch{b}.toml with [tls]"),
        &c,
    )?;
    Ok(out)
}

fn status(bin: &Path, control: &Path) -> Option<serde_json::Value> {
    mmsg::status(bin, control).ok()
}

/// Every connection up with `n_m` established subflows.
fn all_up(s: &serde_json::Value, n_m: usize) -> bool {
    let Some(conns) = s["connections"].as_array() else {
        return false;
    };
    !conns.is_empty()
        && conns.iter().all(|c| {
            c["state"] == "up"
                && c["subflows"].as_array().is_some_and(|v| {
                    v.iter().filter(|sf| sf["state"] == "established").count() == n_m
                })
        })
}

fn counter(s: &Option<serde_json::Value>, name: &str) -> u64 {
    s.as_ref()
        .and_then(|s| s.get("counters")?.get(name)?.as_u64())
        .unwrap_or(0)
}

/// Counters whose growth means trouble on the packet path.
const TROUBLE: [&str; 9] = [
    "drop_queue_full",
    "drop_codel",
    "codel_marks",
    "drop_no_group",
    "drop_malformed",
    "tun_write_errors",
    "tun_read_errors",
    "frame_errors",
    "conn_dead",
];

/// Median RTT (µs) of `ping -c 200 -i 0.01` from `ns` to `dst` (optionally from address `src`).
fn ping_median_us(ns: &str, dst: &str, src: Option<&str>) -> anyhow::Result<f64> {
    let mut args = vec!["-n", "-c", PING_COUNT, "-i", PING_INTERVAL];
    if let Some(s) = src {
        args.extend(["-I", s]);
    }
    args.push(dst);
    let out = sh::ns(ns, "ping", &args)?;
    let rtts = ping_rtts_us(&out);
    median(&rtts).with_context(|| format!("no ping replies from {dst} in {ns}"))
}

pub(crate) fn tunnel_run(opts: &Options, m: &Mmsg) -> anyhow::Result<TunnelRun> {
    let p = &opts.prefix;
    let (h1, h2) = (testbed::ns_host(p, 1, 0), testbed::ns_host(p, 2, 0));
    let dst = testbed::host_addr(2, 0).to_string();
    let (t, omit) = (opts.secs.to_string(), OMIT_SECS.to_string());
    let pids = m.pids();
    let server = iperf::Server::start(&h2, PORT_TUNNEL, None)?;
    let s0 = m.statuses();
    let cpu0: Vec<f64> = pids
        .iter()
        .map(|&p| cpu_secs(p))
        .collect::<Result<_, _>>()?;
    let j0 = machine_jiffies();
    let v = iperf::client(
        &h1,
        &[
            "-c",
            &dst,
            "-p",
            &PORT_TUNNEL.to_string(),
            "-t",
            &t,
            "-O",
            &omit,
        ],
    )?;
    let j1 = machine_jiffies();
    let cpu1: Vec<f64> = pids
        .iter()
        .map(|&p| cpu_secs(p))
        .collect::<Result<_, _>>()?;
    let s1 = m.statuses();
    server.wait(Duration::from_secs(2));
    let mbps = iperf::tcp_received_mbps(&v).context("no TCP receiver rate (tunnel)")?;
    let cpu: Vec<f64> = cpu1.iter().zip(&cpu0).map(|(a, b)| a - b).collect();
    let mmsg_cpu_s = [
        cpu.first().copied().unwrap_or(0.0),
        cpu.get(1).copied().unwrap_or(0.0),
    ];
    let (g1_0, g1_1) = (s0.first().cloned().flatten(), s1.first().cloned().flatten());
    let inner_bytes = counter(&g1_1, "tun_rx_bytes").saturating_sub(counter(&g1_0, "tun_rx_bytes"));
    let reads = counter(&g1_1, "tun_rx_packets").saturating_sub(counter(&g1_0, "tun_rx_packets"));
    let mut trouble = serde_json::Map::new();
    for (gw, (a, b)) in s0.iter().zip(&s1).enumerate() {
        for name in TROUBLE {
            let d = counter(b, name).saturating_sub(counter(a, name));
            if d > 0 {
                trouble.insert(format!("gw{}.{name}", gw + 1), d.into());
            }
        }
    }
    let ping_rtt_us = ping_median_us(&h1, &dst, None)?;
    Ok(TunnelRun {
        transfer: Transfer::new(mbps, &v, busy_pct(j0, j1)),
        mmsg_cpu_s,
        inner_bytes,
        cpu_s_per_gb: (inner_bytes > 0)
            .then(|| (mmsg_cpu_s[0] + mmsg_cpu_s[1]) / (inner_bytes as f64 / 1e9)),
        bytes_per_tun_read: (reads > 0).then(|| inner_bytes as f64 / reads as f64),
        trouble,
        ping_rtt_us,
    })
}

/// In-kernel MPTCP path manager on both gateways: gw1's WAN addresses `subflow fullmesh`, gw2's
/// second address `signal`, so a connection 1a → 2a gets 2 × 2 subflows (also `bench table1`'s
/// end-to-end MPTCP column).
pub(crate) fn kernel_pm(prefix: &str) -> anyhow::Result<()> {
    let (gw1, gw2) = (testbed::ns_gw(prefix, 1), testbed::ns_gw(prefix, 2));
    for ns in [&gw1, &gw2] {
        sh::ns(ns, "sysctl", &["-qw", "net.mptcp.enabled=1"])?;
        // Kernels >= 6.15 name the path manager; older ones use pm_type (0 = in-kernel).
        if sh::ns(ns, "sysctl", &["-qw", "net.mptcp.path_manager=kernel"]).is_err() {
            sh::ns(ns, "sysctl", &["-qw", "net.mptcp.pm_type=0"])?;
        }
        sh::ip_batch(
            ns,
            &["mptcp limits set subflow 8 add_addr_accepted 8".to_owned()],
        )?;
    }
    sh::ip_batch(
        &gw1,
        &[
            "mptcp endpoint flush".to_owned(),
            format!("mptcp endpoint add {GW1_A} dev wan0 subflow fullmesh"),
            format!("mptcp endpoint add {GW1_B} dev wan1 subflow fullmesh"),
        ],
    )?;
    sh::ip_batch(
        &gw2,
        &[
            "mptcp endpoint flush".to_owned(),
            format!("mptcp endpoint add {GW2_B} dev wan1 signal"),
        ],
    )
}

/// Removes the endpoints again, so `mmsg` (userspace PM) starts from a clean namespace.
fn kernel_pm_clear(prefix: &str) {
    for b in [1u8, 2] {
        let _ = sh::ip_batch(
            &testbed::ns_gw(prefix, b),
            &["mptcp endpoint flush".to_owned()],
        );
    }
}

/// Distinct (local, remote) address pairs of established TCP sockets to `port` in `ns` (MPTCP
/// subflows are TCP sockets to `ss`).
fn subflow_pairs(ns: &str, port: u16) -> usize {
    let out = sh::ns(
        ns,
        "ss",
        &["-Htn", "state", "established", &format!("dport = :{port}")],
    )
    .unwrap_or_default();
    let mut pairs: Vec<(String, String)> = out
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // Recv-Q Send-Q Local:Port Peer:Port
            let ip = |s: &&str| s.rsplit_once(':').map(|(a, _)| a.to_owned());
            Some((ip(f.get(2)?)?, ip(f.get(3)?)?))
        })
        .collect();
    pairs.sort();
    pairs.dedup();
    pairs.len()
}

fn direct_run(opts: &Options) -> anyhow::Result<(Transfer, usize)> {
    let p = &opts.prefix;
    let (gw1, gw2) = (testbed::ns_gw(p, 1), testbed::ns_gw(p, 2));
    kernel_pm(p)?;
    let server = iperf::Server::start_with(&gw2, &["mptcpize", "run"], PORT_DIRECT, &[])?;
    let (t, omit, port) = (
        opts.secs.to_string(),
        OMIT_SECS.to_string(),
        PORT_DIRECT.to_string(),
    );
    let j0 = machine_jiffies();
    let client = {
        let gw1 = gw1.clone();
        std::thread::spawn(move || {
            sh::ns(
                &gw1,
                "mptcpize",
                &[
                    "run", "iperf3", "--json", "-c", GW2_A, "-B", GW1_A, "-p", &port, "-t", &t,
                    "-O", &omit,
                ],
            )
        })
    };
    // Sample the subflows in the middle of the measured part.
    std::thread::sleep(Duration::from_secs(u64::from(OMIT_SECS + opts.secs / 2)));
    let pairs = subflow_pairs(&gw1, PORT_DIRECT);
    let out = client
        .join()
        .map_err(|_| anyhow::anyhow!("iperf3 client thread panicked"))??;
    let j1 = machine_jiffies();
    server.wait(Duration::from_secs(2));
    kernel_pm_clear(p);
    let v: serde_json::Value = serde_json::from_str(&out).context("parse iperf3 JSON")?;
    let mbps = iperf::tcp_received_mbps(&v).context("no TCP receiver rate (direct MPTCP)")?;
    Ok((Transfer::new(mbps, &v, busy_pct(j0, j1)), pairs))
}

/// Packets the kernel of `inet` sent into the emulator's TUN so far.
fn emulator_packets(prefix: &str) -> Option<u64> {
    let out = sh::run(
        "ip",
        &[
            "-n",
            &testbed::ns_inet(prefix),
            "-j",
            "-s",
            "link",
            "show",
            "emu0",
        ],
    )
    .ok()?;
    let v: serde_json::Value = serde_json::from_str(&out).ok()?;
    v.pointer("/0/stats64/tx/packets")?.as_u64()
}

pub(crate) fn n_m(topo: &Topology) -> usize {
    let ports = |b: u8| {
        topo.ports()
            .iter()
            .filter(|p| p.id.branch == b && p.kind == PortKind::Internet)
            .count()
    };
    ports(1) * ports(2)
}

/// Runs the benchmark; always tears the testbed down.
pub fn run(opts: &Options) -> anyhow::Result<Report> {
    if opts.reps == 0 || opts.secs == 0 {
        bail!("--reps and --secs must be at least 1");
    }
    deps::ensure()?;
    if !sh::have("mptcpize") {
        sh::run("apt-get", &["install", "-y", "-qq", "mptcpize"]).context("install mptcpize")?;
    }
    eprintln!("bench tunnel: building mmsg (release)");
    let bin = mmsg::build_mmsg(&opts.root, Profile::Release)?;
    if opts
        .uplink_mbit
        .is_some_and(|r| !(r.is_finite() && r > 0.0))
    {
        bail!("--uplink-mbit must be a positive number");
    }
    let topo = topology::parse(&topology_text(opts.uplink_mbit))?;
    match opts.uplink_mbit {
        None => eprintln!(
            "bench tunnel: testbed {} up from {TOPOLOGY_FILE} (no impairment: the emulator is bypassed)",
            opts.prefix
        ),
        Some(r) => eprintln!(
            "bench tunnel: testbed {} up from {TOPOLOGY_FILE} with every uplink at {r} Mbit/s \
             (the WAN emulator shapes them)",
            opts.prefix
        ),
    }
    testbed::run_on(&topo, &opts.prefix, || run_reps(opts, &bin, &topo))
}

fn run_reps(opts: &Options, bin: &Path, topo: &Topology) -> anyhow::Result<Report> {
    let p = &opts.prefix;
    let n_m = n_m(topo);
    let emu0 = emulator_packets(p);
    let (h1, h2) = (testbed::ns_host(p, 1, 0), testbed::ns_host(p, 2, 0));
    let gw1 = testbed::ns_gw(p, 1);
    let mut runs = Vec::new();
    mmsg::provision_tls(&tls_dir(opts), "MMS bench CA", &[1, 2])?;
    for rep in 1..=opts.reps {
        let tag = |what: &str| format!("bench tunnel: rep {rep}/{}: {what}", opts.reps);
        let tunnel = |offload: bool, tls: bool| -> anyhow::Result<(TunnelRun, f64)> {
            let name = match (offload, tls) {
                (true, true) => "tls offload",
                (false, true) => "tls nooffload",
                (true, false) => "clear offload",
                (false, false) => "clear nooffload",
            };
            eprintln!("{}", tag(&format!("starting mmsg ({name})")));
            let m = Mmsg::start(
                opts,
                bin,
                offload,
                tls,
                n_m,
                &format!("{rep}-{}", name.replace(' ', "-")),
                false,
            )?;
            let r = tunnel_run(opts, &m)?;
            // The direct path's RTT right after the tunnel's, with mmsg still running idle.
            let direct_ping = ping_median_us(&gw1, GW2_A, Some(GW1_A))?;
            drop(m);
            eprintln!(
                "{}",
                tag(&format!(
                    "tunnel ({name}) {:.0} Mbit/s, mmsg CPU {:.2}+{:.2} s ({:.1} s/GB), \
                     {:.0} B/TUN read, ping {:.1} us (direct {:.1} us){}",
                    r.transfer.mbps,
                    r.mmsg_cpu_s[0],
                    r.mmsg_cpu_s[1],
                    r.cpu_s_per_gb.unwrap_or(f64::NAN),
                    r.bytes_per_tun_read.unwrap_or(f64::NAN),
                    r.ping_rtt_us,
                    direct_ping,
                    if r.trouble.is_empty() {
                        String::new()
                    } else {
                        format!(", {}", serde_json::Value::Object(r.trouble.clone()))
                    }
                ))
            );
            Ok((r, direct_ping))
        };
        let (t_on, d_on) = tunnel(true, true)?;
        let (t_clear, d_clear) = tunnel(true, false)?;
        let (t_off, d_off) = tunnel(false, true)?;
        eprintln!("{}", tag("end-to-end MPTCP between the gateways"));
        let (direct, pairs) = direct_run(opts)?;
        let lan = [
            ping_median_us(&h1, &topology::lan_addr(1, 1).to_string(), None)?,
            ping_median_us(&h2, &topology::lan_addr(2, 1).to_string(), None)?,
        ];
        eprintln!(
            "{}",
            tag(&format!(
                "direct MPTCP {:.0} Mbit/s over {pairs} subflow address pairs; LAN hop RTT \
                 {:.1} / {:.1} us",
                direct.mbps, lan[0], lan[1]
            ))
        );
        if pairs != n_m {
            eprintln!(
                "bench tunnel: WARNING direct MPTCP had {pairs} subflow pairs, expected {n_m}"
            );
        }
        runs.push(Rep {
            tunnel: t_on,
            tunnel_clear: t_clear,
            tunnel_nooffload: t_off,
            direct,
            direct_subflow_pairs: pairs,
            direct_ping_rtt_us: [d_on, d_off, d_clear],
            lan_ping_rtt_us: lan,
        });
    }
    let emulator_packets = match (emu0, emulator_packets(p)) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    summarize(opts, n_m, emulator_packets, runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        let s = Spread::of(&[2.0, 9.0, 4.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (4.0, 2.0, 9.0));
    }

    #[test]
    fn parses_ping_replies() {
        let out = "PING 198.19.2.10 (198.19.2.10) 56(84) bytes of data.\n\
                   64 bytes from 198.19.2.10: icmp_seq=1 ttl=62 time=0.085 ms\n\
                   64 bytes from 198.19.2.10: icmp_seq=2 ttl=62 time=1.5 ms\n\
                   \n--- 198.19.2.10 ping statistics ---\n\
                   2 packets transmitted, 2 received, 0% packet loss, time 10ms\n\
                   rtt min/avg/max/mdev = 0.085/0.792/1.500/0.707 ms\n";
        let v = ping_rtts_us(out);
        assert_eq!(v.len(), 2);
        assert!((v[0] - 85.0).abs() < 1e-9 && (v[1] - 1500.0).abs() < 1e-9);
    }

    #[test]
    fn parses_proc_stat() {
        // Fields 14 (utime) = 250 and 15 (stime) = 70; the name contains a space and a ')'.
        let stat = "1234 (my )proc) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 70 0 0 20 0 9 0 \
                    55 1000 10 18446744073709551615";
        assert_eq!(parse_cpu_ticks(stat), Some(320));
        assert_eq!(parse_cpu_ticks("garbage"), None);
    }

    #[test]
    fn topology_has_no_impairment() {
        // No impairment anywhere ⇒ testbed adds no diversion rule ⇒ emulator not in the path.
        let topo = topology::parse(TOPOLOGY).unwrap();
        assert_eq!(n_m(&topo), 4);
        assert!(topo.pairs.is_empty() && topo.leased.is_empty());
        for b in &topo.branches {
            for w in &b.wan {
                assert!(w.up_impairment().is_none() && w.down_impairment().is_none());
            }
        }
        assert_eq!(topology_text(None), TOPOLOGY);
    }

    #[test]
    fn uplink_rate_limits_every_uplink_both_ways() {
        let topo = topology::parse(&topology_text(Some(100.0))).unwrap();
        assert_eq!(n_m(&topo), 4);
        let mut n = 0;
        for b in &topo.branches {
            for w in &b.wan {
                for imp in [w.up_impairment(), w.down_impairment()] {
                    assert_eq!(imp.rate_mbit, Some(100.0));
                }
                n += 1;
            }
        }
        assert_eq!(n, 4);
    }
}
