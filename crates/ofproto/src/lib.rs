//! OpenFlow 1.3 (1.3.5) wire codec and a sans-IO channel state machine.
//!
//! The paper's SSC programs each gateway's OFS (Open vSwitch) over OpenFlow 1.3 (seed 000 §IV, the OFC
//! module). No maintained Rust crate speaks 1.3, so MMS owns this codec. It is pure: no sockets, no
//! clock reads, no tokio. The controller's OpenFlow server (`crates/controller`, module `ofc`) owns
//! the TCP/TLS connections and feeds bytes and time into this crate.
//!
//! Status: the message codec and channel are built under issue #3; this crate currently exposes only
//! the protocol constants that other crates already need.
#![forbid(unsafe_code)]

/// OpenFlow wire protocol version for 1.3 (`OFP_VERSION`, OpenFlow 1.3.5 §7.1).
pub const OFP_VERSION_1_3: u8 = 0x04;

/// IANA-assigned OpenFlow TCP port (OpenFlow 1.3.5 §6.3.1).
pub const OFP_TCP_PORT: u16 = 6653;
