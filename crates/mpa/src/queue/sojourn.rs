//! How long packets wait in a connection's queue: a fixed-bucket histogram of the sojourn time
//! (enqueue to dequeue) of every packet the queue hands out to send, per class
//! ([`super::FairQueue::sojourn`]). Exported by `mmsg` as `mms_gateway_queue_sojourn_seconds`
//! (docs/metrics.md).
//!
//! Cost per packet: the enqueue timestamp the queue keeps anyway for CoDel, and at dequeue one
//! scan of [`SOJOURN_BOUNDS_NS`] (at most 12 compares) and three additions. No allocation: the
//! histogram is a fixed array inside the queue.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Upper bounds of the buckets in nanoseconds (`le`, inclusive), from 100 µs (a queue that does
/// not stand) to 1 s (far past CoDel's 100 ms interval); a last bucket takes the rest (`+Inf`).
/// Around CoDel's 5 ms target the buckets are 1-2.5-5-10 ms, so `histogram_quantile` answers
/// whether the standing queue stays near target.
pub const SOJOURN_BOUNDS_NS: [u64; 12] = [
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    1_000_000_000,
];

/// Buckets of [`SojournHistogram`]: one per bound plus `+Inf`.
pub const SOJOURN_BUCKETS: usize = SOJOURN_BOUNDS_NS.len() + 1;

/// Sojourn times seen at dequeue: per-bucket counts (not cumulative), their sum and count.
/// Monotonic like a counter (never reset), so `rate()` of it works.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SojournHistogram {
    /// Packets per bucket: `buckets[i]` counts sojourns in `(bound[i-1], bound[i]]`, the last
    /// one those above the last bound.
    pub buckets: [u64; SOJOURN_BUCKETS],
    /// Sum of the sojourn times in nanoseconds.
    pub sum_ns: u64,
    /// Packets recorded.
    pub count: u64,
}

impl SojournHistogram {
    /// Records one packet's sojourn time.
    #[inline]
    pub fn record(&mut self, sojourn: Duration) {
        let ns = u64::try_from(sojourn.as_nanos()).unwrap_or(u64::MAX);
        let i = SOJOURN_BOUNDS_NS
            .iter()
            .position(|&b| ns <= b)
            .unwrap_or(SOJOURN_BOUNDS_NS.len());
        if let Some(b) = self.buckets.get_mut(i) {
            *b += 1;
        }
        self.sum_ns = self.sum_ns.saturating_add(ns);
        self.count += 1;
    }

    /// Adds `other`'s counts to these (several connections of one class).
    pub fn merge(&mut self, other: &SojournHistogram) {
        for (a, b) in self.buckets.iter_mut().zip(other.buckets) {
            *a = a.saturating_add(b);
        }
        self.sum_ns = self.sum_ns.saturating_add(other.sum_ns);
        self.count = self.count.saturating_add(other.count);
    }

    /// The sum in seconds.
    pub fn sum_seconds(&self) -> f64 {
        self.sum_ns as f64 / 1e9
    }

    /// (upper bound in seconds, packets in that bucket) per bucket, the last bound
    /// `f64::INFINITY`; counts are per bucket, not cumulative.
    pub fn buckets_seconds(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        SOJOURN_BOUNDS_NS
            .iter()
            .map(|&b| b as f64 / 1e9)
            .chain(std::iter::once(f64::INFINITY))
            .zip(self.buckets.iter().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_sojourn_lands_in_the_first_bucket_whose_bound_it_does_not_exceed() {
        let mut h = SojournHistogram::default();
        h.record(Duration::ZERO);
        h.record(Duration::from_micros(100)); // on the bound: `le` is inclusive
        h.record(Duration::from_micros(101));
        h.record(Duration::from_millis(5));
        h.record(Duration::from_millis(7));
        h.record(Duration::from_secs(3));
        h.record(Duration::MAX);
        assert_eq!(h.count, 7);
        assert_eq!(h.buckets[0], 2);
        assert_eq!(h.buckets[1], 1);
        assert_eq!(h.buckets[5], 1, "5 ms is in le=0.005");
        assert_eq!(h.buckets[6], 1, "7 ms is in le=0.01");
        assert_eq!(h.buckets[SOJOURN_BUCKETS - 1], 2, "+Inf");
        assert_eq!(h.buckets.iter().sum::<u64>(), h.count);
        assert_eq!(h.sum_ns, u64::MAX, "the sum saturates");
        let b: Vec<(f64, u64)> = h.buckets_seconds().collect();
        assert_eq!(b.len(), SOJOURN_BUCKETS);
        assert_eq!(b[5], (0.005, 1));
        assert_eq!(b[SOJOURN_BUCKETS - 1], (f64::INFINITY, 2));
        let mut m = SojournHistogram::default();
        m.record(Duration::from_millis(2));
        m.merge(&m.clone());
        assert_eq!((m.count, m.buckets[4], m.sum_ns), (2, 2, 4_000_000));
        assert!((m.sum_seconds() - 0.004).abs() < 1e-12);
    }
}
