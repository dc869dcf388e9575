//! The MPA's flow table (seed 000 §III-A: "when a new ... connection ... the MPA at the source MMSG
//! selects one path group"): each inner 5-tuple flow keeps the path group it was given, so its packets
//! travel one MPTCP connection and are never reordered by the tunnel.
//!
//! A flow moves only when its group is down (then it is reassigned on its next packet); a group coming
//! back up takes new flows only. Flows idle for the configured timeout are forgotten by
//! [`FlowTable::handle_timeout`], which the driver calls at [`FlowTable::poll_timeout`].
//!
//! The table is bounded by [`MAX_FLOWS`]. When it is full (after expiring idle flows), a new flow is
//! not stored: it gets a group by a stable hash of its 5-tuple ([`Assignment::Untracked`]), which
//! keeps its packets on one group as long as the set of up groups does not change.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::{Duration, Instant};

use crate::classifier::FlowKey;
use crate::scheduler::Scheduler;
use crate::{BranchId, PathGroupId};

/// Most flows remembered. 65,536 concurrent flows is far beyond a branch office (hundreds of hosts ×
/// tens of flows). Worst case memory: the std (hashbrown) table rounds 65,536 / (7/8) up to 131,072
/// buckets of `size_of::<(FlowKey, FlowEntry)>()` (120 B on x86-64, with the rate window, the
/// striping state and the lane) + 1 control byte ≈ **15.1 MiB**, allocated once at start-up by [`FlowTable::new`].
pub const MAX_FLOWS: usize = 65_536;

/// The lane of the next new flow on (`branch`, `group`) ([`FlowEntry::lane`]).
fn take_lane(
    next: &mut HashMap<(BranchId, PathGroupId), u8>,
    branch: BranchId,
    group: PathGroupId,
) -> u8 {
    let n = next.entry((branch, group)).or_insert(0);
    let lane = *n;
    *n = n.wrapping_add(1);
    lane
}

/// The lane of a flow the table does not remember: a hash of its 5-tuple, salted so that it is
/// independent of the group the same hash picked ([`Scheduler::select_by_hash`]).
fn hash_lane(flow: &FlowKey) -> u8 {
    let mut h = DefaultHasher::new();
    (flow, "lane").hash(&mut h);
    h.finish().to_be_bytes()[0]
}

/// How often idle flows are swept. Each sweep scans the table (≤ 65,536 entries, well under a
/// millisecond); once a second keeps a flow's actual lifetime within 1 s of its timeout.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// A flow's rate is measured over windows of this length (bytes in the window / its length). 100 ms
/// holds ~9 MTU packets at 1 Mbit/s (the default elephant threshold), so one window is enough to
/// tell an elephant, and a flow is striped within ~0.1 s of exceeding the threshold.
pub const RATE_WINDOW: Duration = Duration::from_millis(100);

/// What the table knows about one flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowEntry {
    /// The destination branch.
    pub branch: BranchId,
    /// The path group the flow is pinned to.
    pub group: PathGroupId,
    /// When its last packet was seen.
    pub last_seen: Instant,
    /// Packets seen.
    pub packets: u64,
    /// Bytes seen.
    pub bytes: u64,
    /// The rate over the last complete [`RATE_WINDOW`] (bytes per second).
    pub rate_bytes_per_s: u64,
    /// Start of the current rate window.
    pub window_start: Instant,
    /// Bytes in the current rate window.
    pub window_bytes: u64,
    /// Whether the flow is striped (sticky for the flow's lifetime in the table).
    pub striped: bool,
    /// The sequence number of its next striped frame.
    pub next_seq: u32,
    /// The flow is kept on the lowest-delay group ([`FlowTable::prefer_low_delay`]): the
    /// reverse of a flow this gateway resequences.
    pub low_delay: bool,
    /// The flow's ordinal among the new flows its group got (0, 1, 2, …): it picks the flow's
    /// connection among the group's `connections_per_group` (lane modulo the count), so new
    /// flows take the group's connections in turn. Kept when the flow moves. A byte: it wraps at
    /// 256, a multiple of 1, 2, 4 and 8 connections.
    pub lane: u8,
}

impl FlowEntry {
    fn new(branch: BranchId, group: PathGroupId, now: Instant, bytes: u64, lane: u8) -> Self {
        FlowEntry {
            lane,
            branch,
            group,
            last_seen: now,
            packets: 1,
            bytes,
            rate_bytes_per_s: 0,
            window_start: now,
            window_bytes: bytes,
            striped: false,
            next_seq: 0,
            low_delay: false,
        }
    }

    /// Counts a packet of `bytes` at `now` and closes the rate window when it is complete.
    fn count(&mut self, now: Instant, bytes: u64) {
        self.last_seen = now;
        self.packets += 1;
        self.bytes += bytes;
        let elapsed = now.saturating_duration_since(self.window_start);
        if elapsed >= RATE_WINDOW {
            let nanos = elapsed.as_nanos().max(1);
            let rate = u128::from(self.window_bytes) * 1_000_000_000 / nanos;
            self.rate_bytes_per_s = u64::try_from(rate).unwrap_or(u64::MAX);
            self.window_start = now;
            self.window_bytes = 0;
        }
        self.window_bytes += bytes;
    }
}

/// How a packet's group was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assignment {
    /// A known flow on its group.
    Existing,
    /// A new (or expired) flow: the scheduler chose.
    New,
    /// A known flow whose group is down: the scheduler chose a new one.
    Moved {
        /// The group it was on.
        from: PathGroupId,
    },
    /// A low-delay flow ([`FlowTable::prefer_low_delay`]) moved to a group whose delay is now
    /// lower by more than the margin ([`Scheduler::select_low_delay`]).
    Steered {
        /// The group it was on.
        from: PathGroupId,
    },
    /// The table is full: a stable hash of the flow chose, nothing was stored.
    Untracked,
}

/// The bounded flow table.
#[derive(Debug, Clone)]
pub struct FlowTable {
    flows: HashMap<FlowKey, FlowEntry>,
    idle_timeout: Duration,
    max_flows: usize,
    next_sweep: Option<Instant>,
    /// The next [`FlowEntry::lane`] per (branch, group): at most 250 × 16 entries.
    next_lanes: HashMap<(BranchId, PathGroupId), u8>,
}

impl FlowTable {
    /// A table forgetting flows after `idle_timeout`, holding at most `max_flows` (clamped to
    /// 1..=[`MAX_FLOWS`]); the memory for all of them is allocated here.
    pub fn new(idle_timeout: Duration, max_flows: usize) -> Self {
        let max_flows = max_flows.clamp(1, MAX_FLOWS);
        FlowTable {
            flows: HashMap::with_capacity(max_flows),
            idle_timeout,
            max_flows,
            next_sweep: None,
            next_lanes: HashMap::new(),
        }
    }

    /// Changes the idle timeout (a config reload); remembered flows stay.
    pub fn set_idle_timeout(&mut self, idle_timeout: Duration) {
        self.idle_timeout = idle_timeout;
    }

    /// Flows remembered.
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    /// Whether no flow is remembered.
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// The entry of `key`, if remembered.
    pub fn get(&self, key: &FlowKey) -> Option<&FlowEntry> {
        self.flows.get(key)
    }

    /// How many remembered flows to `branch` are on `group`.
    pub fn flows_on(&self, branch: BranchId, group: PathGroupId) -> usize {
        self.flows
            .values()
            .filter(|e| e.branch == branch && e.group == group)
            .count()
    }

    /// The group for a packet of `bytes` bytes of flow `key` to `branch`, whose groups `sched` holds,
    /// and the flow's [`FlowEntry::lane`] (for a flow the table does not remember: a hash of its
    /// 5-tuple), in one lookup. `None` when no group towards `branch` is up (drop and count).
    pub fn assign(
        &mut self,
        now: Instant,
        key: FlowKey,
        branch: BranchId,
        bytes: usize,
        sched: &mut Scheduler,
    ) -> Option<(PathGroupId, Assignment, u8)> {
        let bytes = bytes as u64;
        let timeout = self.idle_timeout;
        if let Some(e) = self.flows.get_mut(&key) {
            let expired = now.saturating_duration_since(e.last_seen) > timeout;
            let up = sched.is_up(e.group);
            let (group, how) = if e.branch != branch || expired {
                // Expired (not yet swept) or re-routed: a new flow. A low-delay flow that idled
                // out stays one (its striped reverse may still run): no round-robin pick for it.
                let low = (e.low_delay && e.branch == branch)
                    .then(|| sched.select_low_delay(None))
                    .flatten();
                (low.or_else(|| sched.select())?, Assignment::New)
            } else if e.low_delay {
                match sched.select_low_delay(up.then_some(e.group)) {
                    Some(g) if g == e.group => (g, Assignment::Existing),
                    Some(g) if up => (g, Assignment::Steered { from: e.group }),
                    Some(g) => (g, Assignment::Moved { from: e.group }),
                    None => (sched.select()?, Assignment::Moved { from: e.group }),
                }
            } else if up {
                (e.group, Assignment::Existing)
            } else {
                (sched.select()?, Assignment::Moved { from: e.group })
            };
            if how == Assignment::New {
                let low_delay = e.low_delay && e.branch == branch;
                *e = FlowEntry::new(branch, group, now, bytes, 0);
                e.lane = take_lane(&mut self.next_lanes, branch, group);
                e.low_delay = low_delay;
            } else {
                e.count(now, bytes);
                e.group = group;
            }
            return Some((group, how, e.lane));
        }
        if self.flows.len() >= self.max_flows {
            self.expire(now);
        }
        if self.flows.len() >= self.max_flows {
            return sched
                .select_by_hash(&key)
                .map(|g| (g, Assignment::Untracked, hash_lane(&key)));
        }
        let group = sched.select()?;
        let lane = take_lane(&mut self.next_lanes, branch, group);
        self.flows
            .insert(key, FlowEntry::new(branch, group, now, bytes, lane));
        self.next_sweep.get_or_insert(now + SWEEP_INTERVAL);
        Some((group, Assignment::New, lane))
    }

    /// Striping (seed 001 §III-C): when flow `key` is striped or its measured rate now exceeds
    /// `threshold_bytes_per_s` (then it is striped from now on), the sequence number for its current
    /// packet, and the flow's counter advances. `None` for a flow that stays on its group (or one the
    /// table does not remember: an untracked flow is never striped, it has no sequence state).
    /// Call after [`FlowTable::assign`] for the same packet, only for flows eligible for striping.
    pub fn stripe(&mut self, key: &FlowKey, threshold_bytes_per_s: u64) -> Option<u32> {
        let e = self.flows.get_mut(key)?;
        if !e.striped && e.rate_bytes_per_s <= threshold_bytes_per_s {
            return None;
        }
        e.striped = true;
        let seq = e.next_seq;
        e.next_seq = seq.wrapping_add(1);
        Some(seq)
    }

    /// Keeps flow `key` to `branch` on the group with the lowest measured delay from its next
    /// packet on ([`Scheduler::select_low_delay`], with its margin against flapping), instead of
    /// where the scheduler's round robin put it. For the reverse of a flow this gateway
    /// resequences (its ACKs): the sender's window waits for them, so a striped TCP flow over
    /// paths of unequal delay is clocked by the fastest path instead of whichever group the round
    /// robin gave its ACKs (docs/results.md, "MDI"). A flow not yet seen is remembered now (on
    /// the lowest-delay group, or the scheduler's pick while no delay is measured); a full table
    /// or no group up: `false`, nothing stored.
    pub fn prefer_low_delay(
        &mut self,
        now: Instant,
        key: FlowKey,
        branch: BranchId,
        sched: &mut Scheduler,
    ) -> bool {
        if let Some(e) = self.flows.get_mut(&key) {
            if e.branch == branch {
                e.low_delay = true;
                return true;
            }
        }
        if !self.flows.contains_key(&key) && self.flows.len() >= self.max_flows {
            self.expire(now);
            if self.flows.len() >= self.max_flows {
                return false;
            }
        }
        let Some(group) = sched.select_low_delay(None).or_else(|| sched.select()) else {
            return false;
        };
        let lane = take_lane(&mut self.next_lanes, branch, group);
        let mut e = FlowEntry::new(branch, group, now, 0, lane);
        e.packets = 0;
        e.low_delay = true;
        self.flows.insert(key, e);
        self.next_sweep.get_or_insert(now + SWEEP_INTERVAL);
        true
    }

    /// When [`FlowTable::handle_timeout`] should next run (`None` while the table is empty).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_sweep
    }

    /// Forgets idle flows if the sweep is due; returns how many were forgotten.
    pub fn handle_timeout(&mut self, now: Instant) -> usize {
        match self.next_sweep {
            Some(t) if now >= t => self.expire(now),
            _ => 0,
        }
    }

    /// Forgets every flow idle for longer than the timeout; returns how many.
    pub fn expire(&mut self, now: Instant) -> usize {
        let before = self.flows.len();
        let timeout = self.idle_timeout;
        self.flows
            .retain(|_, e| now.saturating_duration_since(e.last_seen) <= timeout);
        self.next_sweep = (!self.flows.is_empty()).then(|| now + SWEEP_INTERVAL);
        before - self.flows.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{PathGroupConfig, SelectionPolicy};
    use crate::path_group::PathGroups;
    use std::net::{IpAddr, Ipv4Addr};

    fn key(port: u16) -> FlowKey {
        FlowKey {
            src: IpAddr::V4(Ipv4Addr::new(198, 19, 1, 10)),
            dst: IpAddr::V4(Ipv4Addr::new(198, 19, 2, 10)),
            protocol: 6,
            src_port: port,
            dst_port: 80,
        }
    }

    /// [`FlowTable::assign`] towards branch 2 without the lane.
    fn pick(
        ft: &mut FlowTable,
        now: Instant,
        k: FlowKey,
        bytes: usize,
        s: &mut Scheduler,
    ) -> Option<(PathGroupId, Assignment)> {
        ft.assign(now, k, b2(), bytes, s)
            .map(|(g, how, _)| (g, how))
    }

    fn sched(n: u8) -> Scheduler {
        let cfg: Vec<PathGroupConfig> =
            (0..n).map(|id| PathGroupConfig { id, weight: 1 }).collect();
        let mut s = Scheduler::new(PathGroups::new(&cfg), SelectionPolicy::Rr);
        for id in 0..n {
            s.set_up(g(id), true);
        }
        s
    }

    fn g(id: u8) -> PathGroupId {
        PathGroupId::new(id).unwrap()
    }

    fn b2() -> BranchId {
        BranchId::new(2).unwrap()
    }

    #[test]
    fn worst_case_memory_is_as_documented() {
        // The entry size the MAX_FLOWS comment is computed from.
        assert!(std::mem::size_of::<(FlowKey, FlowEntry)>() <= 120);
    }

    #[test]
    fn a_fast_flow_becomes_striped_and_numbers_its_packets() {
        let t = Instant::now();
        let mut s = sched(2);
        let mut ft = FlowTable::new(Duration::from_secs(60), 100);
        // 1,000 B every 10 ms = 100 kB/s; threshold 50 kB/s. The first window is not complete yet.
        let threshold = 50_000;
        let mut seqs = Vec::new();
        for i in 0..30u32 {
            let now = t + Duration::from_millis(10) * i;
            pick(&mut ft, now, key(1), 1_000, &mut s).unwrap();
            seqs.push(ft.stripe(&key(1), threshold));
        }
        let first = seqs.iter().position(Option::is_some).unwrap();
        assert_eq!(first, 10, "striped once the first 100 ms window closed");
        let numbered: Vec<u32> = seqs.iter().flatten().copied().collect();
        assert_eq!(numbered, (0..20).collect::<Vec<_>>());
        let e = ft.get(&key(1)).unwrap();
        assert!(
            (95_000..=105_000).contains(&e.rate_bytes_per_s),
            "{}",
            e.rate_bytes_per_s
        );
        // Sticky: slowing down keeps it striped (no switching back and forth).
        let later = t + Duration::from_secs(2);
        pick(&mut ft, later, key(1), 1, &mut s).unwrap();
        assert_eq!(ft.stripe(&key(1), threshold), Some(20));
        // A slow flow is not striped; an unknown flow neither.
        for i in 0..30u32 {
            pick(
                &mut ft,
                t + Duration::from_millis(50) * i,
                key(2),
                100,
                &mut s,
            );
        }
        assert_eq!(ft.stripe(&key(2), threshold), None);
        assert_eq!(ft.stripe(&key(3), threshold), None);
    }

    #[test]
    fn flows_stick_to_their_group() {
        let t = Instant::now();
        let mut s = sched(2);
        let mut ft = FlowTable::new(Duration::from_secs(60), 100);
        assert_eq!(
            pick(&mut ft, t, key(1), 100, &mut s),
            Some((g(0), Assignment::New))
        );
        assert_eq!(
            pick(&mut ft, t, key(2), 100, &mut s),
            Some((g(1), Assignment::New))
        );
        for i in 0..10 {
            let now = t + Duration::from_secs(i);
            assert_eq!(
                pick(&mut ft, now, key(1), 100, &mut s),
                Some((g(0), Assignment::Existing))
            );
        }
        let e = ft.get(&key(1)).unwrap();
        assert_eq!((e.packets, e.bytes), (11, 1100));
    }

    #[test]
    fn only_flows_on_a_failed_group_move() {
        let t = Instant::now();
        let mut s = sched(2);
        let mut ft = FlowTable::new(Duration::from_secs(60), 100);
        for p in 0..10 {
            pick(&mut ft, t, key(p), 100, &mut s);
        }
        assert_eq!((ft.flows_on(b2(), g(0)), ft.flows_on(b2(), g(1))), (5, 5));
        s.set_up(g(1), false);
        for p in 0..10 {
            let (grp, how) = pick(&mut ft, t, key(p), 100, &mut s).unwrap();
            assert_eq!(grp, g(0));
            if p % 2 == 0 {
                assert_eq!(how, Assignment::Existing);
            } else {
                assert_eq!(how, Assignment::Moved { from: g(1) });
            }
        }
        // Group 1 back: moved flows stay, new flows use it again.
        s.set_up(g(1), true);
        for p in 0..10 {
            assert_eq!(
                pick(&mut ft, t, key(p), 100, &mut s),
                Some((g(0), Assignment::Existing))
            );
        }
        assert_eq!(
            pick(&mut ft, t, key(100), 100, &mut s).unwrap().1,
            Assignment::New
        );
        // No group up: no assignment.
        s.set_up(g(0), false);
        s.set_up(g(1), false);
        assert_eq!(pick(&mut ft, t, key(1), 100, &mut s), None);
    }

    #[test]
    fn idle_flows_expire_on_the_sweep() {
        let t = Instant::now();
        let mut s = sched(2);
        let mut ft = FlowTable::new(Duration::from_secs(5), 100);
        assert_eq!(ft.poll_timeout(), None);
        pick(&mut ft, t, key(1), 1, &mut s);
        pick(&mut ft, t + Duration::from_secs(3), key(2), 1, &mut s);
        assert_eq!(ft.poll_timeout(), Some(t + SWEEP_INTERVAL));
        assert_eq!(ft.handle_timeout(t), 0, "not due");
        assert_eq!(ft.handle_timeout(t + Duration::from_secs(6)), 1);
        assert_eq!(ft.len(), 1);
        assert_eq!(ft.handle_timeout(t + Duration::from_secs(9)), 1);
        assert!(ft.is_empty());
        assert_eq!(ft.poll_timeout(), None);
    }

    #[test]
    fn an_expired_flow_is_new_again() {
        let t = Instant::now();
        let mut s = sched(2);
        let mut ft = FlowTable::new(Duration::from_secs(5), 100);
        pick(&mut ft, t, key(1), 1, &mut s);
        let (_, how) = pick(&mut ft, t + Duration::from_secs(6), key(1), 1, &mut s).unwrap();
        assert_eq!(how, Assignment::New);
        assert_eq!(ft.get(&key(1)).unwrap().packets, 1);
    }

    #[test]
    fn a_full_table_hashes_new_flows() {
        let t = Instant::now();
        let mut s = sched(3);
        let mut ft = FlowTable::new(Duration::from_secs(60), 4);
        for p in 0..4 {
            assert_eq!(
                pick(&mut ft, t, key(p), 1, &mut s).unwrap().1,
                Assignment::New
            );
        }
        let first = pick(&mut ft, t, key(99), 1, &mut s).unwrap();
        assert_eq!(first.1, Assignment::Untracked);
        for _ in 0..5 {
            assert_eq!(pick(&mut ft, t, key(99), 1, &mut s), Some(first), "stable");
        }
        assert_eq!(ft.len(), 4);
        // Once the old flows expire there is room again.
        let later = t + Duration::from_secs(61);
        assert_eq!(
            pick(&mut ft, later, key(99), 1, &mut s).unwrap().1,
            Assignment::New
        );
        assert_eq!(ft.len(), 1);
    }
}
