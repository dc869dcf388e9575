//! The live configurator on the paper topology with fake measurements.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]
use std::time::Duration;

use super::*;
use crate::inventory::PortRef;
use crate::measure::tests::{b, group, p, paper};
use crate::path_config::HopEstimate;
use crate::settings::AutoSettings;

fn settings(pairs: Vec<[u8; 2]>) -> path_config::Settings {
    path_config::Settings {
        auto: AutoSettings {
            pairs,
            ..AutoSettings::default()
        },
        ..path_config::Settings::default()
    }
}

const DIRECT: [&str; 4] = ["1a>2a", "1a>2b", "1b>2a", "1b>2b"];

/// Every hop of the inventory at `kbps`, the direct hops 1 → 2 at `direct`.
fn measured(inv: &Inventory, kbps: u64, direct: u64) -> Measurements {
    let ports: Vec<PortRef> = inv
        .branches()
        .flat_map(|br| br.wan.iter().map(move |w| PortRef::new(br.id, w.port)))
        .collect();
    let mut m = Measurements::new();
    for &f in &ports {
        for &t in &ports {
            if inv.can_hop(f, t) {
                let d = f.branch == b(1) && t.branch == b(2);
                let available_kbps = Some(if d { direct } else { kbps });
                m.set(
                    f,
                    t,
                    HopEstimate {
                        available_kbps,
                        delay_us: None,
                    },
                );
            }
        }
    }
    m
}

#[test]
fn off_by_default_and_only_for_the_enabled_pairs() {
    let inv = paper();
    let groups = group(&inv, 1, &DIRECT);
    let m = measured(&inv, 4000, 400);
    let mut a = AutoConfig::new();
    let t = Instant::now();
    assert!(a.step(&settings(vec![]), t, &inv, &groups, &m).is_empty());
    // 2 → 1 has no group but is not enabled; 1 → 2 is.
    let c = a.step(&settings(vec![[1, 2]]), t, &inv, &groups, &m);
    assert_eq!(c.len(), 1);
    assert!(!c[0].added);
}

#[test]
fn congested_direct_hops_are_replaced_by_transits_then_held() {
    let inv = paper();
    let groups = group(&inv, 1, &DIRECT);
    let s = settings(vec![[1, 2]]);
    let mut a = AutoConfig::new();
    let t0 = Instant::now();
    // Healthy: every hop alike, the direct group stays (semi-permanent).
    assert!(a
        .step(&s, t0, &inv, &groups, &measured(&inv, 4000, 4000))
        .is_empty());
    // Direct hops at a tenth: replaced by four members through transits.
    let c = a.step(&s, t0, &inv, &groups, &measured(&inv, 4000, 400));
    assert_eq!(c.len(), 1, "{c:?}");
    let g = &c[0].group;
    assert_eq!((g.source, g.destination, g.id.get()), (b(1), b(2), 1));
    assert_eq!(g.members.len(), 4);
    assert!(g.members.values().all(|m| m.wan_hops() == 2), "{g:?}");
    assert!(c[0].reason.contains("1600 -> 16000"), "{}", c[0].reason);
    // Held: the new group is not replaced again for hold_s, even by a better one ...
    let applied = PathGroups::new(&inv, vec![g.clone()]).unwrap();
    let worse = measured(&inv, 1000, 4000);
    let t1 = t0 + Duration::from_secs(10);
    assert!(a.step(&s, t1, &inv, &applied, &worse).is_empty());
    // ... but after it.
    let t2 = t0 + Duration::from_secs(61);
    let c = a.step(&s, t2, &inv, &applied, &worse);
    assert_eq!(c.len(), 1);
    assert!(c[0].group.members.values().all(|m| m.wan_hops() == 1));
}

#[test]
fn a_dead_member_is_replaced_at_once() {
    let inv = paper();
    let groups = group(&inv, 1, &DIRECT);
    let s = settings(vec![[1, 2]]);
    let mut a = AutoConfig::new();
    let t0 = Instant::now();
    let mut m = measured(&inv, 4000, 4000);
    assert!(a.step(&s, t0, &inv, &groups, &m).is_empty());
    m.set(
        p("1b"),
        p("2b"),
        HopEstimate {
            available_kbps: Some(0),
            delay_us: None,
        },
    );
    let c = a.step(&s, t0, &inv, &groups, &m);
    assert_eq!(c.len(), 1);
    assert!(c[0].reason.contains("1b>2b is dead"), "{}", c[0].reason);
    assert!(!c[0]
        .group
        .members
        .values()
        .any(|m| m.to_string() == "1b>2b"));
}

#[test]
fn a_pair_without_groups_gets_group_1_and_due_follows_the_period() {
    let inv = paper();
    let groups = PathGroups::new(&inv, vec![]).unwrap();
    let s = settings(vec![[3, 4]]);
    let mut a = AutoConfig::new();
    let t0 = Instant::now();
    assert!(a.due(&s, t0));
    let c = a.step(&s, t0, &inv, &groups, &Measurements::new());
    assert_eq!(c.len(), 1);
    assert!(c[0].added);
    assert_eq!(
        (
            c[0].group.source,
            c[0].group.destination,
            c[0].group.id.get()
        ),
        (b(3), b(4), 1)
    );
    assert!(!a.due(&s, t0 + Duration::from_secs(9)));
    assert!(a.due(&s, t0 + Duration::from_secs(10)));
}

#[test]
fn settings_validate_the_pairs() {
    let mut s = AutoSettings::default();
    assert!(s.validate().is_ok());
    assert!(!s.any());
    s.pairs = vec![[1, 1]];
    assert_eq!(s.validate().unwrap_err().0, "auto.pairs");
    s.pairs = vec![[1, 2]];
    s.period_s = 0.5;
    assert_eq!(s.validate().unwrap_err().0, "auto.period_s");
    s.period_s = 10.0;
    assert!(s.applies(1, 2) && !s.applies(2, 1));
    s.all_pairs = true;
    assert!(s.applies(2, 1) && !s.applies(2, 2));
}
