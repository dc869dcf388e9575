//! OFPT_ERROR messages with every 1.3 error type and code typed (OpenFlow 1.3.5 §7.4.4).
//!
//! ```text
//! ofp_error_msg (after the 8-byte header):
//! +---------------+---------------+---------------+---------------+
//! |            type               |             code              |
//! +---------------+---------------+---------------+---------------+
//! |  data: at least 64 bytes of the failed request (or all of it)  |
//!
//! ofp_error_experimenter_msg (type = 0xffff):
//! |   type = 0xffff               |          exp_type             |
//! |                        experimenter                           |
//! |  data ...                                                     |
//! ```
//!
//! The mapping of the peer's decode errors to these codes, [`DecodeError::to_ofp_error`], lives
//! here too, so that `error` stays at the bottom of the module graph (STYLE.md §4).

use crate::error::DecodeError;
use crate::macros::enum_with_unknown;
use crate::wire::{put_u16, put_u32, Reader};

/// OFPET_* values.
pub mod ofpet {
    /// OFPET_HELLO_FAILED.
    pub const HELLO_FAILED: u16 = 0;
    /// OFPET_BAD_REQUEST.
    pub const BAD_REQUEST: u16 = 1;
    /// OFPET_BAD_ACTION.
    pub const BAD_ACTION: u16 = 2;
    /// OFPET_BAD_INSTRUCTION.
    pub const BAD_INSTRUCTION: u16 = 3;
    /// OFPET_BAD_MATCH.
    pub const BAD_MATCH: u16 = 4;
    /// OFPET_FLOW_MOD_FAILED.
    pub const FLOW_MOD_FAILED: u16 = 5;
    /// OFPET_GROUP_MOD_FAILED.
    pub const GROUP_MOD_FAILED: u16 = 6;
    /// OFPET_PORT_MOD_FAILED.
    pub const PORT_MOD_FAILED: u16 = 7;
    /// OFPET_TABLE_MOD_FAILED.
    pub const TABLE_MOD_FAILED: u16 = 8;
    /// OFPET_QUEUE_OP_FAILED.
    pub const QUEUE_OP_FAILED: u16 = 9;
    /// OFPET_SWITCH_CONFIG_FAILED.
    pub const SWITCH_CONFIG_FAILED: u16 = 10;
    /// OFPET_ROLE_REQUEST_FAILED.
    pub const ROLE_REQUEST_FAILED: u16 = 11;
    /// OFPET_METER_MOD_FAILED.
    pub const METER_MOD_FAILED: u16 = 12;
    /// OFPET_TABLE_FEATURES_FAILED.
    pub const TABLE_FEATURES_FAILED: u16 = 13;
    /// OFPET_EXPERIMENTER.
    pub const EXPERIMENTER: u16 = 0xffff;
}

enum_with_unknown! {
    /// OFPHFC_* codes of OFPET_HELLO_FAILED.
    pub enum HelloFailedCode(u16) {
        /// No compatible version.
        Incompatible = 0,
        /// Permissions error.
        Eperm = 1,
    }
}

enum_with_unknown! {
    /// OFPBRC_* codes of OFPET_BAD_REQUEST.
    pub enum BadRequestCode(u16) {
        /// Header version not supported.
        BadVersion = 0,
        /// Message type not supported.
        BadType = 1,
        /// Multipart type not supported.
        BadMultipart = 2,
        /// Experimenter id not supported.
        BadExperimenter = 3,
        /// Experimenter type not supported.
        BadExpType = 4,
        /// Permissions error.
        Eperm = 5,
        /// Wrong request length for type.
        BadLen = 6,
        /// Specified buffer has already been used.
        BufferEmpty = 7,
        /// Specified buffer does not exist.
        BufferUnknown = 8,
        /// Specified table-id invalid or does not exist.
        BadTableId = 9,
        /// Denied because controller is slave.
        IsSlave = 10,
        /// Invalid port.
        BadPort = 11,
        /// Invalid packet in packet-out.
        BadPacket = 12,
        /// Multipart request overflowed the assigned buffer.
        MultipartBufferOverflow = 13,
    }
}

enum_with_unknown! {
    /// OFPBAC_* codes of OFPET_BAD_ACTION.
    pub enum BadActionCode(u16) {
        /// Unknown or unsupported action type.
        BadType = 0,
        /// Length problem in actions.
        BadLen = 1,
        /// Unknown experimenter id.
        BadExperimenter = 2,
        /// Unknown action for experimenter id.
        BadExpType = 3,
        /// Problem validating output port.
        BadOutPort = 4,
        /// Bad action argument.
        BadArgument = 5,
        /// Permissions error.
        Eperm = 6,
        /// Can't handle this many actions.
        TooMany = 7,
        /// Problem validating output queue.
        BadQueue = 8,
        /// Invalid group id in forward action.
        BadOutGroup = 9,
        /// Action can't apply for this match, or set-field missing prerequisite.
        MatchInconsistent = 10,
        /// Action order is unsupported for the action list.
        UnsupportedOrder = 11,
        /// Actions uses an unsupported tag/encap.
        BadTag = 12,
        /// Unsupported type in SET_FIELD action.
        BadSetType = 13,
        /// Length problem in SET_FIELD action.
        BadSetLen = 14,
        /// Bad argument in SET_FIELD action.
        BadSetArgument = 15,
    }
}

enum_with_unknown! {
    /// OFPBIC_* codes of OFPET_BAD_INSTRUCTION.
    pub enum BadInstructionCode(u16) {
        /// Unknown instruction.
        UnknownInst = 0,
        /// Switch or table does not support the instruction.
        UnsupInst = 1,
        /// Invalid table-id specified.
        BadTableId = 2,
        /// Metadata value unsupported by datapath.
        UnsupMetadata = 3,
        /// Metadata mask value unsupported by datapath.
        UnsupMetadataMask = 4,
        /// Unknown experimenter id specified.
        BadExperimenter = 5,
        /// Unknown instruction for experimenter id.
        BadExpType = 6,
        /// Length problem in instructions.
        BadLen = 7,
        /// Permissions error.
        Eperm = 8,
    }
}

enum_with_unknown! {
    /// OFPBMC_* codes of OFPET_BAD_MATCH.
    pub enum BadMatchCode(u16) {
        /// Unsupported match type.
        BadType = 0,
        /// Length problem in match.
        BadLen = 1,
        /// Match uses an unsupported tag/encap.
        BadTag = 2,
        /// Unsupported datalink addr mask.
        BadDlAddrMask = 3,
        /// Unsupported network addr mask.
        BadNwAddrMask = 4,
        /// Unsupported combination of fields masked or omitted.
        BadWildcards = 5,
        /// Unsupported field type in the match.
        BadField = 6,
        /// Unsupported value in a match field.
        BadValue = 7,
        /// Unsupported mask specified in the match.
        BadMask = 8,
        /// A prerequisite was not met.
        BadPrereq = 9,
        /// A field type was duplicated.
        DupField = 10,
        /// Permissions error.
        Eperm = 11,
    }
}

enum_with_unknown! {
    /// OFPFMFC_* codes of OFPET_FLOW_MOD_FAILED.
    pub enum FlowModFailedCode(u16) {
        /// Unspecified error.
        Unspecified = 0,
        /// Flow not added because table was full.
        TableFull = 1,
        /// Table does not exist.
        BadTableId = 2,
        /// Attempted to add overlapping flow with CHECK_OVERLAP set.
        Overlap = 3,
        /// Permissions error.
        Eperm = 4,
        /// Unsupported or unknown idle/hard timeout.
        BadTimeout = 5,
        /// Unsupported or unknown command.
        BadCommand = 6,
        /// Unsupported or unknown flags.
        BadFlags = 7,
    }
}

enum_with_unknown! {
    /// OFPGMFC_* codes of OFPET_GROUP_MOD_FAILED.
    pub enum GroupModFailedCode(u16) {
        /// Group not added because a group ADD attempted to replace an existing group.
        GroupExists = 0,
        /// Group not added because the group specified is invalid.
        InvalidGroup = 1,
        /// Switch does not support unequal load sharing with select groups.
        WeightUnsupported = 2,
        /// The group table is full.
        OutOfGroups = 3,
        /// The maximum number of action buckets for a group has been exceeded.
        OutOfBuckets = 4,
        /// Switch does not support groups that forward to groups.
        ChainingUnsupported = 5,
        /// This group cannot watch the watch_port or watch_group specified.
        WatchUnsupported = 6,
        /// Group entry would cause a loop.
        Loop = 7,
        /// Group not modified because a group MODIFY attempted to modify a non-existent group.
        UnknownGroup = 8,
        /// Group not deleted because another group is forwarding to it.
        ChainedGroup = 9,
        /// Unsupported or unknown group type.
        BadType = 10,
        /// Unsupported or unknown command.
        BadCommand = 11,
        /// Error in bucket.
        BadBucket = 12,
        /// Error in watch port/group.
        BadWatch = 13,
        /// Permissions error.
        Eperm = 14,
    }
}

enum_with_unknown! {
    /// OFPPMFC_* codes of OFPET_PORT_MOD_FAILED.
    pub enum PortModFailedCode(u16) {
        /// Specified port number does not exist.
        BadPort = 0,
        /// Specified hardware address does not match the port number.
        BadHwAddr = 1,
        /// Specified config is invalid.
        BadConfig = 2,
        /// Specified advertise is invalid.
        BadAdvertise = 3,
        /// Permissions error.
        Eperm = 4,
    }
}

enum_with_unknown! {
    /// OFPTMFC_* codes of OFPET_TABLE_MOD_FAILED.
    pub enum TableModFailedCode(u16) {
        /// Specified table does not exist.
        BadTable = 0,
        /// Specified config is invalid.
        BadConfig = 1,
        /// Permissions error.
        Eperm = 2,
    }
}

enum_with_unknown! {
    /// OFPQOFC_* codes of OFPET_QUEUE_OP_FAILED.
    pub enum QueueOpFailedCode(u16) {
        /// Invalid port (or port does not exist).
        BadPort = 0,
        /// Queue does not exist.
        BadQueue = 1,
        /// Permissions error.
        Eperm = 2,
    }
}

enum_with_unknown! {
    /// OFPSCFC_* codes of OFPET_SWITCH_CONFIG_FAILED.
    pub enum SwitchConfigFailedCode(u16) {
        /// Specified flags is invalid.
        BadFlags = 0,
        /// Specified len is invalid.
        BadLen = 1,
        /// Permissions error.
        Eperm = 2,
    }
}

enum_with_unknown! {
    /// OFPRRFC_* codes of OFPET_ROLE_REQUEST_FAILED.
    pub enum RoleRequestFailedCode(u16) {
        /// Stale message: old generation_id.
        Stale = 0,
        /// Controller role change unsupported.
        Unsup = 1,
        /// Invalid role.
        BadRole = 2,
    }
}

enum_with_unknown! {
    /// OFPMMFC_* codes of OFPET_METER_MOD_FAILED.
    pub enum MeterModFailedCode(u16) {
        /// Unspecified error.
        Unspecified = 0,
        /// Meter not added because a meter ADD attempted to replace an existing meter.
        MeterExists = 1,
        /// Meter not added because the meter specified is invalid.
        InvalidMeter = 2,
        /// Meter not modified because a meter MODIFY attempted to modify a non-existent meter.
        UnknownMeter = 3,
        /// Unsupported or unknown command.
        BadCommand = 4,
        /// Flag configuration unsupported.
        BadFlags = 5,
        /// Rate unsupported.
        BadRate = 6,
        /// Burst size unsupported.
        BadBurst = 7,
        /// Band unsupported.
        BadBand = 8,
        /// Band value unsupported.
        BadBandValue = 9,
        /// No more meters available.
        OutOfMeters = 10,
        /// The maximum number of properties for a meter has been exceeded.
        OutOfBands = 11,
    }
}

enum_with_unknown! {
    /// OFPTFFC_* codes of OFPET_TABLE_FEATURES_FAILED.
    pub enum TableFeaturesFailedCode(u16) {
        /// Specified table does not exist.
        BadTable = 0,
        /// Invalid metadata mask.
        BadMetadata = 1,
        /// Unknown property type.
        BadType = 2,
        /// Length problem in properties.
        BadLen = 3,
        /// Unsupported property value.
        BadArgument = 4,
        /// Permissions error.
        Eperm = 5,
    }
}

/// An error type and code, typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// OFPET_HELLO_FAILED.
    HelloFailed(HelloFailedCode),
    /// OFPET_BAD_REQUEST.
    BadRequest(BadRequestCode),
    /// OFPET_BAD_ACTION.
    BadAction(BadActionCode),
    /// OFPET_BAD_INSTRUCTION.
    BadInstruction(BadInstructionCode),
    /// OFPET_BAD_MATCH.
    BadMatch(BadMatchCode),
    /// OFPET_FLOW_MOD_FAILED.
    FlowModFailed(FlowModFailedCode),
    /// OFPET_GROUP_MOD_FAILED.
    GroupModFailed(GroupModFailedCode),
    /// OFPET_PORT_MOD_FAILED.
    PortModFailed(PortModFailedCode),
    /// OFPET_TABLE_MOD_FAILED.
    TableModFailed(TableModFailedCode),
    /// OFPET_QUEUE_OP_FAILED.
    QueueOpFailed(QueueOpFailedCode),
    /// OFPET_SWITCH_CONFIG_FAILED.
    SwitchConfigFailed(SwitchConfigFailedCode),
    /// OFPET_ROLE_REQUEST_FAILED.
    RoleRequestFailed(RoleRequestFailedCode),
    /// OFPET_METER_MOD_FAILED.
    MeterModFailed(MeterModFailedCode),
    /// OFPET_TABLE_FEATURES_FAILED.
    TableFeaturesFailed(TableFeaturesFailedCode),
    /// OFPET_EXPERIMENTER (carries `exp_type` and `experimenter` instead of a code).
    Experimenter {
        /// Experimenter-defined type.
        exp_type: u16,
        /// Experimenter id.
        experimenter: u32,
    },
    /// An error type this crate does not know.
    Unknown {
        /// The type.
        typ: u16,
        /// The code.
        code: u16,
    },
}

impl ErrorCode {
    /// Builds the typed code from wire `type` and `code` (not for OFPET_EXPERIMENTER).
    pub fn from_wire(typ: u16, code: u16) -> Self {
        match typ {
            ofpet::HELLO_FAILED => ErrorCode::HelloFailed(code.into()),
            ofpet::BAD_REQUEST => ErrorCode::BadRequest(code.into()),
            ofpet::BAD_ACTION => ErrorCode::BadAction(code.into()),
            ofpet::BAD_INSTRUCTION => ErrorCode::BadInstruction(code.into()),
            ofpet::BAD_MATCH => ErrorCode::BadMatch(code.into()),
            ofpet::FLOW_MOD_FAILED => ErrorCode::FlowModFailed(code.into()),
            ofpet::GROUP_MOD_FAILED => ErrorCode::GroupModFailed(code.into()),
            ofpet::PORT_MOD_FAILED => ErrorCode::PortModFailed(code.into()),
            ofpet::TABLE_MOD_FAILED => ErrorCode::TableModFailed(code.into()),
            ofpet::QUEUE_OP_FAILED => ErrorCode::QueueOpFailed(code.into()),
            ofpet::SWITCH_CONFIG_FAILED => ErrorCode::SwitchConfigFailed(code.into()),
            ofpet::ROLE_REQUEST_FAILED => ErrorCode::RoleRequestFailed(code.into()),
            ofpet::METER_MOD_FAILED => ErrorCode::MeterModFailed(code.into()),
            ofpet::TABLE_FEATURES_FAILED => ErrorCode::TableFeaturesFailed(code.into()),
            typ => ErrorCode::Unknown { typ, code },
        }
    }

    /// Wire `(type, code)`; for experimenter errors `(0xffff, exp_type)`.
    pub fn to_wire(&self) -> (u16, u16) {
        match *self {
            ErrorCode::HelloFailed(c) => (ofpet::HELLO_FAILED, c.into()),
            ErrorCode::BadRequest(c) => (ofpet::BAD_REQUEST, c.into()),
            ErrorCode::BadAction(c) => (ofpet::BAD_ACTION, c.into()),
            ErrorCode::BadInstruction(c) => (ofpet::BAD_INSTRUCTION, c.into()),
            ErrorCode::BadMatch(c) => (ofpet::BAD_MATCH, c.into()),
            ErrorCode::FlowModFailed(c) => (ofpet::FLOW_MOD_FAILED, c.into()),
            ErrorCode::GroupModFailed(c) => (ofpet::GROUP_MOD_FAILED, c.into()),
            ErrorCode::PortModFailed(c) => (ofpet::PORT_MOD_FAILED, c.into()),
            ErrorCode::TableModFailed(c) => (ofpet::TABLE_MOD_FAILED, c.into()),
            ErrorCode::QueueOpFailed(c) => (ofpet::QUEUE_OP_FAILED, c.into()),
            ErrorCode::SwitchConfigFailed(c) => (ofpet::SWITCH_CONFIG_FAILED, c.into()),
            ErrorCode::RoleRequestFailed(c) => (ofpet::ROLE_REQUEST_FAILED, c.into()),
            ErrorCode::MeterModFailed(c) => (ofpet::METER_MOD_FAILED, c.into()),
            ErrorCode::TableFeaturesFailed(c) => (ofpet::TABLE_FEATURES_FAILED, c.into()),
            ErrorCode::Experimenter { exp_type, .. } => (ofpet::EXPERIMENTER, exp_type),
            ErrorCode::Unknown { typ, code } => (typ, code),
        }
    }
}

impl DecodeError {
    /// The OFPT_ERROR type/code the spec says to answer with when a request fails to decode
    /// (OpenFlow 1.3.5 §7.4.4). This is the one place where peer decode errors map to codes.
    pub fn to_ofp_error(&self) -> ErrorCode {
        match *self {
            DecodeError::BadVersion(_) => ErrorCode::BadRequest(BadRequestCode::BadVersion),
            DecodeError::Truncated { .. }
            | DecodeError::BadLength { .. }
            | DecodeError::TrailingBytes { .. }
            | DecodeError::BadMessageLength { .. } => ErrorCode::BadRequest(BadRequestCode::BadLen),
            DecodeError::BadMultipartLength { .. } => ErrorCode::BadRequest(BadRequestCode::BadLen),
            DecodeError::BadMatchType(_) => ErrorCode::BadMatch(BadMatchCode::BadType),
            DecodeError::BadOxmLength { .. } => ErrorCode::BadMatch(BadMatchCode::BadLen),
            DecodeError::DuplicateOxm { .. } => ErrorCode::BadMatch(BadMatchCode::DupField),
            DecodeError::BadActionLength { .. } => ErrorCode::BadAction(BadActionCode::BadLen),
            DecodeError::BadInstructionLength { .. } => {
                ErrorCode::BadInstruction(BadInstructionCode::BadLen)
            }
        }
    }
}

/// OFPT_ERROR body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ErrorMsg {
    /// Type and code.
    pub code: ErrorCode,
    /// Data: for most errors at least 64 bytes of the failed request; for HELLO_FAILED an ASCII
    /// explanation.
    pub data: Vec<u8>,
}

impl ErrorMsg {
    pub(crate) fn encode_body(&self, out: &mut Vec<u8>) {
        let (t, c) = self.code.to_wire();
        put_u16(out, t);
        put_u16(out, c);
        if let ErrorCode::Experimenter { experimenter, .. } = self.code {
            put_u32(out, experimenter);
        }
        out.extend_from_slice(&self.data);
    }

    pub(crate) fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let typ = r.u16()?;
        let c = r.u16()?;
        let code = if typ == ofpet::EXPERIMENTER {
            ErrorCode::Experimenter {
                exp_type: c,
                experimenter: r.u32()?,
            }
        } else {
            ErrorCode::from_wire(typ, c)
        };
        Ok(ErrorMsg {
            code,
            data: r.rest().to_vec(),
        })
    }
}
