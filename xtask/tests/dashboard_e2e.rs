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

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use xtask::e2e::System;
use xtask::iperf::{self, Server};

#[test]
fn dashboard_on_the_paper_system_with_traffic() {
    common::require_tools(&["ip", "iperf3", "ovs-vswitchd", "ovs-vsctl", "chromium"]);
    let t0 = Instant::now();
    let prefix = format!("dsb{}", std::process::id() % 1_000_000);
    let opts = common::e2e_options(&prefix);
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
    // The certificates ssc's CA issued (the harness provisions the tunnels' own CA, so the
    // gateways' tunnel certificates are not among them; enrolled gateways' would be).
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
            None => assert_eq!(row[5], "not from ssc CA", "{row:?}"),
        }
    }
    let v = iperf.join().unwrap();
    server.wait(Duration::from_secs(2));
    let goodput = iperf::tcp_received_mbps(&v).unwrap();
    eprintln!("MEASURE iperf3 h1 -> h2, 4 flows: {goodput:.1} Mbit/s");
    assert!(goodput > 1.0, "{goodput}");
}
