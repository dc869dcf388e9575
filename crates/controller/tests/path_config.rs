//! Automatic path configuration: max-flow, MDI, greedy groups, semi-permanence.
// Test helpers outside #[test] functions unwrap too (clippy.toml only covers #[test] bodies).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
mod common;

use std::collections::BTreeSet;

use common::{branch, paper_inventory, port};
use controller::inventory::Inventory;
use controller::path_config::{
    candidates, compute_group, group_capacity, mdi, path_capacity, path_delay, FlowNetwork,
    HopEstimate, Measurements, PathConfigurator, Settings,
};
use controller::path_group::{MemberPath, PathGroupId};
use controller::swap::compile;

#[test]
fn edmonds_karp_textbook() {
    // CLRS Fig. 26.1: max flow 23.
    let mut n = FlowNetwork::new(6);
    for (u, v, c) in [
        (0, 1, 16),
        (0, 2, 13),
        (2, 1, 4),
        (1, 3, 12),
        (3, 2, 9),
        (2, 4, 14),
        (4, 3, 7),
        (3, 5, 20),
        (4, 5, 4),
    ] {
        n.add_edge(u, v, c);
    }
    assert_eq!(n.max_flow(0, 5), 23);
    assert_eq!(FlowNetwork::new(2).max_flow(0, 1), 0);
    assert_eq!(FlowNetwork::new(2).max_flow(0, 7), 0);
}

#[test]
fn mdi_matches_seed_001() {
    // Seed 001 §IV: 25 ms and 50 ms → MDI 0.17; 25 ms and 100 ms → 0.3.
    assert!((mdi(&[25, 50]) - 1.0 / 6.0).abs() < 1e-12);
    assert!((mdi(&[25, 100]) - 0.3).abs() < 1e-12);
    assert_eq!(mdi(&[40, 40, 40]), 0.0);
    assert_eq!(mdi(&[7]), 0.0);
    assert_eq!(mdi(&[]), 0.0);
    assert_eq!(mdi(&[0, 0]), 0.0);
    assert!((mdi(&[0, 10]) - 0.5).abs() < 1e-12);
}

#[test]
fn candidates_of_the_paper_topology() {
    let inv = paper_inventory();
    let c = candidates(&inv, branch(1), branch(2), true);
    // 2 × 2 direct + 3 transit branches × (2 × 2 slots) × (2 × 2 port choices).
    assert_eq!(c.len(), 4 + 3 * 4 * 4);
    assert_eq!(c[0].to_string(), "1a>2a");
    assert!(c[..4].iter().all(|p| p.wan_hops() == 1));
    assert!(c.contains(&"1a>4a>4b>2a".parse().unwrap()));
    assert_eq!(candidates(&inv, branch(1), branch(2), false).len(), 4);
    assert!(candidates(&inv, branch(1), branch(1), true).is_empty());
}

#[test]
fn capacities() {
    let inv = paper_inventory();
    let m = Measurements::new();
    let p = |s: &str| s.parse::<MemberPath>().unwrap();
    assert_eq!(path_capacity(&inv, &m, &p("1a>2a")), 40_000);
    // Two paths out of the same 40 Mbit/s port share it.
    assert_eq!(group_capacity(&inv, &m, &[p("1a>2a"), p("1a>2b")]), 40_000);
    assert_eq!(group_capacity(&inv, &m, &[p("1a>2a"), p("1b>2b")]), 80_000);
    let mut m = Measurements::new();
    m.set(
        port("1a"),
        port("2a"),
        HopEstimate {
            available_kbps: Some(8_000),
            delay_us: None,
        },
    );
    assert_eq!(path_capacity(&inv, &m, &p("1a>2a")), 8_000);
    assert_eq!(
        group_capacity(&inv, &m, &[p("1a>2a"), p("1a>3a>3b>2a")]),
        40_000
    );
}

/// Without measurements the internet is not the bottleneck: four direct paths fill both ports of
/// both ends (80 Mbit/s), and later groups prefer member paths earlier groups did not use.
#[test]
fn unmeasured_paper_topology() {
    let inv = paper_inventory();
    let m = Measurements::new();
    let s = Settings::default();
    let g0 = compute_group(
        &inv,
        &m,
        &s,
        (branch(1), branch(2)),
        PathGroupId::new(0).unwrap(),
        &[],
    )
    .unwrap();
    let members: Vec<String> = g0.members.values().map(ToString::to_string).collect();
    assert_eq!(members, ["1a>2a", "1b>2b", "1a>2b", "1b>2a"]);
    let g1 = compute_group(
        &inv,
        &m,
        &s,
        (branch(1), branch(2)),
        PathGroupId::new(1).unwrap(),
        &[&g0],
    )
    .unwrap();
    assert_eq!(g1.members.len(), 4);
    let firsts: BTreeSet<&MemberPath> = g0.members.values().collect();
    assert!(g1.members.values().all(|p| !firsts.contains(p)), "{g1:?}");
    // Disjoint: four different transit branches cannot exist (only 3), but no hop is shared.
    let hops: Vec<_> = g1.members.values().flat_map(|p| p.hops()).collect();
    let unique: BTreeSet<_> = hops.iter().collect();
    assert_eq!(hops.len(), unique.len());
}

/// The paper's bottleneck experiment, uniform: every WAN hop has 8 Mbit/s available. Four
/// disjoint direct paths already give 4 × 8 = 32, the most four subflows can get.
#[test]
fn uniform_bottlenecks_keep_direct_paths() {
    let inv = paper_inventory();
    let m = uniform(&inv, 8_000);
    let s = Settings::default();
    let g = compute_group(
        &inv,
        &m,
        &s,
        (branch(1), branch(2)),
        PathGroupId::new(0).unwrap(),
        &[],
    )
    .unwrap();
    assert_eq!(group_capacity(&inv, &m, g.members.values()), 32_000);
    assert!(g.members.values().all(|p| p.wan_hops() == 1), "{g:?}");
}

/// The direct hops between 1 and 2 are congested (8 Mbit/s) while the rest of the internet is
/// free: the group routes around them through transits (max-flow 80 = both ports at both ends),
/// with one member per address pair and no hop shared.
#[test]
fn congested_direct_hops_pick_disjoint_transits() {
    let inv = paper_inventory();
    let m = direct_congested(&inv, 8_000, 20_000, None);
    let s = Settings::default();
    let g = compute_group(
        &inv,
        &m,
        &s,
        (branch(1), branch(2)),
        PathGroupId::new(0).unwrap(),
        &[],
    )
    .unwrap();
    assert_eq!(g.members.len(), 4);
    assert_eq!(group_capacity(&inv, &m, g.members.values()), 80_000);
    assert!(
        g.members.values().filter(|p| p.wan_hops() == 2).count() >= 2,
        "{g:?}"
    );
    let slots: BTreeSet<_> = g
        .members
        .values()
        .map(|p| (p.source(), p.destination()))
        .collect();
    assert_eq!(slots.len(), 4);
    let hops: Vec<_> = g.members.values().flat_map(|p| p.hops()).collect();
    assert_eq!(hops.len(), hops.iter().collect::<BTreeSet<_>>().len());
    // Deterministic.
    let again = compute_group(
        &inv,
        &m,
        &s,
        (branch(1), branch(2)),
        PathGroupId::new(0).unwrap(),
        &[],
    )
    .unwrap();
    assert_eq!(g, again);
    // The whole configuration compiles.
    let mut pc = PathConfigurator::new(s);
    let changes = pc.update(&inv, &m);
    assert_eq!(changes.added.len(), 5 * 4 * 4);
    compile(&inv, &pc.groups(&inv).unwrap()).unwrap();
}

/// Only branch 3 can transit, and its hops take 400 ms against 10 ms for the congested direct
/// hops: mixing them gives MDI 800/810 − 0.5 ≈ 0.49. With the threshold 0.4 no direct path joins
/// the transit paths; with 0.5 they may.
#[test]
fn mdi_rejects_incompatible_paths() {
    let inv = paper_inventory();
    let m = direct_congested(&inv, 8_000, 10_000, Some(400_000));
    let strict = Settings {
        mdi_threshold: 0.4,
        ..Settings::default()
    };
    let g = compute_group(
        &inv,
        &m,
        &strict,
        (branch(1), branch(2)),
        PathGroupId::new(0).unwrap(),
        &[],
    )
    .unwrap();
    assert!(g.members.values().all(|p| p.wan_hops() == 2), "{g:?}");
    let delays: Vec<u64> = g
        .members
        .values()
        .map(|p| path_delay(&m, p).unwrap())
        .collect();
    assert!(mdi(&delays) <= 0.4);
    let loose = Settings {
        mdi_threshold: 0.5,
        ..Settings::default()
    };
    let g = compute_group(
        &inv,
        &m,
        &loose,
        (branch(1), branch(2)),
        PathGroupId::new(0).unwrap(),
        &[],
    )
    .unwrap();
    assert!(g.members.values().any(|p| p.wan_hops() == 1), "{g:?}");
}

/// Direct hops between branches 1 and 2 limited to `direct_kbps` with `direct_us` delay; with
/// `slow_us`, only branch 3 may transit (hops of 4 and 5 dead) with that delay per hop;
/// otherwise every other hop is free with 20 ms.
fn direct_congested(
    inv: &Inventory,
    direct_kbps: u64,
    direct_us: u64,
    slow_us: Option<u64>,
) -> Measurements {
    let mut m = Measurements::new();
    let all: Vec<_> = inv.ports().map(|(r, _)| r).collect();
    for &a in &all {
        for &b in &all {
            if a.branch == b.branch {
                continue;
            }
            let pair = (
                a.branch.get().min(b.branch.get()),
                a.branch.get().max(b.branch.get()),
            );
            let e = if pair == (1, 2) {
                HopEstimate {
                    available_kbps: Some(direct_kbps),
                    delay_us: Some(direct_us),
                }
            } else if let Some(slow) = slow_us {
                let dead = [a.branch.get(), b.branch.get()]
                    .iter()
                    .any(|&x| x == 4 || x == 5);
                HopEstimate {
                    available_kbps: Some(if dead { 0 } else { 1_000_000 }),
                    delay_us: Some(slow),
                }
            } else {
                HopEstimate {
                    available_kbps: None,
                    delay_us: Some(20_000),
                }
            };
            m.set(a, b, e);
        }
    }
    m
}

fn uniform(inv: &Inventory, kbps: u64) -> Measurements {
    let mut m = Measurements::new();
    let all: Vec<_> = inv.ports().map(|(r, _)| r).collect();
    for &a in &all {
        for &b in &all {
            if a.branch != b.branch {
                m.set(
                    a,
                    b,
                    HopEstimate {
                        available_kbps: Some(kbps),
                        delay_us: Some(20_000),
                    },
                );
            }
        }
    }
    m
}

#[test]
fn semi_permanent() {
    let inv = paper_inventory();
    let mut pc = PathConfigurator::new(Settings {
        groups_per_pair: 2,
        ..Settings::default()
    });
    let m = uniform(&inv, 8_000);
    let first = pc.update(&inv, &m);
    assert_eq!(first.added.len(), 20 * 2);
    let before = pc.groups(&inv).unwrap();
    // Same measurements: nothing moves.
    assert!(pc.update(&inv, &m).is_empty());
    // 1a>2a gets 10% better: below the 20% margin, nothing moves.
    let mut m2 = m.clone();
    m2.set(
        port("1a"),
        port("2a"),
        HopEstimate {
            available_kbps: Some(8_800),
            delay_us: Some(20_000),
        },
    );
    assert!(pc.update(&inv, &m2).is_empty());
    assert_eq!(pc.groups(&inv).unwrap(), before);
    // A member's hop dies: its group is replaced at once.
    let g = pc
        .group(branch(1), branch(2), PathGroupId::new(0).unwrap())
        .unwrap()
        .clone();
    let victim = g.members.values().next().unwrap().hops()[0];
    let mut m3 = m.clone();
    m3.set(
        victim.from,
        victim.to,
        HopEstimate {
            available_kbps: Some(0),
            delay_us: Some(20_000),
        },
    );
    let changes = pc.update(&inv, &m3);
    assert!(
        changes
            .replaced
            .contains(&(branch(1), branch(2), PathGroupId::new(0).unwrap())),
        "{changes:?}"
    );
    let now = pc
        .group(branch(1), branch(2), PathGroupId::new(0).unwrap())
        .unwrap();
    assert!(now.members.values().all(|p| !p.hops().contains(&victim)));
    // The direct hops of 1 and 2 congest (2 Mbit/s) while the rest frees up: a group of direct
    // paths (8 Mbit/s) is replaced by one through transits (80).
    let mut pc = PathConfigurator::new(Settings {
        groups_per_pair: 1,
        ..Settings::default()
    });
    pc.update(&inv, &uniform(&inv, 8_000));
    let g0 = (branch(1), branch(2), PathGroupId::new(0).unwrap());
    assert!(pc
        .group(g0.0, g0.1, g0.2)
        .unwrap()
        .members
        .values()
        .all(|p| p.wan_hops() == 1));
    let changes = pc.update(&inv, &direct_congested(&inv, 2_000, 20_000, None));
    assert!(changes.replaced.contains(&g0), "{changes:?}");
    assert!(changes.removed.is_empty());
    assert!(pc
        .group(g0.0, g0.1, g0.2)
        .unwrap()
        .members
        .values()
        .any(|p| p.wan_hops() == 2));
}
