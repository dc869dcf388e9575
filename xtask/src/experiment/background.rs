//! Background TCP hosts for Case B (seed 000 §V-C, Tables IV and VI): real TCP flows that share a
//! member path's bottleneck with MMS but not branch 1's ports, as the paper's 16 extra hosts on its
//! OpenFlow network do.
//!
//! Two namespaces hang off the emulated internet: `P-bgs` (senders, 198.18.250.(10+i)) and
//! `P-bgr` (receivers, 198.18.251.(10+i)), one address pair per bottleneck i. The emulator puts
//! each pair's packets on bottleneck i's stage (`testbed::pair_set_shared`, `shared_with`), so
//! they queue in the same FIFO as the member path's packets. Every receiver address runs an
//! iperf3 server; a case starts `iperf3 -P <flows>` per bottleneck before the measurement and
//! stops it (by PID) after. The namespaces go away with the testbed (`testbed down` removes every
//! `P-` namespace and stops its processes by PID); [`Drop`] stops our processes first.

use std::net::Ipv4Addr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};

use crate::{sh, testbed};

/// Most bottlenecks with background hosts (16 member paths of 4 groups).
pub const MAX_BOTTLENECKS: u8 = 16;
/// iperf3 server port of bottleneck i: 7000 + i.
const PORT_BASE: u16 = 7000;

/// The background hosts of one testbed.
#[derive(Debug)]
pub struct BackgroundHosts {
    senders: String,
    receivers: String,
    servers: Vec<Child>,
    /// The running clients with their bottleneck.
    clients: Vec<(u8, Child)>,
}

/// Sender and receiver address of bottleneck `i` (1-based).
pub fn addr_pair(i: u8) -> (Ipv4Addr, Ipv4Addr) {
    (
        Ipv4Addr::new(198, 18, 250, 10 + i),
        Ipv4Addr::new(198, 18, 251, 10 + i),
    )
}

impl BackgroundHosts {
    /// Creates the two namespaces, their links to the internet router and one iperf3 server per
    /// bottleneck.
    pub fn up(prefix: &str) -> anyhow::Result<BackgroundHosts> {
        let inet = testbed::ns_inet(prefix);
        let senders = format!("{prefix}-bgs");
        let receivers = format!("{prefix}-bgr");
        let mut hosts = BackgroundHosts {
            senders: senders.clone(),
            receivers: receivers.clone(),
            servers: Vec::new(),
            clients: Vec::new(),
        };
        for (ns, dev, third) in [(&senders, "bgs", 250u8), (&receivers, "bgr", 251u8)] {
            sh::run("ip", &["netns", "add", ns]).with_context(|| format!("create {ns}"))?;
            let mut inet_cmds = vec![
                format!("link add {dev} type veth peer name eth0 netns {ns}"),
                format!("addr add 198.18.{third}.1/24 dev {dev}"),
                format!("link set {dev} up"),
            ];
            inet_cmds.push(format!("link set {dev} mtu 1500"));
            sh::ip_batch(&inet, &inet_cmds).with_context(|| format!("link {inet} to {ns}"))?;
            let mut cmds = vec!["link set lo up".to_owned(), "link set eth0 up".to_owned()];
            for i in 1..=MAX_BOTTLENECKS {
                cmds.push(format!("addr add 198.18.{third}.{}/24 dev eth0", 10 + i));
            }
            cmds.push(format!("route add default via 198.18.{third}.1"));
            sh::ip_batch(ns, &cmds).with_context(|| format!("addresses of {ns}"))?;
            // GSO/TSO would hand the emulator 64 KiB super-packets: wire-size packets only.
            sh::ns(
                ns,
                "ethtool",
                &["-K", "eth0", "tso", "off", "gso", "off", "gro", "off"],
            )
            .ok();
        }
        for i in 1..=MAX_BOTTLENECKS {
            let (_, r) = addr_pair(i);
            let port = (PORT_BASE + u16::from(i)).to_string();
            let child = Command::new("ip")
                .args(["netns", "exec", &receivers, "iperf3", "-s", "-B"])
                .arg(r.to_string())
                .args(["-p", &port])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .context("start background iperf3 server")?;
            hosts.servers.push(child);
        }
        // Wait until every server listens.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let out = sh::ns(&receivers, "ss", &["-Hltn"]).unwrap_or_default();
            if out.lines().count() >= usize::from(MAX_BOTTLENECKS) {
                break;
            }
            ensure!(
                Instant::now() < deadline,
                "background iperf3 servers did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(hosts)
    }

    /// Starts `flows` TCP flows across bottleneck `i` for `secs` seconds.
    pub fn start(&mut self, i: u8, flows: u32, secs: u32) -> anyhow::Result<()> {
        if flows == 0 {
            return Ok(());
        }
        let (s, r) = addr_pair(i);
        let child = Command::new("ip")
            .args(["netns", "exec", &self.senders, "iperf3", "-c"])
            .arg(r.to_string())
            .arg("-B")
            .arg(s.to_string())
            .args(["-p", &(PORT_BASE + u16::from(i)).to_string()])
            .args(["-P", &flows.to_string(), "-t", &secs.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("start background iperf3 client")?;
        self.clients.push((i, child));
        Ok(())
    }

    /// `Err` when a background client has ended before [`BackgroundHosts::stop`]: its bottleneck
    /// was free for part of the measurement, which is then not a Case B measurement (one such
    /// run measured the baseline at 65 Mbit/s through bottlenecks that leave it about 3). The
    /// error quotes iperf3's own message (e.g. its server still busy with the previous test).
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        for (i, c) in &mut self.clients {
            if let Some(status) = c.try_wait().context("background iperf3 client")? {
                let said = c
                    .stderr
                    .take()
                    .and_then(|e| std::io::read_to_string(e).ok())
                    .unwrap_or_default();
                anyhow::bail!(
                    "the background flows of bottleneck {i} ended before the measurement did \
                     ({status}; iperf3: {})",
                    said.trim()
                );
            }
        }
        Ok(())
    }

    /// Stops every running background client (by PID).
    pub fn stop(&mut self) {
        for (_, mut c) in self.clients.drain(..) {
            crate::e2e::stop_child(&mut c, Duration::from_secs(3));
        }
        // The servers need a moment to accept the next test.
        std::thread::sleep(Duration::from_millis(300));
    }
}

impl Drop for BackgroundHosts {
    fn drop(&mut self) {
        self.stop();
        for mut c in self.servers.drain(..) {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in [&self.senders, &self.receivers] {
            sh::try_run("ip", &["netns", "del", ns]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_background_client_that_ended_early_fails_the_measurement() {
        let spawn = |cmd: &str| {
            Command::new("sh")
                .args(["-c", cmd])
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let mut hosts = BackgroundHosts {
            senders: "unused-bgs".into(),
            receivers: "unused-bgr".into(),
            servers: Vec::new(),
            clients: vec![(1, spawn("sleep 30"))],
        };
        assert!(hosts.check_running().is_ok());
        let mut ended = spawn("echo 'the server is busy running a test' >&2; exit 1");
        ended.wait().unwrap();
        hosts.clients.push((7, ended));
        let e = hosts.check_running().unwrap_err().to_string();
        assert!(
            e.contains("bottleneck 7") && e.contains("server is busy"),
            "{e}"
        );
        hosts.stop();
        assert!(hosts.clients.is_empty());
        // Drop: `ip netns del` of namespaces never made fails quietly.
    }
}
