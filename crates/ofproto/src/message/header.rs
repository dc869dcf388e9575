//! The message header (`ofp_header`, `ofp_type`; OpenFlow 1.3.5 §7.1) and the framing of a byte
//! stream into messages.
//!
//! ```text
//!  0               1               2               3
//! +---------------+---------------+---------------+---------------+
//! |    version    |     type      |            length             |
//! +---------------+---------------+---------------+---------------+
//! |                              xid                              |
//! +---------------+---------------+---------------+---------------+
//! ```

use crate::error::DecodeError;
use crate::macros::enum_with_unknown;
use crate::wire::Reader;

/// OpenFlow wire protocol version for 1.3 (`OFP_VERSION`, OpenFlow 1.3.5 §7.1).
pub const OFP_VERSION_1_3: u8 = 0x04;
/// Length of `ofp_header`.
pub const OFP_HEADER_LEN: usize = 8;

enum_with_unknown! {
    /// `ofp_type`: the message type in the header (§7.1).
    pub enum MessageType(u8) {
        /// OFPT_HELLO.
        Hello = 0,
        /// OFPT_ERROR.
        Error = 1,
        /// OFPT_ECHO_REQUEST.
        EchoRequest = 2,
        /// OFPT_ECHO_REPLY.
        EchoReply = 3,
        /// OFPT_EXPERIMENTER.
        Experimenter = 4,
        /// OFPT_FEATURES_REQUEST.
        FeaturesRequest = 5,
        /// OFPT_FEATURES_REPLY.
        FeaturesReply = 6,
        /// OFPT_GET_CONFIG_REQUEST.
        GetConfigRequest = 7,
        /// OFPT_GET_CONFIG_REPLY.
        GetConfigReply = 8,
        /// OFPT_SET_CONFIG.
        SetConfig = 9,
        /// OFPT_PACKET_IN.
        PacketIn = 10,
        /// OFPT_FLOW_REMOVED.
        FlowRemoved = 11,
        /// OFPT_PORT_STATUS.
        PortStatus = 12,
        /// OFPT_PACKET_OUT.
        PacketOut = 13,
        /// OFPT_FLOW_MOD.
        FlowMod = 14,
        /// OFPT_GROUP_MOD.
        GroupMod = 15,
        /// OFPT_PORT_MOD.
        PortMod = 16,
        /// OFPT_TABLE_MOD.
        TableMod = 17,
        /// OFPT_MULTIPART_REQUEST.
        MultipartRequest = 18,
        /// OFPT_MULTIPART_REPLY.
        MultipartReply = 19,
        /// OFPT_BARRIER_REQUEST.
        BarrierRequest = 20,
        /// OFPT_BARRIER_REPLY.
        BarrierReply = 21,
        /// OFPT_QUEUE_GET_CONFIG_REQUEST.
        QueueGetConfigRequest = 22,
        /// OFPT_QUEUE_GET_CONFIG_REPLY.
        QueueGetConfigReply = 23,
        /// OFPT_ROLE_REQUEST.
        RoleRequest = 24,
        /// OFPT_ROLE_REPLY.
        RoleReply = 25,
        /// OFPT_GET_ASYNC_REQUEST.
        GetAsyncRequest = 26,
        /// OFPT_GET_ASYNC_REPLY.
        GetAsyncReply = 27,
        /// OFPT_SET_ASYNC.
        SetAsync = 28,
        /// OFPT_METER_MOD.
        MeterMod = 29,
    }
}

/// The fixed header of every message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// `version`.
    pub version: u8,
    /// `type`.
    pub typ: MessageType,
    /// `length`, header included.
    pub length: u16,
    /// `xid`.
    pub xid: u32,
}

impl Header {
    /// Reads the header at the start of `buf`, or `None` when fewer than 8 bytes are present.
    pub fn peek(buf: &[u8]) -> Option<Header> {
        let mut r = Reader::new(buf, "ofp_header");
        Some(Header {
            version: r.u8().ok()?,
            typ: r.u8().ok()?.into(),
            length: r.u16().ok()?,
            xid: r.u32().ok()?,
        })
    }
}

/// Length of the next message in `buf` from its header: `Ok(None)` if fewer than 8 bytes are
/// present, `Err` if the length field is below 8.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, DecodeError> {
    match Header::peek(buf) {
        None => Ok(None),
        Some(h) if usize::from(h.length) < OFP_HEADER_LEN => Err(DecodeError::BadLength {
            what: "ofp_header",
            len: usize::from(h.length),
        }),
        Some(h) => Ok(Some(usize::from(h.length))),
    }
}
