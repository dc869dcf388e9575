//! Flow table statistics: OFPMP_FLOW (OpenFlow 1.3.5 §7.3.5.2), OFPMP_AGGREGATE (§7.3.5.3) and
//! OFPMP_TABLE (§7.3.5.4), the flow counters the SDC reads.

use crate::error::{DecodeError, EncodeError};
use crate::group::OFPG_ANY;
use crate::instruction::{decode_instructions, encode_instructions, Instruction};
use crate::oxm::Match;
use crate::port::ofpp;
use crate::table::OFPTT_ALL;
use crate::wire::{patch_len16, put_u16, put_u32, put_u64, put_zeros, Reader};

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
            table_id: OFPTT_ALL,
            out_port: ofpp::ANY,
            out_group: OFPG_ANY,
            cookie: 0,
            cookie_mask: 0,
            match_: Match::new(),
        }
    }
}

impl FlowStatsRequest {
    pub(super) fn encoded_len(&self) -> usize {
        32 + self.match_.encoded_len()
    }

    pub(super) fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        out.push(self.table_id);
        put_zeros(out, 3);
        put_u32(out, self.out_port);
        put_u32(out, self.out_group);
        put_zeros(out, 4);
        put_u64(out, self.cookie);
        put_u64(out, self.cookie_mask);
        self.match_.encode(out)
    }

    pub(super) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let table_id = r.u8()?;
        r.skip(3)?;
        let out_port = r.u32()?;
        let out_group = r.u32()?;
        r.skip(4)?;
        Ok(FlowStatsRequest {
            table_id,
            out_port,
            out_group,
            cookie: r.u64()?,
            cookie_mask: r.u64()?,
            match_: Match::decode(r)?,
        })
    }
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
    pub(super) fn encoded_len(&self) -> usize {
        48 + self.match_.encoded_len()
            + self
                .instructions
                .iter()
                .map(Instruction::encoded_len)
                .sum::<usize>()
    }

    pub(super) fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
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

    pub(super) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
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

impl AggregateStats {
    /// Body bytes (fixed).
    pub(super) const BODY_LEN: usize = 24;

    pub(super) fn encode_body(&self, out: &mut Vec<u8>) {
        put_u64(out, self.packet_count);
        put_u64(out, self.byte_count);
        put_u32(out, self.flow_count);
        put_zeros(out, 4);
    }

    pub(super) fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let a = AggregateStats {
            packet_count: r.u64()?,
            byte_count: r.u64()?,
            flow_count: r.u32()?,
        };
        r.skip(4)?;
        Ok(a)
    }
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

impl TableStats {
    /// Bytes of one entry.
    pub(super) const LEN: usize = 24;

    pub(super) fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.table_id);
        put_zeros(out, 3);
        put_u32(out, self.active_count);
        put_u64(out, self.lookup_count);
        put_u64(out, self.matched_count);
    }

    pub(super) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let table_id = r.u8()?;
        r.skip(3)?;
        Ok(TableStats {
            table_id,
            active_count: r.u32()?,
            lookup_count: r.u64()?,
            matched_count: r.u64()?,
        })
    }
}
