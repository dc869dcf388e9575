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

use crate::error::{DecodeError, EncodeError};
use crate::group::{buckets_len, decode_buckets, encode_buckets, Bucket, GroupType};
use crate::instruction::{decode_instructions, encode_instructions, Instruction};
use crate::message::Experimenter;
use crate::meter::{bands_len, decode_bands, encode_bands, MeterBand};
use crate::oxm::Match;
use crate::port::Port;
use crate::wire::{
    enum_with_unknown, get_fixed_str, patch_len16, put_fixed_str, put_u16, put_u32, put_u64,
    put_zeros, Reader,
};

/// OFPMPF_REQ_MORE / OFPMPF_REPLY_MORE: more parts follow.
pub const OFPMPF_MORE: u16 = 1;

/// `DESC_STR_LEN`.
pub const DESC_STR_LEN: usize = 256;
/// `SERIAL_NUM_LEN`.
pub const SERIAL_NUM_LEN: usize = 32;

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

/// Body of OFPMP_FLOW and OFPMP_AGGREGATE requests (§7.3.5.2).
///
/// ```text
/// | table_id u8 | pad[3] | out_port u32 | out_group u32 | pad[4] | cookie u64 | cookie_mask u64 |
/// | ofp_match |
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowStatsRequest {
    /// Table, or OFPTT_ALL.
    pub table_id: u8,
    /// Require entries to output to this port (OFPP_ANY: any).
    pub out_port: u32,
    /// Require entries to output to this group (OFPG_ANY: any).
    pub out_group: u32,
    /// Cookie value.
    pub cookie: u64,
    /// Cookie bits that must match.
    pub cookie_mask: u64,
    /// Fields to match.
    pub match_: Match,
}

impl Default for FlowStatsRequest {
    fn default() -> Self {
        FlowStatsRequest {
            table_id: crate::message::OFPTT_ALL,
            out_port: crate::port::ofpp::ANY,
            out_group: crate::group::OFPG_ANY,
            cookie: 0,
            cookie_mask: 0,
            match_: Match::new(),
        }
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
            B::Flow(f) | B::Aggregate(f) => 32 + f.match_.encoded_len(),
            B::PortStats(_) | B::Queue { .. } | B::Group(_) | B::Meter(_) | B::MeterConfig(_) => 8,
            B::TableFeatures(d) | B::Unknown { data: d, .. } => d.len(),
            B::Experimenter(e) => 8 + e.data.len(),
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
            B::Flow(f) | B::Aggregate(f) => {
                out.push(f.table_id);
                put_zeros(out, 3);
                put_u32(out, f.out_port);
                put_u32(out, f.out_group);
                put_zeros(out, 4);
                put_u64(out, f.cookie);
                put_u64(out, f.cookie_mask);
                f.match_.encode(out)?;
            }
            B::PortStats(v) | B::Group(v) | B::Meter(v) | B::MeterConfig(v) => {
                put_u32(out, *v);
                put_zeros(out, 4);
            }
            B::Queue { port_no, queue_id } => {
                put_u32(out, *port_no);
                put_u32(out, *queue_id);
            }
            B::TableFeatures(d) | B::Unknown { data: d, .. } => out.extend_from_slice(d),
            B::Experimenter(e) => {
                put_u32(out, e.experimenter);
                put_u32(out, e.exp_type);
                out.extend_from_slice(&e.data);
            }
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
                let table_id = r.u8()?;
                r.skip(3)?;
                let out_port = r.u32()?;
                let out_group = r.u32()?;
                r.skip(4)?;
                let f = FlowStatsRequest {
                    table_id,
                    out_port,
                    out_group,
                    cookie: r.u64()?,
                    cookie_mask: r.u64()?,
                    match_: Match::decode(r)?,
                };
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

/// OFPMP_DESC reply (§7.3.5.1): five NUL-padded strings (each stored without its padding).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Desc {
    /// Manufacturer description (256).
    pub mfr_desc: Vec<u8>,
    /// Hardware description (256).
    pub hw_desc: Vec<u8>,
    /// Software description (256).
    pub sw_desc: Vec<u8>,
    /// Serial number (32).
    pub serial_num: Vec<u8>,
    /// Human readable description of datapath (256).
    pub dp_desc: Vec<u8>,
}

/// One entry of an OFPMP_FLOW reply (`ofp_flow_stats`, §7.3.5.2).
///
/// ```text
/// | length u16 | table_id u8 | pad u8 | duration_sec u32 | duration_nsec u32 | priority u16 |
/// | idle_timeout u16 | hard_timeout u16 | flags u16 | pad[4] | cookie u64 | packet_count u64 |
/// | byte_count u64 | ofp_match | instructions ... |
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowStats {
    /// Table.
    pub table_id: u8,
    /// Seconds alive.
    pub duration_sec: u32,
    /// Nanoseconds beyond `duration_sec`.
    pub duration_nsec: u32,
    /// Priority.
    pub priority: u16,
    /// Idle timeout.
    pub idle_timeout: u16,
    /// Hard timeout.
    pub hard_timeout: u16,
    /// OFPFF_* flags.
    pub flags: u16,
    /// Cookie.
    pub cookie: u64,
    /// Packets.
    pub packet_count: u64,
    /// Bytes.
    pub byte_count: u64,
    /// Match.
    pub match_: Match,
    /// Instructions.
    pub instructions: Vec<Instruction>,
}

impl FlowStats {
    fn encoded_len(&self) -> usize {
        48 + self.match_.encoded_len()
            + self
                .instructions
                .iter()
                .map(Instruction::encoded_len)
                .sum::<usize>()
    }

    fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = out.len();
        put_u16(out, 0);
        out.push(self.table_id);
        out.push(0);
        put_u32(out, self.duration_sec);
        put_u32(out, self.duration_nsec);
        put_u16(out, self.priority);
        put_u16(out, self.idle_timeout);
        put_u16(out, self.hard_timeout);
        put_u16(out, self.flags);
        put_zeros(out, 4);
        put_u64(out, self.cookie);
        put_u64(out, self.packet_count);
        put_u64(out, self.byte_count);
        self.match_.encode(out)?;
        encode_instructions(&self.instructions, out)?;
        let len = out.len() - start;
        patch_len16(out, start, len, "ofp_flow_stats")
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let len = usize::from(r.u16()?);
        if len < 56 {
            return Err(DecodeError::BadLength {
                what: "ofp_flow_stats",
                len,
            });
        }
        let mut b = r.sub(len - 2, "ofp_flow_stats")?;
        let table_id = b.u8()?;
        b.skip(1)?;
        let duration_sec = b.u32()?;
        let duration_nsec = b.u32()?;
        let priority = b.u16()?;
        let idle_timeout = b.u16()?;
        let hard_timeout = b.u16()?;
        let flags = b.u16()?;
        b.skip(4)?;
        Ok(FlowStats {
            table_id,
            duration_sec,
            duration_nsec,
            priority,
            idle_timeout,
            hard_timeout,
            flags,
            cookie: b.u64()?,
            packet_count: b.u64()?,
            byte_count: b.u64()?,
            match_: Match::decode(&mut b)?,
            instructions: decode_instructions(&mut b)?,
        })
    }
}

/// OFPMP_AGGREGATE reply: `| packet_count u64 | byte_count u64 | flow_count u32 | pad[4] |`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AggregateStats {
    /// Packets.
    pub packet_count: u64,
    /// Bytes.
    pub byte_count: u64,
    /// Flows.
    pub flow_count: u32,
}

/// One entry of an OFPMP_TABLE reply:
/// `| table_id u8 | pad[3] | active_count u32 | lookup_count u64 | matched_count u64 |`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TableStats {
    /// Table.
    pub table_id: u8,
    /// Active entries.
    pub active_count: u32,
    /// Packets looked up in table.
    pub lookup_count: u64,
    /// Packets that hit table.
    pub matched_count: u64,
}

/// One entry of an OFPMP_PORT_STATS reply (`ofp_port_stats`, 112 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PortStats {
    /// Port.
    pub port_no: u32,
    /// Received packets.
    pub rx_packets: u64,
    /// Transmitted packets.
    pub tx_packets: u64,
    /// Received bytes.
    pub rx_bytes: u64,
    /// Transmitted bytes.
    pub tx_bytes: u64,
    /// Packets dropped by RX.
    pub rx_dropped: u64,
    /// Packets dropped by TX.
    pub tx_dropped: u64,
    /// Receive errors.
    pub rx_errors: u64,
    /// Transmit errors.
    pub tx_errors: u64,
    /// Frame alignment errors.
    pub rx_frame_err: u64,
    /// Packets with RX overrun.
    pub rx_over_err: u64,
    /// CRC errors.
    pub rx_crc_err: u64,
    /// Collisions.
    pub collisions: u64,
    /// Seconds the port has been alive.
    pub duration_sec: u32,
    /// Nanoseconds beyond `duration_sec`.
    pub duration_nsec: u32,
}

/// One entry of an OFPMP_QUEUE reply (`ofp_queue_stats`, 40 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct QueueStats {
    /// Port.
    pub port_no: u32,
    /// Queue.
    pub queue_id: u32,
    /// Transmitted bytes.
    pub tx_bytes: u64,
    /// Transmitted packets.
    pub tx_packets: u64,
    /// Packets dropped due to overrun.
    pub tx_errors: u64,
    /// Seconds alive.
    pub duration_sec: u32,
    /// Nanoseconds beyond `duration_sec`.
    pub duration_nsec: u32,
}

/// One entry of an OFPMP_GROUP reply (`ofp_group_stats`).
///
/// ```text
/// | length u16 | pad[2] | group_id u32 | ref_count u32 | pad[4] | packet_count u64 |
/// | byte_count u64 | duration_sec u32 | duration_nsec u32 | (packet_count u64, byte_count u64)* |
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct GroupStats {
    /// Group.
    pub group_id: u32,
    /// Flows or groups that forward to this group.
    pub ref_count: u32,
    /// Packets.
    pub packet_count: u64,
    /// Bytes.
    pub byte_count: u64,
    /// Seconds alive.
    pub duration_sec: u32,
    /// Nanoseconds beyond `duration_sec`.
    pub duration_nsec: u32,
    /// Per bucket (packet_count, byte_count).
    pub bucket_stats: Vec<(u64, u64)>,
}

/// One entry of an OFPMP_GROUP_DESC reply:
/// `| length u16 | type u8 | pad u8 | group_id u32 | buckets ... |`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupDesc {
    /// Group type.
    pub group_type: GroupType,
    /// Group.
    pub group_id: u32,
    /// Buckets.
    pub buckets: Vec<Bucket>,
}

/// OFPMP_GROUP_FEATURES reply (40 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct GroupFeatures {
    /// Bitmap of (1 << OFPGT_*) supported.
    pub types: u32,
    /// OFPGFC_* bits.
    pub capabilities: u32,
    /// Maximum number of groups for each type.
    pub max_groups: [u32; 4],
    /// Bitmaps of (1 << OFPAT_*) supported per group type.
    pub actions: [u32; 4],
}

/// One entry of an OFPMP_METER reply (`ofp_meter_stats`).
///
/// ```text
/// | meter_id u32 | len u16 | pad[6] | flow_count u32 | packet_in_count u64 | byte_in_count u64 |
/// | duration_sec u32 | duration_nsec u32 | (packet_band_count u64, byte_band_count u64)* |
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct MeterStats {
    /// Meter.
    pub meter_id: u32,
    /// Flows bound to meter.
    pub flow_count: u32,
    /// Packets in input.
    pub packet_in_count: u64,
    /// Bytes in input.
    pub byte_in_count: u64,
    /// Seconds alive.
    pub duration_sec: u32,
    /// Nanoseconds beyond `duration_sec`.
    pub duration_nsec: u32,
    /// Per band (packet_band_count, byte_band_count).
    pub band_stats: Vec<(u64, u64)>,
}

/// One entry of an OFPMP_METER_CONFIG reply:
/// `| length u16 | flags u16 | meter_id u32 | bands ... |`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MeterConfig {
    /// OFPMF_* bits.
    pub flags: u16,
    /// Meter.
    pub meter_id: u32,
    /// Bands.
    pub bands: Vec<MeterBand>,
}

/// OFPMP_METER_FEATURES reply (16 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MeterFeatures {
    /// Maximum number of meters.
    pub max_meter: u32,
    /// Bitmap of (1 << OFPMBT_*) supported.
    pub band_types: u32,
    /// OFPMF_* bits.
    pub capabilities: u32,
    /// Maximum bands per meter.
    pub max_bands: u8,
    /// Maximum color value.
    pub max_color: u8,
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

fn put_u64s(out: &mut Vec<u8>, vs: &[u64]) {
    vs.iter().for_each(|v| put_u64(out, *v));
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
            B::Desc(_) => 4 * DESC_STR_LEN + SERIAL_NUM_LEN,
            B::Flow(v) => v.iter().map(FlowStats::encoded_len).sum(),
            B::Aggregate(_) => 24,
            B::Table(v) => 24 * v.len(),
            B::PortStats(v) => 112 * v.len(),
            B::Queue(v) => 40 * v.len(),
            B::Group(v) => v.iter().map(|g| 40 + 16 * g.bucket_stats.len()).sum(),
            B::GroupDesc(v) => v.iter().map(|g| 8 + buckets_len(&g.buckets)).sum(),
            B::GroupFeatures(_) => 40,
            B::Meter(v) => v.iter().map(|m| 40 + 16 * m.band_stats.len()).sum(),
            B::MeterConfig(v) => v.iter().map(|m| 8 + bands_len(&m.bands)).sum(),
            B::MeterFeatures(_) => 16,
            B::TableFeatures(d) | B::Unknown { data: d, .. } => d.len(),
            B::PortDesc(v) => Port::LEN * v.len(),
            B::Experimenter(e) => 8 + e.data.len(),
        }
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        use MultipartReplyBody as B;
        put_u16(out, self.body.multipart_type().into());
        put_u16(out, self.flags);
        put_zeros(out, 4);
        match &self.body {
            B::Desc(d) => {
                put_fixed_str(out, &d.mfr_desc, DESC_STR_LEN, "ofp_desc.mfr_desc")?;
                put_fixed_str(out, &d.hw_desc, DESC_STR_LEN, "ofp_desc.hw_desc")?;
                put_fixed_str(out, &d.sw_desc, DESC_STR_LEN, "ofp_desc.sw_desc")?;
                put_fixed_str(out, &d.serial_num, SERIAL_NUM_LEN, "ofp_desc.serial_num")?;
                put_fixed_str(out, &d.dp_desc, DESC_STR_LEN, "ofp_desc.dp_desc")?;
            }
            B::Flow(v) => v.iter().try_for_each(|f| f.encode(out))?,
            B::Aggregate(a) => {
                put_u64(out, a.packet_count);
                put_u64(out, a.byte_count);
                put_u32(out, a.flow_count);
                put_zeros(out, 4);
            }
            B::Table(v) => {
                for t in v {
                    out.push(t.table_id);
                    put_zeros(out, 3);
                    put_u32(out, t.active_count);
                    put_u64(out, t.lookup_count);
                    put_u64(out, t.matched_count);
                }
            }
            B::PortStats(v) => {
                for p in v {
                    put_u32(out, p.port_no);
                    put_zeros(out, 4);
                    put_u64s(
                        out,
                        &[
                            p.rx_packets,
                            p.tx_packets,
                            p.rx_bytes,
                            p.tx_bytes,
                            p.rx_dropped,
                            p.tx_dropped,
                            p.rx_errors,
                            p.tx_errors,
                            p.rx_frame_err,
                            p.rx_over_err,
                            p.rx_crc_err,
                            p.collisions,
                        ],
                    );
                    put_u32(out, p.duration_sec);
                    put_u32(out, p.duration_nsec);
                }
            }
            B::Queue(v) => {
                for q in v {
                    put_u32(out, q.port_no);
                    put_u32(out, q.queue_id);
                    put_u64s(out, &[q.tx_bytes, q.tx_packets, q.tx_errors]);
                    put_u32(out, q.duration_sec);
                    put_u32(out, q.duration_nsec);
                }
            }
            B::Group(v) => {
                for g in v {
                    let start = out.len();
                    put_u16(out, 0);
                    put_zeros(out, 2);
                    put_u32(out, g.group_id);
                    put_u32(out, g.ref_count);
                    put_zeros(out, 4);
                    put_u64(out, g.packet_count);
                    put_u64(out, g.byte_count);
                    put_u32(out, g.duration_sec);
                    put_u32(out, g.duration_nsec);
                    for (p, b) in &g.bucket_stats {
                        put_u64(out, *p);
                        put_u64(out, *b);
                    }
                    let len = out.len() - start;
                    patch_len16(out, start, len, "ofp_group_stats")?;
                }
            }
            B::GroupDesc(v) => {
                for g in v {
                    let start = out.len();
                    put_u16(out, 0);
                    out.push(g.group_type.into());
                    out.push(0);
                    put_u32(out, g.group_id);
                    encode_buckets(&g.buckets, out)?;
                    let len = out.len() - start;
                    patch_len16(out, start, len, "ofp_group_desc")?;
                }
            }
            B::GroupFeatures(g) => {
                put_u32(out, g.types);
                put_u32(out, g.capabilities);
                g.max_groups.iter().for_each(|v| put_u32(out, *v));
                g.actions.iter().for_each(|v| put_u32(out, *v));
            }
            B::Meter(v) => {
                for m in v {
                    let start = out.len();
                    put_u32(out, m.meter_id);
                    put_u16(out, 0);
                    put_zeros(out, 6);
                    put_u32(out, m.flow_count);
                    put_u64(out, m.packet_in_count);
                    put_u64(out, m.byte_in_count);
                    put_u32(out, m.duration_sec);
                    put_u32(out, m.duration_nsec);
                    for (p, b) in &m.band_stats {
                        put_u64(out, *p);
                        put_u64(out, *b);
                    }
                    let len = out.len() - start;
                    patch_len16(out, start + 4, len, "ofp_meter_stats")?;
                }
            }
            B::MeterConfig(v) => {
                for m in v {
                    let start = out.len();
                    put_u16(out, 0);
                    put_u16(out, m.flags);
                    put_u32(out, m.meter_id);
                    encode_bands(&m.bands, out)?;
                    let len = out.len() - start;
                    patch_len16(out, start, len, "ofp_meter_config")?;
                }
            }
            B::MeterFeatures(m) => {
                put_u32(out, m.max_meter);
                put_u32(out, m.band_types);
                put_u32(out, m.capabilities);
                out.push(m.max_bands);
                out.push(m.max_color);
                put_zeros(out, 2);
            }
            B::TableFeatures(d) | B::Unknown { data: d, .. } => out.extend_from_slice(d),
            B::PortDesc(v) => v.iter().try_for_each(|p| p.encode(out))?,
            B::Experimenter(e) => {
                put_u32(out, e.experimenter);
                put_u32(out, e.exp_type);
                out.extend_from_slice(&e.data);
            }
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
                if r.remaining() != 4 * DESC_STR_LEN + SERIAL_NUM_LEN {
                    return Err(bad_len(r));
                }
                B::Desc(Desc {
                    mfr_desc: get_fixed_str(r, DESC_STR_LEN)?,
                    hw_desc: get_fixed_str(r, DESC_STR_LEN)?,
                    sw_desc: get_fixed_str(r, DESC_STR_LEN)?,
                    serial_num: get_fixed_str(r, SERIAL_NUM_LEN)?,
                    dp_desc: get_fixed_str(r, DESC_STR_LEN)?,
                })
            }
            MultipartType::Flow => {
                let mut v = Vec::new();
                while !r.is_empty() {
                    v.push(FlowStats::decode(r)?);
                }
                B::Flow(v)
            }
            MultipartType::Aggregate => {
                if r.remaining() != 24 {
                    return Err(bad_len(r));
                }
                let a = AggregateStats {
                    packet_count: r.u64()?,
                    byte_count: r.u64()?,
                    flow_count: r.u32()?,
                };
                r.skip(4)?;
                B::Aggregate(a)
            }
            MultipartType::Table => {
                list(r, 24)?;
                let mut v = Vec::with_capacity(r.remaining() / 24);
                while !r.is_empty() {
                    let table_id = r.u8()?;
                    r.skip(3)?;
                    v.push(TableStats {
                        table_id,
                        active_count: r.u32()?,
                        lookup_count: r.u64()?,
                        matched_count: r.u64()?,
                    });
                }
                B::Table(v)
            }
            MultipartType::PortStats => {
                list(r, 112)?;
                let mut v = Vec::with_capacity(r.remaining() / 112);
                while !r.is_empty() {
                    let port_no = r.u32()?;
                    r.skip(4)?;
                    v.push(PortStats {
                        port_no,
                        rx_packets: r.u64()?,
                        tx_packets: r.u64()?,
                        rx_bytes: r.u64()?,
                        tx_bytes: r.u64()?,
                        rx_dropped: r.u64()?,
                        tx_dropped: r.u64()?,
                        rx_errors: r.u64()?,
                        tx_errors: r.u64()?,
                        rx_frame_err: r.u64()?,
                        rx_over_err: r.u64()?,
                        rx_crc_err: r.u64()?,
                        collisions: r.u64()?,
                        duration_sec: r.u32()?,
                        duration_nsec: r.u32()?,
                    });
                }
                B::PortStats(v)
            }
            MultipartType::Queue => {
                list(r, 40)?;
                let mut v = Vec::with_capacity(r.remaining() / 40);
                while !r.is_empty() {
                    v.push(QueueStats {
                        port_no: r.u32()?,
                        queue_id: r.u32()?,
                        tx_bytes: r.u64()?,
                        tx_packets: r.u64()?,
                        tx_errors: r.u64()?,
                        duration_sec: r.u32()?,
                        duration_nsec: r.u32()?,
                    });
                }
                B::Queue(v)
            }
            MultipartType::Group => {
                let mut v = Vec::new();
                while !r.is_empty() {
                    let len = usize::from(r.u16()?);
                    if len < 40 || (len - 40) % 16 != 0 {
                        return Err(DecodeError::BadLength {
                            what: "ofp_group_stats",
                            len,
                        });
                    }
                    let mut b = r.sub(len - 2, "ofp_group_stats")?;
                    b.skip(2)?;
                    let group_id = b.u32()?;
                    let ref_count = b.u32()?;
                    b.skip(4)?;
                    let mut g = GroupStats {
                        group_id,
                        ref_count,
                        packet_count: b.u64()?,
                        byte_count: b.u64()?,
                        duration_sec: b.u32()?,
                        duration_nsec: b.u32()?,
                        bucket_stats: Vec::with_capacity(b.remaining() / 16),
                    };
                    while !b.is_empty() {
                        g.bucket_stats.push((b.u64()?, b.u64()?));
                    }
                    v.push(g);
                }
                B::Group(v)
            }
            MultipartType::GroupDesc => {
                let mut v = Vec::new();
                while !r.is_empty() {
                    let len = usize::from(r.u16()?);
                    if len < 8 {
                        return Err(DecodeError::BadLength {
                            what: "ofp_group_desc",
                            len,
                        });
                    }
                    let mut b = r.sub(len - 2, "ofp_group_desc")?;
                    let group_type = b.u8()?.into();
                    b.skip(1)?;
                    let group_id = b.u32()?;
                    v.push(GroupDesc {
                        group_type,
                        group_id,
                        buckets: decode_buckets(&mut b)?,
                    });
                }
                B::GroupDesc(v)
            }
            MultipartType::GroupFeatures => {
                if r.remaining() != 40 {
                    return Err(bad_len(r));
                }
                B::GroupFeatures(GroupFeatures {
                    types: r.u32()?,
                    capabilities: r.u32()?,
                    max_groups: [r.u32()?, r.u32()?, r.u32()?, r.u32()?],
                    actions: [r.u32()?, r.u32()?, r.u32()?, r.u32()?],
                })
            }
            MultipartType::Meter => {
                let mut v = Vec::new();
                while !r.is_empty() {
                    let meter_id = r.u32()?;
                    let len = usize::from(r.u16()?);
                    if len < 40 || (len - 40) % 16 != 0 {
                        return Err(DecodeError::BadLength {
                            what: "ofp_meter_stats",
                            len,
                        });
                    }
                    let mut b = r.sub(len - 6, "ofp_meter_stats")?;
                    b.skip(6)?;
                    let mut m = MeterStats {
                        meter_id,
                        flow_count: b.u32()?,
                        packet_in_count: b.u64()?,
                        byte_in_count: b.u64()?,
                        duration_sec: b.u32()?,
                        duration_nsec: b.u32()?,
                        band_stats: Vec::with_capacity(b.remaining() / 16),
                    };
                    while !b.is_empty() {
                        m.band_stats.push((b.u64()?, b.u64()?));
                    }
                    v.push(m);
                }
                B::Meter(v)
            }
            MultipartType::MeterConfig => {
                let mut v = Vec::new();
                while !r.is_empty() {
                    let len = usize::from(r.u16()?);
                    if len < 8 {
                        return Err(DecodeError::BadLength {
                            what: "ofp_meter_config",
                            len,
                        });
                    }
                    let mut b = r.sub(len - 2, "ofp_meter_config")?;
                    let flags = b.u16()?;
                    let meter_id = b.u32()?;
                    v.push(MeterConfig {
                        flags,
                        meter_id,
                        bands: decode_bands(&mut b)?,
                    });
                }
                B::MeterConfig(v)
            }
            MultipartType::MeterFeatures => {
                if r.remaining() != 16 {
                    return Err(bad_len(r));
                }
                let m = MeterFeatures {
                    max_meter: r.u32()?,
                    band_types: r.u32()?,
                    capabilities: r.u32()?,
                    max_bands: r.u8()?,
                    max_color: r.u8()?,
                };
                r.skip(2)?;
                B::MeterFeatures(m)
            }
            MultipartType::TableFeatures => B::TableFeatures(r.rest().to_vec()),
            MultipartType::PortDesc => {
                list(r, Port::LEN)?;
                let mut v = Vec::with_capacity(r.remaining() / Port::LEN);
                while !r.is_empty() {
                    v.push(Port::decode(r)?);
                }
                B::PortDesc(v)
            }
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
        Ok(MultipartReply { flags, body })
    }
}
