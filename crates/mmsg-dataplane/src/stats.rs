//! Counters and the connection registry that `mmsg status` reports (SDC-style statistics of the
//! gateway itself). Counters are relaxed atomics bumped on the packet path; the registry is a
//! mutex-protected map updated on state changes and once per second by each connection supervisor.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

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
    /// Virtio frames received while the local TUN has no offload (cannot be written).
    drop_virtio_unsupported,
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
}

/// Shared statistics: counters plus the connection registry.
#[derive(Debug, Default)]
pub struct Stats {
    /// The counters.
    pub counters: Counters,
    conns: Mutex<BTreeMap<String, ConnStatus>>,
    controller: Mutex<Option<ControllerStatus>>,
    tls: Mutex<Option<TlsStatus>>,
    internet: Mutex<Option<crate::uplink_lb::InternetStatus>>,
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

    /// Records the `[internet]` load balancer's state (`crate::uplink_lb`).
    pub fn set_internet(&self, status: crate::uplink_lb::InternetStatus) {
        if let Ok(mut t) = self.internet.lock() {
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
            internet: self.internet.lock().ok().and_then(|t| t.clone()),
        }
    }
}

/// One subflow of a connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubflowStatus {
    /// Local address:port.
    pub local: String,
    /// Remote address:port.
    pub remote: String,
    /// TCP state name (`established`, `syn-sent`, `closed`, ...), empty if unknown.
    #[serde(default)]
    pub state: String,
    /// Smoothed RTT in microseconds (MPTCP_TCPINFO).
    #[serde(default)]
    pub rtt_us: u32,
    /// Congestion window in segments.
    #[serde(default)]
    pub cwnd: u32,
    /// Bytes acknowledged by the peer.
    #[serde(default)]
    pub bytes_acked: u64,
    /// Bytes received.
    #[serde(default)]
    pub bytes_received: u64,
    /// Bytes retransmitted.
    #[serde(default)]
    pub bytes_retrans: u64,
}

/// One tunnel connection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnStatus {
    /// `out` (we connected) or `in` (accepted).
    pub direction: String,
    /// The remote branch.
    pub remote_branch: u8,
    /// The path group.
    pub path_group: u8,
    /// `type1` or `type2`.
    pub class: String,
    /// `connecting`, `up`, `backoff`.
    pub state: String,
    /// The MPTCP token (0 if unknown).
    pub token: u32,
    /// Whether the connection fell back to plain TCP.
    pub fallback: bool,
    /// Subflows in use (from MPTCP_SUBFLOW_ADDRS).
    pub subflows: Vec<SubflowStatus>,
    /// Subflows wanted (n × m for outbound connections, 0 if not managed here).
    pub subflows_wanted: usize,
    /// Frames sent.
    pub frames_tx: u64,
    /// Frames received.
    pub frames_rx: u64,
    /// Payload bytes sent.
    pub bytes_tx: u64,
    /// Payload bytes received.
    pub bytes_rx: u64,
    /// MPTCP-level bytes retransmitted (MPTCP_INFO).
    pub bytes_retrans: u64,
    /// Times this connection was (re-)established.
    pub established: u64,
    /// `[tls]`, inbound: the serial number of the peer's certificate.
    #[serde(default)]
    pub peer_serial: Option<u64>,
}

/// What `mmsg status` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusReport {
    /// Our branch id.
    pub branch: u8,
    /// Whether TUN offload (virtio header, GSO) is on.
    pub offload: bool,
    /// `userspace` or `kernel`.
    pub path_manager: String,
    /// Every tunnel connection.
    pub connections: Vec<ConnStatus>,
    /// The counters.
    pub counters: BTreeMap<String, u64>,
    /// The controller channel (`None` without `[controller]` in the config).
    #[serde(default)]
    pub controller: Option<ControllerStatus>,
    /// The TLS credentials in use (`None`: clear tunnel).
    #[serde(default)]
    pub tls: Option<TlsStatus>,
    /// `[internet]`: external traffic load balancing (`None`: policy off).
    #[serde(default)]
    pub internet: Option<crate::uplink_lb::InternetStatus>,
}

/// The TLS credentials in use (docs/security.md).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsStatus {
    /// The serial number of our certificate.
    pub serial: u64,
    /// Successful reloads since start.
    pub reloads: u64,
}

/// The gateway channel to the controller (`crate::gwchan`, `docs/gwchan.md`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerStatus {
    /// The controller's address (`tcp:HOST:PORT` or `unix:/PATH`).
    pub address: String,
    /// `connecting`, `connected`, `backoff`, or `waiting for controller` (no remotes yet).
    pub state: String,
    /// Whether a session is established now.
    pub connected: bool,
    /// The version of the config in use (0: from the file).
    pub config_version: u64,
    /// Where the remotes in use came from: `file`, `cache`, `controller`, or `none`.
    pub source: String,
    /// Configs received and applied since start.
    pub configs_applied: u64,
    /// Configs refused (invalid) since start.
    pub configs_refused: u64,
    /// The last problem: a refused config, an error from the controller, a failed connect.
    pub last_error: Option<String>,
}

impl StatusReport {
    /// Human-readable text.
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "branch {}  offload {}  path manager {}",
            self.branch,
            if self.offload { "on" } else { "off" },
            self.path_manager
        );
        if let Some(c) = &self.controller {
            let _ = writeln!(
                s,
                "controller {}  {}  config version {}  source {}  applied {}  refused {}{}",
                c.address,
                c.state,
                c.config_version,
                c.source,
                c.configs_applied,
                c.configs_refused,
                c.last_error
                    .as_deref()
                    .map(|e| format!("  last error: {e}"))
                    .unwrap_or_default()
            );
        }
        match &self.tls {
            Some(t) => {
                let _ = writeln!(
                    s,
                    "tls on  certificate serial {}  reloads {}",
                    t.serial, t.reloads
                );
            }
            None => {
                let _ = writeln!(s, "tls OFF (clear tunnel)");
            }
        }
        if let Some(i) = &self.internet {
            let _ = writeln!(
                s,
                "internet policy {}  reprogrammed {}",
                i.policy, i.reprogrammed
            );
            for u in &i.uplinks {
                let _ = writeln!(
                    s,
                    "  wan[{}] {} {}  capacity {} Mbit/s  available {} kbit/s  weight {}  flows {}  rx {} B  tx {} B",
                    u.port, u.dev, u.address, u.capacity_mbit, u.available_kbit, u.weight, u.flows, u.rx_bytes, u.tx_bytes
                );
            }
        }
        let _ = writeln!(s, "connections: {}", self.connections.len());
        for c in &self.connections {
            let _ = writeln!(
                s,
                "  {:3} branch {} group {} {}  {}  token {:#010x}{}  subflows {}/{}  tx {} frames {} B  rx {} frames {} B",
                c.direction,
                c.remote_branch,
                c.path_group,
                c.class,
                c.state,
                c.token,
                if c.fallback { "  FALLBACK TO TCP" } else { "" },
                c.subflows
                    .iter()
                    .filter(|sf| sf.state.is_empty() || sf.state == "established")
                    .count(),
                c.subflows_wanted,
                c.frames_tx,
                c.bytes_tx,
                c.frames_rx,
                c.bytes_rx
            );
            for sf in &c.subflows {
                let _ = writeln!(
                    s,
                    "      subflow {} -> {}  {}  rtt {:.1} ms  cwnd {}  acked {} B  received {} B  retrans {} B",
                    sf.local,
                    sf.remote,
                    sf.state,
                    f64::from(sf.rtt_us) / 1000.0,
                    sf.cwnd,
                    sf.bytes_acked,
                    sf.bytes_received,
                    sf.bytes_retrans
                );
            }
        }
        let _ = writeln!(s, "counters:");
        for (k, v) in &self.counters {
            let _ = writeln!(s, "  {k} {v}");
        }
        s
    }
}
