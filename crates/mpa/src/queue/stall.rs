//! How long the gateway itself recently stopped sending while the send time budget was full
//! (issue #16): the budget's cover for its own writer's stalls.
//!
//! The send time budget ([`super::inflight`]) leaves the paths about `(gain − 1) × min RTT +
//! margin` of queue beyond their bandwidth-delay product. That is all that keeps the bottleneck
//! busy while the writer does not run: when the writer wakes later than it planned (a CPU taken
//! by other work, a virtual machine's vCPU descheduled by its host, a stopped process), the paths
//! drain that queue and then idle. The old 4 MiB socket buffers never noticed (the kernel sends
//! from them on its own); the budget did. Measured on the 2x2 testbed (10 Mbit/s uplinks, 10 ms
//! one-way) with gw1's `mmsg` stopped for 30 ms every 200 ms: 15.6 / 14.4 Mbit/s (4 TCP flows /
//! UDP at twice the capacity) against 17.7 / 16.7 with the old buffers (docs/results.md "The
//! send time budget when the gateway stalls").
//!
//! So the writer reports how much later than planned its budget waits ended, the most of each
//! sample period, and the budget adds the lateness that recurs (reached in more than
//! [`COVER_SHARE`] of the last [`COVER_WINDOW`]'s periods), beyond what the margin already
//! covers, to its time ([`StallCover::cover`]): `rate × (gain × min RTT + margin + cover)`. On a
//! machine whose writer wakes within the margin the cover is zero and nothing changes; a gateway
//! that keeps stalling keeps its paths busy across the stalls and pays for it with that much more
//! queue (the trade its old buffers made, bounded by `--send-time-stall-cover`, default
//! [`MAX_COVER`]). Like BBR's allowance for aggregated ACKs, it follows what the sender has
//! recently seen; a pattern that stops is forgotten after [`COVER_WINDOW`].

use std::time::{Duration, Instant};

/// The window is two halves: a stall pattern is judged over at least half and at most all of it.
pub const COVER_WINDOW: Duration = Duration::from_secs(10);
/// The most time the cover adds to the budget by default (`mmsg run --send-time-stall-cover`): a
/// writer that stalls longer loses some goodput rather than queueing more than this on the paths.
pub const MAX_COVER: Duration = Duration::from_millis(50);
/// The cover is the lateness that more than this share of the window's sample periods (those
/// with a budget wait) reached: a stall that recurs is covered, a rare hiccup is not. With the
/// windowed maximum instead, single late wake-ups on a quiet 2-core testbed (8–19 ms) raised the
/// loaded ping median from ~45 to 52–64 ms for no goodput.
pub const COVER_SHARE: f64 = 0.1;
/// Lateness is counted in 1 ms steps up to this many (more counts as the last).
const STEPS: usize = 64;

/// The lateness of the sample periods of one half window.
#[derive(Debug, Clone)]
struct Half {
    since: Instant,
    periods: u32,
    /// `at_least[i]`: periods whose lateness was at least `i` ms (i ≥ 1).
    at_least: [u32; STEPS],
}

impl Half {
    fn new(since: Instant) -> Self {
        Half {
            since,
            periods: 0,
            at_least: [0; STEPS],
        }
    }
}

/// The recent lateness of the writer, sample period by sample period, over [`COVER_WINDOW`]
/// (bounded memory: two half windows of [`STEPS`] counters).
#[derive(Debug, Clone)]
pub struct StallCover {
    max: Duration,
    current: Option<Half>,
    previous: Option<Half>,
}

impl Default for StallCover {
    fn default() -> Self {
        StallCover::new(MAX_COVER)
    }
}

impl StallCover {
    /// A cover of at most `max` (zero: never any).
    pub fn new(max: Duration) -> Self {
        StallCover {
            max,
            current: None,
            previous: None,
        }
    }

    /// One sample period ending at `now`: the most the writer overslept a budget wait in it, or
    /// `None` when it did not wait (it tells nothing then).
    pub fn on_period(&mut self, now: Instant, late: Option<Duration>) {
        self.roll(now);
        let (Some(late), Some(h)) = (late, self.current.as_mut()) else {
            return;
        };
        h.periods += 1;
        let ms = usize::try_from(late.as_millis())
            .unwrap_or(usize::MAX)
            .min(STEPS - 1);
        for c in h.at_least.iter_mut().take(ms + 1).skip(1) {
            *c += 1;
        }
    }

    /// The time to add to the budget at `now`: the lateness more than [`COVER_SHARE`] of the
    /// window's periods reached, beyond `margin` (which the budget has already), at most the
    /// maximum.
    pub fn cover(&mut self, now: Instant, margin: Duration) -> Duration {
        self.roll(now);
        let halves = [self.current.as_ref(), self.previous.as_ref()];
        let periods: u32 = halves.iter().flatten().map(|h| h.periods).sum();
        if periods == 0 {
            return Duration::ZERO;
        }
        let reached = |ms: usize| {
            halves
                .iter()
                .flatten()
                .filter_map(|h| h.at_least.get(ms))
                .sum::<u32>()
        };
        let late_ms = (1..STEPS)
            .rev()
            .find(|&ms| f64::from(reached(ms)) > COVER_SHARE * f64::from(periods))
            .unwrap_or(0);
        Duration::from_millis(late_ms as u64)
            .saturating_sub(margin)
            .min(self.max)
    }

    fn roll(&mut self, now: Instant) {
        let half = COVER_WINDOW / 2;
        let Some(cur) = self.current.as_ref() else {
            self.current = Some(Half::new(now));
            return;
        };
        let age = now.saturating_duration_since(cur.since);
        if age >= half {
            // One half on, or (after a quiet window) both are stale.
            let old = self.current.replace(Half::new(now));
            self.previous = if age >= COVER_WINDOW { None } else { old };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const PERIOD: Duration = Duration::from_millis(50);

    /// `n` periods from `t` on, every `every`-th `late`, the others 1 ms late.
    fn periods(s: &mut StallCover, t: &mut Instant, n: u32, every: u32, late: Duration) {
        for i in 0..n {
            *t += PERIOD;
            let l = if i % every == 0 { late } else { MS };
            s.on_period(*t, Some(l));
        }
    }

    /// Lateness within the margin adds nothing; a recurring stall beyond it adds the excess;
    /// capped at the maximum.
    #[test]
    fn a_recurring_stall_beyond_the_margin_is_covered() {
        let mut t = Instant::now();
        let mut s = StallCover::default();
        assert_eq!(s.cover(t, 5 * MS), Duration::ZERO, "no periods yet");
        periods(&mut s, &mut t, 100, 1, 4 * MS);
        assert_eq!(s.cover(t, 5 * MS), Duration::ZERO, "within the margin");
        // 30 ms every 4th period (a 30 ms stall every 200 ms): 25 % of the periods.
        let mut s = StallCover::default();
        periods(&mut s, &mut t, 100, 4, 30 * MS);
        assert_eq!(s.cover(t, 5 * MS), 25 * MS);
        let mut s = StallCover::new(20 * MS);
        periods(&mut s, &mut t, 100, 4, 900 * MS);
        assert_eq!(s.cover(t, 5 * MS), 20 * MS, "capped");
        let mut s = StallCover::new(Duration::ZERO);
        periods(&mut s, &mut t, 100, 4, 30 * MS);
        assert_eq!(s.cover(t, 5 * MS), Duration::ZERO, "off");
    }

    /// Rare hiccups (1 period in 20, 5 %) are not covered; periods without a wait do not count.
    #[test]
    fn rare_hiccups_and_periods_without_a_wait_are_not_covered() {
        let mut t = Instant::now();
        let mut s = StallCover::default();
        periods(&mut s, &mut t, 100, 20, 40 * MS);
        assert_eq!(s.cover(t, 5 * MS), Duration::ZERO);
        let mut s = StallCover::default();
        for i in 0..100 {
            t += PERIOD;
            s.on_period(t, (i % 4 == 0).then_some(30 * MS));
        }
        assert_eq!(
            s.cover(t, 5 * MS),
            25 * MS,
            "every period with a wait was late"
        );
    }

    /// A stall pattern is kept for at least half the window after it stops, forgotten after the
    /// whole window.
    #[test]
    fn a_pattern_is_forgotten_after_the_window() {
        let mut t = Instant::now();
        let mut s = StallCover::default();
        periods(&mut s, &mut t, 100, 2, 30 * MS);
        assert_eq!(s.cover(t, 5 * MS), 25 * MS);
        // Quiet periods (1 ms) for a little under half a window: still covered (both halves).
        let n = (COVER_WINDOW / 2).as_millis() as u32 / 50 - 2;
        periods(&mut s, &mut t, n, 1, MS);
        assert_eq!(s.cover(t, 5 * MS), 25 * MS);
        periods(&mut s, &mut t, 2 * n + 8, 1, MS);
        assert_eq!(s.cover(t, 5 * MS), Duration::ZERO, "forgotten");
        // A long gap without periods: nothing stale survives.
        periods(&mut s, &mut t, 100, 2, 30 * MS);
        assert_eq!(s.cover(t + 3 * COVER_WINDOW, 5 * MS), Duration::ZERO);
    }
}
