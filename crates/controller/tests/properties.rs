//! Property tests of the flow compiler on random topologies and path groups.
//!
//! For every compiled member path, walking a packet hop by hop through the compiled tables (the
//! internet delivers to whichever port owns the destination address) must:
//! - forward: start at A's `mpa_i` as (x_i, y_j, eph → 0xB00G), take exactly the member path's
//!   WAN hops, and reach B's `mpa_j` with the original header restored;
//! - reverse: start at B's `mpa_j` as (y_j, x_i, 0xB00G → eph) and reach A's `mpa_i` restored;
//! - leave every gateway with the Ethernet header the next hop expects.
//!
//! Also: no two flows of one switch share match and priority, cookies are unique, every flow of a
//! member path carries its code, install plans put destinations first.
// Test helpers outside #[test] functions unwrap too (clippy.toml only covers #[test] bodies).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use controller::inventory::{
    Branch, BranchId, Inventory, MacAddr, PortIndex, PortRef, WanKind, WanPort,
};
use controller::path_config::{
    mdi, path_delay, HopEstimate, Measurements, PathConfigurator, Settings,
};
use controller::path_group::{
    reserved_ports, MemberId, MemberPath, PathCode, PathGroup, PathGroupId, PathGroups, Transit,
};
use controller::priority::{dscp, Class, TYPE_I_MARK};
use controller::swap::{
    apply, compile, mpa_ofport, wan_ofport, CookieInfo, FlowTables, Packet, Stage,
};
use proptest::prelude::*;

fn inventory(ids: &[u8], ports: &[u8]) -> Inventory {
    inventory_with(ids, ports, |b, k| {
        (Ipv4Addr::new(198, 18, 10 * b + k, 2), 24)
    })
}

/// Branches `ids` with `ports[i]` WAN ports each; `wan(b, k)` is port k's address and prefix
/// length (its router is the address below it).
fn inventory_with(ids: &[u8], ports: &[u8], wan: impl Fn(u8, u8) -> (Ipv4Addr, u8)) -> Inventory {
    let branches = ids
        .iter()
        .zip(ports)
        .map(|(&b, &n)| Branch {
            id: BranchId::new(b).unwrap(),
            name: format!("b{b}"),
            lan: vec![format!("198.19.{b}.0/24").parse().unwrap()],
            wan: (0..n)
                .map(|k| {
                    let (addr, len) = wan(b, k);
                    let gw = Ipv4Addr::from(u32::from(addr) - 1);
                    WanPort {
                        port: PortIndex::new(k).unwrap(),
                        address: format!("{addr}/{len}").parse().unwrap(),
                        gateway: gw,
                        gateway_mac: Some(MacAddr::from_ipv4(gw)),
                        mac: Some(MacAddr::from_ipv4(addr)),
                        kind: WanKind::Internet,
                        capacity_mbps: 40,
                        nat: false,
                    }
                })
                .collect(),
        })
        .collect();
    Inventory::new(branches).unwrap()
}

type MemberSpec = (u8, u8, Option<(u8, u8, u8)>);
type GroupSpec = (u8, u8, u8, Vec<MemberSpec>);

/// Builds valid groups from raw numbers (skipping what would be invalid).
fn groups(inv: &Inventory, ids: &[u8], ports: &[u8], specs: &[GroupSpec]) -> PathGroups {
    let n = ids.len() as u8;
    let bid = |i: u8| BranchId::new(ids[usize::from(i % n)]).unwrap();
    let nports = |b: BranchId| ports[ids.iter().position(|&x| x == b.get()).unwrap()];
    let pref = |b: BranchId, k: u8| PortRef::new(b, PortIndex::new(k % nports(b)).unwrap());
    let mut out: BTreeMap<(BranchId, BranchId, u8), PathGroup> = BTreeMap::new();
    for (a, b, g, members) in specs {
        let (a, b) = (bid(*a), bid(*b));
        if a == b {
            continue;
        }
        let gid = PathGroupId::new(g % 16).unwrap();
        if out.contains_key(&(a, b, gid.get())) {
            continue;
        }
        let mut pairs = BTreeSet::new();
        let mut list = BTreeMap::new();
        for (i, j, transit) in members {
            let (src, dst) = (pref(a, *i), pref(b, *j));
            if !pairs.insert((src, dst)) {
                continue;
            }
            let transits = match transit {
                Some((t, x, y)) if bid(*t) != a && bid(*t) != b => {
                    let t = bid(*t);
                    vec![Transit {
                        ingress: pref(t, *x),
                        egress: pref(t, *y),
                    }]
                }
                _ => Vec::new(),
            };
            let id = MemberId::new(list.len() as u8 + 1).unwrap();
            list.insert(id, MemberPath::new(src, transits, dst).unwrap());
        }
        out.insert(
            (a, b, gid.get()),
            PathGroup {
                source: a,
                destination: b,
                id: gid,
                members: list,
            },
        );
    }
    PathGroups::new(inv, out.into_values().collect()).unwrap()
}

fn topology() -> impl Strategy<Value = (Vec<u8>, Vec<u8>, Vec<GroupSpec>)> {
    topology_of(1..=15, 2..=6)
}

/// A subsequence of `ids` (`count` of them), 1..=3 WAN ports each, and up to 12 raw group specs.
fn topology_of(
    ids: std::ops::RangeInclusive<u8>,
    count: std::ops::RangeInclusive<usize>,
) -> impl Strategy<Value = (Vec<u8>, Vec<u8>, Vec<GroupSpec>)> {
    proptest::sample::subsequence(ids.collect::<Vec<_>>(), count).prop_flat_map(|ids| {
        let n = ids.len();
        let member = (
            any::<u8>(),
            any::<u8>(),
            proptest::option::of((any::<u8>(), any::<u8>(), any::<u8>())),
        );
        let group = (
            any::<u8>(),
            any::<u8>(),
            any::<u8>(),
            proptest::collection::vec(member, 1..=9),
        );
        (
            Just(ids),
            proptest::collection::vec(1u8..=3, n),
            proptest::collection::vec(group, 0..=12),
        )
    })
}

/// Where a walk ended (branch and mpa port), the final packet and the WAN hops taken.
type Walked = (PortRef, Packet, Vec<(PortRef, PortRef)>);

/// Walks a packet from `branch`'s `mpa{port}` through the tables. Returns where it was delivered
/// (branch and mpa port), the final packet and the WAN hops taken.
fn walk(
    inv: &Inventory,
    tables: &FlowTables,
    branch: BranchId,
    port: PortIndex,
    packet: Packet,
) -> Result<Walked, String> {
    let mut at = branch;
    let mut in_port = mpa_ofport(port);
    let mut p = packet;
    let mut hops = Vec::new();
    // A loop-free path with at most one transit visits at most 3 switches.
    for _ in 0..3 {
        let (q, out, flow) = apply(tables.switch(at), in_port, p)
            .ok_or_else(|| format!("no flow at branch {at} in_port {in_port} for {p:?}"))?;
        if matches!(flow.cookie.decode(), Some(CookieInfo::Patch { .. })) {
            return Err(format!("branch {at}: fell through to a patch flow: {p:?}"));
        }
        let w = inv
            .branch(at)
            .unwrap()
            .wan
            .iter()
            .find(|w| mpa_ofport(w.port) == out);
        if let Some(w) = w {
            return Ok((PortRef::new(at, w.port), q, hops));
        }
        let w = inv
            .branch(at)
            .unwrap()
            .wan
            .iter()
            .find(|w| wan_ofport(w.port) == out)
            .ok_or_else(|| format!("branch {at}: output to unknown port {out}"))?;
        let egress = PortRef::new(at, w.port);
        if q.ipv4_src != w.ip() {
            return Err(format!(
                "{egress}: leaves with foreign source {}",
                q.ipv4_src
            ));
        }
        if q.eth_src != w.mac.unwrap() || Some(q.eth_dst) != inv.next_hop_mac(egress) {
            return Err(format!("{egress}: wrong Ethernet header {q:?}"));
        }
        let landing = inv
            .port_by_address(q.ipv4_dst)
            .ok_or_else(|| format!("{egress}: sent to unknown address {}", q.ipv4_dst))?;
        if !inv.can_hop(egress, landing) {
            return Err(format!("impossible hop {egress}>{landing}"));
        }
        hops.push((egress, landing));
        let lw = inv.port(landing).unwrap();
        p = Packet {
            eth_src: lw.gateway_mac.unwrap(),
            eth_dst: lw.mac.unwrap(),
            ..q
        };
        at = landing.branch;
        in_port = wan_ofport(landing.port);
    }
    Err("more than 3 switches: a loop".to_owned())
}

/// An ephemeral (client) port outside the reserved path-code ranges (DESIGN §3.1): the first port
/// at or above `seed` (wrapping into 1024..) that no range covers.
fn ephemeral(inv: &Inventory, seed: u16) -> u16 {
    let ranges = reserved_ports(inv);
    (seed.max(1024)..=u16::MAX)
        .chain(1024..seed.max(1024))
        .find(|p| !ranges.iter().any(|r| r.contains(p)))
        .unwrap()
}

fn check_member(
    inv: &Inventory,
    t: &FlowTables,
    code: PathCode,
    path: &MemberPath,
) -> Result<(), String> {
    let eph = ephemeral(inv, 40_000 ^ code.port());
    check_member_ports(inv, t, code, path, code.listen_port(), eph)
}

/// [`check_member`] with the listen port and the client's ephemeral port given (any port plan).
fn check_member_ports(
    inv: &Inventory,
    t: &FlowTables,
    code: PathCode,
    path: &MemberPath,
    listen: u16,
    eph: u16,
) -> Result<(), String> {
    let want_hops: Vec<(PortRef, PortRef)> = path.hops().iter().map(|h| (h.from, h.to)).collect();
    let rev = path.reversed();
    let want_rev: Vec<(PortRef, PortRef)> = rev.hops().iter().map(|h| (h.from, h.to)).collect();
    let (x, y) = (
        inv.port(path.source()).unwrap(),
        inv.port(path.destination()).unwrap(),
    );
    for mark in [0u8, TYPE_I_MARK, 10] {
        let class = if mark == TYPE_I_MARK {
            Class::TypeI
        } else {
            Class::TypeII
        };
        let want_dscp = dscp(class, path.wan_hops());
        // Forward.
        let start = Packet {
            eth_src: x.mac.unwrap(),
            eth_dst: x.gateway_mac.unwrap(),
            ipv4_src: x.ip(),
            ipv4_dst: y.ip(),
            ip_dscp: mark,
            tcp_src: eph,
            tcp_dst: listen,
        };
        let (to, end, hops) = walk(inv, t, code.source, path.source().port, start)?;
        if to != path.destination() || hops != want_hops {
            return Err(format!("{code} {path}: forward ended at {to} via {hops:?}"));
        }
        if (
            end.ipv4_src,
            end.ipv4_dst,
            end.tcp_src,
            end.tcp_dst,
            end.ip_dscp,
        ) != (x.ip(), y.ip(), eph, listen, want_dscp)
        {
            return Err(format!("{code} {path}: forward not restored: {end:?}"));
        }
        // Reverse.
        let start = Packet {
            eth_src: y.mac.unwrap(),
            eth_dst: y.gateway_mac.unwrap(),
            ipv4_src: y.ip(),
            ipv4_dst: x.ip(),
            ip_dscp: mark,
            tcp_src: listen,
            tcp_dst: eph,
        };
        let (to, end, hops) = walk(inv, t, code.destination, path.destination().port, start)?;
        if to != path.source() || hops != want_rev {
            return Err(format!("{code} {path}: reverse ended at {to} via {hops:?}"));
        }
        if (
            end.ipv4_src,
            end.ipv4_dst,
            end.tcp_src,
            end.tcp_dst,
            end.ip_dscp,
        ) != (y.ip(), x.ip(), listen, eph, want_dscp)
        {
            return Err(format!("{code} {path}: reverse not restored: {end:?}"));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_member_path_is_complete((ids, ports, specs) in topology()) {
        let inv = inventory(&ids, &ports);
        let groups = groups(&inv, &ids, &ports, &specs);
        let t = compile(&inv, &groups).unwrap();
        for m in groups.members() {
            if let Err(e) = check_member(&inv, &t, m.code, m.path) {
                prop_assert!(false, "{}", e);
            }
        }
    }

    #[test]
    fn tables_are_consistent((ids, ports, specs) in topology()) {
        let inv = inventory(&ids, &ports);
        let groups = groups(&inv, &ids, &ports, &specs);
        let t = compile(&inv, &groups).unwrap();
        let mut all_swap_cookies = BTreeSet::new();
        for (b, flows) in t.iter() {
            let mut matches = BTreeSet::new();
            let mut cookies = BTreeSet::new();
            for f in flows {
                prop_assert!(matches.insert((f.priority, f.matches.clone())), "branch {}: duplicate match {}", b, f);
                prop_assert!(cookies.insert(f.cookie), "branch {}: duplicate cookie {}", b, f.cookie);
                match f.cookie.decode() {
                    Some(CookieInfo::Swap { code, .. }) => {
                        prop_assert!(groups.member(code).is_some());
                        prop_assert!(all_swap_cookies.insert(f.cookie));
                    }
                    Some(CookieInfo::Patch { .. }) => {}
                    None => prop_assert!(false, "foreign cookie {}", f.cookie),
                }
            }
        }
        let patch: usize = ports.iter().map(|&n| 2 * usize::from(n)).sum();
        let mut expected = patch;
        for m in groups.members() {
            let flows = t.member_flows(m.code);
            // Per direction: 2 source entries, one per transit, one destination.
            prop_assert_eq!(flows.len(), 2 * (3 + m.path.transits().len()));
            expected += flows.len();
            let stages: Vec<Stage> = common::member_plan(&t, m.code, true).iter().map(common::stage).collect();
            let want: Vec<Stage> = if m.path.transits().is_empty() {
                vec![Stage::Destination, Stage::Source]
            } else {
                vec![Stage::Destination, Stage::Transit, Stage::Source]
            };
            prop_assert_eq!(&stages, &want);
            let mut rev: Vec<Stage> = common::member_plan(&t, m.code, false).iter().map(common::stage).collect();
            rev.reverse();
            prop_assert_eq!(rev, want);
        }
        prop_assert_eq!(t.len(), expected);
    }

    #[test]
    fn notation_round_trips((ids, ports, specs) in topology()) {
        let inv = inventory(&ids, &ports);
        let groups = groups(&inv, &ids, &ports, &specs);
        for m in groups.members() {
            let s = m.path.to_string();
            prop_assert_eq!(&s.parse::<MemberPath>().unwrap(), m.path);
            prop_assert_eq!(m.path.reversed().reversed(), m.path.clone());
        }
        let toml = toml::to_string(&groups.to_file()).unwrap();
        prop_assert_eq!(PathGroups::from_toml(&inv, &toml).unwrap(), groups);
        let inv_toml = toml::to_string(&inv.to_file()).unwrap();
        prop_assert_eq!(Inventory::from_toml(&inv_toml).unwrap(), inv);
    }

    #[test]
    fn path_code_round_trips(b in 1u8..=15, a in 1u8..=15, s in 1u8..=15, g in 0u8..=15) {
        let code = PathCode {
            destination: BranchId::new(b).unwrap(),
            source: BranchId::new(a).unwrap(),
            member: MemberId::new(s).unwrap(),
            group: PathGroupId::new(g).unwrap(),
        };
        prop_assert_eq!(code.port(), u16::from(b) << 12 | u16::from(a) << 8 | u16::from(s) << 4 | u16::from(g));
        prop_assert_eq!(PathCode::from_port(code.port()), Some(code));
        prop_assert_eq!(PathCode::from_port(code.listen_port()), None);
    }
}

/// Random per-hop estimates: (available kbit/s or unmeasured, delay ms or unmeasured).
fn estimates() -> impl Strategy<Value = Vec<(Option<u64>, Option<u64>)>> {
    proptest::collection::vec(
        (
            proptest::option::of(0u64..60_000),
            proptest::option::of(1u64..300),
        ),
        0..400,
    )
}

fn measurements(inv: &Inventory, raw: &[(Option<u64>, Option<u64>)]) -> Measurements {
    let mut m = Measurements::new();
    let all: Vec<PortRef> = inv.ports().map(|(r, _)| r).collect();
    let hops = all.iter().flat_map(|&a| all.iter().map(move |&b| (a, b)));
    for ((a, b), (kbps, ms)) in hops.filter(|(a, b)| a.branch != b.branch).zip(raw) {
        m.set(
            a,
            b,
            HopEstimate {
                available_kbps: *kbps,
                delay_us: ms.map(|d| d * 1000),
            },
        );
    }
    m
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Automatic groups are valid, delay-compatible, one member per address pair, never use a
    /// dead hop, compile into complete member paths, and are deterministic.
    #[test]
    fn automatic_groups_are_sound((ids, ports, _specs) in topology(), raw in estimates(), mdi_max in 0.05f64..0.5) {
        let inv = inventory(&ids, &ports);
        let m = measurements(&inv, &raw);
        let settings = Settings { groups_per_pair: 2, mdi_threshold: mdi_max, ..Settings::default() };
        let mut pc = PathConfigurator::new(settings.clone());
        pc.update(&inv, &m);
        let groups = pc.groups(&inv).unwrap();
        let mut again = PathConfigurator::new(settings);
        again.update(&inv, &m);
        prop_assert_eq!(&again.groups(&inv).unwrap(), &groups);
        // A second round with the same numbers changes nothing (semi-permanent).
        prop_assert!(pc.update(&inv, &m).is_empty());
        for g in groups.groups() {
            let delays: Vec<u64> = g.members.values().filter_map(|p| path_delay(&m, p)).collect();
            prop_assert!(mdi(&delays) <= mdi_max, "{:?}", g);
            let slots: BTreeSet<_> = g.members.values().map(|p| (p.source(), p.destination())).collect();
            prop_assert_eq!(slots.len(), g.members.len());
            for p in g.members.values() {
                for h in p.hops() {
                    prop_assert_ne!(m.get(h.from, h.to).available_kbps, Some(0));
                }
            }
        }
        let t = compile(&inv, &groups).unwrap();
        for member in groups.members() {
            if let Err(e) = check_member(&inv, &t, member.code, member.path) {
                prop_assert!(false, "{}", e);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The extended port plan (issue #20): branch ids beyond 15, codes allocated by `codes`.
// ---------------------------------------------------------------------------------------------

/// Branches with ids up to 40; WAN port k of branch b at 198.18.b.(4k+2)/30 (router +1).
fn inventory_wide(ids: &[u8], ports: &[u8]) -> Inventory {
    inventory_with(ids, ports, |b, k| {
        (Ipv4Addr::new(198, 18, b, 4 * k + 2), 30)
    })
}

fn wide_topology() -> impl Strategy<Value = (Vec<u8>, Vec<u8>, Vec<GroupSpec>)> {
    // Always some ids above 15.
    topology_of(10..=40, 3..=7)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Every member path of the extended plan is delivered and restored in both directions, no
    /// two member paths share a code on one gateway, and the paper's plan refuses the same
    /// inventory.
    #[test]
    fn extended_plan_member_paths_are_complete((ids, ports, specs) in wide_topology()) {
        use controller::catalog::{member_gateways, Catalog};
        let inv = inventory_wide(&ids, &ports);
        let groups = groups(&inv, &ids, &ports, &specs);
        let plan: mms_types::PortPlan = "16384-32767".parse().unwrap();
        let settings = Settings { ports: plan, ..Settings::default() };
        let c = Catalog::new(inv.to_file().branches, groups.groups().cloned().collect(), settings)
            .unwrap();
        let t = c.flows();
        for m in groups.members() {
            let listen = plan.listen_port(m.code.destination, m.code.group).unwrap();
            let eph = 40_000 + (m.code.wide() % 20_000) as u16;
            if let Err(e) = check_member_ports(&inv, t, m.code, m.path, listen, eph) {
                prop_assert!(false, "{}", e);
            }
        }
        let mut seen: BTreeMap<(BranchId, u16), PathCode> = BTreeMap::new();
        for (code, gws) in member_gateways(&groups) {
            let port = c.codes().get(code).unwrap();
            prop_assert!((16400..=32767).contains(&port));
            for g in gws {
                if let Some(other) = seen.insert((g, port), code) {
                    prop_assert!(false, "{} and {} share {} on {}", code, other, port, g);
                }
            }
        }
        for (b, flows) in t.iter() {
            let mut cookies = BTreeSet::new();
            for f in flows {
                prop_assert!(cookies.insert(f.cookie), "branch {}: duplicate cookie {}", b, f.cookie);
            }
        }
        if ids.iter().any(|&b| b > 15) {
            let paper = Catalog::new(
                inv.to_file().branches,
                groups.groups().cloned().collect(),
                Settings::default(),
            );
            prop_assert!(paper.is_err());
        }
    }
}
