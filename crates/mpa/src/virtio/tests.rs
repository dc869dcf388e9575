#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use proptest::prelude::*;

use super::*;

/// An IPv4 (or IPv6) packet with a TCP (`proto` 6, data offset `doff` words) or UDP header and
/// `payload` bytes, length fields consistent.
fn packet(v4: bool, proto: u8, doff: u8, payload: usize) -> Vec<u8> {
    let l4 = if proto == PROTO_TCP {
        usize::from(doff) * 4
    } else {
        UDP_HDR_LEN
    };
    let mut p = if v4 {
        let total = 20 + l4 + payload;
        let mut h = vec![0u8; 20];
        h[0] = 0x45;
        h[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        h[6] = 0x40; // DF
        h[8] = 64;
        h[9] = proto;
        h
    } else {
        let mut h = vec![0u8; 40];
        h[0] = 0x60;
        h[4..6].copy_from_slice(&((l4 + payload) as u16).to_be_bytes());
        h[6] = proto;
        h[7] = 64;
        h
    };
    let mut t = vec![0u8; l4];
    if proto == PROTO_TCP {
        t[12] = doff << 4;
    }
    p.extend_from_slice(&t);
    p.resize(p.len() + payload, 0xAB);
    p
}

/// The header Linux's `virtio_net_hdr_from_skb` writes for a packet read from TUN: all zero,
/// then for GSO `hdr_len` = the linear length, `gso_size` and the type; for a partial checksum
/// `NEEDS_CSUM`, `csum_start` = the transport header, `csum_offset` = its checksum field.
fn kernel_hdr(
    v4: bool,
    proto: u8,
    pkt: &[u8],
    gso_size: u16,
    ecn: bool,
    partial: bool,
) -> VirtioHdr {
    let mut h = VirtioHdr::default();
    let l3 = if v4 { 20 } else { 40 };
    if gso_size > 0 {
        h.gso_type = match (proto, v4) {
            (PROTO_TCP, true) => GSO_TCPV4,
            (PROTO_TCP, false) => GSO_TCPV6,
            _ => GSO_UDP_L4,
        } | if ecn { GSO_ECN } else { 0 };
        h.gso_size = gso_size;
        h.hdr_len = pkt.len().min(256) as u16;
    }
    if partial || gso_size > 0 {
        h.flags = F_NEEDS_CSUM;
        h.csum_start = l3;
        h.csum_offset = if proto == PROTO_TCP { 16 } else { 6 };
    }
    h
}

#[test]
fn no_work_passes() {
    let p = packet(true, PROTO_TCP, 5, 100);
    assert_eq!(validate(&[0; 10], &p), Ok(()));
    let dv = VirtioHdr {
        flags: F_DATA_VALID,
        ..VirtioHdr::default()
    };
    assert_eq!(validate(&dv.to_bytes(), &p), Ok(()));
    // Even a non-IP packet, when nothing is asked of the kernel.
    assert_eq!(validate(&[0; 10], &[0x00, 1, 2]), Ok(()));
}

#[test]
fn truncated_and_unknown_bits_are_refused() {
    let p = packet(true, PROTO_TCP, 5, 100);
    assert_eq!(validate(&[0; 9], &p), Err(VirtioError::Truncated));
    let h = |flags, gso_type| {
        VirtioHdr {
            flags,
            gso_type,
            ..VirtioHdr::default()
        }
        .to_bytes()
    };
    assert_eq!(validate(&h(0x04, 0), &p), Err(VirtioError::Flags)); // RSC_INFO
    assert_eq!(validate(&h(0x80, 0), &p), Err(VirtioError::Flags));
    assert_eq!(validate(&h(0, GSO_UDP), &p), Err(VirtioError::GsoType));
    assert_eq!(validate(&h(0, 0x07), &p), Err(VirtioError::GsoType));
    assert_eq!(validate(&h(0, GSO_ECN), &p), Err(VirtioError::GsoType));
    assert_eq!(
        validate(&h(0, GSO_UDP_L4 | GSO_ECN), &p),
        Err(VirtioError::GsoType)
    );
}

#[test]
fn tso_from_the_kernel_passes_and_its_corruptions_do_not() {
    let p = packet(true, PROTO_TCP, 8, 20_000);
    let good = kernel_hdr(true, PROTO_TCP, &p, 1448, true, true);
    assert_eq!(validate(&good.to_bytes(), &p), Ok(()));
    let bad = |f: &dyn Fn(&mut VirtioHdr)| {
        let mut h = good;
        f(&mut h);
        validate(&h.to_bytes(), &p)
    };
    assert_eq!(bad(&|h| h.gso_size = 0), Err(VirtioError::GsoSize));
    assert_eq!(bad(&|h| h.gso_size = 0xFFFF), Err(VirtioError::GsoSize));
    // 20,000 bytes in 100-byte segments: 200 > 128 segments.
    assert_eq!(bad(&|h| h.gso_size = 100), Err(VirtioError::GsoSize));
    assert_eq!(bad(&|h| h.flags = 0), Err(VirtioError::Csum));
    assert_eq!(bad(&|h| h.csum_offset = 6), Err(VirtioError::Csum));
    assert_eq!(bad(&|h| h.csum_start = 24), Err(VirtioError::Csum));
    assert_eq!(bad(&|h| h.csum_start = 0xFFFF), Err(VirtioError::Csum));
    assert_eq!(bad(&|h| h.hdr_len = 0xFFFF), Err(VirtioError::HdrLen));
    // The type names the other IP version, or UDP on a TCP packet.
    assert_eq!(bad(&|h| h.gso_type = GSO_TCPV6), Err(VirtioError::Packet));
    assert_eq!(bad(&|h| h.gso_type = GSO_UDP_L4), Err(VirtioError::Packet));
    // The IP length disagrees with the packet (a truncated super-packet).
    assert_eq!(
        validate(&good.to_bytes(), &p[..p.len() - 1]),
        Err(VirtioError::Packet)
    );
    // TCP data offset below 5 words.
    let mut q = p.clone();
    q[20 + 12] = 4 << 4;
    assert_eq!(validate(&good.to_bytes(), &q), Err(VirtioError::Packet));
    // A fragment.
    let mut q = p.clone();
    q[6] = 0x20;
    assert_eq!(validate(&good.to_bytes(), &q), Err(VirtioError::Packet));
}

#[test]
fn uso_and_tso6_from_the_kernel_pass() {
    let p = packet(false, PROTO_TCP, 5, 30_000);
    let h = kernel_hdr(false, PROTO_TCP, &p, 1428, false, true);
    assert_eq!(validate(&h.to_bytes(), &p), Ok(()));
    for v4 in [true, false] {
        let p = packet(v4, PROTO_UDP, 0, 12_000);
        let h = kernel_hdr(v4, PROTO_UDP, &p, 1200, false, true);
        assert_eq!(validate(&h.to_bytes(), &p), Ok(()));
    }
}

#[test]
fn partial_checksum_must_lie_inside_the_packet() {
    let p = packet(true, PROTO_UDP, 0, 50);
    let h = kernel_hdr(true, PROTO_UDP, &p, 0, false, true);
    assert_eq!(validate(&h.to_bytes(), &p), Ok(()));
    let mut b = h;
    b.csum_offset = 16;
    assert_eq!(validate(&b.to_bytes(), &p), Err(VirtioError::Csum));
    b = h;
    b.csum_start = 10; // inside the IP header
    assert_eq!(validate(&b.to_bytes(), &p), Err(VirtioError::Csum));
    b = h;
    b.csum_start = p.len() as u16 - 1;
    b.csum_offset = 0;
    assert_eq!(validate(&b.to_bytes(), &p), Err(VirtioError::Csum));
    // Checksum fields without NEEDS_CSUM.
    b = h;
    b.flags = 0;
    assert_eq!(validate(&b.to_bytes(), &p), Err(VirtioError::Csum));
    // gso_size without GSO.
    b = h;
    b.gso_size = 1000;
    assert_eq!(validate(&b.to_bytes(), &p), Err(VirtioError::GsoSize));
    // A TCP header too short for its checksum field.
    let p = packet(true, PROTO_TCP, 5, 0);
    let h = kernel_hdr(true, PROTO_TCP, &p[..30], 0, false, true);
    assert_eq!(validate(&h.to_bytes(), &p[..30]), Err(VirtioError::Csum));
}

#[test]
fn header_round_trips() {
    let h = VirtioHdr {
        flags: 1,
        gso_type: 0x81,
        hdr_len: 0x1234,
        gso_size: 0x0586,
        csum_start: 20,
        csum_offset: 16,
    };
    assert_eq!(
        h.to_bytes(),
        [0x01, 0x81, 0x34, 0x12, 0x86, 0x05, 20, 0, 16, 0]
    );
    assert_eq!(VirtioHdr::parse(&h.to_bytes()), Some(h));
}

proptest! {
    #[test]
    fn never_panics(vnet in proptest::collection::vec(any::<u8>(), 0..12),
                    ip in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = validate(&vnet, &ip);
    }

    #[test]
    fn never_panics_on_near_valid_packets(
        v4 in any::<bool>(), tcp in any::<bool>(), payload in 0usize..4000,
        hdr in any::<[u8; 10]>(), cut in 0usize..100, flip in any::<(usize, u8)>(),
    ) {
        let proto = if tcp { PROTO_TCP } else { PROTO_UDP };
        let mut p = packet(v4, proto, 5, payload);
        let i = flip.0 % p.len();
        p[i] ^= flip.1;
        p.truncate(p.len().saturating_sub(cut));
        let _ = validate(&hdr, &p);
    }

    /// Every header the kernel gives mmsg on a TUN read (with the offloads mmsg enables) is
    /// accepted: GSO super-packets up to 64 KiB with any MSS the kernel uses, partial checksums,
    /// no work.
    #[test]
    fn every_header_our_sender_produces_is_accepted(
        v4 in any::<bool>(), tcp in any::<bool>(), doff in 5u8..=15,
        mss in 536u16..=9000, segs in 1usize..=45, last in 1usize..=536,
        gso in any::<bool>(), ecn in any::<bool>(), partial in any::<bool>(),
    ) {
        let proto = if tcp { PROTO_TCP } else { PROTO_UDP };
        let payload = if gso { (segs - 1) * usize::from(mss) + last } else { last };
        let l = if v4 { 20 } else { 40 } + if tcp { usize::from(doff) * 4 } else { 8 } + payload;
        prop_assume!(l <= 65_535);
        let p = packet(v4, proto, doff, payload);
        let h = kernel_hdr(v4, proto, &p, if gso { mss } else { 0 }, ecn && tcp && gso, partial);
        prop_assert_eq!(validate(&h.to_bytes(), &p), Ok(()));
    }
}
