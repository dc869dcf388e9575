//! WAN ports behind NAT (issue #20, docs/nat.md): which branch pairs the PC can route at all.
//!
//! A port marked `nat = true` in the inventory can dial out but cannot be dialled (carrier NAT,
//! most LTE uplinks). One WAN hop therefore needs at least one public end: the NAT'd end dials
//! the public one, and the connection carries data both ways ([`Inventory::can_hop`] refuses a
//! hop between two NAT'd ports, so the automatic PC never proposes one). A pair of branches whose
//! ports are **all** behind NAT has no member path at all, not even through a transit: neither
//! gateway dials the other (each is the other's `nat` remote), and a transit's address swap
//! carries one connection end to end, which one of them would have to open towards the other's
//! NAT. Such a pair can only be relayed at the IP layer by a branch with a public port (each
//! lists the other's LAN prefixes under that branch; docs/nat.md). [`check_groups`] refuses path
//! groups between such a pair, naming it and the branches that could relay, before the flow
//! compiler sees them; [`reach`] says how a pair is reachable. Pure: no IO, no clock.

use crate::inventory::{Branch, BranchId, Inventory, WanKind};
use crate::path_group::PathGroup;

/// How one branch pair can be connected ([`reach`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reach {
    /// At least one side has a public port: the other dials it (both public: either dials).
    Direct,
    /// Both sides are behind NAT only: no member path joins them; these branches have a public
    /// internet port and can relay at the IP layer (docs/nat.md), in id order.
    Transit(Vec<BranchId>),
    /// Both sides are behind NAT only and no other branch has a public internet port.
    Unroutable,
}

/// Why path groups cannot be routed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NatError {
    /// Both branches of a pair are behind NAT only and no branch can relay between them.
    #[error(
        "branches {a} and {b} have only WAN ports behind NAT and no other branch has a public \
         internet port to relay through: neither can dial the other (give one of them a public \
         port, or add a branch with one as a transit)"
    )]
    NoTransit {
        /// The source branch of the path group.
        a: BranchId,
        /// Its destination branch.
        b: BranchId,
    },
    /// A path group joins two NAT-only branches: no member path can carry it (module docs).
    #[error(
        "path group {a}>{b} #{group}: branches {a} and {b} have only WAN ports behind NAT, so no \
         member path can join them, not even through a transit (neither can dial the other, and \
         a transit's address swap carries one connection end to end); remove the group and relay \
         their traffic at the IP layer through a branch with a public port (branches {relays}: \
         list each one's LAN prefixes under that branch, docs/nat.md)"
    )]
    NatPair {
        /// The source branch.
        a: BranchId,
        /// The destination branch.
        b: BranchId,
        /// The group id.
        group: u8,
        /// The branches that could relay, e.g. `3, 4`.
        relays: String,
    },
}

/// Whether every WAN port of `branch` is behind NAT (nobody can dial it).
pub fn nat_only(branch: &Branch) -> bool {
    !branch.wan.is_empty() && branch.wan.iter().all(|p| p.nat)
}

/// Whether `branch` has a public internet port (it can be dialled from any internet port).
fn has_public_internet(branch: &Branch) -> bool {
    branch
        .wan
        .iter()
        .any(|p| !p.nat && p.kind == WanKind::Internet)
}

/// How branches `a` and `b` can be connected.
pub fn reach(inventory: &Inventory, a: BranchId, b: BranchId) -> Reach {
    let nat = |id| inventory.branch(id).is_some_and(nat_only);
    if !(nat(a) && nat(b)) {
        return Reach::Direct;
    }
    let transits: Vec<BranchId> = inventory
        .branches()
        .filter(|t| t.id != a && t.id != b && has_public_internet(t))
        .map(|t| t.id)
        .collect();
    if transits.is_empty() {
        Reach::Unroutable
    } else {
        Reach::Transit(transits)
    }
}

/// Refuses every path group between two NAT-only branches (the first one, naming the pair):
/// [`NatError::NoTransit`] when no branch could relay, else [`NatError::NatPair`].
pub fn check_groups(inventory: &Inventory, groups: &[PathGroup]) -> Result<(), NatError> {
    for g in groups {
        let (a, b) = (g.source, g.destination);
        match reach(inventory, a, b) {
            Reach::Direct => {}
            Reach::Unroutable => return Err(NatError::NoTransit { a, b }),
            Reach::Transit(t) => {
                return Err(NatError::NatPair {
                    a,
                    b,
                    group: g.id.get(),
                    relays: t
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                })
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use std::collections::BTreeMap;

    use super::*;
    use crate::inventory::{PortIndex, PortRef, WanPort};
    use crate::path_group::{MemberPath, Transit};
    use mms_types::{MemberId, PathGroupId};

    fn id(n: u8) -> BranchId {
        BranchId::new(n).unwrap()
    }

    /// Branch `b` with one port per entry of `nat` (true: behind NAT).
    fn branch(b: u8, nat: &[bool]) -> Branch {
        Branch {
            id: id(b),
            name: format!("b{b}"),
            lan: vec![format!("198.19.{b}.0/24").parse().unwrap()],
            wan: nat
                .iter()
                .enumerate()
                .map(|(k, &nat)| {
                    let k = u8::try_from(k).unwrap();
                    WanPort {
                        port: PortIndex::new(k).unwrap(),
                        address: format!("198.18.{}.2/24", 10 * b + k).parse().unwrap(),
                        gateway: format!("198.18.{}.1", 10 * b + k).parse().unwrap(),
                        gateway_mac: None,
                        mac: None,
                        kind: WanKind::Internet,
                        capacity_mbps: 40,
                        nat,
                    }
                })
                .collect(),
        }
    }

    fn port(s: &str) -> PortRef {
        let b = s[..1].parse().unwrap();
        PortRef::new(
            id(b),
            PortIndex::from_letter(s.chars().nth(1).unwrap()).unwrap(),
        )
    }

    fn group(a: u8, b: u8, members: Vec<MemberPath>) -> PathGroup {
        PathGroup {
            source: id(a),
            destination: id(b),
            id: PathGroupId::new(0).unwrap(),
            members: members
                .into_iter()
                .enumerate()
                .map(|(s, m)| (MemberId::new(u8::try_from(s + 1).unwrap()).unwrap(), m))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    #[test]
    fn a_hop_needs_one_public_end() {
        let inv = Inventory::new(vec![branch(1, &[false]), branch(2, &[true, false])]).unwrap();
        assert!(
            inv.can_hop(port("2a"), port("1a")),
            "NAT'd end dials the public one"
        );
        assert!(
            inv.can_hop(port("1a"), port("2a")),
            "the same hop, other direction"
        );
        assert!(inv.can_hop(port("2b"), port("1a")));
        let inv = Inventory::new(vec![branch(1, &[true]), branch(2, &[true])]).unwrap();
        assert!(!inv.can_hop(port("1a"), port("2a")), "NAT to NAT");
    }

    #[test]
    fn reach_of_pairs() {
        let inv = Inventory::new(vec![
            branch(1, &[false]),
            branch(2, &[true]),
            branch(3, &[true, true]),
            branch(4, &[true, false]),
        ])
        .unwrap();
        assert_eq!(reach(&inv, id(1), id(2)), Reach::Direct);
        assert_eq!(
            reach(&inv, id(2), id(4)),
            Reach::Direct,
            "4 has a public port"
        );
        assert_eq!(
            reach(&inv, id(2), id(3)),
            Reach::Transit(vec![id(1), id(4)])
        );
        let inv = Inventory::new(vec![branch(2, &[true]), branch(3, &[true, true])]).unwrap();
        assert_eq!(reach(&inv, id(2), id(3)), Reach::Unroutable);
    }

    #[test]
    fn a_nat_only_pair_without_transit_is_refused_naming_the_pair() {
        let inv = Inventory::new(vec![branch(2, &[true]), branch(3, &[true])]).unwrap();
        let g = group(
            2,
            3,
            vec![MemberPath::direct(port("2a"), port("3a")).unwrap()],
        );
        let e = check_groups(&inv, &[g]).unwrap_err();
        assert_eq!(e, NatError::NoTransit { a: id(2), b: id(3) });
        let msg = e.to_string();
        assert!(msg.contains("branches 2 and 3"), "{msg}");
    }

    #[test]
    fn a_nat_only_pair_is_refused_also_through_a_transit_naming_the_relays() {
        let inv = Inventory::new(vec![
            branch(1, &[false]),
            branch(2, &[true]),
            branch(3, &[true]),
        ])
        .unwrap();
        let direct = group(
            2,
            3,
            vec![MemberPath::direct(port("2a"), port("3a")).unwrap()],
        );
        let via1 = MemberPath::new(
            port("2a"),
            vec![Transit {
                ingress: port("1a"),
                egress: port("1a"),
            }],
            port("3a"),
        )
        .unwrap();
        for g in [direct, group(2, 3, vec![via1])] {
            let e = check_groups(&inv, &[g]).unwrap_err();
            assert_eq!(
                e,
                NatError::NatPair {
                    a: id(2),
                    b: id(3),
                    group: 0,
                    relays: "1".into()
                }
            );
            let msg = e.to_string();
            assert!(
                msg.contains("2>3 #0")
                    && msg.contains("branches 2 and 3")
                    && msg.contains("branches 1:"),
                "{msg}"
            );
        }
        // A pair with a public side needs nothing.
        let direct = group(
            1,
            2,
            vec![MemberPath::direct(port("1a"), port("2a")).unwrap()],
        );
        check_groups(&inv, &[direct]).unwrap();
    }

    #[test]
    fn the_automatic_pc_proposes_no_nat_to_nat_hop() {
        let inv = Inventory::new(vec![
            branch(1, &[false]),
            branch(2, &[true]),
            branch(3, &[true]),
        ])
        .unwrap();
        let c = crate::path_config::candidates(&inv, id(2), id(3), true);
        assert!(!c.is_empty());
        assert!(c.iter().all(|m| !m.transits().is_empty()), "{c:?}");
        assert!(crate::path_config::candidates(&inv, id(2), id(3), false).is_empty());
    }

    #[test]
    fn the_gateways_are_told_who_cannot_be_dialled() {
        let branches = vec![
            branch(1, &[false]),
            branch(2, &[true]),
            branch(3, &[true, false]),
        ];
        let groups = vec![
            group(
                1,
                2,
                vec![MemberPath::direct(port("1a"), port("2a")).unwrap()],
            ),
            group(
                1,
                3,
                vec![MemberPath::direct(port("1a"), port("3b")).unwrap()],
            ),
        ];
        let cat = crate::catalog::Catalog::new(branches, groups, Default::default()).unwrap();
        let weights = BTreeMap::new();
        let r1 = crate::gwchan::build_remotes(&cat, &weights, id(1));
        let to =
            |r: &[mpa::config::RemoteBranch], b: u8| r.iter().find(|x| x.id == b).cloned().unwrap();
        let r2 = to(&r1, 2);
        assert!(r2.nat, "branch 2 is behind NAT only");
        let r3 = to(&r1, 3);
        assert!(!r3.nat, "branch 3 has a public port");
        assert_eq!(
            r3.wan_addresses,
            vec!["198.18.31.2".parse::<std::net::Ipv4Addr>().unwrap()]
        );
        let back = crate::gwchan::build_remotes(&cat, &weights, id(2));
        assert!(!to(&back, 1).nat);
        // The catalog refuses a direct group between two NAT-only branches, naming the pair.
        let e = crate::catalog::Catalog::new(
            vec![branch(2, &[true]), branch(3, &[true])],
            vec![group(
                2,
                3,
                vec![MemberPath::direct(port("2a"), port("3a")).unwrap()],
            )],
            Default::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("branches 2 and 3"), "{e}");
    }
}
