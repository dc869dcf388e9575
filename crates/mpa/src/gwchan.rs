//! The gateway channel: messages between a gateway (`mmsg`) and the controller (`ssc`), and their
//! sans-IO codec (issue #6; seed 000 §IV: the SSC configures every MMSG).
//!
//! One persistent byte stream per gateway (TCP, TLS over TCP, or a unix socket), opened by the
//! gateway. Every message is
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                  length of the JSON body (u32, big-endian)     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |        JSON object, `{"type": "...", ...}`, 1..=MAX_BODY_LEN   |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! The length is checked against [`MAX_BODY_LEN`] (1 MiB) as soon as its 4 bytes are there, before
//! any of the body is buffered. Gateway → controller: [`GatewayMsg`] (hello, register, report,
//! ack; enrol and renew since protocol 2); controller → gateway: [`ControllerMsg`] (hello,
//! config, error; credentials since protocol 2; crl since protocol 3). The first message each
//! way is a hello: the gateway's carries the version it speaks, the controller answers with the
//! version of the session ([`Hello::negotiated`]: the gateway's when it serves it), so a
//! protocol 2 gateway never sees a message of version 3. Protocol, state machine and failure behaviour:
//! `docs/gwchan.md`.
//!
//! Call order (either side): [`encode`] a message into a caller-owned buffer and write it; append
//! received bytes to a buffer and call [`decode`] until it returns `Ok(None)` (need more bytes),
//! dropping the consumed prefix after each message. `Err` means the peer broke the protocol: close
//! the stream. [`decode`] never panics on any input (proptest below). A gateway merges a received
//! [`GatewayConfig`] into its file config with [`GatewayConfig::merge_into`] and validates the
//! result with [`crate::config::Config::validate`] before using it.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use thiserror::Error;

pub mod pushed;
pub mod setup;
pub use pushed::{GatewayConfig, Priorities};
pub use setup::{GatewaySetup, SetupError, SetupRequest, SETUP_PROTOCOL};

/// The protocol version of this module. Version 2 added enrolment and renewal
/// ([`GatewayMsg::Enrol`], [`GatewayMsg::Renew`], [`ControllerMsg::Credentials`]); version 3
/// added the pushed CRL ([`ControllerMsg::Crl`]). The controller accepts gateways of
/// [`MIN_PROTOCOL_VERSION`]..=[`PROTOCOL_VERSION`] and runs each session at the gateway's
/// version (version 1 gateways can register but not enrol; only version 3 sessions get CRLs). A
/// gateway accepts a controller of [`MIN_CONTROLLER_PROTOCOL`]..=[`PROTOCOL_VERSION`]; when a
/// controller answers with an older version than it announced (a protocol 2 `ssc` refuses 3),
/// it announces that version on its next connection. Version 4 added the zero-touch set-up
/// ([`GatewayMsg::Setup`], [`ControllerMsg::Setup`], [`setup`]); version 5 added the learned WAN
/// state ([`GatewayMsg::WanState`]); version 6 the standing queue in the group reports
/// ([`GroupReport::queue_delay_us`], [`GroupReport::base_rtt_us`]).
pub const PROTOCOL_VERSION: u32 = 6;
/// The first protocol whose gateways send [`GatewayMsg::WanState`] (a controller never sees one
/// from an older session; an older controller is never sent one).
pub const WAN_STATE_PROTOCOL: u32 = 5;
/// The first protocol whose reports carry [`GroupReport::queue_delay_us`] and
/// [`GroupReport::base_rtt_us`]: a gateway leaves them out of a session at an older version (a
/// version 5 `ssc` refuses fields it does not know).
pub const QUEUE_DELAY_PROTOCOL: u32 = 6;
/// The oldest gateway protocol the controller still serves (register, report, ack).
pub const MIN_PROTOCOL_VERSION: u32 = 1;
/// The oldest controller protocol a gateway still talks to (enrolment needs 2).
pub const MIN_CONTROLLER_PROTOCOL: u32 = 2;
/// The version a gateway announces for an enrolment or renewal: they need nothing newer, so
/// they also work with a protocol 2 controller.
pub const ENROL_PROTOCOL: u32 = 2;
/// Largest CRL PEM a controller may push: 1 MiB of frame holds about 20 000 revoked serials;
/// a deployment of at most 15 branches revokes a handful per renewal period.
pub const MAX_CRL_PEM: usize = 512 * 1024;
/// Length of the big-endian length prefix.
pub const LEN_PREFIX: usize = 4;
/// Largest JSON body. A config of 14 remotes × 64 prefixes × 16 groups plus 256 classifier rules
/// is well under 200 KiB of JSON; 1 MiB bounds the buffer a peer can make us hold.
pub const MAX_BODY_LEN: usize = 1 << 20;

/// A gateway → controller message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum GatewayMsg {
    /// First message: the protocol version.
    Hello(Hello),
    /// Second message: who this gateway is.
    Register(Register),
    /// Periodic health and statistics summary.
    Report(Report),
    /// The outcome of applying a [`ControllerMsg::Config`].
    Ack(Ack),
    /// Instead of a register (protocol 2): a gateway without a certificate asks for one with a
    /// one-time token. Only over server-authenticated TLS or a unix socket.
    Enrol(Enrol),
    /// Instead of a register (protocol 2): a gateway with a valid client certificate asks for a
    /// new one (renewal). Only over mutual TLS.
    Renew(Renew),
    /// Instead of a register (protocol 4, [`setup`]): an enrolled gateway asks for its whole
    /// config. Only over mutual TLS or a unix socket.
    Setup(SetupRequest),
    /// Protocol 5, registered sessions only: the WAN ports' current addresses, next hops and
    /// next-hop MACs as the kernel has them; sent after the registration and on every change.
    WanState(WanState),
}

/// The learned state of every WAN port of a gateway (protocol 5), in port order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WanState {
    /// One entry per WAN port the gateway has (port `a` first).
    pub ports: Vec<WanLearned>,
}

/// One WAN port as the kernel has it now (address, route and neighbour tables).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WanLearned {
    /// Port index: 0 = port `a` (`wan[0]` of the gateway's config).
    pub port: u8,
    /// Interface name on the gateway.
    pub name: String,
    /// The IPv4 address with its prefix length, e.g. `198.18.20.2/24`; `None`: the interface
    /// has no IPv4 address now (DHCP lease lost, link down).
    pub address: Option<ipnet::Ipv4Net>,
    /// The next hop: the gateway of the main table's default route through this interface
    /// (else of any route through it); `None`: none.
    pub next_hop: Option<std::net::Ipv4Addr>,
    /// The next hop's MAC from the neighbour table (`aa:bb:cc:dd:ee:ff`); `None`: not resolved.
    pub next_hop_mac: Option<mms_types::MacAddr>,
}

/// A controller → gateway message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ControllerMsg {
    /// First message: the protocol version.
    Hello(Hello),
    /// The full configuration of this gateway; sent after the registration and on every change.
    Config(GatewayConfig),
    /// The controller refuses the session (unknown branch, wrong version, protocol error) and
    /// closes the stream after this message.
    Error(ErrorMsg),
    /// The answer to an enrol or renew: the new certificate, the CA and the current CRL; the
    /// controller closes the stream after it.
    Credentials(Credentials),
    /// Protocol 3, registered sessions only: the CA's current CRL, sent after the registration
    /// and again whenever it changes (revocation, periodic re-signing). The gateway writes it
    /// to its `[tls] crl_file` and reloads its credentials.
    Crl(CrlUpdate),
    /// Protocol 4, the answer to a [`GatewayMsg::Setup`] ([`setup`]); the controller closes
    /// the stream after it.
    Setup(GatewaySetup),
}

/// A pushed CRL (protocol 3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrlUpdate {
    /// The CRL signed by the CA (PEM), at most [`MAX_CRL_PEM`] bytes.
    pub crl_pem: String,
}

/// A one-time-token enrolment (protocol 2). `Debug` never shows the token.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Enrol {
    /// The branch the gateway wants a certificate for (the token must be for it).
    pub branch_id: u8,
    /// The one-time token printed by `ssc enrol-token` (a secret: never logged).
    pub token: String,
    /// The gateway's new public key (uncompressed P-256 point), hex; the private key never
    /// leaves the gateway.
    pub public_key: String,
    /// ECDSA P-256 SHA-256 over `"mms-enrol-v1\0"` ‖ public key, hex: proof of possession.
    pub proof: String,
}

impl std::fmt::Debug for Enrol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Enrol")
            .field("branch_id", &self.branch_id)
            .field("token", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// A renewal (protocol 2): the branch is the one of the client certificate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Renew {
    /// The new public key, hex (as in [`Enrol`]).
    pub public_key: String,
    /// Its proof of possession, hex (as in [`Enrol`]).
    pub proof: String,
}

/// Credentials issued to a gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    /// The new certificate (PEM), SAN `branch-<b>.mms`.
    pub cert_pem: String,
    /// Its serial number.
    pub serial: u64,
    /// When it expires, Unix seconds.
    pub not_after: u64,
    /// The CA certificate (PEM).
    pub ca_pem: String,
    /// The current CRL signed by the CA (PEM).
    pub crl_pem: String,
}

/// The hello, first message in both directions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    /// [`PROTOCOL_VERSION`] of the sender.
    pub protocol: u32,
    /// Free text: the sender's software and version, e.g. `mmsg 0.1.0`.
    pub software: String,
}

impl Hello {
    /// Our hello.
    pub fn ours(software: impl Into<String>) -> Self {
        Hello {
            protocol: PROTOCOL_VERSION,
            software: software.into(),
        }
    }

    /// A hello with an explicit version (a gateway's enrolment announces [`ENROL_PROTOCOL`];
    /// the controller answers with the session's version).
    pub fn with_protocol(protocol: u32, software: impl Into<String>) -> Self {
        Hello {
            protocol,
            software: software.into(),
        }
    }

    /// The version of a session opened by this (gateway's) hello: the gateway's own when the
    /// controller serves it, else ours (the session then ends with an `error` `version`).
    pub fn negotiated(&self) -> u32 {
        if self.check_gateway().is_ok() {
            self.protocol
        } else {
            PROTOCOL_VERSION
        }
    }

    /// Whether a controller's version is one a gateway talks to
    /// ([`MIN_CONTROLLER_PROTOCOL`]..=[`PROTOCOL_VERSION`]).
    pub fn check_controller(&self) -> Result<(), String> {
        if (MIN_CONTROLLER_PROTOCOL..=PROTOCOL_VERSION).contains(&self.protocol) {
            Ok(())
        } else {
            Err(format!(
                "protocol version {} is not supported (this side speaks {MIN_CONTROLLER_PROTOCOL}..={PROTOCOL_VERSION})",
                self.protocol
            ))
        }
    }

    /// Whether a gateway's version is one the controller serves
    /// ([`MIN_PROTOCOL_VERSION`]..=[`PROTOCOL_VERSION`]).
    pub fn check_gateway(&self) -> Result<(), String> {
        if (MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(&self.protocol) {
            Ok(())
        } else {
            Err(format!(
                "protocol version {} is not supported (this side speaks {MIN_PROTOCOL_VERSION}..={PROTOCOL_VERSION})",
                self.protocol
            ))
        }
    }

    /// Whether the peer speaks our version; the error text is meant for the peer and the log.
    pub fn check(&self) -> Result<(), String> {
        if self.protocol == PROTOCOL_VERSION {
            Ok(())
        } else {
            Err(format!(
                "protocol version {} is not supported (this side speaks {PROTOCOL_VERSION})",
                self.protocol
            ))
        }
    }
}

/// A gateway's registration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Register {
    /// The branch id of the gateway (its `branch_id`), 1..=15.
    pub branch_id: u8,
    /// The gateway's software version.
    pub software_version: String,
    /// The WAN ports as the gateway sees them (from its config), in port order.
    pub wan: Vec<WanSeen>,
    /// The version of the config the gateway runs now (0: none from the controller, e.g. the
    /// remotes came from the file); from the cache after a restart.
    #[serde(default)]
    pub config_version: u64,
}

/// One WAN port as the gateway sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WanSeen {
    /// Interface name.
    pub name: String,
    /// Address with prefix length, e.g. `198.18.10.2/24`.
    pub address: String,
}

/// A periodic health and statistics summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    /// Whether every configured path group is up.
    pub healthy: bool,
    /// The version of the config in use.
    pub config_version: u64,
    /// Where it came from: `file`, `cache` or `controller`.
    pub config_source: String,
    /// Outbound tunnel connections established.
    pub connections_up: u32,
    /// Outbound tunnel connections configured.
    pub connections_total: u32,
    /// Packets dropped so far (every drop counter summed).
    pub drops: u64,
    /// Per path group: bytes sent so far and whether it is up.
    pub groups: Vec<GroupReport>,
}

/// One path group in a [`Report`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupReport {
    /// The remote branch.
    pub branch: u8,
    /// The path group.
    pub group: u8,
    /// Tunnel bytes written on its connections so far.
    pub bytes_tx: u64,
    /// Whether all its connections are up.
    pub up: bool,
    /// Microseconds its connections' writers spent blocked writing to their sockets so far,
    /// summed over the group's connections: a group whose writers are blocked most of an
    /// interval is limited by its paths, so its rate in that interval is its available capacity
    /// (the controller's capacity estimate, docs/ssc.md "WRR weights"). Absent from gateways
    /// before protocol 2: 0.
    #[serde(default)]
    pub busy_us: u64,
    /// The rate its connections' congestion windows allow now, bit/s (Σ `cwnd · mss / srtt` of
    /// the subflows of its busiest connection); 0: unknown (also from gateways before protocol 2).
    #[serde(default)]
    pub window_bps: u64,
    /// Σ bytes acked on the subflows of its busiest connection now (they go backwards when a
    /// subflow closes); with `retrans_bytes` its loss ratio. Protocol 2; 0 when absent.
    #[serde(default)]
    pub acked_bytes: u64,
    /// Σ bytes retransmitted on the same subflows.
    #[serde(default)]
    pub retrans_bytes: u64,
    /// Bytes its connections' MPTCP sockets hold that are not in flight (the socket's unacked
    /// bytes, `TIOCOUTQ`, minus Σ unacked segments × mss of its subflows; summed over the group,
    /// sampled every second): data waiting for the paths. Large (hundreds of ms at the group's
    /// rate) when the paths are what limits the group, even though the send buffers keep its
    /// writers from blocking; near 0 when the traffic is application-limited. 0 when absent.
    #[serde(default)]
    pub queued_bytes: u64,
    /// The rate of what its busiest connection's subflows have in flight now, bit/s
    /// (Σ `min(unacked, cwnd) · mss / srtt`). Beside `window_bps` it tells whether the windows
    /// are used: a connection that keeps less than half its window in flight is not limited by
    /// its paths, and its window rate (a large cwnd over an empty queue's RTT) says nothing
    /// about what they can carry. `None` from older gateways.
    #[serde(default)]
    pub inflight_bps: Option<u64>,
    /// The standing queue of its busiest connection's paths now, µs: the smallest smoothed RTT
    /// above the minimum among its subflows with data in flight (`mpa::conn_report::standing_queue`).
    /// A group whose every path holds a queue of ≥ 50 ms and ≥ its minimum RTT while it keeps
    /// its windows mostly empty is limited by its paths even when it loses nothing and its
    /// writers never wait (a path flooded by someone else's traffic, with the group's share of a
    /// striped flow fitting in what is left).
    /// `None` (and left out): nothing in flight, an older gateway, or a session before
    /// [`QUEUE_DELAY_PROTOCOL`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_delay_us: Option<u64>,
    /// That subflow's minimum RTT, µs (the kernel's `tcpi_min_rtt`). `None` with
    /// `queue_delay_us`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_rtt_us: Option<u64>,
}

/// The outcome of a config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ack {
    /// The version the gateway now runs (the received one when `error` is `None`, else the
    /// previous one).
    pub config_version: u64,
    /// The version that was received.
    pub received_version: u64,
    /// Why the received config was refused (validation problems, one per line); `None`: applied.
    #[serde(default)]
    pub error: Option<String>,
}

/// The controller refuses the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorMsg {
    /// A stable code: `unknown_branch`, `version`, `protocol`, `replaced`; with TLS also
    /// `no_certificate`, `wrong_branch`, `insecure`, `enrol_refused`, `unavailable`
    /// (docs/gwchan.md §3).
    pub code: String,
    /// A human readable explanation.
    pub message: String,
}

/// A message could not be encoded (our bug or an absurd config).
#[derive(Debug, Error)]
pub enum EncodeError {
    /// The JSON body is longer than [`MAX_BODY_LEN`].
    #[error("message of {0} bytes exceeds the limit of {MAX_BODY_LEN}")]
    TooLong(usize),
    /// serde_json failed (a map with non-string keys; not possible with these types).
    #[error("JSON: {0}")]
    Json(String),
}

/// The peer sent something that is not this protocol (untrusted input: close the stream).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The length prefix announces more than [`MAX_BODY_LEN`] bytes.
    #[error("message of {0} bytes exceeds the limit of {MAX_BODY_LEN}")]
    TooLong(usize),
    /// The length prefix is 0.
    #[error("empty message")]
    Empty,
    /// The body is not a message of this protocol.
    #[error("invalid message: {0}")]
    Invalid(String),
}

/// Appends `msg` (length prefix + JSON) to `out`.
pub fn encode<M: Serialize>(msg: &M, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let body = serde_json::to_vec(msg).map_err(|e| EncodeError::Json(e.to_string()))?;
    if body.len() > MAX_BODY_LEN {
        return Err(EncodeError::TooLong(body.len()));
    }
    let len = u32::try_from(body.len()).map_err(|_| EncodeError::TooLong(body.len()))?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&body);
    Ok(())
}

/// How many bytes the message at the start of `buf` needs in total (prefix + body), once the
/// prefix is there; checks the limit first. `Ok(None)`: fewer than 4 bytes.
pub fn message_len(buf: &[u8]) -> Result<Option<usize>, DecodeError> {
    let Some(prefix) = buf.get(..LEN_PREFIX) else {
        return Ok(None);
    };
    let mut b = [0u8; LEN_PREFIX];
    b.copy_from_slice(prefix);
    let len = usize::try_from(u32::from_be_bytes(b)).unwrap_or(usize::MAX);
    if len > MAX_BODY_LEN {
        return Err(DecodeError::TooLong(len));
    }
    if len == 0 {
        return Err(DecodeError::Empty);
    }
    Ok(Some(LEN_PREFIX + len))
}

/// Decodes the message at the start of `buf`: `Ok(Some((msg, consumed)))`, `Ok(None)` when more
/// bytes are needed, `Err` when the peer broke the protocol.
pub fn decode<M: DeserializeOwned>(buf: &[u8]) -> Result<Option<(M, usize)>, DecodeError> {
    let Some(total) = message_len(buf)? else {
        return Ok(None);
    };
    let Some(body) = buf.get(LEN_PREFIX..total) else {
        return Ok(None);
    };
    let msg = serde_json::from_slice(body).map_err(|e| DecodeError::Invalid(e.to_string()))?;
    Ok(Some((msg, total)))
}

#[cfg(test)]
mod tests;
