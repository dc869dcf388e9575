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
//! - [`SojournHistogram`]: how long the packets each class hands out waited (enqueue to dequeue),
//!   for `mmsg`'s `mms_gateway_queue_sojourn_seconds`.
//! - [`inflight`]: how much of the queue a connection may hand to its MPTCP socket at a time (a budget
//!   in time, from the subflows' delivery rate and minimum RTT), so that the standing queue stays here;
//!   [`min_rtt`]: that minimum RTT, re-measured when a path's RTT rose under a live subflow.
//!
//! Call order: `enqueue` as packets arrive (an `Err` hands the packet back), `poll_dequeue` whenever the
//! connection's socket can take more (loop until `None` or the socket is full): [`Dequeued::Send`] and
//! [`Dequeued::Mark`] go out (for `Mark`, first set CE with [`crate::classifier::mark_ce`]),
//! [`Dequeued::Drop`] is counted and recycled. Time is always a parameter.

mod aqm;
mod codel;
mod fifo;
mod flow_hash;
mod fq;
pub mod inflight;
pub mod min_rtt;
pub mod pacing;
mod sojourn;
pub mod stall;

pub use aqm::{
    AqmConfig, ClassStats, Dequeued, DropReason, DEFAULT_INTERVAL, DEFAULT_TARGET, MAX_QUEUE_BYTES,
    MAX_QUEUE_PACKETS,
};
pub use fifo::PriorityQueue;
pub use flow_hash::{FlowHash, FlowHasher};
pub use fq::{
    Arrival, FairQueue, FlowStats, FLOW_BUCKETS, OVERFLOW_BATCH_PACKETS, QUANTUM_BYTES, SET_WAYS,
};
pub use inflight::{
    path_queued, write_gate, DeliverySample, Gate, InflightBudget, Probed, SubflowQueue,
};
pub use sojourn::{SojournHistogram, SOJOURN_BOUNDS_NS, SOJOURN_BUCKETS};
