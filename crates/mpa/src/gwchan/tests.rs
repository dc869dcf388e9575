//! Gateway channel codec tests: golden bytes, round trips, the length limit before buffering,
//! and (proptest) no panic on any bytes, `decode(encode(m)) == m`, split input.

use super::*;
use crate::config::{ClassifierConfig, Config, PathGroupConfig, PortRange, Rule};
use crate::Class;
use proptest::prelude::*;

fn base() -> Config {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/mmsg-branch1.toml"
    ))
    .unwrap();
    Config::parse(&text).unwrap()
}

#[test]
fn golden_hello() {
    let mut out = Vec::new();
    encode(&GatewayMsg::Hello(Hello::ours("mmsg 0.1.0")), &mut out).unwrap();
    let body = br#"{"type":"hello","protocol":6,"software":"mmsg 0.1.0"}"#;
    // u32 big-endian length, then the JSON body.
    let mut want = (body.len() as u32).to_be_bytes().to_vec();
    want.extend_from_slice(body);
    assert_eq!(out, want);
    let (m, n): (GatewayMsg, usize) = decode(&out).unwrap().unwrap();
    assert_eq!(n, out.len());
    assert_eq!(m, GatewayMsg::Hello(Hello::ours("mmsg 0.1.0")));
    assert!(Hello::ours("x").check().is_ok());
    let e = Hello {
        protocol: 7,
        software: String::new(),
    }
    .check()
    .unwrap_err();
    assert!(e.contains("protocol version 7"), "{e}");
    // The controller still serves version 1 and 2 gateways (1 cannot enrol, 2 gets no CRL) and
    // runs their sessions at their version; a gateway talks to controllers of 2..=6.
    for (v, serves, talks, session) in [
        (0, false, false, 6),
        (1, true, false, 1),
        (2, true, true, 2),
        (3, true, true, 3),
        (4, true, true, 4),
        (5, true, true, 5),
        (6, true, true, 6),
        (7, false, false, 6),
    ] {
        let h = Hello::with_protocol(v, "");
        assert_eq!(h.check_gateway().is_ok(), serves, "{v}");
        assert_eq!(h.check_controller().is_ok(), talks, "{v}");
        assert_eq!(h.negotiated(), session, "{v}");
    }
}

#[test]
fn enrol_debug_never_shows_the_token() {
    let m = GatewayMsg::Enrol(Enrol {
        branch_id: 2,
        token: "s3cr3t-t0k3n".into(),
        public_key: "04ab".into(),
        proof: "30".into(),
    });
    let d = format!("{m:?}");
    assert!(!d.contains("s3cr3t"), "{d}");
    assert!(d.contains("branch_id: 2"), "{d}");
    let mut out = Vec::new();
    encode(&m, &mut out).unwrap();
    let (back, _): (GatewayMsg, usize) = decode(&out).unwrap().unwrap();
    assert_eq!(back, m);
    let c = ControllerMsg::Credentials(Credentials {
        cert_pem: "C".into(),
        serial: 9,
        not_after: 1,
        ca_pem: "A".into(),
        crl_pem: "R".into(),
    });
    out.clear();
    encode(&c, &mut out).unwrap();
    let (back, _): (ControllerMsg, usize) = decode(&out).unwrap().unwrap();
    assert_eq!(back, c);
}

#[test]
fn config_round_trip_and_merge() {
    let b = base();
    let cfg = GatewayConfig {
        version: 7,
        branch_id: 1,
        remotes: vec![crate::config::RemoteBranch {
            id: 2,
            wan_addresses: vec!["198.18.20.2".parse().unwrap()],
            lan_prefixes: vec!["198.19.2.0/24".parse().unwrap()],
            path_groups: vec![
                PathGroupConfig { id: 0, weight: 700 },
                PathGroupConfig { id: 1, weight: 300 },
            ],
            nat: false,
        }],
        classifier: Some(ClassifierConfig {
            default_class: Class::TypeII,
            rules: vec![Rule {
                name: "web".into(),
                class: Class::TypeI,
                dscp: vec![46],
                ip_protocol: Some(6),
                src_prefixes: vec![],
                dst_prefixes: vec![],
                src_ports: vec![PortRange { lo: 80, hi: 80 }],
                dst_ports: vec![PortRange { lo: 5000, hi: 5999 }],
            }],
        }),
        priorities: Priorities {
            type1_socket_dscp: 46,
            marks: [("type1/1".to_owned(), 46)].into_iter().collect(),
        },
        ports: None,
    };
    let mut out = Vec::new();
    encode(&ControllerMsg::Config(cfg.clone()), &mut out).unwrap();
    let text = std::str::from_utf8(&out[4..]).unwrap();
    assert!(text.contains(r#""src_ports":[80]"#), "{text}");
    assert!(text.contains(r#""dst_ports":["5000-5999"]"#), "{text}");
    let (m, _): (ControllerMsg, usize) = decode(&out).unwrap().unwrap();
    assert_eq!(m, ControllerMsg::Config(cfg.clone()));

    let merged = cfg.validate_for(&b).unwrap();
    assert_eq!(merged.remote, cfg.remotes);
    assert_eq!(merged.wan, b.wan);
    // The classifier is kept when the controller sends none.
    let mut no_cl = cfg.clone();
    no_cl.classifier = None;
    assert_eq!(no_cl.merge_into(&b).classifier, b.classifier);
    // Invalid: a weight out of range, another branch's config.
    let mut bad = cfg.clone();
    bad.remotes[0].path_groups[0].weight = 0;
    let e = bad.validate_for(&b).unwrap_err();
    assert!(e.contains("remote[0].path_groups[0].weight"), "{e}");
    let mut other = cfg;
    other.branch_id = 2;
    assert!(other.validate_for(&b).unwrap_err().contains("branch 2"));
}

#[test]
fn limit_checked_before_the_body() {
    // The prefix alone says too long: refused with 4 bytes in hand.
    let too_long = ((MAX_BODY_LEN + 1) as u32).to_be_bytes();
    assert_eq!(
        decode::<GatewayMsg>(&too_long),
        Err(DecodeError::TooLong(MAX_BODY_LEN + 1))
    );
    assert_eq!(decode::<GatewayMsg>(&[0, 0, 0, 0]), Err(DecodeError::Empty));
    assert_eq!(decode::<GatewayMsg>(&[0, 0, 1]), Ok(None));
    assert_eq!(decode::<GatewayMsg>(&[0, 0, 0, 5, b'{']), Ok(None));
    // Unknown type, unknown field, trailing garbage inside the body: invalid.
    for body in [
        &br#"{"type":"nope"}"#[..],
        br#"{"type":"hello","protocol":1,"software":"","x":1}"#,
        br#"{"type":"hello","protocol":1,"software":""} x"#,
    ] {
        let mut b = (body.len() as u32).to_be_bytes().to_vec();
        b.extend_from_slice(body);
        assert!(matches!(
            decode::<GatewayMsg>(&b),
            Err(DecodeError::Invalid(_))
        ));
    }
}

#[test]
fn report_of_an_older_gateway_without_busy_time_decodes() {
    // A protocol 1.0 gateway's group entry has no `busy_us`: it reads as 0 (never saturated).
    let body = r#"{"type":"report","healthy":true,"config_version":3,"config_source":"controller","connections_up":2,"connections_total":2,"drops":0,"groups":[{"branch":2,"group":1,"bytes_tx":42,"up":true}]}"#;
    let mut wire = (body.len() as u32).to_be_bytes().to_vec();
    wire.extend_from_slice(body.as_bytes());
    let (msg, n) = decode::<GatewayMsg>(&wire).unwrap().unwrap();
    assert_eq!(n, wire.len());
    let GatewayMsg::Report(r) = msg else {
        panic!("not a report: {msg:?}")
    };
    assert_eq!(r.groups.len(), 1);
    assert_eq!(
        (
            r.groups[0].bytes_tx,
            r.groups[0].busy_us,
            r.groups[0].window_bps
        ),
        (42, 0, 0)
    );
}

#[test]
fn a_report_without_the_standing_queue_has_no_such_fields() {
    // A gateway in a session below protocol 6 leaves them out (`None`): a version 5 `ssc`
    // (`deny_unknown_fields`) must see exactly its own fields.
    let mut g = GroupReport {
        branch: 2,
        group: 1,
        bytes_tx: 42,
        up: true,
        inflight_bps: Some(7),
        ..GroupReport::default()
    };
    let json = serde_json::to_string(&g).unwrap();
    assert!(
        !json.contains("queue_delay_us") && !json.contains("base_rtt_us"),
        "{json}"
    );
    g.queue_delay_us = Some(175_000);
    g.base_rtt_us = Some(20_000);
    let json = serde_json::to_string(&g).unwrap();
    assert!(
        json.ends_with(r#""inflight_bps":7,"queue_delay_us":175000,"base_rtt_us":20000}"#),
        "{json}"
    );
    assert_eq!(serde_json::from_str::<GroupReport>(&json).unwrap(), g);
}

fn arb_gateway_msg() -> impl Strategy<Value = GatewayMsg> {
    prop_oneof![
        (any::<u32>(), ".{0,20}")
            .prop_map(|(protocol, software)| GatewayMsg::Hello(Hello { protocol, software })),
        (
            any::<u8>(),
            ".{0,10}",
            proptest::collection::vec(("[a-z0-9]{1,15}", "[0-9./]{1,18}"), 0..8),
            any::<u64>()
        )
            .prop_map(|(branch_id, software_version, wan, config_version)| {
                GatewayMsg::Register(Register {
                    branch_id,
                    software_version,
                    wan: wan
                        .into_iter()
                        .map(|(name, address)| WanSeen { name, address })
                        .collect(),
                    config_version,
                })
            }),
        (
            any::<bool>(),
            any::<u64>(),
            any::<u32>(),
            any::<u64>(),
            proptest::collection::vec(
                (
                    any::<u8>(),
                    any::<u8>(),
                    any::<u64>(),
                    any::<bool>(),
                    (any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>())
                ),
                0..16
            )
        )
            .prop_map(
                |(healthy, v, up, drops, groups)| GatewayMsg::Report(Report {
                    healthy,
                    config_version: v,
                    config_source: "cache".into(),
                    connections_up: up,
                    connections_total: up,
                    drops,
                    groups: groups
                        .into_iter()
                        .map(
                            |(
                                branch,
                                group,
                                bytes_tx,
                                up,
                                (busy_us, window_bps, acked, retrans),
                            )| GroupReport {
                                branch,
                                group,
                                bytes_tx,
                                up,
                                busy_us,
                                window_bps,
                                acked_bytes: acked,
                                retrans_bytes: retrans,
                                queued_bytes: busy_us / 3,
                                inflight_bps: (busy_us % 2 == 0).then_some(window_bps / 2),
                                queue_delay_us: (busy_us % 3 == 0).then_some(acked / 5),
                                base_rtt_us: (busy_us % 3 == 0).then_some(retrans / 5),
                            }
                        )
                        .collect(),
                })
            ),
        (any::<u64>(), any::<u64>(), proptest::option::of(".{0,40}")).prop_map(
            |(config_version, received_version, error)| GatewayMsg::Ack(Ack {
                config_version,
                received_version,
                error
            })
        ),
        (any::<u8>(), ".{0,70}", "[0-9a-f]{0,130}", "[0-9a-f]{0,144}").prop_map(
            |(branch_id, token, public_key, proof)| GatewayMsg::Enrol(Enrol {
                branch_id,
                token,
                public_key,
                proof
            })
        ),
        ("[0-9a-f]{0,130}", "[0-9a-f]{0,144}")
            .prop_map(|(public_key, proof)| GatewayMsg::Renew(Renew { public_key, proof })),
        any::<u8>().prop_map(|branch_id| GatewayMsg::Setup(SetupRequest { branch_id })),
    ]
}

proptest! {
    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode::<GatewayMsg>(&bytes);
        let _ = decode::<ControllerMsg>(&bytes);
        if let Ok(Some((_, n))) = decode::<GatewayMsg>(&bytes) {
            prop_assert!(n <= bytes.len());
        }
    }

    #[test]
    fn json_bodies_never_panic(body in "\\{\"type\":\"(hello|register|report|ack|config|error|enrol|renew|credentials)\".{0,200}") {
        let mut b = (body.len() as u32).to_be_bytes().to_vec();
        b.extend_from_slice(body.as_bytes());
        let _ = decode::<GatewayMsg>(&b);
        let _ = decode::<ControllerMsg>(&b);
    }

    #[test]
    fn round_trip_in_pieces(msgs in proptest::collection::vec(arb_gateway_msg(), 1..5), cut in 1usize..64) {
        let mut wire = Vec::new();
        for m in &msgs {
            encode(m, &mut wire).unwrap();
        }
        // Feed the stream in chunks of `cut` bytes, as a socket might.
        let mut buf = Vec::new();
        let mut got = Vec::new();
        for chunk in wire.chunks(cut) {
            buf.extend_from_slice(chunk);
            while let Some((m, n)) = decode::<GatewayMsg>(&buf).unwrap() {
                got.push(m);
                buf.drain(..n);
            }
        }
        prop_assert!(buf.is_empty());
        prop_assert_eq!(got, msgs);
    }
}

#[test]
fn crl_message_round_trip() {
    let m = ControllerMsg::Crl(CrlUpdate {
        crl_pem: "-----BEGIN X509 CRL-----\nAA==\n-----END X509 CRL-----\n".into(),
    });
    let mut out = Vec::new();
    encode(&m, &mut out).unwrap();
    assert!(String::from_utf8_lossy(&out).contains(r#""type":"crl""#));
    let (back, n): (ControllerMsg, usize) = decode(&out).unwrap().unwrap();
    assert_eq!((back, n), (m, out.len()));
    // Unknown fields are refused (as every message).
    let body = br#"{"type":"crl","crl_pem":"x","extra":1}"#;
    let mut framed = (body.len() as u32).to_be_bytes().to_vec();
    framed.extend_from_slice(body);
    assert!(decode::<ControllerMsg>(&framed).is_err());
}

#[test]
fn the_pushed_priority_table_is_this_builds() {
    let t = Priorities::table();
    assert!(t.matches_table());
    assert_eq!(t.type1_socket_dscp, 46);
    assert_eq!(t.marks.get("type1/1"), Some(&46));
    assert_eq!(t.marks.get("type2/2"), Some(&10));
    assert_eq!(t.marks.len(), 4);
    let mut other = t.clone();
    other.marks.insert("type2/2".into(), 12);
    assert!(!other.matches_table());
    assert!(!Priorities::default().matches_table());
}

#[test]
fn golden_wan_state() {
    let m = GatewayMsg::WanState(WanState {
        ports: vec![WanLearned {
            port: 0,
            name: "wan0".into(),
            address: Some("198.18.20.77/24".parse().unwrap()),
            next_hop: Some("198.18.20.254".parse().unwrap()),
            next_hop_mac: Some("02:00:c6:12:14:01".parse().unwrap()),
        }],
    });
    let mut out = Vec::new();
    encode(&m, &mut out).unwrap();
    let body = br#"{"type":"wan_state","ports":[{"port":0,"name":"wan0","address":"198.18.20.77/24","next_hop":"198.18.20.254","next_hop_mac":"02:00:c6:12:14:01"}]}"#;
    assert_eq!(&out[4..], &body[..]);
    let (d, _): (GatewayMsg, usize) = decode(&out).unwrap().unwrap();
    assert_eq!(d, m);
    // A port without an address (lease lost) and unknown next hop.
    let body = br#"{"type":"wan_state","ports":[{"port":1,"name":"wan1","address":null,"next_hop":null,"next_hop_mac":null}]}"#;
    let mut framed = (body.len() as u32).to_be_bytes().to_vec();
    framed.extend_from_slice(body);
    let (d, _): (GatewayMsg, usize) = decode(&framed).unwrap().unwrap();
    assert!(matches!(d, GatewayMsg::WanState(s) if s.ports[0].address.is_none()));
}

/// Zero-touch set-up (protocol 4): the request and the answer round-trip, and the answer makes
/// a valid config with `[controller]` and `[tls]` that parses back from its TOML.
#[test]
fn setup_round_trip_and_config() {
    let b = base();
    let cfg = GatewayConfig {
        version: 7,
        branch_id: 1,
        remotes: b.remote.clone(),
        classifier: None,
        priorities: Priorities::table(),
        ports: None,
    };
    let setup = GatewaySetup {
        branch_id: 1,
        lan_prefixes: b.lan_prefixes.clone(),
        wan: b.wan.clone(),
        config: cfg,
    };
    let mut out = Vec::new();
    encode(&GatewayMsg::Setup(SetupRequest { branch_id: 1 }), &mut out).unwrap();
    assert_eq!(&out[4..], br#"{"type":"setup","branch_id":1}"#);
    encode(&ControllerMsg::Setup(setup.clone()), &mut out).unwrap();
    let (m, n): (GatewayMsg, usize) = decode(&out).unwrap().unwrap();
    assert_eq!(m, GatewayMsg::Setup(SetupRequest { branch_id: 1 }));
    let (m, _): (ControllerMsg, usize) = decode(&out[n..]).unwrap().unwrap();
    assert_eq!(m, ControllerMsg::Setup(setup.clone()));

    let ctl: crate::config::ControllerConfig =
        toml::from_str("address = \"tls:198.18.10.1:6691\"").unwrap();
    let tls: crate::config::TlsConfig = toml::from_str(
        "ca_file = \"/t/ca.pem\"\ncert_file = \"/t/gw.pem\"\nkey_file = \"/t/gw.key\"\ncrl_file = \"/t/crl.pem\"",
    )
    .unwrap();
    let c = setup.to_config(ctl.clone(), tls.clone(), &[]).unwrap();
    assert_eq!(c.branch_id, 1);
    assert_eq!(c.wan, b.wan);
    assert_eq!(c.remote, b.remote);
    assert_eq!(c.controller.as_ref(), Some(&ctl));
    assert!(c.tls_enabled().is_some());
    let back = Config::parse(&toml::to_string(&c).unwrap()).unwrap();
    assert_eq!(back, c);

    let names = ["eth1".to_owned(), "eth2".to_owned()];
    let c = setup.to_config(ctl.clone(), tls.clone(), &names).unwrap();
    assert_eq!(c.wan[1].name, "eth2");
    let e = setup
        .to_config(ctl.clone(), tls.clone(), &names[..1])
        .unwrap_err();
    assert!(matches!(e, SetupError::WanNames(1, 2)), "{e}");
    let mut empty = setup.clone();
    empty.wan.clear();
    let e = empty.to_config(ctl, tls, &[]).unwrap_err().to_string();
    assert!(e.contains("wan"), "{e}");
}
