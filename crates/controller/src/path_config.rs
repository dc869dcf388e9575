//! Automatic path configuration: the PC module's computation (seed 000 §IV; seed 001 §III-B, eq. 1).
//!
//! For each ordered branch pair (A, B) the PC keeps up to 16 path groups. Automatically:
//! 1. [`candidates`]: every direct member path and every path through one transit branch whose
//!    WAN hops are possible ([`Inventory::can_hop`]).
//! 2. [`compute_group`]: greedy selection, one member per *slot* (source port, destination port)
//!    because the source OFS tells subflows apart by their address pair. Each step takes the
//!    candidate with the largest gain in the group's **max-flow** capacity ([`group_capacity`]:
//!    Edmonds-Karp, BFS augmenting paths, over the union of the members' links; seed 001 §III-B),
//!    then the one least used by the pair's earlier groups (the same path, then shared WAN hops:
//!    diversity between groups, as in Table II), then the most **disjoint** from the members already chosen (shared transit
//!    branches and hops), then fewer WAN hops, lower delay, and the notation order. A candidate
//!    that would push the group's **MDI** ([`mdi`], seed 001 eq. 1) above the threshold is skipped;
//!    dead paths (capacity 0) are never taken.
//! 3. [`PathConfigurator::update`]: *semi-permanent* groups (seed 000 §IV): a group is replaced
//!    only when it became invalid (port gone, dead, delay-incompatible) or the new one is better by
//!    the margin; otherwise it stays, so connections are not moved for noise.
//!
//! Inputs are numbers, not clocks: [`Measurements`] holds the SDC's estimates per WAN hop
//! (available kbit/s and one-way delay); an unmeasured hop is unconstrained (the ports' own
//! capacities still bound it) and has unknown delay (left out of the MDI). Everything iterates in
//! `BTreeMap` order, so equal inputs give equal groups.
//!
//! The union-graph max-flow is exact for members that only share ports; where two members cross
//! at one transit port it can count a mixed route and is an upper bound. Cost per pair is
//! O(groups × slots × candidates) max-flows on graphs of a few dozen nodes.
use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::inventory::{BranchId, Inventory, PortRef};
use crate::path_group::{
    validate_member, GroupError, Hop, MemberId, MemberPath, PathGroup, PathGroupId, PathGroups,
    Transit, MAX_GROUP_ID, MAX_MEMBER_ID,
};

/// "Unbounded" capacity of links we know nothing about (kbit/s). Large, but far from overflow
/// when a few are added.
pub const UNBOUNDED_KBPS: u64 = u64::MAX >> 8;

/// The SDC's estimate of one WAN hop (from one port to another).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HopEstimate {
    /// Available bandwidth in kbit/s; `None` if not measured.
    #[serde(default)]
    pub available_kbps: Option<u64>,
    /// One-way delay in µs; `None` if not measured.
    #[serde(default)]
    pub delay_us: Option<u64>,
}

/// Estimates per directed WAN hop.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Measurements {
    hops: BTreeMap<(PortRef, PortRef), HopEstimate>,
}

impl Measurements {
    /// No estimates.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the estimate of the hop `from` → `to`.
    pub fn set(&mut self, from: PortRef, to: PortRef, estimate: HopEstimate) {
        self.hops.insert((from, to), estimate);
    }

    /// The estimate of the hop `from` → `to` (default: nothing known).
    pub fn get(&self, from: PortRef, to: PortRef) -> HopEstimate {
        self.hops.get(&(from, to)).copied().unwrap_or_default()
    }
}

pub use crate::settings::Settings;

/// Maximum delay imbalance of a set of path delays (seed 001 eq. 1):
/// `MDI = d_max / (d_max + d_min) − 0.5`, in [0, 0.5]; 0 for fewer than two delays or all zero.
pub fn mdi(delays: &[u64]) -> f64 {
    let (Some(&max), Some(&min)) = (delays.iter().max(), delays.iter().min()) else {
        return 0.0;
    };
    let sum = max.saturating_add(min);
    if sum == 0 {
        return 0.0;
    }
    max as f64 / sum as f64 - 0.5
}

/// A flow network for Edmonds-Karp (max-flow with BFS augmenting paths).
#[derive(Clone, Debug, Default)]
pub struct FlowNetwork {
    /// Edges in pairs: `2k` forward, `2k + 1` its reverse; `cap` is the residual capacity.
    edges: Vec<(usize, u64)>,
    adjacency: Vec<Vec<usize>>,
}

impl FlowNetwork {
    /// A network with `nodes` nodes (0..nodes).
    pub fn new(nodes: usize) -> Self {
        Self {
            edges: Vec::new(),
            adjacency: vec![Vec::new(); nodes],
        }
    }

    /// Adds an edge of capacity `cap`; ignored if a node does not exist.
    pub fn add_edge(&mut self, from: usize, to: usize, cap: u64) {
        if from >= self.adjacency.len() || to >= self.adjacency.len() {
            return;
        }
        let k = self.edges.len();
        self.edges.push((to, cap));
        self.edges.push((from, 0));
        if let Some(a) = self.adjacency.get_mut(from) {
            a.push(k);
        }
        if let Some(a) = self.adjacency.get_mut(to) {
            a.push(k + 1);
        }
    }

    /// The maximum flow from `source` to `sink` (consumes the residual capacities).
    pub fn max_flow(&mut self, source: usize, sink: usize) -> u64 {
        let n = self.adjacency.len();
        if source >= n || sink >= n || source == sink {
            return 0;
        }
        let mut total: u64 = 0;
        loop {
            // BFS for the shortest augmenting path; `via[v]` is the edge that reached v.
            let mut via: Vec<Option<usize>> = vec![None; n];
            let mut seen = vec![false; n];
            if let Some(s) = seen.get_mut(source) {
                *s = true;
            }
            let mut queue = VecDeque::from([source]);
            while let Some(u) = queue.pop_front() {
                if u == sink {
                    break;
                }
                for &e in self.adjacency.get(u).map_or(&[][..], Vec::as_slice) {
                    let Some(&(to, cap)) = self.edges.get(e) else {
                        continue;
                    };
                    if cap > 0 && seen.get(to) == Some(&false) {
                        if let (Some(s), Some(v)) = (seen.get_mut(to), via.get_mut(to)) {
                            *s = true;
                            *v = Some(e);
                        }
                        queue.push_back(to);
                    }
                }
            }
            if seen.get(sink) != Some(&true) {
                return total;
            }
            // Walk back from the sink: bottleneck, then augment.
            let path = self.path_edges(&via, source, sink);
            let bottleneck = path
                .iter()
                .filter_map(|&e| self.edges.get(e).map(|&(_, c)| c))
                .min()
                .unwrap_or(0);
            if bottleneck == 0 {
                return total;
            }
            for e in path {
                if let Some(fwd) = self.edges.get_mut(e) {
                    fwd.1 -= bottleneck;
                }
                if let Some(rev) = self.edges.get_mut(e ^ 1) {
                    rev.1 = rev.1.saturating_add(bottleneck);
                }
            }
            total = total.saturating_add(bottleneck);
        }
    }

    fn path_edges(&self, via: &[Option<usize>], source: usize, sink: usize) -> Vec<usize> {
        let mut path = Vec::new();
        let mut v = sink;
        while v != source {
            let Some(Some(e)) = via.get(v) else {
                return Vec::new();
            };
            path.push(*e);
            // The reverse edge points at the node this edge came from.
            let Some(&(from, _)) = self.edges.get(e ^ 1) else {
                return Vec::new();
            };
            v = from;
            if path.len() > via.len() {
                return Vec::new();
            }
        }
        path
    }
}

fn port_kbps(inventory: &Inventory, port: PortRef) -> u64 {
    inventory
        .port(port)
        .map_or(0, |w| u64::from(w.capacity_mbps) * 1000)
}

fn hop_kbps(m: &Measurements, from: PortRef, to: PortRef) -> u64 {
    m.get(from, to).available_kbps.unwrap_or(UNBOUNDED_KBPS)
}

/// The bottleneck capacity of one member path alone (kbit/s): its ports and its hops.
pub fn path_capacity(inventory: &Inventory, m: &Measurements, path: &MemberPath) -> u64 {
    let mut cap = UNBOUNDED_KBPS;
    for hop in path.hops() {
        cap = cap
            .min(port_kbps(inventory, hop.from))
            .min(port_kbps(inventory, hop.to))
            .min(hop_kbps(m, hop.from, hop.to));
    }
    cap
}

/// One-way delay of a member path (sum of its hops), `None` if a hop is unmeasured.
pub fn path_delay(m: &Measurements, path: &MemberPath) -> Option<u64> {
    path.hops()
        .iter()
        .map(|h| m.get(h.from, h.to).delay_us)
        .try_fold(0u64, |acc, d| Some(acc.saturating_add(d?)))
}

/// The aggregate capacity of a set of member paths between one pair (kbit/s): the max-flow over
/// the union of their links, each port a capacity edge per direction (uplink, downlink).
pub fn group_capacity<'a>(
    inventory: &Inventory,
    m: &Measurements,
    paths: impl IntoIterator<Item = &'a MemberPath>,
) -> u64 {
    #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    enum Node {
        Source,
        Sink,
        UpIn(PortRef),
        UpOut(PortRef),
        DownIn(PortRef),
        DownOut(PortRef),
    }
    let mut edges: BTreeMap<(Node, Node), u64> = BTreeMap::new();
    for path in paths {
        edges.insert((Node::Source, Node::UpIn(path.source())), UNBOUNDED_KBPS);
        edges.insert(
            (Node::DownOut(path.destination()), Node::Sink),
            UNBOUNDED_KBPS,
        );
        for hop in path.hops() {
            edges.insert(
                (Node::UpIn(hop.from), Node::UpOut(hop.from)),
                port_kbps(inventory, hop.from),
            );
            edges.insert(
                (Node::UpOut(hop.from), Node::DownIn(hop.to)),
                hop_kbps(m, hop.from, hop.to),
            );
            edges.insert(
                (Node::DownIn(hop.to), Node::DownOut(hop.to)),
                port_kbps(inventory, hop.to),
            );
        }
        for t in path.transits() {
            edges.insert(
                (Node::DownOut(t.ingress), Node::UpIn(t.egress)),
                UNBOUNDED_KBPS,
            );
        }
    }
    let mut ids: BTreeMap<Node, usize> = BTreeMap::new();
    for (a, b) in edges.keys() {
        for n in [*a, *b] {
            let next = ids.len();
            ids.entry(n).or_insert(next);
        }
    }
    let (Some(&s), Some(&t)) = (ids.get(&Node::Source), ids.get(&Node::Sink)) else {
        return 0;
    };
    let mut net = FlowNetwork::new(ids.len());
    for ((a, b), cap) in &edges {
        if let (Some(&u), Some(&v)) = (ids.get(a), ids.get(b)) {
            net.add_edge(u, v, *cap);
        }
    }
    net.max_flow(s, t)
}

/// Every direct and one-transit member path from `a` to `b`, ordered by WAN hops then notation.
pub fn candidates(
    inventory: &Inventory,
    a: BranchId,
    b: BranchId,
    allow_transit: bool,
) -> Vec<MemberPath> {
    let ports = |id: BranchId| -> Vec<PortRef> {
        inventory
            .branch(id)
            .map(|br| br.wan.iter().map(|w| PortRef::new(id, w.port)).collect())
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    if a == b {
        return out;
    }
    for src in ports(a) {
        for dst in ports(b) {
            if inventory.can_hop(src, dst) {
                out.extend(MemberPath::direct(src, dst));
            }
            if !allow_transit {
                continue;
            }
            for t in inventory.branches().filter(|t| t.id != a && t.id != b) {
                for x in ports(t.id) {
                    if !inventory.can_hop(src, x) {
                        continue;
                    }
                    for y in ports(t.id) {
                        if inventory.can_hop(y, dst) {
                            let transit = Transit {
                                ingress: x,
                                egress: y,
                            };
                            out.extend(MemberPath::new(src, vec![transit], dst));
                        }
                    }
                }
            }
        }
    }
    out.sort_by(|p, q| p.wan_hops().cmp(&q.wan_hops()).then_with(|| p.cmp(q)));
    out
}

/// The quality of a group under the current measurements.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GroupScore {
    /// Max-flow capacity in kbit/s.
    pub capacity_kbps: u64,
    /// MDI over the members with known delay.
    pub mdi: f64,
}

/// Scores a set of member paths.
pub fn score<'a>(
    inventory: &Inventory,
    m: &Measurements,
    paths: impl IntoIterator<Item = &'a MemberPath> + Clone,
) -> GroupScore {
    let delays: Vec<u64> = paths
        .clone()
        .into_iter()
        .filter_map(|p| path_delay(m, p))
        .collect();
    GroupScore {
        capacity_kbps: group_capacity(inventory, m, paths),
        mdi: mdi(&delays),
    }
}

fn overlap(a: &MemberPath, b: &MemberPath) -> usize {
    let transits = |p: &MemberPath| -> BTreeSet<BranchId> {
        p.transits().iter().map(|t| t.ingress.branch).collect()
    };
    let hops_a: BTreeSet<_> = a.hops().into_iter().collect();
    let shared_hops = b.hops().iter().filter(|h| hops_a.contains(h)).count();
    transits(a).intersection(&transits(b)).count() + shared_hops
}

/// Computes one group for (a, b) with id `id`. `earlier` are the pair's groups already chosen
/// (their members are avoided when all else is equal). `None` if no member path is usable.
pub fn compute_group(
    inventory: &Inventory,
    m: &Measurements,
    settings: &Settings,
    (a, b): (BranchId, BranchId),
    id: PathGroupId,
    earlier: &[&PathGroup],
) -> Option<PathGroup> {
    let cands: Vec<MemberPath> = candidates(inventory, a, b, settings.allow_transit)
        .into_iter()
        .filter(|p| path_capacity(inventory, m, p) > 0)
        .collect();
    // Reuse of a candidate by the pair's earlier groups: the same path counts most, then every
    // WAN hop it shares with their members (a group added because the others are saturated
    // helps only through hops they do not load: `crate::adaptive`).
    let mut usage: BTreeMap<&MemberPath, usize> = BTreeMap::new();
    let mut hop_usage: BTreeMap<Hop, usize> = BTreeMap::new();
    for g in earlier {
        for p in g.members.values() {
            *usage.entry(p).or_default() += 1;
            for h in p.hops() {
                *hop_usage.entry(h).or_default() += 1;
            }
        }
    }
    let reuse = |c: &MemberPath| -> usize {
        let same = usage.get(c).copied().unwrap_or(0);
        let hops: usize = c
            .hops()
            .iter()
            .map(|h| hop_usage.get(h).copied().unwrap_or(0))
            .sum();
        same.saturating_mul(1000).saturating_add(hops)
    };
    let mut chosen: Vec<MemberPath> = Vec::new();
    let mut slots: BTreeSet<(PortRef, PortRef)> = BTreeSet::new();
    let mut capacity = 0u64;
    while chosen.len() < usize::from(MAX_MEMBER_ID) {
        // (gain, reuse, overlap, hops, delay, index): larger gain first, the rest ascending.
        let mut best: Option<(u64, usize, usize, usize, u64, usize)> = None;
        for (index, c) in cands.iter().enumerate() {
            if slots.contains(&(c.source(), c.destination())) {
                continue;
            }
            let with: Vec<&MemberPath> = chosen.iter().chain(std::iter::once(c)).collect();
            let delays: Vec<u64> = with.iter().filter_map(|p| path_delay(m, p)).collect();
            if mdi(&delays) > settings.mdi_threshold {
                continue;
            }
            let total = group_capacity(inventory, m, with.iter().copied());
            let key = (
                total.saturating_sub(capacity),
                reuse(c),
                chosen.iter().map(|p| overlap(p, c)).sum::<usize>(),
                c.wan_hops(),
                path_delay(m, c).unwrap_or(u64::MAX),
                index,
            );
            let better = match &best {
                None => true,
                Some(b) => {
                    key.0 > b.0
                        || (key.0 == b.0
                            && (key.1, key.2, key.3, key.4, key.5) < (b.1, b.2, b.3, b.4, b.5))
                }
            };
            if better {
                best = Some(key);
            }
        }
        let Some((gain, .., index)) = best else { break };
        let Some(c) = cands.get(index) else { break };
        slots.insert((c.source(), c.destination()));
        capacity += gain;
        chosen.push(c.clone());
    }
    if chosen.is_empty() {
        return None;
    }
    PathGroup::from_members(a, b, id, chosen).ok()
}

/// What [`PathConfigurator::update`] changed, as (source, destination, group).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// New groups.
    pub added: Vec<(BranchId, BranchId, PathGroupId)>,
    /// Groups whose members changed.
    pub replaced: Vec<(BranchId, BranchId, PathGroupId)>,
    /// Groups that no longer exist.
    pub removed: Vec<(BranchId, BranchId, PathGroupId)>,
}

impl Changes {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.replaced.is_empty() && self.removed.is_empty()
    }
}

/// The automatic PC: keeps the current groups and replaces them only when better by a margin.
#[derive(Clone, Debug, Default)]
pub struct PathConfigurator {
    settings: Settings,
    current: BTreeMap<(BranchId, BranchId, PathGroupId), PathGroup>,
}

impl PathConfigurator {
    /// Starts with no groups.
    pub fn new(settings: Settings) -> Self {
        Self {
            settings,
            current: BTreeMap::new(),
        }
    }

    /// Starts from existing groups (e.g. a manual configuration).
    pub fn with_groups(settings: Settings, groups: &PathGroups) -> Self {
        let current = groups
            .groups()
            .map(|g| ((g.source, g.destination, g.id), g.clone()))
            .collect();
        Self { settings, current }
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    fn still_valid(&self, inventory: &Inventory, m: &Measurements, g: &PathGroup) -> bool {
        g.members
            .values()
            .all(|p| validate_member(inventory, p).is_ok() && path_capacity(inventory, m, p) > 0)
            && score(inventory, m, g.members.values()).mdi <= self.settings.mdi_threshold
    }

    /// Recomputes every pair's groups from `inventory` and `m`, keeping each current group unless
    /// it is invalid or a new one is better by the margin. Returns what changed.
    pub fn update(&mut self, inventory: &Inventory, m: &Measurements) -> Changes {
        let mut changes = Changes::default();
        let mut next: BTreeMap<(BranchId, BranchId, PathGroupId), PathGroup> = BTreeMap::new();
        let count = self.settings.groups_per_pair.clamp(1, MAX_GROUP_ID + 1);
        let ids: Vec<BranchId> = inventory.branches().map(|b| b.id).collect();
        for &a in &ids {
            for &b in ids.iter().filter(|&&b| b != a) {
                let mut kept: Vec<PathGroup> = Vec::new();
                for gid in (0..count).filter_map(|g| PathGroupId::new(g).ok()) {
                    let earlier: Vec<&PathGroup> = kept.iter().collect();
                    let fresh = compute_group(inventory, m, &self.settings, (a, b), gid, &earlier);
                    let old = self
                        .current
                        .get(&(a, b, gid))
                        .filter(|g| self.still_valid(inventory, m, g));
                    let choice = match (old, fresh) {
                        (Some(old), Some(fresh)) => {
                            let c_old = score(inventory, m, old.members.values()).capacity_kbps;
                            let c_new = score(inventory, m, fresh.members.values()).capacity_kbps;
                            let better = c_new > c_old
                                && c_new as f64
                                    >= c_old as f64 * (1.0 + self.settings.replace_margin);
                            if better {
                                Some(fresh)
                            } else {
                                Some(old.clone())
                            }
                        }
                        (Some(old), None) => Some(old.clone()),
                        (None, fresh) => fresh,
                    };
                    if let Some(g) = choice {
                        match self.current.get(&(a, b, gid)) {
                            None => changes.added.push((a, b, gid)),
                            Some(prev) if prev.members != g.members => {
                                changes.replaced.push((a, b, gid))
                            }
                            Some(_) => {}
                        }
                        kept.push(g);
                    }
                }
                for g in kept {
                    next.insert((g.source, g.destination, g.id), g);
                }
            }
        }
        changes.removed = self
            .current
            .keys()
            .filter(|k| !next.contains_key(k))
            .copied()
            .collect();
        self.current = next;
        changes
    }

    /// The current groups, checked against `inventory`.
    pub fn groups(&self, inventory: &Inventory) -> Result<PathGroups, GroupError> {
        PathGroups::new(inventory, self.current.values().cloned().collect())
    }

    /// The current member ids of one group (for the MPAs).
    pub fn group(&self, a: BranchId, b: BranchId, id: PathGroupId) -> Option<&PathGroup> {
        self.current.get(&(a, b, id))
    }

    /// All current member paths with their ids, for diagnostics.
    pub fn members(&self) -> impl Iterator<Item = (&PathGroup, MemberId, &MemberPath)> + '_ {
        self.current
            .values()
            .flat_map(|g| g.members.iter().map(move |(id, p)| (g, *id, p)))
    }
}
