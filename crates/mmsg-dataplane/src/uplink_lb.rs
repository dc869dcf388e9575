//! `[internet]`: per-flow load balancing of external (Type III) traffic over the uplinks with SNAT
//! (seed 004 §5), the kernel side of [`mpa::uplink_lb`].
//!
//! What `mmsg` installs (all in its own network namespace, removed on exit):
//! - nftables table `ip mms_lb` ([`ruleset`]):
//!   - `pre` (prerouting, mangle): a packet of an existing balanced flow in the original direction gets
//!     its flow's mark back from the conntrack mark (per-flow stickiness: the kernel keeps the
//!     uplink for the flow's lifetime); the first packet of a new flow from a LAN prefix to a
//!     destination that is not a LAN of any branch (`@internal`: Type III only) jumps to `pick`.
//!     Reply bytes per uplink are counted (`rx_k`).
//!   - `pick`: `meta mark set numgen inc mod L map { 0 : m_a, 1 : m_b, ... }`, the uplink
//!     schedule of the core ([`mpa::uplink_lb::Balancer::schedule`]: RR `0..N`, WRR one Alg. 2
//!     cycle of 100 picks, single/MBW one entry), then `ct mark set meta mark` and a per-uplink
//!     flow counter (`flows_k`). Only this chain is rewritten when the weights change, atomically
//!     in one `nft -f` transaction ([`pick_chain`]); the counters are named objects and survive.
//!   - `out_nat` (postrouting, srcnat): `ct mark m_k oifname <dev_k> snat to <address_k>`;
//!     `out_count` (postrouting, filter): bytes sent per uplink by balanced flows (`tx_k`).
//! - `ip rule fwmark m_k lookup 100+k` (pref [`FWMARK_PREF_BASE`] + k): the per-WAN table of
//!   [`crate::setup::ensure_policy_routing`] has the default route via port k's gateway.
//! - `rp_filter` 1 (strict) is relaxed to 2 (loose) on the uplinks and `all`: the replies of a flow
//!   on uplink 1 arrive where the main table's default route does not point. `ip_forward` = 1.
//!
//! Available bandwidth (the core's `BW_j`): every `measure_interval_ms`, per uplink, the bytes of
//! the interface counters (`/sys/class/net/<dev>/statistics/{rx,tx}_bytes`) minus the bytes of
//! our balanced flows (`rx_k`, `tx_k`) is load we do not steer (tunnel traffic, the gateway's own);
//! `available = capacity − max(foreign rx, foreign tx)`, smoothed (EWMA, [`EWMA_ALPHA`]). Our own
//! flows are not subtracted: they would make every busy uplink look full and WRR would collapse
//! to equal weights exactly when the load is highest.
//!
//! Limits: IPv4 only; the `@internal` set is built from the config at start (remotes pushed
//! later by the controller are tunnelled anyway, because their routes into TUN win, but
//! Type III to them would be balanced); `mmsg` owns the NAT of LAN → internet traffic while on.
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ipnet::{IpNet, Ipv4Net};
use mpa::config::{Config, UplinkPolicy};
use mpa::uplink_lb::Balancer;
use tracing::{info, warn};

use crate::setup::{self, Undo, TABLE_BASE};
use crate::stats::Stats;
pub use crate::status::{InternetStatus, UplinkStatus};

/// The nftables table (family `ip`).
pub const TABLE: &str = "mms_lb";
/// Packet / conntrack mark of uplink k: `MARK_BASE + k` ("MM" + 0x01xx, far from marks other
/// tools use by default).
pub const MARK_BASE: u32 = 0x4d4d_0100;
/// `ip rule` preference of the fwmark rule of uplink k: `FWMARK_PREF_BASE + k`, before the
/// per-WAN source rules ([`crate::setup::RULE_PREF_BASE`]) and the main table.
pub const FWMARK_PREF_BASE: u32 = 900;
/// EWMA weight of a new available-bandwidth sample: 0.5 follows a change within ~3 samples.
pub const EWMA_ALPHA: f64 = 0.5;

/// One balanced uplink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uplink {
    /// Its WAN port index (`wan[k]`).
    pub port: usize,
    /// The interface carrying its address (`wan[k].name`, `mpa{k}` with `[ovs]`).
    pub dev: String,
    /// Its address (SNAT source).
    pub address: Ipv4Addr,
    /// Configured capacity, Mbit/s (RR/single without one: 0, not used).
    pub capacity_mbit: u32,
}

impl Uplink {
    /// The packet and conntrack mark of this uplink.
    pub fn mark(&self) -> u32 {
        MARK_BASE + u32::try_from(self.port).unwrap_or(0)
    }

    /// Its policy routing table (`100 + k`).
    pub fn table(&self) -> u32 {
        TABLE_BASE + u32::try_from(self.port).unwrap_or(0)
    }
}

/// What the kernel is programmed with: derived from the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The policy (never `off`).
    pub policy: UplinkPolicy,
    /// The uplinks, in `internet.uplinks` order (the core's indices).
    pub uplinks: Vec<Uplink>,
    /// Our LAN prefixes (IPv4): sources of balanced flows.
    pub lan: Vec<Ipv4Net>,
    /// Every branch's LAN prefixes (IPv4): destinations never balanced.
    pub internal: Vec<Ipv4Net>,
    /// `single`: the index into `uplinks`.
    pub single: usize,
    /// Counter sampling period.
    pub interval: Duration,
}

impl Plan {
    /// The plan of `config`'s `[internet]`, `None` when the policy is `off`.
    pub fn from_config(config: &Config) -> anyhow::Result<Option<Plan>> {
        let i = &config.internet;
        if i.policy == UplinkPolicy::Off {
            return Ok(None);
        }
        let ports = config.internet_uplinks();
        let caps = config.internet_capacities_mbit();
        let mut uplinks = Vec::with_capacity(ports.len());
        for (n, &k) in ports.iter().enumerate() {
            let w = config
                .wan
                .get(k)
                .with_context(|| format!("internet.uplinks: no wan[{k}]"))?;
            uplinks.push(Uplink {
                port: k,
                dev: w.name.clone(),
                address: w.address.addr(),
                capacity_mbit: caps.get(n).copied().flatten().unwrap_or(0),
            });
        }
        let v4 = |nets: &mut dyn Iterator<Item = &IpNet>| -> Vec<Ipv4Net> {
            nets.filter_map(|n| match n {
                IpNet::V4(v) => Some(v.trunc()),
                IpNet::V6(_) => None,
            })
            .collect()
        };
        let lan = v4(&mut config.lan_prefixes.iter());
        if lan.is_empty() {
            bail!("[internet] needs an IPv4 LAN prefix");
        }
        let mut internal = lan.clone();
        internal.extend(v4(&mut config
            .remote
            .iter()
            .flat_map(|r| r.lan_prefixes.iter())));
        internal.sort();
        internal.dedup();
        let single = i
            .single
            .and_then(|s| ports.iter().position(|&k| k == s))
            .unwrap_or(0);
        Ok(Some(Plan {
            policy: i.policy,
            uplinks,
            lan,
            internal,
            single,
            interval: Duration::from_millis(i.measure_interval_ms),
        }))
    }

    /// The core's balancer for this plan (capacities in bit/s; RR and single without a
    /// configured capacity count every uplink as 1 Mbit/s, unused).
    pub fn balancer(&self) -> anyhow::Result<Balancer> {
        let caps: Vec<u64> = self
            .uplinks
            .iter()
            .map(|u| u64::from(u.capacity_mbit.max(1)) * 1_000_000)
            .collect();
        Balancer::new(self.policy, &caps, self.single).map_err(|e| anyhow::anyhow!("{e}"))
    }
}

fn set_elements(nets: &[Ipv4Net]) -> String {
    nets.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The whole table, created from scratch (an existing one, e.g. left by a killed `mmsg`, is
/// replaced in the same transaction), with `schedule` in `pick`.
pub fn ruleset(plan: &Plan, schedule: &[usize]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "add table ip {TABLE}\ndelete table ip {TABLE}");
    let _ = writeln!(s, "table ip {TABLE} {{");
    for (i, _) in plan.uplinks.iter().enumerate() {
        let _ = writeln!(
            s,
            "  counter flows_{i} {{ }}\n  counter rx_{i} {{ }}\n  counter tx_{i} {{ }}"
        );
    }
    let _ = writeln!(
        s,
        "  set lan {{ type ipv4_addr; flags interval; elements = {{ {} }} }}",
        set_elements(&plan.lan)
    );
    let _ = writeln!(
        s,
        "  set internal {{ type ipv4_addr; flags interval; elements = {{ {} }} }}",
        set_elements(&plan.internal)
    );
    let marks = plan
        .uplinks
        .iter()
        .map(|u| format!("{:#x}", u.mark()))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(s, "  chain pick {{ }}");
    let _ = writeln!(
        s,
        "  chain pre {{\n    type filter hook prerouting priority mangle; policy accept;"
    );
    let _ = writeln!(
        s,
        "    ct direction original ct mark {{ {marks} }} meta mark set ct mark"
    );
    for (i, u) in plan.uplinks.iter().enumerate() {
        let _ = writeln!(
            s,
            "    ct direction reply ct mark {:#x} iifname \"{}\" counter name rx_{i}",
            u.mark(),
            u.dev
        );
    }
    let _ = writeln!(
        s,
        "    ct state new ct mark 0 ip saddr @lan ip daddr != @internal jump pick\n  }}"
    );
    let _ = writeln!(
        s,
        "  chain out_nat {{\n    type nat hook postrouting priority srcnat; policy accept;"
    );
    for u in &plan.uplinks {
        let _ = writeln!(
            s,
            "    ct mark {:#x} oifname \"{}\" snat to {}",
            u.mark(),
            u.dev,
            u.address
        );
    }
    let _ = writeln!(s, "  }}");
    let _ = writeln!(
        s,
        "  chain out_count {{\n    type filter hook postrouting priority filter; policy accept;"
    );
    for (i, u) in plan.uplinks.iter().enumerate() {
        let _ = writeln!(
            s,
            "    ct direction original ct mark {:#x} oifname \"{}\" counter name tx_{i}",
            u.mark(),
            u.dev
        );
    }
    let _ = writeln!(s, "  }}\n}}");
    s.push_str(&pick_chain(plan, schedule));
    s
}

/// The `pick` chain with `schedule` (indices into `plan.uplinks`), as one `nft -f` transaction
/// that replaces the chain's rules.
pub fn pick_chain(plan: &Plan, schedule: &[usize]) -> String {
    let mark_of = |i: &usize| plan.uplinks.get(*i).map_or(MARK_BASE, Uplink::mark);
    let mut s = format!("flush chain ip {TABLE} pick\n");
    match schedule {
        [one] => {
            let _ = writeln!(
                s,
                "add rule ip {TABLE} pick meta mark set {:#x}",
                mark_of(one)
            );
        }
        _ => {
            let map = schedule
                .iter()
                .enumerate()
                .map(|(slot, i)| format!("{slot} : {:#x}", mark_of(i)))
                .collect::<Vec<_>>()
                .join(", ");
            let _ = writeln!(
                s,
                "add rule ip {TABLE} pick meta mark set numgen inc mod {} map {{ {map} }}",
                schedule.len().max(1)
            );
        }
    }
    let _ = writeln!(s, "add rule ip {TABLE} pick ct mark set meta mark");
    for (i, u) in plan.uplinks.iter().enumerate() {
        let _ = writeln!(
            s,
            "add rule ip {TABLE} pick meta mark {:#x} counter name flows_{i}",
            u.mark()
        );
    }
    s
}

/// Runs `nft -f -` with `script` on stdin.
fn nft_apply(script: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut child = std::process::Command::new("nft")
        .args(["-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("run nft (is nftables installed?)")?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(script.as_bytes()).context("write to nft")?;
    }
    let out = child.wait_with_output().context("wait for nft")?;
    if !out.status.success() {
        bail!(
            "nft -f failed: {}\n{script}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Per-uplink counters of our table: (flows, rx bytes, tx bytes), by uplink index.
pub type LbCounters = BTreeMap<usize, (u64, u64, u64)>;

/// Parses `nft -j list counters table ip mms_lb`.
pub fn parse_counters(json: &str) -> LbCounters {
    let mut out = LbCounters::new();
    let Ok(v) = serde_json::from_str::<serde_json::Value>(json) else {
        return out;
    };
    let Some(items) = v.get("nftables").and_then(|n| n.as_array()) else {
        return out;
    };
    for c in items.iter().filter_map(|i| i.get("counter")) {
        let (Some(name), Some(packets), Some(bytes)) = (
            c.get("name").and_then(|n| n.as_str()),
            c.get("packets").and_then(serde_json::Value::as_u64),
            c.get("bytes").and_then(serde_json::Value::as_u64),
        ) else {
            continue;
        };
        let Some((kind, idx)) = name.rsplit_once('_') else {
            continue;
        };
        let Ok(idx) = idx.parse::<usize>() else {
            continue;
        };
        let e = out.entry(idx).or_default();
        match kind {
            "flows" => e.0 = packets,
            "rx" => e.1 = bytes,
            "tx" => e.2 = bytes,
            _ => {}
        }
    }
    out
}

fn read_counters() -> anyhow::Result<LbCounters> {
    let out = setup::run("nft", &["-j", "list", "counters", "table", "ip", TABLE])?;
    Ok(parse_counters(&out))
}

fn iface_bytes(dev: &str) -> Option<(u64, u64)> {
    let read = |what: &str| -> Option<u64> {
        std::fs::read_to_string(format!("/sys/class/net/{dev}/statistics/{what}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    Some((read("rx_bytes")?, read("tx_bytes")?))
}

/// Installs the table, the fwmark rules and the sysctls; records their removal in `undo`.
/// Returns the running state for [`run`], or `None` when `[internet]` is off (nothing installed).
pub fn setup(config: &Config, undo: &mut Undo) -> anyhow::Result<Option<(Plan, Balancer)>> {
    let Some(plan) = Plan::from_config(config)? else {
        info!("[internet] policy off: external traffic follows the main routing table");
        return Ok(None);
    };
    let balancer = plan.balancer()?;
    setup::ensure_sysctl(undo, "net.ipv4.ip_forward", "1")?;
    for key in std::iter::once("all".to_owned()).chain(plan.uplinks.iter().map(|u| u.dev.clone())) {
        let k = format!("net.ipv4.conf.{key}.rp_filter");
        if setup::read_sysctl(&k).unwrap_or_default() == "1" {
            setup::ensure_sysctl(undo, &k, "2")?;
        }
    }
    undo.on_exit("nft", &["delete", "table", "ip", TABLE]);
    nft_apply(&ruleset(&plan, &balancer.schedule())).context("install the nftables table")?;
    for u in &plan.uplinks {
        let mark = format!("{:#x}", u.mark());
        let table = u.table().to_string();
        let pref = (FWMARK_PREF_BASE + u32::try_from(u.port).unwrap_or(0)).to_string();
        // A rule left by a killed mmsg: removed first (errors ignored), so it is never doubled.
        let _ = setup::ip(&[
            "rule", "del", "fwmark", &mark, "lookup", &table, "pref", &pref,
        ]);
        setup::ip(&[
            "rule", "add", "fwmark", &mark, "lookup", &table, "pref", &pref,
        ])?;
        undo.on_exit_ip(&[
            "rule", "del", "fwmark", &mark, "lookup", &table, "pref", &pref,
        ]);
    }
    info!(
        policy = %plan.policy,
        uplinks = ?plan.uplinks.iter().map(|u| u.dev.as_str()).collect::<Vec<_>>(),
        weights = ?balancer.weights(),
        "external traffic load balancing installed"
    );
    Ok(Some((plan, balancer)))
}

/// One sampling step of the measurement loop: per uplink the smoothed foreign load (bit/s).
#[derive(Debug, Clone, Default)]
struct Sample {
    iface: Vec<Option<(u64, u64)>>,
    ours: LbCounters,
}

/// Foreign load per uplink (bit/s) between two samples `dt` apart: interface bytes minus our
/// balanced flows' bytes, the larger direction; `None` where the interface could not be read.
fn foreign_bps(prev: &Sample, now: &Sample, dt: Duration) -> Vec<Option<f64>> {
    let secs = dt.as_secs_f64().max(1e-3);
    now.iface
        .iter()
        .enumerate()
        .map(|(i, cur)| {
            let (cur, old) = ((*cur)?, (*prev.iface.get(i)?)?);
            let ours_now = now.ours.get(&i).copied().unwrap_or_default();
            let ours_old = prev.ours.get(&i).copied().unwrap_or_default();
            let d = |a: u64, b: u64| a.saturating_sub(b);
            let rx = d(d(cur.0, old.0), d(ours_now.1, ours_old.1));
            let tx = d(d(cur.1, old.1), d(ours_now.2, ours_old.2));
            // Counts as u64 → f64: exact up to 2^53 bytes per sample.
            #[allow(clippy::cast_precision_loss)]
            Some(rx.max(tx) as f64 * 8.0 / secs)
        })
        .collect()
}

/// The measurement loop: samples the counters every `plan.interval`, feeds the available
/// bandwidth to the core, rewrites `pick` when the published weights change, and publishes the
/// status. Runs until the task is dropped.
pub async fn run(plan: Plan, mut balancer: Balancer, stats: Arc<Stats>) {
    let take = |plan: &Plan| Sample {
        iface: plan.uplinks.iter().map(|u| iface_bytes(&u.dev)).collect(),
        ours: read_counters().unwrap_or_default(),
    };
    let mut tick = tokio::time::interval(plan.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // The first tick completes at once: the first sample is taken there, so every delta below
    // spans a whole interval (a delta over microseconds would turn one packet into Mbit/s).
    tick.tick().await;
    let mut prev = take(&plan);
    let mut at = Instant::now();
    let mut smoothed: Vec<Option<f64>> = vec![None; plan.uplinks.len()];
    let mut reprogrammed = 0u64;
    stats.set_internet(status(&plan, &balancer, &prev.ours, 0));
    loop {
        tick.tick().await;
        let now = take(&plan);
        let dt = at.elapsed();
        at = Instant::now();
        for (s, f) in smoothed.iter_mut().zip(foreign_bps(&prev, &now, dt)) {
            *s = match (*s, f) {
                (Some(old), Some(x)) => Some(EWMA_ALPHA * x + (1.0 - EWMA_ALPHA) * old),
                (None, x) => x,
                (old, None) => old,
            };
        }
        let available: Vec<Option<u64>> = plan
            .uplinks
            .iter()
            .zip(&smoothed)
            .map(|(u, f)| {
                let cap = f64::from(u.capacity_mbit) * 1e6;
                // Non-negative and ≤ capacity (< 2^64): the cast is exact enough and cannot wrap.
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                f.map(|f| (cap - f).max(0.0) as u64)
            })
            .collect();
        if balancer.observe(&available) {
            match nft_apply(&pick_chain(&plan, &balancer.schedule())) {
                Ok(()) => {
                    reprogrammed += 1;
                    info!(weights = ?balancer.weights(), available_bps = ?balancer.available_bps(), "uplink weights changed; pick chain rewritten");
                }
                Err(e) => warn!(error = %e, "could not rewrite the pick chain; old weights stay"),
            }
        }
        stats.set_internet(status(&plan, &balancer, &now.ours, reprogrammed));
        prev = now;
    }
}

fn status(plan: &Plan, b: &Balancer, ours: &LbCounters, reprogrammed: u64) -> InternetStatus {
    InternetStatus {
        policy: plan.policy.to_string(),
        reprogrammed,
        uplinks: plan
            .uplinks
            .iter()
            .enumerate()
            .map(|(i, u)| {
                let (flows, rx_bytes, tx_bytes) = ours.get(&i).copied().unwrap_or_default();
                UplinkStatus {
                    port: u.port,
                    dev: u.dev.clone(),
                    address: u.address.to_string(),
                    capacity_mbit: u.capacity_mbit,
                    available_kbit: b.available_bps().get(i).copied().unwrap_or(0) / 1_000,
                    weight: b.weights().get(i).copied().unwrap_or(0),
                    flows,
                    rx_bytes,
                    tx_bytes,
                }
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const CONFIG: &str = r#"
branch_id = 1
lan_prefixes = ["198.19.1.0/24"]
[[wan]]
name = "wan0"
address = "198.18.10.2/24"
gateway = "198.18.10.1"
[[wan]]
name = "wan1"
address = "198.18.11.2/24"
gateway = "198.18.11.1"
[[remote]]
id = 2
wan_addresses = ["198.18.20.2"]
lan_prefixes = ["198.19.2.0/24"]
[[remote.path_groups]]
id = 0
[internet]
policy = "wrr"
capacity_mbit = [10, 5]
"#;

    fn plan() -> Plan {
        Plan::from_config(&Config::parse(CONFIG).unwrap())
            .unwrap()
            .unwrap()
    }

    #[test]
    fn off_installs_nothing() {
        let c = Config::parse(&CONFIG.replace("\"wrr\"", "\"off\"")).unwrap();
        assert_eq!(Plan::from_config(&c).unwrap(), None);
        let mut undo = Undo::default();
        assert!(setup(&c, &mut undo).unwrap().is_none());
        assert!(format!("{undo:?}").contains("commands: []"));
    }

    #[test]
    fn plan_from_config() {
        let p = plan();
        assert_eq!(p.uplinks.len(), 2);
        assert_eq!(p.uplinks[1].dev, "wan1");
        assert_eq!(p.uplinks[1].mark(), 0x4d4d_0101);
        assert_eq!(p.uplinks[1].table(), 101);
        assert_eq!(p.uplinks[1].capacity_mbit, 5);
        assert_eq!(p.lan, vec!["198.19.1.0/24".parse::<Ipv4Net>().unwrap()]);
        assert_eq!(p.internal.len(), 2);
        assert_eq!(p.balancer().unwrap().weights(), &[67, 33]);
    }

    #[test]
    fn ruleset_text() {
        let p = plan();
        let b = p.balancer().unwrap();
        let r = ruleset(&p, &b.schedule());
        assert!(r.starts_with("add table ip mms_lb\ndelete table ip mms_lb\n"));
        assert!(r.contains("elements = { 198.19.1.0/24, 198.19.2.0/24 }"));
        assert!(r.contains("ct mark 0x4d4d0101 oifname \"wan1\" snat to 198.18.11.2"));
        assert!(r.contains("ct state new ct mark 0 ip saddr @lan ip daddr != @internal jump pick"));
        assert!(
            r.contains("numgen inc mod 100 map { 0 : 0x4d4d0100, 1 : 0x4d4d0101, 2 : 0x4d4d0100,")
        );
        assert!(r.contains("counter name flows_1"));
        let single = pick_chain(&p, &[1]);
        assert!(single.contains("pick meta mark set 0x4d4d0101\n"));
        assert!(!single.contains("numgen"));
    }

    #[test]
    fn counters_parse() {
        let j = r#"{"nftables":[{"metainfo":{"version":"1.0.6"}},
          {"counter":{"family":"ip","name":"flows_0","table":"mms_lb","handle":1,"packets":7,"bytes":420}},
          {"counter":{"family":"ip","name":"rx_0","table":"mms_lb","handle":2,"packets":9,"bytes":9000}},
          {"counter":{"family":"ip","name":"tx_1","table":"mms_lb","handle":6,"packets":3,"bytes":180}},
          {"counter":{"family":"ip","name":"junk","table":"mms_lb","handle":7,"packets":3,"bytes":180}}]}"#;
        let c = parse_counters(j);
        assert_eq!(c.get(&0), Some(&(7, 9000, 0)));
        assert_eq!(c.get(&1), Some(&(0, 0, 180)));
        assert!(parse_counters("not json").is_empty());
    }

    #[test]
    fn foreign_load_excludes_our_flows() {
        let prev = Sample {
            iface: vec![Some((0, 0)), None],
            ours: LbCounters::new(),
        };
        let mut ours = LbCounters::new();
        ours.insert(0, (1, 600_000, 10_000));
        let now = Sample {
            iface: vec![Some((1_000_000, 20_000)), Some((5, 5))],
            ours,
        };
        let f = foreign_bps(&prev, &now, Duration::from_secs(1));
        assert_eq!(f, vec![Some(3_200_000.0), None]);
    }
}
