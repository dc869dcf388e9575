//! Striping on the paper topology (seed 001 §III-C, D; issue #9): the whole system (`ssc`, five
//! `mmsg` with Open vSwitch, Table II's four path groups 1 → 2) with every first hop of gw1's member
//! paths limited to 3 Mbit/s (`testbed pair`, one way), so one path group alone gets at most
//! 4 × 3 = 12 Mbit/s and the four together 48.
//!
//! In one run: one TCP flow h1 → h2 not striped (to 198.19.2.10: stays on one group), then one
//! striped over the 4 groups (to 198.19.2.11, the only prefix in `[striping]`). Striped must beat
//! the best single group clearly (1.5×) and every group must carry it; the receiving host's
//! out-of-order counter (`TcpExtTCPOFOQueue`) and the sender's retransmits are reported for both.
//! (Two groups need gw1 restarted with a smaller config; that was measured by hand and left out:
//! the restart's wait for all subflows was not reliable, docs/mpa.md "Striping".)
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use common::{ns_run, root};

use std::process::Command;
use std::time::{Duration, Instant};

use xtask::e2e::{self, System};
use xtask::iperf::{self, Server};

/// An absolute kernel counter of namespace `ns` (`nstat -as`, history untouched).
fn nstat(ns: &str, name: &str) -> u64 {
    ns_run(ns, &["nstat", "-asz", name])
        .lines()
        .find_map(|l| {
            let mut it = l.split_whitespace();
            (it.next() == Some(name)).then(|| it.next().unwrap().parse().unwrap())
        })
        .unwrap_or(0)
}

/// One 8 s TCP flow h1 → `dst`: (Mbit/s, sender retransmits, OFO-queued at h2, gw1 bytes per group).
fn transfer(
    sys: &System,
    dst: &str,
    port: u16,
) -> (f64, u64, u64, std::collections::BTreeMap<u8, u64>) {
    let (h1, h2) = (sys.ns_host(1), sys.ns_host(2));
    let before = e2e::group_bytes_tx(&sys.mmsg_status(1).unwrap(), 2);
    let ofo = nstat(&h2, "TcpExtTCPOFOQueue");
    let p = port.to_string();
    let server = Server::start(&h2, port, None).unwrap();
    let v = iperf::client(&h1, &["-c", dst, "-p", &p, "-t", "8", "-O", "2"]).unwrap();
    server.wait(Duration::from_secs(2));
    let mbps = iperf::tcp_received_mbps(&v).unwrap();
    let retrans = v["end"]["sum_sent"]["retransmits"].as_u64().unwrap_or(0);
    let after = e2e::group_bytes_tx(&sys.mmsg_status(1).unwrap(), 2);
    let per_group = after
        .iter()
        .map(|(g, b)| (*g, b - before.get(g).copied().unwrap_or(0)))
        .collect();
    (
        mbps,
        retrans,
        nstat(&h2, "TcpExtTCPOFOQueue") - ofo,
        per_group,
    )
}

#[test]
fn striping_beats_the_best_single_group_on_the_paper_topology() {
    let t0 = Instant::now();
    let prefix = format!("mseed{}", std::process::id() % 100_000);
    let mut opts = common::e2e_options(&prefix);
    // Static configs: the four groups keep their configured weights 1:1:1:1. In controller mode
    // `ssc` derives the weights from what each group carried (controller::wrr, measured rates),
    // so the group an unstriped flow just used gets nearly all of the striped flow.
    opts.static_configs = true;
    opts.striping = Some(xtask::mmsg::stripe_host(
        std::net::Ipv4Addr::new(198, 19, 2, 11),
        2000,
    ));
    let sys = System::up(&opts).unwrap();
    eprintln!("MEASURE system up: {:.1} s", t0.elapsed().as_secs_f64());

    // Every first hop of gw1's member paths (2 uplinks × 8 remote ports, each used by exactly one
    // member of Table II's groups 1-4) limited to 3 Mbit/s, one way.
    for from in ["1a", "1b"] {
        for to in ["2a", "2b", "3a", "3b", "4a", "4b", "5a", "5b"] {
            let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
                .current_dir(root())
                .args(["testbed", "pair", from, to, "--one-way", "--rate-mbit", "3"])
                .args(["--prefix", &prefix])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "testbed pair {from} {to}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    // A second address of h2: the striped destination.
    let h2 = sys.ns_host(2);
    let dev = ns_run(&h2, &["ip", "-o", "-4", "addr", "show"])
        .lines()
        .find(|l| l.contains("198.19.2.10/"))
        .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
        .unwrap();
    ns_run(&h2, &["ip", "addr", "add", "198.19.2.11/24", "dev", &dev]);

    let (single, r1, ofo1, g1) = transfer(&sys, "198.19.2.10", 5301);
    let (striped, r2, ofo2, g2) = transfer(&sys, "198.19.2.11", 5302);
    eprintln!(
        "MEASURE not striped: {single:.1} Mbit/s, retransmits {r1}, h2 OFO-queued {ofo1}, gw1 bytes per group {g1:?}"
    );
    eprintln!(
        "MEASURE striped over 4 groups: {striped:.1} Mbit/s, retransmits {r2}, h2 OFO-queued {ofo2}, gw1 bytes per group {g2:?}"
    );
    let rx = sys.mmsg_status(2).unwrap();
    let c = |n: &str| rx["counters"][n].as_u64().unwrap();
    eprintln!(
        "MEASURE gw2 resequencer: in_order {} buffered {} released_in_order {} threshold {} timeout {} lost {} dup_late {} overflow {}",
        c("reseq_in_order"),
        c("reseq_buffered"),
        c("reseq_released_in_order"),
        c("reseq_released_threshold"),
        c("reseq_released_timeout"),
        c("reseq_released_lost"),
        c("reseq_dup_late"),
        c("reseq_overflow")
    );

    // Not striped: one group, below its 12 Mbit/s bound.
    let busy = g1.values().filter(|b| **b > 1_000_000).count();
    assert_eq!(busy, 1, "the unstriped flow used {busy} groups: {g1:?}");
    assert!(single < 13.0, "one group alone: {single:.1} Mbit/s");
    // Striped: every group carries it, and it clearly beats the best single group.
    let busy = g2.values().filter(|b| **b > 1_000_000).count();
    assert_eq!(busy, 4, "the striped flow used {busy} groups: {g2:?}");
    assert!(
        striped > 1.5 * single,
        "striped {striped:.1} Mbit/s vs one group {single:.1} Mbit/s"
    );
    assert!(c("reseq_in_order") + c("reseq_buffered") > 1_000);
    eprintln!("MEASURE total: {:.1} s", t0.elapsed().as_secs_f64());
}
