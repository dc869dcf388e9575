//! Fuzzes the tunnel's accepting side: arbitrary client bytes into the gateway's rustls server
//! configuration, then the hello/frame decoders on any plaintext. See `pki::fuzz::handshake_check`
//! for the invariants.
//!
//! Run (stable toolchain, DESIGN §4):
//! `cd crates/pki/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run handshake corpus/handshake -- -max_total_time=60`
//! The committed seeds in `corpus/handshake` are replayed by `crates/pki/tests/fuzz_corpus.rs` on
//! every `cargo test -p pki`; add any crash input there once fixed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    pki::fuzz::handshake_check(data, mpa::framing::fuzz_check);
});
