//! Fuzzes the decision of the CRL push handler (`pki::crl::check_update`, what `mmsg` runs on
//! every CRL the controller pushes over the gateway channel): arbitrary PEM or DER against the
//! committed fuzz CA (`crl_ca.pem`, its key thrown away), with crl_number 4 in use. See
//! `pki::fuzz::crl_push_check` for the invariants.
//!
//! Run: `cd crates/pki/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run crl_push corpus/crl_push -- -max_total_time=60`
//! The committed seeds in `corpus/crl_push` are replayed by `crates/pki/tests/fuzz_corpus.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

const CA: &[u8] = include_bytes!("../crl_ca.pem");

fuzz_target!(|data: &[u8]| {
    pki::fuzz::crl_push_check(CA, data);
});
