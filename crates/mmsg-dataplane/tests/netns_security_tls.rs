//! netns test of the TLS gateway's defences (docs/security.md, issue #17 "Must show") on the 2x2
//! testbed, both gateways with `[tls]` credentials made by `crates/pki`: h1 (198.19.1.10,
//! branch 1) ↔ h2 (198.19.2.10, branch 2). The clear-mode counterpart is `netns_security`.
//! The gateways are the release `mmsg` (`common::mmsg_release`): (1) measures goodput under a
//! flood, and a debug build's CPU cost per refused TLS handshake made that ratio swing between
//! 0.78 and 1.12 from run to run (release: 1.00–1.10, the flood costs nothing measurable).
//!
//! Proves: (1) 2,000 half-open connections from one rogue address and 500 from 500 other
//! addresses (one each, /32s out of 198.18.254.0/23) during a bulk transfer: the transfer keeps
//! ≥ 90 % of the goodput measured without them in the same test, gw2's RSS stays bounded, no
//! connection is accepted, the pre-auth caps engage (`tunnel_refused_preauth_limit`) and the
//! refusal lines stay within the global log budget (32 + 1 per second) although every source is
//! new; (2) 200 unauthenticated TLS connections from 200 addresses that each send 64 KiB of a
//! ClientHello that never completes: gw2's RSS per connection (reported) stays bounded; (3) an
//! authenticated peer (branch 1's real certificate, `virtio_peer.py`) sends `IpVirtio` frames with
//! bad GSO types, sizes and checksum offsets: each dropped and counted (`drop_bad_virtio`), none
//! reaches h2, the connection stays up, a well-formed frame behind them does reach h2, and the
//! kernel log (`dmesg`) gets no new warning; (4) an expired CRL: gw2 loads a CRL whose
//! `next_update` passes a few seconds later; once it has, gw1 is restarted and its new tunnel
//! handshakes (both directions) fail at gw2 with `handshake_refused_crl_expired` and the log line
//! "TLS handshake refused: the CRL expired"; a fresh CRL (SIGHUP) brings them up again. Needs
//! root (network namespaces) and a readable `dmesg`; fails, never skips, when something is
//! missing.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mpa::BranchId;
use pki::ca::{Ca, DEFAULT_VALIDITY};

mod common;
use common::sec::{
    assert_source_cap_engaged, counter, flood, flood_result, refusals_logged, rss_kib, transfer,
    wait_for, Rogue, ROGUE,
};
use common::{
    mmsg_release, netns, repo_root, require_root_and, run, run_ok, start_mmsg_bin, status, Testbed,
};

/// Half-open connections from the rogue's own address.
const FLOOD_ONE: usize = 2_000;
/// Source addresses of the many-source flood, one connection each.
const MANY: usize = 500;
/// gw2's RSS may grow by at most this much during the floods over its peak in the unflooded
/// transfer: at most 256 unauthenticated connections (`MAX_PREAUTH_TOTAL`), each a task, a
/// rustls server connection and a 1 KiB hello buffer, nothing sent on them.
const RSS_GROWTH_BOUND_KIB: u64 = 16 * 1024;
/// Connections of the heavy pre-auth flood (2), one per source address.
const HEAVY: usize = 200;
/// Bytes each of them sends: a ClientHello claiming 64 KiB, cut 3 bytes before its end.
const HEAVY_BYTES: usize = 65_556;
/// gw2's peak RSS growth per connection of the heavy flood, at most. Measured on 2026-11-25:
/// 56 KiB with the 256 KiB read buffer at accept, 17 KiB with `secure::TLS_PREAUTH_READ_BUF`
/// (16 KiB) until the handshake completed.
const HEAVY_RSS_PER_CONN_BOUND_KIB: u64 = 40;
/// The global refusal-log budget (`preauth::LOG_GLOBAL_BURST`, then 1 line per second).
const LOG_GLOBAL_BURST: usize = 32;

fn b(n: u8) -> BranchId {
    BranchId::new(n).unwrap()
}

fn conns_up(s: &serde_json::Value) -> bool {
    let conns = s["connections"].as_array().unwrap();
    let n = |d: &str| conns.iter().filter(|c| c["direction"] == d).count();
    n("out") == 4 && n("in") == 4 && conns.iter().all(|c| c["state"] == "up")
}

fn wait_up(ctl: &[&Path], secs: u64, logs: &dyn Fn()) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ctl.iter().all(|c| c.exists() && conns_up(&status(c))) {
        if Instant::now() > deadline {
            logs();
            panic!("TLS tunnel connections did not come up");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The example config of branch `n` with a `[tls]` section, in `dir`.
fn tls_config(dir: &Path, n: u8) -> PathBuf {
    let out = dir.join(format!("gw{n}.toml"));
    std::fs::write(
        &out,
        common::tls::example_with(
            n,
            &format!(
            "[tls]\nmode = \"tls\"\nca_file = \"{}\"\ncert_file = \"{}\"\nkey_file = \"{}\"\ncrl_file = \"{}\"\n",
            dir.join("ca.pem").display(),
            dir.join(format!("gw{n}.pem")).display(),
            dir.join(format!("gw{n}.key")).display(),
            dir.join(format!("crl{n}.pem")).display(),
        ),
        ),
    )
    .unwrap();
    out
}

/// The kernel log, one (seconds since boot, message) per line; fails loudly when it cannot be
/// read. New messages are told by their time, not by counting lines: the ring buffer is
/// bounded, so on a machine up for long it drops its oldest lines as new ones come (a count
/// taken before then exceeded the log's length after).
fn dmesg() -> Vec<(f64, String)> {
    let out = run(&mut Command::new("dmesg"));
    assert!(
        out.status.success(),
        "dmesg is not readable ({}): the virtio check needs the kernel log",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut last = 0.0;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            // "[ 75049.925625] message"; a line without a time belongs to the one before.
            let stamped = l
                .strip_prefix('[')
                .and_then(|r| r.split_once(']'))
                .and_then(|(t, m)| Some((t.trim().parse::<f64>().ok()?, m.trim_start())));
            match stamped {
                Some((t, m)) => {
                    last = t;
                    (t, m.to_owned())
                }
                None => (last, l.to_owned()),
            }
        })
        .collect()
}

/// Kernel messages that would mean a bad virtio header reached the stack.
fn kernel_warning(line: &str) -> bool {
    [
        "WARNING",
        "BUG",
        "Oops",
        "gso",
        "GSO",
        "virtio",
        "skb",
        "tun:",
        "csum",
        "bad offload",
    ]
    .iter()
    .any(|p| line.contains(p))
}

/// h2 records the payloads of UDP datagrams to port 7001 until `want` arrived or 6 s passed.
const SINK: &str = r#"
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 7001)); s.settimeout(6)
want, got = int(sys.argv[1]), []
print("ready", flush=True)
try:
    while len(got) < want:
        b, a = s.recvfrom(65536); got.append(b[:13].decode("ascii", "replace").strip())
except socket.timeout:
    pass
print(" ".join(got))
"#;

#[test]
fn tls_gateway_bounds_floods_drops_bad_virtio_and_fails_closed_on_an_expired_crl() {
    require_root_and(&["ip", "python3", "iperf3", "ss", "dmesg"]);
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let s = |p: &Path| p.display().to_string();
    let ca = Ca::generate("MMS netns security test CA").unwrap();
    ca.save(&d.join("ca.pem"), &d.join("ca.key")).unwrap();
    for (n, serial) in [(1, 101), (2, 201)] {
        let issued = ca.issue_gateway(b(n), serial, DEFAULT_VALIDITY).unwrap();
        Ca::save_issued(
            &issued,
            &d.join(format!("gw{n}.pem")),
            &d.join(format!("gw{n}.key")),
        )
        .unwrap();
        pki::files::write_private(
            &d.join(format!("crl{n}.pem")),
            ca.crl(&[], 1).unwrap().as_bytes(),
        )
        .unwrap();
    }
    let (cfg1, cfg2) = (tls_config(d, 1), tls_config(d, 2));
    let prefix = format!("sct{}", std::process::id() % 100_000);
    let tb = Testbed::up(&prefix);
    let (gw1, gw2, h1, h2) = (tb.ns("gw1"), tb.ns("gw2"), tb.ns("h1"), tb.ns("h2"));
    let (ctl1, ctl2) = (d.join("gw1.sock"), d.join("gw2.sock"));
    let p1 = start_mmsg_bin(mmsg_release(), &gw1, &cfg1, &ctl1, d.join("gw1.log"), &[]);
    let p2 = start_mmsg_bin(mmsg_release(), &gw2, &cfg2, &ctl2, d.join("gw2.log"), &[]);
    let logs2 = || eprintln!("--- gw2 ---\n{}", p2.log());
    wait_up(&[&ctl1, &ctl2], 40, &|| {
        eprintln!("--- gw1 ---\n{}", p1.log());
        logs2();
    });
    let gw2_pid = p2.child.id();
    assert_eq!(
        std::fs::read_to_string(format!("/proc/{gw2_pid}/comm"))
            .unwrap()
            .trim(),
        "mmsg"
    );
    let rogue = Rogue::up(tb.ns("rogue"), &tb.ns("inet"));
    let many = rogue.add_sources(&tb.ns("inet"), MANY);
    eprintln!(
        "TLS tunnel up (4 + 4 connections per gateway), rogue with {} + 1 addresses ({:.1} s)",
        many.len(),
        started.elapsed().as_secs_f64()
    );

    // (1) Goodput without, with, and again without 2,000 + 500 half-open connections.
    let secs = 4;
    let (base, base_rss) = transfer(&h1, &h2, 5401, secs, gw2_pid);
    let before = status(&ctl2);
    let logged_before = refusals_logged(&p2.log());
    let flood_start = Instant::now();
    let hold = secs + 3;
    let f_one = flood(&rogue.ns, &[ROGUE.into()], FLOOD_ONE, 0, hold);
    let f_many = flood(&rogue.ns, &many, MANY, 0, hold);
    // Every flood connection ends: refused at accept, or timed out / closed before a handshake.
    let total = (FLOOD_ONE + MANY) as u64;
    let ended = |s: &serde_json::Value| {
        counter(s, "tunnel_refused_preauth_limit") + counter(s, "tls_handshake_failed")
            - counter(&before, "tunnel_refused_preauth_limit")
            - counter(&before, "tls_handshake_failed")
    };
    // The floods are under way (synchronisation only; what the caps refused is asserted below).
    wait_for("the floods to reach the caps", 15, || {
        ended(&status(&ctl2)) > 1500
    });
    let (flooded, flood_rss) = transfer(&h1, &h2, 5402, secs, gw2_pid);
    let results = [flood_result(f_one), flood_result(f_many)];
    wait_for("every flood connection to be refused", 15, || {
        ended(&status(&ctl2)) >= total
    });
    let flood_secs = flood_start.elapsed().as_secs_f64();
    let (base2, _) = transfer(&h1, &h2, 5403, secs, gw2_pid);
    let s2 = status(&ctl2);
    let dc = |c: &str| counter(&s2, c) - counter(&before, c);
    let log = p2.log();
    let lines = refusals_logged(&log) - logged_before;
    let ratio = flooded / ((base + base2) / 2.0);
    eprintln!(
        "(1) goodput {base:.1} / {flooded:.1} (flooded) / {base2:.1} Mbit/s: ratio {ratio:.3}; \
         gw2 peak RSS {base_rss} KiB unflooded, {flood_rss} KiB flooded; refused: preauth limit \
         {}, handshake failed/timed out {}; log lines {lines} in {flood_secs:.1} s, suppressed \
         {}; flooders (opened closed still_open): one address {}, {MANY} addresses {}",
        dc("tunnel_refused_preauth_limit"),
        dc("tls_handshake_failed"),
        dc("tunnel_refusal_logs_suppressed"),
        results[0],
        results[1],
    );
    assert!(
        ratio >= 0.9,
        "goodput under the flood fell to {ratio:.3} of the unflooded"
    );
    assert!(
        flood_rss <= base_rss + RSS_GROWTH_BOUND_KIB,
        "gw2 RSS {flood_rss} KiB under the flood, {base_rss} KiB without"
    );
    assert!(ended(&s2) >= total, "every flood connection refused");
    // (How many gw2 reaches during the hold depends on the machine: the accept queue holds 128
    // and the flooder's kernel retries the others' SYNs after 1 and 3 s. Those it reaches after
    // the flooder left end at EOF, as `tls_handshake_failed`: 1,129 on a slow CI run.)
    assert_source_cap_engaged(
        dc("tunnel_refused_preauth_limit"),
        &results[0],
        hold,
        "one-address flood",
    );
    for c in ["accepts", "tls_handshakes_in"] {
        assert_eq!(dc(c), 0, "{c} must not move");
    }
    let log_bound = LOG_GLOBAL_BURST + flood_secs.ceil() as usize + 1;
    assert!(
        lines <= log_bound,
        "{lines} refusal lines for {total} refusals from {} addresses (bound {log_bound})",
        MANY + 1
    );
    assert!(
        dc("tunnel_refusal_logs_suppressed") >= total - lines as u64,
        "the refusals not logged are counted"
    );
    assert!(
        log.contains("inbound connection refused: too many unauthenticated connections"),
        "{log}"
    );
    assert!(conns_up(&s2), "the legitimate connections stayed up");

    // (2) Unauthenticated TLS connections that send 64 KiB of a ClientHello each.
    let rss0 = rss_kib(gw2_pid);
    let before = status(&ctl2);
    let f_heavy = flood(&rogue.ns, &many[..HEAVY], HEAVY, HEAVY_BYTES, 4);
    let mut heavy_peak = rss0;
    let deadline = Instant::now() + Duration::from_secs(4);
    while Instant::now() < deadline {
        heavy_peak = heavy_peak.max(rss_kib(gw2_pid));
        std::thread::sleep(Duration::from_millis(50));
    }
    let heavy = flood_result(f_heavy);
    let s2 = status(&ctl2);
    let dh = |c: &str| counter(&s2, c) - counter(&before, c);
    let per_conn = heavy_peak.saturating_sub(rss0) / HEAVY as u64;
    eprintln!(
        "(2) {HEAVY} TLS connections x {HEAVY_BYTES} bytes of an incomplete ClientHello: gw2 RSS \
         {rss0} -> peak {heavy_peak} KiB, {per_conn} KiB per connection; refused: handshake \
         failed/timed out {}, preauth limit {}; flooder {heavy}",
        dh("tls_handshake_failed"),
        dh("tunnel_refused_preauth_limit"),
    );
    assert_eq!(
        counter(&s2, "tls_handshakes_in"),
        counter(&before, "tls_handshakes_in")
    );
    assert!(
        per_conn <= HEAVY_RSS_PER_CONN_BOUND_KIB,
        "{per_conn} KiB per unauthenticated TLS connection"
    );

    // (3) Malformed virtio headers from an authenticated peer.
    let dmesg_before = dmesg().last().map_or(0.0, |(t, _)| *t);
    let mut sink = netns(&h2, &["python3", "-c", SINK, "1"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(sink.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready");
    }
    let before = status(&ctl2);
    let script = repo_root().join("crates/mmsg-dataplane/tests/virtio_peer.py");
    let out = run(&mut netns(
        &rogue.ns,
        &[
            "timeout",
            "20",
            "python3",
            &s(&script),
            "--ca",
            &s(&d.join("ca.pem")),
            "--cert",
            &s(&d.join("gw1.pem")),
            "--key",
            &s(&d.join("gw1.key")),
        ],
    ));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the authenticated peer's connection was closed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bad: u64 = stdout
        .trim()
        .strip_prefix("sent ")
        .and_then(|n| n.parse().ok())
        .unwrap();
    let got = sink.wait_with_output().unwrap();
    let got = String::from_utf8_lossy(&got.stdout).into_owned();
    let after = status(&ctl2);
    let dv = |c: &str| counter(&after, c) - counter(&before, c);
    eprintln!(
        "(3) authenticated peer: {bad} malformed virtio frames, drop_bad_virtio +{}, \
         tun_tx_packets +{}, h2 received [{}]",
        dv("drop_bad_virtio"),
        dv("tun_tx_packets"),
        got.trim()
    );
    assert_eq!(dv("tls_handshakes_in"), 1, "the peer authenticated");
    assert_eq!(dv("drop_bad_virtio"), bad, "every malformed frame dropped");
    assert_eq!(
        got.split_whitespace().collect::<Vec<_>>(),
        vec!["virtio-ok"]
    );
    let new_kernel: Vec<String> = dmesg()
        .into_iter()
        .filter(|(t, l)| *t > dmesg_before && kernel_warning(l))
        .map(|(_, l)| l)
        .collect();
    assert!(
        new_kernel.is_empty(),
        "new kernel warnings: {new_kernel:#?}"
    );
    let log = p2.log();
    assert!(
        log.contains("frame from a peer dropped: malformed virtio header"),
        "no log line about the dropped virtio frames:\n{log}"
    );

    // (4) An expired CRL blocks new handshakes; a fresh one lifts it.
    wait_up(&[&ctl1, &ctl2], 20, &logs2);
    let next_update = pki::crl::unix_now() + 3;
    pki::files::write_private(
        &d.join("crl2.pem"),
        ca.crl_until(&[], 2, next_update).unwrap().as_bytes(),
    )
    .unwrap();
    let reloads = counter(&status(&ctl2), "tls_reloads");
    run_ok(Command::new("kill").args(["-HUP", &gw2_pid.to_string()]));
    wait_for("gw2 to load the short-lived CRL", 5, || {
        counter(&status(&ctl2), "tls_reloads") == reloads + 1
    });
    wait_for("the CRL's next_update to pass", 10, || {
        pki::crl::unix_now() > next_update
    });
    let before = status(&ctl2);
    drop(p1);
    let p1 = start_mmsg_bin(
        mmsg_release(),
        &gw1,
        &cfg1,
        &ctl1,
        d.join("gw1-restarted.log"),
        &[],
    );
    wait_for("gw1's new handshakes to be refused", 20, || {
        counter(&status(&ctl2), "handshake_refused_crl_expired")
            >= counter(&before, "handshake_refused_crl_expired") + 2
    });
    let s2 = status(&ctl2);
    let log = p2.log();
    eprintln!(
        "(4) CRL expired: handshake_refused_crl_expired +{}, tls_handshakes_in +{}, out +{}",
        counter(&s2, "handshake_refused_crl_expired")
            - counter(&before, "handshake_refused_crl_expired"),
        counter(&s2, "tls_handshakes_in") - counter(&before, "tls_handshakes_in"),
        counter(&s2, "tls_handshakes_out") - counter(&before, "tls_handshakes_out"),
    );
    assert_eq!(
        counter(&s2, "tls_handshakes_in"),
        counter(&before, "tls_handshakes_in"),
        "no inbound handshake completes with an expired CRL"
    );
    assert!(!conns_up(&s2), "no connection to the restarted gw1 came up");
    assert!(
        log.contains("TLS handshake refused: the CRL expired"),
        "{log}"
    );
    pki::files::write_private(&d.join("crl2.pem"), ca.crl(&[], 3).unwrap().as_bytes()).unwrap();
    run_ok(Command::new("kill").args(["-HUP", &gw2_pid.to_string()]));
    wait_up(&[&ctl1, &ctl2], 30, &|| {
        eprintln!("--- gw1 ---\n{}", p1.log());
        logs2();
    });
    eprintln!(
        "(4) fresh CRL (number 3) + SIGHUP: all 8 connections up again; test took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    drop((rogue, p1, p2));
}
