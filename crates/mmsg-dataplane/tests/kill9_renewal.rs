//! kill -9 during certificate renewal (issue #17): a child process runs mmsg's renewal write path
//! (`mmsg_dataplane::enrol::store`: CA, CRL, then key and certificate as one unit) in a loop; the
//! test kills it with SIGKILL at random instants (20 times, then more until at least one kill has
//! landed between the key's and the certificate's rename, at most 200), and after every kill
//! loads the credentials as `mmsg run` does at start (`secure::TlsState::load`): it must
//! succeed, and the key must match the certificate.
//!
//! The child is this test binary itself, re-run with `--ignored --exact renewal_loop_child` and
//! the directory in `MMS_KILL9_DIR` (a real process, a real SIGKILL; no simulated crash).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mmsg_dataplane::enrol;
use mmsg_dataplane::secure::TlsState;
use mmsg_dataplane::stats::Stats;
use mpa::config::{TlsConfig, TlsMode};
use mpa::gwchan::Credentials;
use mpa::BranchId;
use pki::ca::{Ca, DEFAULT_VALIDITY};

const ENV_DIR: &str = "MMS_KILL9_DIR";
const KILLS: usize = 20;
const MAX_KILLS: usize = 200;
/// Generations the child prepares before it starts writing (key generation is not what we
/// want to kill in: the write path is).
const GENERATIONS: u64 = 16;

fn own() -> BranchId {
    BranchId::new(3).unwrap()
}

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

/// Issued credentials (as the controller sends them) and the key, for serial `serial`.
fn generation(ca: &Ca, serial: u64, crl_pem: &str) -> (Credentials, String) {
    let g = ca.issue_gateway(own(), serial, DEFAULT_VALIDITY).unwrap();
    (
        Credentials {
            cert_pem: g.cert_pem,
            serial,
            not_after: 0,
            ca_pem: ca.cert_pem().to_owned(),
            crl_pem: crl_pem.to_owned(),
        },
        g.key_pem,
    )
}

/// The child: renews (writes generation after generation) until killed.
#[test]
#[ignore = "the child process of kill9_during_renewal_always_restarts"]
fn renewal_loop_child() {
    let dir = std::path::PathBuf::from(std::env::var(ENV_DIR).expect("run by the parent"));
    let ca = Ca::load(
        "MMS kill9 CA",
        &dir.join("ca-cert.pem"),
        &dir.join("ca.key"),
    )
    .unwrap();
    let crl = std::fs::read_to_string(dir.join("crl.pem")).unwrap();
    let base: u64 = std::fs::read_to_string(dir.join("next-serial"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let gens: Vec<_> = (0..GENERATIONS)
        .map(|i| generation(&ca, base + i, &crl))
        .collect();
    let files = enrol::files_in(&dir);
    let mut out = std::io::stdout();
    writeln!(out, "ready").unwrap();
    out.flush().unwrap();
    loop {
        for (c, key) in &gens {
            enrol::store(&files, key, c).unwrap();
        }
    }
}

/// A small xorshift, seeded from the clock (printed, so a failing run can be replayed by hand).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn kill9_during_renewal_always_restarts() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let ca = Ca::generate("MMS kill9 CA").unwrap();
    ca.save(&dir.join("ca-cert.pem"), &dir.join("ca.key"))
        .unwrap();
    let crl = ca.crl(&[], 1).unwrap();
    // The enrolment: generation 1.
    let (c, key) = generation(&ca, 1, &crl);
    enrol::store(&enrol::files_in(dir), &key, &c).unwrap();
    let cfg = tls_config(dir);
    TlsState::load(&cfg, own(), Arc::new(Stats::default())).unwrap();

    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    println!("seed {seed:#x}");
    let mut rng = Rng(seed);
    let exe = std::env::current_exe().unwrap();
    let (mut kills, mut torn, mut restored_serials) = (0, 0, Vec::new());
    let mut next_serial = 100u64;
    while kills < KILLS || (torn == 0 && kills < MAX_KILLS) {
        std::fs::write(dir.join("next-serial"), next_serial.to_string()).unwrap();
        next_serial += GENERATIONS;
        let mut child = Command::new(&exe)
            .args(["--ignored", "--exact", "renewal_loop_child", "--nocapture"])
            .env(ENV_DIR, dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        // The test harness prints its own lines first; wait for ours (EOF: the child died).
        while line.trim() != "ready" {
            line.clear();
            if stdout.read_line(&mut line).unwrap() == 0 {
                panic!("the child ended before it was ready: {:?}", child.wait());
            }
        }
        // A random instant in the write loop (one renewal writes 4 to 6 files with an fsync
        // each, some ms; 0 to 150 ms covers the first renewals and many after).
        let delay = Duration::from_micros(rng.next() % 150_000);
        let started = Instant::now();
        while started.elapsed() < delay {
            std::thread::sleep(Duration::from_micros(200));
        }
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(9), "{status:?}");
        kills += 1;

        let files = enrol::files_in(dir);
        let (cert, key) = (
            std::fs::read(&files.cert).unwrap(),
            std::fs::read(&files.key).unwrap(),
        );
        if !pki::files::pair_matches(&cert, &key) {
            torn += 1;
        }
        // What `mmsg run` does at start.
        let state = TlsState::load(&cfg, own(), Arc::new(Stats::default()))
            .unwrap_or_else(|e| panic!("kill {kills}: credentials do not load: {e}"));
        let (cert, key) = (
            std::fs::read(&files.cert).unwrap(),
            std::fs::read(&files.key).unwrap(),
        );
        assert!(
            pki::files::pair_matches(&cert, &key),
            "kill {kills}: key does not match the certificate after load"
        );
        let serial = state.current().serial;
        assert!(
            serial == 1 || (100..next_serial).contains(&serial),
            "{serial}"
        );
        restored_serials.push(serial);
    }
    println!(
        "{kills} kills, {torn} left a torn pair (new key, old certificate) that the .prev pair \
         repaired; serials after each restart: {restored_serials:?}"
    );
    assert!(
        torn > 0,
        "in {kills} kills none fell between the two renames: the test did not exercise the torn state"
    );
    // No temporary files of the killed writers are left after the last start.
    let leftovers: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.contains("gw.pem") || n.contains("gw.key")
        })
        .map(|e| e.file_name())
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
