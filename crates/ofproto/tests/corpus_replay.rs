//! Replays the committed cargo-fuzz seed corpora (`fuzz/corpus/*`) through the same checks as the
//! fuzz targets, so CI exercises them on stable without cargo-fuzz.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../fuzz/fuzz_targets/checks.rs"]
mod checks;

use std::path::Path;

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let p = e.unwrap().path();
            (p.display().to_string(), std::fs::read(&p).unwrap())
        })
        .collect();
    v.sort();
    v
}

#[test]
fn decode_message_corpus() {
    let c = corpus("decode_message");
    assert!(c.len() >= 60, "corpus has only {} files", c.len());
    let mut decoded = 0;
    for (name, data) in &c {
        let r = std::panic::catch_unwind(|| checks::check_message(data));
        assert!(r.is_ok(), "corpus file {name} fails the fuzz checks");
        decoded += usize::from(ofproto::Message::decode_exact(data).is_ok());
    }
    // The seeds are mostly valid messages (the golden vectors) plus malformed variants.
    assert!(decoded >= 60, "only {decoded} corpus files decode");
}

#[test]
fn channel_input_corpus() {
    let c = corpus("channel_input");
    assert!(!c.is_empty());
    for (name, data) in &c {
        let r = std::panic::catch_unwind(|| checks::check_channel(data));
        assert!(
            r.is_ok(),
            "corpus file {name} fails the channel fuzz checks"
        );
    }
}
