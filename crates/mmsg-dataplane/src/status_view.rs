//! The human view of `mmsg status` (issue #19): problems first, then one table of tunnel
//! connections and one of subflows, with the current rates, loss and RTT. Rates are the
//! difference of two [`StatusReport`]s taken `interval` apart (the daemon keeps only counters);
//! without a previous report the rate columns show `-`. Pure: report(s) in, text out.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

use comfy_table::{presets, CellAlignment, Table};

use crate::status::{ConnState, ConnStatus, StatusReport, SubflowStatus};

/// A certificate with less than this left is a problem.
const CERT_WARN_S: u64 = 7 * 24 * 3600;

type ConnKey = (String, u8, u8, String, u8);

fn conn_key(c: &ConnStatus) -> ConnKey {
    (
        c.direction.clone(),
        c.remote_branch,
        c.path_group,
        c.class.clone(),
        c.index,
    )
}

fn conn_name(c: &ConnStatus) -> String {
    // The `conn` field of the logs.
    let name = format!(
        "{} b{} g{} {}",
        c.direction, c.remote_branch, c.path_group, c.class
    );
    match c.index {
        0 => name,
        i => format!("{name} #{i}"),
    }
}

/// Mbit/s from a byte difference over `secs` (`-` without a previous sample or on a reset).
fn mbit(now: u64, before: Option<u64>, secs: f64) -> String {
    match before {
        Some(b) if now >= b && secs > 0.0 => format!("{:.2}", (now - b) as f64 * 8.0 / secs / 1e6),
        _ => "-".to_owned(),
    }
}

/// Retransmitted / acknowledged bytes in the interval, %.
fn loss(retrans: (u64, Option<u64>), acked: (u64, Option<u64>)) -> String {
    match (retrans.1, acked.1) {
        (Some(r0), Some(a0)) if retrans.0 >= r0 && acked.0 >= a0 => {
            let (r, a) = (retrans.0 - r0, acked.0 - a0);
            if a + r == 0 {
                "0.0".to_owned()
            } else {
                format!("{:.1}", r as f64 * 100.0 / (a + r) as f64)
            }
        }
        _ => "-".to_owned(),
    }
}

/// `-` without `--pacing`, `startup` until the pacer measured, else the phase and the rate the
/// writer is paced at.
fn pacing_cell(c: &ConnStatus) -> String {
    match &c.pacing {
        None => "-".to_owned(),
        Some(p) if p.rate_bytes_per_second == 0 => p.phase.clone(),
        Some(p) => format!(
            "{} {:.2}",
            p.phase,
            p.rate_bytes_per_second as f64 * 8.0 / 1e6
        ),
    }
}

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    t.set_header(header.to_vec());
    t
}

fn right_align(t: &mut Table, from: usize) {
    let n = t.column_count();
    for i in from..n {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// What needs an operator's eye, most important first.
pub fn problems(now: &StatusReport, prev: Option<&StatusReport>, unix_now: u64) -> Vec<String> {
    let mut p = Vec::new();
    match &now.tls {
        None => p.push("tls OFF: the tunnel runs in clear text".to_owned()),
        Some(t) if t.not_after > 0 && t.not_after < unix_now + CERT_WARN_S => p.push(format!(
            "certificate serial {} expires in {} h",
            t.serial,
            t.not_after.saturating_sub(unix_now) / 3600
        )),
        Some(_) => {}
    }
    if let Some(c) = &now.controller {
        if !c.connected {
            p.push(format!("controller {} {}", c.address, c.state));
        }
        if let Some(e) = &c.last_error {
            p.push(format!("controller last error: {e}"));
        }
    }
    for c in &now.connections {
        if c.state != ConnState::Up {
            p.push(format!("connection {} is {}", conn_name(c), c.state));
            continue;
        }
        let up = c.subflows.iter().filter(|s| s.is_established()).count();
        if c.subflows_wanted > 0 && up < c.subflows_wanted {
            p.push(format!(
                "connection {}: {up} of {} subflows up",
                conn_name(c),
                c.subflows_wanted
            ));
        }
        if c.fallback {
            p.push(format!(
                "connection {}: fell back to plain TCP",
                conn_name(c)
            ));
        }
    }
    if let Some(prev) = prev {
        for (k, v) in &now.counters {
            let before = prev.counters.get(k).copied().unwrap_or(0);
            if k.starts_with("drop_") && *v > before {
                p.push(format!("{k}: +{} in the interval", v - before));
            }
        }
    }
    p
}

/// The whole view. `prev`: the report taken `interval` before `now`, for the rates.
pub fn render(
    now: &StatusReport,
    prev: Option<(&StatusReport, Duration)>,
    unix_now: u64,
) -> String {
    let mut s = String::new();
    let secs = prev.map_or(0.0, |(_, d)| d.as_secs_f64());
    let _ = write!(
        s,
        "branch {}  offload {}  path manager {}",
        now.branch,
        if now.offload { "on" } else { "off" },
        now.path_manager
    );
    match &now.tls {
        Some(t) => {
            let _ = write!(s, "  tls on (serial {}", t.serial);
            if t.not_after > 0 {
                let _ = write!(
                    s,
                    ", {} d left",
                    t.not_after.saturating_sub(unix_now) / 86_400
                );
            }
            if let Some(n) = t.crl_number {
                let _ = write!(s, ", CRL #{n}");
            }
            let _ = write!(s, ")");
        }
        None if now.insecure_clear_tunnels => {
            let _ = write!(s, "  tls OFF (clear tunnel with --insecure-clear-tunnels)");
        }
        None => {
            let _ = write!(s, "  tls OFF");
        }
    }
    if let Some(c) = &now.controller {
        let _ = write!(
            s,
            "  controller {} {} (config v{} from {})",
            c.address, c.state, c.config_version, c.source
        );
    }
    s.push('\n');
    let problems = problems(now, prev.map(|(p, _)| p), unix_now);
    if problems.is_empty() {
        s.push_str("problems: none\n");
    } else {
        s.push_str("problems:\n");
        for p in &problems {
            let _ = writeln!(s, "  ! {p}");
        }
    }

    let before: BTreeMap<ConnKey, &ConnStatus> = prev
        .map(|(p, _)| p.connections.iter().map(|c| (conn_key(c), c)).collect())
        .unwrap_or_default();
    // Problems first: connections that are not up, then by name.
    let mut conns: Vec<&ConnStatus> = now.connections.iter().collect();
    conns.sort_by_key(|c| (c.state == ConnState::Up, conn_key(c)));

    let mut t = table(&[
        "CONNECTION",
        "STATE",
        "SUBFLOWS",
        "TX Mbit/s",
        "RX Mbit/s",
        "RETRANS B",
        "QUEUE B",
        "SOCKET B",
        "BUDGET B",
        "PACING Mbit/s",
    ]);
    for c in &conns {
        let b = before.get(&conn_key(c));
        let up = c.subflows.iter().filter(|s| s.is_established()).count();
        t.add_row(vec![
            conn_name(c),
            format!("{}{}", c.state, if c.fallback { " (TCP)" } else { "" }),
            // Inbound connections do not manage their subflows (the dialling side does).
            if c.subflows_wanted == 0 {
                up.to_string()
            } else {
                format!("{up}/{}", c.subflows_wanted)
            },
            mbit(c.bytes_tx, b.map(|b| b.bytes_tx), secs),
            mbit(c.bytes_rx, b.map(|b| b.bytes_rx), secs),
            c.bytes_retrans.to_string(),
            c.queue_bytes.to_string(),
            c.socket_queued_bytes.to_string(),
            match c.send_time_budget_bytes {
                0 => "-".to_owned(),
                mpa::queue::inflight::MAX_BUDGET => "startup".to_owned(),
                // With the cover for the gateway's own stalls (`mpa::queue::stall`).
                b if c.stall_cover_us > 0 => format!("{b} +{}ms", c.stall_cover_us / 1000),
                b => b.to_string(),
            },
            pacing_cell(c),
        ]);
    }
    right_align(&mut t, 2);
    let _ = writeln!(s, "\n{t}");

    let sub_before = |c: &ConnStatus, sf: &SubflowStatus| -> Option<SubflowStatus> {
        before.get(&conn_key(c)).and_then(|b| {
            b.subflows
                .iter()
                .find(|x| x.local == sf.local && x.remote == sf.remote)
                .cloned()
        })
    };
    let mut t = table(&[
        "CONNECTION",
        "LOCAL",
        "REMOTE",
        "STATE",
        "RTT ms",
        "CWND",
        "TX Mbit/s",
        "RX Mbit/s",
        "LOSS %",
    ]);
    let mut rows = 0;
    for c in &conns {
        let mut subs: Vec<&SubflowStatus> = c.subflows.iter().collect();
        subs.sort_by_key(|sf| (sf.is_established(), sf.local.clone(), sf.remote.clone()));
        for sf in subs {
            let b = sub_before(c, sf);
            t.add_row(vec![
                conn_name(c),
                sf.local.clone(),
                sf.remote.clone(),
                if sf.state.is_empty() {
                    "?".to_owned()
                } else {
                    sf.state.clone()
                },
                format!("{:.1}", f64::from(sf.rtt_us) / 1000.0),
                sf.cwnd.to_string(),
                mbit(sf.bytes_acked, b.as_ref().map(|b| b.bytes_acked), secs),
                mbit(
                    sf.bytes_received,
                    b.as_ref().map(|b| b.bytes_received),
                    secs,
                ),
                loss(
                    (sf.bytes_retrans, b.as_ref().map(|b| b.bytes_retrans)),
                    (sf.bytes_acked, b.as_ref().map(|b| b.bytes_acked)),
                ),
            ]);
            rows += 1;
        }
    }
    if rows > 0 {
        right_align(&mut t, 4);
        let _ = writeln!(s, "\n{t}");
    }

    if let Some(i) = &now.internet {
        let mut t = table(&[
            "UPLINK",
            "DEV",
            "ADDRESS",
            "CAPACITY Mbit/s",
            "AVAILABLE kbit/s",
            "WEIGHT",
            "FLOWS",
        ]);
        for u in &i.uplinks {
            t.add_row(vec![
                format!("wan{}", u.port),
                u.dev.clone(),
                u.address.clone(),
                u.capacity_mbit.to_string(),
                u.available_kbit.to_string(),
                u.weight.to_string(),
                u.flows.to_string(),
            ]);
        }
        let _ = writeln!(s, "\ninternet policy {}\n{t}", i.policy);
    }

    if !now.autorate.is_empty() {
        let mut t = table(&[
            "PORT",
            "DEV",
            "RATE kbit/s",
            "MAX kbit/s",
            "SENT kbit/s",
            "WAN QUEUE ms",
            "DOWN",
            "UP",
        ]);
        for p in &now.autorate {
            t.add_row(vec![
                format!("wan{}", p.port),
                p.dev.clone(),
                p.rate_kbit.to_string(),
                p.max_kbit.to_string(),
                p.sent_kbit.to_string(),
                p.wan_queue_us
                    .map_or_else(|| "-".to_owned(), |q| format!("{:.1}", q as f64 / 1000.0)),
                p.downs.to_string(),
                p.ups.to_string(),
            ]);
        }
        let _ = writeln!(s, "\nautorate (WAN egress shaping follows the uplink)\n{t}");
    }

    let mut t = table(&["COUNTER", "VALUE", "DELTA"]);
    for (k, v) in now.counters.iter().filter(|(_, v)| **v > 0) {
        let delta = prev
            .and_then(|(p, _)| p.counters.get(k))
            .map_or_else(|| "-".to_owned(), |b| v.saturating_sub(*b).to_string());
        t.add_row(vec![k.clone(), v.to_string(), delta]);
    }
    right_align(&mut t, 1);
    let _ = writeln!(s, "\ncounters (non-zero)\n{t}");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{PacingStatus, TlsStatus};

    fn report(bytes: u64, drops: u64) -> StatusReport {
        StatusReport {
            branch: 1,
            offload: true,
            insecure_clear_tunnels: false,
            path_manager: "userspace".into(),
            connections: vec![
                ConnStatus {
                    direction: "out".into(),
                    remote_branch: 2,
                    path_group: 0,
                    class: "type2".into(),
                    state: ConnState::Up,
                    subflows_wanted: 2,
                    bytes_tx: bytes,
                    send_time_budget_bytes: 61_440,
                    pacing: Some(PacingStatus {
                        phase: "probe_bw".into(),
                        gain_percent: 125,
                        rate_bytes_per_second: 1_562_500,
                        bottleneck_bytes_per_second: 1_250_000,
                        round_us: 20_600,
                        queue_delay_us: 3_000,
                    }),
                    subflows: vec![SubflowStatus {
                        local: "198.18.10.2:40000".into(),
                        remote: "198.18.20.2:45056".into(),
                        state: "established".into(),
                        rtt_us: 1500,
                        cwnd: 10,
                        bytes_acked: bytes,
                        bytes_received: 0,
                        bytes_retrans: bytes / 100,
                    }],
                    ..ConnStatus::default()
                },
                ConnStatus {
                    direction: "out".into(),
                    remote_branch: 3,
                    path_group: 1,
                    class: "type2".into(),
                    state: ConnState::Backoff,
                    ..ConnStatus::default()
                },
            ],
            counters: [("drop_codel".to_owned(), drops)].into_iter().collect(),
            controller: None,
            tls: Some(TlsStatus {
                serial: 7,
                reloads: 0,
                not_after: 2_000_000_000,
                crl_next_update: None,
                crl_number: None,
            }),
            internet: None,
            reseq: None,
            autorate: Vec::new(),
        }
    }

    #[test]
    fn rates_loss_and_problems_first() {
        let a = report(0, 1);
        let b = report(1_250_000, 3);
        let text = render(&b, Some((&a, Duration::from_secs(1))), 1_000_000_000);
        // 1.25 MB in 1 s = 10 Mbit/s on the connection and on its subflow; 1 % retransmitted.
        assert!(text.contains("10.00"), "{text}");
        assert!(text.contains("1.0"), "{text}");
        let problems = text.find("connection out b3 g1 type2 is backoff").unwrap();
        let subflows = text.find("1 of 2 subflows up").unwrap();
        assert!(problems < text.find("CONNECTION").unwrap());
        assert!(subflows < text.find("CONNECTION").unwrap());
        assert!(text.contains("drop_codel: +2 in the interval"), "{text}");
        // The connection that is down comes first in the table.
        let down = text.rfind("out b3 g1 type2").unwrap();
        let up = text.rfind("out b2 g0 type2").unwrap();
        assert!(down < up, "{text}");
        // The latency controls: the send time budget's bytes, the pacer's phase and rate
        // (1.5625 MB/s = 12.50 Mbit/s); `-` where they are off.
        assert!(text.contains("61440"), "{text}");
        assert!(text.contains("probe_bw 12.50"), "{text}");
        let down_row = text
            .lines()
            .find(|l| l.trim_start().starts_with("out b3 g1 type2"))
            .unwrap();
        let cells: Vec<&str> = down_row.split_whitespace().collect();
        assert_eq!(cells[cells.len() - 2..], ["-", "-"], "{text}");
        // A table crate lays out the columns, no escape codes.
        assert!(!text.contains('\u{1b}'));
    }

    /// The table row of the example's outbound Type II connection.
    fn conn_row(text: &str) -> &str {
        text.lines()
            .find(|l| l.trim_start().starts_with("out b2 g0 type2"))
            .unwrap()
    }

    /// A budget still in start-up (no cap) reads `startup`, not 16 MiB.
    #[test]
    fn a_budget_in_startup_says_so() {
        let mut r = report(5, 0);
        r.connections[0].send_time_budget_bytes = mpa::queue::inflight::MAX_BUDGET;
        let text = render(&r, None, 1_000_000_000);
        let row = conn_row(&text);
        assert!(row.contains(" startup "), "{text}");
        assert!(!text.contains("16777216"), "{text}");
    }

    /// The budget's cover for the gateway's own stalls follows the budget (`mpa::queue::stall`).
    #[test]
    fn a_budget_with_a_stall_cover_shows_it() {
        let mut r = report(5, 0);
        r.connections[0].send_time_budget_bytes = 96_320;
        r.connections[0].stall_cover_us = 27_400;
        let text = render(&r, None, 1_000_000_000);
        let row = conn_row(&text);
        assert!(row.contains(" 96320 +27ms "), "{text}");
    }

    #[test]
    fn without_a_previous_report_rates_are_dashes() {
        let text = render(&report(5, 0), None, 1_000_000_000);
        assert!(text.contains(" - "), "{text}");
        assert!(text.contains("problems:"), "{text}");
    }
}
