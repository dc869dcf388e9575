//! kill -9 of the real `mmsg` binary during a certificate renewal (issue #17), no root needed
//! (loopback only): `ssc run` issues certificates (its CA, a TLS gateway listener), the gateway
//! enrols with `mmsg enrol`, then `mmsg renew --config` (the daemon's renewal path: a new key,
//! `renew` over mutual TLS, the CA, the CRL, then key and certificate as one unit) is started 20
//! times and killed with SIGKILL after a random delay within the measured length of one
//! renewal. After every kill the credentials must load as `mmsg run` loads them at start
//! (`secure::TlsState::load`, which repairs a torn pair from the `.prev` copy) with the key
//! matching the certificate; the test counts the kills that left a torn pair on disk. Last, a
//! clean `mmsg renew` with the repaired credentials authenticates to `ssc` and renews.
//! `kill9_renewal` does the same with a child that loops over the write path alone (more kills
//! land in the torn window there).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mmsg_dataplane::enrol;
use mmsg_dataplane::secure::TlsState;
use mpa::config::{TlsConfig, TlsMode};

mod common;
use common::ssc::{ssc_bin, start_ssc};
use common::{repo_root, run_ok, MMSG};

const TOKEN: &str = "kill9-renew-test-token-0123456789";
const KILLS: usize = 20;

fn tls_config(dir: &Path) -> TlsConfig {
    let f = enrol::files_in(dir);
    TlsConfig {
        mode: TlsMode::Tls,
        ca_file: Some(f.ca),
        cert_file: Some(f.cert),
        key_file: Some(f.key),
        crl_file: f.crl,
    }
}

/// Whether the certificate and key files on disk form a pair right now.
fn pair_on_disk(gw: &Path) -> bool {
    let f = enrol::files_in(gw);
    pki::files::pair_matches(
        &std::fs::read(&f.cert).unwrap(),
        &std::fs::read(&f.key).unwrap(),
    )
}

#[test]
fn kill9_of_mmsg_renew_always_leaves_loadable_credentials() {
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(
        dir.join("ssc.toml"),
        format!(
            "[api]\nlisten = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\n\n[database]\npath = \"ssc.redb\"\n\n\
             [openflow]\nlisten = \"\"\n\n[gateways]\ntls_listen = \"127.0.0.1:0\"\n"
        ),
    )
    .unwrap();
    run_ok(
        Command::new(ssc_bin())
            .args(["ca", "init", "--config"])
            .arg(dir.join("ssc.toml")),
    );
    let ca = dir.join("ca/ca.pem");
    let (ssc_proc, api, tls) = start_ssc(dir);
    run_ok(
        Command::new(ssc_bin())
            .args(["import", "--api", &api, "--token", TOKEN, "--inventory"])
            .arg(repo_root().join("examples/inventory-2x2.toml"))
            .arg("--paths")
            .arg(repo_root().join("examples/paths-2x2.toml")),
    );
    let out = run_ok(Command::new(ssc_bin()).args([
        "enrol-token",
        "--branch",
        "1",
        "--ttl",
        "10m",
        "--api",
        &api,
        "--token",
        TOKEN,
    ]));
    let token = out.lines().next().unwrap().to_owned();
    let gw = dir.join("gw1");
    run_ok(
        Command::new(MMSG)
            .args(["enrol", "--controller", &tls, "--branch", "1", "--ca"])
            .arg(&ca)
            .arg("--dir")
            .arg(&gw)
            .env("MMSG_ENROL_TOKEN", &token),
    );
    // A gateway config with these credentials and the TLS controller address.
    let text = std::fs::read_to_string(repo_root().join("examples/mmsg-branch1.toml")).unwrap();
    let mut v: toml::Value = toml::from_str(&text).unwrap();
    let t = v.as_table_mut().unwrap();
    t.remove("remote");
    let ctl: toml::Value = toml::from_str(&format!(
        "address = \"{tls}\"\ncache = \"{}\"\n",
        dir.join("gw1-cache.json").display()
    ))
    .unwrap();
    t.insert("controller".into(), ctl);
    let tls_section: toml::Value = toml::from_str(&format!(
        "ca_file = \"{0}/ca.pem\"\ncert_file = \"{0}/gw.pem\"\nkey_file = \"{0}/gw.key\"\ncrl_file = \"{0}/crl.pem\"\n",
        gw.display()
    ))
    .unwrap();
    t.insert("tls".into(), tls_section);
    let cfg = dir.join("gw1.toml");
    std::fs::write(&cfg, toml::to_string(&v).unwrap()).unwrap();
    let renew = || {
        Command::new(MMSG)
            .args(["renew", "--config"])
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    // One clean renewal: how long the window to kill in is.
    let t0 = Instant::now();
    assert!(renew().wait().unwrap().success(), "a clean mmsg renew");
    let length = t0.elapsed();

    // Deterministic per run, different across runs (xorshift seeded with the pid).
    let mut x = u64::from(std::process::id()) | 1;
    let mut rand = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut torn, mut finished) = (0, 0);
    for i in 0..KILLS {
        let delay = Duration::from_micros(rand() % (length.as_micros() as u64 * 6 / 5 + 1));
        let mut child = renew();
        std::thread::sleep(delay);
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        finished += usize::from(status.success());
        if !pair_on_disk(&gw) {
            torn += 1;
        }
        let state = TlsState::load(
            &tls_config(&gw),
            mpa::BranchId::new(1).unwrap(),
            Arc::default(),
        )
        .unwrap_or_else(|e| panic!("kill {i} after {delay:?}: mmsg would not start: {e}"));
        assert!(pair_on_disk(&gw), "kill {i}: the pair matches after load");
        drop(state);
    }
    // The repaired credentials still authenticate: a clean renewal succeeds.
    assert!(
        renew().wait().unwrap().success(),
        "mmsg renew after the kills"
    );
    eprintln!(
        "{KILLS} kills of mmsg renew (one renewal takes {:.0} ms): {torn} left a torn pair \
         (repaired at load), {finished} renewals had finished before their kill; every load \
         succeeded; test took {:.1} s",
        length.as_secs_f64() * 1e3,
        started.elapsed().as_secs_f64()
    );
    drop(ssc_proc);
}
