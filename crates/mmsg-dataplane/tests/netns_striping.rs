//! netns test of striping with resequencing (seed 001 §III-C, D) on the 2x2 testbed (no OVS): one
//! TCP flow h1 → h2 through two gateways, in the same run
//! (A) not striped (one path group carries the flow),
//! (B) striped over 2 path groups, the receiving gateway resequencing,
//! (C) striped over 2 path groups, the receiving gateway without `[striping]` (no resequencer).
//!
//! Proves: the striped flow is spread over both groups by the weights, the receiver resequences
//! its frames (counters), the receiving host sees far fewer out-of-order segments
//! (`TcpExtTCPOFOQueue`) with the resequencer than without, and the flow keeps most of the
//! unstriped goodput; reports sender retransmits in each case. Without OVS every path group's connection runs over the same
//! 2 × 2 subflows, so groups do not have separate bottlenecks here: the aggregation gain over a
//! single group needs the paper topology (member paths per group), not this test.
//! Needs root (network namespaces); fails, never skips, when something is missing.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::Path;
use std::time::{Duration, Instant};

mod common;
use common::tls::{with_table, TestPki};
use common::{
    every_conn_up_with, netns, repo_root, require_root_and, run_ok, start_mmsg, status, Proc,
    Testbed,
};

fn counter(s: &serde_json::Value, name: &str) -> u64 {
    s["counters"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {name}"))
}

/// `base` with two path groups (weights 1:1), the `[tls]` table `tls` and, when `stripe`, a
/// `[striping]` table for Type II flows faster than 5 Mbit/s (`T` "auto").
fn config(base: &Path, stripe: bool, tls: &str, out: &Path) {
    let mut v: toml::Value = toml::from_str(&std::fs::read_to_string(base).unwrap()).unwrap();
    let groups: Vec<toml::Value> = (0..2)
        .map(|id| {
            let mut t = toml::map::Map::new();
            t.insert("id".into(), toml::Value::Integer(id));
            t.insert("weight".into(), toml::Value::Integer(1));
            toml::Value::Table(t)
        })
        .collect();
    v["remote"][0]
        .as_table_mut()
        .unwrap()
        .insert("path_groups".into(), toml::Value::Array(groups));
    let mut text = with_table(&toml::to_string(&v).unwrap(), tls);
    if stripe {
        text.push_str("\n[striping]\nclasses = [\"type2\"]\nthreshold_kbit = 5000\n");
    }
    std::fs::write(out, text).unwrap();
}

fn all_up(ctl: &Path) -> bool {
    if !ctl.exists() {
        return false;
    }
    let s = status(ctl);
    let conns = s["connections"].as_array().unwrap();
    conns.len() == 8 && every_conn_up_with(&s, 4)
}

fn wait_up(ctls: [&Path; 2], procs: [&Proc; 2]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ctls.iter().all(|c| all_up(c)) {
        if Instant::now() > deadline {
            for p in procs {
                eprintln!("--- {} ---\n{}", p.log.display(), p.log());
            }
            panic!("tunnel connections did not come up");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// An absolute kernel counter of namespace `ns` (`nstat -as`, history untouched).
fn nstat(ns: &str, name: &str) -> u64 {
    let out = run_ok(&mut netns(ns, &["nstat", "-asz", name]));
    out.lines()
        .find_map(|l| {
            let mut it = l.split_whitespace();
            (it.next() == Some(name)).then(|| it.next().unwrap().parse().unwrap())
        })
        .unwrap_or(0)
}

/// Bytes gw1 sent per path group (outbound connections).
fn bytes_per_group(s: &serde_json::Value) -> [u64; 2] {
    let mut v = [0u64; 2];
    for c in s["connections"].as_array().unwrap() {
        if c["direction"] == "out" {
            v[c["path_group"].as_u64().unwrap() as usize] += c["bytes_tx"].as_u64().unwrap();
        }
    }
    v
}

struct Run {
    mbps: f64,
    retransmits: u64,
    ofo: u64,
    per_group: [u64; 2],
    /// Subflows the sender marked backup during the run (slow-subflow policy).
    demoted: u64,
    rx: serde_json::Value,
}

/// One 12 s iperf3 TCP flow h1 → h2 (the first second omitted); counters as differences over
/// the run. 12 s and not 6: a striped flow that left slow start early (no loss, 0 retransmits:
/// the resequencer's hold and a stalling gateway raise its RTT, which ends slow start by delay)
/// regrows for seconds, so 6 s measured where slow start ended more than what striping carries:
/// with gw1's `mmsg` stopped 30 ms of every 200 ms the striped flow carried 0.68 and 1.01 of the
/// unstriped one's goodput in 6 s, 0.85 and 0.79 in 14 s; local CI runs 0.56 (27.6 against
/// 49.4 Mbit/s, 0 retransmits) and 0.57 in 6 s (docs/results.md "The send time budget when the
/// gateway stalls").
fn transfer(tb: &Testbed, ctl1: &Path, ctl2: &Path, port: u16) -> Run {
    let (h1, h2) = (tb.ns("h1"), tb.ns("h2"));
    let p = port.to_string();
    run_ok(&mut netns(
        &h2,
        &["iperf3", "-s", "-D", "-1", "-p", &p, "-B", "198.19.2.10"],
    ));
    std::thread::sleep(Duration::from_millis(300));
    let ofo0 = nstat(&h2, "TcpExtTCPOFOQueue");
    let s0 = status(ctl1);
    let g0 = bytes_per_group(&s0);
    let out = run_ok(&mut netns(
        &h1,
        &[
            "iperf3",
            "-c",
            "198.19.2.10",
            "-p",
            &p,
            "--json",
            "-t",
            "12",
            "-O",
            "1",
        ],
    ));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let end = &v["end"];
    let s1 = status(ctl1);
    let g1 = bytes_per_group(&s1);
    Run {
        mbps: end["sum_received"]["bits_per_second"].as_f64().unwrap() / 1e6,
        retransmits: end["sum_sent"]["retransmits"].as_u64().unwrap_or(0),
        ofo: nstat(&h2, "TcpExtTCPOFOQueue") - ofo0,
        per_group: [g1[0] - g0[0], g1[1] - g0[1]],
        demoted: counter(&s1, "subflows_demoted") - counter(&s0, "subflows_demoted"),
        rx: status(ctl2),
    }
}

#[test]
fn striped_tcp_flow_with_and_without_resequencer() {
    require_root_and(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let root = repo_root();
    let (plain1, plain2, striped1, striped2) = (
        tmp.path().join("plain1.toml"),
        tmp.path().join("plain2.toml"),
        tmp.path().join("striped1.toml"),
        tmp.path().join("striped2.toml"),
    );
    // Mutual TLS with a test CA (TLS is the default, issue #17).
    let pki = TestPki::new(&tmp.path().join("pki"), &[1, 2]);
    let (tls1, tls2) = (pki.table(1), pki.table(2));
    config(
        &root.join("examples/mmsg-branch1.toml"),
        false,
        &tls1,
        &plain1,
    );
    config(
        &root.join("examples/mmsg-branch2.toml"),
        false,
        &tls2,
        &plain2,
    );
    config(
        &root.join("examples/mmsg-branch1.toml"),
        true,
        &tls1,
        &striped1,
    );
    config(
        &root.join("examples/mmsg-branch2.toml"),
        true,
        &tls2,
        &striped2,
    );

    let prefix = format!("mseed{}", std::process::id() % 100_000);
    let tb = Testbed::up(&prefix);
    let (gw1, gw2) = (tb.ns("gw1"), tb.ns("gw2"));
    let ctl = |n: &str| tmp.path().join(format!("{n}.sock"));
    let log = |n: &str| tmp.path().join(format!("{n}.log"));

    // (A) Not striped: the flow stays on one group.
    let mut p1 = start_mmsg(&gw1, &plain1, &ctl("a1"), log("a1"));
    let mut p2 = start_mmsg(&gw2, &plain2, &ctl("a2"), log("a2"));
    wait_up([&ctl("a1"), &ctl("a2")], [&p1, &p2]);
    let a = transfer(&tb, &ctl("a1"), &ctl("a2"), 5201);
    drop((p1, p2));

    // (B) Striped, the receiver resequences.
    p1 = start_mmsg(&gw1, &striped1, &ctl("b1"), log("b1"));
    p2 = start_mmsg(&gw2, &striped2, &ctl("b2"), log("b2"));
    wait_up([&ctl("b1"), &ctl("b2")], [&p1, &p2]);
    let b = transfer(&tb, &ctl("b1"), &ctl("b2"), 5202);
    drop(p2);

    // (C) Striped, the receiver without a resequencer (frames to TUN in arrival order).
    p2 = start_mmsg(&gw2, &plain2, &ctl("c2"), log("c2"));
    wait_up([&ctl("b1"), &ctl("c2")], [&p1, &p2]);
    let c = transfer(&tb, &ctl("b1"), &ctl("c2"), 5203);
    drop((p1, p2));

    for (name, r) in [
        ("A one group", &a),
        ("B striped+reseq", &b),
        ("C striped, no reseq", &c),
    ] {
        eprintln!(
            "{name}: {:.1} Mbit/s, sender retransmits {}, receiver OFO-queued {}, bytes per group \
             {:?}, subflows demoted {}",
            r.mbps, r.retransmits, r.ofo, r.per_group, r.demoted
        );
    }
    let names = [
        "reseq_in_order",
        "reseq_buffered",
        "reseq_released_in_order",
        "reseq_released_threshold",
        "reseq_released_timeout",
        "reseq_released_lost",
        "reseq_dup_late",
        "reseq_overflow",
        "reseq_gaps_filled",
        "reseq_late_after_release",
    ];
    let rs: Vec<(&str, u64)> = names.iter().map(|n| (*n, counter(&b.rx, n))).collect();
    eprintln!("B receiver: {rs:?}, T in force {}", b.rx["reseq"]);

    // (A) one group carries the flow (the other only keepalives).
    let share = |g: [u64; 2]| g[0].min(g[1]) as f64 / (g[0] + g[1]).max(1) as f64;
    assert!(
        share(a.per_group) < 0.05,
        "unstriped flow used both groups: {:?}",
        a.per_group
    );
    // (B), (C) both groups carry the flow about equally (weights 1:1).
    for r in [&b, &c] {
        assert!(
            share(r.per_group) > 0.35,
            "striped flow not spread: {:?}",
            r.per_group
        );
    }
    // The receiver saw sequenced frames and resequenced them; nothing was forced out by a bound.
    let sequenced = counter(&b.rx, "reseq_in_order") + counter(&b.rx, "reseq_buffered");
    // (Frames are GSO super-packets of several segments: ~4 KB each here.)
    assert!(sequenced > 2_000, "too few sequenced frames: {rs:?}");
    assert_eq!(counter(&b.rx, "reseq_overflow"), 0);
    // The measured hold (`release_hold_adapt`, on by default): gaps that filled were measured,
    // and the hold in force is never below the one sized from the paths, nor above 1 s.
    assert!(counter(&b.rx, "reseq_gaps_filled") > 0, "{rs:?}");
    let t = &b.rx["reseq"];
    let (hold, base) = (
        t["hold_ms"].as_u64().unwrap(),
        t["base_hold_ms"].as_u64().unwrap(),
    );
    assert!(base <= hold && hold <= 1_000, "T in force {t}");
    assert!(t["measured_skew_ms"].is_u64(), "no skew measured: {t}");
    // No resequencer state in the receiver of (C): every counter stays 0 there.
    assert_eq!(counter(&c.rx, "reseq_in_order"), 0);
    // The resequencer removes most of the reordering the receiving host would see (measured:
    // OFO-queued 149 with it, 3,317 without, 117 unstriped).
    assert!(
        b.ofo * 4 < c.ofo,
        "OFO with resequencer {} vs without {}",
        b.ofo,
        c.ofo
    );
    // Groups share the same subflows here, so striping cannot gain; it must not collapse either
    // (measured 39 vs 48 Mbit/s).
    assert!(
        b.mbps > 0.6 * a.mbps,
        "striped {:.1} vs one group {:.1}",
        b.mbps,
        a.mbps
    );
}
