//! Bridge lifetime across `mmsg` restarts (docs/mmsg.md "Restart"; issue #16 "Restart").
//!
//! `mmsg run` no longer deletes the OVS bridge on exit: the bridge, its ports, the WAN addresses
//! on `mpa{k}`, the controller target, the SSL settings and every flow the controller installed
//! stay, so the switch keeps forwarding (transit member paths, the swap of other branches'
//! subflows) while `mmsg` is down, and the next `mmsg run` finds it ready. On start [`observe`]
//! reads what is there and [`plan`] turns the difference to the config into one `ovs-vsctl`
//! transaction that changes only what differs:
//! - no bridge: created as before (`--may-exist add-br`, settings, ports, controller);
//! - bridge present: settings and ports are (re)asserted in the same transaction (`set` with
//!   equal values changes no row, so ovs-vswitchd does not touch the datapath or the flows);
//!   ports the config no longer names are deleted (`--if-exists del-port`); the controller is
//!   set only when its target differs (`set-controller` replaces the Controller row, which
//!   drops the OpenFlow connection and makes the controller push its flows again).
//!
//! The bridge goes away only when asked: `mmsg run --remove-bridge` (the old behaviour: the
//! set-up is undone on exit) or `mmsg down --config FILE` after `mmsg` stopped (`ovs::down`: the
//! same steps as that undo, from the config). The OVS names (ports, datapath id) live here, below
//! `ovs`, which re-exports them.

use std::collections::BTreeSet;

use mpa::config::{Config, OvsConfig};

use crate::setup;

/// First OpenFlow port of the WAN interfaces: `wan{k}` is 1 + k (docs/controller.md §4).
pub const WAN_OFPORT_BASE: u32 = 1;
/// First OpenFlow port of the internal MPA ports: `mpa{k}` is 101 + k.
pub const MPA_OFPORT_BASE: u32 = 101;

/// The internal OVS port (and kernel interface) that carries WAN port k's address.
pub fn mpa_iface(k: usize) -> String {
    format!("mpa{k}")
}

/// The OpenFlow datapath id of branch `b`: the branch id as 16 hex digits.
pub fn datapath_id(branch: u8) -> String {
    format!("{branch:016x}")
}

/// The bridge as OVS reports it before the set-up transaction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// The bridge exists.
    pub exists: bool,
    /// `datapath_type` (empty: the default, `system`).
    pub datapath_type: String,
    /// Its ports (`list-ports`).
    pub ports: BTreeSet<String>,
    /// Its controller targets (`get-controller`).
    pub controllers: Vec<String>,
}

/// Reads the bridge's state (four `ovs-vsctl` queries; one when it does not exist).
pub fn observe(ovs: &OvsConfig) -> anyhow::Result<Observed> {
    let q = |args: &[&str]| -> anyhow::Result<String> {
        let mut all = vec![format!("--db={}", ovs.db), "--timeout=5".to_owned()];
        all.extend(args.iter().map(|a| (*a).to_owned()));
        setup::run("ovs-vsctl", &all)
    };
    let br = ovs.bridge.as_str();
    let exists = q(&["list-br"])?.lines().any(|l| l.trim() == br);
    if !exists {
        return Ok(Observed::default());
    }
    let words = |s: String| -> Vec<String> {
        s.split_whitespace()
            .map(|w| w.trim_matches('"').to_owned())
            .collect()
    };
    Ok(Observed {
        exists,
        datapath_type: q(&["get", "bridge", br, "datapath_type"])?
            .trim()
            .trim_matches('"')
            .to_owned(),
        ports: words(q(&["list-ports", br])?).into_iter().collect(),
        controllers: words(q(&["get-controller", br])?),
    })
}

/// The `ovs-vsctl` arguments of the set-up transaction given what is there (module docs), and
/// the differences found (for the log; empty when a kept bridge matches the config).
pub fn plan(config: &Config, ovs: &OvsConfig, seen: &Observed) -> (Vec<String>, Vec<String>) {
    let br = ovs.bridge.as_str();
    let mut a: Vec<String> = Vec::new();
    let mut diffs: Vec<String> = Vec::new();
    let mut push = |xs: &[&str]| a.extend(xs.iter().map(|x| (*x).to_owned()));
    let dpid = format!("other-config:datapath-id={}", datapath_id(config.branch_id));
    if !seen.exists {
        diffs.push(format!("bridge {br} missing"));
    } else if seen.datapath_type != "netdev" {
        diffs.push(format!(
            "datapath_type {:?} (want netdev)",
            seen.datapath_type
        ));
    }
    push(&["--", "--may-exist", "add-br", br]);
    push(&[
        "--",
        "set",
        "bridge",
        br,
        "datapath_type=netdev",
        "protocols=OpenFlow13",
        "fail_mode=secure",
        &dpid,
    ]);
    let mut wanted: BTreeSet<String> = BTreeSet::new();
    for (k, w) in config.wan.iter().enumerate() {
        let k32 = u32::try_from(k).unwrap_or(u32::MAX - MPA_OFPORT_BASE);
        let wan_of = format!("ofport_request={}", WAN_OFPORT_BASE + k32);
        let mpa_of = format!("ofport_request={}", MPA_OFPORT_BASE + k32);
        let mpa = mpa_iface(k);
        for p in [&w.name, &mpa] {
            if seen.exists && !seen.ports.contains(p) {
                diffs.push(format!("port {p} missing"));
            }
        }
        push(&["--", "--may-exist", "add-port", br, &w.name]);
        push(&["--", "set", "interface", &w.name, &wan_of]);
        push(&["--", "--may-exist", "add-port", br, &mpa]);
        push(&["--", "set", "interface", &mpa, "type=internal", &mpa_of]);
        wanted.insert(w.name.clone());
        wanted.insert(mpa);
    }
    for p in seen.ports.difference(&wanted) {
        diffs.push(format!("port {p} not in the config"));
        push(&["--", "--if-exists", "del-port", br, p]);
    }
    if seen.controllers != [ovs.controller.clone()] {
        if seen.exists {
            diffs.push(format!(
                "controller {:?} (want {:?})",
                seen.controllers, ovs.controller
            ));
        }
        push(&["--", "set-controller", br, &ovs.controller]);
    }
    (a, diffs)
}

/// Whether `ovs-vsctl get-ssl` output already names these three files.
pub fn ssl_set_to(get_ssl: &str, files: &[std::path::PathBuf; 3]) -> bool {
    let named: BTreeSet<&str> = get_ssl
        .lines()
        .filter_map(|l| l.split_once(": ").map(|(_, v)| v.trim()))
        .collect();
    files
        .iter()
        .all(|f| named.contains(f.display().to_string().as_str()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    const CONFIG: &str = r#"
branch_id = 11
lan_prefixes = ["198.19.1.0/24"]
[[wan]]
name = "wan0"
address = "198.18.10.2/24"
gateway = "198.18.10.1"
[[wan]]
name = "eth7"
address = "198.18.11.2/24"
gateway = "198.18.11.1"
[ovs]
controller = "unix:/run/x/ssc.sock"
"#;

    fn kept() -> Observed {
        Observed {
            exists: true,
            datapath_type: "netdev".into(),
            ports: ["wan0", "mpa0", "eth7", "mpa1"]
                .map(str::to_owned)
                .into_iter()
                .collect(),
            controllers: vec!["unix:/run/x/ssc.sock".into()],
        }
    }

    /// A kept bridge that matches the config: no difference, and the controller row is left
    /// alone (its OpenFlow connection and the flows stay).
    #[test]
    fn a_matching_bridge_is_kept_as_it_is() {
        let c = Config::parse(CONFIG).unwrap();
        let o = c.ovs.clone().unwrap();
        let (args, diffs) = plan(&c, &o, &kept());
        assert!(diffs.is_empty(), "{diffs:?}");
        let a = args.join(" ");
        assert!(!a.contains("set-controller"), "{a}");
        assert!(!a.contains("del-port"), "{a}");
        assert!(!a.contains("del-br"), "{a}");
    }

    /// Differences are reconciled in place: a stray port removed, a missing one added, the
    /// controller replaced, the datapath type set again.
    #[test]
    fn differences_are_reconciled() {
        let c = Config::parse(CONFIG).unwrap();
        let o = c.ovs.clone().unwrap();
        let mut seen = kept();
        seen.ports.remove("mpa1");
        seen.ports.insert("wan9".into());
        seen.controllers = vec!["tcp:198.18.0.1:6653".into()];
        seen.datapath_type = "system".into();
        let (args, diffs) = plan(&c, &o, &seen);
        assert_eq!(
            diffs,
            vec![
                "datapath_type \"system\" (want netdev)".to_owned(),
                "port mpa1 missing".to_owned(),
                "port wan9 not in the config".to_owned(),
                "controller [\"tcp:198.18.0.1:6653\"] (want \"unix:/run/x/ssc.sock\")".to_owned(),
            ]
        );
        let a = args.join(" ");
        assert!(a.contains("-- --if-exists del-port br0 wan9"), "{a}");
        assert!(a.contains("-- --may-exist add-port br0 mpa1"), "{a}");
        assert!(a.contains("datapath_type=netdev"), "{a}");
        assert!(
            a.ends_with("-- set-controller br0 unix:/run/x/ssc.sock"),
            "{a}"
        );
    }

    #[test]
    fn get_ssl_output_is_matched() {
        let files = [
            "/t/ovs-ssl/key-7.pem",
            "/t/ovs-ssl/cert-7.pem",
            "/t/ovs-ssl/ca-7.pem",
        ]
        .map(std::path::PathBuf::from);
        let out = "Private key: /t/ovs-ssl/key-7.pem\nCertificate: /t/ovs-ssl/cert-7.pem\n\
                   CA Certificate: /t/ovs-ssl/ca-7.pem\nBootstrap: false\n";
        assert!(ssl_set_to(out, &files));
        assert!(!ssl_set_to(&out.replace("cert-7", "cert-6"), &files));
        assert!(!ssl_set_to("", &files));
    }
}
