//! The receive side of the tunnel around the gateway core's [`Receiver`]: sequenced frames
//! (`FLAG_SEQ`, striping) go through its resequencer, shared by every connection of every peer,
//! then to TUN in order (seed 001 §III-D, `docs/mpa.md` "Striping"); the core also decides
//! virtio-or-plain for every TUN write. This driver part owns the lock, the TUN writes, the timer
//! task that runs the hold-time releases, and the sizing of an "auto" `T` from measured paths.
//! Unsequenced frames (the bulk) never take the lock: the readers decide them with the stateless
//! [`mpa::gateway::tun_write`].
//!
//! The resequencer is keyed by the inner 5-tuple. That is also the (source branch, flow) of the
//! brief: the inner source address lies in exactly one branch's LAN prefixes (validated disjoint),
//! so one flow key never mixes two source branches, and the key stays the same whichever
//! connection (path group, class, direction) a frame of the flow came in on.
//!
//! Lanes: every connection has its own id (`tunnel`'s `ConnCounters::lane`, never reused), so a
//! reconnected connection is a new lane.
//!
//! Dependencies run one way: the tunnel's readers call in here; released frames go to TUN through
//! [`crate::deliver`], never back into the tunnel.
//!
//! Locking: one `std::sync::Mutex` around the core; frames are handed in and written to TUN while
//! it is held, so two connection readers cannot interleave a flow's releases. The TUN write is a
//! non-blocking syscall; the lock is never held across an `.await`.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use mpa::classifier::FlowKey;
use mpa::config::{Auto, StripingConfig};
use mpa::framing::Frame;
use mpa::gateway::{Counters, PacketDrop, Receiver};
use mpa::resequencer::{Params, Threshold};
use tokio::sync::Notify;
use tracing::debug;

use crate::deliver::ToTun;
use crate::stats::{ConnState, ReseqStatus, Stats};
use crate::tun::Tun;

/// The timer task's sleep when nothing is buffered (it is woken early when a frame is held).
const IDLE_TICK: Duration = Duration::from_secs(1);
/// How often an "auto" `T` is sized again from the measured paths (the subflow RTTs are refreshed
/// once a second too).
const AUTO_INTERVAL: Duration = Duration::from_secs(1);

struct Inner {
    rx: Receiver,
    /// The deadline the timer task sleeps towards.
    armed: Option<Instant>,
    /// The receiver's counters as last published to [`Stats`].
    published: Counters,
    /// The `T` in force as last published to [`Stats`].
    published_t: Option<ReseqStatus>,
}

/// The shared receiver and the wake-up of its timer task.
pub struct Reseq {
    inner: Mutex<Inner>,
    wake: Notify,
    /// `[striping]` is configured here (logged at start-up).
    striping: bool,
    /// Which halves of `T` are "auto" (sized by [`Reseq::run_timer`] from the measured paths).
    auto_frames: bool,
    auto_hold: bool,
}

impl std::fmt::Debug for Reseq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reseq").finish_non_exhaustive()
    }
}

impl Reseq {
    /// The receive side for `[striping]` and a TUN device with or without `offload`. Without
    /// `[striping]` sequenced frames from a striping peer pass in arrival order (not resequenced).
    pub fn new(st: Option<&StripingConfig>, offload: bool) -> Self {
        let params = st.map(StripingConfig::reseq_params);
        Reseq {
            inner: Mutex::new(Inner {
                rx: Receiver::new(params, offload),
                armed: None,
                published: Counters::default(),
                published_t: None,
            }),
            wake: Notify::new(),
            striping: st.is_some(),
            auto_frames: st.is_some_and(|s| s.release_frames == Auto::Auto),
            auto_hold: st.is_some_and(|s| s.release_hold_ms == Auto::Auto),
        }
    }

    /// Whether `[striping]` is configured.
    pub fn striping(&self) -> bool {
        self.striping
    }

    /// The parameters in force.
    pub fn params(&self) -> Params {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .rx
            .resequencer()
            .params()
    }

    /// One sequenced IP frame from a tunnel, received on connection `lane` (an id unique for the
    /// life of the process): resequence it and write whatever is released to TUN. A frame whose
    /// inner packet does not parse has no flow: it goes straight to TUN. Returns the frame's flow
    /// when the resequencer started on it with this frame (the caller steers its reverse).
    pub fn handle(&self, to_tun: ToTun<'_>, frame: Frame, lane: u64) -> Option<FlowKey> {
        let now = Instant::now();
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.rx.handle_frame(now, lane, frame);
        let mut started = None;
        while let Some(flow) = inner.rx.poll_new_flow() {
            started = Some(flow);
        }
        drain(to_tun, &mut inner);
        // Wake the timer when a new, earlier deadline appeared.
        let due = inner.rx.poll_timeout();
        if due.is_some_and(|d| inner.armed.is_none_or(|a| d < a)) {
            inner.armed = due;
            self.wake.notify_one();
        }
        started
    }

    /// Runs the hold-time releases and the idle sweep forever (spawned once by `mmsg run`), and
    /// sizes an "auto" `T` every [`AUTO_INTERVAL`].
    pub async fn run_timer(self: Arc<Self>, tun: Arc<Tun>, stats: Arc<Stats>) {
        let to_tun = ToTun {
            tun: &tun,
            stats: &stats,
        };
        let mut auto = tokio::time::interval(AUTO_INTERVAL);
        auto.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last = (0u64, 0u64);
        loop {
            let due = {
                let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
                let due = inner.rx.poll_timeout();
                inner.armed = due;
                due
            };
            let until = due.unwrap_or_else(|| Instant::now() + IDLE_TICK);
            tokio::select! {
                _ = tokio::time::sleep_until(until.into()) => {}
                _ = self.wake.notified() => continue,
                _ = auto.tick() => {
                    self.size_auto(&stats, &mut last);
                    continue;
                }
            }
            let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            inner.rx.handle_timeout(Instant::now());
            drain(to_tun, &mut inner);
        }
    }
}

impl Reseq {
    /// `T` from the paths as they are now (`Threshold::from_delays`): one-way delays = half the
    /// smoothed RTT of every established subflow of every connection that is up; Σc = the rate at
    /// which frames were written to TUN over the last interval (what arrives while a gap waits);
    /// the frame size = the mean over that interval. Idle (nothing written): unchanged.
    fn size_auto(&self, stats: &Stats, last: &mut (u64, u64)) {
        if !self.auto_frames && !self.auto_hold {
            return;
        }
        let bytes = stats.tun_tx_bytes.load(Ordering::Relaxed);
        let packets = stats.tun_tx_packets.load(Ordering::Relaxed);
        let (d_bytes, d_packets) = (bytes.saturating_sub(last.0), packets.saturating_sub(last.1));
        *last = (bytes, packets);
        let mut delays: Vec<Duration> = Vec::new();
        stats.for_each_conn(|c| {
            if c.state != ConnState::Up {
                return;
            }
            delays.extend(
                c.subflows
                    .iter()
                    .filter(|sf| sf.is_established() && sf.rtt_us > 0)
                    .map(|sf| Duration::from_micros(u64::from(sf.rtt_us) / 2)),
            );
        });
        if d_packets == 0 || delays.is_empty() {
            return;
        }
        let rate = d_bytes * 1_000 / AUTO_INTERVAL.as_millis().max(1) as u64;
        let frame = usize::try_from(d_bytes / d_packets).unwrap_or(usize::MAX);
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let p = inner.rx.resequencer().params();
        let sized = Threshold::from_delays(&delays, &[rate], frame, p.buffer_frames);
        let t = Threshold {
            frames: if self.auto_frames {
                sized.frames
            } else {
                p.threshold.frames
            },
            hold: if self.auto_hold {
                sized.hold
            } else {
                p.threshold.hold
            },
        };
        if t != p.threshold {
            debug!(
                frames = t.frames,
                hold_ms = t.hold.as_millis() as u64,
                "resequencer T sized"
            );
            inner.rx.set_threshold(t);
        }
    }
}

/// Writes every released packet to TUN, in order, and publishes the counters.
fn drain(to_tun: ToTun<'_>, inner: &mut Inner) {
    while let Some(w) = inner.rx.poll_tun_write() {
        to_tun.write(&w);
    }
    let c = to_tun.stats;
    let now = *inner.rx.counters();
    let delta = |r| now.drops(r).saturating_sub(inner.published.drops(r));
    Stats::add(
        &c.drop_virtio_unsupported,
        delta(PacketDrop::VirtioUnsupported),
    );
    Stats::add(&c.frame_errors, delta(PacketDrop::Malformed));
    Stats::add(&c.tun_write_errors, delta(PacketDrop::TunBacklog));
    inner.published = now;
    let s = inner.rx.resequencer().stats();
    Stats::set(&c.reseq_in_order, s.in_order);
    Stats::set(&c.reseq_buffered, s.buffered);
    Stats::set(&c.reseq_released_in_order, s.released_in_order);
    Stats::set(&c.reseq_released_threshold, s.released_threshold);
    Stats::set(&c.reseq_released_timeout, s.released_timeout);
    Stats::set(&c.reseq_released_lost, s.released_lost);
    Stats::set(&c.reseq_dup_late, s.dup_late);
    Stats::set(&c.reseq_overflow, s.overflow);
    Stats::set(&c.reseq_gaps_filled, s.gaps_filled);
    Stats::set(&c.reseq_late_after_release, s.late_after_release);
    let rs = inner.rx.resequencer();
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if s.frames_in > 0 {
        let t = rs.threshold();
        let now = ReseqStatus {
            hold_ms: ms(t.hold),
            threshold_frames: t.frames as u64,
            base_hold_ms: ms(rs.params().threshold.hold),
            measured_skew_ms: rs.measured_skew().map(ms),
        };
        if inner.published_t != Some(now) {
            inner.published_t = Some(now);
            c.set_reseq(now);
        }
    }
}
