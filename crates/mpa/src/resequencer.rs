//! The receiver's resequencing buffer (seed 001 §III-D, Algorithm 1), one per striped flow.
//!
//! A flow striped over several connections (path groups with different delays) arrives out of
//! order. Each of its frames carries a per-flow sequence number (`FLAG_SEQ`, `docs/wire.md`); the
//! receiving gateway holds frames that arrive ahead of the next expected one and releases them in
//! order, so the receiving host sees (almost) no reordering. Algorithm 1, with sequence numbers that
//! count frames (`pkt.size` = 1):
//! - a flow's first frame sets `expected` (the paper's SYN case): senders number from 0, so a first
//!   frame numbered below `S` means earlier ones are still on their way and `expected = 0`; a
//!   higher first number (a flow this receiver forgot) is forwarded and `expected = seq + 1`;
//! - `seq < expected` (duplicate or late): forwarded at once, never held;
//! - `seq == expected`: forwarded, then every buffered frame that is now in order;
//! - `seq > expected`: stored in the flow's buffer `B`. When `B` holds more than the release
//!   threshold `T` frames, all of `B` is released in order ignoring the gap, and `expected` becomes
//!   `last + LRF` (loss-recovery factor): frames of the same loss burst that trickle in later pass at
//!   once instead of opening new gaps.
//! - The buffer size `S` and the byte bounds ([`MAX_FLOW_BYTES`], [`MAX_TOTAL_BYTES`]) are Alg. 1's
//!   last branch: when full, the frame with the lowest sequence number (the stored one or the new
//!   one) is forwarded early. Nothing is ever dropped: every frame handed in comes out exactly once.
//!
//! The paper's `T` is a count; a count alone stalls a flow whose gap is followed by fewer than `T`
//! frames (the tail of a burst, a paused sender). So `T` has a time side too: no frame waits longer
//! than [`Threshold::hold`] behind a gap; then the buffer is released as for the count. Both are
//! sized from the MDI and the paths' bandwidths by [`Threshold::from_paths`] (derivation there).
//! With [`Params::adapt_hold`] the hold in force ([`Resequencer::threshold`]) is lengthened to what
//! frames were measured to wait behind gaps (module `skew`: gaps that filled, frames that came after
//! their gap was released), because queues on the paths add delay the paths' RTTs do not show;
//! the count grows in proportion.
//!
//! Losses are known early when frames say on which **lane** (connection) they came
//! ([`Resequencer::handle_frame_on`]): each lane is FIFO (one TCP/MPTCP byte stream, frames of a flow
//! queued in order), so once every lane the flow used lately has delivered a frame numbered above a
//! gap, the gap cannot fill any more (the frame was dropped by the sender's queue): the buffer is
//! released through that number at once instead of after the hold time. This needs two or more
//! lanes seen within the hold time, and a flow older than the hold time (so a lane that has not
//! delivered its first frame yet is not overlooked); otherwise only `T` applies.
//!
//! Sequence numbers are u32 and wrap (serial-number arithmetic, RFC 1982): `seq` is ahead of
//! `expected` when `seq − expected` (mod 2³²) is below 2³¹. A frame more than [`RESYNC_DISTANCE`]
//! away from `expected` either way is a restarted sequence (the sender forgot the flow): the buffer is
//! released and the flow restarts at that frame.
//!
//! Call order (sans-IO, virtual time): [`Resequencer::handle_frame`] per sequenced frame, then
//! [`Resequencer::poll_deliver`] until `None`; at [`Resequencer::poll_timeout`] call
//! [`Resequencer::handle_timeout`] (hold expiry and the idle-flow sweep) and drain again.
//! Counters: [`Resequencer::stats`].

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

mod skew;
mod threshold;
pub use skew::{SkewMax, MAX_SKEW_SAMPLE, SKEW_WINDOW};
pub use threshold::{
    Threshold, DEFAULT_BUFFER_FRAMES, DEFAULT_HOLD, HOLD_MARGIN, MAX_BUFFER_FRAMES, MAX_HOLD,
    MIN_HOLD, MIN_THRESHOLD_FRAMES,
};

/// The paper's loss-recovery factor ("a value of 20 allowed the buffer to recover from bursty
/// losses while limiting the amount of out-of-order packets", 001 §III-D).
pub const DEFAULT_LRF: u32 = 20;
/// Bytes one flow may hold. 16 MiB = 128 ms of a 1 Gbit/s flow: more imbalance than that makes
/// striping useless anyway (001 Fig. 3: beyond MDI 0.4 aggregation falls below one path).
pub const MAX_FLOW_BYTES: usize = 16 << 20;
/// Bytes all flows together may hold: 64 MiB, four flows at their maximum. With GSO super-packets
/// (64 KiB each) this bound, not `S`, is what limits memory: worst case 64 MiB of packets plus
/// [`MAX_FLOWS`] × [`MAX_BUFFER_FRAMES`] × 64 B bookkeeping only if every flow holds tiny frames.
pub const MAX_TOTAL_BYTES: usize = 64 << 20;
/// Most flows resequenced at once. Only elephant flows are striped (a few per branch pair), so 1,024
/// is generous; the per-flow state without buffered frames is ~200 B (≈ 200 KiB in all). When full,
/// the least recently seen flow is released and forgotten.
pub const MAX_FLOWS: usize = 1_024;
/// A frame this far (in sequence numbers) from `expected` restarts the flow's sequence. Far beyond
/// any real reordering (which is bounded by `S` ≤ 4,096 plus the LRF) and far below 2³¹.
pub const RESYNC_DISTANCE: u32 = 1 << 16;
/// A flow with no frame for this long is forgotten (its buffer, necessarily released by then through
/// the hold time, is empty). Matches the sender's flow idle timeout order of magnitude.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// How often idle flows are swept (one scan of ≤ [`MAX_FLOWS`] entries).
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(1);
/// Longest hold when it follows the measured skew ([`Params::adapt_hold`]). Unlike the hold
/// guessed from the paths this one is what frames really waited, so it may be longer than an RTO:
/// the inner TCP's RTO is timed from the first unacknowledged segment, i.e. the frame on the slow
/// path that the held ones wait for, and holding frames sent after it does not delay it. Bounded
/// anyway, since a longer wait only happens for frames that are really lost.
pub const MAX_MEASURED_HOLD: Duration = Duration::from_secs(1);
/// The measured hold is the measured skew times 5/4 plus [`MIN_HOLD`] (room for the skew to grow a
/// little before the next sample).
pub const SKEW_MARGIN: (u32, u32) = (5, 4);
/// Most lanes (connections) remembered per flow: 16 path groups × 2 classes, twice over for
/// reconnections. When full, the least recently seen lane is forgotten.
pub const MAX_LANES: usize = 64;

/// The resequencer's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// `S`: most frames buffered per flow (clamped to 2..=[`MAX_BUFFER_FRAMES`]).
    pub buffer_frames: usize,
    /// `T`.
    pub threshold: Threshold,
    /// Loss-recovery factor (≥ 1).
    pub lrf: u32,
    /// Flows idle this long are forgotten.
    pub idle_timeout: Duration,
    /// Lengthen the hold (and the count `T` with it) to what frames were measured to wait
    /// behind gaps ([`SkewMax`], module `skew`), up to [`MAX_MEASURED_HOLD`]; never shorter than
    /// `threshold`.
    pub adapt_hold: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            buffer_frames: DEFAULT_BUFFER_FRAMES,
            threshold: Threshold::default(),
            lrf: DEFAULT_LRF,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            adapt_hold: false,
        }
    }
}

/// Counters, all monotonic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Frames handed in.
    pub frames_in: u64,
    /// Frames forwarded at once because they were the next expected (or a flow's first).
    pub in_order: u64,
    /// Frames that entered a buffer (ahead of a gap).
    pub buffered: u64,
    /// Buffered frames released in order once the gap before them filled.
    pub released_in_order: u64,
    /// Buffered frames released ignoring a gap because the count threshold `T` was exceeded.
    pub released_threshold: u64,
    /// Buffered frames released ignoring a gap because the oldest waited [`Threshold::hold`].
    pub released_timeout: u64,
    /// Buffered frames released at once because every recent lane had passed the gap (a frame the
    /// sender dropped).
    pub released_lost: u64,
    /// Duplicates and late frames (`seq < expected`), forwarded at once.
    pub dup_late: u64,
    /// Frames forwarded early, ahead of a gap, because a bound (`S`, [`MAX_FLOW_BYTES`],
    /// [`MAX_TOTAL_BYTES`]) was reached (Alg. 1's last branch). Never dropped: every frame handed in
    /// is counted by exactly one of `in_order`, `dup_late`, `released_*` (in order, threshold,
    /// timeout, lost, flush), `overflow`, or is still buffered.
    pub overflow: u64,
    /// Buffered frames released because their flow was evicted ([`MAX_FLOWS`]) or restarted.
    pub released_flush: u64,
    /// Sequence restarts ([`RESYNC_DISTANCE`]).
    pub resyncs: u64,
    /// Flows forgotten after the idle timeout.
    pub flows_expired: u64,
    /// Flows evicted to make room ([`MAX_FLOWS`]).
    pub flows_evicted: u64,
    /// Gaps that filled while frames waited behind them (a skew sample each).
    pub gaps_filled: u64,
    /// Frames of a gap released early (hold time or count) that arrived afterwards (a skew sample
    /// each; also counted in `dup_late`).
    pub late_after_release: u64,
}

/// One frame leaving the resequencer, to be written to TUN in this order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery<K, P> {
    /// The flow.
    pub key: K,
    /// The sequence number it carried.
    pub seq: u32,
    /// The caller's packet.
    pub packet: P,
}

#[derive(Debug, Clone)]
struct Held<P> {
    seq: u32,
    packet: P,
    len: usize,
}

#[derive(Debug, Clone)]
struct Flow<P> {
    /// Next expected sequence number, extended to 64 bits (never wraps).
    expected: u64,
    /// Frames ahead of `expected`, by extended sequence number.
    buf: BTreeMap<u64, Held<P>>,
    bytes: usize,
    /// Arrival order of buffered frames (extended seq); entries whose frame left are skipped lazily.
    arrivals: VecDeque<(Instant, u64)>,
    /// The hold deadline registered in `deadlines`, if any.
    deadline: Option<Instant>,
    last_seen: Instant,
    /// When the flow was first seen.
    started: Instant,
    /// The last release of a gap by the hold time or the count: the arrival of the oldest frame
    /// that was held, and the highest number released (for skew samples of late frames).
    released: Option<(Instant, u64)>,
    /// The lanes (connections) it arrived on: (lane, highest extended seq, last seen).
    lanes: Vec<(u64, u64, Instant)>,
}

/// Resequencing buffers of all striped flows, keyed by `K` (the driver: source branch and 5-tuple),
/// holding the caller's packets `P`.
#[derive(Debug, Clone)]
pub struct Resequencer<K, P> {
    params: Params,
    flows: BTreeMap<K, Flow<P>>,
    deadlines: BTreeSet<(Instant, K)>,
    total_bytes: usize,
    out: VecDeque<Delivery<K, P>>,
    next_sweep: Option<Instant>,
    stats: Stats,
    /// The measured skew ([`Params::adapt_hold`]).
    skew: SkewMax,
    /// `T` in force: `params.threshold`, lengthened by the measured skew.
    eff: Threshold,
    /// The latest time seen (to re-derive `eff` when `T` is set from outside).
    last_now: Option<Instant>,
}

/// Why a buffer is released ignoring its gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gap {
    Threshold,
    Timeout,
    Flush,
    Overflow,
    Lost,
}

impl<K: Ord + Clone, P> Resequencer<K, P> {
    /// A resequencer with `params` (`S` clamped to 2..=[`MAX_BUFFER_FRAMES`], `T` below `S`,
    /// LRF ≥ 1).
    pub fn new(mut params: Params) -> Self {
        params.buffer_frames = params.buffer_frames.clamp(2, MAX_BUFFER_FRAMES);
        params.threshold.frames = params.threshold.frames.clamp(1, params.buffer_frames - 1);
        params.lrf = params.lrf.max(1);
        Resequencer {
            params,
            flows: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            total_bytes: 0,
            out: VecDeque::new(),
            next_sweep: None,
            stats: Stats::default(),
            skew: SkewMax::new(),
            eff: params.threshold,
            last_now: None,
        }
    }

    /// `T` in force at the last event: the configured (or path-sized) `T`, with
    /// [`Params::adapt_hold`] lengthened to the measured skew × 5/4 + [`MIN_HOLD`] (at most
    /// [`MAX_MEASURED_HOLD`]) and the count scaled by the same factor (below `S`).
    pub fn threshold(&self) -> Threshold {
        self.eff
    }

    /// The largest reordering delay measured over the last 5–10 s (`None`: none measured).
    pub fn measured_skew(&self) -> Option<Duration> {
        self.last_now.and_then(|now| self.skew.get(now))
    }

    /// Re-derives `eff` at `now`.
    fn update_eff(&mut self, now: Instant) {
        self.last_now = Some(self.last_now.map_or(now, |t| t.max(now)));
        let base = self.params.threshold;
        self.eff = base;
        if !self.params.adapt_hold {
            return;
        }
        let Some(skew) = self.skew.get(now) else {
            return;
        };
        let (num, den) = SKEW_MARGIN;
        let hold = (skew * num / den + MIN_HOLD).min(MAX_MEASURED_HOLD);
        if hold <= base.hold {
            return;
        }
        let scaled = base.frames as u128 * hold.as_micros() / base.hold.as_micros().max(1);
        let frames = usize::try_from(scaled)
            .unwrap_or(usize::MAX)
            .clamp(base.frames, self.params.buffer_frames - 1);
        self.eff = Threshold { frames, hold };
    }

    /// One skew sample (a gap's wait, a late frame's lateness).
    fn skew_sample(&mut self, now: Instant, d: Duration) {
        self.skew.sample(now, d);
        self.update_eff(now);
    }

    /// The parameters in force.
    pub fn params(&self) -> Params {
        self.params
    }

    /// Replaces `T` (e.g. new path measurements); applies to the next decision.
    pub fn set_threshold(&mut self, threshold: Threshold) {
        self.params.threshold = Threshold {
            frames: threshold.frames.clamp(1, self.params.buffer_frames - 1),
            hold: threshold.hold,
        };
        match self.last_now {
            Some(now) => self.update_eff(now),
            None => self.eff = self.params.threshold,
        }
    }

    /// The counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Flows tracked.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// Frames currently held, over all flows.
    pub fn buffered_frames(&self) -> usize {
        self.flows.values().map(|f| f.buf.len()).sum()
    }

    /// Bytes currently held, over all flows (as passed to [`Resequencer::handle_frame`]).
    pub fn buffered_bytes(&self) -> usize {
        self.total_bytes
    }

    /// One sequenced frame of flow `key` with sequence number `seq`; `len` is its size in bytes (for
    /// the memory bounds). Afterwards drain [`Resequencer::poll_deliver`]. Without lanes: only `T`
    /// releases a gap.
    pub fn handle_frame(&mut self, now: Instant, key: K, seq: u32, packet: P, len: usize) {
        self.handle_frame_on(now, key, 0, seq, packet, len);
    }

    /// The same for a frame that came on `lane` (the connection: FIFO for one flow's frames), which
    /// lets a gap every recent lane has passed be released at once (module docs). Returns whether
    /// this frame started the flow's state (its first frame, or the first after it was forgotten).
    pub fn handle_frame_on(
        &mut self,
        now: Instant,
        key: K,
        lane: u64,
        seq: u32,
        packet: P,
        len: usize,
    ) -> bool {
        self.update_eff(now);
        let started = self.handle(now, &key, lane, seq, packet, len);
        self.infer_losses(now, &key);
        started
    }

    fn handle(
        &mut self,
        now: Instant,
        key: &K,
        lane: u64,
        seq: u32,
        packet: P,
        len: usize,
    ) -> bool {
        let key = key.clone();
        self.stats.frames_in += 1;
        let started = !self.flows.contains_key(&key);
        if started {
            if self.flows.len() >= MAX_FLOWS {
                self.expire(now);
            }
            if self.flows.len() >= MAX_FLOWS {
                self.evict_lru();
            }
            // Senders number a striped flow from 0. A first frame within the first `S` numbers is
            // one that overtook the flow's start (the first frames on a faster group): wait for 0.
            // Anything later is a flow we forgot (idle expiry) or never saw begin: start there.
            let from_start = (seq as usize) < self.params.buffer_frames;
            let expected = if from_start { 0 } else { u64::from(seq) };
            self.flows.insert(
                key.clone(),
                Flow {
                    expected,
                    buf: BTreeMap::new(),
                    bytes: 0,
                    arrivals: VecDeque::new(),
                    deadline: None,
                    last_seen: now,
                    started: now,
                    released: None,
                    lanes: Vec::new(),
                },
            );
            self.next_sweep.get_or_insert(now + SWEEP_INTERVAL);
        }
        let Some(flow) = self.flows.get_mut(&key) else {
            return started;
        };
        flow.last_seen = now;
        // Serial-number distance from `expected` (RFC 1982).
        let diff = seq.wrapping_sub(flow.expected as u32);
        let ahead = diff < (1 << 31);
        let distance = if ahead { diff } else { diff.wrapping_neg() };
        if distance > RESYNC_DISTANCE {
            self.stats.resyncs += 1;
            self.release_all(&key, Gap::Flush, 1);
            if let Some(flow) = self.flows.get_mut(&key) {
                flow.expected = u64::from(seq) + 1;
                // The lanes' numbers belong to the old sequence.
                flow.lanes.clear();
                flow.released = None;
                flow.started = now;
            }
            self.stats.in_order += 1;
            self.out.push_back(Delivery { key, seq, packet });
            return started;
        }
        if !ahead {
            note_lane(&mut flow.lanes, lane, 0, now);
            self.stats.dup_late += 1;
            // A frame of a gap released early: it was this late behind the frames held then.
            let ext = flow.expected.saturating_sub(u64::from(distance));
            let late = flow
                .released
                .filter(|(_, through)| ext <= *through)
                .map(|(oldest, _)| now.saturating_duration_since(oldest));
            self.out.push_back(Delivery { key, seq, packet });
            if let Some(d) = late {
                self.stats.late_after_release += 1;
                self.skew_sample(now, d);
            }
            return started;
        }
        let ext = flow.expected + u64::from(diff);
        note_lane(&mut flow.lanes, lane, ext, now);
        if diff == 0 {
            // A gap filled: the frames held behind it waited since the oldest one arrived.
            let waited = if flow.buf.is_empty() {
                None
            } else {
                flow.arrivals
                    .front()
                    .map(|(t, _)| now.saturating_duration_since(*t))
            };
            flow.expected += 1;
            self.stats.in_order += 1;
            if let Some(d) = waited {
                self.stats.gaps_filled += 1;
                self.skew_sample(now, d);
            }
            self.out.push_back(Delivery {
                key: key.clone(),
                seq,
                packet,
            });
            self.drain_in_order(&key);
            return started;
        }
        if flow.buf.contains_key(&ext) {
            // A duplicate of a frame already held: pass it on at once, as Alg. 1 does for duplicates.
            self.stats.dup_late += 1;
            self.out.push_back(Delivery { key, seq, packet });
            return started;
        }
        // Alg. 1's last branch: the buffer (or the memory) is full.
        let full = flow.buf.len() >= self.params.buffer_frames
            || flow.bytes + len > MAX_FLOW_BYTES
            || self.total_bytes + len > MAX_TOTAL_BYTES;
        if full {
            let lowest = flow.buf.keys().next().copied();
            match lowest {
                Some(low) if low < ext => {
                    // Send the lowest early (skipping the gap before it), keep the new frame.
                    self.release_through(&key, low, Gap::Overflow);
                }
                _ => {
                    // Nothing lower is held: the new frame goes out now, and the gap before it is
                    // skipped (a later frame of the gap is then late and passes at once).
                    flow.expected = ext + 1;
                    self.stats.overflow += 1;
                    self.out.push_back(Delivery {
                        key: key.clone(),
                        seq,
                        packet,
                    });
                    self.drain_in_order(&key);
                    return started;
                }
            }
        }
        let Some(flow) = self.flows.get_mut(&key) else {
            return started;
        };
        // Still full after releasing the lowest (only when the global memory is held by other
        // flows): forward the new frame rather than exceed the bound.
        if flow.bytes + len > MAX_FLOW_BYTES || self.total_bytes + len > MAX_TOTAL_BYTES {
            // Everything lower than the new frame goes first, so the flow stays in order.
            self.release_through(&key, ext.saturating_sub(1), Gap::Overflow);
            if let Some(flow) = self.flows.get_mut(&key) {
                flow.expected = flow.expected.max(ext + 1);
            }
            self.stats.overflow += 1;
            self.out.push_back(Delivery {
                key: key.clone(),
                seq,
                packet,
            });
            self.drain_in_order(&key);
            return started;
        }
        flow.buf.insert(ext, Held { seq, packet, len });
        flow.bytes += len;
        flow.arrivals.push_back((now, ext));
        self.total_bytes += len;
        self.stats.buffered += 1;
        if flow.buf.len() > self.eff.frames {
            self.release_all(&key, Gap::Threshold, self.params.lrf);
        } else {
            self.refresh_deadline(&key);
        }
        started
    }

    /// The next frame to write to TUN, in order.
    pub fn poll_deliver(&mut self) -> Option<Delivery<K, P>> {
        self.out.pop_front()
    }

    /// When [`Resequencer::handle_timeout`] should run next: the earliest hold deadline or the
    /// idle sweep; `None` with no flows.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let hold = self.deadlines.iter().next().map(|(t, _)| *t);
        match (hold, self.next_sweep) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Releases every buffer whose oldest frame waited the hold time, and sweeps idle flows when
    /// due. Afterwards drain [`Resequencer::poll_deliver`].
    pub fn handle_timeout(&mut self, now: Instant) {
        self.update_eff(now);
        while let Some((t, key)) = self.deadlines.iter().next().cloned() {
            if t > now {
                break;
            }
            self.deadlines.remove(&(t, key.clone()));
            let mut longer = false;
            if let Some(f) = self.flows.get_mut(&key) {
                f.deadline = None;
                // The hold grew (a skew sample) since this deadline was set: wait on.
                longer = f
                    .arrivals
                    .front()
                    .is_some_and(|(a, _)| *a + self.eff.hold > now);
            }
            if longer {
                self.refresh_deadline(&key);
            } else {
                self.release_all(&key, Gap::Timeout, self.params.lrf);
            }
        }
        if self.next_sweep.is_some_and(|t| now >= t) {
            self.expire(now);
        }
    }

    /// Forgets flows idle longer than the idle timeout (their buffers released first).
    fn expire(&mut self, now: Instant) {
        let timeout = self.params.idle_timeout;
        let idle: Vec<K> = self
            .flows
            .iter()
            .filter(|(_, f)| now.saturating_duration_since(f.last_seen) > timeout)
            .map(|(k, _)| k.clone())
            .collect();
        for k in idle {
            self.release_all(&k, Gap::Flush, 1);
            self.flows.remove(&k);
            self.stats.flows_expired += 1;
        }
        self.next_sweep = (!self.flows.is_empty()).then(|| now + SWEEP_INTERVAL);
    }

    fn evict_lru(&mut self) {
        let lru = self
            .flows
            .iter()
            .min_by_key(|(_, f)| f.last_seen)
            .map(|(k, _)| k.clone());
        if let Some(k) = lru {
            self.release_all(&k, Gap::Flush, 1);
            self.flows.remove(&k);
            self.stats.flows_evicted += 1;
        }
    }

    /// Releases through the lowest number every recent lane has passed (module docs).
    fn infer_losses(&mut self, now: Instant, key: &K) {
        let hold = self.eff.hold;
        let Some(flow) = self.flows.get(key) else {
            return;
        };
        if flow.buf.is_empty() || now.saturating_duration_since(flow.started) < hold {
            return;
        }
        let recent = || {
            flow.lanes
                .iter()
                .filter(|(_, _, seen)| now.saturating_duration_since(*seen) <= hold)
        };
        if recent().count() < 2 {
            return;
        }
        let Some(floor) = recent().map(|(_, last, _)| *last).min() else {
            return;
        };
        // Held frames at or below `floor` and the holes between them are final.
        if flow.buf.keys().next().is_some_and(|low| *low <= floor) || floor >= flow.expected {
            self.release_through(key, floor, Gap::Lost);
        }
    }

    /// Forwards buffered frames that are now in order.
    fn drain_in_order(&mut self, key: &K) {
        let Some(flow) = self.flows.get_mut(key) else {
            return;
        };
        while let Some(entry) = flow.buf.first_entry() {
            if *entry.key() != flow.expected {
                break;
            }
            let h = entry.remove();
            flow.expected += 1;
            flow.bytes -= h.len;
            self.total_bytes -= h.len;
            self.stats.released_in_order += 1;
            self.out.push_back(Delivery {
                key: key.clone(),
                seq: h.seq,
                packet: h.packet,
            });
        }
        self.refresh_deadline(key);
    }

    /// Forwards, in order, every buffered frame up to and including `through` (skipping gaps), sets
    /// `expected` past it, then whatever is in order after it.
    fn release_through(&mut self, key: &K, through: u64, why: Gap) {
        let Some(flow) = self.flows.get_mut(key) else {
            return;
        };
        while let Some(entry) = flow.buf.first_entry() {
            if *entry.key() > through {
                break;
            }
            let h = entry.remove();
            flow.bytes -= h.len;
            self.total_bytes -= h.len;
            match why {
                Gap::Lost => self.stats.released_lost += 1,
                _ => self.stats.overflow += 1,
            }
            self.out.push_back(Delivery {
                key: key.clone(),
                seq: h.seq,
                packet: h.packet,
            });
        }
        flow.expected = flow.expected.max(through + 1);
        self.drain_in_order(key);
    }

    /// Releases a flow's whole buffer in order, ignoring gaps; `expected = last + lrf` (Alg. 1).
    fn release_all(&mut self, key: &K, why: Gap, lrf: u32) {
        let Some(flow) = self.flows.get_mut(key) else {
            return;
        };
        let mut last = None;
        let n = flow.buf.len() as u64;
        let oldest = flow.arrivals.front().map(|(t, _)| *t);
        while let Some((ext, h)) = flow.buf.pop_first() {
            last = Some(ext);
            self.out.push_back(Delivery {
                key: key.clone(),
                seq: h.seq,
                packet: h.packet,
            });
        }
        self.total_bytes -= flow.bytes;
        flow.bytes = 0;
        flow.arrivals.clear();
        if let Some(last) = last {
            flow.expected = flow.expected.max(last + u64::from(lrf));
            if matches!(why, Gap::Threshold | Gap::Timeout) {
                flow.released = oldest.map(|t| (t, last));
            }
        }
        match why {
            Gap::Threshold => self.stats.released_threshold += n,
            Gap::Timeout => self.stats.released_timeout += n,
            Gap::Flush => self.stats.released_flush += n,
            Gap::Overflow => self.stats.overflow += n,
            Gap::Lost => self.stats.released_lost += n,
        }
        self.refresh_deadline(key);
    }

    /// Re-registers the flow's hold deadline: the arrival of its oldest buffered frame + hold.
    fn refresh_deadline(&mut self, key: &K) {
        let Some(flow) = self.flows.get_mut(key) else {
            return;
        };
        while let Some((_, ext)) = flow.arrivals.front() {
            if flow.buf.contains_key(ext) {
                break;
            }
            flow.arrivals.pop_front();
        }
        // Entries of frames that already left pile up behind a long-held one: compact when the
        // queue is twice the buffer (amortised O(1) per frame, bounded by 2·S entries).
        if flow.arrivals.len() > 2 * self.params.buffer_frames {
            let buf = &flow.buf;
            flow.arrivals.retain(|(_, e)| buf.contains_key(e));
        }
        let want = flow.arrivals.front().map(|(t, _)| *t + self.eff.hold);
        if want != flow.deadline {
            if let Some(old) = flow.deadline {
                self.deadlines.remove(&(old, key.clone()));
            }
            if let Some(new) = want {
                self.deadlines.insert((new, key.clone()));
            }
            flow.deadline = want;
        }
    }
}

/// Records that `lane` delivered the flow's frame `ext` (0 for a late frame: only "seen" moves).
fn note_lane(lanes: &mut Vec<(u64, u64, Instant)>, lane: u64, ext: u64, now: Instant) {
    if let Some(l) = lanes.iter_mut().find(|(id, _, _)| *id == lane) {
        l.1 = l.1.max(ext);
        l.2 = now;
        return;
    }
    if lanes.len() >= MAX_LANES {
        if let Some(i) = lanes
            .iter()
            .enumerate()
            .min_by_key(|(_, (_, _, seen))| *seen)
            .map(|(i, _)| i)
        {
            lanes.swap_remove(i);
        }
    }
    lanes.push((lane, ext, now));
}

#[cfg(test)]
mod tests;
