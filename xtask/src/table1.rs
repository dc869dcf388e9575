//! `cargo xtask bench table1`: the paper's Table I on the 2×2 testbed.
//!
//! Four subflows share 40 Mbit/s in the ratios 10:10:10:10, 4:8:12:16, 2:4:8:26 and 1:2:4:33. Each
//! subflow is one WAN address pair (1a>2a, 1a>2b, 1b>2a, 1b>2b), and each pair gets its own
//! bottleneck with `testbed pair` (2 ms delay). The WAN ports themselves are unlimited. For every
//! case it measures:
//! - TCP over IPoMP: one iperf3 TCP flow from host 1 to host 2 through `mmsg`;
//! - UDP over IPoMP: iperf3 UDP offered at the 40 Mbit/s total, received rate;
//! - end-to-end MPTCP: iperf3 under `mptcpize` between the gateways' WAN addresses with the
//!   in-kernel path manager (client addresses `subflow fullmesh`, server's second address
//!   `signal`, so 2 × 2 subflows), with `mmsg` stopped.
//!
//! The paper's numbers (seed 000 Table I) are printed beside ours.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use crate::topology::{self, Impairment};
use crate::{demo, deps, iperf, sh, testbed};

/// The four cases: per-subflow rates (Mbit/s) and the paper's TCP/UDP/e2e-MPTCP goodput.
const CASES: [([f64; 4], [f64; 3]); 4] = [
    ([10.0, 10.0, 10.0, 10.0], [36.5, 37.3, 38.4]),
    ([4.0, 8.0, 12.0, 16.0], [34.0, 34.7, 35.7]),
    ([2.0, 4.0, 8.0, 26.0], [25.9, 26.3, 26.9]),
    ([1.0, 2.0, 4.0, 33.0], [16.4, 16.9, 17.3]),
];
/// The subflows' address pairs, in the order of the rates.
const PAIRS: [(&str, &str); 4] = [("1a", "2a"), ("1a", "2b"), ("1b", "2a"), ("1b", "2b")];
/// One-way delay of each pair bottleneck.
const PAIR_DELAY_MS: f64 = 2.0;

/// The whole run, as written by `--json`: `{"cases": [...], ...}`.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Repetitions of each tunnel measurement.
    pub reps: u32,
    /// Seconds of traffic per measurement.
    pub seconds: u32,
    /// 1-minute load average before the first case (the machine is shared: say how quiet it was).
    pub load_avg_1m: f64,
    /// One row per ratio.
    pub cases: Vec<Case>,
}

/// One row of the table.
#[derive(Debug, Clone, Serialize)]
pub struct Case {
    /// Per-subflow available bandwidth, Mbit/s.
    pub rates: [f64; 4],
    /// One TCP flow through the IPoMP tunnel, Mbit/s: the median of `ipomp_tcp_reps`.
    pub ipomp_tcp_mbps: f64,
    /// Every repetition of `ipomp_tcp_mbps`, in the order run.
    pub ipomp_tcp_reps: Vec<f64>,
    /// UDP offered at the total rate through the tunnel, received Mbit/s: the median of
    /// `ipomp_udp_reps`.
    pub ipomp_udp_mbps: f64,
    /// Every repetition of `ipomp_udp_mbps`, in the order run.
    pub ipomp_udp_reps: Vec<f64>,
    /// End-to-end MPTCP between the gateways, Mbit/s.
    pub e2e_mptcp_mbps: Option<f64>,
    /// Subflows the gateways marked backup during this case's measurements (growth of
    /// `subflows_demoted` over both gateways; docs/mmsg.md "Slow subflows").
    pub subflows_demoted: Option<u64>,
    /// Demoted subflows made active again during this case (`subflows_probed`).
    pub subflows_probed: Option<u64>,
    /// The paper's numbers: TCP over IPoMP, UDP over IPoMP, end-to-end MPTCP.
    pub paper_mbps: [f64; 3],
}

const TOPOLOGY: &str =
    "name = \"table1\"\n[[branch]]\nid = 1\nwan = [{}, {}]\n[[branch]]\nid = 2\nwan = [{}, {}]\n";

fn set_case(prefix: &str, rates: &[f64; 4]) -> anyhow::Result<()> {
    for ((from, to), rate) in PAIRS.iter().zip(rates) {
        let imp = Impairment {
            rate_mbit: Some(*rate),
            delay_ms: Some(PAIR_DELAY_MS),
            ..Impairment::default()
        };
        testbed::pair_set(prefix, from, to, true, &imp)?;
    }
    Ok(())
}

fn udp_received_mbps(v: &serde_json::Value) -> Option<f64> {
    v.pointer("/end/sum_received/bits_per_second")?
        .as_f64()
        .map(|b| b / 1e6)
}

/// Runs the table's `rows` (1-based; empty: all four), each tunnel measurement `reps` times
/// (end-to-end MPTCP once); always tears the testbed down.
pub fn run(
    root: &Path,
    prefix: &str,
    secs: u32,
    reps: u32,
    rows: &[usize],
) -> anyhow::Result<Report> {
    let cases: Vec<([f64; 4], [f64; 3])> = if rows.is_empty() {
        CASES.to_vec()
    } else {
        rows.iter()
            .map(|&r| {
                r.checked_sub(1)
                    .and_then(|i| CASES.get(i))
                    .copied()
                    .with_context(|| format!("--rows {r}: Table I has rows 1 to {}", CASES.len()))
            })
            .collect::<anyhow::Result<_>>()?
    };
    deps::ensure()?;
    if !sh::have("mptcpize") {
        sh::run("apt-get", &["install", "-y", "-qq", "mptcpize"]).context("install mptcpize")?;
    }
    let load_avg_1m = sh::load_1min();
    let reps = reps.max(1);
    let cases = on_testbed(prefix, |topo| {
        run_cases(root, prefix, topo, &cases, secs, reps)
    })?;
    Ok(Report {
        reps,
        seconds: secs,
        load_avg_1m,
        cases,
    })
}

/// The median of `xs` (the upper one of the middle two for an even count); 0 when empty.
fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// `min–max` of `xs` with one decimal, or `-` when empty.
fn min_max(xs: &[f64]) -> String {
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if xs.is_empty() {
        "-".to_owned()
    } else {
        format!("{min:.1}–{max:.1}")
    }
}

/// Runs `f` on a fresh 2x2 testbed `prefix` (no OVS) and always tears it down.
fn on_testbed<T>(
    prefix: &str,
    f: impl FnOnce(&topology::Topology) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let topo = topology::parse(TOPOLOGY)?;
    testbed::run_on(&topo, prefix, || f(&topo))
}

fn run_cases(
    root: &Path,
    prefix: &str,
    topo: &topology::Topology,
    rows: &[([f64; 4], [f64; 3])],
    secs: u32,
    reps: u32,
) -> anyhow::Result<Vec<Case>> {
    let (h1, h2) = (
        testbed::ns_host(prefix, 1, 0),
        testbed::ns_host(prefix, 2, 0),
    );
    let dst = testbed::host_addr(2, 0).to_string();
    let t = secs.to_string();
    let mut cases: Vec<Case> = Vec::new();
    set_case(prefix, &rows.first().context("no rows")?.0)?;
    let tunnels = demo::start_tunnels(root, prefix, topo)?;
    for &(rates, paper) in rows {
        set_case(prefix, &rates)?;
        std::thread::sleep(Duration::from_secs(1));
        let before = (
            tunnels.counter_sum("subflows_demoted"),
            tunnels.counter_sum("subflows_probed"),
        );
        let (mut tcp_reps, mut udp_reps) = (Vec::new(), Vec::new());
        for rep in 1..=reps {
            let server = iperf::Server::start(&h2, 5311, None)?;
            let v = iperf::client(&h1, &["-c", &dst, "-p", "5311", "-t", &t, "-O", "2"])?;
            server.wait(Duration::from_secs(2));
            let tcp = iperf::tcp_received_mbps(&v).context("no TCP receiver rate")?;
            let server = iperf::Server::start(&h2, 5312, None)?;
            let v = iperf::client(
                &h1,
                &[
                    "-c", &dst, "-p", "5312", "-u", "-b", "40M", "-l", "1300", "-t", &t,
                ],
            )?;
            server.wait(Duration::from_secs(2));
            let udp = udp_received_mbps(&v).context("no UDP receiver rate")?;
            eprintln!(
                "table1 {rates:?} rep {rep}/{reps}: IPoMP TCP {tcp:.1} Mbit/s, UDP {udp:.1} Mbit/s"
            );
            tcp_reps.push(tcp);
            udp_reps.push(udp);
        }
        cases.push(Case {
            rates,
            ipomp_tcp_mbps: median(&tcp_reps),
            ipomp_tcp_reps: tcp_reps,
            ipomp_udp_mbps: median(&udp_reps),
            ipomp_udp_reps: udp_reps,
            e2e_mptcp_mbps: None,
            subflows_demoted: tunnels
                .counter_sum("subflows_demoted")
                .zip(before.0)
                .map(|(a, b)| a.saturating_sub(b)),
            subflows_probed: tunnels
                .counter_sum("subflows_probed")
                .zip(before.1)
                .map(|(a, b)| a.saturating_sub(b)),
            paper_mbps: paper,
        });
    }
    tunnels.stop();
    let rates: Vec<[f64; 4]> = cases.iter().map(|c| c.rates).collect();
    let e2e = e2e_mptcp_on(prefix, &rates, secs)?;
    for (case, v) in cases.iter_mut().zip(e2e) {
        case.e2e_mptcp_mbps = v;
    }
    Ok(cases)
}

/// End-to-end MPTCP without MMS for each set of four subflow rates, on its own 2x2 testbed
/// `prefix` (built and torn down here): iperf3 under `mptcpize` between the gateways' WAN
/// addresses, in-kernel path manager, 2 x 2 subflows.
pub fn e2e_mptcp(prefix: &str, rates: &[[f64; 4]], secs: u32) -> anyhow::Result<Vec<Option<f64>>> {
    if !sh::have("mptcpize") {
        sh::run("apt-get", &["install", "-y", "-qq", "mptcpize"]).context("install mptcpize")?;
    }
    on_testbed(prefix, |_| e2e_mptcp_on(prefix, rates, secs))
}

/// [`e2e_mptcp`] on an existing 2x2 testbed whose gateways run no `mmsg`.
fn e2e_mptcp_on(prefix: &str, rates: &[[f64; 4]], secs: u32) -> anyhow::Result<Vec<Option<f64>>> {
    let t = secs.to_string();
    let (gw1, gw2) = (testbed::ns_gw(prefix, 1), testbed::ns_gw(prefix, 2));
    crate::bench_tunnel::kernel_pm(prefix)?;
    let mut out = Vec::new();
    for r in rates {
        set_case(prefix, r)?;
        std::thread::sleep(Duration::from_secs(1));
        let server = iperf::Server::start_with(&gw2, &["mptcpize", "run"], 5313, &[])?;
        let text = sh::ns(
            &gw1,
            "mptcpize",
            &[
                "run",
                "iperf3",
                "--json",
                "-c",
                "198.18.20.2",
                "-B",
                "198.18.10.2",
                "-p",
                "5313",
                "-t",
                &t,
                "-O",
                "2",
            ],
        )?;
        server.wait(Duration::from_secs(2));
        let v: serde_json::Value = serde_json::from_str(&text).context("parse iperf3 JSON")?;
        let mbps = iperf::tcp_received_mbps(&v);
        eprintln!("table1 {r:?}: end-to-end MPTCP {mbps:?} Mbit/s");
        out.push(mbps);
    }
    Ok(out)
}

/// Prints the table beside the paper's (median, and min–max when there is more than one
/// repetition).
pub fn print_table(report: &Report) {
    println!(
        "{:<16} {:>10} {:>11} {:>10} {:>11} {:>10} {:>8}   {:>10} {:>10} {:>10}",
        "rates",
        "TCP/IPoMP",
        "TCP min–max",
        "UDP/IPoMP",
        "UDP min–max",
        "e2e MPTCP",
        "demoted",
        "paper TCP",
        "paper UDP",
        "paper e2e"
    );
    for c in &report.cases {
        let rates = c
            .rates
            .iter()
            .map(|r| format!("{r}"))
            .collect::<Vec<_>>()
            .join(":");
        let e2e = c
            .e2e_mptcp_mbps
            .map_or("-".to_owned(), |v| format!("{v:.1}"));
        println!(
            "{:<16} {:>10.1} {:>11} {:>10.1} {:>11} {:>10} {:>8}   {:>10.1} {:>10.1} {:>10.1}",
            rates,
            c.ipomp_tcp_mbps,
            min_max(&c.ipomp_tcp_reps),
            c.ipomp_udp_mbps,
            min_max(&c.ipomp_udp_reps),
            e2e,
            c.subflows_demoted.map_or("-".to_owned(), |n| n.to_string()),
            c.paper_mbps[0],
            c.paper_mbps[1],
            c.paper_mbps[2]
        );
    }
    println!(
        "{} repetition(s) of {} s per case; load average before the run {:.2}",
        report.reps, report.seconds, report.load_avg_1m
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_range_of_repetitions() {
        assert_eq!(median(&[36.1, 30.0, 33.3]), 33.3);
        assert_eq!(median(&[2.0, 1.0]), 2.0);
        assert_eq!(median(&[]), 0.0);
        assert_eq!(min_max(&[36.1, 30.0, 33.3]), "30.0–36.1");
        assert_eq!(min_max(&[]), "-");
    }

    #[test]
    fn json_has_cases_at_the_top() {
        let r = Report {
            reps: 3,
            seconds: 10,
            load_avg_1m: 0.5,
            cases: vec![Case {
                rates: [1.0, 2.0, 4.0, 33.0],
                ipomp_tcp_mbps: 33.3,
                ipomp_tcp_reps: vec![30.0, 33.3, 36.1],
                ipomp_udp_mbps: 38.0,
                ipomp_udp_reps: vec![38.0, 38.0, 38.0],
                e2e_mptcp_mbps: None,
                subflows_demoted: Some(2),
                subflows_probed: Some(0),
                paper_mbps: [16.4, 16.9, 17.3],
            }],
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["cases"][0]["ipomp_tcp_reps"].as_array().unwrap().len(), 3);
        assert_eq!(v["reps"], 3);
        assert_eq!(v["cases"][0]["subflows_demoted"], 2);
    }
}
