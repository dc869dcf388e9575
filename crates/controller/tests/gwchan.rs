//! The gateway channel server ([`controller::gwchan`]) over real sockets (a unix socket and TCP),
//! with a fake gateway speaking [`mpa::gwchan`]: registration, the config of a branch built from
//! the inventory, path groups and WRR weights, a push within 1 s of a catalog commit, acks and
//! reports in `GET /api/v1/gateways`, refusal of an unknown branch and of an oversize message,
//! and replacement of a session by a second one of the same branch.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use controller::gwchan::{GwChan, GwChanConfig, Registry};
use controller::inventory::Inventory;
use controller::path_group::PathGroups;
use controller::store::{PortPatch, Store};
use controller::ui::api::{router, AppState};
use controller::wrr::Wrr;
use mpa::gwchan::{
    self, Ack, ControllerMsg, GatewayConfig, GatewayMsg, Hello, Register, Report, WanSeen,
};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use tower::ServiceExt;

const TOKEN: &str = "gwc-test-token-0123456789";

struct Peer<S> {
    s: S,
    buf: Vec<u8>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Peer<S> {
    fn new(s: S) -> Self {
        Peer { s, buf: Vec::new() }
    }

    async fn send(&mut self, m: &GatewayMsg) {
        let mut out = Vec::new();
        gwchan::encode(m, &mut out).unwrap();
        self.s.write_all(&out).await.unwrap();
    }

    /// The next message, or `None` when the server closed the stream.
    async fn recv(&mut self) -> Option<ControllerMsg> {
        let fut = async {
            loop {
                if let Some((m, n)) = gwchan::decode::<ControllerMsg>(&self.buf).unwrap() {
                    self.buf.drain(..n);
                    return Some(m);
                }
                let mut chunk = [0u8; 4096];
                let n = self.s.read(&mut chunk).await.unwrap_or(0);
                if n == 0 {
                    return None;
                }
                self.buf.extend_from_slice(&chunk[..n]);
            }
        };
        tokio::time::timeout(Duration::from_secs(5), fut)
            .await
            .expect("no message from ssc within 5 s")
    }

    async fn register(&mut self, branch: u8) -> Option<ControllerMsg> {
        self.send(&GatewayMsg::Hello(Hello::ours("fake-gw"))).await;
        self.send(&GatewayMsg::Register(Register {
            branch_id: branch,
            software_version: "0.0.0-test".into(),
            wan: vec![WanSeen {
                name: "wan0".into(),
                address: format!("198.18.{}.2/24", 10 * branch),
            }],
            config_version: 0,
        }))
        .await;
        match self.recv().await {
            Some(ControllerMsg::Hello(h)) => assert!(h.check().is_ok()),
            other => panic!("expected hello, got {other:?}"),
        }
        self.recv().await
    }
}

fn config(m: Option<ControllerMsg>) -> GatewayConfig {
    match m {
        Some(ControllerMsg::Config(c)) => c,
        other => panic!("expected a config, got {other:?}"),
    }
}

fn weights(c: &GatewayConfig) -> Vec<(u8, u32)> {
    c.remotes[0]
        .path_groups
        .iter()
        .map(|g| (g.id, g.weight))
        .collect()
}

async fn get(app: &axum::Router, uri: &str) -> Value {
    let req = Request::builder()
        .method(Method::GET)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .body(Body::empty())
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 24)
        .await
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

fn store_2x2(dir: &Path) -> Arc<Store> {
    let store = Arc::new(Store::open(&dir.join("ssc.redb")).unwrap());
    let inv = Inventory::from_toml(&common::example("inventory-2x2.toml")).unwrap();
    let groups = PathGroups::from_toml(&inv, &common::example("paths-2x2.toml")).unwrap();
    store.import(inv.to_file(), groups.to_file(), None).unwrap();
    store
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateways_register_get_configs_and_pushes() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_2x2(dir.path());
    let sock = dir.path().join("gw.sock");
    let registry = Arc::new(Registry::new());
    let gwc = GwChan::bind(
        &GwChanConfig {
            listen: Some("127.0.0.1:0".parse().unwrap()),
            tls_listen: None,
            unix: vec![sock.clone()],
            ..GwChanConfig::default()
        },
        Arc::clone(&registry),
    )
    .await
    .unwrap();
    let tcp = gwc.local_addr().unwrap();
    let wrr = Arc::new(Mutex::new(Wrr::default()));
    tokio::spawn(gwc.run(
        store.subscribe(),
        Arc::clone(&wrr),
        Arc::new(tokio::sync::Notify::new()),
        std::future::pending(),
    ));
    let app = router(
        AppState::new(Arc::clone(&store), TOKEN)
            .with_wrr(Arc::clone(&wrr))
            .with_gateways(Arc::clone(&registry)),
        1 << 20,
    );

    // Branch 1 over the unix socket: its config is branch 2 with the two groups of 1→2,
    // weighted by configured capacity 30:20 (1 each + 998 · 3/5, 2/5).
    let mut g1 = Peer::new(UnixStream::connect(&sock).await.unwrap());
    let c1 = config(g1.register(1).await);
    assert_eq!(c1.branch_id, 1);
    assert_eq!(c1.remotes.len(), 1);
    let r = &c1.remotes[0];
    assert_eq!(r.id, 2);
    assert_eq!(
        r.wan_addresses,
        vec![
            "198.18.20.2".parse::<std::net::Ipv4Addr>().unwrap(),
            "198.18.21.2".parse().unwrap()
        ]
    );
    assert_eq!(r.lan_prefixes, vec!["198.19.2.0/24".parse().unwrap()]);
    assert_eq!(weights(&c1), vec![(0, 600), (1, 400)]);
    assert_eq!(c1.priorities.type1_socket_dscp, 46);
    assert_eq!(c1.priorities.marks["type2/1"], 18);
    g1.send(&GatewayMsg::Ack(Ack {
        config_version: c1.version,
        received_version: c1.version,
        error: None,
    }))
    .await;
    g1.send(&GatewayMsg::Report(Report {
        healthy: true,
        config_version: c1.version,
        config_source: "controller".into(),
        connections_up: 4,
        connections_total: 4,
        drops: 7,
        groups: vec![],
    }))
    .await;

    // Branch 2 over TCP.
    let mut g2 = Peer::new(TcpStream::connect(tcp).await.unwrap());
    let c2 = config(g2.register(2).await);
    assert_eq!(c2.remotes[0].id, 1);
    assert_eq!(weights(&c2), vec![(0, 600), (1, 400)]);

    // REST: both connected, gw1's ack and report.
    let deadline = Instant::now() + Duration::from_secs(2);
    let v = loop {
        let v = get(&app, "/api/v1/gateways").await;
        if v["gateways"][0]["config_version_acked"] == c1.version
            && v["gateways"][0]["last_report"]["drops"] == 7
        {
            break v;
        }
        assert!(Instant::now() < deadline, "{v:#}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let gws = v["gateways"].as_array().unwrap();
    assert_eq!(gws.len(), 2);
    assert_eq!(gws[0]["branch"], 1);
    assert_eq!(gws[0]["connected"], true);
    assert_eq!(gws[0]["config_version"], c1.version);
    assert_eq!(gws[0]["software_version"], "0.0.0-test");
    assert_eq!(gws[1]["branch"], 2);
    assert_eq!(gws[1]["config_version_acked"], 0);

    // A catalog commit (port 1a: 40 → 10 Mbit/s) reaches both gateways within 1 s, with a new
    // version and the new weights (1→2 group 0 now 10 vs 20).
    let t0 = Instant::now();
    let s2 = Arc::clone(&store);
    tokio::task::spawn_blocking(move || {
        s2.update(|c| {
            c.modify_port(
                common::port("1a"),
                PortPatch {
                    capacity_mbps: Some(10),
                    ..PortPatch::default()
                },
            )
        })
        .unwrap();
    })
    .await
    .unwrap();
    let n1 = config(g1.recv().await);
    let n2 = config(g2.recv().await);
    let took = t0.elapsed();
    eprintln!("catalog commit → both gateways got the new config in {took:?}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert!(n1.version > c1.version);
    assert!(n2.version > c2.version);
    // 1 each + 998 · 1/3, 2/3 = 332.67, 665.33: the one left goes to group 0.
    assert_eq!(weights(&n1), vec![(0, 334), (1, 666)]);
    assert_eq!(weights(&n2), vec![(0, 334), (1, 666)]);

    // A refused config is shown with its reason.
    g1.send(&GatewayMsg::Ack(Ack {
        config_version: c1.version,
        received_version: n1.version,
        error: Some("remote[0]: test refusal".into()),
    }))
    .await;

    // Unknown branch: an error naming it, the stream closed, counted.
    let mut g9 = Peer::new(UnixStream::connect(&sock).await.unwrap());
    match g9.register(9).await {
        Some(ControllerMsg::Error(e)) => {
            assert_eq!(e.code, "unknown_branch");
            assert!(e.message.contains("branch 9"), "{}", e.message);
        }
        other => panic!("expected an error, got {other:?}"),
    }
    assert!(g9.recv().await.is_none(), "stream must be closed");

    // A wrong protocol version is refused.
    let mut gv = Peer::new(UnixStream::connect(&sock).await.unwrap());
    gv.send(&GatewayMsg::Hello(Hello {
        protocol: 99,
        software: "future".into(),
    }))
    .await;
    assert!(matches!(gv.recv().await, Some(ControllerMsg::Hello(_))));
    match gv.recv().await {
        Some(ControllerMsg::Error(e)) => assert_eq!(e.code, "version"),
        other => panic!("expected a version error, got {other:?}"),
    }

    // An oversize length prefix is refused before any body is read.
    let mut raw = UnixStream::connect(&sock).await.unwrap();
    raw.write_all(&u32::MAX.to_be_bytes()).await.unwrap();
    let mut rest = Vec::new();
    let n = tokio::time::timeout(Duration::from_secs(5), raw.read_to_end(&mut rest))
        .await
        .unwrap()
        .unwrap_or(0);
    assert!(n < 1024, "only a short error may come back");

    // A second session of branch 1 replaces the first, which is told why.
    let mut g1b = Peer::new(UnixStream::connect(&sock).await.unwrap());
    let c1b = config(g1b.register(1).await);
    assert_eq!(c1b.version, n1.version, "the current config at once");
    match g1.recv().await {
        Some(ControllerMsg::Error(e)) => assert_eq!(e.code, "replaced"),
        other => panic!("expected replaced, got {other:?}"),
    }

    let v = get(&app, "/api/v1/gateways").await;
    assert_eq!(v["rejected_unknown_branch"], 1, "{v:#}");
    assert!(v["rejected_other"].as_u64().unwrap() >= 2, "{v:#}");
    assert_eq!(v["replaced"], 1);
    let gw1 = &v["gateways"][0];
    assert_eq!(gw1["connected"], true);
    assert_eq!(gw1["sessions"], 2);

    // Branch 2's session closes: shown as disconnected.
    drop(g2);
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let v = get(&app, "/api/v1/gateways").await;
        if v["gateways"][1]["connected"] == false {
            break;
        }
        assert!(Instant::now() < deadline, "{v:#}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The OpenAPI document lists the route and its schema.
    let doc = get(&app, "/openapi.json").await;
    assert!(doc["paths"]["/api/v1/gateways"]["get"].is_object());
    assert!(doc["components"]["schemas"]["GatewayList"].is_object());
}

#[test]
fn remotes_cover_both_directions() {
    let inv = Inventory::from_toml(&common::example("inventory-2x2.toml")).unwrap();
    let groups = PathGroups::from_toml(&inv, &common::example("paths-2x2.toml")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("x.redb")).unwrap();
    store.import(inv.to_file(), groups.to_file(), None).unwrap();
    let c = store.catalog().unwrap();
    // No weights published: every group weight 1.
    let r = controller::gwchan::build_remotes(&c, &Default::default(), common::branch(1));
    assert_eq!(r.len(), 1);
    assert_eq!(
        r[0].path_groups
            .iter()
            .map(|g| (g.id, g.weight))
            .collect::<Vec<_>>(),
        vec![(0, 1), (1, 1)]
    );
}

/// Connects from `src` (a loopback address) to `to`.
async fn connect_from(src: &str, to: std::net::SocketAddr) -> TcpStream {
    let s = tokio::net::TcpSocket::new_v4().unwrap();
    s.bind(format!("{src}:0").parse().unwrap()).unwrap();
    s.connect(to).await.unwrap()
}

/// Whether the peer closed `s` within `limit` (EOF or reset), reading and dropping what it sends.
async fn closed_within(s: &mut TcpStream, limit: Duration) -> bool {
    let mut b = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut b)).await {
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
            Err(_) => return false,
        }
    }
}

/// Issue #17: bounded pre-auth state on the gateway listener: at most `per_source` silent
/// connections from one address (the next is closed at once, a connection from another address
/// is still served), the deadline closes the silent ones, a large message before authentication
/// is refused at 16 KiB (not buffered up to the codec's 1 MiB); every refusal counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_auth_connections_are_capped_timed_out_and_small() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_2x2(dir.path());
    let registry = Arc::new(Registry::new());
    let gwc = GwChan::bind(
        &GwChanConfig {
            listen: Some("127.0.0.1:0".parse().unwrap()),
            preauth: controller::preauth::PreAuthLimits {
                total: 6,
                per_source: 2,
                deadline: Duration::from_millis(800),
                ..Default::default()
            },
            ..GwChanConfig::default()
        },
        Arc::clone(&registry),
    )
    .await
    .unwrap();
    let tcp = gwc.local_addr().unwrap();
    tokio::spawn(gwc.run(
        store.subscribe(),
        Arc::new(Mutex::new(Wrr::default())),
        Arc::new(tokio::sync::Notify::new()),
        std::future::pending(),
    ));
    let t0 = Instant::now();
    let mut silent = Vec::new();
    for _ in 0..2 {
        silent.push(connect_from("127.0.0.1", tcp).await);
    }
    let wait_pending = |n: u64| {
        let registry = Arc::clone(&registry);
        async move {
            let deadline = Instant::now() + Duration::from_secs(2);
            while registry.list().preauth.pending != n {
                assert!(Instant::now() < deadline, "{:?}", registry.list().preauth);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };
    wait_pending(2).await;
    // A third from the same address: closed at once.
    let mut third = connect_from("127.0.0.1", tcp).await;
    assert!(closed_within(&mut third, Duration::from_millis(300)).await);
    assert_eq!(registry.list().preauth.over_source, 1);
    // Another address still gets in and registers.
    let mut g = Peer::new(connect_from("127.0.0.2", tcp).await);
    let c = config(g.register(1).await);
    assert_eq!(c.branch_id, 1);
    wait_pending(2).await;
    // The silent ones are closed by the deadline (not before 800 ms, well before 5 s).
    for s in &mut silent {
        assert!(closed_within(s, Duration::from_secs(3)).await);
    }
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(700), "{took:?}");
    wait_pending(0).await;
    let p = registry.list().preauth;
    assert_eq!(p.handshake_timeout, 2, "{p:?}");
    // A huge length prefix and 20 KiB of body before any hello: refused at 16 KiB.
    let mut big = connect_from("127.0.0.3", tcp).await;
    let mut msg = (1_000_000u32).to_be_bytes().to_vec();
    msg.extend(std::iter::repeat_n(b' ', 20 * 1024));
    let _ = big.write_all(&msg).await;
    assert!(closed_within(&mut big, Duration::from_secs(2)).await);
    let p = registry.list().preauth;
    assert_eq!(p.handshake_failed, 1, "{p:?}");
    assert_eq!(p.pending, 0);
    // The registered gateway was never disturbed.
    assert!(registry
        .list()
        .gateways
        .iter()
        .any(|v| v.branch == 1 && v.connected));
    drop(g);
}

/// A `Write` into a shared buffer: the log lines of this test binary (a global `tracing`
/// subscriber, installed once: a thread-local one can miss events through tracing's global
/// callsite-interest cache when other tests run at the same time).
#[derive(Clone, Default)]
struct LogBuf(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogBuf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logs() -> &'static LogBuf {
    static LOGS: std::sync::OnceLock<LogBuf> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        let buf = LogBuf::default();
        let w = buf.clone();
        tracing::subscriber::set_global_default(
            tracing_subscriber::fmt()
                .with_writer(move || w.clone())
                .with_ansi(false)
                .finish(),
        )
        .unwrap();
        buf
    })
}

/// A report of gateway `to`-bound traffic: 5 MB written, windows allowing 40 Mbit/s.
fn busy_report(to: u8, bytes: u64) -> GatewayMsg {
    GatewayMsg::Report(Report {
        healthy: true,
        config_version: 0,
        config_source: "file".into(),
        connections_up: 4,
        connections_total: 4,
        drops: 0,
        groups: vec![gwchan::GroupReport {
            branch: to,
            group: 0,
            bytes_tx: bytes,
            up: true,
            busy_us: 1_000,
            window_bps: 40_000_000,
            acked_bytes: bytes,
            ..Default::default()
        }],
    })
}

/// Issue #17: a registration over clear TCP is unauthenticated (anyone who reaches the port can
/// claim a branch), so its reports never reach the capacity estimates, the WRR weights or the
/// adaptive decisions (all read `Wrr`'s estimators), like OpenFlow statistics of an
/// unauthenticated switch; they are counted (`unauthenticated_reports`), still shown in
/// `last_report`, and the registration is logged as unauthenticated. A unix-socket session
/// (authenticated by the socket's permissions) feeds them as before.
#[tokio::test(flavor = "current_thread")]
async fn clear_tcp_reports_never_feed_capacity_wrr_or_adaptive() {
    let logs = logs();
    let dir = tempfile::tempdir().unwrap();
    let store = store_2x2(dir.path());
    let sock = dir.path().join("gw.sock");
    let registry = Arc::new(Registry::new());
    let gwc = GwChan::bind(
        &GwChanConfig {
            listen: Some("127.0.0.1:0".parse().unwrap()),
            unix: vec![sock.clone()],
            ..GwChanConfig::default()
        },
        Arc::clone(&registry),
    )
    .await
    .unwrap();
    let tcp = gwc.local_addr().unwrap();
    let wrr = Arc::new(Mutex::new(Wrr::default()));
    tokio::spawn(gwc.run(
        store.subscribe(),
        Arc::clone(&wrr),
        Arc::new(tokio::sync::Notify::new()),
        std::future::pending(),
    ));
    // Branch 1 over clear TCP: three reports of a busy group 1→2.
    let mut g1 = Peer::new(TcpStream::connect(tcp).await.unwrap());
    let g1_addr = g1.s.local_addr().unwrap().to_string();
    config(g1.register(1).await);
    for i in 1..=3 {
        g1.send(&busy_report(2, i * 5_000_000)).await;
    }
    // Branch 2 over the unix socket: three reports of group 2→1.
    let mut g2 = Peer::new(UnixStream::connect(&sock).await.unwrap());
    config(g2.register(2).await);
    for i in 1..=3 {
        g2.send(&busy_report(1, i * 5_000_000)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let fed = |a: u8| {
        wrr.lock()
            .unwrap()
            .observations()
            .keys()
            .filter(|k| k.0.get() == a)
            .count()
    };
    loop {
        let l = registry.list();
        let shown = l
            .gateways
            .iter()
            .filter(|g| g.last_report.is_some())
            .count();
        if l.unauthenticated_reports == 3 && fed(2) > 0 && shown == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "{l:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        fed(1),
        0,
        "a clear TCP report reached the capacity estimates"
    );
    assert_eq!(
        wrr.lock()
            .unwrap()
            .observations()
            .keys()
            .map(|k| (k.0.get(), k.1.get(), k.2.get()))
            .collect::<Vec<_>>(),
        vec![(2, 1, 0)]
    );
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    // (Other tests of this binary log into the same buffer: the line of our session is the
    // one with its peer address.)
    let warned = text
        .lines()
        .filter(|l| l.contains("gateway registered over clear TCP (unauthenticated)"))
        .filter(|l| l.contains(&g1_addr))
        .collect::<Vec<_>>();
    assert_eq!(warned.len(), 1, "{g1_addr}: {text}");
    assert!(warned[0].contains("branch=1"), "{text}");
}

/// Learned WAN addresses (protocol 5, docs/ssc.md "Learned WAN addresses"): gateway 2 reports a
/// new address and next hop on port a; the inventory takes them, gateway 1 gets a config with
/// the new remote address, and `GET /api/v1/gateways` shows the report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learned_wan_state_updates_the_inventory_and_the_peers() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_2x2(dir.path());
    let sock = dir.path().join("gw.sock");
    let registry = Arc::new(Registry::new());
    registry.learn_into(Arc::clone(&store));
    let gwc = GwChan::bind(
        &GwChanConfig {
            listen: Some("127.0.0.1:0".parse().unwrap()),
            unix: vec![sock.clone()],
            ..GwChanConfig::default()
        },
        Arc::clone(&registry),
    )
    .await
    .unwrap();
    let tcp = gwc.local_addr().unwrap();
    let wrr = Arc::new(Mutex::new(Wrr::default()));
    tokio::spawn(gwc.run(
        store.subscribe(),
        Arc::clone(&wrr),
        Arc::new(tokio::sync::Notify::new()),
        std::future::pending(),
    ));
    let app = router(
        AppState::new(Arc::clone(&store), TOKEN).with_gateways(Arc::clone(&registry)),
        1 << 20,
    );
    let mut g1 = Peer::new(UnixStream::connect(&sock).await.unwrap());
    let c1 = config(g1.register(1).await);
    assert_eq!(c1.remotes[0].wan_addresses[0].to_string(), "198.18.20.2");
    let mut g2 = Peer::new(UnixStream::connect(&sock).await.unwrap());
    let _ = config(g2.register(2).await);
    let t0 = Instant::now();
    g2.send(&GatewayMsg::WanState(gwchan::WanState {
        ports: vec![gwchan::WanLearned {
            port: 0,
            name: "wan0".into(),
            address: Some("198.18.20.77/24".parse().unwrap()),
            next_hop: Some("198.18.20.254".parse().unwrap()),
            next_hop_mac: Some("02:00:c6:12:14:fe".parse().unwrap()),
        }],
    }))
    .await;
    let n1 = config(g1.recv().await);
    eprintln!("wan_state → peer's new config in {:?}", t0.elapsed());
    assert!(n1.version > c1.version);
    assert_eq!(
        n1.remotes[0]
            .wan_addresses
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        vec!["198.18.20.77", "198.18.21.2"]
    );
    let b = get(&app, "/api/v1/branches/2").await;
    assert_eq!(b["wan"][0]["address"], "198.18.20.77/24", "{b:#}");
    assert_eq!(b["wan"][0]["gateway"], "198.18.20.254", "{b:#}");
    assert_eq!(b["wan"][0]["gateway_mac"], "02:00:c6:12:14:fe", "{b:#}");
    assert_eq!(b["wan"][1]["address"], "198.18.21.2/24", "{b:#}");
    let v = get(&app, "/api/v1/gateways").await;
    let g = v["gateways"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["branch"] == 2)
        .unwrap();
    assert_eq!(
        g["wan_learned"]["ports"][0]["address"], "198.18.20.77/24",
        "{v:#}"
    );
    // The same state again changes nothing: no new config for gateway 1.
    g2.send(&GatewayMsg::WanState(gwchan::WanState {
        ports: vec![gwchan::WanLearned {
            port: 0,
            name: "wan0".into(),
            address: Some("198.18.20.77/24".parse().unwrap()),
            next_hop: None,
            next_hop_mac: None,
        }],
    }))
    .await;
    let again = tokio::time::timeout(Duration::from_millis(500), g1.recv()).await;
    assert!(again.is_err(), "unexpected push: {again:?}");
    // Branch 2 again over clear TCP (unauthenticated: anyone who reaches the port can claim
    // it): its state is shown, never committed, and gateway 1 keeps its remote address.
    let mut g2t = Peer::new(TcpStream::connect(tcp).await.unwrap());
    let _ = config(g2t.register(2).await);
    g2t.send(&GatewayMsg::WanState(gwchan::WanState {
        ports: vec![gwchan::WanLearned {
            port: 0,
            name: "wan0".into(),
            address: Some("198.18.20.99/24".parse().unwrap()),
            next_hop: None,
            next_hop_mac: None,
        }],
    }))
    .await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let v = get(&app, "/api/v1/gateways").await;
        let shown = v["gateways"].as_array().unwrap().iter().any(|g| {
            g["branch"] == 2 && g["wan_learned"]["ports"][0]["address"] == "198.18.20.99/24"
        });
        if shown {
            break;
        }
        assert!(Instant::now() < deadline, "{v:#}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let again = tokio::time::timeout(Duration::from_millis(500), g1.recv()).await;
    assert!(
        again.is_err(),
        "a clear TCP wan_state was pushed: {again:?}"
    );
    let b = get(&app, "/api/v1/branches/2").await;
    assert_eq!(b["wan"][0]["address"], "198.18.20.77/24", "{b:#}");
}
