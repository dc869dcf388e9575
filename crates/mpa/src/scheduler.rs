//! New-flow → path-group selection (seed 000 §III-A: "round robin or ... the average throughput of a
//! path group"; seed 001 §III-C and seed 004 Alg. 2: weighted round robin with w_j = c_j / Σ c_i).
//!
//! A [`Scheduler`] holds the [`PathGroups`] towards one remote branch and the state of its
//! [`SelectionPolicy`]:
//! - `rr`: the next group that is up, in id order after the last one chosen.
//! - `wrr`: smooth weighted round robin (nginx `ngx_http_upstream_get_peer`) on configured weights:
//!   each pick adds every up group's weight to its `current`, picks the largest `current` (ties: lowest
//!   id) and subtracts the total from it. Over any Σw consecutive picks each group gets exactly its
//!   weight, interleaved rather than in bursts.
//! - `throughput`: the same smooth WRR on the groups' measured throughput (seed 001 w_j ∝ c_j), falling
//!   back to the configured weights until every up group has a measurement.
//!
//! The scheduler only chooses for *new* flows (and flows whose group failed); the
//! [`crate::flow_table`] keeps every other flow where it is. Deterministic: no RNG, no clock.

use std::hash::{DefaultHasher, Hash, Hasher};

use crate::config::SelectionPolicy;
use crate::path_group::{PathGroups, MAX_PATH_GROUPS};
use crate::PathGroupId;

/// Rates are turned into WRR weights in these units (bytes per second), so 16 groups of up to
/// 2^32 units each cannot overflow the i64 sums.
const RATE_UNIT_BYTES_PER_S: u64 = 1_000;

/// Path-group selection towards one remote branch.
#[derive(Debug, Clone)]
pub struct Scheduler {
    groups: PathGroups,
    policy: SelectionPolicy,
    /// RR: the last group chosen.
    last: Option<PathGroupId>,
    /// Smooth WRR: `current` weight per group id.
    current: [i64; MAX_PATH_GROUPS],
    /// Smooth WRR credits of per-packet striping ([`Scheduler::select_packet`]), apart from the
    /// new-flow credits so striping does not skew which group new flows get.
    stripe_current: [i64; MAX_PATH_GROUPS],
}

impl Scheduler {
    /// A scheduler over `groups` with `policy`.
    pub fn new(groups: PathGroups, policy: SelectionPolicy) -> Self {
        Scheduler {
            groups,
            policy,
            last: None,
            current: [0; MAX_PATH_GROUPS],
            stripe_current: [0; MAX_PATH_GROUPS],
        }
    }

    /// The groups (read-only).
    pub fn groups(&self) -> &PathGroups {
        &self.groups
    }

    /// Whether `group` exists and is up.
    pub fn is_up(&self, group: PathGroupId) -> bool {
        self.groups.is_up(group)
    }

    /// Marks a group up or down; returns whether its state changed. Flows on a group that went down
    /// move on their next packet ([`crate::flow_table::FlowTable::assign`]); no other flow moves.
    pub fn set_up(&mut self, group: PathGroupId, up: bool) -> bool {
        let changed = self.groups.set_up(group, up);
        if changed {
            // A group coming back starts from zero credit instead of the stale value it had when it
            // went down (which could give it a burst of new flows).
            if let Some(c) = self.current.get_mut(usize::from(group.get())) {
                *c = 0;
            }
            if let Some(c) = self.stripe_current.get_mut(usize::from(group.get())) {
                *c = 0;
            }
        }
        changed
    }

    /// Records a group's measured round trip in µs (0: unknown), for
    /// [`Scheduler::select_low_delay`].
    pub fn set_delay(&mut self, group: PathGroupId, delay_us: u32) -> bool {
        self.groups.set_delay(group, delay_us)
    }

    /// The group for a flow that wants the lowest delay (the reverse of a striped flow: a TCP
    /// flow's ACKs, see [`crate::flow_table::FlowTable::prefer_low_delay`]), now on `current`:
    /// the up group with the lowest measured delay, unless `current` is up, measured and within
    /// [`steer_margin_us`] of it (so a flow does not flap between groups whose delays are
    /// alike). Without any measurement: `current` if it is up, else `None` (the caller falls
    /// back to [`Scheduler::select`]). Deterministic; changes no credits.
    pub fn select_low_delay(&self, current: Option<PathGroupId>) -> Option<PathGroupId> {
        let best = self
            .groups
            .iter()
            .filter(|g| g.up && g.delay_us > 0)
            .min_by_key(|g| (g.delay_us, g.id));
        let cur = current.and_then(|id| self.groups.get(id)).filter(|g| g.up);
        match (best, cur) {
            (None, c) => c.map(|g| g.id),
            (Some(b), Some(c))
                if c.delay_us > 0
                    && c.delay_us <= b.delay_us.saturating_add(steer_margin_us(b.delay_us)) =>
            {
                Some(c.id)
            }
            (Some(b), _) => Some(b.id),
        }
    }

    /// Records a group's measured throughput (used by the `throughput` policy).
    pub fn set_rate(&mut self, group: PathGroupId, bytes_per_s: u64) -> bool {
        self.groups.set_rate(group, bytes_per_s)
    }

    /// Changes a group's configured weight (new flows only; the flow table keeps every existing
    /// flow where it is). The smooth WRR credits are kept, so the new ratio takes over within
    /// one round. Returns `false` for an unknown group.
    pub fn set_weight(&mut self, group: PathGroupId, weight: u32) -> bool {
        self.groups.set_weight(group, weight)
    }

    /// Applies a reloaded group list and policy ([`PathGroups::reconfigure`]): groups that stay
    /// keep their up state, rate and WRR credits, so no flow moves; removed groups lose their
    /// credits. Returns the ids removed.
    pub fn reconfigure(
        &mut self,
        config: &[crate::config::PathGroupConfig],
        policy: SelectionPolicy,
    ) -> Vec<PathGroupId> {
        let removed = self.groups.reconfigure(config);
        for id in &removed {
            for credits in [&mut self.current, &mut self.stripe_current] {
                if let Some(c) = credits.get_mut(usize::from(id.get())) {
                    *c = 0;
                }
            }
            if self.last == Some(*id) {
                self.last = None;
            }
        }
        self.policy = policy;
        removed
    }

    /// Picks the group for a new flow; `None` when no group is up.
    pub fn select(&mut self) -> Option<PathGroupId> {
        let chosen = match self.policy {
            SelectionPolicy::Rr => self.select_rr(),
            SelectionPolicy::Wrr => self.select_swrr(false),
            SelectionPolicy::Throughput => {
                let measured = self
                    .groups
                    .iter()
                    .filter(|g| g.up)
                    .all(|g| g.rate_bytes_per_s >= RATE_UNIT_BYTES_PER_S);
                self.select_swrr(measured)
            }
        }?;
        self.last = Some(chosen);
        Some(chosen)
    }

    /// The group for the next packet of a striped flow (seed 001 §III-C: WRR with weights ∝
    /// capacity): smooth WRR over the up groups on their configured weights, which the controller
    /// keeps proportional to estimated capacity (`controller::wrr`, `controller::capacity`).
    /// Over any Σw consecutive packets each group carries exactly its weight, interleaved.
    /// Groups below [`STRIPE_MIN_SHARE_PER_MILLE`] (5 %) of the up groups' total weight get none.
    /// `None` when no group is up.
    pub fn select_packet(&mut self) -> Option<PathGroupId> {
        let total: u64 = self
            .groups
            .iter()
            .filter(|g| g.up)
            .map(|g| u64::from(g.weight))
            .sum();
        let floor = |w: u32| u64::from(w) * 1000 >= total * STRIPE_MIN_SHARE_PER_MILLE;
        let mut credits = self.stripe_current;
        let chosen = swrr_filtered(&self.groups, &mut credits, false, |g| floor(g.weight));
        self.stripe_current = credits;
        chosen
    }

    /// A group for a flow the flow table cannot remember (it is full): a stable hash of the flow over
    /// the groups that are up, so the flow's packets stay on one group while the up set is stable.
    pub fn select_by_hash(&self, flow: &impl Hash) -> Option<PathGroupId> {
        let n = self.groups.up_count();
        if n == 0 {
            return None;
        }
        let mut h = DefaultHasher::new();
        flow.hash(&mut h);
        let k = usize::try_from(h.finish() % n as u64).unwrap_or(0);
        self.groups.iter().filter(|g| g.up).nth(k).map(|g| g.id)
    }

    fn select_rr(&self) -> Option<PathGroupId> {
        let up = || self.groups.iter().filter(|g| g.up).map(|g| g.id);
        let first = up().next()?;
        match self.last {
            Some(last) => Some(up().find(|id| *id > last).unwrap_or(first)),
            None => Some(first),
        }
    }

    fn select_swrr(&mut self, by_rate: bool) -> Option<PathGroupId> {
        swrr(&self.groups, &mut self.current, by_rate)
    }
}

/// A low-delay flow moves off its group only when another is lower by more than this (µs): a
/// quarter of the lower delay, at least 2 ms. Smoothed RTTs of alike paths differ by a few ms
/// with their queues; paths worth moving to differ by tens (seed 001's MDI paths: 10 vs 100+ ms).
pub fn steer_margin_us(lowest_us: u32) -> u32 {
    (lowest_us / 4).max(2_000)
}

/// A striped flow's packets skip groups whose weight is below this share (per mille) of the up
/// groups' total. The controller keeps every group at weight ≥ 1 so new *flows* keep probing
/// it, but one packet of a striped flow on a flooded path (queued for seconds) stalls every
/// packet behind it in the receiver's resequencer: seed 001 §IV-A4 forwards on the uncongested
/// paths only. 5 %: a group that small adds at most 5 % to the flow's rate anyway.
pub const STRIPE_MIN_SHARE_PER_MILLE: u64 = 50;

/// One smooth WRR pick over the up groups with `credits` per group id; weights are the configured
/// ones, or the measured rates when `by_rate`.
fn swrr(
    groups: &PathGroups,
    credits: &mut [i64; MAX_PATH_GROUPS],
    by_rate: bool,
) -> Option<PathGroupId> {
    swrr_filtered(groups, credits, by_rate, |_| true)
}

/// [`swrr`] over the up groups that pass `keep`.
fn swrr_filtered(
    groups: &PathGroups,
    credits: &mut [i64; MAX_PATH_GROUPS],
    by_rate: bool,
    keep: impl Fn(&crate::path_group::PathGroup) -> bool,
) -> Option<PathGroupId> {
    let mut total: i64 = 0;
    let mut best: Option<(PathGroupId, i64)> = None;
    for g in groups.iter().filter(|g| g.up && keep(g)) {
        let w = if by_rate {
            i64::try_from((g.rate_bytes_per_s / RATE_UNIT_BYTES_PER_S).min(u64::from(u32::MAX)))
                .unwrap_or(i64::from(u32::MAX))
        } else {
            i64::from(g.weight)
        };
        let Some(c) = credits.get_mut(usize::from(g.id.get())) else {
            continue;
        };
        *c += w;
        total += w;
        if best.is_none_or(|(_, b)| *c > b) {
            best = Some((g.id, *c));
        }
    }
    let (id, _) = best?;
    if let Some(c) = credits.get_mut(usize::from(id.get())) {
        *c -= total;
    }
    Some(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PathGroupConfig;

    fn sched(weights: &[(u8, u32)], policy: SelectionPolicy) -> Scheduler {
        let cfg: Vec<PathGroupConfig> = weights
            .iter()
            .map(|&(id, weight)| PathGroupConfig { id, weight })
            .collect();
        let mut s = Scheduler::new(PathGroups::new(&cfg), policy);
        for &(id, _) in weights {
            s.set_up(PathGroupId::new(id).unwrap(), true);
        }
        s
    }

    fn picks(s: &mut Scheduler, n: usize) -> Vec<u8> {
        (0..n).map(|_| s.select().unwrap().get()).collect()
    }

    #[test]
    fn low_delay_picks_the_lowest_measured_up_group_and_keeps_a_close_current() {
        let mut s = sched(&[(0, 1), (1, 1), (2, 1)], SelectionPolicy::Wrr);
        let g = |id| PathGroupId::new(id).unwrap();
        let before = s.clone();
        assert_eq!(s.select_low_delay(None), None, "nothing measured");
        assert_eq!(
            s.select_low_delay(Some(g(1))),
            Some(g(1)),
            "nothing measured"
        );
        s.set_delay(g(0), 30_000);
        s.set_delay(g(1), 12_000);
        s.set_delay(g(2), 20_000);
        assert_eq!(s.select_low_delay(None), Some(g(1)));
        assert_eq!(s.select_low_delay(Some(g(0))), Some(g(1)), "18 ms worse");
        // 12 ms + max(2 ms, 3 ms): a current group up to 15 ms stays.
        s.set_delay(g(2), 15_000);
        assert_eq!(s.select_low_delay(Some(g(2))), Some(g(2)));
        s.set_delay(g(2), 15_001);
        assert_eq!(s.select_low_delay(Some(g(2))), Some(g(1)));
        // An unmeasured current group gives way to a measured one; a down group is never picked.
        s.set_delay(g(2), 0);
        assert_eq!(s.select_low_delay(Some(g(2))), Some(g(1)));
        s.set_up(g(1), false);
        assert_eq!(s.select_low_delay(None), Some(g(0)));
        assert_eq!(steer_margin_us(4_000), 2_000);
        assert_eq!(steer_margin_us(100_000), 25_000);
        // No WRR credits were touched.
        let mut fresh = before;
        fresh.set_up(g(1), false);
        assert_eq!(picks(&mut s, 6), picks(&mut fresh, 6));
    }

    #[test]
    fn packet_striping_follows_the_weights_without_touching_new_flow_picks() {
        let mut s = sched(&[(0, 3), (1, 1), (4, 2)], SelectionPolicy::Wrr);
        let before = s.clone();
        let p: Vec<u8> = (0..6).map(|_| s.select_packet().unwrap().get()).collect();
        assert_eq!(p, [0, 4, 0, 1, 4, 0], "smooth: interleaved 3:1:2");
        let mut counts = [0usize; 16];
        for _ in 0..600 {
            counts[usize::from(s.select_packet().unwrap().get())] += 1;
        }
        assert_eq!((counts[0], counts[1], counts[4]), (300, 100, 200));
        // New-flow selection is unaffected by the packets striped.
        let mut fresh = before;
        assert_eq!(picks(&mut s, 12), picks(&mut fresh, 12));
        s.set_up(PathGroupId::new(0).unwrap(), false);
        assert!((0..10).all(|_| s.select_packet().unwrap().get() != 0));
    }

    #[test]
    fn striping_skips_groups_below_five_percent_but_new_flows_still_probe_them() {
        // The controller's weights after a flood of group 0: 49 of 1000 (4.9 %).
        let mut s = sched(
            &[(0, 49), (1, 317), (2, 317), (3, 317)],
            SelectionPolicy::Wrr,
        );
        let mut counts = [0usize; 16];
        for _ in 0..10_000 {
            counts[usize::from(s.select_packet().unwrap().get())] += 1;
        }
        assert_eq!(counts[0], 0, "{counts:?}");
        assert_eq!(counts[1] + counts[2] + counts[3], 10_000);
        assert!(counts[1].abs_diff(counts[2]) <= 40, "{counts:?}");
        // New flows: group 0 keeps its 49 of every 1000.
        let p = picks(&mut s, 1000);
        assert_eq!(p.iter().filter(|g| **g == 0).count(), 49);
        // At 5 % exactly it is striped again.
        let mut s = sched(&[(0, 50), (1, 950)], SelectionPolicy::Wrr);
        let n = (0..1000)
            .filter(|_| s.select_packet().unwrap().get() == 0)
            .count();
        assert_eq!(n, 50);
        // Only tiny groups up: the largest still carries (never `None` while one is up).
        let mut s = sched(&[(0, 1), (1, 1000)], SelectionPolicy::Wrr);
        s.set_up(PathGroupId::new(1).unwrap(), false);
        assert_eq!(s.select_packet().map(PathGroupId::get), Some(0));
    }

    #[test]
    fn reconfigure_keeps_groups_up_and_adds_new_ones_down() {
        let mut s = sched(&[(0, 1), (1, 1)], SelectionPolicy::Wrr);
        let cfg = [
            PathGroupConfig { id: 0, weight: 3 },
            PathGroupConfig { id: 1, weight: 1 },
            PathGroupConfig { id: 2, weight: 5 },
        ];
        assert!(s.reconfigure(&cfg, SelectionPolicy::Wrr).is_empty());
        assert!(s.is_up(PathGroupId::new(0).unwrap()));
        assert!(!s.is_up(PathGroupId::new(2).unwrap()), "new group down");
        let p = picks(&mut s, 400);
        assert_eq!(
            p.iter().filter(|g| **g == 0).count(),
            300,
            "new weights 3:1"
        );
        let removed = s.reconfigure(&cfg[..1], SelectionPolicy::Rr);
        assert_eq!(removed.len(), 2);
        assert_eq!(picks(&mut s, 3), vec![0, 0, 0]);
    }

    #[test]
    fn round_robin_cycles_over_up_groups() {
        let mut s = sched(&[(0, 1), (2, 9), (5, 1)], SelectionPolicy::Rr);
        assert_eq!(picks(&mut s, 6), vec![0, 2, 5, 0, 2, 5]);
        s.set_up(PathGroupId::new(2).unwrap(), false);
        assert_eq!(picks(&mut s, 4), vec![0, 5, 0, 5]); // after 5 wraps to 0, skips 2
    }

    #[test]
    fn smooth_wrr_matches_nginx() {
        // The nginx example: weights a=5, b=1, c=1 give a a b a c a a (smooth, not aaaaabc).
        let mut s = sched(&[(0, 5), (1, 1), (2, 1)], SelectionPolicy::Wrr);
        assert_eq!(picks(&mut s, 7), vec![0, 0, 1, 0, 2, 0, 0]);
        assert_eq!(picks(&mut s, 7), vec![0, 0, 1, 0, 2, 0, 0]);
    }

    #[test]
    fn wrr_shares_follow_weights_4_2_1_1() {
        let mut s = sched(&[(0, 4), (1, 2), (2, 1), (3, 1)], SelectionPolicy::Wrr);
        let mut count = [0usize; 4];
        for g in picks(&mut s, 800) {
            count[usize::from(g)] += 1;
        }
        assert_eq!(count, [400, 200, 100, 100]);
    }

    #[test]
    fn throughput_policy_uses_rates_once_all_are_measured() {
        let mut s = sched(&[(0, 1), (1, 1)], SelectionPolicy::Throughput);
        // Unmeasured: configured weights 1:1.
        assert_eq!(picks(&mut s, 4), vec![0, 1, 0, 1]);
        s.set_rate(PathGroupId::new(0).unwrap(), 3_000_000);
        assert_eq!(picks(&mut s, 2).len(), 2, "one measured is not enough");
        s.set_rate(PathGroupId::new(1).unwrap(), 1_000_000);
        let mut count = [0usize; 2];
        for g in picks(&mut s, 400) {
            count[usize::from(g)] += 1;
        }
        assert_eq!(count, [300, 100]);
    }

    #[test]
    fn nothing_up_means_no_group() {
        let mut s = sched(&[(0, 1)], SelectionPolicy::Wrr);
        s.set_up(PathGroupId::new(0).unwrap(), false);
        assert_eq!(s.select(), None);
        assert_eq!(s.select_by_hash(&42u32), None);
    }

    #[test]
    fn hash_selection_is_stable() {
        let s = sched(&[(0, 1), (1, 1), (7, 1)], SelectionPolicy::Rr);
        for flow in 0u32..100 {
            assert_eq!(s.select_by_hash(&flow), s.select_by_hash(&flow));
        }
        let hit: std::collections::BTreeSet<_> =
            (0u32..100).filter_map(|f| s.select_by_hash(&f)).collect();
        assert_eq!(hit.len(), 3, "spreads over all up groups");
    }
}
