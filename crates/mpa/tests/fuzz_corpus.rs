//! Replays the committed fuzz corpora (`crates/mpa/fuzz/corpus/{deframer,classifier}`) through the
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
