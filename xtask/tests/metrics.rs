//! Issue #19, real processes: two real `mmsg` (TLS on, the run's CA) in the gateways of a 2x2
//! testbed, each with `--metrics-listen 127.0.0.1:9477` inside its own namespace. An iperf3
//! transfer h1 → h2 runs through the tunnel; `/metrics` of gw1 is scraped before and after
//! (curl inside the namespace) and must parse (strict checker, and `promtool check metrics` when
//! Debian's `prometheus` is installed), show the byte counters grown by about the transfer, the
//! labels of its connections and subflows, TLS handshakes, and a certificate expiry. gw1 logs
//! `--log-format json` into a file (every line parses as JSON, state changes carry their
//! identifiers); gw2 logs text into a file (no ESC byte). When `prometheus` is installed, a real
//! Prometheus scrapes gw1 once and its query API returns the tunnel's byte counter.
//! `mmsg status` (the tables) is run against gw1 and must show its connections. Needs root,
//! iproute2, iperf3, curl. ~40 s.
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

use controller::metrics::{check, value_of, Sample};
use xtask::{bench_latency, iperf, mmsg, testbed, topology};

const METRICS: &str = "127.0.0.1:9477";
/// What Prometheus asks for (without it the gateway answers the classic text format).
const OPENMETRICS: &str = "Accept: application/openmetrics-text; version=1.0.0";

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

fn scrape(ns: &str) -> (String, Vec<Sample>) {
    let text = common::ns_run(
        ns,
        &[
            "curl",
            "-sf",
            "-H",
            OPENMETRICS,
            &format!("http://{METRICS}/metrics"),
        ],
    );
    let (_, samples) = check(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    (text, samples)
}

/// Σ of `name` over the samples whose labels include `labels`.
fn sum(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.2)
        .sum()
}

fn start(bin: &Path, prefix: &str, dir: &Path, b: u8, tls: &mpa::config::TlsConfig) -> Child {
    let mut c = mmsg::example(&common::root(), b).unwrap();
    c.tls = Some(tls.clone());
    let config = dir.join(format!("metrics-gw{b}.toml"));
    mmsg::write_config(&config, "metrics test: examples + the run's [tls]", &c).unwrap();
    let log = std::fs::File::create(dir.join(format!("metrics-gw{b}.log"))).unwrap();
    let format = if b == 1 { "json" } else { "text" };
    Command::new("ip")
        .args(["netns", "exec", &testbed::ns_gw(prefix, b)])
        .arg(bin)
        .args(["--log-format", format, "run", "--config"])
        .arg(&config)
        .arg("--control")
        .arg(dir.join(format!("metrics-gw{b}.sock")))
        .args(["--metrics-listen", METRICS])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start mmsg")
}

#[test]
fn metrics_of_real_gateways_move_with_traffic_and_logs_are_clean() {
    common::require_tools(&["ip", "iperf3", "curl"]);
    let t0 = Instant::now();
    let root = common::root();
    let prefix = format!("met{}", std::process::id() % 100_000);
    xtask::deps::ensure().unwrap();
    let bin = mmsg::build_mmsg(&root, mmsg::Profile::Debug).unwrap();
    // The testbed through the xtask binary (its WAN emulator is `xtask wanem`), always torn down.
    let topo = std::env::temp_dir().join(format!("mms-{prefix}-topology.toml"));
    std::fs::write(&topo, bench_latency::topology_text(&[50.0; 4], 2.0)).unwrap();
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
    eprintln!(
        "MEASURE metrics netns test {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

fn run(bin: &Path, prefix: &str) {
    let dir: PathBuf = testbed::state_dir(prefix);
    let tls = mmsg::provision_tls(&dir.join("metrics-tls"), "MMS metrics CA", &[1, 2]).unwrap();
    let gws = Gateways(vec![
        start(bin, prefix, &dir, 1, &tls[&1]),
        start(bin, prefix, &dir, 2, &tls[&2]),
    ]);
    let gw1 = testbed::ns_gw(prefix, 1);
    // Poll until every connection of gw1 is up with its subflows (seen through /metrics).
    let deadline = Instant::now() + Duration::from_secs(40);
    let before = loop {
        let text = xtask::sh::ns(
            &gw1,
            "curl",
            &[
                "-sf",
                "-H",
                OPENMETRICS,
                &format!("http://{METRICS}/metrics"),
            ],
        )
        .unwrap_or_default();
        if let Ok((_, s)) = check(&text) {
            let conns = sum(&s, "mms_connection_up", &[("direction", "out")]);
            let wanted = sum(
                &s,
                "mms_connection_subflows_wanted",
                &[("direction", "out")],
            );
            let subflows = sum(&s, "mms_connection_subflows", &[("direction", "out")]);
            if conns > 0.0
                && conns
                    == s.iter()
                        .filter(|(n, l, _)| n == "mms_connection_up" && l["direction"] == "out")
                        .count() as f64
                && subflows >= wanted
            {
                break s;
            }
        }
        assert!(
            Instant::now() < deadline,
            "gw1's connections did not come up (logs in {})",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(250));
    };

    // Real traffic through the tunnel: h1 → h2.
    let h2 = topology::lan_addr(2, 10).to_string();
    let server = iperf::Server::start(&testbed::ns_host(prefix, 2, 0), 5470, None).unwrap();
    let r = iperf::client(
        &testbed::ns_host(prefix, 1, 0),
        &["-c", &h2, "-p", "5470", "-t", "3"],
    )
    .unwrap();
    server.wait(Duration::from_secs(5));
    let sent_bytes = r["end"]["sum_sent"]["bytes"].as_f64().unwrap();
    assert!(sent_bytes > 1e6, "iperf3 sent only {sent_bytes} B");

    let tun = |s: &[Sample]| value_of(s, "mms_tun_rx_bytes_total", &[]).unwrap();
    let tx = |s: &[Sample]| {
        sum(
            s,
            "mms_connection_sent_bytes_total",
            &[("remote", "2"), ("direction", "out")],
        )
    };
    let acked = |s: &[Sample]| sum(s, "mms_subflow_acked_bytes_total", &[("remote", "2")]);
    // Gateway counters are live; the per-connection and per-subflow values are sampled by each
    // connection's supervisor once per second: poll until they include the transfer's end.
    let settle = Instant::now() + Duration::from_secs(5);
    let (text, after) = loop {
        let (text, after) = scrape(&gw1);
        let done = tx(&after) - tx(&before) >= 0.9 * sent_bytes
            && acked(&after) - acked(&before) >= 0.9 * sent_bytes;
        if done || Instant::now() > settle {
            break (text, after);
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    let grown = (tun(&after) - tun(&before), tx(&after) - tx(&before));
    eprintln!(
        "MEASURE iperf3 sent {:.0} B; gw1 tun_rx +{:.0} B, connection_sent +{:.0} B, subflow acked +{:.0} B",
        sent_bytes,
        grown.0,
        grown.1,
        acked(&after) - acked(&before)
    );
    // The tunnel carried at least the transfer (plus headers and ACKs' reverse traffic).
    assert!(
        grown.0 >= 0.9 * sent_bytes,
        "tun_rx grew {} for {sent_bytes}",
        grown.0
    );
    assert!(
        grown.1 >= 0.9 * sent_bytes,
        "connection_sent grew {} for {sent_bytes}",
        grown.1
    );
    assert!(acked(&after) - acked(&before) >= 0.9 * sent_bytes);
    // Labels: every subflow of gw1 is on one of its two WAN ports towards branch 2's addresses.
    let subflows: Vec<_> = after
        .iter()
        .filter(|(n, ..)| n == "mms_subflow_rtt_seconds")
        .collect();
    assert!(!subflows.is_empty(), "{text}");
    for (_, l, rtt) in &subflows {
        assert!(["0", "1"].contains(&l["wan_port"].as_str()), "{l:?}");
        assert!(l["peer"].starts_with("198.18.2"), "{l:?}");
        assert!(["type1", "type2"].contains(&l["class"].as_str()), "{l:?}");
        assert!(*rtt > 0.0 && *rtt < 1.0, "{l:?} rtt {rtt}");
    }
    assert!(
        sum(&after, "mms_tls_handshakes_total", &[]) >= 1.0,
        "{text}"
    );
    assert_eq!(value_of(&after, "mms_tls_enabled", &[]), Some(1.0));
    let expiry = value_of(&after, "mms_tls_certificate_expiry_timestamp_seconds", &[]).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        expiry > now,
        "certificate expiry {expiry} not after now {now}"
    );
    assert_eq!(
        value_of(&after, "mms_build_info", &[("branch", "1")]),
        Some(1.0)
    );

    // Debian's promtool, when installed, agrees that the exposition is well-formed.
    if Command::new("promtool").arg("--version").output().is_ok() {
        // promtool reads the classic text format: what curl gets without asking for more.
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ip netns exec {gw1} curl -sf http://{METRICS}/metrics | promtool check metrics"
            ))
            .output()
            .unwrap();
        let msg = String::from_utf8_lossy(&out.stderr).to_string()
            + &String::from_utf8_lossy(&out.stdout);
        eprintln!(
            "MEASURE promtool check metrics: exit {} {}",
            out.status,
            msg.trim()
        );
        assert!(out.status.success(), "promtool: {msg}");
        prometheus_scrapes_once(prefix, &gw1, &dir);
    } else {
        eprintln!("MEASURE promtool not installed: exposition checked by the strict reader only");
    }

    // `mmsg status`: the tables (one report, no rates) show gw1's connections.
    let status = common::ns_run(
        &gw1,
        &[
            bin.to_str().unwrap(),
            "status",
            "--interval",
            "0s",
            "--control",
            dir.join("metrics-gw1.sock").to_str().unwrap(),
        ],
    );
    eprintln!("MEASURE mmsg status of gw1 (text view):\n{status}");
    assert!(status.contains("out b2 g"), "{status}");
    assert!(status.contains("problems:"), "{status}");
    assert!(
        !status.contains('\u{1b}'),
        "escape codes in piped mmsg status"
    );
    drop(gws);

    // Logs: no ESC byte in a file; JSON lines parse, state changes carry their identifiers.
    let text_log = std::fs::read(dir.join("metrics-gw2.log")).unwrap();
    assert!(!text_log.is_empty());
    assert!(
        !text_log.contains(&0x1b),
        "ANSI escape in a log written to a file"
    );
    let json_log = std::fs::read_to_string(dir.join("metrics-gw1.log")).unwrap();
    assert!(!json_log.contains('\u{1b}'));
    let mut up_lines = 0;
    for line in json_log.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(
            v["level"].is_string() && v["fields"]["message"].is_string(),
            "{line}"
        );
        if v["fields"]["message"] == "tunnel connection up" {
            assert!(
                v["fields"]["conn"]
                    .as_str()
                    .unwrap()
                    .starts_with("out b2 g"),
                "{line}"
            );
            up_lines += 1;
        }
    }
    assert!(
        up_lines >= 1,
        "no `tunnel connection up` line in\n{json_log}"
    );
    let subflow_up = json_log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["fields"]["message"] == "subflow up")
        .inspect(|v| {
            assert!(v["fields"]["conn"].is_string(), "{v}");
            assert!(
                v["fields"]["local"]
                    .as_str()
                    .unwrap()
                    .starts_with("198.18.1"),
                "{v}"
            );
            assert!(
                v["fields"]["remote"]
                    .as_str()
                    .unwrap()
                    .starts_with("198.18.2"),
                "{v}"
            );
        })
        .count();
    assert!(subflow_up >= 1, "no `subflow up` line in\n{json_log}");
}

/// A real Prometheus (Debian's 2.42) scrapes gw1's `/metrics` and answers a query for the
/// tunnel's bytes from its own storage.
fn prometheus_scrapes_once(prefix: &str, gw1: &str, dir: &Path) {
    let cfg = dir.join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: mmsg\n    \
             static_configs:\n      - targets: ['{METRICS}']\n"
        ),
    )
    .unwrap();
    let data = dir.join("prometheus-data");
    let mut p = Command::new("ip")
        .args(["netns", "exec", gw1, "prometheus"])
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!("--storage.tsdb.path={}", data.display()))
        .arg("--web.listen-address=127.0.0.1:9090")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
        .spawn()
        .expect("start prometheus");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got = None;
    while Instant::now() < deadline {
        let out = xtask::sh::ns(
            gw1,
            "curl",
            &[
                "-sf",
                "http://127.0.0.1:9090/api/v1/query?query=sum(mms_connection_sent_bytes_total)",
            ],
        )
        .unwrap_or_default();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
        if let Some(x) = v["data"]["result"][0]["value"][1].as_str() {
            got = x.parse::<f64>().ok();
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let _ = p.kill();
    let _ = p.wait();
    let got = got.unwrap_or_else(|| {
        panic!(
            "Prometheus never returned mms_connection_sent_bytes_total (log {})",
            dir.join("prometheus.log").display()
        )
    });
    eprintln!(
        "MEASURE prometheus scraped gw1 ({prefix}): sum(mms_connection_sent_bytes_total) = {got}"
    );
    assert!(got > 1e6, "{got}");
}
