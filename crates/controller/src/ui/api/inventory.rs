//! UI (seed 000 §IV): the whole inventory (`GET /api/v1/inventory`, `POST /api/v1/import`) and
//! the PC settings (`/api/v1/settings`).
use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};

use super::common::{blocking, snapshot, ApiError, ApiJson, AppState};
use crate::catalog::Catalog;
use crate::inventory::InventoryFile;
use crate::path_config::Settings;
use crate::path_group::GroupsFile;

/// Counts after an import.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Summary {
    /// Branches.
    pub branches: usize,
    /// WAN ports.
    pub ports: usize,
    /// Path groups.
    pub groups: usize,
    /// Compiled flows on all gateways.
    pub flows: usize,
}

impl Summary {
    fn of(c: &Catalog) -> Self {
        Self {
            branches: c.inventory().branches().count(),
            ports: c.inventory().ports().count(),
            groups: c.groups().len(),
            flows: c.flows().len(),
        }
    }
}

/// `POST /api/v1/import`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Import {
    /// All branches.
    pub inventory: InventoryFile,
    /// All path groups (none if absent).
    #[serde(default = "no_groups")]
    pub groups: GroupsFile,
    /// New settings (kept if absent).
    #[serde(default)]
    #[schema(schema_with = crate::ui::openapi::settings_ref)]
    pub settings: Option<Settings>,
}

fn no_groups() -> GroupsFile {
    GroupsFile { groups: Vec::new() }
}

pub(super) async fn get_inventory(
    State(state): State<AppState>,
) -> Result<Json<InventoryFile>, ApiError> {
    let c = snapshot(&state);
    Ok(Json(c.inventory().to_file()))
}

pub(super) async fn import(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<Import>,
) -> Result<Json<Summary>, ApiError> {
    let c = blocking(&state, move |s| {
        s.import(body.inventory, body.groups, body.settings)
    })
    .await?;
    let summary = Summary::of(&c);
    tracing::info!(
        branches = summary.branches,
        groups = summary.groups,
        flows = summary.flows,
        "inventory imported"
    );
    Ok(Json(summary))
}

pub(super) async fn get_settings(
    State(state): State<AppState>,
) -> Result<Json<Settings>, ApiError> {
    let c = snapshot(&state);
    Ok(Json(c.settings().clone()))
}

pub(super) async fn set_settings(
    State(state): State<AppState>,
    ApiJson(settings): ApiJson<Settings>,
) -> Result<Json<Settings>, ApiError> {
    let c = blocking(&state, move |s| s.update(|c| c.set_settings(settings))).await?;
    tracing::info!("settings changed");
    Ok(Json(c.settings().clone()))
}
