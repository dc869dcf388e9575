//! The multipath agent (MPA, seed 000 §II-B) sender-side decision for one packet, tying the
//! [`Classifier`] (TC), the [`FlowTable`] and one [`Scheduler`] per remote branch together.
//!
//! Call order for the driver: [`Agent::new`] from the validated config; per packet read from TUN,
//! [`Agent::route`] (→ which connection and class, or why to drop); on connection events
//! [`Agent::set_group_up`]; with measurements [`Agent::set_group_rate`]; at [`Agent::poll_timeout`],
//! [`Agent::handle_timeout`]. Then the packet goes to that connection's [`crate::queue`] and out through
//! [`crate::framing`].

use std::collections::BTreeMap;
use std::time::Instant;

use thiserror::Error;

use crate::classifier::{Classifier, FlowKey, PacketInfo, ParseError};
use crate::config::{Config, StripingConfig};
use crate::flow_table::{Assignment, FlowTable, MAX_FLOWS};
use crate::path_group::PathGroups;
use crate::scheduler::Scheduler;
use crate::{BranchId, Class, PathGroupId};

/// Where one packet goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The destination branch.
    pub branch: BranchId,
    /// The path group (the connection is (branch, group, class)).
    pub group: PathGroupId,
    /// Type I or Type II.
    pub class: Class,
    /// How the group was decided (for stats: new flows, moves, untracked).
    pub assignment: Assignment,
    /// The parsed header fields (`info.ect()` for the queue's ECN decision).
    pub info: PacketInfo,
    /// The flow's sequence number when it is striped (`group` then varies per packet, chosen by
    /// smooth WRR): the frame carries it with `FLAG_SEQ` and the receiver resequences.
    pub seq: Option<u32>,
    /// The flow's lane ([`crate::flow_table::FlowEntry::lane`]): which of the group's
    /// connections carries it (lane modulo their number). A flow the table does not remember
    /// (full) gets its 5-tuple's hash ([`crate::flow_table::FlowTable::assign`]).
    pub lane: u8,
}

/// Why a packet from TUN is not tunnelled (count per variant).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RouteError {
    /// Not a parseable IP packet (untrusted LAN input).
    #[error("malformed packet: {0}")]
    Malformed(#[from] ParseError),
    /// Type III: the destination is in no remote branch (should have been routed out a WAN port).
    #[error("destination is not in any remote branch (Type III)")]
    External,
    /// No path group towards the branch is up.
    #[error("no path group to branch {0} is up")]
    NoGroupUp(BranchId),
}

/// The sender-side MPA core.
#[derive(Debug, Clone)]
pub struct Agent {
    classifier: Classifier,
    flows: FlowTable,
    branches: BTreeMap<BranchId, Scheduler>,
    striping: Option<StripingConfig>,
}

impl Agent {
    /// Builds the core from a validated config. Every path group starts down.
    pub fn new(config: &Config) -> Self {
        let branches = config
            .remote
            .iter()
            .filter_map(|r| {
                let b = BranchId::new(r.id).ok()?;
                let groups = PathGroups::new(&r.path_groups);
                Some((b, Scheduler::new(groups, config.selection_policy)))
            })
            .collect();
        Agent {
            classifier: Classifier::new(config),
            flows: FlowTable::new(config.flow_idle_timeout(), MAX_FLOWS),
            branches,
            striping: config.striping.clone(),
        }
    }

    /// Applies a new config (a reload) **keeping the flow table**: the classifier and striping
    /// settings are replaced; towards a remote that stays, its groups keep their up state, rates
    /// and WRR credits ([`Scheduler::reconfigure`]), new groups start down, removed groups are
    /// gone (their flows move on their next packet, as for a group that went down); new remotes
    /// get a scheduler with every group down; removed remotes are forgotten. A flow whose group
    /// stays is never moved. Returns the (branch, group) pairs removed.
    pub fn reconfigure(&mut self, config: &Config) -> Vec<(BranchId, PathGroupId)> {
        let mut removed = Vec::new();
        let mut next = BTreeMap::new();
        for r in &config.remote {
            let Ok(b) = BranchId::new(r.id) else { continue };
            let sched = match self.branches.remove(&b) {
                Some(mut s) => {
                    for g in s.reconfigure(&r.path_groups, config.selection_policy) {
                        removed.push((b, g));
                    }
                    s
                }
                None => Scheduler::new(PathGroups::new(&r.path_groups), config.selection_policy),
            };
            next.insert(b, sched);
        }
        for (b, s) in std::mem::replace(&mut self.branches, next) {
            removed.extend(s.groups().iter().map(|g| (b, g.id)));
        }
        self.classifier = Classifier::new(config);
        self.flows.set_idle_timeout(config.flow_idle_timeout());
        self.striping = config.striping.clone();
        removed
    }

    /// Decides where one packet read from TUN goes (for a virtio frame, pass the IP packet after the
    /// virtio header).
    pub fn route(&mut self, now: Instant, packet: &[u8]) -> Result<Route, RouteError> {
        let c = self.classifier.classify(packet)?;
        let (Some(branch), Class::TypeI | Class::TypeII) = (c.dst_branch, c.class) else {
            return Err(RouteError::External);
        };
        let sched = self
            .branches
            .get_mut(&branch)
            .ok_or(RouteError::NoGroupUp(branch))?;
        let (mut group, assignment, lane) = self
            .flows
            .assign(now, c.info.flow, branch, packet.len(), sched)
            .ok_or(RouteError::NoGroupUp(branch))?;
        let mut seq = None;
        if let Some(st) = &self.striping {
            if stripes(st, c.class, &c.info) {
                seq = self.flows.stripe(&c.info.flow, st.threshold_bytes_per_s());
                if seq.is_some() {
                    // `assign` found an up group, so `select_packet` finds one too.
                    group = sched.select_packet().unwrap_or(group);
                }
            }
        }
        Ok(Route {
            branch,
            group,
            class: c.class,
            assignment,
            info: c.info,
            seq,
            lane,
        })
    }

    /// Marks a path group towards `branch` up or down (its connections established or lost);
    /// returns whether anything changed.
    pub fn set_group_up(&mut self, branch: BranchId, group: PathGroupId, up: bool) -> bool {
        self.branches
            .get_mut(&branch)
            .is_some_and(|s| s.set_up(group, up))
    }

    /// Records the measured throughput of a path group (for the `throughput` policy).
    pub fn set_group_rate(
        &mut self,
        branch: BranchId,
        group: PathGroupId,
        bytes_per_s: u64,
    ) -> bool {
        self.branches
            .get_mut(&branch)
            .is_some_and(|s| s.set_rate(group, bytes_per_s))
    }

    /// Records the measured round trip (µs, 0: unknown) of a path group towards `branch`, for
    /// the low-delay flows ([`Agent::prefer_low_delay`]).
    pub fn set_group_delay(&mut self, branch: BranchId, group: PathGroupId, delay_us: u32) -> bool {
        self.branches
            .get_mut(&branch)
            .is_some_and(|s| s.set_delay(group, delay_us))
    }

    /// Keeps flow `key` on the lowest-delay group towards its destination branch
    /// ([`FlowTable::prefer_low_delay`]). Called with the reverse of every flow this gateway
    /// starts resequencing. `false` when `key`'s destination is in no remote branch, no group to
    /// it is up, or the table is full.
    pub fn prefer_low_delay(&mut self, now: Instant, key: FlowKey) -> bool {
        let Some(branch) = self.classifier.route(key.dst) else {
            return false;
        };
        let Some(sched) = self.branches.get_mut(&branch) else {
            return false;
        };
        self.flows.prefer_low_delay(now, key, branch, sched)
    }

    /// Changes the configured WRR weight of a path group towards `branch` (the controller
    /// published new weights); no flow moves. Returns `false` for an unknown branch or group.
    pub fn set_group_weight(&mut self, branch: BranchId, group: PathGroupId, weight: u32) -> bool {
        self.branches
            .get_mut(&branch)
            .is_some_and(|s| s.set_weight(group, weight))
    }

    /// The scheduler (and groups) towards `branch`.
    pub fn scheduler(&self, branch: BranchId) -> Option<&Scheduler> {
        self.branches.get(&branch)
    }

    /// The flow table.
    pub fn flows(&self) -> &FlowTable {
        &self.flows
    }

    /// The classifier.
    pub fn classifier(&self) -> &Classifier {
        &self.classifier
    }

    /// When [`Agent::handle_timeout`] should next run.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.flows.poll_timeout()
    }

    /// Runs due timers (idle flow expiry); returns how many flows were forgotten.
    pub fn handle_timeout(&mut self, now: Instant) -> usize {
        self.flows.handle_timeout(now)
    }
}

/// Whether a flow of `class` with these addresses may be striped (its class or its inner source
/// or destination is named in `[striping]`).
fn stripes(st: &StripingConfig, class: Class, info: &PacketInfo) -> bool {
    st.classes.contains(&class)
        || st
            .prefixes
            .iter()
            .any(|n| n.contains(&info.flow.src) || n.contains(&info.flow.dst))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> String {
        std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/mmsg-branch1.toml"
        ))
        .unwrap()
    }

    fn agent() -> Agent {
        Agent::new(&Config::parse(&example()).unwrap())
    }

    /// The example with `[striping]` for `table` (the example's groups 0 and 1 get weights 1 and 3).
    fn striping_agent(table: &str) -> Agent {
        let text = example()
            .replacen("id = 1\nweight = 1", "id = 1\nweight = 3", 1)
            .replace(
                "[classifier]",
                &format!("[striping]\n{table}\n\n[classifier]"),
            );
        let a = Agent::new(&Config::parse(&text).unwrap());
        assert!(a.striping.is_some());
        a
    }

    #[test]
    fn an_elephant_flow_is_striped_by_weight_and_numbered() {
        let t = Instant::now();
        let b2 = BranchId::new(2).unwrap();
        let mut a = striping_agent("classes = [\"type2\"]\nthreshold_kbit = 100");
        for g in 0..2 {
            a.set_group_up(b2, PathGroupId::new(g).unwrap(), true);
        }
        // 28-byte packets every 1 ms = 28 kB/s = 224 kbit/s > 100 kbit/s after the first window.
        let mut routes = Vec::new();
        for i in 0..500u32 {
            let now = t + std::time::Duration::from_millis(1) * i;
            routes.push(a.route(now, &udp(0, [198, 19, 2, 9], 1)).unwrap());
        }
        let striped: Vec<&Route> = routes.iter().filter(|r| r.seq.is_some()).collect();
        assert_eq!(
            routes.len() - striped.len(),
            100,
            "pinned until the first window closed"
        );
        let seqs: Vec<u32> = striped.iter().filter_map(|r| r.seq).collect();
        assert_eq!(seqs, (0..400).collect::<Vec<_>>());
        let on_1 = striped.iter().filter(|r| r.group.get() == 1).count();
        assert_eq!(on_1, 300, "weights 1:3");
        // A Type I flow (not in `classes`) and a slow Type II flow stay on one group.
        for i in 0..500u32 {
            let now = t + std::time::Duration::from_millis(1) * i;
            let r = a.route(now, &udp(0xB8, [198, 19, 2, 9], 2)).unwrap();
            assert_eq!(r.seq, None);
            let r = a.route(
                now + std::time::Duration::from_millis(500) * i,
                &udp(0, [198, 19, 2, 9], 3),
            );
            assert_eq!(r.unwrap().seq, None);
        }
    }

    #[test]
    fn striping_by_prefix_matches_either_direction() {
        let t = Instant::now();
        let b2 = BranchId::new(2).unwrap();
        let mut a = striping_agent("prefixes = [\"198.19.1.10/32\"]\nthreshold_kbit = 1");
        a.set_group_up(b2, PathGroupId::new(0).unwrap(), true);
        let mut last = None;
        for i in 0..200u32 {
            let now = t + std::time::Duration::from_millis(1) * i;
            last = a.route(now, &udp(0, [198, 19, 2, 9], 1)).unwrap().seq;
        }
        assert_eq!(last, Some(99), "source 198.19.1.10 is in the prefix");
        // Without `[striping]` nothing is ever striped.
        let mut plain = agent();
        plain.set_group_up(b2, PathGroupId::new(0).unwrap(), true);
        for i in 0..200u32 {
            let now = t + std::time::Duration::from_millis(1) * i;
            assert_eq!(
                plain.route(now, &udp(0, [198, 19, 2, 9], 1)).unwrap().seq,
                None
            );
        }
    }

    #[test]
    fn reconfigure_keeps_every_flow_whose_group_stays() {
        let t = Instant::now();
        let b2 = BranchId::new(2).unwrap();
        let mut a = agent();
        for g in 0..2 {
            a.set_group_up(b2, PathGroupId::new(g).unwrap(), true);
        }
        let before: Vec<PathGroupId> = (1..=20)
            .map(|p| a.route(t, &udp(0, [198, 19, 2, 9], p)).unwrap().group)
            .collect();
        // Group 1 weighs 5 now and group 3 is new.
        let text = example()
            .replacen("id = 1\nweight = 1", "id = 1\nweight = 5", 1)
            .replace(
                "# The traffic classifier",
                "[[remote.path_groups]]\nid = 3\nweight = 2\n\n# The traffic classifier",
            );
        let config = Config::parse(&text).unwrap();
        let config = Config {
            flow_idle_timeout_s: 5,
            ..config
        };
        assert!(a.reconfigure(&config).is_empty());
        assert_eq!(a.flows().len(), 20);
        for (p, g) in (1..=20).zip(&before) {
            let r = a.route(t, &udp(0, [198, 19, 2, 9], p)).unwrap();
            assert_eq!((r.group, r.assignment), (*g, Assignment::Existing));
        }
        let groups = a.scheduler(b2).unwrap().groups();
        assert_eq!(groups.get(PathGroupId::new(1).unwrap()).unwrap().weight, 5);
        assert!(
            !groups.is_up(PathGroupId::new(3).unwrap()),
            "new group starts down"
        );
        // Dropping group 1 reports it; its flows move on their next packet.
        let one = PathGroupId::new(1).unwrap();
        let text = text.replacen("[[remote.path_groups]]\nid = 1\nweight = 5\n\n", "", 1);
        let config = Config {
            flow_idle_timeout_s: 5,
            ..Config::parse(&text).unwrap()
        };
        assert_eq!(a.reconfigure(&config), vec![(b2, one)]);
        let moved = (1..=20)
            .filter(|p| {
                let r = a.route(t, &udp(0, [198, 19, 2, 9], *p)).unwrap();
                matches!(r.assignment, Assignment::Moved { from } if from == one)
            })
            .count();
        assert_eq!(moved, before.iter().filter(|g| **g == one).count());
        // The new idle timeout (5 s) applies to the flows kept.
        assert_eq!(a.handle_timeout(t + std::time::Duration::from_secs(6)), 20);
    }

    fn udp(tos: u8, dst: [u8; 4], sport: u16) -> Vec<u8> {
        let mut p = vec![0u8; 28];
        p[0] = 0x45;
        p[1] = tos;
        p[2..4].copy_from_slice(&28u16.to_be_bytes());
        p[9] = 17;
        p[12..16].copy_from_slice(&[198, 19, 1, 10]);
        p[16..20].copy_from_slice(&dst);
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&9u16.to_be_bytes());
        p
    }

    #[test]
    fn routes_and_refusals() {
        let now = Instant::now();
        let b2 = BranchId::new(2).unwrap();
        let g0 = PathGroupId::new(0).unwrap();
        let mut a = agent();
        // Groups start down.
        assert_eq!(
            a.route(now, &udp(0, [198, 19, 2, 9], 1)),
            Err(RouteError::NoGroupUp(b2))
        );
        assert!(a.set_group_up(b2, g0, true));
        assert!(!a.set_group_up(b2, g0, true));
        assert!(
            !a.set_group_up(BranchId::new(9).unwrap(), g0, true),
            "unknown branch"
        );
        let r = a.route(now, &udp(0xB8, [198, 19, 2, 9], 1)).unwrap();
        assert_eq!((r.branch, r.group, r.class), (b2, g0, Class::TypeI));
        assert_eq!(r.assignment, Assignment::New);
        let r = a.route(now, &udp(0, [198, 19, 2, 9], 2)).unwrap();
        assert_eq!(r.class, Class::TypeII);
        assert_eq!(
            a.route(now, &udp(0, [8, 8, 8, 8], 1)),
            Err(RouteError::External)
        );
        assert_eq!(
            a.route(now, &[0x45, 0, 0]),
            Err(RouteError::Malformed(ParseError::Truncated))
        );
        assert_eq!(a.flows().len(), 2);
        assert!(a.set_group_rate(b2, g0, 1_000_000));
        assert_eq!(
            a.scheduler(b2)
                .unwrap()
                .groups()
                .get(g0)
                .unwrap()
                .rate_bytes_per_s,
            1_000_000
        );
        assert!(a.poll_timeout().is_some());
        assert_eq!(
            a.handle_timeout(now + std::time::Duration::from_secs(61)),
            2
        );
    }
}
