//! OFPMP_DESC, the switch description (OpenFlow 1.3.5 §7.3.5.1): five NUL-padded strings.

use crate::error::{DecodeError, EncodeError};
use crate::wire::{get_fixed_str, put_fixed_str, Reader};

/// `DESC_STR_LEN`.
pub const DESC_STR_LEN: usize = 256;
/// `SERIAL_NUM_LEN`.
pub const SERIAL_NUM_LEN: usize = 32;

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

impl Desc {
    /// Body bytes (fixed).
    pub(super) const BODY_LEN: usize = 4 * DESC_STR_LEN + SERIAL_NUM_LEN;

    pub(super) fn encode_body(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put_fixed_str(out, &self.mfr_desc, DESC_STR_LEN, "ofp_desc.mfr_desc")?;
        put_fixed_str(out, &self.hw_desc, DESC_STR_LEN, "ofp_desc.hw_desc")?;
        put_fixed_str(out, &self.sw_desc, DESC_STR_LEN, "ofp_desc.sw_desc")?;
        put_fixed_str(out, &self.serial_num, SERIAL_NUM_LEN, "ofp_desc.serial_num")?;
        put_fixed_str(out, &self.dp_desc, DESC_STR_LEN, "ofp_desc.dp_desc")
    }

    pub(super) fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Desc {
            mfr_desc: get_fixed_str(r, DESC_STR_LEN)?,
            hw_desc: get_fixed_str(r, DESC_STR_LEN)?,
            sw_desc: get_fixed_str(r, DESC_STR_LEN)?,
            serial_num: get_fixed_str(r, SERIAL_NUM_LEN)?,
            dp_desc: get_fixed_str(r, DESC_STR_LEN)?,
        })
    }
}
