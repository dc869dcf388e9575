//! `cargo xtask bench failover`: what an uplink cut does to traffic through the tunnel.
//!
//! On the 2x2 testbed (`examples/testbed-2x2.toml`, standalone `mmsg` with
//! `examples/mmsg-branch{1,2}.toml`) a bulk TCP flow and a 50 packet/s UDP "voice" stream (172 B,
//! sequence numbers, receive timestamps; [`probe`]) run from host 1 to host 2, and a ping
//! (`ping -D -i 0.02`) beside them, while each of the four WAN ports in turn is cut
//! (`testbed link cut`: both directions blackholed, carrier stays up) for `--hold` seconds and
//! then restored, with `--settle` seconds before the next cut. Per event (cut P, restore P) it
//! reports: `gap_ms` (the longer of the TCP flow's and the voice stream's longest receive gap in
//! the event's window), `udp_lost`, the ping's losses and worst RTT, and `recovered_mbps` (TCP
//! goodput over the last 2 s of the window) beside `before_mbps` (the 2 s before the event).
//!
//! After the cuts, `--restarts` events (default `restart1,restart2,kill1`): gateway b's `mmsg` is
//! stopped (SIGTERM: `mmsg_restart`; SIGKILL: `mmsg_kill9`) and started again at once with the
//! same config ([`gateways`]); the same keys, plus `tunnels_up_ms` (from the stop until every
//! connection of both gateways has its n × m subflows again).
//!
//! `--paper`: `ssc_restart`, `mmsg_restart` and `transit_killed` on the paper's testbed with OVS
//! and `ssc` instead ([`paper`]).
//!
//! The whole sequence runs twice in one run, alternating: `before` with `MMSG_FAILOVER=off` and
//! `MMSG_FAST_RECONNECT=off` (the gateway's subflow-health detector disabled and the reconnect
//! backoff doubling to 10 s also right after a lost connection: the behaviour before, the
//! kernel alone recovers) and `after` (both on: docs/mmsg.md "Failover", "Restart"), `--reps`
//! times each.

pub mod gateways;
pub mod paper;
pub mod probe;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context};
use serde::Serialize;

use crate::mmsg::{self, Profile};
use crate::testbed;
use crate::topology::{self, Topology};
use crate::{deps, sh};

/// The environment variable that switches `mmsg`'s failover detector off (`off`).
pub const FAILOVER_ENV: &str = "MMSG_FAILOVER";
/// The environment variable that switches `mmsg`'s fast reconnect after a lost connection off
/// (`off`: the backoff doubles up to 10 s, the behaviour before; docs/mmsg.md "Restart").
pub const FAST_RECONNECT_ENV: &str = "MMSG_FAST_RECONNECT";
/// TCP port of the bulk flow at host 2 (the voice stream uses the next one).
const PORT: u16 = 5400;
/// Traffic before the first cut.
const WARMUP: Duration = Duration::from_secs(4);
/// Goodput is averaged over this long at the end of a window (and before an event).
const RATE_WINDOW: Duration = Duration::from_secs(2);

/// Options of one run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Repository root.
    pub root: PathBuf,
    /// Testbed prefix.
    pub prefix: String,
    /// WAN ports to cut, in order (e.g. `1a`).
    pub ports: Vec<String>,
    /// How long each port stays cut.
    pub hold: Duration,
    /// How long after a restore before the next cut.
    pub settle: Duration,
    /// Repetitions of each mode (alternating before, after, before, ...).
    pub reps: u32,
    /// Run only the `after` mode (the CI test compares against a bound instead).
    pub after_only: bool,
    /// Restart events after the cuts, in order: `restart<b>` (gateway b's `mmsg` SIGTERMed and
    /// started again: event `mmsg_restart`) or `kill<b>` (SIGKILL: `mmsg_kill9`).
    pub restarts: Vec<String>,
    /// Run the restart events on the paper's testbed instead ([`paper`]).
    pub paper: bool,
}

impl Options {
    /// The defaults of `cargo xtask bench failover` on testbed `prefix`.
    pub fn new(root: &Path, prefix: &str) -> Options {
        Options {
            root: root.to_owned(),
            prefix: prefix.to_owned(),
            ports: ["1a", "1b", "2a", "2b"].map(str::to_owned).to_vec(),
            hold: Duration::from_secs(5),
            settle: Duration::from_secs(5),
            reps: 1,
            after_only: false,
            restarts: ["restart1", "restart2", "kill1"]
                .map(str::to_owned)
                .to_vec(),
            paper: false,
        }
    }
}

/// One event's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    /// `cut`, `restore`, `mmsg_restart` or `mmsg_kill9`.
    pub kind: String,
    /// The WAN port, e.g. `1a`, or the restarted gateway, e.g. `gw1`.
    pub port: String,
    /// Restarts: from the stop until every connection of both gateways had its n × m subflows
    /// again, ms (`None`: not within the window).
    pub tunnels_up_ms: Option<f64>,
    /// max(`tcp_gap_ms`, `udp_gap_ms`).
    pub gap_ms: f64,
    /// Longest time the TCP receiver got nothing, in the event's window.
    pub tcp_gap_ms: f64,
    /// Longest time between two voice packets at the receiver, in the event's window.
    pub udp_gap_ms: f64,
    /// Voice packets sent in the window.
    pub udp_sent: u64,
    /// Of those, never received.
    pub udp_lost: u64,
    /// Pings sent in the window.
    pub ping_sent: u64,
    /// Of those, unanswered.
    pub ping_lost: u64,
    /// Worst ping RTT in the window, ms.
    pub ping_max_ms: f64,
    /// TCP goodput in the 2 s before the event, Mbit/s.
    pub before_mbps: f64,
    /// TCP goodput in the last 2 s of the window, Mbit/s.
    pub recovered_mbps: f64,
}

/// One pass over every port in one mode.
#[derive(Debug, Clone, Serialize)]
pub struct ModeRun {
    /// `before` (detector off) or `after`.
    pub mode: String,
    /// Repetition (0-based).
    pub rep: u32,
    /// The TCP connection lasted the whole pass without an error.
    pub tcp_survived: bool,
    /// The error that ended it, if one did.
    pub tcp_error: Option<String>,
    /// The events, in order.
    pub events: Vec<Event>,
}

/// The JSON report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// When (UTC).
    pub utc: String,
    /// The topology file.
    pub testbed: String,
    /// Seconds each port stays cut / before the next cut.
    pub hold_s: f64,
    /// Seconds after a restore.
    pub settle_s: f64,
    /// 1-minute load average at the start (the machine is shared).
    pub load_1min: f64,
    /// Every pass.
    pub runs: Vec<ModeRun>,
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// One event's window on both clocks.
#[derive(Debug, Clone)]
struct Window {
    kind: &'static str,
    port: String,
    from: Instant,
    to: Instant,
    from_unix: f64,
    to_unix: f64,
}

/// What a pass acts on: the 2x2 testbed's ports and `mmsg`s, or the paper system ([`paper`]).
pub trait Target {
    /// Performs event `kind` on `port` (a WAN port, `gw<b>`, `ssc`); returns, for events that
    /// take tunnels down, how long until they were all up again (ms), if it waited for that.
    fn act(&mut self, kind: &str, port: &str) -> anyhow::Result<Option<f64>>;
}

/// One event of a pass: what, on which port or gateway, and how long from its start until the
/// next event.
#[derive(Debug, Clone)]
pub struct Step {
    /// Event kind (`cut`, `restore`, `mmsg_restart`, ...).
    pub kind: &'static str,
    /// Its port or gateway.
    pub port: String,
    /// Time from the event's start to the next one (at least what the action took).
    pub wait: Duration,
}

/// The 2x2 testbed's target: cuts through `testbed link`, restarts through [`gateways`].
struct TwoByTwo<'a> {
    prefix: &'a str,
    gws: &'a mut gateways::Gateways,
    settle: Duration,
}

impl Target for TwoByTwo<'_> {
    fn act(&mut self, kind: &str, port: &str) -> anyhow::Result<Option<f64>> {
        let t0 = Instant::now();
        match kind {
            "cut" | "restore" => testbed::link_cut(self.prefix, port, kind == "cut").map(|()| None),
            "mmsg_restart" | "mmsg_kill9" => {
                let b: u8 = port.trim_start_matches("gw").parse()?;
                let how = if kind == "mmsg_kill9" {
                    gateways::Stop::Kill
                } else {
                    gateways::Stop::Term
                };
                self.gws.restart(b, how)?;
                // Until the tunnels are whole again (not an error if they are not: the flows
                // measure the gap).
                Ok(self
                    .gws
                    .wait_all_subflows(self.settle.max(Duration::from_secs(10)))
                    .ok()
                    .map(|()| ms(t0.elapsed())))
            }
            _ => bail!("unknown event {kind}"),
        }
    }
}

/// A duration in ms with one decimal.
fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e4).round() / 10.0
}

/// The steps of a 2x2 pass: each port cut for `hold` and restored for `settle`, then the
/// restarts (`settle` each).
fn two_by_two_steps(opts: &Options) -> anyhow::Result<Vec<Step>> {
    let mut steps = Vec::new();
    for port in &opts.ports {
        steps.push(Step {
            kind: "cut",
            port: port.clone(),
            wait: opts.hold,
        });
        steps.push(Step {
            kind: "restore",
            port: port.clone(),
            wait: opts.settle,
        });
    }
    for r in &opts.restarts {
        let (kind, _, b) = parse_restart(r)?;
        steps.push(Step {
            kind,
            port: format!("gw{b}"),
            wait: opts.settle,
        });
    }
    Ok(steps)
}

/// Runs the flows from host 1 (`h1`) to host 2 (`h2`, address `dst`) and the `steps` on
/// `target`; returns the figures of every event.
pub fn run_pass(
    (h1, h2, dst): (&str, &str, std::net::Ipv4Addr),
    target: &mut dyn Target,
    steps: &[Step],
    mode: &str,
    rep: u32,
) -> anyhow::Result<ModeRun> {
    let mut ping = Command::new("ip")
        .args(["netns", "exec", h1, "ping", "-D", "-n", "-i", "0.02"])
        .arg(dst.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("start ping")?;
    // Read its output as it comes (a full pipe would block ping).
    let out = ping.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut so) = out {
            use std::io::Read as _;
            let _ = so.read_to_string(&mut text);
        }
        text
    });
    let ping = PingChild(Some(ping), Some(reader));
    let flows = probe::start(h1, h2, dst, PORT)?;
    std::thread::sleep(WARMUP);
    let mut windows: Vec<Window> = Vec::new();
    let mut tunnels_up: Vec<Option<f64>> = Vec::new();
    let mut result = Ok(());
    for step in steps {
        let (now, now_u) = (Instant::now(), unix_now());
        if let Some(w) = windows.last_mut() {
            w.to = now;
            w.to_unix = now_u;
        }
        windows.push(Window {
            kind: step.kind,
            port: step.port.clone(),
            from: now,
            to: now,
            from_unix: now_u,
            to_unix: now_u,
        });
        eprintln!("failover {mode}: {} {}", step.kind, step.port);
        match target.act(step.kind, &step.port) {
            Ok(up) => tunnels_up.push(up),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
        if let Some(rest) = step.wait.checked_sub(now.elapsed()) {
            std::thread::sleep(rest);
        }
    }
    // Close the last window.
    if let Some(w) = windows.last_mut() {
        w.to = Instant::now();
        w.to_unix = unix_now();
    }
    let rec = flows.stop();
    let ping_text = ping.finish();
    result?;
    let replies = probe::parse_ping(&ping_text);
    let tcp_times: Vec<Instant> = rec.tcp.reads.iter().map(|(t, _)| *t).collect();
    let mut voice_times: Vec<Instant> = rec.voice.received.iter().map(|(_, t)| *t).collect();
    voice_times.sort();
    let events = windows
        .iter()
        .zip(tunnels_up.iter().chain(std::iter::repeat(&None)))
        .map(|(w, &tunnels_up_ms)| {
            let tcp_gap = probe::longest_gap(&tcp_times, w.from, w.to);
            let udp_gap = probe::longest_gap(&voice_times, w.from, w.to);
            let (udp_sent, udp_lost) = probe::lost_in(&rec.voice, w.from, w.to);
            let (ping_sent, ping_lost, ping_max_ms) =
                probe::ping_in(&replies, w.from_unix, w.to_unix);
            Event {
                kind: w.kind.to_owned(),
                port: w.port.clone(),
                tunnels_up_ms,
                gap_ms: ms(tcp_gap.max(udp_gap)),
                tcp_gap_ms: ms(tcp_gap),
                udp_gap_ms: ms(udp_gap),
                udp_sent,
                udp_lost,
                ping_sent,
                ping_lost,
                ping_max_ms,
                before_mbps: probe::mbps_in(
                    &rec.tcp.reads,
                    w.from.checked_sub(RATE_WINDOW).unwrap_or(w.from),
                    w.from,
                ),
                recovered_mbps: probe::mbps_in(
                    &rec.tcp.reads,
                    w.to.checked_sub(RATE_WINDOW).unwrap_or(w.from).max(w.from),
                    w.to,
                ),
            }
        })
        .collect();
    let tcp_error = rec.tcp.error.or(rec.tcp_sender_error);
    // Data must have kept arriving up to the end (a silently stalled connection is lost too).
    let last_read = tcp_times.last().copied();
    let end = windows.last().map(|w| w.to);
    let stalled_at_end = match (last_read, end) {
        (Some(l), Some(e)) => e.saturating_duration_since(l) > Duration::from_secs(2),
        _ => true,
    };
    let tcp_error = tcp_error.or(stalled_at_end.then(|| "no TCP data in the last 2 s".to_owned()));
    Ok(ModeRun {
        mode: mode.to_owned(),
        rep,
        tcp_survived: tcp_error.is_none(),
        tcp_error,
        events,
    })
}

/// The ping child and the thread reading its output: interrupted by PID on
/// [`PingChild::finish`], killed on drop.
#[derive(Debug)]
struct PingChild(Option<Child>, Option<std::thread::JoinHandle<String>>);

impl PingChild {
    fn finish(mut self) -> String {
        let Some(mut c) = self.0.take() else {
            return String::new();
        };
        // SAFETY: kill(2) on the PID of the child we spawned (`ip netns exec` execs ping).
        unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGINT) };
        let _ = c.wait();
        self.1
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for PingChild {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Brings up the 2x2 testbed, runs every pass (alternating modes), always tears down.
pub fn run(opts: &Options) -> anyhow::Result<Report> {
    deps::ensure()?;
    if opts.paper {
        let load = sh::load_1min();
        let runs = paper::run(opts)?;
        return Ok(Report {
            utc: sh::utc_now(),
            testbed: "examples/testbed-paper.toml".to_owned(),
            hold_s: opts.hold.as_secs_f64(),
            settle_s: opts.settle.as_secs_f64(),
            load_1min: load,
            runs,
        });
    }
    let topo_file = "examples/testbed-2x2.toml";
    let topo = topology::parse(
        &std::fs::read_to_string(opts.root.join(topo_file)).context("read the 2x2 topology")?,
    )?;
    let mmsg_bin = mmsg::build_mmsg(&opts.root, Profile::Release)?;
    let load = sh::load_1min();
    let runs = testbed::run_on(&topo, &opts.prefix, || run_on(opts, &topo, &mmsg_bin))?;
    Ok(Report {
        utc: sh::utc_now(),
        testbed: topo_file.to_owned(),
        hold_s: opts.hold.as_secs_f64(),
        settle_s: opts.settle.as_secs_f64(),
        load_1min: load,
        runs,
    })
}

fn run_on(opts: &Options, topo: &Topology, mmsg_bin: &Path) -> anyhow::Result<Vec<ModeRun>> {
    let modes: &[(&str, bool)] = if opts.after_only {
        &[("after", true)]
    } else {
        &[("before", false), ("after", true)]
    };
    let steps = two_by_two_steps(opts)?;
    let mut runs = Vec::new();
    for rep in 0..opts.reps {
        for &(mode, on) in modes {
            let mut gws = gateways::Gateways::start(mmsg_bin, &opts.root, &opts.prefix, topo, on)?;
            let (h1, h2) = (
                testbed::ns_host(&opts.prefix, 1, 0),
                testbed::ns_host(&opts.prefix, 2, 0),
            );
            let mut target = TwoByTwo {
                prefix: &opts.prefix,
                gws: &mut gws,
                settle: opts.settle,
            };
            let r = run_pass(
                (&h1, &h2, testbed::host_addr(2, 0)),
                &mut target,
                &steps,
                mode,
                rep,
            );
            // Never leave a port cut (the next pass needs all four).
            for port in &opts.ports {
                let _ = testbed::link_cut(&opts.prefix, port, false);
            }
            drop(gws);
            keep_logs(&opts.prefix, mode, rep);
            let r = r?;
            print_run(&r);
            runs.push(r);
        }
    }
    Ok(runs)
}

/// Copies the gateways' logs of a pass out of the testbed's state directory (removed on
/// teardown) to `$TMPDIR/bench-failover-<prefix>/`.
fn keep_logs(prefix: &str, mode: &str, rep: u32) {
    let dir = std::env::temp_dir().join(format!("bench-failover-{prefix}"));
    let _ = std::fs::create_dir_all(&dir);
    let on = if mode == "after" { "on" } else { "off" };
    for b in [1u8, 2] {
        let from = gateways::log_path(prefix, b, on == "on");
        let _ = std::fs::copy(from, dir.join(format!("mmsg-gw{b}-{mode}-{rep}.log")));
    }
}

/// `restart<b>` / `kill<b>`: the event kind, how the gateway is stopped, which gateway.
fn parse_restart(s: &str) -> anyhow::Result<(&'static str, gateways::Stop, u8)> {
    let (kind, how, b) = if let Some(b) = s.strip_prefix("restart") {
        ("mmsg_restart", gateways::Stop::Term, b)
    } else if let Some(b) = s.strip_prefix("kill") {
        ("mmsg_kill9", gateways::Stop::Kill, b)
    } else {
        bail!("restart event {s:?}: want restart<branch> or kill<branch>")
    };
    match b.parse::<u8>() {
        Ok(b @ 1..=2) => Ok((kind, how, b)),
        _ => bail!("restart event {s:?}: the branch is 1 or 2"),
    }
}

/// Prints one pass as a table.
pub fn print_run(r: &ModeRun) {
    println!(
        "{} (rep {}): TCP connection {}",
        r.mode,
        r.rep,
        r.tcp_error
            .as_deref()
            .map_or("survived".to_owned(), |e| format!("LOST ({e})"))
    );
    println!(
        "{:<17} {:>8} {:>8} {:>8} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9}",
        "event",
        "gap ms",
        "tcp gap",
        "udp gap",
        "udp lost",
        "ping lost",
        "ping max",
        "before",
        "recov.",
        "tun. up"
    );
    for e in &r.events {
        println!(
            "{:<17} {:>8.0} {:>8.0} {:>8.0} {:>5}/{:<3} {:>6}/{:<3} {:>9.0} {:>9.1} {:>9.1} {:>9}",
            format!("{} {}", e.kind, e.port),
            e.gap_ms,
            e.tcp_gap_ms,
            e.udp_gap_ms,
            e.udp_lost,
            e.udp_sent,
            e.ping_lost,
            e.ping_sent,
            e.ping_max_ms,
            e.before_mbps,
            e.recovered_mbps,
            e.tunnels_up_ms
                .map_or("-".to_owned(), |t| format!("{t:.0}"))
        );
    }
}
