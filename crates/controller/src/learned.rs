//! Learned WAN addresses (issue #20, "Real WANs"), the controller's part, pure: a gateway's
//! [`WanState`] report (protocol 5, `docs/gwchan.md`) against the inventory → the port changes
//! to commit. The inventory's `address`, `gateway` and `gateway_mac` of a port are hints until
//! its gateway reports: a learned value replaces the stored one (and stays after the gateway
//! disconnects, as the last known state); what is not learned (`None`: no address, no route,
//! unresolved neighbour) keeps the stored value. The commit goes through the store like any
//! operator change, so everything derived from the inventory follows: swap flows (OFC),
//! the remotes of every other gateway (peers re-dial the new address), WRR.
//!
//! Call order: the session hands a report to [`crate::gwchan::Registry`], which calls
//! [`patches`] on the current catalog and, when it is not empty, commits [`apply`] in one
//! store transaction.

use mpa::gwchan::WanState;

use crate::catalog::{CatalogError, PortPatch};
use crate::inventory::{BranchId, PortIndex, PortRef};
use crate::store::Catalog;

/// The changes `state` (reported by `branch`) makes to the inventory of `catalog`, per port;
/// empty when everything learned is stored already (or the branch is unknown). Ports the
/// inventory does not have are ignored (the inventory defines the ports, not the gateway).
pub fn patches(catalog: &Catalog, branch: BranchId, state: &WanState) -> Vec<(PortRef, PortPatch)> {
    let inv = catalog.inventory();
    let mut out = Vec::new();
    for p in &state.ports {
        let Ok(port) = PortIndex::new(p.port) else {
            continue;
        };
        let at = PortRef::new(branch, port);
        let Some(w) = inv.port(at) else {
            continue;
        };
        let mut patch = PortPatch::default();
        if let Some(a) = p.address.filter(|a| *a != w.address) {
            patch.address = Some(a);
        }
        let address = patch.address.unwrap_or(w.address);
        if let Some(nh) = p
            .next_hop
            .filter(|nh| *nh != w.gateway && address.contains(nh))
        {
            patch.gateway = Some(nh);
        }
        if let Some(m) = p.next_hop_mac.filter(|m| Some(*m) != w.gateway_mac) {
            patch.gateway_mac = Some(m);
        }
        if patch != PortPatch::default() {
            out.push((at, patch));
        }
    }
    out
}

/// `catalog` with `patches` applied (one validation at the end of each port: an address that
/// collides with another port's is refused, nothing is changed).
pub fn apply(catalog: &Catalog, patches: &[(PortRef, PortPatch)]) -> Result<Catalog, CatalogError> {
    let mut c = catalog.clone();
    for (at, patch) in patches {
        c = c.modify_port(*at, patch.clone())?;
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use crate::inventory::InventoryFile;
    use crate::path_config::Settings;
    use crate::path_group::GroupsFile;
    use mms_types::MacAddr;
    use mpa::gwchan::WanLearned;

    fn catalog() -> Catalog {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/");
        let inv: InventoryFile =
            toml::from_str(&std::fs::read_to_string(format!("{root}inventory-2x2.toml")).unwrap())
                .unwrap();
        let groups: GroupsFile =
            toml::from_str(&std::fs::read_to_string(format!("{root}paths-2x2.toml")).unwrap())
                .unwrap();
        Catalog::from_files(inv, groups, Settings::default()).unwrap()
    }

    fn b2() -> BranchId {
        BranchId::new(2).unwrap()
    }

    fn learned(c: &Catalog) -> WanState {
        let b = c.inventory().branch(b2()).unwrap();
        WanState {
            ports: b
                .wan
                .iter()
                .map(|w| WanLearned {
                    port: w.port.get(),
                    name: format!("wan{}", w.port.get()),
                    address: Some(w.address),
                    next_hop: Some(w.gateway),
                    next_hop_mac: w.gateway_mac,
                })
                .collect(),
        }
    }

    #[test]
    fn what_is_stored_already_changes_nothing() {
        let c = catalog();
        assert!(patches(&c, b2(), &learned(&c)).is_empty());
        // Unknown values keep the stored ones.
        let mut s = learned(&c);
        for p in &mut s.ports {
            p.address = None;
            p.next_hop = None;
            p.next_hop_mac = None;
        }
        assert!(patches(&c, b2(), &s).is_empty());
    }

    #[test]
    fn a_new_address_next_hop_and_mac_are_committed() {
        let c = catalog();
        let mut s = learned(&c);
        s.ports[0].address = Some("198.18.20.77/24".parse().unwrap());
        s.ports[0].next_hop = Some("198.18.20.254".parse().unwrap());
        s.ports[0].next_hop_mac = Some(MacAddr([2, 0, 0xc6, 0x12, 0x14, 0xfe]));
        let p = patches(&c, b2(), &s);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].0.to_string(), "2a");
        let n = apply(&c, &p).unwrap();
        let w = n.inventory().port(p[0].0).unwrap();
        assert_eq!(w.address.to_string(), "198.18.20.77/24");
        assert_eq!(w.gateway.to_string(), "198.18.20.254");
        assert_eq!(w.gateway_mac.unwrap().to_string(), "02:00:c6:12:14:fe");
        // Reported again: nothing more to do.
        assert!(patches(&n, b2(), &s).is_empty());
        // Port b unchanged.
        let b = PortRef::new(b2(), PortIndex::new(1).unwrap());
        assert_eq!(n.inventory().port(b), c.inventory().port(b));
    }

    #[test]
    fn a_next_hop_outside_the_network_or_an_unknown_port_is_ignored() {
        let c = catalog();
        let mut s = learned(&c);
        s.ports[0].next_hop = Some("203.0.113.1".parse().unwrap());
        s.ports.push(WanLearned {
            port: 7,
            name: "wan7".into(),
            address: Some("198.18.27.2/24".parse().unwrap()),
            next_hop: None,
            next_hop_mac: None,
        });
        assert!(patches(&c, b2(), &s).is_empty());
    }

    #[test]
    fn an_address_of_another_port_is_refused() {
        let c = catalog();
        let mut s = learned(&c);
        // Branch 1's port a address reported by branch 2: the inventory refuses duplicates.
        let taken = c.inventory().branch(BranchId::new(1).unwrap()).unwrap().wan[0].address;
        s.ports[0].address = Some(taken);
        s.ports[0].next_hop = None;
        let p = patches(&c, b2(), &s);
        assert_eq!(p.len(), 1);
        assert!(apply(&c, &p).is_err());
    }
}
