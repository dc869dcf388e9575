//! `[internet]` (external traffic load balancing): defaults, derived uplinks and capacities, and
//! validation naming the key.

use super::*;

const BASE: &str = r#"
branch_id = 1
lan_prefixes = ["198.19.1.0/24"]
[[wan]]
name = "wan0"
address = "198.18.10.2/24"
gateway = "198.18.10.1"
rate_mbit = 10
[[wan]]
name = "wan1"
address = "198.18.11.2/24"
gateway = "198.18.11.1"
[[wan]]
name = "ll0"
address = "198.18.12.2/24"
gateway = "198.18.12.1"
kind = "leased"
"#;

fn keys(text: &str) -> Vec<String> {
    match Config::parse(text) {
        Err(ConfigError::Invalid(v)) => v.problems.into_iter().map(|p| p.key).collect(),
        other => panic!("expected validation errors, got {other:?}"),
    }
}

#[test]
fn off_by_default() {
    let c = Config::parse(BASE).unwrap();
    assert_eq!(c.internet, InternetConfig::default());
    assert_eq!(c.internet.policy, UplinkPolicy::Off);
    assert_eq!(c.internet.measure_interval_ms, 1000);
}

#[test]
fn uplinks_default_to_internet_ports_and_capacities_to_rate() {
    let c = Config::parse(&format!("{BASE}\n[internet]\npolicy = \"rr\"\n")).unwrap();
    assert_eq!(c.internet.policy, UplinkPolicy::Rr);
    assert_eq!(c.internet_uplinks(), vec![0, 1]);
    assert_eq!(c.internet_capacities_mbit(), vec![Some(10), None]);
    let c = Config::parse(&format!(
        "{BASE}\n[internet]\npolicy = \"wrr\"\nuplinks = [1, 2]\ncapacity_mbit = [10, 5]\n"
    ))
    .unwrap();
    assert_eq!(c.internet_capacities_mbit(), vec![Some(10), Some(5)]);
}

#[test]
fn wrr_and_mbw_need_capacities() {
    let k = keys(&format!("{BASE}\n[internet]\npolicy = \"wrr\"\n"));
    assert_eq!(k, vec!["internet.capacity_mbit"]);
    let k = keys(&format!("{BASE}\n[internet]\npolicy = \"mbw\"\n"));
    assert_eq!(k, vec!["internet.capacity_mbit"]);
}

#[test]
fn bad_values_name_their_key() {
    let k = keys(&format!(
        "{BASE}\n[internet]\npolicy = \"single\"\nuplinks = [0, 0, 7]\ncapacity_mbit = [0]\nsingle = 2\nmeasure_interval_ms = 5\n"
    ));
    assert_eq!(
        k,
        vec![
            "internet.uplinks[1]",
            "internet.uplinks[2]",
            "internet.capacity_mbit",
            "internet.capacity_mbit[0]",
            "internet.single",
            "internet.measure_interval_ms",
        ]
    );
}

#[test]
fn unknown_keys_and_policies_are_rejected() {
    assert!(Config::parse(&format!("{BASE}\n[internet]\npolicy = \"rr\"\nfoo = 1\n")).is_err());
    assert!(Config::parse(&format!("{BASE}\n[internet]\npolicy = \"random\"\n")).is_err());
}
