//! The driver of [`mpa::autorate`] (`[qos] autorate`, docs/mmsg.md "Automatic rate"): every
//! [`TICK`] it reads each shaped port's root qdisc over rtnetlink (bytes sent, backlog), takes
//! the smallest queue the port's loaded subflows showed since the last tick (noted by the
//! fast-failover sampler into [`Shared::port_queues`]), asks whether an outbound connection's
//! writer waited for its paths ([`Backlog`]) and hands the sample to the port's
//! [`Autorate`]; a new rate is applied with `tc class change` on class `1:1`
//! ([`Shaper::set_rate`]). The figures go to `mmsg status` and `/metrics`.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Instant;

use mpa::autorate::{Autorate, Change, PortSample, TICK};
use netlink_packet_route::tc::{TcAttribute, TcHandle, TcMessage, TcStats2};
use netlink_packet_route::RouteNetlinkMessage;
use tracing::{debug, info, warn};

use super::shared::{Backlog, ConnKey, PathManagement, Shared};
use crate::qos::Shaper;
use crate::stats::Stats;
use crate::status::PortRateStatus;

/// Bytes sent and bytes queued of every root qdisc, by interface index.
fn root_qdiscs() -> std::io::Result<BTreeMap<u32, (u64, u64)>> {
    let mut out = BTreeMap::new();
    crate::wan_watch::dump(
        RouteNetlinkMessage::GetQueueDiscipline(TcMessage::default()),
        |m| {
            let RouteNetlinkMessage::NewQueueDiscipline(q) = m else {
                return;
            };
            if q.header.parent != TcHandle::ROOT {
                return;
            }
            let (mut bytes, mut backlog) = (0, 0);
            for a in &q.attributes {
                if let TcAttribute::Stats2(s) = a {
                    for x in s {
                        match x {
                            TcStats2::Basic(b) => bytes = b.bytes,
                            TcStats2::Queue(qs) => backlog = u64::from(qs.backlog),
                            _ => {}
                        }
                    }
                }
            }
            if let Ok(i) = u32::try_from(q.header.index) {
                out.insert(i, (bytes, backlog));
            }
        },
    )?;
    Ok(out)
}

/// Runs the rate control of the `autorate` ports among `shapers` (the ports of
/// [`crate::qos::plan`], in `wan[k]` order: with `autorate` every port is shaped) until the
/// process ends.
pub async fn run(sh: Arc<Shared>, shapers: Vec<Shaper>) {
    let mut ports: Vec<(usize, Shaper, Autorate)> = shapers
        .into_iter()
        .enumerate()
        .filter(|(_, s)| s.autorate)
        .map(|(k, s)| {
            let a = Autorate::new(s.rate_kbit);
            (k, s, a)
        })
        .collect();
    if ports.is_empty() {
        return;
    }
    if matches!(sh.pm, PathManagement::Kernel) {
        warn!(
            "[qos] autorate needs the userspace path manager (its subflow RTTs come from the \
             fast-failover sampler): the ports stay at their start rate"
        );
    }
    info!(ports = ports.len(), "automatic WAN egress rate running");
    sh.autorate_on.store(true, Ordering::Relaxed);
    let mut backlogs: BTreeMap<ConnKey, Backlog> = BTreeMap::new();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut read_failed = false;
    loop {
        tick.tick().await;
        let queues = sh.queues();
        let mut backlogged = false;
        for (k, q) in &queues {
            backlogged |= backlogs.entry(*k).or_default().since_last(q);
        }
        backlogs.retain(|k, _| queues.contains_key(k));
        let qdiscs = match tokio::task::spawn_blocking(root_qdiscs).await {
            Ok(Ok(q)) => {
                read_failed = false;
                q
            }
            Ok(Err(e)) => {
                if !read_failed {
                    warn!(error = %e, "autorate: reading the WAN qdiscs failed");
                }
                read_failed = true;
                continue;
            }
            Err(_) => continue,
        };
        let config = sh.config();
        let now = Instant::now();
        let mut status = Vec::with_capacity(ports.len());
        for (k, shaper, ctl) in &mut ports {
            let addr = config.wan.get(*k).map(|w| w.address.addr());
            let path_queue = addr.and_then(|a| {
                sh.port_queues
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take(&a)
            });
            let Some(&(sent_bytes, backlog_bytes)) = qdiscs.get(&crate::sys::if_index(&shaper.dev))
            else {
                continue;
            };
            let change = ctl.on_sample(PortSample {
                at: now,
                sent_bytes,
                backlog_bytes,
                path_queue,
                backlogged,
            });
            if let Change::Down(r) | Change::Up(r) = change {
                apply(shaper, change, r, &sh.stats).await;
            }
            let (downs, ups) = ctl.changes();
            status.push(PortRateStatus {
                port: *k,
                dev: shaper.dev.clone(),
                rate_kbit: ctl.rate_kbit(),
                max_kbit: ctl.max_kbit(),
                sent_kbit: ctl.sent_kbit(),
                wan_queue_us: ctl
                    .wan_queue()
                    .map(|q| u64::try_from(q.as_micros()).unwrap_or(u64::MAX)),
                downs,
                ups,
            });
        }
        // Local addresses of no shaped port (a renumbered port's old address) are dropped.
        sh.port_queues
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        sh.stats.set_autorate(status);
    }
}

/// Sets `shaper`'s rate to `kbit` with `tc` (a blocking child process, off the runtime).
async fn apply(shaper: &Shaper, change: Change, kbit: u64, stats: &Stats) {
    let args = shaper.set_rate(kbit);
    let r = tokio::task::spawn_blocking(move || crate::setup::run("tc", &args)).await;
    match r {
        Ok(Ok(_)) => {
            match change {
                Change::Down(_) => Stats::inc(&stats.autorate_down),
                _ => Stats::inc(&stats.autorate_up),
            }
            debug!(dev = %shaper.dev, rate_kbit = kbit, ?change, "autorate: rate set");
        }
        Ok(Err(e)) => {
            Stats::inc(&stats.autorate_errors);
            warn!(dev = %shaper.dev, rate_kbit = kbit, error = %e, "autorate: tc refused the rate");
        }
        Err(_) => Stats::inc(&stats.autorate_errors),
    }
}
