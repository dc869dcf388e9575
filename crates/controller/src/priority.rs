//! Priority management: the PM module (seed 000 §II-A, §IV "Priority Management", Fig. 6).
//!
//! Two orders, both strict: Type I (internal, high priority) before Type II (internal, best
//! effort), and within a class shorter member paths (fewer WAN hops) before longer ones, so that
//! multi-WAN-hop subflows only use bandwidth that direct subflows leave (Fig. 6: without it, two
//! paths per pair give 2c/3 instead of c).
//!
//! OVS netdev cannot queue by priority (DESIGN §4: `set_queue` is lost, meters only drop), so
//! priority is carried as DSCP in the outer header and applied by the gateways: `mmsg` queues by
//! class, and a strict-priority qdisc on each WAN egress maps DSCP to [`band`]s (transit traffic
//! never reaches the MPA, only the OVS, so its mark must be in the packet).
//!
//! Contract with the MPA: sockets of Type I connections set DSCP [`TYPE_I_MARK`]; anything else is
//! Type II. The source OFS entry of a member path matches the mark and rewrites DSCP to
//! [`dscp`]`(class, hops)` of that member path; transits keep it.
//!
//! The table of (class, WAN hops) → DSCP → band is `mms_types::dscp` (the gateways read the same
//! one for their egress qdiscs); this module re-exports it as the PM's functions.
//!
//! OpenFlow priorities: swap entries `SWAP_BASE + 100 × (3 − hops)` (direct 1200, one transit
//! 1100), Type I source entries one above their Type II sibling, patch flows [`PATCH_PRIORITY`].
//! Swap matches are disjoint, so flow priority does not change forwarding; it orders dumps and
//! statistics, and keeps a more specific Type I entry above the catch-all of its member path.

/// The internal traffic classes that travel through the swap flows are [`Class::TypeI`] and
/// [`Class::TypeII`] (Type III bypasses them).
pub use mms_types::Class;

/// DSCP that the MPA sets on the sockets of Type I connections (EF).
pub const TYPE_I_MARK: u8 = mms_types::dscp::EF;

/// Most WAN hops the tables distinguish; longer paths share the last value.
pub const MAX_PRIORITY_HOPS: usize = mms_types::dscp::MAX_HOPS;

/// OpenFlow priority of the patch flows between `mpa_k` and `wan_k` (below every swap entry,
/// above the table-miss priority 0).
pub const PATCH_PRIORITY: u16 = 10;

/// Base OpenFlow priority of swap entries.
pub const SWAP_BASE: u16 = 1000;

fn clamp_hops(wan_hops: usize) -> u16 {
    // `wan_hops.clamp(1, 2)` fits in u16.
    u16::try_from(wan_hops.clamp(1, MAX_PRIORITY_HOPS)).unwrap_or(1)
}

/// The DSCP of a member path with `wan_hops` WAN hops carrying `class`.
pub use mms_types::dscp::mark as dscp;

/// The strict-priority band (0 = served first) of `class` on a path of `wan_hops` hops.
pub use mms_types::dscp::band;

/// The band of a packet carrying `dscp` on a WAN egress: the table, 4 for anything else.
pub use mms_types::dscp::band_of as band_for_dscp;

/// OpenFlow priority of a swap entry on a member path of `wan_hops` hops; `type_i` for the source
/// entry that matches [`TYPE_I_MARK`].
pub fn swap_priority(wan_hops: usize, type_i: bool) -> u16 {
    let hops = clamp_hops(wan_hops);
    let base = SWAP_BASE + 100 * (u16::try_from(MAX_PRIORITY_HOPS).unwrap_or(2) + 1 - hops);
    if type_i {
        base + 10
    } else {
        base
    }
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
        for c in [TypeI, TypeII] {
            for h in 1..=3 {
                assert_eq!(band_for_dscp(dscp(c, h)), band(c, h));
                assert!(dscp(c, h) < 64);
            }
        }
        assert_eq!(band_for_dscp(0), 4);
        assert_eq!(dscp(TypeI, 1), TYPE_I_MARK);
        assert!(swap_priority(1, false) > swap_priority(2, true));
        assert!(swap_priority(2, false) > PATCH_PRIORITY);
        assert_eq!(swap_priority(1, false), 1200);
        assert_eq!(swap_priority(2, false), 1100);
    }
}
