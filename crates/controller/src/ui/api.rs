//! The REST API (axum, JSON, bearer-token auth): a thin driver over [`crate::store`].
//!
//! Every route is one row of [`ROUTES`]; the router ([`router`]) and the OpenAPI document
//! ([`super::openapi::document`]) are both built from that table, so they cannot disagree.
//! Handlers parse path parameters, run one store operation on a blocking thread (redb writes
//! fsync), and map [`StoreError`] to a status: 404 missing, 409 conflict, 422 invalid, 500 IO.
use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, Path, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{on, MethodFilter, MethodRouter};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use subtle::ConstantTimeEq;

use crate::inventory::{Branch, BranchId, InventoryFile, PortIndex, PortRef, WanPort};
use crate::path_config::Settings;
use crate::path_group::{GroupsFile, MemberPath, PathGroup, PathGroupId, Transit};
use crate::sdc::Sdc;
use crate::store::creds::Role;
use crate::store::{BranchPatch, Catalog, NewPort, PortPatch, Store, StoreError};
use crate::swap::FlowEntry;
use crate::wrr::{PairWeights, Wrr};

/// Prefix of every authenticated route.
pub const API_PREFIX: &str = "/api/v1";

/// Shared state of the handlers.
#[derive(Clone, Debug)]
pub struct AppState {
    store: Arc<Store>,
    token: Arc<str>,
    sdc: Option<Arc<std::sync::Mutex<Sdc>>>,
    wrr: Arc<std::sync::Mutex<Wrr>>,
    gateways: Option<Arc<crate::gwc::Registry>>,
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

    /// Serves the gateways of the gateway channel ([`crate::gwc`]); without it
    /// `GET /api/v1/gateways` is an empty list.
    pub fn with_gateways(mut self, registry: Arc<crate::gwc::Registry>) -> Self {
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

/// The operations of the API, one per route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Liveness and database state.
    Health,
    /// The OpenAPI document.
    OpenApi,
    /// The whole inventory.
    GetInventory,
    /// Replace everything.
    Import,
    /// List branches.
    ListBranches,
    /// Add a branch.
    AddBranch,
    /// One branch.
    GetBranch,
    /// Modify a branch.
    ModifyBranch,
    /// Remove a branch.
    RemoveBranch,
    /// Add a WAN port.
    AddPort,
    /// Modify a WAN port.
    ModifyPort,
    /// Remove a WAN port.
    RemovePort,
    /// Compiled flows of one gateway.
    Flows,
    /// All path groups.
    ListGroups,
    /// Path groups of one ordered pair.
    ListPairGroups,
    /// Set one path group.
    SetGroup,
    /// Remove one path group.
    RemoveGroup,
    /// The PC settings.
    GetSettings,
    /// Replace the PC settings.
    SetSettings,
    /// Statistics collected by the SDC.
    Stats,
    /// WRR weights of every ordered pair.
    Weights,
    /// WRR weights of one ordered pair.
    PairWeights,
    /// State of the adaptive path groups.
    Adaptive,
    /// Gateways of the gateway channel.
    Gateways,
    /// A one-time enrolment token.
    NewEnrolToken,
    /// Certificates the CA issued.
    Certificates,
    /// Revoke certificates.
    Revoke,
    /// Add a REST API token.
    AddToken,
    /// List the REST API tokens.
    ListTokens,
    /// Remove a REST API token.
    RemoveToken,
}

/// One route: method, path (axum and OpenAPI share the `{param}` syntax) and its documentation.
#[derive(Clone, Debug)]
pub struct Route {
    /// HTTP method.
    pub method: Method,
    /// Path template.
    pub path: &'static str,
    /// The operation.
    pub op: Op,
    /// Whether the bearer token is required.
    pub auth: bool,
    /// One-line summary.
    pub summary: &'static str,
    /// Request body schema (name under `components/schemas`), if any.
    pub request: Option<&'static str>,
    /// Success status.
    pub status: u16,
    /// Success body schema, if any.
    pub response: Option<&'static str>,
    /// OpenAPI tag.
    pub tag: &'static str,
}

macro_rules! route {
    ($m:ident $path:literal $op:ident auth=$auth:literal $tag:literal $summary:literal
     req=$req:expr, $status:literal $resp:expr) => {
        Route {
            method: Method::$m,
            path: $path,
            op: Op::$op,
            auth: $auth,
            summary: $summary,
            request: $req,
            status: $status,
            response: $resp,
            tag: $tag,
        }
    };
}

/// Every route of the API.
pub const ROUTES: &[Route] = &[
    route!(GET "/health" Health auth=false "meta" "Liveness and database schema version (no token needed)"
        req=None, 200 Some("Health")),
    route!(GET "/openapi.json" OpenApi auth=false "meta" "This OpenAPI 3 document (no token needed)"
        req=None, 200 None),
    route!(GET "/api/v1/inventory" GetInventory auth=true "inventory" "The whole inventory (branches with WAN ports)"
        req=None, 200 Some("InventoryFile")),
    route!(POST "/api/v1/import" Import auth=true "inventory" "Replace branches, path groups (and settings if given) in one transaction"
        req=Some("Import"), 200 Some("Summary")),
    route!(GET "/api/v1/branches" ListBranches auth=true "branches" "List branches"
        req=None, 200 Some("BranchList")),
    route!(POST "/api/v1/branches" AddBranch auth=true "branches" "Add a branch with its WAN ports"
        req=Some("Branch"), 201 Some("Branch")),
    route!(GET "/api/v1/branches/{branch}" GetBranch auth=true "branches" "One branch"
        req=None, 200 Some("Branch")),
    route!(PATCH "/api/v1/branches/{branch}" ModifyBranch auth=true "branches" "Change a branch's name or LAN prefixes"
        req=Some("BranchPatch"), 200 Some("Branch")),
    route!(DELETE "/api/v1/branches/{branch}" RemoveBranch auth=true "branches" "Remove a branch (refused while path groups use it)"
        req=None, 204 None),
    route!(POST "/api/v1/branches/{branch}/ports" AddPort auth=true "ports" "Add the next WAN port to a branch"
        req=Some("NewPort"), 201 Some("WanPort")),
    route!(PATCH "/api/v1/branches/{branch}/ports/{port}" ModifyPort auth=true "ports" "Change a WAN port"
        req=Some("PortPatch"), 200 Some("WanPort")),
    route!(DELETE "/api/v1/branches/{branch}/ports/{port}" RemovePort auth=true "ports" "Remove the last WAN port of a branch (refused while path groups use it)"
        req=None, 204 None),
    route!(GET "/api/v1/branches/{branch}/flows" Flows auth=true "flows" "The compiled flow table of the branch's OVS (swap::compile), read-only"
        req=None, 200 Some("Flows")),
    route!(GET "/api/v1/path-groups" ListGroups auth=true "path-groups" "All path groups"
        req=None, 200 Some("PathGroupList")),
    route!(GET "/api/v1/path-groups/{source}/{destination}" ListPairGroups auth=true "path-groups" "Path groups of one ordered branch pair"
        req=None, 200 Some("PathGroupList")),
    route!(PUT "/api/v1/path-groups/{source}/{destination}/{group}" SetGroup auth=true "path-groups" "Add or replace one path group (members in notation `1a>4a>4b>2a` or structured)"
        req=Some("SetPathGroup"), 200 Some("PathGroup")),
    route!(DELETE "/api/v1/path-groups/{source}/{destination}/{group}" RemoveGroup auth=true "path-groups" "Remove one path group"
        req=None, 204 None),
    route!(GET "/api/v1/settings" GetSettings auth=true "settings" "Settings of the automatic path configuration"
        req=None, 200 Some("Settings")),
    route!(PUT "/api/v1/settings" SetSettings auth=true "settings" "Replace the settings"
        req=Some("Settings"), 200 Some("Settings")),
    route!(GET "/api/v1/stats" Stats auth=true "stats" "Statistics (SDC): per switch (flows, ports), per member path, path group and branch pair"
        req=None, 200 Some("Stats")),
    route!(GET "/api/v1/weights" Weights auth=true "weights" "WRR weights per path group of every ordered branch pair (w = c / sum c from the SDC's smoothed rates, else configured capacities), integers summing to `scale`"
        req=None, 200 Some("WeightList")),
    route!(GET "/api/v1/weights/{source}/{destination}" PairWeights auth=true "weights" "WRR weights of the path groups of one ordered branch pair"
        req=None, 200 Some("PairWeights")),
    route!(GET "/api/v1/adaptive" Adaptive auth=true "path-groups" "Adaptive path groups (seed 003): per ordered pair its achieved rate, achievable rate, status and last change"
        req=None, 200 Some("AdaptiveList")),
    route!(GET "/api/v1/gateways" Gateways auth=true "gateways" "Gateways on the gateway channel (docs/gwchan.md): connected or not, config version sent and acked, last report"
        req=None, 200 Some("GatewayList")),
    route!(POST "/api/v1/enrol-tokens" NewEnrolToken auth=true "ca" "A one-time enrolment token for a branch (shown once; only its SHA-256 is stored)"
        req=Some("NewEnrolToken"), 201 Some("EnrolToken")),
    route!(GET "/api/v1/certificates" Certificates auth=true "ca" "Certificates the gateway CA issued (serial, branch, expiry, revocation)"
        req=None, 200 Some("CertificateList")),
    route!(POST "/api/v1/tokens" AddToken auth=true "tokens" "Add a REST API token with a role (read-only: GET routes; admin: all); the token is shown once, only its SHA-256 is stored"
        req=Some("NewApiToken"), 201 Some("ApiToken")),
    route!(GET "/api/v1/tokens" ListTokens auth=true "tokens" "REST API tokens: names and roles (never the tokens)"
        req=None, 200 Some("ApiTokenList")),
    route!(DELETE "/api/v1/tokens/{name}" RemoveToken auth=true "tokens" "Remove a REST API token"
        req=None, 204 None),
    route!(POST "/api/v1/revoke" Revoke auth=true "ca" "Revoke every certificate of a branch, or one serial; the CRL is re-signed"
        req=Some("Revoke"), 200 Some("Revoked")),
];

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
        Op::GetInventory => on(f, get_inventory),
        Op::Import => on(f, import),
        Op::ListBranches => on(f, list_branches),
        Op::AddBranch => on(f, add_branch),
        Op::GetBranch => on(f, get_branch),
        Op::ModifyBranch => on(f, modify_branch),
        Op::RemoveBranch => on(f, remove_branch),
        Op::AddPort => on(f, add_port),
        Op::ModifyPort => on(f, modify_port),
        Op::RemovePort => on(f, remove_port),
        Op::Flows => on(f, flows),
        Op::ListGroups => on(f, list_groups),
        Op::ListPairGroups => on(f, list_pair_groups),
        Op::SetGroup => on(f, set_group),
        Op::RemoveGroup => on(f, remove_group),
        Op::GetSettings => on(f, get_settings),
        Op::SetSettings => on(f, set_settings),
        Op::Stats => on(f, stats),
        Op::Weights => on(f, weights),
        Op::PairWeights => on(f, pair_weights),
        Op::Adaptive => on(f, adaptive),
        Op::Gateways => on(f, gateways),
        Op::NewEnrolToken => on(f, new_enrol_token),
        Op::Certificates => on(f, certificates),
        Op::Revoke => on(f, revoke),
        Op::AddToken => on(f, add_token),
        Op::ListTokens => on(f, list_tokens),
        Op::RemoveToken => on(f, remove_token),
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

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        let status = match &e {
            StoreError::NoBranch(_) | StoreError::NoPort(_) | StoreError::NoGroup { .. } => {
                StatusCode::NOT_FOUND
            }
            StoreError::BranchExists(_) | StoreError::InUse { .. } => StatusCode::CONFLICT,
            e if e.is_input() => StatusCode::UNPROCESSABLE_ENTITY,
            _ => {
                tracing::error!(error = %e, "database failure");
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        Self::new(status, e.to_string())
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

// ---------------------------------------------------------------------------------------------
// Views
// ---------------------------------------------------------------------------------------------

/// `GET /health`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Health {
    /// Always `"ok"` when the database answers.
    pub status: String,
    /// Schema version of the database.
    pub schema_version: u64,
    /// Whether the OpenFlow server (OFC) runs in this process.
    pub openflow: bool,
}

/// Counts after an import.
#[derive(Debug, Serialize, Deserialize)]
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
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Import {
    /// All branches.
    pub inventory: InventoryFile,
    /// All path groups (none if absent).
    #[serde(default = "no_groups")]
    pub groups: GroupsFile,
    /// New settings (kept if absent).
    #[serde(default)]
    pub settings: Option<Settings>,
}

fn no_groups() -> GroupsFile {
    GroupsFile { groups: Vec::new() }
}

/// A member path, structured.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StructuredMember {
    /// First port, e.g. `1a`.
    pub source: String,
    /// Transits (at most one).
    #[serde(default)]
    pub transits: Vec<StructuredTransit>,
    /// Last port, e.g. `2a`.
    pub destination: String,
}

/// One transit, structured.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StructuredTransit {
    /// Where the path arrives, e.g. `4a`.
    pub ingress: String,
    /// Where it leaves, e.g. `4b` (the same port when it hairpins).
    pub egress: String,
}

/// One member in a response: both forms plus its path code.
#[derive(Debug, Serialize, Deserialize)]
pub struct MemberView {
    /// Member id S (1..=15).
    pub id: u8,
    /// The paper's notation.
    pub path: String,
    /// The path code `0xBASG` used on the wire.
    pub code: String,
    /// WAN hops.
    pub wan_hops: usize,
    /// Structured form.
    pub source: String,
    /// Structured form.
    pub transits: Vec<StructuredTransit>,
    /// Structured form.
    pub destination: String,
}

/// One path group in a response.
#[derive(Debug, Serialize, Deserialize)]
pub struct GroupView {
    /// Source branch A.
    pub source: u8,
    /// Destination branch B.
    pub destination: u8,
    /// Group id G.
    pub id: u8,
    /// The port the destination MPA listens on for this group, `0xB00G`.
    pub listen_port: String,
    /// Members in id order.
    pub members: Vec<MemberView>,
}

impl GroupView {
    fn of(g: &PathGroup) -> Self {
        Self {
            source: g.source.get(),
            destination: g.destination.get(),
            id: g.id.get(),
            listen_port: format!(
                "{:#06x}",
                crate::path_group::listen_port(g.destination, g.id)
            ),
            members: g
                .members
                .iter()
                .map(|(&id, m)| MemberView {
                    id: id.get(),
                    path: m.to_string(),
                    code: format!("{:#06x}", g.code(id).port()),
                    wan_hops: m.wan_hops(),
                    source: m.source().to_string(),
                    transits: m
                        .transits()
                        .iter()
                        .map(|t| StructuredTransit {
                            ingress: t.ingress.to_string(),
                            egress: t.egress.to_string(),
                        })
                        .collect(),
                    destination: m.destination().to_string(),
                })
                .collect(),
        }
    }
}

/// `PUT /api/v1/path-groups/{source}/{destination}/{group}`: `members` holds strings in the
/// paper's notation or [`StructuredMember`] objects (mixed is fine).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetGroup {
    /// Member paths; the first is member 1.
    pub members: Vec<Value>,
}

fn member_from_value(i: usize, v: Value) -> Result<MemberPath, ApiError> {
    let at = |e: &dyn std::fmt::Display| ApiError::invalid(format!("members[{i}]: {e}"));
    match v {
        Value::String(s) => s.parse().map_err(|e| at(&e)),
        Value::Object(_) => {
            let m: StructuredMember = serde_json::from_value(v).map_err(|e| at(&e))?;
            let port = |field: &str, s: &str| {
                s.parse::<PortRef>()
                    .map_err(|e| at(&format_args!("{field}: {e}")))
            };
            let transits = m
                .transits
                .iter()
                .enumerate()
                .map(|(k, t)| {
                    Ok(Transit {
                        ingress: port(&format!("transits[{k}].ingress"), &t.ingress)?,
                        egress: port(&format!("transits[{k}].egress"), &t.egress)?,
                    })
                })
                .collect::<Result<Vec<_>, ApiError>>()?;
            MemberPath::new(
                port("source", &m.source)?,
                transits,
                port("destination", &m.destination)?,
            )
            .map_err(|e| at(&e))
        }
        _ => Err(at(
            &"expected a string like \"1a>4a>4b>2a\" or an object {source, transits, destination}",
        )),
    }
}

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

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

async fn health(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    let schema_version = blocking(&state, |s| s.schema_version()).await?;
    Ok(Json(Health {
        status: "ok".into(),
        schema_version,
        openflow: state.sdc.is_some(),
    }))
}

async fn openapi() -> Json<Value> {
    Json(super::openapi::document())
}

async fn get_inventory(State(state): State<AppState>) -> Result<Json<InventoryFile>, ApiError> {
    let c = blocking(&state, |s| s.catalog()).await?;
    Ok(Json(c.inventory().to_file()))
}

async fn import(
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

async fn list_branches(State(state): State<AppState>) -> Result<Json<Vec<Branch>>, ApiError> {
    let c = blocking(&state, |s| s.catalog()).await?;
    Ok(Json(c.inventory().branches().cloned().collect()))
}

fn branch_of(c: &Catalog, id: BranchId) -> Result<Branch, ApiError> {
    c.inventory()
        .branch(id)
        .cloned()
        .ok_or_else(|| StoreError::NoBranch(id).into())
}

async fn add_branch(
    State(state): State<AppState>,
    ApiJson(branch): ApiJson<Branch>,
) -> Result<(StatusCode, Json<Branch>), ApiError> {
    let id = branch.id;
    let c = blocking(&state, move |s| s.update(|c| c.add_branch(branch))).await?;
    tracing::info!(branch = id.get(), "branch added");
    Ok((StatusCode::CREATED, Json(branch_of(&c, id)?)))
}

async fn get_branch(
    State(state): State<AppState>,
    Path(branch): Path<String>,
) -> Result<Json<Branch>, ApiError> {
    let id = parse_branch("branch", &branch)?;
    let c = blocking(&state, |s| s.catalog()).await?;
    Ok(Json(branch_of(&c, id)?))
}

async fn modify_branch(
    State(state): State<AppState>,
    Path(branch): Path<String>,
    ApiJson(patch): ApiJson<BranchPatch>,
) -> Result<Json<Branch>, ApiError> {
    let id = parse_branch("branch", &branch)?;
    let c = blocking(&state, move |s| s.update(|c| c.modify_branch(id, patch))).await?;
    tracing::info!(branch = id.get(), "branch modified");
    Ok(Json(branch_of(&c, id)?))
}

async fn remove_branch(
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
        .ok_or_else(|| StoreError::NoPort(port).into())
}

async fn add_port(
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
        .ok_or(StoreError::NoBranch(id))?;
    tracing::info!(branch = id.get(), port = %added.port, "WAN port added");
    Ok((StatusCode::CREATED, Json(added)))
}

async fn modify_port(
    State(state): State<AppState>,
    Path((branch, port)): Path<(String, String)>,
    ApiJson(patch): ApiJson<PortPatch>,
) -> Result<Json<WanPort>, ApiError> {
    let port = parse_port(parse_branch("branch", &branch)?, &port)?;
    let c = blocking(&state, move |s| s.update(|c| c.modify_port(port, patch))).await?;
    tracing::info!(port = %port, "WAN port modified");
    Ok(Json(port_of(&c, port)?))
}

async fn remove_port(
    State(state): State<AppState>,
    Path((branch, port)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let port = parse_port(parse_branch("branch", &branch)?, &port)?;
    blocking(&state, move |s| s.update(|c| c.remove_port(port))).await?;
    tracing::info!(port = %port, "WAN port removed");
    Ok(StatusCode::NO_CONTENT)
}

async fn flows(
    State(state): State<AppState>,
    Path(branch): Path<String>,
) -> Result<Json<FlowsView>, ApiError> {
    let id = parse_branch("branch", &branch)?;
    let c = blocking(&state, |s| s.catalog()).await?;
    if c.inventory().branch(id).is_none() {
        return Err(StoreError::NoBranch(id).into());
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

async fn list_groups(State(state): State<AppState>) -> Result<Json<Vec<GroupView>>, ApiError> {
    let c = blocking(&state, |s| s.catalog()).await?;
    Ok(Json(c.groups().groups().map(GroupView::of).collect()))
}

async fn list_pair_groups(
    State(state): State<AppState>,
    Path((source, destination)): Path<(String, String)>,
) -> Result<Json<Vec<GroupView>>, ApiError> {
    let a = parse_branch("source", &source)?;
    let b = parse_branch("destination", &destination)?;
    let c = blocking(&state, |s| s.catalog()).await?;
    for id in [a, b] {
        if c.inventory().branch(id).is_none() {
            return Err(StoreError::NoBranch(id).into());
        }
    }
    let groups = c
        .groups()
        .pair(a, b)
        .map(|m| m.values().map(GroupView::of).collect())
        .unwrap_or_default();
    Ok(Json(groups))
}

async fn set_group(
    State(state): State<AppState>,
    Path((source, destination, group)): Path<(String, String, String)>,
    ApiJson(body): ApiJson<SetGroup>,
) -> Result<Json<GroupView>, ApiError> {
    let a = parse_branch("source", &source)?;
    let b = parse_branch("destination", &destination)?;
    let g = parse_group(&group)?;
    let members = body
        .members
        .into_iter()
        .enumerate()
        .map(|(i, v)| member_from_value(i, v))
        .collect::<Result<Vec<_>, _>>()?;
    let c = blocking(&state, move |s| s.update(|c| c.set_group(a, b, g, members))).await?;
    let view = c
        .groups()
        .group(a, b, g)
        .map(GroupView::of)
        .ok_or(StoreError::NoGroup {
            source_branch: a,
            destination: b,
            group: g,
        })?;
    tracing::info!(
        source = a.get(),
        destination = b.get(),
        pg = g.get(),
        members = view.members.len(),
        "path group set"
    );
    Ok(Json(view))
}

async fn remove_group(
    State(state): State<AppState>,
    Path((source, destination, group)): Path<(String, String, String)>,
) -> Result<StatusCode, ApiError> {
    let a = parse_branch("source", &source)?;
    let b = parse_branch("destination", &destination)?;
    let g = parse_group(&group)?;
    blocking(&state, move |s| s.update(|c| c.remove_group(a, b, g))).await?;
    tracing::info!(
        source = a.get(),
        destination = b.get(),
        pg = g.get(),
        "path group removed"
    );
    Ok(StatusCode::NO_CONTENT)
}

async fn get_settings(State(state): State<AppState>) -> Result<Json<Settings>, ApiError> {
    let c = blocking(&state, |s| s.catalog()).await?;
    Ok(Json(c.settings().clone()))
}

async fn set_settings(
    State(state): State<AppState>,
    ApiJson(settings): ApiJson<Settings>,
) -> Result<Json<Settings>, ApiError> {
    let c = blocking(&state, move |s| s.update(|c| c.set_settings(settings))).await?;
    tracing::info!("settings changed");
    Ok(Json(c.settings().clone()))
}

async fn stats(State(state): State<AppState>) -> Json<Value> {
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
#[derive(Debug, Serialize, Deserialize)]
pub struct AdaptiveList {
    /// Whether the settings switch it on.
    pub enabled: bool,
    /// Every pair it has looked at, by (source, destination).
    pub pairs: Vec<crate::adaptive::PairView>,
}

async fn adaptive(State(state): State<AppState>) -> Result<Json<AdaptiveList>, ApiError> {
    let c = blocking(&state, |s| s.catalog()).await?;
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
#[derive(Debug, Serialize, Deserialize)]
pub struct WeightList {
    /// Sum of the weights of each pair.
    pub scale: u32,
    /// Whether measured rates can feed the weights (the SDC runs in this process).
    pub measured: bool,
    /// Every ordered pair with path groups, by (source, destination).
    pub pairs: Vec<PairWeights>,
}

/// Brings the WRR state up to the current catalog and returns what it publishes.
async fn current_weights(state: &AppState) -> Result<Vec<PairWeights>, ApiError> {
    let c = blocking(state, |s| s.catalog()).await?;
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

async fn weights(State(state): State<AppState>) -> Result<Json<WeightList>, ApiError> {
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

async fn pair_weights(
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

async fn gateways(State(state): State<AppState>) -> Json<crate::gwc::GatewayList> {
    Json(
        state
            .gateways
            .as_ref()
            .map(|r| r.list())
            .unwrap_or_default(),
    )
}

/// `POST /api/v1/enrol-tokens`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewEnrolToken {
    /// The branch the token enrols.
    pub branch: u8,
    /// Validity in seconds (default 3600, at most 7 days).
    #[serde(default)]
    pub ttl_s: Option<u64>,
}

/// `POST /api/v1/revoke`: exactly one of the two.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RevokeRequest {
    /// Every certificate of this branch.
    #[serde(default)]
    pub branch: Option<u8>,
    /// This serial.
    #[serde(default)]
    pub serial: Option<u64>,
}

/// The answer of `POST /api/v1/revoke`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Revoked {
    /// The serials revoked by this call (empty: already revoked or unknown).
    pub revoked: Vec<u64>,
}

/// `GET /api/v1/certificates`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CertificateList {
    /// Every certificate the CA issued (branch 0: the controller's own).
    pub certificates: Vec<crate::store::creds::CertRow>,
}

/// `POST /api/v1/tokens`.
#[derive(Clone, Debug, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Clone, Serialize, Deserialize)]
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
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ApiTokenList {
    /// Every stored token's name, role, expiry and whether it expired (the config's
    /// bootstrap token is not listed).
    pub tokens: Vec<ApiTokenInfo>,
}

/// Longest token name.
pub const MAX_TOKEN_NAME: usize = 64;

async fn add_token(
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

async fn list_tokens(State(state): State<AppState>) -> Result<Json<ApiTokenList>, ApiError> {
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

async fn remove_token(
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

async fn ca_blocking<T: Send + 'static>(
    state: &AppState,
    f: impl FnOnce(&crate::authority::Authority) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let a = authority(state)?;
    tokio::task::spawn_blocking(move || f(&a))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("worker: {e}")))?
}

async fn new_enrol_token(
    State(state): State<AppState>,
    body: Result<Json<NewEnrolToken>, JsonRejection>,
) -> Result<(StatusCode, Json<crate::authority::NewToken>), ApiError> {
    let Json(req) = body.map_err(ApiError::from)?;
    let b = BranchId::new(req.branch)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))?;
    let known = blocking(&state, move |s| {
        Ok(s.catalog()?.inventory().branch(b).is_some())
    })
    .await?;
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

async fn certificates(State(state): State<AppState>) -> Result<Json<CertificateList>, ApiError> {
    authority(&state)?;
    let certificates = blocking(&state, |s| s.certs()).await?;
    Ok(Json(CertificateList { certificates }))
}

async fn revoke(
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

    #[test]
    fn member_forms() {
        let a = member_from_value(0, json!("1b>4a>4b>2a")).unwrap();
        let b = member_from_value(
            0,
            json!({"source": "1b", "transits": [{"ingress": "4a", "egress": "4b"}], "destination": "2a"}),
        )
        .unwrap();
        assert_eq!(a, b);
        let e = member_from_value(3, json!("1a>9z")).unwrap_err();
        assert!(e.message.starts_with("members[3]: "), "{}", e.message);
        let e = member_from_value(1, json!({"source": "1a", "destination": "2x"})).unwrap_err();
        assert!(e.message.contains("destination"), "{}", e.message);
        let e = member_from_value(1, json!({"source": "1a", "dest": "2a"})).unwrap_err();
        assert!(e.message.contains("unknown field `dest`"), "{}", e.message);
        assert!(member_from_value(0, json!(5)).is_err());
    }
}
