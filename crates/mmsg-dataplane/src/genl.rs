//! Generic netlink messages for the MPTCP userspace path manager (`mptcp_pm`, uapi
//! `linux/mptcp.h`), built and parsed as plain bytes: no IO here (see [`crate::mptcp_pm`]).
//!
//! ```text
//! nlmsghdr (16)          genlmsghdr (4)        attributes (TLV, 4-byte aligned)
//! +-----+------+-------+-----+-----+         +---------+---------+---------------+
//! | len | type | flags | seq | pid | cmd ver |  nla_len | nla_type | value, padded |
//! +-----+------+-------+-----+-----+         +---------+---------+---------------+
//! ```
//! All integers are host order except addresses and the event ports (network order).

use std::net::{Ipv4Addr, SocketAddrV4};

/// `NLMSG_ERROR`.
pub const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`.
pub const NLMSG_DONE: u16 = 3;
/// `NLM_F_REQUEST`.
pub const NLM_F_REQUEST: u16 = 0x01;
/// `NLM_F_ACK`.
pub const NLM_F_ACK: u16 = 0x04;
/// `NLA_F_NESTED`.
const NLA_F_NESTED: u16 = 0x8000;
/// Type bits of `nla_type`.
const NLA_TYPE_MASK: u16 = 0x3fff;

/// `GENL_ID_CTRL`: the generic netlink controller.
pub const GENL_ID_CTRL: u16 = 0x10;
/// `CTRL_CMD_GETFAMILY`.
const CTRL_CMD_GETFAMILY: u8 = 3;
/// `CTRL_ATTR_FAMILY_ID` (u16).
const CTRL_ATTR_FAMILY_ID: u16 = 1;
/// `CTRL_ATTR_FAMILY_NAME` (string).
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
/// `CTRL_ATTR_MCAST_GROUPS` (nested array).
const CTRL_ATTR_MCAST_GROUPS: u16 = 7;
/// `CTRL_ATTR_MCAST_GRP_NAME`.
const CTRL_ATTR_MCAST_GRP_NAME: u16 = 1;
/// `CTRL_ATTR_MCAST_GRP_ID`.
const CTRL_ATTR_MCAST_GRP_ID: u16 = 2;
/// `NLMSGERR_ATTR_MSG`: the extended ACK's text.
const NLMSGERR_ATTR_MSG: u16 = 1;

/// `MPTCP_PM_NAME`.
pub const MPTCP_PM_NAME: &str = "mptcp_pm";
/// `MPTCP_PM_EV_GRP_NAME`.
pub const MPTCP_PM_EV_GRP_NAME: &str = "mptcp_pm_events";
/// `MPTCP_PM_VER`.
const MPTCP_PM_VER: u8 = 1;
/// `MPTCP_PM_CMD_SET_FLAGS`.
const MPTCP_PM_CMD_SET_FLAGS: u8 = 7;
/// `MPTCP_PM_CMD_SUBFLOW_CREATE`.
const MPTCP_PM_CMD_SUBFLOW_CREATE: u8 = 10;
/// `MPTCP_PM_CMD_SUBFLOW_DESTROY`.
const MPTCP_PM_CMD_SUBFLOW_DESTROY: u8 = 11;
/// `MPTCP_PM_ATTR_ADDR` (nested).
const MPTCP_PM_ATTR_ADDR: u16 = 1;
/// `MPTCP_PM_ATTR_TOKEN` (u32).
const MPTCP_PM_ATTR_TOKEN: u16 = 4;
/// `MPTCP_PM_ATTR_ADDR_REMOTE` (nested).
const MPTCP_PM_ATTR_ADDR_REMOTE: u16 = 6;
/// `MPTCP_PM_ADDR_ATTR_FAMILY` (u16).
const MPTCP_PM_ADDR_ATTR_FAMILY: u16 = 1;
/// `MPTCP_PM_ADDR_ATTR_ID` (u8).
const MPTCP_PM_ADDR_ATTR_ID: u16 = 2;
/// `MPTCP_PM_ADDR_ATTR_ADDR4` (be32).
const MPTCP_PM_ADDR_ATTR_ADDR4: u16 = 3;
/// `MPTCP_PM_ADDR_ATTR_PORT` (u16, host order).
const MPTCP_PM_ADDR_ATTR_PORT: u16 = 5;
/// `MPTCP_PM_ADDR_ATTR_FLAGS` (u32).
const MPTCP_PM_ADDR_ATTR_FLAGS: u16 = 6;
/// `MPTCP_PM_ADDR_FLAG_BACKUP`.
const MPTCP_PM_ADDR_FLAG_BACKUP: u32 = 1 << 2;
/// `MPTCP_PM_ADDR_ATTR_IF_IDX` (s32).
const MPTCP_PM_ADDR_ATTR_IF_IDX: u16 = 7;
/// `AF_INET`.
const AF_INET: u16 = 2;

/// MPTCP PM event types (`enum mptcp_event_type`).
pub mod event {
    /// `MPTCP_EVENT_CREATED`.
    pub const CREATED: u8 = 1;
    /// `MPTCP_EVENT_ESTABLISHED`.
    pub const ESTABLISHED: u8 = 2;
    /// `MPTCP_EVENT_CLOSED`.
    pub const CLOSED: u8 = 3;
    /// `MPTCP_EVENT_SUB_ESTABLISHED`.
    pub const SUB_ESTABLISHED: u8 = 10;
    /// `MPTCP_EVENT_SUB_CLOSED`.
    pub const SUB_CLOSED: u8 = 11;
}

/// `MPTCP_ATTR_TOKEN` of events.
const MPTCP_ATTR_TOKEN: u16 = 1;
/// `MPTCP_ATTR_SADDR4`.
const MPTCP_ATTR_SADDR4: u16 = 5;
/// `MPTCP_ATTR_DADDR4`.
const MPTCP_ATTR_DADDR4: u16 = 7;
/// `MPTCP_ATTR_SPORT` (be16).
const MPTCP_ATTR_SPORT: u16 = 9;
/// `MPTCP_ATTR_DPORT` (be16).
const MPTCP_ATTR_DPORT: u16 = 10;
/// `MPTCP_ATTR_ERROR` (u8).
const MPTCP_ATTR_ERROR: u16 = 12;

fn ne_u16(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .and_then(|s| <[u8; 2]>::try_from(s).ok())
        .map_or(0, u16::from_ne_bytes)
}

fn ne_u32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| <[u8; 4]>::try_from(s).ok())
        .map_or(0, u32::from_ne_bytes)
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// A message under construction: header, genl header, attributes. `finish` fills the length.
#[derive(Debug)]
struct Builder {
    buf: Vec<u8>,
    nests: Vec<usize>,
}

impl Builder {
    fn new(ty: u16, flags: u16, seq: u32, cmd: u8, version: u8) -> Self {
        let mut buf = Vec::with_capacity(128);
        buf.extend_from_slice(&0u32.to_ne_bytes());
        buf.extend_from_slice(&ty.to_ne_bytes());
        buf.extend_from_slice(&flags.to_ne_bytes());
        buf.extend_from_slice(&seq.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes());
        buf.extend_from_slice(&[cmd, version, 0, 0]);
        Builder {
            buf,
            nests: Vec::new(),
        }
    }

    fn attr(&mut self, ty: u16, value: &[u8]) {
        let len = u16::try_from(4 + value.len()).unwrap_or(u16::MAX);
        self.buf.extend_from_slice(&len.to_ne_bytes());
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self.buf.extend_from_slice(value);
        self.buf.resize(align4(self.buf.len()), 0);
    }

    fn begin_nest(&mut self, ty: u16) {
        self.nests.push(self.buf.len());
        self.buf.extend_from_slice(&0u16.to_ne_bytes());
        self.buf
            .extend_from_slice(&(ty | NLA_F_NESTED).to_ne_bytes());
    }

    fn end_nest(&mut self) {
        if let Some(start) = self.nests.pop() {
            let len = u16::try_from(self.buf.len() - start).unwrap_or(u16::MAX);
            if let Some(d) = self.buf.get_mut(start..start + 2) {
                d.copy_from_slice(&len.to_ne_bytes());
            }
        }
    }

    fn finish(mut self) -> Vec<u8> {
        let len = u32::try_from(self.buf.len()).unwrap_or(u32::MAX);
        if let Some(d) = self.buf.get_mut(0..4) {
            d.copy_from_slice(&len.to_ne_bytes());
        }
        self.buf
    }
}

/// `CTRL_CMD_GETFAMILY` for `name`.
pub fn get_family(seq: u32, name: &str) -> Vec<u8> {
    let mut b = Builder::new(GENL_ID_CTRL, NLM_F_REQUEST, seq, CTRL_CMD_GETFAMILY, 1);
    let mut v = name.as_bytes().to_vec();
    v.push(0);
    b.attr(CTRL_ATTR_FAMILY_NAME, &v);
    b.finish()
}

/// One subflow to create: the userspace PM's `SUBFLOW_CREATE` arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubflowCreate {
    /// The local token of the MPTCP connection.
    pub token: u32,
    /// Local address id (1..=255; 0 is the initial subflow's).
    pub local_id: u8,
    /// Local (WAN) address.
    pub local: Ipv4Addr,
    /// Interface to bind the subflow to (0: none).
    pub if_index: u32,
    /// Remote address.
    pub remote: Ipv4Addr,
    /// Remote port.
    pub remote_port: u16,
}

/// `MPTCP_PM_CMD_SUBFLOW_CREATE` (with `NLM_F_ACK`).
pub fn subflow_create(family: u16, seq: u32, s: &SubflowCreate) -> Vec<u8> {
    let mut b = Builder::new(
        family,
        NLM_F_REQUEST | NLM_F_ACK,
        seq,
        MPTCP_PM_CMD_SUBFLOW_CREATE,
        MPTCP_PM_VER,
    );
    b.attr(MPTCP_PM_ATTR_TOKEN, &s.token.to_ne_bytes());
    b.begin_nest(MPTCP_PM_ATTR_ADDR);
    b.attr(MPTCP_PM_ADDR_ATTR_FAMILY, &AF_INET.to_ne_bytes());
    b.attr(MPTCP_PM_ADDR_ATTR_ID, &[s.local_id]);
    b.attr(MPTCP_PM_ADDR_ATTR_ADDR4, &s.local.octets());
    if s.if_index != 0 {
        b.attr(
            MPTCP_PM_ADDR_ATTR_IF_IDX,
            &i32::try_from(s.if_index).unwrap_or(0).to_ne_bytes(),
        );
    }
    b.end_nest();
    b.begin_nest(MPTCP_PM_ATTR_ADDR_REMOTE);
    b.attr(MPTCP_PM_ADDR_ATTR_FAMILY, &AF_INET.to_ne_bytes());
    b.attr(MPTCP_PM_ADDR_ATTR_ADDR4, &s.remote.octets());
    b.attr(MPTCP_PM_ADDR_ATTR_PORT, &s.remote_port.to_ne_bytes());
    b.end_nest();
    b.finish()
}

/// Which subflow `MPTCP_PM_CMD_SUBFLOW_DESTROY` closes: the connection's token and the subflow's
/// local and remote socket addresses (the kernel matches all four).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubflowDestroy {
    /// The connection's local token.
    pub token: u32,
    /// Local address and port of the subflow.
    pub local: SocketAddrV4,
    /// Remote address and port.
    pub remote: SocketAddrV4,
}

/// `MPTCP_PM_CMD_SUBFLOW_DESTROY` (with `NLM_F_ACK`): token, local address (family, addr4,
/// port) and remote address (same), ports in host order as the kernel's `nla_get_u16` reads
/// them (net/mptcp/pm_netlink.c `mptcp_pm_parse_entry`).
pub fn subflow_destroy(family: u16, seq: u32, s: &SubflowDestroy) -> Vec<u8> {
    let mut b = Builder::new(
        family,
        NLM_F_REQUEST | NLM_F_ACK,
        seq,
        MPTCP_PM_CMD_SUBFLOW_DESTROY,
        MPTCP_PM_VER,
    );
    b.attr(MPTCP_PM_ATTR_TOKEN, &s.token.to_ne_bytes());
    for (nest, a) in [
        (MPTCP_PM_ATTR_ADDR, s.local),
        (MPTCP_PM_ATTR_ADDR_REMOTE, s.remote),
    ] {
        b.begin_nest(nest);
        b.attr(MPTCP_PM_ADDR_ATTR_FAMILY, &AF_INET.to_ne_bytes());
        b.attr(MPTCP_PM_ADDR_ATTR_ADDR4, &a.ip().octets());
        b.attr(MPTCP_PM_ADDR_ATTR_PORT, &a.port().to_ne_bytes());
        b.end_nest();
    }
    b.finish()
}

/// `MPTCP_PM_CMD_SET_FLAGS` of the userspace PM (with `NLM_F_ACK`): marks the subflow
/// `s.local` → `s.remote` of connection `s.token` backup or not. The kernel sends MP_PRIO on it,
/// so both ends' schedulers use it only when no active subflow is left
/// (net/mptcp/pm_userspace.c `mptcp_userspace_pm_set_flags`). The flags attribute is sent even
/// when clear: it is what "not backup" is.
pub fn set_flags(family: u16, seq: u32, s: &SubflowDestroy, backup: bool) -> Vec<u8> {
    let mut b = Builder::new(
        family,
        NLM_F_REQUEST | NLM_F_ACK,
        seq,
        MPTCP_PM_CMD_SET_FLAGS,
        MPTCP_PM_VER,
    );
    b.attr(MPTCP_PM_ATTR_TOKEN, &s.token.to_ne_bytes());
    let flags = if backup { MPTCP_PM_ADDR_FLAG_BACKUP } else { 0 };
    for (nest, a, flags) in [
        (MPTCP_PM_ATTR_ADDR, s.local, Some(flags)),
        (MPTCP_PM_ATTR_ADDR_REMOTE, s.remote, None),
    ] {
        b.begin_nest(nest);
        b.attr(MPTCP_PM_ADDR_ATTR_FAMILY, &AF_INET.to_ne_bytes());
        b.attr(MPTCP_PM_ADDR_ATTR_ADDR4, &a.ip().octets());
        b.attr(MPTCP_PM_ADDR_ATTR_PORT, &a.port().to_ne_bytes());
        if let Some(f) = flags {
            b.attr(MPTCP_PM_ADDR_ATTR_FLAGS, &f.to_ne_bytes());
        }
        b.end_nest();
    }
    b.finish()
}

/// One netlink message out of a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Msg<'a> {
    /// `nlmsg_type`.
    pub ty: u16,
    /// `nlmsg_seq`.
    pub seq: u32,
    /// Everything after the 16-byte header.
    pub payload: &'a [u8],
}

/// Splits a datagram into messages; stops at the first malformed one.
pub fn messages(mut buf: &[u8]) -> Vec<Msg<'_>> {
    let mut out = Vec::new();
    while buf.len() >= 16 {
        let len = ne_u32(buf, 0) as usize;
        if len < 16 || len > buf.len() {
            break;
        }
        let ty = ne_u16(buf, 4);
        let seq = ne_u32(buf, 8);
        out.push(Msg {
            ty,
            seq,
            payload: buf.get(16..len).unwrap_or_default(),
        });
        buf = buf.get(align4(len).min(buf.len())..).unwrap_or_default();
    }
    out
}

/// Iterates over the attributes in `buf`: (type without flags, value).
pub fn attrs(mut buf: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while buf.len() >= 4 {
        let len = usize::from(ne_u16(buf, 0));
        let ty = ne_u16(buf, 2) & NLA_TYPE_MASK;
        if len < 4 || len > buf.len() {
            break;
        }
        out.push((ty, buf.get(4..len).unwrap_or_default()));
        buf = buf.get(align4(len).min(buf.len())..).unwrap_or_default();
    }
    out
}

/// An `NLMSG_ERROR` payload: the errno (0 = ACK) and the extended ACK text, if any.
pub fn parse_error(payload: &[u8]) -> Option<(i32, Option<String>)> {
    let errno = i32::from_ne_bytes(payload.get(0..4)?.try_into().ok()?);
    // The original request's header follows (16 bytes, plus its payload only on error without
    // NETLINK_CAP_ACK); its length field says how much to skip before the TLVs.
    let orig_len = u32::from_ne_bytes(payload.get(4..8)?.try_into().ok()?) as usize;
    let skip = if errno == 0 { 16 } else { orig_len.max(16) };
    let text = payload.get(4 + align4(skip)..).and_then(|tlvs| {
        attrs(tlvs)
            .into_iter()
            .find(|(t, _)| *t == NLMSGERR_ATTR_MSG)
            .map(|(_, v)| String::from_utf8_lossy(v).trim_end_matches('\0').to_owned())
    });
    Some((errno, text))
}

/// A `CTRL_CMD_NEWFAMILY` reply: the family id and its multicast groups (name, id).
pub fn parse_family(payload: &[u8]) -> Option<(u16, Vec<(String, u32)>)> {
    let a = attrs(payload.get(4..)?);
    let id = a
        .iter()
        .find(|(t, _)| *t == CTRL_ATTR_FAMILY_ID)
        .and_then(|(_, v)| Some(u16::from_ne_bytes(v.get(0..2)?.try_into().ok()?)))?;
    let mut groups = Vec::new();
    if let Some((_, v)) = a.iter().find(|(t, _)| *t == CTRL_ATTR_MCAST_GROUPS) {
        for (_, g) in attrs(v) {
            let ga = attrs(g);
            let name = ga
                .iter()
                .find(|(t, _)| *t == CTRL_ATTR_MCAST_GRP_NAME)
                .map(|(_, v)| String::from_utf8_lossy(v).trim_end_matches('\0').to_owned());
            let gid = ga
                .iter()
                .find(|(t, _)| *t == CTRL_ATTR_MCAST_GRP_ID)
                .and_then(|(_, v)| Some(u32::from_ne_bytes(v.get(0..4)?.try_into().ok()?)));
            if let (Some(n), Some(i)) = (name, gid) {
                groups.push((n, i));
            }
        }
    }
    Some((id, groups))
}

/// An MPTCP PM event (only the fields the gateway logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Event {
    /// `MPTCP_EVENT_*`.
    pub kind: u8,
    /// Connection token.
    pub token: u32,
    /// Source address (IPv4 only).
    pub saddr: Option<Ipv4Addr>,
    /// Destination address.
    pub daddr: Option<Ipv4Addr>,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// `MPTCP_ATTR_ERROR` (sk_err of a closed subflow).
    pub error: u8,
}

/// Parses an event message payload (genl header + attributes).
pub fn parse_event(payload: &[u8]) -> Option<Event> {
    let kind = *payload.first()?;
    let mut e = Event {
        kind,
        ..Event::default()
    };
    for (t, v) in attrs(payload.get(4..)?) {
        match t {
            MPTCP_ATTR_TOKEN => e.token = u32::from_ne_bytes(v.get(0..4)?.try_into().ok()?),
            MPTCP_ATTR_SADDR4 => e.saddr = Some(Ipv4Addr::from(<[u8; 4]>::try_from(v).ok()?)),
            MPTCP_ATTR_DADDR4 => e.daddr = Some(Ipv4Addr::from(<[u8; 4]>::try_from(v).ok()?)),
            MPTCP_ATTR_SPORT => e.sport = u16::from_be_bytes(v.get(0..2)?.try_into().ok()?),
            MPTCP_ATTR_DPORT => e.dport = u16::from_be_bytes(v.get(0..2)?.try_into().ok()?),
            MPTCP_ATTR_ERROR => e.error = *v.first()?,
            _ => {}
        }
    }
    Some(e)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn set_flags_layout() {
        let sub = SubflowDestroy {
            token: 0x0a0b_0c0d,
            local: SocketAddrV4::new(Ipv4Addr::new(198, 18, 10, 2), 0x9c40),
            remote: SocketAddrV4::new(Ipv4Addr::new(198, 18, 21, 2), 0x2001),
        };
        for (backup, flags) in [(true, 4u32), (false, 0)] {
            let m = set_flags(0x1d, 9, &sub, backup);
            assert_eq!(
                u32::from_ne_bytes(m[0..4].try_into().unwrap()) as usize,
                m.len()
            );
            // genlmsghdr: cmd SET_FLAGS (7), version 1.
            assert_eq!(&m[16..20], &[7, 1, 0, 0]);
            let a = attrs(&m[20..]);
            assert_eq!(a.len(), 3);
            assert_eq!(
                a[0],
                (MPTCP_PM_ATTR_TOKEN, &0x0a0b_0c0du32.to_ne_bytes()[..])
            );
            let local = attrs(a[1].1);
            assert_eq!(a[1].0, MPTCP_PM_ATTR_ADDR);
            assert_eq!(local[1], (MPTCP_PM_ADDR_ATTR_ADDR4, &[198, 18, 10, 2][..]));
            assert_eq!(
                local[2],
                (MPTCP_PM_ADDR_ATTR_PORT, &0x9c40u16.to_ne_bytes()[..])
            );
            assert_eq!(
                local[3],
                (MPTCP_PM_ADDR_ATTR_FLAGS, &flags.to_ne_bytes()[..])
            );
            let remote = attrs(a[2].1);
            assert_eq!(a[2].0, MPTCP_PM_ATTR_ADDR_REMOTE);
            assert_eq!(remote.len(), 3, "no flags on the remote address");
            assert_eq!(remote[1], (MPTCP_PM_ADDR_ATTR_ADDR4, &[198, 18, 21, 2][..]));
        }
    }

    #[test]
    fn subflow_destroy_layout() {
        let m = subflow_destroy(
            0x1d,
            9,
            &SubflowDestroy {
                token: 0x0a0b_0c0d,
                local: SocketAddrV4::new(Ipv4Addr::new(198, 18, 10, 2), 0x9c40),
                remote: SocketAddrV4::new(Ipv4Addr::new(198, 18, 21, 2), 0x2001),
            },
        );
        assert_eq!(
            u32::from_ne_bytes(m[0..4].try_into().unwrap()) as usize,
            m.len()
        );
        assert_eq!(u16::from_ne_bytes([m[6], m[7]]), NLM_F_REQUEST | NLM_F_ACK);
        // genlmsghdr: cmd SUBFLOW_DESTROY (11), version 1.
        assert_eq!(&m[16..20], &[11, 1, 0, 0]);
        let a = attrs(&m[20..]);
        assert_eq!(a.len(), 3);
        assert_eq!(
            a[0],
            (MPTCP_PM_ATTR_TOKEN, &0x0a0b_0c0du32.to_ne_bytes()[..])
        );
        for (i, (nest, addr, port)) in [
            (MPTCP_PM_ATTR_ADDR, [198, 18, 10, 2], 0x9c40u16),
            (MPTCP_PM_ATTR_ADDR_REMOTE, [198, 18, 21, 2], 0x2001),
        ]
        .into_iter()
        .enumerate()
        {
            assert_eq!(a[i + 1].0, nest);
            let inner = attrs(a[i + 1].1);
            assert_eq!(
                inner,
                vec![
                    (MPTCP_PM_ADDR_ATTR_FAMILY, &AF_INET.to_ne_bytes()[..]),
                    (MPTCP_PM_ADDR_ATTR_ADDR4, &addr[..]),
                    (MPTCP_PM_ADDR_ATTR_PORT, &port.to_ne_bytes()[..]),
                ]
            );
        }
    }

    #[test]
    fn subflow_create_layout() {
        let m = subflow_create(
            0x1d,
            7,
            &SubflowCreate {
                token: 0x0102_0304,
                local_id: 2,
                local: Ipv4Addr::new(198, 18, 11, 2),
                if_index: 3,
                remote: Ipv4Addr::new(198, 18, 20, 2),
                remote_port: 0x2001,
            },
        );
        // nlmsghdr: total length, family id, REQUEST|ACK, seq 7.
        assert_eq!(
            u32::from_ne_bytes(m[0..4].try_into().unwrap()) as usize,
            m.len()
        );
        assert_eq!(u16::from_ne_bytes([m[4], m[5]]), 0x1d);
        assert_eq!(u16::from_ne_bytes([m[6], m[7]]), NLM_F_REQUEST | NLM_F_ACK);
        assert_eq!(u32::from_ne_bytes(m[8..12].try_into().unwrap()), 7);
        // genlmsghdr: cmd SUBFLOW_CREATE, version 1.
        assert_eq!(&m[16..20], &[10, 1, 0, 0]);
        let a = attrs(&m[20..]);
        assert_eq!(a.len(), 3);
        assert_eq!(
            a[0],
            (MPTCP_PM_ATTR_TOKEN, &0x0102_0304u32.to_ne_bytes()[..])
        );
        assert_eq!(a[1].0, MPTCP_PM_ATTR_ADDR);
        let local = attrs(a[1].1);
        assert_eq!(
            local[0],
            (MPTCP_PM_ADDR_ATTR_FAMILY, &2u16.to_ne_bytes()[..])
        );
        assert_eq!(local[1], (MPTCP_PM_ADDR_ATTR_ID, &[2u8][..]));
        assert_eq!(
            local[2],
            (MPTCP_PM_ADDR_ATTR_ADDR4, &[198u8, 18, 11, 2][..])
        );
        assert_eq!(
            local[3],
            (MPTCP_PM_ADDR_ATTR_IF_IDX, &3i32.to_ne_bytes()[..])
        );
        let remote = attrs(a[2].1);
        assert_eq!(
            remote[1],
            (MPTCP_PM_ADDR_ATTR_ADDR4, &[198u8, 18, 20, 2][..])
        );
        assert_eq!(
            remote[2],
            (MPTCP_PM_ADDR_ATTR_PORT, &0x2001u16.to_ne_bytes()[..])
        );
        // The nested flag is set on the wire.
        assert_eq!(
            u16::from_ne_bytes([m[30], m[31]]) & NLA_F_NESTED,
            NLA_F_NESTED
        );
    }

    #[test]
    fn family_reply_and_errors_parse() {
        // A hand-built NEWFAMILY reply: id 0x1d and one multicast group.
        let mut b = Builder::new(GENL_ID_CTRL, 0, 1, 1, 1);
        b.attr(CTRL_ATTR_FAMILY_ID, &0x1du16.to_ne_bytes());
        b.begin_nest(CTRL_ATTR_MCAST_GROUPS);
        b.begin_nest(1);
        b.attr(CTRL_ATTR_MCAST_GRP_NAME, b"mptcp_pm_events\0");
        b.attr(CTRL_ATTR_MCAST_GRP_ID, &9u32.to_ne_bytes());
        b.end_nest();
        b.end_nest();
        let m = b.finish();
        let msgs = messages(&m);
        assert_eq!(msgs.len(), 1);
        let (id, groups) = parse_family(msgs[0].payload).unwrap();
        assert_eq!(id, 0x1d);
        assert_eq!(groups, vec![("mptcp_pm_events".to_owned(), 9)]);
        // Truncated and garbage input never panics.
        for n in 0..m.len() {
            let _ = messages(&m[..n]);
            let _ = attrs(&m[..n]);
            let _ = parse_error(&m[..n]);
            let _ = parse_event(&m[..n]);
        }
        let mut err = (-22i32).to_ne_bytes().to_vec();
        err.extend_from_slice(&16u32.to_ne_bytes());
        err.extend_from_slice(&[0u8; 12]);
        err.extend_from_slice(&8u16.to_ne_bytes());
        err.extend_from_slice(&NLMSGERR_ATTR_MSG.to_ne_bytes());
        err.extend_from_slice(b"bad\0");
        assert_eq!(parse_error(&err), Some((-22, Some("bad".to_owned()))));
    }
}
