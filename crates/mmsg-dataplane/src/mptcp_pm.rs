//! The MPTCP userspace path manager client (DESIGN §4): genetlink family `mptcp_pm`, command
//! `SUBFLOW_CREATE`, so every connection gets exactly one subflow per (local WAN address, remote
//! WAN address) pair. Blocking netlink IO: call it from `spawn_blocking` (commands are rare: a few
//! per connection set-up). The events socket (multicast group `mptcp_pm_events`) is also what lets
//! the kernel accept incoming joins at all: with `path_manager=userspace` a join is refused unless
//! some socket listens to the events.

use std::io::{self, Read};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};
use tracing::{debug, warn};

use crate::genl::{self, SubflowCreate, SubflowDestroy};
use crate::stats::Stats;
use crate::sys;

/// Largest netlink datagram we read (the kernel's default for genl replies fits easily).
const NL_BUF: usize = 16 * 1024;
/// How long a netlink command may take before it is treated as failed.
const NL_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a path manager command failed.
#[derive(Debug, thiserror::Error)]
pub enum MptcpPmError {
    /// Socket IO failed.
    #[error("netlink io: {0}")]
    Io(#[from] io::Error),
    /// The kernel refused the command.
    #[error("kernel refused: errno {errno}{}", .msg.as_deref().map(|m| format!(" ({m})")).unwrap_or_default())]
    Refused {
        /// The negative errno.
        errno: i32,
        /// The extended ACK text.
        msg: Option<String>,
    },
    /// The family or group is missing (no MPTCP in this kernel).
    #[error("generic netlink family {0} not found")]
    NoFamily(&'static str),
}

fn nl_socket() -> io::Result<Socket> {
    let s = Socket::new(
        Domain::from(libc::AF_NETLINK),
        Type::from(libc::SOCK_RAW),
        Some(Protocol::from(libc::NETLINK_GENERIC)),
    )?;
    s.set_read_timeout(Some(NL_TIMEOUT))?;
    Ok(s)
}

/// Sends `msg` and waits for the reply with `seq`; returns its messages' (type, payload).
fn transact(sock: &Socket, seq: u32, msg: &[u8]) -> Result<Vec<(u16, Vec<u8>)>, MptcpPmError> {
    sock.send(msg)?;
    let mut buf = vec![0u8; NL_BUF];
    loop {
        let n = (&*sock).read(&mut buf)?;
        let mut out = Vec::new();
        let mut done = false;
        for m in genl::messages(buf.get(..n).unwrap_or_default()) {
            if m.seq != seq {
                continue;
            }
            if m.ty == genl::NLMSG_ERROR {
                if let Some((errno, msg)) = genl::parse_error(m.payload) {
                    if errno != 0 {
                        return Err(MptcpPmError::Refused { errno, msg });
                    }
                }
                done = true;
            } else if m.ty == genl::NLMSG_DONE {
                done = true;
            } else {
                out.push((m.ty, m.payload.to_vec()));
                done = true;
            }
        }
        if done {
            return Ok(out);
        }
    }
}

/// The `mptcp_pm` family: its id and the events group.
#[derive(Debug, Clone, Copy)]
struct Family {
    id: u16,
    events: Option<u32>,
}

fn resolve(sock: &Socket, seq: u32) -> Result<Family, MptcpPmError> {
    let reply = transact(sock, seq, &genl::get_family(seq, genl::MPTCP_PM_NAME))?;
    for (_, payload) in reply {
        if let Some((id, groups)) = genl::parse_family(&payload) {
            let events = groups
                .iter()
                .find(|(n, _)| n == genl::MPTCP_PM_EV_GRP_NAME)
                .map(|(_, g)| *g);
            return Ok(Family { id, events });
        }
    }
    Err(MptcpPmError::NoFamily(genl::MPTCP_PM_NAME))
}

/// A command socket to the userspace path manager.
#[derive(Debug)]
pub struct MptcpPathManager {
    sock: Mutex<Socket>,
    family: u16,
    events_group: Option<u32>,
    seq: AtomicU32,
}

impl MptcpPathManager {
    /// Opens the command socket and resolves the `mptcp_pm` family.
    pub fn open() -> Result<Self, MptcpPmError> {
        let sock = nl_socket()?;
        // Best effort: without it, errors carry no text.
        let _ = sys::netlink_ext_ack(&sock);
        let fam = resolve(&sock, 1)?;
        Ok(MptcpPathManager {
            sock: Mutex::new(sock),
            family: fam.id,
            events_group: fam.events,
            seq: AtomicU32::new(2),
        })
    }

    /// Creates one subflow (blocking; call from `spawn_blocking`).
    pub fn subflow_create(&self, s: &SubflowCreate) -> Result<(), MptcpPmError> {
        self.request(|family, seq| genl::subflow_create(family, seq, s))
    }

    /// Closes one subflow (blocking; call from `spawn_blocking`). The kernel pushes the data that
    /// was in flight on it again over the connection's other subflows (`__mptcp_close_ssk` →
    /// `__mptcp_retransmit_pending_data`): what fast failover relies on.
    pub fn subflow_destroy(&self, s: &SubflowDestroy) -> Result<(), MptcpPmError> {
        self.request(|family, seq| genl::subflow_destroy(family, seq, s))
    }

    /// Marks one subflow backup or active again (`MPTCP_PM_CMD_SET_FLAGS`; blocking, call from
    /// `spawn_blocking`): the slow-subflow policy's act ([`mpa::slow_subflows`]).
    pub fn set_backup(&self, s: &SubflowDestroy, backup: bool) -> Result<(), MptcpPmError> {
        self.request(|family, seq| genl::set_flags(family, seq, s, backup))
    }

    /// One command with `NLM_F_ACK` built by `build(family, seq)`, answered by the kernel's ACK
    /// or error (blocking).
    fn request(&self, build: impl FnOnce(u16, u32) -> Vec<u8>) -> Result<(), MptcpPmError> {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let msg = build(self.family, seq);
        let sock = self
            .sock
            .lock()
            .map_err(|_| io::Error::other("path manager lock poisoned"))?;
        transact(&sock, seq, &msg).map(|_| ())
    }

    /// Starts a thread that listens to the PM events (logs at DEBUG, counts subflow events). The
    /// subscription is what makes the kernel accept incoming joins under the userspace PM.
    pub fn spawn_event_listener(&self, stats: Arc<Stats>) -> Result<(), MptcpPmError> {
        let group = self
            .events_group
            .ok_or(MptcpPmError::NoFamily(genl::MPTCP_PM_EV_GRP_NAME))?;
        let sock = Socket::new(
            Domain::from(libc::AF_NETLINK),
            Type::from(libc::SOCK_RAW),
            Some(Protocol::from(libc::NETLINK_GENERIC)),
        )?;
        sys::netlink_bind(&sock)?;
        sys::netlink_add_membership(&sock, group)?;
        std::thread::Builder::new()
            .name("mptcp-pm-events".into())
            .spawn(move || event_loop(&sock, &stats))
            .map_err(MptcpPmError::Io)?;
        Ok(())
    }
}

fn event_loop(sock: &Socket, stats: &Stats) {
    let mut buf = vec![0u8; NL_BUF];
    loop {
        let n = match (&*sock).read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                // ENOBUFS: events were lost; the supervisors poll MPTCP_SUBFLOW_ADDRS anyway.
                if e.raw_os_error() == Some(libc::ENOBUFS) {
                    Stats::inc(&stats.pm_events_lost);
                    continue;
                }
                warn!(error = %e, "MPTCP path manager event socket failed; events no longer logged");
                return;
            }
        };
        for m in genl::messages(buf.get(..n).unwrap_or_default()) {
            let Some(ev) = genl::parse_event(m.payload) else {
                continue;
            };
            match ev.kind {
                genl::event::SUB_ESTABLISHED => Stats::inc(&stats.pm_sub_established),
                genl::event::SUB_CLOSED => Stats::inc(&stats.pm_sub_closed),
                _ => {}
            }
            debug!(
                kind = ev.kind,
                token = ev.token,
                saddr = ?ev.saddr,
                daddr = ?ev.daddr,
                sport = ev.sport,
                dport = ev.dport,
                error = ev.error,
                "MPTCP path manager event"
            );
        }
    }
}
