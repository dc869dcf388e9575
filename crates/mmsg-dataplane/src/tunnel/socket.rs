//! The tunnel sockets' options: MPTCP sockets with our buffer, MSS and `TCP_NOTSENT_LOWAT`
//! settings ([`SocketOpts`]), the DSCP mark of a class's connections (the PM's Type I mark, which
//! OVS and the WAN egress queues match), and the check that a connection really is MPTCP.

use std::io;
use std::os::fd::AsFd;

use mpa::conn_report::SubflowSample;
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

/// Smallest adaptive send budget, bytes (a few segments per subflow even with tiny windows).
pub const MIN_SEND_BUDGET: u64 = 32 * 1024;
/// Largest adaptive send budget, bytes.
pub const MAX_SEND_BUDGET: u64 = 16 * 1024 * 1024;

/// The adaptive send budget of a connection (`mmsg run --send-budget K`): `K` × the bytes its
/// established subflows' congestion windows allow (Σ cwnd × mss, i.e. the measured path rate ×
/// RTT), plus what the socket holds for the data level alone (`held`,
/// [`mpa::conn_report::held_bytes`]), between [`MIN_SEND_BUDGET`] and [`MAX_SEND_BUDGET`]. The
/// socket then holds at most `K - 1` windows beyond what is in flight, so a full path makes the
/// writer wait and the queue stays in the gateway core (CoDel, per-flow scheduling), not in the
/// socket. `None` when off (`K <= 0`) or no subflow has a window yet.
///
/// `held` counts data the subflows sent and had acknowledged that waits for the data-level
/// acknowledgement behind a segment lost on another subflow. It stays in the socket until that
/// segment is repaired (an RTO of a small-window subflow: 200 ms and more). Without it, on paths
/// shared with many TCP flows (Table VI, Case B: windows of 2–9 segments, frequent RTOs) the
/// held data filled the budget, the subflows had nothing new to send and their windows could
/// not grow: the budget, following the windows, stayed small (docs/mmsg.md "Latency under
/// load").
pub fn send_budget(k: f64, subflows: &[SubflowSample], held: u64) -> Option<u64> {
    if k.is_nan() || k <= 0.0 {
        return None;
    }
    let window: u64 = subflows
        .iter()
        .filter(|t| t.established && t.cwnd > 0 && t.mss > 0)
        .map(|t| u64::from(t.cwnd) * u64::from(t.mss))
        .sum();
    if window == 0 {
        return None;
    }
    let b = (k * window as f64).min(MAX_SEND_BUDGET as f64) as u64;
    Some(
        b.saturating_add(held)
            .clamp(MIN_SEND_BUDGET, MAX_SEND_BUDGET),
    )
}

/// Sets SO_SNDBUF of a tunnel socket to its [`send_budget`] (the kernel doubles what it is given
/// for its bookkeeping, so half is passed; on an MPTCP socket it applies to the connection and its
/// subflows). Called once per subflow sample; a refusal is logged, not fatal.
pub(super) fn apply_send_budget(
    fd: &impl AsFd,
    opts: &SocketOpts,
    subflows: &[SubflowSample],
    held: u64,
) {
    if let Some(b) = send_budget(opts.send_budget, subflows, held) {
        if let Err(e) = sys::set_sndbuf(fd, u32::try_from(b / 2).unwrap_or(u32::MAX)) {
            debug!(error = %e, "SO_SNDBUF (send budget) not applied");
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

/// Idle time before a subflow behind NAT sends a TCP keepalive probe (docs/nat.md). The tunnel's
/// own keepalive frame (after [`mpa::keepalive::KEEPALIVE_INTERVAL`] idle) travels on whichever
/// subflow MPTCP picks, so an idle subflow could lose its NAT mapping; the kernel copies
/// `SO_KEEPALIVE` and `TCP_KEEPIDLE`/`INTVL`/`CNT` of an MPTCP socket to every subflow. 20 s is
/// far below common NAT timeouts for established TCP (RFC 5382: at least 2 h 4 min; home
/// routers and carrier NATs seen at 5–60 min, rarely below 5 min) and even below the shortest UDP
/// ones (RFC 4787: at least 2 min; some 30 s).
pub const NAT_KEEPALIVE_IDLE: std::time::Duration = std::time::Duration::from_secs(20);
/// Interval between unanswered keepalive probes.
pub const NAT_KEEPALIVE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);
/// Unanswered probes before the kernel resets the subflow (the subflow manager re-creates it):
/// a lost mapping ends its subflow within 20 + 4 × 5 = 40 s.
pub const NAT_KEEPALIVE_PROBES: u32 = 4;

/// TCP keepalives on every subflow of a connection that crosses a NAT (not fatal).
pub(super) fn nat_keepalive(s: &impl AsFd) {
    let ka = socket2::TcpKeepalive::new()
        .with_time(NAT_KEEPALIVE_IDLE)
        .with_interval(NAT_KEEPALIVE_INTERVAL)
        .with_retries(NAT_KEEPALIVE_PROBES);
    if let Err(e) = socket2::SockRef::from(s).set_tcp_keepalive(&ka) {
        debug!(error = %e, "TCP keepalive not applied to a tunnel socket behind NAT");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sf(cwnd: u32, mss: u32, established: bool) -> SubflowSample {
        SubflowSample {
            established,
            unacked: 0,
            cwnd,
            mss,
            srtt_us: 20_000,
            notsent: 0,
            min_rtt_us: 20_000,
        }
    }

    #[test]
    fn send_budget_follows_the_windows() {
        let s = [sf(20, 1360, true), sf(40, 1360, true), sf(100, 1360, false)];
        assert_eq!(send_budget(1.5, &s, 0), Some((1.5 * 60.0 * 1360.0) as u64));
        assert_eq!(send_budget(0.0, &s, 0), None);
        assert_eq!(send_budget(f64::NAN, &s, 0), None);
        assert_eq!(send_budget(2.0, &[sf(0, 1360, true)], 0), None);
        assert_eq!(
            send_budget(1.0, &[sf(2, 1000, true)], 0),
            Some(MIN_SEND_BUDGET)
        );
        assert_eq!(
            send_budget(4.0, &[sf(u32::MAX, 65_535, true)], 0),
            Some(MAX_SEND_BUDGET)
        );
    }

    #[test]
    fn data_held_behind_a_gap_does_not_eat_the_subflows_budget() {
        // Four small windows (Table VI): 17 segments; 3 windows = 69,360 B. 60 KB sent and
        // acknowledged on three subflows waits behind a segment the fourth lost: the budget grows
        // by it, so the subflows keep K - 1 windows to send, as with nothing held.
        let s = [
            sf(6, 1360, true),
            sf(3, 1360, true),
            sf(5, 1360, true),
            sf(3, 1360, true),
        ];
        assert_eq!(send_budget(3.0, &s, 0), Some(69_360));
        assert_eq!(send_budget(3.0, &s, 60_000), Some(129_360));
        // Still capped; and nothing when off or without a window, whatever is held.
        assert_eq!(send_budget(3.0, &s, u64::MAX), Some(MAX_SEND_BUDGET));
        assert_eq!(send_budget(0.0, &s, 60_000), None);
        assert_eq!(send_budget(3.0, &[], 60_000), None);
    }
}
