//! The state every task of the tunnel shares: the config, the outbound connections' cores
//! ([`OutQueue`]: an [`mpa::gateway::ConnCore`] behind a lock, keyed by [`ConnKey`]), the
//! receive side ([`crate::reseq::Reseq`], an [`mpa::gateway::Receiver`] behind a lock), the event
//! channel to the TUN task, and [`build`], which makes it all from a validated config.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use mpa::config::Config;
use mpa::conn_report::{self, ConnSample};
use mpa::gateway::{self, ConnCore};
use mpa::queue::AqmConfig;
use mpa::{BranchId, Class, PathGroupId};
use tokio::sync::{mpsc, Notify};

use super::preauth::{
    PreAuth, RefusalLog, LOG_INTERVAL, MAX_LOG_SOURCES, MAX_PREAUTH_PER_SOURCE, MAX_PREAUTH_TOTAL,
};
use crate::mptcp_pm::MptcpPathManager;
use crate::secure::TlsState;
use crate::stats::Stats;
use crate::tun::Tun;

/// A subflow: its (local, remote) socket addresses.
pub(super) type SubflowKey = (std::net::SocketAddrV4, std::net::SocketAddrV4);

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
    /// Most bytes the writer takes out of the connection's queue per batch (frames taken out
    /// wait in the writer, where no AQM sees them, until the socket accepts them).
    pub max_batch: usize,
    /// TCP_CONGESTION of the tunnel sockets (the kernel applies it to every subflow); `None`:
    /// the namespace's default (`net.ipv4.tcp_congestion_control`).
    pub congestion: Option<&'static str>,
    /// Adaptive SO_SNDBUF: this many times the subflows' windows (Σ cwnd × mss), set once per
    /// subflow sample (`socket::send_budget`); 0: off (the fixed `buffer` stays).
    pub send_budget: f64,
    /// Send time budget: the writer keeps what the socket holds unacknowledged (`TIOCOUTQ`) at
    /// most the subflows' delivery rate × (gain × minimum RTT + this), [`mpa::queue::inflight`]; zero:
    /// off (the writer writes while the socket takes it).
    pub send_time_budget: Duration,
    /// The budget's gain on the minimum RTT ([`mpa::queue::InflightBudget::new`]).
    pub send_time_gain: f64,
    /// The most the budget adds for the writer's stalls ([`mpa::queue::stall`]).
    pub send_time_stall_cover: Duration,
    /// Whether the budget re-measures a minimum RTT that looks stale ([`mpa::queue::min_rtt`]).
    pub send_time_rtt_probe: bool,
    /// Pace each connection's writer at its paths' measured bottleneck rate
    /// ([`mpa::queue::pacing`]) with these settings; `None`: not paced.
    pub pacing: Option<mpa::queue::pacing::PacerConfig>,
    /// Subflows that deliver less than this share of their connection's rate while queued are
    /// marked backup ([`mpa::slow_subflows`]); 0: never.
    pub slow_subflow_share: f64,
}

/// How subflows are managed.
#[derive(Debug, Clone)]
pub enum PathManagement {
    /// Userspace PM: `SUBFLOW_CREATE` for every missing (local, remote) pair.
    Userspace(Arc<MptcpPathManager>),
    /// In-kernel PM (endpoints/limits set up elsewhere); we only observe.
    Kernel,
}

/// A connection's identity: (remote branch, path group, class, index) (the core's
/// [`gateway::ConnKey`]).
pub use gateway::ConnKey;

/// One outbound connection: its [`ConnCore`] (queue and liveness; it lives as long as the
/// connection is configured, across reconnections) behind the lock the TUN task (enqueue), the
/// writer (`poll_transmit`) and the reader (`on_receive`) share, the writer's wake-up, and the
/// figures the status report reads.
#[derive(Debug)]
pub struct OutQueue {
    pub(super) core: Mutex<ConnCore>,
    pub(super) notify: Notify,
    pub(super) up: AtomicBool,
    /// Frame bytes written by this connection's writer (for the group's rate estimate).
    pub(super) sent_bytes: AtomicU64,
    /// Microseconds the writer spent blocked in socket writes (and TLS flushes) or waiting for
    /// the send time budget with data queued: near the whole time when the connection's paths
    /// are what limits it (reported to the controller as the
    /// group's `busy_us`, its capacity signal).
    pub(super) busy_us: AtomicU64,
    /// The rate its congestion windows allow now, bit/s: Σ over established subflows of
    /// `cwnd · mss / srtt` ([`conn_report::window_rate_bps`]), refreshed every
    /// [`subflows::SUBFLOW_CHECK`]; 0 while down.
    pub(super) window_bps: AtomicU64,
    /// The rate of what its subflows have in flight now, bit/s
    /// ([`conn_report::inflight_rate_bps`]), refreshed with `window_bps`; 0 while down.
    pub(super) inflight_bps: AtomicU64,
    /// Its paths' standing queue now ([`conn_report::standing_queue`]), µs, and the minimum
    /// RTT it is measured against (0: none), refreshed with `window_bps`.
    pub(super) queue_delay_us: AtomicU64,
    pub(super) base_rtt_us: AtomicU64,
    /// Σ `tcpi_bytes_acked` and Σ `tcpi_bytes_retrans` of its subflows now (refreshed with
    /// `window_bps`; they go backwards when a subflow closes): the group's loss ratio.
    pub(super) acked_bytes: AtomicU64,
    pub(super) retrans_bytes: AtomicU64,
    /// Bytes its MPTCP socket holds that are not in flight ([`conn_report::queued_bytes`] of
    /// `TIOCOUTQ` and its subflows); refreshed with `window_bps`.
    pub(super) queued_bytes: AtomicU64,
    /// The send time budget ([`mpa::queue::InflightBudget`]) of the current establishment,
    /// bytes, refreshed every [`mpa::queue::inflight::SAMPLE_PERIOD`] by the subflow sampler; 0:
    /// no budget (off, or down).
    pub(super) inflight_budget: AtomicU64,
    /// The delivery rate that budget was made of, bytes/s (the writer's drain-time estimate).
    pub(super) delivery_rate: AtomicU64,
    /// 1 + the most the writer overslept a budget wait since the sampler last took it, µs; 0:
    /// no wait since (the budget's cover for the gateway's own stalls, [`mpa::queue::stall`]).
    pub(super) writer_late_us: AtomicU64,
    /// That cover as of the last sample, µs (for the status report).
    pub(super) stall_cover_us: AtomicU64,
    /// The rate the writer paces at ([`mpa::queue::pacing::Pacer`]), bytes/s; 0: not paced.
    pub(super) pacing_rate: AtomicU64,
    /// Counts the writer's rounds that left data in the queue (the paths, not the traffic,
    /// limit it): the pacer's and the send time budget's samples each compare it with the
    /// count they saw last ([`Backlog`]).
    pub(super) backlogged: AtomicU64,
    /// Held by the accepted connection that carries this queue's traffic to a remote behind NAT
    /// (`reverse`): one at a time.
    pub(super) attach: tokio::sync::Mutex<()>,
    /// Tells the accepted connection holding `attach` that a newer one takes over.
    pub(super) takeover: Notify,
}

impl OutQueue {
    /// The standing queue of the last subflow sample (`None`: none measured, or down).
    fn standing_queue(&self) -> Option<conn_report::StandingQueue> {
        let base = u32::try_from(self.base_rtt_us.load(Ordering::Relaxed)).ok()?;
        let queue = u32::try_from(self.queue_delay_us.load(Ordering::Relaxed)).ok()?;
        (base > 0).then_some(conn_report::StandingQueue {
            queue_us: queue,
            base_rtt_us: base,
        })
    }

    fn new(key: ConnKey, aqm: AqmConfig) -> Self {
        OutQueue {
            core: Mutex::new(ConnCore::outbound(key, aqm)),
            notify: Notify::new(),
            up: AtomicBool::new(false),
            sent_bytes: AtomicU64::new(0),
            busy_us: AtomicU64::new(0),
            window_bps: AtomicU64::new(0),
            inflight_bps: AtomicU64::new(0),
            queue_delay_us: AtomicU64::new(0),
            base_rtt_us: AtomicU64::new(0),
            acked_bytes: AtomicU64::new(0),
            retrans_bytes: AtomicU64::new(0),
            queued_bytes: AtomicU64::new(0),
            inflight_budget: AtomicU64::new(0),
            delivery_rate: AtomicU64::new(0),
            writer_late_us: AtomicU64::new(0),
            stall_cover_us: AtomicU64::new(0),
            pacing_rate: AtomicU64::new(0),
            backlogged: AtomicU64::new(0),
            attach: tokio::sync::Mutex::new(()),
            takeover: Notify::new(),
        }
    }
}

/// One reader of [`OutQueue::backlogged`]: whether the writer left data in the queue since this
/// reader last looked.
#[derive(Debug, Default)]
pub(super) struct Backlog(u64);

impl Backlog {
    /// Whether the count moved since the last call.
    pub(super) fn since_last(&mut self, oq: &OutQueue) -> bool {
        let now = oq.backlogged.load(Ordering::Relaxed);
        let moved = now != self.0;
        self.0 = now;
        moved
    }
}

/// A connection went up or down (to the TUN task, which owns the agent).
#[derive(Debug, Clone, Copy)]
pub struct ConnEvent {
    pub(super) key: ConnKey,
    pub(super) up: bool,
}

/// What the TUN task (owner of the agent) is told.
#[derive(Debug, Clone)]
pub enum TunEvent {
    /// A connection went up or down.
    Conn(ConnEvent),
    /// An up outbound connection lost every subflow to fast failover (`up == false`), or has
    /// one again: [`mpa::gateway::Router::handle_conn_paths`].
    Paths(ConnEvent),
    /// New WRR weights of existing path groups (the controller published them; [`Shared::config`]
    /// holds them already): applied with [`mpa::gateway::Router::apply`], no flow moves.
    Weights(Vec<(BranchId, PathGroupId, u32)>),
    /// Remotes, groups or classifier changed ([`Shared::config`] and the queues are already
    /// replaced): [`mpa::gateway::Router::apply`] keeps the flow table and the up state of the
    /// connections that still exist; a flow whose path group stays does not move.
    Reload,
    /// The receiver started resequencing a flow: keep this flow, its reverse (the ACKs), on the
    /// lowest-delay path group ([`mpa::gateway::Router::prefer_low_delay`]).
    LowDelay(mpa::classifier::FlowKey),
}

/// Everything the tasks share.
#[derive(Debug)]
pub struct Shared {
    /// The validated configuration; replaced as a whole when the controller pushes a new one
    /// (read it with [`Shared::config`]).
    config: RwLock<Arc<Config>>,
    /// Our branch.
    pub own: BranchId,
    /// The TUN device (shared with the resequencer's timer task).
    pub tun: Arc<Tun>,
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
    /// The receive side: resequencing of sequenced frames from all peers (parameters from the
    /// start-up `[striping]`, or the defaults: a peer may stripe when we do not) and the
    /// virtio-or-plain decision for TUN writes.
    pub reseq: Arc<crate::reseq::Reseq>,
    /// The next connection id (`conn_io::ConnCounters::lane`): the resequencer's lane of a
    /// connection, unique for the life of the process.
    next_lane: AtomicU64,
    /// The unauthenticated connections of every listener of this gateway (caps in total and per
    /// source; `preauth`). Per instance, so tests and several gateways in one process do not
    /// share the caps.
    pub(super) preauth: Arc<Mutex<PreAuth>>,
    /// The rate limit of refusal log lines, per source and over all sources.
    pub(super) refusal_log: Mutex<RefusalLog>,
    /// The smallest queue (`srtt − min_rtt`) a loaded subflow showed per local WAN address since
    /// the `autorate` task last took it (noted by the fast-failover sampler, `subflows`).
    pub(super) port_queues: Mutex<mpa::autorate::MinBoard<std::net::Ipv4Addr>>,
    /// Set by the `autorate` task while it runs: the samplers note into `port_queues`.
    pub(super) autorate_on: AtomicBool,
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

    pub(super) fn queue(&self, key: &ConnKey) -> Option<Arc<OutQueue>> {
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
                q.entry(k)
                    .or_insert_with(|| Arc::new(OutQueue::new(k, aqm)));
            }
        }
        *self.config.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(config);
    }

    /// Only the weights changed: stores the new config (same remotes, groups, classifier).
    pub fn replace_weights(&self, config: Config) {
        *self.config.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(config);
    }

    /// A new connection id (a resequencer lane), never given out before.
    pub(super) fn new_lane(&self) -> u64 {
        self.next_lane.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends an event to the TUN task.
    pub fn send(&self, ev: TunEvent) {
        let _ = self.events.send(ev);
    }

    /// Per path group (remote branch, group): tunnel bytes written so far and whether all its
    /// connections are up; then connections up and connections configured
    /// ([`conn_report::group_report`]: sums, and the busiest connection's transport figures).
    pub fn group_report(&self) -> (Vec<mpa::gwchan::GroupReport>, u32, u32) {
        let samples = self.queues().into_iter().map(|(k, oq)| ConnSample {
            branch: k.branch,
            group: k.group,
            class: k.class,
            up: oq.up.load(Ordering::Relaxed),
            sent_bytes: oq.sent_bytes.load(Ordering::Relaxed),
            busy_us: oq.busy_us.load(Ordering::Relaxed),
            queued_bytes: oq.queued_bytes.load(Ordering::Relaxed),
            window_bps: oq.window_bps.load(Ordering::Relaxed),
            inflight_bps: oq.inflight_bps.load(Ordering::Relaxed),
            acked_bytes: oq.acked_bytes.load(Ordering::Relaxed),
            retrans_bytes: oq.retrans_bytes.load(Ordering::Relaxed),
            standing_queue: oq.standing_queue(),
        });
        let r = conn_report::group_report(samples);
        (r.groups, r.conns_up, r.conns_total)
    }
}

/// Every outbound connection a config asks for ([`mpa::gateway::conn_keys`]).
pub fn conn_keys(config: &Config) -> BTreeSet<ConnKey> {
    gateway::conn_keys(config)
}

/// The classes that get a connection per path group.
pub const CLASSES: [Class; 2] = gateway::CLASSES;

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
        .map(|k| (k, Arc::new(OutQueue::new(k, aqm))))
        .collect();
    let (tx, rx) = mpsc::unbounded_channel();
    let reseq = Arc::new(crate::reseq::Reseq::new(
        config.striping.as_ref(),
        tun.offload(),
    ));
    (
        Arc::new(Shared {
            config: RwLock::new(Arc::new(config)),
            own,
            tun: Arc::new(tun),
            stats,
            pm,
            opts,
            tls,
            queues: RwLock::new(queues),
            events: tx,
            reseq,
            next_lane: AtomicU64::new(0),
            preauth: Arc::new(Mutex::new(PreAuth::new(
                MAX_PREAUTH_TOTAL,
                MAX_PREAUTH_PER_SOURCE,
            ))),
            refusal_log: Mutex::new(RefusalLog::new(LOG_INTERVAL, MAX_LOG_SOURCES)),
            port_queues: Mutex::new(mpa::autorate::MinBoard::default()),
            autorate_on: AtomicBool::new(false),
        }),
        rx,
    )
}

/// The registry name of a connection in `mmsg status`, e.g. `out b2 g0 type1`; a group's
/// further connections (`connections_per_group`) get their index: `out b2 g0 type2 #1`.
pub fn conn_name(dir: &str, key: ConnKey) -> String {
    let name = format!("{dir} b{} g{} {}", key.branch, key.group, key.class);
    match key.index {
        0 => name,
        i => format!("{name} #{i}"),
    }
}

/// The example config of branch 1 (`examples/mmsg-branch1.toml`); `leased`: its port 1 is a
/// leased line (Type I uses only it).
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(super) fn example_config(leased: bool) -> Config {
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
