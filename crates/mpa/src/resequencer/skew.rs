//! The measured reordering delay ("skew") of striped flows, for a hold time that follows what the
//! paths really do rather than what their smoothed RTTs suggest.
//!
//! Why: the hold time sized from the paths (`Threshold::from_paths`, `2·Δ + 5 ms` of the base-delay
//! difference, at most 200 ms) misses the delay that queues add. Measured on the MDI experiment
//! (docs/results.md "Seed 001 Fig. 3"): with equal base delays the two connections' queues
//! (emulator buffer, socket buffers, outer TCP recovery) still put frames 10–100 ms apart, so a
//! 5 ms hold released thousands of gaps that then filled late; beyond MDI 0.35 the base difference
//! itself exceeds 200 ms. The resequencer sees the real skew directly:
//! - a gap that fills while frames wait behind it: the skew is at least the wait of the oldest
//!   frame held behind it (`now − its arrival`);
//! - a frame of a gap released early (hold time or count `T`) that arrives afterwards: the skew is
//!   at least `now − the arrival of the oldest frame that was held behind that gap`.
//!
//! [`SkewMax`] keeps the largest such sample over the last one to two windows (a windowed maximum
//! as in BBR's bandwidth filter, two buckets), so one queue spike raises the hold at once and the
//! hold falls back a window after the paths calm down. Pure: time is a parameter.

use std::time::{Duration, Instant};

/// Length of one bucket of the windowed maximum. Two buckets are kept, so a sample counts for
/// 5–10 s: long enough to span an outer TCP's loss recoveries (a few RTTs of the slowest path),
/// short enough that the hold shrinks soon after a path's delay falls.
pub const SKEW_WINDOW: Duration = Duration::from_secs(5);
/// Samples above this are ignored: a frame this late is not reordering the hold could wait for
/// (the idle sweep or a restarted sender produced it).
pub const MAX_SKEW_SAMPLE: Duration = Duration::from_secs(2);

/// Windowed maximum of skew samples (two buckets of [`SKEW_WINDOW`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SkewMax {
    /// Start of the current bucket and its maximum.
    cur: Option<(Instant, Duration)>,
    /// The previous bucket's maximum (a bucket that ended at most one window ago).
    prev: Option<Duration>,
}

impl SkewMax {
    /// Nothing measured yet.
    pub fn new() -> Self {
        SkewMax::default()
    }

    /// Moves the buckets on to `now`.
    fn roll(&mut self, now: Instant) {
        if let Some((start, max)) = self.cur {
            let age = now.saturating_duration_since(start);
            if age >= 2 * SKEW_WINDOW {
                // Both buckets are older than the window: forget them.
                self.cur = None;
                self.prev = None;
            } else if age >= SKEW_WINDOW {
                self.prev = Some(max);
                self.cur = Some((start + SKEW_WINDOW, Duration::ZERO));
            }
        }
    }

    /// One sample `d` observed at `now` (ignored above [`MAX_SKEW_SAMPLE`]).
    pub fn sample(&mut self, now: Instant, d: Duration) {
        if d > MAX_SKEW_SAMPLE {
            return;
        }
        self.roll(now);
        match &mut self.cur {
            Some((_, max)) => *max = (*max).max(d),
            None => self.cur = Some((now, d)),
        }
    }

    /// The largest sample of the last one to two windows; `None` when there is none.
    pub fn get(&self, now: Instant) -> Option<Duration> {
        let mut s = *self;
        s.roll(now);
        match (s.cur, s.prev) {
            (None, None) => None,
            (cur, prev) => Some(
                cur.map_or(Duration::ZERO, |c| c.1)
                    .max(prev.unwrap_or_default()),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn keeps_the_max_for_one_to_two_windows() {
        let t0 = Instant::now();
        let mut s = SkewMax::new();
        assert_eq!(s.get(t0), None);
        s.sample(t0, 40 * MS);
        s.sample(t0 + MS, 10 * MS);
        assert_eq!(s.get(t0 + MS), Some(40 * MS));
        // Still there in the next bucket, next to smaller samples.
        s.sample(t0 + SKEW_WINDOW + MS, 15 * MS);
        assert_eq!(s.get(t0 + SKEW_WINDOW + 2 * MS), Some(40 * MS));
        // Two windows on, only the 15 ms of the second bucket is left.
        assert_eq!(s.get(t0 + 2 * SKEW_WINDOW + MS), Some(15 * MS));
        // And nothing after a long quiet spell.
        assert_eq!(s.get(t0 + 10 * SKEW_WINDOW), None);
        s.sample(t0 + 10 * SKEW_WINDOW, 7 * MS);
        assert_eq!(s.get(t0 + 10 * SKEW_WINDOW), Some(7 * MS));
    }

    #[test]
    fn a_larger_sample_counts_at_once_and_absurd_ones_not_at_all() {
        let t0 = Instant::now();
        let mut s = SkewMax::new();
        s.sample(t0, 5 * MS);
        s.sample(t0 + MS, 300 * MS);
        assert_eq!(s.get(t0 + MS), Some(300 * MS));
        s.sample(t0 + 2 * MS, MAX_SKEW_SAMPLE + MS);
        assert_eq!(s.get(t0 + 2 * MS), Some(300 * MS));
    }
}
