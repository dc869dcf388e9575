//! The MMS branch gateway (the paper's MMSG), the IO driver around the pure [`mpa`] core.
//!
//! Seed 000 §II-B: every packet from one branch to another is read from TUN `mms0`, classified,
//! framed and written into a pre-established MPTCP connection to the destination branch ("IP over
//! MPTCP"). This crate owns the TUN device, the MPTCP sockets, netlink and host set-up; all
//! decisions (classification, path group, queueing, framing) are made by `mpa`.
//!
//! Modules:
//! - [`daemon`]: `mmsg run`: set-up, then the tasks.
//! - [`tunnel`]: TUN reader, per-connection writer/reader tasks, subflow management.
//! - [`reseq`]: the receive side around the core's `Receiver`: sequenced frames through the resequencer.
//! - [`deliver`]: received IP packets to TUN (used by the tunnel readers and the resequencer).
//! - [`tun`]: the TUN device with virtio-net header offload.
//! - [`mptcp_pm`] / [`genl`]: the MPTCP userspace path manager over generic netlink (not the
//!   paper's PM, priority management: that is [`qos`] here and the controller's `priority`).
//! - [`ovs`]: with `[ovs]`, the gateway's Open vSwitch bridge and the WAN addresses on `mpa{k}`.
//! - [`qos`]: strict-priority egress shaping by DSCP on the WAN ports (the gateway's half of the PM).
//! - [`secure`]: with `[tls]`, TLS 1.3 on every tunnel connection (credentials, reload, rekey).
//! - [`setup`]: sysctls, policy routing, TUN routes (idempotent, undone on exit).
//! - [`control`] / [`stats`] / [`status`]: the control socket of `mmsg status`, the counters and
//!   connection registry, and the report it shows.
//! - [`metrics`]: Prometheus `/metrics` (`--metrics-listen`), rendered from the status report.
//! - [`status_view`]: the tables of `mmsg status` (rates from two reports).
//! - [`log`]: the log subscriber (`--log-format`, no ANSI codes unless stderr is a terminal).
//! - [`uplink_lb`]: with `[internet]`, per-flow load balancing of external traffic over the
//!   uplinks with SNAT (nftables + fwmark rules, seed 004 §5).
//! - [`wan_watch`]: learned WAN addresses (issue #20): the WAN ports' address, next hop and
//!   next-hop MAC from the kernel (rtnetlink events + dumps), applied and reported.
//! - [`gwchan`]: with `[controller]`, the gateway channel to `ssc` (config pushes, reports).
//! - [`enrol`]: the gateway's certificate from `ssc`: enrolment with a one-time token, renewal
//!   over mutual TLS, and the connection to the controller (`tls:`, `tcp:`, `unix:`).
//! - [`sys`]: the only `unsafe` (ioctls, socket options).
//!
//! See `docs/mmsg.md`.
#![deny(unsafe_code)]

pub mod control;
pub mod daemon;
pub mod deliver;
pub mod enrol;
pub mod enrol_setup;
pub mod genl;
pub mod gwchan;
pub mod log;
pub mod metrics;
pub mod mptcp_pm;
pub mod ovs;
pub mod ovs_reuse;
pub mod qos;
pub mod reseq;
pub mod secure;
pub mod setup;
pub mod stats;
pub mod status;
pub mod status_view;
#[allow(unsafe_code)] // STYLE §5: the one module with unsafe, each block with `// SAFETY:`.
pub mod sys;
pub mod tun;
pub mod tun_rs;
pub mod tunnel;
pub mod uplink_lb;
pub mod wan_watch;
