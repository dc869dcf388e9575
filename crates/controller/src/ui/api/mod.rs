//! UI (seed 000 §IV): the REST API (axum, JSON, bearer-token auth), a thin driver over
//! [`crate::catalog`] and [`crate::store`].
//!
//! Every route is one row of [`ROUTES`] ([`super::routes`]); the router ([`router`]) and the
//! OpenAPI document ([`openapi_document`], built by [`super::openapi`]) are both built from that table, so they cannot
//! disagree. Reads are served from the store's in-memory catalog ([`Store::snapshot`], no
//! database read, no recompiling); writes run one store operation on a blocking thread (redb
//! writes fsync). [`crate::catalog::CatalogError`] and [`StoreError`] map to a status: 404
//! missing, 409 conflict, 422 invalid, 500 IO.
//!
//! One submodule per resource: [`inventory`] (whole inventory, import, PC settings),
//! [`branches`] (branches, WAN ports, compiled flows), [`groups`] (path groups, PC), [`telemetry`]
//! (SDC stats, PM/WRR weights, adaptive path groups, gateways), [`tokens`] (REST tokens), [`ca`]
//! (gateway enrolment and certificates).
use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{on, MethodFilter, MethodRouter};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use subtle::ConstantTimeEq;

use crate::catalog::{Catalog, CatalogError};
use crate::inventory::{BranchId, PortIndex, PortRef};
use crate::path_group::PathGroupId;
use crate::sdc::Sdc;
use crate::store::creds::Role;
use crate::store::{Store, StoreError};
use crate::wrr::Wrr;

pub mod branches;
pub mod ca;
pub mod groups;
pub mod inventory;
pub mod schemas;
pub mod telemetry;
pub mod tokens;

pub use super::routes::{Op, Route, API_PREFIX, ROUTES};
pub use branches::{FlowView, FlowsView};
pub use ca::{CertificateList, NewEnrolToken, RevokeRequest, Revoked};
pub use groups::{GroupView, MemberView, SetGroup, StructuredMember, StructuredTransit};
pub use inventory::{Import, Summary};
pub use schemas::{derived_schemas, openapi_document};
pub use telemetry::{AdaptiveList, WeightList};
pub use tokens::{
    ApiToken, ApiTokenInfo, ApiTokenList, NewApiToken, DEFAULT_API_TOKEN_TTL_S,
    MAX_API_TOKEN_TTL_S, MAX_TOKEN_NAME,
};

/// Shared state of the handlers.
#[derive(Clone, Debug)]
pub struct AppState {
    store: Arc<Store>,
    token: Arc<str>,
    sdc: Option<Arc<std::sync::Mutex<Sdc>>>,
    wrr: Arc<std::sync::Mutex<Wrr>>,
    gateways: Option<Arc<crate::gwchan::Registry>>,
    adaptive: Option<Arc<std::sync::Mutex<crate::adaptive::Adaptive>>>,
}

impl AppState {
    /// State over an open store, accepting `token` as the bearer token (no OpenFlow server:
    /// `/health` says `openflow: false`, `/api/v1/stats` is empty).
    pub fn new(store: Arc<Store>, token: &str) -> Self {
        Self {
            store,
            token: Arc::from(token),
            sdc: None,
            wrr: Arc::new(std::sync::Mutex::new(Wrr::default())),
            gateways: None,
            adaptive: None,
        }
    }

    /// Serves the state of the adaptive path groups `ssc` runs ([`crate::adaptive`]); without
    /// it `GET /api/v1/adaptive` lists no pair.
    pub fn with_adaptive(
        mut self,
        adaptive: Arc<std::sync::Mutex<crate::adaptive::Adaptive>>,
    ) -> Self {
        self.adaptive = Some(adaptive);
        self
    }

    /// Serves the gateways of the gateway channel ([`crate::gwchan`]); without it
    /// `GET /api/v1/gateways` is an empty list.
    pub fn with_gateways(mut self, registry: Arc<crate::gwchan::Registry>) -> Self {
        self.gateways = Some(registry);
        self
    }

    /// Serves the statistics the OFC's switch tasks collect into `sdc`.
    pub fn with_sdc(mut self, sdc: Arc<std::sync::Mutex<Sdc>>) -> Self {
        self.sdc = Some(sdc);
        self
    }

    /// Serves the WRR weights of `wrr`, which the caller feeds with measured rates
    /// ([`crate::wrr::Wrr::observe`]); without it the weights come from configured capacities.
    pub fn with_wrr(mut self, wrr: Arc<std::sync::Mutex<Wrr>>) -> Self {
        self.wrr = wrr;
        self
    }
}

fn method_filter(m: &Method) -> MethodFilter {
    match *m {
        Method::POST => MethodFilter::POST,
        Method::PUT => MethodFilter::PUT,
        Method::PATCH => MethodFilter::PATCH,
        Method::DELETE => MethodFilter::DELETE,
        _ => MethodFilter::GET,
    }
}

fn method_router(r: &Route) -> MethodRouter<AppState> {
    let f = method_filter(&r.method);
    match r.op {
        Op::Health => on(f, health),
        Op::OpenApi => on(f, openapi),
        Op::GetInventory => on(f, inventory::get_inventory),
        Op::Import => on(f, inventory::import),
        Op::ListBranches => on(f, branches::list_branches),
        Op::AddBranch => on(f, branches::add_branch),
        Op::GetBranch => on(f, branches::get_branch),
        Op::ModifyBranch => on(f, branches::modify_branch),
        Op::RemoveBranch => on(f, branches::remove_branch),
        Op::AddPort => on(f, branches::add_port),
        Op::ModifyPort => on(f, branches::modify_port),
        Op::RemovePort => on(f, branches::remove_port),
        Op::Flows => on(f, branches::flows),
        Op::ListGroups => on(f, groups::list_groups),
        Op::ListPairGroups => on(f, groups::list_pair_groups),
        Op::SetGroup => on(f, groups::set_group),
        Op::RemoveGroup => on(f, groups::remove_group),
        Op::GetSettings => on(f, inventory::get_settings),
        Op::SetSettings => on(f, inventory::set_settings),
        Op::Stats => on(f, telemetry::stats),
        Op::Weights => on(f, telemetry::weights),
        Op::PairWeights => on(f, telemetry::pair_weights),
        Op::Adaptive => on(f, telemetry::adaptive),
        Op::Gateways => on(f, telemetry::gateways),
        Op::NewEnrolToken => on(f, ca::new_enrol_token),
        Op::Certificates => on(f, ca::certificates),
        Op::Revoke => on(f, ca::revoke),
        Op::AddToken => on(f, tokens::add_token),
        Op::ListTokens => on(f, tokens::list_tokens),
        Op::RemoveToken => on(f, tokens::remove_token),
    }
}

/// The API: every route of [`ROUTES`], the token check on those with `auth`, a JSON 404 for
/// anything else, and a body limit.
pub fn router(state: AppState, body_limit_bytes: usize) -> Router {
    let mut private = Router::new();
    let mut public = Router::new();
    for r in ROUTES {
        if r.auth {
            private = private.route(r.path, method_router(r));
        } else {
            public = public.route(r.path, method_router(r));
        }
    }
    private
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token))
        .merge(public)
        .fallback(no_route)
        .layer(DefaultBodyLimit::max(body_limit_bytes))
        .layer(middleware::from_fn(log_request))
        .with_state(state)
}

// ---------------------------------------------------------------------------------------------
// Errors, auth, extractors
// ---------------------------------------------------------------------------------------------

/// An error answer: a status and `{"error": "..."}`.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (self.status, Json(json!({ "error": self.message }))).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp
    }
}

impl From<CatalogError> for ApiError {
    fn from(e: CatalogError) -> Self {
        let status = match &e {
            CatalogError::NoBranch(_) | CatalogError::NoPort(_) | CatalogError::NoGroup { .. } => {
                StatusCode::NOT_FOUND
            }
            CatalogError::BranchExists(_) | CatalogError::InUse { .. } => StatusCode::CONFLICT,
            _ => StatusCode::UNPROCESSABLE_ENTITY,
        };
        Self::new(status, e.to_string())
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Catalog(e) => e.into(),
            e if e.is_input() => Self::new(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()),
            e => {
                tracing::error!(error = %e, "database failure");
                Self::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
            }
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        Self::new(r.status(), r.body_text())
    }
}

/// `Json` whose rejections are [`ApiError`]s (the message names the offending field).
#[derive(Debug, FromRequest)]
#[from_request(via(Json), rejection(ApiError))]
pub struct ApiJson<T>(pub T);

/// Compares the presented token with ours in constant time (only the length may leak).
fn token_matches(presented: &str, ours: &str) -> bool {
    bool::from(presented.as_bytes().ct_eq(ours.as_bytes()))
}

/// The role a request needs: GET (and HEAD) read, every other method changes something.
pub fn needed_role(method: &Method) -> Role {
    if *method == Method::GET || *method == Method::HEAD {
        Role::ReadOnly
    } else {
        Role::Admin
    }
}

/// The role of a presented token: the config's token is admin (bootstrap, never expires);
/// others are looked up by their SHA-256 in the database (`ssc token add`). `Ok(Err(why))`:
/// unknown or expired (both 401).
fn role_of(state: &AppState, token: &str) -> Result<Result<Role, &'static str>, StoreError> {
    if token_matches(token, &state.token) {
        return Ok(Ok(Role::Admin));
    }
    Ok(
        match state.store.api_token(&pki::enrol::token_hash(token))? {
            None => Err("wrong bearer token"),
            Some(r) if r.expired(crate::authority::unix_now()) => {
                Err("expired bearer token (ssc token add makes a new one)")
            }
            Some(r) => Ok(r.role),
        },
    )
}

async fn require_token(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let Some(token) = presented else {
        return ApiError::new(
            StatusCode::UNAUTHORIZED,
            "missing bearer token (header `Authorization: Bearer <token>`)",
        )
        .into_response();
    };
    let role = match role_of(&state, token.trim()) {
        Ok(Ok(r)) => r,
        Ok(Err(why)) => {
            tracing::debug!(path = %req.uri().path(), why, "bearer token refused");
            return ApiError::new(StatusCode::UNAUTHORIZED, why).into_response();
        }
        Err(e) => return ApiError::from(e).into_response(),
    };
    let needed = needed_role(req.method());
    if role < needed {
        tracing::debug!(method = %req.method(), path = %req.uri().path(), "forbidden for a read-only token");
        return ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "{} {} needs an admin token; this one is read-only",
                req.method(),
                req.uri().path()
            ),
        )
        .into_response();
    }
    next.run(req).await
}

async fn log_request(req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let resp = next.run(req).await;
    tracing::debug!(%method, %path, status = resp.status().as_u16(), "request");
    resp
}

async fn no_route(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!("no route {method} {} (see /openapi.json)", uri.path()),
    )
}

fn parse_branch(name: &str, s: &str) -> Result<BranchId, ApiError> {
    let n: u8 = s
        .parse()
        .map_err(|_| ApiError::invalid(format!("{name}: {s:?} is not a branch id 1..=15")))?;
    BranchId::new(n).map_err(|e| ApiError::invalid(format!("{name}: {e}")))
}

fn parse_group(s: &str) -> Result<PathGroupId, ApiError> {
    let n: u8 = s
        .parse()
        .map_err(|_| ApiError::invalid(format!("group: {s:?} is not a group id 0..=15")))?;
    PathGroupId::new(n).map_err(|e| ApiError::invalid(format!("group: {e}")))
}

fn parse_port(branch: BranchId, s: &str) -> Result<PortRef, ApiError> {
    PortIndex::try_from(s.to_owned())
        .map(|p| PortRef::new(branch, p))
        .map_err(|e| ApiError::invalid(format!("port: {e}")))
}

/// Runs a store call on a blocking thread (redb reads and fsyncing writes block).
async fn blocking<T: Send + 'static>(
    state: &AppState,
    f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, ApiError> {
    let store = Arc::clone(&state.store);
    tokio::task::spawn_blocking(move || f(&store))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("worker: {e}")))?
        .map_err(ApiError::from)
}

/// The catalog of the last committed update (memory only: no database read, no recompiling).
fn snapshot(state: &AppState) -> Arc<Catalog> {
    state.store.snapshot()
}

/// `GET /health`.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Health {
    /// Always `"ok"` when the database answers.
    pub status: String,
    /// Schema version of the database.
    pub schema_version: u64,
    /// Whether the OpenFlow server (OFC) runs in this process.
    pub openflow: bool,
}

async fn health(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    let schema_version = blocking(&state, |s| s.schema_version()).await?;
    Ok(Json(Health {
        status: "ok".into(),
        schema_version,
        openflow: state.sdc.is_some(),
    }))
}

async fn openapi() -> Json<Value> {
    Json(openapi_document())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_compare() {
        assert!(token_matches("0123456789abcdef", "0123456789abcdef"));
        assert!(!token_matches("0123456789abcdeF", "0123456789abcdef"));
        assert!(!token_matches("0123456789abcde", "0123456789abcdef"));
        assert!(!token_matches("", "0123456789abcdef"));
    }
}
