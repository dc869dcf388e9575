//! The checks every fuzz input goes through. Shared, via `#[path]`, by the cargo-fuzz targets in
//! this directory and by `tests/corpus_replay.rs`, which replays the committed corpus on stable.

use std::time::{Duration, Instant};

use ofproto::channel::{Channel, Config};
use ofproto::message::Hello;
use ofproto::{Body, Message};

/// Decoding any bytes never panics; whatever decodes re-encodes to a canonical form that
/// decodes to the same message and re-encodes to the same bytes (decode→encode of a canonical
/// message is the identity), with `encoded_len` equal to the bytes written.
pub fn check_message(data: &[u8]) {
    // The streaming framer: need-more-bytes, a message, or an error; never a panic.
    if let Ok(Some((_, used))) = Message::decode(data) {
        assert!(used <= data.len());
    }
    let Ok(m) = Message::decode_exact(data) else {
        return;
    };
    let canonical = m
        .to_bytes()
        .unwrap_or_else(|e| panic!("decoded message does not re-encode: {e}: {m:?}"));
    assert_eq!(canonical.len(), m.encoded_len(), "encoded_len: {m:?}");
    assert!(canonical.len() <= data.len(), "canonical form grew: {m:?}");
    let m2 = Message::decode_exact(&canonical)
        .unwrap_or_else(|e| panic!("canonical bytes do not decode: {e}: {m:?}"));
    assert_eq!(m2, m, "decode(encode(decode(b))) != decode(b)");
    let again = m2.to_bytes().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again, canonical, "encode(decode(canonical)) != canonical");
}

/// Feeding any byte stream, in any chunking, to a channel never panics, and every byte it wants
/// to send decodes as a valid message.
pub fn check_channel(data: &[u8]) {
    let t0 = Instant::now();
    let mut c = Channel::new(t0, Config::default());
    let mut hello = Vec::new();
    Message::new(1, Body::Hello(Hello::v1_3()))
        .encode(&mut hello)
        .unwrap_or_else(|e| panic!("{e}"));
    c.handle_input(t0, &hello);
    // First byte picks the chunk size, so the corpus also explores split frames.
    let (chunk, rest) = match data.split_first() {
        Some((c, r)) => (usize::from(*c % 64) + 1, r),
        None => (1, data),
    };
    let mut now = t0;
    for part in rest.chunks(chunk) {
        now += Duration::from_millis(10);
        c.handle_input(now, part);
        if let Some(t) = c.poll_timeout() {
            if t <= now {
                c.handle_timeout(now);
            }
        }
        while c.poll_event().is_some() {}
        let mut out = Vec::new();
        c.poll_transmit(&mut out);
        let mut b = &out[..];
        while !b.is_empty() {
            match Message::decode(b) {
                Ok(Some((_, n))) => b = &b[n..],
                other => panic!("channel emitted undecodable bytes: {other:?}"),
            }
        }
    }
    c.handle_timeout(now + Duration::from_secs(60));
    while c.poll_event().is_some() {}
}
