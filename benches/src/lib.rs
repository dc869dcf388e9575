//! criterion benchmarks over the MMS crates live in `benches/benches/`; run `cargo bench -p mms-benches`.
