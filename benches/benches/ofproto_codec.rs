//! OpenFlow 1.3 codec cost (crates/ofproto): encode and decode of the paper's swap FLOW_MOD
//! (Fig. 4(b), source MMSG), and decode of a 10,000-entry flow-stats reply (the SDC's periodic
//! poll of a busy gateway), both as raw multipart messages and through the channel's reassembly.
//! Issue #3 targets: ≥ 2 M FLOW_MOD encode+decode per second per core; 10,000-entry decode ≤ 5 ms.
//! Figures are in docs/ofproto.md.

// A benchmark builds its inputs here; a failure to build them is a bug in the bench itself.
#![allow(clippy::expect_used)]

use std::net::Ipv4Addr;
use std::time::Instant;

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use ofproto::channel::{Channel, Config, Event};
use ofproto::message::{FlowMod, Hello};
use ofproto::multipart::{
    FlowStats, MultipartReply, MultipartReplyBody, MultipartRequest, MultipartRequestBody,
    OFPMPF_MORE,
};
use ofproto::oxm::{Match, OxmField as F};
use ofproto::{Action, Body, Instruction, Message};

fn swap_match(i: u32) -> Match {
    Match::new()
        .with(F::EthType(0x0800, None))
        .with(F::IpProto(6, None))
        .with(F::Ipv4Src(Ipv4Addr::new(198, 18, 11, 2), None))
        .with(F::Ipv4Dst(Ipv4Addr::from(0xc612_1502 + i), None))
        .with(F::TcpDst(0x2004, None))
}

fn swap_instructions() -> Vec<Instruction> {
    vec![Instruction::ApplyActions(vec![
        Action::SetField(F::Ipv4Src(Ipv4Addr::new(198, 18, 11, 2), None)),
        Action::SetField(F::Ipv4Dst(Ipv4Addr::new(198, 18, 31, 2), None)),
        Action::SetField(F::TcpDst(0x2114, None)),
        Action::Output {
            port: 1,
            max_len: 0,
        },
    ])]
}

fn swap_flow_mod() -> Message {
    Message::new(
        7,
        Body::FlowMod(FlowMod {
            cookie: 0xb214_0000_0000_0001,
            priority: 1000,
            match_: swap_match(0),
            instructions: swap_instructions(),
            ..FlowMod::default()
        }),
    )
}

/// A 10,000-flow reply split into multipart messages of at most ~64 KiB, as OVS sends it.
fn flow_stats_parts(xid: u32, n: u32) -> Vec<u8> {
    let entry = |i: u32| FlowStats {
        table_id: 0,
        duration_sec: i,
        duration_nsec: 0,
        priority: 1000,
        idle_timeout: 0,
        hard_timeout: 0,
        flags: 0,
        cookie: 0xb214_0000_0000_0000 | u64::from(i),
        packet_count: u64::from(i) * 10,
        byte_count: u64::from(i) * 15_000,
        match_: swap_match(i),
        instructions: swap_instructions(),
    };
    let per_part = 60_000
        / Message::new(
            0,
            Body::MultipartReply(MultipartReply::new(MultipartReplyBody::Flow(vec![entry(
                0,
            )]))),
        )
        .encoded_len() as u32;
    let mut out = Vec::new();
    let mut i = 0;
    while i < n {
        let end = (i + per_part).min(n);
        let body = MultipartReplyBody::Flow((i..end).map(entry).collect());
        let flags = if end < n { OFPMPF_MORE } else { 0 };
        Message::new(xid, Body::MultipartReply(MultipartReply { flags, body }))
            .encode(&mut out)
            .expect("part fits in 64 KiB");
        i = end;
    }
    out
}

fn flow_mod(c: &mut Criterion) {
    let m = swap_flow_mod();
    let bytes = m.to_bytes().expect("encodes");
    let mut g = c.benchmark_group("ofproto_flow_mod");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    let mut buf = Vec::with_capacity(256);
    g.bench_function("encode", |b| {
        b.iter(|| {
            buf.clear();
            black_box(&m).encode(&mut buf).expect("encodes");
            black_box(buf.len())
        })
    });
    g.bench_function("decode", |b| {
        b.iter(|| Message::decode_exact(black_box(&bytes)).expect("decodes"))
    });
    g.bench_function("encode_decode", |b| {
        b.iter(|| {
            buf.clear();
            black_box(&m).encode(&mut buf).expect("encodes");
            Message::decode_exact(black_box(&buf)).expect("decodes")
        })
    });
    g.finish();
}

fn flow_stats(c: &mut Criterion) {
    let stream = flow_stats_parts(2, 10_000);
    let mut g = c.benchmark_group("ofproto_flow_stats_10k");
    g.throughput(Throughput::Bytes(stream.len() as u64));
    g.sample_size(30);
    g.bench_function("decode_parts", |b| {
        b.iter(|| {
            let mut rest = black_box(&stream[..]);
            let mut n = 0;
            while let Some((m, used)) = Message::decode(rest).expect("decodes") {
                if let Body::MultipartReply(MultipartReply {
                    body: MultipartReplyBody::Flow(v),
                    ..
                }) = m.body
                {
                    n += v.len();
                }
                rest = rest.get(used..).unwrap_or_default();
            }
            assert_eq!(n, 10_000);
        })
    });
    // Through the channel: framing, correlation and reassembly into one 10,000-entry reply.
    let mut hello = Vec::new();
    Message::new(1, Body::Hello(Hello::v1_3()))
        .encode(&mut hello)
        .expect("encodes");
    g.bench_function("channel_reassembly", |b| {
        b.iter(|| {
            let now = Instant::now();
            let mut ch = Channel::new(now, Config::default());
            ch.handle_input(now, &hello);
            let req = MultipartRequest::new(MultipartRequestBody::Flow(Default::default()));
            let xid = ch.send(now, Body::MultipartRequest(req)).expect("sends");
            // A fresh channel used xid 1 for its HELLO: the request is xid 2, as in `stream`.
            assert_eq!(xid, 2);
            for chunk in stream.chunks(65_536) {
                ch.handle_input(now, chunk);
            }
            let mut got = 0;
            while let Some(e) = ch.poll_event() {
                if let Event::Reply {
                    reply: Body::MultipartReply(r),
                    ..
                } = e
                {
                    if let MultipartReplyBody::Flow(v) = r.body {
                        got = v.len();
                    }
                }
            }
            assert_eq!(got, 10_000);
        })
    });
    g.finish();
}

criterion_group!(benches, flow_mod, flow_stats);
criterion_main!(benches);
