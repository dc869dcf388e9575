//! Group statistics and description: OFPMP_GROUP (OpenFlow 1.3.5 §7.3.5.9), OFPMP_GROUP_DESC
//! (§7.3.5.10) and OFPMP_GROUP_FEATURES (§7.3.5.11).

use crate::error::{DecodeError, EncodeError};
use crate::group::{buckets_len, decode_buckets, encode_buckets, Bucket, GroupType};
use crate::wire::{patch_len16, put_u16, put_u32, put_u64, put_zeros, Reader};

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

impl GroupStats {
    pub(super) fn encoded_len(&self) -> usize {
        40 + 16 * self.bucket_stats.len()
    }

    pub(super) fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = out.len();
        put_u16(out, 0);
        put_zeros(out, 2);
        put_u32(out, self.group_id);
        put_u32(out, self.ref_count);
        put_zeros(out, 4);
        put_u64(out, self.packet_count);
        put_u64(out, self.byte_count);
        put_u32(out, self.duration_sec);
        put_u32(out, self.duration_nsec);
        for (p, b) in &self.bucket_stats {
            put_u64(out, *p);
            put_u64(out, *b);
        }
        let len = out.len() - start;
        patch_len16(out, start, len, "ofp_group_stats")
    }

    pub(super) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
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
        Ok(g)
    }
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

impl GroupDesc {
    pub(super) fn encoded_len(&self) -> usize {
        8 + buckets_len(&self.buckets)
    }

    pub(super) fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = out.len();
        put_u16(out, 0);
        out.push(self.group_type.into());
        out.push(0);
        put_u32(out, self.group_id);
        encode_buckets(&self.buckets, out)?;
        let len = out.len() - start;
        patch_len16(out, start, len, "ofp_group_desc")
    }

    pub(super) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
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
        Ok(GroupDesc {
            group_type,
            group_id,
            buckets: decode_buckets(&mut b)?,
        })
    }
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

impl GroupFeatures {
    /// Body bytes (fixed).
    pub(super) const BODY_LEN: usize = 40;

    pub(super) fn encode_body(&self, out: &mut Vec<u8>) {
        put_u32(out, self.types);
        put_u32(out, self.capabilities);
        self.max_groups.iter().for_each(|v| put_u32(out, *v));
        self.actions.iter().for_each(|v| put_u32(out, *v));
    }

    pub(super) fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(GroupFeatures {
            types: r.u32()?,
            capabilities: r.u32()?,
            max_groups: [r.u32()?, r.u32()?, r.u32()?, r.u32()?],
            actions: [r.u32()?, r.u32()?, r.u32()?, r.u32()?],
        })
    }
}
