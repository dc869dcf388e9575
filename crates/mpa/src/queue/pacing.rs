//! Pacing a connection's writer at its paths' measured bottleneck rate (issue #16, "latency under
//! load"; `mmsg run --pacing`).
//!
//! Why: the send time budget ([`super::inflight`]) bounds what a connection has on its paths to
//! `gain × min RTT + margin` of the delivery rate. Its `gain` must be above 1 (at 1 the connection
//! stalls at a fraction of its rate), and every byte beyond the path's BDP waits in the WAN's
//! bottleneck queue, behind which every probe of the same connection waits: with gain 2 the
//! loaded ping's median is the path RTT + one more min RTT + the margin (docs/results.md "The send
//! time budget's gain and margin"). A window cannot get that queue out without losing goodput; a
//! *rate* can. This is BBR's answer, applied by the gateway to the whole MPTCP connection: write
//! into the socket at the measured bottleneck rate (`BtlBw`, a windowed maximum of the delivery
//! rate), so the bottleneck's queue stays near empty, and keep the window (the in-flight budget,
//! gain 2) only as a cap. To find more room the rate cycles through BBR's `PROBE_BW` gains: 1.25
//! for one round (a queue of a quarter BDP if there is no room; a higher delivery rate if there
//! is), 0.75 for one round (drains that queue), then 1 for six.
//!
//! The pieces (no IO, no clock reads; time is a parameter):
//! - [`Pacer`]: fed every [`SAMPLE_PERIOD`] (while busy) with each subflow's acknowledged bytes,
//!   minimum RTT and what it has in flight, and whether the writer had data left in the queue
//!   since the last sample (`backlogged`). A rate sample is what all subflows acknowledged over
//!   the last [`RATE_ROUNDS`] rounds. It keeps `BtlBw`, the phase
//!   ([`Phase::Startup`] → [`Phase::Drain`] → [`Phase::ProbeBw`]) and tells the rate to pace at.
//! - [`TokenBucket`]: the writer's side: before each batch, how many bytes it may take now at that
//!   rate, or how long to wait for the next quantum.
//!
//! What differs from BBR, and why: the sender below us is the kernel's MPTCP scheduler and each
//! subflow's own congestion control, so this pacer never sets a window (the in-flight budget and
//! the subflows' windows do) and in `Startup` does not pace at all (the connection starts as
//! without pacing, the windows grow, the delivery rate with them); a sample counts for lowering
//! `BtlBw` only when the writer was backlogged (an app-limited sample may only raise it); a round
//! is one minimum RTT of time (the largest of the subflows' minimum RTTs), not a packet-timed
//! round, since we see the subflows only through periodic samples.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use super::inflight::{DeliverySample, Gate};

/// How often the driver should sample the subflows while the connection is busy.
pub const SAMPLE_PERIOD: Duration = Duration::from_millis(10);
/// How often while it is idle (nothing in flight, nothing queued).
pub const IDLE_SAMPLE_PERIOD: Duration = Duration::from_millis(100);
/// `BtlBw` is the largest delivery-rate sample of the last this many rounds (BBR: 10).
pub const BW_WINDOW_ROUNDS: u32 = 10;
/// The pacing gains of `ProbeBw`, one round each (BBR's cycle).
pub const PROBE_GAINS: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// Pacing gain while draining the queue `Startup` built.
pub const DRAIN_GAIN: f64 = 0.75;
/// `Startup` ends when `BtlBw` grew less than this factor in [`STARTUP_FULL_ROUNDS`] backlogged
/// rounds in a row (BBR: 1.25 in 3).
pub const STARTUP_GROWTH: f64 = 1.25;
/// See [`STARTUP_GROWTH`].
pub const STARTUP_FULL_ROUNDS: u32 = 3;
/// `Startup` ends only with a queue on the paths of at least this many [`QUEUE_TARGET`]s: the
/// in-flight cap (the send time budget) lets the rate grow by less than [`STARTUP_GROWTH`] per
/// round, and the growth rule alone ended `Startup` at half the 2x2 testbed's rate (`ProbeBw`
/// then took 3 s to climb the rest, ~4 % per cycle). The subflows' smoothed RTT sits 3–6 ms
/// above their minimum on an unqueued 10 Mbit/s path (serialization, delayed ACKs), 10–15 ms
/// once it is full.
pub const STARTUP_QUEUE_TARGETS: u32 = 2;
/// `Drain` ends at the latest after this many rounds (a path whose in-flight never falls to one
/// BDP, e.g. a slow subflow's standing window, must not keep the connection at 0.75).
pub const MAX_DRAIN_ROUNDS: u32 = 8;
/// Bounds of a round (the largest minimum RTT of the subflows).
pub const MIN_ROUND: Duration = Duration::from_millis(5);
/// See [`MIN_ROUND`].
pub const MAX_ROUND: Duration = Duration::from_millis(250);
/// A delivery-rate sample spans this many rounds of acknowledged bytes (all subflows together:
/// one subflow's kernel sample, `tcpi_delivery_rate`, runs above its share when subflows that
/// share an uplink take turns, and their sum overestimated the 2x2 testbed's 2.3 MB/s as 3.1).
pub const RATE_ROUNDS: u32 = 4;
/// The drain round of `ProbeBw` (gain 0.75) lasts until what is in flight is at most the BDP
/// plus this much time at `BtlBw` (at most [`MAX_PROBE_DRAIN_ROUNDS`]): BBR ends it after one
/// round whatever is left, and on the 2x2 testbed `BtlBw` (the windowed maximum of the
/// samples) ran 1.5 % above what the bottleneck carried, so each cycle left ~2.4 ms more queue
/// than its drain took out, until the in-flight cap held it (1.2 BDPs queued, ping median
/// 38–41 ms on a 20.7 ms path). Draining a queue costs no goodput while the queue lasts (the
/// bottleneck stays busy); this bounds what is left to about this much.
pub const QUEUE_TARGET: Duration = Duration::from_millis(5);
/// See [`QUEUE_TARGET`].
pub const MAX_PROBE_DRAIN_ROUNDS: u32 = 2;

/// Most delivery-rate samples kept for the windowed maximum (bounded memory whatever the round).
pub const MAX_BW_SAMPLES: usize = 256;
/// The writer's bucket holds at most this much time at the pacing rate: a writer woken late
/// (tokio's timer sleeps 1 ms or more, the machine's scheduler adds to it) still sends what it
/// was due. With 2 ms the pacer lost its own tokens: the writer sent ~85 % of the pacing rate,
/// the delivered rate (the next `BtlBw`) followed, 15.4 of 17.5 Mbit/s on the 2x2 testbed.
pub const BURST: Duration = Duration::from_millis(5);
/// A writer out of tokens waits until this much time at the pacing rate has accrued (at least
/// one full-size frame).
pub const QUANTUM: Duration = Duration::from_millis(1);
/// The bucket holds at least this many bytes (two full-size frames).
pub const MIN_BURST_BYTES: f64 = 3000.0;
/// Shortest and longest wait of a writer that is out of tokens.
pub const MIN_WAIT: Duration = Duration::from_millis(1);
/// See [`MIN_WAIT`].
pub const MAX_WAIT: Duration = Duration::from_millis(20);

/// The pacer's settings (`mmsg run --pacing-queue-target`, `--pacing-rate-rounds`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PacerConfig {
    /// See [`QUEUE_TARGET`].
    pub queue_target: Duration,
    /// See [`RATE_ROUNDS`] (at least 1).
    pub rate_rounds: u32,
}

impl Default for PacerConfig {
    fn default() -> Self {
        PacerConfig {
            queue_target: QUEUE_TARGET,
            rate_rounds: RATE_ROUNDS,
        }
    }
}
/// Where the pacer is in its cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// No pacing yet: the windows grow and `BtlBw` with them.
    Startup,
    /// Pacing at [`DRAIN_GAIN`] until what is in flight is one BDP.
    Drain,
    /// Pacing at [`PROBE_GAINS`]`[i]` × `BtlBw`.
    ProbeBw(usize),
}

impl Phase {
    /// Its name in `mmsg status` and the metrics: `startup`, `drain` or `probe_bw`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Startup => "startup",
            Phase::Drain => "drain",
            Phase::ProbeBw(_) => "probe_bw",
        }
    }

    /// The pacing rate's gain over `BtlBw` in this phase; 0 in `Startup` (not paced).
    pub fn gain(self) -> f64 {
        match self {
            Phase::Startup => 0.0,
            Phase::Drain => DRAIN_GAIN,
            Phase::ProbeBw(i) => PROBE_GAINS.get(i).copied().unwrap_or(1.0),
        }
    }
}

/// The pacer of one connection (see the module docs). `K` names a subflow.
#[derive(Debug, Clone)]
pub struct Pacer<K> {
    config: PacerConfig,
    acked: BTreeMap<K, u64>,
    /// Rate samples, stamped with `busy` at the time.
    bw: VecDeque<(Duration, f64)>,
    /// Time spent backlogged (the clock `BtlBw`'s window ages by).
    busy: Duration,
    round: Duration,
    phase: Phase,
    phase_start: Instant,
    phase_rounds: u32,
    next_round: Instant,
    full_bw: f64,
    full_rounds: u32,
    btl_bw: f64,
    in_flight: u64,
    last_sample: Instant,
    /// Bytes the subflows acknowledged since the start (only subflows seen in consecutive
    /// samples count: a subflow's counter starts with it).
    delivered: u64,
    history: VecDeque<(Instant, u64)>,
    /// The subflows' smoothed RTT above their minimum, weighted by what each delivered in the
    /// last sample: the queue on the paths.
    queue_delay: Duration,
    last_rate: f64,
}

impl<K: Ord + Copy> Pacer<K> {
    /// A pacer in `Startup`.
    pub fn new(now: Instant, config: PacerConfig) -> Self {
        Pacer {
            config: PacerConfig {
                rate_rounds: config.rate_rounds.max(1),
                ..config
            },
            acked: BTreeMap::new(),
            bw: VecDeque::new(),
            busy: Duration::ZERO,
            round: MIN_ROUND,
            phase: Phase::Startup,
            phase_start: now,
            phase_rounds: 0,
            next_round: now,
            full_bw: 0.0,
            full_rounds: 0,
            btl_bw: 0.0,
            in_flight: 0,
            last_sample: now,
            delivered: 0,
            history: VecDeque::new(),
            queue_delay: Duration::ZERO,
            last_rate: 0.0,
        }
    }

    /// Feeds one sample of every subflow (subflows not in it are forgotten); `backlogged`: the
    /// writer left data in its queue since the last sample (the sample shows what the paths
    /// carry, not what the application offered).
    pub fn handle_sample(
        &mut self,
        now: Instant,
        backlogged: bool,
        subflows: impl IntoIterator<Item = (K, DeliverySample)>,
    ) {
        let (mut newly, mut round, mut in_flight) = (0u64, Duration::ZERO, 0);
        let mut queue_weighted = 0.0f64;
        let mut seen = BTreeMap::new();
        for (k, s) in subflows {
            if !s.established {
                continue;
            }
            if let Some(&a) = self.acked.get(&k) {
                let d = s.bytes_acked.saturating_sub(a);
                newly = newly.saturating_add(d);
                let q = s.srtt_us.saturating_sub(s.min_rtt_us);
                queue_weighted += d as f64 * f64::from(q);
            }
            seen.insert(k, s.bytes_acked);
            round = round.max(Duration::from_micros(u64::from(s.min_rtt_us)));
            in_flight += s.queued;
        }
        self.acked = seen;
        self.in_flight = in_flight;
        self.round = round.clamp(MIN_ROUND, MAX_ROUND);
        let fresh = newly > 0;
        if fresh {
            self.queue_delay = Duration::from_micros((queue_weighted / newly as f64) as u64);
        }
        self.delivered = self.delivered.saturating_add(newly);
        let sample = self.rate_sample(now);
        self.last_rate = sample;
        // The window ages only while backlogged (the samples are stamped with backlogged time):
        // after a quiet spell the connection starts again at the rate its paths carried, not at
        // what a ping or two delivered.
        if backlogged {
            self.busy += now.saturating_duration_since(self.last_sample);
            let window = self.round * BW_WINDOW_ROUNDS;
            while self
                .bw
                .front()
                .is_some_and(|&(t, _)| self.busy.saturating_sub(t) > window)
            {
                self.bw.pop_front();
            }
        }
        self.last_sample = now;
        let max = self.max_bw();
        if fresh && (backlogged || sample > max) {
            if self.bw.len() >= MAX_BW_SAMPLES {
                self.bw.pop_front();
            }
            self.bw.push_back((self.busy, sample));
        }
        self.btl_bw = self.max_bw();
        if now >= self.next_round {
            self.next_round = now + self.round;
            self.on_round(now, backlogged);
        }
        if let Phase::ProbeBw(i) = self.phase {
            // Each gain for one round, but the drain (0.75): it ends once one BDP is in flight
            // (the queue is gone: pacing below the rate any longer wastes the path), and
            // otherwise not before the queue is down to the target (see [`QUEUE_TARGET`]).
            let draining = PROBE_GAINS.get(i).is_some_and(|&g| g < 1.0);
            let age = now.saturating_duration_since(self.phase_start);
            let in_flight = self.in_flight as f64;
            let done = if draining {
                let left = self.btl_bw * self.config.queue_target.as_secs_f64();
                in_flight <= self.bdp()
                    || (age >= self.round && in_flight <= self.bdp() + left)
                    || age >= self.round * MAX_PROBE_DRAIN_ROUNDS
            } else {
                age >= self.round
            };
            if done {
                self.enter(Phase::ProbeBw((i + 1) % PROBE_GAINS.len()), now);
            }
        }
    }

    /// `BtlBw` × one round, bytes.
    fn bdp(&self) -> f64 {
        self.btl_bw * self.round.as_secs_f64()
    }

    /// The delivery rate over the last [`RATE_ROUNDS`] rounds (the newest history entry at least
    /// that old), bytes per second; records `now` in the history.
    fn rate_sample(&mut self, now: Instant) -> f64 {
        let span = self.round * self.config.rate_rounds;
        // Drop what is older than needed: keep one entry at least `span` old.
        while self.history.len() >= 2
            && self
                .history
                .get(1)
                .is_some_and(|&(t, _)| now.saturating_duration_since(t) >= span)
        {
            self.history.pop_front();
        }
        let sample = match self.history.front() {
            Some(&(t, d)) if now.saturating_duration_since(t) >= span => {
                (self.delivered - d) as f64 / now.saturating_duration_since(t).as_secs_f64()
            }
            _ => 0.0,
        };
        if self.history.len() >= MAX_BW_SAMPLES {
            self.history.pop_front();
        }
        self.history.push_back((now, self.delivered));
        sample
    }

    fn max_bw(&self) -> f64 {
        self.bw.iter().map(|&(_, b)| b).fold(0.0, f64::max)
    }

    /// The phase machine, once per round.
    fn on_round(&mut self, now: Instant, backlogged: bool) {
        self.phase_rounds += 1;
        match self.phase {
            Phase::Startup => {
                if !backlogged || self.btl_bw <= 0.0 {
                    return;
                }
                if self.btl_bw >= self.full_bw * STARTUP_GROWTH {
                    self.full_bw = self.btl_bw;
                    self.full_rounds = 0;
                } else {
                    self.full_rounds += 1;
                    // The rate may stop growing because the in-flight cap holds it, not the
                    // path: only a queue on the paths says they are full.
                    let full = self.queue_delay >= self.config.queue_target * STARTUP_QUEUE_TARGETS;
                    if self.full_rounds >= STARTUP_FULL_ROUNDS && full {
                        self.enter(Phase::Drain, now);
                    }
                }
            }
            Phase::Drain => {
                if self.in_flight as f64 <= self.bdp() || self.phase_rounds >= MAX_DRAIN_ROUNDS {
                    // Start past the probe and its drain (BBR starts at a random phase but 1).
                    self.enter(Phase::ProbeBw(2), now);
                }
            }
            Phase::ProbeBw(_) => {}
        }
    }

    fn enter(&mut self, phase: Phase, now: Instant) {
        self.phase = phase;
        self.phase_start = now;
        self.phase_rounds = 0;
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// `BtlBw`, bytes per second (0 until measured).
    pub fn bottleneck_rate(&self) -> u64 {
        self.btl_bw as u64
    }

    /// The length of a round (the subflows' largest minimum RTT, bounded).
    pub fn round(&self) -> Duration {
        self.round
    }

    /// The rate to pace the writer at, bytes per second; 0: do not pace (`Startup`, or nothing
    /// measured yet).
    pub fn pacing_rate(&self) -> u64 {
        (self.phase.gain() * self.btl_bw) as u64
    }

    /// The delivery rate over the last sample's span, bytes per second.
    pub fn last_rate_sample(&self) -> u64 {
        self.last_rate as u64
    }

    /// The queue on the paths at the last sample (see [`QUEUE_TARGET`]).
    pub fn queue_delay(&self) -> Duration {
        self.queue_delay
    }
}

/// The writer's token bucket at the pacer's rate (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct TokenBucket {
    tokens: f64,
    at: Option<Instant>,
    /// The writer's recurring stalls ([`super::stall`]): the bucket holds that much more time.
    stall_cover: Duration,
    /// The last [`TokenBucket::gate`] had a rate: writes spend tokens only then (an unpaced
    /// batch must not become a debt the first paced writes pay off).
    paced: bool,
}

impl Default for TokenBucket {
    fn default() -> Self {
        Self::new()
    }
}

impl TokenBucket {
    /// An empty bucket (it fills from the first call on).
    pub fn new() -> Self {
        TokenBucket {
            tokens: 0.0,
            at: None,
            stall_cover: Duration::ZERO,
            paced: false,
        }
    }

    /// The writer keeps waking about `cover` later than the send time budget's margin allows
    /// (the budget's stall cover, [`super::stall`]; the margin, 5 ms by default, is as long as
    /// [`BURST`]): the bucket holds [`BURST`] + `cover` at the rate, so a writer woken that late
    /// still sends what it was due. Without it a stall's tokens were lost, the
    /// delivered rate (the next `BtlBw`) fell with them, round after round: with the gateway
    /// stopped 30 ms every 200 ms the paced connection carried 6.6 / 11.7 Mbit/s (4 flows / UDP
    /// at 2x) against the budget's 17.1 / 17.2.
    pub fn set_stall_cover(&mut self, cover: Duration) {
        self.stall_cover = cover;
    }

    fn depth(&self, rate: f64) -> f64 {
        (rate * (BURST + self.stall_cover).as_secs_f64()).max(MIN_BURST_BYTES)
    }

    /// What the writer may take now at `rate` bytes/s (0: not paced, [`Gate::Write`] of
    /// `max_batch`): up to the tokens it has (at least one frame, as [`super::write_gate`]), or a
    /// wait until a [`QUANTUM`] has accrued.
    pub fn gate(&mut self, now: Instant, rate: u64, max_batch: usize) -> Gate {
        let rate = rate as f64;
        let last = self.at.replace(now);
        if rate <= 0.0 {
            self.tokens = 0.0;
            self.paced = false;
            return Gate::Write(max_batch);
        }
        if !self.paced {
            self.tokens = self.tokens.max(0.0);
            self.paced = true;
        }
        let depth = self.depth(rate);
        let elapsed = last.map_or(BURST, |t| now.saturating_duration_since(t));
        self.tokens = (self.tokens + rate * elapsed.as_secs_f64()).min(depth);
        if self.tokens >= 1.0 {
            return Gate::Write((self.tokens as usize).clamp(1, max_batch.max(1)));
        }
        let quantum = (rate * QUANTUM.as_secs_f64()).max(MIN_BURST_BYTES / 2.0);
        let wait = Duration::from_secs_f64((quantum - self.tokens) / rate);
        Gate::Wait(wait.clamp(MIN_WAIT, MAX_WAIT))
    }

    /// `bytes` were written (the bucket may go below zero: a frame larger than the tokens left).
    pub fn spend(&mut self, bytes: usize) {
        if self.paced {
            self.tokens -= bytes as f64;
        }
    }
}

/// The stricter of two gates: the smaller write, or the longer wait.
pub fn stricter(a: Gate, b: Gate) -> Gate {
    match (a, b) {
        (Gate::Write(x), Gate::Write(y)) => Gate::Write(x.min(y)),
        (Gate::Wait(x), Gate::Wait(y)) => Gate::Wait(x.max(y)),
        (Gate::Wait(w), Gate::Write(_)) | (Gate::Write(_), Gate::Wait(w)) => Gate::Wait(w),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn sf(acked: u64, _rate: u64, in_flight: u64) -> DeliverySample {
        DeliverySample {
            established: true,
            bytes_acked: acked,
            min_rtt_us: 20_000,
            queued: in_flight,
            // A path with a queue (12 ms): full.
            srtt_us: 32_000,
        }
    }

    /// One sample 10 ms after `t` (rounds are 20 ms) of two subflows each delivering `rate`
    /// bytes/s with `in_flight` bytes on its path.
    fn step(
        p: &mut Pacer<u8>,
        t: &mut Instant,
        acked: &mut u64,
        rate: u64,
        in_flight: u64,
        busy: bool,
    ) {
        *acked += rate / 100;
        *t += 10 * MS;
        p.handle_sample(
            *t,
            busy,
            [
                (1, sf(*acked, rate, in_flight)),
                (2, sf(*acked, rate, in_flight)),
            ],
        );
    }

    /// `samples` backlogged samples with one BDP in flight.
    fn run(p: &mut Pacer<u8>, t: &mut Instant, acked: &mut u64, rate: u64, samples: u32) {
        for _ in 0..samples {
            step(p, t, acked, rate, rate / 50, true);
        }
    }

    #[test]
    fn startup_does_not_pace_and_ends_when_the_rate_stops_growing() {
        let mut t = Instant::now();
        let mut p = Pacer::new(t, PacerConfig::default());
        let mut acked = 0;
        // Growing by half per round: still starting.
        for r in 0..6u32 {
            run(
                &mut p,
                &mut t,
                &mut acked,
                100_000 * 3u64.pow(r) / 2u64.pow(r),
                2,
            );
            assert_eq!(p.phase(), Phase::Startup);
            assert_eq!(p.pacing_rate(), 0);
        }
        // Flat: once the two-round samples are flat, three rounds later it drains.
        run(&mut p, &mut t, &mut acked, 1_250_000, 12);
        assert_ne!(p.phase(), Phase::Startup);
        // Both subflows' samples count: BtlBw is their sum.
        assert_near(p.bottleneck_rate(), 2_500_000);
    }

    fn assert_near(got: u64, want: u64) {
        assert!(got.abs_diff(want) <= want / 1000, "{got} vs {want}");
    }

    #[test]
    fn startup_goes_on_while_the_paths_have_no_queue() {
        let mut t = Instant::now();
        let mut p = Pacer::new(t, PacerConfig::default());
        let mut acked = 0;
        // A flat rate held by the in-flight cap, 4 ms above the minimum RTT: not full.
        for _ in 0..40 {
            acked += 10_000;
            t += 10 * MS;
            let s = DeliverySample {
                srtt_us: 24_000,
                ..sf(acked, 0, 20_000)
            };
            p.handle_sample(t, true, [(1, s)]);
        }
        assert_eq!(p.phase(), Phase::Startup);
        assert_eq!(p.pacing_rate(), 0);
        // The queue appears: three rounds later it drains.
        for _ in 0..8 {
            acked += 10_000;
            t += 10 * MS;
            p.handle_sample(t, true, [(1, sf(acked, 0, 20_000))]);
        }
        assert_ne!(p.phase(), Phase::Startup);
    }

    #[test]
    fn probe_bw_cycles_the_gains_one_round_each() {
        let mut t = Instant::now();
        let mut p = Pacer::new(t, PacerConfig::default());
        let mut acked = 0;
        run(&mut p, &mut t, &mut acked, 1_250_000, 40);
        let Phase::ProbeBw(_) = p.phase() else {
            panic!("{:?}", p.phase())
        };
        let mut rates = Vec::new();
        for _ in 0..16 {
            // A BDP and a bit (less than the target's 5 ms) in flight: the 0.75 phase lasts
            // its one round.
            for _ in 0..2 {
                step(&mut p, &mut t, &mut acked, 1_250_000, 28_000, true);
            }
            rates.push(p.pacing_rate());
        }
        // Over two cycles of 8 rounds: two probes at 1.25 and two drains at 0.75, the rest at 1.
        let count = |r: u64| rates.iter().filter(|&&x| x == r).count();
        assert_eq!(count(3_125_000), 2, "{rates:?}");
        assert_eq!(count(1_875_000), 2, "{rates:?}");
        assert_eq!(count(2_500_000), 12, "{rates:?}");
    }

    #[test]
    fn the_probe_drain_ends_early_once_its_queue_is_gone() {
        let mut t = Instant::now();
        let mut p = Pacer::new(t, PacerConfig::default());
        let mut acked = 0;
        run(&mut p, &mut t, &mut acked, 1_250_000, 40);
        // Samples every 10 ms with half a BDP in flight: no 0.75 phase lasts beyond one sample.
        let (mut probes, mut drains) = (0, 0);
        for _ in 0..64 {
            step(&mut p, &mut t, &mut acked, 1_250_000, 6_000, true);
            match p.pacing_rate() {
                3_125_000 => probes += 1,
                1_875_000 => drains += 1,
                _ => {}
            }
        }
        assert!(probes >= 6, "{probes}");
        // A probe lasts a round (two samples), a drain one sample.
        assert!(drains * 2 <= probes + 1, "{drains} vs {probes}");
    }

    /// Steps to the next probe drain round (0.75 × 1.25 MB/s) and counts its samples with
    /// `in_flight` bytes on each path (one BDP: 25 kB).
    fn probe_drain_samples(
        p: &mut Pacer<u8>,
        t: &mut Instant,
        acked: &mut u64,
        in_flight: u64,
    ) -> usize {
        while p.pacing_rate() != 1_875_000 {
            step(p, t, acked, 1_250_000, 25_000, true);
        }
        let mut samples = 0;
        while p.pacing_rate() == 1_875_000 {
            step(p, t, acked, 1_250_000, in_flight, true);
            samples += 1;
        }
        samples
    }

    #[test]
    fn a_queue_above_the_target_keeps_the_probe_drain_going_up_to_its_limit() {
        let mut t = Instant::now();
        let mut p = Pacer::new(t, PacerConfig::default());
        let mut acked = 0;
        run(&mut p, &mut t, &mut acked, 1_250_000, 40);
        // 12 ms of queue stays (30 kB above the 50 kB BDP): four rounds (eight samples), not one.
        let samples = probe_drain_samples(&mut p, &mut t, &mut acked, 40_000);
        assert_eq!(samples, 2 * MAX_PROBE_DRAIN_ROUNDS as usize);
        // A queue down to the target ends it after one round.
        assert_eq!(probe_drain_samples(&mut p, &mut t, &mut acked, 28_000), 2);
    }

    #[test]
    fn drain_paces_below_the_rate_until_one_bdp_is_in_flight() {
        let mut t = Instant::now();
        let mut p = Pacer::new(t, PacerConfig::default());
        let mut acked = 0;
        // Flat from the start with ten BDPs in flight (20 ms at 2 MB/s is 40 kB): Startup ends
        // and Drain holds.
        for _ in 0..16 {
            step(&mut p, &mut t, &mut acked, 1_000_000, 200_000, true);
        }
        assert_eq!(p.phase(), Phase::Drain);
        assert_eq!(p.pacing_rate(), 1_500_000);
        // Down to one BDP: probing.
        for _ in 0..4 {
            step(&mut p, &mut t, &mut acked, 1_000_000, 20_000, true);
        }
        assert!(matches!(p.phase(), Phase::ProbeBw(_)), "{:?}", p.phase());
    }

    #[test]
    fn drain_ends_after_its_longest_time_even_if_in_flight_stays_high() {
        let mut t = Instant::now();
        let mut p = Pacer::new(t, PacerConfig::default());
        let mut acked = 0;
        for _ in 0..60 {
            step(&mut p, &mut t, &mut acked, 1_000_000, 500_000, true);
        }
        assert!(matches!(p.phase(), Phase::ProbeBw(_)), "{:?}", p.phase());
    }

    #[test]
    fn app_limited_samples_only_raise_and_quiet_time_does_not_age_the_maximum() {
        let mut t = Instant::now();
        let mut p = Pacer::new(t, PacerConfig::default());
        let mut acked = 0;
        run(&mut p, &mut t, &mut acked, 1_000_000, 40);
        assert_near(p.bottleneck_rate(), 2_000_000);
        // Not backlogged, slower, for a second (50 rounds): BtlBw stays (the application sent
        // less, the path did not shrink), and the rate is paced at it.
        for _ in 0..100 {
            step(&mut p, &mut t, &mut acked, 50_000, 0, false);
        }
        assert_near(p.bottleneck_rate(), 2_000_000);
        assert!(p.pacing_rate() >= 1_500_000, "{}", p.pacing_rate());
        // Not backlogged, faster (once a whole sample is): counts.
        for _ in 0..2 * RATE_ROUNDS + 1 {
            step(&mut p, &mut t, &mut acked, 1_500_000, 0, false);
        }
        assert_near(p.bottleneck_rate(), 3_000_000);
        // Backlogged and slower for more than the window (10 rounds of 20 ms) after the first
        // whole slow sample: it follows.
        for _ in 0..2 * (BW_WINDOW_ROUNDS + RATE_ROUNDS) + 4 {
            step(&mut p, &mut t, &mut acked, 200_000, 0, true);
        }
        assert_near(p.bottleneck_rate(), 400_000);
    }

    #[test]
    fn a_subflow_that_acked_nothing_new_adds_nothing() {
        let mut t = Instant::now();
        let mut p: Pacer<u8> = Pacer::new(t, PacerConfig::default());
        let still = sf(5000, 0, 0);
        for i in 1..=10u64 {
            t += 10 * MS;
            p.handle_sample(t, true, [(1, sf(i * 1000, 0, 0)), (2, still)]);
        }
        assert_near(p.bottleneck_rate(), 100_000);
        // Not established, or new: no sample either.
        t += 10 * MS;
        let closed = DeliverySample {
            established: false,
            ..sf(9999, 9_000_000, 0)
        };
        p.handle_sample(
            t,
            true,
            [(1, sf(11_000, 0, 0)), (3, closed), (4, sf(1, 0, 0))],
        );
        t += 10 * MS;
        let closed = DeliverySample {
            bytes_acked: 99_999,
            ..closed
        };
        p.handle_sample(
            t,
            true,
            [(1, sf(12_000, 0, 0)), (3, closed), (4, sf(1, 0, 0))],
        );
        assert_near(p.bottleneck_rate(), 100_000);
    }

    #[test]
    fn the_sample_window_is_bounded() {
        let mut t = Instant::now();
        let mut p: Pacer<u8> = Pacer::new(t, PacerConfig::default());
        for i in 0..10_000u64 {
            t += MS / 10;
            let s = DeliverySample {
                min_rtt_us: 250_000,
                ..sf(i + 1, 1000 + i, 0)
            };
            p.handle_sample(t, true, [(1, s)]);
        }
        assert!(p.bw.len() <= MAX_BW_SAMPLES);
        assert_eq!(p.round(), MAX_ROUND);
    }

    #[test]
    fn the_bucket_paces_a_backlogged_writer_at_its_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new();
        let rate = 2_500_000; // 20 Mbit/s
        let (mut t, mut sent) = (t0, 0usize);
        while t < t0 + Duration::from_secs(1) {
            match b.gate(t, rate, 256 * 1024) {
                Gate::Write(n) => {
                    // Whole 1514-byte frames, at least one.
                    let n = (n / 1514).max(1) * 1514;
                    b.spend(n);
                    sent += n;
                }
                Gate::Wait(d) => {
                    assert!((MIN_WAIT..=MAX_WAIT).contains(&d), "{d:?}");
                    t += d;
                }
            }
        }
        // Within one burst of the rate.
        let burst = b.depth(rate as f64) as usize;
        assert!(sent.abs_diff(rate as usize) <= 2 * burst, "{sent}");
    }

    #[test]
    fn an_unpaced_bucket_writes_whole_batches_and_keeps_no_credit() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new();
        assert_eq!(b.gate(t0, 0, 1000), Gate::Write(1000));
        // Pacing starts a second later: no second of credit, at most one burst.
        match b.gate(t0 + Duration::from_secs(1), 1_000_000, 1 << 20) {
            Gate::Write(n) => assert!(n as f64 <= b.depth(1e6), "{n}"),
            g => panic!("{g:?}"),
        }
    }

    #[test]
    fn an_unpaced_batch_is_no_debt_for_the_paced_writes_after_it() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new();
        assert_eq!(b.gate(t0, 0, 256 * 1024), Gate::Write(256 * 1024));
        b.spend(256 * 1024);
        // Pacing starts 1 ms later (the pacer left Startup): it may write at once.
        match b.gate(t0 + MS, 2_500_000, 256 * 1024) {
            Gate::Write(n) => assert!(n >= 2000, "{n}"),
            g => panic!("{g:?}"),
        }
    }

    #[test]
    fn a_writer_that_keeps_stalling_catches_up_what_its_stall_cover_holds() {
        let rate = 2_500_000; // 20 Mbit/s: 2,500 bytes per ms
        let woken_late = |cover: Duration| {
            let t0 = Instant::now();
            let mut b = TokenBucket::new();
            b.set_stall_cover(cover);
            // Paced and out of tokens, then woken 30 ms later.
            if let Gate::Write(n) = b.gate(t0, rate, 1 << 20) {
                b.spend(n);
            }
            match b.gate(t0 + 30 * MS, rate, 1 << 20) {
                Gate::Write(n) => n,
                g => panic!("{g:?}"),
            }
        };
        // Without a cover the bucket holds 5 ms: 25 ms of the stall's tokens are lost.
        assert_eq!(woken_late(Duration::ZERO), 12_500);
        // A cover of 25 ms (a writer that keeps waking ~30 ms late): all of it.
        assert_eq!(woken_late(25 * MS), 75_000);
        // Never more than the stall earned.
        assert_eq!(woken_late(50 * MS), 75_000);
    }

    #[test]
    fn stricter_takes_the_smaller_write_or_the_longer_wait() {
        assert_eq!(stricter(Gate::Write(5), Gate::Write(3)), Gate::Write(3));
        assert_eq!(stricter(Gate::Write(5), Gate::Wait(MS)), Gate::Wait(MS));
        assert_eq!(
            stricter(Gate::Wait(MS), Gate::Wait(3 * MS)),
            Gate::Wait(3 * MS)
        );
    }
}
