//! A striped flow's ACKs take the lowest-delay path group (issue #22, seed 001 Fig. 3's set-up,
//! `xtask::mdi`): the 2x2 testbed with two paths of 25 ms and 142 ms one way (MDI 0.35), one TCP
//! flow h1 → h2 striped by gw1 over both, 6 s per receiver variant. When gw2 resequences the flow
//! (`[striping]` there, both hold-time variants) it keeps the flow's reverse (h2's ACKs) on the
//! group with the lowest measured round trip (`FlowTable::prefer_low_delay`): at most 25 % of
//! gw2's bytes to branch 1 may cross path B. Steered runs gave 0.00–0.03, once 0.14–0.15 (a run
//! of six MDI points in a row); the round robin (gw2's first new flow goes to group 1, path B)
//! gave 0.74–1.00 (docs/results.md "MDI"). Without `[striping]` at gw2 nothing is steered (the
//! baseline keeps the round robin); its share is reported, not asserted.
//! Needs root, iproute2 and iperf3; ~70 s.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::time::Instant;

use xtask::mdi;

#[test]
fn a_resequenced_flows_acks_take_the_lowest_delay_group() {
    let t0 = Instant::now();
    let prefix = format!("mdt{}", std::process::id() % 100_000);
    let out_dir = std::env::temp_dir().join(format!("mms-{prefix}-mdi"));
    // Case 8 is MDI 0.35.
    let out_arg = out_dir.display().to_string();
    common::xtask(
        &[
            "experiment",
            "mdi",
            "--cases",
            "8",
            "--secs",
            "6",
            "--reps",
            "1",
            "--prefix",
            &prefix,
            "--out",
            &out_arg,
        ],
        "[",
    );
    let report: mdi::Report =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("mdi.json")).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&out_dir);
    let point = &report.points[0];
    let ack_on_b = |r: &mdi::Run| r.diag.get("ack_on_b").copied().expect("ack_on_b measured");
    for r in &point.without {
        eprintln!(
            "MEASURE without resequencer: {:.2} Mbit/s, ACKs on B {:.2} (round robin)",
            r.mbps,
            ack_on_b(r)
        );
    }
    for (name, runs) in [
        ("hold from paths", &point.with),
        ("measured hold", &point.measured),
    ] {
        assert!(!runs.is_empty(), "{name}: no run");
        for r in runs {
            let b = ack_on_b(r);
            eprintln!(
                "MEASURE resequencer, {name}: {:.2} Mbit/s, ACKs on B {b:.2}",
                r.mbps
            );
            assert!(
                b <= 0.25,
                "{name}: {:.0} % of gw2's bytes to branch 1 crossed the 142 ms path",
                b * 100.0
            );
            assert!(
                r.mbps > 0.5,
                "{name}: the flow moved ({:.2} Mbit/s)",
                r.mbps
            );
        }
    }
    eprintln!("MEASURE whole test {:.1} s", t0.elapsed().as_secs_f64());
}
