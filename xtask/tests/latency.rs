//! Latency under load through the tunnel (issue #16, `xtask::bench_latency`), short version of
//! `cargo xtask bench latency` on the 2x2 testbed (10 Mbit/s uplinks, 10 ms one-way path delay):
//! the defaults (the send time budget on, `--send-time-budget 5ms`, since 2026-11-29;
//! docs/mmsg.md) and the old socket defaults (4 MiB buffers, 128 KiB
//! `TCP_NOTSENT_LOWAT`, 256 KiB batches, no send budget, no send time budget) side by side in one
//! run: idle, with 4 bulk TCP flows in the class of the probes, and with UDP offered at twice the
//! capacity. The defaults' same-class ping p99 under both loads must stay near the path RTT (the
//! send time budget keeps the queue in the gateway's fair queue), at the old defaults' goodput.
//! Then 200 TCP flows through the one path group for 6 s per variant: the defaults' per-flow
//! goodput must be fair (Jain's index, the slowest flow's share of the fair share).
//! The same run has a third variant, the budget with `--pacing`: its loaded median must be
//! well below the budget's alone at the same goodput; and a fourth, `shaped` (every uplink's
//! `rate_mbit` configured, egress shaped at 95 %): with the sparse lane (on by default where a
//! port is shaped) the same-class ping's p99 must be near the path RTT (the aim is
//! 10 ms above it) and well below the unshaped one, and its same-class voice probe rides the lane (the
//! Type I connection): its median must match the Type I probe's; and a fifth, `autorate` (`[qos]
//! autorate`, no rate configured): it must find the uplinks' rate and keep the ping median near
//! the path and the p99 well below the unshaped one at nearly the unshaped goodput.
//! A second test runs unequal uplinks (10 + 2 Mbit/s per branch) with the budget and without it:
//! the budget must keep most of the goodput and still cut the queue. A third runs one flow
//! from its first second over 40/20 + 30/25 Mbit/s uplinks: with the budget it must carry
//! about what it carries without (the budget's start-up). A fourth stops gw1's `mmsg` 30 ms of
//! every 200 (a descheduled VM) under UDP at 2x: the budget must keep the old buffers' goodput.
//! A fifth raises every path's RTT from 20 to 60 ms under the live subflows (the kernel's minimum
//! RTT stays 20): the budget must keep the paths' goodput by re-measuring it.
//! Needs root, iproute2 and iperf3. ~250 s + ~90 s + ~40 s + ~60 s + ~60 s on a quiet machine
//! (the fairness case 13 + 18 s of the first, measured at load average 19).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::time::Instant;

use serde_json::Value;

fn p99(v: &Value, load: &str) -> f64 {
    v["loaded_rtt_ms"][load]["p99"]
        .as_f64()
        .unwrap_or_else(|| panic!("no loaded_rtt_ms.{load}.p99 in {}", v["name"]))
}

/// Runs `xtask bench latency` with `args` on a testbed named `tag` + this process's id, echoes
/// its progress lines as `MEASURE`, and returns its JSON.
fn bench_latency(tag: &str, args: &[&str]) -> Value {
    let prefix = format!("{tag}{}", std::process::id() % 100_000);
    let json = std::env::temp_dir().join(format!("mms-{prefix}-latency.json"));
    let json_arg = json.display().to_string();
    let mut all = vec!["bench", "latency"];
    all.extend_from_slice(args);
    all.extend(["--prefix", &prefix, "--json", &json_arg]);
    common::xtask(&all, "bench latency");
    let r = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    r
}

#[test]
fn bulk_flows_do_not_build_a_standing_queue_in_the_tunnel() {
    let t0 = Instant::now();
    let fairness_secs = FAIRNESS_SECS.to_string();
    let r = bench_latency(
        "lat",
        &[
            "--secs",
            "5",
            "--warmup",
            "2",
            "--loads",
            "idle,bulk4,udp2x",
            "--fairness-secs",
            fairness_secs.as_str(),
            "--variant",
            "default",
            "--variant",
            "old",
            "--variant",
            "paced:--pacing",
            "--variant",
            "shaped",
            "--variant",
            "autorate",
        ],
    );
    let path = r["path_rtt_ms"].as_f64().unwrap();
    let (new, old, paced, shaped, auto) = (
        &r["variants"][0],
        &r["variants"][1],
        &r["variants"][2],
        &r["variants"][3],
        &r["variants"][4],
    );
    assert_eq!(
        (
            new["name"].as_str(),
            old["name"].as_str(),
            paced["name"].as_str(),
            shaped["name"].as_str(),
            auto["name"].as_str()
        ),
        (
            Some("default"),
            Some("old"),
            Some("paced"),
            Some("shaped"),
            Some("autorate")
        )
    );
    let (udp_new, udp_old) = (p99(new, "udp2x"), p99(old, "udp2x"));
    let bulk_p99 = p99(new, "bulk4");
    let mbps = |v: &Value, load: &str| v["bulk_mbps"][load].as_f64().unwrap();
    let loss = new["sparse_loss_pct"]["bulk4"].as_f64().unwrap();
    let type1 = new["type1_loaded_rtt_ms"]["bulk4"]["p99"].as_f64().unwrap();
    eprintln!(
        "MEASURE path RTT {path:.1} ms; UDP at 2x: ping p99 {udp_new:.1} ms (old defaults \
         {udp_old:.1}), {:.1} Mbit/s (old {:.1}); 4 bulk flows: ping p99 {bulk_p99:.1} ms (old \
         {:.1}), {:.1} Mbit/s (old {:.1}), voice loss {loss:.2} %, Type I p99 {type1:.1} ms; {:.0} s",
        mbps(new, "udp2x"),
        mbps(old, "udp2x"),
        p99(old, "bulk4"),
        mbps(new, "bulk4"),
        mbps(old, "bulk4"),
        t0.elapsed().as_secs_f64()
    );
    // 200 flows share the connection's fair queue: equal goodput, nobody starved.
    let fair = |v: &Value, k: &str| {
        v[k].as_f64()
            .unwrap_or_else(|| panic!("no {k} in {}", v["name"]))
    };
    let (jain, min_share) = (fair(new, "jain_fairness"), fair(new, "min_flow_share"));
    eprintln!(
        "MEASURE 200 flows: Jain {jain:.3}, min share {min_share:.2} (old defaults: Jain {:.3}, \
         min share {:.2})",
        fair(old, "jain_fairness"),
        fair(old, "min_flow_share")
    );
    assert!(
        jain >= JAIN_BOUND,
        "200 flows: Jain's index {jain:.3} < {JAIN_BOUND}"
    );
    assert!(
        min_share >= MIN_SHARE_BOUND,
        "200 flows: the slowest flow got {min_share:.2} of its fair share (< {MIN_SHARE_BOUND})"
    );
    // Idle: the tunnel adds little to the path (the p99 of ~100 pings moves with the load other
    // jobs put on the machine: 23-76 ms measured with a 20.6 ms path).
    let idle = &new["loaded_rtt_ms"]["idle"];
    let (idle_med, idle_p99) = (
        idle["median"].as_f64().unwrap(),
        idle["p99"].as_f64().unwrap(),
    );
    assert!(idle_med < path + 5.0, "idle median {idle_med:.1} ms");
    assert!(idle_p99 < path + 60.0, "idle p99 {idle_p99:.1} ms");
    // UDP at twice the capacity fills whatever the socket accepts: the old 4 MiB buffers held
    // ~2.5 s (p99 2,452-2,717 ms in every run, docs/results.md "Latency under load"), the send
    // budget (K = 3) 0.6 s; with the send time budget the queue is the fair queue's, where the
    // ping is a sparse flow.
    assert!(
        udp_new < path + LOADED_P99_ABOVE_PATH_MS,
        "ping p99 with UDP at 2x {udp_new:.1} ms >= path RTT {path:.1} + {LOADED_P99_ABOVE_PATH_MS} ms"
    );
    assert!(
        udp_new < 0.5 * udp_old,
        "ping p99 with UDP at 2x {udp_new:.1} ms is not below half the old defaults' {udp_old:.1}"
    );
    assert!(
        bulk_p99 < path + LOADED_P99_ABOVE_PATH_MS,
        "ping p99 with 4 bulk flows {bulk_p99:.1} ms >= path RTT {path:.1} + {LOADED_P99_ABOVE_PATH_MS} ms"
    );
    assert!(
        bulk_p99 < 0.5 * p99(old, "bulk4"),
        "ping p99 with 4 bulk flows {bulk_p99:.1} ms is not below half the old defaults' {:.1}",
        p99(old, "bulk4")
    );
    check_type1(new, path);
    check_lane(shaped, path);
    check_shaped_lane(new, shaped, path);
    check_autorate(new, auto, path);
    // The latency is not bought with goodput.
    for load in ["bulk4", "udp2x"] {
        assert!(
            mbps(new, load) >= 0.9 * mbps(old, load),
            "{load}: goodput {:.1} Mbit/s < 90 % of the old defaults' {:.1}",
            mbps(new, load),
            mbps(old, load)
        );
    }
    assert!(loss < SPARSE_LOSS_BOUND_PCT, "voice loss {loss:.2} %");
    check_pacing(new, paced);
}

/// Type I stays ahead of the bulk: its voice-like probe rides its own connection and waits only
/// in the WAN's queue, where the identical probe in the bulk's class (same 172 B every 20 ms,
/// only the DSCP differs) also waits behind the bytes written before it into the bulk's
/// connection (the defaults: unshaped, so no sparse lane). Compared side by side in the same
/// seconds, so a stall of the machine moves both: on a CI run both p99s rose together (Type I
/// 72.0, voice 77.2 ms, where a quiet machine measures 46-51 and 52-57) and an absolute 60 ms
/// bound on Type I alone failed. Measured medians 4.2-9.7 ms apart (5 runs, quiet, both loads;
/// 7.9 on that CI run).
fn check_type1(v: &Value, path: f64) {
    for load in ["bulk4", "udp2x"] {
        let (t_med, t_p99, s_med, s_p99) = probe_dists(v, load);
        eprintln!(
            "MEASURE {load}: Type I voice {t_med:.1} / {t_p99:.1} ms, same-class voice \
             {s_med:.1} / {s_p99:.1} ms (median / p99)"
        );
        assert!(
            t_med <= s_med - TYPE1_AHEAD_MS,
            "{load}: Type I median {t_med:.1} ms is not {TYPE1_AHEAD_MS} ms below the same-class \
             voice's {s_med:.1}"
        );
        assert!(
            t_p99 <= s_p99 + TYPE1_P99_SLACK_MS,
            "{load}: Type I p99 {t_p99:.1} ms > the same-class voice's {s_p99:.1} + \
             {TYPE1_P99_SLACK_MS} ms"
        );
        assert!(
            t_p99 < path + LOADED_P99_ABOVE_PATH_MS,
            "{load}: Type I p99 {t_p99:.1} ms >= path RTT {path:.1} + {LOADED_P99_ABOVE_PATH_MS} ms"
        );
    }
}

/// (Type I voice median, p99, same-class voice median, p99) of variant `v` under `load`.
fn probe_dists(v: &Value, load: &str) -> (f64, f64, f64, f64) {
    let dist = |k: &str, q: &str| {
        v[k][load][q]
            .as_f64()
            .unwrap_or_else(|| panic!("no {k}.{load}.{q} in {}", v["name"]))
    };
    (
        dist("type1_loaded_rtt_ms", "median"),
        dist("type1_loaded_rtt_ms", "p99"),
        dist("sparse_rtt_ms", "median"),
        dist("sparse_rtt_ms", "p99"),
    )
}

/// The sparse lane (on by default on a shaped gateway, `[qos] sparse_lane_kbit` 256): the
/// same-class voice probe rides the path group's Type I connection, so it waits like the Type I
/// probe (medians within [`LANE_SLACK_MS`]; measured 0.1-0.6 ms apart), gw1 counts lane packets
/// in every load, and the Type I probe stays near the path. Without the lane the same-class
/// probe's median sat 19-20 ms above the Type I one's on the shaped testbed.
fn check_lane(v: &Value, path: f64) {
    for load in ["bulk4", "udp2x"] {
        let (t_med, t_p99, s_med, s_p99) = probe_dists(v, load);
        let lane = v["loads"]
            .as_array()
            .and_then(|l| l.iter().find(|x| x["load"].as_str() == Some(load)))
            .and_then(|x| x["mmsg_counters"]["sparse_lane_packets"].as_u64())
            .unwrap_or(0);
        eprintln!(
            "MEASURE {load}: sparse lane: same-class voice {s_med:.1} / {s_p99:.1} ms, Type I \
             {t_med:.1} / {t_p99:.1} ms (median / p99), {lane} packets in the lane at gw1"
        );
        assert!(
            (s_med - t_med).abs() <= LANE_SLACK_MS,
            "{load}: the same-class voice's median {s_med:.1} ms is not within {LANE_SLACK_MS} ms \
             of the Type I one's {t_med:.1}: not in the sparse lane"
        );
        // The voice probe alone sends 50 packets a second for 5 s.
        assert!(lane >= 200, "{load}: {lane} packets in the sparse lane");
        assert!(
            t_p99 < path + LOADED_P99_ABOVE_PATH_MS,
            "{load}: Type I p99 {t_p99:.1} ms >= path RTT {path:.1} + {LOADED_P99_ABOVE_PATH_MS} ms"
        );
    }
}

/// The aim, p99 ≤ path RTT + 10 ms, on shaped uplinks (`rate_mbit` configured, the
/// egress shaped at 95 %): the sparse lane puts the same-class probes in the Type I band of the
/// shaper, ahead of the bulk's queue. Measured (docs/results.md "The sparse lane"): ping p99
/// 26.7-28.6 ms with a 20.5 ms path against 49-54 ms unshaped (0.52-0.57 of it), at 0.94 of
/// the unshaped goodput.
fn check_shaped_lane(unshaped: &Value, shaped: &Value, path: f64) {
    let mbps = |v: &Value, load: &str| v["bulk_mbps"][load].as_f64().unwrap();
    for load in ["bulk4", "udp2x"] {
        let (s, u) = (p99(shaped, load), p99(unshaped, load));
        eprintln!(
            "MEASURE {load}: shaped with the sparse lane: ping p99 {s:.1} ms (unshaped {u:.1}), \
             {:.1} Mbit/s (unshaped {:.1})",
            mbps(shaped, load),
            mbps(unshaped, load)
        );
        assert!(
            s < path + SHAPED_P99_ABOVE_PATH_MS,
            "{load}: shaped ping p99 {s:.1} ms >= path RTT {path:.1} + {SHAPED_P99_ABOVE_PATH_MS} ms"
        );
        assert!(
            s <= SHAPED_P99_RATIO * u,
            "{load}: shaped ping p99 {s:.1} ms > {SHAPED_P99_RATIO} x the unshaped {u:.1}"
        );
        assert!(
            mbps(shaped, load) >= SHAPED_GOODPUT_RATIO * mbps(unshaped, load),
            "{load}: shaped goodput {:.1} < {SHAPED_GOODPUT_RATIO} x the unshaped {:.1}",
            mbps(shaped, load),
            mbps(unshaped, load)
        );
    }
    let loss = shaped["sparse_loss_pct"]["bulk4"].as_f64().unwrap();
    assert!(
        loss < SPARSE_LOSS_BOUND_PCT,
        "shaped: voice loss {loss:.2} %"
    );
}

/// `[qos] autorate` without any rate configured: every port starts shaped at 1 Gbit/s, the
/// first transfer finds the 10 Mbit/s uplinks (the modem's queue while loaded lowers the rate to
/// what the port sent), and from then on the bottleneck queue is mostly the gateway's, with the
/// sparse lane ahead of it. Measured (docs/results.md "Automatic rate", final build, 9 loads in
/// 3 runs, and this test): ping median 23.9-27.2 ms and p99 28.9-40.8 ms with a 20.5 ms path,
/// against 44 / 50-54 unshaped (median 0.54-0.62 of it, p99 0.55-0.78: each probe of the rate
/// past the uplink's,
/// and the first transfer's search, leaves a few ms in the modem), at 0.98-0.99 of the unshaped
/// goodput (shaping at 95 %: 0.94); gw1's ports at 9.3-10.3 Mbit/s.
fn check_autorate(unshaped: &Value, auto: &Value, path: f64) {
    let mbps = |v: &Value, load: &str| v["bulk_mbps"][load].as_f64().unwrap();
    let median = |v: &Value, load: &str| v["loaded_rtt_ms"][load]["median"].as_f64().unwrap();
    for load in ["bulk4", "udp2x"] {
        let (a, u) = (p99(auto, load), p99(unshaped, load));
        let (am, um) = (median(auto, load), median(unshaped, load));
        let rates: Vec<u64> = auto["loads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["load"] == load)
            .and_then(|l| l["autorate_kbit"].as_array())
            .map(|r| r.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        eprintln!(
            "MEASURE {load}: autorate: ping median {am:.1} p99 {a:.1} ms (unshaped {um:.1} / \
             {u:.1}), {:.1} Mbit/s (unshaped {:.1}), gw1's rates {rates:?} kbit/s",
            mbps(auto, load),
            mbps(unshaped, load)
        );
        assert_eq!(
            rates.len(),
            2,
            "{load}: gw1's two ports are under autorate: {rates:?}"
        );
        for r in &rates {
            assert!(
                (AUTORATE_MIN_KBIT..=AUTORATE_MAX_KBIT).contains(r),
                "{load}: autorate found {r} kbit/s for a 10 Mbit/s uplink"
            );
        }
        assert!(
            am < path + AUTORATE_MEDIAN_ABOVE_PATH_MS && am <= AUTORATE_MEDIAN_RATIO * um,
            "{load}: autorate ping median {am:.1} ms: not below path RTT {path:.1} + \
             {AUTORATE_MEDIAN_ABOVE_PATH_MS} ms and {AUTORATE_MEDIAN_RATIO} x the unshaped {um:.1}"
        );
        assert!(
            a <= AUTORATE_P99_RATIO * u,
            "{load}: autorate ping p99 {a:.1} ms > {AUTORATE_P99_RATIO} x the unshaped {u:.1}"
        );
        assert!(
            mbps(auto, load) >= AUTORATE_GOODPUT_RATIO * mbps(unshaped, load),
            "{load}: autorate goodput {:.1} < {AUTORATE_GOODPUT_RATIO} x the unshaped {:.1}",
            mbps(auto, load),
            mbps(unshaped, load)
        );
    }
    let loss = auto["sparse_loss_pct"]["bulk4"].as_f64().unwrap();
    assert!(
        loss < SPARSE_LOSS_BOUND_PCT,
        "autorate: voice loss {loss:.2} %"
    );
}

/// `--pacing` on top of the send time budget: the queue the budget leaves at the WAN's
/// bottleneck (its gain × min RTT + margin beyond the path's BDP) is paced out, at the same
/// goodput. Measured on this testbed (docs/results.md "Pacing"): same-class ping median
/// 32.5-36.2 against 43.6-43.9 ms, goodput 16.7-17.3 against 17.2-17.3 Mbit/s; before the
/// start-up fix the pacer left start-up at half the rate (8.4 Mbit/s with 4 bulk flows).
fn check_pacing(budget: &Value, paced: &Value) {
    let median = |v: &Value, load: &str| v["loaded_rtt_ms"][load]["median"].as_f64().unwrap();
    let mbps = |v: &Value, load: &str| v["bulk_mbps"][load].as_f64().unwrap();
    for load in ["bulk4", "udp2x"] {
        let (b, p) = (median(budget, load), median(paced, load));
        let (gb, gp) = (mbps(budget, load), mbps(paced, load));
        eprintln!(
            "MEASURE {load}: ping median {p:.1} ms paced, {b:.1} budget only; {gp:.1} / {gb:.1} \
             Mbit/s; p99 {:.1} / {:.1} ms",
            p99(paced, load),
            p99(budget, load)
        );
        assert!(
            p <= PACED_MEDIAN_RATIO * b,
            "{load}: paced ping median {p:.1} ms > {PACED_MEDIAN_RATIO} x the budget's {b:.1}"
        );
        assert!(
            gp >= PACED_GOODPUT_RATIO * gb,
            "{load}: paced goodput {gp:.1} Mbit/s < {PACED_GOODPUT_RATIO} x the budget's {gb:.1}"
        );
    }
    let loss = paced["sparse_loss_pct"]["bulk4"].as_f64().unwrap();
    assert!(
        loss < SPARSE_LOSS_BOUND_PCT,
        "paced: voice loss {loss:.2} %"
    );
    check_pacer_status(budget, paced);
}

/// What gw1's `mmsg status --json` showed of the bulk's connection mid-way through each load:
/// the pacer out of start-up, pacing near the goodput (`probe_bw` cycles 0.75-1.25 x the
/// bottleneck rate, which counts the tunnel's framing too), and no pacer without `--pacing`.
fn check_pacer_status(budget: &Value, paced: &Value) {
    let queues = |v: &Value, load: &str| {
        v["loads"]
            .as_array()
            .and_then(|l| l.iter().find(|x| x["load"].as_str() == Some(load)))
            .map(|x| x["queues"].clone())
            .unwrap_or_else(|| panic!("no load {load} in {}", v["name"]))
    };
    for load in ["bulk4", "udp2x"] {
        let (b, p) = (queues(budget, load), queues(paced, load));
        let phase = p["pacing_phase"].as_str().unwrap_or("none");
        let rate = p["pacing_mbps"].as_f64().unwrap_or(0.0);
        let goodput = paced["bulk_mbps"][load].as_f64().unwrap();
        eprintln!(
            "MEASURE {load}: mmsg status of the paced bulk connection: phase {phase}, paced at \
             {rate:.1} Mbit/s ({goodput:.1} goodput), send time budget {} B",
            p["send_time_budget_bytes"]
        );
        assert!(
            b["pacing_phase"].is_null(),
            "{load}: a pacer without --pacing: {b}"
        );
        assert!(
            b["send_time_budget_bytes"].as_u64().unwrap_or(0) > 0,
            "{load}: no send time budget in mmsg status: {b}"
        );
        assert!(
            matches!(phase, "probe_bw" | "drain"),
            "{load}: the pacer is in {phase} mid-way through the load: {p}"
        );
        assert!(
            (0.6 * goodput..=1.6 * goodput).contains(&rate),
            "{load}: paced at {rate:.1} Mbit/s with {goodput:.1} Mbit/s of goodput"
        );
    }
}

/// Unequal uplinks (1a and 2a at 10 Mbit/s, 1b and 2b at 2): the send time budget keeps most of
/// the goodput the connection has without it, and still cuts the ping's queue. Before slow
/// subflows kept their excess to themselves (`mpa::queue::inflight`, "excess"), the MPTCP
/// scheduler's over-feeding of the slow subflows filled the budget and left the fast one idle:
/// 3.4 of 10.2 Mbit/s with 4 bulk flows (ratio 0.33; 0.35-0.39 in the other loads); with it
/// 7.6-9.5 of ~10 (0.75-0.93, docs/results.md "Unequal uplinks and the send time budget").
#[test]
fn unequal_uplinks_keep_their_goodput_with_the_budget() {
    let t0 = Instant::now();
    let r = bench_latency(
        "lau",
        &[
            "--rate-mbit",
            "10,2,10,2",
            "--secs",
            "6",
            "--warmup",
            "3",
            "--loads",
            "bulk4",
            "--fairness-secs",
            "0",
            "--variant",
            "default",
            "--variant",
            "nobudget:--send-time-budget 0s",
        ],
    );
    let (budget, off) = (&r["variants"][0], &r["variants"][1]);
    assert_eq!(
        (budget["name"].as_str(), off["name"].as_str()),
        (Some("default"), Some("nobudget"))
    );
    let mbps = |v: &Value| v["bulk_mbps"]["bulk4"].as_f64().unwrap();
    let (with, without) = (mbps(budget), mbps(off));
    let (p99_with, p99_without) = (p99(budget, "bulk4"), p99(off, "bulk4"));
    eprintln!(
        "MEASURE 10+2 Mbit/s uplinks, 4 bulk flows: budget {with:.1} Mbit/s, ping p99 \
         {p99_with:.1} ms; without {without:.1} Mbit/s, p99 {p99_without:.1} ms; ratio {:.2}; {:.0} s",
        with / without,
        t0.elapsed().as_secs_f64()
    );
    assert!(without > 5.0, "without the budget only {without:.1} Mbit/s");
    assert!(
        with >= UNEQUAL_GOODPUT_RATIO * without,
        "budget {with:.1} Mbit/s < {UNEQUAL_GOODPUT_RATIO} x {without:.1} without it: the slow \
         subflows' queues fill the budget again"
    );
    assert!(
        p99_with < 0.5 * p99_without,
        "ping p99 {p99_with:.1} ms with the budget is not below half of {p99_without:.1} without"
    );
}

/// A fresh connection's first transfer with the send time budget: one TCP flow from its first
/// second (no warm-up) over unequal uplinks (1a 40, 1b 20, 2a 30, 2b 25 Mbit/s, the failover
/// testbed's), beside the same without the budget. The budget's start-up must not hold the
/// flow back while its slow start outruns the rate the budget has measured (`mpa::queue::
/// inflight`, "Start-up").
#[test]
fn a_fresh_connection_with_the_budget_starts_at_the_paths_rate() {
    let t0 = Instant::now();
    let r = bench_latency(
        "las",
        &[
            "--rate-mbit",
            "40,20,30,25",
            "--secs",
            "4",
            "--warmup",
            "0",
            "--loads",
            "bulk1",
            "--fairness-secs",
            "0",
            "--variant",
            "default",
            "--variant",
            "nobudget:--send-time-budget 0s",
        ],
    );
    let (budget, none) = (&r["variants"][0], &r["variants"][1]);
    let mbps = |v: &Value| v["bulk_mbps"]["bulk1"].as_f64().unwrap();
    let (b, n) = (mbps(budget), mbps(none));
    eprintln!(
        "MEASURE first 4 s of one flow on 40/20 + 30/25 Mbit/s uplinks: {b:.1} Mbit/s with the \
         budget, {n:.1} without (ratio {:.2}); ping p99 {:.1} / {:.1} ms; {:.0} s",
        b / n,
        p99(budget, "bulk1"),
        p99(none, "bulk1"),
        t0.elapsed().as_secs_f64()
    );
    assert!(
        b >= STARTUP_GOODPUT_RATIO * n,
        "the budget's first 4 s carried {b:.1} Mbit/s, < {STARTUP_GOODPUT_RATIO} x {n:.1} without it"
    );
}

/// A gateway that keeps stalling: gw1's `mmsg` stopped (SIGSTOP) for 30 ms every 200 ms, as a
/// virtual machine's vCPU descheduled by a busy host, while UDP at twice the capacity runs
/// through it; the send time budget and the budget with `--pacing` beside the old defaults. The
/// budget's queue beyond the paths' BDP drains during a stall, and the pacer keeps almost none;
/// the stall cover (`mpa::queue::stall`; for the pacer its token bucket too) must
/// keep the paths busy across them, at the old buffers' goodput.
#[test]
fn a_stalling_gateway_keeps_its_goodput_with_the_budget_and_the_pacer() {
    let t0 = Instant::now();
    let tag = "lasc";
    let ns = format!("{tag}{}-gw1", std::process::id() % 100_000);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stutter = {
        let done = std::sync::Arc::clone(&done);
        std::thread::spawn(move || stutter(&ns, &done))
    };
    let r = bench_latency(
        tag,
        &[
            "--secs",
            "5",
            "--warmup",
            "2",
            "--loads",
            "udp2x",
            "--fairness-secs",
            "0",
            "--variant",
            "default",
            "--variant",
            "paced:--pacing",
            "--variant",
            "old",
        ],
    );
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let stops = stutter.join().unwrap();
    let old = &r["variants"][2];
    let mbps = |v: &Value| v["bulk_mbps"]["udp2x"].as_f64().unwrap();
    let o = mbps(old);
    assert!(stops > 50, "gw1 was stopped only {stops} times");
    for v in [&r["variants"][0], &r["variants"][1]] {
        let name = v["name"].as_str().unwrap_or("?");
        let cover = v["loads"]
            .as_array()
            .and_then(|l| l.first())
            .map_or(0.0, |l| {
                l["queues"]["stall_cover_ms"].as_f64().unwrap_or(0.0)
            });
        let b = mbps(v);
        eprintln!(
            "MEASURE gw1 stopped 30 ms every 200 ms ({stops} stops), UDP at 2x: {b:.1} Mbit/s \
             {name} (stall cover {cover:.1} ms), {o:.1} with the old buffers (ratio {:.2}); ping \
             p99 {:.1} / {:.1} ms; {:.0} s",
            b / o,
            p99(v, "udp2x"),
            p99(old, "udp2x"),
            t0.elapsed().as_secs_f64()
        );
        assert!(
            cover >= 10.0,
            "{name}: the stall cover was {cover:.1} ms with the gateway stalling 30 ms"
        );
        assert!(
            b >= STALL_GOODPUT_RATIO * o,
            "a stalling gateway carried {b:.1} Mbit/s {name}, < {STALL_GOODPUT_RATIO} x {o:.1} \
             with the old buffers"
        );
    }
}

/// A path whose RTT rises under live subflows (a WAN re-route, `ssc` moving a group's member
/// path to a transit branch): every WAN path's one-way delay goes from 10 to 30 ms once the
/// connections are up, so their kernel minimum RTT (a 300 s window) stays the old 20 ms. One TCP
/// flow, the budget with and without its minimum RTT probe (`mpa::queue::min_rtt`) and no
/// budget. Without the probe the budget, below one round trip of the new path, holds the flow
/// at a fraction of the paths' rate (the check that the test makes the minimum stale); with it
/// the flow keeps the paths' goodput and the budget still keeps the ping's queue short.
#[test]
fn a_path_whose_rtt_rises_keeps_its_goodput_with_the_budget() {
    let t0 = Instant::now();
    let r = bench_latency(
        "lar",
        &[
            "--delay-after-start-ms",
            "30",
            "--secs",
            "5",
            "--warmup",
            "2",
            "--loads",
            "bulk1",
            "--fairness-secs",
            "0",
            "--variant",
            "default",
            "--variant",
            "noprobe:--send-time-rtt-probe false",
            "--variant",
            "nobudget:--send-time-budget 0s",
        ],
    );
    let (probe, noprobe, none) = (&r["variants"][0], &r["variants"][1], &r["variants"][2]);
    let mbps = |v: &Value| v["bulk_mbps"]["bulk1"].as_f64().unwrap();
    let (p, n, d) = (mbps(probe), mbps(noprobe), mbps(none));
    let median = |v: &Value| v["loaded_rtt_ms"]["bulk1"]["median"].as_f64().unwrap();
    let (p99_p, p99_d) = (p99(probe, "bulk1"), p99(none, "bulk1"));
    let (med_p, med_d) = (median(probe), median(none));
    eprintln!(
        "MEASURE path RTT 20 -> 60 ms under live subflows, one flow: budget {p:.1} Mbit/s (ping \
         median / p99 {med_p:.1} / {p99_p:.1} ms), without its RTT probe {n:.1}, no budget \
         {d:.1} ({med_d:.1} / {p99_d:.1}); ratios {:.2} / {:.2}; {:.0} s",
        p / d,
        n / d,
        t0.elapsed().as_secs_f64()
    );
    assert!(
        n < STALE_GOODPUT_RATIO * d,
        "without the RTT probe the budget carried {n:.1} Mbit/s of {d:.1}: the kernel's minimum \
         RTT was not stale, the test did not test"
    );
    assert!(
        p >= RISE_GOODPUT_RATIO * d,
        "after the path's RTT rose the budget carried {p:.1} Mbit/s, < {RISE_GOODPUT_RATIO} x \
         {d:.1} without it"
    );
    // The median: one probe in the 5 s (every 10 s) can make the p99 on its own.
    assert!(
        med_p < 0.5 * med_d,
        "ping median {med_p:.1} ms with the budget is not below half of {med_d:.1} without it"
    );
}

/// Stops and continues every `mmsg` in namespace `ns` (30 ms of every 200) until `done`;
/// returns how many times it stopped them. Only this test's gateways (their namespace).
fn stutter(ns: &str, done: &std::sync::atomic::AtomicBool) -> u32 {
    use std::time::Duration;
    let mut stops = 0;
    while !done.load(std::sync::atomic::Ordering::Relaxed) {
        let out = std::process::Command::new("ip")
            .args(["netns", "pids", ns])
            .output();
        let pids: Vec<String> = out
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
            .split_whitespace()
            .filter(|p| {
                std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "mmsg")
            })
            .map(str::to_owned)
            .collect();
        if pids.is_empty() {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        let signal = |sig: &str| {
            let _ = std::process::Command::new("kill")
                .arg(sig)
                .args(&pids)
                .status();
        };
        signal("-STOP");
        std::thread::sleep(Duration::from_millis(30));
        signal("-CONT");
        stops += 1;
        std::thread::sleep(Duration::from_millis(170));
    }
    stops
}

/// The budget's goodput over the old buffers' with gw1 stopped 30 ms of every 200 (UDP at 2x):
/// without the stall cover 0.86-0.90, with it 1.01-1.03; the pacer's before its token bucket
/// followed the cover 0.23-0.88, after 1.02 (docs/results.md "The send time budget when the
/// gateway stalls", "Pacing when the gateway stalls").
const STALL_GOODPUT_RATIO: f64 = 0.95;

/// The budget's bulk goodput over the goodput without it on 10+2 Mbit/s uplinks: measured
/// 0.33-0.39 before slow subflows kept their excess, 0.75-0.93 after (4 runs, bulk4); the bound
/// sits between them with room for a loaded machine.
const UNEQUAL_GOODPUT_RATIO: f64 = 0.6;

/// The budget's goodput over no budget's in a fresh connection's first 4 s (one flow, no
/// warm-up): before the budget's start-up 0.74 and 0.78 (36.1 / 38.7 against 48.9 / 49.5 Mbit/s,
/// the budget held the flow's slow start back), with it 1.01 and 1.01 (2026-11-28, two
/// alternated runs each).
const STARTUP_GOODPUT_RATIO: f64 = 0.9;

/// The budget's goodput over no budget's after the paths' RTT rose from 20 to 60 ms (one flow):
/// with the minimum RTT probe 0.97 (17.3 of 17.8 Mbit/s; 4 flows 0.97, UDP at 2x 0.99), without
/// it 0.26 (4.6; 0.16, 0.26), 2026-11-29 in one run (docs/results.md "A path whose RTT rises").
const RISE_GOODPUT_RATIO: f64 = 0.85;
/// ... and without the probe the budget must stay below this share: the test made the kernel's
/// minimum stale.
const STALE_GOODPUT_RATIO: f64 = 0.5;

/// Seconds of the 200-flow fairness case per variant (iperf3 runs 2 s more, omitted).
const FAIRNESS_SECS: u32 = 6;
/// Jain's index of 200 flows' goodput with the defaults. Aim (issue #16) 0.9; measured 1.000 with
/// the send time budget in this test and on the bench (the old defaults 0.66–0.88 in this test,
/// the budget off 0.90–0.98 on the bench, the per-class FIFO before the fair queue 0.35–0.71;
/// docs/results.md "Fairness and the sparse flow with the send time budget"); a fair queue that
/// lost its per-flow scheduling, or a budget that starves some flows, falls far below.
const JAIN_BOUND: f64 = 0.95;
/// The slowest of 200 flows' goodput over the fair share with the defaults. Aim 0.25; measured
/// 0.92–0.96 with the send time budget (old defaults 0.06–0.40, budget off 0.43–0.52; the FIFO
/// ~0).
const MIN_SHARE_BOUND: f64 = 0.5;

/// Same-class ping p99 above the path RTT under 4 bulk flows and under UDP at twice the
/// capacity, ms. Before the send time budget: 300-630 ms (bulk4) and 500-670 ms (udp2x) with the
/// then defaults, ~2,500 ms (udp2x) with the old ones; with it (docs/results.md "Latency under
/// load", "The send time budget"): 50-55 ms p99 (path RTT 20.5 ms) in one run. The bound leaves room for a loaded CI machine, far
/// below the queue of hundreds of ms it guards against.
const LOADED_P99_ABOVE_PATH_MS: f64 = 80.0;
/// How far apart the same-class voice probe's median and the Type I probe's may be when the
/// sparse lane carries the former, ms (measured 0.1-0.6; without the lane 4.2-9.7).
const LANE_SLACK_MS: f64 = 2.0;
/// Shaped uplinks with the sparse lane: same-class ping p99 above the path RTT, ms (the aim is
/// 10; measured 6.2-8.1 on a quiet machine; the unshaped queue it guards against is 29-34).
const SHAPED_P99_ABOVE_PATH_MS: f64 = 20.0;
/// ... and at most this share of the unshaped p99 of the same run (measured 0.52-0.57).
const SHAPED_P99_RATIO: f64 = 0.75;
/// ... at this share of the unshaped goodput at least (measured 0.94: 95 % shaping).
const SHAPED_GOODPUT_RATIO: f64 = 0.9;
/// Autorate's same-class ping median above the path RTT and against the unshaped defaults'
/// (measured 3.4-6.7 ms above, 0.54-0.62 of it) ...
const AUTORATE_MEDIAN_ABOVE_PATH_MS: f64 = 10.0;
const AUTORATE_MEDIAN_RATIO: f64 = 0.75;
/// ... its p99 against theirs (measured 0.55-0.78) ...
const AUTORATE_P99_RATIO: f64 = 0.85;
/// ... and its goodput against theirs (measured 0.98-0.99; shaping at a fixed
/// 95 % gives 0.94, so this also catches a rate that settles too low).
const AUTORATE_GOODPUT_RATIO: f64 = 0.95;
/// The range autorate's rate must settle in for the 10 Mbit/s uplinks, kbit/s (htb counts the
/// Ethernet header: the uplink is ~10.1 Mbit/s of it; measured 9.0-10.3).
const AUTORATE_MIN_KBIT: u64 = 7_500;
const AUTORATE_MAX_KBIT: u64 = 12_000;
/// How far below the same-class voice probe's median the Type I probe's must be with 4 bulk
/// flows and with UDP at 2x without the sparse lane, ms (measured 4.2-9.7 apart).
const TYPE1_AHEAD_MS: f64 = 2.0;
/// How far the Type I probe's p99 may sit above the same-class one's, ms: both wait in the WAN's
/// queue, so their tails are close (Type I 1.8-10.5 ms lower in the 6 runs above, both loads).
const TYPE1_P99_SLACK_MS: f64 = 5.0;
/// Loss of the voice-like flow with 4 bulk flows, percent (measured 0-0.67).
const SPARSE_LOSS_BOUND_PCT: f64 = 2.0;
/// With `--pacing` the same-class ping's median under load is at most this share of the send
/// time budget's alone (measured 0.74-0.83 in the runs with the start-up fix; a pacer that does
/// nothing measures ~1.0).
const PACED_MEDIAN_RATIO: f64 = 0.9;
/// ... at this share of its goodput at least (measured 0.97-1.01; the pacer stuck at half the
/// rate measured 0.48).
const PACED_GOODPUT_RATIO: f64 = 0.9;
