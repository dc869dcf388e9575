//! netns test of OpenFlow over TLS set up by `mmsg` itself (docs/ofc.md §6, docs/mmsg.md
//! `[ovs]`): the 2x2 testbed with one real ovs-vswitchd (userspace datapath) per gateway
//! namespace; `ssc` runs inside gw1's namespace with its CA, the OpenFlow TLS listener on
//! `127.0.0.1:6654` and the gateway-channel TLS listener on `127.0.0.1:6691` (OVS reaches its
//! controller without going through its own bridge, which has no flow before the controller
//! connects).
//!
//! Proves: (1) `mmsg enrol` gets gw1's credentials; `mmsg run` with `[ovs] controller =
//! "ssl:127.0.0.1:6654"` and `[tls]` = those files runs `ovs-vsctl set-ssl` with copies of them
//! under their serial, the switch connects over TLS and gets branch 1's flows from `ssc`;
//! (2) after an automatic renewal (`renew_below_percent = 100`, `renew_check_s = 2`) OVS names
//! the renewed serial's copies; the first serial is then revoked, the flows are deleted and the
//! switch reconnected: the flows come back, so the new connection presented the renewed
//! certificate (the revoked one would be refused); (3) SIGTERM leaves the bridge, its flows,
//! the controller and the SSL settings in place, the next `mmsg run` reuses them (logged as
//! matching), and `mmsg down` removes the bridge and the SSL settings (docs/mmsg.md "Restart").
//! Needs root and Open vSwitch; fails, never skips.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::ssc::{spawn_ssc, ssc_bin};
use common::{netns, repo_root, require_root_and, run_ok, start_mmsg, status, Testbed, MMSG};

const TOKEN: &str = "netns-ovs-tls-test-token-012345";
const OF_TARGET: &str = "ssl:127.0.0.1:6654";

fn ssc(ns: &str, api: &str, args: &[&str]) -> String {
    run_ok(
        Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(ssc_bin())
            .args(args)
            .args(["--api", api, "--token", TOKEN]),
    )
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

fn vsctl(ovs: &Path, args: &[&str]) -> String {
    run_ok(
        Command::new("ovs-vsctl")
            .arg(format!("--db=unix:{}", ovs.join("db.sock").display()))
            .arg("--timeout=10")
            .args(args),
    )
}

/// Flows with a cookie (the controller's) in br0.
fn flows(ovs: &Path) -> usize {
    let out = Command::new("ovs-ofctl")
        .args(["-O", "OpenFlow13", "dump-flows"])
        .arg(format!("unix:{}", ovs.join("br0.mgmt").display()))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("cookie="))
        .count()
}

/// The certificate file OVS is configured with (`ovs-vsctl get-ssl`).
fn ssl_cert(ovs: &Path) -> String {
    vsctl(ovs, &["get-ssl"])
        .lines()
        .find_map(|l| l.strip_prefix("Certificate: "))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

#[test]
fn mmsg_sets_up_openflow_over_tls_and_follows_renewals() {
    require_root_and(&[
        "ip",
        "ovs-vswitchd",
        "ovsdb-server",
        "ovs-vsctl",
        "ovs-ofctl",
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let root = repo_root();
    let prefix = format!("s3o{}", std::process::id() % 1000);
    let tb = Testbed::up_with(&prefix, true);
    let gw1 = tb.ns("gw1");
    let ovs = tb.ovs_dir(1);

    // ssc inside gw1's namespace, on loopback.
    std::fs::write(
        dir.join("ssc.toml"),
        format!(
            "[api]\nlisten = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\n\n[database]\npath = \"ssc.redb\"\n\n\
             [openflow]\nlisten = \"\"\ntls_listen = \"127.0.0.1:6654\"\n\n\
             [gateways]\ntls_listen = \"127.0.0.1:6691\"\n"
        ),
    )
    .unwrap();
    let log = dir.join("ssc.log");
    let (ssc_proc, api) = spawn_ssc(Some(&gw1), &dir.join("ssc.toml"), &log);
    ssc(
        &gw1,
        &api,
        &[
            "import",
            "--inventory",
            root.join("examples/inventory-2x2.toml").to_str().unwrap(),
            "--paths",
            root.join("examples/paths-2x2.toml").to_str().unwrap(),
        ],
    );

    // (1) Enrolment, then mmsg with [ovs] ssl: and [tls].
    let out = ssc(&gw1, &api, &["enrol-token", "--branch", "1"]);
    let token = out.lines().next().unwrap().to_owned();
    let tls_dir = dir.join("tls1");
    let o = run_ok(
        netns(
            &gw1,
            &[
                MMSG,
                "enrol",
                "--controller",
                "tls:127.0.0.1:6691",
                "--branch",
                "1",
            ],
        )
        .arg("--ca")
        .arg(dir.join("ca/ca.pem"))
        .arg("--dir")
        .arg(&tls_dir)
        .env("MMSG_ENROL_TOKEN", &token),
    );
    assert!(o.contains("enrolled branch 1"), "{o}");
    let text = std::fs::read_to_string(root.join("examples/mmsg-branch1.toml")).unwrap();
    let mut v: toml::Value = toml::from_str(&text).unwrap();
    let t = v.as_table_mut().unwrap();
    t.remove("remote");
    let extra: toml::Value = toml::from_str(&format!(
        "[ovs]\nbridge = \"br0\"\ndb = \"unix:{db}\"\ncontroller = \"{OF_TARGET}\"\n\n\
         [controller]\naddress = \"tls:127.0.0.1:6691\"\ncache = \"{cache}\"\n\
         renew_below_percent = 100\nrenew_check_s = 2\n\n\
         [tls]\nca_file = \"{d}/ca.pem\"\ncert_file = \"{d}/gw.pem\"\nkey_file = \"{d}/gw.key\"\n\
         crl_file = \"{d}/crl.pem\"\n",
        db = ovs.join("db.sock").display(),
        cache = dir.join("cache1.json").display(),
        d = tls_dir.display()
    ))
    .unwrap();
    for (k, val) in extra.as_table().unwrap() {
        t.insert(k.clone(), val.clone());
    }
    let cfg = dir.join("gw1.toml");
    std::fs::write(&cfg, toml::to_string(&v).unwrap()).unwrap();
    run_ok(Command::new(MMSG).args(["check", "--config"]).arg(&cfg));

    let ctl1 = dir.join("gw1.sock");
    let p1 = start_mmsg(&gw1, &cfg, &ctl1, dir.join("gw1.log"));
    let logs = || {
        eprintln!("--- gw1 ---\n{}", p1.log());
        eprintln!("--- ssc ---\n{}", ssc_proc.log());
        eprintln!(
            "--- ovs-vswitchd ---\n{}",
            std::fs::read_to_string(ovs.join("ovs-vswitchd.log")).unwrap_or_default()
        );
    };
    wait_for("mmsg up", Duration::from_secs(30), || ctl1.exists(), &logs);
    let serial0 = status(&ctl1)["tls"]["serial"].as_u64().unwrap();
    // The first check renews at once (renew_below_percent = 100): the serial OVS names is the
    // enrolled one or an already renewed one, always a copy under ovs-ssl/.
    let cert0 = ssl_cert(&ovs);
    assert!(
        cert0.contains("/ovs-ssl/cert-"),
        "OVS must use mmsg's copy: {cert0:?}"
    );
    assert_eq!(vsctl(&ovs, &["get-controller", "br0"]).trim(), OF_TARGET);
    wait_for(
        "branch 1's flows over TLS",
        Duration::from_secs(30),
        || flows(&ovs) > 0,
        &logs,
    );
    let n_flows = flows(&ovs);
    eprintln!("(1) OVS set up by mmsg with set-ssl ({cert0}), {n_flows} flows over TLS");

    // (2) Renewal: OVS follows.
    wait_for(
        "two renewals",
        Duration::from_secs(30),
        || status(&ctl1)["counters"]["tls_renewals"].as_u64().unwrap() >= 2,
        &logs,
    );
    let renewed = status(&ctl1)["tls"]["serial"].as_u64().unwrap();
    assert!(renewed > serial0);
    wait_for(
        "OVS names a renewed serial's copy",
        Duration::from_secs(10),
        || {
            let c = ssl_cert(&ovs);
            c.contains("/ovs-ssl/cert-") && c != cert0
        },
        &logs,
    );
    // Only the current copies are kept.
    let copies = std::fs::read_dir(tls_dir.join("ovs-ssl")).unwrap().count();
    assert!(copies <= 6, "{copies} files in ovs-ssl");
    // Revoke the enrolled certificate, drop the flows and reconnect the switch.
    ssc(&gw1, &api, &["revoke", "--serial", &serial0.to_string()]);
    run_ok(
        Command::new("ovs-ofctl")
            .args(["-O", "OpenFlow13", "del-flows"])
            .arg(format!("unix:{}", ovs.join("br0.mgmt").display())),
    );
    assert_eq!(flows(&ovs), 0);
    vsctl(&ovs, &["del-controller", "br0"]);
    vsctl(&ovs, &["set-controller", "br0", OF_TARGET]);
    wait_for(
        "the flows again after a reconnect with the renewed certificate",
        Duration::from_secs(30),
        || flows(&ovs) == n_flows,
        &logs,
    );
    let s1 = status(&ctl1);
    assert_eq!(s1["counters"]["tls_renewal_errors"], 0, "{s1:#}");
    let gwlog = p1.log();
    assert!(
        gwlog.contains("OVS OpenFlow TLS credentials set"),
        "{gwlog}"
    );
    assert!(!gwlog.contains("OVS keeps its previous"), "{gwlog}");
    eprintln!(
        "(2) renewed {serial0} -> {}, OVS names {}, enrolled serial revoked, {n_flows} flows back \
         after a reconnect",
        s1["tls"]["serial"],
        ssl_cert(&ovs)
    );
    // (3) Restart (docs/mmsg.md "Restart"): SIGTERM keeps the bridge, its flows, the
    // controller and the SSL settings (the switch keeps forwarding); the next `mmsg run` finds
    // them matching its config and reuses them; `mmsg down` removes them.
    let cert_kept = ssl_cert(&ovs);
    drop(p1);
    assert!(!ctl1.exists(), "mmsg did not exit");
    assert_eq!(
        flows(&ovs),
        n_flows,
        "the flows must stay while mmsg is down"
    );
    assert_eq!(ssl_cert(&ovs), cert_kept);
    assert_eq!(vsctl(&ovs, &["get-controller", "br0"]).trim(), OF_TARGET);
    let addr = run_ok(&mut netns(
        &gw1,
        &["ip", "-4", "-o", "addr", "show", "dev", "mpa0"],
    ));
    assert!(addr.contains(" inet "), "mpa0 lost its address: {addr}");
    let p1 = start_mmsg(&gw1, &cfg, &ctl1, dir.join("gw1-restart.log"));
    let logs = || eprintln!("--- gw1 (restart) ---\n{}", p1.log());
    wait_for(
        "mmsg up again",
        Duration::from_secs(30),
        || ctl1.exists(),
        &logs,
    );
    let log = p1.log();
    assert!(
        log.contains("kept from the previous run matches the config"),
        "{log}"
    );
    assert!(flows(&ovs) > 0, "flows after the restart");
    assert_eq!(vsctl(&ovs, &["get-controller", "br0"]).trim(), OF_TARGET);
    drop(p1);
    run_ok(&mut netns(
        &gw1,
        &[MMSG, "down", "--config", cfg.to_str().unwrap()],
    ));
    let left = vsctl(&ovs, &["get-ssl"]);
    assert!(left.trim().is_empty(), "SSL settings left behind: {left}");
    let bridges = vsctl(&ovs, &["list-br"]);
    assert!(bridges.trim().is_empty(), "bridges left behind: {bridges}");
    drop(ssc_proc);
    drop(tb);
}
