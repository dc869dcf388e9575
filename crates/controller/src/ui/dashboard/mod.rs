//! UI (seed 000 §IV; issue #19): the web dashboard `ssc` serves at `/ui/` on its REST
//! listener, and the driver that feeds the in-memory history it draws ([`record_history`]).
//!
//! The page is three static files compiled into the binary ([`ASSETS`]: plain HTML, one small
//! vanilla JavaScript file that draws SVG, one stylesheet; no framework, no CDN, works offline).
//! The files hold no data and need no token; the data comes from the REST API, which the page
//! calls with `fetch()` and `Authorization: Bearer <token>`. The operator types the token (a
//! read-only one is enough: every call is a GET) into the page's login form; it is kept in the
//! tab's `sessionStorage`, never in a URL, a cookie or a log (the form has no `action` that
//! could carry it). Because no cookie authenticates anything, another site cannot make the
//! browser call the API (no CSRF), and the strict Content-Security-Policy (scripts, styles and
//! connections only from this origin, no inline script) limits what injected text could do.
//! `docs/ssc.md` "Web dashboard" explains the panels and the choice.
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;

use crate::adaptive::Adaptive;
use crate::history::History;
use crate::sdc::Sdc;

/// Where the dashboard lives.
pub const PREFIX: &str = "/ui/";

/// The static files: (path, content type, bytes).
pub const ASSETS: &[(&str, &str, &str)] = &[
    (
        "/ui/",
        "text/html; charset=utf-8",
        include_str!("assets/index.html"),
    ),
    (
        "/ui/app.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/app.js"),
    ),
    (
        "/ui/app.css",
        "text/css; charset=utf-8",
        include_str!("assets/app.css"),
    ),
];

/// The Content-Security-Policy of every dashboard file: nothing from elsewhere, no inline
/// script or style, no framing.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut resp = (StatusCode::OK, body).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// The dashboard's routes (no token: the files hold no data), merged into the API's router.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let mut r = Router::new().route("/ui", get(|| async { Redirect::permanent(PREFIX) }));
    for &(path, content_type, body) in ASSETS {
        r = r.route(path, get(move || async move { asset(content_type, body) }));
    }
    r
}

/// Unix milliseconds now (the history's time axis).
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Every [`History::period`]: the SDC's view and the adaptive loop's pairs → `history` (a thin
/// loop over [`History::record`] and [`History::observe_adaptive`]). Runs until aborted.
pub async fn record_history(
    sdc: Arc<Mutex<Sdc>>,
    adaptive: Arc<Mutex<Adaptive>>,
    history: Arc<Mutex<History>>,
) {
    let period = history
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .period()
        .max(Duration::from_millis(10));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let view = sdc
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .view(Instant::now());
        let pairs = adaptive
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .views();
        let now = unix_ms();
        let mut h = history.lock().unwrap_or_else(PoisonError::into_inner);
        h.record(now, &view);
        h.observe_adaptive(now, &pairs);
    }
}
