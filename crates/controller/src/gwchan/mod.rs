//! The gateway channel (`gwchan`), the controller's end (issue #6; seed 000 §IV: the SSC configures
//! every MMSG). Messages and codec: [`mpa::gwchan`]; protocol: `docs/gwchan.md`.
//!
//! Every gateway (`mmsg`) connects out to `ssc` (TCP or a unix socket), says hello, registers
//! with its branch id, and then receives its [`GatewayConfig`](mpa::gwchan::GatewayConfig): the other branches (WAN
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
//! - [`GwChan`]: the listeners and the task that recomputes the configs on every change.
//!
//! Files: `config` (what a gateway is sent, pure), `registry` (state and views), `session` (one
//! gateway's connection), this file (the listeners and the recompute task).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::listen::Listeners;
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{watch, Notify};
use tracing::{info, warn};

use crate::store::Catalog;
use crate::wrr::{PairWeights, Wrr};

mod config;
mod registry;
mod session;

pub use config::{build_remotes, priorities};
pub use registry::{GatewayList, GatewayView, Registry};
pub use session::{HANDSHAKE_TIMEOUT, SESSION_TIMEOUT};

/// Settings of the gateway listeners (`[gateways]` in the config, `--gateway-listen`,
/// `--gateway-tls-listen`, `--gateway-unix`).
#[derive(Clone, Debug, Default)]
pub struct GwChanConfig {
    /// TCP listen address, clear text (`None`: no TCP listener).
    pub listen: Option<SocketAddr>,
    /// TLS listen address (`None`: none); needs the CA ([`Registry::set_authority`]).
    pub tls_listen: Option<SocketAddr>,
    /// Unix socket paths to listen on (a stale socket file is replaced; mode 0600).
    pub unix: Vec<PathBuf>,
    /// Caps on unauthenticated connections of the TCP listeners and the deadline from accept
    /// to registered (TLS handshake included), [`crate::preauth`].
    pub preauth: crate::preauth::PreAuthLimits,
}

/// The bound gateway listeners.
#[derive(Debug)]
pub struct GwChan {
    tcp: Option<TcpListener>,
    tls: Option<TcpListener>,
    unix: Vec<(PathBuf, UnixListener)>,
    registry: Arc<Registry>,
}

impl GwChan {
    /// Binds every listener (errors name the address or path).
    pub async fn bind(config: &GwChanConfig, registry: Arc<Registry>) -> std::io::Result<Self> {
        let Listeners { tcp, unix } =
            Listeners::bind("gateway", config.listen, &config.unix).await?;
        registry.preauth().set_limits(config.preauth);
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
        for (l, tls) in [(self.tcp, false), (self.tls, true)] {
            if let Some(l) = l {
                tasks.spawn(accept_tcp(l, Arc::clone(&self.registry), tls));
            }
        }
        for (path, l) in self.unix {
            let reg = Arc::clone(&self.registry);
            tasks.spawn(async move {
                loop {
                    match l.accept().await {
                        Ok((s, _)) => {
                            let pre = session::PreAuth::new(&reg, None, None);
                            tokio::spawn(session::session(
                                s,
                                format!("unix:{}", path.display()),
                                session::Transport::Unix,
                                Arc::clone(&reg),
                                pre,
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

/// Accepts gateway sessions on a TCP listener forever: clear text, or TLS (`tls`) first. Every
/// connection first takes a pre-auth place ([`crate::preauth::Guard::admit`]) or is closed at
/// once.
async fn accept_tcp(l: TcpListener, reg: Arc<Registry>, tls: bool) {
    loop {
        match l.accept().await {
            Ok((s, peer)) => {
                let Some(permit) = reg.preauth().admit(Some(peer.ip())) else {
                    continue;
                };
                let _ = s.set_nodelay(true);
                let reg = Arc::clone(&reg);
                let pre = session::PreAuth::new(&reg, Some(peer.ip()), Some(permit));
                if tls {
                    tokio::spawn(session::tls_session(s, peer.to_string(), reg, pre));
                } else {
                    let transport = session::Transport::Tcp;
                    tokio::spawn(session::session(s, peer.to_string(), transport, reg, pre));
                }
            }
            Err(e) => {
                warn!(error = %e, "gateway accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}
