//! Prometheus metrics of `ssc` (issue #19; the reference is `docs/metrics.md`), served at
//! `GET /metrics` on the REST listener with the API's bearer token (a read-only token is
//! enough; Prometheus sends it with `authorization: {credentials_file: ...}`).
//!
//! One source of truth: nothing here counts. [`render`] writes what the REST API serves (the
//! SDC's [`StatsView`], the WRR weights, the gateway channel's [`GatewayList`], the CA's
//! certificates) in the OpenMetrics text format with `prometheus-client`. Pure: values in, text
//! out. [`check`] is a strict reader of that format for the tests (unit and netns).
//!
//! Labels, all bounded by the inventory: `branch` (the gateway / source branch, ≤ 15),
//! `remote` (destination branch), `path_group` (≤ 16 per pair), `member` (member path of a
//! group), `direction` (`forward`: branch → remote, `reverse`), `port` (OVS port number of a
//! switch), `reason`.

use std::collections::BTreeMap;

use crate::gwchan::GatewayList;
use crate::sdc::{StatsView, Traffic};
use crate::store::creds::CertRow;
use crate::wrr::PairWeights;

pub use mms_types::exposition::{
    to_prometheus_text, wants_openmetrics, CONTENT_TYPE, TEXT_CONTENT_TYPE,
};
use mms_types::exposition::{Exposition, Labels};

/// What one scrape shows.
#[derive(Debug, Default)]
pub struct Inputs<'a> {
    /// The SDC's statistics (`None`: no OpenFlow server in this process).
    pub stats: Option<&'a StatsView>,
    /// The WRR weights of every ordered pair.
    pub weights: &'a [PairWeights],
    /// The gateway channel.
    pub gateways: Option<&'a GatewayList>,
    /// Certificates the CA issued.
    pub certificates: &'a [CertRow],
}

fn b(v: bool) -> f64 {
    f64::from(u8::from(v))
}

fn directions(labels: &Labels, t: &Traffic) -> [(Labels, u64, f64); 2] {
    let with = |d: &str| {
        let mut l = labels.clone();
        l.push(("direction", d.to_owned()));
        l
    };
    [
        (with("forward"), t.forward_bytes, t.forward_bits_per_s / 8.0),
        (with("reverse"), t.reverse_bytes, t.reverse_bits_per_s / 8.0),
    ]
}

/// The exposition of one scrape.
pub fn render(i: &Inputs<'_>) -> String {
    let mut e = Exposition::default();
    e.gauge(
        "build_info",
        "Always 1: the ssc version",
        [(
            vec![
                ("version", env!("CARGO_PKG_VERSION").to_owned()),
                ("component", "ssc".to_owned()),
            ],
            1.0,
        )],
    );
    if let Some(s) = i.stats {
        sdc(&mut e, s);
    }
    weights(&mut e, i.weights);
    if let Some(g) = i.gateways {
        gateways(&mut e, g);
    }
    // The newest unrevoked certificate of each branch (0: ssc's own `ssc.mms`).
    let mut newest: BTreeMap<u8, u64> = BTreeMap::new();
    for c in i.certificates.iter().filter(|c| c.revoked.is_none()) {
        let n = newest.entry(c.branch).or_default();
        *n = (*n).max(c.not_after);
    }
    e.gauge(
        "certificate_expiry_timestamp_seconds",
        "notAfter of the newest unrevoked certificate the CA issued per branch (0: ssc's own), Unix seconds",
        newest
            .into_iter()
            .map(|(b, t)| (vec![("branch", b.to_string())], t as f64)),
    );
    e.finish()
}

fn sdc(e: &mut Exposition, s: &StatsView) {
    let br = |b: u8| vec![("branch", b.to_string())];
    e.gauge(
        "switch_connected",
        "1 while the branch's OVS is connected over OpenFlow",
        s.branches.iter().map(|x| (br(x.branch), b(x.connected))),
    );
    e.gauge(
        "switch_flows",
        "Flows of the branch's OVS: compiled by ssc, reported by the switch",
        s.branches.iter().flat_map(|x| {
            let mut c = br(x.branch);
            c.push(("state", "compiled".to_owned()));
            let mut r = br(x.branch);
            r.push(("state", "reported".to_owned()));
            [(c, x.flows_compiled as f64), (r, x.flows_reported as f64)]
        }),
    );
    e.counter(
        "switch_reconciles",
        "Reconciliations of the branch's flow table (one per (re)connect)",
        s.branches.iter().map(|x| (br(x.branch), x.reconciles)),
    );
    let port = |branch: u8, p: u32| vec![("branch", branch.to_string()), ("port", p.to_string())];
    e.counter(
        "switch_port_received_bytes",
        "Bytes received on a port of the branch's OVS (port stats)",
        s.branches.iter().flat_map(|x| {
            x.ports
                .iter()
                .map(move |p| (port(x.branch, p.port), p.rx_bytes))
        }),
    );
    e.counter(
        "switch_port_sent_bytes",
        "Bytes sent on a port of the branch's OVS (port stats)",
        s.branches.iter().flat_map(|x| {
            x.ports
                .iter()
                .map(move |p| (port(x.branch, p.port), p.tx_bytes))
        }),
    );
    let pair = |a: u8, z: u8| vec![("branch", a.to_string()), ("remote", z.to_string())];
    let group = |a: u8, z: u8, g: u8| {
        let mut l = pair(a, z);
        l.push(("path_group", g.to_string()));
        l
    };
    let member = |a: u8, z: u8, g: u8, m: u8| {
        let mut l = group(a, z, g);
        l.push(("member", m.to_string()));
        l
    };
    let pairs: Vec<(Labels, u64, f64)> = s
        .pairs
        .iter()
        .flat_map(|p| directions(&pair(p.source, p.destination), &p.traffic))
        .collect();
    let groups: Vec<(Labels, u64, f64)> = s
        .groups
        .iter()
        .flat_map(|p| directions(&group(p.source, p.destination, p.group), &p.traffic))
        .collect();
    let members: Vec<(Labels, u64, f64)> = s
        .members
        .iter()
        .flat_map(|p| {
            directions(
                &member(p.source, p.destination, p.group, p.member),
                &p.traffic,
            )
        })
        .collect();
    for (name, what, rows) in [
        ("pair", "a branch pair (all its path groups)", &pairs),
        ("path_group", "a path group", &groups),
        (
            "member_path",
            "a member path (OVS flow stats of its swap flows)",
            &members,
        ),
    ] {
        e.counter(
            &format!("{name}_bytes"),
            &format!("Bytes through {what}, from the OVS flow counters"),
            rows.iter().map(|(l, v, _)| (l.clone(), *v)),
        );
        e.gauge(
            &format!("{name}_rate_bytes_per_second"),
            &format!("Rate through {what} over the last sampling interval"),
            rows.iter().map(|(l, _, r)| (l.clone(), *r)),
        );
    }
    e.counter(
        "openflow_unauthenticated_samples",
        "Statistics replies from switches that did not authenticate (ignored)",
        [(vec![], s.unauthenticated_samples)],
    );
}

fn weights(e: &mut Exposition, w: &[PairWeights]) {
    let l = |p: &PairWeights, g: u8| {
        vec![
            ("branch", p.source.to_string()),
            ("remote", p.destination.to_string()),
            ("path_group", g.to_string()),
        ]
    };
    e.gauge(
        "path_group_weight_ratio",
        "WRR weight of the path group within its pair (0..1; the API's integer weight / scale)",
        w.iter().flat_map(|p| {
            p.groups.iter().map(move |g| {
                let scale = f64::from(p.scale.max(1));
                (l(p, g.group), f64::from(g.weight) / scale)
            })
        }),
    );
    e.gauge(
        "path_group_capacity_estimate_bytes_per_second",
        "The capacity the WRR weights use: the estimate from gateway reports, else configured",
        w.iter().flat_map(|p| {
            p.groups.iter().map(move |g| {
                let bps = g.estimated_bps.unwrap_or(g.configured_kbps as f64 * 1000.0);
                (l(p, g.group), bps / 8.0)
            })
        }),
    );
}

fn gateways(e: &mut Exposition, g: &GatewayList) {
    let br = |b: u8| vec![("branch", b.to_string())];
    let gws = &g.gateways;
    e.gauge(
        "gateway_connected",
        "1 while the branch's mmsg has a gateway-channel session",
        gws.iter().map(|x| (br(x.branch), b(x.connected))),
    );
    e.gauge(
        "gateway_config_version",
        "Config version of the branch: current (ssc's), sent, acked (what the gateway runs)",
        gws.iter().flat_map(|x| {
            [
                ("current", x.config_version),
                ("sent", x.config_version_sent),
                ("acked", x.config_version_acked),
            ]
            .map(|(k, v)| {
                let mut l = br(x.branch);
                l.push(("state", k.to_owned()));
                (l, v as f64)
            })
        }),
    );
    e.counter(
        "gateway_sessions",
        "Gateway-channel sessions opened by the branch",
        gws.iter().map(|x| (br(x.branch), x.sessions)),
    );
    let reported: Vec<_> = gws
        .iter()
        .filter_map(|x| x.last_report.as_ref().map(|r| (x, r)))
        .collect();
    e.gauge(
        "gateway_report_age_seconds",
        "Seconds since the branch's last report",
        gws.iter().filter_map(|x| {
            x.last_report_age_ms
                .map(|a| (br(x.branch), a as f64 / 1000.0))
        }),
    );
    e.gauge(
        "gateway_healthy",
        "1 when the gateway's last report says every configured path group is up",
        reported.iter().map(|(x, r)| (br(x.branch), b(r.healthy))),
    );
    e.gauge(
        "gateway_connections_up",
        "Outbound tunnel connections established (last report)",
        reported
            .iter()
            .map(|(x, r)| (br(x.branch), f64::from(r.connections_up))),
    );
    e.gauge(
        "gateway_connections",
        "Outbound tunnel connections configured (last report)",
        reported
            .iter()
            .map(|(x, r)| (br(x.branch), f64::from(r.connections_total))),
    );
    e.counter(
        "gateway_packets_dropped",
        "Packets the gateway dropped, every reason summed (last report)",
        reported.iter().map(|(x, r)| (br(x.branch), r.drops)),
    );
    let gl = |x: u8, remote: u8, group: u8| {
        vec![
            ("branch", x.to_string()),
            ("remote", remote.to_string()),
            ("path_group", group.to_string()),
        ]
    };
    e.gauge(
        "path_group_up",
        "1 when all the path group's tunnel connections are up (the source gateway's report)",
        reported.iter().flat_map(|(x, r)| {
            r.groups
                .iter()
                .map(move |gr| (gl(x.branch, gr.branch, gr.group), b(gr.up)))
        }),
    );
    e.counter(
        "path_group_sent_bytes",
        "Tunnel bytes the source gateway wrote on the path group's connections (its report)",
        reported.iter().flat_map(|(x, r)| {
            r.groups
                .iter()
                .map(move |gr| (gl(x.branch, gr.branch, gr.group), gr.bytes_tx))
        }),
    );
    e.counter(
        "gateway_channel_refused",
        "Gateway-channel sessions refused or replaced, by reason",
        [
            ("unknown_branch", g.rejected_unknown_branch),
            ("auth", g.rejected_auth),
            ("other", g.rejected_other),
            ("replaced", g.replaced),
        ]
        .map(|(k, v)| (vec![("reason", k.to_owned())], v)),
    );
}

/// One sample of an exposition: name, labels, value.
pub type Sample = (String, BTreeMap<String, String>, f64);

/// A strict reader of the OpenMetrics text [`render`] (and `mmsg`) write: every line is
/// `# HELP`, `# TYPE`, `# UNIT` or a sample of the family declared last; names and label names
/// are valid; counters' samples end in `_total`; histograms' are `_bucket` (with `le`), `_sum`
/// or `_count`; values parse; no sample twice; `# EOF` last.
/// The families' types by name, and the samples.
#[allow(clippy::type_complexity)]
pub fn check(text: &str) -> Result<(BTreeMap<String, String>, Vec<Sample>), String> {
    let valid = |n: &str| {
        !n.is_empty()
            && n.chars().enumerate().all(|(i, c)| {
                c == '_' || c == ':' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit())
            })
    };
    let mut types = BTreeMap::new();
    let mut samples = Vec::new();
    let mut family = String::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut eof = false;
    for line in text.lines() {
        if eof {
            return Err(format!("text after # EOF: {line}"));
        }
        if line == "# EOF" {
            eof = true;
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').ok_or(format!("bad TYPE: {line}"))?;
            if !valid(name) || !["counter", "gauge", "info", "histogram"].contains(&ty) {
                return Err(format!("bad TYPE: {line}"));
            }
            if types.insert(name.to_owned(), ty.to_owned()).is_some() {
                return Err(format!("family declared twice: {line}"));
            }
            family = name.to_owned();
            continue;
        }
        if line.starts_with("# HELP ") || line.starts_with("# UNIT ") {
            continue;
        }
        if line.starts_with('#') {
            return Err(format!("unknown comment: {line}"));
        }
        let (head, value) = line.rsplit_once(' ').ok_or(format!("no value: {line}"))?;
        let value: f64 = value.parse().map_err(|_| format!("bad value: {line}"))?;
        let (name, labels) = match head.split_once('{') {
            Some((n, l)) => (n, l.strip_suffix('}').ok_or(format!("bad labels: {line}"))?),
            None => (head, ""),
        };
        let mut set = BTreeMap::new();
        if !labels.is_empty() {
            for kv in labels.split(',') {
                let (k, v) = kv.split_once('=').ok_or(format!("bad label: {line}"))?;
                let v = v
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .ok_or(format!("unquoted label value: {line}"))?;
                if !valid(k) || set.insert(k.to_owned(), v.to_owned()).is_some() {
                    return Err(format!("bad label name: {line}"));
                }
            }
        }
        let want = match types.get(&family).map(String::as_str) {
            Some("counter") => format!("{family}_total"),
            Some("histogram") => {
                let suffix = name.strip_prefix(family.as_str()).unwrap_or_default();
                if !["_bucket", "_sum", "_count"].contains(&suffix)
                    || (suffix == "_bucket") != set.contains_key("le")
                {
                    return Err(format!("bad histogram sample in {family}: {line}"));
                }
                name.to_owned()
            }
            Some("info") => format!("{family}_info"),
            Some(_) => family.clone(),
            None => return Err(format!("sample before any TYPE: {line}")),
        };
        if name != want || !valid(name) {
            return Err(format!("sample {name} in family {family}: {line}"));
        }
        if !seen.insert(head.to_owned()) {
            return Err(format!("duplicate sample: {line}"));
        }
        samples.push((name.to_owned(), set, value));
    }
    if !eof {
        return Err("no # EOF".to_owned());
    }
    Ok((types, samples))
}

/// The value of the sample `name` whose labels include `labels` (the first one).
pub fn value_of(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.2)
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
