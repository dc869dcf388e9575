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
//! Phases: (1) the single-path reference, both gateways without `[striping]` (the flow takes one
//! group; both paths are at `base_ms` then); then gw1 stripes and, per repetition, gw2 runs each
//! [`Receiver`] variant over all points: no `[striping]` (no resequencer: frames go to TUN in
//! arrival order, like `netns_striping`'s case C), the resequencer with the hold time sized from
//! the paths only (`release_hold_adapt = false`, the first version), and with the hold that follows
//! the measured skew (the default). The order of the variants rotates with the repetition, so load
//! drifts do not favour one. Per point and run: one iperf3 TCP flow h1 → h2 for `secs`, receiver
//! goodput, sender retransmits, h2's `TcpExtTCPOFOQueue`, gw2's `reseq_*` counters as differences
//! over the run, and the diagnostics of [`crate::mdi_diag`] (host TCP counters, gateway samples).
//! Writes `results/mdi.{json,md,svg}`.
//!
//! Why this file is long: one experiment end to end (settings, five receiver variants, the
//! testbed phases, the markdown and SVG reports and the command line) in one place, next to its
//! per-run diagnostics in [`crate::mdi_diag`]; the reports could move to their own file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use mpa::config::Config;

use crate::iperf;
use crate::mdi_diag;
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
pub const RESEQ_COUNTERS: [&str; 10] = [
    "reseq_in_order",
    "reseq_buffered",
    "reseq_released_in_order",
    "reseq_released_threshold",
    "reseq_released_timeout",
    "reseq_released_lost",
    "reseq_dup_late",
    "reseq_overflow",
    "reseq_gaps_filled",
    "reseq_late_after_release",
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
    /// Also measure [`Receiver::NO_RACK`] (h1 without RACK, like the paper's 2015 hosts).
    #[serde(default)]
    pub no_rack: bool,
    /// `mmsg run --send-time-budget` of the striping gw1 (`None`: `mmsg`'s default, `5ms`; `0s`
    /// turns it off): keeps the tunnel sockets' unsent bytes near zero, so each path's delay is
    /// its own, not its queue's.
    #[serde(default)]
    pub gw1_send_time_budget: Option<String>,
    /// `net.ipv4.tcp_slow_start_after_idle = 0` in both gateways: the tunnel connections keep
    /// their congestion windows over the idle seconds between runs.
    #[serde(default)]
    pub no_idle_restart: bool,
    /// gw2's path-group weights 1000:1, so its new flows (the inner TCP's ACKs) take path A;
    /// by default (1:1) they took B in almost every run.
    #[serde(default)]
    pub acks_on_a: bool,
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
            no_rack: false,
            gw1_send_time_budget: None,
            no_idle_restart: false,
            acks_on_a: false,
        }
    }
}

impl Settings {
    /// Expected wall time of the whole experiment, seconds.
    pub fn expected_s(&self) -> u32 {
        let variants = self.variants().len() as u32;
        let runs = self.reps * (1 + variants * self.mdis.len() as u32);
        runs * (self.secs + RUN_OVERHEAD_S) + (2 + self.reps * 3) * RESTART_S + 20
    }

    /// The variants measured, grouped by gw2's config.
    pub fn variants(&self) -> Vec<Receiver> {
        Receiver::EVERY
            .into_iter()
            .filter(|v| self.no_rack || v.rack())
            .collect()
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
    /// Where the goodput goes ([`crate::mdi_diag`]); empty in results from before it existed.
    #[serde(default)]
    pub diag: BTreeMap<String, f64>,
}

/// What gw2 does with the striped flow's frames, and whether h1's TCP detects losses with RACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Receiver {
    /// No `[striping]`: frames go to TUN in arrival order.
    Plain,
    /// The resequencer, hold time sized from the paths' RTTs only (`release_hold_adapt = false`).
    Paths,
    /// The resequencer, hold time lengthened to the measured skew (the default).
    Measured,
    /// [`Receiver::Plain`], h1 with `net.ipv4.tcp_recovery = 0`: no RACK, losses by the
    /// duplicate-ACK threshold (adaptive), as the paper's Linux 3.13 hosts.
    PlainNoRack,
    /// [`Receiver::Measured`] with RACK off at h1.
    MeasuredNoRack,
}

impl Receiver {
    /// The variants every run measures, in the order of the first repetition.
    pub const ALL: [Receiver; 3] = [Receiver::Plain, Receiver::Paths, Receiver::Measured];
    /// The variants with RACK off at the sender (`--no-rack`).
    pub const NO_RACK: [Receiver; 2] = [Receiver::PlainNoRack, Receiver::MeasuredNoRack];
    /// Every variant, grouped by gw2's config (fewest restarts).
    pub const EVERY: [Receiver; 5] = [
        Receiver::Plain,
        Receiver::PlainNoRack,
        Receiver::Paths,
        Receiver::Measured,
        Receiver::MeasuredNoRack,
    ];

    /// The name in logs and tables.
    pub fn name(self) -> &'static str {
        match self {
            Receiver::Plain => "without resequencer",
            Receiver::Paths => "resequencer, hold from paths",
            Receiver::Measured => "resequencer, measured hold",
            Receiver::PlainNoRack => "without resequencer, no RACK",
            Receiver::MeasuredNoRack => "resequencer, measured hold, no RACK",
        }
    }

    fn tag(self) -> &'static str {
        match self {
            Receiver::Plain | Receiver::PlainNoRack => "plain",
            Receiver::Paths => "paths",
            Receiver::Measured | Receiver::MeasuredNoRack => "measured",
        }
    }

    /// The gateway config gw2 runs with (the variants without RACK share theirs).
    pub fn config(self) -> Receiver {
        match self {
            Receiver::PlainNoRack => Receiver::Plain,
            Receiver::MeasuredNoRack => Receiver::Measured,
            v => v,
        }
    }

    /// Whether h1 runs with RACK (the kernel's default).
    pub fn rack(self) -> bool {
        !matches!(self, Receiver::PlainNoRack | Receiver::MeasuredNoRack)
    }

    /// The runs of this variant at `p`.
    pub fn runs(self, p: &Point) -> &Vec<Run> {
        match self {
            Receiver::Plain => &p.without,
            Receiver::Paths => &p.with,
            Receiver::Measured => &p.measured,
            Receiver::PlainNoRack => &p.without_no_rack,
            Receiver::MeasuredNoRack => &p.measured_no_rack,
        }
    }

    fn runs_mut(self, p: &mut Point) -> &mut Vec<Run> {
        match self {
            Receiver::Plain => &mut p.without,
            Receiver::Paths => &mut p.with,
            Receiver::Measured => &mut p.measured,
            Receiver::PlainNoRack => &mut p.without_no_rack,
            Receiver::MeasuredNoRack => &mut p.measured_no_rack,
        }
    }
}

/// One MDI value.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Point {
    /// The MDI.
    pub mdi: f64,
    /// Path B's one-way delay, ms.
    pub delay_b_ms: f64,
    /// Runs with the resequencer, hold time sized from the paths only.
    pub with: Vec<Run>,
    /// Runs without it.
    pub without: Vec<Run>,
    /// Runs with the resequencer, hold time following the measured skew (empty in results from
    /// before it existed).
    #[serde(default)]
    pub measured: Vec<Run>,
    /// Runs without the resequencer, RACK off at h1 (`--no-rack`).
    #[serde(default)]
    pub without_no_rack: Vec<Run>,
    /// Runs with the measured hold, RACK off at h1 (`--no-rack`).
    #[serde(default)]
    pub measured_no_rack: Vec<Run>,
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
    /// The `mmsg` binary (`None`: build the release one with cargo).
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
/// `stripe`, a `[striping]` table for Type II flows whose hold follows the measured skew when
/// `adapt`.
pub fn gateway_config(mut base: Config, stripe: bool, adapt: bool, threshold_kbit: u32) -> Config {
    if stripe {
        let mut st = mmsg::striping(
            vec![mms_types::Class::TypeII],
            Vec::new(),
            u64::from(threshold_kbit),
        );
        st.release_hold_adapt = adapt;
        base.striping = Some(st);
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
    configs: BTreeMap<(u8, Receiver), PathBuf>,
    port: u16,
    /// Gateway starts so far (each gets its own control socket and log).
    starts: u32,
    /// Extra `mmsg run` arguments of gw1.
    gw1_args: Vec<String>,
}

impl Bed {
    fn start(&mut self, b: u8, variant: Receiver) -> anyhow::Result<Gateway> {
        self.starts += 1;
        let tag = format!("{}-{}", variant.tag(), self.starts);
        let control = self.dir.join(format!("mdi-gw{b}-{tag}.sock"));
        let log = std::fs::File::create(self.dir.join(format!("mdi-gw{b}-{tag}.log")))?;
        let config = self
            .configs
            .get(&(b, variant))
            .context("no such gateway config")?;
        let child = Command::new("ip")
            .args(["netns", "exec", &testbed::ns_gw(&self.prefix, b)])
            .arg(&self.mmsg)
            .arg("run")
            .arg("--config")
            .arg(config)
            .arg("--control")
            .arg(&control)
            .args(if b == 1 { &self.gw1_args[..] } else { &[] })
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

    /// One iperf3 TCP flow h1 → h2; counters as differences over the run, the gateways sampled
    /// during it ([`mdi_diag`]).
    fn transfer(&mut self, secs: u32, gws: [&Gateway; 2]) -> anyhow::Result<Run> {
        let [gw1, gw2] = gws;
        let (h1, h2) = (
            testbed::ns_host(&self.prefix, 1, 0),
            testbed::ns_host(&self.prefix, 2, 0),
        );
        let port = self.port;
        self.port = self.port.wrapping_add(1).max(BASE_PORT);
        let server = iperf::Server::start(&h2, port, None)?;
        let rs0 = self.reseq(gw2);
        let (snd0, rcv0) = (
            mdi_diag::nstat(&h1, &mdi_diag::SENDER_NSTAT),
            mdi_diag::nstat(&h2, &mdi_diag::RECEIVER_NSTAT),
        );
        let (st1_0, st2_0) = (
            self.status(gw1).unwrap_or_default(),
            self.status(gw2).unwrap_or_default(),
        );
        let (mut s1, mut s2) = (Vec::new(), Vec::new());
        let (port_s, secs_s) = (port.to_string(), secs.to_string());
        let v = mdi_diag::sample_during(
            || iperf::client(&h1, &["-c", H2, "-p", &port_s, "-t", &secs_s]),
            || {
                s1.extend(self.status(gw1));
                s2.extend(self.status(gw2));
            },
        )?;
        server.wait(Duration::from_secs(3));
        let rs1 = self.reseq(gw2);
        let (snd1, rcv1) = (
            mdi_diag::nstat(&h1, &mdi_diag::SENDER_NSTAT),
            mdi_diag::nstat(&h2, &mdi_diag::RECEIVER_NSTAT),
        );
        let (st1_1, st2_1) = (
            self.status(gw1).unwrap_or_default(),
            self.status(gw2).unwrap_or_default(),
        );
        let mut diag = mdi_diag::summarise(&s1, &s2);
        mdi_diag::add_deltas(&mut diag, &snd0, &snd1);
        mdi_diag::add_deltas(&mut diag, &rcv0, &rcv1);
        mdi_diag::iperf_sender(&v, &mut diag);
        if let Some(b) = mdi_diag::ack_share_b(&st2_0, &st2_1) {
            diag.insert("ack_on_b".into(), b);
        }
        for c in ["drop_queue_full", "drop_codel"] {
            let d = mdi_diag::counter(&st1_1, c).saturating_sub(mdi_diag::counter(&st1_0, c));
            diag.insert(format!("gw1_{c}"), d as f64);
        }
        let ofo = diag.get("TcpExtTCPOFOQueue").copied().unwrap_or(0.0) as u64;
        Ok(Run {
            mbps: iperf::tcp_received_mbps(&v).context("iperf3 gave no receiver rate")?,
            retransmits: iperf::tcp_retransmits(&v),
            ofo,
            diag,
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
        // The release build, as `cargo xtask` itself: less CPU per frame, so the machine's load
        // disturbs the gateways' timing (which the resequencer measures) less.
        None => mmsg::build_mmsg(&opts.root, Profile::Release)?,
    };
    println!(
        "MDI experiment: {} points × {} rep(s) × {} receiver variants + single path, {} s each; expected ~{} s",
        settings.mdis.len(),
        settings.reps,
        settings.variants().len(),
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
    if settings.no_idle_restart {
        for b in [1u8, 2] {
            sh::ns(
                &testbed::ns_gw(&opts.prefix, b),
                "sysctl",
                &["-qw", "net.ipv4.tcp_slow_start_after_idle=0"],
            )?;
        }
    }
    let mut configs = BTreeMap::new();
    // Mutual TLS with a CA made for the run (TLS is the default, issue #17).
    let tls = mmsg::provision_tls(&dir.join("mdi-tls"), "MMS mdi CA", &[1, 2])?;
    for b in [1u8, 2] {
        let mut base = mmsg::example(&opts.root, b)?;
        base.tls = tls.get(&b).cloned();
        if b == 2 && settings.acks_on_a {
            for pg in base
                .remote
                .iter_mut()
                .flat_map(|r| r.path_groups.iter_mut())
            {
                pg.weight = if pg.id == 0 { 1000 } else { 1 };
            }
        }
        for variant in Receiver::ALL {
            let p = dir.join(format!("mdi-gw{b}-{}.toml", variant.tag()));
            let stripe = variant != Receiver::Plain;
            let adapt = variant == Receiver::Measured;
            mmsg::write_config(
                &p,
                &format!("examples/mmsg-branch{b}.toml, {}", variant.name()),
                &gateway_config(base.clone(), stripe, adapt, settings.threshold_kbit),
            )?;
            configs.insert((b, variant), p);
        }
    }
    let mut bed = Bed {
        prefix: opts.prefix.clone(),
        mmsg,
        dir,
        configs,
        port: BASE_PORT,
        starts: 0,
        gw1_args: settings
            .gw1_send_time_budget
            .iter()
            .flat_map(|d| ["--send-time-budget".to_owned(), d.clone()])
            .collect(),
    };
    let variants = settings.variants();
    let total = settings.reps * (1 + variants.len() as u32 * settings.mdis.len() as u32);
    let h1 = testbed::ns_host(&opts.prefix, 1, 0);
    let rack = |on: bool| {
        sh::ns(
            &h1,
            "sysctl",
            &["-qw", &format!("net.ipv4.tcp_recovery={}", u8::from(on))],
        )
        .map(|_| ())
    };
    let mut done = 0u32;
    let t0 = Instant::now();
    let mut progress = |what: &str, r: &Run| {
        done += 1;
        let d = |k: &str| r.diag.get(k).copied().unwrap_or(0.0);
        println!(
            "[{done}/{total}, {:.0} s, load {:.2}] {what}: {:.2} Mbit/s, {} retransmits, OFO {}, \
             reseq buffered {} timeouts {} late {}, hold {:.0} ms (skew {:.0}), cwnd {:.0} KB, \
             rtt {:.0} ms, RTT A/B {:.0}/{:.0} ms, sockq B {:.0} KB, ACKs on B {:.2}, HyStart {}/{}",
            t0.elapsed().as_secs_f64(),
            sh::load_1min(),
            r.mbps,
            r.retransmits,
            r.ofo,
            r.reseq.get("reseq_buffered").copied().unwrap_or(0),
            r.reseq.get("reseq_released_timeout").copied().unwrap_or(0),
            r.reseq.get("reseq_late_after_release").copied().unwrap_or(0),
            d("hold_ms_mean"),
            d("skew_ms_max"),
            d("cwnd_max_kb"),
            d("rtt_mean_ms"),
            d("rtt_a_ms"),
            d("rtt_b_ms"),
            d("sockq_b_kb"),
            d("ack_on_b"),
            d("TcpExtTCPHystartTrainDetect"),
            d("TcpExtTCPHystartDelayDetect"),
        );
    };

    // (1) Single path: no striping anywhere, both paths at the base delay.
    bed.set_paths(settings, settings.base_ms)?;
    let mut gw2 = bed.start(2, Receiver::Plain)?;
    let mut gw1 = bed.start(1, Receiver::Plain)?;
    bed.wait_up([&gw1, &gw2])?;
    let mut single = Vec::new();
    for _ in 0..settings.reps {
        crate::stop::check()?;
        let r = bed.transfer(settings.secs, [&gw1, &gw2])?;
        progress("single path", &r);
        single.push(r);
    }

    // (2) gw1 stripes; per repetition gw2 runs each receiver variant over all points, the
    // variants' order rotating with the repetition.
    drop(gw1);
    gw1 = bed.start(1, Receiver::Measured)?;
    let mut points: Vec<Point> = settings
        .mdis
        .iter()
        .zip(delays)
        .map(|(m, d)| Point {
            mdi: *m,
            delay_b_ms: *d,
            with: Vec::new(),
            without: Vec::new(),
            measured: Vec::new(),
            without_no_rack: Vec::new(),
            measured_no_rack: Vec::new(),
        })
        .collect();
    let mut current = Receiver::Plain;
    for rep in 0..settings.reps {
        let mut order = variants.clone();
        order.rotate_left(rep as usize % variants.len().max(1));
        for variant in order {
            if variant.config() != current {
                drop(gw2);
                gw2 = bed.start(2, variant.config())?;
                current = variant.config();
            }
            bed.wait_up([&gw1, &gw2])?;
            rack(variant.rack())?;
            for p in &mut points {
                // Between measurements a stop signal ends the run; the gateways' and the
                // testbed's `Drop` tear it down.
                crate::stop::check()?;
                bed.set_paths(settings, p.delay_b_ms)?;
                let r = bed.transfer(settings.secs, [&gw1, &gw2])?;
                progress(&format!("MDI {:.2} {}", p.mdi, variant.name()), &r);
                variant.runs_mut(p).push(r);
            }
        }
    }
    rack(true)?;
    drop((gw1, gw2));
    Ok((single, points))
}

/// The MDI values where, going right, `variant` first gains ≥ 10 % over no resequencer, and
/// where the best variant first falls below the single path (`None`: never).
pub fn cutoffs(r: &Report, variant: Receiver) -> (Option<f64>, Option<f64>) {
    let single = median_mbps(&r.single).unwrap_or(0.0);
    let helps = r.points.iter().find(|p| {
        matches!((median_mbps(variant.runs(p)), median_mbps(&p.without)), (Some(w), Some(o)) if w > 1.1 * o)
    });
    let below = r.points.iter().find(|p| {
        let best = Receiver::EVERY
            .iter()
            .filter_map(|v| median_mbps(v.runs(p)))
            .fold(0.0, f64::max);
        best < single
    });
    (helps.map(|p| p.mdi), below.map(|p| p.mdi))
}

/// `median (min–max)` of the runs' goodput, or `-`.
fn spread(runs: &[Run]) -> String {
    let v: Vec<f64> = runs.iter().map(|r| r.mbps).collect();
    match median(&v) {
        None => "-".to_owned(),
        Some(m) if v.len() == 1 => format!("{m:.2}"),
        Some(m) => {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(0.0, f64::max);
            format!("{m:.2} ({lo:.1}–{hi:.1})")
        }
    }
}

/// One row of the "where the goodput goes" table: the median run of `variant` at `p`.
fn diag_row(p: &Point, variant: Receiver) -> Option<String> {
    let x = median_run(variant.runs(p))?;
    let d = |k: &str| x.diag.get(k).copied();
    let f0 = |k: &str| d(k).map_or("-".to_owned(), |v| format!("{v:.0}"));
    let c = |k: &str| x.reseq.get(k).copied().unwrap_or(0);
    let reseq = if variant.config() == Receiver::Plain {
        "-".to_owned()
    } else {
        format!(
            "{} / {} / {} / {}",
            f0("hold_ms_mean"),
            f0("skew_ms_max"),
            c("reseq_released_timeout") + c("reseq_released_threshold"),
            c("reseq_late_after_release")
        )
    };
    Some(format!(
        "| {:.2} | {} | {:.2} | {} / {} | {} | {} / {} / {} | {} | {} / {} | {} | {} / {} | {} / {} | {} | {} |\n",
        p.mdi,
        variant.name(),
        x.mbps,
        f0("rtt_mean_ms"),
        f0("rtt_max_ms"),
        f0("cwnd_max_kb"),
        f0("TcpRetransSegs"),
        f0("TcpExtTCPDSACKRecv"),
        f0("TcpExtTCPTimeouts"),
        f0("TcpExtTCPSACKReorder"),
        f0("TcpExtTCPHystartTrainDetect"),
        f0("TcpExtTCPHystartDelayDetect"),
        x.ofo,
        f0("rtt_a_ms"),
        f0("rtt_b_ms"),
        f0("sockq_a_kb"),
        f0("sockq_b_kb"),
        reseq,
        d("ack_on_b").map_or("-".to_owned(), |v| format!("{v:.2}")),
    ))
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
         striped 1:1 over the two groups; gw2 without the resequencer, with it and the hold time \
         sized from the paths, and with the hold following the measured skew; the median (min–max) \
         of {} run(s) per point. gw1's send time budget: {}; slow start after idle in the \
         gateways: {}; gw2's weights (its new flows: the ACKs) {}. Single path (unstriped, {} ms): \
         **{single:.2} Mbit/s**.\n\n\
         | MDI | path B delay (ms) | without resequencer (Mbit/s) | hold from paths | measured hold | without, no RACK at h1 | measured hold, no RACK |\n\
         |---:|---:|---:|---:|---:|---:|---:|\n",
        r.started,
        r.load,
        r.wall_s,
        s.rate_mbit,
        s.base_ms,
        s.secs,
        s.reps,
        s.gw1_send_time_budget
            .as_deref()
            // Reports replotted from older JSON ran with the default of their day.
            .unwrap_or("mmsg's default (5ms since 2026-11-29, off before)"),
        if s.no_idle_restart { "off" } else { "on (default)" },
        if s.acks_on_a { "1000:1 (ACKs on A)" } else { "1:1 (default)" },
        s.base_ms
    );
    for p in &r.points {
        out.push_str(&format!(
            "| {:.2} | {:.1} | {} | {} | {} | {} | {} |\n",
            p.mdi,
            p.delay_b_ms,
            spread(&p.without),
            spread(&p.with),
            spread(&p.measured),
            spread(&p.without_no_rack),
            spread(&p.measured_no_rack),
        ));
    }
    let mut lines = Vec::new();
    for v in [Receiver::Paths, Receiver::Measured] {
        let (helps, below) = cutoffs(r, v);
        lines.push(format!(
            "The resequencer ({}) first gains ≥ 10 % over no resequencer at MDI {}; the best \
             variant first falls below the single path at MDI {}.",
            v.name(),
            helps.map_or("— (never)".to_owned(), |m| format!("{m:.2}")),
            below.map_or("— (never)".to_owned(), |m| format!("{m:.2}")),
        ));
    }
    out.push_str(&format!(
        "\n{} (Paper: the buffer helps beyond ≈ 0.15; below one path beyond ≈ 0.4.)\n",
        lines.join(" ")
    ));
    out.push_str(
        "\n## Where the goodput goes (median run of each variant)\n\n\
         Inner TCP at h1 (iperf3, `nstat`): mean / largest RTT, largest cwnd, retransmitted \
         segments / DSACKs received (spurious retransmits) / RTOs, reordering events detected \
         (`TCPSACKReorder`), slow-start exits by HyStart (ACK train / delay); h2: segments queued \
         out of order. gw1 sampled every 0.5 s: subflow RTT of path A / B (median), largest \
         queued bytes (socket, unsent) per path. gw2: hold time in force (mean) / largest \
         measured skew (ms) / frames released ignoring a gap (hold time + count) / frames late \
         after their gap was released; the share of the ACK flow's bytes on path B.\n\n\
         | MDI | receiver | Mbit/s | inner RTT mean / max (ms) | cwnd max (KB) | retrans / DSACK / RTO | reorder | HyStart train / delay | OFO at h2 | subflow RTT A / B (ms) | socket queue A / B (KB) | hold / skew (ms) / gap releases / late | ACKs on B |\n\
         |---:|---|---:|---|---:|---|---:|---|---:|---|---|---|---:|\n",
    );
    for p in &r.points {
        for v in Receiver::EVERY {
            if let Some(row) = diag_row(p, v) {
                out.push_str(&row);
            }
        }
    }
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
        .flat_map(|p| Receiver::EVERY.map(|v| median_mbps(v.runs(p))))
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
    let series: [Series; 5] = [
        ("buffer, hold from paths", "#1f77b4", |p| &p.with),
        ("buffer, measured hold", "#2ca02c", |p| &p.measured),
        ("without resequencing buffer", "#d62728", |p| &p.without),
        ("without buffer, no RACK", "#ff7f0e", |p| &p.without_no_rack),
        ("buffer (measured), no RACK", "#9467bd", |p| {
            &p.measured_no_rack
        }),
    ];
    for (i, (label, colour, runs)) in series.iter().enumerate() {
        let pts: Vec<(f64, f64)> = r
            .points
            .iter()
            .filter_map(|p| median_mbps(runs(p)).map(|v| (x(p.mdi), y(v))))
            .collect();
        if pts.is_empty() {
            continue;
        }
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
    let ly = top + 14.0 + 18.0 * series.len() as f64;
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

/// The command line's choices for `experiment mdi` (`None` / `false`: the default).
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `--secs`.
    pub secs: Option<u32>,
    /// `--reps`.
    pub reps: Option<u32>,
    /// `--cases`: MDI points by 1-based index into [`PAPER_MDIS`] (e.g. `1,5,9`).
    pub cases: Option<String>,
    /// `--no-rack`: also [`Receiver::NO_RACK`].
    pub no_rack: bool,
    /// `--gw1-send-time-budget D`: the sender runs `mmsg run --send-time-budget D`.
    pub gw1_send_time_budget: Option<String>,
    /// `--no-idle-restart`: `tcp_slow_start_after_idle = 0` in the gateways.
    pub no_idle_restart: bool,
    /// `--acks-on-a`: gw2's flows (the ACKs) over path A.
    pub acks_on_a: bool,
}

/// `cargo xtask experiment mdi [--secs S] [--reps N] [--cases LIST] [--replot] [--no-rack]
/// [--gw1-send-time-budget D] [--no-idle-restart] [--acks-on-a]` ([`Overrides`]).
pub fn cmd(
    root: &Path,
    prefix: &str,
    out: &Path,
    replot: bool,
    o: Overrides,
) -> anyhow::Result<()> {
    if replot {
        return replot_dir(out);
    }
    let mut settings = Settings::default();
    if let Some(s) = o.secs {
        settings.secs = s;
    }
    if let Some(n) = o.reps {
        settings.reps = n;
    }
    settings.no_rack = o.no_rack;
    settings.gw1_send_time_budget = o.gw1_send_time_budget;
    settings.no_idle_restart = o.no_idle_restart;
    settings.acks_on_a = o.acks_on_a;
    if let Some(c) = o.cases {
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
            diag: [
                ("rtt_mean_ms", 61.4),
                ("hold_ms_mean", 80.0),
                ("ack_on_b", 0.0),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
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
                measured: vec![run(18.5 - 20.0 * m, 10), run(19.0 - 20.0 * m, 12)],
                without_no_rack: Vec::new(),
                measured_no_rack: Vec::new(),
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
        assert_eq!(cutoffs(&r, Receiver::Paths), (Some(0.1), None));
        // measured: the median of two, 18.75 − 20 m: 0.05 → 17.75 vs 16 (11 %).
        assert_eq!(cutoffs(&r, Receiver::Measured), (Some(0.05), None));
        let mut r2 = r.clone();
        r2.single = vec![Run {
            mbps: 12.0,
            ..Run::default()
        }];
        // The best is 18.75 − 20 m < 12 ⇔ m > 0.3375.
        assert_eq!(cutoffs(&r2, Receiver::Paths).1, Some(0.35));
    }

    #[test]
    fn reports_are_well_formed() {
        let r = report();
        let md = markdown(&r);
        assert!(md.starts_with("# MDI"));
        // Two tables: header, separator and one row per point (per point and variant), each
        // with the same column count throughout.
        let (goodput, diag) = md.split_once("## Where").unwrap();
        for (table, rows_per_point) in [(goodput, 1), (diag, Receiver::ALL.len())] {
            let rows: Vec<&str> = table.lines().filter(|l| l.starts_with('|')).collect();
            assert_eq!(rows.len(), 2 + rows_per_point * r.points.len());
            let cols = rows[0].matches('|').count();
            assert!(rows.iter().all(|l| l.matches('|').count() == cols), "{md}");
        }
        assert!(
            goodput.contains("| 0.45 | 475.0 | 0.00 | 9.00 | 9.75 (9.5–10.0) | - | - |"),
            "{md}"
        );
        assert!(
            diag.contains(
                "| 0.45 | without resequencer | 0.00 | 61 / - | - | - / - / - | - | - / - | 500 | - / - | - / - | - | 0.00 |"
            ),
            "{md}"
        );
        // The median run of two is the lower; its gap releases are timeout (4) + count (3).
        assert!(
            diag.contains(
                "| 0.45 | resequencer, measured hold | 9.50 | 61 / - | - | - / - / - | - | - / - | 10 | - / - | - / - | 80 / - / 7 / 9 | 0.00 |"
            ),
            "{md}"
        );
        assert!(md.contains("**9.00 Mbit/s**"));
        let svg = svg(&r);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 3);
        assert_eq!(svg.matches("<circle").count(), 3 * r.points.len());
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
        // 1 + 3 × 10 runs of 15 + 4 s; 2 + 3 restarts of 10 s; 20 s.
        assert_eq!(s.expected_s(), 31 * 19 + 70);
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let base = mmsg::example(&root, 1).unwrap();
        let c = gateway_config(base.clone(), true, true, 1000);
        let mut text = std::fs::read_to_string(root.join("examples/mmsg-branch1.toml")).unwrap();
        text.push_str("\n[striping]\nclasses = [\"type2\"]\nthreshold_kbit = 1000\n");
        assert_eq!(Config::parse(&text).unwrap(), c);
        text.push_str("release_hold_adapt = false\n");
        assert_eq!(
            Config::parse(&text).unwrap(),
            gateway_config(base.clone(), true, false, 1000)
        );
        assert_eq!(gateway_config(base.clone(), false, true, 1000), base);
        assert!(topology::parse(TOPOLOGY).is_ok());
    }
}
