//! WRR: weights of the path groups of each ordered branch pair, for the gateways' weighted round
//! robin (seed 001 §III-C: `w_j = c_j / Σ c_i`; seed 004 eq. 2 and Alg. 2).
//!
//! A source MPA spreads the flows (or frames) towards branch B over B's path groups; with WRR it
//! gives group g a share `w_g = c_g / Σ c` of them, where `c_g` is the group's estimated capacity.
//! Gateways want integers (seed 004 Alg. 2 decrements a counter per pick), so the shares are
//! apportioned to integer weights that sum exactly to [`Settings::scale`] (default 1000, per
//! mille).
//!
//! Pure core, no clock, no IO:
//! - [`apportion`]: capacities → integer weights (every group at least 1, so no group starves
//!   and its measurement can recover; the rest by largest remainder in exact integer arithmetic,
//!   ties by group id). Monotone: raising one group's capacity never lowers its weight.
//! - [`Wrr`]: the state per (A, B, G). Call order: [`Wrr::observe`] with the SDC's measured rate
//!   of each group (forward bit/s of its source entries at A, `sdc::GroupStats`) after every
//!   statistics sample; it smooths them (EWMA, [`Settings::alpha`]). Then [`Wrr::update`] with
//!   the current inventory and path groups: per pair it picks the basis, computes the weights and
//!   **publishes** them only when they changed by more than [`Settings::hysteresis`] of the scale
//!   for some group (or the groups or the basis changed), so gateways are not re-programmed for
//!   noise. [`Wrr::weights`] / [`Wrr::pair`] return what is published.
//!
//! Basis per pair ([`Basis`]), in order:
//! 0. `estimated`: every group of the pair has an available-capacity estimate from the source
//!    gateway's reports ([`crate::capacity`]), some above 0: `c_g` = the estimate, capped at the
//!    group's configured capacity in the same update (an operator's lower port capacity moves
//!    the weights at once, not at the next report).
//! 1. `measured`: every group of the pair has a smoothed measurement and their sum is at least
//!    [`Settings::min_measured_bps`]: `c_g` = smoothed rate. A group that carried nothing gets
//!    the minimum weight 1.
//! 2. `configured`: otherwise (nothing or not everything measured, idle pair): `c_g` = the
//!    group's configured capacity, the max-flow over its members' port capacities
//!    ([`crate::path_config::group_capacity`] without measurements).
//! 3. `equal`: when every configured capacity is 0 too.
//!
//! Measured throughput is what a group carried: it equals its capacity only while the pair's
//! traffic saturates it. Gateways should therefore keep probing every group (weight ≥ 1), and
//! the input can be replaced by available-bandwidth estimates without changing this module.
//! How the weights reach the gateways (the MPA's control channel) is the end-to-end issue; for
//! now they are served by the REST API (`GET /api/v1/weights`) and `ssc weights`.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use std::time::Instant;

use crate::capacity;
use crate::inventory::{BranchId, Inventory};
use crate::path_config::{group_capacity, Measurements};
use crate::path_group::{PathGroupId, PathGroups};
use crate::sdc::GroupStats;

/// Default sum of the integer weights of one pair (per mille).
pub const DEFAULT_SCALE: u32 = 1000;

/// Settings of the WRR weight computation.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Sum of the integer weights of one pair; at least the number of groups (16).
    pub scale: u32,
    /// EWMA weight of a new sample, in (0, 1]: `s ← α·x + (1 − α)·s`.
    pub alpha: f64,
    /// Published weights change only when some group's new weight differs from the published
    /// one by more than this fraction of `scale`.
    pub hysteresis: f64,
    /// Below this total smoothed rate (bit/s) a pair counts as idle: configured capacities.
    pub min_measured_bps: f64,
    /// The capacity estimate from the gateways' reports ([`crate::capacity`]).
    pub capacity: capacity::Settings,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            scale: DEFAULT_SCALE,
            alpha: 0.3,
            hysteresis: 0.05,
            min_measured_bps: 64_000.0,
            capacity: capacity::Settings::default(),
        }
    }
}

/// Where the capacities of a pair's weights came from.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// Available capacities estimated from the source gateway's reports ([`crate::capacity`]).
    Estimated,
    /// Smoothed measured rates (SDC).
    Measured,
    /// Configured capacities (max-flow over the members' port capacities).
    Configured,
    /// Equal weights (no capacity known).
    Equal,
}

/// The weight of one group.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct GroupWeight {
    /// G.
    pub group: u8,
    /// Integer weight; the weights of a pair sum to `scale`.
    pub weight: u32,
    /// Configured capacity, kbit/s.
    pub configured_kbps: u64,
    /// Smoothed measured rate, bit/s (`None`: not measured).
    pub measured_bps: Option<f64>,
    /// Available capacity estimated from the gateway's reports, bit/s (`None`: no report yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_bps: Option<f64>,
    /// The last report interval: carried rate and blocked fraction (`None`: no report yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub last_sample: Option<capacity::Sample>,
}

/// The published weights of one ordered pair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PairWeights {
    /// A.
    pub source: u8,
    /// B.
    pub destination: u8,
    /// Sum of the weights.
    pub scale: u32,
    /// Where the capacities came from.
    pub basis: Basis,
    /// One entry per path group of the pair, by group id.
    pub groups: Vec<GroupWeight>,
}

/// Integer weights for `capacities` (any unit) that sum to `scale`: each group gets 1, the
/// remaining `scale − n` are shared in proportion to the capacities by largest remainder (exact,
/// ties to the lower group id). All capacities 0: equal shares (remainder to the lower ids).
/// Empty input: empty output. If `scale < n`, every group gets 1 (the sum is then `n`).
pub fn apportion(capacities: &[(PathGroupId, u64)], scale: u32) -> BTreeMap<PathGroupId, u32> {
    let n = capacities.len();
    let mut out: BTreeMap<PathGroupId, u32> = capacities.iter().map(|(g, _)| (*g, 1)).collect();
    let Ok(n32) = u32::try_from(n) else {
        return out;
    };
    if n == 0 || scale <= n32 {
        return out;
    }
    let rest = u128::from(scale - n32);
    let total: u128 = capacities.iter().map(|(_, c)| u128::from(*c)).sum();
    // (group, floor share, remainder numerator); all remainders have the same denominator
    // (`total`, or `n` for equal shares), so comparing numerators compares the fractions.
    let shares: Vec<(PathGroupId, u128, u128)> = if total == 0 {
        let d = u128::from(n32);
        capacities
            .iter()
            .map(|(g, _)| (*g, rest / d, rest % d))
            .collect()
    } else {
        capacities
            .iter()
            .map(|(g, c)| {
                // rest < 2^32 and c < 2^64: the product fits u128.
                let q = rest * u128::from(*c);
                (*g, q / total, q % total)
            })
            .collect()
    };
    let given: u128 = shares.iter().map(|(_, f, _)| *f).sum();
    let mut left = rest.saturating_sub(given);
    let mut order: Vec<&(PathGroupId, u128, u128)> = shares.iter().collect();
    order.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    for (g, floor, _) in &shares {
        if let Some(w) = out.get_mut(g) {
            // floor ≤ rest < scale, so it always fits u32.
            *w += u32::try_from(*floor).unwrap_or(0);
        }
    }
    for (g, _, _) in order {
        if left == 0 {
            break;
        }
        if let Some(w) = out.get_mut(g) {
            *w += 1;
            left -= 1;
        }
    }
    out
}

/// Weights of one pair from its groups' configured capacities (kbit/s) and smoothed measured
/// rates (bit/s), with the basis rules of the module docs.
pub fn pair_weights(
    settings: &Settings,
    groups: &[GroupInput],
) -> (Basis, BTreeMap<PathGroupId, u32>) {
    let measured: Option<Vec<(PathGroupId, f64)>> = groups
        .iter()
        .map(|(g, _, m)| m.filter(|x| x.is_finite() && *x >= 0.0).map(|x| (*g, x)))
        .collect();
    if let Some(m) = measured {
        let sum: f64 = m.iter().map(|(_, x)| x).sum();
        if !m.is_empty() && sum >= settings.min_measured_bps && sum > 0.0 {
            // bit/s rounded to whole bits: far below u64::MAX for any link.
            let caps: Vec<(PathGroupId, u64)> =
                m.iter().map(|(g, x)| (*g, x.round() as u64)).collect();
            return (Basis::Measured, apportion(&caps, settings.scale));
        }
    }
    let caps: Vec<(PathGroupId, u64)> = groups.iter().map(|(g, c, _)| (*g, *c)).collect();
    let basis = if caps.iter().any(|(_, c)| *c > 0) {
        Basis::Configured
    } else {
        Basis::Equal
    };
    (basis, apportion(&caps, settings.scale))
}

/// Whether a weight moves across the line under which striped flows skip a group
/// (`mpa::scheduler::select_packet`: `STRIPE_MIN_SHARE_PER_MILLE` of the total) by more than a
/// fifth of that line beyond it. Such a move is published however small: with the 5 % hysteresis
/// a group at 52 ‰ could otherwise never be moved to 12 ‰ and would stay in every striped flow
/// while its paths are flooded. The margin keeps noise around the line from re-publishing.
fn crosses_floor(old: u32, fresh: u32, scale: u32) -> bool {
    // Per-mille values times the scale: exact integers.
    let floor = u64::from(scale) * mpa::scheduler::STRIPE_MIN_SHARE_PER_MILLE;
    let margin = floor / 5;
    let (o, f) = (u64::from(old) * 1000, u64::from(fresh) * 1000);
    (o >= floor && f + margin < floor) || (o < floor && f >= floor + margin)
}

/// One group's inputs: id, configured capacity (kbit/s), smoothed measured rate (bit/s).
pub type GroupInput = (PathGroupId, u64, Option<f64>);

/// The WRR state: smoothed rates per group and the published weights per pair.
#[derive(Clone, Debug, Default)]
pub struct Wrr {
    settings: Settings,
    smoothed: BTreeMap<(BranchId, BranchId, PathGroupId), f64>,
    /// Capacity estimates from the gateways' reports.
    estimators: BTreeMap<(BranchId, BranchId, PathGroupId), capacity::Estimator>,
    /// Configured capacity (kbit/s) of each group at the last [`Wrr::update`]: the estimates'
    /// recovery target.
    configured: BTreeMap<(BranchId, BranchId, PathGroupId), u64>,
    published: BTreeMap<(BranchId, BranchId), PairWeights>,
}

impl Wrr {
    /// No measurements, nothing published.
    pub fn new(settings: Settings) -> Self {
        Self {
            settings,
            smoothed: BTreeMap::new(),
            estimators: BTreeMap::new(),
            configured: BTreeMap::new(),
            published: BTreeMap::new(),
        }
    }

    /// One report of the source gateway `a` about its group (a, b, g) at `at`: the cumulative
    /// bytes its connections wrote, microseconds they were blocked, and the rate their windows
    /// allow now ([`mpa::gwchan::GroupReport`]). Updates the group's capacity estimate; the
    /// weights follow at the next [`Wrr::update`]. Returns the new estimate (bit/s).
    pub fn report(
        &mut self,
        key: (BranchId, BranchId, PathGroupId),
        at: Instant,
        counters: (u64, u64, u64),
        transport: capacity::Transport,
    ) -> Option<f64> {
        let configured = self.configured.get(&key).map(|kbps| *kbps as f64 * 1000.0);
        // Striped flows skip it (mpa::scheduler::select_packet): its measurements go stale.
        let skipped = self.published.get(&(key.0, key.1)).is_some_and(|p| {
            let total: u64 = p.groups.iter().map(|g| u64::from(g.weight)).sum();
            p.groups.iter().any(|g| {
                g.group == key.2.get()
                    && u64::from(g.weight) * 1000
                        < total * mpa::scheduler::STRIPE_MIN_SHARE_PER_MILLE
            })
        });
        self.estimators.entry(key).or_default().report(
            &self.settings.capacity,
            at,
            counters,
            transport,
            configured,
            skipped,
        )
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// One measured rate (bit/s) of group (a, b, g). The first sample is taken as is, later
    /// ones are smoothed; negative or non-finite rates are ignored.
    pub fn observe(&mut self, a: BranchId, b: BranchId, g: PathGroupId, bits_per_s: f64) {
        if !bits_per_s.is_finite() || bits_per_s < 0.0 {
            return;
        }
        let alpha = self.settings.alpha.clamp(f64::MIN_POSITIVE, 1.0);
        self.smoothed
            .entry((a, b, g))
            .and_modify(|s| *s = alpha * bits_per_s + (1.0 - alpha) * *s)
            .or_insert(bits_per_s);
    }

    /// One statistics sample of the SDC (`ssc run` calls it every statistics interval): each
    /// path group's forward rate at its source → [`Wrr::observe`]. Returns whether any group was
    /// seen, i.e. whether the weights may have moved and the gateway channel should look.
    pub fn observe_stats(&mut self, groups: &[GroupStats]) -> bool {
        for g in groups {
            if let (Ok(a), Ok(b), Ok(id)) = (
                BranchId::new(g.source),
                BranchId::new(g.destination),
                PathGroupId::new(g.group),
            ) {
                self.observe(a, b, id, g.traffic.forward_bits_per_s);
            }
        }
        !groups.is_empty()
    }

    /// Recomputes every pair of `groups` and publishes what changed beyond the hysteresis.
    /// Forgets groups and pairs that no longer exist. Returns the pairs whose published weights
    /// changed.
    pub fn update(
        &mut self,
        inventory: &Inventory,
        groups: &PathGroups,
    ) -> Vec<(BranchId, BranchId)> {
        let mut pairs: BTreeMap<(BranchId, BranchId), Vec<GroupInput>> = BTreeMap::new();
        let none = Measurements::new();
        self.configured.clear();
        for g in groups.groups() {
            let configured = group_capacity(inventory, &none, g.members.values());
            let key = (g.source, g.destination, g.id);
            self.configured.insert(key, configured);
            let measured = self.smoothed.get(&key).copied();
            pairs
                .entry((g.source, g.destination))
                .or_default()
                .push((g.id, configured, measured));
        }
        self.smoothed
            .retain(|(a, b, g), _| groups.group(*a, *b, *g).is_some());
        self.estimators
            .retain(|(a, b, g), _| groups.group(*a, *b, *g).is_some());
        self.published.retain(|k, _| pairs.contains_key(k));
        let mut changed = Vec::new();
        let limit = self.settings.hysteresis.max(0.0) * f64::from(self.settings.scale);
        for ((a, b), list) in pairs {
            let estimated: Option<Vec<(PathGroupId, u64)>> = list
                .iter()
                .map(|(g, configured_kbps, _)| {
                    self.estimators
                        .get(&(a, b, *g))
                        .and_then(capacity::Estimator::estimate)
                        .filter(|x| x.is_finite() && *x >= 0.0)
                        // The configured capacity caps the estimate at once: an operator who
                        // lowers a port's capacity sees the weights follow now, not at the
                        // group's next report (the estimator applies the same cap then).
                        .map(|x| match *configured_kbps {
                            0 => x,
                            c => x.min(c as f64 * 1000.0),
                        })
                        // bit/s rounded to whole bits: far below u64::MAX for any link.
                        .map(|x| (*g, x.round() as u64))
                })
                .collect();
            let (basis, weights) = match estimated {
                Some(caps) if !caps.is_empty() && caps.iter().any(|(_, c)| *c > 0) => {
                    (Basis::Estimated, apportion(&caps, self.settings.scale))
                }
                _ => pair_weights(&self.settings, &list),
            };
            let est = |g: &PathGroupId| self.estimators.get(&(a, b, *g));
            let fresh = PairWeights {
                source: a.get(),
                destination: b.get(),
                scale: self.settings.scale,
                basis,
                groups: list
                    .iter()
                    .map(|(g, c, m)| GroupWeight {
                        group: g.get(),
                        weight: weights.get(g).copied().unwrap_or(0),
                        configured_kbps: *c,
                        measured_bps: *m,
                        estimated_bps: est(g).and_then(capacity::Estimator::estimate),
                        last_sample: est(g).and_then(capacity::Estimator::sample),
                    })
                    .collect(),
            };
            let publish = match self.published.get(&(a, b)) {
                None => true,
                Some(old) => {
                    old.basis != fresh.basis
                        || old.groups.len() != fresh.groups.len()
                        || old.groups.iter().zip(&fresh.groups).any(|(o, f)| {
                            o.group != f.group
                                || f64::from(o.weight.abs_diff(f.weight)) > limit
                                || crosses_floor(o.weight, f.weight, self.settings.scale)
                        })
                }
            };
            if publish {
                self.published.insert((a, b), fresh);
                changed.push((a, b));
            } else if let Some(old) = self.published.get_mut(&(a, b)) {
                // Keep the weights, refresh the inputs shown beside them.
                for (o, f) in old.groups.iter_mut().zip(&fresh.groups) {
                    o.configured_kbps = f.configured_kbps;
                    o.measured_bps = f.measured_bps;
                    o.estimated_bps = f.estimated_bps;
                    o.last_sample = f.last_sample;
                }
            }
        }
        changed
    }

    /// The published weights of every pair, by (A, B).
    pub fn weights(&self) -> impl Iterator<Item = &PairWeights> + '_ {
        self.published.values()
    }

    /// The published weights of one pair.
    pub fn pair(&self, a: BranchId, b: BranchId) -> Option<&PairWeights> {
        self.published.get(&(a, b))
    }

    /// What the reports say of each group that has an estimator (for
    /// `adaptive::Adaptive::step`): when its last report came, the last interval, its
    /// estimated capacity, and its configured capacity at the last [`Wrr::update`].
    pub fn observations(&self) -> BTreeMap<(BranchId, BranchId, PathGroupId), Observation> {
        self.estimators
            .iter()
            .map(|(k, e)| {
                (
                    *k,
                    Observation {
                        at: e.reported_at(),
                        sample: e.sample(),
                        estimated_bps: e.estimate(),
                        configured_bps: self.configured.get(k).map(|c| *c as f64 * 1000.0),
                    },
                )
            })
            .collect()
    }
}

/// One group as the gateways' reports see it ([`Wrr::observations`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Observation {
    /// When its last report arrived.
    pub at: Option<Instant>,
    /// The last complete report interval.
    pub sample: Option<capacity::Sample>,
    /// Estimated available capacity, bit/s.
    pub estimated_bps: Option<f64>,
    /// Configured capacity (max-flow of its members' ports), bit/s.
    pub configured_bps: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(n: u8) -> PathGroupId {
        PathGroupId::new(n).unwrap()
    }

    fn caps(v: &[u64]) -> Vec<(PathGroupId, u64)> {
        v.iter()
            .enumerate()
            .map(|(i, c)| (g(u8::try_from(i).unwrap()), *c))
            .collect()
    }

    fn ws(m: &BTreeMap<PathGroupId, u32>) -> Vec<u32> {
        m.values().copied().collect()
    }

    #[test]
    fn proportional_to_capacity() {
        // w_j = c_j / Σc (seed 001 §III-C): 1:2:3:4 of 1000: 1 each + 996·c/100 = 99.6,
        // 199.2, 298.8, 398.4; the two largest remainders (.8, .6) get the 2 left over.
        let w = apportion(&caps(&[10, 20, 30, 40]), 1000);
        assert_eq!(ws(&w), vec![101, 200, 300, 399]);
        assert_eq!(ws(&w).iter().sum::<u32>(), 1000);
        // Seed 004 eq. 2 in percent.
        assert_eq!(ws(&apportion(&caps(&[5, 15]), 100)), vec![26, 74]);
    }

    #[test]
    fn zero_and_degenerate_inputs() {
        assert!(apportion(&[], 1000).is_empty());
        assert_eq!(ws(&apportion(&caps(&[0, 0, 0]), 1000)), vec![334, 333, 333]);
        // A dead group keeps weight 1 (it is probed; its measurement can recover).
        assert_eq!(ws(&apportion(&caps(&[0, 100]), 1000)), vec![1, 999]);
        // Scale smaller than the number of groups: 1 each.
        assert_eq!(ws(&apportion(&caps(&[5, 5, 5]), 2)), vec![1, 1, 1]);
        // Huge capacities do not overflow.
        let w = apportion(&caps(&[u64::MAX, u64::MAX, 1]), 1000);
        assert_eq!(ws(&w), vec![500, 499, 1]);
    }

    #[test]
    fn basis_falls_back() {
        let s = Settings::default();
        // Nothing measured: configured capacities.
        let (b, w) = pair_weights(&s, &[(g(0), 40_000, None), (g(1), 80_000, None)]);
        assert_eq!(b, Basis::Configured);
        assert_eq!(ws(&w), vec![334, 666]);
        // One group unmeasured: still configured.
        let (b, _) = pair_weights(&s, &[(g(0), 40_000, Some(1e6)), (g(1), 80_000, None)]);
        assert_eq!(b, Basis::Configured);
        // Measured but idle (below the minimum): configured.
        let (b, _) = pair_weights(&s, &[(g(0), 40_000, Some(10.0)), (g(1), 80_000, Some(0.0))]);
        assert_eq!(b, Basis::Configured);
        // Measured: the measured rates win over the configuration.
        let (b, w) = pair_weights(&s, &[(g(0), 40_000, Some(3e6)), (g(1), 80_000, Some(1e6))]);
        assert_eq!(b, Basis::Measured);
        assert_eq!(ws(&w), vec![750, 250]);
        // NaN is no measurement.
        let (b, _) = pair_weights(&s, &[(g(0), 1, Some(f64::NAN))]);
        assert_eq!(b, Basis::Configured);
        // Nothing known at all: equal.
        let (b, w) = pair_weights(&s, &[(g(0), 0, None), (g(1), 0, None)]);
        assert_eq!(b, Basis::Equal);
        assert_eq!(ws(&w), vec![500, 500]);
    }

    #[test]
    fn ewma_smooths_and_ignores_garbage() {
        let mut w = Wrr::new(Settings {
            alpha: 0.5,
            ..Settings::default()
        });
        let (a, b) = (BranchId::new(1).unwrap(), BranchId::new(2).unwrap());
        w.observe(a, b, g(0), 100.0);
        w.observe(a, b, g(0), 200.0);
        w.observe(a, b, g(0), f64::NAN);
        w.observe(a, b, g(0), -5.0);
        assert_eq!(w.smoothed.get(&(a, b, g(0))), Some(&150.0));
    }
}
