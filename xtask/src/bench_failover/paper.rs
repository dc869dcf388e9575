//! `cargo xtask bench failover --paper`: the restart events on the paper's testbed (five branches,
//! Open vSwitch per gateway, `ssc`, Table II's path groups from branch 1 to branch 2), brought up
//! with the e2e harness ([`crate::e2e::System`], TLS tunnels). The same flows as the 2x2 pass
//! (bulk TCP, UDP voice, ping; host 1 → host 2) while, in order:
//! - `ssc_restart`: `ssc` SIGTERMed and started again on the same database (forwarding must not
//!   stop at all: the switches keep their flows, `fail_mode=secure`);
//! - `mmsg_restart gw2`: the destination gateway's `mmsg` SIGTERMed and started again;
//! - `transit_killed gw3`: the `mmsg` of branch 3, which carries four member paths of Table II
//!   (e.g. `1b>3b>3a>2a`) as a pure transit, SIGTERMed and left down.
//!
//! `before` = every `mmsg` with `MMSG_REMOVE_BRIDGE=true` (the bridge and its flows deleted on
//! exit, as before), `MMSG_FAST_RECONNECT=off` and `MMSG_FAILOVER=off`; `after` = the defaults.
//! The system is brought up once per mode (the variables are inherited by every `mmsg`).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::bail;

use super::gateways::{FAILOVER_ENV, FAST_RECONNECT_ENV};
use super::pass::{ms, print_run, run_pass, ModeRun, Step, Target};
use crate::e2e::{self, System};

/// The `mmsg run` flag's variable that deletes the bridge on exit (docs/mmsg.md "Restart").
const REMOVE_BRIDGE_ENV: &str = "MMSG_REMOVE_BRIDGE";
/// The transit branch whose `mmsg` is killed (four of Table II's member paths cross it).
const TRANSIT: u8 = 3;

struct Paper<'a> {
    sys: &'a mut System,
}

impl Target for Paper<'_> {
    fn act(&mut self, kind: &str, port: &str) -> anyhow::Result<Option<f64>> {
        let t0 = Instant::now();
        let b = || port.trim_start_matches("gw").parse::<u8>();
        match kind {
            "ssc_restart" => self.sys.restart_ssc().map(|()| None),
            "mmsg_restart" => {
                self.sys.restart_mmsg(b()?)?;
                Ok(self.sys.wait_tunnels_up().ok().map(|()| ms(t0.elapsed())))
            }
            "transit_killed" => self.sys.stop_mmsg(b()?).map(|()| None),
            _ => bail!("unknown event {kind} on the paper testbed"),
        }
    }
}

/// Brings the paper system up once per mode (`after` only with `after_only`) and runs the three
/// events, `settle` (at least 5 s) apart, `reps` times; always tears down.
pub fn run(
    root: &Path,
    prefix: &str,
    settle: Duration,
    reps: u32,
    after_only: bool,
) -> anyhow::Result<Vec<ModeRun>> {
    let steps = [
        ("ssc_restart", "ssc".to_owned()),
        ("mmsg_restart", "gw2".to_owned()),
        ("transit_killed", format!("gw{TRANSIT}")),
    ]
    .map(|(kind, port)| Step {
        kind,
        port,
        wait: settle.max(Duration::from_secs(5)),
    });
    let modes: &[(&str, bool)] = if after_only {
        &[("after", true)]
    } else {
        &[("before", false), ("after", true)]
    };
    let mut runs = Vec::new();
    for rep in 0..reps {
        for &(mode, on) in modes {
            let v = if on { "on" } else { "off" };
            // Inherited by every `mmsg` the harness starts (this process starts no threads
            // that read the environment).
            std::env::set_var(FAILOVER_ENV, v);
            std::env::set_var(FAST_RECONNECT_ENV, v);
            if on {
                std::env::remove_var(REMOVE_BRIDGE_ENV);
            } else {
                std::env::set_var(REMOVE_BRIDGE_ENV, "true");
            }
            let mut e2e_opts = e2e::Options::new(root, prefix);
            e2e_opts.tls = true;
            let mut sys = System::up(&e2e_opts)?;
            let (h1, h2, dst) = (sys.ns_host(1), sys.ns_host(2), sys.host_addr(2));
            let r = run_pass(
                (&h1, &h2, dst),
                &mut Paper { sys: &mut sys },
                &steps,
                &format!("paper {mode}"),
                rep,
            );
            eprintln!("paper {mode}: logs in {}", sys.log_dir.display());
            drop(sys);
            let mut r = r?;
            r.mode = format!("paper-{mode}");
            print_run(&r);
            runs.push(r);
        }
    }
    for k in [FAILOVER_ENV, FAST_RECONNECT_ENV, REMOVE_BRIDGE_ENV] {
        std::env::remove_var(k);
    }
    Ok(runs)
}
