//! The single CoDel FIFO per class ([`PriorityQueue`]): the queue every connection used before per-flow
//! fair queueing ([`super::FairQueue`]); kept as the reference it is measured against.

use std::collections::VecDeque;
use std::time::Instant;

use super::aqm::{AqmConfig, ClassStats, Dequeued, DropReason, MAX_QUEUE_BYTES, MAX_QUEUE_PACKETS};
use super::codel::{Codel, Verdict};
use crate::Class;

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

/// One class's FIFO with its CoDel state.
#[derive(Debug)]
struct CodelFifo<T> {
    items: VecDeque<Item<T>>,
    bytes: usize,
    /// The largest packet seen: CoDel does not act while less than one of them is queued.
    max_packet: usize,
    codel: Codel,
    stats: ClassStats,
}

impl<T> CodelFifo<T> {
    fn new() -> Self {
        CodelFifo {
            items: VecDeque::with_capacity(MAX_QUEUE_PACKETS),
            bytes: 0,
            max_packet: 1_500,
            codel: Codel::default(),
            stats: ClassStats::default(),
        }
    }

    /// One CoDel decision: the next packet and whether to signal congestion with it.
    fn poll(&mut self, now: Instant, aqm: &AqmConfig) -> Option<(Item<T>, Verdict)> {
        let Some(item) = self.items.pop_front() else {
            self.codel.on_empty();
            return None;
        };
        self.bytes = self.bytes.saturating_sub(item.len);
        let sojourn = now.saturating_duration_since(item.enqueued_at);
        let verdict = self
            .codel
            .on_dequeue(now, sojourn, self.bytes, self.max_packet, aqm);
        Some((item, verdict))
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
