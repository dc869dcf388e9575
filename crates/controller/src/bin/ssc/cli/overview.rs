//! `ssc status`: the whole network on one screen (issue #19), like `tailscale status`: problems
//! first, then every branch (gateway, switch, WAN ports, tunnels, drops) and every ordered pair
//! with traffic or path groups (groups up, current Mbit/s from the SDC, WRR weights). Read-only:
//! four GETs of the REST API (branches, gateways, stats, weights).
use std::collections::BTreeMap;

use anyhow::Context;
use comfy_table::{presets, CellAlignment, Table};
use controller::gwchan::{GatewayList, GatewayView};
use controller::inventory::Branch;
use controller::sdc::StatsView;
use controller::ui::api::WeightList;

use super::{print_json, ClientArgs};

/// A report older than this is a problem (gateways report every few seconds).
const STALE_REPORT_MS: u64 = 15_000;

/// What `ssc status` reads.
#[derive(Debug)]
pub(crate) struct Overview {
    branches: Vec<Branch>,
    gateways: GatewayList,
    stats: Option<StatsView>,
    weights: Option<WeightList>,
}

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    t.set_header(header.to_vec());
    t
}

fn right_align(t: &mut Table, cols: &[usize]) {
    for &i in cols {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}

impl Overview {
    fn gateway(&self, b: u8) -> Option<&GatewayView> {
        self.gateways.gateways.iter().find(|g| g.branch == b)
    }

    fn switch(&self, b: u8) -> Option<&controller::sdc::BranchStats> {
        self.stats
            .as_ref()
            .and_then(|s| s.branches.iter().find(|x| x.branch == b))
    }

    /// What needs an operator's eye.
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        for br in &self.branches {
            let b = br.id.get();
            match self.gateway(b) {
                None => p.push(format!(
                    "branch {b} ({}): gateway never registered",
                    br.name
                )),
                Some(g) if !g.connected => {
                    p.push(format!("branch {b} ({}): gateway disconnected", br.name));
                }
                Some(g) => {
                    if g.config_version_acked < g.config_version {
                        p.push(format!(
                            "branch {b}: gateway runs config v{} of v{}",
                            g.config_version_acked, g.config_version
                        ));
                    }
                    if let Some(e) = &g.last_error {
                        p.push(format!("branch {b}: gateway refused a config: {e}"));
                    }
                    if g.last_report_age_ms.is_some_and(|a| a > STALE_REPORT_MS) {
                        p.push(format!(
                            "branch {b}: no report for {} s",
                            g.last_report_age_ms.unwrap_or(0) / 1000
                        ));
                    }
                    if let Some(r) = &g.last_report {
                        for gr in r.groups.iter().filter(|gr| !gr.up) {
                            p.push(format!(
                                "pair {b} -> {}: path group {} down",
                                gr.branch, gr.group
                            ));
                        }
                    }
                }
            }
            if self.stats.as_ref().is_some_and(|s| s.available)
                && !self.switch(b).is_some_and(|s| s.connected)
            {
                p.push(format!("branch {b}: OVS not connected over OpenFlow"));
            }
        }
        p
    }

    /// The text view.
    pub(crate) fn render(&self) -> String {
        let mut s = String::new();
        let connected = self
            .gateways
            .gateways
            .iter()
            .filter(|g| g.connected)
            .count();
        let switches = self
            .stats
            .as_ref()
            .map_or(0, |st| st.branches.iter().filter(|b| b.connected).count());
        s.push_str(&format!(
            "{} branches, {connected} gateways connected, {switches} switches connected\n",
            self.branches.len()
        ));
        let problems = self.problems();
        if problems.is_empty() {
            s.push_str("problems: none\n");
        } else {
            s.push_str("problems:\n");
            for p in &problems {
                s.push_str(&format!("  ! {p}\n"));
            }
        }

        let mut t = table(&[
            "BRANCH", "NAME", "GATEWAY", "CONFIG", "SWITCH", "PORTS UP", "TUNNELS", "DROPS",
            "REPORT",
        ]);
        // Problems first: branches whose gateway is not connected.
        let mut branches: Vec<&Branch> = self.branches.iter().collect();
        branches.sort_by_key(|b| (self.gateway(b.id.get()).is_some_and(|g| g.connected), b.id));
        for br in branches {
            let b = br.id.get();
            let g = self.gateway(b);
            let report = g.and_then(|g| g.last_report.as_ref());
            t.add_row(vec![
                b.to_string(),
                br.name.clone(),
                match g {
                    Some(g) if g.connected => format!("up {}", g.peer),
                    Some(_) => "DOWN".to_owned(),
                    None => "never".to_owned(),
                },
                g.map_or_else(
                    || "-".to_owned(),
                    |g| format!("v{}/v{}", g.config_version_acked, g.config_version),
                ),
                match self.switch(b) {
                    Some(sw) if sw.connected => "up".to_owned(),
                    Some(_) => "DOWN".to_owned(),
                    None => "-".to_owned(),
                },
                // WAN ports the gateway reports having vs the inventory's.
                format!("{}/{}", g.map_or(0, |g| g.wan.len()), br.wan.len()),
                report.map_or_else(
                    || "-".to_owned(),
                    |r| format!("{}/{}", r.connections_up, r.connections_total),
                ),
                report.map_or_else(|| "-".to_owned(), |r| r.drops.to_string()),
                g.and_then(|g| g.last_report_age_ms).map_or_else(
                    || "-".to_owned(),
                    |a| format!("{:.0} s ago", a as f64 / 1000.0),
                ),
            ]);
        }
        right_align(&mut t, &[0, 7]);
        s.push_str(&format!("\n{t}\n"));

        // Pairs: path groups up (source gateway's report), SDC rate, WRR weights.
        #[derive(Default)]
        struct Pair {
            up: usize,
            groups: usize,
            fwd_bps: Option<f64>,
            weights: Vec<String>,
        }
        let mut pairs: BTreeMap<(u8, u8), Pair> = BTreeMap::new();
        for g in &self.gateways.gateways {
            for gr in g.last_report.iter().flat_map(|r| &r.groups) {
                let p = pairs.entry((g.branch, gr.branch)).or_default();
                p.groups += 1;
                p.up += usize::from(gr.up);
            }
        }
        for st in self.stats.iter().flat_map(|s| &s.pairs) {
            pairs
                .entry((st.source, st.destination))
                .or_default()
                .fwd_bps = Some(st.traffic.forward_bits_per_s);
        }
        for w in self.weights.iter().flat_map(|w| &w.pairs) {
            pairs.entry((w.source, w.destination)).or_default().weights = w
                .groups
                .iter()
                .map(|g| format!("g{}:{}", g.group, g.weight))
                .collect();
        }
        let mut t = table(&["PAIR", "GROUPS UP", "Mbit/s", "WRR WEIGHTS"]);
        let mut rows: Vec<_> = pairs.into_iter().collect();
        rows.sort_by_key(|((a, z), p)| (p.groups > 0 && p.up == p.groups, *a, *z));
        for ((a, z), p) in rows {
            t.add_row(vec![
                format!("{a} -> {z}"),
                if p.groups == 0 {
                    "-".to_owned()
                } else {
                    format!("{}/{}", p.up, p.groups)
                },
                p.fwd_bps
                    .map_or_else(|| "-".to_owned(), |b| format!("{:.2}", b / 1e6)),
                p.weights.join(" "),
            ]);
        }
        right_align(&mut t, &[1, 2]);
        s.push_str(&format!("\n{t}\n"));
        s
    }
}

/// `ssc status`.
pub(crate) fn status(c: ClientArgs) -> anyhow::Result<()> {
    let client = c.client();
    let branches = client.get("/api/v1/branches")?;
    let gateways = client.get("/api/v1/gateways")?;
    let stats = client.get("/api/v1/stats")?;
    let weights = client.get("/api/v1/weights")?;
    if c.json {
        return print_json(&serde_json::json!({
            "branches": branches, "gateways": gateways, "stats": stats, "weights": weights,
        }));
    }
    let o = Overview {
        branches: serde_json::from_value(branches).context("branches from the API")?,
        gateways: serde_json::from_value(gateways).context("gateways from the API")?,
        // Without an OpenFlow server the API says `available: false` in another shape.
        stats: serde_json::from_value(stats).ok(),
        weights: serde_json::from_value(weights).ok(),
    };
    print!("{}", o.render());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn branch(id: u8) -> Branch {
        serde_json::from_value(serde_json::json!({
            "id": id, "name": format!("site{id}"),
            "wan": [{"port": "a", "address": format!("198.18.{}.2/24", 10 * id),
                     "gateway": format!("198.18.{}.1", 10 * id), "capacity_mbps": 10}],
        }))
        .unwrap()
    }

    #[test]
    fn problems_first_then_branches_and_pairs() {
        let report = mpa::gwchan::Report {
            healthy: false,
            connections_up: 1,
            connections_total: 2,
            groups: vec![
                mpa::gwchan::GroupReport {
                    branch: 2,
                    group: 0,
                    up: true,
                    ..Default::default()
                },
                mpa::gwchan::GroupReport {
                    branch: 2,
                    group: 1,
                    up: false,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let o = Overview {
            branches: vec![branch(1), branch(2)],
            gateways: GatewayList {
                gateways: vec![GatewayView {
                    branch: 1,
                    connected: true,
                    peer: "198.18.10.2:40000".into(),
                    software_version: String::new(),
                    wan: Vec::new(),
                    config_version: 3,
                    config_version_sent: 3,
                    config_version_acked: 3,
                    last_error: None,
                    last_report: Some(report),
                    last_report_age_ms: Some(1000),
                    sessions: 1,
                    wan_learned: None,
                }],
                ..GatewayList::default()
            },
            stats: None,
            weights: None,
        };
        let text = o.render();
        let problems = text.find("problems:").unwrap();
        let never = text
            .find("branch 2 (site2): gateway never registered")
            .unwrap();
        let down = text.find("pair 1 -> 2: path group 1 down").unwrap();
        let table = text.find("BRANCH").unwrap();
        assert!(problems < never && never < table && down < table, "{text}");
        // Branch 2 (gateway never seen) is listed before branch 1.
        assert!(
            text.find("site2").unwrap() < text.find("site1").unwrap(),
            "{text}"
        );
        assert!(text.contains("1/2"), "tunnels and groups up: {text}");
        assert!(!text.contains('\u{1b}'));
    }
}
