//! "TLS is the default" (issue #17) with the real `mmsg` binary.
//!
//! Proves: (1) `mmsg check` accepts every example gateway config in `examples/` as it is (TLS
//! with the files `mmsg enrol` writes) and refuses each one with its `[tls]` removed (exit code 1,
//! a message that says how to enrol and how to opt out); `mode = "clear"` without
//! `--insecure-clear-tunnels` and the flag with `mode = "tls"` are refused too. (2) In a network
//! namespace of its own, `mmsg run` refuses the same three configs with exit code 1 and the same
//! messages, and leaves no TUN device, control socket, address, route, rule or reserved port
//! behind; `mode = "clear"` plus the flag runs, logs the clear-text WARN exactly once and shows
//! `insecure_clear_tunnels` in `mmsg status --json` (and in the text status), while a TLS config
//! with a test CA's files runs with it `false`. (2) needs root; fails, never skips.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

mod common;
use common::tls::{with_table, without_tls, TestPki, CLEAR_TABLE, INSECURE_CLEAR};
use common::{netns, repo_root, require_root_and, run, run_ok, start_mmsg_with, status, MMSG};

/// Every gateway config in `examples/` (the files with a `branch_id`).
fn example_configs() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(repo_root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "toml")
                && std::fs::read_to_string(p)
                    .unwrap()
                    .lines()
                    .any(|l| l.starts_with("branch_id"))
        })
        .collect();
    out.sort();
    out
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

fn check(config: &Path, flag: bool) -> Output {
    let mut c = Command::new(MMSG);
    c.args(["check", "--config"]).arg(config);
    if flag {
        c.arg(INSECURE_CLEAR);
    }
    run(&mut c)
}

/// What the refusal of a config without `[tls]` must say.
const MISSING: [&str; 5] = [
    "no [tls] section",
    "mmsg enrol --controller tls:HOST:PORT --branch N --ca ca.pem --dir /etc/mms/tls",
    "ssc enrol-token --branch N",
    "mode = \"clear\"",
    "--insecure-clear-tunnels",
];

fn assert_refused(o: &Output, what: &str, needles: &[&str]) {
    let t = text(o);
    assert_eq!(o.status.code(), Some(1), "{what}: exit code 1 wanted: {t}");
    for n in needles {
        assert!(t.contains(n), "{what}: {n:?} missing in: {t}");
    }
}

#[test]
fn check_accepts_every_example_and_refuses_it_without_tls() {
    let tmp = tempfile::tempdir().unwrap();
    let examples = example_configs();
    let names: Vec<String> = examples
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for want in [
        "mmsg-branch1.toml",
        "mmsg-branch2.toml",
        "mmsg-ovs-branch1.toml",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
    for (p, name) in examples.iter().zip(&names) {
        let orig = std::fs::read_to_string(p).unwrap();
        assert!(
            orig.contains("ca_file = \"/etc/mms/tls/ca.pem\"")
                && orig.contains("cert_file = \"/etc/mms/tls/gw.pem\"")
                && orig.contains("key_file = \"/etc/mms/tls/gw.key\"")
                && orig.contains("crl_file = \"/etc/mms/tls/crl.pem\""),
            "{name}: [tls] with the files `mmsg enrol` writes"
        );
        let o = check(p, false);
        assert!(o.status.success(), "{name}: {}", text(&o));
        assert!(text(&o).contains(": ok (tls)"), "{name}: {}", text(&o));

        let no_tls = tmp.path().join(format!("no-tls-{name}"));
        std::fs::write(&no_tls, without_tls(&orig)).unwrap();
        assert_refused(&check(&no_tls, false), name, &MISSING);
        assert_refused(&check(&no_tls, true), name, &MISSING);

        let clear = tmp.path().join(format!("clear-{name}"));
        std::fs::write(&clear, with_table(&orig, CLEAR_TABLE)).unwrap();
        assert_refused(
            &check(&clear, false),
            name,
            &["mode = \"clear\" also needs", "--insecure-clear-tunnels"],
        );
        let o = check(&clear, true);
        assert!(o.status.success(), "{name}: {}", text(&o));
        assert!(text(&o).contains("INSECURE"), "{name}: {}", text(&o));

        assert_refused(&check(p, true), name, &["remove the flag"]);
    }
    eprintln!("mmsg check: {names:?} ok as they are, refused without [tls]");
}

/// Our own namespace `tdf-<pid>` with the WAN addresses of branch 1 on veth interfaces; deleted
/// on drop, also when the test fails.
struct Ns(String);

impl Ns {
    fn new() -> Ns {
        let ns = Ns(format!("tdf-{}", std::process::id()));
        run_ok(Command::new("ip").args(["netns", "add", &ns.0]));
        for (dev, addr) in [("wan0", "198.18.10.2/24"), ("wan1", "198.18.11.2/24")] {
            // veth (this kernel has no dummy interfaces); the peer stays in the namespace too.
            let peer = format!("{dev}p");
            run_ok(&mut netns(
                &ns.0,
                &[
                    "ip", "link", "add", dev, "type", "veth", "peer", "name", &peer,
                ],
            ));
            run_ok(&mut netns(&ns.0, &["ip", "link", "set", &peer, "up"]));
            run_ok(&mut netns(&ns.0, &["ip", "addr", "add", addr, "dev", dev]));
            run_ok(&mut netns(&ns.0, &["ip", "link", "set", dev, "up"]));
        }
        run_ok(&mut netns(&ns.0, &["ip", "link", "set", "lo", "up"]));
        ns
    }

    /// Everything `mmsg run` could leave behind in the namespace.
    fn state(&self) -> String {
        let mut s = String::new();
        for args in [
            &["ip", "-o", "link", "show"][..],
            &["ip", "-o", "addr", "show"],
            &["ip", "rule", "show"],
            &["ip", "route", "show", "table", "all"],
            &["ip", "mptcp", "endpoint", "show"],
            &["sysctl", "-n", "net.ipv4.ip_local_reserved_ports"],
        ] {
            s.push_str(&run_ok(&mut netns(&self.0, args)));
        }
        s
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn run_refuses_without_tls_and_runs_clear_only_with_the_flag() {
    require_root_and(&["ip", "timeout", "sysctl"]);
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let ns = Ns::new();
    let example = std::fs::read_to_string(repo_root().join("examples/mmsg-branch1.toml")).unwrap();
    let pki = TestPki::new(&d.join("pki"), &[1]);
    let write = |name: &str, body: String| -> PathBuf {
        let p = d.join(name);
        std::fs::write(&p, body).unwrap();
        p
    };
    let no_tls = write("no-tls.toml", without_tls(&example));
    let clear = write("clear.toml", with_table(&example, CLEAR_TABLE));
    let tls = write("tls.toml", pki.apply(&example, 1));

    // Refused before anything is touched: exit code 1, the message, no state left.
    let before = ns.state();
    for (what, config, flag, needles) in [
        ("no [tls]", &no_tls, false, &MISSING[..]),
        ("no [tls], flag", &no_tls, true, &MISSING[..]),
        (
            "clear without the flag",
            &clear,
            false,
            &["mode = \"clear\" also needs", "--insecure-clear-tunnels"][..],
        ),
        ("tls with the flag", &tls, true, &["remove the flag"][..]),
    ] {
        let control = d.join("refused.sock");
        let mut args = vec![
            "timeout".to_owned(),
            "30".into(),
            MMSG.into(),
            "run".into(),
            "--config".into(),
            config.display().to_string(),
            "--control".into(),
            control.display().to_string(),
        ];
        if flag {
            args.push(INSECURE_CLEAR.into());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run(&mut netns(&ns.0, &args));
        assert_refused(&o, what, needles);
        assert!(!control.exists(), "{what}: control socket left behind");
        assert!(
            !run(&mut netns(&ns.0, &["ip", "link", "show", "mms0"]))
                .status
                .success(),
            "{what}: TUN device mms0 left behind"
        );
        assert_eq!(ns.state(), before, "{what}: namespace state changed");
        eprintln!(
            "mmsg run, {what}: exit 1: {}",
            text(&o).lines().next().unwrap_or("")
        );
    }

    // Both opt-outs: runs in clear, says so once in the log and in its status.
    let control = d.join("clear.sock");
    let p = start_mmsg_with(
        &ns.0,
        &clear,
        &control,
        d.join("clear.log"),
        &[INSECURE_CLEAR, "--no-setup"],
    );
    let s = wait_status(&control, &p);
    assert_eq!(s["insecure_clear_tunnels"], true, "{s:#}");
    assert!(s["tls"].is_null(), "{s:#}");
    let text_status = run_ok(
        Command::new(MMSG)
            .args(["status", "--control"])
            .arg(&control),
    );
    assert!(
        text_status.contains("tls OFF (clear tunnel with --insecure-clear-tunnels)"),
        "{text_status}"
    );
    let log = p.log();
    let warns: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("TUNNELS IN CLEAR TEXT"))
        .collect();
    assert_eq!(warns.len(), 1, "one WARN line wanted: {log}");
    assert!(
        warns[0].contains("WARN") && warns[0].contains("--insecure-clear-tunnels"),
        "{}",
        warns[0]
    );
    eprintln!("clear + flag: runs; log: {}", warns[0].trim());
    drop(p);

    // TLS (the default) with a test CA's files: runs, not insecure, no WARN.
    let control = d.join("tls.sock");
    let p = start_mmsg_with(&ns.0, &tls, &control, d.join("tls.log"), &["--no-setup"]);
    let s = wait_status(&control, &p);
    assert_eq!(s["insecure_clear_tunnels"], false, "{s:#}");
    assert_eq!(s["tls"]["serial"], 1, "{s:#}");
    assert!(!p.log().contains("CLEAR TEXT"), "{}", p.log());
    drop(p);
    drop(ns);
}

/// `mmsg status --json` once the daemon serves it (panics with the log after 20 s).
fn wait_status(control: &Path, p: &common::Proc) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if control.exists() {
            let o = run(Command::new(MMSG)
                .args(["status", "--json", "--control"])
                .arg(control));
            if o.status.success() {
                return status(control);
            }
        }
        assert!(
            Instant::now() < deadline,
            "mmsg did not serve its status: {}",
            p.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
