//! Running iperf3 between namespaces and reading its JSON.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::sh;

/// An iperf3 server running in a namespace; stopped (by PID) on drop.
#[derive(Debug)]
pub struct Server {
    child: Child,
}

impl Server {
    /// Starts `iperf3 -s -1` (one test, then exit) in `ns` on `port`, with JSON output to
    /// `json_out` if given.
    pub fn start(
        ns: &str,
        port: u16,
        json_out: Option<&std::path::Path>,
    ) -> anyhow::Result<Server> {
        let mut extra = Vec::new();
        if let Some(p) = json_out {
            extra.extend([
                "--json".to_owned(),
                "--logfile".to_owned(),
                p.display().to_string(),
            ]);
        }
        Self::start_with(ns, &[], port, &extra)
    }

    /// Like [`Server::start`], with `wrapper` run in front of iperf3 (e.g. `["mptcpize", "run"]`)
    /// and `extra` server flags. Returns once the server listens.
    pub fn start_with(
        ns: &str,
        wrapper: &[&str],
        port: u16,
        extra: &[String],
    ) -> anyhow::Result<Server> {
        let port_s = port.to_string();
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns])
            .args(wrapper)
            .args(["iperf3", "-s", "-1", "-p", &port_s])
            .args(extra);
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("start iperf3 server")?;
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            let out = sh::ns(ns, "ss", &["-Hltn", &format!("sport = :{port}")]).unwrap_or_default();
            if !out.trim().is_empty() {
                return Ok(Server { child });
            }
            if let Ok(Some(status)) = child.try_wait() {
                bail!("iperf3 server in {ns} exited at start ({status})");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        bail!("iperf3 server in {ns} did not listen on {port}");
    }

    /// Waits for the one-off server to exit after its test (up to `timeout`).
    pub fn wait(mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs an iperf3 client in `ns`; returns the parsed JSON.
pub fn client(ns: &str, args: &[&str]) -> anyhow::Result<serde_json::Value> {
    let mut full = vec!["--json"];
    full.extend_from_slice(args);
    let out = sh::ns(ns, "iperf3", &full)?;
    serde_json::from_str(&out).context("parse iperf3 JSON")
}

/// Receiver goodput in Mbit/s of a TCP test.
pub fn tcp_received_mbps(v: &serde_json::Value) -> Option<f64> {
    v.pointer("/end/sum_received/bits_per_second")?
        .as_f64()
        .map(|b| b / 1e6)
}

/// The sender's rate per reporting interval (`-i`), Mbit/s, in order.
pub fn interval_mbps(v: &serde_json::Value) -> Vec<f64> {
    v.pointer("/intervals")
        .and_then(serde_json::Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|i| {
                    i.pointer("/sum/bits_per_second")
                        .and_then(serde_json::Value::as_f64)
                })
                .map(|b| b / 1e6)
                .collect()
        })
        .unwrap_or_default()
}

/// The sender's TCP retransmissions over the whole test (0 when absent).
pub fn tcp_retransmits(v: &serde_json::Value) -> u64 {
    v.pointer("/end/sum_sent/retransmits")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_intervals_goodput_and_retransmits_of_iperf3_json() {
        let v = serde_json::json!({
            "intervals": [
                {"sum": {"bits_per_second": 12.5e6}},
                {"sum": {}},
                {"sum": {"bits_per_second": 30e6}}
            ],
            "end": {
                "sum_sent": {"retransmits": 42},
                "sum_received": {"bits_per_second": 20e6}
            }
        });
        assert_eq!(interval_mbps(&v), vec![12.5, 30.0]);
        assert_eq!(tcp_retransmits(&v), 42);
        assert_eq!(tcp_received_mbps(&v), Some(20.0));
        let empty = serde_json::json!({});
        assert!(interval_mbps(&empty).is_empty());
        assert_eq!(tcp_retransmits(&empty), 0);
        assert_eq!(tcp_received_mbps(&empty), None);
    }
}
