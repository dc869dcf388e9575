//! The SDC's measurement feed of the automatic path configuration (seed 000 §IV: "the SDC
//! measures ... the PC computes the path groups from the measurements"): builds
//! [`Measurements`] (available rate and one-way delay per directed WAN hop) for
//! [`crate::path_config`] from what `ssc` already collects.
//!
//! **Rate.** Two bounds per hop `from → to`, the smaller wins:
//! - *Ports* (OVS port statistics, polled by the SDC): the load on a WAN port that is not MMS
//!   tunnel traffic is the port's rate (`wan{k}` tx for the uplink, rx for the downlink) minus
//!   the rates of the member paths over it (per-member swap flow counters, both directions).
//!   The hop's bound is `capacity − other load` of its sending and of its receiving port.
//!   This sees only traffic that passes the gateway's OVS (other traffic of the branch).
//! - *Carried while limited* (the gateways' group reports, [`crate::wrr::Observation`], with the
//!   per-member rates of the swap flow counters): while a group is limited by its paths
//!   (saturated, or its sockets hold ≥ `limited_backlog_s` of data not in flight, as for the
//!   adaptive groups), each member path carries what its bottleneck lets through, so every hop
//!   of the member is bounded by the member's rate. This is what sees congestion beyond the
//!   gateway (another customer on the ISP's link, the emulator's background). Per hop an EWMA
//!   of these rates (weight 1/2; 0 at once when a member carried nothing: dead) is kept for
//!   [`MEMORY`], and its peak.
//!
//! A hop never carried while limited has no measured rate of its own: it is assumed as good as
//! a typical hop measured within [`MEMORY`] (the median of their peaks), so an unused path is
//! neither preferred for being unknown nor shunned; with nothing measured only the ports bound it.
//! Right after a group's members change its member rates still belong to the old paths: the
//! group is ignored for [`SETTLE`].
//!
//! **Delay.** [`HopMeter::observe_rtt`] takes a member path's round-trip time: half of it is
//! the one-way delay of a direct path's hop; for a path through transits, the hop left unknown
//! gets the rest when the others are known. The gateways do not report per-subflow RTTs yet,
//! so in `ssc` the delays stay unmeasured and the MDI check does not apply (docs/ssc.md).
//!
//! Pure: time is a parameter, inputs are plain values (see [`loads_from_stats`]).
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::inventory::{BranchId, Inventory, PortIndex, PortRef};
use crate::path_config::{HopEstimate, Measurements};
use crate::path_group::{MemberId, MemberPath, PathGroupId, PathGroups};
use crate::sdc::StatsView;
use crate::settings::AdaptiveSettings;
use crate::swap::WAN_OFPORT_BASE;
use crate::wrr::Observation;

/// How long a hop's rate carried while limited (and its peak) is remembered: 2 minutes, so a
/// congested hop a group just left is not taken again at once (no one measures it meanwhile).
pub const MEMORY: Duration = Duration::from_secs(120);

/// After a group's members changed, its member rates are ignored this long: 3 report intervals
/// (the old connections' counters, the new ones' slow start).
pub const SETTLE: Duration = Duration::from_secs(6);

/// The load on one WAN port (OVS port counters of `wan{k}`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PortLoad {
    /// The port.
    pub port: PortRef,
    /// Sent into the WAN (uplink), bit/s.
    pub tx_bps: f64,
    /// Received from the WAN (downlink), bit/s.
    pub rx_bps: f64,
}

/// The rate of one member path (its source and destination swap flows).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemberLoad {
    /// A.
    pub source: BranchId,
    /// B.
    pub destination: BranchId,
    /// G.
    pub group: PathGroupId,
    /// S.
    pub member: MemberId,
    /// A → B, bit/s.
    pub forward_bps: f64,
    /// B → A (acks, replies), bit/s.
    pub reverse_bps: f64,
}

/// One round of inputs.
#[derive(Clone, Debug, Default)]
pub struct Sample {
    /// WAN port loads.
    pub ports: Vec<PortLoad>,
    /// Member path rates.
    pub members: Vec<MemberLoad>,
    /// Groups limited by their paths in their last fresh report.
    pub limited: BTreeSet<(BranchId, BranchId, PathGroupId)>,
}

/// Port and member loads from the SDC's view (`wan{k}` ports of connected switches only).
pub fn loads_from_stats(view: &StatsView) -> (Vec<PortLoad>, Vec<MemberLoad>) {
    let mut ports = Vec::new();
    for b in view.branches.iter().filter(|b| b.connected) {
        let Ok(branch) = BranchId::new(b.branch) else {
            continue;
        };
        for p in &b.ports {
            let Some(k) = p.port.checked_sub(WAN_OFPORT_BASE) else {
                continue;
            };
            let Some(index) = u8::try_from(k).ok().and_then(|k| PortIndex::new(k).ok()) else {
                continue;
            };
            ports.push(PortLoad {
                port: PortRef::new(branch, index),
                tx_bps: p.tx_bits_per_s,
                rx_bps: p.rx_bits_per_s,
            });
        }
    }
    let members = view
        .members
        .iter()
        .filter_map(|m| {
            Some(MemberLoad {
                source: BranchId::new(m.source).ok()?,
                destination: BranchId::new(m.destination).ok()?,
                group: PathGroupId::new(m.group).ok()?,
                member: MemberId::new(m.member).ok()?,
                forward_bps: m.traffic.forward_bits_per_s,
                reverse_bps: m.traffic.reverse_bits_per_s,
            })
        })
        .collect();
    (ports, members)
}

/// The groups limited by their paths in a fresh report (within `max_report_age_s`): saturated,
/// or holding at least `limited_backlog_s` of data not in flight (the adaptive groups' rule).
pub fn limited_groups(
    now: Instant,
    settings: &AdaptiveSettings,
    obs: &BTreeMap<(BranchId, BranchId, PathGroupId), Observation>,
) -> BTreeSet<(BranchId, BranchId, PathGroupId)> {
    let max_age = Duration::try_from_secs_f64(settings.max_report_age_s).unwrap_or(Duration::MAX);
    obs.iter()
        .filter(|(_, o)| {
            o.at.is_some_and(|at| now.saturating_duration_since(at) <= max_age)
                && o.sample.is_some_and(|smp| {
                    smp.saturated
                        || smp
                            .backlog_s
                            .is_some_and(|b| b >= settings.limited_backlog_s)
                })
        })
        .map(|(k, _)| *k)
        .collect()
}

#[derive(Clone, Copy, Debug)]
struct Carried {
    last_kbps: u64,
    peak_kbps: u64,
    at: Instant,
}

/// Builds [`Measurements`] from successive samples.
#[derive(Clone, Debug, Default)]
pub struct HopMeter {
    /// Per hop: the port bound of the last sample, kbit/s.
    port_bound: BTreeMap<(PortRef, PortRef), u64>,
    /// Per hop: carried while limited.
    carried: BTreeMap<(PortRef, PortRef), Carried>,
    /// Per hop: one-way delay, µs, and when.
    delay: BTreeMap<(PortRef, PortRef), (u64, Instant)>,
    /// Per group: its members when last seen, and until when its rates are ignored.
    seen: BTreeMap<(BranchId, BranchId, PathGroupId), (Vec<MemberPath>, Instant)>,
}

fn kbps(bps: f64) -> u64 {
    if bps.is_finite() && bps > 0.0 {
        (bps / 1000.0) as u64
    } else {
        0
    }
}

impl HopMeter {
    /// Nothing measured.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one sample at `now` against the catalog's inventory and groups.
    pub fn observe(
        &mut self,
        now: Instant,
        inventory: &Inventory,
        groups: &PathGroups,
        sample: &Sample,
    ) {
        // Groups whose composition changed: ignore them for SETTLE.
        let mut current = BTreeSet::new();
        for g in groups.groups() {
            let key = (g.source, g.destination, g.id);
            current.insert(key);
            let members: Vec<MemberPath> = g.members.values().cloned().collect();
            match self.seen.get_mut(&key) {
                Some((m, until)) if *m != members => {
                    *m = members;
                    *until = now + SETTLE;
                }
                Some(_) => {}
                None => {
                    self.seen.insert(key, (members, now));
                }
            }
        }
        self.seen.retain(|k, _| current.contains(k));

        // MMS load per port and direction, and the members carried while limited.
        let mut mms_up: BTreeMap<PortRef, f64> = BTreeMap::new();
        let mut mms_down: BTreeMap<PortRef, f64> = BTreeMap::new();
        for m in &sample.members {
            let Some(path) = groups
                .group(m.source, m.destination, m.group)
                .and_then(|g| g.members.get(&m.member))
            else {
                continue;
            };
            for h in path.hops() {
                *mms_up.entry(h.from).or_default() += m.forward_bps.max(0.0);
                *mms_down.entry(h.to).or_default() += m.forward_bps.max(0.0);
                *mms_up.entry(h.to).or_default() += m.reverse_bps.max(0.0);
                *mms_down.entry(h.from).or_default() += m.reverse_bps.max(0.0);
            }
            let key = (m.source, m.destination, m.group);
            let settled = self.seen.get(&key).is_some_and(|(_, until)| now >= *until);
            if settled && sample.limited.contains(&key) {
                let rate = kbps(m.forward_bps);
                for h in path.hops() {
                    let c = self.carried.entry((h.from, h.to)).or_insert(Carried {
                        last_kbps: rate,
                        peak_kbps: rate,
                        at: now,
                    });
                    let stale = now.saturating_duration_since(c.at) > MEMORY;
                    // EWMA of weight 1/2 (one report's noise, one burst into a queue); a path
                    // that carried nothing at all while its group was limited is dead now.
                    c.last_kbps = if rate == 0 || stale {
                        rate
                    } else {
                        c.last_kbps / 2 + rate / 2
                    };
                    c.peak_kbps = if stale {
                        c.last_kbps
                    } else {
                        c.peak_kbps.max(c.last_kbps)
                    };
                    c.at = now;
                }
            }
        }

        // Port bounds: capacity minus the load that is not ours.
        let cap = |p: PortRef| {
            inventory
                .port(p)
                .map_or(0, |w| u64::from(w.capacity_mbps) * 1000)
        };
        let mut up: BTreeMap<PortRef, u64> = BTreeMap::new();
        let mut down: BTreeMap<PortRef, u64> = BTreeMap::new();
        for l in &sample.ports {
            if inventory.port(l.port).is_none() {
                continue;
            }
            let other_up = l.tx_bps - mms_up.get(&l.port).copied().unwrap_or(0.0);
            let other_down = l.rx_bps - mms_down.get(&l.port).copied().unwrap_or(0.0);
            up.insert(l.port, cap(l.port).saturating_sub(kbps(other_up)));
            down.insert(l.port, cap(l.port).saturating_sub(kbps(other_down)));
        }
        self.port_bound.clear();
        for (&from, &u) in &up {
            for (&to, &d) in &down {
                if from.branch != to.branch && inventory.can_hop(from, to) {
                    self.port_bound.insert((from, to), u.min(d));
                }
            }
        }
        self.carried
            .retain(|_, c| now.saturating_duration_since(c.at) <= MEMORY);
        self.delay
            .retain(|_, (_, at)| now.saturating_duration_since(*at) <= MEMORY);
    }

    /// Takes a member path's round-trip time (µs) at `now`.
    pub fn observe_rtt(&mut self, now: Instant, path: &MemberPath, rtt_us: u64) {
        let one_way = rtt_us / 2;
        let hops = path.hops();
        let known: u64 = hops
            .iter()
            .filter_map(|h| self.delay.get(&(h.from, h.to)).map(|(d, _)| *d))
            .sum();
        let unknown: Vec<_> = hops
            .iter()
            .filter(|h| !self.delay.contains_key(&(h.from, h.to)))
            .collect();
        match (hops.as_slice(), unknown.as_slice()) {
            ([h], _) => {
                self.delay.insert((h.from, h.to), (one_way, now));
            }
            (_, [h]) => {
                self.delay
                    .insert((h.from, h.to), (one_way.saturating_sub(known), now));
            }
            _ => {}
        }
    }

    /// The measurements at `now`: per hop the smaller of the port bound and the rate carried
    /// while limited (or the best peak for a hop never measured so), and the delay.
    pub fn measurements(&self, now: Instant, inventory: &Inventory) -> Measurements {
        let fresh = |at: Instant| now.saturating_duration_since(at) <= MEMORY;
        // The median peak: one hop's burst does not make every unknown hop look better.
        let mut peaks: Vec<u64> = self
            .carried
            .values()
            .filter(|c| fresh(c.at))
            .map(|c| c.peak_kbps)
            .collect();
        peaks.sort_unstable();
        let prior = peaks.get(peaks.len() / 2).copied();
        let ports: Vec<PortRef> = inventory
            .branches()
            .flat_map(|b| b.wan.iter().map(move |w| PortRef::new(b.id, w.port)))
            .collect();
        let mut keys: BTreeSet<(PortRef, PortRef)> = self.port_bound.keys().copied().collect();
        keys.extend(self.carried.keys().copied());
        keys.extend(self.delay.keys().copied());
        for &from in &ports {
            for &to in &ports {
                if from.branch != to.branch && inventory.can_hop(from, to) {
                    keys.insert((from, to));
                }
            }
        }
        let mut m = Measurements::new();
        for key in keys {
            let carried = self
                .carried
                .get(&key)
                .filter(|c| fresh(c.at))
                .map(|c| c.last_kbps)
                .or(prior);
            let bound = self.port_bound.get(&key).copied();
            let available_kbps = match (bound, carried) {
                (Some(b), Some(c)) => Some(b.min(c)),
                (b, c) => b.or(c),
            };
            let delay_us = self
                .delay
                .get(&key)
                .filter(|(_, at)| fresh(*at))
                .map(|(d, _)| *d);
            m.set(
                key.0,
                key.1,
                HopEstimate {
                    available_kbps,
                    delay_us,
                },
            );
        }
        m
    }
}

#[cfg(test)]
#[path = "measure_tests.rs"]
pub(crate) mod tests;
