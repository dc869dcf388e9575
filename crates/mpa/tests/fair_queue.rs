//! Issue #16 "latency under load", the pure core: per-flow fair queueing with CoDel per flow
//! ([`FairQueue`]) simulated on virtual time (STYLE §6.3), against the single CoDel FIFO per class it
//! replaces ([`PriorityQueue`]). A link drains the queue at a fixed rate; flows offer packets at fixed
//! rates (open loop) or as a TCP-like AIMD sender. Time is `t0 + n × TICK`; nothing sleeps.

// A test/bench crate: clippy.toml allows these in #[test] functions only, not in their helpers.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::time::{Duration, Instant};

use mpa::queue::{
    AqmConfig, Arrival, Dequeued, DropReason, FairQueue, FlowHash, FlowHasher, PriorityQueue,
    FLOW_BUCKETS, MAX_QUEUE_BYTES, MAX_QUEUE_PACKETS, QUANTUM_BYTES,
};
use mpa::Class;

const TICK: Duration = Duration::from_micros(100);

/// A queued packet: its flow (an index into the scenario's flows), length and enqueue time.
#[derive(Debug, Clone, Copy)]
struct Pkt {
    flow: usize,
    len: usize,
    at: Instant,
    class: Class,
}

/// The two queues behind one interface; `dropped` gets every packet the queue gives up on arrival.
trait Queue {
    fn push(&mut self, now: Instant, p: Pkt, hash: FlowHash, ect: bool, dropped: &mut Vec<Pkt>);
    fn pop(&mut self, now: Instant) -> Option<Dequeued<Pkt>>;
    fn queued(&self, class: Class) -> usize;
}

impl Queue for PriorityQueue<Pkt> {
    fn push(&mut self, now: Instant, p: Pkt, _: FlowHash, ect: bool, dropped: &mut Vec<Pkt>) {
        if let Err((p, _)) = self.enqueue(now, p.class, p, p.len, ect) {
            dropped.push(p);
        }
    }
    fn pop(&mut self, now: Instant) -> Option<Dequeued<Pkt>> {
        self.poll_dequeue(now)
    }
    fn queued(&self, class: Class) -> usize {
        self.len(class)
    }
}

impl Queue for FairQueue<Pkt> {
    fn push(&mut self, now: Instant, p: Pkt, flow: FlowHash, ect: bool, dropped: &mut Vec<Pkt>) {
        let meta = Arrival {
            class: p.class,
            flow,
            len: p.len,
            ect,
        };
        if let Err((p, _)) = self.enqueue(now, meta, p, |p, _, _| dropped.push(p)) {
            dropped.push(p);
        }
    }
    fn pop(&mut self, now: Instant) -> Option<Dequeued<Pkt>> {
        self.poll_dequeue(now)
    }
    fn queued(&self, class: Class) -> usize {
        self.len(class)
    }
}

/// How a flow offers packets.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// Open loop: `rate` bytes/s in packets of `len` bytes.
    Rate { rate: f64, len: usize },
    /// One packet of `len` bytes every `every`.
    Periodic { every: Duration, len: usize },
    /// TCP-like AIMD (RTT 50 ms): halves its rate at most once per RTT when signalled (drop or CE
    /// mark), adds 12.5 kB/s per RTT otherwise; starts at `rate`.
    Aimd { rate: f64, len: usize },
}

#[derive(Debug, Clone)]
struct Flow {
    source: Source,
    class: Class,
    hash: FlowHash,
    ect: bool,
    credit: f64,
    next_at: Option<Instant>,
    last_cut: Option<Instant>,
    last_increase: Option<Instant>,
    signalled: bool,
    /// Results.
    offered: u64,
    sent: u64,
    lost: u64,
    marked: u64,
    /// (dequeue time, bytes, sojourn) of every packet sent.
    log: Vec<(Instant, usize, Duration)>,
}

impl Flow {
    fn new(source: Source, class: Class, id: u64, hasher: &FlowHasher) -> Self {
        Flow {
            source,
            class,
            hash: hasher.hash(&id),
            ect: matches!(source, Source::Aimd { .. }),
            credit: 0.0,
            next_at: None,
            last_cut: None,
            last_increase: None,
            signalled: false,
            offered: 0,
            sent: 0,
            lost: 0,
            marked: 0,
            log: Vec::new(),
        }
    }

    fn sojourns(&self, from: Instant) -> Vec<Duration> {
        let mut s: Vec<Duration> = self
            .log
            .iter()
            .filter(|(t, _, _)| *t >= from)
            .map(|(_, _, d)| *d)
            .collect();
        s.sort();
        s
    }

    fn bytes_between(&self, from: Instant, to: Instant) -> f64 {
        self.log
            .iter()
            .filter(|(t, _, _)| *t >= from && *t < to)
            .map(|(_, b, _)| *b as f64)
            .sum()
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The link takes packets from `q` at `rate` bytes/s until `now`: each at the instant the previous
/// one is done (or `now - TICK`, when the link idled; every packet in the queue arrived by then), so
/// the link never idles while packets wait. Checks that no Type II packet leaves while a Type I
/// packet waits.
fn drain(q: &mut impl Queue, flows: &mut [Flow], free_at: &mut Instant, now: Instant, rate: f64) {
    while *free_at <= now {
        let t = (*free_at).max(now.checked_sub(TICK).unwrap_or(now));
        let type1_waiting = q.queued(Class::TypeI);
        let (p, mark) = match q.pop(t) {
            None => {
                *free_at = now;
                break;
            }
            Some(Dequeued::Drop(p, _, reason)) => {
                assert_eq!(reason, DropReason::Codel);
                flows[p.flow].lost += 1;
                flows[p.flow].signalled = true;
                continue;
            }
            Some(Dequeued::Send(p, _)) => (p, false),
            Some(Dequeued::Mark(p, _)) => (p, true),
        };
        if p.class == Class::TypeII {
            assert_eq!(type1_waiting, 0, "Type II sent while Type I waited");
        }
        let f = &mut flows[p.flow];
        f.sent += 1;
        if mark {
            f.marked += 1;
            f.signalled = true;
        }
        f.log.push((t, p.len, t - p.at));
        *free_at = t + Duration::from_secs_f64(p.len as f64 / rate);
    }
}

/// Runs `flows` through `q` drained by a link of `rate` bytes/s for `secs`. Checks on every dequeue
/// that no Type II packet leaves while a Type I packet waits.
fn run(q: &mut impl Queue, flows: &mut [Flow], rate: f64, secs: f64, t0: Instant) {
    let rtt = Duration::from_millis(50);
    let mut free_at = t0;
    let mut dropped = Vec::new();
    let ticks = (secs / TICK.as_secs_f64()) as u32;
    for tick in 0..ticks {
        let now = t0 + TICK * tick;
        drain(q, flows, &mut free_at, now, rate);
        for (i, f) in flows.iter_mut().enumerate() {
            let (n, len) = match f.source {
                Source::Rate { rate, len } | Source::Aimd { rate, len } => {
                    f.credit += rate * TICK.as_secs_f64();
                    let n = (f.credit / len as f64).floor();
                    f.credit -= n * len as f64;
                    (n as u32, len)
                }
                Source::Periodic { every, len } => {
                    let due = *f.next_at.get_or_insert(now);
                    if now >= due {
                        f.next_at = Some(due + every);
                        (1, len)
                    } else {
                        (0, len)
                    }
                }
            };
            for _ in 0..n {
                f.offered += 1;
                let p = Pkt {
                    flow: i,
                    len,
                    at: now,
                    class: f.class,
                };
                q.push(now, p, f.hash, f.ect, &mut dropped);
            }
        }
        for p in dropped.drain(..) {
            flows[p.flow].lost += 1;
            flows[p.flow].signalled = true;
        }
        for f in flows.iter_mut() {
            if let Source::Aimd { rate, len } = &mut f.source {
                let cut = f.last_cut.get_or_insert(t0);
                if f.signalled && now - *cut >= rtt {
                    *rate /= 2.0;
                    *cut = now;
                }
                f.signalled = false;
                let inc = f.last_increase.get_or_insert(t0);
                if now - *inc >= rtt {
                    *rate += 12_500.0;
                    *inc = now;
                }
                let _ = len;
            }
        }
    }
}

fn hasher() -> FlowHasher {
    FlowHasher::with_key([0x5eed_0001, 0x5eed_0002])
}

/// 10 Mbit/s.
const RATE: f64 = 1_250_000.0;

/// Scenario (a): 4 bulk flows of 1,400-byte packets offering together twice the link rate, a flow
/// at half its fair share, and a voice-like flow (172 B every 20 ms), all Type II.
fn voice_next_to_bulk(q: &mut impl Queue, t0: Instant) -> Vec<Flow> {
    let h = hasher();
    let mut flows: Vec<Flow> = (0..4)
        .map(|i| {
            let src = Source::Rate {
                rate: RATE * 2.0 / 4.0,
                len: 1_400,
            };
            Flow::new(src, Class::TypeII, i, &h)
        })
        .collect();
    let half_share = Source::Rate {
        rate: RATE / 6.0 / 2.0,
        len: 1_400,
    };
    flows.push(Flow::new(half_share, Class::TypeII, 4, &h));
    let voice = Source::Periodic {
        every: Duration::from_millis(20),
        len: 172,
    };
    flows.push(Flow::new(voice, Class::TypeII, 5, &h));
    run(q, &mut flows, RATE, 10.0, t0);
    flows
}

/// The time to send one quantum at the link rate: the bound on a sparse flow's wait.
fn quantum_time() -> Duration {
    Duration::from_secs_f64(f64::from(QUANTUM_BYTES) / RATE)
}

/// (a) + (e): the voice flow loses nothing and waits for about one quantum's transmission time (the
/// packet on the wire when it arrives); the flow below its share loses nothing either; every drop
/// falls on the bulk flows that overload the link, in equal parts.
#[test]
fn a_sparse_flow_next_to_bulk_flows_loses_nothing_and_does_not_wait() {
    let t0 = Instant::now();
    let mut q = FairQueue::new(AqmConfig::default());
    let flows = voice_next_to_bulk(&mut q, t0);
    let voice = &flows[5];
    assert_eq!(voice.offered, 500);
    assert_eq!((voice.lost, voice.sent), (0, 500), "{voice:?}");
    let s = voice.sojourns(t0);
    // It waits for the packet on the wire, and at worst also for one packet of the other sparse
    // flow when both arrive together (both are in the new-flows list); plus the tick's sampling.
    let (p50, p99, max) = (
        percentile(&s, 0.5),
        percentile(&s, 0.99),
        *s.last().unwrap(),
    );
    eprintln!(
        "fair queue: voice lost {}/500, sojourn p50 {p50:?} p99 {p99:?} max {max:?}",
        voice.lost
    );
    assert!(p50 < quantum_time(), "voice p50 {p50:?}");
    assert!(p99 <= quantum_time() * 2 + TICK, "voice p99 {p99:?}");
    assert!(max <= quantum_time() * 2 + TICK, "voice max {max:?}");
    let half = &flows[4];
    assert_eq!(half.lost, 0, "{half:?}");
    assert!(percentile(&half.sojourns(t0), 0.99) <= quantum_time() * 2 + TICK);
    // The bulk flows pay for the overload: half of what they offer, in equal parts.
    let bulk_lost: u64 = flows[..4].iter().map(|f| f.lost).sum();
    let bulk_offered: u64 = flows[..4].iter().map(|f| f.offered).sum();
    assert!(
        bulk_lost * 10 > bulk_offered * 4,
        "{bulk_lost}/{bulk_offered}"
    );
    let sent: Vec<u64> = flows[..4].iter().map(|f| f.sent).collect();
    let (lo, hi) = (sent.iter().min().unwrap(), sent.iter().max().unwrap());
    assert!(hi - lo <= hi / 50, "bulk flows' shares {sent:?}");
    let st = q.stats(Class::TypeII);
    assert!(st.overflow_drops > 0 && st.codel_drops > 0, "{st:?}");
    let fs = q.flow_stats(Class::TypeII);
    assert!(fs.new_flow_dequeues >= 500, "{fs:?}");
    assert_eq!(fs.collisions, 0, "{fs:?}");
}

/// The same load through the single FIFO per class fails the same bounds by far (DESIGN.md §8's
/// measurement: the voice flow pays for the bulk flows' excess and waits behind their queue).
#[test]
fn the_single_fifo_fails_the_sparse_flow_test() {
    let t0 = Instant::now();
    let mut q = PriorityQueue::new(AqmConfig::default());
    let flows = voice_next_to_bulk(&mut q, t0);
    let voice = &flows[5];
    assert!(voice.lost * 10 > voice.offered, "{voice:?}");
    let p99 = percentile(&voice.sojourns(t0), 0.99);
    eprintln!(
        "single FIFO: voice lost {}/500, sojourn p99 {p99:?}",
        voice.lost
    );
    assert!(p99 > quantum_time() * 50, "voice p99 {p99:?}");
    assert!(flows[4].lost > 0);
}

/// Jain's fairness index of `x`.
fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    s * s / (x.len() as f64 * s2)
}

/// (b): 200 flows with different offered rates (1.5× to 3.5× their share) and packet sizes (200 B
/// to 1,400 B, and every tenth flow 16 KiB GSO super-packets) on a 100 Mbit/s link: over the last
/// 2 s of 4, Jain's index of the bytes sent is ≥ 0.99 and every flow gets ≥ 90 % of its share.
#[test]
fn two_hundred_flows_share_the_link_fairly() {
    let t0 = Instant::now();
    let rate = RATE * 10.0;
    let share = rate / 200.0;
    let h = hasher();
    let mut flows: Vec<Flow> = (0..200u64)
        .map(|i| {
            let len = if i % 10 == 0 {
                16_384
            } else {
                200 + (i as usize * 37) % 1_201
            };
            let src = Source::Rate {
                rate: share * (1.5 + i as f64 / 100.0),
                len,
            };
            Flow::new(src, Class::TypeII, 1_000 + i, &h)
        })
        .collect();
    let mut q = FairQueue::new(AqmConfig::default());
    run(&mut q, &mut flows, rate, 4.0, t0);
    let (from, to) = (t0 + Duration::from_secs(2), t0 + Duration::from_secs(4));
    let got: Vec<f64> = flows
        .iter()
        .map(|f| f.bytes_between(from, to) / 2.0)
        .collect();
    let j = jain(&got);
    let min = got.iter().cloned().fold(f64::MAX, f64::min);
    eprintln!(
        "200 flows: Jain {j:.4}, min {:.3} of the share",
        min / share
    );
    assert!(j >= 0.99, "Jain {j}");
    assert!(min >= 0.9 * share, "min {min} of share {share}");
    // The link stayed busy.
    let total: f64 = got.iter().sum();
    assert!(total >= 0.98 * rate, "{total} of {rate}");
    let fs = q.flow_stats(Class::TypeII);
    assert_eq!(fs.collisions, 0, "{fs:?}");
    assert!(
        fs.max_active_flows >= 200 && fs.max_active_flows <= FLOW_BUCKETS,
        "{fs:?}"
    );
}

/// (c): TCP-like bulk flows under per-flow CoDel: the standing sojourn stays near the CoDel target
/// (5 ms) instead of filling the 512 KiB bound (≈ 420 ms at 10 Mbit/s), with no overflow drops, and
/// CoDel signals them with CE marks.
#[test]
fn codel_holds_responsive_bulk_flows_near_target() {
    let t0 = Instant::now();
    let h = hasher();
    let mut flows: Vec<Flow> = (0..4)
        .map(|i| {
            let src = Source::Aimd {
                rate: RATE / 2.0,
                len: 1_400,
            };
            Flow::new(src, Class::TypeII, 100 + i, &h)
        })
        .collect();
    let mut q = FairQueue::new(AqmConfig::default());
    run(&mut q, &mut flows, RATE, 30.0, t0);
    let late = t0 + Duration::from_secs(15);
    for f in &flows {
        let s = f.sojourns(late);
        let (p50, p90) = (percentile(&s, 0.5), percentile(&s, 0.9));
        assert!(p50 < Duration::from_millis(15), "p50 {p50:?}");
        assert!(p90 < Duration::from_millis(30), "p90 {p90:?}");
        assert!(
            f.marked > 0 && f.lost == 0,
            "{} marked, {} lost",
            f.marked,
            f.lost
        );
    }
    let st = q.stats(Class::TypeII);
    assert_eq!((st.overflow_drops, st.codel_drops), (0, 0), "{st:?}");
    let delivered: f64 = flows
        .iter()
        .map(|f| f.bytes_between(late, t0 + Duration::from_secs(30)))
        .sum::<f64>()
        / 15.0;
    assert!(delivered > 0.9 * RATE, "{delivered} B/s");
}

/// (d): Type I stays strictly ahead of a Type II flood of 200 flows (checked on every dequeue by
/// `run`): a Type I stream at 20 % of the link loses nothing and waits at most the packet on the
/// wire.
#[test]
fn type1_stays_ahead_of_a_type2_flood() {
    let t0 = Instant::now();
    let h = hasher();
    let mut flows: Vec<Flow> = (0..200u64)
        .map(|i| {
            let src = Source::Rate {
                rate: RATE * 2.0 / 200.0,
                len: 1_400,
            };
            Flow::new(src, Class::TypeII, i, &h)
        })
        .collect();
    let t1 = Source::Rate {
        rate: RATE * 0.2,
        len: 1_000,
    };
    flows.push(Flow::new(t1, Class::TypeI, 999, &h));
    let mut q = FairQueue::new(AqmConfig::default());
    run(&mut q, &mut flows, RATE, 3.0, t0);
    let t1 = &flows[200];
    assert_eq!(t1.lost, 0);
    let max = *t1.sojourns(t0).last().unwrap();
    let one_packet = Duration::from_secs_f64(1_400.0 / RATE);
    assert!(max <= one_packet + TICK, "Type I max sojourn {max:?}");
    assert_eq!(q.stats(Class::TypeI).overflow_drops, 0);
    assert!(q.stats(Class::TypeII).overflow_drops > 0);
}

/// (f): a flood of distinct flows (each packet a new 5-tuple, 16× the link): the bounds hold at every
/// step, flows that find their set full share a bucket (counted), and the buckets in use never
/// exceed the fixed table. (A sparse flow gets no protection from such a flood, by design: 100,000
/// one-packet flows per second each have a share far below a voice stream's 8.6 kB/s, so when the
/// new-flows list is 1,024 flows long the voice flow's second packet makes it a fat flow.)
#[test]
fn a_flood_of_new_flows_stays_bounded() {
    let t0 = Instant::now();
    let h = hasher();
    let flood = Source::Rate {
        rate: 0.0,
        len: 200,
    };
    let mut flows = vec![Flow::new(flood, Class::TypeII, 0, &h)];
    let mut q = FairQueue::new(AqmConfig::default());
    let mut free_at = t0;
    let mut dropped = Vec::new();
    for tick in 0..10_000u32 {
        let now = t0 + TICK * tick;
        drain(&mut q, &mut flows, &mut free_at, now, RATE);
        for k in 0..10u64 {
            let p = Pkt {
                flow: 0,
                len: 200,
                at: now,
                class: Class::TypeII,
            };
            flows[0].offered += 1;
            q.push(
                now,
                p,
                h.hash(&(u64::from(tick) * 10 + k)),
                false,
                &mut dropped,
            );
        }
        flows[0].lost += dropped.drain(..).count() as u64;
        assert!(q.len(Class::TypeII) <= MAX_QUEUE_PACKETS);
        assert!(q.bytes(Class::TypeII) <= MAX_QUEUE_BYTES);
        assert!(q.flow_stats(Class::TypeII).active_flows <= FLOW_BUCKETS);
    }
    let fs = q.flow_stats(Class::TypeII);
    assert!(fs.collisions > 0, "{fs:?}");
    let f = &flows[0];
    // The link stayed busy; what it could not carry was dropped, nothing piled up.
    assert!(f.sent as f64 * 200.0 >= 0.99 * RATE, "{} sent", f.sent);
    assert_eq!(f.offered, f.sent + f.lost + q.len(Class::TypeII) as u64);
}
