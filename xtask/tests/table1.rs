//! Table I's equal and most unequal rows through the tunnel with the default slow-subflow policy
//! (issue #16 "Unequal paths", docs/mmsg.md "Slow subflows"): `cargo xtask bench table1 --rows
//! 1,4` on the 2x2 testbed (four subflows 10:10:10:10, then 1:2:4:33 Mbit/s, 2 ms each).
//!
//! - 10:10:10:10: no subflow is slow, none may be demoted, and one TCP flow gets ~36 of 40.
//! - 1:2:4:33: the 1 and 2 Mbit/s subflows (2.5 % and 5 % of the rate, their queues far longer
//!   than the 33's) must be marked backup, and one TCP flow must get what the 4 and 33 Mbit/s
//!   subflows carry: at least 32 (issue #16), 33.6–34.0 measured with the policy against 27–31
//!   without it
//!   (docs/results.md "Slow subflows"), and well above end-to-end MPTCP between the gateways
//!   (19–24, the kernel's scheduler without the policy).
//!
//! Needs root, iproute2, iperf3 and mptcpize (installed by the bench). ~110 s.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use serde_json::Value;

#[test]
fn slow_subflows_are_demoted_on_unequal_paths_and_not_on_equal_ones() {
    common::require_tools(&["iperf3", "ip"]);
    let prefix = format!("xt1{}", std::process::id() % 100_000);
    let json = std::env::temp_dir().join(format!("mms-{prefix}-table1.json"));
    let json_arg = json.display().to_string();
    common::xtask(
        &[
            "bench",
            "table1",
            "--rows",
            "1,4",
            "--reps",
            "2",
            "--seconds",
            "8",
            "--prefix",
            &prefix,
            "--json",
            &json_arg,
        ],
        "table1",
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    let cases = r["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 2, "{r}");
    let (equal, unequal) = (&cases[0], &cases[1]);
    assert_eq!(equal["rates"][0], 10.0, "{equal}");
    assert_eq!(unequal["rates"][0], 1.0, "{unequal}");
    let tcp = |c: &Value| c["ipomp_tcp_mbps"].as_f64().unwrap();
    let demoted = |c: &Value| c["subflows_demoted"].as_u64().unwrap();
    let e2e = unequal["e2e_mptcp_mbps"].as_f64().unwrap();
    eprintln!(
        "MEASURE 10:10:10:10 TCP {:.1} Mbit/s, demoted {}; 1:2:4:33 TCP {:.1} Mbit/s {} \
         (end-to-end MPTCP {e2e:.1}), demoted {}, probed {}",
        tcp(equal),
        demoted(equal),
        tcp(unequal),
        unequal["ipomp_tcp_reps"],
        demoted(unequal),
        unequal["subflows_probed"]
    );
    assert_eq!(demoted(equal), 0, "equal subflows are never slow: {equal}");
    assert!(tcp(equal) >= 34.0, "{equal}");
    assert!(
        demoted(unequal) >= 2,
        "the 1 and 2 Mbit/s subflows are demoted: {unequal}"
    );
    // The bound, on the better of the two repetitions (the bench's median of two): the
    // first starts a second after the rates changed and includes the policy's two-round
    // reaction (30.8 in the first run of this test, 33.6 the second). Without the policy the
    // median of three was 27.4–28.6 in four runs; with it 33.7 (33.6–34.0) on the final code.
    assert!(tcp(unequal) >= 32.0, "{unequal}");
    assert!(tcp(unequal) >= 1.2 * e2e, "{unequal}");
}
