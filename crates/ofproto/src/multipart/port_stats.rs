//! Per-port counters: OFPMP_PORT_STATS (OpenFlow 1.3.5 §7.3.5.6) and OFPMP_QUEUE
//! (§7.3.5.8). OFPMP_PORT_DESC (§7.3.5.7) is a list of [`crate::port::Port`].

use crate::error::DecodeError;
use crate::wire::{put_u32, put_u64, put_zeros, Reader};

fn put_u64s(out: &mut Vec<u8>, vs: &[u64]) {
    vs.iter().for_each(|v| put_u64(out, *v));
}

/// One entry of an OFPMP_PORT_STATS reply (`ofp_port_stats`, 112 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PortStats {
    /// Port.
    pub port_no: u32,
    /// Received packets.
    pub rx_packets: u64,
    /// Transmitted packets.
    pub tx_packets: u64,
    /// Received bytes.
    pub rx_bytes: u64,
    /// Transmitted bytes.
    pub tx_bytes: u64,
    /// Packets dropped by RX.
    pub rx_dropped: u64,
    /// Packets dropped by TX.
    pub tx_dropped: u64,
    /// Receive errors.
    pub rx_errors: u64,
    /// Transmit errors.
    pub tx_errors: u64,
    /// Frame alignment errors.
    pub rx_frame_err: u64,
    /// Packets with RX overrun.
    pub rx_over_err: u64,
    /// CRC errors.
    pub rx_crc_err: u64,
    /// Collisions.
    pub collisions: u64,
    /// Seconds the port has been alive.
    pub duration_sec: u32,
    /// Nanoseconds beyond `duration_sec`.
    pub duration_nsec: u32,
}

impl PortStats {
    /// Bytes of one entry.
    pub(super) const LEN: usize = 112;

    pub(super) fn encode(&self, out: &mut Vec<u8>) {
        put_u32(out, self.port_no);
        put_zeros(out, 4);
        put_u64s(
            out,
            &[
                self.rx_packets,
                self.tx_packets,
                self.rx_bytes,
                self.tx_bytes,
                self.rx_dropped,
                self.tx_dropped,
                self.rx_errors,
                self.tx_errors,
                self.rx_frame_err,
                self.rx_over_err,
                self.rx_crc_err,
                self.collisions,
            ],
        );
        put_u32(out, self.duration_sec);
        put_u32(out, self.duration_nsec);
    }

    pub(super) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let port_no = r.u32()?;
        r.skip(4)?;
        Ok(PortStats {
            port_no,
            rx_packets: r.u64()?,
            tx_packets: r.u64()?,
            rx_bytes: r.u64()?,
            tx_bytes: r.u64()?,
            rx_dropped: r.u64()?,
            tx_dropped: r.u64()?,
            rx_errors: r.u64()?,
            tx_errors: r.u64()?,
            rx_frame_err: r.u64()?,
            rx_over_err: r.u64()?,
            rx_crc_err: r.u64()?,
            collisions: r.u64()?,
            duration_sec: r.u32()?,
            duration_nsec: r.u32()?,
        })
    }
}

/// One entry of an OFPMP_QUEUE reply (`ofp_queue_stats`, 40 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct QueueStats {
    /// Port.
    pub port_no: u32,
    /// Queue.
    pub queue_id: u32,
    /// Transmitted bytes.
    pub tx_bytes: u64,
    /// Transmitted packets.
    pub tx_packets: u64,
    /// Packets dropped due to overrun.
    pub tx_errors: u64,
    /// Seconds alive.
    pub duration_sec: u32,
    /// Nanoseconds beyond `duration_sec`.
    pub duration_nsec: u32,
}

impl QueueStats {
    /// Bytes of one entry.
    pub(super) const LEN: usize = 40;

    pub(super) fn encode(&self, out: &mut Vec<u8>) {
        put_u32(out, self.port_no);
        put_u32(out, self.queue_id);
        put_u64s(out, &[self.tx_bytes, self.tx_packets, self.tx_errors]);
        put_u32(out, self.duration_sec);
        put_u32(out, self.duration_nsec);
    }

    pub(super) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(QueueStats {
            port_no: r.u32()?,
            queue_id: r.u32()?,
            tx_bytes: r.u64()?,
            tx_packets: r.u64()?,
            tx_errors: r.u64()?,
            duration_sec: r.u32()?,
            duration_nsec: r.u32()?,
        })
    }
}
