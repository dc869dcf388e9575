//! The multipath agent (MPA) and traffic classifier (TC) of an MMS gateway, as a pure core.
//!
//! Seed 000 §II-B and §III-A: a branch gateway classifies packets read from its TUN device, picks the
//! destination branch and a path group per flow, frames each packet and hands it to the MPTCP
//! connection of (destination branch, path group, class). This crate holds that logic with no IO, no
//! clock reads and no allocation per packet on the hot path; `crates/mmsg-dataplane` (binary `mmsg`)
//! owns TUN, sockets and netlink and drives it.
//!
//! Modules, one per concept of the paper (see `docs/mpa.md` for the full map and call order):
//! - [`agent`]: the MPA's per-packet decision (TC + flow table + schedulers) behind one call.
//! - [`autorate`]: the automatic egress rate of a shaped WAN port (bloat lowers it, a limiting
//!   shaper raises it).
//! - [`config`]: the static gateway configuration (TOML) and its validation.
//! - [`classifier`]: the TC: Type I / II / III and the destination branch of an inner IP packet.
//! - [`flow_table`]: 5-tuple flows, so a flow keeps its path group (no reordering).
//! - [`path_group`]: the path groups towards one remote branch, their weights, state and rates.
//! - [`scheduler`]: new-flow to path-group selection (RR, smooth WRR, measured throughput).
//! - [`queue`]: per-connection strict-priority queues, per-flow fair queueing and a CoDel sojourn-time
//!   AQM per flow (FQ-CoDel).
//! - [`resequencer`]: the receiver's per-flow resequencing buffer for striped flows (seed 001 Alg. 1).
//! - [`framing`]: the connection hello and the tunnel frame codec (`docs/wire.md`).
//! - [`gateway`]: the whole per-packet logic of one gateway, sans-IO (TUN side, connections,
//!   delivery), composing the modules below; the driver's one entry point.
//! - [`keepalive`]: connection liveness timers (keepalive frames, dead connections).
//! - [`subflow_health`]: per-subflow stall detection and the path hold-down (fast failover).
//! - [`write_size`]: how many bytes one write to a tunnel connection carries (unequal subflows).
//! - [`conn_report`]: what the gateway measures on its connections, per path group (window,
//!   in-flight and queued bytes, the busiest connection's report, measured group rates).
//! - [`gwchan`]: the gateway ⇄ controller channel: messages and their length-prefixed JSON codec.
//! - [`ip`]: IP protocol facts shared by the classifier and the config's rule validation.
//! - [`uplink_lb`]: per-flow uplink selection for external (Type III) traffic (seed 004 §5).
//! - [`virtio`]: the check of a peer's `virtio_net_hdr` before its packet reaches our TUN device.
//!
//! Call order for one packet from TUN (sender side): [`agent::Agent::route`] (=
//! [`classifier::Classifier::classify`] → [`flow_table::FlowTable::assign`], which asks the
//! [`scheduler::Scheduler`] for new flows) → [`queue::FairQueue::enqueue`] →
//! [`queue::FairQueue::poll_dequeue`] → [`framing::encode_header_in_place`] → socket.
//! Receiver side: [`framing::InboundConnection::decode`] until `Ok(None)` (the hello once, then frames).
//! Per connection, [`keepalive::Liveness`] says when to send keepalives and when the peer is dead.
//! [`gateway`] ties all of this into one sans-IO core per gateway (TUN side, connections,
//! delivery); its module docs give the driver's call order and the packet path out and in.
#![forbid(unsafe_code)]

pub mod agent;
pub mod autorate;
pub mod classifier;
pub mod config;
pub mod conn_report;
pub mod flow_table;
pub mod framing;
pub mod gateway;
pub mod gwchan;
pub mod ip;
pub mod keepalive;
pub mod path_group;
pub mod queue;
pub mod resequencer;
pub mod scheduler;
pub mod slow_subflows;
pub mod subflow_health;
pub mod uplink_lb;
pub mod virtio;
pub mod wan_state;
pub mod write_size;

// The domain types live in `mms-types` (one type per idea, shared with the controller).
pub use mms_types::{BranchId, Class, PathGroupId};
