//! SDC and PM (seed 000 §IV; seed 001 §III-C; seed 003): statistics, the WRR weights of every
//! ordered pair, the adaptive path groups' state, and the gateways on the gateway channel.
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::common::{parse_branch, snapshot, ApiError, AppState};
use crate::wrr::PairWeights;

pub(super) async fn stats(State(state): State<AppState>) -> Json<Value> {
    match &state.sdc {
        Some(sdc) => {
            let view = sdc
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .view(std::time::Instant::now());
            Json(serde_json::to_value(view).unwrap_or_else(|e| json!({"error": e.to_string()})))
        }
        None => Json(json!({
            "available": false,
            "note": "the OpenFlow server (OFC) does not run in this process, so the SDC collects nothing",
            "branches": [],
            "pairs": [],
            "groups": [],
            "members": [],
        })),
    }
}

/// `GET /api/v1/adaptive`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AdaptiveList {
    /// Whether the settings switch it on.
    pub enabled: bool,
    /// Every pair it has looked at, by (source, destination).
    pub pairs: Vec<crate::adaptive::PairView>,
}

pub(super) async fn adaptive(
    State(state): State<AppState>,
) -> Result<Json<AdaptiveList>, ApiError> {
    let c = snapshot(&state);
    let pairs = state.adaptive.as_ref().map_or_else(Vec::new, |a| {
        a.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .views()
    });
    Ok(Json(AdaptiveList {
        enabled: c.settings().adaptive.enabled,
        pairs,
    }))
}

/// `GET /api/v1/weights`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct WeightList {
    /// Sum of the weights of each pair.
    pub scale: u32,
    /// Whether measured rates can feed the weights (the SDC runs in this process).
    pub measured: bool,
    /// Every ordered pair with path groups, by (source, destination).
    pub pairs: Vec<PairWeights>,
}

/// Brings the WRR state up to the current catalog and returns what it publishes.
pub(super) async fn current_weights(state: &AppState) -> Result<Vec<PairWeights>, ApiError> {
    let c = snapshot(state);
    let wrr = Arc::clone(&state.wrr);
    // One max-flow per group (3,360 with 15 branches): off the async threads.
    tokio::task::spawn_blocking(move || {
        let mut wrr = wrr
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        wrr.update(c.inventory(), c.groups());
        wrr.weights().cloned().collect()
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

pub(super) async fn weights(State(state): State<AppState>) -> Result<Json<WeightList>, ApiError> {
    let pairs = current_weights(&state).await?;
    let scale = state
        .wrr
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .settings()
        .scale;
    Ok(Json(WeightList {
        scale,
        measured: state.sdc.is_some(),
        pairs,
    }))
}

pub(super) async fn pair_weights(
    State(state): State<AppState>,
    Path((source, destination)): Path<(String, String)>,
) -> Result<Json<PairWeights>, ApiError> {
    let a = parse_branch("source", &source)?;
    let b = parse_branch("destination", &destination)?;
    let pairs = current_weights(&state).await?;
    pairs
        .into_iter()
        .find(|p| p.source == a.get() && p.destination == b.get())
        .map(Json)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                format!("no path groups from branch {a} to branch {b}"),
            )
        })
}

pub(super) async fn gateways(State(state): State<AppState>) -> Json<crate::gwchan::GatewayList> {
    Json(
        state
            .gateways
            .as_ref()
            .map(|r| r.list())
            .unwrap_or_default(),
    )
}
