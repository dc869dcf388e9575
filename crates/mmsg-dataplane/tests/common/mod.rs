//! Helpers shared by the netns integration tests of `mmsg` (each test binary uses a subset).
#![allow(dead_code)]

pub mod release;
pub mod sec;
pub mod ssc;

pub use release::{cargo_bin, xtask_bin};

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

/// The `mmsg` binary cargo built for these tests.
pub const MMSG: &str = env!("CARGO_BIN_EXE_mmsg");

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"))
}

pub fn run_ok(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Fails (never skips) unless we are root and every program in `tools` is on the PATH.
pub fn require_root_and(tools: &[&str]) {
    assert!(
        run(Command::new("id").arg("-u")).stdout == b"0\n",
        "this test needs root (network namespaces)"
    );
    for tool in tools {
        assert!(
            run(Command::new("which").arg(tool)).status.success(),
            "{tool} is missing"
        );
    }
}

/// `ip netns exec NS ARGS...`.
pub fn netns(ns: &str, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).args(args);
    c
}

/// `xtask ARGS...` in the repository root.
pub fn xtask(args: &[&str]) -> Command {
    let mut c = Command::new(xtask_bin());
    c.current_dir(repo_root()).args(args);
    c
}

/// The 2x2 testbed (`examples/testbed-2x2.toml`); torn down on drop, also when the test panics.
pub struct Testbed {
    pub prefix: String,
}

impl Testbed {
    pub fn up(prefix: &str) -> Testbed {
        Testbed::up_with(prefix, false)
    }

    /// `ovs`: also one ovsdb-server + ovs-vswitchd (userspace datapath) per gateway namespace,
    /// in [`Testbed::ovs_dir`] (`xtask testbed up --ovs`).
    #[allow(dead_code)]
    pub fn up_with(prefix: &str, ovs: bool) -> Testbed {
        // Constructed first, so a half-built testbed is torn down too.
        let tb = Testbed {
            prefix: prefix.to_owned(),
        };
        let mut args = vec![
            "testbed",
            "up",
            "--topology",
            "examples/testbed-2x2.toml",
            "--prefix",
            prefix,
        ];
        if ovs {
            args.push("--ovs");
        }
        run_ok(&mut xtask(&args));
        tb
    }

    /// The OVS directory of gateway `b` (database socket `db.sock`, `br0.mgmt`) with `--ovs`.
    #[allow(dead_code)]
    pub fn ovs_dir(&self, b: u8) -> PathBuf {
        PathBuf::from(format!("/run/mms-testbed/{}/ovs/gw{b}", self.prefix))
    }

    /// The namespace `<prefix>-<name>` (`gw1`, `h2`, `inet`).
    pub fn ns(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        let _ = xtask(&["testbed", "down", "--prefix", &self.prefix]).output();
    }
}

/// A process we started, with its log file; SIGTERM then SIGKILL on drop (only this PID).
pub struct Proc {
    pub child: Child,
    pub log: PathBuf,
}

impl Proc {
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `mmsg run --config CONFIG --control CONTROL` in namespace `ns`, output into `log`.
pub fn start_mmsg(ns: &str, config: &Path, control: &Path, log: PathBuf) -> Proc {
    start_mmsg_bin(Path::new(MMSG), ns, config, control, log, &[])
}

/// The release `mmsg` (built on first use; the same build the xtask testbed tests use): for
/// tests that measure performance (goodput under a flood), which a debug build's CPU cost
/// would measure instead of the gateway's behaviour.
pub fn mmsg_release() -> &'static Path {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| cargo_bin("mmsg"))
}

/// `BIN run --config CONFIG --control CONTROL EXTRA...` in namespace `ns`, output into `log`.
pub fn start_mmsg_bin(
    bin: &Path,
    ns: &str,
    config: &Path,
    control: &Path,
    log: PathBuf,
    extra: &[&str],
) -> Proc {
    start_mmsg_env(bin, ns, config, control, log, extra, &[])
}

/// [`start_mmsg_bin`] with environment variables `env` set for `mmsg` (e.g. `MMSG_FAILOVER`).
pub fn start_mmsg_env(
    bin: &Path,
    ns: &str,
    config: &Path,
    control: &Path,
    log: PathBuf,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Proc {
    let f = std::fs::File::create(&log).unwrap();
    let child = Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(bin)
        .args(["run", "--config"])
        .arg(config)
        .arg("--control")
        .arg(control)
        .args(extra)
        .env("MMSG_LOG", "info")
        .envs(env.iter().copied())
        .stdout(f.try_clone().unwrap())
        .stderr(f)
        .spawn()
        .unwrap();
    Proc { child, log }
}

/// Whether every connection in a `mmsg status --json` report is up with `subflows` established
/// subflows.
pub fn every_conn_up_with(s: &serde_json::Value, subflows: usize) -> bool {
    s["connections"].as_array().unwrap().iter().all(|c| {
        c["state"] == "up"
            && c["subflows"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|sf| sf["state"] == "established")
                .count()
                == subflows
    })
}

/// `mmsg status --json` of the daemon behind `control`.
pub fn status(control: &Path) -> serde_json::Value {
    let out = run_ok(
        Command::new(MMSG)
            .args(["status", "--json", "--control"])
            .arg(control),
    );
    serde_json::from_str(&out).unwrap()
}

/// `mmsg run --config CONFIG --control CONTROL EXTRA...` in namespace `ns` (e.g. `EXTRA` =
/// [`tls::INSECURE_CLEAR`] for a test about clear mode), output into `log`.
pub fn start_mmsg_with(
    ns: &str,
    config: &Path,
    control: &Path,
    log: PathBuf,
    extra: &[&str],
) -> Proc {
    start_mmsg_bin(Path::new(MMSG), ns, config, control, log, extra)
}

pub mod tls;
