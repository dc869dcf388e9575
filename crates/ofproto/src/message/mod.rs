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
//!
//! [`Body`] dispatches on `ofp_type`; each message family has its own submodule, all re-exported
//! here: `header` (§7.1), `hello` (§7.5.1), `switch` (features, config, table mod, queue config:
//! §7.3.1–§7.3.3, §7.3.6), `flow_mod` (§7.3.4.1), `modify` (group, port, meter mods:
//! §7.3.4.2–§7.3.4.4), `packet` (packet-in §7.4.1, packet-out §7.3.7), `status` (flow removed,
//! port status: §7.4.2–§7.4.3) and `controller` (role, async config: §7.3.9–§7.3.10). Multipart
//! bodies are in [`crate::multipart`], OFPT_ERROR in [`crate::ofp_error`].

mod controller;
mod flow_mod;
mod header;
mod hello;
mod modify;
mod packet;
mod status;
mod switch;

pub use self::controller::{AsyncConfig, ControllerRole, Role};
pub use self::flow_mod::{ofpff, FlowMod, FlowModCommand};
pub use self::header::{frame_len, Header, MessageType, OFP_HEADER_LEN, OFP_VERSION_1_3};
pub use self::hello::{Hello, HelloElement, OFPHET_VERSIONBITMAP};
pub use self::modify::{GroupMod, GroupModCommand, MeterMod, MeterModCommand, PortMod};
pub use self::packet::{PacketIn, PacketInReason, PacketOut, OFP_NO_BUFFER};
pub use self::status::{FlowRemoved, FlowRemovedReason, PortReason, PortStatus};
pub use self::switch::{QueueGetConfigReply, SwitchConfig, SwitchFeatures, TableMod};
pub use crate::experimenter::Experimenter;
pub use crate::table::{OFPTT_ALL, OFPTT_MAX};

use crate::error::{DecodeError, EncodeError};
use crate::multipart::{MultipartReply, MultipartRequest};
use crate::ofp_error::{ErrorCode, ErrorMsg};
use crate::wire::{patch_len16, put_u16, put_u32, put_zeros, Reader};

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
                let exp = matches!(e.code, ErrorCode::Experimenter { .. });
                4 + if exp { 4 } else { 0 } + e.data.len()
            }
            Body::EchoRequest(d) | Body::EchoReply(d) => d.len(),
            Body::Experimenter(e) => e.encoded_len(),
            Body::FeaturesRequest
            | Body::GetConfigRequest
            | Body::BarrierRequest
            | Body::BarrierReply
            | Body::GetAsyncRequest => 0,
            Body::FeaturesReply(_) => SwitchFeatures::BODY_LEN,
            Body::GetConfigReply(_) | Body::SetConfig(_) => SwitchConfig::BODY_LEN,
            Body::PacketIn(p) => p.body_len(),
            Body::FlowRemoved(f) => f.body_len(),
            Body::PortStatus(_) => PortStatus::BODY_LEN,
            Body::PacketOut(p) => p.body_len(),
            Body::FlowMod(f) => f.body_len(),
            Body::GroupMod(g) => g.body_len(),
            Body::PortMod(_) => PortMod::BODY_LEN,
            Body::TableMod(_) => TableMod::BODY_LEN,
            Body::MultipartRequest(m) => m.encoded_len(),
            Body::MultipartReply(m) => m.encoded_len(),
            Body::QueueGetConfigRequest(_) => 8,
            Body::QueueGetConfigReply(q) => q.body_len(),
            Body::RoleRequest(_) | Body::RoleReply(_) => Role::BODY_LEN,
            Body::GetAsyncReply(_) | Body::SetAsync(_) => AsyncConfig::BODY_LEN,
            Body::MeterMod(m) => m.body_len(),
            Body::Unknown { body, .. } => body.len(),
        }
    }

    fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        match self {
            Body::Hello(h) => h.encode_body(out)?,
            Body::Error(e) => e.encode_body(out),
            Body::EchoRequest(d) | Body::EchoReply(d) => out.extend_from_slice(d),
            Body::Experimenter(e) => e.encode(out),
            Body::FeaturesRequest
            | Body::GetConfigRequest
            | Body::BarrierRequest
            | Body::BarrierReply
            | Body::GetAsyncRequest => {}
            Body::FeaturesReply(f) => f.encode_body(out),
            Body::GetConfigReply(c) | Body::SetConfig(c) => c.encode_body(out),
            Body::PacketIn(p) => p.encode_body(out)?,
            Body::FlowRemoved(f) => f.encode_body(out)?,
            Body::PortStatus(p) => p.encode_body(out)?,
            Body::PacketOut(p) => p.encode_body(out)?,
            Body::FlowMod(f) => f.encode_body(out)?,
            Body::GroupMod(g) => g.encode_body(out)?,
            Body::PortMod(p) => p.encode_body(out),
            Body::TableMod(t) => t.encode_body(out),
            Body::MultipartRequest(m) => m.encode(out)?,
            Body::MultipartReply(m) => m.encode(out)?,
            Body::QueueGetConfigRequest(port) => {
                put_u32(out, *port);
                put_zeros(out, 4);
            }
            Body::QueueGetConfigReply(q) => q.encode_body(out),
            Body::RoleRequest(r) | Body::RoleReply(r) => r.encode_body(out),
            Body::GetAsyncReply(a) | Body::SetAsync(a) => a.encode_body(out),
            Body::MeterMod(m) => m.encode_body(out)?,
            Body::Unknown { body, .. } => out.extend_from_slice(body),
        }
        Ok(())
    }

    fn decode(version: u8, typ: u8, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        // Bodies of a fixed size are checked before they are read.
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
            MessageType::Experimenter => Body::Experimenter(Experimenter::decode(r)?),
            MessageType::FeaturesRequest => {
                fixed(r, 0)?;
                Body::FeaturesRequest
            }
            MessageType::FeaturesReply => {
                fixed(r, SwitchFeatures::BODY_LEN)?;
                Body::FeaturesReply(SwitchFeatures::decode_body(r)?)
            }
            MessageType::GetConfigRequest => {
                fixed(r, 0)?;
                Body::GetConfigRequest
            }
            MessageType::GetConfigReply | MessageType::SetConfig => {
                fixed(r, SwitchConfig::BODY_LEN)?;
                let c = SwitchConfig::decode_body(r)?;
                if typ == u8::from(MessageType::SetConfig) {
                    Body::SetConfig(c)
                } else {
                    Body::GetConfigReply(c)
                }
            }
            MessageType::PacketIn => Body::PacketIn(PacketIn::decode_body(r)?),
            MessageType::FlowRemoved => Body::FlowRemoved(FlowRemoved::decode_body(r)?),
            MessageType::PortStatus => {
                fixed(r, PortStatus::BODY_LEN)?;
                Body::PortStatus(PortStatus::decode_body(r)?)
            }
            MessageType::PacketOut => Body::PacketOut(PacketOut::decode_body(r)?),
            MessageType::FlowMod => Body::FlowMod(FlowMod::decode_body(r)?),
            MessageType::GroupMod => Body::GroupMod(GroupMod::decode_body(r)?),
            MessageType::PortMod => {
                fixed(r, PortMod::BODY_LEN)?;
                Body::PortMod(PortMod::decode_body(r)?)
            }
            MessageType::TableMod => {
                fixed(r, TableMod::BODY_LEN)?;
                Body::TableMod(TableMod::decode_body(r)?)
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
                Body::QueueGetConfigReply(QueueGetConfigReply::decode_body(r)?)
            }
            MessageType::RoleRequest | MessageType::RoleReply => {
                fixed(r, Role::BODY_LEN)?;
                let ro = Role::decode_body(r)?;
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
                fixed(r, AsyncConfig::BODY_LEN)?;
                let a = AsyncConfig::decode_body(r)?;
                if typ == u8::from(MessageType::SetAsync) {
                    Body::SetAsync(a)
                } else {
                    Body::GetAsyncReply(a)
                }
            }
            MessageType::MeterMod => Body::MeterMod(MeterMod::decode_body(r)?),
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
