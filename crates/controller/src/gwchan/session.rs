//! One gateway's session: hello, registration (or enrolment / renewal over TLS), then its
//! config pushed on every change, acks and reports, CRL updates.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mpa::gwchan::{self, Ack, ControllerMsg, CrlUpdate, ErrorMsg, GatewayMsg, Hello, Register};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tracing::{debug, info, warn};

use super::registry::{Opened, Registry};

/// How long a gateway may take for its TLS handshake, hello and registration together (the
/// default of `gateways.handshake_timeout_ms`, [`crate::preauth::PreAuthLimits::deadline`]).
pub const HANDSHAKE_TIMEOUT: Duration = crate::preauth::MAX_DEADLINE;
/// Largest message buffered before the gateway authenticated (a hello, register or enrol is well
/// under 2 KiB); the limit afterwards is the codec's ([`gwchan::MAX_BODY_LEN`]).
pub const PREAUTH_MAX_MESSAGE: usize = 16 * 1024;
/// Silence after which a gateway's session is closed (it reports every 2 s).
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(15);
/// Bytes read from a gateway per call; the receive buffer holds at most one message
/// ([`gwchan::MAX_BODY_LEN`]) plus one chunk.
const READ_CHUNK: usize = 16 * 1024;
/// The first gateway protocol that gets pushed CRLs (`ControllerMsg::Crl`).
const CRL_PROTOCOL: u32 = 3;

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
    max: usize,
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
        if buf.len() > max {
            return Err(SessionEnd::Protocol(format!(
                "more than {max} bytes without a complete message before authentication"
            )));
        }
    }
}

/// A session's pre-auth state: its place among the unauthenticated connections (TCP listeners),
/// the deadline of the whole handshake and the peer's address for the refusal log.
#[derive(Debug)]
pub(super) struct PreAuth {
    permit: Option<crate::preauth::Permit>,
    deadline: tokio::time::Instant,
    ip: Option<std::net::IpAddr>,
}

impl PreAuth {
    pub(super) fn new(
        registry: &Registry,
        ip: Option<std::net::IpAddr>,
        permit: Option<crate::preauth::Permit>,
    ) -> Self {
        Self {
            permit,
            deadline: tokio::time::Instant::now() + registry.preauth().limits().deadline,
            ip,
        }
    }

    /// Counts and logs (rate-limited) a refusal before authentication.
    fn refuse(&self, registry: &Registry, reason: crate::preauth::Reason, detail: String) {
        registry.preauth().refuse(self.ip, reason, &detail);
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
pub(super) enum Transport {
    /// Clear TCP: register only (no enrolment: the token would travel in clear).
    Tcp,
    /// A unix socket: filesystem permissions protect it; register and enrol.
    Unix,
    /// TLS with the client's verified certificate, if it presented one (branch, serial):
    /// register and renew need one (of the registering branch), enrol does not.
    Tls(Option<(mpa::BranchId, u64)>),
}

impl Transport {
    /// Whether a session on it proves its branch: a client certificate, or a unix socket
    /// (filesystem permissions). Only such sessions' reports feed capacity, WRR and adaptive
    /// decisions; a clear TCP registration is believed for its config only.
    pub(super) fn authenticated(self) -> bool {
        match self {
            Transport::Tcp | Transport::Tls(None) => false,
            Transport::Unix | Transport::Tls(Some(_)) => true,
        }
    }
}

/// The TLS handshake on the gateway listener, then [`session`].
pub(super) async fn tls_session(
    stream: tokio::net::TcpStream,
    peer: String,
    registry: Arc<Registry>,
    pre: PreAuth,
) {
    use crate::preauth::Reason;
    let Some(authority) = registry.authority().cloned() else {
        return;
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(authority.server_config());
    let tls = match tokio::time::timeout_at(pre.deadline, acceptor.accept(stream)).await {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            registry.reject_other();
            pre.refuse(
                &registry,
                Reason::HandshakeFailed,
                format!("gateway TLS handshake with {peer}: {e}"),
            );
            return;
        }
        Err(_) => {
            registry.reject_other();
            pre.refuse(
                &registry,
                Reason::HandshakeTimeout,
                format!("gateway TLS handshake with {peer}"),
            );
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
            pre.refuse(
                &registry,
                Reason::WrongIdentity,
                format!("gateway {peer}: client certificate without a branch identity"),
            );
            return;
        }
    };
    session(tls, peer, Transport::Tls(client), registry, pre).await;
}

/// What the first message after the hello asked for.
enum Opening {
    Register(Register),
    Enrol(mpa::gwchan::Enrol),
    Renew(mpa::gwchan::Renew),
    Setup(mpa::gwchan::SetupRequest),
}

/// The answer to a zero-touch set-up request (protocol 4): the branch's whole config, only
/// for the branch of the client certificate (or over the unix socket).
fn setup_outcome(
    transport: Transport,
    protocol: u32,
    req: &mpa::gwchan::SetupRequest,
    registry: &Registry,
) -> Result<ControllerMsg, (&'static str, String)> {
    if protocol < mpa::gwchan::SETUP_PROTOCOL {
        return Err(("version", "setup needs protocol 4".into()));
    }
    match transport {
        Transport::Tls(Some((b, _))) if b.get() == req.branch_id => {}
        Transport::Unix => {}
        Transport::Tls(Some((b, _))) => {
            registry.reject_auth();
            return Err((
                "wrong_branch",
                format!(
                    "the certificate is branch {b}'s, the setup request branch {}'s",
                    req.branch_id
                ),
            ));
        }
        Transport::Tls(None) | Transport::Tcp => {
            registry.reject_auth();
            return Err((
                "no_certificate",
                "setup needs mutual TLS with the branch's certificate (enrol first)".into(),
            ));
        }
    }
    registry
        .setup(req.branch_id)
        .map(ControllerMsg::Setup)
        .ok_or_else(|| {
            (
                "unknown_branch",
                format!("branch {} is not in the inventory", req.branch_id),
            )
        })
}

/// The answer to an enrol, renew or setup: credentials (or the setup), or the error code and
/// text for the peer. Blocking (a database commit and a signature): run it off the async
/// threads.
fn credentials_outcome(
    transport: Transport,
    protocol: u32,
    opening: Opening,
    registry: &Registry,
) -> Result<ControllerMsg, (&'static str, String)> {
    if let Opening::Setup(req) = &opening {
        return setup_outcome(transport, protocol, req, registry);
    }
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
            .map(ControllerMsg::Credentials)
            .map_err(|e| ("enrol_refused", e.to_string())),
        (Opening::Renew(req), Transport::Tls(Some((b, serial)))) => authority
            .renew(b, serial, &req)
            .map(ControllerMsg::Credentials)
            .map_err(|e| ("renew_refused", e.to_string())),
        (Opening::Renew(_), _) => {
            registry.reject_auth();
            Err((
                "no_certificate",
                "renewal needs mutual TLS with the current certificate".into(),
            ))
        }
        (Opening::Register(_) | Opening::Setup(_), _) => {
            Err(("protocol", "expected enrol or renew".into()))
        }
    }
}

/// One gateway session: hello, then registration (configs out, reports/acks in) or an
/// enrolment/renewal (one answer, then close).
pub(super) async fn session<S>(
    stream: S,
    peer: String,
    transport: Transport,
    registry: Arc<Registry>,
    mut pre: PreAuth,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    use crate::preauth::Reason;
    let (mut r, mut w) = tokio::io::split(stream);
    let mut buf = Vec::new();
    let handshake = async {
        let hello = match recv(&mut r, &mut buf, PREAUTH_MAX_MESSAGE).await? {
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
        match recv(&mut r, &mut buf, PREAUTH_MAX_MESSAGE).await? {
            GatewayMsg::Register(reg) => Ok((hello.protocol, Opening::Register(reg))),
            GatewayMsg::Enrol(req) => Ok((hello.protocol, Opening::Enrol(req))),
            GatewayMsg::Renew(req) => Ok((hello.protocol, Opening::Renew(req))),
            GatewayMsg::Setup(req) => Ok((hello.protocol, Opening::Setup(req))),
            other => Err(SessionEnd::Protocol(format!(
                "expected register, enrol, renew or setup, got {other:?}"
            ))),
        }
    };
    let (protocol, reg) = match tokio::time::timeout_at(pre.deadline, handshake).await {
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
                Ok(answer) => {
                    let _ = send(&mut w, &answer).await;
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
            pre.refuse(
                &registry,
                Reason::HandshakeFailed,
                format!("gateway {peer}: {e}"),
            );
            return;
        }
        Err(_) => {
            registry.reject_other();
            pre.refuse(
                &registry,
                Reason::HandshakeTimeout,
                format!("gateway {peer}: no hello and register in time"),
            );
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
            pre.refuse(
                &registry,
                Reason::WrongIdentity,
                format!("gateway {peer} (register as branch {branch}, {code}): {why}"),
            );
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
            pre.refuse(
                &registry,
                Reason::HandshakeFailed,
                format!("gateway {peer} (branch {branch}): {why}"),
            );
            let _ = send(&mut w, &error_msg("unknown_branch", why)).await;
            let _ = w.shutdown().await;
            return;
        }
    };
    // Registered: its place among the unauthenticated connections is free again.
    pre.permit = None;
    info!(%peer, branch, version = %reg.software_version, protocol, "gateway registered");
    if !transport.authenticated() {
        warn!(
            %peer,
            branch,
            "gateway registered over clear TCP (unauthenticated): its reports are shown but never \
             feed capacity estimates, WRR weights or adaptive decisions; use tls_listen"
        );
    }
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
                m = tokio::time::timeout(SESSION_TIMEOUT, recv(&mut r, &mut buf, usize::MAX)) => {
                    match m {
                        Err(_) => return Err(SessionEnd::Silent(SESSION_TIMEOUT)),
                        Ok(Err(e)) => return Err(e),
                        Ok(Ok(GatewayMsg::Report(rep))) => {
                            if transport.authenticated() {
                                registry.feed_report(branch, Instant::now(), &rep);
                            } else {
                                registry.ignore_unauthenticated_report();
                            }
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
                        Ok(Ok(GatewayMsg::WanState(state))) if protocol >= gwchan::WAN_STATE_PROTOCOL => {
                            debug!(branch, ?state, "learned WAN state");
                            if transport.authenticated() {
                                let reg = Arc::clone(&registry);
                                // A database write: off the async threads; the session goes on.
                                tokio::task::spawn_blocking(move || reg.learn(branch, &state));
                            } else {
                                // Anyone who reaches the clear TCP port can claim a branch: its
                                // addresses would redirect the other gateways' tunnels. Shown only.
                                registry.with_view(branch, id, |v, _| v.wan_learned = Some(state));
                            }
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
