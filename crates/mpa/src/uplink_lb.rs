//! External (Type III) traffic load balancing over the gateway's uplinks (seed 004 §5).
//!
//! Traffic from the branch LAN to the internet (not to another branch, so never tunnelled) is
//! assigned to an uplink **per flow**, and leaves it with SNAT to that uplink's address. A flow
//! keeps its uplink for its lifetime (seed 004 §5: "all packets belonging to the same TCP session
//! are sent via the same host network interface"); in `mmsg` the kernel's conntrack does that once
//! the first packet is marked and NATed, so this core only chooses for *new* flows.
//!
//! Policies ([`UplinkPolicy`]):
//! - `single`: every flow on one uplink (the paper's single-interface baseline).
//! - `rr` (§5.1.1): `i ← flowCounter mod N`.
//! - `mbw` (§5.1.2 i, eq. 1): every new flow on the uplink with the most available bandwidth. To
//!   avoid flapping between two nearly equal uplinks, the current one is kept unless another has
//!   more than [`HYSTERESIS_POINTS`] percent of the total more.
//! - `wrr` (§5.1.2 ii, eq. 2, Alg. 2): integer weights `W_j = BW_j / Σ BW_k × 100`
//!   ([`WEIGHT_SCALE`]), apportioned by largest remainder with every uplink at least 1 (so an
//!   uplink that looks full still gets the odd flow and its estimate can recover). Alg. 2 keeps a
//!   weight dictionary: each pick decrements the chosen uplink's entry, an entry at 0 leaves the
//!   dictionary, and the dictionary is refilled from the current weights when empty. Step 5
//!   ("chosen similar to RR but based on links weights") is made concrete as: the entry with the
//!   largest remaining fraction of its weight, ties to the lowest index. That interleaves the
//!   uplinks (10:5 gives 0, 1, 0, 0, 1, 0, ...) where a literal `flowCounter mod |W|` would
//!   alternate evenly and leave the last third of every cycle to one uplink. Over every full cycle
//!   each uplink gets exactly its weight.
//!
//! Available bandwidth (`BW_j`) is an input: the driver feeds per-uplink estimates to
//! [`Balancer::observe`] (in `mmsg`: configured capacity minus the load measured on the interface
//! that is not ours; `None` = not measured yet, which counts as the configured capacity). New
//! weights are *published* only when some uplink's weight moves by more than
//! [`HYSTERESIS_POINTS`], so the kernel is not re-programmed for noise.
//!
//! The kernel cannot call back into this core per new connection without an nfqueue round trip,
//! so the driver programs [`Balancer::schedule`]: the sequence of picks of one full Alg. 2 cycle
//! from a fresh dictionary, which nftables replays with `numgen inc mod len`. [`Balancer::pick`]
//! is the same decision one flow at a time (Alg. 1 step 4) for a driver that sees every new flow.
//!
//! Pure: no clock, no IO; state is O(number of uplinks) ≤ [`MAX_UPLINKS`].

use thiserror::Error;

use crate::config::{UplinkPolicy, MAX_WAN_PORTS};

/// Most uplinks balanced over: every WAN port of the gateway.
pub const MAX_UPLINKS: usize = MAX_WAN_PORTS;
/// Sum of the WRR weights: eq. 2 gives percentages. 100 also bounds the schedule the driver
/// writes into the kernel to 100 map elements.
pub const WEIGHT_SCALE: u32 = 100;
/// Published weights change only when some uplink's new weight differs by more than this many
/// points of [`WEIGHT_SCALE`] (5 %: measurement noise of a 1 s counter sample on a busy link).
pub const HYSTERESIS_POINTS: u32 = 5;

/// A balancer that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LbError {
    /// No uplinks, or more than [`MAX_UPLINKS`].
    #[error("{0} uplinks, need 1..={MAX_UPLINKS}")]
    UplinkCount(usize),
    /// An uplink with capacity 0.
    #[error("uplink {0} has capacity 0")]
    ZeroCapacity(usize),
    /// `single` names an uplink that does not exist.
    #[error("single uplink {0} does not exist")]
    NoSuchUplink(usize),
    /// `off` has nothing to balance.
    #[error("policy off has no balancer")]
    Off,
}

/// Per-flow uplink selection for new Type III flows.
#[derive(Debug, Clone)]
pub struct Balancer {
    policy: UplinkPolicy,
    /// Configured capacity per uplink, bit/s (≥ 1).
    capacity_bps: Vec<u64>,
    /// The current available-bandwidth basis per uplink, bit/s (≤ capacity).
    available_bps: Vec<u64>,
    /// The published weights, summing to [`WEIGHT_SCALE`].
    weights: Vec<u32>,
    /// Alg. 2's weight dictionary: what is left of each weight in this cycle.
    remaining: Vec<u32>,
    /// RR's flow counter.
    flow_counter: u64,
    /// `single`'s uplink.
    single: usize,
    /// Flows assigned by [`Balancer::pick`], per uplink.
    assigned: Vec<u64>,
}

impl Balancer {
    /// A balancer over uplinks with the given capacities (bit/s); `single` is the uplink of the
    /// `single` policy (ignored by the others).
    pub fn new(policy: UplinkPolicy, capacity_bps: &[u64], single: usize) -> Result<Self, LbError> {
        let n = capacity_bps.len();
        if n == 0 || n > MAX_UPLINKS {
            return Err(LbError::UplinkCount(n));
        }
        if let Some(i) = capacity_bps.iter().position(|&c| c == 0) {
            return Err(LbError::ZeroCapacity(i));
        }
        if policy == UplinkPolicy::Off {
            return Err(LbError::Off);
        }
        if policy == UplinkPolicy::Single && single >= n {
            return Err(LbError::NoSuchUplink(single));
        }
        let mut b = Balancer {
            policy,
            capacity_bps: capacity_bps.to_vec(),
            available_bps: capacity_bps.to_vec(),
            weights: vec![0; n],
            remaining: vec![0; n],
            flow_counter: 0,
            single,
            assigned: vec![0; n],
        };
        b.weights = b.compute_weights();
        Ok(b)
    }

    /// The policy.
    pub fn policy(&self) -> UplinkPolicy {
        self.policy
    }

    /// Number of uplinks.
    pub fn len(&self) -> usize {
        self.capacity_bps.len()
    }

    /// Always false (a balancer has at least one uplink); for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        self.capacity_bps.is_empty()
    }

    /// New available-bandwidth estimates, bit/s, one per uplink (`None`: not measured, counts as
    /// the configured capacity; values above the capacity are clamped to it). Extra entries are
    /// ignored, missing ones count as `None`. Returns true when the published weights changed
    /// (the driver then re-programs the kernel with [`Balancer::schedule`]).
    pub fn observe(&mut self, available: &[Option<u64>]) -> bool {
        for (i, (slot, cap)) in self
            .available_bps
            .iter_mut()
            .zip(&self.capacity_bps)
            .enumerate()
        {
            let a = available.get(i).copied().flatten().unwrap_or(*cap);
            *slot = a.min(*cap);
        }
        let new = self.compute_weights();
        let moved = new
            .iter()
            .zip(&self.weights)
            .any(|(a, b)| a.abs_diff(*b) > HYSTERESIS_POINTS);
        if moved {
            self.weights = new;
        }
        moved
    }

    /// The published weights per uplink, summing to [`WEIGHT_SCALE`]: the share of new flows
    /// each gets (`single` / `mbw`: all on one uplink; `rr`: equal).
    pub fn weights(&self) -> &[u32] {
        &self.weights
    }

    /// The available-bandwidth basis per uplink (bit/s) of the last [`Balancer::observe`].
    pub fn available_bps(&self) -> &[u64] {
        &self.available_bps
    }

    /// Flows assigned by [`Balancer::pick`] per uplink.
    pub fn assigned(&self) -> &[u64] {
        &self.assigned
    }

    /// Chooses the uplink of one new flow (seed 004 Alg. 1 step 4).
    pub fn pick(&mut self) -> usize {
        let n = self.len();
        let i = match self.policy {
            UplinkPolicy::Rr => {
                let n64 = u64::try_from(n).unwrap_or(1).max(1);
                let i = usize::try_from(self.flow_counter % n64).unwrap_or(0);
                self.flow_counter = self.flow_counter.wrapping_add(1);
                i
            }
            UplinkPolicy::Wrr => {
                if self.remaining.iter().all(|&r| r == 0) {
                    self.remaining.clone_from(&self.weights);
                }
                let i = alg2_step(&self.remaining, &self.weights);
                if let Some(r) = self.remaining.get_mut(i) {
                    *r = r.saturating_sub(1);
                }
                i
            }
            UplinkPolicy::Off | UplinkPolicy::Single | UplinkPolicy::Mbw => self.target(),
        };
        if let Some(a) = self.assigned.get_mut(i) {
            *a += 1;
        }
        i
    }

    /// One full cycle of picks from a fresh state with the published weights: the uplink index
    /// of the k-th new flow of every cycle. `rr`: `0..N`; `single` / `mbw`: one entry; `wrr`:
    /// [`WEIGHT_SCALE`] entries in Alg. 2 order. Never empty, at most [`WEIGHT_SCALE`] long.
    pub fn schedule(&self) -> Vec<usize> {
        match self.policy {
            UplinkPolicy::Rr => (0..self.len()).collect(),
            UplinkPolicy::Wrr => {
                let mut remaining = self.weights.clone();
                let total: u32 = remaining.iter().sum();
                (0..total)
                    .map(|_| {
                        let i = alg2_step(&remaining, &self.weights);
                        if let Some(r) = remaining.get_mut(i) {
                            *r = r.saturating_sub(1);
                        }
                        i
                    })
                    .collect()
            }
            UplinkPolicy::Off | UplinkPolicy::Single | UplinkPolicy::Mbw => vec![self.target()],
        }
    }

    /// `single` / `mbw`: the uplink that takes every new flow (the one with weight
    /// [`WEIGHT_SCALE`]).
    fn target(&self) -> usize {
        self.weights
            .iter()
            .position(|&w| w == WEIGHT_SCALE)
            .unwrap_or(0)
    }

    fn compute_weights(&self) -> Vec<u32> {
        let n = self.len();
        let all_on = |i: usize| {
            let mut w = vec![0; n];
            if let Some(x) = w.get_mut(i) {
                *x = WEIGHT_SCALE;
            }
            w
        };
        match self.policy {
            UplinkPolicy::Off | UplinkPolicy::Single => all_on(self.single.min(n - 1)),
            UplinkPolicy::Rr => apportion(&vec![1; n], WEIGHT_SCALE),
            UplinkPolicy::Wrr => apportion(&self.available_bps, WEIGHT_SCALE),
            UplinkPolicy::Mbw => {
                let best = argmax(&self.available_bps);
                // Keep the current uplink unless `best` beats it by more than the hysteresis.
                let current = self.weights.iter().position(|&w| w == WEIGHT_SCALE);
                let total: u128 = self.available_bps.iter().map(|&a| u128::from(a)).sum();
                let at = |i: usize| self.available_bps.get(i).copied().unwrap_or(0);
                let keep = current.filter(|&c| {
                    let gap = u128::from(at(best).saturating_sub(at(c)));
                    gap * u128::from(WEIGHT_SCALE) <= total * u128::from(HYSTERESIS_POINTS)
                });
                all_on(keep.unwrap_or(best))
            }
        }
    }
}

/// The index of the largest value, ties to the lowest index (eq. 1).
fn argmax(v: &[u64]) -> usize {
    let mut best = (0, 0);
    for (i, &x) in v.iter().enumerate() {
        if i == 0 || x > best.1 {
            best = (i, x);
        }
    }
    best.0
}

/// Alg. 2 step 5 with a non-empty dictionary: the entry with the largest remaining fraction of
/// its weight (`remaining[i] / weights[i]`, compared by cross-multiplication), ties to the
/// lowest index. Entries at 0 are out of the dictionary.
fn alg2_step(remaining: &[u32], weights: &[u32]) -> usize {
    // (index, remaining, weight) of the best entry so far.
    let mut best: Option<(usize, u64, u64)> = None;
    for (i, (&r, &w)) in remaining.iter().zip(weights).enumerate() {
        if r == 0 || w == 0 {
            continue;
        }
        let (r, w) = (u64::from(r), u64::from(w));
        best = match best {
            Some((b, br, bw)) if br * w >= r * bw => Some((b, br, bw)),
            _ => Some((i, r, w)),
        };
    }
    best.map_or(0, |b| b.0)
}

/// Eq. 2 in integers: shares of `scale` proportional to `bandwidth` by largest remainder in
/// exact integer arithmetic (ties to the lowest index; all-zero bandwidths give equal shares),
/// then every entry at 0 is raised to 1, taken from the largest entry, so no uplink starves
/// (when `scale ≥ len`). The result sums to `scale`. (The controller's `wrr::apportion` does the
/// same for path groups, with the floor of 1 applied first.)
pub fn apportion(bandwidth: &[u64], scale: u32) -> Vec<u32> {
    let n = bandwidth.len();
    let Ok(n32) = u32::try_from(n) else {
        return vec![1; n];
    };
    if n == 0 || scale <= n32 {
        return vec![1; n];
    }
    let rest = u128::from(scale);
    let total: u128 = bandwidth.iter().map(|&b| u128::from(b)).sum();
    // (index, floor share, remainder numerator); one common denominator, so numerators compare.
    let mut shares: Vec<(usize, u128, u128)> = bandwidth
        .iter()
        .enumerate()
        .map(|(i, &b)| match (rest * u128::from(b)).checked_div(total) {
            // rest ≤ 2^32, b < 2^64: the product fits u128.
            Some(q) => (i, q, (rest * u128::from(b)) % total),
            None => {
                let d = u128::from(n32);
                (i, rest / d, rest % d)
            }
        })
        .collect();
    let given: u128 = shares.iter().map(|s| s.1).sum();
    let left = usize::try_from(rest.saturating_sub(given)).unwrap_or(0);
    // floor ≤ scale: fits u32.
    let mut out: Vec<u32> = shares
        .iter()
        .map(|s| u32::try_from(s.1).unwrap_or(0))
        .collect();
    shares.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    for s in shares.iter().take(left) {
        if let Some(o) = out.get_mut(s.0) {
            *o += 1;
        }
    }
    // The floor of 1: scale > n, so the largest entry is ≥ 2 while any entry is 0.
    while let Some(z) = out.iter().position(|&w| w == 0) {
        let big = argmax(&out.iter().map(|&w| u64::from(w)).collect::<Vec<_>>());
        if let Some(b) = out.get_mut(big) {
            *b -= 1;
        }
        if let Some(o) = out.get_mut(z) {
            *o = 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use proptest::prelude::*;

    const M: u64 = 1_000_000;

    fn counts(b: &mut Balancer, picks: usize) -> Vec<u64> {
        let mut c = vec![0; b.len()];
        for _ in 0..picks {
            c[b.pick()] += 1;
        }
        c
    }

    #[test]
    fn rr_alternates() {
        let mut b = Balancer::new(UplinkPolicy::Rr, &[10 * M, 5 * M], 0).unwrap();
        let seq: Vec<usize> = (0..6).map(|_| b.pick()).collect();
        assert_eq!(seq, vec![0, 1, 0, 1, 0, 1]);
        assert_eq!(b.schedule(), vec![0, 1]);
        assert_eq!(b.weights(), &[50, 50]);
        assert_eq!(b.assigned(), &[3, 3]);
        // RR ignores the measurements.
        assert!(!b.observe(&[Some(0), Some(5 * M)]));
    }

    #[test]
    fn single_uses_one_uplink() {
        let mut b = Balancer::new(UplinkPolicy::Single, &[10 * M, 10 * M], 1).unwrap();
        assert_eq!(counts(&mut b, 10), vec![0, 10]);
        assert_eq!(b.schedule(), vec![1]);
        assert!(Balancer::new(UplinkPolicy::Single, &[M], 1).is_err());
    }

    #[test]
    fn mbw_follows_the_largest_available_with_hysteresis() {
        let mut b = Balancer::new(UplinkPolicy::Mbw, &[10 * M, 5 * M], 0).unwrap();
        assert_eq!(b.schedule(), vec![0]);
        // Uplink 0 loaded down to 2 Mbit/s free: uplink 1 (5) takes the new flows.
        assert!(b.observe(&[Some(2 * M), None]));
        assert_eq!(b.schedule(), vec![1]);
        assert_eq!(counts(&mut b, 3), vec![0, 3]);
        // 5.2 vs 5.0 of 10.2 total: within 5 %, stay on uplink 1.
        assert!(!b.observe(&[Some(5_200_000), None]));
        assert_eq!(b.schedule(), vec![1]);
        // 8 vs 5: switch back.
        assert!(b.observe(&[Some(8 * M), None]));
        assert_eq!(b.schedule(), vec![0]);
    }

    #[test]
    fn wrr_eq2_weights_and_interleaving() {
        let mut b = Balancer::new(UplinkPolicy::Wrr, &[10 * M, 5 * M], 0).unwrap();
        assert_eq!(b.weights(), &[67, 33]);
        let s = b.schedule();
        assert_eq!(s.len(), 100);
        assert_eq!(&s[..6], &[0, 1, 0, 0, 1, 0]);
        assert_eq!(s.iter().filter(|&&i| i == 1).count(), 33);
        // pick() replays the schedule cycle after cycle.
        let picks: Vec<usize> = (0..200).map(|_| b.pick()).collect();
        assert_eq!(&picks[..100], &s[..]);
        assert_eq!(&picks[100..], &s[..]);
        assert_eq!(b.assigned(), &[134, 66]);
    }

    #[test]
    fn wrr_reweights_on_measurement_beyond_hysteresis() {
        let mut b = Balancer::new(UplinkPolicy::Wrr, &[10 * M, 10 * M], 0).unwrap();
        assert_eq!(b.weights(), &[50, 50]);
        assert!(!b.observe(&[Some(9 * M), Some(10 * M)])); // 47/53: within 5 points.
        assert_eq!(b.weights(), &[50, 50]);
        assert!(b.observe(&[Some(5 * M), None])); // 5:10 → 33/67.
        assert_eq!(b.weights(), &[33, 67]);
        // A full uplink keeps weight 1, never 0.
        assert!(b.observe(&[Some(0), None]));
        assert_eq!(b.weights(), &[1, 99]);
        // Above capacity is clamped.
        b.observe(&[Some(100 * M), Some(100 * M)]);
        assert_eq!(b.available_bps(), &[10 * M, 10 * M]);
    }

    #[test]
    fn wrr_refills_only_when_the_dictionary_is_empty() {
        let mut b = Balancer::new(UplinkPolicy::Wrr, &[M, M], 0).unwrap();
        for _ in 0..10 {
            b.pick();
        }
        assert!(b.observe(&[Some(M / 4), None])); // 20:80
                                                  // The rest of the current 50:50 cycle (90 picks) is served first (Alg. 2 steps 2-4).
        let c = counts(&mut b, 90);
        assert_eq!(c, vec![45, 45]);
        let c = counts(&mut b, 100);
        assert_eq!(c, vec![20, 80]);
    }

    #[test]
    fn bad_inputs_are_errors() {
        assert_eq!(
            Balancer::new(UplinkPolicy::Rr, &[], 0).unwrap_err(),
            LbError::UplinkCount(0)
        );
        assert_eq!(
            Balancer::new(UplinkPolicy::Rr, &[M; 9], 0).unwrap_err(),
            LbError::UplinkCount(9)
        );
        assert_eq!(
            Balancer::new(UplinkPolicy::Wrr, &[M, 0], 0).unwrap_err(),
            LbError::ZeroCapacity(1)
        );
        assert_eq!(
            Balancer::new(UplinkPolicy::Off, &[M], 0).unwrap_err(),
            LbError::Off
        );
    }

    #[test]
    fn apportion_edges() {
        assert_eq!(apportion(&[], 100), Vec::<u32>::new());
        assert_eq!(apportion(&[0, 0, 0], 100), vec![34, 33, 33]);
        assert_eq!(apportion(&[u64::MAX, u64::MAX], 100), vec![50, 50]);
        assert_eq!(apportion(&[3, 1], 2), vec![1, 1]);
    }

    proptest! {
        #[test]
        fn wrr_shares_converge_to_weights(
            caps in proptest::collection::vec(1u64..=10_000_000_000, 1..=MAX_UPLINKS),
            avail in proptest::collection::vec(proptest::option::of(0u64..=10_000_000_000), 0..=MAX_UPLINKS),
            cycles in 1usize..4,
        ) {
            let mut b = Balancer::new(UplinkPolicy::Wrr, &caps, 0).unwrap();
            let published = b.observe(&avail);
            let w = b.weights().to_vec();
            prop_assert_eq!(w.iter().sum::<u32>(), WEIGHT_SCALE);
            prop_assert!(w.iter().all(|&x| x >= 1));
            // Eq. 2: each weight within 1 point (plus the floor of 1) of its exact share.
            let basis = if published { b.available_bps().to_vec() } else { caps.clone() };
            let total: f64 = basis.iter().map(|&x| x as f64).sum();
            if total > 0.0 {
                for (wi, bi) in w.iter().zip(&basis) {
                    let exact = *bi as f64 / total * f64::from(WEIGHT_SCALE);
                    prop_assert!((f64::from(*wi) - exact).abs() <= caps.len() as f64);
                }
            }
            // Over whole cycles the shares are exactly the weights ...
            let picks = cycles * WEIGHT_SCALE as usize;
            let mut c = vec![0u64; caps.len()];
            let mut worst = 0f64;
            for t in 1..=picks {
                c[b.pick()] += 1;
                // ... and on the way each uplink stays close to its share (interleaving).
                for (ci, wi) in c.iter().zip(&w) {
                    let ideal = t as f64 * f64::from(*wi) / f64::from(WEIGHT_SCALE);
                    worst = worst.max((*ci as f64 - ideal).abs());
                }
            }
            for (ci, wi) in c.iter().zip(&w) {
                prop_assert_eq!(*ci, cycles as u64 * u64::from(*wi));
            }
            prop_assert!(worst <= caps.len() as f64, "deviation {worst}");
            // The kernel schedule is the same cycle.
            let s = b.schedule();
            prop_assert_eq!(s.len(), WEIGHT_SCALE as usize);
        }
    }
}
