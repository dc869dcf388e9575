//! Tunnel → TUN: writes one packet the gateway core decided ([`mpa::gateway::TunWrite`]: the
//! virtio-or-plain decision is the core's) to the TUN device and counts it. The tunnel's readers
//! call it for every unsequenced frame, the resequencer ([`crate::reseq`]) for every frame it
//! releases; it depends on neither (the TUN device and the counters only), so the modules above
//! it depend on each other one way: `tunnel` → `reseq` → `deliver`.
//!
//! [`PeerCheck`]: the checks every IP frame from a peer passes once, in the connection's reader,
//! before the resequencer and TUN ([`mpa::gateway::admit`]: inner source in the sender's LAN
//! prefixes, a sane virtio header). A dropped frame is counted, and logged (WARN) at most once
//! per [`DROP_LOG_INTERVAL`] per connection.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mpa::config::Config;
use mpa::framing::Frame;
use mpa::gateway::{admit, AllowedSources, PacketDrop, TunWrite};
use mpa::BranchId;

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

/// At most one log line per connection per this interval about frames [`PeerCheck`] dropped
/// (each one is counted): an authenticated peer that sends spoofed or malformed frames is worth
/// an operator's attention, but must not flood the log.
pub const DROP_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// The receive checks of one connection: `sender` is the branch its hello (and, with TLS, its
/// certificate) named, or the branch we dialled. The prefix table is built from the config when
/// the connection starts and again whenever the config was replaced ([`PeerCheck::refresh`],
/// once per socket read: no lock and no allocation per frame).
#[derive(Debug)]
pub struct PeerCheck {
    sender: BranchId,
    config: Arc<Config>,
    sources: AllowedSources,
    /// When a drop was last logged, and the drops since then not logged.
    last_log: Option<Instant>,
    not_logged: u64,
}

impl PeerCheck {
    /// The checks of a connection from (or to) `sender` under `config`.
    pub fn new(sender: BranchId, config: Arc<Config>) -> Self {
        PeerCheck {
            sender,
            sources: AllowedSources::from_config(&config),
            config,
            last_log: None,
            not_logged: 0,
        }
    }

    /// Rebuilds the table when `config` is not the one it was built from.
    pub fn refresh(&mut self, config: Arc<Config>) {
        if !Arc::ptr_eq(&config, &self.config) {
            self.sources = AllowedSources::from_config(&config);
            self.config = config;
        }
    }

    /// Whether `frame` (an IP frame) may go on to the resequencer or TUN; a refused one is
    /// counted (`drop_spoofed_source`, `drop_bad_virtio`, `frame_errors`).
    pub fn admit(&mut self, frame: &Frame, stats: &Stats) -> bool {
        match admit(&self.sources, self.sender, frame) {
            Ok(()) => true,
            Err(d) => {
                let (c, why) = match d {
                    PacketDrop::SpoofedSource => (
                        &stats.drop_spoofed_source,
                        "inner source outside the sender's LAN prefixes",
                    ),
                    PacketDrop::BadVirtio => (&stats.drop_bad_virtio, "malformed virtio header"),
                    _ => (&stats.frame_errors, "malformed IP frame"),
                };
                Stats::inc(c);
                self.log_drop(Instant::now(), why);
                false
            }
        }
    }

    /// Logs a dropped frame unless this connection logged one less than [`DROP_LOG_INTERVAL`]
    /// ago (then only counts it for the next line).
    fn log_drop(&mut self, now: Instant, why: &str) {
        if self
            .last_log
            .is_some_and(|t| now.saturating_duration_since(t) < DROP_LOG_INTERVAL)
        {
            self.not_logged += 1;
            return;
        }
        self.last_log = Some(now);
        let not_logged = std::mem::take(&mut self.not_logged);
        tracing::warn!(
            sender = self.sender.get(),
            not_logged,
            "frame from a peer dropped: {why} (counted; at most one line per connection per {} s)",
            DROP_LOG_INTERVAL.as_secs()
        );
    }
}
