//! Fast failover (docs/mmsg.md "Failover"): on the 2x2 testbed with standalone `mmsg` (fast
//! failover on, the default), a bulk TCP flow and a 50 packet/s UDP voice stream run from host 1
//! to host 2 while each of the four WAN ports in turn is cut for 4 s and restored
//! (`xtask::bench_failover`, the `after` pass of `cargo xtask bench failover`).
//!
//! Asserts, per cut: the longest receive gap of the TCP flow and of the voice stream ≤ 600 ms,
//! and over the four cuts a mean ≤ 350 ms; the TCP connection survives (no error, data until
//! the end) and carries ≥ 10 Mbit/s again before each restore; no tunnel connection is declared
//! dead (nothing received for 3 s) during any cut or restore. Without the detector
//! (`MMSG_FAILOVER=off`, the `before` pass of the bench) the gateway measured 940–1,818 ms per
//! cut (once 525 ms) and a mean of 1,000–1,420 ms over the four cuts; with the detector and the
//! old socket-held queue (`--send-time-budget 0s`) 169–480 ms per cut, means 291–303; with the
//! send time budget on (the default since 2026-11-29) 167–259 ms, means 189–200 (docs/results.md
//! "The send time budget on by default"). The aim is ≤ 300 ms per cut.
//!
//! Then (same pass, same flows) gateway 1's `mmsg` is restarted: SIGTERM and started again
//! (`mmsg_restart`), then kill -9 and started again (`mmsg_kill9`). Asserts for each: the longest
//! receive gap of the TCP flow and of the voice stream ≤ 1,200 ms (the aim is 1 s; the
//! restart gap before the fast reconnect was 2–5.5 s), and the TCP connection survives the whole pass
//! (docs/mmsg.md "Restart").
//!
//! Needs root, iproute2 and ping; it FAILS without them, it never skips. The testbed is torn
//! down by the bench, also on error (it runs as `xtask bench failover --after-only`). Figures are printed on lines starting with `MEASURE`
//! (`-- --nocapture`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use serde_json::Value;

/// Bound on every cut's receive gap (without the detector 940–1,818 ms, once 525; with it and
/// the budget off 169–480 ms; with the budget, the default, 167–259 ms on a quiet machine).
const MAX_GAP_MS: f64 = 600.0;
/// Bound on the mean gap over the four cuts (without the detector 1,000–1,420 ms; with it and
/// the budget off 291–303; the default 189–200).
const MAX_MEAN_GAP_MS: f64 = 350.0;
/// TCP goodput that must be back before each restore (one uplink of 20–40 Mbit/s is left).
const MIN_RECOVERED_MBPS: f64 = 10.0;
/// Bound on an `mmsg` restart's receive gap (SIGTERM or kill -9 and start again). Before the
/// fast reconnect: 2–5.5 s (issue #16); with it 746 and 953 ms on a loaded machine
/// (2026-11-25), and with the send time budget 270–450 ms in three runs of this test on a quiet
/// one (2026-11-29); the aim is 1 s. docs/results.md "Restart".
const MAX_RESTART_GAP_MS: f64 = 1200.0;

#[test]
fn an_uplink_cut_stalls_the_tunnel_far_less_than_without_the_detector() {
    common::require_tools(&["ip", "ping"]);
    let prefix = format!("mfo{}", std::process::id() % 100_000);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("failover.json");
    // Through the xtask binary: the testbed's WAN emulator is that binary.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_xtask"))
        .current_dir(common::root())
        .args([
            "bench",
            "failover",
            "--after-only",
            "--hold",
            "4",
            "--settle",
            "3",
            "--restarts",
            "restart1,kill1",
        ])
        .args(["--prefix", &prefix, "--json"])
        .arg(&json)
        .output()
        .unwrap();
    println!("{}", String::from_utf8_lossy(&out.stdout));
    assert!(
        out.status.success(),
        "bench failover failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let run = &report["runs"][0];
    assert_eq!(run["mode"], "after");
    assert_eq!(
        run["tcp_survived"], true,
        "the TCP connection did not survive: {}",
        run["tcp_error"]
    );
    let cuts: Vec<&Value> = run["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "cut")
        .collect();
    assert_eq!(cuts.len(), 4);
    let f = |e: &Value, k: &str| e[k].as_f64().unwrap();
    for e in &cuts {
        println!(
            "MEASURE cut {}: gap {:.0} ms (tcp {:.0}, udp {:.0}), recovered {:.1} Mbit/s",
            e["port"],
            f(e, "gap_ms"),
            f(e, "tcp_gap_ms"),
            f(e, "udp_gap_ms"),
            f(e, "recovered_mbps")
        );
        assert!(
            f(e, "gap_ms") <= MAX_GAP_MS,
            "cut {}: receive gap {} ms > {MAX_GAP_MS} ms",
            e["port"],
            f(e, "gap_ms")
        );
        assert!(
            f(e, "recovered_mbps") >= MIN_RECOVERED_MBPS,
            "cut {}: only {:.1} Mbit/s on the remaining uplinks",
            e["port"],
            f(e, "recovered_mbps")
        );
    }
    // No tunnel connection may be lost while one uplink is cut or back: the other uplinks
    // carry on (a connection whose peer sent on a subflow through the cut port and never took
    // it out heard nothing for 3 s after the restore, and was closed: the red CI run of
    // 2026-11-27, cut gap 1.7 s).
    for e in run["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "cut" || e["kind"] == "restore")
    {
        assert_eq!(
            e["conns_dead"].as_u64(),
            Some(0),
            "{} {}: tunnel connections declared dead (nothing received for 3 s) while the \
             other uplinks were up; see the gateways' logs (/tmp/bench-failover-<prefix>)",
            e["kind"],
            e["port"]
        );
    }
    let restarts: Vec<&Value> = run["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "mmsg_restart" || e["kind"] == "mmsg_kill9")
        .collect();
    assert_eq!(restarts.len(), 2, "{run:#}");
    for e in &restarts {
        println!(
            "MEASURE {} {}: gap {:.0} ms (tcp {:.0}, udp {:.0}), udp lost {}, tunnels up after {} ms, recovered {:.1} Mbit/s",
            e["kind"],
            e["port"],
            f(e, "gap_ms"),
            f(e, "tcp_gap_ms"),
            f(e, "udp_gap_ms"),
            e["udp_lost"],
            e["tunnels_up_ms"],
            f(e, "recovered_mbps")
        );
        assert!(
            f(e, "gap_ms") <= MAX_RESTART_GAP_MS,
            "{} {}: receive gap {} ms > {MAX_RESTART_GAP_MS} ms",
            e["kind"],
            e["port"],
            f(e, "gap_ms")
        );
        assert!(
            e["tunnels_up_ms"].is_number(),
            "{} {}: the tunnels did not come back with all their subflows",
            e["kind"],
            e["port"]
        );
    }
    let mean = cuts.iter().map(|e| f(e, "gap_ms")).sum::<f64>() / cuts.len() as f64;
    println!("MEASURE mean cut gap {mean:.0} ms");
    assert!(
        mean <= MAX_MEAN_GAP_MS,
        "mean receive gap over the cuts {mean:.0} ms > {MAX_MEAN_GAP_MS} ms"
    );
}
