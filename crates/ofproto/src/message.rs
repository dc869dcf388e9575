//! OpenFlow 1.3 messages: the header, framing and every message body of §7.
//!
//! ```text
//! ofp_header (§7.1), in front of every message:
//!  0               1               2               3
//! +---------------+---------------+---------------+---------------+
//! |    version    |     type      |            length             |
//! +---------------+---------------+---------------+---------------+
//! |                              xid                              |
//! +---------------+---------------+---------------+---------------+
//! ```
//!
//! [`Message::decode`] is a framer: `Ok(None)` means "need more bytes", `Err` means the stream is
//! invalid. [`Message::decode_exact`] decodes one message that must fill the slice exactly.

use crate::action::{actions_len, decode_actions, encode_actions, Action};
use crate::error::{DecodeError, EncodeError};
use crate::group::{buckets_len, decode_buckets, encode_buckets, Bucket, GroupType};
use crate::instruction::{decode_instructions, encode_instructions, Instruction};
use crate::meter::{bands_len, decode_bands, encode_bands, MeterBand};
use crate::multipart::{MultipartReply, MultipartRequest};
use crate::ofp_error::ErrorMsg;
use crate::oxm::{MacAddr, Match};
use crate::port::Port;
use crate::wire::{
    enum_with_unknown, pad8, patch_len16, put_u16, put_u32, put_u64, put_zeros, Reader,
};
use crate::OFP_VERSION_1_3;

/// Length of `ofp_header`.
pub const OFP_HEADER_LEN: usize = 8;
/// `OFP_NO_BUFFER`: the packet is not buffered on the switch.
pub const OFP_NO_BUFFER: u32 = 0xffff_ffff;
/// `OFPTT_MAX`: last usable table number.
pub const OFPTT_MAX: u8 = 0xfe;
/// `OFPTT_ALL`: wildcard table (FLOW_MOD delete, stats).
pub const OFPTT_ALL: u8 = 0xff;

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

/// OFPHET_VERSIONBITMAP.
pub const OFPHET_VERSIONBITMAP: u16 = 1;

/// One HELLO element (§7.5.1).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HelloElement {
    /// OFPHET_VERSIONBITMAP: bit `v` of the bitmap set when version `v` is supported
    /// (bitmap word `i` holds versions `32*i ..= 32*i+31`).
    VersionBitmap(Vec<u32>),
    /// An element type this crate does not know, kept verbatim (without its padding).
    Unknown {
        /// Element type.
        typ: u16,
        /// Bytes after the 4-byte element header.
        data: Vec<u8>,
    },
}

/// OFPT_HELLO (§7.5.1).
///
/// ```text
/// | ofp_header (version = highest the sender supports) | elements ... |
/// element: | type u16 | length u16 (no padding) | body | zero pad to a multiple of 8 |
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Hello {
    /// The header version: the highest version the sender supports. HELLO is the only message
    /// decoded whatever its version.
    pub version: u8,
    /// Elements.
    pub elements: Vec<HelloElement>,
}

impl Hello {
    /// A HELLO advertising only OpenFlow 1.3, with a version bitmap.
    pub fn v1_3() -> Self {
        Hello {
            version: OFP_VERSION_1_3,
            elements: vec![HelloElement::VersionBitmap(vec![1 << OFP_VERSION_1_3])],
        }
    }

    /// The versions the bitmap lists (`None` when there is no bitmap element).
    pub fn bitmap_versions(&self) -> Option<Vec<u8>> {
        self.elements.iter().find_map(|e| match e {
            HelloElement::VersionBitmap(words) => Some(
                words
                    .iter()
                    .enumerate()
                    .flat_map(|(i, w)| {
                        (0u32..32)
                            .filter(move |b| w & (1 << b) != 0)
                            .filter_map(move |b| {
                                u8::try_from(i.saturating_mul(32).saturating_add(b as usize)).ok()
                            })
                    })
                    .collect(),
            ),
            HelloElement::Unknown { .. } => None,
        })
    }

    fn body_len(&self) -> usize {
        self.elements
            .iter()
            .map(|e| {
                let l = match e {
                    HelloElement::VersionBitmap(w) => 4 + 4 * w.len(),
                    HelloElement::Unknown { data, .. } => 4 + data.len(),
                };
                l + pad8(l)
            })
            .sum()
    }

    fn encode_body(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        for e in &self.elements {
            let start = out.len();
            match e {
                HelloElement::VersionBitmap(words) => {
                    put_u16(out, OFPHET_VERSIONBITMAP);
                    put_u16(out, 0);
                    words.iter().for_each(|w| put_u32(out, *w));
                }
                HelloElement::Unknown { typ, data } => {
                    put_u16(out, *typ);
                    put_u16(out, 0);
                    out.extend_from_slice(data);
                }
            }
            let len = out.len() - start;
            patch_len16(out, start + 2, len, "hello element")?;
            put_zeros(out, pad8(len));
        }
        Ok(())
    }

    fn decode_body(version: u8, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut elements = Vec::new();
        while !r.is_empty() {
            let typ = r.u16()?;
            let len = usize::from(r.u16()?);
            if len < 4 {
                return Err(DecodeError::BadLength {
                    what: "hello element",
                    len,
                });
            }
            let mut b = r.sub(len - 4, "hello element")?;
            r.skip(pad8(len))?;
            if typ == OFPHET_VERSIONBITMAP {
                if (len - 4) % 4 != 0 {
                    return Err(DecodeError::BadLength {
                        what: "hello version bitmap",
                        len,
                    });
                }
                let mut words = Vec::new();
                while !b.is_empty() {
                    words.push(b.u32()?);
                }
                elements.push(HelloElement::VersionBitmap(words));
            } else {
                elements.push(HelloElement::Unknown {
                    typ,
                    data: b.rest().to_vec(),
                });
            }
        }
        Ok(Hello { version, elements })
    }
}

/// OFPT_EXPERIMENTER (§7.5.4), also the body of experimenter multipart messages.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Experimenter {
    /// Experimenter id.
    pub experimenter: u32,
    /// Experimenter-defined type.
    pub exp_type: u32,
    /// Body, verbatim.
    pub data: Vec<u8>,
}

/// OFPT_FEATURES_REPLY (§7.3.1).
///
/// ```text
/// | datapath_id u64 | n_buffers u32 | n_tables u8 | auxiliary_id u8 | pad[2] |
/// | capabilities u32 | reserved u32 |
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SwitchFeatures {
    /// Datapath unique id.
    pub datapath_id: u64,
    /// Max packets buffered at once.
    pub n_buffers: u32,
    /// Number of tables supported by datapath.
    pub n_tables: u8,
    /// Identify auxiliary connections.
    pub auxiliary_id: u8,
    /// OFPC_* bits.
    pub capabilities: u32,
    /// Reserved.
    pub reserved: u32,
}

/// OFPT_GET_CONFIG_REPLY / OFPT_SET_CONFIG (§7.3.2): `| flags u16 | miss_send_len u16 |`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SwitchConfig {
    /// OFPC_FRAG_* bits.
    pub flags: u16,
    /// Max bytes of a table-miss packet sent to the controller.
    pub miss_send_len: u16,
}

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
            out_port: crate::port::ofpp::ANY,
            out_group: crate::group::OFPG_ANY,
            flags: 0,
            match_: Match::new(),
            instructions: Vec::new(),
        }
    }
}

enum_with_unknown! {
    /// `ofp_group_mod_command`.
    pub enum GroupModCommand(u16) {
        /// OFPGC_ADD.
        Add = 0,
        /// OFPGC_MODIFY.
        Modify = 1,
        /// OFPGC_DELETE.
        Delete = 2,
    }
}

/// OFPT_GROUP_MOD (§7.3.4.2): `| command u16 | type u8 | pad u8 | group_id u32 | buckets ... |`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupMod {
    /// Command.
    pub command: GroupModCommand,
    /// Group type.
    pub group_type: GroupType,
    /// Group id.
    pub group_id: u32,
    /// Buckets (select groups: weighted).
    pub buckets: Vec<Bucket>,
}

/// OFPT_PORT_MOD (§7.3.4.3).
///
/// ```text
/// | port_no u32 | pad[4] | hw_addr[6] | pad[2] | config u32 | mask u32 | advertise u32 | pad[4] |
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PortMod {
    /// Port.
    pub port_no: u32,
    /// Must match the port's address.
    pub hw_addr: MacAddr,
    /// OFPPC_* bits.
    pub config: u32,
    /// Bits of `config` to change.
    pub mask: u32,
    /// OFPPF_* bits to advertise, 0 to leave unchanged.
    pub advertise: u32,
}

/// OFPT_TABLE_MOD (§7.3.3): `| table_id u8 | pad[3] | config u32 |`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TableMod {
    /// Table, or OFPTT_ALL.
    pub table_id: u8,
    /// OFPTC_* bits.
    pub config: u32,
}

enum_with_unknown! {
    /// `ofp_meter_mod_command`.
    pub enum MeterModCommand(u16) {
        /// OFPMC_ADD.
        Add = 0,
        /// OFPMC_MODIFY.
        Modify = 1,
        /// OFPMC_DELETE.
        Delete = 2,
    }
}

/// OFPT_METER_MOD (§7.3.4.4): `| command u16 | flags u16 | meter_id u32 | bands ... |`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MeterMod {
    /// Command.
    pub command: MeterModCommand,
    /// OFPMF_* bits.
    pub flags: u16,
    /// Meter.
    pub meter_id: u32,
    /// Bands.
    pub bands: Vec<MeterBand>,
}

enum_with_unknown! {
    /// `ofp_controller_role`.
    pub enum ControllerRole(u32) {
        /// OFPCR_ROLE_NOCHANGE.
        NoChange = 0,
        /// OFPCR_ROLE_EQUAL.
        Equal = 1,
        /// OFPCR_ROLE_MASTER.
        Master = 2,
        /// OFPCR_ROLE_SLAVE.
        Slave = 3,
    }
}

/// OFPT_ROLE_REQUEST / OFPT_ROLE_REPLY (§7.3.9): `| role u32 | pad[4] | generation_id u64 |`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Role {
    /// Role.
    pub role: ControllerRole,
    /// Master election generation id.
    pub generation_id: u64,
}

/// OFPT_GET_ASYNC_REPLY / OFPT_SET_ASYNC (§7.3.10): three pairs of (master/equal, slave) masks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AsyncConfig {
    /// Bitmasks of OFPR_* values.
    pub packet_in_mask: [u32; 2],
    /// Bitmasks of OFPPR_* values.
    pub port_status_mask: [u32; 2],
    /// Bitmasks of OFPRR_* values.
    pub flow_removed_mask: [u32; 2],
}

/// OFPT_QUEUE_GET_CONFIG_REPLY (§7.3.6); the queue list is kept as opaque bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QueueGetConfigReply {
    /// Port.
    pub port: u32,
    /// `ofp_packet_queue` list, verbatim.
    pub queues: Vec<u8>,
}

/// A message body: one variant per `ofp_type`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Body {
    /// OFPT_HELLO.
    Hello(Hello),
    /// OFPT_ERROR.
    Error(ErrorMsg),
    /// OFPT_ECHO_REQUEST with arbitrary data.
    EchoRequest(Vec<u8>),
    /// OFPT_ECHO_REPLY with the request's data.
    EchoReply(Vec<u8>),
    /// OFPT_EXPERIMENTER.
    Experimenter(Experimenter),
    /// OFPT_FEATURES_REQUEST.
    FeaturesRequest,
    /// OFPT_FEATURES_REPLY.
    FeaturesReply(SwitchFeatures),
    /// OFPT_GET_CONFIG_REQUEST.
    GetConfigRequest,
    /// OFPT_GET_CONFIG_REPLY.
    GetConfigReply(SwitchConfig),
    /// OFPT_SET_CONFIG.
    SetConfig(SwitchConfig),
    /// OFPT_PACKET_IN.
    PacketIn(PacketIn),
    /// OFPT_FLOW_REMOVED.
    FlowRemoved(FlowRemoved),
    /// OFPT_PORT_STATUS.
    PortStatus(PortStatus),
    /// OFPT_PACKET_OUT.
    PacketOut(PacketOut),
    /// OFPT_FLOW_MOD.
    FlowMod(FlowMod),
    /// OFPT_GROUP_MOD.
    GroupMod(GroupMod),
    /// OFPT_PORT_MOD.
    PortMod(PortMod),
    /// OFPT_TABLE_MOD.
    TableMod(TableMod),
    /// OFPT_MULTIPART_REQUEST.
    MultipartRequest(MultipartRequest),
    /// OFPT_MULTIPART_REPLY (one part).
    MultipartReply(MultipartReply),
    /// OFPT_BARRIER_REQUEST.
    BarrierRequest,
    /// OFPT_BARRIER_REPLY.
    BarrierReply,
    /// OFPT_QUEUE_GET_CONFIG_REQUEST: `| port u32 | pad[4] |`.
    QueueGetConfigRequest(u32),
    /// OFPT_QUEUE_GET_CONFIG_REPLY.
    QueueGetConfigReply(QueueGetConfigReply),
    /// OFPT_ROLE_REQUEST.
    RoleRequest(Role),
    /// OFPT_ROLE_REPLY.
    RoleReply(Role),
    /// OFPT_GET_ASYNC_REQUEST.
    GetAsyncRequest,
    /// OFPT_GET_ASYNC_REPLY.
    GetAsyncReply(AsyncConfig),
    /// OFPT_SET_ASYNC.
    SetAsync(AsyncConfig),
    /// OFPT_METER_MOD.
    MeterMod(MeterMod),
    /// A message type 1.3 does not define, body verbatim.
    Unknown {
        /// The type.
        typ: u8,
        /// The body.
        body: Vec<u8>,
    },
}

impl Body {
    /// The header `type` of this body.
    pub fn message_type(&self) -> MessageType {
        match self {
            Body::Hello(_) => MessageType::Hello,
            Body::Error(_) => MessageType::Error,
            Body::EchoRequest(_) => MessageType::EchoRequest,
            Body::EchoReply(_) => MessageType::EchoReply,
            Body::Experimenter(_) => MessageType::Experimenter,
            Body::FeaturesRequest => MessageType::FeaturesRequest,
            Body::FeaturesReply(_) => MessageType::FeaturesReply,
            Body::GetConfigRequest => MessageType::GetConfigRequest,
            Body::GetConfigReply(_) => MessageType::GetConfigReply,
            Body::SetConfig(_) => MessageType::SetConfig,
            Body::PacketIn(_) => MessageType::PacketIn,
            Body::FlowRemoved(_) => MessageType::FlowRemoved,
            Body::PortStatus(_) => MessageType::PortStatus,
            Body::PacketOut(_) => MessageType::PacketOut,
            Body::FlowMod(_) => MessageType::FlowMod,
            Body::GroupMod(_) => MessageType::GroupMod,
            Body::PortMod(_) => MessageType::PortMod,
            Body::TableMod(_) => MessageType::TableMod,
            Body::MultipartRequest(_) => MessageType::MultipartRequest,
            Body::MultipartReply(_) => MessageType::MultipartReply,
            Body::BarrierRequest => MessageType::BarrierRequest,
            Body::BarrierReply => MessageType::BarrierReply,
            Body::QueueGetConfigRequest(_) => MessageType::QueueGetConfigRequest,
            Body::QueueGetConfigReply(_) => MessageType::QueueGetConfigReply,
            Body::RoleRequest(_) => MessageType::RoleRequest,
            Body::RoleReply(_) => MessageType::RoleReply,
            Body::GetAsyncRequest => MessageType::GetAsyncRequest,
            Body::GetAsyncReply(_) => MessageType::GetAsyncReply,
            Body::SetAsync(_) => MessageType::SetAsync,
            Body::MeterMod(_) => MessageType::MeterMod,
            Body::Unknown { typ, .. } => MessageType::from(*typ),
        }
    }

    /// Body bytes (after the 8-byte header).
    pub fn encoded_len(&self) -> usize {
        match self {
            Body::Hello(h) => h.body_len(),
            Body::Error(e) => {
                let exp = matches!(e.code, crate::ofp_error::ErrorCode::Experimenter { .. });
                4 + if exp { 4 } else { 0 } + e.data.len()
            }
            Body::EchoRequest(d) | Body::EchoReply(d) => d.len(),
            Body::Experimenter(e) => 8 + e.data.len(),
            Body::FeaturesRequest
            | Body::GetConfigRequest
            | Body::BarrierRequest
            | Body::BarrierReply
            | Body::GetAsyncRequest => 0,
            Body::FeaturesReply(_) => 24,
            Body::GetConfigReply(_) | Body::SetConfig(_) => 4,
            Body::PacketIn(p) => 16 + p.match_.encoded_len() + 2 + p.data.len(),
            Body::FlowRemoved(f) => 40 + f.match_.encoded_len(),
            Body::PortStatus(_) => 8 + Port::LEN,
            Body::PacketOut(p) => 16 + actions_len(&p.actions) + p.data.len(),
            Body::FlowMod(f) => {
                40 + f.match_.encoded_len()
                    + f.instructions
                        .iter()
                        .map(Instruction::encoded_len)
                        .sum::<usize>()
            }
            Body::GroupMod(g) => 8 + buckets_len(&g.buckets),
            Body::PortMod(_) => 32,
            Body::TableMod(_) => 8,
            Body::MultipartRequest(m) => m.encoded_len(),
            Body::MultipartReply(m) => m.encoded_len(),
            Body::QueueGetConfigRequest(_) => 8,
            Body::QueueGetConfigReply(q) => 8 + q.queues.len(),
            Body::RoleRequest(_) | Body::RoleReply(_) => 16,
            Body::GetAsyncReply(_) | Body::SetAsync(_) => 24,
            Body::MeterMod(m) => 8 + bands_len(&m.bands),
            Body::Unknown { body, .. } => body.len(),
        }
    }

    fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        match self {
            Body::Hello(h) => h.encode_body(out)?,
            Body::Error(e) => e.encode_body(out),
            Body::EchoRequest(d) | Body::EchoReply(d) => out.extend_from_slice(d),
            Body::Experimenter(e) => {
                put_u32(out, e.experimenter);
                put_u32(out, e.exp_type);
                out.extend_from_slice(&e.data);
            }
            Body::FeaturesRequest
            | Body::GetConfigRequest
            | Body::BarrierRequest
            | Body::BarrierReply
            | Body::GetAsyncRequest => {}
            Body::FeaturesReply(f) => {
                put_u64(out, f.datapath_id);
                put_u32(out, f.n_buffers);
                out.push(f.n_tables);
                out.push(f.auxiliary_id);
                put_zeros(out, 2);
                put_u32(out, f.capabilities);
                put_u32(out, f.reserved);
            }
            Body::GetConfigReply(c) | Body::SetConfig(c) => {
                put_u16(out, c.flags);
                put_u16(out, c.miss_send_len);
            }
            Body::PacketIn(p) => {
                put_u32(out, p.buffer_id);
                put_u16(out, p.total_len);
                out.push(p.reason.into());
                out.push(p.table_id);
                put_u64(out, p.cookie);
                p.match_.encode(out)?;
                put_zeros(out, 2);
                out.extend_from_slice(&p.data);
            }
            Body::FlowRemoved(f) => {
                put_u64(out, f.cookie);
                put_u16(out, f.priority);
                out.push(f.reason.into());
                out.push(f.table_id);
                put_u32(out, f.duration_sec);
                put_u32(out, f.duration_nsec);
                put_u16(out, f.idle_timeout);
                put_u16(out, f.hard_timeout);
                put_u64(out, f.packet_count);
                put_u64(out, f.byte_count);
                f.match_.encode(out)?;
            }
            Body::PortStatus(p) => {
                out.push(p.reason.into());
                put_zeros(out, 7);
                p.desc.encode(out)?;
            }
            Body::PacketOut(p) => {
                put_u32(out, p.buffer_id);
                put_u32(out, p.in_port);
                let at = out.len();
                put_u16(out, 0);
                put_zeros(out, 6);
                let start = out.len();
                encode_actions(&p.actions, out)?;
                let len = out.len() - start;
                patch_len16(out, at, len, "packet-out actions")?;
                out.extend_from_slice(&p.data);
            }
            Body::FlowMod(f) => {
                put_u64(out, f.cookie);
                put_u64(out, f.cookie_mask);
                out.push(f.table_id);
                out.push(f.command.into());
                put_u16(out, f.idle_timeout);
                put_u16(out, f.hard_timeout);
                put_u16(out, f.priority);
                put_u32(out, f.buffer_id);
                put_u32(out, f.out_port);
                put_u32(out, f.out_group);
                put_u16(out, f.flags);
                put_zeros(out, 2);
                f.match_.encode(out)?;
                encode_instructions(&f.instructions, out)?;
            }
            Body::GroupMod(g) => {
                put_u16(out, g.command.into());
                out.push(g.group_type.into());
                out.push(0);
                put_u32(out, g.group_id);
                encode_buckets(&g.buckets, out)?;
            }
            Body::PortMod(p) => {
                put_u32(out, p.port_no);
                put_zeros(out, 4);
                out.extend_from_slice(&p.hw_addr.0);
                put_zeros(out, 2);
                put_u32(out, p.config);
                put_u32(out, p.mask);
                put_u32(out, p.advertise);
                put_zeros(out, 4);
            }
            Body::TableMod(t) => {
                out.push(t.table_id);
                put_zeros(out, 3);
                put_u32(out, t.config);
            }
            Body::MultipartRequest(m) => m.encode(out)?,
            Body::MultipartReply(m) => m.encode(out)?,
            Body::QueueGetConfigRequest(port) => {
                put_u32(out, *port);
                put_zeros(out, 4);
            }
            Body::QueueGetConfigReply(q) => {
                put_u32(out, q.port);
                put_zeros(out, 4);
                out.extend_from_slice(&q.queues);
            }
            Body::RoleRequest(r) | Body::RoleReply(r) => {
                put_u32(out, r.role.into());
                put_zeros(out, 4);
                put_u64(out, r.generation_id);
            }
            Body::GetAsyncReply(a) | Body::SetAsync(a) => {
                for v in a
                    .packet_in_mask
                    .iter()
                    .chain(&a.port_status_mask)
                    .chain(&a.flow_removed_mask)
                {
                    put_u32(out, *v);
                }
            }
            Body::MeterMod(m) => {
                put_u16(out, m.command.into());
                put_u16(out, m.flags);
                put_u32(out, m.meter_id);
                encode_bands(&m.bands, out)?;
            }
            Body::Unknown { body, .. } => out.extend_from_slice(body),
        }
        Ok(())
    }

    fn decode(version: u8, typ: u8, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let fixed = |r: &Reader<'_>, want: usize| {
            if r.remaining() == want {
                Ok(())
            } else {
                Err(DecodeError::BadMessageLength {
                    typ,
                    len: r.remaining(),
                })
            }
        };
        let body = match MessageType::from(typ) {
            MessageType::Hello => Body::Hello(Hello::decode_body(version, r)?),
            MessageType::Error => Body::Error(ErrorMsg::decode_body(r)?),
            MessageType::EchoRequest => Body::EchoRequest(r.rest().to_vec()),
            MessageType::EchoReply => Body::EchoReply(r.rest().to_vec()),
            MessageType::Experimenter => Body::Experimenter(Experimenter {
                experimenter: r.u32()?,
                exp_type: r.u32()?,
                data: r.rest().to_vec(),
            }),
            MessageType::FeaturesRequest => {
                fixed(r, 0)?;
                Body::FeaturesRequest
            }
            MessageType::FeaturesReply => {
                fixed(r, 24)?;
                let datapath_id = r.u64()?;
                let n_buffers = r.u32()?;
                let n_tables = r.u8()?;
                let auxiliary_id = r.u8()?;
                r.skip(2)?;
                Body::FeaturesReply(SwitchFeatures {
                    datapath_id,
                    n_buffers,
                    n_tables,
                    auxiliary_id,
                    capabilities: r.u32()?,
                    reserved: r.u32()?,
                })
            }
            MessageType::GetConfigRequest => {
                fixed(r, 0)?;
                Body::GetConfigRequest
            }
            MessageType::GetConfigReply | MessageType::SetConfig => {
                fixed(r, 4)?;
                let c = SwitchConfig {
                    flags: r.u16()?,
                    miss_send_len: r.u16()?,
                };
                if typ == u8::from(MessageType::SetConfig) {
                    Body::SetConfig(c)
                } else {
                    Body::GetConfigReply(c)
                }
            }
            MessageType::PacketIn => {
                let buffer_id = r.u32()?;
                let total_len = r.u16()?;
                let reason = r.u8()?.into();
                let table_id = r.u8()?;
                let cookie = r.u64()?;
                let match_ = Match::decode(r)?;
                r.skip(2)?;
                Body::PacketIn(PacketIn {
                    buffer_id,
                    total_len,
                    reason,
                    table_id,
                    cookie,
                    match_,
                    data: r.rest().to_vec(),
                })
            }
            MessageType::FlowRemoved => {
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
                Body::FlowRemoved(FlowRemoved {
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
            MessageType::PortStatus => {
                fixed(r, 8 + Port::LEN)?;
                let reason = r.u8()?.into();
                r.skip(7)?;
                Body::PortStatus(PortStatus {
                    reason,
                    desc: Port::decode(r)?,
                })
            }
            MessageType::PacketOut => {
                let buffer_id = r.u32()?;
                let in_port = r.u32()?;
                let alen = usize::from(r.u16()?);
                r.skip(6)?;
                let mut ar = r.sub(alen, "packet-out actions")?;
                let actions = decode_actions(&mut ar)?;
                Body::PacketOut(PacketOut {
                    buffer_id,
                    in_port,
                    actions,
                    data: r.rest().to_vec(),
                })
            }
            MessageType::FlowMod => {
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
                Body::FlowMod(FlowMod {
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
            MessageType::GroupMod => {
                let command = r.u16()?.into();
                let group_type = r.u8()?.into();
                r.skip(1)?;
                let group_id = r.u32()?;
                Body::GroupMod(GroupMod {
                    command,
                    group_type,
                    group_id,
                    buckets: decode_buckets(r)?,
                })
            }
            MessageType::PortMod => {
                fixed(r, 32)?;
                let port_no = r.u32()?;
                r.skip(4)?;
                let hw_addr = MacAddr(r.array()?);
                r.skip(2)?;
                let p = PortMod {
                    port_no,
                    hw_addr,
                    config: r.u32()?,
                    mask: r.u32()?,
                    advertise: r.u32()?,
                };
                r.skip(4)?;
                Body::PortMod(p)
            }
            MessageType::TableMod => {
                fixed(r, 8)?;
                let table_id = r.u8()?;
                r.skip(3)?;
                Body::TableMod(TableMod {
                    table_id,
                    config: r.u32()?,
                })
            }
            MessageType::MultipartRequest => Body::MultipartRequest(MultipartRequest::decode(r)?),
            MessageType::MultipartReply => Body::MultipartReply(MultipartReply::decode(r)?),
            MessageType::BarrierRequest => {
                fixed(r, 0)?;
                Body::BarrierRequest
            }
            MessageType::BarrierReply => {
                fixed(r, 0)?;
                Body::BarrierReply
            }
            MessageType::QueueGetConfigRequest => {
                fixed(r, 8)?;
                let port = r.u32()?;
                r.skip(4)?;
                Body::QueueGetConfigRequest(port)
            }
            MessageType::QueueGetConfigReply => {
                let port = r.u32()?;
                r.skip(4)?;
                Body::QueueGetConfigReply(QueueGetConfigReply {
                    port,
                    queues: r.rest().to_vec(),
                })
            }
            MessageType::RoleRequest | MessageType::RoleReply => {
                fixed(r, 16)?;
                let role = r.u32()?.into();
                r.skip(4)?;
                let ro = Role {
                    role,
                    generation_id: r.u64()?,
                };
                if typ == u8::from(MessageType::RoleRequest) {
                    Body::RoleRequest(ro)
                } else {
                    Body::RoleReply(ro)
                }
            }
            MessageType::GetAsyncRequest => {
                fixed(r, 0)?;
                Body::GetAsyncRequest
            }
            MessageType::GetAsyncReply | MessageType::SetAsync => {
                fixed(r, 24)?;
                let a = AsyncConfig {
                    packet_in_mask: [r.u32()?, r.u32()?],
                    port_status_mask: [r.u32()?, r.u32()?],
                    flow_removed_mask: [r.u32()?, r.u32()?],
                };
                if typ == u8::from(MessageType::SetAsync) {
                    Body::SetAsync(a)
                } else {
                    Body::GetAsyncReply(a)
                }
            }
            MessageType::MeterMod => {
                let command = r.u16()?.into();
                let flags = r.u16()?;
                let meter_id = r.u32()?;
                Body::MeterMod(MeterMod {
                    command,
                    flags,
                    meter_id,
                    bands: decode_bands(r)?,
                })
            }
            MessageType::Unknown(typ) => Body::Unknown {
                typ,
                body: r.rest().to_vec(),
            },
        };
        Ok(body)
    }
}

/// One OpenFlow message: transaction id and body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Message {
    /// Transaction id; replies carry the request's.
    pub xid: u32,
    /// Body.
    pub body: Body,
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

impl Message {
    /// A message with `xid` and `body`.
    pub fn new(xid: u32, body: Body) -> Self {
        Message { xid, body }
    }

    /// Bytes on the wire (header included).
    pub fn encoded_len(&self) -> usize {
        OFP_HEADER_LEN + self.body.encoded_len()
    }

    /// Appends the message to `out`. On error `out` is left as it was.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = out.len();
        let version = match &self.body {
            Body::Hello(h) => h.version,
            _ => OFP_VERSION_1_3,
        };
        out.push(version);
        out.push(self.body.message_type().into());
        put_u16(out, 0);
        put_u32(out, self.xid);
        let res = self.body.encode(out).and_then(|()| {
            let len = out.len() - start;
            patch_len16(out, start + 2, len, "ofp_header")
        });
        if res.is_err() {
            out.truncate(start);
        }
        res
    }

    /// The message as a new buffer.
    pub fn to_bytes(&self) -> Result<Vec<u8>, EncodeError> {
        let mut v = Vec::with_capacity(self.encoded_len());
        self.encode(&mut v)?;
        Ok(v)
    }

    /// Decodes the first message of a byte stream: `Ok(None)` when `buf` does not yet hold a whole
    /// message, otherwise the message and the bytes it used.
    pub fn decode(buf: &[u8]) -> Result<Option<(Message, usize)>, DecodeError> {
        let Some(len) = frame_len(buf)? else {
            return Ok(None);
        };
        let Some(frame) = buf.get(..len) else {
            return Ok(None);
        };
        Ok(Some((Self::decode_exact(frame)?, len)))
    }

    /// Decodes one message that fills `buf` exactly.
    pub fn decode_exact(buf: &[u8]) -> Result<Message, DecodeError> {
        let mut r = Reader::new(buf, "ofp_header");
        let version = r.u8()?;
        let typ = r.u8()?;
        let length = usize::from(r.u16()?);
        let xid = r.u32()?;
        if length != buf.len() {
            return Err(DecodeError::BadLength {
                what: "ofp_header",
                len: length,
            });
        }
        if version != OFP_VERSION_1_3 && typ != u8::from(MessageType::Hello) {
            return Err(DecodeError::BadVersion(version));
        }
        let mut body_r = Reader::new(r.rest(), "message body");
        let body = Body::decode(version, typ, &mut body_r)?;
        body_r.finish()?;
        Ok(Message { xid, body })
    }
}
