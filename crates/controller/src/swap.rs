//! The flow compiler: IP address swapping (seed 000 §III, Fig. 4(b); DESIGN §3.1).
//!
//! [`compile`] is a pure function: [`Inventory`] + [`PathGroups`] → [`FlowTables`], the exact
//! OpenFlow table 0 of every gateway OVS. The OFC ([`crate::ofc`]) converts each [`FlowEntry`] to an
//! OFPT_FLOW_MOD and reconciles switches by [`Cookie`]; `ofc::reconcile` says in which order (by [`Stage`]).
//!
//! # Ports of a gateway OVS
//! WAN port k (letter `a` + k) is the physical port `wan{k}`, OpenFlow port [`wan_ofport`]`(k) = 1 + k`;
//! its address lives on the internal port `mpa{k}`, OpenFlow port [`mpa_ofport`]`(k) = 101 + k`.
//! `mmsg` requests these numbers with `ofport_request` when it creates the ports, and the OFC checks
//! them by name ([`switch_ports`]) when a switch connects.
//!
//! # Flows of one member path (code `0xBASG`, source port i of A, destination port j of B)
//! Forward (the subflow from A's MPA to B's MPA, matched and rewritten on `tcp_dst`):
//! - source, at A: `in_port=mpa_i, tcp, ip_src=x_i, ip_dst=y_j, tcp_dst=0xB00G` → set the first
//!   hop's addresses, `tcp_dst=0xBASG`, DSCP ([`crate::priority`]), output `wan_i`. Two entries: one
//!   matching the Type I mark, one catch-all (Type II).
//! - transit, at T (arrive on `wan_x`, leave by `wan_y`): `in_port=wan_x, ip_src, ip_dst=p_x^T,
//!   tcp_dst=0xBASG` → `eth_src=mac(mpa_y)`, `eth_dst=gateway mac of y`, `ip_src=p_y^T`, `ip_dst`
//!   = next hop, output `wan_y`, or `IN_PORT` when x = y (hairpin).
//! - destination, at B: `in_port=wan_j, ip_src=<last sender>, ip_dst=y_j, tcp_dst=0xBASG` →
//!   restore `ip_src=x_i, ip_dst=y_j, tcp_dst=0xB00G`, output `mpa_j`.
//!
//! Reverse (B's replies on the same subflow): the same along the reversed path, on `tcp_src`.
//! Every swap entry writes the whole outer triple (source, destination, port), as Fig. 4(b) does;
//! a set-field to an unchanged value costs nothing in the OVS datapath.
//!
//! Patch flows (priority [`PATCH_PRIORITY`]): `mpa_k → wan_k` and `wan_k → mpa_k`, for ARP, Type III
//! and anything else that matches no swap entry (DESIGN §2).
use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use mms_types::{CodeRange, PortPlan};

use crate::codes::CodeTable;
use crate::inventory::{BranchId, Inventory, MacAddr, PortIndex, PortRef};
use crate::path_group::{MemberPath, PathCode, PathGroups};
use crate::priority::{self, Class, PATCH_PRIORITY, TYPE_I_MARK};

/// OpenFlow port of `wan0`; `wan{k}` is `WAN_OFPORT_BASE + k`.
pub const WAN_OFPORT_BASE: u32 = 1;
/// OpenFlow port of `mpa0`; `mpa{k}` is `MPA_OFPORT_BASE + k`.
pub const MPA_OFPORT_BASE: u32 = 101;
/// The table every flow goes to.
pub const TABLE: u8 = 0;
/// EtherType IPv4.
pub const ETH_TYPE_IPV4: u16 = 0x0800;
/// IP protocol TCP.
pub const IP_PROTO_TCP: u8 = 6;

/// OpenFlow port number of `wan{k}`.
pub fn wan_ofport(port: PortIndex) -> u32 {
    WAN_OFPORT_BASE + u32::from(port.get())
}

/// OpenFlow port number of `mpa{k}`.
pub fn mpa_ofport(port: PortIndex) -> u32 {
    MPA_OFPORT_BASE + u32::from(port.get())
}

/// One OVS port a gateway must have.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchPort {
    /// Interface name (`wan0`, `mpa0`).
    pub name: String,
    /// Its OpenFlow port number.
    pub ofport: u32,
    /// The WAN port it belongs to.
    pub wan: PortIndex,
    /// Whether it is the internal port that carries the address (`mpa{k}`).
    pub internal: bool,
}

/// The OVS ports of `branch` (`wan0, mpa0, wan1, mpa1, ...`), empty for an unknown branch.
pub fn switch_ports(inventory: &Inventory, branch: BranchId) -> Vec<SwitchPort> {
    let Some(b) = inventory.branch(branch) else {
        return Vec::new();
    };
    b.wan
        .iter()
        .flat_map(|w| {
            let k = w.port;
            [
                SwitchPort {
                    name: format!("wan{}", k.get()),
                    ofport: wan_ofport(k),
                    wan: k,
                    internal: false,
                },
                SwitchPort {
                    name: format!("mpa{}", k.get()),
                    ofport: mpa_ofport(k),
                    wan: k,
                    internal: true,
                },
            ]
        })
        .collect()
}

/// The match of a flow. `None` is a wildcard; fields are listed (and printed) in one canonical
/// order, so equal matches print equally.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FlowMatch {
    /// OXM IN_PORT.
    pub in_port: Option<u32>,
    /// OXM ETH_TYPE (0x0800 on every swap entry).
    pub eth_type: Option<u16>,
    /// OXM IP_PROTO (6 on every swap entry).
    pub ip_proto: Option<u8>,
    /// OXM IP_DSCP (only the Type I source entries).
    pub ip_dscp: Option<u8>,
    /// OXM IPV4_SRC (exact).
    pub ipv4_src: Option<Ipv4Addr>,
    /// OXM IPV4_DST (exact).
    pub ipv4_dst: Option<Ipv4Addr>,
    /// OXM TCP_SRC (reverse entries).
    pub tcp_src: Option<u16>,
    /// OXM TCP_DST (forward entries).
    pub tcp_dst: Option<u16>,
}

/// Where a flow sends the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Output {
    /// An OpenFlow port number.
    Port(u32),
    /// OFPP_IN_PORT: back where it came from (the transit hairpin).
    InPort,
}

/// One action of an apply-actions instruction, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Action {
    /// set_field eth_src.
    SetEthSrc(MacAddr),
    /// set_field eth_dst.
    SetEthDst(MacAddr),
    /// set_field ipv4_src.
    SetIpv4Src(Ipv4Addr),
    /// set_field ipv4_dst.
    SetIpv4Dst(Ipv4Addr),
    /// set_field tcp_src.
    SetTcpSrc(u16),
    /// set_field tcp_dst.
    SetTcpDst(u16),
    /// set_field ip_dscp.
    SetIpDscp(u8),
    /// output.
    Output(Output),
}

/// One flow entry: table 0, no timeouts, apply-actions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowEntry {
    /// OpenFlow table ([`TABLE`]).
    pub table: u8,
    /// OpenFlow priority ([`crate::priority`]).
    pub priority: u16,
    /// Cookie ([`Cookie`]).
    pub cookie: Cookie,
    /// The match.
    pub matches: FlowMatch,
    /// The actions, applied in order.
    pub actions: Vec<Action>,
}

impl FlowEntry {
    /// The flow in `ovs-ofctl add-flow` syntax (OpenFlow 1.3), e.g. for tests on a real OVS.
    pub fn to_ofctl(&self) -> String {
        let mut s = format!(
            "cookie={:#018x},table={},priority={}",
            self.cookie.0, self.table, self.priority
        );
        let m = &self.matches;
        if let Some(p) = m.in_port {
            s += &format!(",in_port={p}");
        }
        if let Some(t) = m.eth_type {
            s += &format!(",dl_type={t:#06x}");
        }
        if let Some(p) = m.ip_proto {
            s += &format!(",nw_proto={p}");
        }
        if let Some(d) = m.ip_dscp {
            s += &format!(",ip_dscp={d}");
        }
        if let Some(a) = m.ipv4_src {
            s += &format!(",nw_src={a}");
        }
        if let Some(a) = m.ipv4_dst {
            s += &format!(",nw_dst={a}");
        }
        if let Some(p) = m.tcp_src {
            s += &format!(",tcp_src={p:#06x}");
        }
        if let Some(p) = m.tcp_dst {
            s += &format!(",tcp_dst={p:#06x}");
        }
        let actions: Vec<String> = self
            .actions
            .iter()
            .map(|a| match a {
                Action::SetEthSrc(v) => format!("set_field:{v}->eth_src"),
                Action::SetEthDst(v) => format!("set_field:{v}->eth_dst"),
                Action::SetIpv4Src(v) => format!("set_field:{v}->ip_src"),
                Action::SetIpv4Dst(v) => format!("set_field:{v}->ip_dst"),
                Action::SetTcpSrc(v) => format!("set_field:{v:#06x}->tcp_src"),
                Action::SetTcpDst(v) => format!("set_field:{v:#06x}->tcp_dst"),
                Action::SetIpDscp(v) => format!("set_field:{v}->ip_dscp"),
                Action::Output(Output::Port(p)) => format!("output:{p}"),
                Action::Output(Output::InPort) => "in_port".to_owned(),
            })
            .collect();
        s + ",actions=" + &actions.join(",")
    }

    /// The install stage of this flow.
    pub fn stage(&self) -> Option<Stage> {
        match self.cookie.decode()? {
            CookieInfo::Patch { .. } => Some(Stage::Patch),
            CookieInfo::Swap {
                role: HopRole::Destination,
                ..
            } => Some(Stage::Destination),
            CookieInfo::Swap {
                role: HopRole::Transit,
                ..
            } => Some(Stage::Transit),
            CookieInfo::Swap {
                role: HopRole::Source,
                ..
            } => Some(Stage::Source),
        }
    }
}

impl fmt::Display for FlowEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_ofctl())
    }
}

/// Direction of a swap entry on its member path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Direction {
    /// From A's MPA to B's MPA (matched on `tcp_dst`).
    Forward,
    /// B's packets back to A on the same subflow (matched on `tcp_src`).
    Reverse,
}

/// Role of a switch on a member path (its hop), in one direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum HopRole {
    /// The sending branch: `0xB00G` → `0xBASG`.
    Source,
    /// A transit branch: swap addresses, keep `0xBASG`.
    Transit,
    /// The receiving branch: restore `(x_i, y_j, 0xB00G)`.
    Destination,
}

/// A flow cookie (DESIGN §3.1: encodes `0xBASG`, direction and role).
///
/// ```text
///  63            48 47    40 39    32 31           16 15  12 11   8 7       0
/// +----------------+--------+--------+---------------+------+------+---------+
/// |  tag 0x4D4D    |  kind  | Bh  Ah | code 0xBASG   | dir  | role | variant |
/// +----------------+--------+--------+---------------+------+------+---------+
/// kind: 0x01 swap, 0x02 patch.
/// Bh, Ah: the high nibbles of branch ids above 15 (extended port plan; 0 in the paper's),
///         so bits 39..16 are `PathCode::wide` and name the member path in either plan.
/// swap:  dir 1 forward / 2 reverse; role 1 source, 2 transit, 3 destination;
///        variant 0 = catch-all (Type II), 1 = Type I source entry.
/// patch: code 0; dir 1 mpa_k→wan_k / 2 wan_k→mpa_k; role 0; variant = k.
/// ```
/// `cookie & MEMBER_MASK == Cookie::member(code)` selects every flow of one member path on every
/// switch; `cookie & TAG_MASK == TAG` every flow this controller owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Cookie(pub u64);

/// What a cookie says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CookieInfo {
    /// A swap entry.
    Swap {
        /// The member path.
        code: PathCode,
        /// Its direction.
        direction: Direction,
        /// The switch's role.
        role: HopRole,
        /// 0 catch-all, 1 Type I (source entries only).
        variant: u8,
    },
    /// A patch flow.
    Patch {
        /// The WAN port.
        port: PortIndex,
        /// `true` for `mpa_k → wan_k`.
        to_wan: bool,
    },
}

impl Cookie {
    /// The tag in bits 63..48.
    pub const TAG: u64 = 0x4D4D << 48;
    /// Selects the tag.
    pub const TAG_MASK: u64 = 0xFFFF << 48;
    /// Selects tag, kind and member path ([`PathCode::wide`], bits 39..16): every flow of one
    /// member path.
    pub const MEMBER_MASK: u64 = 0xFFFF_FFFF_FFFF_0000;
    const KIND_SWAP: u64 = 0x01;
    const KIND_PATCH: u64 = 0x02;

    /// The cookie of one swap entry.
    pub fn swap(code: PathCode, direction: Direction, role: HopRole, variant: u8) -> Self {
        let dir = match direction {
            Direction::Forward => 1u64,
            Direction::Reverse => 2,
        };
        let role = match role {
            HopRole::Source => 1u64,
            HopRole::Transit => 2,
            HopRole::Destination => 3,
        };
        Self(Self::member(code) | dir << 12 | role << 8 | u64::from(variant))
    }

    /// The value that `cookie & MEMBER_MASK` has for every flow of member path `code`.
    pub fn member(code: PathCode) -> u64 {
        Self::TAG | Self::KIND_SWAP << 40 | u64::from(code.wide()) << 16
    }

    /// The cookie of a patch flow.
    pub fn patch(port: PortIndex, to_wan: bool) -> Self {
        let dir = if to_wan { 1u64 } else { 2 };
        Self(Self::TAG | Self::KIND_PATCH << 40 | dir << 12 | u64::from(port.get()))
    }

    /// Decodes a cookie of ours (`None` for anything else).
    pub fn decode(self) -> Option<CookieInfo> {
        let v = self.0;
        if v & Self::TAG_MASK != Self::TAG {
            return None;
        }
        let dir = (v >> 12) & 0xF;
        let role = (v >> 8) & 0xF;
        let variant = u8::try_from(v & 0xFF).ok()?;
        match (v >> 40) & 0xFF {
            Self::KIND_SWAP => {
                let code = PathCode::from_wide(u32::try_from((v >> 16) & 0xFF_FFFF).ok()?)?;
                let direction = match dir {
                    1 => Direction::Forward,
                    2 => Direction::Reverse,
                    _ => return None,
                };
                let role = match role {
                    1 => HopRole::Source,
                    2 => HopRole::Transit,
                    3 => HopRole::Destination,
                    _ => return None,
                };
                (variant <= 1).then_some(CookieInfo::Swap {
                    code,
                    direction,
                    role,
                    variant,
                })
            }
            Self::KIND_PATCH if (v >> 16) & 0xFF_FFFF == 0 && role == 0 => {
                Some(CookieInfo::Patch {
                    port: PortIndex::new(variant).ok()?,
                    to_wan: match dir {
                        1 => true,
                        2 => false,
                        _ => return None,
                    },
                })
            }
            _ => None,
        }
    }
}

impl fmt::Display for Cookie {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#018x}", self.0)
    }
}

/// Which MAC the compiler needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MacKind {
    /// The port's own MAC (`mac`, the MAC of `mpa{k}`).
    Port,
    /// The next hop's MAC (`gateway_mac`).
    Gateway,
}

impl fmt::Display for MacKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MacKind::Port => "mac",
            MacKind::Gateway => "gateway_mac",
        })
    }
}

/// Why the flows could not be compiled.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// A member path names a port the inventory does not have (the groups were validated against
    /// another inventory: misuse by the caller).
    #[error("member path {code}: port {port} is not in the inventory")]
    UnknownPort {
        /// The member path.
        code: PathCode,
        /// The port.
        port: PortRef,
    },
    /// A transit egress port whose MAC (own or gateway) is unknown: the transit must rewrite the
    /// Ethernet header, so the operator must give it.
    #[error("member path {code}: port {port} is a transit egress, so its `{kind}` must be set in the inventory")]
    MissingMac {
        /// The member path.
        code: PathCode,
        /// The port.
        port: PortRef,
        /// Which MAC.
        kind: MacKind,
    },
    /// A branch id above 15 with the paper's port plan, whose `0xBASG` has one nibble for it.
    #[error("branch {branch} does not fit the paper's port plan 0xBASG (branch ids 1..=15): set an extended port range (ssc settings set --ports 16384-32767)")]
    PaperPlan {
        /// The branch.
        branch: BranchId,
    },
    /// A member path without an allocated code in the extended plan (misuse: the caller did
    /// not run `codes::allocate` for these groups).
    #[error("member path {code} has no allocated port code")]
    NoCode {
        /// The member path.
        code: PathCode,
    },
    /// Two flows with the same match and priority on one switch (cannot happen for validated
    /// groups; guards against misuse).
    #[error("branch {branch}: flows {first} and {second} have the same match and priority")]
    Conflict {
        /// The switch.
        branch: BranchId,
        /// The first cookie.
        first: Cookie,
        /// The second cookie.
        second: Cookie,
    },
}

/// The compiled table 0 of every gateway OVS.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowTables {
    switches: BTreeMap<BranchId, Vec<FlowEntry>>,
}

impl FlowTables {
    /// The flows of one gateway, by priority (highest first), then cookie.
    pub fn switch(&self, branch: BranchId) -> &[FlowEntry] {
        self.switches.get(&branch).map_or(&[], Vec::as_slice)
    }

    /// Every switch with its flows, in branch order.
    pub fn iter(&self) -> impl Iterator<Item = (BranchId, &[FlowEntry])> + '_ {
        self.switches.iter().map(|(b, f)| (*b, f.as_slice()))
    }

    /// Number of flows per switch.
    pub fn counts(&self) -> BTreeMap<BranchId, usize> {
        self.switches.iter().map(|(b, f)| (*b, f.len())).collect()
    }

    /// Total number of flows.
    pub fn len(&self) -> usize {
        self.switches.values().map(Vec::len).sum()
    }

    /// Whether there is no flow.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every flow of member path `code`, with its switch.
    pub fn member_flows(&self, code: PathCode) -> Vec<(BranchId, &FlowEntry)> {
        let key = Cookie::member(code);
        self.iter()
            .flat_map(|(b, flows)| flows.iter().map(move |f| (b, f)))
            .filter(|(_, f)| f.cookie.0 & Cookie::MEMBER_MASK == key)
            .collect()
    }

    fn push(&mut self, branch: BranchId, flow: FlowEntry) {
        self.switches.entry(branch).or_default().push(flow);
    }
}

/// Compiles the flow tables of every gateway in `inventory` for `groups` with the paper's port
/// plan (`0xB00G` / `0xBASG`).
pub fn compile(inventory: &Inventory, groups: &PathGroups) -> Result<FlowTables, CompileError> {
    compile_with(inventory, groups, Ports::Paper)
}

/// Which outer ports the compiler writes (DESIGN §3.1, issue #20).
#[derive(Clone, Copy, Debug)]
pub enum Ports<'a> {
    /// The paper's: listen `0xB00G`, code `0xBASG`; every branch id must be 1..=15.
    Paper,
    /// The extended plan: listen `first + G`, each member path's code from `codes`.
    Extended {
        /// The reserved range.
        range: CodeRange,
        /// The allocated codes (`codes::allocate`).
        codes: &'a CodeTable,
    },
}

impl Ports<'_> {
    /// (listen port, outer code) of member path `code`.
    fn of(self, code: PathCode) -> Result<(u16, u16), CompileError> {
        match self {
            Ports::Paper => {
                for branch in [code.source, code.destination] {
                    if !branch.fits_paper() {
                        return Err(CompileError::PaperPlan { branch });
                    }
                }
                Ok((code.listen_port(), code.port()))
            }
            Ports::Extended { range, codes } => {
                let listen = PortPlan::Extended(range)
                    .listen_port(code.destination, code.group)
                    .ok_or(CompileError::NoCode { code })?;
                let swapped = codes.get(code).ok_or(CompileError::NoCode { code })?;
                Ok((listen, swapped))
            }
        }
    }
}

/// [`compile`] with the port plan `ports`.
pub fn compile_with(
    inventory: &Inventory,
    groups: &PathGroups,
    ports: Ports<'_>,
) -> Result<FlowTables, CompileError> {
    if matches!(ports, Ports::Paper) {
        if let Some(b) = inventory.branches().find(|b| !b.id.fits_paper()) {
            return Err(CompileError::PaperPlan { branch: b.id });
        }
    }
    let mut tables = FlowTables::default();
    for branch in inventory.branches() {
        tables.switches.insert(branch.id, Vec::new());
        for w in &branch.wan {
            tables.push(branch.id, patch_flow(w.port, true));
            tables.push(branch.id, patch_flow(w.port, false));
        }
    }
    for member in groups.members() {
        let wire = ports.of(member.code)?;
        for (branch, flow) in compile_member_with(inventory, member.code, member.path, wire)? {
            tables.push(branch, flow);
        }
    }
    for (&branch, flows) in &mut tables.switches {
        flows.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.cookie.cmp(&b.cookie)));
        let mut seen: BTreeMap<(u16, &FlowMatch), Cookie> = BTreeMap::new();
        for f in flows.iter() {
            if let Some(&first) = seen.get(&(f.priority, &f.matches)) {
                return Err(CompileError::Conflict {
                    branch,
                    first,
                    second: f.cookie,
                });
            }
            seen.insert((f.priority, &f.matches), f.cookie);
        }
    }
    Ok(tables)
}

fn patch_flow(port: PortIndex, to_wan: bool) -> FlowEntry {
    let (from, to) = if to_wan {
        (mpa_ofport(port), wan_ofport(port))
    } else {
        (wan_ofport(port), mpa_ofport(port))
    };
    FlowEntry {
        table: TABLE,
        priority: PATCH_PRIORITY,
        cookie: Cookie::patch(port, to_wan),
        matches: FlowMatch {
            in_port: Some(from),
            ..FlowMatch::default()
        },
        actions: vec![Action::Output(Output::Port(to))],
    }
}

/// The swap entries of one member path (forward and reverse), each with its switch, in the order
/// source, transits, destination of the forward direction, then the same for the reverse.
pub fn compile_member(
    inventory: &Inventory,
    code: PathCode,
    path: &MemberPath,
) -> Result<Vec<(BranchId, FlowEntry)>, CompileError> {
    compile_member_with(inventory, code, path, Ports::Paper.of(code)?)
}

/// [`compile_member`] with the outer ports `(listen, swapped)` of the port plan.
fn compile_member_with(
    inventory: &Inventory,
    code: PathCode,
    path: &MemberPath,
    wire: (u16, u16),
) -> Result<Vec<(BranchId, FlowEntry)>, CompileError> {
    let mut out = compile_direction(inventory, code, path, Direction::Forward, wire)?;
    out.extend(compile_direction(
        inventory,
        code,
        &path.reversed(),
        Direction::Reverse,
        wire,
    )?);
    Ok(out)
}

fn compile_direction(
    inventory: &Inventory,
    code: PathCode,
    path: &MemberPath,
    direction: Direction,
    (listen, swapped): (u16, u16),
) -> Result<Vec<(BranchId, FlowEntry)>, CompileError> {
    let addr = |port: PortRef| {
        inventory
            .port(port)
            .map(|w| w.ip())
            .ok_or(CompileError::UnknownPort { code, port })
    };
    let set_port = |p: u16| match direction {
        Direction::Forward => Action::SetTcpDst(p),
        Direction::Reverse => Action::SetTcpSrc(p),
    };
    let tcp_match = |src: Ipv4Addr, dst: Ipv4Addr, in_port: u32, p: u16| FlowMatch {
        in_port: Some(in_port),
        eth_type: Some(ETH_TYPE_IPV4),
        ip_proto: Some(IP_PROTO_TCP),
        ip_dscp: None,
        ipv4_src: Some(src),
        ipv4_dst: Some(dst),
        tcp_src: (direction == Direction::Reverse).then_some(p),
        tcp_dst: (direction == Direction::Forward).then_some(p),
    };
    let entry =
        |priority: u16, cookie: Cookie, matches: FlowMatch, actions: Vec<Action>| FlowEntry {
            table: TABLE,
            priority,
            cookie,
            matches,
            actions,
        };

    let hops = path.hops();
    let n = hops.len();
    let (Some(first), Some(last)) = (hops.first(), hops.last()) else {
        return Ok(Vec::new());
    };
    let (src, dst) = (path.source(), path.destination());
    let (orig_src, orig_dst) = (addr(src)?, addr(dst)?);
    let mut out = Vec::new();

    // Source: (x_i, y_j, 0xB00G) from mpa_i → first hop, 0xBASG, DSCP, out wan_i.
    let (first_src, first_dst) = (addr(first.from)?, addr(first.to)?);
    for (class, type_i) in [(Class::TypeI, true), (Class::TypeII, false)] {
        let mut m = tcp_match(orig_src, orig_dst, mpa_ofport(src.port), listen);
        m.ip_dscp = type_i.then_some(TYPE_I_MARK);
        out.push((
            src.branch,
            entry(
                priority::swap_priority(n, type_i),
                Cookie::swap(code, direction, HopRole::Source, u8::from(type_i)),
                m,
                vec![
                    Action::SetIpv4Src(first_src),
                    Action::SetIpv4Dst(first_dst),
                    set_port(swapped),
                    Action::SetIpDscp(priority::dscp(class, n)),
                    Action::Output(Output::Port(wan_ofport(src.port))),
                ],
            ),
        ));
    }

    // Transits: arrive by hop k on `ingress`, leave by hop k+1 from `egress`.
    for (t, pair) in path.transits().iter().zip(hops.windows(2)) {
        let [arrive, leave] = pair else { continue };
        let egress = t.egress;
        let mac = inventory
            .port(egress)
            .and_then(|w| w.mac)
            .ok_or(CompileError::MissingMac {
                code,
                port: egress,
                kind: MacKind::Port,
            })?;
        let gw_mac = inventory
            .next_hop_mac(egress)
            .ok_or(CompileError::MissingMac {
                code,
                port: egress,
                kind: MacKind::Gateway,
            })?;
        let output = if t.ingress.port == egress.port {
            Output::InPort
        } else {
            Output::Port(wan_ofport(egress.port))
        };
        out.push((
            t.ingress.branch,
            entry(
                priority::swap_priority(n, false),
                Cookie::swap(code, direction, HopRole::Transit, 0),
                tcp_match(
                    addr(arrive.from)?,
                    addr(arrive.to)?,
                    wan_ofport(t.ingress.port),
                    swapped,
                ),
                vec![
                    Action::SetEthSrc(mac),
                    Action::SetEthDst(gw_mac),
                    Action::SetIpv4Src(addr(leave.from)?),
                    Action::SetIpv4Dst(addr(leave.to)?),
                    set_port(swapped),
                    Action::Output(output),
                ],
            ),
        ));
    }

    // Destination: restore (x_i, y_j, 0xB00G), out mpa_j.
    out.push((
        dst.branch,
        entry(
            priority::swap_priority(n, false),
            Cookie::swap(code, direction, HopRole::Destination, 0),
            tcp_match(addr(last.from)?, orig_dst, wan_ofport(dst.port), swapped),
            vec![
                Action::SetIpv4Src(orig_src),
                Action::SetIpv4Dst(orig_dst),
                set_port(listen),
                Action::Output(Output::Port(mpa_ofport(dst.port))),
            ],
        ),
    ));
    Ok(out)
}

/// A stage of installation. A member path is installed destination first, then transit, then
/// source (both directions in each stage), each stage confirmed by a barrier on every switch it
/// touches before the next starts, so a subflow never meets a half-built path; removal runs the
/// stages backwards. Patch flows go first of all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Stage {
    /// `mpa_k ↔ wan_k`.
    Patch,
    /// Destination entries (forward at B, reverse at A).
    Destination,
    /// Transit entries.
    Transit,
    /// Source entries (forward at A, reverse at B).
    Source,
}

/// The outer headers a swap flow reads and writes (for [`apply`], and tests that walk a path).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Packet {
    /// Ethernet source.
    pub eth_src: MacAddr,
    /// Ethernet destination.
    pub eth_dst: MacAddr,
    /// IPv4 source.
    pub ipv4_src: Ipv4Addr,
    /// IPv4 destination.
    pub ipv4_dst: Ipv4Addr,
    /// DSCP.
    pub ip_dscp: u8,
    /// TCP source port.
    pub tcp_src: u16,
    /// TCP destination port.
    pub tcp_dst: u16,
}

impl FlowMatch {
    /// Whether a TCP/IPv4 packet arriving on `in_port` matches.
    pub fn matches(&self, in_port: u32, p: &Packet) -> bool {
        fn ok<T: PartialEq>(field: Option<T>, value: T) -> bool {
            field.is_none_or(|f| f == value)
        }
        ok(self.in_port, in_port)
            && ok(self.eth_type, ETH_TYPE_IPV4)
            && ok(self.ip_proto, IP_PROTO_TCP)
            && ok(self.ip_dscp, p.ip_dscp)
            && ok(self.ipv4_src, p.ipv4_src)
            && ok(self.ipv4_dst, p.ipv4_dst)
            && ok(self.tcp_src, p.tcp_src)
            && ok(self.tcp_dst, p.tcp_dst)
    }
}

/// Runs one OVS table on a TCP/IPv4 packet arriving on `in_port`, as OVS would: the highest
/// priority matching flow applies its actions. Returns the rewritten packet, the output port
/// (IN_PORT resolved to `in_port`) and the flow; `None` when nothing matches (the packet would be
/// dropped, `fail_mode=secure`) or when the flow outputs to the ingress port by number, which
/// OpenFlow drops (only `IN_PORT` sends a packet back where it came from).
pub fn apply(
    flows: &[FlowEntry],
    in_port: u32,
    packet: Packet,
) -> Option<(Packet, u32, &FlowEntry)> {
    let flow = flows
        .iter()
        .filter(|f| f.matches.matches(in_port, &packet))
        .max_by(|a, b| a.priority.cmp(&b.priority).then(b.cookie.cmp(&a.cookie)))?;
    let mut p = packet;
    let mut out = None;
    for a in &flow.actions {
        match *a {
            Action::SetEthSrc(v) => p.eth_src = v,
            Action::SetEthDst(v) => p.eth_dst = v,
            Action::SetIpv4Src(v) => p.ipv4_src = v,
            Action::SetIpv4Dst(v) => p.ipv4_dst = v,
            Action::SetTcpSrc(v) => p.tcp_src = v,
            Action::SetTcpDst(v) => p.tcp_dst = v,
            Action::SetIpDscp(v) => p.ip_dscp = v,
            Action::Output(Output::Port(o)) if o == in_port => return None,
            Action::Output(Output::Port(o)) => out = Some(o),
            Action::Output(Output::InPort) => out = Some(in_port),
        }
    }
    Some((p, out?, flow))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookie_round_trip() {
        let code = PathCode::from_port(0x2114).unwrap();
        for direction in [Direction::Forward, Direction::Reverse] {
            for role in [HopRole::Source, HopRole::Transit, HopRole::Destination] {
                for variant in 0..=1 {
                    let c = Cookie::swap(code, direction, role, variant);
                    assert_eq!(
                        c.decode(),
                        Some(CookieInfo::Swap {
                            code,
                            direction,
                            role,
                            variant
                        })
                    );
                    assert_eq!(c.0 & Cookie::MEMBER_MASK, Cookie::member(code));
                    assert_eq!(c.0 & Cookie::TAG_MASK, Cookie::TAG);
                }
            }
        }
        assert_eq!(
            Cookie::swap(code, Direction::Forward, HopRole::Source, 1).0,
            0x4D4D_0100_2114_1101
        );
        let port = PortIndex::new(3).unwrap();
        assert_eq!(
            Cookie::patch(port, true).decode(),
            Some(CookieInfo::Patch { port, to_wan: true })
        );
        assert_eq!(Cookie::patch(port, false).0, 0x4D4D_0200_0000_2003);
        assert_eq!(Cookie(0).decode(), None);
        assert_eq!(
            Cookie(0x4D4D_0100_2004_1100).decode(),
            None,
            "listen port is not a code"
        );
    }
}
