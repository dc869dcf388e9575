//! The inventory: the UI module's data model (seed 000 §IV, "User Interface").
//!
//! Through the UI an operator adds, removes and modifies branches: branch ids (1..=15, one nibble
//! of the path code `0xBASG`, or 1..=250 with the extended port plan, `crate::codes`), LAN prefixes, and WAN ports with their public address, next-hop
//! gateway, kind (public internet or leased line) and capacity. [`Inventory`] is always valid:
//! every constructor runs [`Inventory::new`], which checks the whole set and names the first
//! problem with a clear [`InventoryError`].
//!
//! WAN ports are named by letter (`a` = port 0, `b` = port 1, ...) as in the paper's Table II, and a
//! branch's ports are contiguous from `a`. On the gateway, WAN port k is the OVS port `wan{k}` and
//! its address lives on the OVS internal port `mpa{k}` (see [`crate::swap`] for the numbering).
//!
//! Serde form (TOML and JSON, unknown keys rejected):
//! ```toml
//! [[branches]]
//! id = 1
//! name = "branch-1"
//! lan = ["198.19.1.0/24"]
//!
//! [[branches.wan]]
//! port = "a"
//! address = "198.18.10.2/24"
//! gateway = "198.18.10.1"
//! gateway_mac = "02:00:c6:12:0a:01"   # optional: router MAC (needed where the port is a transit egress)
//! mac = "02:00:c6:12:0a:02"           # optional: MAC of mpa0 (needed where the port is a transit egress)
//! kind = "internet"                   # or "leased"; default "internet"
//! capacity_mbps = 40
//! nat = true                          # optional: behind NAT, cannot be dialled (docs/nat.md)
//! ```
use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

pub use mms_types::{BranchId, MacAddr, MacParseError, WanKind};

/// Most WAN ports per branch. The kernel's in-kernel MPTCP path manager takes at most 8 endpoints
/// per namespace (DESIGN §4), and every WAN address is an MPTCP endpoint; letters `a`..=`h`.
pub const MAX_WAN_PORTS: usize = 8;

/// Longest branch name, in bytes (names show up in logs, metrics and CLI tables).
pub const MAX_NAME_LEN: usize = 64;

/// The index of a WAN port on its branch: 0 for `a`, 1 for `b`, ... (below [`MAX_WAN_PORTS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
#[derive(utoipa::ToSchema)]
#[schema(value_type = String, example = "a")]
pub struct PortIndex(u8);

impl PortIndex {
    /// `Ok` below [`MAX_WAN_PORTS`].
    pub fn new(index: u8) -> Result<Self, IdError> {
        if usize::from(index) < MAX_WAN_PORTS {
            Ok(Self(index))
        } else {
            Err(IdError::Port(index))
        }
    }

    /// The port for a letter `a`..=`h`.
    pub fn from_letter(letter: char) -> Result<Self, IdError> {
        if letter.is_ascii_lowercase() {
            let index = letter as u8 - b'a';
            Self::new(index).map_err(|_| IdError::PortLetter(letter))
        } else {
            Err(IdError::PortLetter(letter))
        }
    }

    /// The index (0-based).
    pub fn get(self) -> u8 {
        self.0
    }

    /// The letter (`a` for 0).
    pub fn letter(self) -> char {
        char::from(b'a' + self.0)
    }
}

impl TryFrom<String> for PortIndex {
    type Error = IdError;
    fn try_from(s: String) -> Result<Self, IdError> {
        let mut chars = s.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) => Self::from_letter(c),
            _ => Err(IdError::PortName(s)),
        }
    }
}

impl From<PortIndex> for String {
    fn from(p: PortIndex) -> String {
        p.letter().to_string()
    }
}

impl fmt::Display for PortIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.letter())
    }
}

/// One WAN port of one branch, written as in the paper: branch number then port letter (`4b`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortRef {
    /// The branch.
    pub branch: BranchId,
    /// The port on that branch.
    pub port: PortIndex,
}

impl PortRef {
    /// A port reference.
    pub fn new(branch: BranchId, port: PortIndex) -> Self {
        Self { branch, port }
    }
}

impl fmt::Display for PortRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.branch, self.port)
    }
}

impl FromStr for PortRef {
    type Err = IdError;
    /// Parses `1a`, `15c`, `250b`: a branch number 1..=250 followed by one port letter.
    fn from_str(s: &str) -> Result<Self, IdError> {
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        let (num, rest) = s.split_at(digits);
        if num.is_empty() || num.len() > 3 {
            return Err(IdError::PortName(s.to_owned()));
        }
        let id: u8 = num.parse().map_err(|_| IdError::PortName(s.to_owned()))?;
        let branch = BranchId::new(id)?;
        let mut chars = rest.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) => Ok(Self::new(branch, PortIndex::from_letter(c)?)),
            _ => Err(IdError::PortName(s.to_owned())),
        }
    }
}

/// A bad branch id, port letter or port name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// A branch id out of range (1..=250; 1..=15 in the paper's port plan `0xBASG`).
    #[error(transparent)]
    Id(#[from] mms_types::IdError),
    /// Port index beyond [`MAX_WAN_PORTS`].
    #[error("port index {0} is out of range 0..8 (letters a..=h)")]
    Port(u8),
    /// A port letter that is not `a`..=`h`.
    #[error("port letter {0:?} is not one of a..=h")]
    PortLetter(char),
    /// A port name that is not a branch number followed by one letter.
    #[error("{0:?} is not a port name like `1a` (branch 1..=250, then a port letter a..=h)")]
    PortName(String),
}

/// One WAN port of a branch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[derive(utoipa::ToSchema)]
pub struct WanPort {
    /// The port letter; ports of a branch are `a`, `b`, ... in order.
    pub port: PortIndex,
    /// The port's address with its prefix length (`198.18.10.2/24`); the MPA binds subflows to it.
    #[schema(value_type = String, example = "198.18.10.2/24")]
    pub address: Ipv4Net,
    /// The next-hop gateway (ISP router, or the far end of a leased line).
    #[schema(value_type = String, format = Ipv4)]
    pub gateway: Ipv4Addr,
    /// The gateway's MAC, if known. Needed where this port is the egress of a transit hop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_mac: Option<MacAddr>,
    /// The MAC of this port's address (the OVS internal port `mpa{k}`), if known. Needed where
    /// this port is the egress of a transit hop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<MacAddr>,
    /// Internet or leased line.
    #[serde(default)]
    pub kind: WanKind,
    /// Access capacity in Mbit/s (both directions).
    pub capacity_mbps: u32,
    /// Behind NAT (carrier NAT, LTE): it can dial out but cannot be dialled (docs/nat.md).
    /// Gateways never dial it; a branch whose ports are all behind NAT is reached on the
    /// connections it dials, and [`crate::nat::check_routable`] refuses a pair that no side can
    /// dial. Default: `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nat: bool,
}

impl WanPort {
    /// The port's own address without the prefix length.
    pub fn ip(&self) -> Ipv4Addr {
        self.address.addr()
    }
}

/// One branch and its gateway.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[derive(utoipa::ToSchema)]
pub struct Branch {
    /// The branch id, 1..=250 (1..=15 with the paper's port plan).
    pub id: BranchId,
    /// A unique name: ASCII letters, digits, `-`, `_`, `.`; at most [`MAX_NAME_LEN`] bytes.
    pub name: String,
    /// LAN prefixes behind the gateway (inter-branch destinations); no host bits, no overlaps.
    #[serde(default)]
    #[schema(value_type = Vec<String>)]
    pub lan: Vec<Ipv4Net>,
    /// WAN ports `a`, `b`, ...: at least one, at most [`MAX_WAN_PORTS`].
    pub wan: Vec<WanPort>,
}

/// The serde form of an inventory file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[derive(utoipa::ToSchema)]
pub struct InventoryFile {
    /// All branches.
    #[serde(default)]
    pub branches: Vec<Branch>,
}

/// A validated set of branches, keyed by id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "InventoryFile", into = "InventoryFile")]
pub struct Inventory {
    branches: BTreeMap<BranchId, Branch>,
}

/// Why an inventory is invalid. Every variant is the operator's input, never our bug.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InventoryError {
    /// Two branches with one id.
    #[error("branch id {0} is used twice")]
    DuplicateBranchId(BranchId),
    /// A name that is empty, too long or has characters outside `[A-Za-z0-9._-]`.
    #[error("branch {branch}: name {name:?} must be 1..=64 characters of A-Z a-z 0-9 . _ -")]
    BadName {
        /// The branch.
        branch: BranchId,
        /// The rejected name.
        name: String,
    },
    /// Two branches with one name.
    #[error("branch name {name:?} is used by branches {first} and {second}")]
    DuplicateName {
        /// The name.
        name: String,
        /// The first branch with it.
        first: BranchId,
        /// The second branch with it.
        second: BranchId,
    },
    /// A branch without WAN ports.
    #[error("branch {0} has no WAN port")]
    NoWanPorts(BranchId),
    /// More than [`MAX_WAN_PORTS`] WAN ports.
    #[error("branch {branch} has {count} WAN ports, at most 8 are supported")]
    TooManyWanPorts {
        /// The branch.
        branch: BranchId,
        /// How many it has.
        count: usize,
    },
    /// WAN ports must be `a`, `b`, `c`, ... in order, without gaps.
    #[error("branch {branch}: WAN port #{position} is `{found}`, expected `{expected}` (ports are a, b, c, ... in order)")]
    PortOutOfOrder {
        /// The branch.
        branch: BranchId,
        /// 0-based position in the list.
        position: usize,
        /// The letter expected there.
        expected: PortIndex,
        /// The letter found.
        found: PortIndex,
    },
    /// A LAN prefix with host bits set (`198.19.1.5/24`).
    #[error("branch {branch}: LAN prefix {prefix} has host bits set (did you mean {}?)", prefix.trunc())]
    LanHostBits {
        /// The branch.
        branch: BranchId,
        /// The prefix.
        prefix: Ipv4Net,
    },
    /// Two LAN prefixes (of one or two branches) overlap.
    #[error(
        "LAN prefix {first_prefix} of branch {first} overlaps {second_prefix} of branch {second}"
    )]
    LanOverlap {
        /// The branch of the first prefix.
        first: BranchId,
        /// The first prefix.
        first_prefix: Ipv4Net,
        /// The branch of the second prefix.
        second: BranchId,
        /// The second prefix.
        second_prefix: Ipv4Net,
    },
    /// Two WAN ports with one address.
    #[error("WAN address {address} is used by ports {first} and {second}")]
    DuplicateWanAddress {
        /// The address.
        address: Ipv4Addr,
        /// The first port with it.
        first: PortRef,
        /// The second port with it.
        second: PortRef,
    },
    /// A WAN address inside a LAN prefix.
    #[error(
        "WAN address {address} of port {port} lies inside LAN prefix {prefix} of branch {branch}"
    )]
    WanInLan {
        /// The port.
        port: PortRef,
        /// Its address.
        address: Ipv4Addr,
        /// The LAN prefix.
        prefix: Ipv4Net,
        /// The branch of the LAN prefix.
        branch: BranchId,
    },
    /// The address is the network or broadcast address of its own prefix.
    #[error("port {port}: {address} is not a host address of its prefix")]
    NotHostAddress {
        /// The port.
        port: PortRef,
        /// The address with prefix.
        address: Ipv4Net,
    },
    /// The gateway is not inside the port's prefix (it could never be reached by ARP).
    #[error("port {port}: gateway {gateway} is outside the port's prefix {address}")]
    GatewayOutsidePrefix {
        /// The port.
        port: PortRef,
        /// The gateway.
        gateway: Ipv4Addr,
        /// The port's address and prefix.
        address: Ipv4Net,
    },
    /// The gateway is the port's own address.
    #[error("port {port}: gateway {gateway} is the port's own address")]
    GatewayIsSelf {
        /// The port.
        port: PortRef,
        /// The address.
        gateway: Ipv4Addr,
    },
    /// A capacity of 0 Mbit/s.
    #[error("port {0}: capacity_mbps must be at least 1")]
    ZeroCapacity(PortRef),
    /// Two ports with one MAC.
    #[error("MAC {mac} is used by ports {first} and {second}")]
    DuplicateMac {
        /// The MAC.
        mac: MacAddr,
        /// The first port.
        first: PortRef,
        /// The second port.
        second: PortRef,
    },
}

/// Why an inventory file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Not TOML of the expected shape (includes unknown keys and out-of-range ids).
    #[error("inventory TOML: {0}")]
    Toml(#[from] toml::de::Error),
    /// Not JSON of the expected shape.
    #[error("inventory JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// Well-formed but invalid.
    #[error("inventory: {0}")]
    Invalid(#[from] InventoryError),
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

impl Inventory {
    /// Validates `branches` (every rule of [`InventoryError`]) and builds the inventory.
    pub fn new(branches: Vec<Branch>) -> Result<Self, InventoryError> {
        let mut map: BTreeMap<BranchId, Branch> = BTreeMap::new();
        let mut names: BTreeMap<String, BranchId> = BTreeMap::new();
        for branch in branches {
            let id = branch.id;
            if map.contains_key(&id) {
                return Err(InventoryError::DuplicateBranchId(id));
            }
            if !valid_name(&branch.name) {
                return Err(InventoryError::BadName {
                    branch: id,
                    name: branch.name,
                });
            }
            if let Some(&first) = names.get(&branch.name) {
                return Err(InventoryError::DuplicateName {
                    name: branch.name,
                    first,
                    second: id,
                });
            }
            names.insert(branch.name.clone(), id);
            Self::check_ports(&branch)?;
            map.insert(id, branch);
        }
        let inv = Self { branches: map };
        inv.check_global()?;
        Ok(inv)
    }

    fn check_ports(branch: &Branch) -> Result<(), InventoryError> {
        let id = branch.id;
        if branch.wan.is_empty() {
            return Err(InventoryError::NoWanPorts(id));
        }
        if branch.wan.len() > MAX_WAN_PORTS {
            return Err(InventoryError::TooManyWanPorts {
                branch: id,
                count: branch.wan.len(),
            });
        }
        for (position, port) in branch.wan.iter().enumerate() {
            // `position < MAX_WAN_PORTS` was checked above, so it fits the u8 and PortIndex.
            let expected = PortIndex(u8::try_from(position).unwrap_or(u8::MAX));
            if port.port != expected {
                return Err(InventoryError::PortOutOfOrder {
                    branch: id,
                    position,
                    expected,
                    found: port.port,
                });
            }
            let pref = PortRef::new(id, port.port);
            let net = port.address;
            if net.prefix_len() < 31
                && (net.addr() == net.network() || net.addr() == net.broadcast())
            {
                return Err(InventoryError::NotHostAddress {
                    port: pref,
                    address: net,
                });
            }
            if port.gateway == port.ip() {
                return Err(InventoryError::GatewayIsSelf {
                    port: pref,
                    gateway: port.gateway,
                });
            }
            if !net.contains(&port.gateway) {
                return Err(InventoryError::GatewayOutsidePrefix {
                    port: pref,
                    gateway: port.gateway,
                    address: net,
                });
            }
            if port.capacity_mbps == 0 {
                return Err(InventoryError::ZeroCapacity(pref));
            }
        }
        for prefix in &branch.lan {
            if prefix.trunc() != *prefix {
                return Err(InventoryError::LanHostBits {
                    branch: id,
                    prefix: *prefix,
                });
            }
        }
        Ok(())
    }

    fn check_global(&self) -> Result<(), InventoryError> {
        let lans: Vec<(BranchId, Ipv4Net)> = self
            .branches
            .values()
            .flat_map(|b| b.lan.iter().map(move |p| (b.id, *p)))
            .collect();
        for (i, (b1, p1)) in lans.iter().enumerate() {
            for (b2, p2) in lans.iter().skip(i + 1) {
                if p1.contains(p2) || p2.contains(p1) {
                    return Err(InventoryError::LanOverlap {
                        first: *b1,
                        first_prefix: *p1,
                        second: *b2,
                        second_prefix: *p2,
                    });
                }
            }
        }
        let mut addrs: BTreeMap<Ipv4Addr, PortRef> = BTreeMap::new();
        let mut macs: BTreeMap<MacAddr, PortRef> = BTreeMap::new();
        for (pref, port) in self.ports() {
            if let Some(&first) = addrs.get(&port.ip()) {
                return Err(InventoryError::DuplicateWanAddress {
                    address: port.ip(),
                    first,
                    second: pref,
                });
            }
            addrs.insert(port.ip(), pref);
            if let Some(mac) = port.mac {
                if let Some(&first) = macs.get(&mac) {
                    return Err(InventoryError::DuplicateMac {
                        mac,
                        first,
                        second: pref,
                    });
                }
                macs.insert(mac, pref);
            }
            if let Some(&(branch, prefix)) = lans.iter().find(|(_, p)| p.contains(&port.ip())) {
                return Err(InventoryError::WanInLan {
                    port: pref,
                    address: port.ip(),
                    prefix,
                    branch,
                });
            }
        }
        Ok(())
    }

    /// Parses and validates TOML.
    pub fn from_toml(s: &str) -> Result<Self, LoadError> {
        let file: InventoryFile = toml::from_str(s)?;
        Ok(Self::new(file.branches)?)
    }

    /// Parses and validates JSON.
    pub fn from_json(s: &str) -> Result<Self, LoadError> {
        let file: InventoryFile = serde_json::from_str(s)?;
        Ok(Self::new(file.branches)?)
    }

    /// The serde form (branches in id order).
    pub fn to_file(&self) -> InventoryFile {
        InventoryFile {
            branches: self.branches.values().cloned().collect(),
        }
    }

    /// The branch with id `id`.
    pub fn branch(&self, id: BranchId) -> Option<&Branch> {
        self.branches.get(&id)
    }

    /// All branches in id order.
    pub fn branches(&self) -> impl Iterator<Item = &Branch> + '_ {
        self.branches.values()
    }

    /// The WAN port `port`.
    pub fn port(&self, port: PortRef) -> Option<&WanPort> {
        self.branches
            .get(&port.branch)
            .and_then(|b| b.wan.iter().find(|w| w.port == port.port))
    }

    /// All WAN ports in (branch, port) order.
    pub fn ports(&self) -> impl Iterator<Item = (PortRef, &WanPort)> + '_ {
        self.branches
            .values()
            .flat_map(|b| b.wan.iter().map(move |w| (PortRef::new(b.id, w.port), w)))
    }

    /// The port that owns `addr`, if any.
    pub fn port_by_address(&self, addr: Ipv4Addr) -> Option<PortRef> {
        self.ports().find(|(_, w)| w.ip() == addr).map(|(r, _)| r)
    }

    /// Whether one WAN hop can go from port `from` to port `to` of another branch: internet to
    /// internet always; a leased line only to the port at its other end (each one's gateway is the
    /// other's address); never internet to leased; never between two ports behind NAT (neither
    /// can dial the other, [`crate::nat`]).
    pub fn can_hop(&self, from: PortRef, to: PortRef) -> bool {
        if from.branch == to.branch {
            return false;
        }
        match (self.port(from), self.port(to)) {
            (Some(a), Some(b)) if a.nat && b.nat => false,
            (Some(a), Some(b)) => match (a.kind, b.kind) {
                (WanKind::Internet, WanKind::Internet) => true,
                (WanKind::Leased, WanKind::Leased) => a.gateway == b.ip() && b.gateway == a.ip(),
                _ => false,
            },
            _ => false,
        }
    }

    /// The MAC to send to on port `port`'s next hop: its `gateway_mac`, or else the `mac` of the
    /// inventory port that owns the gateway address (the far end of a leased line).
    pub fn next_hop_mac(&self, port: PortRef) -> Option<MacAddr> {
        let w = self.port(port)?;
        w.gateway_mac.or_else(|| {
            let peer = self.port_by_address(w.gateway)?;
            self.port(peer)?.mac
        })
    }
}

impl TryFrom<InventoryFile> for Inventory {
    type Error = InventoryError;
    fn try_from(file: InventoryFile) -> Result<Self, InventoryError> {
        Self::new(file.branches)
    }
}

impl From<Inventory> for InventoryFile {
    fn from(inv: Inventory) -> InventoryFile {
        InventoryFile {
            branches: inv.branches.into_values().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_ref_parse_print() {
        let p: PortRef = "15h".parse().unwrap();
        assert_eq!(p.to_string(), "15h");
        assert_eq!(p.branch.get(), 15);
        assert_eq!(p.port.get(), 7);
        assert_eq!(
            "0a".parse::<PortRef>(),
            Err(IdError::Id(mms_types::IdError::Branch(0)))
        );
        assert_eq!(
            "251a".parse::<PortRef>(),
            Err(IdError::Id(mms_types::IdError::Branch(251)))
        );
        assert_eq!("250b".parse::<PortRef>().unwrap().to_string(), "250b");
        assert_eq!("1i".parse::<PortRef>(), Err(IdError::PortLetter('i')));
        assert!("1".parse::<PortRef>().is_err());
        assert!("a".parse::<PortRef>().is_err());
        assert!("1ab".parse::<PortRef>().is_err());
        assert!("1234a".parse::<PortRef>().is_err());
    }
}
