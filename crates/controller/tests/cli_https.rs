//! Issue #17: the `ssc` client commands over HTTPS when `ssc run` serves `api.rest_tls`
//! (docs/ssc.md §4): with `--api https://HOST:PORT --ca-file CA` (or `SSC_CA_FILE`) a read
//! command succeeds; with another CA's certificate it fails with a clear TLS error (and `ssc`
//! logs the refused handshake); without a CA file it fails naming the flag.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "cli-https-test-token-0123456789";

fn ssc() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ssc"));
    for v in [
        "SSC_API",
        "SSC_TOKEN",
        "SSC_CONFIG",
        "SSC_LISTEN",
        "SSC_CA_FILE",
    ] {
        c.env_remove(v);
    }
    c.env("RUST_LOG", "warn");
    c
}

/// `ssc run`, stopped (SIGTERM to its PID) on drop, also when the test fails.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn cli_reads_over_https_with_the_right_ca_and_fails_clearly_with_a_wrong_one() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = pki::ca::Ca::generate("rest test CA").unwrap();
    // The certificate names the host the CLI dials (`localhost`).
    let issued = ca
        .issue_server("localhost", 9, Duration::from_secs(86_400))
        .unwrap();
    std::fs::write(d.join("rest.pem"), &issued.cert_pem).unwrap();
    pki::files::write_private(&d.join("rest.key"), issued.key_pem.as_bytes()).unwrap();
    std::fs::write(d.join("ca.pem"), ca.cert_pem()).unwrap();
    let other = pki::ca::Ca::generate("another CA").unwrap();
    std::fs::write(d.join("other.pem"), other.cert_pem()).unwrap();
    std::fs::write(d.join("ssc.token"), format!("{TOKEN}\n")).unwrap();
    let config = d.join("ssc.toml");
    std::fs::write(
        &config,
        "[api]\nlisten = \"127.0.0.1:0\"\ntoken_file = \"ssc.token\"\n\
         rest_tls = { cert_file = \"rest.pem\", key_file = \"rest.key\" }\n\n\
         [database]\npath = \"inventory.redb\"\n",
    )
    .unwrap();
    let log = d.join("ssc.log");
    let mut server = Server(
        ssc()
            .args(["run", "--config"])
            .arg(&config)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(server.0.stdout.take().unwrap()).lines();
    let port = loop {
        let l = lines.next().expect("ssc ended").unwrap();
        if let Some(p) = l.strip_prefix("ssc: REST API listening on https://127.0.0.1:") {
            break p.to_owned();
        }
    };
    let api = format!("https://localhost:{port}");
    let ca_file = |p: &Path| p.display().to_string();
    let status = |extra: &[&str], env_ca: Option<&Path>| {
        let mut c = ssc();
        c.args(["status", "--json", "--api", &api, "--token", TOKEN])
            .args(extra);
        if let Some(p) = env_ca {
            c.env("SSC_CA_FILE", p);
        }
        c.output().unwrap()
    };

    // The right CA, as a flag and from the environment.
    let ok = status(&["--ca-file", &ca_file(&d.join("ca.pem"))], None);
    assert!(ok.status.success(), "{}", text(&ok));
    let v: serde_json::Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert!(v.is_object(), "{v}");
    let ok_env = status(&[], Some(&d.join("ca.pem")));
    assert!(ok_env.status.success(), "{}", text(&ok_env));

    // Another CA: the handshake fails on the client, with a message that says why.
    let wrong = status(&["--ca-file", &ca_file(&d.join("other.pem"))], None);
    assert!(!wrong.status.success(), "{}", text(&wrong));
    let t = text(&wrong);
    assert!(
        t.contains("TLS handshake with localhost") && t.contains("UnknownIssuer"),
        "{t}"
    );
    // No CA file: refused before any byte is sent, naming the flag.
    let none = status(&[], None);
    assert!(!none.status.success(), "{}", text(&none));
    assert!(text(&none).contains("--ca-file"), "{}", text(&none));

    // ssc logged the refused handshake (its pre-auth refusal line, docs/security.md).
    let deadline = Instant::now() + Duration::from_secs(5);
    while !std::fs::read_to_string(&log)
        .unwrap()
        .contains("REST TLS handshake with 127.0.0.1")
    {
        assert!(
            Instant::now() < deadline,
            "{}",
            std::fs::read_to_string(&log).unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(server);
}
