//! CoDel's per-queue state machine (RFC 8289 §5 pseudo-code), one decision per dequeued packet. Shared
//! by the single FIFO per class ([`super::PriorityQueue`]) and every flow of a [`super::FairQueue`].

use std::time::{Duration, Instant};

use super::aqm::AqmConfig;

/// What CoDel decided for one dequeued packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Send it.
    Send,
    /// Signal congestion with it: CE-mark it (ECN-capable and ECN on) or drop it.
    Signal,
}

/// One queue's CoDel variables.
#[derive(Debug, Clone, Copy)]
pub(super) struct Codel {
    first_above_time: Option<Instant>,
    drop_next: Option<Instant>,
    count: u32,
    last_count: u32,
    dropping: bool,
}

impl Default for Codel {
    fn default() -> Self {
        Codel::RESET
    }
}

impl Codel {
    /// A queue that never signalled.
    pub(super) const RESET: Codel = Codel {
        first_above_time: None,
        drop_next: None,
        count: 0,
        last_count: 0,
        dropping: false,
    };

    /// `interval / sqrt(count)` after `t`.
    fn control_law(t: Instant, interval: Duration, count: u32) -> Instant {
        t + interval.div_f64(f64::from(count.max(1)).sqrt())
    }

    /// The queue was found empty (RFC 8289 `dodequeue` on an empty queue): not above target, and
    /// out of the dropping state.
    pub(super) fn on_empty(&mut self) {
        self.first_above_time = None;
        self.dropping = false;
    }

    /// The decision for a packet just taken from the head after waiting `sojourn`; `backlog` is the
    /// bytes still queued after it (CoDel does not act while less than `max_packet` is queued).
    pub(super) fn on_dequeue(
        &mut self,
        now: Instant,
        sojourn: Duration,
        backlog: usize,
        max_packet: usize,
        aqm: &AqmConfig,
    ) -> Verdict {
        // RFC 8289 `dodequeue`: has the sojourn been above target for an interval?
        let mut ok_to_drop = false;
        if sojourn < aqm.target || backlog <= max_packet {
            self.first_above_time = None;
        } else {
            match self.first_above_time {
                None => self.first_above_time = Some(now + aqm.interval),
                Some(t) if now >= t => ok_to_drop = true,
                Some(_) => {}
            }
        }
        if self.dropping {
            if !ok_to_drop {
                self.dropping = false;
                return Verdict::Send;
            }
            match self.drop_next {
                Some(next) if now >= next => {
                    self.count = self.count.saturating_add(1);
                    self.drop_next = Some(Self::control_law(next, aqm.interval, self.count));
                    Verdict::Signal
                }
                _ => Verdict::Send,
            }
        } else if ok_to_drop {
            self.dropping = true;
            // Re-entering soon after the last dropping state: resume near the old drop rate.
            let delta = self.count.saturating_sub(self.last_count);
            let recent = self
                .drop_next
                .is_some_and(|d| now.saturating_duration_since(d) < aqm.interval * 16);
            self.count = if delta > 1 && recent { delta } else { 1 };
            self.drop_next = Some(Self::control_law(now, aqm.interval, self.count));
            self.last_count = self.count;
            Verdict::Signal
        } else {
            Verdict::Send
        }
    }
}
