//! Classifier tests: header parsing on crafted packets, LPM, rules, CE marking, and no panics on
//! arbitrary bytes.

use super::*;
use proptest::prelude::*;

/// IPv4 header (20 B) + 4 bytes of ports (for TCP/UDP) + padding to `len`.
fn v4(tos: u8, proto: u8, src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
    let mut p = vec![0u8; 28];
    p[0] = 0x45;
    p[1] = tos;
    p[2..4].copy_from_slice(&28u16.to_be_bytes());
    p[8] = 64;
    p[9] = proto;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&dport.to_be_bytes());
    let c = checksum(&p[..20]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p
}

fn checksum(h: &[u8]) -> u16 {
    let mut sum = 0u32;
    for (i, w) in h.chunks(2).enumerate() {
        if i != 5 {
            sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

fn v6(tc: u8, next: u8, exts: &[(u8, usize)], sport: u16, dport: u16) -> Vec<u8> {
    // exts: (next header written in this ext, its length in bytes)
    let mut p = vec![0u8; 40];
    p[0] = 0x60 | (tc >> 4);
    p[1] = tc << 4;
    p[6] = next;
    p[7] = 64;
    p[8..24].copy_from_slice(&"fd00::1".parse::<Ipv6Addr>().unwrap().octets());
    p[24..40].copy_from_slice(&"fd00:2::9".parse::<Ipv6Addr>().unwrap().octets());
    for &(nh, len) in exts {
        let mut e = vec![0u8; len];
        e[0] = nh;
        e[1] = (len / 8 - 1) as u8;
        p.extend_from_slice(&e);
    }
    p.extend_from_slice(&sport.to_be_bytes());
    p.extend_from_slice(&dport.to_be_bytes());
    p.extend_from_slice(&[0u8; 4]);
    let pl = (p.len() - 40) as u16;
    p[4..6].copy_from_slice(&pl.to_be_bytes());
    p
}

/// Not validated: remote 3's /24 inside remote 2's /23 is refused by validation since prefixes
/// of different branches must be disjoint, but the classifier's longest-prefix match is its own
/// contract and stays tested on it.
fn config() -> Config {
    toml::from_str::<Config>(
        r#"
branch_id = 1
lan_prefixes = ["198.19.1.0/24", "fd00::/64"]
[[wan]]
name = "wan0"
address = "198.18.10.2/24"
gateway = "198.18.10.1"
[[remote]]
id = 2
wan_addresses = ["198.18.20.2"]
lan_prefixes = ["198.19.2.0/23", "fd00:2::/64"]
[[remote]]
id = 3
wan_addresses = ["198.18.30.2"]
lan_prefixes = ["198.19.3.0/24"]
[classifier]
default_class = "type2"
[[classifier.rules]]
class = "type1"
dscp = [46]
[[classifier.rules]]
class = "type1"
ip_protocol = 6
dst_ports = [22, "5000-5010"]
[[classifier.rules]]
class = "type1"
src_prefixes = ["198.19.1.128/25"]
dst_prefixes = ["198.19.3.0/24"]
"#,
    )
    .unwrap()
}

#[test]
fn parses_ipv4_udp() {
    let p = v4(
        0xB8 | 0x02,
        17,
        [198, 19, 1, 10],
        [198, 19, 2, 20],
        1234,
        53,
    );
    let info = parse(&p).unwrap();
    assert_eq!(
        info.flow,
        FlowKey {
            src: "198.19.1.10".parse().unwrap(),
            dst: "198.19.2.20".parse().unwrap(),
            protocol: 17,
            src_port: 1234,
            dst_port: 53,
        }
    );
    assert_eq!(info.dscp, 46);
    assert_eq!(info.ecn, 2);
    assert!(info.has_ports && info.ect());
}

#[test]
fn ipv4_fragments_and_portless() {
    let mut p = v4(0, 17, [198, 19, 1, 10], [198, 19, 2, 20], 1234, 53);
    p[6] = 0x20; // more fragments
    let info = parse(&p).unwrap();
    assert_eq!(
        (info.flow.src_port, info.flow.dst_port, info.has_ports),
        (0, 0, false)
    );
    let icmp = v4(0, 1, [198, 19, 1, 10], [198, 19, 2, 20], 0x0800, 0);
    assert!(!parse(&icmp).unwrap().has_ports);
}

#[test]
fn ipv4_rejections() {
    let p = v4(0, 6, [1, 1, 1, 1], [2, 2, 2, 2], 1, 2);
    assert_eq!(parse(&[]), Err(ParseError::NotIp));
    assert_eq!(parse(&[0x55; 40]), Err(ParseError::NotIp));
    assert_eq!(parse(&p[..19]), Err(ParseError::Truncated));
    assert_eq!(parse(&p[..24]), Err(ParseError::Truncated)); // total length 28 > 24
    let mut short_ihl = p.clone();
    short_ihl[0] = 0x44;
    assert_eq!(parse(&short_ihl), Err(ParseError::BadHeaderLength));
    let mut no_ports = p.clone();
    no_ports[2..4].copy_from_slice(&22u16.to_be_bytes());
    assert_eq!(parse(&no_ports), Err(ParseError::TruncatedTransport));
    // Trailing bytes beyond the total length (TUN padding) are ignored.
    let mut padded = p.clone();
    padded.extend_from_slice(&[0xFF; 8]);
    assert_eq!(parse(&padded), parse(&p));
}

#[test]
fn parses_ipv6_with_extension_headers() {
    let p = v6(0xB8, 17, &[], 5000, 6000);
    let info = parse(&p).unwrap();
    assert_eq!(
        (info.flow.protocol, info.flow.src_port, info.flow.dst_port),
        (17, 5000, 6000)
    );
    assert_eq!(info.dscp, 46);
    // hop-by-hop (8 B) then destination options (16 B) then TCP.
    let p = v6(0, 0, &[(60, 8), (6, 16)], 22, 2222);
    let info = parse(&p).unwrap();
    assert_eq!(
        (info.flow.protocol, info.flow.src_port, info.flow.dst_port),
        (6, 22, 2222)
    );
    // Fragment header: no ports.
    let p = v6(0, 44, &[(17, 8)], 1, 2);
    let info = parse(&p).unwrap();
    assert_eq!((info.flow.protocol, info.has_ports), (17, false));
    // Too deep: classified without ports, not rejected.
    let exts: Vec<(u8, usize)> = std::iter::repeat_n((60u8, 8usize), 12)
        .chain([(6, 8)])
        .collect();
    let info = parse(&v6(0, 60, &exts, 1, 2)).unwrap();
    assert!(!info.has_ports);
    // Truncated payload length.
    let p = v6(0, 17, &[], 1, 2);
    assert_eq!(parse(&p[..p.len() - 1]), Err(ParseError::Truncated));
}

#[test]
fn longest_prefix_match_picks_the_branch() {
    let c = Classifier::new(&config());
    let b = |s: &str| c.route(s.parse().unwrap()).map(BranchId::get);
    assert_eq!(b("198.19.3.7"), Some(3)); // /24 beats /23
    assert_eq!(b("198.19.2.7"), Some(2));
    assert_eq!(b("198.19.4.1"), None);
    assert_eq!(b("8.8.8.8"), None);
    assert_eq!(b("fd00:2::1"), Some(2));
    assert_eq!(b("fd00:3::1"), None);
}

#[test]
fn classes_follow_rules_in_order() {
    let c = Classifier::new(&config());
    let cls = |p: Vec<u8>| {
        let r = c.classify(&p).unwrap();
        (r.class, r.dst_branch.map(BranchId::get))
    };
    // External destination: Type III whatever the rules say.
    assert_eq!(
        cls(v4(0xB8, 17, [198, 19, 1, 1], [8, 8, 8, 8], 1, 2)),
        (Class::TypeIII, None)
    );
    // DSCP EF: Type I.
    assert_eq!(
        cls(v4(0xB8, 17, [198, 19, 1, 1], [198, 19, 2, 1], 1, 2)),
        (Class::TypeI, Some(2))
    );
    // TCP to port 22 or 5000-5010: Type I; UDP to 22: default Type II.
    assert_eq!(
        cls(v4(0, 6, [198, 19, 1, 1], [198, 19, 2, 1], 40000, 22)),
        (Class::TypeI, Some(2))
    );
    assert_eq!(
        cls(v4(0, 6, [198, 19, 1, 1], [198, 19, 2, 1], 40000, 5010)),
        (Class::TypeI, Some(2))
    );
    assert_eq!(
        cls(v4(0, 6, [198, 19, 1, 1], [198, 19, 2, 1], 40000, 5011)),
        (Class::TypeII, Some(2))
    );
    assert_eq!(
        cls(v4(0, 17, [198, 19, 1, 1], [198, 19, 2, 1], 40000, 22)),
        (Class::TypeII, Some(2))
    );
    // Prefix rule: from the upper half of the LAN to branch 3.
    assert_eq!(
        cls(v4(0, 1, [198, 19, 1, 200], [198, 19, 3, 1], 0, 0)),
        (Class::TypeI, Some(3))
    );
    assert_eq!(
        cls(v4(0, 1, [198, 19, 1, 100], [198, 19, 3, 1], 0, 0)),
        (Class::TypeII, Some(3))
    );
    // A port rule never matches a fragment (no ports).
    let mut frag = v4(0, 6, [198, 19, 1, 1], [198, 19, 2, 1], 40000, 22);
    frag[6] = 0x20;
    assert_eq!(cls(frag), (Class::TypeII, Some(2)));
    // IPv6 works the same way.
    assert_eq!(cls(v6(0xB8, 17, &[], 1, 2)), (Class::TypeI, Some(2)));
}

#[test]
fn ce_marking_updates_the_checksum() {
    for ecn in [1u8, 2, 3] {
        let mut p = v4(0xB8 | ecn, 17, [198, 19, 1, 1], [198, 19, 2, 1], 1, 2);
        assert!(mark_ce(&mut p));
        assert_eq!(p[1], 0xB8 | 3);
        assert_eq!(u16::from_be_bytes([p[10], p[11]]), checksum(&p[..20]));
    }
    let mut not_ect = v4(0xB8, 17, [198, 19, 1, 1], [198, 19, 2, 1], 1, 2);
    let before = not_ect.clone();
    assert!(!mark_ce(&mut not_ect));
    assert_eq!(not_ect, before);
    let mut p6 = v6(0x02, 17, &[], 1, 2); // ECT(0)
    assert!(mark_ce(&mut p6));
    assert_eq!(parse(&p6).unwrap().ecn, 3);
    assert!(!mark_ce(&mut v6(0, 17, &[], 1, 2)));
    assert!(!mark_ce(&mut []));
    assert!(!mark_ce(&mut [0x45]));
}

proptest! {
    #[test]
    fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
        let c = Classifier::new(&config());
        let _ = c.classify(&bytes);
        let mut b = bytes.clone();
        let _ = mark_ce(&mut b);
    }

    #[test]
    fn mutated_headers_never_panic(i in 0usize..60, v in any::<u8>(), six in any::<bool>()) {
        let c = Classifier::new(&config());
        let mut p = if six { v6(0, 0, &[(6, 8)], 1, 2) } else { v4(0, 6, [198, 19, 1, 1], [198, 19, 2, 1], 1, 2) };
        let i = i % p.len();
        p[i] = v;
        if let Ok(r) = c.classify(&p) {
            prop_assert_eq!(r.dst_branch.is_none(), r.class == Class::TypeIII);
        }
    }

    /// Incremental checksum update equals a full recomputation.
    #[test]
    fn ce_checksum_matches(tos in any::<u8>(), id in any::<u16>(), ttl in any::<u8>()) {
        let mut p = v4(tos, 17, [198, 19, 1, 1], [198, 19, 2, 1], 1, 2);
        p[4..6].copy_from_slice(&id.to_be_bytes());
        p[8] = ttl;
        let c = checksum(&p[..20]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        let marked = mark_ce(&mut p);
        prop_assert_eq!(marked, tos & 3 != 0);
        prop_assert_eq!(u16::from_be_bytes([p[10], p[11]]), checksum(&p[..20]));
    }
}
