//! `[[wan]]`: this gateway's WAN ports (uplinks) and their checks.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use mms_types::{MacAddr, WanKind};

use super::problems::Problems;

/// Most WAN ports one gateway may have: the in-kernel MPTCP path manager takes at most 8 endpoints
/// per namespace (DESIGN §4), and n×m subflows must stay within its 8-subflow limit + 1.
pub const MAX_WAN_PORTS: usize = 8;
/// Largest `wan[k].rate_mbit` accepted (100 Gbit/s).
pub const MAX_WAN_RATE_MBIT: u32 = 100_000;

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
    /// This port is behind NAT (carrier NAT, most LTE and many cable uplinks, docs/nat.md): it
    /// can dial out but cannot be dialled. Its connections get TCP keepalives on every subflow
    /// (`mmsg`'s `NAT_KEEPALIVE_IDLE`) so the NAT keeps their mappings. Default: `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nat: bool,
}

impl WanPort {
    /// The MAC of this port's MPA interface: `mac`, else derived from the address.
    pub fn mpa_mac(&self) -> MacAddr {
        self.mac
            .unwrap_or_else(|| MacAddr::from_ipv4(self.address.addr()))
    }
}

/// Whether every one of `wan` is behind NAT (nobody can dial this gateway; docs/nat.md).
pub fn nat_only(wan: &[WanPort]) -> bool {
    !wan.is_empty() && wan.iter().all(|w| w.nat)
}

/// `wan`: the port count, and per port its name, address, rate and gateway.
pub(super) fn check_wan(p: &mut Problems, wan: &[WanPort]) {
    if wan.is_empty() {
        p.push("wan", "at least one WAN port is required".into());
    }
    if wan.len() > MAX_WAN_PORTS {
        p.push(
            "wan",
            format!("{} WAN ports, at most {MAX_WAN_PORTS}", wan.len()),
        );
    }
    let mut names = BTreeSet::new();
    let mut addrs = BTreeSet::new();
    for (i, w) in wan.iter().enumerate() {
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
}
