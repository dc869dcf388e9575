//! TUN → queues: the one task that reads TUN (batches into a shared arena, behind a reserved
//! frame header), routes every packet with the [`Agent`] (classifier, flow table, path group) and
//! queues it for its connection ([`OutQueue`]). It owns the agent: connection up/down events, new
//! weights and reloads reach it as [`TunEvent`]s, and it feeds it the measured group rates
//! ([`GroupRates`]) every [`mpa::path_group::RATE_WINDOW`].

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, BytesMut};
use mpa::agent::{Agent, RouteError};
use mpa::conn_report::GroupRates;
use mpa::framing::{FrameType, FRAME_HEADER_LEN, VIRTIO_NET_HDR_LEN};
use mpa::queue::DropReason;
use mpa::{BranchId, PathGroupId};
use tokio::sync::mpsc;
use tracing::{debug, info, trace};

use super::{ConnEvent, ConnKey, OutQueue, Shared, TunEvent, CLASSES};
use crate::stats::Stats;
use crate::tun::MAX_TUN_READ;

/// The TUN read arena: packets are split off it (`split_to`), so one allocation serves many reads.
/// Worst case held: the queues' bounds (mpa::queue::MAX_QUEUE_BYTES per class and connection).
const TUN_ARENA: usize = 1024 * 1024;
/// Packets read from TUN per wake-up before yielding (fairness with the other tasks).
const TUN_BATCH: usize = 64;

/// Reads TUN, routes every packet with the agent and queues it for its connection. Owns the agent;
/// applies connection up/down events (a group is up when all its class connections are).
pub async fn tun_loop(
    sh: Arc<Shared>,
    mut events: mpsc::UnboundedReceiver<TunEvent>,
) -> anyhow::Result<()> {
    let mut agent = Agent::new(&sh.config());
    let mut queues = sh.queues();
    let mut up: BTreeSet<ConnKey> = BTreeSet::new();
    let mut arena = BytesMut::with_capacity(TUN_ARENA);
    let mut next_expiry = Instant::now();
    let mut rates = GroupRates::default();
    let mut tick = tokio::time::interval(mpa::path_group::RATE_WINDOW);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        while let Ok(ev) = events.try_recv() {
            tun_event(&sh, &mut agent, &mut queues, &mut up, ev);
        }
        arena.reserve(FRAME_HEADER_LEN + MAX_TUN_READ);
        arena.put_bytes(0, FRAME_HEADER_LEN);
        let first = tokio::select! {
            r = sh.tun.read_into(&mut arena) => Some(r),
            ev = events.recv() => {
                if let Some(ev) = ev {
                    tun_event(&sh, &mut agent, &mut queues, &mut up, ev);
                }
                None
            }
            _ = tick.tick() => {
                let sent = queues
                    .iter()
                    .map(|((b, g, _), oq)| (*b, *g, oq.sent_bytes.load(Ordering::Relaxed)));
                for (b, g, rate) in rates.handle_sent(Instant::now(), sent) {
                    agent.set_group_rate(b, g, rate);
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
                    handle_tun_packet(&sh, &queues, &mut agent, pkt);
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
            agent.handle_timeout(now);
            next_expiry = agent
                .poll_timeout()
                .unwrap_or(now + Duration::from_secs(1))
                .max(now + Duration::from_millis(100));
        }
    }
}

fn tun_event(
    sh: &Shared,
    agent: &mut Agent,
    queues: &mut BTreeMap<ConnKey, Arc<OutQueue>>,
    up: &mut BTreeSet<ConnKey>,
    ev: TunEvent,
) {
    match ev {
        TunEvent::Conn(ev) => apply_event(agent, up, ev),
        TunEvent::Weights(list) => {
            for (b, g, w) in list {
                agent.set_group_weight(b, g, w);
            }
            info!("path group weights updated in place");
        }
        TunEvent::Reload => {
            *queues = sh.queues();
            *agent = Agent::new(&sh.config());
            up.retain(|k| queues.contains_key(k));
            let groups: BTreeSet<(BranchId, PathGroupId)> =
                queues.keys().map(|(b, g, _)| (*b, *g)).collect();
            for (b, g) in groups {
                let group_up = CLASSES.iter().all(|c| up.contains(&(b, g, *c)));
                agent.set_group_up(b, g, group_up);
            }
            info!(
                connections = queues.len(),
                "agent rebuilt for the new config"
            );
        }
    }
}

fn apply_event(agent: &mut Agent, up: &mut BTreeSet<ConnKey>, ev: ConnEvent) {
    if ev.up {
        up.insert(ev.key);
    } else {
        up.remove(&ev.key);
    }
    let (b, g, _) = ev.key;
    let group_up = CLASSES.iter().all(|c| up.contains(&(b, g, *c)));
    if agent.set_group_up(b, g, group_up) {
        info!(
            branch = b.get(),
            pg = g.get(),
            up = group_up,
            "path group state"
        );
    }
}

fn handle_tun_packet(
    sh: &Shared,
    queues: &BTreeMap<ConnKey, Arc<OutQueue>>,
    agent: &mut Agent,
    mut pkt: BytesMut,
) {
    let now = Instant::now();
    let st = &sh.stats;
    let mut ftype = FrameType::Ip;
    if sh.tun.offload() {
        let plain = pkt
            .get(FRAME_HEADER_LEN..FRAME_HEADER_LEN + VIRTIO_NET_HDR_LEN)
            .is_some_and(|v| v.iter().all(|&b| b == 0));
        if plain {
            // No checksum or GSO work pending: drop the virtio header, send a plain IP frame (the
            // header's last 12 bytes of room become the frame header's).
            pkt.advance(VIRTIO_NET_HDR_LEN);
        } else {
            ftype = FrameType::IpVirtio;
        }
    }
    let ip_at = if ftype == FrameType::IpVirtio {
        FRAME_HEADER_LEN + VIRTIO_NET_HDR_LEN
    } else {
        FRAME_HEADER_LEN
    };
    let Some(ip) = pkt.get(ip_at..) else {
        Stats::inc(&st.drop_malformed);
        return;
    };
    Stats::inc(&st.tun_rx_packets);
    Stats::add(&st.tun_rx_bytes, ip.len() as u64);
    let route = match agent.route(now, ip) {
        Ok(r) => r,
        Err(RouteError::Malformed(e)) => {
            trace!(error = %e, "malformed packet from TUN");
            Stats::inc(&st.drop_malformed);
            return;
        }
        Err(RouteError::External) => {
            Stats::inc(&st.drop_external);
            return;
        }
        Err(RouteError::NoGroupUp(_)) => {
            Stats::inc(&st.drop_no_group);
            return;
        }
    };
    let Some(oq) = queues.get(&(route.branch, route.group, route.class)) else {
        Stats::inc(&st.drop_no_connection);
        return;
    };
    let len = pkt.len() - FRAME_HEADER_LEN;
    let res = match oq.q.lock() {
        Ok(mut q) => q.enqueue(
            now,
            route.class,
            (pkt, ftype, route.seq),
            len,
            route.info.ect(),
        ),
        Err(_) => return,
    };
    match res {
        Ok(()) => oq.notify.notify_one(),
        Err((_, DropReason::NotTunnelled)) => Stats::inc(&st.drop_external),
        Err(_) => Stats::inc(&st.drop_queue_full),
    }
}
