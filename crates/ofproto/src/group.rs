//! Group buckets (OpenFlow 1.3.5 §7.3.4.2), used by GROUP_MOD and GROUP_DESC.
//!
//! ```text
//! ofp_bucket:
//! | len u16 | weight u16 | watch_port u32 | watch_group u32 | pad[4] | actions ... |
//! ```

use crate::action::{actions_len, decode_actions, encode_actions, Action};
use crate::error::{DecodeError, EncodeError};
use crate::macros::enum_with_unknown;
use crate::wire::{patch_len16, put_u16, put_u32, put_zeros, Reader};

/// `OFPG_MAX`: last usable group number.
pub const OFPG_MAX: u32 = 0xffff_ff00;
/// `OFPG_ALL`: all groups (GROUP_MOD delete, stats).
pub const OFPG_ALL: u32 = 0xffff_fffc;
/// `OFPG_ANY`: wildcard group.
pub const OFPG_ANY: u32 = 0xffff_ffff;

enum_with_unknown! {
    /// `ofp_group_type`.
    pub enum GroupType(u8) {
        /// OFPGT_ALL: all buckets (multicast/broadcast).
        All = 0,
        /// OFPGT_SELECT: one bucket, chosen by weight (multipath).
        Select = 1,
        /// OFPGT_INDIRECT: the single bucket.
        Indirect = 2,
        /// OFPGT_FF: fast failover, first live bucket.
        FastFailover = 3,
    }
}

/// One bucket.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Bucket {
    /// Relative weight (select groups).
    pub weight: u16,
    /// Port whose liveness decides (fast failover), or OFPP_ANY.
    pub watch_port: u32,
    /// Group whose liveness decides, or OFPG_ANY.
    pub watch_group: u32,
    /// Actions.
    pub actions: Vec<Action>,
}

impl Bucket {
    pub(crate) fn encoded_len(&self) -> usize {
        16 + actions_len(&self.actions)
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = out.len();
        put_u16(out, 0);
        put_u16(out, self.weight);
        put_u32(out, self.watch_port);
        put_u32(out, self.watch_group);
        put_zeros(out, 4);
        encode_actions(&self.actions, out)?;
        let len = out.len() - start;
        patch_len16(out, start, len, "ofp_bucket")
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let len = usize::from(r.u16()?);
        if len < 16 {
            return Err(DecodeError::BadLength {
                what: "ofp_bucket",
                len,
            });
        }
        let mut b = r.sub(len - 2, "ofp_bucket")?;
        let weight = b.u16()?;
        let watch_port = b.u32()?;
        let watch_group = b.u32()?;
        b.skip(4)?;
        let actions = decode_actions(&mut b)?;
        Ok(Bucket {
            weight,
            watch_port,
            watch_group,
            actions,
        })
    }
}

pub(crate) fn decode_buckets(r: &mut Reader<'_>) -> Result<Vec<Bucket>, DecodeError> {
    let mut v = Vec::new();
    while !r.is_empty() {
        v.push(Bucket::decode(r)?);
    }
    Ok(v)
}

pub(crate) fn encode_buckets(v: &[Bucket], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    v.iter().try_for_each(|b| b.encode(out))
}

pub(crate) fn buckets_len(v: &[Bucket]) -> usize {
    v.iter().map(Bucket::encoded_len).sum()
}
