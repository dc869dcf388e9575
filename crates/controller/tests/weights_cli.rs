//! `ssc weights` against a running `ssc run` on loopback (temporary database; the server is
//! stopped by its PID when the test ends, even on failure).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

const TOKEN: &str = "weights-cli-token-0123456789";

fn ssc() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ssc"));
    c.env_remove("SSC_API")
        .env_remove("SSC_TOKEN")
        .env_remove("SSC_CONFIG")
        .env_remove("SSC_LISTEN")
        .env("RUST_LOG", "warn");
    c
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

fn ok(api: &str, args: &[&str]) -> String {
    let out = ssc()
        .args(args)
        .env("SSC_API", api)
        .env("SSC_TOKEN", TOKEN)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "ssc {args:?}: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn ssc_weights_prints_the_published_weights() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ssc.toml");
    std::fs::write(
        &config,
        format!("[api]\nlisten = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\n\n[database]\npath = \"w.redb\"\n"),
    )
    .unwrap();
    let mut child = ssc()
        .args(["run", "--config"])
        .arg(&config)
        .args(["--openflow-listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let _server = Server(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let api = line
        .trim()
        .strip_prefix("ssc: REST API listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();

    assert_eq!(ok(&api, &["weights"]).trim(), "no path groups");
    let inv = examples().join("inventory-paper.toml");
    let paths = examples().join("paths-paper-table2.toml");
    ok(
        &api,
        &[
            "import",
            "--inventory",
            inv.to_str().unwrap(),
            "--paths",
            paths.to_str().unwrap(),
        ],
    );
    // No traffic (no switch connected): configured capacities, 4 × 80 Mbit/s → equal.
    let text = ok(&api, &["weights"]);
    assert_eq!(
        text.trim_end(),
        " 1 -> 2  configured g1=250 g2=250 g3=250 g4=250 (of 1000)"
    );
    let v: Value = serde_json::from_str(&ok(&api, &["weights", "--json"])).unwrap();
    assert_eq!(v["measured"], true, "ssc run feeds the SDC's rates");
    assert_eq!(v["pairs"][0]["groups"][3]["weight"], 250);
    let v: Value = serde_json::from_str(&ok(
        &api,
        &["weights", "--source", "1", "--destination", "2", "--json"],
    ))
    .unwrap();
    assert_eq!(v["basis"], "configured");
    assert_eq!(v["scale"], 1000);
    let out = ssc()
        .args(["weights", "--source", "2", "--destination", "1"])
        .env("SSC_API", &api)
        .env("SSC_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no path groups from branch 2 to branch 1"),
        "{err}"
    );
}
