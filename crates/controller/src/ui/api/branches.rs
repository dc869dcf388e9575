//! UI (seed 000 §IV): branches, their WAN ports, and the compiled flow table of each gateway
//! (the OFC's input, read-only).
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Serialize;

use super::common::{blocking, parse_branch, parse_port, snapshot, ApiError, ApiJson, AppState};
use crate::catalog::{BranchPatch, Catalog, CatalogError, NewPort, PortPatch};
use crate::inventory::{Branch, BranchId, PortRef, WanPort};
use crate::swap::FlowEntry;

/// One flow in a response: the IR plus its `ovs-ofctl` form.
#[derive(Debug, Serialize)]
pub struct FlowView {
    /// The flow.
    #[serde(flatten)]
    pub flow: FlowEntry,
    /// `ovs-ofctl -O OpenFlow13 add-flow` syntax.
    pub ofctl: String,
}

/// `GET /api/v1/branches/{branch}/flows`.
#[derive(Debug, Serialize)]
pub struct FlowsView {
    /// The gateway.
    pub branch: u8,
    /// Number of flows.
    pub count: usize,
    /// The flows by priority (highest first), then cookie.
    pub flows: Vec<FlowView>,
}

pub(super) async fn list_branches(
    State(state): State<AppState>,
) -> Result<Json<Vec<Branch>>, ApiError> {
    let c = snapshot(&state);
    Ok(Json(c.inventory().branches().cloned().collect()))
}

fn branch_of(c: &Catalog, id: BranchId) -> Result<Branch, ApiError> {
    c.inventory()
        .branch(id)
        .cloned()
        .ok_or_else(|| CatalogError::NoBranch(id).into())
}

pub(super) async fn add_branch(
    State(state): State<AppState>,
    ApiJson(branch): ApiJson<Branch>,
) -> Result<(StatusCode, Json<Branch>), ApiError> {
    let id = branch.id;
    let c = blocking(&state, move |s| s.update(|c| c.add_branch(branch))).await?;
    tracing::info!(branch = id.get(), "branch added");
    Ok((StatusCode::CREATED, Json(branch_of(&c, id)?)))
}

pub(super) async fn get_branch(
    State(state): State<AppState>,
    Path(branch): Path<String>,
) -> Result<Json<Branch>, ApiError> {
    let id = parse_branch("branch", &branch)?;
    let c = snapshot(&state);
    Ok(Json(branch_of(&c, id)?))
}

pub(super) async fn modify_branch(
    State(state): State<AppState>,
    Path(branch): Path<String>,
    ApiJson(patch): ApiJson<BranchPatch>,
) -> Result<Json<Branch>, ApiError> {
    let id = parse_branch("branch", &branch)?;
    let c = blocking(&state, move |s| s.update(|c| c.modify_branch(id, patch))).await?;
    tracing::info!(branch = id.get(), "branch modified");
    Ok(Json(branch_of(&c, id)?))
}

pub(super) async fn remove_branch(
    State(state): State<AppState>,
    Path(branch): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = parse_branch("branch", &branch)?;
    blocking(&state, move |s| s.update(|c| c.remove_branch(id))).await?;
    tracing::info!(branch = id.get(), "branch removed");
    Ok(StatusCode::NO_CONTENT)
}

fn port_of(c: &Catalog, port: PortRef) -> Result<WanPort, ApiError> {
    c.inventory()
        .port(port)
        .cloned()
        .ok_or_else(|| CatalogError::NoPort(port).into())
}

pub(super) async fn add_port(
    State(state): State<AppState>,
    Path(branch): Path<String>,
    ApiJson(port): ApiJson<NewPort>,
) -> Result<(StatusCode, Json<WanPort>), ApiError> {
    let id = parse_branch("branch", &branch)?;
    let c = blocking(&state, move |s| s.update(|c| c.add_port(id, port))).await?;
    let added = c
        .inventory()
        .branch(id)
        .and_then(|b| b.wan.last())
        .cloned()
        .ok_or(CatalogError::NoBranch(id))?;
    tracing::info!(branch = id.get(), port = %added.port, "WAN port added");
    Ok((StatusCode::CREATED, Json(added)))
}

pub(super) async fn modify_port(
    State(state): State<AppState>,
    Path((branch, port)): Path<(String, String)>,
    ApiJson(patch): ApiJson<PortPatch>,
) -> Result<Json<WanPort>, ApiError> {
    let port = parse_port(parse_branch("branch", &branch)?, &port)?;
    let c = blocking(&state, move |s| s.update(|c| c.modify_port(port, patch))).await?;
    tracing::info!(port = %port, "WAN port modified");
    Ok(Json(port_of(&c, port)?))
}

pub(super) async fn remove_port(
    State(state): State<AppState>,
    Path((branch, port)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let port = parse_port(parse_branch("branch", &branch)?, &port)?;
    blocking(&state, move |s| s.update(|c| c.remove_port(port))).await?;
    tracing::info!(port = %port, "WAN port removed");
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn flows(
    State(state): State<AppState>,
    Path(branch): Path<String>,
) -> Result<Json<FlowsView>, ApiError> {
    let id = parse_branch("branch", &branch)?;
    let c = snapshot(&state);
    if c.inventory().branch(id).is_none() {
        return Err(CatalogError::NoBranch(id).into());
    }
    let flows: Vec<FlowView> = c
        .flows()
        .switch(id)
        .iter()
        .map(|f| FlowView {
            ofctl: f.to_ofctl(),
            flow: f.clone(),
        })
        .collect();
    Ok(Json(FlowsView {
        branch: id.get(),
        count: flows.len(),
        flows,
    }))
}
