//! The web dashboard on the whole system (issue #19; docs/ssc.md "Web dashboard"): the paper's
//! testbed with TLS tunnels (`xtask::e2e::System`, five `mmsg`, five OVS, one `ssc`), iperf3
//! from h1 to h2 with four TCP flows, and `/ui/` of that `ssc` in a real headless Chromium at
//! 1366x768 (`crates/controller/tests/browser`): without a token it shows the login and the API
//! refuses the page; with a read-only token typed into the form it draws all 16 member paths of
//! Table II with non-zero rates measured by the SDC from the OVS counters, the five gateways
//! up with their config acked (and the certificate column equal to what ssc's CA issued: none
//! here, the harness makes the tunnels' CA itself), and updates itself. The screenshot goes to
//! `$MMS_SCREENSHOT_DIR/dashboard.png` (default `results/dashboard/`).
//!
//! Needs root, iproute2, iperf3, Open vSwitch 3.1 and chromium; it FAILS without them, it never
//! skips. Everything is torn down by `System`'s `Drop` and the browser's, also on panic.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../crates/controller/tests/browser/mod.rs"]
mod browser;
mod common;
#[path = "common/scrape.rs"]
mod scrape;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use xtask::e2e::{System, BRANCHES};
use xtask::iperf::{self, Server};

use scrape::{sum, Scraper, Snapshot};

#[test]
fn dashboard_on_the_paper_system_with_traffic() {
    common::require_tools(&["ip", "iperf3", "ovs-vswitchd", "ovs-vsctl", "chromium"]);
    let t0 = Instant::now();
    // `MMS_TEST_PREFIX` (3 letters): a name of one's own for the namespaces (shared machines).
    let tag = std::env::var("MMS_TEST_PREFIX").unwrap_or_else(|_| "dsb".to_owned());
    let prefix = format!("{tag}{}", std::process::id() % 1_000_000);
    let mut opts = common::e2e_options(&prefix);
    opts.metrics_listen = Some(scrape::MMSG_METRICS.to_owned());
    assert!(opts.tls, "the e2e system runs TLS tunnels by default");
    let sys = System::up(&opts).unwrap();
    eprintln!(
        "MEASURE system up: {:.1} s; logs in {}",
        t0.elapsed().as_secs_f64(),
        sys.log_dir.display()
    );
    // A read-only token for the browser (the admin token stays with the test).
    let created: Value = ureq::post(&format!("{}/api/v1/tokens", sys.api_base))
        .set("authorization", &format!("Bearer {}", sys.token))
        .send_json(json!({"name": "dashboard", "role": "read-only", "ttl_s": 3600}))
        .unwrap()
        .into_json()
        .unwrap();
    let read_only = created["token"].as_str().unwrap().to_owned();

    // Traffic h1 -> h2 for the whole browser session: four flows over the four groups.
    let (h1, h2) = (sys.ns_host(1), sys.ns_host(2));
    let dst = sys.host_addr(2).to_string();
    let server = Server::start(&h2, 5201, None).unwrap();
    // `/metrics` of ssc and of every mmsg before the transfer (strict reader and promtool).
    let before = Snapshot::take(&sys, &sys.token);
    let scraper = Scraper::start(sys.api_base.clone(), read_only.clone());
    let iperf = std::thread::spawn({
        let h1 = h1.clone();
        move || iperf::client(&h1, &["-c", &dst, "-p", "5201", "-t", "45", "-P", "4"]).unwrap()
    });

    let profile = tempfile::tempdir().unwrap();
    let (_browser, mut cdp) = browser::chromium(profile.path());
    cdp.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 1366, "height": 768, "deviceScaleFactor": 1, "mobile": false}),
    );
    cdp.call(
        "Page.navigate",
        json!({"url": format!("{}/ui/", sys.api_base)}),
    );
    cdp.wait_eval(
        "the login",
        "document.body && document.body.dataset.state === 'login'",
        Duration::from_secs(30),
    );
    assert_eq!(
        cdp.eval("document.querySelectorAll('#members-table tbody tr').length"),
        0
    );
    assert_eq!(cdp.eval("fetch('/api/v1/stats').then(r => r.status)"), 401);

    cdp.eval("document.getElementById('token').focus()");
    cdp.call("Input.insertText", json!({"text": read_only}));
    cdp.eval("document.getElementById('login-form').requestSubmit()");
    // All 16 member paths drawn with traffic, in the same update.
    let expr = format!(
        "(() => {{ const r = JSON.parse({}); return r.length === 16 && r.every(x => x.bps > 0) && Number(document.body.dataset.updates) >= 2 ? JSON.stringify(r) : null; }})()",
        browser::MEMBER_ROWS
    );
    let rows = cdp.wait_eval(
        "16 member paths with non-zero rates in the page",
        &expr,
        Duration::from_secs(40),
    );
    let rows: Value = serde_json::from_str(rows.as_str().unwrap()).unwrap();
    let total_mbit: f64 = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["bps"].as_f64().unwrap() / 1e6)
        .sum();
    eprintln!("MEASURE dashboard: 16 member paths, forward sum {total_mbit:.1} Mbit/s");
    // A few more updates so the time series has a line, then the gateways' health.
    let n = cdp
        .eval("Number(document.body.dataset.updates)")
        .as_u64()
        .unwrap();
    cdp.wait_eval(
        "three more updates",
        &format!("Number(document.body.dataset.updates) >= {}", n + 3),
        Duration::from_secs(30),
    );
    let fits = cdp.eval("document.documentElement.scrollWidth <= innerWidth && document.documentElement.scrollHeight <= innerHeight");
    assert_eq!(fits, true, "fits 1366x768 without scrolling");
    let shot = cdp.call("Page.captureScreenshot", json!({"format": "png"}));
    let png = browser::base64_decode(shot["data"].as_str().unwrap());
    let out_dir = std::env::var_os("MMS_SCREENSHOT_DIR")
        .map_or_else(|| common::root().join("results/dashboard"), PathBuf::from);
    std::fs::create_dir_all(&out_dir).unwrap();
    std::fs::write(out_dir.join("dashboard.png"), &png).unwrap();
    eprintln!(
        "MEASURE screenshot {}",
        out_dir.join("dashboard.png").display()
    );

    let gw: Value = serde_json::from_str(
        cdp.eval("JSON.stringify([...document.querySelectorAll('#gateways-table tbody tr')].map(r => [...r.cells].map(c => c.textContent)))")
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let gw = gw.as_array().unwrap();
    assert_eq!(gw.len(), 5, "{gw:?}");
    // The certificates ssc issued (the harness signs the tunnels' certificates with the CA
    // files in ssc's `[ca] dir`, outside ssc's store, so they are not among them; enrolled
    // gateways' would be).
    let certs: Value = ureq::get(&format!("{}/api/v1/certificates", sys.api_base))
        .set("authorization", &format!("Bearer {read_only}"))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    for row in gw {
        assert!(
            row[1].as_str().unwrap().starts_with("up"),
            "gateway connected: {row:?}"
        );
        assert_eq!(row[3], "current", "config acked: {row:?}");
        let b: u64 = row[0].as_str().unwrap().parse().unwrap();
        let issued = certs["certificates"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["branch"] == b && c["revoked"].is_null())
            .map(|c| c["serial"].as_u64().unwrap())
            .max();
        match issued {
            Some(serial) => assert!(
                row[5].as_str().unwrap().starts_with(&format!("#{serial},")),
                "{row:?}"
            ),
            None => assert_eq!(row[5], "not enrolled", "{row:?}"),
        }
    }
    let v = iperf.join().unwrap();
    let rates = scraper.stop();
    server.wait(Duration::from_secs(2));
    let goodput = iperf::tcp_received_mbps(&v).unwrap();
    eprintln!("MEASURE iperf3 h1 -> h2, 4 flows: {goodput:.1} Mbit/s");
    assert!(goodput > 1.0, "{goodput}");
    metrics_moved(&sys, &before, &rates, &v);
    demo_keep(&sys);
    eprintln!("MEASURE whole test {:.1} s", t0.elapsed().as_secs_f64());
}

/// `cargo xtask demo --keep`'s own part (`demo_paper::Kept`), on this system: the read-only
/// token it prints reads `/metrics` and the stats but cannot create tokens; its 4 x 5 Mbit/s of
/// iperf3 reach the member paths 1 -> 2 (ssc's rates settle at about that); stopping it ends the
/// client.
fn demo_keep(sys: &System) {
    let t = Instant::now();
    let kept = xtask::demo_paper::Kept::start(sys).unwrap();
    let text = scrape::ssc_text(&sys.api_base, &kept.token, true);
    controller::metrics::check(&text).unwrap();
    let refused = ureq::post(&format!("{}/api/v1/tokens", sys.api_base))
        .set("authorization", &format!("Bearer {}", kept.token))
        .send_json(json!({"name": "x", "role": "admin", "ttl_s": 60}));
    assert!(
        matches!(refused, Err(ureq::Error::Status(403, _))),
        "read-only token created a token: {refused:?}"
    );
    let fwd = [("branch", "1"), ("remote", "2"), ("direction", "forward")];
    // 4 x 5 Mbit/s of iperf3 payload are ~22 Mbit/s on the wire; ssc's rate (OVS flow stats
    // every 500 ms) must settle there: four samples in a row within 0.6-1.6 x 20 Mbit/s. (The
    // first samples can still show the 45 s transfer that ended just before.)
    let offered = 20.0;
    let settled = |v: &[f64]| {
        v.len() >= 4
            && v[v.len() - 4..]
                .iter()
                .all(|m| (0.6 * offered..=1.6 * offered).contains(m))
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen: Vec<f64> = Vec::new();
    while !settled(&seen) && Instant::now() < deadline {
        let s = controller::metrics::check(&scrape::ssc_text(&sys.api_base, &kept.token, true))
            .unwrap()
            .1;
        seen.push(sum(&s, "mms_member_path_rate_bytes_per_second", &fwd) * 8.0 / 1e6);
        std::thread::sleep(Duration::from_millis(500));
    }
    let pid = kept.client_pid();
    kept.stop();
    eprintln!(
        "MEASURE demo --keep on this system: member paths 1->2 {:.1?} Mbit/s (every 0.5 s) for \
         the 4 x 5 Mbit/s; checked in {:.1} s",
        seen,
        t.elapsed().as_secs_f64()
    );
    assert!(
        settled(&seen),
        "the kept traffic's member-path rate did not settle within 0.6-1.6 x {offered} Mbit/s: \
         {seen:.1?}"
    );
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "iperf3 client {pid} still running"
    );
}

/// Issue #19's Must-show on the paper system: `/metrics` of ssc and of every mmsg, scraped
/// before, during (ssc, once a second) and after the 45 s iperf3 transfer, passes the strict
/// reader and `promtool check metrics`; the counters moved; the member paths' rates from ssc's
/// OVS statistics sum to 1.00-1.25 times the iperf3 goodput (wire bytes: headers make it
/// 1.10-1.15); their payload (gw1's subflows, [`member_payload`]) to within 10 % of it; gw1's
/// queue sojourn histogram grew.
fn metrics_moved(sys: &System, before: &Snapshot, rates: &[scrape::RateSample], iperf: &Value) {
    let t = Instant::now();
    let sent = iperf["end"]["sum_sent"]["bytes"].as_f64().unwrap();
    let fwd = [("branch", "1"), ("remote", "2"), ("direction", "forward")];
    let conn_tx = |s: &[controller::metrics::Sample]| {
        sum(
            s,
            "mms_connection_sent_bytes_total",
            &[("remote", "2"), ("direction", "out")],
        )
    };
    // The per-connection values lag up to 1 s (each connection's supervisor samples them).
    let deadline = Instant::now() + Duration::from_secs(5);
    let after = loop {
        let after = Snapshot::take(sys, &sys.token);
        if conn_tx(after.gw(1)) - conn_tx(before.gw(1)) >= 0.9 * sent || Instant::now() > deadline {
            break after;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    let grew = |s: &Snapshot, b: Option<u8>, name: &str, labels: &[(&str, &str)]| {
        let pick = |x: &Snapshot| sum(b.map_or(&x.ssc, |b| x.gw(b)), name, labels);
        pick(&after) - pick(s)
    };
    // mmsg: gw1 took the transfer from its TUN and sent it on its connections to branch 2; gw2
    // wrote it to its TUN. Both by at least 90 % of what iperf3 sent.
    let gw1_tun = grew(before, Some(1), "mms_tun_rx_bytes_total", &[]);
    let gw1_conn = conn_tx(after.gw(1)) - conn_tx(before.gw(1));
    let gw2_tun = grew(before, Some(2), "mms_tun_tx_bytes_total", &[]);
    let ssc_members = grew(before, None, "mms_member_path_bytes_total", &fwd);
    eprintln!(
        "MEASURE metrics: iperf3 sent {sent:.0} B; gw1 tun_rx +{gw1_tun:.0}, connection_sent          +{gw1_conn:.0}; gw2 tun_tx +{gw2_tun:.0}; ssc member paths 1->2 +{ssc_members:.0} B"
    );
    for (what, v) in [
        ("gw1 tun_rx", gw1_tun),
        ("gw1 connection_sent", gw1_conn),
        ("gw2 tun_tx", gw2_tun),
        ("ssc member paths 1->2", ssc_members),
    ] {
        assert!(v >= 0.9 * sent, "{what} grew {v} for {sent} B sent");
    }
    // The transit switches 3..5 forwarded member-path packets (their OVS port counters in ssc).
    for b in ["3", "4", "5"] {
        let v = grew(
            before,
            None,
            "mms_switch_port_received_bytes_total",
            &[("branch", b)],
        );
        assert!(v > 1e6, "switch of branch {b} received only {v} B");
    }
    // Every mmsg answered both formats (checked in `Snapshot::take`); the transit gateways have
    // no tunnels of their own but export their build info.
    for b in BRANCHES {
        assert_eq!(
            sum(after.gw(b), "mms_build_info", &[("branch", &b.to_string())]),
            1.0,
            "gw{b}"
        );
    }

    // Queue sojourn (mpa's queues, per class): gw1's packets were measured as they left.
    let soj = |s: &Snapshot, what: &str| {
        sum(
            s.gw(1),
            &format!("mms_gateway_queue_sojourn_seconds_{what}"),
            &[],
        )
    };
    let (n, secs) = (
        soj(&after, "count") - soj(before, "count"),
        soj(&after, "sum") - soj(before, "sum"),
    );
    let inf = sum(
        after.gw(1),
        "mms_gateway_queue_sojourn_seconds_bucket",
        &[("le", "+Inf")],
    );
    let under_100ms = sum(
        after.gw(1),
        "mms_gateway_queue_sojourn_seconds_bucket",
        &[("le", "0.1")],
    );
    eprintln!(
        "MEASURE gw1 queue sojourn during the transfer: {n:.0} packets, mean {:.3} ms;          {:.1} % of all within 100 ms",
        secs / n.max(1.0) * 1e3,
        100.0 * under_100ms / inf.max(1.0)
    );
    assert!(n > 1_000.0, "gw1 measured the sojourn of {n} packets");
    assert_eq!(inf, soj(&after, "count"), "+Inf bucket is the count");
    assert!(secs >= 0.0 && secs / n < 1.0, "mean sojourn {secs} s / {n}");

    // Rates: ssc's member-path rates (OVS flow stats, every 500 ms) sampled once a second
    // between 5 s and 40 s of the 45 s transfer, against iperf3's goodput.
    let steady: Vec<_> = rates
        .iter()
        .filter(|r| r.at >= 5.0 && r.at <= 40.0)
        .collect();
    assert!(
        steady.len() >= 20,
        "{} scrapes of ssc in the window",
        steady.len()
    );
    assert!(steady.iter().all(|r| r.members == 16), "{steady:?}");
    let mean = steady.iter().map(|r| r.rate_bytes_per_s).sum::<f64>() / steady.len() as f64;
    let sdc_mbps = mean * 8.0 / 1e6;
    let (first, last) = (steady[0], steady[steady.len() - 1]);
    let by_bytes = (last.bytes - first.bytes) * 8.0 / 1e6 / (last.at - first.at);
    let goodput = iperf::tcp_received_mbps(iperf).unwrap();
    // The member paths count wire bytes: the goodput plus the inner headers, frame headers and
    // TLS (gw1's connection bytes per byte iperf3 sent: 1.01 with TUN offload) plus the outer
    // Ethernet/IP/TCP/MPTCP headers of every segment: 1.10-1.15 times the goodput by
    // construction (measured 1.098 and 1.146), so "within 10 %" of the bare goodput cannot hold.
    // The check is on what the accounting can get wrong: never below the goodput (a member path
    // missed), at most a quarter above it (a packet counted twice, e.g. at a transit, doubles).
    let carried = goodput * gw1_conn / sent;
    let ratio = sdc_mbps / goodput;
    eprintln!(
        "MEASURE ssc member paths 1->2: mean of {} rate samples {sdc_mbps:.1} Mbit/s, by byte          counters {by_bytes:.1} Mbit/s; iperf3 goodput {goodput:.1} Mbit/s (ratio {ratio:.3});          carried by gw1's connections {carried:.1} Mbit/s (ratio {:.3}); metrics checks {:.1} s",
        steady.len(),
        sdc_mbps / carried,
        t.elapsed().as_secs_f64()
    );
    assert!(
        (1.0..=1.25).contains(&ratio),
        "member-path rates sum to {sdc_mbps:.1} Mbit/s against iperf3's goodput {goodput:.1} \
         Mbit/s (gw1's connections carried {carried:.1}): ratio {ratio:.3} outside 1.00-1.25"
    );
    member_payload(before, &after, iperf);
}

/// The member paths' payload rates: gw1 has one subflow per member path (path group, its WAN
/// port, the peer's WAN address; docs/DESIGN 3.1: the source switch picks the member path by
/// exactly those), and `mms_subflow_acked_bytes_total` counts the payload the far end
/// acknowledged on it (`tcpi_bytes_acked`: the tunnel's stream, no outer headers, no
/// retransmissions). Over the transfer, all 16 of Table II carried data and their rates sum to
/// within 10 % of iperf3's goodput (the stream adds frame headers, TLS records and the inner
/// headers: ~1 % with TUN offload).
fn member_payload(before: &Snapshot, after: &Snapshot, iperf: &Value) {
    let name = "mms_subflow_acked_bytes_total";
    let series = |s: &Snapshot| -> std::collections::BTreeMap<(String, String, String), f64> {
        let mut m = std::collections::BTreeMap::new();
        for (n, l, v) in s.gw(1) {
            let to_2 = l.get("remote").map(String::as_str) == Some("2")
                && l.get("direction").map(String::as_str) == Some("out");
            if n == name && to_2 {
                let key = |k: &str| l.get(k).cloned().unwrap_or_default();
                *m.entry((key("path_group"), key("wan_port"), key("peer")))
                    .or_default() += v;
            }
        }
        m
    };
    let (b, a) = (series(before), series(after));
    let secs = iperf["end"]["sum_received"]["seconds"].as_f64().unwrap();
    let received = iperf["end"]["sum_received"]["bytes"].as_f64().unwrap();
    let goodput = received * 8.0 / 1e6 / secs;
    let rates: Vec<_> = a
        .iter()
        .map(|(k, v)| (k, (v - b.get(k).copied().unwrap_or(0.0)) * 8.0 / 1e6 / secs))
        .collect();
    let total: f64 = rates.iter().map(|(_, r)| r).sum();
    let ratio = total / goodput;
    eprintln!(
        "MEASURE member paths 1->2 by payload (gw1's subflows, acknowledged bytes over {secs:.1} \
         s): {} paths, sum {total:.1} Mbit/s against iperf3's goodput {goodput:.1} Mbit/s (ratio \
         {ratio:.3}); per path (group, WAN port, peer): {}",
        rates.len(),
        rates
            .iter()
            .map(|((g, w, p), r)| format!("{g}/{w}/{p} {r:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert_eq!(rates.len(), 16, "gw1's member paths to branch 2: {rates:?}");
    assert!(
        rates.iter().all(|(_, r)| *r > 0.0),
        "a member path carried nothing: {rates:?}"
    );
    assert!(
        (0.9..=1.1).contains(&ratio),
        "member-path payload rates sum to {total:.1} Mbit/s against iperf3's goodput \
         {goodput:.1} Mbit/s: ratio {ratio:.3} outside 0.90-1.10"
    );
}
