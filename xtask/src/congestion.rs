//! Congestion reaction on the whole system (seed 001 §IV-A4, issue #9): one TCP flow striped
//! over the four path groups 1 → 2 of Table II while group 1's paths are flooded, as a timeline.
//!
//! Set-up: the paper topology (`ssc`, five `mmsg` with Open vSwitch, Table II's groups). Every
//! first hop of gw1's member paths (2 uplinks × 8 remote ports, each the first hop of exactly one
//! member) is limited to `rate_mbit` one way, so each group can carry 4 × `rate_mbit`. One TCP
//! flow h1 → h2 is striped over the four groups (`[striping]`). At `flood_at` the first hops of
//! group 1's four members get `background_mbit` each of constant-rate background traffic (the
//! emulator's UDP-like stream that never backs off, docs/testbed.md), leaving `rate −
//! background` per member to the tunnel; at `flood_end` it goes away again.
//!
//! Meanwhile every `POLL` the weights `ssc` publishes for 1 → 2 (`GET /api/v1/weights/1/2`) are
//! sampled; the flow's rate per second comes from the iperf3 sender. The gateways report their
//! groups' carried bytes and blocked writer time every 2 s; `ssc` estimates each group's
//! available capacity from them (`controller::capacity`) and re-weights, so the striped flow
//! moves off the flooded group without restarting, and back after the flood. Without the
//! reaction the striped flow would be held to 4 × group 1's rest (its fixed quarter of every
//! packet must pass there).
//!
//! `cargo xtask experiment congestion` runs it and writes `results/congestion.{json,md,svg}`;
//! `xtask/tests/e2e_congestion.rs` runs a shorter one and checks the reaction.
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::e2e::{self, System};
use crate::iperf::{self, Server};
use crate::testbed;
use crate::topology::Impairment;

/// Settings of one run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Settings {
    /// Length of the transfer, seconds.
    pub secs: u32,
    /// When the flood starts, seconds into the transfer.
    pub flood_at: u32,
    /// When it ends.
    pub flood_end: u32,
    /// Rate of each member path's first hop, Mbit/s (one way, 1 → 2).
    pub rate_mbit: f64,
    /// The flood's rate on each first hop of group 1, Mbit/s (below `rate_mbit`: the
    /// emulator's background always gets its rate, the tunnel gets the rest).
    pub background_mbit: f64,
    /// Bottleneck queue, KiB.
    pub queue_kib: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            secs: 45,
            flood_at: 15,
            flood_end: 30,
            rate_mbit: 3.0,
            background_mbit: 2.7,
            queue_kib: 64,
        }
    }
}

/// One sample of the published weights.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WeightSample {
    /// Seconds since the transfer started.
    pub t: f64,
    /// Weight per group id (1 is the flooded one), per mille.
    pub weights: Vec<(u8, u32)>,
    /// Basis (`estimated`, `measured`, `configured`).
    pub basis: String,
    /// Estimated capacity per group id, Mbit/s (`None`: no estimate).
    pub est_mbit: Vec<(u8, Option<f64>)>,
    /// The standing queue each group's last report showed, ms (`last_sample.queue_s`; `None`:
    /// nothing in flight, or no report yet).
    #[serde(default)]
    pub queue_ms: Vec<(u8, Option<f64>)>,
}

impl WeightSample {
    /// The weight of the flooded group 1.
    pub fn w1(&self) -> u32 {
        self.weights
            .iter()
            .find(|(g, _)| *g == FLOODED)
            .map_or(0, |(_, w)| *w)
    }
}

/// The group whose paths are flooded.
pub const FLOODED: u8 = 1;

/// The timeline of one run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Timeline {
    /// The settings.
    pub settings: Settings,
    /// Start (UTC, RFC 3339) and the machine's 1-minute load then.
    pub started: String,
    /// Load average at the start.
    pub load: f64,
    /// Sender rate per second, Mbit/s (iperf3 intervals: second i covers [i, i+1)).
    pub mbps: Vec<f64>,
    /// The published weights over time.
    pub weights: Vec<WeightSample>,
    /// Receiver goodput over the whole transfer, Mbit/s.
    pub goodput_mbps: f64,
    /// Sender retransmits.
    pub retransmits: u64,
}

impl Timeline {
    /// Mean sender rate over seconds [from, to).
    pub fn mean(&self, from: u32, to: u32) -> f64 {
        crate::stats::mean_of_seconds(&self.mbps, from, to)
    }

    /// Seconds from the flood's start until group 1's published weight first fell below
    /// `below` (per mille); `None` if it never did during the flood.
    pub fn reaction_s(&self, below: u32) -> Option<f64> {
        let s = &self.settings;
        self.weights
            .iter()
            .find(|w| {
                w.t >= f64::from(s.flood_at) && w.t < f64::from(s.flood_end) && w.w1() < below
            })
            .map(|w| w.t - f64::from(s.flood_at))
    }

    /// Seconds from the flood's end until group 1's weight was back at or above `above`.
    pub fn recovery_s(&self, above: u32) -> Option<f64> {
        let end = f64::from(self.settings.flood_end);
        self.weights
            .iter()
            .find(|w| w.t >= end && w.w1() >= above)
            .map(|w| w.t - end)
    }
}

/// Where a run happens.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Repository root.
    pub root: PathBuf,
    /// Testbed prefix.
    pub prefix: String,
    /// The `xtask` binary (for a test binary; `None` in the `xtask` binary itself).
    pub xtask: Option<PathBuf>,
}

/// How often the weights are sampled.
const POLL: Duration = Duration::from_millis(500);

/// Runs the timeline: brings the system up, runs the transfer with the flood, tears down.
pub fn run(opts: &RunOptions, settings: &Settings) -> anyhow::Result<Timeline> {
    anyhow::ensure!(
        settings.flood_at < settings.flood_end && settings.flood_end <= settings.secs,
        "need flood_at < flood_end <= secs"
    );
    anyhow::ensure!(
        settings.background_mbit < settings.rate_mbit,
        "the flood must be below the path rate (the emulator's background always gets its rate)"
    );
    let (sys, started, load) = striped_system(opts, None)?;
    let path = |imp: &Impairment, from: &str, to: &str| {
        testbed::pair_set(&sys.prefix, from, to, false, imp)
            .with_context(|| format!("set pair {from}>{to}"))
    };
    let plain = Impairment {
        rate_mbit: Some(settings.rate_mbit),
        queue_kib: Some(settings.queue_kib),
        ..Impairment::default()
    };
    let flooded = Impairment {
        background_mbit: Some(settings.background_mbit),
        ..plain.clone()
    };
    limit_branch1(&sys, &plain)?;
    // Group 1's first hops: `1a>3a>3b>2a` → (1a, 3a).
    let first_hops: Vec<(String, String)> = sys
        .routes
        .iter()
        .filter(|((g, _), _)| *g == FLOODED)
        .filter_map(|(_, r)| {
            let mut it = r.split('>');
            Some((it.next()?.to_owned(), it.next()?.to_owned()))
        })
        .collect();
    anyhow::ensure!(
        first_hops.len() == 4,
        "group {FLOODED} has {} members, expected Table II's 4",
        first_hops.len()
    );
    let flood = |imp: &Impairment| -> anyhow::Result<()> {
        for (from, to) in &first_hops {
            path(imp, from, to)?;
        }
        Ok(())
    };
    // Let the weights settle on the configured capacities before the transfer.
    std::thread::sleep(Duration::from_secs(2));

    let flow = Flow::start(&sys, 5401, settings.secs)?;
    let t0 = Instant::now();
    let mut weights = Vec::new();
    let (mut flooding, mut flooded_once) = (false, false);
    while t0.elapsed() < Duration::from_secs(u64::from(settings.secs)) {
        // A stop signal ends the timeline here; dropping `flow` and `sys` tears the testbed down.
        crate::stop::check()?;
        let t = t0.elapsed().as_secs_f64();
        if !flooding && !flooded_once && t >= f64::from(settings.flood_at) {
            flood(&flooded)?;
            flooding = true;
            flooded_once = true;
        }
        if flooding && t >= f64::from(settings.flood_end) {
            flood(&plain)?;
            flooding = false;
        }
        if let Ok(v) = sys.api().get("/api/v1/weights/1/2") {
            if let Some(s) = weight_sample(&v, t) {
                weights.push(s);
            }
        }
        std::thread::sleep(POLL);
    }
    let (mbps, goodput_mbps, retransmits) = flow.finish()?;
    drop(sys);
    Ok(Timeline {
        settings: settings.clone(),
        started,
        load,
        mbps,
        weights,
        goodput_mbps,
        retransmits,
    })
}

/// The e2e system of the congestion and adaptive timelines: `wrr`, the flow to h2
/// (198.19.2.10) striped above 1 Mbit/s, `paths` instead of Table II when given; returns it with
/// the start time (UTC) and the 1-minute load then.
pub(crate) fn striped_system(
    opts: &RunOptions,
    paths: Option<&Path>,
) -> anyhow::Result<(System, String, f64)> {
    let mut e2e_opts = e2e::Options::new(&opts.root, &opts.prefix);
    e2e_opts.xtask.clone_from(&opts.xtask);
    e2e_opts.selection_policy = "wrr".to_owned();
    e2e_opts.paths = paths.map(Path::to_owned);
    e2e_opts.striping = Some(crate::mmsg::stripe_host(H2, 1000));
    let started = crate::sh::utc_now();
    let load = crate::sh::load_1min();
    Ok((System::up(&e2e_opts)?, started, load))
}

/// Limits every pair from branch 1's uplinks (1a, 1b) to the other branches' ports with `imp`.
pub(crate) fn limit_branch1(sys: &System, imp: &Impairment) -> anyhow::Result<()> {
    for from in ["1a", "1b"] {
        for to in ["2a", "2b", "3a", "3b", "4a", "4b", "5a", "5b"] {
            testbed::pair_set(&sys.prefix, from, to, false, imp)
                .with_context(|| format!("set pair {from}>{to}"))?;
        }
    }
    Ok(())
}

/// The striped host of branch 2.
const H2: std::net::Ipv4Addr = std::net::Ipv4Addr::new(198, 19, 2, 10);

/// One iperf3 TCP flow h1 → h2 ([`H2`]) with 1-second intervals, running in a thread.
pub(crate) struct Flow {
    server: Server,
    client: std::thread::JoinHandle<anyhow::Result<serde_json::Value>>,
}

impl Flow {
    /// Starts the server in h2 on `port` and the client in h1 for `secs`.
    pub(crate) fn start(sys: &System, port: u16, secs: u32) -> anyhow::Result<Flow> {
        let server = Server::start(&sys.ns_host(2), port, None)?;
        let (h1, port, secs) = (sys.ns_host(1), port.to_string(), secs.to_string());
        let client = std::thread::spawn(move || {
            iperf::client(
                &h1,
                &["-c", &H2.to_string(), "-p", &port, "-t", &secs, "-i", "1"],
            )
        });
        Ok(Flow { server, client })
    }

    /// Waits for the end: sender Mbit/s per second, receiver goodput, sender retransmits.
    pub(crate) fn finish(self) -> anyhow::Result<(Vec<f64>, f64, u64)> {
        let v = self
            .client
            .join()
            .map_err(|_| anyhow::anyhow!("iperf3 client thread panicked"))??;
        self.server.wait(Duration::from_secs(3));
        Ok((
            iperf::interval_mbps(&v),
            iperf::tcp_received_mbps(&v).unwrap_or(0.0),
            iperf::tcp_retransmits(&v),
        ))
    }
}

/// One weights sample from `GET /api/v1/weights/1/2`.
fn weight_sample(v: &serde_json::Value, t: f64) -> Option<WeightSample> {
    let groups = v.get("groups")?.as_array()?;
    let mut weights = Vec::new();
    let mut est_mbit = Vec::new();
    let mut queue_ms = Vec::new();
    for g in groups {
        let id = u8::try_from(g.get("group")?.as_u64()?).ok()?;
        weights.push((id, u32::try_from(g.get("weight")?.as_u64()?).ok()?));
        queue_ms.push((
            id,
            g.get("last_sample")
                .and_then(|s| s.get("queue_s"))
                .and_then(serde_json::Value::as_f64)
                .map(|x| x * 1e3),
        ));
        est_mbit.push((
            id,
            g.get("estimated_bps")
                .and_then(serde_json::Value::as_f64)
                .map(|x| x / 1e6),
        ));
    }
    Some(WeightSample {
        t,
        weights,
        basis: v
            .get("basis")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
            .to_owned(),
        est_mbit,
        queue_ms,
    })
}

/// The timeline as a markdown summary.
pub fn markdown(tl: &Timeline) -> String {
    let s = &tl.settings;
    let pre = tl.mean(3, s.flood_at);
    let during = tl.mean(s.flood_at + 6, s.flood_end);
    let after = tl.mean(s.flood_end + 6, s.secs);
    let mut out = format!(
        "# Congestion reaction (seed 001 §IV-A4)\n\n\
         Started {} (load {:.2}). Table II's four path groups 1 → 2, every member's first hop \
         {} Mbit/s one way, {} KiB queues; one TCP flow striped over the four for {} s; {} Mbit/s \
         of constant-rate background on each of group 1's four first hops from {} s to {} s.\n\n\
         | phase | sender Mbit/s (mean) |\n|---|---:|\n\
         | before the flood (3–{} s) | {pre:.1} |\n\
         | flooded, after the reaction ({}–{} s) | {during:.1} |\n\
         | after the flood ({}–{} s) | {after:.1} |\n\n\
         Receiver goodput over the whole transfer {:.1} Mbit/s, {} retransmits.\n\n",
        tl.started,
        tl.load,
        s.rate_mbit,
        s.queue_kib,
        s.secs,
        s.background_mbit,
        s.flood_at,
        s.flood_end,
        s.flood_at,
        s.flood_at + 6,
        s.flood_end,
        s.flood_end + 6,
        s.secs,
        tl.goodput_mbps,
        tl.retransmits,
    );
    out.push_str(&match tl.reaction_s(200) {
        Some(r) => format!("Group 1's weight fell below 200 ‰ {r:.1} s after the flood started"),
        None => "Group 1's weight never fell below 200 ‰ during the flood".to_owned(),
    });
    out.push_str(&match tl.recovery_s(400) {
        Some(r) => format!("; it was back at ≥ 400 ‰ {r:.1} s after the flood ended.\n\n"),
        None => "; it did not come back to 400 ‰ before the transfer ended.\n\n".to_owned(),
    });
    out.push_str(
        "Published weights (‰), estimated capacities (Mbit/s) and the standing queue of each \
         group's last report (ms), when the weights changed:\n\n",
    );
    out.push_str("| t (s) | weights | basis | estimates | queues |\n|---:|---|---|---|---|\n");
    let mut last = None;
    for w in &tl.weights {
        if last.as_ref() == Some(&w.weights) {
            continue;
        }
        last = Some(w.weights.clone());
        let ws: Vec<String> = w.weights.iter().map(|(_, x)| x.to_string()).collect();
        let es: Vec<String> = w
            .est_mbit
            .iter()
            .map(|(_, x)| x.map_or_else(|| "-".to_owned(), |x| format!("{x:.1}")))
            .collect();
        let qs: Vec<String> = w
            .queue_ms
            .iter()
            .map(|(_, x)| x.map_or_else(|| "-".to_owned(), |x| format!("{x:.0}")))
            .collect();
        out.push_str(&format!(
            "| {:.1} | {} | {} | {} | {} |\n",
            w.t,
            ws.join(" / "),
            w.basis,
            es.join(" / "),
            qs.join(" / ")
        ));
    }
    out
}

/// The timeline as an SVG: the flow's rate (left axis, Mbit/s) and group 1's weight (right
/// axis, per mille) over time, the flood shaded.
pub fn svg(tl: &Timeline) -> String {
    let ymax = tl
        .mbps
        .iter()
        .copied()
        .fold(tl.settings.rate_mbit * 16.0, f64::max)
        .ceil();
    crate::plot::time_chart(&crate::plot::TimeChart {
        title: format!(
            "One striped TCP flow, group 1's path flooded {}–{} s",
            tl.settings.flood_at, tl.settings.flood_end
        ),
        secs: f64::from(tl.settings.secs.max(1)),
        left_max: ymax,
        left_label: "Mbit/s (sender)".into(),
        right_max: 1000.0,
        right_label: "weight of group 1 (‰)".into(),
        shade: Some((
            f64::from(tl.settings.flood_at),
            f64::from(tl.settings.flood_end),
        )),
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
                    .weights
                    .iter()
                    .map(|p| (p.t, f64::from(p.w1())))
                    .collect(),
                color: "#d62728",
                dashed: true,
                right: true,
                label: "weight of the flooded group".into(),
            },
        ],
    })
}

/// Writes `results/congestion.{json,md,svg}` under `out_dir`.
pub fn write(tl: &Timeline, out_dir: &Path) -> anyhow::Result<()> {
    crate::plot::write_results(out_dir, "congestion", tl, &markdown(tl), &svg(tl))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn timeline() -> Timeline {
        let settings = Settings {
            secs: 10,
            flood_at: 3,
            flood_end: 6,
            ..Settings::default()
        };
        let weights = (0..20)
            .map(|i| {
                let t = f64::from(i) * 0.5;
                let w1 = if (4.0..7.0).contains(&t) { 20 } else { 500 };
                WeightSample {
                    t,
                    weights: vec![(1, w1), (2, 1000 - w1)],
                    basis: "estimated".into(),
                    est_mbit: vec![(1, Some(0.5)), (2, Some(10.0))],
                    queue_ms: vec![(1, Some(150.0)), (2, None)],
                }
            })
            .collect();
        Timeline {
            settings,
            started: "2026-11-25T00:00:00Z".into(),
            load: 0.5,
            mbps: vec![18.0, 18.0, 18.0, 2.0, 9.0, 9.0, 12.0, 18.0, 18.0, 18.0],
            weights,
            goodput_mbps: 14.0,
            retransmits: 3,
        }
    }

    #[test]
    fn reaction_recovery_and_means() {
        let tl = timeline();
        assert_eq!(tl.reaction_s(200), Some(1.0));
        assert_eq!(tl.recovery_s(400), Some(1.0));
        assert!((tl.mean(0, 3) - 18.0).abs() < 1e-9);
        assert!((tl.mean(4, 6) - 9.0).abs() < 1e-9);
        assert_eq!(tl.mean(20, 30), 0.0);
    }

    #[test]
    fn reports_are_well_formed() {
        let tl = timeline();
        let md = markdown(&tl);
        assert!(
            md.contains("| 4.0 | 20 / 980 | estimated | 0.5 / 10.0 | 150 / - |"),
            "{md}"
        );
        let svg = svg(&tl);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
    }

    #[test]
    fn the_sample_reads_the_rest_answer() {
        let v = serde_json::json!({
            "source": 1, "destination": 2, "scale": 1000, "basis": "estimated",
            "groups": [
                {"group": 1, "weight": 17, "configured_kbps": 80000, "measured_bps": null, "estimated_bps": 500000.0,
                 "last_sample": {"rate_bps": 1.0e6, "busy": 0.0, "queue_s": 0.175}},
                {"group": 2, "weight": 983, "configured_kbps": 80000, "measured_bps": null}
            ]
        });
        let s = weight_sample(&v, 1.5).unwrap();
        assert_eq!(s.weights, vec![(1, 17), (2, 983)]);
        assert_eq!(s.w1(), 17);
        assert_eq!(s.est_mbit, vec![(1, Some(0.5)), (2, None)]);
        assert_eq!(s.queue_ms, vec![(1, Some(175.0)), (2, None)]);
    }
}
