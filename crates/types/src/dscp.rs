//! DSCP marks (RFC 2474 code points, the upper six bits of the IPv4 TOS byte) and the priority
//! management (PM, seed 000 §IV, Fig. 6) table that the controller writes into swap flows and the
//! gateways' WAN egress qdiscs read back: one table, here.
//!
//! | class   | WAN hops | DSCP      | band |
//! |---------|----------|-----------|------|
//! | Type I  | 1        | 46 (EF)   | 0    |
//! | Type I  | 2        | 34 (AF41) | 1    |
//! | Type II | 1        | 18 (AF21) | 2    |
//! | Type II | 2        | 10 (AF11) | 3    |
//! | other (Type III, unmarked) | - | any | 4 |

use crate::Class;

/// Expedited Forwarding (RFC 3246): the mark of Type I traffic, on the MPA sockets of Type I
/// connections and on the outer headers of Type I member paths (seed 000 §II-A).
pub const EF: u8 = 46;

/// The TOS byte carrying `dscp` with ECN bits zero.
pub const fn tos(dscp: u8) -> u8 {
    dscp << 2
}

/// The DSCP of a TOS byte.
pub const fn of_tos(tos: u8) -> u8 {
    tos >> 2
}

/// Assured Forwarding 41 (RFC 2597): Type I on a member path through a transit.
pub const AF41: u8 = 34;
/// Assured Forwarding 21: Type II on a direct member path.
pub const AF21: u8 = 18;
/// Assured Forwarding 11: Type II on a member path through a transit.
pub const AF11: u8 = 10;
/// Best effort (default forwarding): Type III and anything unmarked.
pub const BEST_EFFORT: u8 = 0;

/// The DSCP the MPA marks on the tunnel sockets of `class` (`None`: leave the default): Type I
/// sockets carry [`EF`], which the source switch's Type I swap entries match.
pub const fn socket_mark(class: Class) -> Option<u8> {
    match class {
        Class::TypeI => Some(EF),
        Class::TypeII | Class::TypeIII => None,
    }
}

/// Most WAN hops the table distinguishes; longer member paths share the last row.
pub const MAX_HOPS: usize = 2;

/// The band of anything the table does not name (Type III, unmarked, foreign marks).
pub const LAST_BAND: u8 = 4;

/// Every (DSCP, band) of the table, band order.
pub const MARKS: [(u8, u8); 4] = [(EF, 0), (AF41, 1), (AF21, 2), (AF11, 3)];

fn hops_row(wan_hops: usize) -> u8 {
    if wan_hops >= MAX_HOPS {
        2
    } else {
        1
    }
}

/// The DSCP of `class` in row `hops_row` of the table (1: direct, 2: through a transit).
pub const fn mark_for(class: Class, hops_row: u8) -> u8 {
    match (class, hops_row) {
        (Class::TypeI, 1) => EF,
        (Class::TypeI, _) => AF41,
        (Class::TypeII, 1) => AF21,
        (Class::TypeII, _) => AF11,
        // Type III never enters the swap flows: routed straight out a WAN port, unmarked.
        (Class::TypeIII, _) => BEST_EFFORT,
    }
}

/// The DSCP of a member path with `wan_hops` WAN hops carrying `class`.
pub fn mark(class: Class, wan_hops: usize) -> u8 {
    mark_for(class, hops_row(wan_hops))
}

/// The strict-priority band (0 = served first) of `class` on a path of `wan_hops` hops: Type I
/// before Type II, and within a class fewer WAN hops first; Type III gets [`LAST_BAND`].
pub fn band(class: Class, wan_hops: usize) -> u8 {
    band_of(mark(class, wan_hops))
}

/// The band of a packet carrying `dscp` on a WAN egress ([`LAST_BAND`] for anything else).
pub fn band_of(dscp: u8) -> u8 {
    MARKS
        .iter()
        .find(|&&(d, _)| d == dscp)
        .map_or(LAST_BAND, |&(_, b)| b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shorter_and_type_i_first() {
        use Class::*;
        assert!(band(TypeI, 1) < band(TypeI, 2));
        assert!(band(TypeI, 2) < band(TypeII, 1));
        assert!(band(TypeII, 1) < band(TypeII, 2));
        assert_eq!(band(TypeIII, 1), LAST_BAND);
        assert_eq!(mark(TypeI, 1), EF);
        assert_eq!(socket_mark(TypeI), Some(EF));
        assert_eq!(socket_mark(TypeII), None);
        assert_eq!(mark(TypeI, 3), AF41, "longer paths share the last row");
        assert_eq!(band_of(0), LAST_BAND);
        assert_eq!(tos(EF), 0xb8);
        assert_eq!(of_tos(0xb8 | 0x03), EF);
    }
}
