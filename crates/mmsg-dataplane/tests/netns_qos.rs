//! netns integration test of the WAN egress priority (`mmsg_dataplane::qos`, docs/mmsg.md
//! "Priority at the WAN egress"): two namespaces, gateway `g` with WAN port `wan0`
//! (198.18.250.1/24, `rate_mbit = 20`) and the ISP side `r` (198.18.250.2).
//!
//! Proves, with the real applier run inside `g` (the thread enters the namespace) and the real
//! kernel qdisc: (1) the htb root, its 5 prio classes with bfifo leaves and the u32 DSCP/ARP
//! filters exist exactly as designed, also after applying twice (idempotent); (2) with the
//! shaped port saturated by bulk UDP at DSCP 0 (iperf3 `--tos 0`), pings with DSCP 46
//! (`ping -Q 184`) and DSCP 10 (`ping -Q 40`) measured side by side with DSCP 0 pings have a far
//! lower RTT (ratio of medians, printed); (3) the undo list removes the qdisc, classes and
//! filters. With `[ovs]` (own ovsdb-server + ovs-vswitchd, netdev bridge, address on internal
//! port `mpa0`): (4) the OVS port gets one `linux-noop` QoS row (also after two runs), a bridge
//! reconfiguration leaves the tree in place, DSCP 46 pings sent through OVS are counted in band 0
//! of `wan0`, and the undo clears the port's QoS and the qdisc. Needs root (network namespaces);
//! fails, never skips, when something is missing.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::os::fd::AsRawFd;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use mmsg_dataplane::qos;
use mmsg_dataplane::setup::Undo;
use mpa::config::Config;

const WAN: &str = "wan0";
const G_ADDR: &str = "198.18.250.1";
const R_ADDR: &str = "198.18.250.2";
const RATE_MBIT: u32 = 20;
/// Bulk load, 1.5 × the shaped rate: the band-4 FIFO stays full.
const BULK_MBIT: u32 = 30;
const PINGS: u32 = 40;

mod common;
use common::{netns, run, run_ok};

struct Namespaces {
    g: String,
    r: String,
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for ns in [&self.g, &self.r] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// A process we started; killed by its PID on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `f` on a thread that has entered network namespace `ns` (the processes it starts, such
/// as `tc`, inherit it); the thread ends with `f`, so no other code runs in `ns`.
fn in_netns<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            let file = std::fs::File::open(format!("/run/netns/{ns}")).unwrap();
            // SAFETY: setns on a valid, open namespace fd; it changes only this thread's network
            // namespace, and this thread runs nothing but `f`.
            let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns {ns}: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .unwrap()
    })
}

/// Namespaces `qe<pid><test>-g` and `-r`, unique per test and run.
fn setup(test: &str) -> Namespaces {
    let tag = format!("qe{}{test}", std::process::id());
    let n = Namespaces {
        g: format!("{tag}-g"),
        r: format!("{tag}-r"),
    };
    for ns in [&n.g, &n.r] {
        run_ok(Command::new("ip").args(["netns", "add", ns]));
        run_ok(&mut netns(ns, &["ip", "link", "set", "lo", "up"]));
    }
    run_ok(Command::new("ip").args([
        "-n", &n.g, "link", "add", WAN, "type", "veth", "peer", "name", "isp0", "netns", &n.r,
    ]));
    run_ok(&mut netns(
        &n.g,
        &["ip", "addr", "add", &format!("{G_ADDR}/24"), "dev", WAN],
    ));
    run_ok(&mut netns(&n.g, &["ip", "link", "set", WAN, "up"]));
    run_ok(&mut netns(
        &n.r,
        &["ip", "addr", "add", &format!("{R_ADDR}/24"), "dev", "isp0"],
    ));
    run_ok(&mut netns(&n.r, &["ip", "link", "set", "isp0", "up"]));
    n
}

fn config() -> Config {
    Config::parse(&toml_of_config()).unwrap()
}

fn tc_show(ns: &str, what: &str) -> String {
    run_ok(&mut netns(ns, &["tc", what, "show", "dev", WAN]))
}

/// The qdisc tree as designed (crate::qos module docs).
fn assert_installed(ns: &str) {
    let qdiscs = tc_show(ns, "qdisc");
    assert!(
        qdiscs.contains("qdisc htb 1: root") && qdiscs.contains("default 0x14"),
        "{qdiscs}"
    );
    // 20 Mbit/s × 95 % = 19 Mbit/s.
    let classes = tc_show(ns, "class");
    assert!(
        classes.contains("class htb 1:1 root rate 19Mbit ceil 19Mbit"),
        "{classes}"
    );
    for b in 0..5 {
        let want =
            format!("class htb 1:1{b} parent 1:1 leaf 1{b}: prio {b} rate 190Kbit ceil 19Mbit");
        assert!(classes.contains(&want), "no {want:?} in\n{classes}");
        let leaf = format!("qdisc bfifo 1{b}: parent 1:1{b} limit 128Kb");
        assert!(qdiscs.contains(&leaf), "no {leaf:?} in\n{qdiscs}");
    }
    assert_eq!(classes.lines().count(), 6, "{classes}");
    assert_eq!(qdiscs.matches("qdisc bfifo").count(), 5, "{qdiscs}");
    // Filters: (flowid, match) pairs, each filter line followed by its match line.
    let filters = tc_show(ns, "filter");
    let mut pairs = Vec::new();
    let lines: Vec<&str> = filters.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if let Some(pos) = l.find("flowid ") {
            let flow = l[pos + 7..].split_whitespace().next().unwrap().to_owned();
            let m = lines.get(i + 1).unwrap().trim().to_owned();
            let proto = if l.contains("protocol arp") {
                "arp"
            } else {
                "ip"
            };
            pairs.push((proto, flow, m));
        }
    }
    let want: Vec<(&str, String, String)> = [
        ("ip", "1:10", "match 00b80000/00fc0000 at 0"),
        ("ip", "1:11", "match 00880000/00fc0000 at 0"),
        ("ip", "1:12", "match 00480000/00fc0000 at 0"),
        ("ip", "1:13", "match 00280000/00fc0000 at 0"),
        ("arp", "1:10", "match 00000000/00000000 at 0"),
    ]
    .iter()
    .map(|&(p, f, m)| (p, f.to_owned(), m.to_owned()))
    .collect();
    assert_eq!(pairs, want, "{filters}");
}

/// Per-reply RTTs (ms) of a finished `ping`.
fn rtts(out: &Output) -> Vec<f64> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split_whitespace().next()?.parse().ok())
        .collect()
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn ping(ns: &str, tos: u8) -> Child {
    netns(
        ns,
        &[
            "ping",
            "-n",
            "-Q",
            &tos.to_string(),
            "-c",
            &PINGS.to_string(),
            "-i",
            "0.1",
            "-W",
            "2",
            R_ADDR,
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap()
}

#[test]
fn strict_priority_by_dscp_on_the_wan_egress() {
    let n = setup("p");
    let cfg = config();

    // Applied twice: the second run converges to the same tree (idempotent).
    let mut undo = Undo::default();
    in_netns(&n.g, || qos::apply(&cfg, &mut undo)).unwrap();
    in_netns(&n.g, || qos::apply(&cfg, &mut undo)).unwrap();
    assert_installed(&n.g);

    // Saturate the shaped port with bulk UDP at DSCP 0 (band 4).
    let _server = Proc(
        netns(&n.r, &["iperf3", "-s", "-p", "5299"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(500));
    let bulk = Proc(
        netns(
            &n.g,
            &[
                "iperf3",
                "-c",
                R_ADDR,
                "-p",
                "5299",
                "-u",
                "-b",
                &format!("{BULK_MBIT}M"),
                "-l",
                "1400",
                "--tos",
                "0",
                "-t",
                "8",
                "--json",
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap(),
    );
    std::thread::sleep(Duration::from_secs(1));
    // Side by side: DSCP 46 (Type I, 1 hop), DSCP 10 (Type II, 2 hops), DSCP 0 (unmarked).
    let p46 = ping(&n.g, 184);
    let p10 = ping(&n.g, 40);
    let p0 = ping(&n.g, 0);
    let (o46, o10, o0) = (
        p46.wait_with_output().unwrap(),
        p10.wait_with_output().unwrap(),
        p0.wait_with_output().unwrap(),
    );
    let mut bulk = bulk;
    let bulk_status = bulk.0.wait().unwrap();
    let mut bulk_json = String::new();
    std::io::Read::read_to_string(bulk.0.stdout.as_mut().unwrap(), &mut bulk_json).unwrap();
    assert!(bulk_status.success(), "iperf3 client failed: {bulk_json}");
    let v: serde_json::Value = serde_json::from_str(&bulk_json).unwrap();
    let bulk_rx_mbit = v["end"]["sum"]["bits_per_second"].as_f64().unwrap_or(0.0) / 1e6;
    let lost = v["end"]["sum"]["lost_percent"].as_f64().unwrap_or(-1.0);

    let (r46, r10, r0) = (rtts(&o46), rtts(&o10), rtts(&o0));
    let stats = tc_show_s(&n.g);
    println!(
        "bulk UDP DSCP 0 offered {BULK_MBIT} Mbit/s into {RATE_MBIT} Mbit/s × 95 %: \
         iperf3 reports {bulk_rx_mbit:.1} Mbit/s, {lost:.1} % lost"
    );
    for (name, r) in [("DSCP 46", &r46), ("DSCP 10", &r10), ("DSCP 0", &r0)] {
        println!(
            "ping {name}: {}/{PINGS} replies, RTT median {:.2} ms, min {:.2}, max {:.2}",
            r.len(),
            if r.is_empty() { f64::NAN } else { median(r) },
            r.iter().copied().fold(f64::INFINITY, f64::min),
            r.iter().copied().fold(0.0, f64::max),
        );
    }
    println!("{stats}");
    assert!(
        r46.len() >= (PINGS as usize) * 9 / 10,
        "DSCP 46 pings lost: {}",
        String::from_utf8_lossy(&o46.stdout)
    );
    assert!(
        r10.len() >= (PINGS as usize) * 9 / 10,
        "DSCP 10 pings lost: {}",
        String::from_utf8_lossy(&o10.stdout)
    );
    assert!(
        r0.len() >= 5,
        "too few DSCP 0 replies to compare: {}",
        String::from_utf8_lossy(&o0.stdout)
    );
    let (m46, m10, m0) = (median(&r46), median(&r10), median(&r0));
    // The band-4 FIFO is full (128 KiB at 19 Mbit/s ≈ 55 ms); bands 0 and 3 wait for at most a
    // packet or two.
    assert!(
        m0 > 5.0 * m46,
        "Type I (DSCP 46) RTT {m46:.2} ms is not clearly below DSCP 0's {m0:.2} ms"
    );
    assert!(
        m0 > 5.0 * m10,
        "DSCP 10 RTT {m10:.2} ms is not clearly below DSCP 0's {m0:.2} ms"
    );
    // The shaper holds the port near 19 Mbit/s (what the receiver got).
    assert!(
        (15.0..=20.0).contains(&bulk_rx_mbit),
        "bulk got {bulk_rx_mbit:.1} Mbit/s through a 19 Mbit/s shaper"
    );

    // Undo removes everything.
    in_netns(&n.g, || undo.revert());
    let qdiscs = tc_show(&n.g, "qdisc");
    assert!(
        !qdiscs.contains("htb") && !qdiscs.contains("bfifo"),
        "{qdiscs}"
    );
    assert_eq!(tc_show(&n.g, "class").trim(), "");
    assert_eq!(tc_show(&n.g, "filter").trim(), "");
}

fn tc_show_s(ns: &str) -> String {
    run_ok(&mut netns(ns, &["tc", "-s", "class", "show", "dev", WAN]))
}

/// ovsdb-server and ovs-vswitchd of one namespace (DESIGN §4: one instance per gateway
/// namespace, own run directory); stopped by their PIDs on drop, before the namespaces go.
struct Ovs {
    dir: std::path::PathBuf,
    pids: Vec<i32>,
}

impl Drop for Ovs {
    fn drop(&mut self) {
        for &pid in &self.pids {
            // SAFETY: plain kill(2) of a daemon this test started (PID from its pidfile).
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        std::thread::sleep(Duration::from_millis(200));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Ovs {
    fn start(ns: &str) -> Ovs {
        let dir = std::path::PathBuf::from(format!("/tmp/{ns}-ovs"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let d = dir.display().to_string();
        let mut ovs = Ovs {
            dir,
            pids: Vec::new(),
        };
        run_ok(Command::new("ovsdb-tool").args([
            "create",
            &format!("{d}/conf.db"),
            "/usr/share/openvswitch/vswitch.ovsschema",
        ]));
        let env = |c: &mut Command| {
            for k in ["OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR", "OVS_SYSCONFDIR"] {
                c.env(k, &d);
            }
        };
        let mut c = netns(
            ns,
            &[
                "ovsdb-server",
                &format!("{d}/conf.db"),
                &format!("--remote=punix:{d}/db.sock"),
                &format!("--pidfile={d}/db.pid"),
                &format!("--log-file={d}/db.log"),
                "--detach",
                "--no-chdir",
            ],
        );
        env(&mut c);
        run_ok(&mut c);
        ovs.pids.push(read_pid(&format!("{d}/db.pid")));
        run_ok(&mut ovs.vsctl(ns, &["--no-wait", "init"]));
        let mut c = netns(
            ns,
            &[
                "ovs-vswitchd",
                &format!("unix:{d}/db.sock"),
                &format!("--pidfile={d}/vs.pid"),
                &format!("--log-file={d}/vs.log"),
                "--detach",
                "--no-chdir",
            ],
        );
        env(&mut c);
        run_ok(&mut c);
        ovs.pids.push(read_pid(&format!("{d}/vs.pid")));
        ovs
    }

    fn db(&self) -> String {
        format!("unix:{}/db.sock", self.dir.display())
    }

    fn vsctl(&self, ns: &str, args: &[&str]) -> Command {
        let db = format!("--db={}", self.db());
        let mut all = vec!["ovs-vsctl", db.as_str(), "--timeout=10"];
        all.extend(args);
        netns(ns, &all)
    }
}

fn read_pid(path: &str) -> i32 {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .trim()
        .parse()
        .unwrap()
}

/// With `[ovs]`: the qdisc goes on the OVS port `wan0`, which gets a `linux-noop` QoS row (one,
/// also after applying twice), survives a bridge reconfiguration, and everything is removed on
/// exit.
#[test]
fn with_ovs_the_port_keeps_the_qdisc() {
    let n = setup("o");
    let ovs = Ovs::start(&n.g);
    // As crate::ovs builds it: the address moves to the internal port mpa0 (standalone bridge
    // here: the NORMAL action forwards, no controller needed).
    run_ok(&mut netns(
        &n.g,
        &["ip", "addr", "del", &format!("{G_ADDR}/24"), "dev", WAN],
    ));
    run_ok(&mut ovs.vsctl(
        &n.g,
        &[
            "add-br",
            "br0",
            "--",
            "set",
            "bridge",
            "br0",
            "datapath_type=netdev",
            "--",
            "add-port",
            "br0",
            WAN,
            "--",
            "add-port",
            "br0",
            "mpa0",
            "--",
            "set",
            "interface",
            "mpa0",
            "type=internal",
        ],
    ));
    let t0 = std::time::Instant::now();
    while run(&mut netns(&n.g, &["ip", "link", "show", "mpa0"]))
        .status
        .code()
        != Some(0)
    {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "mpa0 did not appear"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    run_ok(&mut netns(
        &n.g,
        &["ip", "addr", "add", &format!("{G_ADDR}/24"), "dev", "mpa0"],
    ));
    run_ok(&mut netns(&n.g, &["ip", "link", "set", "mpa0", "up"]));
    let cfg = Config::parse(&format!(
        "{}\n[ovs]\ndb = \"{}\"\ncontroller = \"unix:{}/ssc.sock\"\n",
        toml_of_config(),
        ovs.db(),
        ovs.dir.display()
    ))
    .unwrap();
    let mut undo = Undo::default();
    in_netns(&n.g, || qos::apply(&cfg, &mut undo)).unwrap();
    in_netns(&n.g, || qos::apply(&cfg, &mut undo)).unwrap();
    let rows = run_ok(&mut ovs.vsctl(
        &n.g,
        &[
            "--bare",
            "--columns=type",
            "find",
            "qos",
            "external_ids:mms-port=wan0",
        ],
    ));
    assert_eq!(rows.split_whitespace().collect::<Vec<_>>(), ["linux-noop"]);
    let port_qos = run_ok(&mut ovs.vsctl(&n.g, &["get", "port", WAN, "qos"]));
    assert_ne!(port_qos.trim(), "[]");
    // A reconfiguration of the bridge (new port) must leave our tree in place.
    run_ok(Command::new("ip").args([
        "-n", &n.g, "link", "add", "qe-x0", "type", "veth", "peer", "name", "qe-x1",
    ]));
    run_ok(&mut ovs.vsctl(&n.g, &["add-port", "br0", "qe-x0"]));
    std::thread::sleep(Duration::from_millis(500));
    assert_installed(&n.g);
    // What OVS (netdev datapath, AF_PACKET send) puts on wan0 passes the qdisc and is classified:
    // 20 pings at DSCP 46 from mpa0 land in band 0 (1:10).
    let sent_band0 = || -> u64 {
        let s = run_ok(&mut netns(&n.g, &["tc", "-s", "class", "show", "dev", WAN]));
        let block = s
            .split("class htb ")
            .find(|b| b.starts_with("1:10 "))
            .unwrap();
        let after = block.split("bytes ").nth(1).unwrap();
        after.split(" pkt").next().unwrap().trim().parse().unwrap()
    };
    let before = sent_band0();
    let out = run_ok(&mut netns(
        &n.g,
        &[
            "ping", "-n", "-Q", "184", "-c", "20", "-i", "0.05", "-W", "2", R_ADDR,
        ],
    ));
    assert!(out.contains("20 received"), "{out}");
    let after = sent_band0();
    println!("band 0 (1:10) on {WAN} behind OVS: {before} -> {after} packets for 20 pings");
    assert!(after >= before + 20, "{before} -> {after}");

    in_netns(&n.g, || undo.revert());
    let qdiscs = tc_show(&n.g, "qdisc");
    assert!(
        !qdiscs.contains("htb") && !qdiscs.contains("bfifo"),
        "{qdiscs}"
    );
    let port_qos = run_ok(&mut ovs.vsctl(&n.g, &["get", "port", WAN, "qos"]));
    assert_eq!(port_qos.trim(), "[]");
}

fn toml_of_config() -> String {
    format!(
        r#"
branch_id = 1
lan_prefixes = ["198.19.1.0/24"]
[[wan]]
name = "{WAN}"
address = "{G_ADDR}/24"
gateway = "{R_ADDR}"
rate_mbit = {RATE_MBIT}
"#
    )
}
