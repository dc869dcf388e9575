//! OFC: the OpenFlow 1.3 controller of the SSC (seed 000 §IV, "OpenFlow Controller").
//!
//! Pure core (no IO):
//! - [`flowmod`]: the flow IR of [`crate::swap`] ↔ `ofproto` FLOW_MOD / flow stats, in one place.
//! - [`reconcile`]: the diff by cookie (switch vs compiled table, or old vs new compiled table)
//!   and the order of its steps (removal source → destination, install destination → source).
//!
//! Driver (tokio):
//! - [`Ofc::bind`] listens on TCP (`openflow.listen`) and on unix sockets (`openflow.unix`; OVS
//!   in another network namespace reaches those with `set-controller br0 unix:PATH`, no IP).
//! - one task per switch connection (`switch`): HELLO, FEATURES (datapath id → branch:
//!   [`branch_of_datapath`]), echo keepalive and dead-peer timeout (the `ofproto` channel), a
//!   bounded command queue, statistics polling for the SDC.
//! - one coordinator task ([`Ofc::run`]): registers switches, sends each (re)connected switch a
//!   full reconcile against the current compiled table, and on every committed change of the
//!   store pushes the difference to all connected switches step by step ([`reconcile::plan`]),
//!   each step confirmed by a barrier on every switch it touches before the next starts.
//!   A switch that does not confirm a step within `stage_timeout` is dropped (it reconciles when
//!   it reconnects) and the member paths it failed are not installed further, so one slow or
//!   dead switch delays the others by at most one `stage_timeout` per update and never leaves a
//!   member path half-installed.
//!
//! Datapath id → branch: the datapath id IS the branch id (1..=15). The gateway sets
//! `other-config:datapath-id=000000000000000B` on `br0` (B in hex); no extra inventory field or
//! database schema is needed, and a switch with any other id is refused with a WARN naming the
//! setting.
//!
//! Files: `config` (settings, queue bound, datapath id ↔ branch; shared with the switch tasks),
//! `switch` (one connection, and the events it sends the coordinator), this file (listeners and
//! the coordinator).
mod config;
pub mod flowmod;
pub mod reconcile;
mod switch;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::listen::Listeners;
use crate::preauth::{Guard, Permit, Reason};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{mpsc, oneshot, watch};

pub use config::{branch_of_datapath, datapath_id_of, OfcConfig, COMMAND_QUEUE};
pub use switch::SwitchError;
use switch::{Accepted, Auth, Command, CoordEvent, SwitchHandle};

use crate::inventory::BranchId;
use crate::path_group::PathCode;
use crate::sdc::Sdc;
use crate::store::Catalog;
use crate::swap;

/// The bound OpenFlow server.
#[derive(Debug)]
pub struct Ofc {
    config: Arc<OfcConfig>,
    tcp: Option<TcpListener>,
    tls: Option<TcpListener>,
    unix: Vec<(PathBuf, UnixListener)>,
    guard: Arc<Guard>,
}

/// The WARN line `ssc` logs when the clear TCP listener is on (tests look for it).
pub const CLEAR_LISTENER_WARNING: &str = "OpenFlow clear TCP listener enabled: switches on it are UNAUTHENTICATED (they cannot replace a TLS or unix-socket switch and their statistics are ignored); prefer openflow.tls_listen or openflow.unix";

impl Ofc {
    /// Binds every listener (errors name the address or path). The clear TCP listener
    /// (`listen`) is off unless set, and logs [`CLEAR_LISTENER_WARNING`] when it is on.
    pub async fn bind(config: OfcConfig) -> std::io::Result<Self> {
        let Listeners { tcp, unix } =
            Listeners::bind("OpenFlow", config.listen, &config.unix).await?;
        if let Some(a) = tcp.as_ref().and_then(|l| l.local_addr().ok()) {
            tracing::warn!(
                addr = %a,
                loopback = a.ip().is_loopback(),
                "{CLEAR_LISTENER_WARNING}"
            );
        }
        let tls = match (config.tls_listen, &config.tls) {
            (Some(a), Some(_)) => Some(TcpListener::bind(a).await.map_err(|e| {
                std::io::Error::new(e.kind(), format!("bind OpenFlow TLS {a}: {e}"))
            })?),
            (Some(_), None) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "the OpenFlow TLS listener needs the CA's TLS configuration",
                ))
            }
            (None, _) => None,
        };
        let guard = Guard::new("OpenFlow", config.preauth);
        Ok(Self {
            config: Arc::new(config),
            tcp,
            tls,
            unix,
            guard,
        })
    }

    /// The TLS address (useful with port 0).
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The clear TCP address (useful with port 0).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.tcp.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The pre-auth guard of the TCP listeners (its counters: [`Guard::counters`]; the SDC
    /// serves them too once [`Self::run`] started).
    pub fn guard(&self) -> Arc<Guard> {
        Arc::clone(&self.guard)
    }

    /// Serves switches until `shutdown`: accepts connections, reconciles each, and pushes every
    /// change of the catalog seen on `catalog` to the connected switches.
    pub async fn run(
        self,
        mut catalog: watch::Receiver<Arc<Catalog>>,
        sdc: Arc<Mutex<Sdc>>,
        shutdown: impl std::future::Future<Output = ()> + Send,
    ) {
        switch::lock(&sdc).set_openflow_guard(Arc::clone(&self.guard));
        // Unbounded but small: each connection sends at most one `Up` and one `Down`.
        let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
        let mut accept_tasks = tokio::task::JoinSet::new();
        let shared = Shared {
            config: Arc::clone(&self.config),
            events: ev_tx.clone(),
            sdc: Arc::clone(&sdc),
            guard: Arc::clone(&self.guard),
            next_conn: Arc::new(AtomicU64::new(1)),
        };
        if let Some(l) = self.tcp {
            accept_tasks.spawn(accept_tcp(l, None, shared.clone()));
        }
        if let (Some(l), Some(tls)) = (self.tls, self.config.tls.clone()) {
            accept_tasks.spawn(accept_tcp(l, Some(tls), shared.clone()));
        }
        for (path, l) in self.unix {
            let sh = shared.clone();
            accept_tasks.spawn(async move {
                loop {
                    match l.accept().await {
                        Ok((s, _)) => {
                            let acc = sh.accepted(format!("unix:{}", path.display()), None, None);
                            let acc = Accepted {
                                auth: Auth::Local,
                                ..acc
                            };
                            tokio::spawn(sh.clone().serve(s, acc));
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "OpenFlow accept failed");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    }
                }
            });
        }
        drop(shared);
        drop(ev_tx);
        let mut coord = Coordinator {
            config: Arc::clone(&self.config),
            switches: BTreeMap::new(),
            catalog: Arc::clone(&catalog.borrow_and_update()),
            sdc,
            guard: Arc::clone(&self.guard),
        };
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                ev = ev_rx.recv() => match ev {
                    Some(ev) => coord.event(ev),
                    None => break,
                },
                r = catalog.changed() => {
                    if r.is_err() {
                        break;
                    }
                    let new = Arc::clone(&catalog.borrow_and_update());
                    coord.update(new).await;
                }
            }
        }
        accept_tasks.abort_all();
        // Dropping the handles closes every switch task's queue: they end their connections.
        coord.switches.clear();
    }
}

/// What every accept loop and switch task shares.
#[derive(Clone)]
struct Shared {
    config: Arc<OfcConfig>,
    events: mpsc::UnboundedSender<CoordEvent>,
    sdc: Arc<Mutex<Sdc>>,
    guard: Arc<Guard>,
    next_conn: Arc<AtomicU64>,
}

impl Shared {
    fn accepted(&self, peer: String, ip: Option<IpAddr>, permit: Option<Permit>) -> Accepted {
        Accepted {
            peer,
            ip,
            auth: Auth::Clear,
            permit,
            deadline: tokio::time::Instant::now() + self.config.preauth.clamped().deadline,
            conn: self.next_conn.fetch_add(1, Ordering::Relaxed),
        }
    }

    async fn serve<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
        self,
        s: S,
        acc: Accepted,
    ) {
        switch::run(s, acc, self.config, self.events, self.sdc, self.guard).await;
    }
}

/// Accepts switches on a TCP listener forever: clear text (`tls` = `None`, [`Auth::Clear`]), or
/// TLS with a client certificate whose branch the datapath id must name. Every connection
/// first takes a pre-auth place ([`Guard::admit`]) or is closed at once.
async fn accept_tcp(l: TcpListener, tls: Option<Arc<rustls::ServerConfig>>, sh: Shared) {
    loop {
        let (s, peer) = match l.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(error = %e, "OpenFlow accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(permit) = sh.guard.admit(Some(peer.ip())) else {
            continue;
        };
        let _ = s.set_nodelay(true);
        let acc = sh.accepted(peer.to_string(), Some(peer.ip()), Some(permit));
        let Some(tls) = &tls else {
            tokio::spawn(sh.clone().serve(s, acc));
            continue;
        };
        let acceptor = match &sh.config.tls_updates {
            Some(rx) => tokio_rustls::TlsAcceptor::from(Arc::clone(&rx.borrow())),
            None => tokio_rustls::TlsAcceptor::from(Arc::clone(tls)),
        };
        let sh = sh.clone();
        tokio::spawn(async move {
            let ip = acc.ip;
            let s = match tokio::time::timeout_at(acc.deadline, acceptor.accept(s)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    let detail = format!("OpenFlow TLS handshake with {}: {e}", acc.peer);
                    sh.guard.refuse(ip, Reason::HandshakeFailed, &detail);
                    return;
                }
                Err(_) => {
                    let detail = format!("OpenFlow TLS handshake with {}", acc.peer);
                    sh.guard.refuse(ip, Reason::HandshakeTimeout, &detail);
                    return;
                }
            };
            let (_, session) = s.get_ref();
            let identity = session
                .peer_certificates()
                .and_then(|c| c.first())
                .and_then(|c| pki::identity_of(c).ok())
                .and_then(|b| BranchId::new(b.get()).ok());
            tracing::info!(
                peer = %acc.peer,
                version = ?session.protocol_version(),
                suite = ?session.negotiated_cipher_suite().map(|c| c.suite()),
                branch = ?identity.map(|b| b.get()),
                "OpenFlow TLS handshake done"
            );
            let Some(identity) = identity else {
                let detail = format!(
                    "OpenFlow {}: certificate without a branch identity",
                    acc.peer
                );
                sh.guard.refuse(ip, Reason::WrongIdentity, &detail);
                return;
            };
            let acc = Accepted {
                auth: Auth::Tls(identity),
                ..acc
            };
            sh.serve(s, acc).await;
        });
    }
}

struct Coordinator {
    config: Arc<OfcConfig>,
    switches: BTreeMap<BranchId, SwitchHandle>,
    catalog: Arc<Catalog>,
    sdc: Arc<Mutex<Sdc>>,
    guard: Arc<Guard>,
}

impl Coordinator {
    fn event(&mut self, ev: CoordEvent) {
        match ev {
            CoordEvent::Up {
                branch,
                datapath_id,
                peer,
                ip,
                handle,
            } => {
                let authenticated = handle.authenticated;
                if let Some(old) = self.switches.get(&branch) {
                    if old.authenticated && !authenticated {
                        // Dropping `handle` ends the newcomer; the old switch keeps its
                        // connection, its table and its statistics.
                        let detail = format!(
                            "OpenFlow {peer} claims branch {} (datapath id {datapath_id:#018x}) without authenticating; branch {} keeps connection {}",
                            branch.get(),
                            branch.get(),
                            old.conn
                        );
                        self.guard.refuse(ip, Reason::Takeover, &detail);
                        return;
                    }
                    tracing::info!(
                        branch = branch.get(),
                        old = old.conn,
                        new = handle.conn,
                        "switch reconnected: dropping the old connection"
                    );
                }
                let cmd = Command::Reconcile {
                    tables: Arc::new(self.catalog.flows().clone()),
                    ports: swap::switch_ports(self.catalog.inventory(), branch),
                };
                if handle.cmd.try_send(cmd).is_err() {
                    return;
                }
                tracing::info!(%peer, conn = handle.conn, branch = branch.get(), datapath_id = %format!("{datapath_id:#018x}"), authenticated, "switch connected");
                switch::lock(&self.sdc).connected(
                    branch,
                    handle.conn,
                    datapath_id,
                    peer,
                    authenticated,
                );
                self.switches.insert(branch, handle);
            }
            CoordEvent::Down { branch, conn } => {
                if self.switches.get(&branch).is_some_and(|h| h.conn == conn) {
                    self.switches.remove(&branch);
                    switch::lock(&self.sdc).disconnected(branch, conn);
                }
            }
        }
    }

    /// Pushes the change from the current catalog to `new` to every connected switch.
    async fn update(&mut self, new: Arc<Catalog>) {
        let old = Arc::clone(&self.catalog);
        self.catalog = Arc::clone(&new);
        if old.flows() == new.flows() {
            return;
        }
        let t0 = std::time::Instant::now();
        // Every switch of either table: a member path whose entries cannot reach a switch (not
        // connected) is not installed further (its source stays away, so its subflow keeps using
        // the patch flows instead of a half path).
        let all: BTreeSet<BranchId> = old
            .flows()
            .iter()
            .chain(new.flows().iter())
            .map(|(b, _)| b)
            .collect();
        let diffs = reconcile::update_diffs(old.flows(), new.flows(), all);
        let steps = reconcile::plan(&diffs);
        let mut failed_members: BTreeSet<PathCode> = BTreeSet::new();
        let mut ops_total = 0;
        for step in &steps {
            let install = matches!(step.phase, reconcile::Phase::Install(_));
            let mut waits = Vec::new();
            for (branch, ops) in &step.ops {
                let ops: Vec<_> = if install {
                    ops.iter()
                        .filter(|o| o.member().is_none_or(|m| !failed_members.contains(&m)))
                        .cloned()
                        .collect()
                } else {
                    ops.clone()
                };
                if ops.is_empty() {
                    continue;
                }
                let members: Vec<PathCode> = ops.iter().filter_map(|o| o.member()).collect();
                let Some(h) = self.switches.get(branch) else {
                    // Not connected: it gets the whole table when it connects.
                    if install {
                        failed_members.extend(members);
                    }
                    continue;
                };
                ops_total += ops.len();
                let (done_tx, done_rx) = oneshot::channel();
                if h.cmd
                    .try_send(Command::Apply { ops, done: done_tx })
                    .is_err()
                {
                    if install {
                        failed_members.extend(members);
                    }
                    self.drop_switch(*branch, "command queue full or closed");
                    continue;
                }
                waits.push((*branch, members, done_rx));
            }
            let deadline = tokio::time::Instant::now() + self.config.stage_timeout;
            for (branch, members, rx) in waits {
                let why = match tokio::time::timeout_at(deadline, rx).await {
                    Ok(Ok(Ok(()))) => continue,
                    Ok(Ok(Err(e))) => e.to_string(),
                    Ok(Err(_)) => "connection ended".to_owned(),
                    Err(_) => format!("no barrier within {:?}", self.config.stage_timeout),
                };
                // A failed removal needs nothing more: the dropped switch is reconciled (its
                // stale entries deleted) when it reconnects, and forwards nothing until then.
                if install {
                    failed_members.extend(members);
                }
                tracing::warn!(branch = branch.get(), phase = ?step.phase, reason = %why, "update step failed on switch");
                self.drop_switch(branch, "update step failed");
            }
        }
        let report = crate::sdc::PushReport {
            switches: diffs
                .keys()
                .filter(|b| self.switches.contains_key(b))
                .count(),
            steps: steps.len(),
            flow_mods: ops_total,
            failed_members: failed_members.len(),
            ms: t0.elapsed().as_secs_f64() * 1e3,
        };
        tracing::info!(
            switches = report.switches,
            steps = report.steps,
            flow_mods = report.flow_mods,
            failed_members = report.failed_members,
            ms = format!("{:.1}", report.ms),
            "flows pushed"
        );
        let mut sdc = switch::lock(&self.sdc);
        sdc.pushed(report);
        for b in self.switches.keys() {
            sdc.set_flows(*b, new.flows().switch(*b).len());
        }
    }

    fn drop_switch(&mut self, branch: BranchId, why: &str) {
        if let Some(h) = self.switches.remove(&branch) {
            tracing::warn!(
                branch = branch.get(),
                conn = h.conn,
                why,
                "dropping switch; it reconciles when it reconnects"
            );
            switch::lock(&self.sdc).disconnected(branch, h.conn);
        }
    }
}
