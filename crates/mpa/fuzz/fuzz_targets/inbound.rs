//! Fuzzes the inbound side of a tunnel connection: the hello + frame state machine
//! (`InboundConnection`) split across two reads, then the receive checks every frame passes
//! (source filter, virtio header, TUN format): see `mpa::gateway::fuzz_check_inbound`.
//!
//! `cd crates/mpa/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run inbound corpus/inbound -- -max_total_time=60`
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    mpa::gateway::fuzz_check_inbound(data);
});
