//! Adaptive path groups (seed 003 §III steps 5–8): when a pair gets a group, when it gives one
//! back, and the hysteresis in between. Reports are fed every 2 s on a made-up clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::{branch, paper_inventory, table2};
use controller::adaptive::{achievable_bps, Action, Adaptive, PairStatus};
use controller::capacity::Sample;
use controller::inventory::{BranchId, Inventory};
use controller::path_config::{Measurements, Settings};
use controller::path_group::{PathGroup, PathGroupId, PathGroups};
use controller::wrr::Observation;

const MBIT: f64 = 1e6;
const REPORT: Duration = Duration::from_secs(2);

type Obs = BTreeMap<(BranchId, BranchId, PathGroupId), Observation>;

fn on() -> Settings {
    let mut s = Settings::default();
    s.adaptive.enabled = true;
    s
}

/// Table II's group 1 (1 → 2) only.
fn group1_only(inv: &Inventory) -> PathGroups {
    let t = table2(inv);
    let g = t
        .group(branch(1), branch(2), PathGroupId::new(1).unwrap())
        .unwrap()
        .clone();
    PathGroups::new(inv, vec![g]).unwrap()
}

/// Every group of `groups` reported at `at`: (carried Mbit/s, saturated, estimated Mbit/s).
fn report(groups: &PathGroups, at: Instant, per: impl Fn(u8) -> (f64, bool, f64)) -> Obs {
    groups
        .groups()
        .map(|g| {
            let (rate, saturated, est) = per(g.id.get());
            (
                (g.source, g.destination, g.id),
                Observation {
                    at: Some(at),
                    sample: Some(Sample {
                        rate_bps: rate * MBIT,
                        busy: if saturated { 0.9 } else { 0.1 },
                        window_bps: 0.0,
                        loss: None,
                        saturated,
                        backlog_s: None,
                        ..Sample::default()
                    }),
                    estimated_bps: Some(est * MBIT),
                    configured_bps: Some(80.0 * MBIT),
                },
            )
        })
        .collect()
}

/// The groups after `actions`.
fn apply(inv: &Inventory, groups: &PathGroups, actions: &[Action]) -> PathGroups {
    let mut list: Vec<PathGroup> = groups.groups().cloned().collect();
    for a in actions {
        match a {
            Action::Add { group, .. } => list.push(group.clone()),
            Action::Retire {
                source,
                destination,
                group,
                ..
            } => list.retain(|g| {
                !(g.source == *source && g.destination == *destination && g.id == *group)
            }),
        }
    }
    PathGroups::new(inv, list).unwrap()
}

fn ids(groups: &PathGroups) -> Vec<u8> {
    groups
        .pair(branch(1), branch(2))
        .map(|m| m.keys().map(|g| g.get()).collect())
        .unwrap_or_default()
}

#[test]
fn achievable_rate_is_the_max_flow_over_every_candidate() {
    let inv = paper_inventory();
    // Two 40 Mbit/s ports at each end: 80 Mbit/s, whatever the transits.
    let z = achievable_bps(
        &inv,
        &Measurements::new(),
        &Settings::default(),
        (branch(1), branch(2)),
    );
    assert!((z - 80.0 * MBIT).abs() < 1.0, "{z}");
}

#[test]
fn disabled_changes_nothing() {
    let inv = paper_inventory();
    let groups = group1_only(&inv);
    let mut ad = Adaptive::new();
    let t0 = Instant::now();
    for i in 0..60 {
        let now = t0 + REPORT * i;
        let obs = report(&groups, now, |_| (12.0, true, 12.0));
        let a = ad.step(
            &Settings::default(),
            now,
            &inv,
            &Measurements::new(),
            &groups,
            &obs,
        );
        assert!(a.is_empty());
    }
    assert!(ad.views().is_empty());
}

#[test]
fn a_saturated_short_pair_gets_a_new_group_after_add_after_then_settles() {
    let inv = paper_inventory();
    let s = on();
    let mut groups = group1_only(&inv);
    let mut ad = Adaptive::new();
    let t0 = Instant::now();
    let mut added_at = None;
    for i in 0..8u32 {
        let now = t0 + REPORT * i;
        // 12 of the 80 Mbit/s achievable, writers blocked: short.
        let obs = report(&groups, now, |_| (12.0, true, 12.0));
        let actions = ad.step(&s, now, &inv, &Measurements::new(), &groups, &obs);
        if !actions.is_empty() {
            assert!(
                added_at.is_none(),
                "a second change within settle_s: {actions:?}"
            );
            assert_eq!(actions.len(), 1);
            let Action::Add { group, .. } = &actions[0] else {
                panic!("expected an add: {actions:?}")
            };
            assert_eq!((group.source, group.destination), (branch(1), branch(2)));
            assert_eq!(group.id.get(), 2, "lowest free id from 1");
            let used: BTreeSet<_> = groups
                .groups()
                .flat_map(|g| g.members.values().cloned())
                .collect();
            assert!(
                group.members.values().any(|p| !used.contains(p)),
                "the new group brings a member path no group uses"
            );
            let old_hops: BTreeSet<_> = groups
                .groups()
                .flat_map(|g| g.members.values().flat_map(|p| p.hops()))
                .collect();
            let shared: Vec<_> = group
                .members
                .values()
                .flat_map(|p| p.hops())
                .filter(|h| old_hops.contains(h))
                .collect();
            assert!(
                shared.is_empty(),
                "shares WAN hops with group 1: {shared:?}"
            );
            added_at = Some(i);
            groups = apply(&inv, &groups, &actions);
        }
    }
    // Short from the first report (t = 0); added once add_after_s (6 s) had passed.
    assert_eq!(added_at, Some(3));
    assert_eq!(ids(&groups), vec![1, 2]);
    let v = &ad.views()[0];
    assert_eq!(v.status, PairStatus::Settling);
    assert_eq!(v.added, 1);
    assert!(v.zeta_bps.is_some_and(|z| (z - 80.0 * MBIT).abs() < 1.0));
    assert!(v
        .last_action
        .as_deref()
        .unwrap_or("")
        .starts_with("added 2"));
}

/// `ssc run`'s adaptive loop, one report interval at a time ([`Adaptive::round`] with the
/// catalog write as `apply`): a refused add is recorded and the pair tries again once it is still
/// short; an accepted one becomes a group.
#[test]
fn the_adaptive_round_applies_its_actions_and_records_refusals() {
    let inv = paper_inventory();
    let s = on();
    let mut groups = group1_only(&inv);
    let mut ad = Adaptive::new();
    let t0 = Instant::now();
    let mut refuse = true;
    let mut outcomes = Vec::new();
    for i in 0..30u32 {
        let now = t0 + controller::adaptive::INTERVAL * i;
        let obs = report(&groups, now, |_| (12.0, true, 12.0));
        let mut applied = Vec::new();
        let done = ad.round(&s, now, &inv, &groups, &obs, |a| {
            if refuse {
                refuse = false;
                return Err("the catalog is read-only");
            }
            applied.push(a.clone());
            Ok(())
        });
        groups = apply(&inv, &groups, &applied);
        for (a, refusal) in done {
            if refusal.is_some() {
                let v = &ad.views()[0];
                assert_eq!(v.added, 0, "a refused add is not counted");
                assert_eq!(
                    v.last_action.as_deref(),
                    Some("refused by the catalog: the catalog is read-only")
                );
            }
            outcomes.push((i, matches!(a, Action::Add { .. }), refusal.is_some()));
        }
    }
    // Short from t = 0: the first add (t = 6 s) is refused, a later one is applied.
    assert_eq!(outcomes.first(), Some(&(3, true, true)), "{outcomes:?}");
    assert!(
        outcomes.iter().any(|&(_, add, refused)| add && !refused),
        "{outcomes:?}"
    );
    assert!(ids(&groups).len() >= 2, "{:?}", ids(&groups));
    assert!(ad.views()[0].added >= 1);
}

#[test]
fn a_pair_limited_by_its_demand_is_never_grown() {
    let inv = paper_inventory();
    let s = on();
    let groups = group1_only(&inv);
    let mut ad = Adaptive::new();
    let t0 = Instant::now();
    for i in 0..60 {
        let now = t0 + REPORT * i;
        // Little carried, but nothing blocked: the hosts send little.
        let obs = report(&groups, now, |_| (2.0, false, 12.0));
        assert!(ad
            .step(&s, now, &inv, &Measurements::new(), &groups, &obs)
            .is_empty());
    }
    assert_eq!(ad.views()[0].status, PairStatus::Ok);
}

/// Reports of a group whose writers are not blocked: carried Mbit/s and unsent backlog (s).
fn unblocked(groups: &PathGroups, at: Instant, rate: f64, backlog: f64) -> Obs {
    groups
        .groups()
        .map(|g| {
            (
                (g.source, g.destination, g.id),
                Observation {
                    at: Some(at),
                    sample: Some(Sample {
                        rate_bps: rate * MBIT,
                        busy: 0.005,
                        window_bps: 14.5 * MBIT,
                        loss: Some(0.002),
                        saturated: false,
                        backlog_s: Some(backlog),
                        ..Sample::default()
                    }),
                    estimated_bps: Some(14.5 * MBIT),
                    configured_bps: Some(80.0 * MBIT),
                },
            )
        })
        .collect()
}

/// Runs `n` reports of `per(i)` = (rate, backlog) over group 1 only; whether a group was added.
fn grows_with(n: u32, per: impl Fn(u32) -> (f64, f64)) -> bool {
    let inv = paper_inventory();
    let groups = group1_only(&inv);
    let mut ad = Adaptive::new();
    let t0 = Instant::now();
    let mut added = false;
    for i in 0..n {
        let now = t0 + REPORT * i;
        let (rate, backlog) = per(i);
        added |= !ad
            .step(
                &on(),
                now,
                &inv,
                &Measurements::new(),
                &groups,
                &unblocked(&groups, now, rate, backlog),
            )
            .is_empty();
    }
    added
}

#[test]
fn a_group_with_data_waiting_in_its_sockets_is_limited_by_its_paths() {
    // Behind a bottleneck the writers are not blocked (the send buffers absorb it) but the
    // sockets hold seconds of unsent data; application-limited traffic leaves none.
    assert!(grows_with(10, |_| (11.5, 0.8)));
    assert!(!grows_with(30, |_| (11.5, 0.02)));
    // Backlog in every other report (bursts): held across the gaps, the pair grows.
    assert!(grows_with(10, |i| (
        11.5,
        if i % 2 == 0 { 0.8 } else { 0.0 }
    )));
    // One burst, then nothing: the hold (4 s) ends before add_after_s (6 s).
    assert!(!grows_with(30, |i| (11.5, if i == 3 { 0.8 } else { 0.0 })));
}

#[test]
fn a_pair_at_lambda_zeta_or_at_the_most_groups_gets_nothing() {
    let inv = paper_inventory();
    let groups = group1_only(&inv);
    let t0 = Instant::now();
    // 70 ≥ 0.8 × 80 Mbit/s: enough even though saturated.
    let mut ad = Adaptive::new();
    for i in 0..20 {
        let now = t0 + REPORT * i;
        let obs = report(&groups, now, |_| (70.0, true, 70.0));
        assert!(ad
            .step(&on(), now, &inv, &Measurements::new(), &groups, &obs)
            .is_empty());
    }
    // Short, but groups_per_pair = 1.
    let mut one = on();
    one.groups_per_pair = 1;
    let mut ad = Adaptive::new();
    for i in 0..20 {
        let now = t0 + REPORT * i;
        let obs = report(&groups, now, |_| (12.0, true, 12.0));
        assert!(ad
            .step(&one, now, &inv, &Measurements::new(), &groups, &obs)
            .is_empty());
    }
    assert_eq!(ad.views()[0].status, PairStatus::AtMax);
}

/// Runs `secs` of reports; `per(group, added_group)` gives each group's report. Returns the
/// groups and every action with its time (s).
fn drive(
    s: &Settings,
    mut groups: PathGroups,
    secs: u32,
    per: impl Fn(u8) -> (f64, bool, f64),
) -> (PathGroups, Vec<(u32, Action)>, Adaptive) {
    let inv = paper_inventory();
    let mut ad = Adaptive::new();
    let t0 = Instant::now();
    let mut log = Vec::new();
    for i in 0..secs / 2 {
        let now = t0 + REPORT * i;
        let obs = report(&groups, now, &per);
        let actions = ad.step(s, now, &inv, &Measurements::new(), &groups, &obs);
        groups = apply(&inv, &groups, &actions);
        log.extend(actions.into_iter().map(|a| (i * 2, a)));
    }
    (groups, log, ad)
}

#[test]
fn a_group_that_does_not_raise_the_rate_is_taken_back_and_the_pair_backs_off() {
    let inv = paper_inventory();
    // Group 1 carries 12 Mbit/s, any new group nothing (the limit is elsewhere).
    let (groups, log, ad) = drive(&on(), group1_only(&inv), 60, |g| {
        if g == 1 {
            (12.0, true, 12.0)
        } else {
            (0.0, false, 1.0)
        }
    });
    let kinds: Vec<(u32, &str)> = log
        .iter()
        .map(|(t, a)| {
            (
                *t,
                if matches!(a, Action::Add { .. }) {
                    "add"
                } else {
                    "retire"
                },
            )
        })
        .collect();
    // Added at 6 s, taken back settle_s (10 s) later, then nothing for backoff_s (60 s).
    assert_eq!(kinds, vec![(6, "add"), (16, "retire")]);
    assert!(matches!(&log[1].1, Action::Retire { group, .. } if group.get() == 2));
    assert_eq!(ids(&groups), vec![1]);
    let v = &ad.views()[0];
    assert_eq!(v.status, PairStatus::Backoff);
    assert!(v
        .last_action
        .as_deref()
        .unwrap_or("")
        .starts_with("took back 2"));
}

#[test]
fn groups_that_help_are_kept_and_the_pair_grows_to_groups_per_pair() {
    let inv = paper_inventory();
    // Every group carries 12 Mbit/s saturated: ξ grows with each group, stays < 64.
    let (groups, log, ad) = drive(&on(), group1_only(&inv), 60, |_| (12.0, true, 12.0));
    let adds: Vec<u32> = log
        .iter()
        .filter(|(_, a)| matches!(a, Action::Add { .. }))
        .map(|(t, _)| *t)
        .collect();
    assert!(log.iter().all(|(_, a)| matches!(a, Action::Add { .. })));
    // 6 s to decide, then one per settle_s (10 s; the shortfall restarts after each add,
    // and is already 6 s old when the pair has settled).
    assert_eq!(adds, vec![6, 16, 26]);
    assert_eq!(ids(&groups), vec![1, 2, 3, 4]);
    assert_eq!(ad.views()[0].status, PairStatus::AtMax);
    // The four groups use distinct member paths where they can.
    let all: Vec<_> = groups.groups().flat_map(|g| g.members.values()).collect();
    let distinct: BTreeSet<_> = all.iter().collect();
    assert_eq!(all.len(), distinct.len(), "no member path twice");
}

#[test]
fn an_idle_pair_retires_its_highest_groups_down_to_min_groups() {
    let inv = paper_inventory();
    let mut s = on();
    s.adaptive.retire_after_s = 20.0;
    s.adaptive.min_groups = 2;
    let (groups, log, ad) = drive(&s, table2(&inv), 120, |_| (0.0, false, 12.0));
    let retired: Vec<(u32, u8)> = log
        .iter()
        .map(|(t, a)| match a {
            Action::Retire { group, .. } => (*t, group.get()),
            Action::Add { .. } => panic!("added to an idle pair"),
        })
        .collect();
    // Calm from 0 s: nothing to carry, so groups 4 and 3 both go at 20 s, down to min_groups.
    assert_eq!(retired, vec![(20, 4), (20, 3)]);
    assert_eq!(ids(&groups), vec![1, 2]);
    assert_eq!(ad.views()[0].retired, 2);
}

#[test]
fn a_pair_that_still_carries_some_traffic_gives_back_only_the_groups_it_does_not_need() {
    let inv = paper_inventory();
    let mut s = on();
    s.adaptive.retire_after_s = 10.0;
    let mut groups = table2(&inv);
    let mut ad = Adaptive::new();
    let t0 = Instant::now();
    let mut log = Vec::new();
    for i in 0..40u32 {
        let now = t0 + REPORT * i;
        // 12 Mbit/s per group (each group's peak) for 10 s, then 10 Mbit/s over the pair:
        // two groups' peaks (24) carry it with headroom 2 (retire_share 0.5), one (12) does not.
        let n = groups.groups().count() as f64;
        let obs = report(&groups, now, |_| {
            if i < 5 {
                (12.0, false, 12.0)
            } else {
                (10.0 / n, false, 12.0)
            }
        });
        let actions = ad.step(&s, now, &inv, &Measurements::new(), &groups, &obs);
        groups = apply(&inv, &groups, &actions);
        log.extend(actions.into_iter().map(|a| (i * 2, a)));
    }
    let retired: Vec<u8> = log
        .iter()
        .map(|(_, a)| match a {
            Action::Retire { group, .. } => group.get(),
            Action::Add { .. } => panic!("added to an unsaturated pair"),
        })
        .collect();
    assert_eq!(retired, vec![4, 3], "{log:?}");
    assert!(
        log.iter().all(|(t, _)| *t == log[0].0),
        "one change: {log:?}"
    );
    assert_eq!(ids(&groups), vec![1, 2]);
}

#[test]
fn a_busy_unsaturated_pair_keeps_its_groups() {
    let inv = paper_inventory();
    let mut s = on();
    s.adaptive.retire_after_s = 10.0;
    // 30 Mbit/s over Table II: more than half of what three groups (36) carry: no retiring.
    let (groups, log, _) = drive(&s, table2(&inv), 60, |_| (7.5, false, 12.0));
    assert!(log.is_empty(), "{log:?}");
    assert_eq!(ids(&groups), vec![1, 2, 3, 4]);
}

#[test]
fn stale_or_missing_reports_change_nothing() {
    let inv = paper_inventory();
    let s = on();
    let groups = group1_only(&inv);
    let mut ad = Adaptive::new();
    let t0 = Instant::now();
    let old = report(&groups, t0, |_| (12.0, true, 12.0));
    for i in 4..40 {
        let now = t0 + REPORT * i;
        assert!(ad
            .step(&s, now, &inv, &Measurements::new(), &groups, &old)
            .is_empty());
        assert!(ad
            .step(&s, now, &inv, &Measurements::new(), &groups, &Obs::new())
            .is_empty());
    }
    assert_eq!(ad.views()[0].status, PairStatus::NoReports);
}

#[test]
fn settings_are_checked_and_old_settings_still_load() {
    let ok = controller::adaptive::Settings::default();
    assert!(ok.validate().is_ok());
    for (bad, field) in [
        (
            controller::adaptive::Settings {
                lambda: 0.0,
                ..ok.clone()
            },
            "adaptive.lambda",
        ),
        (
            controller::adaptive::Settings {
                lambda: 1.5,
                ..ok.clone()
            },
            "adaptive.lambda",
        ),
        (
            controller::adaptive::Settings {
                min_groups: 0,
                ..ok.clone()
            },
            "adaptive.min_groups",
        ),
        (
            controller::adaptive::Settings {
                settle_s: f64::NAN,
                ..ok.clone()
            },
            "adaptive.settle_s",
        ),
        (
            controller::adaptive::Settings {
                retire_share: 1.0,
                ..ok.clone()
            },
            "adaptive.retire_share",
        ),
    ] {
        assert_eq!(bad.validate().unwrap_err().0, field);
        let s = Settings {
            adaptive: bad,
            ..Settings::default()
        };
        let e = controller::store::validate_settings(&s).unwrap_err();
        assert!(
            e.to_string().starts_with(&format!("settings.{field}: ")),
            "{e}"
        );
    }
    // Settings stored before adaptive path groups existed.
    let old: Settings = serde_json::from_str(
        r#"{"groups_per_pair":4,"mdi_threshold":0.4,"replace_margin":0.2,"allow_transit":true}"#,
    )
    .unwrap();
    assert_eq!(old, Settings::default());
    assert!(!old.adaptive.enabled);
}
