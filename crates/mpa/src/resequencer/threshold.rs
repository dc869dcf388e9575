//! The release threshold `T` of the resequencer (seed 001 §III-D): a count and a time, and how
//! both are sized from the MDI and the paths' rates.

use std::time::Duration;

/// Default buffer size `S` in frames: 1,024 MTU frames ≈ 1.5 MB, 12 ms of a 1 Gbit/s flow, 300 ms of
/// 40 Mbit/s (the paper's WAN ports).
pub const DEFAULT_BUFFER_FRAMES: usize = 1_024;
/// Largest `S` accepted. Each buffered frame costs one `BTreeMap` entry (~64 B with the caller's
/// packet handle) besides the packet itself, so 4,096 frames ≈ 256 KiB of bookkeeping per flow.
pub const MAX_BUFFER_FRAMES: usize = 4_096;
/// Shortest hold time: scheduling jitter of two gateway event loops and socket queues even on equal
/// paths (a few ms on this machine's netns testbed).
pub const MIN_HOLD: Duration = Duration::from_millis(5);
/// Longest hold time: beyond this a TCP sender's RTO (≥ 200 ms) fires anyway, so holding longer
/// only adds delay.
pub const MAX_HOLD: Duration = Duration::from_millis(200);
/// Hold used when nothing is known about the paths.
pub const DEFAULT_HOLD: Duration = Duration::from_millis(50);
/// The hold is this multiple of the base delay difference: queueing on the slow path adds delay the
/// base-delay MDI does not show (up to the bottleneck queue, typically about one base delay).
pub const HOLD_MARGIN: u32 = 2;
/// Smallest count threshold `T`: below a few frames, ordinary jitter between two connections would
/// trigger gap releases all the time.
pub const MIN_THRESHOLD_FRAMES: usize = 16;

/// The release threshold `T`: a count and a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Threshold {
    /// Release all buffered frames (ignoring the gap) when more than this many are buffered.
    pub frames: usize,
    /// Release all buffered frames when the oldest has waited this long.
    pub hold: Duration,
}

impl Default for Threshold {
    /// Nothing known about the paths: [`DEFAULT_HOLD`], and a count of half of [`DEFAULT_BUFFER_FRAMES`].
    fn default() -> Self {
        Threshold {
            frames: DEFAULT_BUFFER_FRAMES / 2,
            hold: DEFAULT_HOLD,
        }
    }
}

impl Threshold {
    /// `T` from the MDI of the flow's paths (seed 001 eq. 1), the smallest path delay and the paths'
    /// bandwidths (001 §III-D: "sized as a function of the MDI and the bandwidths of the selected
    /// paths"). `buffer_frames` is `S`; `frame_bytes` the typical frame (the MSS plus headers).
    ///
    /// Derivation. With delays `d_min ≤ d_max`, `MDI = d_max/(d_max+d_min) − 0.5`, so
    /// `d_max = d_min·(0.5+MDI)/(0.5−MDI)` and the delay difference is
    /// `Δ = d_max − d_min = d_min · 2·MDI / (0.5 − MDI)`.
    /// A frame sent on the slowest path arrives at most `Δ` after the frames sent after it on faster
    /// paths, so an in-order frame is never more than `Δ` late unless it was lost. Queueing adds to
    /// the base delays, hence `hold = HOLD_MARGIN·Δ + MIN_HOLD`, clamped to `[MIN_HOLD, MAX_HOLD]`.
    /// While the head waits, frames arrive at most at the sum of the paths' rates `Σc`, so a
    /// non-lost gap never has more than `hold·Σc / frame_bytes` frames behind it: that is the count
    /// `T`, clamped to `[MIN_THRESHOLD_FRAMES, S − 1]` (`T < S`, so the count release comes before the
    /// buffer is full). A gap that outlives either bound is a loss: release and go on.
    pub fn from_paths(
        mdi: f64,
        d_min: Duration,
        rates_bytes_per_s: &[u64],
        frame_bytes: usize,
        buffer_frames: usize,
    ) -> Threshold {
        // MDI is in [0, 0.5); anything else (NaN, rounding) is clamped just below the limit.
        let mdi = if mdi.is_finite() {
            mdi.clamp(0.0, 0.49)
        } else {
            0.49
        };
        let delta = d_min.as_secs_f64() * 2.0 * mdi / (0.5 - mdi);
        let hold_s = f64::from(HOLD_MARGIN) * delta + MIN_HOLD.as_secs_f64();
        let hold =
            Duration::from_secs_f64(hold_s.clamp(MIN_HOLD.as_secs_f64(), MAX_HOLD.as_secs_f64()));
        let sum: u64 = rates_bytes_per_s
            .iter()
            .fold(0u64, |a, r| a.saturating_add(*r));
        let frames = (hold.as_secs_f64() * sum as f64 / frame_bytes.max(1) as f64).ceil();
        let max = buffer_frames.clamp(2, MAX_BUFFER_FRAMES) - 1;
        // `as` saturates for floats; the clamp keeps T in range.
        let frames = (frames as usize).clamp(MIN_THRESHOLD_FRAMES.min(max), max);
        Threshold { frames, hold }
    }

    /// The same from the paths' one-way delays instead of the MDI (computes the MDI, eq. 1).
    pub fn from_delays(
        delays: &[Duration],
        rates_bytes_per_s: &[u64],
        frame_bytes: usize,
        buffer_frames: usize,
    ) -> Threshold {
        let d_min = delays.iter().copied().min().unwrap_or_default();
        let d_max = delays.iter().copied().max().unwrap_or_default();
        let sum = (d_min + d_max).as_secs_f64();
        let mdi = if sum > 0.0 {
            d_max.as_secs_f64() / sum - 0.5
        } else {
            0.0
        };
        Threshold::from_paths(mdi, d_min, rates_bytes_per_s, frame_bytes, buffer_frames)
    }
}
