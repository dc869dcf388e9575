//! The OFC's settings, the per-switch command queue bound and the datapath id ↔ branch rule:
//! what the coordinator (`ofc/mod.rs`) and the switch tasks (`switch`) share.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::inventory::BranchId;
use crate::preauth::PreAuthLimits;

/// Commands queued per switch. The coordinator sends at most one step per update at a time plus
/// a reconcile, so 64 is never reached by a healthy switch; a full queue means the switch is
/// stuck, and it is dropped. Worst case memory: 64 × one step's flows.
pub const COMMAND_QUEUE: usize = 64;
/// Settings of the OpenFlow server (`[openflow]` in the config, see [`crate::ui::config`]).
#[derive(Clone, Debug)]
pub struct OfcConfig {
    /// Clear TCP listen address (`None`, the default: no clear TCP listener). Switches on it are
    /// **unauthenticated**: they never replace an authenticated (TLS or unix socket) switch of
    /// the same branch and their statistics never reach the WRR, capacity or adaptive
    /// decisions; binding it logs a WARN.
    pub listen: Option<SocketAddr>,
    /// Unix socket paths to listen on (a stale socket file is replaced; the socket is created
    /// mode 0600: its filesystem permissions authenticate the switches on it).
    pub unix: Vec<PathBuf>,
    /// TLS listen address for OVS `ssl:` targets (`None`: none); needs `tls`.
    pub tls_listen: Option<SocketAddr>,
    /// The TLS acceptor configuration (client certificate required; `ssc`'s CA,
    /// [`crate::authority::Authority::openflow_config`]). A switch on this listener must
    /// present the certificate of the branch its datapath id names.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Where newer TLS configurations come from (a new CRL after a revocation or re-signing,
    /// [`crate::authority::Authority::subscribe_openflow`]): each handshake uses the latest,
    /// so a revoked switch certificate is refused from the next connection on. `None`: `tls`
    /// for ever.
    pub tls_updates: Option<tokio::sync::watch::Receiver<Arc<rustls::ServerConfig>>>,
    /// Channel timers: echo interval, dead-peer timeout, HELLO timeout.
    pub channel: ofproto::channel::Config,
    /// Longest wait for one reply or barrier.
    pub request_timeout: Duration,
    /// Longest wait for every switch of one update step to confirm it.
    pub stage_timeout: Duration,
    /// Flow and port statistics polling period.
    pub stats_interval: Duration,
    /// Caps on unauthenticated connections of the TCP listeners (clear and TLS) and the
    /// deadline from accept to FEATURES_REPLY (TLS handshake included), [`crate::preauth`].
    pub preauth: PreAuthLimits,
}

impl Default for OfcConfig {
    fn default() -> Self {
        Self {
            listen: None,
            unix: Vec::new(),
            tls_listen: None,
            tls: None,
            tls_updates: None,
            channel: ofproto::channel::Config::default(),
            request_timeout: Duration::from_secs(10),
            stage_timeout: Duration::from_secs(5),
            stats_interval: Duration::from_secs(5),
            preauth: PreAuthLimits::default(),
        }
    }
}

/// The branch of a switch: its datapath id, when that is 1..=250.
pub fn branch_of_datapath(datapath_id: u64) -> Option<BranchId> {
    u8::try_from(datapath_id)
        .ok()
        .and_then(|b| BranchId::new(b).ok())
}

/// The datapath id a gateway's bridge must have (`other-config:datapath-id`, 16 hex digits).
pub fn datapath_id_of(branch: BranchId) -> String {
    format!("{:016x}", branch.get())
}
