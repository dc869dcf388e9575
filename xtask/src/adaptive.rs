//! Adaptive path groups on the whole system (seed 003 §III steps 5–8, issue #9): one TCP flow
//! from branch 1 to 2 starts with a single path group; `ssc` adds groups while the flow's
//! groups are saturated and its achieved rate ξ stays below λ × the achievable ζ, and retires
//! them again once the flow has ended.
//!
//! Set-up: the paper topology (`ssc`, five `mmsg` with Open vSwitch) with **only Table II's
//! group 1** from 1 to 2. Every WAN hop leaving branch 1 is limited to `rate_mbit` one way, so
//! group 1 (four members with four different first hops) can carry 4 × `rate_mbit`, while the
//! pair's 16 first hops could carry 16 × `rate_mbit`. `ssc` does not know these limits (no hop
//! measurements), so its ζ is the ports' max-flow (80 Mbit/s): the shortfall is what the
//! gateways measure. The flow is striped (`[striping]`) so that it uses every group of the pair
//! by weight, including groups added while it runs. Adaptive path groups are switched on through
//! `PUT /api/v1/settings` with `groups_per_pair` = `max_groups` and a short `retire_after_s`.
//!
//! Every `POLL`, `GET /api/v1/adaptive` is sampled (groups of 1 → 2, ξ, status); the flow's rate
//! per second comes from the iperf3 sender. After the transfer the sampling goes on for
//! `idle_secs` to see the groups retire.
//!
//! `cargo xtask experiment adaptive` writes `results/adaptive.{json,md,svg}`;
//! `xtask/tests/e2e_adaptive.rs` runs it and checks the growth, the gain and the retirement.
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::congestion::{self, RunOptions};
use crate::topology::Impairment;

/// Settings of one run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Settings {
    /// Length of the transfer, seconds.
    pub secs: u32,
    /// Sampling after the transfer, seconds.
    pub idle_secs: u32,
    /// Rate of every WAN hop leaving branch 1, Mbit/s (one way).
    pub rate_mbit: f64,
    /// Bottleneck queue, KiB.
    pub queue_kib: u32,
    /// `groups_per_pair`: the most groups the pair may get.
    pub max_groups: u8,
    /// λ.
    pub lambda: f64,
    /// `retire_after_s`.
    pub retire_after_s: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            secs: 60,
            idle_secs: 45,
            rate_mbit: 3.0,
            queue_kib: 64,
            max_groups: 4,
            lambda: 0.8,
            retire_after_s: 15.0,
        }
    }
}

/// One sample of `GET /api/v1/adaptive` for 1 → 2.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the transfer started.
    pub t: f64,
    /// Group ids of the pair.
    pub groups: Vec<u8>,
    /// ξ, Mbit/s.
    pub xi_mbit: f64,
    /// Status (`short`, `settling`, ...).
    pub status: String,
    /// Per group of 1 → 2, the last report interval `ssc` holds, its estimate and weight
    /// (`GET /api/v1/weights/1/2`).
    #[serde(default)]
    pub reports: Vec<Report>,
}

/// The timeline of one run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Timeline {
    /// The settings.
    pub settings: Settings,
    /// Start (UTC) and the machine's 1-minute load then.
    pub started: String,
    /// Load average at the start.
    pub load: f64,
    /// Sender rate per second, Mbit/s.
    pub mbps: Vec<f64>,
    /// The samples, during and after the transfer.
    pub samples: Vec<Sample>,
    /// Receiver goodput over the whole transfer, Mbit/s.
    pub goodput_mbps: f64,
    /// Sender retransmits.
    pub retransmits: u64,
    /// `ssc`'s log lines about adaptive changes.
    pub changes: Vec<String>,
}

impl Timeline {
    /// Mean sender rate over seconds [from, to).
    pub fn mean(&self, from: u32, to: u32) -> f64 {
        crate::stats::mean_of_seconds(&self.mbps, from, to)
    }

    /// When the pair first had more than one group, seconds.
    pub fn first_add_s(&self) -> Option<f64> {
        self.samples
            .iter()
            .find(|s| s.groups.len() > 1)
            .map(|s| s.t)
    }

    /// The most groups the pair had during the transfer.
    pub fn most_groups(&self) -> usize {
        let end = f64::from(self.settings.secs);
        self.samples
            .iter()
            .filter(|s| s.t <= end)
            .map(|s| s.groups.len())
            .max()
            .unwrap_or(0)
    }

    /// How many groups the pair had at the last sample.
    pub fn final_groups(&self) -> usize {
        self.samples.last().map_or(0, |s| s.groups.len())
    }

    /// Seconds after the transfer until the pair was back at one group.
    pub fn retired_after_s(&self) -> Option<f64> {
        let end = f64::from(self.settings.secs);
        self.samples
            .iter()
            .find(|s| s.t > end && s.groups.len() == 1)
            .map(|s| s.t - end)
    }

    /// Mean rate with one group (from 2 s to the first add) and over the transfer's last 10 s.
    pub fn before_after(&self) -> (f64, f64) {
        let first = self
            .first_add_s()
            .map_or(self.settings.secs, |t| t.floor().max(3.0) as u32);
        let end = self.settings.secs;
        (self.mean(1, first), self.mean(end.saturating_sub(10), end))
    }
}

/// One group of 1 → 2 as `GET /api/v1/weights/1/2` shows it: its last report interval, the
/// capacity `ssc` estimates from it and the weight it publishes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// Group id.
    pub group: u8,
    /// Carried, Mbit/s.
    pub rate_mbit: f64,
    /// Fraction of the interval its writers were blocked.
    pub busy: f64,
    /// Window rate of its busiest connection's subflows, Mbit/s.
    pub window_mbit: f64,
    /// Retransmitted share.
    pub loss: Option<f64>,
    /// Whether the capacity estimate called it saturated.
    pub saturated: bool,
    /// Data queued in its sockets, not in flight, in seconds at the carried rate.
    pub backlog_s: Option<f64>,
    /// In-flight rate of its busiest connection's subflows, Mbit/s.
    #[serde(default)]
    pub inflight_mbit: Option<f64>,
    /// Whether the window rate counted for the estimate (windows at least half in use).
    #[serde(default)]
    pub window_used: bool,
    /// `ssc`'s capacity estimate, Mbit/s.
    pub estimated_mbit: Option<f64>,
    /// Published weight (per mille of the pair's scale).
    pub weight: u32,
}

/// How often the adaptive state is sampled.
const POLL: Duration = Duration::from_millis(500);

/// The path groups file: Table II's group 1 only.
fn group1_paths(root: &Path, out: &Path) -> anyhow::Result<()> {
    let table2 = std::fs::read_to_string(root.join("examples/paths-paper-table2.toml"))
        .context("read examples/paths-paper-table2.toml")?;
    let first = table2
        .split("[[groups]]")
        .nth(1)
        .context("no [[groups]] in Table II")?;
    std::fs::write(out, format!("[[groups]]{first}"))
        .with_context(|| format!("write {}", out.display()))
}

fn sample(v: &serde_json::Value, t: f64) -> Option<Sample> {
    let pair = v.get("pairs")?.as_array()?.iter().find(|p| {
        p.get("source").and_then(serde_json::Value::as_u64) == Some(1)
            && p.get("destination").and_then(serde_json::Value::as_u64) == Some(2)
    })?;
    Some(Sample {
        t,
        groups: pair
            .get("groups")?
            .as_array()?
            .iter()
            .filter_map(|g| g.as_u64().and_then(|g| u8::try_from(g).ok()))
            .collect(),
        xi_mbit: pair.get("xi_bps")?.as_f64()? / 1e6,
        status: pair.get("status")?.as_str()?.to_owned(),
        reports: Vec::new(),
    })
}

/// The groups' last report intervals from `GET /api/v1/weights/1/2`.
fn reports(v: &serde_json::Value) -> Vec<Report> {
    let f = |s: &serde_json::Value, k: &str| s.get(k).and_then(serde_json::Value::as_f64);
    v.get("groups")
        .and_then(serde_json::Value::as_array)
        .map(|gs| {
            gs.iter()
                .filter_map(|g| {
                    let id = u8::try_from(g.get("group")?.as_u64()?).ok()?;
                    let s = g.get("last_sample")?;
                    Some(Report {
                        group: id,
                        rate_mbit: f(s, "rate_bps")? / 1e6,
                        busy: f(s, "busy")?,
                        window_mbit: f(s, "window_bps").unwrap_or(0.0) / 1e6,
                        loss: f(s, "loss"),
                        saturated: s
                            .get("saturated")
                            .and_then(serde_json::Value::as_bool)
                            .unwrap_or(false),
                        backlog_s: f(s, "backlog_s"),
                        inflight_mbit: f(s, "inflight_bps").map(|x| x / 1e6),
                        window_used: s
                            .get("window_used")
                            .and_then(serde_json::Value::as_bool)
                            .unwrap_or(false),
                        estimated_mbit: f(g, "estimated_bps").map(|e| e / 1e6),
                        weight: g
                            .get("weight")
                            .and_then(serde_json::Value::as_u64)
                            .and_then(|w| u32::try_from(w).ok())
                            .unwrap_or(0),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Runs the timeline: brings the system up, runs the transfer, samples, tears down.
pub fn run(opts: &RunOptions, settings: &Settings) -> anyhow::Result<Timeline> {
    let paths: PathBuf = std::env::temp_dir().join(format!("{}-adaptive-paths.toml", opts.prefix));
    group1_paths(&opts.root, &paths)?;
    let r = run_with(opts, settings, &paths);
    let _ = std::fs::remove_file(&paths);
    r
}

fn run_with(opts: &RunOptions, settings: &Settings, paths: &Path) -> anyhow::Result<Timeline> {
    let (sys, started, load) = congestion::striped_system(opts, Some(paths))?;
    let limited = Impairment {
        rate_mbit: Some(settings.rate_mbit),
        queue_kib: Some(settings.queue_kib),
        ..Impairment::default()
    };
    congestion::limit_branch1(&sys, &limited)?;
    let mut s = sys.api().get("/api/v1/settings")?;
    let obj = s
        .as_object_mut()
        .context("GET /api/v1/settings is not an object")?;
    obj.insert(
        "groups_per_pair".into(),
        serde_json::json!(settings.max_groups),
    );
    obj.insert(
        "adaptive".into(),
        serde_json::json!({
            "enabled": true,
            "lambda": settings.lambda,
            "min_groups": 1,
            "retire_after_s": settings.retire_after_s,
        }),
    );
    sys.api()
        .call("PUT", "/api/v1/settings", Some(&s))
        .context("switch adaptive path groups on")?;
    std::thread::sleep(Duration::from_secs(2));

    let flow = congestion::Flow::start(&sys, 5402, settings.secs)?;
    let t0 = Instant::now();
    let mut samples = Vec::new();
    let total = Duration::from_secs(u64::from(settings.secs + settings.idle_secs));
    while t0.elapsed() < total {
        // A stop signal ends the timeline here; dropping `flow` and `sys` tears the testbed down.
        crate::stop::check()?;
        if let Ok(v) = sys.api().get("/api/v1/adaptive") {
            if let Some(mut s) = sample(&v, t0.elapsed().as_secs_f64()) {
                if let Ok(w) = sys.api().get("/api/v1/weights/1/2") {
                    s.reports = reports(&w);
                }
                samples.push(s);
            }
        }
        std::thread::sleep(POLL);
    }
    let (mbps, goodput_mbps, retransmits) = flow.finish()?;
    let changes = std::fs::read_to_string(sys.ssc_log())
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("adaptive:"))
        .map(str::to_owned)
        .collect();
    drop(sys);
    Ok(Timeline {
        settings: settings.clone(),
        started,
        load,
        mbps,
        samples,
        goodput_mbps,
        retransmits,
        changes,
    })
}

/// The timeline as a markdown summary.
pub fn markdown(tl: &Timeline) -> String {
    let s = &tl.settings;
    let (before, after) = tl.before_after();
    let mut out = format!(
        "# Adaptive path groups (seed 003 §III steps 5–8)\n\n\
         Started {} (load {:.2}). Paper topology, only Table II's group 1 from 1 to 2 at the \
         start; every WAN hop leaving branch 1 {} Mbit/s one way ({} KiB queues); one TCP flow \
         striped over the pair's groups for {} s, then {} s idle. `ssc`: λ = {}, at most {} \
         groups, retire after {} s.\n\n\
         | | |\n|---|---:|\n\
         | sender Mbit/s with one group (1 s to the first add) | {before:.1} |\n\
         | sender Mbit/s over the transfer's last 10 s | {after:.1} |\n\
         | gain | {:.2}× |\n\
         | first group added after | {} |\n\
         | most groups during the transfer | {} |\n\
         | back to one group, seconds after the transfer | {} |\n\n\
         Receiver goodput over the whole transfer {:.1} Mbit/s, {} retransmits.\n\n",
        tl.started,
        tl.load,
        s.rate_mbit,
        s.queue_kib,
        s.secs,
        s.idle_secs,
        s.lambda,
        s.max_groups,
        s.retire_after_s,
        if before > 0.0 { after / before } else { 0.0 },
        tl.first_add_s()
            .map_or_else(|| "never".to_owned(), |t| format!("{t:.1} s")),
        tl.most_groups(),
        tl.retired_after_s()
            .map_or_else(|| "not within the run".to_owned(), |t| format!("{t:.1}")),
        tl.goodput_mbps,
        tl.retransmits,
    );
    out.push_str("Groups of 1 → 2 when they changed:\n\n| t (s) | groups | ξ (Mbit/s) | status |\n|---:|---|---:|---|\n");
    let mut last: Option<&Vec<u8>> = None;
    for smp in &tl.samples {
        if last == Some(&smp.groups) {
            continue;
        }
        last = Some(&smp.groups);
        let g: Vec<String> = smp.groups.iter().map(ToString::to_string).collect();
        out.push_str(&format!(
            "| {:.1} | {} | {:.1} | {} |\n",
            smp.t,
            g.join(" "),
            smp.xi_mbit,
            smp.status
        ));
    }
    out
}

/// The timeline as an SVG: the flow's rate (left) and the pair's number of groups (right).
pub fn svg(tl: &Timeline) -> String {
    let s = &tl.settings;
    let ymax = tl
        .mbps
        .iter()
        .copied()
        .fold(s.rate_mbit * 16.0, f64::max)
        .ceil();
    crate::plot::time_chart(&crate::plot::TimeChart {
        title: "One striped TCP flow 1 → 2, adaptive path groups (idle after the shading)".into(),
        secs: f64::from(s.secs + s.idle_secs),
        left_max: ymax,
        left_label: "Mbit/s (sender)".into(),
        right_max: f64::from(s.max_groups),
        right_label: "path groups 1 → 2".into(),
        shade: Some((f64::from(s.secs), f64::from(s.secs + s.idle_secs))),
        series: vec![
            crate::plot::Series {
                points: tl
                    .mbps
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (i as f64 + 0.5, *v))
                    .collect(),
                color: "#1f77b4",
                dashed: false,
                right: false,
                label: "rate of the striped flow".into(),
            },
            crate::plot::Series {
                points: tl
                    .samples
                    .iter()
                    .map(|p| (p.t, p.groups.len() as f64))
                    .collect(),
                color: "#d62728",
                dashed: true,
                right: true,
                label: "path groups of the pair".into(),
            },
        ],
    })
}

/// Writes `adaptive.{json,md,svg}` under `out_dir`.
pub fn write(tl: &Timeline, out_dir: &Path) -> anyhow::Result<()> {
    crate::plot::write_results(out_dir, "adaptive", tl, &markdown(tl), &svg(tl))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn timeline() -> Timeline {
        let settings = Settings {
            secs: 20,
            idle_secs: 10,
            ..Settings::default()
        };
        let samples = (0..60)
            .map(|i| {
                let t = f64::from(i) * 0.5;
                let n = match t {
                    t if t < 5.0 => 1,
                    t if t < 15.0 => 2,
                    t if t < 25.0 => 3,
                    _ => 1,
                };
                Sample {
                    t,
                    groups: (1..=n).collect(),
                    xi_mbit: 12.0 * f64::from(n),
                    status: "short".into(),
                    reports: Vec::new(),
                }
            })
            .collect();
        Timeline {
            settings,
            started: "2026-11-25T00:00:00Z".into(),
            load: 0.5,
            mbps: (0..20).map(|i| if i < 5 { 10.0 } else { 30.0 }).collect(),
            samples,
            goodput_mbps: 25.0,
            retransmits: 3,
            changes: Vec::new(),
        }
    }

    #[test]
    fn growth_gain_and_retirement() {
        let tl = timeline();
        assert_eq!(tl.first_add_s(), Some(5.0));
        assert_eq!(tl.most_groups(), 3);
        assert_eq!(tl.final_groups(), 1);
        assert_eq!(tl.retired_after_s(), Some(5.0));
        let (b, a) = tl.before_after();
        assert!(
            (b - 10.0).abs() < 1e-9 && (a - 30.0).abs() < 1e-9,
            "{b} {a}"
        );
        let md = markdown(&tl);
        assert!(md.contains("| gain | 3.00× |"), "{md}");
        assert!(md.contains("| 5.0 | 1 2 | 24.0 | short |"), "{md}");
        assert_eq!(svg(&tl).matches("<polyline").count(), 2);
    }

    #[test]
    fn the_sample_reads_the_rest_answer() {
        let v = serde_json::json!({"enabled": true, "pairs": [
            {"source": 2, "destination": 1, "groups": [1], "xi_bps": 1e5, "saturated": false, "status": "ok", "added": 0, "retired": 0},
            {"source": 1, "destination": 2, "groups": [1, 2], "xi_bps": 2.4e7, "saturated": true, "status": "settling", "added": 1, "retired": 0}
        ]});
        let s = sample(&v, 3.0).unwrap();
        assert_eq!(s.groups, vec![1, 2]);
        assert!((s.xi_mbit - 24.0).abs() < 1e-9);
        assert_eq!(s.status, "settling");
    }

    #[test]
    fn the_paths_file_has_group_1_only() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let out = std::env::temp_dir().join(format!("adaptive-paths-{}.toml", std::process::id()));
        group1_paths(&root, &out).unwrap();
        let text = std::fs::read_to_string(&out).unwrap();
        let _ = std::fs::remove_file(&out);
        assert_eq!(text.matches("[[groups]]").count(), 1);
        assert!(
            text.contains("id = 1") && text.contains("\"1a>2a\""),
            "{text}"
        );
    }
}
