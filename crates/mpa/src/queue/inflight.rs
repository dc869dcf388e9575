//! The time budget of what a connection commits to its MPTCP socket (issue #16, "who owns the
//! queue"): bytes written but not yet acknowledged at the MPTCP level (`TIOCOUTQ`) may be at most
//! what the subflows deliver in their minimum RTT (times a gain) plus a small margin (`mmsg run
//! --send-time-budget`, `--send-time-gain`), Σ over subflows of `rate_i × (gain × min_rtt_i +
//! margin)`. Everything beyond
//! waits in the connection's [`FairQueue`](super::FairQueue), where the per-flow scheduler decides
//! who goes next and CoDel drops early, instead of in the subflows' send queues (served FIFO by the
//! kernel) or the WAN's buffer.
//!
//! Why bytes in flight and not `SO_SNDBUF`: a budget in units of the congestion windows grows with
//! the queue it admits (the windows grow into the WAN buffer), so it cannot bring the delay down to
//! the path's RTT (docs/results.md "Latency under load"). A budget in time, from the *delivered*
//! rate and the *minimum* RTT, is what the path can carry without a queue (BBR's inflight cap,
//! applied to the whole MPTCP connection by the gateway). With the budget full the bottleneck stays
//! busy (the budget exceeds the BDP by the margin), so goodput is kept; a queue of at most about
//! `margin` forms at the bottleneck.
//!
//! The rate of each subflow is its acknowledged bytes over at least [`RATE_INTERVAL`], kept as a
//! maximum that halves every [`RATE_HALF_LIFE`] of backlogged time (so an app-limited pause does
//! not shrink it, and a path that got slower is followed within a second or two of load). When
//! the budget limits the rate, a bottleneck with more room is still found: the budget lets the
//! delivered rate grow by `(gain × min_rtt + margin) / rtt` per round trip. That needs `gain` > 1: measured on the 2x2
//! testbed (10 Mbit/s uplinks, 20.5 ms path RTT), with `gain` = 1 the connection settled at
//! 5–6 of 20 Mbit/s with the pipe not even full: the round trip the budget sees is longer than
//! the path's minimum RTT (the receiver's delayed ACKs, the writer's own wake-up after the
//! drain), so every rate was a fixed point. BBR uses a window gain of 2 for the same reason.
//!
//! **Start-up.** A rate measured over [`RATE_INTERVAL`] lags an inner TCP flow's slow start by
//! several round trips (it doubles its window every one), so a budget made of it held a fresh
//! connection's first transfer back while the flow was still growing: the packets waited in the
//! fair queue, CoDel dropped one, and the flow left slow start at a fraction of the paths' rate and
//! regrew for seconds (one TCP flow over 40+20 Mbit/s uplinks: 20–25 Mbit/s four seconds after its
//! start against ~50 without the budget; docs/mmsg.md "Send time budget"). So a new budget
//! starts in start-up, like BBR: no cap ([`MAX_BUDGET`]; the socket's own buffer still bounds
//! it) until the delivered rate stopped growing by [`STARTUP_GROWTH`] for [`STARTUP_FULL`] of
//! backlogged time (data waited on our side: in the gateway's queue or the socket's unsent
//! bytes, so the paths and not the application set the rate) **and** the paths show a queue of
//! at least [`STARTUP_QUEUE`]. Both are needed: a connection that carries a trickle over paths
//! another connection fills sees their queue but never waits, and ended start-up at its trickle
//! in the first version (every idle connection of a branch, at 0.05–0.5 Mbit/s). The rate
//! estimate ages only on backlogged time too: a connection that idles keeps the rate it
//! measured, so the next transfer starts against the paths' budget, not [`MIN_BUDGET`].
//!
//! **Stalls.** The queue beyond the bandwidth-delay product is all that keeps the paths busy
//! while the writer does not run; a writer that wakes later than planned (a busy CPU, a
//! descheduled virtual machine) let them idle, so the budget adds the writer's lateness that
//! recurs, beyond the margin, to its time ([`super::stall`]; zero on a machine that wakes on
//! time).
//!
//! **A path that got longer.** The minimum RTT of a subflow is the kernel's `tcpi_min_rtt`, a
//! 300 s window, unless [`super::min_rtt`] found the path longer than that under the live
//! subflow: a subflow that carries the connection and whose smoothed RTT stays above the aim
//! makes the connection probe (the budget drops below the paths' BDP for a few round trips so
//! their queues drain) and re-measure it. Without that, a budget made of the old path's
//! minimum stayed below one round trip of the new path: 2.9–4.6 of ~17.5 Mbit/s after the 2x2
//! testbed's paths went from 20 to 60 ms (docs/mmsg.md "A path whose RTT rises").
//!
//! Call order (the driver, `mmsg`'s subflow sampler and writer): [`InflightBudget::handle_sample`]
//! with each subflow's acknowledged bytes and minimum RTT every [`SAMPLE_PERIOD`] while the
//! connection is up; [`InflightBudget::budget`] and [`InflightBudget::rate`] hand the figures to
//! the writer, which asks [`write_gate`] before each batch with the bytes the socket has on its
//! paths ([`path_queued`]: `TIOCOUTQ` while that is below the budget, the subflows' queues when it
//! is not). No IO, no clock reads: time is a parameter.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::min_rtt::{PathRtt, ProbePhase, RttProbe, PROBE_GAIN};
use super::stall::StallCover;

/// How often the driver should sample the subflows while the budget is on.
pub const SAMPLE_PERIOD: Duration = Duration::from_millis(50);
/// Shortest interval a rate sample is measured over (shorter ones are noisy: ACKs come in bursts).
pub const RATE_INTERVAL: Duration = Duration::from_millis(100);
/// The rate estimate (a windowed maximum) halves over this much backlogged time when no larger
/// sample comes.
pub const RATE_HALF_LIFE: Duration = Duration::from_secs(1);
/// Smallest budget, bytes: a start from idle (no rate yet) and a trickle still get ~20 segments
/// (16 KiB is 13 ms at 10 Mbit/s, the slowest uplink the testbeds use).
pub const MIN_BUDGET: u64 = 16 * 1024;
/// Largest budget, bytes (the largest `SO_SNDBUF` the send budget sets).
pub const MAX_BUDGET: u64 = 16 * 1024 * 1024;
/// Start-up ends when the delivered rate grew less than this factor ...
pub const STARTUP_GROWTH: f64 = 1.25;
/// ... for this much backlogged time (about three rate intervals) ...
pub const STARTUP_FULL: Duration = Duration::from_millis(300);
/// ... and the subflows' smoothed RTT (weighted by their rates) is at least this far above their
/// minimum (the paths are full; the pacer's start-up uses the same, `pacing::STARTUP_QUEUE_TARGETS`).
pub const STARTUP_QUEUE: Duration = Duration::from_millis(10);
/// Bytes the subflows hold (in flight or not yet sent by them) from which a start-up sample
/// counts as loaded even when nothing waited on our side: an inner flow whose own window keeps
/// the paths full (one TCP flow that the socket takes whole) never leaves data waiting, and a
/// trickle never holds this much (64 KiB in flight is ≥ 5 Mbit/s over 100 ms).
pub const STARTUP_LOADED_HELD: u64 = 64 * 1024;
/// A subflow delivering less than this fraction of the connection's fastest one is slow: what it
/// holds beyond its share of the budget does not take the others' room ([`InflightBudget::excess`]).
pub const SLOW_SHARE: f64 = 0.5;
/// A subflow holding more than this many times its share of the budget is over-fed: its RTT
/// does not make the minimum RTT suspect ([`super::min_rtt`]).
pub const OVERFED: f64 = 2.0;
/// Shortest wait of a writer whose budget is full (the timer's granularity).
pub const MIN_WAIT: Duration = Duration::from_millis(1);
/// Longest wait of a writer whose budget is full, before it looks again (a stale rate must not
/// stall it).
pub const MAX_WAIT: Duration = Duration::from_millis(20);

/// One subflow as sampled: the driver's figures from `tcp_info` (for the budget here and for
/// the pacer, [`super::pacing::Pacer`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeliverySample {
    /// In TCP state ESTABLISHED.
    pub established: bool,
    /// `tcpi_bytes_acked`: bytes acknowledged so far.
    pub bytes_acked: u64,
    /// `tcpi_min_rtt`, microseconds (0: none yet).
    pub min_rtt_us: u32,
    /// What it holds now, bytes ([`SubflowQueue::bytes`]).
    pub queued: u64,
    /// `tcpi_rtt`, microseconds (smoothed; 0: none yet).
    pub srtt_us: u32,
}

/// One subflow's estimate.
#[derive(Debug, Clone, Copy)]
struct Estimate {
    /// Start of the current rate interval and the acked bytes then.
    since: Instant,
    acked_then: u64,
    /// Windowed maximum delivery rate, bytes per second, as of `rate_at` (on the budget's clock
    /// of backlogged time).
    rate: f64,
    rate_at: Duration,
    /// Its minimum RTT: the kernel's, or a probe's where the path got longer ([`super::min_rtt`]).
    rtt: PathRtt,
    /// What it held and its smoothed RTT at the last sample.
    held: u64,
    srtt: Duration,
}

impl Estimate {
    fn decayed(&self, busy: Duration) -> f64 {
        let age = busy.saturating_sub(self.rate_at).as_secs_f64();
        self.rate * 0.5f64.powf(age / RATE_HALF_LIFE.as_secs_f64())
    }
}

/// The time budget of one connection's socket (see the module docs). `K` names a subflow (the
/// driver's (local, remote) address pair).
#[derive(Debug, Clone)]
pub struct InflightBudget<K> {
    margin: Duration,
    gain: f64,
    subflows: BTreeMap<K, Estimate>,
    budget: u64,
    excess: u64,
    rate: f64,
    /// Time spent backlogged: the clock the rate estimates age by.
    busy: Duration,
    last: Option<Instant>,
    /// In start-up (see the module docs): the best rate so far and the backlogged time since it
    /// last grew by [`STARTUP_GROWTH`].
    startup: bool,
    full_rate: f64,
    full_for: Duration,
    /// The writer's recent lateness beyond the margin ([`super::stall`]), and the cover it gave
    /// at the last sample.
    stall: StallCover,
    cover: Duration,
    /// The minimum RTT probe ([`super::min_rtt`]) and what the last one that ended found.
    probe: RttProbe,
    probed: Option<Probed>,
    probe_on: bool,
    /// Subflows the last probe found longer than the kernel's minimum.
    raised: usize,
    /// Start-up ended at the last sample: a smoothed RTT above the aim now starts a probe at
    /// once (see [`InflightBudget::maybe_probe`]).
    after_startup: bool,
}

/// What a minimum RTT probe found ([`InflightBudget::take_probed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probed {
    /// Subflows whose probed RTT now replaces the kernel's minimum (their paths got longer).
    pub raised: usize,
    /// Subflows measured.
    pub subflows: usize,
    /// The largest minimum RTT in use after the probe ...
    pub min_rtt: Duration,
    /// ... and the kernel's figure for that subflow.
    pub kernel_min_rtt: Duration,
    /// Whether `raised` differs from the previous probe's.
    pub changed: bool,
}

impl<K: Ord + Copy> InflightBudget<K> {
    /// A budget of `gain × min_rtt + margin` worth of each subflow's delivery rate (`gain` below 1
    /// is taken as 1).
    pub fn new(margin: Duration, gain: f64) -> Self {
        InflightBudget {
            margin,
            gain: if gain.is_nan() { 1.0 } else { gain.max(1.0) },
            subflows: BTreeMap::new(),
            budget: MIN_BUDGET,
            excess: 0,
            rate: 0.0,
            busy: Duration::ZERO,
            last: None,
            startup: true,
            full_rate: 0.0,
            full_for: Duration::ZERO,
            stall: StallCover::default(),
            cover: Duration::ZERO,
            probe: RttProbe::default(),
            probed: None,
            probe_on: true,
            after_startup: false,
            raised: 0,
        }
    }

    /// One sample period's lateness of the writer: the most one of its budget waits ended after
    /// it planned (its own stall: the paths drained meanwhile), `None` when it did not wait; the
    /// budget covers the lateness that recurs beyond the margin ([`super::stall`]).
    pub fn on_writer_late(&mut self, now: Instant, late: Option<Duration>) {
        self.stall.on_period(now, late);
    }

    /// The most time the budget adds for the writer's stalls ([`super::stall::MAX_COVER`] unless
    /// set; zero: none).
    #[must_use]
    pub fn with_max_cover(mut self, max: Duration) -> Self {
        self.stall = StallCover::new(max);
        self
    }

    /// Whether a minimum RTT that looks stale is probed ([`super::min_rtt`]; on unless set).
    #[must_use]
    pub fn with_rtt_probe(mut self, on: bool) -> Self {
        self.probe_on = on;
        self
    }

    /// The time the budget adds for the writer's stalls, as of the last sample
    /// ([`super::stall::StallCover::cover`]).
    pub fn stall_cover(&self) -> Duration {
        self.cover
    }

    /// Feeds one sample of every subflow (subflows not in it are forgotten) and recomputes the
    /// budget; `backlogged`: data waited on our side since the last sample (in the gateway's
    /// queue, or unsent in the socket: the paths, not the application, limited the connection).
    pub fn handle_sample(
        &mut self,
        now: Instant,
        backlogged: bool,
        subflows: impl IntoIterator<Item = (K, DeliverySample)>,
    ) {
        let dt = self
            .last
            .map_or(Duration::ZERO, |l| now.saturating_duration_since(l));
        self.last = Some(now);
        let subflows: Vec<(K, DeliverySample)> = subflows.into_iter().collect();
        let loaded = backlogged || self.loaded(subflows.iter().map(|(_, s)| s));
        if loaded {
            self.busy += dt;
        }
        let busy = self.busy;
        let phase = self.probe.on_sample(now);
        let mut seen = BTreeMap::new();
        for (k, s) in subflows {
            if !s.established {
                continue;
            }
            let min_rtt = Duration::from_micros(u64::from(s.min_rtt_us));
            let srtt = Duration::from_micros(u64::from(s.srtt_us));
            let mut e = match self.subflows.remove(&k) {
                Some(mut e) if s.bytes_acked >= e.acked_then => {
                    let dt = now.saturating_duration_since(e.since);
                    if dt >= RATE_INTERVAL {
                        let sample = (s.bytes_acked - e.acked_then) as f64 / dt.as_secs_f64();
                        let old = e.decayed(busy);
                        e.rate = sample.max(old);
                        e.rate_at = busy;
                        e.since = now;
                        e.acked_then = s.bytes_acked;
                    }
                    e.held = s.queued;
                    e.srtt = srtt;
                    e
                }
                // New, or its counter went backwards (another subflow under the same name).
                _ => Estimate {
                    since: now,
                    acked_then: s.bytes_acked,
                    rate: 0.0,
                    rate_at: busy,
                    rtt: PathRtt::default(),
                    held: s.queued,
                    srtt,
                },
            };
            e.rtt
                .on_sample(min_rtt, srtt, s.bytes_acked, phase != ProbePhase::Off);
            seen.insert(k, e);
        }
        self.subflows = seen;
        if phase == ProbePhase::Ended {
            self.end_probe();
        }
        self.cover = self.stall.cover(now, self.margin);
        let allowance = self.margin + self.cover;
        let fastest = self
            .subflows
            .values()
            .map(|e| e.decayed(busy))
            .fold(0.0f64, f64::max);
        let backlogged_dt = if backlogged { dt } else { Duration::ZERO };
        self.maybe_probe(now, backlogged_dt, allowance, fastest);
        let probing = self.probe.probing();
        let last = (self.budget, self.rate);
        let (mut budget, mut rate, mut excess) = (0.0f64, 0.0f64, 0u64);
        let mut queue_weighted = 0.0f64;
        for e in self.subflows.values() {
            let r = e.decayed(busy);
            let min_rtt = e.rtt.min_rtt();
            rate += r;
            queue_weighted += r * e.srtt.saturating_sub(min_rtt).as_secs_f64();
            let target = self.gain * min_rtt.as_secs_f64() + allowance.as_secs_f64();
            // In a probe, half the in-flight the subflow's round trip needs now, beyond the
            // allowance: where the queue is ours (the smoothed RTT at the aim, gain × min RTT +
            // allowance) that is at most the BDP and the queue drains; where it is not (cross
            // traffic holds it, the kernel's minimum is from an idle path) every subflow keeps
            // sending at half its rate and gets the ACKs that measure it. An over-fed subflow
            // queues by itself: half its minimum RTT's worth (its excess stays its own, the
            // others must keep sending for their RTT to be measured).
            let share = if probing {
                let rtt = if e.held as f64 > OVERFED * floor_share(r * target, r, last) {
                    min_rtt
                } else {
                    e.srtt.saturating_sub(allowance).max(min_rtt)
                };
                r * PROBE_GAIN * rtt.as_secs_f64()
            } else {
                r * target
            };
            budget += share;
            if e.srtt.as_secs_f64() > target && r < SLOW_SHARE * fastest {
                // A slow subflow whose path queues beyond the budget's aim: what it holds
                // beyond its share is its own.
                excess = excess.saturating_add(e.held.saturating_sub(share as u64));
            }
        }
        self.rate = rate;
        self.budget = (budget.min(MAX_BUDGET as f64) as u64).clamp(MIN_BUDGET, MAX_BUDGET);
        self.excess = excess;
        if self.startup && loaded {
            let queue = if rate > 0.0 {
                Duration::from_secs_f64(queue_weighted / rate)
            } else {
                Duration::ZERO
            };
            self.startup_round(rate, dt, queue);
        }
    }

    /// Past start-up, starts a minimum RTT probe ([`super::min_rtt`]) when a subflow's smoothed
    /// RTT stayed above the budget's aim (gain × min RTT + `allowance`) for `dt`-counted
    /// backlogged time, or a probed minimum is due to be measured again; `fastest`: the fastest
    /// subflow's rate.
    fn maybe_probe(&mut self, now: Instant, dt: Duration, allowance: Duration, fastest: f64) {
        if self.startup || !self.probe_on || self.probe.probing() {
            return;
        }
        let (gain, busy) = (self.gain, self.busy);
        let last = (self.budget, self.rate);
        let after_startup = std::mem::take(&mut self.after_startup);
        let mut due = false;
        for e in self.subflows.values_mut() {
            let aim = e.rtt.min_rtt().mul_f64(gain) + allowance;
            // Only the subflows that carry the connection count, and not while they hold
            // several times their share: a slow path's RTT with a few full-size packets on it
            // is well above its minimum (2 Mbit/s: 5.6 ms per packet), and the MPTCP scheduler
            // over-feeds it (see `excess`); neither says the minimum is stale.
            let r = e.decayed(busy);
            let share = floor_share(r * aim.as_secs_f64(), r, last);
            let srtt = if r < SLOW_SHARE * fastest || e.held as f64 > OVERFED * share {
                Duration::ZERO
            } else {
                e.srtt
            };
            due |= e.rtt.suspect(srtt, aim, dt) | e.rtt.probed().is_some();
            // Right after start-up a smoothed RTT above the aim is either start-up's own queue
            // (the probe drains it within a few round trips and finds the kernel's minimum) or
            // another sender's, which the kernel's minimum from an idle path does not know:
            // the budget made of that minimum is then below a round trip, and waiting for
            // SUSPECT_AFTER let the inner flows meet a second of CoDel drops (Table VI).
            due |= after_startup && srtt > aim;
        }
        if due && self.probe.may_start(now) {
            let longest = self
                .subflows
                .values()
                .map(|e| e.srtt.max(e.rtt.min_rtt()))
                .max()
                .unwrap_or_default();
            self.probe.start(now, longest);
        }
    }

    /// The probe ended: every subflow takes its result.
    fn end_probe(&mut self) {
        let mut found = Probed {
            raised: 0,
            subflows: self.subflows.len(),
            min_rtt: Duration::ZERO,
            kernel_min_rtt: Duration::ZERO,
            changed: false,
        };
        for e in self.subflows.values_mut() {
            found.raised += usize::from(e.rtt.end_probe().is_some());
            if e.rtt.min_rtt() >= found.min_rtt {
                found.min_rtt = e.rtt.min_rtt();
                found.kernel_min_rtt = e.rtt.kernel();
            }
        }
        found.changed = found.raised != self.raised;
        self.raised = found.raised;
        self.probed = Some(found);
    }

    /// What the last minimum RTT probe found, once (for the driver's log).
    pub fn take_probed(&mut self) -> Option<Probed> {
        self.probed.take()
    }

    /// Whether a minimum RTT probe runs (the budget is [`PROBE_GAIN`] × the subflows' round
    /// trips' worth of rate, [`super::min_rtt`]).
    pub fn probing(&self) -> bool {
        self.probe.probing()
    }

    /// The minimum RTT the budget uses for subflow `k` (the kernel's, or a probe's where its path
    /// got longer), as of the last sample; `None`: not seen.
    pub fn min_rtt(&self, k: &K) -> Option<Duration> {
        self.subflows.get(k).map(|e| e.rtt.min_rtt())
    }

    /// Minimum RTT probes started so far.
    pub fn probes(&self) -> u64 {
        self.probe.count()
    }

    /// Whether the subflows hold enough that the paths, not the application, set the delivered
    /// rate although nothing waited on our side: in start-up [`STARTUP_LOADED_HELD`], after it
    /// half the budget. Without it, one inner TCP flow whose window the socket takes whole left
    /// a budget stuck: start-up never ended (no cap, the WAN's queue of the old buffers), or an
    /// over-estimated rate from start-up never aged (its budget above what the flow's window
    /// reaches, so nothing ever waits): ping 98–100 ms median on the 2x2 testbed against 40–44
    /// (docs/results.md "The sparse lane").
    fn loaded<'a>(&self, subflows: impl Iterator<Item = &'a DeliverySample>) -> bool {
        let held: u64 = subflows
            .filter(|s| s.established)
            .map(|s| s.queued)
            .fold(0u64, u64::saturating_add);
        if self.startup {
            held >= STARTUP_LOADED_HELD
        } else {
            held.saturating_mul(2) >= self.budget
        }
    }

    /// One loaded sample in start-up: is the rate still growing, are the paths full?
    fn startup_round(&mut self, rate: f64, dt: Duration, queue: Duration) {
        if rate >= self.full_rate * STARTUP_GROWTH {
            self.full_rate = rate;
            self.full_for = Duration::ZERO;
        } else {
            self.full_for += dt;
        }
        if self.full_for >= STARTUP_FULL && queue >= STARTUP_QUEUE {
            self.startup = false;
            self.after_startup = true;
        }
    }

    /// Whether the budget is still in start-up (no cap yet; see the module docs).
    pub fn in_startup(&self) -> bool {
        self.startup
    }

    /// Bytes the socket may have on its paths now ([`path_queued`]): the budget, plus what
    /// subflows hold beyond their own share of it (see [`InflightBudget::excess`]).
    pub fn budget(&self) -> u64 {
        if self.startup {
            return MAX_BUDGET;
        }
        self.budget.saturating_add(self.excess).min(MAX_BUDGET)
    }

    /// Bytes slow subflows held at the last sample beyond their own share of the budget (rate ×
    /// (gain × min RTT + margin)). The MPTCP scheduler hands data to the subflow that will send
    /// it soonest by its pacing rate, which on a slow path (a 2 Mbit/s uplink beside a 10 Mbit/s
    /// one) is estimated from its window and far above what the path carries; such a subflow
    /// then holds more than its share, up to its congestion window. Counted against the whole
    /// budget, that excess left the fast subflow without room: 3.3–3.7 of 12 Mbit/s
    /// (docs/mmsg.md "Send time budget"). Added to the budget, a slow subflow's excess is its
    /// own and the others keep the room of their shares.
    ///
    /// Only a subflow that is both slow (delivering less than [`SLOW_SHARE`] of the fastest
    /// one) and queued (smoothed RTT above gain × min RTT + margin) counts: on alike paths every
    /// subflow now and then holds more than its share, and forgiving all of them let the queues
    /// grow to the congestion windows again (10 Mbit/s uplinks, UDP at twice the capacity: ping
    /// p99 625 ms against 53).
    pub fn excess(&self) -> u64 {
        self.excess
    }

    /// The connection's delivery rate estimate, bytes per second (0 until measured).
    pub fn rate(&self) -> u64 {
        self.rate as u64
    }
}

/// One subflow's share of a connection's queue on the paths, from its `tcp_info`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SubflowQueue {
    /// In TCP state ESTABLISHED (the others hold nothing the budget counts).
    pub established: bool,
    /// `tcpi_unacked`: segments in flight.
    pub unacked_segments: u32,
    /// `tcpi_snd_mss`, bytes.
    pub mss: u32,
    /// `tcpi_notsent_bytes`: bytes in its send queue not sent yet.
    pub notsent: u32,
}

/// A subflow's share of the budget: `share` (its rate × the budget's time), or its part of the
/// last budget by rate where that is more: `last` = (budget, rate) of the last round. The
/// budget's floor ([`MIN_BUDGET`]) is shared too; without it a subflow whose rate collapsed to
/// what the floor carries looked over-fed by the floor alone (and so never made its stale
/// minimum RTT suspect: a queue that is not ours, docs/results.md).
fn floor_share(share: f64, rate: f64, last: (u64, f64)) -> f64 {
    let (budget, total) = last;
    if total > 0.0 {
        share.max(budget as f64 * rate / total)
    } else {
        share
    }
}

/// Bytes a connection has on its paths: not yet handed to a subflow (`unsent`, `SIOCOUTQNSD` of the
/// MPTCP socket) plus what every established subflow holds (its unacknowledged segments × mss and
/// its not-sent bytes). This, not `TIOCOUTQ`, is what the budget bounds: `TIOCOUTQ` (the data
/// level) also counts bytes the subflows already delivered but the receiver cannot acknowledge at
/// the data level yet, because an earlier byte is still on a slower subflow (reordering across
/// paths of unequal delay). Those are in no path's queue; counted, a connection over a 10 and a
/// 2 Mbit/s uplink waited for the slow path's bytes with the fast path idle (4.7 of 12 Mbit/s;
/// docs/mmsg.md "Send time budget"). Segments are counted at full mss (a small one counts as
/// more than it is: the budget errs toward less in flight).
pub fn path_queued(unsent: u64, subflows: impl IntoIterator<Item = SubflowQueue>) -> u64 {
    subflows
        .into_iter()
        .fold(unsent, |sum, q| sum.saturating_add(q.bytes()))
}

impl SubflowQueue {
    /// What it holds: segments in flight × mss plus not-sent bytes; 0 unless established.
    pub fn bytes(&self) -> u64 {
        if !self.established {
            return 0;
        }
        (u64::from(self.unacked_segments) * u64::from(self.mss))
            .saturating_add(u64::from(self.notsent))
    }
}

/// What the writer may do now ([`write_gate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Take up to this many bytes out of the queue and write them (at least one frame, even if it
    /// is larger).
    Write(usize),
    /// The budget is full: look again after this long (the estimated time for the socket to drain
    /// below the budget).
    Wait(Duration),
}

/// The writer's decision before a batch: `committed` bytes are in the socket unacknowledged
/// (`TIOCOUTQ`), `budget` and `rate` (bytes/s) come from [`InflightBudget`]; a `budget` of 0 means
/// no budget (the writer takes a whole batch, `max_batch`).
pub fn write_gate(committed: u64, budget: u64, rate: u64, max_batch: usize) -> Gate {
    if budget == 0 {
        return Gate::Write(max_batch);
    }
    if committed < budget {
        let room = usize::try_from(budget - committed).unwrap_or(usize::MAX);
        return Gate::Write(room.min(max_batch));
    }
    // Wait until the excess plus a little room (an eighth of the budget: writes of a useful
    // size, not one segment per wake-up) is delivered.
    let excess = committed - budget + budget / 8;
    if rate == 0 {
        return Gate::Wait(MIN_WAIT * 2);
    }
    let wait = Duration::from_secs_f64(excess as f64 / rate as f64);
    Gate::Wait(wait.clamp(MIN_WAIT, MAX_WAIT))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A budget past start-up (the cases that test the steady state).
    fn steady(gain: f64) -> InflightBudget<u8> {
        let mut b = InflightBudget::new(5 * MS, gain);
        b.startup = false;
        b
    }

    fn up(acked: u64, min_rtt_ms: u32) -> DeliverySample {
        DeliverySample {
            queued: 0,
            srtt_us: 0,
            established: true,
            bytes_acked: acked,
            min_rtt_us: min_rtt_ms * 1000,
        }
    }

    fn held(acked: u64, min_rtt_ms: u32, srtt_ms: u32, queued: u64) -> DeliverySample {
        DeliverySample {
            queued,
            srtt_us: srtt_ms * 1000,
            ..up(acked, min_rtt_ms)
        }
    }

    /// A budget fed two samples of two subflows (keys 1 and 2), 100 ms apart.
    fn two_samples(first: [DeliverySample; 2], then: [DeliverySample; 2]) -> InflightBudget<u8> {
        let t0 = Instant::now();
        let mut b = steady(2.0);
        b.handle_sample(t0, true, [(1u8, first[0]), (2u8, first[1])]);
        b.handle_sample(t0 + 100 * MS, true, [(1u8, then[0]), (2u8, then[1])]);
        b
    }

    /// A fast subflow (1.25 MB/s) and a slow one (0.125 MB/s) whose path queues (srtt 80 ms
    /// against an aim of 2 × 20 + 5 = 45 ms) and holds 30 kB, five times its 5.6 kB share: the
    /// excess is its own, added to the budget, so the fast subflow keeps the room of its share.
    #[test]
    fn a_slow_queued_subflow_keeps_its_excess_out_of_the_fast_ones_room() {
        let b = two_samples(
            [held(0, 20, 25, 0), held(0, 20, 80, 30_000)],
            [held(125_000, 20, 25, 20_000), held(12_500, 20, 80, 30_000)],
        );
        let fast_share = 1_250_000.0 * 0.045;
        let slow_share = 125_000.0 * 0.045;
        assert_eq!(b.excess(), 30_000 - slow_share as u64);
        let base = (fast_share + slow_share) as u64;
        assert_eq!(b.budget(), base + b.excess());
        // The writer's view: the paths hold 50 kB; without the excess the fast subflow's share
        // (56 kB) would have 6 kB of room left, with it 36 kB.
        assert_eq!(
            write_gate(50_000, b.budget(), b.rate(), 1 << 20),
            Gate::Write(b.budget() as usize - 50_000)
        );
        assert!(b.budget() - 50_000 > 30_000);
    }

    /// Alike subflows (the same rate) that each hold more than their share, and a slow subflow
    /// whose path does not queue (srtt below the aim): no excess, the budget is the shares'
    /// sum, so their queues cannot grow past it.
    #[test]
    fn alike_or_unqueued_subflows_have_no_excess() {
        let b = two_samples(
            [held(0, 20, 60, 0), held(0, 20, 60, 0)],
            [held(125_000, 20, 60, 90_000), held(100_000, 20, 60, 90_000)],
        );
        assert_eq!(b.excess(), 0, "alike subflows: 1.0 and 0.8 of the fastest");
        let b = two_samples(
            [held(0, 20, 25, 0), held(0, 20, 40, 0)],
            [held(125_000, 20, 25, 20_000), held(12_500, 20, 40, 30_000)],
        );
        assert_eq!(
            b.excess(),
            0,
            "slow, but its path does not queue: srtt 40 < 45 ms"
        );
        assert_eq!(b.budget(), (1_375_000.0f64 * 0.045) as u64);
    }

    /// A writer that wakes 35 ms late in every period (a stall) gets the 30 ms beyond the 5 ms
    /// margin added to the budget's time: 1.25 MB/s × (20 + 5 + 30 ms); lateness within the
    /// margin adds nothing.
    #[test]
    fn the_writers_stalls_beyond_the_margin_are_covered() {
        let t0 = Instant::now();
        let run = |late: Duration| {
            let mut b = steady(1.0);
            for i in 0..=20u64 {
                let t = t0 + SAMPLE_PERIOD * i as u32;
                b.on_writer_late(t, Some(late));
                b.handle_sample(t, true, [(1u8, up(1_250 * 50 * i, 20))]);
            }
            b
        };
        let quiet = run(4 * MS);
        assert_eq!(quiet.stall_cover(), Duration::ZERO);
        let stalled = run(35 * MS);
        assert_eq!(stalled.stall_cover(), 30 * MS);
        let ratio = stalled.budget() as f64 / quiet.budget() as f64;
        assert!(
            (ratio - 55.0 / 25.0).abs() < 0.02,
            "budget {} against {}",
            stalled.budget(),
            quiet.budget()
        );
    }

    /// Two subflows at 1.25 MB/s (10 Mbit/s) each, 20 ms min RTT, 5 ms margin: the budget is
    /// 2 × 1.25 MB/s × 25 ms = 62.5 kB.
    #[test]
    fn budget_is_rate_times_min_rtt_plus_margin() {
        let t0 = Instant::now();
        let mut b = steady(1.0);
        assert_eq!(b.budget(), MIN_BUDGET);
        for i in 0..=20u64 {
            let t = t0 + SAMPLE_PERIOD * i as u32;
            let acked = 1_250 * 50 * i; // 1.25 MB/s: 62.5 kB per 50 ms
            b.handle_sample(t, true, [(1u8, up(acked, 20)), (2u8, up(acked, 20))]);
        }
        let want = 2.0 * 1_250_000.0 * 0.025;
        assert!(
            (b.budget() as f64 - want).abs() < 0.02 * want,
            "budget {} want {want}",
            b.budget()
        );
        assert!((b.rate() as f64 - 2_500_000.0).abs() < 50_000.0);
    }

    /// Samples closer than RATE_INTERVAL do not make a (noisy) rate; backlogged samples that
    /// show less decay the rate with the half-life, never below the floor.
    #[test]
    fn short_intervals_accumulate_and_pauses_decay() {
        let t0 = Instant::now();
        let mut b = steady(1.0);
        b.handle_sample(t0, true, [(1u8, up(0, 20))]);
        b.handle_sample(t0 + 10 * MS, true, [(1u8, up(100_000, 20))]);
        assert_eq!(b.rate(), 0, "10 ms is too short for a rate sample");
        b.handle_sample(t0 + 100 * MS, true, [(1u8, up(125_000, 20))]);
        assert_eq!(b.rate(), 1_250_000);
        // Nothing more delivered for one half-life while backlogged: half the rate, budget half
        // (above the floor here).
        b.handle_sample(t0 + 1100 * MS, true, [(1u8, up(125_000, 20))]);
        assert!(
            (b.rate() as f64 - 625_000.0).abs() < 1_000.0,
            "{}",
            b.rate()
        );
        b.handle_sample(t0 + 20_000 * MS, true, [(1u8, up(125_000, 20))]);
        assert_eq!(b.budget(), MIN_BUDGET);
    }

    /// One subflow, 20 ms min RTT, `srtt_ms` smoothed, delivering `rate` bytes/s: the samples
    /// of `secs` seconds every [`SAMPLE_PERIOD`] from `t`/`acked` on.
    fn feed(
        b: &mut InflightBudget<u8>,
        clock: (&mut Instant, &mut u64),
        rate: f64,
        srtt_ms: u32,
        backlogged: bool,
        secs: f64,
    ) {
        feed_with(b, clock, rate, srtt_ms, (backlogged, 0), secs);
    }

    /// [`feed`] with the subflow holding `queued` bytes, `backlogged` or not.
    fn feed_with(
        b: &mut InflightBudget<u8>,
        (t, acked): (&mut Instant, &mut u64),
        rate: f64,
        srtt_ms: u32,
        (backlogged, queued): (bool, u64),
        secs: f64,
    ) {
        let n = (secs / SAMPLE_PERIOD.as_secs_f64()).round() as u32;
        for _ in 0..n {
            *t += SAMPLE_PERIOD;
            *acked += (rate * SAMPLE_PERIOD.as_secs_f64()) as u64;
            b.handle_sample(*t, backlogged, [(1u8, held(*acked, 20, srtt_ms, queued))]);
        }
    }

    /// Start-up: no cap while the rate grows; a plateau without a queue on the paths, or with
    /// one but nothing waiting on our side (a trickle over paths another connection fills),
    /// keeps it; a backlogged plateau with the paths' queue ends it, and the budget is the
    /// rate's from then on.
    #[test]
    fn startup_lifts_the_cap_until_the_paths_are_full() {
        let mut b = InflightBudget::new(5 * MS, 2.0);
        let (mut t, mut acked) = (Instant::now(), 0u64);
        b.handle_sample(t, true, [(1u8, held(0, 20, 20, 0))]);
        assert!(b.in_startup());
        assert_eq!(b.budget(), MAX_BUDGET);
        // Doubling every 100 ms, with a queue on the paths: still starting.
        for i in 0..5 {
            let rate = 100_000.0 * f64::from(1u32 << i);
            feed(&mut b, (&mut t, &mut acked), rate, 60, true, 0.1);
        }
        assert!(b.in_startup());
        // Flat at 1.6 MB/s for a second, backlogged, but the paths hold no queue (srtt 2 ms
        // above the minimum): an application's own rate, not the paths'.
        feed(&mut b, (&mut t, &mut acked), 1_600_000.0, 22, true, 1.0);
        assert!(b.in_startup(), "no queue: not full");
        // Flat with a queue, but nothing waited: a trickle beside another connection's load.
        feed(&mut b, (&mut t, &mut acked), 1_600_000.0, 60, false, 1.0);
        assert!(b.in_startup(), "not backlogged");
        assert_eq!(b.budget(), MAX_BUDGET);
        // Backlogged, flat for long enough already, now with 40 ms of queue: full.
        feed(&mut b, (&mut t, &mut acked), 1_600_000.0, 60, true, 0.05);
        assert!(!b.in_startup());
        let want = 1_600_000.0 * (2.0 * 0.020 + 0.005);
        assert!(
            (b.budget() as f64 - want).abs() < 0.05 * want,
            "budget {} want {want}",
            b.budget()
        );
    }

    /// One inner TCP flow whose window the socket takes whole: nothing ever waits on our side,
    /// but the subflow holds 300 kB with 60 ms of queue on the path. Start-up ends on that
    /// (a trickle holding 5 kB does not), and an over-estimated rate from start-up ages while
    /// the subflow holds half the budget or more, without any backlog.
    #[test]
    fn a_flow_that_fills_the_paths_by_itself_ends_startup_and_ages_the_rate() {
        let mut b = InflightBudget::new(5 * MS, 2.0);
        let (mut t, mut acked) = (Instant::now(), 0u64);
        b.handle_sample(t, false, [(1u8, held(0, 20, 60, 5_000))]);
        feed_with(
            &mut b,
            (&mut t, &mut acked),
            100_000.0,
            60,
            (false, 5_000),
            2.0,
        );
        assert!(b.in_startup(), "a trickle");
        feed_with(
            &mut b,
            (&mut t, &mut acked),
            2_750_000.0,
            60,
            (false, 300_000),
            0.5,
        );
        assert!(
            !b.in_startup(),
            "300 kB held, 40 ms of queue, flat for 500 ms"
        );
        let over = b.rate();
        assert!(over > 2_500_000, "{over}");
        // The paths carry 2.2 MB/s; the budget made of 2.75 (124 kB) is above what the flow's
        // window holds now (100 kB), so nothing waits: the rate ages to the paths' all the same.
        feed_with(
            &mut b,
            (&mut t, &mut acked),
            2_200_000.0,
            45,
            (false, 100_000),
            3.0,
        );
        let rate = b.rate() as f64;
        assert!(
            (rate - 2_200_000.0).abs() < 0.05 * 2_200_000.0,
            "{rate} from {over}"
        );
        // Holding less than half the budget (an application's own rate): no ageing.
        let kept = b.rate();
        feed_with(
            &mut b,
            (&mut t, &mut acked),
            200_000.0,
            21,
            (false, 4_000),
            5.0,
        );
        assert_eq!(b.rate(), kept);
    }

    /// The plateau must last [`STARTUP_FULL`] of backlogged time; growth starts it over.
    #[test]
    fn startup_ends_after_a_plateau_of_backlogged_time() {
        let mut b = InflightBudget::new(5 * MS, 2.0);
        let (mut t, mut acked) = (Instant::now(), 0u64);
        b.handle_sample(t, true, [(1u8, held(0, 20, 60, 0))]);
        feed(&mut b, (&mut t, &mut acked), 1_000_000.0, 60, true, 0.25);
        assert!(b.in_startup(), "250 ms of plateau");
        // The rate grows by half: the plateau starts over.
        feed(&mut b, (&mut t, &mut acked), 2_000_000.0, 60, true, 0.25);
        assert!(b.in_startup(), "grew");
        feed(&mut b, (&mut t, &mut acked), 2_000_000.0, 60, true, 0.4);
        assert!(!b.in_startup(), "400 ms of plateau at 2 MB/s");
    }

    /// After start-up the rate ages only on backlogged time: ten idle seconds keep the budget
    /// (the next transfer starts against the paths' rate, not the floor); a second of
    /// backlogged samples that show nothing delivered halves it.
    #[test]
    fn idle_time_does_not_age_the_rate() {
        let mut b = steady(2.0);
        let (mut t, mut acked) = (Instant::now(), 0u64);
        b.handle_sample(t, true, [(1u8, held(0, 20, 25, 0))]);
        feed(&mut b, (&mut t, &mut acked), 2_000_000.0, 25, true, 0.5);
        let (rate, budget) = (b.rate(), b.budget());
        assert!((rate as f64 - 2_000_000.0).abs() < 40_000.0, "{rate}");
        feed(&mut b, (&mut t, &mut acked), 0.0, 20, false, 10.0);
        assert_eq!((b.rate(), b.budget()), (rate, budget));
        feed(&mut b, (&mut t, &mut acked), 0.0, 20, true, 1.0);
        assert!(
            (b.rate() as f64 - rate as f64 / 2.0).abs() < 0.05 * rate as f64,
            "{} of {rate}",
            b.rate()
        );
    }

    /// A subflow that goes away takes its share of the budget with it; a counter that goes
    /// backwards (a new subflow under the same addresses) starts over instead of a huge sample.
    #[test]
    fn subflows_come_and_go() {
        let t0 = Instant::now();
        let mut b = steady(1.0);
        b.handle_sample(t0, true, [(1u8, up(0, 20)), (2u8, up(0, 40))]);
        b.handle_sample(
            t0 + 100 * MS,
            true,
            [(1u8, up(100_000, 20)), (2u8, up(100_000, 40))],
        );
        let both = b.budget();
        assert_eq!(both, (1_000_000.0f64 * 0.025 + 1_000_000.0 * 0.045) as u64);
        b.handle_sample(t0 + 200 * MS, true, [(1u8, up(200_000, 20))]);
        assert_eq!(b.budget(), 25_000);
        b.handle_sample(t0 + 300 * MS, true, [(1u8, up(5, 20)), (2u8, up(0, 40))]);
        assert_eq!(b.rate(), 0);
        let mut not_up = up(0, 20);
        not_up.established = false;
        b.handle_sample(t0 + 400 * MS, true, [(1u8, not_up)]);
        assert_eq!((b.rate(), b.budget()), (0, MIN_BUDGET));
    }

    /// A bottleneck with more room than the budget admits is found: with the delivered rate
    /// limited to budget / RTT, the budget grows by (min_rtt + margin) / min_rtt per sample.
    #[test]
    fn a_budget_limited_rate_grows_to_the_bottleneck() {
        let t0 = Instant::now();
        let mut b = steady(1.5);
        let capacity = 5_000_000.0f64; // 40 Mbit/s
                                       // The round trip the budget sees: min RTT 20 ms + 8 ms of delayed ACKs and wake-ups.
        let rtt = 0.028;
        let mut acked = 0u64;
        let mut t = t0;
        b.handle_sample(t, true, [(1u8, up(0, 20))]);
        for _ in 0..40 {
            // What the path delivers in 100 ms with `budget` in flight each RTT.
            let rate = (b.budget() as f64 / rtt).min(capacity);
            acked += (rate * 0.1) as u64;
            t += 100 * MS;
            b.handle_sample(t, true, [(1u8, up(acked, 20))]);
        }
        assert!(b.rate() as f64 > 0.97 * capacity, "rate {}", b.rate());
        assert!((b.budget() as f64) < 1.05 * capacity * 0.035);
        // With gain 1 the same path stalls where it started: every rate is a fixed point.
        let mut b = steady(1.0);
        let (mut acked, mut t) = (0u64, t0);
        b.handle_sample(t, true, [(1u8, up(0, 20))]);
        for _ in 0..40 {
            let rate = (b.budget() as f64 / rtt).min(capacity);
            acked += (rate * 0.1) as u64;
            t += 100 * MS;
            b.handle_sample(t, true, [(1u8, up(acked, 20))]);
        }
        assert!((b.rate() as f64) < 0.5 * capacity, "rate {}", b.rate());
    }

    /// What the paths hold: the bytes not handed to a subflow and every established subflow's
    /// segments in flight and not-sent bytes; what the data level holds behind a slower subflow
    /// (the rest of `TIOCOUTQ`) is not counted, so the writer has room while the fast path does.
    #[test]
    fn only_what_the_paths_hold_fills_the_budget() {
        let q = |established, unacked_segments, notsent| SubflowQueue {
            established,
            unacked_segments,
            mss: 1_000,
            notsent,
        };
        assert_eq!(path_queued(0, []), 0);
        // 10 kB not on a subflow yet, 40 + 20 segments in flight, 5 kB not sent on one; a
        // subflow in SYN_SENT counts nothing.
        let subflows = [q(true, 40, 0), q(true, 20, 5_000), q(false, 7, 7)];
        assert_eq!(path_queued(10_000, subflows), 75_000);
        // TIOCOUTQ 200 kB (125 kB delivered, held behind the slow subflow): by it the writer
        // of a 150 kB budget waits; by what the paths hold it has room for 75 kB.
        assert!(matches!(
            write_gate(200_000, 150_000, 1_250_000, 1 << 20),
            Gate::Wait(_)
        ));
        assert_eq!(
            write_gate(path_queued(10_000, subflows), 150_000, 1_250_000, 1 << 20),
            Gate::Write(75_000)
        );
        // Counters near the top do not wrap.
        assert_eq!(
            path_queued(u64::MAX, [q(true, u32::MAX, u32::MAX)]),
            u64::MAX
        );
    }

    #[test]
    fn the_gate_writes_within_the_budget_and_waits_for_the_drain() {
        assert_eq!(write_gate(10, 0, 0, 256), Gate::Write(256));
        assert_eq!(
            write_gate(40_000, 62_500, 2_500_000, 256 * 1024),
            Gate::Write(22_500)
        );
        assert_eq!(write_gate(0, 1 << 20, 1, 64), Gate::Write(64));
        // Full: wait for (excess + budget / 8) at the rate: (0 + 7,812) / 2.5 MB/s = 3.1 ms.
        match write_gate(62_500, 62_500, 2_500_000, 1 << 18) {
            Gate::Wait(w) => assert!(w > 3 * MS && w < 4 * MS, "{w:?}"),
            g => panic!("{g:?}"),
        }
        assert_eq!(
            write_gate(10_000_000, 62_500, 2_500_000, 1),
            Gate::Wait(MAX_WAIT)
        );
        assert_eq!(
            write_gate(62_500, 62_500, 100_000_000_000, 1),
            Gate::Wait(MIN_WAIT)
        );
        assert_eq!(
            write_gate(MIN_BUDGET, MIN_BUDGET, 0, 1),
            Gate::Wait(MIN_WAIT * 2)
        );
    }

    /// A fluid model of one backlogged subflow over a bottleneck of `cap` bytes/s whose round
    /// trip is `base_ms` while the kernel's minimum says `kernel_ms` (the path got longer under
    /// the live subflow when they differ): every 50 ms the writer fills the budget, the path
    /// delivers min(cap, budget / base) and its smoothed RTT is the base plus the queue beyond
    /// the BDP. Returns the budget after `secs` and its delivery rate over the last second.
    fn closed_loop(
        probe: bool,
        base_ms: f64,
        kernel_ms: u32,
        secs: u64,
    ) -> (InflightBudget<u8>, f64) {
        let (b, r, _) = shared_loop(probe, base_ms, kernel_ms, secs);
        (b, r)
    }

    /// [`closed_loop`] where `base_ms` is the path's round trip with the queue other senders
    /// keep on it (cross traffic: it does not drain when we send less) and `cap` is our share.
    /// Also returns the lowest delivery rate while a probe ran (`cap` if none ran).
    fn shared_loop(
        probe: bool,
        base_ms: f64,
        kernel_ms: u32,
        secs: u64,
    ) -> (InflightBudget<u8>, f64, f64) {
        let cap = 1_250_000.0f64;
        let t0 = Instant::now();
        let mut b = steady(2.0).with_rtt_probe(probe);
        let (mut acked, mut last_sec, mut probe_low) = (0.0f64, 0.0f64, cap);
        let samples = secs * 20;
        for i in 0..=samples {
            let inflight = b.budget() as f64;
            let rate = cap.min(inflight / (base_ms / 1e3));
            let srtt_ms = base_ms.max(inflight / cap * 1e3);
            acked += rate * SAMPLE_PERIOD.as_secs_f64();
            if i + 20 > samples {
                last_sec += rate / 20.0;
            }
            if b.probing() {
                probe_low = probe_low.min(rate);
            }
            let s = held(acked as u64, kernel_ms, 0, inflight as u64);
            let s = DeliverySample {
                srtt_us: (srtt_ms * 1e3) as u32,
                ..s
            };
            b.handle_sample(t0 + SAMPLE_PERIOD * i as u32, true, [(1u8, s)]);
        }
        (b, last_sec, probe_low)
    }

    /// Other senders keep 95 ms of queue on a 20 ms path that was idle when the subflow came
    /// up (the kernel's minimum says 20): the budget (rate × 45 ms) is below a round trip and
    /// the rate falls to what [`MIN_BUDGET`] carries within the first second; the subflow then
    /// holds the whole floor, and counted against its own collapsed share it looked over-fed,
    /// so it never made the minimum suspect (no probe, the rate stayed at the floor). With the
    /// floor shared by rate it does: the probe finds 115 ms and the rate comes back.
    #[test]
    fn a_queue_that_is_not_ours_is_probed_and_the_rate_comes_back() {
        let cap = 1_250_000.0;
        let (mut b, r, _) = shared_loop(true, 115.0, 20, 10);
        assert!(r > 0.95 * cap, "{r} of {cap}");
        assert_eq!(b.take_probed().map(|p| p.min_rtt), Some(115 * MS));
    }

    /// While a probe runs, a subflow's part is half the in-flight its round trip needs now
    /// beyond the allowance, not half its (stale) minimum RTT's worth: where the queue is not
    /// ours it keeps sending at about half its rate and gets the ACKs that measure its path
    /// (beside other subflows, the MPTCP scheduler gave one with a part of a few kB nothing
    /// at all). Where the queue is ours the smoothed RTT is at the aim, 2 × min RTT +
    /// allowance, and the part is one BDP: the queue drains. An over-fed subflow keeps half
    /// its minimum's worth.
    #[test]
    fn a_probe_keeps_half_the_in_flight_of_the_round_trip() {
        let t0 = Instant::now();
        let probe_budget = |srtt_ms: u32, queued: u64| {
            let mut b = steady(2.0);
            b.handle_sample(t0, true, [(1u8, held(0, 20, srtt_ms, queued))]);
            b.handle_sample(
                t0 + 100 * MS,
                true,
                [(1u8, held(125_000, 20, srtt_ms, queued))],
            );
            assert!(b.probe.may_start(t0));
            b.probe.start(t0 + 100 * MS, 200 * MS);
            b.handle_sample(
                t0 + 150 * MS,
                true,
                [(1u8, held(187_500, 20, srtt_ms, queued))],
            );
            assert!(b.probing());
            b.budget()
        };
        // 1.25 MB/s (aged by the 50 ms since its sample: × 0.966).
        let about = |got: u64, want: f64| (got as f64 / (want * 0.966) - 1.0).abs() < 0.01;
        // Cross traffic's 115 ms: 0.5 × 110 ms of it (with the minimum's worth: 12.5 kB).
        let b = probe_budget(115, 50_000);
        assert!(about(b, 68_750.0), "{b}");
        // Our own queue at the aim (45 ms): 0.5 × 40 ms = the BDP of the 20 ms path.
        let b = probe_budget(45, 50_000);
        assert!(about(b, 25_000.0), "{b}");
        // Over-fed (2 MB held against a share of 56 kB): 0.5 × 20 ms, under the floor.
        assert_eq!(probe_budget(115, 2_000_000), MIN_BUDGET);
    }

    /// Start-up ends on paths whose smoothed RTT is above the aim: the next sample starts a
    /// probe, not SUSPECT_AFTER later. Where the RTT at the end of start-up is within the aim,
    /// nothing is probed.
    #[test]
    fn start_up_that_ends_above_the_aim_probes_at_once() {
        let t0 = Instant::now();
        let run = |srtt_ms: u32| {
            let mut b = InflightBudget::new(5 * MS, 2.0);
            let mut i = 0u32;
            while b.in_startup() {
                assert!(i < 40, "start-up did not end");
                let s = held(62_500 * u64::from(i), 20, srtt_ms, 50_000);
                b.handle_sample(t0 + SAMPLE_PERIOD * i, true, [(1u8, s)]);
                i += 1;
            }
            let s = held(62_500 * u64::from(i), 20, srtt_ms, 50_000);
            b.handle_sample(t0 + SAMPLE_PERIOD * i, true, [(1u8, s)]);
            b.probing()
        };
        assert!(run(115), "another sender's queue: probe at once");
        assert!(!run(40), "within the aim of 45 ms: no probe");
    }

    /// The path's RTT rose from 20 to 60 ms under a live subflow; the kernel still says 20. The
    /// budget (rate × (2 × 20 + 5 ms)) is below the new round trip: without the probe the rate
    /// collapses to what [`MIN_BUDGET`] carries; with it the smoothed RTT that stays above the
    /// aim starts a probe within ~1 s, which measures 60 ms, and the rate gets back to the
    /// bottleneck's.
    #[test]
    fn a_path_that_got_longer_is_probed_and_its_rate_comes_back() {
        let cap = 1_250_000.0;
        let (stale, r_stale) = closed_loop(false, 60.0, 20, 10);
        assert!(r_stale < 0.3 * cap, "no probe: {r_stale} of {cap}");
        assert_eq!(stale.probes(), 0);
        let (mut b, r) = closed_loop(true, 60.0, 20, 10);
        assert!(r > 0.95 * cap, "with the probe: {r} of {cap}");
        let p = b.take_probed().expect("a probe ended");
        assert_eq!((p.raised, p.subflows, p.changed), (1, 1, true));
        assert_eq!(p.min_rtt, 60 * MS);
        assert_eq!(p.kernel_min_rtt, 20 * MS);
        assert_eq!(b.min_rtt(&1), Some(60 * MS), "what the pacer gets");
        assert_eq!(b.min_rtt(&2), None);
        // Once a probe per PROBED_KEEP while the path stays longer, never more.
        let (b, r) = closed_loop(true, 60.0, 20, 35);
        assert!(r > 0.95 * cap, "{r}");
        assert!(
            (3..=4).contains(&b.probes()),
            "{} probes in 35 s",
            b.probes()
        );
    }

    /// Where the kernel's minimum is the path's, the budget keeps the smoothed RTT at its aim
    /// and never probes.
    #[test]
    fn a_path_at_its_minimum_is_never_probed() {
        let (b, r) = closed_loop(true, 20.0, 20, 30);
        assert_eq!(b.probes(), 0);
        assert!(r > 0.99 * 1_250_000.0, "{r}");
        assert!(!b.probing());
    }

    /// Only a subflow that carries the connection and holds about its share makes the minimum
    /// RTT suspect: a slow one (a 1 Mbit/s path beside a 10 Mbit/s one) or an over-fed one
    /// queues by itself. Two subflows for 2 s, the second's smoothed RTT 80 ms against an aim
    /// of 45.
    #[test]
    fn slow_or_over_fed_subflows_do_not_start_a_probe() {
        let t0 = Instant::now();
        let run = |second_rate: u64, second_held: u64| {
            let mut b = steady(2.0);
            for i in 0..=40u64 {
                let t = t0 + SAMPLE_PERIOD * i as u32;
                b.handle_sample(
                    t,
                    true,
                    [
                        (1u8, held(62_500 * i, 20, 40, 50_000)),
                        (2u8, held(second_rate * i, 20, 80, second_held)),
                    ],
                );
            }
            b.probes()
        };
        assert_eq!(run(6_250, 2_000), 0, "slow: a tenth of the fastest");
        assert_eq!(run(62_500, 500_000), 0, "over-fed: 9 times its 56 kB share");
        assert_eq!(run(62_500, 50_000), 1, "alike, holding its share: suspect");
    }
}
