//! The receive side of striping: sequenced frames (`FLAG_SEQ`) go through one
//! [`mpa::resequencer::Resequencer`] shared by every connection of every peer, then to TUN in order
//! (seed 001 §III-D, `docs/mpa.md` "Striping"). A timer task runs its hold-time releases.
//!
//! The resequencer is keyed by the inner 5-tuple. That is also the (source branch, flow) of the
//! brief: the inner source address lies in exactly one branch's LAN prefixes (validated disjoint),
//! so one flow key never mixes two source branches, and the key stays the same whichever
//! connection (path group, class, direction) a frame of the flow came in on.
//!
//! Locking: one `std::sync::Mutex` around the core; frames are handed in and written to TUN while
//! it is held, so two connection readers cannot interleave a flow's releases. The TUN write is a
//! non-blocking syscall; the lock is never held across an `.await`.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mpa::classifier::{parse, FlowKey};
use mpa::framing::Frame;
use mpa::resequencer::{Delivery, Params, Resequencer};
use tokio::sync::Notify;
use tracing::trace;

use crate::stats::Stats;
use crate::tunnel::Shared;

/// The timer task's sleep when nothing is buffered (it is woken early when a frame is held).
const IDLE_TICK: Duration = Duration::from_secs(1);

/// A frame whose payload was copied out of the connection's receive buffer: a held 1.4 KB frame
/// must not pin the 128 KiB receive chunk it was split from (S frames could pin S chunks).
type Held = Frame;

struct Inner {
    rs: Resequencer<FlowKey, Held>,
    /// The deadline the timer task sleeps towards.
    armed: Option<Instant>,
}

/// The shared resequencer and the wake-up of its timer task.
pub struct Reseq {
    inner: Mutex<Inner>,
    wake: Notify,
}

impl std::fmt::Debug for Reseq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reseq").finish_non_exhaustive()
    }
}

impl Reseq {
    /// A resequencer with `params` (from `[striping]`).
    pub fn new(params: Params) -> Self {
        Reseq {
            inner: Mutex::new(Inner {
                rs: Resequencer::new(params),
                armed: None,
            }),
            wake: Notify::new(),
        }
    }

    /// The parameters in force.
    pub fn params(&self) -> Params {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .rs
            .params()
    }

    /// One sequenced IP frame from a tunnel, received on connection `lane` (any id unique among the
    /// live connections): resequence it and write whatever is released to TUN. A frame whose inner
    /// packet does not parse has no flow: it goes straight to TUN.
    pub fn handle(&self, sh: &Shared, frame: &Frame, lane: u64, seq: u32) {
        let key = frame
            .ip_packet()
            .and_then(|(_, ip)| parse(ip).ok())
            .map(|i| i.flow);
        let Some(key) = key else {
            crate::tunnel::write_to_tun(sh, frame);
            return;
        };
        let held = Frame {
            header: frame.header,
            payload: Bytes::copy_from_slice(&frame.payload),
        };
        let len = held.payload.len();
        let now = Instant::now();
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.rs.handle_frame_on(now, key, lane, seq, held, len);
        drain(sh, &mut inner.rs);
        // Wake the timer when a new, earlier deadline appeared.
        let due = inner.rs.poll_timeout();
        if due.is_some_and(|d| inner.armed.is_none_or(|a| d < a)) {
            inner.armed = due;
            self.wake.notify_one();
        }
    }

    /// Runs the hold-time releases and the idle sweep forever (spawned once by `mmsg run`).
    pub async fn run_timer(self: Arc<Self>, sh: Arc<Shared>) {
        loop {
            let due = {
                let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
                let due = inner.rs.poll_timeout();
                inner.armed = due;
                due
            };
            let until = due.unwrap_or_else(|| Instant::now() + IDLE_TICK);
            tokio::select! {
                _ = tokio::time::sleep_until(until.into()) => {}
                _ = self.wake.notified() => continue,
            }
            let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            inner.rs.handle_timeout(Instant::now());
            drain(&sh, &mut inner.rs);
        }
    }
}

/// Writes every released frame to TUN, in order, and publishes the counters.
fn drain(sh: &Shared, rs: &mut Resequencer<FlowKey, Held>) {
    while let Some(Delivery { packet, seq, .. }) = rs.poll_deliver() {
        trace!(seq, "resequenced frame to TUN");
        crate::tunnel::write_to_tun(sh, &packet);
    }
    let s = rs.stats();
    let c = &sh.stats;
    Stats::set(&c.reseq_in_order, s.in_order);
    Stats::set(&c.reseq_buffered, s.buffered);
    Stats::set(&c.reseq_released_in_order, s.released_in_order);
    Stats::set(&c.reseq_released_threshold, s.released_threshold);
    Stats::set(&c.reseq_released_timeout, s.released_timeout);
    Stats::set(&c.reseq_released_lost, s.released_lost);
    Stats::set(&c.reseq_dup_late, s.dup_late);
    Stats::set(&c.reseq_overflow, s.overflow);
}
