//! The REST API in process (tower `oneshot`, no socket): auth, every route, CRUD, bad input.
// Test helpers outside #[test] functions unwrap too (clippy.toml only covers #[test] bodies).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use controller::inventory::{BranchId, Inventory};
use controller::path_group::PathGroups;
use controller::store::Store;
use controller::swap;
use controller::ui::api::{
    derived_schemas, openapi_document as document, router, AppState, ROUTES,
};
use controller::ui::openapi::path_params;
use serde_json::{json, Value};
use tower::ServiceExt;

const TOKEN: &str = "test-token-0123456789";
const INVENTORY: &str = include_str!("../../../examples/inventory-paper.toml");
const PATHS: &str = include_str!("../../../examples/paths-paper-table2.toml");

struct Api {
    app: Router,
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
}

impl Api {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ssc.redb");
        let store = Arc::new(Store::open(&path).unwrap());
        Self {
            app: router(AppState::new(store, TOKEN), 1 << 20),
            _dir: dir,
            path,
        }
    }

    async fn raw(&self, req: Request<Body>) -> (StatusCode, Value) {
        let resp = self.app.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        // `GET /metrics` answers the Prometheus text format, everything else JSON.
        let text = resp.headers().get(header::CONTENT_TYPE).is_some_and(|c| {
            c.as_bytes().starts_with(b"application/openmetrics-text")
                || c.as_bytes().starts_with(b"text/plain")
        });
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 24)
            .await
            .unwrap();
        let v = if bytes.is_empty() {
            Value::Null
        } else if text {
            Value::String(String::from_utf8(bytes.to_vec()).unwrap())
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|e| panic!("{status}: not JSON ({e}): {bytes:?}"))
        };
        (status, v)
    }

    async fn call(&self, method: Method, uri: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut req = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
        let body = match body {
            Some(b) => {
                req = req.header(header::CONTENT_TYPE, "application/json");
                Body::from(b.to_string())
            }
            None => Body::empty(),
        };
        self.raw(req.body(body).unwrap()).await
    }

    async fn get(&self, uri: &str) -> (StatusCode, Value) {
        self.call(Method::GET, uri, None).await
    }

    async fn import_paper(&self) {
        let inventory: Value = toml::from_str(INVENTORY).unwrap();
        let groups: Value = toml::from_str(PATHS).unwrap();
        let (s, v) = self
            .call(
                Method::POST,
                "/api/v1/import",
                Some(json!({"inventory": inventory, "groups": groups})),
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(
            v,
            json!({"branches": 5, "ports": 10, "groups": 4, "flows": 140})
        );
    }
}

fn sample_uri(path: &str) -> String {
    let mut out = path.to_owned();
    for p in path_params(path) {
        let value = match p {
            "port" => "b",
            "destination" => "2",
            "group" => "1",
            _ => "1",
        };
        out = out.replace(&format!("{{{p}}}"), value);
    }
    out
}

fn error_of(v: &Value) -> &str {
    v["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error message in {v}"))
}

#[tokio::test]
async fn every_route_is_in_the_openapi_document() {
    let api = Api::new();
    let (s, doc) = api
        .raw(Request::get("/openapi.json").body(Body::empty()).unwrap())
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(doc, document());
    // 3.1: the schemas derived with utoipa 5 are JSON Schema 2020-12.
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().unwrap();
    let mut documented = 0;
    for (path, ops) in paths {
        documented += ops.as_object().unwrap().len();
        assert!(
            ROUTES.iter().any(|r| r.path == path),
            "{path} is documented but not routed"
        );
    }
    assert_eq!(
        documented,
        ROUTES.len(),
        "every operation documented exactly once"
    );
    for r in ROUTES {
        let op = &paths[r.path][r.method.as_str().to_ascii_lowercase()];
        assert!(
            op.is_object(),
            "{} {} missing from /openapi.json",
            r.method,
            r.path
        );
        assert!(
            op["responses"][r.status.to_string()].is_object(),
            "{} {}",
            r.method,
            r.path
        );
        let params: Vec<&str> = op["parameters"]
            .as_array()
            .map(|a| a.iter().map(|p| p["name"].as_str().unwrap()).collect())
            .unwrap_or_default();
        assert_eq!(params, path_params(r.path), "{} {}", r.method, r.path);
        if let Some(req) = r.request {
            assert!(
                doc["components"]["schemas"][req].is_object(),
                "schema {req}"
            );
        }
        if let Some(resp) = r.response {
            assert!(
                doc["components"]["schemas"][resp].is_object(),
                "schema {resp}"
            );
        }
        assert_eq!(op["security"].as_array().unwrap().is_empty(), !r.auth);
    }
    // Every $ref points at a schema.
    let text = doc.to_string();
    for piece in text.split("\"#/components/schemas/").skip(1) {
        let name = piece.split('"').next().unwrap();
        assert!(
            doc["components"]["schemas"][name].is_object(),
            "dangling $ref {name}"
        );
    }
}

#[tokio::test]
async fn every_documented_route_is_served() {
    let api = Api::new();
    api.import_paper().await;
    // No token: every private route answers 401 (it exists, and the token is checked first).
    for r in ROUTES.iter().filter(|r| r.auth) {
        let uri = sample_uri(r.path);
        let req = Request::builder()
            .method(r.method.clone())
            .uri(&uri)
            .body(Body::empty())
            .unwrap();
        let (s, v) = api.raw(req).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{} {uri}: {v}", r.method);
    }
    // With the token, every route reaches its handler: never the JSON fallback, never 405.
    for r in ROUTES {
        let uri = sample_uri(r.path);
        let (s, v) = api.call(r.method.clone(), &uri, Some(json!({}))).await;
        assert_ne!(s, StatusCode::METHOD_NOT_ALLOWED, "{} {uri}", r.method);
        if s == StatusCode::NOT_FOUND {
            assert!(
                !error_of(&v).starts_with("no route"),
                "{} {uri}: {v}",
                r.method
            );
        }
    }
    let (s, v) = api.get("/api/v1/nothing").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert!(
        error_of(&v).starts_with("no route GET /api/v1/nothing"),
        "{v}"
    );
}

impl Api {
    async fn with_token(
        &self,
        token: Option<&str>,
        method: Method,
        uri: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = Request::builder().method(method).uri(uri);
        if let Some(t) = token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let body = match body {
            Some(b) => {
                req = req.header(header::CONTENT_TYPE, "application/json");
                Body::from(b.to_string())
            }
            None => Body::empty(),
        };
        self.raw(req.body(body).unwrap()).await
    }
}

/// Issue #8: tokens with roles. No token 401, a read-only token reads (GET 200) but may not
/// change anything (403 with a JSON error, nothing stored), an admin token does; tokens are
/// shown once, listed by name and role only, unknown after removal (401).
#[tokio::test]
async fn tokens_with_roles_401_403_and_admin() {
    let api = Api::new();
    let branch = json!({"id": 1, "name": "x", "wan": [{"port": "a", "address": "198.18.10.2/24",
                        "gateway": "198.18.10.1", "capacity_mbps": 1}]});
    let add = |name: &str, role: &str| json!({"name": name, "role": role});
    // The config's token (bootstrap) is admin: it adds a read-only and an admin token.
    let (s, ro) = api
        .call(
            Method::POST,
            "/api/v1/tokens",
            Some(add("viewer", "read-only")),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{ro}");
    let ro = ro["token"].as_str().unwrap().to_owned();
    assert_eq!(ro.len(), 64);
    let (s, adm) = api
        .call(Method::POST, "/api/v1/tokens", Some(add("ops", "admin")))
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let adm = adm["token"].as_str().unwrap().to_owned();
    // Names are unique; bad names and roles are refused.
    let (s, _) = api
        .call(Method::POST, "/api/v1/tokens", Some(add("ops", "admin")))
        .await;
    assert_eq!(s, StatusCode::CONFLICT);
    let (s, _) = api
        .call(Method::POST, "/api/v1/tokens", Some(add("a b", "admin")))
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    let (s, _) = api
        .call(Method::POST, "/api/v1/tokens", Some(add("x", "root")))
        .await;
    assert!(s.is_client_error(), "{s}");

    // No token: 401.
    let (s, v) = api
        .with_token(None, Method::POST, "/api/v1/branches", Some(branch.clone()))
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{v}");
    // Read-only: GET ok, POST / PUT / DELETE 403 with a JSON error, nothing stored.
    let (s, _) = api
        .with_token(Some(&ro), Method::GET, "/api/v1/branches", None)
        .await;
    assert_eq!(s, StatusCode::OK);
    for (m, uri, body) in [
        (Method::POST, "/api/v1/branches", Some(branch.clone())),
        (Method::PUT, "/api/v1/settings", Some(json!({}))),
        (Method::DELETE, "/api/v1/branches/1", None),
        (Method::POST, "/api/v1/tokens", Some(add("mine", "admin"))),
    ] {
        let (s, v) = api.with_token(Some(&ro), m.clone(), uri, body).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{m} {uri}: {v}");
        assert!(error_of(&v).contains("needs an admin token"), "{v}");
    }
    assert_eq!(api.get("/api/v1/branches").await.1, json!([]));
    // Admin: POST ok.
    let (s, v) = api
        .with_token(Some(&adm), Method::POST, "/api/v1/branches", Some(branch))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    // The list shows names and roles, never a token or its hash.
    let (s, v) = api
        .with_token(Some(&ro), Method::GET, "/api/v1/tokens", None)
        .await;
    assert_eq!(s, StatusCode::OK);
    let text = v.to_string();
    assert!(!text.contains(&ro) && !text.contains(&adm), "{text}");
    let names: Vec<(&str, &str)> = v["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap(), t["role"].as_str().unwrap()))
        .collect();
    assert_eq!(names, vec![("ops", "admin"), ("viewer", "read-only")]);
    // Removed: the token is unknown (401).
    let (s, _) = api
        .with_token(Some(&adm), Method::DELETE, "/api/v1/tokens/viewer", None)
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, _) = api
        .with_token(Some(&ro), Method::GET, "/api/v1/branches", None)
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, _) = api
        .with_token(Some(&adm), Method::DELETE, "/api/v1/tokens/viewer", None)
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn tokens_expire_and_are_listed_with_their_expiry() {
    let api = Api::new();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let add = |body: Value| api.call(Method::POST, "/api/v1/tokens", Some(body));
    // Default: 30 days.
    let (s, d) = add(json!({"name": "default", "role": "read-only"})).await;
    assert_eq!(s, StatusCode::CREATED, "{d}");
    let exp = d["expires"].as_u64().unwrap();
    assert!(
        (now + 30 * 86_400..=now + 30 * 86_400 + 5).contains(&exp),
        "{exp}"
    );
    // Never, only when asked for.
    let (s, n) = add(json!({"name": "forever", "role": "admin", "never_expires": true})).await;
    assert_eq!(s, StatusCode::CREATED, "{n}");
    assert!(n["expires"].is_null(), "{n}");
    // Out of range, and both at once: 422, nothing stored.
    for bad in [
        json!({"name": "zero", "role": "admin", "ttl_s": 0}),
        json!({"name": "long", "role": "admin", "ttl_s": 367 * 86_400}),
        json!({"name": "both", "role": "admin", "ttl_s": 60, "never_expires": true}),
    ] {
        let (s, v) = add(bad.clone()).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {v}");
    }
    // A 1 s token works, then is refused with 401 "expired".
    let (s, short) = add(json!({"name": "short", "role": "admin", "ttl_s": 1})).await;
    assert_eq!(s, StatusCode::CREATED, "{short}");
    let short = short["token"].as_str().unwrap().to_owned();
    let (s, _) = api
        .with_token(Some(&short), Method::GET, "/api/v1/branches", None)
        .await;
    assert_eq!(s, StatusCode::OK);
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let (s, v) = api
        .with_token(Some(&short), Method::GET, "/api/v1/branches", None)
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{v}");
    assert!(error_of(&v).contains("expired"), "{v}");
    let (s, v) = api
        .with_token(
            Some(&short),
            Method::POST,
            "/api/v1/tokens",
            Some(json!({"name": "x", "role": "admin"})),
        )
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{v}");
    // The others still work.
    let ro = d["token"].as_str().unwrap();
    let (s, _) = api
        .with_token(Some(ro), Method::GET, "/api/v1/branches", None)
        .await;
    assert_eq!(s, StatusCode::OK);
    // The list shows expiry and which one expired.
    let (s, v) = api.get("/api/v1/tokens").await;
    assert_eq!(s, StatusCode::OK);
    let rows: Vec<(String, Value, bool)> = v["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_owned(),
                t["expires"].clone(),
                t["expired"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            ("default".to_owned(), json!(exp), false),
            ("forever".to_owned(), Value::Null, false),
            ("short".to_owned(), rows[2].1.clone(), true),
        ]
    );
    assert!(rows[2].1.as_u64().unwrap() <= now + 3);
}

#[tokio::test]
async fn auth_failures_are_401() {
    let api = Api::new();
    let cases: [(Option<String>, &str); 5] = [
        (None, "missing bearer token"),
        (
            Some("Bearer wrong-token-0123456789".into()),
            "wrong bearer token",
        ),
        (Some(format!("Bearer {TOKEN}x")), "wrong bearer token"),
        (Some(format!("Basic {TOKEN}")), "missing bearer token"),
        (Some("Bearer ".into()), "wrong bearer token"),
    ];
    for (auth, msg) in cases {
        let mut req = Request::get("/api/v1/branches");
        if let Some(a) = &auth {
            req = req.header(header::AUTHORIZATION, a);
        }
        let resp = api
            .app
            .clone()
            .oneshot(req.body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{auth:?}");
        assert_eq!(resp.headers()[header::WWW_AUTHENTICATE], "Bearer");
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 16)
            .await
            .unwrap();
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert!(error_of(&v).starts_with(msg), "{auth:?}: {v}");
    }
    // A write without the token stores nothing.
    let req = Request::post("/api/v1/branches")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(
            json!({"id": 1, "name": "x", "wan": [{"port": "a", "address": "198.18.10.2/24",
                   "gateway": "198.18.10.1", "capacity_mbps": 1}]})
            .to_string(),
        ))
        .unwrap();
    assert_eq!(api.raw(req).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(api.get("/api/v1/branches").await.1, json!([]));
    // Health and the document need no token.
    let (s, v) = api
        .raw(Request::get("/health").body(Body::empty()).unwrap())
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        v,
        json!({"status": "ok", "schema_version": controller::store::SCHEMA_VERSION, "openflow": false})
    );
}

#[tokio::test]
async fn branches_and_ports_crud() {
    let api = Api::new();
    let branch = |id: u8, third: u8| {
        json!({"id": id, "name": format!("b{id}"), "lan": [format!("10.{third}.0.0/16")],
               "wan": [{"port": "a", "address": format!("198.18.{third}.2/24"),
                        "gateway": format!("198.18.{third}.1"), "capacity_mbps": 10}]})
    };
    let (s, v) = api
        .call(Method::POST, "/api/v1/branches", Some(branch(1, 10)))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["wan"][0]["kind"], "internet");
    let (s, _) = api
        .call(Method::POST, "/api/v1/branches", Some(branch(2, 20)))
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, v) = api
        .call(Method::POST, "/api/v1/branches", Some(branch(2, 30)))
        .await;
    assert_eq!(s, StatusCode::CONFLICT);
    assert_eq!(
        error_of(&v),
        "branch 2 exists already (modify it, or remove it first)"
    );

    let (s, v) = api
        .call(
            Method::PATCH,
            "/api/v1/branches/2",
            Some(json!({"name": "two"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["name"], "two");
    let (_, v) = api.get("/api/v1/branches/2").await;
    assert_eq!(v["name"], "two");

    let (s, v) = api
        .call(
            Method::POST,
            "/api/v1/branches/2/ports",
            Some(
                json!({"address": "198.18.21.2/24", "gateway": "198.18.21.1", "capacity_mbps": 5,
                        "mac": "02:00:c6:12:15:02"}),
            ),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["port"], "b");
    let (s, v) = api
        .call(
            Method::PATCH,
            "/api/v1/branches/2/ports/b",
            Some(json!({"capacity_mbps": 50, "kind": "internet"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["capacity_mbps"], 50);
    let (s, v) = api
        .call(
            Method::PATCH,
            "/api/v1/branches/2/ports/c",
            Some(json!({"capacity_mbps": 5})),
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(error_of(&v), "WAN port 2c does not exist");
    let (s, v) = api
        .call(Method::DELETE, "/api/v1/branches/2/ports/a", None)
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        error_of(&v).contains("only the last WAN port `b` can be removed"),
        "{v}"
    );

    // A group using 2b blocks its removal (409), then goes.
    let (s, v) = api
        .call(
            Method::PUT,
            "/api/v1/path-groups/1/2/0",
            Some(json!({"members": ["1a>2b"]})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, v) = api
        .call(Method::DELETE, "/api/v1/branches/2/ports/b", None)
        .await;
    assert_eq!(s, StatusCode::CONFLICT);
    assert_eq!(
        error_of(&v),
        "WAN port 2b is used by path groups 1>2 #0; remove or change them first"
    );
    let (s, v) = api.call(Method::DELETE, "/api/v1/branches/1", None).await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    assert_eq!(
        api.call(Method::DELETE, "/api/v1/path-groups/1/2/0", None)
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        api.call(Method::DELETE, "/api/v1/path-groups/1/2/0", None)
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        api.call(Method::DELETE, "/api/v1/branches/2/ports/b", None)
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        api.call(Method::DELETE, "/api/v1/branches/1", None).await.0,
        StatusCode::NO_CONTENT
    );
    let (s, v) = api.get("/api/v1/branches/1").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(error_of(&v), "branch 1 does not exist");
    let (_, v) = api.get("/api/v1/branches").await;
    assert_eq!(v.as_array().unwrap().len(), 1);
    assert_eq!(v[0]["wan"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn bad_input_is_4xx_with_a_clear_message_and_nothing_is_stored() {
    let api = Api::new();
    api.import_paper().await;
    let (_, before) = api.get("/api/v1/inventory").await;
    let base = |id: Value| {
        json!({"id": id, "name": "new", "lan": ["198.19.6.0/24"],
               "wan": [{"port": "a", "address": "198.18.60.2/24", "gateway": "198.18.60.1",
                        "capacity_mbps": 40}]})
    };
    let mut overlap = base(json!(6));
    overlap["lan"] = json!(["198.19.0.0/16"]);
    let mut dup_addr = base(json!(6));
    dup_addr["wan"][0]["address"] = json!("198.18.10.2/24");
    dup_addr["wan"][0]["gateway"] = json!("198.18.10.1");
    let mut unknown = base(json!(6));
    unknown["wan"][0]["speed"] = json!(1);
    let mut zero = base(json!(6));
    zero["wan"][0]["capacity_mbps"] = json!(0);
    let cases = [
        (base(json!(0)), "branch id 0 is out of range 1..=250"),
        (
            base(json!(16)),
            "branch 16 does not fit the paper's port plan 0xBASG (branch ids 1..=15)",
        ),
        (
            overlap,
            "LAN prefix 198.19.1.0/24 of branch 1 overlaps 198.19.0.0/16 of branch 6",
        ),
        (
            dup_addr,
            "WAN address 198.18.10.2 is used by ports 1a and 6a",
        ),
        (unknown, "unknown field `speed`"),
        (zero, "port 6a: capacity_mbps must be at least 1"),
    ];
    for (body, msg) in cases {
        let (s, v) = api.call(Method::POST, "/api/v1/branches", Some(body)).await;
        assert!(s.is_client_error(), "{s}: {v}");
        assert!(error_of(&v).contains(msg), "{msg:?} not in {v}");
    }
    // Unknown-field errors name the path to the field.
    let mut unknown = base(json!(6));
    unknown["wan"][0]["speed"] = json!(1);
    let (_, v) = api
        .call(Method::POST, "/api/v1/branches", Some(unknown))
        .await;
    assert!(error_of(&v).contains("wan[0]"), "{v}");
    // Malformed JSON.
    let req = Request::post("/api/v1/branches")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from("{\"id\": 6,"))
        .unwrap();
    assert_eq!(api.raw(req).await.0, StatusCode::BAD_REQUEST);
    // Bad path parameters.
    let (s, v) = api.get("/api/v1/branches/251").await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        error_of(&v),
        "branch: branch id 251 is out of range 1..=250"
    );
    // In range (the extended port plan) but absent.
    let (s, _) = api.get("/api/v1/branches/16").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, v) = api
        .call(Method::DELETE, "/api/v1/branches/1/ports/z", None)
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(error_of(&v).starts_with("port: "), "{v}");
    // Bad path groups.
    let put = |members: Value| {
        api.call(
            Method::PUT,
            "/api/v1/path-groups/1/2/9",
            Some(json!({ "members": members })),
        )
    };
    let (s, v) = put(json!(["1a>2a", "1a>9q"])).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        error_of(&v).starts_with("members[1]: member path \"1a>9q\", port #2"),
        "{v}"
    );
    let (s, v) = put(json!(["1a>2a", "1a>2a"])).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        error_of(&v).contains("both use the address pair (1a, 2a)"),
        "{v}"
    );
    let (s, v) = put(json!(["1a>3a"])).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        error_of(&v).contains("does not go from branch 1 to branch 2"),
        "{v}"
    );
    let (s, _) = api
        .call(
            Method::PUT,
            "/api/v1/path-groups/1/2/16",
            Some(json!({"members": ["1a>2a"]})),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    // Bad settings name the field.
    let (s, v) = api
        .call(
            Method::PUT,
            "/api/v1/settings",
            Some(json!({"groups_per_pair": 4, "mdi_threshold": 0.9, "replace_margin": 0.2, "allow_transit": true})),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(error_of(&v).starts_with("settings.mdi_threshold"), "{v}");
    // Import of an invalid inventory replaces nothing.
    let (s, v) = api
        .call(
            Method::POST,
            "/api/v1/import",
            Some(json!({"inventory": {"branches": [base(json!(1)), base(json!(2))]}})),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        error_of(&v).contains("used twice") || error_of(&v).contains("is used by"),
        "{v}"
    );

    let (_, after) = api.get("/api/v1/inventory").await;
    assert_eq!(before, after);
    assert_eq!(
        api.get("/api/v1/path-groups")
            .await
            .1
            .as_array()
            .unwrap()
            .len(),
        4
    );
    drop(api.app);
    Store::check(&api.path).unwrap();
}

#[tokio::test]
async fn path_groups_notation_and_structured_and_flows() {
    let api = Api::new();
    api.import_paper().await;
    let (s, v) = api.get("/api/v1/path-groups/1/2").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v.as_array().unwrap().len(), 4);
    let m2 = &v[0]["members"][1];
    assert_eq!(m2["path"], "1b>3b>3a>2a");
    assert_eq!(m2["code"], "0x2121");
    assert_eq!(m2["source"], "1b");
    assert_eq!(m2["transits"], json!([{"ingress": "3b", "egress": "3a"}]));
    assert_eq!(v[0]["listen_port"], "0x2001");
    assert_eq!(api.get("/api/v1/path-groups/2/1").await.1, json!([]));
    assert_eq!(
        api.get("/api/v1/path-groups/1/9").await.0,
        StatusCode::NOT_FOUND
    );

    // The Fig. 4(b) group 4 from 1 to 2 (replacing Table II's group 4), mixed forms.
    let (s, v) = api
        .call(
            Method::PUT,
            "/api/v1/path-groups/1/2/4",
            Some(json!({"members": [
                "1a>3a>3a>2a",
                {"source": "1b", "transits": [{"ingress": "4a", "egress": "4b"}], "destination": "2a"},
                "1a > 5a > 5a > 2b",
                {"source": "1b", "destination": "2b"},
            ]})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let paths: Vec<&str> = v["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        ["1a>3a>3a>2a", "1b>4a>4b>2a", "1a>5a>5a>2b", "1b>2b"]
    );
    assert_eq!(v["members"][3]["code"], "0x2144");

    // The flows equal swap::compile of the same inventory and groups.
    let inventory = Inventory::from_toml(INVENTORY).unwrap();
    let (_, all) = api.get("/api/v1/path-groups").await;
    let file = json!({"groups": all.as_array().unwrap().iter().map(|g| json!({
        "source": g["source"], "destination": g["destination"], "id": g["id"],
        "members": g["members"].as_array().unwrap().iter().map(|m| m["path"].clone()).collect::<Vec<_>>()
    })).collect::<Vec<_>>()});
    let groups = PathGroups::from_json(&inventory, &file.to_string()).unwrap();
    let tables = swap::compile(&inventory, &groups).unwrap();
    for b in 1..=5u8 {
        let (s, v) = api.get(&format!("/api/v1/branches/{b}/flows")).await;
        assert_eq!(s, StatusCode::OK);
        let expected = tables.switch(BranchId::new(b).unwrap());
        assert_eq!(v["count"], expected.len());
        let ofctl: Vec<&str> = v["flows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["ofctl"].as_str().unwrap())
            .collect();
        let want: Vec<String> = expected.iter().map(|f| f.to_ofctl()).collect();
        assert_eq!(ofctl, want);
        assert_eq!(v["flows"][0]["cookie"], expected[0].cookie.0);
    }
    assert_eq!(
        api.get("/api/v1/branches/9/flows").await.0,
        StatusCode::NOT_FOUND
    );

    // Settings round trip; stats are an explicit empty result.
    let (s, v) = api
        .call(
            Method::PUT,
            "/api/v1/settings",
            Some(json!({"groups_per_pair": 2})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["groups_per_pair"], 2);
    assert_eq!(v["mdi_threshold"], 0.4);
    assert_eq!(api.get("/api/v1/settings").await.1, v);
    let (s, v) = api.get("/api/v1/stats").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["available"], false);
    assert_eq!(v["branches"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_updates_are_serialised_and_all_kept() {
    let api = Arc::new(Api::new());
    let mut tasks = Vec::new();
    for id in 1..=12u8 {
        let api = Arc::clone(&api);
        tasks.push(tokio::spawn(async move {
            let body = json!({"id": id, "name": format!("b{id}"), "lan": [format!("10.{id}.0.0/16")],
                "wan": [{"port": "a", "address": format!("198.18.{id}.2/24"),
                         "gateway": format!("198.18.{id}.1"), "capacity_mbps": 10}]});
            api.call(Method::POST, "/api/v1/branches", Some(body)).await.0
        }));
    }
    // Conflicting writers: the same address twice, only one can win.
    let mut dups = Vec::new();
    for id in 13..=14u8 {
        let api = Arc::clone(&api);
        dups.push(tokio::spawn(async move {
            let body = json!({"id": id, "name": format!("b{id}"),
                "wan": [{"port": "a", "address": "198.18.200.2/24",
                         "gateway": "198.18.200.1", "capacity_mbps": 10}]});
            api.call(Method::POST, "/api/v1/branches", Some(body))
                .await
                .0
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), StatusCode::CREATED);
    }
    let mut outcomes: Vec<StatusCode> = Vec::new();
    for t in dups {
        outcomes.push(t.await.unwrap());
    }
    outcomes.sort();
    assert_eq!(
        outcomes,
        [StatusCode::CREATED, StatusCode::UNPROCESSABLE_ENTITY]
    );
    let (_, v) = api.get("/api/v1/branches").await;
    assert_eq!(v.as_array().unwrap().len(), 13);
}

/// Every read route's answer, by URI (the routes with parameters at their sample values).
async fn every_read(api: &Api) -> Vec<(String, StatusCode, Value)> {
    let mut out = Vec::new();
    for r in ROUTES.iter().filter(|r| r.method == Method::GET && r.auth) {
        for uri in [
            sample_uri(r.path),
            r.path.replace("{branch}", "3").replace("{source}", "2"),
        ] {
            let (s, v) = api.get(&uri).await;
            out.push((uri, s, v));
        }
    }
    out
}

#[tokio::test]
async fn reads_from_the_in_memory_catalog_equal_a_reopened_database() {
    let mut api = Api::new();
    api.import_paper().await;
    // A write that commits and two that are refused (the old catalog must stay).
    let (s, v) = api
        .call(
            Method::PATCH,
            "/api/v1/branches/1/ports/a",
            Some(json!({"capacity_mbps": 33})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, _) = api.call(Method::DELETE, "/api/v1/branches/1", None).await;
    assert_eq!(s, StatusCode::CONFLICT);
    let (s, _) = api
        .call(
            Method::PUT,
            "/api/v1/settings",
            Some(json!({"groups_per_pair": 99})),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    let before = every_read(&api).await;
    assert!(before
        .iter()
        .any(|(u, s, _)| u == "/api/v1/branches/1/flows" && *s == StatusCode::OK));

    // The same reads over a fresh process's view: the database parsed and compiled again
    // (dropping the old router closes the store and releases redb's lock on the file).
    api.app = Router::new();
    let store = Arc::new(Store::open(&api.path).unwrap());
    api.app = router(AppState::new(store, TOKEN), 1 << 20);
    let after = every_read(&api).await;
    assert_eq!(before.len(), after.len());
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(b, a, "{} differs after reopening", b.0);
        assert_eq!(b.2.to_string(), a.2.to_string(), "{} bytes differ", b.0);
    }
}

/// The property names of schema `name` in `doc` (following one `$ref`), and its required ones.
fn properties(doc: &Value, name: &str) -> (Vec<String>, Vec<String>) {
    let schema = &doc["components"]["schemas"][name];
    assert!(schema.is_object(), "no schema {name}");
    let mut props: Vec<String> = schema["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("{name} has no properties: {schema}"))
        .keys()
        .cloned()
        .collect();
    props.sort();
    let mut required: Vec<String> = schema["required"]
        .as_array()
        .map(|a| a.iter().map(|r| r.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default();
    required.sort();
    (props, required)
}

/// `example` (a serialized value of the schema's type with every optional field set) has
/// exactly the schema's properties, and every required one.
fn assert_schema_matches(doc: &Value, name: &str, example: &Value) {
    let (props, required) = properties(doc, name);
    let mut keys: Vec<String> = example
        .as_object()
        .unwrap_or_else(|| panic!("{name} example is not an object: {example}"))
        .keys()
        .cloned()
        .collect();
    keys.sort();
    assert_eq!(props, keys, "schema {name} drifted from its serde type");
    for r in &required {
        assert!(keys.contains(r), "{name}: required {r} not serialized");
    }
}

#[tokio::test]
async fn derived_schemas_match_serialized_examples() {
    let doc = document();
    let derived = derived_schemas();
    for name in [
        "Health",
        "Branch",
        "WanPort",
        "InventoryFile",
        "BranchPatch",
        "NewPort",
        "PortPatch",
        "GroupsFile",
        "GroupEntry",
        "Import",
        "Summary",
        "PathGroup",
        "Member",
        "Transit",
        "StructuredMember",
        "SetPathGroup",
    ] {
        assert_eq!(
            doc["components"]["schemas"][name], derived[name],
            "{name} is derived"
        );
    }

    let api = Api::new();
    api.import_paper().await;
    // Responses of the running API (every optional field present in the paper topology).
    let (_, health) = api
        .raw(Request::get("/health").body(Body::empty()).unwrap())
        .await;
    assert_schema_matches(&doc, "Health", &health);
    let (_, inventory) = api.get("/api/v1/inventory").await;
    assert_schema_matches(&doc, "InventoryFile", &inventory);
    let branch = &inventory["branches"][2];
    assert_schema_matches(&doc, "Branch", branch);
    // `nat` is written only when true, and no port of the paper topology is behind NAT.
    let mut port = branch["wan"][0].clone();
    port["nat"] = json!(true);
    assert_schema_matches(&doc, "WanPort", &port);
    let (_, groups) = api.get("/api/v1/path-groups").await;
    let transit_group = groups
        .as_array()
        .unwrap()
        .iter()
        .find(|g| {
            g["members"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["transits"].as_array().is_some_and(|t| !t.is_empty()))
        })
        .expect("the paper's Table II has a transit member");
    assert_schema_matches(&doc, "PathGroup", transit_group);
    let member = transit_group["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| !m["transits"].as_array().unwrap().is_empty())
        .unwrap();
    assert_schema_matches(&doc, "Member", member);
    assert_schema_matches(&doc, "Transit", &member["transits"][0]);
    let (_, summary) = api
        .call(
            Method::POST,
            "/api/v1/import",
            Some(json!({"inventory": inventory, "groups": {"groups": []}})),
        )
        .await;
    assert_schema_matches(&doc, "Summary", &summary);
    api.import_paper().await;

    // Request bodies: serialize the types themselves with every optional field set.
    let groups_file = PathGroups::from_toml(&Inventory::from_toml(INVENTORY).unwrap(), PATHS)
        .unwrap()
        .to_file();
    let groups_json = serde_json::to_value(&groups_file).unwrap();
    assert_schema_matches(&doc, "GroupsFile", &groups_json);
    assert_schema_matches(&doc, "GroupEntry", &groups_json["groups"][0]);
    let import = controller::ui::api::Import {
        inventory: serde_json::from_value(inventory.clone()).unwrap(),
        groups: groups_file,
        settings: Some(Default::default()),
    };
    assert_schema_matches(&doc, "Import", &serde_json::to_value(&import).unwrap());
    let mac: controller::inventory::MacAddr = "02:00:00:00:01:0a".parse().unwrap();
    let new_port = controller::store::NewPort {
        port: Some("b".to_owned().try_into().unwrap()),
        address: "198.18.12.2/24".parse().unwrap(),
        gateway: "198.18.12.1".parse().unwrap(),
        gateway_mac: Some(mac),
        mac: Some(mac),
        kind: controller::inventory::WanKind::Leased,
        capacity_mbps: 5,
        nat: true,
    };
    assert_schema_matches(&doc, "NewPort", &serde_json::to_value(&new_port).unwrap());
    let port_patch = controller::store::PortPatch {
        address: Some(new_port.address),
        gateway: Some(new_port.gateway),
        gateway_mac: Some(mac),
        mac: Some(mac),
        kind: Some(new_port.kind),
        capacity_mbps: Some(5),
    };
    assert_schema_matches(
        &doc,
        "PortPatch",
        &serde_json::to_value(&port_patch).unwrap(),
    );
    let branch_patch = controller::store::BranchPatch {
        name: Some("x".into()),
        lan: Some(vec!["10.9.0.0/16".parse().unwrap()]),
    };
    assert_schema_matches(
        &doc,
        "BranchPatch",
        &serde_json::to_value(&branch_patch).unwrap(),
    );
    let structured = json!({"source": "1b", "transits": [{"ingress": "4a", "egress": "4b"}], "destination": "2a"});
    assert_schema_matches(&doc, "StructuredMember", &structured);
    let set: controller::ui::api::SetGroup =
        serde_json::from_value(json!({"members": ["1a>2a", structured]})).unwrap();
    assert_schema_matches(&doc, "SetPathGroup", &serde_json::to_value(&set).unwrap());

    // WRR weights (configured: no measured rate, no estimate; those fields are optional).
    let (_, weights) = api.get("/api/v1/weights").await;
    assert_schema_matches(&doc, "WeightList", &weights);
    assert_schema_matches(&doc, "PairWeights", &weights["pairs"][0]);
    assert_schema_covers(&doc, "GroupWeight", &weights["pairs"][0]["groups"][0]);
    let (_, adaptive) = api.get("/api/v1/adaptive").await;
    assert_schema_matches(&doc, "AdaptiveList", &adaptive);
    let pair = controller::adaptive::PairView {
        zeta_bps: Some(1.0),
        last_action: Some("added".into()),
        ..Default::default()
    };
    assert_schema_matches(&doc, "AdaptivePair", &serde_json::to_value(&pair).unwrap());
    let (_, tokens) = api.get("/api/v1/tokens").await;
    assert_schema_matches(&doc, "ApiTokenList", &tokens);
    let new_token = controller::ui::api::NewApiToken {
        name: "ci".into(),
        role: controller::store::creds::Role::ReadOnly,
        ttl_s: Some(60),
        never_expires: false,
        branches: Vec::new(),
    };
    assert_schema_matches(
        &doc,
        "NewApiToken",
        &serde_json::to_value(&new_token).unwrap(),
    );
    let (s, token) = api
        .call(
            Method::POST,
            "/api/v1/tokens",
            Some(json!({"name": "ci", "role": "admin"})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    assert_schema_matches(&doc, "ApiToken", &token);
    let (_, tokens) = api.get("/api/v1/tokens").await;
    assert_schema_matches(&doc, "ApiTokenInfo", &tokens["tokens"][0]);
    let enrol = controller::ui::api::NewEnrolToken {
        branch: 1,
        ttl_s: Some(60),
    };
    assert_schema_matches(
        &doc,
        "NewEnrolToken",
        &serde_json::to_value(&enrol).unwrap(),
    );
    let revoke = controller::ui::api::RevokeRequest {
        branch: Some(1),
        serial: Some(2),
    };
    assert_schema_matches(&doc, "Revoke", &serde_json::to_value(&revoke).unwrap());
    let cert = controller::store::creds::CertRow {
        serial: 1,
        branch: 1,
        not_after: 2,
        revoked: Some(3),
    };
    let certs = controller::ui::api::CertificateList {
        certificates: vec![cert],
    };
    let certs = serde_json::to_value(&certs).unwrap();
    assert_schema_matches(&doc, "CertificateList", &certs);
    assert_schema_matches(&doc, "Certificate", &certs["certificates"][0]);
    let revoked = controller::ui::api::Revoked { revoked: vec![1] };
    assert_schema_matches(&doc, "Revoked", &serde_json::to_value(&revoked).unwrap());
    // SDC: the flattened `Traffic` is an `allOf` part of the pair, group and member schemas.
    let traffic = serde_json::to_value(controller::sdc::Traffic::default()).unwrap();
    assert_schema_matches(&doc, "Traffic", &traffic);
    for (name, extra) in [
        ("PairStats", json!({"source": 1, "destination": 2})),
        (
            "GroupStats",
            json!({"source": 1, "destination": 2, "group": 0}),
        ),
        (
            "MemberStats",
            json!({"code": "0x2114", "source": 1, "destination": 2, "group": 1, "member": 4}),
        ),
    ] {
        let mut example = traffic.clone();
        example
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let schema = &doc["components"]["schemas"][name];
        let mut props: Vec<String> = Vec::new();
        for part in schema["allOf"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: {schema}"))
        {
            let part = match part["$ref"].as_str() {
                Some(r) => {
                    &doc["components"]["schemas"][r.trim_start_matches("#/components/schemas/")]
                }
                None => part,
            };
            props.extend(part["properties"].as_object().unwrap().keys().cloned());
        }
        props.sort();
        let mut keys: Vec<String> = example.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        assert_eq!(props, keys, "schema {name} drifted from its serde type");
        let v: serde_json::Value = serde_json::to_value(match name {
            "PairStats" => serde_json::to_value(
                serde_json::from_value::<controller::sdc::PairStats>(example.clone()).unwrap(),
            )
            .unwrap(),
            "GroupStats" => serde_json::to_value(
                serde_json::from_value::<controller::sdc::GroupStats>(example.clone()).unwrap(),
            )
            .unwrap(),
            _ => serde_json::to_value(
                serde_json::from_value::<controller::sdc::MemberStats>(example.clone()).unwrap(),
            )
            .unwrap(),
        })
        .unwrap();
        assert_eq!(v, example, "{name} example round-trips");
    }
}

/// `example` (a serialized value, optional fields may be absent) has only the schema's
/// properties and every required one.
fn assert_schema_covers(doc: &Value, name: &str, example: &Value) {
    let (props, required) = properties(doc, name);
    let keys = example
        .as_object()
        .unwrap_or_else(|| panic!("{name}: {example}"));
    for k in keys.keys() {
        assert!(
            props.contains(k),
            "{name}: serialized field {k} is not in the schema"
        );
    }
    for r in &required {
        assert!(keys.contains_key(r), "{name}: required {r} not serialized");
    }
}

/// Issue #19: `GET /metrics` needs a token (401 without, like every other read), a read-only
/// token is enough, and the answer is a valid OpenMetrics exposition with the WRR weights of the
/// paper's Table II (4 path groups; the weights of each pair sum to 1).
#[tokio::test]
async fn metrics_need_a_read_only_token_and_parse() {
    let api = Api::new();
    api.import_paper().await;
    let (s, _) = api.with_token(None, Method::GET, "/metrics", None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, ro) = api
        .call(
            Method::POST,
            "/api/v1/tokens",
            Some(json!({"name": "prometheus", "role": "read-only"})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{ro}");
    let ro = ro["token"].as_str().unwrap().to_owned();
    // Without an Accept header: the classic text format (curl, promtool).
    let (s, v) = api
        .with_token(Some(&ro), Method::GET, "/metrics", None)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let classic = v.as_str().unwrap().to_owned();
    assert!(
        classic.contains("# TYPE mms_path_group_weight_ratio gauge\n"),
        "{classic}"
    );
    assert!(!classic.contains("# EOF"), "{classic}");
    // What Prometheus asks for: OpenMetrics.
    let req = Request::get("/metrics")
        .header(header::AUTHORIZATION, format!("Bearer {ro}"))
        .header(
            header::ACCEPT,
            "application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
        )
        .body(Body::empty())
        .unwrap();
    let (s, v) = api.raw(req).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let text = v.as_str().unwrap();
    let (types, samples) =
        controller::metrics::check(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(types["mms_path_group_weight_ratio"], "gauge");
    assert_eq!(
        controller::metrics::value_of(&samples, "mms_build_info", &[("component", "ssc")]),
        Some(1.0)
    );
    let weights: Vec<_> = samples
        .iter()
        .filter(|(n, ..)| n == "mms_path_group_weight_ratio")
        .collect();
    assert!(!weights.is_empty(), "{text}");
    let mut per_pair = std::collections::BTreeMap::<(String, String), f64>::new();
    for (_, l, v) in &weights {
        *per_pair
            .entry((l["branch"].clone(), l["remote"].clone()))
            .or_default() += v;
    }
    for (pair, sum) in per_pair {
        assert!((sum - 1.0).abs() < 1e-6, "{pair:?}: {sum}");
    }
}

/// Issue #20 (docs/nat.md): a path group between two branches whose ports are all behind NAT
/// cannot come up, through a transit or not; the API refuses it (422), naming the pair and the
/// branches that could relay, and stores nothing. A pair with a public side is accepted.
#[tokio::test]
async fn a_path_group_between_two_nat_only_branches_is_refused_naming_the_pair() {
    let api = Api::new();
    let mut inventory: Value = toml::from_str(INVENTORY).unwrap();
    for b in inventory["branches"].as_array_mut().unwrap() {
        if b["id"] == 2 || b["id"] == 3 {
            for p in b["wan"].as_array_mut().unwrap() {
                p["nat"] = json!(true);
            }
        }
    }
    let (s, v) = api
        .call(
            Method::POST,
            "/api/v1/import",
            Some(json!({"inventory": inventory, "groups": {"groups": []}})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    for members in [json!(["2a>1a>1a>3a"]), json!(["2a>3a"])] {
        let (s, v) = api
            .call(
                Method::PUT,
                "/api/v1/path-groups/2/3/0",
                Some(json!({ "members": members })),
            )
            .await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{members}: {v}");
        let e = error_of(&v);
        assert!(
            e.contains("path group 2>3 #0")
                && e.contains("branches 2 and 3 have only WAN ports behind NAT")
                && e.contains("branches 1, 4, 5:"),
            "{e}"
        );
    }
    assert_eq!(api.get("/api/v1/path-groups/2/3").await.1, json!([]));
    // Branch 1 is public: 1 -> 2 is fine (2 dials 1; the connection carries both ways).
    let (s, v) = api
        .call(
            Method::PUT,
            "/api/v1/path-groups/1/2/0",
            Some(json!({"members": ["1a>2a"]})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
}
