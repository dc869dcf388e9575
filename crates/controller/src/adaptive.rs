//! Adaptive path groups (seed 003 §III steps 5–8, issue #9): a branch pair whose traffic gets
//! less than it could gets another path group; a pair that no longer needs one gives it back.
//!
//! Seed 003's controller estimates the achievable rate ζ of each flow, the end host measures its
//! achieved rate ξ, and when `ξ < λ·ζ` more subflows are added over new routes. In MMS the unit
//! is the ordered branch pair (A, B) and its path groups (each group is a set of MPTCP
//! connections with one subflow per member path, `crate::path_group`):
//!
//! - **ξ** (achieved): Σ over the pair's groups of the rate their connections carried in the
//!   last report interval (`mpa::gwchan::GroupReport`, through [`crate::wrr::Wrr::observations`]),
//!   smoothed (EWMA, weight [`XI_ALPHA`]).
//! - **Demand**: a pair only needs more when its groups are the limit. A group is *limited by
//!   its paths* in a report when the capacity estimate calls it saturated (writers blocked
//!   ≥ 50 % or ≥ 3 % retransmitted, [`crate::capacity`]) or when its sockets hold data not yet in
//!   flight worth at least `limited_backlog_s` (0.1 s) at the rate it carried
//!   (`GroupReport::queued_bytes`). Behind a bottleneck the tunnel's send buffers
//!   fill while its writers are almost never blocked (measured 0.2–2 % blocked, 0–1.4 % loss
//!   with a 12 Mbit/s group at its limit): the queued backlog is the signal that does not
//!   flicker. Application-limited traffic leaves nothing queued. The pair is *saturated* while
//!   some group was limited within the last `limited_hold_s` (4 s): a bulk flow's backlog and
//!   losses come in bursts. A pair that carries little because little is sent is never grown.
//! - **ζ** (achievable): the max-flow from A to B over *every* candidate member path (direct and
//!   one transit, [`crate::path_config::candidates`]) under the ports' capacities and the hop
//!   measurements ([`crate::path_config::group_capacity`]).
//! - **Add**: saturated and `ξ < λ·ζ` for `add_after_s`, the pair below `groups_per_pair` groups
//!   and not settling: a new group ([`crate::path_config::compute_group`], most capacity, then the
//!   member paths least used by the pair's groups) with the lowest free id, if it has at least
//!   one member path no group of the pair uses (else nothing new could help: state
//!   `no_new_path`).
//! - **Trial**: `settle_s` after an add, if the pair is still short and ξ did not grow by
//!   `min_gain` over ξ before the add, the new group is taken back and the pair backs off for
//!   `backoff_s` (the limit was not where the new paths go, e.g. the destination's downlinks).
//! - **Retire**: not saturated, and ξ at most `retire_share` of what the pair's other groups
//!   have shown they carry (the sum of their peak rates, each a maximum that decays with time
//!   constant [`PEAK_TAU`]) for `retire_after_s`: the groups with the highest ids go, as many
//!   at once as leave ξ within `retire_share` of the remaining groups' peaks, down to
//!   `min_groups` (an idle pair gives back every extra group in one change). Measured peaks, not capacity estimates: a window-based estimate of a
//!   lightly used connection is far above what its paths carry (seen: 60–90 Mbit/s for 12).
//! - **Hysteresis**: one change per pair per `settle_s`; adding needs saturation, retiring needs
//!   its absence plus headroom of 1/`retire_share` on the rest, so a pair does not flap between
//!   the two.
//!
//! What changes is a path group in the store: `ssc` applies [`Action`]s through
//! [`crate::store::Catalog::set_group`] / `remove_group`, which recompiles the flows (pushed to
//! every OVS) and the gateways' configs (pushed over the gateway channel); gateways open and close
//! the group's connections without touching the others (docs/ssc.md "Adaptive path groups").
//!
//! Pure: the caller passes the time, the catalog's inventory and groups, and the observations.
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::inventory::{BranchId, Inventory};
use crate::path_config::Measurements;
use crate::path_config::{self, candidates, compute_group, group_capacity, path_capacity};
use crate::path_group::{MemberPath, PathGroup, PathGroupId, PathGroups, MAX_GROUP_ID};
use crate::wrr::Observation;

/// How often `ssc run` calls [`Adaptive::round`]: the gateways' report interval.
pub const INTERVAL: Duration = Duration::from_secs(2);

/// EWMA weight of a new ξ sample (one per 2 s report): half-life of one report.
pub const XI_ALPHA: f64 = 0.5;

/// Time constant of the decay of a group's peak rate (the retire rule's "what the other groups
/// carry"): 5 minutes, longer than any retire wait, so a peak of the current busy period counts.
pub const PEAK_TAU: Duration = Duration::from_secs(300);

pub use crate::settings::AdaptiveSettings as Settings;

/// A change to the path groups.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Add this group (its id is free in its pair).
    Add {
        /// The new group.
        group: PathGroup,
        /// Why, for the log.
        reason: String,
    },
    /// Remove group `group` of (`source`, `destination`).
    Retire {
        /// A.
        source: BranchId,
        /// B.
        destination: BranchId,
        /// The group.
        group: PathGroupId,
        /// Why, for the log.
        reason: String,
    },
}

/// Where a pair stands (shown by `GET /api/v1/adaptive`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PairStatus {
    /// No fresh report of any of its groups.
    #[default]
    NoReports,
    /// Enough: not saturated, or ξ ≥ λ·ζ.
    Ok,
    /// Saturated and ξ < λ·ζ, waiting `add_after_s`.
    Short,
    /// Short, but a change was made less than `settle_s` ago.
    Settling,
    /// Short, but a group was taken back less than `backoff_s` ago.
    Backoff,
    /// Short, but the pair has `groups_per_pair` groups.
    AtMax,
    /// Short, but no group with an unused member path exists.
    NoNewPath,
    /// Not needing its highest group, waiting `retire_after_s`.
    Calm,
}

/// One pair's state, for display.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = AdaptivePair)]
pub struct PairView {
    /// A.
    pub source: u8,
    /// B.
    pub destination: u8,
    /// Its group ids.
    pub groups: Vec<u8>,
    /// Smoothed achieved rate ξ, bit/s.
    pub xi_bps: f64,
    /// Achievable rate ζ, bit/s (computed when the pair is saturated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zeta_bps: Option<f64>,
    /// Whether the pair counts as limited by its paths (see the module docs).
    pub saturated: bool,
    /// Where it stands.
    pub status: PairStatus,
    /// Groups added and retired so far.
    pub added: u64,
    /// Groups retired (idle or taken back).
    pub retired: u64,
    /// The last change, for the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_action: Option<String>,
}

#[derive(Clone, Debug, Default)]
struct PairState {
    short_since: Option<Instant>,
    calm_since: Option<Instant>,
    last_change: Option<Instant>,
    backoff_until: Option<Instant>,
    xi: Option<f64>,
    /// When a group of the pair was last limited by its paths (report time).
    limited_at: Option<Instant>,
    /// Per group: its peak carried rate (bit/s) and when it was last updated.
    peaks: BTreeMap<PathGroupId, (f64, Instant)>,
    /// The group added last and ξ before it, until `settle_s` later.
    trial: Option<(PathGroupId, f64)>,
    view: PairView,
}

/// The adaptive path groups of every pair.
#[derive(Clone, Debug, Default)]
pub struct Adaptive {
    pairs: BTreeMap<(BranchId, BranchId), PairState>,
}

fn secs(s: f64) -> Duration {
    Duration::try_from_secs_f64(s).unwrap_or(Duration::MAX)
}

fn since(now: Instant, t: Option<Instant>) -> Option<Duration> {
    t.map(|t| now.saturating_duration_since(t))
}

/// The pair's achievable rate ζ in bit/s: max-flow over every candidate member path.
pub fn achievable_bps(
    inventory: &Inventory,
    m: &Measurements,
    settings: &path_config::Settings,
    (a, b): (BranchId, BranchId),
) -> f64 {
    let all: Vec<MemberPath> = candidates(inventory, a, b, settings.allow_transit)
        .into_iter()
        .filter(|p| path_capacity(inventory, m, p) > 0)
        .collect();
    // kbit/s → bit/s; far below 2^53 for any real network.
    group_capacity(inventory, m, all.iter()) as f64 * 1000.0
}

/// The lowest free group id of a pair: 1..=15 first (the paper numbers groups from 1), then 0.
fn free_id(used: &BTreeSet<PathGroupId>) -> Option<PathGroupId> {
    (1..=MAX_GROUP_ID)
        .chain(std::iter::once(0))
        .filter_map(|g| PathGroupId::new(g).ok())
        .find(|g| !used.contains(g))
}

impl Adaptive {
    /// Nothing known.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every pair's state, by (A, B).
    pub fn views(&self) -> Vec<PairView> {
        self.pairs.values().map(|p| p.view.clone()).collect()
    }

    /// Records that applying `action` failed (the catalog refused it): shown as the last action.
    pub fn refused(&mut self, action: &Action, error: &str) {
        let (a, b) = match action {
            Action::Add { group, .. } => (group.source, group.destination),
            Action::Retire {
                source,
                destination,
                ..
            } => (*source, *destination),
        };
        if let Some(p) = self.pairs.get_mut(&(a, b)) {
            p.view.last_action = Some(format!("refused by the catalog: {error}"));
            if matches!(action, Action::Add { .. }) {
                p.trial = None;
                p.view.added = p.view.added.saturating_sub(1);
            } else {
                p.view.retired = p.view.retired.saturating_sub(1);
            }
        }
    }

    /// One round of the adaptive loop at `now` (`ssc run` calls it every [`INTERVAL`]):
    /// [`Adaptive::step`] on the catalog's settings, inventory and groups and the gateways'
    /// reports `obs`, then each action through `apply` (the driver's write to the catalog, which
    /// validates it). A refused action is logged and recorded ([`Adaptive::refused`]). Returns
    /// the actions, each with the refusal if there was one.
    pub fn round<E: std::fmt::Display>(
        &mut self,
        settings: &path_config::Settings,
        now: Instant,
        inventory: &Inventory,
        groups: &PathGroups,
        obs: &BTreeMap<(BranchId, BranchId, PathGroupId), Observation>,
        mut apply: impl FnMut(&Action) -> Result<(), E>,
    ) -> Vec<(Action, Option<String>)> {
        let actions = self.step(settings, now, inventory, &Measurements::new(), groups, obs);
        let mut done = Vec::with_capacity(actions.len());
        for action in actions {
            match &action {
                Action::Add { group, reason } => tracing::info!(
                    source = group.source.get(),
                    destination = group.destination.get(),
                    group = group.id.get(),
                    members = ?group.members.values().map(ToString::to_string).collect::<Vec<_>>(),
                    reason = %reason,
                    "adaptive: path group added"
                ),
                Action::Retire {
                    source,
                    destination,
                    group,
                    reason,
                } => tracing::info!(
                    source = source.get(),
                    destination = destination.get(),
                    group = group.get(),
                    reason = %reason,
                    "adaptive: path group retired"
                ),
            }
            let refusal = apply(&action).err().map(|e| e.to_string());
            if let Some(e) = &refusal {
                tracing::warn!(error = %e, ?action, "adaptive: change refused");
                self.refused(&action, e);
            }
            done.push((action, refusal));
        }
        done
    }

    /// One step at `now` (call it after each round of gateway reports, every ~2 s): the changes
    /// to make. Disabled: forgets everything and returns none.
    pub fn step(
        &mut self,
        settings: &path_config::Settings,
        now: Instant,
        inventory: &Inventory,
        m: &Measurements,
        groups: &PathGroups,
        obs: &BTreeMap<(BranchId, BranchId, PathGroupId), Observation>,
    ) -> Vec<Action> {
        let s = &settings.adaptive;
        if !s.enabled {
            self.pairs.clear();
            return Vec::new();
        }
        let mut pairs: BTreeMap<(BranchId, BranchId), Vec<&PathGroup>> = BTreeMap::new();
        for g in groups.groups() {
            pairs.entry((g.source, g.destination)).or_default().push(g);
        }
        self.pairs.retain(|k, _| pairs.contains_key(k));
        let max_groups = usize::from(settings.groups_per_pair.clamp(1, MAX_GROUP_ID + 1));
        let min_groups = usize::from(s.min_groups.max(1));
        let max_age = secs(s.max_report_age_s);
        let settle = secs(s.settle_s);
        let mut actions = Vec::new();
        for ((a, b), list) in pairs {
            let st = self.pairs.entry((a, b)).or_default();
            st.view.source = a.get();
            st.view.destination = b.get();
            st.view.groups = list.iter().map(|g| g.id.get()).collect();
            let fresh: Vec<(PathGroupId, crate::capacity::Sample, &Observation)> = list
                .iter()
                .filter_map(|g| {
                    let o = obs.get(&(a, b, g.id))?;
                    let at = o.at?;
                    (now.saturating_duration_since(at) <= max_age)
                        .then_some(())
                        .and(o.sample)
                        .map(|smp| (g.id, smp, o))
                })
                .collect();
            if fresh.is_empty() {
                st.short_since = None;
                st.calm_since = None;
                st.view.status = PairStatus::NoReports;
                st.view.saturated = false;
                st.limited_at = None;
                continue;
            }
            st.peaks.retain(|g, _| list.iter().any(|x| x.id == *g));
            for (g, smp, _) in &fresh {
                let rate = if smp.rate_bps.is_finite() {
                    smp.rate_bps.max(0.0)
                } else {
                    0.0
                };
                let e = st.peaks.entry(*g).or_insert((rate, now));
                let decay = (-now.saturating_duration_since(e.1).as_secs_f64()
                    / PEAK_TAU.as_secs_f64())
                .exp();
                *e = ((e.0 * decay).max(rate), now);
            }
            let xi_now: f64 = fresh
                .iter()
                .map(|(_, smp, _)| smp.rate_bps)
                .filter(|r| r.is_finite() && *r >= 0.0)
                .sum();
            let xi = match st.xi {
                Some(old) => XI_ALPHA * xi_now + (1.0 - XI_ALPHA) * old,
                None => xi_now,
            };
            st.xi = Some(xi);
            st.view.xi_bps = xi;
            let limited = fresh
                .iter()
                .filter(|(_, smp, _)| {
                    smp.saturated || smp.backlog_s.is_some_and(|b| b >= s.limited_backlog_s)
                })
                .filter_map(|(_, _, o)| o.at)
                .max();
            if limited.is_some() {
                st.limited_at = limited.max(st.limited_at);
            }
            let saturated = since(now, st.limited_at).is_some_and(|d| d <= secs(s.limited_hold_s));
            st.view.saturated = saturated;
            let settled = since(now, st.last_change).is_none_or(|d| d >= settle);
            let zeta = saturated.then(|| achievable_bps(inventory, m, settings, (a, b)));
            st.view.zeta_bps = zeta.or(st.view.zeta_bps);
            let short = zeta.is_some_and(|z| xi < s.lambda * z);

            // The group added last: kept if ξ grew (or the pair is no longer short).
            if settled {
                if let Some((gid, before)) = st.trial.take() {
                    let present = list.iter().any(|g| g.id == gid);
                    if present && short && xi < before * (1.0 + s.min_gain) {
                        let reason = format!(
                            "group {gid} did not raise the achieved rate: {:.1} Mbit/s before, {:.1} after",
                            before / 1e6,
                            xi / 1e6
                        );
                        st.view.last_action = Some(format!("took back {gid}: {reason}"));
                        st.view.retired += 1;
                        st.last_change = Some(now);
                        st.backoff_until = Some(now + secs(s.backoff_s));
                        st.short_since = None;
                        st.view.status = PairStatus::Backoff;
                        actions.push(Action::Retire {
                            source: a,
                            destination: b,
                            group: gid,
                            reason,
                        });
                        continue;
                    }
                }
            }

            if short {
                st.calm_since = None;
                let since_short = now.saturating_duration_since(*st.short_since.get_or_insert(now));
                st.view.status = if !settled {
                    PairStatus::Settling
                } else if st.backoff_until.is_some_and(|t| now < t) {
                    PairStatus::Backoff
                } else if list.len() >= max_groups {
                    PairStatus::AtMax
                } else if since_short < secs(s.add_after_s) {
                    PairStatus::Short
                } else {
                    let used_ids: BTreeSet<PathGroupId> = list.iter().map(|g| g.id).collect();
                    let used_paths: BTreeSet<&MemberPath> =
                        list.iter().flat_map(|g| g.members.values()).collect();
                    let fresh_group = free_id(&used_ids)
                        .and_then(|id| compute_group(inventory, m, settings, (a, b), id, &list));
                    match fresh_group {
                        Some(g) if g.members.values().any(|p| !used_paths.contains(p)) => {
                            let members: Vec<String> =
                                g.members.values().map(ToString::to_string).collect();
                            let reason = format!(
                                "achieved {:.1} Mbit/s < λ {} × achievable {:.1} Mbit/s for {:.0} s, saturated",
                                xi / 1e6,
                                s.lambda,
                                zeta.unwrap_or(0.0) / 1e6,
                                since_short.as_secs_f64()
                            );
                            st.view.last_action =
                                Some(format!("added {} ({}): {reason}", g.id, members.join(", ")));
                            st.view.added += 1;
                            st.trial = Some((g.id, xi));
                            st.last_change = Some(now);
                            st.short_since = None;
                            actions.push(Action::Add { group: g, reason });
                            PairStatus::Settling
                        }
                        _ => PairStatus::NoNewPath,
                    }
                };
                continue;
            }
            st.short_since = None;
            st.view.status = PairStatus::Ok;
            if saturated || list.len() <= min_groups {
                st.calm_since = None;
                continue;
            }
            // The groups to give back: the highest ids first, as many as leave the rest carrying
            // ξ with headroom (peaks of what stays), down to `min_groups`. An idle pair gives
            // back every extra group in one change instead of one per `settle_s`.
            let mut ids: Vec<PathGroupId> = list.iter().map(|g| g.id).collect();
            ids.sort_unstable_by(|x, y| y.cmp(x));
            let peak_of = |g: &PathGroupId| st.peaks.get(g).map_or(0.0, |(p, _)| *p);
            let mut kept: f64 = ids.iter().map(peak_of).sum();
            let mut going: Vec<(PathGroupId, f64)> = Vec::new();
            for g in &ids {
                if ids.len() - going.len() <= min_groups {
                    break;
                }
                let rest = kept - peak_of(g);
                if xi > s.retire_share * rest {
                    break;
                }
                kept = rest;
                going.push((*g, rest));
            }
            if going.is_empty() {
                st.calm_since = None;
                continue;
            }
            let calm_for = now.saturating_duration_since(*st.calm_since.get_or_insert(now));
            st.view.status = PairStatus::Calm;
            if calm_for >= secs(s.retire_after_s) && settled {
                for (group, rest) in going {
                    let reason = format!(
                        "achieved {:.2} Mbit/s ≤ {} × {:.1} Mbit/s the remaining groups carried at their peak, for {:.0} s",
                        xi / 1e6,
                        s.retire_share,
                        rest / 1e6,
                        calm_for.as_secs_f64()
                    );
                    st.view.last_action = Some(format!("retired {group}: {reason}"));
                    st.view.retired += 1;
                    actions.push(Action::Retire {
                        source: a,
                        destination: b,
                        group,
                        reason,
                    });
                }
                st.last_change = Some(now);
                st.calm_since = None;
                st.trial = None;
            }
        }
        actions
    }
}
