//! `[ovs]` and `[[wan]] mac`: defaults, the derived MAC, and validation naming the key.

use super::*;

const BASE: &str = r#"
branch_id = 1
lan_prefixes = ["198.19.1.0/24"]
[[wan]]
name = "wan0"
address = "198.18.10.2/24"
gateway = "198.18.10.1"
[[wan]]
name = "wan1"
address = "198.18.11.2/24"
gateway = "198.18.11.1"
mac = "02:aa:bb:cc:dd:ee"
"#;

fn keys(text: &str) -> Vec<String> {
    match Config::parse(text) {
        Err(ConfigError::Invalid(v)) => v.problems.into_iter().map(|p| p.key).collect(),
        other => panic!("expected validation errors, got {other:?}"),
    }
}

#[test]
fn no_ovs_section_means_none() {
    let c = Config::parse(BASE).unwrap();
    assert_eq!(c.ovs, None);
}

#[test]
fn defaults_and_derived_mac() {
    let c = Config::parse(&format!(
        "{BASE}\n[ovs]\ncontroller = \"tcp:198.18.1.1:6653\"\n"
    ))
    .unwrap();
    let o = c.ovs.unwrap();
    assert_eq!(o.bridge, "br0");
    assert_eq!(o.db, "unix:/var/run/openvswitch/db.sock");
    assert_eq!(o.controller, "tcp:198.18.1.1:6653");
    // The controller's MacAddr::from_ipv4 convention (examples/inventory-paper.toml).
    assert_eq!(c.wan[0].mpa_mac().to_string(), "02:00:c6:12:0a:02");
    assert_eq!(c.wan[1].mpa_mac().to_string(), "02:aa:bb:cc:dd:ee");
}

#[test]
fn all_keys_set() {
    let c = Config::parse(&format!(
        "{BASE}\n[ovs]\nbridge = \"mms\"\ndb = \"unix:/run/x/db.sock\"\ncontroller = \"unix:/run/x/ssc.sock\"\n"
    ))
    .unwrap();
    let o = c.ovs.unwrap();
    assert_eq!(
        (o.bridge.as_str(), o.db.as_str(), o.controller.as_str()),
        ("mms", "unix:/run/x/db.sock", "unix:/run/x/ssc.sock")
    );
}

#[test]
fn controller_is_required_and_unknown_keys_rejected() {
    let e = Config::parse(&format!("{BASE}\n[ovs]\nbridge = \"br0\"\n")).unwrap_err();
    assert!(e.to_string().contains("controller"), "{e}");
    let e = Config::parse(&format!(
        "{BASE}\n[ovs]\ncontroller = \"tcp:1.2.3.4:6653\"\nbirdge = \"br0\"\n"
    ))
    .unwrap_err();
    assert!(e.to_string().contains("birdge"), "{e}");
}

#[test]
fn invalid_values_name_their_key() {
    assert_eq!(
        keys(&format!(
            "{BASE}\n[ovs]\nbridge = \"\"\ndb = \"/no/scheme\"\ncontroller = \"198.18.1.1:6653\"\n"
        )),
        vec!["ovs.bridge", "ovs.db", "ovs.controller"]
    );
    assert_eq!(
        keys(&format!("{BASE}\n[ovs]\ncontroller = \"tcp:host:0\"\n")),
        vec!["ovs.controller"]
    );
    assert_eq!(
        keys(&format!(
            "{BASE}\n[ovs]\ncontroller = \"unix:relative.sock\"\n"
        )),
        vec!["ovs.controller"]
    );
    // A multicast MAC and a WAN name that is one of the internal ports.
    let text = BASE
        .replace("02:aa:bb:cc:dd:ee", "03:00:00:00:00:01")
        .replace("\"wan0\"", "\"mpa0\"");
    assert_eq!(
        keys(&format!("{text}\n[ovs]\ncontroller = \"tcp:h:6653\"\n")),
        vec!["wan[0].name", "wan[1].mac"]
    );
}

#[test]
fn bad_mac_syntax_is_a_parse_error() {
    for bad in [
        "02:00:00:00:00",
        "02:00:00:00:00:00:00",
        "zz:00:00:00:00:00",
        "2:0:0:0:0:0",
    ] {
        let e = Config::parse(&BASE.replace("02:aa:bb:cc:dd:ee", bad)).unwrap_err();
        assert!(e.to_string().contains("invalid MAC address"), "{bad}: {e}");
    }
}

#[test]
fn ssl_controller_needs_tls_credentials() {
    let ssl = "\n[ovs]\ncontroller = \"ssl:198.18.0.1:6654\"\n";
    // No [tls], and [tls] in clear: refused, naming the controller.
    assert_eq!(keys(&format!("{BASE}{ssl}")), vec!["ovs.controller"]);
    let clear = format!("{BASE}{ssl}\n[tls]\nmode = \"clear\"\n");
    assert_eq!(keys(&clear), vec!["ovs.controller"]);
    match Config::parse(&format!("{BASE}{ssl}")) {
        Err(e) => assert!(e.to_string().contains("[tls]"), "{e}"),
        Ok(_) => panic!("an ssl: target without [tls] must be refused"),
    }
    // With the credentials it is valid.
    let tls = "\n[tls]\nca_file = \"/etc/mms/ca.pem\"\ncert_file = \"/etc/mms/gw.pem\"\nkey_file = \"/etc/mms/gw.key\"\n";
    let c = Config::parse(&format!("{BASE}{ssl}{tls}")).unwrap();
    assert_eq!(c.ovs.unwrap().controller, "ssl:198.18.0.1:6654");
}
