//! The IPoMP tunnel (seed 000 §II-B, §III-A), the driver of the gateway core [`mpa::gateway`]: it
//! moves bytes and owns the sockets, the core's parts decide. The TUN reader holds the
//! [`mpa::gateway::Router`] and feeds the per-connection [`mpa::gateway::ConnCore`]s (queue and
//! liveness); the pre-established MPTCP connections (outbound to every (remote branch, path
//! group, class) on `0xB00G`, inbound on our `0xA00G`), their writer and reader halves, subflow
//! management and statistics are the driver's.
//!
//! Tasks: one TUN reader; per outbound connection one supervisor task that connects with backoff
//! and then runs three futures (writer — the only one writing to the socket, so frames never
//! interleave —, reader, subflow manager) until one ends; per accepted connection one task
//! (hello check, then reader + keepalive writer). Only outbound connections carry our data;
//! inbound ones carry the peer's data to us and our keepalives back, except those of a remote
//! behind NAT, which we cannot dial: they carry our data to it as well (`reverse`).
//!
//! With `[tls]` ([`crate::secure`], docs/security.md) every connection runs TLS 1.3 with mutual
//! authentication first (the dialer checks the server is the dialled branch, the acceptor that
//! the client certificate is the hello's source branch); the hello and the frames travel inside
//! it. Reader and writer are generic over the stream halves, clear or TLS alike.
//!
//! Files, by job (this one only declares them and re-exports what the daemon uses):
//! - `shared`: the state every task shares ([`Shared`], [`OutQueue`]: a connection's core behind
//!   its lock, [`ConnKey`], [`build`]).
//! - `tun_rx`: the TUN read loop and the [`mpa::gateway::Router`], routing every packet into its
//!   connection's core ([`tun_loop`]).
//! - `conn_io`: the writer and reader halves of a connection (socket IO around the
//!   [`mpa::gateway::ConnCore`]), and what the reader does with a frame (resequencer, or
//!   [`mpa::gateway::tun_write`] and straight to TUN, [`crate::deliver`]).
//! - `outbound`: the supervisor of one outbound connection: connect, TLS, hello, backoff
//!   ([`run_outbound`]).
//! - `subflows`: subflow management (n × m pairs, requests with backoff) and the once-a-second
//!   transport sample of a connection ([`mpa::conn_report`] makes the figures).
//! - `inbound`: listeners, accept, TLS, hello and its policy ([`listen`], [`accept_loop`]).
//! - `preauth`: the bounds on unauthenticated connections (caps in total and per source, the
//!   deadline, the pre-auth buffer) and the rate limit of refusal log lines; pure.
//! - `socket`: MPTCP socket options, the class's DSCP mark, the fallback check, TCP keepalives
//!   behind NAT.
//! - `pacing`: the driver of a connection's [`mpa::queue::pacing::Pacer`] (`--pacing`): samples
//!   the subflows' delivery rates and hands the writer the rate to pace at.
//! - `reverse`: an accepted connection from a remote behind NAT carries our traffic to it too
//!   (docs/nat.md).
//! - `autorate`: the driver of [`mpa::autorate`] (`[qos] autorate`): reads the shaped ports'
//!   qdiscs and the subflows' queues, sets each port's rate.

pub mod autorate;
mod batch;
mod budget;
mod conn_io;
mod inbound;
mod outbound;
mod pacing;
mod preauth;
mod reverse;
mod shared;
mod slow_paths;
mod socket;
mod subflows;
mod tun_rx;

pub use inbound::{accept_loop, listen};
pub use outbound::run_outbound;
pub use preauth::{MAX_PREAUTH_PER_SOURCE, MAX_PREAUTH_TOTAL, PREAUTH_DEADLINE};
pub use shared::{
    build, conn_keys, conn_name, ConnEvent, ConnKey, OutQueue, PathManagement, Shared, SocketOpts,
    TunEvent, CLASSES,
};
pub use socket::TYPE_I_DSCP;
pub use subflows::wanted_pairs;
pub use tun_rx::tun_loop;
