//! The state file of a running testbed (`state.json` in its state directory).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::names::state_dir;
use crate::topology::Topology;

/// Persistent description of a running testbed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct State {
    /// Name prefix.
    pub prefix: String,
    /// The topology it was built from (with run-time `link set` changes applied).
    pub topology: Topology,
    /// Ports currently cut.
    pub cut: BTreeSet<String>,
    /// Processes we started: name → PID.
    pub pids: BTreeMap<String, u32>,
    /// Whether OVS was started in each gateway.
    pub ovs: bool,
}

/// Reads the state of testbed `prefix`.
pub fn load_state(prefix: &str) -> anyhow::Result<State> {
    let path = state_dir(prefix).join("state.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("testbed {prefix:?} is not up (no {})", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parse {}", path.display()))
}

/// Writes the state of its testbed (atomically, through a temporary file).
pub(super) fn save_state(state: &State) -> anyhow::Result<()> {
    let dir = state_dir(&state.prefix);
    let tmp = dir.join("state.json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(state)?)?;
    std::fs::rename(&tmp, dir.join("state.json"))?;
    Ok(())
}
