use super::*;
use crate::gwchan::GatewayView;

fn traffic(fwd: u64, bps: f64) -> serde_json::Value {
    serde_json::json!({
        "forward_packets": 1, "forward_bytes": fwd, "forward_bits_per_s": bps,
        "reverse_packets": 0, "reverse_bytes": 0, "reverse_bits_per_s": 0.0,
    })
}

fn with(mut v: serde_json::Value, fields: &[(&str, serde_json::Value)]) -> serde_json::Value {
    let m = v.as_object_mut().unwrap();
    for (k, f) in fields {
        m.insert((*k).to_owned(), f.clone());
    }
    v
}

fn stats() -> StatsView {
    let t = || traffic(1000, 8000.0);
    let pair = [("source", 1.into()), ("destination", 2.into())];
    let group = [
        ("source", 1.into()),
        ("destination", 2.into()),
        ("group", 0.into()),
    ];
    let member = [
        ("code", "0x2011".into()),
        ("source", 1.into()),
        ("destination", 2.into()),
        ("group", 0.into()),
        ("member", 1.into()),
    ];
    serde_json::from_value(serde_json::json!({
        "available": true,
        "branches": [],
        "pairs": [with(t(), &pair)],
        "groups": [with(t(), &group)],
        "members": [with(t(), &member)],
    }))
    .unwrap()
}

#[test]
fn names_types_labels_of_the_sdc_gateways_and_certificates() {
    let s = stats();
    let gateways = GatewayList {
        gateways: vec![GatewayView {
            branch: 1,
            connected: true,
            peer: String::new(),
            software_version: String::new(),
            wan: Vec::new(),
            config_version: 4,
            config_version_sent: 4,
            config_version_acked: 3,
            last_error: None,
            last_report: Some(mpa::gwchan::Report {
                healthy: true,
                groups: vec![mpa::gwchan::GroupReport {
                    branch: 2,
                    group: 0,
                    bytes_tx: 777,
                    up: true,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            last_report_age_ms: Some(1500),
            sessions: 1,
            wan_learned: None,
        }],
        ..GatewayList::default()
    };
    let certs = [
        CertRow {
            serial: 1,
            branch: 1,
            not_after: 100,
            revoked: None,
        },
        CertRow {
            serial: 2,
            branch: 1,
            not_after: 200,
            revoked: None,
        },
        CertRow {
            serial: 3,
            branch: 1,
            not_after: 300,
            revoked: Some(5),
        },
    ];
    let text = render(&Inputs {
        stats: Some(&s),
        weights: &[],
        gateways: Some(&gateways),
        certificates: &certs,
    });
    let (types, samples) = check(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(types["mms_member_path_bytes"], "counter");
    assert_eq!(types["mms_member_path_rate_bytes_per_second"], "gauge");
    let member = [
        ("branch", "1"),
        ("remote", "2"),
        ("path_group", "0"),
        ("member", "1"),
        ("direction", "forward"),
    ];
    assert_eq!(
        value_of(&samples, "mms_member_path_bytes_total", &member),
        Some(1000.0)
    );
    assert_eq!(
        value_of(&samples, "mms_member_path_rate_bytes_per_second", &member),
        Some(1000.0)
    );
    let group = [("branch", "1"), ("remote", "2"), ("path_group", "0")];
    assert_eq!(value_of(&samples, "mms_path_group_up", &group), Some(1.0));
    assert_eq!(
        value_of(&samples, "mms_path_group_sent_bytes_total", &group),
        Some(777.0)
    );
    assert_eq!(
        value_of(
            &samples,
            "mms_gateway_config_version",
            &[("branch", "1"), ("state", "acked")]
        ),
        Some(3.0)
    );
    assert_eq!(
        value_of(
            &samples,
            "mms_gateway_report_age_seconds",
            &[("branch", "1")]
        ),
        Some(1.5)
    );
    // The newest unrevoked certificate.
    assert_eq!(
        value_of(
            &samples,
            "mms_certificate_expiry_timestamp_seconds",
            &[("branch", "1")]
        ),
        Some(200.0)
    );
}

#[test]
fn the_checker_refuses_what_prometheus_would() {
    assert!(
        check("# TYPE a counter\na 1\n# EOF\n").is_err(),
        "counter without _total"
    );
    assert!(check("a 1\n# EOF\n").is_err(), "no TYPE");
    assert!(check("# TYPE a gauge\na 1\n").is_err(), "no EOF");
    assert!(
        check("# TYPE a gauge\na{x=\"1\"} 1\na{x=\"1\"} 2\n# EOF\n").is_err(),
        "duplicate"
    );
    assert!(
        check("# TYPE a gauge\na{1x=\"1\"} 1\n# EOF\n").is_err(),
        "label name"
    );
    assert!(check("# TYPE a gauge\na{x=\"1\"} 1\n# EOF\n").is_ok());
    let h =
        "# TYPE h histogram\nh_sum 1\nh_count 2\nh_bucket{le=\"0.5\"} 1\nh_bucket{le=\"+Inf\"} 2\n";
    assert!(check(&format!("{h}# EOF\n")).is_ok());
    assert!(
        check(&format!("{h}h_bucket 3\n# EOF\n")).is_err(),
        "bucket without le"
    );
    assert!(
        check(&format!("{h}h_max 3\n# EOF\n")).is_err(),
        "not a histogram sample"
    );
}
