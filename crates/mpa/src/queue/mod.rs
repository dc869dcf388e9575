//! Per-connection packet queues: strict priority (Type I before Type II, seed 000 §II-A "the low-priority
//! traffic will not block the transmission of high-priority traffic at any time"), and inside each class
//! per-flow fair queueing with a CoDel sojourn-time AQM per flow (FQ-CoDel, RFC 8290; CoDel, RFC 8289).
//!
//! Why: against TCP-in-TCP meltdown (issue #4) inner TCP must see congestion (a drop or a CE mark) as
//! soon as packets wait too long in front of the MPTCP socket; and under load (issue #16) an interactive
//! flow must not wait behind, nor pay the drops of, bulk flows of its own class. Measured on the single
//! FIFO per class ([`PriorityQueue`]): a 172 B / 20 ms voice stream next to 4 bulk TCP flows lost
//! 18–25 % of its packets to the shared queue's tail drops (`DESIGN.md` §8).
//!
//! Two queues live here, with one call pattern:
//! - [`FairQueue`] (used by every outbound connection, [`crate::gateway::ConnCore`]): per class a fixed
//!   table of [`FLOW_BUCKETS`] flow queues keyed by a [`FlowHash`] of the inner 5-tuple, served by deficit
//!   round robin with a byte quantum ([`QUANTUM_BYTES`]); flows that were idle are served first (the
//!   new-flows list); CoDel runs per flow; at the bounds the fattest flow loses packets from its head,
//!   never the arriving packet of a sparse flow. See `docs/mmsg.md` "Per-flow fair queueing".
//! - [`PriorityQueue`]: the former single CoDel FIFO per class, kept as the reference the fair queue is
//!   measured against (`benches/benches/mpa_queue.rs`, `tests/fair_queue.rs`) and for the CoDel
//!   simulation tests.
//!
//! Both are generic over the caller's packet buffer `T` (e.g. a `BytesMut` with room for the frame
//! header) and never allocate per packet: all storage is allocated by `new`. Dropped packets are handed
//! back so the caller can count them and reuse their buffers.
//!
//! Call order: `enqueue` as packets arrive (an `Err` hands the packet back), `poll_dequeue` whenever the
//! connection's socket can take more (loop until `None` or the socket is full): [`Dequeued::Send`] and
//! [`Dequeued::Mark`] go out (for `Mark`, first set CE with [`crate::classifier::mark_ce`]),
//! [`Dequeued::Drop`] is counted and recycled. Time is always a parameter.

mod codel;
mod fifo;
mod fq;

use std::hash::{BuildHasher, Hash, Hasher};
use std::time::Duration;

use crate::Class;

pub use fifo::PriorityQueue;
pub use fq::{
    Arrival, FairQueue, FlowStats, FLOW_BUCKETS, OVERFLOW_BATCH_PACKETS, QUANTUM_BYTES, SET_WAYS,
};

/// Most packets queued per class. With 1,500-byte packets this is reached only together with
/// [`MAX_QUEUE_BYTES`] (≈ 350 packets); the count bounds queues of tiny packets (ACKs, VoIP), whose
/// bookkeeping (a slot of ≈ 64 B with a `BytesMut`) costs 64 KiB at most.
pub const MAX_QUEUE_PACKETS: usize = 1_024;

/// Most payload bytes queued per class. 512 KiB is ~100 ms at 40 Mbit/s (the paper's WAN port speed,
/// i.e. one CoDel interval, beyond which CoDel has long been dropping) and ~3.5 ms at 1.2 Gbit/s, or
/// eight 64 KiB GSO super-packets. Worst-case memory per queue: 2 classes × 512 KiB = **1 MiB** of
/// packets (plus the bookkeeping, [`FairQueue`]); with one queue per (remote branch, path group,
/// class) connection, the 2×2 testbed (1 remote × 2 groups × 2 classes) needs 4 MiB, the largest
/// config (14 remotes × 16 groups × 2 classes) 448 MiB.
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
    /// The class holds [`MAX_QUEUE_PACKETS`] packets: tail drop ([`PriorityQueue`]), or a head drop
    /// from the fattest flow ([`FairQueue`]).
    QueueFullPackets,
    /// The class would exceed [`MAX_QUEUE_BYTES`]: tail drop ([`PriorityQueue`]), or a head drop from
    /// the fattest flow ([`FairQueue`]; also the arriving packet itself when it alone is larger
    /// than the bound).
    QueueFullBytes,
    /// CoDel: the sojourn time stayed above target for an interval.
    Codel,
    /// Type III is never queued for a tunnel.
    NotTunnelled,
}

/// The outcome of one `poll_dequeue`.
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
    /// Arriving packets refused at the bounds ([`PriorityQueue`]'s tail drop; in a [`FairQueue`]
    /// only a packet larger than [`MAX_QUEUE_BYTES`] by itself).
    pub tail_drops: u64,
    /// [`FairQueue`]: queued packets dropped from the head of the fattest flow to make room at the
    /// bounds.
    pub overflow_drops: u64,
}

/// A hash of an inner packet's flow (5-tuple; addresses and protocol only when the protocol has no
/// ports), keyed per gateway ([`FlowHasher`]); [`FairQueue`] picks the flow's bucket with it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowHash(pub u32);

/// Computes [`FlowHash`]es with a secret per-gateway key, so that hosts behind the gateway cannot
/// choose 5-tuples that land in one bucket (fq_codel's hash perturbation, RFC 8290 §5.3). SipHash-1-3
/// (std's `DefaultHasher`) over the key and the flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowHasher {
    key: [u64; 2],
}

impl FlowHasher {
    /// A hasher with a random key (std's per-process random `RandomState` keys, drawn once).
    pub fn random() -> Self {
        let s = std::collections::hash_map::RandomState::new();
        FlowHasher {
            key: [s.hash_one(0x6d6d_7331u32), s.hash_one(0x6d6d_7332u32)],
        }
    }

    /// A hasher with a fixed key (tests, reproducible simulations).
    pub fn with_key(key: [u64; 2]) -> Self {
        FlowHasher { key }
    }

    /// The hash of `flow`.
    pub fn hash(&self, flow: &impl Hash) -> FlowHash {
        let mut h = std::hash::DefaultHasher::new();
        h.write_u64(self.key[0]);
        h.write_u64(self.key[1]);
        flow.hash(&mut h);
        let x = h.finish();
        // Fold to 32 bits; both halves depend on every input bit.
        FlowHash((x ^ (x >> 32)) as u32)
    }
}
