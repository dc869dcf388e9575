//! Issue #20, NAT'd uplinks (docs/nat.md): on a three-branch testbed, the only WAN port of
//! branches 2 and 3 is behind NAT (`nat = true` in the topology: the carrier source-NATs it to
//! 198.18.(10b).1 and refuses every connection towards it); branch 1 has two public ports. Three
//! real `mmsg` with TLS: gw2's and gw3's ports are marked `nat = true`, gw1 knows branches 2 and
//! 3 as `nat` remotes, so it never dials them and sends on the connections they dial. Branches 2
//! and 3 reach each other through branch 1 (each lists the other's LAN under branch 1; gw1's
//! kernel forwards out of TUN and back in).
//!
//! Asserts: nobody can dial gw2's or gw3's port (a TCP connect from gw1 fails); every connection
//! of gw2 and gw3 is up and gw1 accepted them from the NATs' addresses and has no outbound
//! connection; ping works both ways between h1 and h2 and between h2 and h3 (relayed); TCP and
//! UDP (iperf3) carry data in both directions between h1 and h2 (h1 → h2 and, with `-R`,
//! h2 → h1), and TCP h3 → h2 through branch 1. Needs root, iproute2, nftables, iperf3; it FAILS
//! without them, it never skips.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mpa::config::{PathGroupConfig, RemoteBranch};
use serde_json::Value;
use xtask::{iperf, mmsg, testbed, topology};

/// Branch 1: two public ports; branches 2 and 3: one port each, behind NAT. No impairment
/// (nothing is diverted through the emulator).
const TOPOLOGY: &str = r#"name = "nat"
[[branch]]
id = 1
wan = [{}, {}]
[[branch]]
id = 2
wan = [{ nat = true }]
[[branch]]
id = 3
wan = [{ nat = true }]
"#;

/// The running gateways, stopped by PID when dropped.
struct Gateways(Vec<Child>);

impl Drop for Gateways {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn start(bin: &Path, prefix: &str, dir: &Path, b: u8, c: &mpa::config::Config) -> Child {
    let config = dir.join(format!("nat-gw{b}.toml"));
    mmsg::write_config(&config, "nat test: examples, branch 2 behind NAT", c).unwrap();
    let log = std::fs::File::create(dir.join(format!("nat-gw{b}.log"))).unwrap();
    Command::new("ip")
        .args(["netns", "exec", &testbed::ns_gw(prefix, b)])
        .arg(bin)
        .args(["run", "--config"])
        .arg(&config)
        .arg("--control")
        .arg(control(dir, b))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start mmsg")
}

fn control(dir: &Path, b: u8) -> PathBuf {
    dir.join(format!("nat-gw{b}.sock"))
}

#[test]
fn a_branch_behind_nat_only_talks_both_ways() {
    common::require_tools(&["ip", "nft", "iperf3", "ping"]);
    let t0 = Instant::now();
    let root = common::root();
    let prefix = format!("ntx{}", std::process::id() % 100_000);
    xtask::deps::ensure().unwrap();
    let bin = mmsg::build_mmsg(&root, mmsg::Profile::Release).unwrap();
    let topo = std::env::temp_dir().join(format!("mms-{prefix}-topology.toml"));
    std::fs::write(&topo, TOPOLOGY).unwrap();
    let xtask = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_xtask"))
            .args(args)
            .current_dir(&root)
            .status()
            .expect("run xtask")
    };
    let up = xtask(&[
        "testbed",
        "up",
        "--prefix",
        &prefix,
        "--topology",
        topo.to_str().unwrap(),
    ]);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        assert!(up.success(), "testbed up failed");
        run(&bin, &prefix);
    }));
    let down = xtask(&["testbed", "down", "--prefix", &prefix]);
    let _ = std::fs::remove_file(&topo);
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
    assert!(down.success(), "testbed down failed");
    eprintln!("MEASURE nat netns test {:.1} s", t0.elapsed().as_secs_f64());
}

/// The three configs with the run's TLS. Branch 1: two public ports, branches 2 and 3 as `nat`
/// remotes (their connections come from the NAT's address). Branches 2 and 3: one port behind
/// NAT; each reaches the other's LAN through branch 1 (listed under branch 1's `lan_prefixes`:
/// gw1's kernel forwards between the two, out of TUN and back in).
fn configs(dir: &Path) -> Vec<mpa::config::Config> {
    let tls = mmsg::provision_tls(&dir.join("nat-tls"), "MMS nat CA", &[1, 2, 3]).unwrap();
    let port = |b: u8, k: u8| {
        mmsg::wan_port(
            &format!("wan{k}"),
            topology::wan_addr(b, k, 2),
            24,
            topology::wan_addr(b, k, 1),
        )
    };
    let remote = |id: u8, wan_addresses, lans: &[u8], nat| RemoteBranch {
        id,
        wan_addresses,
        lan_prefixes: lans.iter().map(|&l| mmsg::lan_prefix(l)).collect(),
        path_groups: vec![PathGroupConfig { id: 0, weight: 1 }],
        nat,
    };
    let mut c1 = mmsg::config(1, vec![port(1, 0), port(1, 1)]).unwrap();
    c1.remote = vec![
        remote(2, vec![topology::wan_addr(2, 0, 1)], &[2], true),
        remote(3, vec![topology::wan_addr(3, 0, 1)], &[3], true),
    ];
    let mut out = vec![c1];
    for (b, other) in [(2, 3), (3, 2)] {
        let mut wan = port(b, 0);
        wan.nat = true;
        let mut c = mmsg::config(b, vec![wan]).unwrap();
        let hub = vec![topology::wan_addr(1, 0, 2), topology::wan_addr(1, 1, 2)];
        c.remote = vec![remote(1, hub, &[1, other], false)];
        out.push(c);
    }
    for (c, b) in out.iter_mut().zip(1u8..) {
        c.tls = Some(tls[&b].clone());
        c.validate().unwrap();
    }
    out
}

fn connections(bin: &Path, dir: &Path, b: u8) -> Vec<Value> {
    mmsg::status(bin, &control(dir, b))
        .map(|s| s["connections"].as_array().cloned().unwrap_or_default())
        .unwrap_or_default()
}

fn run(bin: &Path, prefix: &str) {
    let dir = testbed::state_dir(prefix);
    let configs = configs(&dir);
    // One path group, two classes: two connections from each NAT'd branch.
    let expected_out = 2;
    let _gws = Gateways(
        configs
            .iter()
            .zip(1u8..)
            .map(|(c, b)| start(bin, prefix, &dir, b, c))
            .collect(),
    );
    let gw1 = testbed::ns_gw(prefix, 1);

    // The carrier refuses connections towards the NAT'd ports (a TCP connect to gw2's listener).
    for b in [2u8, 3] {
        let target = format!(
            "exec 3<>/dev/tcp/{}/{}",
            topology::wan_addr(b, 0, 2),
            0x1000 * u32::from(b)
        );
        let dial = xtask::sh::ns(&gw1, "timeout", &["2", "bash", "-c", &target]);
        assert!(dial.is_err(), "gw{b}'s NAT'd port could be dialled");
    }

    // Every connection of gw2 and gw3 up with its subflows (1 uplink × 2 remote addresses), and
    // gw1 carrying them as accepted connections from the NATs' addresses, dialling none.
    let started = Instant::now();
    let deadline = started + Duration::from_secs(30);
    loop {
        let up: Vec<usize> = [2u8, 3]
            .iter()
            .map(|&b| {
                connections(bin, &dir, b)
                    .iter()
                    .filter(|c| c["direction"] == "out" && c["state"] == "up")
                    .filter(|c| c["subflows"].as_array().is_some_and(|s| s.len() >= 2))
                    .count()
            })
            .collect();
        let in1 = connections(bin, &dir, 1);
        let from_nat = in1
            .iter()
            .filter(|c| c["direction"] == "in" && c["state"] == "up")
            .count();
        if up == [expected_out; 2] && from_nat == 2 * expected_out {
            assert!(
                in1.iter().all(|c| c["direction"] != "out"),
                "gw1 dialled a NAT'd branch: {in1:?}"
            );
            // Every subflow of gw2's and gw3's connections reaches gw1 from their NAT's address.
            for c in &in1 {
                let b = u8::try_from(c["remote_branch"].as_u64().unwrap()).unwrap();
                let nat = format!("{}:", topology::wan_addr(b, 0, 1));
                let subflows = c["subflows"].as_array().unwrap();
                assert!(
                    !subflows.is_empty()
                        && subflows
                            .iter()
                            .all(|f| f["remote"].as_str().unwrap().starts_with(&nat)),
                    "gw1 should see branch {b} from {nat}: {c}"
                );
            }
            break;
        }
        assert!(
            Instant::now() < deadline,
            "connections not up: gw2/gw3 {up:?} of {expected_out} out, gw1 {from_nat} in (logs in {})",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    eprintln!(
        "MEASURE nat tunnels up {:.1} s after the dial checks (4 s)",
        started.elapsed().as_secs_f64()
    );

    // Ping both ways: 1 ↔ 2 through the tunnel, 2 ↔ 3 relayed by branch 1.
    let h = |b| testbed::ns_host(prefix, b, 0);
    let a = |b| topology::lan_addr(b, 10).to_string();
    let (h1, h2, a2) = (h(1), h(2), a(2));
    for (from, to) in [(1, 2), (2, 1), (2, 3), (3, 2)] {
        let out = xtask::sh::ns(
            &h(from),
            "ping",
            &["-c", "3", "-i", "0.2", "-W", "2", &a(to)],
        )
        .unwrap_or_else(|e| panic!("ping h{from} → h{to}: {e:#}"));
        assert!(out.contains(" 0% packet loss"), "h{from} → h{to}: {out}");
    }

    // TCP and UDP both ways: server on h2, client on h1, `-R` for h2 → h1.
    let mut port = 5480;
    for (proto, reverse) in [("tcp", false), ("tcp", true), ("udp", false), ("udp", true)] {
        let server = iperf::Server::start(&h2, port, None).unwrap();
        let p = port.to_string();
        let mut args = vec!["-c", &a2, "-p", &p, "-t", "2"];
        if proto == "udp" {
            args.extend(["-u", "-b", "5M"]);
        }
        if reverse {
            args.push("-R");
        }
        let r = iperf::client(&h1, &args).unwrap();
        server.wait(Duration::from_secs(5));
        let dir_name = if reverse { "h2 → h1" } else { "h1 → h2" };
        let (bytes, extra) = if proto == "tcp" {
            (
                r["end"]["sum_received"]["bytes"].as_f64().unwrap(),
                format!(
                    "{:.1} Mbit/s",
                    iperf::tcp_received_mbps(&r).unwrap_or_default()
                ),
            )
        } else {
            let s = &r["end"]["sum"];
            let lost = s["lost_percent"].as_f64().unwrap();
            assert!(lost < 5.0, "UDP {dir_name}: {lost}% lost");
            let recv = s["bytes"].as_f64().unwrap() * (1.0 - lost / 100.0);
            (recv, format!("{lost:.2} % lost"))
        };
        eprintln!("MEASURE nat {proto} {dir_name}: {bytes:.0} B received, {extra}");
        assert!(bytes > 5e5, "{proto} {dir_name}: only {bytes} B");
        port += 1;
    }

    // TCP between the two NAT'd branches, relayed by branch 1.
    let server = iperf::Server::start(&h2, port, None).unwrap();
    let p = port.to_string();
    let r = iperf::client(&h(3), &["-c", &a2, "-p", &p, "-t", "2"]).unwrap();
    server.wait(Duration::from_secs(5));
    let bytes = r["end"]["sum_received"]["bytes"].as_f64().unwrap();
    eprintln!(
        "MEASURE nat tcp h3 → h2 through branch 1: {bytes:.0} B received, {:.1} Mbit/s",
        iperf::tcp_received_mbps(&r).unwrap_or_default()
    );
    assert!(bytes > 5e5, "tcp h3 → h2: only {bytes} B");
}
