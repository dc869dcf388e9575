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
//! - [`config`]: the static gateway configuration (TOML) and its validation.
//! - [`classifier`]: the TC: Type I / II / III and the destination branch of an inner IP packet.
//! - [`flow_table`]: 5-tuple flows, so a flow keeps its path group (no reordering).
//! - [`path_group`]: the path groups towards one remote branch, their weights, state and rates.
//! - [`scheduler`]: new-flow to path-group selection (RR, smooth WRR, measured throughput).
//! - [`queue`]: per-connection strict-priority queues with a CoDel sojourn-time AQM.
//! - [`resequencer`]: the receiver's per-flow resequencing buffer for striped flows (seed 001 Alg. 1).
//! - [`framing`]: the connection hello and the tunnel frame codec (`docs/wire.md`).
//! - [`keepalive`]: connection liveness timers (keepalive frames, dead connections).
//! - [`write_size`]: how many bytes one write to a tunnel connection carries (unequal subflows).
//! - [`gwchan`]: the gateway ⇄ controller channel: messages and their length-prefixed JSON codec.
//! - [`uplink_lb`]: per-flow uplink selection for external (Type III) traffic (seed 004 §5).
//!
//! Call order for one packet from TUN (sender side): [`agent::Agent::route`] (=
//! [`classifier::Classifier::classify`] → [`flow_table::FlowTable::assign`], which asks the
//! [`scheduler::Scheduler`] for new flows) → [`queue::PriorityQueue::enqueue`] →
//! [`queue::PriorityQueue::poll_dequeue`] → [`framing::encode_header_in_place`] → socket.
//! Receiver side: [`framing::InboundConnection::decode`] until `Ok(None)` (the hello once, then frames).
//! Per connection, [`keepalive::Liveness`] says when to send keepalives and when the peer is dead.
#![forbid(unsafe_code)]

use std::fmt;

pub mod agent;
pub mod classifier;
pub mod config;
pub mod flow_table;
pub mod framing;
pub mod gwchan;
pub mod keepalive;
pub mod path_group;
pub mod queue;
pub mod resequencer;
pub mod scheduler;
pub mod uplink_lb;
pub mod write_size;

/// The TCP port on which the MPA of branch `branch` listens for path group `group` (DESIGN §3.1:
/// `0xB00G`). Returns `None` when `branch` is not in 1..=15 or `group` not in 0..=15.
pub fn mpa_port(branch: u8, group: u8) -> Option<u16> {
    if !(1..=15).contains(&branch) || group > 15 {
        return None;
    }
    Some((u16::from(branch) << 12) | u16::from(group))
}

/// A branch id, 1..=15 (one nibble of the outer TCP port, seed 000 §III-A; 0 is never a branch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BranchId(u8);

impl BranchId {
    /// The smallest valid branch id.
    pub const MIN: u8 = 1;
    /// The largest valid branch id (one nibble).
    pub const MAX: u8 = 15;

    /// `Some` when `id` is in 1..=15.
    pub fn new(id: u8) -> Option<Self> {
        (Self::MIN..=Self::MAX).contains(&id).then_some(Self(id))
    }

    /// The raw id.
    pub fn get(self) -> u8 {
        self.0
    }
}

impl fmt::Display for BranchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A path group id, 0..=15 (the last nibble of the outer TCP port, seed 000 §III-A).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PathGroupId(u8);

impl PathGroupId {
    /// The largest valid path group id (one nibble).
    pub const MAX: u8 = 15;

    /// `Some` when `id` is in 0..=15.
    pub fn new(id: u8) -> Option<Self> {
        (id <= Self::MAX).then_some(Self(id))
    }

    /// The raw id.
    pub fn get(self) -> u8 {
        self.0
    }
}

impl fmt::Display for PathGroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The traffic class of seed 000 §II-A, highest priority first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// Type I: internal inter-branch traffic of the highest priority (prefers leased lines).
    TypeI,
    /// Type II: internal inter-branch traffic, normal priority.
    TypeII,
    /// Type III: external traffic. Never tunnelled: routed straight out a WAN port, never enters TUN.
    TypeIII,
}

impl Class {
    /// The class byte on the wire (hello and frame header): Type I = 0x01, Type II = 0x02.
    /// Type III never travels in a tunnel and has no wire value.
    pub fn wire(self) -> Option<u8> {
        match self {
            Class::TypeI => Some(0x01),
            Class::TypeII => Some(0x02),
            Class::TypeIII => None,
        }
    }

    /// The tunnelled class of a wire byte, `None` for anything but 0x01 and 0x02.
    pub fn from_wire(b: u8) -> Option<Self> {
        match b {
            0x01 => Some(Class::TypeI),
            0x02 => Some(Class::TypeII),
            _ => None,
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Class::TypeI => "type1",
            Class::TypeII => "type2",
            Class::TypeIII => "type3",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_plan_matches_design() {
        assert_eq!(mpa_port(2, 4), Some(0x2004));
        assert_eq!(mpa_port(15, 15), Some(0xF00F));
        assert_eq!(mpa_port(0, 1), None);
        assert_eq!(mpa_port(16, 1), None);
        assert_eq!(mpa_port(1, 16), None);
    }

    #[test]
    fn ids_are_nibbles() {
        assert!(BranchId::new(0).is_none());
        assert_eq!(BranchId::new(15).map(BranchId::get), Some(15));
        assert!(BranchId::new(16).is_none());
        assert_eq!(PathGroupId::new(0).map(PathGroupId::get), Some(0));
        assert!(PathGroupId::new(16).is_none());
    }

    #[test]
    fn class_wire_values() {
        for c in [Class::TypeI, Class::TypeII] {
            assert_eq!(c.wire().and_then(Class::from_wire), Some(c));
        }
        assert_eq!(Class::TypeIII.wire(), None);
        assert_eq!(Class::from_wire(0), None);
        assert_eq!(Class::from_wire(3), None);
    }
}
