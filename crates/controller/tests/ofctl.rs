//! The `ovs-ofctl` rendering of compiled flows is accepted by Open vSwitch's own parser
//! (`ovs-ofctl -O OpenFlow13 parse-flows`), so the golden files are real OVS syntax.
//!
//! Needs `ovs-ofctl` (OVS 3.1 on the test machines); without it the test says so on stderr and
//! checks nothing else.
// Test helpers outside #[test] functions unwrap too (clippy.toml only covers #[test] bodies).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::{paper_inventory, table2};
use controller::swap::{compile, FlowEntry};

#[test]
fn ovs_parses_every_table2_flow() {
    let inv = paper_inventory();
    let tables = compile(&inv, &table2(&inv)).unwrap();
    let text: String = tables
        .iter()
        .flat_map(|(_, flows)| flows.iter().map(FlowEntry::to_ofctl))
        .map(|l| l + "\n")
        .collect();
    let child = Command::new("ovs-ofctl")
        .args(["-O", "OpenFlow13", "parse-flows", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("SKIPPED: ovs-ofctl not installed");
            return;
        }
        Err(e) => panic!("spawn ovs-ofctl: {e}"),
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        stdout
    );
    let mods: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("OFPT_FLOW_MOD (OF1.3)"))
        .collect();
    assert_eq!(mods.len(), tables.len());
    // Spot check OVS's reading of the Fig. 4-style hairpin-free transit and the DSCP match.
    assert!(mods.iter().any(|l| l.contains("priority=1210,tcp,in_port=101,nw_src=198.18.10.2,nw_dst=198.18.20.2,nw_tos=184,tp_dst=8193")));
    assert!(mods.iter().all(|l| l.contains("cookie:0x4d4d")));
}
