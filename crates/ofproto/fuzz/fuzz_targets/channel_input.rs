//! Any byte stream, in any chunking, into a connected `Channel`: no panic, valid output.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "checks.rs"]
#[allow(dead_code)] // each target uses one of the shared checks
mod checks;

fuzz_target!(|data: &[u8]| checks::check_channel(data));
