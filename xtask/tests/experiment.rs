//! `cargo xtask experiment quick` end to end (docs/experiments.md): the real system (testbed with
//! Open vSwitch, `ssc`, five `mmsg`) and the VXLAN baseline, side by side, on a few cases of Table
//! I, Case A and Table V. Checks the report files and the paper's claims as ratios measured in
//! the same run: where the bottlenecks (not the ports) limit, IPoMP carries several times what the
//! single-path baseline does.
//!
//! Needs root, iproute2, nftables, iperf3 and Open vSwitch 3.1; it FAILS without them, it never
//! skips. The experiment tears its systems down itself, also on error.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use common::root;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::Value;

fn case<'a>(report: &'a Value, figure: &str, id: u64) -> &'a Value {
    report["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == figure)
        .unwrap_or_else(|| panic!("no figure {figure}"))["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no case {id} in {figure}"))
}

/// The processes whose command line names `prefix` (its state and log directories), other than
/// this test.
fn processes_naming(prefix: &str) -> Vec<String> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .chars()
                .all(|c| c.is_ascii_digit())
        })
        .filter(|e| e.file_name().to_string_lossy() != me)
        .filter_map(|e| {
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            cmd.contains(prefix)
                .then(|| format!("{}: {cmd}", e.file_name().to_string_lossy()))
        })
        .collect()
}

#[test]
fn quick_experiment_runs_both_sides_and_ipomp_beats_the_baseline() {
    let out = tempfile::tempdir().unwrap();
    let prefix = format!("xq{}", std::process::id() % 100_000);
    let out_dir = out.path().to_str().unwrap().to_owned();
    let args = [
        "experiment",
        "quick",
        "--prefix",
        &prefix,
        "--out",
        &out_dir,
    ];

    // First run: SIGTERM once the third of the four cases is reported. The run stops after the
    // measurement in progress, tears its testbed down and writes the three finished cases.
    let mut first = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .current_dir(root())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = first.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap());
    let mut stdout = Vec::new();
    for line in BufReader::new(first.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        println!("{line}");
        let third = line.starts_with("[3/4]");
        stdout.push(line);
        if third {
            let pid = libc::pid_t::try_from(first.id()).unwrap();
            // SAFETY: kill(2) on our own child, not reaped yet.
            assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        }
    }
    let status = first.wait().unwrap();
    let stderr = stderr.join().unwrap();
    println!("{stderr}");
    // The expected runtime comes first, then one progress line per case.
    assert!(stdout.first().unwrap().contains("expect about"));
    let progress = |out: &[String], of: &str| out.iter().filter(|l| l.contains(of)).count();
    assert_eq!(progress(&stdout, "/4]"), 3, "stopped after the third case");
    assert_eq!(status.code(), Some(143), "{status}: {stderr}");
    assert!(
        stderr.contains("stopped by SIGTERM; the testbed is torn down"),
        "{stderr}"
    );
    let leftover_ns: Vec<String> = String::from_utf8_lossy(
        &Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout,
    )
    .lines()
    .filter(|l| l.starts_with(&prefix))
    .map(str::to_owned)
    .collect();
    assert!(leftover_ns.is_empty(), "namespaces left: {leftover_ns:?}");
    let leftover = processes_naming(&prefix);
    assert!(leftover.is_empty(), "processes left: {leftover:?}");
    let partial: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("quick.json")).unwrap())
            .unwrap();
    let cases = |r: &Value| -> usize {
        r["figures"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["cases"].as_array().unwrap().len())
            .sum()
    };
    assert_eq!(cases(&partial), 3, "{partial}");
    assert!(stderr.contains("the 3 finished case(s) are in"), "{stderr}");

    // Second run: the command the error gave for the case left, merged into the same file.
    let resume = stderr
        .split('`')
        .find(|s| s.starts_with("cargo xtask experiment quick "))
        .unwrap_or_else(|| panic!("no command to resume in: {stderr}"));
    let mut rest: Vec<&str> = resume.split_whitespace().skip(2).collect();
    rest.extend(["--prefix", &prefix]);
    let run = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .current_dir(root())
        .args(&rest)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    println!("{stdout}");
    assert!(
        run.status.success(),
        "xtask {rest:?} failed: {}\n{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("[1/1]")).count(),
        1,
        "the resumed run runs the one case left"
    );

    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("quick.json")).unwrap())
            .unwrap();
    let md = std::fs::read_to_string(out.path().join("quick.md")).unwrap();
    for (fig, table) in [
        ("table1", "Table I"),
        ("fig10a", "Table III(a)"),
        ("fig12a", "Table V"),
    ] {
        let svg = std::fs::read_to_string(out.path().join(format!("quick-{fig}.svg"))).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("IPoMP"), "{fig}");
        assert!(md.contains(&format!("({table})")), "{md}");
    }
    assert_eq!(
        cases(&report),
        4,
        "the merged report holds every case: {report}"
    );
    for f in report["figures"].as_array().unwrap() {
        for c in f["cases"].as_array().unwrap() {
            let (ip, bl) = (
                c["ipomp_mbps"].as_f64().unwrap(),
                c["baseline_mbps"].as_f64().unwrap(),
            );
            assert!(ip > 1.0 && bl > 1.0, "{}: {c}", f["id"]);
            assert_eq!(c["ipomp"]["reps"].as_array().unwrap().len(), 1);
            println!(
                "MEASURE {} case {}: IPoMP {ip:.1} Mbit/s, baseline {bl:.1} Mbit/s ({:.2}x)",
                f["id"],
                c["id"],
                ip / bl
            );
        }
    }

    // Table I, 10:10:10:10: one connection over four 10 Mbit/s subflows against one of them.
    let t1 = case(&report, "table1", 1);
    assert_eq!(t1["paper_ipomp_mbps"], 36.5);
    assert!(t1["udp"]["median"].as_f64().unwrap() > 20.0, "{t1}");
    let ratio =
        |c: &Value| c["ipomp_mbps"].as_f64().unwrap() / c["baseline_mbps"].as_f64().unwrap();
    assert!(ratio(t1) > 2.5, "Table I case 1: {t1}");
    // Case A, all groups at 2 Mbit/s: 16 member bottlenecks against 4 direct hops (paper ~4x).
    let c31 = case(&report, "fig10a", 31);
    assert!(ratio(c31) > 2.5, "Fig. 10(a) case 31: {c31}");
    // Case A, all at 8: the ports limit IPoMP (80), still well above 4 direct hops (32).
    let c1 = case(&report, "fig10a", 1);
    assert!(ratio(c1) > 1.3, "Fig. 10(a) case 1: {c1}");
    // Table V case 4: the direct member is the slowest (2 Mbit/s): the baseline suffers most.
    let c4 = case(&report, "fig12a", 4);
    assert!(ratio(c4) > 2.5, "Fig. 12(a) case 4: {c4}");
    // IPoMP never exceeds what its bottlenecks and ports leave.
    for c in [t1, c31, c1, c4] {
        let bound = c["model_ipomp_mbps"].as_f64().unwrap();
        assert!(c["ipomp_mbps"].as_f64().unwrap() <= bound * 1.02, "{c}");
    }
}
