//! netns integration test of `mmsg` on the 2x2 testbed (`cargo xtask testbed`, no OVS): two
//! gateways, h1 (198.19.1.10) ↔ h2 (198.19.2.10) through the IPoMP tunnel.
//!
//! Proves: (1) ping, iperf3 TCP and UDP through the tunnel; (2) every tunnel connection has exactly
//! the 2 × 2 subflows, one per (local WAN, remote WAN) pair; (3) TCP goodput through the tunnel
//! beats the best single (uplink, uplink) path, measured side by side; (4) junk and a wrong hello
//! on an MPA port are closed and counted, and nothing reaches TUN; (5) `mmsg check` names an
//! unknown key. Both gateways run with mutual TLS (`common::tls`: a test CA and one certificate
//! per gateway; TLS is the default, issue #17). Needs root (network namespaces); fails, never skips, when something is missing.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::tls::{example_with, TestPki};
use common::{
    netns, repo_root, require_root_and, run, run_ok, start_mmsg, status, xtask, Testbed, MMSG,
};

fn counter(s: &serde_json::Value, name: &str) -> u64 {
    s["counters"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {name}"))
}

/// The established subflows of a connection.
fn established(conn: &serde_json::Value) -> Vec<&serde_json::Value> {
    conn["subflows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|sf| sf["state"] == "established")
        .collect()
}

/// The set of (local ip, remote ip) pairs of a connection's established subflows.
fn pairs(conn: &serde_json::Value) -> BTreeSet<(String, String)> {
    established(conn)
        .into_iter()
        .map(|sf| {
            let ip = |k: &str| {
                sf[k]
                    .as_str()
                    .unwrap()
                    .split(':')
                    .next()
                    .unwrap()
                    .to_owned()
            };
            (ip("local"), ip("remote"))
        })
        .collect()
}

fn all_subflows_up(s: &serde_json::Value, per_direction: usize) -> bool {
    let conns = s["connections"].as_array().unwrap();
    let out: Vec<_> = conns.iter().filter(|c| c["direction"] == "out").collect();
    let inb: Vec<_> = conns.iter().filter(|c| c["direction"] == "in").collect();
    out.len() == per_direction
        && inb.len() == per_direction
        && conns
            .iter()
            .all(|c| c["state"] == "up" && established(c).len() == 4)
}

fn iperf_bps(
    ns_server: &str,
    ns_client: &str,
    server_ip: &str,
    client_args: &[&str],
    port: u16,
) -> f64 {
    let p = port.to_string();
    run_ok(&mut netns(
        ns_server,
        &["iperf3", "-s", "-D", "-1", "-p", &p, "-B", server_ip],
    ));
    std::thread::sleep(Duration::from_millis(300));
    let mut args = vec!["iperf3", "-c", server_ip, "-p", &p, "--json"];
    args.extend_from_slice(client_args);
    let out = run_ok(&mut netns(ns_client, &args));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let end = &v["end"];
    let bps = end["sum_received"]["bits_per_second"]
        .as_f64()
        .or_else(|| end["sum"]["bits_per_second"].as_f64())
        .unwrap_or_else(|| panic!("no goodput in iperf3 output: {out}"));
    if let Some(lost) = end["sum"]["lost_percent"].as_f64() {
        eprintln!("  (UDP lost {lost:.2} %)");
        assert!(lost < 5.0, "UDP through the tunnel lost {lost} %");
    }
    bps
}

fn wait_up(ctl1: &Path, ctl2: &Path, per_direction: usize, logs: &dyn Fn()) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ok = ctl1.exists()
            && ctl2.exists()
            && all_subflows_up(&status(ctl1), per_direction)
            && all_subflows_up(&status(ctl2), per_direction);
        if ok {
            return;
        }
        if Instant::now() > deadline {
            logs();
            if ctl1.exists() && ctl2.exists() {
                eprintln!("{:#}\n{:#}", status(ctl1), status(ctl2));
            }
            panic!("tunnel connections did not come up with 4 subflows each");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// `config` with the path groups to the remote branch replaced by ids 0.. with `weights`, and
/// `connections_per_group` set.
fn with_groups(config: &Path, weights: &[u32], conns_per_group: u8, out: &Path) {
    let mut v: toml::Value = toml::from_str(&std::fs::read_to_string(config).unwrap()).unwrap();
    v.as_table_mut().unwrap().insert(
        "connections_per_group".into(),
        toml::Value::Integer(i64::from(conns_per_group)),
    );
    let groups: Vec<toml::Value> = weights
        .iter()
        .enumerate()
        .map(|(id, w)| {
            let mut t = toml::map::Map::new();
            t.insert("id".into(), toml::Value::Integer(id as i64));
            t.insert("weight".into(), toml::Value::Integer(i64::from(*w)));
            toml::Value::Table(t)
        })
        .collect();
    v["remote"][0]
        .as_table_mut()
        .unwrap()
        .insert("path_groups".into(), toml::Value::Array(groups));
    std::fs::write(out, toml::to_string(&v).unwrap()).unwrap();
}

/// Bytes gw1 sent per outbound Type II connection, by (path group, index).
fn type2_bytes_per_conn(s: &serde_json::Value) -> BTreeMap<(u64, u64), u64> {
    s["connections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["direction"] == "out" && c["class"] == "type2")
        .map(|c| {
            (
                (
                    c["path_group"].as_u64().unwrap(),
                    c["index"].as_u64().unwrap(),
                ),
                c["bytes_tx"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Bytes gw1 sent per path group (outbound connections, both classes).
fn bytes_per_group(s: &serde_json::Value) -> Vec<u64> {
    let mut v = vec![0u64; 16];
    for c in s["connections"].as_array().unwrap() {
        if c["direction"] == "out" {
            v[c["path_group"].as_u64().unwrap() as usize] += c["bytes_tx"].as_u64().unwrap();
        }
    }
    v
}

#[test]
fn tunnel_over_2x2_testbed() {
    require_root_and(&["ip", "iperf3", "ping", "bash"]);
    let tmp = tempfile::tempdir().unwrap();
    let root = repo_root();
    let example1 = root.join("examples/mmsg-branch1.toml");
    // The examples with their [tls] files replaced by a test CA's (TLS is the default).
    let pki = TestPki::new(&tmp.path().join("pki"), &[1, 2]);
    let (cfg1, cfg2) = (tmp.path().join("gw1.toml"), tmp.path().join("gw2.toml"));
    std::fs::write(&cfg1, example_with(1, &pki.table(1))).unwrap();
    std::fs::write(&cfg2, example_with(2, &pki.table(2))).unwrap();

    // (5) `mmsg check`: the examples pass, an unknown key fails with exit code 1 and is named.
    run_ok(
        Command::new(MMSG)
            .args(["check", "--config"])
            .arg(&example1),
    );
    let bad = tmp.path().join("bad.toml");
    let text = std::fs::read_to_string(&cfg1).unwrap();
    std::fs::write(&bad, format!("bogus_knob = 3\n{text}")).unwrap();
    let out = run(Command::new(MMSG).args(["check", "--config"]).arg(&bad));
    assert_eq!(
        out.status.code(),
        Some(1),
        "check must exit 1 on an unknown key"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bogus_knob"), "error must name the key: {err}");
    eprintln!("check rejects unknown key: {}", err.trim());

    let prefix = format!("m{}", std::process::id() % 100_000);
    let tb = Testbed::up(&prefix);
    let (gw1, gw2, h1, h2) = (tb.ns("gw1"), tb.ns("gw2"), tb.ns("h1"), tb.ns("h2"));
    let ctl1 = tmp.path().join("gw1.sock");
    let ctl2 = tmp.path().join("gw2.sock");

    // With `[ovs]` but no Open vSwitch answering, `mmsg run` refuses to start, says why, and
    // leaves the namespace as it was (the addresses stay on wan0/wan1).
    let addrs_before = run_ok(&mut netns(&gw1, &["ip", "-4", "-o", "addr", "show"]));
    let no_ovs = tmp.path().join("no-ovs.toml");
    std::fs::write(
        &no_ovs,
        format!(
            "{text}\n[ovs]\nbridge = \"br0\"\ndb = \"unix:{}\"\ncontroller = \"tcp:127.0.0.1:6653\"\n",
            tmp.path().join("no-such-ovsdb.sock").display()
        ),
    )
    .unwrap();
    let out = run(&mut netns(
        &gw1,
        &[
            "timeout",
            "30",
            MMSG,
            "run",
            "--config",
            &no_ovs.display().to_string(),
            "--control",
            &tmp.path().join("no-ovs.sock").display().to_string(),
        ],
    ));
    let err =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success() && out.status.code() != Some(124),
        "mmsg must refuse to start without OVS: {:?} {err}",
        out.status
    );
    assert!(
        err.contains("Open vSwitch is not answering"),
        "the refusal must say why: {err}"
    );
    assert_eq!(
        run_ok(&mut netns(&gw1, &["ip", "-4", "-o", "addr", "show"])),
        addrs_before,
        "a refused start must not change the addresses"
    );
    eprintln!(
        "without OVS: mmsg refuses to start: {}",
        err.lines()
            .find(|l| l.contains("Open vSwitch"))
            .unwrap_or("")
    );

    let p1 = start_mmsg(&gw1, &cfg1, &ctl1, tmp.path().join("gw1.log"));
    let p2 = start_mmsg(&gw2, &cfg2, &ctl2, tmp.path().join("gw2.log"));
    let logs = || {
        for p in [&p1, &p2] {
            eprintln!(
                "--- {} ---\n{}",
                p.log.display(),
                std::fs::read_to_string(&p.log).unwrap_or_default()
            );
        }
    };

    // Wait until all 8 connections per gateway (2 groups x 2 classes, both directions) are up
    // with their subflows.
    wait_up(&ctl1, &ctl2, 4, &logs);

    // (2) Exactly the 2 × 2 address pairs on every connection, on both gateways.
    let wan1 = ["198.18.10.2", "198.18.11.2"];
    let wan2 = ["198.18.20.2", "198.18.21.2"];
    for (ctl, own, peer) in [(&ctl1, wan1, wan2), (&ctl2, wan2, wan1)] {
        let s = status(ctl);
        let want: BTreeSet<(String, String)> = own
            .iter()
            .flat_map(|l| peer.iter().map(move |r| (l.to_string(), r.to_string())))
            .collect();
        for c in s["connections"].as_array().unwrap() {
            // Exactly 4 subflows in the list, all established, one per address pair.
            assert_eq!(c["subflows"].as_array().unwrap().len(), 4, "{c}");
            assert_eq!(established(c).len(), 4, "{c}");
            assert_eq!(pairs(c), want, "subflow pairs of {c}");
            assert_eq!(c["fallback"], false, "{c}");
        }
        assert_eq!(counter(&s, "mptcp_fallbacks"), 0);
        eprintln!(
            "{}: {} connections, 4 subflows each = 2 local x 2 remote WAN addresses",
            ctl.display(),
            s["connections"].as_array().unwrap().len()
        );
    }

    // (1) ping through the tunnel.
    let out = run(&mut netns(
        &h1,
        &["ping", "-c", "5", "-i", "0.2", "-W", "2", "198.19.2.10"],
    ));
    if !out.status.success() {
        logs();
        panic!(
            "ping h1 -> h2 failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    eprintln!(
        "{}",
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap_or("")
    );

    // Type I connections carry DSCP 46 on the wire (docs/ofc.md §8): a ping marked EF is Type I
    // (the examples' "realtime" rule), so its frames leave gw1 on a Type I socket. Capture outer
    // TCP packets with DSCP 46 on both uplinks of gw1 while it runs.
    let capture = netns(
        &gw1,
        &[
            "timeout",
            "6",
            "tcpdump",
            "-n",
            "-i",
            "any",
            "-c",
            "3",
            "tcp and (ip[1] & 0xfc) == 0xb8",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    run_ok(&mut netns(
        &h1,
        &[
            "ping",
            "-c",
            "5",
            "-i",
            "0.2",
            "-W",
            "2",
            "-Q",
            "184",
            "198.19.2.10",
        ],
    ));
    let marked = capture.wait_with_output().unwrap();
    let marked = String::from_utf8_lossy(&marked.stdout);
    assert!(
        marked.lines().count() >= 3,
        "no outer TCP packet with DSCP 46 left gw1 while Type I traffic ran: {marked}"
    );
    eprintln!(
        "Type I tunnel packets leave with DSCP 46, e.g. {}",
        marked.lines().next().unwrap_or("")
    );

    // (3) Best single path (1a -> 2a: 30 Mbit/s, the largest bottleneck of the topology), plain TCP
    // between the gateways' WAN addresses, then TCP through the tunnel, side by side.
    let single = iperf_bps(
        &gw2,
        &gw1,
        "198.18.20.2",
        &["-B", "198.18.10.2", "-t", "6", "-O", "1"],
        5301,
    );
    // Inner RTT while the bulk transfer runs (reported, not asserted: see docs/mmsg.md).
    let pinger = netns(&h1, &["ping", "-c", "40", "-i", "0.25", "198.19.2.10"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let tunnel = iperf_bps(&h2, &h1, "198.19.2.10", &["-t", "10", "-O", "3"], 5201);
    let loaded = pinger.wait_with_output().unwrap();
    eprintln!(
        "ping h1 -> h2 during the transfer: {}",
        String::from_utf8_lossy(&loaded.stdout)
            .lines()
            .last()
            .unwrap_or("")
    );
    let ratio = tunnel / single;
    eprintln!(
        "TCP goodput: best single path {:.1} Mbit/s, tunnel h1->h2 {:.1} Mbit/s, ratio {ratio:.2}",
        single / 1e6,
        tunnel / 1e6
    );
    assert!(
        ratio > 1.2,
        "tunnel TCP goodput {tunnel} is not above the best single path {single} (ratio {ratio:.2})"
    );

    // (1) UDP through the tunnel at 20 Mbit/s: delivered with < 5 % loss (asserted in iperf_bps).
    let udp = iperf_bps(
        &h2,
        &h1,
        "198.19.2.10",
        &["-u", "-b", "20M", "-t", "4"],
        5202,
    );
    eprintln!("UDP through the tunnel: {:.1} Mbit/s received", udp / 1e6);
    assert!(udp > 15e6, "UDP goodput {udp}");

    // (1) A 100 MB transfer h1 -> h2 arrives with the same sha256.
    let file = tmp.path().join("blob");
    run_ok(Command::new("bash").arg("-c").arg(format!(
        "head -c 100000000 /dev/urandom > {}",
        file.display()
    )));
    let want = run_ok(Command::new("sha256sum").arg(&file));
    let want = want.split_whitespace().next().unwrap().to_owned();
    let receiver = netns(
        &h2,
        &[
            "python3",
            "-c",
            "import socket,hashlib\n\
             s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
             s.bind(('198.19.2.10', 6000)); s.listen(1); s.settimeout(60)\n\
             c,_=s.accept(); c.settimeout(60); h=hashlib.sha256(); n=0\n\
             while True:\n    b=c.recv(1<<20)\n    if not b: break\n    h.update(b); n+=len(b)\n\
             print(h.hexdigest(), n)",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Wait until the receiver listens (python's start-up is slow on a loaded machine).
    let deadline = Instant::now() + Duration::from_secs(15);
    while !run_ok(&mut netns(&h2, &["ss", "-Hltn", "sport = :6000"])).contains("6000") {
        assert!(Instant::now() < deadline, "the receiver did not listen");
        std::thread::sleep(Duration::from_millis(100));
    }
    let started = Instant::now();
    run_ok(&mut netns(
        &h1,
        &[
            "bash",
            "-c",
            &format!("cat {} > /dev/tcp/198.19.2.10/6000", file.display()),
        ],
    ));
    let got = receiver.wait_with_output().unwrap();
    let secs = started.elapsed().as_secs_f64();
    let got = String::from_utf8_lossy(&got.stdout).into_owned();
    assert_eq!(
        got.split_whitespace().collect::<Vec<_>>(),
        vec![want.as_str(), "100000000"],
        "100 MB transfer: sha256 and length"
    );
    eprintln!(
        "100 MB h1 -> h2: sha256 matches, {secs:.1} s ({:.1} Mbit/s)",
        800.0 / secs
    );

    // (4) Junk and a wrong hello on gw2's MPA port 0x2000: closed, counted, nothing reaches TUN.
    // With TLS both fail the handshake (`tls_handshake_failed`); in clear mode they would fail
    // the hello (`hello_rejected`): the sum of both is asserted.
    // Let the iperf3 connections finish closing, so no tunnelled packet is in flight.
    std::thread::sleep(Duration::from_secs(2));
    let before = status(&ctl2);
    for payload in [
        r"GET / HTTP/1.0\r\n\r\n",
        // Valid magic and version, but addressed to branch 5.
        r"MMSH\x01\x01\x05\x00\x02\x00\x00\x00\x00\x00\x00\x14\x01\x02\x00\x00",
    ] {
        let script = format!(
            "exec 3<>/dev/tcp/198.18.20.2/8192 && printf '{payload}' >&3 && timeout 5 cat <&3 >/dev/null"
        );
        let out = run(&mut netns(&gw1, &["timeout", "8", "bash", "-c", &script]));
        assert!(
            out.status.success(),
            "gw2 did not close the junk connection: {:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::thread::sleep(Duration::from_millis(300));
    let after = status(&ctl2);
    let refused =
        |s: &serde_json::Value| counter(s, "hello_rejected") + counter(s, "tls_handshake_failed");
    let rejected = refused(&after) - refused(&before);
    assert_eq!(rejected, 2, "both junk connections are counted");
    assert_eq!(
        counter(&after, "tun_tx_packets"),
        counter(&before, "tun_tx_packets"),
        "nothing from the junk reached TUN"
    );
    eprintln!("junk and wrong hello: hello_rejected + tls_handshake_failed +{rejected}, tun_tx_packets unchanged");

    // (4) Malformed packets from TUN: written into mms0 on gw1 through a packet socket (the kernel
    // hands them to mmsg as if a LAN host had sent them). Dropped and counted, nothing reaches gw2.
    let before1 = status(&ctl1);
    let before2 = status(&ctl2);
    let inject = "import socket\n\
        s=socket.socket(socket.AF_PACKET, socket.SOCK_RAW); s.bind(('mms0', 0))\n\
        pkts=[b'\\x45\\x00\\x00', \n\
              bytes([0x45,0,0,40,0,0,0,0,64,6,0,0,198,19,1,10,198,19,2,10]), \n\
              bytes([0x4f,0,0,20]) + bytes(16), \n\
              bytes([0x70]) + bytes(39), \n\
              bytes([0x46,0,0,20,0,0,0,0,64,17,0,0,198,19,1,10,198,19,2,10])]\n\
        for p in pkts: s.send(p)\n\
        print(len(pkts))";
    let sent = run_ok(&mut netns(&gw1, &["python3", "-c", inject]));
    let sent: u64 = sent.trim().parse().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let after1 = status(&ctl1);
    let after2 = status(&ctl2);
    let malformed = counter(&after1, "drop_malformed") - counter(&before1, "drop_malformed");
    assert_eq!(
        malformed, sent,
        "every malformed packet from TUN is dropped and counted"
    );
    assert_eq!(
        counter(&after2, "tun_tx_packets"),
        counter(&before2, "tun_tx_packets"),
        "no malformed packet reached the other branch"
    );
    eprintln!("{sent} malformed packets written into mms0 on gw1: drop_malformed +{malformed}, gw2's TUN got none");

    // Uplink 1b cut for 4 s during a TCP transfer: the transfer goes on over 1a, the gap is measured.
    run_ok(&mut netns(
        &h2,
        &[
            "iperf3",
            "-s",
            "-D",
            "-1",
            "-p",
            "5203",
            "-B",
            "198.19.2.10",
        ],
    ));
    std::thread::sleep(Duration::from_millis(300));
    let client = netns(
        &h1,
        &[
            "iperf3",
            "-c",
            "198.19.2.10",
            "-p",
            "5203",
            "-t",
            "12",
            "-i",
            "0.5",
            "--json",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    run_ok(&mut xtask(&[
        "testbed", "link", "cut", "1b", "--prefix", &tb.prefix,
    ]));
    let cut_at = t0.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs(4));
    run_ok(&mut xtask(&[
        "testbed", "link", "restore", "1b", "--prefix", &tb.prefix,
    ]));
    let restored_at = t0.elapsed().as_secs_f64();
    let out = client.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the transfer did not survive the uplink cut: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let intervals: Vec<(f64, f64)> = v["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["sum"]["start"].as_f64().unwrap(),
                i["sum"]["bits_per_second"].as_f64().unwrap(),
            )
        })
        .collect();
    // The longest run of intervals with (almost) nothing delivered.
    let (mut gap, mut run_len) = (0.0f64, 0.0f64);
    for &(_, bps) in &intervals {
        if bps < 1e6 {
            run_len += 0.5;
            gap = gap.max(run_len);
        } else {
            run_len = 0.0;
        }
    }
    let during: Vec<f64> = intervals
        .iter()
        .filter(|(start, _)| *start >= cut_at && *start + 0.5 <= restored_at)
        .map(|&(_, bps)| bps)
        .collect();
    let during_avg = during.iter().sum::<f64>() / during.len().max(1) as f64;
    let during_max = during.iter().copied().fold(0.0f64, f64::max);
    eprintln!(
        "uplink 1b cut {cut_at:.1}-{restored_at:.1} s: longest gap {gap:.1} s, {:.1} Mbit/s on average during the cut",
        during_avg / 1e6
    );
    // Failover, not just recovery after the restore: the transfer resumed on uplink 1a while 1b
    // was still cut, so no stall lasted as long as the cut. (The gap itself is reported; it varies
    // between 0.5 and 2.5 s here, see docs/mmsg.md.)
    let cut_len = restored_at - cut_at;
    assert!(
        gap < cut_len,
        "a stall of {gap} s: the transfer waited for the restore ({cut_len:.1} s cut)"
    );
    assert!(
        during_max > 5e6,
        "nothing moved over uplink 1a while 1b was cut: {during:?}"
    );

    // The tunnel still works afterwards.
    run_ok(&mut netns(
        &h1,
        &["ping", "-c", "2", "-i", "0.2", "-W", "2", "198.19.2.10"],
    ));
    drop(p1);
    drop(p2);

    // 8 flows over 4 path groups with weights 4:2:1:1 (smooth WRR on new flows): 8 UDP flows of
    // 2 Mbit/s each, so the bytes per group show the flow split exactly (TCP fairness would blur it).
    // With `connections_per_group = 2`: two Type II connections per group (12 per direction),
    // and a group's new flows take them in turn.
    let weights = [4u32, 2, 1, 1];
    let wcfg1 = tmp.path().join("wrr1.toml");
    let wcfg2 = tmp.path().join("wrr2.toml");
    with_groups(&cfg1, &weights, 2, &wcfg1);
    with_groups(&cfg2, &weights, 2, &wcfg2);
    run_ok(Command::new(MMSG).args(["check", "--config"]).arg(&wcfg1));
    let _ = std::fs::remove_file(&ctl1);
    let _ = std::fs::remove_file(&ctl2);
    let p1 = start_mmsg(&gw1, &wcfg1, &ctl1, tmp.path().join("gw1-wrr.log"));
    let p2 = start_mmsg(&gw2, &wcfg2, &ctl2, tmp.path().join("gw2-wrr.log"));
    let logs = || {
        for p in [&p1, &p2] {
            eprintln!(
                "--- {} ---\n{}",
                p.log.display(),
                std::fs::read_to_string(&p.log).unwrap_or_default()
            );
        }
    };
    wait_up(&ctl1, &ctl2, 12, &logs);
    let before = bytes_per_group(&status(&ctl1));
    let conns_before = type2_bytes_per_conn(&status(&ctl1));
    iperf_bps(
        &h2,
        &h1,
        "198.19.2.10",
        &["-u", "-b", "2M", "-P", "8", "-t", "5"],
        5204,
    );
    // Let the once-per-second status refresh catch up with the last bytes.
    std::thread::sleep(Duration::from_millis(1500));
    let after = bytes_per_group(&status(&ctl1));
    let conns_after = type2_bytes_per_conn(&status(&ctl1));
    let sent: Vec<f64> = (0..4).map(|g| (after[g] - before[g]) as f64).collect();
    let total: f64 = sent.iter().sum();
    let wsum: f64 = weights.iter().map(|w| f64::from(*w)).sum();
    let shares: Vec<f64> = sent.iter().map(|b| b / total).collect();
    eprintln!("bytes per group (weights 4:2:1:1): {sent:?}, shares {shares:.3?}");
    for (g, share) in shares.iter().enumerate() {
        let want = f64::from(weights[g]) / wsum;
        assert!(
            (share - want).abs() <= 0.1 * want,
            "group {g}: share {share:.3}, weight share {want:.3} (all: {shares:?})"
        );
    }
    // Per connection: groups 0 (4 flows) and 1 (2 flows) split their flows evenly over their
    // two connections; groups 2 and 3 (1 flow each) carry it on one of them (the first, or the
    // second when iperf3's control connection came first to that group).
    let by_conn = |g: u64, i: u64| {
        (conns_after[&(g, i)] - conns_before.get(&(g, i)).copied().unwrap_or(0)) as f64
    };
    eprintln!(
        "bytes per Type II connection (group, index): {:?}",
        (0..4u64)
            .flat_map(|g| (0..2u64).map(move |i| (g, i)))
            .map(|(g, i)| ((g, i), by_conn(g, i)))
            .collect::<Vec<_>>()
    );
    for g in [0, 1] {
        let (a, b) = (by_conn(g, 0), by_conn(g, 1));
        assert!(
            (a - b).abs() <= 0.1 * (a + b) / 2.0,
            "group {g}: its flows were not split over its connections: {a} vs {b} bytes"
        );
    }
    for g in [2, 3] {
        let (a, b) = (by_conn(g, 0), by_conn(g, 1));
        assert!(
            a.min(b) < 0.01 * a.max(b),
            "group {g}: its one flow belongs on one connection: {a} vs {b} bytes"
        );
    }

    // Real aggregation: four equal bottlenecks of 10 Mbit/s, one per address pair. Plain TCP over
    // the best single path and one TCP flow through the tunnel, side by side in this run.
    let pairs = [("1a", "2a"), ("1a", "2b"), ("1b", "2a"), ("1b", "2b")];
    for (from, to) in pairs {
        run_ok(&mut xtask(&[
            "testbed",
            "pair",
            from,
            to,
            "--prefix",
            &tb.prefix,
            "--rate-mbit",
            "10",
            "--delay-ms",
            "2",
        ]));
    }
    std::thread::sleep(Duration::from_secs(1));
    let single = iperf_bps(
        &gw2,
        &gw1,
        "198.18.20.2",
        &["-B", "198.18.10.2", "-t", "6", "-O", "1"],
        5305,
    );
    let tunnel = iperf_bps(&h2, &h1, "198.19.2.10", &["-t", "8", "-O", "2"], 5205);
    let ratio = tunnel / single;
    eprintln!(
        "10:10:10:10 bottlenecks: single path {:.1} Mbit/s, one TCP flow through the tunnel {:.1} Mbit/s, ratio {ratio:.2}",
        single / 1e6,
        tunnel / 1e6
    );
    assert!(
        ratio > 1.5,
        "no real aggregation on 10:10:10:10: tunnel {tunnel}, best single path {single}"
    );
    drop(p1);
    drop(p2);
    drop(tb);
}
