//! `[[remote]]`: the other branches, the path groups towards each, and how new flows pick a
//! group (`selection_policy`).

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::{BranchId, PathGroupId};

use super::problems::{check_prefixes, Problems};
use super::wan::{WanPort, MAX_WAN_PORTS};

/// Largest path group weight. Weights are relative; 1000 gives 0.1% resolution and keeps the smooth
/// WRR sums far from overflow (16 groups × 1000 fits an i64 trivially).
pub const MAX_WEIGHT: u32 = 1_000;

/// Another branch.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteBranch {
    /// Its branch id, 1..=15 (1..=250 with an extended `ports` plan), not ours.
    pub id: u8,
    /// The public addresses of its WAN ports (the MPTCP subflow destinations), in port order.
    pub wan_addresses: Vec<Ipv4Addr>,
    /// The prefixes of its LAN: inner destinations in them are tunnelled to this branch.
    pub lan_prefixes: Vec<IpNet>,
    /// The path groups to it (one MPTCP connection per group and class). Default: group 0, weight 1.
    #[serde(default = "default_path_groups")]
    pub path_groups: Vec<PathGroupConfig>,
    /// Every WAN port of that branch is behind NAT (docs/nat.md): it cannot be dialled. We never
    /// dial it; it dials us, and we send our traffic to it on the connections it dialled (each
    /// accepted only after TLS proved its branch). Its `wan_addresses` are then only the
    /// addresses its connections may come from (the NAT's outside addresses; clear mode checks
    /// them). Default: `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nat: bool,
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

/// `remote`: ids (not ours, not twice), WAN addresses (not ours), LAN prefixes (not overlapping
/// ours nor any other remote's: a prefix inside, around or equal to another branch's is refused)
/// and path groups.
pub(super) fn check_remotes(
    p: &mut Problems,
    remotes: &[RemoteBranch],
    branch_id: u8,
    lan_prefixes: &[IpNet],
    wan: &[WanPort],
    max_id: u8,
) {
    let addrs: BTreeSet<Ipv4Addr> = wan.iter().map(|w| w.address.addr()).collect();
    let mut ids = BTreeSet::new();
    // (key, remote index, branch id, prefix) of every remote prefix seen so far.
    let mut remote_prefixes: Vec<(String, usize, u8, IpNet)> = Vec::new();
    for (r, remote) in remotes.iter().enumerate() {
        let key = format!("remote[{r}]");
        if BranchId::new(remote.id).is_err() || remote.id > max_id {
            p.push(
                format!("{key}.id"),
                format!("{} is out of range 1..={max_id}", remote.id),
            );
        } else if remote.id == branch_id {
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
        check_prefixes(p, &pkey, &remote.lan_prefixes);
        for (i, net) in remote.lan_prefixes.iter().enumerate() {
            let k = format!("{pkey}[{i}]");
            for own in lan_prefixes {
                if own.contains(net) || net.contains(own) {
                    p.push(k.clone(), format!("{net} overlaps own lan_prefixes {own}"));
                }
            }
            // Disjoint across branches, not only different: a source address must name one
            // sender (the receive side's source filter) and a destination one branch.
            for (other, ri, id, n) in &remote_prefixes {
                if *ri != r && (n.contains(net) || net.contains(n)) {
                    let what = if n == net { "is also" } else { "overlaps" };
                    p.push(
                        k.clone(),
                        format!(
                            "{net} (branch {}) {what} {other} = {n} (branch {id}); \
                             LAN prefixes of different branches must be disjoint",
                            remote.id
                        ),
                    );
                }
            }
            remote_prefixes.push((k, r, remote.id, *net));
        }
        if remote.nat && super::wan::nat_only(wan) {
            p.push(
                format!("{key}.nat"),
                format!(
                    "branch {} and this gateway are both behind NAT only: neither can dial the \
                     other (reach it through a transit branch with a public port, docs/nat.md)",
                    remote.id
                ),
            );
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
}
