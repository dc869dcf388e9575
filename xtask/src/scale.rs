//! More than 15 branches (issue #20): N gateways with the extended port plan, each with its own
//! Open vSwitch and `mmsg`, one `ssc` allocating the member path codes, a full mesh of tunnels
//! between a hub subset whose every member path crosses a transit branch
//! (`cargo xtask bench scale`, `xtask/tests/scale.rs`; docs/testbed.md "More than 15 branches").
//!
//! The system ([`System::up`]):
//! 1. `testbed up` of [`topology`]: N branches, one internet port and one LAN host each, no
//!    impairment (plain kernel routing in `inet`, no emulator on the path), the extended address
//!    plan beyond branch 25 (`topology::wan_net`), `--ovs`;
//! 2. `ssc run` (the e2e system's configuration: OpenFlow on one unix socket per gateway, the
//!    gateway channel on a unix socket), then `POST /api/v1/import` of the inventory
//!    ([`inventory_json`]) without path groups and with `settings.ports` = the extended range;
//! 3. N `mmsg run` in controller mode, and waits until every switch is connected and every
//!    gateway has its config from `ssc`. With [`Options::tls`] (the product's default, and
//!    `bench scale`'s) the tunnels run TLS: one CA for the run, made before `ssc` starts and run
//!    by it (`[ca] dir`), a certificate per branch ([`mmsg::provision_tls`]); the gateways then
//!    also run `ssc`'s CRL. Without it (`--clear`) they are clear, as in the paper's set-up;
//! 4. **t0**: `POST /api/v1/import` again with the path groups of [`hub_groups`]: for every
//!    ordered pair of hubs one group 0 with one member `Aa>Ta>Ta>Ba` through transit T (a
//!    hairpin at T), the transit taken round robin from the other branches. Every byte between
//!    two hubs therefore crosses a transit. `push_ms` is `ssc`'s own measure of that push (diff,
//!    FLOW_MODs and every barrier reply; `/api/v1/stats` `last_push.ms`, caught as it appears),
//!    `push_failed_members` the member paths it left out (a switch that misses a barrier is
//!    dropped and reconciled when it reconnects), `all_up_s` the time from t0 until every
//!    gateway lists its connections up with their subflow.
//!
//! Everything is torn down in `Drop` (the `mmsg`s and `ssc` by PID, then `testbed down`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use controller::ui::client::Client;
use serde::Serialize;
use serde_json::{json, Value};

use crate::e2e::{mmsg_controller_config, ovs_dir, spawn_ssc, stop_child};
use crate::mmsg::{self, Profile};
use crate::testbed::{self, UpOptions};
use crate::topology::{self, Topology};

/// Bearer token of the run's `ssc` (a throwaway instance on loopback).
const TOKEN: &str = "scale-token-0123456789abcdef0123";
/// The extended port range every gateway reserves (below Linux's default ephemeral range
/// 32768-60999, so reserving it costs no ephemeral ports).
pub const PORTS: &str = "16384-32767";

/// How to bring the system up.
#[derive(Debug, Clone)]
pub struct Options {
    /// The repository root (cargo workspace).
    pub root: PathBuf,
    /// Name prefix of the testbed.
    pub prefix: String,
    /// Number of branches (ids 1..=N).
    pub branches: u8,
    /// Hubs: the full mesh of tunnels runs between these many branches ([`hubs`]).
    pub hubs: u8,
    /// The `xtask` binary for `testbed up` (a test binary must not build it in-process: the WAN
    /// emulator re-executes the binary that built the testbed). `None`: in-process.
    pub xtask: Option<PathBuf>,
    /// How long the tunnels may take to come up after the push.
    pub up_timeout: Duration,
    /// TLS tunnels (module docs, step 3); `false`: clear tunnels.
    pub tls: bool,
}

/// The hubs of `n` branches: the first `h / 2` and the last `h - h / 2` ids, so the mesh holds
/// ids above 15 as well as the paper's.
pub fn hubs(n: u8, h: u8) -> Vec<u8> {
    let h = h.min(n);
    let low = h / 2;
    let mut v: Vec<u8> = (1..=low).collect();
    v.extend((n - (h - low) + 1)..=n);
    v
}

/// The testbed: `n` branches, one internet port (no impairment) and one LAN host each.
pub fn topology(n: u8) -> anyhow::Result<Topology> {
    let mut text = format!("name = \"scale-{n}\"\n");
    for b in 1..=n {
        let _ = write!(text, "[[branch]]\nid = {b}\nhosts = 1\nwan = [{{}}]\n");
    }
    Ok(topology::parse(&text)?)
}

/// The inventory of the testbed (`ssc import` JSON form): port `a` of every branch with the
/// testbed's address, next hop and MACs (`02:00` + IPv4, as `testbed up` sets them).
pub fn inventory_json(topo: &Topology) -> Value {
    let mac = |a: std::net::Ipv4Addr| controller::inventory::MacAddr::from_ipv4(a).to_string();
    let branches: Vec<Value> = topo
        .branches
        .iter()
        .map(|b| {
            let wan: Vec<Value> = topo
                .ports()
                .iter()
                .filter(|p| p.id.branch == b.id)
                .map(|p| {
                    json!({
                        "port": p.id.to_string().trim_start_matches(char::is_numeric),
                        "address": format!("{}/{}", p.addr, p.prefix_len),
                        "gateway": p.next_hop.to_string(),
                        "mac": mac(p.addr),
                        "gateway_mac": mac(p.next_hop),
                        "kind": "internet",
                        "capacity_mbps": 100,
                    })
                })
                .collect();
            json!({
                "id": b.id,
                "name": format!("branch-{}", b.id),
                "lan": [mmsg::lan_prefix(b.id).to_string()],
                "wan": wan,
            })
        })
        .collect();
    json!({ "branches": branches })
}

/// The path groups of the hub mesh: for every ordered pair (A, B) of `hubs`, group 0 with one
/// member `Aa>Ta>Ta>Ba`, T the next non-hub branch round robin (any other branch when all are
/// hubs). Returns the groups file (JSON) and each pair's transit.
pub fn hub_groups(n: u8, hubs: &[u8]) -> (Value, BTreeMap<(u8, u8), u8>) {
    let mut others: Vec<u8> = (1..=n).filter(|b| !hubs.contains(b)).collect();
    if others.is_empty() {
        others = (1..=n).collect();
    }
    let mut groups = Vec::new();
    let mut transit = BTreeMap::new();
    let mut next = 0usize;
    for &a in hubs {
        for &b in hubs {
            if a == b {
                continue;
            }
            let t = loop {
                let t = others.get(next % others.len()).copied().unwrap_or(1);
                next += 1;
                if t != a && t != b {
                    break t;
                }
            };
            transit.insert((a, b), t);
            groups.push(json!({
                "source": a, "destination": b, "id": 0,
                "members": [format!("{a}a>{t}a>{t}a>{b}a")],
            }));
        }
    }
    (json!({ "groups": groups }), transit)
}

/// What `bench scale` reports (`--json`).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Branches (gateways, each with its own OVS and `mmsg`).
    pub branches: u8,
    /// Hubs of the full mesh.
    pub hubs: u8,
    /// Tunnel connections (MPTCP, one per ordered hub pair and class), counted outbound.
    pub tunnels: usize,
    /// OpenFlow flows `ssc` compiled for all switches.
    pub flows: usize,
    /// Member path codes allocated from the extended range.
    pub codes: usize,
    /// `ssc`'s push of the path groups to every switch (diff, FLOW_MODs, barriers), ms.
    pub push_ms: f64,
    /// Member paths that push left out (a switch missed a barrier; reconciled when it
    /// reconnected, before the tunnels came up).
    pub push_failed_members: u64,
    /// From the import of the path groups until every tunnel was up, s.
    pub all_up_s: f64,
    /// Pings of the sample that got an answer.
    pub ping_ok: usize,
    /// Pings of the sample (host of A → host of B, through the pair's transit).
    pub ping_total: usize,
    /// Packets the transits' swap entries counted after the pings (proof the sample crossed them).
    pub transit_packets: u64,
    /// Mean resident memory of one `mmsg`, MB.
    pub mmsg_rss_mb: f64,
    /// Resident memory of `ssc`, MB.
    pub ssc_rss_mb: f64,
    /// Whether the tunnels ran TLS ([`Options::tls`]).
    pub tls: bool,
    /// TLS handshakes the gateways completed as clients (`tls_handshakes_out` summed; one per
    /// tunnel connection when nothing reconnected), 0 in clear mode.
    pub tls_handshakes: u64,
    /// Gateways that run `ssc`'s CRL (`tls.crl_number` ≥ 1 in `mmsg status`), 0 in clear mode.
    pub crl_from_ssc: usize,
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
    /// Branches.
    pub n: u8,
    /// The hubs.
    pub hubs: Vec<u8>,
    /// Transit of every ordered hub pair.
    pub transit: BTreeMap<(u8, u8), u8>,
    /// Logs and configs (kept after teardown).
    pub log_dir: PathBuf,
    /// The run's CA and the gateways' TLS files ([`Options::tls`]).
    pub tls_dir: Option<PathBuf>,
    /// `ssc`'s push of the path groups, ms.
    pub push_ms: f64,
    /// Member paths the group push left out (a switch failed a barrier or was not connected;
    /// it is reconciled when it reconnects).
    pub push_failed_members: u64,
    /// From the push until every tunnel was up, s.
    pub all_up_s: f64,
    mmsg: PathBuf,
    api: Client,
    ssc_child: Option<Child>,
    gateways: Vec<Gateway>,
    testbed_up: bool,
}

impl System {
    /// Brings the system up (module docs). On error, whatever was started is torn down.
    pub fn up(opts: &Options) -> anyhow::Result<System> {
        ensure!(
            opts.branches >= 3,
            "at least 3 branches (two hubs and a transit)"
        );
        let topo = topology(opts.branches)?;
        let hubs = hubs(opts.branches, opts.hubs.max(2));
        let log_dir = std::env::temp_dir().join(format!("mms-scale-{}", opts.prefix));
        std::fs::create_dir_all(&log_dir)?;
        let mut bins = mmsg::build(
            &opts.root,
            Profile::Release,
            &[("mmsg-dataplane", "mmsg"), ("controller", "ssc")],
        )?
        .into_iter();
        let (Some(mmsg_bin), Some(ssc)) = (bins.next(), bins.next()) else {
            bail!("cargo reported fewer executables than asked for");
        };
        let mut sys = System {
            prefix: opts.prefix.clone(),
            n: opts.branches,
            hubs: hubs.clone(),
            transit: BTreeMap::new(),
            log_dir: log_dir.clone(),
            tls_dir: opts.tls.then(|| log_dir.join("tls")),
            push_ms: 0.0,
            push_failed_members: 0,
            all_up_s: 0.0,
            mmsg: mmsg_bin,
            api: Client::new("http://127.0.0.1:1", Some(TOKEN), Duration::from_secs(30)),
            ssc_child: None,
            gateways: Vec::new(),
            testbed_up: true,
        };
        sys.testbed(opts, &topo, &log_dir)?;
        // Before ssc starts: it runs the same CA (`[ca] dir`), under the name it gives its own.
        let ids: Vec<u8> = (1..=opts.branches).collect();
        let mut tls = match &sys.tls_dir {
            Some(dir) => mmsg::provision_tls(dir, controller::authority::CA_NAME, &ids)?,
            None => BTreeMap::new(),
        };
        sys.start_ssc(&ssc)?;
        let settings = json!({ "ports": PORTS });
        let inventory = inventory_json(&topo);
        sys.import(&inventory, &json!({"groups": []}), &settings)?;
        let gw_socket = log_dir.join("ssc-gw.sock");
        for b in 1..=opts.branches {
            let cache = log_dir.join(format!("mmsg-gw{b}-cache.json"));
            let _ = std::fs::remove_file(&cache);
            let mut c = mmsg_controller_config(&topo, &opts.prefix, b, "rr", &gw_socket, &cache)?;
            c.ports = PORTS.parse()?;
            c.tls = Some(tls.remove(&b).unwrap_or_else(mmsg::clear_tls));
            let path = log_dir.join(format!("mmsg-gw{b}.toml"));
            mmsg::write_config(
                &path,
                &format!("Generated by xtask::scale for branch {b}."),
                &c,
            )?;
            let g = sys.spawn_mmsg(b, &path)?;
            sys.gateways.push(g);
        }
        sys.wait(
            Duration::from_secs(60),
            "switches and gateway channels",
            |s| s.controlled(),
        )?;
        let (groups, transit) = hub_groups(opts.branches, &hubs);
        sys.transit = transit;
        let before = sys.last_push()?;
        let t0 = Instant::now();
        sys.import(&inventory, &groups, &settings)?;
        let push = sys.group_push(&before, opts.up_timeout)?;
        sys.push_ms = push.get("ms").and_then(Value::as_f64).unwrap_or(0.0);
        sys.push_failed_members = push
            .get("failed_members")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        sys.wait(opts.up_timeout, "tunnels", System::tunnels_up)?;
        sys.all_up_s = t0.elapsed().as_secs_f64();
        Ok(sys)
    }

    fn testbed(&mut self, opts: &Options, topo: &Topology, log_dir: &Path) -> anyhow::Result<()> {
        match &opts.xtask {
            None => {
                testbed::up(
                    topo,
                    &UpOptions {
                        prefix: opts.prefix.clone(),
                        ovs: true,
                    },
                )?;
            }
            Some(exe) => {
                let file = log_dir.join("testbed.toml");
                let mut text = format!("name = \"scale-{}\"\n", topo.branches.len());
                for b in &topo.branches {
                    let _ = write!(text, "[[branch]]\nid = {}\nhosts = 1\nwan = [{{}}]\n", b.id);
                }
                std::fs::write(&file, text)?;
                let out = Command::new(exe)
                    .current_dir(&opts.root)
                    .args(["testbed", "up", "--topology"])
                    .arg(&file)
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
        Ok(())
    }

    fn start_ssc(&mut self, ssc: &Path) -> anyhow::Result<()> {
        let sockets: Vec<String> = (1..=self.n)
            .map(|b| {
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
        let ca = mmsg::ssc_ca_table(self.tls_dir.as_deref());
        std::fs::write(
            &config,
            format!(
                "[api]\ntoken = \"{TOKEN}\"\nlisten = \"127.0.0.1:0\"\n\n[database]\npath = {:?}\n\n\
                 [openflow]\nlisten = \"\"\nunix = [{}]\n\n[gateways]\nunix = [{:?}]\n{ca}",
                dbdir.join("ssc.redb").display().to_string(),
                sockets.join(", "),
                self.log_dir.join("ssc-gw.sock").display().to_string()
            ),
        )?;
        let log = std::fs::File::create(self.log_dir.join("ssc.log"))?;
        let mut cmd = Command::new(ssc);
        cmd.args(["run", "--config"])
            .arg(&config)
            .args(["--stats-interval", "1s"]);
        let (child, base) = spawn_ssc(cmd, log)?;
        self.ssc_child = Some(child);
        self.api = Client::new(&base, Some(TOKEN), Duration::from_secs(60));
        Ok(())
    }

    /// `ssc`'s report of its last push to the switches (`/api/v1/stats` `last_push`; null
    /// before the first).
    fn last_push(&self) -> anyhow::Result<Value> {
        let stats = self.api.get("/api/v1/stats").context("GET /api/v1/stats")?;
        Ok(stats.get("last_push").cloned().unwrap_or(Value::Null))
    }

    /// The push of the path groups just imported: the first push report after `before` that
    /// sent FLOW_MODs. (Later pushes, e.g. of a WAN address a gateway reported, replace
    /// `last_push`, so it is caught as it appears, not read at the end.)
    fn group_push(&self, before: &Value, timeout: Duration) -> anyhow::Result<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let p = self.last_push()?;
            if &p != before && p.get("flow_mods").and_then(Value::as_u64) > Some(0) {
                return Ok(p);
            }
            ensure!(
                Instant::now() < deadline,
                "no push of the path groups within {timeout:?} (last: {p})"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn import(&self, inventory: &Value, groups: &Value, settings: &Value) -> anyhow::Result<()> {
        let body = json!({"inventory": inventory, "groups": groups, "settings": settings});
        self.api
            .call("POST", "/api/v1/import", Some(&body))
            .context("POST /api/v1/import")?;
        Ok(())
    }

    fn spawn_mmsg(&self, b: u8, config: &Path) -> anyhow::Result<Gateway> {
        let control = self.log_dir.join(format!("mmsg-gw{b}.sock"));
        let log = std::fs::File::create(self.log_dir.join(format!("mmsg-gw{b}.log")))?;
        let child = mmsg::spawn_run(&self.prefix, b, &self.mmsg, config, &control, log, &[])?;
        Ok(Gateway {
            branch: b,
            child,
            control,
        })
    }

    /// Polls `ready` every 250 ms up to `timeout`; fails at once when an `mmsg` exited.
    fn wait(
        &mut self,
        timeout: Duration,
        what: &str,
        ready: impl Fn(&System) -> Result<(), String>,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            for g in &mut self.gateways {
                if let Ok(Some(st)) = g.child.try_wait() {
                    bail!(
                        "mmsg of branch {} exited ({st}); log in {}",
                        g.branch,
                        self.log_dir.display()
                    );
                }
            }
            let why = match ready(self) {
                Ok(()) => return Ok(()),
                Err(why) => why,
            };
            if Instant::now() > deadline {
                bail!(
                    "{what} not ready within {timeout:?}: {why} (logs in {})",
                    self.log_dir.display()
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Every switch connected to `ssc` and every gateway running `ssc`'s config.
    fn controlled(&self) -> Result<(), String> {
        let stats = self.api.get("/api/v1/stats").map_err(|e| e.to_string())?;
        let connected = stats
            .get("branches")
            .and_then(serde_json::Value::as_array)
            .map_or(0, |v| v.iter().filter(|b| b["connected"] == true).count());
        if connected != usize::from(self.n) {
            return Err(format!("{connected} of {} switches connected", self.n));
        }
        for g in &self.gateways {
            let s = mmsg::status(&self.mmsg, &g.control)
                .map_err(|e| format!("gw{}: {e:#}", g.branch))?;
            if s.pointer("/controller/source") != Some(&Value::from("controller")) {
                return Err(format!("gw{}: no config from ssc yet", g.branch));
            }
        }
        Ok(())
    }

    /// Connections every gateway lists once the mesh is up: 2 classes × (hubs − 1), each way.
    pub fn expected_connections(&self, b: u8) -> usize {
        if self.hubs.contains(&b) {
            4 * (self.hubs.len() - 1)
        } else {
            0
        }
    }

    fn tunnels_up(&self) -> Result<(), String> {
        let mut last = String::new();
        for g in &self.gateways {
            let s = mmsg::status(&self.mmsg, &g.control)
                .map_err(|e| format!("gw{}: {e:#}", g.branch))?;
            let want = self.expected_connections(g.branch);
            let conns = s
                .get("connections")
                .and_then(serde_json::Value::as_array)
                .map_or(0, Vec::len);
            if conns != want {
                let _ = write!(last, "gw{}: {conns} of {want} connections; ", g.branch);
                continue;
            }
            if want > 0 {
                match crate::e2e::subflows_when_up(&s) {
                    Some(v) if v.iter().all(|&n| n == 1) => {}
                    Some(v) => {
                        let _ = write!(last, "gw{}: subflows {v:?}; ", g.branch);
                    }
                    None => {
                        let _ = write!(last, "gw{}: a connection is not up; ", g.branch);
                    }
                }
            }
        }
        if last.is_empty() {
            Ok(())
        } else {
            Err(last)
        }
    }

    /// Outbound tunnel connections over all gateways.
    pub fn tunnels(&self) -> anyhow::Result<usize> {
        let mut n = 0;
        for g in &self.gateways {
            let s = mmsg::status(&self.mmsg, &g.control)?;
            n += s
                .get("connections")
                .and_then(serde_json::Value::as_array)
                .map_or(0, |v| v.iter().filter(|c| c["direction"] == "out").count());
        }
        Ok(n)
    }

    /// TLS as every gateway reports it (`mmsg status`): the client handshakes summed
    /// (`tls_handshakes_out`) and the gateways that run `ssc`'s CRL (`tls.crl_number` ≥ 1; the
    /// provisioned one is number 0). `(0, 0)` in clear mode.
    pub fn tls_state(&self) -> anyhow::Result<(u64, usize)> {
        let (mut handshakes, mut crl) = (0, 0);
        for g in &self.gateways {
            let s = mmsg::status(&self.mmsg, &g.control)?;
            handshakes += s
                .pointer("/counters/tls_handshakes_out")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            if s.pointer("/tls/crl_number").and_then(Value::as_u64) >= Some(1) {
                crl += 1;
            }
        }
        Ok((handshakes, crl))
    }

    /// Pings from the host of `a` to the host of `b` (3 tries, 1 s each); whether one came back.
    pub fn ping(&self, a: u8, b: u8) -> bool {
        let dst = testbed::host_addr(b, 0).to_string();
        crate::sh::ns(
            &testbed::ns_host(&self.prefix, a, 0),
            "ping",
            &["-c", "3", "-i", "0.2", "-W", "1", &dst],
        )
        .is_ok_and(|out| !out.contains(" 0 received"))
    }

    /// Packets counted by the transit swap entries of `(a, b)`'s member on its transit's switch
    /// (both directions).
    pub fn transit_packets(&self, a: u8, b: u8) -> anyhow::Result<u64> {
        let t = *self
            .transit
            .get(&(a, b))
            .with_context(|| format!("{a}>{b} is no hub pair"))?;
        let groups = self.api.get(&format!("/api/v1/path-groups/{a}/{b}"))?;
        let code = groups
            .pointer("/0/members/0/code")
            .and_then(Value::as_str)
            .and_then(|c| u16::from_str_radix(c.trim_start_matches("0x"), 16).ok())
            .with_context(|| format!("no member code of {a}>{b}: {groups}"))?;
        let mgmt = format!(
            "unix:{}",
            ovs_dir(&self.prefix, t).join("br0.mgmt").display()
        );
        let out = crate::sh::run("ovs-ofctl", &["-O", "OpenFlow13", "dump-flows", &mgmt])?;
        let (src, dst) = (
            topology::wan_addr(a, 0, 2).to_string(),
            topology::wan_addr(b, 0, 2).to_string(),
        );
        let mut sum = 0;
        for line in out.lines() {
            // Forward: from A to T on tcp_dst = code; reverse: from B to T on tcp_src = code.
            let fwd = line.contains(&format!("nw_src={src},"))
                && line.contains(&format!("tp_dst={code} "));
            let rev = line.contains(&format!("nw_src={dst},"))
                && line.contains(&format!("tp_src={code} "));
            if !(fwd || rev) {
                continue;
            }
            if let Some(p) = line
                .split([',', ' '])
                .find_map(|f| f.trim().strip_prefix("n_packets="))
            {
                sum += p.parse::<u64>().unwrap_or(0);
            }
        }
        Ok(sum)
    }

    /// Resident memory of every `mmsg` (MB, mean) and of `ssc` (MB).
    pub fn rss_mb(&self) -> (f64, f64) {
        let rss = |pid: u32| -> f64 {
            std::fs::read_to_string(format!("/proc/{pid}/status"))
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find_map(|l| l.strip_prefix("VmRSS:"))
                        .and_then(|v| v.split_whitespace().next())
                        .and_then(|v| v.parse::<f64>().ok())
                })
                .unwrap_or(0.0)
                / 1024.0
        };
        // `ip netns exec` execs mmsg in place, so the child's PID is mmsg's.
        let m: Vec<f64> = self.gateways.iter().map(|g| rss(g.child.id())).collect();
        let mean = m.iter().sum::<f64>() / m.len().max(1) as f64;
        let s = self.ssc_child.as_ref().map_or(0.0, |c| rss(c.id()));
        (mean, s)
    }

    /// Flows compiled for all switches and member path codes allocated (`/api/v1/stats`,
    /// `/api/v1/path-groups`).
    pub fn flows_and_codes(&self) -> anyhow::Result<(usize, usize)> {
        let stats = self.api.get("/api/v1/stats")?;
        let flows = stats
            .get("branches")
            .and_then(serde_json::Value::as_array)
            .map_or(0, |v| {
                v.iter()
                    .filter_map(|b| b["flows_compiled"].as_u64())
                    .sum::<u64>()
            });
        let groups = self.api.get("/api/v1/path-groups")?;
        let codes = groups.as_array().map_or(0, |v| {
            v.iter()
                .map(|g| {
                    g.get("members")
                        .and_then(serde_json::Value::as_array)
                        .map_or(0, Vec::len)
                })
                .sum()
        });
        Ok((usize::try_from(flows)?, codes))
    }

    /// The REST client of `ssc`.
    pub fn api(&self) -> &Client {
        &self.api
    }
}

impl Drop for System {
    fn drop(&mut self) {
        for g in &mut self.gateways {
            let _ = Command::new("kill")
                .args(["-TERM", &g.child.id().to_string()])
                .status();
        }
        for g in &mut self.gateways {
            stop_child(&mut g.child, Duration::from_secs(10));
        }
        if let Some(mut c) = self.ssc_child.take() {
            stop_child(&mut c, Duration::from_secs(5));
        }
        if self.testbed_up {
            if let Err(e) = testbed::down(&self.prefix) {
                eprintln!("scale: testbed down {}: {e:#}", self.prefix);
            }
        }
    }
}

/// `cargo xtask bench scale`: brings the system up, pings a sample of hub pairs (each through
/// its transit) and reports [`Report`]; `json`: also written there.
pub fn bench(opts: &Options, sample: usize, json: Option<&Path>) -> anyhow::Result<Report> {
    let sys = System::up(opts)?;
    let pairs: Vec<(u8, u8)> = sys.transit.keys().copied().collect();
    let step = (pairs.len() / sample.max(1)).max(1);
    let chosen: Vec<(u8, u8)> = pairs.iter().step_by(step).take(sample).copied().collect();
    let mut ok = 0;
    for &(a, b) in &chosen {
        if sys.ping(a, b) {
            ok += 1;
        } else {
            eprintln!("scale: ping {a} -> {b} failed");
        }
    }
    let mut transit_packets = 0;
    for &(a, b) in &chosen {
        transit_packets += sys.transit_packets(a, b)?;
    }
    let (flows, codes) = sys.flows_and_codes()?;
    let (mmsg_rss_mb, ssc_rss_mb) = sys.rss_mb();
    let (tls_handshakes, crl_from_ssc) = sys.tls_state()?;
    let report = Report {
        branches: sys.n,
        hubs: u8::try_from(sys.hubs.len())?,
        tunnels: sys.tunnels()?,
        flows,
        codes,
        push_ms: sys.push_ms,
        push_failed_members: sys.push_failed_members,
        all_up_s: sys.all_up_s,
        ping_ok: ok,
        ping_total: chosen.len(),
        transit_packets,
        mmsg_rss_mb,
        ssc_rss_mb,
        tls: sys.tls_dir.is_some(),
        tls_handshakes,
        crl_from_ssc,
    };
    drop(sys);
    let text = serde_json::to_string_pretty(&report)?;
    println!("{text}");
    if let Some(path) = json {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, text + "\n").with_context(|| format!("write {}", path.display()))?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hubs_span_the_paper_ids_and_beyond() {
        assert_eq!(hubs(17, 4), vec![1, 2, 16, 17]);
        assert_eq!(hubs(40, 7), vec![1, 2, 3, 37, 38, 39, 40]);
        assert_eq!(hubs(3, 8), vec![1, 2, 3]);
    }

    #[test]
    fn every_hub_pair_has_a_transit_outside_it() {
        let h = hubs(17, 4);
        let (groups, transit) = hub_groups(17, &h);
        assert_eq!(transit.len(), 12);
        for (&(a, b), &t) in &transit {
            assert!(t != a && t != b && !h.contains(&t), "{a}>{b} via {t}");
        }
        let g = &groups["groups"][0];
        assert_eq!(g["members"][0], "1a>3a>3a>2a");
        // Three branches, all hubs: the third one is the transit.
        let (_, t) = hub_groups(3, &[1, 2, 3]);
        assert_eq!(t[&(1, 2)], 3);
    }

    #[test]
    fn the_inventory_of_40_branches_is_valid_with_the_extended_plan() {
        let topo = topology(40).unwrap();
        let inv: controller::inventory::InventoryFile =
            serde_json::from_value(inventory_json(&topo)).unwrap();
        let h = hubs(40, 8);
        let (groups, _) = hub_groups(40, &h);
        let groups: controller::path_group::GroupsFile = serde_json::from_value(groups).unwrap();
        let settings = controller::path_config::Settings {
            ports: PORTS.parse().unwrap(),
            ..Default::default()
        };
        let c = controller::catalog::Catalog::from_files(inv.clone(), groups.clone(), settings)
            .unwrap();
        assert_eq!(c.codes().len(), 56);
        assert_eq!(c.flows().len(), 40 * 2 + 56 * 8);
        // The paper's plan refuses branch 16, naming it.
        let e = controller::catalog::Catalog::from_files(
            inv,
            groups,
            controller::path_config::Settings::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("branch 16 does not fit the paper's port plan"),
            "{e}"
        );
    }
}
