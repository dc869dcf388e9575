//! The channel state machine on virtual time (STYLE.md §6.3): time is an `Instant` we advance by
//! hand, the peer is scripted in the test.

// Test helpers outside #[test] fns: clippy.toml allows these only inside the test fns themselves.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::time::{Duration, Instant};

use ofproto::channel::{Channel, CloseReason, Config, Event, RequestError, State};
use ofproto::message::*;
use ofproto::multipart::*;
use ofproto::ofp_error::*;
use ofproto::oxm::{Match, OxmField};
use ofproto::{Body, Message};

fn decode_all(mut b: &[u8]) -> Vec<Message> {
    let mut v = Vec::new();
    while let Some((m, n)) = Message::decode(b).unwrap() {
        v.push(m);
        b = &b[n..];
    }
    assert!(b.is_empty(), "partial message left in tx");
    v
}

fn tx(c: &mut Channel) -> Vec<Message> {
    let mut out = Vec::new();
    c.poll_transmit(&mut out);
    decode_all(&out)
}

fn events(c: &mut Channel) -> Vec<Event> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

fn bytes(m: Message) -> Vec<u8> {
    m.to_bytes().unwrap()
}

/// A controller channel that completed the HELLO exchange at `t0`.
fn connected(t0: Instant, config: Config) -> Channel {
    let mut c = Channel::new(t0, config);
    let sent = tx(&mut c);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].body, Body::Hello(Hello::v1_3()));
    c.handle_input(t0, &bytes(Message::new(100, Body::Hello(Hello::v1_3()))));
    assert_eq!(events(&mut c), vec![Event::Connected { version: 4 }]);
    assert_eq!(c.state(), State::Connected);
    c
}

fn flow_mod(cookie: u64) -> Body {
    Body::FlowMod(FlowMod {
        cookie,
        match_: Match::new().with(OxmField::InPort(1, None)),
        ..FlowMod::default()
    })
}

#[test]
fn hello_with_version_bitmap_negotiates_1_3() {
    let t0 = Instant::now();
    let mut c = Channel::new(t0, Config::default());
    // OVS 3.1 offering 1.0..1.5 with a bitmap and header version 6.
    let hello = Hello {
        version: 6,
        elements: vec![HelloElement::VersionBitmap(vec![0b111_1110])],
    };
    c.handle_input(t0, &bytes(Message::new(7, Body::Hello(hello))));
    assert_eq!(events(&mut c), vec![Event::Connected { version: 4 }]);
}

#[test]
fn hello_without_bitmap_uses_lower_header_version() {
    let t0 = Instant::now();
    let mut c = Channel::new(t0, Config::default());
    let hello = Hello {
        version: 5,
        elements: vec![],
    };
    c.handle_input(t0, &bytes(Message::new(7, Body::Hello(hello))));
    assert_eq!(events(&mut c), vec![Event::Connected { version: 4 }]);
}

#[test]
fn hello_bitmap_without_1_3_fails_with_hello_failed_incompatible() {
    let t0 = Instant::now();
    let mut c = Channel::new(t0, Config::default());
    tx(&mut c);
    // Header says 1.5 but the bitmap lists only 1.0 and 1.4 (bitmap wins, §6.3.1).
    let hello = Hello {
        version: 5,
        elements: vec![HelloElement::VersionBitmap(vec![(1 << 1) | (1 << 5)])],
    };
    c.handle_input(t0, &bytes(Message::new(9, Body::Hello(hello))));
    let sent = tx(&mut c);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].xid, 9);
    let Body::Error(e) = &sent[0].body else {
        panic!("{sent:?}")
    };
    assert_eq!(
        e.code,
        ErrorCode::HelloFailed(HelloFailedCode::Incompatible)
    );
    assert!(String::from_utf8_lossy(&e.data).contains("1.3"));
    assert_eq!(
        events(&mut c),
        vec![Event::Closed(CloseReason::Incompatible { peer_version: 5 })]
    );
    assert_eq!(c.state(), State::Closed);
    assert!(c.send(t0, Body::BarrierRequest).is_err());
}

#[test]
fn hello_from_an_older_peer_fails() {
    let t0 = Instant::now();
    let mut c = Channel::new(t0, Config::default());
    tx(&mut c);
    // An OpenFlow 1.0 HELLO (version 0x01, no elements).
    c.handle_input(t0, &[0x01, 0x00, 0x00, 0x08, 0, 0, 0, 5]);
    let sent = tx(&mut c);
    assert!(matches!(&sent[0].body, Body::Error(e)
        if e.code == ErrorCode::HelloFailed(HelloFailedCode::Incompatible)));
    assert_eq!(
        events(&mut c),
        vec![Event::Closed(CloseReason::Incompatible { peer_version: 1 })]
    );
}

#[test]
fn peer_rejecting_our_hello_closes() {
    let t0 = Instant::now();
    let mut c = Channel::new(t0, Config::default());
    let err = ErrorMsg {
        code: ErrorCode::HelloFailed(HelloFailedCode::Incompatible),
        data: b"nope".to_vec(),
    };
    c.handle_input(t0, &bytes(Message::new(1, Body::Error(err.clone()))));
    assert_eq!(
        events(&mut c),
        vec![Event::Closed(CloseReason::PeerRejected(err))]
    );
}

#[test]
fn missing_hello_times_out() {
    let t0 = Instant::now();
    let cfg = Config::default();
    let mut c = Channel::new(t0, cfg);
    assert_eq!(c.poll_timeout(), Some(t0 + cfg.hello_timeout));
    c.handle_timeout(t0 + cfg.hello_timeout - Duration::from_millis(1));
    assert!(events(&mut c).is_empty());
    c.handle_timeout(t0 + cfg.hello_timeout);
    assert_eq!(events(&mut c), vec![Event::Closed(CloseReason::PeerDead)]);
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn xids_are_unique_nonzero_and_replies_correlate_out_of_order() {
    let t0 = Instant::now();
    let mut c = connected(t0, Config::default());
    let a = c.send(t0, Body::FeaturesRequest).unwrap();
    let b = c.send(t0, Body::GetConfigRequest).unwrap();
    let d = c
        .send(
            t0,
            Body::RoleRequest(Role {
                role: ControllerRole::Master,
                generation_id: 1,
            }),
        )
        .unwrap();
    assert!(a != 0 && a != b && b != d && a != d);
    let sent = tx(&mut c);
    assert_eq!(
        sent.iter().map(|m| m.xid).collect::<Vec<_>>(),
        vec![a, b, d]
    );
    assert_eq!(c.outstanding(), 3);

    let cfg = SwitchConfig {
        flags: 0,
        miss_send_len: 128,
    };
    let feat = SwitchFeatures {
        datapath_id: 1,
        n_tables: 254,
        ..SwitchFeatures::default()
    };
    let role = Role {
        role: ControllerRole::Master,
        generation_id: 1,
    };
    let mut input = bytes(Message::new(b, Body::GetConfigReply(cfg)));
    input.extend(bytes(Message::new(d, Body::RoleReply(role))));
    input.extend(bytes(Message::new(a, Body::FeaturesReply(feat))));
    c.handle_input(t0, &input);
    assert_eq!(
        events(&mut c),
        vec![
            Event::Reply {
                xid: b,
                request: MessageType::GetConfigRequest,
                reply: Body::GetConfigReply(cfg)
            },
            Event::Reply {
                xid: d,
                request: MessageType::RoleRequest,
                reply: Body::RoleReply(role)
            },
            Event::Reply {
                xid: a,
                request: MessageType::FeaturesRequest,
                reply: Body::FeaturesReply(feat)
            },
        ]
    );
    assert_eq!(c.outstanding(), 0);
}

#[test]
fn xid_allocation_skips_outstanding_and_zero_on_wrap() {
    let t0 = Instant::now();
    let mut c = connected(t0, Config::default());
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..1000 {
        let x = c.send(t0, Body::FeaturesRequest).unwrap();
        assert!(x != 0 && seen.insert(x), "xid {x} reused while outstanding");
    }
}

fn port_stats(no: u32, rx: u64) -> PortStats {
    PortStats {
        port_no: no,
        rx_packets: rx,
        ..PortStats::default()
    }
}

fn mp_part(xid: u32, more: bool, v: Vec<PortStats>) -> Vec<u8> {
    bytes(Message::new(
        xid,
        Body::MultipartReply(MultipartReply {
            flags: if more { OFPMPF_MORE } else { 0 },
            body: MultipartReplyBody::PortStats(v),
        }),
    ))
}

#[test]
fn multipart_reply_is_reassembled_across_reply_more() {
    let t0 = Instant::now();
    let mut c = connected(t0, Config::default());
    let x = c
        .send(
            t0,
            Body::MultipartRequest(MultipartRequest::new(MultipartRequestBody::PortStats(
                ofproto::port::ofpp::ANY,
            ))),
        )
        .unwrap();
    let other = c.send(t0, Body::BarrierRequest).unwrap();
    c.handle_input(
        t0,
        &mp_part(x, true, vec![port_stats(1, 10), port_stats(2, 20)]),
    );
    assert!(events(&mut c).is_empty(), "no event before the last part");
    // Another reply interleaves between parts.
    c.handle_input(t0, &bytes(Message::new(other, Body::BarrierReply)));
    c.handle_input(t0, &mp_part(x, true, vec![port_stats(3, 30)]));
    // The last part arrives split into single bytes.
    for b in mp_part(x, false, vec![port_stats(4, 40)]) {
        c.handle_input(t0, &[b]);
    }
    let ev = events(&mut c);
    assert_eq!(
        ev,
        vec![
            Event::Barrier {
                xid: other,
                confirmed: vec![]
            },
            Event::Reply {
                xid: x,
                request: MessageType::MultipartRequest,
                reply: Body::MultipartReply(MultipartReply {
                    flags: 0,
                    body: MultipartReplyBody::PortStats(vec![
                        port_stats(1, 10),
                        port_stats(2, 20),
                        port_stats(3, 30),
                        port_stats(4, 40)
                    ])
                })
            }
        ]
    );
}

#[test]
fn oversized_multipart_reply_fails_the_request() {
    let t0 = Instant::now();
    let mut c = connected(
        t0,
        Config {
            max_reply_bytes: 300,
            ..Config::default()
        },
    );
    let x = c
        .send(
            t0,
            Body::MultipartRequest(MultipartRequest::new(MultipartRequestBody::PortStats(1))),
        )
        .unwrap();
    c.handle_input(
        t0,
        &mp_part(x, true, vec![port_stats(1, 1), port_stats(1, 1)]),
    );
    c.handle_input(
        t0,
        &mp_part(x, true, vec![port_stats(1, 1), port_stats(1, 1)]),
    );
    assert_eq!(
        events(&mut c),
        vec![Event::RequestFailed {
            xid: x,
            request: MessageType::MultipartRequest,
            error: RequestError::ReplyTooLarge
        }]
    );
    // Later parts for the forgotten xid are unsolicited messages, not a crash.
    c.handle_input(t0, &mp_part(x, false, vec![]));
    assert!(matches!(events(&mut c)[..], [Event::Message(_)]));
}

#[test]
fn echo_keepalive_and_dead_peer_timeout() {
    let t0 = Instant::now();
    let cfg = Config::default();
    let mut c = connected(t0, cfg);
    assert_eq!(c.poll_timeout(), Some(t0 + cfg.echo_interval));
    // Quiet for the echo interval: an ECHO_REQUEST goes out.
    let t1 = t0 + cfg.echo_interval;
    c.handle_timeout(t1);
    let sent = tx(&mut c);
    assert_eq!(sent.len(), 1);
    assert!(matches!(sent[0].body, Body::EchoRequest(_)));
    // Only one echo in flight; the next deadline is the dead-peer one.
    c.handle_timeout(t1 + Duration::from_secs(1));
    assert!(tx(&mut c).is_empty());
    assert_eq!(c.poll_timeout(), Some(t0 + cfg.dead_timeout));
    // The peer answers: alive, and the timers restart from the answer.
    let t2 = t1 + Duration::from_millis(30);
    c.handle_input(
        t2,
        &bytes(Message::new(sent[0].xid, Body::EchoReply(vec![]))),
    );
    assert!(
        events(&mut c).is_empty(),
        "keepalive replies are not reported"
    );
    assert_eq!(c.poll_timeout(), Some(t2 + cfg.echo_interval));
    // Now the peer goes silent: echo at t2+5 s, dead at t2+15 s.
    c.handle_timeout(t2 + cfg.echo_interval);
    assert_eq!(tx(&mut c).len(), 1);
    c.handle_timeout(t2 + cfg.dead_timeout - Duration::from_millis(1));
    assert!(events(&mut c).is_empty());
    c.handle_timeout(t2 + cfg.dead_timeout);
    assert_eq!(events(&mut c), vec![Event::Closed(CloseReason::PeerDead)]);
    assert_eq!(c.state(), State::Closed);
}

#[test]
fn peer_echo_request_is_answered_with_same_xid_and_data() {
    let t0 = Instant::now();
    let mut c = connected(t0, Config::default());
    c.handle_input(
        t0,
        &bytes(Message::new(0xabcd, Body::EchoRequest(b"hi".to_vec()))),
    );
    assert_eq!(
        tx(&mut c),
        vec![Message::new(0xabcd, Body::EchoReply(b"hi".to_vec()))]
    );
    assert!(events(&mut c).is_empty());
}

#[test]
fn barrier_confirms_commands_and_errors_go_to_the_failing_command() {
    let t0 = Instant::now();
    let mut c = connected(t0, Config::default());
    let f1 = c.send(t0, flow_mod(1)).unwrap();
    let f2 = c.send(t0, flow_mod(2)).unwrap();
    let b1 = c.send(t0, Body::BarrierRequest).unwrap();
    let f3 = c.send(t0, flow_mod(3)).unwrap();
    let b2 = c.send(t0, Body::BarrierRequest).unwrap();
    let sent = tx(&mut c);
    assert_eq!(sent.len(), 5);
    // The switch rejects f2 (bad table) and answers both barriers.
    let err = ErrorMsg {
        code: ErrorCode::FlowModFailed(FlowModFailedCode::BadTableId),
        data: bytes(sent[1].clone())[..64].to_vec(),
    };
    let mut input = bytes(Message::new(f2, Body::Error(err.clone())));
    input.extend(bytes(Message::new(b1, Body::BarrierReply)));
    input.extend(bytes(Message::new(b2, Body::BarrierReply)));
    c.handle_input(t0, &input);
    assert_eq!(
        events(&mut c),
        vec![
            Event::RequestFailed {
                xid: f2,
                request: MessageType::FlowMod,
                error: RequestError::Peer(err)
            },
            Event::Barrier {
                xid: b1,
                confirmed: vec![f1]
            },
            Event::Barrier {
                xid: b2,
                confirmed: vec![f3]
            },
        ]
    );
    assert_eq!(c.outstanding(), 0);
}

#[test]
fn error_for_a_multipart_request_goes_to_that_request() {
    let t0 = Instant::now();
    let mut c = connected(t0, Config::default());
    let x = c
        .send(
            t0,
            Body::MultipartRequest(MultipartRequest::new(MultipartRequestBody::Flow(
                FlowStatsRequest {
                    table_id: 0xfe,
                    ..FlowStatsRequest::default()
                },
            ))),
        )
        .unwrap();
    let err = ErrorMsg {
        code: ErrorCode::BadRequest(BadRequestCode::BadTableId),
        data: vec![],
    };
    c.handle_input(t0, &bytes(Message::new(x, Body::Error(err.clone()))));
    assert_eq!(
        events(&mut c),
        vec![Event::RequestFailed {
            xid: x,
            request: MessageType::MultipartRequest,
            error: RequestError::Peer(err)
        }]
    );
}

#[test]
fn unsolicited_messages_are_reported() {
    let t0 = Instant::now();
    let mut c = connected(t0, Config::default());
    let pin = Message::new(
        0,
        Body::PacketIn(PacketIn {
            buffer_id: OFP_NO_BUFFER,
            total_len: 3,
            reason: PacketInReason::NoMatch,
            table_id: 0,
            cookie: 0,
            match_: Match::new().with(OxmField::InPort(2, None)),
            data: vec![1, 2, 3],
        }),
    );
    let err = Message::new(
        77,
        Body::Error(ErrorMsg {
            code: ErrorCode::BadRequest(BadRequestCode::Eperm),
            data: vec![],
        }),
    );
    let mut input = bytes(pin.clone());
    input.extend(bytes(err.clone()));
    c.handle_input(t0, &input);
    assert_eq!(
        events(&mut c),
        vec![Event::Message(pin), Event::Message(err)]
    );
}

fn assert_error_reply(c: &mut Channel, xid: u32, code: ErrorCode, offending: &[u8]) {
    let sent = tx(c);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].xid, xid);
    let Body::Error(e) = &sent[0].body else {
        panic!("{sent:?}")
    };
    assert_eq!(e.code, code);
    assert_eq!(e.data, offending[..offending.len().min(64)]);
    assert_eq!(
        c.state(),
        State::Connected,
        "errors in one message do not close"
    );
}

#[test]
fn answers_with_ofpt_error_where_the_spec_requires() {
    let t0 = Instant::now();
    let mut c = connected(t0, Config::default());

    // Unknown message type → BAD_REQUEST/BAD_TYPE.
    let m = [0x04, 0x63, 0x00, 0x0c, 0, 0, 0, 0x21, 1, 2, 3, 4];
    c.handle_input(t0, &m);
    assert_error_reply(
        &mut c,
        0x21,
        ErrorCode::BadRequest(BadRequestCode::BadType),
        &m,
    );

    // Wrong version after negotiation → BAD_REQUEST/BAD_VERSION.
    let m = [0x05, 0x02, 0x00, 0x08, 0, 0, 0, 0x22];
    c.handle_input(t0, &m);
    assert_error_reply(
        &mut c,
        0x22,
        ErrorCode::BadRequest(BadRequestCode::BadVersion),
        &m,
    );

    // Unknown multipart type in a request → BAD_REQUEST/BAD_MULTIPART.
    let m = bytes(Message::new(
        0x23,
        Body::MultipartRequest(MultipartRequest::new(MultipartRequestBody::Unknown {
            typ: 0x77,
            data: vec![],
        })),
    ));
    c.handle_input(t0, &m);
    assert_error_reply(
        &mut c,
        0x23,
        ErrorCode::BadRequest(BadRequestCode::BadMultipart),
        &m,
    );

    // A FLOW_MOD whose match says OFPMT_STANDARD → BAD_MATCH/BAD_TYPE, 64 bytes of it echoed.
    let mut m = bytes(Message::new(0x24, flow_mod(9)));
    m[48] = 0;
    m[49] = 0;
    c.handle_input(t0, &m);
    assert_error_reply(&mut c, 0x24, ErrorCode::BadMatch(BadMatchCode::BadType), &m);

    // A BARRIER_REQUEST with a body → BAD_REQUEST/BAD_LEN.
    let m = [0x04, 0x14, 0x00, 0x0c, 0, 0, 0, 0x25, 0, 0, 0, 0];
    c.handle_input(t0, &m);
    assert_error_reply(
        &mut c,
        0x25,
        ErrorCode::BadRequest(BadRequestCode::BadLen),
        &m,
    );

    // An action with a bad length → BAD_ACTION/BAD_LEN.
    let mut m = bytes(Message::new(
        0x26,
        Body::PacketOut(PacketOut {
            buffer_id: OFP_NO_BUFFER,
            in_port: 1,
            actions: vec![ofproto::Action::Output {
                port: 1,
                max_len: 0,
            }],
            data: vec![],
        }),
    ));
    m[27] = 8; // ofp_action_output.len = 8 (must be 16)
    c.handle_input(t0, &m);
    assert_error_reply(
        &mut c,
        0x26,
        ErrorCode::BadAction(BadActionCode::BadLen),
        &m,
    );
}

#[test]
fn unframeable_stream_closes() {
    let t0 = Instant::now();
    let mut c = connected(t0, Config::default());
    c.handle_input(t0, &[0x04, 0x02, 0x00, 0x04, 0, 0, 0, 1]);
    assert!(matches!(
        events(&mut c)[..],
        [Event::Closed(CloseReason::Framing(_))]
    ));
}

#[test]
fn unconfirmed_commands_are_bounded() {
    let t0 = Instant::now();
    let mut c = connected(
        t0,
        Config {
            max_unconfirmed: 4,
            ..Config::default()
        },
    );
    let xs: Vec<u32> = (0..10).map(|i| c.send(t0, flow_mod(i)).unwrap()).collect();
    assert_eq!(c.outstanding(), 4);
    let b = c.send(t0, Body::BarrierRequest).unwrap();
    c.handle_input(t0, &bytes(Message::new(b, Body::BarrierReply)));
    assert_eq!(
        events(&mut c),
        vec![Event::Barrier {
            xid: b,
            confirmed: xs[6..].to_vec()
        }]
    );
}

/// Two channels wired back to back: a controller and a scripted switch exchange HELLO, a
/// FLOW_MOD + barrier, and keep each other alive with echoes over a minute of virtual time.
#[test]
fn two_channels_back_to_back() {
    let t0 = Instant::now();
    let cfg = Config::default();
    let mut ctl = Channel::new(t0, cfg);
    let mut sw = Channel::new(t0, cfg);
    let mut now = t0;
    let mut ctl_events = Vec::new();
    let pump = |a: &mut Channel, b: &mut Channel, now: Instant| {
        for _ in 0..4 {
            let mut buf = Vec::new();
            a.poll_transmit(&mut buf);
            b.handle_input(now, &buf);
            let mut buf = Vec::new();
            b.poll_transmit(&mut buf);
            a.handle_input(now, &buf);
        }
    };
    pump(&mut ctl, &mut sw, now);
    let f = ctl.send(now, flow_mod(5)).unwrap();
    let b = ctl.send(now, Body::BarrierRequest).unwrap();
    pump(&mut ctl, &mut sw, now);
    // The switch side sees the commands as messages and answers the barrier.
    for e in events(&mut sw) {
        if let Event::Message(Message {
            xid,
            body: Body::BarrierRequest,
        }) = e
        {
            sw.send_with_xid(xid, Body::BarrierReply).unwrap();
        }
    }
    pump(&mut ctl, &mut sw, now);
    ctl_events.extend(events(&mut ctl));
    // A minute of idle virtual time: echoes keep both sides up.
    while now < t0 + Duration::from_secs(60) {
        let next = ctl.poll_timeout().unwrap().min(sw.poll_timeout().unwrap());
        now = next;
        ctl.handle_timeout(now);
        sw.handle_timeout(now);
        pump(&mut ctl, &mut sw, now + Duration::from_millis(1));
    }
    ctl_events.extend(events(&mut ctl));
    assert_eq!(
        ctl_events,
        vec![
            Event::Connected { version: 4 },
            Event::Barrier {
                xid: b,
                confirmed: vec![f]
            }
        ]
    );
    assert_eq!(ctl.state(), State::Connected);
    assert_eq!(sw.state(), State::Connected);
}

#[test]
fn first_message_must_be_hello() {
    let t0 = Instant::now();
    let mut c = Channel::new(t0, Config::default());
    tx(&mut c);
    let m = bytes(Message::new(4, Body::FeaturesRequest));
    c.handle_input(t0, &m);
    let sent = tx(&mut c);
    assert!(
        matches!(&sent[..], [Message { xid: 4, body: Body::Error(e) }]
        if e.code == ErrorCode::HelloFailed(HelloFailedCode::Eperm) && e.data == m)
    );
    assert_eq!(
        events(&mut c),
        vec![Event::Closed(CloseReason::NoHello(
            MessageType::FeaturesRequest
        ))]
    );
}

#[test]
fn a_talkative_peer_that_ignores_one_echo_gets_another() {
    let t0 = Instant::now();
    let cfg = Config::default();
    let mut c = connected(t0, cfg);
    c.handle_timeout(t0 + cfg.echo_interval);
    assert_eq!(tx(&mut c).len(), 1);
    // The peer sends a PORT_STATUS-like message (alive) but never answers that echo.
    let t1 = t0 + cfg.echo_interval + Duration::from_secs(1);
    c.handle_input(t1, &bytes(Message::new(0, Body::BarrierReply)));
    events(&mut c);
    assert_eq!(c.poll_timeout(), Some(t1 + cfg.echo_interval));
    c.handle_timeout(t1 + cfg.echo_interval);
    let sent = tx(&mut c);
    assert!(matches!(
        &sent[..],
        [Message {
            body: Body::EchoRequest(_),
            ..
        }]
    ));
    assert_eq!(c.state(), State::Connected);
}

#[test]
fn huge_timeouts_never_fire_and_never_overflow() {
    let t0 = Instant::now();
    let cfg = Config {
        echo_interval: Duration::MAX,
        dead_timeout: Duration::MAX,
        hello_timeout: Duration::MAX,
        ..Config::default()
    };
    let mut c = Channel::new(t0, cfg);
    assert_eq!(c.poll_timeout(), None);
    c.handle_input(t0, &bytes(Message::new(1, Body::Hello(Hello::v1_3()))));
    assert_eq!(c.poll_timeout(), None);
    c.handle_timeout(t0 + Duration::from_secs(1_000_000));
    assert_eq!(c.state(), State::Connected);
}
