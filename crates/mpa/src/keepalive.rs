//! Connection liveness: when to send a keepalive frame and when to declare an MPTCP connection dead,
//! so its path group goes down and its flows move (seed 000 §II-B keeps connections "set up in
//! advance"; they must be known to be alive).
//!
//! MPTCP survives the loss of single subflows (an uplink cut moves data to the others), so a
//! connection is only dead when nothing at all arrives. Each side sends a keepalive frame
//! ([`crate::framing::FrameType::Keepalive`]) after [`KEEPALIVE_INTERVAL`] without sending anything,
//! so a healthy peer is never silent for longer than that; [`DEAD_AFTER`] of silence means dead.
//!
//! Silence is judged at the application first (frames read), then at the transport: an MPTCP
//! connection delivers bytes in data-sequence order, so when one subflow waits for a
//! retransmission (on a congested path its timer backs off to seconds) everything that arrived
//! on the other subflows waits behind it in the kernel and the application reads nothing. On
//! congested paths (the paper's Case B, 10–40 TCP flows per bottleneck) bulk connections whose
//! subflows were receiving all along were declared dead after 3 s, closed and reconnected, and
//! everything in flight was lost. So when the application has heard nothing for [`DEAD_AFTER`]
//! ([`Liveness::needs_transport_check`]), the driver reads when a subflow last received data
//! (`tcpi_last_data_recv`) and passes it to [`Liveness::on_transport_receive`]; the connection
//! is dead only once the transport too was silent for [`DEAD_AFTER`], or the application for
//! [`MAX_SILENCE`] whatever the transport says.
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

/// Application-level silence after which a connection is dead even while its subflows still
/// receive data: a reordering stall lasts a retransmission timeout or a few, not this long.
pub const MAX_SILENCE: Duration = Duration::from_secs(12);

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
    /// The latest time the transport is known to have received data from the peer.
    last_heard: Instant,
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
            last_heard: now,
            last_tx: now,
            dead: false,
        }
    }

    /// Bytes arrived from the peer at `now`.
    pub fn on_receive(&mut self, now: Instant) {
        self.last_rx = self.last_rx.max(now);
    }

    /// The transport received data from the peer at `at` (a subflow's `tcpi_last_data_recv`),
    /// whether or not the application could read it yet.
    pub fn on_transport_receive(&mut self, at: Instant) {
        self.last_heard = self.last_heard.max(at);
    }

    /// Whether the application has heard nothing for the dead-after time at `now`: the driver
    /// should read the transport's last receipt ([`Liveness::on_transport_receive`]) before
    /// [`Liveness::handle_timeout`] decides.
    pub fn needs_transport_check(&self, now: Instant) -> bool {
        !self.dead && now >= self.last_rx + self.dead_after
    }

    /// When silence makes the connection dead, given what is known now.
    fn dead_at(&self) -> Instant {
        (self.last_heard.max(self.last_rx) + self.dead_after)
            .min(self.last_rx + MAX_SILENCE.max(self.dead_after))
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
        (!self.dead).then(|| (self.last_tx + self.interval).min(self.dead_at()))
    }

    /// Runs the timers at `now`: `Dead` first (once), else `SendKeepalive` when due.
    pub fn handle_timeout(&mut self, now: Instant) -> Option<LivenessEvent> {
        if self.dead {
            return None;
        }
        if now >= self.dead_at() {
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
    fn a_connection_whose_subflows_still_receive_is_not_dead_until_max_silence() {
        let t0 = Instant::now();
        let mut l = Liveness::new(t0);
        let mut now = t0;
        let ms = Duration::from_millis;
        // The application reads nothing (a reordering stall) but the kernel keeps receiving:
        // each check finds data 10 ms old.
        while let Some(t) = l.poll_timeout() {
            now = t;
            if l.needs_transport_check(now) {
                l.on_transport_receive(now - ms(10));
            }
            if l.handle_timeout(now) == Some(LivenessEvent::SendKeepalive) {
                l.on_send(now);
            }
        }
        assert!(l.is_dead());
        assert_eq!(now, t0 + MAX_SILENCE, "dead only at the cap");

        // A stall that ends: frames arrive again before the transport too falls silent.
        let mut l = Liveness::new(t0);
        assert!(!l.needs_transport_check(t0 + DEAD_AFTER - ms(1)));
        assert!(l.needs_transport_check(t0 + DEAD_AFTER));
        l.on_transport_receive(t0 + DEAD_AFTER - ms(5));
        assert_eq!(
            l.handle_timeout(t0 + DEAD_AFTER),
            Some(LivenessEvent::SendKeepalive)
        );
        l.on_send(t0 + DEAD_AFTER);
        assert!(!l.is_dead());
        // Without newer evidence the deadline is the transport's receipt + DEAD_AFTER.
        l.on_send(t0 + ms(5_900));
        assert_eq!(l.poll_timeout(), Some(t0 + 2 * DEAD_AFTER - ms(5)));
        l.on_receive(t0 + ms(5_000));
        assert!(!l.needs_transport_check(t0 + ms(7_000)));
        assert_eq!(
            l.handle_timeout(t0 + ms(7_000)),
            Some(LivenessEvent::SendKeepalive)
        );
        assert!(!l.is_dead());
    }

    #[test]
    fn a_silent_transport_still_means_dead_after_three_seconds() {
        let t0 = Instant::now();
        let mut l = Liveness::new(t0);
        // The subflows last received before the application's last frame: no new evidence.
        l.on_transport_receive(t0 - Duration::from_millis(200));
        assert!(l.needs_transport_check(t0 + DEAD_AFTER));
        assert_eq!(l.handle_timeout(t0 + DEAD_AFTER), Some(LivenessEvent::Dead));
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
