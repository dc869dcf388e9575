//! The port plan of seed 000 §III-A (DESIGN §3.1): the MPA of branch B listens on `0xB00G`; the
//! source switch rewrites member path S of group G from branch A to `0xBASG`.

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

/// The path code `0xBASG` carried in the outer TCP port: destination branch B, source branch A,
/// member path S, path group G, one nibble each.
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
    /// `0xBASG`.
    pub const fn port(self) -> u16 {
        (self.destination.get() as u16) << 12
            | (self.source.get() as u16) << 8
            | (self.member.get() as u16) << 4
            | self.group.get() as u16
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
        write!(f, "{:#06x}", self.port())
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

    proptest! {
        #[test]
        fn decode_encode_round_trips(port in any::<u16>()) {
            if let Some(code) = PathCode::from_port(port) {
                prop_assert_eq!(code.port(), port);
                prop_assert!(branch_port_range(code.destination).contains(&port));
            }
        }
    }
}
