//! Path groups (seed 000 §III-A): the sets of member paths between this branch and one remote branch.
//!
//! Each path group carries its own MPTCP connections (one per class, port `0xB00G`), so from the MPA's
//! point of view a group is a unit that is up or down, has a configured weight and a measured
//! throughput. The [`crate::scheduler`] picks among the groups that are up; the driver reports state
//! changes (connection lost / re-established, all subflows gone) with [`PathGroups::set_up`] and rates
//! with [`PathGroups::set_rate`] (e.g. from a [`RateEstimator`] fed with bytes sent).
//!
//! At most 16 groups per remote branch (one nibble), kept sorted by id: lookups are a scan of ≤ 16.

use std::time::{Duration, Instant};

use crate::config::PathGroupConfig;
use crate::PathGroupId;

/// Most path groups towards one remote branch (a nibble of the outer port).
pub const MAX_PATH_GROUPS: usize = 16;

/// One path group's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathGroup {
    /// Its id.
    pub id: PathGroupId,
    /// The configured weight (1..=1000).
    pub weight: u32,
    /// Whether it can carry traffic (its connections are established).
    pub up: bool,
    /// The measured throughput in bytes per second, 0 while unknown.
    pub rate_bytes_per_s: u64,
    /// The measured round trip of its connections in µs (the lowest smoothed RTT of their
    /// established subflows), 0 while unknown.
    pub delay_us: u32,
}

/// The path groups towards one remote branch, sorted by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathGroups {
    groups: Vec<PathGroup>,
}

impl PathGroups {
    /// Groups from a validated config (invalid ids and duplicates skipped, at most 16). Every group
    /// starts **down**: the driver marks it up once its connections are established.
    pub fn new(config: &[PathGroupConfig]) -> Self {
        let mut groups: Vec<PathGroup> = config
            .iter()
            .filter_map(|g| {
                PathGroupId::new(g.id).ok().map(|id| PathGroup {
                    id,
                    weight: g.weight.max(1),
                    up: false,
                    rate_bytes_per_s: 0,
                    delay_us: 0,
                })
            })
            .collect();
        groups.sort_by_key(|g| g.id);
        groups.dedup_by_key(|g| g.id);
        groups.truncate(MAX_PATH_GROUPS);
        PathGroups { groups }
    }

    /// All groups, sorted by id.
    pub fn iter(&self) -> impl Iterator<Item = &PathGroup> {
        self.groups.iter()
    }

    /// The group with `id`.
    pub fn get(&self, id: PathGroupId) -> Option<&PathGroup> {
        self.groups.iter().find(|g| g.id == id)
    }

    fn get_mut(&mut self, id: PathGroupId) -> Option<&mut PathGroup> {
        self.groups.iter_mut().find(|g| g.id == id)
    }

    /// Whether `id` exists and is up.
    pub fn is_up(&self, id: PathGroupId) -> bool {
        self.get(id).is_some_and(|g| g.up)
    }

    /// Marks a group up or down; returns whether its state changed (`false` for unknown ids too).
    pub fn set_up(&mut self, id: PathGroupId, up: bool) -> bool {
        match self.get_mut(id) {
            Some(g) if g.up != up => {
                g.up = up;
                true
            }
            _ => false,
        }
    }

    /// Records the measured throughput of a group; returns `false` for an unknown id.
    pub fn set_rate(&mut self, id: PathGroupId, bytes_per_s: u64) -> bool {
        match self.get_mut(id) {
            Some(g) => {
                g.rate_bytes_per_s = bytes_per_s;
                true
            }
            None => false,
        }
    }

    /// Records the measured round trip of a group (µs, 0: unknown); returns `false` for an
    /// unknown id.
    pub fn set_delay(&mut self, id: PathGroupId, delay_us: u32) -> bool {
        match self.get_mut(id) {
            Some(g) => {
                g.delay_us = delay_us;
                true
            }
            None => false,
        }
    }

    /// Changes a group's configured weight (clamped to at least 1); returns `false` for an unknown
    /// id. Used when the controller publishes new weights (`crate::gwchan`): no flow moves.
    pub fn set_weight(&mut self, id: PathGroupId, weight: u32) -> bool {
        match self.get_mut(id) {
            Some(g) => {
                g.weight = weight.max(1);
                true
            }
            None => false,
        }
    }

    /// Applies a new group list (a config reload): groups that stay keep their state (up, measured
    /// rate) and take the new weight, new groups start down, groups not listed are removed.
    /// Returns the ids removed.
    pub fn reconfigure(&mut self, config: &[PathGroupConfig]) -> Vec<PathGroupId> {
        let mut next = PathGroups::new(config);
        for g in &mut next.groups {
            if let Some(old) = self.get(g.id) {
                g.up = old.up;
                g.rate_bytes_per_s = old.rate_bytes_per_s;
                g.delay_us = old.delay_us;
            }
        }
        let removed = self
            .groups
            .iter()
            .filter(|g| next.get(g.id).is_none())
            .map(|g| g.id)
            .collect();
        *self = next;
        removed
    }

    /// How many groups are up.
    pub fn up_count(&self) -> usize {
        self.groups.iter().filter(|g| g.up).count()
    }
}

/// The window over which [`RateEstimator`] measures: long enough to smooth TCP bursts and
/// coarse enough to be cheap, short enough to follow a path change within a few seconds.
pub const RATE_WINDOW: Duration = Duration::from_secs(1);

/// A throughput estimate from a byte counter: the rate over each [`RATE_WINDOW`], smoothed with an
/// EWMA of gain 1/4 (so a step is 90% followed after 8 windows).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RateEstimator {
    window_start: Option<Instant>,
    window_bytes: u64,
    rate: u64,
}

impl RateEstimator {
    /// Adds `bytes` sent at `now`; returns the updated estimate when a window closed.
    pub fn record(&mut self, now: Instant, bytes: u64) -> Option<u64> {
        let start = *self.window_start.get_or_insert(now);
        self.window_bytes = self.window_bytes.saturating_add(bytes);
        let elapsed = now.saturating_duration_since(start);
        if elapsed < RATE_WINDOW {
            return None;
        }
        let sample =
            u64::try_from(u128::from(self.window_bytes) * 1_000_000 / elapsed.as_micros().max(1))
                .unwrap_or(u64::MAX);
        self.rate = if self.rate == 0 {
            sample
        } else {
            self.rate - self.rate / 4 + sample / 4
        };
        self.window_start = Some(now);
        self.window_bytes = 0;
        Some(self.rate)
    }

    /// The current estimate in bytes per second (0 before the first window closed).
    pub fn rate_bytes_per_s(&self) -> u64 {
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(ids: &[(u8, u32)]) -> Vec<PathGroupConfig> {
        ids.iter()
            .map(|&(id, weight)| PathGroupConfig { id, weight })
            .collect()
    }

    #[test]
    fn groups_start_down_sorted_and_deduplicated() {
        let mut g = PathGroups::new(&cfg(&[(3, 1), (1, 2), (3, 5), (16, 1)]));
        let ids: Vec<u8> = g.iter().map(|g| g.id.get()).collect();
        assert_eq!(ids, vec![1, 3]);
        assert_eq!(g.up_count(), 0);
        let one = PathGroupId::new(1).unwrap();
        assert!(g.set_up(one, true));
        assert!(!g.set_up(one, true), "no change");
        assert!(g.is_up(one));
        assert!(!g.set_up(PathGroupId::new(9).unwrap(), true), "unknown");
        assert!(g.set_rate(one, 1000));
        assert_eq!(g.get(one).unwrap().rate_bytes_per_s, 1000);
    }

    #[test]
    fn reconfigure_keeps_the_state_of_groups_that_stay() {
        let mut g = PathGroups::new(&cfg(&[(0, 1), (1, 1)]));
        let (zero, one, two) = (
            PathGroupId::new(0).unwrap(),
            PathGroupId::new(1).unwrap(),
            PathGroupId::new(2).unwrap(),
        );
        g.set_up(zero, true);
        g.set_rate(zero, 500);
        let removed = g.reconfigure(&cfg(&[(0, 7), (2, 3)]));
        assert_eq!(removed, vec![one]);
        let z = g.get(zero).unwrap();
        assert_eq!((z.up, z.rate_bytes_per_s, z.weight), (true, 500, 7));
        let t = g.get(two).unwrap();
        assert_eq!((t.up, t.weight), (false, 3), "a new group starts down");
        assert!(g.get(one).is_none());
    }

    #[test]
    fn rate_estimator_follows_a_steady_rate() {
        let t0 = Instant::now();
        let mut r = RateEstimator::default();
        // 1 MB per second in 10 ms steps.
        for i in 1..=1000u64 {
            r.record(t0 + Duration::from_millis(10 * i), 10_000);
        }
        let rate = r.rate_bytes_per_s();
        assert!((990_000..=1_010_000).contains(&rate), "{rate}");
    }
}
