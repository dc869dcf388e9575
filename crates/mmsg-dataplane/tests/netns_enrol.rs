//! netns test of enrolment, the mutual-TLS gateway channel and renewal under traffic on the 2x2
//! testbed (docs/security.md "Enrolment and the gateway channel"): `ssc` runs in the testbed's
//! `inet` namespace (the WAN routers) with its CA and `tls_listen = 0.0.0.0:6691`; each
//! gateway reaches it on its own first WAN gateway address (`198.18.10.1`, `198.18.20.1`; a
//! policy rule in `inet` keeps the controller's replies out of the WAN emulator).
//!
//! Proves: (1) `mmsg enrol` inside each gateway namespace gets its credentials over TLS with a
//! one-time token; (2) both `mmsg run` with `[tls]` = those files and `[controller] address =
//! "tls:..."` register over mutual TLS, get their remotes from `ssc` and bring the TLS tunnels
//! up (ping h1 → h2); (3) gw1 renews its certificate by itself (`renew_below_percent = 100`,
//! `renew_check_s = 2`: due at every check) during a ping: its serial changes (`tls.serial`,
//! `tls_renewals`), no tunnel connection is re-established (`connects` unchanged), the ping
//! loses nothing, and gw1 stays registered; (4) `ssc revoke --branch 2` while both are
//! connected: gw1 gets the new CRL over the channel within seconds (no restart), writes it to
//! its `crl_file` (0600), reloads, closes the 8 connections with branch 2
//! (`tls_invalidated_closed`) and refuses gw2's redials (`tls_revoked`); no tunnel comes back,
//! ping h1 → h2 fails, and `ssc` ends gw2's channel session. Needs root; fails, never skips.
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
use common::{netns, repo_root, require_root_and, run_ok, start_mmsg, status, Testbed, MMSG};

const TOKEN: &str = "netns-enrol-test-token-0123456";

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
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn established(conn: &serde_json::Value) -> usize {
    conn["subflows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|sf| sf["state"] == "established")
        .count()
}

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

/// The example config of `branch` without remotes, `[controller]` over TLS at `ctl`, `[tls]`
/// from the enrolled `tls_dir`.
fn config(branch: u8, ctl: &str, tls_dir: &Path, cache: &Path, renew: bool, out: &Path) {
    let text =
        std::fs::read_to_string(repo_root().join(format!("examples/mmsg-branch{branch}.toml")))
            .unwrap();
    let mut v: toml::Value = toml::from_str(&text).unwrap();
    let t = v.as_table_mut().unwrap();
    t.remove("remote");
    let mut c = format!("address = \"{ctl}\"\ncache = \"{}\"\n", cache.display());
    if renew {
        c.push_str("renew_below_percent = 100\nrenew_check_s = 2\n");
    }
    t.insert("controller".into(), toml::from_str(&c).unwrap());
    let tls: toml::Value = toml::from_str(&format!(
        "ca_file = \"{0}/ca.pem\"\ncert_file = \"{0}/gw.pem\"\nkey_file = \"{0}/gw.key\"\ncrl_file = \"{0}/crl.pem\"\n",
        tls_dir.display()
    ))
    .unwrap();
    t.insert("tls".into(), tls);
    std::fs::write(out, toml::to_string(&v).unwrap()).unwrap();
}

#[test]
fn enrol_mutual_tls_channel_and_renewal_under_traffic() {
    require_root_and(&["ip", "ping"]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let prefix = format!("mcs{}", std::process::id() % 1000);
    let tb = Testbed::up(&prefix);
    let (inet, gw1, gw2, h1) = (tb.ns("inet"), tb.ns("gw1"), tb.ns("gw2"), tb.ns("h1"));
    // Replies of a local process in `inet` would be diverted into the WAN emulator (which only
    // forwards between branches): the controller's own addresses route normally.
    let (ssc_proc, api) =
        common::ssc::start_ssc_in_inet(&inet, dir, TOKEN, &["198.18.10.1", "198.18.20.1"]);
    let ca = dir.join("ca/ca.pem");

    // (1) Enrolment inside each gateway namespace.
    let mut cfgs = Vec::new();
    for (b, ns, ctl) in [
        (1u8, &gw1, "tls:198.18.10.1:6691"),
        (2, &gw2, "tls:198.18.20.1:6691"),
    ] {
        let out = ssc(&inet, &api, &["enrol-token", "--branch", &b.to_string()]);
        let token = out.lines().next().unwrap().to_owned();
        let tls_dir = dir.join(format!("tls{b}"));
        let o = run_ok(
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
        assert!(o.contains(&format!("enrolled branch {b}")), "{o}");
        let cfg = dir.join(format!("gw{b}.toml"));
        config(
            b,
            ctl,
            &tls_dir,
            &dir.join(format!("cache{b}.json")),
            b == 1,
            &cfg,
        );
        run_ok(Command::new(MMSG).args(["check", "--config"]).arg(&cfg));
        cfgs.push(cfg);
    }
    eprintln!("(1) both gateways enrolled over TLS with one-time tokens");

    // (2) Registration over mutual TLS, remotes from ssc, TLS tunnels.
    let (ctl1, ctl2) = (dir.join("gw1.sock"), dir.join("gw2.sock"));
    let p1 = start_mmsg(&gw1, &cfgs[0], &ctl1, dir.join("gw1.log"));
    let p2 = start_mmsg(&gw2, &cfgs[1], &ctl2, dir.join("gw2.log"));
    let logs = || {
        eprintln!("--- gw1 ---\n{}", p1.log());
        eprintln!("--- gw2 ---\n{}", p2.log());
        eprintln!("--- ssc ---\n{}", ssc_proc.log());
    };
    wait_for(
        "tunnels up from the controller's config over mutual TLS",
        Duration::from_secs(60),
        || ctl1.exists() && ctl2.exists() && all_up(&status(&ctl1)) && all_up(&status(&ctl2)),
        &logs,
    );
    let s1 = status(&ctl1);
    assert_eq!(s1["controller"]["source"], "controller", "{s1:#}");
    let g: serde_json::Value =
        serde_json::from_str(&ssc(&inet, &api, &["gateways", "--json"])).unwrap();
    assert_eq!(g["rejected_auth"], 0, "{g:#}");
    run_ok(&mut netns(
        &h1,
        &["ping", "-c", "3", "-i", "0.2", "-W", "2", "198.19.2.10"],
    ));
    eprintln!("(2) registered over mutual TLS, tunnels up, ping h1 -> h2 ok");

    // (3) Renewal under traffic.
    let serial0 = s1["tls"]["serial"].as_u64().unwrap();
    let connects0 = (
        status(&ctl1)["counters"]["connects"].as_u64().unwrap(),
        status(&ctl2)["counters"]["connects"].as_u64().unwrap(),
    );
    let ping = netns(
        &h1,
        &["ping", "-c", "40", "-i", "0.2", "-W", "2", "198.19.2.10"],
    )
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    wait_for(
        "gw1 renewed its certificate twice",
        Duration::from_secs(20),
        || status(&ctl1)["counters"]["tls_renewals"].as_u64().unwrap() >= 2,
        &logs,
    );
    let out = ping.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{text}");
    assert!(text.contains(" 0% packet loss"), "{text}");
    let s1 = status(&ctl1);
    let serial1 = s1["tls"]["serial"].as_u64().unwrap();
    assert!(serial1 > serial0, "{serial1} > {serial0}");
    assert_eq!(s1["counters"]["tls_renewal_errors"], 0, "{s1:#}");
    assert_eq!(
        (
            s1["counters"]["connects"].as_u64().unwrap(),
            status(&ctl2)["counters"]["connects"].as_u64().unwrap()
        ),
        connects0,
        "a renewal must not re-establish tunnel connections"
    );
    assert!(all_up(&s1) && all_up(&status(&ctl2)));
    let certs: serde_json::Value =
        serde_json::from_str(&ssc(&inet, &api, &["certificates"])).unwrap();
    let of1 = certs["certificates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["branch"] == 1)
        .count();
    assert!(of1 >= 3, "enrolment + 2 renewals: {certs:#}");
    eprintln!(
        "(3) gw1 renewed during a 40-packet ping: serial {serial0} -> {serial1}, 0% loss, no reconnect"
    );

    // (4) Revocation reaches the connected gateways: ssc pushes the new CRL over the channel.
    let c = |s: &serde_json::Value, k: &str| s["counters"][k].as_u64().unwrap();
    let s1 = status(&ctl1);
    let (crl0, closed0, revoked0) = (
        c(&s1, "tls_crl_updates"),
        c(&s1, "tls_invalidated_closed"),
        c(&s1, "tls_revoked"),
    );
    let t0 = Instant::now();
    let out = ssc(&inet, &api, &["revoke", "--branch", "2"]);
    assert!(out.contains("revoked"), "{out}");
    wait_for(
        "gw1 got the new CRL and closed its connections with branch 2",
        Duration::from_secs(10),
        || {
            let s = status(&ctl1);
            c(&s, "tls_crl_updates") > crl0 && c(&s, "tls_invalidated_closed") >= closed0 + 8
        },
        &logs,
    );
    let pushed_in = t0.elapsed();
    wait_for(
        "gw1 refuses branch 2's revoked certificate on new connections",
        Duration::from_secs(20),
        || c(&status(&ctl1), "tls_revoked") > revoked0,
        &logs,
    );
    let s1 = status(&ctl1);
    let up = s1["connections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["state"] == "up")
        .count();
    assert_eq!(
        up, 0,
        "no tunnel connection with the revoked branch: {s1:#}"
    );
    assert_eq!(c(&s1, "tls_crl_refused"), 0, "{s1:#}");
    let crl1 = dir.join("tls1/crl.pem");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&crl1).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "crl_file mode {mode:o}");
    }
    let lost = !netns(
        &h1,
        &["ping", "-c", "2", "-i", "0.2", "-W", "1", "198.19.2.10"],
    )
    .status()
    .unwrap()
    .success();
    assert!(lost, "h1 still reaches h2 through a revoked branch");
    eprintln!(
        "(4) branch 2 revoked: gw1 got the CRL in {pushed_in:?}, closed {} connections, refused {} \
         new ones (tls_revoked), no tunnel up",
        c(&s1, "tls_invalidated_closed") - closed0,
        c(&s1, "tls_revoked") - revoked0
    );

    let log = ssc_proc.log();
    drop(p1);
    drop(p2);
    drop(ssc_proc);
    assert!(log.contains("gateway certificate renewed"), "{log}");
    assert!(log.contains("was revoked"), "gw2's session must end: {log}");
    drop(tb);
}
