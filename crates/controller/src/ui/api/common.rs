//! What the handlers of every resource share: the state ([`AppState`]), the error answer
//! ([`ApiError`]) and JSON extractor ([`ApiJson`]), path parsers, the blocking store call and
//! the catalog snapshot.

use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::FromRequest;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::catalog::{Catalog, CatalogError};
use crate::inventory::{BranchId, PortIndex, PortRef};
use crate::path_group::PathGroupId;
use crate::sdc::Sdc;
use crate::store::{Store, StoreError};
use crate::wrr::Wrr;

/// Shared state of the handlers.
#[derive(Clone, Debug)]
pub struct AppState {
    pub(super) store: Arc<Store>,
    pub(super) token: Arc<str>,
    /// Unix seconds from which `token` (the config's bootstrap token) is refused.
    pub(super) token_expires: Option<u64>,
    pub(super) sdc: Option<Arc<std::sync::Mutex<Sdc>>>,
    pub(super) wrr: Arc<std::sync::Mutex<Wrr>>,
    pub(super) gateways: Option<Arc<crate::gwchan::Registry>>,
    pub(super) adaptive: Option<Arc<std::sync::Mutex<crate::adaptive::Adaptive>>>,
    pub(super) history: Option<Arc<std::sync::Mutex<crate::history::History>>>,
}

impl AppState {
    /// State over an open store, accepting `token` as the bearer token (no OpenFlow server:
    /// `/health` says `openflow: false`, `/api/v1/stats` is empty).
    pub fn new(store: Arc<Store>, token: &str) -> Self {
        Self {
            store,
            token: Arc::from(token),
            token_expires: None,
            sdc: None,
            wrr: Arc::new(std::sync::Mutex::new(Wrr::default())),
            gateways: None,
            adaptive: None,
            history: None,
        }
    }

    /// Serves the rates of the last minutes that `ssc run` records into `history`
    /// ([`crate::ui::dashboard::record_history`]); without it `GET /api/v1/history` is empty.
    pub fn with_history(mut self, history: Arc<std::sync::Mutex<crate::history::History>>) -> Self {
        self.history = Some(history);
        self
    }

    /// Refuses the bootstrap token (the one given to [`Self::new`]) from `expires` (Unix s) on;
    /// `ssc run` passes what [`super::tokens::arm_bootstrap_token`] recorded.
    pub fn with_token_expiry(mut self, expires: Option<u64>) -> Self {
        self.token_expires = expires;
        self
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

/// Who called (the middleware puts it into the request's extensions for the handlers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The token's role.
    pub role: crate::store::creds::Role,
    /// [`crate::store::creds::Role::Provisioner`]: the branches it may enrol.
    pub branches: Vec<u8>,
}

/// An error answer: a status and `{"error": "..."}`.
#[derive(Debug)]
pub struct ApiError {
    pub(super) status: StatusCode,
    pub(super) message: String,
}

impl ApiError {
    pub(super) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    pub(super) fn invalid(message: impl Into<String>) -> Self {
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

pub(super) fn parse_branch(name: &str, s: &str) -> Result<BranchId, ApiError> {
    let n: u8 = s
        .parse()
        .map_err(|_| ApiError::invalid(format!("{name}: {s:?} is not a branch id 1..=250")))?;
    BranchId::new(n).map_err(|e| ApiError::invalid(format!("{name}: {e}")))
}

pub(super) fn parse_group(s: &str) -> Result<PathGroupId, ApiError> {
    let n: u8 = s
        .parse()
        .map_err(|_| ApiError::invalid(format!("group: {s:?} is not a group id 0..=15")))?;
    PathGroupId::new(n).map_err(|e| ApiError::invalid(format!("group: {e}")))
}

pub(super) fn parse_port(branch: BranchId, s: &str) -> Result<PortRef, ApiError> {
    PortIndex::try_from(s.to_owned())
        .map(|p| PortRef::new(branch, p))
        .map_err(|e| ApiError::invalid(format!("port: {e}")))
}

/// Runs a store call on a blocking thread (redb reads and fsyncing writes block).
pub(super) async fn blocking<T: Send + 'static>(
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
pub(super) fn snapshot(state: &AppState) -> Arc<Catalog> {
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
