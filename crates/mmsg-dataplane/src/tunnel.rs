//! The IPoMP tunnel (seed 000 §II-B, §III-A): the TUN reader that feeds the [`mpa::agent::Agent`]
//! and the per-connection queues, the pre-established MPTCP connections (outbound to every
//! (remote branch, path group, class) on `0xB00G`, inbound on our `0xA00G`), their writer and
//! reader halves, liveness, subflow management and statistics.
//!
//! Tasks: one TUN reader; per outbound connection one supervisor task that connects with backoff
//! and then runs three futures (writer — the only one writing to the socket, so frames never
//! interleave —, reader, subflow manager) until one ends; per accepted connection one task
//! (hello check, then reader + keepalive writer). Only outbound connections carry our data;
//! inbound ones carry the peer's data to us and our keepalives back.
//!
//! With `[tls]` ([`crate::secure`], docs/security.md) every connection runs TLS 1.3 with mutual
//! authentication first (the dialer checks the server is the dialled branch, the acceptor that
//! the client certificate is the hello's source branch); the hello and the frames travel inside
//! it. Reader and writer are generic over the stream halves, clear or TLS alike.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::{self, IoSlice};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, BytesMut};
use mpa::agent::{Agent, RouteError};
use mpa::config::Config;
use mpa::framing::{
    encode_frame, encode_header_in_place, Deframer, Frame, FrameType, Hello, Inbound,
    InboundConnection, InboundError, FRAME_HEADER_LEN, MAX_FRAME_LEN, VIRTIO_NET_HDR_LEN,
};
use mpa::keepalive::{Liveness, LivenessEvent};
use mpa::queue::{AqmConfig, Dequeued, DropReason, PriorityQueue};
use mpa::write_size::WriteSizer;
use mpa::{BranchId, Class, PathGroupId};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Notify};
use tracing::{debug, info, trace, warn};

use crate::genl::SubflowCreate;
use crate::mptcp_pm::MptcpPathManager;
use crate::secure::{self, Rekey, TlsState};
use crate::stats::{ConnStatus, Stats, SubflowStatus};
use crate::sys;
use crate::tun::{Tun, MAX_TUN_READ};

/// Most packets written per `write_vectored` batch (well under IOV_MAX = 1024).
const MAX_BATCH_PACKETS: usize = 64;
/// Most bytes dequeued per batch: 256 KiB keeps one batch below a typical socket's free space, so
/// packets wait in our CoDel queue (not in the socket) when the paths are full.
const MAX_BATCH_BYTES: usize = 256 * 1024;
/// Receive buffer growth per read. Frames are split off without copying; the buffer reclaims its
/// space once they were written to TUN. Worst case per connection: one chunk + one maximum frame.
const RX_CHUNK: usize = 128 * 1024;
/// The TUN read arena: packets are split off it (`split_to`), so one allocation serves many reads.
/// Worst case held: the queues' bounds (mpa::queue::MAX_QUEUE_BYTES per class and connection).
const TUN_ARENA: usize = 1024 * 1024;
/// Packets read from TUN per wake-up before yielding (fairness with the other tasks).
const TUN_BATCH: usize = 64;
/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long an accepted connection may take to send its hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// Reconnect backoff: first delay and cap (doubling in between).
const BACKOFF_MIN: Duration = Duration::from_millis(200);
/// See [`BACKOFF_MIN`].
const BACKOFF_MAX: Duration = Duration::from_secs(10);
/// Subflow check period (MPTCP_SUBFLOW_ADDRS, MPTCP_INFO) and the first retry of a missing pair.
const SUBFLOW_CHECK: Duration = Duration::from_secs(1);
/// First retry of a subflow that was requested but is not there yet: longer than a SYN
/// retransmission (1 s), so a slow join is not requested twice.
const SUBFLOW_RETRY_MIN: Duration = Duration::from_secs(3);
/// Cap of the per-pair subflow retry backoff.
const SUBFLOW_RETRY_MAX: Duration = Duration::from_secs(30);

/// Options of the tunnel sockets.
#[derive(Debug, Clone, Copy)]
pub struct SocketOpts {
    /// TCP_MAXSEG pinned on the MPTCP sockets (0: kernel default).
    pub mss: u16,
    /// TCP_NOTSENT_LOWAT in bytes (0: not set).
    pub notsent_lowat: u32,
    /// SO_SNDBUF and SO_RCVBUF of the tunnel sockets in bytes (0: kernel autotuning).
    pub buffer: u32,
    /// Data per write at the connection's measured rate ([`mpa::write_size`]); zero: every write
    /// carries a whole batch.
    pub write_chunk: Duration,
}

/// How subflows are managed.
#[derive(Debug, Clone)]
pub enum PathManagement {
    /// Userspace PM: `SUBFLOW_CREATE` for every missing (local, remote) pair.
    Userspace(Arc<MptcpPathManager>),
    /// In-kernel PM (endpoints/limits set up elsewhere); we only observe.
    Kernel,
}

/// A connection's identity: (remote branch, path group, class).
pub type ConnKey = (BranchId, PathGroupId, Class);

/// The queue in front of one outbound connection.
#[derive(Debug)]
pub struct OutQueue {
    q: Mutex<PriorityQueue<(BytesMut, FrameType, Option<u32>)>>,
    notify: Notify,
    up: AtomicBool,
    /// Frame bytes written by this connection's writer (for the group's rate estimate).
    sent_bytes: AtomicU64,
    /// Microseconds the writer spent blocked in socket writes (and TLS flushes): near the whole
    /// time when the connection's paths are what limits it (reported to the controller as the
    /// group's `busy_us`, its capacity signal).
    busy_us: AtomicU64,
    /// The rate its congestion windows allow now, bit/s: Σ over established subflows of
    /// `cwnd · mss / srtt` ([`window_rate_bps`]), refreshed every [`SUBFLOW_CHECK`]; 0 while down.
    window_bps: AtomicU64,
    /// Σ `tcpi_bytes_acked` and Σ `tcpi_bytes_retrans` of its subflows now (refreshed with
    /// `window_bps`; they go backwards when a subflow closes): the group's loss ratio.
    /// The rate of what its subflows have in flight now, bit/s ([`inflight_rate_bps`]),
    /// refreshed with `window_bps`; 0 while down.
    inflight_bps: AtomicU64,
    acked_bytes: AtomicU64,
    retrans_bytes: AtomicU64,
    /// Bytes its MPTCP socket holds that are not in flight: `TIOCOUTQ` (not acked at the MPTCP
    /// level) minus Σ unacked segments × mss of its established subflows; refreshed with
    /// `window_bps`. (`SIOCOUTQNSD` is ~0 on MPTCP sockets: the data moves on to the subflows'
    /// queues at once, measured.)
    queued_bytes: AtomicU64,
}

impl OutQueue {
    fn new(aqm: AqmConfig) -> Self {
        OutQueue {
            q: Mutex::new(PriorityQueue::new(aqm)),
            notify: Notify::new(),
            up: AtomicBool::new(false),
            sent_bytes: AtomicU64::new(0),
            busy_us: AtomicU64::new(0),
            window_bps: AtomicU64::new(0),
            inflight_bps: AtomicU64::new(0),
            acked_bytes: AtomicU64::new(0),
            retrans_bytes: AtomicU64::new(0),
            queued_bytes: AtomicU64::new(0),
        }
    }
}

/// A connection went up or down (to the TUN task, which owns the agent).
#[derive(Debug, Clone, Copy)]
pub struct ConnEvent {
    key: ConnKey,
    up: bool,
}

/// What the TUN task (owner of the agent) is told.
#[derive(Debug, Clone)]
pub enum TunEvent {
    /// A connection went up or down.
    Conn(ConnEvent),
    /// New WRR weights of existing path groups (the controller published them): the schedulers
    /// change in place, no flow moves.
    Weights(Vec<(BranchId, PathGroupId, u32)>),
    /// Remotes, groups or classifier changed ([`Shared::config`] and the queues are already
    /// replaced): the agent is rebuilt from the new config, the up state of the connections
    /// that still exist is kept. Flows are re-assigned on their next packet.
    Reload,
}

/// Everything the tasks share.
#[derive(Debug)]
pub struct Shared {
    /// The validated configuration; replaced as a whole when the controller pushes a new one
    /// (read it with [`Shared::config`]).
    config: RwLock<Arc<Config>>,
    /// Our branch.
    pub own: BranchId,
    /// The TUN device.
    pub tun: Tun,
    /// Counters and registry.
    pub stats: Arc<Stats>,
    /// Subflow management.
    pub pm: PathManagement,
    /// Socket options.
    pub opts: SocketOpts,
    /// `[tls]` in mode `tls`: the credentials every connection is authenticated with; `None`:
    /// clear tunnel (docs/security.md).
    pub tls: Option<Arc<TlsState>>,
    /// Outbound queues (the TUN task keeps its own copy, refreshed on [`TunEvent::Reload`]).
    queues: RwLock<BTreeMap<ConnKey, Arc<OutQueue>>>,
    events: mpsc::UnboundedSender<TunEvent>,
    /// With `[striping]`: the resequencer of sequenced frames from all peers (parameters from the
    /// start-up config).
    pub reseq: Option<Arc<crate::reseq::Reseq>>,
}

impl Shared {
    /// The configuration in use.
    pub fn config(&self) -> Arc<Config> {
        Arc::clone(&self.config.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The outbound queues.
    pub fn queues(&self) -> BTreeMap<ConnKey, Arc<OutQueue>> {
        self.queues
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn queue(&self, key: &ConnKey) -> Option<Arc<OutQueue>> {
        self.queues
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .cloned()
    }

    /// Replaces the configuration and the set of outbound queues (queues of connections that
    /// stay are kept, new ones are created, others dropped). Tell the TUN task with
    /// [`Shared::send`]`(`[`TunEvent::Reload`]`)` afterwards.
    pub fn replace_config(&self, config: Config) {
        let aqm = AqmConfig::from(&config.queue);
        let wanted = conn_keys(&config);
        {
            let mut q = self.queues.write().unwrap_or_else(PoisonError::into_inner);
            q.retain(|k, _| wanted.contains(k));
            for k in wanted {
                q.entry(k).or_insert_with(|| Arc::new(OutQueue::new(aqm)));
            }
        }
        *self.config.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(config);
    }

    /// Only the weights changed: stores the new config (same remotes, groups, classifier).
    pub fn replace_weights(&self, config: Config) {
        *self.config.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(config);
    }

    /// Sends an event to the TUN task.
    pub fn send(&self, ev: TunEvent) {
        let _ = self.events.send(ev);
    }

    /// Per path group (remote branch, group): tunnel bytes written so far and whether all its
    /// connections are up; then connections up and connections configured.
    pub fn group_report(&self) -> (Vec<mpa::gwchan::GroupReport>, u32, u32) {
        // Per group: summed over its connections, except the transport figures, which are its
        // busiest connection's (`busiest_sent`).
        let mut groups: BTreeMap<(u8, u8), (mpa::gwchan::GroupReport, u64)> = BTreeMap::new();
        let (mut up, mut total) = (0u32, 0u32);
        for ((b, g, _), oq) in self.queues() {
            let is_up = oq.up.load(Ordering::Relaxed);
            total += 1;
            up += u32::from(is_up);
            let (r, busiest_sent) = groups.entry((b.get(), g.get())).or_insert((
                mpa::gwchan::GroupReport {
                    branch: b.get(),
                    group: g.get(),
                    up: true,
                    ..mpa::gwchan::GroupReport::default()
                },
                0,
            ));
            let sent = oq.sent_bytes.load(Ordering::Relaxed);
            r.bytes_tx += sent;
            r.up &= is_up;
            r.busy_us += oq.busy_us.load(Ordering::Relaxed);
            r.queued_bytes += oq.queued_bytes.load(Ordering::Relaxed);
            // The class connections of a group share its paths; an idle one's window (initial
            // cwnd over a keepalive RTT) says nothing about them: the busiest connection's.
            if sent >= *busiest_sent {
                *busiest_sent = sent;
                r.window_bps = oq.window_bps.load(Ordering::Relaxed);
                r.inflight_bps = Some(oq.inflight_bps.load(Ordering::Relaxed));
                r.acked_bytes = oq.acked_bytes.load(Ordering::Relaxed);
                r.retrans_bytes = oq.retrans_bytes.load(Ordering::Relaxed);
            }
        }
        let groups = groups.into_values().map(|(r, _)| r).collect();
        (groups, up, total)
    }
}

/// Every outbound connection a config asks for: (remote branch, path group, class).
pub fn conn_keys(config: &Config) -> BTreeSet<ConnKey> {
    let mut out = BTreeSet::new();
    for r in &config.remote {
        let Some(b) = BranchId::new(r.id).ok() else {
            continue;
        };
        for g in &r.path_groups {
            let Some(g) = PathGroupId::new(g.id).ok() else {
                continue;
            };
            for c in CLASSES {
                out.insert((b, g, c));
            }
        }
    }
    out
}

/// The classes that get a connection per path group.
pub const CLASSES: [Class; 2] = [Class::TypeI, Class::TypeII];

/// Builds the shared state; returns it and the receiver of connection events for [`tun_loop`].
pub fn build(
    config: Config,
    own: BranchId,
    tun: Tun,
    stats: Arc<Stats>,
    pm: PathManagement,
    opts: SocketOpts,
    tls: Option<Arc<TlsState>>,
) -> (Arc<Shared>, mpsc::UnboundedReceiver<TunEvent>) {
    let aqm = AqmConfig::from(&config.queue);
    let queues = conn_keys(&config)
        .into_iter()
        .map(|k| (k, Arc::new(OutQueue::new(aqm))))
        .collect();
    let (tx, rx) = mpsc::unbounded_channel();
    let reseq = config
        .striping
        .as_ref()
        .map(|st| Arc::new(crate::reseq::Reseq::new(st)));
    (
        Arc::new(Shared {
            config: RwLock::new(Arc::new(config)),
            own,
            tun,
            stats,
            pm,
            opts,
            tls,
            queues: RwLock::new(queues),
            events: tx,
            reseq,
        }),
        rx,
    )
}

/// The registry name of a connection in `mmsg status`, e.g. `out b2 g0 type1`.
pub fn conn_name(dir: &str, key: ConnKey) -> String {
    format!("{dir} b{} g{} {}", key.0, key.1, key.2)
}

// ---------------------------------------------------------------------------------------------
// TUN → queues
// ---------------------------------------------------------------------------------------------

/// Reads TUN, routes every packet with the agent and queues it for its connection. Owns the agent;
/// applies connection up/down events (a group is up when all its class connections are).
pub async fn tun_loop(
    sh: Arc<Shared>,
    mut events: mpsc::UnboundedReceiver<TunEvent>,
) -> anyhow::Result<()> {
    let mut agent = Agent::new(&sh.config());
    let mut queues = sh.queues();
    let mut up: BTreeSet<ConnKey> = BTreeSet::new();
    let mut arena = BytesMut::with_capacity(TUN_ARENA);
    let mut next_expiry = Instant::now();
    let mut rates = GroupRates::default();
    let mut tick = tokio::time::interval(mpa::path_group::RATE_WINDOW);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        while let Ok(ev) = events.try_recv() {
            tun_event(&sh, &mut agent, &mut queues, &mut up, ev);
        }
        arena.reserve(FRAME_HEADER_LEN + MAX_TUN_READ);
        arena.put_bytes(0, FRAME_HEADER_LEN);
        let first = tokio::select! {
            r = sh.tun.read_into(&mut arena) => Some(r),
            ev = events.recv() => {
                if let Some(ev) = ev {
                    tun_event(&sh, &mut agent, &mut queues, &mut up, ev);
                }
                None
            }
            _ = tick.tick() => {
                rates.update(&queues, &mut agent, Instant::now());
                None
            }
        };
        let Some(first) = first else {
            arena.clear();
            continue;
        };
        let mut result = first.map(Some);
        let mut n_read = 0;
        loop {
            match result {
                Ok(Some(n)) => {
                    let pkt = arena.split_to(FRAME_HEADER_LEN + n);
                    handle_tun_packet(&sh, &queues, &mut agent, pkt);
                }
                Ok(None) => {
                    arena.clear();
                    break;
                }
                Err(e) => {
                    arena.clear();
                    if e.kind() != io::ErrorKind::WouldBlock {
                        // Counted per packet, never fatal; pause so a persistent error (device
                        // gone) does not spin.
                        debug!(error = %e, "TUN read failed");
                        Stats::inc(&sh.stats.tun_read_errors);
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    break;
                }
            }
            n_read += 1;
            if n_read >= TUN_BATCH {
                break;
            }
            arena.reserve(FRAME_HEADER_LEN + MAX_TUN_READ);
            arena.put_bytes(0, FRAME_HEADER_LEN);
            result = sh.tun.try_read_into(&mut arena);
        }
        let now = Instant::now();
        if now >= next_expiry {
            agent.handle_timeout(now);
            next_expiry = agent
                .poll_timeout()
                .unwrap_or(now + Duration::from_secs(1))
                .max(now + Duration::from_millis(100));
        }
    }
}

/// Per path group: the measured rate (what its connections carried), fed to the agent for the
/// `throughput` selection policy.
#[derive(Debug, Default)]
struct GroupRates {
    groups: BTreeMap<(BranchId, PathGroupId), (mpa::path_group::RateEstimator, u64)>,
}

impl GroupRates {
    fn update(
        &mut self,
        queues: &BTreeMap<ConnKey, Arc<OutQueue>>,
        agent: &mut Agent,
        now: Instant,
    ) {
        let mut totals: BTreeMap<(BranchId, PathGroupId), u64> = BTreeMap::new();
        for ((b, g, _), oq) in queues {
            *totals.entry((*b, *g)).or_default() += oq.sent_bytes.load(Ordering::Relaxed);
        }
        for (key, total) in totals {
            let (est, last) = self
                .groups
                .entry(key)
                .or_insert((Default::default(), total));
            let delta = total.saturating_sub(*last);
            *last = total;
            if let Some(rate) = est.record(now, delta) {
                agent.set_group_rate(key.0, key.1, rate);
            }
        }
    }
}

fn tun_event(
    sh: &Shared,
    agent: &mut Agent,
    queues: &mut BTreeMap<ConnKey, Arc<OutQueue>>,
    up: &mut BTreeSet<ConnKey>,
    ev: TunEvent,
) {
    match ev {
        TunEvent::Conn(ev) => apply_event(agent, up, ev),
        TunEvent::Weights(list) => {
            for (b, g, w) in list {
                agent.set_group_weight(b, g, w);
            }
            info!("path group weights updated in place");
        }
        TunEvent::Reload => {
            *queues = sh.queues();
            *agent = Agent::new(&sh.config());
            up.retain(|k| queues.contains_key(k));
            let groups: BTreeSet<(BranchId, PathGroupId)> =
                queues.keys().map(|(b, g, _)| (*b, *g)).collect();
            for (b, g) in groups {
                let group_up = CLASSES.iter().all(|c| up.contains(&(b, g, *c)));
                agent.set_group_up(b, g, group_up);
            }
            info!(
                connections = queues.len(),
                "agent rebuilt for the new config"
            );
        }
    }
}

fn apply_event(agent: &mut Agent, up: &mut BTreeSet<ConnKey>, ev: ConnEvent) {
    if ev.up {
        up.insert(ev.key);
    } else {
        up.remove(&ev.key);
    }
    let (b, g, _) = ev.key;
    let group_up = CLASSES.iter().all(|c| up.contains(&(b, g, *c)));
    if agent.set_group_up(b, g, group_up) {
        info!(
            branch = b.get(),
            pg = g.get(),
            up = group_up,
            "path group state"
        );
    }
}

fn handle_tun_packet(
    sh: &Shared,
    queues: &BTreeMap<ConnKey, Arc<OutQueue>>,
    agent: &mut Agent,
    mut pkt: BytesMut,
) {
    let now = Instant::now();
    let st = &sh.stats;
    let mut ftype = FrameType::Ip;
    if sh.tun.offload() {
        let plain = pkt
            .get(FRAME_HEADER_LEN..FRAME_HEADER_LEN + VIRTIO_NET_HDR_LEN)
            .is_some_and(|v| v.iter().all(|&b| b == 0));
        if plain {
            // No checksum or GSO work pending: drop the virtio header, send a plain IP frame (the
            // header's last 12 bytes of room become the frame header's).
            pkt.advance(VIRTIO_NET_HDR_LEN);
        } else {
            ftype = FrameType::IpVirtio;
        }
    }
    let ip_at = if ftype == FrameType::IpVirtio {
        FRAME_HEADER_LEN + VIRTIO_NET_HDR_LEN
    } else {
        FRAME_HEADER_LEN
    };
    let Some(ip) = pkt.get(ip_at..) else {
        Stats::inc(&st.drop_malformed);
        return;
    };
    Stats::inc(&st.tun_rx_packets);
    Stats::add(&st.tun_rx_bytes, ip.len() as u64);
    let route = match agent.route(now, ip) {
        Ok(r) => r,
        Err(RouteError::Malformed(e)) => {
            trace!(error = %e, "malformed packet from TUN");
            Stats::inc(&st.drop_malformed);
            return;
        }
        Err(RouteError::External) => {
            Stats::inc(&st.drop_external);
            return;
        }
        Err(RouteError::NoGroupUp(_)) => {
            Stats::inc(&st.drop_no_group);
            return;
        }
    };
    let Some(oq) = queues.get(&(route.branch, route.group, route.class)) else {
        Stats::inc(&st.drop_no_connection);
        return;
    };
    let len = pkt.len() - FRAME_HEADER_LEN;
    let res = match oq.q.lock() {
        Ok(mut q) => q.enqueue(
            now,
            route.class,
            (pkt, ftype, route.seq),
            len,
            route.info.ect(),
        ),
        Err(_) => return,
    };
    match res {
        Ok(()) => oq.notify.notify_one(),
        Err((_, DropReason::NotTunnelled)) => Stats::inc(&st.drop_external),
        Err(_) => Stats::inc(&st.drop_queue_full),
    }
}

// ---------------------------------------------------------------------------------------------
// Writers
// ---------------------------------------------------------------------------------------------

/// Writes all of `bufs` with `write_vectored`, at most `sizer.chunk()` bytes per syscall (see
/// [`mpa::write_size`]: small writes on unequal subflows, whole batches on fast ones).
async fn write_all_vectored<W: AsyncWrite + Unpin>(
    w: &mut W,
    bufs: &mut VecDeque<BytesMut>,
    sizer: &mut WriteSizer,
) -> io::Result<()> {
    while !bufs.is_empty() {
        let mut room = sizer.chunk();
        let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(MAX_BATCH_PACKETS);
        for b in bufs.iter().take(MAX_BATCH_PACKETS) {
            if room == 0 {
                break;
            }
            let n = b.len().min(room);
            slices.push(IoSlice::new(b.get(..n).unwrap_or(b)));
            room -= n;
        }
        let mut n = w.write_vectored(&slices).await?;
        drop(slices);
        sizer.on_sent(Instant::now(), n);
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        while n > 0 {
            let Some(front) = bufs.front_mut() else { break };
            if front.len() <= n {
                n -= front.len();
                bufs.pop_front();
            } else {
                front.advance(n);
                n = 0;
            }
        }
    }
    Ok(())
}

/// Why a connection ended.
#[derive(Debug, thiserror::Error)]
enum ConnEnd {
    #[error("io: {0}")]
    Io(#[from] io::Error),
    #[error("peer closed the connection")]
    Eof,
    #[error("nothing received for {0:?}")]
    Dead(Duration),
    #[error("peer sent an invalid stream: {0}")]
    Invalid(InboundError),
    #[error("peer certificate no longer valid after a reload: {0}")]
    Invalidated(rustls::Error),
}

/// Resolves when a reload invalidates the peer of this connection (see
/// [`TlsState::peer_invalidated`]); counts and logs it. Never resolves in clear mode.
async fn peer_invalidated(
    sh: &Shared,
    name: &str,
    peer: Option<&(
        rustls::pki_types::CertificateDer<'static>,
        pki::tls::PeerRole,
    )>,
) -> ConnEnd {
    let (Some(tls), Some((cert, role))) = (sh.tls.as_ref(), peer) else {
        return std::future::pending().await;
    };
    let e = tls.peer_invalidated(cert, *role).await;
    Stats::inc(&sh.stats.tls_invalidated_closed);
    warn!(conn = name, error = %e, "closing: the peer's certificate is no longer valid (reload)");
    ConnEnd::Invalidated(e)
}

/// The rate the subflows' congestion windows allow, bit/s: Σ `cwnd · mss · 8 / srtt` over the
/// established subflows with an RTT sample. A path flooded by someone else's traffic shows up as a
/// small window over a long (queued) RTT, before and whether or not the tunnel saturates it; the
/// controller uses it as the group's available capacity (`controller::capacity`).
fn window_rate_bps(subflows: &[sys::SubflowTcpInfo]) -> u64 {
    const TCP_ESTABLISHED: u8 = 1;
    subflows
        .iter()
        .filter(|t| t.state == TCP_ESTABLISHED && t.rtt_us > 0)
        .map(|t| u64::from(t.cwnd) * u64::from(t.snd_mss) * 8 * 1_000_000 / u64::from(t.rtt_us))
        .sum()
}

/// The rate of what the subflows have in flight now, bit/s: Σ `min(unacked, cwnd) · mss · 8 /
/// srtt` over the established subflows with an RTT sample (the part of [`window_rate_bps`] in
/// use). A connection whose paths limit it keeps its windows full; one that carries less than
/// they allow keeps them partly empty, and its window rate (the cwnd it grew earlier over the
/// RTT of an empty queue) overstates what its paths carry.
fn inflight_rate_bps(subflows: &[sys::SubflowTcpInfo]) -> u64 {
    const TCP_ESTABLISHED: u8 = 1;
    subflows
        .iter()
        .filter(|t| t.state == TCP_ESTABLISHED && t.rtt_us > 0)
        .map(|t| {
            u64::from(t.unacked.min(t.cwnd)) * u64::from(t.snd_mss) * 8 * 1_000_000
                / u64::from(t.rtt_us)
        })
        .sum()
}

/// What an MPTCP socket holds that is not in flight: its unacked bytes minus its established
/// subflows' unacked segments × mss (0 when unknown).
fn queued_bytes(fd: &std::os::fd::OwnedFd, subflows: &[sys::SubflowTcpInfo]) -> u64 {
    const TCP_ESTABLISHED: u8 = 1;
    let in_flight: u64 = subflows
        .iter()
        .filter(|t| t.state == TCP_ESTABLISHED)
        .map(|t| u64::from(t.unacked) * u64::from(t.snd_mss))
        .sum();
    sys::outq_bytes(fd).unwrap_or(0).saturating_sub(in_flight)
}

/// Per-connection counters, shared by the halves.
#[derive(Debug, Default)]
struct ConnCounters {
    frames_tx: AtomicU64,
    bytes_tx: AtomicU64,
    frames_rx: AtomicU64,
    bytes_rx: AtomicU64,
}

/// The writer of an outbound connection: drains its queue (strict priority + CoDel), frames and
/// writes batches; sends keepalives when idle; ends when the peer is dead.
async fn writer<W: AsyncWrite + Unpin>(
    sh: &Shared,
    w: &mut W,
    mut rekey: Option<&mut Rekey>,
    oq: &OutQueue,
    class: Class,
    liveness: &Mutex<Liveness>,
    cc: &ConnCounters,
) -> Result<(), ConnEnd> {
    let st = &sh.stats;
    let mut batch: VecDeque<BytesMut> = VecDeque::with_capacity(MAX_BATCH_PACKETS);
    let mut sizer = WriteSizer::new(sh.opts.write_chunk, MAX_BATCH_BYTES);
    loop {
        let now = Instant::now();
        let mut bytes = 0usize;
        if let Ok(mut q) = oq.q.lock() {
            while batch.len() < MAX_BATCH_PACKETS && bytes < MAX_BATCH_BYTES {
                let Some(d) = q.poll_dequeue(now) else { break };
                let (mut pkt, ftype, seq, class, mark) = match d {
                    Dequeued::Send((p, t, s), c) => (p, t, s, c, false),
                    Dequeued::Mark((p, t, s), c) => (p, t, s, c, true),
                    Dequeued::Drop(_, _, _) => {
                        Stats::inc(&st.drop_codel);
                        continue;
                    }
                };
                if mark {
                    let ip_at = if ftype == FrameType::IpVirtio {
                        FRAME_HEADER_LEN + VIRTIO_NET_HDR_LEN
                    } else {
                        FRAME_HEADER_LEN
                    };
                    if let Some(ip) = pkt.get_mut(ip_at..) {
                        mpa::classifier::mark_ce(ip);
                    }
                    Stats::inc(&st.codel_marks);
                }
                match encode_header_in_place(&mut pkt, ftype, class, seq) {
                    Ok(_) => {
                        bytes += pkt.len();
                        batch.push_back(pkt);
                    }
                    Err(e) => {
                        trace!(error = %e, "packet refused by the frame encoder");
                        Stats::inc(&st.drop_encode);
                    }
                }
            }
        }
        if !batch.is_empty() {
            let frames = batch.len() as u64;
            let started = Instant::now();
            write_all_vectored(w, &mut batch, &mut sizer).await?;
            if let Some(rk) = rekey.as_deref_mut() {
                if rk.on_written(bytes, Instant::now())? {
                    Stats::inc(&st.tls_key_updates);
                }
            }
            // TLS keeps records it could not send yet; plain TCP: no-op.
            w.flush().await?;
            let blocked = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            Stats::add(&oq.busy_us, blocked);
            Stats::add(&st.frames_tx, frames);
            Stats::add(&cc.frames_tx, frames);
            Stats::add(&cc.bytes_tx, bytes as u64);
            Stats::add(&oq.sent_bytes, bytes as u64);
            if let Ok(mut l) = liveness.lock() {
                l.on_send(Instant::now());
            }
            continue;
        }
        if keepalive_or_wait(
            w,
            rekey.as_deref_mut(),
            Some(&oq.notify),
            class,
            liveness,
            st,
        )
        .await?
        {
            continue;
        }
    }
}

/// Runs the liveness timer: sends a keepalive when due, fails when the peer is dead, otherwise
/// waits for `notify` (new packets) or the next timer. Returns true when woken by `notify`.
async fn keepalive_or_wait<W: AsyncWrite + Unpin>(
    w: &mut W,
    rekey: Option<&mut Rekey>,
    notify: Option<&Notify>,
    class: Class,
    liveness: &Mutex<Liveness>,
    st: &Stats,
) -> Result<bool, ConnEnd> {
    let now = Instant::now();
    let (event, deadline) = match liveness.lock() {
        Ok(mut l) => (l.handle_timeout(now), l.poll_timeout()),
        Err(_) => (None, None),
    };
    match event {
        Some(LivenessEvent::Dead) => return Err(ConnEnd::Dead(mpa::keepalive::DEAD_AFTER)),
        Some(LivenessEvent::SendKeepalive) => {
            let mut ka = BytesMut::with_capacity(FRAME_HEADER_LEN);
            if encode_frame(FrameType::Keepalive, class, None, &[], &mut ka).is_ok() {
                w.write_all(&ka).await?;
                if let Some(rk) = rekey {
                    if rk.on_written(ka.len(), Instant::now())? {
                        Stats::inc(&st.tls_key_updates);
                    }
                }
                w.flush().await?;
                Stats::inc(&st.keepalives_tx);
            }
            if let Ok(mut l) = liveness.lock() {
                l.on_send(Instant::now());
            }
            return Ok(false);
        }
        None => {}
    }
    let deadline = deadline.unwrap_or(now + mpa::keepalive::KEEPALIVE_INTERVAL);
    let sleep = tokio::time::sleep_until(tokio::time::Instant::from_std(deadline));
    match notify {
        Some(n) => tokio::select! {
            () = n.notified() => Ok(true),
            () = sleep => Ok(false),
        },
        None => {
            sleep.await;
            Ok(false)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Readers
// ---------------------------------------------------------------------------------------------

enum Decoder {
    Out(Deframer),
    In(InboundConnection),
}

impl Decoder {
    fn next(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, InboundError> {
        match self {
            Decoder::Out(d) => d.decode(buf).map_err(InboundError::from),
            Decoder::In(c) => loop {
                match c.decode(buf)? {
                    Some(Inbound::Frame(f)) => return Ok(Some(f)),
                    // The hello was consumed before the reader started; never a second one.
                    Some(Inbound::Hello(_)) => continue,
                    None => return Ok(None),
                }
            },
        }
    }

    fn wanted(&mut self, buf: &[u8]) -> usize {
        match self {
            Decoder::Out(d) => d.wanted(buf).unwrap_or(0),
            Decoder::In(_) => 0,
        }
    }
}

/// Reads frames and writes their packets to TUN. Never writes a partial or malformed packet: the
/// decoder returns only complete, checked frames, and any error closes the connection.
async fn reader<R: AsyncRead + Unpin>(
    sh: &Shared,
    r: &mut R,
    mut dec: Decoder,
    mut buf: BytesMut,
    liveness: &Mutex<Liveness>,
    cc: &ConnCounters,
) -> Result<(), ConnEnd> {
    let st = &sh.stats;
    loop {
        loop {
            match dec.next(&mut buf) {
                Ok(Some(frame)) => deliver(sh, &frame, cc),
                Ok(None) => break,
                Err(e) => {
                    Stats::inc(&st.frame_errors);
                    return Err(ConnEnd::Invalid(e));
                }
            }
        }
        let want = dec.wanted(&buf).clamp(RX_CHUNK, MAX_FRAME_LEN + RX_CHUNK);
        buf.reserve(want);
        let n = r.read_buf(&mut buf).await?;
        if n == 0 {
            return Err(ConnEnd::Eof);
        }
        if let Ok(mut l) = liveness.lock() {
            l.on_receive(Instant::now());
        }
    }
}

fn deliver(sh: &Shared, frame: &Frame, cc: &ConnCounters) {
    let st = &sh.stats;
    match frame.header.frame_type {
        FrameType::Ip | FrameType::IpVirtio => {
            let Some((_, ip)) = frame.ip_packet() else {
                Stats::inc(&st.frame_errors);
                return;
            };
            Stats::inc(&st.frames_rx);
            Stats::inc(&cc.frames_rx);
            Stats::add(&cc.bytes_rx, ip.len() as u64);
            match (&sh.reseq, frame.header.seq) {
                // The lane is the connection: its counters live exactly as long as its reader,
                // so their address is unique among the live connections.
                (Some(r), Some(seq)) => r.handle(sh, frame, std::ptr::from_ref(cc) as u64, seq),
                _ => write_to_tun(sh, frame),
            }
        }
        FrameType::Keepalive => {}
        FrameType::Control => Stats::inc(&st.frames_control),
        FrameType::Unknown(_) => Stats::inc(&st.frames_unknown),
    }
}

/// Writes the packet of an IP frame to TUN (directly, or as the resequencer releases it).
pub(crate) fn write_to_tun(sh: &Shared, frame: &Frame) {
    let st = &sh.stats;
    let Some((vnet, ip)) = frame.ip_packet() else {
        return;
    };
    // Without offload locally, a virtio header with no pending work is simply dropped.
    let vnet = match vnet {
        Some(v) if !sh.tun.offload() && v.iter().all(|&b| b == 0) => None,
        Some(_) if !sh.tun.offload() => {
            Stats::inc(&st.drop_virtio_unsupported);
            return;
        }
        v => v,
    };
    match sh.tun.write_packet(vnet, ip) {
        Ok(()) => {
            Stats::inc(&st.tun_tx_packets);
            Stats::add(&st.tun_tx_bytes, ip.len() as u64);
        }
        Err(e) => {
            trace!(error = %e, "TUN write failed");
            Stats::inc(&st.tun_write_errors);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Outbound connections
// ---------------------------------------------------------------------------------------------

fn mptcp_socket(opts: &SocketOpts) -> io::Result<Socket> {
    let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::MPTCP))?;
    s.set_nonblocking(true)?;
    s.set_tcp_nodelay(true)?;
    if opts.buffer != 0 {
        let b = opts.buffer as usize;
        if let Err(e) = s
            .set_send_buffer_size(b)
            .and_then(|()| s.set_recv_buffer_size(b))
        {
            debug!(error = %e, "socket buffer size not applied");
        }
    }
    if opts.mss != 0 {
        if let Err(e) = sys::set_maxseg(&s, opts.mss) {
            debug!(error = %e, "TCP_MAXSEG not supported on MPTCP sockets");
        }
    }
    Ok(s)
}

fn apply_lowat(s: &impl AsFd, opts: &SocketOpts) {
    if opts.notsent_lowat != 0 {
        if let Err(e) = sys::set_notsent_lowat(s, opts.notsent_lowat) {
            debug!(error = %e, "TCP_NOTSENT_LOWAT not supported");
        }
    }
}

/// The (local, remote) address pairs a connection of `class` to `remote` should have a subflow
/// on: every uplink of the class × every remote WAN address (n × m), with the local port index.
pub fn wanted_pairs(
    config: &Config,
    class: Class,
    remote: &[Ipv4Addr],
) -> Vec<(usize, Ipv4Addr, Ipv4Addr)> {
    let mut out = Vec::new();
    for k in config.uplinks_for(class) {
        let Some(w) = config.wan.get(k) else { continue };
        for r in remote {
            out.push((k, w.address.addr(), *r));
        }
    }
    out
}

/// DSCP of the sockets of Type I connections (expedited forwarding; the controller's
/// `priority::TYPE_I_MARK`). OVS's Type I source entries match it (docs/ofc.md §8), and the WAN
/// egress queues by it (`qos`). Type II sockets keep DSCP 0.
pub const TYPE_I_DSCP: u8 = mms_types::dscp::EF;

/// Marks the socket of a connection with its class's DSCP (`Class::socket_dscp`: Type I gets
/// [`TYPE_I_DSCP`]; a failure is logged, not fatal).
fn mark_class(fd: &impl AsFd, class: Class) {
    if let Some(dscp) = class.socket_dscp() {
        if let Err(e) = sys::set_dscp(fd, dscp) {
            warn!(error = %e, dscp, class = %class, "could not set the DSCP of a tunnel socket");
        }
    }
}

async fn connect_once(
    sh: &Shared,
    local: Ipv4Addr,
    remote: SocketAddrV4,
    class: Class,
) -> io::Result<TcpStream> {
    let s = mptcp_socket(&sh.opts)?;
    mark_class(&s, class);
    s.bind(&SockAddr::from(SocketAddrV4::new(local, 0)))?;
    match s.connect(&SockAddr::from(remote)) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    let stream = TcpStream::from_std(std::net::TcpStream::from(s))?;
    tokio::time::timeout(CONNECT_TIMEOUT, stream.writable())
        .await
        .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
    if let Some(e) = stream.take_error()? {
        return Err(e);
    }
    stream.peer_addr()?;
    apply_lowat(&stream, &sh.opts);
    Ok(stream)
}

/// The subflows of a connection with their TCP state. `MPTCP_TCPINFO` walks the subflows in the
/// same order as `MPTCP_SUBFLOW_ADDRS`; when a subflow came or went between the two calls (counts
/// differ) the TCP fields are left at 0 for this round.
fn subflow_status(fd: &impl AsFd, present: &[(SocketAddrV4, SocketAddrV4)]) -> Vec<SubflowStatus> {
    let infos = sys::mptcp_subflow_tcpinfo(fd).unwrap_or_default();
    let infos_match = infos.len() == present.len();
    present
        .iter()
        .enumerate()
        .map(|(i, (l, r))| {
            let t = if infos_match {
                infos.get(i).copied().unwrap_or_default()
            } else {
                sys::SubflowTcpInfo::default()
            };
            SubflowStatus {
                local: l.to_string(),
                remote: r.to_string(),
                state: if infos_match {
                    tcp_state_name(t.state).to_owned()
                } else {
                    String::new()
                },
                rtt_us: t.rtt_us,
                cwnd: t.cwnd,
                bytes_acked: t.bytes_acked,
                bytes_received: t.bytes_received,
                bytes_retrans: t.bytes_retrans,
            }
        })
        .collect()
}

fn tcp_state_name(s: u8) -> &'static str {
    match s {
        1 => "established",
        2 => "syn-sent",
        3 => "syn-recv",
        4 => "fin-wait1",
        5 => "fin-wait2",
        6 => "time-wait",
        7 => "closed",
        8 => "close-wait",
        9 => "last-ack",
        11 => "closing",
        _ => "unknown",
    }
}

/// The subflows that count as present for subflow management: established or still connecting.
/// A dead subflow can stay in the list (the initial one does until the connection closes), so
/// when the states are known, only live ones count; when they are not, all do (never duplicate).
fn live_subflows(
    fd: &impl AsFd,
    all: &[(SocketAddrV4, SocketAddrV4)],
) -> Vec<(SocketAddrV4, SocketAddrV4)> {
    let infos = sys::mptcp_subflow_tcpinfo(fd).unwrap_or_default();
    if infos.len() != all.len() {
        return all.to_vec();
    }
    all.iter()
        .zip(&infos)
        .filter(|(_, t)| t.state == sys::TCP_ESTABLISHED || t.state == sys::TCP_SYN_SENT)
        .map(|(p, _)| *p)
        .collect()
}

/// Checks for a fallback to plain TCP; reports it loudly once per connection.
fn check_fallback(sh: &Shared, stream: &impl AsFd, name: &str, reported: &mut bool) -> bool {
    let fallback = match (sys::is_mptcp(stream), sys::mptcp_info(stream)) {
        (Ok(true), Ok(info)) => info.flags & sys::MPTCP_INFO_FLAG_FALLBACK != 0,
        _ => true,
    };
    if fallback && !*reported {
        *reported = true;
        Stats::inc(&sh.stats.mptcp_fallbacks);
        warn!(
            conn = name,
            "MPTCP FELL BACK TO PLAIN TCP: this connection has one path only"
        );
    }
    fallback
}

/// Keeps one outbound connection up forever: connect (rotating the initial pair), hello, run,
/// back off, repeat.
pub async fn run_outbound(sh: Arc<Shared>, key: ConnKey, remote_addrs: Vec<Ipv4Addr>) {
    let name = conn_name("out", key);
    let Some(oq) = sh.queue(&key) else {
        return;
    };
    let (branch, group, class) = key;
    let port = mms_types::listen_port(branch, group);
    let pairs = wanted_pairs(&sh.config(), class, &remote_addrs);
    if pairs.is_empty() {
        warn!(conn = %name, "no (uplink, remote address) pair for this connection");
        return;
    }
    let mut status = ConnStatus {
        direction: "out".into(),
        remote_branch: branch.get(),
        path_group: group.get(),
        class: class.to_string(),
        state: "connecting".into(),
        subflows_wanted: pairs.len(),
        ..ConnStatus::default()
    };
    sh.stats.set_conn(&name, status.clone());
    let mut backoff = BACKOFF_MIN;
    let mut attempt = 0usize;
    loop {
        let Some(&(_, local, remote)) = pairs.get(attempt % pairs.len()) else {
            return;
        };
        attempt += 1;
        let target = SocketAddrV4::new(remote, port);
        match connect_secure(&sh, local, target, key).await {
            Ok(stream) => {
                Stats::inc(&sh.stats.connects);
                backoff = BACKOFF_MIN;
                status.state = "up".into();
                status.established += 1;
                sh.stats.set_conn(&name, status.clone());
                info!(conn = %name, %local, remote = %target, "tunnel connection up");
                let end = run_outbound_conn(&sh, &name, key, &oq, stream, &pairs, port).await;
                oq.up.store(false, Ordering::Relaxed);
                oq.window_bps.store(0, Ordering::Relaxed);
                oq.inflight_bps.store(0, Ordering::Relaxed);
                sh.send(TunEvent::Conn(ConnEvent { key, up: false }));
                if matches!(end, ConnEnd::Dead(_)) {
                    Stats::inc(&sh.stats.conn_dead);
                }
                warn!(conn = %name, reason = %end, "tunnel connection lost; reconnecting");
            }
            Err(e) => {
                Stats::inc(&sh.stats.connect_failures);
                debug!(conn = %name, %local, remote = %target, error = %e, "connect failed");
            }
        }
        sh.stats.update_conn(&name, |c| {
            c.state = "backoff".into();
            c.subflows.clear();
        });
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// A connected tunnel stream: plain MPTCP, or TLS over MPTCP.
enum Transport {
    Clear(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<secure::Buffered>>),
}

/// Connects (MPTCP) and, with `[tls]`, runs the TLS handshake: the server must prove it is the
/// branch we dial. A TLS failure is counted (`tls_connect_failures`) and logged once here.
async fn connect_secure(
    sh: &Shared,
    local: Ipv4Addr,
    target: SocketAddrV4,
    key: ConnKey,
) -> io::Result<Transport> {
    let (branch, _, class) = key;
    let stream = connect_once(sh, local, target, class).await?;
    let Some(tls) = sh.tls.as_ref().map(|t| t.current()) else {
        return Ok(Transport::Clear(stream));
    };
    let connect = tls
        .connector
        .connect(pki::server_name(branch), secure::buffered(stream));
    match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
        Ok(Ok(s)) => {
            Stats::inc(&sh.stats.tls_handshakes_out);
            Ok(Transport::Tls(Box::new(s)))
        }
        Ok(Err(e)) => {
            Stats::inc(&sh.stats.tls_connect_failures);
            warn!(branch = branch.get(), remote = %target, error = %e, "TLS handshake to the peer failed");
            Err(e)
        }
        Err(_) => {
            Stats::inc(&sh.stats.tls_connect_failures);
            warn!(branch = branch.get(), remote = %target, "TLS handshake to the peer timed out");
            Err(io::ErrorKind::TimedOut.into())
        }
    }
}

async fn run_outbound_conn(
    sh: &Shared,
    name: &str,
    key: ConnKey,
    oq: &OutQueue,
    stream: Transport,
    pairs: &[(usize, Ipv4Addr, Ipv4Addr)],
    port: u16,
) -> ConnEnd {
    let (branch, group, class) = key;
    let hello = Hello {
        src_branch: sh.own,
        dst_branch: branch,
        path_group: group,
        class,
        auth: Vec::new(),
    };
    let mut hb = BytesMut::with_capacity(hello.encoded_len());
    if let Err(e) = hello.encode(&mut hb) {
        return ConnEnd::Io(io::Error::other(e.to_string()));
    }
    let fd = match &stream {
        Transport::Clear(s) => s.as_fd().try_clone_to_owned(),
        Transport::Tls(s) => s.get_ref().0.get_ref().as_fd().try_clone_to_owned(),
    };
    let fd = match fd {
        Ok(fd) => fd,
        Err(e) => return ConnEnd::Io(e),
    };
    match stream {
        Transport::Clear(mut stream) => {
            if let Err(e) = stream.write_all(&hb).await {
                return ConnEnd::Io(e);
            }
            let (r, w) = stream.into_split();
            run_outbound_halves(sh, name, key, oq, (r, w, None), None, &fd, pairs, port).await
        }
        Transport::Tls(mut stream) => {
            // The hello travels inside TLS (docs/wire.md).
            if let Err(e) = async {
                stream.write_all(&hb).await?;
                stream.flush().await
            }
            .await
            {
                return ConnEnd::Io(e);
            }
            let peer = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .map(|c| (c.clone().into_owned(), pki::tls::PeerRole::Server(branch)));
            let (r, w, rekey) = secure::split(*stream);
            run_outbound_halves(
                sh,
                name,
                key,
                oq,
                (r, w, Some(rekey)),
                peer.as_ref(),
                &fd,
                pairs,
                port,
            )
            .await
        }
    }
}

/// The running part of an outbound connection (hello sent): writer, reader, subflow manager.
#[allow(clippy::too_many_arguments)]
async fn run_outbound_halves<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    sh: &Shared,
    name: &str,
    key: ConnKey,
    oq: &OutQueue,
    (mut r, mut w, mut rekey): (R, W, Option<Rekey>),
    peer: Option<&(
        rustls::pki_types::CertificateDer<'static>,
        pki::tls::PeerRole,
    )>,
    fd: &std::os::fd::OwnedFd,
    pairs: &[(usize, Ipv4Addr, Ipv4Addr)],
    port: u16,
) -> ConnEnd {
    let class = key.2;
    let mut fallback_reported = false;
    check_fallback(sh, fd, name, &mut fallback_reported);
    let liveness = Mutex::new(Liveness::new(Instant::now()));
    let cc = ConnCounters::default();
    oq.up.store(true, Ordering::Relaxed);
    sh.send(TunEvent::Conn(ConnEvent { key, up: true }));
    let manage = async {
        let mut retry: BTreeMap<(Ipv4Addr, Ipv4Addr), (Instant, Duration)> = BTreeMap::new();
        let mut reported = fallback_reported;
        loop {
            let fb = check_fallback(sh, fd, name, &mut reported);
            let present = sys::mptcp_subflow_addrs(fd).unwrap_or_default();
            let info = sys::mptcp_info(fd).unwrap_or_default();
            let live = live_subflows(fd, &present);
            if !fb {
                manage_subflows(sh, name, info.token, &live, pairs, port, &mut retry).await;
            }
            let complete = live.len() >= pairs.len();
            let tcpinfo = sys::mptcp_subflow_tcpinfo(fd).unwrap_or_default();
            oq.window_bps
                .store(window_rate_bps(&tcpinfo), Ordering::Relaxed);
            oq.inflight_bps
                .store(inflight_rate_bps(&tcpinfo), Ordering::Relaxed);
            oq.acked_bytes.store(
                tcpinfo.iter().map(|t| t.bytes_acked).sum(),
                Ordering::Relaxed,
            );
            oq.retrans_bytes.store(
                tcpinfo.iter().map(|t| t.bytes_retrans).sum(),
                Ordering::Relaxed,
            );
            oq.queued_bytes
                .store(queued_bytes(fd, &tcpinfo), Ordering::Relaxed);
            sh.stats.update_conn(name, |c| {
                c.token = info.token;
                c.fallback = fb;
                c.bytes_retrans = info.bytes_retrans;
                c.subflows = subflow_status(fd, &present);
                c.frames_tx = cc.frames_tx.load(Ordering::Relaxed);
                c.bytes_tx = cc.bytes_tx.load(Ordering::Relaxed);
                c.frames_rx = cc.frames_rx.load(Ordering::Relaxed);
                c.bytes_rx = cc.bytes_rx.load(Ordering::Relaxed);
            });
            // Check often until the subflow set is complete, then once per SUBFLOW_CHECK.
            let pause = if complete {
                SUBFLOW_CHECK
            } else {
                SUBFLOW_CHECK / 4
            };
            tokio::time::sleep(pause).await;
        }
    };
    tokio::select! {
        r = writer(sh, &mut w, rekey.as_mut(), oq, class, &liveness, &cc) => r.err().unwrap_or(ConnEnd::Eof),
        r = reader(sh, &mut r, Decoder::Out(Deframer::new()), BytesMut::with_capacity(RX_CHUNK), &liveness, &cc) => r.err().unwrap_or(ConnEnd::Eof),
        () = manage => ConnEnd::Eof,
        e = peer_invalidated(sh, name, peer) => e,
    }
}

/// Requests a subflow for every wanted pair that has none, each pair with its own backoff.
async fn manage_subflows(
    sh: &Shared,
    name: &str,
    token: u32,
    present: &[(SocketAddrV4, SocketAddrV4)],
    pairs: &[(usize, Ipv4Addr, Ipv4Addr)],
    port: u16,
    retry: &mut BTreeMap<(Ipv4Addr, Ipv4Addr), (Instant, Duration)>,
) {
    let PathManagement::Userspace(pm) = &sh.pm else {
        return;
    };
    if token == 0 {
        return;
    }
    let now = Instant::now();
    for &(k, local, remote) in pairs {
        if present
            .iter()
            .any(|(l, r)| *l.ip() == local && *r.ip() == remote)
        {
            retry.remove(&(local, remote));
            continue;
        }
        let entry = retry
            .entry((local, remote))
            .or_insert((now, SUBFLOW_RETRY_MIN));
        if now < entry.0 {
            continue;
        }
        let if_index = sh
            .config()
            .wan
            .get(k)
            .map(|w| sys::if_index(&w.name))
            .unwrap_or(0);
        let req = SubflowCreate {
            token,
            local_id: u8::try_from(k + 1).unwrap_or(u8::MAX),
            local,
            if_index,
            remote,
            remote_port: port,
        };
        let pm = Arc::clone(pm);
        let res = tokio::task::spawn_blocking(move || pm.subflow_create(&req)).await;
        match res {
            Ok(Ok(())) => {
                Stats::inc(&sh.stats.subflow_create_ok);
                debug!(conn = name, %local, %remote, "subflow requested");
            }
            Ok(Err(crate::mptcp_pm::MptcpPmError::Refused { errno, .. }))
                if errno == -libc::ENOTCONN =>
            {
                // The connection is not fully established yet (the peer's first DATA_ACK is
                // pending): ask again at the next check, without backing off.
                debug!(conn = name, %local, %remote, "connection not fully established yet");
                continue;
            }
            Ok(Err(e)) => {
                Stats::inc(&sh.stats.subflow_create_err);
                warn!(conn = name, %local, %remote, error = %e, "subflow request refused");
            }
            Err(e) => warn!(error = %e, "subflow request task failed"),
        }
        // Next try (if it still is missing then) after the current delay, doubling up to a cap.
        entry.0 = now + entry.1;
        entry.1 = (entry.1 * 2).min(SUBFLOW_RETRY_MAX);
    }
}

// ---------------------------------------------------------------------------------------------
// Inbound connections
// ---------------------------------------------------------------------------------------------

/// Opens the MPTCP listener of path group `group` on our port `0xA00G`.
pub fn listen(sh: &Shared, group: PathGroupId) -> anyhow::Result<TcpListener> {
    let port = mms_types::listen_port(sh.own, group);
    let s = mptcp_socket(&sh.opts)?;
    s.set_reuse_address(true)?;
    s.bind(&SockAddr::from(SocketAddrV4::new(
        Ipv4Addr::UNSPECIFIED,
        port,
    )))?;
    s.listen(128)?;
    apply_lowat(&s, &sh.opts);
    let l = TcpListener::from_std(std::net::TcpListener::from(s))?;
    info!(
        port = format_args!("{port:#06x}"),
        pg = group.get(),
        "listening"
    );
    Ok(l)
}

/// Accepts connections of path group `group` forever.
pub async fn accept_loop(sh: Arc<Shared>, listener: TcpListener, group: PathGroupId) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let sh = Arc::clone(&sh);
                tokio::spawn(async move { serve_inbound(sh, stream, peer, group).await });
            }
            Err(e) => {
                warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn read_hello<R: AsyncRead + Unpin>(
    r: &mut R,
    ic: &mut InboundConnection,
    buf: &mut BytesMut,
) -> Result<Hello, ConnEnd> {
    loop {
        match ic.decode(buf) {
            Ok(Some(Inbound::Hello(h))) => return Ok(h),
            Ok(Some(Inbound::Frame(_))) => {
                return Err(ConnEnd::Invalid(InboundError::Hello(
                    mpa::framing::HelloError::BadMagic,
                )))
            }
            Ok(None) => {}
            Err(e) => return Err(ConnEnd::Invalid(e)),
        }
        buf.reserve(mpa::framing::MAX_HELLO_LEN);
        if r.read_buf(buf).await? == 0 {
            return Err(ConnEnd::Eof);
        }
    }
}

/// Checks the hello beyond the wire format: the path group must be the listener's and the source
/// a configured remote branch.
fn hello_policy(config: &Config, h: &Hello, group: PathGroupId) -> Result<(), String> {
    if h.path_group != group {
        return Err(format!(
            "hello for path group {} on the port of group {}",
            h.path_group, group
        ));
    }
    let known = config
        .remote
        .iter()
        .any(|r| r.id == h.src_branch.get() && r.path_groups.iter().any(|g| g.id == group.get()));
    if !known {
        return Err(format!(
            "hello from branch {} which is not configured with group {}",
            h.src_branch, group
        ));
    }
    Ok(())
}

/// Counts and logs (once: one line per refused connection) a failed inbound TLS handshake.
fn reject_handshake(sh: &Shared, peer: SocketAddr, group: PathGroupId, e: &io::Error) {
    let st = &sh.stats;
    let (counter, why) = match secure::rustls_error(e).map(pki::tls::classify) {
        Some(pki::tls::Rejection::Revoked) => (&st.tls_revoked, "revoked certificate"),
        Some(pki::tls::Rejection::UnknownCa) => (&st.tls_unknown_ca, "certificate not from our CA"),
        Some(pki::tls::Rejection::Handshake) | None => {
            (&st.tls_handshake_failed, "TLS handshake failed")
        }
    };
    Stats::inc(counter);
    warn!(%peer, pg = group.get(), error = %e, "inbound connection refused: {why}");
}

/// An accepted connection: with `[tls]` the handshake first (client certificate from our CA,
/// not revoked, carrying a branch identity), then the hello inside TLS.
async fn serve_inbound(sh: Arc<Shared>, stream: TcpStream, peer: SocketAddr, group: PathGroupId) {
    apply_lowat(&stream, &sh.opts);
    let fd = match stream.as_fd().try_clone_to_owned() {
        Ok(fd) => fd,
        Err(_) => return,
    };
    let Some(tls) = sh.tls.as_ref().map(|t| t.current()) else {
        let (r, w) = stream.into_split();
        serve_inbound_halves(sh, (r, w, None), None, fd, peer, group).await;
        return;
    };
    let st = &sh.stats;
    let s = match tokio::time::timeout(
        secure::HANDSHAKE_TIMEOUT,
        tls.acceptor.accept(secure::buffered(stream)),
    )
    .await
    {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            reject_handshake(&sh, peer, group, &e);
            return;
        }
        Err(_) => {
            Stats::inc(&st.tls_handshake_failed);
            warn!(%peer, pg = group.get(), "inbound connection refused: no TLS handshake in time");
            return;
        }
    };
    let cert = s
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| {
            (
                pki::identity_of(c),
                pki::serial_of(c),
                c.clone().into_owned(),
            )
        });
    let Some((Ok(identity), Ok(serial), cert)) = cert else {
        Stats::inc(&st.tls_wrong_branch);
        warn!(%peer, pg = group.get(), "inbound connection refused: certificate without a branch identity");
        return;
    };
    Stats::inc(&st.tls_handshakes_in);
    let (r, w, rekey) = secure::split(s);
    serve_inbound_halves(
        Arc::clone(&sh),
        (r, w, Some(rekey)),
        Some((identity, serial, cert)),
        fd,
        peer,
        group,
    )
    .await;
}

/// The rest of an accepted connection: hello (checked against the certificate's identity with
/// TLS), then reader + keepalive writer until the end.
async fn serve_inbound_halves<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    sh: Arc<Shared>,
    (mut r, mut w, mut rekey): (R, W, Option<Rekey>),
    peer_id: Option<(BranchId, u64, rustls::pki_types::CertificateDer<'static>)>,
    fd: std::os::fd::OwnedFd,
    peer: SocketAddr,
    group: PathGroupId,
) {
    let st = &sh.stats;
    let mut ic = InboundConnection::new(sh.own);
    let mut buf = BytesMut::with_capacity(RX_CHUNK);
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, read_hello(&mut r, &mut ic, &mut buf))
        .await
    {
        Ok(Ok(h)) => h,
        Ok(Err(e)) => {
            Stats::inc(&st.hello_rejected);
            warn!(%peer, pg = group.get(), reason = %e, "inbound connection refused: bad hello");
            return;
        }
        Err(_) => {
            Stats::inc(&st.hello_rejected);
            warn!(%peer, pg = group.get(), "inbound connection refused: no hello in time");
            return;
        }
    };
    if let Some((identity, serial, _)) = &peer_id {
        let (identity, serial) = (*identity, *serial);
        if identity != hello.src_branch {
            Stats::inc(&st.tls_wrong_branch);
            warn!(%peer, pg = group.get(), cert_branch = identity.get(), cert_serial = serial,
                hello_branch = hello.src_branch.get(),
                "inbound connection refused: certificate of another branch than the hello's");
            return;
        }
    }
    if let Err(why) = hello_policy(&sh.config(), &hello, group) {
        Stats::inc(&st.hello_rejected);
        warn!(%peer, reason = %why, "inbound connection refused");
        return;
    }
    Stats::inc(&st.accepts);
    let key = (hello.src_branch, hello.path_group, hello.class);
    mark_class(&fd, hello.class);
    let name = format!("{} from {peer}", conn_name("in", key));
    info!(conn = %name, "inbound tunnel connection up");
    let mut reported = false;
    let fallback = check_fallback(&sh, &fd, &name, &mut reported);
    sh.stats.set_conn(
        &name,
        ConnStatus {
            direction: "in".into(),
            remote_branch: hello.src_branch.get(),
            path_group: hello.path_group.get(),
            class: hello.class.to_string(),
            state: "up".into(),
            fallback,
            established: 1,
            peer_serial: peer_id.as_ref().map(|(_, s, _)| *s),
            ..ConnStatus::default()
        },
    );
    let peer_check = peer_id
        .as_ref()
        .map(|(_, _, c)| (c.clone(), pki::tls::PeerRole::Client));
    let liveness = Mutex::new(Liveness::new(Instant::now()));
    let cc = ConnCounters::default();
    let keepalives = async {
        loop {
            if let Err(e) =
                keepalive_or_wait(&mut w, rekey.as_mut(), None, hello.class, &liveness, st).await
            {
                return e;
            }
        }
    };
    let report = async {
        loop {
            let fb = check_fallback(&sh, &fd, &name, &mut reported);
            let present = sys::mptcp_subflow_addrs(&fd).unwrap_or_default();
            let info = sys::mptcp_info(&fd).unwrap_or_default();
            sh.stats.update_conn(&name, |c| {
                c.token = info.token;
                c.fallback = fb;
                c.bytes_retrans = info.bytes_retrans;
                c.subflows = subflow_status(&fd, &present);
                c.frames_rx = cc.frames_rx.load(Ordering::Relaxed);
                c.bytes_rx = cc.bytes_rx.load(Ordering::Relaxed);
            });
            tokio::time::sleep(SUBFLOW_CHECK).await;
        }
    };
    let end: ConnEnd = tokio::select! {
        r = reader(&sh, &mut r, Decoder::In(ic), buf, &liveness, &cc) => r.err().unwrap_or(ConnEnd::Eof),
        e = keepalives => e,
        () = report => ConnEnd::Eof,
        e = peer_invalidated(&sh, &name, peer_check.as_ref()) => e,
    };
    if matches!(end, ConnEnd::Dead(_)) {
        Stats::inc(&st.conn_dead);
    }
    info!(conn = %name, reason = %end, "inbound tunnel connection closed");
    sh.stats.remove_conn(&name);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn config(leased: bool) -> Config {
        let mut text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/mmsg-branch1.toml"
        ))
        .unwrap();
        if leased {
            // Port 1 becomes a leased line: Type I uses only it.
            text = text.replacen(
                "name = \"wan1\"\naddress = \"198.18.11.2/24\"\ngateway = \"198.18.11.1\"\nkind = \"internet\"",
                "name = \"wan1\"\naddress = \"198.18.11.2/24\"\ngateway = \"198.18.11.1\"\nkind = \"leased\"",
                1,
            );
        }
        Config::parse(&text).unwrap()
    }

    #[test]
    fn subflow_pairs_are_n_times_m() {
        let remote = [Ipv4Addr::new(198, 18, 20, 2), Ipv4Addr::new(198, 18, 21, 2)];
        let c = config(false);
        let p = wanted_pairs(&c, Class::TypeII, &remote);
        assert_eq!(p.len(), 4);
        assert_eq!(p[0], (0, Ipv4Addr::new(198, 18, 10, 2), remote[0]));
        assert_eq!(p[3], (1, Ipv4Addr::new(198, 18, 11, 2), remote[1]));
        assert_eq!(wanted_pairs(&c, Class::TypeI, &remote).len(), 4);
        assert!(wanted_pairs(&c, Class::TypeIII, &remote).is_empty());
        let l = config(true);
        let p1 = wanted_pairs(&l, Class::TypeI, &remote);
        assert_eq!(p1.len(), 2, "Type I only on the leased line: {p1:?}");
        assert!(p1.iter().all(|(k, _, _)| *k == 1));
        assert_eq!(wanted_pairs(&l, Class::TypeII, &remote).len(), 4);
    }

    #[test]
    fn hello_policy_checks_group_and_source() {
        let c = config(false);
        let b = |n| BranchId::new(n).unwrap();
        let g = |n| PathGroupId::new(n).unwrap();
        let hello = |src, pg| Hello {
            src_branch: b(src),
            dst_branch: b(1),
            path_group: g(pg),
            class: Class::TypeII,
            auth: Vec::new(),
        };
        assert!(hello_policy(&c, &hello(2, 0), g(0)).is_ok());
        assert!(hello_policy(&c, &hello(2, 1), g(1)).is_ok());
        // Group of the hello differs from the listener's port.
        assert!(hello_policy(&c, &hello(2, 1), g(0)).is_err());
        // Unknown source branch.
        assert!(hello_policy(&c, &hello(3, 0), g(0)).is_err());
        // A group the remote is not configured with.
        assert!(hello_policy(&c, &hello(2, 5), g(5)).is_err());
    }
}
