//! Settings of the path configuration (PC): the automatic PC's ([`Settings`], seed 000 §IV) and
//! the adaptive path groups' ([`AdaptiveSettings`], seed 003), as stored by the catalog and
//! changed with `ssc settings set`. Plain data at the bottom of the crate: `path_config`,
//! `adaptive` and the store read them, none of them is needed here.
use mms_types::PortPlan;
use serde::{Deserialize, Serialize};

use crate::path_group::MAX_GROUP_ID;

/// Settings of the automatic PC.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Groups per ordered pair, 1..=16 (the paper's testbed uses 4; its SSC configures 16).
    pub groups_per_pair: u8,
    /// Largest MDI a group may have (seed 001 §IV: beyond 0.4 aggregation falls below one path).
    pub mdi_threshold: f64,
    /// A valid group is replaced only by one with at least `1 + replace_margin` times its
    /// capacity.
    pub replace_margin: f64,
    /// Whether members may use a transit branch.
    pub allow_transit: bool,
    /// Adaptive path groups (seed 003, `adaptive`); off by default. When on,
    /// `groups_per_pair` is the most groups a pair gets.
    pub adaptive: AdaptiveSettings,
    /// Automatic path configuration live (`auto_config`): off by default.
    pub auto: AutoSettings,
    /// The outer port plan (issue #20): `"paper"` (`0xBASG`, branch ids 1..=15, the default)
    /// or an extended range `"16384-32767"` reserved on every gateway, from which the
    /// controller allocates the member path codes (`crate::codes`; branch ids 1..=250).
    #[serde(skip_serializing_if = "is_paper")]
    pub ports: PortPlan,
}

fn is_paper(p: &PortPlan) -> bool {
    *p == PortPlan::Paper
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            groups_per_pair: 4,
            mdi_threshold: 0.4,
            replace_margin: 0.2,
            allow_transit: true,
            adaptive: AdaptiveSettings::default(),
            auto: AutoSettings::default(),
            ports: PortPlan::Paper,
        }
    }
}

/// Settings of the automatic path configuration live (`auto` in the PC settings, `ssc settings
/// set --auto` / `--auto-pairs`): `ssc` recomputes the composition of the groups of these pairs
/// from the SDC's measurements every `period_s` (`crate::auto_config`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AutoSettings {
    /// On for every ordered pair.
    pub all_pairs: bool,
    /// On for these ordered pairs `[source, destination]` (besides `all_pairs`).
    pub pairs: Vec<[u8; 2]>,
    /// How often the groups are recomputed, seconds.
    pub period_s: f64,
    /// A group replaced for a better one is not replaced again for this long, seconds (unless a
    /// member dies): its new paths get measured first.
    pub hold_s: f64,
}

impl Default for AutoSettings {
    fn default() -> Self {
        Self {
            all_pairs: false,
            pairs: Vec::new(),
            period_s: 10.0,
            hold_s: 60.0,
        }
    }
}

impl AutoSettings {
    /// Whether the automatic path configuration is on for (a, b).
    pub fn applies(&self, a: u8, b: u8) -> bool {
        a != b && (self.all_pairs || self.pairs.contains(&[a, b]))
    }

    /// Whether it is on for any pair.
    pub fn any(&self) -> bool {
        self.all_pairs || !self.pairs.is_empty()
    }

    /// Checks the ranges; the error names the field (`auto.period_s`).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !(self.period_s.is_finite() && self.period_s >= 1.0) {
            return Err((
                "auto.period_s",
                format!("must be a number >= 1, got {}", self.period_s),
            ));
        }
        if !(self.hold_s.is_finite() && self.hold_s >= 0.0) {
            return Err((
                "auto.hold_s",
                format!("must be a number >= 0, got {}", self.hold_s),
            ));
        }
        if let Some([a, b]) = self
            .pairs
            .iter()
            .find(|[a, b]| a == b || *a == 0 || *b == 0)
        {
            return Err((
                "auto.pairs",
                format!("[{a}, {b}] is not an ordered pair of two branch ids"),
            ));
        }
        Ok(())
    }
}

/// Settings of the adaptive path groups (`adaptive` in the PC settings, `ssc settings set`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdaptiveSettings {
    /// Off by default: the pairs keep the groups the operator (or the automatic PC) set.
    pub enabled: bool,
    /// λ: a saturated pair whose ξ stays below λ·ζ gets a group.
    pub lambda: f64,
    /// Groups a pair keeps when retiring (the most is the PC's `groups_per_pair`).
    pub min_groups: u8,
    /// How long the shortfall must last before a group is added, seconds.
    pub add_after_s: f64,
    /// After a change to a pair, no other change to it for this long, seconds (the new group's
    /// connections come up, get weights and are measured).
    pub settle_s: f64,
    /// An added group that did not raise ξ by this share (checked `settle_s` after, while the
    /// pair is still short) is taken back.
    pub min_gain: f64,
    /// After a group was taken back, no adding to that pair for this long, seconds.
    pub backoff_s: f64,
    /// A pair's highest group retires when ξ stays at or below this share of what its other
    /// groups can carry.
    pub retire_share: f64,
    /// ... for this long, seconds.
    pub retire_after_s: f64,
    /// Reports older than this are not used, seconds (gateways report every 2 s).
    pub max_report_age_s: f64,
    /// A group whose sockets hold data not in flight worth at least this many seconds at the rate it
    /// carried is limited by its paths (besides the capacity estimate's saturation).
    pub limited_backlog_s: f64,
    /// A pair counts as saturated for this long after a report of a limited group, seconds.
    pub limited_hold_s: f64,
}

impl Default for AdaptiveSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            lambda: 0.8,
            min_groups: 1,
            add_after_s: 6.0,
            settle_s: 10.0,
            min_gain: 0.1,
            backoff_s: 60.0,
            retire_share: 0.5,
            retire_after_s: 60.0,
            max_report_age_s: 6.0,
            limited_backlog_s: 0.1,
            limited_hold_s: 4.0,
        }
    }
}

impl AdaptiveSettings {
    /// Checks the ranges; the error names the field as it is in the PC settings (`adaptive.lambda`).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let finite_nonneg = |name: &'static str, v: f64| {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                Err((name, format!("must be a number >= 0, got {v}")))
            }
        };
        if !(self.lambda.is_finite() && self.lambda > 0.0 && self.lambda <= 1.0) {
            return Err((
                "adaptive.lambda",
                format!("must be in (0, 1], got {}", self.lambda),
            ));
        }
        if !(1..=MAX_GROUP_ID + 1).contains(&self.min_groups) {
            return Err((
                "adaptive.min_groups",
                format!("must be 1..=16, got {}", self.min_groups),
            ));
        }
        if !(self.retire_share.is_finite() && (0.0..1.0).contains(&self.retire_share)) {
            return Err((
                "adaptive.retire_share",
                format!("must be in [0, 1), got {}", self.retire_share),
            ));
        }
        finite_nonneg("adaptive.add_after_s", self.add_after_s)?;
        finite_nonneg("adaptive.settle_s", self.settle_s)?;
        finite_nonneg("adaptive.min_gain", self.min_gain)?;
        finite_nonneg("adaptive.backoff_s", self.backoff_s)?;
        finite_nonneg("adaptive.retire_after_s", self.retire_after_s)?;
        finite_nonneg("adaptive.max_report_age_s", self.max_report_age_s)?;
        finite_nonneg("adaptive.limited_backlog_s", self.limited_backlog_s)?;
        finite_nonneg("adaptive.limited_hold_s", self.limited_hold_s)?;
        Ok(())
    }
}
