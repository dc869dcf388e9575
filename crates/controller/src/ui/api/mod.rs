//! UI (seed 000 §IV): the REST API (axum, JSON, bearer-token auth), a thin driver over
//! [`crate::catalog`] and [`crate::store`].
//!
//! Every route is one row of [`ROUTES`] ([`super::routes`]); the router ([`router`]) and the
//! OpenAPI document ([`openapi_document`], built by [`super::openapi`]) are both built from that table, so they cannot
//! disagree. Reads are served from the store's in-memory catalog ([`Store::snapshot`](crate::store::Store::snapshot), no
//! database read, no recompiling); writes run one store operation on a blocking thread (redb
//! writes fsync). [`crate::catalog::CatalogError`] and [`StoreError`] map to a status: 404
//! missing, 409 conflict, 422 invalid, 500 IO.
//!
//! One submodule per resource: [`inventory`] (whole inventory, import, PC settings),
//! [`branches`] (branches, WAN ports, compiled flows), [`groups`] (path groups, PC), [`telemetry`]
//! (SDC stats, PM/WRR weights, adaptive path groups, gateways), [`tokens`] (REST tokens), [`ca`]
//! (gateway enrolment and certificates). What they share (state, errors, parsers) is in
//! `common`; this file holds the router, the auth middleware and `/health`.
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{on, MethodFilter, MethodRouter};
use axum::{Json, Router};
use serde_json::Value;
use subtle::ConstantTimeEq;

use crate::store::creds::Role;
use crate::store::StoreError;

pub mod branches;
pub mod ca;
mod common;
pub mod groups;
pub mod history;
pub mod inventory;
mod metrics;
pub mod schemas;
pub mod telemetry;
pub mod tokens;

pub use super::routes::{Op, Route, API_PREFIX, ROUTES};
pub use branches::{FlowView, FlowsView};
pub use ca::{CertificateList, NewEnrolToken, RevokeRequest, Revoked};
use common::blocking;
pub use common::{ApiError, ApiJson, AppState, Caller, Health};
pub use groups::{GroupView, MemberView, SetGroup, StructuredMember, StructuredTransit};
pub use inventory::{Import, Summary};
pub use schemas::{derived_schemas, openapi_document};
pub use telemetry::{AdaptiveList, WeightList};
pub use tokens::{
    arm_bootstrap_token, ApiToken, ApiTokenInfo, ApiTokenList, NewApiToken, BOOTSTRAP_TOKEN_NAME,
    DEFAULT_API_TOKEN_TTL_S, DEFAULT_BOOTSTRAP_TOKEN_TTL_S, MAX_API_TOKEN_TTL_S, MAX_TOKEN_NAME,
};

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
        Op::History => on(f, history::history),
        Op::NewEnrolToken => on(f, ca::new_enrol_token),
        Op::Certificates => on(f, ca::certificates),
        Op::Revoke => on(f, ca::revoke),
        Op::AddToken => on(f, tokens::add_token),
        Op::ListTokens => on(f, tokens::list_tokens),
        Op::RemoveToken => on(f, tokens::remove_token),
        Op::Metrics => on(f, metrics::metrics),
    }
}

/// The API: every route of [`ROUTES`], the token check on those with `auth`, the web
/// dashboard's static files ([`super::dashboard`], no token: they hold no data), a JSON 404 for
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
        .merge(super::dashboard::router())
        .fallback(no_route)
        .layer(DefaultBodyLimit::max(body_limit_bytes))
        .layer(middleware::from_fn(log_request))
        .with_state(state)
}

// ---------------------------------------------------------------------------------------------
// Errors, auth, extractors
// ---------------------------------------------------------------------------------------------

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

/// The caller of a presented token: the config's token is admin (bootstrap, until its expiry,
/// [`tokens::arm_bootstrap_token`]); others are looked up by their SHA-256 in the database (`ssc
/// token add`). `Ok(Err(why))`: unknown or expired (both 401).
fn caller_of(state: &AppState, token: &str) -> Result<Result<Caller, &'static str>, StoreError> {
    let now = crate::authority::unix_now();
    if token_matches(token, &state.token) {
        if state.token_expires.is_some_and(|e| now >= e) {
            return Ok(Err("expired bootstrap token (api.bootstrap_token_ttl_s): use a token from `ssc token add`, or rotate the config's token"));
        }
        return Ok(Ok(Caller {
            role: Role::Admin,
            branches: Vec::new(),
        }));
    }
    Ok(
        match state.store.api_token(&pki::enrol::token_hash(token))? {
            None => Err("wrong bearer token"),
            Some(r) if r.expired(now) => {
                Err("expired bearer token (ssc token add makes a new one)")
            }
            Some(r) => Ok(Caller {
                role: r.role,
                branches: r.branches,
            }),
        },
    )
}

/// Whether `caller` may call `method path`: admin everything, read-only the GET routes, a
/// provisioner only `POST /api/v1/enrol-tokens` (its branches are checked by the handler).
fn allowed(caller: &Caller, method: &Method, path: &str) -> bool {
    match caller.role {
        Role::Provisioner => *method == Method::POST && path == ENROL_TOKENS_PATH,
        role => role >= needed_role(method),
    }
}

/// The one route a provisioner token may call.
const ENROL_TOKENS_PATH: &str = "/api/v1/enrol-tokens";

async fn require_token(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
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
    let caller = match caller_of(&state, token.trim()) {
        Ok(Ok(c)) => c,
        Ok(Err(why)) => {
            tracing::debug!(path = %req.uri().path(), why, "bearer token refused");
            return ApiError::new(StatusCode::UNAUTHORIZED, why).into_response();
        }
        Err(e) => return ApiError::from(e).into_response(),
    };
    if !allowed(&caller, req.method(), req.uri().path()) {
        tracing::debug!(method = %req.method(), path = %req.uri().path(), role = ?caller.role, "forbidden for this token's role");
        let what = match caller.role {
            Role::Provisioner => "this one is a provisioner token (POST /api/v1/enrol-tokens only)",
            _ => "this one is read-only",
        };
        return ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "{} {} needs an admin token; {what}",
                req.method(),
                req.uri().path()
            ),
        )
        .into_response();
    }
    req.extensions_mut().insert(caller);
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
    fn what_each_role_may_call() {
        let c = |role, branches: &[u8]| Caller {
            role,
            branches: branches.to_vec(),
        };
        let p = c(Role::Provisioner, &[1]);
        assert!(allowed(&p, &Method::POST, "/api/v1/enrol-tokens"));
        assert!(!allowed(&p, &Method::GET, "/api/v1/inventory"));
        assert!(!allowed(&p, &Method::POST, "/api/v1/tokens"));
        assert!(!allowed(&p, &Method::POST, "/api/v1/revoke"));
        let r = c(Role::ReadOnly, &[]);
        assert!(allowed(&r, &Method::GET, "/api/v1/inventory"));
        assert!(!allowed(&r, &Method::POST, "/api/v1/enrol-tokens"));
        let a = c(Role::Admin, &[]);
        assert!(allowed(&a, &Method::POST, "/api/v1/enrol-tokens"));
        assert!(allowed(&a, &Method::DELETE, "/api/v1/tokens/x"));
        assert_eq!(
            ROUTES
                .iter()
                .filter(|r| r.path == ENROL_TOKENS_PATH && r.method == Method::POST)
                .count(),
            1,
            "the provisioner's route exists"
        );
    }

    #[test]
    fn token_compare() {
        assert!(token_matches("0123456789abcdef", "0123456789abcdef"));
        assert!(!token_matches("0123456789abcdeF", "0123456789abcdef"));
        assert!(!token_matches("0123456789abcde", "0123456789abcdef"));
        assert!(!token_matches("", "0123456789abcdef"));
    }
}
