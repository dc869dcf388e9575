//! Deterministic simulation of two gateway cores ([`mpa::gateway::Gateway`]) wired together
//! (STYLE §6.3): no sockets, virtual time `t0 + n × 100 µs`, no RNG. Every connection is a
//! simulated TCP connection: two in-order pipes (one per direction) with their own rate and delay,
//! carrying the frames `poll_transmit` hands out, decoded on arrival by a
//! [`Deframer`] and fed to `handle_frame`. Reordering comes only from striping over groups with
//! different delays, as with real MPTCP connections. A connection can be killed: its pipes lose
//! what is in flight and carry nothing more (no FIN, no RST), so only liveness can notice.
//!
//! Traffic goes from branch 1 (gateway A) to branch 2 (gateway B); B sends only keepalives.
//! Each packet is an IPv4/UDP packet whose source port names its flow and whose first 4 payload
//! bytes carry its per-flow number, so the receiving side checks order and completeness exactly.

// A test crate: clippy.toml allows these in #[test] functions only, not in their helpers.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use mpa::classifier::parse;
use mpa::config::Config;
use mpa::framing::{Deframer, FRAME_HEADER_LEN};
use mpa::gateway::{ConnId, ConnKey, Event, Gateway, PacketDrop, CLASSES};
use mpa::keepalive::{DEAD_AFTER, KEEPALIVE_INTERVAL};
use mpa::{BranchId, Class, PathGroupId};

const TICK: Duration = Duration::from_micros(100);

fn b(id: u8) -> BranchId {
    BranchId::new(id).unwrap()
}

fn g(id: u8) -> PathGroupId {
    PathGroupId::new(id).unwrap()
}

/// The config of branch `own` (1 or 2) towards the other, with `groups` as (id, weight) and an
/// optional `[striping]` table.
fn config(own: u8, groups: &[(u8, u32)], striping: Option<&str>) -> Config {
    let peer = 3 - own;
    let mut t = format!(
        "branch_id = {own}\nlan_prefixes = [\"198.19.{own}.0/24\"]\nselection_policy = \"wrr\"\n\
         flow_idle_timeout_s = 60\n\n\
         [[wan]]\nname = \"wan0\"\naddress = \"198.18.{own}0.2/24\"\ngateway = \"198.18.{own}0.1\"\n\n\
         [[remote]]\nid = {peer}\nwan_addresses = [\"198.18.{peer}0.2\"]\n\
         lan_prefixes = [\"198.19.{peer}.0/24\"]\n\n"
    );
    for (id, w) in groups {
        t.push_str(&format!(
            "[[remote.path_groups]]\nid = {id}\nweight = {w}\n\n"
        ));
    }
    if let Some(s) = striping {
        t.push_str(&format!("[striping]\n{s}\n\n"));
    }
    t.push_str(
        "[classifier]\ndefault_class = \"type2\"\n\n\
         [[classifier.rules]]\nname = \"realtime\"\nclass = \"type1\"\ndscp = [46]\n",
    );
    Config::parse(&t).unwrap()
}

/// An IPv4/UDP packet of `len` bytes (≥ 32) of flow `sport` from branch 1 to branch 2, carrying
/// `seq` as its first payload bytes; DSCP 46 (Type I) when `type1`.
fn packet(sport: u16, seq: u32, len: usize, type1: bool) -> Vec<u8> {
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[1] = if type1 { 0xB8 } else { 0 };
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&[198, 19, 1, 10]);
    p[16..20].copy_from_slice(&[198, 19, 2, 10]);
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&5001u16.to_be_bytes());
    p[24..26].copy_from_slice(&((len - 20) as u16).to_be_bytes());
    p[28..32].copy_from_slice(&seq.to_be_bytes());
    p
}

/// The TUN read buffer of a packet: the reserved frame header room, then the packet.
fn tun_buf(p: &[u8]) -> BytesMut {
    let mut b = BytesMut::with_capacity(FRAME_HEADER_LEN + p.len());
    b.resize(FRAME_HEADER_LEN, 0);
    b.extend_from_slice(p);
    b
}

/// One direction of a simulated TCP connection: in order, `rate` bytes/s, one-way `delay`.
struct Pipe {
    rate: u64,
    delay: Duration,
    free_at: Instant,
    flight: VecDeque<(Instant, BytesMut)>,
    rx: BytesMut,
    deframer: Deframer,
    /// Frames that entered the pipe, per group of the frame's connection (for striping checks).
    frames: u64,
}

impl Pipe {
    fn new(t0: Instant, rate: u64, delay: Duration) -> Self {
        Pipe {
            rate,
            delay,
            free_at: t0,
            flight: VecDeque::new(),
            rx: BytesMut::new(),
            deframer: Deframer::new(),
            frames: 0,
        }
    }

    /// The socket takes a frame when the previous one has left.
    fn can_send(&self, now: Instant) -> bool {
        self.free_at <= now
    }

    fn send(&mut self, now: Instant, frame: BytesMut) {
        let start = self.free_at.max(now);
        let tx = Duration::from_nanos(frame.len() as u64 * 1_000_000_000 / self.rate);
        self.free_at = start + tx;
        self.flight.push_back((self.free_at + self.delay, frame));
        self.frames += 1;
    }
}

/// One TCP connection opened by gateway `opener` (0 = A, 1 = B) with outbound key `key`.
struct Link {
    opener: usize,
    key: ConnKey,
    /// opener → acceptor, acceptor → opener.
    pipes: [Pipe; 2],
    alive: bool,
}

impl Link {
    /// The connection's id at gateway `side` (0 = opener).
    fn id(&self, side: usize) -> ConnId {
        if side == 0 {
            ConnId::outbound(self.key)
        } else {
            let own = b(self.opener as u8 + 1);
            ConnId::inbound(ConnKey {
                branch: own,
                ..self.key
            })
        }
    }

    fn gateway(&self, side: usize) -> usize {
        if side == 0 {
            self.opener
        } else {
            1 - self.opener
        }
    }
}

/// Per group: (rate bytes/s, one-way delay) of its connections.
type Paths = BTreeMap<u8, (u64, Duration)>;

struct Net {
    t0: Instant,
    now: Instant,
    gws: [Gateway; 2],
    links: Vec<Link>,
    paths: Paths,
    /// Packets written to TUN per gateway: (flow = source port, number, arrival).
    delivered: [Vec<(u16, u32, Instant)>; 2],
    /// Events per gateway with their time.
    events: [Vec<(Instant, Event)>; 2],
    /// Packets lost in flight on killed connections.
    lost_in_flight: u64,
}

impl Net {
    fn new(a: &Config, b_: &Config, paths: Paths) -> Self {
        let t0 = Instant::now();
        let mut net = Net {
            t0,
            now: t0,
            gws: [Gateway::new(a, false), Gateway::new(b_, false)],
            links: Vec::new(),
            paths,
            delivered: [Vec::new(), Vec::new()],
            events: [Vec::new(), Vec::new()],
            lost_in_flight: 0,
        };
        for opener in 0..2 {
            let keys: Vec<ConnKey> = net.gws[opener].router().conns().iter().copied().collect();
            for key in keys {
                net.connect(opener, key);
            }
        }
        net.drain_events();
        net
    }

    /// Opens connection `key` of gateway `opener` (both ends up now).
    fn connect(&mut self, opener: usize, key: ConnKey) {
        let (rate, delay) = self.paths[&key.group.get()];
        let link = Link {
            opener,
            key,
            pipes: [
                Pipe::new(self.now, rate, delay),
                Pipe::new(self.now, rate, delay),
            ],
            alive: true,
        };
        for side in 0..2 {
            self.gws[link.gateway(side)].handle_conn_up(link.id(side), self.now);
        }
        self.links.push(link);
    }

    /// Kills A's outbound connection `key` (both directions; nothing tells either end).
    fn kill(&mut self, key: ConnKey) {
        let l = self
            .links
            .iter_mut()
            .find(|l| l.opener == 0 && l.key == key && l.alive)
            .unwrap();
        l.alive = false;
        // Data frames in flight towards B are lost; B's keepalives towards A carry no packet.
        self.lost_in_flight += l.pipes[0]
            .flight
            .iter()
            .filter(|(_, f)| f.len() > FRAME_HEADER_LEN)
            .count() as u64;
        for p in &mut l.pipes {
            p.flight.clear();
        }
    }

    fn link(&self, opener: usize, key: ConnKey) -> &Link {
        self.links
            .iter()
            .find(|l| l.opener == opener && l.key == key)
            .unwrap()
    }

    fn drain_events(&mut self) {
        for (i, gw) in self.gws.iter_mut().enumerate() {
            while let Some(ev) = gw.poll_event() {
                self.events[i].push((self.now, ev));
            }
        }
    }

    fn drain_tun(&mut self) {
        for (i, gw) in self.gws.iter_mut().enumerate() {
            while let Some(w) = gw.poll_tun_write() {
                assert_eq!(w.vnet, None, "no offload in this simulation");
                let info = parse(&w.ip).unwrap();
                let seq = u32::from_be_bytes(w.ip[28..32].try_into().unwrap());
                self.delivered[i].push((info.flow.src_port, seq, self.now));
            }
        }
    }

    /// Advances one tick: timers, arrivals, then transmissions.
    fn step(&mut self) {
        self.now += TICK;
        let now = self.now;
        for gw in &mut self.gws {
            if gw.poll_timeout().is_some_and(|t| t <= now) {
                gw.handle_timeout(now);
            }
        }
        self.drain_events();
        for li in 0..self.links.len() {
            for dir in 0..2 {
                let to_side = 1 - dir;
                let (gw, id) = {
                    let l = &self.links[li];
                    (l.gateway(to_side), l.id(to_side))
                };
                let pipe = &mut self.links[li].pipes[dir];
                while pipe.flight.front().is_some_and(|(at, _)| *at <= now) {
                    let (_, bytes) = pipe.flight.pop_front().unwrap();
                    pipe.rx.extend_from_slice(&bytes);
                    while let Some(frame) = pipe.deframer.decode(&mut pipe.rx).unwrap() {
                        self.gws[gw].handle_frame(id, now, frame);
                    }
                }
            }
        }
        self.drain_tun();
        for li in 0..self.links.len() {
            if !self.links[li].alive {
                continue;
            }
            for dir in 0..2 {
                let (gw, id) = {
                    let l = &self.links[li];
                    (l.gateway(dir), l.id(dir))
                };
                while self.links[li].pipes[dir].can_send(now) {
                    let Some(t) = self.gws[gw].poll_transmit(id, now) else {
                        break;
                    };
                    self.links[li].pipes[dir].send(now, t.frame);
                }
            }
        }
        self.drain_tun();
        self.drain_events();
    }

    /// Runs until `t0 + at`.
    fn run_until(&mut self, at: Duration) {
        while self.now < self.t0 + at {
            self.step();
        }
    }

    /// A's flow table entry for flow `sport`: its group.
    fn group_of(&self, sport: u16) -> Option<PathGroupId> {
        let key = parse(&packet(sport, 0, 32, false)).unwrap().flow;
        self.gws[0]
            .router()
            .agent()
            .flows()
            .get(&key)
            .map(|e| e.group)
    }
}

/// Flows sending periodically from A: (sport, period in ticks, bytes, Type I).
struct Traffic {
    flows: Vec<(u16, u32, usize, bool)>,
    next_seq: BTreeMap<u16, u32>,
    /// Packets A accepted (`handle_tun_packet` returned `Ok`) and refused, per flow.
    accepted: BTreeMap<u16, u32>,
    refused: BTreeMap<u16, u32>,
}

impl Traffic {
    fn new(flows: Vec<(u16, u32, usize, bool)>) -> Self {
        Traffic {
            flows,
            next_seq: BTreeMap::new(),
            accepted: BTreeMap::new(),
            refused: BTreeMap::new(),
        }
    }

    /// Offers this tick's packets to A.
    fn offer(&mut self, net: &mut Net, tick: u64) {
        for &(sport, period, len, type1) in &self.flows {
            if tick % u64::from(period) != 0 {
                continue;
            }
            let seq = self.next_seq.entry(sport).or_insert(0);
            let p = packet(sport, *seq, len, type1);
            *seq += 1;
            match net.gws[0].handle_tun_packet(net.now, tun_buf(&p)) {
                Ok(_) => *self.accepted.entry(sport).or_default() += 1,
                Err(_) => *self.refused.entry(sport).or_default() += 1,
            }
        }
    }

    fn sent(&self) -> u64 {
        self.next_seq.values().map(|n| u64::from(*n)).sum()
    }
}

/// Offers traffic every tick from now until `t0 + until`.
fn run(net: &mut Net, traffic: &mut Traffic, until: Duration) {
    let mut tick = 0u64;
    while net.now < net.t0 + until {
        traffic.offer(net, tick);
        net.step();
        tick += 1;
    }
}

/// Per flow: the numbers delivered at B, in delivery order.
fn per_flow(net: &Net) -> BTreeMap<u16, Vec<u32>> {
    let mut m: BTreeMap<u16, Vec<u32>> = BTreeMap::new();
    for (sport, seq, _) in &net.delivered[1] {
        m.entry(*sport).or_default().push(*seq);
    }
    m
}

/// Asserts that flow `sport` delivered exactly `0..n`, naming the first wrong position (not the
/// whole list) when it did not.
fn assert_complete_in_order(sport: u16, seqs: &[u32], n: u32) {
    let first_bad = seqs.iter().zip(0..n).position(|(got, want)| *got != want);
    assert!(
        first_bad.is_none() && seqs.len() == n as usize,
        "flow {sport}: {} of {n} delivered, first out of place at {first_bad:?}: {:?}",
        seqs.len(),
        first_bad.map(|i| &seqs[i.saturating_sub(2)..(i + 3).min(seqs.len())])
    );
}

/// Three groups with different rates and delays.
fn three_paths() -> Paths {
    [
        (0, (4_000_000, Duration::from_millis(5))),
        (1, (2_000_000, Duration::from_millis(30))),
        (2, (3_000_000, Duration::from_millis(60))),
    ]
    .into_iter()
    .collect()
}

/// (a) 60 concurrent flows (a quarter Type I) over three groups with delays 5/30/60 ms: every
/// packet arrives exactly once and in order per flow, each flow stays on one group, and the
/// flows are spread over the groups by the weights 1:1:1.
#[test]
fn many_flows_over_three_groups_arrive_complete_and_in_order() {
    let groups = [(0, 1), (1, 1), (2, 1)];
    let mut net = Net::new(
        &config(1, &groups, None),
        &config(2, &groups, None),
        three_paths(),
    );
    assert_eq!(
        net.events[0]
            .iter()
            .filter(|(_, e)| matches!(e, Event::Group { up: true, .. }))
            .count(),
        3,
        "A's three groups came up"
    );
    // Flow i: 200 B every 5.0–5.6 ms: ≈ 2.3 MB/s in all, ≈ 0.75 MB/s per group, well below
    // every connection's rate (no queue builds up, nothing is dropped).
    let flows: Vec<(u16, u32, usize, bool)> = (0..60u16)
        .map(|i| (1000 + i, 50 + u32::from(i % 7), 200, i % 4 == 0))
        .collect();
    let mut traffic = Traffic::new(flows);
    run(&mut net, &mut traffic, Duration::from_secs(2));
    net.run_until(Duration::from_secs(3));

    let c = net.gws[0].counters();
    assert_eq!(c.drops_total(), 0, "{c:?}");
    let sent = traffic.sent();
    assert!(sent > 20_000, "{sent}");
    assert_eq!(
        net.delivered[1].len() as u64,
        sent,
        "every packet arrived once"
    );
    for (sport, seqs) in per_flow(&net) {
        let n = traffic.next_seq[&sport];
        assert_complete_in_order(sport, &seqs, n);
    }
    // Flow table: WRR 1:1:1 gave each group 20 flows; none moved.
    let flows = net.gws[0].router().agent().flows();
    for grp in 0..3 {
        assert_eq!(flows.flows_on(b(2), g(grp)), 20, "group {grp}");
    }
    // Both classes carried data on every group.
    for grp in 0..3 {
        for class in CLASSES {
            let key = ConnKey {
                branch: b(2),
                group: g(grp),
                class,
                index: 0,
            };
            let frames = net.gws[0]
                .conn(ConnId::outbound(key))
                .unwrap()
                .counters()
                .frames_tx;
            assert!(frames > 0, "{key:?}");
        }
    }
    // Keepalives: the idle direction (B → A) sent one per second per connection.
    assert!(net.gws[1].counters().keepalives_tx >= 2 * 12);
    assert_eq!(net.gws[1].counters().tun_tx_packets, sent);
}

/// (b) One elephant flow striped over two groups with one-way delays 5 ms and 60 ms: the
/// resequencer holds the fast group's frames until the slow ones arrive, and the flow is
/// delivered complete and in order, with nothing released across a gap.
#[test]
fn a_striped_flow_over_unequal_delays_is_delivered_in_order() {
    let groups = [(0, 1), (1, 1)];
    let striping = "classes = [\"type2\"]\nthreshold_kbit = 1000\nbuffer_frames = 2048\n\
                    release_frames = 1500\nrelease_hold_ms = 300";
    let paths: Paths = [
        (0, (4_000_000, Duration::from_millis(5))),
        (1, (4_000_000, Duration::from_millis(60))),
    ]
    .into_iter()
    .collect();
    let mut net = Net::new(
        &config(1, &groups, Some(striping)),
        &config(2, &groups, Some(striping)),
        paths,
    );
    // 1,000 B every 0.5 ms = 2 MB/s (16 Mbit/s): an elephant after its first 100 ms window.
    let mut traffic = Traffic::new(vec![(4242, 5, 1000, false)]);
    run(&mut net, &mut traffic, Duration::from_secs(2));
    net.run_until(Duration::from_secs(3));

    let sent = traffic.sent();
    assert_eq!(sent, 4_000);
    assert_eq!(net.gws[0].counters().drops_total(), 0);
    let seqs = &per_flow(&net)[&4242];
    assert_complete_in_order(4242, seqs, 4_000);
    // Striped over both groups: both Type II connections carried a large share.
    let frames = |grp| {
        let key = ConnKey {
            branch: b(2),
            group: g(grp),
            class: Class::TypeII,
            index: 0,
        };
        net.link(0, key).pipes[0].frames
    };
    let (f0, f1) = (frames(0), frames(1));
    assert!(f0 > 1_500 && f1 > 1_500, "{f0} {f1}");
    // The resequencer did the work: frames were held, none released across a gap.
    let rs = net.gws[1].receiver().resequencer().stats();
    assert!(rs.buffered > 500, "{rs:?}");
    assert_eq!(
        rs.released_threshold + rs.released_timeout + rs.released_lost + rs.overflow,
        0,
        "{rs:?}"
    );
    assert_eq!(rs.frames_in, rs.in_order + rs.released_in_order);
    // Frames were numbered from the moment the flow became an elephant (after 100 ms = 200
    // packets, pinned to group 0, the fast one).
    assert_eq!(rs.frames_in, 4_000 - 200);
}

/// (c) A's Type II connection of group 1 dies silently at 1 s. Liveness declares it dead
/// `DEAD_AFTER` after the last keepalive it received, group 1 goes down, and the flows that were
/// on it continue over groups 0 and 2 (still in order). Every packet is accounted for: delivered,
/// lost in flight at the kill, or dropped with a reason; nothing is left in the dead queue.
#[test]
fn a_dead_connection_moves_its_flows_after_the_liveness_timeout() {
    let groups = [(0, 1), (1, 1), (2, 1)];
    let mut net = Net::new(
        &config(1, &groups, None),
        &config(2, &groups, None),
        three_paths(),
    );
    let flows: Vec<(u16, u32, usize, bool)> = (0..30u16)
        .map(|i| (2000 + i, 20, 300, i % 2 == 0))
        .collect();
    let mut traffic = Traffic::new(flows);
    run(&mut net, &mut traffic, Duration::from_secs(1));
    let on_g1: Vec<u16> = (2000..2030)
        .filter(|s| net.group_of(*s) == Some(g(1)))
        .collect();
    assert_eq!(on_g1.len(), 10);
    let dead_key = ConnKey {
        branch: b(2),
        group: g(1),
        class: Class::TypeII,
        index: 0,
    };
    let killed_at = net.now;
    net.kill(dead_key);
    run(&mut net, &mut traffic, Duration::from_secs(6));
    net.run_until(Duration::from_secs(7));

    // A: Close of the dead connection and group 1 down, once each, within DEAD_AFTER.
    let closes: Vec<Instant> = net.events[0]
        .iter()
        .filter(|(_, e)| *e == Event::Close(ConnId::outbound(dead_key)))
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(closes.len(), 1);
    let detected = closes[0];
    assert!(
        detected >= killed_at + DEAD_AFTER - KEEPALIVE_INTERVAL
            && detected <= killed_at + DEAD_AFTER,
        "detected {:?} after the kill",
        detected - killed_at
    );
    let downs: Vec<&(Instant, Event)> = net.events[0]
        .iter()
        .filter(|(_, e)| matches!(e, Event::Group { up: false, .. }))
        .collect();
    assert_eq!(downs.len(), 1);
    assert_eq!(
        downs[0],
        &(
            detected,
            Event::Group {
                branch: b(2),
                group: g(1),
                up: false
            }
        )
    );
    // B's end of the same connection died too (its inbound), nothing else did.
    let b_closes: Vec<Event> = net.events[1]
        .iter()
        .filter(|(_, e)| matches!(e, Event::Close(_)))
        .map(|(_, e)| *e)
        .collect();
    assert_eq!(b_closes, vec![Event::Close(net.link(0, dead_key).id(1))]);

    // Every flow of group 1 moved to group 0 or 2 and kept being delivered after detection.
    // Smooth WRR 1:1 over groups 0 and 2 alternates in flow order (2001, 2004, ...): the Type II
    // flows (odd ports) land on group 0, the Type I flows on group 2. A Type I flow moved to a
    // *faster* group could overtake its own last packets still in flight on group 1 (its
    // connection was alive): moving a flow reorders it at most once, which this layout avoids.
    for s in &on_g1 {
        let want = if s % 2 == 1 { g(0) } else { g(2) };
        assert_eq!(net.group_of(*s), Some(want), "flow {s}");
    }
    assert_eq!(net.gws[0].router().agent().flows().flows_on(b(2), g(1)), 0);
    let after = |s: u16| {
        net.delivered[1]
            .iter()
            .filter(|(f, _, at)| *f == s && *at > detected + Duration::from_millis(100))
            .count()
    };
    // One packet per 2 ms from 100 ms after the detection until the traffic stops at 6 s.
    let expect = (net.t0 + Duration::from_secs(6) - detected - Duration::from_millis(100))
        .as_micros()
        / 2_000;
    for s in &on_g1 {
        assert!(
            after(*s) as u128 >= expect - 1,
            "flow {s}: {} of {expect}",
            after(*s)
        );
    }
    // Per flow: strictly increasing (gaps only where packets were lost or dropped).
    for (s, seqs) in per_flow(&net) {
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "flow {s} reordered");
    }
    // Nothing stuck: the dead connection's queue is empty, and every packet is accounted for.
    let a = net.gws[0].counters();
    assert_eq!(
        net.gws[0]
            .conn(ConnId::outbound(dead_key))
            .unwrap()
            .queued_bytes(),
        0
    );
    let lost = net.lost_in_flight;
    assert_eq!(
        net.delivered[1].len() as u64 + a.drops_total() + lost,
        traffic.sent(),
        "{a:?}"
    );
    assert!(
        a.drops(PacketDrop::ConnClosed) > 0,
        "the dead queue was flushed: {a:?}"
    );
    // Type II flows of group 1 lost packets; Type I flows of group 1 (their connection was
    // alive) lost none: they moved when their group went down, nothing of theirs was dropped.
    for s in &on_g1 {
        let n = traffic.next_seq[s] as usize;
        let got = per_flow(&net)[s].len();
        if (s - 2000) % 2 == 0 {
            assert_eq!(got, n, "Type I flow {s} complete");
        } else {
            assert!(got < n, "Type II flow {s} lost its queued packets");
        }
    }
    for s in (2000..2030u16).filter(|s| !on_g1.contains(s)) {
        assert_eq!(
            per_flow(&net)[&s].len(),
            traffic.next_seq[&s] as usize,
            "flow {s}"
        );
    }
}

/// (d) A config change that raises group 1's weight and adds group 2 moves no existing flow: all
/// 40 flows keep their group and stay in order; the plan opens exactly group 2's two
/// connections; new flows then use group 2 as well.
#[test]
fn a_config_change_moves_no_existing_flow() {
    let before = [(0, 1), (1, 1)];
    let after = [(0, 1), (1, 5), (2, 2)];
    let mut paths = three_paths();
    paths.insert(2, (3_000_000, Duration::from_millis(10)));
    let mut net = Net::new(&config(1, &before, None), &config(2, &before, None), paths);
    // 300 B every 10 ms per flow: after the change group 1 carries 45 flows, 1.35 MB/s.
    let old: Vec<(u16, u32, usize, bool)> = (0..40u16)
        .map(|i| (3000 + i, 100, 300, i % 4 == 0))
        .collect();
    let mut traffic = Traffic::new(old);
    run(&mut net, &mut traffic, Duration::from_secs(1));
    let groups_before: Vec<PathGroupId> = (3000..3040).map(|s| net.group_of(s).unwrap()).collect();
    assert_eq!(groups_before.iter().filter(|x| **x == g(0)).count(), 20);

    let now = net.now;
    let plan = net.gws[0].apply(&config(1, &after, None), now);
    let key = |grp, class| ConnKey {
        branch: b(2),
        group: g(grp),
        class,
        index: 0,
    };
    assert_eq!(plan.open, vec![key(2, Class::TypeI), key(2, Class::TypeII)]);
    assert!(plan.close.is_empty());
    assert_eq!(plan.weights, vec![(b(2), g(1), 5), (b(2), g(2), 2)]);
    let plan_b = net.gws[1].apply(&config(2, &after, None), now);
    assert_eq!(plan_b.open.len(), 2);
    // The driver opens what the plans list.
    for k in plan.open {
        net.connect(0, k);
    }
    for k in plan_b.open {
        net.connect(1, k);
    }
    net.drain_events();
    assert!(net.events[0].iter().any(|(_, e)| *e
        == Event::Group {
            branch: b(2),
            group: g(2),
            up: true
        }));
    // Old flows go on; 40 new flows start.
    for i in 0..40u16 {
        traffic.flows.push((3100 + i, 100, 300, false));
    }
    run(&mut net, &mut traffic, Duration::from_secs(2));
    net.run_until(Duration::from_secs(3));

    let groups_after: Vec<PathGroupId> = (3000..3040).map(|s| net.group_of(s).unwrap()).collect();
    assert_eq!(groups_after, groups_before, "no existing flow moved");
    // New flows by smooth WRR 1:5:2 over 40 = 5:25:10.
    let new_on = |grp| {
        (3100..3140)
            .filter(|s| net.group_of(*s) == Some(g(grp)))
            .count()
    };
    assert_eq!(
        (new_on(0), new_on(1), new_on(2)),
        (5, 25, 10),
        "{:?}",
        (3100..3140).map(|s| net.group_of(s)).collect::<Vec<_>>()
    );
    let c = net.gws[0].counters();
    assert_eq!(c.drops_total(), 0, "{c:?}");
    assert_eq!(net.delivered[1].len() as u64, traffic.sent());
    for (s, seqs) in per_flow(&net) {
        assert_complete_in_order(s, &seqs, traffic.next_seq[&s]);
    }
}
