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
pub mod pass;
pub mod probe;

pub use gateways::{FAILOVER_ENV, FAST_RECONNECT_ENV};
pub use pass::{ms, print_run, run_pass, Event, ModeRun, Step, Target};

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::Serialize;

use crate::mmsg::{self, Profile};
use crate::testbed;
use crate::topology::{self, Topology};
use crate::{deps, sh};

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
    /// The `before` pass runs this `mmsg` with its defaults (fast failover on) instead of this
    /// build's with `MMSG_FAILOVER=off` (2x2 only).
    pub before_bin: Option<PathBuf>,
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
            before_bin: None,
        }
    }
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

    fn conns_dead(&self) -> Option<u64> {
        self.gws.conns_dead()
    }
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

/// Brings up the 2x2 testbed, runs every pass (alternating modes), always tears down.
pub fn run(opts: &Options) -> anyhow::Result<Report> {
    deps::ensure()?;
    if opts.paper {
        let load = sh::load_1min();
        let runs = paper::run(
            &opts.root,
            &opts.prefix,
            opts.settle,
            opts.reps,
            opts.after_only,
        )?;
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
            let (bin, on) = match (&opts.before_bin, on) {
                (Some(b), false) => (b.as_path(), true),
                _ => (mmsg_bin, on),
            };
            let mut gws = gateways::Gateways::start(bin, &opts.root, &opts.prefix, topo, on)?;
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
            keep_logs(&opts.prefix, mode, rep, on);
            let r = r?;
            print_run(&r);
            runs.push(r);
        }
    }
    Ok(runs)
}

/// Copies the gateways' logs of a pass out of the testbed's state directory (removed on
/// teardown) to `$TMPDIR/bench-failover-<prefix>/`.
fn keep_logs(prefix: &str, mode: &str, rep: u32, on: bool) {
    let dir = std::env::temp_dir().join(format!("bench-failover-{prefix}"));
    let _ = std::fs::create_dir_all(&dir);
    for b in [1u8, 2] {
        let from = gateways::log_path(prefix, b, on);
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
