//! The real `ssc` for the dataplane's tests: its binary (built once per test process) and
//! `ssc run` with the REST and TLS gateway addresses it prints.
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{cargo_bin, Proc};

/// The release `ssc` binary (the build the other tests share), built on first use.
pub fn ssc_bin() -> &'static Path {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| cargo_bin("ssc"))
}

/// `ssc run --config CONFIG` (in namespace `ns`, else here), stderr into `log`; returns the
/// process and the REST API base URL, its first stdout line.
pub fn spawn_ssc(ns: Option<&str>, config: &Path, log: &Path) -> (Proc, String) {
    let mut cmd = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(ssc_bin());
            c
        }
        None => Command::new(ssc_bin()),
    };
    let mut child = cmd
        .args(["run", "--config"])
        .arg(config)
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let api = line
        .trim()
        .strip_prefix("ssc: REST API listening on ")
        .unwrap_or_else(|| panic!("unexpected first line of ssc: {line:?}"))
        .to_owned();
    (
        Proc {
            child,
            log: log.to_owned(),
        },
        api,
    )
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

/// `ssc ARGS --api API --token TOKEN` inside namespace `ns`; returns its stdout.
pub fn cli(ns: &str, api: &str, token: &str, args: &[&str]) -> String {
    super::run_ok(
        Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(ssc_bin())
            .args(args)
            .args(["--api", api, "--token", token]),
    )
}

/// `ssc run` inside the testbed's `inet` namespace (REST on loopback with `token`, gateway
/// channel over TLS on port 6691 of every address, no OpenFlow), with the 2x2 example inventory
/// and paths imported. `addrs` are the controller's addresses the gateways dial: their replies
/// route normally instead of into the WAN emulator. Returns the process and the REST base URL.
pub fn start_ssc_in_inet(inet: &str, dir: &Path, token: &str, addrs: &[&str]) -> (Proc, String) {
    for a in addrs {
        super::run_ok(Command::new("ip").args([
            "-n", inet, "rule", "add", "pref", "90", "from", a, "lookup", "main",
        ]));
    }
    std::fs::write(
        dir.join("ssc.toml"),
        format!(
            "[api]\nlisten = \"127.0.0.1:0\"\ntoken = \"{token}\"\n\n[database]\npath = \"ssc.redb\"\n\n\
             [openflow]\nlisten = \"\"\n\n[gateways]\ntls_listen = \"0.0.0.0:6691\"\n"
        ),
    )
    .unwrap();
    let (proc, api) = spawn_ssc(Some(inet), &dir.join("ssc.toml"), &dir.join("ssc.log"));
    let root = super::repo_root();
    cli(
        inet,
        &api,
        token,
        &[
            "import",
            "--inventory",
            root.join("examples/inventory-2x2.toml").to_str().unwrap(),
            "--paths",
            root.join("examples/paths-2x2.toml").to_str().unwrap(),
        ],
    );
    (proc, api)
}
