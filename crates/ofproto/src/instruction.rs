//! Instructions (OpenFlow 1.3.5 §7.2.4).
//!
//! ```text
//! ofp_instruction:
//! +---------------+---------------+---------------+---------------+
//! |            type               |             len               |
//! +---------------+---------------+---------------+---------------+
//! |   type-specific body ...                                      |
//! ```

use crate::action::{actions_len, decode_actions, encode_actions, Action};
use crate::error::{DecodeError, EncodeError};
use crate::wire::{patch_len16, put_u16, put_u32, put_u64, put_zeros, Reader};

/// OFPIT_GOTO_TABLE.
pub const OFPIT_GOTO_TABLE: u16 = 1;
/// OFPIT_WRITE_METADATA.
pub const OFPIT_WRITE_METADATA: u16 = 2;
/// OFPIT_WRITE_ACTIONS.
pub const OFPIT_WRITE_ACTIONS: u16 = 3;
/// OFPIT_APPLY_ACTIONS.
pub const OFPIT_APPLY_ACTIONS: u16 = 4;
/// OFPIT_CLEAR_ACTIONS.
pub const OFPIT_CLEAR_ACTIONS: u16 = 5;
/// OFPIT_METER.
pub const OFPIT_METER: u16 = 6;
/// OFPIT_EXPERIMENTER.
pub const OFPIT_EXPERIMENTER: u16 = 0xffff;

/// One instruction.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Instruction {
    /// OFPIT_GOTO_TABLE: continue in `table_id`.
    GotoTable(u8),
    /// OFPIT_WRITE_METADATA.
    WriteMetadata {
        /// Value.
        metadata: u64,
        /// Bits to change.
        mask: u64,
    },
    /// OFPIT_WRITE_ACTIONS: merge into the action set.
    WriteActions(Vec<Action>),
    /// OFPIT_APPLY_ACTIONS: apply now.
    ApplyActions(Vec<Action>),
    /// OFPIT_CLEAR_ACTIONS.
    ClearActions,
    /// OFPIT_METER.
    Meter(u32),
    /// OFPIT_EXPERIMENTER: experimenter id and body verbatim.
    Experimenter {
        /// Experimenter id.
        experimenter: u32,
        /// Bytes after the id, verbatim.
        data: Vec<u8>,
    },
    /// An instruction type not defined by 1.3, kept verbatim.
    Unknown {
        /// The type.
        typ: u16,
        /// Bytes after the 4-byte header.
        data: Vec<u8>,
    },
}

impl Instruction {
    /// Bytes on the wire.
    pub fn encoded_len(&self) -> usize {
        match self {
            Instruction::GotoTable(_) | Instruction::ClearActions | Instruction::Meter(_) => 8,
            Instruction::WriteMetadata { .. } => 24,
            Instruction::WriteActions(a) | Instruction::ApplyActions(a) => 8 + actions_len(a),
            Instruction::Experimenter { data, .. } => 8 + data.len(),
            Instruction::Unknown { data, .. } => 4 + data.len(),
        }
    }

    /// Appends the instruction.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = out.len();
        let typ = match self {
            Instruction::GotoTable(_) => OFPIT_GOTO_TABLE,
            Instruction::WriteMetadata { .. } => OFPIT_WRITE_METADATA,
            Instruction::WriteActions(_) => OFPIT_WRITE_ACTIONS,
            Instruction::ApplyActions(_) => OFPIT_APPLY_ACTIONS,
            Instruction::ClearActions => OFPIT_CLEAR_ACTIONS,
            Instruction::Meter(_) => OFPIT_METER,
            Instruction::Experimenter { .. } => OFPIT_EXPERIMENTER,
            Instruction::Unknown { typ, .. } => *typ,
        };
        put_u16(out, typ);
        put_u16(out, 0);
        match self {
            Instruction::GotoTable(t) => {
                out.push(*t);
                put_zeros(out, 3);
            }
            Instruction::WriteMetadata { metadata, mask } => {
                put_zeros(out, 4);
                put_u64(out, *metadata);
                put_u64(out, *mask);
            }
            Instruction::WriteActions(a) | Instruction::ApplyActions(a) => {
                put_zeros(out, 4);
                encode_actions(a, out)?;
            }
            Instruction::ClearActions => put_zeros(out, 4),
            Instruction::Meter(m) => put_u32(out, *m),
            Instruction::Experimenter { experimenter, data } => {
                put_u32(out, *experimenter);
                out.extend_from_slice(data);
            }
            Instruction::Unknown { data, .. } => out.extend_from_slice(data),
        }
        let len = out.len() - start;
        patch_len16(out, start + 2, len, "instruction")
    }

    /// Decodes one instruction.
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let typ = r.u16()?;
        let len = r.u16()?;
        let bad = DecodeError::BadInstructionLength { typ, len };
        if len < 4 {
            return Err(bad);
        }
        let mut b = r.sub(usize::from(len) - 4, "instruction")?;
        let fixed = |want: u16| if len == want { Ok(()) } else { Err(bad) };
        let i = match typ {
            OFPIT_GOTO_TABLE => {
                fixed(8)?;
                let t = b.u8()?;
                b.skip(3)?;
                Instruction::GotoTable(t)
            }
            OFPIT_WRITE_METADATA => {
                fixed(24)?;
                b.skip(4)?;
                let metadata = b.u64()?;
                let mask = b.u64()?;
                Instruction::WriteMetadata { metadata, mask }
            }
            OFPIT_WRITE_ACTIONS | OFPIT_APPLY_ACTIONS => {
                if len < 8 {
                    return Err(bad);
                }
                b.skip(4)?;
                let a = decode_actions(&mut b)?;
                if typ == OFPIT_WRITE_ACTIONS {
                    Instruction::WriteActions(a)
                } else {
                    Instruction::ApplyActions(a)
                }
            }
            OFPIT_CLEAR_ACTIONS => {
                fixed(8)?;
                b.skip(4)?;
                Instruction::ClearActions
            }
            OFPIT_METER => {
                fixed(8)?;
                Instruction::Meter(b.u32()?)
            }
            OFPIT_EXPERIMENTER => {
                if len < 8 {
                    return Err(bad);
                }
                let experimenter = b.u32()?;
                Instruction::Experimenter {
                    experimenter,
                    data: b.rest().to_vec(),
                }
            }
            _ => Instruction::Unknown {
                typ,
                data: b.rest().to_vec(),
            },
        };
        b.finish()?;
        Ok(i)
    }
}

/// Appends instructions.
pub(crate) fn encode_instructions(v: &[Instruction], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    v.iter().try_for_each(|i| i.encode(out))
}

/// Decodes instructions until `r` is exhausted.
pub(crate) fn decode_instructions(r: &mut Reader<'_>) -> Result<Vec<Instruction>, DecodeError> {
    let mut v = Vec::new();
    while !r.is_empty() {
        v.push(Instruction::decode(r)?);
    }
    Ok(v)
}
