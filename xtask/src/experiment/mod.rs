//! `cargo xtask experiment`: the paper's evaluation (seed 000 §V, Tables I and III–VI, Figs.
//! 10–12) as data under `experiments/`, run on the real system side by side with the single-path
//! baseline (docs/experiments.md, results in docs/results.md).
//!
//! For every case it sets the bottleneck of every member path (the first WAN hop of the member,
//! which is unique per member in Table II) with `testbed pair`, then measures, in the same running
//! system, repetition by repetition:
//! - **IPoMP**: iperf3 with `connections` TCP connections from the LAN host of branch 1 to the
//!   LAN host of branch 2 through `ssc` + five `mmsg` + Open vSwitch ([`crate::e2e::System`]),
//!   `mmsg` mapping connections to path groups round robin;
//! - **baseline**: the same iperf3 through kernel VXLAN tunnels over the direct WAN hop of each
//!   group only (the paper's IP-in-IP, which this kernel lacks), connections round robin over the
//!   groups ([`crate::baseline::up_round_robin`]);
//! - Table I also: UDP through the tunnel and end-to-end MPTCP between the gateways without MMS
//!   ([`crate::table1::e2e_mptcp`]).
//!
//! Results go to `results/<name>.json`, `results/<name>.md` and one SVG per figure.

pub mod all;
pub mod background;
pub mod def;
pub mod plot;
mod report;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::e2e::{self, System};
use crate::topology::Impairment;
use crate::{baseline, iperf, table1, testbed};
pub use def::{Background, Case, Experiment};
pub use report::{CaseResult, FigureResult, MergedRun, Report, Spread};

/// Capacity of one of branch 1's WAN ports in the paper's testbed (Mbit/s).
const PORT_MBIT: f64 = 40.0;
/// Bring-up of one system, for the runtime estimate (the release builds come on top, once).
const SYSTEM_UP_SECS: u64 = 45;
/// Per measurement beyond its traffic: server start, JSON, settling.
const MEASURE_OVERHEAD_SECS: u64 = 3;
/// Wait after changing the bottlenecks (the emulator reloads on SIGHUP).
const SETTLE: Duration = Duration::from_secs(1);

/// What a system is brought up with: the paths file and how many of its groups.
type SystemKey = (String, u8);

/// How to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Repository root.
    pub root: PathBuf,
    /// Testbed name prefix.
    pub prefix: String,
    /// Only these figures (ids).
    pub figures: Option<BTreeSet<String>>,
    /// Only these case ids.
    pub cases: Option<BTreeSet<u32>>,
    /// Repetitions (default: the file's).
    pub reps: Option<u32>,
    /// Seconds per measurement (default: the file's).
    pub secs: Option<u32>,
    /// Where `<name>.json`, `<name>.md` and the SVGs go.
    pub out_dir: PathBuf,
    /// Skip the end-to-end MPTCP column (Table I).
    pub skip_e2e_mptcp: bool,
    /// Merge into an existing `<name>.json`: the cases run now replace the same cases there, all
    /// others are kept (re-running a few cases of a long experiment).
    pub merge: bool,
    /// Every `mmsg`'s `connections_per_group` (default 1): with K, each of the first K
    /// end-to-end connections a path group gets has a tunnel connection of its own, as the
    /// paper maps each end-to-end connection to an MPTCP connection (docs/mmsg.md
    /// "Connections per path group").
    pub connections_per_group: u8,
}

/// Merges `old` into `new`: every case of `old` that `new` did not run is kept, in the order of
/// the experiment file (figure order of `exp`, case order within each figure). Each kept case
/// stays listed under the run that measured it: `old`'s own run, or a run `old` had kept from
/// before (a run whose cases were all re-run is dropped).
pub fn merge_reports(exp: &Experiment, old: Report, mut new: Report) -> Report {
    let rerun: BTreeSet<String> = new
        .figures
        .iter()
        .flat_map(|f| f.cases.iter().map(move |c| format!("{}:{}", f.id, c.id)))
        .collect();
    let mut kept = Vec::new();
    for of in old.figures {
        let pos = new.figures.iter().position(|f| f.id == of.id);
        let nf = match pos {
            Some(i) => new.figures.get_mut(i),
            None => {
                new.figures.push(FigureResult {
                    id: of.id.clone(),
                    title: of.title.clone(),
                    table: of.table.clone(),
                    cases: Vec::new(),
                });
                new.figures.last_mut()
            }
        };
        let Some(nf) = nf else { continue };
        for c in of.cases {
            if nf.cases.iter().all(|n| n.id != c.id) {
                kept.push(format!("{}:{}", of.id, c.id));
                nf.cases.push(c);
            }
        }
    }
    let fig_order = |id: &str| {
        exp.figures
            .iter()
            .position(|f| f.id == id)
            .unwrap_or(usize::MAX)
    };
    new.figures.sort_by_key(|f| fig_order(&f.id));
    for f in &mut new.figures {
        let order: Vec<u32> = exp
            .figures
            .iter()
            .find(|d| d.id == f.id)
            .map(|d| d.cases.iter().map(|c| c.id).collect())
            .unwrap_or_default();
        f.cases
            .sort_by_key(|c| order.iter().position(|&i| i == c.id).unwrap_or(usize::MAX));
    }
    let older: BTreeSet<&String> = old.merged_runs.iter().flat_map(|m| &m.cases).collect();
    kept.retain(|c| !older.contains(c));
    new.merged_runs = old
        .merged_runs
        .into_iter()
        .filter_map(|mut m| {
            m.cases.retain(|c| !rerun.contains(c));
            (!m.cases.is_empty()).then_some(m)
        })
        .collect();
    if !kept.is_empty() {
        new.merged_runs.push(MergedRun {
            started: old.started,
            machine: old.machine,
            cases: kept,
        });
    }
    new
}

/// Writes `<name>.json`, `<name>.md` and one SVG per figure; returns the JSON and markdown paths.
fn write_report(report: &Report, out_dir: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(out_dir).with_context(|| format!("create {}", out_dir.display()))?;
    let json = out_dir.join(format!("{}.json", report.name));
    std::fs::write(&json, serde_json::to_string_pretty(report)?)?;
    let md = out_dir.join(format!("{}.md", report.name));
    std::fs::write(&md, plot::markdown(report))?;
    for f in &report.figures {
        let svg = out_dir.join(format!("{}-{}.svg", report.name, f.id));
        std::fs::write(&svg, plot::svg(f))?;
    }
    Ok((json, md))
}

/// Reads `<out_dir>/<name>.json`.
fn read_report(out_dir: &Path, name: &str) -> anyhow::Result<Report> {
    let path = out_dir.join(format!("{name}.json"));
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parse {}", path.display()))
}

/// Rewrites the markdown and SVGs of `<out_dir>/<name>.json` without running anything.
pub fn replot(name: &str, out_dir: &Path) -> anyhow::Result<Report> {
    let report = read_report(out_dir, name)?;
    let (json, md) = write_report(&report, out_dir)?;
    println!(
        "rewrote {} and {} plot(s) from {}",
        md.display(),
        report.figures.len(),
        json.display()
    );
    Ok(report)
}

/// The bottleneck-only view of a case: what the bottlenecks and branch 1's two 40 Mbit/s ports
/// leave (IP Mbit/s), for IPoMP (every member of every used group) and for the baseline (the
/// direct member of every used group). Groups used: with round robin over `groups`, `connections`
/// connections use `min(connections, groups)` of them. TCP background (Case B) has no such bound:
/// both are `NaN`.
pub fn model(case: &Case, routes: &BTreeMap<(u8, u8), String>) -> (f64, f64) {
    if case.background == Background::Tcp {
        return (f64::NAN, f64::NAN);
    }
    let used = case.connections.min(u32::from(case.groups));
    let mut ipomp: BTreeMap<String, f64> = BTreeMap::new();
    let mut base: BTreeMap<String, f64> = BTreeMap::new();
    for g in 1..=case.groups {
        if u32::from(g) > used {
            break;
        }
        let vals = case
            .values
            .get(usize::from(g - 1))
            .copied()
            .unwrap_or([0.0; 4]);
        let mut direct_done = false;
        for (m, v) in (1u8..).zip(vals) {
            let Some(route) = routes.get(&(g, m)) else {
                continue;
            };
            let port = route.split('>').next().unwrap_or("").to_owned();
            *ipomp.entry(port.clone()).or_default() += v;
            if !direct_done && route.matches('>').count() == 1 {
                *base.entry(port).or_default() += v;
                direct_done = true;
            }
        }
    }
    let cap = |m: BTreeMap<String, f64>| m.values().map(|v| v.min(PORT_MBIT)).sum();
    (cap(ipomp), cap(base))
}

/// The first WAN hop of a member route: `1b>3b>3a>2a` → (`1b`, `3b`).
fn first_hop(route: &str) -> anyhow::Result<(String, String)> {
    let mut it = route.split('>');
    match (it.next(), it.next()) {
        (Some(a), Some(b)) => Ok((a.to_owned(), b.to_owned())),
        _ => bail!("member route {route:?} has no WAN hop"),
    }
}

/// The direct member route of group `g` (one WAN hop).
fn direct_hop(routes: &BTreeMap<(u8, u8), String>, g: u8) -> anyhow::Result<String> {
    routes
        .range((g, 0)..=(g, u8::MAX))
        .map(|(_, r)| r)
        .find(|r| r.matches('>').count() == 1)
        .cloned()
        .with_context(|| format!("path group {g} has no direct member"))
}

/// Index (1..=16) of member `m` of group `g`: its background hosts' address pair.
fn member_index(g: u8, m: u8) -> u8 {
    (g - 1) * 4 + m
}

/// Every member path of the case's groups with its value: (group, member, value).
fn members(case: &Case) -> Vec<(u8, u8, f64)> {
    (1..=case.groups)
        .zip(&case.values)
        .flat_map(|(g, vals)| (1u8..).zip(*vals).map(move |(m, v)| (g, m, v)))
        .collect()
}

/// Sets every member bottleneck of the case's groups.
fn apply_case(
    prefix: &str,
    case: &Case,
    routes: &BTreeMap<(u8, u8), String>,
) -> anyhow::Result<()> {
    for (g, m, v) in members(case) {
        let route = routes
            .get(&(g, m))
            .with_context(|| format!("the paths file has no member {m} in group {g}"))?;
        let (from, to) = first_hop(route)?;
        let (rate, background) = match case.background {
            Background::Meter => (v, None),
            Background::Udp => (
                case.bottleneck_mbit,
                (v < case.bottleneck_mbit).then_some(case.bottleneck_mbit - v),
            ),
            Background::Tcp => (case.bottleneck_mbit, None),
        };
        let imp = Impairment {
            rate_mbit: Some(rate),
            background_mbit: background,
            queue_kib: case.queue_kib,
            ..Impairment::default()
        };
        let shared = if case.background == Background::Tcp {
            vec![background::addr_pair(member_index(g, m))]
        } else {
            Vec::new()
        };
        testbed::pair_set_shared(prefix, &from, &to, true, &imp, &shared)
            .with_context(|| format!("set bottleneck {from}>{to}"))?;
    }
    std::thread::sleep(SETTLE);
    Ok(())
}

/// Seconds the background flows run before a measurement starts (slow start, queues filled).
const BACKGROUND_WARMUP: Duration = Duration::from_secs(3);
/// Seconds a measurement with background TCP takes beyond its traffic and warm-up, per member
/// bottleneck that carries background flows (starting and stopping its iperf3 pairs; iperf3's
/// control connection crosses the congested tunnel), for the runtime estimate. Measured
/// 2026-11-28: Fig. 11(c) (8 members) 19.3 s per measurement of 8 + 2 s, Fig. 11(a) (16 members)
/// 26.8 s; the estimate without this term said 13 s for both.
const BACKGROUND_MEMBER_SECS: f64 = 0.7;
/// How much longer than a measurement's traffic the background flows are started for.
const BACKGROUND_SPARE_SECS: u32 = 120;

/// Runs `measure` with the case's background TCP flows running across every member bottleneck
/// (Case B), or plainly.
fn with_background<T>(
    bg: Option<&mut background::BackgroundHosts>,
    case: &Case,
    secs: u32,
    measure: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let Some(bg) = bg else {
        return measure();
    };
    for (g, m, v) in members(case) {
        // Whole numbers in 0..=64 (validated). Far longer than the measurement: they are
        // stopped by PID after it, and a measurement can take much longer than its -t (iperf3's
        // control connection crosses the congested tunnel too); with `secs + 10` the flows
        // ended during measurements (`check_running`).
        bg.start(member_index(g, m), v as u32, secs + BACKGROUND_SPARE_SECS)?;
    }
    std::thread::sleep(BACKGROUND_WARMUP);
    let r = measure();
    let running = bg.check_running();
    bg.stop();
    let r = r?;
    running?;
    Ok(r)
}

/// One iperf3 TCP run h1 → h2 with `conns` connections; receiver goodput in Mbit/s.
fn tcp_run(sys: &System, conns: u32, secs: u32, omit: u32, port: u16) -> anyhow::Result<f64> {
    let dst = sys.host_addr(2).to_string();
    let server = iperf::Server::start(&sys.ns_host(2), port, None)?;
    let (t, o, p, n) = (
        secs.to_string(),
        omit.to_string(),
        port.to_string(),
        conns.to_string(),
    );
    let v = iperf::client(
        &sys.ns_host(1),
        &["-c", &dst, "-p", &p, "-t", &t, "-O", &o, "-P", &n],
    )?;
    server.wait(Duration::from_secs(3));
    iperf::tcp_received_mbps(&v).with_context(|| {
        format!(
            "iperf3 reported no receiver rate (its error: {})",
            v.get("error")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("none")
        )
    })
}

/// Runs one measurement, and once more when it fails: one lost iperf3 run (e.g. its control
/// connection under load) must not end a campaign of hours. The second failure is returned.
/// After a stop signal ([`crate::stop`]) the failure is returned at once.
fn twice<T>(what: &str, mut run: impl FnMut() -> anyhow::Result<T>) -> anyhow::Result<T> {
    run().or_else(|e| {
        crate::stop::check()?;
        eprintln!("warning: {what} failed ({e:#}); running it once more");
        run()
    })
}

/// One iperf3 UDP run h1 → h2 offered at `mbit`; received Mbit/s.
fn udp_run(sys: &System, mbit: f64, secs: u32, port: u16) -> anyhow::Result<f64> {
    let dst = sys.host_addr(2).to_string();
    let server = iperf::Server::start(&sys.ns_host(2), port, None)?;
    let (t, p, b) = (secs.to_string(), port.to_string(), format!("{mbit}M"));
    let v = iperf::client(
        &sys.ns_host(1),
        &["-c", &dst, "-p", &p, "-u", "-b", &b, "-l", "1300", "-t", &t],
    )?;
    server.wait(Duration::from_secs(3));
    v.pointer("/end/sum_received/bits_per_second")
        .and_then(serde_json::Value::as_f64)
        .map(|b| b / 1e6)
        .context("iperf3 reported no UDP receiver rate")
}

/// The log directory of the `k`-th system (from 1) of an experiment whose systems are brought up
/// with `o`: `system-<k>-<groups>g` inside the default one ([`e2e::Options::log_dir`]).
fn system_log_dir(o: &e2e::Options, k: usize, groups: u8) -> PathBuf {
    o.log_dir().join(format!("system-{k}-{groups}g"))
}

/// The paths file for `groups` groups of `paths` (groups 1..=n only), written into `dir`.
fn paths_subset(root: &Path, paths: &str, groups: u8, dir: &Path) -> anyhow::Result<PathBuf> {
    let text =
        std::fs::read_to_string(root.join(paths)).with_context(|| format!("read {paths}"))?;
    let mut v: toml::Value = toml::from_str(&text).with_context(|| format!("parse {paths}"))?;
    let list = v
        .get_mut("groups")
        .and_then(toml::Value::as_array_mut)
        .with_context(|| format!("{paths}: no [[groups]]"))?;
    list.retain(|g| {
        g.get("id")
            .and_then(toml::Value::as_integer)
            .is_some_and(|id| id >= 1 && id <= i64::from(groups))
    });
    if list.len() != usize::from(groups) {
        bail!(
            "{paths} has {} of the {groups} groups asked for",
            list.len()
        );
    }
    std::fs::create_dir_all(dir)?;
    let out = dir.join(format!(
        "paths-{}-{groups}.toml",
        Path::new(paths)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("paths")
    ));
    std::fs::write(&out, toml::to_string(&v)?)?;
    Ok(out)
}

/// Machine facts for the report.
fn machine() -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let cmd = |p: &str, a: &[&str]| crate::sh::run(p, a).map(|s| s.trim().to_owned()).ok();
    if let Some(k) = cmd("uname", &["-r"]) {
        m.insert("kernel".to_owned(), k);
    }
    if let Some(n) = cmd("nproc", &[]) {
        m.insert("cpus".to_owned(), n);
    }
    if let Ok(l) = std::fs::read_to_string("/proc/loadavg") {
        m.insert(
            "loadavg_at_start".to_owned(),
            l.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
        );
    }
    m
}

fn fmt_duration(secs: u64) -> String {
    if secs >= 3600 {
        format!("{}h{:02}m", secs / 3600, secs % 3600 / 60)
    } else {
        format!("{}m{:02}s", secs / 60, secs % 60)
    }
}

/// Estimated seconds of one case: `reps` × (IPoMP, baseline and, with `udp`, UDP over IPoMP)
/// measurements of `secs` + `omit` each, plus their overhead and the bottleneck change. With
/// background TCP (Case B) every measurement also starts and stops the background flows:
/// [`BACKGROUND_WARMUP`] plus [`BACKGROUND_MEMBER_SECS`] per member bottleneck that carries them.
fn case_estimate_secs(secs: u32, omit: u32, reps: u32, udp: bool, case: &Case) -> u64 {
    let background = match case.background {
        Background::Tcp => {
            let loaded = members(case).iter().filter(|(_, _, v)| *v > 0.0).count() as f64;
            (BACKGROUND_WARMUP.as_secs_f64() + BACKGROUND_MEMBER_SECS * loaded).round() as u64
        }
        Background::Meter | Background::Udp => 0,
    };
    let per_measure = u64::from(secs + omit) + MEASURE_OVERHEAD_SECS + background;
    u64::from(reps) * (2 + u64::from(udp)) * per_measure + 1
}

/// Runs experiment `name`; writes the JSON, markdown and SVGs; returns the report.
pub fn run(name: &str, opts: &RunOptions) -> anyhow::Result<Report> {
    crate::deps::ensure()?;
    let exp = Experiment::load(&opts.root, name)?;
    let secs = opts.secs.unwrap_or(exp.secs);
    let omit = exp.omit_secs;
    let reps = opts.reps.unwrap_or(exp.reps).max(1);

    // Every selected case, grouped by the system it needs (paths file, group count) in order of
    // first appearance: one system per group, brought up once.
    let mut plan: Vec<(SystemKey, Vec<(usize, Case)>)> = Vec::new();
    let mut figures: Vec<FigureResult> = Vec::new();
    for (fi, f) in exp.figures.iter().enumerate() {
        if opts.figures.as_ref().is_some_and(|s| !s.contains(&f.id)) {
            continue;
        }
        figures.push(FigureResult {
            id: f.id.clone(),
            title: f.title.clone(),
            table: f.table.clone(),
            cases: Vec::new(),
        });
        let paths = f
            .paths
            .clone()
            .unwrap_or_else(|| "examples/paths-paper-table2.toml".to_owned());
        for mut c in f.resolve()? {
            if opts.cases.as_ref().is_some_and(|s| !s.contains(&c.id)) {
                continue;
            }
            c.connections_per_group = opts.connections_per_group;
            let key = (paths.clone(), c.groups);
            match plan.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push((fi, c)),
                None => plan.push((key, vec![(fi, c)])),
            }
        }
    }
    let n_cases: usize = plan.iter().map(|(_, v)| v.len()).sum();
    if n_cases == 0 {
        bail!("no case selected (check --figures / --cases)");
    }
    let estimate: u64 = plan.len() as u64 * SYSTEM_UP_SECS
        + plan
            .iter()
            .flat_map(|(_, v)| v.iter())
            .map(|(fi, c)| {
                let udp = exp
                    .figures
                    .get(*fi)
                    .is_some_and(|f| f.udp_offered_mbit.is_some());
                case_estimate_secs(secs, omit, reps, udp, c)
            })
            .sum::<u64>();
    println!(
        "experiment {name}: {n_cases} cases, {reps} rep(s) of {secs} s (+{omit} s warm-up) each for \
         IPoMP and the baseline, {} system(s): expect about {} (plus the first release build of \
         mmsg and ssc)",
        plan.len(),
        fmt_duration(estimate)
    );

    let started = Instant::now();
    let started_utc = crate::sh::utc_now();
    let machine = machine();
    let mut results: Vec<(usize, CaseResult)> = Vec::new();
    let mut done = 0usize;
    let tmp = std::env::temp_dir().join(format!("mms-exp-{}", opts.prefix));
    crate::stop::install();
    // One closure for every system of the plan, so that on an error or a stop signal the
    // systems are torn down (their `Drop`) and the cases finished so far are still written.
    let outcome = (|| -> anyhow::Result<()> {
        for (k, ((paths, groups), cases)) in plan.iter().enumerate() {
            crate::stop::check()?;
            let mut o = e2e::Options::new(&opts.root, &opts.prefix);
            o.paths = Some(paths_subset(&opts.root, paths, *groups, &tmp)?);
            o.connections_per_group = opts.connections_per_group;
            // Each system keeps its own logs (the next bring-up would overwrite them).
            o.log_dir = Some(system_log_dir(&o, k + 1, *groups));
            println!(
                "bringing up the system with {groups} path group(s) from {paths} (logs in {}) ...",
                o.log_dir().display()
            );
            let sys = System::up(&o)?;
            let hops = (1..=*groups)
                .map(|g| direct_hop(&sys.routes, g))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let mut bg_hosts = if cases.iter().any(|(_, c)| c.background == Background::Tcp) {
                Some(background::BackgroundHosts::up(&sys.prefix)?)
            } else {
                None
            };
            for (fi, case) in cases {
                crate::stop::check()?;
                let udp_offered = exp.figures.get(*fi).and_then(|f| f.udp_offered_mbit);
                apply_case(&sys.prefix, case, &sys.routes)?;
                let (mut ip, mut bl, mut udp) = (Vec::new(), Vec::new(), Vec::new());
                for rep in 0..reps {
                    // Alternate the order, so neither side always runs first.
                    let port = 5400 + u16::try_from(rep % 100).unwrap_or(0) * 4;
                    let ipomp_first = rep % 2 == 0;
                    let tcp_bg = case.background == Background::Tcp;
                    for side in [ipomp_first, !ipomp_first] {
                        crate::stop::check()?;
                        if side {
                            ip.push(twice("the IPoMP run", || {
                                let bg = bg_hosts.as_mut().filter(|_| tcp_bg);
                                with_background(bg, case, secs + omit, || {
                                    tcp_run(&sys, case.connections, secs, omit, port)
                                })
                            })?);
                        } else {
                            baseline::up_round_robin(&sys.prefix, &hops)?;
                            let r = twice("the baseline run", || {
                                let bg = bg_hosts.as_mut().filter(|_| tcp_bg);
                                with_background(bg, case, secs + omit, || {
                                    tcp_run(&sys, case.connections, secs, omit, port + 1)
                                })
                            });
                            baseline::down(&sys.prefix)?;
                            bl.push(r?);
                        }
                    }
                    if let Some(offered) = udp_offered {
                        udp.push(twice("the UDP run", || {
                            udp_run(&sys, offered, secs, port + 2)
                        })?);
                    }
                }
                done += 1;
                let (model_ip, model_bl) = model(case, &sys.routes);
                let (ipomp, base) = (
                    Spread::of(&ip).context("no IPoMP result")?,
                    Spread::of(&bl).context("no baseline result")?,
                );
                let elapsed = started.elapsed().as_secs();
                let eta = elapsed * (n_cases - done) as u64 / done as u64;
                println!(
                "[{done}/{n_cases}] {} case {}: {} ({} conn.): IPoMP {:.1} Mbit/s, baseline {:.1} \
                 Mbit/s ({}){}   elapsed {}, left ~{}",
                case.figure,
                case.id,
                plot::describe_case(case),
                case.connections,
                ipomp.median,
                base.median,
                plot::fmt_ratio(ipomp.median / base.median),
                Spread::of(&udp)
                    .map(|u| format!(", UDP {:.1}", u.median))
                    .unwrap_or_default(),
                fmt_duration(elapsed),
                fmt_duration(eta)
            );
                results.push((
                    *fi,
                    CaseResult {
                        figure: case.figure.clone(),
                        id: case.id,
                        ipomp_mbps: ipomp.median,
                        baseline_mbps: base.median,
                        ratio: ipomp.median / base.median,
                        paper_ipomp_mbps: case.def.paper_ipomp_mbps,
                        paper_udp_mbps: case.def.paper_udp_mbps,
                        paper_e2e_mptcp_mbps: case.def.paper_e2e_mptcp_mbps,
                        ipomp,
                        baseline: base,
                        udp: Spread::of(&udp),
                        e2e_mptcp_mbps: None,
                        model_ipomp_mbps: model_ip,
                        model_baseline_mbps: model_bl,
                        settings: case.clone(),
                    },
                ));
            }
            drop(bg_hosts);
            drop(sys);
        }
        crate::stop::check()?;
        // End-to-end MPTCP (Table I's last column) on its own 2x2 testbed, without MMS.
        if !opts.skip_e2e_mptcp {
            let wanted = |fi: usize| exp.figures.get(fi).is_some_and(|f| f.e2e_mptcp);
            let rates: Vec<[f64; 4]> = results
                .iter()
                .filter(|(fi, _)| wanted(*fi))
                .map(|(_, r)| r.settings.values.first().copied().unwrap_or([0.0; 4]))
                .collect();
            if !rates.is_empty() {
                println!("end-to-end MPTCP between the gateways (2x2 testbed, no MMS) ...");
                let mut e2e =
                    table1::e2e_mptcp(&format!("{}m", opts.prefix), &rates, secs)?.into_iter();
                for (fi, r) in &mut results {
                    if wanted(*fi) {
                        r.e2e_mptcp_mbps = e2e.next().flatten();
                    }
                }
            }
        }

        Ok(())
    })();
    let head = Head {
        started_utc,
        started,
        secs,
        omit,
        reps,
        machine,
    };
    if let Err(e) = outcome {
        return Err(interrupted(e, &exp, opts, &plan, results, figures, head));
    }
    let (report, json, md) = save(&exp, opts, head.report(&exp, figures, results))?;
    println!("{}", plot::markdown(&report));
    println!(
        "wrote {}, {} and {} plot(s) in {} ({})",
        json.display(),
        md.display(),
        report.figures.len(),
        opts.out_dir.display(),
        fmt_duration(started.elapsed().as_secs())
    );
    Ok(report)
}

/// What a run's report says about the run itself.
struct Head {
    started_utc: String,
    started: Instant,
    secs: u32,
    omit: u32,
    reps: u32,
    machine: BTreeMap<String, String>,
}

impl Head {
    /// The report of `results`, each in its figure of `figures` (figures without a case left
    /// out).
    fn report(
        self,
        exp: &Experiment,
        mut figures: Vec<FigureResult>,
        results: Vec<(usize, CaseResult)>,
    ) -> Report {
        for (_, r) in results {
            if let Some(f) = figures.iter_mut().find(|f| f.id == r.figure) {
                f.cases.push(r);
            }
        }
        figures.retain(|f| !f.cases.is_empty());
        Report {
            name: exp.name.clone(),
            title: exp.title.clone(),
            started: self.started_utc,
            duration_secs: self.started.elapsed().as_secs_f64(),
            secs: self.secs,
            omit_secs: self.omit,
            reps: self.reps,
            machine: self.machine,
            figures,
            merged_runs: Vec::new(),
        }
    }
}

/// Writes `report` (merged into the existing `<name>.json` with `--merge`): the report as
/// written, and the JSON and markdown paths.
fn save(
    exp: &Experiment,
    opts: &RunOptions,
    report: Report,
) -> anyhow::Result<(Report, PathBuf, PathBuf)> {
    let report = if opts.merge && opts.out_dir.join(format!("{}.json", exp.name)).exists() {
        match read_report(&opts.out_dir, &exp.name) {
            Ok(old) => merge_reports(exp, old, report),
            Err(e) => return Err(keep_unmerged(&report, &opts.out_dir, e)),
        }
    } else {
        report
    };
    let (json, md) = write_report(&report, &opts.out_dir)?;
    Ok((report, json, md))
}

/// The error of a `--merge` whose existing report cannot be read: this run's cases are written
/// beside it (`<name>.unmerged.json`) instead of being lost, and the error says where.
fn keep_unmerged(report: &Report, out_dir: &Path, e: anyhow::Error) -> anyhow::Error {
    let side = out_dir.join(format!("{}.unmerged.json", report.name));
    let kept = serde_json::to_string_pretty(report)
        .map_err(anyhow::Error::from)
        .and_then(|t| std::fs::write(&side, t).map_err(anyhow::Error::from));
    match kept {
        Ok(()) => e.context(format!(
            "cannot merge into the existing report; this run's cases are in {} (rename it to \
             {}.json to use it alone)",
            side.display(),
            report.name
        )),
        Err(w) => e.context(format!(
            "cannot merge into the existing report, and this run's cases could not be written \
             to {} either: {w:#}",
            side.display()
        )),
    }
}

/// The error of a run that failed or was stopped ([`crate::stop`]) after its systems were torn
/// down: the cases finished so far are written as a normal run would write them, and the error
/// says which cases are left and the command that runs them.
fn interrupted(
    e: anyhow::Error,
    exp: &Experiment,
    opts: &RunOptions,
    plan: &[(SystemKey, Vec<(usize, Case)>)],
    results: Vec<(usize, CaseResult)>,
    figures: Vec<FigureResult>,
    head: Head,
) -> anyhow::Error {
    let e = match crate::stop::requested() {
        Some(s) => anyhow::anyhow!("stopped by {s}; the testbed is torn down"),
        None => e,
    };
    let finished: BTreeSet<(String, u32)> = results
        .iter()
        .map(|(_, r)| (r.figure.clone(), r.id))
        .collect();
    let mut left: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for (_, c) in plan.iter().flat_map(|(_, v)| v) {
        if !finished.contains(&(c.figure.clone(), c.id)) {
            left.entry(c.figure.as_str()).or_default().push(c.id);
        }
    }
    let resume: Vec<String> = left
        .iter()
        .map(|(f, ids)| {
            format!(
                "`cargo xtask experiment {} --figures {f} --cases {} --merge --out {}`",
                exp.name,
                def::case_list(ids),
                opts.out_dir.display()
            )
        })
        .collect();
    let written = if results.is_empty() {
        "no case finished".to_owned()
    } else {
        let n = results.len();
        match save(exp, opts, head.report(exp, figures, results)) {
            Ok((_, json, _)) => format!("the {n} finished case(s) are in {}", json.display()),
            Err(w) => format!("the {n} finished case(s) could not be written: {w:#}"),
        }
    };
    let rest = if resume.is_empty() {
        "every case had finished".to_owned()
    } else {
        format!(
            "the rest runs with {} (add --reps and --prefix as before)",
            resume.join(" and ")
        )
    };
    e.context(format!("{written}; {rest}"))
}

/// The experiment files under `experiments/`: (name, title, cases).
pub fn list(root: &Path) -> anyhow::Result<Vec<(String, String, usize)>> {
    let mut out = Vec::new();
    let dir = root.join("experiments");
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    entries.sort();
    for p in entries {
        let name = p
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_owned();
        let e = Experiment::load(root, &name)?;
        let n = e.figures.iter().map(|f| f.cases.len()).sum();
        out.push((name, e.title, n));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_system_of_a_run_keeps_its_own_log_directory() {
        let o = e2e::Options::new(Path::new("."), "mmsexp");
        let a = system_log_dir(&o, 1, 4);
        let b = system_log_dir(&o, 2, 2);
        assert_ne!(a, b);
        assert!(a.ends_with("mms-e2e-mmsexp/system-1-4g"), "{}", a.display());
        assert_eq!(a.parent(), b.parent());
        // The gateway channel's socket inside it must fit a unix socket path (108 bytes).
        assert!(a.join("ssc-gw.sock").as_os_str().len() < 100);
    }

    fn table2() -> BTreeMap<(u8, u8), String> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        e2e::member_routes(
            &std::fs::read_to_string(root.join("examples/paths-paper-table2.toml")).unwrap(),
        )
        .unwrap()
    }

    fn case(groups: u8, connections: u32, values: Vec<[f64; 4]>) -> Case {
        Case {
            figure: "f".into(),
            id: 1,
            groups,
            connections,
            background: Background::Udp,
            bottleneck_mbit: 100.0,
            queue_kib: None,
            values,
            connections_per_group: 1,
            def: def::CaseDef {
                id: 1,
                ..def::CaseDef::default()
            },
        }
    }

    #[test]
    fn model_caps_at_the_ports_and_counts_direct_hops_for_the_baseline() {
        let r = table2();
        // All 2 Mbit/s over 4 groups: 32 for IPoMP (16 per port), 8 for the baseline: 4x.
        assert_eq!(model(&case(4, 4, vec![[2.0; 4]; 4]), &r), (32.0, 8.0));
        // All 8: 128 left by the bottlenecks, but branch 1 has 2 x 40.
        assert_eq!(model(&case(4, 8, vec![[8.0; 4]; 4]), &r), (80.0, 32.0));
        // One connection uses one group.
        assert_eq!(model(&case(4, 1, vec![[2.0; 4]; 4]), &r), (8.0, 2.0));
        // Per member values: group 1's direct member is member 1.
        assert_eq!(
            model(&case(1, 4, vec![[8.0, 6.0, 4.0, 2.0]]), &r),
            (20.0, 8.0)
        );
    }

    fn result(figure: &str, id: u32, ipomp: f64) -> CaseResult {
        let spread = |v: f64| Spread::of(&[v]).unwrap();
        CaseResult {
            figure: figure.into(),
            id,
            settings: case(4, 4, vec![[2.0; 4]; 4]),
            ipomp_mbps: ipomp,
            baseline_mbps: 1.0,
            paper_ipomp_mbps: None,
            ipomp: spread(ipomp),
            baseline: spread(1.0),
            udp: None,
            paper_udp_mbps: None,
            e2e_mptcp_mbps: None,
            paper_e2e_mptcp_mbps: None,
            model_ipomp_mbps: 32.0,
            model_baseline_mbps: 8.0,
            ratio: ipomp,
        }
    }

    fn report(started: &str, figures: Vec<(&str, Vec<CaseResult>)>) -> Report {
        Report {
            name: "case-a".into(),
            title: "t".into(),
            started: started.into(),
            duration_secs: 1.0,
            secs: 8,
            omit_secs: 2,
            reps: 1,
            machine: BTreeMap::new(),
            figures: figures
                .into_iter()
                .map(|(id, cases)| FigureResult {
                    id: id.into(),
                    title: id.into(),
                    table: "T".into(),
                    cases,
                })
                .collect(),
            merged_runs: Vec::new(),
        }
    }

    #[test]
    fn merge_keeps_old_cases_replaces_rerun_ones_in_file_order() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let exp = Experiment::load(&root, "case-a").unwrap();
        let old = report(
            "old",
            vec![
                ("fig10b", vec![result("fig10b", 1, 5.0)]),
                (
                    "fig10a",
                    vec![result("fig10a", 1, 1.0), result("fig10a", 3, 3.0)],
                ),
            ],
        );
        let new = report(
            "new",
            vec![(
                "fig10a",
                vec![result("fig10a", 3, 30.0), result("fig10a", 2, 20.0)],
            )],
        );
        // Runs the old report had kept: one whose case is re-run now, one whose case is not.
        let mut old = old;
        old.merged_runs = vec![
            MergedRun {
                started: "older".into(),
                machine: BTreeMap::new(),
                cases: vec!["fig10b:1".into()],
            },
            MergedRun {
                started: "oldest".into(),
                machine: BTreeMap::new(),
                cases: vec!["fig10a:3".into()],
            },
        ];
        let m = merge_reports(&exp, old, new);
        let ids: Vec<(String, Vec<(u32, f64)>)> = m
            .figures
            .iter()
            .map(|f| {
                (
                    f.id.clone(),
                    f.cases.iter().map(|c| (c.id, c.ipomp_mbps)).collect(),
                )
            })
            .collect();
        assert_eq!(
            ids,
            vec![
                ("fig10a".to_owned(), vec![(1, 1.0), (2, 20.0), (3, 30.0)]),
                ("fig10b".to_owned(), vec![(1, 5.0)]),
            ]
        );
        assert_eq!(m.started, "new");
        let runs: Vec<(&str, Vec<&str>)> = m
            .merged_runs
            .iter()
            .map(|r| {
                (
                    r.started.as_str(),
                    r.cases.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            runs,
            vec![("older", vec!["fig10b:1"]), ("old", vec!["fig10a:1"])],
            "each kept case under the run that measured it; a run whose cases were re-run is gone"
        );
        // The report survives a JSON round trip (what --merge and --replot read back).
        let back: Report = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back.figures.len(), 2);
        assert_eq!(back.merged_runs.len(), 2);
    }

    #[test]
    fn a_report_without_a_model_or_with_a_zero_baseline_reads_back() {
        // TCP background has no model (NaN) and a baseline of 0 gives an infinite ratio; JSON
        // writes both as null. `--merge` once failed on such a report after a 25-minute run.
        let mut c = result("fig12b", 1, 2.0);
        c.model_ipomp_mbps = f64::NAN;
        c.model_baseline_mbps = f64::NAN;
        c.baseline_mbps = 0.0;
        c.ratio = f64::INFINITY;
        let r = report("new", vec![("fig12b", vec![c])]);
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains("\"model_ipomp_mbps\":null"), "{text}");
        let back: Report = serde_json::from_str(&text).unwrap();
        let c = &back.figures[0].cases[0];
        assert!(c.model_ipomp_mbps.is_nan() && c.model_baseline_mbps.is_nan());
        assert!(c.ratio.is_nan(), "an infinite ratio reads back as unknown");
        assert_eq!(c.ipomp_mbps, 2.0);
    }

    #[test]
    fn a_merge_into_an_unreadable_report_keeps_the_run() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("case-a.json"), "{ not a report").unwrap();
        let r = report("new", vec![("fig10a", vec![result("fig10a", 1, 3.0)])]);
        let e = keep_unmerged(&r, dir.path(), anyhow::anyhow!("parse case-a.json"));
        let msg = format!("{e:#}");
        assert!(
            msg.contains("case-a.unmerged.json") && msg.contains("parse"),
            "{msg}"
        );
        let kept: Report = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("case-a.unmerged.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(kept.figures[0].cases[0].ipomp_mbps, 3.0);
    }

    #[test]
    fn hops_of_table2() {
        let r = table2();
        assert_eq!(first_hop(&r[&(1, 2)]).unwrap(), ("1b".into(), "3b".into()));
        assert_eq!(direct_hop(&r, 3).unwrap(), "1b>2a");
        // Every member's first hop is its own: one bottleneck per member path.
        let hops: BTreeSet<_> = r.values().map(|v| first_hop(v).unwrap()).collect();
        assert_eq!(hops.len(), 16);
    }

    #[test]
    fn the_estimate_counts_the_background_flows_start_and_stop() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let exp = Experiment::load(root, "case-b").unwrap();
        let fig = |id: &str| {
            let f = exp.figures.iter().find(|f| f.id == id).unwrap();
            f.resolve().unwrap().remove(0)
        };
        // Fig. 11(a): 16 loaded members, 3 + 0.7 × 16 ≈ 14 s more per measurement of 8 + 2 s:
        // 6 × 27 s (measured 2026-11-28: 161 s for case 2, 3 reps).
        assert_eq!(
            case_estimate_secs(8, 2, 3, false, &fig("fig11a")),
            6 * 27 + 1
        );
        // Fig. 11(c): 8 members, 3 + 5.6 ≈ 9 s more (measured 19.3 s per measurement).
        assert_eq!(
            case_estimate_secs(8, 2, 3, false, &fig("fig11c")),
            6 * 22 + 1
        );
        // Without background TCP nothing is added.
        let table1 = Experiment::load(root, "table1").unwrap();
        let c = table1.figures[0].resolve().unwrap().remove(0);
        assert_eq!(case_estimate_secs(10, 2, 3, true, &c), 9 * 15 + 1);
    }

    #[test]
    fn spread_is_min_median_max() {
        let s = Spread::of(&[3.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!((s.min, s.median, s.max), (1.0, 2.5, 10.0));
        assert_eq!(s.reps, vec![3.0, 1.0, 2.0, 10.0]);
        assert!(Spread::of(&[]).is_none());
    }
}
