//! Golden vectors from os-ken (`tools/gen_vectors.py` → `tests/vectors/os_ken.txt`), checked
//! byte-exact in both directions: decode(bytes) == expected struct, encode(expected) == bytes.

// Test helpers outside #[test] fns: clippy.toml allows these only inside the test fns themselves.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::net::{Ipv4Addr, Ipv6Addr};

use ofproto::action::Action;
use ofproto::group::{Bucket, GroupType, OFPG_ALL, OFPG_ANY};
use ofproto::instruction::Instruction;
use ofproto::message::*;
use ofproto::meter::{MeterBand, OFPM_ALL};
use ofproto::multipart::*;
use ofproto::ofp_error::*;
use ofproto::oxm::{MacAddr, Match, OtherOxm, OxmField as F, U24};
use ofproto::port::{ofpp, Port};
use ofproto::Message;

const VECTORS: &str = include_str!("vectors/os_ken.txt");

fn vectors() -> Vec<(String, String, Vec<u8>)> {
    VECTORS
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut it = l.split_whitespace();
            let name = it.next().unwrap().to_string();
            let source = it.next().unwrap().to_string();
            let hex = it.next().unwrap();
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            (name, source, bytes)
        })
        .collect()
}

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn ip6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

fn mac(s: &str) -> MacAddr {
    let v: Vec<u8> = s
        .split(':')
        .map(|x| u8::from_str_radix(x, 16).unwrap())
        .collect();
    MacAddr(v.try_into().unwrap())
}

fn msg(xid: u32, body: Body) -> Message {
    Message::new(xid, body)
}

const P11: &str = "198.18.11.2";
const P12: &str = "198.18.21.2";
const P13: &str = "198.18.31.2";

fn swap_match(src: &str, dst: &str, tcp_dst: Option<u16>, tcp_src: Option<u16>) -> Match {
    let mut m = Match::new()
        .with(F::EthType(0x0800, None))
        .with(F::IpProto(6, None))
        .with(F::Ipv4Src(ip(src), None))
        .with(F::Ipv4Dst(ip(dst), None));
    if let Some(p) = tcp_dst {
        m.insert(F::TcpDst(p, None));
    }
    if let Some(p) = tcp_src {
        m.insert(F::TcpSrc(p, None));
    }
    m
}

fn swap_actions(
    src: &str,
    dst: &str,
    port: u32,
    tcp_dst: Option<u16>,
    tcp_src: Option<u16>,
) -> Vec<Instruction> {
    let mut a = vec![
        Action::SetField(F::Ipv4Src(ip(src), None)),
        Action::SetField(F::Ipv4Dst(ip(dst), None)),
    ];
    if let Some(p) = tcp_dst {
        a.push(Action::SetField(F::TcpDst(p, None)));
    }
    if let Some(p) = tcp_src {
        a.push(Action::SetField(F::TcpSrc(p, None)));
    }
    a.push(Action::Output { port, max_len: 0 });
    vec![Instruction::ApplyActions(a)]
}

fn frame() -> Vec<u8> {
    let hex =
        "ffffffffffff02000000000108060001080006040001020000000001c6120b02000000000000c6120b01";
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn flow_mod(xid: u32, f: FlowMod) -> Message {
    msg(xid, Body::FlowMod(f))
}

fn mp_req(xid: u32, body: MultipartRequestBody) -> Message {
    msg(xid, Body::MultipartRequest(MultipartRequest::new(body)))
}

fn mp_rep(xid: u32, flags: u16, body: MultipartReplyBody) -> Message {
    msg(xid, Body::MultipartReply(MultipartReply { flags, body }))
}

fn err(xid: u32, code: ErrorCode, data: &[u8]) -> Message {
    msg(
        xid,
        Body::Error(ErrorMsg {
            code,
            data: data.to_vec(),
        }),
    )
}

fn port(no: u32, m: &str, name: &str, speed: u32) -> Port {
    Port {
        port_no: no,
        hw_addr: mac(m),
        name: name.as_bytes().to_vec(),
        config: 0,
        state: 4,
        curr: 0x840,
        advertised: 0,
        supported: 0,
        peer: 0,
        curr_speed: speed,
        max_speed: speed,
    }
}

fn flow_stats_1() -> FlowStats {
    FlowStats {
        table_id: 0,
        duration_sec: 7,
        duration_nsec: 250_000_000,
        priority: 1000,
        idle_timeout: 0,
        hard_timeout: 0,
        flags: 0,
        cookie: 0xb214_0000_0000_00a1,
        packet_count: 10,
        byte_count: 1500,
        match_: swap_match(P11, P12, Some(0x2004), None),
        instructions: swap_actions(P11, P13, 1, Some(0x2114), None),
    }
}

fn port_stats(no: u32, k: u64) -> PortStats {
    PortStats {
        port_no: no,
        rx_packets: k,
        tx_packets: 2 * k,
        rx_bytes: 3 * k,
        tx_bytes: 4 * k,
        rx_dropped: 5 * k,
        tx_dropped: 6 * k,
        rx_errors: 7 * k,
        tx_errors: 8 * k,
        rx_frame_err: 9 * k,
        rx_over_err: 10 * k,
        rx_crc_err: 11 * k,
        collisions: 12 * k,
        duration_sec: 100,
        duration_nsec: 7,
    }
}

fn fm_head() -> Vec<u8> {
    vec![0x04, 0x0e, 0x00, 0x50, 0x00, 0x00, 0x00, 0x2a]
}

/// The struct each vector must decode to.
fn expected(name: &str) -> Message {
    let fm_head = fm_head();
    match name {
        "hello_plain" => msg(
            1,
            Body::Hello(Hello {
                version: 4,
                elements: vec![],
            }),
        ),
        "hello_bitmap_13" => msg(2, Body::Hello(Hello::v1_3())),
        "hello_bitmap_10_13" => msg(
            3,
            Body::Hello(Hello {
                version: 4,
                elements: vec![HelloElement::VersionBitmap(vec![0x12])],
            }),
        ),
        "hello_bitmap_v6_three_words" => msg(
            4,
            Body::Hello(Hello {
                version: 6,
                elements: vec![HelloElement::VersionBitmap(vec![0x72, 0, 0])],
            }),
        ),
        "error_hello_failed" => err(
            5,
            ErrorCode::HelloFailed(HelloFailedCode::Incompatible),
            b"no common version",
        ),
        "error_bad_request_bad_type" => err(
            6,
            ErrorCode::BadRequest(BadRequestCode::BadType),
            &[0x04, 0xff, 0, 8, 0, 0, 0, 7],
        ),
        "error_flow_mod_bad_table" => err(
            7,
            ErrorCode::FlowModFailed(FlowModFailedCode::BadTableId),
            &fm_head,
        ),
        "error_bad_match_prereq" => err(8, ErrorCode::BadMatch(BadMatchCode::BadPrereq), &fm_head),
        "error_bad_action_out_port" => {
            err(9, ErrorCode::BadAction(BadActionCode::BadOutPort), &fm_head)
        }
        "error_group_mod_loop" => err(10, ErrorCode::GroupModFailed(GroupModFailedCode::Loop), b""),
        "error_meter_mod_bad_band" => err(
            11,
            ErrorCode::MeterModFailed(MeterModFailedCode::BadBand),
            &[4],
        ),
        "error_experimenter" => err(
            12,
            ErrorCode::Experimenter {
                exp_type: 0x0102,
                experimenter: 0x2320,
            },
            b"nx",
        ),
        "echo_request" => msg(13, Body::EchoRequest(b"keepalive".to_vec())),
        "echo_request_empty" => msg(14, Body::EchoRequest(vec![])),
        "echo_reply" => msg(13, Body::EchoReply(b"keepalive".to_vec())),
        "experimenter" => msg(
            15,
            Body::Experimenter(Experimenter {
                experimenter: 0x2320,
                exp_type: 0x10,
                data: vec![0, 1, 2, 3],
            }),
        ),
        "features_request" => msg(16, Body::FeaturesRequest),
        "features_reply" => msg(
            16,
            Body::FeaturesReply(SwitchFeatures {
                datapath_id: 0x0000_aabb_ccdd_eeff,
                n_buffers: 256,
                n_tables: 254,
                auxiliary_id: 0,
                capabilities: 0x4f,
                reserved: 0,
            }),
        ),
        "get_config_request" => msg(17, Body::GetConfigRequest),
        "get_config_reply" => msg(
            17,
            Body::GetConfigReply(SwitchConfig {
                flags: 2,
                miss_send_len: 0xffe5,
            }),
        ),
        "set_config" => msg(
            18,
            Body::SetConfig(SwitchConfig {
                flags: 0,
                miss_send_len: 128,
            }),
        ),
        "packet_in_no_match" => msg(
            0,
            Body::PacketIn(PacketIn {
                buffer_id: OFP_NO_BUFFER,
                total_len: 42,
                reason: PacketInReason::NoMatch,
                table_id: 0,
                cookie: 0,
                match_: Match::new().with(F::InPort(1, None)),
                data: frame(),
            }),
        ),
        "packet_in_action" => msg(
            0,
            Body::PacketIn(PacketIn {
                buffer_id: 0x100,
                total_len: 42,
                reason: PacketInReason::Action,
                table_id: 3,
                cookie: 0xb014_0000,
                match_: Match::new()
                    .with(F::InPort(2, None))
                    .with(F::EthType(0x0806, None))
                    .with(F::Metadata(0x1122, Some(0xffff)))
                    .with(F::TunnelId(7, None)),
                data: frame(),
            }),
        ),
        "flow_removed" => msg(
            0,
            Body::FlowRemoved(FlowRemoved {
                cookie: 0xb214_0000_0000_0001,
                priority: 100,
                reason: FlowRemovedReason::Delete,
                table_id: 0,
                duration_sec: 12,
                duration_nsec: 500_000_000,
                idle_timeout: 30,
                hard_timeout: 0,
                packet_count: 42,
                byte_count: 4200,
                match_: swap_match(P11, P13, Some(0x2114), None),
            }),
        ),
        "port_status" => msg(
            0,
            Body::PortStatus(PortStatus {
                reason: PortReason::Modify,
                desc: port(1, "02:00:00:00:0b:02", "wan0", 10_000_000),
            }),
        ),
        "packet_out" => msg(
            19,
            Body::PacketOut(PacketOut {
                buffer_id: OFP_NO_BUFFER,
                in_port: ofpp::CONTROLLER,
                actions: vec![Action::Output {
                    port: 3,
                    max_len: 0,
                }],
                data: frame(),
            }),
        ),
        "packet_out_buffered" => msg(
            20,
            Body::PacketOut(PacketOut {
                buffer_id: 0x42,
                in_port: 1,
                actions: vec![
                    Action::Output {
                        port: ofpp::TABLE,
                        max_len: 0,
                    },
                    Action::Output {
                        port: ofpp::CONTROLLER,
                        max_len: 0xffff,
                    },
                ],
                data: vec![],
            }),
        ),
        "flow_mod_swap_source" => flow_mod(
            21,
            FlowMod {
                cookie: 0xb214_0000_0000_00a1,
                priority: 1000,
                out_port: 0,
                out_group: 0,
                match_: swap_match(P11, P12, Some(0x2004), None),
                instructions: swap_actions(P11, P13, 1, Some(0x2114), None),
                ..FlowMod::default()
            },
        ),
        "flow_mod_swap_transit" => flow_mod(
            22,
            FlowMod {
                cookie: 0xb214_0000_0000_00a2,
                priority: 1000,
                out_port: 0,
                out_group: 0,
                match_: swap_match(P11, P13, Some(0x2114), None),
                instructions: swap_actions(P13, P12, ofpp::IN_PORT, Some(0x2114), None),
                ..FlowMod::default()
            },
        ),
        "flow_mod_swap_destination" => flow_mod(
            23,
            FlowMod {
                cookie: 0xb214_0000_0000_00a3,
                priority: 1000,
                out_port: 0,
                out_group: 0,
                match_: swap_match(P13, P12, Some(0x2114), None),
                instructions: swap_actions(P11, P12, 3, Some(0x2004), None),
                ..FlowMod::default()
            },
        ),
        "flow_mod_swap_reverse" => flow_mod(
            24,
            FlowMod {
                cookie: 0xb214_0000_0000_00b1,
                priority: 1000,
                out_port: 0,
                out_group: 0,
                match_: swap_match(P12, P11, None, Some(0x2004)),
                instructions: swap_actions(P12, P13, 1, None, Some(0x2114)),
                ..FlowMod::default()
            },
        ),
        "flow_mod_delete_cookie" => flow_mod(
            25,
            FlowMod {
                cookie: 0xb214_0000_0000_0000,
                cookie_mask: 0xffff_0000_0000_0000,
                table_id: OFPTT_ALL,
                command: FlowModCommand::Delete,
                ..FlowMod::default()
            },
        ),
        "flow_mod_table_miss" => flow_mod(
            26,
            FlowMod {
                priority: 0,
                flags: ofpff::SEND_FLOW_REM,
                idle_timeout: 60,
                hard_timeout: 600,
                out_port: 0,
                out_group: 0,
                instructions: vec![Instruction::ApplyActions(vec![Action::Output {
                    port: ofpp::CONTROLLER,
                    max_len: 0xffff,
                }])],
                ..FlowMod::default()
            },
        ),
        "flow_mod_all_instructions" => flow_mod(
            27,
            FlowMod {
                table_id: 1,
                command: FlowModCommand::ModifyStrict,
                priority: 7,
                out_port: 0,
                out_group: 0,
                match_: Match::new().with(F::InPort(1, None)),
                instructions: vec![
                    Instruction::Meter(5),
                    Instruction::ApplyActions(vec![Action::DecNwTtl]),
                    Instruction::ClearActions,
                    Instruction::WriteActions(vec![Action::Output {
                        port: 2,
                        max_len: 0,
                    }]),
                    Instruction::WriteMetadata {
                        metadata: 0xdead,
                        mask: 0xffff,
                    },
                    Instruction::GotoTable(2),
                ],
                ..FlowMod::default()
            },
        ),
        "flow_mod_all_actions" => flow_mod(
            28,
            FlowMod {
                out_port: 0,
                out_group: 0,
                match_: Match::new().with(F::InPort(1, None)),
                instructions: vec![Instruction::ApplyActions(vec![
                    Action::CopyTtlOut,
                    Action::CopyTtlIn,
                    Action::SetMplsTtl(9),
                    Action::DecMplsTtl,
                    Action::PushVlan(0x8100),
                    Action::PopVlan,
                    Action::PushMpls(0x8847),
                    Action::PopMpls(0x0800),
                    Action::SetQueue(3),
                    Action::Group(4),
                    Action::SetNwTtl(64),
                    Action::DecNwTtl,
                    Action::PushPbb(0x88e7),
                    Action::PopPbb,
                    Action::SetField(F::EthDst(mac("02:00:00:00:00:01"), None)),
                    Action::SetField(F::VlanVid(0x1005, None)),
                    Action::SetField(F::IpDscp(46, None)),
                    Action::Experimenter {
                        experimenter: 0x00ab_cdef,
                        data: vec![0, 0x0a, 0, 0, 0, 0, 0, 0],
                    },
                    Action::Output {
                        port: ofpp::NORMAL,
                        max_len: 0,
                    },
                ])],
                ..FlowMod::default()
            },
        ),
        "flow_mod_match_l2_masked" => flow_mod(
            29,
            FlowMod {
                out_port: 0,
                out_group: 0,
                match_: [
                    F::InPort(1, None),
                    F::InPhyPort(1, None),
                    F::Metadata(0x0102_0304_0000_0000, Some(0xffff_ffff_0000_0000)),
                    F::EthDst(mac("02:00:00:00:00:00"), Some(mac("ff:ff:ff:00:00:00"))),
                    F::EthSrc(mac("02:00:00:00:00:07"), Some(mac("ff:ff:ff:ff:ff:ff"))),
                    F::EthType(0x0800, None),
                    F::VlanVid(0x1000, Some(0x1000)),
                    F::VlanPcp(3, None),
                    F::IpDscp(10, None),
                    F::IpEcn(1, None),
                    F::IpProto(17, None),
                    F::Ipv4Src(ip("198.18.0.0"), Some(ip("255.254.0.0"))),
                    F::Ipv4Dst(ip("198.19.2.9"), None),
                    F::UdpSrc(4789, None),
                    F::UdpDst(53, None),
                    F::TunnelId(0x55, Some(0xff)),
                ]
                .into_iter()
                .collect(),
                ..FlowMod::default()
            },
        ),
        "flow_mod_match_tcp_icmp_sctp" => flow_mod(
            30,
            FlowMod {
                out_port: 0,
                out_group: 0,
                match_: [
                    F::EthType(0x0800, None),
                    F::IpProto(132, None),
                    F::SctpSrc(1, None),
                    F::SctpDst(2, None),
                ]
                .into_iter()
                .collect(),
                ..FlowMod::default()
            },
        ),
        "flow_mod_match_icmpv4" => flow_mod(
            31,
            FlowMod {
                out_port: 0,
                out_group: 0,
                match_: [
                    F::EthType(0x0800, None),
                    F::IpProto(1, None),
                    F::Icmpv4Type(8, None),
                    F::Icmpv4Code(0, None),
                ]
                .into_iter()
                .collect(),
                ..FlowMod::default()
            },
        ),
        "flow_mod_match_arp" => flow_mod(
            32,
            FlowMod {
                out_port: 0,
                out_group: 0,
                match_: [
                    F::EthType(0x0806, None),
                    F::ArpOp(1, None),
                    F::ArpSpa(ip("198.18.11.0"), Some(ip("255.255.255.0"))),
                    F::ArpTpa(ip("198.18.11.1"), None),
                    F::ArpSha(mac("02:00:00:00:00:00"), Some(mac("ff:ff:ff:ff:ff:00"))),
                    F::ArpTha(mac("00:00:00:00:00:00"), None),
                ]
                .into_iter()
                .collect(),
                ..FlowMod::default()
            },
        ),
        "flow_mod_match_ipv6" => flow_mod(
            33,
            FlowMod {
                out_port: 0,
                out_group: 0,
                match_: [
                    F::EthType(0x86dd, None),
                    F::Ipv6Src(ip6("2001:db8::"), Some(ip6("ffff:ffff::"))),
                    F::Ipv6Dst(ip6("2001:db8::1"), None),
                    F::Ipv6Flabel(0x12345, Some(0xfffff)),
                    F::IpProto(58, None),
                    F::Icmpv6Type(135, None),
                    F::Icmpv6Code(0, None),
                    F::Ipv6NdTarget(ip6("2001:db8::2"), None),
                    F::Ipv6NdSll(mac("02:00:00:00:00:02"), None),
                    F::Ipv6Exthdr(0x0100, Some(0x01ff)),
                ]
                .into_iter()
                .collect(),
                ..FlowMod::default()
            },
        ),
        "flow_mod_match_nd_tll" => flow_mod(
            34,
            FlowMod {
                out_port: 0,
                out_group: 0,
                match_: [
                    F::EthType(0x86dd, None),
                    F::IpProto(58, None),
                    F::Icmpv6Type(136, None),
                    F::Ipv6NdTll(mac("02:00:00:00:00:03"), None),
                ]
                .into_iter()
                .collect(),
                ..FlowMod::default()
            },
        ),
        "flow_mod_match_mpls" => flow_mod(
            35,
            FlowMod {
                out_port: 0,
                out_group: 0,
                match_: [
                    F::EthType(0x8847, None),
                    F::MplsLabel(0x12345, None),
                    F::MplsTc(5, None),
                    F::MplsBos(1, None),
                ]
                .into_iter()
                .collect(),
                ..FlowMod::default()
            },
        ),
        "flow_mod_match_pbb" => flow_mod(
            36,
            FlowMod {
                out_port: 0,
                out_group: 0,
                match_: [
                    F::EthType(0x88e7, None),
                    F::PbbIsid(
                        U24::new(0xabcd00).unwrap(),
                        Some(U24::new(0xffff00).unwrap()),
                    ),
                ]
                .into_iter()
                .collect(),
                ..FlowMod::default()
            },
        ),
        "flow_mod_match_tcp" => flow_mod(
            37,
            FlowMod {
                out_port: 0,
                out_group: 0,
                match_: [
                    F::EthType(0x86dd, None),
                    F::IpProto(6, None),
                    F::TcpSrc(0xb014, None),
                    F::TcpDst(443, None),
                ]
                .into_iter()
                .collect(),
                ..FlowMod::default()
            },
        ),
        "group_mod_select_weights" => msg(
            40,
            Body::GroupMod(GroupMod {
                command: GroupModCommand::Add,
                group_type: GroupType::Select,
                group_id: 1,
                buckets: vec![
                    Bucket {
                        weight: 3,
                        watch_port: ofpp::ANY,
                        watch_group: OFPG_ANY,
                        actions: vec![Action::Output {
                            port: 1,
                            max_len: 0,
                        }],
                    },
                    Bucket {
                        weight: 1,
                        watch_port: ofpp::ANY,
                        watch_group: OFPG_ANY,
                        actions: vec![
                            Action::SetField(F::Ipv4Src(ip(P11), None)),
                            Action::Output {
                                port: 2,
                                max_len: 0,
                            },
                        ],
                    },
                ],
            }),
        ),
        "group_mod_fast_failover" => msg(
            41,
            Body::GroupMod(GroupMod {
                command: GroupModCommand::Modify,
                group_type: GroupType::FastFailover,
                group_id: 2,
                buckets: (1..=2)
                    .map(|p| Bucket {
                        weight: 0,
                        watch_port: p,
                        watch_group: OFPG_ANY,
                        actions: vec![Action::Output {
                            port: p,
                            max_len: 0,
                        }],
                    })
                    .collect(),
            }),
        ),
        "group_mod_delete" => msg(
            42,
            Body::GroupMod(GroupMod {
                command: GroupModCommand::Delete,
                group_type: GroupType::All,
                group_id: OFPG_ALL,
                buckets: vec![],
            }),
        ),
        "port_mod" => msg(
            43,
            Body::PortMod(PortMod {
                port_no: 2,
                hw_addr: mac("02:00:00:00:0b:02"),
                config: 0x40,
                mask: 0x41,
                advertise: 0x20,
            }),
        ),
        "table_mod" => msg(
            44,
            Body::TableMod(TableMod {
                table_id: 1,
                config: 3,
            }),
        ),
        "meter_mod_drop" => msg(
            45,
            Body::MeterMod(MeterMod {
                command: MeterModCommand::Add,
                flags: 0x5,
                meter_id: 1,
                bands: vec![MeterBand::Drop {
                    rate: 40000,
                    burst_size: 1000,
                }],
            }),
        ),
        "meter_mod_remark_experimenter" => msg(
            46,
            Body::MeterMod(MeterMod {
                command: MeterModCommand::Modify,
                flags: 0x2,
                meter_id: 2,
                bands: vec![
                    MeterBand::DscpRemark {
                        rate: 100,
                        burst_size: 10,
                        prec_level: 1,
                    },
                    MeterBand::Experimenter {
                        rate: 5,
                        burst_size: 6,
                        experimenter: 0x2320,
                        data: vec![],
                    },
                ],
            }),
        ),
        "mp_desc_request" => mp_req(50, MultipartRequestBody::Desc),
        "mp_flow_request" => mp_req(
            51,
            MultipartRequestBody::Flow(FlowStatsRequest {
                table_id: 0,
                cookie: 0xb214_0000_0000_0000,
                cookie_mask: 0xffff_0000_0000_0000,
                match_: swap_match(P11, P12, Some(0x2004), None),
                ..FlowStatsRequest::default()
            }),
        ),
        "mp_flow_request_all" => {
            mp_req(52, MultipartRequestBody::Flow(FlowStatsRequest::default()))
        }
        "mp_aggregate_request" => mp_req(
            53,
            MultipartRequestBody::Aggregate(FlowStatsRequest {
                match_: Match::new().with(F::EthType(0x0800, None)),
                ..FlowStatsRequest::default()
            }),
        ),
        "mp_table_request" => mp_req(54, MultipartRequestBody::Table),
        "mp_port_stats_request" => mp_req(55, MultipartRequestBody::PortStats(ofpp::ANY)),
        "mp_queue_request" => mp_req(
            56,
            MultipartRequestBody::Queue {
                port_no: 1,
                queue_id: 0xffff_ffff,
            },
        ),
        "mp_group_request" => mp_req(57, MultipartRequestBody::Group(OFPG_ALL)),
        "mp_group_desc_request" => mp_req(58, MultipartRequestBody::GroupDesc),
        "mp_group_features_request" => mp_req(59, MultipartRequestBody::GroupFeatures),
        "mp_meter_request" => mp_req(60, MultipartRequestBody::Meter(OFPM_ALL)),
        "mp_meter_config_request" => mp_req(61, MultipartRequestBody::MeterConfig(1)),
        "mp_meter_features_request" => mp_req(62, MultipartRequestBody::MeterFeatures),
        "mp_table_features_request" => mp_req(63, MultipartRequestBody::TableFeatures(vec![])),
        "mp_port_desc_request" => mp_req(64, MultipartRequestBody::PortDesc),
        "mp_experimenter_request" => mp_req(
            65,
            MultipartRequestBody::Experimenter(Experimenter {
                experimenter: 0x2320,
                exp_type: 7,
                data: vec![1, 2, 3, 4],
            }),
        ),
        "mp_desc_reply" => mp_rep(
            50,
            0,
            MultipartReplyBody::Desc(Desc {
                mfr_desc: b"Nicira, Inc.".to_vec(),
                hw_desc: b"Open vSwitch".to_vec(),
                sw_desc: b"3.1.0".to_vec(),
                serial_num: b"None".to_vec(),
                dp_desc: b"br0".to_vec(),
            }),
        ),
        "mp_flow_reply" => mp_rep(
            51,
            0,
            MultipartReplyBody::Flow(vec![
                flow_stats_1(),
                FlowStats {
                    priority: 0,
                    cookie: 0,
                    packet_count: 3,
                    byte_count: 180,
                    match_: Match::new(),
                    instructions: vec![],
                    ..flow_stats_1()
                },
            ]),
        ),
        "mp_flow_reply_more" => mp_rep(
            51,
            OFPMPF_MORE,
            MultipartReplyBody::Flow(vec![flow_stats_1()]),
        ),
        "mp_flow_reply_empty" => mp_rep(52, 0, MultipartReplyBody::Flow(vec![])),
        "mp_aggregate_reply" => mp_rep(
            53,
            0,
            MultipartReplyBody::Aggregate(AggregateStats {
                packet_count: 13,
                byte_count: 1680,
                flow_count: 2,
            }),
        ),
        "mp_table_reply" => mp_rep(
            54,
            0,
            MultipartReplyBody::Table(vec![
                TableStats {
                    table_id: 0,
                    active_count: 5,
                    lookup_count: 1000,
                    matched_count: 900,
                },
                TableStats {
                    table_id: 1,
                    ..TableStats::default()
                },
            ]),
        ),
        "mp_port_stats_reply" => mp_rep(
            55,
            0,
            MultipartReplyBody::PortStats(vec![port_stats(1, 1), port_stats(ofpp::LOCAL, 1000)]),
        ),
        "mp_queue_reply" => mp_rep(
            56,
            0,
            MultipartReplyBody::Queue(vec![QueueStats {
                port_no: 1,
                queue_id: 0,
                tx_bytes: 3000,
                tx_packets: 20,
                tx_errors: 0,
                duration_sec: 60,
                duration_nsec: 0,
            }]),
        ),
        "mp_group_reply" => mp_rep(
            57,
            0,
            MultipartReplyBody::Group(vec![GroupStats {
                group_id: 1,
                ref_count: 2,
                packet_count: 9,
                byte_count: 900,
                duration_sec: 30,
                duration_nsec: 5,
                bucket_stats: vec![(5, 500), (4, 400)],
            }]),
        ),
        "mp_group_desc_reply" => mp_rep(
            58,
            0,
            MultipartReplyBody::GroupDesc(vec![GroupDesc {
                group_type: GroupType::Select,
                group_id: 1,
                buckets: [(3, 1), (1, 2)]
                    .into_iter()
                    .map(|(w, p)| Bucket {
                        weight: w,
                        watch_port: ofpp::ANY,
                        watch_group: OFPG_ANY,
                        actions: vec![Action::Output {
                            port: p,
                            max_len: 0,
                        }],
                    })
                    .collect(),
            }]),
        ),
        "mp_group_features_reply" => mp_rep(
            59,
            0,
            MultipartReplyBody::GroupFeatures(GroupFeatures {
                types: 0xf,
                capabilities: 0x7,
                max_groups: [10, 20, 30, 40],
                actions: [1, 2, 3, 4],
            }),
        ),
        "mp_meter_reply" => mp_rep(
            60,
            0,
            MultipartReplyBody::Meter(vec![MeterStats {
                meter_id: 1,
                flow_count: 2,
                packet_in_count: 100,
                byte_in_count: 10000,
                duration_sec: 9,
                duration_nsec: 8,
                band_stats: vec![(7, 77)],
            }]),
        ),
        "mp_meter_config_reply" => mp_rep(
            61,
            0,
            MultipartReplyBody::MeterConfig(vec![MeterConfig {
                flags: 1,
                meter_id: 1,
                bands: vec![MeterBand::Drop {
                    rate: 40000,
                    burst_size: 1000,
                }],
            }]),
        ),
        "mp_meter_features_reply" => mp_rep(
            62,
            0,
            MultipartReplyBody::MeterFeatures(MeterFeatures {
                max_meter: 4096,
                band_types: 2,
                capabilities: 0xf,
                max_bands: 1,
                max_color: 0,
            }),
        ),
        "mp_port_desc_reply" => mp_rep(
            64,
            0,
            MultipartReplyBody::PortDesc(vec![
                port(1, "02:00:00:00:0b:02", "wan0", 10_000_000),
                port(ofpp::LOCAL, "02:00:00:00:00:ff", "br0", 0),
            ]),
        ),
        "mp_experimenter_reply" => mp_rep(
            65,
            0,
            MultipartReplyBody::Experimenter(Experimenter {
                experimenter: 0x2320,
                exp_type: 7,
                data: vec![9],
            }),
        ),
        "barrier_request" => msg(70, Body::BarrierRequest),
        "barrier_reply" => msg(70, Body::BarrierReply),
        "role_request" => msg(
            71,
            Body::RoleRequest(Role {
                role: ControllerRole::Master,
                generation_id: 0x0102_0304_0506_0708,
            }),
        ),
        "role_reply" => msg(
            71,
            Body::RoleReply(Role {
                role: ControllerRole::Master,
                generation_id: 0x0102_0304_0506_0708,
            }),
        ),
        "get_async_request" => msg(72, Body::GetAsyncRequest),
        "get_async_reply" => msg(
            72,
            Body::GetAsyncReply(AsyncConfig {
                packet_in_mask: [3, 1],
                port_status_mask: [7, 7],
                flow_removed_mask: [15, 0],
            }),
        ),
        "set_async" => msg(
            73,
            Body::SetAsync(AsyncConfig {
                packet_in_mask: [3, 1],
                port_status_mask: [7, 7],
                flow_removed_mask: [15, 0],
            }),
        ),
        "queue_get_config_request" => msg(74, Body::QueueGetConfigRequest(1)),
        other => panic!("no expectation for vector {other}"),
    }
}

#[test]
fn os_ken_vectors_decode_and_encode_byte_exact() {
    let vs = vectors();
    assert!(vs.len() >= 60, "only {} vectors", vs.len());
    for (name, _source, bytes) in &vs {
        let want = expected(name);
        let got = Message::decode_exact(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got, want, "{name}: decode");
        let enc = want.to_bytes().unwrap();
        assert_eq!(enc, *bytes, "{name}: encode");
        assert_eq!(want.encoded_len(), bytes.len(), "{name}: encoded_len");
        // The streaming framer sees the same message and its length.
        let mut stream = bytes.clone();
        stream.extend_from_slice(&[0x04, 0x00]);
        let (m, used) = Message::decode(&stream).unwrap().unwrap();
        assert_eq!((m, used), (want, bytes.len()), "{name}: framing");
        assert_eq!(
            Message::decode(&bytes[..bytes.len() - 1]).unwrap(),
            None,
            "{name}: partial"
        );
    }
}

#[test]
fn vectors_cover_every_message_and_multipart_type() {
    let vs = vectors();
    let mut types = std::collections::BTreeSet::new();
    let mut req = std::collections::BTreeSet::new();
    let mut rep = std::collections::BTreeSet::new();
    let mut sources = std::collections::BTreeSet::new();
    for (name, source, bytes) in &vs {
        sources.insert(source.clone());
        let m = Message::decode_exact(bytes).unwrap();
        types.insert(u8::from(m.body.message_type()));
        match &m.body {
            Body::MultipartRequest(r) => {
                req.insert(u16::from(r.multipart_type()));
            }
            Body::MultipartReply(r) => {
                rep.insert(u16::from(r.body.multipart_type()));
            }
            _ => {}
        }
        assert!(!name.is_empty());
    }
    // Every OFPT_* of 1.3 except QUEUE_GET_CONFIG_REPLY (not in the list).
    for t in 0u8..=29 {
        if t == 23 {
            continue;
        }
        assert!(types.contains(&t), "no vector for message type {t}");
    }
    for t in (0u16..=13).chain([0xffff]) {
        assert!(req.contains(&t), "no multipart request vector for type {t}");
        // TABLE_FEATURES replies stay opaque and have no os-ken vector.
        if t != 12 {
            assert!(rep.contains(&t), "no multipart reply vector for type {t}");
        }
    }
    assert_eq!(
        sources.into_iter().collect::<Vec<_>>(),
        vec!["parsed".to_string(), "serialize".to_string()]
    );
}

#[test]
fn swap_flows_pass_prerequisite_check() {
    for name in [
        "flow_mod_swap_source",
        "flow_mod_swap_transit",
        "flow_mod_swap_destination",
        "flow_mod_swap_reverse",
        "flow_mod_match_l2_masked",
        "flow_mod_match_ipv6",
        "flow_mod_match_arp",
        "flow_mod_match_mpls",
        "flow_mod_match_pbb",
    ] {
        let Body::FlowMod(f) = expected(name).body else {
            unreachable!()
        };
        f.match_
            .validate()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn other_oxm_classes_round_trip() {
    // An NXM_NX_REG0 field (class 0x0001) as OVS may send it, kept verbatim.
    let f = F::Other(OtherOxm {
        class: 0x0001,
        field: 0,
        hasmask: false,
        payload: vec![0, 0, 0, 5],
    });
    let m = msg(
        9,
        Body::FlowMod(FlowMod {
            match_: Match::new().with(f),
            ..FlowMod::default()
        }),
    );
    let b = m.to_bytes().unwrap();
    assert_eq!(Message::decode_exact(&b).unwrap(), m);
}
