//! `[queue]` (the per-connection queues' CoDel) and `[qos]` (WAN egress shaping).

use serde::{Deserialize, Serialize};

use super::problems::Problems;

/// `[qos]`: the egress qdisc on every WAN port that has a `rate_mbit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct QosConfig {
    /// Install the qdisc. Default: true.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Shape at this percentage of `wan[k].rate_mbit`, so that our queue, not the modem's, is
    /// the bottleneck. Default: 95.
    #[serde(default = "default_shaping_percent")]
    pub shaping_percent: u8,
    /// Shape every WAN port, and let the rate follow what the uplink carries
    /// ([`crate::autorate`]): from `rate_mbit` × `shaping_percent` where the port has one, else
    /// from [`crate::autorate::DEFAULT_MAX_KBIT`], down while the port's traffic builds a queue in
    /// the WAN, back up while the shaper holds it back. Default: false.
    #[serde(default)]
    pub autorate: bool,
    /// The sparse lane (`mpa::gateway::sparse`): a Type II flow that sends at most this many
    /// kbit/s rides its path group's Type I connection (no wait behind the bulk's socket queue;
    /// band 0 of a shaped port) until it sends more; 0: off. Default (unset):
    /// [`DEFAULT_SPARSE_LANE_KBIT`] on a gateway that shapes a WAN port (`enabled` and a
    /// `rate_mbit` or `autorate`), else off ([`super::Config::sparse_lane_kbit`]): behind a modem's queue the
    /// lane gains a few ms on alike uplinks and costs tail latency on unequal ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sparse_lane_kbit: Option<u32>,
    /// The most all flows in the sparse lane carry together, kbit/s (the gateway's, towards
    /// every branch; flows beyond it leave the lane); 0: off. Default: 2048.
    #[serde(default = "default_sparse_lane_total_kbit")]
    pub sparse_lane_total_kbit: u32,
}

impl Default for QosConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            shaping_percent: default_shaping_percent(),
            autorate: false,
            sparse_lane_kbit: None,
            sparse_lane_total_kbit: default_sparse_lane_total_kbit(),
        }
    }
}

fn default_shaping_percent() -> u8 {
    95
}
fn default_sparse_lane_total_kbit() -> u32 {
    2048
}

/// The per-connection queues' AQM, applied per inner flow (see [`crate::queue`]: FQ-CoDel; the
/// flow buckets, quantum and bounds are constants there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct QueueConfig {
    /// CoDel target sojourn time, per flow. Default: 5 (RFC 8289).
    #[serde(default = "default_codel_target_ms")]
    pub codel_target_ms: u64,
    /// CoDel interval, about one worst-case RTT. Default: 100 (RFC 8289).
    #[serde(default = "default_codel_interval_ms")]
    pub codel_interval_ms: u64,
    /// CE-mark ECN-capable inner packets instead of dropping them. Default: true.
    #[serde(default = "default_true")]
    pub ecn: bool,
}

impl Default for QueueConfig {
    fn default() -> Self {
        Self {
            codel_target_ms: default_codel_target_ms(),
            codel_interval_ms: default_codel_interval_ms(),
            ecn: true,
        }
    }
}

fn default_codel_target_ms() -> u64 {
    5
}
fn default_codel_interval_ms() -> u64 {
    100
}
fn default_true() -> bool {
    true
}

/// The largest per-flow rate of the sparse lane, kbit/s: a "sparse" flow above it is a bulk one.
pub const MAX_SPARSE_LANE_KBIT: u32 = 10_000;
/// The sparse lane's per-flow rate on a gateway that shapes a WAN port, when the config does
/// not set one, kbit/s.
pub const DEFAULT_SPARSE_LANE_KBIT: u32 = 256;

impl QosConfig {
    /// `qos.shaping_percent` in 1..=100.
    pub(super) fn validate(&self, p: &mut Problems) {
        if !(1..=100).contains(&self.shaping_percent) {
            p.push(
                "qos.shaping_percent",
                format!("{} is out of range 1..=100", self.shaping_percent),
            );
        }
        let lane = self.sparse_lane_kbit.unwrap_or(DEFAULT_SPARSE_LANE_KBIT);
        if lane > MAX_SPARSE_LANE_KBIT {
            p.push(
                "qos.sparse_lane_kbit",
                format!("{lane} is out of range 0..={MAX_SPARSE_LANE_KBIT}"),
            );
        }
        if lane > 0 && self.sparse_lane_total_kbit > 0 && self.sparse_lane_total_kbit < lane {
            p.push(
                "qos.sparse_lane_total_kbit",
                format!(
                    "{} is below qos.sparse_lane_kbit ({lane}): one flow could never use its rate",
                    self.sparse_lane_total_kbit
                ),
            );
        }
    }
}

impl QueueConfig {
    /// The CoDel target below the interval, the interval at most 10 s.
    pub(super) fn validate(&self, p: &mut Problems) {
        let q = self;
        if q.codel_target_ms == 0 || q.codel_target_ms >= q.codel_interval_ms {
            p.push(
                "queue.codel_target_ms",
                format!(
                    "{} must be above 0 and below queue.codel_interval_ms ({})",
                    q.codel_target_ms, q.codel_interval_ms
                ),
            );
        }
        if q.codel_interval_ms > 10_000 {
            p.push(
                "queue.codel_interval_ms",
                format!("{} is out of range 1..=10000", q.codel_interval_ms),
            );
        }
    }
}
