//! History: the last minutes of the SDC's rates and the adaptive path groups' changes, kept in
//! memory by `ssc` for the web dashboard (issue #19; served by `GET /api/v1/history`).
//!
//! A pure core, time is a parameter (Unix milliseconds, so the dashboard can label its axis):
//! the driver ([`crate::ui::dashboard::record_history`]) calls [`History::record`] with the
//! SDC's view every [`History::period`] and [`History::observe_adaptive`] with the adaptive
//! loop's pairs; the API serves [`History::view`].
//!
//! Memory is bounded whatever the inventory: one ring of at most [`History::capacity`] points per
//! series (member path `0xBASG`, path group, ordered branch pair), at most [`MAX_SERIES`] series
//! (further ones are counted, not kept), at most [`MAX_EVENTS`] events. A series that got no
//! point for a whole window (its member path was removed) is dropped. Worst case:
//! `MAX_SERIES × MAX_POINTS × size_of::<Point>()` = 1,024 × 300 × 24 B ≈ 7.4 MB; the paper's
//! Table II (16 member paths, 4 groups, 1 pair) holds 21 series ≈ 150 KB at 300 points.
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::adaptive::PairView;
use crate::sdc::{StatsView, Traffic};

/// Most points one series keeps: the window is divided into at most this many samples (with
/// the default 10-minute window and a 5 s statistics interval: 120 points, one per sample).
pub const MAX_POINTS: usize = 300;

/// Most series kept (member paths + groups + pairs); more are counted in `dropped_series`.
/// 15 branches with 4 groups of 2 members per ordered pair need 210 × (8 + 4 + 1) = 2,730:
/// such a mesh shows its first 1,024 series (pairs and groups sort before members).
pub const MAX_SERIES: usize = 1_024;

/// Most adaptive path-group events kept (the newest).
pub const MAX_EVENTS: usize = 100;

/// The window `ssc run` keeps by default.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(600);

/// What a series measures. Pairs sort first, then groups, then members, so a capped history
/// keeps the coarse views.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SeriesKind {
    /// An ordered branch pair (A, B): every group summed.
    Pair,
    /// A path group (A, B, G): its member paths summed.
    Group,
    /// One member path `0xBASG`.
    Member,
}

/// The key of one series.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    kind: SeriesKind,
    source: u8,
    destination: u8,
    group: u8,
    member: u8,
}

/// One sample of a series: Unix ms, then forward (A → B) and reverse (B → A) rate in bit/s.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point(pub u64, pub u64, pub u64);

/// One adaptive path-group change seen by [`History::observe_adaptive`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AdaptiveEvent {
    /// When it was seen, Unix ms.
    pub at_ms: u64,
    /// A.
    pub source: u8,
    /// B.
    pub destination: u8,
    /// `added`, `retired` or `note` (a new last action without a change, e.g. a refusal).
    pub kind: String,
    /// The pair's groups after it.
    pub groups: Vec<u8>,
    /// The adaptive loop's own words (`last_action`).
    pub text: String,
}

/// One series as served.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = HistorySeries)]
pub struct SeriesView {
    /// `pair`, `group` or `member`.
    #[schema(value_type = String)]
    pub kind: SeriesKind,
    /// A.
    pub source: u8,
    /// B.
    pub destination: u8,
    /// G (groups and members).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u8>,
    /// S (members).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<u8>,
    /// The member path's code `0xBASG` (members).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Oldest first: `[unix_ms, forward_bits_per_s, reverse_bits_per_s]`.
    #[schema(value_type = Vec<Vec<u64>>)]
    pub points: Vec<Point>,
}

/// `GET /api/v1/history`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = History)]
pub struct HistoryView {
    /// Whether `ssc` records a history (it does when its OpenFlow server runs).
    pub available: bool,
    /// Milliseconds between two points.
    pub period_ms: u64,
    /// Points kept per series.
    pub capacity: usize,
    /// When the newest sample was taken, Unix ms (0: none yet).
    pub last_ms: u64,
    /// Series that were not kept because [`MAX_SERIES`] were full.
    pub dropped_series: u64,
    /// Pairs, then groups, then members, each by (A, B, G, S).
    pub series: Vec<SeriesView>,
    /// Adaptive path-group changes, oldest first.
    pub events: Vec<AdaptiveEvent>,
}

/// One series' points, oldest first, and the member path's code as the SDC names it.
#[derive(Debug)]
struct Ring {
    code: Option<String>,
    points: VecDeque<Point>,
}

/// The bounded history (see the module docs).
#[derive(Debug)]
pub struct History {
    period_ms: u64,
    capacity: usize,
    last_ms: u64,
    series: BTreeMap<Key, Ring>,
    dropped_series: u64,
    events: VecDeque<AdaptiveEvent>,
    /// Per pair: (added, retired, last action) as last seen.
    adaptive_seen: BTreeMap<(u8, u8), (u64, u64, Option<String>)>,
}

impl Default for History {
    fn default() -> Self {
        Self::new(Duration::from_secs(5), DEFAULT_WINDOW)
    }
}

fn bps(x: f64) -> u64 {
    if x.is_finite() && x > 0.0 {
        // Rates are far below 2^53 bit/s: the cast keeps them.
        x.round() as u64
    } else {
        0
    }
}

impl History {
    /// A history of `window` sampled every `interval` (the SDC's statistics interval), or more
    /// coarsely when the window would need more than [`MAX_POINTS`] points.
    pub fn new(interval: Duration, window: Duration) -> Self {
        let interval_ms = u64::try_from(interval.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let window_ms = u64::try_from(window.as_millis()).unwrap_or(u64::MAX).max(1);
        let max = MAX_POINTS as u64;
        let period_ms = interval_ms.max(window_ms.div_ceil(max));
        let capacity = usize::try_from(window_ms.div_ceil(period_ms).clamp(2, max)).unwrap_or(2);
        Self {
            period_ms,
            capacity,
            last_ms: 0,
            series: BTreeMap::new(),
            dropped_series: 0,
            events: VecDeque::new(),
            adaptive_seen: BTreeMap::new(),
        }
    }

    /// How often the driver should call [`Self::record`].
    pub fn period(&self) -> Duration {
        Duration::from_millis(self.period_ms)
    }

    /// Points kept per series.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Series held now.
    pub fn series_len(&self) -> usize {
        self.series.len()
    }

    /// Points held now, over every series (the memory bound's unit).
    pub fn points_len(&self) -> usize {
        self.series.values().map(|r| r.points.len()).sum()
    }

    fn push(&mut self, key: Key, code: Option<&str>, at_ms: u64, t: &Traffic) {
        let point = Point(at_ms, bps(t.forward_bits_per_s), bps(t.reverse_bits_per_s));
        if !self.series.contains_key(&key) && self.series.len() >= MAX_SERIES {
            self.dropped_series = self.dropped_series.saturating_add(1);
            return;
        }
        let capacity = self.capacity;
        let ring = self.series.entry(key).or_insert_with(|| Ring {
            code: code.map(str::to_owned),
            points: VecDeque::with_capacity(capacity),
        });
        let ring = &mut ring.points;
        if ring.back().is_some_and(|p| p.0 >= at_ms) {
            // Time went backwards or stood still: keep one point per instant.
            return;
        }
        while ring.len() >= capacity {
            ring.pop_front();
        }
        ring.push_back(point);
    }

    /// One sample of the SDC at `now_ms` (Unix ms): a point for every member path, group and
    /// pair it shows; series silent for a whole window are dropped.
    pub fn record(&mut self, now_ms: u64, stats: &StatsView) {
        // First forget series silent for a whole window, so they make room for new ones.
        let window_ms = self.period_ms.saturating_mul(self.capacity as u64);
        let oldest = now_ms.saturating_sub(window_ms);
        self.series
            .retain(|_, ring| ring.points.back().is_some_and(|p| p.0 > oldest));
        for p in &stats.pairs {
            let key = Key {
                kind: SeriesKind::Pair,
                source: p.source,
                destination: p.destination,
                group: 0,
                member: 0,
            };
            self.push(key, None, now_ms, &p.traffic);
        }
        for g in &stats.groups {
            let key = Key {
                kind: SeriesKind::Group,
                source: g.source,
                destination: g.destination,
                group: g.group,
                member: 0,
            };
            self.push(key, None, now_ms, &g.traffic);
        }
        for m in &stats.members {
            let key = Key {
                kind: SeriesKind::Member,
                source: m.source,
                destination: m.destination,
                group: m.group,
                member: m.member,
            };
            self.push(key, Some(&m.code), now_ms, &m.traffic);
        }
        self.last_ms = self.last_ms.max(now_ms);
    }

    /// The adaptive loop's pairs at `now_ms`: a change of a pair's counts of added or retired
    /// groups, or a new last action, becomes an event.
    pub fn observe_adaptive(&mut self, now_ms: u64, pairs: &[PairView]) {
        for p in pairs {
            let now = (p.added, p.retired, p.last_action.clone());
            let before = self
                .adaptive_seen
                .insert((p.source, p.destination), now.clone());
            let (added0, retired0, action0) = before.unwrap_or((0, 0, None));
            let kind = if now.0 > added0 {
                "added"
            } else if now.1 > retired0 {
                "retired"
            } else if now.2.is_some() && now.2 != action0 {
                "note"
            } else {
                continue;
            };
            if self.events.len() >= MAX_EVENTS {
                self.events.pop_front();
            }
            self.events.push_back(AdaptiveEvent {
                at_ms: now_ms,
                source: p.source,
                destination: p.destination,
                kind: kind.to_owned(),
                groups: p.groups.clone(),
                text: now.2.unwrap_or_default(),
            });
        }
    }

    /// Everything, as served.
    pub fn view(&self) -> HistoryView {
        HistoryView {
            available: true,
            period_ms: self.period_ms,
            capacity: self.capacity,
            last_ms: self.last_ms,
            dropped_series: self.dropped_series,
            series: self
                .series
                .iter()
                .map(|(k, ring)| {
                    let member = k.kind == SeriesKind::Member;
                    SeriesView {
                        kind: k.kind,
                        source: k.source,
                        destination: k.destination,
                        group: (k.kind != SeriesKind::Pair).then_some(k.group),
                        member: member.then_some(k.member),
                        code: ring.code.clone(),
                        points: ring.points.iter().copied().collect(),
                    }
                })
                .collect(),
            events: self.events.iter().cloned().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adaptive::PairStatus;
    use crate::sdc::{GroupStats, MemberStats, PairStats};

    fn traffic(fwd: f64) -> Traffic {
        Traffic {
            forward_bits_per_s: fwd,
            reverse_bits_per_s: fwd / 10.0,
            ..Traffic::default()
        }
    }

    /// One pair (1, 2), one group, `members` member paths, all at `fwd` bit/s.
    fn stats(members: u8, fwd: f64) -> StatsView {
        StatsView {
            available: true,
            last_push: None,
            openflow_refusals: crate::preauth::Refusals::default(),
            unauthenticated_samples: 0,
            branches: Vec::new(),
            pairs: vec![PairStats {
                source: 1,
                destination: 2,
                traffic: traffic(fwd * f64::from(members)),
            }],
            groups: vec![GroupStats {
                source: 1,
                destination: 2,
                group: 1,
                traffic: traffic(fwd * f64::from(members)),
            }],
            members: (1..=members)
                .map(|s| MemberStats {
                    code: format!("{:#06x}", 0x2101 | (u16::from(s) << 4)),
                    source: 1,
                    destination: 2,
                    group: 1,
                    member: s,
                    traffic: traffic(fwd),
                })
                .collect(),
        }
    }

    #[test]
    fn period_and_capacity_follow_interval_and_window() {
        let h = History::new(Duration::from_secs(5), DEFAULT_WINDOW);
        assert_eq!((h.period(), h.capacity()), (Duration::from_secs(5), 120));
        // A fast interval: the window is cut into MAX_POINTS, not 6,000.
        let h = History::new(Duration::from_millis(100), DEFAULT_WINDOW);
        assert_eq!((h.period(), h.capacity()), (Duration::from_secs(2), 300));
        // Degenerate inputs stay usable.
        let h = History::new(Duration::ZERO, Duration::ZERO);
        assert_eq!(h.capacity(), 2);
        assert!(h.period() >= Duration::from_millis(1));
    }

    #[test]
    fn each_ring_keeps_at_most_capacity_points_newest_last() {
        let mut h = History::new(Duration::from_secs(1), Duration::from_secs(10));
        assert_eq!(h.capacity(), 10);
        for i in 0..1_000u64 {
            h.record(1_000 * (i + 1), &stats(2, i as f64));
        }
        // 1 pair + 1 group + 2 members, 10 points each, however long it ran.
        assert_eq!(h.series_len(), 4);
        assert_eq!(h.points_len(), 40);
        let v = h.view();
        assert_eq!(v.last_ms, 1_000_000);
        let member = v
            .series
            .iter()
            .find(|s| s.kind == SeriesKind::Member)
            .unwrap();
        assert_eq!(member.code.as_deref(), Some("0x2111"));
        assert_eq!(member.points.len(), 10);
        assert_eq!(member.points.first().unwrap().0, 991_000);
        assert_eq!(*member.points.last().unwrap(), Point(1_000_000, 999, 100));
        // Pairs sort first, then groups, then members.
        let kinds: Vec<_> = v.series.iter().map(|s| s.kind).collect();
        assert_eq!(
            kinds,
            [
                SeriesKind::Pair,
                SeriesKind::Group,
                SeriesKind::Member,
                SeriesKind::Member
            ]
        );
    }

    #[test]
    fn series_count_is_capped_and_silent_series_expire() {
        let mut h = History::new(Duration::from_secs(1), Duration::from_secs(10));
        // More series than the cap: a view with MAX_SERIES + 50 pairs (plus a group and a member).
        let mut big = stats(1, 1.0);
        big.pairs = (0..(MAX_SERIES + 50))
            .map(|i| PairStats {
                source: (i % 250) as u8,
                destination: (i / 250) as u8,
                traffic: traffic(1.0),
            })
            .collect();
        h.record(1_000, &big);
        assert_eq!(h.series_len(), MAX_SERIES);
        // The unit of the documented worst case (MAX_SERIES × MAX_POINTS × 24 B).
        assert_eq!(std::mem::size_of::<Point>(), 24);
        let v = h.view();
        assert_eq!(v.dropped_series, 52, "50 pairs + the group + the member");
        assert!(h.points_len() <= MAX_SERIES * h.capacity());
        // Nothing reported for a whole window: everything is gone.
        h.record(12_000, &stats(0, 0.0));
        assert_eq!(h.series_len(), 2, "only the new sample's pair and group");
        // Time going backwards adds no point.
        h.record(11_000, &stats(0, 0.0));
        assert_eq!(h.points_len(), 2);
        // Negative, NaN and infinite rates are stored as 0.
        h.record(13_000, &stats(1, f64::NAN));
        h.record(14_000, &stats(1, -5.0));
        h.record(15_000, &stats(1, f64::INFINITY));
        assert!(h
            .view()
            .series
            .iter()
            .flat_map(|s| &s.points)
            .filter(|p| p.0 >= 13_000)
            .all(|p| p.1 == 0 && p.2 == 0));
    }

    #[test]
    fn adaptive_changes_become_bounded_events() {
        let mut h = History::default();
        let pair = |added, retired, action: Option<&str>| PairView {
            source: 1,
            destination: 2,
            groups: vec![1, 2],
            xi_bps: 1.0,
            zeta_bps: None,
            saturated: false,
            status: PairStatus::Ok,
            added,
            retired,
            last_action: action.map(str::to_owned),
        };
        h.observe_adaptive(1, &[pair(0, 0, None)]);
        assert!(h.view().events.is_empty(), "nothing happened yet");
        h.observe_adaptive(2, &[pair(1, 0, Some("added group 2"))]);
        h.observe_adaptive(3, &[pair(1, 0, Some("added group 2"))]);
        h.observe_adaptive(4, &[pair(1, 1, Some("retired group 2"))]);
        h.observe_adaptive(5, &[pair(1, 1, Some("refused: no free id"))]);
        let kinds: Vec<_> = h
            .view()
            .events
            .iter()
            .map(|e| (e.at_ms, e.kind.clone()))
            .collect();
        assert_eq!(
            kinds,
            [
                (2, "added".to_owned()),
                (4, "retired".to_owned()),
                (5, "note".to_owned())
            ]
        );
        for i in 0..(MAX_EVENTS as u64 * 3) {
            h.observe_adaptive(10 + i, &[pair(2 + i, 1, Some("added"))]);
        }
        let events = h.view().events;
        assert_eq!(events.len(), MAX_EVENTS);
        assert_eq!(events.last().unwrap().at_ms, 10 + MAX_EVENTS as u64 * 3 - 1);
    }
}
