//! The tunnel sockets' options: MPTCP sockets with our buffer, MSS and `TCP_NOTSENT_LOWAT`
//! settings ([`SocketOpts`]), the DSCP mark of a class's connections (the PM's Type I mark, which
//! OVS and the WAN egress queues match), and the check that a connection really is MPTCP.

use std::io;
use std::os::fd::AsFd;

use mpa::Class;
use socket2::{Domain, Protocol, Socket, Type};
use tracing::{debug, warn};

use super::{Shared, SocketOpts};
use crate::stats::Stats;
use crate::sys;

/// A non-blocking MPTCP socket with [`SocketOpts`] applied (an option the kernel refuses is
/// logged, not fatal).
pub(super) fn mptcp_socket(opts: &SocketOpts) -> io::Result<Socket> {
    let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::MPTCP))?;
    s.set_nonblocking(true)?;
    s.set_tcp_nodelay(true)?;
    if opts.buffer != 0 {
        let b = opts.buffer as usize;
        if let Err(e) = s
            .set_send_buffer_size(b)
            .and_then(|()| s.set_recv_buffer_size(b))
        {
            debug!(error = %e, "socket buffer size not applied");
        }
    }
    if let Some(cc) = opts.congestion {
        if let Err(e) = sys::set_congestion(&s, cc) {
            warn!(error = %e, congestion = cc, "TCP_CONGESTION not applied to a tunnel socket");
        }
    }
    if opts.mss != 0 {
        if let Err(e) = sys::set_maxseg(&s, opts.mss) {
            debug!(error = %e, "TCP_MAXSEG not supported on MPTCP sockets");
        }
    }
    Ok(s)
}

/// Sets `TCP_NOTSENT_LOWAT` when configured (not fatal).
pub(super) fn apply_lowat(s: &impl AsFd, opts: &SocketOpts) {
    if opts.notsent_lowat != 0 {
        if let Err(e) = sys::set_notsent_lowat(s, opts.notsent_lowat) {
            debug!(error = %e, "TCP_NOTSENT_LOWAT not supported");
        }
    }
}

/// DSCP of the sockets of Type I connections (expedited forwarding; the controller's
/// `priority::TYPE_I_MARK`). OVS's Type I source entries match it (docs/ofc.md §8), and the WAN
/// egress queues by it (`qos`). Type II sockets keep DSCP 0.
pub const TYPE_I_DSCP: u8 = mms_types::dscp::EF;

/// Marks the socket of a connection with its class's DSCP (`mms_types::dscp::socket_mark`: Type I gets
/// [`TYPE_I_DSCP`]; a failure is logged, not fatal).
pub(super) fn mark_class(fd: &impl AsFd, class: Class) {
    if let Some(dscp) = mms_types::dscp::socket_mark(class) {
        if let Err(e) = sys::set_dscp(fd, dscp) {
            warn!(error = %e, dscp, class = %class, "could not set the DSCP of a tunnel socket");
        }
    }
}

/// Checks for a fallback to plain TCP; reports it loudly once per connection.
pub(super) fn check_fallback(
    sh: &Shared,
    stream: &impl AsFd,
    name: &str,
    reported: &mut bool,
) -> bool {
    let fallback = match (sys::is_mptcp(stream), sys::mptcp_info(stream)) {
        (Ok(true), Ok(info)) => info.flags & sys::MPTCP_INFO_FLAG_FALLBACK != 0,
        _ => true,
    };
    if fallback && !*reported {
        *reported = true;
        Stats::inc(&sh.stats.mptcp_fallbacks);
        warn!(
            conn = name,
            "MPTCP FELL BACK TO PLAIN TCP: this connection has one path only"
        );
    }
    fallback
}
