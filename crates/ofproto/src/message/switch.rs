//! Switch handshake and configuration: OFPT_FEATURES_REPLY (OpenFlow 1.3.5 §7.3.1),
//! OFPT_GET_CONFIG_REPLY / OFPT_SET_CONFIG (§7.3.2), OFPT_TABLE_MOD (§7.3.3) and
//! OFPT_QUEUE_GET_CONFIG_REPLY (§7.3.6). The requests of these pairs have no body or a fixed one
//! and stay in [`super::Body`].

use crate::error::DecodeError;
use crate::wire::{put_u16, put_u32, put_u64, put_zeros, Reader};

/// OFPT_FEATURES_REPLY (§7.3.1).
///
/// ```text
/// | datapath_id u64 | n_buffers u32 | n_tables u8 | auxiliary_id u8 | pad[2] |
/// | capabilities u32 | reserved u32 |
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SwitchFeatures {
    /// Datapath unique id.
    pub datapath_id: u64,
    /// Max packets buffered at once.
    pub n_buffers: u32,
    /// Number of tables supported by datapath.
    pub n_tables: u8,
    /// Identify auxiliary connections.
    pub auxiliary_id: u8,
    /// OFPC_* bits.
    pub capabilities: u32,
    /// Reserved.
    pub reserved: u32,
}

impl SwitchFeatures {
    /// Body bytes (fixed).
    pub(super) const BODY_LEN: usize = 24;

    pub(super) fn encode_body(&self, out: &mut Vec<u8>) {
        put_u64(out, self.datapath_id);
        put_u32(out, self.n_buffers);
        out.push(self.n_tables);
        out.push(self.auxiliary_id);
        put_zeros(out, 2);
        put_u32(out, self.capabilities);
        put_u32(out, self.reserved);
    }

    pub(super) fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let datapath_id = r.u64()?;
        let n_buffers = r.u32()?;
        let n_tables = r.u8()?;
        let auxiliary_id = r.u8()?;
        r.skip(2)?;
        Ok(SwitchFeatures {
            datapath_id,
            n_buffers,
            n_tables,
            auxiliary_id,
            capabilities: r.u32()?,
            reserved: r.u32()?,
        })
    }
}

/// OFPT_GET_CONFIG_REPLY / OFPT_SET_CONFIG (§7.3.2): `| flags u16 | miss_send_len u16 |`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SwitchConfig {
    /// OFPC_FRAG_* bits.
    pub flags: u16,
    /// Max bytes of a table-miss packet sent to the controller.
    pub miss_send_len: u16,
}

impl SwitchConfig {
    /// Body bytes (fixed).
    pub(super) const BODY_LEN: usize = 4;

    pub(super) fn encode_body(&self, out: &mut Vec<u8>) {
        put_u16(out, self.flags);
        put_u16(out, self.miss_send_len);
    }

    pub(super) fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(SwitchConfig {
            flags: r.u16()?,
            miss_send_len: r.u16()?,
        })
    }
}

/// OFPT_TABLE_MOD (§7.3.3): `| table_id u8 | pad[3] | config u32 |`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TableMod {
    /// Table, or OFPTT_ALL.
    pub table_id: u8,
    /// OFPTC_* bits.
    pub config: u32,
}

impl TableMod {
    /// Body bytes (fixed).
    pub(super) const BODY_LEN: usize = 8;

    pub(super) fn encode_body(&self, out: &mut Vec<u8>) {
        out.push(self.table_id);
        put_zeros(out, 3);
        put_u32(out, self.config);
    }

    pub(super) fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let table_id = r.u8()?;
        r.skip(3)?;
        Ok(TableMod {
            table_id,
            config: r.u32()?,
        })
    }
}

/// OFPT_QUEUE_GET_CONFIG_REPLY (§7.3.6); the queue list is kept as opaque bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QueueGetConfigReply {
    /// Port.
    pub port: u32,
    /// `ofp_packet_queue` list, verbatim.
    pub queues: Vec<u8>,
}

impl QueueGetConfigReply {
    pub(super) fn body_len(&self) -> usize {
        8 + self.queues.len()
    }

    pub(super) fn encode_body(&self, out: &mut Vec<u8>) {
        put_u32(out, self.port);
        put_zeros(out, 4);
        out.extend_from_slice(&self.queues);
    }

    pub(super) fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let port = r.u32()?;
        r.skip(4)?;
        Ok(QueueGetConfigReply {
            port,
            queues: r.rest().to_vec(),
        })
    }
}
