//! Meter statistics and configuration: OFPMP_METER (OpenFlow 1.3.5 §7.3.5.12),
//! OFPMP_METER_CONFIG (§7.3.5.13) and OFPMP_METER_FEATURES (§7.3.5.14).

use crate::error::{DecodeError, EncodeError};
use crate::meter::{bands_len, decode_bands, encode_bands, MeterBand};
use crate::wire::{patch_len16, put_u16, put_u32, put_u64, put_zeros, Reader};

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

impl MeterStats {
    pub(super) fn encoded_len(&self) -> usize {
        40 + 16 * self.band_stats.len()
    }

    pub(super) fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = out.len();
        put_u32(out, self.meter_id);
        put_u16(out, 0);
        put_zeros(out, 6);
        put_u32(out, self.flow_count);
        put_u64(out, self.packet_in_count);
        put_u64(out, self.byte_in_count);
        put_u32(out, self.duration_sec);
        put_u32(out, self.duration_nsec);
        for (p, b) in &self.band_stats {
            put_u64(out, *p);
            put_u64(out, *b);
        }
        let len = out.len() - start;
        patch_len16(out, start + 4, len, "ofp_meter_stats")
    }

    pub(super) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
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
        Ok(m)
    }
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

impl MeterConfig {
    pub(super) fn encoded_len(&self) -> usize {
        8 + bands_len(&self.bands)
    }

    pub(super) fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = out.len();
        put_u16(out, 0);
        put_u16(out, self.flags);
        put_u32(out, self.meter_id);
        encode_bands(&self.bands, out)?;
        let len = out.len() - start;
        patch_len16(out, start, len, "ofp_meter_config")
    }

    pub(super) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
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
        Ok(MeterConfig {
            flags,
            meter_id,
            bands: decode_bands(&mut b)?,
        })
    }
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

impl MeterFeatures {
    /// Body bytes (fixed).
    pub(super) const BODY_LEN: usize = 16;

    pub(super) fn encode_body(&self, out: &mut Vec<u8>) {
        put_u32(out, self.max_meter);
        put_u32(out, self.band_types);
        put_u32(out, self.capabilities);
        out.push(self.max_bands);
        out.push(self.max_color);
        put_zeros(out, 2);
    }

    pub(super) fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let m = MeterFeatures {
            max_meter: r.u32()?,
            band_types: r.u32()?,
            capabilities: r.u32()?,
            max_bands: r.u8()?,
            max_color: r.u8()?,
        };
        r.skip(2)?;
        Ok(m)
    }
}
