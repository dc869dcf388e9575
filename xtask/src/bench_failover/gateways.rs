//! The two `mmsg`s of `bench failover` (2x2 testbed, standalone, examples' configs with the run's
//! TLS): started with fast failover and fast reconnect on (`after`) or off (`before`), restarted
//! one at a time during a pass (SIGTERM, or SIGKILL for the kill -9 variant), stopped on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::mmsg;
use crate::testbed;
use crate::topology::{PortKind, Topology};

/// The environment variable that switches `mmsg`'s failover detector off (`off`).
pub const FAILOVER_ENV: &str = "MMSG_FAILOVER";
/// The environment variable that switches `mmsg`'s fast reconnect after a lost connection off
/// (`off`: the backoff doubles up to 10 s, the behaviour before; docs/mmsg.md "Restart").
pub const FAST_RECONNECT_ENV: &str = "MMSG_FAST_RECONNECT";
/// How long a SIGTERMed `mmsg` may take to undo its set-up and exit before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// How a gateway's `mmsg` is stopped before it is started again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGTERM: `mmsg` undoes its set-up and exits.
    Term,
    /// SIGKILL: nothing is undone (a crash).
    Kill,
}

/// `mmsg` in the gateways of branches 1 and 2, stopped (SIGTERM by PID) on drop.
#[derive(Debug)]
pub struct Gateways {
    mmsg_bin: PathBuf,
    prefix: String,
    /// Fast failover and fast reconnect on (`after`) or off (`before`).
    on: bool,
    /// Branch, its running child, config, control socket.
    gws: Vec<(u8, Option<Child>, PathBuf, PathBuf)>,
    /// Subflows per connection when every WAN pair is up.
    n_m: usize,
}

impl Drop for Gateways {
    fn drop(&mut self) {
        for g in &mut self.gws {
            if let Some(c) = &mut g.1 {
                crate::e2e::stop_child(c, Duration::from_secs(5));
            }
        }
    }
}

/// The log file of gateway `b`'s `mmsg` in mode `on`/`off`.
pub fn log_path(prefix: &str, b: u8, on: bool) -> PathBuf {
    let mode = if on { "on" } else { "off" };
    testbed::state_dir(prefix).join(format!("mmsg-gw{b}-{mode}.log"))
}

impl Gateways {
    /// Starts `mmsg` in both gateways and waits until every connection has its n × m subflows.
    pub fn start(
        mmsg_bin: &Path,
        root: &Path,
        prefix: &str,
        topo: &Topology,
        on: bool,
    ) -> anyhow::Result<Gateways> {
        let dir = testbed::state_dir(prefix);
        let tls = mmsg::provision_tls(&dir.join("tls"), "MMS failover CA", &[1, 2])?;
        let ports = |b: u8| {
            topo.ports()
                .iter()
                .filter(|p| p.id.branch == b && p.kind == PortKind::Internet)
                .count()
        };
        let mut g = Gateways {
            mmsg_bin: mmsg_bin.to_owned(),
            prefix: prefix.to_owned(),
            on,
            gws: Vec::new(),
            n_m: ports(1) * ports(2),
        };
        for b in [1u8, 2] {
            let mut c = mmsg::example(root, b)?;
            c.tls = tls.get(&b).cloned();
            let config = dir.join(format!("mmsg-gw{b}.toml"));
            mmsg::write_config(
                &config,
                &format!("examples/mmsg-branch{b}.toml with the run's [tls]"),
                &c,
            )?;
            let control = dir.join(format!("mmsg-gw{b}.sock"));
            g.gws.push((b, None, config, control));
            g.spawn(b)?;
        }
        g.wait_all_subflows(Duration::from_secs(30))
            .with_context(|| format!("logs in {}", dir.display()))?;
        Ok(g)
    }

    fn spawn(&mut self, b: u8) -> anyhow::Result<()> {
        let (on, prefix, bin) = (self.on, self.prefix.clone(), self.mmsg_bin.clone());
        let Some(g) = self.gws.iter_mut().find(|g| g.0 == b) else {
            bail!("no gateway {b}");
        };
        let mode = if on { "on" } else { "off" };
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_path(&prefix, b, on))?;
        let child = Command::new("ip")
            .args(["netns", "exec", &testbed::ns_gw(&prefix, b)])
            .arg(&bin)
            .args(["run", "--config"])
            .arg(&g.2)
            .arg("--control")
            .arg(&g.3)
            .env(FAILOVER_ENV, mode)
            .env(FAST_RECONNECT_ENV, mode)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("start mmsg")?;
        g.1 = Some(child);
        Ok(())
    }

    /// Stops gateway `b`'s `mmsg` (`how`), waits until it has exited, starts it again. Returns
    /// how long it took until the new one was started.
    pub fn restart(&mut self, b: u8, how: Stop) -> anyhow::Result<Duration> {
        let t0 = Instant::now();
        let Some(g) = self.gws.iter_mut().find(|g| g.0 == b) else {
            bail!("no gateway {b}");
        };
        if let Some(mut c) = g.1.take() {
            // Waits on the child itself (`testbed::stop_pids` polls /proc/PID, which a zombie
            // keeps until it is reaped: it would always wait the whole grace).
            match how {
                Stop::Term => crate::e2e::stop_child(&mut c, STOP_GRACE),
                Stop::Kill => {
                    let _ = c.kill();
                    let _ = c.wait();
                }
            }
        }
        self.spawn(b)?;
        Ok(t0.elapsed())
    }

    /// Tunnel connections both gateways' `mmsg` declared dead so far (`mmsg status` counter
    /// `conn_dead`: nothing received for 3 s), summed; `None` if a status could not be read.
    pub fn conns_dead(&self) -> Option<u64> {
        self.gws
            .iter()
            .map(|g| {
                let s = mmsg::status(&self.mmsg_bin, &g.3).ok()?;
                s.get("counters")?.get("conn_dead")?.as_u64()
            })
            .sum()
    }

    /// Waits until every connection of both gateways is up with n × m established subflows.
    pub fn wait_all_subflows(&self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let all: Option<Vec<Vec<usize>>> = self
                .gws
                .iter()
                .map(|g| {
                    mmsg::status(&self.mmsg_bin, &g.3)
                        .ok()
                        .and_then(|s| crate::e2e::subflows_when_up(&s))
                })
                .collect();
            if let Some(all) = all {
                if all.iter().flatten().all(|&n| n == self.n_m) {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "mmsg tunnels did not have {} subflows each within {timeout:?}",
                    self.n_m
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
