//! The static gateway configuration (issue #4 "Static config"): what an MMSG needs with no controller.
//!
//! Seed 000 §IV (UI): branch ids, access ports with their public addresses and kinds (leased line or
//! public internet), remote branches, and (PC) the path groups between each pair of branches. Also the
//! TC's rules (§II-A) and the MPA's group selection policy (§III-A: "round robin or ... average
//! throughput").
//!
//! TOML via serde with `deny_unknown_fields`, a default per optional field, units in the names
//! (`_s`, `_ms`). [`Config::parse`] parses and then [`Config::validate`]s, which reports every problem
//! with the offending key spelled as in the file, e.g. `remote[1].path_groups[2].id: 17 is out of
//! range 0..=15`. Examples: `examples/mmsg-branch1.toml`, `examples/mmsg-branch2.toml`.

use std::collections::BTreeSet;
use std::fmt;
use std::net::Ipv4Addr;
use std::time::Duration;

use ipnet::{IpNet, Ipv4Net};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

use mms_types::{MacAddr, WanKind};

use crate::{BranchId, Class, PathGroupId};

/// Most WAN ports one gateway may have: the in-kernel MPTCP path manager takes at most 8 endpoints
/// per namespace (DESIGN §4), and n×m subflows must stay within its 8-subflow limit + 1.
pub const MAX_WAN_PORTS: usize = 8;
/// Largest path group weight. Weights are relative; 1000 gives 0.1% resolution and keeps the smooth
/// WRR sums far from overflow (16 groups × 1000 fits an i64 trivially).
pub const MAX_WEIGHT: u32 = 1_000;
/// Most classifier rules. They are matched linearly per new packet; 256 rules of a few comparisons
/// each stay well under a microsecond.
pub const MAX_RULES: usize = 256;
/// Most LAN prefixes per branch (own or remote). The destination lookup is a linear longest-prefix
/// scan over all remote prefixes (≤ 14 × 64 = 896 entries × 24 B ≈ 21 KiB).
pub const MAX_PREFIXES_PER_BRANCH: usize = 64;
/// Longest flow idle timeout accepted (a day).
pub const MAX_FLOW_IDLE_TIMEOUT_S: u64 = 86_400;

/// A configuration that could not be used.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// Not valid TOML, or not this schema (unknown key, wrong type, missing required key). The
    /// message names the key and the line.
    #[error("{0}")]
    Parse(#[from] toml::de::Error),
    /// The file parsed but some values are out of range or inconsistent.
    #[error("{0}")]
    Invalid(#[from] ValidationError),
}

/// Every problem [`Config::validate`] found, one per line.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub struct ValidationError {
    /// The problems, in file order.
    pub problems: Vec<Problem>,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

/// One invalid value: the key as spelled in the file and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The offending key, e.g. `remote[1].path_groups[2].id`.
    pub key: String,
    /// What is wrong, e.g. `17 is out of range 0..=15`.
    pub reason: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.reason)
    }
}

/// The whole gateway configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// This branch's id, 1..=15 (the first nibble of the ports it listens on).
    pub branch_id: u8,
    /// The prefixes of this branch's LAN (inner source addresses).
    pub lan_prefixes: Vec<IpNet>,
    /// The WAN ports (uplinks), in port order: `wan[k]` is port k.
    pub wan: Vec<WanPort>,
    /// The other branches this gateway tunnels to.
    #[serde(default)]
    pub remote: Vec<RemoteBranch>,
    /// How new flows get a path group. Default: `wrr`.
    #[serde(default)]
    pub selection_policy: SelectionPolicy,
    /// A flow without packets for this long is forgotten (its next packet may pick a new group).
    /// Default: 60.
    #[serde(default = "default_flow_idle_timeout_s")]
    pub flow_idle_timeout_s: u64,
    /// The TC's rules.
    #[serde(default)]
    pub classifier: ClassifierConfig,
    /// The per-connection queues.
    #[serde(default)]
    pub queue: QueueConfig,
    /// The controller (`ssc`) to take remotes, path groups and weights from (`crate::gwchan`,
    /// `docs/gwchan.md`). With it, `remote` may be empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<ControllerConfig>,
    /// `[ovs]`: `mmsg` builds its Open vSwitch bridge itself (`docs/e2e.md`). Without it, OVS is
    /// not touched and the WAN addresses stay on the WAN interfaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ovs: Option<OvsConfig>,
    /// `[qos]`: strict-priority egress shaping on the WAN ports (PM, `docs/mmsg.md` "Priority at
    /// the WAN egress"); only ports with `rate_mbit` are shaped.
    #[serde(default)]
    pub qos: QosConfig,
    /// `[striping]`: elephant flows of some classes or prefixes are spread packet by packet over
    /// several path groups and resequenced by the receiving gateway (seed 001 §III-C, D;
    /// `docs/mpa.md` "Striping"). Off without the table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub striping: Option<StripingConfig>,
    /// `[tls]`: authenticated, encrypted tunnel connections (docs/security.md). Without the
    /// section the tunnel runs in clear (the paper's behaviour, kept for existing set-ups and
    /// logged loudly at start-up); with it, `mode` defaults to `tls`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsConfig>,
    /// `[internet]`: per-flow load balancing of external (Type III) traffic over the uplinks with
    /// SNAT (seed 004 §5, [`crate::uplink_lb`], `docs/mmsg.md` "External traffic load
    /// balancing"). Default: `policy = "off"`.
    #[serde(default)]
    pub internet: InternetConfig,
}

/// Longest `internet.measure_interval_ms` accepted (a minute).
pub const MAX_MEASURE_INTERVAL_MS: u64 = 60_000;
/// Shortest `internet.measure_interval_ms` accepted: below 100 ms the counter deltas of a
/// 10 Mbit/s uplink are a few packets and the estimate is noise.
pub const MIN_MEASURE_INTERVAL_MS: u64 = 100;

/// `[internet]`: how new external flows from the LAN choose their uplink.
///
/// Off by default: with it, `mmsg` owns the gateway's NAT for LAN → internet traffic (an
/// nftables table, `fwmark` rules) and would fight whatever NAT the operator already runs;
/// without it, external traffic follows the main routing table as before.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct InternetConfig {
    /// `off`, `single`, `rr`, `mbw` or `wrr`. Default: `off`.
    #[serde(default)]
    pub policy: UplinkPolicy,
    /// The WAN ports (indices into `wan`) to balance over. Default: every port of kind
    /// `internet`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uplinks: Option<Vec<usize>>,
    /// Capacity of each entry of the uplinks, Mbit/s, in the same order. Default per uplink:
    /// `wan[k].rate_mbit`; `mbw` and `wrr` need one or the other for every uplink.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_mbit: Option<Vec<u32>>,
    /// `single`: the WAN port (index into `wan`) that takes every flow. Default: the first uplink.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub single: Option<usize>,
    /// How often the uplinks' interface counters are sampled for the available-bandwidth
    /// estimate, ms. Default: 1000.
    #[serde(default = "default_measure_interval_ms")]
    pub measure_interval_ms: u64,
}

impl Default for InternetConfig {
    fn default() -> Self {
        InternetConfig {
            policy: UplinkPolicy::Off,
            uplinks: None,
            capacity_mbit: None,
            single: None,
            measure_interval_ms: default_measure_interval_ms(),
        }
    }
}

fn default_measure_interval_ms() -> u64 {
    1_000
}

/// `internet.policy`: how a new external flow picks its uplink (seed 004 §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum UplinkPolicy {
    /// Nothing installed: external traffic follows the main routing table.
    #[default]
    Off,
    /// Every flow on one uplink (`internet.single`).
    Single,
    /// Round robin (§5.1.1).
    Rr,
    /// The uplink with the most available bandwidth (§5.1.2 i, eq. 1).
    Mbw,
    /// Weighted round robin on available bandwidth (§5.1.2 ii, eq. 2, Alg. 2).
    Wrr,
}

impl fmt::Display for UplinkPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            UplinkPolicy::Off => "off",
            UplinkPolicy::Single => "single",
            UplinkPolicy::Rr => "rr",
            UplinkPolicy::Mbw => "mbw",
            UplinkPolicy::Wrr => "wrr",
        })
    }
}

impl Config {
    /// `[internet]`: the WAN port indices balanced over (explicit, else every `internet` port).
    pub fn internet_uplinks(&self) -> Vec<usize> {
        match &self.internet.uplinks {
            Some(u) => u.clone(),
            None => self
                .wan
                .iter()
                .enumerate()
                .filter(|(_, w)| w.kind == WanKind::Internet)
                .map(|(k, _)| k)
                .collect(),
        }
    }

    /// `[internet]`: the capacity of each of [`Config::internet_uplinks`], Mbit/s (`None`
    /// where neither `capacity_mbit` nor `wan[k].rate_mbit` gives one).
    pub fn internet_capacities_mbit(&self) -> Vec<Option<u32>> {
        self.internet_uplinks()
            .iter()
            .enumerate()
            .map(|(i, &k)| {
                self.internet
                    .capacity_mbit
                    .as_ref()
                    .and_then(|c| c.get(i).copied())
                    .or_else(|| self.wan.get(k).and_then(|w| w.rate_mbit))
            })
            .collect()
    }
}

/// `[striping]`: which flows are striped and the receiver's resequencing parameters.
///
/// A flow is striped once its measured rate ([`crate::flow_table`]) exceeds `threshold_kbit` and
/// its class is in `classes` or its inner source or destination is in `prefixes`. Both gateways of
/// a pair should carry the same table: the sender stripes, the receiver resequences with `S`, `T`
/// and `LRF` from here.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StripingConfig {
    /// Classes whose elephant flows are striped. Default: none.
    #[serde(default)]
    pub classes: Vec<Class>,
    /// Inner prefixes (source or destination) whose elephant flows are striped. Default: none.
    #[serde(default)]
    pub prefixes: Vec<IpNet>,
    /// A flow faster than this is an elephant and is striped (from then on, for its lifetime in
    /// the flow table). Default: 1000 (1 Mbit/s).
    #[serde(default = "default_striping_threshold_kbit")]
    pub threshold_kbit: u64,
    /// The receiver's buffer size `S` in frames per flow, 2..=4096. Default: 1024.
    #[serde(default = "default_striping_buffer_frames")]
    pub buffer_frames: usize,
    /// The loss-recovery factor (seed 001 Alg. 1), 1..=1000. Default: 20.
    #[serde(default = "default_striping_lrf")]
    pub lrf: u32,
    /// The release threshold `T` as a count of buffered frames, below `buffer_frames`, or "auto"
    /// (sized from the MDI and the rates of the paths, `resequencer::Threshold::from_paths`).
    /// Default: "auto".
    #[serde(default)]
    pub release_frames: Auto,
    /// The release threshold `T` as the longest wait of a frame behind a gap in milliseconds,
    /// 1..=1000, or "auto". Default: "auto".
    #[serde(default)]
    pub release_hold_ms: Auto,
}

fn default_striping_threshold_kbit() -> u64 {
    1_000
}
fn default_striping_buffer_frames() -> usize {
    crate::resequencer::DEFAULT_BUFFER_FRAMES
}
fn default_striping_lrf() -> u32 {
    crate::resequencer::DEFAULT_LRF
}

/// A number or the word "auto".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Auto {
    /// Computed at run time.
    #[default]
    Auto,
    /// This value.
    #[serde(untagged)]
    Value(u64),
}

impl<'de> Deserialize<'de> for Auto {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(u64),
            Word(String),
        }
        match Raw::deserialize(d) {
            Ok(Raw::Number(n)) => Ok(Auto::Value(n)),
            Ok(Raw::Word(w)) if w == "auto" => Ok(Auto::Auto),
            Ok(Raw::Word(w)) => Err(serde::de::Error::custom(format!(
                "{w:?}: expected a non-negative integer or \"auto\""
            ))),
            Err(_) => Err(serde::de::Error::custom(
                "expected a non-negative integer or \"auto\"",
            )),
        }
    }
}

impl StripingConfig {
    /// The resequencer parameters for these settings: `T` from the file, or (for "auto")
    /// [`crate::resequencer::Threshold::default`] until the driver sizes it from the paths.
    pub fn reseq_params(&self) -> crate::resequencer::Params {
        use crate::resequencer::{Params, Threshold};
        let auto = Threshold::default();
        let buffer_frames = self.buffer_frames;
        Params {
            buffer_frames,
            threshold: Threshold {
                frames: match self.release_frames {
                    Auto::Auto => auto.frames.min(buffer_frames.saturating_sub(1)),
                    Auto::Value(n) => usize::try_from(n).unwrap_or(usize::MAX),
                },
                hold: match self.release_hold_ms {
                    Auto::Auto => auto.hold,
                    Auto::Value(ms) => Duration::from_millis(ms),
                },
            },
            lrf: self.lrf,
            idle_timeout: crate::resequencer::DEFAULT_IDLE_TIMEOUT,
        }
    }

    /// The elephant threshold in bytes per second.
    pub fn threshold_bytes_per_s(&self) -> u64 {
        self.threshold_kbit.saturating_mul(1_000) / 8
    }

    fn validate(&self, p: &mut Problems) {
        if self.classes.is_empty() && self.prefixes.is_empty() {
            p.push(
                "striping",
                "names no class and no prefix (remove the table to turn striping off)".into(),
            );
        }
        if !self.prefixes.is_empty() {
            check_prefixes(p, "striping.prefixes", &self.prefixes);
        }
        if self.classes.iter().any(|c| !c.is_tunnelled()) {
            p.push(
                "striping.classes",
                "type3 is never tunnelled: use type1 or type2".into(),
            );
        }
        if !(1..=100_000_000).contains(&self.threshold_kbit) {
            p.push(
                "striping.threshold_kbit",
                format!("{} is out of range 1..=100000000", self.threshold_kbit),
            );
        }
        let max_s = crate::resequencer::MAX_BUFFER_FRAMES;
        if !(2..=max_s).contains(&self.buffer_frames) {
            p.push(
                "striping.buffer_frames",
                format!("{} is out of range 2..={max_s}", self.buffer_frames),
            );
        }
        if !(1..=1_000).contains(&self.lrf) {
            p.push(
                "striping.lrf",
                format!("{} is out of range 1..=1000", self.lrf),
            );
        }
        if let Auto::Value(n) = self.release_frames {
            if n == 0 || n >= self.buffer_frames as u64 {
                p.push(
                    "striping.release_frames",
                    format!(
                        "{n} must be above 0 and below striping.buffer_frames ({})",
                        self.buffer_frames
                    ),
                );
            }
        }
        if let Auto::Value(ms) = self.release_hold_ms {
            if !(1..=1_000).contains(&ms) {
                p.push(
                    "striping.release_hold_ms",
                    format!("{ms} is out of range 1..=1000"),
                );
            }
        }
    }
}

/// `[tls]`: TLS 1.3 with mutual authentication on every tunnel connection (docs/security.md).
/// The files are re-read on SIGHUP (certificate rotation, new CRL).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// `tls` (default) or `clear`.
    #[serde(default)]
    pub mode: TlsMode,
    /// The CA certificate (PEM): the trust anchor of every peer. Required with `mode = "tls"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<std::path::PathBuf>,
    /// This gateway's certificate (PEM, SAN `branch-<branch_id>.mms`). Required with `tls`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_file: Option<std::path::PathBuf>,
    /// This gateway's private key (PEM, mode 0600). Required with `tls`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<std::path::PathBuf>,
    /// Revoked certificates: a CRL (PEM) signed by the CA. Optional.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crl_file: Option<std::path::PathBuf>,
}

/// Whether tunnel connections are protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TlsMode {
    /// TLS 1.3, mutual authentication against `ca_file`.
    #[default]
    Tls,
    /// No protection (the paper's behaviour; for benchmarks and closed labs only).
    Clear,
}

impl Config {
    /// The `[tls]` section when it asks for TLS.
    pub fn tls_enabled(&self) -> Option<&TlsConfig> {
        self.tls.as_ref().filter(|t| t.mode == TlsMode::Tls)
    }
}

/// `[qos]`: the egress qdisc on every WAN port that has a `rate_mbit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct QosConfig {
    /// Install the qdisc. Default: true.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Shape at this percentage of `wan[k].rate_mbit`, so that our queue, not the modem's, is
    /// the bottleneck. Default: 95.
    #[serde(default = "default_shaping_percent")]
    pub shaping_percent: u8,
}

impl Default for QosConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            shaping_percent: default_shaping_percent(),
        }
    }
}

fn default_shaping_percent() -> u8 {
    95
}

/// Largest `wan[k].rate_mbit` accepted (100 Gbit/s).
pub const MAX_WAN_RATE_MBIT: u32 = 100_000;

/// `[ovs]`: the gateway's Open vSwitch (DESIGN §2, docs/ofc.md §9).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OvsConfig {
    /// The bridge name. Default: `br0`.
    #[serde(default = "default_ovs_bridge")]
    pub bridge: String,
    /// The OVSDB target for `ovs-vsctl --db`. Default: `unix:/var/run/openvswitch/db.sock`.
    #[serde(default = "default_ovs_db")]
    pub db: String,
    /// The OpenFlow controller (`ssc`): `tcp:HOST:PORT`, `ssl:HOST:PORT` (OpenFlow over TLS with
    /// the gateway's `[tls]` credentials, which are then required) or `unix:/PATH` (inside the
    /// OVS run directory: ovs-vswitchd refuses unix controllers elsewhere).
    pub controller: String,
}

/// The default `[ovs] db`.
pub const DEFAULT_OVS_DB: &str = "unix:/var/run/openvswitch/db.sock";

fn default_ovs_bridge() -> String {
    "br0".to_owned()
}

fn default_ovs_db() -> String {
    DEFAULT_OVS_DB.to_owned()
}

/// `[controller]`: where the gateway channel connects and where it keeps the last good config.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ControllerConfig {
    /// `tls:HOST:PORT` (mutual TLS with the `[tls]` credentials; the controller's certificate
    /// must be `ssc.mms` from `[tls] ca_file`), `tcp:HOST:PORT` (clear) or `unix:/PATH` of
    /// `ssc`'s gateway listener.
    pub address: String,
    /// The last good config from the controller (JSON, written atomically, mode 0600).
    /// Default: `/var/lib/mmsg/controller-config.json`.
    #[serde(default = "default_controller_cache")]
    pub cache: std::path::PathBuf,
    /// With `tls:`: renew the certificate over the channel when less than this percentage of
    /// its lifetime is left (default 33; 0 = never).
    #[serde(default = "default_renew_percent")]
    pub renew_below_percent: u8,
    /// With `tls:`: how often the certificate's remaining lifetime is checked, in seconds
    /// (default 600).
    #[serde(default = "default_renew_check_s")]
    pub renew_check_s: u64,
}

/// The default `[controller] renew_below_percent`: a third of the lifetime (30 days of 90)
/// leaves weeks of retries before expiry.
pub const DEFAULT_RENEW_PERCENT: u8 = 33;
/// The default `[controller] renew_check_s`.
pub const DEFAULT_RENEW_CHECK_S: u64 = 600;

fn default_renew_percent() -> u8 {
    DEFAULT_RENEW_PERCENT
}

fn default_renew_check_s() -> u64 {
    DEFAULT_RENEW_CHECK_S
}

/// The default `[controller] cache`.
pub const DEFAULT_CONTROLLER_CACHE: &str = "/var/lib/mmsg/controller-config.json";

fn default_controller_cache() -> std::path::PathBuf {
    std::path::PathBuf::from(DEFAULT_CONTROLLER_CACHE)
}

fn default_flow_idle_timeout_s() -> u64 {
    60
}

/// One WAN port (uplink) of this gateway.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WanPort {
    /// The interface name (at most 15 bytes, IFNAMSIZ - 1), e.g. `wan0`.
    pub name: String,
    /// The public address with its prefix length, e.g. `198.18.10.2/24`. The MPA's sockets bind it.
    pub address: Ipv4Net,
    /// The next hop on this port, inside `address`'s network.
    pub gateway: Ipv4Addr,
    /// What kind of access this is. Default: `internet`.
    #[serde(default)]
    pub kind: WanKind,
    /// With `[ovs]`: the MAC of the internal port `mpa{k}` that carries `address`. Default:
    /// `02:00` + the address's four octets ([`MacAddr::from_ipv4`], as the controller's inventory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<MacAddr>,
    /// The uplink's rate towards the ISP in Mbit/s (1..=100000). With it, `mmsg` shapes this
    /// port's egress at `qos.shaping_percent` of it with strict priority by DSCP; without it, no
    /// shaping (a queue in a modem we do not own cannot be prioritised).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_mbit: Option<u32>,
}

impl WanPort {
    /// The MAC of this port's MPA interface: `mac`, else derived from the address.
    pub fn mpa_mac(&self) -> MacAddr {
        self.mac
            .unwrap_or_else(|| MacAddr::from_ipv4(self.address.addr()))
    }
}

/// Another branch.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteBranch {
    /// Its branch id, 1..=15, not ours.
    pub id: u8,
    /// The public addresses of its WAN ports (the MPTCP subflow destinations), in port order.
    pub wan_addresses: Vec<Ipv4Addr>,
    /// The prefixes of its LAN: inner destinations in them are tunnelled to this branch.
    pub lan_prefixes: Vec<IpNet>,
    /// The path groups to it (one MPTCP connection per group and class). Default: group 0, weight 1.
    #[serde(default = "default_path_groups")]
    pub path_groups: Vec<PathGroupConfig>,
}

fn default_path_groups() -> Vec<PathGroupConfig> {
    vec![PathGroupConfig { id: 0, weight: 1 }]
}

/// One path group towards a remote branch (seed 000 §III-A).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PathGroupConfig {
    /// The path group id, 0..=15 (the last nibble of the outer TCP port).
    pub id: u8,
    /// Relative share of new flows under `wrr`, 1..=1000. Default: 1.
    #[serde(default = "default_weight")]
    pub weight: u32,
}

fn default_weight() -> u32 {
    1
}

/// How a new flow picks its path group (seed 000 §III-A, seed 001 §III-C).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SelectionPolicy {
    /// Round robin over the groups that are up.
    Rr,
    /// Smooth weighted round robin (nginx) on the configured weights.
    #[default]
    Wrr,
    /// Smooth weighted round robin on the measured throughput of each group (weights until measured).
    Throughput,
}

/// The TC's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClassifierConfig {
    /// The class of inter-branch traffic no rule matches. Default: `type2`.
    #[serde(default = "default_class")]
    pub default_class: Class,
    /// Rules, first match wins.
    #[serde(default)]
    pub rules: Vec<Rule>,
}

impl Default for ClassifierConfig {
    fn default() -> Self {
        Self {
            default_class: default_class(),
            rules: Vec::new(),
        }
    }
}

fn default_class() -> Class {
    Class::TypeII
}

/// One classifier rule: every non-empty criterion must match (AND); within a list any entry may
/// match (OR). A rule needs at least one criterion.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// A name for logs and stats. Default: empty.
    #[serde(default)]
    pub name: String,
    /// The class of matching packets.
    pub class: Class,
    /// DSCP values (0..=63).
    #[serde(default)]
    pub dscp: Vec<u8>,
    /// The IP protocol number (6 TCP, 17 UDP, 1 ICMP, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_protocol: Option<u8>,
    /// Inner source prefixes.
    #[serde(default)]
    pub src_prefixes: Vec<IpNet>,
    /// Inner destination prefixes.
    #[serde(default)]
    pub dst_prefixes: Vec<IpNet>,
    /// Source ports or ranges (`80`, `"5000-5999"`); only TCP, UDP, UDP-Lite, SCTP have ports.
    #[serde(default)]
    pub src_ports: Vec<PortRange>,
    /// Destination ports or ranges.
    #[serde(default)]
    pub dst_ports: Vec<PortRange>,
}

/// An inclusive port range, written `443` or `"5000-5999"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    /// First port.
    pub lo: u16,
    /// Last port (≥ `lo`).
    pub hi: u16,
}

impl PortRange {
    /// Whether `port` is in the range.
    pub fn contains(self, port: u16) -> bool {
        (self.lo..=self.hi).contains(&port)
    }
}

/// Written back as the file would spell it: `443` or `"5000-5999"` (the gateway channel carries
/// classifier rules as JSON, `crate::gwchan`).
impl Serialize for PortRange {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.lo == self.hi {
            s.serialize_u16(self.lo)
        } else {
            s.collect_str(&format_args!("{}-{}", self.lo, self.hi))
        }
    }
}

impl<'de> Deserialize<'de> for PortRange {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            One(u16),
            Text(String),
        }
        let bad = |s: &str| {
            serde::de::Error::custom(format!(
                "invalid port range {s:?}: expected a port 0..=65535 or \"LO-HI\" with LO <= HI"
            ))
        };
        match Raw::deserialize(d)? {
            Raw::One(p) => Ok(PortRange { lo: p, hi: p }),
            Raw::Text(s) => {
                let (lo, hi) = match s.split_once('-') {
                    Some((a, b)) => (a.trim(), b.trim()),
                    None => (s.trim(), s.trim()),
                };
                let lo: u16 = lo.parse().map_err(|_| bad(&s))?;
                let hi: u16 = hi.parse().map_err(|_| bad(&s))?;
                if lo > hi {
                    return Err(bad(&s));
                }
                Ok(PortRange { lo, hi })
            }
        }
    }
}

/// The per-connection queues' AQM (see [`crate::queue`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct QueueConfig {
    /// CoDel target sojourn time. Default: 5 (RFC 8289).
    #[serde(default = "default_codel_target_ms")]
    pub codel_target_ms: u64,
    /// CoDel interval, about one worst-case RTT. Default: 100 (RFC 8289).
    #[serde(default = "default_codel_interval_ms")]
    pub codel_interval_ms: u64,
    /// CE-mark ECN-capable inner packets instead of dropping them. Default: true.
    #[serde(default = "default_true")]
    pub ecn: bool,
}

impl Default for QueueConfig {
    fn default() -> Self {
        Self {
            codel_target_ms: default_codel_target_ms(),
            codel_interval_ms: default_codel_interval_ms(),
            ecn: true,
        }
    }
}

fn default_codel_target_ms() -> u64 {
    5
}
fn default_codel_interval_ms() -> u64 {
    100
}
fn default_true() -> bool {
    true
}

impl Config {
    /// Parses TOML and validates it.
    pub fn parse(toml_text: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(toml_text)?;
        config.validate()?;
        Ok(config)
    }

    /// This branch's id (valid after [`Config::validate`]).
    pub fn branch(&self) -> Option<BranchId> {
        BranchId::new(self.branch_id).ok()
    }

    /// The flow idle timeout.
    pub fn flow_idle_timeout(&self) -> Duration {
        Duration::from_secs(self.flow_idle_timeout_s)
    }

    /// The local WAN ports (indices into `wan`) whose subflows should carry `class` (seed 000 §II-A):
    /// Type I uses the leased lines when there are any, else every port; Type II uses every port
    /// (it reaches the leased lines' spare capacity only because Type I goes first at every queue;
    /// between sockets of different classes that priority must come from the egress qdisc). Type III
    /// is never tunnelled: none.
    pub fn uplinks_for(&self, class: Class) -> Vec<usize> {
        let all = || (0..self.wan.len()).collect::<Vec<_>>();
        match class {
            Class::TypeI => {
                let leased: Vec<usize> = self
                    .wan
                    .iter()
                    .enumerate()
                    .filter(|(_, w)| w.kind == WanKind::Leased)
                    .map(|(i, _)| i)
                    .collect();
                if leased.is_empty() {
                    all()
                } else {
                    leased
                }
            }
            Class::TypeII => all(),
            Class::TypeIII => Vec::new(),
        }
    }

    /// Checks every range and cross-reference; reports all problems, each with its key.
    pub fn validate(&self) -> Result<(), ValidationError> {
        let mut p = Problems::default();
        if BranchId::new(self.branch_id).is_err() {
            p.push(
                "branch_id",
                format!("{} is out of range 1..=15", self.branch_id),
            );
        }
        check_prefixes(&mut p, "lan_prefixes", &self.lan_prefixes);

        if self.wan.is_empty() {
            p.push("wan", "at least one WAN port is required".into());
        }
        if self.wan.len() > MAX_WAN_PORTS {
            p.push(
                "wan",
                format!("{} WAN ports, at most {MAX_WAN_PORTS}", self.wan.len()),
            );
        }
        let mut names = BTreeSet::new();
        let mut addrs = BTreeSet::new();
        for (i, w) in self.wan.iter().enumerate() {
            if w.name.is_empty() || w.name.len() > 15 {
                p.push(
                    format!("wan[{i}].name"),
                    format!("{:?} must be 1..=15 bytes (an interface name)", w.name),
                );
            }
            if !names.insert(w.name.as_str()) {
                p.push(
                    format!("wan[{i}].name"),
                    format!("{:?} is used twice", w.name),
                );
            }
            if !addrs.insert(w.address.addr()) {
                p.push(
                    format!("wan[{i}].address"),
                    format!("{} is used twice", w.address.addr()),
                );
            }
            if let Some(r) = w.rate_mbit {
                if r == 0 || r > MAX_WAN_RATE_MBIT {
                    p.push(
                        format!("wan[{i}].rate_mbit"),
                        format!("{r} is out of range 1..={MAX_WAN_RATE_MBIT}"),
                    );
                }
            }
            if !w.address.contains(&w.gateway) || w.gateway == w.address.addr() {
                p.push(
                    format!("wan[{i}].gateway"),
                    format!(
                        "{} is not another address in {}",
                        w.gateway,
                        w.address.trunc()
                    ),
                );
            }
        }

        let mut ids = BTreeSet::new();
        let mut remote_prefixes: Vec<(String, IpNet)> = Vec::new();
        for (r, remote) in self.remote.iter().enumerate() {
            let key = format!("remote[{r}]");
            if BranchId::new(remote.id).is_err() {
                p.push(
                    format!("{key}.id"),
                    format!("{} is out of range 1..=15", remote.id),
                );
            } else if remote.id == self.branch_id {
                p.push(
                    format!("{key}.id"),
                    format!("{} is this branch's own id", remote.id),
                );
            } else if !ids.insert(remote.id) {
                p.push(
                    format!("{key}.id"),
                    format!("branch {} is configured twice", remote.id),
                );
            }
            if remote.wan_addresses.is_empty() || remote.wan_addresses.len() > MAX_WAN_PORTS {
                p.push(
                    format!("{key}.wan_addresses"),
                    format!(
                        "{} addresses, need 1..={MAX_WAN_PORTS}",
                        remote.wan_addresses.len()
                    ),
                );
            }
            let mut seen = BTreeSet::new();
            for (a, addr) in remote.wan_addresses.iter().enumerate() {
                if !seen.insert(addr) {
                    p.push(
                        format!("{key}.wan_addresses[{a}]"),
                        format!("{addr} is listed twice"),
                    );
                } else if addrs.contains(addr) {
                    p.push(
                        format!("{key}.wan_addresses[{a}]"),
                        format!("{addr} is one of this gateway's own WAN addresses"),
                    );
                }
            }
            let pkey = format!("{key}.lan_prefixes");
            check_prefixes(&mut p, &pkey, &remote.lan_prefixes);
            for (i, net) in remote.lan_prefixes.iter().enumerate() {
                let k = format!("{pkey}[{i}]");
                for own in &self.lan_prefixes {
                    if own.contains(net) || net.contains(own) {
                        p.push(k.clone(), format!("{net} overlaps own lan_prefixes {own}"));
                    }
                }
                if let Some((other, _)) = remote_prefixes.iter().find(|(_, n)| n == net) {
                    p.push(k.clone(), format!("{net} is also {other}"));
                }
                remote_prefixes.push((k, *net));
            }
            if remote.path_groups.is_empty() {
                p.push(
                    format!("{key}.path_groups"),
                    "at least one path group is required".into(),
                );
            }
            let mut groups = BTreeSet::new();
            for (g, group) in remote.path_groups.iter().enumerate() {
                let gkey = format!("{key}.path_groups[{g}]");
                if PathGroupId::new(group.id).is_err() {
                    p.push(
                        format!("{gkey}.id"),
                        format!("{} is out of range 0..={}", group.id, PathGroupId::MAX),
                    );
                } else if !groups.insert(group.id) {
                    p.push(
                        format!("{gkey}.id"),
                        format!("path group {} is configured twice", group.id),
                    );
                }
                if !(1..=MAX_WEIGHT).contains(&group.weight) {
                    p.push(
                        format!("{gkey}.weight"),
                        format!("{} is out of range 1..={MAX_WEIGHT}", group.weight),
                    );
                }
            }
        }

        if !(1..=MAX_FLOW_IDLE_TIMEOUT_S).contains(&self.flow_idle_timeout_s) {
            p.push(
                "flow_idle_timeout_s",
                format!(
                    "{} is out of range 1..={MAX_FLOW_IDLE_TIMEOUT_S}",
                    self.flow_idle_timeout_s
                ),
            );
        }

        if self.classifier.rules.len() > MAX_RULES {
            p.push(
                "classifier.rules",
                format!("{} rules, at most {MAX_RULES}", self.classifier.rules.len()),
            );
        }
        if !self.classifier.default_class.is_tunnelled() {
            p.push(
                "classifier.default_class",
                "type3 is never tunnelled: use type1 or type2".into(),
            );
        }
        for (i, rule) in self.classifier.rules.iter().enumerate() {
            let key = format!("classifier.rules[{i}]");
            if !rule.class.is_tunnelled() {
                p.push(
                    format!("{key}.class"),
                    "type3 is decided by the destination, not by rules: use type1 or type2".into(),
                );
            }
            for (d, dscp) in rule.dscp.iter().enumerate() {
                if *dscp > 63 {
                    p.push(
                        format!("{key}.dscp[{d}]"),
                        format!("{dscp} is out of range 0..=63"),
                    );
                }
            }
            let has_criteria = !rule.dscp.is_empty()
                || rule.ip_protocol.is_some()
                || !rule.src_prefixes.is_empty()
                || !rule.dst_prefixes.is_empty()
                || !rule.src_ports.is_empty()
                || !rule.dst_ports.is_empty();
            if !has_criteria {
                p.push(
                    key.clone(),
                    "has no match criteria (use classifier.default_class for a catch-all)".into(),
                );
            }
            if let Some(proto) = rule.ip_protocol {
                let has_ports = !rule.src_ports.is_empty() || !rule.dst_ports.is_empty();
                if has_ports && !crate::ip::has_ports(proto) {
                    p.push(
                        format!("{key}.ip_protocol"),
                        format!("protocol {proto} has no ports, but the rule matches ports"),
                    );
                }
            }
        }

        if let Some(c) = &self.controller {
            let ok = match c.address.split_once(':') {
                Some(("tcp" | "tls", rest)) => rest.rsplit_once(':').is_some_and(|(h, port)| {
                    !h.is_empty() && port.parse::<u16>().is_ok_and(|p| p != 0)
                }),
                Some(("unix", path)) => path.starts_with('/'),
                _ => false,
            };
            if !ok {
                p.push(
                    "controller.address",
                    format!(
                        "{:?} must be \"tls:HOST:PORT\", \"tcp:HOST:PORT\" or \"unix:/PATH\"",
                        c.address
                    ),
                );
            }
            if c.address.starts_with("tls:") && self.tls_enabled().is_none() {
                p.push(
                    "controller.address",
                    "tls: needs the [tls] credentials (mode = \"tls\"): they authenticate this gateway to the controller".into(),
                );
            }
            if c.renew_below_percent > 100 {
                p.push(
                    "controller.renew_below_percent",
                    format!("{} is out of range 0..=100", c.renew_below_percent),
                );
            }
            if c.renew_check_s == 0 {
                p.push("controller.renew_check_s", "must be at least 1".into());
            }
            if c.cache.as_os_str().is_empty() {
                p.push("controller.cache", "must not be empty".into());
            }
        }

        if let Some(o) = &self.ovs {
            check_ovs(&mut p, o, &self.wan);
            if o.controller.starts_with("ssl:") && self.tls_enabled().is_none() {
                p.push(
                    "ovs.controller",
                    format!(
                        "{:?} is OpenFlow over TLS: it needs a [tls] section (mode = \"tls\") \
                         whose credentials OVS presents (docs/ofc.md §6)",
                        o.controller
                    ),
                );
            }
        }
        if let Some(t) = self.tls_enabled() {
            for (key, v) in [
                ("tls.ca_file", &t.ca_file),
                ("tls.cert_file", &t.cert_file),
                ("tls.key_file", &t.key_file),
            ] {
                if v.as_ref().is_none_or(|f| f.as_os_str().is_empty()) {
                    p.push(key, "required with mode = \"tls\"".into());
                }
            }
        }

        self.check_internet(&mut p);
        if let Some(st) = &self.striping {
            st.validate(&mut p);
        }

        if !(1..=100).contains(&self.qos.shaping_percent) {
            p.push(
                "qos.shaping_percent",
                format!("{} is out of range 1..=100", self.qos.shaping_percent),
            );
        }

        let q = &self.queue;
        if q.codel_target_ms == 0 || q.codel_target_ms >= q.codel_interval_ms {
            p.push(
                "queue.codel_target_ms",
                format!(
                    "{} must be above 0 and below queue.codel_interval_ms ({})",
                    q.codel_target_ms, q.codel_interval_ms
                ),
            );
        }
        if q.codel_interval_ms > 10_000 {
            p.push(
                "queue.codel_interval_ms",
                format!("{} is out of range 1..=10000", q.codel_interval_ms),
            );
        }

        p.finish()
    }
}

impl Config {
    fn check_internet(&self, p: &mut Problems) {
        let i = &self.internet;
        if i.policy == UplinkPolicy::Off {
            return;
        }
        let uplinks = self.internet_uplinks();
        if uplinks.is_empty() {
            p.push(
                "internet.uplinks",
                "no uplinks (no WAN port of kind internet)".into(),
            );
        }
        let mut seen = BTreeSet::new();
        for (n, k) in uplinks.iter().enumerate() {
            if *k >= self.wan.len() {
                p.push(
                    format!("internet.uplinks[{n}]"),
                    format!("{k} is not a WAN port (0..{})", self.wan.len()),
                );
            }
            if !seen.insert(*k) {
                p.push(
                    format!("internet.uplinks[{n}]"),
                    format!("{k} is listed twice"),
                );
            }
        }
        if let Some(c) = &i.capacity_mbit {
            if c.len() != uplinks.len() {
                p.push(
                    "internet.capacity_mbit",
                    format!("{} entries for {} uplinks", c.len(), uplinks.len()),
                );
            }
            for (n, m) in c.iter().enumerate() {
                if !(1..=MAX_WAN_RATE_MBIT).contains(m) {
                    p.push(
                        format!("internet.capacity_mbit[{n}]"),
                        format!("{m} is out of range 1..={MAX_WAN_RATE_MBIT}"),
                    );
                }
            }
        }
        if matches!(i.policy, UplinkPolicy::Mbw | UplinkPolicy::Wrr) {
            for (n, c) in self.internet_capacities_mbit().iter().enumerate() {
                if c.is_none() {
                    p.push(
                        "internet.capacity_mbit",
                        format!(
                            "policy {} needs a capacity for uplink {n} (capacity_mbit or wan[k].rate_mbit)",
                            i.policy
                        ),
                    );
                }
            }
        }
        if let Some(s) = i.single {
            if !uplinks.contains(&s) {
                p.push(
                    "internet.single",
                    format!("{s} is not one of the uplinks {uplinks:?}"),
                );
            }
        }
        if !(MIN_MEASURE_INTERVAL_MS..=MAX_MEASURE_INTERVAL_MS).contains(&i.measure_interval_ms) {
            p.push(
                "internet.measure_interval_ms",
                format!(
                    "{} is out of range {MIN_MEASURE_INTERVAL_MS}..={MAX_MEASURE_INTERVAL_MS}",
                    i.measure_interval_ms
                ),
            );
        }
    }
}

fn check_ovs(p: &mut Problems, o: &OvsConfig, wan: &[WanPort]) {
    if o.bridge.is_empty() || o.bridge.len() > 15 {
        p.push(
            "ovs.bridge",
            format!("{:?} must be 1..=15 bytes (an interface name)", o.bridge),
        );
    }
    let db_ok = ["unix:", "tcp:", "ssl:"]
        .iter()
        .any(|m| o.db.strip_prefix(m).is_some_and(|r| !r.is_empty()));
    if !db_ok {
        p.push(
            "ovs.db",
            format!(
                "{:?} must be \"unix:/PATH\", \"tcp:HOST:PORT\" or \"ssl:HOST:PORT\"",
                o.db
            ),
        );
    }
    let ctl_ok = match o.controller.split_once(':') {
        Some(("tcp" | "ssl", rest)) => rest
            .rsplit_once(':')
            .is_some_and(|(h, port)| !h.is_empty() && port.parse::<u16>().is_ok_and(|p| p != 0)),
        Some(("unix", path)) => path.starts_with('/'),
        _ => false,
    };
    if !ctl_ok {
        p.push(
            "ovs.controller",
            format!(
                "{:?} must be \"tcp:HOST:PORT\", \"ssl:HOST:PORT\" or \"unix:/PATH\"",
                o.controller
            ),
        );
    }
    for (i, w) in wan.iter().enumerate() {
        if w.name.starts_with("mpa") || w.name == o.bridge {
            p.push(
                format!("wan[{i}].name"),
                format!(
                    "{:?} collides with the OVS bridge or its internal ports mpa0..",
                    w.name
                ),
            );
        }
        let mac = w.mpa_mac();
        if mac.0[0] & 1 == 1 || mac.0 == [0; 6] {
            p.push(
                format!("wan[{i}].mac"),
                format!("{mac} is not a unicast address"),
            );
        }
    }
}

fn check_prefixes(p: &mut Problems, key: &str, nets: &[IpNet]) {
    if nets.is_empty() {
        p.push(key, "at least one prefix is required".into());
    }
    if nets.len() > MAX_PREFIXES_PER_BRANCH {
        p.push(
            key,
            format!("{} prefixes, at most {MAX_PREFIXES_PER_BRANCH}", nets.len()),
        );
    }
    for (i, net) in nets.iter().enumerate() {
        if net.trunc() != *net {
            p.push(
                format!("{key}[{i}]"),
                format!("{net} has host bits set (did you mean {}?)", net.trunc()),
            );
        }
        if net.prefix_len() == 0 {
            p.push(
                format!("{key}[{i}]"),
                format!("{net} would tunnel everything"),
            );
        }
    }
}

#[derive(Default)]
struct Problems(Vec<Problem>);

impl Problems {
    fn push(&mut self, key: impl Into<String>, reason: String) {
        self.0.push(Problem {
            key: key.into(),
            reason,
        });
    }

    fn finish(self) -> Result<(), ValidationError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ValidationError { problems: self.0 })
        }
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_internet;
#[cfg(test)]
mod tests_ovs;
