//! Tunnel → TUN: writes one packet the gateway core decided ([`mpa::gateway::TunWrite`]: the
//! virtio-or-plain decision is the core's) to the TUN device and counts it. The tunnel's readers
//! call it for every unsequenced frame, the resequencer ([`crate::reseq`]) for every frame it
//! releases; it depends on neither (the TUN device and the counters only), so the modules above
//! it depend on each other one way: `tunnel` → `reseq` → `deliver`.

use mpa::gateway::TunWrite;

use crate::stats::Stats;
use crate::tun::Tun;

/// Where received packets go: the TUN device and the counters of what was written.
#[derive(Debug, Clone, Copy)]
pub struct ToTun<'a> {
    /// The TUN device.
    pub tun: &'a Tun,
    /// The gateway's counters (`tun_tx_*`, `tun_write_errors`).
    pub stats: &'a Stats,
}

impl ToTun<'_> {
    /// Writes one packet (its virtio header, if the core gave one, then the IP packet) to TUN in
    /// one write. A failed write is counted, never fatal.
    pub fn write(self, w: &TunWrite) {
        let st = self.stats;
        match self.tun.write_packet(w.vnet.as_deref(), &w.ip) {
            Ok(()) => {
                Stats::inc(&st.tun_tx_packets);
                Stats::add(&st.tun_tx_bytes, w.ip.len() as u64);
            }
            Err(e) => {
                tracing::trace!(error = %e, "TUN write failed");
                Stats::inc(&st.tun_write_errors);
            }
        }
    }
}
