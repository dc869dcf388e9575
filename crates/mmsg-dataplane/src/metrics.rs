//! Prometheus `/metrics` of `mmsg` (`mmsg run --metrics-listen ADDR`, issue #19; the reference
//! is `docs/metrics.md`).
//!
//! One source of truth: nothing here counts. Every scrape takes the same [`StatusReport`] that
//! `mmsg status` shows ([`crate::stats::Stats::report`]: the gateway's counters, the connection
//! registry, the controller channel, TLS, `[internet]`) and writes it in the OpenMetrics text
//! format with `prometheus-client`, the Prometheus project's Rust client (or, for a client that
//! does not ask for OpenMetrics, in the classic text format 0.0.4: [`to_prometheus_text`]). Call order:
//! [`bind`] → [`serve`]; [`render`] is the pure part (report in, text out), tested by itself.
//!
//! Labels, all bounded by the config: `remote` (branch id, ≤ 15), `path_group` (≤ 16), `class`
//! (`type1`/`type2`), `direction` (`in`/`out`), `wan_port` (index of the local WAN address,
//! ≤ 8), `peer` (remote WAN address, ≤ 8 per branch), `reason` (the drop counters' names).
//! Ports are never labels (ephemeral).

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use anyhow::Context;
use tracing::{info, warn};

use crate::control::ReportSource;
use crate::status::{ConnState, StatusReport};

pub use mms_types::exposition::{
    to_prometheus_text, wants_openmetrics, CONTENT_TYPE, TEXT_CONTENT_TYPE,
};
use mms_types::exposition::{Exposition, Histogram, Labels};
use mpa::queue::SojournHistogram;

/// Counters of [`crate::stats::Counters`] exported as one family with a label instead of one
/// metric each: `(counter, family, label name, label value)`.
const GROUPED: &[(&str, &str, &str, &str)] = &[
    ("tls_handshakes_in", "tls_handshakes", "direction", "in"),
    ("tls_handshakes_out", "tls_handshakes", "direction", "out"),
    (
        "tls_handshake_failed",
        "tls_handshake_failures",
        "reason",
        "in_failed",
    ),
    (
        "tls_unknown_ca",
        "tls_handshake_failures",
        "reason",
        "in_unknown_ca",
    ),
    (
        "tls_revoked",
        "tls_handshake_failures",
        "reason",
        "in_revoked",
    ),
    (
        "tls_wrong_branch",
        "tls_handshake_failures",
        "reason",
        "in_wrong_branch",
    ),
    (
        "tls_connect_failures",
        "tls_handshake_failures",
        "reason",
        "out_failed",
    ),
    (
        "handshake_refused_crl_expired",
        "tls_handshake_failures",
        "reason",
        "crl_expired",
    ),
];

fn grouped(counter: &str) -> Option<(&'static str, &'static str, String)> {
    if let Some(reason) = counter.strip_prefix("drop_") {
        return Some(("packets_dropped", "reason", reason.to_owned()));
    }
    GROUPED
        .iter()
        .find(|(c, ..)| *c == counter)
        .map(|&(_, f, l, v)| (f, l, v.to_owned()))
}

/// Help text of the counters with their own metric (the `//!`-doc of each is in `stats.rs`).
fn help_of(counter: &str) -> String {
    format!("mmsg counter `{counter}` (docs/metrics.md)")
}

fn ip_of(addr: &str) -> String {
    addr.parse::<SocketAddr>()
        .map_or_else(|_| addr.to_owned(), |a| a.ip().to_string())
}

/// The WAN port (index into the config's `[[wan]]`) whose address a subflow's local address is.
fn wan_port(wan: &[Ipv4Addr], local: &str) -> String {
    let ip = ip_of(local);
    wan.iter()
        .position(|a| a.to_string() == ip)
        .map_or_else(|| "unknown".to_owned(), |i| i.to_string())
}

/// The exposition of `report`; `wan` are the gateway's WAN addresses in port order.
pub fn render(report: &StatusReport, wan: &[Ipv4Addr]) -> String {
    let mut e = Exposition::default();
    let branch = report.branch.to_string();
    e.gauge(
        "build_info",
        "Always 1: the mmsg version and this gateway's branch",
        [(
            vec![
                ("version", env!("CARGO_PKG_VERSION").to_owned()),
                ("branch", branch),
            ],
            1.0,
        )],
    );
    e.gauge(
        "tun_offload",
        "1 when TUN offload (virtio header, GSO) is on",
        [(vec![], f64::from(u8::from(report.offload)))],
    );

    // Gateway-wide counters: drops and TLS results grouped by a label, the others one each.
    let mut families: Vec<(&str, Vec<(Labels, u64)>)> = Vec::new();
    for (name, &v) in &report.counters {
        match grouped(name) {
            Some((family, label, value)) => {
                let samples = match families.iter_mut().find(|(f, _)| *f == family) {
                    Some((_, s)) => s,
                    None => {
                        families.push((family, Vec::new()));
                        match families.last_mut() {
                            Some((_, s)) => s,
                            None => continue,
                        }
                    }
                };
                samples.push((vec![(label, value)], v));
            }
            None => e.counter(name, &help_of(name), [(vec![], v)]),
        }
    }
    for (family, samples) in families {
        let help = match family {
            "packets_dropped" => "Packets dropped, by reason (the drop_* counters of mmsg status)",
            "tls_handshakes" => "TLS handshakes that succeeded, by direction",
            _ => "TLS handshakes that failed or were refused, by direction and reason",
        };
        e.counter(family, help, samples);
    }

    connections(&mut e, report, wan);

    if let Some(c) = &report.controller {
        e.gauge(
            "controller_connected",
            "1 while the gateway channel to ssc is up",
            [(vec![], f64::from(u8::from(c.connected)))],
        );
        e.gauge(
            "config_version",
            "Version of the config in use (0: from the file)",
            [(vec![("source", c.source.clone())], c.config_version as f64)],
        );
        e.counter(
            "configs_applied",
            "Configs from the controller applied since start",
            [(vec![], c.configs_applied)],
        );
        e.counter(
            "configs_refused",
            "Configs from the controller refused since start",
            [(vec![], c.configs_refused)],
        );
    }
    e.gauge(
        "tls_enabled",
        "1 when the tunnel runs TLS 1.3 with mutual authentication, 0 in clear mode",
        [(vec![], f64::from(u8::from(report.tls.is_some())))],
    );
    if let Some(t) = &report.tls {
        e.gauge(
            "tls_certificate_expiry_timestamp_seconds",
            "notAfter of this gateway's certificate, Unix seconds (alert on it minus time())",
            [(vec![("serial", t.serial.to_string())], t.not_after as f64)],
        );
        if let Some(n) = t.crl_next_update {
            e.gauge(
                "tls_crl_next_update_timestamp_seconds",
                "nextUpdate of the CRL in use, Unix seconds (after it new handshakes fail closed)",
                [(vec![], n as f64)],
            );
        }
        if let Some(n) = t.crl_number {
            e.gauge(
                "tls_crl_number",
                "crl_number of the CRL in use (the controller's pushes raise it)",
                [(vec![], n as f64)],
            );
        }
    }
    if !report.autorate.is_empty() {
        let port = |p: usize| vec![("wan_port", p.to_string())];
        e.gauge(
            "autorate_rate_bytes_per_second",
            "[qos] autorate: the WAN port's shaped rate now",
            report
                .autorate
                .iter()
                .map(|p| (port(p.port), p.rate_kbit as f64 * 1e3 / 8.0)),
        );
    }
    if let Some(i) = &report.internet {
        let port = |p: usize| vec![("wan_port", p.to_string())];
        e.gauge(
            "uplink_capacity_bytes_per_second",
            "[internet]: configured capacity of the uplink",
            i.uplinks
                .iter()
                .map(|u| (port(u.port), f64::from(u.capacity_mbit) * 1e6 / 8.0)),
        );
        e.gauge(
            "uplink_available_bytes_per_second",
            "[internet]: current available-bandwidth estimate of the uplink",
            i.uplinks
                .iter()
                .map(|u| (port(u.port), u.available_kbit as f64 * 1e3 / 8.0)),
        );
        e.gauge(
            "uplink_weight",
            "[internet]: share of new external flows (of 100)",
            i.uplinks
                .iter()
                .map(|u| (port(u.port), f64::from(u.weight))),
        );
        e.counter(
            "uplink_flows",
            "[internet]: new external flows assigned to the uplink",
            i.uplinks.iter().map(|u| (port(u.port), u.flows)),
        );
        e.counter(
            "uplink_received_bytes",
            "[internet]: bytes received by balanced flows",
            i.uplinks.iter().map(|u| (port(u.port), u.rx_bytes)),
        );
        e.counter(
            "uplink_sent_bytes",
            "[internet]: bytes sent by balanced flows",
            i.uplinks.iter().map(|u| (port(u.port), u.tx_bytes)),
        );
    }
    e.finish()
}

/// The queue sojourn histograms of the outbound connections summed per class (label `class`
/// only: 2 values), classes in the order of their first connection.
fn sojourn_by_class(conns: &[crate::status::ConnStatus]) -> Vec<(Labels, Histogram)> {
    let mut by_class: Vec<(&str, SojournHistogram)> = Vec::new();
    for c in conns.iter().filter(|c| c.direction == "out") {
        match by_class.iter_mut().find(|(k, _)| *k == c.class) {
            Some((_, h)) => h.merge(&c.queue_sojourn),
            None => by_class.push((&c.class, c.queue_sojourn)),
        }
    }
    by_class
        .into_iter()
        .map(|(class, h)| {
            (
                vec![("class", class.to_owned())],
                Histogram {
                    sum: h.sum_seconds(),
                    count: h.count,
                    buckets: h.buckets_seconds().collect(),
                },
            )
        })
        .collect()
}

/// Per tunnel connection and per subflow.
fn connections(e: &mut Exposition, report: &StatusReport, wan: &[Ipv4Addr]) {
    let conn_labels = |c: &crate::status::ConnStatus| -> Labels {
        vec![
            ("remote", c.remote_branch.to_string()),
            ("path_group", c.path_group.to_string()),
            ("class", c.class.clone()),
            ("index", c.index.to_string()),
            ("direction", c.direction.clone()),
        ]
    };
    let conns = &report.connections;
    let per_conn = |f: &dyn Fn(&crate::status::ConnStatus) -> u64| -> Vec<(Labels, u64)> {
        conns.iter().map(|c| (conn_labels(c), f(c))).collect()
    };
    let per_conn_g = |f: &dyn Fn(&crate::status::ConnStatus) -> f64| -> Vec<(Labels, f64)> {
        conns.iter().map(|c| (conn_labels(c), f(c))).collect()
    };
    e.gauge(
        "connection_up",
        "1 while the tunnel connection is established",
        per_conn_g(&|c| f64::from(u8::from(c.state == ConnState::Up))),
    );
    e.counter(
        "connection_established",
        "Times the tunnel connection was (re-)established",
        per_conn(&|c| c.established),
    );
    e.counter(
        "connection_sent_bytes",
        "Payload bytes written to the tunnel connection (since it was established)",
        per_conn(&|c| c.bytes_tx),
    );
    e.counter(
        "connection_received_bytes",
        "Payload bytes received on the tunnel connection (since it was established)",
        per_conn(&|c| c.bytes_rx),
    );
    e.counter(
        "connection_sent_frames",
        "Frames written to the tunnel connection",
        per_conn(&|c| c.frames_tx),
    );
    e.counter(
        "connection_received_frames",
        "Frames received on the tunnel connection",
        per_conn(&|c| c.frames_rx),
    );
    e.counter(
        "connection_retransmitted_bytes",
        "MPTCP-level bytes retransmitted (MPTCP_INFO)",
        per_conn(&|c| c.bytes_retrans),
    );
    e.gauge(
        "connection_subflows",
        "Established subflows of the connection",
        per_conn_g(&|c| c.subflows.iter().filter(|s| s.is_established()).count() as f64),
    );
    e.gauge(
        "connection_subflows_wanted",
        "Subflows the connection should have (n x m outbound, 0 inbound)",
        per_conn_g(&|c| c.subflows_wanted as f64),
    );
    e.gauge(
        "connection_queue_bytes",
        "Bytes waiting in the gateway's own queue of the connection (fair queue + CoDel)",
        per_conn_g(&|c| c.queue_bytes as f64),
    );
    e.gauge(
        "connection_socket_queue_bytes",
        "Bytes the connection's MPTCP socket holds that are not in flight",
        per_conn_g(&|c| c.socket_queued_bytes as f64),
    );
    e.gauge(
        "connection_send_time_budget_bytes",
        "Bytes the send time budget lets the connection's paths hold now (0: off or not measured)",
        per_conn_g(&|c| c.send_time_budget_bytes as f64),
    );
    e.gauge(
        "connection_delivery_rate_bytes_per_second",
        "The subflows' delivery rate the send time budget was made of (0: off)",
        per_conn_g(&|c| c.delivery_rate_bytes_per_second as f64),
    );
    e.gauge(
        "connection_stall_cover_seconds",
        "Time the send time budget adds for the gateway's own stalls (its writer's recent worst \
         lateness beyond the margin; 0: none)",
        per_conn_g(&|c| c.stall_cover_us as f64 / 1e6),
    );
    // With --pacing only: the pacer of each outbound connection.
    let paced = |f: &dyn Fn(&crate::status::PacingStatus) -> f64| -> Vec<(Labels, f64)> {
        conns
            .iter()
            .filter_map(|c| c.pacing.as_ref().map(|p| (conn_labels(c), f(p))))
            .collect()
    };
    e.gauge(
        "connection_pacing_rate_bytes_per_second",
        "The rate the writer is paced at (0 in start-up: not paced)",
        paced(&|p| p.rate_bytes_per_second as f64),
    );
    e.gauge(
        "connection_pacing_bottleneck_bytes_per_second",
        "The pacer's measured bottleneck rate (BtlBw)",
        paced(&|p| p.bottleneck_bytes_per_second as f64),
    );
    e.gauge(
        "connection_pacing_gain",
        "The pacing rate over the bottleneck rate (0 in start-up)",
        paced(&|p| f64::from(p.gain_percent) / 100.0),
    );
    e.gauge(
        "connection_pacing_queue_delay_seconds",
        "The queue on the connection's paths at the pacer's last sample",
        paced(&|p| p.queue_delay_us as f64 / 1e6),
    );
    e.gauge(
        "connection_pacing_phase",
        "1 for the pacer's current phase (startup, drain, probe_bw)",
        conns
            .iter()
            .filter_map(|c| {
                c.pacing.as_ref().map(|p| {
                    let mut l = conn_labels(c);
                    l.push(("phase", p.phase.clone()));
                    (l, 1.0)
                })
            })
            .collect::<Vec<(Labels, f64)>>(),
    );
    e.histogram(
        "gateway_queue_sojourn_seconds",
        "Time packets waited in the gateway's own queues (enqueue to dequeue), per class",
        sojourn_by_class(conns),
    );

    let sub_labels = subflow_series(conns, &|c, s| {
        let mut l = conn_labels(c);
        l.push(("wan_port", wan_port(wan, &s.local)));
        l.push(("peer", ip_of(&s.remote)));
        l
    });
    // Gauges: the established subflow of a series (else its first); counters: summed.
    let per_sub = |f: &dyn Fn(&crate::status::SubflowStatus) -> f64| -> Vec<(Labels, f64)> {
        sub_labels
            .iter()
            .filter_map(|(l, v)| {
                let s = v.iter().find(|s| s.is_established()).or(v.first())?;
                Some((l.clone(), f(s)))
            })
            .collect()
    };
    let per_sub_c = |f: &dyn Fn(&crate::status::SubflowStatus) -> u64| -> Vec<(Labels, u64)> {
        sub_labels
            .iter()
            .map(|(l, v)| (l.clone(), v.iter().map(|s| f(s)).sum()))
            .collect()
    };
    e.gauge(
        "subflow_up",
        "1 while the subflow is established",
        per_sub(&|s| f64::from(u8::from(s.state.is_empty() || s.is_established()))),
    );
    e.gauge(
        "subflow_rtt_seconds",
        "Smoothed RTT of the subflow (MPTCP_TCPINFO)",
        per_sub(&|s| f64::from(s.rtt_us) / 1e6),
    );
    e.gauge(
        "subflow_cwnd_segments",
        "Congestion window of the subflow",
        per_sub(&|s| f64::from(s.cwnd)),
    );
    e.counter(
        "subflow_acked_bytes",
        "Bytes the peer acknowledged on the subflow",
        per_sub_c(&|s| s.bytes_acked),
    );
    e.counter(
        "subflow_received_bytes",
        "Bytes received on the subflow",
        per_sub_c(&|s| s.bytes_received),
    );
    e.counter(
        "subflow_retransmitted_bytes",
        "Bytes retransmitted on the subflow",
        per_sub_c(&|s| s.bytes_retrans),
    );
}

/// The subflows of `conns` grouped by their series' labels (`labels` of a connection and a
/// subflow). Two subflows of one connection can share the labels (WAN port, peer address) for a
/// moment: the peer opens a new subflow while the old one is still closing (fast failover, a
/// re-dial). One series each, or the exposition would repeat a sample (seen in `dashboard_e2e`).
fn subflow_series<'a>(
    conns: &'a [crate::status::ConnStatus],
    labels: &dyn Fn(&crate::status::ConnStatus, &crate::status::SubflowStatus) -> Labels,
) -> Vec<(Labels, Vec<&'a crate::status::SubflowStatus>)> {
    let mut series: Vec<(Labels, Vec<&crate::status::SubflowStatus>)> = Vec::new();
    for c in conns {
        for s in &c.subflows {
            let l = labels(c, s);
            match series.iter_mut().find(|(m, _)| *m == l) {
                Some((_, v)) => v.push(s),
                None => series.push((l, vec![s])),
            }
        }
    }
    series
}

/// Binds the metrics listener (`--metrics-listen`).
pub async fn bind(addr: SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    let l = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("bind the metrics listener {addr}"))?;
    if !addr.ip().is_loopback() {
        warn!(%addr, "metrics listener is not on loopback: anyone who reaches it reads the gateway's state");
    }
    info!(%addr, "metrics listening on /metrics");
    Ok(l)
}

/// Serves `GET /metrics` (and nothing else) forever.
pub async fn serve(listener: tokio::net::TcpListener, src: ReportSource, wan: Vec<Ipv4Addr>) {
    use axum::http::header;
    use axum::routing::get;
    let state = Arc::new((src, wan));
    let app = axum::Router::new().route(
        "/metrics",
        get(move |headers: axum::http::HeaderMap| {
            let state = Arc::clone(&state);
            async move {
                let (src, wan) = &*state;
                let report = src.stats.report(src.branch, src.offload, src.path_manager);
                let text = render(&report, wan);
                let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
                if wants_openmetrics(accept) {
                    ([(header::CONTENT_TYPE, CONTENT_TYPE)], text)
                } else {
                    (
                        [(header::CONTENT_TYPE, TEXT_CONTENT_TYPE)],
                        to_prometheus_text(&text),
                    )
                }
            }
        }),
    );
    if let Err(e) = axum::serve(listener, app).await {
        warn!(error = %e, "metrics listener ended");
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
