//! The gateway channel's state: the current config of every branch (versioned), the sessions,
//! the counters, and what `GET /api/v1/gateways` shows.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use mpa::gwchan::{GatewayConfig, Register, Report};
use serde::{Deserialize, Serialize};
use tokio::sync::{oneshot, watch, Notify};

use crate::authority::Authority;
use crate::inventory::BranchId;
use crate::path_group::PathGroupId;
use crate::store::Catalog;
use crate::wrr::{PairWeights, Wrr};

use super::config::{build_remotes, priorities};

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
    /// The WAN state it learned from its kernel, last reported (protocol 5 gateways; `None`:
    /// none yet). What differed from the inventory was committed to it (`docs/ssc.md`), for
    /// authenticated sessions only (mutual TLS, unix socket); a clear TCP session's is shown only.
    #[serde(default)]
    pub wan_learned: Option<mpa::gwchan::WanState>,
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
    /// Pre-auth caps, deadlines and refusals of the TCP listeners ([`crate::preauth`]).
    #[serde(default)]
    pub preauth: crate::preauth::Refusals,
    /// Reports of gateways registered over clear TCP (unauthenticated): shown in
    /// `last_report`, never fed into the capacity estimates, WRR weights or adaptive
    /// decisions (docs/security.md, issue #17).
    #[serde(default)]
    pub unauthenticated_reports: u64,
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
    /// Per branch in the inventory: its own part of a zero-touch set-up (LAN prefixes, WAN
    /// ports as the gateway file names them).
    own: BTreeMap<u8, OwnPart>,
    sessions: BTreeMap<u8, SessionSlot>,
    views: BTreeMap<u8, (GatewayView, Option<Instant>)>,
    next_version: u64,
    next_session: u64,
    rejected_unknown_branch: u64,
    rejected_other: u64,
    rejected_auth: u64,
    replaced: u64,
    unauthenticated_reports: u64,
}

/// A branch's own part of its [`mpa::gwchan::GatewaySetup`].
#[derive(Debug, Clone, PartialEq)]
struct OwnPart {
    lan_prefixes: Vec<ipnet::IpNet>,
    wan: Vec<mpa::config::WanPort>,
}

/// The inventory's `branch` as the gateway file wants it: WAN port k named `wan{k}`, no rate
/// (shaping is the gateway operator's choice), the MPA MAC when the inventory has one.
fn own_part(branch: &crate::inventory::Branch) -> OwnPart {
    OwnPart {
        lan_prefixes: branch.lan.iter().map(|n| ipnet::IpNet::V4(*n)).collect(),
        wan: branch
            .wan
            .iter()
            .map(|p| mpa::config::WanPort {
                name: format!("wan{}", p.port.get()),
                address: p.address,
                gateway: p.gateway,
                kind: p.kind,
                mac: p.mac,
                rate_mbit: None,
                nat: p.nat,
            })
            .collect(),
    }
}

/// A session just opened: its id, the branch's config (watched), and the signal that a newer
/// session replaced it.
#[derive(Debug)]
pub(super) struct Opened {
    pub(super) id: u64,
    pub(super) configs: watch::Receiver<Option<Arc<GatewayConfig>>>,
    pub(super) kill: oneshot::Receiver<()>,
}

/// The configs, sessions and views of every gateway.
#[derive(Debug)]
pub struct Registry {
    inner: Mutex<Inner>,
    /// Where reports go for the capacity estimates: set by [`GwChan::run`].
    capacity: std::sync::OnceLock<(Arc<Mutex<Wrr>>, Arc<Notify>)>,
    authority: std::sync::OnceLock<Arc<Authority>>,
    /// Where learned WAN states are committed ([`Registry::learn_into`]; `ssc run` sets it).
    store: std::sync::OnceLock<Arc<crate::store::Store>>,
    /// Pre-auth state of the TCP listeners (limits set by [`super::GwChan::bind`]).
    preauth: Arc<crate::preauth::Guard>,
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
                own: BTreeMap::new(),
                sessions: BTreeMap::new(),
                views: BTreeMap::new(),
                next_version: start,
                next_session: 1,
                rejected_unknown_branch: 0,
                rejected_other: 0,
                rejected_auth: 0,
                replaced: 0,
                unauthenticated_reports: 0,
            }),
            capacity: std::sync::OnceLock::new(),
            authority: std::sync::OnceLock::new(),
            store: std::sync::OnceLock::new(),
            preauth: crate::preauth::Guard::new(
                "gateway",
                crate::preauth::PreAuthLimits::default(),
            ),
        }
    }

    /// Feeds the reports of every session into `wrr`'s capacity estimates and wakes `changed`
    /// after each (first call wins).
    pub fn estimate_capacity_into(&self, wrr: Arc<Mutex<Wrr>>, changed: Arc<Notify>) {
        let _ = self.capacity.set((wrr, changed));
    }

    /// One report of gateway `branch` received at `at`: each group's counters → its capacity
    /// estimate ([`crate::capacity`]).
    pub(super) fn feed_report(&self, branch: u8, at: Instant, rep: &Report) {
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
                        standing_queue: mpa::conn_report::reported_queue(g),
                    },
                );
            }
        }
        drop(w);
        changed.notify_one();
    }

    /// Commits the WAN states gateways learn (protocol 5) into `store`'s inventory; without
    /// it they are only shown. Only the first call counts.
    pub fn learn_into(&self, store: Arc<crate::store::Store>) {
        let _ = self.store.set(store);
    }

    /// A learned WAN state of `branch`: the port changes against the current inventory
    /// ([`crate::learned::patches`]), committed in one transaction when there are any (the
    /// store's subscribers then recompute the swap flows and every gateway's remotes). Blocking
    /// (database write): call it off the async threads. Returns the ports changed.
    pub fn learn(&self, branch: u8, state: &mpa::gwchan::WanState) -> Vec<String> {
        self.lock().views.entry(branch).or_default().0.wan_learned = Some(state.clone());
        let (Some(store), Ok(b)) = (self.store.get(), BranchId::new(branch)) else {
            return Vec::new();
        };
        let patches = crate::learned::patches(&store.snapshot(), b, state);
        if patches.is_empty() {
            return Vec::new();
        }
        let changed: Vec<String> = patches.iter().map(|(p, _)| p.to_string()).collect();
        let r = store.update(|c| {
            // Against the catalog of this transaction (an operator change may have come between).
            let p = crate::learned::patches(c, b, state);
            crate::learned::apply(c, &p)
        });
        match r {
            Ok(_) => {
                tracing::info!(branch, ports = ?changed, "learned WAN state committed to the inventory");
                changed
            }
            Err(e) => {
                tracing::warn!(branch, error = %e, "learned WAN state refused by the inventory");
                Vec::new()
            }
        }
    }

    /// A report of an unauthenticated (clear TCP) session: counted, never fed into the
    /// capacity estimates (like OpenFlow statistics of an unauthenticated switch).
    pub(super) fn ignore_unauthenticated_report(&self) {
        self.lock().unauthenticated_reports += 1;
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
        inner.own = catalog
            .inventory()
            .branches()
            .map(|b| (b.id.get(), own_part(b)))
            .collect();
        // The paper's plan is the gateways' default: sent only when extended.
        let ports = match catalog.settings().ports {
            mms_types::PortPlan::Paper => None,
            p => Some(p),
        };
        for b in catalog.inventory().branches() {
            let remotes = build_remotes(catalog, weights, b.id);
            let id = b.id.get();
            let same = inner.configs.get(&id).is_some_and(|tx| {
                tx.borrow().as_ref().is_some_and(|c| {
                    c.remotes == remotes && c.priorities == prio && c.ports == ports
                })
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
                ports,
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

    /// The zero-touch set-up of `branch` (protocol 4): its own part of the inventory and its
    /// current config; `None` when the branch is not in the inventory.
    pub fn setup(&self, branch: u8) -> Option<mpa::gwchan::GatewaySetup> {
        let inner = self.lock();
        let own = inner.own.get(&branch)?.clone();
        let config = inner.configs.get(&branch)?.borrow().as_deref().cloned()?;
        Some(mpa::gwchan::GatewaySetup {
            branch_id: branch,
            lan_prefixes: own.lan_prefixes,
            wan: own.wan,
            config,
        })
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
            preauth: self.preauth.counters(),
            unauthenticated_reports: inner.unauthenticated_reports,
        }
    }

    /// Opens a session for a registered gateway: `Err` with the message for the peer when the
    /// branch has no config (not in the inventory). Replaces an older session of the branch.
    pub(super) fn open(&self, reg: &Register, peer: &str) -> Result<Opened, String> {
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
            wan_learned: entry.0.wan_learned.take(),
        };
        Ok(Opened {
            id,
            configs: rx,
            kill: kill_rx,
        })
    }

    pub(super) fn with_view(
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

    pub(super) fn close(&self, branch: u8, session: u64) {
        let mut inner = self.lock();
        if inner.sessions.get(&branch).is_some_and(|s| s.id == session) {
            inner.sessions.remove(&branch);
            if let Some((v, _)) = inner.views.get_mut(&branch) {
                v.connected = false;
            }
        }
    }

    /// The pre-auth state of the TCP listeners.
    pub fn preauth(&self) -> &Arc<crate::preauth::Guard> {
        &self.preauth
    }

    pub(super) fn reject_other(&self) {
        self.lock().rejected_other += 1;
    }

    pub(super) fn reject_auth(&self) {
        self.lock().rejected_auth += 1;
    }
}
