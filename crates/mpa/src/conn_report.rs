//! What a gateway measures on its tunnel connections and reports per path group: the figures the
//! agent's `throughput` policy and the controller's capacity estimate (SDC statistics, seed 000
//! §II-C; `docs/ssc.md` "WRR weights", `docs/ARCHITECTURE.md` "the in-flight rule") are made of.
//!
//! The driver (`mmsg`) samples the sockets (`MPTCP_TCPINFO`, `TIOCOUTQ`, its own byte counters)
//! and hands plain numbers here; this module decides what they mean. No IO, no clock reads: time is
//! a parameter.
//!
//! - Per subflow: a [`SubflowSample`]; per connection: [`window_rate_bps`], [`inflight_rate_bps`]
//!   and [`queued_bytes`] over its subflows' samples (once a second).
//! - Per path group: [`group_report`] over a [`ConnSample`] per connection (the report to the
//!   controller, `gwchan::GroupReport`), and [`GroupRates`], the measured send rate of each group
//!   for the agent (`Agent::set_group_rate`), fed every [`crate::path_group::RATE_WINDOW`].

use std::collections::BTreeMap;
use std::time::Instant;

use crate::gwchan::GroupReport;
use crate::path_group::RateEstimator;
use crate::{BranchId, Class, PathGroupId};

/// One subflow's TCP figures as the driver sampled them (`tcp_info` of the subflow).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SubflowSample {
    /// The subflow is in TCP state ESTABLISHED (only those count).
    pub established: bool,
    /// `tcpi_unacked`: segments in flight.
    pub unacked: u32,
    /// `tcpi_snd_cwnd`: the congestion window, segments.
    pub cwnd: u32,
    /// `tcpi_snd_mss`: bytes per segment.
    pub mss: u32,
    /// `tcpi_rtt`: the smoothed RTT, microseconds (0: no sample yet).
    pub srtt_us: u32,
    /// `tcpi_notsent_bytes`: bytes in the subflow's send queue not sent yet.
    pub notsent: u32,
    /// `tcpi_min_rtt`: the smallest RTT the kernel saw on it (a 300 s window), microseconds (0:
    /// none yet).
    pub min_rtt_us: u32,
}

impl SubflowSample {
    /// `segments · mss · 8 / srtt` in bit/s (saturating; the caller checked `srtt_us > 0`).
    fn rate_bps(&self, segments: u32) -> u64 {
        let bits = u128::from(segments) * u128::from(self.mss) * 8 * 1_000_000;
        u64::try_from(bits / u128::from(self.srtt_us.max(1))).unwrap_or(u64::MAX)
    }

    /// Established with an RTT sample: its window says something about its path.
    fn measured(&self) -> bool {
        self.established && self.srtt_us > 0
    }
}

/// The rate the subflows' congestion windows allow, bit/s: Σ `cwnd · mss · 8 / srtt` over the
/// established subflows with an RTT sample. A path flooded by someone else's traffic shows up as a
/// small window over a long (queued) RTT, before and whether or not the tunnel saturates it; the
/// controller uses it as the group's available capacity (`controller::capacity`).
pub fn window_rate_bps(subflows: &[SubflowSample]) -> u64 {
    subflows
        .iter()
        .filter(|t| t.measured())
        .fold(0u64, |sum, t| sum.saturating_add(t.rate_bps(t.cwnd)))
}

/// The rate of what the subflows have in flight now, bit/s: Σ `min(unacked, cwnd) · mss · 8 /
/// srtt` over the established subflows with an RTT sample (the part of [`window_rate_bps`] in
/// use). A connection whose paths limit it keeps its windows full; one that carries less than
/// they allow keeps them partly empty, and its window rate (the cwnd it grew earlier over the
/// RTT of an empty queue) overstates what its paths carry.
pub fn inflight_rate_bps(subflows: &[SubflowSample]) -> u64 {
    subflows
        .iter()
        .filter(|t| t.measured())
        .fold(0u64, |sum, t| {
            sum.saturating_add(t.rate_bps(t.unacked.min(t.cwnd)))
        })
}

/// The standing queue of a connection's paths: the smallest `srtt − min_rtt` among its
/// established subflows that have data in flight, with that subflow's minimum RTT.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StandingQueue {
    /// Smoothed RTT above the minimum, microseconds.
    pub queue_us: u32,
    /// The minimum RTT it is measured against, microseconds (> 0).
    pub base_rtt_us: u32,
}

/// The queue every path of a connection holds now ([`StandingQueue`]; `None`: no subflow with
/// data in flight and both RTTs measured). The *least* queued busy subflow: when even that one
/// waits behind a standing queue, every path the connection can send on is full (by its own
/// traffic or someone else's), so what it carries is what its paths give it. That holds where the
/// other capacity signals do not: a flooded path that the tunnel sends only a trickle on (its
/// share of a striped flow fits in what the flood leaves) loses nothing and never blocks the
/// writer, yet its queue delays the whole striped flow (`controller::capacity`).
pub fn standing_queue(subflows: &[SubflowSample]) -> Option<StandingQueue> {
    subflows
        .iter()
        .filter(|t| t.measured() && t.unacked > 0 && t.min_rtt_us > 0)
        .map(|t| StandingQueue {
            queue_us: t.srtt_us.saturating_sub(t.min_rtt_us),
            base_rtt_us: t.min_rtt_us,
        })
        .min_by_key(|q| q.queue_us)
}

/// The standing queue a group report carries (`queue_delay_us`, `base_rtt_us`; `None` when
/// absent, when the minimum RTT is 0, or when either does not fit in µs of `u32`).
pub fn reported_queue(g: &GroupReport) -> Option<StandingQueue> {
    let queue_us = u32::try_from(g.queue_delay_us?).ok()?;
    let base_rtt_us = u32::try_from(g.base_rtt_us?).ok().filter(|b| *b > 0)?;
    Some(StandingQueue {
        queue_us,
        base_rtt_us,
    })
}

/// What an MPTCP socket holds that is not in flight: `socket_unacked` (its bytes not acked at the
/// MPTCP level, `TIOCOUTQ`; 0 when unknown) minus its established subflows' unacked segments ×
/// mss. (`SIOCOUTQNSD` is ~0 on MPTCP sockets: the data moves on to the subflows' queues at once,
/// measured.)
pub fn queued_bytes(socket_unacked: u64, subflows: &[SubflowSample]) -> u64 {
    let in_flight = subflows
        .iter()
        .filter(|t| t.established)
        .fold(0u64, |sum, t| {
            sum.saturating_add(u64::from(t.unacked) * u64::from(t.mss))
        });
    socket_unacked.saturating_sub(in_flight)
}

/// What an MPTCP socket holds for the data level alone: bytes a subflow sent and had
/// acknowledged that the peer has not acknowledged at the data level yet, because they wait
/// behind a gap on another subflow (a segment lost there and not yet repaired, head of line).
/// That is `socket_unacked` (`TIOCOUTQ`) minus what its established subflows have in flight
/// (unacked segments × mss) or queued unsent. 0 when unknown or when the samples, taken a
/// moment apart, disagree.
pub fn held_bytes(socket_unacked: u64, subflows: &[SubflowSample]) -> u64 {
    let unsent = subflows
        .iter()
        .filter(|t| t.established)
        .fold(0u64, |sum, t| sum.saturating_add(u64::from(t.notsent)));
    queued_bytes(socket_unacked, subflows).saturating_sub(unsent)
}

/// One connection's figures for [`group_report`] (the driver's counters and last samples).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnSample {
    /// The remote branch.
    pub branch: BranchId,
    /// The path group.
    pub group: PathGroupId,
    /// Its class (a group has connections of each; with `connections_per_group` several of
    /// one class).
    pub class: Class,
    /// The connection is up.
    pub up: bool,
    /// Frame bytes its writer wrote so far.
    pub sent_bytes: u64,
    /// Microseconds its writer spent blocked in socket writes so far.
    pub busy_us: u64,
    /// [`queued_bytes`] of its socket, last sample.
    pub queued_bytes: u64,
    /// [`window_rate_bps`] of its subflows, last sample (0 while down).
    pub window_bps: u64,
    /// [`inflight_rate_bps`] of its subflows, last sample (0 while down).
    pub inflight_bps: u64,
    /// Σ `tcpi_bytes_acked` of its subflows, last sample.
    pub acked_bytes: u64,
    /// Σ `tcpi_bytes_retrans` of its subflows, last sample.
    pub retrans_bytes: u64,
    /// [`standing_queue`] of its subflows, last sample (`None`: nothing in flight, or down).
    pub standing_queue: Option<StandingQueue>,
}

/// The per-group report of a gateway's connections (what [`group_report`] returns).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupSummary {
    /// One report per (remote branch, path group), in that order.
    pub groups: Vec<GroupReport>,
    /// Connections up.
    pub conns_up: u32,
    /// Connections configured.
    pub conns_total: u32,
}

/// Per path group (remote branch, group): the byte, busy and queue figures summed over its
/// connections, `up` when every class has a connection up; the transport figures (window,
/// in-flight rate, acked, retransmitted) are its busiest class's (most bytes sent; a tie goes to
/// the later one), summed over that class's connections (`connections_per_group` share the
/// group's paths side by side), and its standing queue the least queued of them: the class
/// connections of a group share its paths, and an idle one's window (initial cwnd over a
/// keepalive RTT) says nothing about them.
pub fn group_report(conns: impl IntoIterator<Item = ConnSample>) -> GroupSummary {
    /// One class of a group: bytes sent, any connection up, and the summed transport figures.
    #[derive(Default)]
    struct ClassSum {
        sent: u64,
        up: bool,
        window_bps: u64,
        inflight_bps: u64,
        acked_bytes: u64,
        retrans_bytes: u64,
        queue: Option<StandingQueue>,
    }
    let mut groups: BTreeMap<(u8, u8), (GroupReport, BTreeMap<Class, ClassSum>)> = BTreeMap::new();
    let (mut up, mut total) = (0u32, 0u32);
    for c in conns {
        total += 1;
        up += u32::from(c.up);
        let (r, classes) = groups.entry((c.branch.get(), c.group.get())).or_insert((
            GroupReport {
                branch: c.branch.get(),
                group: c.group.get(),
                ..GroupReport::default()
            },
            BTreeMap::new(),
        ));
        r.bytes_tx += c.sent_bytes;
        r.busy_us += c.busy_us;
        r.queued_bytes += c.queued_bytes;
        let s = classes.entry(c.class).or_default();
        s.sent = s.sent.saturating_add(c.sent_bytes);
        s.up |= c.up;
        s.window_bps = s.window_bps.saturating_add(c.window_bps);
        s.inflight_bps = s.inflight_bps.saturating_add(c.inflight_bps);
        s.acked_bytes = s.acked_bytes.saturating_add(c.acked_bytes);
        s.retrans_bytes = s.retrans_bytes.saturating_add(c.retrans_bytes);
        s.queue = match (s.queue, c.standing_queue) {
            (Some(a), Some(b)) => Some(if b.queue_us < a.queue_us { b } else { a }),
            (a, b) => a.or(b),
        };
    }
    let groups = groups
        .into_values()
        .map(|(mut r, classes)| {
            r.up = classes.values().all(|s| s.up);
            let mut busiest: Option<&ClassSum> = None;
            for s in classes.values() {
                if busiest.is_none_or(|b| s.sent >= b.sent) {
                    busiest = Some(s);
                }
            }
            if let Some(s) = busiest {
                r.window_bps = s.window_bps;
                r.inflight_bps = Some(s.inflight_bps);
                r.acked_bytes = s.acked_bytes;
                r.retrans_bytes = s.retrans_bytes;
                r.queue_delay_us = s.queue.map(|q| u64::from(q.queue_us));
                r.base_rtt_us = s.queue.map(|q| u64::from(q.base_rtt_us));
            }
            r
        })
        .collect();
    GroupSummary {
        groups,
        conns_up: up,
        conns_total: total,
    }
}

/// Per path group: the measured rate (what its connections carried), for the agent's
/// `throughput` selection policy (`Agent::set_group_rate`).
#[derive(Debug, Default)]
pub struct GroupRates {
    groups: BTreeMap<(BranchId, PathGroupId), (RateEstimator, u64)>,
}

impl GroupRates {
    /// Feeds the bytes sent so far by every connection (`(branch, group, sent)`, summed per
    /// group here) at `now`; returns `(branch, group, bytes/s)` for every group whose rate window
    /// closed. A group seen the first time starts from its current total.
    pub fn handle_sent(
        &mut self,
        now: Instant,
        sent: impl IntoIterator<Item = (BranchId, PathGroupId, u64)>,
    ) -> Vec<(BranchId, PathGroupId, u64)> {
        let mut totals: BTreeMap<(BranchId, PathGroupId), u64> = BTreeMap::new();
        for (b, g, bytes) in sent {
            let t = totals.entry((b, g)).or_default();
            *t = t.saturating_add(bytes);
        }
        let mut out = Vec::new();
        for (key, total) in totals {
            let (est, last) = self
                .groups
                .entry(key)
                .or_insert((RateEstimator::default(), total));
            let delta = total.saturating_sub(*last);
            *last = total;
            if let Some(rate) = est.record(now, delta) {
                out.push((key.0, key.1, rate));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use std::time::Duration;

    use super::*;

    fn sf(established: bool, unacked: u32, cwnd: u32, srtt_us: u32) -> SubflowSample {
        SubflowSample {
            established,
            unacked,
            cwnd,
            mss: 1000,
            srtt_us,
            notsent: 0,
            min_rtt_us: 0,
        }
    }

    #[test]
    fn standing_queue_is_the_least_queued_busy_subflows() {
        let q = |srtt, min| SubflowSample {
            min_rtt_us: min,
            ..sf(true, 4, 10, srtt)
        };
        // Three busy subflows: 175 ms, 60 ms and 90 ms above their minimum; the idle one (no
        // segment in flight), the closed one and the one without a minimum do not count.
        let s = [
            q(195_000, 20_000),
            q(80_000, 20_000),
            q(130_000, 40_000),
            SubflowSample {
                unacked: 0,
                ..q(20_000, 20_000)
            },
            SubflowSample {
                established: false,
                ..q(20_000, 20_000)
            },
            q(21_000, 0),
        ];
        assert_eq!(
            standing_queue(&s),
            Some(StandingQueue {
                queue_us: 60_000,
                base_rtt_us: 20_000
            })
        );
        // A path whose smoothed RTT is below the kernel's minimum (samples a moment apart): 0.
        assert_eq!(
            standing_queue(&[q(19_000, 20_000)]).map(|q| q.queue_us),
            Some(0)
        );
        assert_eq!(standing_queue(&s[3..]), None);
        assert_eq!(standing_queue(&[]), None);
    }

    #[test]
    fn window_rate_sums_established_subflows_with_an_rtt() {
        // 10 segments × 1000 B × 8 / 10 ms = 8 Mbit/s; 20 × 1000 × 8 / 40 ms = 4 Mbit/s.
        let s = [sf(true, 0, 10, 10_000), sf(true, 0, 20, 40_000)];
        assert_eq!(window_rate_bps(&s), 12_000_000);
        // Not established, or no RTT sample yet: not counted.
        let s = [sf(false, 5, 10, 10_000), sf(true, 5, 10, 0)];
        assert_eq!(window_rate_bps(&s), 0);
        assert_eq!(inflight_rate_bps(&s), 0);
        assert_eq!(window_rate_bps(&[]), 0);
    }

    #[test]
    fn inflight_rate_is_the_used_part_of_the_window() {
        // 5 of 10 segments in flight: half the window rate; more unacked than cwnd: the window.
        let s = [sf(true, 5, 10, 10_000)];
        assert_eq!(inflight_rate_bps(&s), 4_000_000);
        let s = [sf(true, 30, 10, 10_000)];
        assert_eq!(inflight_rate_bps(&s), window_rate_bps(&s));
    }

    #[test]
    fn rates_saturate_instead_of_overflowing() {
        let s = [SubflowSample {
            established: true,
            unacked: u32::MAX,
            cwnd: u32::MAX,
            mss: u32::MAX,
            srtt_us: 1,
            notsent: u32::MAX,
            min_rtt_us: u32::MAX,
        }; 2];
        assert_eq!(window_rate_bps(&s), u64::MAX);
        assert_eq!(inflight_rate_bps(&s), u64::MAX);
        assert_eq!(standing_queue(&s).map(|q| q.queue_us), Some(0));
    }

    #[test]
    fn queued_bytes_is_what_is_not_in_flight() {
        // 3 + 2 segments of 1000 B in flight on established subflows; the closed one's not.
        let s = [sf(true, 3, 10, 1), sf(true, 2, 10, 0), sf(false, 7, 10, 1)];
        assert_eq!(queued_bytes(12_000, &s), 7_000);
        // Less held than in flight (samples a moment apart), or unknown (0): 0.
        assert_eq!(queued_bytes(4_000, &s), 0);
        assert_eq!(queued_bytes(0, &s), 0);
        assert_eq!(queued_bytes(500, &[]), 500);
    }

    #[test]
    fn held_bytes_is_what_waits_for_the_data_level_ack_alone() {
        // In flight 3 + 2 segments of 1000 B, 1500 B unsent on the first subflow; the closed
        // subflow counts for nothing.
        let mut s = [sf(true, 3, 10, 1), sf(true, 2, 10, 1), sf(false, 7, 10, 1)];
        s[0].notsent = 1_500;
        assert_eq!(held_bytes(20_000, &s), 13_500);
        // Nothing waits behind a gap: all of it is on the subflows; samples a moment apart may
        // see less in the socket than on the subflows: 0, never an underflow.
        assert_eq!(held_bytes(6_500, &s), 0);
        assert_eq!(held_bytes(1_000, &s), 0);
        assert_eq!(held_bytes(0, &[]), 0);
        assert_eq!(
            held_bytes(u64::MAX, &[sf(true, u32::MAX, 1, 1)]),
            u64::MAX - u64::from(u32::MAX) * 1000
        );
    }

    fn conn(group: u8, up: bool, sent: u64, window: u64) -> ConnSample {
        ConnSample {
            branch: BranchId::new(2).unwrap(),
            group: PathGroupId::new(group).unwrap(),
            class: Class::TypeII,
            up,
            sent_bytes: sent,
            busy_us: 10,
            queued_bytes: 100,
            window_bps: window,
            inflight_bps: window / 2,
            acked_bytes: window * 3,
            retrans_bytes: window / 10,
            standing_queue: (window > 100).then_some(StandingQueue {
                queue_us: 70_000,
                base_rtt_us: 20_000,
            }),
        }
    }

    #[test]
    fn group_report_sums_and_takes_the_busiest_connections_transport_figures() {
        let type1 = |c: ConnSample| ConnSample {
            class: Class::TypeI,
            ..c
        };
        let r = group_report([
            type1(conn(0, true, 5_000, 1_000)),
            conn(0, true, 9_000, 7_000),
            type1(conn(1, true, 0, 50)),
            conn(1, false, 0, 60),
        ]);
        assert_eq!((r.conns_up, r.conns_total), (3, 4));
        assert_eq!(r.groups.len(), 2);
        let g0 = &r.groups[0];
        assert_eq!((g0.branch, g0.group, g0.up), (2, 0, true));
        assert_eq!(g0.bytes_tx, 14_000);
        assert_eq!(g0.busy_us, 20);
        assert_eq!(g0.queued_bytes, 200);
        // The busiest (9000 B sent) class's figures, not the idle one's.
        assert_eq!(g0.window_bps, 7_000);
        assert_eq!(g0.inflight_bps, Some(3_500));
        assert_eq!(g0.acked_bytes, 21_000);
        assert_eq!(g0.retrans_bytes, 700);
        assert_eq!(
            (g0.queue_delay_us, g0.base_rtt_us),
            (Some(70_000), Some(20_000))
        );
        // What the controller reads back: the same queue.
        assert_eq!(
            reported_queue(g0),
            Some(StandingQueue {
                queue_us: 70_000,
                base_rtt_us: 20_000
            })
        );
        // A class with no connection up: the group is down; equal bytes sent: the later
        // class's figures.
        let g1 = &r.groups[1];
        assert!(!g1.up);
        assert_eq!(g1.window_bps, 60);
        assert_eq!((g1.queue_delay_us, g1.base_rtt_us), (None, None));
        assert_eq!(reported_queue(g1), None);
        let odd = |q, b| GroupReport {
            queue_delay_us: q,
            base_rtt_us: b,
            ..GroupReport::default()
        };
        assert_eq!(reported_queue(&odd(Some(1), Some(0))), None);
        assert_eq!(reported_queue(&odd(Some(u64::MAX), Some(1))), None);
        assert_eq!(reported_queue(&odd(Some(1), None)), None);
        assert_eq!(group_report([]), GroupSummary::default());
    }

    #[test]
    fn a_groups_connections_of_one_class_add_up_and_one_up_keeps_it_up() {
        // `connections_per_group` = 3: three Type II connections side by side on the same
        // paths, one of them down (redialling), beside an idle Type I one.
        let type1 = ConnSample {
            class: Class::TypeI,
            ..conn(0, true, 100, 50)
        };
        let q = |queue_us| {
            Some(StandingQueue {
                queue_us,
                base_rtt_us: 20_000,
            })
        };
        let r = group_report([
            type1,
            ConnSample {
                standing_queue: q(90_000),
                ..conn(0, true, 4_000, 3_000)
            },
            ConnSample {
                standing_queue: q(60_000),
                ..conn(0, true, 5_000, 4_000)
            },
            conn(0, false, 0, 0),
        ]);
        assert_eq!((r.conns_up, r.conns_total), (3, 4));
        let g = &r.groups[0];
        assert!(g.up, "every class has a connection up");
        assert_eq!(g.bytes_tx, 9_100);
        // The Type II pool's sums, not its busiest member's alone.
        assert_eq!(g.window_bps, 7_000);
        assert_eq!(g.inflight_bps, Some(3_500));
        assert_eq!(g.acked_bytes, 21_000);
        assert_eq!(g.retrans_bytes, 700);
        // The least queued of them.
        assert_eq!(g.queue_delay_us, Some(60_000));
    }

    #[test]
    fn group_rates_measure_what_the_connections_carried() {
        let b = BranchId::new(2).unwrap();
        let (g0, g1) = (PathGroupId::new(0).unwrap(), PathGroupId::new(1).unwrap());
        let t0 = Instant::now();
        let mut r = GroupRates::default();
        // First sight: the totals so far are the baseline, no window closed yet.
        assert!(r
            .handle_sent(t0, [(b, g0, 1_000_000), (b, g0, 5), (b, g1, 0)])
            .is_empty());
        // One second later: group 0 carried 2 MB over its two connections, group 1 nothing.
        let rates = r.handle_sent(
            t0 + Duration::from_secs(1),
            [(b, g0, 2_000_000), (b, g0, 1_000_005), (b, g1, 0)],
        );
        assert_eq!(rates, vec![(b, g0, 2_000_000), (b, g1, 0)]);
    }
}
