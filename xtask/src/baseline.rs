//! The single-path baseline of the paper's evaluation (seed 000 §V: "IP-in-IP tunneling between
//! MMSGs, only direct WAN-hop routing"). This kernel has no ipip or gre, so the baseline is a
//! kernel VXLAN tunnel between two gateways over one direct WAN hop (DESIGN §5).
//!
//! `cargo xtask testbed baseline up 1a>2b` creates `vxl0` in both gateways, sourced from the two
//! WAN addresses of that hop, numbers the tunnel 198.19.199.0/30 and routes each branch's LAN
//! prefix through it, so LAN hosts reach each other directly. `baseline down` removes it.
//!
//! Experiments ([`up_round_robin`]) build one tunnel per path group, over that group's direct
//! member hop, and spread the end-to-end connections over them round robin, as the paper does:
//! "when path group 2 is selected for an end-to-end connection, only the direct hop routing 1a>2b
//! is used for IP-in-IP tunneling". It works beside a running `mmsg` (with or without OVS): the
//! tunnel's outer packets leave from the WAN address like any Type III packet, and policy routing
//! by connection mark takes the LAN traffic away from the IPoMP tunnel while the baseline is up.

use anyhow::{bail, ensure, Context};

use crate::sh;
use crate::testbed::{self, State};
use crate::topology::{self, PortKind, PortRef, ResolvedPort};

/// Tunnel interface name inside the gateways.
pub const VXLAN_IF: &str = "vxl0";
/// VXLAN network identifier.
const VNI: u32 = 4242;
/// IANA VXLAN port.
const VXLAN_PORT: u16 = 4789;
/// Inner MTU: 1500 minus 50 bytes of outer IPv4 + UDP + VXLAN + Ethernet headers.
const INNER_MTU: u32 = 1450;

/// Parses a direct hop like `1a>2b` into its two ports.
pub fn parse_hop(state: &State, hop: &str) -> anyhow::Result<(ResolvedPort, ResolvedPort)> {
    let (a, b) = hop
        .split_once('>')
        .with_context(|| format!("{hop:?} is not a direct hop like `1a>2b`"))?;
    let ports = state.topology.ports();
    let find = |s: &str| -> anyhow::Result<ResolvedPort> {
        let r = PortRef::parse(s).with_context(|| format!("{s:?} is not a port like `1a`"))?;
        ports
            .iter()
            .find(|p| p.id == r)
            .cloned()
            .with_context(|| format!("port {r} does not exist in testbed {}", state.prefix))
    };
    let (pa, pb) = (find(a)?, find(b)?);
    if pa.id.branch == pb.id.branch {
        bail!("{hop}: both ends are in branch {}", pa.id.branch);
    }
    if pa.kind != pb.kind || (pa.kind == PortKind::Leased && pa.leased_line != pb.leased_line) {
        bail!("{hop}: the two ports are not on the same network");
    }
    Ok((pa, pb))
}

/// Builds the VXLAN baseline over direct hop `hop` (e.g. `1a>2b`).
pub fn up(prefix: &str, hop: &str) -> anyhow::Result<()> {
    let state = testbed::load_state(prefix)?;
    let (a, b) = parse_hop(&state, hop)?;
    let ends = [(&a, &b, 1u8, 2u8), (&b, &a, 2u8, 1u8)];
    for (local, remote, me, peer) in ends {
        let ns = testbed::ns_gw(prefix, local.id.branch);
        sh::ip_batch(
            &ns,
            &[
                format!(
                    "link add {VXLAN_IF} type vxlan id {VNI} local {} remote {} dstport {VXLAN_PORT} dev {}",
                    local.addr, remote.addr, local.gw_if
                ),
                format!("link set {VXLAN_IF} mtu {INNER_MTU} up"),
                format!("addr add 198.19.199.{me}/30 dev {VXLAN_IF}"),
                format!(
                    "route add {}/24 via 198.19.199.{peer} dev {VXLAN_IF}",
                    topology::lan_addr(remote.id.branch, 0)
                ),
            ],
        )
        .with_context(|| format!("baseline tunnel in {ns}"))?;
    }
    Ok(())
}

/// Removes the VXLAN baseline from every gateway of the testbed (idempotent): the single tunnel
/// of `baseline up` and the round-robin tunnels of [`up_round_robin`] with their rules.
pub fn down(prefix: &str) -> anyhow::Result<()> {
    let state = testbed::load_state(prefix)?;
    for b in &state.topology.branches {
        let ns = testbed::ns_gw(prefix, b.id);
        // Deleting the device removes its address and routes with it.
        sh::try_run("ip", &["-n", &ns, "link", "del", VXLAN_IF]);
        for i in 1..=MAX_RR_TUNNELS {
            let dev = rr_dev(i);
            sh::try_run("ip", &["-n", &ns, "link", "del", &dev]);
            let mark = format!("{:#x}", rr_mark(i));
            while sh::try_run("ip", &["-n", &ns, "rule", "del", "fwmark", &mark]) {}
        }
        sh::try_run("nft", &["-n", &ns, "delete", "table", "ip", RR_TABLE]);
    }
    Ok(())
}

/// Most round-robin tunnels (one per path group).
pub const MAX_RR_TUNNELS: u8 = 16;
/// nftables table of the round-robin baseline.
const RR_TABLE: &str = "mms_baseline";
/// Policy rule preference: before `mmsg`'s rules and the main table.
const RR_RULE_PREF: u32 = 900;

fn rr_dev(i: u8) -> String {
    format!("vxl{i}")
}

/// The fwmark (and conntrack mark) of tunnel `i` (1-based): 0x4d01, 0x4d02, ...
fn rr_mark(i: u8) -> u32 {
    0x4d00 + u32::from(i)
}

/// Builds one VXLAN tunnel per direct hop in `hops` (e.g. `["1a>2a", "1a>2b"]`, all between the
/// same two branches) and spreads new connections from one LAN to the other over them round robin
/// (nftables `numgen inc`, kept per connection with a conntrack mark, so a connection stays on
/// its tunnel; replies follow the tunnel their connection arrived on). TCP MSS is clamped to the
/// tunnel's MTU.
pub fn up_round_robin(prefix: &str, hops: &[String]) -> anyhow::Result<()> {
    let state = testbed::load_state(prefix)?;
    ensure!(
        !hops.is_empty() && hops.len() <= usize::from(MAX_RR_TUNNELS),
        "1..={MAX_RR_TUNNELS} hops"
    );
    let resolved = hops
        .iter()
        .map(|h| parse_hop(&state, h))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let (b1, b2) = match resolved.first() {
        Some((a, b)) => (a.id.branch, b.id.branch),
        None => bail!("no hops"),
    };
    for (a, b) in &resolved {
        ensure!(
            a.id.branch == b1 && b.id.branch == b2,
            "every hop must go from branch {b1} to branch {b2}"
        );
    }
    let n = resolved.len();
    for (me, peer) in [(b1, b2), (b2, b1)] {
        let ns = testbed::ns_gw(prefix, me);
        let peer_lan = format!("{}/24", topology::lan_addr(peer, 0));
        let mut lines = Vec::new();
        let mut marks = Vec::new();
        for (i, (a, b)) in resolved.iter().enumerate() {
            // i < MAX_RR_TUNNELS (checked above).
            let idx = u8::try_from(i + 1).unwrap_or(MAX_RR_TUNNELS);
            let (local, remote) = if me == b1 { (a, b) } else { (b, a) };
            let dev = rr_dev(idx);
            let mark = rr_mark(idx);
            let table = 300 + u32::from(idx);
            let net = 4 * u32::from(idx);
            let (mine, theirs) = if me == b1 {
                (net + 1, net + 2)
            } else {
                (net + 2, net + 1)
            };
            lines.extend([
                format!(
                    "link add {dev} type vxlan id {} local {} remote {} dstport {}",
                    VNI + u32::from(idx),
                    local.addr,
                    remote.addr,
                    VXLAN_PORT + u16::from(idx)
                ),
                format!("link set {dev} mtu {INNER_MTU} up"),
                format!("addr add 198.19.198.{mine}/30 dev {dev}"),
                format!("route add {peer_lan} via 198.19.198.{theirs} dev {dev} table {table}"),
                format!("rule add fwmark {mark:#x} lookup {table} pref {RR_RULE_PREF}"),
            ]);
            marks.push((dev, mark));
        }
        sh::ip_batch(&ns, &lines).with_context(|| format!("baseline tunnels in {ns}"))?;
        // New connections from our LAN: round robin over the tunnels (the initiating side only,
        // b1). Connections arriving from a tunnel: marked with that tunnel. Every packet then
        // carries its connection's mark into routing.
        let mut rules = vec![
            format!("table ip {RR_TABLE} {{"),
            "  chain pre {".to_owned(),
            "    type filter hook prerouting priority mangle; policy accept;".to_owned(),
        ];
        if me == b1 {
            let map = marks
                .iter()
                .enumerate()
                .map(|(i, (_, m))| format!("{i} : {m:#x}"))
                .collect::<Vec<_>>()
                .join(", ");
            rules.push(format!(
                "    ct state new ip daddr {peer_lan} ct mark set numgen inc mod {n} map {{ {map} }}"
            ));
        }
        for (dev, m) in &marks {
            rules.push(format!(
                "    ct state new iifname \"{dev}\" ct mark set {m:#x}"
            ));
        }
        rules.extend(
            [
                "    meta mark set ct mark",
                "  }",
                "  chain clamp {",
                "    type filter hook forward priority mangle; policy accept;",
                "    tcp flags syn tcp option maxseg size set rt mtu",
                "  }",
                "}",
            ]
            .map(str::to_owned),
        );
        let ruleset = rules.join("\n") + "\n";
        sh::nft(&ns, &ruleset).with_context(|| format!("baseline nftables in {ns}"))?;
    }
    Ok(())
}
