//! Flow table numbers (`ofp_table`, OpenFlow 1.3.5 §7.3.3), shared by FLOW_MOD, TABLE_MOD and
//! the flow statistics requests. Re-exported from [`crate::message`].

/// `OFPTT_MAX`: last usable table number.
pub const OFPTT_MAX: u8 = 0xfe;
/// `OFPTT_ALL`: wildcard table (FLOW_MOD delete, stats).
pub const OFPTT_ALL: u8 = 0xff;
