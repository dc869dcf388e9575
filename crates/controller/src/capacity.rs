//! Available capacity of a path group from the source gateway's reports (seed 001 §IV-A4: "the
//! controller measures the available path capacity and recomputes bucket weights").
//!
//! What a group *carried* is not its capacity: with weighted round robin a group's share of the
//! traffic follows its weight, so weights computed from carried rates only ever confirm
//! themselves, and a group whose path got congested keeps its share and holds back every flow
//! striped over it. The gateway therefore reports, per group ([`mpa::gwchan::GroupReport`]):
//! the bytes its connections wrote, the time their writers spent **blocked** on the sockets
//! (`busy_us`), the rate the subflows' congestion windows allow now (`window_bps`,
//! Σ `cwnd · mss / srtt`), and their acked and retransmitted bytes. Per report interval:
//!
//! - **Saturated**: `busy = Δbusy_us / Δt` (clamped to 1; several connections of one group may
//!   all block) ≥ `saturated_busy` (0.5), or the subflows' retransmitted share
//!   `Δretrans / (Δacked + Δretrans)` ≥ `saturated_loss` (3 %, at least 64 KiB sent): the
//!   group's paths are what limits it (its bottlenecks drop what it sends beyond its share), so
//!   the rate it carried, `Δbytes·8 / Δt`, **is** its available capacity: the estimate becomes
//!   that rate. A path flooded by traffic that does not back off loses much of what the tunnel
//!   sends on it even when the flow it carries has collapsed far below the path's rate. Also
//!   saturated: every path of the group holds a **standing queue** (the report's
//!   `queue_delay_us`, the smallest smoothed RTT above the minimum among its busiest
//!   connection's subflows with data in flight) of at least `saturated_queue_s` (50 ms) and at
//!   least its minimum RTT, while the group keeps its windows mostly empty (the queue is
//!   someone else's; see "windows not used" below). A flooded path whose share of a striped
//!   flow fits in what the flood leaves loses (almost) nothing and, with the send time budget,
//!   never makes the writer wait,
//!   yet its queue (175 ms on a 3 Mbit/s hop with a 64 KiB buffer) holds the whole striped flow
//!   back; measured with `e2e_congestion`: in 2 runs of 13 the flood kept 103–119 ‰ on group 1,
//!   carrying 1.1 Mbit/s with no loss and 0.1 % busy, and the flow at 9–10 of ~39 Mbit/s for
//!   the whole flood. A group at its limit makes a queue of its own (50–113 ms measured on the
//!   unflooded groups of the same runs) but keeps its windows in use (in flight ≥ ½ of the window
//!   rate), and then its window rate measures its paths already.
//! - **Windows not used** (the gateway's in-flight rate, `inflight_bps`, is under
//!   [`WINDOW_USED_SHARE`] (½) of the window rate): the group carries less than its windows
//!   allow, so the window rate (a cwnd grown earlier, over the RTT of an empty queue) is only
//!   an upper bound. Measured with two striped 12 Mbit/s groups: the less used group's window
//!   rate read 80–100 Mbit/s, the estimate followed, its weight rose, it became the one at its
//!   limit, and the two swapped every report (the flow got 19 of 24 Mbit/s). Such a group's
//!   estimate falls towards a smaller window rate as below, and rises towards a larger one as
//!   below only up to the most it has carried in an interval lately (its peak, decaying with
//!   [`PEAK_TAU_S`]); beyond that it creeps up by `unused_growth_per_s` (×1.03 per second):
//!   its weight grows until it fills its windows and its window rate measures its paths again.
//!   A group whose estimate collapsed with the whole flow (every group carried little for a
//!   report) so comes back to what it carried before within a few reports.
//! - Otherwise, with a window rate: the estimate follows it (capped at the configured capacity,
//!   the max-flow of the members' ports), by an EWMA that falls fast (`alpha_down`, 0.7) and
//!   rises slowly (`alpha_up`, 0.3). A path flooded by other traffic shows a small window over a
//!   long queued RTT whether or not the tunnel saturates it (seed 001's flooded path carries
//!   little *because* the inner TCP collapses, not because it is busy); when the flood ends,
//!   the keepalives' RTT samples and the windows recover and so does the estimate.
//! - **Skipped** (its published weight is below the share striped flows use,
//!   `mpa::scheduler::STRIPE_MIN_SHARE_PER_MILLE`, and it carried under 5 % of its estimate):
//!   the windows of an unused connection say nothing new, so the estimate *probes*: it grows by
//!   `probe_growth_per_s` (×1.12 per second, ×1.25 per 2 s report, up to the configured
//!   capacity) until striped traffic returns to the group and measures it again. Under a
//!   lasting flood that re-tries the group every ~10 s for a report or two (the paper's
//!   trade-off between measuring and "accidentally contributing to congestion", seed 001 §V).
//!   Only skipped groups probe: when a flow collapses, every group carries little, and growing
//!   them all alike would change no weight and keep the flooded group in the stripe.
//! - Without a window rate (an older gateway): the estimate relaxes towards the configured
//!   capacity with time constant `recovery_s` (10 s).
//! - Never below what the group carried in the interval.
//!
//! Without a configured capacity the estimate only rises to what was carried (or the window
//! allows). A gap between reports longer than `max_gap`, or counters that went backwards (the
//! gateway restarted), restart the interval without a sample.
//!
//! Pure: the caller passes the report time; no clock, no IO.
use std::time::{Duration, Instant};

use mpa::conn_report::StandingQueue;
use serde::{Deserialize, Serialize};

/// Settings of the capacity estimate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Fraction of an interval the group's writers must be blocked for the group to count as
    /// limited by its paths.
    pub saturated_busy: f64,
    /// Retransmitted share of what its subflows sent at which the group counts as limited by
    /// its paths (its bottlenecks drop what it sends beyond its share).
    pub saturated_loss: f64,
    /// Standing queue of every path of the group (the report's `queue_delay_us`), seconds, at
    /// which the group counts as limited by its paths; it must also be at least the paths'
    /// minimum RTT (`base_rtt_us`). 0: the queue is not a signal.
    pub saturated_queue_s: f64,
    /// Time constant of the return to the configured capacity while not saturated, seconds.
    pub recovery_s: f64,
    /// Reports further apart than this (seconds) give no sample.
    pub max_gap_s: f64,
    /// EWMA weight of a window rate below the estimate.
    pub alpha_down: f64,
    /// EWMA weight of a window rate above the estimate.
    pub alpha_up: f64,
    /// Growth of an idle group's estimate per second (its probe, see the module docs).
    pub probe_growth_per_s: f64,
    /// Growth per second of the estimate of a group that carries traffic but does not use its
    /// windows (in flight < [`WINDOW_USED_SHARE`] of the window rate), up to the window rate.
    pub unused_growth_per_s: f64,
}

/// A group that carried less than this share of its estimate in an interval is idle.
const IDLE_SHARE: f64 = 0.05;

impl Default for Settings {
    fn default() -> Self {
        Self {
            saturated_busy: 0.5,
            saturated_loss: 0.03,
            saturated_queue_s: 0.05,
            recovery_s: 10.0,
            max_gap_s: 10.0,
            alpha_down: 0.7,
            alpha_up: 0.3,
            probe_growth_per_s: 1.12,
            unused_growth_per_s: 1.03,
        }
    }
}

/// The last report's counters.
#[derive(Clone, Copy, Debug)]
struct Counters {
    at: Instant,
    bytes_tx: u64,
    busy_us: u64,
    acked: u64,
    retrans: u64,
}

/// One interval's measurement, for display.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Carried rate, bit/s.
    pub rate_bps: f64,
    /// Fraction of the interval the writers were blocked, 0..=1.
    pub busy: f64,
    /// The window rate reported, bit/s (0: none).
    #[serde(default)]
    pub window_bps: f64,
    /// Retransmitted share of the bytes its busiest connection's subflows sent (`None`: too
    /// little sent, or a subflow closed).
    #[serde(default)]
    pub loss: Option<f64>,
    /// Whether the interval counted as limited by the group's paths (writers blocked at least
    /// `saturated_busy`, loss at least `saturated_loss`, or a standing queue of at least
    /// `saturated_queue_s` and the minimum RTT).
    #[serde(default)]
    pub saturated: bool,
    /// How long what its sockets hold (not yet in flight) would take at the rate it carried, seconds
    /// (`None`: nothing carried). Large when its paths are what limits it.
    #[serde(default)]
    pub backlog_s: Option<f64>,
    /// The rate of what its subflows had in flight at the report, bit/s (`None`: unknown).
    #[serde(default)]
    pub inflight_bps: Option<f64>,
    /// Whether the window rate counted (`false`: the windows were not used, the estimate held).
    #[serde(default)]
    pub window_used: bool,
    /// The standing queue of its paths at the report, seconds (`None`: nothing in flight, or an
    /// older gateway).
    #[serde(default)]
    pub queue_s: Option<f64>,
}

/// Reports of a group's subflows' acked and retransmitted bytes (cumulative, per report).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Transport {
    /// Σ bytes acked.
    pub acked: u64,
    /// Σ bytes retransmitted.
    pub retrans: u64,
    /// Bytes its sockets hold that are not in flight yet, now (a gauge, not cumulative).
    pub queued: u64,
    /// The rate of what its subflows have in flight now, bit/s (`None`: unknown, older
    /// gateways).
    pub inflight_bps: Option<u64>,
    /// The standing queue of its paths now (`None`: nothing in flight, or an older gateway).
    pub standing_queue: Option<StandingQueue>,
}

/// A group whose subflows keep less than this share of their window rate in flight does not
/// use its windows: its window rate is no measurement of its paths (see the module docs).
pub const WINDOW_USED_SHARE: f64 = 0.5;

/// Below this many bytes sent in an interval the loss ratio is not computed (a few packets
/// give no ratio).
const MIN_LOSS_BYTES: u64 = 64 * 1024;

/// The capacity estimate of one path group.
#[derive(Clone, Debug, Default)]
pub struct Estimator {
    last: Option<Counters>,
    estimate: Option<f64>,
    sample: Option<Sample>,
    /// The most it carried in an interval, decaying with [`PEAK_TAU_S`], bit/s.
    peak: f64,
}

/// Time constant of the decay of a group's peak carried rate, seconds: what it has shown it
/// can carry in the last minutes.
pub const PEAK_TAU_S: f64 = 120.0;

impl Estimator {
    /// The current estimate, bit/s (`None` before the first complete interval).
    pub fn estimate(&self) -> Option<f64> {
        self.estimate
    }

    /// The last interval's measurement.
    pub fn sample(&self) -> Option<Sample> {
        self.sample
    }

    /// When the last report arrived (the end of [`Estimator::sample`]'s interval when there is
    /// one).
    pub fn reported_at(&self) -> Option<Instant> {
        self.last.map(|c| c.at)
    }

    /// One report of the group at `at`: its cumulative counters and current window rate
    /// (bit/s, 0: unknown); `configured_bps` is the group's configured capacity (`None` or 0:
    /// unknown); `skipped`: its published weight is too small for striped flows to use it.
    /// Returns the new estimate.
    pub fn report(
        &mut self,
        settings: &Settings,
        at: Instant,
        (bytes_tx, busy_us, window_bps): (u64, u64, u64),
        transport: Transport,
        configured_bps: Option<f64>,
        skipped: bool,
    ) -> Option<f64> {
        let now = Counters {
            at,
            bytes_tx,
            busy_us,
            acked: transport.acked,
            retrans: transport.retrans,
        };
        let Some(prev) = self.last.replace(now) else {
            return self.estimate;
        };
        let dt = at.saturating_duration_since(prev.at);
        let max_gap = Duration::try_from_secs_f64(settings.max_gap_s).unwrap_or(Duration::MAX);
        if dt.is_zero() || dt > max_gap || bytes_tx < prev.bytes_tx || busy_us < prev.busy_us {
            return self.estimate;
        }
        let secs = dt.as_secs_f64();
        // u64 → f64 loses precision only above 2^53 bytes per interval: irrelevant here.
        let rate = (bytes_tx - prev.bytes_tx) as f64 * 8.0 / secs;
        let busy = ((busy_us - prev.busy_us) as f64 / 1e6 / secs).clamp(0.0, 1.0);
        let loss = match (
            transport.acked.checked_sub(prev.acked),
            transport.retrans.checked_sub(prev.retrans),
        ) {
            (Some(a), Some(r)) if a + r >= MIN_LOSS_BYTES => Some(r as f64 / (a + r) as f64),
            _ => None,
        };
        // In-flight known and under half the window: the windows are not used, so their rate
        // (grown earlier, over the RTT of an empty queue) says nothing about the paths now.
        let window_used = transport
            .inflight_bps
            .is_none_or(|f| f as f64 >= WINDOW_USED_SHARE * window_bps as f64);
        // A standing queue on paths whose windows the group keeps mostly empty is someone
        // else's: the paths are full, and what the group carries is what they leave it.
        let queue_s = transport
            .standing_queue
            .map(|q| f64::from(q.queue_us) / 1e6);
        let queued = !window_used
            && settings.saturated_queue_s > 0.0
            && transport.standing_queue.is_some_and(|q| {
                let queue = f64::from(q.queue_us) / 1e6;
                queue >= settings.saturated_queue_s && q.queue_us >= q.base_rtt_us
            });
        let saturated = busy >= settings.saturated_busy
            || loss.is_some_and(|p| p >= settings.saturated_loss)
            || queued;
        self.sample = Some(Sample {
            rate_bps: rate,
            busy,
            window_bps: window_bps as f64,
            loss,
            saturated,
            backlog_s: (rate > 0.0).then(|| transport.queued as f64 * 8.0 / rate),
            inflight_bps: transport.inflight_bps.map(|f| f as f64),
            window_used: window_bps > 0 && window_used,
            queue_s,
        });
        let configured = configured_bps.filter(|c| c.is_finite() && *c > 0.0);
        let window = (window_bps > 0).then(|| {
            let w = window_bps as f64;
            configured.map_or(w, |c| w.min(c))
        });
        // Skipped by striped flows and carrying (almost) nothing: its windows say nothing new, so
        // it probes: the estimate grows by `probe_growth_per_s` until traffic returns to it.
        let idle = skipped && self.estimate.is_some_and(|old| rate < IDLE_SHARE * old);
        self.peak = (self.peak * (-secs / PEAK_TAU_S).exp()).max(rate);
        let next = if saturated {
            rate
        } else if let (true, Some(old), Some(_)) = (idle, self.estimate, window) {
            let grown = old * settings.probe_growth_per_s.max(1.0).powf(secs);
            configured
                .map_or(grown, |c| grown.min(c.max(old)))
                .max(rate)
        } else if let (false, Some(old), Some(w)) = (window_used, self.estimate, window) {
            // Carrying less than its windows allow: the window rate is only an upper bound of
            // what its paths carry. Below the estimate it still pulls it down; above, the
            // estimate rises as usual up to what the group has carried at its peak, and beyond
            // that creeps up by `unused_growth_per_s`, so the group's weight grows until it
            // fills its windows and measures its paths again.
            let next = if w < old {
                let a = settings.alpha_down.clamp(0.0, 1.0);
                a * w + (1.0 - a) * old
            } else {
                let a = settings.alpha_up.clamp(0.0, 1.0);
                let usual = (a * w + (1.0 - a) * old).min(self.peak.max(old));
                let creep = (old * settings.unused_growth_per_s.max(1.0).powf(secs)).min(w);
                usual.max(creep)
            };
            next.max(rate)
        } else if let Some(w) = window {
            let next = match self.estimate {
                None => w,
                Some(old) => {
                    let a = if w < old {
                        settings.alpha_down
                    } else {
                        settings.alpha_up
                    };
                    let a = a.clamp(0.0, 1.0);
                    a * w + (1.0 - a) * old
                }
            };
            next.max(rate)
        } else {
            let old = self.estimate.or(configured).unwrap_or(rate);
            let relaxed = match configured {
                Some(c) => {
                    let k = if settings.recovery_s > 0.0 {
                        1.0 - (-secs / settings.recovery_s).exp()
                    } else {
                        1.0
                    };
                    old + (c - old) * k
                }
                None => old,
            };
            relaxed.max(rate)
        };
        self.estimate = Some(next);
        self.estimate
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const MBIT: f64 = 1e6;

    /// Reports every 2 s: (Mbit/s carried, busy fraction) per interval.
    fn run(est: &mut Estimator, intervals: &[(f64, f64)], configured: Option<f64>) -> Vec<f64> {
        let s = Settings::default();
        let t0 = Instant::now();
        let (mut bytes, mut busy) = (1_000u64, 5u64);
        est.report(
            &s,
            t0,
            (bytes, busy, 0),
            Transport::default(),
            configured,
            false,
        );
        let mut out = Vec::new();
        for (i, (mbps, b)) in intervals.iter().enumerate() {
            bytes += (mbps * MBIT / 8.0 * 2.0) as u64;
            busy += (b * 2e6) as u64;
            let at = t0 + Duration::from_secs(2 * (i as u64 + 1));
            out.push(
                est.report(
                    &s,
                    at,
                    (bytes, busy, 0),
                    Transport::default(),
                    configured,
                    false,
                )
                .unwrap()
                    / MBIT,
            );
        }
        out
    }

    #[test]
    fn a_congested_group_drops_to_what_it_carries_in_one_report_and_recovers() {
        let mut e = Estimator::default();
        // 10 Mbit/s configured; carries 9.5 unsaturated, then its path is congested: blocked
        // 90 % of the time at 0.5 Mbit/s; then the congestion ends (0.5 carried, not blocked).
        let v = run(
            &mut e,
            &[
                (9.5, 0.1),
                (0.5, 0.9),
                (0.5, 0.95),
                (0.5, 0.0),
                (0.5, 0.0),
                (3.0, 0.0),
            ],
            Some(10.0 * MBIT),
        );
        assert!((v[0] - 10.0).abs() < 1e-9, "{v:?}");
        assert!((v[1] - 0.5).abs() < 1e-9, "one report: {v:?}");
        assert!((v[2] - 0.5).abs() < 1e-9, "{v:?}");
        // Recovery: 0.5 + 9.5·(1 − e^{−0.2}) = 2.22, then 3.67, then ≥ 3 carried.
        assert!(
            (v[3] - (0.5 + 9.5 * (1.0 - (-0.2f64).exp()))).abs() < 1e-6,
            "{v:?}"
        );
        assert!(v[4] > v[3] && v[4] < 10.0, "{v:?}");
        assert!(v[5] > v[4], "{v:?}");
    }

    #[test]
    fn never_below_what_it_carried_when_not_saturated() {
        let mut e = Estimator::default();
        // Carries 30 with a configured 10 (the inventory underestimates the port).
        let v = run(&mut e, &[(30.0, 0.2), (30.0, 0.2)], Some(10.0 * MBIT));
        assert!(v.iter().all(|x| *x >= 30.0 - 1e-9), "{v:?}");
    }

    #[test]
    fn without_configured_capacity_the_estimate_only_rises_to_the_carried_rate() {
        let mut e = Estimator::default();
        let v = run(
            &mut e,
            &[(4.0, 0.0), (2.0, 0.0), (1.0, 0.9), (0.5, 0.1)],
            None,
        );
        assert_eq!(v, vec![4.0, 4.0, 1.0, 1.0]);
    }

    #[test]
    fn restarts_gaps_and_duplicates_give_no_sample() {
        let s = Settings::default();
        let mut e = Estimator::default();
        let t0 = Instant::now();
        assert_eq!(
            e.report(&s, t0, (1000, 0, 0), Transport::default(), None, false),
            None
        );
        assert_eq!(
            e.report(&s, t0, (2000, 0, 0), Transport::default(), None, false),
            None,
            "same instant"
        );
        let t1 = t0 + Duration::from_secs(2);
        assert_eq!(
            e.report(&s, t1, (252_000, 0, 0), Transport::default(), None, false),
            Some(1_000_000.0)
        );
        // The gateway restarted: counters from 0.
        let t2 = t1 + Duration::from_secs(2);
        assert_eq!(
            e.report(&s, t2, (10, 0, 0), Transport::default(), None, false),
            Some(1_000_000.0)
        );
        // Thirty seconds without a report.
        let t3 = t2 + Duration::from_secs(30);
        assert_eq!(
            e.report(&s, t3, (1_000_010, 0, 0), Transport::default(), None, false),
            Some(1_000_000.0)
        );
        assert_eq!(
            e.sample().unwrap().rate_bps,
            1_000_000.0,
            "the old sample stays"
        );
    }

    #[test]
    fn the_window_rate_falls_fast_rises_slowly_and_is_capped() {
        let s = Settings::default();
        let mut e = Estimator::default();
        let t0 = Instant::now();
        let at = |k: u64| t0 + Duration::from_secs(2 * k);
        let cfg = Some(80.0 * MBIT);
        let mbit = |m: f64| (m * MBIT) as u64;
        e.report(
            &s,
            at(0),
            (0, 0, mbit(12.0)),
            Transport::default(),
            cfg,
            false,
        );
        // Carrying 1 Mbit/s, not blocked, windows allow 12: the estimate is 12 (first sample).
        let v = e
            .report(
                &s,
                at(1),
                (250_000, 0, mbit(12.0)),
                Transport::default(),
                cfg,
                false,
            )
            .unwrap();
        assert!((v / MBIT - 12.0).abs() < 1e-6);
        // The path is flooded: windows allow 1.2. Falls by 0.7 per report.
        let v = e
            .report(
                &s,
                at(2),
                (500_000, 0, mbit(1.2)),
                Transport::default(),
                cfg,
                false,
            )
            .unwrap();
        assert!((v / MBIT - (0.7 * 1.2 + 0.3 * 12.0)).abs() < 1e-6, "{v}");
        let v2 = e
            .report(
                &s,
                at(3),
                (750_000, 0, mbit(1.2)),
                Transport::default(),
                cfg,
                false,
            )
            .unwrap();
        assert!(v2 < v && v2 / MBIT < 2.5, "{v2}");
        // Never below what was carried (1 Mbit/s here: 250 kB in 2 s).
        for k in 4..10 {
            let x = e
                .report(
                    &s,
                    at(k),
                    (250_000 * (k + 1), 0, mbit(0.1)),
                    Transport::default(),
                    cfg,
                    false,
                )
                .unwrap();
            assert!(x >= 1.0 * MBIT - 1.0, "{x}");
        }
        // Recovery: windows allow 500 (capped at 80); rises by 0.3 per report.
        let r1 = e
            .report(
                &s,
                at(10),
                (250_000 * 11, 0, mbit(500.0)),
                Transport::default(),
                cfg,
                false,
            )
            .unwrap();
        assert!((r1 / MBIT - (0.3 * 80.0 + 0.7 * 1.0)).abs() < 1e-3, "{r1}");
        assert_eq!(e.sample().unwrap().window_bps, 500.0 * MBIT);
    }

    #[test]
    fn a_window_not_in_use_only_creeps_up_and_a_used_one_counts() {
        // Two striped 12 Mbit/s groups (measured): the one below its limit keeps a cwnd grown
        // earlier over an empty queue's RTT (window rate 90) with little in flight (9); the one
        // at its limit has its window full (14 of 14).
        let s = Settings::default();
        let t0 = Instant::now();
        let cfg = Some(80.0 * MBIT);
        let mbit = |m: f64| (m * MBIT) as u64;
        // Report k (every 2 s) with cumulative bytes and busy µs, window and in-flight Mbit/s;
        // the new estimate in Mbit/s.
        let rep = |e: &mut Estimator, k: u64, bytes: u64, busy: u64, w: f64, f: Option<f64>| {
            let tr = Transport {
                inflight_bps: f.map(mbit),
                ..Transport::default()
            };
            let at = t0 + Duration::from_secs(2 * k);
            e.report(&s, at, (bytes, busy, mbit(w)), tr, cfg, false)
                .map_or(f64::NAN, |v| v / MBIT)
        };
        let mut e = Estimator::default();
        rep(&mut e, 0, 0, 0, 14.0, Some(14.0));
        // At its limit: 12 carried, window 14 full → the window counts (first sample: 14).
        let v = rep(&mut e, 1, 3_000_000, 0, 14.0, Some(14.0));
        assert!((v - 14.0).abs() < 1e-6, "{v}");
        assert!(e.sample().unwrap().window_used);
        // Then less used: 8 carried, window 90, 9 in flight: ×1.03 per second, not 0.3 × 90.
        let v = rep(&mut e, 2, 5_000_000, 0, 90.0, Some(9.0));
        assert!((v - 14.0 * 1.03f64.powi(2)).abs() < 1e-6, "{v}");
        let smp = e.sample().unwrap();
        assert!(!smp.window_used);
        assert_eq!(smp.inflight_bps, Some(9.0 * MBIT));
        // Five more such reports: still far below the window rate.
        let mut last = v;
        for k in 3..8 {
            last = rep(
                &mut e,
                k,
                5_000_000 + 2_000_000 * (k - 2),
                0,
                90.0,
                Some(9.0),
            );
        }
        assert!(last < 14.0 * 1.03f64.powi(14) + 1e-6, "{last}");
        assert!(last < 25.0, "{last}");
        // An unused window below the estimate still pulls it down (the paths got worse).
        let down = rep(&mut e, 8, 15_500_000, 0, 6.0, Some(1.0));
        assert!((down - (0.7 * 6.0 + 0.3 * last)).abs() < 1e-6, "{down}");
        // Collapsed with the flow (saturated at 0.4 Mbit/s for one report), then unused
        // windows again: back up as usual to what it carried before (12), creeping beyond.
        let mut c = Estimator::default();
        rep(&mut c, 0, 0, 0, 14.0, Some(14.0));
        rep(&mut c, 1, 3_000_000, 0, 14.0, Some(14.0));
        let low = rep(&mut c, 2, 3_100_000, 2_000_000, 14.0, Some(14.0));
        assert!((low - 0.4).abs() < 1e-6, "{low}");
        let mut v = low;
        for k in 3..7 {
            let next = rep(
                &mut c,
                k,
                3_100_000 + 500_000 * (k - 2),
                2_000_000,
                90.0,
                Some(5.0),
            );
            assert!(next > v, "{next} after {v}");
            v = next;
        }
        // The first report after the collapse: 0.3 × 90 + 0.7 × 0.4 capped at the peak (12);
        // the three after it only creep (×1.03 per second).
        assert!(v > 11.9 && v <= 12.0 * 1.03f64.powi(6) + 1e-6, "{v}");
        // Older gateways (in-flight unknown): the window counts as before.
        let mut old = Estimator::default();
        rep(&mut old, 0, 0, 0, 14.0, None);
        rep(&mut old, 1, 3_000_000, 0, 14.0, None);
        let v = rep(&mut old, 2, 5_000_000, 0, 90.0, None);
        assert!((v - (0.3 * 80.0 + 0.7 * 14.0)).abs() < 1e-6, "{v}");
    }

    #[test]
    fn an_idle_group_probes_upwards_until_it_carries_again() {
        let s = Settings::default();
        let mut e = Estimator::default();
        let t0 = Instant::now();
        let at = |k: u64| t0 + Duration::from_secs(2 * k);
        let cfg = Some(80.0 * MBIT);
        let mbit = |m: f64| (m * MBIT) as u64;
        e.report(
            &s,
            at(0),
            (0, 0, mbit(2.5)),
            Transport::default(),
            cfg,
            false,
        );
        assert_eq!(
            e.report(
                &s,
                at(1),
                (500_000, 0, mbit(2.5)),
                Transport::default(),
                cfg,
                false
            ),
            Some(2.5 * MBIT)
        );
        // Skipped: carries only keepalives (100 B in 2 s); its stale window stays 2.5.
        let mut v = vec![];
        for k in 2..8 {
            v.push(
                e.report(
                    &s,
                    at(k),
                    (500_000 + 100 * k, 0, mbit(2.5)),
                    Transport::default(),
                    cfg,
                    true,
                )
                .unwrap()
                    / MBIT,
            );
        }
        let g = 1.12f64.powi(2);
        assert!((v[0] - 2.5 * g).abs() < 1e-6, "{v:?}");
        assert!(
            v.windows(2).all(|w| (w[1] / w[0] - g).abs() < 1e-6),
            "{v:?}"
        );
        // Not skipped (its weight is large enough to be striped): no probe, the window rules.
        let mut f = e.clone();
        let y = f
            .report(
                &s,
                at(8),
                (500_000 + 900, 0, mbit(2.5)),
                Transport::default(),
                cfg,
                false,
            )
            .unwrap();
        assert!(
            (y / MBIT - (0.7 * 2.5 + 0.3 * v[5])).abs() < 1e-6,
            "{y} {v:?}"
        );
        // Traffic back: the window (now 30) takes over again with the EWMA.
        let x = e
            .report(
                &s,
                at(8),
                (500_000 + 800 + 2_500_000, 0, mbit(30.0)),
                Transport::default(),
                cfg,
                false,
            )
            .unwrap();
        assert!(
            (x / MBIT - (0.3 * 30.0 + 0.7 * v[5])).abs() < 1e-6,
            "{x} {v:?}"
        );
    }

    #[test]
    fn heavy_retransmission_means_saturated_even_when_not_blocked() {
        let s = Settings::default();
        let mut e = Estimator::default();
        let t0 = Instant::now();
        let at = |k: u64| t0 + Duration::from_secs(2 * k);
        let cfg = Some(80.0 * MBIT);
        let tr = |acked, retrans| Transport {
            acked,
            retrans,
            ..Transport::default()
        };
        e.report(&s, at(0), (0, 0, 20_000_000), tr(0, 0), cfg, false);
        // 250 kB carried (1 Mbit/s), windows say 20, 1 % retransmitted: the window rules.
        let v = e.report(
            &s,
            at(1),
            (250_000, 0, 20_000_000),
            tr(247_500, 2_500),
            cfg,
            false,
        );
        assert_eq!(v, Some(20_000_000.0));
        assert_eq!(e.sample().unwrap().loss, Some(0.01));
        // Flooded: 10 % retransmitted: the carried 1 Mbit/s is its capacity.
        let v = e.report(
            &s,
            at(2),
            (500_000, 0, 20_000_000),
            tr(472_500, 30_000),
            cfg,
            false,
        );
        assert_eq!(v, Some(1_000_000.0));
        // A subflow closed (sums went backwards): no loss ratio, the window rules again.
        let v = e.report(
            &s,
            at(3),
            (750_000, 0, 20_000_000),
            tr(1_000, 0),
            cfg,
            false,
        );
        assert_eq!(e.sample().unwrap().loss, None);
        assert!((v.unwrap() - (0.3 * 20e6 + 0.7 * 1e6)).abs() < 1.0);
        // Too little sent for a ratio (40 kB).
        e.report(
            &s,
            at(4),
            (790_000, 0, 20_000_000),
            tr(31_000, 10_000),
            cfg,
            false,
        );
        assert_eq!(e.sample().unwrap().loss, None);
    }

    #[test]
    fn a_standing_queue_on_every_path_means_saturated_without_loss_or_waits() {
        // Measured (`e2e_congestion`, 2 runs of 13): group 1's paths flooded, its share of
        // the striped flow fits in what the flood leaves: 1.1 Mbit/s carried, no loss, writers
        // never waiting, windows (10.7) not in use (1.4 in flight), every path 175 ms above
        // its 20 ms minimum RTT.
        let t0 = Instant::now();
        let at = |k: u64| t0 + Duration::from_secs(2 * k);
        let cfg = Some(12.0 * MBIT);
        let tr = |q: Option<(u32, u32)>, inflight| Transport {
            inflight_bps: Some(inflight),
            standing_queue: q.map(|(queue_us, base_rtt_us)| StandingQueue {
                queue_us,
                base_rtt_us,
            }),
            ..Transport::default()
        };
        let run_with = |s: &Settings, q: Option<(u32, u32)>, inflight| {
            let mut e = Estimator::default();
            e.report(s, at(0), (0, 0, 10_700_000), tr(q, inflight), cfg, false);
            // Before: 10 Mbit/s carried.
            let tr1 = tr(None, inflight);
            e.report(s, at(1), (2_500_000, 0, 10_000_000), tr1, cfg, false);
            let v = e.report(
                s,
                at(2),
                (2_775_000, 2_000, 10_700_000),
                tr(q, inflight),
                cfg,
                false,
            );
            (v.unwrap() / MBIT, e.sample().unwrap())
        };
        let run = |s: &Settings, q| run_with(s, q, 1_400_000);
        let s = Settings::default();
        let (v, smp) = run(&s, Some((175_000, 20_000)));
        assert!((v - 1.1).abs() < 1e-9, "{v}");
        assert!(smp.saturated);
        assert_eq!(smp.queue_s, Some(0.175));
        // Below 50 ms, below the minimum RTT (a long path's jitter), switched off, or not
        // reported: not saturated, the estimate stays at 10 or above (windows not in use).
        for (q, set) in [
            (Some((40_000, 20_000)), s),
            (Some((60_000, 80_000)), s),
            (
                Some((175_000, 20_000)),
                Settings {
                    saturated_queue_s: 0.0,
                    ..s
                },
            ),
            (None, s),
        ] {
            let (v, smp) = run(&set, q);
            assert!(!smp.saturated, "{q:?}");
            assert!(v >= 10.0 - 1e-9, "{q:?}: {v}");
        }
        // Its windows in use (7 of 10.7 in flight): the queue is its own, its window rate
        // measures its paths.
        let (v, smp) = run_with(&s, Some((175_000, 20_000)), 7_000_000);
        assert!(!smp.saturated && smp.window_used);
        assert!(v >= 10.0 - 1e-9, "{v}");
    }

    #[test]
    fn busy_beyond_the_interval_is_clamped() {
        let s = Settings::default();
        let mut e = Estimator::default();
        let t0 = Instant::now();
        e.report(&s, t0, (0, 0, 0), Transport::default(), None, false);
        // Three connections of one group, each blocked the whole 2 s.
        e.report(
            &s,
            t0 + Duration::from_secs(2),
            (500_000, 6_000_000, 0),
            Transport::default(),
            None,
            false,
        );
        assert_eq!(e.sample().unwrap().busy, 1.0);
        assert_eq!(e.estimate(), Some(2_000_000.0));
    }
}
