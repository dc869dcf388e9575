//! The send time budget's driver (`mpa::queue::inflight`): every
//! [`mpa::queue::inflight::SAMPLE_PERIOD`] the connection's subflows' `MPTCP_TCPINFO` into its
//! [`InflightBudget`], the budget, rate and stall cover out to its writer through the
//! [`OutQueue`]'s atomics. Called by the subflow task (`subflows.rs`).

use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mpa::queue::inflight::{DeliverySample, InflightBudget, Probed};
use tracing::{debug, info};

use super::conn_io::subflow_queue;
use super::shared::{Backlog, SubflowKey};
use super::OutQueue;
use crate::sys;

/// One round of the send time budget: every subflow's acknowledged bytes and minimum RTT into
/// the connection's [`InflightBudget`], the budget and rate out to its writer (which counts
/// against it what the paths hold, [`mpa::queue::path_queued`]). A socket that
/// does not answer `MPTCP_TCPINFO` (fallback to TCP) gets no budget: the writer writes as before.
pub(super) fn sample_budget(
    fd: &OwnedFd,
    b: &mut InflightBudget<SubflowKey>,
    oq: &OutQueue,
    backlog: &mut Backlog,
    name: &str,
) {
    let (Ok(present), Ok(infos)) = (sys::mptcp_subflow_addrs(fd), sys::mptcp_subflow_tcpinfo(fd))
    else {
        oq.inflight_budget.store(0, Ordering::Relaxed);
        return;
    };
    if infos.is_empty() {
        oq.inflight_budget.store(0, Ordering::Relaxed);
        return;
    }
    if present.len() != infos.len() {
        // A subflow came or went between the two calls: the next round.
        return;
    }
    let starting = b.in_startup();
    let now = Instant::now();
    // 0: no budget wait since the last sample; else 1 + the lateness, µs (the writer's).
    let late = oq.writer_late_us.swap(0, Ordering::Relaxed);
    b.on_writer_late(now, late.checked_sub(1).map(Duration::from_micros));
    // Data waited on our side since the last sample: in the gateway's queue (the writer left
    // some behind) or in the socket, not yet on a subflow or not yet sent by one.
    let waiting =
        sys::outq_unsent_bytes(fd).unwrap_or(0) > 0 || infos.iter().any(|t| t.notsent_bytes > 0);
    b.handle_sample(
        now,
        backlog.since_last(oq) || waiting,
        present.iter().zip(&infos).map(|(k, t)| {
            (
                *k,
                DeliverySample {
                    established: t.state == sys::TCP_ESTABLISHED,
                    bytes_acked: t.bytes_acked,
                    min_rtt_us: t.min_rtt_us,
                    queued: subflow_queue(t).bytes(),
                    srtt_us: t.rtt_us,
                },
            )
        }),
    );
    if let Some(p) = b.take_probed() {
        log_probe(name, &p);
    }
    if starting && !b.in_startup() {
        info!(
            conn = %name,
            rate_mbit = b.rate() as f64 * 8.0 / 1e6,
            budget = b.budget(),
            "send time budget: start-up over, the paths are full"
        );
    }
    oq.delivery_rate.store(b.rate(), Ordering::Relaxed);
    oq.inflight_budget.store(b.budget(), Ordering::Relaxed);
    let cover = u64::try_from(b.stall_cover().as_micros()).unwrap_or(u64::MAX);
    oq.stall_cover_us.store(cover, Ordering::Relaxed);
}

/// A minimum RTT probe's result (`mpa::queue::min_rtt`): INFO when the set of subflows whose
/// paths got longer changed, DEBUG otherwise (a path that stays longer is probed every 10 s).
fn log_probe(name: &str, p: &Probed) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    if p.changed && p.raised > 0 {
        info!(
            conn = %name,
            subflows = p.raised,
            of = p.subflows,
            min_rtt_ms = ms(p.min_rtt),
            kernel_min_rtt_ms = ms(p.kernel_min_rtt),
            "send time budget: a path's RTT rose under a live subflow; the budget uses the \
             probed minimum RTT, not the kernel's"
        );
    } else if p.changed {
        info!(
            conn = %name,
            "send time budget: the paths' RTT is back at the kernel's minimum"
        );
    } else {
        debug!(
            conn = %name,
            raised = p.raised,
            min_rtt_ms = ms(p.min_rtt),
            kernel_min_rtt_ms = ms(p.kernel_min_rtt),
            "send time budget: minimum RTT probe"
        );
    }
}
