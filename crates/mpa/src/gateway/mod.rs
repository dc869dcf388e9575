//! The gateway core: the whole per-packet logic of one MMS gateway (seed 000 §II-B, the MPA and
//! TC; seed 001 §III-C/D, striping and resequencing) with no sockets, no clock reads (time is a
//! parameter) and bounded memory, in the sans-IO style of quinn-proto's `Connection` and
//! firezone's connlib: `handle_*(now, input)`, `poll_*() -> Option<output>`, `poll_timeout()`.
//! The driver (`mmsg`) owns TUN and the MPTCP sockets, reads into buffers it owns and writes what
//! the core hands back.
//!
//! It composes the existing cores and duplicates none of them: [`crate::agent::Agent`]
//! (classifier, flow table, schedulers), [`crate::queue::FairQueue`] (strict priority,
//! per-flow fair queueing, CoDel per flow), [`crate::framing`], [`crate::keepalive::Liveness`] and
//! [`crate::resequencer::Resequencer`].
//!
//! # Parts, for a multi-task driver
//! - [`Router`] (the TUN reader task): classify, route, frame; which outbound connections are up
//!   and the group-up rule (a path group is up when every tunnelled class's connection of it is
//!   up, unless one of them lost every subflow while another group to the branch is fully up:
//!   [`Router::handle_conn_paths`]); [`Router::apply`] for a new config, keeping the flow table.
//! - [`ConnCore`] (one per connection, the writer task, locked with the TUN task that enqueues and
//!   the reader that reports arrivals): the connection's queue and liveness, keepalives.
//! - [`Receiver`] (the readers and the resequencer timer, one lock): delivery to TUN, resequencing
//!   of striped frames, the virtio-or-plain decision.
//! - [`Gateway`]: all of them for single-threaded use (tests, simulations, a one-task driver).
//!
//! # Call order
//! 1. [`Gateway::new`] from the validated config; for every outbound connection the driver
//!    establishes (hello sent) or accepts (hello checked), [`Gateway::handle_conn_up`]; when one
//!    fails (EOF, IO error, invalid stream), [`Gateway::handle_conn_down`]; when fast failover
//!    took out every subflow of an outbound one, or one is back, [`Gateway::handle_conn_paths`].
//! 2. Per packet read from TUN: [`Gateway::handle_tun_packet`], then wake that connection's writer.
//! 3. Per connection whose socket can take more: [`Gateway::poll_transmit`] until `None`.
//! 4. Per socket read: [`Gateway::handle_frame`] for each frame the driver's decoder
//!    ([`crate::framing::InboundConnection`] / [`crate::framing::Deframer`]) yields; then
//!    [`Gateway::poll_tun_write`] until `None`.
//! 5. At [`Gateway::poll_timeout`]: [`Gateway::handle_timeout`], then [`Gateway::poll_event`]
//!    until `None` (close dead connections, log group changes), [`Gateway::poll_transmit`]
//!    (keepalives) and [`Gateway::poll_tun_write`] (resequencer releases).
//! 6. On a new config: [`Gateway::apply`] → [`Plan`]: open and close the connections it lists.
//!
//! # The packet path (for docs/)
//! Out (TUN → wire), in the sending gateway:
//! 1. **Read**: the driver reads TUN into a buffer behind [`crate::framing::FRAME_HEADER_LEN`]
//!    reserved bytes (with offload, the virtio header comes first).
//! 2. **Classify and route**: [`Router::handle_tun_packet`] → [`crate::agent::Agent::route`]:
//!    the TC's class and destination branch, then the flow table's path group (new flows ask the
//!    scheduler; striped flows get a group and a sequence number per packet).
//! 3. **Frame**: still in `handle_tun_packet`, plain `Ip` or `IpVirtio` (a virtio header with no
//!    pending work is dropped), header written in place by
//!    [`crate::framing::encode_header_in_place`]: no copy.
//! 4. **Queue**: [`ConnCore::enqueue`] on the connection (branch, group, class): strict
//!    priority, the flow's bucket by the hash the router computed ([`QueuedPacket::flow`]); at the
//!    bounds the fattest flow loses packets from its head.
//! 5. **Dequeue**: [`ConnCore::poll_transmit`]: Type I first, new (sparse) flows before old ones,
//!    deficit round robin between flows, per-flow CoDel drops counted, CE set when
//!    CoDel marks; a keepalive when the connection was idle for a second.
//! 6. **Write**: the driver writes the frames to that connection's MPTCP socket (one writer per
//!    socket, so frames never interleave).
//!
//! In (wire → TUN), in the receiving gateway:
//! 1. **Read**: the driver appends socket bytes to the connection's receive buffer
//!    ([`ConnCore::on_receive`] keeps it alive).
//! 2. **Deframe**: [`crate::framing::InboundConnection::decode`] yields the hello once, then
//!    complete, checked frames.
//! 3. **Account and admit**: [`ConnCore::handle_frame`]: liveness, keepalive and control frames
//!    end here; then [`admit`]: the inner source must lie in the sending branch's LAN prefixes
//!    ([`AllowedSources`], WireGuard's AllowedIPs) and a virtio header must fit its packet
//!    ([`crate::virtio`]); otherwise dropped and counted, before any resequencing.
//! 4. **Resequence**: [`Receiver::handle_frame`]: unsequenced frames pass; striped ones (`FLAG_SEQ`)
//!    go through [`crate::resequencer::Resequencer::handle_frame_on`] per inner flow.
//! 5. **Decide the TUN format**: [`Receiver::poll_tun_write`] yields [`TunWrite`]: a virtio
//!    header exactly when the local TUN has offload (zero for plain packets).
//! 6. **Write**: the driver writes `vnet` + `ip` to TUN.

mod conn;
mod receiver;
mod router;
pub mod sparse;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_admit;

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use bytes::BytesMut;

pub use conn::{ConnCore, Transmit};
pub use receiver::{
    admit, fuzz_check_inbound, tun_write, AllowedSources, Receiver, TunWrite, MAX_PENDING_TUN_BYTES,
};
pub use router::{conn_keys, Outgoing, Plan, QueuedPacket, Router};

use crate::config::Config;
use crate::framing::Frame;
use crate::queue::AqmConfig;
use crate::{BranchId, Class, PathGroupId};

/// The classes that get a connection per path group (Type III is never tunnelled).
pub const CLASSES: [Class; 2] = [Class::TypeI, Class::TypeII];

/// A tunnel connection's identity: (remote branch, path group, class, index). For an outbound
/// connection the remote is its destination, for an inbound one the source of its hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnKey {
    /// The remote branch.
    pub branch: BranchId,
    /// The path group (the outer port `0xB00G`).
    pub group: PathGroupId,
    /// Type I or Type II.
    pub class: Class,
    /// Which of the (branch, group, class)'s connections: 0..`connections_per_group`
    /// ([`crate::config::Config::connections_per_group`]; the hello's index).
    pub index: u8,
}

impl ConnKey {
    /// The first (often the only) connection of (`branch`, `group`, `class`).
    pub fn first(branch: BranchId, group: PathGroupId, class: Class) -> Self {
        ConnKey {
            branch,
            group,
            class,
            index: 0,
        }
    }
}

/// Who opened a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Direction {
    /// We connected: it carries our packets to the remote (and its keepalives back).
    Outbound,
    /// The remote connected: it carries its packets to us (and our keepalives back).
    Inbound,
}

/// One connection of a gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId {
    /// (remote branch, group, class).
    pub key: ConnKey,
    /// Who opened it.
    pub dir: Direction,
}

impl ConnId {
    /// The outbound connection `key`.
    pub fn outbound(key: ConnKey) -> Self {
        ConnId {
            key,
            dir: Direction::Outbound,
        }
    }

    /// The inbound connection `key`.
    pub fn inbound(key: ConnKey) -> Self {
        ConnId {
            key,
            dir: Direction::Inbound,
        }
    }
}

/// Something the driver must act on or log ([`Gateway::poll_event`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A path group went up or down (INFO log).
    Group {
        /// The remote branch.
        branch: BranchId,
        /// The group.
        group: PathGroupId,
        /// Its new state.
        up: bool,
    },
    /// The peer was silent for the liveness timeout: the connection is down in the core already;
    /// close its socket (and reconnect, for an outbound one).
    Close(ConnId),
}

/// Why a packet was not carried, one counter each ([`Counters::drops`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PacketDrop {
    /// From TUN: not a parseable IP packet (or a truncated virtio header); from a peer: an
    /// `IpVirtio` frame shorter than its header.
    Malformed,
    /// Type III: no remote branch has the destination.
    External,
    /// No path group towards the destination branch is up.
    NoGroupUp,
    /// The routed connection is not up or has no queue (a driver race or a misuse).
    NoConnection,
    /// The frame encoder refused the packet (the peer's decoder would have).
    Encode,
    /// Dropped at the queue's bounds (from the head of the fattest flow, or a packet larger than
    /// the byte bound).
    QueueFull,
    /// CoDel dropped it (not ECN-capable).
    Codel,
    /// It was queued on a connection that went down.
    ConnClosed,
    /// A virtio frame asking for offload work, but the local TUN has no offload.
    VirtioUnsupported,
    /// The driver did not drain [`Gateway::poll_tun_write`] ([`MAX_PENDING_TUN_BYTES`]).
    TunBacklog,
    /// A frame for a connection the core does not know as up.
    UnknownConn,
    /// From a peer: the inner source address is not in the sending branch's LAN prefixes
    /// ([`AllowedSources`]).
    SpoofedSource,
    /// From a peer: an `IpVirtio` frame whose virtio header does not fit its packet
    /// ([`crate::virtio::validate`]).
    BadVirtio,
}

impl PacketDrop {
    /// Every reason, in counter order.
    pub const ALL: [PacketDrop; 13] = [
        PacketDrop::Malformed,
        PacketDrop::External,
        PacketDrop::NoGroupUp,
        PacketDrop::NoConnection,
        PacketDrop::Encode,
        PacketDrop::QueueFull,
        PacketDrop::Codel,
        PacketDrop::ConnClosed,
        PacketDrop::VirtioUnsupported,
        PacketDrop::TunBacklog,
        PacketDrop::UnknownConn,
        PacketDrop::SpoofedSource,
        PacketDrop::BadVirtio,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

/// Monotonic counters of one part (or, from [`Gateway::counters`], all of them summed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Packets read from TUN (handed to [`Router::handle_tun_packet`]).
    pub tun_rx_packets: u64,
    /// Their IP bytes.
    pub tun_rx_bytes: u64,
    /// Data frames handed out by [`ConnCore::poll_transmit`].
    pub frames_tx: u64,
    /// Their bytes (headers included).
    pub bytes_tx: u64,
    /// Keepalives handed out.
    pub keepalives_tx: u64,
    /// Packets CE-marked by CoDel.
    pub ce_marks: u64,
    /// IP frames received.
    pub frames_rx: u64,
    /// Their payload bytes.
    pub bytes_rx: u64,
    /// Keepalives received.
    pub keepalives_rx: u64,
    /// Control frames received (not handled by this core).
    pub control_rx: u64,
    /// Frames of unknown type received (skipped).
    pub unknown_rx: u64,
    /// Packets handed out by [`Receiver::poll_tun_write`].
    pub tun_tx_packets: u64,
    /// Their IP bytes.
    pub tun_tx_bytes: u64,
    /// Connections declared dead by liveness.
    pub dead: u64,
    /// Type II packets sent on their group's Type I connection (the sparse lane,
    /// [`sparse`]).
    pub sparse_lane_packets: u64,
    drops: [u64; PacketDrop::ALL.len()],
}

impl Counters {
    /// Packets dropped for `reason`.
    pub fn drops(&self, reason: PacketDrop) -> u64 {
        self.drops.get(reason.index()).copied().unwrap_or(0)
    }

    /// Packets dropped for any reason.
    pub fn drops_total(&self) -> u64 {
        self.drops.iter().sum()
    }

    fn drop(&mut self, reason: PacketDrop) {
        if let Some(c) = self.drops.get_mut(reason.index()) {
            *c += 1;
        }
    }

    fn add(&mut self, o: &Counters) {
        self.tun_rx_packets += o.tun_rx_packets;
        self.tun_rx_bytes += o.tun_rx_bytes;
        self.frames_tx += o.frames_tx;
        self.bytes_tx += o.bytes_tx;
        self.keepalives_tx += o.keepalives_tx;
        self.ce_marks += o.ce_marks;
        self.frames_rx += o.frames_rx;
        self.bytes_rx += o.bytes_rx;
        self.keepalives_rx += o.keepalives_rx;
        self.control_rx += o.control_rx;
        self.unknown_rx += o.unknown_rx;
        self.tun_tx_packets += o.tun_tx_packets;
        self.tun_tx_bytes += o.tun_tx_bytes;
        self.dead += o.dead;
        self.sparse_lane_packets += o.sparse_lane_packets;
        for (a, b) in self.drops.iter_mut().zip(o.drops) {
            *a += b;
        }
    }
}

/// Most events waiting for [`Gateway::poll_event`]: one group change per (branch, group) and one
/// close per connection fit (14 × 16 groups + 2 × 14 × 16 × 2 connections < 2,048); beyond that
/// the oldest are dropped (the driver does not poll).
pub const MAX_EVENTS: usize = 2_048;

/// One gateway's core for single-threaded use: a [`Router`], a [`ConnCore`] per connection and a
/// [`Receiver`] (module docs: call order).
#[derive(Debug)]
pub struct Gateway {
    router: Router,
    conns: BTreeMap<ConnId, ConnCore>,
    receiver: Receiver,
    /// Which inner sources each remote may send from (rebuilt by [`Gateway::apply`]).
    sources: AllowedSources,
    aqm: AqmConfig,
    events: VecDeque<Event>,
    next_lane: u64,
    /// Counters of parts that are gone (connections removed) and of the gateway itself.
    counters: Counters,
}

impl Gateway {
    /// The core of a gateway with a validated `config`; `offload` when its TUN device has
    /// `IFF_VNET_HDR`. Allocates every outbound connection's queue; everything starts down.
    pub fn new(config: &Config, offload: bool) -> Self {
        let router = Router::new(config, offload);
        let aqm = AqmConfig::from(&config.queue);
        let conns = router
            .conns()
            .iter()
            .map(|k| (ConnId::outbound(*k), ConnCore::outbound(*k, aqm)))
            .collect();
        let params = config.striping.as_ref().map(|s| s.reseq_params());
        Gateway {
            router,
            conns,
            receiver: Receiver::new(params, offload),
            sources: AllowedSources::from_config(config),
            aqm,
            events: VecDeque::new(),
            next_lane: 1,
            counters: Counters::default(),
        }
    }

    /// One packet read from TUN (layout: [`Router::handle_tun_packet`]): routed, framed and
    /// queued. Returns the connection whose writer to wake, or why it was dropped (counted).
    pub fn handle_tun_packet(
        &mut self,
        now: Instant,
        buf: BytesMut,
    ) -> Result<ConnKey, PacketDrop> {
        let out = self.router.handle_tun_packet(now, buf)?;
        let Some(c) = self.conns.get_mut(&ConnId::outbound(out.conn)) else {
            self.counters.drop(PacketDrop::NoConnection);
            return Err(PacketDrop::NoConnection);
        };
        c.enqueue(now, out.packet)?;
        Ok(out.conn)
    }

    /// The next frame to write to connection `conn`'s socket ([`ConnCore::poll_transmit`]).
    pub fn poll_transmit(&mut self, conn: ConnId, now: Instant) -> Option<Transmit> {
        self.conns.get_mut(&conn)?.poll_transmit(now)
    }

    /// One complete frame decoded from connection `conn`: liveness, then the checks of
    /// [`admit`] (inner source in the sending branch's LAN prefixes, a sane virtio header; else
    /// dropped and counted), then delivery (drain [`Gateway::poll_tun_write`] afterwards).
    pub fn handle_frame(&mut self, conn: ConnId, now: Instant, frame: Frame) {
        let Some(c) = self.conns.get_mut(&conn).filter(|c| c.is_up()) else {
            self.counters.drop(PacketDrop::UnknownConn);
            return;
        };
        let lane = c.lane();
        if let Some(ip) = c.handle_frame(now, frame) {
            match admit(&self.sources, conn.key.branch, &ip) {
                Ok(()) => self.receiver.handle_frame(now, lane, ip),
                Err(d) => self.counters.drop(d),
            }
        }
        // The reverse of a flow we resequence (its ACKs) goes on the lowest-delay group.
        while let Some(key) = self.receiver.poll_new_flow() {
            self.router.prefer_low_delay(now, key.reversed());
        }
    }

    /// The next packet to write to TUN.
    pub fn poll_tun_write(&mut self) -> Option<TunWrite> {
        self.receiver.poll_tun_write()
    }

    /// Connection `conn` was established (or accepted) at `now`; an inbound one replaces any
    /// earlier inbound connection with the same key (close that one). An outbound connection not
    /// in the config is ignored.
    pub fn handle_conn_up(&mut self, conn: ConnId, now: Instant) {
        let lane = self.next_lane;
        let core = match conn.dir {
            Direction::Outbound => match self.conns.get_mut(&conn) {
                Some(c) => c,
                None => return,
            },
            Direction::Inbound => self
                .conns
                .entry(conn)
                .or_insert_with(|| ConnCore::inbound(conn.key)),
        };
        self.next_lane += 1;
        core.handle_up(now, lane);
        if conn.dir == Direction::Outbound {
            let ev = self.router.handle_conn_up(conn.key);
            self.push_events(ev);
        }
    }

    /// Connection `conn` failed or was closed at `now`: its group goes down (outbound), its
    /// queued packets are dropped and counted ([`ConnCore::handle_down`]).
    pub fn handle_conn_down(&mut self, conn: ConnId, now: Instant) {
        self.conn_down(conn, now);
    }

    /// Outbound connection `conn` has no live subflow (`live == false`) or has one again
    /// ([`Router::handle_conn_paths`]): its queue stays; its group goes down while another group
    /// to the branch is fully up. Inbound connections are not routed to: ignored.
    pub fn handle_conn_paths(&mut self, conn: ConnId, live: bool) {
        if conn.dir == Direction::Outbound {
            let ev = self.router.handle_conn_paths(conn.key, live);
            self.push_events(ev);
        }
    }

    fn conn_down(&mut self, conn: ConnId, now: Instant) {
        match conn.dir {
            Direction::Outbound => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.handle_down(now);
                }
                let ev = self.router.handle_conn_down(conn.key);
                self.push_events(ev);
            }
            Direction::Inbound => {
                if let Some(mut c) = self.conns.remove(&conn) {
                    c.handle_down(now);
                    self.counters.add(c.counters());
                }
            }
        }
    }

    fn push_events(&mut self, evs: impl IntoIterator<Item = Event>) {
        for ev in evs {
            if self.events.len() >= MAX_EVENTS {
                self.events.pop_front();
            }
            self.events.push_back(ev);
        }
    }

    /// The next event (group changes, connections to close).
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The earliest time [`Gateway::handle_timeout`] must run.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.conns
            .values()
            .filter_map(ConnCore::poll_timeout)
            .chain(self.router.poll_timeout())
            .chain(self.receiver.poll_timeout())
            .min()
    }

    /// Runs every due timer: liveness (keepalives due, dead connections → [`Event::Close`] and
    /// group down), idle flow expiry, resequencer holds.
    pub fn handle_timeout(&mut self, now: Instant) {
        let mut dead = Vec::new();
        for c in self.conns.values_mut() {
            if c.poll_timeout().is_some_and(|t| t <= now) {
                if let Some(ev) = c.handle_timeout(now) {
                    dead.push(ev);
                }
            }
        }
        for ev in dead {
            self.push_events([ev]);
            if let Event::Close(id) = ev {
                self.conn_down(id, now);
            }
        }
        if self.router.poll_timeout().is_some_and(|t| t <= now) {
            self.router.handle_timeout(now);
        }
        if self.receiver.poll_timeout().is_some_and(|t| t <= now) {
            self.receiver.handle_timeout(now);
        }
    }

    /// Applies a new config: the flow table is kept (a flow whose group stays never moves),
    /// the resequencer's `T` follows `[striping]` (its `S` and LRF stay as built), new outbound
    /// connections get a queue (down until [`Gateway::handle_conn_up`]), removed ones
    /// are dropped with their queued packets counted. The driver opens and closes what the
    /// [`Plan`] lists.
    pub fn apply(&mut self, config: &Config, now: Instant) -> Plan {
        let mut evs = Vec::new();
        let plan = self.router.apply(config, &mut evs);
        self.push_events(evs);
        self.aqm = AqmConfig::from(&config.queue);
        self.sources = AllowedSources::from_config(config);
        // `S` and the LRF stay as built (held frames depend on them); `T` follows the file.
        if let Some(st) = &config.striping {
            self.receiver.set_threshold(st.reseq_params().threshold);
        }
        for k in &plan.close {
            if let Some(mut c) = self.conns.remove(&ConnId::outbound(*k)) {
                c.handle_down(now);
                self.counters.add(c.counters());
            }
        }
        for k in &plan.open {
            self.conns
                .entry(ConnId::outbound(*k))
                .or_insert_with(|| ConnCore::outbound(*k, self.aqm));
        }
        plan
    }

    /// Records a group's measured throughput (the `throughput` selection policy).
    pub fn set_group_rate(&mut self, branch: BranchId, group: PathGroupId, bytes_per_s: u64) {
        self.router.set_group_rate(branch, group, bytes_per_s);
    }

    /// Records a group's measured round trip in µs (0: unknown; the low-delay flows).
    pub fn set_group_delay(&mut self, branch: BranchId, group: PathGroupId, delay_us: u32) {
        self.router.set_group_delay(branch, group, delay_us);
    }

    /// Changes the resequencer's release threshold `T` (an "auto" `T` sized from the paths).
    pub fn set_reseq_threshold(&mut self, threshold: crate::resequencer::Threshold) {
        self.receiver.set_threshold(threshold);
    }

    /// All counters, summed over the parts.
    pub fn counters(&self) -> Counters {
        let mut c = self.counters;
        c.add(self.router.counters());
        c.add(self.receiver.counters());
        for conn in self.conns.values() {
            c.add(conn.counters());
        }
        c
    }

    /// The router (agent, flow table, connection states).
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// The core of connection `conn`.
    pub fn conn(&self, conn: ConnId) -> Option<&ConnCore> {
        self.conns.get(&conn)
    }

    /// The receiver (resequencer counters).
    pub fn receiver(&self) -> &Receiver {
        &self.receiver
    }
}
