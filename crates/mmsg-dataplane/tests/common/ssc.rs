//! The real `ssc` for the dataplane's tests: its binary (built once per test process) and
//! `ssc run` with the REST and TLS gateway addresses it prints.
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{cargo_bin, Proc};

/// The debug `ssc` binary, built on first use.
pub fn ssc_bin() -> &'static Path {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| cargo_bin("controller", "ssc", false))
}

/// `ssc run --config DIR/ssc.toml` (log in `DIR/ssc.log`); returns the process, the REST API
/// base URL and the TLS gateway address (`tls:HOST:PORT`), read from its first stdout lines.
pub fn start_ssc(dir: &Path) -> (Proc, String, String) {
    let log = dir.join("ssc.log");
    let f = std::fs::File::create(&log).unwrap();
    let mut child = Command::new(ssc_bin())
        .args(["run", "--config"])
        .arg(dir.join("ssc.toml"))
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(f)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(stdout).lines();
    let (mut api, mut tls) = (None, None);
    for _ in 0..4 {
        let l = lines.next().unwrap().unwrap();
        if let Some(a) = l.strip_prefix("ssc: REST API listening on ") {
            api = Some(a.to_owned());
        }
        if let Some(a) = l.strip_prefix("ssc: gateways listening on tls:") {
            tls = Some(format!("tls:{a}"));
        }
    }
    (Proc { child, log }, api.unwrap(), tls.unwrap())
}
