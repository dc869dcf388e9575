//! What `mmsg status` shows: the report the control socket answers with ([`StatusReport`], JSON)
//! and its text form. Plain serialisable types, filled by [`crate::stats::Stats`] (connections,
//! counters), the controller channel, TLS and the `[internet]` balancer ([`InternetStatus`]); this
//! module depends on none of them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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

impl SubflowStatus {
    /// The [`SubflowStatus::state`] of an established subflow.
    pub const ESTABLISHED: &'static str = "established";

    /// Whether the subflow is established.
    pub fn is_established(&self) -> bool {
        self.state == Self::ESTABLISHED
    }
}

/// The state of a tunnel connection (`connecting`, `up`, `backoff` in the report).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConnState {
    /// Outbound: the first connection attempt is under way.
    #[default]
    Connecting,
    /// Established (hello sent or accepted).
    Up,
    /// Outbound: lost or failed; waiting before the next attempt.
    Backoff,
}

impl std::fmt::Display for ConnState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ConnState::Connecting => "connecting",
            ConnState::Up => "up",
            ConnState::Backoff => "backoff",
        })
    }
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
    /// Which of the (remote, group, class)'s connections (`connections_per_group`; 0 for the
    /// first and only one by default).
    #[serde(default)]
    pub index: u8,
    /// `connecting`, `up`, `backoff`.
    pub state: ConnState,
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
    /// Outbound: bytes waiting in the gateway's own queue (`mpa::queue::FairQueue`, both
    /// classes), sampled every second.
    #[serde(default)]
    pub queue_bytes: u64,
    /// Outbound: bytes the MPTCP socket holds that are not in flight (waiting for the paths),
    /// sampled every second.
    #[serde(default)]
    pub socket_queued_bytes: u64,
    /// Outbound: how long the packets of the connection's class waited in the gateway's own
    /// queue (enqueue to dequeue, packets sent so far), sampled every second.
    #[serde(default)]
    pub queue_sojourn: mpa::queue::SojournHistogram,
    /// Outbound, with `--send-time-budget`: the bytes the paths may hold now (docs/mmsg.md
    /// "Send time budget"); 0 when off, 16 MiB (`mpa::queue::inflight::MAX_BUDGET`) while in
    /// start-up. Sampled every second.
    #[serde(default)]
    pub send_time_budget_bytes: u64,
    /// ... and the delivery rate of the subflows that budget was made of, bytes per second.
    #[serde(default)]
    pub delivery_rate_bytes_per_second: u64,
    /// ... and the time it adds for the gateway's own stalls, µs: the writer's recent worst
    /// lateness beyond the budget's margin (`mpa::queue::stall`; 0 on a machine that wakes on
    /// time).
    #[serde(default)]
    pub stall_cover_us: u64,
    /// Outbound, with `--pacing`: the pacer at its last sample (docs/mmsg.md "Pacing").
    #[serde(default)]
    pub pacing: Option<PacingStatus>,
}

/// A connection's pacer ([`mpa::queue::pacing::Pacer`]) at its last sample.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacingStatus {
    /// `startup` (not paced yet: the windows grow), `drain` or `probe_bw`.
    pub phase: String,
    /// The pacing rate over the bottleneck rate, percent (`probe_bw` cycles 125, 75, 100; 0 in
    /// `startup`).
    pub gain_percent: u32,
    /// The rate the writer is paced at, bytes per second (0: not paced).
    pub rate_bytes_per_second: u64,
    /// The measured bottleneck rate (`BtlBw`), bytes per second (0 until measured).
    pub bottleneck_bytes_per_second: u64,
    /// One round: the subflows' largest minimum RTT (bounded), microseconds.
    pub round_us: u64,
    /// The queue on the paths at the last sample: the subflows' smoothed RTT above their
    /// minimum, weighted by the bytes each acknowledged; microseconds.
    pub queue_delay_us: u64,
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
    /// The tunnels run in clear, as asked by `[tls] mode = "clear"` plus
    /// `--insecure-clear-tunnels` (docs/security.md "TLS is the default").
    #[serde(default)]
    pub insecure_clear_tunnels: bool,
    /// `[internet]`: external traffic load balancing (`None`: policy off).
    #[serde(default)]
    pub internet: Option<InternetStatus>,
    /// The resequencer's release threshold in force (`None`: no sequenced frame seen yet).
    #[serde(default)]
    pub reseq: Option<ReseqStatus>,
    /// `[qos] autorate`: every WAN port's shaped rate as it follows the uplink (empty: off).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub autorate: Vec<PortRateStatus>,
}

/// One WAN port under `[qos] autorate` (`mpa::autorate`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortRateStatus {
    /// WAN port index.
    pub port: usize,
    /// The shaped interface.
    pub dev: String,
    /// The shaped rate now, kbit/s.
    pub rate_kbit: u64,
    /// The highest rate it may take, kbit/s.
    pub max_kbit: u64,
    /// What the port sent over the last sample, kbit/s.
    pub sent_kbit: u64,
    /// The queue in the WAN at the last sample, µs (`None`: no loaded subflow to tell).
    pub wan_queue_us: Option<u64>,
    /// Times the rate went down (a queue in the WAN while loaded) and up.
    pub downs: u64,
    /// Times the rate went up.
    pub ups: u64,
}

/// The resequencer's `T` in force (`docs/mpa.md` "Striping"), as of the last sequenced frame.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReseqStatus {
    /// The hold time in force, ms (sized from the paths, lengthened by the measured skew).
    pub hold_ms: u64,
    /// The count threshold in force, frames.
    pub threshold_frames: u64,
    /// The hold time sized from the paths or the config alone, ms.
    pub base_hold_ms: u64,
    /// The largest reordering delay measured over the last 5–10 s, ms (`None`: none).
    pub measured_skew_ms: Option<u64>,
}

/// The TLS credentials in use (docs/security.md).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsStatus {
    /// The serial number of our certificate.
    pub serial: u64,
    /// Successful reloads since start.
    pub reloads: u64,
    /// Our certificate's `notAfter`, Unix seconds (0: unknown).
    #[serde(default)]
    pub not_after: u64,
    /// The CRL in use: its `nextUpdate`, Unix seconds (after it new handshakes are refused).
    #[serde(default)]
    pub crl_next_update: Option<u64>,
    /// The CRL in use: its `crl_number` (a controller's pushes raise it; the provisioned file's
    /// list has whatever number its CA gave it).
    #[serde(default)]
    pub crl_number: Option<u64>,
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

/// `[internet]` in `mmsg status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InternetStatus {
    /// The policy.
    pub policy: String,
    /// Per uplink.
    pub uplinks: Vec<UplinkStatus>,
    /// Times the `pick` chain was rewritten after the weights changed.
    pub reprogrammed: u64,
}

/// One uplink in [`InternetStatus`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UplinkStatus {
    /// WAN port index.
    pub port: usize,
    /// Interface.
    pub dev: String,
    /// SNAT address.
    pub address: String,
    /// Configured capacity, Mbit/s.
    pub capacity_mbit: u32,
    /// Current available-bandwidth estimate, kbit/s.
    pub available_kbit: u64,
    /// Current weight (share of new flows, of 100).
    pub weight: u32,
    /// New flows assigned so far (kernel counter).
    pub flows: u64,
    /// Bytes received / sent by balanced flows on this uplink.
    pub rx_bytes: u64,
    /// Bytes sent by balanced flows on this uplink.
    pub tx_bytes: u64,
}
