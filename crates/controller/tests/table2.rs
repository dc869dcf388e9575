//! Golden test: the full flow set of the paper's Table II on its 5-branch test bed (seed 000 §V-B).
//!
//! `examples/inventory-paper.toml` + `examples/paths-paper-table2.toml` compile to the flows in
//! `tests/golden/table2.flows` (one `ovs-ofctl add-flow` line per flow, grouped by switch). The
//! structure is also asserted directly: counts per switch, which codes transit which branch, and
//! the source/destination entries of every member path. Regenerate the golden file only after
//! reviewing a change: `UPDATE_GOLDEN=1 cargo test -p controller --test table2`.
// Test helpers outside #[test] functions unwrap too (clippy.toml only covers #[test] bodies).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use common::{branch, p, paper_inventory, table2};
use controller::path_group::PathCode;
use controller::swap::{
    compile, Action, CookieInfo, Direction, FlowTables, HopRole, Output, Stage,
};

fn compiled() -> FlowTables {
    let inv = paper_inventory();
    compile(&inv, &table2(&inv)).unwrap()
}

fn render(t: &FlowTables) -> String {
    let mut s = String::new();
    for (b, flows) in t.iter() {
        s += &format!("# branch {b}: {} flows\n", flows.len());
        for f in flows {
            s += &f.to_ofctl();
            s += "\n";
        }
    }
    s
}

#[test]
fn counts_per_switch() {
    let t = compiled();
    let counts: Vec<(u8, usize)> = t.counts().into_iter().map(|(b, n)| (b.get(), n)).collect();
    // Branch 1: 16 member paths × (Type I + Type II forward source + reverse destination) + 4 patch.
    // Branch 2: 16 × (forward destination + Type I + Type II reverse source) + 4 patch.
    // Branches 3, 4, 5: transit for one member of each of the 4 groups, both directions, + 4 patch.
    assert_eq!(counts, vec![(1, 52), (2, 52), (3, 12), (4, 12), (5, 12)]);
    assert_eq!(t.len(), 140);
}

#[test]
fn transit_codes_per_branch() {
    let t = compiled();
    // Table II puts member 2 through branch 3, member 3 through 4, member 4 through 5, in every
    // group: codes 0x21sg.
    for (b, s) in [(3u8, 2u16), (4, 3), (5, 4)] {
        let mut got = BTreeSet::new();
        for f in t.switch(branch(b)) {
            match f.cookie.decode().unwrap() {
                CookieInfo::Swap {
                    code,
                    direction,
                    role,
                    ..
                } => {
                    assert_eq!(role, HopRole::Transit);
                    got.insert((code.port(), direction));
                }
                CookieInfo::Patch { .. } => {}
            }
        }
        let want: BTreeSet<(u16, Direction)> = (1..=4u16)
            .flat_map(|g| {
                let code = 0x2100 | s << 4 | g;
                [(code, Direction::Forward), (code, Direction::Reverse)]
            })
            .collect();
        assert_eq!(got, want, "branch {b}");
    }
}

/// Spot checks against the table by hand. PG 1 member 2 is `1b>3b>3a>2a`: source pair
/// (p_2^1, p_1^2), first hop to p_2^3, transit 3 leaves by port a (p_1^3) to p_1^2.
#[test]
fn pg1_member2_by_hand() {
    let t = compiled();
    let code = PathCode::from_port(0x2121).unwrap();
    let flows = t.member_flows(code);
    assert_eq!(flows.len(), 8);
    for (b, f) in &flows {
        let CookieInfo::Swap {
            direction,
            role,
            variant,
            ..
        } = f.cookie.decode().unwrap()
        else {
            panic!("not a swap cookie")
        };
        let m = &f.matches;
        match (direction, role) {
            (Direction::Forward, HopRole::Source) => {
                assert_eq!(b.get(), 1);
                assert_eq!(
                    (m.in_port, m.ipv4_src, m.ipv4_dst, m.tcp_dst),
                    (Some(102), Some(p(2, 1)), Some(p(1, 2)), Some(0x2001))
                );
                assert_eq!(f.actions[1], Action::SetIpv4Dst(p(2, 3)));
                assert_eq!(f.actions[2], Action::SetTcpDst(0x2121));
                assert_eq!(
                    f.actions[3],
                    Action::SetIpDscp(if variant == 1 { 34 } else { 10 })
                );
                assert_eq!(f.actions[4], Action::Output(Output::Port(2)));
            }
            (Direction::Forward, HopRole::Transit) => {
                assert_eq!(b.get(), 3);
                assert_eq!(
                    (m.in_port, m.ipv4_src, m.ipv4_dst),
                    (Some(2), Some(p(2, 1)), Some(p(2, 3)))
                );
                assert_eq!(
                    f.actions[2..],
                    [
                        Action::SetIpv4Src(p(1, 3)),
                        Action::SetIpv4Dst(p(1, 2)),
                        Action::SetTcpDst(0x2121),
                        Action::Output(Output::Port(1)),
                    ]
                );
            }
            (Direction::Forward, HopRole::Destination) => {
                assert_eq!(b.get(), 2);
                assert_eq!(
                    (m.in_port, m.ipv4_src, m.ipv4_dst),
                    (Some(1), Some(p(1, 3)), Some(p(1, 2)))
                );
                assert_eq!(
                    f.actions[..3],
                    [
                        Action::SetIpv4Src(p(2, 1)),
                        Action::SetIpv4Dst(p(1, 2)),
                        Action::SetTcpDst(0x2001),
                    ]
                );
                assert_eq!(f.actions[3], Action::Output(Output::Port(101)));
            }
            (Direction::Reverse, HopRole::Source) => {
                assert_eq!(b.get(), 2);
                assert_eq!(
                    (m.in_port, m.ipv4_src, m.ipv4_dst, m.tcp_src),
                    (Some(101), Some(p(1, 2)), Some(p(2, 1)), Some(0x2001))
                );
                assert_eq!(f.actions[1], Action::SetIpv4Dst(p(1, 3)));
            }
            (Direction::Reverse, HopRole::Transit) => {
                assert_eq!(b.get(), 3);
                assert_eq!(
                    (m.in_port, m.ipv4_src, m.ipv4_dst),
                    (Some(1), Some(p(1, 2)), Some(p(1, 3)))
                );
                assert_eq!(
                    f.actions[2..4],
                    [Action::SetIpv4Src(p(2, 3)), Action::SetIpv4Dst(p(2, 1))]
                );
                assert_eq!(f.actions[5], Action::Output(Output::Port(2)));
            }
            (Direction::Reverse, HopRole::Destination) => {
                assert_eq!(b.get(), 1);
                assert_eq!(
                    (m.in_port, m.ipv4_src, m.ipv4_dst, m.tcp_src),
                    (Some(2), Some(p(2, 3)), Some(p(2, 1)), Some(0x2121))
                );
                assert_eq!(f.actions[2], Action::SetTcpSrc(0x2001));
                assert_eq!(f.actions[3], Action::Output(Output::Port(102)));
            }
        }
    }
}

#[test]
fn install_order() {
    let t = compiled();
    let stages: Vec<Stage> = common::full_plan(&t).iter().map(common::stage).collect();
    assert_eq!(
        stages,
        [
            Stage::Patch,
            Stage::Destination,
            Stage::Transit,
            Stage::Source
        ]
    );
    let total: usize = common::full_plan(&t)
        .iter()
        .flat_map(|s| s.ops.values())
        .map(Vec::len)
        .sum();
    assert_eq!(total, t.len());

    let code = PathCode::from_port(0x2134).unwrap(); // PG 4 member 3: 1a>4a>4b>2a
    let plan = common::member_plan(&t, code, true);
    let shape: Vec<(Stage, Vec<(u8, usize)>)> = plan
        .iter()
        .map(|s| {
            (
                common::stage(s),
                s.ops.iter().map(|(b, f)| (b.get(), f.len())).collect(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            (Stage::Destination, vec![(1, 1), (2, 1)]), // reverse at 1, forward at 2
            (Stage::Transit, vec![(4, 2)]),
            (Stage::Source, vec![(1, 2), (2, 2)]),
        ]
    );
    let removal: Vec<Stage> = common::member_plan(&t, code, false)
        .iter()
        .map(common::stage)
        .collect();
    assert_eq!(removal, [Stage::Source, Stage::Transit, Stage::Destination]);
}

#[test]
fn golden_file() {
    let got = render(&compiled());
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/table2.flows");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap();
    assert_eq!(got, want, "flows differ from {}", path.display());
}
