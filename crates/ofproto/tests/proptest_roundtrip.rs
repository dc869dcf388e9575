//! Property tests (STYLE.md §6.2): for every message type, `decode(encode(x)) == x`,
//! `encode(decode(b)) == b` and `encoded_len() == bytes written`; and for arbitrary bytes the
//! decoder never panics and decode→encode→decode is stable.

// Test helpers outside #[test] fns: clippy.toml allows these only inside the test fns themselves.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::net::{Ipv4Addr, Ipv6Addr};

use ofproto::action::Action;
use ofproto::group::{Bucket, GroupType};
use ofproto::instruction::Instruction;
use ofproto::message::*;
use ofproto::meter::MeterBand;
use ofproto::multipart::*;
use ofproto::ofp_error::{ErrorCode, ErrorMsg};
use ofproto::oxm::{MacAddr, Match, OtherOxm, OxmField as F, U24};
use ofproto::port::Port;
use ofproto::Message;
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..=max)
}

/// Bytes without NUL (fixed-size string fields), at most `max`.
fn name(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(1u8..=255, 0..=max)
}

fn mac() -> impl Strategy<Value = MacAddr> {
    any::<[u8; 6]>().prop_map(MacAddr)
}

fn v4() -> impl Strategy<Value = Ipv4Addr> {
    any::<u32>().prop_map(Ipv4Addr::from)
}

fn v6() -> impl Strategy<Value = Ipv6Addr> {
    any::<u128>().prop_map(Ipv6Addr::from)
}

fn u24() -> impl Strategy<Value = U24> {
    (0..=U24::MAX).prop_map(|v| U24::new(v).unwrap())
}

macro_rules! field {
    ($v:ident, $s:expr) => {
        ($s, option::of($s)).prop_map(|(a, b)| F::$v(a, b)).boxed()
    };
}

fn oxm() -> BoxedStrategy<F> {
    prop_oneof![
        field!(InPort, any::<u32>()),
        field!(InPhyPort, any::<u32>()),
        field!(Metadata, any::<u64>()),
        field!(EthDst, mac()),
        field!(EthSrc, mac()),
        field!(EthType, any::<u16>()),
        field!(VlanVid, any::<u16>()),
        field!(VlanPcp, any::<u8>()),
        field!(IpDscp, any::<u8>()),
        field!(IpEcn, any::<u8>()),
        field!(IpProto, any::<u8>()),
        field!(Ipv4Src, v4()),
        field!(Ipv4Dst, v4()),
        field!(TcpSrc, any::<u16>()),
        field!(TcpDst, any::<u16>()),
        field!(UdpSrc, any::<u16>()),
        field!(UdpDst, any::<u16>()),
        field!(SctpSrc, any::<u16>()),
        field!(SctpDst, any::<u16>()),
        field!(Icmpv4Type, any::<u8>()),
        field!(Icmpv4Code, any::<u8>()),
        field!(ArpOp, any::<u16>()),
        field!(ArpSpa, v4()),
        field!(ArpTpa, v4()),
        field!(ArpSha, mac()),
        field!(ArpTha, mac()),
        field!(Ipv6Src, v6()),
        field!(Ipv6Dst, v6()),
        field!(Ipv6Flabel, any::<u32>()),
        field!(Icmpv6Type, any::<u8>()),
        field!(Icmpv6Code, any::<u8>()),
        field!(Ipv6NdTarget, v6()),
        field!(Ipv6NdSll, mac()),
        field!(Ipv6NdTll, mac()),
        field!(MplsLabel, any::<u32>()),
        field!(MplsTc, any::<u8>()),
        field!(MplsBos, any::<u8>()),
        field!(PbbIsid, u24()),
        field!(TunnelId, any::<u64>()),
        field!(Ipv6Exthdr, any::<u16>()),
        // Other classes, an unknown basic field, and experimenter fields (payload starts with
        // the experimenter id, so at least 4 bytes).
        (0u16..0x8000, 0u8..128, any::<bool>(), bytes(12)).prop_map(
            |(class, field, hasmask, payload)| {
                F::Other(OtherOxm {
                    class,
                    field,
                    hasmask,
                    payload,
                })
            }
        ),
        (40u8..128, any::<bool>(), bytes(12)).prop_map(|(field, hasmask, payload)| {
            F::Other(OtherOxm {
                class: 0x8000,
                field,
                hasmask,
                payload,
            })
        }),
        (0u8..128, any::<bool>(), vec(any::<u8>(), 4..16)).prop_map(|(field, hasmask, payload)| {
            F::Other(OtherOxm {
                class: 0xffff,
                field,
                hasmask,
                payload,
            })
        }),
    ]
    .boxed()
}

fn a_match() -> impl Strategy<Value = Match> {
    vec(oxm(), 0..6).prop_map(|v| v.into_iter().collect())
}

fn action() -> BoxedStrategy<Action> {
    let known = [
        0u16, 11, 12, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 0xffff,
    ];
    prop_oneof![
        (any::<u32>(), any::<u16>()).prop_map(|(port, max_len)| Action::Output { port, max_len }),
        Just(Action::CopyTtlOut),
        Just(Action::CopyTtlIn),
        any::<u8>().prop_map(Action::SetMplsTtl),
        Just(Action::DecMplsTtl),
        any::<u16>().prop_map(Action::PushVlan),
        Just(Action::PopVlan),
        any::<u16>().prop_map(Action::PushMpls),
        any::<u16>().prop_map(Action::PopMpls),
        any::<u32>().prop_map(Action::SetQueue),
        any::<u32>().prop_map(Action::Group),
        any::<u8>().prop_map(Action::SetNwTtl),
        Just(Action::DecNwTtl),
        oxm().prop_map(Action::SetField),
        any::<u16>().prop_map(Action::PushPbb),
        Just(Action::PopPbb),
        (any::<u32>(), bytes(16))
            .prop_map(|(experimenter, data)| Action::Experimenter { experimenter, data }),
        (
            any::<u16>().prop_filter("unknown type", move |t| !known.contains(t)),
            bytes(16)
        )
            .prop_map(|(typ, data)| Action::Unknown { typ, data }),
    ]
    .boxed()
}

fn actions() -> impl Strategy<Value = Vec<Action>> {
    vec(action(), 0..4)
}

fn instruction() -> BoxedStrategy<Instruction> {
    prop_oneof![
        any::<u8>().prop_map(Instruction::GotoTable),
        (any::<u64>(), any::<u64>())
            .prop_map(|(metadata, mask)| Instruction::WriteMetadata { metadata, mask }),
        actions().prop_map(Instruction::WriteActions),
        actions().prop_map(Instruction::ApplyActions),
        Just(Instruction::ClearActions),
        any::<u32>().prop_map(Instruction::Meter),
        (any::<u32>(), bytes(16))
            .prop_map(|(experimenter, data)| Instruction::Experimenter { experimenter, data }),
        (7u16..0xffff, bytes(16)).prop_map(|(typ, data)| Instruction::Unknown { typ, data }),
    ]
    .boxed()
}

fn instructions() -> impl Strategy<Value = Vec<Instruction>> {
    vec(instruction(), 0..4)
}

fn bucket() -> impl Strategy<Value = Bucket> {
    (any::<u16>(), any::<u32>(), any::<u32>(), actions()).prop_map(
        |(weight, watch_port, watch_group, actions)| Bucket {
            weight,
            watch_port,
            watch_group,
            actions,
        },
    )
}

fn band() -> BoxedStrategy<MeterBand> {
    prop_oneof![
        (any::<u32>(), any::<u32>())
            .prop_map(|(rate, burst_size)| MeterBand::Drop { rate, burst_size }),
        (any::<u32>(), any::<u32>(), any::<u8>()).prop_map(|(rate, burst_size, prec_level)| {
            MeterBand::DscpRemark {
                rate,
                burst_size,
                prec_level,
            }
        }),
        (any::<u32>(), any::<u32>(), any::<u32>(), bytes(12)).prop_map(
            |(rate, burst_size, experimenter, data)| MeterBand::Experimenter {
                rate,
                burst_size,
                experimenter,
                data
            }
        ),
        (3u16..0xffff, any::<u32>(), any::<u32>(), bytes(12)).prop_map(
            |(typ, rate, burst_size, data)| MeterBand::Unknown {
                typ,
                rate,
                burst_size,
                data
            }
        ),
    ]
    .boxed()
}

fn port() -> impl Strategy<Value = Port> {
    (any::<u32>(), mac(), name(16), any::<[u32; 8]>()).prop_map(|(port_no, hw_addr, name, v)| {
        Port {
            port_no,
            hw_addr,
            name,
            config: v[0],
            state: v[1],
            curr: v[2],
            advertised: v[3],
            supported: v[4],
            peer: v[5],
            curr_speed: v[6],
            max_speed: v[7],
        }
    })
}

fn experimenter() -> impl Strategy<Value = Experimenter> {
    (any::<u32>(), any::<u32>(), bytes(16)).prop_map(|(experimenter, exp_type, data)| {
        Experimenter {
            experimenter,
            exp_type,
            data,
        }
    })
}

fn flow_stats_request() -> impl Strategy<Value = FlowStatsRequest> {
    (
        any::<u8>(),
        any::<u32>(),
        any::<u32>(),
        any::<u64>(),
        any::<u64>(),
        a_match(),
    )
        .prop_map(
            |(table_id, out_port, out_group, cookie, cookie_mask, match_)| FlowStatsRequest {
                table_id,
                out_port,
                out_group,
                cookie,
                cookie_mask,
                match_,
            },
        )
}

fn mp_request() -> BoxedStrategy<MultipartRequestBody> {
    use MultipartRequestBody as B;
    prop_oneof![
        Just(B::Desc),
        flow_stats_request().prop_map(B::Flow),
        flow_stats_request().prop_map(B::Aggregate),
        Just(B::Table),
        any::<u32>().prop_map(B::PortStats),
        (any::<u32>(), any::<u32>()).prop_map(|(port_no, queue_id)| B::Queue { port_no, queue_id }),
        any::<u32>().prop_map(B::Group),
        Just(B::GroupDesc),
        Just(B::GroupFeatures),
        any::<u32>().prop_map(B::Meter),
        any::<u32>().prop_map(B::MeterConfig),
        Just(B::MeterFeatures),
        bytes(32).prop_map(B::TableFeatures),
        Just(B::PortDesc),
        experimenter().prop_map(B::Experimenter),
        (14u16..0xffff, bytes(16)).prop_map(|(typ, data)| B::Unknown { typ, data }),
    ]
    .boxed()
}

fn flow_stats() -> impl Strategy<Value = FlowStats> {
    (
        any::<(u8, u32, u32, u16, u16, u16, u16)>(),
        any::<(u64, u64, u64)>(),
        a_match(),
        instructions(),
    )
        .prop_map(
            |((t, ds, dn, p, it, ht, f), (c, pc, bc), match_, instructions)| FlowStats {
                table_id: t,
                duration_sec: ds,
                duration_nsec: dn,
                priority: p,
                idle_timeout: it,
                hard_timeout: ht,
                flags: f,
                cookie: c,
                packet_count: pc,
                byte_count: bc,
                match_,
                instructions,
            },
        )
}

fn port_stats() -> impl Strategy<Value = PortStats> {
    (any::<u32>(), any::<[u64; 12]>(), any::<(u32, u32)>()).prop_map(|(port_no, c, (ds, dn))| {
        PortStats {
            port_no,
            rx_packets: c[0],
            tx_packets: c[1],
            rx_bytes: c[2],
            tx_bytes: c[3],
            rx_dropped: c[4],
            tx_dropped: c[5],
            rx_errors: c[6],
            tx_errors: c[7],
            rx_frame_err: c[8],
            rx_over_err: c[9],
            rx_crc_err: c[10],
            collisions: c[11],
            duration_sec: ds,
            duration_nsec: dn,
        }
    })
}

fn mp_reply() -> BoxedStrategy<MultipartReplyBody> {
    use MultipartReplyBody as B;
    prop_oneof![
        (name(256), name(256), name(256), name(32), name(256)).prop_map(|(a, b, c, d, e)| {
            B::Desc(Desc {
                mfr_desc: a,
                hw_desc: b,
                sw_desc: c,
                serial_num: d,
                dp_desc: e,
            })
        }),
        vec(flow_stats(), 0..4).prop_map(B::Flow),
        any::<(u64, u64, u32)>().prop_map(|(p, b, f)| B::Aggregate(AggregateStats {
            packet_count: p,
            byte_count: b,
            flow_count: f
        })),
        vec(any::<(u8, u32, u64, u64)>(), 0..4).prop_map(|v| B::Table(
            v.into_iter()
                .map(|(t, a, l, m)| TableStats {
                    table_id: t,
                    active_count: a,
                    lookup_count: l,
                    matched_count: m
                })
                .collect()
        )),
        vec(port_stats(), 0..4).prop_map(B::PortStats),
        vec(any::<(u32, u32, u64, u64, u64, u32, u32)>(), 0..4).prop_map(|v| B::Queue(
            v.into_iter()
                .map(|(p, q, b, k, e, s, n)| QueueStats {
                    port_no: p,
                    queue_id: q,
                    tx_bytes: b,
                    tx_packets: k,
                    tx_errors: e,
                    duration_sec: s,
                    duration_nsec: n
                })
                .collect()
        )),
        vec(
            (
                any::<(u32, u32, u64, u64, u32, u32)>(),
                vec(any::<(u64, u64)>(), 0..3)
            ),
            0..3
        )
        .prop_map(|v| B::Group(
            v.into_iter()
                .map(|((g, r, p, b, s, n), bucket_stats)| GroupStats {
                    group_id: g,
                    ref_count: r,
                    packet_count: p,
                    byte_count: b,
                    duration_sec: s,
                    duration_nsec: n,
                    bucket_stats
                })
                .collect()
        )),
        vec((any::<u8>(), any::<u32>(), vec(bucket(), 0..3)), 0..3).prop_map(|v| B::GroupDesc(
            v.into_iter()
                .map(|(t, group_id, buckets)| GroupDesc {
                    group_type: GroupType::from(t),
                    group_id,
                    buckets
                })
                .collect()
        )),
        any::<(u32, u32, [u32; 4], [u32; 4])>().prop_map(|(t, c, m, a)| B::GroupFeatures(
            GroupFeatures {
                types: t,
                capabilities: c,
                max_groups: m,
                actions: a
            }
        )),
        vec(
            (
                any::<(u32, u32, u64, u64, u32, u32)>(),
                vec(any::<(u64, u64)>(), 0..3)
            ),
            0..3
        )
        .prop_map(|v| B::Meter(
            v.into_iter()
                .map(|((m, f, p, b, s, n), band_stats)| MeterStats {
                    meter_id: m,
                    flow_count: f,
                    packet_in_count: p,
                    byte_in_count: b,
                    duration_sec: s,
                    duration_nsec: n,
                    band_stats
                })
                .collect()
        )),
        vec((any::<u16>(), any::<u32>(), vec(band(), 0..3)), 0..3).prop_map(|v| B::MeterConfig(
            v.into_iter()
                .map(|(flags, meter_id, bands)| MeterConfig {
                    flags,
                    meter_id,
                    bands
                })
                .collect()
        )),
        any::<(u32, u32, u32, u8, u8)>().prop_map(|(m, b, c, mb, mc)| B::MeterFeatures(
            MeterFeatures {
                max_meter: m,
                band_types: b,
                capabilities: c,
                max_bands: mb,
                max_color: mc
            }
        )),
        bytes(32).prop_map(B::TableFeatures),
        vec(port(), 0..3).prop_map(B::PortDesc),
        experimenter().prop_map(B::Experimenter),
        (14u16..0xffff, bytes(16)).prop_map(|(typ, data)| B::Unknown { typ, data }),
    ]
    .boxed()
}

fn error_code() -> BoxedStrategy<ErrorCode> {
    prop_oneof![
        (0u16..0xffff, any::<u16>()).prop_map(|(t, c)| ErrorCode::from_wire(t, c)),
        (0u16..=13, 0u16..16).prop_map(|(t, c)| ErrorCode::from_wire(t, c)),
        (any::<u16>(), any::<u32>()).prop_map(|(exp_type, experimenter)| ErrorCode::Experimenter {
            exp_type,
            experimenter
        }),
    ]
    .boxed()
}

fn hello() -> impl Strategy<Value = Hello> {
    let elem = prop_oneof![
        vec(any::<u32>(), 0..4).prop_map(HelloElement::VersionBitmap),
        (
            any::<u16>().prop_filter("not bitmap", |t| *t != 1),
            bytes(12)
        )
            .prop_map(|(typ, data)| HelloElement::Unknown { typ, data }),
    ];
    (any::<u8>(), vec(elem, 0..3)).prop_map(|(version, elements)| Hello { version, elements })
}

fn switch_config() -> impl Strategy<Value = SwitchConfig> {
    any::<(u16, u16)>().prop_map(|(flags, miss_send_len)| SwitchConfig {
        flags,
        miss_send_len,
    })
}

fn role() -> impl Strategy<Value = Role> {
    any::<(u32, u64)>().prop_map(|(r, generation_id)| Role {
        role: ControllerRole::from(r),
        generation_id,
    })
}

fn async_config() -> impl Strategy<Value = AsyncConfig> {
    any::<([u32; 2], [u32; 2], [u32; 2])>().prop_map(|(a, b, c)| AsyncConfig {
        packet_in_mask: a,
        port_status_mask: b,
        flow_removed_mask: c,
    })
}

fn flow_mod() -> impl Strategy<Value = FlowMod> {
    (
        any::<(u64, u64, u8, u8, u16, u16, u16)>(),
        any::<(u32, u32, u32, u16)>(),
        a_match(),
        instructions(),
    )
        .prop_map(
            |((c, cm, t, cmd, it, ht, p), (b, op, og, f), match_, instructions)| FlowMod {
                cookie: c,
                cookie_mask: cm,
                table_id: t,
                command: FlowModCommand::from(cmd),
                idle_timeout: it,
                hard_timeout: ht,
                priority: p,
                buffer_id: b,
                out_port: op,
                out_group: og,
                flags: f,
                match_,
                instructions,
            },
        )
}

/// One strategy per message type (`Body` variant).
fn body_strategies() -> Vec<(&'static str, BoxedStrategy<Body>)> {
    vec![
        ("hello", hello().prop_map(Body::Hello).boxed()),
        (
            "error",
            (error_code(), bytes(80))
                .prop_map(|(code, data)| Body::Error(ErrorMsg { code, data }))
                .boxed(),
        ),
        (
            "echo_request",
            bytes(32).prop_map(Body::EchoRequest).boxed(),
        ),
        ("echo_reply", bytes(32).prop_map(Body::EchoReply).boxed()),
        (
            "experimenter",
            experimenter().prop_map(Body::Experimenter).boxed(),
        ),
        ("features_request", Just(Body::FeaturesRequest).boxed()),
        (
            "features_reply",
            any::<(u64, u32, u8, u8, u32, u32)>()
                .prop_map(|(d, n, t, a, c, r)| {
                    Body::FeaturesReply(SwitchFeatures {
                        datapath_id: d,
                        n_buffers: n,
                        n_tables: t,
                        auxiliary_id: a,
                        capabilities: c,
                        reserved: r,
                    })
                })
                .boxed(),
        ),
        ("get_config_request", Just(Body::GetConfigRequest).boxed()),
        (
            "get_config_reply",
            switch_config().prop_map(Body::GetConfigReply).boxed(),
        ),
        (
            "set_config",
            switch_config().prop_map(Body::SetConfig).boxed(),
        ),
        (
            "packet_in",
            (any::<(u32, u16, u8, u8, u64)>(), a_match(), bytes(64))
                .prop_map(|((b, t, r, tb, c), match_, data)| {
                    Body::PacketIn(PacketIn {
                        buffer_id: b,
                        total_len: t,
                        reason: PacketInReason::from(r),
                        table_id: tb,
                        cookie: c,
                        match_,
                        data,
                    })
                })
                .boxed(),
        ),
        (
            "flow_removed",
            (
                any::<(u64, u16, u8, u8, u32, u32)>(),
                any::<(u16, u16, u64, u64)>(),
                a_match(),
            )
                .prop_map(|((c, p, r, t, ds, dn), (it, ht, pc, bc), match_)| {
                    Body::FlowRemoved(FlowRemoved {
                        cookie: c,
                        priority: p,
                        reason: FlowRemovedReason::from(r),
                        table_id: t,
                        duration_sec: ds,
                        duration_nsec: dn,
                        idle_timeout: it,
                        hard_timeout: ht,
                        packet_count: pc,
                        byte_count: bc,
                        match_,
                    })
                })
                .boxed(),
        ),
        (
            "port_status",
            (any::<u8>(), port())
                .prop_map(|(r, desc)| {
                    Body::PortStatus(PortStatus {
                        reason: PortReason::from(r),
                        desc,
                    })
                })
                .boxed(),
        ),
        (
            "packet_out",
            (any::<(u32, u32)>(), actions(), bytes(64))
                .prop_map(|((buffer_id, in_port), actions, data)| {
                    Body::PacketOut(PacketOut {
                        buffer_id,
                        in_port,
                        actions,
                        data,
                    })
                })
                .boxed(),
        ),
        ("flow_mod", flow_mod().prop_map(Body::FlowMod).boxed()),
        (
            "group_mod",
            (any::<(u16, u8, u32)>(), vec(bucket(), 0..4))
                .prop_map(|((c, t, g), buckets)| {
                    Body::GroupMod(GroupMod {
                        command: GroupModCommand::from(c),
                        group_type: GroupType::from(t),
                        group_id: g,
                        buckets,
                    })
                })
                .boxed(),
        ),
        (
            "port_mod",
            (any::<u32>(), mac(), any::<(u32, u32, u32)>())
                .prop_map(|(port_no, hw_addr, (config, mask, advertise))| {
                    Body::PortMod(PortMod {
                        port_no,
                        hw_addr,
                        config,
                        mask,
                        advertise,
                    })
                })
                .boxed(),
        ),
        (
            "table_mod",
            any::<(u8, u32)>()
                .prop_map(|(table_id, config)| Body::TableMod(TableMod { table_id, config }))
                .boxed(),
        ),
        (
            "multipart_request",
            (any::<u16>(), mp_request())
                .prop_map(|(flags, body)| Body::MultipartRequest(MultipartRequest { flags, body }))
                .boxed(),
        ),
        (
            "multipart_reply",
            (any::<u16>(), mp_reply())
                .prop_map(|(flags, body)| Body::MultipartReply(MultipartReply { flags, body }))
                .boxed(),
        ),
        ("barrier_request", Just(Body::BarrierRequest).boxed()),
        ("barrier_reply", Just(Body::BarrierReply).boxed()),
        (
            "queue_get_config_request",
            any::<u32>().prop_map(Body::QueueGetConfigRequest).boxed(),
        ),
        (
            "queue_get_config_reply",
            (any::<u32>(), bytes(32))
                .prop_map(|(port, queues)| {
                    Body::QueueGetConfigReply(QueueGetConfigReply { port, queues })
                })
                .boxed(),
        ),
        ("role_request", role().prop_map(Body::RoleRequest).boxed()),
        ("role_reply", role().prop_map(Body::RoleReply).boxed()),
        ("get_async_request", Just(Body::GetAsyncRequest).boxed()),
        (
            "get_async_reply",
            async_config().prop_map(Body::GetAsyncReply).boxed(),
        ),
        ("set_async", async_config().prop_map(Body::SetAsync).boxed()),
        (
            "meter_mod",
            (any::<(u16, u16, u32)>(), vec(band(), 0..4))
                .prop_map(|((c, flags, meter_id), bands)| {
                    Body::MeterMod(MeterMod {
                        command: MeterModCommand::from(c),
                        flags,
                        meter_id,
                        bands,
                    })
                })
                .boxed(),
        ),
        (
            "unknown",
            (30u8..=255, bytes(32))
                .prop_map(|(typ, body)| Body::Unknown { typ, body })
                .boxed(),
        ),
    ]
}

fn check_round_trip(xid: u32, body: Body) -> Result<(), TestCaseError> {
    let m = Message::new(xid, body);
    let b = m
        .to_bytes()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(b.len(), m.encoded_len(), "encoded_len");
    let d = Message::decode_exact(&b).map_err(|e| TestCaseError::fail(format!("{e}: {m:?}")))?;
    prop_assert_eq!(&d, &m, "decode(encode(x)) == x");
    prop_assert_eq!(d.to_bytes().unwrap(), b, "encode(decode(b)) == b");
    Ok(())
}

macro_rules! round_trip_tests {
    ($($name:ident),+ $(,)?) => {
        $(
            #[test]
            fn $name() {
                let (_, s) = body_strategies()
                    .into_iter()
                    .find(|(n, _)| *n == stringify!($name))
                    .unwrap();
                proptest!(ProptestConfig::with_cases(256), |(xid in any::<u32>(), body in s)| {
                    check_round_trip(xid, body)?;
                });
            }
        )+

        #[test]
        fn every_message_type_has_a_round_trip_test() {
            let named: Vec<&str> = vec![$(stringify!($name)),+];
            for (n, _) in body_strategies() {
                assert!(named.contains(&n), "no round-trip test for {n}");
            }
        }
    };
}

mod round_trip {
    use super::*;

    round_trip_tests!(
        hello,
        error,
        echo_request,
        echo_reply,
        experimenter,
        features_request,
        features_reply,
        get_config_request,
        get_config_reply,
        set_config,
        packet_in,
        flow_removed,
        port_status,
        packet_out,
        flow_mod,
        group_mod,
        port_mod,
        table_mod,
        multipart_request,
        multipart_reply,
        barrier_request,
        barrier_reply,
        queue_get_config_request,
        queue_get_config_reply,
        role_request,
        role_reply,
        get_async_request,
        get_async_reply,
        set_async,
        meter_mod,
        unknown,
    );
}

/// decode→encode→decode is stable for whatever decodes.
fn check_bytes(b: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(m) = Message::decode_exact(b) {
        let e = m
            .to_bytes()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(e.len(), m.encoded_len());
        let m2 = Message::decode_exact(&e).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&m2, &m);
        prop_assert_eq!(m2.to_bytes().unwrap(), e);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(mut b in vec(any::<u8>(), 0..300), typ in 0u8..32) {
        // Give most inputs a plausible header so the body decoders are exercised.
        if b.len() >= 8 {
            let len = b.len() as u16;
            b[0] = 4;
            b[1] = typ;
            b[2..4].copy_from_slice(&len.to_be_bytes());
        }
        let _ = Message::decode(&b);
        check_bytes(&b)?;
    }

    #[test]
    fn mutated_messages_never_panic(
        (body, flips) in (flow_mod().prop_map(Body::FlowMod), vec((any::<usize>(), any::<u8>()), 1..4))
    ) {
        let mut b = Message::new(1, body).to_bytes().unwrap();
        for (i, v) in flips {
            let n = b.len();
            b[8 + i % (n - 8)] ^= v;
        }
        check_bytes(&b)?;
    }
}
