//! Multi-controller messages: OFPT_ROLE_REQUEST / OFPT_ROLE_REPLY (OpenFlow 1.3.5 §7.3.9) and
//! the asynchronous-message filter OFPT_GET_ASYNC_REPLY / OFPT_SET_ASYNC (§7.3.10).

use crate::error::DecodeError;
use crate::macros::enum_with_unknown;
use crate::wire::{put_u32, put_u64, put_zeros, Reader};

enum_with_unknown! {
    /// `ofp_controller_role`.
    pub enum ControllerRole(u32) {
        /// OFPCR_ROLE_NOCHANGE.
        NoChange = 0,
        /// OFPCR_ROLE_EQUAL.
        Equal = 1,
        /// OFPCR_ROLE_MASTER.
        Master = 2,
        /// OFPCR_ROLE_SLAVE.
        Slave = 3,
    }
}

/// OFPT_ROLE_REQUEST / OFPT_ROLE_REPLY (§7.3.9): `| role u32 | pad[4] | generation_id u64 |`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Role {
    /// Role.
    pub role: ControllerRole,
    /// Master election generation id.
    pub generation_id: u64,
}

impl Role {
    /// Body bytes (fixed).
    pub(super) const BODY_LEN: usize = 16;

    pub(super) fn encode_body(&self, out: &mut Vec<u8>) {
        put_u32(out, self.role.into());
        put_zeros(out, 4);
        put_u64(out, self.generation_id);
    }

    pub(super) fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let role = r.u32()?.into();
        r.skip(4)?;
        Ok(Role {
            role,
            generation_id: r.u64()?,
        })
    }
}

/// OFPT_GET_ASYNC_REPLY / OFPT_SET_ASYNC (§7.3.10): three pairs of (master/equal, slave) masks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AsyncConfig {
    /// Bitmasks of OFPR_* values.
    pub packet_in_mask: [u32; 2],
    /// Bitmasks of OFPPR_* values.
    pub port_status_mask: [u32; 2],
    /// Bitmasks of OFPRR_* values.
    pub flow_removed_mask: [u32; 2],
}

impl AsyncConfig {
    /// Body bytes (fixed).
    pub(super) const BODY_LEN: usize = 24;

    pub(super) fn encode_body(&self, out: &mut Vec<u8>) {
        for v in self
            .packet_in_mask
            .iter()
            .chain(&self.port_status_mask)
            .chain(&self.flow_removed_mask)
        {
            put_u32(out, *v);
        }
    }

    pub(super) fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(AsyncConfig {
            packet_in_mask: [r.u32()?, r.u32()?],
            port_status_mask: [r.u32()?, r.u32()?],
            flow_removed_mask: [r.u32()?, r.u32()?],
        })
    }
}
