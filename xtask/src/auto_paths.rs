//! Automatic path configuration live on the whole system (issue #20, `controller::auto_config`):
//! the direct hops of pair 1 → 2 get congested and `ssc` replaces its group with members through
//! transit branches; the pair's goodput recovers.
//!
//! Set-up: the paper topology (`ssc` with TLS, five `mmsg` with Open vSwitch) with one path group
//! 1 → 2 of the four **direct** member paths (`1a>2a`, `1a>2b`, `1b>2a`, `1b>2b`). Every WAN hop
//! leaving branch 1 is limited to `rate_mbit` one way, so the group carries 4 × `rate_mbit`, and
//! so would any group through transits. Automatic path configuration is switched on for 1 → 2
//! only (`PUT /api/v1/settings`, `auto.pairs = [[1, 2]]`, the default period of 10 s). One TCP
//! flow h1 → h2 runs `secs`; at `flood_at` the four direct hops get `background_mbit` each of
//! constant-rate background (the emulator's UDP-like stream that never backs off), leaving
//! `rate − background` per direct member. The group is limited by its paths, its members carry
//! what the flood leaves, `ssc`'s measurements see the direct hops at that rate and the next
//! round replaces the group with four members through transits (≥ 5× the capacity).
//!
//! Every `POLL` `GET /api/v1/path-groups/1/2` is sampled; the flow's rate per second comes from the
//! iperf3 sender. [`PROBE_AFTER`] seconds after the group is replaced a second TCP flow (the
//! probe) starts and runs to the end: what both carry together is what the new group carries,
//! whatever state the first flow's congestion control is left in by the flood (it saw seconds
//! of RTT and RTOs, and after them recovers at its own pace: measured in one run, its window grew
//! from 172 to 210 segments in 6 s at 160 ms RTT, `ss -ti` in h1). `xtask/tests/e2e_adaptive.rs`
//! (`auto_path_configuration_...`) runs it.
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::congestion::{self, RunOptions};
use crate::testbed;
use crate::topology::Impairment;

/// Settings of one run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Settings {
    /// Length of the transfer, seconds.
    pub secs: u32,
    /// When the direct hops get congested (until the end), seconds into the transfer.
    pub flood_at: u32,
    /// Rate of every WAN hop leaving branch 1, Mbit/s (one way).
    pub rate_mbit: f64,
    /// Background on each direct hop 1 → 2, Mbit/s (below `rate_mbit`).
    pub background_mbit: f64,
    /// Bottleneck queue, KiB.
    pub queue_kib: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            secs: 38,
            flood_at: 10,
            rate_mbit: 4.0,
            background_mbit: 3.6,
            queue_kib: 64,
        }
    }
}

/// One sample of the group 1 → 2 #1.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the transfer started.
    pub t: f64,
    /// Its members, paper notation.
    pub members: Vec<String>,
}

impl Sample {
    /// Whether every member goes through a transit.
    pub fn all_transit(&self) -> bool {
        !self.members.is_empty() && self.members.iter().all(|m| m.matches('>').count() > 1)
    }
}

/// The timeline of one run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Timeline {
    /// The settings.
    pub settings: Settings,
    /// Sender rate per second, Mbit/s.
    pub mbps: Vec<f64>,
    /// The group over time.
    pub samples: Vec<Sample>,
    /// `ssc`'s log lines about automatic path configuration changes.
    pub changes: Vec<String>,
    /// When the probe flow started, seconds (none: the group was not replaced early enough).
    pub probe_at: Option<f64>,
    /// The probe flow's sender rate per second from its start, Mbit/s.
    pub probe_mbps: Vec<f64>,
    /// `mmsg` 1's log lines about its subflows (deaths, demotions, re-creations).
    pub gw1_subflow_events: Vec<String>,
}

impl Timeline {
    /// Mean sender rate over seconds [from, to).
    pub fn mean(&self, from: u32, to: u32) -> f64 {
        crate::stats::mean_of_seconds(&self.mbps, from, to)
    }

    /// The first whole second both flows ran, and the mean rate of both together from then to
    /// the end, Mbit/s (none without a probe flow).
    pub fn after_both(&self) -> Option<(u32, f64)> {
        let at = self.probe_at?;
        let from = at.ceil() as u32;
        let first = crate::stats::mean_of_seconds(&self.mbps, from, self.settings.secs);
        // The probe's second `i` is [at + i, at + i + 1): the same seconds, up to the fraction.
        let probe_secs = self.settings.secs.saturating_sub(from);
        let probe = crate::stats::mean_of_seconds(&self.probe_mbps, 0, probe_secs);
        Some((from, first + probe))
    }

    /// When the group first had only members through transits, seconds.
    pub fn replaced_at(&self) -> Option<f64> {
        self.samples.iter().find(|s| s.all_transit()).map(|s| s.t)
    }

    /// Whether the group changed before the flood (it must not: semi-permanent).
    pub fn changed_before_flood(&self) -> bool {
        let first = self.samples.first().map(|s| &s.members);
        self.samples
            .iter()
            .filter(|s| s.t < f64::from(self.settings.flood_at))
            .any(|s| Some(&s.members) != first)
    }
}

/// How often the group is sampled.
const POLL: Duration = Duration::from_millis(500);

/// Seconds after the replacement (the first sample with members through transits only) the
/// probe flow starts: the reopened connections carry by then.
pub const PROBE_AFTER: f64 = 4.0;
/// The probe flow runs at least this long, seconds (else it does not start).
const PROBE_MIN_SECS: u32 = 5;
/// The probe flow's iperf3 port.
const PROBE_PORT: u16 = 5404;

/// The direct member paths of 1 → 2.
pub const DIRECT: [&str; 4] = ["1a>2a", "1a>2b", "1b>2a", "1b>2b"];

/// Runs the timeline: brings the system up, runs the transfer with the flood, tears down.
pub fn run(opts: &RunOptions, settings: &Settings) -> anyhow::Result<Timeline> {
    anyhow::ensure!(
        settings.background_mbit < settings.rate_mbit && settings.flood_at < settings.secs,
        "need background < rate and flood_at < secs"
    );
    let paths: PathBuf = std::env::temp_dir().join(format!("{}-auto-paths.toml", opts.prefix));
    let members: Vec<String> = DIRECT.iter().map(|m| format!("{m:?}")).collect();
    std::fs::write(
        &paths,
        format!(
            "[[groups]]\nsource = 1\ndestination = 2\nid = 1\nmembers = [{}]\n",
            members.join(", ")
        ),
    )
    .with_context(|| format!("write {}", paths.display()))?;
    let r = run_with(opts, settings, &paths);
    let _ = std::fs::remove_file(&paths);
    r
}

fn group_members(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .and_then(|gs| {
            gs.iter()
                .find(|g| g.get("id").and_then(serde_json::Value::as_u64) == Some(1))
        })
        .and_then(|g| g.get("members")?.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|m| m.get("path")?.as_str().map(str::to_owned))
        .collect()
}

fn run_with(opts: &RunOptions, settings: &Settings, paths: &Path) -> anyhow::Result<Timeline> {
    let (sys, _, _) = congestion::striped_system(opts, Some(paths))?;
    let plain = Impairment {
        rate_mbit: Some(settings.rate_mbit),
        queue_kib: Some(settings.queue_kib),
        ..Impairment::default()
    };
    congestion::limit_branch1(&sys, &plain)?;
    let mut s = sys.api().get("/api/v1/settings")?;
    let obj = s
        .as_object_mut()
        .context("GET /api/v1/settings is not an object")?;
    obj.insert("auto".into(), serde_json::json!({ "pairs": [[1, 2]] }));
    sys.api()
        .call("PUT", "/api/v1/settings", Some(&s))
        .context("switch automatic path configuration on for 1 -> 2")?;

    let flooded = Impairment {
        background_mbit: Some(settings.background_mbit),
        ..plain.clone()
    };
    let flow = congestion::Flow::start(&sys, 5403, settings.secs)?;
    let t0 = Instant::now();
    let mut samples = Vec::new();
    let mut flooding = false;
    let mut replaced: Option<f64> = None;
    let mut probe: Option<(f64, congestion::Flow)> = None;
    while t0.elapsed() < Duration::from_secs(u64::from(settings.secs)) {
        let t = t0.elapsed().as_secs_f64();
        if !flooding && t >= f64::from(settings.flood_at) {
            for m in DIRECT {
                let (from, to) = m.split_once('>').context("a direct path")?;
                testbed::pair_set(&sys.prefix, from, to, false, &flooded)
                    .with_context(|| format!("flood {m}"))?;
            }
            flooding = true;
        }
        if let Ok(v) = sys.api().get("/api/v1/path-groups/1/2") {
            let s = Sample {
                t,
                members: group_members(&v),
            };
            if replaced.is_none() && s.all_transit() {
                replaced = Some(t);
            }
            samples.push(s);
        }
        let left = settings.secs.saturating_sub(t.ceil() as u32);
        let due = replaced.is_some_and(|r| t >= r + PROBE_AFTER);
        if due && probe.is_none() && left >= PROBE_MIN_SECS {
            let p =
                congestion::Flow::start(&sys, PROBE_PORT, left).context("start the probe flow")?;
            probe = Some((t0.elapsed().as_secs_f64(), p));
        }
        std::thread::sleep(POLL);
    }
    let (mbps, _, _) = flow.finish()?;
    let (probe_at, probe_mbps) = match probe {
        Some((at, p)) => (Some(at), p.finish()?.0),
        None => (None, Vec::new()),
    };
    // gw1's subflow events but the routine "subflow up" (none before the flood: new gateways).
    let gw1_subflow_events = log_lines(&sys.mmsg_log(1), |l| {
        l.contains("subflow") && !l.contains("subflow up")
    });
    let changes = log_lines(&sys.ssc_log(), |l| l.contains("auto path configuration"));
    drop(sys);
    Ok(Timeline {
        settings: settings.clone(),
        mbps,
        samples,
        changes,
        probe_at,
        probe_mbps,
        gw1_subflow_events,
    })
}

/// The lines of the log file `log` that `keep` (none if it cannot be read).
fn log_lines(log: &Path, keep: impl Fn(&str) -> bool) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| keep(l))
        .map(str::to_owned)
        .collect()
}
