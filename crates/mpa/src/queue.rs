//! Per-connection packet queues: strict priority (Type I before Type II, seed 000 §II-A "the low-priority
//! traffic will not block the transmission of high-priority traffic at any time") and a CoDel
//! sojourn-time AQM (RFC 8289) per class, against TCP-in-TCP meltdown (issue #4): inner TCP must see
//! congestion (a drop or a CE mark) as soon as packets wait too long in front of the MPTCP socket,
//! instead of the queue growing into the socket buffers.
//!
//! The queue is generic over the caller's packet buffer `T` (e.g. a `BytesMut` with room for the frame
//! header) and never allocates per packet: the `VecDeque`s are allocated once by [`PriorityQueue::new`].
//! Dropped packets are handed back so the caller can count them and reuse their buffers.
//!
//! Call order: [`PriorityQueue::enqueue`] as packets arrive (an `Err` hands the packet back: tail drop
//! at the bounds), [`PriorityQueue::poll_dequeue`] whenever the connection's socket can take more
//! (loop until `None` or the socket is full): [`Dequeued::Send`] and [`Dequeued::Mark`] go out (for
//! `Mark`, first set CE with [`crate::classifier::mark_ce`]), [`Dequeued::Drop`] is counted and
//! recycled. Time is always a parameter.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::Class;

/// Most packets queued per class. With 1,500-byte packets this is reached only together with
/// [`MAX_QUEUE_BYTES`] (≈ 350 packets); the count bounds queues of tiny packets (ACKs, VoIP), whose
/// bookkeeping (`(T, Instant, usize, bool)` ≈ 64 B with a `BytesMut`) costs 64 KiB at most.
pub const MAX_QUEUE_PACKETS: usize = 1_024;

/// Most payload bytes queued per class. 512 KiB is ~100 ms at 40 Mbit/s (the paper's WAN port speed,
/// i.e. one CoDel interval, beyond which CoDel has long been dropping) and ~3.5 ms at 1.2 Gbit/s, or
/// eight 64 KiB GSO super-packets. Worst-case memory per queue: 2 classes × 512 KiB = **1 MiB**; with
/// one queue per (remote branch, path group), the 2×2 testbed (1 remote × 2 groups) needs 2 MiB, the
/// largest config (14 remotes × 16 groups) 224 MiB.
pub const MAX_QUEUE_BYTES: usize = 512 * 1024;

/// CoDel's default target sojourn time (RFC 8289 §4.4).
pub const DEFAULT_TARGET: Duration = Duration::from_millis(5);
/// CoDel's default interval (RFC 8289 §4.4): about a worst-case RTT.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);

/// The AQM settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AqmConfig {
    /// Acceptable standing sojourn time.
    pub target: Duration,
    /// How long the sojourn may stay above `target` before CoDel acts; also its control-law base.
    pub interval: Duration,
    /// Mark ECN-capable packets instead of dropping them.
    pub ecn: bool,
}

impl Default for AqmConfig {
    fn default() -> Self {
        AqmConfig {
            target: DEFAULT_TARGET,
            interval: DEFAULT_INTERVAL,
            ecn: true,
        }
    }
}

impl From<&crate::config::QueueConfig> for AqmConfig {
    fn from(q: &crate::config::QueueConfig) -> Self {
        AqmConfig {
            target: Duration::from_millis(q.codel_target_ms),
            interval: Duration::from_millis(q.codel_interval_ms),
            ecn: q.ecn,
        }
    }
}

/// Why a packet was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Tail drop: the class already holds [`MAX_QUEUE_PACKETS`] packets.
    QueueFullPackets,
    /// Tail drop: the class would exceed [`MAX_QUEUE_BYTES`].
    QueueFullBytes,
    /// CoDel: the sojourn time stayed above target for an interval.
    Codel,
    /// Type III is never queued for a tunnel.
    NotTunnelled,
}

/// The outcome of one [`PriorityQueue::poll_dequeue`].
#[derive(Debug, PartialEq, Eq)]
pub enum Dequeued<T> {
    /// Send this packet.
    Send(T, Class),
    /// Send this packet after setting ECN CE in it (CoDel's congestion signal to an ECN-capable flow).
    Mark(T, Class),
    /// CoDel dropped this packet: count it, recycle the buffer, poll again.
    Drop(T, Class, DropReason),
}

/// Per-class counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClassStats {
    /// Packets accepted.
    pub enqueued: u64,
    /// Packets handed out to send (including marked ones).
    pub sent: u64,
    /// Packets CE-marked by CoDel.
    pub marked: u64,
    /// Packets dropped by CoDel.
    pub codel_drops: u64,
    /// Packets refused at the bounds.
    pub tail_drops: u64,
}

struct Item<T> {
    packet: T,
    len: usize,
    enqueued_at: Instant,
    ect: bool,
}

impl<T> std::fmt::Debug for Item<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Item")
            .field("len", &self.len)
            .field("enqueued_at", &self.enqueued_at)
            .field("ect", &self.ect)
            .finish_non_exhaustive()
    }
}

/// One class's FIFO with its CoDel state (RFC 8289 §5 pseudo-code, one decision per call).
#[derive(Debug)]
struct CodelFifo<T> {
    items: VecDeque<Item<T>>,
    bytes: usize,
    /// The largest packet seen: CoDel does not act while less than one of them is queued.
    max_packet: usize,
    first_above_time: Option<Instant>,
    drop_next: Option<Instant>,
    count: u32,
    last_count: u32,
    dropping: bool,
    stats: ClassStats,
}

enum Verdict {
    Send,
    Signal,
}

impl<T> CodelFifo<T> {
    fn new() -> Self {
        CodelFifo {
            items: VecDeque::with_capacity(MAX_QUEUE_PACKETS),
            bytes: 0,
            max_packet: 1_500,
            first_above_time: None,
            drop_next: None,
            count: 0,
            last_count: 0,
            dropping: false,
            stats: ClassStats::default(),
        }
    }

    /// RFC 8289 `dodequeue`: the head packet and whether the sojourn has been above target for an
    /// interval.
    fn do_dequeue(&mut self, now: Instant, aqm: &AqmConfig) -> Option<(Item<T>, bool)> {
        let item = self.items.pop_front()?;
        self.bytes = self.bytes.saturating_sub(item.len);
        let sojourn = now.saturating_duration_since(item.enqueued_at);
        let mut ok_to_drop = false;
        if sojourn < aqm.target || self.bytes <= self.max_packet {
            self.first_above_time = None;
        } else {
            match self.first_above_time {
                None => self.first_above_time = Some(now + aqm.interval),
                Some(t) if now >= t => ok_to_drop = true,
                Some(_) => {}
            }
        }
        Some((item, ok_to_drop))
    }

    /// `interval / sqrt(count)` after `t`.
    fn control_law(t: Instant, interval: Duration, count: u32) -> Instant {
        t + interval.div_f64(f64::from(count.max(1)).sqrt())
    }

    /// One CoDel decision: the next packet and whether to signal congestion with it.
    fn poll(&mut self, now: Instant, aqm: &AqmConfig) -> Option<(Item<T>, Verdict)> {
        let Some((item, ok_to_drop)) = self.do_dequeue(now, aqm) else {
            // An empty queue leaves the dropping state (RFC 8289: dodequeue resets first_above_time
            // and the next packet finds ok_to_drop false).
            self.dropping = false;
            return None;
        };
        if self.dropping {
            if !ok_to_drop {
                self.dropping = false;
                return Some((item, Verdict::Send));
            }
            match self.drop_next {
                Some(next) if now >= next => {
                    self.count = self.count.saturating_add(1);
                    self.drop_next = Some(Self::control_law(next, aqm.interval, self.count));
                    Some((item, Verdict::Signal))
                }
                _ => Some((item, Verdict::Send)),
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
            Some((item, Verdict::Signal))
        } else {
            Some((item, Verdict::Send))
        }
    }
}

/// A bounded two-class strict-priority queue with CoDel per class, for one connection (or one
/// (remote branch, path group) pair whose class connections the driver feeds from it).
#[derive(Debug)]
pub struct PriorityQueue<T> {
    type1: CodelFifo<T>,
    type2: CodelFifo<T>,
    aqm: AqmConfig,
}

impl<T> PriorityQueue<T> {
    /// An empty queue; allocates room for [`MAX_QUEUE_PACKETS`] per class now.
    pub fn new(aqm: AqmConfig) -> Self {
        PriorityQueue {
            type1: CodelFifo::new(),
            type2: CodelFifo::new(),
            aqm,
        }
    }

    fn fifo(&mut self, class: Class) -> Option<&mut CodelFifo<T>> {
        match class {
            Class::TypeI => Some(&mut self.type1),
            Class::TypeII => Some(&mut self.type2),
            Class::TypeIII => None,
        }
    }

    /// Queues a packet of `len` bytes of `class`; `ect` when the inner packet is ECN-capable (from
    /// [`crate::classifier::PacketInfo::ect`]). At a bound, hands the packet back with the reason.
    pub fn enqueue(
        &mut self,
        now: Instant,
        class: Class,
        packet: T,
        len: usize,
        ect: bool,
    ) -> Result<(), (T, DropReason)> {
        let Some(q) = self.fifo(class) else {
            return Err((packet, DropReason::NotTunnelled));
        };
        if q.items.len() >= MAX_QUEUE_PACKETS {
            q.stats.tail_drops += 1;
            return Err((packet, DropReason::QueueFullPackets));
        }
        if q.bytes.saturating_add(len) > MAX_QUEUE_BYTES {
            q.stats.tail_drops += 1;
            return Err((packet, DropReason::QueueFullBytes));
        }
        q.bytes += len;
        q.max_packet = q.max_packet.max(len);
        q.stats.enqueued += 1;
        q.items.push_back(Item {
            packet,
            len,
            enqueued_at: now,
            ect,
        });
        Ok(())
    }

    /// The next packet to send, Type I strictly first; `None` when both classes are empty.
    pub fn poll_dequeue(&mut self, now: Instant) -> Option<Dequeued<T>> {
        let aqm = self.aqm;
        for (class, q) in [
            (Class::TypeI, &mut self.type1),
            (Class::TypeII, &mut self.type2),
        ] {
            if let Some((item, verdict)) = q.poll(now, &aqm) {
                return Some(match verdict {
                    Verdict::Send => {
                        q.stats.sent += 1;
                        Dequeued::Send(item.packet, class)
                    }
                    Verdict::Signal if aqm.ecn && item.ect => {
                        q.stats.sent += 1;
                        q.stats.marked += 1;
                        Dequeued::Mark(item.packet, class)
                    }
                    Verdict::Signal => {
                        q.stats.codel_drops += 1;
                        Dequeued::Drop(item.packet, class, DropReason::Codel)
                    }
                });
            }
        }
        None
    }

    /// Packets queued in `class`.
    pub fn len(&self, class: Class) -> usize {
        match class {
            Class::TypeI => self.type1.items.len(),
            Class::TypeII => self.type2.items.len(),
            Class::TypeIII => 0,
        }
    }

    /// Bytes queued in `class`.
    pub fn bytes(&self, class: Class) -> usize {
        match class {
            Class::TypeI => self.type1.bytes,
            Class::TypeII => self.type2.bytes,
            Class::TypeIII => 0,
        }
    }

    /// Whether both classes are empty.
    pub fn is_empty(&self) -> bool {
        self.type1.items.is_empty() && self.type2.items.is_empty()
    }

    /// The counters of `class` (zero for Type III).
    pub fn stats(&self, class: Class) -> ClassStats {
        match class {
            Class::TypeI => self.type1.stats,
            Class::TypeII => self.type2.stats,
            Class::TypeIII => ClassStats::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type1_is_always_dequeued_first() {
        let t = Instant::now();
        let mut q = PriorityQueue::new(AqmConfig::default());
        q.enqueue(t, Class::TypeII, "a", 100, false).unwrap();
        q.enqueue(t, Class::TypeII, "b", 100, false).unwrap();
        q.enqueue(t, Class::TypeI, "X", 100, false).unwrap();
        assert_eq!(q.poll_dequeue(t), Some(Dequeued::Send("X", Class::TypeI)));
        q.enqueue(t, Class::TypeI, "Y", 100, false).unwrap();
        assert_eq!(q.poll_dequeue(t), Some(Dequeued::Send("Y", Class::TypeI)));
        assert_eq!(q.poll_dequeue(t), Some(Dequeued::Send("a", Class::TypeII)));
        assert_eq!(q.poll_dequeue(t), Some(Dequeued::Send("b", Class::TypeII)));
        assert_eq!(q.poll_dequeue(t), None);
        assert!(q.is_empty());
    }

    #[test]
    fn bounds_hand_packets_back() {
        let t = Instant::now();
        let mut q = PriorityQueue::new(AqmConfig::default());
        for i in 0..MAX_QUEUE_PACKETS {
            q.enqueue(t, Class::TypeII, i, 1, false).unwrap();
        }
        assert_eq!(
            q.enqueue(t, Class::TypeII, 7, 1, false),
            Err((7, DropReason::QueueFullPackets))
        );
        // The other class has its own bounds.
        q.enqueue(t, Class::TypeI, 0, MAX_QUEUE_BYTES, false)
            .unwrap();
        assert_eq!(
            q.enqueue(t, Class::TypeI, 1, 1, false),
            Err((1, DropReason::QueueFullBytes))
        );
        assert_eq!(
            q.enqueue(t, Class::TypeIII, 2, 1, false),
            Err((2, DropReason::NotTunnelled))
        );
        assert_eq!(q.stats(Class::TypeII).tail_drops, 1);
        assert_eq!(q.bytes(Class::TypeI), MAX_QUEUE_BYTES);
        assert_eq!(q.len(Class::TypeII), MAX_QUEUE_PACKETS);
    }
}
