//! DSCP marks (RFC 2474 code points, the upper six bits of the IPv4 TOS byte).

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
