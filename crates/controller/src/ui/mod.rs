//! UI (seed 000 §IV, "User Interface"): the operator's way into the SSC.
//!
//! A thin driver over the pure [`crate::inventory`], [`crate::path_group`] and [`crate::swap`]
//! cores and the [`crate::store`] database:
//! - [`config`]: the `ssc` TOML configuration (`[api]`, `[database]`).
//! - [`routes`]: the one table of routes ([`routes::ROUTES`]) that `api` and `openapi` share.
//! - [`api`]: the REST API (axum, JSON, bearer token), one submodule per resource.
//! - [`openapi`]: the OpenAPI 3.1 document built from that table and the schemas `api` derives
//!   from its types ([`api::openapi_document`]), served at `/openapi.json`.
//!
//! Imports point down only: `api` → `openapi` → `routes`.
//! - [`client`]: the blocking HTTP client behind the `ssc` CLI subcommands.
//! - the WRR weights ([`crate::wrr`]) are served at `/api/v1/weights`; `ssc run` feeds them the
//!   SDC's group rates ([`api::AppState::with_wrr`]).
//!
//! Call order for a server: [`config::Config::load`] → [`crate::store::Store::open`] →
//! [`api::AppState::new`] → [`serve`].
pub mod api;
pub mod client;
pub mod config;
pub mod openapi;
pub mod routes;

use std::future::Future;
use std::sync::Arc;

use crate::store::Store;

/// Serves the REST API on `listener` until `shutdown` completes (then finishes the requests in
/// flight). With `sdc`, `/api/v1/stats` serves the statistics the OFC collects.
pub async fn serve(
    listener: tokio::net::TcpListener,
    store: Arc<Store>,
    token: &str,
    body_limit_bytes: usize,
    sdc: Option<Arc<std::sync::Mutex<crate::sdc::Sdc>>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let mut state = api::AppState::new(store, token);
    if let Some(sdc) = sdc {
        state = state.with_sdc(sdc);
    }
    serve_state(listener, state, body_limit_bytes, shutdown).await
}

/// [`serve`] with a prepared [`api::AppState`] (e.g. one sharing its SDC and WRR state with
/// other tasks).
pub async fn serve_state(
    listener: tokio::net::TcpListener,
    state: api::AppState,
    body_limit_bytes: usize,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = api::router(state, body_limit_bytes);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}
