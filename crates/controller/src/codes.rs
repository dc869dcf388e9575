//! Outer port codes of the extended port plan (issue #20: more than 15 branches).
//!
//! The paper codes member path S of group G from branch A to B as the outer TCP port `0xBASG`,
//! one nibble per id, so it stops at 15 branches. With [`PortPlan::Extended`] every gateway
//! reserves one range (`CodeRange`, e.g. `16384-32767`); the MPAs listen on its first 16 ports
//! (`first + G`) and this module hands each member path one code from the rest of the range.
//!
//! What a code must satisfy: every swap entry of a gateway matches the outer triple (source,
//! destination, code) on `tcp_dst` (forward) or `tcp_src` (reverse), and its cookie names the
//! member path, so **no two member paths that touch one gateway (as source, transit or
//! destination) share a code**. A path's code is the same on all its hops, as in the paper; it
//! only has to be unique on the (at most three) gateways the path crosses, not network-wide, so
//! 250 branches fit in 16-bit ports: a full mesh of 250 branches with one group of 4 members
//! per ordered pair puts 249 × 2 × 4 = 1,992 member paths on each gateway.
//!
//! [`allocate`] is pure and deterministic: it keeps every code of the previous table that is
//! still valid (the path exists, the code is in the range and free on its gateways), then gives
//! each new member path, in [`PathCode`] order, the lowest code free on every gateway it crosses
//! (first fit over per-gateway bitsets, 64 codes per step). Adding a branch therefore never
//! changes an existing code, so the OFC installs only the new paths' flows. The catalog keeps
//! the table and the store persists it next to the settings.
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use mms_types::{CodeRange, PathCode};
use serde::{Deserialize, Serialize};

use crate::inventory::BranchId;

/// The code of every member path of the extended plan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CodeTable {
    codes: BTreeMap<PathCode, u16>,
}

/// One row of [`CodeTable`] as stored (JSON): the member path's id ([`PathCode::wide`]) and its
/// outer port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Row {
    member: u32,
    port: u16,
}

impl Serialize for CodeTable {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let rows: Vec<Row> = self
            .codes
            .iter()
            .map(|(c, &port)| Row {
                member: c.wide(),
                port,
            })
            .collect();
        rows.serialize(s)
    }
}

impl<'de> Deserialize<'de> for CodeTable {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let rows = Vec::<Row>::deserialize(d)?;
        let mut codes = BTreeMap::new();
        for r in rows {
            let code = PathCode::from_wide(r.member).ok_or_else(|| {
                serde::de::Error::custom(format!("{:#x} is no member path", r.member))
            })?;
            codes.insert(code, r.port);
        }
        Ok(Self { codes })
    }
}

impl CodeTable {
    /// The outer port of member path `code`, if it has one.
    pub fn get(&self, code: PathCode) -> Option<u16> {
        self.codes.get(&code).copied()
    }

    /// Every member path with its port, in [`PathCode`] order.
    pub fn iter(&self) -> impl Iterator<Item = (PathCode, u16)> + '_ {
        self.codes.iter().map(|(c, p)| (*c, *p))
    }

    /// Number of member paths.
    pub fn len(&self) -> usize {
        self.codes.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.codes.is_empty()
    }
}

/// Why the codes could not be allocated: the range is too small for the member paths that
/// cross some gateways (the operator's input: widen the range or use fewer paths).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CodeError {
    /// No code of the range is free on every gateway the member path crosses.
    #[error("member path {code} ({source_branch}>{destination} #{group}, member {member}): no port code of {first}-{last} is free on all of branches {branches} (they use {used}); widen the port range")]
    RangeFull {
        /// The member path.
        code: PathCode,
        /// Its source branch.
        source_branch: BranchId,
        /// Its destination branch.
        destination: BranchId,
        /// Its group.
        group: u8,
        /// Its member id.
        member: u8,
        /// The gateways it crosses, comma-separated.
        branches: BranchList,
        /// Codes in use on each of them, comma-separated in the same order.
        used: BranchList,
        /// First code of the range.
        first: u16,
        /// Last code of the range.
        last: u16,
    },
}

/// A comma-separated list for error messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BranchList(pub Vec<String>);

impl fmt::Display for BranchList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join(", "))
    }
}

/// The codes in use on one gateway: one bit per port of the range.
#[derive(Clone, Debug)]
struct Used {
    words: Vec<u64>,
    count: usize,
}

impl Used {
    fn new(len: usize) -> Self {
        Self {
            words: vec![0; len.div_ceil(64)],
            count: 0,
        }
    }

    fn get(&self, i: usize) -> bool {
        self.words
            .get(i / 64)
            .is_some_and(|w| w >> (i % 64) & 1 == 1)
    }

    fn set(&mut self, i: usize) {
        if let Some(w) = self.words.get_mut(i / 64) {
            if *w >> (i % 64) & 1 == 0 {
                self.count += 1;
            }
            *w |= 1 << (i % 64);
        }
    }
}

/// Allocates the code of every member path in `paths` (each with the gateways it crosses:
/// source, transits, destination) from `range`, keeping the still valid codes of `previous`
/// (module docs).
pub fn allocate(
    previous: &CodeTable,
    range: CodeRange,
    paths: &BTreeMap<PathCode, BTreeSet<BranchId>>,
) -> Result<CodeTable, CodeError> {
    let first = *range.codes().start();
    let len = range.code_count();
    let mut used: BTreeMap<BranchId, Used> = BTreeMap::new();
    for gws in paths.values() {
        for b in gws {
            used.entry(*b).or_insert_with(|| Used::new(len));
        }
    }
    let mut out = CodeTable::default();
    // Keep the previous codes that are still valid (in PathCode order: deterministic).
    for (code, gws) in paths {
        let Some(port) = previous.get(*code) else {
            continue;
        };
        if !range.codes().contains(&port) {
            continue;
        }
        let i = usize::from(port - first);
        if gws.iter().any(|b| used.get(b).is_some_and(|u| u.get(i))) {
            continue;
        }
        for b in gws {
            if let Some(u) = used.get_mut(b) {
                u.set(i);
            }
        }
        out.codes.insert(*code, port);
    }
    // New member paths: the lowest code free on every gateway they cross.
    for (code, gws) in paths {
        if out.codes.contains_key(code) {
            continue;
        }
        let words = len.div_ceil(64);
        let mut found = None;
        for w in 0..words {
            let mut taken = 0u64;
            for b in gws {
                taken |= used
                    .get(b)
                    .and_then(|u| u.words.get(w))
                    .copied()
                    .unwrap_or(0);
            }
            let free = !taken;
            if free != 0 {
                let i = w * 64 + free.trailing_zeros() as usize;
                if i < len {
                    found = Some(i);
                }
                break;
            }
        }
        let Some(i) = found else {
            return Err(CodeError::RangeFull {
                code: *code,
                source_branch: code.source,
                destination: code.destination,
                group: code.group.get(),
                member: code.member.get(),
                branches: BranchList(gws.iter().map(ToString::to_string).collect()),
                used: BranchList(
                    gws.iter()
                        .map(|b| used.get(b).map_or(0, |u| u.count).to_string())
                        .collect(),
                ),
                first,
                last: range.last(),
            });
        };
        for b in gws {
            if let Some(u) = used.get_mut(b) {
                u.set(i);
            }
        }
        // `i < len <= 65536 - first`, so the sum is a u16.
        let port = u16::try_from(usize::from(first) + i).unwrap_or(u16::MAX);
        out.codes.insert(*code, port);
    }
    Ok(out)
}

#[cfg(test)]
#[path = "codes_tests.rs"]
mod tests;
