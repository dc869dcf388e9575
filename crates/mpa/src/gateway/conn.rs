//! One tunnel connection's core: its queue (outbound connections only; strict priority, per-flow
//! fair queueing and CoDel per flow, [`FairQueue`]) and its liveness. Held by the driver's writer task for that connection (behind a lock shared with
//! the TUN task, which enqueues, and the reader task, which reports what arrived).

use std::time::Instant;

use bytes::BytesMut;

use crate::classifier::mark_ce;
use crate::framing::{encode_frame, Frame, FrameType, FRAME_HEADER_LEN};
use crate::keepalive::{Liveness, LivenessEvent};
use crate::queue::{
    AqmConfig, Arrival, ClassStats, Dequeued, DropReason, FairQueue, FlowStats, SojournHistogram,
};

use super::{ConnId, Counters, Direction, Event, PacketDrop, QueuedPacket};

/// What [`ConnCore::poll_transmit`] hands out: whole frames, written to the socket in this order.
#[derive(Debug)]
pub struct Transmit {
    /// The frame (header and payload).
    pub frame: BytesMut,
    /// A keepalive (no payload) rather than a data frame.
    pub keepalive: bool,
}

/// The core of one connection.
#[derive(Debug)]
pub struct ConnCore {
    id: ConnId,
    /// Outbound connections only: the packets waiting for the socket. It lives as long as the
    /// connection is configured, across reconnections.
    queue: Option<FairQueue<QueuedPacket>>,
    /// While established: the liveness timers.
    liveness: Option<Liveness>,
    keepalive_due: bool,
    lane: u64,
    counters: Counters,
}

impl ConnCore {
    /// The core of a configured outbound connection, down; allocates its queue now.
    pub fn outbound(key: super::ConnKey, aqm: AqmConfig) -> Self {
        ConnCore {
            id: ConnId {
                key,
                dir: Direction::Outbound,
            },
            queue: Some(FairQueue::new(aqm)),
            liveness: None,
            keepalive_due: false,
            lane: 0,
            counters: Counters::default(),
        }
    }

    /// The core of an accepted connection (it carries the peer's data to us and our keepalives
    /// back), down.
    pub fn inbound(key: super::ConnKey) -> Self {
        ConnCore {
            id: ConnId {
                key,
                dir: Direction::Inbound,
            },
            queue: None,
            liveness: None,
            keepalive_due: false,
            lane: 0,
            counters: Counters::default(),
        }
    }

    /// Its identity.
    pub fn id(&self) -> ConnId {
        self.id
    }

    /// The connection was established at `now` (hello sent or accepted). `lane` names it to the
    /// resequencer: any number unique among the live connections.
    pub fn handle_up(&mut self, now: Instant, lane: u64) {
        self.liveness = Some(Liveness::new(now));
        self.keepalive_due = false;
        self.lane = lane;
    }

    /// The connection is gone. Its queued packets are dropped and counted
    /// ([`PacketDrop::ConnClosed`]): they waited at least the liveness timeout (or the socket
    /// failed), so inner TCP has long retransmitted them, and the flows move to another group
    /// on their next packet. Returns how many were dropped.
    pub fn handle_down(&mut self, now: Instant) -> usize {
        self.liveness = None;
        self.keepalive_due = false;
        let mut n = 0;
        if let Some(q) = self.queue.as_mut() {
            while let Some(d) = q.poll_dequeue(now) {
                match d {
                    Dequeued::Drop(..) => self.counters.drop(PacketDrop::Codel),
                    Dequeued::Send(..) | Dequeued::Mark(..) => {
                        self.counters.drop(PacketDrop::ConnClosed);
                        n += 1;
                    }
                }
            }
        }
        n
    }

    /// Whether the connection is established.
    pub fn is_up(&self) -> bool {
        self.liveness.is_some()
    }

    /// The resequencer lane of the current establishment.
    pub fn lane(&self) -> u64 {
        self.lane
    }

    /// Queues a routed packet (from [`super::Router::handle_tun_packet`]). At the queue's bounds
    /// older packets of the fattest flow are dropped and counted ([`PacketDrop::QueueFull`]) and
    /// this one is queued. An `Err` (counted here) means this packet was not queued (a connection
    /// without a queue, Type III, or a packet larger than the byte bound).
    pub fn enqueue(&mut self, now: Instant, packet: QueuedPacket) -> Result<(), PacketDrop> {
        let Some(q) = self.queue.as_mut() else {
            self.counters.drop(PacketDrop::NoConnection);
            return Err(PacketDrop::NoConnection);
        };
        let meta = Arrival {
            class: packet.class,
            flow: packet.flow,
            len: packet.frame.len().saturating_sub(FRAME_HEADER_LEN),
            ect: packet.ect,
        };
        let counters = &mut self.counters;
        match q.enqueue(now, meta, packet, |_, _, _| {
            counters.drop(PacketDrop::QueueFull)
        }) {
            Ok(()) => Ok(()),
            Err((_, reason)) => {
                let d = match reason {
                    DropReason::NotTunnelled => PacketDrop::External,
                    DropReason::Codel => PacketDrop::Codel,
                    DropReason::QueueFullBytes | DropReason::QueueFullPackets => {
                        PacketDrop::QueueFull
                    }
                };
                self.counters.drop(d);
                Err(d)
            }
        }
    }

    /// The next frame for this connection's socket: queued data first (strict priority, CoDel
    /// drops counted and skipped, CE set when CoDel marks), else a keepalive when one is due
    /// ([`ConnCore::handle_timeout`]). Call when the socket can take more, until `None`.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        let liveness = self.liveness.as_mut()?;
        if let Some(q) = self.queue.as_mut() {
            while let Some(d) = q.poll_dequeue(now) {
                let (mut p, mark) = match d {
                    Dequeued::Send(p, _) => (p, false),
                    Dequeued::Mark(p, _) => (p, true),
                    Dequeued::Drop(..) => {
                        self.counters.drop(PacketDrop::Codel);
                        continue;
                    }
                };
                if mark {
                    if let Some(ip) = p.frame.get_mut(p.ip_at..) {
                        if mark_ce(ip) {
                            self.counters.ce_marks += 1;
                        }
                    }
                }
                liveness.on_send(now);
                self.keepalive_due = false;
                self.counters.frames_tx += 1;
                self.counters.bytes_tx += p.frame.len() as u64;
                return Some(Transmit {
                    frame: p.frame,
                    keepalive: false,
                });
            }
        }
        if !self.keepalive_due {
            return None;
        }
        self.keepalive_due = false;
        let mut frame = BytesMut::with_capacity(FRAME_HEADER_LEN);
        encode_frame(
            FrameType::Keepalive,
            self.id.key.class,
            None,
            &[],
            &mut frame,
        )
        .ok()?;
        liveness.on_send(now);
        self.counters.keepalives_tx += 1;
        Some(Transmit {
            frame,
            keepalive: true,
        })
    }

    /// Bytes arrived on the socket at `now` (call per read, also for partial frames).
    pub fn on_receive(&mut self, now: Instant) {
        if let Some(l) = self.liveness.as_mut() {
            l.on_receive(now);
        }
    }

    /// One complete frame decoded from this connection: feeds liveness, counts keepalive,
    /// control and unknown frames, and hands IP frames back for the [`super::Receiver`].
    pub fn handle_frame(&mut self, now: Instant, frame: Frame) -> Option<Frame> {
        self.on_receive(now);
        match frame.header.frame_type {
            FrameType::Ip | FrameType::IpVirtio => {
                self.counters.frames_rx += 1;
                self.counters.bytes_rx += frame.payload.len() as u64;
                Some(frame)
            }
            FrameType::Keepalive => {
                self.counters.keepalives_rx += 1;
                None
            }
            FrameType::Control => {
                self.counters.control_rx += 1;
                None
            }
            FrameType::Unknown(_) => {
                self.counters.unknown_rx += 1;
                None
            }
        }
    }

    /// Whether the peer has been silent at the application for the dead-after time: read when
    /// the transport last received data and pass it to [`ConnCore::on_transport_receive`]
    /// before [`ConnCore::handle_timeout`] ([`crate::keepalive`]).
    pub fn needs_transport_check(&self, now: Instant) -> bool {
        self.liveness
            .as_ref()
            .is_some_and(|l| l.needs_transport_check(now))
    }

    /// The transport (a subflow) received data from the peer at `at`, readable or not yet.
    pub fn on_transport_receive(&mut self, at: Instant) {
        if let Some(l) = self.liveness.as_mut() {
            l.on_transport_receive(at);
        }
    }

    /// When [`ConnCore::handle_timeout`] must run (`None` while down).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.liveness.as_ref().and_then(Liveness::poll_timeout)
    }

    /// Runs the liveness timers: a keepalive becomes due (then [`ConnCore::poll_transmit`]
    /// hands it out), or the peer was silent for [`crate::keepalive::DEAD_AFTER`]: returns
    /// [`Event::Close`] (the connection is down now; close the socket, reconnect).
    pub fn handle_timeout(&mut self, now: Instant) -> Option<Event> {
        match self.liveness.as_mut()?.handle_timeout(now) {
            Some(LivenessEvent::SendKeepalive) => {
                self.keepalive_due = true;
                None
            }
            Some(LivenessEvent::Dead) => {
                self.counters.dead += 1;
                self.handle_down(now);
                Some(Event::Close(self.id))
            }
            None => None,
        }
    }

    /// Bytes waiting in the queue (both classes).
    pub fn queued_bytes(&self) -> usize {
        self.queue.as_ref().map_or(0, |q| {
            q.bytes(crate::Class::TypeI) + q.bytes(crate::Class::TypeII)
        })
    }

    /// The queue, for its per-class counters.
    pub fn queue(&self) -> Option<&FairQueue<QueuedPacket>> {
        self.queue.as_ref()
    }

    /// The queue's counters of `class` (zero for an inbound connection): CoDel drops and marks,
    /// overflow drops from fat flows.
    pub fn queue_stats(&self, class: crate::Class) -> ClassStats {
        self.queue
            .as_ref()
            .map_or(ClassStats::default(), |q| q.stats(class))
    }

    /// The flow scheduler's counters of `class` (zero for an inbound connection): active flows,
    /// packets sent from the new-flows list, bucket collisions, overflow batches.
    pub fn flow_stats(&self, class: crate::Class) -> FlowStats {
        self.queue
            .as_ref()
            .map_or(FlowStats::default(), |q| q.flow_stats(class))
    }

    /// Sojourn times in the queue of the packets of this connection's own class sent so far
    /// (empty for an inbound connection).
    pub fn queue_sojourn(&self) -> SojournHistogram {
        self.queue
            .as_ref()
            .map_or(SojournHistogram::default(), |q| {
                q.sojourn(self.id.key.class)
            })
    }

    /// Counters of this connection.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }
}
