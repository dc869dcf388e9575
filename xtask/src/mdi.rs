//! `cargo xtask experiment mdi`: seed 001 §IV, Fig. 3. Goodput of one TCP flow striped over two
//! paths as the maximum delay imbalance (MDI, seed 001 eq. 1) grows, with and without the
//! receiving gateway's resequencer, against one path alone.
//!
//! Set-up: the 2-branch × 2-uplink testbed without OVS, unimpaired uplinks, and two path groups
//! from branch 1 to branch 2 (weights 1:1), each pinned to ONE address pair: group 0 to `1a>2a`
//! (path A), group 1 to `1b>2b` (path B). `mmsg`'s path manager opens a subflow on every
//! (local, remote) pair, so an nftables table in the emulated internet answers every SYN of a
//! group's outer port (`mpa::mpa_port`) on a foreign pair with a TCP reset: each connection ends
//! up with exactly one established subflow, on its own path (checked before measuring).
//!
//! Both paths are 10 Mbit/s (`testbed pair`, both directions); path A has `base_ms` one-way
//! delay, path B `base_ms` plus the extra that gives the MDI on the x-axis. Delays are one-way
//! and the same in both directions, so a path's RTT is twice its delay; MDI is a ratio of delays
//! and therefore the same whether d is read as one-way delay or RTT:
//! `d_B = d_A · (0.5 + MDI) / (0.5 − MDI)` ([`delay_for`]).
//!
//! Three phases, so that each gateway restarts at most once: (1) the single-path reference, both
//! gateways without `[striping]` (the flow takes one group; both paths are at `base_ms` then);
//! (2) gw1 stripes, gw2 has no `[striping]` (no resequencer: frames go to TUN in arrival order,
//! like `netns_striping`'s case C); (3) gw2 restarted with `[striping]` (resequencer on). Per
//! point and run: one iperf3 TCP flow h1 → h2 for `secs`, receiver goodput, sender retransmits,
//! h2's `TcpExtTCPOFOQueue` and gw2's `reseq_*` counters as differences over the run.
//! Writes `results/mdi.{json,md,svg}`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use mpa::config::Config;

use crate::iperf;
use crate::mmsg::{self, Profile};
use crate::sh;
use crate::stats::median;
use crate::testbed;
use crate::topology::{self, Impairment};

/// The MDI values of the paper's Fig. 3 x-axis.
pub const PAPER_MDIS: [f64; 10] = [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45];

/// Seconds a run costs beyond its transfer (server start, counters, settling), for the
/// runtime estimate only.
const RUN_OVERHEAD_S: u32 = 4;
/// Seconds a gateway restart and tunnel set-up cost, for the runtime estimate only.
const RESTART_S: u32 = 10;
/// How long the tunnels get to come up after a (re)start: a connection whose first SYN is
/// refused tries the next pair after a short back-off, four pairs at most.
const UP_TIMEOUT: Duration = Duration::from_secs(40);
/// Outbound + inbound connections per gateway: 2 groups × 2 classes × 2 directions.
const CONNECTIONS: usize = 8;
/// The counters of the resequencer reported per point (`mmsg status`).
pub const RESEQ_COUNTERS: [&str; 8] = [
    "reseq_in_order",
    "reseq_buffered",
    "reseq_released_in_order",
    "reseq_released_threshold",
    "reseq_released_timeout",
    "reseq_released_lost",
    "reseq_dup_late",
    "reseq_overflow",
];
/// The testbed's LAN host of branch 2 (iperf3 server).
const H2: &str = "198.19.2.10";
/// First iperf3 port; every run takes the next one.
const BASE_PORT: u16 = 5401;

/// Settings of the experiment.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Settings {
    /// Seconds of traffic per run (the paper: 15 s iperf).
    pub secs: u32,
    /// Runs per point (the median is plotted).
    pub reps: u32,
    /// One-way delay of path A, ms (the paper: 25 ms).
    pub base_ms: f64,
    /// Rate of each path, Mbit/s, both directions (the paper: 10).
    pub rate_mbit: f64,
    /// The MDI values.
    pub mdis: Vec<f64>,
    /// `[striping] threshold_kbit` of the sender: below the paper's path rate so the flow is
    /// striped from its first 100 ms window.
    pub threshold_kbit: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            secs: 15,
            reps: 1,
            base_ms: 25.0,
            rate_mbit: 10.0,
            mdis: PAPER_MDIS.to_vec(),
            threshold_kbit: 1000,
        }
    }
}

impl Settings {
    /// Expected wall time of the whole experiment, seconds.
    pub fn expected_s(&self) -> u32 {
        let runs = self.reps * (1 + 2 * self.mdis.len() as u32);
        runs * (self.secs + RUN_OVERHEAD_S) + 3 * RESTART_S + 20
    }
}

/// MDI of two delays (seed 001 eq. 1): `d_max / (d_max + d_min) − 0.5`.
pub fn mdi_of(a: f64, b: f64) -> f64 {
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    if hi + lo <= 0.0 {
        return 0.0;
    }
    hi / (hi + lo) - 0.5
}

/// The larger delay that gives `mdi` with `d_min` (eq. 1 solved for d_max); `None` outside
/// `0 <= mdi < 0.5` (0.5 needs an infinite delay).
pub fn delay_for(d_min: f64, mdi: f64) -> Option<f64> {
    if !(0.0..0.5).contains(&mdi) || !d_min.is_finite() || d_min < 0.0 {
        return None;
    }
    Some(d_min * (0.5 + mdi) / (0.5 - mdi))
}

/// One run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Run {
    /// Receiver goodput, Mbit/s.
    pub mbps: f64,
    /// Sender retransmits.
    pub retransmits: u64,
    /// Segments h2 queued out of order (`TcpExtTCPOFOQueue`).
    pub ofo: u64,
    /// gw2's resequencer counters over the run.
    pub reseq: BTreeMap<String, u64>,
}

/// One MDI value.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Point {
    /// The MDI.
    pub mdi: f64,
    /// Path B's one-way delay, ms.
    pub delay_b_ms: f64,
    /// Runs with the resequencer.
    pub with: Vec<Run>,
    /// Runs without it.
    pub without: Vec<Run>,
}

/// The median run of `runs` by goodput (the lower middle for an even count), for the table.
pub fn median_run(runs: &[Run]) -> Option<&Run> {
    let mut sorted: Vec<&Run> = runs.iter().collect();
    sorted.sort_by(|a, b| a.mbps.total_cmp(&b.mbps));
    sorted.get(runs.len().saturating_sub(1) / 2).copied()
}

fn median_mbps(runs: &[Run]) -> Option<f64> {
    median(&runs.iter().map(|r| r.mbps).collect::<Vec<_>>())
}

/// The whole result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// The settings.
    pub settings: Settings,
    /// Start, UTC.
    pub started: String,
    /// 1-minute load average at the start.
    pub load: f64,
    /// Wall time, seconds.
    pub wall_s: f64,
    /// The single-path reference runs (unstriped, one path at `base_ms`).
    pub single: Vec<Run>,
    /// The points.
    pub points: Vec<Point>,
}

/// Where a run happens.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Repository root.
    pub root: PathBuf,
    /// Testbed prefix.
    pub prefix: String,
    /// The `mmsg` binary (`None`: build the debug one with cargo).
    pub mmsg: Option<PathBuf>,
}

/// The 2x2 topology with unimpaired uplinks (the paths' bottlenecks are pairs).
const TOPOLOGY: &str = "name = \"mdi\"\n\
[[branch]]\nid = 1\nhosts = 1\nwan = [{}, {}]\n\
[[branch]]\nid = 2\nhosts = 1\nwan = [{}, {}]\n";

/// The nftables table of the emulated internet that pins group g to `1{a+g}>2{a+g}`: SYNs to a
/// group's outer ports (either side may dial) on any other address pair get a TCP reset.
pub fn pin_ruleset() -> anyhow::Result<String> {
    let mut rules = String::new();
    for g in 0u8..2 {
        let ports: Vec<String> = [1u8, 2]
            .iter()
            .map(|b| {
                Ok(mms_types::listen_port(
                    mms_types::BranchId::new(*b)?,
                    mms_types::PathGroupId::new(g)?,
                )
                .to_string())
            })
            .collect::<anyhow::Result<_>>()?;
        let nets = format!("{{ 198.18.1{g}.0/24, 198.18.2{g}.0/24 }}");
        let ports = ports.join(", ");
        for dir in ["saddr", "daddr"] {
            rules.push_str(&format!(
                "    tcp dport {{ {ports} }} ip {dir} != {nets} reject with tcp reset\n"
            ));
        }
    }
    Ok(format!(
        "table ip mmdi_pin {{\n  chain pin {{\n    type filter hook forward priority 0; policy accept;\n{rules}  }}\n}}\n"
    ))
}

/// The gateway config: `examples/mmsg-branch{b}.toml` (two groups, weights 1:1) plus, with
/// `stripe`, a `[striping]` table for Type II flows.
pub fn gateway_config(mut base: Config, stripe: bool, threshold_kbit: u32) -> Config {
    if stripe {
        base.striping = Some(mmsg::striping(
            vec![mms_types::Class::TypeII],
            Vec::new(),
            u64::from(threshold_kbit),
        ));
    }
    base
}

/// One running `mmsg` in a gateway namespace (stopped by PID on drop).
struct Gateway {
    child: Child,
    control: PathBuf,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: kill(2) on the PID of the child we spawned.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Bed {
    prefix: String,
    mmsg: PathBuf,
    dir: PathBuf,
    configs: BTreeMap<(u8, bool), PathBuf>,
    port: u16,
}

impl Bed {
    fn start(&self, b: u8, stripe: bool, tag: &str) -> anyhow::Result<Gateway> {
        let control = self.dir.join(format!("mdi-gw{b}-{tag}.sock"));
        let log = std::fs::File::create(self.dir.join(format!("mdi-gw{b}-{tag}.log")))?;
        let config = self
            .configs
            .get(&(b, stripe))
            .context("no such gateway config")?;
        let child = Command::new("ip")
            .args(["netns", "exec", &testbed::ns_gw(&self.prefix, b)])
            .arg(&self.mmsg)
            .arg("run")
            .arg("--config")
            .arg(config)
            .arg("--control")
            .arg(&control)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("start mmsg")?;
        Ok(Gateway { child, control })
    }

    fn status(&self, gw: &Gateway) -> Option<serde_json::Value> {
        mmsg::status(&self.mmsg, &gw.control).ok()
    }

    /// Waits until both gateways have all connections up, each with exactly one established
    /// subflow (the pinning works).
    fn wait_up(&self, gws: [&Gateway; 2]) -> anyhow::Result<()> {
        let deadline = Instant::now() + UP_TIMEOUT;
        loop {
            let ok = gws.iter().all(|g| {
                self.status(g)
                    .and_then(|s| crate::e2e::subflows_when_up(&s))
                    .is_some_and(|v| v.len() == CONNECTIONS && v.iter().all(|n| *n == 1))
            });
            if ok {
                return Ok(());
            }
            if Instant::now() > deadline {
                let last: Vec<String> = gws
                    .iter()
                    .map(|g| {
                        self.status(g)
                            .and_then(|s| crate::e2e::subflows_when_up(&s))
                            .map_or_else(|| "not all up".to_owned(), |v| format!("{v:?}"))
                    })
                    .collect();
                bail!(
                    "tunnels not up with one subflow per connection within {} s: {last:?} (logs in {})",
                    UP_TIMEOUT.as_secs(),
                    self.dir.display()
                );
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    fn set_paths(&self, settings: &Settings, delay_b_ms: f64) -> anyhow::Result<()> {
        for (from, to, d) in [("1a", "2a", settings.base_ms), ("1b", "2b", delay_b_ms)] {
            let imp = Impairment {
                rate_mbit: Some(settings.rate_mbit),
                delay_ms: Some(d),
                ..Impairment::default()
            };
            testbed::pair_set(&self.prefix, from, to, true, &imp)
                .with_context(|| format!("set pair {from}>{to}"))?;
        }
        Ok(())
    }

    fn ofo(&self) -> u64 {
        let h2 = testbed::ns_host(&self.prefix, 2, 0);
        sh::ns(&h2, "nstat", &["-asz", "TcpExtTCPOFOQueue"])
            .ok()
            .and_then(|out| {
                out.lines().find_map(|l| {
                    let mut it = l.split_whitespace();
                    (it.next() == Some("TcpExtTCPOFOQueue"))
                        .then(|| it.next().and_then(|x| x.parse().ok()))
                        .flatten()
                })
            })
            .unwrap_or(0)
    }

    fn reseq(&self, gw2: &Gateway) -> BTreeMap<String, u64> {
        let s = self.status(gw2).unwrap_or_default();
        RESEQ_COUNTERS
            .iter()
            .map(|n| {
                (
                    (*n).to_owned(),
                    s.pointer(&format!("/counters/{n}"))
                        .and_then(serde_json::Value::as_u64)
                        .unwrap_or(0),
                )
            })
            .collect()
    }

    /// One iperf3 TCP flow h1 → h2; counters as differences over the run.
    fn transfer(&mut self, secs: u32, gw2: &Gateway) -> anyhow::Result<Run> {
        let (h1, h2) = (
            testbed::ns_host(&self.prefix, 1, 0),
            testbed::ns_host(&self.prefix, 2, 0),
        );
        let port = self.port;
        self.port = self.port.wrapping_add(1).max(BASE_PORT);
        let server = iperf::Server::start(&h2, port, None)?;
        let (ofo0, rs0) = (self.ofo(), self.reseq(gw2));
        let v = iperf::client(
            &h1,
            &["-c", H2, "-p", &port.to_string(), "-t", &secs.to_string()],
        )?;
        server.wait(Duration::from_secs(3));
        let (ofo1, rs1) = (self.ofo(), self.reseq(gw2));
        Ok(Run {
            mbps: iperf::tcp_received_mbps(&v).context("iperf3 gave no receiver rate")?,
            retransmits: iperf::tcp_retransmits(&v),
            ofo: ofo1.saturating_sub(ofo0),
            reseq: rs1
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.saturating_sub(rs0.get(k).copied().unwrap_or(0)),
                    )
                })
                .collect(),
        })
    }
}

/// Runs the experiment: testbed up, the three phases, testbed down (always).
pub fn run(opts: &RunOptions, settings: &Settings) -> anyhow::Result<Report> {
    anyhow::ensure!(settings.secs >= 2, "need at least 2 s per run");
    anyhow::ensure!(settings.reps >= 1, "need at least one run per point");
    let delays: Vec<f64> = settings
        .mdis
        .iter()
        .map(|m| {
            delay_for(settings.base_ms, *m).with_context(|| format!("MDI {m} not in [0, 0.5)"))
        })
        .collect::<anyhow::Result<_>>()?;
    let mmsg = match &opts.mmsg {
        Some(p) => p.clone(),
        // The debug build: the tunnel runs at 20 Mbit/s here, well within it.
        None => mmsg::build_mmsg(&opts.root, Profile::Debug)?,
    };
    println!(
        "MDI experiment: {} points × {} rep(s) × (with, without resequencer) + single path, {} s each; expected ~{} s",
        settings.mdis.len(),
        settings.reps,
        settings.secs,
        settings.expected_s()
    );
    let started = crate::sh::utc_now();
    let load = crate::sh::load_1min();
    let t0 = Instant::now();
    let topo = topology::parse(TOPOLOGY)?;
    let (single, points) = testbed::run_on(&topo, &opts.prefix, || {
        phases(opts, settings, &delays, mmsg)
    })?;
    Ok(Report {
        settings: settings.clone(),
        started,
        load,
        wall_s: t0.elapsed().as_secs_f64(),
        single,
        points,
    })
}

fn phases(
    opts: &RunOptions,
    settings: &Settings,
    delays: &[f64],
    mmsg: PathBuf,
) -> anyhow::Result<(Vec<Run>, Vec<Point>)> {
    let dir = testbed::state_dir(&opts.prefix);
    sh::nft(&testbed::ns_inet(&opts.prefix), &pin_ruleset()?)?;
    let mut configs = BTreeMap::new();
    // Mutual TLS with a CA made for the run (TLS is the default, issue #17).
    let tls = mmsg::provision_tls(&dir.join("mdi-tls"), "MMS mdi CA", &[1, 2])?;
    for b in [1u8, 2] {
        let mut base = mmsg::example(&opts.root, b)?;
        base.tls = tls.get(&b).cloned();
        for stripe in [false, true] {
            let p = dir.join(format!(
                "mdi-gw{b}-{}.toml",
                if stripe { "striped" } else { "plain" }
            ));
            mmsg::write_config(
                &p,
                &format!("examples/mmsg-branch{b}.toml, striped: {stripe}"),
                &gateway_config(base.clone(), stripe, settings.threshold_kbit),
            )?;
            configs.insert((b, stripe), p);
        }
    }
    let mut bed = Bed {
        prefix: opts.prefix.clone(),
        mmsg,
        dir,
        configs,
        port: BASE_PORT,
    };
    let total = settings.reps * (1 + 2 * settings.mdis.len() as u32);
    let mut done = 0u32;
    let t0 = Instant::now();
    let mut progress = |what: &str, r: &Run| {
        done += 1;
        println!(
            "[{done}/{total}, {:.0} s] {what}: {:.2} Mbit/s, {} retransmits, OFO {}, reseq buffered {}",
            t0.elapsed().as_secs_f64(),
            r.mbps,
            r.retransmits,
            r.ofo,
            r.reseq.get("reseq_buffered").copied().unwrap_or(0)
        );
    };

    // (1) Single path: no striping anywhere, both paths at the base delay.
    bed.set_paths(settings, settings.base_ms)?;
    let mut gw2 = bed.start(2, false, "plain")?;
    let mut gw1 = bed.start(1, false, "plain")?;
    bed.wait_up([&gw1, &gw2])?;
    let mut single = Vec::new();
    for _ in 0..settings.reps {
        let r = bed.transfer(settings.secs, &gw2)?;
        progress("single path", &r);
        single.push(r);
    }

    // (2) Striped, no resequencer at the receiver.
    drop(gw1);
    gw1 = bed.start(1, true, "striped")?;
    bed.wait_up([&gw1, &gw2])?;
    let mut points: Vec<Point> = settings
        .mdis
        .iter()
        .zip(delays)
        .map(|(m, d)| Point {
            mdi: *m,
            delay_b_ms: *d,
            with: Vec::new(),
            without: Vec::new(),
        })
        .collect();
    for p in &mut points {
        bed.set_paths(settings, p.delay_b_ms)?;
        for _ in 0..settings.reps {
            let r = bed.transfer(settings.secs, &gw2)?;
            progress(&format!("MDI {:.2} without resequencer", p.mdi), &r);
            p.without.push(r);
        }
    }

    // (3) Striped, gw2 resequences.
    drop(gw2);
    gw2 = bed.start(2, true, "striped")?;
    bed.wait_up([&gw1, &gw2])?;
    for p in &mut points {
        bed.set_paths(settings, p.delay_b_ms)?;
        for _ in 0..settings.reps {
            let r = bed.transfer(settings.secs, &gw2)?;
            progress(&format!("MDI {:.2} with resequencer", p.mdi), &r);
            p.with.push(r);
        }
    }
    drop((gw1, gw2));
    Ok((single, points))
}

/// The MDI values where, going right, the resequencer first gains ≥ 10 % over no resequencer,
/// and where the better of the two first falls below the single path (`None`: never).
pub fn cutoffs(r: &Report) -> (Option<f64>, Option<f64>) {
    let single = median_mbps(&r.single).unwrap_or(0.0);
    let helps = r.points.iter().find(|p| {
        matches!((median_mbps(&p.with), median_mbps(&p.without)), (Some(w), Some(o)) if w > 1.1 * o)
    });
    let below = r.points.iter().find(|p| {
        let best = median_mbps(&p.with)
            .unwrap_or(0.0)
            .max(median_mbps(&p.without).unwrap_or(0.0));
        best < single
    });
    (helps.map(|p| p.mdi), below.map(|p| p.mdi))
}

/// The markdown report.
pub fn markdown(r: &Report) -> String {
    let s = &r.settings;
    let single = median_mbps(&r.single).unwrap_or(0.0);
    let mut out = format!(
        "# MDI and the resequencer (seed 001 §IV, Fig. 3)\n\n\
         Started {} (1-min load {:.2}), {:.0} s wall. Two direct paths of {} Mbit/s (both \
         directions): path A `1a>2a` {} ms one-way delay, path B `1b>2b` with the delay that gives \
         the MDI; path group 0 pinned to A, group 1 to B. One TCP iperf3 flow h1 → h2 for {} s, \
         striped 1:1 over the two groups, gw2 with and without the resequencer; the median of {} \
         run(s) per point. Single path (unstriped, {} ms): **{single:.2} Mbit/s**.\n\n\
         | MDI | path B delay (ms) | goodput with reseq (Mbit/s) | without (Mbit/s) | OFO-queued at h2 with / without | sender retransmits with / without | reseq in order / buffered / released by T / by timeout / lost / late dup / overflow |\n\
         |---:|---:|---:|---:|---:|---:|---|\n",
        r.started, r.load, r.wall_s, s.rate_mbit, s.base_ms, s.secs, s.reps, s.base_ms
    );
    for p in &r.points {
        let (w, o) = (median_run(&p.with), median_run(&p.without));
        let f = |x: Option<&Run>, g: &dyn Fn(&Run) -> String| x.map_or("-".to_owned(), g);
        let c = |run: &Run, k: &str| run.reseq.get(k).copied().unwrap_or(0);
        out.push_str(&format!(
            "| {:.2} | {:.1} | {} | {} | {} / {} | {} / {} | {} |\n",
            p.mdi,
            p.delay_b_ms,
            median_mbps(&p.with).map_or("-".to_owned(), |x| format!("{x:.2}")),
            median_mbps(&p.without).map_or("-".to_owned(), |x| format!("{x:.2}")),
            f(w, &|x| x.ofo.to_string()),
            f(o, &|x| x.ofo.to_string()),
            f(w, &|x| x.retransmits.to_string()),
            f(o, &|x| x.retransmits.to_string()),
            f(w, &|x| format!(
                "{} / {} / {} / {} / {} / {} / {}",
                c(x, "reseq_in_order"),
                c(x, "reseq_buffered"),
                c(x, "reseq_released_threshold"),
                c(x, "reseq_released_timeout"),
                c(x, "reseq_released_lost"),
                c(x, "reseq_dup_late"),
                c(x, "reseq_overflow")
            )),
        ));
    }
    let (helps, below) = cutoffs(r);
    out.push_str(&format!(
        "\nThe resequencer first gains ≥ 10 % over no resequencer at MDI {} (paper: beyond ≈ 0.15); \
         the better of the two first falls below the single path at MDI {} (paper: beyond ≈ 0.4). \
         OFO, retransmits and reseq counters are those of the median run.\n",
        helps.map_or("— (never)".to_owned(), |m| format!("{m:.2}")),
        below.map_or("— (never)".to_owned(), |m| format!("{m:.2}")),
    ));
    out
}

/// The SVG, like the paper's Fig. 3: goodput over MDI with and without the resequencer, the
/// single path dashed.
pub fn svg(r: &Report) -> String {
    let (w, h, left, right, top, bottom) = (640.0, 400.0, 60.0, 20.0, 40.0, 50.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let single = median_mbps(&r.single).unwrap_or(0.0);
    let ymax = r
        .points
        .iter()
        .flat_map(|p| [median_mbps(&p.with), median_mbps(&p.without)])
        .flatten()
        .fold(single.max(2.0 * r.settings.rate_mbit), f64::max)
        .ceil();
    let xmax = 0.5;
    let x = |m: f64| left + pw * (m / xmax).clamp(0.0, 1.0);
    let y = |v: f64| top + ph * (1.0 - (v / ymax).clamp(0.0, 1.0));
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">Goodput vs MDI ({} ms base, {} Mbit/s paths, {} s iperf3)</text>\n\
         <line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n\
         <line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{}\" stroke=\"black\"/>\n",
        w / 2.0,
        r.settings.base_ms,
        r.settings.rate_mbit,
        r.settings.secs,
        top + ph,
        left + pw,
        top + ph,
        top + ph
    );
    for i in 0..=5 {
        let v = ymax * f64::from(i) / 5.0;
        s.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{v:.0}</text>\n",
            left - 6.0,
            y(v) + 4.0
        ));
    }
    for i in 0..=10 {
        let m = f64::from(i) * 0.05;
        s.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{m:.2}</text>\n",
            x(m),
            top + ph + 16.0
        ));
    }
    s.push_str(&format!(
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">MDI</text>\n\
         <text x=\"16\" y=\"{:.1}\" transform=\"rotate(-90 16 {:.1})\" text-anchor=\"middle\">goodput (Mbit/s)</text>\n",
        left + pw / 2.0,
        h - 12.0,
        top + ph / 2.0,
        top + ph / 2.0
    ));
    s.push_str(&format!(
        "<line x1=\"{left}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"gray\" stroke-width=\"2\" stroke-dasharray=\"6 4\"/>\n",
        y(single),
        left + pw,
        y(single)
    ));
    type Series = (&'static str, &'static str, fn(&Point) -> &Vec<Run>);
    let series: [Series; 2] = [
        ("with resequencing buffer", "#1f77b4", |p| &p.with),
        ("without resequencing buffer", "#d62728", |p| &p.without),
    ];
    for (i, (label, colour, runs)) in series.iter().enumerate() {
        let pts: Vec<(f64, f64)> = r
            .points
            .iter()
            .filter_map(|p| median_mbps(runs(p)).map(|v| (x(p.mdi), y(v))))
            .collect();
        let line: Vec<String> = pts.iter().map(|(a, b)| format!("{a:.1},{b:.1}")).collect();
        s.push_str(&format!(
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>\n",
            line.join(" ")
        ));
        for (a, b) in &pts {
            s.push_str(&format!(
                "<circle cx=\"{a:.1}\" cy=\"{b:.1}\" r=\"3\" fill=\"{colour}\"/>\n"
            ));
        }
        let ly = top + 14.0 + 18.0 * i as f64;
        s.push_str(&format!(
            "<line x1=\"{:.1}\" y1=\"{ly:.1}\" x2=\"{:.1}\" y2=\"{ly:.1}\" stroke=\"{colour}\" stroke-width=\"2\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{label}</text>\n",
            left + pw - 230.0,
            left + pw - 200.0,
            left + pw - 194.0,
            ly + 4.0
        ));
    }
    let ly = top + 50.0;
    s.push_str(&format!(
        "<line x1=\"{:.1}\" y1=\"{ly:.1}\" x2=\"{:.1}\" y2=\"{ly:.1}\" stroke=\"gray\" stroke-width=\"2\" stroke-dasharray=\"6 4\"/>\
         <text x=\"{:.1}\" y=\"{:.1}\">one path</text>\n</svg>\n",
        left + pw - 230.0,
        left + pw - 200.0,
        left + pw - 194.0,
        ly + 4.0
    ));
    s
}

/// Writes `mdi.{json,md,svg}` under `out_dir`.
pub fn write(r: &Report, out_dir: &Path) -> anyhow::Result<()> {
    crate::plot::write_results(out_dir, "mdi", r, &markdown(r), &svg(r))
}

/// Rewrites `mdi.{md,svg}` from `mdi.json` under `out_dir`.
pub fn replot_dir(out_dir: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(out_dir.join("mdi.json")).context("read mdi.json")?;
    let r: Report = serde_json::from_str(&text).context("parse mdi.json")?;
    write(&r, out_dir)
}

/// `cargo xtask experiment mdi [--secs S] [--reps N] [--cases LIST] [--replot]`: `--cases`
/// picks MDI points by 1-based index into [`PAPER_MDIS`] (e.g. `1,5,9` for a quick run).
pub fn cmd(
    root: &Path,
    prefix: &str,
    out: &Path,
    secs: Option<u32>,
    reps: Option<u32>,
    cases: Option<String>,
    replot: bool,
) -> anyhow::Result<()> {
    if replot {
        return replot_dir(out);
    }
    let mut settings = Settings::default();
    if let Some(s) = secs {
        settings.secs = s;
    }
    if let Some(n) = reps {
        settings.reps = n;
    }
    if let Some(c) = cases {
        let pick = crate::experiment::def::parse_case_list(&c)?;
        settings.mdis = PAPER_MDIS
            .iter()
            .enumerate()
            .filter(|(i, _)| u32::try_from(i + 1).is_ok_and(|n| pick.contains(&n)))
            .map(|(_, m)| *m)
            .collect();
        anyhow::ensure!(
            !settings.mdis.is_empty(),
            "--cases picks no MDI point (1..=10)"
        );
    }
    let r = run(
        &RunOptions {
            root: root.to_owned(),
            prefix: prefix.to_owned(),
            mmsg: None,
        },
        &settings,
    )?;
    write(&r, out)?;
    print!("{}", markdown(&r));
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn delay_for_inverts_eq_1() {
        for m in PAPER_MDIS {
            let d = delay_for(25.0, m).unwrap();
            assert!(d >= 25.0);
            assert!((mdi_of(25.0, d) - m).abs() < 1e-12, "{m} -> {d}");
            assert!((mdi_of(d, 25.0) - m).abs() < 1e-12);
        }
        assert_eq!(delay_for(25.0, 0.0), Some(25.0));
        // The paper's Fig. 5: 25 and 50 ms is MDI 0.17, 25 and 100 ms is 0.3.
        assert!((mdi_of(25.0, 50.0) - 1.0 / 6.0).abs() < 1e-12);
        assert!((mdi_of(25.0, 100.0) - 0.3).abs() < 1e-12);
        assert!((delay_for(25.0, 0.45).unwrap() - 475.0).abs() < 1e-9);
        assert_eq!(delay_for(25.0, 0.5), None);
        assert_eq!(delay_for(25.0, -0.1), None);
        assert_eq!(delay_for(f64::NAN, 0.1), None);
        assert_eq!(mdi_of(0.0, 0.0), 0.0);
    }

    #[test]
    fn median_run_is_the_middle() {
        let runs: Vec<Run> = [9.0, 1.0, 5.0]
            .iter()
            .map(|m| Run {
                mbps: *m,
                ..Run::default()
            })
            .collect();
        assert_eq!(median_run(&runs).unwrap().mbps, 5.0);
        assert!(median_run(&[]).is_none());
    }

    fn report() -> Report {
        let run = |mbps: f64, ofo: u64| Run {
            mbps,
            retransmits: 7,
            ofo,
            reseq: RESEQ_COUNTERS
                .iter()
                .enumerate()
                .map(|(i, n)| ((*n).to_owned(), i as u64))
                .collect(),
        };
        let s = Settings::default();
        let points = s
            .mdis
            .iter()
            .map(|m| Point {
                mdi: *m,
                delay_b_ms: delay_for(25.0, *m).unwrap(),
                with: vec![run(18.0 - 20.0 * m, 10)],
                without: vec![run(18.0 - 40.0 * m, 500)],
            })
            .collect();
        Report {
            settings: s,
            started: "2026-11-25T00:00:00Z".into(),
            load: 0.7,
            wall_s: 400.0,
            single: vec![run(9.0, 0)],
            points,
        }
    }

    #[test]
    fn cutoffs_find_the_crossings() {
        let r = report();
        // with/without: 0.05 → 17 vs 16 (6 %), 0.1 → 16 vs 14 (14 %). The better one is
        // 18 − 20 m ≥ 9 up to 0.45: never below the single path.
        assert_eq!(cutoffs(&r), (Some(0.1), None));
        let mut r2 = r.clone();
        r2.single = vec![Run {
            mbps: 12.0,
            ..Run::default()
        }];
        // 18 − 20 m < 12 ⇔ m > 0.3.
        assert_eq!(cutoffs(&r2).1, Some(0.35));
    }

    #[test]
    fn reports_are_well_formed() {
        let r = report();
        let md = markdown(&r);
        assert!(md.starts_with("# MDI"));
        // Header, separator and one row per point, all with the same column count.
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(rows.len(), 2 + r.points.len());
        let cols = rows[0].matches('|').count();
        assert!(rows.iter().all(|l| l.matches('|').count() == cols), "{md}");
        assert!(
            md.contains(
                "| 0.45 | 475.0 | 9.00 | 0.00 | 10 / 500 | 7 / 7 | 0 / 1 / 3 / 4 / 5 / 6 / 7 |"
            ),
            "{md}"
        );
        assert!(md.contains("**9.00 Mbit/s**"));
        let svg = svg(&r);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches("<circle").count(), 2 * r.points.len());
        assert_eq!(svg.matches("stroke-dasharray").count(), 2);
        assert_eq!(svg.matches('<').count(), svg.matches('>').count());
        // The JSON round-trips for --replot.
        let back: Report = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back.points.len(), r.points.len());
    }

    #[test]
    fn pinning_rules_name_each_groups_ports_and_pair() {
        let rs = pin_ruleset().unwrap();
        assert!(
            rs.contains("tcp dport { 4096, 8192 } ip saddr != { 198.18.10.0/24, 198.18.20.0/24 }")
        );
        assert!(
            rs.contains("tcp dport { 4097, 8193 } ip daddr != { 198.18.11.0/24, 198.18.21.0/24 }")
        );
        assert_eq!(rs.matches("reject with tcp reset").count(), 4);
        assert_eq!(rs.matches('{').count(), rs.matches('}').count());
    }

    #[test]
    fn settings_and_configs() {
        let s = Settings::default();
        assert_eq!(s.expected_s(), 21 * 19 + 50);
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let base = mmsg::example(&root, 1).unwrap();
        let c = gateway_config(base.clone(), true, 1000);
        let mut text = std::fs::read_to_string(root.join("examples/mmsg-branch1.toml")).unwrap();
        text.push_str("\n[striping]\nclasses = [\"type2\"]\nthreshold_kbit = 1000\n");
        assert_eq!(Config::parse(&text).unwrap(), c);
        assert_eq!(gateway_config(base.clone(), false, 1000), base);
        assert!(topology::parse(TOPOLOGY).is_ok());
    }
}
