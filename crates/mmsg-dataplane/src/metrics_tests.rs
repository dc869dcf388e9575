use std::collections::BTreeMap;

use super::*;
use crate::stats::{Stats, SubflowStatus};
use crate::status::{ConnStatus, ControllerStatus, PacingStatus, TlsStatus};

/// One sample of the exposition: name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// A strict reader of the OpenMetrics text `render` writes: every line is `# HELP`, `# TYPE`,
/// `# UNIT` or a sample of the family declared last; names and label names are valid; counter
/// samples end in `_total`; values parse; label sets are unique per family; `# EOF` ends it.
fn parse(text: &str) -> (BTreeMap<String, String>, Vec<Sample>) {
    let valid_name = |n: &str| {
        !n.is_empty()
            && n.chars().enumerate().all(|(i, c)| {
                c == '_' || c == ':' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit())
            })
    };
    let mut types = BTreeMap::new();
    let mut samples: Vec<Sample> = Vec::new();
    let mut family = String::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut eof = false;
    for line in text.lines() {
        assert!(!eof, "text after # EOF: {line}");
        if line == "# EOF" {
            eof = true;
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').unwrap();
            assert!(valid_name(name), "{line}");
            assert!(
                ["counter", "gauge", "info", "histogram"].contains(&ty),
                "{line}"
            );
            assert!(
                types.insert(name.to_owned(), ty.to_owned()).is_none(),
                "twice: {line}"
            );
            family = name.to_owned();
            continue;
        }
        if line.starts_with("# HELP ") || line.starts_with("# UNIT ") {
            continue;
        }
        assert!(!line.starts_with('#'), "unknown comment {line}");
        let (head, value) = line.rsplit_once(' ').unwrap();
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("value of {line}"));
        let (name, labels) = match head.split_once('{') {
            Some((n, l)) => (n, l.strip_suffix('}').unwrap()),
            None => (head, ""),
        };
        assert!(valid_name(name), "{line}");
        let mut set = BTreeMap::new();
        if !labels.is_empty() {
            for kv in labels.split(',') {
                let (k, v) = kv.split_once('=').unwrap();
                assert!(valid_name(k), "label {k} in {line}");
                let v = v
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .unwrap();
                set.insert(k.to_owned(), v.to_owned());
            }
        }
        let ty = types
            .get(&family)
            .unwrap_or_else(|| panic!("no TYPE for {line}"));
        match ty.as_str() {
            "counter" => assert_eq!(name, format!("{family}_total"), "{line}"),
            "info" => assert_eq!(name, format!("{family}_info"), "{line}"),
            "histogram" => assert!(
                ["_bucket", "_sum", "_count"]
                    .iter()
                    .any(|x| name == format!("{family}{x}"))
                    && (name.ends_with("_bucket") == set.contains_key("le")),
                "{line}"
            ),
            _ => assert_eq!(name, family, "{line}"),
        }
        assert!(
            seen.insert((name.to_owned(), labels.to_owned())),
            "duplicate {line}"
        );
        samples.push((name.to_owned(), set, value));
    }
    assert!(eof, "no # EOF");
    (types, samples)
}

fn report() -> StatusReport {
    let stats = Stats::default();
    Stats::add(&stats.tun_rx_bytes, 1234);
    Stats::add(&stats.drop_codel, 3);
    Stats::add(&stats.tls_handshakes_in, 2);
    Stats::add(&stats.tls_revoked, 1);
    stats.set_conn(
        "out-b2-g1-type2",
        ConnStatus {
            direction: "out".into(),
            remote_branch: 2,
            path_group: 1,
            class: "type2".into(),
            state: ConnState::Up,
            bytes_tx: 5000,
            subflows_wanted: 4,
            queue_bytes: 42,
            send_time_budget_bytes: 61_440,
            delivery_rate_bytes_per_second: 2_300_000,
            stall_cover_us: 27_000,
            pacing: Some(PacingStatus {
                phase: "probe_bw".into(),
                gain_percent: 75,
                rate_bytes_per_second: 1_725_000,
                bottleneck_bytes_per_second: 2_300_000,
                round_us: 20_600,
                queue_delay_us: 4_500,
            }),
            queue_sojourn: {
                let mut h = mpa::queue::SojournHistogram::default();
                h.record(std::time::Duration::from_millis(3));
                h.record(std::time::Duration::from_millis(4));
                h.record(std::time::Duration::from_millis(30));
                h
            },
            subflows: vec![SubflowStatus {
                local: "198.18.11.2:40000".into(),
                remote: "198.18.20.2:45057".into(),
                state: "established".into(),
                rtt_us: 2500,
                cwnd: 10,
                bytes_acked: 4000,
                bytes_received: 100,
                bytes_retrans: 7,
            }],
            ..ConnStatus::default()
        },
    );
    stats.update_controller(|c| {
        *c = ControllerStatus {
            connected: true,
            config_version: 9,
            source: "controller".into(),
            ..ControllerStatus::default()
        }
    });
    stats.set_tls(TlsStatus {
        serial: 5,
        reloads: 0,
        not_after: 1_900_000_000,
        crl_next_update: Some(1_800_000_000),
        crl_number: Some(3),
    });
    stats.report(1, true, "userspace")
}

fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .find(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(v))
        })
        .map(|s| s.2)
        .unwrap_or_else(|| panic!("no {name} {labels:?}"))
}

#[test]
fn names_types_and_labels() {
    let wan = [
        "198.18.10.2".parse().unwrap(),
        "198.18.11.2".parse().unwrap(),
    ];
    let text = render(&report(), &wan);
    let (types, s) = parse(&text);
    assert_eq!(types["mms_packets_dropped"], "counter");
    assert_eq!(types["mms_subflow_rtt_seconds"], "gauge");
    assert_eq!(types["mms_connection_sent_bytes"], "counter");
    assert_eq!(value(&s, "mms_tun_rx_bytes_total", &[]), 1234.0);
    assert_eq!(
        value(&s, "mms_packets_dropped_total", &[("reason", "codel")]),
        3.0
    );
    assert_eq!(
        value(&s, "mms_packets_dropped_total", &[("reason", "queue_full")]),
        0.0
    );
    assert_eq!(
        value(&s, "mms_tls_handshakes_total", &[("direction", "in")]),
        2.0
    );
    assert_eq!(
        value(
            &s,
            "mms_tls_handshake_failures_total",
            &[("reason", "in_revoked")]
        ),
        1.0
    );
    let conn = [
        ("remote", "2"),
        ("path_group", "1"),
        ("class", "type2"),
        ("direction", "out"),
    ];
    assert_eq!(value(&s, "mms_connection_up", &conn), 1.0);
    assert_eq!(value(&s, "mms_connection_sent_bytes_total", &conn), 5000.0);
    assert_eq!(value(&s, "mms_connection_queue_bytes", &conn), 42.0);
    // The latency controls (`--send-time-budget`, `--pacing`): the pacer's phase as a label.
    let g = |name: &str| value(&s, name, &conn);
    assert_eq!(g("mms_connection_send_time_budget_bytes"), 61_440.0);
    assert_eq!(g("mms_connection_stall_cover_seconds"), 0.027);
    assert_eq!(
        g("mms_connection_delivery_rate_bytes_per_second"),
        2_300_000.0
    );
    assert_eq!(
        g("mms_connection_pacing_rate_bytes_per_second"),
        1_725_000.0
    );
    assert_eq!(
        g("mms_connection_pacing_bottleneck_bytes_per_second"),
        2_300_000.0
    );
    assert_eq!(g("mms_connection_pacing_gain"), 0.75);
    assert_eq!(g("mms_connection_pacing_queue_delay_seconds"), 0.0045);
    let mut phase = conn.to_vec();
    phase.push(("phase", "probe_bw"));
    assert_eq!(value(&s, "mms_connection_pacing_phase", &phase), 1.0);
    assert_eq!(types["mms_connection_pacing_phase"], "gauge");
    // Queue sojourn, per class only (cumulative buckets in seconds).
    assert_eq!(types["mms_gateway_queue_sojourn_seconds"], "histogram");
    let class = [("class", "type2")];
    let soj = "mms_gateway_queue_sojourn_seconds";
    assert_eq!(value(&s, &format!("{soj}_count"), &class), 3.0);
    assert!((value(&s, &format!("{soj}_sum"), &class) - 0.037).abs() < 1e-9);
    let bucket = |le: &str| {
        value(
            &s,
            &format!("{soj}_bucket"),
            &[("class", "type2"), ("le", le)],
        )
    };
    assert_eq!(bucket("0.0025"), 0.0);
    assert_eq!(bucket("0.005"), 2.0);
    assert_eq!(bucket("0.025"), 2.0);
    assert_eq!(bucket("0.05"), 3.0);
    assert_eq!(bucket("+Inf"), 3.0);
    assert!(s
        .iter()
        .filter(|(n, ..)| n.starts_with(soj))
        .all(|(_, l, _)| l.keys().all(|k| k == "class" || k == "le")));
    assert_eq!(value(&s, "mms_connection_subflows_wanted", &conn), 4.0);
    let sub = [("remote", "2"), ("wan_port", "1"), ("peer", "198.18.20.2")];
    assert_eq!(value(&s, "mms_subflow_rtt_seconds", &sub), 0.0025);
    assert_eq!(value(&s, "mms_subflow_cwnd_segments", &sub), 10.0);
    assert_eq!(value(&s, "mms_subflow_acked_bytes_total", &sub), 4000.0);
    assert_eq!(
        value(&s, "mms_subflow_retransmitted_bytes_total", &sub),
        7.0
    );
    assert_eq!(value(&s, "mms_controller_connected", &[]), 1.0);
    assert_eq!(
        value(&s, "mms_config_version", &[("source", "controller")]),
        9.0
    );
    assert_eq!(
        value(
            &s,
            "mms_tls_certificate_expiry_timestamp_seconds",
            &[("serial", "5")]
        ),
        1_900_000_000.0
    );
    assert_eq!(value(&s, "mms_build_info", &[("branch", "1")]), 1.0);
    // No drop counter escapes the reason label, no TLS result its family.
    assert!(!text.contains("mms_drop_"), "{text}");
    assert!(!text.contains("mms_tls_revoked"), "{text}");
    // Ports are never label values (unbounded).
    assert!(!text.contains(":40000"), "{text}");
}

#[test]
fn every_counter_is_exported_once() {
    let r = report();
    let (_, s) = parse(&render(&r, &[]));
    let total: f64 = s
        .iter()
        .filter(|(n, ..)| {
            n.ends_with("_total")
                && !n.starts_with("mms_connection_")
                && !n.starts_with("mms_subflow_")
                && !n.starts_with("mms_config")
        })
        .map(|x| x.2)
        .sum();
    let counters: u64 = r.counters.values().sum();
    assert_eq!(total, counters as f64);
}

#[test]
fn the_classic_text_format_names_counters_with_total_and_passes_promtool() {
    let text = to_prometheus_text(&render(&report(), &[]));
    assert!(
        text.contains("# TYPE mms_tun_rx_bytes_total counter\n"),
        "{text}"
    );
    assert!(text.contains("# HELP mms_tun_rx_bytes_total "), "{text}");
    assert!(text.contains("# TYPE mms_connection_up gauge\n"), "{text}");
    assert!(!text.contains("# EOF"));
    // Debian's promtool (package `prometheus`), when installed, checks it as Prometheus would.
    let Ok(mut child) = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    else {
        eprintln!("promtool not installed: skipped its check");
        return;
    };
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A peer's new subflow and its old one, still closing, on the same WAN port and peer address
/// (fast failover, a re-dial): one series, not a repeated sample (the exposition checkers refuse
/// duplicates; seen in `dashboard_e2e`). Gauges from the established one, counters summed.
#[test]
fn two_subflows_with_the_same_port_and_peer_are_one_series() {
    let wan = [
        "198.18.10.2".parse().unwrap(),
        "198.18.11.2".parse().unwrap(),
    ];
    let stats = Stats::default();
    let sub = |port: u16, state: &str, rtt_us: u32, acked: u64| SubflowStatus {
        local: "198.18.10.2:6701".into(),
        remote: format!("198.18.20.2:{port}"),
        state: state.into(),
        rtt_us,
        cwnd: 10,
        bytes_acked: acked,
        bytes_received: 0,
        bytes_retrans: 0,
    };
    stats.set_conn(
        "in-b2-g1-type2",
        ConnStatus {
            direction: "in".into(),
            remote_branch: 2,
            path_group: 1,
            class: "type2".into(),
            state: ConnState::Up,
            subflows: vec![
                sub(40001, "fin_wait1", 900_000, 1000),
                sub(40002, "established", 2500, 500),
            ],
            ..ConnStatus::default()
        },
    );
    let text = render(&stats.report(1, true, "userspace"), &wan);
    // `parse` refuses a repeated sample, as the strict reader of the netns tests does.
    let (_, s) = parse(&text);
    let labels = [("remote", "2"), ("wan_port", "0"), ("peer", "198.18.20.2")];
    let series = |name: &str| {
        s.iter()
            .filter(|(n, l, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(v))
            })
            .count()
    };
    assert_eq!(series("mms_subflow_up"), 1);
    assert_eq!(value(&s, "mms_subflow_up", &labels), 1.0);
    assert_eq!(value(&s, "mms_subflow_rtt_seconds", &labels), 0.0025);
    assert_eq!(value(&s, "mms_subflow_acked_bytes_total", &labels), 1500.0);
    // Not paced: no pacing family at all.
    assert!(!text.contains("mms_connection_pacing"), "{text}");
}
