//! `[ovs]`: the Open vSwitch bridge `mmsg` builds, and its checks against `[[wan]]`.

use serde::{Deserialize, Serialize};

use super::problems::Problems;
use super::wan::WanPort;

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

impl OvsConfig {
    /// Bridge, OVSDB and controller targets, WAN names and MACs; `ssl:` only with `tls_enabled`.
    pub(super) fn validate(&self, p: &mut Problems, wan: &[WanPort], tls_enabled: bool) {
        check_ovs(p, self, wan);
        if self.controller.starts_with("ssl:") && !tls_enabled {
            p.push(
                "ovs.controller",
                format!(
                    "{:?} is OpenFlow over TLS: it needs a [tls] section (mode = \"tls\") \
                     whose credentials OVS presents (docs/ofc.md §6)",
                    self.controller
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
