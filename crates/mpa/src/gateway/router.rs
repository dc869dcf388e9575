//! The TUN side of the gateway core: classify, route (the [`Agent`]), frame, and the group-up rule.
//! Held by the driver's TUN reader task; its output goes to the [`super::ConnCore`] of the
//! connection it names.

use std::collections::BTreeSet;
use std::time::Instant;

use bytes::{Buf, BytesMut};

use crate::agent::{Agent, RouteError};
use crate::config::{pool_size, Config};
use crate::framing::{encode_header_in_place, FrameType, FRAME_HEADER_LEN, VIRTIO_NET_HDR_LEN};
use crate::queue::{FlowHash, FlowHasher};
use crate::{BranchId, Class, PathGroupId};

use super::sparse::{SparseLane, SparseLaneConfig};
use super::{ConnKey, Counters, Event, PacketDrop, CLASSES};

/// A packet routed and framed, ready for [`super::ConnCore::enqueue`] of connection `conn`.
#[derive(Debug)]
pub struct Outgoing {
    /// The outbound connection that carries it.
    pub conn: ConnKey,
    /// The frame.
    pub packet: QueuedPacket,
}

/// One framed packet waiting in a connection's queue: the frame header is already written in
/// front of the payload (in the buffer the caller read TUN into), so dequeuing only has to set
/// ECN CE when CoDel asks for it.
#[derive(Debug)]
pub struct QueuedPacket {
    pub(super) frame: BytesMut,
    /// Where the inner IP packet starts in `frame` (after the frame header and any virtio header).
    pub(super) ip_at: usize,
    pub(super) class: Class,
    pub(super) ect: bool,
    /// The inner flow's keyed hash (the connection queue's flow bucket).
    pub(super) flow: FlowHash,
}

impl QueuedPacket {
    /// The whole frame (header and payload).
    pub fn frame(&self) -> &[u8] {
        &self.frame
    }

    /// Its class.
    pub fn class(&self) -> Class {
        self.class
    }

    /// Its inner flow's hash.
    pub fn flow(&self) -> FlowHash {
        self.flow
    }
}

/// What a config change asks of the driver ([`Router::apply`], [`super::Gateway::apply`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Outbound connections to open (new (branch, group, class)).
    pub open: Vec<ConnKey>,
    /// Outbound connections to close (their group or branch is gone).
    pub close: Vec<ConnKey>,
    /// Weights of groups that are new or whose weight changed, (branch, group, weight); already
    /// applied in the core, listed for logs and reports.
    pub weights: Vec<(BranchId, PathGroupId, u32)>,
}

/// Every outbound connection a config asks for: per (remote branch, path group, class) its
/// [`Config::connections_per_group`].
pub fn conn_keys(config: &Config) -> BTreeSet<ConnKey> {
    let mut out = BTreeSet::new();
    for r in &config.remote {
        let Ok(branch) = BranchId::new(r.id) else {
            continue;
        };
        for g in &r.path_groups {
            let Ok(group) = PathGroupId::new(g.id) else {
                continue;
            };
            for class in CLASSES {
                for index in 0..config.connections_per_group(class) {
                    out.insert(ConnKey {
                        branch,
                        group,
                        class,
                        index,
                    });
                }
            }
        }
    }
    out
}

/// The TUN-side core: owns the [`Agent`] (classifier, flow table, schedulers) and which outbound
/// connections are up.
#[derive(Debug, Clone)]
pub struct Router {
    agent: Agent,
    offload: bool,
    conns: BTreeSet<ConnKey>,
    /// The config's `connections_per_group` ([`crate::config::pool_size`] per class).
    connections_per_group: u8,
    up: BTreeSet<ConnKey>,
    /// Up connections with no live subflow ([`Router::handle_conn_paths`]).
    pathless: BTreeSet<ConnKey>,
    /// Keyed per gateway, so LAN hosts cannot aim flows at one queue bucket.
    flow_hasher: FlowHasher,
    /// `[qos] sparse_lane_kbit` ([`Config::sparse_lane_kbit`]): small Type II flows ride the
    /// group's Type I connection.
    sparse: Option<SparseLane>,
    counters: Counters,
}

/// A routed packet's decisions ([`Router::route`]): its connection (of its class, or the group's
/// Type I one in the sparse lane), its own class, framing, sequence number, ECN, flow hash.
struct Routed {
    conn: ConnKey,
    class: Class,
    frame_type: FrameType,
    seq: Option<u32>,
    ect: bool,
    flow: FlowHash,
}

fn sparse_config(config: &Config) -> Option<SparseLaneConfig> {
    SparseLaneConfig::from_kbit(config.sparse_lane_kbit(), config.qos.sparse_lane_total_kbit)
}

impl Router {
    /// A router for a validated config; `offload` when the TUN device was opened with
    /// `IFF_VNET_HDR` (every read starts with a virtio header). Every group starts down. The flow
    /// hash gets a random key ([`FlowHasher::random`]).
    pub fn new(config: &Config, offload: bool) -> Self {
        Self::with_flow_hasher(config, offload, FlowHasher::random())
    }

    /// [`Router::new`] with a given flow hasher (reproducible simulations and tests).
    pub fn with_flow_hasher(config: &Config, offload: bool, flow_hasher: FlowHasher) -> Self {
        Router {
            agent: Agent::new(config),
            offload,
            conns: conn_keys(config),
            connections_per_group: config.connections_per_group,
            up: BTreeSet::new(),
            pathless: BTreeSet::new(),
            flow_hasher,
            sparse: sparse_config(config).map(SparseLane::new),
            counters: Counters::default(),
        }
    }

    /// One packet read from TUN. `buf` is [`FRAME_HEADER_LEN`] reserved bytes, then (with
    /// offload) the virtio header, then the IP packet. Classifies and routes it, decides plain
    /// (`Ip`) or `IpVirtio` framing (a virtio header with no pending work is dropped), writes the
    /// frame header in place and names the connection. An `Err` is counted here.
    pub fn handle_tun_packet(
        &mut self,
        now: Instant,
        mut buf: BytesMut,
    ) -> Result<Outgoing, PacketDrop> {
        self.counters.tun_rx_packets += 1;
        let r = self.route(now, &mut buf);
        if let Err(d) = r {
            self.counters.drop(d);
        }
        let Routed {
            conn,
            class,
            frame_type,
            seq,
            ect,
            flow,
        } = r?;
        let ip_at = match frame_type {
            FrameType::IpVirtio => FRAME_HEADER_LEN + VIRTIO_NET_HDR_LEN,
            _ => FRAME_HEADER_LEN,
        };
        if conn.class != class {
            self.counters.sparse_lane_packets += 1;
        }
        if encode_header_in_place(&mut buf, frame_type, class, seq).is_err() {
            self.counters.drop(PacketDrop::Encode);
            return Err(PacketDrop::Encode);
        }
        Ok(Outgoing {
            conn,
            packet: QueuedPacket {
                frame: buf,
                ip_at,
                class,
                ect,
                flow,
            },
        })
    }

    fn route(&mut self, now: Instant, buf: &mut BytesMut) -> Result<Routed, PacketDrop> {
        let mut frame_type = FrameType::Ip;
        if self.offload {
            let vnet = buf
                .get(FRAME_HEADER_LEN..FRAME_HEADER_LEN + VIRTIO_NET_HDR_LEN)
                .ok_or(PacketDrop::Malformed)?;
            if vnet.iter().all(|&b| b == 0) {
                // No checksum or GSO work pending: drop the virtio header; the last 12 bytes of
                // the room before the IP packet become the frame header's.
                buf.advance(VIRTIO_NET_HDR_LEN);
            } else {
                frame_type = FrameType::IpVirtio;
            }
        }
        let ip_at = match frame_type {
            FrameType::IpVirtio => FRAME_HEADER_LEN + VIRTIO_NET_HDR_LEN,
            _ => FRAME_HEADER_LEN,
        };
        let ip = buf.get(ip_at..).ok_or(PacketDrop::Malformed)?;
        self.counters.tun_rx_bytes += ip.len() as u64;
        let route = self.agent.route(now, ip).map_err(|e| match e {
            RouteError::Malformed(_) => PacketDrop::Malformed,
            RouteError::External => PacketDrop::External,
            RouteError::NoGroupUp(_) => PacketDrop::NoGroupUp,
        })?;
        // The 5-tuple the classifier already parsed (ports are 0 without them): hashed once here.
        let flow = self.flow_hasher.hash(&route.info.flow);
        // The sparse lane (not the route's `lane`, the index of its connection in the pool).
        let sparse = match self.sparse.as_mut() {
            Some(s) if route.class == Class::TypeII && route.seq.is_none() => {
                s.admit(now, flow, ip.len())
            }
            _ => false,
        };
        let conn = sparse
            .then(|| self.pick_conn_of(&route, Class::TypeI))
            .flatten()
            .filter(|k| !self.pathless.contains(k))
            .or_else(|| self.pick_conn_of(&route, route.class))
            .ok_or(PacketDrop::NoConnection)?;
        Ok(Routed {
            conn,
            class: route.class,
            frame_type,
            seq: route.seq,
            ect: route.info.ect(),
            flow,
        })
    }

    /// The connection of a routed packet: of the group's connections of its class, the one its
    /// lane names when that is up with live subflows, else the next such one after it, else the
    /// next one up (the group stays up while any is, [`Router::refresh_branch`]).
    ///
    /// `class` is the route's own, or Type I for a packet in the sparse lane ([`super::sparse`]).
    fn pick_conn_of(&self, route: &crate::agent::Route, class: Class) -> Option<ConnKey> {
        let n = pool_size(self.connections_per_group, class);
        let start = route.lane % n;
        let key = |i: u8| ConnKey {
            branch: route.branch,
            group: route.group,
            class,
            index: (start + i) % n,
        };
        let live = (0..n)
            .map(key)
            .find(|k| self.up.contains(k) && !self.pathless.contains(k));
        live.or_else(|| (0..n).map(key).find(|k| self.up.contains(k)))
    }

    /// Outbound connection `conn` is established: its group goes up when every class connection
    /// of the group is up ([`Router::refresh_branch`]). Returns the groups that changed.
    pub fn handle_conn_up(&mut self, conn: ConnKey) -> Vec<Event> {
        if !self.conns.contains(&conn) {
            return Vec::new();
        }
        self.up.insert(conn);
        // A new establishment starts with live subflows.
        self.pathless.remove(&conn);
        self.refresh_branch(conn.branch)
    }

    /// Outbound connection `conn` is gone: its group goes down (its flows move on their next
    /// packet). Returns the groups that changed.
    pub fn handle_conn_down(&mut self, conn: ConnKey) -> Vec<Event> {
        self.up.remove(&conn);
        self.pathless.remove(&conn);
        self.refresh_branch(conn.branch)
    }

    /// Outbound connection `conn` is established but fast failover took out every one of its
    /// subflows (`live == false`: every member path of its group crosses a dead port or
    /// transit), or one is back (`live == true`). A group with such a connection goes down while
    /// another group to the same branch is fully up, so its flows move at once instead of after
    /// the keepalive liveness (3 s) closed the connection; with no such group it stays up (its
    /// packets wait in the connection for a path to come back rather than being dropped here).
    /// Flows that moved stay where they went when it comes back. Returns the groups that
    /// changed.
    pub fn handle_conn_paths(&mut self, conn: ConnKey, live: bool) -> Vec<Event> {
        if !self.up.contains(&conn) {
            return Vec::new();
        }
        let changed = if live {
            self.pathless.remove(&conn)
        } else {
            self.pathless.insert(conn)
        };
        if changed {
            self.refresh_branch(conn.branch)
        } else {
            Vec::new()
        }
    }

    /// The group-up rule, for every group to `branch`: a path group is *connected* when every
    /// tunnelled class's connection is up, and *healthy* when none of them has lost all its
    /// subflows. It is up when healthy, or when connected and no group to the branch is healthy.
    fn refresh_branch(&mut self, branch: BranchId) -> Vec<Event> {
        let groups: BTreeSet<PathGroupId> = self
            .conns
            .iter()
            .filter(|k| k.branch == branch)
            .map(|k| k.group)
            .collect();
        // Per class, the group's connections (its pool).
        let pool = |r: &Self, group: PathGroupId, class: Class| {
            let n = pool_size(r.connections_per_group, class);
            (0..n).map(move |index| ConnKey {
                branch,
                group,
                class,
                index,
            })
        };
        // Connected: every class has a connection up; healthy: every class has one up with
        // live subflows.
        let connected = |r: &Self, g: PathGroupId| {
            CLASSES
                .iter()
                .all(|&c| pool(r, g, c).any(|k| r.up.contains(&k)))
        };
        let healthy = |r: &Self, g: PathGroupId| {
            CLASSES
                .iter()
                .all(|&c| pool(r, g, c).any(|k| r.up.contains(&k) && !r.pathless.contains(&k)))
        };
        let any_healthy = groups.iter().any(|&g| healthy(self, g));
        let mut events = Vec::new();
        for g in groups {
            let up = healthy(self, g) || (connected(self, g) && !any_healthy);
            if self.agent.set_group_up(branch, g, up) {
                events.push(Event::Group {
                    branch,
                    group: g,
                    up,
                });
            }
        }
        events
    }

    /// Applies a new config keeping the flow table ([`Agent::reconfigure`]): a flow whose path
    /// group stays never moves. Returns the connections to open and close and the new weights;
    /// group state changes go to `events`.
    pub fn apply(&mut self, config: &Config, events: &mut impl Extend<Event>) -> Plan {
        let old_weights = self.weights();
        let wanted = conn_keys(config);
        let plan_open = wanted.difference(&self.conns).copied().collect();
        let plan_close: Vec<ConnKey> = self.conns.difference(&wanted).copied().collect();
        self.agent.reconfigure(config);
        self.conns = wanted;
        self.connections_per_group = config.connections_per_group;
        match (self.sparse.as_mut(), sparse_config(config)) {
            (Some(lane), Some(c)) => lane.set_config(c),
            (_, c) => self.sparse = c.map(SparseLane::new),
        }
        self.up.retain(|k| self.conns.contains(k));
        self.pathless.retain(|k| self.conns.contains(k));
        let branches: BTreeSet<BranchId> = self.conns.iter().map(|k| k.branch).collect();
        for b in branches {
            events.extend(self.refresh_branch(b));
        }
        let weights = self
            .weights()
            .into_iter()
            .filter(|w| !old_weights.contains(w))
            .collect();
        Plan {
            open: plan_open,
            close: plan_close,
            weights,
        }
    }

    /// Every configured group's weight, sorted by (branch, group).
    fn weights(&self) -> Vec<(BranchId, PathGroupId, u32)> {
        let all: BTreeSet<(BranchId, PathGroupId, u32)> = self
            .conns
            .iter()
            .filter_map(|k| {
                let g = self.agent.scheduler(k.branch)?.groups().get(k.group)?;
                Some((k.branch, k.group, g.weight))
            })
            .collect();
        all.into_iter().collect()
    }

    /// Records a group's measured throughput (the `throughput` selection policy).
    pub fn set_group_rate(&mut self, branch: BranchId, group: PathGroupId, bytes_per_s: u64) {
        self.agent.set_group_rate(branch, group, bytes_per_s);
    }

    /// Records a group's measured round trip in µs (0: unknown; for the low-delay flows).
    pub fn set_group_delay(&mut self, branch: BranchId, group: PathGroupId, delay_us: u32) {
        self.agent.set_group_delay(branch, group, delay_us);
    }

    /// Keeps flow `key` on the lowest-delay group ([`Agent::prefer_low_delay`]): the driver
    /// calls it with the reverse of each flow the receiver starts resequencing
    /// ([`super::Receiver::poll_new_flow`]).
    pub fn prefer_low_delay(&mut self, now: Instant, key: crate::classifier::FlowKey) -> bool {
        self.agent.prefer_low_delay(now, key)
    }

    /// The configured outbound connections.
    pub fn conns(&self) -> &BTreeSet<ConnKey> {
        &self.conns
    }

    /// Whether outbound connection `conn` is up.
    pub fn is_conn_up(&self, conn: ConnKey) -> bool {
        self.up.contains(&conn)
    }

    /// Whether outbound connection `conn` is up but has no live subflow
    /// ([`Router::handle_conn_paths`]).
    pub fn is_conn_pathless(&self, conn: ConnKey) -> bool {
        self.pathless.contains(&conn)
    }

    /// The agent (flow table, schedulers) for inspection.
    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// Counters of this part (TUN reads and the drops decided here).
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// When [`Router::handle_timeout`] must run (idle flow expiry).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.agent.poll_timeout()
    }

    /// Runs due timers; returns the number of flows forgotten.
    pub fn handle_timeout(&mut self, now: Instant) -> usize {
        self.agent.handle_timeout(now)
    }
}
