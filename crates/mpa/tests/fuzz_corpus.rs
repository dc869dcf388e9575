//! Replays the committed fuzz corpora (`crates/mpa/fuzz/corpus/{deframer,classifier,inbound}`) through the
//! same checks as the cargo-fuzz targets, so CI covers them on stable without libFuzzer (STYLE §6.4).

// A test/bench crate: clippy.toml allows these in #[test] functions only, not in their helpers.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::PathBuf;

/// Runs `check` on every file of `fuzz/corpus/<target>`; returns how many there were.
fn replay(target: &str, check: fn(&[u8])) -> usize {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let data = std::fs::read(&path).unwrap();
            let result = std::panic::catch_unwind(|| check(&data));
            assert!(
                result.is_ok(),
                "corpus file {} broke an invariant",
                path.display()
            );
            n += 1;
        }
    }
    n
}

#[test]
fn replay_deframer_corpus() {
    let n = replay("deframer", mpa::framing::fuzz_check);
    assert!(
        n >= 15,
        "expected the committed deframer seeds, found {n} files"
    );
}

#[test]
fn replay_classifier_corpus() {
    let n = replay("classifier", mpa::classifier::fuzz_check);
    assert!(
        n >= 9,
        "expected the committed classifier seeds, found {n} files"
    );
}

#[test]
fn replay_inbound_corpus() {
    let n = replay("inbound", mpa::gateway::fuzz_check_inbound);
    assert!(
        n >= 11,
        "expected the committed inbound seeds, found {n} files"
    );
}

/// The inbound seeds mean what their names say: admitted, spoofed, bad virtio.
#[test]
fn inbound_seeds_mean_what_they_say() {
    use bytes::BytesMut;
    use mpa::framing::{Inbound, InboundConnection};
    use mpa::gateway::{admit, AllowedSources, PacketDrop};
    let text = r#"
branch_id = 2
lan_prefixes = ["198.19.2.0/24"]
[[wan]]
name = "wan0"
address = "198.18.20.2/24"
gateway = "198.18.20.1"
[[remote]]
id = 1
wan_addresses = ["198.18.10.2"]
lan_prefixes = ["198.19.1.0/24", "fd00:1::/64"]
"#;
    let sources = AllowedSources::from_config(&mpa::config::Config::parse(text).unwrap());
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/inbound");
    let verdicts = |name: &str| {
        let data = std::fs::read(dir.join(name)).unwrap();
        let mut buf = BytesMut::from(&data[1..]);
        let mut ic = InboundConnection::new(mpa::BranchId::new(2).unwrap());
        let mut sender = None;
        let mut out = Vec::new();
        while let Ok(Some(ev)) = ic.decode(&mut buf) {
            match ev {
                Inbound::Hello(h) => sender = Some(h.src_branch),
                Inbound::Frame(f) => out.push(admit(&sources, sender.unwrap(), &f)),
            }
        }
        out
    };
    assert_eq!(verdicts("legit_ip"), vec![Ok(())]);
    assert_eq!(
        verdicts("spoofed_branch3"),
        vec![Err(PacketDrop::SpoofedSource)]
    );
    assert_eq!(
        verdicts("spoofed_own_lan"),
        vec![Err(PacketDrop::SpoofedSource)]
    );
    assert_eq!(verdicts("virtio_tso_ok"), vec![Ok(())]);
    assert_eq!(verdicts("virtio_bad_gso"), vec![Err(PacketDrop::BadVirtio)]);
    assert_eq!(
        verdicts("virtio_csum_outside"),
        vec![Err(PacketDrop::BadVirtio)]
    );
    assert_eq!(verdicts("ipv6_allowed"), vec![Ok(())]);
    assert_eq!(
        verdicts("striped_mixed"),
        vec![
            Ok(()),
            Err(PacketDrop::SpoofedSource),
            Err(PacketDrop::Malformed)
        ]
    );
}

/// The seeds decode to what their names say (so the corpus keeps exercising the decoder's paths).
#[test]
fn seeds_mean_what_they_say() {
    use bytes::BytesMut;
    use mpa::framing::{Deframer, FrameError, FrameType, Hello};
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/deframer");
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
    let frames = |data: &[u8]| {
        let mut buf = BytesMut::from(data);
        let mut d = Deframer::new();
        let mut out = Vec::new();
        loop {
            match d.decode(&mut buf) {
                Ok(Some(f)) => out.push(f.header.frame_type),
                Ok(None) => return Ok((out, buf.len())),
                Err(e) => return Err(e),
            }
        }
    };
    let h = read("hello_then_frames");
    let (_, n) = Hello::decode(&h).unwrap().unwrap();
    assert_eq!(
        frames(&h[n..]),
        Ok((vec![FrameType::Ip, FrameType::Keepalive], 0))
    );
    assert_eq!(
        frames(&read("stream_mixed")),
        Ok((
            vec![
                FrameType::Ip,
                FrameType::Keepalive,
                FrameType::IpVirtio,
                FrameType::Control,
                FrameType::Ip
            ],
            0
        ))
    );
    assert_eq!(frames(&read("truncated_frame")), Ok((vec![], 60)));
    assert!(matches!(
        frames(&read("oversize_header")),
        Err(FrameError::Oversize { .. })
    ));
    assert!(matches!(
        frames(&read("bad_ip_length")),
        Err(FrameError::IpLengthMismatch { .. })
    ));
    assert_eq!(
        frames(&read("bad_flags")),
        Err(FrameError::UnknownFlags(0x80))
    );
    assert!(Hello::decode(&read("junk")).is_err());
}
