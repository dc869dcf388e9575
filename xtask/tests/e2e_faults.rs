//! Faults in the whole MMS system (docs/e2e.md §5): the paper system of `xtask::e2e::System` in
//! its default controller mode (every `mmsg` takes its remotes, path groups and weights from `ssc`
//! over the gateway channel), with one long TCP transfer h1 → h2 (iperf3, 0.5 s intervals) running
//! through each fault, one fault after the other with recovery in between:
//!
//! (a) `ssc` restarted (same database, same sockets);
//! (b) `ovs-vswitchd` of transit branch 3 restarted (by the PID in its pidfile);
//! (c) uplink 1a of branch 1 cut for 4 s, then restored;
//! (d) `mmsg` of branch 2 restarted.
//!
//! For each it prints the gap: the longest run of 0.5 s intervals in which the receiver got
//! (almost) nothing. It asserts that the end-to-end TCP connection survives (a)–(c) (iperf3
//! exits 0 and data arrives after the fault), that after (a) every gateway re-registered and
//! acked the new config version (`GET /api/v1/gateways`), that after (b) gateway 3's table is
//! back (ssc reconciles), that after (c) every tunnel is back with all its subflows, and that
//! after (d) traffic flows again on a new connection.
//!
//! Needs root, iproute2, iperf3 and Open vSwitch 3.1; it FAILS without them, it never skips.
//! Everything is torn down by `System`'s `Drop`, also on panic. Figures are printed on lines
//! starting with `MEASURE` (`-- --nocapture`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use xtask::e2e::{self, System};
use xtask::iperf::{self, Server};

/// Length of each transfer.
const TRANSFER_S: u32 = 14;
/// When the fault starts, after the transfer started.
const FAULT_AT: Duration = Duration::from_secs(3);
/// An interval below this receiver rate counts as "nothing arrived" (the flow runs at ~70).
const ZERO_MBPS: f64 = 1.0;

fn wait_until<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) if Instant::now() > deadline => panic!("{what}: not within {timeout:?}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// What one transfer through a fault showed.
#[derive(Debug)]
struct Transfer {
    /// iperf3 client result (`Err`: it failed, e.g. the connection broke).
    client: Result<Value, String>,
    /// Receiver intervals: (start s, end s, Mbit/s).
    intervals: Vec<(f64, f64, f64)>,
}

impl Transfer {
    /// The longest run of intervals below [`ZERO_MBPS`]: (length s, start s).
    fn gap(&self) -> (f64, f64) {
        let mut best = (0.0, 0.0);
        let mut run: Option<f64> = None;
        for &(start, end, mbps) in &self.intervals {
            if mbps < ZERO_MBPS {
                let from = *run.get_or_insert(start);
                if end - from > best.0 {
                    best = (end - from, from);
                }
            } else {
                run = None;
            }
        }
        best
    }

    /// Seconds (from the fault on) in which the receiver got less than half the rate it had
    /// before the fault (mean of the intervals from 1 s to the fault).
    fn degraded(&self) -> f64 {
        let fault = FAULT_AT.as_secs_f64();
        let before: Vec<f64> = self
            .intervals
            .iter()
            .filter(|(s, _, _)| *s >= 1.0 && *s < fault)
            .map(|(_, _, m)| *m)
            .collect();
        if before.is_empty() {
            return 0.0;
        }
        let normal = before.iter().sum::<f64>() / before.len() as f64;
        self.intervals
            .iter()
            .filter(|(s, _, m)| *s >= fault && *m < normal / 2.0)
            .fold(0.0, |acc, (s, e, _)| acc + (e - s))
    }

    /// Mbit/s received from `from_s` on.
    fn mbps_after(&self, from_s: f64) -> f64 {
        let v: Vec<f64> = self
            .intervals
            .iter()
            .filter(|(s, _, _)| *s >= from_s)
            .map(|(_, _, m)| *m)
            .collect();
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    }

    fn print(&self, name: &str) {
        let (gap, at) = self.gap();
        let at = if gap > 0.0 {
            format!(" from t = {at:.1} s")
        } else {
            String::new()
        };
        let rates: Vec<String> = self
            .intervals
            .iter()
            .map(|(_, _, m)| format!("{m:.0}"))
            .collect();
        let total = self
            .client
            .as_ref()
            .ok()
            .and_then(iperf::tcp_received_mbps)
            .map_or("failed".to_owned(), |m| format!("{m:.1} Mbit/s"));
        eprintln!(
            "MEASURE fault {name}: gap {gap:.1} s{at}, below half rate {:.1} s, \
             transfer {total}; receiver Mbit/s per 0.5 s (fault at t = {:.0} s): [{}]",
            self.degraded(),
            FAULT_AT.as_secs_f64(),
            rates.join(" ")
        );
    }
}

/// Runs one TCP transfer h1 → h2 for [`TRANSFER_S`] s on `port`; `fault` runs [`FAULT_AT`]
/// after the start (while the transfer runs) and returns when the fault is over.
fn transfer(sys: &mut System, port: u16, fault: impl FnOnce(&mut System)) -> Transfer {
    let (h1, h2) = (sys.ns_host(1), sys.ns_host(2));
    let dst = sys.host_addr(2).to_string();
    let json = sys.log_dir.join(format!("iperf-server-{port}.json"));
    let server = common::json_log_server(&h2, port, &json, &["-i", "0.5"]);
    let secs = TRANSFER_S.to_string();
    let port_s = port.to_string();
    let client = std::thread::spawn(move || {
        iperf::client(
            &h1,
            &[
                "-c",
                &dst,
                "-p",
                &port_s,
                "-t",
                &secs,
                "-i",
                "0.5",
                "--connect-timeout",
                "3000",
            ],
        )
        .map_err(|e| format!("{e:#}"))
    });
    std::thread::sleep(FAULT_AT);
    fault(sys);
    let client = client.join().unwrap();
    // The one-off server exits after writing its JSON log (dropped = stopped if it did not).
    server.wait(Duration::from_secs(20));
    let intervals = read_intervals(&json);
    Transfer { client, intervals }
}

/// The receiver's intervals from the server's JSON log.
fn read_intervals(path: &Path) -> Vec<(f64, f64, f64)> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let Ok(v) = serde_json::from_str::<Value>(&text) else {
        return Vec::new();
    };
    v["intervals"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| {
            let s = &i["sum"];
            Some((
                s["start"].as_f64()?,
                s["end"].as_f64()?,
                s["bits_per_second"].as_f64()? / 1e6,
            ))
        })
        .collect()
}

/// Asserts the connection survived the fault: iperf3 exited 0 and data kept arriving after it.
fn assert_survived(t: &Transfer, name: &str, fault_over_s: f64) {
    let v = t
        .client
        .as_ref()
        .unwrap_or_else(|e| panic!("fault {name}: the TCP connection did not survive: {e}"));
    let total = iperf::tcp_received_mbps(v).unwrap_or(0.0);
    assert!(
        total > 5.0,
        "fault {name}: only {total:.1} Mbit/s on average"
    );
    let after = t.mbps_after(fault_over_s + 2.0);
    assert!(
        after > 5.0,
        "fault {name}: {after:.1} Mbit/s after the fault: {:?}",
        t.intervals
    );
}

/// Cookies of gateway `b`'s flow table.
fn cookies(sys: &System, b: u8) -> BTreeSet<u64> {
    sys.flow_packets(b)
        .map(|m| m.into_keys().collect())
        .unwrap_or_default()
}

/// Every gateway connected to `ssc` with its current config version acked, newer than `after`.
fn gateways_synced(sys: &System, after: u64) -> Result<u64, String> {
    let g = sys.gateways_json().map_err(|e| format!("{e:#}"))?;
    let list = g["gateways"].as_array().ok_or_else(|| g.to_string())?;
    let ok = list.len() == e2e::BRANCHES.len()
        && list.iter().all(|x| {
            x["connected"] == true
                && x["config_version"].as_u64().unwrap_or(0) > after
                && x["config_version_acked"] == x["config_version"]
        });
    if ok {
        Ok(list
            .iter()
            .filter_map(|x| x["config_version"].as_u64())
            .min()
            .unwrap_or(0))
    } else {
        Err(g.to_string())
    }
}

fn ns_run(ns: &str, cmd: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(cmd)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn paper_system_survives_faults() {
    common::require_tools(&["ip", "iperf3", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl"]);
    let t0 = Instant::now();
    let prefix = format!("f{}", std::process::id() % 10_000_000);
    let opts = common::e2e_options(&prefix);
    let mut sys = System::up(&opts).unwrap();
    eprintln!(
        "MEASURE system up (controller mode): {:.1} s; logs in {}",
        t0.elapsed().as_secs_f64(),
        sys.log_dir.display()
    );
    let v0 = wait_until("gateways synced", Duration::from_secs(10), || {
        gateways_synced(&sys, 0)
    });
    for b in [3u8, 4, 5] {
        let s = sys.mmsg_status(b).unwrap();
        assert_eq!(s["controller"]["source"], "controller", "gw{b}: {s}");
        assert!(
            s["connections"].as_array().unwrap().is_empty(),
            "gw{b} is pure transit"
        );
    }

    // (a) ssc restarted while the transfer runs.
    let mut ssc_back = Duration::ZERO;
    let t = transfer(&mut sys, 5301, |sys| {
        let t = Instant::now();
        sys.restart_ssc().unwrap();
        let v = wait_until(
            "gateways re-synced after the ssc restart",
            Duration::from_secs(15),
            || gateways_synced(sys, v0),
        );
        ssc_back = t.elapsed();
        eprintln!(
            "MEASURE (a) ssc restarted: all 5 gateways re-registered and acked version {v} (was {v0}) {:.2} s after the stop",
            ssc_back.as_secs_f64()
        );
    });
    t.print("(a) ssc restart");
    assert_survived(&t, "(a)", FAULT_AT.as_secs_f64() + ssc_back.as_secs_f64());
    for b in e2e::BRANCHES {
        let st = sys.stats().unwrap();
        let bs = st.branches.iter().find(|x| x.branch == b).unwrap();
        assert!(bs.connected, "gw{b}'s switch did not reconnect to ssc");
    }

    // (b) ovs-vswitchd of transit branch 3 restarted.
    let want3 = cookies(&sys, 3);
    assert!(!want3.is_empty());
    let addr_before = ns_run(
        &sys.ns_gw(3),
        &["ip", "-4", "-o", "addr", "show", "dev", "mpa0"],
    );
    let mut vs_back = Duration::ZERO;
    let t = transfer(&mut sys, 5302, |sys| {
        let t = Instant::now();
        sys.restart_vswitchd(3).unwrap();
        wait_until("gw3's flows back", Duration::from_secs(15), || {
            let now = cookies(sys, 3);
            if now == want3 {
                Ok(())
            } else {
                Err(format!("{} of {} flows", now.len(), want3.len()))
            }
        });
        vs_back = t.elapsed();
        eprintln!(
            "MEASURE (b) gw3 ovs-vswitchd restarted: its {} flows back (ssc reconciled) {:.2} s after the SIGTERM",
            want3.len(),
            vs_back.as_secs_f64()
        );
    });
    t.print("(b) gw3 vswitchd restart");
    assert_survived(&t, "(b)", FAULT_AT.as_secs_f64() + vs_back.as_secs_f64());
    let addr_after = ns_run(
        &sys.ns_gw(3),
        &["ip", "-4", "-o", "addr", "show", "dev", "mpa0"],
    );
    eprintln!(
        "MEASURE (b) gw3 mpa0 before: {:?} after: {:?}",
        addr_before.trim(),
        addr_after.trim()
    );

    // (c) uplink 1a cut for 4 s, then restored.
    let t = transfer(&mut sys, 5303, |sys| {
        sys.link_cut("1a", true).unwrap();
        std::thread::sleep(Duration::from_secs(4));
        sys.link_cut("1a", false).unwrap();
    });
    t.print("(c) uplink 1a cut 4 s");
    assert_survived(&t, "(c)", FAULT_AT.as_secs_f64() + 4.0);
    let t1 = Instant::now();
    sys.wait_tunnels_up().unwrap();
    eprintln!(
        "MEASURE (c) after the restore (and the transfer): every tunnel up with 4 subflows again within {:.2} s",
        t1.elapsed().as_secs_f64()
    );

    // (d) mmsg of branch 2 restarted.
    let mut mmsg_back = Duration::ZERO;
    let t = transfer(&mut sys, 5304, |sys| {
        let t = Instant::now();
        sys.restart_mmsg(2).unwrap();
        sys.wait_tunnels_up().unwrap();
        mmsg_back = t.elapsed();
        eprintln!(
            "MEASURE (d) gw2 mmsg restarted: every tunnel up again {:.2} s after the SIGTERM",
            mmsg_back.as_secs_f64()
        );
    });
    t.print("(d) gw2 mmsg restart");
    match &t.client {
        Ok(_) => eprintln!("MEASURE (d) the running TCP connection survived the mmsg restart"),
        Err(e) => eprintln!("MEASURE (d) the running TCP connection broke: {e}"),
    }
    let s2 = sys.mmsg_status(2).unwrap();
    eprintln!(
        "MEASURE (d) gw2 after the restart: config source {}, version {}",
        s2["controller"]["source"], s2["controller"]["config_version"]
    );
    // A new connection works.
    let (h1, h2) = (sys.ns_host(1), sys.ns_host(2));
    let dst = sys.host_addr(2).to_string();
    let server = Server::start(&h2, 5305, None).unwrap();
    let v = iperf::client(&h1, &["-c", &dst, "-p", "5305", "-t", "4"]).unwrap();
    server.wait(Duration::from_secs(2));
    let mbps = iperf::tcp_received_mbps(&v).unwrap();
    eprintln!("MEASURE (d) new TCP connection h1 -> h2 after the restart, 4 s: {mbps:.1} Mbit/s");
    assert!(mbps > 40.0, "after (d): {mbps:.1} Mbit/s");

    eprintln!(
        "MEASURE whole fault test: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    drop(sys);
}
