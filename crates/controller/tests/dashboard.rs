//! The web dashboard (issue #19): `/ui/` and `GET /api/v1/history`.
//!
//! - in process (tower `oneshot`): the static files and their headers, the history endpoint's
//!   auth and body, the route in the OpenAPI document;
//! - end to end: a real `ssc run` with the paper's inventory and Table II, five fake switches on
//!   its OpenFlow unix socket whose source entries count traffic (so the SDC measures non-zero
//!   rates on all 16 member paths), and a real headless Chromium (Debian's `chromium`, driven over
//!   the DevTools protocol) at 1366x768: without a token the page shows the login and no data
//!   (and the API refuses it); after typing a read-only token into the form the page draws all
//!   16 member paths with their codes, notation and non-zero rates, updates itself, fits the
//!   screen, and never puts the token into its URL. A screenshot is written to
//!   `$MMS_SCREENSHOT_DIR/dashboard.png` (default: the test's temporary directory).
//!
//! Needs `chromium` (`cargo xtask deps` / `.ci/run` install it); FAILS without it, never skips.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
mod browser;
mod fake_switch;

use browser::{chromium, wait_for, Proc, MEMBER_ROWS};

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use controller::history::History;
use controller::sdc::Sdc;
use controller::store::Store;
use controller::ui::api::{router, AppState};
use serde_json::{json, Value};
use tower::ServiceExt;

const TOKEN: &str = "dashboard-test-admin-token-0123456789";

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

async fn get(
    app: &axum::Router,
    path: &str,
    token: Option<&str>,
) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let mut req = Request::get(path);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let resp = app
        .clone()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let (parts, body) = resp.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 24).await.unwrap();
    (parts.status, parts.headers, bytes.to_vec())
}

#[tokio::test]
async fn static_files_and_history_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("db.redb")).unwrap());
    // A history with one sample of a view with one member path.
    let mut h = History::new(Duration::from_secs(1), Duration::from_secs(60));
    let view = Sdc::default().view(Instant::now());
    let mut view: Value = serde_json::to_value(view).unwrap();
    view["pairs"] = json!([{"source": 1, "destination": 2, "forward_packets": 1, "forward_bytes": 1,
        "forward_bits_per_s": 3.0e6, "reverse_packets": 0, "reverse_bytes": 0, "reverse_bits_per_s": 1.0e5}]);
    view["members"] = json!([{"code": "0x2111", "source": 1, "destination": 2, "group": 1, "member": 1,
        "forward_packets": 1, "forward_bytes": 1, "forward_bits_per_s": 3.0e6, "reverse_packets": 0,
        "reverse_bytes": 0, "reverse_bits_per_s": 1.0e5}]);
    h.record(1_000, &serde_json::from_value(view).unwrap());
    h.record(
        2_000,
        &serde_json::from_value(serde_json::to_value(Sdc::default().view(Instant::now())).unwrap())
            .unwrap(),
    );
    let state = AppState::new(store, TOKEN).with_history(Arc::new(Mutex::new(h)));
    let app = router(state, 1 << 20);

    // The page, its script and style: no token needed, strict headers.
    let (status, headers, body) = get(&app, "/ui/", None).await;
    assert_eq!(status, StatusCode::OK);
    let html = String::from_utf8(body).unwrap();
    assert!(html.contains("id=\"login-form\"") && html.contains("src=\"app.js\""));
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "no external resource"
    );
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(headers["referrer-policy"], "no-referrer");
    let (status, headers, js) = get(&app, "/ui/app.js", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "text/javascript; charset=utf-8");
    let js = String::from_utf8(js).unwrap();
    assert!(js.contains("sessionStorage") && js.contains("Authorization"));
    assert!(!js.contains("localStorage") && !js.contains("document.cookie"));
    let (status, headers, _) = get(&app, "/ui/app.css", None).await;
    assert_eq!(
        (status, headers["content-type"].to_str().unwrap()),
        (StatusCode::OK, "text/css; charset=utf-8")
    );
    let (status, headers, _) = get(&app, "/ui", None).await;
    assert_eq!(status, StatusCode::PERMANENT_REDIRECT);
    assert_eq!(headers["location"], "/ui/");
    let (status, _, _) = get(&app, "/ui/nothing.js", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // The data needs a token.
    let (status, _, _) = get(&app, "/api/v1/history", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, _) = get(&app, "/api/v1/history", Some("wrong-token-0123456789")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, body) = get(&app, "/api/v1/history", Some(TOKEN)).await;
    assert_eq!(status, StatusCode::OK);
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["available"], true);
    assert_eq!(
        (v["period_ms"].as_u64(), v["capacity"].as_u64()),
        (Some(1_000), Some(60))
    );
    assert_eq!(v["last_ms"], 2_000);
    let series = v["series"].as_array().unwrap();
    assert_eq!(series.len(), 2, "{v}");
    assert_eq!(series[0]["kind"], "pair");
    assert_eq!(series[0]["points"], json!([[1_000, 3_000_000, 100_000]]));
    assert_eq!(series[1]["kind"], "member");
    assert_eq!(series[1]["code"], "0x2111");

    // Without a recorder (no OpenFlow server): an empty answer.
    let store2 = Arc::new(Store::open(&dir.path().join("db2.redb")).unwrap());
    let app2 = router(AppState::new(store2, TOKEN), 1 << 20);
    let (status, _, body) = get(&app2, "/api/v1/history", Some(TOKEN)).await;
    assert_eq!(status, StatusCode::OK);
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (
            v["available"].as_bool(),
            v["series"].as_array().map(Vec::len)
        ),
        (Some(false), Some(0))
    );

    // In the OpenAPI document, with its schema.
    let (_, _, body) = get(&app, "/openapi.json", None).await;
    let doc: Value = serde_json::from_slice(&body).unwrap();
    let op = &doc["paths"]["/api/v1/history"]["get"];
    assert_eq!(
        op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/History"
    );
    assert!(doc["components"]["schemas"]["History"]["properties"]["series"].is_object());
    assert!(doc["components"]["schemas"]["HistorySeries"].is_object());
}

// ---------------------------------------------------------------------------------------------
// End to end: real ssc, real Chromium
// ---------------------------------------------------------------------------------------------

fn ssc() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ssc"));
    for v in ["SSC_API", "SSC_TOKEN", "SSC_CONFIG", "SSC_LISTEN"] {
        c.env_remove(v);
    }
    c.env("RUST_LOG", "warn");
    c
}

fn client(api: &str, args: &[&str]) -> Output {
    let out = ssc()
        .args(args)
        .env("SSC_API", api)
        .env("SSC_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ssc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn dashboard_in_headless_chromium() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ssc.token"), format!("{TOKEN}\n")).unwrap();
    let config = dir.path().join("ssc.toml");
    std::fs::write(&config, "[api]\nlisten = \"127.0.0.1:0\"\ntoken_file = \"ssc.token\"\n\n[database]\npath = \"inventory.redb\"\n").unwrap();
    let sock = dir.path().join("of.sock");
    let mut child = ssc()
        .args(["run", "--config"])
        .arg(&config)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--stats-interval",
            "300ms",
            "--openflow-unix",
        ])
        .arg(&sock)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let _ssc = Proc(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let api = line
        .trim()
        .strip_prefix("ssc: REST API listening on ")
        .unwrap()
        .to_owned();

    let (inv, paths) = (
        examples().join("inventory-paper.toml"),
        examples().join("paths-paper-table2.toml"),
    );
    client(
        &api,
        &[
            "import",
            "--inventory",
            inv.to_str().unwrap(),
            "--paths",
            paths.to_str().unwrap(),
        ],
    );
    let out = client(
        &api,
        &[
            "token",
            "add",
            "--name",
            "dashboard",
            "--role",
            "read-only",
            "--ttl",
            "1h",
        ],
    );
    let read_only = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_owned();
    assert_eq!(read_only.len(), 64);

    // Five fake switches count traffic on every member path's source entries.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let _switches: Vec<_> = (1..=5u64)
        .map(|b| {
            rt.block_on(async {
                wait_for("the OpenFlow socket", Duration::from_secs(10), || {
                    sock.exists().then_some(())
                });
                let (table, task) = fake_switch::connect(&sock, b).await;
                (task, fake_switch::count_member_traffic(table))
            })
        })
        .collect();
    let want: BTreeSet<(String, String)> = {
        let groups: Value = ureq::get(&format!("{api}/api/v1/path-groups"))
            .set("authorization", &format!("Bearer {read_only}"))
            .call()
            .unwrap()
            .into_json()
            .unwrap();
        groups
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["members"].as_array().unwrap().iter())
            .map(|m| {
                (
                    m["code"].as_str().unwrap().to_owned(),
                    m["path"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    assert_eq!(want.len(), 16, "Table II has 16 member paths");
    // The SDC measures all 16 (the API answers what the page will draw).
    wait_for(
        "16 member paths with traffic in /api/v1/stats",
        Duration::from_secs(60),
        || {
            let v: Value = ureq::get(&format!("{api}/api/v1/stats"))
                .set("authorization", &format!("Bearer {read_only}"))
                .call()
                .ok()?
                .into_json()
                .ok()?;
            let live = v["members"]
                .as_array()?
                .iter()
                .filter(|m| m["forward_bits_per_s"].as_f64() > Some(0.0))
                .count();
            (live == 16).then_some(())
        },
    );

    let profile = dir.path().join("chromium");
    let (_browser, mut cdp) = chromium(&profile);
    cdp.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 1366, "height": 768, "deviceScaleFactor": 1, "mobile": false}),
    );
    cdp.call("Page.navigate", json!({"url": format!("{api}/ui/")}));

    // Without a token: the login form, no data, and the API refuses the page's own request.
    cdp.wait_eval(
        "the login",
        "document.body && document.body.dataset.state === 'login'",
        Duration::from_secs(30),
    );
    let shown = cdp.eval("JSON.stringify({login: !document.getElementById('login').hidden, dash: !document.getElementById('dash').hidden, rows: document.querySelectorAll('#members-table tbody tr').length, text: document.body.innerText})");
    let shown: Value = serde_json::from_str(shown.as_str().unwrap()).unwrap();
    assert_eq!(
        (
            shown["login"].as_bool(),
            shown["dash"].as_bool(),
            shown["rows"].as_u64()
        ),
        (Some(true), Some(false), Some(0)),
        "{shown}"
    );
    assert!(
        !shown["text"].as_str().unwrap().contains("0x2111"),
        "no data before login"
    );
    let refused = cdp.eval("fetch('/api/v1/stats').then(r => r.status)");
    assert_eq!(refused, 401);

    // A wrong token: back to the login, with the API's reason.
    cdp.eval("document.getElementById('token').focus()");
    cdp.call(
        "Input.insertText",
        json!({"text": "not-a-valid-token-0123456789"}),
    );
    cdp.eval("document.getElementById('login-form').requestSubmit()");
    cdp.wait_eval(
        "the refusal",
        "document.getElementById('login-error').textContent.includes('wrong bearer token')",
        Duration::from_secs(30),
    );

    // The read-only token, typed into the form.
    cdp.eval("document.getElementById('token').focus()");
    cdp.call("Input.insertText", json!({"text": read_only}));
    cdp.eval("document.getElementById('login-form').requestSubmit()");
    // Two updates: the page refreshes itself.
    cdp.wait_eval(
        "two live updates",
        "Number(document.body.dataset.updates || 0) >= 2",
        Duration::from_secs(60),
    );
    let rows: Value = serde_json::from_str(cdp.eval(MEMBER_ROWS).as_str().unwrap()).unwrap();
    let rows = rows.as_array().unwrap();
    let drawn: BTreeSet<(String, String)> = rows
        .iter()
        .map(|r| {
            (
                r["code"].as_str().unwrap().to_owned(),
                r["cells"][2].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        drawn, want,
        "all 16 member paths of Table II, code and notation"
    );
    for r in rows {
        let mbit: f64 = r["cells"][3].as_str().unwrap().parse().unwrap();
        assert!(
            r["bps"].as_f64() > Some(1e6) && mbit > 1.0,
            "non-zero rate: {r}"
        );
    }
    let counts: Value = serde_json::from_str(cdp.eval("JSON.stringify({members: document.querySelectorAll('#topology path.member').length, branches: document.querySelectorAll('#topology g[data-branch]').length, groups: document.querySelectorAll('#groups-table tbody tr').length, gateways: document.querySelectorAll('#gateways-table tbody tr').length, series: document.querySelectorAll('#chart polyline').length, href: location.href, scroll: [document.documentElement.scrollWidth, document.documentElement.scrollHeight, innerWidth, innerHeight]})").as_str().unwrap()).unwrap();
    assert_eq!(counts["members"], 16, "{counts}");
    assert_eq!(counts["branches"], 5, "{counts}");
    assert_eq!(counts["groups"], 4, "{counts}");
    assert_eq!(counts["gateways"], 5, "{counts}");
    assert!(
        counts["series"].as_u64() >= Some(1),
        "the time series is drawn: {counts}"
    );
    assert!(
        !counts["href"].as_str().unwrap().contains(&read_only),
        "the token is not in the URL"
    );
    let s = &counts["scroll"];
    assert!(
        s[0].as_u64() <= s[2].as_u64() && s[1].as_u64() <= s[3].as_u64(),
        "fits 1366x768 without scrolling: {counts}"
    );

    let shot = cdp.call("Page.captureScreenshot", json!({"format": "png"}));
    let png = browser::base64_decode(shot["data"].as_str().unwrap());
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let out_dir =
        std::env::var_os("MMS_SCREENSHOT_DIR").map_or_else(|| dir.path().to_owned(), PathBuf::from);
    std::fs::write(out_dir.join("dashboard.png"), &png).unwrap();

    // Logging out forgets the token.
    cdp.eval("document.getElementById('logout').click()");
    let stored = cdp.eval("sessionStorage.length");
    assert_eq!(stored, 0);
}
