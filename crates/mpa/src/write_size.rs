//! How many bytes one write to a tunnel connection may carry (DESIGN §4, "MPTCP on unequal paths
//! depends on write size").
//!
//! The kernel's MPTCP scheduler picks a subflow for each burst of data a `sendmsg` hands it. A big
//! write (a 256 KiB batch of GSO super-packets) lands whole on whichever subflow the scheduler
//! picks, and when that subflow is a 1 Mbit/s one, every byte behind it waits at the receiver for
//! seconds: the inner TCP flow sees huge RTT swings and collapses. Small writes let the scheduler
//! decide often, so slow subflows get small pieces; but a write per 1400-byte packet costs ~14× the
//! CPU per bit at gigabit rates.
//!
//! [`WriteSizer`] makes the write size follow the connection's own send rate: one write carries
//! about [`DEFAULT_CHUNK_TIME`] worth of data at the measured rate, clamped to
//! [[`MIN_CHUNK`], `max`]. At 40 Mbit/s that is ~5 KB per write (what Table I's unequal cases need);
//! at several Gbit/s it is the whole batch, so fast alike paths keep big writes and their CPU cost.
//! Measured on the Table I 2x2 testbed, one TCP flow at rates 1:2:4:33 Mbit/s: unlimited writes
//! 7.8 Mbit/s, 4 KiB writes 29.7 (docs/mmsg.md, "Write size").
//!
//! Call order: [`WriteSizer::chunk`] before a write (the cap for that syscall),
//! [`WriteSizer::on_sent`] after it with the bytes the kernel took. Time is a parameter.

use std::time::{Duration, Instant};

/// The smallest write cap: below ~3 packets per write the syscall cost dominates and goodput fell
/// again in measurements (1400-byte writes: 24.2 Mbit/s vs 4 KiB: 29.7 at 1:2:4:33).
pub const MIN_CHUNK: usize = 4 * 1024;
/// Data per write at the measured rate: 1 ms. At most ~1000 writes per second per busy connection
/// once the cap is above [`MIN_CHUNK`], so the CPU cost per bit stays bounded at any rate.
pub const DEFAULT_CHUNK_TIME: Duration = Duration::from_millis(1);
/// The rate is measured over windows of this length (long enough to hold many writes at 40 Mbit/s,
/// short enough to follow a transfer's start within a few windows).
pub const RATE_WINDOW: Duration = Duration::from_millis(50);
/// A pause in sending longer than this ends the current window without a sample: idle time is not
/// a low rate.
pub const IDLE_GAP: Duration = Duration::from_millis(100);
/// Weight of the newest window in the rate estimate (EWMA), in 1/16ths.
const EWMA_NEW_16THS: u64 = 8;

/// Picks the cap of each write from the send rate of one connection. See the module docs.
#[derive(Debug, Clone)]
pub struct WriteSizer {
    chunk_time: Duration,
    max: usize,
    window_start: Option<Instant>,
    window_bytes: u64,
    last_sent: Option<Instant>,
    /// Estimated send rate, bytes per second (0 until the first full window).
    rate_bps: u64,
}

impl WriteSizer {
    /// A sizer that caps writes at `chunk_time` of data at the measured rate, at most `max` bytes.
    /// `chunk_time == 0` disables the adaptive cap: every write may carry `max` bytes.
    pub fn new(chunk_time: Duration, max: usize) -> Self {
        WriteSizer {
            chunk_time,
            max: max.max(MIN_CHUNK),
            window_start: None,
            window_bytes: 0,
            last_sent: None,
            rate_bps: 0,
        }
    }

    /// The most bytes the next write may carry.
    pub fn chunk(&self) -> usize {
        if self.chunk_time.is_zero() {
            return self.max;
        }
        let per_chunk = u128::from(self.rate_bps) * self.chunk_time.as_nanos() / 1_000_000_000;
        usize::try_from(per_chunk)
            .unwrap_or(usize::MAX)
            .clamp(MIN_CHUNK, self.max)
    }

    /// Records that a write of `bytes` completed at `now`.
    pub fn on_sent(&mut self, now: Instant, bytes: usize) {
        let idle = self
            .last_sent
            .is_some_and(|t| now.saturating_duration_since(t) > IDLE_GAP);
        self.last_sent = Some(now);
        if idle {
            self.window_start = None;
            self.window_bytes = 0;
        }
        let start = *self.window_start.get_or_insert(now);
        self.window_bytes = self.window_bytes.saturating_add(bytes as u64);
        let elapsed = now.saturating_duration_since(start);
        if elapsed < RATE_WINDOW {
            return;
        }
        let nanos = elapsed.as_nanos().max(1);
        let sample = u64::try_from(u128::from(self.window_bytes) * 1_000_000_000 / nanos)
            .unwrap_or(u64::MAX);
        self.rate_bps = if self.rate_bps == 0 {
            sample
        } else {
            (self.rate_bps.saturating_mul(16 - EWMA_NEW_16THS))
                .saturating_add(sample.saturating_mul(EWMA_NEW_16THS))
                / 16
        };
        self.window_start = Some(now);
        self.window_bytes = 0;
    }

    /// The current rate estimate in bytes per second (0: none yet).
    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 256 * 1024;

    /// Feeds `rate_bps` for `secs` in 100 µs steps.
    fn drive(s: &mut WriteSizer, t0: Instant, rate_bps: u64, secs: f64) -> Instant {
        let step = Duration::from_micros(100);
        let per_step = (rate_bps / 10_000) as usize;
        let mut now = t0;
        for _ in 0..(secs * 10_000.0) as usize {
            now += step;
            s.on_sent(now, per_step);
        }
        now
    }

    #[test]
    fn starts_small() {
        let s = WriteSizer::new(DEFAULT_CHUNK_TIME, MAX);
        assert_eq!(s.chunk(), MIN_CHUNK);
    }

    #[test]
    fn follows_the_rate() {
        let t0 = Instant::now();
        let mut s = WriteSizer::new(DEFAULT_CHUNK_TIME, MAX);
        // 40 Mbit/s = 5 MB/s: ~5000 bytes per 1 ms chunk.
        let now = drive(&mut s, t0, 5_000_000, 1.0);
        let c = s.chunk();
        assert!((4_500..=5_500).contains(&c), "chunk {c}");
        // 4 Gbit/s = 500 MB/s: 500 KB per ms, capped at MAX.
        drive(&mut s, now, 500_000_000, 1.0);
        assert_eq!(s.chunk(), MAX);
    }

    #[test]
    fn slow_rates_keep_the_minimum() {
        let mut s = WriteSizer::new(DEFAULT_CHUNK_TIME, MAX);
        drive(&mut s, Instant::now(), 125_000, 1.0); // 1 Mbit/s
        assert_eq!(s.chunk(), MIN_CHUNK);
    }

    #[test]
    fn zero_chunk_time_disables_the_cap() {
        let s = WriteSizer::new(Duration::ZERO, MAX);
        assert_eq!(s.chunk(), MAX);
    }

    #[test]
    fn idle_time_is_not_a_low_rate() {
        let t0 = Instant::now();
        let mut s = WriteSizer::new(DEFAULT_CHUNK_TIME, MAX);
        let now = drive(&mut s, t0, 50_000_000, 0.5);
        let before = s.chunk();
        // Small writes after 10 s of silence must not drag the estimate down.
        s.on_sent(now + Duration::from_secs(10), 100);
        s.on_sent(now + Duration::from_secs(10) + RATE_WINDOW / 2, 100);
        assert_eq!(s.chunk(), before);
    }

    #[test]
    fn huge_inputs_do_not_overflow() {
        let t0 = Instant::now();
        let mut s = WriteSizer::new(Duration::from_secs(3600), usize::MAX);
        s.on_sent(t0, usize::MAX);
        s.on_sent(t0 + RATE_WINDOW, usize::MAX);
        assert!(s.chunk() >= MIN_CHUNK);
        assert!(s.rate_bps() > 0);
    }
}
