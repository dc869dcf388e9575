//! The UI module's inventory as one pure value (seed 000 §IV, "User Interface"): the validated
//! branches with their WAN ports, the path groups per ordered branch pair (PC) and the PC
//! settings, with the compiled flow tables of every gateway (the OFC's input).
//!
//! No IO and no database: [`Catalog`] is always valid. Every operation (add a branch, modify a
//! port, set a path group, ...) builds a new catalog and validates it through the pure types
//! ([`Inventory::new`], [`PathGroups::new`], [`validate_settings`], [`swap::compile`]) before it
//! is returned, so a catalog that would give no flow table never exists. [`crate::store`]
//! persists catalogs (it imports this module, never the reverse).
use serde::{Deserialize, Serialize};

use crate::codes::{self, CodeError, CodeTable};
use crate::inventory::{
    Branch, BranchId, Inventory, InventoryError, InventoryFile, MacAddr, PortIndex, PortRef,
    WanKind, WanPort, MAX_WAN_PORTS,
};
use crate::path_config::Settings;
use crate::path_group::{
    GroupError, GroupsFile, MemberPath, PathGroup, PathGroupId, PathGroups, MAX_GROUP_ID,
};
use crate::swap::{self, CompileError, FlowTables, Ports};
use mms_types::{PathCode, PortPlan};
use std::collections::{BTreeMap, BTreeSet};

/// The whole inventory of the controller, always valid: the branches form a valid [`Inventory`],
/// the path groups fit it, the settings are in range, and [`swap::compile`] succeeds.
#[derive(Clone, Debug, PartialEq)]
pub struct Catalog {
    inventory: Inventory,
    groups: PathGroups,
    settings: Settings,
    codes: CodeTable,
    flows: FlowTables,
}

/// Changes to a branch's own fields (its ports have their own operations). Absent fields stay.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[derive(utoipa::ToSchema)]
pub struct BranchPatch {
    /// A new name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// New LAN prefixes (replace the old list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<String>>)]
    pub lan: Option<Vec<ipnet::Ipv4Net>>,
}

/// A WAN port to add; `port` may be left out to take the next free letter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[derive(utoipa::ToSchema)]
pub struct NewPort {
    /// The port letter; must be the next one (ports are `a`, `b`, ... without gaps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<PortIndex>,
    /// Address with prefix length.
    #[schema(value_type = String, example = "198.18.10.2/24")]
    pub address: ipnet::Ipv4Net,
    /// Next-hop gateway.
    #[schema(value_type = String, format = Ipv4)]
    pub gateway: std::net::Ipv4Addr,
    /// MAC of the gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_mac: Option<MacAddr>,
    /// MAC of the port's address (`mpa{k}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<MacAddr>,
    /// Internet or leased line.
    #[serde(default)]
    pub kind: WanKind,
    /// Capacity in Mbit/s.
    pub capacity_mbps: u32,
    /// Behind NAT: cannot be dialled (docs/nat.md). Default: `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nat: bool,
}

/// Changes to one WAN port. Absent fields stay; MACs can be set but not cleared here (remove and
/// re-add the port for that).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[derive(utoipa::ToSchema)]
pub struct PortPatch {
    /// New address with prefix length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub address: Option<ipnet::Ipv4Net>,
    /// New gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = Ipv4)]
    pub gateway: Option<std::net::Ipv4Addr>,
    /// New gateway MAC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_mac: Option<MacAddr>,
    /// New own MAC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<MacAddr>,
    /// New kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<WanKind>,
    /// New capacity in Mbit/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_mbps: Option<u32>,
}

/// Why an operation on the catalog was refused: always the operator's input (HTTP 4xx).
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The branch does not exist.
    #[error("branch {0} does not exist")]
    NoBranch(BranchId),
    /// The WAN port does not exist.
    #[error("WAN port {0} does not exist")]
    NoPort(PortRef),
    /// The path group does not exist.
    #[error("path group {source_branch}>{destination} #{group} does not exist")]
    NoGroup {
        /// Source branch.
        source_branch: BranchId,
        /// Destination branch.
        destination: BranchId,
        /// Group id.
        group: PathGroupId,
    },
    /// A branch with this id exists already.
    #[error("branch {0} exists already (modify it, or remove it first)")]
    BranchExists(BranchId),
    /// The port letter given for a new port is not the next free one.
    #[error("branch {branch}: new WAN port must be `{expected}` (ports are a, b, c, ... without gaps), not `{given}`")]
    PortNotNext {
        /// The branch.
        branch: BranchId,
        /// The next free letter.
        expected: PortIndex,
        /// The letter given.
        given: PortIndex,
    },
    /// The branch already has [`MAX_WAN_PORTS`] ports.
    #[error("branch {0} has 8 WAN ports already, the most supported")]
    PortsFull(BranchId),
    /// Only the last port of a branch can be removed (ports are lettered without gaps).
    #[error("branch {branch}: only the last WAN port `{last}` can be removed (ports are a, b, c, ... without gaps), not `{given}`")]
    NotLastPort {
        /// The branch.
        branch: BranchId,
        /// Its last port.
        last: PortIndex,
        /// The port asked for.
        given: PortIndex,
    },
    /// A branch or port that path groups still use.
    #[error("{what} is used by path groups {groups}; remove or change them first")]
    InUse {
        /// The branch or port, e.g. `branch 3` or `WAN port 3b`.
        what: String,
        /// The groups, e.g. `1>2 #0, 1>2 #1`.
        groups: String,
    },
    /// The change would make the inventory invalid.
    #[error("invalid inventory: {0}")]
    Invalid(InventoryError),
    /// The change would make the path groups invalid.
    #[error("invalid path group: {0}")]
    Groups(GroupError),
    /// The flows cannot be compiled (e.g. a transit egress without MACs).
    #[error("the flows cannot be compiled: {0}")]
    Compile(CompileError),
    /// A pair of branches behind NAT cannot be routed as configured ([`crate::nat`]).
    #[error("cannot route: {0}")]
    Nat(crate::nat::NatError),
    /// The extended port range cannot hold the member paths' codes.
    #[error("settings.ports: {0}")]
    Codes(CodeError),
    /// A setting out of range.
    #[error("settings.{field}: {reason}")]
    Setting {
        /// The field.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
}

// The wrapped errors are part of the message, not a `source`, so that error chains printed with
// `{:#}` (anyhow in `main`) do not repeat them.
impl From<InventoryError> for CatalogError {
    fn from(e: InventoryError) -> Self {
        Self::Invalid(e)
    }
}

impl From<GroupError> for CatalogError {
    fn from(e: GroupError) -> Self {
        Self::Groups(e)
    }
}

impl From<CodeError> for CatalogError {
    fn from(e: CodeError) -> Self {
        Self::Codes(e)
    }
}

impl From<CompileError> for CatalogError {
    fn from(e: CompileError) -> Self {
        Self::Compile(e)
    }
}

/// Checks the PC settings.
pub fn validate_settings(s: &Settings) -> Result<(), CatalogError> {
    let max_groups = MAX_GROUP_ID + 1;
    if !(1..=max_groups).contains(&s.groups_per_pair) {
        return Err(CatalogError::Setting {
            field: "groups_per_pair",
            reason: format!("must be 1..=16, got {}", s.groups_per_pair),
        });
    }
    if !(s.mdi_threshold.is_finite() && (0.0..=0.5).contains(&s.mdi_threshold)) {
        return Err(CatalogError::Setting {
            field: "mdi_threshold",
            reason: format!(
                "must be 0.0..=0.5 (MDI is d_max/(d_max+d_min) - 0.5), got {}",
                s.mdi_threshold
            ),
        });
    }
    if !(s.replace_margin.is_finite() && s.replace_margin >= 0.0) {
        return Err(CatalogError::Setting {
            field: "replace_margin",
            reason: format!("must be a number >= 0, got {}", s.replace_margin),
        });
    }
    s.adaptive
        .validate()
        .map_err(|(field, reason)| CatalogError::Setting { field, reason })?;
    s.auto
        .validate()
        .map_err(|(field, reason)| CatalogError::Setting { field, reason })?;
    Ok(())
}

/// Every member path of `groups` with the gateways it crosses (source, transits, destination).
pub fn member_gateways(groups: &PathGroups) -> BTreeMap<PathCode, BTreeSet<BranchId>> {
    groups
        .members()
        .map(|m| {
            let gws = m
                .path
                .hops()
                .iter()
                .flat_map(|h| [h.from.branch, h.to.branch])
                .collect();
            (m.code, gws)
        })
        .collect()
}

fn group_name(g: &PathGroup) -> String {
    format!("{}>{} #{}", g.source, g.destination, g.id)
}

impl Catalog {
    /// Validates everything and builds the catalog: the inventory rules, the path groups against
    /// the inventory, the settings, and that the flows compile.
    pub fn new(
        branches: Vec<Branch>,
        groups: Vec<PathGroup>,
        settings: Settings,
    ) -> Result<Self, CatalogError> {
        Self::with_codes(branches, groups, settings, &CodeTable::default())
    }

    /// [`Catalog::new`] keeping the still valid member path codes of `previous` (extended port
    /// plan, [`codes::allocate`]); the paper's plan has no table.
    pub fn with_codes(
        branches: Vec<Branch>,
        groups: Vec<PathGroup>,
        settings: Settings,
        previous: &CodeTable,
    ) -> Result<Self, CatalogError> {
        let inventory = Inventory::new(branches)?;
        // Before the hop checks: a NAT-only pair gets an error naming the pair.
        crate::nat::check_groups(&inventory, &groups).map_err(CatalogError::Nat)?;
        let groups = PathGroups::new(&inventory, groups)?;
        validate_settings(&settings)?;
        let (codes, flows) = match settings.ports {
            PortPlan::Paper => (
                CodeTable::default(),
                swap::compile_with(&inventory, &groups, Ports::Paper)?,
            ),
            PortPlan::Extended(range) => {
                let codes = codes::allocate(previous, range, &member_gateways(&groups))?;
                let flows = swap::compile_with(
                    &inventory,
                    &groups,
                    Ports::Extended {
                        range,
                        codes: &codes,
                    },
                )?;
                (codes, flows)
            }
        };
        Ok(Self {
            inventory,
            groups,
            settings,
            codes,
            flows,
        })
    }

    /// The member path codes of the extended port plan (empty in the paper's).
    pub fn codes(&self) -> &CodeTable {
        &self.codes
    }

    /// Builds from the file forms (as `ssc import` sends them).
    pub fn from_files(
        inventory: InventoryFile,
        groups: GroupsFile,
        settings: Settings,
    ) -> Result<Self, CatalogError> {
        Self::from_files_with_codes(inventory, groups, settings, &CodeTable::default())
    }

    /// [`Catalog::from_files`] keeping the still valid member path codes of `previous`.
    pub fn from_files_with_codes(
        inventory: InventoryFile,
        groups: GroupsFile,
        settings: Settings,
        previous: &CodeTable,
    ) -> Result<Self, CatalogError> {
        let inv = Inventory::new(inventory.branches)?;
        let groups = PathGroups::from_file(&inv, groups)?;
        Self::with_codes(
            inv.to_file().branches,
            groups.groups().cloned().collect(),
            settings,
            previous,
        )
    }

    /// The inventory.
    pub fn inventory(&self) -> &Inventory {
        &self.inventory
    }

    /// The path groups.
    pub fn groups(&self) -> &PathGroups {
        &self.groups
    }

    /// The PC settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The compiled flow tables of every gateway ([`swap::compile`] of this catalog).
    pub fn flows(&self) -> &FlowTables {
        &self.flows
    }

    /// The branches (with their WAN ports) as a list, to build a changed catalog from.
    pub fn branches(&self) -> Vec<Branch> {
        self.inventory.to_file().branches
    }

    /// The path groups as a list, to build a changed catalog from.
    pub fn group_list(&self) -> Vec<PathGroup> {
        self.groups.groups().cloned().collect()
    }

    fn with(
        &self,
        branches: Vec<Branch>,
        groups: Vec<PathGroup>,
        settings: Settings,
    ) -> Result<Self, CatalogError> {
        Self::with_codes(branches, groups, settings, &self.codes)
    }

    fn branch_index(branches: &[Branch], id: BranchId) -> Result<usize, CatalogError> {
        branches
            .iter()
            .position(|b| b.id == id)
            .ok_or(CatalogError::NoBranch(id))
    }

    fn groups_using(&self, uses: impl Fn(PortRef) -> bool) -> Vec<String> {
        self.groups
            .groups()
            .filter(|g| {
                g.members
                    .values()
                    .any(|m| m.hops().iter().any(|h| uses(h.from) || uses(h.to)))
            })
            .map(group_name)
            .collect()
    }

    /// Adds a branch (with its WAN ports).
    pub fn add_branch(&self, branch: Branch) -> Result<Self, CatalogError> {
        if self.inventory.branch(branch.id).is_some() {
            return Err(CatalogError::BranchExists(branch.id));
        }
        let mut branches = self.branches();
        branches.push(branch);
        self.with(branches, self.group_list(), self.settings.clone())
    }

    /// Changes a branch's name and/or LAN prefixes.
    pub fn modify_branch(&self, id: BranchId, patch: BranchPatch) -> Result<Self, CatalogError> {
        let mut branches = self.branches();
        let i = Self::branch_index(&branches, id)?;
        if let Some(b) = branches.get_mut(i) {
            if let Some(name) = patch.name {
                b.name = name;
            }
            if let Some(lan) = patch.lan {
                b.lan = lan;
            }
        }
        self.with(branches, self.group_list(), self.settings.clone())
    }

    /// Removes a branch; refused while path groups use it.
    pub fn remove_branch(&self, id: BranchId) -> Result<Self, CatalogError> {
        let mut branches = self.branches();
        let i = Self::branch_index(&branches, id)?;
        let users: Vec<String> = self
            .groups
            .groups()
            .filter(|g| g.source == id || g.destination == id)
            .map(group_name)
            .chain(self.groups_using(|p| p.branch == id))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        if !users.is_empty() {
            return Err(CatalogError::InUse {
                what: format!("branch {id}"),
                groups: users.join(", "),
            });
        }
        branches.remove(i);
        self.with(branches, self.group_list(), self.settings.clone())
    }

    /// Adds a WAN port to a branch (the next letter).
    pub fn add_port(&self, id: BranchId, port: NewPort) -> Result<Self, CatalogError> {
        let mut branches = self.branches();
        let i = Self::branch_index(&branches, id)?;
        if let Some(b) = branches.get_mut(i) {
            if b.wan.len() >= MAX_WAN_PORTS {
                return Err(CatalogError::PortsFull(id));
            }
            // `len < MAX_WAN_PORTS` (8) was checked above, so it is a valid index.
            let expected = PortIndex::new(u8::try_from(b.wan.len()).unwrap_or(u8::MAX))
                .map_err(|_| CatalogError::PortsFull(id))?;
            let letter = port.port.unwrap_or(expected);
            if letter != expected {
                return Err(CatalogError::PortNotNext {
                    branch: id,
                    expected,
                    given: letter,
                });
            }
            b.wan.push(WanPort {
                port: letter,
                address: port.address,
                gateway: port.gateway,
                gateway_mac: port.gateway_mac,
                mac: port.mac,
                kind: port.kind,
                capacity_mbps: port.capacity_mbps,
                nat: port.nat,
            });
        }
        self.with(branches, self.group_list(), self.settings.clone())
    }

    /// Changes fields of one WAN port.
    pub fn modify_port(&self, port: PortRef, patch: PortPatch) -> Result<Self, CatalogError> {
        let mut branches = self.branches();
        let i = Self::branch_index(&branches, port.branch)?;
        let w = branches
            .get_mut(i)
            .and_then(|b| b.wan.iter_mut().find(|w| w.port == port.port))
            .ok_or(CatalogError::NoPort(port))?;
        if let Some(v) = patch.address {
            w.address = v;
        }
        if let Some(v) = patch.gateway {
            w.gateway = v;
        }
        if let Some(v) = patch.gateway_mac {
            w.gateway_mac = Some(v);
        }
        if let Some(v) = patch.mac {
            w.mac = Some(v);
        }
        if let Some(v) = patch.kind {
            w.kind = v;
        }
        if let Some(v) = patch.capacity_mbps {
            w.capacity_mbps = v;
        }
        self.with(branches, self.group_list(), self.settings.clone())
    }

    /// Removes the last WAN port of a branch; refused while path groups use it.
    pub fn remove_port(&self, port: PortRef) -> Result<Self, CatalogError> {
        let mut branches = self.branches();
        let i = Self::branch_index(&branches, port.branch)?;
        let b = branches
            .get_mut(i)
            .ok_or(CatalogError::NoBranch(port.branch))?;
        let last = b
            .wan
            .last()
            .map(|w| w.port)
            .ok_or(CatalogError::NoPort(port))?;
        if !b.wan.iter().any(|w| w.port == port.port) {
            return Err(CatalogError::NoPort(port));
        }
        if last != port.port {
            return Err(CatalogError::NotLastPort {
                branch: port.branch,
                last,
                given: port.port,
            });
        }
        let users = self.groups_using(|p| p == port);
        if !users.is_empty() {
            return Err(CatalogError::InUse {
                what: format!("WAN port {port}"),
                groups: users.join(", "),
            });
        }
        b.wan.pop();
        self.with(branches, self.group_list(), self.settings.clone())
    }

    /// Sets (adds or replaces) one path group; members get ids 1, 2, ... in order.
    pub fn set_group(
        &self,
        source: BranchId,
        destination: BranchId,
        id: PathGroupId,
        members: Vec<MemberPath>,
    ) -> Result<Self, CatalogError> {
        let group = PathGroup::from_members(source, destination, id, members)?;
        let mut groups: Vec<PathGroup> = self
            .groups
            .groups()
            .filter(|g| !(g.source == source && g.destination == destination && g.id == id))
            .cloned()
            .collect();
        groups.push(group);
        self.with(self.branches(), groups, self.settings.clone())
    }

    /// Removes one path group.
    pub fn remove_group(
        &self,
        source: BranchId,
        destination: BranchId,
        id: PathGroupId,
    ) -> Result<Self, CatalogError> {
        if self.groups.group(source, destination, id).is_none() {
            return Err(CatalogError::NoGroup {
                source_branch: source,
                destination,
                group: id,
            });
        }
        let groups = self
            .groups
            .groups()
            .filter(|g| !(g.source == source && g.destination == destination && g.id == id))
            .cloned()
            .collect();
        self.with(self.branches(), groups, self.settings.clone())
    }

    /// Replaces the settings.
    pub fn set_settings(&self, settings: Settings) -> Result<Self, CatalogError> {
        self.with(self.branches(), self.group_list(), settings)
    }
}
