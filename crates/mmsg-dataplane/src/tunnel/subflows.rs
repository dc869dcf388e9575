//! Subflow management of an outbound connection and its once-a-second transport sample; fast
//! failover also on accepted connections ([`watch_inbound`]).
//!
//! A connection of class c to a remote branch should have a subflow on every (uplink of c, remote
//! WAN address) pair, n × m ([`wanted_pairs`]). With the userspace path manager, every missing
//! pair is requested (`MPTCP_PM_CMD_SUBFLOW_CREATE`), each pair with its own backoff; with the
//! in-kernel one, we only observe. Each round also samples the subflows (`MPTCP_TCPINFO`,
//! `TIOCOUTQ`) into the connection's [`OutQueue`] figures (computed by [`mpa::conn_report`]) and
//! its `mmsg status` entry.
//!
//! Fast failover (docs/mmsg.md "Failover"): between those rounds, every [`HEALTH_TICK`] while
//! data is in flight ([`IDLE_TICK`] otherwise), the subflows' `tcp_info` feeds
//! [`mpa::subflow_health::StallDetector`]; a subflow that stalls is destroyed at once
//! (`MPTCP_PM_CMD_SUBFLOW_DESTROY`: the kernel sends what was in flight on it again over the
//! others, and stops scheduling onto it). Its path is then probed by requesting a new subflow
//! after the [`mpa::subflow_health::PathHold`] hold-down (the kernel resends its SYN every second
//! for the first four tries, `tcp_syn_linear_timeouts`), and the path is back when that subflow
//! establishes. A probe that does not connect is never destroyed by us: closing any subflow
//! makes the kernel send the connection's whole unacknowledged data again
//! (`__mptcp_retransmit_pending_data`), which measured as a goodput loss every second.
//! `MMSG_FAILOVER=off` in the environment turns all of this off (the kernel alone recovers, as
//! before; `bench failover` measures both).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpa::config::Config;
use mpa::conn_report::{self, SubflowSample};
use mpa::queue::inflight::{self, InflightBudget};
use mpa::subflow_health::{accepted_side_doomed, HealthSample, PathHold, StallDetector, Verdict};
use mpa::Class;
use tracing::{debug, info, warn};

use super::conn_io::ConnCounters;
use super::pacing::PacerDriver;
use super::shared::{Backlog, SubflowKey};
use super::slow_paths::SlowPaths;
use super::socket::{apply_send_budget, check_fallback};
use super::{ConnEvent, ConnKey, OutQueue, PathManagement, Shared, TunEvent};
use crate::genl::{SubflowCreate, SubflowDestroy};
use crate::stats::{Stats, SubflowStatus};
use crate::sys;

/// Subflow check period (MPTCP_SUBFLOW_ADDRS, MPTCP_INFO) and the first retry of a missing pair.
pub(super) const SUBFLOW_CHECK: Duration = Duration::from_secs(1);
/// First retry of a subflow that was requested but is not there yet: longer than a SYN
/// retransmission (1 s), so a slow join is not requested twice.
const SUBFLOW_RETRY_MIN: Duration = Duration::from_secs(3);
/// Cap of the per-pair subflow retry backoff.
const SUBFLOW_RETRY_MAX: Duration = Duration::from_secs(30);
/// Subflow health sample period while data is in flight: a dead subflow is taken out at most
/// one tick after the detector's limit (100–150 ms after its last acknowledgement under load).
/// Two getsockopt calls per tick and connection.
pub(super) const HEALTH_TICK: Duration = Duration::from_millis(20);
/// Sample period when nothing is in flight (nothing to judge; probes are watched).
const IDLE_TICK: Duration = Duration::from_millis(250);
/// The environment variable that turns fast failover off (`off`).
pub const FAILOVER_ENV: &str = "MMSG_FAILOVER";

/// A path: (local, remote) WAN address.
type PathKey = (Ipv4Addr, Ipv4Addr);

/// Whether fast failover runs (not disabled with `MMSG_FAILOVER=off`).
fn failover_enabled() -> bool {
    std::env::var(FAILOVER_ENV).map_or(true, |v| v != "off")
}

/// The fast-failover state of one outbound connection.
#[derive(Debug, Default)]
struct Failover {
    stalls: StallDetector<SubflowKey>,
    hold: PathHold<PathKey>,
}

/// One subflow's `tcp_info` as the detector's sample.
fn health_sample(t: &sys::SubflowTcpInfo) -> HealthSample {
    HealthSample {
        established: t.state == sys::TCP_ESTABLISHED,
        unacked: t.unacked,
        bytes_acked: t.bytes_acked,
        backoff: t.backoff,
        srtt: Duration::from_micros(u64::from(t.rtt_us)),
        rttvar: Duration::from_micros(u64::from(t.rttvar_us)),
        last_ack_age: Some(Duration::from_millis(u64::from(t.last_ack_recv_ms))),
        cwnd_limited: t.unacked >= t.cwnd || t.notsent_bytes > 0,
        slack: 0,
    }
}

/// The (local, remote) address pairs a connection of `class` to `remote` should have a subflow
/// on: every uplink of the class × every remote WAN address (n × m), with the local port index.
pub fn wanted_pairs(
    config: &Config,
    class: Class,
    remote: &[Ipv4Addr],
) -> Vec<(usize, Ipv4Addr, Ipv4Addr)> {
    let mut out = Vec::new();
    for k in config.uplinks_for(class) {
        let Some(w) = config.wan.get(k) else { continue };
        for r in remote {
            out.push((k, w.address.addr(), *r));
        }
    }
    out
}

/// Manages the subflows of a running outbound connection and samples them, forever (until the
/// connection's other halves end): every [`SUBFLOW_CHECK`], or four times as often while pairs
/// are missing.
#[allow(clippy::too_many_arguments)]
pub(super) async fn run(
    sh: &Shared,
    key: ConnKey,
    name: &str,
    fd: &OwnedFd,
    pairs: &[(usize, Ipv4Addr, Ipv4Addr)],
    port: u16,
    oq: &OutQueue,
    cc: &ConnCounters,
    fallback_reported: bool,
) {
    let mut retry: BTreeMap<(Ipv4Addr, Ipv4Addr), (Instant, Duration)> = BTreeMap::new();
    let mut reported = fallback_reported;
    let mut failover = failover_enabled().then(Failover::default);
    let mut next_round = Instant::now();
    let mut token = 0;
    let mut fb = false;
    let time_budget = sh.opts.send_time_budget;
    let mut budget = (!time_budget.is_zero()).then(|| {
        InflightBudget::new(time_budget, sh.opts.send_time_gain)
            .with_max_cover(sh.opts.send_time_stall_cover)
            .with_rtt_probe(sh.opts.send_time_rtt_probe)
    });
    // The budget's delivery-rate samples stay [`inflight::SAMPLE_PERIOD`] apart whatever the
    // health tick (20 ms while busy): shorter windows made the rate noisy, and the writers'
    // budget waits, the "saturated" signal ssc's weights read, disappeared (e2e_congestion).
    let mut next_budget_sample = Instant::now();
    let mut backlog = Backlog::default();
    // Whether the connection has an established subflow, as last told to the TUN task (a new
    // establishment starts with one).
    let mut paths_live = true;
    let mut slow = SlowPaths::new(sh);
    let mut pacer = sh.opts.pacing.map(|c| PacerDriver::new(oq, c));
    loop {
        let mut tick = SUBFLOW_CHECK;
        if let Some(f) = failover.as_mut().filter(|_| !fb && token != 0) {
            let h = check_health(sh, name, fd, token, f, Side::Dialling).await;
            tick = if h.busy { HEALTH_TICK } else { IDLE_TICK };
            if h.busy {
                // What the socket holds behind a gap changes within an RTO: follow it while
                // busy, not only once a round (with the health sample's `tcp_info`).
                refresh_send_budget(sh, fd, &h.infos);
            }
            if let Some(live) = h.live.filter(|&l| l != paths_live) {
                report_paths(sh, key, name, live);
                paths_live = live;
            }
        }
        if let Some(b) = budget.as_mut() {
            let now = Instant::now();
            if now >= next_budget_sample {
                super::budget::sample_budget(fd, b, oq, &mut backlog, name);
                next_budget_sample = now + inflight::SAMPLE_PERIOD;
            }
            tick = tick.min(next_budget_sample.saturating_duration_since(now));
        }
        if let Some(p) = pacer.as_mut() {
            tick = tick.min(p.tick(fd, oq, budget.as_ref()));
        }
        let now = Instant::now();
        if now < next_round {
            tokio::time::sleep(tick.min(next_round - now)).await;
            continue;
        }
        fb = check_fallback(sh, fd, name, &mut reported);
        let present = sys::mptcp_subflow_addrs(fd).unwrap_or_default();
        let info = sys::mptcp_info(fd).unwrap_or_default();
        token = info.token;
        let live = live_subflows(fd, &present);
        if !fb {
            let hold = failover.as_ref().map(|f| &f.hold);
            manage_subflows(sh, name, info.token, &live, pairs, port, &mut retry, hold).await;
        }
        let complete = live.len() >= pairs.len();
        let tcpinfo = sys::mptcp_subflow_tcpinfo(fd).unwrap_or_default();
        if let Some(slow) = slow.as_mut().filter(|_| !fb) {
            // The addresses again, right after the `tcp_info`: subflows may have come and gone
            // since `present` (the policy pairs them by position).
            let addrs = sys::mptcp_subflow_addrs(fd).unwrap_or_default();
            slow.round(sh, name, info.token, &addrs, &tcpinfo).await;
        }
        let samples: Vec<SubflowSample> = tcpinfo.iter().map(sample).collect();
        let socket_unacked = sys::outq_bytes(fd).unwrap_or(0);
        apply_send_budget(
            fd,
            &sh.opts,
            &samples,
            conn_report::held_bytes(socket_unacked, &samples),
        );
        oq.window_bps
            .store(conn_report::window_rate_bps(&samples), Ordering::Relaxed);
        oq.inflight_bps
            .store(conn_report::inflight_rate_bps(&samples), Ordering::Relaxed);
        let standing = conn_report::standing_queue(&samples).unwrap_or_default();
        oq.queue_delay_us
            .store(u64::from(standing.queue_us), Ordering::Relaxed);
        oq.base_rtt_us
            .store(u64::from(standing.base_rtt_us), Ordering::Relaxed);
        oq.acked_bytes.store(
            tcpinfo.iter().map(|t| t.bytes_acked).sum(),
            Ordering::Relaxed,
        );
        oq.retrans_bytes.store(
            tcpinfo.iter().map(|t| t.bytes_retrans).sum(),
            Ordering::Relaxed,
        );
        let socket_queued = conn_report::queued_bytes(socket_unacked, &samples);
        oq.queued_bytes.store(socket_queued, Ordering::Relaxed);
        let (queue_bytes, queue_sojourn) = oq.core.lock().map_or_else(
            |_| (0, mpa::queue::SojournHistogram::default()),
            |core| (core.queued_bytes() as u64, core.queue_sojourn()),
        );
        let mut subflows = subflow_status(fd, &present);
        let mut before = Vec::new();
        sh.stats.update_conn(name, |c| {
            keep_known(&mut subflows, &c.subflows);
            before = std::mem::replace(&mut c.subflows, subflows.clone());
            c.token = info.token;
            c.fallback = fb;
            c.bytes_retrans = info.bytes_retrans;
            c.frames_tx = cc.frames_tx.load(Ordering::Relaxed);
            c.bytes_tx = cc.bytes_tx.load(Ordering::Relaxed);
            c.frames_rx = cc.frames_rx.load(Ordering::Relaxed);
            c.bytes_rx = cc.bytes_rx.load(Ordering::Relaxed);
            c.queue_bytes = queue_bytes;
            c.queue_sojourn = queue_sojourn;
            c.socket_queued_bytes = socket_queued;
            c.send_time_budget_bytes = oq.inflight_budget.load(Ordering::Relaxed);
            c.delivery_rate_bytes_per_second = oq.delivery_rate.load(Ordering::Relaxed);
            c.stall_cover_us = oq.stall_cover_us.load(Ordering::Relaxed);
            c.pacing = pacer.as_ref().map(PacerDriver::status);
        });
        log_subflow_changes(name, &before, &subflows);
        // Check often until the subflow set is complete, then once per SUBFLOW_CHECK.
        let pause = if complete {
            SUBFLOW_CHECK
        } else {
            SUBFLOW_CHECK / 4
        };
        next_round = Instant::now() + pause;
        tokio::time::sleep(tick.min(pause)).await;
    }
}

/// Samples the subflows of an accepted connection for its `mmsg status` entry every
/// [`SUBFLOW_CHECK`] and runs fast failover on them, forever. The dialling side creates and
/// re-creates the subflows, so this side only takes out the dead ones (no hold-down, no probes),
/// and only those whose RTO gave up, never the last one ([`Side::Accepting`]).
/// It must: our kernel also sends on every subflow of an accepted connection (our keepalives),
/// and a subflow whose path was cut stays established here
/// when the dialling side destroyed it, since its reset was lost on the cut path. Its
/// retransmission timer backs off to seconds; what the kernel scheduled onto it (a keepalive)
/// holds every later byte of the connection at the other end (MPTCP delivers in order), so after
/// the path came back the dialling side heard nothing for 3 s and closed a healthy connection
/// (the red `failover` CI run of 2026-11-27: both bulk connections of a branch lost at the
/// next cut). Destroying it here (once its RTO fired twice) makes the kernel send its data again
/// on the others.
pub(super) async fn watch_inbound(
    sh: &Shared,
    name: &str,
    fd: &OwnedFd,
    cc: &ConnCounters,
    mut reported: bool,
) {
    let mut failover = failover_enabled().then(Failover::default);
    let mut next_round = Instant::now();
    let (mut token, mut fb) = (0, false);
    loop {
        let mut tick = SUBFLOW_CHECK;
        if let Some(f) = failover.as_mut().filter(|_| !fb && token != 0) {
            let busy = check_health(sh, name, fd, token, f, Side::Accepting)
                .await
                .busy;
            tick = if busy { HEALTH_TICK } else { IDLE_TICK };
        }
        let now = Instant::now();
        if now < next_round {
            tokio::time::sleep(tick.min(next_round - now)).await;
            continue;
        }
        fb = check_fallback(sh, fd, name, &mut reported);
        let present = sys::mptcp_subflow_addrs(fd).unwrap_or_default();
        let info = sys::mptcp_info(fd).unwrap_or_default();
        token = info.token;
        let mut subflows = subflow_status(fd, &present);
        sh.stats.update_conn(name, |c| {
            keep_known(&mut subflows, &c.subflows);
            c.subflows = subflows;
            c.token = info.token;
            c.fallback = fb;
            c.bytes_retrans = info.bytes_retrans;
            c.frames_rx = cc.frames_rx.load(Ordering::Relaxed);
            c.bytes_rx = cc.bytes_rx.load(Ordering::Relaxed);
        });
        next_round = Instant::now() + SUBFLOW_CHECK;
        tokio::time::sleep(tick.min(SUBFLOW_CHECK)).await;
    }
}

/// A subflow whose TCP state this round could not read ([`subflow_status`]: a subflow came or
/// went between the two getsockopt calls) keeps its last known entry: otherwise every subflow
/// of the connection would read as down for a round (a false "subflow down" line for each,
/// then "up" again) and its byte counters as 0 (a counter reset to a scraper).
fn keep_known(now: &mut [SubflowStatus], before: &[SubflowStatus]) {
    for x in now.iter_mut().filter(|x| x.state.is_empty()) {
        if let Some(known) = before
            .iter()
            .find(|y| y.local == x.local && y.remote == x.remote && !y.state.is_empty())
        {
            *x = known.clone();
        }
    }
}

/// One line per subflow that came up or went away since the last round (state changes an
/// operator greps for: `conn`, `local`, `remote`).
fn log_subflow_changes(name: &str, before: &[SubflowStatus], now: &[SubflowStatus]) {
    let up = |l: &[SubflowStatus], x: &SubflowStatus| {
        l.iter()
            .any(|y| y.local == x.local && y.remote == x.remote && y.is_established())
    };
    for x in now.iter().filter(|x| x.is_established() && !up(before, x)) {
        info!(conn = name, local = %x.local, remote = %x.remote, "subflow up");
    }
    for x in before.iter().filter(|x| x.is_established() && !up(now, x)) {
        warn!(conn = name, local = %x.local, remote = %x.remote, "subflow down");
    }
}

/// Which end of the connection this gateway is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// We dialled it: we destroy dead subflows at once and probe their paths again.
    Dialling,
    /// The remote dialled it: we destroy only subflows the kernel's RTO gave up on, never the
    /// last one ([`accepted_side_doomed`]); the remote re-creates them.
    Accepting,
}

/// Tells the TUN task that outbound connection `key` has lost every subflow (`live == false`),
/// or has one again: while it has none its path group gives its flows to a healthy group
/// ([`mpa::gateway::Router::handle_conn_paths`]) instead of holding them until the keepalive
/// liveness closes the connection.
fn report_paths(sh: &Shared, key: ConnKey, name: &str, live: bool) {
    if live {
        info!(
            conn = name,
            "a subflow is established again: the path group may take flows"
        );
    } else {
        warn!(
            conn = name,
            "no established subflow left (fast failover took out every path): the path group \
             gives its flows to a healthy group"
        );
    }
    sh.send(TunEvent::Paths(ConnEvent { key, up: live }));
}

/// What one fast-failover round saw ([`check_health`]).
#[derive(Debug, Clone)]
struct Health {
    /// A subflow has data in flight (sample again soon).
    busy: bool,
    /// Whether an established subflow is left after the round's destroys; `None`: not judged
    /// this round (no userspace path manager, or the subflow set changed between the reads).
    live: Option<bool>,
    /// The subflows' `tcp_info` read this round (empty when not read), for the send budget.
    infos: Vec<sys::SubflowTcpInfo>,
}

/// One fast-failover round: samples every subflow and destroys the ones the detector declares
/// dead (on an accepted connection: [`Side::Accepting`]).
async fn check_health(
    sh: &Shared,
    name: &str,
    fd: &OwnedFd,
    token: u32,
    f: &mut Failover,
    side: Side,
) -> Health {
    let PathManagement::Userspace(pm) = &sh.pm else {
        return Health {
            busy: false,
            live: None,
            infos: Vec::new(),
        };
    };
    let (Ok(present), Ok(infos)) = (sys::mptcp_subflow_addrs(fd), sys::mptcp_subflow_tcpinfo(fd))
    else {
        // Not readable now: judge at the next tick.
        return Health {
            busy: false,
            live: None,
            infos: Vec::new(),
        };
    };
    if infos.len() != present.len() {
        // A subflow came or went between the two calls: judge at the next tick.
        return Health {
            busy: true,
            live: None,
            infos,
        };
    }
    let now = Instant::now();
    let busy = infos
        .iter()
        .any(|t| t.state == sys::TCP_ESTABLISHED && t.unacked > 0);
    note_port_queues(sh, &present, &infos);
    let path = |(l, r): &SubflowKey| (*l.ip(), *r.ip());
    let samples: Vec<(SubflowKey, HealthSample)> = present
        .iter()
        .zip(&infos)
        .map(|(&k, t)| {
            let slack = match side {
                Side::Dialling => f.hold.slack(now, path(&k)),
                Side::Accepting => 0,
            };
            (
                k,
                HealthSample {
                    slack,
                    ..health_sample(t)
                },
            )
        })
        .collect();
    let verdicts = f.stalls.handle_connection(now, &samples);
    if side == Side::Dialling {
        // A path whose new subflow established right after its hold-down was not dead: learn it.
        for ((k, s), v) in samples.iter().zip(&verdicts) {
            if s.established && *v == Verdict::Healthy && f.hold.on_established(now, path(k)) {
                info!(
                    conn = name, local = %k.0, remote = %k.1,
                    slack = f.hold.slack(now, path(k)),
                    "subflow re-established at once after its hold-down: the death was false \
                     (a congested path); its limits doubled"
                );
            }
        }
    }
    let take_out: Vec<bool> = match side {
        Side::Dialling => verdicts.iter().map(|&v| v == Verdict::Dead).collect(),
        Side::Accepting => {
            let s: Vec<HealthSample> = samples.iter().map(|(_, s)| *s).collect();
            accepted_side_doomed(&s, &verdicts)
        }
    };
    let mut doomed: Vec<SubflowKey> = Vec::new();
    let mut live = false;
    for ((&(l, r), t), out) in present.iter().zip(&infos).zip(take_out) {
        live |= !out && t.state == sys::TCP_ESTABLISHED;
        if out {
            if side == Side::Dialling {
                f.hold.on_dead(now, path(&(l, r)));
            }
            info!(
                conn = name, local = %l, remote = %r, unacked = t.unacked,
                srtt_us = t.rtt_us, rttvar_us = t.rttvar_us, backoff = t.backoff,
                last_ack_ms = t.last_ack_recv_ms, cwnd = t.cwnd, notsent = t.notsent_bytes,
                "subflow dead (no acknowledgement progress): destroying it"
            );
            doomed.push((l, r));
        }
    }
    f.stalls.retain(|k| present.contains(k));
    for (local, remote) in doomed {
        let req = SubflowDestroy {
            token,
            local,
            remote,
        };
        let pm = Arc::clone(pm);
        match tokio::task::spawn_blocking(move || pm.subflow_destroy(&req)).await {
            Ok(Ok(())) => debug!(conn = name, %local, %remote, "subflow destroyed"),
            Ok(Err(e)) => {
                warn!(conn = name, %local, %remote, error = %e, "subflow destroy refused")
            }
            Err(e) => warn!(error = %e, "subflow destroy task failed"),
        }
    }
    Health {
        busy,
        live: Some(live),
        infos,
    }
}

/// Notes each loaded subflow's queue under its local address for the `autorate` task
/// ([`Shared::port_queues`]; nothing when no port is under `[qos] autorate`).
fn note_port_queues(sh: &Shared, present: &[SubflowKey], infos: &[sys::SubflowTcpInfo]) {
    if !sh.autorate_on.load(Ordering::Relaxed) {
        return;
    }
    let mut board = sh
        .port_queues
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for ((l, _), t) in present.iter().zip(infos) {
        let q = mpa::autorate::subflow_queue(
            t.state == sys::TCP_ESTABLISHED,
            t.unacked,
            t.rtt_us,
            t.min_rtt_us,
        );
        if let Some(q) = q {
            board.note(*l.ip(), q);
        }
    }
}

/// Sets the socket's send budget ([`apply_send_budget`]) from its subflows' `tcp_info` just
/// read and what it holds for the data level alone ([`conn_report::held_bytes`]).
fn refresh_send_budget(sh: &Shared, fd: &OwnedFd, tcpinfo: &[sys::SubflowTcpInfo]) {
    if tcpinfo.is_empty() || sh.opts.send_budget.is_nan() || sh.opts.send_budget <= 0.0 {
        return;
    }
    let samples: Vec<SubflowSample> = tcpinfo.iter().map(sample).collect();
    let held = conn_report::held_bytes(sys::outq_bytes(fd).unwrap_or(0), &samples);
    apply_send_budget(fd, &sh.opts, &samples, held);
}

/// One subflow's `tcp_info` as the plain numbers [`mpa::conn_report`] decides on.
fn sample(t: &sys::SubflowTcpInfo) -> SubflowSample {
    SubflowSample {
        established: t.state == sys::TCP_ESTABLISHED,
        unacked: t.unacked,
        cwnd: t.cwnd,
        mss: t.snd_mss,
        srtt_us: t.rtt_us,
        notsent: t.notsent_bytes,
        min_rtt_us: t.min_rtt_us,
    }
}

/// The subflows of a connection with their TCP state. `MPTCP_TCPINFO` walks the subflows in the
/// same order as `MPTCP_SUBFLOW_ADDRS`; when a subflow came or went between the two calls (counts
/// differ) the TCP fields are left at 0 for this round.
pub(super) fn subflow_status(
    fd: &impl AsFd,
    present: &[(SocketAddrV4, SocketAddrV4)],
) -> Vec<SubflowStatus> {
    let infos = sys::mptcp_subflow_tcpinfo(fd).unwrap_or_default();
    let infos_match = infos.len() == present.len();
    present
        .iter()
        .enumerate()
        .map(|(i, (l, r))| {
            let t = if infos_match {
                infos.get(i).copied().unwrap_or_default()
            } else {
                sys::SubflowTcpInfo::default()
            };
            SubflowStatus {
                local: l.to_string(),
                remote: r.to_string(),
                state: if infos_match {
                    tcp_state_name(t.state).to_owned()
                } else {
                    String::new()
                },
                rtt_us: t.rtt_us,
                cwnd: t.cwnd,
                bytes_acked: t.bytes_acked,
                bytes_received: t.bytes_received,
                bytes_retrans: t.bytes_retrans,
            }
        })
        .collect()
}

fn tcp_state_name(s: u8) -> &'static str {
    match s {
        1 => SubflowStatus::ESTABLISHED,
        2 => "syn-sent",
        3 => "syn-recv",
        4 => "fin-wait1",
        5 => "fin-wait2",
        6 => "time-wait",
        7 => "closed",
        8 => "close-wait",
        9 => "last-ack",
        11 => "closing",
        _ => "unknown",
    }
}

/// The subflows that count as present for subflow management: established or still connecting.
/// A dead subflow can stay in the list (the initial one does until the connection closes), so
/// when the states are known, only live ones count; when they are not, all do (never duplicate).
fn live_subflows(
    fd: &impl AsFd,
    all: &[(SocketAddrV4, SocketAddrV4)],
) -> Vec<(SocketAddrV4, SocketAddrV4)> {
    let infos = sys::mptcp_subflow_tcpinfo(fd).unwrap_or_default();
    if infos.len() != all.len() {
        return all.to_vec();
    }
    all.iter()
        .zip(&infos)
        .filter(|(_, t)| t.state == sys::TCP_ESTABLISHED || t.state == sys::TCP_SYN_SENT)
        .map(|(p, _)| *p)
        .collect()
}

/// Requests a subflow for every wanted pair that has none, each pair with its own backoff; a
/// pair that fast failover took out recently (`hold`) is probed on the hold-down's schedule
/// instead (at once when its hold-down is over).
#[allow(clippy::too_many_arguments)]
async fn manage_subflows(
    sh: &Shared,
    name: &str,
    token: u32,
    present: &[(SocketAddrV4, SocketAddrV4)],
    pairs: &[(usize, Ipv4Addr, Ipv4Addr)],
    port: u16,
    retry: &mut BTreeMap<(Ipv4Addr, Ipv4Addr), (Instant, Duration)>,
    hold: Option<&PathHold<PathKey>>,
) {
    let PathManagement::Userspace(pm) = &sh.pm else {
        return;
    };
    if token == 0 {
        return;
    }
    let now = Instant::now();
    for &(k, local, remote) in pairs {
        if present
            .iter()
            .any(|(l, r)| *l.ip() == local && *r.ip() == remote)
        {
            retry.remove(&(local, remote));
            continue;
        }
        let entry = retry
            .entry((local, remote))
            .or_insert((now, SUBFLOW_RETRY_MIN));
        let failed_over = hold.filter(|h| h.recently_dead(now, (local, remote)));
        if let Some(h) = failed_over {
            if !h.may_probe(now, (local, remote)) {
                continue;
            }
            // Probe now; the probe timeout, not the backoff, paces the next one.
            *entry = (now, SUBFLOW_RETRY_MIN);
        }
        if now < entry.0 {
            continue;
        }
        let if_index = sh
            .config()
            .wan
            .get(k)
            .map(|w| sys::if_index(&w.name))
            .unwrap_or(0);
        let req = SubflowCreate {
            token,
            local_id: u8::try_from(k + 1).unwrap_or(u8::MAX),
            local,
            if_index,
            remote,
            remote_port: port,
        };
        let pm = Arc::clone(pm);
        let res = tokio::task::spawn_blocking(move || pm.subflow_create(&req)).await;
        match res {
            Ok(Ok(())) => {
                Stats::inc(&sh.stats.subflow_create_ok);
                debug!(conn = name, %local, %remote, "subflow requested");
            }
            Ok(Err(crate::mptcp_pm::MptcpPmError::Refused { errno, .. }))
                if errno == -libc::ENOTCONN =>
            {
                // The connection is not fully established yet (the peer's first DATA_ACK is
                // pending): ask again at the next check, without backing off.
                debug!(conn = name, %local, %remote, "connection not fully established yet");
                continue;
            }
            Ok(Err(e)) => {
                Stats::inc(&sh.stats.subflow_create_err);
                warn!(conn = name, %local, %remote, error = %e, "subflow request refused");
            }
            Err(e) => warn!(error = %e, "subflow request task failed"),
        }
        // Next try (if it still is missing then) after the current delay, doubling up to a cap.
        entry.0 = now + entry.1;
        entry.1 = (entry.1 * 2).min(SUBFLOW_RETRY_MAX);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use crate::tunnel::shared::example_config as config;

    #[test]
    fn a_round_without_states_keeps_the_last_known_ones() {
        let sf = |local: &str, state: &str, acked: u64| SubflowStatus {
            local: local.into(),
            remote: "198.18.20.2:8192".into(),
            state: state.into(),
            rtt_us: 0,
            cwnd: 0,
            bytes_acked: acked,
            bytes_received: 0,
            bytes_retrans: 0,
        };
        let before = vec![
            sf("198.18.10.2:1", SubflowStatus::ESTABLISHED, 500),
            sf("198.18.11.2:2", SubflowStatus::ESTABLISHED, 700),
        ];
        // This round's MPTCP_TCPINFO did not match: states unknown, counters 0; one subflow
        // is new.
        let mut now = vec![
            sf("198.18.10.2:1", "", 0),
            sf("198.18.11.2:2", "", 0),
            sf("198.18.11.2:3", "", 0),
        ];
        keep_known(&mut now, &before);
        assert_eq!(now[0], before[0]);
        assert_eq!(now[1], before[1]);
        assert_eq!(now[2], sf("198.18.11.2:3", "", 0));
        // The round logs nothing: no subflow went down.
        assert!(now.iter().take(2).all(SubflowStatus::is_established));
    }

    #[test]
    fn subflow_pairs_are_n_times_m() {
        let remote = [Ipv4Addr::new(198, 18, 20, 2), Ipv4Addr::new(198, 18, 21, 2)];
        let c = config(false);
        let p = wanted_pairs(&c, Class::TypeII, &remote);
        assert_eq!(p.len(), 4);
        assert_eq!(p[0], (0, Ipv4Addr::new(198, 18, 10, 2), remote[0]));
        assert_eq!(p[3], (1, Ipv4Addr::new(198, 18, 11, 2), remote[1]));
        assert_eq!(wanted_pairs(&c, Class::TypeI, &remote).len(), 4);
        assert!(wanted_pairs(&c, Class::TypeIII, &remote).is_empty());
        let l = config(true);
        let p1 = wanted_pairs(&l, Class::TypeI, &remote);
        assert_eq!(p1.len(), 2, "Type I only on the leased line: {p1:?}");
        assert!(p1.iter().all(|(k, _, _)| *k == 1));
        assert_eq!(wanted_pairs(&l, Class::TypeII, &remote).len(), 4);
    }
}
