//! The gateway's end of the gateway channel (issue #6, `docs/gwchan.md`): with `[controller]` in
//! the config, `mmsg` connects out to `ssc`, registers, and takes its remotes, path groups, WRR
//! weights (and classifier rules, when sent) from the controller ([`mpa::gwchan`] messages).
//!
//! Parts:
//! - [`initial_config`]: at start-up, the remotes of the file, else of the cache (the last good
//!   config from the controller), else none ("waiting for controller").
//! - [`run_client`]: the session task. Connects (mutual TLS, TCP or unix socket) with backoff (200 ms doubling
//!   to 2 s), hello + register, then per received config: merge into the running config and
//!   validate ([`merge_validated`], which keeps the `mpa{k}` names of an `[ovs]` gateway); a
//!   refused config keeps the old one and the ack
//!   carries the problems. A valid one goes to the daemon for [`Topology::apply`]; once applied,
//!   it is written to the cache (tmp + rename, 0600) and acked. A report goes out every
//!   [`REPORT_INTERVAL`]. While the controller is unreachable nothing changes: the tunnels keep
//!   forwarding with the last config.
//! - [`Topology`]: the running listeners and outbound connection tasks, keyed, with abort
//!   handles. Weights-only changes update the schedulers in place (no flow moves, no connection
//!   touched); other changes start/stop exactly the connections and listeners that appeared or
//!   went away, fix the TUN routes, reserve new port ranges, and rebuild the agent (flows are
//!   re-assigned on their next packet).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use mpa::config::Config;
use mpa::gwchan::{
    self, Ack, ControllerMsg, GatewayConfig, GatewayMsg, Hello, Register, Report, WanState,
};
use mpa::{BranchId, PathGroupId};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::AbortHandle;
use tracing::{debug, info, warn};

use crate::setup::{self, Undo};
use crate::stats::Stats;
use crate::tunnel::{self, ConnKey, Shared, TunEvent};

/// Reconnect backoff: first delay.
pub const BACKOFF_MIN: Duration = Duration::from_millis(200);
/// Reconnect backoff cap (the issue asks for re-sync soon after the controller returns).
pub const BACKOFF_MAX: Duration = Duration::from_secs(2);
/// How long a connect and the controller's hello may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Period of the health and statistics report.
pub const REPORT_INTERVAL: Duration = Duration::from_secs(2);
/// Bytes read per call; the buffer holds at most one message (1 MiB) plus one chunk.
const READ_CHUNK: usize = 16 * 1024;

/// Where the remotes in use came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The config file.
    File,
    /// The cache of the last good controller config.
    Cache,
    /// The controller, in this run.
    Controller,
    /// Nowhere yet: waiting for the controller.
    None,
}

impl Source {
    /// The name in `mmsg status` and the reports.
    pub fn name(self) -> &'static str {
        match self {
            Source::File => "file",
            Source::Cache => "cache",
            Source::Controller => "controller",
            Source::None => "none",
        }
    }
}

/// The config to start with: the file's remotes; with `[controller]` and no remotes in the
/// file, the cache's (when it exists and is valid for this file); else none. Returns the config,
/// its source and its controller version (0 unless from the cache).
pub fn initial_config(file: Config) -> (Config, Source, u64) {
    let Some(ctl) = file.controller.clone() else {
        return (file, Source::File, 0);
    };
    if !file.remote.is_empty() {
        return (file, Source::File, 0);
    }
    match read_cache(&ctl.cache, &file) {
        Ok(Some((merged, version))) => {
            info!(cache = %ctl.cache.display(), version, "config from the controller cache");
            (merged, Source::Cache, version)
        }
        Ok(None) => {
            info!("no remotes in the file and no cache: waiting for the controller");
            (file, Source::None, 0)
        }
        Err(e) => {
            warn!(cache = %ctl.cache.display(), error = %e, "controller cache unusable: waiting for the controller");
            (file, Source::None, 0)
        }
    }
}

fn read_cache(path: &Path, base: &Config) -> anyhow::Result<Option<(Config, u64)>> {
    let text = match std::fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("read {}", path.display())),
    };
    let cfg: GatewayConfig = serde_json::from_slice(&text).context("parse the cache")?;
    let merged = merge_validated(&cfg, base).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Some((merged, cfg.version)))
}

/// Merges a controller config into the running config `running` and validates the result
/// (`GatewayConfig::validate_for`), keeping the running WAN names.
///
/// With `[ovs]`, `crate::ovs::setup` has renamed every `wan[k].name` of the running config to
/// its internal port `mpa{k}`, and `Config::validate` refuses `mpa…` names next to `[ovs]` (that
/// check is about the file's names, which were validated at start-up). So the merge is validated
/// with the `[ovs]` section left out (it never changes at run time) and the result keeps both
/// the `mpa{k}` names and `[ovs]`.
pub fn merge_validated(cfg: &GatewayConfig, running: &Config) -> Result<Config, String> {
    let mut base = running.clone();
    let ovs = base.ovs.take();
    let mut merged = cfg.validate_for(&base)?;
    merged.ovs = ovs;
    Ok(merged)
}

/// Writes the cache atomically: a temporary file (mode 0600) in the same directory, fsync,
/// rename over the old one.
pub fn write_cache(path: &Path, cfg: &GatewayConfig) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let body = serde_json::to_vec_pretty(cfg)?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("create {}", tmp.display()))?;
    f.write_all(&body)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)
        .with_context(|| format!("rename {} to {}", tmp.display(), path.display()))?;
    Ok(())
}

/// A validated config for the daemon to apply; the answer says whether it worked.
#[derive(Debug)]
pub struct Update {
    /// The merged, validated config.
    pub config: Config,
    /// `Err` with the reason when applying failed (the old config stays in use).
    pub reply: oneshot::Sender<Result<(), String>>,
}

/// What [`Topology::apply`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// Nothing differed.
    Unchanged,
    /// Only WRR weights changed: updated in place.
    Weights,
    /// Remotes, groups or classifier changed: connections started/stopped, agent rebuilt.
    Topology,
}

/// The running listeners and outbound connections.
#[derive(Debug, Default)]
pub struct Topology {
    outbound: BTreeMap<ConnKey, (Vec<Ipv4Addr>, AbortHandle)>,
    listeners: BTreeMap<PathGroupId, AbortHandle>,
}

fn wanted_outbound(config: &Config) -> BTreeMap<ConnKey, Vec<Ipv4Addr>> {
    // A remote behind NAT cannot be dialled: it dials us, and we send on those connections
    // (`tunnel::reverse`, docs/nat.md).
    tunnel::conn_keys(config)
        .into_iter()
        .filter_map(|k| {
            let r = config
                .remote
                .iter()
                .find(|r| r.id == k.branch.get() && !r.nat)?;
            Some((k, r.wan_addresses.clone()))
        })
        .collect()
}

fn wanted_groups(config: &Config) -> BTreeSet<PathGroupId> {
    config
        .remote
        .iter()
        .flat_map(|r| {
            r.path_groups
                .iter()
                .filter_map(|g| PathGroupId::new(g.id).ok())
        })
        .collect()
}

/// `config` with every weight set to 0: equal for two configs that differ only in weights.
fn without_weights(config: &Config) -> Config {
    let mut c = config.clone();
    for r in &mut c.remote {
        for g in &mut r.path_groups {
            g.weight = 0;
        }
    }
    c
}

/// The weights of `new` that differ from `old` (same groups).
pub fn weight_changes(old: &Config, new: &Config) -> Vec<(BranchId, PathGroupId, u32)> {
    let mut out = Vec::new();
    for (ro, rn) in old.remote.iter().zip(&new.remote) {
        for (go, gn) in ro.path_groups.iter().zip(&rn.path_groups) {
            if go.weight != gn.weight {
                if let (Some(b), Some(g)) =
                    (BranchId::new(rn.id).ok(), PathGroupId::new(gn.id).ok())
                {
                    out.push((b, g, gn.weight));
                }
            }
        }
    }
    out
}

impl Topology {
    /// Starts the listeners and outbound connections of the config in `sh`.
    pub fn start(sh: &Arc<Shared>) -> anyhow::Result<Self> {
        let mut t = Topology::default();
        let config = sh.config();
        t.start_listeners(sh, &wanted_groups(&config), config.ports)?;
        for (key, addrs) in wanted_outbound(&config) {
            t.spawn_outbound(sh, key, addrs);
        }
        Ok(t)
    }

    fn start_listeners(
        &mut self,
        sh: &Arc<Shared>,
        groups: &BTreeSet<PathGroupId>,
        plan: mms_types::PortPlan,
    ) -> anyhow::Result<()> {
        // Bind all first: a failure changes nothing.
        let mut bound = Vec::new();
        for g in groups {
            if self.listeners.contains_key(g) {
                continue;
            }
            let l = tunnel::listen(sh, *g, plan)
                .with_context(|| format!("listen for path group {g}"))?;
            bound.push((*g, l));
        }
        for (g, l) in bound {
            let h = tokio::spawn(tunnel::accept_loop(Arc::clone(sh), l, g));
            self.listeners.insert(g, h.abort_handle());
        }
        Ok(())
    }

    fn spawn_outbound(&mut self, sh: &Arc<Shared>, key: ConnKey, addrs: Vec<Ipv4Addr>) {
        let h = tokio::spawn(tunnel::run_outbound(Arc::clone(sh), key, addrs.clone()));
        self.outbound.insert(key, (addrs, h.abort_handle()));
    }

    /// Applies a validated config (see the module docs). On `Err` the config, the agent and the
    /// connections in use are unchanged (a reserved port range or a listener of a new group may
    /// stay; both are harmless and reused by the next attempt).
    pub fn apply(
        &mut self,
        sh: &Arc<Shared>,
        new: Config,
        tun_mtu: u32,
        no_setup: bool,
        undo: &mut Undo,
    ) -> anyhow::Result<Applied> {
        let old = sh.config();
        if *old == new {
            return Ok(Applied::Unchanged);
        }
        if without_weights(&old) == without_weights(&new) {
            let changes = weight_changes(&old, &new);
            sh.replace_weights(new);
            sh.send(TunEvent::Weights(changes));
            return Ok(Applied::Weights);
        }
        if !no_setup {
            setup::reserve_ports(undo, &new).context("reserve the MPA port ranges")?;
        }
        let groups = wanted_groups(&new);
        // A new port plan moves every listen port and every remote's: start over.
        let replan = old.ports != new.ports;
        if replan {
            for (g, h) in std::mem::take(&mut self.listeners) {
                h.abort();
                info!(pg = g.get(), plan = %new.ports, "listener stopped for the new port plan");
            }
        }
        self.start_listeners(sh, &groups, new.ports)?;
        setup::configure_tun(sh.tun.name(), tun_mtu, &new).context("TUN routes")?;
        let new_prefixes: BTreeSet<_> = new
            .remote
            .iter()
            .flat_map(|r| r.lan_prefixes.iter().copied())
            .collect();
        for r in &old.remote {
            for p in &r.lan_prefixes {
                if !new_prefixes.contains(p) {
                    let fam = if p.addr().is_ipv4() { "-4" } else { "-6" };
                    let dev = sh.tun.name();
                    if let Err(e) = setup::ip(&[fam, "route", "del", &p.to_string(), "dev", dev]) {
                        debug!(prefix = %p, error = %e, "route removal failed");
                    } else {
                        info!(prefix = %p, branch = r.id, "route into TUN removed");
                    }
                }
            }
        }
        let wanted = wanted_outbound(&new);
        // A local WAN address changed (learned, `crate::wan_watch`): every outbound connection
        // is re-dialled from the new addresses (the old subflows' source is gone).
        // A next hop alone changes only the policy routes.
        let own_changed = old
            .wan
            .iter()
            .map(|w| w.address)
            .ne(new.wan.iter().map(|w| w.address));
        if old.wan != new.wan && !no_setup {
            setup::update_policy_routing(undo, &old, &new).context("policy routing")?;
        }
        sh.replace_config(new);
        sh.send(TunEvent::Reload);
        // Stop what went away or changed its addresses; start what is new.
        let stale: Vec<ConnKey> = self
            .outbound
            .iter()
            .filter(|(k, (addrs, _))| own_changed || replan || wanted.get(*k) != Some(addrs))
            .map(|(k, _)| *k)
            .collect();
        for k in stale {
            if let Some((_, h)) = self.outbound.remove(&k) {
                h.abort();
                sh.stats.remove_conn(&tunnel::conn_name("out", k));
                info!(branch = k.branch.get(), pg = k.group.get(), class = %k.class, index = k.index, "tunnel connection stopped");
            }
        }
        for (k, addrs) in wanted {
            if !self.outbound.contains_key(&k) {
                self.spawn_outbound(sh, k, addrs);
            }
        }
        let gone: Vec<PathGroupId> = self
            .listeners
            .keys()
            .filter(|g| !groups.contains(g))
            .copied()
            .collect();
        for g in gone {
            if let Some(h) = self.listeners.remove(&g) {
                h.abort();
                info!(pg = g.get(), "listener stopped");
            }
        }
        Ok(Applied::Topology)
    }
}

async fn send<W: AsyncWrite + Unpin + ?Sized>(w: &mut W, msg: &GatewayMsg) -> anyhow::Result<()> {
    let mut out = Vec::new();
    gwchan::encode(msg, &mut out)?;
    w.write_all(&out).await?;
    w.flush().await?;
    Ok(())
}

/// Reads the next controller message (cancel-safe: a dropped call loses no bytes).
async fn recv<R: AsyncRead + Unpin + ?Sized>(
    r: &mut R,
    buf: &mut Vec<u8>,
) -> anyhow::Result<ControllerMsg> {
    loop {
        if let Some((m, n)) = gwchan::decode::<ControllerMsg>(buf)? {
            buf.drain(..n);
            return Ok(m);
        }
        let mut chunk = [0u8; READ_CHUNK];
        let n = r.read(&mut chunk).await?;
        if n == 0 {
            anyhow::bail!("the controller closed the connection");
        }
        buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
    }
}

/// The state the client keeps across sessions.
#[derive(Debug)]
struct ClientState {
    version: u64,
    source: Source,
    /// The protocol version the next hello announces: ours, or the older one a controller
    /// answered with (a protocol 2 `ssc` refuses 3; gwchan::PROTOCOL_VERSION docs).
    protocol: u32,
}

/// Runs the controller session forever (reconnecting with backoff). `updates` goes to the
/// daemon, which applies each config with [`Topology::apply`].
pub async fn run_client(
    sh: Arc<Shared>,
    ctl: mpa::config::ControllerConfig,
    source: Source,
    version: u64,
    updates: mpsc::Sender<Update>,
    reload: Arc<tokio::sync::Notify>,
    wan: Option<watch::Receiver<WanState>>,
) {
    let mut st = ClientState {
        version,
        source,
        protocol: gwchan::PROTOCOL_VERSION,
    };
    sh.stats.update_controller(|c| {
        c.address = ctl.address.clone();
        c.source = source.name().into();
        c.config_version = version;
        c.state = if source == Source::None {
            "waiting for controller".into()
        } else {
            "connecting".into()
        };
    });
    let mut backoff = BACKOFF_MIN;
    loop {
        let r = session(
            &sh,
            &ctl,
            &mut st,
            &updates,
            &reload,
            &mut backoff,
            wan.clone(),
        )
        .await;
        let was_connected = sh.stats.controller().is_some_and(|c| c.connected);
        let waiting = st.source == Source::None;
        sh.stats.update_controller(|c| {
            c.connected = false;
            c.state = if waiting {
                "waiting for controller".into()
            } else {
                "backoff".into()
            };
            if let Err(e) = &r {
                c.last_error = Some(format!("{e:#}"));
            }
        });
        match r {
            Ok(()) => {}
            // One WARN when an established session ends; failed reconnects only at DEBUG.
            Err(e) if was_connected => {
                warn!(address = %ctl.address, error = %format!("{e:#}"), "controller disconnected");
            }
            Err(e) => debug!(error = %format!("{e:#}"), "controller session ended"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

async fn session(
    sh: &Arc<Shared>,
    ctl: &mpa::config::ControllerConfig,
    st: &mut ClientState,
    updates: &mpsc::Sender<Update>,
    reload: &tokio::sync::Notify,
    backoff: &mut Duration,
    wan: Option<watch::Receiver<WanState>>,
) -> anyhow::Result<()> {
    let tls = if ctl.address.starts_with("tls:") {
        let state = sh
            .tls
            .as_ref()
            .context("a tls: controller address needs the [tls] credentials")?;
        Some(crate::enrol::mutual_tls(state.files())?)
    } else {
        None
    };
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, crate::enrol::connect(&ctl.address, tls))
        .await
        .map_err(|_| anyhow::anyhow!("connect to {}: timed out", ctl.address))??;
    let (mut r, mut w) = tokio::io::split(stream);
    let mut buf = Vec::new();
    let session_protocol: u32;
    let config = sh.config();
    send(
        &mut w,
        &GatewayMsg::Hello(Hello::with_protocol(
            st.protocol,
            concat!("mmsg ", env!("CARGO_PKG_VERSION")),
        )),
    )
    .await?;
    send(
        &mut w,
        &GatewayMsg::Register(Register {
            branch_id: sh.own.get(),
            software_version: env!("CARGO_PKG_VERSION").to_owned(),
            wan: config
                .wan
                .iter()
                .map(|p| gwchan::WanSeen {
                    name: p.name.clone(),
                    address: p.address.to_string(),
                })
                .collect(),
            config_version: st.version,
        }),
    )
    .await?;
    match tokio::time::timeout(CONNECT_TIMEOUT, recv(&mut r, &mut buf)).await {
        Err(_) => anyhow::bail!("no hello from the controller in {CONNECT_TIMEOUT:?}"),
        Ok(Err(e)) => return Err(e),
        Ok(Ok(ControllerMsg::Hello(h))) => {
            session_protocol = h.protocol.min(st.protocol);
            let next = announce_after(st.protocol, &h).map_err(|e| anyhow::anyhow!("{e}"))?;
            if next != st.protocol {
                info!(
                    ours = st.protocol,
                    controller = h.protocol,
                    "the controller speaks an older protocol; announcing it from now on"
                );
                st.protocol = next;
            }
        }
        Ok(Ok(ControllerMsg::Error(e))) => {
            anyhow::bail!("controller refused: {} ({})", e.message, e.code)
        }
        Ok(Ok(other)) => anyhow::bail!("expected the controller's hello, got {other:?}"),
    }
    // Protocol 5 sessions: the learned WAN state now and on every change.
    let mut wan = wan.filter(|_| session_protocol >= gwchan::WAN_STATE_PROTOCOL);
    if let Some(rx) = &mut wan {
        let s = rx.borrow_and_update().clone();
        send(&mut w, &GatewayMsg::WanState(s)).await?;
    }
    info!(address = %ctl.address, "controller connected");
    *backoff = BACKOFF_MIN;
    sh.stats.update_controller(|c| {
        c.connected = true;
        c.state = "connected".into();
    });
    let mut tick = tokio::time::interval(REPORT_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                send(&mut w, &GatewayMsg::Report(report(sh, st, session_protocol))).await?;
            }
            Some(s) = crate::wan_watch::next(&mut wan) => {
                send(&mut w, &GatewayMsg::WanState(s)).await?;
            }
            m = recv(&mut r, &mut buf) => match m? {
                ControllerMsg::Config(cfg) => {
                    let ack = handle_config(sh, ctl, st, updates, cfg).await;
                    send(&mut w, &GatewayMsg::Ack(ack)).await?;
                }
                ControllerMsg::Error(e) => {
                    warn!(code = %e.code, message = %e.message, "the controller closed the session");
                    anyhow::bail!("controller: {} ({})", e.message, e.code);
                }
                ControllerMsg::Hello(_) => anyhow::bail!("a second hello from the controller"),
                ControllerMsg::Credentials(_) => anyhow::bail!("credentials without a request"),
                ControllerMsg::Setup(_) => anyhow::bail!("a set-up without a request"),
                ControllerMsg::Crl(c) => {
                    if apply_crl(sh, &c.crl_pem) {
                        reload.notify_one();
                    }
                }
            }
        }
    }
}

/// The version to announce from the next connection on, after announcing `announced` and
/// getting the controller's hello `h`: an older controller (a protocol 2 `ssc` answers a 3
/// with hello 2, then `error` `version`) makes us announce its version; a version we cannot
/// talk to at all is an error.
fn announce_after(announced: u32, h: &Hello) -> Result<u32, String> {
    h.check_controller()?;
    Ok(announced.min(h.protocol))
}

/// A CRL pushed by the controller: [`apply_crl_push`] with the gateway's state, now.
fn apply_crl(sh: &Shared, crl_pem: &str) -> bool {
    apply_crl_push(
        sh.tls.as_deref(),
        &sh.stats,
        sh.own,
        crl_pem,
        pki::crl::unix_now(),
    )
}

/// A CRL pushed by the controller (docs/security.md "Revocation fails closed"). It is used only
/// when it is signed by our CA (`[tls] ca_file`; else counted in `crl_refused_signature`), has a
/// `crl_number` higher than the list in use (the loaded one, or a newer one already in
/// `crl_file`; else `crl_refused_replay`), has not expired, and the whole `[tls]` set still
/// loads with it (else `tls_crl_refused`). It is then written to `crl_file` atomically (0600,
/// temporary file + fsync + rename + fsync of the directory), so the highest `crl_number`
/// survives a restart. Returns whether the credentials must be reloaded (the daemon does it as
/// on SIGHUP: established connections whose peer it revokes close). Without `[tls]` (clear
/// tunnels) there is nothing to revoke; without `crl_file` (validation refuses that with
/// `[controller]`) the push is refused loudly, never dropped in silence.
pub fn apply_crl_push(
    tls: Option<&crate::secure::TlsState>,
    stats: &Stats,
    own: BranchId,
    crl_pem: &str,
    now: u64,
) -> bool {
    let refuse = |why: String| {
        Stats::inc(&stats.tls_crl_refused);
        warn!(error = %why, "CRL from the controller refused; keeping the current one");
        false
    };
    let Some(tls) = tls else {
        debug!("CRL from the controller ignored: no [tls] credentials (clear tunnels)");
        return false;
    };
    let files = tls.files();
    let Some(path) = files.crl.as_ref() else {
        return refuse(
            "[tls] has no crl_file (required with [controller]): the revocation cannot be applied"
                .into(),
        );
    };
    if crl_pem.len() > gwchan::MAX_CRL_PEM {
        return refuse(format!(
            "{} bytes, more than {}",
            crl_pem.len(),
            gwchan::MAX_CRL_PEM
        ));
    }
    let read = |p: &std::path::Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let ca = match read(&files.ca) {
        Ok(c) => c,
        Err(why) => return refuse(why),
    };
    let on_disk = std::fs::read(path).ok();
    if on_disk.as_deref() == Some(crl_pem.as_bytes()) {
        debug!("CRL from the controller is the one in crl_file already");
        return false;
    }
    let loaded = tls.current().creds.crl.map(|c| c.number);
    let written = on_disk
        .and_then(|b| pki::crl::verify_pem(&b, &ca).ok())
        .map(|c| c.number);
    let have = loaded.max(written);
    let info = match pki::crl::check_update(crl_pem.as_bytes(), &ca, have, now) {
        Ok(info) => info,
        Err(e @ pki::crl::CrlError::Signature) => {
            Stats::inc(&stats.crl_refused_signature);
            warn!(error = %e, "CRL from the controller refused: forged or altered (not signed by our CA); keeping the current one");
            return false;
        }
        Err(e @ pki::crl::CrlError::Replay { .. }) => {
            Stats::inc(&stats.crl_refused_replay);
            warn!(error = %e, "CRL from the controller refused: replayed or old; keeping the current one");
            return false;
        }
        Err(e) => return refuse(e.to_string()),
    };
    let check = (|| {
        let (cert, key) = (read(&files.cert)?, read(&files.key)?);
        pki::tls::Credentials::from_pem(&ca, &cert, &key, Some(crl_pem.as_bytes()), own)
            .map_err(|e| e.to_string())
    })();
    if let Err(why) = check {
        return refuse(why);
    }
    if let Err(e) = pki::files::write_private(path, crl_pem.as_bytes()) {
        return refuse(format!("write {}: {e}", path.display()));
    }
    Stats::inc(&stats.tls_crl_updates);
    info!(
        crl_file = %path.display(),
        crl_number = %info.number,
        next_update = %pki::crl::rfc3339(info.next_update),
        "new CRL from the controller verified and written; reloading"
    );
    true
}

async fn handle_config(
    sh: &Arc<Shared>,
    ctl: &mpa::config::ControllerConfig,
    st: &mut ClientState,
    updates: &mpsc::Sender<Update>,
    cfg: GatewayConfig,
) -> Ack {
    let received = cfg.version;
    let refuse = |st: &ClientState, why: String| {
        warn!(version = received, error = %why, "config from the controller refused; keeping the old one");
        sh.stats.update_controller(|c| {
            c.configs_refused += 1;
            c.last_error = Some(why.clone());
        });
        Ack {
            config_version: st.version,
            received_version: received,
            error: Some(why),
        }
    };
    let merged = match merge_validated(&cfg, &sh.config()) {
        Ok(m) => m,
        Err(why) => return refuse(st, why),
    };
    if !cfg.priorities.matches_table() {
        warn!(
            version = received,
            "the controller's priority marks differ from this gateway's (different MMS versions?): \
             keeping this gateway's DSCP marks and egress bands; upgrade one of them"
        );
    }
    let (tx, rx) = oneshot::channel();
    if updates
        .send(Update {
            config: merged,
            reply: tx,
        })
        .await
        .is_err()
    {
        return refuse(st, "the daemon is shutting down".into());
    }
    match rx.await {
        Ok(Ok(())) => {}
        Ok(Err(why)) => return refuse(st, why),
        Err(_) => return refuse(st, "the daemon is shutting down".into()),
    }
    if let Err(e) = write_cache(&ctl.cache, &cfg) {
        warn!(cache = %ctl.cache.display(), error = %format!("{e:#}"), "could not write the controller cache");
    }
    st.version = received;
    st.source = Source::Controller;
    sh.stats.update_controller(|c| {
        c.configs_applied += 1;
        c.config_version = received;
        c.source = Source::Controller.name().into();
        c.state = "connected".into();
    });
    info!(version = received, "config from the controller applied");
    Ack {
        config_version: received,
        received_version: received,
        error: None,
    }
}

/// This session's report (`protocol`: the session's version; the fields a controller of that
/// version does not know are left out).
fn report(sh: &Shared, st: &ClientState, protocol: u32) -> Report {
    let (mut groups, up, total) = sh.group_report();
    if protocol < gwchan::QUEUE_DELAY_PROTOCOL {
        for g in &mut groups {
            g.queue_delay_us = None;
            g.base_rtt_us = None;
        }
    }
    Report {
        healthy: total > 0 && up == total,
        config_version: st.version,
        config_source: st.source.name().into(),
        connections_up: up,
        connections_total: total,
        drops: sh.stats.drops(),
        groups,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn file() -> Config {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/mmsg-branch1.toml"
        ))
        .unwrap();
        Config::parse(&text).unwrap()
    }

    #[test]
    fn an_older_controller_makes_the_next_hello_older() {
        let h = |v| Hello::with_protocol(v, "ssc");
        // Protocol 2 ssc: announce 2 from now on (enrolment-era features only, no crl).
        assert_eq!(announce_after(5, &h(2)), Ok(2));
        // Protocol 3 ssc (before the zero-touch setup): announce 3.
        assert_eq!(announce_after(5, &h(3)), Ok(3));
        assert_eq!(announce_after(3, &h(3)), Ok(3));
        // Once at 2, a hello 2 keeps it there.
        assert_eq!(announce_after(2, &h(2)), Ok(2));
        // Versions a gateway cannot talk to.
        assert!(announce_after(5, &h(1)).is_err());
        assert!(announce_after(6, &h(7)).is_err());
        // Protocol 4 ssc (zero-touch setup, no wan_state): announce 4 from now on.
        assert_eq!(announce_after(5, &h(4)), Ok(4));
        assert_eq!(announce_after(5, &h(5)), Ok(5));
        // Protocol 5 ssc (no standing queue in the reports): announce 5 from now on.
        assert_eq!(announce_after(6, &h(5)), Ok(5));
        assert_eq!(announce_after(6, &h(6)), Ok(6));
    }

    #[test]
    fn weights_only_is_detected() {
        let old = file();
        let mut new = old.clone();
        new.remote[0].path_groups[1].weight = 9;
        assert_eq!(without_weights(&old), without_weights(&new));
        let ch = weight_changes(&old, &new);
        assert_eq!(ch.len(), 1);
        assert_eq!(ch[0].2, 9);
        new.remote[0].path_groups.pop();
        assert_ne!(without_weights(&old), without_weights(&new));
    }

    #[test]
    fn merge_keeps_the_ovs_port_names() {
        // What `ovs::setup` hands on: `[ovs]` kept, every WAN renamed to mpa{k}.
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/mmsg-ovs-branch1.toml"
        ))
        .unwrap();
        let mut running = Config::parse(&text).unwrap();
        assert!(running.ovs.is_some());
        for (k, w) in running.wan.iter_mut().enumerate() {
            w.name = format!("mpa{k}");
        }
        let remotes = file().remote;
        running.remote.clear();
        let cfg = GatewayConfig {
            version: 7,
            branch_id: running.branch_id,
            remotes: remotes.clone(),
            classifier: None,
            priorities: Default::default(),
            ports: None,
        };
        // The plain merge validates the renamed ports as if they were the file's.
        assert!(cfg.validate_for(&running).is_err());
        let merged = merge_validated(&cfg, &running).unwrap();
        assert_eq!(merged.remote, remotes);
        assert_eq!(merged.ovs, running.ovs);
        let names: Vec<&str> = merged.wan.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["mpa0", "mpa1"]);
        // A wrong branch is still refused.
        let other = GatewayConfig {
            branch_id: running.branch_id + 1,
            ..cfg
        };
        assert!(merge_validated(&other, &running).is_err());
    }

    #[test]
    fn cache_round_trip_and_start_up_source() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/cache.json");
        let mut base = file();
        let remotes = base.remote.clone();
        base.remote.clear();
        base.controller = Some(mpa::config::ControllerConfig {
            renew_below_percent: mpa::config::DEFAULT_RENEW_PERCENT,
            renew_check_s: mpa::config::DEFAULT_RENEW_CHECK_S,
            address: "unix:/nonexistent".into(),
            cache: path.clone(),
        });
        // No cache: waiting.
        let (_, src, _) = initial_config(base.clone());
        assert_eq!(src, Source::None);
        let cfg = GatewayConfig {
            version: 42,
            branch_id: 1,
            remotes,
            classifier: None,
            priorities: Default::default(),
            ports: None,
        };
        write_cache(&path, &cfg).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let (merged, src, v) = initial_config(base.clone());
        assert_eq!((src, v), (Source::Cache, 42));
        assert_eq!(merged.remote, cfg.remotes);
        // A corrupt cache is not used.
        std::fs::write(&path, b"{").unwrap();
        assert_eq!(initial_config(base).1, Source::None);
    }

    /// Branch 2's credentials under a CA, and a rogue CA with the same name; `crl.pem` holds a
    /// CRL numbered 5, signed by the rogue CA when `forged_crl`, else by the CA.
    fn crl_fixture(
        forged_crl: bool,
    ) -> (
        tempfile::TempDir,
        BranchId,
        pki::ca::Ca,
        pki::ca::Ca,
        mpa::config::TlsConfig,
    ) {
        let d = tempfile::tempdir().unwrap();
        let own = BranchId::new(2).unwrap();
        let ca = pki::ca::Ca::generate("MMS test CA").unwrap();
        let rogue = pki::ca::Ca::generate("MMS test CA").unwrap();
        let g = ca
            .issue_gateway(own, 20, pki::ca::DEFAULT_VALIDITY)
            .unwrap();
        let p = |n: &str| d.path().join(n);
        pki::files::write_private(&p("ca.pem"), ca.cert_pem().as_bytes()).unwrap();
        pki::ca::Ca::save_issued(&g, &p("gw.pem"), &p("gw.key")).unwrap();
        let signer = if forged_crl { &rogue } else { &ca };
        pki::files::write_private(&p("crl.pem"), signer.crl(&[], 5).unwrap().as_bytes()).unwrap();
        let cfg = mpa::config::TlsConfig {
            mode: mpa::config::TlsMode::Tls,
            ca_file: Some(p("ca.pem")),
            cert_file: Some(p("gw.pem")),
            key_file: Some(p("gw.key")),
            crl_file: Some(p("crl.pem")),
        };
        (d, own, ca, rogue, cfg)
    }

    /// The gateway-channel CRL push handler: a forged list, a replayed older one, the same
    /// number re-signed, an expired one and a push without `crl_file` are refused and counted
    /// and leave `crl_file` alone; a newer genuine list is written (0600) and a reload then
    /// refuses to go back to an older file.
    #[test]
    fn pushed_crls_fail_closed() {
        use std::sync::atomic::Ordering::Relaxed;
        use std::sync::Arc;
        let (d, own, ca, rogue, mut cfg) = crl_fixture(false);
        let p = |n: &str| d.path().join(n);
        let crl5 = std::fs::read_to_string(p("crl.pem")).unwrap();
        let stats = Arc::new(Stats::default());
        let tls = crate::secure::TlsState::load(&cfg, own, Arc::clone(&stats)).unwrap();
        assert_eq!(tls.current().creds.crl.unwrap().number, 5);
        let now = pki::crl::unix_now();
        let push = |pem: &str| apply_crl_push(Some(&tls), &stats, own, pem, now);
        let c = |a: &std::sync::atomic::AtomicU64| a.load(Relaxed);
        let on_disk = || std::fs::read_to_string(p("crl.pem")).unwrap();

        // Forged: same issuer name, another key, a higher number.
        assert!(!push(&rogue.crl(&[], 9).unwrap()));
        assert_eq!(c(&stats.crl_refused_signature), 1);
        // Replayed older list, and the current number re-signed.
        assert!(!push(&ca.crl(&[], 4).unwrap()));
        assert!(!push(&ca.crl(&[20], 5).unwrap()));
        assert_eq!(c(&stats.crl_refused_replay), 2);
        // Expired, though newer.
        assert!(!push(&ca.crl_until(&[], 7, now - 10).unwrap()));
        assert_eq!(c(&stats.tls_crl_refused), 1);
        // Junk.
        assert!(!push(
            "-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n"
        ));
        assert_eq!(c(&stats.tls_crl_refused), 2);
        assert_eq!(on_disk(), crl5, "a refused CRL reached crl_file");
        assert_eq!(c(&stats.tls_crl_updates), 0);
        // The same bytes again: nothing to do, nothing counted.
        assert!(!push(&crl5));
        assert_eq!(c(&stats.crl_refused_replay), 2);

        // A newer genuine list is written and asks for a reload.
        let crl6 = ca.crl(&[99], 6).unwrap();
        assert!(push(&crl6));
        assert_eq!(c(&stats.tls_crl_updates), 1);
        assert_eq!(on_disk(), crl6);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(p("crl.pem")).unwrap().permissions(),
        ) & 0o777;
        assert_eq!(mode, 0o600);
        // Before the reload, the file's number counts: a re-signed 6 is a replay already.
        assert!(!push(&ca.crl(&[], 6).unwrap()));
        assert_eq!(c(&stats.crl_refused_replay), 3);
        tls.reload().unwrap();
        assert_eq!(tls.current().creds.crl.unwrap().number, 6);
        // An older list put back into crl_file is not loaded on reload (SIGHUP).
        pki::files::write_private(&p("crl.pem"), crl5.as_bytes()).unwrap();
        let e = tls.reload().unwrap_err();
        assert!(
            matches!(
                e,
                crate::secure::LoadError::CrlReplay {
                    have: 6,
                    got: 5,
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(tls.current().creds.crl.unwrap().number, 6);

        // Without crl_file a push is refused and counted, never silently dropped.
        cfg.crl_file = None;
        let stats2 = Arc::new(Stats::default());
        let bare = crate::secure::TlsState::load(&cfg, own, Arc::clone(&stats2)).unwrap();
        assert!(!apply_crl_push(Some(&bare), &stats2, own, &crl6, now));
        assert_eq!(c(&stats2.tls_crl_refused), 1);
        // Clear tunnels: nothing to revoke.
        assert!(!apply_crl_push(None, &stats2, own, &crl6, now));
    }

    /// A CRL in crl_file at start gets the same checks: a forged one does not load.
    #[test]
    fn a_forged_crl_file_does_not_load() {
        let (_d, own, _ca, _rogue, cfg) = crl_fixture(true);
        let e = crate::secure::TlsState::load(&cfg, own, Arc::default()).unwrap_err();
        assert!(e.to_string().contains("not signed by our CA"), "{e}");
    }

    #[test]
    fn a_remote_behind_nat_is_never_dialled() {
        let mut c = file();
        let all = wanted_outbound(&c);
        assert!(!all.is_empty());
        let id = c.remote[0].id;
        c.remote[0].nat = true;
        let now = wanted_outbound(&c);
        assert!(now.keys().all(|k| k.branch.get() != id), "{now:?}");
        assert_eq!(
            now.len(),
            all.keys().filter(|k| k.branch.get() != id).count()
        );
    }
}
