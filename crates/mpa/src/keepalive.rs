//! Connection liveness: when to send a keepalive frame and when to declare an MPTCP connection dead,
//! so its path group goes down and its flows move (seed 000 §II-B keeps connections "set up in
//! advance"; they must be known to be alive).
//!
//! MPTCP survives the loss of single subflows (an uplink cut moves data to the others), so a
//! connection is only dead when nothing at all arrives. Each side sends a keepalive frame
//! ([`crate::framing::FrameType::Keepalive`]) after [`KEEPALIVE_INTERVAL`] without sending anything,
//! so a healthy peer is never silent for longer than that; [`DEAD_AFTER`] of silence means dead.
//!
//! Sans-IO: the driver calls [`Liveness::on_receive`] / [`Liveness::on_send`] with the time of each
//! socket read / write, sleeps until [`Liveness::poll_timeout`], and acts on
//! [`Liveness::handle_timeout`].

use std::time::{Duration, Instant};

/// Idle time after which a keepalive is sent. One second keeps the overhead negligible (12 bytes/s)
/// and lets a dead connection be noticed within [`DEAD_AFTER`].
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(1);

/// Silence after which the connection is dead: three keepalive intervals, so one or two keepalives
/// delayed behind a retransmission on a lossy subflow do not kill a working connection.
pub const DEAD_AFTER: Duration = Duration::from_secs(3);

/// What the driver must do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LivenessEvent {
    /// Send a keepalive frame (then call [`Liveness::on_send`]).
    SendKeepalive,
    /// Nothing was received for [`DEAD_AFTER`]: close the connection and mark its group down.
    Dead,
}

/// The liveness timers of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Liveness {
    interval: Duration,
    dead_after: Duration,
    last_rx: Instant,
    last_tx: Instant,
    dead: bool,
}

impl Liveness {
    /// Timers for a connection established at `now`, with the default constants.
    pub fn new(now: Instant) -> Self {
        Self::with_timers(now, KEEPALIVE_INTERVAL, DEAD_AFTER)
    }

    /// Timers with explicit durations (tests, tuning).
    pub fn with_timers(now: Instant, interval: Duration, dead_after: Duration) -> Self {
        Liveness {
            interval,
            dead_after,
            last_rx: now,
            last_tx: now,
            dead: false,
        }
    }

    /// Bytes arrived from the peer at `now`.
    pub fn on_receive(&mut self, now: Instant) {
        self.last_rx = self.last_rx.max(now);
    }

    /// Bytes (a frame or a keepalive) were written at `now`.
    pub fn on_send(&mut self, now: Instant) {
        self.last_tx = self.last_tx.max(now);
    }

    /// Whether the connection was declared dead.
    pub fn is_dead(&self) -> bool {
        self.dead
    }

    /// When [`Liveness::handle_timeout`] must run next (`None` once dead).
    pub fn poll_timeout(&self) -> Option<Instant> {
        (!self.dead).then(|| (self.last_tx + self.interval).min(self.last_rx + self.dead_after))
    }

    /// Runs the timers at `now`: `Dead` first (once), else `SendKeepalive` when due.
    pub fn handle_timeout(&mut self, now: Instant) -> Option<LivenessEvent> {
        if self.dead {
            return None;
        }
        if now >= self.last_rx + self.dead_after {
            self.dead = true;
            return Some(LivenessEvent::Dead);
        }
        (now >= self.last_tx + self.interval).then_some(LivenessEvent::SendKeepalive)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_sender_sends_keepalives() {
        let t0 = Instant::now();
        let mut l = Liveness::new(t0);
        assert_eq!(l.poll_timeout(), Some(t0 + KEEPALIVE_INTERVAL));
        assert_eq!(l.handle_timeout(t0), None);
        let t1 = t0 + KEEPALIVE_INTERVAL;
        assert_eq!(l.handle_timeout(t1), Some(LivenessEvent::SendKeepalive));
        l.on_send(t1);
        l.on_receive(t1);
        assert_eq!(l.poll_timeout(), Some(t1 + KEEPALIVE_INTERVAL));
        // Data written meanwhile postpones the keepalive.
        l.on_send(t1 + Duration::from_millis(900));
        assert_eq!(l.handle_timeout(t1 + KEEPALIVE_INTERVAL), None);
    }

    #[test]
    fn silent_peer_is_dead_after_three_seconds() {
        let t0 = Instant::now();
        let mut l = Liveness::new(t0);
        let mut now = t0;
        let mut events = Vec::new();
        while let Some(t) = l.poll_timeout() {
            now = t;
            if let Some(ev) = l.handle_timeout(now) {
                if ev == LivenessEvent::SendKeepalive {
                    l.on_send(now);
                }
                events.push(ev);
            }
        }
        assert_eq!(
            events,
            vec![
                LivenessEvent::SendKeepalive,
                LivenessEvent::SendKeepalive,
                LivenessEvent::Dead
            ]
        );
        assert_eq!(now, t0 + DEAD_AFTER);
        assert!(l.is_dead());
        assert_eq!(l.handle_timeout(now + DEAD_AFTER), None, "dead once");
    }

    #[test]
    fn a_talking_peer_stays_alive() {
        let t0 = Instant::now();
        let mut l = Liveness::new(t0);
        for ms in (0..10_000).step_by(500) {
            let now = t0 + Duration::from_millis(ms);
            l.on_receive(now);
            if l.handle_timeout(now) == Some(LivenessEvent::SendKeepalive) {
                l.on_send(now);
            }
            assert!(!l.is_dead());
        }
    }
}
