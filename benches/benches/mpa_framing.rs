//! criterion benchmarks of the MPA core's per-packet work (issue #4 "Benchmarks"; STYLE §7):
//! frame encode (in place behind a reserved header, and copying), streaming decode, for 1,400-byte
//! IP packets and 64 KiB GSO super-packets, plus the classify + flow-table + group-selection step.
//! Inputs are built from raw bytes. Run: `cargo bench -p mms-benches --bench mpa_framing`.

// A test/bench crate: clippy.toml allows these in #[test] functions only, not in their helpers.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use mpa::agent::Agent;
use mpa::config::Config;
use mpa::framing::{
    encode_frame, encode_header_in_place, BytesMut, Deframer, FrameType, FRAME_HEADER_LEN,
    VIRTIO_NET_HDR_LEN,
};
use mpa::{BranchId, Class, PathGroupId};

/// An IPv4/UDP packet of `len` bytes (total length = `len`) from port `sport`.
fn ipv4(len: usize, sport: u16) -> Vec<u8> {
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&[198, 19, 1, 10]);
    p[16..20].copy_from_slice(&[198, 19, 2, 10]);
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&5001u16.to_be_bytes());
    p
}

/// (name, frame type, payload): a 1,400-byte IP packet, and a 64 KiB GSO super-packet behind its
/// virtio header (the largest frame, 65,557 bytes on the wire).
fn cases() -> Vec<(&'static str, FrameType, Vec<u8>)> {
    let mut gso = vec![0u8; VIRTIO_NET_HDR_LEN];
    gso.extend_from_slice(&ipv4(65_535, 1));
    vec![
        ("1400B", FrameType::Ip, ipv4(1400, 1)),
        ("64KiB", FrameType::IpVirtio, gso),
    ]
}

fn framing(c: &mut Criterion) {
    let mut g = c.benchmark_group("mpa_framing");
    g.measurement_time(Duration::from_secs(3));
    g.warm_up_time(Duration::from_secs(1));
    for (name, ty, payload) in cases() {
        let frame_len = (FRAME_HEADER_LEN + payload.len()) as u64;

        // Encode in place: the driver reads TUN behind FRAME_HEADER_LEN reserved bytes.
        let mut buf = vec![0u8; FRAME_HEADER_LEN];
        buf.extend_from_slice(&payload);
        g.throughput(Throughput::Bytes(frame_len));
        g.bench_function(format!("encode_in_place/{name}"), |b| {
            b.iter(|| encode_header_in_place(black_box(&mut buf), ty, Class::TypeII, None).unwrap())
        });

        // Encode by copy into a reused buffer.
        let mut out = BytesMut::with_capacity(frame_len as usize);
        g.bench_function(format!("encode_copy/{name}"), |b| {
            b.iter(|| {
                out.clear();
                encode_frame(ty, Class::TypeII, None, black_box(&payload), &mut out).unwrap()
            })
        });

        // Decode a stream of frames from one receive buffer (buffer refill not timed).
        let n = (1 << 20) / frame_len as usize + 1;
        let mut wire = BytesMut::new();
        for _ in 0..n {
            encode_frame(ty, Class::TypeII, None, &payload, &mut wire).unwrap();
        }
        g.throughput(Throughput::Bytes(frame_len * n as u64));
        g.bench_function(format!("decode/{name}"), |b| {
            b.iter_batched_ref(
                || wire.clone(),
                |buf| {
                    let mut d = Deframer::new();
                    let mut count = 0;
                    while let Some(f) = d.decode(buf).unwrap() {
                        black_box(&f);
                        count += 1;
                    }
                    assert_eq!(count, n);
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

/// Classify + flow lookup (+ selection for new flows) for 1,400-byte packets over 1,024 flows.
fn route(c: &mut Criterion) {
    let config = Config::parse(
        r#"
branch_id = 1
lan_prefixes = ["198.19.1.0/24"]
[[wan]]
name = "wan0"
address = "198.18.10.2/24"
gateway = "198.18.10.1"
[[remote]]
id = 2
wan_addresses = ["198.18.20.2", "198.18.21.2"]
lan_prefixes = ["198.19.2.0/24"]
path_groups = [{ id = 0, weight = 4 }, { id = 1, weight = 2 }, { id = 2, weight = 1 }, { id = 3, weight = 1 }]
[[classifier.rules]]
class = "type1"
dscp = [46]
[[classifier.rules]]
class = "type1"
ip_protocol = 6
dst_ports = [22]
"#,
    )
    .unwrap();
    let mut agent = Agent::new(&config);
    let b2 = BranchId::new(2).unwrap();
    for g in 0..4 {
        agent.set_group_up(b2, PathGroupId::new(g).unwrap(), true);
    }
    let packets: Vec<Vec<u8>> = (0..1024u16).map(|p| ipv4(1400, 10_000 + p)).collect();
    let t0 = Instant::now();
    let mut i = 0usize;
    let mut g = c.benchmark_group("mpa_route");
    g.measurement_time(Duration::from_secs(3));
    g.warm_up_time(Duration::from_secs(1));
    g.throughput(Throughput::Elements(1));
    g.bench_function("classify_flow_select/1400B_1024flows", |b| {
        b.iter(|| {
            i = (i + 1) % packets.len();
            agent.route(t0, black_box(&packets[i])).unwrap()
        })
    });
    g.finish();
}

criterion_group!(benches, framing, route);
criterion_main!(benches);
