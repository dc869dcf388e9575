//! Automatic egress rate of a shaped WAN port (`[qos] autorate`, docs/mmsg.md "Automatic rate"):
//! the shaper's rate follows what the uplink really carries, so the bottleneck queue stays in the
//! gateway's qdisc (where the strict priority and the sparse lane work) without the operator
//! knowing the uplink's rate, and keeps following it when the rate changes (LTE, a shared cable
//! segment). The idea is cake-autorate's (OpenWrt): lower the rate when the delay rises while the
//! port is loaded, raise it while the shaper itself is what holds the traffic back.
//!
//! **The signals**, one [`PortSample`] every [`TICK`]:
//! - what the port sent (the root qdisc's byte counter): the achieved rate;
//! - what waits in the port's qdisc (its backlog): at the current rate that is the *local* delay;
//! - the *path* queue: the smallest `srtt − min_rtt` over the subflows that leave through this
//!   port and had data in flight during the tick ([`MinBoard`]). The queue of the uplink is shared
//!   by every subflow of the port, a remote downlink's only by those towards that address, so the
//!   minimum is the uplink's part. A subflow's RTT is timed from before the qdisc, so the local
//!   delay is subtracted (the larger of this sample's and the last one's: the smoothed RTT is of
//!   packets that queued up to a sample ago), and so is the time of [`SERIALIZED_PACKETS`] full-size packets at the
//!   port's rate: the minimum RTT comes from small packets, a loaded subflow's from full ones,
//!   serialized on the uplink and again on the remote's downlink, and acknowledged every second
//!   one (measured on the 2x2 testbed at 9 Mbit/s: 3–6 ms of `srtt − min_rtt − local` with no
//!   queue in the WAN). What remains waits in the WAN (the modem's buffer) — **bloat**.
//!
//! **The rule** ([`Autorate::on_sample`]):
//! - bloat of at least [`BLOAT`] in [`BLOAT_TICKS`] samples in a row while the port is *loaded*
//!   (it sends at least [`LOADED_SHARE`] of its rate, or a tunnel connection leaving through it
//!   waited for its paths, [`PortSample::backlogged`]: our traffic builds the queue; a port that
//!   carries only what its flows offer cannot cure a queue others fill, e.g. a download on the
//!   same modem): the rate drops to [`DOWN_FACTOR`] × the achieved rate (what the uplink
//!   carried: the median of what the port sent in the last [`SENT_WINDOW`] samples, so neither a
//!   dip of the traffic in one sample, a flow's loss recovery, cuts the rate below the uplink's
//!   nor a burst the qdisc let through at a high rate keeps it above), then holds for [`SETTLE`]
//!   while that queue drains;
//! - otherwise, while the local delay is at least [`LIMITED`] and did not shrink below
//!   [`DRAINING`] of the last sample's (the shaper is the bottleneck: above the uplink's rate its
//!   queue drains into the modem's) and the WAN queue is below [`BLOAT`] / 2: the rate rises by
//!   [`UP_STEP`] per sample, a step that doubles every [`UP_STREAK`] rises in a row up to
//!   [`UP_STEP_MAX`] (a rate that fell far is found again within seconds), but only up to
//!   [`EDGE_SHARE`] of the last rate that bloated (the edge); it stays there for [`PROBE_AFTER`]
//!   after the drop and then probes beyond by [`UP_STEP`] / 2 per sample (each probe past the
//!   uplink's rate costs a few ms of queue in the WAN, so it is rare), fast again once 5 % beyond
//!   the edge (the uplink got faster); never above the configured maximum (`wan[k].rate_mbit` ×
//!   `shaping_percent`, else [`DEFAULT_MAX_KBIT`]);
//! - otherwise it holds (an idle port keeps what it learnt).
//!
//! A port starts at its maximum: without a `rate_mbit` the first transfer fills the modem's
//! buffer, the rule sees the bloat and the rate drops to what the uplink carried (measured on the
//! 2x2 testbed: docs/results.md "Automatic rate"). Until that first drop a port that sends at
//! least [`DISCOVER_KBIT`] counts as loaded (one TCP flow that the paths take whole never makes
//! a connection wait, and 1 Gbit/s is far from half used).
//!
//! No IO, no clock reads: time is a parameter. The driver (`mmsg`'s `autorate` task) reads the
//! qdisc over rtnetlink, collects the subflows' RTTs from the fast-failover sampler and applies a
//! new rate with `tc class change`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How often the driver samples a port.
pub const TICK: Duration = Duration::from_millis(100);
/// A path queue at least this long beyond the local delay is bloat (the aim of issue #16 allows
/// 10 ms over the path's RTT for both directions).
pub const BLOAT: Duration = Duration::from_millis(5);
/// Bloated samples in a row before the rate drops (one sample can be a burst).
pub const BLOAT_TICKS: u8 = 2;
/// Bloat counts only while the port sends at least this share of its rate.
pub const LOADED_SHARE: f64 = 0.5;
/// On bloat the rate becomes this many times the achieved rate.
pub const DOWN_FACTOR: f64 = 0.95;
/// The achieved rate a drop starts from is the median of this many samples.
pub const SENT_WINDOW: usize = 3;
/// After a drop the rate holds this long (the WAN queue drains; the smoothed RTT follows).
pub const SETTLE: Duration = Duration::from_millis(600);
/// A local delay of at least this means the shaper is what holds the traffic back.
pub const LIMITED: Duration = Duration::from_millis(2);
/// Growth of the rate per sample while the shaper limits (5 % per second at [`TICK`]) ...
pub const UP_STEP: f64 = 0.005;
/// ... doubled after every this many rises in a row ...
pub const UP_STREAK: u32 = 10;
/// ... up to this growth per sample.
pub const UP_STEP_MAX: f64 = 0.04;
/// Full-size packets whose serialization at the port's rate a loaded subflow's RTT carries
/// beyond its minimum (module docs) ...
pub const SERIALIZED_PACKETS: u64 = 3;
/// ... of this many bytes on the wire.
pub const FULL_PACKET_BYTES: u64 = 1_514;
/// The local delay did not drain when it is at least this share of the last sample's.
pub const DRAINING: f64 = 0.8;
/// Until its first drop a port sending at least this much is loaded, kbit/s.
pub const DISCOVER_KBIT: u64 = 1_000;
/// After a drop the rate climbs back fast to this share of the rate that bloated ...
pub const EDGE_SHARE: f64 = 0.96;
/// ... and stays there this long without bloat before it probes beyond, by [`UP_STEP`] / 2.
pub const PROBE_AFTER: Duration = Duration::from_secs(5);
/// The lowest rate, kbit/s.
pub const MIN_KBIT: u64 = 256;
/// The highest rate and the start of a port without `rate_mbit`, kbit/s (1 Gbit/s).
pub const DEFAULT_MAX_KBIT: u64 = 1_000_000;

/// One sample of a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortSample {
    /// When it was taken.
    pub at: Instant,
    /// Bytes the port's qdisc has sent so far (a counter; it may restart from 0).
    pub sent_bytes: u64,
    /// Bytes waiting in the port's qdisc now.
    pub backlog_bytes: u64,
    /// The smallest `srtt − min_rtt` of the port's subflows with data in flight since the last
    /// sample; `None`: no such subflow.
    pub path_queue: Option<Duration>,
    /// A tunnel connection with subflows through this port waited for its paths (its send budget
    /// or socket was full with data queued) for at least half the interval: the port carries what
    /// the paths take, not what the flows offer.
    pub backlogged: bool,
}

/// What one sample decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The rate stays.
    Hold,
    /// The uplink carried less than the rate with a queue in the WAN: lowered to this, kbit/s.
    Down(u64),
    /// The shaper held the traffic back without a queue in the WAN: raised to this, kbit/s.
    Up(u64),
}

/// The rate controller of one port.
#[derive(Debug, Clone)]
pub struct Autorate {
    max_kbit: u64,
    rate_kbit: u64,
    last: Option<(Instant, u64)>,
    bloated: u8,
    hold_until: Option<Instant>,
    up_streak: u32,
    /// The rate of the last drop (it bloated), kbit/s; 0: none yet.
    bloated_at: u64,
    /// The local delay of the last sample.
    last_local: Duration,
    /// When the rate last went down.
    last_down: Option<Instant>,
    /// The achieved rate of the last sample, kbit/s.
    sent_kbit: u64,
    /// The achieved rates of the last [`SENT_WINDOW`] samples, kbit/s (a ring).
    recent_sent: [u64; SENT_WINDOW],
    samples: usize,
    /// The WAN part of the last sample's path queue.
    wan_queue: Option<Duration>,
    downs: u64,
    ups: u64,
}

impl Autorate {
    /// A port whose rate may go up to `max_kbit` (at least [`MIN_KBIT`]); it starts there.
    pub fn new(max_kbit: u64) -> Self {
        let max_kbit = max_kbit.max(MIN_KBIT);
        Self {
            max_kbit,
            rate_kbit: max_kbit,
            last: None,
            bloated: 0,
            hold_until: None,
            up_streak: 0,
            bloated_at: 0,
            last_local: Duration::ZERO,
            last_down: None,
            sent_kbit: 0,
            recent_sent: [0; SENT_WINDOW],
            samples: 0,
            wan_queue: None,
            downs: 0,
            ups: 0,
        }
    }

    /// The rate now, kbit/s.
    pub fn rate_kbit(&self) -> u64 {
        self.rate_kbit
    }

    /// The highest rate, kbit/s.
    pub fn max_kbit(&self) -> u64 {
        self.max_kbit
    }

    /// The achieved rate of the last sample, kbit/s.
    pub fn sent_kbit(&self) -> u64 {
        self.sent_kbit
    }

    /// The queue in the WAN at the last sample (the path queue beyond the local delay).
    pub fn wan_queue(&self) -> Option<Duration> {
        self.wan_queue
    }

    /// How often the rate went down and up.
    pub fn changes(&self) -> (u64, u64) {
        (self.downs, self.ups)
    }

    /// The delay of `backlog` bytes at the current rate.
    fn local_delay(&self, backlog: u64) -> Duration {
        // bytes × 8 / (kbit/s) = ms; in µs: × 1000.
        Duration::from_micros(backlog.saturating_mul(8_000) / self.rate_kbit.max(1))
    }

    /// Takes one sample (module docs); the caller applies the rate of a [`Change::Down`] or
    /// [`Change::Up`].
    pub fn on_sample(&mut self, s: PortSample) -> Change {
        let Some((t0, b0)) = self.last.replace((s.at, s.sent_bytes)) else {
            return Change::Hold;
        };
        let dt = s.at.saturating_duration_since(t0);
        if dt.is_zero() || s.sent_bytes < b0 {
            // The same instant, or the counter restarted (the qdisc was replaced): next time.
            return Change::Hold;
        }
        let dt_us = u64::try_from(dt.as_micros()).unwrap_or(u64::MAX).max(1);
        // bytes × 8 / µs = Mbit/s; × 1000 = kbit/s.
        self.sent_kbit = (s.sent_bytes - b0).saturating_mul(8_000) / dt_us;
        if let Some(slot) = self.recent_sent.get_mut(self.samples % SENT_WINDOW) {
            *slot = self.sent_kbit;
        }
        self.samples = self.samples.wrapping_add(1);
        let local = self.local_delay(s.backlog_bytes);
        let last_local = std::mem::replace(&mut self.last_local, local);
        let serialization = self.local_delay(SERIALIZED_PACKETS * FULL_PACKET_BYTES);
        // The smoothed RTT is of packets queued up to a sample ago: the larger of the two local
        // delays (a local queue that just shrank is not a WAN queue that grew).
        let local_then = local.max(last_local);
        self.wan_queue = s
            .path_queue
            .map(|q| q.saturating_sub(local_then).saturating_sub(serialization));
        if self.hold_until.is_some_and(|h| s.at < h) {
            self.up_streak = 0;
            return Change::Hold;
        }
        let discovering = self.downs == 0 && self.sent_kbit >= DISCOVER_KBIT;
        let loaded = s.backlogged
            || discovering
            || self.sent_kbit as f64 >= LOADED_SHARE * self.rate_kbit as f64;
        if loaded && self.wan_queue.is_some_and(|w| w >= BLOAT) {
            self.bloated = self.bloated.saturating_add(1);
        } else {
            self.bloated = 0;
        }
        if self.bloated >= BLOAT_TICKS {
            self.bloated = 0;
            self.up_streak = 0;
            let mut recent = self.recent_sent;
            recent.sort_unstable();
            let achieved = recent
                .get(SENT_WINDOW / 2)
                .copied()
                .unwrap_or(self.sent_kbit);
            let to = ((achieved as f64 * DOWN_FACTOR) as u64).clamp(MIN_KBIT, self.max_kbit);
            if to < self.rate_kbit {
                self.bloated_at = self.rate_kbit;
                self.rate_kbit = to;
                self.hold_until = Some(s.at + SETTLE);
                self.last_down = Some(s.at);
                self.downs += 1;
                return Change::Down(to);
            }
            return Change::Hold;
        }
        let limited =
            local >= LIMITED && local.as_secs_f64() >= DRAINING * last_local.as_secs_f64();
        let clear = self.wan_queue.is_some_and(|w| w < BLOAT / 2);
        if limited && clear && self.rate_kbit < self.max_kbit {
            let r = self.rate_kbit as f64;
            let edge = self.bloated_at as f64;
            let below_edge = (EDGE_SHARE * edge) as u64;
            let (step, cap) = if self.bloated_at == 0 || r > 1.05 * edge {
                // No edge known, or the uplink got faster than it: find it fast.
                let doublings = (self.up_streak / UP_STREAK).min(8);
                (
                    (UP_STEP * f64::from(1u32 << doublings)).min(UP_STEP_MAX),
                    self.max_kbit,
                )
            } else if self.rate_kbit < below_edge {
                // Back towards the last rate that bloated, fast, but not beyond EDGE_SHARE of it.
                let doublings = (self.up_streak / UP_STREAK).min(8);
                (
                    (UP_STEP * f64::from(1u32 << doublings)).min(UP_STEP_MAX),
                    below_edge,
                )
            } else if self.last_down.is_some_and(|d| s.at < d + PROBE_AFTER) {
                // Just below the edge: stay a while.
                self.up_streak = 0;
                return Change::Hold;
            } else {
                // Below the edge long enough without bloat: probe beyond it, slowly.
                (UP_STEP / 2.0, self.max_kbit)
            };
            let up = ((self.rate_kbit as f64 * (1.0 + step)) as u64).max(self.rate_kbit + 1);
            self.rate_kbit = up.min(cap.max(self.rate_kbit + 1)).min(self.max_kbit);
            self.ups += 1;
            self.up_streak += 1;
            return Change::Up(self.rate_kbit);
        }
        self.up_streak = 0;
        Change::Hold
    }
}

/// The smallest value noted per key since it was last taken: the driver's subflow samplers note
/// each loaded subflow's `srtt − min_rtt` under its local address, the rate task takes the
/// minimum per port once a [`TICK`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MinBoard<K: Ord> {
    min: BTreeMap<K, Duration>,
}

impl<K: Ord> Default for MinBoard<K> {
    fn default() -> Self {
        Self {
            min: BTreeMap::new(),
        }
    }
}

impl<K: Ord> MinBoard<K> {
    /// Notes `v` under `k`.
    pub fn note(&mut self, k: K, v: Duration) {
        self.min
            .entry(k)
            .and_modify(|m| *m = (*m).min(v))
            .or_insert(v);
    }

    /// The smallest value noted under `k` since the last take, and forgets it.
    pub fn take(&mut self, k: &K) -> Option<Duration> {
        self.min.remove(k)
    }

    /// Forgets keys that no port asks for (bounded by the subflows' local addresses).
    pub fn clear(&mut self) {
        self.min.clear();
    }
}

/// The queue a subflow sample shows, `srtt − min_rtt`; `None` unless it is established, has data
/// in flight (its smoothed RTT is fresh) and both RTTs are known.
/// At least two segments: a lone segment's ACK may be delayed by the receiver (up to 40 ms),
/// which would read as a queue.
pub fn subflow_queue(
    established: bool,
    unacked: u32,
    srtt_us: u32,
    min_rtt_us: u32,
) -> Option<Duration> {
    (established && unacked >= 2 && srtt_us > 0 && min_rtt_us > 0)
        .then(|| Duration::from_micros(u64::from(srtt_us.saturating_sub(min_rtt_us))))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A port fed one sample per [`TICK`].
    struct Port {
        a: Autorate,
        t: Instant,
        sent: u64,
        backlogged: bool,
    }

    impl Port {
        fn new(max_kbit: u64) -> Self {
            let mut p = Port {
                a: Autorate::new(max_kbit),
                t: Instant::now(),
                sent: 0,
                backlogged: false,
            };
            assert_eq!(
                p.feed(0, 0, None),
                Change::Hold,
                "the first sample only sets the start"
            );
            p
        }

        fn feed(&mut self, sent_kbit: u64, backlog: u64, path: Option<Duration>) -> Change {
            self.t += TICK;
            self.sent += sent_kbit * 1000 / 8 / 10;
            self.a.on_sample(PortSample {
                at: self.t,
                sent_bytes: self.sent,
                backlog_bytes: backlog,
                path_queue: path,
                backlogged: self.backlogged,
            })
        }
    }

    #[test]
    fn bloat_while_loaded_drops_the_rate_to_what_the_uplink_carried() {
        // No rate configured: 1 Gbit/s; the uplink carries 10 Mbit/s and the modem queues 20 ms.
        // The first transfer finds it (far below half of 1 Gbit/s, but the first).
        let mut p = Port::new(DEFAULT_MAX_KBIT);
        assert_eq!(
            p.feed(10_000, 0, Some(20 * MS)),
            Change::Hold,
            "one bloated sample"
        );
        assert_eq!(p.feed(10_000, 0, Some(20 * MS)), Change::Down(9_500));
        assert_eq!(p.a.rate_kbit(), 9_500);
        // It holds while the queue drains, even if the RTT still shows it.
        for _ in 0..5 {
            assert_eq!(p.feed(9_500, 0, Some(20 * MS)), Change::Hold);
        }
        // Later, 2 Mbit/s of flows that get what they offer (no connection waits) while the
        // modem queues 20 ms: a download's queue, not ours to cure ...
        for _ in 0..10 {
            assert_eq!(p.feed(2_000, 0, Some(20 * MS)), Change::Hold);
        }
        // ... but a tunnel connection that waits for its paths is what fills it: the uplink
        // carries 2 Mbit/s now.
        p.backlogged = true;
        assert_eq!(p.feed(2_000, 0, Some(20 * MS)), Change::Hold);
        assert_eq!(p.feed(2_000, 0, Some(20 * MS)), Change::Down(1_900));
        assert_eq!(p.a.changes(), (2, 0));
    }

    #[test]
    fn a_local_queue_that_just_shrank_is_not_bloat() {
        let mut p = Port::new(10_000);
        p.backlogged = true;
        p.a.downs = 1;
        for _ in 0..10 {
            // 20 ms queued here, then 2 ms: the RTT still shows the 20 ms for a while.
            assert_eq!(p.feed(9_000, 25_000, Some(24 * MS)), Change::Hold);
            let c = p.feed(9_000, 2_500, Some(24 * MS));
            assert!(!matches!(c, Change::Down(_)), "{c:?}");
            assert!(p.a.wan_queue().unwrap() < BLOAT, "{:?}", p.a.wan_queue());
        }
    }

    #[test]
    fn a_dip_of_the_traffic_does_not_cut_the_rate_below_the_uplink() {
        let mut p = Port::new(12_000);
        p.backlogged = true;
        p.a.downs = 1;
        p.feed(10_000, 0, Some(2 * MS));
        p.feed(10_000, 0, Some(20 * MS));
        // The bloated sample that drops the rate saw a flow's recovery: 6 Mbit/s sent.
        assert_eq!(p.feed(6_000, 0, Some(20 * MS)), Change::Down(9_500));
        // Nor does a burst the qdisc let through (the first transfer at 1 Gbit/s).
        let mut p = Port::new(DEFAULT_MAX_KBIT);
        p.feed(9_000, 0, Some(2 * MS));
        p.feed(14_000, 0, Some(20 * MS));
        assert_eq!(p.feed(10_000, 0, Some(20 * MS)), Change::Down(9_500));
    }

    #[test]
    fn a_port_loaded_by_its_rate_drops_without_waiting_connections() {
        let mut p = Port::new(12_000);
        p.a.downs = 1; // past discovery
        assert_eq!(p.feed(10_000, 0, Some(20 * MS)), Change::Hold);
        assert_eq!(p.feed(10_000, 0, Some(20 * MS)), Change::Down(9_500));
    }

    #[test]
    fn the_local_queue_is_not_bloat() {
        // 8 Mbit/s shaped, 20 ms of it queued in our qdisc (20,000 B): the path queue the subflows
        // show is that local queue, not the WAN's.
        let mut p = Port::new(8_000);
        for _ in 0..10 {
            let c = p.feed(8_000, 20_000, Some(21 * MS));
            assert_ne!(
                c,
                Change::Down(7_600),
                "our own queue must never lower the rate"
            );
            assert!(!matches!(c, Change::Down(_)));
        }
    }

    #[test]
    fn a_limiting_shaper_without_bloat_rises_to_its_maximum_and_stops_there() {
        let mut p = Port::new(10_000);
        p.a.rate_kbit = 9_000;
        let mut ups = 0;
        for _ in 0..100 {
            let r = p.a.rate_kbit();
            // 5 ms queued locally, 0.5 ms in the WAN.
            match p.feed(r, r * 5 / 8, Some(Duration::from_micros(5_500))) {
                Change::Up(to) => {
                    assert!(to > r && to <= (r as f64 * (1.0 + 2.0 * UP_STEP)) as u64 + 1);
                    ups += 1;
                }
                c => assert_eq!(c, Change::Hold),
            }
        }
        assert_eq!(p.a.rate_kbit(), 10_000, "capped at the maximum");
        // 10 rises of 0.5 %, then 1 %: 9 → 10 Mbit/s in 10 + 6.
        assert!((15..=17).contains(&ups), "9 → 10 Mbit/s: {ups}");
    }

    #[test]
    fn no_rise_without_a_local_queue_or_with_a_wan_queue_or_unknown_path() {
        let mut p = Port::new(10_000);
        p.a.rate_kbit = 5_000;
        // Not limited: nothing queued here.
        assert_eq!(p.feed(5_000, 0, Some(MS / 2)), Change::Hold);
        // Limited (8 ms here), but beyond that and 3 full packets at 5 Mbit/s (7.3 ms) the WAN
        // has 3 ms (above BLOAT / 2): do not push more ...
        assert_eq!(p.feed(5_000, 5_000, Some(18_300 * MS / 1000)), Change::Hold);
        // ... with 2 ms it may.
        assert_eq!(
            p.feed(5_000, 5_000, Some(17_300 * MS / 1000)),
            Change::Up(5_024)
        );
        p.a.rate_kbit = 5_000;
        // Limited, but no subflow was in flight: cannot tell.
        assert_eq!(p.feed(5_000, 5_000, None), Change::Hold);
    }

    #[test]
    fn a_quiet_port_keeps_its_rate_whatever_others_queue() {
        let mut p = Port::new(10_000);
        // Below the discovery rate, even before the first drop.
        for _ in 0..10 {
            assert_eq!(p.feed(500, 0, Some(30 * MS)), Change::Hold);
        }
        p.a.downs = 1;
        for _ in 0..50 {
            // 1 Mbit/s of ours while a cross flow keeps 30 ms in the modem.
            assert_eq!(p.feed(1_000, 0, Some(30 * MS)), Change::Hold);
        }
        assert_eq!(p.a.rate_kbit(), 10_000);
    }

    #[test]
    fn an_uplink_that_slows_down_is_followed_and_a_faster_one_found_again() {
        // The uplink carries `cap`; a crude port: what exceeds the capacity builds a WAN queue,
        // what the shaper holds back waits locally; a bulk transfer keeps its connection waiting.
        let mut p = Port::new(20_000);
        p.backlogged = true;
        let mut wan_ms: f64 = 0.0;
        let mut run = |p: &mut Port, cap: u64, secs: u64| {
            for _ in 0..secs * 10 {
                let r = p.a.rate_kbit();
                let sent = r.min(cap);
                wan_ms = (wan_ms + (r as f64 - cap as f64) / cap as f64 * 100.0).clamp(0.0, 40.0);
                let backlog = if r < cap { r * 10 / 8 } else { 0 }; // 10 ms locally
                let local_ms = if r < cap { 10.0 } else { 0.0 };
                p.feed(
                    sent,
                    backlog,
                    Some(Duration::from_secs_f64((wan_ms + local_ms) / 1000.0)),
                );
            }
        };
        run(&mut p, 10_000, 10);
        let r = p.a.rate_kbit();
        assert!(
            (9_000..=10_300).contains(&r),
            "follows a 10 Mbit/s uplink: {r}"
        );
        run(&mut p, 5_000, 10);
        let r = p.a.rate_kbit();
        assert!((4_500..=5_200).contains(&r), "follows it down to 5: {r}");
        run(&mut p, 15_000, 7);
        let r = p.a.rate_kbit();
        assert!(
            (13_500..=15_800).contains(&r),
            "and up to 15 again within 7 s: {r}"
        );
        run(&mut p, 15_000, 10);
        let r = p.a.rate_kbit();
        assert!((13_500..=15_800).contains(&r), "and stays near it: {r}");
    }

    #[test]
    fn after_a_drop_the_rate_waits_below_the_edge_before_probing_beyond() {
        let mut p = Port::new(20_000);
        p.backlogged = true;
        // The uplink bloats at 10,000: down to 9,500.
        p.a.rate_kbit = 10_000;
        p.feed(10_000, 0, Some(20 * MS));
        assert_eq!(p.feed(10_000, 0, Some(20 * MS)), Change::Down(9_500));
        // Limited and clear: back up to 96 % of 10,000 at most, then it holds ...
        let mut top = 0;
        let mut t = Duration::ZERO;
        while t < PROBE_AFTER - 2 * TICK {
            let r = p.a.rate_kbit();
            p.feed(
                r,
                r * 5 / 8,
                Some(5 * MS + p.a.local_delay(3 * FULL_PACKET_BYTES)),
            );
            top = top.max(p.a.rate_kbit());
            t += TICK;
        }
        assert_eq!(top, 9_600, "climbs to the edge's 96 % and stays");
        // ... until PROBE_AFTER has passed; then it probes beyond, by a quarter per cent.
        let mut probes = 0;
        for _ in 0..10 {
            let r = p.a.rate_kbit();
            if let Change::Up(to) = p.feed(
                r,
                r * 5 / 8,
                Some(5 * MS + p.a.local_delay(3 * FULL_PACKET_BYTES)),
            ) {
                assert!(to as f64 <= r as f64 * 1.0026 + 1.0, "{r} -> {to}");
                probes += 1;
            }
        }
        assert!(probes >= 5, "probes beyond the edge: {probes}");
    }

    #[test]
    fn the_rate_never_leaves_its_bounds_and_odd_samples_are_ignored() {
        let p = Port::new(100);
        assert_eq!(
            p.a.rate_kbit(),
            MIN_KBIT,
            "the maximum is at least the minimum"
        );
        let mut p = Port::new(1_000);
        for _ in 0..20 {
            p.feed(1_000, 0, Some(50 * MS));
            p.t += SETTLE;
        }
        assert!(p.a.rate_kbit() >= MIN_KBIT);
        // A counter that went backwards (the qdisc was replaced) is a new start, not a rate.
        p.sent = 0;
        assert_eq!(p.feed(0, 0, Some(50 * MS)), Change::Hold);
    }

    #[test]
    fn the_board_keeps_the_minimum_until_taken() {
        let mut b = MinBoard::default();
        b.note(1u8, 5 * MS);
        b.note(1, 2 * MS);
        b.note(1, 9 * MS);
        b.note(2, 7 * MS);
        assert_eq!(b.take(&1), Some(2 * MS));
        assert_eq!(b.take(&1), None);
        assert_eq!(b.take(&2), Some(7 * MS));
        b.note(3, MS);
        b.clear();
        assert_eq!(b.take(&3), None);
    }

    #[test]
    fn only_a_fresh_rtt_counts() {
        assert_eq!(subflow_queue(true, 3, 25_000, 20_000), Some(5 * MS));
        assert_eq!(
            subflow_queue(true, 0, 25_000, 20_000),
            None,
            "nothing in flight"
        );
        assert_eq!(
            subflow_queue(true, 1, 25_000, 20_000),
            None,
            "a lone segment"
        );
        assert_eq!(subflow_queue(false, 3, 25_000, 20_000), None);
        assert_eq!(subflow_queue(true, 3, 0, 20_000), None);
        assert_eq!(subflow_queue(true, 3, 19_000, 20_000), Some(Duration::ZERO));
    }
}
