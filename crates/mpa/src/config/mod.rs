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
//!
//! One file per table: `wan`, `remote` (with path groups), `classifier`, `queue` (with `[qos]`),
//! `striping`, `tls`, `controller`, `ovs`, `internet`; `problems` holds the error types and the
//! collector they all report into. This file holds the root [`Config`], parses it and runs the
//! checks in file order.

mod classifier;
mod controller;
mod internet;
mod ovs;
mod problems;
mod queue;
mod remote;
mod security;
mod striping;
mod tls;
mod wan;

pub use classifier::{ClassifierConfig, PortRange, Rule, MAX_RULES};
pub use controller::{
    ControllerConfig, DEFAULT_CONTROLLER_CACHE, DEFAULT_RENEW_CHECK_S, DEFAULT_RENEW_PERCENT,
};
pub use internet::{
    InternetConfig, UplinkPolicy, MAX_MEASURE_INTERVAL_MS, MIN_MEASURE_INTERVAL_MS,
};
pub use ovs::{OvsConfig, DEFAULT_OVS_DB};
pub use problems::{ConfigError, Problem, ValidationError, MAX_PREFIXES_PER_BRANCH};
pub use queue::{QosConfig, QueueConfig, DEFAULT_SPARSE_LANE_KBIT, MAX_SPARSE_LANE_KBIT};
pub use remote::{PathGroupConfig, RemoteBranch, SelectionPolicy, MAX_WEIGHT};
pub use security::{TlsPolicyError, TunnelSecurity, INSECURE_CLEAR_FLAG};
pub use striping::{Auto, StripingConfig};
pub use tls::{TlsConfig, TlsMode};
pub use wan::{nat_only, WanPort, MAX_WAN_PORTS, MAX_WAN_RATE_MBIT};

use std::time::Duration;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use mms_types::{PortPlan, WanKind};

use crate::{BranchId, Class};

use problems::{check_prefixes, Problems};

/// Longest flow idle timeout accepted (a day).
pub const MAX_FLOW_IDLE_TIMEOUT_S: u64 = 86_400;

/// The whole gateway configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// This branch's id, 1..=15 (the first nibble of the ports it listens on); 1..=250 with an
    /// extended `ports` plan.
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
    /// Type II tunnel connections per (remote branch, path group): 1 (default) carries every
    /// Type II flow to the group in one connection; K > 1 opens K, each with its own n × m
    /// subflows, and gives each new flow the group's next connection in turn, as the paper maps
    /// each end-to-end connection to its own MPTCP connection (docs/mmsg.md "Connections per path
    /// group"). 1..=[`crate::framing::MAX_CONNECTIONS_PER_GROUP`]. Type I keeps one.
    #[serde(default = "default_connections_per_group")]
    pub connections_per_group: u8,
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
    /// `[tls]`: authenticated, encrypted tunnel connections (docs/security.md). `mmsg check` and
    /// `mmsg run` refuse a config without it ([`Config::tunnel_security`]: "TLS is the default"); clear
    /// tunnels need `mode = "clear"` plus `--insecure-clear-tunnels`. `mode` defaults to `tls`.
    /// [`Config::parse`] itself accepts a config without the section (unit tests, pushed configs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsConfig>,
    /// `[internet]`: per-flow load balancing of external (Type III) traffic over the uplinks with
    /// SNAT (seed 004 §5, [`crate::uplink_lb`], `docs/mmsg.md` "External traffic load
    /// balancing"). Default: `policy = "off"`.
    #[serde(default)]
    pub internet: InternetConfig,
    /// The outer port plan (issue #20, `mms_types::PortPlan`): `"paper"` (listen on `0xB00G`,
    /// branch ids 1..=15; the default) or the extended range `"16384-32767"` every gateway
    /// reserves (listen on `first + G`, branch ids 1..=250). A controller's pushed config sets it.
    #[serde(default, skip_serializing_if = "is_paper")]
    pub ports: PortPlan,
}

fn is_paper(p: &PortPlan) -> bool {
    *p == PortPlan::Paper
}

fn default_flow_idle_timeout_s() -> u64 {
    60
}

fn default_connections_per_group() -> u8 {
    1
}

/// Tunnel connections of `class` per (remote branch, path group) under a
/// `connections_per_group` setting: the setting for Type II, 1 for Type I.
pub fn pool_size(connections_per_group: u8, class: Class) -> u8 {
    match class {
        Class::TypeII => connections_per_group.max(1),
        _ => 1,
    }
}

impl Config {
    /// The sparse lane's per-flow rate in effect, kbit/s (0: off): `[qos] sparse_lane_kbit`,
    /// or when unset [`DEFAULT_SPARSE_LANE_KBIT`] if the gateway shapes a WAN port
    /// ([`Config::shapes_wan`]), else 0 (docs/mmsg.md "The sparse lane").
    pub fn sparse_lane_kbit(&self) -> u32 {
        self.qos.sparse_lane_kbit.unwrap_or_else(|| {
            if self.shapes_wan() {
                DEFAULT_SPARSE_LANE_KBIT
            } else {
                0
            }
        })
    }

    /// Whether the gateway shapes a WAN port: `[qos] enabled` and a `wan[k].rate_mbit` or
    /// `[qos] autorate` (which shapes every port).
    pub fn shapes_wan(&self) -> bool {
        self.qos.enabled
            && !self.wan.is_empty()
            && (self.qos.autorate || self.wan.iter().any(|w| w.rate_mbit.is_some()))
    }

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

    /// How many tunnel connections of `class` go to each (remote branch, path group)
    /// ([`Config::connections_per_group`] for Type II, 1 for Type I).
    pub fn connections_per_group(&self, class: Class) -> u8 {
        pool_size(self.connections_per_group, class)
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

    /// `[internet]`: the WAN port indices balanced over (explicit, else every `internet` port).
    pub fn internet_uplinks(&self) -> Vec<usize> {
        self.internet.uplinks(&self.wan)
    }

    /// `[internet]`: the capacity of each of [`Config::internet_uplinks`], Mbit/s (`None`
    /// where neither `capacity_mbit` nor `wan[k].rate_mbit` gives one).
    pub fn internet_capacities_mbit(&self) -> Vec<Option<u32>> {
        self.internet.capacities_mbit(&self.wan)
    }

    /// The `[tls]` section when it asks for TLS.
    /// "TLS is the default" (issue #17): whether this config may run with or without
    /// `--insecure-clear-tunnels` (the policy table in [`security`]).
    pub fn tunnel_security(
        &self,
        insecure_clear_tunnels: bool,
    ) -> Result<TunnelSecurity, TlsPolicyError> {
        security::tunnel_security(self.tls.as_ref(), insecure_clear_tunnels)
    }

    pub fn tls_enabled(&self) -> Option<&TlsConfig> {
        self.tls.as_ref().filter(|t| t.mode == TlsMode::Tls)
    }

    /// Checks every range and cross-reference; reports all problems, each with its key.
    pub fn validate(&self) -> Result<(), ValidationError> {
        let mut p = Problems::default();
        // The paper's port plan carries branch ids in one nibble; the extended plan to 250.
        let max_id = match self.ports {
            PortPlan::Paper => BranchId::PAPER_MAX,
            PortPlan::Extended(_) => BranchId::MAX,
        };
        if BranchId::new(self.branch_id).is_err() || self.branch_id > max_id {
            p.push(
                "branch_id",
                format!("{} is out of range 1..={max_id}", self.branch_id),
            );
        }
        check_prefixes(&mut p, "lan_prefixes", &self.lan_prefixes);
        wan::check_wan(&mut p, &self.wan);
        remote::check_remotes(
            &mut p,
            &self.remote,
            self.branch_id,
            &self.lan_prefixes,
            &self.wan,
            max_id,
        );

        if !(1..=MAX_FLOW_IDLE_TIMEOUT_S).contains(&self.flow_idle_timeout_s) {
            p.push(
                "flow_idle_timeout_s",
                format!(
                    "{} is out of range 1..={MAX_FLOW_IDLE_TIMEOUT_S}",
                    self.flow_idle_timeout_s
                ),
            );
        }

        let max_conns = crate::framing::MAX_CONNECTIONS_PER_GROUP;
        if !(1..=max_conns).contains(&self.connections_per_group) {
            p.push(
                "connections_per_group",
                format!(
                    "{} is out of range 1..={max_conns}",
                    self.connections_per_group
                ),
            );
        }

        self.classifier.validate(&mut p);

        let tls_enabled = self.tls_enabled().is_some();
        if let Some(c) = &self.controller {
            c.validate(&mut p, tls_enabled);
        }

        if let Some(o) = &self.ovs {
            o.validate(&mut p, &self.wan, tls_enabled);
        }
        if let Some(t) = self.tls_enabled() {
            t.validate(&mut p, self.controller.is_some());
        }

        self.internet.validate(&mut p, &self.wan);
        if let Some(st) = &self.striping {
            st.validate(&mut p);
        }

        self.qos.validate(&mut p);
        self.queue.validate(&mut p);

        p.finish()
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_internet;
#[cfg(test)]
mod tests_ovs;
