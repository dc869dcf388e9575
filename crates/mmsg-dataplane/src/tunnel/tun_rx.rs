//! TUN → queues: the one task that reads TUN (batches into a shared arena, behind a reserved
//! frame header) and holds the [`Router`] (classifier, flow table, path group, framing in place,
//! the group-up rule); every packet it routes goes into its connection's
//! [`mpa::gateway::ConnCore`] ([`OutQueue`]). Connection up/down events, new weights and reloads
//! reach it as [`TunEvent`]s (a new config goes through [`Router::apply`], which keeps the flow
//! table), and it feeds the router the measured group rates ([`GroupRates`]) every
//! [`mpa::path_group::RATE_WINDOW`].

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use mpa::conn_report::GroupRates;
use mpa::framing::{FRAME_HEADER_LEN, VIRTIO_NET_HDR_LEN};
use mpa::gateway::{Event, PacketDrop, Router};
use mpa::{BranchId, PathGroupId};
use tokio::sync::mpsc;
use tracing::{debug, info};

use super::{ConnEvent, ConnKey, OutQueue, Shared, TunEvent};
use crate::stats::{ConnState, Stats};
use crate::tun::MAX_TUN_READ;

/// The TUN read arena: packets are split off it (`split_to`), so one allocation serves many reads.
/// Worst case held: the queues' bounds (mpa::queue::MAX_QUEUE_BYTES per class and connection).
const TUN_ARENA: usize = 1024 * 1024;
/// Packets read from TUN per wake-up before yielding (fairness with the other tasks).
const TUN_BATCH: usize = 64;

/// Reads TUN, routes every packet with the [`Router`] and queues it for its connection. Owns the
/// router; applies connection up/down events (its group-up rule decides the groups).
pub async fn tun_loop(
    sh: Arc<Shared>,
    mut events: mpsc::UnboundedReceiver<TunEvent>,
) -> anyhow::Result<()> {
    let mut router = Router::new(&sh.config(), sh.tun.offload());
    let mut queues = sh.queues();
    let mut arena = BytesMut::with_capacity(TUN_ARENA);
    let mut next_expiry = Instant::now();
    let mut rates = GroupRates::default();
    let mut tick = tokio::time::interval(mpa::path_group::RATE_WINDOW);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        while let Ok(ev) = events.try_recv() {
            tun_event(&sh, &mut router, &mut queues, ev);
        }
        arena.reserve(FRAME_HEADER_LEN + MAX_TUN_READ);
        arena.put_bytes(0, FRAME_HEADER_LEN);
        let first = tokio::select! {
            r = sh.tun.read_into(&mut arena) => Some(r),
            ev = events.recv() => {
                if let Some(ev) = ev {
                    tun_event(&sh, &mut router, &mut queues, ev);
                }
                None
            }
            _ = tick.tick() => {
                let sent = queues
                    .iter()
                    .map(|(k, oq)| (k.branch, k.group, oq.sent_bytes.load(Ordering::Relaxed)));
                for (b, g, rate) in rates.handle_sent(Instant::now(), sent) {
                    router.set_group_rate(b, g, rate);
                }
                for ((b, g), delay_us) in group_delays(&sh.stats) {
                    router.set_group_delay(b, g, delay_us);
                }
                None
            }
        };
        let Some(first) = first else {
            arena.clear();
            continue;
        };
        let mut result = first.map(Some);
        let mut n_read = 0;
        loop {
            match result {
                Ok(Some(n)) => {
                    let pkt = arena.split_to(FRAME_HEADER_LEN + n);
                    handle_tun_packet(&sh, &queues, &mut router, pkt);
                }
                Ok(None) => {
                    arena.clear();
                    break;
                }
                Err(e) => {
                    arena.clear();
                    if e.kind() != io::ErrorKind::WouldBlock {
                        // Counted per packet, never fatal; pause so a persistent error (device
                        // gone) does not spin.
                        debug!(error = %e, "TUN read failed");
                        Stats::inc(&sh.stats.tun_read_errors);
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    break;
                }
            }
            n_read += 1;
            if n_read >= TUN_BATCH {
                break;
            }
            arena.reserve(FRAME_HEADER_LEN + MAX_TUN_READ);
            arena.put_bytes(0, FRAME_HEADER_LEN);
            result = sh.tun.try_read_into(&mut arena);
        }
        let now = Instant::now();
        if now >= next_expiry {
            router.handle_timeout(now);
            next_expiry = router
                .poll_timeout()
                .unwrap_or(now + Duration::from_secs(1))
                .max(now + Duration::from_millis(100));
        }
    }
}

fn tun_event(
    sh: &Shared,
    router: &mut Router,
    queues: &mut BTreeMap<ConnKey, Arc<OutQueue>>,
    ev: TunEvent,
) {
    let mut events = Vec::new();
    match ev {
        TunEvent::Conn(ConnEvent { key, up }) => {
            events.extend(if up {
                router.handle_conn_up(key)
            } else {
                router.handle_conn_down(key)
            });
        }
        TunEvent::Paths(ConnEvent { key, up }) => {
            events.extend(router.handle_conn_paths(key, up));
        }
        TunEvent::Weights(list) => {
            let plan = router.apply(&sh.config(), &mut events);
            debug!(
                published = list.len(),
                changed = plan.weights.len(),
                "weights applied"
            );
            info!("path group weights updated in place");
        }
        TunEvent::LowDelay(flow) => {
            let kept = router.prefer_low_delay(Instant::now(), flow);
            debug!(
                ?flow,
                kept, "reverse of a resequenced flow: lowest-delay group"
            );
        }
        TunEvent::Reload => {
            *queues = sh.queues();
            router.apply(&sh.config(), &mut events);
            info!(
                connections = queues.len(),
                "router reconfigured for the new config (flow table kept)"
            );
        }
    }
    for ev in events {
        if let Event::Group { branch, group, up } = ev {
            info!(
                branch = branch.get(),
                pg = group.get(),
                up,
                "path group state"
            );
        }
    }
}

fn handle_tun_packet(
    sh: &Shared,
    queues: &BTreeMap<ConnKey, Arc<OutQueue>>,
    router: &mut Router,
    pkt: BytesMut,
) {
    let now = Instant::now();
    let st = &sh.stats;
    let vnet = if sh.tun.offload() {
        VIRTIO_NET_HDR_LEN
    } else {
        0
    };
    let ip_len = pkt.len().saturating_sub(FRAME_HEADER_LEN + vnet);
    let res = router.handle_tun_packet(now, pkt).and_then(|out| {
        if out.conn.class != out.packet.class() {
            Stats::inc(&st.sparse_lane_packets);
        }
        let oq = queues.get(&out.conn).ok_or(PacketDrop::NoConnection)?;
        let mut core = oq.core.lock().map_err(|_| PacketDrop::NoConnection)?;
        core.enqueue(now, out.packet)?;
        drop(core);
        oq.notify.notify_one();
        Ok(())
    });
    let counter = match res {
        Ok(()) => None,
        Err(PacketDrop::Malformed) => {
            Stats::inc(&st.drop_malformed);
            return;
        }
        Err(PacketDrop::External) => Some(&st.drop_external),
        Err(PacketDrop::NoGroupUp) => Some(&st.drop_no_group),
        Err(PacketDrop::QueueFull) => Some(&st.drop_queue_full),
        Err(PacketDrop::Codel) => Some(&st.drop_codel),
        Err(PacketDrop::Encode) => Some(&st.drop_encode),
        Err(_) => Some(&st.drop_no_connection),
    };
    Stats::inc(&st.tun_rx_packets);
    Stats::add(&st.tun_rx_bytes, ip_len as u64);
    if let Some(c) = counter {
        Stats::inc(c);
    }
}

/// Per path group (remote branch, group) of our outbound connections that are up: the lowest
/// smoothed RTT (µs) of their established subflows, as `mmsg status` last sampled them (once a
/// second). A small packet (an ACK) on such a connection takes about that subflow: the MPTCP
/// scheduler sends on the subflow that delivers soonest. Groups with no sample are left out.
fn group_delays(stats: &Stats) -> BTreeMap<(BranchId, PathGroupId), u32> {
    let mut out: BTreeMap<(BranchId, PathGroupId), u32> = BTreeMap::new();
    stats.for_each_conn(|c| {
        if c.direction != "out" || c.state != ConnState::Up {
            return;
        }
        let (Ok(b), Ok(g)) = (
            BranchId::new(c.remote_branch),
            PathGroupId::new(c.path_group),
        ) else {
            return;
        };
        let Some(rtt) = c
            .subflows
            .iter()
            .filter(|sf| sf.is_established() && sf.rtt_us > 0)
            .map(|sf| sf.rtt_us)
            .min()
        else {
            return;
        };
        out.entry((b, g))
            .and_modify(|d| *d = (*d).min(rtt))
            .or_insert(rtt);
    });
    out
}
