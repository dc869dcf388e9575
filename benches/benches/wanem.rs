//! The WAN emulator core's per-packet cost (xtask::wanem::core), so the docs can say how many
//! packets per second one core decides. The end-to-end figure (through TUN and the kernel) is in
//! docs/testbed.md.

#![allow(clippy::indexing_slicing)] // a benchmark builds fixed-size test packets

use std::net::Ipv4Addr;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use xtask::topology::Impairment;
use xtask::wanem::core::{EmuConfig, Emulator, LinkConfig, PairConfig, Verdict};

fn packet(len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[12..16].copy_from_slice(&[198, 18, 10, 2]);
    p[16..20].copy_from_slice(&[198, 18, 20, 2]);
    p
}

fn config() -> EmuConfig {
    let imp = Impairment {
        rate_mbit: Some(100_000.0),
        delay_ms: Some(20.0),
        jitter_ms: Some(1.0),
        loss_pct: Some(0.1),
        ..Impairment::default()
    };
    EmuConfig {
        links: (0..10u8)
            .map(|i| LinkConfig {
                name: format!("{}a", i + 1),
                network: Ipv4Addr::new(198, 18, 10 * (i + 1), 0),
                prefix_len: 24,
                up: imp.clone(),
                down: imp.clone(),
            })
            .collect(),
        pairs: vec![PairConfig {
            src: Ipv4Addr::new(198, 18, 10, 2),
            dst: Ipv4Addr::new(198, 18, 20, 2),
            imp: imp.clone(),
            shared_with: vec![],
        }],
        seed: 1,
    }
}

fn bench(c: &mut Criterion) {
    let pkt = packet(1500);
    let mut g = c.benchmark_group("wanem_core");
    g.throughput(Throughput::Bytes(pkt.len() as u64));
    g.bench_function("three_stages_1500B", |b| {
        let mut emu = Emulator::new(&config());
        let mut now = 0u64;
        b.iter(|| {
            now += 1_000;
            // Follow the packet through every stage, as the driver does.
            let mut v = emu.handle_packet(now, &pkt);
            while let Verdict::Next { at, stage } = v {
                v = emu.advance(at, &pkt, stage);
            }
            v
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
