//! The port plan of seed 000 §III-A (DESIGN §3.1): the MPA of branch B listens on `0xB00G`; the
//! source switch rewrites member path S of group G from branch A to `0xBASG`.
//!
//! [`PortPlan`] says which plan a network uses: the paper's ([`PortPlan::Paper`], the default,
//! branch ids 1..=15) or the extended one of issue #20 ([`PortPlan::Extended`], branch ids up to
//! 250): every gateway reserves one [`CodeRange`]; every MPA listens on `first + G`, and the
//! controller allocates each member path's outer port code from the rest of the range
//! (`controller::codes`), unique on every gateway the path touches.

use std::fmt;
use std::ops::RangeInclusive;

use crate::{BranchId, MemberId, PathGroupId};

/// `0xB00G`: the TCP port on which the MPA of branch `destination` listens for path group `group`.
pub const fn listen_port(destination: BranchId, group: PathGroupId) -> u16 {
    (destination.get() as u16) << 12 | group.get() as u16
}

/// `0xB000..=0xBFFF`: every listen port and path code towards `branch`. Gateways reserve these
/// ranges (`net.ipv4.ip_local_reserved_ports`) for every branch they talk to: a subflow whose
/// ephemeral port equals some `0xBASG` would match another member path's mirrored swap entry.
pub const fn branch_port_range(branch: BranchId) -> RangeInclusive<u16> {
    let start = (branch.get() as u16) << 12;
    start..=(start | 0x0FFF)
}

/// The smallest first port of an extended range: ports below 1024 are privileged.
pub const MIN_EXTENDED_PORT: u16 = 1024;
/// The listen ports at the start of an extended range: one per path group id 0..=15.
pub const LISTEN_PORTS: u16 = 16;

/// The ports of the extended plan: `first..=last`, reserved on every gateway. The first
/// [`LISTEN_PORTS`] are the MPA listen ports (`first + G`), the rest the member path codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CodeRange {
    first: u16,
    last: u16,
}

/// A port plan that cannot be used (the input's fault: a config, a REST body).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PortPlanError {
    /// Not `paper` and not `FIRST-LAST`.
    #[error(
        "port plan {0:?} is neither \"paper\" nor a range \"FIRST-LAST\" (e.g. \"16384-32767\")"
    )]
    Syntax(String),
    /// A range that starts below 1024 or leaves no member path code after the listen ports.
    #[error("port range {first}-{last} must start at 1024 or above and hold more than 16 ports (16 listen ports, then the member path codes)")]
    Range {
        /// First port.
        first: u16,
        /// Last port.
        last: u16,
    },
}

impl CodeRange {
    /// `first..=last`; it must start at [`MIN_EXTENDED_PORT`] or above and hold at least one
    /// code after the [`LISTEN_PORTS`].
    pub fn new(first: u16, last: u16) -> Result<Self, PortPlanError> {
        if first < MIN_EXTENDED_PORT || last < first || last - first < LISTEN_PORTS {
            return Err(PortPlanError::Range { first, last });
        }
        Ok(Self { first, last })
    }

    /// The first port (listen port of group 0).
    pub const fn first(self) -> u16 {
        self.first
    }

    /// The last port.
    pub const fn last(self) -> u16 {
        self.last
    }

    /// The member path codes: the range after the listen ports.
    pub const fn codes(self) -> RangeInclusive<u16> {
        (self.first + LISTEN_PORTS)..=self.last
    }

    /// How many member path codes the range holds.
    pub const fn code_count(self) -> usize {
        (self.last - self.first - LISTEN_PORTS) as usize + 1
    }
}

/// How the outer TCP ports of the tunnels are assigned (DESIGN §3.1; issue #20). Written as
/// `"paper"` or `"FIRST-LAST"` in configs and JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PortPlan {
    /// The paper's: listen port `0xB00G`, member path code `0xBASG`; branch ids 1..=15.
    #[default]
    Paper,
    /// Listen port `first + G` on every gateway, member path codes allocated by the controller
    /// from the rest of the range; branch ids 1..=250.
    Extended(CodeRange),
}

impl PortPlan {
    /// The TCP port on which the MPA of `destination` listens for `group`; `None` when the
    /// paper's plan cannot carry the branch id (above 15).
    pub const fn listen_port(self, destination: BranchId, group: PathGroupId) -> Option<u16> {
        match self {
            PortPlan::Paper if destination.fits_paper() => Some(listen_port(destination, group)),
            PortPlan::Paper => None,
            PortPlan::Extended(r) => Some(r.first + group.get() as u16),
        }
    }

    /// The path group whose listen port is `port` on branch `own`, if it is one.
    pub fn group_of_listen_port(self, own: BranchId, port: u16) -> Option<PathGroupId> {
        PathGroupId::all().find(|&g| self.listen_port(own, g) == Some(port))
    }

    /// Whether `branch` can be used with this plan.
    pub const fn carries(self, branch: BranchId) -> bool {
        match self {
            PortPlan::Paper => branch.fits_paper(),
            PortPlan::Extended(_) => true,
        }
    }

    /// The port ranges a gateway reserves (`net.ipv4.ip_local_reserved_ports`) when it talks to
    /// `branches` (its own included): `0xB000..=0xBFFF` per branch in the paper's plan, the
    /// one range in the extended plan.
    pub fn reserved(
        self,
        branches: impl IntoIterator<Item = BranchId>,
    ) -> Vec<RangeInclusive<u16>> {
        match self {
            PortPlan::Paper => {
                let mut ids: Vec<BranchId> =
                    branches.into_iter().filter(|b| b.fits_paper()).collect();
                ids.sort();
                ids.dedup();
                ids.into_iter().map(branch_port_range).collect()
            }
            PortPlan::Extended(r) => vec![r.first..=r.last],
        }
    }
}

impl fmt::Display for PortPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortPlan::Paper => f.write_str("paper"),
            PortPlan::Extended(r) => write!(f, "{}-{}", r.first, r.last),
        }
    }
}

impl std::str::FromStr for PortPlan {
    type Err = PortPlanError;
    fn from_str(s: &str) -> Result<Self, PortPlanError> {
        let s = s.trim();
        if s == "paper" {
            return Ok(PortPlan::Paper);
        }
        let syntax = || PortPlanError::Syntax(s.to_owned());
        let (a, b) = s.split_once('-').ok_or_else(syntax)?;
        let first: u16 = a.trim().parse().map_err(|_| syntax())?;
        let last: u16 = b.trim().parse().map_err(|_| syntax())?;
        Ok(PortPlan::Extended(CodeRange::new(first, last)?))
    }
}

impl serde::Serialize for PortPlan {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for PortPlan {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The identity of one member path: destination branch B, source branch A, member path S, path
/// group G. In the paper's plan it is also the outer TCP port `0xBASG` ([`PathCode::port`]), one
/// nibble each; in the extended plan the controller allocates the outer port separately.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PathCode {
    /// B: the destination branch.
    pub destination: BranchId,
    /// A: the source branch.
    pub source: BranchId,
    /// S: the member path.
    pub member: MemberId,
    /// G: the path group.
    pub group: PathGroupId,
}

impl PathCode {
    /// `0xBASG`: the outer port in the paper's plan. Only meaningful when both branch ids fit
    /// one nibble ([`PathCode::fits_paper`]); callers check that first.
    pub const fn port(self) -> u16 {
        (self.destination.get() as u16) << 12
            | (self.source.get() as u16) << 8
            | (self.member.get() as u16) << 4
            | self.group.get() as u16
    }

    /// Whether both branch ids fit the paper's nibbles.
    pub const fn fits_paper(self) -> bool {
        self.destination.fits_paper() && self.source.fits_paper()
    }

    /// 24 bits naming the member path network-wide, laid out so that paper codes keep their
    /// value: `B_hi A_hi B_lo A_lo S G` (4 bits each; the high nibbles are 0 for ids <= 15, so
    /// the value is `0xBASG`). Controller flow cookies carry it.
    pub const fn wide(self) -> u32 {
        let (b, a) = (self.destination.get() as u32, self.source.get() as u32);
        (b >> 4) << 20
            | (a >> 4) << 16
            | (b & 0xF) << 12
            | (a & 0xF) << 8
            | (self.member.get() as u32) << 4
            | self.group.get() as u32
    }

    /// Decodes [`PathCode::wide`] (`None` for bits above 24, ids out of range, a listen port).
    pub fn from_wide(v: u32) -> Option<Self> {
        if v >> 24 != 0 {
            return None;
        }
        // Each shifted, masked value is below 256, so the casts are exact.
        let nib = |shift: u32| ((v >> shift) & 0xF) as u8;
        Some(Self {
            destination: BranchId::new(nib(20) << 4 | nib(12)).ok()?,
            source: BranchId::new(nib(16) << 4 | nib(8)).ok()?,
            member: MemberId::new(nib(4)).ok()?,
            group: PathGroupId::new(nib(0)).ok()?,
        })
    }

    /// `0xB00G`: the port the destination MPA listens on for this group.
    pub const fn listen_port(self) -> u16 {
        listen_port(self.destination, self.group)
    }

    /// Decodes `0xBASG` (`None` for a listen port `0xB00G` or a nibble out of range).
    pub fn from_port(port: u16) -> Option<Self> {
        // Each shifted, masked value is below 16, so the casts are exact.
        let nib = |shift: u16| ((port >> shift) & 0xF) as u8;
        Some(Self {
            destination: BranchId::new(nib(12)).ok()?,
            source: BranchId::new(nib(8)).ok()?,
            member: MemberId::new(nib(4)).ok()?,
            group: PathGroupId::new(nib(0)).ok()?,
        })
    }
}

impl fmt::Display for PathCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.fits_paper() {
            write!(f, "{:#06x}", self.port())
        } else {
            write!(f, "{:#08x}", self.wide())
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn b(n: u8) -> BranchId {
        BranchId::new(n).unwrap()
    }
    fn g(n: u8) -> PathGroupId {
        PathGroupId::new(n).unwrap()
    }

    #[test]
    fn matches_design() {
        assert_eq!(listen_port(b(2), g(4)), 0x2004);
        assert_eq!(listen_port(b(15), g(15)), 0xF00F);
        assert_eq!(branch_port_range(b(11)), 0xB000..=0xBFFF);
        let code = PathCode {
            destination: b(2),
            source: b(1),
            member: MemberId::new(3).unwrap(),
            group: g(4),
        };
        assert_eq!(code.port(), 0x2134);
        assert_eq!(code.listen_port(), 0x2004);
        assert_eq!(code.to_string(), "0x2134");
        assert_eq!(
            PathCode::from_port(0x2004),
            None,
            "a listen port is no path code"
        );
        assert_eq!(PathCode::from_port(0x0134), None, "branch 0");
    }

    #[test]
    fn port_plan_parses_and_prints() {
        assert_eq!("paper".parse::<PortPlan>(), Ok(PortPlan::Paper));
        let p: PortPlan = "16384-32767".parse().unwrap();
        assert_eq!(p.to_string(), "16384-32767");
        assert_eq!(p.listen_port(b(15), g(3)), Some(16387));
        assert_eq!(PortPlan::Paper.listen_port(b(15), g(3)), Some(0xF003));
        assert_eq!(PortPlan::Paper.listen_port(b(16), g(3)), None);
        assert_eq!(p.group_of_listen_port(b(200), 16390), Some(g(6)));
        assert_eq!(p.group_of_listen_port(b(200), 16400), None);
        let PortPlan::Extended(r) = p else { panic!() };
        assert_eq!(r.codes(), 16400..=32767);
        assert_eq!(r.code_count(), 16368);
        assert_eq!(p.reserved([b(1), b(200)]), vec![16384..=32767]);
        assert_eq!(
            PortPlan::Paper.reserved([b(2), b(1), b(2), b(16)]),
            vec![0x1000..=0x1FFF, 0x2000..=0x2FFF]
        );
        let err = "1000-2000".parse::<PortPlan>().unwrap_err().to_string();
        assert!(err.contains("1000-2000 must start at 1024"), "{err}");
        assert!(
            "2000-2010".parse::<PortPlan>().is_err(),
            "no code after the listen ports"
        );
        assert!("extended".parse::<PortPlan>().is_err());
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(json, "\"16384-32767\"");
        assert_eq!(serde_json::from_str::<PortPlan>(&json).unwrap(), p);
    }

    #[test]
    fn wide_codes_keep_the_paper_value() {
        let code = PathCode {
            destination: b(2),
            source: b(1),
            member: MemberId::new(3).unwrap(),
            group: g(4),
        };
        assert_eq!(code.wide(), 0x2134);
        let big = PathCode {
            destination: b(250),
            source: b(17),
            ..code
        };
        assert_eq!(big.wide(), 0xF1_A134);
        assert_eq!(PathCode::from_wide(big.wide()), Some(big));
        assert_eq!(big.to_string(), "0xf1a134");
    }

    proptest! {
        #[test]
        fn wide_round_trips(v in 0u32..0x0100_0000) {
            if let Some(code) = PathCode::from_wide(v) {
                prop_assert_eq!(code.wide(), v);
                prop_assert_eq!(code.fits_paper(), v >> 16 == 0);
            }
        }

        #[test]
        fn decode_encode_round_trips(port in any::<u16>()) {
            if let Some(code) = PathCode::from_port(port) {
                prop_assert_eq!(code.port(), port);
                prop_assert!(branch_port_range(code.destination).contains(&port));
            }
        }
    }
}
