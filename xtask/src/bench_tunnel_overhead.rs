//! `bench tunnel --metrics-overhead` (issue #19): what `/metrics` costs the tunnel. Each
//! repetition measures the TLS tunnel with offload (the default set-up) twice, once as usual and
//! once with both `mmsg` running `--metrics-listen 127.0.0.1:9477` and a scraper fetching
//! `/metrics` of both (curl inside each gateway's namespace) once a second during the transfer;
//! the order alternates per repetition (off, on, then on, off, ...) so drift and other load hit
//! both alike. Reported: every pair, the medians and `ratio = with / without` (median of the
//! per-repetition ratios; aim ≥ 0.98).

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use anyhow::bail;

use crate::bench_tunnel::{n_m, tls_dir, topology_text, tunnel_run, Mmsg, Options, METRICS};
use crate::mmsg::{self, Profile};
use crate::stats::median;
use crate::{deps, topology};
use crate::{sh, testbed};

/// One repetition: the tunnel without and with metrics.
#[derive(Debug, Clone, Serialize)]
pub struct OverheadRep {
    /// Which ran first.
    pub metrics_first: bool,
    /// iperf3 TCP h1 → h2 through the TLS tunnel with offload, Mbit/s, without `/metrics`.
    pub without_mbps: f64,
    /// The same with `--metrics-listen` and the scraper.
    pub with_mbps: f64,
    /// Scrapes during the transfer (both gateways) and how many failed.
    pub scrapes: u64,
    pub scrape_failures: u64,
    /// Bytes of one scrape of gw1 (the size of its exposition).
    pub scrape_bytes: u64,
}

/// What `--metrics-overhead` reports.
#[derive(Debug, Clone, Serialize)]
pub struct MetricsOverhead {
    pub secs: u32,
    pub reps: Vec<OverheadRep>,
    pub without_median_mbps: f64,
    pub with_median_mbps: f64,
    /// Median of the per-repetition `with / without`.
    pub ratio: f64,
}

/// Fetches `/metrics` of gw1 and gw2 once a second until stopped.
struct Scraper {
    stop: Arc<AtomicBool>,
    counts: Arc<[AtomicU64; 3]>,
    handle: std::thread::JoinHandle<()>,
}

impl Scraper {
    fn start(prefix: &str) -> Scraper {
        let stop = Arc::new(AtomicBool::new(false));
        let counts: Arc<[AtomicU64; 3]> = Arc::new(Default::default());
        let gws = [testbed::ns_gw(prefix, 1), testbed::ns_gw(prefix, 2)];
        let handle = std::thread::spawn({
            let (stop, counts) = (stop.clone(), counts.clone());
            move || {
                let url = format!("http://{METRICS}/metrics");
                while !stop.load(Ordering::Relaxed) {
                    let next = Instant::now() + Duration::from_secs(1);
                    for (i, ns) in gws.iter().enumerate() {
                        let [n, failed, bytes] = &*counts;
                        n.fetch_add(1, Ordering::Relaxed);
                        match sh::ns(ns, "curl", &["-sf", "--max-time", "2", &url]) {
                            Ok(text) if !text.is_empty() => {
                                if i == 0 {
                                    bytes.store(text.len() as u64, Ordering::Relaxed);
                                }
                            }
                            _ => {
                                failed.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    while Instant::now() < next && !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            }
        });
        Scraper {
            stop,
            counts,
            handle,
        }
    }

    /// Stops it: (scrapes, failures, bytes of gw1's last scrape).
    fn stop(self) -> (u64, u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.handle.join();
        let [n, failed, bytes] = &*self.counts;
        (
            n.load(Ordering::Relaxed),
            failed.load(Ordering::Relaxed),
            bytes.load(Ordering::Relaxed),
        )
    }
}

/// The repetitions on the testbed that is up.
fn run_reps(opts: &Options, bin: &Path, n_m: usize) -> anyhow::Result<MetricsOverhead> {
    mmsg_tls(opts)?;
    let mut reps = Vec::new();
    for rep in 1..=opts.reps {
        let metrics_first = rep % 2 == 0;
        let order = if metrics_first {
            [true, false]
        } else {
            [false, true]
        };
        let (mut with, mut without, mut scraped) = (0.0, 0.0, (0, 0, 0));
        for metrics in order {
            let tag = format!("{rep}-metrics-{}", if metrics { "on" } else { "off" });
            let m = Mmsg::start(opts, bin, true, true, n_m, &tag, metrics)?;
            let scraper = metrics.then(|| Scraper::start(&opts.prefix));
            let r = tunnel_run(opts, &m);
            let counts = scraper.map(Scraper::stop);
            drop(m);
            let mbps = r?.transfer.mbps;
            eprintln!(
                "bench tunnel --metrics-overhead: rep {rep}/{}: metrics {}: {mbps:.0} Mbit/s{}",
                opts.reps,
                if metrics { "on" } else { "off" },
                counts.map_or(String::new(), |(n, f, b)| format!(
                    " ({n} scrapes, {f} failed, {b} B each)"
                ))
            );
            if let Some(c) = counts {
                with = mbps;
                scraped = c;
            } else {
                without = mbps;
            }
        }
        reps.push(OverheadRep {
            metrics_first,
            without_mbps: without,
            with_mbps: with,
            scrapes: scraped.0,
            scrape_failures: scraped.1,
            scrape_bytes: scraped.2,
        });
    }
    let col = |f: &dyn Fn(&OverheadRep) -> f64| -> f64 {
        median(&reps.iter().map(f).collect::<Vec<_>>()).unwrap_or(f64::NAN)
    };
    Ok(MetricsOverhead {
        secs: opts.secs,
        without_median_mbps: col(&|r| r.without_mbps),
        with_median_mbps: col(&|r| r.with_mbps),
        ratio: col(&|r| r.with_mbps / r.without_mbps),
        reps,
    })
}

/// The run's CA and the certificates of gw1 and gw2 (as the full benchmark makes them).
fn mmsg_tls(opts: &Options) -> anyhow::Result<()> {
    mmsg::provision_tls(&tls_dir(opts), "MMS bench CA", &[1, 2])?;
    Ok(())
}

/// The table of [`MetricsOverhead`] (markdown, for docs/results.md).
pub fn print_overhead(r: &MetricsOverhead) {
    println!("| rep | order | without /metrics, Mbit/s | with /metrics + 1 s scraper, Mbit/s | with / without | scrapes (failed) |");
    println!("|---|---|---|---|---|---|");
    for (i, x) in r.reps.iter().enumerate() {
        println!(
            "| {} | {} | {:.0} | {:.0} | {:.3} | {} ({}) |",
            i + 1,
            if x.metrics_first {
                "with first"
            } else {
                "without first"
            },
            x.without_mbps,
            x.with_mbps,
            x.with_mbps / x.without_mbps,
            x.scrapes,
            x.scrape_failures
        );
    }
    println!(
        "| median | | {:.0} | {:.0} | {:.3} | |",
        r.without_median_mbps, r.with_median_mbps, r.ratio
    );
}

/// `bench tunnel --metrics-overhead`: only the TLS offload tunnel, alternately without and with
/// `--metrics-listen` and a scraper once a second (this module); always tears the testbed down.
pub fn run_metrics_overhead(opts: &Options) -> anyhow::Result<MetricsOverhead> {
    if opts.reps == 0 || opts.secs == 0 {
        bail!("--reps and --secs must be at least 1");
    }
    deps::ensure()?;
    eprintln!("bench tunnel --metrics-overhead: building mmsg (release)");
    let bin = mmsg::build_mmsg(&opts.root, Profile::Release)?;
    let topo = topology::parse(&topology_text(opts.uplink_mbit))?;
    testbed::run_on(&topo, &opts.prefix, || run_reps(opts, &bin, n_m(&topo)))
}
