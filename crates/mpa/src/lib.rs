//! The multipath agent (MPA) and traffic classifier (TC) of an MMS gateway, as a pure core.
//!
//! Seed 000 §II-B and §III-A: a branch gateway classifies packets read from its TUN device, picks the
//! destination branch and a path group per flow, frames each packet and hands it to the MPTCP
//! connection of (destination branch, path group, class). This crate holds that logic with no IO;
//! `crates/mmsg-dataplane` (binary `mmsg`) owns TUN, sockets and netlink and drives it.
//!
//! Status: built under issue #4. Until then this crate exposes only the port plan that the testbed and
//! the controller share (DESIGN §3.1).
#![forbid(unsafe_code)]

/// The TCP port on which the MPA of branch `branch` listens for path group `group` (DESIGN §3.1:
/// `0xB00G`). Returns `None` when `branch` is not in 1..=15 or `group` not in 0..=15.
pub fn mpa_port(branch: u8, group: u8) -> Option<u16> {
    if !(1..=15).contains(&branch) || group > 15 {
        return None;
    }
    Some((u16::from(branch) << 12) | u16::from(group))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_plan_matches_design() {
        assert_eq!(mpa_port(2, 4), Some(0x2004));
        assert_eq!(mpa_port(15, 15), Some(0xF00F));
        assert_eq!(mpa_port(0, 1), None);
        assert_eq!(mpa_port(16, 1), None);
        assert_eq!(mpa_port(1, 16), None);
    }
}
