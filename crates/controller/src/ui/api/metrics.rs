//! `GET /metrics`: the Prometheus exposition of [`crate::metrics`] from what the other read
//! routes serve (SDC statistics, WRR weights, gateways, certificates), behind the same bearer
//! token (read-only is enough).
use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};

use super::common::{blocking, AppState};
use super::telemetry::current_weights;

pub(super) async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let stats = state.sdc.as_ref().map(|sdc| {
        sdc.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .view(std::time::Instant::now())
    });
    let weights = current_weights(&state).await.unwrap_or_default();
    let gateways = state.gateways.as_ref().map(|r| r.list());
    let certificates = blocking(&state, |s| s.certs()).await.unwrap_or_default();
    let text = crate::metrics::render(&crate::metrics::Inputs {
        stats: stats.as_ref(),
        weights: &weights,
        gateways: gateways.as_ref(),
        certificates: &certificates,
    });
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    if crate::metrics::wants_openmetrics(accept) {
        ([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response()
    } else {
        let text = crate::metrics::to_prometheus_text(&text);
        (
            [(header::CONTENT_TYPE, crate::metrics::TEXT_CONTENT_TYPE)],
            text,
        )
            .into_response()
    }
}
