//! Zero-touch set-up (protocol 4, issue #21, docs/ops.md "Enrol a gateway"): a gateway that
//! has just enrolled asks the controller for its whole config ([`GatewayMsg::Setup`] →
//! [`ControllerMsg::Setup`]) and `mmsg enrol --write-config` writes it as its config file.
//!
//! The controller compiles a [`GatewaySetup`] from its inventory (the branch's LAN prefixes
//! and WAN ports) plus the [`GatewayConfig`] it pushes to that branch anyway (remotes, path
//! groups, weights, PM marks). The gateway turns it into a [`Config`] with
//! [`GatewaySetup::to_config`], adding what only it knows: where the controller is (`[controller]`)
//! and where its credentials are (`[tls]`). Interface names are not in the inventory: WAN port
//! k is `wan{k}` unless the gateway renames it ([`GatewaySetup::to_config`]'s `wan_names`).
//!
//! Authentication: mutual TLS with the certificate of the branch (the request's `branch_id`
//! must be the certificate's), or the controller's unix socket. Never over clear TCP.
//!
//! [`GatewayMsg::Setup`]: super::GatewayMsg::Setup
//! [`ControllerMsg::Setup`]: super::ControllerMsg::Setup

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::config::{Config, ControllerConfig, TlsConfig, ValidationError, WanPort};

use super::pushed::GatewayConfig;

/// The first protocol version with [`SetupRequest`] and [`GatewaySetup`].
pub const SETUP_PROTOCOL: u32 = 4;

/// Gateway → controller, instead of a register (protocol 4): "send me my whole config".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetupRequest {
    /// The branch asking (over mutual TLS it must be the certificate's).
    pub branch_id: u8,
}

/// Controller → gateway: the answer to a [`SetupRequest`]; the controller closes the stream
/// after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewaySetup {
    /// The branch (the inventory's id).
    pub branch_id: u8,
    /// The branch's LAN prefixes (inventory `lan`).
    pub lan_prefixes: Vec<IpNet>,
    /// The WAN ports in port order (`a` = `wan[0]`), named `wan{k}`: address, next hop, kind,
    /// MAC of the MPA port when the inventory has one.
    pub wan: Vec<WanPort>,
    /// What the controller pushes to this branch over the channel (remotes, path groups,
    /// weights, PM marks): the file starts with it, the daemon replaces it at run time.
    pub config: GatewayConfig,
}

impl GatewaySetup {
    /// The gateway config file: the inventory's part, the pushed remotes and classifier, and
    /// `controller` and `tls` as given. `wan_names` renames the WAN interfaces in port order
    /// (empty: `wan0`, `wan1`, ...; otherwise one name per port). The result is validated.
    pub fn to_config(
        &self,
        controller: ControllerConfig,
        tls: TlsConfig,
        wan_names: &[String],
    ) -> Result<Config, SetupError> {
        if self.config.branch_id != self.branch_id {
            return Err(SetupError::Branch(self.config.branch_id, self.branch_id));
        }
        let mut wan = self.wan.clone();
        if !wan_names.is_empty() {
            if wan_names.len() != wan.len() {
                return Err(SetupError::WanNames(wan_names.len(), wan.len()));
            }
            for (w, n) in wan.iter_mut().zip(wan_names) {
                w.name.clone_from(n);
            }
        }
        // The defaults of every other key are those of a file that leaves them out.
        let base = serde_json::json!({
            "branch_id": self.branch_id,
            "lan_prefixes": self.lan_prefixes,
            "wan": wan,
        });
        let mut c: Config =
            serde_json::from_value(base).map_err(|e| SetupError::Shape(e.to_string()))?;
        c.controller = Some(controller);
        c.tls = Some(tls);
        let c = self.config.merge_into(&c);
        c.validate()?;
        Ok(c)
    }
}

/// A [`GatewaySetup`] that does not make a valid config.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The pushed part is for another branch (controller's bug).
    #[error("the controller's config is for branch {0}, the setup for branch {1}")]
    Branch(u8, u8),
    /// `--wan-name` given, but not once per WAN port.
    #[error("{0} WAN interface names given, the branch has {1} WAN ports")]
    WanNames(usize, usize),
    /// The setup does not deserialize as a config (controller's bug).
    #[error("setup: {0}")]
    Shape(String),
    /// The resulting config is invalid (e.g. a branch without WAN ports in the inventory).
    #[error(transparent)]
    Invalid(#[from] ValidationError),
}
