//! UI (seed 000 §IV, "User Interface"): the operator's way into the SSC.
//!
//! A thin driver over the pure [`crate::inventory`], [`crate::path_group`] and [`crate::swap`]
//! cores and the [`crate::store`] database:
//! - [`config`]: the `ssc` TOML configuration (`[api]`, `[database]`).
//! - [`routes`]: the one table of routes ([`routes::ROUTES`]) that `api` and `openapi` share.
//! - [`api`]: the REST API (axum, JSON, bearer token), one submodule per resource.
//! - [`openapi`]: the OpenAPI 3.1 document built from that table and the schemas `api` derives
//!   from its types ([`api::openapi_document`]), served at `/openapi.json`.
//!
//! Imports point down only: `api` → `openapi` → `routes`.
//! - [`client`]: the blocking HTTP client behind the `ssc` CLI subcommands.
//! - [`dashboard`]: the web dashboard at `/ui/` (static files compiled in; data from the API
//!   with the operator's bearer token) and the driver of its in-memory history.
//! - the WRR weights ([`crate::wrr`]) are served at `/api/v1/weights`; `ssc run` feeds them the
//!   SDC's group rates ([`api::AppState::with_wrr`]).
//!
//! Call order for a server: [`config::Config::load`] → [`crate::store::Store::open`] →
//! [`api::AppState::new`] → [`serve`].
pub mod api;
pub mod client;
pub mod config;
pub mod dashboard;
pub mod openapi;
pub mod routes;

use std::future::Future;
use std::sync::Arc;

use crate::store::Store;

/// Serves the REST API on `listener` until `shutdown` completes (then finishes the requests in
/// flight). With `sdc`, `/api/v1/stats` serves the statistics the OFC collects.
pub async fn serve(
    listener: tokio::net::TcpListener,
    store: Arc<Store>,
    token: &str,
    body_limit_bytes: usize,
    sdc: Option<Arc<std::sync::Mutex<crate::sdc::Sdc>>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let mut state = api::AppState::new(store, token);
    if let Some(sdc) = sdc {
        state = state.with_sdc(sdc);
    }
    serve_state(listener, state, body_limit_bytes, shutdown).await
}

/// The REST API's TLS configuration from a certificate (chain) and key file (PEM;
/// `api.rest_tls`): TLS 1.3 and 1.2 with the project's crypto provider, no client certificate.
pub fn rest_tls_config(
    cert_file: &std::path::Path,
    key_file: &std::path::Path,
) -> Result<Arc<rustls::ServerConfig>, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_file)
        .and_then(|i| i.collect::<Result<_, _>>())
        .map_err(|e| format!("api.rest_tls.cert_file {}: {e}", cert_file.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "api.rest_tls.cert_file {}: no certificate",
            cert_file.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key_file)
        .map_err(|e| format!("api.rest_tls.key_file {}: {e}", key_file.display()))?;
    let cfg = rustls::ServerConfig::builder_with_provider(pki::tls::provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("api.rest_tls: {e}"))?;
    let mut cfg = cfg;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// A TCP listener that hands axum only connections whose TLS handshake finished: the
/// handshakes run in their own tasks (a slow client delays nobody), bounded like the other
/// listeners ([`crate::preauth`]: caps in total and per source, 5 s deadline, rate-limited
/// refusal logs).
pub struct TlsListener {
    ready: tokio::sync::mpsc::Receiver<(
        tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
        std::net::SocketAddr,
    )>,
    addr: std::net::SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for TlsListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsListener")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TlsListener {
    /// Starts accepting on `listener` with `tls`.
    pub fn new(
        listener: tokio::net::TcpListener,
        tls: Arc<rustls::ServerConfig>,
    ) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let (tx, ready) = tokio::sync::mpsc::channel(64);
        let guard = crate::preauth::Guard::new("REST", crate::preauth::PreAuthLimits::default());
        let acceptor = tokio_rustls::TlsAcceptor::from(tls);
        let task = tokio::spawn(async move {
            loop {
                let (s, peer) = match listener.accept().await {
                    Ok(x) => x,
                    Err(e) => {
                        tracing::warn!(error = %e, "REST accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let Some(permit) = guard.admit(Some(peer.ip())) else {
                    continue;
                };
                let (acceptor, tx, guard) = (acceptor.clone(), tx.clone(), Arc::clone(&guard));
                tokio::spawn(async move {
                    let deadline = guard.limits().deadline;
                    match tokio::time::timeout(deadline, acceptor.accept(s)).await {
                        Ok(Ok(t)) => {
                            drop(permit);
                            let _ = tx.send((t, peer)).await;
                        }
                        Ok(Err(e)) => {
                            guard.refuse(
                                Some(peer.ip()),
                                crate::preauth::Reason::HandshakeFailed,
                                &format!("REST TLS handshake with {peer}: {e}"),
                            );
                        }
                        Err(_) => {
                            guard.refuse(
                                Some(peer.ip()),
                                crate::preauth::Reason::HandshakeTimeout,
                                &format!("REST TLS handshake with {peer}"),
                            );
                        }
                    }
                });
            }
        });
        Ok(Self { ready, addr, task })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(x) => x,
            // The accept task ended (it does not, short of a panic): serve nothing more.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}

/// [`serve_state`] over HTTPS ([`TlsListener`]).
pub async fn serve_state_tls(
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    state: api::AppState,
    body_limit_bytes: usize,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = api::router(state, body_limit_bytes);
    axum::serve(TlsListener::new(listener, tls)?, app)
        .with_graceful_shutdown(shutdown)
        .await
}

/// [`serve`] with a prepared [`api::AppState`] (e.g. one sharing its SDC and WRR state with
/// other tasks).
pub async fn serve_state(
    listener: tokio::net::TcpListener,
    state: api::AppState,
    body_limit_bytes: usize,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = api::router(state, body_limit_bytes);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}
