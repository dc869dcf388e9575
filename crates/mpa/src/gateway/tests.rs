//! Unit tests of the gateway core's parts (the pair simulation is `tests/gateway_pair.rs`).

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use super::*;
use crate::framing::{Deframer, FrameHeader, FrameType, FRAME_HEADER_LEN, VIRTIO_NET_HDR_LEN};
use crate::keepalive::{DEAD_AFTER, KEEPALIVE_INTERVAL};

/// The example config with the sparse lane off: these tests route by class (the lane's own
/// test turns it on).
fn config() -> Config {
    let mut c = config_with_lane();
    c.qos.sparse_lane_kbit = Some(0);
    c
}

/// The example config (no `rate_mbit`: the lane is off by default) with the lane on.
fn config_with_lane() -> Config {
    let mut c = example();
    c.qos.sparse_lane_kbit = Some(256);
    c
}

fn example() -> Config {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/mmsg-branch1.toml"
    ))
    .unwrap();
    Config::parse(&text).unwrap()
}

fn key(group: u8, class: Class) -> ConnKey {
    ConnKey {
        branch: BranchId::new(2).unwrap(),
        group: PathGroupId::new(group).unwrap(),
        class,
        index: 0,
    }
}

/// A 28-byte UDP packet from branch 1 to branch 2.
fn udp(sport: u16) -> Vec<u8> {
    let mut p = vec![0u8; 28];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&28u16.to_be_bytes());
    p[9] = 17;
    p[12..16].copy_from_slice(&[198, 19, 1, 10]);
    p[16..20].copy_from_slice(&[198, 19, 2, 10]);
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p
}

/// A TUN read: frame header room, the virtio header when given, the packet.
fn tun_read(vnet: Option<[u8; VIRTIO_NET_HDR_LEN]>, p: &[u8]) -> BytesMut {
    let mut b = BytesMut::zeroed(FRAME_HEADER_LEN);
    if let Some(v) = vnet {
        b.extend_from_slice(&v);
    }
    b.extend_from_slice(p);
    b
}

fn decode(frame: BytesMut) -> crate::framing::Frame {
    let mut buf = frame;
    Deframer::new().decode(&mut buf).unwrap().unwrap()
}

#[test]
fn a_group_is_up_only_while_both_class_connections_are() {
    let mut r = Router::new(&config(), false);
    let (b2, g0) = (BranchId::new(2).unwrap(), PathGroupId::new(0).unwrap());
    assert_eq!(r.handle_conn_up(key(0, Class::TypeI)), [], "half a group");
    assert_eq!(
        r.handle_tun_packet(Instant::now(), tun_read(None, &udp(1)))
            .map(|o| o.conn),
        Err(PacketDrop::NoGroupUp)
    );
    let up = Event::Group {
        branch: b2,
        group: g0,
        up: true,
    };
    assert_eq!(r.handle_conn_up(key(0, Class::TypeII)), [up]);
    assert_eq!(r.handle_conn_up(key(0, Class::TypeII)), [], "no change");
    let out = r
        .handle_tun_packet(Instant::now(), tun_read(None, &udp(1)))
        .unwrap();
    assert_eq!(out.conn, key(0, Class::TypeII));
    let down = Event::Group {
        branch: b2,
        group: g0,
        up: false,
    };
    assert_eq!(r.handle_conn_down(key(0, Class::TypeI)), [down]);
    assert_eq!(r.handle_conn_up(key(9, Class::TypeI)), [], "not configured");
    assert_eq!(r.counters().drops(PacketDrop::NoGroupUp), 1);
    assert_eq!(r.counters().tun_rx_packets, 2);
}

/// Fast failover took out every subflow of one class connection of group 0 (every member path
/// of the group crosses a dead port): group 0 goes down while group 1 is fully up, so its flows
/// move on their next packet, not after the 3 s liveness; they stay on group 1 when a path is
/// back. With no healthy group to go to, a pathless group stays up.
#[test]
fn a_group_whose_connection_lost_every_subflow_gives_its_flows_to_a_live_group() {
    let t0 = Instant::now();
    let (b2, g0, g1) = (
        BranchId::new(2).unwrap(),
        PathGroupId::new(0).unwrap(),
        PathGroupId::new(1).unwrap(),
    );
    let ev = |group, up| Event::Group {
        branch: b2,
        group,
        up,
    };
    let mut r = Router::new(&config(), false);
    for g in [0, 1] {
        r.handle_conn_up(key(g, Class::TypeI));
        r.handle_conn_up(key(g, Class::TypeII));
    }
    let group = |r: &mut Router, sport: u16| {
        r.handle_tun_packet(t0, tun_read(None, &udp(sport)))
            .unwrap()
            .conn
            .group
    };
    // Flows over both groups (the round robin); remember one on group 0.
    let on_g0 = (1..=8u16)
        .find(|&p| group(&mut r, p) == g0)
        .expect("a flow on group 0");
    let on_g1 = (1..=8u16)
        .find(|&p| group(&mut r, p) == g1)
        .expect("a flow on group 1");

    assert_eq!(
        r.handle_conn_paths(key(0, Class::TypeII), false),
        [ev(g0, false)]
    );
    assert!(r.is_conn_pathless(key(0, Class::TypeII)));
    assert!(r.is_conn_up(key(0, Class::TypeII)), "the connection stays");
    assert_eq!(
        r.handle_conn_paths(key(0, Class::TypeII), false),
        [],
        "no change"
    );
    assert_eq!(group(&mut r, on_g0), g1, "moved at once");
    assert_eq!(group(&mut r, on_g1), g1);
    for p in 20..28 {
        assert_eq!(group(&mut r, p), g1, "new flows avoid the pathless group");
    }

    // Group 1 loses its paths too: no healthy group left, both are up (packets wait in the
    // connections instead of being dropped at the router).
    let both_up = r.handle_conn_paths(key(1, Class::TypeI), false);
    assert_eq!(both_up, [ev(g0, true)]);
    assert_eq!(
        group(&mut r, on_g0),
        g1,
        "a flow moves only when its group goes down"
    );
    assert_eq!(r.counters().drops(PacketDrop::NoGroupUp), 0);

    // Group 0's paths come back: group 1 (still pathless) goes down, its flows move to group 0.
    assert_eq!(
        r.handle_conn_paths(key(0, Class::TypeII), true),
        [ev(g1, false)]
    );
    assert_eq!(group(&mut r, on_g1), g0);
    // Group 1's connection is re-established (a new establishment has live subflows): up again.
    assert_eq!(r.handle_conn_down(key(1, Class::TypeI)), []);
    assert_eq!(r.handle_conn_up(key(1, Class::TypeI)), [ev(g1, true)]);
    assert!(!r.is_conn_pathless(key(1, Class::TypeI)));
    assert_eq!(group(&mut r, on_g1), g0, "moved flows stay where they went");
    // Not up, not configured: ignored.
    r.handle_conn_down(key(1, Class::TypeI));
    assert_eq!(r.handle_conn_paths(key(1, Class::TypeI), false), []);
    assert_eq!(r.handle_conn_paths(key(9, Class::TypeI), false), []);
}

#[test]
fn offload_drops_an_idle_virtio_header_and_keeps_a_busy_one() {
    let mut r = Router::new(&config(), true);
    r.handle_conn_up(key(0, Class::TypeI));
    r.handle_conn_up(key(0, Class::TypeII));
    let now = Instant::now();
    let plain = r
        .handle_tun_packet(now, tun_read(Some([0; 10]), &udp(1)))
        .unwrap();
    let f = decode(plain.packet.frame);
    assert_eq!(f.header.frame_type, FrameType::Ip);
    assert_eq!(&f.payload[..], &udp(1)[..]);
    let mut gso = [0u8; VIRTIO_NET_HDR_LEN];
    gso[0] = 1; // VIRTIO_NET_HDR_F_NEEDS_CSUM
    let busy = r
        .handle_tun_packet(now, tun_read(Some(gso), &udp(1)))
        .unwrap();
    assert_eq!(busy.packet.ip_at, FRAME_HEADER_LEN + VIRTIO_NET_HDR_LEN);
    let f = decode(busy.packet.frame);
    assert_eq!(f.header.frame_type, FrameType::IpVirtio);
    assert_eq!(f.ip_packet(), Some((Some(&gso[..]), &udp(1)[..])));
    // A read shorter than a virtio header is malformed.
    assert_eq!(
        r.handle_tun_packet(now, BytesMut::zeroed(FRAME_HEADER_LEN + 3))
            .map(|o| o.conn),
        Err(PacketDrop::Malformed)
    );
}

fn ip_frame(ty: FrameType, vnet: Option<[u8; VIRTIO_NET_HDR_LEN]>) -> crate::framing::Frame {
    let mut payload = Vec::new();
    if let Some(v) = vnet {
        payload.extend_from_slice(&v);
    }
    payload.extend_from_slice(&udp(7));
    crate::framing::Frame {
        header: FrameHeader {
            frame_type: ty,
            class: Class::TypeII,
            seq: None,
            payload_len: payload.len() as u32,
        },
        payload: Bytes::from(payload),
    }
}

#[test]
fn the_tun_format_follows_the_local_device() {
    let now = Instant::now();
    let mut gso = [0u8; VIRTIO_NET_HDR_LEN];
    gso[0] = 1;
    // With offload: always a virtio header, zero for plain packets.
    let mut rx = Receiver::new(Some(Default::default()), true);
    rx.handle_frame(now, 1, ip_frame(FrameType::Ip, None));
    rx.handle_frame(now, 1, ip_frame(FrameType::IpVirtio, Some(gso)));
    let w = rx.poll_tun_write().unwrap();
    assert_eq!(
        (w.vnet.as_deref(), &w.ip[..]),
        (Some(&[0u8; 10][..]), &udp(7)[..])
    );
    let w = rx.poll_tun_write().unwrap();
    assert_eq!(
        (w.vnet.as_deref(), &w.ip[..]),
        (Some(&gso[..]), &udp(7)[..])
    );
    // Without: an idle header is dropped, a busy one cannot be written.
    let mut rx = Receiver::new(Some(Default::default()), false);
    rx.handle_frame(now, 1, ip_frame(FrameType::IpVirtio, Some([0; 10])));
    rx.handle_frame(now, 1, ip_frame(FrameType::IpVirtio, Some(gso)));
    let w = rx.poll_tun_write().unwrap();
    assert_eq!((w.vnet, &w.ip[..]), (None, &udp(7)[..]));
    assert_eq!(rx.poll_tun_write(), None);
    assert_eq!(rx.counters().drops(PacketDrop::VirtioUnsupported), 1);
    assert_eq!(rx.counters().tun_tx_packets, 1);
}

#[test]
fn an_idle_connection_sends_keepalives_and_a_silent_one_dies_with_its_queue() {
    let t0 = Instant::now();
    let mut gw = Gateway::new(&config(), false);
    let id = ConnId::outbound(key(0, Class::TypeII));
    assert!(gw.poll_transmit(id, t0).is_none(), "down: nothing to send");
    for class in CLASSES {
        gw.handle_conn_up(ConnId::outbound(key(0, class)), t0);
    }
    assert_eq!(
        gw.poll_event(),
        Some(Event::Group {
            branch: key(0, Class::TypeI).branch,
            group: key(0, Class::TypeI).group,
            up: true
        })
    );
    // Idle for a second: one keepalive per connection, then nothing.
    let t1 = t0 + KEEPALIVE_INTERVAL;
    assert_eq!(gw.poll_timeout(), Some(t1));
    gw.handle_timeout(t1);
    let ka = gw.poll_transmit(id, t1).unwrap();
    assert!(ka.keepalive);
    assert_eq!(decode(ka.frame).header.frame_type, FrameType::Keepalive);
    assert!(gw.poll_transmit(id, t1).is_none());
    // Data queued on it, the peer silent: dead after DEAD_AFTER, its packets counted, the group
    // down.
    for sport in 1..=4 {
        gw.handle_tun_packet(t1, tun_read(None, &udp(sport)))
            .unwrap();
    }
    let t3 = t0 + DEAD_AFTER;
    gw.handle_timeout(t3);
    let evs: Vec<Event> = std::iter::from_fn(|| gw.poll_event()).collect();
    let type1 = ConnId::outbound(key(0, Class::TypeI));
    let down = Event::Group {
        branch: type1.key.branch,
        group: type1.key.group,
        up: false,
    };
    assert_eq!(evs, vec![Event::Close(type1), down, Event::Close(id)]);
    let c = gw.counters();
    assert_eq!(c.drops(PacketDrop::ConnClosed), 4);
    assert_eq!(c.dead, 2, "both connections were silent");
    assert_eq!(gw.conn(id).unwrap().queued_bytes(), 0);
    assert_eq!(
        gw.handle_tun_packet(t3 + Duration::from_millis(1), tun_read(None, &udp(1))),
        Err(PacketDrop::NoGroupUp)
    );
}

/// The stateless decision the driver's readers make without the receiver's lock: no copy, the
/// same outcome as the [`Receiver`]'s.
#[test]
fn tun_write_decides_virtio_or_plain_without_state() {
    let frame = |t, payload: Vec<u8>| Frame {
        header: FrameHeader {
            frame_type: t,
            class: Class::TypeII,
            seq: None,
            payload_len: payload.len() as u32,
        },
        payload: Bytes::from(payload),
    };
    let ip = udp(7);
    let mut virtio = vec![0u8; VIRTIO_NET_HDR_LEN];
    virtio.extend_from_slice(&ip);
    let mut gso = virtio.clone();
    gso[0] = 1;

    // Plain frame: a zero header with offload, none without.
    let w = tun_write(frame(FrameType::Ip, ip.clone()), true).unwrap();
    assert_eq!(w.vnet.as_deref(), Some(&[0u8; VIRTIO_NET_HDR_LEN][..]));
    assert_eq!(&w.ip[..], &ip[..]);
    let w = tun_write(frame(FrameType::Ip, ip.clone()), false).unwrap();
    assert_eq!((w.vnet, &w.ip[..]), (None, &ip[..]));
    // Virtio frame: header kept with offload; dropped when it asks for nothing; refused otherwise.
    let w = tun_write(frame(FrameType::IpVirtio, gso.clone()), true).unwrap();
    assert_eq!(w.vnet.as_deref(), Some(&gso[..VIRTIO_NET_HDR_LEN]));
    assert_eq!(&w.ip[..], &ip[..]);
    let w = tun_write(frame(FrameType::IpVirtio, virtio), false).unwrap();
    assert_eq!((w.vnet, &w.ip[..]), (None, &ip[..]));
    assert_eq!(
        tun_write(frame(FrameType::IpVirtio, gso), false),
        Err(PacketDrop::VirtioUnsupported)
    );
    assert_eq!(
        tun_write(frame(FrameType::IpVirtio, vec![0; 3]), true),
        Err(PacketDrop::Malformed)
    );
    assert_eq!(
        tun_write(frame(FrameType::Keepalive, Vec::new()), true),
        Err(PacketDrop::Malformed)
    );
}

/// Without `[striping]` a receiver passes sequenced frames in arrival order (the baseline "without
/// the resequencer"); with it, it holds a frame that arrives before its predecessor.
#[test]
fn sequenced_frames_are_resequenced_only_with_striping() {
    use crate::framing::{encode_frame, Deframer, FrameType};
    let t0 = Instant::now();
    let frame = |seq: u32| {
        let mut p = vec![0u8; 28];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&28u16.to_be_bytes());
        p[8] = 64;
        p[9] = 17;
        p[12..16].copy_from_slice(&[198, 19, 1, 10]);
        p[16..20].copy_from_slice(&[198, 19, 2, 10]);
        p[20..22].copy_from_slice(&4000u16.to_be_bytes());
        p[22..24].copy_from_slice(&5001u16.to_be_bytes());
        let mut buf = BytesMut::new();
        encode_frame(FrameType::Ip, Class::TypeII, Some(seq), &p, &mut buf).unwrap();
        Deframer::default().decode(&mut buf).unwrap().unwrap()
    };
    for (params, released_before_gap_fills) in [(None, 2), (Some(Default::default()), 1)] {
        let mut rx = Receiver::new(params, false);
        rx.handle_frame(t0, 1, frame(0));
        rx.handle_frame(t0, 1, frame(2));
        let mut n = 0;
        while rx.poll_tun_write().is_some() {
            n += 1;
        }
        assert_eq!(n, released_before_gap_fills, "params {params:?}");
    }
}

/// The router hashes each packet's 5-tuple once with its per-gateway key: one flow, one hash;
/// another port, another hash; another gateway (random key), another hash.
#[test]
fn the_router_hashes_the_flow_with_its_key() {
    let hasher = crate::queue::FlowHasher::with_key([1, 2]);
    let mut r = Router::with_flow_hasher(&config(), false, hasher);
    r.handle_conn_up(key(0, Class::TypeI));
    r.handle_conn_up(key(0, Class::TypeII));
    let now = Instant::now();
    let hash = |r: &mut Router, sport| {
        r.handle_tun_packet(now, tun_read(None, &udp(sport)))
            .unwrap()
            .packet
            .flow()
    };
    let a = hash(&mut r, 1);
    assert_eq!(hash(&mut r, 1), a);
    assert_ne!(hash(&mut r, 2), a);
    let flow = crate::classifier::parse(&udp(1)).unwrap().flow;
    assert_eq!(a, hasher.hash(&flow));
    let mut other = Router::new(&config(), false);
    other.handle_conn_up(key(0, Class::TypeI));
    other.handle_conn_up(key(0, Class::TypeII));
    assert_ne!(hash(&mut other, 1), a, "random keys differ per gateway");
}

/// At the queue's bounds a connection drops from the fattest flow, counts those drops as
/// `QueueFull`, and queues a new flow's packet; its flow counters show it.
#[test]
fn a_full_connection_queue_drops_from_the_fat_flow() {
    let mut r =
        Router::with_flow_hasher(&config(), false, crate::queue::FlowHasher::with_key([3, 4]));
    r.handle_conn_up(key(0, Class::TypeI));
    r.handle_conn_up(key(0, Class::TypeII));
    let now = Instant::now();
    let mut c = ConnCore::outbound(key(0, Class::TypeII), crate::queue::AqmConfig::default());
    for _ in 0..crate::queue::MAX_QUEUE_PACKETS {
        let out = r.handle_tun_packet(now, tun_read(None, &udp(1))).unwrap();
        c.enqueue(now, out.packet).unwrap();
    }
    assert_eq!(c.counters().drops(PacketDrop::QueueFull), 0);
    let out = r.handle_tun_packet(now, tun_read(None, &udp(2))).unwrap();
    c.enqueue(now, out.packet).unwrap();
    let s = c.queue_stats(Class::TypeII);
    assert_eq!(
        s.overflow_drops,
        crate::queue::OVERFLOW_BATCH_PACKETS as u64
    );
    assert_eq!(c.counters().drops(PacketDrop::QueueFull), s.overflow_drops);
    let f = c.flow_stats(Class::TypeII);
    assert_eq!((f.active_flows, f.overflow_batches), (2, 1), "{f:?}");
    // The sparse flow's packet goes out right after the fat flow's first quantum (it came first
    // to the new-flows list), not behind its 960 remaining packets.
    c.handle_up(now, 1);
    let quantum_packets = crate::queue::QUANTUM_BYTES as usize / 28 + 1;
    let n = (1..)
        .find(|_| decode(c.poll_transmit(now).unwrap().frame).payload == udp(2))
        .unwrap();
    assert_eq!(n, quantum_packets + 1);
    assert_eq!(c.flow_stats(Class::TypeII).new_flow_dequeues, n as u64);
    assert_eq!(
        c.queue_stats(Class::TypeI),
        crate::queue::ClassStats::default()
    );
}

/// The reverse of a flow the receiver resequences (a striped TCP flow's ACKs) is kept on the
/// group with the lowest measured delay: the receiver reports the flow once, when it starts on
/// it; the router then puts the reverse there, moves it when another group becomes lower by more
/// than the margin, and leaves other flows to the round robin.
#[test]
fn the_reverse_of_a_resequenced_flow_takes_the_lowest_delay_group() {
    use crate::framing::encode_frame;
    let t0 = Instant::now();
    let (b2, g0, g1) = (
        BranchId::new(2).unwrap(),
        PathGroupId::new(0).unwrap(),
        PathGroupId::new(1).unwrap(),
    );
    // A sequenced frame of branch 2's flow 198.19.2.10:0 -> 198.19.1.10:4000.
    let from_peer = |seq: u32| {
        let mut p = udp(0);
        p[12..16].copy_from_slice(&[198, 19, 2, 10]);
        p[16..20].copy_from_slice(&[198, 19, 1, 10]);
        p[22..24].copy_from_slice(&4000u16.to_be_bytes());
        let mut buf = BytesMut::new();
        encode_frame(FrameType::Ip, Class::TypeII, Some(seq), &p, &mut buf).unwrap();
        Deframer::default().decode(&mut buf).unwrap().unwrap()
    };
    let mut plain = Receiver::new(None, false);
    plain.handle_frame(t0, 1, from_peer(0));
    assert_eq!(
        plain.poll_new_flow(),
        None,
        "not resequenced here: not reported"
    );
    let mut rx = Receiver::new(Some(Default::default()), false);
    rx.handle_frame(t0, 1, from_peer(0));
    rx.handle_frame(t0, 2, from_peer(1));
    let flow = rx.poll_new_flow().expect("reported when it starts");
    assert_eq!(rx.poll_new_flow(), None, "once per flow");
    let reverse = flow.reversed();
    assert_eq!(
        reverse,
        crate::classifier::parse(&udp(4000)).unwrap().flow,
        "the reverse is our flow 198.19.1.10:4000 -> 198.19.2.10:0"
    );

    let mut r = Router::new(&config(), false);
    for g in [0, 1] {
        r.handle_conn_up(key(g, Class::TypeI));
        r.handle_conn_up(key(g, Class::TypeII));
    }
    let group = |r: &mut Router, sport: u16, t: Instant| {
        r.handle_tun_packet(t, tun_read(None, &udp(sport)))
            .unwrap()
            .conn
            .group
    };
    r.set_group_delay(b2, g0, 40_000);
    r.set_group_delay(b2, g1, 10_000);
    assert!(r.prefer_low_delay(t0, reverse));
    for _ in 0..4 {
        assert_eq!(group(&mut r, 4000, t0), g1, "lowest delay, every packet");
    }
    // Other flows: the round robin over both groups.
    let others: std::collections::BTreeSet<PathGroupId> =
        (1..=4).map(|p| group(&mut r, p, t0)).collect();
    assert_eq!(others.len(), 2, "{others:?}");
    // Within the margin (2 ms or a quarter): stays; beyond it: moves.
    r.set_group_delay(b2, g0, 9_000);
    assert_eq!(group(&mut r, 4000, t0), g1, "1 ms lower: no flap");
    r.set_group_delay(b2, g0, 5_000);
    assert_eq!(group(&mut r, 4000, t0), g0, "5 ms lower: moved");
    // Its group down: the lowest of the others.
    r.handle_conn_down(key(0, Class::TypeI));
    assert_eq!(group(&mut r, 4000, t0), g1);
    // Idle past the flow timeout, it is still a low-delay flow when it comes back.
    r.handle_conn_up(key(0, Class::TypeI));
    let later = t0 + Duration::from_secs(3_600);
    assert_eq!(group(&mut r, 4000, later), g0);
}

#[test]
fn new_flows_take_a_groups_connections_in_turn_and_skip_one_that_is_down() {
    let t0 = Instant::now();
    let mut c = config();
    c.connections_per_group = 3;
    c.validate().unwrap();
    // Type II gets 3 connections per group, Type I keeps one.
    let keys = conn_keys(&c);
    let nth = |group: u8, class: Class, index: u8| ConnKey {
        index,
        ..key(group, class)
    };
    assert!(keys.contains(&nth(0, Class::TypeII, 2)));
    assert!(!keys.contains(&nth(0, Class::TypeII, 3)));
    assert!(!keys.contains(&nth(0, Class::TypeI, 1)));
    let mut r = Router::new(&c, false);
    let g0 = PathGroupId::new(0).unwrap();
    // Group 0 only (group 1's connections stay down), its first Type II connection not yet up:
    // the group is up with one of the pool, and every flow goes to an up connection.
    r.handle_conn_up(key(0, Class::TypeI));
    r.handle_conn_up(nth(0, Class::TypeII, 1));
    let conn = |r: &mut Router, sport: u16| {
        r.handle_tun_packet(t0, tun_read(None, &udp(sport)))
            .unwrap()
            .conn
    };
    for p in 1..=3u16 {
        assert_eq!(conn(&mut r, p), nth(0, Class::TypeII, 1), "flow {p}");
    }
    r.handle_conn_up(nth(0, Class::TypeII, 0));
    r.handle_conn_up(nth(0, Class::TypeII, 2));
    // New flows: lanes 3, 4, 5 of group 0 -> connections 0, 1, 2, then round again.
    let got: Vec<u8> = (10..16u16).map(|p| conn(&mut r, p).index).collect();
    assert_eq!(got, [0, 1, 2, 0, 1, 2]);
    // A flow stays on its connection.
    assert_eq!(conn(&mut r, 11).index, 1);
    assert_eq!(conn(&mut r, 11).group, g0);
    // Its connection loses every subflow: the flow goes to the next live one of the pool, the
    // group stays up (the others are healthy), and it comes back when the paths do.
    assert_eq!(r.handle_conn_paths(nth(0, Class::TypeII, 1), false), []);
    assert_eq!(conn(&mut r, 11).index, 2);
    assert_eq!(r.handle_conn_paths(nth(0, Class::TypeII, 1), true), []);
    assert_eq!(conn(&mut r, 11).index, 1);
    // Down: same; all three down: the group goes down.
    assert_eq!(r.handle_conn_down(nth(0, Class::TypeII, 1)), []);
    assert_eq!(conn(&mut r, 11).index, 2);
    r.handle_conn_down(nth(0, Class::TypeII, 0));
    let down = r.handle_conn_down(nth(0, Class::TypeII, 2));
    assert_eq!(
        down,
        [Event::Group {
            branch: BranchId::new(2).unwrap(),
            group: g0,
            up: false
        }]
    );
    assert_eq!(r.counters().drops(PacketDrop::NoConnection), 0);
}

#[test]
fn connections_per_group_is_checked() {
    for (k, ok) in [(0u8, false), (1, true), (8, true), (9, false)] {
        let mut c = config();
        c.connections_per_group = k;
        assert_eq!(c.validate().is_ok(), ok, "{k}");
    }
    assert_eq!(config().connections_per_group, 1, "the default");
}

#[test]
fn a_sparse_type2_flow_rides_the_type1_connection_until_it_sends_more() {
    let t0 = Instant::now();
    let mut r = Router::new(&config_with_lane(), false);
    r.handle_conn_up(key(0, Class::TypeI));
    r.handle_conn_up(key(0, Class::TypeII));
    let send = |r: &mut Router, sport: u16, len: usize, at: Instant| {
        let mut p = udp(sport);
        p.resize(len, 0);
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        r.handle_tun_packet(at, tun_read(None, &p)).unwrap()
    };
    // A voice-like flow: 200 B every 20 ms for 2 s, all on the Type I connection, framed and
    // queued as Type II (the receiver and the queue's strict priority see its own class).
    for i in 0..100u32 {
        let out = send(&mut r, 5000, 200, t0 + Duration::from_millis(20) * i);
        assert_eq!(out.conn, key(0, Class::TypeI), "voice packet {i}");
        assert_eq!(out.packet.class(), Class::TypeII);
        let h = decode(out.packet.frame).header;
        assert_eq!(h.class, Class::TypeII);
    }
    assert_eq!(r.counters().sparse_lane_packets, 100);
    // A bulk flow: its first packets ride the lane, then it stays on its own class's connection.
    let conns: Vec<Class> = (0..50u64)
        .map(|i| {
            send(&mut r, 6000, 1_400, t0 + Duration::from_millis(i))
                .conn
                .class
        })
        .collect();
    let lane = conns.iter().take_while(|c| **c == Class::TypeI).count();
    assert!((1..=6).contains(&lane), "{conns:?}");
    assert!(
        conns[lane..].iter().all(|c| *c == Class::TypeII),
        "{conns:?}"
    );
    // Without live subflows on the Type I connection the voice flow goes to its own connection.
    let t1 = t0 + Duration::from_secs(3);
    assert_eq!(r.handle_conn_paths(key(0, Class::TypeI), false), []);
    assert_eq!(send(&mut r, 5000, 200, t1).conn, key(0, Class::TypeII));
    assert_eq!(r.handle_conn_paths(key(0, Class::TypeI), true), []);
    assert_eq!(send(&mut r, 5000, 200, t1).conn, key(0, Class::TypeI));
    // Unset, it is off on a gateway without shaping (the example has no `rate_mbit`), on with
    // a shaped port; a config change applies it.
    let mut unset = example();
    assert_eq!(unset.sparse_lane_kbit(), 0);
    r.apply(&unset, &mut Vec::new());
    assert_eq!(send(&mut r, 5000, 200, t1).conn, key(0, Class::TypeII));
    unset.wan[0].rate_mbit = Some(10);
    assert_eq!(
        unset.sparse_lane_kbit(),
        crate::config::DEFAULT_SPARSE_LANE_KBIT
    );
    r.apply(&unset, &mut Vec::new());
    assert_eq!(send(&mut r, 5001, 200, t1).conn, key(0, Class::TypeI));
    unset.qos.enabled = false;
    assert_eq!(unset.sparse_lane_kbit(), 0);
}
