//! `cargo xtask demo`: the README's main command, on the paper's 5-branch testbed.
//!
//! Brings up the whole system with [`crate::e2e::System`] (testbed with one Open vSwitch per
//! gateway, `ssc` with the paper's inventory and Table II, five `mmsg` that build their own
//! bridges), then sends traffic from the LAN host of branch 1 to the LAN host of branch 2:
//!
//! 1. ping through the tunnel;
//! 2. one TCP connection (one path group: its four member paths at once);
//! 3. four TCP connections at once (iperf3 `-P 4`); `mmsg` maps new flows round robin to path
//!    groups 1..4 (seed 000 §V-B), so every group carries one connection, and every group's four
//!    member paths (one direct, three through branches 3, 4 and 5) carry its subflows.
//!
//! It prints one row per member path: group, member, route (`1b>3b>3a>2a`: leave branch 1 by port
//! b, enter branch 3 on port b, leave it by port a, enter branch 2 on port a), and the member's
//! goodput as counted by `ssc` at the source switch (outer bytes of the forward source entry over
//! the measurement window), then the per-group sums and iperf3's own total. Everything is torn down
//! on exit, also on error.
//!
//! With `--keep` the system stays up after the table, with 4 × 5 Mbit/s of iperf3 traffic from h1
//! to h2, until Ctrl-C (SIGINT or SIGTERM): it prints the URL of `ssc`'s web dashboard and a
//! read-only token to log in with (docs/ssc.md "Web dashboard"), then tears down as usual.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::e2e::{self, System};
use crate::iperf::{self, Server};

/// Forward bytes per (group, member) of the pair 1 -> 2, from `ssc`'s statistics.
fn member_bytes(sys: &System) -> anyhow::Result<BTreeMap<(u8, u8), u64>> {
    Ok(sys
        .stats()?
        .members
        .iter()
        .filter(|m| m.source == 1 && m.destination == 2)
        .map(|m| ((m.group, m.member), m.traffic.forward_bytes))
        .collect())
}

/// Waits until `ssc` has polled the switches at least once more (stats interval 500 ms).
fn settle_stats() {
    std::thread::sleep(Duration::from_millis(1200));
}

/// The whole demo; always tears down.
pub fn run(root: &Path, prefix: &str, secs: u32, keep: bool) -> anyhow::Result<()> {
    let started = Instant::now();
    crate::deps::ensure()?;
    println!(
        "bringing up the paper's testbed (prefix {prefix}): 5 branches x 2 uplinks of 40 Mbit/s, \
         one Open vSwitch per gateway, ssc with Table II, five mmsg ..."
    );
    let sys = System::up(&e2e::Options::new(root, prefix))?;
    println!(
        "system up in {:.0} s (logs in {})",
        started.elapsed().as_secs_f64(),
        sys.log_dir.display()
    );
    print_tunnel_security(&sys);
    let result = traffic(&sys, secs).and_then(|()| if keep { keep_up(&sys) } else { Ok(()) });
    drop(sys);
    println!(
        "everything torn down; demo took {:.0} s",
        started.elapsed().as_secs_f64()
    );
    result
}

/// SIGINT and SIGTERM of this thread wait for [`wait_for_ctrl_c`] instead of ending the
/// process (children started later would inherit the mask: start them before).
fn block_stop_signals() {
    // SAFETY: libc calls on a local, initialised signal set; no Rust state is touched.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Waits for SIGINT or SIGTERM (blocked by [`block_stop_signals`]).
fn wait_for_ctrl_c() {
    // SAFETY: as in `block_stop_signals`; `sig` is a local the call writes.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        let mut sig = 0;
        libc::sigwait(&set, &mut sig);
    }
}

/// `--keep`: a read-only token, the dashboard's URL, light traffic, then Ctrl-C.
fn keep_up(sys: &System) -> anyhow::Result<()> {
    let kept = Kept::start(sys)?;
    // From here Ctrl-C reaches `wait_for_ctrl_c` instead of ending xtask before the teardown
    // (the children started before keep the default: the teardown handles them either way).
    block_stop_signals();
    println!("Ctrl-C tears everything down.");
    wait_for_ctrl_c();
    println!("tearing down ...");
    kept.stop();
    Ok(())
}

/// What `--keep` adds to the running system: a read-only token for the dashboard and 4 × 5
/// Mbit/s of iperf3 from h1 to h2 (port 5202). Public so that a test can run it on its own
/// system without waiting for Ctrl-C (`xtask/tests/dashboard_e2e.rs`).
#[derive(Debug)]
pub struct Kept {
    /// The read-only token printed for the dashboard.
    pub token: String,
    server: Server,
    client: std::process::Child,
}

impl Kept {
    /// Creates the token, starts the traffic and prints the dashboard's URL and the token.
    pub fn start(sys: &System) -> anyhow::Result<Kept> {
        let created = sys
            .api()
            .call(
                "POST",
                "/api/v1/tokens",
                Some(&serde_json::json!({"name": "demo-dashboard", "role": "read-only", "ttl_s": 86_400})),
            )
            .context("create a read-only token for the dashboard")?
            .unwrap_or_default();
        let token = created
            .get("token")
            .and_then(serde_json::Value::as_str)
            .context("no token in the answer of POST /api/v1/tokens")?
            .to_owned();
        let (h1, h2) = (sys.ns_host(1), sys.ns_host(2));
        let dst = sys.host_addr(2).to_string();
        let server = Server::start(&h2, 5202, None)?;
        let client = std::process::Command::new("ip")
            .args([
                "netns", "exec", &h1, "iperf3", "-c", &dst, "-p", "5202", "-P", "4", "-b", "5M",
                "-t", "86400",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .context("start iperf3 in h1")?;
        println!();
        println!(
            "the system stays up with 4 x 5 Mbit/s of iperf3 from h1 to h2; the web dashboard:"
        );
        println!("  {}/ui/", sys.api_base);
        println!("  log in with the read-only token {token}");
        println!(
            "  (REST API and /metrics on the same listener; logs in {})",
            sys.log_dir.display()
        );
        Ok(Kept {
            token,
            server,
            client,
        })
    }

    /// The iperf3 client's PID (stopped by [`Kept::stop`]).
    pub fn client_pid(&self) -> u32 {
        self.client.id()
    }

    /// Stops the traffic (the client by PID, then the server); the system stays to its owner.
    pub fn stop(mut self) {
        e2e::stop_child(&mut self.client, Duration::from_secs(2));
        self.server.wait(Duration::from_secs(1));
    }
}

/// One line on how the tunnels of branch 1 are protected, from its `mmsg status`.
fn print_tunnel_security(sys: &System) {
    let Ok(st) = sys.mmsg_status(1) else {
        return;
    };
    let n = |k: &str| {
        st.get("counters")
            .and_then(|c| c.get(k))
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0)
    };
    match st.get("tls").and_then(|t| t.get("serial")) {
        Some(serial) => println!(
            "tunnels: TLS 1.3 with mutual certificate authentication (a CA made for the run); \
             gw1 (certificate serial {serial}): {} outbound and {} inbound handshakes",
            n("tls_handshakes_out"),
            n("tls_handshakes_in")
        ),
        None => println!("tunnels: in clear text (no [tls] in the mmsg configs)"),
    }
}

fn traffic(sys: &System, secs: u32) -> anyhow::Result<()> {
    let (h1, h2) = (sys.ns_host(1), sys.ns_host(2));
    let dst = sys.host_addr(2).to_string();
    let ping = crate::sh::run(
        "ip",
        &[
            "netns", "exec", &h1, "ping", "-c", "5", "-i", "0.2", "-W", "2", &dst,
        ],
    )
    .context("ping h1 -> h2 through the tunnel")?;
    if let Some(rtt) = ping.lines().last() {
        println!("ping {} -> {dst}: {rtt}", sys.host_addr(1));
    }

    let t = secs.to_string();
    println!(
        "iperf3: one TCP connection from {} to {dst} for {secs} s (one path group, its 4 member paths) ...",
        sys.host_addr(1)
    );
    let server = Server::start(&h2, 5200, None)?;
    let v = iperf::client(&h1, &["-c", &dst, "-p", "5200", "-t", &t, "-O", "1"])?;
    server.wait(Duration::from_secs(2));
    let one = iperf::tcp_received_mbps(&v).context("iperf3 reported no received rate")?;
    println!(
        "one TCP flow: {one:.1} Mbit/s = {:.2}x one 40 Mbit/s uplink",
        one / 40.0
    );

    println!(
        "iperf3: 4 TCP connections from {} to {dst} for {secs} s, round robin over path groups 1..4 ...",
        sys.host_addr(1)
    );
    settle_stats();
    let before = member_bytes(sys)?;
    let server = Server::start(&h2, 5201, None)?;
    let t0 = Instant::now();
    let v = iperf::client(&h1, &["-c", &dst, "-p", "5201", "-P", "4", "-t", &t])?;
    // The client's whole run (connect, transfer, final exchange): no byte crosses outside it.
    let window = t0.elapsed().as_secs_f64();
    server.wait(Duration::from_secs(2));
    settle_stats();
    let after = member_bytes(sys)?;
    let total = iperf::tcp_received_mbps(&v).context("iperf3 reported no received rate")?;

    println!();
    println!(
        "{:<6} {:<7} {:<14} {:>14}",
        "group", "member", "route", "goodput Mbit/s"
    );
    let mut per_group: BTreeMap<u8, f64> = BTreeMap::new();
    for ((g, s), bytes) in &after {
        let delta = bytes.saturating_sub(before.get(&(*g, *s)).copied().unwrap_or(0));
        let mbps = delta as f64 * 8.0 / window / 1e6;
        *per_group.entry(*g).or_insert(0.0) += mbps;
        let route = sys.routes.get(&(*g, *s)).map_or("?", String::as_str);
        println!("{g:<6} {s:<7} {route:<14} {mbps:>14.1}");
    }
    println!();
    for (g, mbps) in &per_group {
        println!("path group {g}: {mbps:.1} Mbit/s");
    }
    println!(
        "all groups (outer bytes at the source switch over the {window:.1} s of the iperf3 run): {:.1} Mbit/s",
        per_group.values().sum::<f64>()
    );
    println!(
        "iperf3 goodput h1 -> h2, 4 TCP connections: {total:.1} Mbit/s \
         (branch 1 has 2 x 40 Mbit/s of uplinks)"
    );
    let idle: Vec<u8> = (1..=4u8)
        .filter(|g| per_group.get(g).copied().unwrap_or(0.0) < 0.1)
        .collect();
    if !idle.is_empty() {
        bail!("path groups {idle:?} carried no traffic");
    }
    Ok(())
}
