//! The MMS SD-WAN system controller (the paper's SSC, seed 000 §IV).
//!
//! Its five modules are named after the paper: UI (inventory and API), PC (path configuration), SDC
//! (statistics), OFC (OpenFlow controller, over [`ofproto`]) and PM (priority). Path computation and
//! the flow compiler are pure; the OpenFlow server, REST API and CLI are thin drivers.
//!
//! Status: built under issue #5; this crate holds only the binary's command line so far.
