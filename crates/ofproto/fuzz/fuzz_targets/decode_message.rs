//! Any bytes through `Message::decode`: no panic, canonical round-trip (see `checks.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "checks.rs"]
#[allow(dead_code)] // each target uses one of the shared checks
mod checks;

fuzz_target!(|data: &[u8]| checks::check_message(data));
