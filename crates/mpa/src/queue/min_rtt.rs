//! The minimum RTT of each subflow that the send time budget ([`super::inflight`]) is made of:
//! the kernel's `tcpi_min_rtt`, unless the path's RTT rose under the live subflow.
//!
//! Why: the kernel keeps a 300 s windowed minimum (`net.ipv4.tcp_min_rtt_wlen`). When a path's
//! RTT rises under a live subflow (`ssc` moves a group's member path from the direct hop to a
//! transit branch, a WAN re-routes), the kernel's figure stays the old path's for five minutes.
//! The budget, rate × (gain × min RTT + margin), then falls below one round trip of the new path,
//! the delivered rate follows it, and the next budget, made of that rate, is smaller again: a
//! fixed point at a fraction of the paths' rate (docs/ssc.md "Intermittent failure": 4.2–5.2 of
//! ~15 Mbit/s after a member moved from an 8 ms path to a 24 ms one).
//!
//! A budget at its aim keeps a subflow's smoothed RTT near gain × min RTT + margin (the queue it
//! admits beyond the bandwidth-delay product). A subflow that carries the connection (the budget
//! decides which: not slow, not over-fed) and whose smoothed RTT stayed above that for
//! [`SUSPECT_AFTER`] of backlogged time has a path longer than its minimum says, or a queue the
//! budget did not make (another sender's, a rate that fell). Then the connection probes, like
//! BBR's PROBE_RTT but gentler: for [`PROBE_RTTS`] × the subflows' longest smoothed RTT (at
//! least [`PROBE_TIME`]) the budget is [`PROBE_GAIN`] × each subflow's smoothed RTT less the
//! budget's allowance worth of its rate: where the queue is ours (the smoothed RTT at the
//! budget's aim, gain × min RTT + allowance) that is one BDP, so the queues drain while the
//! paths stay nearly busy; where another sender's queue holds the RTT up it is half the
//! in-flight the subflow needs, so every subflow keeps sending and gets the ACKs that measure
//! it (with half the kernel's stale minimum's worth, a few kB, the MPTCP scheduler gave the
//! slower subflows nothing and their minimum stayed stale: Table VI, docs/results.md "A queue
//! that is not ours"). An over-fed subflow gets half its minimum RTT's worth. Each subflow's
//! lowest smoothed RTT during the probe, among samples with fresh ACKs, is its path's RTT
//! without our queue. Where that is at least [`RAISED`] × the kernel's
//! minimum, it replaces it until the next probe, [`PROBED_KEEP`] later (the path may have come
//! back); otherwise the kernel's stays. A smoothed RTT below the probed minimum lowers it at once
//! (a path that got shorter). Probes start at most once per [`PROBED_KEEP`], so a queue that is
//! not ours (cross traffic) costs at most one probe per period.
//!
//! No IO, no clock reads: time is a parameter.

use std::time::{Duration, Instant};

/// Backlogged time a subflow's smoothed RTT must stay above the budget's aim before the
/// connection probes.
pub const SUSPECT_AFTER: Duration = Duration::from_secs(1);
/// Shortest probe.
pub const PROBE_TIME: Duration = Duration::from_millis(200);
/// A probe lasts at least this many of its subflows' longest smoothed RTT at its start (their
/// queues drain in about one, the ACKs of what is sent then take another, and the smoothed RTT
/// needs a third to come down to them).
pub const PROBE_RTTS: u32 = 3;
/// The budget during a probe: this × (smoothed RTT − allowance) worth of each subflow's rate
/// (the BDP where the queue is ours and the RTT at the budget's aim: the queues drain; half
/// the in-flight needed where the queue is another sender's).
pub const PROBE_GAIN: f64 = 0.5;
/// A probed RTT replaces the kernel's minimum only when it is at least this factor above it
/// (smaller rises still fit in the budget's gain).
pub const RAISED: f64 = 1.5;
/// How long a probed minimum is kept before it is probed again, and the least time between
/// two probes' starts.
pub const PROBED_KEEP: Duration = Duration::from_secs(10);

/// One subflow's minimum RTT (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathRtt {
    /// `tcpi_min_rtt` at the last sample.
    kernel: Duration,
    /// The RTT a probe measured, where it replaces the kernel's.
    probed: Option<Duration>,
    /// The lowest smoothed RTT of the running probe.
    low: Option<Duration>,
    /// Backlogged time its smoothed RTT has stayed above the budget's aim.
    suspect: Duration,
    /// `tcpi_bytes_acked` at the last sample: a smoothed RTT counts in a probe only when ACKs
    /// came since (a subflow that sent nothing keeps the RTT of before).
    acked: u64,
}

impl PathRtt {
    /// The minimum RTT the budget uses: the probed one where a probe found the path longer,
    /// else the kernel's.
    pub fn min_rtt(&self) -> Duration {
        self.probed.map_or(self.kernel, |p| p.max(self.kernel))
    }

    /// The kernel's minimum at the last sample.
    pub fn kernel(&self) -> Duration {
        self.kernel
    }

    /// The probed minimum in use, if any.
    pub fn probed(&self) -> Option<Duration> {
        self.probed
    }

    /// One sample: the kernel's minimum and smoothed RTT (zero: none yet), the bytes
    /// acknowledged so far, whether a probe runs.
    pub fn on_sample(&mut self, kernel: Duration, srtt: Duration, acked: u64, probing: bool) {
        self.kernel = kernel;
        let fresh = acked > self.acked;
        self.acked = acked;
        if srtt.is_zero() || !fresh {
            if !probing {
                self.low = None;
            }
            return;
        }
        if let Some(p) = self.probed {
            if srtt < p {
                // The path got shorter (or the probe's figure held some queue): follow it down,
                // back to the kernel's once it is close.
                let raised = srtt.as_secs_f64() >= RAISED * kernel.as_secs_f64();
                self.probed = raised.then_some(srtt);
            }
        }
        if probing {
            self.low = Some(self.low.map_or(srtt, |l| l.min(srtt)));
        } else {
            self.low = None;
        }
    }

    /// Counts `dt` of backlogged time against a smoothed RTT above `aim` (the budget's gain ×
    /// min RTT + allowance); true once it stayed there [`SUSPECT_AFTER`].
    pub fn suspect(&mut self, srtt: Duration, aim: Duration, dt: Duration) -> bool {
        if srtt > aim {
            self.suspect += dt;
        } else {
            self.suspect = Duration::ZERO;
        }
        self.suspect >= SUSPECT_AFTER
    }

    /// The probe ended: its lowest smoothed RTT replaces the kernel's minimum if at least
    /// [`RAISED`] × above it. Returns the probed RTT when it does. A subflow that got no ACK
    /// during the probe keeps what it had.
    pub fn end_probe(&mut self) -> Option<Duration> {
        self.suspect = Duration::ZERO;
        let Some(low) = self.low.take() else {
            return self.probed;
        };
        let raised = low.as_secs_f64() >= RAISED * self.kernel.as_secs_f64();
        self.probed = raised.then_some(low);
        self.probed
    }
}

/// The connection's probe (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RttProbe {
    /// When the running probe ends.
    until: Option<Instant>,
    /// When the last probe started.
    last: Option<Instant>,
    /// Probes started.
    count: u64,
}

/// What [`RttProbe::on_sample`] says about this sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbePhase {
    /// No probe.
    Off,
    /// A probe runs.
    Probing,
    /// The probe ended with this sample: each subflow's [`PathRtt::end_probe`].
    Ended,
}

impl RttProbe {
    /// Where the probe stands at `now`.
    pub fn on_sample(&mut self, now: Instant) -> ProbePhase {
        match self.until {
            Some(u) if now >= u => {
                self.until = None;
                ProbePhase::Ended
            }
            Some(_) => ProbePhase::Probing,
            None => ProbePhase::Off,
        }
    }

    /// Whether a probe may start at `now` (none runs, none started in the last [`PROBED_KEEP`]).
    pub fn may_start(&self, now: Instant) -> bool {
        self.until.is_none()
            && self
                .last
                .is_none_or(|l| now.saturating_duration_since(l) >= PROBED_KEEP)
    }

    /// Starts a probe at `now` over paths whose longest smoothed RTT is `longest`.
    pub fn start(&mut self, now: Instant, longest: Duration) {
        self.until = Some(now + PROBE_TIME.max(longest * PROBE_RTTS));
        self.last = Some(now);
        self.count += 1;
    }

    /// Whether a probe runs.
    pub fn probing(&self) -> bool {
        self.until.is_some()
    }

    /// Probes started so far.
    pub fn count(&self) -> u64 {
        self.count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_probe_that_finds_a_longer_path_replaces_the_kernels_minimum() {
        let mut p = PathRtt::default();
        p.on_sample(20 * MS, 60 * MS, 1, false);
        assert_eq!(p.min_rtt(), 20 * MS);
        // A probe: the queue drains, the smoothed RTT comes down to the path's 61 ms.
        for (i, srtt) in [64, 62, 61, 61].into_iter().enumerate() {
            p.on_sample(20 * MS, srtt * MS, 2 + i as u64, true);
        }
        assert_eq!(p.end_probe(), Some(61 * MS));
        assert_eq!(p.min_rtt(), 61 * MS);
        // The path gets shorter again: the probed figure follows, then gives way to the kernel's.
        p.on_sample(20 * MS, 40 * MS, 10, false);
        assert_eq!(p.min_rtt(), 40 * MS);
        p.on_sample(20 * MS, 22 * MS, 11, false);
        assert_eq!((p.min_rtt(), p.probed()), (20 * MS, None));
    }

    #[test]
    fn a_probe_that_finds_the_kernels_minimum_changes_nothing() {
        let mut p = PathRtt::default();
        for (i, srtt) in [45, 30, 23].into_iter().enumerate() {
            p.on_sample(20 * MS, srtt * MS, 1 + i as u64, true);
        }
        assert_eq!(p.end_probe(), None, "23 ms is within 1.5 x 20");
        assert_eq!(p.min_rtt(), 20 * MS);
        // No probe ran: nothing to end.
        assert_eq!(p.end_probe(), None);
    }

    /// A subflow that got no ACK during a probe (it sent nothing: its RTT is the one from
    /// before the probe, queue included) keeps what it had.
    #[test]
    fn a_subflow_without_acks_in_the_probe_keeps_its_minimum() {
        let mut p = PathRtt::default();
        p.on_sample(20 * MS, 90 * MS, 5, false);
        for _ in 0..4 {
            p.on_sample(20 * MS, 90 * MS, 5, true);
        }
        assert_eq!(p.end_probe(), None);
        assert_eq!(p.min_rtt(), 20 * MS);
        // One that had a probed minimum keeps it.
        let mut q = PathRtt::default();
        for (i, srtt) in [70, 61].into_iter().enumerate() {
            q.on_sample(20 * MS, srtt * MS, 1 + i as u64, true);
        }
        assert_eq!(q.end_probe(), Some(61 * MS));
        q.on_sample(20 * MS, 120 * MS, 9, false);
        q.on_sample(20 * MS, 120 * MS, 9, true);
        assert_eq!(q.end_probe(), Some(61 * MS));
    }

    #[test]
    fn suspicion_needs_a_second_of_backlogged_samples_above_the_aim() {
        let mut p = PathRtt::default();
        let aim = 45 * MS;
        for _ in 0..19 {
            assert!(!p.suspect(60 * MS, aim, 50 * MS));
        }
        // One sample at the aim starts the count again.
        assert!(!p.suspect(45 * MS, aim, 50 * MS));
        for _ in 0..19 {
            assert!(!p.suspect(60 * MS, aim, 50 * MS));
        }
        assert!(p.suspect(60 * MS, aim, 50 * MS));
        // Time that was not backlogged does not count.
        let mut q = PathRtt::default();
        for _ in 0..100 {
            assert!(!q.suspect(60 * MS, aim, Duration::ZERO));
        }
    }

    #[test]
    fn probes_last_three_round_trips_and_start_once_per_period() {
        let t0 = Instant::now();
        let mut r = RttProbe::default();
        assert!(r.may_start(t0));
        r.start(t0, 100 * MS);
        assert!(!r.may_start(t0 + 50 * MS), "one runs");
        assert_eq!(r.on_sample(t0 + 250 * MS), ProbePhase::Probing);
        assert_eq!(r.on_sample(t0 + 300 * MS), ProbePhase::Ended);
        assert_eq!(r.on_sample(t0 + 350 * MS), ProbePhase::Off);
        assert!(!r.may_start(t0 + 5 * PROBE_TIME));
        assert!(r.may_start(t0 + PROBED_KEEP));
        r.start(t0 + PROBED_KEEP, MS);
        assert_eq!(
            r.on_sample(t0 + PROBED_KEEP + PROBE_TIME),
            ProbePhase::Ended,
            "short paths: PROBE_TIME"
        );
        assert_eq!(r.count(), 2);
    }
}
