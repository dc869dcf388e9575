//! Fuzzes the TC's packet parser and the AQM's CE marking: see `mpa::classifier::fuzz_check`.
//!
//! `cd crates/mpa/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run classifier corpus/classifier -- -max_total_time=60`
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    mpa::classifier::fuzz_check(data);
});
