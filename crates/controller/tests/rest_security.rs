//! Issue #17, the REST side: a `provisioner` token creates enrolment tokens only for the branches
//! named in it (403 otherwise, and for every other route); the config's bootstrap token expires
//! (recorded at its first use, not re-armed by a restart, replaced by a rotation); the REST API
//! over HTTPS (`api.rest_tls`) answers a client that trusts its certificate and nobody else.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use controller::authority::Authority;
use controller::gwchan::Registry;
use controller::inventory::Inventory;
use controller::path_group::PathGroups;
use controller::store::Store;
use controller::ui::api::{arm_bootstrap_token, router, AppState, BOOTSTRAP_TOKEN_NAME};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::ServiceExt;

const TOKEN: &str = "bootstrap-token-0123456789";

fn store_2x2(dir: &std::path::Path) -> Arc<Store> {
    let store = Arc::new(Store::open(&dir.join("ssc.redb")).unwrap());
    let inv = Inventory::from_toml(&common::example("inventory-2x2.toml")).unwrap();
    let groups = PathGroups::from_toml(&inv, &common::example("paths-2x2.toml")).unwrap();
    store.import(inv.to_file(), groups.to_file(), None).unwrap();
    store
}

async fn call(
    app: &Router,
    token: &str,
    method: Method,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {token}"));
    let body = match body {
        Some(b) => {
            req = req.header(header::CONTENT_TYPE, "application/json");
            Body::from(b.to_string())
        }
        None => Body::empty(),
    };
    let resp = app.clone().oneshot(req.body(body).unwrap()).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 24)
        .await
        .unwrap();
    let v = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap()
    };
    (status, v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provisioner_token_enrols_only_its_branches() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_2x2(dir.path());
    let authority = Arc::new(
        Authority::open(
            &dir.path().join("ca"),
            Arc::clone(&store),
            Duration::from_secs(86_400),
        )
        .unwrap(),
    );
    let registry = Arc::new(Registry::new());
    registry.set_authority(authority);
    let app = router(
        AppState::new(Arc::clone(&store), TOKEN).with_gateways(registry),
        1 << 20,
    );
    // Malformed provisioner requests.
    for (body, needle) in [
        (
            json!({"name": "p", "role": "provisioner"}),
            "names the branches",
        ),
        (
            json!({"name": "p", "role": "provisioner", "branches": [251]}),
            "251 is not a branch",
        ),
        (
            json!({"name": "p", "role": "read-only", "branches": [1]}),
            "only a provisioner",
        ),
        (
            json!({"name": BOOTSTRAP_TOKEN_NAME, "role": "admin"}),
            "reserved",
        ),
    ] {
        let (s, v) = call(&app, TOKEN, Method::POST, "/api/v1/tokens", Some(body)).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
        assert!(v["error"].as_str().unwrap().contains(needle), "{v}");
    }
    let (s, v) = call(
        &app,
        TOKEN,
        Method::POST,
        "/api/v1/tokens",
        Some(json!({"name": "zt-provisioning", "role": "provisioner", "branches": [1], "ttl_s": 3600})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["branches"], json!([1]));
    let p = v["token"].as_str().unwrap().to_owned();

    // Its branch: 201.
    let (s, v) = call(
        &app,
        &p,
        Method::POST,
        "/api/v1/enrol-tokens",
        Some(json!({"branch": 1})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["branch"], 1);
    // Another branch: 403, and no token was created for it.
    let (s, v) = call(
        &app,
        &p,
        Method::POST,
        "/api/v1/enrol-tokens",
        Some(json!({"branch": 2})),
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("branches [1] only"),
        "{v}"
    );
    // Every other route: 403 (reads included).
    for (m, uri, body) in [
        (Method::GET, "/api/v1/inventory", None),
        (Method::GET, "/api/v1/certificates", None),
        (Method::GET, "/api/v1/tokens", None),
        (
            Method::POST,
            "/api/v1/tokens",
            Some(json!({"name": "x", "role": "admin"})),
        ),
        (Method::POST, "/api/v1/revoke", Some(json!({"branch": 1}))),
        (Method::DELETE, "/api/v1/branches/1", None),
    ] {
        let (s, v) = call(&app, &p, m.clone(), uri, body).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{m} {uri}: {v}");
        assert!(v["error"].as_str().unwrap().contains("provisioner"), "{v}");
    }
    // The admin still enrols any branch, and the list shows the provisioner's branches.
    let (s, _) = call(
        &app,
        TOKEN,
        Method::POST,
        "/api/v1/enrol-tokens",
        Some(json!({"branch": 2})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    let (_, v) = call(&app, TOKEN, Method::GET, "/api/v1/tokens", None).await;
    let t = v["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "zt-provisioning")
        .unwrap();
    assert_eq!(
        (t["role"].as_str(), &t["branches"]),
        (Some("provisioner"), &json!([1]))
    );
}

#[tokio::test]
async fn the_bootstrap_token_expires_and_is_not_re_armed_by_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("ssc.redb")).unwrap());
    let day = 86_400;
    let now = controller::authority::unix_now();
    // First `ssc run`, two days ago: armed for 24 h.
    let first = arm_bootstrap_token(&store, TOKEN, Some(day), now - 2 * day).unwrap();
    assert_eq!(first, Some(now - day));
    // A restart now keeps the first expiry.
    let again = arm_bootstrap_token(&store, TOKEN, Some(day), now).unwrap();
    assert_eq!(
        again, first,
        "a restart must not re-arm the bootstrap token"
    );
    let app = router(
        AppState::new(Arc::clone(&store), TOKEN).with_token_expiry(again),
        1 << 20,
    );
    let (s, v) = call(&app, TOKEN, Method::GET, "/api/v1/inventory", None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("expired bootstrap token"),
        "{v}"
    );
    // A rotation (a new token in the config) gets a fresh lifetime; the old one is gone.
    const NEW: &str = "rotated-bootstrap-0123456789";
    let rotated = arm_bootstrap_token(&store, NEW, Some(day), now).unwrap();
    assert_eq!(rotated, Some(now + day));
    let rows = store.api_tokens().unwrap();
    let boot: Vec<_> = rows
        .iter()
        .filter(|r| r.name == BOOTSTRAP_TOKEN_NAME)
        .collect();
    assert_eq!(boot.len(), 1);
    assert_eq!(boot[0].expires, Some(now + day));
    let app = router(
        AppState::new(Arc::clone(&store), NEW).with_token_expiry(rotated),
        1 << 20,
    );
    let (s, v) = call(&app, NEW, Method::GET, "/api/v1/inventory", None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, _) = call(&app, TOKEN, Method::GET, "/api/v1/inventory", None).await;
    assert_eq!(
        s,
        StatusCode::UNAUTHORIZED,
        "the old bootstrap token is gone"
    );
    // `0` (never) is an explicit choice.
    assert_eq!(
        arm_bootstrap_token(&store, "never-expiring-token-0123", None, now).unwrap(),
        None
    );
}

/// A CA, and a server certificate for `ssc.mms` written as the REST API's `rest_tls` files.
fn rest_cert(dir: &std::path::Path) -> (String, std::path::PathBuf, std::path::PathBuf) {
    let ca = pki::ca::Ca::generate("rest test CA").unwrap();
    let issued = ca
        .issue_server("ssc.mms", 7, Duration::from_secs(86_400))
        .unwrap();
    let (cert, key) = (dir.join("rest.pem"), dir.join("rest.key"));
    std::fs::write(&cert, &issued.cert_pem).unwrap();
    pki::files::write_private(&key, issued.key_pem.as_bytes()).unwrap();
    (ca.cert_pem().to_owned(), cert, key)
}

async fn https_get(
    addr: std::net::SocketAddr,
    roots_pem: &str,
    path: &str,
) -> Result<String, String> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(roots_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let cfg = rustls::ClientConfig::builder_with_provider(pki::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("ssc.mms").unwrap();
    let mut s = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: ssc.mms\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_over_tls_serves_a_client_that_trusts_the_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_2x2(dir.path());
    let (ca_pem, cert, key) = rest_cert(dir.path());
    let tls = controller::ui::rest_tls_config(&cert, &key).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, mut rx) = tokio::sync::watch::channel(false);
    let server = tokio::spawn(controller::ui::serve_state_tls(
        listener,
        tls,
        AppState::new(Arc::clone(&store), TOKEN),
        1 << 20,
        async move {
            let _ = rx.wait_for(|s| *s).await;
        },
    ));
    // A client trusting the CA: health and an authenticated read.
    let health = https_get(addr, &ca_pem, "/health").await.unwrap();
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    assert!(health.contains("\"status\":\"ok\""), "{health}");
    let inv = https_get(addr, &ca_pem, "/api/v1/inventory").await.unwrap();
    assert!(
        inv.starts_with("HTTP/1.1 200") && inv.contains("branches"),
        "{inv}"
    );
    // A client trusting another CA: the handshake fails.
    let other = pki::ca::Ca::generate("other").unwrap();
    let e = https_get(addr, other.cert_pem(), "/health")
        .await
        .unwrap_err();
    assert!(
        e.contains("certificate") || e.contains("UnknownIssuer"),
        "{e}"
    );
    // Plain HTTP to the HTTPS port gets no HTTP answer.
    let mut plain = tokio::net::TcpStream::connect(addr).await.unwrap();
    plain
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(6), plain.read_to_end(&mut out)).await;
    assert!(
        !String::from_utf8_lossy(&out).contains("HTTP/1.1 200"),
        "plain HTTP was served"
    );
    // Still serving after the failed ones.
    let health = https_get(addr, &ca_pem, "/health").await.unwrap();
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    stop.send(true).unwrap();
    server.await.unwrap().unwrap();
    // Bad files are refused with the key's name.
    let e = controller::ui::rest_tls_config(&dir.path().join("missing.pem"), &key).unwrap_err();
    assert!(e.contains("api.rest_tls.cert_file"), "{e}");
}
