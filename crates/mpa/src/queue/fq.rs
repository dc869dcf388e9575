//! Per-flow fair queueing with CoDel per flow (FQ-CoDel, RFC 8290), per class, under strict priority
//! (Type I before Type II): [`FairQueue`].
//!
//! Per class:
//! - **Flow buckets.** [`FLOW_BUCKETS`] flow queues, allocated once (on the class's first packet). A
//!   packet's [`FlowHash`] picks a set of [`SET_WAYS`] buckets; the flow takes the bucket of that set
//!   already tagged with its hash, else an idle bucket of the set, else one whose flow has no packets
//!   left (8-way set associative, as CAKE: distinct flows share a bucket only when 8 other flows of
//!   the same set have packets queued), else it shares one (counted in [`FlowStats::collisions`]). The hash is keyed per gateway
//!   ([`super::FlowHasher`]), so hosts cannot aim flows at one bucket.
//! - **Packets.** One slab of [`MAX_QUEUE_PACKETS`] slots per class; each flow is a linked list
//!   through it (head, tail, next index), so enqueue and dequeue move no packet and allocate nothing.
//! - **Deficit round robin** with a byte quantum ([`QUANTUM_BYTES`]): a flow sends while its deficit
//!   is positive and is charged the packet's bytes, so a 64 KiB GSO super-packet drives it ~43 quanta
//!   below zero and it waits as many rounds: over time every backlogged flow sends the same bytes,
//!   whatever its packet sizes. A flow that was idle joins the **new-flows list**, served before the
//!   old-flows list, with one quantum: a sparse flow (less than its share) is sent at once (RFC 8290
//!   §4.1-4.2; an emptied new flow moves to the old list if that is not empty, against starvation).
//! - **CoDel per flow** ([`super::codel`]) on each packet's sojourn time. RFC 8289 does not signal
//!   while less than one packet is queued; here that test is per flow (Linux fq_codel uses the whole
//!   queue's backlog): a flow with at most one more packet like the dequeued one queued is not
//!   signalled. Such a flow is not building the queue, its packets wait for the other flows' turns
//!   (with 200 flows a round is 200 quanta), and a flow of 16-64 KiB GSO packets waits several rounds
//!   per packet by design; CAKE avoids the same starvation by raising its target with the number
//!   of bulk flows times the MTU's transmission time, which needs a known rate we do not have.
//!   Drops are not charged to the deficit.
//! - **Overflow.** At [`MAX_QUEUE_PACKETS`] or [`MAX_QUEUE_BYTES`] the packet is queued anyway after
//!   dropping from the head of the fattest flow, up to half its backlog or
//!   [`OVERFLOW_BATCH_PACKETS`] packets per scan (fq_codel's batch drop, amortising the scan of the
//!   [`FLOW_BUCKETS`] counters), never the arriving packet of a sparse flow. The fattest flow is
//!   the one with the most bytes queued *behind its head packet* (fq_codel: the most bytes): the
//!   head is the packet DRR is accumulating quanta for, so a flow of large packets that sends no
//!   more than its share is not starved just because one of its packets outweighs 200 small-packet
//!   flows' fair part of the buffer. When no flow holds two packets, the most bytes decide.
//!
//! Cost: enqueue O([`SET_WAYS`]); dequeue O(1) per packet plus one rotation per quantum a flow
//! overdrew while other flows have packets (a 64 KiB packet: ≤ 44 rotations, O(1) per 1,514 bytes
//! sent; a lone flow gets its rounds at once, and a class that runs empty drops its lists in one
//! pass); an overflow scans 1,024 counters (8 KiB) once per batch.

use std::time::Instant;

use super::aqm::{AqmConfig, ClassStats, Dequeued, DropReason, MAX_QUEUE_BYTES, MAX_QUEUE_PACKETS};
use super::codel::{Codel, Verdict};
use super::flow_hash::FlowHash;
use super::sojourn::SojournHistogram;
use crate::Class;

/// Flow buckets per class. fq_codel's default: with [`SET_WAYS`]-way sets, 200 concurrent flows of a
/// class (issue #16's load) spread over 128 sets (1.6 per set on average) share a bucket only when
/// 9 of them hash into one set (≈ 0.4 % of runs); more buckets cost memory in every connection (one
/// bucket is ≈ 80 B) and a longer overflow scan. 1,024 is also [`MAX_QUEUE_PACKETS`]: every queued
/// packet can have a bucket of its own.
pub const FLOW_BUCKETS: usize = 1_024;

/// Buckets per set (CAKE's 8-way set-associative hashing): the probes per enqueue.
pub const SET_WAYS: usize = 8;

/// The DRR quantum: bytes a flow may send per round. One Ethernet frame, as fq_codel's default:
/// a sparse flow waits at most one quantum per active flow behind the others, and a round over
/// the 64 KiB GSO super-packets of bulk flows still takes turns per full-size packet's worth.
pub const QUANTUM_BYTES: u32 = 1_514;

/// Most packets one overflow scan drops from the fattest flow (fq_codel's batch drop), besides the
/// "at most half its backlog" limit.
pub const OVERFLOW_BATCH_PACKETS: usize = 64;

/// No slot / no flow.
const NIL: u32 = u32::MAX;

/// Per-class counters of the flow scheduler (cheap: a few integers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowStats {
    /// Flows now in the new or old list (with packets, or emptied and waiting for their turn).
    pub active_flows: usize,
    /// Most active flows seen at once.
    pub max_active_flows: usize,
    /// Packets sent (or marked) from the new-flows list: sparse flows' packets that skipped the queue.
    pub new_flow_dequeues: u64,
    /// Packets that joined a bucket held by another flow (every way of the set was taken).
    pub collisions: u64,
    /// Overflow scans for the fattest flow (each drops a batch, counted in
    /// [`ClassStats::overflow_drops`]).
    pub overflow_batches: u64,
}

/// What [`FairQueue::enqueue`] needs to know about an arriving packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Type I or Type II (Type III is refused).
    pub class: Class,
    /// Its inner flow.
    pub flow: FlowHash,
    /// Its length in bytes (what DRR and the byte bound count).
    pub len: usize,
    /// Whether the inner packet is ECN-capable ([`crate::classifier::PacketInfo::ect`]).
    pub ect: bool,
}

struct Item<T> {
    packet: T,
    len: u32,
    enqueued_at: Instant,
    ect: bool,
}

/// A slab slot: a queued packet, or a free slot; `next` links the flow's packets or the free list.
struct Slot<T> {
    item: Option<Item<T>>,
    next: u32,
}

impl<T> std::fmt::Debug for Slot<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("len", &self.item.as_ref().map(|i| i.len))
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}

/// Which list a flow is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    /// Idle: no packets, in no list, its bucket free for any flow of its set.
    Idle,
    New,
    Old,
}

/// One flow bucket.
#[derive(Debug, Clone, Copy)]
struct Flow {
    /// First and last slot of its packets (NIL when empty).
    head: u32,
    tail: u32,
    /// Next flow in its list.
    next: u32,
    /// The hash of the flow that holds it.
    tag: u32,
    /// DRR deficit in bytes.
    deficit: i32,
    list: List,
    codel: Codel,
}

impl Flow {
    const EMPTY: Flow = Flow {
        head: NIL,
        tail: NIL,
        next: NIL,
        tag: 0,
        deficit: 0,
        list: List::Idle,
        codel: Codel::RESET,
    };
}

#[derive(Debug, Clone, Copy)]
struct ListHead {
    head: u32,
    tail: u32,
}

impl ListHead {
    const EMPTY: ListHead = ListHead {
        head: NIL,
        tail: NIL,
    };
}

/// One class's flow queues.
#[derive(Debug)]
struct FqClass<T> {
    /// [`MAX_QUEUE_PACKETS`] slots once the class saw a packet, empty before.
    slots: Vec<Slot<T>>,
    /// Free slots, linked through `next`.
    free: u32,
    /// [`FLOW_BUCKETS`] flows once the class saw a packet.
    flows: Vec<Flow>,
    /// Bytes queued per flow (apart from `flows`, for a cache-friendly fattest-flow scan).
    backlog: Vec<u32>,
    /// Bytes queued per flow behind its head packet (the fattest flow's measure).
    behind_head: Vec<u32>,
    new_flows: ListHead,
    old_flows: ListHead,
    packets: usize,
    bytes: usize,
    stats: ClassStats,
    flow_stats: FlowStats,
    /// Sojourn times of the packets handed out to send (sent or CE-marked).
    sojourn: SojournHistogram,
}

/// A bounded two-class strict-priority queue with per-flow fair queueing and CoDel per flow inside
/// each class, for one connection. See the module documentation.
///
/// Worst-case memory per class in use: [`MAX_QUEUE_BYTES`] of packets, plus [`MAX_QUEUE_PACKETS`]
/// slots (`size_of::<T>()` + 32 B each; 80 KiB with the gateway's 48-byte `QueuedPacket`) and
/// [`FLOW_BUCKETS`] buckets (≤ 72 B + 8 B of counters each, 80 KiB). A class's bookkeeping is
/// allocated on its first packet, so a connection that carries one class (every gateway
/// connection) pays ≈ 160 KiB once: the largest config (14 remotes × 16 groups × 2 classes = 448
/// connections) ≈ 70 MiB.
#[derive(Debug)]
pub struct FairQueue<T> {
    type1: FqClass<T>,
    type2: FqClass<T>,
    aqm: AqmConfig,
}

impl<T> FqClass<T> {
    fn new() -> Self {
        FqClass {
            slots: Vec::new(),
            free: NIL,
            flows: Vec::new(),
            backlog: Vec::new(),
            behind_head: Vec::new(),
            new_flows: ListHead::EMPTY,
            old_flows: ListHead::EMPTY,
            packets: 0,
            bytes: 0,
            stats: ClassStats::default(),
            flow_stats: FlowStats::default(),
            sojourn: SojournHistogram::default(),
        }
    }

    /// Allocates the slab and the buckets, once.
    fn allocate(&mut self) {
        if !self.slots.is_empty() {
            return;
        }
        self.slots = (1..=MAX_QUEUE_PACKETS)
            .map(|next| Slot {
                item: None,
                next: if next < MAX_QUEUE_PACKETS {
                    next as u32
                } else {
                    NIL
                },
            })
            .collect();
        self.free = 0;
        self.flows = vec![Flow::EMPTY; FLOW_BUCKETS];
        self.backlog = vec![0; FLOW_BUCKETS];
        self.behind_head = vec![0; FLOW_BUCKETS];
    }

    fn flow(&mut self, f: u32) -> Option<&mut Flow> {
        self.flows.get_mut(f as usize)
    }

    fn list(&mut self, which: List) -> Option<&mut ListHead> {
        match which {
            List::New => Some(&mut self.new_flows),
            List::Old => Some(&mut self.old_flows),
            List::Idle => None,
        }
    }

    /// Appends flow `f` (in no list) to list `which`.
    fn push_tail(&mut self, which: List, f: u32) {
        let tail = match self.list(which) {
            Some(l) => l.tail,
            None => return,
        };
        if let Some(t) = self.flow(tail) {
            t.next = f;
        }
        if let Some(l) = self.list(which) {
            if l.head == NIL {
                l.head = f;
            }
            l.tail = f;
        }
        if let Some(flow) = self.flow(f) {
            flow.next = NIL;
            flow.list = which;
        }
    }

    /// Removes the head flow of list `which` (the flow being served).
    fn pop_head(&mut self, which: List) {
        let head = match self.list(which) {
            Some(l) => l.head,
            None => return,
        };
        let next = self.flow(head).map_or(NIL, |f| {
            let n = f.next;
            f.next = NIL;
            f.list = List::Idle;
            n
        });
        if let Some(l) = self.list(which) {
            l.head = next;
            if next == NIL {
                l.tail = NIL;
            }
        }
    }

    /// The bucket of flow `h` (see the module documentation); claims an idle one for a new flow.
    fn bucket(&mut self, h: FlowHash) -> u32 {
        let sets = (FLOW_BUCKETS / SET_WAYS) as u64;
        // Multiply-shift: the set from the hash's high bits, the collision way from its low bits.
        let set = ((u64::from(h.0) * sets) >> 32) as usize * SET_WAYS;
        let ways = set..set + SET_WAYS;
        let Some(flows) = self.flows.get(ways.clone()) else {
            return set as u32;
        };
        let (mut own_idle, mut idle, mut empty) = (None, None, None);
        for (i, f) in ways.zip(flows) {
            if f.tag == h.0 {
                if f.list != List::Idle {
                    return i as u32;
                }
                own_idle = Some(i);
            } else if f.list == List::Idle {
                idle = idle.or(Some(i));
            } else if f.head == NIL {
                empty = empty.or(Some(i));
            }
        }
        if let Some(i) = own_idle {
            // Its own idle bucket: keep the CoDel memory (RFC 8289's re-entry rule).
            return i as u32;
        }
        // Else an idle bucket; else one whose flow has no packets left and waits in a list for its
        // turn (it takes the bucket's place in that list): no packet ever shares a bucket with
        // another flow's while one of the set has none queued.
        if let Some(i) = idle.or(empty) {
            if let Some(f) = self.flow(i as u32) {
                f.tag = h.0;
                f.codel = Codel::RESET;
            }
            return i as u32;
        }
        // Every way holds another flow's packets: share one, the same one for this flow's later
        // packets while the set stays full (so its packets stay in order).
        self.flow_stats.collisions += 1;
        (set + h.0 as usize % SET_WAYS) as u32
    }

    /// Takes the head packet of flow `f`.
    fn pop_packet(&mut self, f: u32) -> Option<Item<T>> {
        let head = self.flow(f)?.head;
        let slot = self.slots.get_mut(head as usize)?;
        let item = slot.item.take()?;
        let next = slot.next;
        slot.next = self.free;
        self.free = head;
        if let Some(flow) = self.flow(f) {
            flow.head = next;
            if next == NIL {
                flow.tail = NIL;
            }
        }
        if let Some(b) = self.backlog.get_mut(f as usize) {
            *b = b.saturating_sub(item.len);
        }
        let next_len = self
            .slots
            .get(next as usize)
            .and_then(|s| s.item.as_ref())
            .map_or(0, |i| i.len);
        if let Some(b) = self.behind_head.get_mut(f as usize) {
            *b = b.saturating_sub(next_len);
        }
        self.packets = self.packets.saturating_sub(1);
        self.bytes = self.bytes.saturating_sub(item.len as usize);
        Some(item)
    }

    /// Appends a packet to flow `f`; `false` when no slot is free (the caller made room first).
    fn push_packet(&mut self, f: u32, item: Item<T>) -> Result<(), Item<T>> {
        let s = self.free;
        let Some(slot) = self.slots.get_mut(s as usize) else {
            return Err(item);
        };
        let len = item.len;
        self.free = slot.next;
        slot.next = NIL;
        slot.item = Some(item);
        let tail = match self.flow(f) {
            Some(flow) => {
                let t = flow.tail;
                flow.tail = s;
                if flow.head == NIL {
                    flow.head = s;
                }
                t
            }
            None => NIL,
        };
        if let Some(t) = self.slots.get_mut(tail as usize) {
            t.next = s;
            if let Some(b) = self.behind_head.get_mut(f as usize) {
                *b = b.saturating_add(len);
            }
        }
        if let Some(b) = self.backlog.get_mut(f as usize) {
            *b = b.saturating_add(len);
        }
        self.packets += 1;
        self.bytes += len as usize;
        Ok(())
    }

    /// Drops a batch from the head of the fattest flow: the most bytes queued behind its head
    /// packet; when no flow holds more than one packet, the most bytes; when every queued packet is
    /// empty, any flow with packets. Returns how many were dropped (0 only when nothing is queued).
    fn drop_from_fattest(&mut self, mut dropped: impl FnMut(T)) -> usize {
        self.flow_stats.overflow_batches += 1;
        let fattest_by = |v: &[u32]| {
            v.iter()
                .enumerate()
                .max_by_key(|(_, b)| **b)
                .filter(|(_, b)| **b > 0)
                .map(|(i, _)| i as u32)
        };
        let mut fattest = fattest_by(&self.behind_head)
            .or_else(|| fattest_by(&self.backlog))
            .unwrap_or(NIL);
        if self
            .flows
            .get(fattest as usize)
            .is_none_or(|f| f.head == NIL)
        {
            fattest = self
                .flows
                .iter()
                .position(|f| f.head != NIL)
                .map_or(NIL, |i| i as u32);
        }
        let half = self.backlog.get(fattest as usize).map_or(0, |b| b / 2);
        let (mut n, mut bytes) = (0, 0u32);
        while n < OVERFLOW_BATCH_PACKETS && (n == 0 || bytes < half) {
            let Some(item) = self.pop_packet(fattest) else {
                break;
            };
            n += 1;
            bytes = bytes.saturating_add(item.len);
            self.stats.overflow_drops += 1;
            dropped(item.packet);
        }
        n
    }

    fn enqueue(
        &mut self,
        now: Instant,
        meta: Arrival,
        packet: T,
        mut dropped: impl FnMut(T, DropReason),
    ) -> Result<(), (T, DropReason)> {
        let Arrival { flow, len, ect, .. } = meta;
        if len > MAX_QUEUE_BYTES {
            self.stats.tail_drops += 1;
            return Err((packet, DropReason::QueueFullBytes));
        }
        self.allocate();
        let f = self.bucket(flow);
        while self.packets >= MAX_QUEUE_PACKETS || self.bytes + len > MAX_QUEUE_BYTES {
            let reason = if self.packets >= MAX_QUEUE_PACKETS {
                DropReason::QueueFullPackets
            } else {
                DropReason::QueueFullBytes
            };
            if self.drop_from_fattest(|p| dropped(p, reason)) == 0 {
                break;
            }
        }
        let item = Item {
            packet,
            len: len as u32,
            enqueued_at: now,
            ect,
        };
        if let Err(item) = self.push_packet(f, item) {
            // Unreachable: a slot is free after making room (the slab holds MAX_QUEUE_PACKETS).
            self.stats.tail_drops += 1;
            return Err((item.packet, DropReason::QueueFullPackets));
        }
        self.stats.enqueued += 1;
        if self
            .flows
            .get(f as usize)
            .is_some_and(|x| x.list == List::Idle)
        {
            if let Some(x) = self.flow(f) {
                x.deficit = QUANTUM_BYTES as i32;
            }
            self.push_tail(List::New, f);
            self.flow_stats.active_flows += 1;
            self.flow_stats.max_active_flows = self
                .flow_stats
                .max_active_flows
                .max(self.flow_stats.active_flows);
        }
        Ok(())
    }

    /// The class ran empty: every listed flow becomes idle. RFC 8290 would get there by rotating
    /// each flow until its deficit is positive and then dropping it from the lists as empty (up to
    /// 44 rotations per flow after a 64 KiB packet); the outcome is the same (an idle flow re-enters
    /// with one quantum), at one step per listed flow, i.e. O(1) per packet of the busy period.
    fn all_idle(&mut self) {
        for which in [List::New, List::Old] {
            while let Some(f) = self.list(which).map(|l| l.head).filter(|&f| f != NIL) {
                if let Some(flow) = self.flow(f) {
                    flow.codel.on_empty();
                }
                self.pop_head(which);
            }
        }
        self.flow_stats.active_flows = 0;
    }

    /// Every listed flow was just rotated in debt (a full round with no send): grants the rounds
    /// in which still no flow could send to all of them at once, so that a round of 64 KiB packets
    /// costs O(flows), not 44 rotations per flow. Same outcome as rotating (each flow gets one
    /// quantum per round, in list order).
    fn skip_rounds(&mut self) {
        let q = i64::from(QUANTUM_BYTES);
        let mut rounds = i64::MAX;
        let mut f = self.old_flows.head;
        while let Some(flow) = self.flows.get(f as usize) {
            let d = i64::from(flow.deficit);
            rounds = rounds.min(if d > 0 { 0 } else { (q - d) / q });
            f = flow.next;
        }
        if rounds < 2 || rounds == i64::MAX {
            return;
        }
        let add = ((rounds - 1) * q) as i32;
        let mut f = self.old_flows.head;
        while let Some(flow) = self.flows.get_mut(f as usize) {
            flow.deficit = flow.deficit.saturating_add(add);
            f = flow.next;
        }
    }

    /// One DRR + CoDel step (RFC 8290 §4.2-4.3): the next packet of this class and its verdict.
    fn poll(&mut self, now: Instant, aqm: &AqmConfig) -> Option<(T, Verdict, bool)> {
        if self.packets == 0 {
            self.all_idle();
            return None;
        }
        // Consecutive rotations of flows in debt, without a send or a flow leaving the lists.
        let mut in_debt = 0usize;
        loop {
            let (which, f) = if self.new_flows.head != NIL {
                (List::New, self.new_flows.head)
            } else if self.old_flows.head != NIL {
                (List::Old, self.old_flows.head)
            } else {
                return None;
            };
            let only_flow = which == List::Old && self.old_flows.tail == f;
            let flow = self.flow(f)?;
            if flow.deficit <= 0 {
                let q = QUANTUM_BYTES as i32;
                if only_flow {
                    // Nobody to take turns with: grant all the rounds it needs at once.
                    flow.deficit += q * ((q - flow.deficit) / q);
                    continue;
                }
                flow.deficit += q;
                self.pop_head(which);
                self.push_tail(List::Old, f);
                in_debt += 1;
                if in_debt >= self.flow_stats.active_flows {
                    self.skip_rounds();
                    in_debt = 0;
                }
                continue;
            }
            let Some(item) = self.pop_packet(f) else {
                in_debt = 0;
                let flow = self.flow(f)?;
                flow.codel.on_empty();
                self.pop_head(which);
                if which == List::New && self.old_flows.head != NIL {
                    self.push_tail(List::Old, f);
                } else {
                    self.flow_stats.active_flows = self.flow_stats.active_flows.saturating_sub(1);
                }
                continue;
            };
            let sojourn = now.saturating_duration_since(item.enqueued_at);
            // RFC 8289's "not while less than one packet is queued", per flow: a flow with at
            // most one more packet like this one queued is not building the queue (its packets
            // wait for the other flows' turns), so CoDel does not signal it.
            let backlog = self.backlog.get(f as usize).map_or(0, |b| *b as usize);
            let flow = self.flow(f)?;
            let verdict = flow
                .codel
                .on_dequeue(now, sojourn, backlog, item.len as usize, aqm);
            let sent = verdict == Verdict::Send || (aqm.ecn && item.ect);
            if sent {
                flow.deficit = flow.deficit.saturating_sub(item.len as i32);
                self.sojourn.record(sojourn);
                if which == List::New {
                    self.flow_stats.new_flow_dequeues += 1;
                }
            }
            return Some((item.packet, verdict, item.ect));
        }
    }
}

impl<T> FairQueue<T> {
    /// An empty queue. Each class allocates its slots and buckets on its first packet.
    pub fn new(aqm: AqmConfig) -> Self {
        FairQueue {
            type1: FqClass::new(),
            type2: FqClass::new(),
            aqm,
        }
    }

    fn class(&self, class: Class) -> Option<&FqClass<T>> {
        match class {
            Class::TypeI => Some(&self.type1),
            Class::TypeII => Some(&self.type2),
            Class::TypeIII => None,
        }
    }

    /// Queues `packet`, described by `meta`. At the bounds, packets queued earlier are dropped from
    /// the fattest flow and handed to `dropped` (count them, recycle the buffers); the new packet is
    /// queued. An `Err` hands back a packet that cannot be queued at all (Type III, or larger than
    /// [`MAX_QUEUE_BYTES`] by itself).
    pub fn enqueue(
        &mut self,
        now: Instant,
        meta: Arrival,
        packet: T,
        mut dropped: impl FnMut(T, Class, DropReason),
    ) -> Result<(), (T, DropReason)> {
        let class = meta.class;
        let q = match class {
            Class::TypeI => &mut self.type1,
            Class::TypeII => &mut self.type2,
            Class::TypeIII => return Err((packet, DropReason::NotTunnelled)),
        };
        q.enqueue(now, meta, packet, |p, r| dropped(p, class, r))
    }

    /// The next packet to send, Type I strictly first; `None` when both classes are empty.
    pub fn poll_dequeue(&mut self, now: Instant) -> Option<Dequeued<T>> {
        let aqm = self.aqm;
        for (class, q) in [
            (Class::TypeI, &mut self.type1),
            (Class::TypeII, &mut self.type2),
        ] {
            if let Some((packet, verdict, ect)) = q.poll(now, &aqm) {
                return Some(match verdict {
                    Verdict::Send => {
                        q.stats.sent += 1;
                        Dequeued::Send(packet, class)
                    }
                    Verdict::Signal if aqm.ecn && ect => {
                        q.stats.sent += 1;
                        q.stats.marked += 1;
                        Dequeued::Mark(packet, class)
                    }
                    Verdict::Signal => {
                        q.stats.codel_drops += 1;
                        Dequeued::Drop(packet, class, DropReason::Codel)
                    }
                });
            }
        }
        None
    }

    /// Packets queued in `class`.
    pub fn len(&self, class: Class) -> usize {
        self.class(class).map_or(0, |q| q.packets)
    }

    /// Bytes queued in `class`.
    pub fn bytes(&self, class: Class) -> usize {
        self.class(class).map_or(0, |q| q.bytes)
    }

    /// Whether both classes are empty.
    pub fn is_empty(&self) -> bool {
        self.type1.packets == 0 && self.type2.packets == 0
    }

    /// The counters of `class` (zero for Type III).
    pub fn stats(&self, class: Class) -> ClassStats {
        self.class(class).map_or(ClassStats::default(), |q| q.stats)
    }

    /// Sojourn times (enqueue to dequeue) of the packets of `class` handed out to send (sent or
    /// CE-marked; CoDel's drops are counted in [`ClassStats::codel_drops`]). Empty for Type III.
    pub fn sojourn(&self, class: Class) -> SojournHistogram {
        self.class(class)
            .map_or(SojournHistogram::default(), |q| q.sojourn)
    }

    /// The flow scheduler's counters of `class` (zero for Type III).
    pub fn flow_stats(&self, class: Class) -> FlowStats {
        self.class(class)
            .map_or(FlowStats::default(), |q| q.flow_stats)
    }
}

#[cfg(test)]
mod tests;
