//! Asynchronous state notifications from the switch: OFPT_FLOW_REMOVED (OpenFlow 1.3.5 §7.4.2)
//! and OFPT_PORT_STATUS (§7.4.3).

use crate::error::{DecodeError, EncodeError};
use crate::macros::enum_with_unknown;
use crate::oxm::Match;
use crate::port::Port;
use crate::wire::{put_u16, put_u32, put_u64, put_zeros, Reader};

enum_with_unknown! {
    /// `ofp_flow_removed_reason`.
    pub enum FlowRemovedReason(u8) {
        /// OFPRR_IDLE_TIMEOUT.
        IdleTimeout = 0,
        /// OFPRR_HARD_TIMEOUT.
        HardTimeout = 1,
        /// OFPRR_DELETE: evicted by a DELETE flow mod.
        Delete = 2,
        /// OFPRR_GROUP_DELETE: group was removed.
        GroupDelete = 3,
    }
}

/// OFPT_FLOW_REMOVED (§7.4.2).
///
/// ```text
/// | cookie u64 | priority u16 | reason u8 | table_id u8 | duration_sec u32 | duration_nsec u32 |
/// | idle_timeout u16 | hard_timeout u16 | packet_count u64 | byte_count u64 | ofp_match |
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowRemoved {
    /// Flow cookie.
    pub cookie: u64,
    /// Priority.
    pub priority: u16,
    /// Reason.
    pub reason: FlowRemovedReason,
    /// Table.
    pub table_id: u8,
    /// Time flow was alive in seconds.
    pub duration_sec: u32,
    /// Nanoseconds beyond `duration_sec`.
    pub duration_nsec: u32,
    /// Idle timeout from the original flow mod.
    pub idle_timeout: u16,
    /// Hard timeout from the original flow mod.
    pub hard_timeout: u16,
    /// Packets.
    pub packet_count: u64,
    /// Bytes.
    pub byte_count: u64,
    /// The flow's match.
    pub match_: Match,
}

impl FlowRemoved {
    pub(super) fn body_len(&self) -> usize {
        40 + self.match_.encoded_len()
    }

    pub(super) fn encode_body(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put_u64(out, self.cookie);
        put_u16(out, self.priority);
        out.push(self.reason.into());
        out.push(self.table_id);
        put_u32(out, self.duration_sec);
        put_u32(out, self.duration_nsec);
        put_u16(out, self.idle_timeout);
        put_u16(out, self.hard_timeout);
        put_u64(out, self.packet_count);
        put_u64(out, self.byte_count);
        self.match_.encode(out)
    }

    pub(super) fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let cookie = r.u64()?;
        let priority = r.u16()?;
        let reason = r.u8()?.into();
        let table_id = r.u8()?;
        let duration_sec = r.u32()?;
        let duration_nsec = r.u32()?;
        let idle_timeout = r.u16()?;
        let hard_timeout = r.u16()?;
        let packet_count = r.u64()?;
        let byte_count = r.u64()?;
        let match_ = Match::decode(r)?;
        Ok(FlowRemoved {
            cookie,
            priority,
            reason,
            table_id,
            duration_sec,
            duration_nsec,
            idle_timeout,
            hard_timeout,
            packet_count,
            byte_count,
            match_,
        })
    }
}

enum_with_unknown! {
    /// `ofp_port_reason`.
    pub enum PortReason(u8) {
        /// OFPPR_ADD.
        Add = 0,
        /// OFPPR_DELETE.
        Delete = 1,
        /// OFPPR_MODIFY.
        Modify = 2,
    }
}

/// OFPT_PORT_STATUS (§7.4.3): `| reason u8 | pad[7] | ofp_port |`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PortStatus {
    /// What changed.
    pub reason: PortReason,
    /// The port.
    pub desc: Port,
}

impl PortStatus {
    /// Body bytes (fixed).
    pub(super) const BODY_LEN: usize = 8 + Port::LEN;

    pub(super) fn encode_body(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        out.push(self.reason.into());
        put_zeros(out, 7);
        self.desc.encode(out)
    }

    pub(super) fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let reason = r.u8()?.into();
        r.skip(7)?;
        Ok(PortStatus {
            reason,
            desc: Port::decode(r)?,
        })
    }
}
