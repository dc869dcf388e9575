//! Automatic path configuration, live (seed 000 §IV; issue #20): every `auto.period_s` `ssc`
//! recomputes the composition of the path groups of the pairs it is switched on for, from the
//! SDC's measurements ([`crate::measure::HopMeter`]), with the PC's computation
//! ([`crate::path_config::compute_group`]: max-flow, one member per port slot, MDI threshold).
//!
//! Groups are *semi-permanent* (seed 000 §IV): a group of an enabled pair is replaced only
//! - when it became **invalid**: a member path no longer fits the inventory, carries nothing
//!   while its group is limited (dead, measured 0), or the group's MDI is above the threshold;
//! - or when the fresh group's max-flow capacity is at least `1 + replace_margin` times the
//!   current group's under the same measurements, and the group was not replaced within
//!   `auto.hold_s` (its new paths get measured before they are judged).
//!
//! A pair with no group gets group 1. Otherwise the configurator never adds nor removes groups:
//! that is the adaptive path groups' job ([`crate::adaptive`], which adds a group to a pair short
//! of capacity and retires it again). So the two coexist: adaptive owns *how many* groups a pair
//! has, the configurator owns *which member paths* each group has; both write through the
//! catalog (`Catalog::set_group` / `remove_group`), which recompiles the flows and pushes the
//! gateways' configs.
//!
//! Pure: the caller passes the time, the catalog's settings, inventory, groups and measurements.
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::inventory::{BranchId, Inventory};
use crate::path_config::{self, compute_group, path_capacity, score, Measurements};
use crate::path_group::{validate_member, PathGroup, PathGroupId, PathGroups};

/// What to write to the catalog.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// The group as it should be (set with `Catalog::set_group`).
    pub group: PathGroup,
    /// Whether the pair had no group (else: replaced).
    pub added: bool,
    /// Why, for the log.
    pub reason: String,
}

/// The live configurator: remembers when each group was last replaced.
#[derive(Clone, Debug, Default)]
pub struct AutoConfig {
    replaced_at: BTreeMap<(BranchId, BranchId, PathGroupId), Instant>,
    last_round: Option<Instant>,
}

fn members_text(g: &PathGroup) -> String {
    g.members
        .values()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why `g` is invalid under `m`, if it is.
fn invalid(
    settings: &path_config::Settings,
    inventory: &Inventory,
    m: &Measurements,
    g: &PathGroup,
) -> Option<String> {
    for p in g.members.values() {
        if validate_member(inventory, p).is_err() {
            return Some(format!("member {p} no longer fits the inventory"));
        }
        if path_capacity(inventory, m, p) == 0 {
            return Some(format!("member {p} is dead (carries nothing)"));
        }
    }
    let mdi = score(inventory, m, g.members.values()).mdi;
    (mdi > settings.mdi_threshold).then(|| format!("MDI {mdi:.2} above the threshold"))
}

impl AutoConfig {
    /// Nothing done yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a round is due at `now` (every `auto.period_s`, the first at once).
    pub fn due(&self, settings: &path_config::Settings, now: Instant) -> bool {
        let period = Duration::try_from_secs_f64(settings.auto.period_s).unwrap_or(Duration::MAX);
        self.last_round
            .is_none_or(|t| now.saturating_duration_since(t) >= period)
    }

    /// One round at `now`: the changes to make for every enabled pair (in pair, then id order).
    pub fn step(
        &mut self,
        settings: &path_config::Settings,
        now: Instant,
        inventory: &Inventory,
        groups: &PathGroups,
        m: &Measurements,
    ) -> Vec<Change> {
        self.last_round = Some(now);
        let hold = Duration::try_from_secs_f64(settings.auto.hold_s).unwrap_or(Duration::MAX);
        let ids: Vec<BranchId> = inventory.branches().map(|b| b.id).collect();
        let mut out = Vec::new();
        for &a in &ids {
            for &b in ids.iter().filter(|&&b| b != a) {
                if !settings.auto.applies(a.get(), b.get()) {
                    continue;
                }
                let current: Vec<&PathGroup> = groups
                    .pair(a, b)
                    .map(|p| p.values().collect())
                    .unwrap_or_default();
                if current.is_empty() {
                    let Ok(id) = PathGroupId::new(1) else {
                        continue;
                    };
                    if let Some(g) = compute_group(inventory, m, settings, (a, b), id, &[]) {
                        let reason = format!("the pair had no group: {}", members_text(&g));
                        out.push(Change {
                            group: g,
                            added: true,
                            reason,
                        });
                    }
                    continue;
                }
                let mut kept: Vec<PathGroup> = Vec::new();
                for old in current {
                    let key = (a, b, old.id);
                    let earlier: Vec<&PathGroup> = kept.iter().collect();
                    let fresh = compute_group(inventory, m, settings, (a, b), old.id, &earlier);
                    let held = self
                        .replaced_at
                        .get(&key)
                        .is_some_and(|t| now.saturating_duration_since(*t) < hold);
                    let choice = match (fresh, invalid(settings, inventory, m, old)) {
                        (Some(fresh), _) if fresh.members == old.members => None,
                        (Some(fresh), Some(why)) => Some((fresh, why)),
                        (Some(fresh), None) if !held => {
                            let c_old = score(inventory, m, old.members.values()).capacity_kbps;
                            let c_new = score(inventory, m, fresh.members.values()).capacity_kbps;
                            let better = c_new > c_old
                                && c_new as f64 >= c_old as f64 * (1.0 + settings.replace_margin);
                            better.then(|| {
                                let why = format!(
                                    "capacity {c_old} -> {c_new} kbit/s (margin {:.0} %)",
                                    settings.replace_margin * 100.0
                                );
                                (fresh, why)
                            })
                        }
                        _ => None,
                    };
                    match choice {
                        Some((fresh, why)) => {
                            self.replaced_at.insert(key, now);
                            let reason =
                                format!("{why}: {} -> {}", members_text(old), members_text(&fresh));
                            kept.push(fresh.clone());
                            out.push(Change {
                                group: fresh,
                                added: false,
                                reason,
                            });
                        }
                        None => kept.push(old.clone()),
                    }
                }
            }
        }
        self.replaced_at
            .retain(|(a, b, g), _| groups.group(*a, *b, *g).is_some());
        out
    }
}

#[cfg(test)]
#[path = "auto_config_tests.rs"]
mod tests;
