//! Reconciliation by cookie (pure): what a switch has vs what it should have → FLOW_MODs, and the
//! order to send them in (DESIGN §3.1).
//!
//! [`diff`] compares the flows of ours a switch reports (cookie tag [`Cookie::TAG`]; foreign
//! flows are never touched) with the compiled table of its branch, cookie by cookie:
//!
//! | switch has (cookie c)                     | desired (cookie c) | operation                  |
//! |-------------------------------------------|--------------------|----------------------------|
//! | nothing                                   | flow f             | ADD f                      |
//! | exactly f                                 | f                  | nothing                    |
//! | one flow, same table/priority/match as f  | f, other actions   | MODIFY_STRICT f            |
//! | one flow g, same table, other priority or match | f            | ADD f, then DELETE_STRICT g |
//! | anything else (other table, duplicates, a flow the IR cannot express) | f | DELETE c first, ADD f |
//! | anything                                  | nothing            | DELETE c (cookie-masked)   |
//!
//! [`plan`] orders the operations of one or many switches into [`Step`]s, make before break:
//! first the adds and modifies in install order (patch, destination, transit, source), then the
//! deletes (by cookie, and of replaced flows) in removal order (source, transit, destination,
//! patch); only the flows of ours whose cookie does not decode, and those replaced by deleting
//! their cookie ([`FlowOp::Purge`]: the new flow has it too), are deleted before everything. The
//! driver sends one step's operations to every switch in it, then a barrier to each, and starts
//! the next step only when every barrier is answered, so a member path, the old one as well as
//! the new one, is never half-installed in either direction.
//!
//! Make before break matters when a member path moves (automatic path configuration replacing
//! a direct member by one through a transit changes its entries' priority and, at the
//! destination, their match): the old entries keep carrying until the new ones are in place.
//! Deleted first (until 2026-11-28), the gateway's packets met only the pass-through patch flow
//! for the few milliseconds of the update; Open vSwitch's userspace datapath cached that
//! (`actions:<wan port>`, the old direct path) and in ~1 of 10 runs of `e2e_adaptive auto_path`
//! kept the cached flow for the rest of the run (`ovs-appctl dpctl/dump-flows`), so one uplink's
//! subflows stayed on the congested direct hops.
//! The same functions serve a switch that (re)connects (its dump vs the compiled table) and an
//! inventory change (the old compiled table vs the new one, on every connected switch).
use std::collections::BTreeMap;

use ofproto::message::{FlowMod, FlowModCommand};

use super::flowmod;
use crate::inventory::BranchId;
use crate::path_group::PathCode;
use crate::swap::{Cookie, CookieInfo, FlowEntry, Stage};

/// One flow of ours found on a switch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Installed {
    /// Its cookie.
    pub cookie: Cookie,
    /// The flow in the IR, `None` if the IR cannot express it (it is then replaced).
    pub flow: Option<FlowEntry>,
}

impl Installed {
    /// A flow known to be installed exactly as compiled.
    pub fn exact(flow: &FlowEntry) -> Self {
        Self {
            cookie: flow.cookie,
            flow: Some(flow.clone()),
        }
    }
}

/// One change to a switch's table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlowOp {
    /// OFPFC_ADD.
    Add(FlowEntry),
    /// OFPFC_MODIFY_STRICT (same table, priority and match; new actions).
    Modify(FlowEntry),
    /// OFPFC_DELETE of every flow with this cookie (it is gone from the switch's table).
    Delete(Cookie),
    /// OFPFC_DELETE of every flow with this cookie before its flow is added again (the switch
    /// has it twice, in another table, or in a form the IR cannot express): runs before every
    /// install, or it would delete the new flow too.
    Purge(Cookie),
    /// OFPFC_DELETE_STRICT of this flow (table, priority and match; its cookie): the one a
    /// flow with the same cookie but another priority or match replaced.
    Retire(FlowEntry),
}

impl FlowOp {
    /// The cookie it acts on.
    pub fn cookie(&self) -> Cookie {
        match self {
            FlowOp::Add(f) | FlowOp::Modify(f) | FlowOp::Retire(f) => f.cookie,
            FlowOp::Delete(c) | FlowOp::Purge(c) => *c,
        }
    }

    /// The member path it belongs to (`None` for patch flows and unknown cookies).
    pub fn member(&self) -> Option<PathCode> {
        match self.cookie().decode()? {
            CookieInfo::Swap { code, .. } => Some(code),
            CookieInfo::Patch { .. } => None,
        }
    }

    /// The FLOW_MOD to send.
    pub fn to_flow_mod(&self) -> FlowMod {
        match self {
            FlowOp::Add(f) => flowmod::flow_mod(f, FlowModCommand::Add),
            FlowOp::Modify(f) => flowmod::flow_mod(f, FlowModCommand::ModifyStrict),
            FlowOp::Delete(c) | FlowOp::Purge(c) => flowmod::delete_cookie(*c),
            FlowOp::Retire(f) => flowmod::delete_strict(f),
        }
    }

    /// When it runs: adds and modifies in install order, then deletes in removal order. A
    /// cookie of ours that does not decode, and a purge, are deleted first of all.
    pub fn phase(&self) -> Phase {
        if matches!(self, FlowOp::Purge(_)) {
            return Phase::Clear;
        }
        let stage = match self.cookie().decode() {
            Some(CookieInfo::Patch { .. }) => Stage::Patch,
            Some(CookieInfo::Swap { .. }) => match self {
                FlowOp::Add(f) | FlowOp::Modify(f) | FlowOp::Retire(f) => {
                    f.stage().unwrap_or(Stage::Source)
                }
                FlowOp::Delete(c) | FlowOp::Purge(c) => stage_of(*c),
            },
            None => return Phase::Clear,
        };
        match self {
            FlowOp::Delete(_) | FlowOp::Purge(_) | FlowOp::Retire(_) => Phase::Remove(stage),
            _ => Phase::Install(stage),
        }
    }
}

fn stage_of(c: Cookie) -> Stage {
    FlowEntry {
        table: 0,
        priority: 0,
        cookie: c,
        matches: Default::default(),
        actions: Vec::new(),
    }
    .stage()
    .unwrap_or(Stage::Source)
}

/// When an operation runs; [`PHASES`] is the order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Deletes before everything: flows with our tag whose cookie does not decode (an older
    /// controller's), and [`FlowOp::Purge`]s.
    Clear,
    /// Deletes (by cookie, and of replaced flows) of one stage.
    Remove(Stage),
    /// Adds and modifies of one stage.
    Install(Stage),
}

/// The order of phases (make before break): the clearing deletes, then installation patch →
/// destination → transit → source, then removal source → transit → destination → patch.
pub const PHASES: [Phase; 9] = [
    Phase::Clear,
    Phase::Install(Stage::Patch),
    Phase::Install(Stage::Destination),
    Phase::Install(Stage::Transit),
    Phase::Install(Stage::Source),
    Phase::Remove(Stage::Source),
    Phase::Remove(Stage::Transit),
    Phase::Remove(Stage::Destination),
    Phase::Remove(Stage::Patch),
];

/// What one switch needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diff {
    /// The operations, in no particular order ([`plan`] orders them).
    pub ops: Vec<FlowOp>,
    /// Flows of ours already right.
    pub unchanged: usize,
}

impl Diff {
    /// Number of ADDs (including the re-adds of replaced flows).
    pub fn adds(&self) -> usize {
        self.ops
            .iter()
            .filter(|o| matches!(o, FlowOp::Add(_)))
            .count()
    }

    /// Number of MODIFY_STRICTs.
    pub fn modifies(&self) -> usize {
        self.ops
            .iter()
            .filter(|o| matches!(o, FlowOp::Modify(_)))
            .count()
    }

    /// Number of DELETEs (by cookie, purges, and the DELETE_STRICTs of replaced flows).
    pub fn deletes(&self) -> usize {
        self.ops
            .iter()
            .filter(|o| matches!(o, FlowOp::Delete(_) | FlowOp::Purge(_) | FlowOp::Retire(_)))
            .count()
    }

    /// Whether the switch is already right.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// The operations that turn `installed` (a switch's flows; those without our tag are ignored)
/// into `desired` (compiled flows, unique cookies).
pub fn diff(installed: &[Installed], desired: &[FlowEntry]) -> Diff {
    let mut have: BTreeMap<Cookie, Vec<&Installed>> = BTreeMap::new();
    for i in installed {
        if i.cookie.0 & Cookie::TAG_MASK == Cookie::TAG {
            have.entry(i.cookie).or_default().push(i);
        }
    }
    let mut out = Diff::default();
    let mut wanted = std::collections::BTreeSet::new();
    for f in desired {
        wanted.insert(f.cookie);
        match have.get(&f.cookie).map(Vec::as_slice) {
            None | Some([]) => out.ops.push(FlowOp::Add(f.clone())),
            Some([one]) => match &one.flow {
                Some(g) if g == f => out.unchanged += 1,
                Some(g)
                    if g.table == f.table && g.priority == f.priority && g.matches == f.matches =>
                {
                    out.ops.push(FlowOp::Modify(f.clone()));
                }
                // Make before break: the new flow cannot overwrite the old one (another
                // priority or match), so both are in the table for a moment.
                Some(g) if g.table == f.table => {
                    out.ops.push(FlowOp::Add(f.clone()));
                    out.ops.push(FlowOp::Retire(g.clone()));
                }
                _ => {
                    out.ops.push(FlowOp::Purge(f.cookie));
                    out.ops.push(FlowOp::Add(f.clone()));
                }
            },
            Some(_) => {
                out.ops.push(FlowOp::Purge(f.cookie));
                out.ops.push(FlowOp::Add(f.clone()));
            }
        }
    }
    for c in have.keys() {
        if !wanted.contains(c) {
            out.ops.push(FlowOp::Delete(*c));
        }
    }
    out
}

/// One step of a plan: operations per switch, then a barrier on each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// Which phase.
    pub phase: Phase,
    /// Operations per switch (switches without any are absent).
    pub ops: BTreeMap<BranchId, Vec<FlowOp>>,
}

/// Orders the operations of every switch into steps ([`PHASES`]); empty steps are left out.
/// Within a step a switch's operations keep their order from the diff.
pub fn plan(diffs: &BTreeMap<BranchId, Diff>) -> Vec<Step> {
    PHASES
        .iter()
        .filter_map(|&phase| {
            let ops: BTreeMap<BranchId, Vec<FlowOp>> = diffs
                .iter()
                .map(|(b, d)| {
                    let ops: Vec<FlowOp> = d
                        .ops
                        .iter()
                        .filter(|o| o.phase() == phase)
                        .cloned()
                        .collect();
                    (*b, ops)
                })
                .filter(|(_, ops)| !ops.is_empty())
                .collect();
            (!ops.is_empty()).then_some(Step { phase, ops })
        })
        .collect()
}

/// The diffs that take every switch in `switches` from the compiled table `old` to `new`
/// (switches whose flows did not change are left out).
pub fn update_diffs(
    old: &crate::swap::FlowTables,
    new: &crate::swap::FlowTables,
    switches: impl IntoIterator<Item = BranchId>,
) -> BTreeMap<BranchId, Diff> {
    switches
        .into_iter()
        .filter_map(|b| {
            let installed: Vec<Installed> = old.switch(b).iter().map(Installed::exact).collect();
            let d = diff(&installed, new.switch(b));
            (!d.is_empty()).then_some((b, d))
        })
        .collect()
}
