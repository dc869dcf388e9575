//! `cargo xtask bench latency`: latency under load through the tunnel (issue #16, DESIGN §8
//! "Who owns the queue").
//!
//! Testbed: the 2x2 (two branches, two internet uplinks each), every uplink at `--rate-mbit`
//! both ways and half of `--delay-ms` on each end, so a WAN path (e.g. 1a → 2a) has `--delay-ms`
//! one way; the WAN emulator's queue is its default (100 ms at the rate, at least 64 KiB).
//! `mmsg` runs in both gateways with the example configs, the run's `[tls]`, and **one** path
//! group, so every Type II flow shares one connection (the worst case for head-of-line waiting,
//! and the fairness case's "one path group"); Type I has its own connection, as always.
//!
//! Per variant (one set of `mmsg` levers, `--variant`; `mmsg` restarted for each), loads one
//! after another, each `--secs` long after `--warmup` seconds:
//! - `idle`; `bulk1`: one iperf3 TCP flow h1 → h2; `bulk4`: four; `udp2x`: iperf3 UDP offered at
//!   twice the capacity h1 → h2 (the sum of branch 1's uplinks). All Type II.
//! - during each: ICMP ping h1 → h2 every 50 ms (Type II), a TCP request/response probe
//!   (1 byte each way, netperf TCP_RR style, Type II), a sparse voice-like UDP flow (172 B every
//!   20 ms, echoed by h2, Type II: same class as the bulk) and the same flow marked DSCP 46 (Type I
//!   by the classifier rule `realtime`). The probes are real sockets on threads inside the
//!   namespaces ([`probe`]).
//! - mid-way, what the sending gateway holds: `ss -tmi` of its subflows (unsent bytes, bytes in
//!   flight, smoothed RTT) and of its MPTCP sockets, and the WAN emulator's queue drops.
//!
//! Then the fairness case: 200 TCP flows h1 → h2 (two iperf3 clients with `-P 100`: iperf3
//! allows 128 per client), per-flow goodput → Jain's index and the slowest flow's share of the
//! fair share. Once per run: the path RTT, ping gw1 → gw2 over the raw uplink pair 1a → 2a.
//!
//! Aim (issue #16): ping p99 ≤ path RTT + 10 ms under every load; sparse loss < 0.5 %.

use std::collections::BTreeMap;
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};

use crate::mmsg::{self, Profile};
use crate::{bench_tunnel, deps, iperf, sh, testbed, topology};

pub mod probe;
mod report;
pub use report::{
    jain, print_table, Dist, Fairness, LoadResult, Probe, QueueSample, Report, VariantResult,
};

/// Port of the TCP request/response probe (h2).
const PORT_RR: u16 = 5451;
/// Ports of the voice-like UDP echo servers (h2): Type II and Type I.
const PORT_VOICE: u16 = 5452;
const PORT_VOICE_T1: u16 = 5453;
/// iperf3 ports (h2) of the loads and the fairness case.
const PORT_LOAD: u16 = 5461;
const PORT_FAIR: [u16; 2] = [5462, 5463];
/// DSCP of the Type I probe (expedited forwarding; the example classifier's `realtime` rule).
pub const TYPE1_DSCP: u8 = 46;
/// Ping interval during a load.
const PING_INTERVAL_S: f64 = 0.05;
/// How long `mmsg` gets to bring every connection up.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// The loads, in the order run.
pub const LOADS: [&str; 4] = ["idle", "bulk1", "bulk4", "udp2x"];
/// Flows of the fairness case, per iperf3 client (two clients).
const FAIR_PER_CLIENT: u32 = 100;

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Workspace root.
    pub root: PathBuf,
    /// Testbed prefix.
    pub prefix: String,
    /// Uplink rates, Mbit/s: one value for all four ports, or four (1a, 1b, 2a, 2b).
    pub rate_mbit: Vec<f64>,
    /// One-way delay of a WAN path, ms (half on each end's uplink).
    pub delay_ms: f64,
    /// The one-way delay every WAN path gets once a variant's connections are up, before its
    /// loads (restored after them): an RTT that rises under live subflows.
    pub delay_after_start_ms: Option<f64>,
    /// Measured seconds per load.
    pub secs: u32,
    /// Seconds of load before the probes start.
    pub warmup: u32,
    /// Variants to run, in order (see [`Variant::parse`]).
    pub variants: Vec<String>,
    /// Loads to run (subset of [`LOADS`]).
    pub loads: Vec<String>,
    /// Seconds of the fairness case (0: skip it).
    pub fairness_secs: u32,
    /// Build profile of `mmsg`.
    pub profile: Profile,
    /// The command line, recorded in the report.
    pub command: String,
}

impl Options {
    /// The defaults of `cargo xtask bench latency`.
    pub fn new(root: &Path, prefix: &str) -> Options {
        Options {
            root: root.to_owned(),
            prefix: prefix.to_owned(),
            rate_mbit: vec![10.0],
            delay_ms: 10.0,
            delay_after_start_ms: None,
            secs: 8,
            warmup: 2,
            variants: vec!["default".to_owned(), "old".to_owned()],
            loads: LOADS.iter().map(|s| (*s).to_owned()).collect(),
            fairness_secs: 8,
            profile: Profile::Release,
            command: String::new(),
        }
    }

    /// Rates of 1a, 1b, 2a, 2b.
    fn rates(&self) -> anyhow::Result<[f64; 4]> {
        let r = match self.rate_mbit.as_slice() {
            [a] => [*a; 4],
            [a, b, c, d] => [*a, *b, *c, *d],
            _ => bail!("--rate-mbit takes one rate or four (1a,1b,2a,2b)"),
        };
        ensure!(
            r.iter().all(|x| x.is_finite() && *x >= 1.0),
            "--rate-mbit: every rate must be at least 1"
        );
        Ok(r)
    }

    /// Capacity h1 → h2: branch 1's uplinks, or branch 2's downlinks if less.
    fn capacity_mbit(&self) -> anyhow::Result<f64> {
        let r = self.rates()?;
        Ok((r[0] + r[1]).min(r[2] + r[3]))
    }
}

/// One set of `mmsg` levers.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    /// Short name.
    pub name: String,
    /// Extra `mmsg run` flags.
    pub args: Vec<String>,
    /// `[qos] shaping_percent` with every `wan[k].rate_mbit` set to the emulated rate; `None`:
    /// no shaping (no `rate_mbit`).
    pub shape_percent: Option<u8>,
    /// `[qos] sparse_lane_kbit` (`sparse=KBIT`); `None`: the config's default (on with
    /// `shape=` or `autorate`, off without).
    pub sparse_lane_kbit: Option<u32>,
    /// `[qos] autorate` (`autorate`): every port shaped at a rate that follows the uplink,
    /// from `rate_mbit` × P % with `shape=P`, else from 1 Gbit/s.
    pub autorate: bool,
}

/// The socket defaults of `mmsg run` before issue #16, as flags (fixed 4 MiB buffers, 128 KiB
/// `TCP_NOTSENT_LOWAT`, 256 KiB batches, no send budget, no send time budget).
pub const OLD_FLAGS: &str =
    "--socket-buffer 4194304 --notsent-lowat 131072 --max-batch 262144 --send-budget 0 --send-time-budget 0s";

impl Variant {
    /// `NAME` (one of the named sets: `default` = the binary's defaults, `old` = [`OLD_FLAGS`]
    /// and no sparse lane,
    /// `shaped` = the defaults + shaping at 95 %, `old-shaped`, `autorate` = the defaults +
    /// `[qos] autorate` without a rate) or `NAME:SPEC` where SPEC is space-separated `mmsg run`
    /// flags, plus `shape=P` for shaping at P %, `sparse=KBIT` for `[qos] sparse_lane_kbit`
    /// (`sparse=0`: the sparse lane off) and `autorate` for `[qos] autorate`.
    pub fn parse(s: &str) -> anyhow::Result<Variant> {
        let (name, spec) = match s.split_once(':') {
            Some((n, spec)) => (n, spec.to_owned()),
            None => (
                s,
                match s {
                    "default" => String::new(),
                    "old" => format!("{OLD_FLAGS} sparse=0"),
                    "shaped" => "shape=95".to_owned(),
                    "old-shaped" => format!("{OLD_FLAGS} sparse=0 shape=95"),
                    "autorate" => "autorate".to_owned(),
                    _ => bail!(
                        "unknown variant {s:?}: default, old, shaped, old-shaped, autorate or \
                         NAME:FLAGS"
                    ),
                },
            ),
        };
        ensure!(
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
            "variant name {name:?}: letters, digits and '-' only"
        );
        let mut v = Variant {
            name: name.to_owned(),
            args: Vec::new(),
            shape_percent: None,
            sparse_lane_kbit: None,
            autorate: false,
        };
        for tok in spec.split_whitespace() {
            if tok == "autorate" {
                v.autorate = true;
                continue;
            }
            if let Some(k) = tok.strip_prefix("sparse=") {
                let k: u32 = k.parse().context("sparse=KBIT")?;
                ensure!(
                    k <= mpa::config::MAX_SPARSE_LANE_KBIT,
                    "sparse= takes 0..={}",
                    mpa::config::MAX_SPARSE_LANE_KBIT
                );
                v.sparse_lane_kbit = Some(k);
                continue;
            }
            if let Some(p) = tok.strip_prefix("shape=") {
                let p: u8 = p.parse().context("shape=PERCENT")?;
                ensure!((1..=100).contains(&p), "shape= takes 1..=100");
                v.shape_percent = Some(p);
            } else {
                v.args.push(tok.to_owned());
            }
        }
        Ok(v)
    }

    /// What it is, for the report.
    pub fn describe(&self) -> String {
        let mut s = if self.args.is_empty() {
            "mmsg defaults".to_owned()
        } else {
            format!("mmsg run {}", self.args.join(" "))
        };
        match (self.shape_percent, self.autorate) {
            (Some(p), false) => {
                s.push_str(&format!("; WAN egress shaped at {p} % of the uplink rate"))
            }
            (Some(p), true) => s.push_str(&format!(
                "; WAN egress shaped automatically, at most {p} % of the uplink rate"
            )),
            (None, true) => s.push_str("; WAN egress shaped automatically, no rate configured"),
            (None, false) => s.push_str("; no gateway shaping"),
        }
        match self.sparse_lane_kbit {
            Some(0) => s.push_str("; sparse lane off"),
            Some(k) => s.push_str(&format!("; sparse lane {k} kbit/s per flow")),
            None => {}
        }
        s
    }
}

/// The 2x2 topology with these rates and the path delay split over both ends.
pub fn topology_text(rates: &[f64; 4], delay_ms: f64) -> String {
    let port = |r: f64| format!("{{ rate_mbit = {r}, delay_ms = {} }}", delay_ms / 2.0);
    format!(
        "name = \"latency\"\n[[branch]]\nid = 1\nhosts = 1\nwan = [{}, {}]\n\
         [[branch]]\nid = 2\nhosts = 1\nwan = [{}, {}]\n",
        port(rates[0]),
        port(rates[1]),
        port(rates[2]),
        port(rates[3])
    )
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace().find_map(|t| t.strip_prefix(key))
}

/// Parses `ss -tniH` (subflows) into the subflow part of a [`QueueSample`].
pub fn parse_ss_tcp(out: &str, q: &mut QueueSample) {
    for line in out.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        // A socket line: Recv-Q Send-Q Local Peer (state omitted with `state established`).
        let num = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok());
        if let (true, Some(_), Some(send_q)) = (f.len() >= 4, num(0), num(1)) {
            q.subflows += 1;
            q.subflow_send_q += send_q;
            continue;
        }
        let mss: u64 = field(line, "mss:")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let unacked: u64 = field(line, "unacked:")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        q.subflow_in_flight += mss * unacked;
        q.subflow_notsent += field(line, "notsent:")
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        if let Some(rtt) = field(line, "rtt:")
            .and_then(|v| v.split('/').next())
            .and_then(|v| v.parse::<f64>().ok())
        {
            q.subflow_max_srtt_ms = q.subflow_max_srtt_ms.max(rtt);
        }
    }
}

/// Σ Send-Q of `ss -MnH` lines.
pub fn parse_ss_mptcp(out: &str) -> u64 {
    out.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // State Recv-Q Send-Q ... or Recv-Q Send-Q ... depending on the filter.
            let nums: Vec<u64> = f.iter().take(3).filter_map(|x| x.parse().ok()).collect();
            nums.get(1).copied()
        })
        .sum()
}

fn queue_sample(prefix: &str) -> QueueSample {
    let gw1 = testbed::ns_gw(prefix, 1);
    let mut q = QueueSample::default();
    if let Ok(out) = sh::ns(&gw1, "ss", &["-tniH", "state", "established"]) {
        parse_ss_tcp(&out, &mut q);
    }
    if let Ok(out) = sh::ns(&gw1, "ss", &["-MnH", "state", "established"]) {
        q.mptcp_send_q = parse_ss_mptcp(&out);
    }
    q
}

/// The WAN emulator's queue drops so far.
fn wan_queue_drops(prefix: &str) -> u64 {
    let path = testbed::state_dir(prefix).join("wanem-stats.json");
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v.pointer("/core/queue_drops")?.as_u64())
        .unwrap_or(0)
}

/// `mmsg` in gw1 and gw2, stopped by PID on drop.
struct Gateways {
    bin: PathBuf,
    gws: Vec<(Child, PathBuf)>,
}

impl Drop for Gateways {
    fn drop(&mut self) {
        let pids: Vec<u32> = self.gws.iter().map(|(c, _)| c.id()).collect();
        testbed::stop_pids(&pids, Duration::from_secs(5));
        for (c, _) in &mut self.gws {
            let _ = c.wait();
        }
    }
}

impl Gateways {
    fn status(&self, i: usize) -> Option<serde_json::Value> {
        let (_, control) = self.gws.get(i)?;
        mmsg::status(&self.bin, control).ok()
    }
}

fn counters(s: &Option<serde_json::Value>) -> BTreeMap<String, u64> {
    s.as_ref()
        .and_then(|s| s.get("counters")?.as_object().cloned())
        .map(|m| {
            m.into_iter()
                .filter_map(|(k, v)| Some((k, v.as_u64()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// Counters of gw1 whose growth matters for latency and goodput (drops, dead connections,
/// subflows demoted, closed or made again during a load; packets in the sparse lane).
const WATCH: [&str; 12] = [
    "sparse_lane_packets",
    "autorate_down",
    "autorate_up",
    "drop_queue_full",
    "drop_codel",
    "codel_marks",
    "conn_dead",
    "drop_no_group",
    "subflows_demoted",
    "subflows_probed",
    "pm_sub_closed",
    "subflow_create_ok",
];

/// The [`WATCH`] counters that grew from `c0` to `c1`, by how much.
fn counter_growth(c0: &BTreeMap<String, u64>, c1: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    WATCH
        .iter()
        .filter_map(|k| {
            let d = c1
                .get(*k)
                .copied()
                .unwrap_or(0)
                .saturating_sub(c0.get(*k).copied().unwrap_or(0));
            (d > 0).then(|| ((*k).to_owned(), d))
        })
        .collect()
}

/// The config of branch `b` for variant `v`: the example, one path group, the run's TLS, and
/// with shaping every WAN port's `rate_mbit`.
fn gateway_config(
    opts: &Options,
    v: &Variant,
    b: u8,
    tls: &BTreeMap<u8, mpa::config::TlsConfig>,
) -> anyhow::Result<PathBuf> {
    let mut c = mmsg::example(&opts.root, b)?;
    for r in &mut c.remote {
        r.path_groups.truncate(1);
    }
    c.tls = tls.get(&b).cloned();
    let rates = opts.rates()?;
    if let Some(p) = v.shape_percent {
        for (k, w) in c.wan.iter_mut().enumerate() {
            let r = rates
                .get(usize::from(b - 1) * 2 + k)
                .copied()
                .unwrap_or(rates[0]);
            w.rate_mbit = Some(r.round().max(1.0) as u32);
        }
        c.qos.shaping_percent = p;
    }
    if let Some(k) = v.sparse_lane_kbit {
        c.qos.sparse_lane_kbit = Some(k);
    }
    c.qos.autorate = v.autorate;
    let path = testbed::state_dir(&opts.prefix).join(format!("latency-gw{b}-{}.toml", v.name));
    mmsg::write_config(
        &path,
        &format!(
            "bench latency variant {}: examples/mmsg-branch{b}.toml, one path group",
            v.name
        ),
        &c,
    )?;
    Ok(path)
}

fn start_gateways(
    opts: &Options,
    bin: &Path,
    v: &Variant,
    tls: &BTreeMap<u8, mpa::config::TlsConfig>,
) -> anyhow::Result<Gateways> {
    let dir = testbed::state_dir(&opts.prefix);
    let mut g = Gateways {
        bin: bin.to_owned(),
        gws: Vec::new(),
    };
    for b in [1u8, 2] {
        let config = gateway_config(opts, v, b, tls)?;
        let control = dir.join(format!("latency-gw{b}.sock"));
        let log = std::fs::File::create(dir.join(format!("latency-gw{b}-{}.log", v.name)))?;
        let child = Command::new("ip")
            .args(["netns", "exec", &testbed::ns_gw(&opts.prefix, b)])
            .arg(bin)
            .arg("run")
            .arg("--config")
            .arg(&config)
            .arg("--control")
            .arg(&control)
            .args(&v.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("start mmsg")?;
        g.gws.push((child, control));
    }
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let up = (0..2).all(|i| {
            g.status(i)
                .and_then(|s| crate::e2e::subflows_when_up(&s))
                .is_some_and(|n| n.iter().all(|&k| k == 4))
        });
        if up {
            return Ok(g);
        }
        for (c, _) in &mut g.gws {
            if let Ok(Some(st)) = c.try_wait() {
                bail!("mmsg exited at start ({st}); logs in {}", dir.display());
            }
        }
        if Instant::now() > deadline {
            bail!(
                "mmsg (variant {}) did not bring every connection up with 4 subflows within {} s \
                 (logs in {})",
                v.name,
                START_TIMEOUT.as_secs(),
                dir.display()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// ICMP ping from `ns` to `dst` for `secs` (every [`PING_INTERVAL_S`]).
fn ping(ns: &str, dst: &str, secs: u32, src: Option<&str>) -> anyhow::Result<probe::Samples> {
    let count = ((f64::from(secs) / PING_INTERVAL_S).round() as u32).max(1);
    let (c, i) = (count.to_string(), PING_INTERVAL_S.to_string());
    let mut args = vec!["-n", "-c", &c, "-i", &i, "-W", "3"];
    if let Some(s) = src {
        args.extend(["-I", s]);
    }
    args.push(dst);
    // ping exits 1 when a reply is missing: that is a result, not an error.
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "ping"])
        .args(&args)
        .output()
        .context("run ping")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let rtt_ms = bench_tunnel::ping_rtts_us(&text)
        .into_iter()
        .map(|us| us / 1000.0)
        .collect();
    Ok(probe::Samples {
        rtt_ms,
        sent: u64::from(count),
    })
}

/// The iperf3 client arguments of a load (to h2 port [`PORT_LOAD`]).
fn load_args(load: &str, dst: &str, t: u32, omit: u32, cap_mbit: f64) -> Option<Vec<String>> {
    let mut a: Vec<String> = ["-c", dst, "-p"].iter().map(|s| (*s).to_owned()).collect();
    a.push(PORT_LOAD.to_string());
    a.extend([
        "-t".to_owned(),
        t.to_string(),
        "-O".to_owned(),
        omit.to_string(),
    ]);
    match load {
        "bulk1" => {}
        "bulk4" => a.extend(["-P".to_owned(), "4".to_owned()]),
        "udp2x" => a.extend([
            "-u".to_owned(),
            "-b".to_owned(),
            format!("{}M", 2.0 * cap_mbit),
            "-l".to_owned(),
            "1300".to_owned(),
        ]),
        _ => return None,
    }
    Some(a)
}

fn received_mbps(v: &serde_json::Value, udp: bool) -> Option<f64> {
    if udp {
        v.pointer("/end/sum_received/bits_per_second")?
            .as_f64()
            .map(|b| b / 1e6)
    } else {
        iperf::tcp_received_mbps(v)
    }
}

fn run_load(
    opts: &Options,
    g: &Gateways,
    load: &str,
    path_rtt_ms: f64,
) -> anyhow::Result<LoadResult> {
    let p = &opts.prefix;
    let (h1, h2) = (testbed::ns_host(p, 1, 0), testbed::ns_host(p, 2, 0));
    let dst_ip = testbed::host_addr(2, 0);
    let dst = dst_ip.to_string();
    let s0 = g.status(0);
    let drops0 = wan_queue_drops(p);
    // The load runs through warmup, the probes and their drain.
    let t = opts.warmup + opts.secs + probe::DRAIN.as_secs() as u32 + 1;
    let loader = if load == "idle" {
        None
    } else {
        let args = load_args(load, &dst, t, opts.warmup, opts.capacity_mbit()?)
            .with_context(|| format!("unknown load {load:?}"))?;
        let server = iperf::Server::start(&h2, PORT_LOAD, None)?;
        let h1c = h1.clone();
        let th = std::thread::spawn(move || {
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            iperf::client(&h1c, &a)
        });
        Some((server, th))
    };
    if loader.is_some() {
        std::thread::sleep(Duration::from_secs(u64::from(opts.warmup)));
    }
    let dur = Duration::from_secs(u64::from(opts.secs));
    let voice = probe::udp_probe(&h1, SocketAddrV4::new(dst_ip, PORT_VOICE), 0, dur);
    let type1 = probe::udp_probe(
        &h1,
        SocketAddrV4::new(dst_ip, PORT_VOICE_T1),
        TYPE1_DSCP,
        dur,
    );
    let rr = probe::rr_probe(&h1, SocketAddrV4::new(dst_ip, PORT_RR), dur);
    let pinger = {
        let (h1, dst, secs) = (h1.clone(), dst.clone(), opts.secs);
        std::thread::spawn(move || ping(&h1, &dst, secs, None))
    };
    std::thread::sleep(dur / 2);
    let mut queues = queue_sample(p);
    if let Some(s) = g.status(0) {
        queues.read_status(&s);
    }
    let ping_s = pinger
        .join()
        .map_err(|_| anyhow::anyhow!("ping thread panicked"))??;
    let voice = probe::join(voice)?;
    let type1 = probe::join(type1)?;
    let rr = probe::join(rr).unwrap_or_else(|e| {
        eprintln!("bench latency: request/response probe failed: {e:#}");
        probe::Samples::default()
    });
    let bulk_mbps = match loader {
        Some((server, th)) => {
            let v = th
                .join()
                .map_err(|_| anyhow::anyhow!("iperf3 thread panicked"))??;
            server.wait(Duration::from_secs(3));
            received_mbps(&v, load == "udp2x")
        }
        None => None,
    };
    queues.wan_queue_drops = wan_queue_drops(p).saturating_sub(drops0);
    let s1 = g.status(0);
    let mmsg_counters = counter_growth(&counters(&s0), &counters(&s1));
    let autorate_kbit = autorate_rates(&s1);
    let r = LoadResult {
        load: load.to_owned(),
        ping: Probe::from_samples(&ping_s),
        rr: Probe::from_samples(&rr),
        sparse: Probe::from_samples(&voice),
        type1: Probe::from_samples(&type1),
        bulk_mbps,
        queues: Some(queues),
        mmsg_counters,
        autorate_kbit,
    };
    let cell = |p: &Probe| {
        p.rtt_ms
            .map_or("-".to_owned(), |d| format!("{:.1}/{:.1}", d.median, d.p99))
    };
    eprintln!(
        "bench latency: {load}: ping {} ms, RR {} ms, voice {} ms ({:.2} % lost), Type I {} ms, \
         {} Mbit/s (aim p99 <= {:.1}); gw1 {:?} {:?}{}",
        cell(&r.ping),
        cell(&r.rr),
        cell(&r.sparse),
        r.sparse.loss_pct,
        cell(&r.type1),
        r.bulk_mbps.map_or("-".to_owned(), |b| format!("{b:.1}")),
        path_rtt_ms + report::AIM_SLACK_MS,
        r.mmsg_counters,
        r.queues,
        if r.autorate_kbit.is_empty() {
            String::new()
        } else {
            format!(" autorate kbit/s {:?}", r.autorate_kbit)
        },
    );
    Ok(r)
}

/// gw1's `[qos] autorate` rates in `mmsg status --json` (`autorate[].rate_kbit`), in port order.
fn autorate_rates(s: &Option<serde_json::Value>) -> Vec<u64> {
    s.as_ref()
        .and_then(|s| s.get("autorate")?.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p.get("rate_kbit")?.as_u64())
        .collect()
}

/// Per-flow received goodput (Mbit/s) of an iperf3 TCP client's JSON.
pub fn per_flow_mbps(v: &serde_json::Value) -> Vec<f64> {
    v.pointer("/end/streams")
        .and_then(serde_json::Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.pointer("/receiver/bits_per_second")?.as_f64())
                .map(|b| b / 1e6)
                .collect()
        })
        .unwrap_or_default()
}

/// Jain's index and the slowest flow's share of the fair share of `flows`.
pub fn fairness_of(flows: &[f64]) -> Option<Fairness> {
    let total: f64 = flows.iter().sum();
    let fair = total / flows.len() as f64;
    let min = flows.iter().copied().fold(f64::INFINITY, f64::min);
    Some(Fairness {
        flows: flows.len(),
        total_mbps: total,
        jain_fairness: jain(flows)?,
        min_flow_share: (fair > 0.0).then(|| min / fair)?,
        mmsg_counters: BTreeMap::new(),
        queues: None,
    })
}

fn fairness(opts: &Options, g: &Gateways) -> anyhow::Result<Fairness> {
    let t0 = Instant::now();
    let p = &opts.prefix;
    let s0 = g.status(0);
    let (h1, h2) = (testbed::ns_host(p, 1, 0), testbed::ns_host(p, 2, 0));
    let dst = testbed::host_addr(2, 0).to_string();
    let mut servers = Vec::new();
    let mut clients = Vec::new();
    for port in PORT_FAIR {
        servers.push(iperf::Server::start(&h2, port, None)?);
    }
    for port in PORT_FAIR {
        let args: Vec<String> = [
            "-c".to_owned(),
            dst.clone(),
            "-p".to_owned(),
            port.to_string(),
            "-P".to_owned(),
            FAIR_PER_CLIENT.to_string(),
            "-t".to_owned(),
            (opts.fairness_secs + 2).to_string(),
            "-O".to_owned(),
            "2".to_owned(),
        ]
        .into();
        let h1 = h1.clone();
        clients.push(std::thread::spawn(move || {
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            iperf::client(&h1, &a)
        }));
    }
    // Mid-way through the measured part (after iperf3's 2 s omitted).
    std::thread::sleep(Duration::from_secs(2 + u64::from(opts.fairness_secs) / 2));
    let queues = queue_sample(p);
    let mut flows = Vec::new();
    for c in clients {
        let v = c
            .join()
            .map_err(|_| anyhow::anyhow!("iperf3 thread panicked"))??;
        flows.extend(per_flow_mbps(&v));
    }
    for s in servers {
        s.wait(Duration::from_secs(3));
    }
    let want = (2 * FAIR_PER_CLIENT) as usize;
    ensure!(
        flows.len() == want,
        "fairness: {} of {want} flows reported a goodput",
        flows.len()
    );
    let mut f = fairness_of(&flows).context("fairness: no goodput")?;
    f.mmsg_counters = counter_growth(&counters(&s0), &counters(&g.status(0)));
    f.queues = Some(queues);
    eprintln!(
        "bench latency: fairness: {} flows, {:.1} Mbit/s, Jain {:.3}, min share {:.2} ({:.1} s); \
         gw1 {:?} {:?}",
        f.flows,
        f.total_mbps,
        f.jain_fairness,
        f.min_flow_share,
        t0.elapsed().as_secs_f64(),
        f.mmsg_counters,
        f.queues
    );
    Ok(f)
}

fn run_variant(
    opts: &Options,
    bin: &Path,
    v: &Variant,
    tls: &BTreeMap<u8, mpa::config::TlsConfig>,
    path_rtt_ms: f64,
) -> anyhow::Result<VariantResult> {
    eprintln!("bench latency: variant {}: {}", v.name, v.describe());
    let g = start_gateways(opts, bin, v, tls)?;
    let p = &opts.prefix;
    let h2 = testbed::ns_host(p, 2, 0);
    let _rr = probe::rr_server(&h2, PORT_RR)?;
    let _voice = probe::udp_echo(&h2, PORT_VOICE, 0)?;
    let _voice1 = probe::udp_echo(&h2, PORT_VOICE_T1, TYPE1_DSCP)?;
    let path_rtt_ms = match opts.delay_after_start_ms {
        Some(d) => {
            set_path_delay(opts, d)?;
            let rtt = path_rtt(p)?;
            eprintln!("bench latency: path delay now {d} ms one way: path RTT {rtt:.1} ms");
            rtt
        }
        None => path_rtt_ms,
    };
    let mut loads = Vec::new();
    for load in &opts.loads {
        loads.push(run_load(opts, &g, load, path_rtt_ms)?);
    }
    let fair = if opts.fairness_secs > 0 {
        Some(fairness(opts, &g)?)
    } else {
        None
    };
    drop(g);
    if opts.delay_after_start_ms.is_some() {
        set_path_delay(opts, opts.delay_ms)?;
    }
    Ok(VariantResult::new(
        &v.name,
        v.describe(),
        path_rtt_ms,
        loads,
        fair,
    ))
}

/// Runs the benchmark; always tears the testbed down.
pub fn run(opts: &Options) -> anyhow::Result<Report> {
    ensure!(opts.secs >= 2, "--secs must be at least 2");
    for l in &opts.loads {
        ensure!(LOADS.contains(&l.as_str()), "unknown load {l:?}: {LOADS:?}");
    }
    let variants: Vec<Variant> = opts
        .variants
        .iter()
        .map(|s| Variant::parse(s))
        .collect::<Result<_, _>>()?;
    ensure!(!variants.is_empty(), "no variant to run");
    for d in std::iter::once(opts.delay_ms).chain(opts.delay_after_start_ms) {
        ensure!(
            d.is_finite() && (0.0..=1000.0).contains(&d),
            "--delay-ms and --delay-after-start-ms must be in 0..=1000"
        );
    }
    deps::ensure()?;
    let rates = opts.rates()?;
    eprintln!("bench latency: building mmsg");
    let bin = mmsg::build_mmsg(&opts.root, opts.profile)?;
    let topo = topology::parse(&topology_text(&rates, opts.delay_ms))?;
    testbed::run_on(&topo, &opts.prefix, || run_all(opts, &bin, &variants))
}

/// The path RTT now: the median of a 3 s ping gw1 → gw2 over the raw uplink pair 1a → 2a.
fn path_rtt(prefix: &str) -> anyhow::Result<f64> {
    let gw1 = testbed::ns_gw(prefix, 1);
    let path = ping(&gw1, "198.18.20.2", 3, Some("198.18.10.2"))?;
    crate::stats::median(&path.rtt_ms).context("no reply over 1a -> 2a")
}

/// Every WAN path's one-way delay to `delay_ms` (half on each end's uplink, rates unchanged)
/// while the gateways run.
fn set_path_delay(opts: &Options, delay_ms: f64) -> anyhow::Result<()> {
    let rates = opts.rates()?;
    for (port, rate) in ["1a", "1b", "2a", "2b"].into_iter().zip(rates) {
        let imp = topology::Impairment {
            rate_mbit: Some(rate),
            delay_ms: Some(delay_ms / 2.0),
            ..Default::default()
        };
        testbed::link_set(&opts.prefix, port, testbed::Direction::Both, &imp)?;
    }
    Ok(())
}

fn run_all(opts: &Options, bin: &Path, variants: &[Variant]) -> anyhow::Result<Report> {
    let p = &opts.prefix;
    let tls = mmsg::provision_tls(
        &testbed::state_dir(p).join("latency-tls"),
        "MMS latency CA",
        &[1, 2],
    )?;
    let path_rtt_ms = path_rtt(p)?;
    eprintln!("bench latency: path RTT 1a -> 2a {path_rtt_ms:.1} ms");
    let mut out = Vec::new();
    for v in variants {
        out.push(run_variant(opts, bin, v, &tls, path_rtt_ms)?);
    }
    Ok(Report::new(
        opts.command.clone(),
        opts.rate_mbit.first().copied().unwrap_or(f64::NAN),
        opts.delay_ms,
        opts.secs,
        path_rtt_ms,
        out,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_parse() {
        let v = Variant::parse("old").unwrap();
        assert_eq!(v.args.join(" "), OLD_FLAGS);
        assert_eq!((v.shape_percent, v.sparse_lane_kbit), (None, Some(0)));
        let v = Variant::parse("x:--notsent-lowat 16384 shape=90").unwrap();
        assert_eq!(
            (v.name.as_str(), v.args.len(), v.shape_percent),
            ("x", 2, Some(90))
        );
        assert!(Variant::parse("nope").is_err());
        assert!(Variant::parse("a b:--x").is_err());
        assert!(Variant::parse("x:shape=0").is_err());
        let v = Variant::parse("y:shape=95 sparse=0").unwrap();
        assert_eq!(
            (v.args.len(), v.shape_percent, v.sparse_lane_kbit),
            (0, Some(95), Some(0))
        );
        assert!(Variant::parse("y:sparse=10001").is_err());
        let v = Variant::parse("autorate").unwrap();
        assert!(v.autorate && v.args.is_empty() && v.shape_percent.is_none());
        let v = Variant::parse("a:autorate shape=100 --pacing").unwrap();
        assert_eq!(
            (v.autorate, v.shape_percent, v.args.len()),
            (true, Some(100), 1)
        );
        assert!(!Variant::parse("shaped").unwrap().autorate);
    }

    #[test]
    fn topology_splits_the_delay() {
        let t = topology::parse(&topology_text(&[10.0, 5.0, 10.0, 10.0], 10.0)).unwrap();
        let w = &t.branches[0].wan[1];
        assert_eq!(w.up_impairment().rate_mbit, Some(5.0));
        assert_eq!(w.up_impairment().delay_ms, Some(5.0));
    }

    #[test]
    fn parses_ss() {
        let tcp = "0 12000 198.18.10.2:40000 198.18.20.2:4096\n\t cubic wscale:7,7 rto:224 \
                   rtt:23.5/1.2 mss:1360 cwnd:20 unacked:8 notsent:5000\n\
                   0 100 198.18.11.2:40001 198.18.21.2:4096\n\t bbr rtt:40.1/3 mss:1000 \
                   unacked:2\n";
        let mut q = QueueSample::default();
        parse_ss_tcp(tcp, &mut q);
        assert_eq!(q.subflows, 2);
        assert_eq!(q.subflow_send_q, 12100);
        assert_eq!(q.subflow_in_flight, 8 * 1360 + 2 * 1000);
        assert_eq!(q.subflow_notsent, 5000);
        assert!((q.subflow_max_srtt_ms - 40.1).abs() < 1e-9);
        assert_eq!(parse_ss_mptcp("0 300 a b\n0 50 c d\n"), 350);
    }

    #[test]
    fn fairness_figures() {
        let f = fairness_of(&[1.0, 1.0, 1.0, 0.2]).unwrap();
        assert!((f.min_flow_share - 0.2 / 0.8).abs() < 1e-9);
        assert!(f.jain_fairness < 1.0 && f.jain_fairness > 0.8);
    }

    #[test]
    fn load_arguments() {
        let a = load_args("udp2x", "198.19.2.10", 10, 2, 20.0).unwrap();
        assert!(a.join(" ").contains("-u -b 40M"));
        assert!(load_args("bulk4", "x", 10, 2, 20.0)
            .unwrap()
            .join(" ")
            .contains("-P 4"));
        assert!(load_args("idle", "x", 10, 2, 20.0).is_none());
    }
}
