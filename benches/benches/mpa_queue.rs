//! criterion benchmarks of a connection queue's per-packet work (issue #16; STYLE §7): the single
//! CoDel FIFO per class (`PriorityQueue`, the queue before per-flow fair queueing) against the
//! per-flow fair queue (`FairQueue`), side by side in one run, for 1,400-byte packets and 64 KiB GSO
//! super-packets (`BytesMut` buffers, as the gateway queues them). One iteration enqueues a batch
//! round robin over `flows` inner flows and dequeues until empty; the batch stays under the byte
//! bound, so nothing is dropped and CoDel never acts (the common case: the socket keeps up). Also the
//! Router's added per-packet work, the keyed flow hash of a 5-tuple.
//! Run: `cargo bench -p mms-benches --bench mpa_queue`; instruction counts of one case:
//! `MPA_QUEUE_ITERS=2000 MPA_QUEUE_CASE=fair/1400B/64flows valgrind --tool=callgrind <bench binary>`.

// A test/bench crate: clippy.toml allows these in #[test] functions only, not in their helpers.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion, Throughput};
use mpa::classifier::FlowKey;
use mpa::framing::BytesMut;
use mpa::queue::{
    AqmConfig, Arrival, Dequeued, FairQueue, FlowHash, FlowHasher, PriorityQueue, MAX_QUEUE_BYTES,
};
use mpa::Class;

/// (name, packet length, packets per batch): as many as fit under the byte bound, at most 256.
fn cases() -> [(&'static str, usize, usize); 2] {
    [
        ("1400B", 1_400, 256),
        ("64KiB", 65_547, MAX_QUEUE_BYTES / 65_547),
    ]
}

fn key(port: u16) -> FlowKey {
    FlowKey {
        src: IpAddr::V4(Ipv4Addr::new(198, 19, 1, 10)),
        dst: IpAddr::V4(Ipv4Addr::new(198, 19, 2, 10)),
        protocol: 6,
        src_port: port,
        dst_port: 5001,
    }
}

fn take(d: Dequeued<BytesMut>) -> BytesMut {
    match d {
        Dequeued::Send(p, _) | Dequeued::Mark(p, _) | Dequeued::Drop(p, _, _) => p,
    }
}

/// One batch through the single FIFO.
fn fifo_batch(q: &mut PriorityQueue<BytesMut>, pool: &mut Vec<BytesMut>, len: usize, t0: Instant) {
    for _ in 0..pool.len() {
        let p = pool.pop().unwrap();
        q.enqueue(t0, Class::TypeII, p, len, false).unwrap();
    }
    while let Some(d) = q.poll_dequeue(black_box(t0)) {
        pool.push(take(d));
    }
}

/// One batch through the fair queue, round robin over `hashes`.
fn fair_batch(
    q: &mut FairQueue<BytesMut>,
    pool: &mut Vec<BytesMut>,
    len: usize,
    hashes: &[FlowHash],
    t0: Instant,
) {
    for i in 0..pool.len() {
        let p = pool.pop().unwrap();
        let meta = Arrival {
            class: Class::TypeII,
            flow: hashes[i % hashes.len()],
            len,
            ect: false,
        };
        q.enqueue(t0, meta, p, |_, _, _| panic!("dropped")).unwrap();
    }
    while let Some(d) = q.poll_dequeue(black_box(t0)) {
        pool.push(take(d));
    }
}

/// `MPA_QUEUE_ITERS=n MPA_QUEUE_CASE=fair/64KiB/2flows`: runs that case's batch n times without
/// criterion, for instruction counts (`valgrind --tool=callgrind`), which the shared VM's load does
/// not blur as it does timings.
fn count_mode() -> bool {
    let (Ok(iters), Ok(case)) = (
        std::env::var("MPA_QUEUE_ITERS"),
        std::env::var("MPA_QUEUE_CASE"),
    ) else {
        return false;
    };
    let iters: usize = iters.parse().unwrap();
    let hasher = FlowHasher::with_key([1, 2]);
    let t0 = Instant::now();
    for (name, len, batch) in cases() {
        for flows in [1u16, 2, 64] {
            let hashes: Vec<FlowHash> = (0..flows).map(|p| hasher.hash(&key(p))).collect();
            let mut pool: Vec<BytesMut> = (0..batch).map(|_| BytesMut::zeroed(len)).collect();
            if case == format!("fifo/{name}/{flows}flows") {
                let mut q = PriorityQueue::new(AqmConfig::default());
                for _ in 0..iters {
                    fifo_batch(&mut q, &mut pool, len, t0);
                }
            } else if case == format!("fair/{name}/{flows}flows") {
                let mut q = FairQueue::new(AqmConfig::default());
                for _ in 0..iters {
                    fair_batch(&mut q, &mut pool, len, &hashes, t0);
                }
            } else {
                continue;
            }
            println!("{case}: {iters} batches of {batch} packets");
        }
    }
    true
}

fn queue(c: &mut Criterion) {
    let hasher = FlowHasher::with_key([1, 2]);
    let t0 = Instant::now();
    let mut g = c.benchmark_group("mpa_queue");
    g.measurement_time(Duration::from_secs(3));
    g.warm_up_time(Duration::from_secs(1));
    for (name, len, batch) in cases() {
        let mut pool: Vec<BytesMut> = (0..batch).map(|_| BytesMut::zeroed(len)).collect();
        g.throughput(Throughput::Elements(batch as u64));
        for flows in [1u16, 2, 64] {
            let hashes: Vec<FlowHash> = (0..flows).map(|p| hasher.hash(&key(p))).collect();
            let mut fifo: PriorityQueue<BytesMut> = PriorityQueue::new(AqmConfig::default());
            g.bench_function(format!("fifo/{name}/{flows}flows"), |b| {
                b.iter(|| fifo_batch(&mut fifo, &mut pool, len, t0))
            });
            let mut fq: FairQueue<BytesMut> = FairQueue::new(AqmConfig::default());
            g.bench_function(format!("fair/{name}/{flows}flows"), |b| {
                b.iter(|| fair_batch(&mut fq, &mut pool, len, &hashes, t0))
            });
            assert_eq!(pool.len(), batch);
        }
    }
    g.finish();

    let mut g = c.benchmark_group("mpa_flow_hash");
    g.measurement_time(Duration::from_secs(2));
    g.warm_up_time(Duration::from_secs(1));
    g.throughput(Throughput::Elements(1));
    let k = key(4242);
    g.bench_function("ipv4_5tuple", |b| b.iter(|| hasher.hash(black_box(&k))));
    g.finish();
}

criterion_group!(benches, queue);

fn main() {
    if count_mode() {
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
