//! `cargo xtask demo`: the README's main command.
//!
//! For now (foundation issue): brings up the 2×2 testbed, sends iperf3 TCP from the LAN host of
//! branch 1 to the LAN host of branch 2 over plain routing on each (uplink of 1, uplink of 2) path
//! in turn and then over all paths at once, prints a goodput table and tears everything down. Each
//! path is pinned with policy routing and NAT on the gateways: destination port 5201+i selects
//! path i. Then it starts `mmsg` in both gateways and sends one TCP flow through the IP-over-MPTCP
//! tunnel, which uses all n × m uplink pairs at once. The end-to-end issue moves this to the paper's
//! 5-branch topology with `ssc` and OVS.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::iperf;
use crate::mmsg::{self, Profile};
use crate::sh;
use crate::testbed::{self, UpOptions};
use crate::topology::{self, PortKind, ResolvedPort, Topology};

/// First iperf3 port; path i uses `BASE_PORT + i`.
const BASE_PORT: u16 = 5201;
/// fwmark of gateway port k: `MARK_BASE + k` selects policy table 100 + k.
const MARK_BASE: u32 = 0x100;

/// One pinned path between the first LAN hosts of two branches.
#[derive(Debug, Clone)]
pub struct DemoPath {
    /// Uplink at the source branch.
    pub src: ResolvedPort,
    /// Uplink at the destination branch.
    pub dst: ResolvedPort,
    /// iperf3 port that selects this path.
    pub port: u16,
}

impl DemoPath {
    /// `1a>2b`.
    pub fn name(&self) -> String {
        format!("{}>{}", self.src.id, self.dst.id)
    }

    /// The configured bottleneck in Mbit/s (None: unlimited).
    pub fn bottleneck_mbit(&self, topo: &Topology) -> Option<f64> {
        let pair = topo
            .pairs
            .iter()
            .filter(|p| {
                (p.from == self.src.id.to_string() && p.to == self.dst.id.to_string())
                    || (p.both_directions
                        && p.to == self.src.id.to_string()
                        && p.from == self.dst.id.to_string())
            })
            .filter_map(|p| p.rate_mbit);
        [self.src.up.rate_mbit, self.dst.down.rate_mbit]
            .into_iter()
            .flatten()
            .chain(pair)
            .reduce(f64::min)
    }
}

/// Pins host-to-host paths from branch `a` to branch `b` with NAT and policy routing; returns them.
pub fn pin_paths(prefix: &str, topo: &Topology, a: u8, b: u8) -> anyhow::Result<Vec<DemoPath>> {
    let ports = topo.ports();
    let of = |br: u8| -> Vec<ResolvedPort> {
        ports
            .iter()
            .filter(|p| p.id.branch == br && p.kind == PortKind::Internet)
            .cloned()
            .collect()
    };
    let (srcs, dsts) = (of(a), of(b));
    let mut paths = Vec::new();
    for s in &srcs {
        for d in &dsts {
            let port = BASE_PORT + paths.len() as u16;
            paths.push(DemoPath {
                src: s.clone(),
                dst: d.clone(),
                port,
            });
        }
    }
    let h_b = testbed::host_addr(b, 0);
    // Source gateway: mark by port (→ uplink table), DNAT to the peer's WAN address, SNAT.
    let mut src_rules = String::new();
    let mut src_nat = String::new();
    for p in &paths {
        let k = u32::from(p.src.id.port);
        let _ = writeln!(
            src_rules,
            "  iifname \"lan0\" ip daddr {h_b} tcp dport {} meta mark set {:#x}",
            p.port,
            MARK_BASE + k
        );
        let _ = writeln!(
            src_nat,
            "  iifname \"lan0\" ip daddr {h_b} tcp dport {} dnat to {}",
            p.port, p.dst.addr
        );
    }
    let mut snat = String::new();
    for s in &srcs {
        let _ = writeln!(
            snat,
            "  oifname \"{}\" ip saddr {}/24 snat to {}",
            s.gw_if,
            topology::lan_addr(a, 0),
            s.addr
        );
    }
    let ruleset = format!(
        "table ip mmsdemo {{\n chain pin {{\n  type filter hook prerouting priority mangle;\n{src_rules} }}\n \
         chain prenat {{\n  type nat hook prerouting priority dstnat;\n{src_nat} }}\n \
         chain postnat {{\n  type nat hook postrouting priority srcnat;\n{snat} }}\n}}\n"
    );
    let gw_a = testbed::ns_gw(prefix, a);
    sh::nft(&gw_a, &ruleset)?;
    let rules: Vec<String> = srcs
        .iter()
        .map(|s| {
            let k = u32::from(s.id.port);
            format!(
                "rule add pref {} fwmark {:#x} table {}",
                900 + k,
                MARK_BASE + k,
                100 + k
            )
        })
        .collect();
    sh::ip_batch(&gw_a, &rules)?;

    // Destination gateway: DNAT to the host, replies leave by the port they came in on.
    let lo = BASE_PORT;
    let hi = BASE_PORT + paths.len() as u16 - 1;
    let mut dst_mark = String::new();
    let mut dst_nat = String::new();
    for d in &dsts {
        let j = u32::from(d.id.port);
        let _ = writeln!(
            dst_mark,
            "  iifname \"{}\" ip daddr {} tcp dport {lo}-{hi} ct mark set {:#x}",
            d.gw_if,
            d.addr,
            MARK_BASE + j
        );
        let _ = writeln!(
            dst_nat,
            "  iifname \"{}\" ip daddr {} tcp dport {lo}-{hi} dnat to {h_b}",
            d.gw_if, d.addr
        );
    }
    let ruleset = format!(
        "table ip mmsdemo {{\n chain pin {{\n  type filter hook prerouting priority mangle;\n{dst_mark}  iifname \"lan0\" meta mark set ct mark\n }}\n \
         chain prenat {{\n  type nat hook prerouting priority dstnat;\n{dst_nat} }}\n}}\n"
    );
    let gw_b = testbed::ns_gw(prefix, b);
    sh::nft(&gw_b, &ruleset)?;
    let rules: Vec<String> = dsts
        .iter()
        .map(|d| {
            let j = u32::from(d.id.port);
            format!(
                "rule add pref {} fwmark {:#x} table {}",
                900 + j,
                MARK_BASE + j,
                100 + j
            )
        })
        .collect();
    sh::ip_batch(&gw_b, &rules)?;
    Ok(paths)
}

/// Result of one measured path.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    /// Path name, e.g. `1a>2b` or `all`.
    pub path: String,
    /// Configured bottleneck (Mbit/s), if any.
    pub bottleneck_mbit: Option<f64>,
    /// Measured receiver goodput (Mbit/s).
    pub goodput_mbit: f64,
}

/// Measures each path alone, then all at once.
pub fn measure(
    prefix: &str,
    topo: &Topology,
    paths: &[DemoPath],
    secs: u32,
) -> anyhow::Result<Vec<Row>> {
    let (h_a, h_b) = (
        testbed::ns_host(prefix, 1, 0),
        testbed::ns_host(prefix, 2, 0),
    );
    let dst = testbed::host_addr(2, 0).to_string();
    let t = secs.to_string();
    let mut rows = Vec::new();
    for p in paths {
        let server = iperf::Server::start(&h_b, p.port, None)?;
        let v = iperf::client(
            &h_a,
            &["-c", &dst, "-p", &p.port.to_string(), "-t", &t, "-O", "1"],
        )?;
        server.wait(Duration::from_secs(2));
        let mbps = iperf::tcp_received_mbps(&v).context("iperf3 gave no receiver rate")?;
        rows.push(Row {
            path: p.name(),
            bottleneck_mbit: p.bottleneck_mbit(topo),
            goodput_mbit: mbps,
        });
    }
    // All paths at once.
    let servers: Vec<iperf::Server> = paths
        .iter()
        .map(|p| iperf::Server::start(&h_b, p.port, None))
        .collect::<anyhow::Result<_>>()?;
    let handles: Vec<_> = paths
        .iter()
        .map(|p| {
            let (h_a, dst, t, port) = (h_a.clone(), dst.clone(), t.clone(), p.port.to_string());
            std::thread::spawn(move || {
                iperf::client(&h_a, &["-c", &dst, "-p", &port, "-t", &t, "-O", "1"])
            })
        })
        .collect();
    let mut total = 0.0;
    for h in handles {
        let v = h
            .join()
            .map_err(|_| anyhow::anyhow!("iperf3 thread panicked"))??;
        total += iperf::tcp_received_mbps(&v).context("iperf3 gave no receiver rate")?;
    }
    drop(servers);
    rows.push(Row {
        path: "all at once".to_owned(),
        bottleneck_mbit: None,
        goodput_mbit: total,
    });
    Ok(rows)
}

/// Prints the goodput table.
pub fn print_table(rows: &[Row]) {
    println!(
        "{:<14} {:>22} {:>16}",
        "path", "configured Mbit/s", "goodput Mbit/s"
    );
    for r in rows {
        let b = r
            .bottleneck_mbit
            .map_or("-".to_owned(), |b| format!("{b:.1}"));
        println!("{:<18} {:>18} {:>16.1}", r.path, b, r.goodput_mbit);
    }
}

/// One running `mmsg` (stopped by PID on drop).
#[derive(Debug)]
struct Gateway {
    child: std::process::Child,
    control: std::path::PathBuf,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the PID of the child we spawned.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `mmsg` running in the gateways of branches 1 and 2 (stopped by PID on drop).
#[derive(Debug)]
pub struct Tunnels {
    gws: Vec<Gateway>,
    mmsg: std::path::PathBuf,
    /// Subflows per connection (n × m).
    pub n_m: usize,
}

/// Runs `mmsg` in the gateways of branches 1 and 2 with `examples/mmsg-branch{1,2}.toml` plus a
/// `[tls]` table (a CA made for the run issues both gateways' certificates,
/// [`mmsg::provision_tls`]: the tunnels are encrypted and mutually authenticated, as in
/// production) and waits until every tunnel connection is up with its n × m subflows.
pub fn start_tunnels(root: &Path, prefix: &str, topo: &Topology) -> anyhow::Result<Tunnels> {
    let mmsg = mmsg::build_mmsg(root, Profile::Release)?;
    let dir = testbed::state_dir(prefix);
    let tls = mmsg::provision_tls(&dir.join("tls"), "MMS e2e CA", &[1, 2])?;
    let mut gws = Vec::new();
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
        let log = std::fs::File::create(dir.join(format!("mmsg-gw{b}.log")))?;
        let child = std::process::Command::new("ip")
            .args(["netns", "exec", &testbed::ns_gw(prefix, b)])
            .arg(&mmsg)
            .arg("run")
            .arg("--config")
            .arg(&config)
            .arg("--control")
            .arg(&control)
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("start mmsg")?;
        gws.push(Gateway { child, control });
    }
    let ports = |b: u8| {
        topo.ports()
            .iter()
            .filter(|p| p.id.branch == b && p.kind == PortKind::Internet)
            .count()
    };
    let n_m = ports(1) * ports(2);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let all: Option<Vec<Vec<usize>>> = gws
            .iter()
            .map(|g| {
                mmsg::status(&mmsg, &g.control)
                    .ok()
                    .and_then(|s| crate::e2e::subflows_when_up(&s))
            })
            .collect();
        if let Some(all) = all {
            if all.iter().flatten().all(|&n| n == n_m) {
                return Ok(Tunnels { gws, mmsg, n_m });
            }
        }
        if Instant::now() > deadline {
            bail!(
                "mmsg tunnels did not come up with {n_m} subflows each within 30 s (logs in {})",
                dir.display()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

impl Tunnels {
    /// The sum of counter `name` over both gateways' `mmsg status --json` (`None` when a
    /// gateway does not answer or lacks it).
    pub fn counter_sum(&self, name: &str) -> Option<u64> {
        let mmsg = self.mmsg.as_path();
        self.gws
            .iter()
            .map(|g| {
                mmsg::status(mmsg, &g.control)
                    .ok()?
                    .get("counters")?
                    .get(name)?
                    .as_u64()
            })
            .sum()
    }

    /// Stops both gateways (SIGTERM, so they undo their host set-up).
    pub fn stop(self) {
        drop(self.gws);
    }
}

/// Runs `mmsg` in both gateways and measures TCP goodput host to host through the tunnel.
fn measure_ipomp(
    root: &Path,
    prefix: &str,
    topo: &Topology,
    secs: u32,
) -> anyhow::Result<(Row, usize)> {
    let tunnels = start_tunnels(root, prefix, topo)?;
    let n_m = tunnels.n_m;
    let (h_a, h_b) = (
        testbed::ns_host(prefix, 1, 0),
        testbed::ns_host(prefix, 2, 0),
    );
    let server = iperf::Server::start(&h_b, 5301, None)?;
    let v = iperf::client(
        &h_a,
        &[
            "-c",
            &testbed::host_addr(2, 0).to_string(),
            "-p",
            "5301",
            "-t",
            &secs.to_string(),
            "-O",
            "1",
        ],
    )?;
    server.wait(Duration::from_secs(2));
    let mbps = iperf::tcp_received_mbps(&v).context("iperf3 gave no receiver rate")?;
    tunnels.stop();
    Ok((
        Row {
            path: format!("IPoMP, {n_m} subflows"),
            bottleneck_mbit: None,
            goodput_mbit: mbps,
        },
        n_m,
    ))
}

/// The whole demo; always tears down.
pub fn run(root: &Path, prefix: &str, secs: u32) -> anyhow::Result<()> {
    let started = Instant::now();
    let file = root.join("examples/testbed-2x2.toml");
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("read {}", file.display()))?;
    let topo = topology::parse(&text)?;
    println!(
        "bringing up the 2x2 testbed (prefix {prefix}) from {}",
        file.display()
    );
    testbed::up(
        &topo,
        &UpOptions {
            prefix: prefix.to_owned(),
            ovs: false,
        },
    )?;
    let result = (|| {
        let paths = pin_paths(prefix, &topo, 1, 2)?;
        println!(
            "iperf3 TCP from {} to {}, {secs} s per path, plain routing (no tunnel yet):",
            testbed::host_addr(1, 0),
            testbed::host_addr(2, 0)
        );
        let mut rows = measure(prefix, &topo, &paths, secs)?;
        println!("starting mmsg in both gateways (IP over MPTCP, one connection per path group and class, TLS 1.3 with mutual authentication) ...");
        let (ipomp, _) = measure_ipomp(root, prefix, &topo, secs)?;
        rows.push(ipomp);
        print_table(&rows);
        let best = rows
            .iter()
            .take(paths.len())
            .map(|r| r.goodput_mbit)
            .fold(0.0, f64::max);
        if let Some(last) = rows.last() {
            println!(
                "one TCP flow through the IPoMP tunnel gets {:.2}x the best single path",
                last.goodput_mbit / best
            );
        }
        if rows.iter().any(|r| r.goodput_mbit <= 0.0) {
            bail!("a path carried no traffic");
        }
        Ok(())
    })();
    let down = testbed::down(prefix);
    println!(
        "testbed torn down; demo took {:.0} s",
        started.elapsed().as_secs_f64()
    );
    result.and(down)
}
