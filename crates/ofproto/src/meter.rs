//! Meter bands (OpenFlow 1.3.5 §7.3.4.4), used by METER_MOD and METER_CONFIG.
//!
//! ```text
//! ofp_meter_band_header:
//! | type u16 | len u16 | rate u32 | burst_size u32 | type-specific (4 bytes for DROP/DSCP_REMARK) |
//! ```

use crate::error::{DecodeError, EncodeError};
use crate::wire::{patch_len16, put_u16, put_u32, put_zeros, Reader};

/// OFPMBT_DROP.
pub const OFPMBT_DROP: u16 = 1;
/// OFPMBT_DSCP_REMARK.
pub const OFPMBT_DSCP_REMARK: u16 = 2;
/// OFPMBT_EXPERIMENTER.
pub const OFPMBT_EXPERIMENTER: u16 = 0xffff;

/// `OFPM_MAX`: last usable meter.
pub const OFPM_MAX: u32 = 0xffff_0000;
/// `OFPM_SLOWPATH`: meter for slow datapath.
pub const OFPM_SLOWPATH: u32 = 0xffff_fffd;
/// `OFPM_CONTROLLER`: meter for controller connection.
pub const OFPM_CONTROLLER: u32 = 0xffff_fffe;
/// `OFPM_ALL`: all meters (stats, delete).
pub const OFPM_ALL: u32 = 0xffff_ffff;

/// One meter band.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MeterBand {
    /// OFPMBT_DROP: drop packets above `rate`.
    Drop {
        /// Rate (kb/s or packets/s by meter flags).
        rate: u32,
        /// Burst size.
        burst_size: u32,
    },
    /// OFPMBT_DSCP_REMARK: raise drop precedence by `prec_level`.
    DscpRemark {
        /// Rate.
        rate: u32,
        /// Burst size.
        burst_size: u32,
        /// Drop precedence increase.
        prec_level: u8,
    },
    /// OFPMBT_EXPERIMENTER.
    Experimenter {
        /// Rate.
        rate: u32,
        /// Burst size.
        burst_size: u32,
        /// Experimenter id.
        experimenter: u32,
        /// Bytes after the experimenter id, verbatim.
        data: Vec<u8>,
    },
    /// A band type not defined by 1.3.
    Unknown {
        /// The type.
        typ: u16,
        /// Rate.
        rate: u32,
        /// Burst size.
        burst_size: u32,
        /// Bytes after the 12-byte header, verbatim.
        data: Vec<u8>,
    },
}

impl MeterBand {
    pub(crate) fn encoded_len(&self) -> usize {
        match self {
            MeterBand::Drop { .. } | MeterBand::DscpRemark { .. } => 16,
            MeterBand::Experimenter { data, .. } => 16 + data.len(),
            MeterBand::Unknown { data, .. } => 12 + data.len(),
        }
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = out.len();
        let (typ, rate, burst) = match self {
            MeterBand::Drop { rate, burst_size } => (OFPMBT_DROP, rate, burst_size),
            MeterBand::DscpRemark {
                rate, burst_size, ..
            } => (OFPMBT_DSCP_REMARK, rate, burst_size),
            MeterBand::Experimenter {
                rate, burst_size, ..
            } => (OFPMBT_EXPERIMENTER, rate, burst_size),
            MeterBand::Unknown {
                typ,
                rate,
                burst_size,
                ..
            } => (*typ, rate, burst_size),
        };
        put_u16(out, typ);
        put_u16(out, 0);
        put_u32(out, *rate);
        put_u32(out, *burst);
        match self {
            MeterBand::Drop { .. } => put_zeros(out, 4),
            MeterBand::DscpRemark { prec_level, .. } => {
                out.push(*prec_level);
                put_zeros(out, 3);
            }
            MeterBand::Experimenter {
                experimenter, data, ..
            } => {
                put_u32(out, *experimenter);
                out.extend_from_slice(data);
            }
            MeterBand::Unknown { data, .. } => out.extend_from_slice(data),
        }
        let len = out.len() - start;
        patch_len16(out, start + 2, len, "meter band")
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let typ = r.u16()?;
        let len = usize::from(r.u16()?);
        let bad = DecodeError::BadLength {
            what: "meter band",
            len,
        };
        if len < 12 {
            return Err(bad);
        }
        let mut b = r.sub(len - 4, "meter band")?;
        let rate = b.u32()?;
        let burst_size = b.u32()?;
        let band = match typ {
            OFPMBT_DROP | OFPMBT_DSCP_REMARK if len != 16 => return Err(bad),
            OFPMBT_DROP => {
                b.skip(4)?;
                MeterBand::Drop { rate, burst_size }
            }
            OFPMBT_DSCP_REMARK => {
                let prec_level = b.u8()?;
                b.skip(3)?;
                MeterBand::DscpRemark {
                    rate,
                    burst_size,
                    prec_level,
                }
            }
            OFPMBT_EXPERIMENTER => {
                if len < 16 {
                    return Err(bad);
                }
                MeterBand::Experimenter {
                    rate,
                    burst_size,
                    experimenter: b.u32()?,
                    data: b.rest().to_vec(),
                }
            }
            _ => MeterBand::Unknown {
                typ,
                rate,
                burst_size,
                data: b.rest().to_vec(),
            },
        };
        b.finish()?;
        Ok(band)
    }
}

pub(crate) fn decode_bands(r: &mut Reader<'_>) -> Result<Vec<MeterBand>, DecodeError> {
    let mut v = Vec::new();
    while !r.is_empty() {
        v.push(MeterBand::decode(r)?);
    }
    Ok(v)
}

pub(crate) fn encode_bands(v: &[MeterBand], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    v.iter().try_for_each(|b| b.encode(out))
}

pub(crate) fn bands_len(v: &[MeterBand]) -> usize {
    v.iter().map(MeterBand::encoded_len).sum()
}
