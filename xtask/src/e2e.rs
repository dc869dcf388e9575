//! The whole MMS system on the paper's testbed (seed 000 §V, Fig. 9; docs/e2e.md): five gateways,
//! each with its own Open vSwitch (built by `mmsg` itself from `[ovs]`), one `ssc` programming all
//! five switches over OpenFlow 1.3 with the paper's inventory and Table II, and five `mmsg run`
//! tunnelling between every pair of branches.
//!
//! [`System::up`] does, in order:
//! 1. `testbed up` of `examples/testbed-paper.toml` with `--ovs` (one ovsdb-server + ovs-vswitchd
//!    per gateway namespace, database socket `/run/mms-testbed/<prefix>/ovs/gw<b>/db.sock`; the
//!    router interfaces carry the inventory's `gateway_mac`s);
//! 2. release builds of `mmsg` and `ssc` (`cargo build --release`, the caller's target dir);
//! 3. `ssc run` on a fresh database (REST on `127.0.0.1:0`, OpenFlow only on one unix socket per
//!    gateway, inside that gateway's OVS run directory, which ovs-vswitchd requires; the filesystem
//!    is shared by all namespaces; the gateway channel on [`System::gw_socket`]), then
//!    `ssc import` of `examples/inventory-paper.toml` and `examples/paths-paper-table2.toml`;
//! 4. one `mmsg` config per branch: by default ([`mmsg_controller_config`]) its own ports, `[ovs]`
//!    and `[controller]`, no remotes: `ssc` sends remotes, path groups and weights over the
//!    gateway channel (Table II has groups only for 1 → 2, so branches 3..5 get none and are
//!    pure transit); with [`Options::static_configs`] ([`mmsg_config`]) the four other branches
//!    as remotes, path groups 1..4 between branches 1 and 2, group 0 elsewhere;
//! 5. five `mmsg run` (own control socket, log file in [`System::log_dir`], `--metrics-listen`
//!    with [`Options::metrics_listen`]) and waits until every
//!    gateway lists its [`expected_connections`], each up with its 2 × 2 subflows.
//!
//! Faults for tests ([`System::restart_ssc`], [`System::restart_vswitchd`],
//! [`System::restart_mmsg`], [`System::link_cut`]) act on the running system.
//!
//! Everything is torn down in `Drop` (also on error or panic): the `mmsg`s (SIGTERM by PID; they
//! keep their bridges for a restart, docs/mmsg.md "Restart", which go with the testbed's OVS),
//! `ssc` (by PID), then `testbed down`.
//! The log directory is kept for post-mortems.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use controller::sdc::StatsView;
use controller::ui::client::Client;
use serde_json::Value;

mod config;
mod options;
pub use config::{
    expected_connections, expected_connections_with, member_routes, mmsg_config,
    mmsg_controller_config, ovs_dir,
};
pub use options::{Options, BRANCHES, TOKEN};

use crate::mmsg::{self, Profile};
use crate::sh;
use crate::testbed::{self, UpOptions};
use crate::topology::{self, Topology};

/// How long every connection of every gateway may take to come up with all its subflows.
const TUNNELS_UP_TIMEOUT: Duration = Duration::from_secs(90);

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
    /// Static `mmsg` configs ([`Options::static_configs`]) instead of the gateway channel.
    pub static_configs: bool,
    /// How many path groups go from branch 1 to branch 2 (4 with Table II).
    pub groups_1_2: usize,
    /// Every `mmsg`'s `connections_per_group` ([`Options::connections_per_group`]).
    pub connections_per_group: u8,
    /// The gateway-channel socket of `ssc` (controller mode; `mmsg` connects to it).
    pub gw_socket: PathBuf,
    /// The run's CA and the gateways' TLS files ([`Options::tls`]); `ssc` runs this CA (`[ca]
    /// dir`), so the CRL it signs and pushes is one the gateways accept.
    pub tls_dir: Option<PathBuf>,
    api: Client,
    ssc_child: Option<Child>,
    stats_interval: String,
    metrics_listen: Option<String>,
    gateways: Vec<Gateway>,
    testbed_up: bool,
}

/// Whether one `mmsg status` shows gateway `b` fully up ([`System::wait_tunnels_up`]); else why not.
/// In controller mode with TLS that includes running `ssc`'s CRL (the provisioned one has
/// `crl_number` 0, every list `ssc` signs a higher one) and having refused none of its pushes.
fn tunnels_ready(
    s: &Value,
    static_configs: bool,
    b: u8,
    groups: usize,
    connections_per_group: u8,
) -> Result<(), String> {
    if !static_configs {
        let src = s.pointer("/controller/source").unwrap_or(&Value::Null);
        if src != "controller" {
            return Err(format!("no config from ssc yet (source {src})"));
        }
        if !s["tls"].is_null() {
            for c in [
                "crl_refused_signature",
                "crl_refused_replay",
                "tls_crl_refused",
            ] {
                let n = s
                    .pointer(&format!("/counters/{c}"))
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                if n > 0 {
                    return Err(format!("refused {n} CRL push(es) of ssc ({c})"));
                }
            }
            match s.pointer("/tls/crl_number").and_then(Value::as_u64) {
                Some(n) if n >= 1 => {}
                n => return Err(format!("not on ssc's CRL yet (crl_number {n:?})")),
            }
        }
    }
    let want = expected_connections_with(static_configs, b, groups, connections_per_group);
    let conns = s["connections"].as_array().map_or(0, Vec::len);
    if conns != want {
        return Err(format!("{conns} of {want} connections"));
    }
    if want == 0 {
        return Ok(());
    }
    match subflows_when_up(s) {
        Some(v) if v.iter().all(|&n| n == 4) => Ok(()),
        Some(v) => Err(format!("subflows {v:?}")),
        None => Err("a connection is not up".to_owned()),
    }
}

/// Starts `ssc run ...` (`cmd`, stderr into `log`) and returns it with its REST base URL, read
/// from its first line of output (`ssc: REST API listening on URL`). Its stdout keeps being
/// drained so it never blocks on a full pipe.
pub fn spawn_ssc(mut cmd: Command, log: std::fs::File) -> anyhow::Result<(Child, String)> {
    let mut child = cmd
        .env("RUST_LOG", "controller=info,ssc=info")
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .context("start ssc")?;
    let Some(stdout) = child.stdout.take() else {
        let _ = child.kill();
        let _ = child.wait();
        bail!("ssc has no stdout");
    };
    let mut reader = BufReader::new(stdout);
    let mut first = String::new();
    let base = match reader.read_line(&mut first) {
        Ok(_) => first
            .trim()
            .strip_prefix("ssc: REST API listening on ")
            .map(str::to_owned),
        Err(_) => None,
    };
    let Some(base) = base else {
        let _ = child.kill();
        let _ = child.wait();
        bail!("unexpected first line of ssc: {first:?}");
    };
    std::thread::spawn(move || {
        let mut sink = String::new();
        while reader.read_line(&mut sink).is_ok_and(|n| n > 0) {
            sink.clear();
        }
    });
    Ok((child, base))
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
        ensure!(
            opts.paths.is_none() || !opts.static_configs,
            "a custom paths file needs the controller mode"
        );
        let paths_file = opts
            .paths
            .clone()
            .unwrap_or_else(|| root.join("examples/paths-paper-table2.toml"));
        let inv_file = root.join("examples/inventory-paper.toml");
        let routes = member_routes(
            &std::fs::read_to_string(&paths_file)
                .with_context(|| format!("read {}", paths_file.display()))?,
        )?;
        let log_dir = opts.log_dir();
        std::fs::create_dir_all(&log_dir)
            .with_context(|| format!("create {}", log_dir.display()))?;

        // Build first: a build failure then leaves nothing to clean up.
        let mut bins = mmsg::build(
            root,
            Profile::Release,
            &[("mmsg-dataplane", "mmsg"), ("controller", "ssc")],
        )?
        .into_iter();
        let (Some(mmsg), Some(ssc)) = (bins.next(), bins.next()) else {
            bail!("cargo reported fewer executables than asked for");
        };

        let mut sys = System {
            prefix: opts.prefix.clone(),
            topology: topo.clone(),
            api_base: String::new(),
            token: TOKEN.to_owned(),
            log_dir: log_dir.clone(),
            mmsg,
            ssc,
            groups_1_2: routes
                .keys()
                .map(|&(g, _)| g)
                .collect::<BTreeSet<u8>>()
                .len(),
            routes,
            connections_per_group: opts.connections_per_group,
            static_configs: opts.static_configs,
            gw_socket: log_dir.join("ssc-gw.sock"),
            tls_dir: opts.tls.then(|| log_dir.join("tls")),
            api: Client::new("http://127.0.0.1:1", Some(TOKEN), Duration::from_secs(10)),
            ssc_child: None,
            stats_interval: opts.stats_interval.clone(),
            metrics_listen: opts.metrics_listen.clone(),
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

        // Before ssc starts: it runs the same CA (`[ca] dir`), under the name it gives its own.
        let tls = match &sys.tls_dir {
            Some(dir) => mmsg::provision_tls(dir, controller::authority::CA_NAME, &BRANCHES)?,
            None => BTreeMap::new(),
        };
        sys.start_ssc(true)?;
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
            let cfg = sys.mmsg_config_path(b);
            let mut config = if opts.static_configs {
                mmsg_config(&topo, &opts.prefix, b, &opts.selection_policy)?
            } else {
                let cache = log_dir.join(format!("mmsg-gw{b}-cache.json"));
                let _ = std::fs::remove_file(&cache);
                mmsg_controller_config(
                    &topo,
                    &opts.prefix,
                    b,
                    &opts.selection_policy,
                    &sys.gw_socket,
                    &cache,
                )?
            };
            config.striping.clone_from(&opts.striping);
            config.connections_per_group = opts.connections_per_group;
            // `tls = false`: clear on purpose (the paper's set-up), opted out explicitly with
            // `[tls] mode = "clear"` plus `--insecure-clear-tunnels` (`spawn_mmsg`).
            config.tls = Some(tls.get(&b).cloned().unwrap_or_else(mmsg::clear_tls));
            mmsg::write_config(
                &cfg,
                &format!(
                    "Generated by xtask::e2e for branch {b} of testbed {}.",
                    opts.prefix
                ),
                &config,
            )?;
            let g = sys.spawn_mmsg(b, false)?;
            sys.gateways.push(g);
        }
        sys.wait_tunnels_up()?;
        Ok(sys)
    }

    fn mmsg_config_path(&self, b: u8) -> PathBuf {
        self.log_dir.join(format!("mmsg-gw{b}.toml"))
    }

    /// Starts `mmsg run` of branch `b` in its namespace with its config in the log directory
    /// (`append`: add to the existing log instead of truncating it, for restarts).
    fn spawn_mmsg(&self, b: u8, append: bool) -> anyhow::Result<Gateway> {
        let control = self.log_dir.join(format!("mmsg-gw{b}.sock"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(self.mmsg_log(b))?;
        let metrics: Vec<&str> = self
            .metrics_listen
            .iter()
            .flat_map(|a| ["--metrics-listen", a.as_str()])
            .collect();
        let child = mmsg::spawn_run(
            &self.prefix,
            b,
            &self.mmsg,
            &self.mmsg_config_path(b),
            &control,
            log,
            &metrics,
        )?;
        Ok(Gateway {
            branch: b,
            child,
            control,
        })
    }

    /// Starts `ssc run`; `fresh`: on a new, empty database (else the one of the last run, as
    /// after a restart). REST on a new loopback port ([`System::api_base`] follows it).
    fn start_ssc(&mut self, fresh: bool) -> anyhow::Result<()> {
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
        if fresh {
            let _ = std::fs::remove_dir_all(&dbdir);
        }
        std::fs::create_dir_all(&dbdir)?;
        let gateways = if self.static_configs {
            String::new()
        } else {
            format!(
                "\n[gateways]\nunix = [{:?}]\n",
                self.gw_socket.display().to_string()
            )
        };
        let ca = mmsg::ssc_ca_table(self.tls_dir.as_deref());
        let config = self.log_dir.join("ssc.toml");
        std::fs::write(
            &config,
            format!(
                "[api]\ntoken = \"{TOKEN}\"\nlisten = \"127.0.0.1:0\"\n\n[database]\npath = {:?}\n\n\
                 [openflow]\nlisten = \"\"\nunix = [{}]\n{gateways}{ca}",
                dbdir.join("ssc.redb").display().to_string(),
                sockets.join(", ")
            ),
        )?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_dir.join("ssc.log"))?;
        if fresh {
            log.set_len(0)?;
        }
        let mut cmd = Command::new(&self.ssc);
        cmd.args(["run", "--config"])
            .arg(&config)
            .args(["--stats-interval", &self.stats_interval]);
        let (child, base) = spawn_ssc(cmd, log)?;
        self.ssc_child = Some(child);
        self.api = Client::new(&base, Some(TOKEN), Duration::from_secs(10));
        self.api_base = base;
        Ok(())
    }

    /// Waits (up to 90 s) until every gateway lists exactly its [`expected_connections`], each up
    /// with its 2 × 2 established subflows (a gateway with no remotes: none), and in controller
    /// mode runs a config from `ssc` (`controller.source = "controller"`). Fails at once if an
    /// `mmsg` exits.
    pub fn wait_tunnels_up(&mut self) -> anyhow::Result<()> {
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
                match mmsg::status(&self.mmsg, &g.control) {
                    Ok(s) => {
                        if let Err(why) = tunnels_ready(
                            &s,
                            self.static_configs,
                            g.branch,
                            self.groups_1_2,
                            self.connections_per_group,
                        ) {
                            ok = false;
                            let _ = write!(last, "gw{}: {why}; ", g.branch);
                        }
                    }
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
        mmsg::status(&self.mmsg, &g.control)
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

    /// `GET /api/v1/gateways` (the gateway channel's view of every `mmsg`) as JSON.
    pub fn gateways_json(&self) -> anyhow::Result<Value> {
        self.api
            .get("/api/v1/gateways")
            .context("GET /api/v1/gateways")
    }

    /// Restarts `ssc`: SIGTERM by PID (SIGKILL after 5 s), then `ssc run` again on the same
    /// database and the same OpenFlow and gateway-channel sockets. The REST port changes
    /// ([`System::api_base`] and [`System::api`] follow). Returns once the REST API answers;
    /// the switches and gateways reconnect on their own.
    pub fn restart_ssc(&mut self) -> anyhow::Result<()> {
        if let Some(mut c) = self.ssc_child.take() {
            stop_child(&mut c, Duration::from_secs(5));
        }
        self.start_ssc(false)?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while let Err(e) = self.api.get("/api/v1/stats") {
            if Instant::now() > deadline {
                return Err(e).context("ssc REST API after the restart");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Restarts the `ovs-vswitchd` of gateway `b`: SIGTERM to the PID in its pidfile, waits until
    /// it is gone, starts it again exactly as `testbed up --ovs` does (`crate::ovs::start`:
    /// same namespace, run/db/log directory, pidfile, log file, `--detach`). The database (and
    /// so the bridge `mmsg` built) stays; the new switch connects to `ssc`, which reconciles
    /// its table (DESIGN §4). `testbed down` stops it like every process in the namespace.
    pub fn restart_vswitchd(&self, b: u8) -> anyhow::Result<()> {
        let d = ovs_dir(&self.prefix, b);
        let pidfile = d.join("ovs-vswitchd.pid");
        let pid: u32 = std::fs::read_to_string(&pidfile)
            .with_context(|| format!("read {}", pidfile.display()))?
            .trim()
            .parse()
            .with_context(|| format!("no pid in {}", pidfile.display()))?;
        let ns = self.ns_gw(b);
        ensure!(
            testbed::ns_pids(&ns).contains(&pid),
            "pid {pid} of {} is not in namespace {ns}",
            pidfile.display()
        );
        sh::run("kill", &["-TERM", &pid.to_string()])?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Path::new(&format!("/proc/{pid}")).exists() {
            ensure!(
                Instant::now() < deadline,
                "ovs-vswitchd {pid} of gw{b} did not exit within 10 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        crate::ovs::start_vswitchd(&self.prefix, b, &testbed::state_dir(&self.prefix))
            .with_context(|| format!("start ovs-vswitchd of gw{b} again"))?;
        Ok(())
    }

    /// Restarts `mmsg` of branch `b`: SIGTERM by PID (it undoes its host set-up but keeps its
    /// bridge and flows, docs/mmsg.md "Restart"; SIGKILL after 10 s), then `mmsg run` again with the same config and control
    /// socket (the log is appended to). Does not wait for the tunnels
    /// ([`System::wait_tunnels_up`]).
    pub fn restart_mmsg(&mut self, b: u8) -> anyhow::Result<()> {
        self.stop_mmsg(b)?;
        let g = self.spawn_mmsg(b, true)?;
        self.gateways.push(g);
        self.gateways.sort_by_key(|g| g.branch);
        Ok(())
    }

    /// Cuts WAN port `port` (e.g. `1a`) in both directions (`testbed link cut`), or restores it
    /// (`cut = false`, `testbed link restore`).
    pub fn link_cut(&self, port: &str, cut: bool) -> anyhow::Result<()> {
        testbed::link_cut(&self.prefix, port, cut)
            .with_context(|| format!("link {} {port}", if cut { "cut" } else { "restore" }))
    }

    /// Stops everything now (the same as dropping it).
    pub fn down(self) {}
}

/// SIGTERM to our own child by its PID; SIGKILL after `grace`.
/// Stops a child we started: SIGTERM by PID, then SIGKILL after `grace`.
pub fn stop_child(c: &mut Child, grace: Duration) {
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
        // The mmsgs first: on SIGTERM they undo their host set-up (ovsdb must still run).
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
            stop_child(&mut c, Duration::from_secs(5));
        }
        if self.testbed_up {
            if let Err(e) = testbed::down(&self.prefix) {
                eprintln!("e2e: testbed down {}: {e:#}", self.prefix);
            }
        }
    }
}
