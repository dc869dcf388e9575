//! netns integration test of the gateway channel (`docs/gwchan.md`) on the 2x2 testbed (no OVS):
//! `ssc` runs in the root namespace with the 2-branch inventory (`examples/inventory-2x2.toml`,
//! `examples/paths-2x2.toml`) and a gateway unix socket; both `mmsg` run with NO remotes in their
//! config and a `[controller]` section.
//!
//! Proves: (1) the tunnels come up from the pushed config alone (ping h1 → h2, 4 subflows per
//! connection); (2) a weight change through the REST API (port capacity) reaches both gateways
//! within 1 s (measured and printed), in place: no tunnel connection is re-established, and the
//! weights the gateways cached are those `GET /api/v1/weights` shows; (3) with `ssc` killed, ping
//! still works; (4) `mmsg` restarted while `ssc` is down starts from its cache (source `cache`)
//! and ping works; (5) `ssc` back: both gateways re-sync (`GET /api/v1/gateways` shows the
//! controller's version acked, source `controller`). Needs root; fails, never skips.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::ssc::{spawn_ssc, ssc_bin};
use common::tls::TestPki;
use common::{netns, repo_root, require_root_and, run_ok, start_mmsg, status, Proc, Testbed, MMSG};

const TOKEN: &str = "gwchan-netns-test-token-0123";

/// `ssc run` in the root namespace; returns the process and the REST API base URL.
fn start_ssc(dir: &Path, log: PathBuf) -> (Proc, String) {
    spawn_ssc(None, &dir.join("ssc.toml"), &log)
}

fn ssc(api: &str, args: &[&str]) -> String {
    run_ok(
        Command::new(ssc_bin())
            .args(args)
            .args(["--api", api, "--token", TOKEN]),
    )
}

fn gateways(api: &str) -> serde_json::Value {
    serde_json::from_str(&ssc(api, &["gateways", "--json"])).unwrap()
}

fn established(conn: &serde_json::Value) -> usize {
    conn["subflows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|sf| sf["state"] == "established")
        .count()
}

/// 2 groups × 2 classes out and in, each up with its 4 subflows.
fn all_up(s: &serde_json::Value) -> bool {
    let conns = s["connections"].as_array().unwrap();
    let out = conns.iter().filter(|c| c["direction"] == "out").count();
    let inb = conns.iter().filter(|c| c["direction"] == "in").count();
    out == 4
        && inb == 4
        && conns
            .iter()
            .all(|c| c["state"] == "up" && established(c) == 4)
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool, logs: &dyn Fn()) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        if Instant::now() > deadline {
            logs();
            panic!("timed out waiting for: {what}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn ping(h1: &str) {
    run_ok(&mut netns(
        h1,
        &["ping", "-c", "3", "-i", "0.2", "-W", "2", "198.19.2.10"],
    ));
}

/// The example config of `branch` without remotes, with `[controller]` on `sock` and the `[tls]`
/// table `tls` (TLS is the default, issue #17; the pushed configs keep the file's `[tls]`).
fn controller_config(branch: u8, sock: &Path, cache: &Path, tls: &str, out: &Path) {
    let text =
        std::fs::read_to_string(repo_root().join(format!("examples/mmsg-branch{branch}.toml")))
            .unwrap();
    let mut v: toml::Value = toml::from_str(&text).unwrap();
    let t = v.as_table_mut().unwrap();
    t.remove("remote");
    let mut c = toml::map::Map::new();
    c.insert(
        "address".into(),
        toml::Value::String(format!("unix:{}", sock.display())),
    );
    c.insert(
        "cache".into(),
        toml::Value::String(cache.display().to_string()),
    );
    t.insert("controller".into(), toml::Value::Table(c));
    let tls: toml::Value = toml::from_str(tls).unwrap();
    t.insert("tls".into(), tls["tls"].clone());
    let text = toml::to_string(&v).unwrap();
    std::fs::write(out, text).unwrap();
}

/// Weights of path groups 0 and 1 of the (only) remote in a gateway's cache.
fn cached_weights(cache: &Path) -> Vec<u64> {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cache).unwrap()).unwrap();
    v["remotes"][0]["path_groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["weight"].as_u64().unwrap())
        .collect()
}

/// Weights of pair (a, b) from `GET /api/v1/weights/a/b`.
fn rest_weights(api: &str, a: u8, b: u8) -> Vec<u64> {
    let v: serde_json::Value = serde_json::from_str(&ssc(
        api,
        &[
            "weights",
            "--json",
            "--source",
            &a.to_string(),
            "--destination",
            &b.to_string(),
        ],
    ))
    .unwrap();
    v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["weight"].as_u64().unwrap())
        .collect()
}

fn ctl_version(s: &serde_json::Value) -> u64 {
    s["controller"]["config_version"].as_u64().unwrap()
}

fn connects(s: &serde_json::Value) -> u64 {
    s["counters"]["connects"].as_u64().unwrap()
}

/// Every gateway connected with the controller's current version acked.
fn synced(api: &str) -> bool {
    let g = gateways(api);
    let list = g["gateways"].as_array().unwrap();
    list.len() == 2
        && list.iter().all(|x| {
            x["connected"] == true
                && x["config_version"].as_u64().unwrap() > 0
                && x["config_version_acked"] == x["config_version"]
        })
}

#[test]
fn gateway_channel_over_2x2_testbed() {
    require_root_and(&["ip", "ping"]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let root = repo_root();
    let sock = dir.join("ssc-gw.sock");
    std::fs::write(
        dir.join("ssc.toml"),
        format!(
            "[api]\nlisten = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\n\n[database]\npath = \"ssc.redb\"\n\n\
             [openflow]\nlisten = \"\"\n\n[gateways]\nunix = [\"{}\"]\n",
            sock.display()
        ),
    )
    .unwrap();
    let (cache1, cache2) = (dir.join("gw1-cache.json"), dir.join("gw2-cache.json"));
    let (cfg1, cfg2) = (dir.join("gw1.toml"), dir.join("gw2.toml"));
    let pki = TestPki::new(&dir.join("pki"), &[1, 2]);
    controller_config(1, &sock, &cache1, &pki.table(1), &cfg1);
    controller_config(2, &sock, &cache2, &pki.table(2), &cfg2);
    run_ok(Command::new(MMSG).args(["check", "--config"]).arg(&cfg1));

    let (ssc_proc, api) = start_ssc(dir, dir.join("ssc.log"));
    let mut ssc_proc = Some(ssc_proc);
    ssc(
        &api,
        &[
            "import",
            "--inventory",
            root.join("examples/inventory-2x2.toml").to_str().unwrap(),
            "--paths",
            root.join("examples/paths-2x2.toml").to_str().unwrap(),
        ],
    );

    let prefix = format!("c{}", std::process::id() % 100_000);
    let tb = Testbed::up(&prefix);
    let (gw1, gw2, h1) = (tb.ns("gw1"), tb.ns("gw2"), tb.ns("h1"));
    let ctl1 = dir.join("gw1.sock");
    let ctl2 = dir.join("gw2.sock");
    let mut p1 = start_mmsg(&gw1, &cfg1, &ctl1, dir.join("gw1.log"));
    let p2 = start_mmsg(&gw2, &cfg2, &ctl2, dir.join("gw2.log"));
    let ssc_log = dir.join("ssc.log");
    let logs = |p1: &Proc| {
        eprintln!("--- gw1 ---\n{}", p1.log());
        eprintln!("--- gw2 ---\n{}", p2.log());
        eprintln!(
            "--- ssc ---\n{}",
            std::fs::read_to_string(&ssc_log).unwrap_or_default()
        );
    };

    // (1) Tunnels from the pushed config alone.
    wait_for(
        "tunnels up from the controller's config",
        Duration::from_secs(40),
        || ctl1.exists() && ctl2.exists() && all_up(&status(&ctl1)) && all_up(&status(&ctl2)),
        &|| logs(&p1),
    );
    ping(&h1);
    let s1 = status(&ctl1);
    assert_eq!(s1["controller"]["source"], "controller", "{s1:#}");
    assert_eq!(s1["controller"]["connected"], true);
    wait_for(
        "both gateways acked",
        Duration::from_secs(5),
        || synced(&api),
        &|| logs(&p1),
    );
    eprintln!("(1) tunnels up from the pushed config, ping h1 -> h2 ok");
    assert_eq!(cached_weights(&cache1), rest_weights(&api, 1, 2));
    let before = cached_weights(&cache1);

    // (2) A weight change through REST: port 1a's capacity 40 → 10 Mbit/s changes the configured
    // capacities of group 0 in both directions (1a>2a and 2a>1a).
    let (v1, v2) = (ctl_version(&status(&ctl1)), ctl_version(&status(&ctl2)));
    let (c1, c2) = (connects(&status(&ctl1)), connects(&status(&ctl2)));
    let t0 = Instant::now();
    ssc(
        &api,
        &[
            "port",
            "modify",
            "--branch",
            "1",
            "--port",
            "a",
            "--capacity-mbps",
            "10",
        ],
    );
    let mut seen = [None::<Duration>; 2];
    while seen.iter().any(Option::is_none) && t0.elapsed() < Duration::from_secs(5) {
        for (i, (ctl, v)) in [(&ctl1, v1), (&ctl2, v2)].into_iter().enumerate() {
            if seen[i].is_none() && ctl_version(&status(ctl)) != v {
                seen[i] = Some(t0.elapsed());
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!(
        "(2) weight change (REST PATCH → applied on the gateway): gw1 {:?}, gw2 {:?}",
        seen[0], seen[1]
    );
    for (i, s) in seen.iter().enumerate() {
        let d = s.unwrap_or_else(|| {
            logs(&p1);
            panic!("gw{} never got the new weights", i + 1)
        });
        assert!(d < Duration::from_secs(1), "gw{} took {d:?}", i + 1);
    }
    let after = cached_weights(&cache1);
    assert_ne!(after, before, "the weights must have changed");
    // The gateways' reports (every 2 s) also move the weights (estimated basis), so the caches
    // are compared with REST once they settle: each converges to what ssc publishes.
    wait_for(
        "the gateways' cached weights equal ssc's",
        Duration::from_secs(6),
        || {
            cached_weights(&cache1) == rest_weights(&api, 1, 2)
                && cached_weights(&cache2) == rest_weights(&api, 2, 1)
        },
        &|| logs(&p1),
    );
    eprintln!("    weights 1→2 {before:?} → {after:?}");
    assert_eq!(
        (connects(&status(&ctl1)), connects(&status(&ctl2))),
        (c1, c2),
        "a weights-only change must not re-establish tunnel connections"
    );
    ping(&h1);

    // (3) Controller gone: forwarding goes on.
    drop(ssc_proc.take());
    wait_for(
        "gw1 notices the controller is gone",
        Duration::from_secs(5),
        || status(&ctl1)["controller"]["connected"] == false,
        &|| logs(&p1),
    );
    ping(&h1);
    eprintln!("(3) ssc stopped: ping h1 -> h2 still ok");

    // (4) mmsg restarted while the controller is down: from the cache.
    let cached_version = ctl_version(&status(&ctl1));
    drop(p1);
    p1 = start_mmsg(&gw1, &cfg1, &ctl1, dir.join("gw1-restart.log"));
    wait_for(
        "restarted gw1 up from its cache",
        Duration::from_secs(40),
        || ctl1.exists() && all_up(&status(&ctl1)) && all_up(&status(&ctl2)),
        &|| logs(&p1),
    );
    let s1 = status(&ctl1);
    assert_eq!(s1["controller"]["source"], "cache", "{s1:#}");
    assert_eq!(ctl_version(&s1), cached_version);
    assert_eq!(s1["controller"]["connected"], false);
    ping(&h1);
    eprintln!(
        "(4) gw1 restarted without ssc: config from the cache (version {cached_version}), ping ok"
    );

    // (5) The controller returns: both gateways re-sync.
    let (ssc_proc2, api2) = start_ssc(dir, dir.join("ssc2.log"));
    let t1 = Instant::now();
    wait_for(
        "both gateways re-synced",
        Duration::from_secs(10),
        || synced(&api2),
        &|| logs(&p1),
    );
    eprintln!(
        "(5) ssc restarted: both gateways acked the new version after {:?}",
        t1.elapsed()
    );
    let s1 = status(&ctl1);
    assert_eq!(s1["controller"]["source"], "controller", "{s1:#}");
    assert_eq!(s1["controller"]["connected"], true);
    let g = gateways(&api2);
    for x in g["gateways"].as_array().unwrap() {
        assert!(x["config_version"].as_u64().unwrap() > cached_version);
    }
    ping(&h1);
    drop(ssc_proc2);
    drop(p1);
    drop(p2);
    drop(tb);
}
