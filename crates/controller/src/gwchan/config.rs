//! What each gateway is sent (pure): its remotes with the path groups and WRR weights of each
//! pair, and the PM's DSCP marks.

use std::collections::BTreeMap;

use mpa::config::{PathGroupConfig, RemoteBranch};
use mpa::gwchan::Priorities;

use crate::inventory::BranchId;
use crate::store::Catalog;
use crate::wrr::PairWeights;

/// The remotes of `branch`: every other branch with a path group in either direction, with
/// its WAN addresses (port order) and LAN prefixes; per group id of the pair the WRR weight of
/// `branch → other` (`weights`, by (source, destination)), or 1 for a group that exists only
/// in the direction `other → branch` (the gateway accepts it, and sends little on it).
pub fn build_remotes(
    catalog: &Catalog,
    weights: &BTreeMap<(u8, u8), PairWeights>,
    branch: BranchId,
) -> Vec<RemoteBranch> {
    let inv = catalog.inventory();
    let mut out = Vec::new();
    for other in inv.branches() {
        if other.id == branch {
            continue;
        }
        let mut groups: BTreeMap<u8, u32> = BTreeMap::new();
        for g in catalog.groups().groups() {
            if g.source == branch && g.destination == other.id {
                let w = weights
                    .get(&(branch.get(), other.id.get()))
                    .and_then(|p| p.groups.iter().find(|x| x.group == g.id.get()))
                    .map_or(1, |x| x.weight);
                groups.insert(g.id.get(), w.clamp(1, mpa::config::MAX_WEIGHT));
            } else if g.source == other.id && g.destination == branch {
                groups.entry(g.id.get()).or_insert(1);
            }
        }
        if groups.is_empty() {
            continue;
        }
        // A port behind NAT cannot be dialled: only the public ones are subflow destinations;
        // a branch with none is dialled by no one and sends on what it dials (docs/nat.md).
        let nat = other.wan.iter().all(|p| p.nat);
        let wan_addresses = other
            .wan
            .iter()
            .filter(|p| nat || !p.nat)
            .map(|p| p.ip())
            .collect();
        out.push(RemoteBranch {
            id: other.id.get(),
            wan_addresses,
            lan_prefixes: other.lan.iter().map(|n| ipnet::IpNet::V4(*n)).collect(),
            path_groups: groups
                .into_iter()
                .map(|(id, weight)| PathGroupConfig { id, weight })
                .collect(),
            nat,
        });
    }
    out
}

/// The PM's marks (the same for every gateway: `mms_types::dscp`'s table).
pub fn priorities() -> Priorities {
    Priorities::table()
}
