//! The results of `bench tunnel`: one repetition's measurements, the medians with min and
//! max over the repetitions, and the printed table.

use serde::Serialize;

use anyhow::Context;

use super::options::{Options, OMIT_SECS, TOPOLOGY_FILE};
use crate::stats::median;

/// Median, min and max of samples.
#[derive(Debug, Clone, Serialize)]
pub struct Spread {
    /// Median (mean of the two middle samples for an even count).
    pub median: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Every sample, in run order.
    pub samples: Vec<f64>,
}

impl Spread {
    /// `None` for no samples.
    pub fn of(samples: &[f64]) -> Option<Spread> {
        Some(Spread {
            median: median(samples)?,
            min: samples.iter().copied().reduce(f64::min)?,
            max: samples.iter().copied().reduce(f64::max)?,
            samples: samples.to_vec(),
        })
    }
}

/// One transfer.
#[derive(Debug, Clone, Serialize)]
pub struct Transfer {
    /// Receiver goodput, Mbit/s (omitted seconds excluded).
    pub mbps: f64,
    /// iperf3's own CPU use, sender and receiver, percent of one core.
    pub iperf_cpu_pct: [Option<f64>; 2],
    /// Busy share of all the machine's CPUs during the transfer, percent.
    pub machine_busy_pct: Option<f64>,
    /// Machine CPU seconds per GB moved: busy share × CPUs / goodput. Everything on the machine
    /// counts (kernel, iperf3, `mmsg`, and any other load), so it is an upper bound.
    pub machine_cpu_s_per_gb: Option<f64>,
}

impl Transfer {
    pub(super) fn new(mbps: f64, v: &serde_json::Value, busy: Option<f64>) -> Transfer {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from) as f64;
        Transfer {
            mbps,
            iperf_cpu_pct: iperf_cpu(v),
            machine_busy_pct: busy,
            machine_cpu_s_per_gb: busy
                .filter(|_| mbps > 0.0)
                .map(|b| b / 100.0 * cpus / (mbps / 8000.0)),
        }
    }
}

/// iperf3's own CPU use from its JSON report: sender and receiver, percent of one core.
fn iperf_cpu(v: &serde_json::Value) -> [Option<f64>; 2] {
    [
        v.pointer("/end/cpu_utilization_percent/host_total")
            .and_then(serde_json::Value::as_f64),
        v.pointer("/end/cpu_utilization_percent/remote_total")
            .and_then(serde_json::Value::as_f64),
    ]
}

/// One tunnel transfer plus what `mmsg` did for it.
#[derive(Debug, Clone, Serialize)]
pub struct TunnelRun {
    /// The transfer.
    pub transfer: Transfer,
    /// CPU seconds of gw1's (sender side) and gw2's `mmsg` during the transfer.
    pub mmsg_cpu_s: [f64; 2],
    /// Inner bytes gw1 read from TUN during the transfer.
    pub inner_bytes: u64,
    /// CPU seconds of both `mmsg` processes per GB (1e9 bytes) of inner traffic.
    pub cpu_s_per_gb: Option<f64>,
    /// Average bytes per TUN read at gw1 (GSO super-packets make it > MTU).
    pub bytes_per_tun_read: Option<f64>,
    /// Counter deltas at gw1 and gw2 that show trouble (drops, errors), only the non-zero ones.
    pub trouble: serde_json::Map<String, serde_json::Value>,
    /// Median RTT h1 → h2 through the idle tunnel, µs.
    pub ping_rtt_us: f64,
}

/// One repetition.
#[derive(Debug, Clone, Serialize)]
pub struct Rep {
    /// `mmsg` with offload and TLS (the default).
    pub tunnel: TunnelRun,
    /// `mmsg` with offload, clear tunnel (no `[tls]`).
    pub tunnel_clear: TunnelRun,
    /// `mmsg --no-offload` with TLS.
    pub tunnel_nooffload: TunnelRun,
    /// End-to-end MPTCP between the gateways.
    pub direct: Transfer,
    /// Distinct (local, remote) address pairs of the direct transfer's established subflows.
    pub direct_subflow_pairs: usize,
    /// Median RTT gw1 → gw2 (1a → 2a), µs, measured right after each tunnel ping (TLS offload,
    /// TLS no offload, clear offload).
    pub direct_ping_rtt_us: [f64; 3],
    /// Median RTT h1 → gw1 and h2 → gw2 (the LAN hops the tunnel ping also crosses), µs.
    pub lan_ping_rtt_us: [f64; 2],
}

/// The whole result (the keys at the top, details below).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Median goodput through `mmsg` with offload and TLS (the default), Mbit/s.
    pub tunnel_mbps: f64,
    /// Median goodput through `mmsg` with offload in clear (no `[tls]`), Mbit/s.
    pub tunnel_clear_mbps: f64,
    /// `tunnel_mbps / tunnel_clear_mbps`: what encryption costs (aim ≥ 0.9).
    pub tls_ratio: f64,
    /// Median goodput through `mmsg --no-offload` with TLS, Mbit/s.
    pub tunnel_nooffload_mbps: f64,
    /// Median goodput of end-to-end MPTCP between the gateways, Mbit/s.
    pub direct_mptcp_mbps: f64,
    /// `tunnel_mbps / direct_mptcp_mbps` (aim ≥ 0.85).
    pub ratio: f64,
    /// `tunnel_clear_mbps / direct_mptcp_mbps`.
    pub ratio_clear: f64,
    /// `tunnel_nooffload_mbps / direct_mptcp_mbps`.
    pub ratio_nooffload: f64,
    /// Idle ping overhead per gateway with offload, µs (median over reps; aim ≤ 50).
    pub ping_overhead_us_per_gateway: f64,
    /// The same without offload, µs.
    pub ping_overhead_nooffload_us_per_gateway: f64,
    /// CPU seconds of both `mmsg` per GB of inner traffic, with offload (median).
    pub mmsg_cpu_s_per_gb: Option<f64>,
    /// The same without offload.
    pub mmsg_cpu_s_per_gb_nooffload: Option<f64>,
    /// The same in clear, with offload.
    pub mmsg_cpu_s_per_gb_clear: Option<f64>,
    /// Everything measured.
    pub details: Details,
}

/// Spreads and raw repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct Details {
    /// Topology file.
    pub topology: String,
    /// Rate of every uplink, Mbit/s (`None`: unlimited, the emulator not in the path).
    pub uplink_mbit: Option<f64>,
    /// Measured seconds per transfer (plus `omit_secs`).
    pub secs: u32,
    /// iperf3 `-O`.
    pub omit_secs: u32,
    /// Repetitions.
    pub reps: u32,
    /// Subflows per tunnel connection (n × m).
    pub tunnel_subflows: usize,
    /// Packets the kernel diverted into the WAN emulator during the whole run (0: not in path).
    pub emulator_packets: Option<u64>,
    /// Goodput spreads, Mbit/s.
    pub tunnel_mbps: Spread,
    /// Goodput spreads, Mbit/s.
    pub tunnel_clear_mbps: Spread,
    /// Goodput spreads, Mbit/s.
    pub tunnel_nooffload_mbps: Spread,
    /// Goodput spreads, Mbit/s.
    pub direct_mptcp_mbps: Spread,
    /// Ping overhead per gateway (µs) per rep.
    pub ping_overhead_us: Spread,
    /// Ping overhead per gateway without offload (µs) per rep.
    pub ping_overhead_nooffload_us: Spread,
    /// Ping overhead per gateway with the LAN hops' RTT subtracted too (µs), offload.
    pub ping_overhead_excl_lan_us: Spread,
    /// Every repetition.
    pub runs: Vec<Rep>,
}

pub(super) fn summarize(
    opts: &Options,
    n_m: usize,
    emulator_packets: Option<u64>,
    runs: Vec<Rep>,
) -> anyhow::Result<Report> {
    let col = |f: &dyn Fn(&Rep) -> f64| -> anyhow::Result<Spread> {
        Spread::of(&runs.iter().map(f).collect::<Vec<_>>()).context("no repetitions")
    };
    let opt_median = |f: &dyn Fn(&Rep) -> Option<f64>| -> Option<f64> {
        median(&runs.iter().filter_map(f).collect::<Vec<_>>())
    };
    let tunnel = col(&|r| r.tunnel.transfer.mbps)?;
    let tunnel_clear = col(&|r| r.tunnel_clear.transfer.mbps)?;
    let tunnel_off = col(&|r| r.tunnel_nooffload.transfer.mbps)?;
    let direct = col(&|r| r.direct.mbps)?;
    let ping_on = col(&|r| (r.tunnel.ping_rtt_us - r.direct_ping_rtt_us[0]) / 2.0)?;
    let ping_off = col(&|r| (r.tunnel_nooffload.ping_rtt_us - r.direct_ping_rtt_us[1]) / 2.0)?;
    let ping_excl_lan = col(&|r| {
        (r.tunnel.ping_rtt_us
            - r.direct_ping_rtt_us[0]
            - r.lan_ping_rtt_us[0]
            - r.lan_ping_rtt_us[1])
            / 2.0
    })?;
    Ok(Report {
        tunnel_mbps: tunnel.median,
        tunnel_clear_mbps: tunnel_clear.median,
        tls_ratio: tunnel.median / tunnel_clear.median,
        tunnel_nooffload_mbps: tunnel_off.median,
        direct_mptcp_mbps: direct.median,
        ratio: tunnel.median / direct.median,
        ratio_clear: tunnel_clear.median / direct.median,
        ratio_nooffload: tunnel_off.median / direct.median,
        ping_overhead_us_per_gateway: ping_on.median,
        ping_overhead_nooffload_us_per_gateway: ping_off.median,
        mmsg_cpu_s_per_gb: opt_median(&|r| r.tunnel.cpu_s_per_gb),
        mmsg_cpu_s_per_gb_nooffload: opt_median(&|r| r.tunnel_nooffload.cpu_s_per_gb),
        mmsg_cpu_s_per_gb_clear: opt_median(&|r| r.tunnel_clear.cpu_s_per_gb),
        details: Details {
            topology: TOPOLOGY_FILE.to_owned(),
            uplink_mbit: opts.uplink_mbit,
            secs: opts.secs,
            omit_secs: OMIT_SECS,
            reps: opts.reps,
            tunnel_subflows: n_m,
            emulator_packets,
            tunnel_mbps: tunnel,
            tunnel_clear_mbps: tunnel_clear,
            tunnel_nooffload_mbps: tunnel_off,
            direct_mptcp_mbps: direct,
            ping_overhead_us: ping_on,
            ping_overhead_nooffload_us: ping_off,
            ping_overhead_excl_lan_us: ping_excl_lan,
            runs,
        },
    })
}

/// Prints the summary table.
pub fn print_table(r: &Report) {
    let d = &r.details;
    println!(
        "{:<34} {:>10} {:>10} {:>10}",
        "iperf3 TCP, Mbit/s", "median", "min", "max"
    );
    for (name, s) in [
        ("tunnel h1->h2, TLS, offload", &d.tunnel_mbps),
        ("tunnel h1->h2, clear, offload", &d.tunnel_clear_mbps),
        ("tunnel h1->h2, TLS, no offload", &d.tunnel_nooffload_mbps),
        ("end-to-end MPTCP gw1->gw2 (2x2)", &d.direct_mptcp_mbps),
    ] {
        println!(
            "{name:<34} {:>10.0} {:>10.0} {:>10.0}",
            s.median, s.min, s.max
        );
    }
    println!("ratio TLS / clear tunnel: {:.2} (aim >= 0.9)", r.tls_ratio);
    println!(
        "ratio tunnel / direct MPTCP: {:.2} TLS, {:.2} clear (TLS no offload {:.2}; aim >= 0.85)",
        r.ratio, r.ratio_clear, r.ratio_nooffload
    );
    println!(
        "idle ping overhead per gateway: {:.1} us (min {:.1}, max {:.1}; no offload {:.1}; \
         without the LAN hops {:.1}; aim <= 50)",
        r.ping_overhead_us_per_gateway,
        d.ping_overhead_us.min,
        d.ping_overhead_us.max,
        r.ping_overhead_nooffload_us_per_gateway,
        d.ping_overhead_excl_lan_us.median
    );
    let f = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.2}"));
    match d.uplink_mbit {
        Some(u) => println!(
            "uplinks: 2 per branch at {u} Mbit/s each (WAN emulator; {} packets through it)",
            d.emulator_packets.map_or("?".to_owned(), |p| p.to_string())
        ),
        None => println!("uplinks: unlimited (CPU-bound; emulator bypassed)"),
    }
    println!(
        "mmsg CPU (both gateways) per GB: {} s TLS offload, {} s clear offload, {} s TLS no offload",
        f(r.mmsg_cpu_s_per_gb),
        f(r.mmsg_cpu_s_per_gb_clear),
        f(r.mmsg_cpu_s_per_gb_nooffload)
    );
    let machine =
        |f: &dyn Fn(&Rep) -> Option<f64>| median(&d.runs.iter().filter_map(f).collect::<Vec<_>>());
    println!(
        "machine CPU per GB (all load on the machine): {} s tunnel, {} s no offload, {} s direct",
        f(machine(&|r| r.tunnel.transfer.machine_cpu_s_per_gb)),
        f(machine(&|r| r
            .tunnel_nooffload
            .transfer
            .machine_cpu_s_per_gb)),
        f(machine(&|r| r.direct.machine_cpu_s_per_gb))
    );
    println!(
        "WAN emulator packets during the run: {}",
        d.emulator_packets
            .map_or("unknown".to_owned(), |n| n.to_string())
    );
}
