//! netns test of learned WAN addresses (issue #20 Must show, docs/mmsg.md "Learned WAN
//! addresses") on the 2x2 testbed with `ssc` and the mutual-TLS gateway channel (the set-up of
//! `netns_enrol.rs`: `ssc` in the routers' namespace `inet`, both gateways enrolled with
//! one-time tokens). gw2 reaches `ssc` through its port b (`198.18.21.1`), so its channel stays
//! up while port a changes.
//!
//! While a TCP transfer h2 → h1 (iperf3 `-R`, 8 Mbit/s, 0.1 s intervals at the receiver) and a
//! ping h1 → h2 (10 per second) run, port a of gw2 gets a new address in its network
//! (`198.18.20.2/24` deleted, `198.18.20.77/24` added) and a new next hop (`198.18.20.254`, a
//! second address of the router's interface; main default route replaced) — `ip` only, no
//! config edited, nothing restarted. Proves: gw2 learns the state from the kernel (rtnetlink)
//! and reports it (protocol 5 `wan_state`); `ssc`'s inventory (`GET /api/v1/branches/2`) shows
//! the new address and next hop, and the flows it compiles for the gateways' OVS (`GET
//! /api/v1/branches/{1,2}/flows`, what it pushes to an `[ovs]` gateway; this test runs no OVS)
//! name the new address and no longer the old one; gw1 re-dials gw2's new address
//! (established subflows to `198.18.20.77`, none to the old one); every tunnel connection is up
//! again; the transfer survives (iperf3 completes, its longest stall is at most 5 s, its last
//! 2 s carry at least half the rate), the ping's longest gap is at most 5 s; both gateways'
//! config files are byte for byte unchanged and both `mmsg` still run. Needs root; fails,
//! never skips.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{
    every_conn_up_with, netns, repo_root, require_root_and, run_ok, start_mmsg, status, Proc,
    Testbed, MMSG,
};

const TOKEN: &str = "netns-learned-test-token-01234";
/// The transfer's and the ping's length: 2 s before the change, then room for the re-dial and
/// a recovered tail.
const TRANSFER_S: u32 = 14;
/// The ping's interval and count (10 per second over the transfer).
const PING_INTERVAL_S: f64 = 0.1;
const PING_COUNT: u32 = TRANSFER_S * 10;
/// The transfer's rate (iperf3 `-b`): well below every port (20..40 Mbit/s) and cheap for the
/// debug `mmsg`.
const TRANSFER_BPS: f64 = 8e6;
/// iperf3's report interval at the receiver (its minimum).
const INTERVAL_S: f64 = 0.1;

fn ssc(ns: &str, api: &str, args: &[&str]) -> String {
    common::ssc::cli(ns, api, TOKEN, args)
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool, logs: &dyn Fn()) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        if Instant::now() > deadline {
            logs();
            panic!("timed out waiting for: {what}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn all_up(s: &serde_json::Value) -> bool {
    let conns = s["connections"].as_array().unwrap();
    let out = conns.iter().filter(|c| c["direction"] == "out").count();
    out == 4 && every_conn_up_with(s, 4)
}

/// Established outbound subflows of `s` whose `end` ("remote" or "local") address is `ip`.
fn subflows_at(s: &serde_json::Value, end: &str, ip: &str) -> usize {
    s["connections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["direction"] == "out")
        .flat_map(|c| c["subflows"].as_array().unwrap().iter())
        .filter(|sf| {
            sf["state"] == "established" && sf[end].as_str().unwrap().starts_with(&format!("{ip}:"))
        })
        .count()
}

/// Established outbound subflows of `s` to the remote address `ip`.
fn subflows_to(s: &serde_json::Value, ip: &str) -> usize {
    subflows_at(s, "remote", ip)
}

/// The example config of `branch` without remotes, `[controller]` over TLS at `ctl`, `[tls]`
/// from the enrolled `tls_dir`.
fn config(branch: u8, ctl: &str, tls_dir: &Path, cache: &Path, out: &Path) {
    let text =
        std::fs::read_to_string(repo_root().join(format!("examples/mmsg-branch{branch}.toml")))
            .unwrap();
    let mut v: toml::Value = toml::from_str(&text).unwrap();
    let t = v.as_table_mut().unwrap();
    t.remove("remote");
    let c = format!("address = \"{ctl}\"\ncache = \"{}\"\n", cache.display());
    t.insert("controller".into(), toml::from_str(&c).unwrap());
    let tls: toml::Value = toml::from_str(&format!(
        "ca_file = \"{0}/ca.pem\"\ncert_file = \"{0}/gw.pem\"\nkey_file = \"{0}/gw.key\"\ncrl_file = \"{0}/crl.pem\"\n",
        tls_dir.display()
    ))
    .unwrap();
    t.insert("tls".into(), tls);
    std::fs::write(out, toml::to_string(&v).unwrap()).unwrap();
}

/// The longest run of unanswered pings, in seconds.
fn ping_gap(out: &str, count: u32) -> f64 {
    let got: std::collections::BTreeSet<u32> = out
        .lines()
        .filter_map(|l| l.split("icmp_seq=").nth(1))
        .filter_map(|r| r.split_whitespace().next()?.parse().ok())
        .collect();
    let (mut longest, mut run) = (0u32, 0u32);
    for s in 1..=count {
        if got.contains(&s) {
            run = 0;
        } else {
            run += 1;
            longest = longest.max(run);
        }
    }
    f64::from(longest) * PING_INTERVAL_S
}

/// `GET {api}{path}` with the admin token, from inside `ns` (the REST API listens on the
/// loopback of `ssc`'s namespace).
fn rest(ns: &str, api: &str, path: &str) -> serde_json::Value {
    let out = run_ok(&mut netns(
        ns,
        &[
            "curl",
            "-sf",
            "-H",
            &format!("Authorization: Bearer {TOKEN}"),
            &format!("{api}{path}"),
        ],
    ));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{path}: {e}: {out}"))
}

/// How many of the flows `ssc` compiled for `branch` name the IPv4 address `ip` (as a whole
/// token of their `ovs-ofctl` text, so `198.18.20.2` does not match `198.18.20.254`).
fn flows_naming(ns: &str, api: &str, branch: u8, ip: &str) -> usize {
    let v = rest(ns, api, &format!("/api/v1/branches/{branch}/flows"));
    v["flows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f["ofctl"]
                .as_str()
                .unwrap()
                .split(|c: char| !(c.is_ascii_digit() || c == '.'))
                .any(|t| t == ip)
        })
        .count()
}

/// The longest stall of an iperf3 `--json` receiver (seconds of consecutive intervals that
/// carried under 5 % of `bps`), the received total in bytes, and the rate of the last 2 s.
fn transfer_stall(json: &serde_json::Value, bps: f64) -> (f64, f64, f64) {
    let iv: Vec<(f64, f64)> = json["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let s = &i["sum"];
            (
                s["seconds"].as_f64().unwrap(),
                s["bits_per_second"].as_f64().unwrap(),
            )
        })
        .collect();
    let (mut longest, mut run) = (0.0f64, 0.0f64);
    for &(secs, rate) in &iv {
        if rate < 0.05 * bps {
            run += secs;
            longest = longest.max(run);
        } else {
            run = 0.0;
        }
    }
    let tail: Vec<&(f64, f64)> = iv.iter().rev().take((2.0 / INTERVAL_S) as usize).collect();
    let tail_bps = tail.iter().map(|(s, r)| s * r).sum::<f64>()
        / tail.iter().map(|(s, _)| s).sum::<f64>().max(1e-9);
    let bytes = json["end"]["sum_received"]["bytes"].as_f64().unwrap_or(0.0);
    (longest, bytes, tail_bps)
}

#[test]
fn a_wan_address_change_is_learned_reported_and_redialled() {
    require_root_and(&["ip", "ping", "iperf3", "curl"]);
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let prefix = format!("adx{}", std::process::id() % 1000);
    let tb = Testbed::up(&prefix);
    let (inet, gw1, gw2) = (tb.ns("inet"), tb.ns("gw1"), tb.ns("gw2"));
    let (h1, h2) = (tb.ns("h1"), tb.ns("h2"));
    // The controller's own addresses route normally (not into the WAN emulator).
    let (ssc_proc, api) =
        common::ssc::start_ssc_in_inet(&inet, dir, TOKEN, &["198.18.10.1", "198.18.21.1"]);
    let ca = dir.join("ca/ca.pem");
    let mut cfgs = Vec::new();
    for (b, ns, ctl) in [
        (1u8, &gw1, "tls:198.18.10.1:6691"),
        (2, &gw2, "tls:198.18.21.1:6691"),
    ] {
        let out = ssc(&inet, &api, &["enrol-token", "--branch", &b.to_string()]);
        let token = out.lines().next().unwrap().to_owned();
        let tls_dir = dir.join(format!("tls{b}"));
        run_ok(
            netns(
                ns,
                &[
                    MMSG,
                    "enrol",
                    "--controller",
                    ctl,
                    "--branch",
                    &b.to_string(),
                ],
            )
            .arg("--ca")
            .arg(&ca)
            .arg("--dir")
            .arg(&tls_dir)
            .env("MMSG_ENROL_TOKEN", &token),
        );
        let cfg = dir.join(format!("gw{b}.toml"));
        config(b, ctl, &tls_dir, &dir.join(format!("cache{b}.json")), &cfg);
        cfgs.push(cfg);
    }
    let (ctl1, ctl2) = (dir.join("gw1.sock"), dir.join("gw2.sock"));
    let p1 = start_mmsg(&gw1, &cfgs[0], &ctl1, dir.join("gw1.log"));
    let p2 = start_mmsg(&gw2, &cfgs[1], &ctl2, dir.join("gw2.log"));
    let logs = || {
        eprintln!("--- gw1 ---\n{}", p1.log());
        eprintln!("--- gw2 ---\n{}", p2.log());
        eprintln!("--- ssc ---\n{}", ssc_proc.log());
    };
    wait_for(
        "tunnels up from the controller's config",
        Duration::from_secs(60),
        || ctl1.exists() && ctl2.exists() && all_up(&status(&ctl1)) && all_up(&status(&ctl2)),
        &logs,
    );
    assert!(subflows_to(&status(&ctl1), "198.18.20.2") > 0);
    eprintln!("tunnels up after {:?}", started.elapsed());
    // The compiled flows name gw2's configured port a address before the change.
    for b in [1u8, 2] {
        assert!(
            flows_naming(&inet, &api, b, "198.18.20.2") > 0,
            "branch {b}"
        );
    }
    let files_before: Vec<Vec<u8>> = cfgs.iter().map(|c| std::fs::read(c).unwrap()).collect();

    // The router's interface towards gw2's port a gets the new next hop's address.
    let inet_addrs = run_ok(Command::new("ip").args(["-n", &inet, "-4", "-o", "addr", "show"]));
    let router_if = inet_addrs
        .lines()
        .find(|l| l.contains(" 198.18.20.1/24 "))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or_else(|| panic!("no 198.18.20.1 in inet: {inet_addrs}"))
        .to_owned();
    run_ok(Command::new("ip").args([
        "-n",
        &inet,
        "addr",
        "add",
        "198.18.20.254/24",
        "dev",
        &router_if,
    ]));

    // The transfer h2 → h1 (the receiver's intervals are the client's with -R) and the ping.
    let _server = Proc {
        child: netns(&h2, &["iperf3", "-s", "-1", "-p", "5301"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
        log: dir.join("iperf3-server.log"),
    };
    wait_for(
        "the iperf3 server listens",
        Duration::from_secs(5),
        || run_ok(&mut netns(&h2, &["ss", "-ltnH", "sport = :5301"])).contains("5301"),
        &logs,
    );
    let transfer = netns(
        &h1,
        &[
            "iperf3",
            "-c",
            "198.19.2.10",
            "-p",
            "5301",
            "-R",
            "-t",
            &TRANSFER_S.to_string(),
            "-i",
            &INTERVAL_S.to_string(),
            "-b",
            &format!("{TRANSFER_BPS}"),
            "--json",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let ping = netns(
        &h1,
        &[
            "ping",
            "-c",
            &PING_COUNT.to_string(),
            "-i",
            &PING_INTERVAL_S.to_string(),
            "-W",
            "1",
            "198.19.2.10",
        ],
    )
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    // Two seconds of the transfer before the change (a measurement window, not a wait).
    std::thread::sleep(Duration::from_secs(2));
    // The change: a new address in the same network and a new next hop, by `ip` alone.
    let t0 = Instant::now();
    for args in [
        &["addr", "del", "198.18.20.2/24", "dev", "wan0"][..],
        &["addr", "add", "198.18.20.77/24", "dev", "wan0"],
        &[
            "route",
            "replace",
            "default",
            "via",
            "198.18.20.254",
            "dev",
            "wan0",
        ],
    ] {
        run_ok(Command::new("ip").args(["-n", &gw2]).args(args));
    }
    wait_for(
        "ssc's inventory (REST) shows gw2's learned address and next hop",
        Duration::from_secs(10),
        || {
            let b = rest(&inet, &api, "/api/v1/branches/2");
            b["wan"][0]["address"] == "198.18.20.77/24" && b["wan"][0]["gateway"] == "198.18.20.254"
        },
        &logs,
    );
    let learned_in = t0.elapsed();
    let b2 = rest(&inet, &api, "/api/v1/branches/2");
    assert_eq!(b2["wan"][1]["address"], "198.18.21.2/24", "{b2:#}");
    // The flows ssc compiles for the OVSs follow the inventory.
    for b in [1u8, 2] {
        assert!(
            flows_naming(&inet, &api, b, "198.18.20.77") > 0,
            "branch {b}"
        );
        assert_eq!(flows_naming(&inet, &api, b, "198.18.20.2"), 0, "branch {b}");
    }
    wait_for(
        "gw1 re-dialled gw2's new address and every connection is up",
        Duration::from_secs(20),
        || {
            let s1 = status(&ctl1);
            all_up(&s1) && all_up(&status(&ctl2)) && subflows_to(&s1, "198.18.20.77") >= 4
        },
        &logs,
    );
    let redialled_in = t0.elapsed();
    let s1 = status(&ctl1);
    assert_eq!(subflows_to(&s1, "198.18.20.2"), 0, "{s1:#}");
    // gw2 re-dialled its own connections from the new address.
    let s2 = status(&ctl2);
    assert!(subflows_at(&s2, "local", "198.18.20.77") > 0, "{s2:#}");
    assert_eq!(subflows_at(&s2, "local", "198.18.20.2"), 0, "{s2:#}");
    let g = rest(&inet, &api, "/api/v1/gateways");
    let gw2_view = g["gateways"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["branch"] == 2)
        .unwrap();
    assert_eq!(
        gw2_view["wan_learned"]["ports"][0]["address"], "198.18.20.77/24",
        "{g:#}"
    );
    assert_eq!(
        gw2_view["wan_learned"]["ports"][0]["next_hop"], "198.18.20.254",
        "{g:#}"
    );

    let out = transfer.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let ping_out = ping.wait_with_output().unwrap();
    let ping_text = String::from_utf8_lossy(&ping_out.stdout).to_string();
    let ping_gap = ping_gap(&ping_text, PING_COUNT);
    let json: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        logs();
        panic!(
            "iperf3 output: {e}: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let (stall, bytes, tail_bps) = transfer_stall(&json, TRANSFER_BPS);
    eprintln!(
        "address change: ssc inventory updated in {learned_in:?}, gw1 re-dialled in \
         {redialled_in:?}; transfer: longest stall {stall:.1} s, {:.1} MB received, last 2 s \
         {:.1} Mbit/s; longest ping gap {ping_gap:.1} s; whole test {:?}",
        bytes / 1e6,
        tail_bps / 1e6,
        started.elapsed()
    );
    if !out.status.success() || stall > 5.0 || ping_gap > 5.0 || tail_bps < 0.5 * TRANSFER_BPS {
        logs();
    }
    assert!(out.status.success(), "iperf3 failed: {text}");
    assert!(stall <= 5.0, "the transfer stalled {stall} s:\n{text}");
    assert!(
        tail_bps >= 0.5 * TRANSFER_BPS,
        "the transfer's last 2 s: {tail_bps} bit/s:\n{text}"
    );
    assert!(
        ping_gap <= 5.0,
        "longest ping gap {ping_gap} s:\n{ping_text}"
    );
    // No config edited, nothing restarted.
    for (c, before) in cfgs.iter().zip(&files_before) {
        assert_eq!(
            &std::fs::read(c).unwrap(),
            before,
            "{} changed",
            c.display()
        );
    }
    let (mut p1, mut p2) = (p1, p2);
    assert!(p1.child.try_wait().unwrap().is_none(), "gw1's mmsg exited");
    assert!(p2.child.try_wait().unwrap().is_none(), "gw2's mmsg exited");
    drop(p1);
    drop(p2);
    drop(ssc_proc);
    drop(tb);
}
