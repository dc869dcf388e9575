//! Deterministic simulations of the resequencer on virtual time, unit cases of Alg. 1 and a proptest.

use super::*;
use proptest::prelude::*;

const MS: Duration = Duration::from_millis(1);

fn params(frames: usize, hold_ms: u64) -> Params {
    Params {
        buffer_frames: 256,
        threshold: Threshold {
            frames,
            hold: MS * hold_ms as u32,
        },
        lrf: DEFAULT_LRF,
        idle_timeout: Duration::from_secs(30),
        adapt_hold: false,
    }
}

/// A virtual-time receiver: feeds arrivals, runs timers when due, records (delivery time, seq).
struct Sim {
    r: Resequencer<u8, u32>,
    t0: Instant,
    now: Instant,
    out: Vec<(Instant, u8, u32)>,
}

impl Sim {
    fn new(p: Params) -> Sim {
        let t0 = Instant::now();
        Sim {
            r: Resequencer::new(p),
            t0,
            now: t0,
            out: Vec::new(),
        }
    }

    fn drain(&mut self) {
        while let Some(d) = self.r.poll_deliver() {
            assert_eq!(d.seq, d.packet, "the packet travels with its own seq");
            self.out.push((self.now, d.key, d.seq));
        }
    }

    /// Advances to `t`, running every timer due on the way at its own time.
    fn advance(&mut self, t: Instant) {
        while let Some(due) = self.r.poll_timeout() {
            if due > t {
                break;
            }
            self.now = self.now.max(due);
            self.r.handle_timeout(self.now);
            self.drain();
        }
        self.now = self.now.max(t);
    }

    fn arrive(&mut self, t: Instant, key: u8, seq: u32) {
        self.advance(t);
        self.r.handle_frame(self.now, key, seq, seq, 1_400);
        self.drain();
    }

    fn arrive_on(&mut self, t: Instant, key: u8, lane: u64, seq: u32) {
        self.advance(t);
        self.r.handle_frame_on(self.now, key, lane, seq, seq, 1_400);
        self.drain();
    }

    fn seqs(&self) -> Vec<u32> {
        self.out.iter().map(|(_, _, s)| *s).collect()
    }
}

/// Frames `0..n` sent every `gap` round robin over paths with the given one-way delays, minus the
/// `lost` ones, in arrival order (ties: send order).
fn striped(
    t0: Instant,
    n: u32,
    gap: Duration,
    delays_ms: &[u64],
    lost: &[u32],
) -> Vec<(Instant, u32)> {
    let mut v: Vec<(Instant, u32)> = (0..n)
        .filter(|s| !lost.contains(s))
        .map(|s| {
            let d = delays_ms[s as usize % delays_ms.len()];
            (t0 + gap * s + MS * d as u32, s)
        })
        .collect();
    v.sort();
    v
}

#[test]
fn reordering_over_paths_with_different_delays_is_repaired() {
    // 25 ms and 40 ms paths (MDI 0.115), a frame every 0.5 ms: up to 30 frames ahead of a gap.
    let mut sim = Sim::new(params(64, 60));
    let t0 = sim.t0;
    let arrivals = striped(t0, 2_000, MS / 2, &[25, 40], &[]);
    let mut in_order_arrivals = 0;
    let mut prev = None;
    for (t, s) in &arrivals {
        if prev.is_none_or(|p| *s == p + 1) {
            in_order_arrivals += 1;
        }
        prev = Some(*s);
        sim.arrive(*t, 1, *s);
    }
    assert!(
        in_order_arrivals < 1_500,
        "the paths really reorder ({in_order_arrivals})"
    );
    assert_eq!(
        sim.seqs(),
        (0..2_000).collect::<Vec<_>>(),
        "delivered in order"
    );
    let st = sim.r.stats();
    assert_eq!(
        st.released_threshold + st.released_timeout + st.overflow,
        0,
        "{st:?}"
    );
    assert_eq!(st.dup_late, 0);
    assert!(st.buffered > 900, "{st:?}");
    // The fast path's frames wait at most the delay difference (15 ms) for the slow path.
    for (t, _, s) in &sim.out {
        let arrived = arrivals
            .iter()
            .find(|(_, x)| x == s)
            .map(|(t, _)| *t)
            .unwrap();
        assert!(*t - arrived <= MS * 16, "seq {s} held {:?}", *t - arrived);
    }
}

#[test]
fn four_paths_with_equal_rates_are_repaired() {
    let mut sim = Sim::new(params(128, 60));
    let t0 = sim.t0;
    for (t, s) in striped(t0, 4_000, MS / 4, &[10, 12, 20, 30], &[]) {
        sim.arrive(t, 7, s);
    }
    assert_eq!(sim.seqs(), (0..4_000).collect::<Vec<_>>());
}

#[test]
fn a_lost_frame_releases_after_the_hold_time_and_nothing_stalls_longer() {
    let hold = 30;
    // A count threshold that never triggers (≥ frames behind the gap): only the time side acts.
    let mut sim = Sim::new(params(255, hold));
    let t0 = sim.t0;
    let lost = [100, 101, 500];
    let arrivals = striped(t0, 1_000, MS, &[25, 35], &lost);
    for (t, s) in &arrivals {
        sim.arrive(*t, 1, *s);
    }
    sim.advance(t0 + Duration::from_secs(5));
    let st = sim.r.stats();
    assert!(st.released_timeout > 0, "{st:?}");
    assert_eq!(sim.out.len(), arrivals.len(), "every frame out once");
    for (t, _, s) in &sim.out {
        let arrived = arrivals
            .iter()
            .find(|(_, x)| x == s)
            .map(|(t, _)| *t)
            .unwrap();
        assert!(
            *t - arrived <= MS * hold as u32,
            "seq {s} stalled {:?}",
            *t - arrived
        );
    }
    // Order is kept except right after a release (the LRF window lets stragglers through at once).
    let seqs = sim.seqs();
    let inversions = seqs.windows(2).filter(|w| w[1] < w[0]).count();
    assert!(
        inversions <= 2 * DEFAULT_LRF as usize,
        "{inversions} inversions"
    );
}

#[test]
fn a_frame_every_lane_has_passed_is_released_at_once() {
    // As above, but the frames say which path (lane) they came on: a gap both lanes have passed is
    // a frame the sender dropped, released without waiting the (long) hold time.
    let hold = 100;
    let mut sim = Sim::new(params(255, hold));
    let t0 = sim.t0;
    let lost = [300, 301, 700];
    let arrivals = striped(t0, 1_000, MS, &[25, 35], &lost);
    for (t, s) in &arrivals {
        sim.arrive_on(*t, 1, u64::from(*s % 2), *s);
    }
    sim.advance(t0 + Duration::from_secs(5));
    let st = sim.r.stats();
    assert_eq!(st.released_timeout, 0, "{st:?}");
    assert!(st.released_lost > 0, "{st:?}");
    assert_eq!(
        sim.seqs(),
        arrivals
            .iter()
            .map(|(_, s)| *s)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>(),
        "in order, nothing lost"
    );
    for (t, _, s) in &sim.out {
        let arrived = arrivals
            .iter()
            .find(|(_, x)| x == s)
            .map(|(t, _)| *t)
            .unwrap();
        assert!(*t - arrived <= MS * 12, "seq {s} held {:?}", *t - arrived);
    }
}

#[test]
fn a_lane_not_seen_yet_is_not_overlooked_at_the_start() {
    // Frames 0, 2, 4 on the slow lane are still on the way while 1, 3, 5 arrive on the fast one:
    // one lane seen, so nothing is declared lost.
    let mut sim = Sim::new(params(64, 50));
    let t = sim.t0;
    for s in [1, 3, 5] {
        sim.arrive_on(t, 1, 1, s);
    }
    assert_eq!(sim.seqs(), Vec::<u32>::new());
    for s in [0, 2, 4] {
        sim.arrive_on(t + MS * 10, 1, 0, s);
    }
    assert_eq!(sim.seqs(), [0, 1, 2, 3, 4, 5]);
    assert_eq!(sim.r.stats().released_lost, 0);
}

#[test]
fn the_count_threshold_releases_ignoring_the_gap_then_lrf() {
    let mut sim = Sim::new(params(10, 1_000));
    let t = sim.t0;
    sim.arrive(t, 1, 0);
    // 1 is lost; 2..=12 are held, the 11th held frame (more than T = 10) releases them all.
    for s in 2..=11 {
        sim.arrive(t, 1, s);
    }
    assert_eq!(sim.seqs(), [0]);
    sim.arrive(t, 1, 12);
    assert_eq!(sim.seqs(), [0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    assert_eq!(sim.r.stats().released_threshold, 11);
    // expected = 12 + LRF = 32: 1 (late) and 13..=31 pass at once, in arrival order.
    sim.arrive(t, 1, 14);
    sim.arrive(t, 1, 1);
    sim.arrive(t, 1, 13);
    assert_eq!(&sim.seqs()[12..], [14, 1, 13]);
    assert_eq!(sim.r.stats().dup_late, 3);
    // From 32 on, resequencing is back.
    sim.arrive(t, 1, 33);
    sim.arrive(t, 1, 32);
    assert_eq!(&sim.seqs()[15..], [32, 33]);
}

#[test]
fn duplicates_and_late_frames_pass_at_once() {
    let mut sim = Sim::new(params(10, 50));
    let t = sim.t0;
    sim.arrive(t, 1, 1005); // a flow met late (≥ S): starts here
    sim.arrive(t, 1, 1005); // duplicate of the delivered frame
    sim.arrive(t, 1, 1003); // late (before the flow's first)
    sim.arrive(t, 1, 1007); // held
    sim.arrive(t, 1, 1007); // duplicate of a held frame
    assert_eq!(sim.seqs(), [1005, 1005, 1003, 1007]);
    assert_eq!(sim.r.buffered_frames(), 1);
    sim.arrive(t, 1, 1006);
    assert_eq!(sim.seqs(), [1005, 1005, 1003, 1007, 1006, 1007]);
    let st = sim.r.stats();
    assert_eq!((st.dup_late, st.in_order, st.released_in_order), (3, 2, 1));
}

#[test]
fn a_flow_whose_start_is_overtaken_waits_for_zero() {
    let mut sim = Sim::new(params(10, 50));
    let t = sim.t0;
    sim.arrive(t, 1, 2);
    sim.arrive(t, 1, 3);
    assert_eq!(sim.seqs(), Vec::<u32>::new(), "held for 0 and 1");
    sim.arrive(t, 1, 0);
    sim.arrive(t, 1, 1);
    assert_eq!(sim.seqs(), [0, 1, 2, 3]);
    // If 0 never comes, the hold time releases the rest.
    sim.arrive(t, 2, 5);
    sim.advance(t + MS * 60);
    assert_eq!(sim.seqs(), [0, 1, 2, 3, 5]);
    assert_eq!(sim.r.stats().released_timeout, 1);
}

#[test]
fn flows_are_independent() {
    let mut sim = Sim::new(params(10, 50));
    let t = sim.t0;
    sim.arrive(t, 1, 0);
    sim.arrive(t, 2, 1_000);
    sim.arrive(t, 1, 2); // held behind 1
    sim.arrive(t, 2, 1_001); // flow 2 unaffected
    sim.arrive(t, 1, 1);
    let got: Vec<(u8, u32)> = sim.out.iter().map(|(_, k, s)| (*k, *s)).collect();
    assert_eq!(got, [(1, 0), (2, 1_000), (2, 1_001), (1, 1), (1, 2)]);
}

#[test]
fn sequence_numbers_wrap() {
    let mut sim = Sim::new(params(64, 50));
    let t = sim.t0;
    let base = u32::MAX - 5;
    sim.arrive(t, 1, base);
    let order = [2u32, 1, 4, 3, 6, 5, 8, 7, 10, 9];
    for o in order {
        sim.arrive(t, 1, base.wrapping_add(o));
    }
    let want: Vec<u32> = (0..=10).map(|o| base.wrapping_add(o)).collect();
    assert_eq!(sim.seqs(), want);
    assert_eq!(sim.r.stats().dup_late, 0);
}

#[test]
fn a_restarted_sequence_resyncs() {
    let mut sim = Sim::new(params(64, 50));
    let t = sim.t0;
    for s in [1_000_000, 1_000_002] {
        sim.arrive(t, 1, s);
    }
    // The sender forgot the flow and starts again at 0: not "late" for the next 2^31 frames.
    sim.arrive(t, 1, 0);
    sim.arrive(t, 1, 2);
    sim.arrive(t, 1, 1);
    assert_eq!(sim.seqs(), [1_000_000, 1_000_002, 0, 1, 2]);
    let st = sim.r.stats();
    assert_eq!((st.resyncs, st.released_flush), (1, 1));
}

#[test]
fn a_restart_forgets_the_old_lanes() {
    let mut sim = Sim::new(params(64, 50));
    let t = sim.t0;
    // A long-running flow on two lanes, then the sender restarts its numbering at 0.
    for s in 0..1_000u32 {
        sim.arrive_on(t + MS * s, 1, u64::from(s % 2), 1_000_000 + s);
    }
    let later = t + Duration::from_secs(2);
    for (i, s) in [0u32, 2, 1, 3, 5, 4].into_iter().enumerate() {
        sim.arrive_on(later + MS * i as u32, 1, u64::from(s % 2), s);
    }
    assert_eq!(&sim.seqs()[1_000..], [0, 1, 2, 3, 4, 5]);
    let st = sim.r.stats();
    assert_eq!(
        (st.resyncs, st.released_lost, st.dup_late),
        (1, 0, 0),
        "{st:?}"
    );
}

#[test]
fn idle_flows_expire() {
    let mut p = params(64, 50);
    p.idle_timeout = Duration::from_secs(5);
    let mut sim = Sim::new(p);
    let t = sim.t0;
    sim.arrive(t, 1, 0);
    sim.arrive(t + Duration::from_secs(3), 2, 0);
    assert_eq!(sim.r.flows(), 2);
    sim.advance(t + Duration::from_secs(7));
    assert_eq!(sim.r.flows(), 1);
    sim.advance(t + Duration::from_secs(10));
    assert_eq!(sim.r.flows(), 0);
    assert_eq!(sim.r.poll_timeout(), None);
    assert_eq!(sim.r.stats().flows_expired, 2);
}

#[test]
fn the_buffer_size_s_forwards_the_lowest_early() {
    let mut p = params(10, 1_000);
    p.buffer_frames = 4; // T is clamped below S: 3
    let mut r: Resequencer<u8, u32> = Resequencer::new(p);
    assert_eq!(r.params().threshold.frames, 3);
    let t = Instant::now();
    r.handle_frame(t, 1, 0, 0, 100);
    for s in [3, 2, 5] {
        r.handle_frame(t, 1, s, s, 100);
    }
    assert_eq!(r.buffered_frames(), 3);
    // A 4th held frame exceeds T = 3: all released.
    r.handle_frame(t, 1, 4, 4, 100);
    let got: Vec<u32> = std::iter::from_fn(|| r.poll_deliver())
        .map(|d| d.seq)
        .collect();
    assert_eq!(got, [0, 2, 3, 4, 5]);
}

#[test]
fn memory_stays_bounded_under_an_adversarial_stream() {
    // Every flow opens a gap at once and then sends 64 KiB frames far ahead of it, over more flows
    // than MAX_FLOWS: no bound may be exceeded at any step, and nothing is lost.
    let p = Params {
        buffer_frames: MAX_BUFFER_FRAMES,
        threshold: Threshold {
            frames: MAX_BUFFER_FRAMES - 1,
            hold: MAX_HOLD,
        },
        lrf: DEFAULT_LRF,
        idle_timeout: Duration::from_secs(30),
        adapt_hold: false,
    };
    let mut r: Resequencer<u32, u64> = Resequencer::new(p);
    let t = Instant::now();
    let mut handed = 0u64;
    let mut delivered = 0u64;
    for round in 0..300u32 {
        for flow in 0..(MAX_FLOWS as u32 + 8) {
            let seq = if round == 0 { 0 } else { round + 1 };
            r.handle_frame(t, flow.wrapping_mul(7) % 1_100, seq, handed, 65_535);
            handed += 1;
            while r.poll_deliver().is_some() {
                delivered += 1;
            }
            assert!(r.buffered_bytes() <= MAX_TOTAL_BYTES);
            assert!(r.flows() <= MAX_FLOWS);
        }
    }
    assert!(r.stats().overflow > 0);
    assert_eq!(delivered + r.buffered_frames() as u64, handed);
}

#[test]
fn threshold_from_paths_follows_the_derivation() {
    // Seed 001 Fig. 5(b): 25 ms and 50 ms, MDI = 50/75 - 0.5 = 1/6; two 10 Mbit/s paths.
    let rates = [1_250_000u64, 1_250_000];
    let t = Threshold::from_delays(&[MS * 25, MS * 50], &rates, 1_500, 1_024);
    // Δ = 25 ms, hold = 2·25 + 5 = 55 ms; T = 0.055 s · 2.5 MB/s / 1500 B = 91.7 → 92 frames.
    assert_eq!(t.hold, MS * 55);
    assert_eq!(t.frames, 92);
    let same = Threshold::from_paths(1.0 / 6.0, MS * 25, &rates, 1_500, 1_024);
    assert_eq!(same.frames, 92);
    // Equal delays: only the slack; at least MIN_THRESHOLD_FRAMES.
    let eq = Threshold::from_delays(&[MS * 25, MS * 25], &rates, 1_500, 1_024);
    assert_eq!((eq.hold, eq.frames), (MIN_HOLD, MIN_THRESHOLD_FRAMES));
    // Huge imbalance or bandwidth: capped by MAX_HOLD and S - 1.
    let big = Threshold::from_paths(0.45, MS * 100, &[1_250_000_000], 1_500, 1_024);
    assert_eq!((big.hold, big.frames), (MAX_HOLD, 1_023));
    let nan = Threshold::from_paths(f64::NAN, MS, &[], 0, 0);
    assert!(nan.frames >= 1 && nan.hold <= MAX_HOLD);
}

#[derive(Debug, Clone)]
enum Op {
    Frame {
        flow: u8,
        lane: u64,
        delta: i32,
        len: usize,
    },
    Wait(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u8..4, 0u64..3, -40i32..80, 1usize..70_000)
            .prop_map(|(flow, lane, delta, len)| Op::Frame { flow, lane, delta, len }),
        1 => (0u16..300).prop_map(Op::Wait),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// Never panics; every frame comes out exactly once (no drops), no frame waits past the hold
    /// time, and the bounds hold at every step.
    #[test]
    fn every_frame_exactly_once(
        ops in prop::collection::vec(op(), 1..400),
        s in 2usize..64,
        t in 1usize..64,
        adapt_hold in any::<bool>(),
    ) {
        let p = Params {
            buffer_frames: s,
            threshold: Threshold { frames: t, hold: MS * 20 },
            lrf: DEFAULT_LRF,
            idle_timeout: Duration::from_secs(1),
            adapt_hold,
        };
        // A measured hold may grow up to MAX_MEASURED_HOLD, never beyond.
        let hold = if adapt_hold { MAX_MEASURED_HOLD } else { MS * 20 };
        let mut r: Resequencer<u8, usize> = Resequencer::new(p);
        let t0 = Instant::now();
        let mut now = t0;
        let mut cursor = [0u32; 4];
        let mut arrived: Vec<Instant> = Vec::new();
        let mut seen: Vec<bool> = Vec::new();
        let check = |r: &mut Resequencer<u8, usize>, now: Instant, seen: &mut Vec<bool>, arrived: &[Instant]| {
            while let Some(d) = r.poll_deliver() {
                prop_assert!(!seen[d.packet], "delivered twice");
                seen[d.packet] = true;
                prop_assert!(now - arrived[d.packet] <= hold, "held too long");
            }
            prop_assert!(r.buffered_bytes() <= MAX_TOTAL_BYTES);
            Ok(())
        };
        for o in ops {
            match o {
                Op::Frame { flow, lane, delta, len } => {
                    let c = &mut cursor[usize::from(flow)];
                    let seq = c.wrapping_add_signed(delta);
                    *c = c.wrapping_add(1);
                    let id = seen.len();
                    seen.push(false);
                    arrived.push(now);
                    r.handle_frame_on(now, flow, lane, seq, id, len);
                    check(&mut r, now, &mut seen, &arrived)?;
                }
                Op::Wait(ms) => {
                    let until = now + MS * u32::from(ms);
                    while let Some(due) = r.poll_timeout() {
                        if due > until { break; }
                        now = now.max(due);
                        r.handle_timeout(now);
                        check(&mut r, now, &mut seen, &arrived)?;
                    }
                    now = until;
                }
            }
        }
        let st = r.stats();
        let counted = st.in_order + st.dup_late + st.released_in_order + st.released_threshold
            + st.released_timeout + st.released_lost + st.released_flush + st.overflow
            + r.buffered_frames() as u64;
        prop_assert_eq!(counted, st.frames_in);
        // Run all timers: every frame comes out.
        let end = now + Duration::from_secs(10);
        while let Some(due) = r.poll_timeout() {
            if due > end { break; }
            now = now.max(due);
            r.handle_timeout(now);
            check(&mut r, now, &mut seen, &arrived)?;
        }
        prop_assert!(seen.iter().all(|s| *s), "every frame delivered");
        prop_assert_eq!(r.flows(), 0);
    }
}

/// Striping over 25 and 85 ms (60 ms of skew, e.g. queues the paths' RTTs do not show) with a
/// 10 ms hold configured: the counters after 2 s and at the end, and `T` in force at the end.
fn skewed_run(adapt_hold: bool) -> (Stats, Stats, Threshold) {
    let mut p = params(1_000, 10);
    p.buffer_frames = 4_096;
    p.adapt_hold = adapt_hold;
    let mut sim = Sim::new(p);
    let t0 = sim.t0;
    // A frame every 0.5 ms (2,000 frames/s), 4 s.
    let arrivals = striped(t0, 8_000, MS / 2, &[25, 85], &[]);
    let mut half = None;
    for (t, s) in &arrivals {
        if half.is_none() && *t >= t0 + Duration::from_secs(2) {
            half = Some(sim.r.stats());
        }
        sim.arrive(*t, 1, *s);
    }
    sim.advance(t0 + Duration::from_secs(5));
    let mut seen = sim.seqs();
    seen.sort_unstable();
    assert_eq!(seen, (0..8_000).collect::<Vec<_>>(), "every frame once");
    (half.unwrap(), sim.r.stats(), sim.r.threshold())
}

#[test]
fn the_hold_follows_the_measured_skew() {
    // A fixed 10 ms hold against 60 ms of skew: gaps released all the time, frames then late.
    let (_, fixed, t) = skewed_run(false);
    assert_eq!(t.hold, MS * 10);
    assert!(fixed.released_timeout > 1_000, "{fixed:?}");
    assert!(fixed.late_after_release > 1_000, "{fixed:?}");
    // Measured: the first late frames lengthen the hold to ~60·5/4 + 5 = 80 ms, after which
    // every gap fills in order. A late frame's sample counts from the oldest frame held when its
    // gap was released, so it may exceed the skew by up to the hold then (10 ms): ≤ 92.5 ms.
    let (half, adapted, t) = skewed_run(true);
    assert!(
        t.hold >= MS * 75 && t.hold <= MS * 93,
        "hold {:?} for 60 ms of skew",
        t.hold
    );
    assert!(t.frames > 1_000, "the count grows with the hold: {t:?}");
    assert_eq!(
        adapted.released_timeout, half.released_timeout,
        "no hold-time release in the second half: {adapted:?}"
    );
    assert_eq!(adapted.late_after_release, half.late_after_release);
    assert!(adapted.gaps_filled > 1_000, "{adapted:?}");
    assert!(
        adapted.late_after_release < fixed.late_after_release / 10,
        "{adapted:?} vs {fixed:?}"
    );
}

#[test]
fn the_measured_hold_is_bounded_and_falls_back() {
    let mut p = params(100, 10);
    p.adapt_hold = true;
    let mut sim = Sim::new(p);
    let t0 = sim.t0;
    // Frame 1 arrives, frame 0 only 1.5 s later: a 1.5 s skew sample (its gap was released after
    // 10 ms, so frame 0 comes late).
    sim.arrive(t0, 1, 1);
    sim.arrive(t0 + Duration::from_millis(1_500), 1, 0);
    assert_eq!(sim.r.stats().late_after_release, 1);
    assert_eq!(sim.r.measured_skew(), Some(Duration::from_millis(1_500)));
    assert_eq!(sim.r.threshold().hold, MAX_MEASURED_HOLD);
    // Ten quiet seconds later the sample has left the window: the configured hold again.
    sim.arrive(t0 + Duration::from_secs(12), 1, 2);
    assert_eq!(sim.r.measured_skew(), None);
    assert_eq!(sim.r.threshold(), sim.r.params().threshold);
    // Without adapt_hold a sample changes nothing.
    let mut sim = Sim::new(params(100, 10));
    sim.arrive(t0, 1, 1);
    sim.arrive(t0 + Duration::from_millis(300), 1, 0);
    assert_eq!(sim.r.threshold().hold, MS * 10);
}
