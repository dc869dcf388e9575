//! Golden bytes (STYLE §6.1) and property tests (§6.2) for the hello and the frame codec.

use super::*;
use proptest::prelude::*;

fn b(id: u8) -> BranchId {
    BranchId::new(id).unwrap()
}

fn pg(id: u8) -> PathGroupId {
    PathGroupId::new(id).unwrap()
}

/// A minimal IPv4/UDP packet of `len` bytes (total length field = `len`).
fn ipv4(len: usize) -> Vec<u8> {
    assert!(len >= 20);
    let mut p = vec![0u8; len];
    p[0] = 0x45; // version 4, IHL 5
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes()); // total length
    p[8] = 64; // TTL
    p[9] = 17; // UDP
    p[12..16].copy_from_slice(&[198, 19, 1, 10]);
    p[16..20].copy_from_slice(&[198, 19, 2, 10]);
    p
}

/// A minimal IPv6 packet of `len` bytes (payload length = `len - 40`).
fn ipv6(len: usize) -> Vec<u8> {
    assert!(len >= 40);
    let mut p = vec![0u8; len];
    p[0] = 0x60;
    p[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
    p[6] = 59; // no next header
    p[7] = 64;
    p
}

fn decode_all(bytes: &[u8]) -> Result<Vec<Frame>, FrameError> {
    let mut buf = BytesMut::from(bytes);
    let mut d = Deframer::new();
    let mut out = Vec::new();
    while let Some(f) = d.decode(&mut buf)? {
        out.push(f);
    }
    assert!(buf.is_empty(), "trailing bytes");
    Ok(out)
}

#[test]
fn golden_hello() {
    let hello = Hello {
        src_branch: b(1),
        dst_branch: b(2),
        path_group: pg(4),
        class: Class::TypeI,
        index: 0,
        auth: Vec::new(),
    };
    let expected: &[u8] = &[
        0x4D, 0x4D, 0x53, 0x48, // magic "MMSH"
        0x01, // version 1
        0x01, // source branch 1
        0x02, // destination branch 2
        0x04, // path group 4 (outer port 0x2004)
        0x01, // class: Type I
        0x00, // reserved
        0x00, 0x00, // authentication length 0 (security issue)
    ];
    let mut out = BytesMut::new();
    assert_eq!(hello.encode(&mut out).unwrap(), expected.len());
    assert_eq!(&out[..], expected);
    assert_eq!(Hello::decode(expected).unwrap(), Some((hello.clone(), 12)));
    assert_eq!(hello.check_incoming(b(2)), Ok(()));
    assert_eq!(
        hello.check_incoming(b(3)),
        Err(HelloError::WrongDestination { got: 2, own: 3 })
    );
}

#[test]
fn golden_hello_with_auth() {
    let bytes: &[u8] = &[
        0x4D, 0x4D, 0x53, 0x48, // magic
        0x01, // version
        0x0F, // source branch 15
        0x03, // destination branch 3
        0x0F, // path group 15
        0x02, // class: Type II
        0x00, // reserved
        0x00, 0x03, // authentication length 3
        0xAA, 0xBB, 0xCC, // authentication bytes
        0xFF, // first byte after the hello (a frame), not consumed
    ];
    let (hello, n) = Hello::decode(bytes).unwrap().unwrap();
    assert_eq!(n, 15);
    assert_eq!(hello.auth, vec![0xAA, 0xBB, 0xCC]);
    assert_eq!(hello.class, Class::TypeII);
    // No authentication scheme exists yet: policy refuses a non-empty field.
    assert_eq!(
        hello.check_incoming(b(3)),
        Err(HelloError::AuthNotSupported(3))
    );
    for cut in 0..15 {
        assert_eq!(Hello::decode(&bytes[..cut]), Ok(None), "prefix {cut}");
    }
}

#[test]
fn hello_rejections() {
    let good = [0x4D, 0x4D, 0x53, 0x48, 1, 1, 2, 0, 1, 0, 0, 0];
    let with = |i: usize, v: u8| {
        let mut h = good;
        h[i] = v;
        Hello::decode(&h)
    };
    // Junk is refused at its first byte, before a whole hello is buffered.
    assert_eq!(Hello::decode(b"G"), Err(HelloError::BadMagic));
    assert_eq!(Hello::decode(b"MMX"), Err(HelloError::BadMagic));
    assert_eq!(Hello::decode(&good[..5]), Ok(None));
    assert_eq!(with(4, 2), Err(HelloError::UnsupportedVersion(2)));
    assert_eq!(
        Hello::decode(&[0x4D, 0x4D, 0x53, 0x48, 9]),
        Err(HelloError::UnsupportedVersion(9))
    );
    assert_eq!(with(5, 0), Err(HelloError::InvalidBranch(0)));
    assert_eq!(with(6, 251), Err(HelloError::InvalidBranch(251)));
    assert_eq!(with(6, 1), Err(HelloError::SameBranch(1)));
    assert_eq!(with(7, 16), Err(HelloError::InvalidPathGroup(16)));
    assert_eq!(with(8, 3), Err(HelloError::InvalidClass(3)));
    // Byte 9 is the connection index: 0..MAX_CONNECTIONS_PER_GROUP.
    assert_eq!(with(9, 8), Err(HelloError::InvalidIndex(8)));
    assert_eq!(with(9, 255), Err(HelloError::InvalidIndex(255)));
    let (h, n) = with(9, 7).unwrap().unwrap();
    assert_eq!((h.index, n), (7, 12));
    let mut out = BytesMut::new();
    h.encode(&mut out).unwrap();
    assert_eq!(out[9], 7);
    let over = Hello { index: 8, ..h };
    assert_eq!(
        over.encode(&mut BytesMut::new()),
        Err(EncodeError::InvalidIndex(8))
    );
    let mut long = good;
    long[10..12].copy_from_slice(&513u16.to_be_bytes());
    assert_eq!(Hello::decode(&long), Err(HelloError::AuthTooLong(513)));
}

#[test]
fn golden_ip_frame() {
    let pkt = ipv4(20);
    let mut buf = vec![0u8; FRAME_HEADER_LEN];
    buf.extend_from_slice(&pkt);
    let h = encode_header_in_place(&mut buf, FrameType::Ip, Class::TypeII, None).unwrap();
    assert_eq!(h.payload_len, 20);
    let expected_header: &[u8] = &[
        0x00, 0x00, 0x00, 0x14, // payload length 20
        0x01, // type: IP packet
        0x02, // class: Type II
        0x00, // flags: none
        0x00, // reserved
        0x00, 0x00, 0x00, 0x00, // sequence number: absent, must be 0
    ];
    assert_eq!(&buf[..12], expected_header);
    assert_eq!(&buf[12..], &pkt[..]);
    let frames = decode_all(&buf).unwrap();
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].header, h);
    assert_eq!(frames[0].ip_packet(), Some((None, &pkt[..])));
}

#[test]
fn golden_ip_virtio_frame_with_seq() {
    let mut payload = vec![0x01, 0x01, 0x36, 0x00, 0xA8, 0x05, 0x22, 0x00, 0x10, 0x00]; // virtio hdr
    let pkt = ipv6(40);
    payload.extend_from_slice(&pkt);
    let mut out = BytesMut::new();
    let n = encode_frame(
        FrameType::IpVirtio,
        Class::TypeI,
        Some(0x0102_0304),
        &payload,
        &mut out,
    )
    .unwrap();
    assert_eq!(n, 12 + 50);
    let expected_header: &[u8] = &[
        0x00, 0x00, 0x00, 0x32, // payload length 50 = 10 (virtio) + 40 (IPv6)
        0x02, // type: IP + virtio-net header
        0x01, // class: Type I
        0x01, // flags: sequence number present
        0x00, // reserved
        0x01, 0x02, 0x03, 0x04, // per-flow sequence number 0x01020304
    ];
    assert_eq!(&out[..12], expected_header);
    let frames = decode_all(&out).unwrap();
    assert_eq!(frames[0].header.seq, Some(0x0102_0304));
    let (virtio, ip) = frames[0].ip_packet().unwrap();
    assert_eq!(virtio, Some(&payload[..10]));
    assert_eq!(ip, &pkt[..]);
}

#[test]
fn golden_keepalive_frame() {
    let mut out = BytesMut::new();
    encode_frame(FrameType::Keepalive, Class::TypeII, None, &[], &mut out).unwrap();
    let expected: &[u8] = &[
        0x00, 0x00, 0x00, 0x00, // payload length 0
        0x03, // type: keepalive
        0x02, // class: Type II (the connection's class)
        0x00, // flags: none (a keepalive has no sequence number)
        0x00, // reserved
        0x00, 0x00, 0x00, 0x00, // sequence number: absent
    ];
    assert_eq!(&out[..], expected);
    assert_eq!(decode_all(expected).unwrap()[0].payload.len(), 0);
    // A keepalive never carries a payload or sequence number.
    assert_eq!(
        encode_frame(FrameType::Keepalive, Class::TypeII, None, &[1], &mut out),
        Err(EncodeError::InvalidPayload(FrameError::BadKeepalive))
    );
    let mut bad = expected.to_vec();
    bad[6] = 0x01;
    assert_eq!(decode_all(&bad).unwrap_err(), FrameError::BadKeepalive);
}

#[test]
fn golden_control_frame() {
    let mut out = BytesMut::new();
    encode_frame(FrameType::Control, Class::TypeI, None, b"hi", &mut out).unwrap();
    let expected: &[u8] = &[
        0x00, 0x00, 0x00, 0x02, // payload length 2
        0x04, // type: control
        0x01, // class: Type I
        0x00, // flags
        0x00, // reserved
        0x00, 0x00, 0x00, 0x00, // sequence number: absent
        b'h', b'i', // opaque control payload
    ];
    assert_eq!(&out[..], expected);
    assert_eq!(&decode_all(expected).unwrap()[0].payload[..], b"hi");
}

#[test]
fn unknown_frame_type_is_skipped_whole() {
    let bytes: &[u8] = &[
        0x00, 0x00, 0x00, 0x03, // payload length 3
        0x7F, // type: unknown 0x7F (a newer peer's)
        0x01, // class: Type I
        0x00, 0x00, // flags, reserved
        0x00, 0x00, 0x00, 0x00, // sequence number
        0xDE, 0xAD, 0x00, // opaque
    ];
    let f = &decode_all(bytes).unwrap()[0];
    assert_eq!(f.header.frame_type, FrameType::Unknown(0x7F));
    let mut out = BytesMut::new();
    encode_frame(
        f.header.frame_type,
        f.header.class,
        f.header.seq,
        &f.payload,
        &mut out,
    )
    .unwrap();
    assert_eq!(&out[..], bytes);
}

#[test]
fn oversize_is_refused_from_the_header_alone() {
    let mut d = Deframer::new();
    let mut buf = BytesMut::from(
        &[
            0x00, 0x01, 0x00, 0x32, // 65,586 > MAX_PAYLOAD_LEN (65,585)
            0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        ][..],
    );
    let e = FrameError::Oversize {
        frame_type: 2,
        len: 65_586,
        max: MAX_PAYLOAD_LEN,
    };
    assert_eq!(d.wanted(&buf), Err(e));
    assert_eq!(d.decode(&mut buf), Err(e));
    // Sticky: the stream stays failed.
    assert_eq!(d.decode(&mut BytesMut::new()), Err(e));
    // A plain IP frame may not exceed 65,575 and a control frame 4,096.
    let ctrl = [0x00, 0x00, 0x10, 0x01, 0x04, 0x01, 0, 0, 0, 0, 0, 0];
    assert!(matches!(
        FrameHeader::decode(&ctrl),
        Err(FrameError::Oversize { .. })
    ));
    let ip = [0x00, 0x01, 0x00, 0x28, 0x01, 0x01, 0, 0, 0, 0, 0, 0]; // 65,576
    assert!(matches!(
        FrameHeader::decode(&ip),
        Err(FrameError::Oversize { .. })
    ));
    let ip = [0x00, 0x01, 0x00, 0x27, 0x01, 0x01, 0, 0, 0, 0, 0, 0]; // 65,575: fine
    assert!(FrameHeader::decode(&ip).unwrap().is_some());
    let ip = [0x00, 0x01, 0x00, 0x28, 0x02, 0x01, 0, 0, 0, 0, 0, 0]; // virtio: fine
    assert!(FrameHeader::decode(&ip).unwrap().is_some());
}

#[test]
fn largest_gso_frame_round_trips() {
    let mut payload = vec![0u8; VIRTIO_NET_HDR_LEN];
    payload.extend_from_slice(&ipv6(MAX_IP_PACKET_LEN));
    assert_eq!(payload.len() as u32, MAX_PAYLOAD_LEN);
    // The largest plain IP frames: IPv6 65,575 and IPv4 65,535 bytes.
    let mut out = BytesMut::new();
    encode_frame(
        FrameType::Ip,
        Class::TypeI,
        None,
        &ipv6(MAX_IP_PACKET_LEN),
        &mut out,
    )
    .unwrap();
    encode_frame(FrameType::Ip, Class::TypeI, None, &ipv4(65_535), &mut out).unwrap();
    assert_eq!(decode_all(&out).unwrap().len(), 2);
    let mut buf = vec![0u8; FRAME_HEADER_LEN];
    buf.extend_from_slice(&payload);
    encode_header_in_place(&mut buf, FrameType::IpVirtio, Class::TypeII, Some(7)).unwrap();
    let f = decode_all(&buf).unwrap();
    assert_eq!(&f[0].payload[..], &payload[..]);
}

#[test]
fn header_field_rejections() {
    let good = [0, 0, 0, 0, 0x03, 0x01, 0, 0, 0, 0, 0, 0];
    let with = |i: usize, v: u8| {
        let mut h = good;
        h[i] = v;
        FrameHeader::decode(&h)
    };
    assert!(FrameHeader::decode(&good).unwrap().is_some());
    assert_eq!(with(5, 0), Err(FrameError::InvalidClass(0)));
    assert_eq!(with(5, 3), Err(FrameError::InvalidClass(3)));
    assert_eq!(with(6, 0x80), Err(FrameError::UnknownFlags(0x80)));
    assert_eq!(with(7, 1), Err(FrameError::Reserved(1)));
    assert_eq!(with(11, 1), Err(FrameError::SeqWithoutFlag(1)));
}

#[test]
fn malformed_packets_are_refused_by_encoder_and_decoder() {
    let mut out = BytesMut::new();
    // Not IP.
    let e = encode_frame(FrameType::Ip, Class::TypeI, None, &[0x00; 20], &mut out);
    assert_eq!(e, Err(EncodeError::InvalidPayload(FrameError::NotIp(0))));
    // IPv4 total length says 40, the packet has 20 bytes (truncated).
    let mut p = ipv4(20);
    p[2..4].copy_from_slice(&40u16.to_be_bytes());
    let e = encode_frame(FrameType::Ip, Class::TypeI, None, &p, &mut out);
    assert_eq!(
        e,
        Err(EncodeError::InvalidPayload(FrameError::IpLengthMismatch {
            ip_len: 40,
            frame_len: 20
        }))
    );
    // An IPv4 header shorter than 20 bytes.
    let e = encode_frame(
        FrameType::Ip,
        Class::TypeI,
        None,
        &[0x45, 0, 0, 10, 0, 0, 0, 0, 0, 0],
        &mut out,
    );
    assert!(matches!(
        e,
        Err(EncodeError::InvalidPayload(FrameError::TooShort { .. }))
    ));
    // Virtio frame without an IP packet behind the header.
    let e = encode_frame(
        FrameType::IpVirtio,
        Class::TypeI,
        None,
        &[0u8; 10],
        &mut out,
    );
    assert!(matches!(
        e,
        Err(EncodeError::InvalidPayload(FrameError::TooShort { .. }))
    ));
    // Type III is never framed.
    let e = encode_frame(FrameType::Control, Class::TypeIII, None, &[], &mut out);
    assert_eq!(e, Err(EncodeError::NotTunnelled(Class::TypeIII)));
    assert!(out.is_empty(), "nothing written on error");
    // No room for the header.
    let e = encode_header_in_place(&mut [0u8; 11], FrameType::Control, Class::TypeI, None);
    assert_eq!(e, Err(EncodeError::NoHeaderRoom(11)));
    // The decoder refuses the same bytes.
    let mut raw = vec![0, 0, 0, 20, 0x01, 0x01, 0, 0, 0, 0, 0, 0];
    raw.extend_from_slice(&p);
    assert_eq!(
        decode_all(&raw).unwrap_err(),
        FrameError::IpLengthMismatch {
            ip_len: 40,
            frame_len: 20
        }
    );
}

#[test]
fn partial_frames_are_never_returned() {
    let mut out = BytesMut::new();
    encode_frame(FrameType::Ip, Class::TypeII, Some(1), &ipv4(100), &mut out).unwrap();
    let mut d = Deframer::new();
    for cut in 0..out.len() {
        let mut buf = BytesMut::from(&out[..cut]);
        assert_eq!(d.decode(&mut buf), Ok(None), "cut {cut}");
        assert_eq!(buf.len(), cut, "nothing consumed");
        // First the header, then the rest of the frame.
        let want = if cut < FRAME_HEADER_LEN {
            FRAME_HEADER_LEN - cut
        } else {
            out.len() - cut
        };
        assert_eq!(d.wanted(&buf), Ok(want));
    }
}

// ---- property tests ----

fn arb_class() -> impl Strategy<Value = Class> {
    prop_oneof![Just(Class::TypeI), Just(Class::TypeII)]
}

/// A valid (frame type, seq, payload) triple.
fn arb_frame() -> impl Strategy<Value = (FrameType, Class, Option<u32>, Vec<u8>)> {
    let seq = proptest::option::of(any::<u32>());
    prop_oneof![
        (arb_class(), seq.clone(), 20usize..2000).prop_map(|(c, s, n)| (
            FrameType::Ip,
            c,
            s,
            ipv4(n)
        )),
        (arb_class(), seq.clone(), 40usize..2000).prop_map(|(c, s, n)| (
            FrameType::Ip,
            c,
            s,
            ipv6(n)
        )),
        (arb_class(), seq.clone(), any::<[u8; 10]>(), 1usize..3000).prop_map(|(c, s, v, n)| {
            let mut p = v.to_vec();
            p.push(0x45);
            p.extend(std::iter::repeat_n(0xA5, n - 1)); // GSO: length not checked
            (FrameType::IpVirtio, c, s, p)
        }),
        arb_class().prop_map(|c| (FrameType::Keepalive, c, None, Vec::new())),
        (
            arb_class(),
            seq.clone(),
            proptest::collection::vec(any::<u8>(), 0..4096)
        )
            .prop_map(|(c, s, p)| (FrameType::Control, c, s, p)),
        (
            5u8..=255,
            arb_class(),
            seq,
            proptest::collection::vec(any::<u8>(), 0..300)
        )
            .prop_map(|(t, c, s, p)| (FrameType::from_u8(t), c, s, p)),
    ]
}

fn arb_hello() -> impl Strategy<Value = Hello> {
    (
        1u8..=15,
        1u8..=14,
        0u8..=15,
        arb_class(),
        proptest::collection::vec(any::<u8>(), 0..=512),
    )
        .prop_map(|(s, d, g, class, auth)| {
            let d = if d >= s { d + 1 } else { d }; // a different branch
            Hello {
                src_branch: b(s),
                dst_branch: b(d),
                path_group: pg(g),
                class,
                index: 0,
                auth,
            }
        })
}

proptest! {
    #[test]
    fn hello_round_trips(h in arb_hello(), tail in proptest::collection::vec(any::<u8>(), 0..16)) {
        let mut out = BytesMut::new();
        let n = h.encode(&mut out).unwrap();
        prop_assert_eq!(n, out.len());
        prop_assert_eq!(n, h.encoded_len());
        out.extend_from_slice(&tail);
        prop_assert_eq!(Hello::decode(&out).unwrap(), Some((h, n)));
        for cut in 0..n {
            prop_assert_eq!(Hello::decode(&out[..cut]), Ok(None));
        }
    }

    /// parse(emit(x)) == x, len() == bytes written, for a stream of frames fed in arbitrary chunks.
    #[test]
    fn frames_round_trip_in_any_chunking(
        frames in proptest::collection::vec(arb_frame(), 1..8),
        chunk in 1usize..5000,
    ) {
        let mut wire = BytesMut::new();
        for (t, c, s, p) in &frames {
            let n = encode_frame(*t, *c, *s, p, &mut wire).unwrap();
            prop_assert_eq!(n, FRAME_HEADER_LEN + p.len());
        }
        let mut d = Deframer::new();
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for piece in wire.chunks(chunk) {
            buf.extend_from_slice(piece);
            while let Some(f) = d.decode(&mut buf).unwrap() {
                got.push(f);
            }
        }
        prop_assert!(buf.is_empty());
        prop_assert_eq!(got.len(), frames.len());
        for (f, (t, c, s, p)) in got.iter().zip(&frames) {
            prop_assert_eq!(f.header, FrameHeader { frame_type: *t, class: *c, seq: *s, payload_len: p.len() as u32 });
            prop_assert_eq!(&f.payload[..], &p[..]);
        }
    }

    /// In-place encoding writes the same bytes as the copying encoder.
    #[test]
    fn in_place_matches_copy((t, c, s, p) in arb_frame()) {
        let mut copy = BytesMut::new();
        encode_frame(t, c, s, &p, &mut copy).unwrap();
        let mut inplace = vec![0u8; FRAME_HEADER_LEN];
        inplace.extend_from_slice(&p);
        encode_header_in_place(&mut inplace, t, c, s).unwrap();
        prop_assert_eq!(&copy[..], &inplace[..]);
    }

    /// Any bytes: never panics; whatever decodes re-encodes to exactly the bytes consumed.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        check_deframer_invariants(&bytes);
    }

    /// Mutating a valid frame: never panics, decodes only to canonical frames.
    #[test]
    fn mutated_frames((t, c, s, p) in arb_frame(), at in any::<prop::sample::Index>(), v in any::<u8>()) {
        let mut wire = BytesMut::new();
        encode_frame(t, c, s, &p, &mut wire).unwrap();
        let i = at.index(wire.len());
        wire[i] = v;
        check_deframer_invariants(&wire);
    }
}

/// The checks the fuzz target and the corpus replay also make (see `tests/fuzz_corpus.rs`).
pub(crate) fn check_deframer_invariants(bytes: &[u8]) {
    crate::framing::fuzz_check(bytes);
}

#[test]
fn inbound_connection_hello_then_frames() {
    let hello = Hello {
        src_branch: b(1),
        dst_branch: b(2),
        path_group: pg(3),
        class: Class::TypeII,
        index: 0,
        auth: Vec::new(),
    };
    let mut wire = BytesMut::new();
    hello.encode(&mut wire).unwrap();
    encode_frame(FrameType::Ip, Class::TypeII, None, &ipv4(40), &mut wire).unwrap();
    encode_frame(FrameType::Keepalive, Class::TypeII, None, &[], &mut wire).unwrap();

    let mut conn = InboundConnection::new(b(2));
    let mut buf = BytesMut::new();
    let mut got = Vec::new();
    for byte in wire.iter() {
        buf.extend_from_slice(&[*byte]);
        while let Some(ev) = conn.decode(&mut buf).unwrap() {
            got.push(ev);
        }
    }
    assert!(buf.is_empty());
    assert_eq!(got.len(), 3);
    assert_eq!(got[0], Inbound::Hello(hello.clone()));
    assert!(matches!(&got[1], Inbound::Frame(f) if f.header.frame_type == FrameType::Ip));
    assert!(matches!(&got[2], Inbound::Frame(f) if f.header.frame_type == FrameType::Keepalive));
    assert_eq!(conn.hello(), Some(&hello));
}

#[test]
fn inbound_connection_refuses_and_stays_closed() {
    // A hello for another branch.
    let mut wire = BytesMut::new();
    Hello {
        src_branch: b(1),
        dst_branch: b(3),
        path_group: pg(0),
        class: Class::TypeI,
        index: 0,
        auth: Vec::new(),
    }
    .encode(&mut wire)
    .unwrap();
    let mut conn = InboundConnection::new(b(2));
    let e = InboundError::Hello(HelloError::WrongDestination { got: 3, own: 2 });
    assert_eq!(conn.decode(&mut wire), Err(e));
    assert_eq!(conn.decode(&mut BytesMut::new()), Err(e), "sticky");
    assert_eq!(conn.hello(), None);
    // Junk instead of a hello: refused at the first byte.
    let mut conn = InboundConnection::new(b(2));
    assert_eq!(
        conn.decode(&mut BytesMut::from(&b"G"[..])),
        Err(InboundError::Hello(HelloError::BadMagic))
    );
    // A good hello, then a bad frame.
    let mut wire = BytesMut::new();
    Hello {
        src_branch: b(1),
        dst_branch: b(2),
        path_group: pg(0),
        class: Class::TypeI,
        index: 0,
        auth: Vec::new(),
    }
    .encode(&mut wire)
    .unwrap();
    wire.extend_from_slice(&[0, 0, 0, 0, 0x03, 0x09, 0, 0, 0, 0, 0, 0]);
    let mut conn = InboundConnection::new(b(2));
    assert!(matches!(
        conn.decode(&mut wire),
        Ok(Some(Inbound::Hello(_)))
    ));
    assert_eq!(
        conn.decode(&mut wire),
        Err(InboundError::Frame(FrameError::InvalidClass(9)))
    );
}

#[test]
fn inbound_connection_checks_the_port_group() {
    assert!(
        InboundConnection::on_port(b(2), 0x1003).is_none(),
        "branch 1's port"
    );
    assert!(
        InboundConnection::on_port(b(2), 0x2013).is_none(),
        "not 0xB00G"
    );
    let hello = |g: u8| {
        let mut w = BytesMut::new();
        Hello {
            src_branch: b(1),
            dst_branch: b(2),
            path_group: pg(g),
            class: Class::TypeI,
            index: 0,
            auth: Vec::new(),
        }
        .encode(&mut w)
        .unwrap();
        w
    };
    let mut conn = InboundConnection::on_port(b(2), 0x2003).unwrap();
    assert!(matches!(
        conn.decode(&mut hello(3)),
        Ok(Some(Inbound::Hello(_)))
    ));
    let mut conn = InboundConnection::on_port(b(2), 0x2003).unwrap();
    assert_eq!(
        conn.decode(&mut hello(4)),
        Err(InboundError::Hello(HelloError::WrongPathGroup {
            got: 4,
            port: 3
        }))
    );
}
