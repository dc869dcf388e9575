//! The MMS branch gateway (the paper's MMSG), the IO driver around the pure [`mpa`] core.
//!
//! Seed 000 §II-B: every packet from one branch to another is read from TUN `mms0`, classified,
//! framed and written into a pre-established MPTCP connection to the destination branch ("IP over
//! MPTCP"). This crate owns the TUN device, the MPTCP sockets, netlink and the local Open vSwitch
//! set-up; all decisions are made by `mpa`.
//!
//! Status: the dataplane is built under issue #4; this crate holds only the binary's command line.
