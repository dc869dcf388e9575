//! Config tests: every example parses and validates, unknown keys are rejected everywhere, and
//! validation names the offending key.

use super::*;
use ipnet::Ipv4Net;
use std::net::Ipv4Addr;
use std::path::PathBuf;

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// Every `examples/mmsg-*.toml`, with its text.
fn examples() -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(examples_dir()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("mmsg-") && name.ends_with(".toml") {
            let text = std::fs::read_to_string(&path).unwrap();
            out.push((path, text));
        }
    }
    out.sort();
    out
}

#[test]
fn every_example_parses_and_validates() {
    let all = examples();
    assert!(
        all.len() >= 2,
        "expected the branch1 and branch2 examples, found {all:?}"
    );
    for (path, text) in &all {
        if let Err(e) = Config::parse(text) {
            panic!("{}: {e}", path.display());
        }
    }
}

#[test]
fn testbed_examples_match_each_other() {
    let c1 =
        Config::parse(&std::fs::read_to_string(examples_dir().join("mmsg-branch1.toml")).unwrap())
            .unwrap();
    let c2 =
        Config::parse(&std::fs::read_to_string(examples_dir().join("mmsg-branch2.toml")).unwrap())
            .unwrap();
    for (me, peer) in [(&c1, &c2), (&c2, &c1)] {
        let b = me.branch_id;
        // DESIGN §5: WAN port k of branch b = 198.18.(10b+k).2/24 via .1; LAN = 198.19.b.0/24.
        for (k, w) in me.wan.iter().enumerate() {
            let third = 10 * b + k as u8;
            assert_eq!(
                w.address,
                format!("198.18.{third}.2/24").parse::<Ipv4Net>().unwrap()
            );
            assert_eq!(w.gateway, Ipv4Addr::new(198, 18, third, 1));
        }
        assert_eq!(
            me.lan_prefixes,
            vec![format!("198.19.{b}.0/24").parse::<IpNet>().unwrap()]
        );
        let remote = &me.remote[0];
        assert_eq!(remote.id, peer.branch_id);
        let peer_addrs: Vec<Ipv4Addr> = peer.wan.iter().map(|w| w.address.addr()).collect();
        assert_eq!(remote.wan_addresses, peer_addrs);
        assert_eq!(remote.lan_prefixes, peer.lan_prefixes);
    }
}

/// Adds `bogus_key = 1` to the table at `path` (array elements by index).
fn insert_unknown(value: &mut toml::Value, path: &[String]) {
    let mut v = value;
    for seg in path {
        v = match v {
            toml::Value::Table(t) => t.get_mut(seg).unwrap(),
            toml::Value::Array(a) => &mut a[seg.parse::<usize>().unwrap()],
            _ => unreachable!(),
        };
    }
    v.as_table_mut()
        .unwrap()
        .insert("bogus_key".into(), toml::Value::Integer(1));
}

/// The paths of every table in `value` (the root is the empty path).
fn table_paths(value: &toml::Value, here: Vec<String>, out: &mut Vec<Vec<String>>) {
    match value {
        toml::Value::Table(t) => {
            out.push(here.clone());
            for (k, v) in t {
                let mut p = here.clone();
                p.push(k.clone());
                table_paths(v, p, out);
            }
        }
        toml::Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                let mut p = here.clone();
                p.push(i.to_string());
                table_paths(v, p, out);
            }
        }
        _ => {}
    }
}

#[test]
fn unknown_keys_are_rejected_in_every_table() {
    for (path, text) in examples() {
        let value: toml::Value = toml::from_str(&text).unwrap();
        let mut tables = Vec::new();
        table_paths(&value, Vec::new(), &mut tables);
        // root, wan×2, remote, its path groups×2, classifier, its rules×3, queue.
        assert!(tables.len() >= 10, "{}: {tables:?}", path.display());
        for t in tables {
            let mut v = value.clone();
            insert_unknown(&mut v, &t);
            let text = toml::to_string(&v).unwrap();
            match Config::parse(&text) {
                Err(ConfigError::Parse(e)) => {
                    assert!(
                        e.to_string().contains("bogus_key"),
                        "{}: {t:?}: {e}",
                        path.display()
                    )
                }
                other => panic!("{}: {t:?}: unknown key accepted: {other:?}", path.display()),
            }
        }
    }
}

const MINIMAL: &str = r#"
branch_id = 1
lan_prefixes = ["198.19.1.0/24"]
[[wan]]
name = "wan0"
address = "198.18.10.2/24"
gateway = "198.18.10.1"
"#;

#[test]
fn defaults_apply() {
    let c = Config::parse(MINIMAL).unwrap();
    assert_eq!(c.selection_policy, SelectionPolicy::Wrr);
    assert_eq!(c.flow_idle_timeout_s, 60);
    assert_eq!(c.wan[0].kind, WanKind::Internet);
    assert_eq!(c.classifier.default_class, Class::TypeII);
    assert_eq!(
        c.queue,
        QueueConfig {
            codel_target_ms: 5,
            codel_interval_ms: 100,
            ecn: true
        }
    );
    let c = Config::parse(&format!(
        "{MINIMAL}\n[[remote]]\nid = 2\nwan_addresses = [\"198.18.20.2\"]\nlan_prefixes = [\"198.19.2.0/24\"]\n"
    ))
    .unwrap();
    assert_eq!(
        c.remote[0].path_groups,
        vec![PathGroupConfig { id: 0, weight: 1 }]
    );
}

fn problems(text: &str) -> Vec<String> {
    match Config::parse(text) {
        Err(ConfigError::Invalid(v)) => v.problems.iter().map(ToString::to_string).collect(),
        other => panic!("expected validation errors, got {other:?}"),
    }
}

#[test]
fn validation_names_the_offending_key() {
    let text = format!(
        r#"{MINIMAL}
[[remote]]
id = 2
wan_addresses = ["198.18.20.2"]
lan_prefixes = ["198.19.2.0/24"]

[[remote]]
id = 3
wan_addresses = ["198.18.30.2", "198.18.30.2"]
lan_prefixes = ["198.19.3.1/24", "198.19.1.0/25"]
[[remote.path_groups]]
id = 0
[[remote.path_groups]]
id = 0
weight = 0
[[remote.path_groups]]
id = 17
"#
    );
    let p = problems(&text);
    assert_eq!(
        p,
        vec![
            "remote[1].wan_addresses[1]: 198.18.30.2 is listed twice",
            "remote[1].lan_prefixes[0]: 198.19.3.1/24 has host bits set (did you mean 198.19.3.0/24?)",
            "remote[1].lan_prefixes[1]: 198.19.1.0/25 overlaps own lan_prefixes 198.19.1.0/24",
            "remote[1].path_groups[1].id: path group 0 is configured twice",
            "remote[1].path_groups[1].weight: 0 is out of range 1..=1000",
            "remote[1].path_groups[2].id: 17 is out of range 0..=15",
        ]
    );
}

#[test]
fn validation_of_ids_wan_and_rules() {
    let text = r#"
branch_id = 16
lan_prefixes = ["198.19.1.0/24"]
flow_idle_timeout_s = 0
[[wan]]
name = "wan0"
address = "198.18.10.2/24"
gateway = "198.18.11.1"
[[wan]]
name = "wan0"
address = "198.18.10.2/24"
gateway = "198.18.10.1"
[[remote]]
id = 16
wan_addresses = []
lan_prefixes = ["198.19.2.0/24"]
[[remote]]
id = 2
wan_addresses = ["198.18.10.2"]
lan_prefixes = ["198.19.2.0/24"]
[[classifier.rules]]
class = "type1"
[[classifier.rules]]
class = "type1"
dscp = [64]
ip_protocol = 1
dst_ports = [22]
[queue]
codel_target_ms = 100
"#;
    assert_eq!(
        problems(text),
        vec![
            "branch_id: 16 is out of range 1..=15",
            "wan[0].gateway: 198.18.11.1 is not another address in 198.18.10.0/24",
            "wan[1].name: \"wan0\" is used twice",
            "wan[1].address: 198.18.10.2 is used twice",
            "remote[0].id: 16 is out of range 1..=15",
            "remote[0].wan_addresses: 0 addresses, need 1..=8",
            "remote[1].wan_addresses[0]: 198.18.10.2 is one of this gateway's own WAN addresses",
            "remote[1].lan_prefixes[0]: 198.19.2.0/24 (branch 2) is also remote[0].lan_prefixes[0] = 198.19.2.0/24 (branch 16); LAN prefixes of different branches must be disjoint",
            "flow_idle_timeout_s: 0 is out of range 1..=86400",
            "classifier.rules[0]: has no match criteria (use classifier.default_class for a catch-all)",
            "classifier.rules[1].dscp[0]: 64 is out of range 0..=63",
            "classifier.rules[1].ip_protocol: protocol 1 has no ports, but the rule matches ports",
            "queue.codel_target_ms: 100 must be above 0 and below queue.codel_interval_ms (100)",
        ]
    );
}

#[test]
fn parse_errors_name_the_key() {
    let e = Config::parse(&format!("{MINIMAL}\nselection_policy = \"fastest\"\n")).unwrap_err();
    assert!(e.to_string().contains("selection_policy"), "{e}");
    let e = Config::parse(&format!(
        "{MINIMAL}\n[[classifier.rules]]\nclass = \"type1\"\ndst_ports = [\"90-80\"]\n"
    ))
    .unwrap_err();
    assert!(
        e.to_string().contains("invalid port range \"90-80\""),
        "{e}"
    );
    let e = Config::parse(&MINIMAL.replace("branch_id = 1", "")).unwrap_err();
    assert!(e.to_string().contains("branch_id"), "{e}");
}

#[test]
fn port_ranges() {
    #[derive(Deserialize)]
    struct P {
        p: Vec<PortRange>,
    }
    let p: P = toml::from_str(r#"p = [22, "80", "5000-5999", " 1 - 2 "]"#).unwrap();
    assert_eq!(
        p.p,
        vec![
            PortRange { lo: 22, hi: 22 },
            PortRange { lo: 80, hi: 80 },
            PortRange { lo: 5000, hi: 5999 },
            PortRange { lo: 1, hi: 2 },
        ]
    );
    assert!(p.p[2].contains(5999) && !p.p[2].contains(6000));
    assert!(toml::from_str::<P>(r#"p = [70000]"#).is_err());
    assert!(toml::from_str::<P>(r#"p = ["x"]"#).is_err());
}

#[test]
fn type1_prefers_leased_uplinks() {
    let mut c = Config::parse(MINIMAL).unwrap();
    assert_eq!(c.uplinks_for(Class::TypeI), vec![0]);
    c.wan.push(WanPort {
        name: "lease0".into(),
        address: "198.19.201.1/30".parse().unwrap(),
        gateway: "198.19.201.2".parse().unwrap(),
        kind: WanKind::Leased,
        mac: None,
        rate_mbit: None,
        nat: false,
    });
    c.validate().unwrap();
    assert_eq!(c.uplinks_for(Class::TypeI), vec![1]);
    assert_eq!(c.uplinks_for(Class::TypeII), vec![0, 1]);
    assert!(c.uplinks_for(Class::TypeIII).is_empty());
}

#[test]
fn striping_is_off_by_default_and_parses_with_auto_and_numbers() {
    assert_eq!(Config::parse(MINIMAL).unwrap().striping, None);
    let c = Config::parse(&format!("{MINIMAL}\n[striping]\nclasses = [\"type2\"]\n")).unwrap();
    let st = c.striping.unwrap();
    assert_eq!(st.classes, vec![Class::TypeII]);
    assert_eq!(
        (st.threshold_kbit, st.buffer_frames, st.lrf),
        (1_000, 1_024, 20)
    );
    assert_eq!(
        (st.release_frames, st.release_hold_ms),
        (Auto::Auto, Auto::Auto)
    );
    assert_eq!(st.threshold_bytes_per_s(), 125_000);
    let p = st.reseq_params();
    assert_eq!(p.threshold, crate::resequencer::Threshold::default());
    let c = Config::parse(&format!(
        "{MINIMAL}\n[striping]\nprefixes = [\"198.19.2.0/24\"]\nthreshold_kbit = 5000\nbuffer_frames = 256\n\
         lrf = 10\nrelease_frames = 92\nrelease_hold_ms = \"auto\"\n"
    ))
    .unwrap();
    let st = c.striping.unwrap();
    assert_eq!(st.release_frames, Auto::Value(92));
    let p = st.reseq_params();
    assert_eq!((p.buffer_frames, p.threshold.frames, p.lrf), (256, 92, 10));
    assert_eq!(p.threshold.hold, crate::resequencer::DEFAULT_HOLD);
}

#[test]
fn striping_rejects_unknown_keys_bad_words_and_bad_values() {
    let err = Config::parse(&format!(
        "{MINIMAL}\n[striping]\nclasses = [\"type2\"]\nbogus_key = 1\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(err.contains("bogus_key"), "{err}");
    let err = Config::parse(&format!(
        "{MINIMAL}\n[striping]\nclasses = [\"type2\"]\nrelease_frames = \"automatic\"\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(err.contains("\"auto\""), "{err}");
    let p = problems(&format!(
        "{MINIMAL}\n[striping]\nthreshold_kbit = 0\nbuffer_frames = 64\nlrf = 0\nrelease_frames = 64\n\
         release_hold_ms = 0\n"
    ));
    assert_eq!(
        p,
        vec![
            "striping: names no class and no prefix (remove the table to turn striping off)",
            "striping.threshold_kbit: 0 is out of range 1..=100000000",
            "striping.lrf: 0 is out of range 1..=1000",
            "striping.release_frames: 64 must be above 0 and below striping.buffer_frames (64)",
            "striping.release_hold_ms: 0 is out of range 1..=1000",
        ]
    );
    let p = problems(&format!(
        "{MINIMAL}\n[striping]\nprefixes = [\"198.19.2.1/24\"]\nbuffer_frames = 5000\n"
    ));
    assert_eq!(p.len(), 2, "{p:?}");
    assert!(p[1].starts_with("striping.buffer_frames: 5000"), "{p:?}");
}

#[test]
fn tls_section_defaults_to_tls_and_requires_its_files() {
    let c = Config::parse(MINIMAL).unwrap();
    assert!(c.tls.is_none() && c.tls_enabled().is_none());
    let c = Config::parse(&format!(
        "{MINIMAL}\n[tls]\nca_file = \"/etc/mms/ca.pem\"\ncert_file = \"/etc/mms/gw.pem\"\nkey_file = \"/etc/mms/gw.key\"\n"
    ))
    .unwrap();
    let t = c.tls_enabled().unwrap();
    assert_eq!(t.mode, TlsMode::Tls);
    assert_eq!(t.crl_file, None);
    let c = Config::parse(&format!("{MINIMAL}\n[tls]\nmode = \"clear\"\n")).unwrap();
    assert!(c.tls.is_some() && c.tls_enabled().is_none());
    let p = problems(&format!(
        "{MINIMAL}\n[tls]\nca_file = \"/etc/mms/ca.pem\"\n"
    ));
    assert_eq!(
        p,
        vec![
            "tls.cert_file: required with mode = \"tls\"".to_owned(),
            "tls.key_file: required with mode = \"tls\"".to_owned()
        ]
    );
}

#[test]
fn type3_is_never_a_tunnel_class() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/mmsg-branch1.toml"
    ))
    .unwrap();
    let bad = text.replacen("default_class = \"type2\"", "default_class = \"type3\"", 1);
    assert_ne!(bad, text, "the example sets classifier.default_class");
    let err = Config::parse(&bad).unwrap_err().to_string();
    assert!(err.contains("classifier.default_class"), "{err}");
}

#[test]
fn serialized_configs_parse_back_equal() {
    let all = examples();
    assert!(!all.is_empty());
    for (path, text) in all {
        let c = Config::parse(&text).unwrap();
        let again = toml::to_string(&c).unwrap();
        assert_eq!(
            Config::parse(&again).unwrap(),
            c,
            "{}: {again}",
            path.display()
        );
    }
    // The parts the examples leave out: striping with numbers and "auto", TLS, internet, rules.
    let text = "branch_id = 1\nlan_prefixes = [\"198.19.1.0/24\"]\n\
        [[wan]]\nname = \"wan0\"\naddress = \"198.18.10.2/24\"\ngateway = \"198.18.10.1\"\n\
        [striping]\nclasses = [\"type2\"]\nrelease_frames = 8\n\
        [tls]\nmode = \"clear\"\n[internet]\npolicy = \"single\"\nsingle = 0\n\
        [[classifier.rules]]\nclass = \"type1\"\ndst_ports = [22, \"5000-5010\"]\n";
    let c = Config::parse(text).unwrap();
    assert_eq!(Config::parse(&toml::to_string(&c).unwrap()).unwrap(), c);
}

#[test]
fn lan_prefixes_of_two_remotes_must_be_disjoint_not_only_different() {
    let text = format!(
        r#"{MINIMAL}
[[remote]]
id = 2
wan_addresses = ["198.18.20.2"]
lan_prefixes = ["198.19.2.0/24", "198.19.2.0/25", "2001:db8:2::/48"]

[[remote]]
id = 3
wan_addresses = ["198.18.30.2"]
lan_prefixes = ["198.19.2.128/25", "198.19.0.0/16", "198.19.3.0/24", "2001:db8:3::/48"]
"#
    );
    assert_eq!(
        problems(&text),
        vec![
            "remote[1].lan_prefixes[0]: 198.19.2.128/25 (branch 3) overlaps remote[0].lan_prefixes[0] = 198.19.2.0/24 (branch 2); LAN prefixes of different branches must be disjoint",
            "remote[1].lan_prefixes[1]: 198.19.0.0/16 overlaps own lan_prefixes 198.19.1.0/24",
            "remote[1].lan_prefixes[1]: 198.19.0.0/16 (branch 3) overlaps remote[0].lan_prefixes[0] = 198.19.2.0/24 (branch 2); LAN prefixes of different branches must be disjoint",
            "remote[1].lan_prefixes[1]: 198.19.0.0/16 (branch 3) overlaps remote[0].lan_prefixes[1] = 198.19.2.0/25 (branch 2); LAN prefixes of different branches must be disjoint",
        ],
        "overlaps inside one remote (198.19.2.0/24 and /25 of branch 2) are fine; IPv6 and IPv4 never overlap"
    );
}

#[test]
fn nat_marks_parse_and_a_pair_behind_nat_on_both_sides_is_refused() {
    let remote = "[[remote]]\nid = 2\nwan_addresses = [\"198.18.20.1\"]\nlan_prefixes = [\"198.19.2.0/24\"]\n";
    // Defaults: nothing behind NAT, and the marks are not written back.
    let c = Config::parse(&format!("{MINIMAL}{remote}")).unwrap();
    assert!(!c.wan[0].nat && !c.remote[0].nat && !nat_only(&c.wan));
    let text = toml::to_string(&c).unwrap();
    assert!(!text.contains("nat"), "{text}");
    // Our port behind NAT, the remote public: fine (we dial it).
    let ours = MINIMAL.replace(
        "gateway = \"198.18.10.1\"\n",
        "gateway = \"198.18.10.1\"\nnat = true\n",
    );
    let c = Config::parse(&format!("{ours}{remote}")).unwrap();
    assert!(c.wan[0].nat && nat_only(&c.wan));
    // The remote behind NAT, we public: fine (it dials us).
    let theirs = format!("{MINIMAL}{remote}nat = true\n");
    assert!(Config::parse(&theirs).unwrap().remote[0].nat);
    // Both: neither can dial the other.
    let p = problems(&format!("{ours}{remote}nat = true\n"));
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].starts_with("remote[0].nat:") && p[0].contains("branch 2"),
        "{p:?}"
    );
}

#[test]
fn branch_ids_above_15_need_the_extended_port_plan() {
    let text = MINIMAL.replace("branch_id = 1", "branch_id = 200");
    assert_eq!(
        problems(&text),
        vec!["branch_id: 200 is out of range 1..=15"]
    );
    let c = Config::parse(&format!("ports = \"16384-32767\"\n{text}")).unwrap();
    assert_eq!(c.ports.to_string(), "16384-32767");
    assert_eq!(
        c.ports
            .listen_port(c.branch().unwrap(), crate::PathGroupId::new(2).unwrap()),
        Some(16386)
    );
    let e = Config::parse(&format!("ports = \"100-200\"\n{text}"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("must start at 1024"), "{e}");
    // A pushed plan replaces the file's.
    let pushed = crate::gwchan::GatewayConfig {
        version: 1,
        branch_id: 200,
        remotes: Vec::new(),
        classifier: None,
        priorities: Default::default(),
        ports: Some("20000-21000".parse().unwrap()),
    };
    let merged = pushed.validate_for(&c).unwrap();
    assert_eq!(merged.ports.to_string(), "20000-21000");
}
