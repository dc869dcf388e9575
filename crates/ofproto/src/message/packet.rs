//! The packet path between switch and controller: OFPT_PACKET_IN (OpenFlow 1.3.5 §7.4.1) and
//! OFPT_PACKET_OUT (§7.3.7).

use crate::action::{actions_len, decode_actions, encode_actions, Action};
use crate::error::{DecodeError, EncodeError};
use crate::macros::enum_with_unknown;
use crate::oxm::Match;
use crate::wire::{patch_len16, put_u16, put_u32, put_u64, put_zeros, Reader};

/// `OFP_NO_BUFFER`: the packet is not buffered on the switch.
pub const OFP_NO_BUFFER: u32 = 0xffff_ffff;

enum_with_unknown! {
    /// `ofp_packet_in_reason`.
    pub enum PacketInReason(u8) {
        /// OFPR_NO_MATCH: no matching flow (table-miss flow entry).
        NoMatch = 0,
        /// OFPR_ACTION: action explicitly output to controller.
        Action = 1,
        /// OFPR_INVALID_TTL: packet has invalid TTL.
        InvalidTtl = 2,
    }
}

/// OFPT_PACKET_IN (§7.4.1).
///
/// ```text
/// | buffer_id u32 | total_len u16 | reason u8 | table_id u8 | cookie u64 |
/// | ofp_match (padded) | pad[2] | ethernet frame ... |
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PacketIn {
    /// Buffer id, or OFP_NO_BUFFER.
    pub buffer_id: u32,
    /// Full length of the frame.
    pub total_len: u16,
    /// Why the packet is sent.
    pub reason: PacketInReason,
    /// Table that was looked up.
    pub table_id: u8,
    /// Cookie of the flow entry that was looked up.
    pub cookie: u64,
    /// Packet metadata.
    pub match_: Match,
    /// The frame (or its first bytes).
    pub data: Vec<u8>,
}

impl PacketIn {
    pub(super) fn body_len(&self) -> usize {
        16 + self.match_.encoded_len() + 2 + self.data.len()
    }

    pub(super) fn encode_body(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put_u32(out, self.buffer_id);
        put_u16(out, self.total_len);
        out.push(self.reason.into());
        out.push(self.table_id);
        put_u64(out, self.cookie);
        self.match_.encode(out)?;
        put_zeros(out, 2);
        out.extend_from_slice(&self.data);
        Ok(())
    }

    pub(super) fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let buffer_id = r.u32()?;
        let total_len = r.u16()?;
        let reason = r.u8()?.into();
        let table_id = r.u8()?;
        let cookie = r.u64()?;
        let match_ = Match::decode(r)?;
        r.skip(2)?;
        Ok(PacketIn {
            buffer_id,
            total_len,
            reason,
            table_id,
            cookie,
            match_,
            data: r.rest().to_vec(),
        })
    }
}

/// OFPT_PACKET_OUT (§7.3.7).
///
/// ```text
/// | buffer_id u32 | in_port u32 | actions_len u16 | pad[6] | actions | frame ... |
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PacketOut {
    /// Buffer id, or OFP_NO_BUFFER.
    pub buffer_id: u32,
    /// Ingress port for the pipeline (or OFPP_CONTROLLER).
    pub in_port: u32,
    /// Actions.
    pub actions: Vec<Action>,
    /// The frame when `buffer_id` is OFP_NO_BUFFER.
    pub data: Vec<u8>,
}

impl PacketOut {
    pub(super) fn body_len(&self) -> usize {
        16 + actions_len(&self.actions) + self.data.len()
    }

    pub(super) fn encode_body(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put_u32(out, self.buffer_id);
        put_u32(out, self.in_port);
        let at = out.len();
        put_u16(out, 0);
        put_zeros(out, 6);
        let start = out.len();
        encode_actions(&self.actions, out)?;
        let len = out.len() - start;
        patch_len16(out, at, len, "packet-out actions")?;
        out.extend_from_slice(&self.data);
        Ok(())
    }

    pub(super) fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let buffer_id = r.u32()?;
        let in_port = r.u32()?;
        let alen = usize::from(r.u16()?);
        r.skip(6)?;
        let mut ar = r.sub(alen, "packet-out actions")?;
        let actions = decode_actions(&mut ar)?;
        Ok(PacketOut {
            buffer_id,
            in_port,
            actions,
            data: r.rest().to_vec(),
        })
    }
}
