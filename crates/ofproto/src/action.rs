//! Actions (OpenFlow 1.3.5 §7.2.5).
//!
//! Every 1.3 action type is typed. Experimenter actions keep their body verbatim, and action types
//! this crate does not know are kept verbatim too, so both round-trip byte-exact.
//!
//! ```text
//! ofp_action_header:
//! +---------------+---------------+---------------+---------------+
//! |            type               |    len (multiple of 8)        |
//! +---------------+---------------+---------------+---------------+
//! |   type-specific body ...                                      |
//! ```

use crate::error::{DecodeError, EncodeError};
use crate::oxm::OxmField;
use crate::wire::{pad8, patch_len16, put_u16, put_u32, put_zeros, Reader};

/// OFPAT_OUTPUT.
pub const OFPAT_OUTPUT: u16 = 0;
/// OFPAT_COPY_TTL_OUT.
pub const OFPAT_COPY_TTL_OUT: u16 = 11;
/// OFPAT_COPY_TTL_IN.
pub const OFPAT_COPY_TTL_IN: u16 = 12;
/// OFPAT_SET_MPLS_TTL.
pub const OFPAT_SET_MPLS_TTL: u16 = 15;
/// OFPAT_DEC_MPLS_TTL.
pub const OFPAT_DEC_MPLS_TTL: u16 = 16;
/// OFPAT_PUSH_VLAN.
pub const OFPAT_PUSH_VLAN: u16 = 17;
/// OFPAT_POP_VLAN.
pub const OFPAT_POP_VLAN: u16 = 18;
/// OFPAT_PUSH_MPLS.
pub const OFPAT_PUSH_MPLS: u16 = 19;
/// OFPAT_POP_MPLS.
pub const OFPAT_POP_MPLS: u16 = 20;
/// OFPAT_SET_QUEUE.
pub const OFPAT_SET_QUEUE: u16 = 21;
/// OFPAT_GROUP.
pub const OFPAT_GROUP: u16 = 22;
/// OFPAT_SET_NW_TTL.
pub const OFPAT_SET_NW_TTL: u16 = 23;
/// OFPAT_DEC_NW_TTL.
pub const OFPAT_DEC_NW_TTL: u16 = 24;
/// OFPAT_SET_FIELD.
pub const OFPAT_SET_FIELD: u16 = 25;
/// OFPAT_PUSH_PBB.
pub const OFPAT_PUSH_PBB: u16 = 26;
/// OFPAT_POP_PBB.
pub const OFPAT_POP_PBB: u16 = 27;
/// OFPAT_EXPERIMENTER.
pub const OFPAT_EXPERIMENTER: u16 = 0xffff;

/// `OFPCML_NO_BUFFER`: send the whole packet to the controller.
pub const OFPCML_NO_BUFFER: u16 = 0xffff;
/// `OFPCML_MAX`: largest max_len that asks the switch to buffer.
pub const OFPCML_MAX: u16 = 0xffe5;

/// One action.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    /// OFPAT_OUTPUT (§7.2.5.1): output to `port`; `max_len` bytes to the controller.
    Output {
        /// Output port (`OFPP_*` or a port number).
        port: u32,
        /// Bytes to send when `port` is OFPP_CONTROLLER.
        max_len: u16,
    },
    /// OFPAT_COPY_TTL_OUT.
    CopyTtlOut,
    /// OFPAT_COPY_TTL_IN.
    CopyTtlIn,
    /// OFPAT_SET_MPLS_TTL.
    SetMplsTtl(u8),
    /// OFPAT_DEC_MPLS_TTL.
    DecMplsTtl,
    /// OFPAT_PUSH_VLAN with the tag's ethertype.
    PushVlan(u16),
    /// OFPAT_POP_VLAN.
    PopVlan,
    /// OFPAT_PUSH_MPLS with the ethertype.
    PushMpls(u16),
    /// OFPAT_POP_MPLS with the ethertype of the payload.
    PopMpls(u16),
    /// OFPAT_SET_QUEUE.
    SetQueue(u32),
    /// OFPAT_GROUP.
    Group(u32),
    /// OFPAT_SET_NW_TTL.
    SetNwTtl(u8),
    /// OFPAT_DEC_NW_TTL.
    DecNwTtl,
    /// OFPAT_SET_FIELD (§7.2.5.10): one OXM TLV (without mask in 1.3).
    SetField(OxmField),
    /// OFPAT_PUSH_PBB with the ethertype.
    PushPbb(u16),
    /// OFPAT_POP_PBB.
    PopPbb,
    /// OFPAT_EXPERIMENTER: experimenter id and the rest of the action, verbatim.
    Experimenter {
        /// Experimenter id.
        experimenter: u32,
        /// Bytes after the experimenter id (padding included), verbatim.
        data: Vec<u8>,
    },
    /// An action type not defined by 1.3, kept verbatim.
    Unknown {
        /// The type.
        typ: u16,
        /// Bytes after the 4-byte header, verbatim.
        data: Vec<u8>,
    },
}

impl Action {
    /// Bytes on the wire.
    pub fn encoded_len(&self) -> usize {
        match self {
            Action::Output { .. } => 16,
            Action::SetField(f) => {
                let l = 4 + f.encoded_len();
                l + pad8(l)
            }
            Action::Experimenter { data, .. } => 8 + data.len(),
            Action::Unknown { data, .. } => 4 + data.len(),
            _ => 8,
        }
    }

    /// Appends the action.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = out.len();
        let typ = match self {
            Action::Output { .. } => OFPAT_OUTPUT,
            Action::CopyTtlOut => OFPAT_COPY_TTL_OUT,
            Action::CopyTtlIn => OFPAT_COPY_TTL_IN,
            Action::SetMplsTtl(_) => OFPAT_SET_MPLS_TTL,
            Action::DecMplsTtl => OFPAT_DEC_MPLS_TTL,
            Action::PushVlan(_) => OFPAT_PUSH_VLAN,
            Action::PopVlan => OFPAT_POP_VLAN,
            Action::PushMpls(_) => OFPAT_PUSH_MPLS,
            Action::PopMpls(_) => OFPAT_POP_MPLS,
            Action::SetQueue(_) => OFPAT_SET_QUEUE,
            Action::Group(_) => OFPAT_GROUP,
            Action::SetNwTtl(_) => OFPAT_SET_NW_TTL,
            Action::DecNwTtl => OFPAT_DEC_NW_TTL,
            Action::SetField(_) => OFPAT_SET_FIELD,
            Action::PushPbb(_) => OFPAT_PUSH_PBB,
            Action::PopPbb => OFPAT_POP_PBB,
            Action::Experimenter { .. } => OFPAT_EXPERIMENTER,
            Action::Unknown { typ, .. } => *typ,
        };
        put_u16(out, typ);
        put_u16(out, 0);
        match self {
            // ofp_action_output: port, max_len, pad[6].
            Action::Output { port, max_len } => {
                put_u32(out, *port);
                put_u16(out, *max_len);
                put_zeros(out, 6);
            }
            // ofp_action_generic: pad[4].
            Action::CopyTtlOut
            | Action::CopyTtlIn
            | Action::DecMplsTtl
            | Action::PopVlan
            | Action::DecNwTtl
            | Action::PopPbb => put_zeros(out, 4),
            // ofp_action_mpls_ttl / ofp_action_nw_ttl: ttl, pad[3].
            Action::SetMplsTtl(ttl) | Action::SetNwTtl(ttl) => {
                out.push(*ttl);
                put_zeros(out, 3);
            }
            // ofp_action_push / ofp_action_pop_mpls: ethertype, pad[2].
            Action::PushVlan(e) | Action::PushMpls(e) | Action::PopMpls(e) | Action::PushPbb(e) => {
                put_u16(out, *e);
                put_zeros(out, 2);
            }
            Action::SetQueue(v) | Action::Group(v) => put_u32(out, *v),
            // ofp_action_set_field: OXM TLV, then pad to a multiple of 8.
            Action::SetField(f) => {
                f.encode(out)?;
                put_zeros(out, pad8(out.len() - start));
            }
            Action::Experimenter { experimenter, data } => {
                put_u32(out, *experimenter);
                out.extend_from_slice(data);
            }
            Action::Unknown { data, .. } => out.extend_from_slice(data),
        }
        let len = out.len() - start;
        patch_len16(out, start + 2, len, "action")
    }

    /// Decodes one action.
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let typ = r.u16()?;
        let len = r.u16()?;
        if len < 4 {
            return Err(DecodeError::BadActionLength { typ, len });
        }
        let mut b = r.sub(usize::from(len) - 4, "action")?;
        let fixed = |want: u16| {
            if len == want {
                Ok(())
            } else {
                Err(DecodeError::BadActionLength { typ, len })
            }
        };
        let a = match typ {
            OFPAT_OUTPUT => {
                fixed(16)?;
                let port = b.u32()?;
                let max_len = b.u16()?;
                b.skip(6)?;
                Action::Output { port, max_len }
            }
            OFPAT_COPY_TTL_OUT | OFPAT_COPY_TTL_IN | OFPAT_DEC_MPLS_TTL | OFPAT_POP_VLAN
            | OFPAT_DEC_NW_TTL | OFPAT_POP_PBB => {
                fixed(8)?;
                b.skip(4)?;
                match typ {
                    OFPAT_COPY_TTL_OUT => Action::CopyTtlOut,
                    OFPAT_COPY_TTL_IN => Action::CopyTtlIn,
                    OFPAT_DEC_MPLS_TTL => Action::DecMplsTtl,
                    OFPAT_POP_VLAN => Action::PopVlan,
                    OFPAT_DEC_NW_TTL => Action::DecNwTtl,
                    _ => Action::PopPbb,
                }
            }
            OFPAT_SET_MPLS_TTL | OFPAT_SET_NW_TTL => {
                fixed(8)?;
                let ttl = b.u8()?;
                b.skip(3)?;
                if typ == OFPAT_SET_MPLS_TTL {
                    Action::SetMplsTtl(ttl)
                } else {
                    Action::SetNwTtl(ttl)
                }
            }
            OFPAT_PUSH_VLAN | OFPAT_PUSH_MPLS | OFPAT_POP_MPLS | OFPAT_PUSH_PBB => {
                fixed(8)?;
                let e = b.u16()?;
                b.skip(2)?;
                match typ {
                    OFPAT_PUSH_VLAN => Action::PushVlan(e),
                    OFPAT_PUSH_MPLS => Action::PushMpls(e),
                    OFPAT_POP_MPLS => Action::PopMpls(e),
                    _ => Action::PushPbb(e),
                }
            }
            OFPAT_SET_QUEUE | OFPAT_GROUP => {
                fixed(8)?;
                let v = b.u32()?;
                if typ == OFPAT_SET_QUEUE {
                    Action::SetQueue(v)
                } else {
                    Action::Group(v)
                }
            }
            OFPAT_SET_FIELD => {
                let f = OxmField::decode(&mut b)?;
                let l = 4 + f.encoded_len();
                if usize::from(len) != l + pad8(l) {
                    return Err(DecodeError::BadActionLength { typ, len });
                }
                b.rest();
                Action::SetField(f)
            }
            OFPAT_EXPERIMENTER => {
                if len < 8 {
                    return Err(DecodeError::BadActionLength { typ, len });
                }
                let experimenter = b.u32()?;
                Action::Experimenter {
                    experimenter,
                    data: b.rest().to_vec(),
                }
            }
            _ => Action::Unknown {
                typ,
                data: b.rest().to_vec(),
            },
        };
        b.finish()?;
        Ok(a)
    }
}

/// Appends a list of actions.
pub(crate) fn encode_actions(actions: &[Action], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    actions.iter().try_for_each(|a| a.encode(out))
}

/// Decodes actions until `r` is exhausted.
pub(crate) fn decode_actions(r: &mut Reader<'_>) -> Result<Vec<Action>, DecodeError> {
    let mut v = Vec::new();
    while !r.is_empty() {
        v.push(Action::decode(r)?);
    }
    Ok(v)
}

/// Bytes a list of actions takes.
pub(crate) fn actions_len(actions: &[Action]) -> usize {
    actions.iter().map(Action::encoded_len).sum()
}
