//! What `bench tunnel` runs: its [`Options`], the topology file and the seconds iperf3 omits.

use std::path::PathBuf;

/// The topology: 2 × 2 unlimited uplinks.
pub const TOPOLOGY_FILE: &str = "examples/testbed-2x2-unlimited.toml";
/// Seconds iperf3 omits at the start of each transfer (slow start, buffer growth).
pub(super) const OMIT_SECS: u32 = 2;

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Workspace root (examples, cargo).
    pub root: PathBuf,
    /// Testbed prefix.
    pub prefix: String,
    /// Measured seconds per transfer (`OMIT_SECS` more are sent first).
    pub secs: u32,
    /// Repetitions of the three measurements.
    pub reps: u32,
    /// Rate of every internet uplink (both directions), Mbit/s; `None`: unlimited (CPU-bound,
    /// the emulator bypassed). With a rate the WAN emulator shapes every uplink, as a branch's
    /// DSL/cable/fibre line would: what TLS costs where the links, not the CPU, are the limit.
    pub uplink_mbit: Option<f64>,
}
