//! Path groups and member paths: the PC module's configuration (seed 000 §III-A, §IV, Table II).
//!
//! A *path group* (id 0..=15) is a set of *member paths* between an ordered branch pair, one per
//! MPTCP subflow. The source MPA of branch A picks the group g for a connection and connects to
//! port `0xB00g` of branch B; the source OFS rewrites the port of member path s to the *path code*
//! `0xBASG` ([`PathCode`]). A member path is written in the paper's notation: branch number plus
//! port letter, hops separated by `>`: `1b>2b` (direct) or `1a>4a>4b>2a` (leave 1 by `a`, arrive
//! at 4 on `a`, leave 4 by `b`, arrive at 2 on `a`). At most [`MAX_TRANSITS`] transit branch.
//!
//! Member ids are 1..=15 as in the paper (Table II "Mbr path 1..4", Fig. 4(b) code `0x2144` for
//! member 4). Within a group the (first port, last port) pairs are distinct: the source OFS tells
//! the subflows apart only by their address pair (x_i, y_j).
//!
//! Manual TOML form (member ids are positions, starting at 1; see
//! `examples/paths-paper-table2.toml`):
//! ```toml
//! [[groups]]
//! source = 1
//! destination = 2
//! id = 1
//! members = ["1a>2a", "1b>3b>3a>2a", "1b>4a>4b>2b", "1a>5a>5b>2b"]
//! ```
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use mms_types::{listen_port, MemberId, PathCode, PathGroupId};

use crate::inventory::{BranchId, IdError, Inventory, PortRef};

/// Most transit branches on one member path (the issue asks for direct and one-transit paths;
/// longer chains waste bandwidth, seed 000 §IV PM).
pub const MAX_TRANSITS: usize = 1;

/// Largest member path id (one nibble; 0 is not used, as in the paper).
pub const MAX_MEMBER_ID: u8 = MemberId::MAX;

/// Largest path group id (one nibble).
pub const MAX_GROUP_ID: u8 = PathGroupId::MAX;

/// The TCP ports that path codes and listen ports of `inventory` can take: `0xB000..=0xBFFF` for
/// every branch id B, merged where contiguous. No socket of a gateway may use one of them as an
/// ephemeral (client) port: a subflow whose ephemeral port equals some code `0xBASG` would match
/// the mirrored entry of another member path (DESIGN §3.1). Gateways put [`reserved_ports_sysctl`]
/// into `net.ipv4.ip_local_reserved_ports`.
pub fn reserved_ports(inventory: &Inventory) -> Vec<std::ops::RangeInclusive<u16>> {
    let mut out: Vec<std::ops::RangeInclusive<u16>> = Vec::new();
    for b in inventory.branches().filter(|b| b.id.fits_paper()) {
        let range = mms_types::branch_port_range(b.id);
        let (start, end) = (*range.start(), *range.end());
        match out.last_mut() {
            Some(last) if last.end().checked_add(1) == Some(start) => *last = *last.start()..=end,
            _ => out.push(start..=end),
        }
    }
    out
}

/// [`reserved_ports`] in the syntax of `net.ipv4.ip_local_reserved_ports` (`4096-24575`).
pub fn reserved_ports_sysctl(inventory: &Inventory) -> String {
    reserved_ports(inventory)
        .iter()
        .map(|r| format!("{}-{}", r.start(), r.end()))
        .collect::<Vec<_>>()
        .join(",")
}

/// One transit: the packet arrives at `ingress` and leaves by `egress`, two ports of one branch
/// (the same port when it hairpins).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Transit {
    /// Where the packet arrives.
    pub ingress: PortRef,
    /// Where it leaves.
    pub egress: PortRef,
}

/// One WAN hop: from a port of one branch to a port of another, through the internet (or a
/// leased line).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Hop {
    /// The sending port.
    pub from: PortRef,
    /// The receiving port.
    pub to: PortRef,
}

/// A member path: source port, transits, destination port. Always well formed (no repeated
/// branch, transits stay inside their branch, at most [`MAX_TRANSITS`] transits).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MemberPath {
    source: PortRef,
    transits: Vec<Transit>,
    destination: PortRef,
}

impl MemberPath {
    /// A direct path.
    pub fn direct(source: PortRef, destination: PortRef) -> Result<Self, PathError> {
        Self::new(source, Vec::new(), destination)
    }

    /// A path through `transits`; checks the rules of [`MemberPath`].
    pub fn new(
        source: PortRef,
        transits: Vec<Transit>,
        destination: PortRef,
    ) -> Result<Self, PathError> {
        if transits.len() > MAX_TRANSITS {
            return Err(PathError::TooManyTransits(transits.len()));
        }
        let mut seen = BTreeSet::new();
        seen.insert(source.branch);
        for t in &transits {
            if t.ingress.branch != t.egress.branch {
                return Err(PathError::TransitChangesBranch {
                    ingress: t.ingress,
                    egress: t.egress,
                });
            }
            if !seen.insert(t.ingress.branch) {
                return Err(PathError::RepeatedBranch(t.ingress.branch));
            }
        }
        if !seen.insert(destination.branch) {
            return Err(PathError::RepeatedBranch(destination.branch));
        }
        Ok(Self {
            source,
            transits,
            destination,
        })
    }

    /// The source port (its address is x_i, the subflow's source address).
    pub fn source(&self) -> PortRef {
        self.source
    }

    /// The destination port (its address is y_j, the subflow's destination address).
    pub fn destination(&self) -> PortRef {
        self.destination
    }

    /// The transits in order.
    pub fn transits(&self) -> &[Transit] {
        &self.transits
    }

    /// Number of WAN hops (1 for a direct path).
    pub fn wan_hops(&self) -> usize {
        self.transits.len() + 1
    }

    /// The WAN hops in order.
    pub fn hops(&self) -> Vec<Hop> {
        let mut hops = Vec::with_capacity(self.wan_hops());
        let mut from = self.source;
        for t in &self.transits {
            hops.push(Hop {
                from,
                to: t.ingress,
            });
            from = t.egress;
        }
        hops.push(Hop {
            from,
            to: self.destination,
        });
        hops
    }

    /// The same path walked backwards (the reverse direction of a subflow).
    pub fn reversed(&self) -> Self {
        Self {
            source: self.destination,
            transits: self
                .transits
                .iter()
                .rev()
                .map(|t| Transit {
                    ingress: t.egress,
                    egress: t.ingress,
                })
                .collect(),
            destination: self.source,
        }
    }
}

impl fmt::Display for MemberPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source)?;
        for t in &self.transits {
            write!(f, ">{}>{}", t.ingress, t.egress)?;
        }
        write!(f, ">{}", self.destination)
    }
}

impl FromStr for MemberPath {
    type Err = PathError;
    /// Parses `1a>2a` or `1a>4a>4b>2a` (spaces around `>` are allowed).
    fn from_str(s: &str) -> Result<Self, PathError> {
        if s.trim().is_empty() {
            return Err(PathError::Empty);
        }
        let mut ports = Vec::new();
        for (position, token) in s.split('>').enumerate() {
            let token = token.trim();
            let port = token
                .parse::<PortRef>()
                .map_err(|source| PathError::BadPort {
                    path: s.to_owned(),
                    position: position + 1,
                    source,
                })?;
            ports.push(port);
        }
        if ports.len() < 2 || ports.len() % 2 != 0 {
            return Err(PathError::PortCount {
                path: s.to_owned(),
                count: ports.len(),
            });
        }
        let (Some(&source), Some(&destination)) = (ports.first(), ports.last()) else {
            return Err(PathError::Empty);
        };
        let inner = ports.get(1..ports.len() - 1).unwrap_or_default();
        let transits = inner
            .chunks_exact(2)
            .filter_map(|c| match c {
                [ingress, egress] => Some(Transit {
                    ingress: *ingress,
                    egress: *egress,
                }),
                _ => None,
            })
            .collect();
        Self::new(source, transits, destination)
    }
}

impl TryFrom<String> for MemberPath {
    type Error = PathError;
    fn try_from(s: String) -> Result<Self, PathError> {
        s.parse()
    }
}

impl From<MemberPath> for String {
    fn from(p: MemberPath) -> String {
        p.to_string()
    }
}

/// A bad member path, in notation or in structure.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// An empty string.
    #[error("empty member path (expected e.g. `1a>2a` or `1a>4a>4b>2a`)")]
    Empty,
    /// A token that is not a port name.
    #[error("member path {path:?}, port #{position}: {source}")]
    BadPort {
        /// The whole input.
        path: String,
        /// 1-based position of the bad token.
        position: usize,
        /// What is wrong with it.
        source: IdError,
    },
    /// Not source, (ingress, egress) pairs, destination.
    #[error("member path {path:?} has {count} ports; expected 2 (direct `1a>2a`) or 4 (one transit `1a>4a>4b>2a`)")]
    PortCount {
        /// The whole input.
        path: String,
        /// How many ports it names.
        count: usize,
    },
    /// A transit whose ingress and egress are on different branches.
    #[error("transit {ingress}>{egress} must stay in one branch (write e.g. `4a>4b`)")]
    TransitChangesBranch {
        /// The ingress.
        ingress: PortRef,
        /// The egress.
        egress: PortRef,
    },
    /// More transits than [`MAX_TRANSITS`].
    #[error("{0} transit branches; at most 1 is supported")]
    TooManyTransits(usize),
    /// A branch visited twice (a loop, or source = destination).
    #[error("branch {0} appears twice on the member path")]
    RepeatedBranch(BranchId),
    /// A path group or member path id out of range.
    #[error(transparent)]
    Id(#[from] mms_types::IdError),
}

/// One path group of an ordered branch pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathGroup {
    /// The source branch A.
    pub source: BranchId,
    /// The destination branch B.
    pub destination: BranchId,
    /// The group id G.
    pub id: PathGroupId,
    /// The member paths by id S.
    pub members: BTreeMap<MemberId, MemberPath>,
}

impl PathGroup {
    /// The path code of member `member`.
    pub fn code(&self, member: MemberId) -> PathCode {
        PathCode {
            destination: self.destination,
            source: self.source,
            member,
            group: self.id,
        }
    }

    /// A group whose members get ids 1, 2, ... in order.
    pub fn from_members(
        source: BranchId,
        destination: BranchId,
        id: PathGroupId,
        members: Vec<MemberPath>,
    ) -> Result<Self, GroupError> {
        let mut map = BTreeMap::new();
        for (i, m) in members.into_iter().enumerate() {
            let n = u8::try_from(i + 1).map_err(|_| GroupError::TooManyMembers { group: id })?;
            let mid = MemberId::new(n).map_err(|_| GroupError::TooManyMembers { group: id })?;
            map.insert(mid, m);
        }
        Ok(Self {
            source,
            destination,
            id,
            members: map,
        })
    }
}

/// Why a set of path groups does not fit the inventory.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    /// Source and destination branch are the same.
    #[error("path group {group} goes from branch {branch} to itself")]
    SamePair {
        /// The group.
        group: PathGroupId,
        /// The branch.
        branch: BranchId,
    },
    /// A branch that is not in the inventory.
    #[error("branch {0} is not in the inventory")]
    UnknownBranch(BranchId),
    /// A port that is not in the inventory.
    #[error("member path {path}: port {port} is not in the inventory")]
    UnknownPort {
        /// The member path.
        path: MemberPath,
        /// The missing port.
        port: PortRef,
    },
    /// A member path of another branch pair.
    #[error("member path {path} does not go from branch {source_branch} to branch {destination}")]
    WrongEndpoints {
        /// The member path.
        path: MemberPath,
        /// The group's source.
        source_branch: BranchId,
        /// The group's destination.
        destination: BranchId,
    },
    /// A WAN hop that cannot exist (internet to leased line, or a leased line to a port that is
    /// not its other end).
    #[error("member path {path}: hop {from}>{to} is impossible (internet and leased ports do not mix; a leased line reaches only its far end; two ports behind NAT cannot dial each other)")]
    ImpossibleHop {
        /// The member path.
        path: MemberPath,
        /// The sending port.
        from: PortRef,
        /// The receiving port.
        to: PortRef,
    },
    /// Two members with the same (source port, destination port): the source OFS could not tell
    /// their subflows apart.
    #[error("path group {source_branch}>{destination} #{group}: members {first} and {second} both use the address pair ({from}, {to})")]
    DuplicatePair {
        /// Source branch.
        source_branch: BranchId,
        /// Destination branch.
        destination: BranchId,
        /// The group.
        group: PathGroupId,
        /// First member.
        first: MemberId,
        /// Second member.
        second: MemberId,
        /// The source port.
        from: PortRef,
        /// The destination port.
        to: PortRef,
    },
    /// A group id used twice for one branch pair.
    #[error("path group {source_branch}>{destination} #{group} is defined twice")]
    DuplicateGroup {
        /// Source branch.
        source_branch: BranchId,
        /// Destination branch.
        destination: BranchId,
        /// The group.
        group: PathGroupId,
    },
    /// An empty group.
    #[error("path group {source_branch}>{destination} #{group} has no member path")]
    NoMembers {
        /// Source branch.
        source_branch: BranchId,
        /// Destination branch.
        destination: BranchId,
        /// The group.
        group: PathGroupId,
    },
    /// More than 15 members.
    #[error("path group #{group} has more than 15 member paths")]
    TooManyMembers {
        /// The group.
        group: PathGroupId,
    },
}

/// Why a path group file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Not TOML of the expected shape (includes bad notation and unknown keys).
    #[error("path groups TOML: {0}")]
    Toml(#[from] toml::de::Error),
    /// Not JSON of the expected shape.
    #[error("path groups JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// Does not fit the inventory.
    #[error("path groups: {0}")]
    Invalid(#[from] GroupError),
}

/// The serde form of one group (member ids are positions from 1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[derive(utoipa::ToSchema)]
pub struct GroupEntry {
    /// Source branch A.
    pub source: BranchId,
    /// Destination branch B.
    pub destination: BranchId,
    /// Group id G (0..=15).
    pub id: PathGroupId,
    /// Member paths in notation; the first is member 1.
    #[schema(value_type = Vec<String>, example = json!(["1a>4a>4b>2a"]))]
    pub members: Vec<MemberPath>,
}

/// The serde form of a path group file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[derive(utoipa::ToSchema)]
pub struct GroupsFile {
    /// All groups.
    #[serde(default)]
    pub groups: Vec<GroupEntry>,
}

/// A validated set of path groups, keyed by (source, destination) then group id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PathGroups {
    groups: BTreeMap<(BranchId, BranchId), BTreeMap<PathGroupId, PathGroup>>,
}

/// One member path of a [`PathGroups`], with its code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberRef<'a> {
    /// The path code `0xBASG` (identifies pair, group and member).
    pub code: PathCode,
    /// The path.
    pub path: &'a MemberPath,
}

impl PathGroups {
    /// Checks `groups` against `inventory` (every rule of [`GroupError`]).
    pub fn new(inventory: &Inventory, groups: Vec<PathGroup>) -> Result<Self, GroupError> {
        let mut out = Self::default();
        for g in groups {
            validate_group(inventory, &g)?;
            let pair = out.groups.entry((g.source, g.destination)).or_default();
            if pair.contains_key(&g.id) {
                return Err(GroupError::DuplicateGroup {
                    source_branch: g.source,
                    destination: g.destination,
                    group: g.id,
                });
            }
            pair.insert(g.id, g);
        }
        Ok(out)
    }

    /// Builds from the serde form.
    pub fn from_file(inventory: &Inventory, file: GroupsFile) -> Result<Self, GroupError> {
        let groups = file
            .groups
            .into_iter()
            .map(|e| PathGroup::from_members(e.source, e.destination, e.id, e.members))
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(inventory, groups)
    }

    /// Parses TOML and checks it against `inventory`.
    pub fn from_toml(inventory: &Inventory, s: &str) -> Result<Self, LoadError> {
        let file: GroupsFile = toml::from_str(s)?;
        Ok(Self::from_file(inventory, file)?)
    }

    /// Parses JSON and checks it against `inventory`.
    pub fn from_json(inventory: &Inventory, s: &str) -> Result<Self, LoadError> {
        let file: GroupsFile = serde_json::from_str(s)?;
        Ok(Self::from_file(inventory, file)?)
    }

    /// The serde form. Member ids must be 1..n without gaps to round-trip; gaps are closed.
    pub fn to_file(&self) -> GroupsFile {
        GroupsFile {
            groups: self
                .groups()
                .map(|g| GroupEntry {
                    source: g.source,
                    destination: g.destination,
                    id: g.id,
                    members: g.members.values().cloned().collect(),
                })
                .collect(),
        }
    }

    /// All groups in (source, destination, id) order.
    pub fn groups(&self) -> impl Iterator<Item = &PathGroup> + '_ {
        self.groups.values().flat_map(|m| m.values())
    }

    /// The groups of one ordered pair.
    pub fn pair(
        &self,
        source: BranchId,
        destination: BranchId,
    ) -> Option<&BTreeMap<PathGroupId, PathGroup>> {
        self.groups.get(&(source, destination))
    }

    /// One group.
    pub fn group(
        &self,
        source: BranchId,
        destination: BranchId,
        id: PathGroupId,
    ) -> Option<&PathGroup> {
        self.pair(source, destination)?.get(&id)
    }

    /// Every member path with its code, in code order of (source, destination, group, member).
    pub fn members(&self) -> impl Iterator<Item = MemberRef<'_>> + '_ {
        self.groups().flat_map(|g| {
            g.members.iter().map(move |(&m, path)| MemberRef {
                code: g.code(m),
                path,
            })
        })
    }

    /// The member path with path code `code`.
    pub fn member(&self, code: PathCode) -> Option<&MemberPath> {
        self.group(code.source, code.destination, code.group)?
            .members
            .get(&code.member)
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.groups.values().map(BTreeMap::len).sum()
    }

    /// Whether there is no group.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn validate_group(inventory: &Inventory, g: &PathGroup) -> Result<(), GroupError> {
    if g.source == g.destination {
        return Err(GroupError::SamePair {
            group: g.id,
            branch: g.source,
        });
    }
    for b in [g.source, g.destination] {
        if inventory.branch(b).is_none() {
            return Err(GroupError::UnknownBranch(b));
        }
    }
    if g.members.is_empty() {
        return Err(GroupError::NoMembers {
            source_branch: g.source,
            destination: g.destination,
            group: g.id,
        });
    }
    let mut pairs: BTreeMap<(PortRef, PortRef), MemberId> = BTreeMap::new();
    for (&id, path) in &g.members {
        validate_member(inventory, path)?;
        if path.source().branch != g.source || path.destination().branch != g.destination {
            return Err(GroupError::WrongEndpoints {
                path: path.clone(),
                source_branch: g.source,
                destination: g.destination,
            });
        }
        let key = (path.source(), path.destination());
        if let Some(&first) = pairs.get(&key) {
            return Err(GroupError::DuplicatePair {
                source_branch: g.source,
                destination: g.destination,
                group: g.id,
                first,
                second: id,
                from: key.0,
                to: key.1,
            });
        }
        pairs.insert(key, id);
    }
    Ok(())
}

/// Checks that every port of `path` exists and every hop is possible in `inventory`.
pub fn validate_member(inventory: &Inventory, path: &MemberPath) -> Result<(), GroupError> {
    for hop in path.hops() {
        for port in [hop.from, hop.to] {
            if inventory.port(port).is_none() {
                return Err(GroupError::UnknownPort {
                    path: path.clone(),
                    port,
                });
            }
        }
        if !inventory.can_hop(hop.from, hop.to) {
            return Err(GroupError::ImpossibleHop {
                path: path.clone(),
                from: hop.from,
                to: hop.to,
            });
        }
    }
    for t in path.transits() {
        if inventory.port(t.egress).is_none() {
            return Err(GroupError::UnknownPort {
                path: path.clone(),
                port: t.egress,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notation_round_trip() {
        for s in ["1a>2a", "1a>4a>4b>2a", "15h>3a>3a>1b"] {
            let p: MemberPath = s.parse().unwrap();
            assert_eq!(p.to_string(), s);
        }
        let p: MemberPath = " 1a > 4a>4b >2a ".parse().unwrap();
        assert_eq!(p.to_string(), "1a>4a>4b>2a");
        assert_eq!(p.wan_hops(), 2);
        assert_eq!(p.reversed().to_string(), "2a>4b>4a>1a");
    }

    #[test]
    fn notation_errors() {
        assert_eq!("".parse::<MemberPath>(), Err(PathError::Empty));
        assert!(matches!(
            "1a".parse::<MemberPath>(),
            Err(PathError::PortCount { count: 1, .. })
        ));
        assert!(matches!(
            "1a>3a>2a".parse::<MemberPath>(),
            Err(PathError::PortCount { count: 3, .. })
        ));
        assert!(matches!(
            "1a>3a>4b>2a".parse::<MemberPath>(),
            Err(PathError::TransitChangesBranch { .. })
        ));
        assert!(matches!(
            "1a>3a>3b>4a>4b>2a".parse::<MemberPath>(),
            Err(PathError::TooManyTransits(2))
        ));
        assert!(matches!(
            "1a>1b".parse::<MemberPath>(),
            Err(PathError::RepeatedBranch(_))
        ));
        assert!(matches!(
            "1a>2a>2b>1b".parse::<MemberPath>(),
            Err(PathError::RepeatedBranch(_))
        ));
        let e = "1a>x2".parse::<MemberPath>().unwrap_err();
        assert!(matches!(e, PathError::BadPort { position: 2, .. }), "{e}");
        assert!(e.to_string().contains("port #2"), "{e}");
        let e = "1a>251a".parse::<MemberPath>().unwrap_err();
        assert!(e.to_string().contains("out of range 1..=250"), "{e}");
        assert!("1a->2a".parse::<MemberPath>().is_err());
    }

    #[test]
    fn path_code_layout() {
        let code = PathCode {
            destination: BranchId::new(2).unwrap(),
            source: BranchId::new(1).unwrap(),
            member: MemberId::new(1).unwrap(),
            group: PathGroupId::new(4).unwrap(),
        };
        assert_eq!(code.port(), 0x2114);
        assert_eq!(code.listen_port(), 0x2004);
        assert_eq!(PathCode::from_port(0x2114), Some(code));
        assert_eq!(PathCode::from_port(0x2004), None);
        assert_eq!(code.to_string(), "0x2114");
    }
}
