//! The measurement feed on the paper topology with fake SDC samples.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]
use std::time::Duration;

use super::*;
use crate::inventory::InventoryFile;
use crate::path_group::PathGroup;

const INVENTORY: &str = include_str!("../../../examples/inventory-paper.toml");

pub(crate) fn paper() -> Inventory {
    let f: InventoryFile = toml::from_str(INVENTORY).unwrap();
    Inventory::new(f.branches).unwrap()
}

pub(crate) fn b(n: u8) -> BranchId {
    BranchId::new(n).unwrap()
}

pub(crate) fn p(s: &str) -> PortRef {
    s.parse().unwrap()
}

/// Group `id` of 1 → 2 with `members` in the paper notation.
pub(crate) fn group(inv: &Inventory, id: u8, members: &[&str]) -> PathGroups {
    let paths = members.iter().map(|m| m.parse().unwrap()).collect();
    let g = PathGroup::from_members(b(1), b(2), PathGroupId::new(id).unwrap(), paths).unwrap();
    PathGroups::new(inv, vec![g]).unwrap()
}

fn member(s: u8, bps: f64) -> MemberLoad {
    MemberLoad {
        source: b(1),
        destination: b(2),
        group: PathGroupId::new(1).unwrap(),
        member: MemberId::new(s).unwrap(),
        forward_bps: bps,
        reverse_bps: 0.0,
    }
}

fn limited() -> BTreeSet<(BranchId, BranchId, PathGroupId)> {
    BTreeSet::from([(b(1), b(2), PathGroupId::new(1).unwrap())])
}

#[test]
fn nothing_measured_leaves_only_the_ports() {
    let inv = paper();
    let m = HopMeter::new().measurements(Instant::now(), &inv);
    assert_eq!(m.get(p("1a"), p("2a")), HopEstimate::default());
}

#[test]
fn port_bound_is_capacity_minus_the_load_that_is_not_ours() {
    let inv = paper();
    let groups = group(&inv, 1, &["1a>2a"]);
    let mut meter = HopMeter::new();
    let t0 = Instant::now();
    let sample = Sample {
        // 1a sends 25 Mbit/s, 10 of them the member 1a>2a: 15 is someone else's.
        ports: vec![
            PortLoad {
                port: p("1a"),
                tx_bps: 25e6,
                rx_bps: 0.0,
            },
            PortLoad {
                port: p("2a"),
                tx_bps: 0.0,
                rx_bps: 10e6,
            },
            PortLoad {
                port: p("3a"),
                tx_bps: 0.0,
                rx_bps: 30e6,
            },
        ],
        members: vec![member(1, 10e6)],
        limited: BTreeSet::new(),
    };
    meter.observe(t0, &inv, &groups, &sample);
    let m = meter.measurements(t0, &inv);
    // 40 − 15 on the uplink, 40 − 0 on the downlink of 2a.
    assert_eq!(m.get(p("1a"), p("2a")).available_kbps, Some(25_000));
    // 3a receives 30 Mbit/s that are not ours: 10 left.
    assert_eq!(m.get(p("1a"), p("3a")).available_kbps, Some(10_000));
    // No port sample of 1b: unbounded by ports, nothing carried while limited.
    assert_eq!(m.get(p("1b"), p("2b")).available_kbps, None);
}

#[test]
fn members_of_a_limited_group_bound_their_hops_and_the_best_peak_is_the_prior() {
    let inv = paper();
    let groups = group(&inv, 1, &["1a>2a", "1a>2b", "1b>2a", "1b>2b"]);
    let mut meter = HopMeter::new();
    let t0 = Instant::now();
    let rates = |r: [f64; 4]| Sample {
        members: (1..=4).map(|s| member(s, r[usize::from(s - 1)])).collect(),
        limited: limited(),
        ..Sample::default()
    };
    // A group seen for the first time counts at once.
    meter.observe(t0, &inv, &groups, &rates([4e6; 4]));
    let t1 = t0 + Duration::from_secs(2);
    // Not limited: says nothing.
    let t2 = t1 + Duration::from_secs(2);
    meter.observe(
        t2,
        &inv,
        &groups,
        &Sample {
            limited: BTreeSet::new(),
            ..rates([1e6; 4])
        },
    );
    let m = meter.measurements(t2, &inv);
    assert_eq!(m.get(p("1a"), p("2a")).available_kbps, Some(4000));
    // A hop never carried while limited gets the best peak (4000), not "unbounded".
    assert_eq!(m.get(p("1a"), p("3a")).available_kbps, Some(4000));
    // Congested: the average of the last rates counts, the peaks stay the others' prior.
    let mut t3 = t2;
    for _ in 0..8 {
        t3 += Duration::from_secs(1);
        meter.observe(t3, &inv, &groups, &rates([400e3, 400e3, 400e3, 0.0]));
    }
    let m = meter.measurements(t3, &inv);
    let direct = m.get(p("1a"), p("2a")).available_kbps.unwrap();
    assert!((400..420).contains(&direct), "{direct}");
    assert_eq!(
        m.get(p("1b"), p("2b")).available_kbps,
        Some(0),
        "dead at once"
    );
    assert_eq!(m.get(p("1a"), p("4b")).available_kbps, Some(4000));
    // Forgotten after MEMORY.
    let t4 = t3 + MEMORY + Duration::from_secs(1);
    meter.observe(t4, &inv, &groups, &Sample::default());
    assert_eq!(
        meter
            .measurements(t4, &inv)
            .get(p("1a"), p("2a"))
            .available_kbps,
        None
    );
}

#[test]
fn a_changed_group_is_ignored_while_it_settles() {
    let inv = paper();
    let mut meter = HopMeter::new();
    let t0 = Instant::now();
    let old = group(&inv, 1, &["1a>2a"]);
    let new = group(&inv, 1, &["1a>3a>3b>2a"]);
    let s = Sample {
        members: vec![member(1, 100e3)],
        limited: limited(),
        ..Sample::default()
    };
    meter.observe(t0, &inv, &old, &s);
    // The counters of member 1 still show the old path's rate right after the change.
    let t1 = t0 + SETTLE + Duration::from_secs(1);
    meter.observe(t1, &inv, &new, &s);
    let m = meter.measurements(t1, &inv);
    assert_eq!(m.get(p("1a"), p("2a")).available_kbps, Some(100));
    assert_eq!(m.get(p("1a"), p("3a")).available_kbps, Some(100), "prior");
    let s2 = Sample {
        members: vec![member(1, 3e6)],
        ..s
    };
    let t2 = t1 + SETTLE;
    meter.observe(t2, &inv, &new, &s2);
    let m = meter.measurements(t2, &inv);
    // The first rate of a hop is taken as it is.
    assert_eq!(m.get(p("1a"), p("3a")).available_kbps, Some(3000));
    assert_eq!(m.get(p("3b"), p("2a")).available_kbps, Some(3000));
}

#[test]
fn rtts_give_hop_delays() {
    let mut meter = HopMeter::new();
    let inv = paper();
    let t = Instant::now();
    meter.observe_rtt(t, &"1a>3a".parse().unwrap(), 20_000);
    meter.observe_rtt(t, &"1a>3a>3b>2a".parse().unwrap(), 50_000);
    // Two unknown hops: nothing.
    meter.observe_rtt(t, &"1b>4a>4b>2b".parse().unwrap(), 50_000);
    let m = meter.measurements(t, &inv);
    assert_eq!(m.get(p("1a"), p("3a")).delay_us, Some(10_000));
    assert_eq!(m.get(p("3b"), p("2a")).delay_us, Some(15_000));
    assert_eq!(m.get(p("1b"), p("4a")).delay_us, None);
}
