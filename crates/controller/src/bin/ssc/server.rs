//! `ssc run` and `ssc check`: the daemon's wiring. [`run`] opens the database and the gateway CA,
//! binds the REST API, the OpenFlow server and the gateway channel, and spawns the tasks that
//! drive the pure cores: the SDC's rates into the WRR ([`Wrr::observe_stats`]) and the gateways'
//! reports into the adaptive path groups ([`Adaptive::round`]), and both into the automatic path
//! configuration (`crate::auto`).
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use controller::adaptive::{Action, Adaptive};
use controller::sdc::Sdc;
use controller::store::Store;
use controller::ui::config::Config;
use controller::wrr::Wrr;

#[derive(Debug, Args)]
pub(crate) struct ConfigArg {
    /// The configuration file (TOML).
    #[arg(long, short, env = "SSC_CONFIG")]
    pub(crate) config: PathBuf,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    config: ConfigArg,
    /// Listen address of the REST API; overrides `api.listen` (port 0 picks a free port).
    #[arg(long, env = "SSC_LISTEN")]
    listen: Option<SocketAddr>,
    /// Bearer token of the REST API; overrides `api.token` / `api.token_file`.
    #[arg(long, env = "SSC_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// OpenFlow clear TCP listen address (UNAUTHENTICATED switches; off by default, logs a
    /// WARN); overrides `openflow.listen` (port 0 picks a free port).
    #[arg(long, env = "SSC_OPENFLOW_LISTEN")]
    openflow_listen: Option<SocketAddr>,
    /// OpenFlow over TLS for OVS `ssl:` targets (`ovs-vsctl set-ssl` with the gateway's
    /// certificate); overrides `openflow.tls_listen` (port 0 picks a free port).
    #[arg(long, env = "SSC_OPENFLOW_TLS_LISTEN")]
    openflow_tls_listen: Option<SocketAddr>,
    /// OpenFlow unix socket to listen on (repeatable or comma-separated); replaces `openflow.unix`.
    #[arg(long, env = "SSC_OPENFLOW_UNIX", value_delimiter = ',')]
    openflow_unix: Vec<PathBuf>,
    /// Statistics polling period; overrides `openflow.stats_interval_ms`.
    #[arg(long, env = "SSC_STATS_INTERVAL")]
    stats_interval: Option<humantime::Duration>,
    /// Gateway channel TCP listen address (mmsg `[controller] address = "tcp:..."`); overrides
    /// `gateways.listen` (port 0 picks a free port).
    #[arg(long, env = "SSC_GATEWAY_LISTEN")]
    gateway_listen: Option<SocketAddr>,
    /// Gateway channel over TLS (mmsg `[controller] address = "tls:..."`: enrolment with a
    /// one-time token, then mutual TLS); overrides `gateways.tls_listen` (port 0 picks a free
    /// port).
    #[arg(long, env = "SSC_GATEWAY_TLS_LISTEN")]
    gateway_tls_listen: Option<SocketAddr>,
    /// Gateway channel unix socket (repeatable or comma-separated); replaces `gateways.unix`.
    #[arg(long, env = "SSC_GATEWAY_UNIX", value_delimiter = ',')]
    gateway_unix: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    config: ConfigArg,
    /// Check only the config file and token, not the database.
    #[arg(long)]
    config_only: bool,
    /// Bearer token to check instead of the config's.
    #[arg(long, env = "SSC_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

/// `ssc run`: opens the database and the CA, binds every listener, runs the REST API, the
/// OpenFlow server, the gateway channel, the WRR feed and the adaptive path groups until SIGTERM
/// or SIGINT.
pub(crate) fn run(args: RunArgs) -> anyhow::Result<()> {
    let path = &args.config.config;
    let config = Config::load(path)?;
    let token = config.token(args.token.as_deref())?;
    let listen = args.listen.unwrap_or(config.api.listen);
    let db = config.database.path.clone();
    let store = Store::open(&db).with_context(|| format!("open database {}", db.display()))?;
    let store = Arc::new(store);
    // The bootstrap token expires (docs/ssc.md §2): recorded at its first use, not re-armed.
    let ttl = config.api.bootstrap_token_ttl();
    let token_expires = controller::ui::api::arm_bootstrap_token(
        &store,
        &token,
        ttl,
        controller::authority::unix_now(),
    )
    .context("record the bootstrap token")?;
    match token_expires {
        None => tracing::warn!(
            "the bootstrap API token never expires (api.bootstrap_token_ttl_s = 0): prefer named tokens (ssc token add)"
        ),
        Some(e) if e <= controller::authority::unix_now() => tracing::warn!(
            expired_at = e,
            "the bootstrap API token has expired: use a token from `ssc token add`, or put a new one in the config"
        ),
        Some(e) => tracing::info!(expires = e, "bootstrap API token valid until (unix s)"),
    }
    let rest_tls = match &config.api.rest_tls {
        Some(t) => Some(
            controller::ui::rest_tls_config(&t.cert_file, &t.key_file)
                .map_err(anyhow::Error::msg)?,
        ),
        None => None,
    };
    let ca_dir = config.ca.dir_for(&db);
    let authority =
        controller::authority::Authority::open(&ca_dir, Arc::clone(&store), config.ca.validity())
            .with_context(|| format!("gateway CA in {}", ca_dir.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("start tokio runtime")?;
    let mut of = config.openflow.to_ofc();
    if let Some(a) = args.openflow_listen {
        of.listen = Some(a);
    }
    if !args.openflow_unix.is_empty() {
        of.unix = args.openflow_unix.clone();
    }
    if let Some(a) = args.openflow_tls_listen {
        of.tls_listen = Some(a);
    }
    if of.tls_listen.is_some() {
        of.tls = Some(authority.openflow_config());
        of.tls_updates = Some(authority.subscribe_openflow());
    }
    if let Some(d) = args.stats_interval {
        of.stats_interval = d.into();
    }
    let stats_interval = of.stats_interval;
    let mut gw = config.gateways.to_gwchan();
    if let Some(a) = args.gateway_listen {
        gw.listen = Some(a);
    }
    if let Some(a) = args.gateway_tls_listen {
        gw.tls_listen = Some(a);
    }
    if !args.gateway_unix.is_empty() {
        gw.unix = args.gateway_unix.clone();
    }
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("bind REST API to {listen}"))?;
        let addr = listener.local_addr().context("REST API address")?;
        let scheme = if rest_tls.is_some() { "https" } else { "http" };
        if rest_tls.is_none() && !addr.ip().is_loopback() {
            tracing::warn!(%addr, "REST API over plain HTTP on a non-loopback address: set api.rest_tls or keep api.listen on 127.0.0.1");
        }
        let unix = of.unix.clone();
        let ofc = controller::ofc::Ofc::bind(of)
            .await
            .context("start the OpenFlow server")?;
        let of_addr = ofc
            .local_addr()
            .map_or_else(|| "-".to_owned(), |a| a.to_string());
        let of_tls = ofc
            .tls_addr()
            .map_or_else(|| "-".to_owned(), |a| a.to_string());
        let registry = Arc::new(controller::gwchan::Registry::new());
        let authority = Arc::new(authority);
        // Re-signs the CRL before its next_update; gateway sessions push every new one.
        tokio::spawn(Arc::clone(&authority).resign_crl_periodically());
        registry.set_authority(authority);
        // Learned WAN addresses (protocol 5 gateways) update the inventory (docs/ssc.md).
        registry.learn_into(Arc::clone(&store));
        let gwc = controller::gwchan::GwChan::bind(&gw, Arc::clone(&registry))
            .await
            .context("start the gateway channel")?;
        let gw_addr = gwc
            .local_addr()
            .map_or_else(|| "-".to_owned(), |a| a.to_string());
        let gw_tls = gwc
            .tls_addr()
            .map_or_else(|| "-".to_owned(), |a| a.to_string());
        if gw.listen.is_some() {
            tracing::warn!(tcp = %gw_addr, "gateway channel on clear TCP: gateways register unauthenticated there (prefer --gateway-tls-listen)");
        }
        tracing::info!(tcp = %gw_addr, tls = %gw_tls, unix = ?gw.unix, "gateway channel listening");
        tracing::info!(%addr, %scheme, db = %db.display(), "REST API listening");
        tracing::info!(tls = %of_tls, unix = ?unix, clear_tcp = %of_addr, "OpenFlow server listening (datapath id = branch id)");
        // Machine-readable lines on stdout for scripts and tests (`--listen 127.0.0.1:0`), in
        // one write: a reader that stops after the first line must not make a later write fail.
        // Nobody reading stdout is no reason to stop serving, so a failed write is only logged.
        let lines = format!(
            "ssc: REST API listening on {scheme}://{addr}\nssc: OpenFlow listening on tcp:{of_addr}\nssc: gateways listening on tcp:{gw_addr}\nssc: gateways listening on tls:{gw_tls}\nssc: OpenFlow listening on ssl:{of_tls}\n"
        );
        let mut out = std::io::stdout().lock();
        if let Err(e) = out.write_all(lines.as_bytes()).and_then(|()| out.flush()) {
            tracing::debug!(error = %e, "stdout");
        }
        drop(out);
        // Signal handlers first, then systemd `Type=notify` (packaging/): every listener is
        // bound and the database and CA are open, so `systemctl start` may return. No-op
        // outside systemd.
        let stop_signal = shutdown_signal();
        notify(sd_notify::NotifyState::Ready);
        let sdc = Arc::new(Mutex::new(Sdc::default()));
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let mut ofc_stop = stop_rx.clone();
        let ofc_task = tokio::spawn(ofc.run(store.subscribe(), Arc::clone(&sdc), async move {
            let _ = ofc_stop.wait_for(|s| *s).await;
        }));
        // WRR: feed the SDC's per group rates into the weights every statistics interval (the
        // weights themselves are recomputed against the current catalog on every request).
        let wrr = Arc::new(Mutex::new(Wrr::default()));
        let wrr_changed = Arc::new(tokio::sync::Notify::new());
        let wrr_task = tokio::spawn(feed_wrr(
            Arc::clone(&sdc),
            Arc::clone(&wrr),
            Arc::clone(&wrr_changed),
            stats_interval,
        ));
        // Adaptive path groups (seed 003): every report interval, pairs short of capacity get
        // a group, pairs that no longer need one give it back (off unless the settings say so).
        let adaptive = Arc::new(Mutex::new(Adaptive::new()));
        let adaptive_task = tokio::spawn(adapt_groups(
            Arc::clone(&store),
            Arc::clone(&wrr),
            Arc::clone(&adaptive),
            controller::adaptive::INTERVAL,
        ));
        // Automatic path configuration live (issue #20): idle unless `auto` is on for a pair.
        let auto_task = tokio::spawn(crate::auto::auto_configure(
            Arc::clone(&store),
            Arc::clone(&sdc),
            Arc::clone(&wrr),
        ));
        let mut gwc_stop = stop_rx.clone();
        let gwc_task = tokio::spawn(gwc.run(
            store.subscribe(),
            Arc::clone(&wrr),
            wrr_changed,
            async move {
                let _ = gwc_stop.wait_for(|s| *s).await;
            },
        ));
        // The dashboard's history (`/ui/`, `GET /api/v1/history`): the last 10 minutes in memory.
        let history = Arc::new(Mutex::new(controller::history::History::new(
            stats_interval,
            controller::history::DEFAULT_WINDOW,
        )));
        let history_task = tokio::spawn(controller::ui::dashboard::record_history(
            Arc::clone(&sdc),
            Arc::clone(&adaptive),
            Arc::clone(&history),
        ));
        let state = controller::ui::api::AppState::new(Arc::clone(&store), &token)
            .with_history(history)
            .with_token_expiry(token_expires)
            .with_sdc(sdc)
            .with_wrr(wrr)
            .with_gateways(registry)
            .with_adaptive(adaptive);
        let shutdown = async move {
            stop_signal.await;
            notify(sd_notify::NotifyState::Stopping);
            let _ = stop_tx.send(true);
        };
        let limit = config.api.body_limit_bytes;
        let api = match rest_tls {
            Some(tls) => {
                controller::ui::serve_state_tls(listener, tls, state, limit, shutdown).await
            }
            None => controller::ui::serve_state(listener, state, limit, shutdown).await,
        }
        .context("REST API");
        let _ = ofc_task.await;
        let _ = gwc_task.await;
        wrr_task.abort();
        adaptive_task.abort();
        auto_task.abort();
        history_task.abort();
        for p in unix.iter().chain(&gw.unix) {
            let _ = std::fs::remove_file(p);
        }
        api?;
        tracing::info!("stopped");
        Ok(())
    })
}

/// Every `interval`, the SDC's per group rates → [`Wrr::observe_stats`]; then `changed` wakes the
/// gateway channel, which republishes weights that moved.
async fn feed_wrr(
    sdc: Arc<Mutex<Sdc>>,
    wrr: Arc<Mutex<Wrr>>,
    changed: Arc<tokio::sync::Notify>,
    interval: Duration,
) {
    let mut tick = tokio::time::interval(interval.max(Duration::from_millis(10)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let view = sdc
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .view(Instant::now());
        let observed = wrr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .observe_stats(&view.groups);
        if observed {
            changed.notify_one();
        }
    }
}

/// Every `interval`: the gateways' reports (through `wrr`) → [`Adaptive::round`], whose actions
/// are applied to the store, one write transaction each (the store then pushes flows and gateway
/// configs as for any change).
async fn adapt_groups(
    store: Arc<Store>,
    wrr: Arc<Mutex<Wrr>>,
    adaptive: Arc<Mutex<Adaptive>>,
    interval: Duration,
) {
    let catalog = store.subscribe();
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let c = Arc::clone(&catalog.borrow());
        let (store, wrr, adaptive) = (Arc::clone(&store), Arc::clone(&wrr), Arc::clone(&adaptive));
        // Max-flows over every candidate path: off the async threads.
        let r = tokio::task::spawn_blocking(move || {
            let obs = wrr
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .observations();
            adaptive
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .round(
                    c.settings(),
                    Instant::now(),
                    c.inventory(),
                    c.groups(),
                    &obs,
                    |action| {
                        match action {
                            Action::Add { group, .. } => {
                                let members = group.members.values().cloned().collect();
                                store.update(|cat| {
                                    cat.set_group(
                                        group.source,
                                        group.destination,
                                        group.id,
                                        members,
                                    )
                                })
                            }
                            Action::Retire {
                                source,
                                destination,
                                group,
                                ..
                            } => {
                                store.update(|cat| cat.remove_group(*source, *destination, *group))
                            }
                        }
                        .map(drop)
                    },
                );
        })
        .await;
        if let Err(e) = r {
            tracing::warn!(error = %e, "adaptive path groups step failed");
        }
    }
}

/// Tells systemd (`$NOTIFY_SOCKET`) about a state change; nothing when not started by systemd.
fn notify(state: sd_notify::NotifyState<'_>) {
    if let Err(e) = sd_notify::notify(&[state]) {
        tracing::warn!(error = %e, "sd_notify failed");
    }
}

/// Resolves on SIGTERM or SIGINT. The handlers are installed when this is called, not when the
/// future is first polled: a signal that arrives right after READY=1 (systemd, the install
/// check) must stop the server cleanly, not kill it.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    async move {
        let term = async {
            match term {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot watch SIGTERM; stop with Ctrl-C");
                    std::future::pending::<()>().await;
                }
            }
        };
        let int = async {
            match int {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot watch SIGINT");
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::select! {
            () = term => tracing::info!("SIGTERM: stopping"),
            () = int => tracing::info!("SIGINT: stopping"),
        }
    }
}

/// `ssc check`: the config file, its token and (unless `--config-only`) its database.
pub(crate) fn check(args: CheckArgs) -> anyhow::Result<()> {
    let path = &args.config.config;
    let config = Config::load(path)?;
    config
        .token(args.token.as_deref())
        .with_context(|| format!("config {}", path.display()))?;
    if let Some(t) = &config.api.rest_tls {
        controller::ui::rest_tls_config(&t.cert_file, &t.key_file)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("config {}", path.display()))?;
    }
    println!(
        "config {}: ok (API on {}{})",
        path.display(),
        if config.api.rest_tls.is_some() {
            "https://"
        } else {
            "http://"
        },
        config.api.listen
    );
    if args.config_only {
        return Ok(());
    }
    let db = &config.database.path;
    let report = Store::check(db).with_context(|| format!("database {}", db.display()))?;
    println!(
        "database {}: ok (schema v{}, {} branches, {} WAN ports, {} path groups, {} flows)",
        db.display(),
        report.schema_version,
        report.branches,
        report.ports,
        report.groups,
        report.flows
    );
    Ok(())
}
