//! WAN ports behind NAT in the testbed (issue #20, docs/testbed.md "Ports behind NAT"): the
//! carrier (the `inet` namespace) source-NATs the connections a port with `nat = true` opens
//! to the router's own address on that port's link (198.18.(10b+k).1, a carrier-grade NAT's
//! public address), and drops every new connection towards the port: it can dial out, nobody can
//! dial it.
//!
//! The WAN emulator re-injects diverted packets through `emu0`: conntrack would see a packet
//! twice, once before and once after the emulator, the second time with the address already
//! translated. Packets coming back from `emu0` therefore get their own conntrack zone (1), where
//! no NAT rule applies and no new connection is refused; the NAT and the refusal act only in
//! zone 0, on the packet's first pass. `nf_conntrack_tcp_be_liberal` keeps conntrack from marking
//! MPTCP or reordered segments invalid (an invalid reply would not be translated back).

use std::fmt::Write as _;

use crate::topology::ResolvedPort;

/// The nftables table of the NAT (one per testbed, in `inet`).
pub const NAT_TABLE: &str = "mmsnat";

/// The ruleset for the ports of `ports` marked `nat`, with the emulator's TUN device `emu_tun`;
/// `None` when there is none (no table, no conntrack in `inet`).
pub fn ruleset(ports: &[ResolvedPort], emu_tun: &str) -> Option<String> {
    let nat: Vec<&ResolvedPort> = ports.iter().filter(|p| p.nat).collect();
    if nat.is_empty() {
        return None;
    }
    let mut s = format!("table ip {NAT_TABLE} {{\n");
    s.push_str(
        " chain from_emulator {\n  type filter hook prerouting priority raw; policy accept;\n",
    );
    let _ = writeln!(s, "  iifname \"{emu_tun}\" ct zone set 1");
    s.push_str(" }\n chain refuse {\n  type filter hook forward priority 0; policy accept;\n");
    for p in &nat {
        let _ = writeln!(s, "  ct zone 0 ip daddr {} ct state new drop", p.addr);
    }
    s.push_str(
        " }\n chain translate {\n  type nat hook postrouting priority srcnat; policy accept;\n",
    );
    for p in &nat {
        let _ = writeln!(s, "  ct zone 0 ip saddr {} snat to {}", p.addr, p.next_hop);
    }
    s.push_str(" }\n}\n");
    Some(s)
}

/// The sysctl `inet` needs with NAT (see the module docs).
pub const CONNTRACK_LIBERAL: &str = "net.netfilter.nf_conntrack_tcp_be_liberal=1";

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn only_ports_marked_nat_are_translated_and_refused() {
        let t = crate::topology::parse(
            "name = \"n\"\n[[branch]]\nid = 1\nwan = [{}]\n[[branch]]\nid = 2\nwan = [{ nat = true }, {}]\n",
        )
        .unwrap();
        let r = ruleset(&t.ports(), "emu0").unwrap();
        assert!(
            r.contains("ct zone 0 ip daddr 198.18.20.2 ct state new drop"),
            "{r}"
        );
        assert!(
            r.contains("ct zone 0 ip saddr 198.18.20.2 snat to 198.18.20.1"),
            "{r}"
        );
        assert!(r.contains("iifname \"emu0\" ct zone set 1"), "{r}");
        assert!(
            !r.contains("198.18.21.") && !r.contains("198.18.10."),
            "{r}"
        );
        let t = crate::topology::parse("name = \"n\"\n[[branch]]\nid = 1\nwan = [{}]\n").unwrap();
        assert_eq!(ruleset(&t.ports(), "emu0"), None);
    }
}
