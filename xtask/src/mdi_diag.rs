//! Where the inner TCP's goodput goes in one run of `experiment mdi` ([`crate::mdi`]): the
//! counters of the sending and the receiving host (`nstat` in their namespaces), iperf3's own view
//! of the sender (largest cwnd, mean and largest RTT), and the gateways sampled every
//! [`SAMPLE_EVERY`] during the transfer (`mmsg status`): each path's subflow RTT and its queued
//! bytes at gw1 (the gateway's queue and the socket's unsent bytes), gw1's drops, gw2's hold time
//! in force against the skew it measured, and which path carried the inner TCP's ACKs (gw2's
//! outbound bytes per group). Everything lands in [`crate::mdi::Run::diag`] under the names below.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::sh;

/// How often the gateways are sampled during a transfer.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(500);

/// Counters of the sending host (h1), as differences over the run: retransmitted segments, SACK
/// reordering detected, DSACKs received (spurious retransmits), RTOs, spurious RTOs, slow-start
/// exits by HyStart (ACK train, delay increase), recoveries entered, and undone cwnd reductions.
pub const SENDER_NSTAT: [&str; 11] = [
    "TcpRetransSegs",
    "TcpExtTCPSACKReorder",
    "TcpExtTCPDSACKRecv",
    "TcpExtTCPTimeouts",
    "TcpExtTCPSpuriousRTOs",
    "TcpExtTCPHystartTrainDetect",
    "TcpExtTCPHystartDelayDetect",
    "TcpExtTCPSackRecovery",
    "TcpExtTCPLossUndo",
    "TcpExtTCPFullUndo",
    "TcpExtTCPDSACKUndo",
];
/// Counters of the receiving host (h2): segments queued out of order, DSACKs sent (segments it
/// got twice).
pub const RECEIVER_NSTAT: [&str; 2] = ["TcpExtTCPOFOQueue", "TcpExtTCPDSACKOldSent"];

/// Absolute values of `names` in namespace `ns` (`nstat -asz`; missing ones are 0).
pub fn nstat(ns: &str, names: &[&str]) -> BTreeMap<String, u64> {
    let mut args = vec!["-asz"];
    args.extend_from_slice(names);
    let out = sh::ns(ns, "nstat", &args).unwrap_or_default();
    parse_nstat(&out, names)
}

/// The values of `names` in `nstat` output ("Name value rate" lines).
pub fn parse_nstat(out: &str, names: &[&str]) -> BTreeMap<String, u64> {
    let mut m: BTreeMap<String, u64> = names.iter().map(|n| ((*n).to_owned(), 0)).collect();
    for line in out.lines() {
        let mut it = line.split_whitespace();
        if let (Some(name), Some(v)) = (it.next(), it.next()) {
            if let (Some(slot), Ok(v)) = (m.get_mut(name), v.parse::<u64>()) {
                *slot = v;
            }
        }
    }
    m
}

/// `after − before` for every name, into `diag` (as f64).
pub fn add_deltas(
    diag: &mut BTreeMap<String, f64>,
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) {
    for (k, v) in after {
        let d = v.saturating_sub(before.get(k).copied().unwrap_or(0));
        diag.insert(k.clone(), d as f64);
    }
}

/// Runs `work` on a thread and calls `sample` every [`SAMPLE_EVERY`] until it returns.
pub fn sample_during<T: Send>(work: impl FnOnce() -> T + Send, mut sample: impl FnMut()) -> T {
    std::thread::scope(|s| {
        let h = s.spawn(work);
        let mut next = Instant::now();
        while !h.is_finished() {
            if Instant::now() >= next {
                sample();
                next += SAMPLE_EVERY;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        match h.join() {
            Ok(v) => v,
            Err(e) => std::panic::resume_unwind(e),
        }
    })
}

/// iperf3's sender view: largest cwnd (KB), mean and largest RTT (ms).
pub fn iperf_sender(v: &Value, diag: &mut BTreeMap<String, f64>) {
    let s = v.pointer("/end/streams/0/sender");
    let get = |k: &str| s.and_then(|s| s.get(k)).and_then(Value::as_f64);
    if let Some(c) = get("max_snd_cwnd") {
        diag.insert("cwnd_max_kb".into(), c / 1000.0);
    }
    if let Some(r) = get("mean_rtt") {
        diag.insert("rtt_mean_ms".into(), r / 1000.0);
    }
    if let Some(r) = get("max_rtt") {
        diag.insert("rtt_max_ms".into(), r / 1000.0);
    }
}

fn median(v: &mut [f64]) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len().checked_sub(1)? / 2).copied()
}

/// Outbound connections towards `remote` of group `g` in one status.
fn conns(status: &Value, remote: u8, g: u8) -> impl Iterator<Item = &Value> {
    status["connections"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(move |c| {
            c["direction"] == "out" && c["remote_branch"] == remote && c["path_group"] == g
        })
}

/// Summarises the samples of gw1 (sender side, towards branch 2) and gw2 (receiver, towards 1):
/// per path (group 0 = A, 1 = B) the median subflow RTT (`rtt_{a,b}_ms`) and the largest queued
/// bytes at gw1 (`gwq_{a,b}_kb`: the gateway's queue, `sockq_{a,b}_kb`: the socket's unsent
/// bytes); gw2's hold in force (`hold_ms_mean`, `hold_ms_max`), the hold from the paths alone
/// (`base_hold_ms_mean`) and the largest measured skew (`skew_ms_max`).
pub fn summarise(gw1: &[Value], gw2: &[Value]) -> BTreeMap<String, f64> {
    let mut d = BTreeMap::new();
    for (g, tag) in [(0u8, "a"), (1u8, "b")] {
        let mut rtts: Vec<f64> = gw1
            .iter()
            .flat_map(|s| conns(s, 2, g).collect::<Vec<_>>())
            .flat_map(|c| c["subflows"].as_array().cloned().unwrap_or_default())
            .filter(|sf| sf["state"] == "established")
            .filter_map(|sf| sf.get("rtt_us").and_then(Value::as_f64))
            .filter(|r| *r > 0.0)
            .map(|r| r / 1000.0)
            .collect();
        if let Some(m) = median(&mut rtts) {
            d.insert(format!("rtt_{tag}_ms"), m);
        }
        for (field, name) in [("queue_bytes", "gwq"), ("socket_queued_bytes", "sockq")] {
            let max = gw1
                .iter()
                .map(|s| {
                    conns(s, 2, g)
                        .filter_map(|c| c[field].as_f64())
                        .sum::<f64>()
                })
                .fold(0.0, f64::max);
            d.insert(format!("{name}_{tag}_kb"), max / 1000.0);
        }
    }
    let reseq: Vec<&Value> = gw2.iter().filter_map(|s| s.get("reseq")).collect();
    let col = |k: &str| -> Vec<f64> { reseq.iter().filter_map(|r| r[k].as_f64()).collect() };
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let hold = col("hold_ms");
    if let Some(m) = mean(&hold) {
        d.insert("hold_ms_mean".into(), m);
        d.insert(
            "hold_ms_max".into(),
            hold.iter().copied().fold(0.0, f64::max),
        );
    }
    if let Some(m) = mean(&col("base_hold_ms")) {
        d.insert("base_hold_ms_mean".into(), m);
    }
    let skew = col("measured_skew_ms");
    if !skew.is_empty() {
        d.insert(
            "skew_ms_max".into(),
            skew.iter().copied().fold(0.0, f64::max),
        );
    }
    d
}

/// Share of gw2's outbound bytes towards branch 1 that went on group 1 (path B) between two
/// statuses: where the inner TCP's ACKs travelled (`ack_on_b`, 0..1).
pub fn ack_share_b(before: &Value, after: &Value) -> Option<f64> {
    let b = crate::e2e::group_bytes_tx(before, 1);
    let a = crate::e2e::group_bytes_tx(after, 1);
    let delta = |g: u8| {
        a.get(&g)
            .copied()
            .unwrap_or(0)
            .saturating_sub(b.get(&g).copied().unwrap_or(0)) as f64
    };
    let total = delta(0) + delta(1);
    (total > 0.0).then(|| delta(1) / total)
}

/// Counter `name` of a status (0 when absent).
pub fn counter(status: &Value, name: &str) -> u64 {
    status
        .pointer(&format!("/counters/{name}"))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::float_cmp, clippy::indexing_slicing)]
    use super::*;
    use serde_json::json;

    #[test]
    fn nstat_lines_are_read_by_name() {
        let out = "#kernel\nTcpRetransSegs                  17                 0.0\n\
                   TcpExtTCPOFOQueue               3                  0.0\nbogus\n";
        let m = parse_nstat(
            out,
            &["TcpRetransSegs", "TcpExtTCPOFOQueue", "TcpExtTCPTimeouts"],
        );
        assert_eq!(m["TcpRetransSegs"], 17);
        assert_eq!(m["TcpExtTCPOFOQueue"], 3);
        assert_eq!(m["TcpExtTCPTimeouts"], 0);
        let mut d = BTreeMap::new();
        let before = parse_nstat("TcpRetransSegs 10 0\n", &["TcpRetransSegs"]);
        add_deltas(&mut d, &before, &m);
        assert_eq!(d["TcpRetransSegs"], 7.0);
    }

    fn conn(g: u8, rtt_us: u64, sockq: u64) -> Value {
        json!({"direction": "out", "remote_branch": 2, "path_group": g,
               "queue_bytes": 1000, "socket_queued_bytes": sockq,
               "subflows": [{"state": "established", "rtt_us": rtt_us}]})
    }

    #[test]
    fn samples_are_summarised_per_path() {
        let gw1 = vec![
            json!({"connections": [conn(0, 50_000, 0), conn(1, 120_000, 30_000)]}),
            json!({"connections": [conn(0, 60_000, 0), conn(1, 140_000, 90_000)]}),
            json!({"connections": [conn(0, 70_000, 0), conn(1, 130_000, 60_000)]}),
        ];
        let gw2 = vec![
            json!({"reseq": {"hold_ms": 40, "base_hold_ms": 40, "measured_skew_ms": null}}),
            json!({"reseq": {"hold_ms": 80, "base_hold_ms": 40, "measured_skew_ms": 60}}),
            json!({}),
        ];
        let d = summarise(&gw1, &gw2);
        assert_eq!(d["rtt_a_ms"], 60.0);
        assert_eq!(d["rtt_b_ms"], 130.0);
        assert_eq!(d["sockq_b_kb"], 90.0);
        assert_eq!(d["sockq_a_kb"], 0.0);
        assert_eq!(d["gwq_a_kb"], 1.0);
        assert_eq!(d["hold_ms_mean"], 60.0);
        assert_eq!(d["hold_ms_max"], 80.0);
        assert_eq!(d["base_hold_ms_mean"], 40.0);
        assert_eq!(d["skew_ms_max"], 60.0);
        assert!(!summarise(&[], &[]).contains_key("rtt_a_ms"));
    }

    #[test]
    fn the_ack_path_is_the_group_that_sent_more() {
        let st = |a: u64, b: u64| {
            json!({"connections": [
                {"direction": "out", "remote_branch": 1, "path_group": 0, "bytes_tx": a},
                {"direction": "out", "remote_branch": 1, "path_group": 1, "bytes_tx": b},
                {"direction": "in", "remote_branch": 1, "path_group": 1, "bytes_tx": 999_999}]})
        };
        assert_eq!(ack_share_b(&st(100, 100), &st(100, 400)), Some(1.0));
        assert_eq!(ack_share_b(&st(0, 0), &st(300, 100)), Some(0.25));
        assert_eq!(ack_share_b(&st(5, 5), &st(5, 5)), None);
        assert_eq!(
            counter(&json!({"counters": {"drop_codel": 4}}), "drop_codel"),
            4
        );
    }
}
