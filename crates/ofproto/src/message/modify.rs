//! The other modify-state messages: OFPT_GROUP_MOD (OpenFlow 1.3.5 §7.3.4.2), OFPT_PORT_MOD
//! (§7.3.4.3) and OFPT_METER_MOD (§7.3.4.4). FLOW_MOD (§7.3.4.1) has its own module.

use crate::error::{DecodeError, EncodeError};
use crate::group::{buckets_len, decode_buckets, encode_buckets, Bucket, GroupType};
use crate::macros::enum_with_unknown;
use crate::meter::{bands_len, decode_bands, encode_bands, MeterBand};
use crate::oxm::MacAddr;
use crate::wire::{put_u16, put_u32, put_zeros, Reader};

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

impl GroupMod {
    pub(super) fn body_len(&self) -> usize {
        8 + buckets_len(&self.buckets)
    }

    pub(super) fn encode_body(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put_u16(out, self.command.into());
        out.push(self.group_type.into());
        out.push(0);
        put_u32(out, self.group_id);
        encode_buckets(&self.buckets, out)
    }

    pub(super) fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let command = r.u16()?.into();
        let group_type = r.u8()?.into();
        r.skip(1)?;
        let group_id = r.u32()?;
        Ok(GroupMod {
            command,
            group_type,
            group_id,
            buckets: decode_buckets(r)?,
        })
    }
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

impl PortMod {
    /// Body bytes (fixed).
    pub(super) const BODY_LEN: usize = 32;

    pub(super) fn encode_body(&self, out: &mut Vec<u8>) {
        put_u32(out, self.port_no);
        put_zeros(out, 4);
        out.extend_from_slice(&self.hw_addr.0);
        put_zeros(out, 2);
        put_u32(out, self.config);
        put_u32(out, self.mask);
        put_u32(out, self.advertise);
        put_zeros(out, 4);
    }

    pub(super) fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
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
        Ok(p)
    }
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

impl MeterMod {
    pub(super) fn body_len(&self) -> usize {
        8 + bands_len(&self.bands)
    }

    pub(super) fn encode_body(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put_u16(out, self.command.into());
        put_u16(out, self.flags);
        put_u32(out, self.meter_id);
        encode_bands(&self.bands, out)
    }

    pub(super) fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let command = r.u16()?.into();
        let flags = r.u16()?;
        let meter_id = r.u32()?;
        Ok(MeterMod {
            command,
            flags,
            meter_id,
            bands: decode_bands(r)?,
        })
    }
}
