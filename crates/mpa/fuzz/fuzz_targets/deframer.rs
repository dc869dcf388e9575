//! Fuzzes the hello decoder and the streaming deframer with round-trip checks, not just "no panic":
//! see `mpa::framing::fuzz_check` for the invariants.
//!
//! Run (stable toolchain, DESIGN §4):
//! `cd crates/mpa/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run deframer corpus/deframer -- -max_total_time=60`
//! The committed seed corpus in `corpus/deframer` is replayed by `crates/mpa/tests/fuzz_corpus.rs` on
//! every `cargo test -p mpa`; add any crash input there once fixed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    mpa::framing::fuzz_check(data);
});
