//! Unit tests of [`FairQueue`] (the simulations on virtual time are `tests/fair_queue.rs`).

use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;

/// Packets in these tests: (flow, sequence number).
type P = (u32, u32);

fn meta(class: Class, flow: u32, len: usize) -> Arrival {
    Arrival {
        class,
        flow: FlowHash(flow),
        len,
        ect: false,
    }
}

/// Hashes spread over the sets (the set comes from the high bits).
fn spread(i: u32) -> u32 {
    i.wrapping_mul(0x9e37_79b9)
}

fn no_drops(p: P, c: Class, r: DropReason) {
    panic!("unexpected drop of {p:?} ({c:?}, {r:?})");
}

fn sent(d: Option<Dequeued<P>>) -> P {
    match d {
        Some(Dequeued::Send(p, _)) => p,
        other => panic!("expected a send, got {other:?}"),
    }
}

#[test]
fn type1_is_always_dequeued_first() {
    let t = Instant::now();
    let mut q = FairQueue::new(AqmConfig::default());
    q.enqueue(t, meta(Class::TypeII, 1, 100), (1, 0), no_drops)
        .unwrap();
    q.enqueue(t, meta(Class::TypeII, 2, 100), (2, 0), no_drops)
        .unwrap();
    q.enqueue(t, meta(Class::TypeI, 3, 100), (3, 0), no_drops)
        .unwrap();
    assert_eq!(
        q.poll_dequeue(t),
        Some(Dequeued::Send((3, 0), Class::TypeI))
    );
    q.enqueue(t, meta(Class::TypeI, 3, 100), (3, 1), no_drops)
        .unwrap();
    assert_eq!(
        q.poll_dequeue(t),
        Some(Dequeued::Send((3, 1), Class::TypeI))
    );
    assert_eq!(
        q.poll_dequeue(t),
        Some(Dequeued::Send((1, 0), Class::TypeII))
    );
    assert_eq!(
        q.poll_dequeue(t),
        Some(Dequeued::Send((2, 0), Class::TypeII))
    );
    assert_eq!(q.poll_dequeue(t), None);
    assert!(q.is_empty());
    assert_eq!(q.flow_stats(Class::TypeII).active_flows, 0);
    assert_eq!(
        q.enqueue(t, meta(Class::TypeIII, 1, 1), (9, 9), no_drops),
        Err(((9, 9), DropReason::NotTunnelled))
    );
}

/// A flow that was idle is served before a backlogged one (the new-flows list), and only once per
/// quantum: then it takes turns like everyone else.
#[test]
fn a_sparse_flow_skips_the_backlog() {
    let t = Instant::now();
    let mut q = FairQueue::new(AqmConfig::default());
    for i in 0..100 {
        q.enqueue(t, meta(Class::TypeII, spread(1), 1_400), (1, i), no_drops)
            .unwrap();
    }
    // The bulk flow sends its first quantum from the new list (2 packets: the deficit goes
    // 1,514 → 114 → -1,286), then from the old list.
    for i in 0..3 {
        assert_eq!(sent(q.poll_dequeue(t)), (1, i));
    }
    // A newcomer goes first.
    q.enqueue(t, meta(Class::TypeII, spread(2), 172), (2, 0), no_drops)
        .unwrap();
    assert_eq!(sent(q.poll_dequeue(t)), (2, 0));
    let s = q.flow_stats(Class::TypeII);
    assert_eq!((s.new_flow_dequeues, s.active_flows), (3, 2), "{s:?}");
    assert_eq!(sent(q.poll_dequeue(t)), (1, 3));
    // The emptied sparse flow went to the old list, then out at its turn.
    let s = q.flow_stats(Class::TypeII);
    assert_eq!((s.new_flow_dequeues, s.active_flows), (3, 1), "{s:?}");
}

/// DRR in bytes: a flow of 64 KiB super-packets and one of 1,400-byte packets get the same bytes,
/// within one super-packet, whatever the packet counts.
#[test]
fn drr_shares_bytes_with_mixed_packet_sizes() {
    let t = Instant::now();
    let mut q = FairQueue::new(AqmConfig::default());
    let mut left = [0u32, 4, 150];
    for i in 0..left[1] {
        q.enqueue(t, meta(Class::TypeII, spread(1), 65_536), (1, i), no_drops)
            .unwrap();
    }
    for i in 0..left[2] {
        q.enqueue(t, meta(Class::TypeII, spread(2), 1_400), (2, i), no_drops)
            .unwrap();
    }
    let mut bytes = [0usize; 3];
    // While both are backlogged, their bytes differ by at most one super-packet and a quantum.
    while left[1] > 0 && left[2] > 0 {
        let (f, _) = sent(q.poll_dequeue(t));
        bytes[f as usize] += if f == 1 { 65_536 } else { 1_400 };
        left[f as usize] -= 1;
        let diff = bytes[1].abs_diff(bytes[2]);
        assert!(diff <= 65_536 + 1_514, "{bytes:?}");
    }
    assert!(
        bytes[1] >= 3 * 65_536 && bytes[2] >= 140 * 1_400,
        "{bytes:?}"
    );
}

/// Backlogged flows of 64 KiB packets take turns one packet each (the skipped rounds in which every
/// flow is in debt change nothing), and share bytes equally with a 1,400-byte flow.
#[test]
fn backlogged_super_packet_flows_take_turns() {
    let t = Instant::now();
    let mut q = FairQueue::new(AqmConfig::default());
    for i in 0..2 {
        for f in 1..=3 {
            q.enqueue(t, meta(Class::TypeII, spread(f), 65_536), (f, i), no_drops)
                .unwrap();
        }
    }
    let order: Vec<u32> = (0..6).map(|_| sent(q.poll_dequeue(t)).0).collect();
    assert_eq!(order, [1, 2, 3, 1, 2, 3]);
    assert_eq!(q.poll_dequeue(t), None);
    // Two 64 KiB flows and a 1,400-byte one, all backlogged: equal bytes within a super-packet
    // and a quantum at every step (the round skips included).
    let mut left = [0u32, 3, 3, 80];
    for i in 0..3 {
        for f in 1..=2 {
            q.enqueue(t, meta(Class::TypeII, spread(f), 65_536), (f, i), no_drops)
                .unwrap();
        }
    }
    for i in 0..left[3] {
        q.enqueue(t, meta(Class::TypeII, spread(3), 1_400), (3, i), no_drops)
            .unwrap();
    }
    let mut bytes = [0usize; 4];
    while left[1..].iter().all(|&l| l > 0) {
        let (f, _) = sent(q.poll_dequeue(t));
        bytes[f as usize] += if f == 3 { 1_400 } else { 65_536 };
        left[f as usize] -= 1;
        for a in 1..4 {
            for b in 1..4 {
                assert!(bytes[a].abs_diff(bytes[b]) <= 65_536 + 1_514, "{bytes:?}");
            }
        }
    }
    assert!(bytes[3] >= 65 * 1_400, "{bytes:?}");
}

/// At the packet bound the fattest flow loses packets from its head (a batch: half its backlog, at
/// most OVERFLOW_BATCH_PACKETS), and the arriving packet of a small flow is queued.
#[test]
fn overflow_drops_from_the_head_of_the_fattest_flow() {
    let t = Instant::now();
    let mut q = FairQueue::new(AqmConfig::default());
    // A fat flow (1,000 × 100 B) and a thin one (24 × 100 B): the packet bound.
    for i in 0..1_000 {
        q.enqueue(t, meta(Class::TypeII, spread(1), 100), (1, i), no_drops)
            .unwrap();
    }
    for i in 0..24 {
        q.enqueue(t, meta(Class::TypeII, spread(2), 100), (2, i), no_drops)
            .unwrap();
    }
    assert_eq!(q.len(Class::TypeII), MAX_QUEUE_PACKETS);
    let mut dropped = Vec::new();
    q.enqueue(t, meta(Class::TypeII, spread(3), 100), (3, 0), |p, c, r| {
        dropped.push((p, c, r));
    })
    .unwrap();
    let expect: Vec<_> = (0..OVERFLOW_BATCH_PACKETS as u32)
        .map(|i| ((1, i), Class::TypeII, DropReason::QueueFullPackets))
        .collect();
    assert_eq!(dropped, expect, "a batch from the fat flow's head");
    assert_eq!(q.stats(Class::TypeII).overflow_drops, 64);
    assert_eq!(q.stats(Class::TypeII).tail_drops, 0);
    assert_eq!(q.len(Class::TypeII), MAX_QUEUE_PACKETS - 64 + 1);
    // The byte bound: one 64 KiB packet more than fits drops half the fattest flow's backlog.
    let mut q = FairQueue::new(AqmConfig::default());
    for i in 0..6 {
        q.enqueue(t, meta(Class::TypeII, spread(1), 65_536), (1, i), no_drops)
            .unwrap();
    }
    for i in 0..2 {
        q.enqueue(t, meta(Class::TypeII, spread(2), 65_536), (2, i), no_drops)
            .unwrap();
    }
    let mut dropped = Vec::new();
    q.enqueue(
        t,
        meta(Class::TypeII, spread(2), 65_536),
        (2, 2),
        |p, _, r| {
            dropped.push((p, r));
        },
    )
    .unwrap();
    assert_eq!(
        dropped,
        [(1, 0), (1, 1), (1, 2)].map(|p| (p, DropReason::QueueFullBytes))
    );
    assert_eq!(q.bytes(Class::TypeII), 6 * 65_536);
}

/// A packet larger than the byte bound by itself cannot be queued.
#[test]
fn an_oversized_packet_is_refused() {
    let t = Instant::now();
    let mut q: FairQueue<P> = FairQueue::new(AqmConfig::default());
    assert_eq!(
        q.enqueue(
            t,
            meta(Class::TypeI, 1, MAX_QUEUE_BYTES + 1),
            (1, 0),
            no_drops
        ),
        Err(((1, 0), DropReason::QueueFullBytes))
    );
    assert_eq!(q.stats(Class::TypeI).tail_drops, 1);
    q.enqueue(t, meta(Class::TypeI, 1, MAX_QUEUE_BYTES), (1, 1), no_drops)
        .unwrap();
}

/// 8-way sets: eight flows of one set get a bucket each; the ninth shares one (a collision).
#[test]
fn eight_flows_of_one_set_get_their_own_buckets() {
    let t = Instant::now();
    let mut q = FairQueue::new(AqmConfig::default());
    // Hashes below 2^25 all fall in set 0 (the set is the hash's top 7 bits).
    for f in 1..=8 {
        q.enqueue(t, meta(Class::TypeII, f, 100), (f, 0), no_drops)
            .unwrap();
    }
    let s = q.flow_stats(Class::TypeII);
    assert_eq!((s.active_flows, s.collisions), (8, 0), "{s:?}");
    q.enqueue(t, meta(Class::TypeII, 9, 100), (9, 0), no_drops)
        .unwrap();
    let s = q.flow_stats(Class::TypeII);
    assert_eq!((s.active_flows, s.collisions), (8, 1), "{s:?}");
    // Once drained, a bucket is free for any flow of the set.
    while q.poll_dequeue(t).is_some() {}
    assert_eq!(q.flow_stats(Class::TypeII).active_flows, 0);
    q.enqueue(t, meta(Class::TypeII, 10, 100), (10, 0), no_drops)
        .unwrap();
    assert_eq!(q.flow_stats(Class::TypeII).collisions, 1);
}

/// A flood of distinct flows: the bounds hold, collisions share buckets, nothing grows.
#[test]
fn a_flood_of_distinct_flows_stays_bounded() {
    let t = Instant::now();
    let mut q = FairQueue::new(AqmConfig::default());
    let mut drops = 0u64;
    for i in 0..100_000u32 {
        let r = q.enqueue(t, meta(Class::TypeII, spread(i), 600), (i, 0), |_, _, _| {
            drops += 1;
        });
        assert!(r.is_ok());
        assert!(q.len(Class::TypeII) <= MAX_QUEUE_PACKETS);
        assert!(q.bytes(Class::TypeII) <= MAX_QUEUE_BYTES);
        let s = q.flow_stats(Class::TypeII);
        assert!(s.active_flows <= FLOW_BUCKETS);
    }
    // 600-byte packets: the byte bound (873 packets) comes before the packet bound.
    assert_eq!(q.len(Class::TypeII), MAX_QUEUE_BYTES / 600);
    assert_eq!(drops, 100_000 - q.len(Class::TypeII) as u64);
    let s = q.flow_stats(Class::TypeII);
    assert!(s.collisions > 0, "{s:?}");
    assert_eq!(q.stats(Class::TypeII).overflow_drops, drops);
    // The storage was allocated once, at its fixed size.
    assert_eq!(q.type2.slots.len(), MAX_QUEUE_PACKETS);
    assert_eq!(q.type2.flows.len(), FLOW_BUCKETS);
    assert!(
        q.type1.slots.is_empty(),
        "an unused class allocates nothing"
    );
}

/// The documented bookkeeping sizes (FairQueue's memory bound).
#[test]
fn bookkeeping_sizes_match_the_docs() {
    assert!(
        std::mem::size_of::<Flow>() <= 72,
        "{}",
        std::mem::size_of::<Flow>()
    );
    // A slot is the packet plus 32 bytes (len, time, ECT, next, the Option's tag).
    assert!(std::mem::size_of::<Slot<[u8; 48]>>() <= 48 + 32);
}

/// CoDel per flow: a flow whose packets stand in the queue is signalled, a sparse flow whose packets
/// do not wait is not.
#[test]
fn codel_signals_the_flow_that_builds_the_queue() {
    let t0 = Instant::now();
    let aqm = AqmConfig {
        ecn: false,
        ..AqmConfig::default()
    };
    let mut q = FairQueue::new(aqm);
    let mut drops = [0u32; 3];
    let mut seq = 0;
    // 1 ms per 1,500-byte packet; the bulk flow offers 2 per ms, the sparse one 1 per 20 ms.
    for ms in 0..2_000u32 {
        let now = t0 + Duration::from_millis(u64::from(ms));
        for _ in 0..2 {
            seq += 1;
            let _ = q.enqueue(
                now,
                meta(Class::TypeII, spread(1), 1_500),
                (1, seq),
                |_, _, _| {},
            );
        }
        if ms % 20 == 0 {
            q.enqueue(now, meta(Class::TypeII, spread(2), 172), (2, ms), no_drops)
                .unwrap();
        }
        // One packet sent per ms; CoDel's drops before it cost no link time.
        while let Some(Dequeued::Drop((f, _), _, DropReason::Codel)) = q.poll_dequeue(now) {
            drops[f as usize] += 1;
        }
    }
    assert!(drops[1] > 10, "{drops:?}");
    assert_eq!(drops[2], 0, "{drops:?}");
}

/// The sojourn histogram counts what is handed out to send, per class, with the time passed in:
/// enqueue at t0, dequeue 3 ms later lands in `le = 5 ms`; CoDel's drops are not in it.
#[test]
fn sojourn_is_measured_at_dequeue_per_class() {
    let t0 = Instant::now();
    let mut q = FairQueue::new(AqmConfig::default());
    q.enqueue(t0, meta(Class::TypeI, 1, 100), (1, 0), no_drops)
        .unwrap();
    q.enqueue(t0, meta(Class::TypeII, 2, 100), (2, 0), no_drops)
        .unwrap();
    q.enqueue(t0, meta(Class::TypeII, 2, 100), (2, 1), no_drops)
        .unwrap();
    sent(q.poll_dequeue(t0 + Duration::from_millis(3)));
    sent(q.poll_dequeue(t0 + Duration::from_millis(3)));
    sent(q.poll_dequeue(t0 + Duration::from_millis(40)));
    let (s1, s2) = (q.sojourn(Class::TypeI), q.sojourn(Class::TypeII));
    assert_eq!((s1.count, s1.buckets[5]), (1, 1), "{s1:?}");
    assert_eq!(
        (s2.count, s2.buckets[5], s2.buckets[8]),
        (2, 1, 1),
        "{s2:?}"
    );
    assert_eq!(s2.sum_ns, 43_000_000);
    assert_eq!(q.sojourn(Class::TypeIII).count, 0);

    // A standing queue: CoDel drops some packets; only the sent ones are in the histogram.
    let aqm = AqmConfig {
        ecn: false,
        ..AqmConfig::default()
    };
    let mut q = FairQueue::new(aqm);
    let (mut sends, mut drops) = (0u64, 0u64);
    for ms in 0..1_000u32 {
        let now = t0 + Duration::from_millis(u64::from(ms));
        for i in 0..2 {
            let _ = q.enqueue(
                now,
                meta(Class::TypeII, spread(1), 1_500),
                (1, ms * 2 + i),
                |_, _, _| {},
            );
        }
        loop {
            match q.poll_dequeue(now) {
                Some(Dequeued::Drop(..)) => drops += 1,
                Some(_) => {
                    sends += 1;
                    break;
                }
                None => break,
            }
        }
    }
    let h = q.sojourn(Class::TypeII);
    assert!(drops > 0, "CoDel dropped nothing");
    assert_eq!(h.count, sends);
    assert_eq!(h.count, q.stats(Class::TypeII).sent);
    let slow: u64 = h.buckets[6..].iter().sum();
    assert!(slow > 0, "a standing queue waits more than 5 ms: {h:?}");
}

#[derive(Debug, Clone)]
enum Op {
    Enqueue {
        class: bool,
        flow: u8,
        len: u16,
        ect: bool,
    },
    Dequeue,
    Advance(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (any::<bool>(), 0u8..40, 0u16..=65_535, any::<bool>())
            .prop_map(|(class, flow, len, ect)| Op::Enqueue { class, flow, len, ect }),
        2 => Just(Op::Dequeue),
        1 => (0u16..300).prop_map(Op::Advance),
    ]
}

proptest! {
    /// Every accepted packet leaves exactly once (sent, marked or dropped), the bounds always hold,
    /// and the counters add up.
    #[test]
    fn every_packet_leaves_exactly_once(ops in proptest::collection::vec(op(), 1..3_000)) {
        let mut now = Instant::now();
        let mut q = FairQueue::new(AqmConfig::default());
        // Flows share hashes on purpose (40 flows, 5 distinct set indices) to force collisions.
        let mut seen = std::collections::BTreeMap::new();
        let mut next = 0u32;
        let outcome = |seen: &mut std::collections::BTreeMap<u32, u8>, id: u32| {
            let n = seen.entry(id).or_insert(0);
            *n += 1;
            assert_eq!(*n, 1, "packet {id} left twice");
        };
        for o in ops {
            match o {
                Op::Enqueue { class, flow, len, ect } => {
                    let class = if class { Class::TypeI } else { Class::TypeII };
                    let id = next;
                    next += 1;
                    let a = Arrival { class, flow: FlowHash(u32::from(flow % 5) << 28 | u32::from(flow)), len: usize::from(len), ect };
                    let r = q.enqueue(now, a, (u32::from(flow), id), |p, _, _| outcome(&mut seen, p.1));
                    prop_assert!(r.is_ok());
                }
                Op::Dequeue => {
                    if let Some(Dequeued::Send(p, _) | Dequeued::Mark(p, _) | Dequeued::Drop(p, _, _)) = q.poll_dequeue(now) {
                        outcome(&mut seen, p.1);
                    }
                }
                Op::Advance(ms) => now += Duration::from_millis(u64::from(ms)),
            }
            for c in [Class::TypeI, Class::TypeII] {
                prop_assert!(q.len(c) <= MAX_QUEUE_PACKETS);
                prop_assert!(q.bytes(c) <= MAX_QUEUE_BYTES);
            }
        }
        while let Some(Dequeued::Send(p, _) | Dequeued::Mark(p, _) | Dequeued::Drop(p, _, _)) = q.poll_dequeue(now) {
            outcome(&mut seen, p.1);
        }
        prop_assert!(q.is_empty());
        prop_assert_eq!(seen.len() as u32, next, "every packet left");
        for c in [Class::TypeI, Class::TypeII] {
            let s = q.stats(c);
            prop_assert_eq!(s.enqueued, s.sent + s.codel_drops + s.overflow_drops);
            prop_assert_eq!(q.flow_stats(c).active_flows, 0);
        }
    }
}
