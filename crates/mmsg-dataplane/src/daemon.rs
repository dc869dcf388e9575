//! `mmsg run`: validates the config, performs the host set-up ([`crate::setup`]), opens TUN, the
//! path manager and the listeners, starts one task per outbound connection, serves the control
//! socket, and on SIGINT/SIGTERM undoes the set-up.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use mpa::config::{Config, OvsConfig, TunnelSecurity};
use mpa::BranchId;
use tracing::{error, info, warn};

use crate::control::{self, ReportSource};
use crate::mptcp_pm::MptcpPathManager;
use crate::secure::TlsState;
use crate::setup::{self, Undo};
use crate::stats::{Stats, TlsStatus};
use crate::tun::Tun;
use crate::tunnel::{self, PathManagement, SocketOpts};

/// Which path manager to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PmMode {
    /// Userspace PM over genetlink `mptcp_pm`: exactly one subflow per address pair.
    Userspace,
    /// In-kernel PM: `ip mptcp` limits and fullmesh endpoints.
    Kernel,
}

/// Options of `mmsg run`.
#[derive(Debug, Clone)]
pub struct RunOpts {
    /// The config file.
    pub config: PathBuf,
    /// The TUN device name.
    pub tun_name: String,
    /// The TUN MTU.
    pub tun_mtu: u32,
    /// Try TUN offload.
    pub offload: bool,
    /// Path manager.
    pub pm: PmMode,
    /// Socket options.
    pub sockets: SocketOpts,
    /// Control socket path.
    pub control: PathBuf,
    /// Skip host set-up (sysctls, rules) — for tests without privileges.
    pub no_setup: bool,
    /// `--metrics-listen`: serve Prometheus `/metrics` there ([`crate::metrics`]); `None`: off.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// With `[ovs]`: delete the bridge and move the WAN addresses back on exit (the default
    /// keeps them for a fast restart, [`crate::ovs_reuse`]).
    pub remove_bridge: bool,
    /// `--insecure-clear-tunnels`: confirms `[tls] mode = "clear"` ([`load_checked`]).
    pub insecure_clear_tunnels: bool,
}

/// Reads and validates a config file.
pub fn load_config(path: &std::path::Path) -> anyhow::Result<Config> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    Config::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// [`load_config`], then the "TLS is the default" policy ([`mpa::config::Config::tunnel_security`]) with
/// `--insecure-clear-tunnels`: what `mmsg check` and `mmsg run` accept.
pub fn load_checked(
    path: &std::path::Path,
    insecure_clear_tunnels: bool,
) -> anyhow::Result<(Config, TunnelSecurity)> {
    let config = load_config(path)?;
    let security = config
        .tunnel_security(insecure_clear_tunnels)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok((config, security))
}

fn kernel_pm_setup(config: &Config, undo: &mut Undo) -> anyhow::Result<()> {
    // DESIGN §4: limits 8/8, our WAN addresses as subflow fullmesh endpoints.
    setup::ip(&[
        "mptcp",
        "limits",
        "set",
        "subflow",
        "8",
        "add_addr_accepted",
        "8",
    ])?;
    let existing = setup::ip(&["mptcp", "endpoint", "show"]).unwrap_or_default();
    for w in &config.wan {
        let a = w.address.addr().to_string();
        if existing
            .lines()
            .any(|l| l.split_whitespace().next() == Some(a.as_str()))
        {
            continue;
        }
        setup::ip(&[
            "mptcp", "endpoint", "add", &a, "dev", &w.name, "subflow", "fullmesh",
        ])?;
        undo.on_exit_ip(&["mptcp", "endpoint", "delete", "address", &a]);
        info!(address = %a, "MPTCP endpoint added");
    }
    Ok(())
}

/// What `mmsg status` and `/metrics` show of the credentials in use.
fn tls_status(tls: &TlsState, reloads: u64) -> TlsStatus {
    let current = tls.current();
    TlsStatus {
        serial: current.serial,
        reloads,
        not_after: crate::enrol::not_after(&tls.files().cert).unwrap_or(0),
        crl_next_update: current.creds.crl.map(|c| c.next_update),
        crl_number: current.creds.crl.and_then(|c| u64::try_from(c.number).ok()),
    }
}

/// SIGHUP: re-reads the `[tls]` files (certificate/key rotation, new CRL). New connections use
/// the new credentials; established ones keep theirs. A failure keeps the old ones. With an
/// `[ovs]` `ssl:` controller (`ovs_ssl`), OVS is then given the reloaded credentials too
/// ([`crate::ovs::configure_ssl`], off the runtime: it runs `ovs-vsctl`).
fn reload_tls(tls: Option<&Arc<TlsState>>, stats: &Stats, ovs_ssl: Option<&(OvsConfig, BranchId)>) {
    let Some(tls) = tls else {
        info!("SIGHUP: no [tls] credentials to reload");
        return;
    };
    match tls.reload() {
        Ok(serial) => {
            Stats::inc(&stats.tls_reloads);
            let reloads = stats.tls_reloads.load(std::sync::atomic::Ordering::Relaxed);
            stats.set_tls(tls_status(tls, reloads));
            info!(
                serial,
                "SIGHUP: TLS credentials reloaded; new connections use them"
            );
            if let Some((o, own)) = ovs_ssl {
                let (o, own, tls) = (o.clone(), *own, Arc::clone(tls));
                tokio::task::spawn_blocking(move || {
                    if let Err(e) = crate::ovs::configure_ssl(&o, tls.files(), own) {
                        warn!(
                            error = %format!("{e:#}"),
                            "OVS keeps its previous OpenFlow TLS credentials"
                        );
                    }
                });
            }
        }
        Err(e) => {
            Stats::inc(&stats.tls_reload_errors);
            warn!(error = %e, "SIGHUP: TLS credentials NOT reloaded; the old ones stay in use");
        }
    }
}

/// With `[controller] address = "tls:..."`: every `renew_check_s`, renews the certificate over
/// the channel when less than `renew_below_percent` of its lifetime is left, then reloads the
/// credentials as SIGHUP does (new connections use the new certificate, established ones keep
/// running). A failed renewal is logged and counted and retried at the next check.
async fn renew_loop(
    ctl: mpa::config::ControllerConfig,
    tls: Arc<TlsState>,
    own: BranchId,
    stats: Arc<Stats>,
    ovs_ssl: Option<(OvsConfig, BranchId)>,
) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(ctl.renew_check_s.max(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        match crate::enrol::due(&tls.files().cert, ctl.renew_below_percent, now) {
            Some(true) => {}
            Some(false) => continue,
            None => {
                warn!(cert = %tls.files().cert.display(), "renewal: the certificate does not parse");
                continue;
            }
        }
        match crate::enrol::renew(&ctl.address, tls.files(), own).await {
            Ok(c) => {
                Stats::inc(&stats.tls_renewals);
                info!(
                    serial = c.serial,
                    not_after = c.not_after,
                    "certificate renewed by the controller"
                );
                reload_tls(Some(&tls), &stats, ovs_ssl.as_ref());
            }
            Err(e) => {
                Stats::inc(&stats.tls_renewal_errors);
                warn!(error = %format!("{e:#}"), "certificate renewal failed; retrying at the next check");
            }
        }
    }
}

/// Runs the gateway until SIGINT/SIGTERM.
pub async fn run(opts: RunOpts) -> anyhow::Result<()> {
    let (config, security) = load_checked(&opts.config, opts.insecure_clear_tunnels)?;
    let own = config
        .branch()
        .context("branch_id is not a valid branch (validate should have caught this)")?;
    let stats = Arc::new(Stats::default());
    // Credentials first: a gateway with bad [tls] files must not touch the host.
    let tls = match config.tls_enabled() {
        Some(t) => {
            let state =
                TlsState::load(t, own, Arc::clone(&stats)).context("load the [tls] credentials")?;
            let serial = state.current().serial;
            stats.set_tls(tls_status(&state, 0));
            info!(
                serial,
                "TLS 1.3 with mutual authentication on every tunnel connection"
            );
            Some(Arc::new(state))
        }
        None => {
            // Only reachable with `[tls] mode = "clear"` and the flag (`load_checked`).
            debug_assert_eq!(security, TunnelSecurity::InsecureClear);
            stats.set_insecure_clear();
            warn!("TUNNELS IN CLEAR TEXT: [tls] mode = \"clear\" with --insecure-clear-tunnels; any host that reaches a WAN port can inject packets into the LAN (docs/security.md \"TLS is the default\")");
            None
        }
    };
    let mut undo = Undo::with_sysctl_state(crate::setup::sysctl_state_path(&opts.control));
    let result = run_inner(&opts, config, own, Arc::clone(&stats), tls, &mut undo).await;
    undo.revert();
    let _ = std::fs::remove_file(&opts.control);
    result
}

async fn run_inner(
    opts: &RunOpts,
    config: Config,
    own: BranchId,
    stats: Arc<Stats>,
    tls: Option<Arc<TlsState>>,
    undo: &mut Undo,
) -> anyhow::Result<()> {
    // `[ovs]`: bridge, ports, addresses on mpa{k}; from here on `wan[k].name` is `mpa{k}`.
    // The WAN NICs by their file names: the egress qdiscs go there, also with [ovs].
    let file_config = config.clone();
    let tls_files = tls.as_deref().map(TlsState::files);
    let config = match config.ovs.clone() {
        Some(o) => crate::ovs::setup(&config, &o, tls_files, undo, opts.remove_bridge)
            .context("Open vSwitch set-up ([ovs])")?,
        None => config,
    };
    // `[ovs]` with an `ssl:` controller: OVS follows every credential reload.
    let ovs_ssl = config
        .ovs
        .clone()
        .filter(crate::ovs::wants_ssl)
        .map(|o| (o, own));
    // `[controller]`: remotes from the file, else the cache, else none until the controller
    // sends them (crate::gwchan).
    let (config, source, version) = crate::gwchan::initial_config(config);
    let mut shapers = Vec::new();
    if !opts.no_setup {
        setup::ensure_path_manager(undo, opts.pm == PmMode::Userspace)
            .context("set the MPTCP path manager")?;
        if let Err(e) = setup::ensure_cubic(undo) {
            warn!(error = %e, "could not select cubic");
        }
        setup::reserve_ports(undo, &config).context("reserve the MPA port range")?;
        setup::ensure_policy_routing(undo, &config).context("policy routing per WAN address")?;
        if opts.pm == PmMode::Kernel {
            kernel_pm_setup(&config, undo).context("in-kernel MPTCP path manager set-up")?;
        }
        shapers = crate::qos::apply(&file_config, undo)
            .context("WAN egress priority ([qos], rate_mbit)")?;
        if let Some((plan, balancer)) = crate::uplink_lb::setup(&config, undo)
            .context("external traffic load balancing ([internet])")?
        {
            tokio::spawn(crate::uplink_lb::run(plan, balancer, Arc::clone(&stats)));
        }
    }
    let pm = match opts.pm {
        PmMode::Userspace => {
            let pm = MptcpPathManager::open().context("open the MPTCP userspace path manager")?;
            pm.spawn_event_listener(Arc::clone(&stats))
                .context("subscribe to MPTCP path manager events")?;
            info!("MPTCP userspace path manager ready");
            PathManagement::Userspace(Arc::new(pm))
        }
        PmMode::Kernel => PathManagement::Kernel,
    };
    let tun = Tun::open(&opts.tun_name, opts.offload)
        .with_context(|| format!("open TUN {}", opts.tun_name))?;
    let offload = tun.offload();
    setup::configure_tun(tun.name(), opts.tun_mtu, &config).context("configure TUN")?;

    let control_listener = control::bind(&opts.control)?;
    let wan_addresses: Vec<std::net::Ipv4Addr> =
        config.wan.iter().map(|w| w.address.addr()).collect();
    let controller = config.controller.clone();
    let (sh, events) = tunnel::build(
        config,
        own,
        tun,
        Arc::clone(&stats),
        pm,
        opts.sockets,
        tls.clone(),
    );
    // `[qos] autorate`: the shaped ports' rates follow the uplinks.
    if shapers.iter().any(|s| s.autorate) {
        tokio::spawn(tunnel::autorate::run(Arc::clone(&sh), shapers));
    }
    // Hold-time releases of the resequencer (`crate::reseq`; a peer may stripe when we do not).
    let r = &sh.reseq;
    tokio::spawn(Arc::clone(r).run_timer(Arc::clone(&sh.tun), Arc::clone(&sh.stats)));
    if r.striping() {
        info!(params = ?r.params(), "resequencing striped flows");
    }
    // Listeners and outbound connections, keyed so a new config can start/stop exactly those
    // that change.
    let mut topology = crate::gwchan::Topology::start(&sh)?;
    let (updates_tx, mut updates) = tokio::sync::mpsc::channel(4);
    if let (Some(ctl), Some(state)) = (&controller, &tls) {
        if ctl.address.starts_with("tls:") && ctl.renew_below_percent > 0 {
            tokio::spawn(renew_loop(
                ctl.clone(),
                Arc::clone(state),
                own,
                Arc::clone(&stats),
                ovs_ssl.clone(),
            ));
        }
    }
    // Learned WAN addresses (issue #20): the kernel's view of the WAN ports, applied to the
    // running config and reported to the controller. Standalone gateways without `--no-setup`
    // follow their addresses too; without the watcher (no netlink) the config stays static.
    let mut wan_rx = if opts.no_setup {
        None
    } else {
        match crate::wan_watch::spawn(&sh.config()) {
            Ok(rx) => Some(rx),
            Err(e) => {
                warn!(error = %e, "watching the WAN ports' addresses failed: static addresses");
                None
            }
        }
    };
    // A CRL pushed by the controller asks for a reload as SIGHUP does.
    let crl_reload = Arc::new(tokio::sync::Notify::new());
    if let Some(ctl) = controller {
        tokio::spawn(crate::gwchan::run_client(
            Arc::clone(&sh),
            ctl,
            source,
            version,
            updates_tx,
            Arc::clone(&crl_reload),
            wan_rx.clone(),
        ));
    }
    let report_source = ReportSource {
        stats: Arc::clone(&stats),
        branch: own.get(),
        offload,
        path_manager: match opts.pm {
            PmMode::Userspace => "userspace",
            PmMode::Kernel => "kernel",
        },
    };
    if let Some(addr) = opts.metrics_listen {
        let listener = crate::metrics::bind(addr).await?;
        tokio::spawn(crate::metrics::serve(
            listener,
            report_source.clone(),
            wan_addresses,
        ));
    }
    tokio::spawn(control::serve(control_listener, report_source));
    info!(branch = own.get(), "mmsg running");

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    // systemd `Type=notify` (packaging/): `systemctl start` returns now, with the host set up,
    // TUN open, listeners bound, the control socket answering and SIGTERM/SIGHUP handled.
    // No-op outside systemd.
    notify(sd_notify::NotifyState::Ready);
    // The TUN reader is a task on the runtime's workers, not part of this `block_on` future
    // (the main thread): the writer it wakes for each packet then runs next on the same worker
    // (tokio's LIFO slot) instead of being woken on another thread through the IO driver
    // (docs/mmsg.md "Idle latency": −42 % round trip through an idle tunnel, less CPU per GB).
    let mut tun_task = tokio::spawn(tunnel::tun_loop(Arc::clone(&sh), events));
    let _abort_tun = AbortOnDrop(tun_task.abort_handle());
    loop {
        tokio::select! {
            r = &mut tun_task => {
                let r = r.unwrap_or_else(|e| Err(anyhow::anyhow!("TUN task: {e}")));
                if let Err(e) = &r {
                    error!(error = %e, "TUN loop ended");
                }
                return r;
            }
            Some(u) = updates.recv() => {
                // A config from the controller (validated): applied here, where the set-up's
                // undo list lives. A failure keeps the old config and never ends the process.
                // Built on the config in use when it arrived: keep the WAN state learned since.
                let config = match &wan_rx {
                    Some(rx) => mpa::wan_state::apply(&u.config, &rx.borrow()).unwrap_or(u.config),
                    None => u.config,
                };
                let r = topology.apply(&sh, config, opts.tun_mtu, opts.no_setup, undo);
                if let Ok(how) = &r {
                    info!(change = ?how, "controller config applied");
                }
                let _ = u.reply.send(r.map(|_| ()).map_err(|e| format!("{e:#}")));
            }
            Some(state) = crate::wan_watch::next(&mut wan_rx) => {
                if let Some(new) = mpa::wan_state::apply(&sh.config(), &state) {
                    match topology.apply(&sh, new, opts.tun_mtu, opts.no_setup, undo) {
                        Ok(how) => info!(change = ?how, "learned WAN state applied"),
                        Err(e) => warn!(error = %format!("{e:#}"), "learned WAN state not applied"),
                    }
                }
            }
            _ = hup.recv() => reload_tls(tls.as_ref(), &stats, ovs_ssl.as_ref()),
            () = crl_reload.notified() => reload_tls(tls.as_ref(), &stats, ovs_ssl.as_ref()),
            _ = tokio::signal::ctrl_c() => {
                info!("SIGINT: shutting down");
                notify(sd_notify::NotifyState::Stopping);
                return Ok(());
            }
            _ = term.recv() => {
                info!("SIGTERM: shutting down");
                notify(sd_notify::NotifyState::Stopping);
                return Ok(());
            }
        }
    }
}

/// Aborts a spawned task when dropped: the TUN reader stops when `run` returns, before the
/// caller undoes the host set-up.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Tells systemd (`$NOTIFY_SOCKET`, `Type=notify`) about a state change; does nothing when not
/// started by systemd. A failed send is logged: the daemon runs on either way.
fn notify(state: sd_notify::NotifyState<'_>) {
    if let Err(e) = sd_notify::notify(&[state]) {
        warn!(error = %e, "sd_notify failed");
    }
}
