//! Subflow health: noticing within a few hundred milliseconds that one subflow of an MPTCP
//! connection (one uplink × remote address pair) has stopped carrying data, so the driver can take
//! it out at once instead of waiting for the kernel (docs/mmsg.md "Failover").
//!
//! MPTCP keeps scheduling onto a subflow whose uplink died until that subflow's retransmission
//! timer backs off, and data already sent on it waits for the connection-level reinjection; an
//! uplink cut stalls the tunnel for 0.5–2.5 s. [`keepalive::Liveness`](crate::keepalive) only
//! notices a connection that is entirely silent, after 3 s.
//!
//! Two sans-IO parts, time a parameter:
//! - [`StallDetector`]: fed with samples of each subflow's `tcp_info` (taken every
//!   ~20 ms by the driver), it declares a subflow dead when it has had data in flight and no
//!   acknowledgement for [`stall_limit`], or as soon as its retransmission timer fired with no
//!   progress since. The stall is timed from the subflow's last acknowledgement as the kernel
//!   saw it (`tcpi_last_ack_recv`), not from the first sample that saw no progress (which is up
//!   to one sample period late), but never from before its data went in flight. The limit is
//!   max(150 ms, 2 × srtt, srtt + 4 × rttvar) in general. For a subflow whose ACK clock was
//!   running (cwnd-limited, in flight since before its last acknowledgement) it is
//!   max(100 ms, 2 × srtt, srtt + 2 × rttvar): its next acknowledgement is due within an RTT,
//!   but where subflows share a bottleneck its segments can wait behind another subflow's burst
//!   for up to the queueing delay, itself at most the srtt (measured on a loaded machine:
//!   healthy clocked subflows went 1.03–1.42 × srtt without an ACK).
//! - [`PathHold`]: the hysteresis per path (local, remote address): after a death the path is
//!   not probed again (a new subflow requested) for a hold-down that doubles with every death
//!   within [`FLAP_WINDOW`] (a flapping uplink is left alone longer). The probe itself is a new
//!   subflow; the path is alive again when it establishes.
//! - False deaths, learnt per path ([`PathHold::on_established`], [`PathHold::slack`]): a probe
//!   that establishes within [`FALSE_DEATH_WITHIN`] of its hold-down's end shows the path was
//!   alive. On a congested path (many TCP flows sharing a drop-tail bottleneck: the paper's
//!   Case B) ACK gaps of several srtt and RTOs without a dead path are normal, and each false
//!   death made the kernel send the connection's whole unacknowledged data again and held the
//!   path down longer; measured there, fast failover cut the tunnel's goodput 1.5–5×. Such a
//!   death does not lengthen the hold-down, and every false death within [`FLAP_WINDOW`] doubles
//!   that path's limits and the RTO backoff that counts as dead ([`HealthSample::slack`], at
//!   most [`MAX_SLACK`] doublings). A path never falsely judged keeps the fast limits.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// The shortest stall that counts as dead: longer than a delayed ACK (40 ms) plus the RTT of a
/// short path, so a healthy idle-then-busy subflow is never taken out.
pub const MIN_STALL: Duration = Duration::from_millis(150);

/// The shortest stall that counts as dead for a subflow whose ACK clock was running
/// ([`HealthSample::clocked`]).
pub const MIN_STALL_CLOCKED: Duration = Duration::from_millis(100);

/// First hold-down after a path died before it is probed again.
pub const HOLD_MIN: Duration = Duration::from_millis(200);
/// Cap of the doubling hold-down.
pub const HOLD_MAX: Duration = Duration::from_secs(10);
/// Deaths older than this no longer lengthen the hold-down.
pub const FLAP_WINDOW: Duration = Duration::from_secs(60);
/// Deaths remembered per path (bounds the memory; 2^6 × [`HOLD_MIN`] > [`HOLD_MAX`] anyway).
const MAX_DEATHS: usize = 8;
/// A death was false when the path's next subflow established within this time after the
/// hold-down ended: the probe's first SYN was answered (a lost SYN is resent after 1 s, and a
/// cut path answers none).
pub const FALSE_DEATH_WITHIN: Duration = Duration::from_millis(800);
/// The most limit doublings a path earns by false deaths ([`PathHold::slack`]): 8 × the limits.
pub const MAX_SLACK: u8 = 3;

/// One subflow's transport state at one instant, as read from its `tcp_info`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HealthSample {
    /// The subflow is ESTABLISHED (other states are not judged).
    pub established: bool,
    /// Segments sent and not yet acknowledged (`tcpi_unacked`).
    pub unacked: u32,
    /// Bytes acknowledged so far (`tcpi_bytes_acked`): progress is any increase.
    pub bytes_acked: u64,
    /// Retransmission-timer backoff (`tcpi_backoff`): > 0 after an RTO without progress.
    pub backoff: u8,
    /// Smoothed RTT (`tcpi_rtt`).
    pub srtt: Duration,
    /// RTT variation (`tcpi_rttvar`).
    pub rttvar: Duration,
    /// Time since the subflow last received an acknowledgement (`tcpi_last_ack_recv`); `None`:
    /// unknown, the stall is timed from the first sample that saw no progress.
    pub last_ack_age: Option<Duration>,
    /// The subflow was cwnd-limited: as much in flight as its congestion window allows
    /// (`tcpi_unacked >= tcpi_snd_cwnd`) or data waiting in its send queue
    /// (`tcpi_notsent_bytes > 0`).
    pub cwnd_limited: bool,
    /// Doublings of the limits earned by false deaths on this subflow's path
    /// ([`PathHold::slack`]); an RTO counts as dead only from backoff `1 + slack`.
    pub slack: u8,
}

impl HealthSample {
    /// Was the subflow's ACK clock running: cwnd-limited, and in flight without a pause since
    /// before its last acknowledgement (`inflight_since` is when the detector first saw it in
    /// flight, `now` this sample's time)?
    pub fn clocked(&self, now: Instant, inflight_since: Instant) -> bool {
        self.cwnd_limited
            && self
                .last_ack_age
                .and_then(|a| now.checked_sub(a))
                .is_some_and(|last_ack| last_ack > inflight_since)
    }
}

/// How long a subflow with data in flight may go without acknowledgement progress before it
/// is dead: max([`MIN_STALL`], 2 × srtt, srtt + 4 × rttvar). The RTT terms keep a subflow whose
/// RTT grew under load (a queue in the WAN) from being taken out by its own queueing delay.
///
/// A flight of one or two segments may wait for the receiver's delayed ACK (up to 200 ms in
/// Linux), so this can take out a healthy sparse subflow (seen: 264–340 ms after the last ACK
/// at srtt 123–156 ms). An allowance of srtt + 200 ms for such flights was tried and measured
/// (`bench failover --before-bin`, 2 reps side by side): the voice stream's gap per cut went from
/// 212–314 ms (mean 255) to 141–524 ms (mean 324), and a false death of a sparse subflow costs
/// little (the kernel re-sends its few bytes; the path is probed again after 200 ms). Not kept.
pub fn stall_limit(s: &HealthSample) -> Duration {
    MIN_STALL
        .max(s.srtt.saturating_mul(2))
        .max(s.srtt.saturating_add(s.rttvar.saturating_mul(4)))
}

/// The limit for a subflow whose ACK clock was running ([`HealthSample::clocked`]):
/// max([`MIN_STALL_CLOCKED`], 2 × srtt, srtt + 2 × rttvar). With data in flight since before
/// its last acknowledgement, the oldest segment in flight was sent before that acknowledgement
/// arrived, so its own acknowledgement is due within one RTT of it, plus, where subflows share a
/// bottleneck queue, the time its segments wait behind another subflow's burst: at most the
/// queueing delay, itself less than the srtt. (srtt + 2 × rttvar alone took out healthy bulk
/// subflows 1.03–1.42 × srtt after their last ACK, rttvar 0.5–12 ms, srtt 79–128 ms, on a
/// loaded machine: 4–16 false deaths per 45 s transfer in `dashboard_e2e`.)
pub fn clocked_stall_limit(s: &HealthSample) -> Duration {
    MIN_STALL_CLOCKED
        .max(s.srtt.saturating_mul(2))
        .max(s.srtt.saturating_add(s.rttvar.saturating_mul(2)))
}

/// What [`StallDetector::handle_sample`] concluded for one subflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Acknowledgements progress, or nothing is in flight.
    Healthy,
    /// Data in flight without progress, not long enough to be dead yet.
    Stalled,
    /// Dead: reported once per subflow (take it out now).
    Dead,
    /// Reported dead before and not healthy since (already acted on).
    StillDead,
}

#[derive(Debug, Clone, Copy)]
struct Track {
    bytes_acked: u64,
    /// First sample without progress (while in flight).
    stall_since: Option<Instant>,
    /// First sample with data in flight since the last one with none.
    inflight_since: Option<Instant>,
    dead: bool,
}

/// Per-subflow stall detection for one connection; `K` names a subflow (e.g. its local and
/// remote socket address).
#[derive(Debug, Clone)]
pub struct StallDetector<K> {
    subflows: BTreeMap<K, Track>,
}

impl<K: Ord + Copy> Default for StallDetector<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Ord + Copy> StallDetector<K> {
    /// No subflow known yet.
    pub fn new() -> Self {
        StallDetector {
            subflows: BTreeMap::new(),
        }
    }

    /// One sample of subflow `key` taken at `now`, judged alone: the general [`stall_limit`].
    pub fn handle_sample(&mut self, now: Instant, key: K, s: &HealthSample) -> Verdict {
        self.judge(now, key, s, None)
    }

    /// One sample of every subflow of the connection, all taken at `now`; a verdict per
    /// subflow, in order. A subflow whose ACK clock was running ([`HealthSample::clocked`]) gets
    /// the shorter [`clocked_stall_limit`] only while another subflow of the connection keeps
    /// receiving ACKs (one came after half that limit into this one's silence): when every
    /// subflow goes quiet together, the cause is the peer or this machine (a scheduling stall),
    /// not one path, and the general limit applies.
    pub fn handle_connection(
        &mut self,
        now: Instant,
        samples: &[(K, HealthSample)],
    ) -> Vec<Verdict> {
        let acked_at = |s: &HealthSample| {
            s.last_ack_age
                .filter(|_| s.established)
                .and_then(|a| now.checked_sub(a))
        };
        samples
            .iter()
            .map(|(k, s)| {
                let peer_ack = samples
                    .iter()
                    .filter(|(o, _)| o != k)
                    .filter_map(|(_, o)| acked_at(o))
                    .max();
                self.judge(now, *k, s, peer_ack)
            })
            .collect()
    }

    /// One subflow's verdict; `peer_ack`: the latest ACK any other subflow of the connection
    /// received (`None`: unknown or judged alone).
    fn judge(
        &mut self,
        now: Instant,
        key: K,
        s: &HealthSample,
        peer_ack: Option<Instant>,
    ) -> Verdict {
        let t = self.subflows.entry(key).or_insert(Track {
            bytes_acked: s.bytes_acked,
            stall_since: None,
            inflight_since: None,
            dead: false,
        });
        let progress = s.bytes_acked != t.bytes_acked;
        t.bytes_acked = s.bytes_acked;
        if !s.established || s.unacked == 0 {
            t.inflight_since = None;
        } else if t.inflight_since.is_none() {
            t.inflight_since = Some(now);
        }
        if !s.established || s.unacked == 0 || progress {
            t.stall_since = None;
            t.dead = false;
            return Verdict::Healthy;
        }
        // In flight, no progress since the last sample. The stall began at most one sample
        // period before we first saw it, so measuring from the first sighting never overstates.
        let first_seen = *t.stall_since.get_or_insert(now);
        if t.dead {
            return Verdict::StillDead;
        }
        let inflight_since = t.inflight_since.unwrap_or(now);
        // With the kernel's last-ACK age: from that ACK, but never from before the data went in
        // flight (an idle subflow's last ACK is old; its first segment's ACK is due an RTT
        // after it was sent, which we saw no earlier than `inflight_since`).
        let since = s
            .last_ack_age
            .and_then(|a| now.checked_sub(a))
            .map_or(first_seen, |last_ack| last_ack.max(inflight_since));
        let stalled_for = now.saturating_duration_since(since);
        let clocked = clocked_stall_limit(s);
        let others_alive = peer_ack.is_some_and(|p| p >= since + clocked / 2);
        let limit = if others_alive && s.clocked(now, inflight_since) {
            clocked
        } else {
            stall_limit(s)
        };
        let limit = limit.saturating_mul(1u32 << s.slack.min(MAX_SLACK));
        let rto_fired = s.backoff > s.slack.min(MAX_SLACK) && now > first_seen;
        if stalled_for >= limit || rto_fired {
            t.dead = true;
            Verdict::Dead
        } else {
            Verdict::Stalled
        }
    }

    /// Forgets every subflow for which `keep` is false (closed or destroyed ones).
    pub fn retain(&mut self, mut keep: impl FnMut(&K) -> bool) {
        self.subflows.retain(|k, _| keep(k));
    }

    /// Subflows tracked.
    pub fn len(&self) -> usize {
        self.subflows.len()
    }

    /// No subflow tracked.
    pub fn is_empty(&self) -> bool {
        self.subflows.is_empty()
    }
}

/// The retransmission-timer backoff a subflow of an accepted connection must have reached (with
/// a dead verdict) before the accepting side destroys it: its RTO fired twice without progress.
/// The accepting side cannot create subflows, and it only sends keepalives on them, so it acts
/// on the kernel's own verdict, never on a late ACK alone (a gateway starved of CPU, e.g. under a
/// SYN flood, sees late ACKs on every subflow).
pub const ACCEPTED_MIN_BACKOFF: u8 = 2;

/// Which subflows the accepting side of a connection destroys, given one [`HealthSample`] and
/// one [`Verdict`] per subflow (in order): the established ones the detector declared dead
/// (now or before) whose retransmission timer backed off at least [`ACCEPTED_MIN_BACKOFF`]
/// times, and none at all if that would leave the connection without an established subflow
/// (the dialling side re-creates subflows; the accepting side destroying the last one would end
/// the connection).
pub fn accepted_side_doomed(samples: &[HealthSample], verdicts: &[Verdict]) -> Vec<bool> {
    let doomed: Vec<bool> = samples
        .iter()
        .zip(verdicts)
        .map(|(s, v)| {
            matches!(v, Verdict::Dead | Verdict::StillDead)
                && s.established
                && s.backoff >= ACCEPTED_MIN_BACKOFF
        })
        .collect();
    let survivor = samples
        .iter()
        .zip(&doomed)
        .any(|(s, &d)| s.established && !d);
    if survivor {
        doomed
    } else {
        vec![false; doomed.len()]
    }
}

#[derive(Debug, Clone, Default)]
struct PathState {
    deaths: VecDeque<Instant>,
    /// Deaths shown false by a quick re-establishment ([`PathHold::on_established`]).
    false_deaths: VecDeque<Instant>,
    /// The latest death and its hold-down, until the next establishment on the path.
    pending: Option<(Instant, Duration)>,
}

/// The hysteresis per path `P` (e.g. local and remote address): the hold-down after deaths. See
/// the module docs.
#[derive(Debug, Clone)]
pub struct PathHold<P> {
    paths: BTreeMap<P, PathState>,
}

impl<P: Ord + Copy> Default for PathHold<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Ord + Copy> PathHold<P> {
    /// No path known.
    pub fn new() -> Self {
        PathHold {
            paths: BTreeMap::new(),
        }
    }

    /// A subflow of `path` was declared dead at `now` (and taken out).
    pub fn on_dead(&mut self, now: Instant, path: P) {
        let st = self.paths.entry(path).or_default();
        while st.deaths.len() >= MAX_DEATHS {
            st.deaths.pop_front();
        }
        st.deaths.push_back(now);
        let hold = self.hold(now, path);
        if let Some(st) = self.paths.get_mut(&path) {
            st.pending = Some((now, hold));
        }
    }

    /// A subflow of `path` was seen established at `now` (a probe, or any subflow: the first
    /// sighting after a death decides). If that was within the hold-down plus
    /// [`FALSE_DEATH_WITHIN`] of the death, the death was false: it no longer lengthens the
    /// hold-down and it adds one doubling of the path's limits ([`PathHold::slack`]). Returns
    /// whether it was judged false.
    pub fn on_established(&mut self, now: Instant, path: P) -> bool {
        let Some(st) = self.paths.get_mut(&path) else {
            return false;
        };
        let Some((died, hold)) = st.pending.take() else {
            return false;
        };
        if now.saturating_duration_since(died) > hold + FALSE_DEATH_WITHIN {
            return false;
        }
        if let Some(i) = st.deaths.iter().rposition(|d| *d == died) {
            st.deaths.remove(i);
        }
        while st.false_deaths.len() >= MAX_DEATHS {
            st.false_deaths.pop_front();
        }
        st.false_deaths.push_back(died);
        true
    }

    /// Doublings of the detector's limits for subflows of `path` at `now`: one per false death
    /// within [`FLAP_WINDOW`], at most [`MAX_SLACK`].
    pub fn slack(&self, now: Instant, path: P) -> u8 {
        self.paths.get(&path).map_or(0, |st| {
            let n = st
                .false_deaths
                .iter()
                .filter(|d| now.saturating_duration_since(**d) < FLAP_WINDOW)
                .count();
            u8::try_from(n).unwrap_or(u8::MAX).min(MAX_SLACK)
        })
    }

    /// The hold-down after the latest death of `path` at `now`: [`HOLD_MIN`] doubled per
    /// further death within [`FLAP_WINDOW`], at most [`HOLD_MAX`]; zero if it never died.
    pub fn hold(&self, now: Instant, path: P) -> Duration {
        let Some(st) = self.paths.get(&path) else {
            return Duration::ZERO;
        };
        let recent = st
            .deaths
            .iter()
            .filter(|d| now.saturating_duration_since(**d) < FLAP_WINDOW)
            .count();
        if recent == 0 {
            return Duration::ZERO;
        }
        let exp = u32::try_from(recent - 1).unwrap_or(u32::MAX).min(16);
        HOLD_MIN.saturating_mul(1u32 << exp).min(HOLD_MAX)
    }

    /// Did `path` die within [`FLAP_WINDOW`] before `now` (so it is probed on this schedule)?
    pub fn recently_dead(&self, now: Instant, path: P) -> bool {
        self.paths
            .get(&path)
            .and_then(|s| s.deaths.back())
            .is_some_and(|d| now.saturating_duration_since(*d) < FLAP_WINDOW)
    }

    /// May a new subflow (a probe) be requested on `path` at `now`?
    pub fn may_probe(&self, now: Instant, path: P) -> bool {
        let Some(last) = self.paths.get(&path).and_then(|s| s.deaths.back()) else {
            return true;
        };
        now.saturating_duration_since(*last) >= self.hold(now, path)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn busy(acked: u64, srtt_ms: u64) -> HealthSample {
        HealthSample {
            established: true,
            unacked: 10,
            bytes_acked: acked,
            backoff: 0,
            srtt: MS * srtt_ms as u32,
            rttvar: MS * (srtt_ms as u32 / 4),
            last_ack_age: None,
            cwnd_limited: false,
            slack: 0,
        }
    }

    /// A bulk subflow as the driver samples it: cwnd-limited, the kernel's last-ACK age known;
    /// ACKs every 5 ms until `stop`.
    fn bulk(now: Duration, stop: Duration, srtt_ms: u64) -> HealthSample {
        let last_ack = if now < stop {
            now - Duration::from_nanos(now.as_nanos() as u64 % 5_000_000)
        } else {
            stop
        };
        HealthSample {
            last_ack_age: Some(now - last_ack),
            cwnd_limited: true,
            ..busy(last_ack.as_millis() as u64 * 100, srtt_ms)
        }
    }

    /// Samples every 50 ms from `t0` with `f(i)`; the first verdict that is not Healthy or
    /// Stalled and when it came.
    fn run(
        d: &mut StallDetector<u8>,
        t0: Instant,
        n: u32,
        f: impl Fn(u32) -> HealthSample,
    ) -> Option<(Duration, Verdict)> {
        for i in 0..n {
            let now = t0 + MS * 50 * i;
            let v = d.handle_sample(now, 1, &f(i));
            if !matches!(v, Verdict::Healthy | Verdict::Stalled) {
                return Some((now - t0, v));
            }
        }
        None
    }

    #[test]
    fn a_subflow_that_stops_acking_is_dead_within_200_ms() {
        let mut d = StallDetector::new();
        let t0 = Instant::now();
        // Acks progress for 1 s (every sample), then stop at sample 20 (t = 1 s).
        let got = run(&mut d, t0, 60, |i| busy(u64::from(i.min(20)) * 1000, 20));
        let (at, v) = got.unwrap();
        assert_eq!(v, Verdict::Dead);
        // Progress last seen at 1.0 s; first stalled sample at 1.05 s; dead 150 ms later.
        assert_eq!(at, MS * 1200);
        assert!(at - MS * 1000 <= MS * 200, "detected after {at:?}");
        // Reported once, then StillDead until progress.
        let now = t0 + MS * 1250;
        assert_eq!(
            d.handle_sample(now, 1, &busy(20_000, 20)),
            Verdict::StillDead
        );
        assert_eq!(
            d.handle_sample(now + MS * 50, 1, &busy(21_000, 20)),
            Verdict::Healthy
        );
    }

    #[test]
    fn a_steadily_acking_or_idle_subflow_is_never_dead() {
        let mut d = StallDetector::new();
        let t0 = Instant::now();
        assert_eq!(
            run(&mut d, t0, 200, |i| busy(u64::from(i) * 1500, 20)),
            None
        );
        // Idle: nothing in flight, no acks, forever.
        let mut d = StallDetector::new();
        let idle = HealthSample {
            established: true,
            ..HealthSample::default()
        };
        assert_eq!(run(&mut d, t0, 200, |_| idle), None);
        // Connecting subflows are not judged.
        let mut d = StallDetector::new();
        let syn = HealthSample {
            established: false,
            unacked: 1,
            ..HealthSample::default()
        };
        assert_eq!(run(&mut d, t0, 200, |_| syn), None);
    }

    #[test]
    fn a_long_rtt_path_is_given_two_rtts() {
        // srtt 300 ms (a queue in the WAN): an ack gap of 500 ms is not a death...
        let s = busy(0, 300);
        assert_eq!(stall_limit(&s), MS * 600);
        let mut d = StallDetector::new();
        let t0 = Instant::now();
        // Acks arrive every 500 ms only (samples 0, 10, 20, ...).
        assert_eq!(
            run(&mut d, t0, 100, |i| busy(u64::from(i / 10) * 1000, 300)),
            None
        );
        // ... but 650 ms without one is.
        let mut d = StallDetector::new();
        let got = run(&mut d, t0, 100, |i| busy(u64::from(i.min(4)) * 1000, 300));
        let (at, _) = got.unwrap();
        assert_eq!(at, MS * (250 + 600));
    }

    #[test]
    fn an_rto_without_progress_is_dead_at_once() {
        let mut d = StallDetector::new();
        let t0 = Instant::now();
        let got = run(&mut d, t0, 60, |i| {
            let mut s = busy(u64::from(i.min(4)) * 1000, 300);
            // The RTO fired at sample 8 (no progress since sample 4).
            s.backoff = u8::from(i >= 8);
            s
        });
        assert_eq!(got, Some((MS * 400, Verdict::Dead)));
    }

    /// Samples every `tick` from `t0` (= time 0) to 3 s with `f(time)`, beside a second
    /// subflow that is ACKed throughout if `peer`; when subflow 1 was first declared Dead.
    fn dead_at(
        tick: Duration,
        peer: bool,
        f: impl Fn(Duration) -> HealthSample,
    ) -> Option<Duration> {
        let mut d = StallDetector::new();
        let t0 = Instant::now();
        let mut at = Duration::ZERO;
        while at < MS * 3000 {
            let mut samples = vec![(1u8, f(at))];
            if peer {
                samples.push((2u8, bulk(at, MS * 9999, 50)));
            }
            let v = d.handle_connection(t0 + at, &samples);
            assert_eq!(v.len(), samples.len());
            assert_ne!(v.get(1), Some(&Verdict::Dead), "the healthy peer at {at:?}");
            if v[0] == Verdict::Dead {
                return Some(at);
            }
            at += tick;
        }
        None
    }

    #[test]
    fn a_clocked_subflow_is_dead_two_rtts_after_its_last_ack() {
        // srtt 40 ms, rttvar 10: the limit is 100 ms (the floor), timed from the kernel's last
        // ACK (at 1,000 ms), not from the first sample that saw no progress.
        let s = bulk(MS * 1000, MS * 1000, 40);
        assert!(s.clocked(Instant::now() + MS * 1000, Instant::now()));
        assert_eq!(clocked_stall_limit(&s), MS * 100);
        assert_eq!(stall_limit(&s), MS * 150);
        let at = dead_at(MS * 20, true, |t| bulk(t, MS * 1000, 40)).unwrap();
        assert_eq!(at, MS * 1100, "the first sample >= 1,000 + 100 ms");
        // The same subflow judged from the samples alone (the old detector): the general
        // limit after the first sample without progress (1,020 ms).
        let old = dead_at(MS * 20, true, |t| HealthSample {
            last_ack_age: None,
            cwnd_limited: false,
            ..bulk(t, MS * 1000, 40)
        })
        .unwrap();
        assert_eq!(old, MS * 1180);
        // A long srtt (a queue in the WAN): two of them.
        let s = bulk(MS * 1000, MS * 1000, 100);
        assert_eq!(clocked_stall_limit(&s), MS * 200);
        assert_eq!(
            dead_at(MS * 20, true, |t| bulk(t, MS * 1000, 100)),
            Some(MS * 1200)
        );
        // A short path: never below MIN_STALL_CLOCKED.
        assert_eq!(
            dead_at(MS * 20, true, |t| bulk(t, MS * 1000, 20)),
            Some(MS * 1100)
        );
        // ACKs that keep coming (every 5 ms) never look dead, however long the srtt.
        assert_eq!(dead_at(MS * 20, true, |t| bulk(t, MS * 9999, 20)), None);
    }

    #[test]
    fn a_clocked_subflow_behind_a_shared_queue_survives_an_ack_gap_of_one_and_a_half_rtts() {
        // Measured false deaths (dashboard_e2e, loaded machine): srtt 79-128 ms, rttvar down
        // to 0.5 ms, no ACK for 1.03-1.42 x srtt, then ACKs again. srtt 100, rttvar 1: silent
        // from 1,000 to 1,150 ms, then ACKed every 5 ms again.
        let gap = |t: Duration| {
            let stop = if t >= MS * 1150 { MS * 9999 } else { MS * 1000 };
            HealthSample {
                rttvar: MS,
                ..bulk(t, stop, 100)
            }
        };
        assert_eq!(dead_at(MS * 20, true, gap), None);
        // The old clocked limit (srtt + 2 x rttvar = 102 ms) took it out.
        let old = HealthSample {
            rttvar: MS,
            ..bulk(MS * 1000, MS * 1000, 100)
        };
        assert!(old.srtt + old.rttvar * 2 < MS * 150);
        assert_eq!(clocked_stall_limit(&old), MS * 200);
    }

    #[test]
    fn when_every_subflow_goes_quiet_the_general_limit_applies() {
        // Alone (or with every other subflow as quiet): the general limit, 150 ms at srtt 40,
        // from the last ACK.
        assert_eq!(
            dead_at(MS * 20, false, |t| bulk(t, MS * 1000, 40)),
            Some(MS * 1160)
        );
        let mut d = StallDetector::new();
        let t0 = Instant::now();
        let mut first_dead = None;
        for i in 0..150u32 {
            let at = MS * 20 * i;
            let v = d.handle_connection(
                t0 + at,
                &[(1u8, bulk(at, MS * 1000, 40)), (2, bulk(at, MS * 1000, 40))],
            );
            if first_dead.is_none() && v.contains(&Verdict::Dead) {
                first_dead = Some(at);
            }
        }
        assert_eq!(first_dead, Some(MS * 1160));
    }

    #[test]
    fn an_idle_subflow_that_starts_sending_is_given_the_full_limit() {
        // Last ACK 10 s ago (idle); data goes in flight at 1,000 ms and is never acknowledged.
        // The stall is timed from when it went in flight, with the general limit (not clocked).
        let s = |t: Duration| HealthSample {
            unacked: if t >= MS * 1000 { 3 } else { 0 },
            last_ack_age: Some(MS * 10_000 + t),
            cwnd_limited: true,
            ..busy(0, 100)
        };
        assert_eq!(dead_at(MS * 20, true, s), Some(MS * 1200));
        // Its ACK arriving after one RTT (at 1,100 ms) is no death.
        let acked = |t: Duration| HealthSample {
            unacked: if t >= MS * 1100 { 0 } else { s(t).unacked },
            bytes_acked: u64::from(t >= MS * 1100),
            last_ack_age: Some(if t >= MS * 1100 {
                t - MS * 1100
            } else {
                MS * 10_000 + t
            }),
            ..s(t)
        };
        assert_eq!(dead_at(MS * 20, true, acked), None);
    }

    #[test]
    fn the_accepting_side_destroys_only_backed_off_dead_subflows_and_never_the_last() {
        let live = busy(1000, 40);
        let late = HealthSample { backoff: 1, ..live };
        let zombie = HealthSample { backoff: 4, ..live };
        let closed = HealthSample {
            established: false,
            backoff: 4,
            ..live
        };
        use Verdict::*;
        // A dead verdict on a late ACK alone (backoff 0 or 1): kept.
        assert_eq!(
            accepted_side_doomed(&[live, late], &[Healthy, Dead]),
            [false, false]
        );
        // Backed off twice or more, dead now or before, another subflow established: destroyed.
        assert_eq!(
            accepted_side_doomed(&[live, zombie, zombie], &[Healthy, Dead, StillDead]),
            [false, true, true]
        );
        // Backed off but not (yet) judged dead: kept.
        assert_eq!(
            accepted_side_doomed(&[live, zombie], &[Healthy, Stalled]),
            [false, false]
        );
        // The last established subflow is never destroyed, even when dead.
        assert_eq!(
            accepted_side_doomed(&[zombie, closed], &[Dead, StillDead]),
            [false, false]
        );
        assert_eq!(
            accepted_side_doomed(&[zombie, zombie], &[Dead, Dead]),
            [false, false]
        );
        assert!(accepted_side_doomed(&[], &[]).is_empty());
    }

    #[test]
    fn retain_forgets_closed_subflows() {
        let mut d = StallDetector::new();
        let t0 = Instant::now();
        d.handle_sample(t0, 1u8, &busy(0, 20));
        d.handle_sample(t0, 2u8, &busy(0, 20));
        d.retain(|k| *k == 2);
        assert_eq!(d.len(), 1);
    }

    #[test]
    fn the_hold_down_doubles_with_flapping_and_decays() {
        let mut h = PathHold::new();
        let t0 = Instant::now();
        assert!(h.may_probe(t0, 7u8));
        assert!(!h.recently_dead(t0, 7));
        h.on_dead(t0, 7);
        assert!(h.recently_dead(t0 + MS * 10, 7));
        assert!(!h.may_probe(t0 + MS * 199, 7));
        assert!(h.may_probe(t0 + MS * 200, 7));
        h.on_dead(t0 + MS * 1000, 7);
        assert_eq!(h.hold(t0 + MS * 1000, 7), MS * 400);
        for i in 2..20u32 {
            h.on_dead(t0 + MS * 1000 * i, 7);
        }
        assert_eq!(h.hold(t0 + MS * 19_000, 7), HOLD_MAX);
        // A minute later, only the deaths inside the window count.
        let later = t0 + MS * 19_000 + FLAP_WINDOW;
        assert_eq!(h.hold(later, 7), Duration::ZERO);
        assert!(!h.recently_dead(later, 7));
        assert!(h.may_probe(later, 7));
        // Other paths are not affected.
        assert!(h.may_probe(t0, 8));
    }

    /// A probe that establishes right after the hold-down shows the death was false (a
    /// congested path, not a dead one): the hold-down does not grow, and the path's limits
    /// double per false death within the window (at most [`MAX_SLACK`] times). A probe that
    /// connects only seconds later (a real cut, then the restore) leaves the death counted.
    #[test]
    fn a_quick_re_establishment_marks_the_death_false_and_widens_the_paths_limits() {
        let mut h = PathHold::new();
        let t0 = Instant::now();
        assert!(!h.on_established(t0, 7u8), "no death pending");
        h.on_dead(t0, 7);
        // Its probe (requested after 200 ms) established 250 ms after the death: false.
        assert!(h.on_established(t0 + MS * 250, 7));
        assert!(!h.on_established(t0 + MS * 260, 7), "decided once");
        assert_eq!(h.slack(t0 + MS * 300, 7), 1);
        assert_eq!(h.slack(t0 + MS * 300, 8), 0, "per path");
        // It did not lengthen the hold-down: the next death holds 200 ms again.
        h.on_dead(t0 + MS * 1000, 7);
        assert_eq!(h.hold(t0 + MS * 1000, 7), HOLD_MIN);
        // A real cut: the probe connects only after the restore, 4 s later: counted.
        assert!(!h.on_established(t0 + MS * 5000, 7));
        h.on_dead(t0 + MS * 6000, 7);
        assert_eq!(h.hold(t0 + MS * 6000, 7), HOLD_MIN * 2);
        assert_eq!(h.slack(t0 + MS * 6000, 7), 1);
        // Up to MAX_SLACK doublings; they expire with the window.
        for i in 0..6u32 {
            let died = t0 + MS * (10_000 + 2_000 * i);
            h.on_dead(died, 7);
            let hold = h.hold(died, 7);
            assert!(h.on_established(died + hold + MS * 100, 7));
        }
        assert_eq!(h.slack(t0 + MS * 30_000, 7), MAX_SLACK);
        assert_eq!(h.slack(t0 + MS * 30_000 + FLAP_WINDOW, 7), 0);
    }

    /// With slack, a congested path's ACK gap of 3 × srtt and one RTO are no death; a cut (no
    /// ACK at all) still is, at the widened limit.
    #[test]
    fn slack_widens_the_limits_and_the_rto_rule() {
        let t0 = Instant::now();
        // srtt 40: general limit max(150, 80, 40 + 40) = 150 ms; with one doubling 300 ms.
        let stalled = |slack: u8, backoff: u8| {
            move |i: u32| HealthSample {
                slack,
                backoff: if i >= 6 { backoff } else { 0 },
                ..busy(u64::from(i.min(2)) * 1000, 40)
            }
        };
        // Progress last at sample 2 (100 ms); first stalled sample 150 ms.
        let mut d = StallDetector::new();
        assert_eq!(
            run(&mut d, t0, 60, stalled(0, 0)),
            Some((MS * 300, Verdict::Dead))
        );
        let mut d = StallDetector::new();
        assert_eq!(
            run(&mut d, t0, 60, stalled(1, 0)),
            Some((MS * 450, Verdict::Dead))
        );
        // One RTO (backoff 1 from 300 ms): dead at once without slack, not with it.
        let mut d = StallDetector::new();
        assert_eq!(
            run(&mut d, t0, 60, stalled(0, 1)),
            Some((MS * 300, Verdict::Dead))
        );
        let mut d = StallDetector::new();
        assert_eq!(
            run(&mut d, t0, 60, stalled(1, 1)),
            Some((MS * 450, Verdict::Dead)),
            "judged by the widened limit"
        );
        // Backoff 2 with slack 1: the RTO rule again.
        let mut d = StallDetector::new();
        assert_eq!(
            run(&mut d, t0, 60, stalled(1, 2)),
            Some((MS * 300, Verdict::Dead))
        );
    }
}
