//! Shared helpers for the controller's integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::panic)]

use std::net::Ipv4Addr;
use std::path::PathBuf;

use controller::inventory::{BranchId, Inventory, PortRef};
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
