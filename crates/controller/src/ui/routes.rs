//! UI (seed 000 §IV): the table of REST routes, [`ROUTES`], the one source of both the axum
//! router ([`super::api::router`]) and the OpenAPI document ([`super::openapi::document`]).
//!
//! Plain data at the bottom of `ui`: it imports neither `api` nor `openapi`.
use axum::http::Method;

/// Prefix of every authenticated route.
pub const API_PREFIX: &str = "/api/v1";

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
    /// Rates of the last minutes and adaptive events (the dashboard's history).
    History,
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
    /// Prometheus metrics (text exposition).
    Metrics,
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
    route!(GET "/api/v1/history" History auth=true "stats" "Rates of the last minutes per member path, path group and pair (bounded rings in memory, one point per period) and the adaptive path-group events; what the web dashboard /ui/ draws"
        req=None, 200 Some("History")),
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
    route!(GET "/metrics" Metrics auth=true "meta" "Prometheus metrics in the OpenMetrics text format (docs/metrics.md); a read-only token is enough"
        req=None, 200 None),
    route!(POST "/api/v1/revoke" Revoke auth=true "ca" "Revoke every certificate of a branch, or one serial; the CRL is re-signed"
        req=Some("Revoke"), 200 Some("Revoked")),
];

/// The `{name}` parameters of a path template, in order.
pub fn path_params(path: &str) -> Vec<&str> {
    path.split('/')
        .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .collect()
}
