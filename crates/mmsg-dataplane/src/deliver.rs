//! Tunnel → TUN: writes the IP packet of a received frame to the TUN device and counts it. The
//! tunnel's readers call it for every unsequenced frame, the resequencer ([`crate::reseq`]) for
//! every frame it releases; it depends on neither (the TUN device and the counters only), so the
//! modules above it depend on each other one way: `tunnel` → `reseq` → `deliver`.

use crate::stats::Stats;
use crate::tun::Tun;

/// Where received packets go: the TUN device and the counters of what was written.
#[derive(Debug, Clone, Copy)]
pub struct ToTun<'a> {
    /// The TUN device.
    pub tun: &'a Tun,
    /// The gateway's counters (`tun_tx_*`, `tun_write_errors`, `drop_virtio_unsupported`).
    pub stats: &'a Stats,
}

impl ToTun<'_> {
    /// Writes one IP packet (with the virtio header it came with, if any) to TUN. Without offload
    /// locally, a virtio header with no pending work is simply dropped, one with pending work
    /// (checksum, GSO) cannot be written: counted, not fatal. A failed write is counted.
    pub fn write(self, vnet: Option<&[u8]>, ip: &[u8]) {
        let st = self.stats;
        let vnet = match vnet {
            Some(v) if !self.tun.offload() && v.iter().all(|&b| b == 0) => None,
            Some(_) if !self.tun.offload() => {
                Stats::inc(&st.drop_virtio_unsupported);
                return;
            }
            v => v,
        };
        match self.tun.write_packet(vnet, ip) {
            Ok(()) => {
                Stats::inc(&st.tun_tx_packets);
                Stats::add(&st.tun_tx_bytes, ip.len() as u64);
            }
            Err(e) => {
                tracing::trace!(error = %e, "TUN write failed");
                Stats::inc(&st.tun_write_errors);
            }
        }
    }
}
