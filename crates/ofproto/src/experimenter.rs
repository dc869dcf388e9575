//! The experimenter body (OpenFlow 1.3.5 §7.5.4 OFPT_EXPERIMENTER, §7.3.5.15 OFPMP_EXPERIMENTER),
//! shared by messages and multipart requests and replies. Re-exported from [`crate::message`].
//!
//! ```text
//! | experimenter u32 | exp_type u32 | data ... (verbatim) |
//! ```

use crate::error::DecodeError;
use crate::wire::{put_u32, Reader};

/// OFPT_EXPERIMENTER (§7.5.4), also the body of experimenter multipart messages.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Experimenter {
    /// Experimenter id.
    pub experimenter: u32,
    /// Experimenter-defined type.
    pub exp_type: u32,
    /// Body, verbatim.
    pub data: Vec<u8>,
}

impl Experimenter {
    /// Bytes on the wire.
    pub(crate) fn encoded_len(&self) -> usize {
        8 + self.data.len()
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        put_u32(out, self.experimenter);
        put_u32(out, self.exp_type);
        out.extend_from_slice(&self.data);
    }

    /// Reads the ids, then keeps the rest of `r` verbatim.
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Experimenter {
            experimenter: r.u32()?,
            exp_type: r.u32()?,
            data: r.rest().to_vec(),
        })
    }
}
