//! The testbed topology file (TOML) and the address plan of DESIGN §5.
//!
//! A topology names branches, their WAN ports (internet uplinks), leased lines between two branches,
//! LAN hosts, and the impairments the WAN emulator applies: per link and direction, and per WAN
//! address pair (the paper's per-path bottlenecks). See `examples/testbed-*.toml`.
//!
//! Address plan (only 198.18.0.0/15):
//! - internet WAN port `k` of branch `b`: 198.18.(10b+k).0/24, router (`inet`) .1, gateway .2;
//! - LAN of branch `b`: 198.19.b.0/24, gateway .1, host `j` .(10+j);
//! - leased line `i` (0-based, in file order) between `b` and `c`: 198.19.(200+i).0/29, routed by the
//!   emulated carrier in `inet`: branch `b` end .2/30 (carrier .1), branch `c` end .6/30 (carrier .5).
//!   The carrier forwards only between the two ends of one line.

use std::collections::BTreeSet;
use std::fmt;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

/// Highest branch id: 15 fit the paper's 4-bit path code (DESIGN §3.1); the extended port plan
/// and address plan go to 250 (issue #20).
pub const MAX_BRANCH: u8 = 250;
/// Most internet WAN ports per branch the address plan has room for (198.18.(10b+k)).
pub const MAX_WAN_PORTS: usize = 10;
/// Most leased lines (198.19.200..255).
pub const MAX_LEASED: usize = 56;
/// Most LAN hosts per branch (198.19.b.10..).
pub const MAX_HOSTS: usize = 200;

/// Errors in a topology file, each naming the offending key.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// The TOML did not parse or has unknown keys.
    #[error("topology: {0}")]
    Parse(#[from] toml::de::Error),
    /// A value is out of range or inconsistent; `key` is a path like `branch[1].wan[0].loss_pct`.
    #[error("topology: {key}: {msg}")]
    Invalid {
        /// Path of the offending key.
        key: String,
        /// What is wrong with it.
        msg: String,
    },
}

fn invalid(key: impl Into<String>, msg: impl Into<String>) -> TopologyError {
    TopologyError::Invalid {
        key: key.into(),
        msg: msg.into(),
    }
}

/// Impairment of one direction of a link or pair. Every field is optional; absent means "none".
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Impairment {
    /// Rate limit in Mbit/s of IP bytes (no limit when absent).
    pub rate_mbit: Option<f64>,
    /// One-way propagation delay in milliseconds.
    pub delay_ms: Option<f64>,
    /// Uniform jitter in milliseconds added on top of `delay_ms` (0..=jitter_ms).
    pub jitter_ms: Option<f64>,
    /// Independent random loss in percent.
    pub loss_pct: Option<f64>,
    /// Burst (Gilbert-Elliott) loss: long-run loss rate in percent.
    pub burst_loss_pct: Option<f64>,
    /// Burst loss: mean burst length in packets (default 5).
    pub burst_len_pkts: Option<f64>,
    /// Queue limit in KiB in front of the rate limiter (default: 100 ms at the rate, at least 64 KiB).
    pub queue_kib: Option<u32>,
    /// Allow jitter to reorder packets (default false: a packet never leaves before an earlier one).
    pub reorder: Option<bool>,
    /// Constant-rate background traffic in Mbit/s that shares this stage's rate limiter and queue
    /// with the real packets (1500-byte packets, unresponsive like UDP; needs `rate_mbit`). The
    /// paper's Case A: "UDP flows remove the desired amount of bandwidth from the bottleneck".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background_mbit: Option<f64>,
}

impl Impairment {
    /// True when no field asks for any impairment (the kernel path is then used).
    pub fn is_none(&self) -> bool {
        self.rate_mbit.is_none()
            && self.delay_ms.unwrap_or(0.0) == 0.0
            && self.jitter_ms.unwrap_or(0.0) == 0.0
            && self.loss_pct.unwrap_or(0.0) == 0.0
            && self.burst_loss_pct.unwrap_or(0.0) == 0.0
    }

    /// Fields of `over` replace those of `self` where present.
    pub fn overlay(&self, over: &Impairment) -> Impairment {
        Impairment {
            rate_mbit: over.rate_mbit.or(self.rate_mbit),
            delay_ms: over.delay_ms.or(self.delay_ms),
            jitter_ms: over.jitter_ms.or(self.jitter_ms),
            loss_pct: over.loss_pct.or(self.loss_pct),
            burst_loss_pct: over.burst_loss_pct.or(self.burst_loss_pct),
            burst_len_pkts: over.burst_len_pkts.or(self.burst_len_pkts),
            queue_kib: over.queue_kib.or(self.queue_kib),
            reorder: over.reorder.or(self.reorder),
            background_mbit: over.background_mbit.or(self.background_mbit),
        }
    }

    /// Checks ranges; `key` prefixes error paths.
    pub fn validate(&self, key: &str) -> Result<(), TopologyError> {
        let finite_nonneg = |name: &str, v: Option<f64>, max: f64| -> Result<(), TopologyError> {
            match v {
                Some(x) if !(x.is_finite() && (0.0..=max).contains(&x)) => Err(invalid(
                    format!("{key}.{name}"),
                    format!("{x} is not in 0..={max}"),
                )),
                _ => Ok(()),
            }
        };
        finite_nonneg("rate_mbit", self.rate_mbit, 100_000.0)?;
        if self.rate_mbit == Some(0.0) {
            return Err(invalid(
                format!("{key}.rate_mbit"),
                "0 would block the link; use `testbed link cut` instead",
            ));
        }
        finite_nonneg("delay_ms", self.delay_ms, 10_000.0)?;
        finite_nonneg("jitter_ms", self.jitter_ms, 10_000.0)?;
        finite_nonneg("loss_pct", self.loss_pct, 100.0)?;
        finite_nonneg("burst_loss_pct", self.burst_loss_pct, 99.0)?;
        if let Some(len) = self.burst_len_pkts {
            if !(len.is_finite() && len >= 1.0) {
                return Err(invalid(
                    format!("{key}.burst_len_pkts"),
                    format!("{len} must be >= 1"),
                ));
            }
        }
        if self.queue_kib == Some(0) {
            return Err(invalid(format!("{key}.queue_kib"), "must be > 0"));
        }
        if let Some(bg) = self.background_mbit {
            let rate = self.rate_mbit.unwrap_or(0.0);
            if !(bg.is_finite() && bg >= 0.0 && bg < rate) {
                return Err(invalid(
                    format!("{key}.background_mbit"),
                    format!("{bg} must be >= 0 and below rate_mbit ({rate})"),
                ));
            }
        }
        Ok(())
    }
}

/// Kind of a WAN port (DESIGN §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PortKind {
    /// A cheap internet uplink (DSL, cable, LTE).
    Internet,
    /// One end of a leased line.
    Leased,
}

/// An internet WAN port of a branch: impairment for both directions, overridable per direction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WanPort {
    /// Both directions: see [`Impairment`].
    pub rate_mbit: Option<f64>,
    /// Both directions.
    pub delay_ms: Option<f64>,
    /// Both directions.
    pub jitter_ms: Option<f64>,
    /// Both directions.
    pub loss_pct: Option<f64>,
    /// Both directions.
    pub burst_loss_pct: Option<f64>,
    /// Both directions.
    pub burst_len_pkts: Option<f64>,
    /// Both directions.
    pub queue_kib: Option<u32>,
    /// Both directions.
    pub reorder: Option<bool>,
    /// Overrides for the gateway → internet direction.
    #[serde(default)]
    pub up: Impairment,
    /// Overrides for the internet → gateway direction.
    #[serde(default)]
    pub down: Impairment,
    /// Behind NAT (issue #20): the carrier source-NATs this port's connections and refuses
    /// connections towards it (`testbed::nat`, docs/testbed.md "Ports behind NAT").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nat: bool,
}

impl WanPort {
    fn both(&self) -> Impairment {
        Impairment {
            rate_mbit: self.rate_mbit,
            delay_ms: self.delay_ms,
            jitter_ms: self.jitter_ms,
            loss_pct: self.loss_pct,
            burst_loss_pct: self.burst_loss_pct,
            burst_len_pkts: self.burst_len_pkts,
            queue_kib: self.queue_kib,
            reorder: self.reorder,
            background_mbit: None,
        }
    }

    /// Effective impairment of the uplink (gateway → network) direction.
    pub fn up_impairment(&self) -> Impairment {
        self.both().overlay(&self.up)
    }

    /// Effective impairment of the downlink (network → gateway) direction.
    pub fn down_impairment(&self) -> Impairment {
        self.both().overlay(&self.down)
    }
}

/// One branch: a gateway, its internet uplinks and its LAN hosts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Branch {
    /// Branch id, 1..=15.
    pub id: u8,
    /// Number of LAN hosts (namespaces `<prefix>-h<b>`, `<prefix>-h<b>-1`, ...).
    #[serde(default = "one")]
    pub hosts: usize,
    /// Internet WAN ports, in order: port letters a, b, c, ...
    pub wan: Vec<WanPort>,
}

fn one() -> usize {
    1
}

/// A leased line between two branches; its ports follow the branches' internet ports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Leased {
    /// Branches at the two ends.
    pub between: [u8; 2],
    /// Rate in Mbit/s, each direction.
    pub rate_mbit: Option<f64>,
    /// One-way delay in ms, each direction.
    pub delay_ms: Option<f64>,
}

/// A per-WAN-address-pair bottleneck, named in the paper's notation (`1a`, `2b`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pair {
    /// Source port, e.g. `1a`.
    pub from: String,
    /// Destination port, e.g. `2b`.
    pub to: String,
    /// Apply to the reverse direction too (default true).
    #[serde(default = "yes")]
    pub both_directions: bool,
    /// Rate in Mbit/s.
    pub rate_mbit: Option<f64>,
    /// One-way delay in ms.
    pub delay_ms: Option<f64>,
    /// Jitter in ms.
    pub jitter_ms: Option<f64>,
    /// Random loss in percent.
    pub loss_pct: Option<f64>,
    /// Queue limit in KiB.
    pub queue_kib: Option<u32>,
    /// Constant-rate background traffic (Mbit/s) sharing the bottleneck (below `rate_mbit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background_mbit: Option<f64>,
    /// Other (source, destination) address pairs that cross this bottleneck too (the reverse
    /// pairs cross the reverse direction when `both_directions`): background hosts on the
    /// emulated internet (docs/experiments.md, Case B).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_with: Vec<(std::net::Ipv4Addr, std::net::Ipv4Addr)>,
}

fn yes() -> bool {
    true
}

impl Pair {
    /// The impairment this pair applies.
    pub fn impairment(&self) -> Impairment {
        Impairment {
            rate_mbit: self.rate_mbit,
            delay_ms: self.delay_ms,
            jitter_ms: self.jitter_ms,
            loss_pct: self.loss_pct,
            queue_kib: self.queue_kib,
            background_mbit: self.background_mbit,
            ..Impairment::default()
        }
    }
}

/// A whole testbed topology.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// Human-readable name.
    #[serde(default)]
    pub name: String,
    /// Branches.
    #[serde(rename = "branch")]
    pub branches: Vec<Branch>,
    /// Leased lines.
    #[serde(default, rename = "leased")]
    pub leased: Vec<Leased>,
    /// Per WAN address pair bottlenecks.
    #[serde(default, rename = "pair")]
    pub pairs: Vec<Pair>,
}

/// A port in the paper's notation: branch id and port index (a = 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PortRef {
    /// Branch id.
    pub branch: u8,
    /// Port index on that gateway (internet ports first, then leased ends).
    pub port: u8,
}

impl fmt::Display for PortRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let letter = char::from(b'a' + self.port);
        write!(f, "{}{}", self.branch, letter)
    }
}

impl PortRef {
    /// Parses `1a`, `12c`.
    pub fn parse(s: &str) -> Option<PortRef> {
        let s = s.trim();
        let split = s.find(|c: char| c.is_ascii_alphabetic())?;
        let (num, letter) = s.split_at(split);
        let branch: u8 = num.parse().ok()?;
        let mut chars = letter.chars();
        let l = chars.next()?;
        if chars.next().is_some() || !l.is_ascii_lowercase() {
            return None;
        }
        let port = u8::try_from(u32::from(l) - u32::from('a')).ok()?;
        Some(PortRef { branch, port })
    }
}

/// One resolved WAN port of a gateway, with its addresses and interface names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvedPort {
    /// Which port.
    pub id: PortRef,
    /// Internet or leased.
    pub kind: PortKind,
    /// Interface name inside the gateway namespace (`wan<k>`).
    pub gw_if: String,
    /// Interface name inside the `inet` namespace.
    pub inet_if: String,
    /// Gateway address (the port's public address, p_k).
    pub addr: Ipv4Addr,
    /// Next hop (router / carrier) address.
    pub next_hop: Ipv4Addr,
    /// Prefix length of the link subnet.
    pub prefix_len: u8,
    /// Effective uplink impairment.
    pub up: Impairment,
    /// Effective downlink impairment.
    pub down: Impairment,
    /// For a leased end: the index of the line.
    pub leased_line: Option<usize>,
    /// Behind NAT ([`WanPort::nat`]; leased ends never are).
    #[serde(default)]
    pub nat: bool,
}

impl ResolvedPort {
    /// The link subnet's network address.
    pub fn network(&self) -> Ipv4Addr {
        let mask = u32::MAX << (32 - u32::from(self.prefix_len));
        Ipv4Addr::from(u32::from(self.addr) & mask)
    }
}

/// Branches up to this id use the paper's plan 198.18.(10b+k).0/24 (DESIGN §5); above it the
/// extended plan of [`wan_addr`] (issue #20).
pub const PAPER_PLAN_MAX_BRANCH: u8 = 25;
/// Internet WAN ports a branch above [`PAPER_PLAN_MAX_BRANCH`] may have: the extended plan's
/// /30s in 198.18.0.0-198.18.9.255 hold 2 per branch for ids 26..=250.
pub const EXTENDED_PLAN_MAX_PORTS: usize = 2;

/// Address of internet WAN port `k` of branch `b` and its prefix length.
///
/// Branches 1..=25 (the paper's plan, DESIGN §5): 198.18.(10b+k).`host`/24.
/// Branches 26..=250 (extended, issue #20), ports `k` < 2 only: the /30 number
/// `i = 2(b-26) + k` of 198.18.0.0-198.18.9.255 (198.18.(4i / 256).(4i % 256 + host)), which the
/// paper's plan never uses (its third octets start at 10): `host` 1 is the router, 2 the gateway.
pub fn wan_net(b: u8, k: u8, host: u8) -> (Ipv4Addr, u8) {
    if b <= PAPER_PLAN_MAX_BRANCH {
        return (Ipv4Addr::new(198, 18, 10 * b + k, host), 24);
    }
    let i = 2 * (u32::from(b) - 26) + u32::from(k);
    let off = 4 * i + u32::from(host);
    (
        Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 0, 0)) + off),
        30,
    )
}

/// Address of internet WAN port `k` of branch `b` ([`wan_net`] without the prefix length).
pub fn wan_addr(b: u8, k: u8, host: u8) -> Ipv4Addr {
    wan_net(b, k, host).0
}

/// LAN address of branch `b`: 198.19.b.`host`.
pub fn lan_addr(b: u8, host: u8) -> Ipv4Addr {
    Ipv4Addr::new(198, 19, b, host)
}

/// Parses and validates a topology.
pub fn parse(text: &str) -> Result<Topology, TopologyError> {
    let topo: Topology = toml::from_str(text)?;
    topo.validate()?;
    Ok(topo)
}

impl Topology {
    /// Checks ids, counts and impairments.
    pub fn validate(&self) -> Result<(), TopologyError> {
        if self.branches.is_empty() {
            return Err(invalid("branch", "at least one branch is needed"));
        }
        let mut seen = BTreeSet::new();
        for (i, b) in self.branches.iter().enumerate() {
            let key = format!("branch[{i}]");
            if !(1..=MAX_BRANCH).contains(&b.id) {
                return Err(invalid(
                    format!("{key}.id"),
                    format!("{} is not in 1..={MAX_BRANCH}", b.id),
                ));
            }
            if b.id > PAPER_PLAN_MAX_BRANCH && b.wan.len() > EXTENDED_PLAN_MAX_PORTS {
                return Err(invalid(
                    format!("{key}.wan"),
                    format!(
                        "branch {} has {} ports; branches above {PAPER_PLAN_MAX_BRANCH} have at most \
                         {EXTENDED_PLAN_MAX_PORTS} (the extended address plan, docs/testbed.md)",
                        b.id,
                        b.wan.len()
                    ),
                ));
            }
            if b.id >= 200 && !self.leased.is_empty() {
                return Err(invalid(
                    format!("{key}.id"),
                    format!(
                        "LAN 198.19.{}.0/24 would overlap the leased lines' 198.19.200+",
                        b.id
                    ),
                ));
            }
            if !seen.insert(b.id) {
                return Err(invalid(
                    format!("{key}.id"),
                    format!("branch {} is listed twice", b.id),
                ));
            }
            if b.wan.is_empty() || b.wan.len() > MAX_WAN_PORTS {
                return Err(invalid(
                    format!("{key}.wan"),
                    format!("{} ports; 1..={MAX_WAN_PORTS} are allowed", b.wan.len()),
                ));
            }
            if b.hosts > MAX_HOSTS {
                return Err(invalid(
                    format!("{key}.hosts"),
                    format!("at most {MAX_HOSTS}"),
                ));
            }
            for (k, w) in b.wan.iter().enumerate() {
                w.up_impairment().validate(&format!("{key}.wan[{k}].up"))?;
                w.down_impairment()
                    .validate(&format!("{key}.wan[{k}].down"))?;
            }
        }
        if self.leased.len() > MAX_LEASED {
            return Err(invalid(
                "leased",
                format!("at most {MAX_LEASED} leased lines"),
            ));
        }
        for (i, l) in self.leased.iter().enumerate() {
            let key = format!("leased[{i}].between");
            let [a, c] = l.between;
            if a == c {
                return Err(invalid(key, "a leased line needs two different branches"));
            }
            for x in [a, c] {
                if !seen.contains(&x) {
                    return Err(invalid(key.clone(), format!("branch {x} is not defined")));
                }
            }
            let imp = Impairment {
                rate_mbit: l.rate_mbit,
                delay_ms: l.delay_ms,
                ..Impairment::default()
            };
            imp.validate(&format!("leased[{i}]"))?;
        }
        let ports = self.ports();
        for (i, p) in self.pairs.iter().enumerate() {
            for (name, v) in [("from", &p.from), ("to", &p.to)] {
                let key = format!("pair[{i}].{name}");
                let r = PortRef::parse(v)
                    .ok_or_else(|| invalid(key.clone(), format!("{v:?} is not like `1a`")))?;
                if !ports.iter().any(|x| x.id == r) {
                    return Err(invalid(key, format!("port {r} does not exist")));
                }
            }
            p.impairment().validate(&format!("pair[{i}]"))?;
        }
        Ok(())
    }

    /// Branch ids in order.
    pub fn branch_ids(&self) -> Vec<u8> {
        self.branches.iter().map(|b| b.id).collect()
    }

    /// Every WAN port of every gateway (internet ports, then leased ends), resolved to addresses.
    pub fn ports(&self) -> Vec<ResolvedPort> {
        let mut out = Vec::new();
        for b in &self.branches {
            let mut k: u8 = 0;
            for w in &b.wan {
                out.push(ResolvedPort {
                    id: PortRef {
                        branch: b.id,
                        port: k,
                    },
                    kind: PortKind::Internet,
                    gw_if: format!("wan{k}"),
                    inet_if: format!("b{}p{k}", b.id),
                    addr: wan_addr(b.id, k, 2),
                    next_hop: wan_addr(b.id, k, 1),
                    prefix_len: wan_net(b.id, k, 2).1,
                    up: w.up_impairment(),
                    down: w.down_impairment(),
                    leased_line: None,
                    nat: w.nat,
                });
                k += 1;
            }
            for (i, l) in self.leased.iter().enumerate() {
                let Some(side) = l.between.iter().position(|&x| x == b.id) else {
                    continue;
                };
                // i < MAX_LEASED (56) and side < 2, so these fit in u8.
                let third = 200 + i as u8;
                let base = 4 * side as u8;
                let imp = Impairment {
                    rate_mbit: l.rate_mbit,
                    delay_ms: l.delay_ms,
                    ..Impairment::default()
                };
                out.push(ResolvedPort {
                    id: PortRef {
                        branch: b.id,
                        port: k,
                    },
                    kind: PortKind::Leased,
                    gw_if: format!("wan{k}"),
                    inet_if: format!("l{i}{}", if side == 0 { 'a' } else { 'b' }),
                    addr: Ipv4Addr::new(198, 19, third, base + 2),
                    next_hop: Ipv4Addr::new(198, 19, third, base + 1),
                    prefix_len: 30,
                    up: imp.clone(),
                    down: imp,
                    leased_line: Some(i),
                    nat: false,
                });
                k += 1;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &str = r#"
        name = "t"
        [[branch]]
        id = 1
        wan = [ { rate_mbit = 40, delay_ms = 10 }, { up = { rate_mbit = 5 } } ]
        [[branch]]
        id = 2
        hosts = 2
        wan = [ {}, {} ]
        [[leased]]
        between = [1, 2]
        rate_mbit = 100
        [[pair]]
        from = "1a"
        to = "2b"
        rate_mbit = 10
    "#;

    #[test]
    fn parses_and_resolves_addresses() {
        let t = parse(TWO).unwrap();
        let ports = t.ports();
        assert_eq!(ports.len(), 6);
        let p = &ports[0];
        assert_eq!(p.id.to_string(), "1a");
        assert_eq!(p.addr, Ipv4Addr::new(198, 18, 10, 2));
        assert_eq!(p.next_hop, Ipv4Addr::new(198, 18, 10, 1));
        assert_eq!(p.up.rate_mbit, Some(40.0));
        assert_eq!(p.down.delay_ms, Some(10.0));
        assert_eq!(ports[1].up.rate_mbit, Some(5.0));
        assert!(ports[1].down.is_none());
        let leased1 = &ports[2];
        assert_eq!(leased1.id.to_string(), "1c");
        assert_eq!(leased1.kind, PortKind::Leased);
        assert_eq!(leased1.addr, Ipv4Addr::new(198, 19, 200, 2));
        assert_eq!(leased1.network(), Ipv4Addr::new(198, 19, 200, 0));
        let leased2 = &ports[5];
        assert_eq!(leased2.id.to_string(), "2c");
        assert_eq!(leased2.addr, Ipv4Addr::new(198, 19, 200, 6));
        assert_eq!(leased2.next_hop, Ipv4Addr::new(198, 19, 200, 5));
    }

    #[test]
    fn rejects_unknown_keys_and_bad_values() {
        let e = parse("[[branch]]\nid = 1\nwan = [{}]\ncolour = 1\n").unwrap_err();
        assert!(e.to_string().contains("colour"), "{e}");
        let e = parse("[[branch]]\nid = 251\nwan = [{}]\n").unwrap_err();
        assert!(e.to_string().contains("branch[0].id"), "{e}");
        let e = parse("[[branch]]\nid = 26\nwan = [{}, {}, {}]\n").unwrap_err();
        assert!(e.to_string().contains("branch[0].wan"), "{e}");
        let e = parse("[[branch]]\nid = 0\nwan = [{}]\n").unwrap_err();
        assert!(e.to_string().contains("branch[0].id"), "{e}");
        let e = parse("[[branch]]\nid = 1\nwan = [{ loss_pct = 101 }]\n").unwrap_err();
        assert!(
            e.to_string().contains("branch[0].wan[0].up.loss_pct"),
            "{e}"
        );
        let e = parse("[[branch]]\nid = 1\nwan = [{}]\n[[pair]]\nfrom = \"1a\"\nto = \"3a\"\n")
            .unwrap_err();
        assert!(e.to_string().contains("pair[0].to"), "{e}");
    }

    #[test]
    fn the_extended_address_plan_continues_the_paper_one() {
        assert_eq!(wan_net(25, 5, 2), (Ipv4Addr::new(198, 18, 255, 2), 24));
        assert_eq!(wan_net(26, 0, 1), (Ipv4Addr::new(198, 18, 0, 1), 30));
        assert_eq!(wan_net(26, 1, 2), (Ipv4Addr::new(198, 18, 0, 6), 30));
        assert_eq!(wan_net(90, 1, 2), (Ipv4Addr::new(198, 18, 2, 6), 30));
        assert_eq!(wan_net(250, 1, 2), (Ipv4Addr::new(198, 18, 7, 6), 30));
        // Every port of branches 1..=250 (6 ports up to 25, 2 beyond) has its own subnet.
        let mut nets = BTreeSet::new();
        for b in 1..=250u8 {
            let ports = if b <= PAPER_PLAN_MAX_BRANCH { 6 } else { 2 };
            for k in 0..ports {
                let (a, len) = wan_net(b, k, 2);
                let net = u32::from(a) & (u32::MAX << (32 - u32::from(len)));
                assert!(nets.insert((net, len)), "{b}{k}");
                assert_eq!(wan_net(b, k, 1).0, Ipv4Addr::from(u32::from(a) - 1));
            }
        }
        let text: String = (1..=40u8)
            .map(|b| format!("[[branch]]\nid = {b}\nwan = [{{}}, {{}}]\n"))
            .collect();
        let t = parse(&text).unwrap();
        let p = t.ports();
        assert_eq!(p.len(), 80);
        assert_eq!(p[79].addr, Ipv4Addr::new(198, 18, 0, 118));
        assert_eq!(p[79].network(), Ipv4Addr::new(198, 18, 0, 116));
        assert_eq!(p[79].prefix_len, 30);
    }

    #[test]
    fn port_notation_round_trips() {
        for s in ["1a", "15j", "3b"] {
            assert_eq!(PortRef::parse(s).unwrap().to_string(), s);
        }
        assert_eq!(PortRef::parse("a1"), None);
        assert_eq!(PortRef::parse("1ab"), None);
        assert_eq!(PortRef::parse("1A"), None);
    }

    #[test]
    fn shipped_examples_parse() {
        for name in ["testbed-2x2.toml", "testbed-paper.toml"] {
            let path = format!("{}/../examples/{name}", env!("CARGO_MANIFEST_DIR"));
            let text = std::fs::read_to_string(&path).unwrap();
            parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}
