//! `[internet]`: per-flow load balancing of external traffic over the uplinks.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use mms_types::WanKind;

use super::problems::Problems;
use super::wan::{WanPort, MAX_WAN_RATE_MBIT};

/// Longest `internet.measure_interval_ms` accepted (a minute).
pub const MAX_MEASURE_INTERVAL_MS: u64 = 60_000;
/// Shortest `internet.measure_interval_ms` accepted: below 100 ms the counter deltas of a
/// 10 Mbit/s uplink are a few packets and the estimate is noise.
pub const MIN_MEASURE_INTERVAL_MS: u64 = 100;

/// `[internet]`: how new external flows from the LAN choose their uplink.
///
/// Off by default: with it, `mmsg` owns the gateway's NAT for LAN → internet traffic (an
/// nftables table, `fwmark` rules) and would fight whatever NAT the operator already runs;
/// without it, external traffic follows the main routing table as before.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct InternetConfig {
    /// `off`, `single`, `rr`, `mbw` or `wrr`. Default: `off`.
    #[serde(default)]
    pub policy: UplinkPolicy,
    /// The WAN ports (indices into `wan`) to balance over. Default: every port of kind
    /// `internet`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uplinks: Option<Vec<usize>>,
    /// Capacity of each entry of the uplinks, Mbit/s, in the same order. Default per uplink:
    /// `wan[k].rate_mbit`; `mbw` and `wrr` need one or the other for every uplink.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_mbit: Option<Vec<u32>>,
    /// `single`: the WAN port (index into `wan`) that takes every flow. Default: the first uplink.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub single: Option<usize>,
    /// How often the uplinks' interface counters are sampled for the available-bandwidth
    /// estimate, ms. Default: 1000.
    #[serde(default = "default_measure_interval_ms")]
    pub measure_interval_ms: u64,
}

impl Default for InternetConfig {
    fn default() -> Self {
        InternetConfig {
            policy: UplinkPolicy::Off,
            uplinks: None,
            capacity_mbit: None,
            single: None,
            measure_interval_ms: default_measure_interval_ms(),
        }
    }
}

fn default_measure_interval_ms() -> u64 {
    1_000
}

/// `internet.policy`: how a new external flow picks its uplink (seed 004 §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum UplinkPolicy {
    /// Nothing installed: external traffic follows the main routing table.
    #[default]
    Off,
    /// Every flow on one uplink (`internet.single`).
    Single,
    /// Round robin (§5.1.1).
    Rr,
    /// The uplink with the most available bandwidth (§5.1.2 i, eq. 1).
    Mbw,
    /// Weighted round robin on available bandwidth (§5.1.2 ii, eq. 2, Alg. 2).
    Wrr,
}

impl fmt::Display for UplinkPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            UplinkPolicy::Off => "off",
            UplinkPolicy::Single => "single",
            UplinkPolicy::Rr => "rr",
            UplinkPolicy::Mbw => "mbw",
            UplinkPolicy::Wrr => "wrr",
        })
    }
}

impl InternetConfig {
    /// The WAN port indices balanced over (explicit, else every `internet` port of `wan`).
    pub(super) fn uplinks(&self, wan: &[WanPort]) -> Vec<usize> {
        match &self.uplinks {
            Some(u) => u.clone(),
            None => wan
                .iter()
                .enumerate()
                .filter(|(_, w)| w.kind == WanKind::Internet)
                .map(|(k, _)| k)
                .collect(),
        }
    }

    /// The capacity of each of [`InternetConfig::uplinks`], Mbit/s (`None` where neither
    /// `capacity_mbit` nor `wan[k].rate_mbit` gives one).
    pub(super) fn capacities_mbit(&self, wan: &[WanPort]) -> Vec<Option<u32>> {
        self.uplinks(wan)
            .iter()
            .enumerate()
            .map(|(i, &k)| {
                self.capacity_mbit
                    .as_ref()
                    .and_then(|c| c.get(i).copied())
                    .or_else(|| wan.get(k).and_then(|w| w.rate_mbit))
            })
            .collect()
    }

    /// With a policy other than `off`: uplinks, capacities, `single` and the measure interval.
    pub(super) fn validate(&self, p: &mut Problems, wan: &[WanPort]) {
        let i = self;
        if i.policy == UplinkPolicy::Off {
            return;
        }
        let uplinks = self.uplinks(wan);
        if uplinks.is_empty() {
            p.push(
                "internet.uplinks",
                "no uplinks (no WAN port of kind internet)".into(),
            );
        }
        let mut seen = BTreeSet::new();
        for (n, k) in uplinks.iter().enumerate() {
            if *k >= wan.len() {
                p.push(
                    format!("internet.uplinks[{n}]"),
                    format!("{k} is not a WAN port (0..{})", wan.len()),
                );
            }
            if !seen.insert(*k) {
                p.push(
                    format!("internet.uplinks[{n}]"),
                    format!("{k} is listed twice"),
                );
            }
        }
        if let Some(c) = &i.capacity_mbit {
            if c.len() != uplinks.len() {
                p.push(
                    "internet.capacity_mbit",
                    format!("{} entries for {} uplinks", c.len(), uplinks.len()),
                );
            }
            for (n, m) in c.iter().enumerate() {
                if !(1..=MAX_WAN_RATE_MBIT).contains(m) {
                    p.push(
                        format!("internet.capacity_mbit[{n}]"),
                        format!("{m} is out of range 1..={MAX_WAN_RATE_MBIT}"),
                    );
                }
            }
        }
        if matches!(i.policy, UplinkPolicy::Mbw | UplinkPolicy::Wrr) {
            for (n, c) in self.capacities_mbit(wan).iter().enumerate() {
                if c.is_none() {
                    p.push(
                        "internet.capacity_mbit",
                        format!(
                            "policy {} needs a capacity for uplink {n} (capacity_mbit or wan[k].rate_mbit)",
                            i.policy
                        ),
                    );
                }
            }
        }
        if let Some(s) = i.single {
            if !uplinks.contains(&s) {
                p.push(
                    "internet.single",
                    format!("{s} is not one of the uplinks {uplinks:?}"),
                );
            }
        }
        if !(MIN_MEASURE_INTERVAL_MS..=MAX_MEASURE_INTERVAL_MS).contains(&i.measure_interval_ms) {
            p.push(
                "internet.measure_interval_ms",
                format!(
                    "{} is out of range {MIN_MEASURE_INTERVAL_MS}..={MAX_MEASURE_INTERVAL_MS}",
                    i.measure_interval_ms
                ),
            );
        }
    }
}
