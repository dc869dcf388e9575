//! The traffic classifier (TC, seed 000 §II-A): Type I / II / III and the destination branch of an
//! inner IP packet read from TUN.
//!
//! - Type III: the inner destination is in no remote branch's LAN prefixes (external traffic). Such
//!   packets should never reach TUN (they are routed straight out a WAN port); the driver drops and
//!   counts any that do.
//! - Type I / II: the destination branch is the remote whose LAN prefix is the longest match for the
//!   inner destination. The class is that of the first configured rule that matches (DSCP, IP
//!   protocol, source/destination prefixes, source/destination ports), else the default class.
//!
//! Parsing accepts any bytes without panicking and returns a typed [`ParseError`] for what cannot be
//! classified (drop and count it). IPv4 and IPv6 are both supported: IPv6 extension headers
//! (hop-by-hop, routing, destination options, AH) are walked up to [`MAX_IPV6_EXT_HEADERS`] deep to
//! find the ports; fragments (either family) are classified without ports so all fragments of one
//! packet stay in one flow.
//!
//! Call order: [`Classifier::new`] once from the [`Config`]; [`Classifier::classify`] per packet;
//! [`mark_ce`] when the queue's AQM asks to mark instead of drop.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use thiserror::Error;

use crate::config::{Config, PortRange, Rule};
use crate::framing::be16;
use crate::{BranchId, Class};

/// Most IPv6 extension headers walked to find the transport header. Real traffic has 0–2; a packet
/// needing more is classified without ports (still safe, just a coarser flow).
pub const MAX_IPV6_EXT_HEADERS: usize = 8;

pub use crate::ip::has_ports;

/// Why a packet could not be classified (untrusted input from the LAN: drop and count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ParseError {
    /// Empty, or the version nibble is neither 4 nor 6.
    #[error("not an IP packet")]
    NotIp,
    /// Shorter than its fixed header, or than its own length fields say.
    #[error("truncated IP packet")]
    Truncated,
    /// IPv4 header length below 20 bytes or beyond the total length.
    #[error("invalid IPv4 header length")]
    BadHeaderLength,
    /// TCP/UDP/SCTP with fewer than 4 bytes of transport header (no ports).
    #[error("truncated transport header")]
    TruncatedTransport,
}

/// The 5-tuple of a flow. Ports are 0 for protocols without ports and for fragments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowKey {
    /// Inner source address.
    pub src: IpAddr,
    /// Inner destination address.
    pub dst: IpAddr,
    /// IP protocol (IPv6: the upper-layer next header).
    pub protocol: u8,
    /// Source port, or 0.
    pub src_port: u16,
    /// Destination port, or 0.
    pub dst_port: u16,
}

impl FlowKey {
    /// The same flow seen the other way (its replies, a TCP flow's ACKs).
    pub fn reversed(&self) -> FlowKey {
        FlowKey {
            src: self.dst,
            dst: self.src,
            protocol: self.protocol,
            src_port: self.dst_port,
            dst_port: self.src_port,
        }
    }
}

/// What the classifier reads from a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketInfo {
    /// The 5-tuple.
    pub flow: FlowKey,
    /// The DSCP (upper 6 bits of the TOS / traffic class byte).
    pub dscp: u8,
    /// The ECN field (lower 2 bits): 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE.
    pub ecn: u8,
    /// Whether the ports are known (a protocol with ports and not a fragment).
    pub has_ports: bool,
}

impl PacketInfo {
    /// Whether the packet is ECN-capable (ECT(0), ECT(1); CE too, it stays CE).
    pub fn ect(&self) -> bool {
        self.ecn != 0
    }
}

/// Parses the IP header (and the ports) of `packet`.
pub fn parse(packet: &[u8]) -> Result<PacketInfo, ParseError> {
    match packet.first().map(|b| b >> 4) {
        Some(4) => parse_v4(packet),
        Some(6) => parse_v6(packet),
        _ => Err(ParseError::NotIp),
    }
}

fn addr4(packet: &[u8], at: usize) -> Option<Ipv4Addr> {
    let b: [u8; 4] = packet.get(at..at + 4)?.try_into().ok()?;
    Some(Ipv4Addr::from(b))
}

fn addr6(packet: &[u8], at: usize) -> Option<Ipv6Addr> {
    let b: [u8; 16] = packet.get(at..at + 16)?.try_into().ok()?;
    Some(Ipv6Addr::from(b))
}

fn ports(packet: &[u8], l4: usize) -> Result<(u16, u16), ParseError> {
    match (be16(packet, l4), be16(packet, l4 + 2)) {
        (Some(s), Some(d)) => Ok((s, d)),
        _ => Err(ParseError::TruncatedTransport),
    }
}

fn parse_v4(packet: &[u8]) -> Result<PacketInfo, ParseError> {
    let (Some(&vihl), Some(&tos), Some(total), Some(frag), Some(&protocol), Some(src), Some(dst)) = (
        packet.first(),
        packet.get(1),
        be16(packet, 2),
        be16(packet, 6),
        packet.get(9),
        addr4(packet, 12),
        addr4(packet, 16),
    ) else {
        return Err(ParseError::Truncated);
    };
    let ihl = usize::from(vihl & 0x0F) * 4;
    let total = usize::from(total);
    if ihl < 20 || ihl > total {
        return Err(ParseError::BadHeaderLength);
    }
    if total > packet.len() {
        return Err(ParseError::Truncated);
    }
    let packet = packet.get(..total).ok_or(ParseError::Truncated)?;
    // More-fragments flag or a non-zero offset: a fragment, classified without ports.
    let fragment = frag & 0x3FFF != 0;
    let with_ports = has_ports(protocol) && !fragment;
    let (src_port, dst_port) = if with_ports {
        ports(packet, ihl)?
    } else {
        (0, 0)
    };
    Ok(PacketInfo {
        flow: FlowKey {
            src: IpAddr::V4(src),
            dst: IpAddr::V4(dst),
            protocol,
            src_port,
            dst_port,
        },
        dscp: tos >> 2,
        ecn: tos & 0x03,
        has_ports: with_ports,
    })
}

fn parse_v6(packet: &[u8]) -> Result<PacketInfo, ParseError> {
    let (Some(&b0), Some(&b1), Some(payload_len), Some(&next), Some(src), Some(dst)) = (
        packet.first(),
        packet.get(1),
        be16(packet, 4),
        packet.get(6),
        addr6(packet, 8),
        addr6(packet, 24),
    ) else {
        return Err(ParseError::Truncated);
    };
    let total = 40 + usize::from(payload_len);
    if total > packet.len() {
        return Err(ParseError::Truncated);
    }
    let packet = packet.get(..total).ok_or(ParseError::Truncated)?;
    let tc = ((b0 & 0x0F) << 4) | (b1 >> 4);
    let mut protocol = next;
    let mut at = 40usize;
    let mut known = true; // whether `protocol` is the upper layer (ports may be read)
    let mut fragment = false;
    for _ in 0..=MAX_IPV6_EXT_HEADERS {
        let len = match protocol {
            // Hop-by-hop, routing, destination options: (hdr ext len + 1) * 8.
            0 | 43 | 60 => packet.get(at + 1).map(|&l| (usize::from(l) + 1) * 8),
            // AH: (payload len + 2) * 4.
            51 => packet.get(at + 1).map(|&l| (usize::from(l) + 2) * 4),
            // Fragment header: fixed 8 bytes; ports only in the first fragment, so use none.
            44 => {
                fragment = true;
                Some(8)
            }
            _ => break,
        };
        let (Some(len), Some(&nh)) = (len, packet.get(at)) else {
            return Err(ParseError::Truncated);
        };
        protocol = nh;
        at += len;
        known = at <= packet.len();
        if !known {
            return Err(ParseError::Truncated);
        }
    }
    if matches!(protocol, 0 | 43 | 60 | 51 | 44) {
        // Deeper than MAX_IPV6_EXT_HEADERS: classify without ports.
        known = false;
    }
    let with_ports = known && has_ports(protocol) && !fragment;
    let (src_port, dst_port) = if with_ports {
        ports(packet, at)?
    } else {
        (0, 0)
    };
    Ok(PacketInfo {
        flow: FlowKey {
            src: IpAddr::V6(src),
            dst: IpAddr::V6(dst),
            protocol,
            src_port,
            dst_port,
        },
        dscp: tc >> 2,
        ecn: tc & 0x03,
        has_ports: with_ports,
    })
}

/// Sets ECN to CE (congestion experienced) in an ECN-capable packet, updating the IPv4 header
/// checksum incrementally (RFC 1624). Returns `false`, changing nothing, for Not-ECT or non-IP
/// packets (then the AQM must drop instead).
pub fn mark_ce(packet: &mut [u8]) -> bool {
    match packet.first().map(|b| b >> 4) {
        Some(4) => {
            let (Some(&tos), Some(csum)) = (packet.get(1), be16(packet, 10)) else {
                return false;
            };
            if tos & 0x03 == 0 {
                return false;
            }
            let Some(&b0) = packet.first() else {
                return false;
            };
            let old = u16::from_be_bytes([b0, tos]);
            let new = old | 0x0003;
            // RFC 1624 eq. 3: HC' = ~(~HC + ~m + m').
            let mut sum = u32::from(!csum) + u32::from(!old) + u32::from(new);
            sum = (sum & 0xFFFF) + (sum >> 16);
            sum = (sum & 0xFFFF) + (sum >> 16);
            let csum = !(sum as u16);
            if let Some(t) = packet.get_mut(1) {
                *t = tos | 0x03;
            }
            if let Some(c) = packet.get_mut(10..12) {
                c.copy_from_slice(&csum.to_be_bytes());
            }
            true
        }
        Some(6) => match packet.get_mut(1) {
            // The ECN bits are bits 4..6 of byte 1.
            Some(b1) if *b1 & 0x30 != 0 => {
                *b1 |= 0x30;
                true
            }
            _ => false,
        },
        _ => false,
    }
}

/// The outcome for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Classification {
    /// Type I or II for inter-branch traffic, Type III otherwise.
    pub class: Class,
    /// The destination branch (`None` for Type III).
    pub dst_branch: Option<BranchId>,
    /// The parsed header fields.
    pub info: PacketInfo,
}

/// A compiled classifier rule.
#[derive(Debug, Clone)]
struct CompiledRule {
    class: Class,
    /// Bit d set: DSCP d matches; 0 = any.
    dscp: u64,
    protocol: Option<u8>,
    src_prefixes: Vec<IpNet>,
    dst_prefixes: Vec<IpNet>,
    src_ports: Vec<PortRange>,
    dst_ports: Vec<PortRange>,
}

impl CompiledRule {
    fn new(rule: &Rule) -> Self {
        let dscp = rule
            .dscp
            .iter()
            .filter(|d| **d < 64)
            .fold(0u64, |m, d| m | (1u64 << d));
        CompiledRule {
            class: rule.class,
            dscp,
            protocol: rule.ip_protocol,
            src_prefixes: rule.src_prefixes.clone(),
            dst_prefixes: rule.dst_prefixes.clone(),
            src_ports: rule.src_ports.clone(),
            dst_ports: rule.dst_ports.clone(),
        }
    }

    fn matches(&self, p: &PacketInfo) -> bool {
        let f = &p.flow;
        let ports_ok = |ranges: &[PortRange], port: u16| {
            ranges.is_empty() || (p.has_ports && ranges.iter().any(|r| r.contains(port)))
        };
        let nets_ok =
            |nets: &[IpNet], a: &IpAddr| nets.is_empty() || nets.iter().any(|n| n.contains(a));
        (self.dscp == 0 || self.dscp & (1u64 << (p.dscp & 0x3F)) != 0)
            && self.protocol.is_none_or(|pr| pr == f.protocol)
            && nets_ok(&self.src_prefixes, &f.src)
            && nets_ok(&self.dst_prefixes, &f.dst)
            && ports_ok(&self.src_ports, f.src_port)
            && ports_ok(&self.dst_ports, f.dst_port)
    }
}

/// The TC: remote prefixes for the destination branch, rules for the class.
#[derive(Debug, Clone)]
pub struct Classifier {
    /// (prefix, branch), longest prefix first: the first containing entry is the longest match.
    /// At most 14 remotes × `MAX_PREFIXES_PER_BRANCH` entries.
    routes: Vec<(IpNet, BranchId)>,
    rules: Vec<CompiledRule>,
    default_class: Class,
}

impl Classifier {
    /// Builds the classifier from a validated config (invalid remote ids are skipped).
    pub fn new(config: &Config) -> Self {
        let mut routes: Vec<(IpNet, BranchId)> = config
            .remote
            .iter()
            .filter_map(|r| BranchId::new(r.id).ok().map(|b| (r, b)))
            .flat_map(|(r, b)| r.lan_prefixes.iter().map(move |n| (n.trunc(), b)))
            .collect();
        // Stable: equal lengths keep config order.
        routes.sort_by_key(|(n, _)| std::cmp::Reverse(n.prefix_len()));
        Classifier {
            routes,
            rules: config
                .classifier
                .rules
                .iter()
                .map(CompiledRule::new)
                .collect(),
            default_class: config.classifier.default_class,
        }
    }

    /// The remote branch whose LAN prefix is the longest match for `dst`.
    pub fn route(&self, dst: IpAddr) -> Option<BranchId> {
        self.routes
            .iter()
            .find(|(net, _)| net.contains(&dst))
            .map(|(_, b)| *b)
    }

    /// Classifies one inner IP packet (for a virtio frame, the bytes after the virtio header).
    pub fn classify(&self, packet: &[u8]) -> Result<Classification, ParseError> {
        let info = parse(packet)?;
        Ok(self.classify_info(info))
    }

    /// Classifies already-parsed header fields.
    pub fn classify_info(&self, info: PacketInfo) -> Classification {
        let Some(dst_branch) = self.route(info.flow.dst) else {
            return Classification {
                class: Class::TypeIII,
                dst_branch: None,
                info,
            };
        };
        let class = self
            .rules
            .iter()
            .find(|r| r.matches(&info))
            .map_or(self.default_class, |r| r.class);
        Classification {
            class,
            dst_branch: Some(dst_branch),
            info,
        }
    }
}

#[cfg(test)]
mod tests;

/// The invariants the `classifier` fuzz target and the corpus replay test check on arbitrary input;
/// panics (an assertion) when one is broken. Not for production use.
///
/// - [`parse`] never panics; [`mark_ce`] never panics.
/// - `mark_ce` changes nothing unless it returns `true`, and then only the ECN bits (and the IPv4
///   checksum): the packet parses the same, with ECN = CE.
#[doc(hidden)]
pub fn fuzz_check(data: &[u8]) {
    let before = parse(data);
    let mut marked = data.to_vec();
    if mark_ce(&mut marked) {
        let after = parse(&marked);
        match (before, after) {
            (Ok(b), Ok(a)) => {
                assert_eq!(a.flow, b.flow, "marking keeps the flow");
                assert_eq!(a.dscp, b.dscp, "marking keeps the DSCP");
                assert_eq!(a.ecn, 3, "marked packets are CE");
            }
            (b, a) => assert_eq!(b.is_ok(), a.is_ok(), "marking keeps parseability"),
        }
        let changed: Vec<usize> = data
            .iter()
            .zip(&marked)
            .enumerate()
            .filter(|(_, (x, y))| x != y)
            .map(|(i, _)| i)
            .collect();
        assert!(
            changed.iter().all(|i| matches!(i, 1 | 10 | 11)),
            "only the ECN bits and the IPv4 checksum change: {changed:?}"
        );
    } else {
        assert_eq!(marked.as_slice(), data, "an unmarked packet is untouched");
    }
}
