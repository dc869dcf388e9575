//! What the queues share: their bounds, the AQM settings, the outcome of a dequeue and the per-class
//! counters.

use std::time::Duration;

use crate::Class;

/// Most packets queued per class. With 1,500-byte packets this is reached only together with
/// [`MAX_QUEUE_BYTES`] (≈ 350 packets); the count bounds queues of tiny packets (ACKs, VoIP), whose
/// bookkeeping (a slot of ≈ 64 B with a `BytesMut`) costs 64 KiB at most.
pub const MAX_QUEUE_PACKETS: usize = 1_024;

/// Most payload bytes queued per class. 512 KiB is ~100 ms at 40 Mbit/s (the paper's WAN port speed,
/// i.e. one CoDel interval, beyond which CoDel has long been dropping) and ~3.5 ms at 1.2 Gbit/s, or
/// eight 64 KiB GSO super-packets. Worst-case memory per queue: 2 classes × 512 KiB = **1 MiB** of
/// packets (plus the bookkeeping, [`FairQueue`](super::FairQueue)); with one queue per (remote branch, path group,
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
    /// The class holds [`MAX_QUEUE_PACKETS`] packets: tail drop ([`PriorityQueue`](super::PriorityQueue)), or a head drop
    /// from the fattest flow ([`FairQueue`](super::FairQueue)).
    QueueFullPackets,
    /// The class would exceed [`MAX_QUEUE_BYTES`]: tail drop ([`PriorityQueue`](super::PriorityQueue)), or a head drop from
    /// the fattest flow ([`FairQueue`](super::FairQueue); also the arriving packet itself when it alone is larger
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
    /// Arriving packets refused at the bounds ([`PriorityQueue`](super::PriorityQueue)'s tail drop; in a [`FairQueue`](super::FairQueue)
    /// only a packet larger than [`MAX_QUEUE_BYTES`] by itself).
    pub tail_drops: u64,
    /// [`FairQueue`](super::FairQueue): queued packets dropped from the head of the fattest flow to make room at the
    /// bounds.
    pub overflow_drops: u64,
}
