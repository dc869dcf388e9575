//! netns test of the TLS tunnel (docs/security.md) on the 2x2 testbed: both gateways with `[tls]`
//! credentials made by `crates/pki` in a temporary directory.
//!
//! Proves: (1) legitimate TCP h1 -> h2 through the TLS tunnel (sha256); (2) a rogue namespace on
//! the emulated internet (198.18.252.10) trying junk bytes, a plain hello without TLS, a replay
//! of a captured legitimate client byte stream, TLS without a client certificate, a revoked
//! certificate, a valid certificate of another branch and a certificate of a foreign CA: each is
//! refused, counted exactly once under its reason, logged exactly once, nothing reaches gw2's
//! TUN, and the legitimate connections stay up and carry traffic; (3) rotation: new credentials
//! written and SIGHUP sent while a TCP transfer runs: the transfer completes (sha256), no tunnel
//! connection is re-established by the rotation, and new connections present the new serials;
//! (4) revocation during a transfer: gw1 rotates, then the CRL revokes its old serial and gw2
//! reloads: gw2 closes exactly the 8 connections (4 in, 4 out) where gw1 presented the revoked
//! certificate, they come back with the new one, and the transfer completes (sha256).
//! Needs root (network namespaces); fails, never skips, when something is missing.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mpa::BranchId;
use pki::ca::{Ca, DEFAULT_VALIDITY};

mod common;
use common::{
    every_conn_up_with, netns, repo_root, require_root_and, run, run_ok, start_mmsg, status,
    Testbed,
};

const CA_NAME: &str = "MMS netns test CA";

fn counter(s: &serde_json::Value, name: &str) -> u64 {
    s["counters"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {name}"))
}

fn b(n: u8) -> BranchId {
    BranchId::new(n).unwrap()
}

/// Issues branch `branch`'s certificate with `serial` into `dir/<name>.pem` + `.key` (0600).
fn issue(ca: &Ca, dir: &Path, name: &str, branch: u8, serial: u64) -> (PathBuf, PathBuf) {
    let issued = ca
        .issue_gateway(b(branch), serial, DEFAULT_VALIDITY)
        .unwrap();
    let (cert, key) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    );
    Ca::save_issued(&issued, &cert, &key).unwrap();
    (cert, key)
}

/// The example config of branch `n` with a `[tls]` section.
fn tls_config(dir: &Path, n: u8, crl: &Path) -> PathBuf {
    // The example's own [tls] (the paths `mmsg enrol` writes) is replaced by this test's files.
    let text = common::tls::without_tls(
        &std::fs::read_to_string(repo_root().join(format!("examples/mmsg-branch{n}.toml")))
            .unwrap(),
    );
    let out = dir.join(format!("gw{n}.toml"));
    std::fs::write(
        &out,
        format!(
            "{text}\n[tls]\nmode = \"tls\"\nca_file = \"{}\"\ncert_file = \"{}\"\nkey_file = \"{}\"\ncrl_file = \"{}\"\n",
            dir.join("ca.pem").display(),
            dir.join(format!("gw{n}.pem")).display(),
            dir.join(format!("gw{n}.key")).display(),
            crl.display()
        ),
    )
    .unwrap();
    out
}

fn conns_up(s: &serde_json::Value) -> bool {
    let conns = s["connections"].as_array().unwrap();
    let n = |d: &str| conns.iter().filter(|c| c["direction"] == d).count();
    n("out") == 4 && n("in") == 4 && every_conn_up_with(s, 4)
}

fn wait_up(ctl: &[&Path], logs: &dyn Fn()) {
    let deadline = Instant::now() + Duration::from_secs(40);
    while !ctl.iter().all(|c| c.exists() && conns_up(&status(c))) {
        if Instant::now() > deadline {
            logs();
            for c in ctl {
                if c.exists() {
                    eprintln!("{:#}", status(c));
                }
            }
            panic!("TLS tunnel connections did not come up with 4 subflows each");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// (direction, branch, group, class) -> times established, of the outbound connections.
fn established(s: &serde_json::Value) -> Vec<(String, u64)> {
    s["connections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["direction"] == "out")
        .map(|c| {
            (
                format!("{} {} {}", c["remote_branch"], c["path_group"], c["class"]),
                c["established"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// A TCP transfer of `bytes` random bytes h1 -> h2:6000 started in the background; `finish`
/// waits for it and asserts length and sha256.
struct Transfer {
    receiver: Child,
    sender: Child,
    want: String,
    bytes: u64,
}

impl Transfer {
    fn start(h1: &str, h2: &str, file: &Path, bytes: u64) -> Transfer {
        run_ok(
            Command::new("bash")
                .arg("-c")
                .arg(format!("head -c {bytes} /dev/urandom > {}", file.display())),
        );
        let want = run_ok(Command::new("sha256sum").arg(file));
        let want = want.split_whitespace().next().unwrap().to_owned();
        let receiver = netns(
            h2,
            &[
                "python3",
                "-c",
                "import socket,hashlib\n\
                 s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
                 s.bind(('198.19.2.10', 6000)); s.listen(1); s.settimeout(90)\n\
                 c,_=s.accept(); c.settimeout(90); h=hashlib.sha256(); n=0\n\
                 while True:\n    b=c.recv(1<<20)\n    if not b: break\n    h.update(b); n+=len(b)\n\
                 print(h.hexdigest(), n)",
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        // Wait until the receiver listens (python's start-up time varies).
        let deadline = Instant::now() + Duration::from_secs(15);
        while !run_ok(&mut netns(h2, &["ss", "-Hltn", "sport = :6000"])).contains("6000") {
            assert!(Instant::now() < deadline, "the receiver did not listen");
            std::thread::sleep(Duration::from_millis(100));
        }
        let sender = netns(
            h1,
            &[
                "bash",
                "-c",
                &format!("cat {} > /dev/tcp/198.19.2.10/6000", file.display()),
            ],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        Transfer {
            receiver,
            sender,
            want,
            bytes,
        }
    }

    fn finish(self) {
        let sent = self.sender.wait_with_output().unwrap();
        assert!(
            sent.status.success(),
            "sender failed: {}",
            String::from_utf8_lossy(&sent.stderr)
        );
        let got = self.receiver.wait_with_output().unwrap();
        let got = String::from_utf8_lossy(&got.stdout).into_owned();
        assert_eq!(
            got.split_whitespace().collect::<Vec<_>>(),
            vec![self.want.as_str(), &self.bytes.to_string()],
            "transfer h1 -> h2: sha256 and length"
        );
    }
}

/// The rogue namespace `<prefix>-rogue` hanging off the emulated internet; deleted on drop
/// (`testbed down` would remove it too).
struct Rogue {
    ns: String,
}

impl Rogue {
    fn up(tb: &Testbed) -> Rogue {
        let ns = tb.ns("rogue");
        let inet = tb.ns("inet");
        run_ok(Command::new("ip").args(["netns", "add", &ns]));
        let r = Rogue { ns: ns.clone() };
        let ipb = |target: &str, cmds: &[String]| {
            for c in cmds {
                let args: Vec<&str> = c.split_whitespace().collect();
                run_ok(&mut netns(target, &[&["ip"], &args[..]].concat()));
            }
        };
        ipb(
            &inet,
            &[
                format!("link add rogue0 type veth peer name eth0 netns {ns}"),
                "addr add 198.18.252.1/24 dev rogue0".into(),
                "link set rogue0 up".into(),
            ],
        );
        ipb(
            &ns,
            &[
                "link set lo up".into(),
                "addr add 198.18.252.10/24 dev eth0".into(),
                "link set eth0 up".into(),
                "route add default via 198.18.252.1".into(),
            ],
        );
        r
    }

    /// Runs `tls_rogue.py` with `args` in the rogue namespace; asserts gw2 closed the connection.
    fn attempt(&self, args: &[&str]) {
        let script = repo_root().join("crates/mmsg-dataplane/tests/tls_rogue.py");
        let mut full = vec!["timeout", "20", "python3"];
        let script = script.display().to_string();
        full.push(&script);
        full.extend_from_slice(args);
        let out = run(&mut netns(&self.ns, &full));
        assert!(
            out.status.success(),
            "rogue {args:?}: gw2 did not close the connection: {:?} {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Rogue {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

const REFUSAL_COUNTERS: [&str; 5] = [
    "tls_handshake_failed",
    "tls_unknown_ca",
    "tls_revoked",
    "tls_wrong_branch",
    "hello_rejected",
];

#[test]
fn tls_tunnel_refuses_rogues_and_survives_rotation() {
    require_root_and(&["ip", "python3", "bash", "sha256sum"]);
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let s = |p: &Path| p.display().to_string();

    // Credentials: the CA, both gateways, and the rogue's collection.
    let ca = Ca::generate(CA_NAME).unwrap();
    ca.save(&d.join("ca.pem"), &d.join("ca.key")).unwrap();
    issue(&ca, d, "gw1", 1, 101);
    issue(&ca, d, "gw2", 2, 201);
    let (revoked_cert, revoked_key) = issue(&ca, d, "revoked", 1, 102);
    let (b3_cert, b3_key) = issue(&ca, d, "branch3", 3, 301);
    let foreign = Ca::generate(CA_NAME).unwrap();
    let (foreign_cert, foreign_key) = issue(&foreign, d, "foreign", 1, 101);
    let crl = d.join("crl.pem");
    pki::files::write_private(&crl, ca.crl(&[102], 1).unwrap().as_bytes()).unwrap();
    let cfg1 = tls_config(d, 1, &crl);
    let cfg2 = tls_config(d, 2, &crl);

    let prefix = format!("msec{}", std::process::id() % 100_000);
    let tb = Testbed::up(&prefix);
    let (h1, h2) = (tb.ns("h1"), tb.ns("h2"));
    let (ctl1, ctl2) = (d.join("gw1.sock"), d.join("gw2.sock"));
    let p1 = start_mmsg(&tb.ns("gw1"), &cfg1, &ctl1, d.join("gw1.log"));
    let p2 = start_mmsg(&tb.ns("gw2"), &cfg2, &ctl2, d.join("gw2.log"));
    let logs = || {
        for p in [&p1, &p2] {
            eprintln!("--- {} ---\n{}", p.log.display(), p.log());
        }
    };
    wait_up(&[&ctl1, &ctl2], &logs);
    let (s1, s2) = (status(&ctl1), status(&ctl2));
    assert_eq!(s1["tls"]["serial"], 101, "{s1:#}");
    assert_eq!(s2["tls"]["serial"], 201, "{s2:#}");
    for (s, peer) in [(&s1, 201), (&s2, 101)] {
        assert_eq!(counter(s, "tls_handshakes_out"), 4);
        assert_eq!(counter(s, "tls_handshakes_in"), 4);
        for c in s["connections"].as_array().unwrap() {
            if c["direction"] == "in" {
                assert_eq!(c["peer_serial"], peer, "{c}");
            }
        }
    }
    eprintln!("TLS tunnel up: 8 connections per gateway, mutual authentication, serials 101/201");

    // (1) Legitimate traffic through the TLS tunnel.
    let t = Instant::now();
    Transfer::start(&h1, &h2, &d.join("blob1"), 20_000_000).finish();
    eprintln!(
        "20 MB h1 -> h2 through TLS: sha256 matches ({:.1} s)",
        t.elapsed().as_secs_f64()
    );

    // (2) The rogue. First a legitimate connection whose client bytes are recorded (what an
    // eavesdropper on the internet captures), made with gw1's credentials.
    let rogue = Rogue::up(&tb);
    let capture = d.join("capture.bin");
    let ca_pem = s(&d.join("ca.pem"));
    rogue.attempt(&[
        "tls",
        "--ca",
        &ca_pem,
        "--cert",
        &s(&d.join("gw1.pem")),
        "--key",
        &s(&d.join("gw1.key")),
        "--record",
        &s(&capture),
    ]);
    assert!(std::fs::metadata(&capture).unwrap().len() > 500);
    std::thread::sleep(Duration::from_secs(2));

    let base1 = status(&ctl1);
    let base2 = status(&ctl2);
    let refusals_logged = |log: &str| log.matches("inbound connection refused").count();
    let logged_before = refusals_logged(&p2.log());
    let attempts: Vec<(&str, Vec<String>, &str)> = vec![
        ("junk bytes", vec!["junk".into()], "tls_handshake_failed"),
        (
            "plain hello without TLS",
            vec!["plain".into()],
            "tls_handshake_failed",
        ),
        (
            "replayed legitimate client stream",
            vec!["replay".into(), "--replay".into(), s(&capture)],
            "tls_handshake_failed",
        ),
        (
            "TLS without a client certificate",
            vec!["tls".into(), "--ca".into(), ca_pem.clone()],
            "tls_handshake_failed",
        ),
        (
            "revoked certificate",
            vec![
                "tls".into(),
                "--ca".into(),
                ca_pem.clone(),
                "--cert".into(),
                s(&revoked_cert),
                "--key".into(),
                s(&revoked_key),
            ],
            "tls_revoked",
        ),
        (
            "valid certificate of branch 3, hello claiming branch 1",
            vec![
                "tls".into(),
                "--ca".into(),
                ca_pem.clone(),
                "--cert".into(),
                s(&b3_cert),
                "--key".into(),
                s(&b3_key),
            ],
            "tls_wrong_branch",
        ),
        (
            "certificate of a foreign CA with the same name",
            vec![
                "tls".into(),
                "--ca".into(),
                ca_pem.clone(),
                "--cert".into(),
                s(&foreign_cert),
                "--key".into(),
                s(&foreign_key),
            ],
            "tls_unknown_ca",
        ),
    ];
    for (what, args, reason) in &attempts {
        let before = status(&ctl2);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        rogue.attempt(&args);
        std::thread::sleep(Duration::from_millis(300));
        let after = status(&ctl2);
        for c in REFUSAL_COUNTERS {
            let want = u64::from(c == *reason);
            assert_eq!(
                counter(&after, c) - counter(&before, c),
                want,
                "{what}: counter {c}"
            );
        }
        for c in ["tun_tx_packets", "accepts"] {
            assert_eq!(
                counter(&after, c),
                counter(&before, c),
                "{what}: {c} must not move"
            );
        }
        // Only a valid certificate of our CA completes the handshake; it is then refused on the
        // hello (identity != source), before any frame is read.
        let handshakes =
            counter(&after, "tls_handshakes_in") - counter(&before, "tls_handshakes_in");
        assert_eq!(
            handshakes,
            u64::from(*reason == "tls_wrong_branch"),
            "{what}: completed TLS handshakes"
        );
        eprintln!("rogue: {what}: refused, {reason} +1, nothing reached TUN");
    }
    let logged = refusals_logged(&p2.log()) - logged_before;
    assert_eq!(
        logged,
        attempts.len(),
        "each refusal is logged exactly once"
    );
    // The legitimate connections were never disturbed, and still carry traffic.
    for (ctl, base) in [(&ctl1, &base1), (&ctl2, &base2)] {
        let now = status(ctl);
        assert!(conns_up(&now), "{now:#}");
        assert_eq!(established(&now), established(base), "no reconnect");
    }
    Transfer::start(&h1, &h2, &d.join("blob2"), 10_000_000).finish();
    eprintln!("after the rogue: 10 MB h1 -> h2 sha256 matches, no connection re-established");

    // (3) Rotation while a transfer runs: new certificates (new serials) written atomically,
    // SIGHUP to both gateways.
    let before_rot = (established(&status(&ctl1)), established(&status(&ctl2)));
    let transfer = Transfer::start(&h1, &h2, &d.join("blob3"), 40_000_000);
    std::thread::sleep(Duration::from_secs(2));
    issue(&ca, d, "gw1", 1, 111);
    issue(&ca, d, "gw2", 2, 211);
    for p in [&p1, &p2] {
        run_ok(Command::new("kill").args(["-HUP", &p.child.id().to_string()]));
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while !(status(&ctl1)["tls"]["serial"] == 111 && status(&ctl2)["tls"]["serial"] == 211) {
        assert!(Instant::now() < deadline, "SIGHUP did not reload");
        std::thread::sleep(Duration::from_millis(100));
    }
    let t = Instant::now();
    transfer.finish();
    eprintln!(
        "rotation during a 40 MB transfer: reloaded (serials 111/211), transfer completed {:.1} s later, sha256 matches",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(
        (established(&status(&ctl1)), established(&status(&ctl2))),
        before_rot,
        "the rotation re-established no connection"
    );
    for ctl in [&ctl1, &ctl2] {
        assert_eq!(counter(&status(ctl), "tls_reloads"), 1);
    }

    // New connections of a reloaded gateway present its new serial: restart the peer (its
    // listeners vanish, the reloaded gateway reconnects to the new process) and read the serial
    // the peer saw on every inbound connection. Gateway 2 first, then gateway 1.
    let inbound_serials = |ctl: &Path| -> Vec<serde_json::Value> {
        status(ctl)["connections"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["direction"] == "in")
            .map(|c| c["peer_serial"].clone())
            .collect()
    };
    drop(p2);
    let p2 = start_mmsg(&tb.ns("gw2"), &cfg2, &ctl2, d.join("gw2-restarted.log"));
    wait_up(&[&ctl1, &ctl2], &|| eprintln!("{}", p2.log()));
    assert_eq!(inbound_serials(&ctl2), vec![serde_json::json!(111); 4]);
    drop(p1);
    let p1 = start_mmsg(&tb.ns("gw1"), &cfg1, &ctl1, d.join("gw1-restarted.log"));
    wait_up(&[&ctl1, &ctl2], &|| eprintln!("{}", p1.log()));
    assert_eq!(inbound_serials(&ctl1), vec![serde_json::json!(211); 4]);
    Transfer::start(&h1, &h2, &d.join("blob4"), 5_000_000).finish();
    eprintln!("after reconnecting: peers present serials 111/211; 5 MB h1 -> h2 sha256 matches");

    // (4) Revocation without dropping the end-to-end flow: during a transfer, gw1 gets a new
    // certificate (serial 121, SIGHUP), then the CRL revokes its previous one (111) and gw2
    // reloads: gw2 closes exactly the connections where gw1 presented the revoked certificate,
    // they reconnect with 121, and the transfer completes.
    let closed_before = counter(&status(&ctl2), "tls_invalidated_closed");
    let transfer = Transfer::start(&h1, &h2, &d.join("blob5"), 30_000_000);
    std::thread::sleep(Duration::from_secs(2));
    issue(&ca, d, "gw1", 1, 121);
    run_ok(Command::new("kill").args(["-HUP", &p1.child.id().to_string()]));
    let deadline = Instant::now() + Duration::from_secs(5);
    while status(&ctl1)["tls"]["serial"] != 121 {
        assert!(Instant::now() < deadline, "gw1 did not reload");
        std::thread::sleep(Duration::from_millis(100));
    }
    pki::files::write_private(&crl, ca.crl(&[102, 111], 2).unwrap().as_bytes()).unwrap();
    run_ok(Command::new("kill").args(["-HUP", &p2.child.id().to_string()]));
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let ok = conns_up(&status(&ctl1))
            && conns_up(&status(&ctl2))
            && inbound_serials(&ctl2) == vec![serde_json::json!(121); 4];
        if ok {
            break;
        }
        if Instant::now() > deadline {
            eprintln!("{}\n{}", p1.log(), p2.log());
            panic!(
                "gw1 did not reconnect with its new certificate: {:?}",
                inbound_serials(&ctl2)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let t = Instant::now();
    transfer.finish();
    let closed = counter(&status(&ctl2), "tls_invalidated_closed") - closed_before;
    // gw1 presented serial 111 on both sides: as client on its 4 outbound connections and as
    // server on the 4 gw2 dialled. All 8 end, nothing else.
    assert_eq!(
        closed, 8,
        "gw2 closes exactly the connections of the revoked certificate"
    );
    assert_eq!(counter(&status(&ctl1), "tls_invalidated_closed"), 0);
    eprintln!(
        "revocation during a 30 MB transfer: gw2 closed the 8 connections (4 in, 4 out) of serial \
         111, all came back with 121, transfer completed {:.1} s later, sha256 matches",
        t.elapsed().as_secs_f64()
    );
    drop((rogue, p1, p2));
}
