//! OFPT_FLOW_MOD (OpenFlow 1.3.5 §7.3.4.1): how the SSC installs the paper's IP-address swap
//! flows (seed 000 §III) in a gateway's OFS.

use crate::error::{DecodeError, EncodeError};
use crate::group::OFPG_ANY;
use crate::instruction::{decode_instructions, encode_instructions, Instruction};
use crate::macros::enum_with_unknown;
use crate::oxm::Match;
use crate::port::ofpp;
use crate::wire::{put_u16, put_u32, put_u64, put_zeros, Reader};

use super::packet::OFP_NO_BUFFER;

enum_with_unknown! {
    /// `ofp_flow_mod_command`.
    pub enum FlowModCommand(u8) {
        /// OFPFC_ADD.
        Add = 0,
        /// OFPFC_MODIFY.
        Modify = 1,
        /// OFPFC_MODIFY_STRICT.
        ModifyStrict = 2,
        /// OFPFC_DELETE.
        Delete = 3,
        /// OFPFC_DELETE_STRICT.
        DeleteStrict = 4,
    }
}

/// `ofp_flow_mod_flags`.
pub mod ofpff {
    /// Send flow removed message when flow expires or is deleted.
    pub const SEND_FLOW_REM: u16 = 1 << 0;
    /// Check for overlapping entries first.
    pub const CHECK_OVERLAP: u16 = 1 << 1;
    /// Reset flow packet and byte counts.
    pub const RESET_COUNTS: u16 = 1 << 2;
    /// Don't keep track of packet count.
    pub const NO_PKT_COUNTS: u16 = 1 << 3;
    /// Don't keep track of byte count.
    pub const NO_BYT_COUNTS: u16 = 1 << 4;
}

/// OFPT_FLOW_MOD (§7.3.4.1).
///
/// ```text
/// | cookie u64 | cookie_mask u64 | table_id u8 | command u8 | idle_timeout u16 |
/// | hard_timeout u16 | priority u16 | buffer_id u32 | out_port u32 | out_group u32 |
/// | flags u16 | pad[2] | ofp_match (padded) | instructions ... |
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowMod {
    /// Opaque controller-issued identifier.
    pub cookie: u64,
    /// Cookie bits that must match (modify/delete).
    pub cookie_mask: u64,
    /// Table.
    pub table_id: u8,
    /// Command.
    pub command: FlowModCommand,
    /// Idle time before discarding (seconds).
    pub idle_timeout: u16,
    /// Max time before discarding (seconds).
    pub hard_timeout: u16,
    /// Priority.
    pub priority: u16,
    /// Buffered packet to apply to, or OFP_NO_BUFFER.
    pub buffer_id: u32,
    /// For delete: require matching entries to include this output port (OFPP_ANY: no filter).
    pub out_port: u32,
    /// For delete: require matching entries to include this group (OFPG_ANY: no filter).
    pub out_group: u32,
    /// OFPFF_* bits.
    pub flags: u16,
    /// Match.
    pub match_: Match,
    /// Instructions.
    pub instructions: Vec<Instruction>,
}

impl Default for FlowMod {
    fn default() -> Self {
        FlowMod {
            cookie: 0,
            cookie_mask: 0,
            table_id: 0,
            command: FlowModCommand::Add,
            idle_timeout: 0,
            hard_timeout: 0,
            priority: 0x8000,
            buffer_id: OFP_NO_BUFFER,
            out_port: ofpp::ANY,
            out_group: OFPG_ANY,
            flags: 0,
            match_: Match::new(),
            instructions: Vec::new(),
        }
    }
}

impl FlowMod {
    pub(super) fn body_len(&self) -> usize {
        40 + self.match_.encoded_len()
            + self
                .instructions
                .iter()
                .map(Instruction::encoded_len)
                .sum::<usize>()
    }

    pub(super) fn encode_body(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put_u64(out, self.cookie);
        put_u64(out, self.cookie_mask);
        out.push(self.table_id);
        out.push(self.command.into());
        put_u16(out, self.idle_timeout);
        put_u16(out, self.hard_timeout);
        put_u16(out, self.priority);
        put_u32(out, self.buffer_id);
        put_u32(out, self.out_port);
        put_u32(out, self.out_group);
        put_u16(out, self.flags);
        put_zeros(out, 2);
        self.match_.encode(out)?;
        encode_instructions(&self.instructions, out)
    }

    pub(super) fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let cookie = r.u64()?;
        let cookie_mask = r.u64()?;
        let table_id = r.u8()?;
        let command = r.u8()?.into();
        let idle_timeout = r.u16()?;
        let hard_timeout = r.u16()?;
        let priority = r.u16()?;
        let buffer_id = r.u32()?;
        let out_port = r.u32()?;
        let out_group = r.u32()?;
        let flags = r.u16()?;
        r.skip(2)?;
        let match_ = Match::decode(r)?;
        let instructions = decode_instructions(r)?;
        Ok(FlowMod {
            cookie,
            cookie_mask,
            table_id,
            command,
            idle_timeout,
            hard_timeout,
            priority,
            buffer_id,
            out_port,
            out_group,
            flags,
            match_,
            instructions,
        })
    }
}
