//! The `virtio_net_hdr` a peer sends in front of an `IpVirtio` frame's packet, checked before it
//! reaches our TUN device (and so the kernel's `virtio_net_hdr_to_skb`). A peer is authenticated
//! but not trusted to be bug-free: the header must describe work (checksum completion,
//! segmentation) that fits the packet actually present, or the frame is dropped
//! ([`crate::gateway::PacketDrop::BadVirtio`]).
//!
//! ```text
//!  0        1        2        4          6           8             10
//! +--------+--------+--------+----------+-----------+-------------+
//! | flags  |gso_type| hdr_len| gso_size | csum_start| csum_offset |   (u16s little-endian,
//! +--------+--------+--------+----------+-----------+-------------+    Linux `virtio_net_hdr`)
//! ```
//!
//! What is accepted is what the Linux TUN device hands us on a read (`virtio_net_hdr_from_skb`)
//! with the offloads mmsg enables (`TUN_F_CSUM | TSO4 | TSO6 | TSO_ECN | USO4 | USO6`): no work
//! (all zero, or only `DATA_VALID`); a partial checksum (`NEEDS_CSUM`) whose 16-bit field lies
//! inside the packet, at the TCP/UDP checksum when `csum_start` is the transport header; and GSO
//! super-packets of type TCPv4, TCPv6 (ECN bit allowed) or UDP_L4 on a matching IP version and
//! protocol, with `NEEDS_CSUM` at the transport header, a non-zero `gso_size` and at most
//! [`MAX_GSO_SEGMENTS`] segments. Legacy UFO (`GSO_UDP`), `RSC_INFO` and unknown bits are
//! refused. `hdr_len` is only a hint to the kernel (Linux fills it with the linear length); it
//! must not exceed the packet. Pure, never panics: every read is bounds-checked.

use crate::framing::VIRTIO_NET_HDR_LEN;

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the checksum from `csum_start` on must be completed.
pub const F_NEEDS_CSUM: u8 = 0x01;
/// `VIRTIO_NET_HDR_F_DATA_VALID`: the checksum was already verified.
pub const F_DATA_VALID: u8 = 0x02;
/// `VIRTIO_NET_HDR_GSO_NONE`.
pub const GSO_NONE: u8 = 0x00;
/// `VIRTIO_NET_HDR_GSO_TCPV4`.
pub const GSO_TCPV4: u8 = 0x01;
/// `VIRTIO_NET_HDR_GSO_UDP` (legacy UFO: refused).
pub const GSO_UDP: u8 = 0x03;
/// `VIRTIO_NET_HDR_GSO_TCPV6`.
pub const GSO_TCPV6: u8 = 0x04;
/// `VIRTIO_NET_HDR_GSO_UDP_L4` (USO).
pub const GSO_UDP_L4: u8 = 0x05;
/// `VIRTIO_NET_HDR_GSO_ECN`: TCP segments may carry CWR.
pub const GSO_ECN: u8 = 0x80;

/// Most segments one GSO super-packet may ask for: Linux's `UDP_MAX_SEGMENTS` (128) for USO; a
/// 64 KiB TCP super-packet with a 536-byte MSS has 123, so the same bound covers TSO too.
pub const MAX_GSO_SEGMENTS: usize = 128;

/// `GSO_BY_FRAGS`, a kernel-internal `gso_size` never valid from outside.
const GSO_BY_FRAGS: u16 = 0xFFFF;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
const TCP_CSUM_OFFSET: usize = 16;
const UDP_CSUM_OFFSET: usize = 6;
const UDP_HDR_LEN: usize = 8;
const TCP_MIN_HDR_LEN: usize = 20;
const IPV6_HDR_LEN: usize = 40;

/// The fields of a `virtio_net_hdr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VirtioHdr {
    /// `F_NEEDS_CSUM`, `F_DATA_VALID`.
    pub flags: u8,
    /// `GSO_*`, possibly with [`GSO_ECN`].
    pub gso_type: u8,
    /// Length of the headers (a hint).
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    /// Where the checksummed range starts.
    pub csum_start: u16,
    /// Where the checksum lies, from `csum_start`.
    pub csum_offset: u16,
}

impl VirtioHdr {
    /// Parses the 10 header bytes; `None` when `b` is shorter.
    pub fn parse(b: &[u8]) -> Option<VirtioHdr> {
        let b: &[u8; VIRTIO_NET_HDR_LEN] = b.get(..VIRTIO_NET_HDR_LEN)?.try_into().ok()?;
        let [flags, gso_type, h0, h1, s0, s1, c0, c1, o0, o1] = *b;
        Some(VirtioHdr {
            flags,
            gso_type,
            hdr_len: u16::from_le_bytes([h0, h1]),
            gso_size: u16::from_le_bytes([s0, s1]),
            csum_start: u16::from_le_bytes([c0, c1]),
            csum_offset: u16::from_le_bytes([o0, o1]),
        })
    }

    /// The 10 header bytes.
    pub fn to_bytes(self) -> [u8; VIRTIO_NET_HDR_LEN] {
        let [h0, h1] = self.hdr_len.to_le_bytes();
        let [s0, s1] = self.gso_size.to_le_bytes();
        let [c0, c1] = self.csum_start.to_le_bytes();
        let [o0, o1] = self.csum_offset.to_le_bytes();
        [self.flags, self.gso_type, h0, h1, s0, s1, c0, c1, o0, o1]
    }
}

/// Why a virtio header was refused (all: the peer's fault).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum VirtioError {
    /// Fewer than 10 bytes.
    #[error("virtio header truncated")]
    Truncated,
    /// A flag other than `NEEDS_CSUM` / `DATA_VALID`.
    #[error("unknown virtio flags")]
    Flags,
    /// A GSO type other than NONE, TCPv4, TCPv6, UDP_L4, or ECN on a non-TCP type.
    #[error("unsupported GSO type")]
    GsoType,
    /// `hdr_len` beyond the packet.
    #[error("hdr_len beyond the packet")]
    HdrLen,
    /// `gso_size` zero (with GSO), non-zero without, or too many segments.
    #[error("bad gso_size")]
    GsoSize,
    /// The checksum range is outside the packet, or does not match the transport header.
    #[error("bad checksum offsets")]
    Csum,
    /// The IP (or transport) header does not fit or does not match what the header asks for.
    #[error("packet does not match the virtio header")]
    Packet,
}

/// The transport header of an IP packet: where it starts and its protocol.
struct L4 {
    start: usize,
    proto: u8,
    /// IPv4 (else IPv6).
    v4: bool,
}

/// The big-endian `u16` at `at`.
fn be16(b: &[u8], at: usize) -> Result<u16, VirtioError> {
    match b.get(at..at + 2) {
        Some(&[x, y]) => Ok(u16::from_be_bytes([x, y])),
        _ => Err(VirtioError::Packet),
    }
}

/// IP header facts used by the checks: version, where the transport header starts and the
/// protocol (IPv6: the first next-header, extension headers are not walked), and whether the
/// length fields agree with `ip.len()`.
fn l4_of(ip: &[u8]) -> Result<(L4, bool), VirtioError> {
    let first = *ip.first().ok_or(VirtioError::Packet)?;
    match first >> 4 {
        4 => {
            let ihl = usize::from(first & 0x0F) * 4;
            if ihl < 20 || ip.len() < ihl {
                return Err(VirtioError::Packet);
            }
            let total = usize::from(be16(ip, 2)?);
            let frag = be16(ip, 6)? & 0x3FFF;
            let proto = *ip.get(9).ok_or(VirtioError::Packet)?;
            Ok((
                L4 {
                    start: ihl,
                    proto,
                    v4: true,
                },
                total == ip.len() && frag == 0,
            ))
        }
        6 => {
            if ip.len() < IPV6_HDR_LEN {
                return Err(VirtioError::Packet);
            }
            let payload = usize::from(be16(ip, 4)?);
            let proto = *ip.get(6).ok_or(VirtioError::Packet)?;
            Ok((
                L4 {
                    start: IPV6_HDR_LEN,
                    proto,
                    v4: false,
                },
                payload + IPV6_HDR_LEN == ip.len(),
            ))
        }
        _ => Err(VirtioError::Packet),
    }
}

/// Checks the virtio header `vnet` of a peer's `IpVirtio` frame against its IP packet `ip`.
/// `Ok` means the kernel may be given both: the work asked for fits the packet.
pub fn validate(vnet: &[u8], ip: &[u8]) -> Result<(), VirtioError> {
    let h = VirtioHdr::parse(vnet).ok_or(VirtioError::Truncated)?;
    if h.flags & !(F_NEEDS_CSUM | F_DATA_VALID) != 0 {
        return Err(VirtioError::Flags);
    }
    let gso = h.gso_type & !GSO_ECN;
    let ecn = h.gso_type & GSO_ECN != 0;
    match gso {
        GSO_NONE if !ecn => {}
        GSO_TCPV4 | GSO_TCPV6 => {}
        GSO_UDP_L4 if !ecn => {}
        _ => return Err(VirtioError::GsoType),
    }
    if usize::from(h.hdr_len) > ip.len() {
        return Err(VirtioError::HdrLen);
    }
    let needs_csum = h.flags & F_NEEDS_CSUM != 0;
    let (start, off) = (usize::from(h.csum_start), usize::from(h.csum_offset));
    if gso == GSO_NONE {
        if h.gso_size != 0 {
            return Err(VirtioError::GsoSize);
        }
        if !needs_csum {
            // No work: the checksum fields are meaningless and Linux writes them as zero.
            return if start == 0 && off == 0 {
                Ok(())
            } else {
                Err(VirtioError::Csum)
            };
        }
        let (l4, _) = l4_of(ip)?;
        return check_csum(&l4, start, off, ip.len(), false);
    }
    // GSO: a partial checksum at the transport header of the protocol the type names.
    if !needs_csum {
        return Err(VirtioError::Csum);
    }
    let (l4, lengths_agree) = l4_of(ip)?;
    if !lengths_agree {
        return Err(VirtioError::Packet);
    }
    let want = match gso {
        GSO_TCPV4 => (true, PROTO_TCP),
        GSO_TCPV6 => (false, PROTO_TCP),
        _ => (l4.v4, PROTO_UDP),
    };
    if (l4.v4, l4.proto) != want {
        return Err(VirtioError::Packet);
    }
    check_csum(&l4, start, off, ip.len(), true)?;
    let l4_len = match l4.proto {
        PROTO_TCP => {
            let doff = ip
                .get(l4.start + 12)
                .map(|b| usize::from(b >> 4) * 4)
                .ok_or(VirtioError::Packet)?;
            if doff < TCP_MIN_HDR_LEN {
                return Err(VirtioError::Packet);
            }
            doff
        }
        _ => UDP_HDR_LEN,
    };
    let headers = l4.start + l4_len;
    let payload = ip.len().checked_sub(headers).ok_or(VirtioError::Packet)?;
    if h.gso_size == 0 || h.gso_size == GSO_BY_FRAGS {
        return Err(VirtioError::GsoSize);
    }
    if payload.div_ceil(usize::from(h.gso_size)) > MAX_GSO_SEGMENTS {
        return Err(VirtioError::GsoSize);
    }
    Ok(())
}

/// A partial checksum: the 16-bit field at `start + off` lies inside the packet, `start` at or
/// after the transport header; when `start` is the TCP/UDP header, `off` is its checksum field
/// (and the header is complete). `strict` (GSO): `start` must be the transport header.
fn check_csum(
    l4: &L4,
    start: usize,
    off: usize,
    len: usize,
    strict: bool,
) -> Result<(), VirtioError> {
    if start < l4.start || start + off + 2 > len {
        return Err(VirtioError::Csum);
    }
    if start != l4.start {
        return if strict {
            Err(VirtioError::Csum)
        } else {
            Ok(())
        };
    }
    let (want_off, hdr) = match l4.proto {
        PROTO_TCP => (TCP_CSUM_OFFSET, TCP_MIN_HDR_LEN),
        PROTO_UDP => (UDP_CSUM_OFFSET, UDP_HDR_LEN),
        // Another protocol using the Internet checksum (UDP-Lite, …): bounds only.
        _ if !strict => return Ok(()),
        _ => return Err(VirtioError::Csum),
    };
    if off != want_off || start + hdr > len {
        return Err(VirtioError::Csum);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
