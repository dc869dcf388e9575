//! The only `unsafe` of the gateway (STYLE §5): TUN ioctls, reads into uninitialised buffer space,
//! and the socket options that neither std nor socket2 expose (MPTCP_INFO, MPTCP_SUBFLOW_ADDRS,
//! TCP_IS_MPTCP, TCP_NOTSENT_LOWAT, TCP_MAXSEG, netlink membership). Every function takes a borrowed
//! fd, so it can never outlive the socket or device it works on.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd};

use bytes::{BufMut, BytesMut};

/// `_IOW('T', 202, int)`: attach the fd to a TUN/TAP interface.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
/// `_IOW('T', 208, unsigned int)`: which offloads userspace can take on reads.
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
/// `_IOW('T', 216, int)`: size of the virtio-net header in front of every packet.
const TUNSETVNETHDRSZ: libc::c_ulong = 0x4004_54d8;

/// `IFF_TUN`: layer 3 device.
pub const IFF_TUN: i16 = 0x0001;
/// `IFF_NO_PI`: no 4-byte packet information in front of packets.
pub const IFF_NO_PI: i16 = 0x1000;
/// `IFF_VNET_HDR`: a `virtio_net_hdr` in front of every packet (offload metadata).
pub const IFF_VNET_HDR: i16 = 0x4000;

/// `TUN_F_CSUM`: we accept packets with a partial checksum.
pub const TUN_F_CSUM: u32 = 0x01;
/// `TUN_F_TSO4`: we accept TCPv4 GSO super-packets.
pub const TUN_F_TSO4: u32 = 0x02;
/// `TUN_F_TSO6`: we accept TCPv6 GSO super-packets.
pub const TUN_F_TSO6: u32 = 0x04;
/// `TUN_F_TSO_ECN`: GSO super-packets may carry CWR.
pub const TUN_F_TSO_ECN: u32 = 0x08;
/// `TUN_F_USO4`: we accept UDPv4 GSO super-packets (Linux ≥ 6.2).
pub const TUN_F_USO4: u32 = 0x20;
/// `TUN_F_USO6`: we accept UDPv6 GSO super-packets (Linux ≥ 6.2).
pub const TUN_F_USO6: u32 = 0x40;

/// `SOL_MPTCP`.
const SOL_MPTCP: libc::c_int = 284;
/// `MPTCP_INFO` (uapi `linux/mptcp.h`).
const MPTCP_INFO: libc::c_int = 1;
/// `MPTCP_SUBFLOW_ADDRS`.
const MPTCP_SUBFLOW_ADDRS: libc::c_int = 3;
/// `TCP_IS_MPTCP`: 1 on an MPTCP socket that did not fall back to TCP.
const TCP_IS_MPTCP: libc::c_int = 43;
/// `MPTCP_INFO_FLAG_FALLBACK`.
pub const MPTCP_INFO_FLAG_FALLBACK: u32 = 0x1;

/// `SOL_NETLINK`.
const SOL_NETLINK: libc::c_int = 270;
/// `NETLINK_ADD_MEMBERSHIP`.
const NETLINK_ADD_MEMBERSHIP: libc::c_int = 1;
/// `NETLINK_EXT_ACK`: error messages in NLMSG_ERROR.
const NETLINK_EXT_ACK: libc::c_int = 11;

/// `struct ifreq` as used by TUNSETIFF: the name and the flags (first member of the union).
#[repr(C)]
struct IfReqFlags {
    name: [u8; libc::IFNAMSIZ],
    flags: i16,
    _pad: [u8; 22],
}

/// Attaches an opened `/dev/net/tun` to the interface `name` (created if missing) with `flags`;
/// returns the name the kernel used.
pub fn tun_set_iff(fd: impl AsFd, name: &str, flags: i16) -> io::Result<String> {
    let mut req = IfReqFlags {
        name: [0; libc::IFNAMSIZ],
        flags,
        _pad: [0; 22],
    };
    let bytes = name.as_bytes();
    if bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("interface name {name:?} is longer than 15 bytes or has NUL"),
        ));
    }
    for (dst, src) in req.name.iter_mut().zip(bytes) {
        *dst = *src;
    }
    // SAFETY: `fd` is a valid open fd (borrowed for the call); TUNSETIFF reads and writes a
    // `struct ifreq`, and `req` is a properly sized, initialised `#[repr(C)]` ifreq that lives
    // across the call.
    let rc = unsafe {
        libc::ioctl(
            fd.as_fd().as_raw_fd(),
            TUNSETIFF,
            &mut req as *mut IfReqFlags,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let len = req
        .name
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(req.name.len());
    Ok(String::from_utf8_lossy(req.name.get(..len).unwrap_or_default()).into_owned())
}

/// Bytes in a (MPTCP or TCP) socket's send queue not acknowledged yet (`TIOCOUTQ`, alias
/// `SIOCOUTQ`; MPTCP sockets answer it at the MPTCP level).
pub fn outq_bytes(fd: impl AsFd) -> io::Result<u64> {
    int_ioctl(fd, libc::TIOCOUTQ)
}

/// `SIOCOUTQNSD`: bytes of a socket's send queue not sent yet (on an MPTCP socket: not yet handed
/// to a subflow).
pub fn outq_unsent_bytes(fd: impl AsFd) -> io::Result<u64> {
    int_ioctl(fd, libc::SIOCOUTQNSD)
}

/// A socket ioctl that answers one `int` (a byte count): negative answers read as 0.
fn int_ioctl(fd: impl AsFd, request: libc::Ioctl) -> io::Result<u64> {
    let mut v: libc::c_int = 0;
    // SAFETY: the requests passed here (TIOCOUTQ, SIOCOUTQNSD) write one `int` through the
    // pointer; `v` lives across the call.
    let rc = unsafe { libc::ioctl(fd.as_fd().as_raw_fd(), request, &mut v as *mut libc::c_int) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(u64::try_from(v).unwrap_or(0))
}

/// Tells the TUN device which offloads we accept on reads (`TUN_F_*`).
pub fn tun_set_offload(fd: impl AsFd, flags: u32) -> io::Result<()> {
    // SAFETY: TUNSETOFFLOAD takes its argument by value (an unsigned int), no memory is shared.
    let rc = unsafe {
        libc::ioctl(
            fd.as_fd().as_raw_fd(),
            TUNSETOFFLOAD,
            libc::c_ulong::from(flags),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sets the size of the virtio-net header the TUN device prepends/expects.
pub fn tun_set_vnet_hdr_sz(fd: impl AsFd, size: i32) -> io::Result<()> {
    let mut v: libc::c_int = size;
    // SAFETY: TUNSETVNETHDRSZ reads one `int` through the pointer; `v` lives across the call.
    let rc = unsafe {
        libc::ioctl(
            fd.as_fd().as_raw_fd(),
            TUNSETVNETHDRSZ,
            &mut v as *mut libc::c_int,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reads one datagram (a TUN packet) into the spare capacity of `buf` (at most `max` bytes) and
/// appends it: no zeroing, no copy. `buf` must already have `max` bytes of spare capacity reserved.
pub fn read_into_spare(fd: impl AsFd, buf: &mut BytesMut, max: usize) -> io::Result<usize> {
    buf.reserve(max);
    let spare = buf.chunk_mut();
    let len = spare.len().min(max);
    // SAFETY: `spare` points to at least `len` writable bytes owned by `buf`; read(2) writes at
    // most `len` bytes there and returns how many it wrote.
    let n = unsafe { libc::read(fd.as_fd().as_raw_fd(), spare.as_mut_ptr().cast(), len) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = usize::try_from(n).unwrap_or(0).min(len);
    // SAFETY: the kernel initialised exactly `n` ≤ `len` bytes of the spare capacity above.
    unsafe { buf.advance_mut(n) };
    Ok(n)
}

fn setsockopt_int(fd: impl AsFd, level: libc::c_int, name: libc::c_int, v: i32) -> io::Result<()> {
    let val: libc::c_int = v;
    // SAFETY: we pass a pointer to an initialised `c_int` and its exact size; the kernel only
    // reads it during the call.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_fd().as_raw_fd(),
            level,
            name,
            (&val as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reads a socket option into `buf`; returns the length the kernel wrote.
fn getsockopt_buf(
    fd: impl AsFd,
    level: libc::c_int,
    name: libc::c_int,
    buf: &mut [u8],
) -> io::Result<usize> {
    let mut len = libc::socklen_t::try_from(buf.len()).unwrap_or(libc::socklen_t::MAX);
    // SAFETY: `buf` is valid for `len` bytes of writes; the kernel writes at most `len` bytes and
    // stores the written length in `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_fd().as_raw_fd(),
            level,
            name,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((len as usize).min(buf.len()))
}

/// `TCP_NOTSENT_LOWAT`: the socket is writable only while less than `bytes` are unsent.
pub fn set_notsent_lowat(fd: impl AsFd, bytes: u32) -> io::Result<()> {
    setsockopt_int(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_NOTSENT_LOWAT,
        i32::try_from(bytes).unwrap_or(i32::MAX),
    )
}

/// `SO_SNDBUF` (the kernel doubles `bytes`; it also locks the size against autotuning).
pub fn set_sndbuf(fd: impl AsFd, bytes: u32) -> io::Result<()> {
    setsockopt_int(
        fd,
        libc::SOL_SOCKET,
        libc::SO_SNDBUF,
        i32::try_from(bytes).unwrap_or(i32::MAX),
    )
}

/// `TCP_CONGESTION`: the congestion control of a socket by name (e.g. `bbr`). On an MPTCP socket
/// the kernel (>= 5.16) applies it to every subflow, also to those created later.
pub fn set_congestion(fd: impl AsFd, name: &str) -> io::Result<()> {
    // SAFETY: we pass a pointer to `name`'s bytes and their exact length; the kernel only reads
    // them during the call (the name needs no NUL terminator).
    let rc = unsafe {
        libc::setsockopt(
            fd.as_fd().as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `IP_TOS` with `dscp` in the upper six bits (ECN bits 0). On an MPTCP socket the kernel copies
/// it to every subflow, also to subflows created later.
pub fn set_dscp(fd: impl AsFd, dscp: u8) -> io::Result<()> {
    setsockopt_int(
        fd,
        libc::IPPROTO_IP,
        libc::IP_TOS,
        i32::from(dscp & 0x3f) << 2,
    )
}

/// `TCP_MAXSEG`: pin the MSS (before connect / listen).
pub fn set_maxseg(fd: impl AsFd, mss: u16) -> io::Result<()> {
    setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_MAXSEG, i32::from(mss))
}

/// `TCP_IS_MPTCP`: whether the socket still speaks MPTCP (false after a fallback to plain TCP).
pub fn is_mptcp(fd: impl AsFd) -> io::Result<bool> {
    let mut buf = [0u8; 4];
    let n = getsockopt_buf(fd, libc::IPPROTO_TCP, TCP_IS_MPTCP, &mut buf)?;
    Ok(n == 4 && i32::from_ne_bytes(buf) != 0)
}

/// The fields of `struct mptcp_info` the gateway reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct MptcpInfo {
    /// `mptcpi_subflows`: additional (joined) subflows.
    pub subflows: u8,
    /// `mptcpi_flags` (bit 0: fallback to TCP).
    pub flags: u32,
    /// `mptcpi_token`: the local connection token (the userspace PM addresses connections by it).
    pub token: u32,
    /// `mptcpi_retransmits`.
    pub retransmits: u32,
    /// `mptcpi_bytes_retrans`.
    pub bytes_retrans: u64,
    /// `mptcpi_bytes_sent`.
    pub bytes_sent: u64,
    /// `mptcpi_bytes_received`.
    pub bytes_received: u64,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| <[u8; 4]>::try_from(s).ok())
        .map_or(0, u32::from_ne_bytes)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| <[u8; 8]>::try_from(s).ok())
        .map_or(0, u64::from_ne_bytes)
}

/// `getsockopt(SOL_MPTCP, MPTCP_INFO)`. Fails on a socket that fell back to TCP (or is no MPTCP
/// socket at all). Fields a kernel does not report read as 0.
pub fn mptcp_info(fd: impl AsFd) -> io::Result<MptcpInfo> {
    let mut buf = [0u8; 128];
    let n = getsockopt_buf(fd, SOL_MPTCP, MPTCP_INFO, &mut buf)?;
    let b = buf.get(..n).unwrap_or_default();
    Ok(MptcpInfo {
        subflows: b.first().copied().unwrap_or(0),
        flags: u32_at(b, 8),
        token: u32_at(b, 12),
        retransmits: u32_at(b, 44),
        bytes_retrans: u64_at(b, 48),
        bytes_sent: u64_at(b, 56),
        bytes_received: u64_at(b, 64),
    })
}

/// `struct mptcp_subflow_data` (16 bytes) + `struct mptcp_subflow_addrs` (2 × sockaddr_storage).
const SUBFLOW_DATA_LEN: usize = 16;
const SUBFLOW_ADDRS_LEN: usize = 256;
/// Most subflows read back (the kernel allows at most 9 per connection, DESIGN §4).
const MAX_SUBFLOWS_READ: usize = 16;

fn sockaddr_v4(b: &[u8]) -> Option<SocketAddrV4> {
    let family = u16::from_ne_bytes(b.get(0..2)?.try_into().ok()?);
    if i32::from(family) != libc::AF_INET {
        return None;
    }
    let port = u16::from_be_bytes(b.get(2..4)?.try_into().ok()?);
    let ip: [u8; 4] = b.get(4..8)?.try_into().ok()?;
    Some(SocketAddrV4::new(Ipv4Addr::from(ip), port))
}

/// `getsockopt(SOL_MPTCP, MPTCP_SUBFLOW_ADDRS)`: (local, remote) of every subflow (IPv4 only).
pub fn mptcp_subflow_addrs(fd: impl AsFd) -> io::Result<Vec<(SocketAddrV4, SocketAddrV4)>> {
    let mut buf = vec![0u8; SUBFLOW_DATA_LEN + MAX_SUBFLOWS_READ * SUBFLOW_ADDRS_LEN];
    let hdr = [SUBFLOW_DATA_LEN as u32, 0, 0, SUBFLOW_ADDRS_LEN as u32];
    for (i, v) in hdr.iter().enumerate() {
        if let Some(d) = buf.get_mut(i * 4..i * 4 + 4) {
            d.copy_from_slice(&v.to_ne_bytes());
        }
    }
    let n = getsockopt_buf(fd, SOL_MPTCP, MPTCP_SUBFLOW_ADDRS, &mut buf)?;
    let num = u32_at(&buf, 4) as usize;
    let size_kernel = u32_at(&buf, 8) as usize;
    let stride = if size_kernel == 0 {
        SUBFLOW_ADDRS_LEN
    } else {
        size_kernel.min(SUBFLOW_ADDRS_LEN)
    };
    let mut out = Vec::new();
    for i in 0..num.min(MAX_SUBFLOWS_READ) {
        let at = SUBFLOW_DATA_LEN + i * stride;
        let Some(entry) = buf.get(at..(at + stride).min(n)) else {
            break;
        };
        if let (Some(l), Some(r)) = (
            entry.get(..128).and_then(sockaddr_v4),
            entry.get(128..).and_then(sockaddr_v4),
        ) {
            out.push((l, r));
        }
    }
    Ok(out)
}

/// `MPTCP_TCPINFO`: one `struct tcp_info` per subflow.
const MPTCP_TCPINFO: libc::c_int = 2;
/// Bytes of `struct tcp_info` we ask for (up to `tcpi_snd_wnd`, Linux ≥ 5.19).
const TCP_INFO_LEN: usize = 232;

/// `TCP_ESTABLISHED`.
pub const TCP_ESTABLISHED: u8 = 1;
/// `TCP_SYN_SENT`.
pub const TCP_SYN_SENT: u8 = 2;

/// The `struct tcp_info` fields of one subflow that `mmsg status` shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SubflowTcpInfo {
    /// `tcpi_state` (1 = ESTABLISHED, 2 = SYN_SENT, 7 = CLOSE, ...).
    pub state: u8,
    /// `tcpi_rtt`, microseconds (smoothed).
    pub rtt_us: u32,
    /// `tcpi_snd_cwnd`, segments.
    pub cwnd: u32,
    /// `tcpi_snd_mss`, bytes.
    pub snd_mss: u32,
    /// `tcpi_unacked`, segments in flight.
    pub unacked: u32,
    /// `tcpi_total_retrans`, segments.
    pub total_retrans: u32,
    /// `tcpi_bytes_acked`.
    pub bytes_acked: u64,
    /// `tcpi_bytes_received`.
    pub bytes_received: u64,
    /// `tcpi_bytes_retrans`.
    pub bytes_retrans: u64,
    // Fast failover (mpa::subflow_health): retransmission backoff and RTT variation.
    /// `tcpi_backoff`: RTO backoff exponent (> 0 after a retransmission timeout).
    pub backoff: u8,
    /// `tcpi_rttvar`, microseconds.
    pub rttvar_us: u32,
    // The send time budget (mpa::queue::inflight).
    /// `tcpi_min_rtt`, microseconds (windowed minimum; 0: none yet).
    pub min_rtt_us: u32,
    /// `tcpi_notsent_bytes`: bytes in the subflow's send queue not sent yet.
    pub notsent_bytes: u32,
    /// `tcpi_last_ack_recv`: ms since the subflow last received an ACK (fast failover).
    pub last_ack_recv_ms: u32,
    /// `tcpi_last_data_recv`: ms since the subflow last received data (connection liveness).
    pub last_data_recv_ms: u32,
}

/// `getsockopt(SOL_MPTCP, MPTCP_TCPINFO)`: TCP state of every subflow, in the kernel's subflow
/// order (the same walk as [`mptcp_subflow_addrs`]).
pub fn mptcp_subflow_tcpinfo(fd: impl AsFd) -> io::Result<Vec<SubflowTcpInfo>> {
    let mut buf = vec![0u8; SUBFLOW_DATA_LEN + MAX_SUBFLOWS_READ * TCP_INFO_LEN];
    let hdr = [SUBFLOW_DATA_LEN as u32, 0, 0, TCP_INFO_LEN as u32];
    for (i, v) in hdr.iter().enumerate() {
        if let Some(d) = buf.get_mut(i * 4..i * 4 + 4) {
            d.copy_from_slice(&v.to_ne_bytes());
        }
    }
    let n = getsockopt_buf(fd, SOL_MPTCP, MPTCP_TCPINFO, &mut buf)?;
    let num = u32_at(&buf, 4) as usize;
    let size_kernel = u32_at(&buf, 8) as usize;
    let stride = if size_kernel == 0 {
        TCP_INFO_LEN
    } else {
        size_kernel.min(TCP_INFO_LEN)
    };
    let mut out = Vec::new();
    for i in 0..num.min(MAX_SUBFLOWS_READ) {
        let at = SUBFLOW_DATA_LEN + i * stride;
        let Some(t) = buf.get(at..(at + stride).min(n)) else {
            break;
        };
        out.push(SubflowTcpInfo {
            state: t.first().copied().unwrap_or(0),
            rtt_us: u32_at(t, 68),
            cwnd: u32_at(t, 80),
            snd_mss: u32_at(t, 16),
            unacked: u32_at(t, 24),
            total_retrans: u32_at(t, 100),
            bytes_acked: u64_at(t, 120),
            bytes_received: u64_at(t, 128),
            bytes_retrans: u64_at(t, 208),
            // Fast failover fields (struct tcp_info offsets 4 and 72).
            backoff: t.get(4).copied().unwrap_or(0),
            rttvar_us: u32_at(t, 72),
            // struct tcp_info offsets 148 and 144 (Linux >= 4.10 / 4.6).
            min_rtt_us: u32_at(t, 148),
            notsent_bytes: u32_at(t, 144),
            // struct tcp_info offsets 56 and 52.
            last_ack_recv_ms: u32_at(t, 56),
            last_data_recv_ms: u32_at(t, 52),
        });
    }
    Ok(out)
}

/// Joins netlink multicast group `group` and asks for extended error messages.
pub fn netlink_add_membership(fd: impl AsFd, group: u32) -> io::Result<()> {
    setsockopt_int(
        fd,
        SOL_NETLINK,
        NETLINK_ADD_MEMBERSHIP,
        i32::try_from(group).unwrap_or(i32::MAX),
    )
}

/// Asks the kernel for extended ACK messages (the reason text of a netlink error).
pub fn netlink_ext_ack(fd: impl AsFd) -> io::Result<()> {
    setsockopt_int(fd, SOL_NETLINK, NETLINK_EXT_ACK, 1)
}

/// `if_nametoindex(3)`: 0 when there is no such interface.
pub fn if_index(name: &str) -> u32 {
    let Ok(c) = std::ffi::CString::new(name) else {
        return 0;
    };
    // SAFETY: `c` is a valid NUL-terminated string living across the call.
    unsafe { libc::if_nametoindex(c.as_ptr()) }
}

/// Registers an owned file (the TUN device) with the tokio reactor.
pub fn async_file(f: std::fs::File) -> io::Result<tokio::io::unix::AsyncFd<std::fs::File>> {
    // SAFETY: `File` owns its fd: it stays open and refers to the same file description until the
    // `AsyncFd` (which takes ownership of the `File`) is dropped, and `File::as_raw_fd` always
    // returns that same fd.
    unsafe { tokio::io::unix::AsyncFd::register(f) }.map_err(|e| io::Error::other(e.to_string()))
}

/// Binds a netlink socket to a kernel-assigned port id (needed before receiving multicast).
pub fn netlink_bind(fd: impl AsFd) -> io::Result<()> {
    // SAFETY: an all-zero `sockaddr_nl` is a valid value (any pid, no groups).
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: `addr` is an initialised sockaddr_nl and we pass its exact size.
    let rc = unsafe {
        libc::bind(
            fd.as_fd().as_raw_fd(),
            (&addr as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
