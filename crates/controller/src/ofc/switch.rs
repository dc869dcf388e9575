//! One switch connection (driver): a tokio task around an [`ofproto::channel::Channel`].
//!
//! Order of events: HELLO (the channel) → FEATURES_REQUEST (datapath id → branch, see
//! [`branch_of_datapath`]) → `Up` to the coordinator → commands from the coordinator, one at
//! a time, from a bounded queue: `Reconcile` (dump our flows, [`reconcile::diff`] against the
//! compiled table, apply in [`reconcile::plan`] order with a barrier per step) and `Apply` (one
//! step of an inventory change + barrier). Between commands it polls flow and port statistics for
//! the SDC every `stats_interval`. The channel answers echoes and detects a dead peer; every
//! request has its own timeout too, so the task never waits forever.
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ofproto::channel::{Channel, CloseReason, Event, RequestError, SendError};
use ofproto::multipart::{
    FlowStats, MultipartReplyBody, MultipartRequest, MultipartRequestBody, PortStats,
};
use ofproto::port::ofpp;
use ofproto::{Body, Message};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use super::config::{branch_of_datapath, OfcConfig, COMMAND_QUEUE};
use super::flowmod;
use super::reconcile::{self, FlowOp, Installed};
use crate::inventory::BranchId;
use crate::sdc::Sdc;
use crate::swap::{FlowTables, SwitchPort};

/// What switch tasks and listeners tell the coordinator.
#[derive(Debug)]
pub(crate) enum CoordEvent {
    Up {
        branch: BranchId,
        datapath_id: u64,
        peer: String,
        /// The peer's IP address (`None`: a unix socket), for the refusal log.
        ip: Option<std::net::IpAddr>,
        handle: SwitchHandle,
    },
    Down {
        branch: BranchId,
        conn: u64,
    },
}

/// Bytes read from the socket at a time (OVS sends multipart replies in parts of ≤ 64 KiB).
const READ_CHUNK: usize = 64 * 1024;
/// Bytes read at a time before the switch authenticated (HELLO and FEATURES_REPLY are 8 and 32
/// bytes): an unauthenticated peer costs a small buffer (the channel's framing still holds up to
/// one OpenFlow message, ≤ 64 KiB by its 16-bit length).
const PREAUTH_READ_CHUNK: usize = 4 * 1024;

/// How a switch proved who it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Auth {
    /// TLS with a client certificate of this branch (verified by the CA).
    Tls(BranchId),
    /// A unix socket: its filesystem permissions (mode 0600) are the authentication.
    Local,
    /// The clear TCP listener: nothing. Never replaces an authenticated switch, and its
    /// statistics never reach WRR, capacity or adaptive decisions.
    Clear,
}

impl Auth {
    pub(crate) fn authenticated(self) -> bool {
        !matches!(self, Auth::Clear)
    }
}

/// One accepted connection, before its HELLO.
#[derive(Debug)]
pub(crate) struct Accepted {
    /// `ip:port` or `unix:PATH`.
    pub peer: String,
    /// The peer's IP address (`None`: a unix socket).
    pub ip: Option<std::net::IpAddr>,
    pub auth: Auth,
    /// Its place among the pre-auth connections (TCP listeners), freed once FEATURES_REPLY
    /// matched the identity.
    pub permit: Option<crate::preauth::Permit>,
    /// When HELLO and FEATURES_REPLY must be done (the TLS handshake counts against it).
    pub deadline: tokio::time::Instant,
    pub conn: u64,
}

/// Why a switch connection ended or a command failed.
#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    /// The socket failed.
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
    /// The peer closed the connection.
    #[error("connection closed by the switch")]
    Eof,
    /// The channel closed (dead peer, bad HELLO, framing).
    #[error("channel closed: {0:?}")]
    Closed(CloseReason),
    /// A request got no answer in time.
    #[error("no answer to {0} within {1:?}")]
    Timeout(&'static str, Duration),
    /// A request failed.
    #[error("{0} failed: {1:?}")]
    Request(&'static str, RequestError),
    /// The reply had an unexpected shape.
    #[error("unexpected reply to {0}")]
    Unexpected(&'static str),
    /// FLOW_MODs the switch refused (xid, error).
    #[error("switch refused {} FLOW_MOD(s), first: {:?}", .0.len(), .0.first())]
    FlowMods(Vec<(u32, RequestError)>),
    /// Sending failed (closed channel or an unencodable message).
    #[error("send: {0}")]
    Send(#[from] SendError),
    /// The datapath id maps to no branch.
    #[error("datapath id {0:#018x} is no branch id 1..=250 (set other-config:datapath-id to the branch id)")]
    NotABranch(u64),
    /// Over TLS: the switch's certificate is another branch's than its datapath id.
    #[error("datapath id says branch {datapath}, the TLS certificate is branch {certificate}'s: refused")]
    WrongIdentity {
        /// The branch of the datapath id.
        datapath: u8,
        /// The branch of the client certificate.
        certificate: u8,
    },
}

/// What the coordinator asks of a switch task.
#[derive(Debug)]
pub(crate) enum Command {
    /// Dump our flows, diff against `tables`, apply in plan order.
    Reconcile {
        tables: Arc<FlowTables>,
        ports: Vec<SwitchPort>,
    },
    /// Apply one step of an update, then a barrier; report on `done`.
    Apply {
        ops: Vec<FlowOp>,
        done: oneshot::Sender<Result<(), SwitchError>>,
    },
}

/// The coordinator's handle on a switch task.
#[derive(Debug)]
pub(crate) struct SwitchHandle {
    pub conn: u64,
    pub cmd: mpsc::Sender<Command>,
    /// TLS with the branch's certificate, or a unix socket: see [`Auth`].
    pub authenticated: bool,
}

struct Conn<S> {
    io: S,
    ch: Channel,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    request_timeout: Duration,
    branch: Option<BranchId>,
    conn: u64,
    /// A command of the coordinator arrived (it accepted this connection).
    served: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Conn<S> {
    async fn flush(&mut self) -> Result<(), SwitchError> {
        if self.ch.poll_transmit(&mut self.wbuf) {
            self.io.write_all(&self.wbuf).await?;
            self.wbuf.clear();
        }
        Ok(())
    }

    /// Waits for input or the channel's timer once, feeds the channel, sends what it queued.
    async fn pump(&mut self) -> Result<(), SwitchError> {
        self.flush().await?;
        let timeout = self.ch.poll_timeout();
        let sleep = async {
            match timeout {
                Some(t) => tokio::time::sleep_until(t.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = self.io.read(&mut self.rbuf) => {
                let n = r?;
                if n == 0 {
                    return Err(SwitchError::Eof);
                }
                let data = self.rbuf.get(..n).unwrap_or_default();
                self.ch.handle_input(Instant::now(), data);
            }
            () = sleep => self.ch.handle_timeout(Instant::now()),
        }
        self.flush().await
    }

    /// Handles an event nobody waits for.
    fn unsolicited(&self, ev: Event) -> Result<(), SwitchError> {
        match ev {
            Event::Closed(r) => return Err(SwitchError::Closed(r)),
            Event::Message(Message {
                body: Body::Error(e),
                xid,
            }) => {
                tracing::warn!(branch = ?self.branch.map(BranchId::get), conn = self.conn, xid, error = ?e.code, "unsolicited error from switch");
            }
            Event::Message(m) => {
                tracing::debug!(branch = ?self.branch.map(BranchId::get), conn = self.conn, typ = ?m.body.message_type(), "message from switch");
            }
            other => {
                tracing::debug!(branch = ?self.branch.map(BranchId::get), conn = self.conn, event = ?other, "late event");
            }
        }
        Ok(())
    }

    /// Drains events nobody waits for (between commands).
    fn drain(&mut self) -> Result<(), SwitchError> {
        while let Some(ev) = self.ch.poll_event() {
            self.unsolicited(ev)?;
        }
        Ok(())
    }

    /// Pumps until `f` takes an event and returns `Some`, or `what` times out.
    async fn until<T>(
        &mut self,
        what: &'static str,
        mut f: impl FnMut(&Self, Event) -> Result<Option<T>, SwitchError>,
    ) -> Result<T, SwitchError> {
        let deadline = tokio::time::Instant::now() + self.request_timeout;
        loop {
            while let Some(ev) = self.ch.poll_event() {
                if let Event::Closed(r) = ev {
                    return Err(SwitchError::Closed(r));
                }
                if let Some(t) = f(self, ev)? {
                    return Ok(t);
                }
            }
            match tokio::time::timeout_at(deadline, self.pump()).await {
                Ok(r) => r?,
                Err(_) => return Err(SwitchError::Timeout(what, self.request_timeout)),
            }
        }
    }

    /// Sends a request and waits for its reply.
    async fn request(&mut self, what: &'static str, body: Body) -> Result<Body, SwitchError> {
        let x = self.ch.send(Instant::now(), body)?;
        self.flush().await?;
        self.until(what, |c, ev| match ev {
            Event::Reply { xid, reply, .. } if xid == x => Ok(Some(reply)),
            Event::RequestFailed { xid, error, .. } if xid == x => {
                Err(SwitchError::Request(what, error))
            }
            other => c.unsolicited(other).map(|()| None),
        })
        .await
    }

    /// Sends `ops` (pipelined, no round trip per flow) and a barrier; waits for the barrier.
    async fn apply(&mut self, ops: &[FlowOp]) -> Result<(), SwitchError> {
        let now = Instant::now();
        let mut sent = std::collections::BTreeSet::new();
        for op in ops {
            sent.insert(self.ch.send(now, Body::FlowMod(op.to_flow_mod()))?);
        }
        let barrier = self.ch.send(now, Body::BarrierRequest)?;
        self.flush().await?;
        let mut failed = Vec::new();
        self.until("BARRIER", |c, ev| match ev {
            Event::Barrier { xid, .. } if xid == barrier => Ok(Some(())),
            Event::RequestFailed { xid, error, .. } if sent.contains(&xid) => {
                failed.push((xid, error));
                Ok(None)
            }
            Event::RequestFailed { xid, error, .. } if xid == barrier => {
                Err(SwitchError::Request("BARRIER", error))
            }
            other => c.unsolicited(other).map(|()| None),
        })
        .await?;
        if failed.is_empty() {
            Ok(())
        } else {
            Err(SwitchError::FlowMods(failed))
        }
    }

    async fn dump_flows(&mut self) -> Result<Vec<FlowStats>, SwitchError> {
        match self
            .request("multipart FLOW", flowmod::dump_request())
            .await?
        {
            Body::MultipartReply(r) => match r.body {
                MultipartReplyBody::Flow(f) => Ok(f),
                _ => Err(SwitchError::Unexpected("multipart FLOW")),
            },
            _ => Err(SwitchError::Unexpected("multipart FLOW")),
        }
    }

    async fn port_stats(&mut self) -> Result<Vec<PortStats>, SwitchError> {
        let body = Body::MultipartRequest(MultipartRequest::new(MultipartRequestBody::PortStats(
            ofpp::ANY,
        )));
        match self.request("multipart PORT_STATS", body).await? {
            Body::MultipartReply(r) => match r.body {
                MultipartReplyBody::PortStats(p) => Ok(p),
                _ => Err(SwitchError::Unexpected("multipart PORT_STATS")),
            },
            _ => Err(SwitchError::Unexpected("multipart PORT_STATS")),
        }
    }

    async fn check_ports(&mut self, branch: BranchId, want: &[SwitchPort]) {
        let body = Body::MultipartRequest(MultipartRequest::new(MultipartRequestBody::PortDesc));
        let ports = match self.request("multipart PORT_DESC", body).await {
            Ok(Body::MultipartReply(r)) => match r.body {
                MultipartReplyBody::PortDesc(p) => p,
                _ => return,
            },
            _ => return,
        };
        for w in want {
            match ports.iter().find(|p| p.name_str() == w.name) {
                Some(p) if p.port_no == w.ofport => {}
                Some(p) => tracing::warn!(
                    branch = branch.get(), port = %w.name, want = w.ofport, have = p.port_no,
                    "OVS port has the wrong OpenFlow number (set ofport_request)"
                ),
                None => {
                    tracing::warn!(branch = branch.get(), port = %w.name, ofport = w.ofport, "OVS port missing")
                }
            }
        }
    }

    /// Full reconcile: dump, diff, apply step by step. Returns (adds, modifies, deletes).
    async fn reconcile(
        &mut self,
        branch: BranchId,
        tables: &FlowTables,
    ) -> Result<(usize, usize, usize, usize), SwitchError> {
        let dump = self.dump_flows().await?;
        let installed: Vec<Installed> = dump
            .iter()
            .map(|s| Installed {
                cookie: crate::swap::Cookie(s.cookie),
                flow: flowmod::from_flow_stats(s),
            })
            .collect();
        let d = reconcile::diff(&installed, tables.switch(branch));
        let counts = (d.adds(), d.modifies(), d.deletes(), d.unchanged);
        let diffs = std::iter::once((branch, d)).collect();
        for step in reconcile::plan(&diffs) {
            for ops in step.ops.values() {
                self.apply(ops).await?;
            }
        }
        Ok(counts)
    }
}

/// Runs one switch connection until it ends; reports to the coordinator. Failures before the
/// switch authenticated go to the pre-auth `guard` (counted, one log line per source per
/// interval); later ones are logged here.
pub(crate) async fn run<S: AsyncRead + AsyncWrite + Unpin>(
    io: S,
    mut acc: Accepted,
    config: Arc<OfcConfig>,
    events: mpsc::UnboundedSender<CoordEvent>,
    sdc: Arc<Mutex<Sdc>>,
    guard: Arc<crate::preauth::Guard>,
) {
    let conn = acc.conn;
    let mut c = Conn {
        io,
        ch: Channel::new(Instant::now(), config.channel),
        rbuf: vec![0; PREAUTH_READ_CHUNK],
        wbuf: Vec::new(),
        request_timeout: config.request_timeout,
        branch: None,
        conn,
        served: false,
    };
    let result = serve(&mut c, &mut acc, &config, &events, &sdc).await;
    let peer = &acc.peer;
    if let Some(branch) = c.branch {
        let _ = events.send(CoordEvent::Down { branch, conn });
    }
    match result {
        // A switch that closes its connection (restart, shutdown) is not an operator's problem.
        Ok(()) | Err(SwitchError::Eof) if c.served => {
            tracing::info!(%peer, conn, branch = ?c.branch.map(BranchId::get), "switch disconnected")
        }
        // Registered but dropped at once by the coordinator (it logged why, rate-limited).
        Ok(()) => {
            tracing::debug!(%peer, conn, branch = ?c.branch.map(BranchId::get), "switch refused by the coordinator")
        }
        Err(e) if c.branch.is_none() => {
            let reason = match e {
                SwitchError::Timeout(..) => crate::preauth::Reason::HandshakeTimeout,
                SwitchError::WrongIdentity { .. } => crate::preauth::Reason::WrongIdentity,
                _ => crate::preauth::Reason::HandshakeFailed,
            };
            guard.refuse(acc.ip, reason, &format!("OpenFlow {peer}: {e}"));
        }
        Err(e) => {
            tracing::warn!(%peer, conn, branch = ?c.branch.map(BranchId::get), error = %e, "switch connection ended")
        }
    }
}

async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    c: &mut Conn<S>,
    acc: &mut Accepted,
    config: &OfcConfig,
    events: &mpsc::UnboundedSender<CoordEvent>,
    sdc: &Arc<Mutex<Sdc>>,
) -> Result<(), SwitchError> {
    // HELLO and FEATURES before the pre-auth deadline (whatever `request_timeout` says).
    let hello_features = async {
        c.until("HELLO", |_, ev| match ev {
            Event::Connected { .. } => Ok(Some(())),
            _ => Ok(None),
        })
        .await?;
        match c.request("FEATURES", Body::FeaturesRequest).await? {
            Body::FeaturesReply(f) => Ok(f),
            _ => Err(SwitchError::Unexpected("FEATURES")),
        }
    };
    let left = acc
        .deadline
        .saturating_duration_since(tokio::time::Instant::now());
    let features = tokio::time::timeout_at(acc.deadline, hello_features)
        .await
        .map_err(|_| SwitchError::Timeout("HELLO and FEATURES (pre-auth deadline)", left))??;
    let dpid = features.datapath_id;
    let branch = branch_of_datapath(dpid).ok_or(SwitchError::NotABranch(dpid))?;
    // Over TLS the certificate names the branch: a switch may only program its own datapath.
    if let Auth::Tls(id) = acc.auth {
        if id != branch {
            return Err(SwitchError::WrongIdentity {
                datapath: branch.get(),
                certificate: id.get(),
            });
        }
    }
    // Authenticated (or, on the clear listener, as far as it ever gets): full buffers, and its
    // place among the pre-auth connections is free again.
    acc.permit = None;
    c.rbuf.resize(READ_CHUNK, 0);
    c.branch = Some(branch);
    let peer = acc.peer.as_str();
    tracing::debug!(%peer, conn = c.conn, branch = branch.get(), datapath_id = %format!("{dpid:#018x}"), auth = ?acc.auth, "switch said its datapath id");
    let (cmd_tx, mut cmd_rx) = mpsc::channel(COMMAND_QUEUE);
    if events
        .send(CoordEvent::Up {
            branch,
            datapath_id: dpid,
            peer: peer.to_owned(),
            ip: acc.ip,
            handle: SwitchHandle {
                conn: c.conn,
                cmd: cmd_tx,
                authenticated: acc.auth.authenticated(),
            },
        })
        .is_err()
    {
        return Ok(());
    }
    let mut stats = tokio::time::interval(config.stats_interval);
    stats.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        c.drain()?;
        c.flush().await?;
        let timeout = c.ch.poll_timeout();
        let sleep = async {
            match timeout {
                Some(t) => tokio::time::sleep_until(t.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            cmd = cmd_rx.recv() => match cmd.inspect(|_| c.served = true) {
                // The coordinator dropped us (replaced by a newer connection, too slow, shutdown).
                None => return Ok(()),
                Some(Command::Reconcile { tables, ports }) => {
                    c.check_ports(branch, &ports).await;
                    let t0 = Instant::now();
                    let (add, modify, delete, unchanged) = c.reconcile(branch, &tables).await?;
                    let ms = t0.elapsed().as_secs_f64() * 1e3;
                    tracing::info!(branch = branch.get(), add, modify, delete, unchanged, ms = format!("{ms:.1}"), "switch reconciled");
                    lock(sdc).reconciled(branch, c.conn, tables.switch(branch).len(), ms);
                }
                Some(Command::Apply { ops, done }) => {
                    // The coordinator drops a switch whose step failed; a broken connection
                    // ends here, with its own error.
                    match c.apply(&ops).await {
                        Ok(()) => {
                            let _ = done.send(Ok(()));
                        }
                        Err(e @ (SwitchError::Io(_) | SwitchError::Eof | SwitchError::Closed(_) | SwitchError::Timeout(..))) => {
                            let _ = done.send(Err(SwitchError::Unexpected("update step: connection failed")));
                            return Err(e);
                        }
                        Err(e) => {
                            let _ = done.send(Err(e));
                        }
                    }
                }
            },
            _ = stats.tick() => {
                let flows = c.dump_flows().await?;
                let ports = c.port_stats().await?;
                lock(sdc).record(branch, c.conn, Instant::now(), &flows, &ports);
            }
            r = c.io.read(&mut c.rbuf) => {
                let n = r?;
                if n == 0 {
                    return Err(SwitchError::Eof);
                }
                let data = c.rbuf.get(..n).unwrap_or_default();
                c.ch.handle_input(Instant::now(), data);
            }
            () = sleep => c.ch.handle_timeout(Instant::now()),
        }
    }
}

/// Locks the SDC state; a poisoned lock (a panic elsewhere) still holds usable counters.
pub(crate) fn lock(sdc: &Mutex<Sdc>) -> std::sync::MutexGuard<'_, Sdc> {
    sdc.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
