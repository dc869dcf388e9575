//! `[classifier]`: the TC's default class and rules, with port ranges as the file spells them.

use ipnet::IpNet;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::Class;

use super::problems::Problems;

/// Most classifier rules. They are matched linearly per new packet; 256 rules of a few comparisons
/// each stay well under a microsecond.
pub const MAX_RULES: usize = 256;

/// The TC's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClassifierConfig {
    /// The class of inter-branch traffic no rule matches. Default: `type2`.
    #[serde(default = "default_class")]
    pub default_class: Class,
    /// Rules, first match wins.
    #[serde(default)]
    pub rules: Vec<Rule>,
}

impl Default for ClassifierConfig {
    fn default() -> Self {
        Self {
            default_class: default_class(),
            rules: Vec::new(),
        }
    }
}

fn default_class() -> Class {
    Class::TypeII
}

/// One classifier rule: every non-empty criterion must match (AND); within a list any entry may
/// match (OR). A rule needs at least one criterion.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// A name for logs and stats. Default: empty.
    #[serde(default)]
    pub name: String,
    /// The class of matching packets.
    pub class: Class,
    /// DSCP values (0..=63).
    #[serde(default)]
    pub dscp: Vec<u8>,
    /// The IP protocol number (6 TCP, 17 UDP, 1 ICMP, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_protocol: Option<u8>,
    /// Inner source prefixes.
    #[serde(default)]
    pub src_prefixes: Vec<IpNet>,
    /// Inner destination prefixes.
    #[serde(default)]
    pub dst_prefixes: Vec<IpNet>,
    /// Source ports or ranges (`80`, `"5000-5999"`); only TCP, UDP, UDP-Lite, SCTP have ports.
    #[serde(default)]
    pub src_ports: Vec<PortRange>,
    /// Destination ports or ranges.
    #[serde(default)]
    pub dst_ports: Vec<PortRange>,
}

/// An inclusive port range, written `443` or `"5000-5999"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    /// First port.
    pub lo: u16,
    /// Last port (≥ `lo`).
    pub hi: u16,
}

impl PortRange {
    /// Whether `port` is in the range.
    pub fn contains(self, port: u16) -> bool {
        (self.lo..=self.hi).contains(&port)
    }
}

/// Written back as the file would spell it: `443` or `"5000-5999"` (the gateway channel carries
/// classifier rules as JSON, `crate::gwchan`).
impl Serialize for PortRange {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.lo == self.hi {
            s.serialize_u16(self.lo)
        } else {
            s.collect_str(&format_args!("{}-{}", self.lo, self.hi))
        }
    }
}

impl<'de> Deserialize<'de> for PortRange {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            One(u16),
            Text(String),
        }
        let bad = |s: &str| {
            serde::de::Error::custom(format!(
                "invalid port range {s:?}: expected a port 0..=65535 or \"LO-HI\" with LO <= HI"
            ))
        };
        match Raw::deserialize(d)? {
            Raw::One(p) => Ok(PortRange { lo: p, hi: p }),
            Raw::Text(s) => {
                let (lo, hi) = match s.split_once('-') {
                    Some((a, b)) => (a.trim(), b.trim()),
                    None => (s.trim(), s.trim()),
                };
                let lo: u16 = lo.parse().map_err(|_| bad(&s))?;
                let hi: u16 = hi.parse().map_err(|_| bad(&s))?;
                if lo > hi {
                    return Err(bad(&s));
                }
                Ok(PortRange { lo, hi })
            }
        }
    }
}

impl ClassifierConfig {
    /// `classifier`: rule count, tunnelled classes, DSCP ranges, criteria and ports.
    pub(super) fn validate(&self, p: &mut Problems) {
        if self.rules.len() > MAX_RULES {
            p.push(
                "classifier.rules",
                format!("{} rules, at most {MAX_RULES}", self.rules.len()),
            );
        }
        if !self.default_class.is_tunnelled() {
            p.push(
                "classifier.default_class",
                "type3 is never tunnelled: use type1 or type2".into(),
            );
        }
        for (i, rule) in self.rules.iter().enumerate() {
            let key = format!("classifier.rules[{i}]");
            if !rule.class.is_tunnelled() {
                p.push(
                    format!("{key}.class"),
                    "type3 is decided by the destination, not by rules: use type1 or type2".into(),
                );
            }
            for (d, dscp) in rule.dscp.iter().enumerate() {
                if *dscp > 63 {
                    p.push(
                        format!("{key}.dscp[{d}]"),
                        format!("{dscp} is out of range 0..=63"),
                    );
                }
            }
            let has_criteria = !rule.dscp.is_empty()
                || rule.ip_protocol.is_some()
                || !rule.src_prefixes.is_empty()
                || !rule.dst_prefixes.is_empty()
                || !rule.src_ports.is_empty()
                || !rule.dst_ports.is_empty();
            if !has_criteria {
                p.push(
                    key.clone(),
                    "has no match criteria (use classifier.default_class for a catch-all)".into(),
                );
            }
            if let Some(proto) = rule.ip_protocol {
                let has_ports = !rule.src_ports.is_empty() || !rule.dst_ports.is_empty();
                if has_ports && !crate::ip::has_ports(proto) {
                    p.push(
                        format!("{key}.ip_protocol"),
                        format!("protocol {proto} has no ports, but the rule matches ports"),
                    );
                }
            }
        }
    }
}
