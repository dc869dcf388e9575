//! Edge cases of the codec: padding, canonical order, prerequisites, typed errors, truncation,
//! and the allocation bound (decoding never allocates more than a constant factor of its input).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::Ipv4Addr;

use ofproto::message::{FlowMod, Hello, HelloElement, PacketOut, OFP_NO_BUFFER};
use ofproto::ofp_error::{BadMatchCode, ErrorCode};
use ofproto::oxm::{Match, MatchError, OxmField as F, OFPVID_NONE};
use ofproto::{Action, Body, DecodeError, Instruction, Message};

/// Counts bytes allocated on the current thread while `COUNTING` is set.
struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATED: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: delegates to the system allocator; only adds thread-local bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = COUNTING.try_with(|c| {
            if c.get() {
                let _ = ALLOCATED.try_with(|a| a.set(a.get() + layout.size()));
            }
        });
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocated_by<R>(f: impl FnOnce() -> R) -> usize {
    ALLOCATED.with(|a| a.set(0));
    COUNTING.with(|c| c.set(true));
    let r = f();
    COUNTING.with(|c| c.set(false));
    drop(r);
    ALLOCATED.with(|a| a.get())
}

fn vectors() -> Vec<Vec<u8>> {
    include_str!("vectors/os_ken.txt")
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let hex = l.split_whitespace().nth(2).unwrap();
            (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect()
        })
        .collect()
}

#[test]
fn hello_element_padding_round_trips_and_is_required() {
    // Bitmap of two words: element length 12, then 4 bytes of padding (§7.5.1).
    let h = Message::new(
        3,
        Body::Hello(Hello {
            version: 6,
            elements: vec![
                HelloElement::VersionBitmap(vec![0x52, 0]),
                HelloElement::Unknown {
                    typ: 9,
                    data: vec![1],
                },
            ],
        }),
    );
    let b = h.to_bytes().unwrap();
    assert_eq!(
        b,
        [
            6, 0, 0, 0x20, 0, 0, 0, 3, // header, length 32
            0, 1, 0, 12, 0, 0, 0, 0x52, 0, 0, 0, 0, 0, 0, 0, 0, // bitmap + pad
            0, 9, 0, 5, 1, 0, 0, 0, // unknown element + pad
        ]
    );
    assert_eq!(Message::decode_exact(&b).unwrap(), h);
    let mut short = b[..28].to_vec();
    short[3] = 28;
    assert!(Message::decode_exact(&short).is_err());
}

#[test]
fn match_fields_are_emitted_in_canonical_order() {
    let a: Match = [
        F::TcpDst(0x2004, None),
        F::Ipv4Dst(Ipv4Addr::new(198, 18, 21, 2), None),
        F::EthType(0x0800, None),
        F::IpProto(6, None),
    ]
    .into_iter()
    .collect();
    let b = Match::new()
        .with(F::IpProto(6, None))
        .with(F::EthType(0x0800, None))
        .with(F::TcpDst(0x2004, None))
        .with(F::Ipv4Dst(Ipv4Addr::new(198, 18, 21, 2), None));
    assert_eq!(a, b);
    let fm = |m: Match| {
        Message::new(
            1,
            Body::FlowMod(FlowMod {
                match_: m,
                ..FlowMod::default()
            }),
        )
        .to_bytes()
        .unwrap()
    };
    let bytes = fm(a);
    assert_eq!(bytes, fm(b));
    // OVS-style order on the wire (ip_proto before eth_type) decodes to the same match.
    let mut ovs = bytes.clone();
    // Fields start at 48+4: eth_type(6 bytes incl. header 4+2), ip_proto(4+1) ... swap the first two.
    let eth = ovs[52..58].to_vec();
    let proto = ovs[58..63].to_vec();
    ovs.splice(52..63, proto.into_iter().chain(eth));
    let d = Message::decode_exact(&ovs).unwrap();
    assert_eq!(d.to_bytes().unwrap(), bytes);
}

#[test]
fn duplicate_fields_are_rejected_with_dup_field() {
    let mut b = Message::new(
        1,
        Body::FlowMod(FlowMod {
            match_: Match::new()
                .with(F::InPort(1, None))
                .with(F::InPhyPort(1, None)),
            ..FlowMod::default()
        }),
    )
    .to_bytes()
    .unwrap();
    b[62] = 0; // second field's oxm_field: IN_PHY_PORT (1<<1) -> IN_PORT (0)
    let e = Message::decode_exact(&b).unwrap_err();
    assert_eq!(
        e,
        DecodeError::DuplicateOxm {
            class: 0x8000,
            field: 0
        }
    );
    assert_eq!(
        e.to_ofp_error(),
        ErrorCode::BadMatch(BadMatchCode::DupField)
    );
}

#[test]
fn prerequisites_and_masks_are_checked() {
    let ip = || Match::new().with(F::EthType(0x0800, None));
    let ok = ip()
        .with(F::IpProto(6, None))
        .with(F::TcpDst(0x2004, None))
        .with(F::Ipv4Src(
            Ipv4Addr::new(198, 18, 11, 2),
            Some(Ipv4Addr::new(255, 255, 255, 0)),
        ));
    assert_eq!(ok.validate(), Ok(()));
    // tcp_dst needs ip_proto=6.
    assert_eq!(
        ip().with(F::TcpDst(1, None)).validate(),
        Err(MatchError::BadPrereq(14))
    );
    // ipv4_src needs eth_type=0x0800.
    assert_eq!(
        Match::new()
            .with(F::Ipv4Src(Ipv4Addr::LOCALHOST, None))
            .validate(),
        Err(MatchError::BadPrereq(11))
    );
    // udp with ip_proto=6 is inconsistent.
    assert_eq!(
        ip().with(F::IpProto(6, None))
            .with(F::UdpSrc(53, None))
            .validate(),
        Err(MatchError::BadPrereq(15))
    );
    // A masked prerequisite does not count.
    assert_eq!(
        Match::new()
            .with(F::EthType(0x0800, Some(0xffff)))
            .with(F::IpProto(6, None))
            .validate(),
        Err(MatchError::BadMask(5))
    );
    // tcp ports cannot be masked in 1.3.
    assert_eq!(
        ip().with(F::IpProto(6, None))
            .with(F::TcpSrc(1, Some(0xff00)))
            .validate(),
        Err(MatchError::BadMask(13))
    );
    // vlan_pcp needs a VLAN (VLAN_VID != NONE).
    assert_eq!(
        Match::new()
            .with(F::VlanVid(OFPVID_NONE, None))
            .with(F::VlanPcp(3, None))
            .validate(),
        Err(MatchError::BadPrereq(7))
    );
    // nd_sll needs icmpv6_type=135, nd_tll 136.
    let nd = |t| {
        Match::new()
            .with(F::EthType(0x86dd, None))
            .with(F::IpProto(58, None))
            .with(F::Icmpv6Type(t, None))
    };
    assert_eq!(
        nd(135)
            .with(F::Ipv6NdSll(Default::default(), None))
            .validate(),
        Ok(())
    );
    assert_eq!(
        nd(136)
            .with(F::Ipv6NdSll(Default::default(), None))
            .validate(),
        Err(MatchError::BadPrereq(32))
    );
    // in_phy_port needs in_port.
    assert_eq!(
        Match::new().with(F::InPhyPort(1, None)).validate(),
        Err(MatchError::BadPrereq(1))
    );
}

#[test]
fn every_prefix_and_every_length_field_is_handled_without_panic() {
    for v in vectors() {
        for n in 0..v.len() {
            assert_eq!(
                Message::decode(&v[..n]).unwrap(),
                None,
                "prefix is need-more-bytes"
            );
            assert!(Message::decode_exact(&v[..n]).is_err());
        }
        // Corrupt every byte in turn: decode never panics.
        for i in 0..v.len() {
            let mut w = v.clone();
            w[i] ^= 0xff;
            let _ = Message::decode_exact(&w);
        }
    }
}

#[test]
fn trailing_bytes_and_bad_lengths_are_typed_errors() {
    let b = Message::new(1, Body::BarrierRequest).to_bytes().unwrap();
    let mut long = b.clone();
    long.extend([0, 0, 0, 0]);
    long[3] = 12;
    assert_eq!(
        Message::decode_exact(&long),
        Err(DecodeError::BadMessageLength { typ: 20, len: 4 })
    );
    // Header length disagreeing with the slice.
    let mut w = b.clone();
    w[3] = 9;
    assert!(matches!(
        Message::decode_exact(&w),
        Err(DecodeError::BadLength { .. })
    ));
    // Version 1.0 FLOW_MOD.
    let mut w = Message::new(1, Body::FlowMod(FlowMod::default()))
        .to_bytes()
        .unwrap();
    w[0] = 1;
    assert_eq!(Message::decode_exact(&w), Err(DecodeError::BadVersion(1)));
}

#[test]
fn decoding_allocates_at_most_a_constant_factor_of_the_input() {
    // Worst cases for allocation per input byte: many tiny actions, tiny instructions, tiny OXMs.
    let tiny_actions = Message::new(
        1,
        Body::PacketOut(PacketOut {
            buffer_id: OFP_NO_BUFFER,
            in_port: 1,
            actions: vec![Action::PopVlan; 8000],
            data: vec![],
        }),
    );
    let tiny_insts = Message::new(
        1,
        Body::FlowMod(FlowMod {
            instructions: vec![Instruction::ClearActions; 8000],
            ..FlowMod::default()
        }),
    );
    let mut inputs: Vec<Vec<u8>> = vec![
        tiny_actions.to_bytes().unwrap(),
        tiny_insts.to_bytes().unwrap(),
    ];
    inputs.extend(vectors());
    for b in &inputs {
        let n = allocated_by(|| Message::decode_exact(b).unwrap());
        assert!(
            n <= 16 * b.len() + 4096,
            "decoding {} bytes allocated {n} bytes",
            b.len()
        );
    }
    // Garbage claiming huge lengths allocates nothing substantial.
    let mut g = vec![0x04, 0x13, 0xff, 0xff, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0];
    g.extend([0xff; 64]);
    let n = allocated_by(|| Message::decode(&g));
    assert!(n < 1024, "allocated {n}");
}
