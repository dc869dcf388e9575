//! The whole MMS system on the paper's testbed (seed 000 §V, Fig. 9; docs/e2e.md): five gateways,
//! each with its own Open vSwitch (built by `mmsg` itself from `[ovs]`), one `ssc` programming all
//! five switches over OpenFlow 1.3 with the paper's inventory and Table II, and five `mmsg run`
//! tunnelling between every pair of branches.
//!
//! [`System::up`] does, in order:
//! 1. `testbed up` of `examples/testbed-paper.toml` with `--ovs` (one ovsdb-server + ovs-vswitchd
//!    per gateway namespace, database socket `/run/mms-testbed/<prefix>/ovs/gw<b>/db.sock`);
//! 2. release builds of `mmsg` and `ssc` (`cargo build --release`, the caller's target dir);
//! 3. `ssc run` on a fresh database (REST on `127.0.0.1:0`, OpenFlow only on one unix socket per
//!    gateway, inside that gateway's OVS run directory, which ovs-vswitchd requires; the filesystem
//!    is shared by all namespaces), then `ssc import` of `examples/inventory-paper.toml` and
//!    `examples/paths-paper-table2.toml`;
//! 4. one static `mmsg` config per branch ([`mmsg_config`]): the four other branches as remotes,
//!    path groups 1..4 between branches 1 and 2 (both directions, Table II), group 0 elsewhere,
//!    `[ovs]` pointing at the gateway's database and its `ssc` socket;
//! 5. five `mmsg run` (own control socket, log file in [`System::log_dir`]) and waits until every
//!    connection of every gateway is up with its 2 × 2 subflows.
//!
//! Everything is torn down in `Drop` (also on error or panic): the `mmsg`s (SIGTERM by PID, so
//! they delete their bridges and move the addresses back), `ssc` (by PID), then `testbed down`.
//! The log directory is kept for post-mortems.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use controller::sdc::StatsView;
use controller::ui::client::Client;
use serde_json::Value;

use crate::sh;
use crate::testbed::{self, UpOptions};
use crate::topology::{self, PortKind, Topology};

/// Bearer token of the system's `ssc` (a throwaway instance on loopback).
pub const TOKEN: &str = "e2e-token-0123456789abcdef0123";
/// The branches of the paper's testbed.
pub const BRANCHES: [u8; 5] = [1, 2, 3, 4, 5];
/// How long every connection of every gateway may take to come up with all its subflows.
const TUNNELS_UP_TIMEOUT: Duration = Duration::from_secs(90);

/// How to bring the system up.
#[derive(Debug, Clone)]
pub struct Options {
    /// The repository root (examples, cargo workspace).
    pub root: PathBuf,
    /// Name prefix of the testbed (namespaces, state directory).
    pub prefix: String,
    /// `selection_policy` of every `mmsg` (`rr`, `wrr`, `throughput`).
    pub selection_policy: String,
    /// SDC polling interval of `ssc` (`--stats-interval`), e.g. `500ms`.
    pub stats_interval: String,
    /// The `xtask` binary to run `testbed up` with (its WAN emulator re-executes the binary that
    /// built the testbed, so a test binary must not build it in-process). `None`: in-process,
    /// when the caller is the `xtask` binary itself.
    pub xtask: Option<PathBuf>,
}

impl Options {
    /// Defaults: round robin, stats every 500 ms.
    pub fn new(root: &Path, prefix: &str) -> Options {
        Options {
            root: root.to_owned(),
            prefix: prefix.to_owned(),
            selection_policy: "rr".to_owned(),
            stats_interval: "500ms".to_owned(),
            xtask: None,
        }
    }
}

/// One running `mmsg`.
#[derive(Debug)]
struct Gateway {
    branch: u8,
    child: Child,
    control: PathBuf,
}

/// The running system; everything goes away on drop.
#[derive(Debug)]
pub struct System {
    /// Testbed prefix.
    pub prefix: String,
    /// The testbed topology.
    pub topology: Topology,
    /// REST base URL of `ssc` (`http://127.0.0.1:PORT`).
    pub api_base: String,
    /// Bearer token of the REST API.
    pub token: String,
    /// Logs (`ssc.log`, `mmsg-gw<b>.log`) and configs (`mmsg-gw<b>.toml`); kept after teardown.
    pub log_dir: PathBuf,
    /// The `mmsg` binary.
    pub mmsg: PathBuf,
    /// The `ssc` binary.
    pub ssc: PathBuf,
    /// Member routes of Table II: (group, member) → `1a>3a>3b>2a`.
    pub routes: BTreeMap<(u8, u8), String>,
    api: Client,
    ssc_child: Option<Child>,
    gateways: Vec<Gateway>,
    testbed_up: bool,
}

/// Builds `bin` of `package` in release and returns the executable cargo reports.
pub fn build_release(root: &Path, package: &str, bin: &str) -> anyhow::Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(root)
        .args(["build", "--release", "-p", package, "--bin", bin])
        .arg("--message-format=json-render-diagnostics")
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("run cargo build -p {package}"))?;
    ensure!(out.status.success(), "cargo build of {bin} failed");
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let is_bin = v.get("reason").and_then(Value::as_str) == Some("compiler-artifact")
            && v.get("target")
                .and_then(|t| t.get("name"))
                .and_then(Value::as_str)
                == Some(bin);
        if let Some(exe) = v
            .get("executable")
            .and_then(Value::as_str)
            .filter(|_| is_bin)
        {
            return Ok(PathBuf::from(exe));
        }
    }
    bail!("cargo did not report the {bin} executable")
}

/// The OVS directory of gateway `b` (run dir, database socket, management sockets).
pub fn ovs_dir(prefix: &str, b: u8) -> PathBuf {
    crate::ovs::dir(&testbed::state_dir(prefix), b)
}

/// Whether branches `a` and `b` use Table II's groups 1..4 (branches 1 and 2) or group 0.
fn table2_pair(a: u8, b: u8) -> bool {
    matches!((a, b), (1, 2) | (2, 1))
}

/// The static `mmsg` config of branch `b` in testbed `prefix` (see the module docs).
pub fn mmsg_config(
    topo: &Topology,
    prefix: &str,
    b: u8,
    selection_policy: &str,
) -> anyhow::Result<String> {
    let ports = topo.ports();
    let internet = |br: u8| {
        ports
            .iter()
            .filter(move |p| p.id.branch == br && p.kind == PortKind::Internet)
    };
    let mut t = String::new();
    writeln!(
        t,
        "# Generated by xtask::e2e for branch {b} of testbed {prefix}.\n\
         branch_id = {b}\nlan_prefixes = [\"198.19.{b}.0/24\"]\nselection_policy = \"{selection_policy}\"\n"
    )?;
    for p in internet(b) {
        writeln!(
            t,
            "[[wan]]\nname = \"{}\"\naddress = \"{}/{}\"\ngateway = \"{}\"\n",
            p.gw_if, p.addr, p.prefix_len, p.next_hop
        )?;
    }
    for r in topo.branches.iter().map(|x| x.id).filter(|&r| r != b) {
        let addrs: Vec<String> = internet(r).map(|p| format!("\"{}\"", p.addr)).collect();
        writeln!(
            t,
            "[[remote]]\nid = {r}\nwan_addresses = [{}]\nlan_prefixes = [\"198.19.{r}.0/24\"]",
            addrs.join(", ")
        )?;
        if table2_pair(b, r) {
            writeln!(
                t,
                "path_groups = [{{ id = 1 }}, {{ id = 2 }}, {{ id = 3 }}, {{ id = 4 }}]"
            )?;
        }
        writeln!(t)?;
    }
    let d = ovs_dir(prefix, b);
    writeln!(
        t,
        "[ovs]\nbridge = \"br0\"\ndb = \"unix:{}\"\ncontroller = \"unix:{}\"",
        d.join("db.sock").display(),
        d.join("ssc.sock").display()
    )?;
    Ok(t)
}

/// Member routes of a paths file: (group, member 1..) → `1a>2a`.
pub fn member_routes(paths_toml: &str) -> anyhow::Result<BTreeMap<(u8, u8), String>> {
    let v: toml::Value = toml::from_str(paths_toml).context("parse the paths file")?;
    let mut out = BTreeMap::new();
    for g in v
        .get("groups")
        .and_then(toml::Value::as_array)
        .context("no [[groups]]")?
    {
        let id = g
            .get("id")
            .and_then(toml::Value::as_integer)
            .and_then(|i| u8::try_from(i).ok())
            .context("group without id")?;
        let members = g
            .get("members")
            .and_then(toml::Value::as_array)
            .context("group without members")?;
        for (s, m) in members.iter().enumerate() {
            let s = u8::try_from(s + 1).context("too many members")?;
            out.insert((id, s), m.as_str().unwrap_or("?").to_owned());
        }
    }
    Ok(out)
}

/// `mmsg status --json` of the daemon behind `control`.
fn status_of(mmsg: &Path, control: &Path) -> anyhow::Result<Value> {
    let out = Command::new(mmsg)
        .args(["status", "--json", "--control"])
        .arg(control)
        .output()
        .context("run mmsg status")?;
    ensure!(
        out.status.success(),
        "mmsg status --control {}: {}",
        control.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    serde_json::from_slice(&out.stdout).context("parse mmsg status --json")
}

/// Established subflows of every connection, if every connection is up.
pub fn subflows_when_up(s: &Value) -> Option<Vec<usize>> {
    let conns = s.get("connections")?.as_array()?;
    if conns.is_empty() || conns.iter().any(|c| c["state"] != "up") {
        return None;
    }
    conns
        .iter()
        .map(|c| {
            c["subflows"]
                .as_array()
                .map(|v| v.iter().filter(|sf| sf["state"] == "established").count())
        })
        .collect()
}

/// Outbound bytes per path group towards `remote` in one `mmsg status` (both classes summed).
pub fn group_bytes_tx(status: &Value, remote: u8) -> BTreeMap<u8, u64> {
    let mut out = BTreeMap::new();
    for c in status["connections"].as_array().into_iter().flatten() {
        if c["direction"] == "out" && c["remote_branch"] == remote {
            let g = c["path_group"]
                .as_u64()
                .and_then(|g| u8::try_from(g).ok())
                .unwrap_or(u8::MAX);
            *out.entry(g).or_insert(0) += c["bytes_tx"].as_u64().unwrap_or(0);
        }
    }
    out
}

impl System {
    /// Brings the whole system up (module docs). On error, whatever was started is torn down.
    pub fn up(opts: &Options) -> anyhow::Result<System> {
        for tool in [
            "ip",
            "ovs-vswitchd",
            "ovsdb-server",
            "ovs-vsctl",
            "ovs-ofctl",
        ] {
            ensure!(
                sh::have(tool),
                "{tool} is missing: the end-to-end system needs iproute2 and Open vSwitch 3.1 \
                 (cargo xtask deps / apt-get install openvswitch-switch)"
            );
        }
        let root = &opts.root;
        let topo_file = root.join("examples/testbed-paper.toml");
        let topo = topology::parse(
            &std::fs::read_to_string(&topo_file)
                .with_context(|| format!("read {}", topo_file.display()))?,
        )?;
        let paths_file = root.join("examples/paths-paper-table2.toml");
        let inv_file = root.join("examples/inventory-paper.toml");
        let routes = member_routes(
            &std::fs::read_to_string(&paths_file)
                .with_context(|| format!("read {}", paths_file.display()))?,
        )?;
        let log_dir = std::env::temp_dir().join(format!("mms-e2e-{}", opts.prefix));
        std::fs::create_dir_all(&log_dir)
            .with_context(|| format!("create {}", log_dir.display()))?;

        // Build first: a build failure then leaves nothing to clean up.
        let mmsg = build_release(root, "mmsg-dataplane", "mmsg")?;
        let ssc = build_release(root, "controller", "ssc")?;

        let mut sys = System {
            prefix: opts.prefix.clone(),
            topology: topo.clone(),
            api_base: String::new(),
            token: TOKEN.to_owned(),
            log_dir: log_dir.clone(),
            mmsg,
            ssc,
            routes,
            api: Client::new("http://127.0.0.1:1", Some(TOKEN), Duration::from_secs(10)),
            ssc_child: None,
            gateways: Vec::new(),
            testbed_up: false,
        };
        sys.testbed_up = true;
        match &opts.xtask {
            None => {
                testbed::up(
                    &topo,
                    &UpOptions {
                        prefix: opts.prefix.clone(),
                        ovs: true,
                    },
                )?;
            }
            Some(exe) => {
                let out = Command::new(exe)
                    .current_dir(root)
                    .args(["testbed", "up", "--topology"])
                    .arg(&topo_file)
                    .args(["--prefix", &opts.prefix, "--ovs"])
                    .output()
                    .context("run xtask testbed up")?;
                ensure!(
                    out.status.success(),
                    "xtask testbed up: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
        }

        sys.set_router_macs()?;
        sys.start_ssc(&opts.stats_interval)?;
        let out = Command::new(&sys.ssc)
            .args([
                "import",
                "--api",
                &sys.api_base,
                "--token",
                TOKEN,
                "--inventory",
            ])
            .arg(&inv_file)
            .arg("--paths")
            .arg(&paths_file)
            .output()
            .context("run ssc import")?;
        ensure!(
            out.status.success(),
            "ssc import: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );

        for b in BRANCHES {
            let cfg = log_dir.join(format!("mmsg-gw{b}.toml"));
            std::fs::write(
                &cfg,
                mmsg_config(&topo, &opts.prefix, b, &opts.selection_policy)?,
            )?;
            let control = log_dir.join(format!("mmsg-gw{b}.sock"));
            let log = std::fs::File::create(log_dir.join(format!("mmsg-gw{b}.log")))?;
            let child = Command::new("ip")
                .args(["netns", "exec", &testbed::ns_gw(&opts.prefix, b)])
                .arg(&sys.mmsg)
                .arg("run")
                .arg("--config")
                .arg(&cfg)
                .arg("--control")
                .arg(&control)
                .env("MMSG_LOG", "info")
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .spawn()
                .context("start mmsg")?;
            sys.gateways.push(Gateway {
                branch: b,
                child,
                control,
            });
        }
        sys.wait_tunnels_up()?;
        Ok(sys)
    }

    /// Gives every router interface of the `inet` namespace the MAC the inventory calls its
    /// `gateway_mac` (02:00 + its IPv4 octets): transit and source swap entries write it as
    /// `eth_dst`, and a router whose interface has another MAC drops those frames as not its own.
    /// `testbed up` leaves the kernel's random MACs.
    fn set_router_macs(&self) -> anyhow::Result<()> {
        let inet = testbed::ns_inet(&self.prefix);
        let cmds: Vec<String> = self
            .topology
            .ports()
            .iter()
            .map(|p| {
                let [a, b, c, d] = p.next_hop.octets();
                format!(
                    "link set dev {} address 02:00:{a:02x}:{b:02x}:{c:02x}:{d:02x}",
                    p.inet_if
                )
            })
            .collect();
        sh::ip_batch(&inet, &cmds).context("set the router MACs of the inventory")?;
        Ok(())
    }

    fn start_ssc(&mut self, stats_interval: &str) -> anyhow::Result<()> {
        let sockets: Vec<String> = BRANCHES
            .iter()
            .map(|&b| {
                format!(
                    "{:?}",
                    ovs_dir(&self.prefix, b)
                        .join("ssc.sock")
                        .display()
                        .to_string()
                )
            })
            .collect();
        let dbdir = self.log_dir.join("ssc-db");
        let _ = std::fs::remove_dir_all(&dbdir);
        std::fs::create_dir_all(&dbdir)?;
        let config = self.log_dir.join("ssc.toml");
        std::fs::write(
            &config,
            format!(
                "[api]\ntoken = \"{TOKEN}\"\nlisten = \"127.0.0.1:0\"\n\n[database]\npath = {:?}\n\n\
                 [openflow]\nlisten = \"\"\nunix = [{}]\n",
                dbdir.join("ssc.redb").display().to_string(),
                sockets.join(", ")
            ),
        )?;
        let log = std::fs::File::create(self.log_dir.join("ssc.log"))?;
        let mut child = Command::new(&self.ssc)
            .args(["run", "--config"])
            .arg(&config)
            .args(["--stats-interval", stats_interval])
            .env("RUST_LOG", "controller=info")
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .context("start ssc")?;
        let stdout = child.stdout.take().context("ssc stdout")?;
        self.ssc_child = Some(child);
        let mut reader = BufReader::new(stdout);
        let mut first = String::new();
        reader.read_line(&mut first)?;
        let base = first
            .trim()
            .strip_prefix("ssc: REST API listening on ")
            .with_context(|| format!("unexpected first line of ssc: {first:?}"))?
            .to_owned();
        // Keep draining ssc's stdout so it never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = String::new();
            while reader.read_line(&mut sink).is_ok_and(|n| n > 0) {
                sink.clear();
            }
        });
        self.api = Client::new(&base, Some(TOKEN), Duration::from_secs(10));
        self.api_base = base;
        Ok(())
    }

    fn wait_tunnels_up(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + TUNNELS_UP_TIMEOUT;
        let mut last = String::new();
        loop {
            let mut ok = true;
            last.clear();
            for g in &mut self.gateways {
                if let Ok(Some(st)) = g.child.try_wait() {
                    let log = std::fs::read_to_string(
                        self.log_dir.join(format!("mmsg-gw{}.log", g.branch)),
                    )
                    .unwrap_or_default();
                    let tail: Vec<&str> = log
                        .lines()
                        .rev()
                        .take(10)
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .collect();
                    bail!(
                        "mmsg of branch {} exited ({st}):\n{}",
                        g.branch,
                        tail.join("\n")
                    );
                }
                match status_of(&self.mmsg, &g.control) {
                    Ok(s) => match subflows_when_up(&s) {
                        Some(v) if v.iter().all(|&n| n == 4) => {}
                        Some(v) => {
                            ok = false;
                            let _ = write!(last, "gw{}: subflows {v:?}; ", g.branch);
                        }
                        None => {
                            ok = false;
                            let _ = write!(last, "gw{}: a connection is not up; ", g.branch);
                        }
                    },
                    Err(e) => {
                        ok = false;
                        let _ = write!(last, "gw{}: {e:#}; ", g.branch);
                    }
                }
            }
            if ok {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "the tunnels did not come up with 2 x 2 subflows each within {TUNNELS_UP_TIMEOUT:?}: \
                     {last}(logs in {})",
                    self.log_dir.display()
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The gateway namespace of branch `b`.
    pub fn ns_gw(&self, b: u8) -> String {
        testbed::ns_gw(&self.prefix, b)
    }

    /// The namespace of the (first) LAN host of branch `b`.
    pub fn ns_host(&self, b: u8) -> String {
        testbed::ns_host(&self.prefix, b, 0)
    }

    /// The address of the (first) LAN host of branch `b`.
    pub fn host_addr(&self, b: u8) -> std::net::Ipv4Addr {
        testbed::host_addr(b, 0)
    }

    /// The log file of `mmsg` of branch `b`.
    pub fn mmsg_log(&self, b: u8) -> PathBuf {
        self.log_dir.join(format!("mmsg-gw{b}.log"))
    }

    /// The log file of `ssc`.
    pub fn ssc_log(&self) -> PathBuf {
        self.log_dir.join("ssc.log")
    }

    /// `mmsg status --json` of branch `b`.
    pub fn mmsg_status(&self, b: u8) -> anyhow::Result<Value> {
        let g = self
            .gateways
            .iter()
            .find(|g| g.branch == b)
            .with_context(|| format!("no mmsg for branch {b}"))?;
        status_of(&self.mmsg, &g.control)
    }

    /// The REST client of `ssc`.
    pub fn api(&self) -> &Client {
        &self.api
    }

    /// `GET /api/v1/stats` as JSON.
    pub fn stats_json(&self) -> anyhow::Result<Value> {
        self.api.get("/api/v1/stats").context("GET /api/v1/stats")
    }

    /// `GET /api/v1/stats`, typed.
    pub fn stats(&self) -> anyhow::Result<StatsView> {
        serde_json::from_value(self.stats_json()?).context("parse /api/v1/stats")
    }

    /// `ovs-ofctl -O OpenFlow13 dump-flows` of gateway `b`'s bridge: cookie → packets.
    pub fn flow_packets(&self, b: u8) -> anyhow::Result<BTreeMap<u64, u64>> {
        let mgmt = format!(
            "unix:{}",
            ovs_dir(&self.prefix, b).join("br0.mgmt").display()
        );
        let out = sh::run("ovs-ofctl", &["-O", "OpenFlow13", "dump-flows", &mgmt])?;
        let mut m = BTreeMap::new();
        for line in out.lines().filter(|l| l.contains("cookie=")) {
            let field = |name: &str| {
                line.split([',', ' '])
                    .find_map(|f| f.trim().strip_prefix(name))
                    .map(str::to_owned)
                    .with_context(|| format!("no {name} in {line}"))
            };
            let cookie = u64::from_str_radix(&field("cookie=0x")?, 16)?;
            let packets: u64 = field("n_packets=")?.parse()?;
            m.insert(cookie, packets);
        }
        Ok(m)
    }

    /// Stops `mmsg` of branch `b` (SIGTERM by PID, then waits up to 10 s for it to undo its
    /// set-up and exit).
    pub fn stop_mmsg(&mut self, b: u8) -> anyhow::Result<()> {
        let i = self
            .gateways
            .iter()
            .position(|g| g.branch == b)
            .with_context(|| format!("no mmsg for branch {b}"))?;
        let mut g = self.gateways.remove(i);
        stop_child(&mut g.child, Duration::from_secs(10));
        Ok(())
    }

    /// Stops everything now (the same as dropping it).
    pub fn down(self) {}
}

/// SIGTERM to our own child by its PID; SIGKILL after `grace`.
fn stop_child(c: &mut Child, grace: Duration) {
    let _ = Command::new("kill")
        .args(["-TERM", &c.id().to_string()])
        .status();
    let deadline = Instant::now() + grace;
    while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = c.kill();
    let _ = c.wait();
}

impl Drop for System {
    fn drop(&mut self) {
        // The mmsgs first: on SIGTERM they delete their bridges (ovsdb must still run).
        for g in &mut self.gateways {
            let _ = Command::new("kill")
                .args(["-TERM", &g.child.id().to_string()])
                .status();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for g in &mut self.gateways {
            while matches!(g.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = g.child.kill();
            let _ = g.child.wait();
        }
        if let Some(mut c) = self.ssc_child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(5);
            while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        if self.testbed_up {
            if let Err(e) = testbed::down(&self.prefix) {
                eprintln!("e2e: testbed down {}: {e:#}", self.prefix);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    #[test]
    fn configs_validate() {
        let topo = topology::parse(
            &std::fs::read_to_string(root().join("examples/testbed-paper.toml")).unwrap(),
        )
        .unwrap();
        for b in BRANCHES {
            let text = mmsg_config(&topo, "t1", b, "rr").unwrap();
            let c = mpa::config::Config::parse(&text)
                .unwrap_or_else(|e| panic!("branch {b}: {e}\n{text}"));
            assert_eq!(c.remote.len(), 4);
            for r in &c.remote {
                let groups: Vec<u8> = r.path_groups.iter().map(|g| g.id).collect();
                let want = if table2_pair(b, r.id) {
                    vec![1, 2, 3, 4]
                } else {
                    vec![0]
                };
                assert_eq!(groups, want, "branch {b} -> {}", r.id);
                assert_eq!(r.wan_addresses.len(), 2);
            }
            let o = c.ovs.unwrap();
            assert_eq!(o.db, format!("unix:/run/mms-testbed/t1/ovs/gw{b}/db.sock"));
            assert!(o.controller.ends_with(&format!("/ovs/gw{b}/ssc.sock")));
        }
    }

    #[test]
    fn routes_of_table2() {
        let r = member_routes(
            &std::fs::read_to_string(root().join("examples/paths-paper-table2.toml")).unwrap(),
        )
        .unwrap();
        assert_eq!(r.len(), 16);
        assert_eq!(r[&(1, 1)], "1a>2a");
        assert_eq!(r[&(3, 2)], "1a>3a>3b>2a");
    }
}
