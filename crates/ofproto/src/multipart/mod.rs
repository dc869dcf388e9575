//! OFPT_MULTIPART_REQUEST / OFPT_MULTIPART_REPLY bodies (OpenFlow 1.3.5 §7.3.5).
//!
//! ```text
//! ofp_multipart_request / ofp_multipart_reply (after ofp_header):
//! +---------------+---------------+---------------+---------------+
//! |            type               |   flags (OFPMPF_REQ/REPLY_MORE) |
//! +---------------+---------------+---------------+---------------+
//! |                           pad[4]                              |
//! +---------------+---------------+---------------+---------------+
//! |   body (type-specific) ...                                    |
//! ```
//!
//! One message carries one part; the channel ([`crate::channel`]) reassembles the parts of a
//! reply that has OFPMPF_REPLY_MORE set. TABLE_FEATURES bodies are kept as opaque bytes.
//!
//! This module holds the framing ([`MultipartRequest`], [`MultipartReply`]) and dispatches on
//! `ofp_multipart_type`; the bodies live in one submodule per family, all re-exported here:
//! `desc` (§7.3.5.1), `flow_stats` (flow, aggregate, table: §7.3.5.2–§7.3.5.4), `port_stats`
//! (port, queue: §7.3.5.6, §7.3.5.8), `group_stats` (§7.3.5.9–§7.3.5.11) and `meter_stats`
//! (§7.3.5.12–§7.3.5.14).

mod desc;
mod flow_stats;
mod group_stats;
mod meter_stats;
mod port_stats;

pub use self::desc::{Desc, DESC_STR_LEN, SERIAL_NUM_LEN};
pub use self::flow_stats::{AggregateStats, FlowStats, FlowStatsRequest, TableStats};
pub use self::group_stats::{GroupDesc, GroupFeatures, GroupStats};
pub use self::meter_stats::{MeterConfig, MeterFeatures, MeterStats};
pub use self::port_stats::{PortStats, QueueStats};

use crate::error::{DecodeError, EncodeError};
use crate::experimenter::Experimenter;
use crate::macros::enum_with_unknown;
use crate::port::Port;
use crate::wire::{put_u16, put_u32, put_zeros, Reader};

/// OFPMPF_REQ_MORE / OFPMPF_REPLY_MORE: more parts follow.
pub const OFPMPF_MORE: u16 = 1;

enum_with_unknown! {
    /// `ofp_multipart_type`.
    pub enum MultipartType(u16) {
        /// OFPMP_DESC.
        Desc = 0,
        /// OFPMP_FLOW.
        Flow = 1,
        /// OFPMP_AGGREGATE.
        Aggregate = 2,
        /// OFPMP_TABLE.
        Table = 3,
        /// OFPMP_PORT_STATS.
        PortStats = 4,
        /// OFPMP_QUEUE.
        Queue = 5,
        /// OFPMP_GROUP.
        Group = 6,
        /// OFPMP_GROUP_DESC.
        GroupDesc = 7,
        /// OFPMP_GROUP_FEATURES.
        GroupFeatures = 8,
        /// OFPMP_METER.
        Meter = 9,
        /// OFPMP_METER_CONFIG.
        MeterConfig = 10,
        /// OFPMP_METER_FEATURES.
        MeterFeatures = 11,
        /// OFPMP_TABLE_FEATURES.
        TableFeatures = 12,
        /// OFPMP_PORT_DESC.
        PortDesc = 13,
        /// OFPMP_EXPERIMENTER.
        Experimenter = 0xffff,
    }
}

/// A multipart request body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MultipartRequestBody {
    /// OFPMP_DESC (empty body).
    Desc,
    /// OFPMP_FLOW.
    Flow(FlowStatsRequest),
    /// OFPMP_AGGREGATE.
    Aggregate(FlowStatsRequest),
    /// OFPMP_TABLE (empty body).
    Table,
    /// OFPMP_PORT_STATS: `| port_no u32 | pad[4] |` (OFPP_ANY: all ports).
    PortStats(u32),
    /// OFPMP_QUEUE: `| port_no u32 | queue_id u32 |`.
    Queue {
        /// Port, or OFPP_ANY.
        port_no: u32,
        /// Queue, or OFPQ_ALL.
        queue_id: u32,
    },
    /// OFPMP_GROUP: `| group_id u32 | pad[4] |`.
    Group(u32),
    /// OFPMP_GROUP_DESC (empty body).
    GroupDesc,
    /// OFPMP_GROUP_FEATURES (empty body).
    GroupFeatures,
    /// OFPMP_METER: `| meter_id u32 | pad[4] |`.
    Meter(u32),
    /// OFPMP_METER_CONFIG: `| meter_id u32 | pad[4] |`.
    MeterConfig(u32),
    /// OFPMP_METER_FEATURES (empty body).
    MeterFeatures,
    /// OFPMP_TABLE_FEATURES: `ofp_table_features` list, opaque.
    TableFeatures(Vec<u8>),
    /// OFPMP_PORT_DESC (empty body).
    PortDesc,
    /// OFPMP_EXPERIMENTER: `| experimenter u32 | exp_type u32 | data |`.
    Experimenter(Experimenter),
    /// A multipart type 1.3 does not define, body verbatim.
    Unknown {
        /// The type.
        typ: u16,
        /// The body.
        data: Vec<u8>,
    },
}

/// OFPT_MULTIPART_REQUEST body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MultipartRequest {
    /// OFPMPF_REQ_MORE.
    pub flags: u16,
    /// Type and body.
    pub body: MultipartRequestBody,
}

impl MultipartRequest {
    /// A single-part request.
    pub fn new(body: MultipartRequestBody) -> Self {
        MultipartRequest { flags: 0, body }
    }

    /// `ofp_multipart_type`.
    pub fn multipart_type(&self) -> MultipartType {
        use MultipartRequestBody as B;
        match &self.body {
            B::Desc => MultipartType::Desc,
            B::Flow(_) => MultipartType::Flow,
            B::Aggregate(_) => MultipartType::Aggregate,
            B::Table => MultipartType::Table,
            B::PortStats(_) => MultipartType::PortStats,
            B::Queue { .. } => MultipartType::Queue,
            B::Group(_) => MultipartType::Group,
            B::GroupDesc => MultipartType::GroupDesc,
            B::GroupFeatures => MultipartType::GroupFeatures,
            B::Meter(_) => MultipartType::Meter,
            B::MeterConfig(_) => MultipartType::MeterConfig,
            B::MeterFeatures => MultipartType::MeterFeatures,
            B::TableFeatures(_) => MultipartType::TableFeatures,
            B::PortDesc => MultipartType::PortDesc,
            B::Experimenter(_) => MultipartType::Experimenter,
            B::Unknown { typ, .. } => MultipartType::from(*typ),
        }
    }

    pub(crate) fn encoded_len(&self) -> usize {
        use MultipartRequestBody as B;
        8 + match &self.body {
            B::Desc
            | B::Table
            | B::GroupDesc
            | B::GroupFeatures
            | B::MeterFeatures
            | B::PortDesc => 0,
            B::Flow(f) | B::Aggregate(f) => f.encoded_len(),
            B::PortStats(_) | B::Queue { .. } | B::Group(_) | B::Meter(_) | B::MeterConfig(_) => 8,
            B::TableFeatures(d) | B::Unknown { data: d, .. } => d.len(),
            B::Experimenter(e) => e.encoded_len(),
        }
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        use MultipartRequestBody as B;
        put_u16(out, self.multipart_type().into());
        put_u16(out, self.flags);
        put_zeros(out, 4);
        match &self.body {
            B::Desc
            | B::Table
            | B::GroupDesc
            | B::GroupFeatures
            | B::MeterFeatures
            | B::PortDesc => {}
            B::Flow(f) | B::Aggregate(f) => f.encode(out)?,
            B::PortStats(v) | B::Group(v) | B::Meter(v) | B::MeterConfig(v) => {
                put_u32(out, *v);
                put_zeros(out, 4);
            }
            B::Queue { port_no, queue_id } => {
                put_u32(out, *port_no);
                put_u32(out, *queue_id);
            }
            B::TableFeatures(d) | B::Unknown { data: d, .. } => out.extend_from_slice(d),
            B::Experimenter(e) => e.encode(out),
        }
        Ok(())
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        use MultipartRequestBody as B;
        let typ = r.u16()?;
        let flags = r.u16()?;
        r.skip(4)?;
        let want = |r: &Reader<'_>, n: usize| {
            if r.remaining() == n {
                Ok(())
            } else {
                Err(DecodeError::BadMultipartLength {
                    typ,
                    len: r.remaining(),
                })
            }
        };
        let body = match MultipartType::from(typ) {
            MultipartType::Desc => want(r, 0).map(|()| B::Desc)?,
            MultipartType::Table => want(r, 0).map(|()| B::Table)?,
            MultipartType::GroupDesc => want(r, 0).map(|()| B::GroupDesc)?,
            MultipartType::GroupFeatures => want(r, 0).map(|()| B::GroupFeatures)?,
            MultipartType::MeterFeatures => want(r, 0).map(|()| B::MeterFeatures)?,
            MultipartType::PortDesc => want(r, 0).map(|()| B::PortDesc)?,
            MultipartType::Flow | MultipartType::Aggregate => {
                let f = FlowStatsRequest::decode(r)?;
                if typ == u16::from(MultipartType::Flow) {
                    B::Flow(f)
                } else {
                    B::Aggregate(f)
                }
            }
            t @ (MultipartType::PortStats
            | MultipartType::Group
            | MultipartType::Meter
            | MultipartType::MeterConfig) => {
                want(r, 8)?;
                let v = r.u32()?;
                r.skip(4)?;
                match t {
                    MultipartType::PortStats => B::PortStats(v),
                    MultipartType::Group => B::Group(v),
                    MultipartType::Meter => B::Meter(v),
                    _ => B::MeterConfig(v),
                }
            }
            MultipartType::Queue => {
                want(r, 8)?;
                B::Queue {
                    port_no: r.u32()?,
                    queue_id: r.u32()?,
                }
            }
            MultipartType::TableFeatures => B::TableFeatures(r.rest().to_vec()),
            MultipartType::Experimenter => B::Experimenter(Experimenter {
                experimenter: r.u32()?,
                exp_type: r.u32()?,
                data: r.rest().to_vec(),
            }),
            MultipartType::Unknown(typ) => B::Unknown {
                typ,
                data: r.rest().to_vec(),
            },
        };
        Ok(MultipartRequest { flags, body })
    }
}

/// A multipart reply body (one part).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MultipartReplyBody {
    /// OFPMP_DESC.
    Desc(Desc),
    /// OFPMP_FLOW.
    Flow(Vec<FlowStats>),
    /// OFPMP_AGGREGATE.
    Aggregate(AggregateStats),
    /// OFPMP_TABLE.
    Table(Vec<TableStats>),
    /// OFPMP_PORT_STATS.
    PortStats(Vec<PortStats>),
    /// OFPMP_QUEUE.
    Queue(Vec<QueueStats>),
    /// OFPMP_GROUP.
    Group(Vec<GroupStats>),
    /// OFPMP_GROUP_DESC.
    GroupDesc(Vec<GroupDesc>),
    /// OFPMP_GROUP_FEATURES.
    GroupFeatures(GroupFeatures),
    /// OFPMP_METER.
    Meter(Vec<MeterStats>),
    /// OFPMP_METER_CONFIG.
    MeterConfig(Vec<MeterConfig>),
    /// OFPMP_METER_FEATURES.
    MeterFeatures(MeterFeatures),
    /// OFPMP_TABLE_FEATURES, opaque.
    TableFeatures(Vec<u8>),
    /// OFPMP_PORT_DESC.
    PortDesc(Vec<Port>),
    /// OFPMP_EXPERIMENTER.
    Experimenter(Experimenter),
    /// A multipart type 1.3 does not define, body verbatim.
    Unknown {
        /// The type.
        typ: u16,
        /// The body.
        data: Vec<u8>,
    },
}

/// OFPT_MULTIPART_REPLY body (one part).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MultipartReply {
    /// OFPMPF_REPLY_MORE when more parts follow.
    pub flags: u16,
    /// Type and body.
    pub body: MultipartReplyBody,
}

impl MultipartReplyBody {
    /// `ofp_multipart_type`.
    pub fn multipart_type(&self) -> MultipartType {
        use MultipartReplyBody as B;
        match self {
            B::Desc(_) => MultipartType::Desc,
            B::Flow(_) => MultipartType::Flow,
            B::Aggregate(_) => MultipartType::Aggregate,
            B::Table(_) => MultipartType::Table,
            B::PortStats(_) => MultipartType::PortStats,
            B::Queue(_) => MultipartType::Queue,
            B::Group(_) => MultipartType::Group,
            B::GroupDesc(_) => MultipartType::GroupDesc,
            B::GroupFeatures(_) => MultipartType::GroupFeatures,
            B::Meter(_) => MultipartType::Meter,
            B::MeterConfig(_) => MultipartType::MeterConfig,
            B::MeterFeatures(_) => MultipartType::MeterFeatures,
            B::TableFeatures(_) => MultipartType::TableFeatures,
            B::PortDesc(_) => MultipartType::PortDesc,
            B::Experimenter(_) => MultipartType::Experimenter,
            B::Unknown { typ, .. } => MultipartType::from(*typ),
        }
    }

    /// Appends the entries of a later part of the same reply (multipart reassembly). Returns
    /// `false` (and leaves `self` unchanged) when the types differ or the type is not a list.
    pub fn extend(&mut self, next: MultipartReplyBody) -> bool {
        use MultipartReplyBody as B;
        match (self, next) {
            (B::Flow(a), B::Flow(b)) => a.extend(b),
            (B::Table(a), B::Table(b)) => a.extend(b),
            (B::PortStats(a), B::PortStats(b)) => a.extend(b),
            (B::Queue(a), B::Queue(b)) => a.extend(b),
            (B::Group(a), B::Group(b)) => a.extend(b),
            (B::GroupDesc(a), B::GroupDesc(b)) => a.extend(b),
            (B::Meter(a), B::Meter(b)) => a.extend(b),
            (B::MeterConfig(a), B::MeterConfig(b)) => a.extend(b),
            (B::PortDesc(a), B::PortDesc(b)) => a.extend(b),
            (B::TableFeatures(a), B::TableFeatures(b)) => a.extend(b),
            _ => return false,
        }
        true
    }
}

impl MultipartReply {
    /// A single-part reply.
    pub fn new(body: MultipartReplyBody) -> Self {
        MultipartReply { flags: 0, body }
    }

    /// Whether OFPMPF_REPLY_MORE is set.
    pub fn more(&self) -> bool {
        self.flags & OFPMPF_MORE != 0
    }

    pub(crate) fn encoded_len(&self) -> usize {
        use MultipartReplyBody as B;
        8 + match &self.body {
            B::Desc(_) => Desc::BODY_LEN,
            B::Flow(v) => v.iter().map(FlowStats::encoded_len).sum(),
            B::Aggregate(_) => AggregateStats::BODY_LEN,
            B::Table(v) => TableStats::LEN * v.len(),
            B::PortStats(v) => PortStats::LEN * v.len(),
            B::Queue(v) => QueueStats::LEN * v.len(),
            B::Group(v) => v.iter().map(GroupStats::encoded_len).sum(),
            B::GroupDesc(v) => v.iter().map(GroupDesc::encoded_len).sum(),
            B::GroupFeatures(_) => GroupFeatures::BODY_LEN,
            B::Meter(v) => v.iter().map(MeterStats::encoded_len).sum(),
            B::MeterConfig(v) => v.iter().map(MeterConfig::encoded_len).sum(),
            B::MeterFeatures(_) => MeterFeatures::BODY_LEN,
            B::TableFeatures(d) | B::Unknown { data: d, .. } => d.len(),
            B::PortDesc(v) => Port::LEN * v.len(),
            B::Experimenter(e) => e.encoded_len(),
        }
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        use MultipartReplyBody as B;
        put_u16(out, self.body.multipart_type().into());
        put_u16(out, self.flags);
        put_zeros(out, 4);
        match &self.body {
            B::Desc(d) => d.encode_body(out)?,
            B::Flow(v) => v.iter().try_for_each(|f| f.encode(out))?,
            B::Aggregate(a) => a.encode_body(out),
            B::Table(v) => v.iter().for_each(|t| t.encode(out)),
            B::PortStats(v) => v.iter().for_each(|p| p.encode(out)),
            B::Queue(v) => v.iter().for_each(|q| q.encode(out)),
            B::Group(v) => v.iter().try_for_each(|g| g.encode(out))?,
            B::GroupDesc(v) => v.iter().try_for_each(|g| g.encode(out))?,
            B::GroupFeatures(g) => g.encode_body(out),
            B::Meter(v) => v.iter().try_for_each(|m| m.encode(out))?,
            B::MeterConfig(v) => v.iter().try_for_each(|m| m.encode(out))?,
            B::MeterFeatures(m) => m.encode_body(out),
            B::TableFeatures(d) | B::Unknown { data: d, .. } => out.extend_from_slice(d),
            B::PortDesc(v) => v.iter().try_for_each(|p| p.encode(out))?,
            B::Experimenter(e) => e.encode(out),
        }
        Ok(())
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        use MultipartReplyBody as B;
        let typ = r.u16()?;
        let flags = r.u16()?;
        r.skip(4)?;
        let bad_len = |r: &Reader<'_>| DecodeError::BadMultipartLength {
            typ,
            len: r.remaining(),
        };
        // Fixed-size bodies must have exactly their size.
        let fixed = |r: &Reader<'_>, size: usize| {
            if r.remaining() == size {
                Ok(())
            } else {
                Err(bad_len(r))
            }
        };
        // Fixed-size list entries: the body must be a whole number of them.
        let list = |r: &Reader<'_>, size: usize| {
            if r.remaining() % size == 0 {
                Ok(())
            } else {
                Err(bad_len(r))
            }
        };
        let body = match MultipartType::from(typ) {
            MultipartType::Desc => {
                fixed(r, Desc::BODY_LEN)?;
                B::Desc(Desc::decode_body(r)?)
            }
            MultipartType::Flow => B::Flow(decode_list(r, FlowStats::decode)?),
            MultipartType::Aggregate => {
                fixed(r, AggregateStats::BODY_LEN)?;
                B::Aggregate(AggregateStats::decode_body(r)?)
            }
            MultipartType::Table => {
                list(r, TableStats::LEN)?;
                B::Table(decode_fixed_list(r, TableStats::LEN, TableStats::decode)?)
            }
            MultipartType::PortStats => {
                list(r, PortStats::LEN)?;
                B::PortStats(decode_fixed_list(r, PortStats::LEN, PortStats::decode)?)
            }
            MultipartType::Queue => {
                list(r, QueueStats::LEN)?;
                B::Queue(decode_fixed_list(r, QueueStats::LEN, QueueStats::decode)?)
            }
            MultipartType::Group => B::Group(decode_list(r, GroupStats::decode)?),
            MultipartType::GroupDesc => B::GroupDesc(decode_list(r, GroupDesc::decode)?),
            MultipartType::GroupFeatures => {
                fixed(r, GroupFeatures::BODY_LEN)?;
                B::GroupFeatures(GroupFeatures::decode_body(r)?)
            }
            MultipartType::Meter => B::Meter(decode_list(r, MeterStats::decode)?),
            MultipartType::MeterConfig => B::MeterConfig(decode_list(r, MeterConfig::decode)?),
            MultipartType::MeterFeatures => {
                fixed(r, MeterFeatures::BODY_LEN)?;
                B::MeterFeatures(MeterFeatures::decode_body(r)?)
            }
            MultipartType::TableFeatures => B::TableFeatures(r.rest().to_vec()),
            MultipartType::PortDesc => {
                list(r, Port::LEN)?;
                B::PortDesc(decode_fixed_list(r, Port::LEN, Port::decode)?)
            }
            MultipartType::Experimenter => B::Experimenter(Experimenter::decode(r)?),
            MultipartType::Unknown(typ) => B::Unknown {
                typ,
                data: r.rest().to_vec(),
            },
        };
        Ok(MultipartReply { flags, body })
    }
}

/// Entries that each carry their own length, until `r` is empty.
fn decode_list<'a, T>(
    r: &mut Reader<'a>,
    mut entry: impl FnMut(&mut Reader<'a>) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    let mut v = Vec::new();
    while !r.is_empty() {
        v.push(entry(r)?);
    }
    Ok(v)
}

/// Entries of `size` bytes each, until `r` is empty; the caller checked that `r` holds a whole
/// number of them, so the capacity is what the input justifies.
fn decode_fixed_list<'a, T>(
    r: &mut Reader<'a>,
    size: usize,
    mut entry: impl FnMut(&mut Reader<'a>) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    let mut v = Vec::with_capacity(r.remaining() / size);
    while !r.is_empty() {
        v.push(entry(r)?);
    }
    Ok(v)
}
