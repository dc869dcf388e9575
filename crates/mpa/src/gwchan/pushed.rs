//! The configuration the controller pushes to one gateway ([`GatewayConfig`]) and the PM's
//! marks in it ([`Priorities`]): a module of its own so that the gateway channel's messages
//! ([`super`]) and the zero-touch setup answer ([`super::setup`]) both build on it.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::{ClassifierConfig, Config, RemoteBranch};
use crate::Class;
use mms_types::PortPlan;

/// The configuration the controller pushes to one gateway: replaces the file's `remote` (and
/// `classifier` when present) as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayConfig {
    /// Increases with every change the controller makes for this gateway (never reused while
    /// the controller's database lives: it is derived from a counter plus the start time).
    pub version: u64,
    /// The branch this config is for.
    pub branch_id: u8,
    /// The other branches: WAN addresses, LAN prefixes, path groups with WRR weights.
    pub remotes: Vec<RemoteBranch>,
    /// The TC's rules; `None`: keep the file's.
    #[serde(default)]
    pub classifier: Option<ClassifierConfig>,
    /// DSCP marks per class and WAN hop count (PM, seed 000 §IV), for the egress qdiscs.
    #[serde(default)]
    pub priorities: Priorities,
    /// The outer port plan (issue #20); `None`: the paper's (`0xB00G`), as older controllers
    /// send it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<PortPlan>,
}

/// The PM's marks: the DSCP a Type I tunnel socket sets, and the DSCP of each (class, WAN hops).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Priorities {
    /// DSCP on the sockets of Type I connections (0: not set).
    pub type1_socket_dscp: u8,
    /// `"type1/1" → 46` etc.: class and WAN hops → DSCP (and its strict-priority band order).
    pub marks: BTreeMap<String, u8>,
}

impl Priorities {
    /// The PM table of this build (`mms_types::dscp`), as the controller pushes it: the socket
    /// mark of Type I and `"type1/1" → 46` … for every tunnelled class and WAN hop count.
    pub fn table() -> Self {
        let mut marks = BTreeMap::new();
        for class in Class::TUNNELLED {
            for hops in 1..=mms_types::dscp::MAX_HOPS {
                marks.insert(
                    format!("{class}/{hops}"),
                    mms_types::dscp::mark(class, hops),
                );
            }
        }
        Priorities {
            type1_socket_dscp: mms_types::dscp::socket_mark(Class::TypeI).unwrap_or(0),
            marks,
        }
    }

    /// Whether a pushed table is this build's. Both ends take the table from `mms_types`, so a
    /// difference means the controller and the gateway run different versions: the gateway
    /// keeps its own marks (its egress qdiscs and socket marks) and says so.
    pub fn matches_table(&self) -> bool {
        *self == Self::table()
    }
}

impl GatewayConfig {
    /// `base` with this config's remotes (and classifier, when given). Validate the result with
    /// [`Config::validate`] before using it.
    pub fn merge_into(&self, base: &Config) -> Config {
        let mut c = base.clone();
        c.remote = self.remotes.clone();
        c.ports = self.ports.unwrap_or_default();
        if let Some(cl) = &self.classifier {
            c.classifier = cl.clone();
        }
        c
    }

    /// Checks the merged config: the branch id must be ours and the merge valid.
    pub fn validate_for(&self, base: &Config) -> Result<Config, String> {
        if self.branch_id != base.branch_id {
            return Err(format!(
                "branch_id: config for branch {}, this gateway is branch {}",
                self.branch_id, base.branch_id
            ));
        }
        let merged = self.merge_into(base);
        merged.validate().map_err(|e| e.to_string())?;
        Ok(merged)
    }
}
