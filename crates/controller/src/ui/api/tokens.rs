//! UI (seed 000 §IV): REST API tokens with roles (provisioner, read-only, admin); only their
//! SHA-256 is stored. The config's bootstrap token is stored too, as the token named
//! [`BOOTSTRAP_TOKEN_NAME`], with its expiry ([`arm_bootstrap_token`]).
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
    /// `provisioner`, `read-only` or `admin`.
    pub role: Role,
    /// `provisioner` only (and required there): the branches (1..=250) it may create enrolment
    /// tokens for.
    #[serde(default)]
    pub branches: Vec<u8>,
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
    /// `provisioner`: the branches it may create enrolment tokens for (empty for other roles).
    #[serde(default)]
    pub branches: Vec<u8>,
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
    /// `provisioner`: the branches it may create enrolment tokens for (empty for other roles).
    #[serde(default)]
    pub branches: Vec<u8>,
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

/// The name under which the config's bootstrap token is stored (reserved: `POST /api/v1/tokens`
/// refuses it).
pub const BOOTSTRAP_TOKEN_NAME: &str = "bootstrap";

/// Default lifetime of the config's bootstrap admin token (`api.bootstrap_token_ttl_s`): 24 h
/// from the first `ssc run` that saw it. Enough to create named tokens (`ssc token add`), short
/// enough that a token left in a config file or a shell history stops working by itself.
pub const DEFAULT_BOOTSTRAP_TOKEN_TTL_S: u64 = 24 * 3600;

/// Records the config's bootstrap admin `token` in the store the first time `ssc run` sees it
/// (as [`BOOTSTRAP_TOKEN_NAME`], admin, expiring `ttl_s` after `now`; `None`: never) and
/// returns its expiry. A restart keeps the first expiry (it is not re-armed); a new token in the
/// config (rotation) replaces the row and gets a fresh lifetime.
pub fn arm_bootstrap_token(
    store: &crate::store::Store,
    token: &str,
    ttl_s: Option<u64>,
    now: u64,
) -> Result<Option<u64>, crate::store::StoreError> {
    let hash = pki::enrol::token_hash(token);
    if let Some(row) = store.api_token(&hash)? {
        return Ok(row.expires);
    }
    store.remove_api_token(BOOTSTRAP_TOKEN_NAME)?;
    let expires = ttl_s.map(|t| now.saturating_add(t));
    let row = crate::store::creds::ApiTokenRow {
        name: BOOTSTRAP_TOKEN_NAME.to_owned(),
        role: Role::Admin,
        created: now,
        expires,
        branches: Vec::new(),
    };
    store.add_api_token(&hash, &row)?;
    Ok(expires)
}

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
    if req.name == BOOTSTRAP_TOKEN_NAME {
        return Err(ApiError::invalid(format!(
            "name: {BOOTSTRAP_TOKEN_NAME:?} is reserved for the config's bootstrap token"
        )));
    }
    let mut branches = req.branches.clone();
    branches.sort_unstable();
    branches.dedup();
    match req.role {
        Role::Provisioner => {
            if branches.is_empty() {
                return Err(ApiError::invalid(
                    "branches: a provisioner token names the branches it may enrol (1..=250)",
                ));
            }
            if let Some(b) = branches
                .iter()
                .find(|b| crate::inventory::BranchId::new(**b).is_err())
            {
                return Err(ApiError::invalid(format!(
                    "branches: {b} is not a branch id 1..=250"
                )));
            }
        }
        _ if !branches.is_empty() => {
            return Err(ApiError::invalid(
                "branches: only a provisioner token names branches",
            ))
        }
        _ => {}
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
        branches: branches.clone(),
    };
    let hash = pki::enrol::token_hash(&token);
    let added = blocking(&state, move |s| s.add_api_token(&hash, &row)).await?;
    if !added {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("a token named {:?} exists already", req.name),
        ));
    }
    tracing::info!(name = %req.name, role = ?req.role, ?expires, ?branches, "API token added");
    Ok((
        StatusCode::CREATED,
        Json(ApiToken {
            name: req.name,
            role: req.role,
            token,
            expires,
            branches,
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
            branches: r.branches,
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
