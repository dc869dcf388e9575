//! The OFC against real Open vSwitch 3.1 in the netns testbed (needs root, `ip`, OVS; it FAILS
//! without them, it never skips).
//!
//! `cargo xtask testbed up --topology examples/testbed-paper.toml --ovs` under a unique prefix,
//! one bridge `br0` per gateway (netdev, OpenFlow13, fail_mode=secure, datapath id = branch id,
//! `wan0/wan1` = OpenFlow 1/2, internal `mpa0/mpa1` = 101/102), each bridge's controller
//! `unix:` a socket of `ssc run` inside that gateway's OVS run directory (vswitchd accepts unix
//! controllers only there). Then:
//! 1. after `ssc import` of the paper's inventory and Table II, every switch's table equals the
//!    compiled one (count, cookies, and `ovs-ofctl diff-flows` against the `ofctl` lines the API
//!    serves, which OVS parses itself);
//! 2. ovs-vswitchd of gateway 3 is stopped (by the PID in its pidfile) and started again with the
//!    arguments `xtask/src/ovs.rs` uses: its table is back within a few seconds, and no flow of
//!    another switch was touched (flow durations never reset, one reconcile each);
//! 3. a path group changed over the REST API changes the flows of exactly the affected switches;
//! 4. a TCP connection attempt from gateway 1's MPA address to gateway 2's (member 1 of group 1,
//!    direct, code 0x2111) crosses the swap flows both ways (the RST comes back through the
//!    reverse entries: "connection refused"), and the stats API shows the counters;
//! 5. scale: 16 automatic groups per ordered pair (~10,000 flows) imported at once reach every
//!    switch, and gateway 1 reconciles its ~2,000 flows after another vswitchd restart.
//!
//! Timings are printed on lines starting with `MEASURE` (`-- --nocapture`).
//!
//! Teardown (`testbed down`, our `ssc` child) runs in `Drop`, also on panic.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
mod common;
#[path = "../../mmsg-dataplane/tests/common/release.rs"]
mod release;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use controller::ui::client::Client;
use serde_json::{json, Value};

const TOKEN: &str = "ofc-netns-test-token-0123456789";
const BRANCHES: [u8; 5] = [1, 2, 3, 4, 5];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd} {args:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

struct Testbed {
    prefix: String,
    ssc: Option<Child>,
    dir: tempfile::TempDir,
}

impl Testbed {
    fn state(&self) -> PathBuf {
        PathBuf::from("/run/mms-testbed").join(&self.prefix)
    }

    fn ovs_dir(&self, b: u8) -> PathBuf {
        self.state().join("ovs").join(format!("gw{b}"))
    }

    fn ns(&self, b: u8) -> String {
        format!("{}-gw{b}", self.prefix)
    }

    fn in_ns(&self, b: u8, cmd: &[&str]) -> String {
        let ns = self.ns(b);
        let mut args = vec!["netns", "exec", ns.as_str()];
        args.extend(cmd);
        run("ip", &args)
    }

    fn vsctl(&self, b: u8, args: &[&str]) -> String {
        let db = format!("--db=unix:{}", self.ovs_dir(b).join("db.sock").display());
        let mut a = vec!["ovs-vsctl", db.as_str(), "--timeout=10"];
        a.extend(args);
        self.in_ns(b, &a)
    }

    fn mgmt(&self, b: u8) -> String {
        format!("unix:{}", self.ovs_dir(b).join("br0.mgmt").display())
    }

    fn socket(&self, b: u8) -> PathBuf {
        self.ovs_dir(b).join("ssc.sock")
    }

    /// `ovs-ofctl dump-flows`: cookie → (duration in s, packets).
    fn dump(&self, b: u8) -> BTreeMap<u64, (f64, u64)> {
        let out = run(
            "ovs-ofctl",
            &["-O", "OpenFlow13", "dump-flows", &self.mgmt(b)],
        );
        let mut m = BTreeMap::new();
        for line in out.lines().filter(|l| l.contains("cookie=")) {
            let field = |name: &str| {
                line.split([',', ' '])
                    .find_map(|f| f.trim().strip_prefix(name))
                    .unwrap_or_else(|| panic!("no {name} in {line}"))
                    .to_owned()
            };
            let cookie = u64::from_str_radix(field("cookie=0x").as_str(), 16).unwrap();
            let duration: f64 = field("duration=").trim_end_matches('s').parse().unwrap();
            let packets: u64 = field("n_packets=").parse().unwrap();
            assert!(
                m.insert(cookie, (duration, packets)).is_none(),
                "cookie {cookie:#x} twice on gw{b}"
            );
        }
        m
    }

    /// Whether the switch's table equals `flows` (ofctl lines): `ovs-ofctl diff-flows` parses
    /// both sides itself and compares match, priority, cookie and actions.
    fn diff_flows(&self, b: u8, flows: &[String]) -> Result<(), String> {
        let file = self.dir.path().join(format!("want-gw{b}.flows"));
        std::fs::write(&file, flows.join("\n") + "\n").unwrap();
        let out = Command::new("ovs-ofctl")
            .args(["-O", "OpenFlow13", "diff-flows"])
            .arg(&file)
            .arg(self.mgmt(b))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        if out.status.success() && text.trim().is_empty() {
            Ok(())
        } else {
            Err(format!("gw{b} differs ({}):\n{text}", out.status))
        }
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if let Some(mut c) = self.ssc.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            let log = self.ovs_dir(3).join("ovs-vswitchd.log");
            if let Ok(t) = std::fs::read_to_string(&log) {
                let tail: Vec<&str> = t.lines().rev().take(30).collect();
                eprintln!("--- gw3 ovs-vswitchd.log (last lines, newest first) ---");
                for l in tail {
                    eprintln!("{l}");
                }
            }
        }
        let _ = Command::new(release::xtask_bin())
            .current_dir(root())
            .args(["testbed", "down", "--prefix", &self.prefix])
            .status();
    }
}

fn wait_until<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match f() {
            Ok(t) => return t,
            Err(e) if Instant::now() > deadline => panic!("{what}: not within {timeout:?}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(25)),
        }
    }
}

/// The compiled flows of every branch, as the API serves them (`ofctl` lines and cookies).
fn compiled(api: &Client) -> BTreeMap<u8, Vec<(u64, String)>> {
    BRANCHES
        .iter()
        .map(|&b| {
            let v = api.get(&format!("/api/v1/branches/{b}/flows")).unwrap();
            let flows = v["flows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    (
                        f["cookie"].as_u64().unwrap(),
                        f["ofctl"].as_str().unwrap().to_owned(),
                    )
                })
                .collect();
            (b, flows)
        })
        .collect()
}

fn lines(flows: &[(u64, String)]) -> Vec<String> {
    flows.iter().map(|(_, l)| l.clone()).collect()
}

fn in_sync(tb: &Testbed, b: u8, want: &[(u64, String)]) -> Result<(), String> {
    let have: BTreeSet<u64> = tb.dump(b).into_keys().collect();
    let cookies: BTreeSet<u64> = want.iter().map(|(c, _)| *c).collect();
    if have != cookies {
        return Err(format!(
            "gw{b}: {} flows, want {}; missing {:x?}, extra {:x?}",
            have.len(),
            cookies.len(),
            cookies.difference(&have).take(4).collect::<Vec<_>>(),
            have.difference(&cookies).take(4).collect::<Vec<_>>()
        ));
    }
    tb.diff_flows(b, &lines(want))
}

fn stats(api: &Client) -> Value {
    api.get("/api/v1/stats").unwrap()
}

fn branch_stats(s: &Value, b: u8) -> Value {
    s["branches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["branch"] == b)
        .cloned()
        .unwrap_or(Value::Null)
}

fn flow_packets(s: &Value, b: u8, what: &str) -> u64 {
    branch_stats(s, b)["flows"]
        .as_array()
        .map(|fs| {
            fs.iter()
                .filter(|f| f["what"] == what)
                .map(|f| f["packets"].as_u64().unwrap())
                .sum()
        })
        .unwrap_or(0)
}

/// Moves WAN port k's address of gateway b from `wan{k}` to the internal port `mpa{k}` (with the
/// inventory's MAC) and routes through it, as `mmsg` will (DESIGN §2). `wan{k}` must stop
/// answering ARP (`arp off`): otherwise the kernel answers for the address on the veth too (any
/// local address on any interface), the router may learn the veth's MAC, and the frames OVS
/// delivers to `mpa{k}` carry a foreign destination MAC and are dropped (PACKET_OTHERHOST), while
/// the kernel answers the unswapped packet straight from `wan{k}`. Found by this test.
fn mpa_address(tb: &Testbed, b: u8, k: u8) {
    let third = 10 * b + k;
    let addr = format!("198.18.{third}.2/24");
    let gw = format!("198.18.{third}.1");
    let mac = format!("02:00:c6:12:{third:02x}:02");
    let (wan, mpa) = (format!("wan{k}"), format!("mpa{k}"));
    let table = (100 + u32::from(k)).to_string();
    tb.in_ns(b, &["ip", "addr", "flush", "dev", &wan]);
    tb.in_ns(b, &["ip", "link", "set", &wan, "arp", "off"]);
    tb.in_ns(b, &["ip", "link", "set", &mpa, "address", &mac]);
    tb.in_ns(b, &["ip", "link", "set", &mpa, "up"]);
    tb.in_ns(b, &["ip", "addr", "add", &addr, "dev", &mpa]);
    tb.in_ns(
        b,
        &[
            "ip", "route", "replace", "default", "via", &gw, "dev", &mpa, "table", &table,
        ],
    );
    if k == 0 {
        tb.in_ns(
            b,
            &["ip", "route", "replace", "default", "via", &gw, "dev", &mpa],
        );
    }
    // Forget whatever MAC the router learned for the address before.
    let inet = format!("{}-inet", tb.prefix);
    let host = format!("198.18.{third}.2");
    run("ip", &["-n", &inet, "neigh", "flush", "to", &host]);
}

#[test]
fn ofc_programs_reconciles_and_measures_real_ovs() {
    for tool in [
        "ip",
        "ovs-vswitchd",
        "ovsdb-server",
        "ovs-vsctl",
        "ovs-ofctl",
    ] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .unwrap()
            .status
            .success();
        assert!(
            found,
            "{tool} is missing: this test needs Open vSwitch 3.1 and iproute2"
        );
    }
    let prefix = format!("c{}", std::process::id() % 10_000_000);
    let mut tb = Testbed {
        prefix: prefix.clone(),
        ssc: None,
        dir: tempfile::tempdir().unwrap(),
    };
    // The release xtask that `cargo xtask` and the other tests share (built with the crate
    // variables of this test removed, which would otherwise rebuild ring and all above it).
    let up = Command::new(release::xtask_bin())
        .current_dir(root())
        .args([
            "testbed",
            "up",
            "--topology",
            "examples/testbed-paper.toml",
            "--prefix",
            &prefix,
            "--ovs",
        ])
        .status()
        .unwrap();
    assert!(up.success(), "testbed up failed");

    // ssc with a fresh database, API on loopback, OpenFlow on one unix socket per gateway.
    let config = tb.dir.path().join("ssc.toml");
    std::fs::write(
        &config,
        format!("[api]\ntoken = \"{TOKEN}\"\n\n[database]\npath = \"ssc.redb\"\n"),
    )
    .unwrap();
    let unix: Vec<String> = BRANCHES
        .iter()
        .map(|&b| tb.socket(b).display().to_string())
        .collect();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ssc"))
        .args(["run", "--config"])
        .arg(&config)
        .args(["--listen", "127.0.0.1:0"])
        .args(["--openflow-unix", &unix.join(",")])
        .args(["--stats-interval", "300ms"])
        .env("RUST_LOG", "controller=info")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    tb.ssc = Some(child);
    let mut first = String::new();
    let mut reader = BufReader::new(stdout);
    reader.read_line(&mut first).unwrap();
    let base = first
        .trim()
        .strip_prefix("ssc: REST API listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();
    let api = Client::new(&base, Some(TOKEN), Duration::from_secs(10));
    let inv_file = root().join("examples/inventory-paper.toml");
    let paths_file = root().join("examples/paths-paper-table2.toml");
    let imported = Command::new(env!("CARGO_BIN_EXE_ssc"))
        .args(["import", "--api", &base, "--token", TOKEN, "--inventory"])
        .arg(&inv_file)
        .arg("--paths")
        .arg(&paths_file)
        .output()
        .unwrap();
    assert!(
        imported.status.success(),
        "{}",
        String::from_utf8_lossy(&imported.stderr)
    );

    // The API's compiled tables are swap::compile's.
    let want = compiled(&api);
    let inv = common::paper_inventory();
    let tables = controller::swap::compile(&inv, &common::table2(&inv)).unwrap();
    for &b in &BRANCHES {
        let mine: Vec<u64> = tables
            .switch(common::branch(b))
            .iter()
            .map(|f| f.cookie.0)
            .collect();
        let served: Vec<u64> = want[&b].iter().map(|(c, _)| *c).collect();
        assert_eq!(mine, served, "branch {b}");
    }
    assert_eq!(want.values().map(Vec::len).sum::<usize>(), 140);

    // Bridges, then the controllers: every switch connects to a controller that already knows
    // the whole inventory, so this is a full reconcile of the paper topology.
    for &b in &BRANCHES {
        let dpid = format!("other-config:datapath-id={b:016x}");
        tb.vsctl(
            b,
            &[
                "add-br",
                "br0",
                "--",
                "set",
                "bridge",
                "br0",
                "datapath_type=netdev",
                "protocols=OpenFlow13",
                "fail_mode=secure",
                &dpid,
                "--",
                "add-port",
                "br0",
                "wan0",
                "--",
                "set",
                "interface",
                "wan0",
                "ofport_request=1",
                "--",
                "add-port",
                "br0",
                "wan1",
                "--",
                "set",
                "interface",
                "wan1",
                "ofport_request=2",
                "--",
                "add-port",
                "br0",
                "mpa0",
                "--",
                "set",
                "interface",
                "mpa0",
                "type=internal",
                "ofport_request=101",
                "--",
                "add-port",
                "br0",
                "mpa1",
                "--",
                "set",
                "interface",
                "mpa1",
                "type=internal",
                "ofport_request=102",
            ],
        );
        assert!(tb.dump(b).is_empty(), "a fresh secure bridge has no flows");
    }
    let t0 = Instant::now();
    for &b in &BRANCHES {
        let target = format!("unix:{}", tb.socket(b).display());
        tb.vsctl(b, &["set-controller", "br0", &target]);
    }
    // (1) Every switch equals its compiled table.
    for &b in &BRANCHES {
        wait_until(
            &format!("gw{b} programmed"),
            Duration::from_secs(20),
            || in_sync(&tb, b, &want[&b]),
        );
    }
    let full = t0.elapsed();
    let s = stats(&api);
    let mut reconcile_ms = Vec::new();
    for &b in &BRANCHES {
        let bs = branch_stats(&s, b);
        assert_eq!(bs["connected"], true, "{bs}");
        assert_eq!(bs["reconciles"], 1, "{bs}");
        assert_eq!(bs["datapath_id"], format!("{b:#018x}"));
        reconcile_ms.push(bs["last_reconcile_ms"].as_f64().unwrap());
    }
    eprintln!(
        "MEASURE full reconcile of the paper topology (140 flows, 5 switches): \
         set-controller → all tables equal: {:.0} ms; per-switch reconcile (dump+diff+FLOW_MODs+barriers): {reconcile_ms:?} ms",
        full.as_secs_f64() * 1e3
    );

    // (2) Restart gateway 3's ovs-vswitchd: its table comes back, the others are not touched.
    let before: BTreeMap<u8, BTreeMap<u64, (f64, u64)>> =
        BRANCHES.iter().map(|&b| (b, tb.dump(b))).collect();
    let d3 = tb.ovs_dir(3);
    let pidfile = d3.join("ovs-vswitchd.pid");
    let pid = std::fs::read_to_string(&pidfile).unwrap().trim().to_owned();
    run("kill", &["-TERM", &pid]);
    wait_until("gw3 vswitchd exits", Duration::from_secs(10), || {
        if Path::new(&format!("/proc/{pid}")).exists() {
            Err("still running".to_owned())
        } else {
            Ok(())
        }
    });
    let ds = d3.display().to_string();
    let t1 = Instant::now();
    tb.in_ns(
        3,
        &[
            "env",
            &format!("OVS_RUNDIR={ds}"),
            &format!("OVS_DBDIR={ds}"),
            &format!("OVS_LOGDIR={ds}"),
            &format!("OVS_SYSCONFDIR={ds}"),
            "ovs-vswitchd",
            &format!("unix:{ds}/db.sock"),
            &format!("--pidfile={ds}/ovs-vswitchd.pid"),
            &format!("--log-file={ds}/ovs-vswitchd.log"),
            "--detach",
            "--no-chdir",
        ],
    );
    let started = t1.elapsed();
    wait_until("gw3 reconciled", Duration::from_secs(10), || {
        in_sync(&tb, 3, &want[&3])
    });
    let back = t1.elapsed();
    eprintln!(
        "MEASURE gw3 vswitchd restart: start (detach) took {:.0} ms, table back {:.0} ms after the start command",
        started.as_secs_f64() * 1e3,
        back.as_secs_f64() * 1e3
    );
    // The issue asks for 1 s after the switch is up; the detached start itself is not ours.
    assert!(
        back.saturating_sub(started) < Duration::from_secs(1),
        "gw3 back {back:?} after the start command, which took {started:?}"
    );
    let s = wait_until("gw3 reconcile counted", Duration::from_secs(5), || {
        let s = stats(&api);
        (branch_stats(&s, 3)["reconciles"] == 2)
            .then_some(s.clone())
            .ok_or_else(|| s.to_string())
    });
    for b in [1, 2, 4, 5] {
        assert_eq!(
            branch_stats(&s, b)["reconciles"],
            1,
            "gw{b} reconciled again"
        );
        let after = tb.dump(b);
        assert_eq!(
            after.keys().collect::<Vec<_>>(),
            before[&b].keys().collect::<Vec<_>>()
        );
        for (c, (dur, _)) in &after {
            assert!(
                *dur >= before[&b][c].0,
                "gw{b}: flow {c:#x} was re-added ({dur} s < {} s)",
                before[&b][c].0
            );
        }
        in_sync(&tb, b, &want[&b]).unwrap();
    }

    // (3) Change group 1 of 1 → 2 over the API: drop member 4 (`1a>5a>5b>2b`, through 5).
    // Affected: 1 and 2 (its source/destination entries) and 5 (its transits); 3 and 4 not.
    let before: BTreeMap<u8, BTreeMap<u64, (f64, u64)>> =
        BRANCHES.iter().map(|&b| (b, tb.dump(b))).collect();
    std::thread::sleep(Duration::from_millis(20));
    let t2 = Instant::now();
    api.call(
        "PUT",
        "/api/v1/path-groups/1/2/1",
        Some(&json!({"members": ["1a>2a", "1b>3b>3a>2a", "1b>4a>4b>2b"]})),
    )
    .unwrap();
    let new = compiled(&api);
    for &b in &BRANCHES {
        wait_until(&format!("gw{b} updated"), Duration::from_secs(10), || {
            in_sync(&tb, b, &new[&b])
        });
    }
    let pushed = t2.elapsed();
    eprintln!(
        "MEASURE path group change over REST → all switches equal: {:.0} ms",
        pushed.as_secs_f64() * 1e3
    );
    let gone: Vec<u64> = want[&5]
        .iter()
        .map(|(c, _)| *c)
        .filter(|c| !new[&5].iter().any(|(n, _)| n == c))
        .collect();
    assert_eq!(
        gone.len(),
        2,
        "member 0x2141's two transit entries left gw5"
    );
    for &b in &BRANCHES {
        let changed = want[&b] != new[&b];
        assert_eq!(changed, [1, 2, 5].contains(&b), "gw{b}");
        let after = tb.dump(b);
        // Flows that stayed were not re-installed on any switch.
        for (c, (dur, _)) in &after {
            if let Some((old, _)) = before[&b].get(c) {
                assert!(*dur >= *old, "gw{b}: flow {c:#x} was re-added");
            }
        }
        if !changed {
            assert_eq!(
                after.keys().collect::<Vec<_>>(),
                before[&b].keys().collect::<Vec<_>>()
            );
        }
    }

    // (4) Traffic through a swap flow, both directions, and the SDC's counters.
    for b in [1, 2] {
        mpa_address(&tb, b, 0);
    }
    let member = "0x2111";
    let s0 = stats(&api);
    let fwd0 = flow_packets(&s0, 1, "0x2111 forward source");
    // TCP to 198.18.20.2:0x2001 (group 1's listen port at branch 2) from 198.18.10.2: the
    // source entry swaps it to 0x2111, gateway 2 restores it; nothing listens, so gateway 2's
    // kernel answers RST, which must come back through the reverse entries to be seen.
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &tb.ns(1),
            "timeout",
            "5",
            "bash",
            "-c",
            "exec 3<>/dev/tcp/198.18.20.2/8193",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Connection refused"),
        "the RST did not come back through the swap flows: {} {err}",
        out.status
    );
    let s = wait_until(
        "stats show the swapped packets",
        Duration::from_secs(5),
        || {
            // Each entry of the member path, both directions, counted the SYN or the RST.
            let s = stats(&api);
            let ok = flow_packets(&s, 1, "0x2111 forward source") > fwd0
                && flow_packets(&s, 2, "0x2111 forward destination") > 0
                && flow_packets(&s, 2, "0x2111 reverse source") > 0
                && flow_packets(&s, 1, "0x2111 reverse destination") > 0;
            ok.then_some(s.clone()).ok_or_else(|| s.to_string())
        },
    );
    let m = s["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["code"] == member)
        .unwrap()
        .clone();
    assert!(m["forward_packets"].as_u64().unwrap() >= 1, "{m}");
    assert!(m["reverse_packets"].as_u64().unwrap() >= 1, "{m}");
    assert!(m["forward_bytes"].as_u64().unwrap() >= 40, "{m}");
    let pair = s["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["source"] == 1 && p["destination"] == 2)
        .unwrap();
    assert!(pair["forward_packets"].as_u64().unwrap() >= 1, "{pair}");
    let group = s["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["source"] == 1 && g["destination"] == 2 && g["group"] == 1)
        .unwrap();
    assert!(group["reverse_packets"].as_u64().unwrap() >= 1, "{group}");
    // Port counters of mpa0 (101) grew at gateway 1; the `ssc stats` CLI prints the same JSON.
    let ports = branch_stats(&s, 1)["ports"].clone();
    let mpa0 = ports
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["port"] == 101)
        .unwrap_or_else(|| panic!("{ports}"));
    assert!(mpa0["rx_packets"].as_u64().unwrap() >= 1, "{mpa0}");
    let cli = Command::new(env!("CARGO_BIN_EXE_ssc"))
        .args(["stats", "--json", "--api", &base, "--token", TOKEN])
        .output()
        .unwrap();
    assert!(cli.status.success());
    let v: Value = serde_json::from_slice(&cli.stdout).unwrap();
    assert_eq!(v["available"], true);
    assert_eq!(v["branches"].as_array().unwrap().len(), 5);
    let text = run(
        env!("CARGO_BIN_EXE_ssc"),
        &["stats", "--api", &base, "--token", TOKEN],
    );
    assert!(text.contains("member 0x2111: forward "), "{text}");
    assert!(text.contains("branch  3 connected"), "{text}");

    // (5) Scale: 16 automatic groups for every ordered pair of the paper topology, imported in
    // one transaction, pushed to all five switches; then gateway 1's full reconcile of its big
    // table after a vswitchd restart.
    let mut pc =
        controller::path_config::PathConfigurator::new(controller::path_config::Settings {
            groups_per_pair: 16,
            ..controller::path_config::Settings::default()
        });
    pc.update(&inv, &controller::path_config::Measurements::new());
    let groups = pc.groups(&inv).unwrap();
    let t3 = Instant::now();
    api.call(
        "POST",
        "/api/v1/import",
        Some(&json!({"inventory": inv.to_file(), "groups": groups.to_file()})),
    )
    .unwrap();
    let big = compiled(&api);
    let total: usize = big.values().map(Vec::len).sum();
    for &b in &BRANCHES {
        wait_until(&format!("gw{b} scaled"), Duration::from_secs(60), || {
            in_sync(&tb, b, &big[&b])
        });
    }
    let seen = t3.elapsed();
    let push = stats(&api)["last_push"].clone();
    let ms = push["ms"].as_f64().unwrap();
    let mods = push["flow_mods"].as_u64().unwrap();
    assert_eq!(push["failed_members"], 0, "{push}");
    eprintln!(
        "MEASURE scale: {} groups, {total} flows on 5 switches; import → push done (diff + {mods} FLOW_MODs + barriers, {} steps): {ms:.0} ms = {:.0} FLOW_MOD/s; all tables verified equal after {:.0} ms",
        groups.len(),
        push["steps"],
        mods as f64 / (ms / 1e3),
        seen.as_secs_f64() * 1e3
    );
    let d1 = tb.ovs_dir(1);
    let pid = std::fs::read_to_string(d1.join("ovs-vswitchd.pid"))
        .unwrap()
        .trim()
        .to_owned();
    run("kill", &["-TERM", &pid]);
    wait_until("gw1 vswitchd exits", Duration::from_secs(10), || {
        if Path::new(&format!("/proc/{pid}")).exists() {
            Err("still running".to_owned())
        } else {
            Ok(())
        }
    });
    let ds = d1.display().to_string();
    let t4 = Instant::now();
    tb.in_ns(
        1,
        &[
            "env",
            &format!("OVS_RUNDIR={ds}"),
            &format!("OVS_DBDIR={ds}"),
            &format!("OVS_LOGDIR={ds}"),
            &format!("OVS_SYSCONFDIR={ds}"),
            "ovs-vswitchd",
            &format!("unix:{ds}/db.sock"),
            &format!("--pidfile={ds}/ovs-vswitchd.pid"),
            &format!("--log-file={ds}/ovs-vswitchd.log"),
            "--detach",
            "--no-chdir",
        ],
    );
    wait_until("gw1 big table back", Duration::from_secs(30), || {
        in_sync(&tb, 1, &big[&1])
    });
    let back = t4.elapsed();
    let s = wait_until("gw1 reconcile counted", Duration::from_secs(5), || {
        let s = stats(&api);
        (branch_stats(&s, 1)["reconciles"] == 2)
            .then_some(s.clone())
            .ok_or_else(|| s.to_string())
    });
    eprintln!(
        "MEASURE scale: gw1 restart with {} flows: reconcile (dump + diff + FLOW_MODs + barriers) {:.0} ms; table equal {:.0} ms after the start command",
        big[&1].len(),
        branch_stats(&s, 1)["last_reconcile_ms"].as_f64().unwrap(),
        back.as_secs_f64() * 1e3
    );
    drop(reader);
}
