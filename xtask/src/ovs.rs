//! One Open vSwitch (ovsdb-server + ovs-vswitchd, userspace datapath) per gateway namespace.
//!
//! DESIGN §4: an instance runs inside the gateway's namespace with its own run, database and log
//! directory (`/run/mms-testbed/<prefix>/ovs/gw<b>/`), so instances never see each other. Bridges
//! are created later by `mmsg` (end-to-end issue) with `datapath_type=netdev`,
//! `protocols=OpenFlow13` and `fail_mode=secure`; never `userspace-tso-enable`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::sh;

/// Where Debian installs the database schema.
const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

/// The directory of the OVS instance of branch `b`.
pub fn dir(state_dir: &Path, b: u8) -> PathBuf {
    state_dir.join("ovs").join(format!("gw{b}"))
}

/// The `--db` argument for `ovs-vsctl` to talk to the instance of branch `b`.
pub fn db_arg(state_dir: &Path, b: u8) -> String {
    format!("--db=unix:{}", dir(state_dir, b).join("db.sock").display())
}

fn read_pid(path: &Path) -> anyhow::Result<u32> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(t) = std::fs::read_to_string(path) {
            if let Ok(pid) = t.trim().parse() {
                return Ok(pid);
            }
        }
        if Instant::now() > deadline {
            bail!("no pid in {}", path.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The gateway namespace of branch `b` and the `OVS_*DIR` variables that point the OVS tools at
/// the instance directory `ds`.
fn ns_env(prefix: &str, b: u8, ds: &str) -> (String, [String; 4]) {
    (
        crate::testbed::names::ns_gw(prefix, b),
        [
            format!("OVS_RUNDIR={ds}"),
            format!("OVS_DBDIR={ds}"),
            format!("OVS_LOGDIR={ds}"),
            format!("OVS_SYSCONFDIR={ds}"),
        ],
    )
}

/// Starts ovs-vswitchd of branch `b` (its ovsdb-server must run) in the gateway namespace, with
/// the instance's run/db/log directory, pidfile and log file, detached; returns its PID. Also
/// used to restart a stopped switch (the database, and so the bridges, stay).
pub fn start_vswitchd(prefix: &str, b: u8, state_dir: &Path) -> anyhow::Result<u32> {
    let d = dir(state_dir, b);
    let ds = d.display().to_string();
    let (ns, env) = ns_env(prefix, b, &ds);
    let sock = format!("unix:{ds}/db.sock");
    let pid_vs = format!("--pidfile={ds}/ovs-vswitchd.pid");
    let log_vs = format!("--log-file={ds}/ovs-vswitchd.log");
    let mut a: Vec<&str> = vec!["netns", "exec", &ns, "env"];
    a.extend(env.iter().map(String::as_str));
    a.extend([
        "ovs-vswitchd",
        &sock,
        &pid_vs,
        &log_vs,
        "--detach",
        "--no-chdir",
    ]);
    sh::run("ip", &a)?;
    read_pid(&d.join("ovs-vswitchd.pid"))
}

/// Starts ovsdb-server and ovs-vswitchd in the gateway namespace of branch `b`; returns their
/// PIDs (ovsdb-server, ovs-vswitchd).
pub fn start(prefix: &str, b: u8, state_dir: &Path) -> anyhow::Result<(u32, u32)> {
    if !sh::have("ovs-vswitchd") || !Path::new(SCHEMA).exists() {
        bail!("Open vSwitch is not installed (apt-get install openvswitch-switch)");
    }
    let d = dir(state_dir, b);
    std::fs::create_dir_all(&d).with_context(|| format!("create {}", d.display()))?;
    let ds = d.display().to_string();
    let db = format!("{ds}/conf.db");
    sh::run("ovsdb-tool", &["create", &db, SCHEMA])?;
    let (ns, env) = ns_env(prefix, b, &ds);
    let mut args: Vec<&str> = vec!["netns", "exec", &ns, "env"];
    args.extend(env.iter().map(String::as_str));
    let remote = format!("--remote=punix:{ds}/db.sock");
    let pid_db = format!("--pidfile={ds}/ovsdb-server.pid");
    let log_db = format!("--log-file={ds}/ovsdb-server.log");
    let mut a = args.clone();
    a.extend([
        "ovsdb-server",
        &db,
        &remote,
        &pid_db,
        &log_db,
        "--detach",
        "--no-chdir",
    ]);
    sh::run("ip", &a)?;
    let db_pid = read_pid(&d.join("ovsdb-server.pid"))?;
    let dbarg = db_arg(state_dir, b);
    let mut a = args.clone();
    a.extend(["ovs-vsctl", &dbarg, "--no-wait", "init"]);
    sh::run("ip", &a)?;
    let vs_pid = start_vswitchd(prefix, b, state_dir)?;
    // Ready when the switch answers over its database.
    let mut a = args.clone();
    a.extend(["ovs-vsctl", &dbarg, "--timeout=10", "show"]);
    sh::run("ip", &a).context("ovs-vswitchd does not answer")?;
    Ok((db_pid, vs_pid))
}
