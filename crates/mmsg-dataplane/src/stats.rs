//! Counters and the connection registry that `mmsg status` reports (SDC-style statistics of the
//! gateway itself; the report's types are in [`crate::status`]). Counters are relaxed atomics bumped on the packet path; the registry is a
//! mutex-protected map updated on state changes and once per second by each connection supervisor.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

pub use crate::status::{
    ConnState, ConnStatus, ControllerStatus, InternetStatus, PortRateStatus, ReseqStatus,
    StatusReport, SubflowStatus, TlsStatus,
};

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// Gateway-wide counters (monotonic).
        #[derive(Debug, Default)]
        pub struct Counters {
            $($(#[$doc])* pub $name: AtomicU64,)*
        }

        impl Counters {
            /// A snapshot as (name, value), in declaration order.
            pub fn snapshot(&self) -> BTreeMap<String, u64> {
                let mut m = BTreeMap::new();
                $(m.insert(stringify!($name).to_owned(), self.$name.load(Ordering::Relaxed));)*
                m
            }
        }
    };
}

counters! {
    /// Packets read from TUN.
    tun_rx_packets,
    /// Bytes read from TUN (virtio header excluded).
    tun_rx_bytes,
    /// Packets written to TUN.
    tun_tx_packets,
    /// Bytes written to TUN.
    tun_tx_bytes,
    /// TUN reads that failed (never fatal).
    tun_read_errors,
    /// TUN writes that failed (per packet; never fatal).
    tun_write_errors,
    /// Packets from TUN that are not parseable IP.
    drop_malformed,
    /// Packets from TUN whose destination is no remote branch (Type III must not enter TUN).
    drop_external,
    /// Packets towards a branch with no path group up.
    drop_no_group,
    /// Packets whose connection has no queue (not configured).
    drop_no_connection,
    /// Tail drops at the per-connection queue bounds.
    drop_queue_full,
    /// CoDel drops.
    drop_codel,
    /// CoDel CE marks.
    codel_marks,
    /// Packets the framing encoder refused (malformed from TUN).
    drop_encode,
    /// Packets still queued on a connection when it went down (they waited at least the liveness
    /// timeout or the socket failed; inner TCP has retransmitted them).
    drop_conn_closed,
    /// Virtio frames received while the local TUN has no offload (cannot be written).
    drop_virtio_unsupported,
    /// Frames from a peer whose inner source address is not in that branch's `lan_prefixes`
    /// (its AllowedIPs; IPv6 only from a configured IPv6 prefix), dropped before resequencing
    /// and TUN.
    drop_spoofed_source,
    /// `IpVirtio` frames from a peer whose virtio header does not fit the packet (flags, GSO
    /// type, sizes, checksum offsets), dropped before TUN.
    drop_bad_virtio,
    /// Type II packets sent on their path group's Type I connection: the sparse lane
    /// (`[qos] sparse_lane_kbit`; docs/mmsg.md "The sparse lane").
    sparse_lane_packets,
    /// `[qos] autorate`: times a WAN port's shaped rate was lowered (a queue in the WAN while
    /// the port was loaded).
    autorate_down,
    /// `[qos] autorate`: times a WAN port's shaped rate was raised (the shaper held traffic back).
    autorate_up,
    /// `[qos] autorate`: rate changes that `tc` refused.
    autorate_errors,
    /// Frames written to tunnels (IP packets).
    frames_tx,
    /// Frames received from tunnels (IP packets).
    frames_rx,
    /// Keepalive frames sent.
    keepalives_tx,
    /// Frames of unknown type skipped.
    frames_unknown,
    /// Control frames received (ignored in this version).
    frames_control,
    /// Inbound connections refused for a bad hello (wrong magic, version, branch, group, class).
    hello_rejected,
    /// Clear mode: inbound connections refused because their source address is none of the
    /// hello's branch's `wan_addresses`.
    tunnel_refused_source,
    /// Inbound connections refused at accept because too many unauthenticated ones were open
    /// (in total or from that source address).
    tunnel_refused_preauth_limit,
    /// Refusal log lines suppressed by the per-source rate limit (the counters above still count
    /// every refusal).
    tunnel_refusal_logs_suppressed,
    /// `[tls]`: inbound TLS handshakes that failed (not TLS, junk, replayed or broken
    /// handshake, no client certificate, timeout).
    tls_handshake_failed,
    /// `[tls]`: inbound connections whose certificate is not from our CA (or does not verify).
    tls_unknown_ca,
    /// `[tls]`: inbound connections whose certificate the CRL revokes.
    tls_revoked,
    /// `[tls]`: inbound connections whose certificate is another branch's than the hello's
    /// source (or carries no branch identity).
    tls_wrong_branch,
    /// `[tls]`: inbound TLS handshakes that succeeded.
    tls_handshakes_in,
    /// `[tls]`: outbound TLS handshakes that succeeded.
    tls_handshakes_out,
    /// `[tls]`: outbound TLS handshakes that failed (the server is not the dialled branch,
    /// not from our CA, revoked, or refused us).
    tls_connect_failures,
    /// `[tls]`: established connections closed because a reload (new CRL, new CA) no longer
    /// accepts the peer's certificate.
    tls_invalidated_closed,
    /// `[tls]`: key updates requested (rekey budget spent).
    tls_key_updates,
    /// `[tls]`: credentials re-read (SIGHUP) successfully.
    tls_reloads,
    /// `[tls]`: credential re-reads that failed (the old credentials stay in use).
    tls_reload_errors,
    /// `[controller]` over `tls:`: certificates renewed by the controller.
    tls_renewals,
    /// `[controller]` over `tls:`: renewals that failed (retried at the next check).
    tls_renewal_errors,
    /// `[tls]` with `crl_file`: new CRLs pushed by the controller (protocol 3), written to
    /// `crl_file` and reloaded.
    tls_crl_updates,
    /// Pushed CRLs refused (oversize, do not load with the credentials, cannot be written).
    tls_crl_refused,
    /// Pushed CRLs refused because their signature does not verify with our CA (forged).
    crl_refused_signature,
    /// Pushed CRLs refused because their `crl_number` is not newer than the one in use
    /// (a replayed or old list, which would un-revoke).
    crl_refused_replay,
    /// `[tls]`: new TLS handshakes (in or out) refused because our CRL expired (its
    /// `next_update` passed): revocation fails closed until a new CRL arrives.
    handshake_refused_crl_expired,
    /// Connections closed because a frame was malformed or oversize.
    frame_errors,
    /// Connections declared dead (nothing received for 3 s).
    conn_dead,
    /// Connection attempts that failed.
    connect_failures,
    /// Connections established (outbound).
    connects,
    /// Inbound connections accepted (hello passed).
    accepts,
    /// Connections that fell back to plain TCP (no MPTCP).
    mptcp_fallbacks,
    /// Subflows requested from the userspace path manager.
    subflow_create_ok,
    /// Subflow requests the kernel refused.
    subflow_create_err,
    /// Subflows marked backup because they delivered less than `--slow-subflow-share` of their
    /// connection's rate at over twice the fastest subflow's RTT (`MPTCP_PM_CMD_SET_FLAGS`, [`mpa::slow_subflows`]).
    subflows_demoted,
    /// Demoted subflows made active again to measure them (the policy's probes).
    subflows_probed,
    /// `MPTCP_PM_CMD_SET_FLAGS` requests the kernel refused.
    subflow_flags_err,
    /// PM events: subflow established.
    pm_sub_established,
    /// PM events: subflow closed.
    pm_sub_closed,
    /// PM events lost (ENOBUFS).
    pm_events_lost,
    /// Resequencer (striped flows, `docs/mpa.md`): sequenced frames written at once, in order.
    reseq_in_order,
    /// Resequencer: sequenced frames held behind a gap.
    reseq_buffered,
    /// Resequencer: held frames written in order once their gap filled.
    reseq_released_in_order,
    /// Resequencer: held frames written ignoring a gap, the count threshold `T` exceeded.
    reseq_released_threshold,
    /// Resequencer: held frames written ignoring a gap, the hold time `T` elapsed (a lost frame).
    reseq_released_timeout,
    /// Resequencer: held frames written at once because every recent connection of the flow had
    /// passed the gap (the frame was dropped by the sender's queue).
    reseq_released_lost,
    /// Resequencer: duplicate and late frames, written at once.
    reseq_dup_late,
    /// Resequencer: frames written early because a memory bound was reached (never dropped).
    reseq_overflow,
    /// Resequencer: gaps that filled while frames waited behind them (each a skew sample).
    reseq_gaps_filled,
    /// Resequencer: frames of a gap released early (hold time or count) that came afterwards
    /// (each a skew sample; also in `reseq_dup_late`).
    reseq_late_after_release,
}

/// Shared statistics: counters plus the connection registry.
#[derive(Debug, Default)]
pub struct Stats {
    /// The counters.
    pub counters: Counters,
    conns: Mutex<BTreeMap<String, ConnStatus>>,
    controller: Mutex<Option<ControllerStatus>>,
    tls: Mutex<Option<TlsStatus>>,
    insecure_clear: AtomicBool,
    internet: Mutex<Option<InternetStatus>>,
    reseq: Mutex<Option<ReseqStatus>>,
    autorate: Mutex<Vec<PortRateStatus>>,
}

impl std::ops::Deref for Stats {
    type Target = Counters;
    fn deref(&self) -> &Counters {
        &self.counters
    }
}

impl Stats {
    /// Adds one.
    pub fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Sets a counter mirrored from a core's own monotonic counters.
    pub fn set(c: &AtomicU64, v: u64) {
        c.store(v, Ordering::Relaxed);
    }

    /// Adds `n`.
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// Inserts or replaces the status of connection `key`.
    pub fn set_conn(&self, key: &str, status: ConnStatus) {
        if let Ok(mut m) = self.conns.lock() {
            m.insert(key.to_owned(), status);
        }
    }

    /// Updates the status of connection `key` in place (no-op if absent).
    pub fn update_conn(&self, key: &str, f: impl FnOnce(&mut ConnStatus)) {
        if let Ok(mut m) = self.conns.lock() {
            if let Some(c) = m.get_mut(key) {
                f(c);
            }
        }
    }

    /// Calls `f` with every connection's status (in name order), under the registry's lock.
    pub fn for_each_conn(&self, mut f: impl FnMut(&ConnStatus)) {
        if let Ok(m) = self.conns.lock() {
            m.values().for_each(&mut f);
        }
    }

    /// Removes connection `key`.
    pub fn remove_conn(&self, key: &str) {
        if let Ok(mut m) = self.conns.lock() {
            m.remove(key);
        }
    }

    /// Updates the controller channel's status (creates it when absent).
    pub fn update_controller(&self, f: impl FnOnce(&mut ControllerStatus)) {
        if let Ok(mut c) = self.controller.lock() {
            f(c.get_or_insert_with(ControllerStatus::default));
        }
    }

    /// The controller channel's status (`None` without `[controller]`).
    pub fn controller(&self) -> Option<ControllerStatus> {
        self.controller.lock().ok().and_then(|c| c.clone())
    }

    /// Records the TLS credentials in use (`[tls]` mode `tls`).
    pub fn set_tls(&self, status: TlsStatus) {
        if let Ok(mut t) = self.tls.lock() {
            *t = Some(status);
        }
    }

    /// Records that the tunnels run in clear (`[tls] mode = "clear"` with
    /// `--insecure-clear-tunnels`).
    pub fn set_insecure_clear(&self) {
        self.insecure_clear.store(true, Ordering::Relaxed);
    }

    /// Records the `[internet]` load balancer's state (`crate::uplink_lb`).
    pub fn set_internet(&self, status: InternetStatus) {
        if let Ok(mut t) = self.internet.lock() {
            *t = Some(status);
        }
    }

    /// Records the WAN ports' automatic rates (`[qos] autorate`).
    pub fn set_autorate(&self, status: Vec<PortRateStatus>) {
        if let Ok(mut t) = self.autorate.lock() {
            *t = status;
        }
    }

    /// Records the resequencer's `T` in force (`crate::reseq`).
    pub fn set_reseq(&self, status: ReseqStatus) {
        if let Ok(mut t) = self.reseq.lock() {
            *t = Some(status);
        }
    }

    /// Every drop counter summed (for the controller's report).
    pub fn drops(&self) -> u64 {
        self.counters
            .snapshot()
            .iter()
            .filter(|(k, _)| k.starts_with("drop_"))
            .map(|(_, v)| *v)
            .sum()
    }

    /// The whole report.
    pub fn report(&self, branch: u8, offload: bool, path_manager: &str) -> StatusReport {
        let connections = self
            .conns
            .lock()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default();
        StatusReport {
            branch,
            offload,
            path_manager: path_manager.to_owned(),
            connections,
            counters: self.counters.snapshot(),
            controller: self.controller(),
            tls: self.tls.lock().ok().and_then(|t| t.clone()),
            insecure_clear_tunnels: self.insecure_clear.load(Ordering::Relaxed),
            internet: self.internet.lock().ok().and_then(|t| t.clone()),
            reseq: self.reseq.lock().ok().and_then(|t| *t),
            autorate: self.autorate.lock().map(|t| t.clone()).unwrap_or_default(),
        }
    }
}
