//! Learned WAN addresses (issue #20, "Real WANs"): what the kernel says about each WAN port now
//! (address, next hop, next-hop MAC), chosen from the rows of its address, route and neighbour
//! tables, and what that means for the running config. Sans-IO: the gateway's netlink reader
//! (`mmsg_dataplane::wan_watch`) dumps the tables into a [`KernelTables`] and calls [`learn`]
//! on every netlink event or poll; when the result differs from the last one it reports it to
//! the controller ([`crate::gwchan::GatewayMsg::WanState`]) and applies [`apply`] to its own
//! config (new local address: policy routing and the outbound connections follow).
//!
//! Choices (docs/mmsg.md "Learned WAN addresses"):
//! - address: the configured one while the interface still has it (a port with several
//!   addresses keeps its configured one), else the interface's first IPv4 address;
//! - next hop: the gateway of the main table's default route through the port, else of any
//!   main-table route through it, else the configured gateway when it is inside the learned
//!   address's network (a port without its own default route, e.g. the second uplink, whose
//!   default lives in mmsg's policy table) — the configured values are hints;
//! - next-hop MAC: the neighbour entry of the next hop on that port, if it has a link-layer
//!   address.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use mms_types::MacAddr;

use crate::config::Config;
use crate::gwchan::{WanLearned, WanState};

/// The kernel's main routing table (`RT_TABLE_MAIN`).
pub const MAIN_TABLE: u32 = 254;

/// One IPv4 route as the driver read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Output interface name.
    pub dev: String,
    /// Destination prefix (`0.0.0.0/0` for a default route).
    pub dst: Ipv4Net,
    /// Gateway (next hop), if the route has one.
    pub gateway: Option<Ipv4Addr>,
    /// Routing table id.
    pub table: u32,
}

/// One neighbour entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbour {
    /// Interface name.
    pub dev: String,
    /// The neighbour's address.
    pub ip: Ipv4Addr,
    /// Its link-layer address, when resolved.
    pub mac: Option<MacAddr>,
}

/// The rows of the kernel tables that matter, as the driver read them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelTables {
    /// (interface name, IPv4 address with prefix length), in the kernel's order.
    pub addresses: Vec<(String, Ipv4Net)>,
    /// IPv4 routes of every table.
    pub routes: Vec<Route>,
    /// IPv4 neighbours.
    pub neighbours: Vec<Neighbour>,
}

/// The learned state of every WAN port of `config`, in port order.
pub fn learn(config: &Config, t: &KernelTables) -> WanState {
    let ports = config
        .wan
        .iter()
        .enumerate()
        .map(|(k, w)| {
            let mine: Vec<Ipv4Net> = t
                .addresses
                .iter()
                .filter(|(dev, _)| *dev == w.name)
                .map(|(_, a)| *a)
                .collect();
            let address = if mine.contains(&w.address) {
                Some(w.address)
            } else {
                mine.first().copied()
            };
            let via = |default_only: bool| {
                t.routes
                    .iter()
                    .filter(|r| r.dev == w.name && r.table == MAIN_TABLE)
                    .filter(|r| !default_only || r.dst.prefix_len() == 0)
                    .find_map(|r| r.gateway)
            };
            let next_hop = via(true).or_else(|| via(false)).or_else(|| {
                address
                    .filter(|a| a.contains(&w.gateway) && a.addr() != w.gateway)
                    .map(|_| w.gateway)
            });
            let next_hop_mac = next_hop.and_then(|nh| {
                t.neighbours
                    .iter()
                    .find(|n| n.dev == w.name && n.ip == nh)
                    .and_then(|n| n.mac)
            });
            WanLearned {
                port: u8::try_from(k).unwrap_or(u8::MAX),
                name: w.name.clone(),
                address,
                next_hop,
                next_hop_mac,
            }
        })
        .collect();
    WanState { ports }
}

/// `config` with the learned addresses and next hops of `state` (ports without a learned
/// address keep theirs: the tunnels keep trying the last known one); `None` when nothing
/// changes. A port's next hop changes only together with, or inside, its address's network.
pub fn apply(config: &Config, state: &WanState) -> Option<Config> {
    let mut c = config.clone();
    for p in &state.ports {
        let Some(w) = c.wan.get_mut(usize::from(p.port)) else {
            continue;
        };
        if w.name != p.name {
            continue;
        }
        if let Some(a) = p.address {
            w.address = a;
        }
        if let Some(nh) = p.next_hop.filter(|nh| w.address.contains(nh)) {
            w.gateway = nh;
        }
    }
    (c != *config).then_some(c)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn config() -> Config {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/mmsg-branch2.toml"
        ))
        .unwrap();
        Config::parse(&text).unwrap()
    }

    fn net(s: &str) -> Ipv4Net {
        s.parse().unwrap()
    }

    fn route(dev: &str, dst: &str, gw: Option<&str>, table: u32) -> Route {
        Route {
            dev: dev.into(),
            dst: net(dst),
            gateway: gw.map(|g| g.parse().unwrap()),
            table,
        }
    }

    /// The 2x2 testbed's gw2 as mmsg leaves it: both ports addressed, the main default via
    /// port a, port b's default only in mmsg's policy table 101.
    fn testbed() -> KernelTables {
        KernelTables {
            addresses: vec![
                ("lo".into(), net("127.0.0.1/8")),
                ("wan0".into(), net("198.18.20.2/24")),
                ("wan1".into(), net("198.18.21.2/24")),
            ],
            routes: vec![
                route("wan0", "0.0.0.0/0", Some("198.18.20.1"), MAIN_TABLE),
                route("wan0", "198.18.20.0/24", None, MAIN_TABLE),
                route("wan1", "198.18.21.0/24", None, MAIN_TABLE),
                route("wan0", "0.0.0.0/0", Some("198.18.20.1"), 100),
                route("wan1", "0.0.0.0/0", Some("198.18.21.1"), 101),
            ],
            neighbours: vec![Neighbour {
                dev: "wan0".into(),
                ip: "198.18.20.1".parse().unwrap(),
                mac: Some(MacAddr([2, 0, 0xc6, 0x12, 0x14, 1])),
            }],
        }
    }

    #[test]
    fn the_configured_state_is_learned_unchanged() {
        let c = config();
        let s = learn(&c, &testbed());
        assert_eq!(s.ports.len(), 2);
        assert_eq!(
            s.ports[0],
            WanLearned {
                port: 0,
                name: "wan0".into(),
                address: Some(net("198.18.20.2/24")),
                next_hop: Some("198.18.20.1".parse().unwrap()),
                next_hop_mac: Some("02:00:c6:12:14:01".parse().unwrap()),
            }
        );
        // Port b: no main-table route with a gateway: the configured one (a hint inside the
        // network); its neighbour is not resolved.
        assert_eq!(s.ports[1].next_hop, Some("198.18.21.1".parse().unwrap()));
        assert_eq!(s.ports[1].next_hop_mac, None);
        assert_eq!(apply(&c, &s), None);
    }

    #[test]
    fn a_replaced_address_and_route_are_learned_and_applied() {
        let c = config();
        let mut t = testbed();
        t.addresses[1].1 = net("198.18.20.77/24");
        t.routes[0].gateway = Some("198.18.20.254".parse().unwrap());
        t.neighbours[0].ip = "198.18.20.254".parse().unwrap();
        let s = learn(&c, &t);
        assert_eq!(s.ports[0].address, Some(net("198.18.20.77/24")));
        assert_eq!(s.ports[0].next_hop, Some("198.18.20.254".parse().unwrap()));
        assert_eq!(
            s.ports[0].next_hop_mac,
            Some(MacAddr([2, 0, 0xc6, 0x12, 0x14, 1]))
        );
        let n = apply(&c, &s).unwrap();
        assert_eq!(n.wan[0].address, net("198.18.20.77/24"));
        assert_eq!(
            n.wan[0].gateway,
            "198.18.20.254".parse::<Ipv4Addr>().unwrap()
        );
        assert_eq!(n.wan[1], c.wan[1]);
        assert!(n.validate().is_ok());
    }

    #[test]
    fn a_new_network_without_a_route_keeps_no_stale_gateway() {
        let c = config();
        let mut t = testbed();
        t.addresses[1].1 = net("198.18.24.2/24");
        t.routes
            .retain(|r| r.dev != "wan0" || r.table != MAIN_TABLE);
        let s = learn(&c, &t);
        assert_eq!(s.ports[0].address, Some(net("198.18.24.2/24")));
        // The configured gateway is not in the new network: unknown, not a wrong guess.
        assert_eq!(s.ports[0].next_hop, None);
        // The address is applied; the gateway waits for a route.
        let n = apply(&c, &s).unwrap();
        assert_eq!(n.wan[0].address, net("198.18.24.2/24"));
        assert_eq!(n.wan[0].gateway, c.wan[0].gateway);
    }

    #[test]
    fn several_addresses_keep_the_configured_one_and_none_keeps_the_last() {
        let c = config();
        let mut t = testbed();
        t.addresses
            .insert(1, ("wan0".into(), net("198.18.20.9/24")));
        assert_eq!(learn(&c, &t).ports[0].address, Some(net("198.18.20.2/24")));
        t.addresses.retain(|(d, _)| d != "wan0");
        let s = learn(&c, &t);
        assert_eq!(s.ports[0].address, None);
        assert_eq!(apply(&c, &s), None);
    }

    #[test]
    fn a_report_for_another_port_name_is_ignored() {
        let c = config();
        let mut s = learn(&c, &testbed());
        s.ports[0].name = "eth9".into();
        s.ports[0].address = Some(net("198.18.20.50/24"));
        assert_eq!(apply(&c, &s), None);
    }
}
