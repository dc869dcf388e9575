//! Which subflows of a busy connection are too slow to be worth their head-of-line cost, and
//! when to try them again (issue #16 "Unequal paths"; docs/mmsg.md "Slow subflows").
//!
//! MPTCP delivers in order: a segment sent on a 1 Mbit/s subflow whose bottleneck queue holds
//! 0.5 s keeps every byte the fast subflows carried meanwhile out of the receiver and in the
//! sender's buffer. On Table I's 1:2:4:33 the 33 Mbit/s subflow then idles for want of window
//! and one TCP flow gets 27–31 Mbit/s; with the 1 and 2 Mbit/s subflows marked backup
//! (MP_PRIO: the kernel schedules onto a backup subflow only when no other is usable) it got
//! 33–34. The policy here decides that marking from what each subflow delivered:
//!
//! - A round is one sample of every subflow's `tcpi_bytes_acked` and smoothed RTT (once a
//!   second).
//! - A subflow is **slow** in a round when it delivered less than `share` of what the
//!   connection's active subflows delivered together, or of the most they delivered in a round
//!   of the last [`REFERENCE_WINDOW`] if that is more, **and** its smoothed RTT is more than
//!   [`RTT_FACTOR`] times that of the subflow that delivered most, and at least [`RTT_EXCESS`]
//!   longer: data sent on it arrives that much later, and holds the fast subflows' data at the
//!   receiver meanwhile (a few milliseconds, as on a LAN or a CPU-bound host, cost nothing worth
//!   a path). The RTT test is
//!   what keeps a lightly loaded connection's idle subflows: their RTT is their path's, not a
//!   queue's, however little the kernel's scheduler gave them. (The writer is not saturated in
//!   the case this is for: one inner TCP flow, held back by the head-of-line delay, leaves the
//!   tunnel's queue empty most of the time.)
//!   Why the recent best and not only this round's total: the head-of-line delay a slow
//!   subflow causes slows the whole connection, so its share of that depressed total looks
//!   larger than it is. Measured on Table I's 2:4:8:26 with the send time budget (whose cap
//!   follows the delivered rate): a probed 4 Mbit/s subflow carried 1.6 of ~20 Mbit/s (8 %,
//!   over the 6.25 % share) where the connection had carried 34 without it, and stayed active
//!   for 15 s at 14–22 Mbit/s (docs/results.md "Table I with the send time budget").
//! - Slow in [`SLOW_ROUNDS`] rounds in a row, it is demoted (marked backup). The subflow that
//!   delivered most is never demoted, so a connection always keeps an active subflow.
//! - A demoted subflow carries nothing, so it tells nothing: after its probe interval (first
//!   [`PROBE_FIRST`], doubling each time it is found slow again, at most [`PROBE_MAX`]) it is
//!   made active again and judged afresh; one slow round demotes a probed subflow again (the
//!   probe costs head-of-line delay while it lasts). One that is no longer slow stays active and
//!   its interval starts over. A probe falls due only in a loaded round (one that carried
//!   [`MIN_JUDGED_RATE`]): probed while the connection idles, the subflow would be active when
//!   the next transfer starts and cost it head-of-line delay until a loaded round judged it.
//! - A subflow not seen in a round is forgotten (a re-created subflow starts active).
//!
//! The backup flag also keeps the kernel's failover: when every active subflow is gone, the
//! kernel sends on the backup ones.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// A slow subflow's smoothed RTT is more than this many times the fastest subflow's.
pub const RTT_FACTOR: u32 = 2;
/// A slow subflow's smoothed RTT is also at least this much longer than the fastest subflow's.
pub const RTT_EXCESS: Duration = Duration::from_millis(10);
/// Rounds in a row a subflow must be slow in before it is demoted.
pub const SLOW_ROUNDS: u8 = 2;
/// First probe of a demoted subflow, after it was demoted.
pub const PROBE_FIRST: Duration = Duration::from_secs(10);
/// Longest probe interval.
pub const PROBE_MAX: Duration = Duration::from_secs(80);
/// Rounds further apart than this measure nothing (the connection was not sampled, e.g. idle):
/// the rates of such a round are not judged.
pub const MAX_ROUND_GAP: Duration = Duration::from_secs(3);
/// How long the most a connection delivered in one round stays its reference rate for the
/// share test (see the module docs).
pub const REFERENCE_WINDOW: Duration = Duration::from_secs(10);
/// Rounds kept for the reference rate (a bound on memory if rounds come faster than planned).
pub const MAX_REFERENCE_ROUNDS: usize = 64;
/// A round must have carried at least this much (bytes per second over the active subflows) to
/// judge shares: below it the shares are a few segments' noise.
pub const MIN_JUDGED_RATE: u64 = 125_000;

/// One subflow in one round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoundSample<K> {
    /// The subflow (its local and remote socket address, for example).
    pub key: K,
    /// ESTABLISHED (others are ignored and forgotten).
    pub established: bool,
    /// `tcpi_bytes_acked`.
    pub bytes_acked: u64,
    /// `tcpi_rtt` (zero: no sample yet; such a subflow is not judged).
    pub srtt: Duration,
}

/// What the caller must do to one subflow: mark it backup (`true`) or active (`false`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark<K> {
    /// The subflow.
    pub key: K,
    /// Backup (`true`: demoted) or active again (`false`: probed).
    pub backup: bool,
}

#[derive(Debug, Clone)]
struct Entry {
    bytes_acked: u64,
    backup: bool,
    slow_rounds: u8,
    /// While demoted: when it is probed.
    probe_at: Option<Instant>,
    /// Interval of its next demotion.
    interval: Duration,
    /// It was probed and has not been judged since.
    probing: bool,
}

/// The slow-subflow policy of one connection (see the module documentation).
#[derive(Debug, Clone)]
pub struct SlowSubflows<K> {
    share: f64,
    last_round: Option<Instant>,
    /// The loaded rounds of the last [`REFERENCE_WINDOW`]: when, and what the active subflows
    /// delivered (bytes per second); at most [`MAX_REFERENCE_ROUNDS`].
    recent: VecDeque<(Instant, f64)>,
    subflows: BTreeMap<K, Entry>,
}

impl<K: Ord + Copy> SlowSubflows<K> {
    /// A policy that demotes subflows delivering less than `share` (0..1) of the connection's
    /// rate; `share` ≤ 0 (or NaN) never demotes.
    pub fn new(share: f64) -> Self {
        SlowSubflows {
            share: if share.is_nan() { 0.0 } else { share },
            last_round: None,
            recent: VecDeque::new(),
            subflows: BTreeMap::new(),
        }
    }

    /// Subflows currently demoted.
    pub fn demoted(&self) -> usize {
        self.subflows.values().filter(|e| e.backup).count()
    }

    /// One round at `now`: every subflow of the connection with its counters. Returns the marks
    /// to apply.
    pub fn round(&mut self, now: Instant, samples: &[RoundSample<K>]) -> Vec<Mark<K>> {
        let gap = self.last_round.map(|t| now.saturating_duration_since(t));
        self.last_round = Some(now);
        self.subflows
            .retain(|k, _| samples.iter().any(|s| s.established && s.key == *k));
        // Deltas of the subflows known before (a new one has no rate yet).
        let mut rates: Vec<(K, u64, Duration)> = Vec::new();
        for s in samples.iter().filter(|s| s.established) {
            match self.subflows.get_mut(&s.key) {
                Some(e) => {
                    let d = s.bytes_acked.saturating_sub(e.bytes_acked);
                    e.bytes_acked = s.bytes_acked;
                    if !e.backup && !s.srtt.is_zero() {
                        rates.push((s.key, d, s.srtt));
                    }
                }
                None => {
                    self.subflows.insert(
                        s.key,
                        Entry {
                            bytes_acked: s.bytes_acked,
                            backup: false,
                            slow_rounds: 0,
                            probe_at: None,
                            interval: PROBE_FIRST,
                            probing: false,
                        },
                    );
                }
            }
        }
        let mut marks = Vec::new();
        let total: u64 = rates.iter().map(|(_, d, _)| d).sum();
        let loaded = self.share > 0.0
            && gap.is_some_and(|g| {
                g <= MAX_ROUND_GAP
                    && !g.is_zero()
                    && total as f64 / g.as_secs_f64() >= MIN_JUDGED_RATE as f64
            });
        // This round's rate, and the most of the recent rounds (the share test's reference).
        let secs = gap.map_or(0.0, |g| g.as_secs_f64());
        let rate = if secs > 0.0 { total as f64 / secs } else { 0.0 };
        while self.recent.front().is_some_and(|&(t, _)| {
            now.saturating_duration_since(t) > REFERENCE_WINDOW
                || self.recent.len() >= MAX_REFERENCE_ROUNDS
        }) {
            self.recent.pop_front();
        }
        if loaded {
            self.recent.push_back((now, rate));
        }
        let best = self.recent.iter().map(|&(_, r)| r).fold(0.0f64, f64::max);
        let reference = (total as f64).max(best * secs);
        if loaded && rates.len() >= 2 {
            let fastest = rates
                .iter()
                .max_by_key(|(_, d, _)| *d)
                .map(|&(k, _, rtt)| (k, rtt));
            if let Some((fastest, fast_rtt)) = fastest {
                for (k, d, rtt) in &rates {
                    let Some(e) = self.subflows.get_mut(k) else {
                        continue;
                    };
                    let slow = *k != fastest
                        && (*d as f64) < self.share * reference
                        && *rtt > fast_rtt * RTT_FACTOR
                        && *rtt >= fast_rtt + RTT_EXCESS;
                    if !slow {
                        e.slow_rounds = 0;
                        if e.probing {
                            // Found useful again: a later demotion starts over.
                            e.probing = false;
                            e.interval = PROBE_FIRST;
                        }
                        continue;
                    }
                    e.slow_rounds = e.slow_rounds.saturating_add(1);
                    // A probe costs head-of-line delay while it lasts: one slow round ends it.
                    if e.slow_rounds >= SLOW_ROUNDS || e.probing {
                        if e.probing {
                            e.interval = (e.interval * 2).min(PROBE_MAX);
                        }
                        e.backup = true;
                        e.slow_rounds = 0;
                        e.probing = false;
                        e.probe_at = Some(now + e.interval);
                        marks.push(Mark {
                            key: *k,
                            backup: true,
                        });
                    }
                }
            }
        }
        for (k, e) in &mut self.subflows {
            if loaded && e.backup && e.probe_at.is_some_and(|t| now >= t) {
                e.backup = false;
                e.probe_at = None;
                e.probing = true;
                marks.push(Mark {
                    key: *k,
                    backup: false,
                });
            }
        }
        marks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);
    const MS: Duration = Duration::from_millis(1);

    /// Samples of subflows 1..=n whose counters grew by `rates` bytes per round since round 0,
    /// with smoothed RTTs `rtts`.
    fn with_rtts(round: u64, rates: &[u64], rtts: &[Duration]) -> Vec<RoundSample<u8>> {
        rates
            .iter()
            .zip(rtts)
            .enumerate()
            .map(|(i, (r, rtt))| RoundSample {
                key: i as u8 + 1,
                established: true,
                bytes_acked: round * r,
                srtt: *rtt,
            })
            .collect()
    }

    /// Like [`with_rtts`], every subflow queued (200 ms) but the fastest (40 ms): Table I's
    /// bottlenecks, where the slow subflows' queues hold far longer than the fast one's.
    fn samples(round: u64, rates: &[u64]) -> Vec<RoundSample<u8>> {
        let max = rates.iter().copied().max().unwrap_or(0);
        let rtts: Vec<Duration> = rates
            .iter()
            .map(|&r| if r == max { 40 * MS } else { 200 * MS })
            .collect();
        with_rtts(round, rates, &rtts)
    }

    /// Table I's 1:2:4:33 in bytes per second.
    const TABLE1: [u64; 4] = [125_000, 250_000, 500_000, 4_125_000];

    #[test]
    fn slow_queued_subflows_are_demoted_after_two_rounds() {
        let t0 = Instant::now();
        let mut p = SlowSubflows::new(1.0 / 16.0);
        assert!(p.round(t0, &samples(0, &TABLE1)).is_empty(), "first sight");
        assert!(
            p.round(t0 + S, &samples(1, &TABLE1)).is_empty(),
            "slow once"
        );
        let m = p.round(t0 + 2 * S, &samples(2, &TABLE1));
        // 1 and 2 Mbit/s are below 1/16 of 40; 4 Mbit/s (10 %) is not.
        assert_eq!(
            m,
            vec![
                Mark {
                    key: 1,
                    backup: true
                },
                Mark {
                    key: 2,
                    backup: true
                }
            ]
        );
        assert_eq!(p.demoted(), 2);
    }

    #[test]
    fn lightly_used_subflows_without_a_queue_stay_active() {
        // Light load: the kernel put almost everything on one subflow; the others' RTT is their
        // path's (no queue), within the factor of the busy one's.
        let t0 = Instant::now();
        let rates = [1_000, 1_000, 1_000, 400_000];
        for rtts in [[20 * MS; 4], [35 * MS, 30 * MS, 25 * MS, 20 * MS]] {
            let mut p = SlowSubflows::new(1.0 / 16.0);
            for r in 0..10 {
                assert!(p
                    .round(t0 + r as u32 * S, &with_rtts(r, &rates, &rtts))
                    .is_empty());
            }
        }
        // Slow in one round, then not (its RTT came down), then slow again: no two in a row.
        let mut p = SlowSubflows::new(1.0 / 16.0);
        for (r, rtt) in [200, 200, 30, 200, 30, 200].iter().enumerate() {
            let r = r as u64;
            let rtts = [*rtt * MS, 20 * MS];
            assert!(p
                .round(t0 + r as u32 * S, &with_rtts(r, &[1_000, 400_000], &rtts))
                .is_empty());
        }
        // A subflow without an RTT sample yet is not judged.
        let mut p = SlowSubflows::new(1.0 / 16.0);
        for r in 0..5 {
            let rtts = [Duration::ZERO, 20 * MS];
            assert!(p
                .round(t0 + r as u32 * S, &with_rtts(r, &[1_000, 400_000], &rtts))
                .is_empty());
        }
    }

    #[test]
    fn equal_or_mildly_unequal_subflows_stay_active() {
        let t0 = Instant::now();
        for rates in [[1_250_000; 4], [500_000, 1_000_000, 1_500_000, 2_000_000]] {
            let mut p = SlowSubflows::new(1.0 / 16.0);
            for r in 0..20 {
                assert!(p.round(t0 + r as u32 * S, &samples(r, &rates)).is_empty());
            }
        }
    }

    #[test]
    fn the_fastest_subflow_is_never_demoted_and_off_means_off() {
        let t0 = Instant::now();
        // Two subflows both "below" a share of 0.9: only the slower one goes.
        let mut p = SlowSubflows::new(0.9);
        let rates = [100_000, 200_000];
        let mut marks = Vec::new();
        for r in 0..4 {
            marks.extend(p.round(t0 + r as u32 * S, &samples(r, &rates)));
        }
        assert_eq!(
            marks,
            vec![Mark {
                key: 1,
                backup: true
            }]
        );
        for share in [0.0, -1.0, f64::NAN] {
            let mut p = SlowSubflows::new(share);
            for r in 0..5 {
                assert!(p.round(t0 + r as u32 * S, &samples(r, &TABLE1)).is_empty());
            }
        }
    }

    /// Subflow 1 (smoothed RTT `rtt1`) and subflow 2 (40 ms) with their acknowledged bytes.
    fn pair(acked: [u64; 2], rtt1: Duration) -> [RoundSample<u8>; 2] {
        [
            RoundSample {
                key: 1,
                established: true,
                bytes_acked: acked[0],
                srtt: rtt1,
            },
            RoundSample {
                key: 2,
                established: true,
                bytes_acked: acked[1],
                srtt: 40 * MS,
            },
        ]
    }

    /// Runs two subflows for `rounds`: subflow 1 delivers `slow(r)` bytes per round while
    /// active (nothing while demoted: the kernel does not schedule onto it), subflow 2 4 MB.
    /// Returns the marks with their round.
    fn run_two(rounds: u64, slow: impl Fn(u64) -> u64) -> (SlowSubflows<u8>, Vec<(u64, bool)>) {
        let t0 = Instant::now();
        let mut p = SlowSubflows::new(1.0 / 16.0);
        let (mut acked, mut backup, mut marks) = ([0u64, 0], false, Vec::new());
        for r in 0..rounds {
            let d = slow(r);
            if !backup {
                acked[0] += d;
            }
            acked[1] += 4_000_000;
            let rtt1 = if d < 250_000 { 300 * MS } else { 40 * MS };
            for m in p.round(t0 + r as u32 * S, &pair(acked, rtt1)) {
                backup = m.backup;
                marks.push((r, m.backup));
            }
        }
        (p, marks)
    }

    #[test]
    fn a_probe_is_judged_against_the_rate_before_it() {
        // Subflow 1 (1.2 Mbit/s, its queue 300 ms) beside subflow 2 (32 Mbit/s alone). While
        // subflow 1 is active, its head-of-line delay holds subflow 2 at 12 Mbit/s, so its share
        // of that round (150 k of 1.65 MB, 9 %) is above 1/16; against the 4 MB the connection
        // carried the rounds before the probe it is 3.75 %: demoted again at once.
        let t0 = Instant::now();
        let mut p = SlowSubflows::new(1.0 / 16.0);
        let (mut acked, mut backup, mut marks) = ([0u64, 0], false, Vec::new());
        for r in 0..20u64 {
            // Until the first demotion the fast subflow is not held back (a fresh connection);
            // after it, an active subflow 1 costs it 60 %.
            let held = !backup && r > 2;
            if !backup {
                acked[0] += 150_000;
            }
            acked[1] += if held { 1_500_000 } else { 4_000_000 };
            for m in p.round(t0 + r as u32 * S, &pair(acked, 300 * MS)) {
                backup = m.backup;
                marks.push((r, m.backup));
            }
        }
        // Demoted at round 2, probed at 12, demoted again in the probe's first round (13).
        assert_eq!(marks, vec![(2, true), (12, false), (13, true)]);
        // Without a reference from before (a fresh policy), the held round alone is not slow.
        let mut q = SlowSubflows::new(1.0 / 16.0);
        let held = |r: u64| pair([r * 150_000, r * 1_500_000], 300 * MS);
        for r in 0..5 {
            assert!(q.round(t0 + r as u32 * S, &held(r)).is_empty());
        }
    }

    #[test]
    fn a_demoted_subflow_is_probed_with_a_doubling_interval_and_kept_when_it_got_faster() {
        let (_, marks) = run_two(200, |_| 125_000);
        // Demoted at round 2, probed 10 s later, demoted again the round after that, then the
        // intervals 20, 40, 80 s.
        let demotions: Vec<u64> = marks.iter().filter(|m| m.1).map(|m| m.0).collect();
        let probes: Vec<u64> = marks.iter().filter(|m| !m.1).map(|m| m.0).collect();
        assert_eq!(demotions, vec![2, 13, 34, 75, 156]);
        assert_eq!(probes, vec![12, 33, 74, 155]);
        // Once faster, a probed subflow stays active.
        let (p, marks) = run_two(40, |r| if r >= 10 { 2_000_000 } else { 100_000 });
        assert_eq!(marks, vec![(2, true), (12, false)]);
        assert_eq!(p.demoted(), 0);
    }

    /// The marks of 10 rounds of two subflows at 1 % and 99 % of the rate with smoothed RTTs
    /// `rtts`.
    fn marks_at(rtts: [Duration; 2]) -> Vec<Mark<u8>> {
        let t0 = Instant::now();
        let mut p = SlowSubflows::new(1.0 / 16.0);
        (0..10)
            .flat_map(|r| {
                p.round(
                    t0 + r as u32 * S,
                    &with_rtts(r, &[10_000, 1_000_000], &rtts),
                )
            })
            .collect()
    }

    #[test]
    fn a_short_rtt_difference_is_not_slow() {
        // A CPU-bound host or a LAN: RTTs of a few hundred microseconds, one subflow at 3x the
        // fastest's and 1 % of the rate: it costs no head-of-line delay worth a path.
        let us = Duration::from_micros(1);
        assert!(marks_at([900 * us, 300 * us]).is_empty());
        // The same rates with 9 ms more (below the excess) are kept; 10 ms more is slow.
        assert!(marks_at([12 * MS, 3 * MS]).is_empty());
        assert_eq!(
            marks_at([13 * MS, 3 * MS]),
            vec![Mark {
                key: 1,
                backup: true
            }]
        );
    }

    #[test]
    fn a_probe_waits_for_a_loaded_round() {
        let t0 = Instant::now();
        let mut p = SlowSubflows::new(1.0 / 16.0);
        let mut marks = Vec::new();
        for r in 0..3 {
            marks.extend(p.round(t0 + r as u32 * S, &samples(r, &TABLE1)));
        }
        assert_eq!(p.demoted(), 2);
        // The connection idles from round 3 to round 30 (counters stand still), well past the
        // 10-s probe: nothing is probed.
        for r in 3..30 {
            assert!(
                p.round(t0 + r as u32 * S, &samples(2, &TABLE1)).is_empty(),
                "round {r}"
            );
        }
        // A transfer starts: the first loaded round probes both, the next demotes them again.
        let probes = p.round(t0 + 30 * S, &samples(3, &TABLE1));
        assert_eq!(probes.iter().filter(|m| !m.backup).count(), 2, "{probes:?}");
        assert_eq!(p.demoted(), 0);
        let again = p.round(t0 + 31 * S, &samples(4, &TABLE1));
        assert_eq!(again.iter().filter(|m| m.backup).count(), 2, "{again:?}");
    }

    #[test]
    fn gaps_new_and_vanished_subflows_are_handled() {
        let t0 = Instant::now();
        let mut p = SlowSubflows::new(1.0 / 16.0);
        p.round(t0, &samples(0, &TABLE1));
        // A round 5 s later (the connection was not sampled in between) judges nothing.
        assert!(p.round(t0 + 5 * S, &samples(5, &TABLE1)).is_empty());
        assert!(p.round(t0 + 6 * S, &samples(6, &TABLE1)).is_empty());
        assert_eq!(p.round(t0 + 7 * S, &samples(7, &TABLE1)).len(), 2);
        // Subflow 1 closes and a new subflow 1 (same key, counters from 0) comes: it starts
        // active and is judged from its own first round.
        let mut s = samples(8, &TABLE1);
        s.remove(0);
        assert!(p.round(t0 + 8 * S, &s).is_empty());
        assert_eq!(p.demoted(), 1);
        let mut s = samples(9, &TABLE1);
        s[0].bytes_acked = 0;
        assert!(p.round(t0 + 9 * S, &s).is_empty());
        // Counters that go backwards (never from one subflow) do not underflow.
        let mut s = samples(10, &TABLE1);
        s[3].bytes_acked = 0;
        let _ = p.round(t0 + 10 * S, &s);
    }
}
