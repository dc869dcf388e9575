//! The gateway channel (`gwchan`), the controller's end (issue #6; seed 000 §IV: the SSC configures
//! every MMSG). Messages and codec: [`mpa::gwchan`]; protocol: `docs/gwchan.md`.
//!
//! Every gateway (`mmsg`) connects out to `ssc` (TCP or a unix socket), says hello, registers
//! with its branch id, and then receives its [`GatewayConfig`]: the other branches (WAN
//! addresses, LAN prefixes), the path groups of each pair with their WRR weights
//! ([`crate::wrr`]) and the PM's DSCP marks ([`crate::priority`]). The config is pushed at once
//! on connect and whenever it changes (catalog commit, new WRR weights); the gateway answers
//! with an ack and sends a report every few seconds.
//!
//! Parts:
//! - [`build_remotes`] (pure): inventory + path groups + weights → the remotes of one branch.
//! - [`Registry`]: the current config of every branch (versioned), the sessions, and what
//!   `GET /api/v1/gateways` shows. A second session of a branch replaces the first; a branch
//!   not in the inventory is refused with an error message and counted.
//! - [`Gwc`]: the listeners and the task that recomputes the configs on every change.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::listen::Listeners;
use mpa::config::{PathGroupConfig, RemoteBranch};
use mpa::gwchan::{
    self, Ack, ControllerMsg, CrlUpdate, ErrorMsg, GatewayConfig, GatewayMsg, Hello, Priorities,
    Register, Report,
};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{oneshot, watch, Notify};
use tracing::{debug, info, warn};

use crate::authority::Authority;
use crate::inventory::BranchId;
use crate::path_group::PathGroupId;
use crate::priority::{self, Class};
use crate::store::Catalog;
use crate::wrr::{PairWeights, Wrr};

/// How long a gateway may take for its hello and registration.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Silence after which a gateway's session is closed (it reports every 2 s).
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(15);
/// Bytes read from a gateway per call; the receive buffer holds at most one message
/// ([`gwchan::MAX_BODY_LEN`]) plus one chunk.
const READ_CHUNK: usize = 16 * 1024;
/// The first gateway protocol that gets pushed CRLs (`ControllerMsg::Crl`).
const CRL_PROTOCOL: u32 = 3;

/// Settings of the gateway listeners (`[gateways]` in the config, `--gateway-listen`,
/// `--gateway-tls-listen`, `--gateway-unix`).
#[derive(Clone, Debug, Default)]
pub struct GwcConfig {
    /// TCP listen address, clear text (`None`: no TCP listener).
    pub listen: Option<SocketAddr>,
    /// TLS listen address (`None`: none); needs the CA ([`Registry::set_authority`]).
    pub tls_listen: Option<SocketAddr>,
    /// Unix socket paths to listen on (a stale socket file is replaced).
    pub unix: Vec<PathBuf>,
}

/// The remotes of `branch`: every other branch with a path group in either direction, with
/// its WAN addresses (port order) and LAN prefixes; per group id of the pair the WRR weight of
/// `branch → other` (`weights`, by (source, destination)), or 1 for a group that exists only
/// in the direction `other → branch` (the gateway accepts it, and sends little on it).
pub fn build_remotes(
    catalog: &Catalog,
    weights: &BTreeMap<(u8, u8), PairWeights>,
    branch: BranchId,
) -> Vec<RemoteBranch> {
    let inv = catalog.inventory();
    let mut out = Vec::new();
    for other in inv.branches() {
        if other.id == branch {
            continue;
        }
        let mut groups: BTreeMap<u8, u32> = BTreeMap::new();
        for g in catalog.groups().groups() {
            if g.source == branch && g.destination == other.id {
                let w = weights
                    .get(&(branch.get(), other.id.get()))
                    .and_then(|p| p.groups.iter().find(|x| x.group == g.id.get()))
                    .map_or(1, |x| x.weight);
                groups.insert(g.id.get(), w.clamp(1, mpa::config::MAX_WEIGHT));
            } else if g.source == other.id && g.destination == branch {
                groups.entry(g.id.get()).or_insert(1);
            }
        }
        if groups.is_empty() {
            continue;
        }
        out.push(RemoteBranch {
            id: other.id.get(),
            wan_addresses: other.wan.iter().map(|p| p.ip()).collect(),
            lan_prefixes: other.lan.iter().map(|n| ipnet::IpNet::V4(*n)).collect(),
            path_groups: groups
                .into_iter()
                .map(|(id, weight)| PathGroupConfig { id, weight })
                .collect(),
        });
    }
    out
}

/// The PM's marks (the same for every gateway).
pub fn priorities() -> Priorities {
    let mut marks = BTreeMap::new();
    for (name, class) in [("type1", Class::TypeI), ("type2", Class::TypeII)] {
        for hops in 1..=priority::MAX_PRIORITY_HOPS {
            marks.insert(format!("{name}/{hops}"), priority::dscp(class, hops));
        }
    }
    Priorities {
        type1_socket_dscp: priority::TYPE_I_MARK,
        marks,
    }
}

/// What `GET /api/v1/gateways` shows about one gateway.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GatewayView {
    /// The branch id.
    pub branch: u8,
    /// Whether a session is open now.
    pub connected: bool,
    /// The peer address of the (last) session (`unix` for a unix socket).
    pub peer: String,
    /// The software version the gateway registered with.
    pub software_version: String,
    /// The WAN ports as the gateway sees them.
    pub wan: Vec<mpa::gwchan::WanSeen>,
    /// The version of the config the controller has for this branch now.
    pub config_version: u64,
    /// The last version pushed to the gateway.
    pub config_version_sent: u64,
    /// The version the gateway runs, from its last ack (0: none yet).
    pub config_version_acked: u64,
    /// The gateway's reason for refusing the last config, if it did.
    pub last_error: Option<String>,
    /// The last report.
    pub last_report: Option<Report>,
    /// Milliseconds since the last report (`None`: none yet).
    pub last_report_age_ms: Option<u64>,
    /// Sessions opened so far (a replaced or reconnecting gateway counts again).
    pub sessions: u64,
}

/// `GET /api/v1/gateways`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GatewayList {
    /// Every gateway that registered since `ssc` started, by branch id.
    pub gateways: Vec<GatewayView>,
    /// Registrations refused because the branch is not in the inventory.
    pub rejected_unknown_branch: u64,
    /// Sessions refused for other reasons (protocol version, malformed messages, timeouts).
    pub rejected_other: u64,
    /// Sessions closed because the same branch registered again.
    pub replaced: u64,
    /// Sessions refused on the TLS listener: no client certificate, or a certificate of another
    /// branch than the register (or a plain TCP enrolment attempt).
    #[serde(default)]
    pub rejected_auth: u64,
    /// Enrolment and renewal counters (`None`: `ssc` runs without its CA).
    #[serde(default)]
    pub enrolment: Option<crate::authority::AuthorityCounters>,
}

#[derive(Debug)]
struct SessionSlot {
    id: u64,
    kill: Option<oneshot::Sender<()>>,
}

#[derive(Debug)]
struct Inner {
    /// Per branch in the inventory: the current config (watched by that branch's session).
    configs: BTreeMap<u8, watch::Sender<Option<Arc<GatewayConfig>>>>,
    sessions: BTreeMap<u8, SessionSlot>,
    views: BTreeMap<u8, (GatewayView, Option<Instant>)>,
    next_version: u64,
    next_session: u64,
    rejected_unknown_branch: u64,
    rejected_other: u64,
    rejected_auth: u64,
    replaced: u64,
}

/// A session just opened: its id, the branch's config (watched), and the signal that a newer
/// session replaced it.
#[derive(Debug)]
struct Opened {
    id: u64,
    configs: watch::Receiver<Option<Arc<GatewayConfig>>>,
    kill: oneshot::Receiver<()>,
}

/// The configs, sessions and views of every gateway.
#[derive(Debug)]
pub struct Registry {
    inner: Mutex<Inner>,
    /// Where reports go for the capacity estimates: set by [`Gwc::run`].
    capacity: std::sync::OnceLock<(Arc<Mutex<Wrr>>, Arc<Notify>)>,
    authority: std::sync::OnceLock<Arc<Authority>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// Empty. Versions start at the current Unix time in milliseconds, so they keep increasing
    /// across restarts of `ssc` (as long as the clock does).
    pub fn new() -> Self {
        let start = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| u64::try_from(d.as_millis()).unwrap_or(1));
        Self {
            inner: Mutex::new(Inner {
                configs: BTreeMap::new(),
                sessions: BTreeMap::new(),
                views: BTreeMap::new(),
                next_version: start,
                next_session: 1,
                rejected_unknown_branch: 0,
                rejected_other: 0,
                rejected_auth: 0,
                replaced: 0,
            }),
            capacity: std::sync::OnceLock::new(),
            authority: std::sync::OnceLock::new(),
        }
    }

    /// Feeds the reports of every session into `wrr`'s capacity estimates and wakes `changed`
    /// after each (first call wins).
    pub fn estimate_capacity_into(&self, wrr: Arc<Mutex<Wrr>>, changed: Arc<Notify>) {
        let _ = self.capacity.set((wrr, changed));
    }

    /// One report of gateway `branch` received at `at`: each group's counters → its capacity
    /// estimate ([`crate::capacity`]).
    fn feed_report(&self, branch: u8, at: Instant, rep: &Report) {
        let Some((wrr, changed)) = self.capacity.get() else {
            return;
        };
        let Ok(a) = BranchId::new(branch) else {
            return;
        };
        let mut w = wrr.lock().unwrap_or_else(PoisonError::into_inner);
        for g in &rep.groups {
            if let (Ok(b), Ok(id)) = (BranchId::new(g.branch), PathGroupId::new(g.group)) {
                w.report(
                    (a, b, id),
                    at,
                    (g.bytes_tx, g.busy_us, g.window_bps),
                    crate::capacity::Transport {
                        acked: g.acked_bytes,
                        retrans: g.retrans_bytes,
                        queued: g.queued_bytes,
                        inflight_bps: g.inflight_bps,
                    },
                );
            }
        }
        drop(w);
        changed.notify_one();
    }

    /// Gives the gateway channel the CA: enrolment, renewal and the TLS listener need it.
    /// Only the first call counts.
    pub fn set_authority(&self, authority: Arc<Authority>) {
        let _ = self.authority.set(authority);
    }

    /// The CA, if `ssc` runs one.
    pub fn authority(&self) -> Option<&Arc<Authority>> {
        self.authority.get()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Recomputes every branch's config from `catalog` and `weights`; a branch whose content
    /// changed gets a new version, pushed at once to its session. Branches no longer in the
    /// inventory lose their config (their session is closed). Returns the branches that changed.
    pub fn update(&self, catalog: &Catalog, weights: &BTreeMap<(u8, u8), PairWeights>) -> Vec<u8> {
        let prio = priorities();
        let mut changed = Vec::new();
        let mut inner = self.lock();
        let present: Vec<u8> = catalog.inventory().branches().map(|b| b.id.get()).collect();
        inner.configs.retain(|b, tx| {
            let keep = present.contains(b);
            if !keep {
                tx.send_replace(None);
            }
            keep
        });
        for b in catalog.inventory().branches() {
            let remotes = build_remotes(catalog, weights, b.id);
            let id = b.id.get();
            let same = inner.configs.get(&id).is_some_and(|tx| {
                tx.borrow()
                    .as_ref()
                    .is_some_and(|c| c.remotes == remotes && c.priorities == prio)
            });
            if same {
                continue;
            }
            inner.next_version += 1;
            let cfg = Arc::new(GatewayConfig {
                version: inner.next_version,
                branch_id: id,
                remotes,
                classifier: None,
                priorities: prio.clone(),
            });
            if let Some((v, _)) = inner.views.get_mut(&id) {
                v.config_version = cfg.version;
            }
            match inner.configs.get(&id) {
                Some(tx) => {
                    tx.send_replace(Some(cfg));
                }
                None => {
                    inner.configs.insert(id, watch::Sender::new(Some(cfg)));
                }
            }
            changed.push(id);
        }
        changed
    }

    /// The current config of `branch`.
    pub fn config(&self, branch: u8) -> Option<Arc<GatewayConfig>> {
        self.lock()
            .configs
            .get(&branch)
            .and_then(|tx| tx.borrow().clone())
    }

    /// What the REST API shows.
    pub fn list(&self) -> GatewayList {
        let inner = self.lock();
        let now = Instant::now();
        GatewayList {
            gateways: inner
                .views
                .values()
                .map(|(v, at)| {
                    let mut v = v.clone();
                    v.last_report_age_ms =
                        at.map(|t| u64::try_from(now.duration_since(t).as_millis()).unwrap_or(0));
                    v
                })
                .collect(),
            rejected_unknown_branch: inner.rejected_unknown_branch,
            rejected_other: inner.rejected_other,
            replaced: inner.replaced,
            rejected_auth: inner.rejected_auth,
            enrolment: self.authority.get().map(|a| a.counters()),
        }
    }

    /// Opens a session for a registered gateway: `Err` with the message for the peer when the
    /// branch has no config (not in the inventory). Replaces an older session of the branch.
    fn open(&self, reg: &Register, peer: &str) -> Result<Opened, String> {
        let mut inner = self.lock();
        let Some(rx) = inner.configs.get(&reg.branch_id).map(|tx| tx.subscribe()) else {
            inner.rejected_unknown_branch += 1;
            return Err(format!(
                "branch {} is not in the controller's inventory",
                reg.branch_id
            ));
        };
        let id = inner.next_session;
        inner.next_session += 1;
        let (kill_tx, kill_rx) = oneshot::channel();
        if let Some(mut old) = inner.sessions.insert(
            reg.branch_id,
            SessionSlot {
                id,
                kill: Some(kill_tx),
            },
        ) {
            if let Some(k) = old.kill.take() {
                let _ = k.send(());
            }
            inner.replaced += 1;
        }
        let version = rx.borrow().as_ref().map_or(0, |c| c.version);
        let entry = inner.views.entry(reg.branch_id).or_default();
        let sessions = entry.0.sessions + 1;
        entry.0 = GatewayView {
            branch: reg.branch_id,
            connected: true,
            peer: peer.to_owned(),
            software_version: reg.software_version.clone(),
            wan: reg.wan.clone(),
            config_version: version,
            config_version_sent: 0,
            config_version_acked: reg.config_version,
            last_error: None,
            last_report: entry.0.last_report.take(),
            last_report_age_ms: None,
            sessions,
        };
        Ok(Opened {
            id,
            configs: rx,
            kill: kill_rx,
        })
    }

    fn with_view(
        &self,
        branch: u8,
        session: u64,
        f: impl FnOnce(&mut GatewayView, &mut Option<Instant>),
    ) {
        let mut inner = self.lock();
        if inner.sessions.get(&branch).is_some_and(|s| s.id == session) {
            if let Some((v, at)) = inner.views.get_mut(&branch) {
                f(v, at);
            }
        }
    }

    fn close(&self, branch: u8, session: u64) {
        let mut inner = self.lock();
        if inner.sessions.get(&branch).is_some_and(|s| s.id == session) {
            inner.sessions.remove(&branch);
            if let Some((v, _)) = inner.views.get_mut(&branch) {
                v.connected = false;
            }
        }
    }

    fn reject_other(&self) {
        self.lock().rejected_other += 1;
    }

    fn reject_auth(&self) {
        self.lock().rejected_auth += 1;
    }
}

/// The bound gateway listeners.
#[derive(Debug)]
pub struct Gwc {
    tcp: Option<TcpListener>,
    tls: Option<TcpListener>,
    unix: Vec<(PathBuf, UnixListener)>,
    registry: Arc<Registry>,
}

impl Gwc {
    /// Binds every listener (errors name the address or path).
    pub async fn bind(config: &GwcConfig, registry: Arc<Registry>) -> std::io::Result<Self> {
        let Listeners { tcp, unix } =
            Listeners::bind("gateway", config.listen, &config.unix).await?;
        let tls = match config.tls_listen {
            Some(a) => {
                if registry.authority().is_none() {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        "the gateway TLS listener needs the CA (ssc's [ca] section)",
                    ));
                }
                Some(TcpListener::bind(a).await.map_err(|e| {
                    std::io::Error::new(e.kind(), format!("bind gateway TLS {a}: {e}"))
                })?)
            }
            None => None,
        };
        Ok(Self {
            tcp,
            tls,
            unix,
            registry,
        })
    }

    /// The TCP address (useful with port 0).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.tcp.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The TLS address (useful with port 0).
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Serves gateways until `shutdown`: recomputes the configs on every catalog commit and
    /// every `wrr_changed` notification (new measured rates), and runs one task per session.
    pub async fn run(
        self,
        mut catalog: watch::Receiver<Arc<Catalog>>,
        wrr: Arc<Mutex<Wrr>>,
        wrr_changed: Arc<Notify>,
        shutdown: impl std::future::Future<Output = ()> + Send,
    ) {
        self.registry
            .estimate_capacity_into(Arc::clone(&wrr), Arc::clone(&wrr_changed));
        // The configs of the current catalog first: a gateway that connects while ssc starts
        // waits in the listen backlog instead of being refused as an unknown branch.
        let registry = Arc::clone(&self.registry);
        let recompute = move |c: Arc<Catalog>| {
            let registry = Arc::clone(&registry);
            let wrr = Arc::clone(&wrr);
            // One max-flow per group: off the async threads.
            tokio::task::spawn_blocking(move || {
                let weights: BTreeMap<(u8, u8), PairWeights> = {
                    let mut w = wrr.lock().unwrap_or_else(PoisonError::into_inner);
                    w.update(c.inventory(), c.groups());
                    w.weights()
                        .map(|p| ((p.source, p.destination), p.clone()))
                        .collect()
                };
                let changed = registry.update(&c, &weights);
                if !changed.is_empty() {
                    info!(branches = ?changed, "gateway configs changed: pushed");
                }
            })
        };
        let first = Arc::clone(&catalog.borrow_and_update());
        let _ = recompute(first).await;
        let mut tasks = tokio::task::JoinSet::new();
        if let Some(l) = self.tcp {
            let reg = Arc::clone(&self.registry);
            tasks.spawn(async move {
                loop {
                    match l.accept().await {
                        Ok((s, peer)) => {
                            let _ = s.set_nodelay(true);
                            tokio::spawn(session(
                                s,
                                peer.to_string(),
                                Transport::Tcp,
                                Arc::clone(&reg),
                            ));
                        }
                        Err(e) => {
                            warn!(error = %e, "gateway accept failed");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    }
                }
            });
        }
        if let Some(l) = self.tls {
            let reg = Arc::clone(&self.registry);
            tasks.spawn(async move {
                loop {
                    match l.accept().await {
                        Ok((s, peer)) => {
                            let _ = s.set_nodelay(true);
                            tokio::spawn(tls_session(s, peer.to_string(), Arc::clone(&reg)));
                        }
                        Err(e) => {
                            warn!(error = %e, "gateway accept failed");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    }
                }
            });
        }
        for (path, l) in self.unix {
            let reg = Arc::clone(&self.registry);
            tasks.spawn(async move {
                loop {
                    match l.accept().await {
                        Ok((s, _)) => {
                            tokio::spawn(session(
                                s,
                                format!("unix:{}", path.display()),
                                Transport::Unix,
                                Arc::clone(&reg),
                            ));
                        }
                        Err(e) => {
                            warn!(error = %e, "gateway accept failed");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    }
                }
            });
        }
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                r = catalog.changed() => {
                    if r.is_err() {
                        break;
                    }
                }
                () = wrr_changed.notified() => {}
            }
            let c = Arc::clone(&catalog.borrow_and_update());
            let _ = recompute(c).await;
        }
        tasks.abort_all();
    }
}

/// Why a session ended (logged; the peer got an [`ErrorMsg`] where there is one).
#[derive(Debug, thiserror::Error)]
enum SessionEnd {
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("peer closed the stream")]
    Eof,
    #[error("protocol: {0}")]
    Protocol(String),
    #[error("replaced by a newer session of the same branch")]
    Replaced,
    #[error("branch removed from the inventory")]
    Removed,
    #[error("silent for {0:?}")]
    Silent(Duration),
    #[error("its certificate {0} was revoked")]
    Revoked(u64),
}

async fn send<S: AsyncWrite + Unpin>(w: &mut S, msg: &ControllerMsg) -> Result<(), SessionEnd> {
    let mut out = Vec::new();
    gwchan::encode(msg, &mut out).map_err(|e| SessionEnd::Protocol(e.to_string()))?;
    w.write_all(&out).await?;
    w.flush().await?;
    Ok(())
}

async fn recv<S: AsyncRead + Unpin>(
    r: &mut S,
    buf: &mut Vec<u8>,
) -> Result<GatewayMsg, SessionEnd> {
    loop {
        match gwchan::decode::<GatewayMsg>(buf) {
            Ok(Some((m, n))) => {
                buf.drain(..n);
                return Ok(m);
            }
            Ok(None) => {}
            Err(e) => return Err(SessionEnd::Protocol(e.to_string())),
        }
        // Read into a separate chunk: if this future is dropped (select, timeout), nothing
        // half-read is left in `buf`.
        let mut chunk = [0u8; READ_CHUNK];
        let n = r.read(&mut chunk).await?;
        if n == 0 {
            return Err(SessionEnd::Eof);
        }
        buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
    }
}

fn error_msg(code: &str, message: impl Into<String>) -> ControllerMsg {
    ControllerMsg::Error(ErrorMsg {
        code: code.to_owned(),
        message: message.into(),
    })
}

/// How a session reached us: what it may do depends on it (docs/gwchan.md §1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    /// Clear TCP: register only (no enrolment: the token would travel in clear).
    Tcp,
    /// A unix socket: filesystem permissions protect it; register and enrol.
    Unix,
    /// TLS with the client's verified certificate, if it presented one (branch, serial):
    /// register and renew need one (of the registering branch), enrol does not.
    Tls(Option<(mpa::BranchId, u64)>),
}

/// The TLS handshake on the gateway listener, then [`session`].
async fn tls_session(stream: tokio::net::TcpStream, peer: String, registry: Arc<Registry>) {
    let Some(authority) = registry.authority().cloned() else {
        return;
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(authority.server_config());
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            registry.reject_other();
            warn!(%peer, error = %e, "gateway TLS handshake failed");
            return;
        }
        Err(_) => {
            registry.reject_other();
            warn!(%peer, "gateway TLS handshake timed out");
            return;
        }
    };
    let client = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| (pki::identity_of(c), pki::serial_of(c)));
    let client = match client {
        None => None,
        Some((Ok(b), Ok(serial))) => Some((b, serial)),
        Some(_) => {
            // Verified by our CA but without a branch identity (e.g. ssc.mms itself).
            registry.reject_auth();
            warn!(%peer, "gateway refused: client certificate without a branch identity");
            return;
        }
    };
    session(tls, peer, Transport::Tls(client), registry).await;
}

/// What the first message after the hello asked for.
enum Opening {
    Register(Register),
    Enrol(mpa::gwchan::Enrol),
    Renew(mpa::gwchan::Renew),
}

/// The answer to an enrol or renew: credentials, or the error code and text for the peer.
/// Blocking (a database commit and a signature): run it off the async threads.
fn credentials_outcome(
    transport: Transport,
    protocol: u32,
    opening: Opening,
    registry: &Registry,
) -> Result<mpa::gwchan::Credentials, (&'static str, String)> {
    if protocol < 2 {
        return Err(("version", "enrol and renew need protocol 2".into()));
    }
    let Some(authority) = registry.authority().cloned() else {
        return Err(("unavailable", "this controller runs no CA".into()));
    };
    match (opening, transport) {
        (Opening::Enrol(_), Transport::Tcp) => {
            registry.reject_auth();
            Err((
                "insecure",
                "enrolment over clear TCP is refused (the token would travel in clear): use \
                 tls:HOST:PORT"
                    .into(),
            ))
        }
        (Opening::Enrol(req), _) => authority
            .enrol(&req)
            .map_err(|e| ("enrol_refused", e.to_string())),
        (Opening::Renew(req), Transport::Tls(Some((b, serial)))) => authority
            .renew(b, serial, &req)
            .map_err(|e| ("renew_refused", e.to_string())),
        (Opening::Renew(_), _) => {
            registry.reject_auth();
            Err((
                "no_certificate",
                "renewal needs mutual TLS with the current certificate".into(),
            ))
        }
        (Opening::Register(_), _) => Err(("protocol", "expected enrol or renew".into())),
    }
}

/// One gateway session: hello, then registration (configs out, reports/acks in) or an
/// enrolment/renewal (one answer, then close).
async fn session<S>(stream: S, peer: String, transport: Transport, registry: Arc<Registry>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut r, mut w) = tokio::io::split(stream);
    let mut buf = Vec::new();
    let handshake = async {
        let hello = match recv(&mut r, &mut buf).await? {
            GatewayMsg::Hello(h) => h,
            other => {
                return Err(SessionEnd::Protocol(format!(
                    "expected hello, got {other:?}"
                )))
            }
        };
        // The session runs at the gateway's version (a protocol 2 gateway never gets a crl).
        send(
            &mut w,
            &ControllerMsg::Hello(Hello::with_protocol(
                hello.negotiated(),
                concat!("ssc ", env!("CARGO_PKG_VERSION")),
            )),
        )
        .await?;
        if let Err(e) = hello.check_gateway() {
            send(&mut w, &error_msg("version", e.clone())).await?;
            return Err(SessionEnd::Protocol(e));
        }
        match recv(&mut r, &mut buf).await? {
            GatewayMsg::Register(reg) => Ok((hello.protocol, Opening::Register(reg))),
            GatewayMsg::Enrol(req) => Ok((hello.protocol, Opening::Enrol(req))),
            GatewayMsg::Renew(req) => Ok((hello.protocol, Opening::Renew(req))),
            other => Err(SessionEnd::Protocol(format!(
                "expected register, enrol or renew, got {other:?}"
            ))),
        }
    };
    let (protocol, reg) = match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
        Ok(Ok((protocol, Opening::Register(reg)))) => (protocol, reg),
        Ok(Ok((protocol, opening))) => {
            // The CA's work (a database commit, a signature) off the async threads.
            let reg = Arc::clone(&registry);
            let outcome = tokio::task::spawn_blocking(move || {
                credentials_outcome(transport, protocol, opening, &reg)
            })
            .await
            .unwrap_or_else(|_| Err(("unavailable", "internal error".into())));
            match outcome {
                Ok(c) => {
                    let _ = send(&mut w, &ControllerMsg::Credentials(c)).await;
                }
                Err((code, why)) => {
                    info!(%peer, code, "credentials request refused: {why}");
                    let _ = send(&mut w, &error_msg(code, why)).await;
                }
            }
            let _ = w.shutdown().await;
            return;
        }
        Ok(Err(e)) => {
            registry.reject_other();
            warn!(%peer, error = %e, "gateway handshake failed");
            return;
        }
        Err(_) => {
            registry.reject_other();
            warn!(%peer, "gateway handshake timed out");
            return;
        }
    };
    let branch = reg.branch_id;
    let client_serial = match transport {
        Transport::Tls(Some((_, serial))) => Some(serial),
        _ => None,
    };
    if let Transport::Tls(client) = transport {
        let refusal = match client {
            None => Some((
                "no_certificate",
                "register over TLS needs a client certificate of the branch".to_owned(),
            )),
            Some((b, _)) if b.get() != branch => Some((
                "wrong_branch",
                format!("the client certificate is branch {b}'s, the register says {branch}"),
            )),
            Some(_) => None,
        };
        if let Some((code, why)) = refusal {
            registry.reject_auth();
            warn!(%peer, branch, code, "gateway refused: {why}");
            let _ = send(&mut w, &error_msg(code, why)).await;
            let _ = w.shutdown().await;
            return;
        }
    }
    let Opened {
        id,
        mut configs,
        mut kill,
    } = match registry.open(&reg, &peer) {
        Ok(x) => x,
        Err(why) => {
            warn!(%peer, branch, "gateway refused: {why}");
            let _ = send(&mut w, &error_msg("unknown_branch", why)).await;
            let _ = w.shutdown().await;
            return;
        }
    };
    info!(%peer, branch, version = %reg.software_version, protocol, "gateway registered");
    // Protocol 3 with a CA: the current CRL at once, then every new one (revocation,
    // re-signing). Without, a receiver that never changes.
    let authority = registry.authority().cloned();
    let mut crl = match (&authority, protocol >= CRL_PROTOCOL) {
        (Some(a), true) => {
            let mut rx = a.subscribe_crl();
            rx.mark_changed();
            rx
        }
        _ => tokio::sync::watch::channel(Arc::new(String::new())).1,
    };
    let result: Result<(), SessionEnd> = async {
        // The current config at once, then every change.
        configs.mark_changed();
        loop {
            tokio::select! {
                r = crl.changed() => {
                    if r.is_err() {
                        // No CA (or it is gone): nothing more to push.
                        crl = tokio::sync::watch::channel(Arc::new(String::new())).1;
                        continue;
                    }
                    let pem = crl.borrow_and_update().clone();
                    send(&mut w, &ControllerMsg::Crl(CrlUpdate { crl_pem: (*pem).clone() })).await?;
                    debug!(branch, "CRL pushed");
                    // A session whose own certificate is now revoked ends here (its new
                    // connections are refused by the listener's CRL).
                    if let (Some(a), Some(serial)) = (&authority, client_serial) {
                        if a.is_revoked(serial) {
                            let _ = send(&mut w, &error_msg("revoked", "this gateway's certificate was revoked")).await;
                            return Err(SessionEnd::Revoked(serial));
                        }
                    }
                }
                r = configs.changed() => {
                    if r.is_err() {
                        return Err(SessionEnd::Removed);
                    }
                    let cfg = configs.borrow_and_update().clone();
                    let Some(cfg) = cfg else {
                        send(&mut w, &error_msg("unknown_branch", "the branch was removed from the inventory")).await?;
                        return Err(SessionEnd::Removed);
                    };
                    send(&mut w, &ControllerMsg::Config((*cfg).clone())).await?;
                    debug!(branch, version = cfg.version, "config pushed");
                    registry.with_view(branch, id, |v, _| v.config_version_sent = cfg.version);
                }
                _ = &mut kill => {
                    let _ = send(&mut w, &error_msg("replaced", "a newer session of this branch replaced this one")).await;
                    return Err(SessionEnd::Replaced);
                }
                m = tokio::time::timeout(SESSION_TIMEOUT, recv(&mut r, &mut buf)) => {
                    match m {
                        Err(_) => return Err(SessionEnd::Silent(SESSION_TIMEOUT)),
                        Ok(Err(e)) => return Err(e),
                        Ok(Ok(GatewayMsg::Report(rep))) => {
                            registry.feed_report(branch, Instant::now(), &rep);
                            registry.with_view(branch, id, |v, at| {
                                v.last_report = Some(rep);
                                *at = Some(Instant::now());
                            });
                        }
                        Ok(Ok(GatewayMsg::Ack(Ack { config_version, received_version, error }))) => {
                            if let Some(e) = &error {
                                warn!(branch, received_version, error = %e, "gateway refused its config");
                            } else {
                                info!(branch, config_version, "gateway acked its config");
                            }
                            registry.with_view(branch, id, |v, _| {
                                v.config_version_acked = config_version;
                                v.last_error = error;
                            });
                        }
                        Ok(Ok(other)) => {
                            return Err(SessionEnd::Protocol(format!("unexpected {other:?}")));
                        }
                    }
                }
            }
        }
    }
    .await;
    registry.close(branch, id);
    match result {
        Err(SessionEnd::Protocol(e)) => {
            let _ = send(&mut w, &error_msg("protocol", e.clone())).await;
            warn!(%peer, branch, error = %e, "gateway session ended");
        }
        Err(e) => info!(%peer, branch, reason = %e, "gateway session ended"),
        Ok(()) => {}
    }
    let _ = w.shutdown().await;
}
