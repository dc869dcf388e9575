//! UI (issue #8): the gateway CA over REST: one-time enrolment tokens, issued certificates,
//! revocation ([`crate::authority`]).
use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};

use super::common::{blocking, snapshot, ApiError, AppState};
use crate::inventory::BranchId;

/// `POST /api/v1/enrol-tokens`.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewEnrolToken {
    /// The branch the token enrols.
    pub branch: u8,
    /// Validity in seconds (default 3600, at most 7 days).
    #[serde(default)]
    pub ttl_s: Option<u64>,
}

/// `POST /api/v1/revoke`: exactly one of the two.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = Revoke)]
pub struct RevokeRequest {
    /// Every certificate of this branch.
    #[serde(default)]
    pub branch: Option<u8>,
    /// This serial.
    #[serde(default)]
    pub serial: Option<u64>,
}

/// The answer of `POST /api/v1/revoke`.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Revoked {
    /// The serials revoked by this call (empty: already revoked or unknown).
    pub revoked: Vec<u64>,
}

/// `GET /api/v1/certificates`.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CertificateList {
    /// Every certificate the CA issued (branch 0: the controller's own).
    pub certificates: Vec<crate::store::creds::CertRow>,
}

fn authority(state: &AppState) -> Result<Arc<crate::authority::Authority>, ApiError> {
    state
        .gateways
        .as_ref()
        .and_then(|r| r.authority().cloned())
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "this ssc runs no gateway CA",
            )
        })
}

pub(super) async fn ca_blocking<T: Send + 'static>(
    state: &AppState,
    f: impl FnOnce(&crate::authority::Authority) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let a = authority(state)?;
    tokio::task::spawn_blocking(move || f(&a))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("worker: {e}")))?
}

pub(super) async fn new_enrol_token(
    State(state): State<AppState>,
    caller: Option<axum::Extension<super::common::Caller>>,
    body: Result<Json<NewEnrolToken>, JsonRejection>,
) -> Result<(StatusCode, Json<crate::authority::NewToken>), ApiError> {
    let Json(req) = body.map_err(ApiError::from)?;
    let b = BranchId::new(req.branch)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))?;
    // A provisioner token enrols only the branches named in it.
    if let Some(axum::Extension(c)) = caller {
        if c.role == crate::store::creds::Role::Provisioner && !c.branches.contains(&b.get()) {
            tracing::warn!(branch = b.get(), allowed = ?c.branches, "enrolment token refused: the provisioner token does not name this branch");
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!(
                    "this provisioner token may create enrolment tokens for branches {:?} only, not {b}",
                    c.branches
                ),
            ));
        }
    }
    let known = snapshot(&state).inventory().branch(b).is_some();
    if !known {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("branch {b} is not in the inventory"),
        ));
    }
    let ttl = std::time::Duration::from_secs(
        req.ttl_s
            .unwrap_or(crate::authority::DEFAULT_TOKEN_TTL.as_secs()),
    );
    let t = ca_blocking(&state, move |a| {
        a.new_token(b.get(), ttl).map_err(|e| match e {
            crate::authority::AuthorityError::Ttl { .. } => {
                ApiError::new(StatusCode::BAD_REQUEST, e.to_string())
            }
            e => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        })
    })
    .await?;
    Ok((StatusCode::CREATED, Json(t)))
}

pub(super) async fn certificates(
    State(state): State<AppState>,
) -> Result<Json<CertificateList>, ApiError> {
    authority(&state)?;
    let certificates = blocking(&state, |s| s.certs()).await?;
    Ok(Json(CertificateList { certificates }))
}

pub(super) async fn revoke(
    State(state): State<AppState>,
    body: Result<Json<RevokeRequest>, JsonRejection>,
) -> Result<Json<Revoked>, ApiError> {
    let Json(req) = body.map_err(ApiError::from)?;
    if req.branch.is_some() == req.serial.is_some() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "give exactly one of branch and serial",
        ));
    }
    let revoked = ca_blocking(&state, move |a| {
        a.revoke(req.branch, req.serial)
            .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
    })
    .await?;
    Ok(Json(Revoked { revoked }))
}
