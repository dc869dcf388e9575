//! Facts about IP protocol numbers that both the TC's parser ([`crate::classifier`]) and the
//! validation of its rules ([`crate::config`]) need; below both, so neither imports the other.

/// IP protocol numbers with 16-bit source and destination ports in their first 4 bytes: TCP (6),
/// UDP (17), SCTP (132), UDP-Lite (136).
pub fn has_ports(protocol: u8) -> bool {
    matches!(protocol, 6 | 17 | 132 | 136)
}
