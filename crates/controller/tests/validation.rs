//! Inventory and path group validation: every example parses, bad input is rejected with a clear
//! message (STYLE §8).
// Test helpers outside #[test] functions unwrap too (clippy.toml only covers #[test] bodies).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
mod common;

use common::{example, paper_inventory, port, table2};
use controller::inventory::{Inventory, InventoryError, LoadError};
use controller::path_group::{self, GroupError, PathGroups};
use controller::swap::{compile, switch_ports, CompileError, MacKind};

#[test]
fn examples_parse() {
    let inv = paper_inventory();
    assert_eq!(inv.branches().count(), 5);
    assert_eq!(inv.ports().count(), 10);
    let groups = table2(&inv);
    assert_eq!(groups.len(), 4);
    assert_eq!(groups.members().count(), 16);
    // JSON form of the same data round-trips.
    let json = serde_json::to_string(&inv).unwrap();
    assert_eq!(Inventory::from_json(&json).unwrap(), inv);
    let gjson = serde_json::to_string(&groups.to_file()).unwrap();
    assert_eq!(PathGroups::from_json(&inv, &gjson).unwrap(), groups);
    let ports: Vec<(String, u32)> = switch_ports(&inv, common::branch(1))
        .into_iter()
        .map(|p| (p.name, p.ofport))
        .collect();
    assert_eq!(
        ports,
        [
            ("wan0".into(), 1),
            ("mpa0".into(), 101),
            ("wan1".into(), 2),
            ("mpa1".into(), 102)
        ]
    );
}

fn paper_with(from: &str, to: &str) -> String {
    let s = example("inventory-paper.toml");
    assert!(s.contains(from), "{from}");
    s.replacen(from, to, 1)
}

fn invalid(toml: &str) -> InventoryError {
    match Inventory::from_toml(toml) {
        Err(LoadError::Invalid(e)) => e,
        other => panic!("expected an invalid inventory, got {other:?}"),
    }
}

fn toml_error(toml: &str) -> String {
    match Inventory::from_toml(toml) {
        Err(LoadError::Toml(e)) => e.to_string(),
        other => panic!("expected a TOML error, got {other:?}"),
    }
}

#[test]
fn unknown_keys_rejected() {
    let e = toml_error(&paper_with(
        "capacity_mbps = 40",
        "capacity_mbps = 40\nspeed = 1",
    ));
    assert!(e.contains("unknown field `speed`"), "{e}");
    let e = toml_error(&paper_with(
        "name = \"branch-1\"",
        "name = \"branch-1\"\ncolour = 1",
    ));
    assert!(e.contains("unknown field `colour`"), "{e}");
    let e = toml_error(&format!(
        "{}\n[settings]\n",
        example("inventory-paper.toml")
    ));
    assert!(e.contains("unknown field `settings`"), "{e}");
}

#[test]
fn branch_id_out_of_range() {
    for id in ["0", "251"] {
        let e = toml_error(&paper_with("id = 1\n", &format!("id = {id}\n")));
        assert!(
            e.contains(&format!("branch id {id} is out of range 1..=250")),
            "{e}"
        );
    }
}

#[test]
fn inventory_errors() {
    assert!(matches!(
        invalid(&paper_with("id = 2\n", "id = 1\n")),
        InventoryError::DuplicateBranchId(_)
    ));
    assert!(matches!(
        invalid(&paper_with("name = \"branch-2\"", "name = \"branch-1\"")),
        InventoryError::DuplicateName { .. }
    ));
    assert!(matches!(
        invalid(&paper_with("name = \"branch-2\"", "name = \"bad name\"")),
        InventoryError::BadName { .. }
    ));
    let e = invalid(&paper_with("198.19.2.0/24", "198.19.1.128/25"));
    assert!(matches!(e, InventoryError::LanOverlap { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        "LAN prefix 198.19.1.0/24 of branch 1 overlaps 198.19.1.128/25 of branch 2"
    );
    let e = invalid(&paper_with("198.19.2.0/24", "198.19.2.1/24"));
    assert!(e.to_string().contains("did you mean 198.19.2.0/24"), "{e}");
    let e = invalid(&paper_with(
        "address = \"198.18.20.2/24\"\ngateway = \"198.18.20.1\"",
        "address = \"198.18.10.2/24\"\ngateway = \"198.18.10.1\"",
    ));
    assert_eq!(
        e.to_string(),
        "WAN address 198.18.10.2 is used by ports 1a and 2a"
    );
    let e = invalid(&paper_with("port = \"b\"", "port = \"c\""));
    assert!(matches!(e, InventoryError::PortOutOfOrder { .. }), "{e}");
    let e = invalid(&paper_with(
        "gateway = \"198.18.10.1\"",
        "gateway = \"198.18.99.1\"",
    ));
    assert!(
        matches!(e, InventoryError::GatewayOutsidePrefix { .. }),
        "{e}"
    );
    let e = invalid(&paper_with(
        "gateway = \"198.18.10.1\"",
        "gateway = \"198.18.10.2\"",
    ));
    assert!(matches!(e, InventoryError::GatewayIsSelf { .. }), "{e}");
    let e = invalid(&paper_with("capacity_mbps = 40", "capacity_mbps = 0"));
    assert_eq!(e.to_string(), "port 1a: capacity_mbps must be at least 1");
    let e = invalid(&paper_with(
        "mac = \"02:00:c6:12:14:02\"",
        "mac = \"02:00:c6:12:0a:02\"",
    ));
    assert!(matches!(e, InventoryError::DuplicateMac { .. }), "{e}");
    let e = invalid(&paper_with(
        "address = \"198.18.10.2/24\"",
        "address = \"198.18.10.0/24\"",
    ));
    assert!(matches!(e, InventoryError::NotHostAddress { .. }), "{e}");
    let e = invalid(&paper_with("198.19.1.0/24", "198.18.0.0/16"));
    assert!(matches!(e, InventoryError::WanInLan { .. }), "{e}");
    let e = toml_error(&paper_with(
        "mac = \"02:00:c6:12:0a:02\"",
        "mac = \"02:00\"",
    ));
    assert!(e.contains("not a MAC address"), "{e}");
    let e = toml_error(&paper_with("kind = \"internet\"", "kind = \"satellite\""));
    assert!(e.contains("satellite"), "{e}");
}

fn groups_err(inv: &Inventory, members: &str) -> GroupError {
    let toml = format!("[[groups]]\nsource = 1\ndestination = 2\nid = 0\nmembers = [{members}]\n");
    match PathGroups::from_toml(inv, &toml) {
        Err(path_group::LoadError::Invalid(e)) => e,
        other => panic!("expected invalid groups, got {other:?}"),
    }
}

#[test]
fn group_errors() {
    let inv = paper_inventory();
    let e = groups_err(&inv, r#""1a>2a", "1a>3b>3a>2a""#);
    assert_eq!(
        e.to_string(),
        "path group 1>2 #0: members 1 and 2 both use the address pair (1a, 2a)"
    );
    let e = groups_err(&inv, r#""1a>2c""#);
    assert!(matches!(e, GroupError::UnknownPort { .. }), "{e}");
    let e = groups_err(&inv, r#""1a>3a""#);
    assert!(matches!(e, GroupError::WrongEndpoints { .. }), "{e}");
    let e = groups_err(&inv, "");
    assert!(matches!(e, GroupError::NoMembers { .. }), "{e}");

    let toml = "[[groups]]\nsource = 1\ndestination = 2\nid = 16\nmembers = [\"1a>2a\"]\n";
    let e = PathGroups::from_toml(&inv, toml).unwrap_err().to_string();
    assert!(e.contains("path group id 16 is out of range 0..=15"), "{e}");
    let toml = "[[groups]]\nsource = 1\ndestination = 2\nid = 1\nmembers = [\"1a>3a>4b>2a\"]\n";
    let e = PathGroups::from_toml(&inv, toml).unwrap_err().to_string();
    assert!(e.contains("transit 3a>4b must stay in one branch"), "{e}");
    let toml =
        "[[groups]]\nsource = 1\ndestination = 2\nid = 1\nmembers = [\"1a>2a\"]\nweight = 3\n";
    let e = PathGroups::from_toml(&inv, toml).unwrap_err().to_string();
    assert!(e.contains("unknown field `weight`"), "{e}");
    let twice = "[[groups]]\nsource = 1\ndestination = 2\nid = 1\nmembers = [\"1a>2a\"]\n";
    let e = PathGroups::from_toml(&inv, &format!("{twice}{twice}"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("defined twice"), "{e}");
}

#[test]
fn leased_lines() {
    // Turn 1b and 3a into the two ends of a leased line 198.19.200.0/30.
    let s = example("inventory-paper.toml")
        .replacen(
            "address = \"198.18.11.2/24\"\ngateway = \"198.18.11.1\"",
            "address = \"198.19.200.1/30\"\ngateway = \"198.19.200.2\"",
            1,
        )
        .replacen(
            "address = \"198.18.30.2/24\"\ngateway = \"198.18.30.1\"",
            "address = \"198.19.200.2/30\"\ngateway = \"198.19.200.1\"",
            1,
        );
    let s = s
        .replacen(
            "gateway_mac = \"02:00:c6:12:0b:01\"\nkind = \"internet\"",
            "kind = \"leased\"",
            1,
        )
        .replacen(
            "gateway_mac = \"02:00:c6:12:1e:01\"\nkind = \"internet\"",
            "kind = \"leased\"",
            1,
        );
    let inv = Inventory::from_toml(&s).unwrap();
    assert!(inv.can_hop(port("1b"), port("3a")));
    assert!(inv.can_hop(port("3a"), port("1b")));
    assert!(!inv.can_hop(port("1b"), port("2a")));
    assert!(!inv.can_hop(port("1a"), port("3a")));
    // The far end's MAC stands in for the missing gateway MAC.
    assert_eq!(
        inv.next_hop_mac(port("3a")),
        inv.port(port("1b")).unwrap().mac
    );
    let e = groups_err(&inv, r#""1b>2a""#);
    assert!(matches!(e, GroupError::ImpossibleHop { .. }), "{e}");
    let toml = "[[groups]]\nsource = 2\ndestination = 1\nid = 0\nmembers = [\"2a>3a>3a>1b\"]\n";
    let groups = PathGroups::from_toml(&inv, toml);
    assert!(groups.is_err(), "2a>3a is internet to leased");
    let toml = "[[groups]]\nsource = 2\ndestination = 1\nid = 0\nmembers = [\"2a>3b>3a>1b\"]\n";
    let groups = PathGroups::from_toml(&inv, toml).unwrap();
    let t = compile(&inv, &groups).unwrap();
    assert_eq!(
        t.member_flows(groups.members().next().unwrap().code).len(),
        8
    );
}

#[test]
fn missing_mac_is_a_clear_error() {
    let s = paper_with("mac = \"02:00:c6:12:1f:02\"\n", "");
    let inv = Inventory::from_toml(&s).unwrap();
    let groups = table2(&inv);
    // Table II's PG 1 member 2 leaves branch 3 by 3a... and PG 2 member 2 by 3b.
    let e = compile(&inv, &groups).unwrap_err();
    assert!(
        matches!(
            e,
            CompileError::MissingMac {
                kind: MacKind::Port,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("port 3b is a transit egress, so its `mac` must be set"),
        "{e}"
    );
}

#[test]
fn reserved_port_ranges() {
    let inv = paper_inventory();
    // Branches 1..=5: 0x1000..=0x5FFF in one range.
    assert_eq!(path_group::reserved_ports(&inv), vec![0x1000..=0x5FFF]);
    assert_eq!(path_group::reserved_ports_sysctl(&inv), "4096-24575");
    let s = example("inventory-paper.toml").replacen("id = 3\n", "id = 9\n", 1);
    let inv = Inventory::from_toml(&s).unwrap();
    assert_eq!(
        path_group::reserved_ports_sysctl(&inv),
        "4096-12287,16384-24575,36864-40959"
    );
}
