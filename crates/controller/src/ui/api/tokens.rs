//! UI (seed 000 §IV): REST API tokens with roles (read-only, admin); only their SHA-256 is
//! stored.
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};

use super::common::{blocking, ApiError, AppState};
use crate::store::creds::Role;

/// `POST /api/v1/tokens`.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewApiToken {
    /// A unique name, 1..=64 characters of `[A-Za-z0-9._-]`.
    pub name: String,
    /// `read-only` or `admin`.
    pub role: Role,
    /// Lifetime in seconds, 1..=[`MAX_API_TOKEN_TTL_S`]; absent: [`DEFAULT_API_TOKEN_TTL_S`]
    /// (30 days). Not together with `never_expires`.
    #[serde(default)]
    pub ttl_s: Option<u64>,
    /// `true`: the token never expires (the operator asked for it: `ssc token add --ttl never`).
    #[serde(default)]
    pub never_expires: bool,
}

/// Default lifetime of a REST token: 30 days. Long enough for a person's working token to
/// last a month, short enough that a forgotten or leaked one stops working by itself; scripts
/// that need more say `never` explicitly (and show up as such in `ssc token list`).
pub const DEFAULT_API_TOKEN_TTL_S: u64 = 30 * 24 * 3600;
/// Longest lifetime `ttl_s` accepts: one year (beyond that, say `never_expires` explicitly).
pub const MAX_API_TOKEN_TTL_S: u64 = 366 * 24 * 3600;

/// One entry of `GET /api/v1/tokens`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ApiTokenInfo {
    /// Its name.
    pub name: String,
    /// Its role.
    pub role: Role,
    /// Unix seconds of its creation.
    pub created: u64,
    /// Unix seconds from which it is refused; `null`: never.
    pub expires: Option<u64>,
    /// Refused now (401) because it expired; kept until removed.
    pub expired: bool,
}

/// The answer of `POST /api/v1/tokens`: the token, shown once.
#[derive(Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ApiToken {
    /// Its name.
    pub name: String,
    /// Its role.
    pub role: Role,
    /// The bearer token (64 hex digits). Never stored, never logged.
    pub token: String,
    /// Unix seconds from which it is refused; `null`: never.
    pub expires: Option<u64>,
}

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiToken")
            .field("name", &self.name)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

/// `GET /api/v1/tokens`.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ApiTokenList {
    /// Every stored token's name, role, expiry and whether it expired (the config's
    /// bootstrap token is not listed).
    pub tokens: Vec<ApiTokenInfo>,
}

/// Longest token name.
pub const MAX_TOKEN_NAME: usize = 64;

pub(super) async fn add_token(
    State(state): State<AppState>,
    body: Result<Json<NewApiToken>, JsonRejection>,
) -> Result<(StatusCode, Json<ApiToken>), ApiError> {
    let Json(req) = body.map_err(ApiError::from)?;
    let ok = !req.name.is_empty()
        && req.name.len() <= MAX_TOKEN_NAME
        && req
            .name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"._-".contains(&c));
    if !ok {
        return Err(ApiError::invalid(format!(
            "name: {:?} must be 1..={MAX_TOKEN_NAME} characters of A-Z a-z 0-9 . _ -",
            req.name
        )));
    }
    let ttl = match (req.ttl_s, req.never_expires) {
        (Some(_), true) => {
            return Err(ApiError::invalid(
                "ttl_s and never_expires exclude each other".to_owned(),
            ))
        }
        (None, true) => None,
        (None, false) => Some(DEFAULT_API_TOKEN_TTL_S),
        (Some(t), false) if (1..=MAX_API_TOKEN_TTL_S).contains(&t) => Some(t),
        (Some(t), false) => {
            return Err(ApiError::invalid(format!(
                "ttl_s: {t} is out of range 1..={MAX_API_TOKEN_TTL_S} (or never_expires: true)"
            )))
        }
    };
    let token = pki::enrol::random_token()
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let now = crate::authority::unix_now();
    let expires = ttl.map(|t| now.saturating_add(t));
    let row = crate::store::creds::ApiTokenRow {
        name: req.name.clone(),
        role: req.role,
        created: now,
        expires,
    };
    let hash = pki::enrol::token_hash(&token);
    let added = blocking(&state, move |s| s.add_api_token(&hash, &row)).await?;
    if !added {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("a token named {:?} exists already", req.name),
        ));
    }
    tracing::info!(name = %req.name, role = ?req.role, ?expires, "API token added");
    Ok((
        StatusCode::CREATED,
        Json(ApiToken {
            name: req.name,
            role: req.role,
            token,
            expires,
        }),
    ))
}

pub(super) async fn list_tokens(
    State(state): State<AppState>,
) -> Result<Json<ApiTokenList>, ApiError> {
    let rows = blocking(&state, |s| s.api_tokens()).await?;
    let now = crate::authority::unix_now();
    let tokens = rows
        .into_iter()
        .map(|r| ApiTokenInfo {
            expired: r.expired(now),
            name: r.name,
            role: r.role,
            created: r.created,
            expires: r.expires,
        })
        .collect();
    Ok(Json(ApiTokenList { tokens }))
}

pub(super) async fn remove_token(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let n = name.clone();
    if blocking(&state, move |s| s.remove_api_token(&n)).await? {
        tracing::info!(%name, "API token removed");
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no token named {name:?}"),
        ))
    }
}
