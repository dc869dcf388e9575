#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use proptest::prelude::*;

use super::*;
use mms_types::{MemberId, PathGroupId};

fn b(n: u8) -> BranchId {
    BranchId::new(n).unwrap()
}

fn code(src: u8, dst: u8, g: u8, s: u8) -> PathCode {
    PathCode {
        destination: b(dst),
        source: b(src),
        member: MemberId::new(s).unwrap(),
        group: PathGroupId::new(g).unwrap(),
    }
}

/// Full mesh of `n` branches, one group of 2 members per ordered pair: member 1 direct,
/// member 2 through the next branch (a transit) when there is one.
fn mesh(n: u8) -> BTreeMap<PathCode, BTreeSet<BranchId>> {
    let mut m = BTreeMap::new();
    for s in 1..=n {
        for d in 1..=n {
            if s == d {
                continue;
            }
            m.insert(code(s, d, 0, 1), BTreeSet::from([b(s), b(d)]));
            let t = (1..=n).find(|&t| t != s && t != d);
            if let Some(t) = t {
                m.insert(code(s, d, 0, 2), BTreeSet::from([b(s), b(t), b(d)]));
            }
        }
    }
    m
}

fn check_unique(t: &CodeTable, paths: &BTreeMap<PathCode, BTreeSet<BranchId>>, range: CodeRange) {
    let mut seen: BTreeMap<(BranchId, u16), PathCode> = BTreeMap::new();
    assert_eq!(t.len(), paths.len(), "every member path has a code");
    for (c, gws) in paths {
        let port = t.get(*c).unwrap();
        assert!(range.codes().contains(&port), "{port} outside {range:?}");
        for g in gws {
            if let Some(other) = seen.insert((*g, port), *c) {
                panic!("{c} and {other} share code {port} on branch {g}");
            }
        }
    }
}

#[test]
fn a_full_mesh_of_250_branches_fits_the_default_range() {
    let range = CodeRange::new(16384, 32767).unwrap();
    let mut paths = BTreeMap::new();
    // 250 branches, one group of 4 direct members per ordered pair (2 x 2 ports).
    for s in 1..=250u8 {
        for d in 1..=250u8 {
            if s != d {
                for m in 1..=4 {
                    paths.insert(code(s, d, 0, m), BTreeSet::from([b(s), b(d)]));
                }
            }
        }
    }
    let t = allocate(&CodeTable::default(), range, &paths).unwrap();
    check_unique(&t, &paths, range);
    let highest = t.iter().map(|(_, p)| p).max().unwrap();
    // First fit never needs more than the paths on both ends: 2 x 1,992.
    assert!(
        highest < 16400 + 2 * 1992,
        "first fit stays compact: {highest}"
    );
}

#[test]
fn codes_stay_when_a_branch_is_added() {
    let range = CodeRange::new(20000, 21000).unwrap();
    let before = mesh(16);
    let t1 = allocate(&CodeTable::default(), range, &before).unwrap();
    let after = mesh(17);
    let t2 = allocate(&t1, range, &after).unwrap();
    check_unique(&t2, &after, range);
    for (c, p) in t1.iter() {
        assert_eq!(t2.get(c), Some(p), "{c} moved");
    }
    assert!(t2.len() > t1.len());
}

#[test]
fn a_removed_path_frees_its_code_and_nothing_else_moves() {
    let range = CodeRange::new(20000, 21000).unwrap();
    let mut paths = mesh(5);
    let t1 = allocate(&CodeTable::default(), range, &paths).unwrap();
    let gone = code(1, 2, 0, 1);
    paths.remove(&gone);
    let t2 = allocate(&t1, range, &paths).unwrap();
    assert_eq!(t2.get(gone), None);
    for (c, p) in t2.iter() {
        assert_eq!(t1.get(c), Some(p));
    }
}

#[test]
fn codes_outside_a_new_range_are_allocated_again() {
    let paths = mesh(4);
    let t1 = allocate(
        &CodeTable::default(),
        CodeRange::new(20000, 21000).unwrap(),
        &paths,
    )
    .unwrap();
    let range = CodeRange::new(30000, 31000).unwrap();
    let t2 = allocate(&t1, range, &paths).unwrap();
    check_unique(&t2, &paths, range);
}

#[test]
fn a_range_too_small_names_the_path_and_the_branches() {
    // 17 branches: each gateway carries far more than 20 member paths.
    let range = CodeRange::new(20000, 20035).unwrap();
    let e = allocate(&CodeTable::default(), range, &mesh(17))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no port code of 20016-20035 is free"), "{e}");
    assert!(e.contains("on all of branches"), "{e}");
    assert!(e.contains("widen the port range"), "{e}");
    assert!(e.starts_with("member path 0x"), "{e}");
}

#[test]
fn the_table_round_trips_through_json() {
    let range = CodeRange::new(20000, 21000).unwrap();
    let mut paths = mesh(3);
    paths.insert(code(200, 17, 3, 2), BTreeSet::from([b(200), b(17)]));
    let t = allocate(&CodeTable::default(), range, &paths).unwrap();
    let json = serde_json::to_string(&t).unwrap();
    assert_eq!(serde_json::from_str::<CodeTable>(&json).unwrap(), t);
    assert!(serde_json::from_str::<CodeTable>(r#"[{"member": 0, "port": 20000}]"#).is_err());
}

fn arb_paths() -> impl Strategy<Value = BTreeMap<PathCode, BTreeSet<BranchId>>> {
    // Up to 120 member paths among branches 1..=40 (ids beyond 15 included), each direct or
    // through one transit.
    proptest::collection::vec(
        (
            1u8..=40,
            1u8..=40,
            0u8..=15,
            1u8..=15,
            proptest::option::of(1u8..=40),
        ),
        0..120,
    )
    .prop_map(|v| {
        let mut m = BTreeMap::new();
        for (s, d, g, mem, t) in v {
            if s == d {
                continue;
            }
            let mut gws = BTreeSet::from([b(s), b(d)]);
            if let Some(t) = t.filter(|&t| t != s && t != d) {
                gws.insert(b(t));
            }
            m.insert(code(s, d, g, mem), gws);
        }
        m
    })
}

proptest! {
    #[test]
    fn no_two_paths_share_a_code_on_a_gateway_and_old_codes_stay(
        first in arb_paths(),
        more in arb_paths(),
        start in 1024u16..60000,
    ) {
        // Room for every path in the worst case (all on one gateway).
        let range = CodeRange::new(start, start + 16 + 250).unwrap();
        let t1 = allocate(&CodeTable::default(), range, &first).unwrap();
        check_unique(&t1, &first, range);
        let mut all = first.clone();
        for (c, g) in more {
            all.entry(c).or_insert(g);
        }
        let t2 = allocate(&t1, range, &all).unwrap();
        check_unique(&t2, &all, range);
        for (c, p) in t1.iter() {
            prop_assert_eq!(t2.get(c), Some(p));
        }
        // Deterministic: the same input gives the same table.
        prop_assert_eq!(allocate(&t1, range, &all).unwrap(), t2);
    }
}
