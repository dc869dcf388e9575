//! The whole MMS system on the paper's testbed (docs/e2e.md): five gateways whose `mmsg` builds
//! its own Open vSwitch bridge from `[ovs]`, one `ssc` programming the five switches with the
//! paper's inventory and Table II, LAN host to LAN host traffic through IP over MPTCP whose
//! subflows are swapped onto the member paths of Table II. The gateways run in the default
//! controller mode: their configs name no remotes; `ssc` sends them over the gateway channel.
//!
//! Needs root, iproute2, iperf3 and Open vSwitch 3.1; it FAILS without them, it never skips.
//! Everything (mmsg, ssc, testbed) is torn down by `xtask::e2e::System`'s `Drop`, also on panic.
//! Figures are printed on lines starting with `MEASURE` (`-- --nocapture`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use common::ns_run;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use xtask::e2e::{self, System};
use xtask::iperf::{self, Server};

/// Packets of the transit entries of gateway `b` (cookies whose SDC description says `transit`),
/// counted from `ovs-ofctl dump-flows` on the switch itself.
fn transit_packets(sys: &System, b: u8, transit: &BTreeMap<u8, Vec<u64>>) -> u64 {
    let dump = sys.flow_packets(b).unwrap();
    transit[&b]
        .iter()
        .map(|c| dump.get(c).copied().unwrap_or(0))
        .sum()
}

/// Forward bytes per member (group, member) of 1 → 2 from ssc's SDC.
fn member_bytes(sys: &System) -> BTreeMap<(u8, u8), u64> {
    sys.stats()
        .unwrap()
        .members
        .iter()
        .filter(|m| m.source == 1 && m.destination == 2)
        .map(|m| ((m.group, m.member), m.traffic.forward_bytes))
        .collect()
}

/// Waits for an SDC sample taken after now (so counters include the traffic just sent).
fn fresh_stats() {
    std::thread::sleep(Duration::from_millis(1200));
}

fn diff(a: &BTreeMap<(u8, u8), u64>, b: &BTreeMap<(u8, u8), u64>) -> BTreeMap<(u8, u8), u64> {
    b.iter()
        .map(|(k, v)| (*k, v.saturating_sub(a.get(k).copied().unwrap_or(0))))
        .collect()
}

#[test]
fn paper_system_end_to_end() {
    common::require_tools(&[
        "ip",
        "iperf3",
        "ping",
        "ovs-vswitchd",
        "ovs-vsctl",
        "ovs-ofctl",
    ]);
    let t0 = Instant::now();
    let prefix = format!("e{}", std::process::id() % 10_000_000);
    let opts = common::e2e_options(&prefix);
    let sys = System::up(&opts).unwrap();
    eprintln!(
        "MEASURE system up (testbed, builds, ssc, import, 5 mmsg, all 2x2 subflows): {:.1} s; logs in {}",
        t0.elapsed().as_secs_f64(),
        sys.log_dir.display()
    );

    // mmsg built the bridges as docs/ofc.md §9 wants, and ssc programmed them.
    for b in e2e::BRANCHES {
        let ns = sys.ns_gw(b);
        let addr = ns_run(&ns, &["ip", "-4", "-o", "addr", "show", "dev", "mpa0"]);
        assert!(
            addr.contains(&format!("198.18.{}.2/24", 10 * b)),
            "gw{b} mpa0: {addr}"
        );
        let wan = ns_run(&ns, &["ip", "-4", "-o", "addr", "show", "dev", "wan0"]);
        assert!(wan.trim().is_empty(), "gw{b} wan0 still has {wan}");
        let link = ns_run(&ns, &["ip", "-o", "link", "show", "dev", "wan1"]);
        assert!(link.contains("NOARP"), "gw{b} wan1 answers ARP: {link}");
        let rt = ns_run(&ns, &["ip", "-4", "route", "show", "table", "101"]);
        assert!(rt.contains("dev mpa1"), "gw{b} table 101: {rt}");
    }
    let stats = sys.stats().unwrap();
    for b in e2e::BRANCHES {
        let bs = stats.branches.iter().find(|x| x.branch == b).unwrap();
        assert!(bs.connected, "gw{b} not connected to ssc");
        assert_eq!(bs.datapath_id, format!("{b:#018x}"));
    }
    // Which cookies are transit entries, per transit branch (the SDC describes every cookie).
    let transit: BTreeMap<u8, Vec<u64>> = [3u8, 4, 5]
        .into_iter()
        .map(|b| {
            let bs = stats.branches.iter().find(|x| x.branch == b).unwrap();
            let cookies: Vec<u64> = bs
                .flows
                .iter()
                .filter(|f| f.what.contains("transit"))
                .map(|f| u64::from_str_radix(f.cookie.trim_start_matches("0x"), 16).unwrap())
                .collect();
            assert!(!cookies.is_empty(), "gw{b} has no transit entries");
            (b, cookies)
        })
        .collect();

    let (h1, h2) = (sys.ns_host(1), sys.ns_host(2));
    let dst = sys.host_addr(2).to_string();

    // (1) ping h1 -> h2.
    let ping = ns_run(&h1, &["ping", "-c", "5", "-i", "0.2", "-W", "2", &dst]);
    assert!(ping.contains(" 0% packet loss"), "{ping}");
    let rtt = ping.lines().last().unwrap_or_default().to_owned();
    eprintln!("MEASURE ping h1 -> h2: {rtt}");

    let transit_before: BTreeMap<u8, u64> = [3u8, 4, 5]
        .into_iter()
        .map(|b| (b, transit_packets(&sys, b, &transit)))
        .collect();
    let members_before = member_bytes(&sys);
    let gw1_before = e2e::group_bytes_tx(&sys.mmsg_status(1).unwrap(), 2);

    // (2) one TCP flow h1 -> h2.
    let server = Server::start(&h2, 5201, None).unwrap();
    let v = iperf::client(&h1, &["-c", &dst, "-p", "5201", "-t", "8", "-O", "2"]).unwrap();
    server.wait(Duration::from_secs(2));
    let tcp = iperf::tcp_received_mbps(&v).unwrap();
    eprintln!("MEASURE TCP h1 -> h2, one flow, 8 s: {tcp:.1} Mbit/s");

    // (3) UDP h1 -> h2, offered 30 Mbit/s.
    let server = Server::start(&h2, 5202, None).unwrap();
    let u = iperf::client(
        &h1,
        &["-c", &dst, "-p", "5202", "-u", "-b", "30M", "-t", "5"],
    )
    .unwrap();
    server.wait(Duration::from_secs(2));
    let udp_mbps = u["end"]["sum"]["bits_per_second"].as_f64().unwrap() / 1e6;
    let udp_loss = u["end"]["sum"]["lost_percent"].as_f64().unwrap();
    eprintln!(
        "MEASURE UDP h1 -> h2, offered 30 Mbit/s, 5 s: {udp_mbps:.1} Mbit/s, {udp_loss:.2} % lost"
    );

    // Transit switches 3, 4, 5 forwarded member-path packets (their own OVS counters).
    fresh_stats();
    for b in [3u8, 4, 5] {
        let grew = transit_packets(&sys, b, &transit) - transit_before[&b];
        eprintln!("MEASURE gw{b} transit entries: +{grew} packets");
        assert!(
            grew > 100,
            "gw{b}: transit entries carried only {grew} packets"
        );
    }
    // The groups the single flows used: every member of them carried bytes (ssc's SDC).
    let gw1_after = e2e::group_bytes_tx(&sys.mmsg_status(1).unwrap(), 2);
    let used: Vec<u8> = gw1_after
        .iter()
        .filter(|(g, bytes)| **bytes > gw1_before.get(g).copied().unwrap_or(0) + 1_000_000)
        .map(|(g, _)| *g)
        .collect();
    assert!(
        !used.is_empty(),
        "no group carried the TCP/UDP tests: {gw1_after:?}"
    );
    let members = diff(&members_before, &member_bytes(&sys));
    for g in &used {
        for s in 1..=4u8 {
            let bytes = members.get(&(*g, s)).copied().unwrap_or(0);
            eprintln!(
                "MEASURE single flows: group {g} member {s} ({}): {bytes} bytes",
                sys.routes[&(*g, s)]
            );
            assert!(bytes > 10_000, "group {g} member {s} carried {bytes} bytes");
        }
    }

    // (4) four TCP connections: round robin puts one on each of groups 1..4.
    let gw1_before = e2e::group_bytes_tx(&sys.mmsg_status(1).unwrap(), 2);
    let members_before = member_bytes(&sys);
    let server = Server::start(&h2, 5203, None).unwrap();
    let secs = 10.0;
    let t = Instant::now();
    let p4 = iperf::client(
        &h1,
        &["-c", &dst, "-p", "5203", "-P", "4", "-t", "10", "-O", "1"],
    )
    .unwrap();
    server.wait(Duration::from_secs(2));
    let elapsed = t.elapsed().as_secs_f64().max(secs);
    let total = iperf::tcp_received_mbps(&p4).unwrap();
    let streams: Vec<f64> = p4["end"]["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["receiver"]["bits_per_second"].as_f64().unwrap_or(0.0) / 1e6)
        .collect();
    eprintln!("MEASURE TCP h1 -> h2, 4 flows: {total:.1} Mbit/s total, per stream {streams:.1?}");
    assert_eq!(streams.len(), 4, "{p4}");
    for (i, s) in streams.iter().enumerate() {
        assert!(*s > 1.0, "stream {i} did not progress: {s} Mbit/s");
    }
    fresh_stats();
    let gw1_after = e2e::group_bytes_tx(&sys.mmsg_status(1).unwrap(), 2);
    for g in 1..=4u8 {
        let d = gw1_after.get(&g).copied().unwrap_or(0) - gw1_before.get(&g).copied().unwrap_or(0);
        eprintln!("MEASURE 4 flows: gw1 group {g} sent {d} bytes (mmsg status)");
        assert!(
            d > 1_000_000,
            "group {g} carried only {d} bytes: {gw1_after:?}"
        );
    }
    let members = diff(&members_before, &member_bytes(&sys));
    println!("group  member  route           goodput Mbit/s (ssc SDC, forward bytes)");
    for ((g, s), route) in &sys.routes {
        let bytes = members.get(&(*g, *s)).copied().unwrap_or(0);
        let mbps = bytes as f64 * 8.0 / elapsed / 1e6;
        println!("{g:>5}  {s:>6}  {route:<14}  {mbps:>8.2}");
        assert!(
            bytes > 10_000,
            "group {g} member {s} ({route}) carried {bytes} bytes"
        );
    }
    let per_stream_min = streams.iter().copied().fold(f64::INFINITY, f64::min);

    // Goodput (docs/e2e.md): branch 1 has two 40 Mbit/s ports, so one TCP flow above 40 Mbit/s
    // proves that the members of its path group carry it in parallel (measured 74); the same for
    // the four flows together; 30 Mbit/s of UDP fits one group and arrives nearly loss-free.
    assert!(
        tcp > 40.0,
        "one TCP flow: {tcp:.1} Mbit/s, not above one 40 Mbit/s port"
    );
    assert!(
        udp_mbps > 27.0 && udp_loss < 5.0,
        "UDP: {udp_mbps:.1} Mbit/s, {udp_loss} % lost"
    );
    assert!(
        total > 40.0 && per_stream_min > 1.0,
        "4 flows: {total:.1} Mbit/s"
    );

    // (5) On SIGTERM mmsg keeps its OVS bridge, flows and addresses for the next start
    // (docs/mmsg.md "Restart"); `mmsg down` then undoes the set-up: gateway 5 gets its WAN
    // addresses back on wan0/wan1 with ARP on, its routes via wan{k}, and its bridge is gone.
    let mut sys = sys;
    sys.stop_mmsg(5).unwrap();
    let ns5 = sys.ns_gw(5);
    let db = format!(
        "--db=unix:{}",
        e2e::ovs_dir(&sys.prefix, 5).join("db.sock").display()
    );
    let kept = ns_run(&ns5, &["ovs-vsctl", &db, "list-br"]);
    assert_eq!(kept.trim(), "br0", "gw5 bridge after SIGTERM: {kept}");
    let mpa0 = ns_run(&ns5, &["ip", "-4", "-o", "addr", "show", "dev", "mpa0"]);
    assert!(
        mpa0.contains("198.18.50.2/24"),
        "gw5 mpa0 after SIGTERM: {mpa0}"
    );
    let config = sys.log_dir.join("mmsg-gw5.toml");
    let mmsg_bin = sys.mmsg.display().to_string();
    ns_run(
        &ns5,
        &[&mmsg_bin, "down", "--config", &config.display().to_string()],
    );
    for k in 0..2u8 {
        let wan = format!("wan{k}");
        let addr = ns_run(&ns5, &["ip", "-4", "-o", "addr", "show", "dev", &wan]);
        assert!(
            addr.contains(&format!("198.18.{}.2/24", 50 + k)),
            "gw5 {wan}: {addr}"
        );
        let link = ns_run(&ns5, &["ip", "-o", "link", "show", "dev", &wan]);
        assert!(!link.contains("NOARP"), "gw5 {wan} still arp off: {link}");
        let table = format!("{}", 100 + k);
        let rt = ns_run(&ns5, &["ip", "-4", "route", "show", "table", &table]);
        assert!(
            rt.contains(&format!("dev {wan}")),
            "gw5 table {table}: {rt}"
        );
    }
    let main = ns_run(&ns5, &["ip", "-4", "route", "show", "default"]);
    assert!(main.contains("dev wan0"), "gw5 main default: {main}");
    let br = ns_run(&ns5, &["ovs-vsctl", &db, "list-br"]);
    assert!(br.trim().is_empty(), "gw5 bridges left: {br}");
    eprintln!("MEASURE whole test: {:.1} s", t0.elapsed().as_secs_f64());
    drop(sys);
}

/// More than 15 branches (issue #20): 17 gateways (each with its own Open vSwitch and `mmsg`)
/// under the extended port plan `16384-32767`; `ssc` allocates every member path's outer port
/// code from that range. Hubs 1, 2, 16 and 17 form a full mesh of tunnels whose only member path
/// per ordered pair hairpins through a transit branch (3..=15), so a ping between two hubs can
/// only cross that transit: it must come back, and the transit's swap entries must count it.
/// The tunnels run TLS (one CA for the run, which `ssc` runs too): every hub's connection was a
/// TLS handshake, and all 17 gateways take `ssc`'s CRL.
#[test]
fn seventeen_branches_with_the_extended_port_plan() {
    common::require_tools(&[
        "ip",
        "ping",
        "ovs-vswitchd",
        "ovsdb-server",
        "ovs-vsctl",
        "ovs-ofctl",
    ]);
    let t = Instant::now();
    let opts = xtask::scale::Options {
        root: common::root(),
        prefix: format!("scx{}", std::process::id() % 100_000),
        branches: 17,
        hubs: 4,
        xtask: Some(std::path::PathBuf::from(env!("CARGO_BIN_EXE_xtask"))),
        up_timeout: Duration::from_secs(90),
        tls: true,
    };
    let sys = xtask::scale::System::up(&opts).unwrap();
    println!(
        "MEASURE scale17 up in {:.1} s: push {:.1} ms, tunnels up {:.1} s after the push",
        t.elapsed().as_secs_f64(),
        sys.push_ms,
        sys.all_up_s
    );
    assert_eq!(
        sys.push_failed_members, 0,
        "the group push left members out"
    );
    assert_eq!(sys.hubs, vec![1, 2, 16, 17]);
    // ssc shows the extended plan: listen port first + G, codes from the rest of the range.
    let g = sys.api().get("/api/v1/path-groups/16/17").unwrap();
    assert_eq!(g[0]["listen_port"], "0x4000", "{g}");
    let code = u16::from_str_radix(
        g[0]["members"][0]["code"]
            .as_str()
            .unwrap()
            .trim_start_matches("0x"),
        16,
    )
    .unwrap();
    assert!((16400..=32767).contains(&code), "{g}");
    assert_eq!(
        sys.tunnels().unwrap(),
        4 * 3 * 2,
        "2 classes per ordered hub pair"
    );
    // Pings between hubs, both ids above 15 among them: each crosses its pair's transit.
    for (a, b) in [(17, 16), (1, 17), (16, 2)] {
        let before = sys.transit_packets(a, b).unwrap();
        assert!(
            sys.ping(a, b),
            "ping {a} -> {b} (through {})",
            sys.transit[&(a, b)]
        );
        // OVS folds datapath counters into its rules every ~0.5 s: poll a few seconds.
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut after = sys.transit_packets(a, b).unwrap();
        while after < before + 3 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(250));
            after = sys.transit_packets(a, b).unwrap();
        }
        println!(
            "MEASURE scale17 ping {a} -> {b} via {}: transit entries counted {} packets",
            sys.transit[&(a, b)],
            after - before
        );
        assert!(after >= before + 3, "{a} -> {b}: {before} -> {after}");
    }
    // TLS: a client handshake per tunnel connection (more if one reconnected), and ssc's CRL
    // (number >= 1) on every gateway; it is pushed when the gateway channel connects.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut handshakes, mut crl) = sys.tls_state().unwrap();
    while crl < 17 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(250));
        (handshakes, crl) = sys.tls_state().unwrap();
    }
    println!("MEASURE scale17 TLS: {handshakes} client handshakes, {crl} gateways run ssc's CRL");
    assert!(handshakes >= 4 * 3 * 2, "{handshakes} TLS handshakes");
    assert_eq!(crl, 17, "gateways running ssc's CRL");
    let (flows, codes) = sys.flows_and_codes().unwrap();
    assert_eq!(codes, 12);
    assert_eq!(flows, 17 * 2 + 12 * 8);
    drop(sys);
    println!(
        "MEASURE scale17 test took {:.1} s",
        t.elapsed().as_secs_f64()
    );
}
