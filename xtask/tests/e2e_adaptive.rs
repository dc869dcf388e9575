//! Adaptive path groups on the whole system (seed 003 §III steps 5–8, issue #9;
//! `xtask::adaptive`): `ssc`, five `mmsg` with Open vSwitch, only Table II's group 1 from 1 to 2
//! at the start, every WAN hop leaving branch 1 at 3 Mbit/s; one TCP flow striped over the
//! pair's groups for 45 s, then 35 s idle with `retire_after_s` = 10.
//!
//! In the same run: `ssc` must add at least one group while the flow runs (its one group is
//! saturated at ~12 of the 80 Mbit/s the ports allow), the flow's rate over the transfer's last
//! 10 s must be at least 1.4× its rate with the single group (the added groups' first hops are
//! not group 1's: each adds up to 12 Mbit/s), and after the transfer the pair must be back at
//! one group. Ratios of the run's own phases, no absolute rate. Timeline printed as `MEASURE`
//! lines; `cargo xtask experiment adaptive` writes the plot.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::time::Instant;

use xtask::adaptive::{self, Settings};

#[test]
fn a_short_pair_grows_its_groups_gains_and_gives_them_back_when_idle() {
    let t0 = Instant::now();
    let opts = common::run_options(format!("mada{}", std::process::id() % 100_000));
    let settings = Settings {
        secs: 45,
        idle_secs: 35,
        retire_after_s: 10.0,
        ..Settings::default()
    };
    let tl = adaptive::run(&opts, &settings).unwrap();
    for line in adaptive::markdown(&tl).lines() {
        eprintln!("MEASURE {line}");
    }
    for line in &tl.changes {
        eprintln!("MEASURE ssc: {line}");
    }
    let (before, after) = tl.before_after();
    eprintln!(
        "MEASURE one group {before:.1} Mbit/s, last 10 s {after:.1}; first add {:?} s; most groups {}; back to one {:?} s after; total {:.0} s",
        tl.first_add_s(),
        tl.most_groups(),
        tl.retired_after_s(),
        t0.elapsed().as_secs_f64()
    );
    let first = tl
        .first_add_s()
        .expect("ssc never added a path group to the saturated pair");
    assert!(
        first < f64::from(settings.secs) - 15.0,
        "first group added only at {first:.1} s"
    );
    assert!(tl.most_groups() >= 2);
    assert!(before > 0.0, "no traffic with the single group");
    assert!(
        after >= 1.4 * before,
        "last 10 s {after:.1} Mbit/s vs {before:.1} with one group: the added groups did not help"
    );
    assert_eq!(
        tl.final_groups(),
        1,
        "the idle pair kept its groups: {:?}",
        tl.samples.last()
    );
}
