//! Shared helpers for the controller's integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::panic)]

use std::net::Ipv4Addr;
use std::path::PathBuf;

use controller::inventory::{BranchId, Inventory, PortRef};
use controller::ofc::reconcile;
use controller::path_group::PathGroups;

/// A file under the workspace's `examples/`.
pub fn example(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The paper's 5 × 2 inventory.
pub fn paper_inventory() -> Inventory {
    Inventory::from_toml(&example("inventory-paper.toml")).unwrap()
}

/// Table II.
pub fn table2(inv: &Inventory) -> PathGroups {
    PathGroups::from_toml(inv, &example("paths-paper-table2.toml")).unwrap()
}

/// The paper's p_k^b: WAN port k (1-based, as in the paper) of branch b, per the testbed plan.
pub fn p(k: u8, b: u8) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 10 * b + (k - 1), 2)
}

pub fn branch(b: u8) -> BranchId {
    BranchId::new(b).unwrap()
}

pub fn port(s: &str) -> PortRef {
    s.parse().unwrap()
}

/// The OFC's plan ([`reconcile::plan`]) to install one member path on switches that lack it
/// (`install`), or to remove it from switches that hold exactly its flows.
pub fn member_plan(
    t: &controller::swap::FlowTables,
    code: controller::path_group::PathCode,
    install: bool,
) -> Vec<reconcile::Step> {
    let mut flows: std::collections::BTreeMap<BranchId, Vec<controller::swap::FlowEntry>> =
        std::collections::BTreeMap::new();
    for (b, f) in t.member_flows(code) {
        flows.entry(b).or_default().push(f.clone());
    }
    let diffs = flows
        .into_iter()
        .map(|(b, fs)| {
            let d = if install {
                reconcile::diff(&[], &fs)
            } else {
                let have: Vec<reconcile::Installed> =
                    fs.iter().map(reconcile::Installed::exact).collect();
                reconcile::diff(&have, &[])
            };
            (b, d)
        })
        .collect();
    reconcile::plan(&diffs)
}

/// The OFC's plan to install every flow of `t` on empty switches.
pub fn full_plan(t: &controller::swap::FlowTables) -> Vec<reconcile::Step> {
    let empty = controller::swap::FlowTables::default();
    reconcile::plan(&reconcile::update_diffs(
        &empty,
        t,
        t.iter().map(|(b, _)| b),
    ))
}

/// The stage of a plan step.
pub fn stage(step: &reconcile::Step) -> controller::swap::Stage {
    match step.phase {
        reconcile::Phase::Install(s) | reconcile::Phase::Remove(s) => s,
        reconcile::Phase::Clear => panic!("no unknown cookies or purges here"),
    }
}
