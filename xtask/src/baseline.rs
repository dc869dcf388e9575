//! The single-path baseline of the paper's evaluation (seed 000 §V: "IP-in-IP tunneling between
//! MMSGs, only direct WAN-hop routing"). This kernel has no ipip or gre, so the baseline is a
//! kernel VXLAN tunnel between two gateways over one direct WAN hop (DESIGN §5).
//!
//! `cargo xtask testbed baseline up 1a>2b` creates `vxl0` in both gateways, sourced from the two
//! WAN addresses of that hop, numbers the tunnel 198.19.199.0/30 and routes each branch's LAN
//! prefix through it, so LAN hosts reach each other directly. `baseline down` removes it.

use anyhow::{bail, Context};

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

/// Removes the VXLAN baseline from every gateway of the testbed (idempotent).
pub fn down(prefix: &str) -> anyhow::Result<()> {
    let state = testbed::load_state(prefix)?;
    for b in &state.topology.branches {
        let ns = testbed::ns_gw(prefix, b.id);
        // Deleting the device removes its address and routes with it.
        sh::try_run("ip", &["-n", &ns, "link", "del", VXLAN_IF]);
    }
    Ok(())
}
