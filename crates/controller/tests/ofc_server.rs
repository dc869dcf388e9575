//! The OFC driver against fake switches in-process (no OVS): each fake switch is an `ofproto`
//! channel on the switch side of a unix socket, with a flow table it really edits (ADD,
//! MODIFY_STRICT, DELETE by cookie mask) and a log of what it received.
//!
//! - a switch that connects with stale, changed and foreign flows is reconciled to exactly the
//!   compiled table, foreign flows untouched;
//! - an inventory change is pushed step by step across switches: every destination entry is
//!   confirmed (barrier) on every switch before any transit entry is sent, transits before sources;
//! - a switch that stops answering barriers is dropped after `stage_timeout` without stalling
//!   the others, and is reconciled again when it reconnects;
//! - a peer that sends garbage is dropped and the others are unaffected;
//! - the TCP listener serves switches like the unix one.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{branch, example};
use controller::inventory::InventoryFile;
use controller::ofc::flowmod::{flow_mod, from_flow_stats};
use controller::ofc::{Ofc, OfcConfig};
use controller::path_group::{GroupsFile, PathGroupId};
use controller::sdc::Sdc;
use controller::store::Store;
use controller::swap::{Cookie, CookieInfo, FlowEntry, FlowTables, HopRole};
use ofproto::channel::{Channel, Config, Event};
use ofproto::message::{FlowModCommand, SwitchFeatures};
use ofproto::multipart::{FlowStats, MultipartReply, MultipartReplyBody, MultipartRequestBody};
use ofproto::{Body, Message};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// What any fake switch received, in one global order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    /// ADD or MODIFY_STRICT of this cookie.
    Install(u64),
    /// DELETE (or DELETE_STRICT) of this cookie.
    Delete(u64),
    /// A barrier answered.
    Barrier,
}

type Log = Arc<Mutex<Vec<(u64, Seen)>>>;

#[derive(Debug, Default)]
struct Model {
    flows: Vec<FlowStats>,
    barriers: u64,
    connected: bool,
}

struct FakeSwitch {
    model: Arc<Mutex<Model>>,
    answer_barriers: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

fn stats_of(fm: &ofproto::message::FlowMod) -> FlowStats {
    FlowStats {
        table_id: fm.table_id,
        duration_sec: 0,
        duration_nsec: 0,
        priority: fm.priority,
        idle_timeout: fm.idle_timeout,
        hard_timeout: fm.hard_timeout,
        flags: fm.flags,
        cookie: fm.cookie,
        packet_count: 0,
        byte_count: 0,
        match_: fm.match_.clone(),
        instructions: fm.instructions.clone(),
    }
}

fn apply(model: &mut Model, fm: &ofproto::message::FlowMod) {
    match fm.command {
        FlowModCommand::Add => {
            model
                .flows
                .retain(|f| !(f.priority == fm.priority && f.match_ == fm.match_));
            model.flows.push(stats_of(fm));
        }
        FlowModCommand::ModifyStrict => {
            for f in &mut model.flows {
                if f.priority == fm.priority && f.match_ == fm.match_ {
                    f.instructions = fm.instructions.clone();
                }
            }
        }
        FlowModCommand::Delete => model
            .flows
            .retain(|f| f.cookie & fm.cookie_mask != fm.cookie & fm.cookie_mask),
        FlowModCommand::DeleteStrict => model.flows.retain(|f| {
            !(f.table_id == fm.table_id
                && f.priority == fm.priority
                && f.match_ == fm.match_
                && f.cookie & fm.cookie_mask == fm.cookie & fm.cookie_mask)
        }),
        other => panic!("unexpected {other:?}"),
    }
}

impl FakeSwitch {
    async fn connect(path: PathBuf, dpid: u64, flows: Vec<FlowStats>) -> Self {
        Self::connect_logged(path, dpid, flows, Log::default()).await
    }

    async fn connect_logged(path: PathBuf, dpid: u64, flows: Vec<FlowStats>, log: Log) -> Self {
        let sock = UnixStream::connect(&path).await.unwrap();
        Self::over(sock, dpid, flows, log)
    }

    fn over<S>(mut sock: S, dpid: u64, flows: Vec<FlowStats>, log: Log) -> Self
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let model = Arc::new(Mutex::new(Model {
            flows,
            ..Model::default()
        }));
        let answer = Arc::new(AtomicBool::new(true));
        let (m, a) = (Arc::clone(&model), Arc::clone(&answer));
        let task = tokio::spawn(async move {
            let mut ch = Channel::new(Instant::now(), Config::default());
            let mut buf = vec![0u8; 65536];
            let mut out = Vec::new();
            loop {
                if ch.poll_transmit(&mut out) {
                    if sock.write_all(&out).await.is_err() {
                        break;
                    }
                    out.clear();
                }
                let n = match tokio::time::timeout(Duration::from_millis(50), sock.read(&mut buf))
                    .await
                {
                    Ok(Ok(0)) | Ok(Err(_)) => break,
                    Ok(Ok(n)) => n,
                    Err(_) => {
                        ch.handle_timeout(Instant::now());
                        continue;
                    }
                };
                ch.handle_input(Instant::now(), &buf[..n]);
                while let Some(ev) = ch.poll_event() {
                    let Event::Message(Message { xid, body }) = ev else {
                        if let Event::Connected { .. } = ev {
                            m.lock().unwrap().connected = true;
                        }
                        continue;
                    };
                    let reply = |body| Body::MultipartReply(MultipartReply { flags: 0, body });
                    let answer = match body {
                        Body::FeaturesRequest => Some(Body::FeaturesReply(SwitchFeatures {
                            datapath_id: dpid,
                            n_tables: 254,
                            ..SwitchFeatures::default()
                        })),
                        Body::MultipartRequest(r) => match r.body {
                            MultipartRequestBody::Flow(req) => {
                                let flows = m
                                    .lock()
                                    .unwrap()
                                    .flows
                                    .iter()
                                    .filter(|f| f.cookie & req.cookie_mask == req.cookie)
                                    .cloned()
                                    .collect();
                                Some(reply(MultipartReplyBody::Flow(flows)))
                            }
                            MultipartRequestBody::PortStats(_) => {
                                Some(reply(MultipartReplyBody::PortStats(Vec::new())))
                            }
                            MultipartRequestBody::PortDesc => {
                                Some(reply(MultipartReplyBody::PortDesc(Vec::new())))
                            }
                            other => panic!("unexpected multipart {other:?}"),
                        },
                        Body::FlowMod(fm) => {
                            let seen = if matches!(
                                fm.command,
                                FlowModCommand::Delete | FlowModCommand::DeleteStrict
                            ) {
                                Seen::Delete(fm.cookie)
                            } else {
                                Seen::Install(fm.cookie)
                            };
                            log.lock().unwrap().push((dpid, seen));
                            apply(&mut m.lock().unwrap(), &fm);
                            None
                        }
                        Body::BarrierRequest => {
                            if a.load(Ordering::SeqCst) {
                                m.lock().unwrap().barriers += 1;
                                log.lock().unwrap().push((dpid, Seen::Barrier));
                                Some(Body::BarrierReply)
                            } else {
                                None
                            }
                        }
                        other => panic!("unexpected {other:?}"),
                    };
                    if let Some(b) = answer {
                        ch.send_with_xid(xid, b).unwrap();
                    }
                }
            }
            m.lock().unwrap().connected = false;
        });
        Self {
            model,
            answer_barriers: answer,
            task,
        }
    }

    fn table(&self) -> BTreeSet<(u64, String)> {
        self.model
            .lock()
            .unwrap()
            .flows
            .iter()
            .map(|f| {
                (
                    f.cookie,
                    from_flow_stats(f).map_or_else(|| "?".to_owned(), |e| e.to_ofctl()),
                )
            })
            .collect()
    }
}

fn want(tables: &FlowTables, b: u8) -> BTreeSet<(u64, String)> {
    tables
        .switch(branch(b))
        .iter()
        .map(|f| (f.cookie.0, f.to_ofctl()))
        .collect()
}

async fn eventually(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "{what}: not within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    sock: PathBuf,
    store: Arc<Store>,
    sdc: Arc<Mutex<Sdc>>,
    stop: tokio::sync::watch::Sender<bool>,
    server: tokio::task::JoinHandle<()>,
}

async fn setup(stage_timeout: Duration) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("ofc.sock");
    let store = Arc::new(Store::open(&dir.path().join("ssc.redb")).unwrap());
    let inv: InventoryFile = toml::from_str(&example("inventory-paper.toml")).unwrap();
    let groups: GroupsFile = toml::from_str(&example("paths-paper-table2.toml")).unwrap();
    store.import(inv, groups, None).unwrap();
    let ofc = Ofc::bind(OfcConfig {
        listen: None,
        unix: vec![sock.clone()],
        stage_timeout,
        request_timeout: Duration::from_secs(3),
        stats_interval: Duration::from_millis(100),
        ..OfcConfig::default()
    })
    .await
    .unwrap();
    let sdc = Arc::new(Mutex::new(Sdc::default()));
    let (stop, mut rx) = tokio::sync::watch::channel(false);
    let server = tokio::spawn(ofc.run(store.subscribe(), Arc::clone(&sdc), async move {
        let _ = rx.wait_for(|s| *s).await;
    }));
    Setup {
        _dir: dir,
        sock,
        store,
        sdc,
        stop,
        server,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_on_connect_fixes_stale_changed_and_missing_flows() {
    let s = setup(Duration::from_secs(2)).await;
    let tables = s.store.catalog().unwrap().flows().clone();
    let compiled = tables.switch(branch(3));
    // Half of branch 3's flows, one with other actions, a stale one of ours, a foreign one.
    let mut pre: Vec<FlowStats> = compiled
        .iter()
        .step_by(2)
        .map(|f| stats_of(&flow_mod(f, FlowModCommand::Add)))
        .collect();
    let mut changed: FlowEntry = compiled[1].clone();
    changed.actions.pop();
    pre.push(stats_of(&flow_mod(&changed, FlowModCommand::Add)));
    let mut stale = compiled[0].clone();
    stale.cookie = Cookie(Cookie::member(
        controller::path_group::PathCode::from_port(0x21f9).unwrap(),
    ));
    stale.matches.tcp_dst = Some(0x21f9);
    pre.push(stats_of(&flow_mod(&stale, FlowModCommand::Add)));
    let mut foreign = compiled[0].clone();
    foreign.cookie = Cookie(0x1);
    foreign.priority = 5;
    pre.push(stats_of(&flow_mod(&foreign, FlowModCommand::Add)));

    let sw = FakeSwitch::connect(s.sock.clone(), 3, pre).await;
    let mut expected = want(&tables, 3);
    expected.insert((0x1, foreign.to_ofctl()));
    eventually("branch 3 reconciled", Duration::from_secs(5), || {
        sw.table() == expected
    })
    .await;
    eventually("reconcile recorded", Duration::from_secs(5), || {
        let v = s.sdc.lock().unwrap().view(Instant::now());
        v.branches
            .iter()
            .any(|b| b.branch == 3 && b.reconciles == 1 && b.flows_reported == 12)
    })
    .await;
    s.stop.send(true).unwrap();
    s.server.await.unwrap();
    sw.task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_go_stage_by_stage_and_a_stuck_switch_stalls_nobody() {
    let s = setup(Duration::from_millis(500)).await;
    let old = s.store.catalog().unwrap().flows().clone();
    let log = Log::default();
    let mut sws = Vec::new();
    for b in 1..=5u64 {
        sws.push(FakeSwitch::connect_logged(s.sock.clone(), b, Vec::new(), Arc::clone(&log)).await);
    }
    for (i, sw) in sws.iter().enumerate() {
        let b = u8::try_from(i + 1).unwrap();
        eventually(&format!("gw{b} programmed"), Duration::from_secs(5), || {
            sw.table() == want(&old, b)
        })
        .await;
    }
    log.lock().unwrap().clear();
    // Switch 4 stops answering barriers.
    sws[3].answer_barriers.store(false, Ordering::SeqCst);
    // Group 4 of 1 → 2 gets members through 3 and 5 (and loses the one through 4).
    let members = ["1b>2b", "1a>3b>3a>2b", "1b>5a>5b>2a", "1a>5b>5a>2a"]
        .iter()
        .map(|m| m.parse().unwrap())
        .collect();
    let t0 = Instant::now();
    let new = s
        .store
        .update(|c| c.set_group(branch(1), branch(2), PathGroupId::new(4).unwrap(), members))
        .unwrap()
        .flows()
        .clone();
    for b in [1u8, 2, 3, 5] {
        let sw = &sws[usize::from(b) - 1];
        eventually(&format!("gw{b} updated"), Duration::from_secs(3), || {
            sw.table() == want(&new, b)
        })
        .await;
    }
    let took = t0.elapsed();
    // Only the removal of 4's transits touched switch 4: it never confirmed, so it was dropped
    // after one stage timeout (500 ms), and the others did not wait longer than that per step.
    assert!(took < Duration::from_millis(2500), "{took:?}");
    eventually("gw4 dropped", Duration::from_secs(3), || {
        !sws[3].model.lock().unwrap().connected
    })
    .await;
    // Globally, make before break: no install after a delete; the installs come in stage order (destination,
    // transit, source), and before the first entry of a later stage every switch that got an
    // entry of the earlier stage had answered a barrier after it.
    let log = log.lock().unwrap().clone();
    // Install rank: destination 0, transit 1, source 2.
    let stage = |c: u64| match Cookie(c).decode() {
        Some(CookieInfo::Swap { role, .. }) => match role {
            HopRole::Destination => 0u8,
            HopRole::Transit => 1,
            HopRole::Source => 2,
        },
        other => panic!("unexpected cookie {c:#x}: {other:?}"),
    };
    let first_delete = log
        .iter()
        .position(|(_, e)| matches!(e, Seen::Delete(_)))
        .unwrap();
    assert!(log[first_delete..]
        .iter()
        .all(|(_, e)| !matches!(e, Seen::Install(_))));
    assert!(log
        .iter()
        .any(|(sw, e)| *sw == 4 && matches!(e, Seen::Delete(_))));
    let installs: Vec<(usize, u64, u8)> = log
        .iter()
        .enumerate()
        .filter_map(|(i, (sw, e))| match e {
            Seen::Install(c) => Some((i, *sw, stage(*c))),
            _ => None,
        })
        .collect();
    let roles: Vec<u8> = installs.iter().map(|x| x.2).collect();
    let mut sorted = roles.clone();
    sorted.sort();
    assert_eq!(roles, sorted, "installs out of stage order");
    assert_eq!(
        roles.iter().copied().collect::<BTreeSet<u8>>(),
        BTreeSet::from([0, 1, 2])
    );
    for (i, sw, role) in &installs {
        // The next install of a later stage...
        if let Some((j, _, _)) = installs.iter().find(|(j, _, r)| j > i && r > role) {
            // ...comes after a barrier of this switch that follows this install.
            assert!(
                log[*i..*j]
                    .iter()
                    .any(|(s2, e)| s2 == sw && *e == Seen::Barrier),
                "switch {sw}: stage {role} entry at {i} not confirmed before the next stage at {j}"
            );
        }
    }
    // Reconnect switch 4 (answering again): it is reconciled to the new table.
    sws[3].task.abort();
    let sw4 = FakeSwitch::connect(s.sock.clone(), 4, Vec::new()).await;
    eventually("gw4 back", Duration::from_secs(3), || {
        sw4.table() == want(&new, 4)
    })
    .await;
    s.stop.send(true).unwrap();
    s.server.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_peer_is_dropped_others_unaffected() {
    let s = setup(Duration::from_secs(2)).await;
    let tables = s.store.catalog().unwrap().flows().clone();
    let good = FakeSwitch::connect(s.sock.clone(), 5, Vec::new()).await;
    let mut bad = UnixStream::connect(&s.sock).await.unwrap();
    // A header claiming length 2 cannot be framed.
    bad.write_all(&[0x04, 0x00, 0x00, 0x02, 0, 0, 0, 1, 0xde, 0xad])
        .await
        .unwrap();
    let mut buf = [0u8; 256];
    let closed = tokio::time::timeout(Duration::from_secs(3), async {
        loop {
            match bad.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the garbage peer was not dropped");
    // A datapath id that is no branch is refused too.
    let stranger = FakeSwitch::connect(s.sock.clone(), 0x1234, Vec::new()).await;
    eventually("stranger dropped", Duration::from_secs(3), || {
        stranger.task.is_finished()
    })
    .await;
    eventually("gw5 programmed", Duration::from_secs(3), || {
        good.table() == want(&tables, 5)
    })
    .await;
    assert!(good.model.lock().unwrap().connected);
    s.stop.send(true).unwrap();
    s.server.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_listener_serves_switches_too() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("ssc.redb")).unwrap());
    let inv: InventoryFile = toml::from_str(&example("inventory-paper.toml")).unwrap();
    let groups: GroupsFile = toml::from_str(&example("paths-paper-table2.toml")).unwrap();
    store.import(inv, groups, None).unwrap();
    let tables = store.catalog().unwrap().flows().clone();
    let ofc = Ofc::bind(OfcConfig {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        ..OfcConfig::default()
    })
    .await
    .unwrap();
    let addr = ofc.local_addr().unwrap();
    let (stop, mut rx) = tokio::sync::watch::channel(false);
    let server = tokio::spawn(ofc.run(
        store.subscribe(),
        Arc::new(Mutex::new(Sdc::default())),
        async move {
            let _ = rx.wait_for(|s| *s).await;
        },
    ));
    let sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    let sw = FakeSwitch::over(sock, 2, Vec::new(), Log::default());
    eventually("gw2 programmed over TCP", Duration::from_secs(5), || {
        sw.table() == want(&tables, 2)
    })
    .await;
    stop.send(true).unwrap();
    server.await.unwrap();
}

/// Every log line of this test binary (the OFC's refusal lines are asserted on).
fn logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: std::sync::OnceLock<Arc<Mutex<Vec<u8>>>> = std::sync::OnceLock::new();
    let buf = LOGS.get_or_init(|| Arc::new(Mutex::new(Vec::new())));
    struct W(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for W {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let b = Arc::clone(buf);
    let _ = tracing_subscriber::fmt()
        .with_env_filter("controller=info")
        .with_ansi(false)
        .with_writer(move || W(Arc::clone(&b)))
        .try_init();
    Arc::clone(buf)
}

fn log_lines_with(logs: &Mutex<Vec<u8>>, needle: &str) -> Vec<String> {
    String::from_utf8_lossy(&logs.lock().unwrap())
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_owned)
        .collect()
}

/// The OFC with a unix socket (authenticated by its permissions) and a clear TCP listener.
async fn setup_unix_and_clear() -> (Setup, std::net::SocketAddr) {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("ofc.sock");
    let store = Arc::new(Store::open(&dir.path().join("ssc.redb")).unwrap());
    let inv: InventoryFile = toml::from_str(&example("inventory-paper.toml")).unwrap();
    let groups: GroupsFile = toml::from_str(&example("paths-paper-table2.toml")).unwrap();
    store.import(inv, groups, None).unwrap();
    let ofc = Ofc::bind(OfcConfig {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        unix: vec![sock.clone()],
        request_timeout: Duration::from_secs(3),
        stats_interval: Duration::from_millis(50),
        ..OfcConfig::default()
    })
    .await
    .unwrap();
    let addr = ofc.local_addr().unwrap();
    let sdc = Arc::new(Mutex::new(Sdc::default()));
    let (stop, mut rx) = tokio::sync::watch::channel(false);
    let server = tokio::spawn(ofc.run(store.subscribe(), Arc::clone(&sdc), async move {
        let _ = rx.wait_for(|s| *s).await;
    }));
    (
        Setup {
            _dir: dir,
            sock,
            store,
            sdc,
            stop,
            server,
        },
        addr,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clear_tcp_switch_cannot_take_over_an_authenticated_one() {
    let logs = logs();
    let (s, addr) = setup_unix_and_clear().await;
    let tables = s.store.catalog().unwrap().flows().clone();
    let real = FakeSwitch::connect(s.sock.clone(), 2, Vec::new()).await;
    eventually(
        "gw2 programmed over its unix socket",
        Duration::from_secs(5),
        || real.table() == want(&tables, 2),
    )
    .await;
    // The unix socket is the authentication: only its owner may connect.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&s.sock).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "socket mode {mode:o}");

    // A rogue on the clear listener claims datapath 2.
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let rogue_addr = tcp.local_addr().unwrap();
    let rogue = FakeSwitch::over(tcp, 2, Vec::new(), Log::default());
    eventually("the rogue is disconnected", Duration::from_secs(5), || {
        rogue.task.is_finished()
    })
    .await;
    assert!(rogue.table().is_empty(), "the rogue got flows");
    // The real switch keeps its connection and its table, and nothing was pushed to it again.
    let barriers = real.model.lock().unwrap().barriers;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        real.model.lock().unwrap().connected,
        "the real switch lost its connection"
    );
    assert_eq!(real.table(), want(&tables, 2));
    assert_eq!(
        real.model.lock().unwrap().barriers,
        barriers,
        "the real switch was reconciled again"
    );
    let view = s.sdc.lock().unwrap().view(Instant::now());
    let b2 = view.branches.iter().find(|b| b.branch == 2).unwrap();
    assert!(b2.connected && b2.authenticated, "{b2:?}");
    assert!(b2.peer.starts_with("unix:"), "{}", b2.peer);
    assert_eq!(b2.reconciles, 1);
    assert_eq!(
        view.openflow_refusals.takeover, 1,
        "{:?}",
        view.openflow_refusals
    );
    let lines = log_lines_with(&logs, &format!("OpenFlow {rogue_addr} claims branch 2"));
    assert_eq!(lines.len(), 1, "one refusal line: {lines:?}");
    assert!(
        lines[0].contains("WARN") && lines[0].contains("keeps connection"),
        "{}",
        lines[0]
    );

    // A second and third attempt from the same source are refused too, counted, not logged.
    for _ in 0..2 {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let rogue = FakeSwitch::over(tcp, 2, Vec::new(), Log::default());
        eventually("the rogue is disconnected", Duration::from_secs(5), || {
            rogue.task.is_finished()
        })
        .await;
    }
    let refusals = s.sdc.lock().unwrap().view(Instant::now()).openflow_refusals;
    assert_eq!(refusals.takeover, 3);
    assert!(refusals.log_suppressed >= 2, "{refusals:?}");
    assert_eq!(
        log_lines_with(&logs, "claims branch 2").len(),
        1,
        "rate-limited"
    );
    assert!(real.model.lock().unwrap().connected);
    assert_eq!(real.table(), want(&tables, 2));

    // When the authenticated switch is gone, a clear switch may serve the branch (explicitly
    // enabled listener), unauthenticated.
    real.task.abort();
    eventually("branch 2 disconnected", Duration::from_secs(5), || {
        let v = s.sdc.lock().unwrap().view(Instant::now());
        v.branches.iter().any(|b| b.branch == 2 && !b.connected)
    })
    .await;
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let clear = FakeSwitch::over(tcp, 2, Vec::new(), Log::default());
    eventually(
        "gw2 programmed over clear TCP",
        Duration::from_secs(5),
        || clear.table() == want(&tables, 2),
    )
    .await;
    let view = s.sdc.lock().unwrap().view(Instant::now());
    let b2 = view.branches.iter().find(|b| b.branch == 2).unwrap();
    assert!(b2.connected && !b2.authenticated, "{b2:?}");
    s.stop.send(true).unwrap();
    s.server.await.unwrap();
}

/// Lets the fake switch's forward source flows of pair (1, 2) count traffic: the first group
/// 1000 times as much as the others.
fn count_traffic(sw: &FakeSwitch) -> tokio::task::JoinHandle<()> {
    let m = Arc::clone(&sw.model);
    tokio::spawn(async move {
        loop {
            for f in &mut m.lock().unwrap().flows {
                if let Some(CookieInfo::Swap {
                    code,
                    direction: controller::swap::Direction::Forward,
                    role: HopRole::Source,
                    ..
                }) = Cookie(f.cookie).decode()
                {
                    if code.source == branch(1) && code.destination == branch(2) {
                        let add = if code.group == PathGroupId::new(1).unwrap() {
                            1_000_000
                        } else {
                            1_000
                        };
                        f.byte_count += add;
                        f.packet_count += 1;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
}

/// What the WRR publishes for pair (1, 2) after observing `groups` once.
fn weights_1_2(store: &Store, groups: &[controller::sdc::GroupStats]) -> (bool, Vec<(u8, u32)>) {
    let cat = store.catalog().unwrap();
    let mut wrr = controller::wrr::Wrr::default();
    let observed = wrr.observe_stats(groups);
    wrr.update(cat.inventory(), cat.groups());
    let w = wrr
        .pair(branch(1), branch(2))
        .unwrap()
        .groups
        .iter()
        .map(|g| (g.group, g.weight))
        .collect();
    (observed, w)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_statistics_never_reach_the_wrr() {
    let (s, addr) = setup_unix_and_clear().await;
    let tables = s.store.catalog().unwrap().flows().clone();
    let (_, configured) = weights_1_2(&s.store, &[]);

    // Branch 1 on the clear listener, its flows counting traffic.
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let clear = FakeSwitch::over(tcp, 1, Vec::new(), Log::default());
    eventually(
        "gw1 programmed over clear TCP",
        Duration::from_secs(5),
        || clear.table() == want(&tables, 1),
    )
    .await;
    let counting = count_traffic(&clear);
    eventually(
        "samples of the clear switch",
        Duration::from_secs(5),
        || {
            let v = s.sdc.lock().unwrap().view(Instant::now());
            v.unauthenticated_samples >= 3
                && v.branches
                    .iter()
                    .any(|b| b.branch == 1 && b.flows.iter().any(|f| f.bits_per_s > 0.0))
        },
    )
    .await;
    let view = s.sdc.lock().unwrap().view(Instant::now());
    let b1 = view.branches.iter().find(|b| b.branch == 1).unwrap();
    assert!(!b1.authenticated && b1.bytes > 0, "its counters are shown");
    assert!(view.groups.is_empty() && view.members.is_empty() && view.pairs.is_empty());
    let (observed, weights) = weights_1_2(&s.store, &view.groups);
    assert!(!observed, "unauthenticated rates reached the WRR");
    assert_eq!(weights, configured);
    counting.abort();
    clear.task.abort();
    eventually("branch 1 disconnected", Duration::from_secs(5), || {
        let v = s.sdc.lock().unwrap().view(Instant::now());
        v.branches.iter().any(|b| b.branch == 1 && !b.connected)
    })
    .await;

    // The same switch and traffic over the unix socket (authenticated): the WRR moves.
    let real = FakeSwitch::connect(s.sock.clone(), 1, Vec::new()).await;
    eventually("gw1 programmed over unix", Duration::from_secs(5), || {
        real.table() == want(&tables, 1)
    })
    .await;
    let counting = count_traffic(&real);
    eventually(
        "group rates of the authenticated switch",
        Duration::from_secs(5),
        || {
            let v = s.sdc.lock().unwrap().view(Instant::now());
            v.groups
                .iter()
                .any(|g| g.source == 1 && g.destination == 2 && g.traffic.forward_bits_per_s > 0.0)
        },
    )
    .await;
    let view = s.sdc.lock().unwrap().view(Instant::now());
    let (observed, weights) = weights_1_2(&s.store, &view.groups);
    assert!(observed);
    assert_ne!(
        weights, configured,
        "the control: measured rates do move the weights"
    );
    counting.abort();
    s.stop.send(true).unwrap();
    s.server.await.unwrap();
}

/// Issue #17: bounded pre-auth state on the OpenFlow TCP listeners: at most `per_source` silent
/// connections from one address (the next is closed at once, counted, one log line for many),
/// a switch from another address is still served, the deadline closes the silent ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_auth_connections_are_capped_and_timed_out() {
    let logs = logs();
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("ssc.redb")).unwrap());
    let inv: InventoryFile = toml::from_str(&example("inventory-paper.toml")).unwrap();
    let groups: GroupsFile = toml::from_str(&example("paths-paper-table2.toml")).unwrap();
    store.import(inv, groups, None).unwrap();
    let tables = store.catalog().unwrap().flows().clone();
    let ofc = Ofc::bind(OfcConfig {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        preauth: controller::preauth::PreAuthLimits {
            total: 10,
            per_source: 3,
            deadline: Duration::from_millis(800),
            ..Default::default()
        },
        ..OfcConfig::default()
    })
    .await
    .unwrap();
    let addr = ofc.local_addr().unwrap();
    let guard = ofc.guard();
    let sdc = Arc::new(Mutex::new(Sdc::default()));
    tokio::spawn(ofc.run(store.subscribe(), Arc::clone(&sdc), std::future::pending()));
    let connect_from = |src: &'static str| async move {
        let s = tokio::net::TcpSocket::new_v4().unwrap();
        s.bind(format!("{src}:0").parse().unwrap()).unwrap();
        s.connect(addr).await.unwrap()
    };
    let t0 = Instant::now();
    // 3 half-open connections from 127.0.0.9 (they read our HELLO and say nothing).
    let mut silent = Vec::new();
    for _ in 0..3 {
        silent.push(connect_from("127.0.0.9").await);
    }
    eventually("3 pending", Duration::from_secs(2), || {
        guard.counters().pending == 3
    })
    .await;
    // 50 more from the same address: each closed at once.
    for _ in 0..50 {
        let mut s = connect_from("127.0.0.9").await;
        let mut b = [0u8; 64];
        let r = tokio::time::timeout(Duration::from_secs(2), s.read(&mut b)).await;
        assert!(
            matches!(r, Ok(Ok(0) | Err(_))),
            "an over-cap connection was served: {r:?}"
        );
    }
    let c = guard.counters();
    assert_eq!((c.over_source, c.pending), (50, 3), "{c:?}");
    let lines = log_lines_with(&logs, "source=127.0.0.9");
    assert_eq!(lines.len(), 1, "one line for 50 refusals: {lines:?}");
    // A switch from another address is served meanwhile.
    let sw = FakeSwitch::over(
        connect_from("127.0.0.10").await,
        4,
        Vec::new(),
        Log::default(),
    );
    eventually("gw4 programmed", Duration::from_secs(5), || {
        sw.table() == want(&tables, 4)
    })
    .await;
    // The silent ones are closed by the deadline.
    for s in &mut silent {
        let mut b = [0u8; 64];
        loop {
            match tokio::time::timeout(Duration::from_secs(3), s.read(&mut b)).await {
                Ok(Ok(0) | Err(_)) => break,
                Ok(Ok(_)) => {}
                Err(_) => panic!("a silent connection outlived the deadline"),
            }
        }
    }
    assert!(t0.elapsed() >= Duration::from_millis(700));
    eventually("timeouts counted", Duration::from_secs(2), || {
        let c = guard.counters();
        c.handshake_timeout == 3 && c.pending == 0
    })
    .await;
    assert_eq!(
        sdc.lock()
            .unwrap()
            .view(Instant::now())
            .openflow_refusals
            .handshake_timeout,
        3
    );
    assert!(
        sw.model.lock().unwrap().connected,
        "the served switch is undisturbed"
    );
}
