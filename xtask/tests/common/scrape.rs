//! Scraping `/metrics` of the paper system's `ssc` and five `mmsg` (issue #19, docs/metrics.md)
//! for `dashboard_e2e.rs`: the OpenMetrics text through the strict reader
//! (`controller::metrics::check`), the classic text through Debian's `promtool check metrics`,
//! and a scraper thread that samples `ssc` once a second while traffic runs.
#![allow(
    dead_code,
    clippy::expect_used,
    clippy::panic,
    clippy::unwrap_used,
    clippy::indexing_slicing
)]

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use controller::metrics::{check, Sample};
use xtask::e2e::{System, BRANCHES};

/// Where every `mmsg` of the system serves `/metrics` (inside its own namespace).
pub const MMSG_METRICS: &str = "127.0.0.1:9477";
/// What Prometheus asks for (without it both daemons answer the classic text format).
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0";

/// `promtool check metrics` on `text`; panics with its output when it refuses it.
pub fn promtool(what: &str, text: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus; cargo xtask deps installs it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let msg =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "promtool check metrics of {what}: {msg}"
    );
}

/// `GET /metrics` of `ssc` with `token`; `openmetrics`: ask for OpenMetrics (else classic).
pub fn ssc_text(api_base: &str, token: &str, openmetrics: bool) -> String {
    let mut req = ureq::get(&format!("{api_base}/metrics"))
        .set("authorization", &format!("Bearer {token}"))
        .timeout(Duration::from_secs(5));
    if openmetrics {
        req = req.set("accept", OPENMETRICS);
    }
    req.call().unwrap().into_string().unwrap()
}

/// `GET /metrics` of `mmsg` in namespace `ns` (curl inside it).
pub fn mmsg_text(ns: &str, openmetrics: bool) -> String {
    let url = format!("http://{MMSG_METRICS}/metrics");
    let accept = format!("Accept: {OPENMETRICS}");
    let mut args = vec!["-sf", "--max-time", "5"];
    if openmetrics {
        args.extend(["-H", accept.as_str()]);
    }
    args.push(&url);
    xtask::sh::ns(ns, "curl", &args).unwrap_or_else(|e| panic!("scrape mmsg in {ns}: {e:#}"))
}

fn parsed(what: &str, text: &str) -> Vec<Sample> {
    check(text)
        .unwrap_or_else(|e| panic!("{what}: {e}\n{text}"))
        .1
}

/// One scrape of the whole system: `ssc` and every `mmsg`, both formats, each checked.
pub struct Snapshot {
    pub ssc: Vec<Sample>,
    /// (branch, samples) of every `mmsg`.
    pub mmsg: Vec<(u8, Vec<Sample>)>,
}

impl Snapshot {
    /// Scrapes everything: the OpenMetrics text through the strict reader, the classic text
    /// through `promtool check metrics`.
    pub fn take(sys: &System, token: &str) -> Snapshot {
        let ssc = parsed("ssc", &ssc_text(&sys.api_base, token, true));
        promtool("ssc", &ssc_text(&sys.api_base, token, false));
        let mmsg = BRANCHES
            .iter()
            .map(|&b| {
                let ns = sys.ns_gw(b);
                let s = parsed(&format!("mmsg gw{b}"), &mmsg_text(&ns, true));
                promtool(&format!("mmsg gw{b}"), &mmsg_text(&ns, false));
                (b, s)
            })
            .collect();
        Snapshot { ssc, mmsg }
    }

    /// The samples of `mmsg` of branch `b`.
    pub fn gw(&self, b: u8) -> &[Sample] {
        &self
            .mmsg
            .iter()
            .find(|(x, _)| *x == b)
            .expect("a branch of the system")
            .1
    }
}

/// Σ of `name` over the samples whose labels include `labels`.
pub fn sum(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
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

/// One sample of the scraper: seconds since it started; Σ of the member paths' forward rate
/// branch 1 → 2 (ssc, from OVS flow stats) in bytes/s; Σ of their byte counters.
#[derive(Debug, Clone, Copy)]
pub struct RateSample {
    pub at: f64,
    pub rate_bytes_per_s: f64,
    pub bytes: f64,
    pub members: usize,
}

/// Scrapes `ssc` once a second in a thread until [`Scraper::stop`].
pub struct Scraper {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Vec<RateSample>>,
}

impl Scraper {
    pub fn start(api_base: String, token: String) -> Scraper {
        let stop = Arc::new(AtomicBool::new(false));
        let handle = std::thread::spawn({
            let stop = stop.clone();
            move || {
                let t0 = Instant::now();
                let mut out = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let next = Instant::now() + Duration::from_secs(1);
                    let s = parsed("ssc", &ssc_text(&api_base, &token, true));
                    let fwd = [("branch", "1"), ("remote", "2"), ("direction", "forward")];
                    out.push(RateSample {
                        at: t0.elapsed().as_secs_f64(),
                        rate_bytes_per_s: sum(&s, "mms_member_path_rate_bytes_per_second", &fwd),
                        bytes: sum(&s, "mms_member_path_bytes_total", &fwd),
                        members: s
                            .iter()
                            .filter(|(n, l, _)| {
                                n == "mms_member_path_rate_bytes_per_second"
                                    && l.get("direction").map(String::as_str) == Some("forward")
                                    && l.get("branch").map(String::as_str) == Some("1")
                            })
                            .count(),
                    });
                    while Instant::now() < next && !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
                out
            }
        });
        Scraper { stop, handle }
    }

    /// Stops the thread; its samples.
    pub fn stop(self) -> Vec<RateSample> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("scraper thread")
    }
}
