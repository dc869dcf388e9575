//! What `bench latency` reports: per variant (a set of `mmsg` levers) and per load the RTT
//! distributions of every probe, the bulk goodput and the sparse flow's loss; the fairness
//! case; the JSON keys issue #16 asks for and the table.

use std::collections::BTreeMap;

use serde::Serialize;

use super::probe::Samples;

/// Median, 99th percentile (nearest rank), maximum and count of a set of RTTs (ms).
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Dist {
    /// Median, ms.
    pub median: f64,
    /// 99th percentile (nearest rank), ms.
    pub p99: f64,
    /// Largest sample, ms.
    pub max: f64,
    /// Samples.
    pub n: usize,
}

impl Dist {
    /// The distribution of `v`; `None` without samples.
    pub fn of(v: &[f64]) -> Option<Dist> {
        let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        Some(Dist {
            median: crate::stats::median(&s)?,
            p99: percentile_sorted(&s, 99.0)?,
            max: *s.last()?,
            n,
        })
    }
}

/// The `p`th percentile of sorted `s` by nearest rank.
pub fn percentile_sorted(s: &[f64], p: f64) -> Option<f64> {
    if s.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * s.len() as f64).ceil() as usize;
    s.get(rank.clamp(1, s.len()) - 1).copied()
}

/// Jain's fairness index of `x`: (Σx)² / (n Σx²); 1 = all equal, 1/n = one takes all.
pub fn jain(x: &[f64]) -> Option<f64> {
    let n = x.len() as f64;
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    (n > 0.0 && sq > 0.0).then(|| sum * sum / (n * sq))
}

/// A probe's RTTs and loss.
#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    /// RTT distribution; `None` when nothing came back.
    pub rtt_ms: Option<Dist>,
    /// Requests unanswered, percent.
    pub loss_pct: f64,
    /// Requests sent.
    pub sent: u64,
}

impl Probe {
    /// From a probe's samples.
    pub fn from_samples(s: &Samples) -> Probe {
        Probe {
            rtt_ms: Dist::of(&s.rtt_ms),
            loss_pct: s.loss_pct(),
            sent: s.sent,
        }
    }
}

/// One load phase.
#[derive(Debug, Clone, Serialize)]
pub struct LoadResult {
    /// `idle`, `bulk1`, `bulk4` or `udp2x`.
    pub load: String,
    /// ICMP ping h1 → h2 through the tunnel (same class as the bulk: Type II).
    pub ping: Probe,
    /// TCP request/response (1 byte each way), same class.
    pub rr: Probe,
    /// The sparse voice-like UDP flow, same class.
    pub sparse: Probe,
    /// The same voice-like flow marked DSCP 46 (Type I by the classifier).
    pub type1: Probe,
    /// Goodput of the load (received), Mbit/s; `None` for `idle`.
    pub bulk_mbps: Option<f64>,
    /// What the sending side held during the load (sampled once mid-way), see
    /// [`QueueSample`].
    pub queues: Option<QueueSample>,
    /// Counters of `mmsg` on gw1 that grew during the load (drops, marks).
    pub mmsg_counters: BTreeMap<String, u64>,
    /// `[qos] autorate`: gw1's shaped rate per WAN port at the end of the load, kbit/s (empty:
    /// autorate off).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub autorate_kbit: Vec<u64>,
}

/// What the sending gateway (gw1) held at one moment of a load.
#[derive(Debug, Clone, Default, Serialize)]
pub struct QueueSample {
    /// Established TCP subflows.
    pub subflows: usize,
    /// Σ Send-Q of the subflows (unacknowledged + unsent), bytes.
    pub subflow_send_q: u64,
    /// Σ `notsent` of the subflows, bytes.
    pub subflow_notsent: u64,
    /// Σ `unacked` × `mss` of the subflows (in flight), bytes.
    pub subflow_in_flight: u64,
    /// Largest smoothed RTT of a subflow, ms (path RTT + the WAN queue it sees).
    pub subflow_max_srtt_ms: f64,
    /// Σ Send-Q of the MPTCP sockets (`ss -M`), bytes.
    pub mptcp_send_q: u64,
    /// Packets the WAN emulator dropped (queue full) during the load.
    pub wan_queue_drops: u64,
    /// The bulk's connection on gw1 (outbound, Type II, the most bytes sent) in `mmsg status`:
    /// its send time budget, bytes (0: off).
    pub send_time_budget_bytes: u64,
    /// ... and the time that budget adds for gw1's own stalls, ms (`mpa::queue::stall`).
    pub stall_cover_ms: f64,
    /// Its pacer's phase (`None`: not paced, `--pacing` off) ...
    pub pacing_phase: Option<String>,
    /// ... and the rate it paces at, Mbit/s (0 in start-up).
    pub pacing_mbps: f64,
}

impl QueueSample {
    /// Fills the latency controls of the bulk's connection from gw1's `mmsg status --json`.
    pub fn read_status(&mut self, status: &serde_json::Value) {
        let conns = status["connections"].as_array().map(Vec::as_slice);
        let Some(c) = conns
            .unwrap_or_default()
            .iter()
            .filter(|c| {
                c["direction"].as_str() == Some("out") && c["class"].as_str() == Some("type2")
            })
            .max_by_key(|c| c["bytes_tx"].as_u64().unwrap_or(0))
        else {
            return;
        };
        self.send_time_budget_bytes = c["send_time_budget_bytes"].as_u64().unwrap_or(0);
        self.stall_cover_ms = c["stall_cover_us"].as_u64().unwrap_or(0) as f64 / 1e3;
        let pacing = &c["pacing"];
        self.pacing_phase = pacing["phase"].as_str().map(str::to_owned);
        self.pacing_mbps = pacing["rate_bytes_per_second"].as_u64().unwrap_or(0) as f64 * 8.0 / 1e6;
    }
}

/// 200 TCP flows through one path group.
#[derive(Debug, Clone, Serialize)]
pub struct Fairness {
    /// Flows that reported a goodput.
    pub flows: usize,
    /// Sum of their goodput, Mbit/s.
    pub total_mbps: f64,
    /// Jain's index of the per-flow goodput.
    pub jain_fairness: f64,
    /// Slowest flow's goodput over the fair share (total / flows).
    pub min_flow_share: f64,
    /// Growth of gw1's watched counters during the case (drops, marks; only those that grew).
    pub mmsg_counters: BTreeMap<String, u64>,
    /// What the sending gateway held mid-way.
    pub queues: Option<QueueSample>,
}

/// One variant: `mmsg` with one set of levers, every load, the fairness case.
#[derive(Debug, Clone, Serialize)]
pub struct VariantResult {
    /// Short name (`old`, `default`, `shaped`, ...).
    pub name: String,
    /// What it changes: the `mmsg run` flags and the config changes.
    pub describe: String,
    /// Median ping RTT through the idle tunnel, ms.
    pub idle_rtt_ms: f64,
    /// Ping RTT per load (median, p99, ...).
    pub loaded_rtt_ms: BTreeMap<String, Dist>,
    /// Request/response time per load.
    pub rr_ms: BTreeMap<String, Dist>,
    /// The Type I voice-like flow's RTT per load.
    pub type1_loaded_rtt_ms: BTreeMap<String, Dist>,
    /// The sparse (Type II) voice-like flow's RTT per load.
    pub sparse_rtt_ms: BTreeMap<String, Dist>,
    /// The sparse flow's loss per load, percent.
    pub sparse_loss_pct: BTreeMap<String, f64>,
    /// Goodput of each load, Mbit/s.
    pub bulk_mbps: BTreeMap<String, f64>,
    /// Aim of issue #16 per load: ping p99 ≤ path RTT + 10 ms.
    pub meets_aim: BTreeMap<String, bool>,
    /// The fairness case (absent with `--skip-fairness`).
    pub fairness: Option<Fairness>,
    /// `jain_fairness` of [`Self::fairness`].
    pub jain_fairness: Option<f64>,
    /// `min_flow_share` of [`Self::fairness`].
    pub min_flow_share: Option<f64>,
    /// Everything per load.
    pub loads: Vec<LoadResult>,
}

/// Slack on the path RTT of the aim, ms.
pub const AIM_SLACK_MS: f64 = 10.0;

impl VariantResult {
    /// Builds the keyed maps from the loads.
    pub fn new(
        name: &str,
        describe: String,
        path_rtt_ms: f64,
        loads: Vec<LoadResult>,
        fairness: Option<Fairness>,
    ) -> VariantResult {
        let mut v = VariantResult {
            name: name.to_owned(),
            describe,
            idle_rtt_ms: f64::NAN,
            loaded_rtt_ms: BTreeMap::new(),
            rr_ms: BTreeMap::new(),
            type1_loaded_rtt_ms: BTreeMap::new(),
            sparse_rtt_ms: BTreeMap::new(),
            sparse_loss_pct: BTreeMap::new(),
            bulk_mbps: BTreeMap::new(),
            meets_aim: BTreeMap::new(),
            jain_fairness: fairness.as_ref().map(|f| f.jain_fairness),
            min_flow_share: fairness.as_ref().map(|f| f.min_flow_share),
            fairness,
            loads: Vec::new(),
        };
        for l in &loads {
            let k = l.load.clone();
            if let Some(d) = l.ping.rtt_ms {
                if k == "idle" {
                    v.idle_rtt_ms = d.median;
                }
                v.meets_aim
                    .insert(k.clone(), d.p99 <= path_rtt_ms + AIM_SLACK_MS);
                v.loaded_rtt_ms.insert(k.clone(), d);
            } else {
                v.meets_aim.insert(k.clone(), false);
            }
            if let Some(d) = l.rr.rtt_ms {
                v.rr_ms.insert(k.clone(), d);
            }
            if let Some(d) = l.type1.rtt_ms {
                v.type1_loaded_rtt_ms.insert(k.clone(), d);
            }
            if let Some(d) = l.sparse.rtt_ms {
                v.sparse_rtt_ms.insert(k.clone(), d);
            }
            v.sparse_loss_pct.insert(k.clone(), l.sparse.loss_pct);
            if let Some(b) = l.bulk_mbps {
                v.bulk_mbps.insert(k, b);
            }
        }
        v.loads = loads;
        v
    }
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// UTC time of the run.
    pub when: String,
    /// Every uplink's rate (both ways), Mbit/s.
    pub rate_mbit: f64,
    /// One-way delay of a WAN path (half on each end's uplink), ms.
    pub delay_ms: f64,
    /// Measured seconds per load.
    pub secs: u32,
    /// The command that made it.
    pub command: String,
    /// Median ping RTT gw1 → gw2 over one raw uplink pair (1a → 2a), not through the tunnel.
    pub path_rtt_ms: f64,
    /// The first variant's figures again at the top level (the keys issue #16 names).
    pub idle_rtt_ms: f64,
    /// See [`VariantResult::loaded_rtt_ms`] (first variant).
    pub loaded_rtt_ms: BTreeMap<String, Dist>,
    /// See [`VariantResult::type1_loaded_rtt_ms`] (first variant).
    pub type1_loaded_rtt_ms: BTreeMap<String, Dist>,
    /// See [`VariantResult::bulk_mbps`] (first variant).
    pub bulk_mbps: BTreeMap<String, f64>,
    /// See [`VariantResult::sparse_loss_pct`] (first variant).
    pub sparse_loss_pct: BTreeMap<String, f64>,
    /// See [`VariantResult::jain_fairness`] (first variant).
    pub jain_fairness: Option<f64>,
    /// See [`VariantResult::min_flow_share`] (first variant).
    pub min_flow_share: Option<f64>,
    /// Every variant, in the order run.
    pub variants: Vec<VariantResult>,
}

impl Report {
    /// The report of `variants` (the first one's keys are copied to the top level).
    pub fn new(
        command: String,
        rate_mbit: f64,
        delay_ms: f64,
        secs: u32,
        path_rtt_ms: f64,
        variants: Vec<VariantResult>,
    ) -> Report {
        let first = variants.first().cloned();
        Report {
            when: crate::sh::utc_now(),
            rate_mbit,
            delay_ms,
            secs,
            command,
            path_rtt_ms,
            idle_rtt_ms: first.as_ref().map_or(f64::NAN, |v| v.idle_rtt_ms),
            loaded_rtt_ms: first
                .as_ref()
                .map(|v| v.loaded_rtt_ms.clone())
                .unwrap_or_default(),
            type1_loaded_rtt_ms: first
                .as_ref()
                .map(|v| v.type1_loaded_rtt_ms.clone())
                .unwrap_or_default(),
            bulk_mbps: first
                .as_ref()
                .map(|v| v.bulk_mbps.clone())
                .unwrap_or_default(),
            sparse_loss_pct: first
                .as_ref()
                .map(|v| v.sparse_loss_pct.clone())
                .unwrap_or_default(),
            jain_fairness: first.as_ref().and_then(|v| v.jain_fairness),
            min_flow_share: first.as_ref().and_then(|v| v.min_flow_share),
            variants,
        }
    }
}

fn dist_cell(d: Option<&Dist>) -> String {
    d.map_or("-".to_owned(), |d| format!("{:.1}/{:.1}", d.median, d.p99))
}

/// Prints one table per variant (RTTs as median/p99 ms).
pub fn print_table(r: &Report) {
    println!(
        "bench latency: uplinks {} Mbit/s, path one-way delay {} ms, path RTT {:.1} ms, aim p99 <= {:.1} ms",
        r.rate_mbit,
        r.delay_ms,
        r.path_rtt_ms,
        r.path_rtt_ms + AIM_SLACK_MS
    );
    for v in &r.variants {
        println!("\n[{}] {}", v.name, v.describe);
        println!(
            "{:<7} {:>15} {:>15} {:>15} {:>9} {:>15} {:>9} {:>5}",
            "load",
            "ping med/p99",
            "RR med/p99",
            "voice med/p99",
            "voice %",
            "TypeI med/p99",
            "Mbit/s",
            "aim"
        );
        for l in &v.loads {
            println!(
                "{:<7} {:>15} {:>15} {:>15} {:>9.2} {:>15} {:>9} {:>5}",
                l.load,
                dist_cell(l.ping.rtt_ms.as_ref()),
                dist_cell(l.rr.rtt_ms.as_ref()),
                dist_cell(l.sparse.rtt_ms.as_ref()),
                l.sparse.loss_pct,
                dist_cell(l.type1.rtt_ms.as_ref()),
                l.bulk_mbps.map_or("-".to_owned(), |b| format!("{b:.1}")),
                if v.meets_aim.get(&l.load).copied().unwrap_or(false) {
                    "yes"
                } else {
                    "no"
                },
            );
        }
        if let Some(f) = &v.fairness {
            println!(
                "fairness: {} flows, {:.1} Mbit/s, Jain {:.3}, min share {:.2}",
                f.flows, f.total_mbps, f.jain_fairness, f.min_flow_share
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let d = Dist::of(&v).unwrap();
        assert_eq!((d.p99, d.max, d.n), (99.0, 100.0, 100));
        assert_eq!(d.median, 50.5);
        assert_eq!(percentile_sorted(&[3.0], 99.0), Some(3.0));
        assert!(Dist::of(&[]).is_none());
    }

    #[test]
    fn jain_index() {
        assert_eq!(jain(&[2.0, 2.0, 2.0, 2.0]), Some(1.0));
        assert!((jain(&[1.0, 0.0, 0.0, 0.0]).unwrap() - 0.25).abs() < 1e-12);
        assert_eq!(jain(&[]), None);
    }
}
