//! Unit tests of the receive-side checks: [`AllowedSources`] and [`admit`].

use std::net::IpAddr;
use std::time::Instant;

use bytes::Bytes;

use super::*;
use crate::framing::{FrameHeader, FrameType};
use crate::virtio::{VirtioHdr, F_NEEDS_CSUM, GSO_TCPV4};

fn config(extra: &str) -> Config {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/mmsg-branch1.toml"
    ))
    .unwrap();
    let text = text.replace(
        "lan_prefixes = [\"198.19.2.0/24\"]",
        &format!("lan_prefixes = [\"198.19.2.0/24\"{extra}]"),
    );
    Config::parse(&text).unwrap()
}

fn b(n: u8) -> BranchId {
    BranchId::new(n).unwrap()
}

/// A 28-byte UDP packet from `src` to branch 1.
fn udp_from(src: [u8; 4]) -> Vec<u8> {
    let mut p = vec![0u8; 28];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&28u16.to_be_bytes());
    p[9] = 17;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&[198, 19, 1, 10]);
    p
}

fn frame(ty: FrameType, seq: Option<u32>, payload: Vec<u8>) -> Frame {
    Frame {
        header: FrameHeader {
            frame_type: ty,
            class: Class::TypeII,
            seq,
            payload_len: payload.len() as u32,
        },
        payload: Bytes::from(payload),
    }
}

#[test]
fn a_branch_may_send_only_from_its_lan() {
    let s = AllowedSources::from_config(&config(""));
    let ip = |a: &str| a.parse::<IpAddr>().unwrap();
    assert!(s.allows(b(2), ip("198.19.2.1")));
    assert!(s.allows(b(2), ip("198.19.2.255")));
    assert!(!s.allows(b(2), ip("198.19.3.1")));
    assert!(!s.allows(b(2), ip("198.19.1.10")), "our own LAN");
    assert!(
        !s.allows(b(3), ip("198.19.2.1")),
        "branch 3 is not configured"
    );
    assert!(
        !s.allows(b(2), ip("2001:db8::1")),
        "no IPv6 prefix: no IPv6"
    );
    assert_eq!(s.check(b(2), &udp_from([198, 19, 2, 7])), Ok(()));
    assert_eq!(
        s.check(b(2), &udp_from([198, 19, 1, 7])),
        Err(PacketDrop::SpoofedSource)
    );
    assert_eq!(s.check(b(2), &[0x45, 0, 0]), Err(PacketDrop::Malformed));
    assert_eq!(s.check(b(2), &[]), Err(PacketDrop::Malformed));
    assert_eq!(s.check(b(2), &[0x20; 40]), Err(PacketDrop::Malformed));
}

#[test]
fn ipv6_passes_only_from_a_configured_ipv6_prefix() {
    let mut v6 = vec![0u8; 40];
    v6[0] = 0x60;
    v6[8..24].copy_from_slice(
        &"2001:db8:2::5"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    let without = AllowedSources::from_config(&config(""));
    assert_eq!(without.check(b(2), &v6), Err(PacketDrop::SpoofedSource));
    let with = AllowedSources::from_config(&config(", \"2001:db8:2::/48\""));
    assert_eq!(with.check(b(2), &v6), Ok(()));
    v6[8..24].copy_from_slice(
        &"2001:db8:3::5"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    assert_eq!(with.check(b(2), &v6), Err(PacketDrop::SpoofedSource));
    assert_eq!(with.check(b(2), &v6[..20]), Err(PacketDrop::Malformed));
}

#[test]
fn admit_checks_the_source_then_the_virtio_header() {
    let s = AllowedSources::from_config(&config(""));
    let good = udp_from([198, 19, 2, 7]);
    assert_eq!(
        admit(&s, b(2), &frame(FrameType::Ip, None, good.clone())),
        Ok(())
    );
    let spoofed = frame(FrameType::Ip, Some(3), udp_from([198, 19, 9, 7]));
    assert_eq!(admit(&s, b(2), &spoofed), Err(PacketDrop::SpoofedSource));
    // A GSO request on a 28-byte UDP packet claiming TCPv4.
    let bad = VirtioHdr {
        flags: F_NEEDS_CSUM,
        gso_type: GSO_TCPV4,
        gso_size: 1400,
        csum_start: 20,
        csum_offset: 16,
        ..VirtioHdr::default()
    };
    let mut p = bad.to_bytes().to_vec();
    p.extend_from_slice(&good);
    assert_eq!(
        admit(&s, b(2), &frame(FrameType::IpVirtio, None, p)),
        Err(PacketDrop::BadVirtio)
    );
    let mut p = vec![0u8; 10];
    p.extend_from_slice(&good);
    assert_eq!(
        admit(&s, b(2), &frame(FrameType::IpVirtio, None, p)),
        Ok(())
    );
    assert_eq!(
        admit(&s, b(2), &frame(FrameType::Keepalive, None, Vec::new())),
        Err(PacketDrop::Malformed)
    );
}

/// The single-threaded core drops spoofed frames, unsequenced and striped alike, before TUN.
#[test]
fn the_gateway_drops_spoofed_frames_before_tun_striped_or_not() {
    let now = Instant::now();
    let mut gw = Gateway::new(&config(""), false);
    let conn = ConnId::inbound(ConnKey {
        branch: b(2),
        group: PathGroupId::new(0).unwrap(),
        class: Class::TypeII,
        index: 0,
    });
    gw.handle_conn_up(conn, now);
    gw.handle_frame(
        conn,
        now,
        frame(FrameType::Ip, None, udp_from([198, 19, 2, 7])),
    );
    gw.handle_frame(
        conn,
        now,
        frame(FrameType::Ip, None, udp_from([198, 19, 1, 7])),
    );
    gw.handle_frame(
        conn,
        now,
        frame(FrameType::Ip, Some(0), udp_from([198, 19, 3, 7])),
    );
    gw.handle_frame(
        conn,
        now,
        frame(FrameType::Ip, Some(1), udp_from([198, 19, 2, 8])),
    );
    let mut srcs = Vec::new();
    while let Some(w) = gw.poll_tun_write() {
        srcs.push(w.ip[12..16].to_vec());
    }
    assert_eq!(srcs, vec![vec![198, 19, 2, 7], vec![198, 19, 2, 8]]);
    assert_eq!(gw.counters().drops(PacketDrop::SpoofedSource), 2);
}

/// A new config's prefixes take effect at [`Gateway::apply`].
#[test]
fn apply_rebuilds_the_source_table() {
    let now = Instant::now();
    let mut gw = Gateway::new(&config(""), false);
    let conn = ConnId::inbound(ConnKey {
        branch: b(2),
        group: PathGroupId::new(0).unwrap(),
        class: Class::TypeII,
        index: 0,
    });
    gw.handle_conn_up(conn, now);
    let p = udp_from([198, 19, 4, 1]);
    gw.handle_frame(conn, now, frame(FrameType::Ip, None, p.clone()));
    assert_eq!(gw.poll_tun_write(), None);
    gw.apply(&config(", \"198.19.4.0/24\""), now);
    gw.handle_frame(conn, now, frame(FrameType::Ip, None, p));
    assert!(gw.poll_tun_write().is_some());
}

#[test]
fn branches_above_15_may_send_from_their_lan() {
    // The 17-branch netns test found this table sized for 15 branches (issue #20).
    let mut c = config("");
    c.ports = "16384-32767".parse().unwrap();
    if let Some(r) = c.remote.first_mut() {
        r.id = 250;
    }
    let s = AllowedSources::from_config(&c);
    let ip = |a: &str| a.parse::<IpAddr>().unwrap();
    assert!(s.allows(b(250), ip("198.19.2.1")));
    assert!(!s.allows(b(17), ip("198.19.2.1")));
}
