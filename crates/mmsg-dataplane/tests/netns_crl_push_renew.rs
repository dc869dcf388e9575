//! netns test of the gateway channel's security against a RUNNING `mmsg run` (issue #17, docs/
//! security.md "Revocation fails closed" and "Credentials written crash-safe") on the 2x2
//! testbed, TLS on, with a small test controller (`common/gwctl.rs`: the gateway channel over
//! mutual TLS with a valid `ssc.mms` certificate of the test CA) listening on 127.0.0.1 inside
//! gw1's namespace. gw1 has `[controller] address = "tls:127.0.0.1:PORT"` and keeps its remotes
//! from its file; gw2 has none.
//!
//! Proves: (1) pushed CRLs, end to end (the netns version of the unit test
//! `gwchan::tests::pushed_crls_fail_closed`): a genuine CRL number 2 revoking gw2's serial is
//! accepted (`tls_crl_updates`), written to `crl_file`, and gw1 closes its 8 connections with
//! gw2; then a forged CRL (signed by another CA, number 9, revoking nothing) is refused
//! (`crl_refused_signature`, log "forged or altered"), and a replayed older genuine CRL (number
//! 1, revoking nothing) is refused (`crl_refused_replay`, log "replayed or old"); `crl_file`
//! still holds number 2, and a restarted gw2 (revoked serial) is still refused by gw1
//! (`tls_revoked` rises, no connection up). (2) kill -9 of `mmsg run` during its OWN periodic
//! renewal (`renew_below_percent = 100`: due at the first check, right after start): 20 times,
//! the test controller answers the renewal and the test SIGKILLs gw1 after a random delay
//! within 1.5 × the measured time from the answer to the new certificate on disk; after every
//! kill `mmsg run` starts again (its next renewal authenticates with the credentials it loaded,
//! which only works with a matching key/certificate pair) and the pair on disk matches; the test
//! counts the kills that left a torn pair. Last, a clean start renews and reloads: `mmsg
//! status` shows the new serial. Needs root; fails, never skips.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use pki::ca::Ca;

mod common;
#[path = "common/gwctl.rs"]
mod gwctl;
use common::sec::{counter, wait_for};
use common::tls::{example_with, TestPki};
use common::{require_root_and, start_mmsg, status, Proc, Testbed, MMSG};
use gwctl::{Event, TestController};

/// Kills of gw1 during its own renewal.
const KILLS: usize = 20;

fn conns_up(s: &serde_json::Value) -> usize {
    s["connections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["state"] == "up")
        .count()
}

/// gw1's config: the example with `[tls]` from `pki`, and `[controller]` at `address`
/// (renewal due at every check when `renew`, else off).
fn gw1_config(pki: &TestPki, address: &str, cache: &Path, renew: bool, out: &Path) {
    let mut text = example_with(1, &pki.table(1));
    text.push_str(&format!(
        "\n[controller]\naddress = \"{address}\"\ncache = \"{}\"\nrenew_below_percent = {}\n\
         renew_check_s = 3600\n",
        cache.display(),
        if renew { 100 } else { 0 }
    ));
    std::fs::write(out, text).unwrap();
}

/// A `mmsg run` the kill loop SIGKILLs; killed on drop too if still running (a failed test).
struct Bare(Child);

impl Bare {
    /// SIGKILL now (only this PID), reaped.
    fn kill9(&mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for Bare {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            self.kill9();
        }
    }
}

/// `mmsg run` in `ns` (output appended to `log`).
fn spawn_mmsg(ns: &str, config: &Path, control: &Path, log: &Path) -> Bare {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    Bare(
        Command::new("ip")
            .args(["netns", "exec", ns, MMSG, "run", "--config"])
            .arg(config)
            .arg("--control")
            .arg(control)
            .env("MMSG_LOG", "info")
            .stdout(f.try_clone().unwrap())
            .stderr(f)
            .spawn()
            .unwrap(),
    )
}

/// Whether the certificate and key files in `dir` (gw1's) form a pair right now.
fn pair_on_disk(dir: &Path) -> bool {
    pki::files::pair_matches(
        &std::fs::read(dir.join("gw1.pem")).unwrap(),
        &std::fs::read(dir.join("gw1.key")).unwrap(),
    )
}

/// The next renewal the controller answered: (serial presented, serial sent, PEM, when).
fn renewed(ctl: &TestController, log: &Path) -> (u64, u64, String, Instant) {
    loop {
        match ctl.events.recv_timeout(Duration::from_secs(20)) {
            Ok(Event::Renewed {
                presented,
                serial,
                cert_pem,
                sent,
            }) => return (presented, serial, cert_pem, sent),
            Ok(Event::Registered { .. }) => {}
            Err(_) => panic!(
                "gw1 did not renew within 20 s of its start:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            ),
        }
    }
}

/// `mmsg status --json`, or `None` while the daemon does not answer.
fn try_status(control: &Path) -> Option<serde_json::Value> {
    let out = Command::new(MMSG)
        .args(["status", "--json", "--control"])
        .arg(control)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

fn wait_file_is(path: &Path, want: &str, secs: u64) {
    wait_for(&format!("{} rewritten", path.display()), secs, || {
        std::fs::read_to_string(path).ok().as_deref() == Some(want)
    });
}

#[test]
fn pushed_crls_fail_closed_and_kill9_during_the_daemons_own_renewal_restarts() {
    require_root_and(&["ip"]);
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let pki_dir = d.join("pki");
    let pki = TestPki::new(&pki_dir, &[1, 2]);
    let crl1 = std::fs::read_to_string(pki_dir.join("crl.pem")).unwrap();
    // gw2 keeps its own copy of the CRL (gw1's is replaced by the pushes).
    let pki2 = d.join("pki2");
    std::fs::create_dir_all(&pki2).unwrap();
    for f in ["ca.pem", "crl.pem", "gw2.pem", "gw2.key"] {
        std::fs::copy(pki_dir.join(f), pki2.join(f)).unwrap();
    }
    let cfg2 = d.join("gw2.toml");
    std::fs::write(&cfg2, example_with(2, &TestPki::table_in(&pki2, 2))).unwrap();

    let prefix = format!("scx{}", std::process::id() % 100_000);
    let tb = Testbed::up(&prefix);
    let (gw1, gw2) = (tb.ns("gw1"), tb.ns("gw2"));
    let ca = Ca::load(
        "MMS test CA",
        &pki_dir.join("ca.pem"),
        &pki_dir.join("ca.key"),
    )
    .unwrap();
    let ctl = TestController::start(&gw1, ca, crl1.clone(), 100);
    let cfg1 = d.join("gw1.toml");
    gw1_config(&pki, &ctl.address(), &d.join("cache1.json"), false, &cfg1);
    let (ctl1, ctl2) = (d.join("gw1.sock"), d.join("gw2.sock"));
    let p1 = start_mmsg(&gw1, &cfg1, &ctl1, d.join("gw1.log"));
    let mut p2 = start_mmsg(&gw2, &cfg2, &ctl2, d.join("gw2.log"));
    let logs = |p1: &Proc, p2: &Proc| {
        eprintln!("--- gw1 ---\n{}\n--- gw2 ---\n{}", p1.log(), p2.log());
    };
    assert!(matches!(
        ctl.next_event("registration of gw1", 30),
        Event::Registered { branch: 1 }
    ));
    let deadline = Instant::now() + Duration::from_secs(40);
    while !(ctl1.exists() && ctl2.exists() && conns_up(&status(&ctl1)) == 8) {
        if Instant::now() > deadline {
            logs(&p1, &p2);
            panic!("TLS tunnels did not come up");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let up_at = started.elapsed();
    eprintln!(
        "tunnels up, gw1 registered with the test controller ({:.1} s)",
        up_at.as_secs_f64()
    );

    // (1a) A genuine CRL number 2 revoking gw2's serial (2): accepted, written, applied.
    let crl2 = pki.ca.crl(&[2], 2).unwrap();
    ctl.push_crl(&crl2);
    let c = |k: &str| counter(&status(&ctl1), k);
    wait_for("gw1 applies CRL 2 and closes gw2's connections", 15, || {
        c("tls_crl_updates") == 1 && c("tls_invalidated_closed") >= 8
    });
    let crl_file = pki_dir.join("crl.pem");
    assert_eq!(std::fs::read_to_string(&crl_file).unwrap(), crl2);

    // (1b) A forged CRL: another CA (same name), a higher number, revoking nothing.
    let rogue = Ca::generate("MMS test CA").unwrap();
    ctl.push_crl(&rogue.crl(&[], 9).unwrap());
    wait_for("the forged CRL is refused", 10, || {
        c("crl_refused_signature") == 1
    });
    // (1c) A replayed older genuine CRL (number 1, revoking nothing: it would un-revoke gw2).
    ctl.push_crl(&crl1);
    wait_for("the replayed CRL is refused", 10, || {
        c("crl_refused_replay") == 1
    });
    let s1 = status(&ctl1);
    assert_eq!(counter(&s1, "tls_crl_updates"), 1, "{s1:#}");
    assert_eq!(counter(&s1, "crl_refused_signature"), 1, "{s1:#}");
    assert_eq!(counter(&s1, "tls_crl_refused"), 0, "{s1:#}");
    assert_eq!(
        std::fs::read_to_string(&crl_file).unwrap(),
        crl2,
        "a refused CRL reached crl_file"
    );
    let log1 = p1.log();
    assert_eq!(
        log1.matches("CRL from the controller refused: forged or altered")
            .count(),
        1,
        "{log1}"
    );
    assert_eq!(
        log1.matches("CRL from the controller refused: replayed or old")
            .count(),
        1,
        "{log1}"
    );
    // gw2's serial stays revoked: a restarted gw2 dials at once and is refused.
    let revoked0 = counter(&s1, "tls_revoked");
    drop(p2);
    p2 = start_mmsg(&gw2, &cfg2, &ctl2, d.join("gw2b.log"));
    wait_for("gw1 refuses the restarted, revoked gw2", 20, || {
        c("tls_revoked") > revoked0
    });
    let s1 = status(&ctl1);
    assert_eq!(conns_up(&s1), 0, "a connection with revoked gw2: {s1:#}");
    eprintln!(
        "(1) tunnels up at {:.1} s; CRL 2 applied (8 connections closed); forged CRL refused \
         (crl_refused_signature 1), replayed CRL 1 refused (crl_refused_replay 1), crl_file still \
         number 2, restarted gw2 refused {} times (tls_revoked) ({:.1} s)",
        up_at.as_secs_f64(),
        counter(&s1, "tls_revoked") - revoked0,
        started.elapsed().as_secs_f64()
    );
    drop(p2);
    drop(p1);

    // (2) kill -9 during the daemon's own renewal.
    ctl.set_crl(&crl2);
    gw1_config(&pki, &ctl.address(), &d.join("cache1.json"), true, &cfg1);
    let log = d.join("gw1-kill.log");
    // One renewal run to the end: how long the write takes after the answer.
    let mut child = spawn_mmsg(&gw1, &cfg1, &ctl1, &log);
    let (_, first, pem, sent) = renewed(&ctl, &log);
    let cert = pki_dir.join("gw1.pem");
    while std::fs::read_to_string(&cert).ok().as_deref() != Some(pem.as_str()) {
        assert!(sent.elapsed() < Duration::from_secs(10), "no renewed pair");
        std::thread::sleep(Duration::from_millis(1));
    }
    let write = sent.elapsed();
    child.kill9();
    let window = (write * 3 / 2).max(Duration::from_millis(5));

    let mut x = u64::from(std::process::id()) | 1;
    let mut rand = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut torn, mut finished, mut last) = (0, 0, first);
    for i in 0..KILLS {
        let mut child = spawn_mmsg(&gw1, &cfg1, &ctl1, &log);
        // The renewal handshake used the pair this start loaded (mutual TLS: a key that does
        // not match its certificate cannot sign the handshake).
        let (presented, serial, pem, sent) = renewed(&ctl, &log);
        // ... and that pair is the last complete one: the new one if the kill came after both
        // renames, else the one before (kept, or restored from `.prev`).
        assert_eq!(
            presented, last,
            "kill {i}: the start after it presented another serial"
        );
        let delay = Duration::from_micros(rand() % (window.as_micros() as u64 + 1));
        std::thread::sleep(delay.saturating_sub(sent.elapsed()));
        child.kill9();
        let on_disk = std::fs::read_to_string(pki_dir.join("gw1.pem")).unwrap();
        finished += usize::from(on_disk == pem && pair_on_disk(&pki_dir));
        torn += usize::from(!pair_on_disk(&pki_dir));
        last = if on_disk == pem { serial } else { presented };
    }
    // A clean start after the last kill: it loads (repairs) the pair, renews, reloads.
    let p1 = start_mmsg(&gw1, &cfg1, &ctl1, d.join("gw1-final.log"));
    let (_, serial, pem, _) = renewed(&ctl, &p1.log);
    wait_file_is(&pki_dir.join("gw1.pem"), &pem, 10);
    // (The control socket of the killed run may still be on disk: poll without failing.)
    wait_for("gw1 reloads the renewed certificate", 10, || {
        try_status(&ctl1).is_some_and(|s| s["tls"]["serial"] == serial)
    });
    assert!(pair_on_disk(&pki_dir));
    let s1 = status(&ctl1);
    assert_eq!(counter(&s1, "tls_renewal_errors"), 0, "{s1:#}");
    assert!(
        p1.log().contains("certificate renewed by the controller"),
        "{}",
        p1.log()
    );
    // Every torn pair was repaired by the next start, which said so once.
    let repaired = |t: &str| {
        t.matches("certificate and key did not match (a renewal was interrupted)")
            .count()
    };
    assert_eq!(
        repaired(&std::fs::read_to_string(&log).unwrap()) + repaired(&p1.log()),
        torn,
        "one repair line per torn pair"
    );
    eprintln!(
        "(2) {KILLS} kills of mmsg run during its own renewal (write {:.1} ms after the answer, \
         kills within {:.1} ms): {torn} left a torn pair (repaired at the next start), {finished} \
         came after the pair was complete; every start renewed with its loaded pair; final serial \
         {serial}; test took {:.1} s",
        write.as_secs_f64() * 1e3,
        window.as_secs_f64() * 1e3,
        started.elapsed().as_secs_f64()
    );
    drop(p1);
    drop(ctl);
    drop(tb);
}
