//! The `mmsg` configs of the e2e system (static remotes or controller mode, both with `[ovs]`)
//! and what Table II makes of them: path groups per branch pair, expected connections, member
//! routes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use mpa::config::{
    Config, ControllerConfig, OvsConfig, PathGroupConfig, RemoteBranch, SelectionPolicy,
};
use serde::Deserialize;
use serde_json::Value;

use super::options::BRANCHES;
use crate::mmsg;
use crate::testbed;
use crate::topology::{self, PortKind, Topology};

/// The OVS directory of gateway `b` (run dir, database socket, management sockets).
pub fn ovs_dir(prefix: &str, b: u8) -> PathBuf {
    crate::ovs::dir(&testbed::state_dir(prefix), b)
}

/// Whether branches `a` and `b` use Table II's groups 1..4 (branches 1 and 2) or group 0.
pub(super) fn table2_pair(a: u8, b: u8) -> bool {
    matches!((a, b), (1, 2) | (2, 1))
}

/// The static `mmsg` config of branch `b` in testbed `prefix` ([`super::Options::static_configs`]): the
/// four other branches as remotes with both WAN addresses and their LAN prefix, path groups 1..4
/// between branches 1 and 2 (both directions, Table II), group 0 elsewhere, and `[ovs]`.
pub fn mmsg_config(
    topo: &Topology,
    prefix: &str,
    b: u8,
    selection_policy: &str,
) -> anyhow::Result<Config> {
    let mut c = config_head(topo, prefix, b, selection_policy)?;
    for r in topo.branches.iter().map(|x| x.id).filter(|&r| r != b) {
        let groups: &[u8] = if table2_pair(b, r) {
            &[1, 2, 3, 4]
        } else {
            &[0]
        };
        c.remote.push(RemoteBranch {
            id: r,
            wan_addresses: internet_ports(topo, r).iter().map(|p| p.addr).collect(),
            lan_prefixes: vec![mmsg::lan_prefix(r)],
            path_groups: groups
                .iter()
                .map(|&id| PathGroupConfig { id, weight: 1 })
                .collect(),
            nat: false,
        });
    }
    Ok(c)
}

/// The `mmsg` config of branch `b` in controller mode (the default): its own `branch_id`,
/// `lan_prefixes`, `[[wan]]`, `[ovs]` and `[controller]` (the gateway channel of `ssc` on the
/// unix socket `gw_socket`, the cache at `cache`), and no `[[remote]]`: remotes, path groups and
/// weights come from `ssc` (docs/gwchan.md §3).
pub fn mmsg_controller_config(
    topo: &Topology,
    prefix: &str,
    b: u8,
    selection_policy: &str,
    gw_socket: &Path,
    cache: &Path,
) -> anyhow::Result<Config> {
    let mut c = config_head(topo, prefix, b, selection_policy)?;
    c.controller = Some(ControllerConfig {
        address: format!("unix:{}", gw_socket.display()),
        cache: cache.to_owned(),
        renew_below_percent: mpa::config::DEFAULT_RENEW_PERCENT,
        renew_check_s: mpa::config::DEFAULT_RENEW_CHECK_S,
    });
    Ok(c)
}

fn internet_ports(topo: &Topology, b: u8) -> Vec<topology::ResolvedPort> {
    topo.ports()
        .into_iter()
        .filter(|p| p.id.branch == b && p.kind == PortKind::Internet)
        .collect()
}

/// `branch_id`, `lan_prefixes`, `selection_policy`, the `[[wan]]` ports and `[ovs]` (the
/// gateway's database and its `ssc` OpenFlow socket).
fn config_head(
    topo: &Topology,
    prefix: &str,
    b: u8,
    selection_policy: &str,
) -> anyhow::Result<Config> {
    let wan = internet_ports(topo, b)
        .iter()
        .map(|p| mmsg::wan_port(&p.gw_if, p.addr, p.prefix_len, p.next_hop))
        .collect();
    let mut c = mmsg::config(b, wan)?;
    c.selection_policy = SelectionPolicy::deserialize(Value::from(selection_policy))
        .with_context(|| format!("selection_policy {selection_policy:?}"))?;
    let d = ovs_dir(prefix, b);
    c.ovs = Some(OvsConfig {
        bridge: "br0".to_owned(),
        db: format!("unix:{}", d.join("db.sock").display()),
        controller: format!("unix:{}", d.join("ssc.sock").display()),
    });
    Ok(c)
}

/// How many tunnel connections (outbound + inbound) gateway `b` lists once everything is up:
/// one per (remote, group, class) in each direction. Static configs: every pair of branches,
/// groups 1..4 between 1 and 2, group 0 elsewhere (28 at branches 1 and 2, 16 elsewhere).
/// Controller: only the pairs with a path group in `examples/paths-paper-table2.toml` (1 ⇄ 2,
/// 16 each); branches 3..5 have no remotes (pure transit, 0).
pub fn expected_connections(static_configs: bool, b: u8) -> usize {
    expected_connections_with(static_configs, b, 4, 1)
}

/// [`expected_connections`] when the paths file defines `groups_1_2` groups from branch 1 to 2
/// and every gateway runs `connections_per_group` (one Type I plus that many Type II
/// connections per group and direction).
pub fn expected_connections_with(
    static_configs: bool,
    b: u8,
    groups_1_2: usize,
    connections_per_group: u8,
) -> usize {
    let groups = |r: u8| if table2_pair(b, r) { groups_1_2 } else { 1 };
    let per_group = 1 + usize::from(connections_per_group.max(1));
    let one_way: usize = BRANCHES
        .iter()
        .filter(|&&r| r != b)
        .filter(|&&r| static_configs || table2_pair(b, r))
        .map(|&r| groups(r) * per_group)
        .sum();
    2 * one_way
}

/// Member routes of a paths file: (group, member 1..) → `1a>2a`.
pub fn member_routes(paths_toml: &str) -> anyhow::Result<BTreeMap<(u8, u8), String>> {
    let v: toml::Value = toml::from_str(paths_toml).context("parse the paths file")?;
    let mut out = BTreeMap::new();
    for g in v
        .get("groups")
        .and_then(toml::Value::as_array)
        .context("no [[groups]]")?
    {
        let id = g
            .get("id")
            .and_then(toml::Value::as_integer)
            .and_then(|i| u8::try_from(i).ok())
            .context("group without id")?;
        let members = g
            .get("members")
            .and_then(toml::Value::as_array)
            .context("group without members")?;
        for (s, m) in members.iter().enumerate() {
            let s = u8::try_from(s + 1).context("too many members")?;
            out.insert((id, s), m.as_str().unwrap_or("?").to_owned());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    #[test]
    fn configs_validate() {
        let topo = topology::parse(
            &std::fs::read_to_string(root().join("examples/testbed-paper.toml")).unwrap(),
        )
        .unwrap();
        for b in BRANCHES {
            let text = mmsg::to_toml("test", &mmsg_config(&topo, "t1", b, "rr").unwrap()).unwrap();
            let c = mpa::config::Config::parse(&text)
                .unwrap_or_else(|e| panic!("branch {b}: {e}\n{text}"));
            assert_eq!(c.remote.len(), 4);
            for r in &c.remote {
                let groups: Vec<u8> = r.path_groups.iter().map(|g| g.id).collect();
                let want = if table2_pair(b, r.id) {
                    vec![1, 2, 3, 4]
                } else {
                    vec![0]
                };
                assert_eq!(groups, want, "branch {b} -> {}", r.id);
                assert_eq!(r.wan_addresses.len(), 2);
            }
            let o = c.ovs.unwrap();
            assert_eq!(o.db, format!("unix:/run/mms-testbed/t1/ovs/gw{b}/db.sock"));
            assert!(o.controller.ends_with(&format!("/ovs/gw{b}/ssc.sock")));
        }
    }

    #[test]
    fn controller_configs_validate() {
        let topo = topology::parse(
            &std::fs::read_to_string(root().join("examples/testbed-paper.toml")).unwrap(),
        )
        .unwrap();
        let sock = Path::new("/tmp/mms-e2e-t1/ssc-gw.sock");
        for b in BRANCHES {
            let cache = PathBuf::from(format!("/tmp/mms-e2e-t1/mmsg-gw{b}-cache.json"));
            let c = mmsg_controller_config(&topo, "t1", b, "rr", sock, &cache).unwrap();
            let text = mmsg::to_toml("test", &c).unwrap();
            let c = mpa::config::Config::parse(&text)
                .unwrap_or_else(|e| panic!("branch {b}: {e}\n{text}"));
            assert!(c.remote.is_empty());
            assert_eq!(c.wan.len(), 2);
            let ctl = c.controller.unwrap();
            assert_eq!(ctl.address, "unix:/tmp/mms-e2e-t1/ssc-gw.sock");
            assert_eq!(ctl.cache, cache);
            assert!(c.ovs.is_some());
        }
        assert_eq!(expected_connections(true, 1), 28);
        assert_eq!(expected_connections(true, 3), 16);
        assert_eq!(expected_connections(false, 2), 16);
        assert_eq!(expected_connections(false, 4), 0);
        // One group 1 -> 2, 8 Type II connections beside the Type I one, both directions.
        assert_eq!(expected_connections_with(false, 1, 1, 8), 18);
    }

    #[test]
    fn routes_of_table2() {
        let r = member_routes(
            &std::fs::read_to_string(root().join("examples/paths-paper-table2.toml")).unwrap(),
        )
        .unwrap();
        assert_eq!(r.len(), 16);
        assert_eq!(r[&(1, 1)], "1a>2a");
        assert_eq!(r[&(3, 2)], "1a>3a>3b>2a");
    }
}
