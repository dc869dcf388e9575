//! Learned WAN addresses (issue #20), the thin driver: reads the kernel's link, address, route
//! and neighbour tables over rtnetlink (`netlink-sys` + `netlink-packet-route`, already in the
//! tree through `tun-rs`), hands them to [`mpa::wan_state::learn`] and sends every new result
//! to the daemon. A blocking thread: it joins the rtnetlink multicast groups of IPv4 addresses,
//! IPv4 routes and neighbours and re-reads the tables at most [`CHECK`] after any event, and at
//! least every [`REFRESH`] (a missed event costs at most that).
//!
//! The daemon applies a changed local address to its own config (policy routing, outbound
//! connections) and the controller session reports it (`GatewayMsg::WanState`, protocol 5).

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use ipnet::Ipv4Net;
use mms_types::MacAddr;
use mpa::config::Config;
use mpa::gwchan::WanState;
use mpa::wan_state::{KernelTables, Neighbour, Route};
use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkMessage};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use tokio::sync::watch;
use tracing::{debug, info, warn};

/// How often the event socket is drained; a change is seen within about this.
pub const CHECK: Duration = Duration::from_millis(200);
/// The tables are re-read at least this often, events or not.
pub const REFRESH: Duration = Duration::from_secs(2);
/// rtnetlink multicast groups (`RTNLGRP_*`, uapi `linux/rtnetlink.h`).
const RTNLGRP_NEIGH: u32 = 3;
const RTNLGRP_IPV4_IFADDR: u32 = 5;
const RTNLGRP_IPV4_ROUTE: u32 = 7;
/// Receive buffer of one netlink datagram (dumps come in many datagrams of at most a page or
/// two each; 64 KiB is what the kernel may use with large pages).
const RECV_BUF: usize = 64 * 1024;

/// Starts the watcher thread for the WAN ports of `config` (names as in the running config);
/// the receiver has the latest learned state (first value: the first read, or empty if the
/// tables cannot be read).
pub fn spawn(config: &Config) -> std::io::Result<watch::Receiver<WanState>> {
    let events = event_socket()?;
    let config = config.clone();
    let first = read_tables().map(|t| mpa::wan_state::learn(&config, &t));
    let first = match first {
        Ok(s) => s,
        Err(e) => {
            warn!(error = %e, "reading the WAN ports' addresses failed");
            WanState::default()
        }
    };
    info!(state = ?first, "WAN state learned");
    let (tx, rx) = watch::channel(first);
    std::thread::Builder::new()
        .name("wan-watch".into())
        .spawn(move || run(&config, &events, &tx))?;
    Ok(rx)
}

/// The next learned state of `rx` (never, once the watcher is gone or there is none).
pub async fn next(rx: &mut Option<watch::Receiver<WanState>>) -> Option<WanState> {
    match rx {
        Some(r) => {
            if r.changed().await.is_err() {
                *rx = None;
                return None;
            }
            Some(r.borrow_and_update().clone())
        }
        None => std::future::pending().await,
    }
}

fn run(config: &Config, events: &Socket, tx: &watch::Sender<WanState>) {
    let mut buf = vec![0u8; RECV_BUF];
    let mut last_read = Instant::now();
    loop {
        std::thread::sleep(CHECK);
        let mut event = false;
        // Non-blocking: drain what came since the last check.
        loop {
            let mut b = buf.as_mut_slice();
            match events.recv(&mut b, 0) {
                Ok(0) => break,
                Ok(_) => event = true,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                // ENOBUFS: events were lost; read the tables anyway.
                Err(_) => {
                    event = true;
                    break;
                }
            }
        }
        if !event && last_read.elapsed() < REFRESH {
            continue;
        }
        last_read = Instant::now();
        match read_tables() {
            Ok(t) => {
                let s = mpa::wan_state::learn(config, &t);
                if *tx.borrow() != s {
                    info!(state = ?s, "WAN state changed");
                    if tx.send(s).is_err() {
                        return;
                    }
                }
            }
            Err(e) => debug!(error = %e, "reading the kernel tables failed"),
        }
        if tx.is_closed() {
            return;
        }
    }
}

fn event_socket() -> std::io::Result<Socket> {
    let mut s = Socket::new(NETLINK_ROUTE)?;
    s.bind(&SocketAddr::new(0, 0))?;
    for g in [RTNLGRP_NEIGH, RTNLGRP_IPV4_IFADDR, RTNLGRP_IPV4_ROUTE] {
        s.add_membership(g)?;
    }
    s.set_non_blocking(true)?;
    Ok(s)
}

/// One dump request of `msg`; every answer message goes to `each`.
pub(crate) fn dump(
    msg: RouteNetlinkMessage,
    mut each: impl FnMut(RouteNetlinkMessage),
) -> std::io::Result<()> {
    let mut s = Socket::new(NETLINK_ROUTE)?;
    s.bind_auto()?;
    s.connect(&SocketAddr::new(0, 0))?;
    let mut hdr = NetlinkHeader::default();
    hdr.flags = NLM_F_REQUEST | NLM_F_DUMP;
    let mut packet = NetlinkMessage::new(hdr, NetlinkPayload::from(msg));
    packet.finalize();
    let mut req = vec![0u8; packet.header.length as usize];
    packet.serialize(&mut req[..]);
    s.send(&req, 0)?;
    let mut buf = vec![0u8; RECV_BUF];
    loop {
        let mut b = buf.as_mut_slice();
        let n = s.recv(&mut b, 0)?;
        let mut off = 0;
        while let Some(bytes) = buf.get(off..n).filter(|b| !b.is_empty()) {
            let m = NetlinkMessage::<RouteNetlinkMessage>::deserialize(bytes)
                .map_err(|e| std::io::Error::other(format!("{e:?}")))?;
            match m.payload {
                NetlinkPayload::Done(_) => return Ok(()),
                NetlinkPayload::Error(e) => {
                    return match e.code {
                        None => Ok(()),
                        Some(_) => Err(e.to_io()),
                    }
                }
                NetlinkPayload::InnerMessage(inner) => each(inner),
                _ => {}
            }
            let len = m.header.length as usize;
            if len == 0 {
                return Ok(());
            }
            off += len;
        }
    }
}

/// Dumps links (names), IPv4 addresses, routes and neighbours.
pub fn read_tables() -> std::io::Result<KernelTables> {
    let mut names = std::collections::BTreeMap::new();
    dump(RouteNetlinkMessage::GetLink(LinkMessage::default()), |m| {
        if let RouteNetlinkMessage::NewLink(l) = m {
            for a in l.attributes {
                if let LinkAttribute::IfName(n) = a {
                    names.insert(l.header.index, n);
                }
            }
        }
    })?;
    let name = |i: u32| names.get(&i).cloned().unwrap_or_default();
    let mut t = KernelTables::default();
    let mut am = AddressMessage::default();
    am.header.family = AddressFamily::Inet;
    dump(RouteNetlinkMessage::GetAddress(am), |m| {
        if let RouteNetlinkMessage::NewAddress(a) = m {
            let local = a.attributes.iter().find_map(|x| match x {
                AddressAttribute::Local(IpAddr::V4(v)) => Some(*v),
                _ => None,
            });
            let addr = local.or_else(|| {
                a.attributes.iter().find_map(|x| match x {
                    AddressAttribute::Address(IpAddr::V4(v)) => Some(*v),
                    _ => None,
                })
            });
            if let Some(Ok(net)) = addr.map(|v| Ipv4Net::new(v, a.header.prefix_len)) {
                t.addresses.push((name(a.header.index), net));
            }
        }
    })?;
    let mut rm = RouteMessage::default();
    rm.header.address_family = AddressFamily::Inet;
    dump(RouteNetlinkMessage::GetRoute(rm), |m| {
        if let RouteNetlinkMessage::NewRoute(r) = m {
            let mut dst = Ipv4Addr::UNSPECIFIED;
            let (mut oif, mut gateway, mut table) = (None, None, u32::from(r.header.table));
            for a in &r.attributes {
                match a {
                    RouteAttribute::Destination(RouteAddress::Inet(v)) => dst = *v,
                    RouteAttribute::Gateway(RouteAddress::Inet(v)) => gateway = Some(*v),
                    RouteAttribute::Oif(i) => oif = Some(*i),
                    RouteAttribute::Table(x) => table = *x,
                    _ => {}
                }
            }
            if let (Some(oif), Ok(dst)) =
                (oif, Ipv4Net::new(dst, r.header.destination_prefix_length))
            {
                t.routes.push(Route {
                    dev: name(oif),
                    dst,
                    gateway,
                    table,
                });
            }
        }
    })?;
    let mut nm = NeighbourMessage::default();
    nm.header.family = AddressFamily::Inet;
    dump(RouteNetlinkMessage::GetNeighbour(nm), |m| {
        if let RouteNetlinkMessage::NewNeighbour(n) = m {
            if matches!(
                n.header.state,
                NeighbourState::Incomplete | NeighbourState::Failed
            ) {
                return;
            }
            let mut ip = None;
            let mut mac = None;
            for a in &n.attributes {
                match a {
                    NeighbourAttribute::Destination(NeighbourAddress::Inet(v)) => ip = Some(*v),
                    NeighbourAttribute::LinkLayerAddress(l) => {
                        mac = <[u8; 6]>::try_from(l.as_slice()).ok().map(MacAddr);
                    }
                    _ => {}
                }
            }
            if let Some(ip) = ip {
                t.neighbours.push(Neighbour {
                    dev: name(n.header.ifindex),
                    ip,
                    mac,
                });
            }
        }
    })?;
    Ok(t)
}
