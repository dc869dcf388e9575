//! `testbed status`: what each testbed has (state file, namespaces, processes, cut ports,
//! impairments, emulator counters) and its printout.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::names::{
    is_our_ns, list_netns, ns_pids, our_netns, state_dir, validate_prefix, STATE_ROOT,
};
use super::state::load_state;
use crate::topology::{Impairment, ResolvedPort};

/// What `status` reports about one testbed.
#[derive(Debug, Serialize)]
pub struct Status {
    /// Prefix.
    pub prefix: String,
    /// Whether a state file exists.
    pub has_state: bool,
    /// Namespaces that exist.
    pub namespaces: Vec<String>,
    /// Processes in those namespaces: PID → command name.
    pub processes: BTreeMap<u32, String>,
    /// Cut ports.
    pub cut: Vec<String>,
    /// Ports with their addresses and impairments (from the state file).
    pub ports: Vec<ResolvedPort>,
    /// Emulator counters, if it wrote them.
    pub wanem: Option<serde_json::Value>,
}

/// Status of every testbed found (by state directory or by namespace names), or of one.
pub fn status(only: Option<&str>) -> anyhow::Result<Vec<Status>> {
    let mut prefixes = BTreeSet::new();
    if let Ok(rd) = std::fs::read_dir(STATE_ROOT) {
        for e in rd.flatten() {
            prefixes.insert(e.file_name().to_string_lossy().into_owned());
        }
    }
    for n in list_netns()? {
        if let Some((p, _)) = n.split_once('-') {
            if validate_prefix(p).is_ok() && is_our_ns(p, &n) {
                prefixes.insert(p.to_owned());
            }
        }
    }
    let mut out = Vec::new();
    for p in prefixes {
        if only.is_some_and(|o| o != p) {
            continue;
        }
        let namespaces = our_netns(&p)?;
        let mut processes = BTreeMap::new();
        for n in &namespaces {
            for pid in ns_pids(n) {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                processes.insert(pid, comm.trim().to_owned());
            }
        }
        let state = load_state(&p).ok();
        let wanem = std::fs::read_to_string(state_dir(&p).join("wanem-stats.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        out.push(Status {
            prefix: p.clone(),
            has_state: state.is_some(),
            namespaces,
            processes,
            cut: state
                .as_ref()
                .map(|s| s.cut.iter().cloned().collect())
                .unwrap_or_default(),
            ports: state.map(|s| s.topology.ports()).unwrap_or_default(),
            wanem,
        });
    }
    Ok(out)
}

/// Human-readable status.
pub fn print_status(all: &[Status]) {
    if all.is_empty() {
        println!("no testbed is up");
    }
    for s in all {
        println!(
            "testbed {} ({} namespaces, {} processes{})",
            s.prefix,
            s.namespaces.len(),
            s.processes.len(),
            if s.has_state {
                ""
            } else {
                ", no state file: run `down`"
            }
        );
        for n in &s.namespaces {
            println!("  netns {n}");
        }
        for (pid, comm) in &s.processes {
            println!("  pid {pid} {comm}");
        }
        for port in &s.ports {
            let cut = if s.cut.contains(&port.id.to_string()) {
                " CUT"
            } else {
                ""
            };
            println!(
                "  port {} {:?} {} via {} up={} down={}{cut}",
                port.id,
                port.kind,
                port.addr,
                port.next_hop,
                describe(&port.up),
                describe(&port.down)
            );
        }
    }
}

/// Short text of an impairment, e.g. `40Mbit/10ms`.
pub fn describe(imp: &Impairment) -> String {
    if imp.is_none() {
        return "-".to_owned();
    }
    let mut parts = Vec::new();
    if let Some(r) = imp.rate_mbit {
        parts.push(format!("{r}Mbit"));
    }
    if let Some(d) = imp.delay_ms.filter(|d| *d > 0.0) {
        parts.push(format!("{d}ms"));
    }
    if let Some(j) = imp.jitter_ms.filter(|d| *d > 0.0) {
        parts.push(format!("±{j}ms"));
    }
    if let Some(l) = imp.loss_pct.filter(|d| *d > 0.0) {
        parts.push(format!("{l}%loss"));
    }
    if let Some(l) = imp.burst_loss_pct.filter(|d| *d > 0.0) {
        parts.push(format!("{l}%burst"));
    }
    parts.join("/")
}
