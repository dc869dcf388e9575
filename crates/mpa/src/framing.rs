//! IPoMP framing: the connection hello and the tunnel frame codec (DESIGN §3.2, `docs/wire.md`).
//!
//! Seed 000 §II-B: the MPA of the source branch encapsulates each inner IP packet as MPTCP payload and
//! the MPA of the destination branch decapsulates it. MPTCP is a byte stream, so packets need framing.
//!
//! A connection starts with one [`Hello`] from the connecting side, then carries frames in both
//! directions. Each frame is a fixed 12-byte [`FrameHeader`] (u32 payload length, type, class, flags,
//! per-flow sequence number) followed by the payload.
//!
//! Call order (receiver): buffer socket bytes in a caller-owned [`BytesMut`] and call
//! [`InboundConnection::decode`] in a loop until `Ok(None)` ("need more bytes"): it yields the hello
//! once ([`Hello::decode`] + [`Hello::check_incoming`]), then frames ([`Deframer::decode`];
//! [`Deframer::wanted`] tells how many bytes the next one needs). An `Err` is the peer's fault: count
//! it and close the connection.
//!
//! Call order (sender): read the packet from TUN into a buffer at offset [`FRAME_HEADER_LEN`], then
//! [`encode_header_in_place`] writes the header in front of it: no copy of the payload. Control and
//! keepalive frames use [`encode_frame`].
//!
//! Decoders accept any bytes and never panic (STYLE §3): every length is checked before it is used,
//! the maximum payload length is checked from the header alone (before the payload is buffered), and a
//! frame is returned only when complete, so a partial packet never reaches TUN.

use bytes::BufMut;
pub use bytes::{Bytes, BytesMut};
use thiserror::Error;

use crate::{BranchId, Class, PathGroupId};

/// The hello magic, "MMSH" (0x4D4D5348).
pub const HELLO_MAGIC: [u8; 4] = *b"MMSH";
/// The only hello (and framing) version this crate speaks.
pub const HELLO_VERSION: u8 = 0x01;
/// Bytes of the hello before the authentication field.
pub const HELLO_FIXED_LEN: usize = 12;
/// Largest authentication field a hello may carry. Room for a key id, nonce and MAC or a small
/// signature of the later security issue; bounding it keeps the buffered hello ≤ 524 bytes.
pub const MAX_HELLO_AUTH_LEN: usize = 512;
/// Most tunnel connections per (remote branch, path group, class): the hello's connection index
/// is below it (`connections_per_group`, docs/mmsg.md "Connections per path group").
pub const MAX_CONNECTIONS_PER_GROUP: u8 = 8;
/// Largest hello on the wire.
pub const MAX_HELLO_LEN: usize = HELLO_FIXED_LEN + MAX_HELLO_AUTH_LEN;

/// Bytes of a frame header.
pub const FRAME_HEADER_LEN: usize = 12;
/// Bytes of the `struct virtio_net_hdr` carried by [`FrameType::IpVirtio`] frames (legacy layout,
/// the TUN default with `IFF_VNET_HDR`; the driver sets `TUNSETVNETHDRSZ` to this).
pub const VIRTIO_NET_HDR_LEN: usize = 10;
/// Largest IP packet carried: the largest IPv6 packet without a jumbogram, 40 + 65,535 = 65,575
/// bytes (IPv4 tops out at 65,535). A GSO super-packet is at most this too (Linux: 64 KiB).
pub const MAX_IP_PACKET_LEN: usize = 40 + 65_535;
/// Largest frame payload of any type: a GSO super-packet behind its virtio header (65,585 B), which
/// does not fit a u16: hence the u32 length field (DESIGN §3.2). Also the most one frame makes a
/// receiver buffer: [`MAX_FRAME_LEN`] = 65,597 B per connection.
pub const MAX_PAYLOAD_LEN: u32 = (MAX_IP_PACKET_LEN + VIRTIO_NET_HDR_LEN) as u32;
/// Largest control frame payload: control messages (stats, path-group hints) are small; capping them
/// keeps a misbehaving peer from making us buffer 64 KiB of control data.
pub const MAX_CONTROL_LEN: u32 = 4_096;
/// Largest encoded frame.
pub const MAX_FRAME_LEN: usize = FRAME_HEADER_LEN + MAX_PAYLOAD_LEN as usize;

/// Flag bit 0: the sequence number field is meaningful (a flow striped over several connections).
pub const FLAG_SEQ: u8 = 0x01;
/// Flag bits a version-1 peer may set. Others change meaning and cannot be skipped: they are errors.
const KNOWN_FLAGS: u8 = FLAG_SEQ;

/// A malformed or unacceptable hello. Always the peer's fault: count it and close the connection
/// without reading further.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum HelloError {
    /// The first bytes are not "MMSH" (detected as soon as the first differing byte arrives).
    #[error("bad hello magic")]
    BadMagic,
    /// A version this build does not speak.
    #[error("unsupported hello version {0}")]
    UnsupportedVersion(u8),
    /// A branch id outside 1..=15.
    #[error("invalid branch id {0} in hello")]
    InvalidBranch(u8),
    /// Source and destination branch are the same.
    #[error("hello source and destination branch are both {0}")]
    SameBranch(u8),
    /// A path group id outside 0..=15.
    #[error("invalid path group {0} in hello")]
    InvalidPathGroup(u8),
    /// A class byte other than Type I (1) or Type II (2).
    #[error("invalid class {0:#04x} in hello")]
    InvalidClass(u8),
    /// The connection index (byte 9, reserved and zero before pools of connections) is not
    /// below [`MAX_CONNECTIONS_PER_GROUP`].
    #[error("hello connection index {0} is not below {MAX_CONNECTIONS_PER_GROUP}")]
    InvalidIndex(u8),
    /// The authentication field is longer than [`MAX_HELLO_AUTH_LEN`].
    #[error("hello authentication field of {0} bytes exceeds {MAX_HELLO_AUTH_LEN}")]
    AuthTooLong(u16),
    /// Policy ([`Hello::check_incoming`]): the hello is for another branch.
    #[error("hello for branch {got}, this is branch {own}")]
    WrongDestination {
        /// The destination branch in the hello.
        got: u8,
        /// Our own branch id.
        own: u8,
    },
    /// Policy ([`InboundConnection::on_port`]): the hello names another path group than the port the
    /// connection was accepted on (`0xA00G`).
    #[error("hello for path group {got} on the port of path group {port}")]
    WrongPathGroup {
        /// The path group in the hello.
        got: u8,
        /// The path group of the accepting port.
        port: u8,
    },
    /// Policy ([`Hello::check_incoming`]): a non-empty authentication field, but no scheme is
    /// defined yet (security issue), so it cannot be verified.
    #[error("hello carries {0} bytes of authentication, no scheme is configured")]
    AuthNotSupported(usize),
}

/// A frame that violates the wire format. Always the peer's fault (or our TUN's, when raised by the
/// encoder through [`EncodeError::InvalidPayload`]): count it and close the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum FrameError {
    /// The payload length exceeds the limit of this frame type (checked from the header alone).
    #[error("frame type {frame_type:#04x} payload of {len} bytes exceeds {max}")]
    Oversize {
        /// The frame type byte.
        frame_type: u8,
        /// The payload length announced in the header.
        len: u32,
        /// The limit for this type.
        max: u32,
    },
    /// A payload shorter than its type requires.
    #[error("frame type {frame_type:#04x} payload of {len} bytes is shorter than {min}")]
    TooShort {
        /// The frame type byte.
        frame_type: u8,
        /// The payload length.
        len: u32,
        /// The minimum for this type.
        min: u32,
    },
    /// A class byte other than Type I (1) or Type II (2).
    #[error("invalid class {0:#04x} in frame")]
    InvalidClass(u8),
    /// Flag bits this version does not know.
    #[error("unknown frame flags {0:#04x}")]
    UnknownFlags(u8),
    /// The reserved byte is not zero.
    #[error("reserved frame byte is {0:#04x}, not 0")]
    Reserved(u8),
    /// A non-zero sequence number without [`FLAG_SEQ`] (the encoding would not be canonical).
    #[error("sequence number {0} without the sequence flag")]
    SeqWithoutFlag(u32),
    /// A keepalive carrying a payload or a sequence number.
    #[error("keepalive with payload or sequence number")]
    BadKeepalive,
    /// The packet does not start with IP version 4 or 6.
    #[error("payload is not an IP packet (first byte {0:#04x})")]
    NotIp(u8),
    /// The IP header's own length disagrees with the frame (framing desync or a truncated packet).
    #[error("IP header says {ip_len} bytes, frame carries {frame_len}")]
    IpLengthMismatch {
        /// The length derived from the IP header.
        ip_len: u32,
        /// The length of the packet in the frame.
        frame_len: u32,
    },
}

/// Our misuse of the encoder (a bug or a bad packet from TUN), never the peer's fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// The buffer is too short to hold the header (in-place encoding needs [`FRAME_HEADER_LEN`]
    /// reserved bytes in front of the payload).
    #[error("buffer of {0} bytes cannot hold a frame header")]
    NoHeaderRoom(usize),
    /// Type III has no wire value: it is never tunnelled.
    #[error("class {0} is never tunnelled")]
    NotTunnelled(Class),
    /// The payload would be rejected by the peer's decoder (so it is dropped here, not sent).
    #[error("invalid payload: {0}")]
    InvalidPayload(FrameError),
    /// The payload does not fit the length field or the size limit.
    #[error("payload of {0} bytes is too large")]
    TooLarge(usize),
    /// The hello authentication field is longer than [`MAX_HELLO_AUTH_LEN`].
    #[error("hello authentication field of {0} bytes exceeds {MAX_HELLO_AUTH_LEN}")]
    AuthTooLong(usize),
    /// A hello connection index not below [`MAX_CONNECTIONS_PER_GROUP`].
    #[error("hello connection index {0} is not below {MAX_CONNECTIONS_PER_GROUP}")]
    InvalidIndex(u8),
    /// A hello whose source and destination are the same branch.
    #[error("hello source and destination branch are both {0}")]
    SameBranch(BranchId),
}

/// The connection hello, sent once by the connecting MPA (DESIGN §3.2, `docs/wire.md`).
///
/// ```text
///  0               1               2               3
/// +---------------+---------------+---------------+---------------+
/// |                  magic "MMSH" (0x4D4D5348)                    |
/// +---------------+---------------+---------------+---------------+
/// |  version (1)  |  src branch   |  dst branch   |  path group   |
/// +---------------+---------------+---------------+---------------+
/// |     class     |    index      |   auth length (u16, BE)       |
/// +---------------+---------------+---------------+---------------+
/// |        authentication (auth length bytes, currently 0) ...
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The connecting branch.
    pub src_branch: BranchId,
    /// The accepting branch.
    pub dst_branch: BranchId,
    /// The path group of this connection (also the last nibble of the outer TCP port).
    pub path_group: PathGroupId,
    /// The class this connection carries (Type I or Type II).
    pub class: Class,
    /// Which of the (remote branch, path group, class)'s connections this is, 0 for the first
    /// (`connections_per_group`, docs/mmsg.md "Connections per path group"); below
    /// [`MAX_CONNECTIONS_PER_GROUP`]. The byte was reserved (zero) before: a gateway of then
    /// accepts index 0 only.
    pub index: u8,
    /// The authentication field, reserved for the security issue: length-prefixed, at most
    /// [`MAX_HELLO_AUTH_LEN`] bytes, empty in this version (see [`Hello::check_incoming`]).
    pub auth: Vec<u8>,
}

impl Hello {
    /// Bytes this hello takes on the wire.
    pub fn encoded_len(&self) -> usize {
        HELLO_FIXED_LEN + self.auth.len()
    }

    /// Appends the hello to `out` and returns the number of bytes written.
    pub fn encode(&self, out: &mut BytesMut) -> Result<usize, EncodeError> {
        let class = self
            .class
            .wire()
            .ok_or(EncodeError::NotTunnelled(self.class))?;
        if self.src_branch == self.dst_branch {
            return Err(EncodeError::SameBranch(self.src_branch));
        }
        let auth_len = match u16::try_from(self.auth.len()) {
            Ok(n) if usize::from(n) <= MAX_HELLO_AUTH_LEN => n,
            _ => return Err(EncodeError::AuthTooLong(self.auth.len())),
        };
        out.reserve(self.encoded_len());
        out.put_slice(&HELLO_MAGIC);
        out.put_u8(HELLO_VERSION);
        out.put_u8(self.src_branch.get());
        out.put_u8(self.dst_branch.get());
        out.put_u8(self.path_group.get());
        out.put_u8(class);
        if self.index >= MAX_CONNECTIONS_PER_GROUP {
            return Err(EncodeError::InvalidIndex(self.index));
        }
        out.put_u8(self.index);
        out.put_u16(auth_len);
        out.put_slice(&self.auth);
        Ok(self.encoded_len())
    }

    /// Parses a hello from the start of `buf`.
    ///
    /// `Ok(None)`: need more bytes. `Ok(Some((hello, n)))`: the hello took the first `n` bytes (frames
    /// follow). `Err`: close the connection. Wrong magic or version is reported as soon as the
    /// offending byte arrives, so junk is never buffered.
    pub fn decode(buf: &[u8]) -> Result<Option<(Hello, usize)>, HelloError> {
        let seen = buf.len().min(HELLO_MAGIC.len());
        if buf.get(..seen) != HELLO_MAGIC.get(..seen) {
            return Err(HelloError::BadMagic);
        }
        if let Some(&v) = buf.get(4) {
            if v != HELLO_VERSION {
                return Err(HelloError::UnsupportedVersion(v));
            }
        }
        let Some(fixed) = buf.get(..HELLO_FIXED_LEN) else {
            return Ok(None);
        };
        let &[_, _, _, _, _, src, dst, pg, class, index, l0, l1] = fixed else {
            return Ok(None);
        };
        let src_branch = BranchId::new(src).map_err(|_| HelloError::InvalidBranch(src))?;
        let dst_branch = BranchId::new(dst).map_err(|_| HelloError::InvalidBranch(dst))?;
        if src_branch == dst_branch {
            return Err(HelloError::SameBranch(src));
        }
        let path_group = PathGroupId::new(pg).map_err(|_| HelloError::InvalidPathGroup(pg))?;
        let class = Class::from_wire(class).ok_or(HelloError::InvalidClass(class))?;
        if index >= MAX_CONNECTIONS_PER_GROUP {
            return Err(HelloError::InvalidIndex(index));
        }
        let auth_len = u16::from_be_bytes([l0, l1]);
        if usize::from(auth_len) > MAX_HELLO_AUTH_LEN {
            return Err(HelloError::AuthTooLong(auth_len));
        }
        let total = HELLO_FIXED_LEN + usize::from(auth_len);
        let Some(auth) = buf.get(HELLO_FIXED_LEN..total) else {
            return Ok(None);
        };
        let hello = Hello {
            src_branch,
            dst_branch,
            path_group,
            class,
            index,
            auth: auth.to_vec(),
        };
        Ok(Some((hello, total)))
    }

    /// The accepting side's policy: the hello is for `own` branch and carries no authentication (no
    /// scheme exists yet; the security issue replaces this check with verification).
    pub fn check_incoming(&self, own: BranchId) -> Result<(), HelloError> {
        if self.dst_branch != own {
            return Err(HelloError::WrongDestination {
                got: self.dst_branch.get(),
                own: own.get(),
            });
        }
        if !self.auth.is_empty() {
            return Err(HelloError::AuthNotSupported(self.auth.len()));
        }
        Ok(())
    }
}

/// The frame type byte. Unknown types round-trip (STYLE §3) so that a newer peer's frames can be
/// skipped whole by length; the driver counts and ignores them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameType {
    /// 0x01: one IP packet (IPv4 or IPv6), whose header length matches the payload length.
    Ip,
    /// 0x02: a 10-byte `virtio_net_hdr` then an IP packet, possibly a GSO super-packet (≤ 64 KiB).
    IpVirtio,
    /// 0x03: keepalive, no payload, no sequence number.
    Keepalive,
    /// 0x04: control message, opaque payload of at most [`MAX_CONTROL_LEN`] bytes.
    Control,
    /// Any other value, kept verbatim.
    Unknown(u8),
}

impl FrameType {
    /// The wire byte.
    pub fn to_u8(self) -> u8 {
        match self {
            FrameType::Ip => 0x01,
            FrameType::IpVirtio => 0x02,
            FrameType::Keepalive => 0x03,
            FrameType::Control => 0x04,
            FrameType::Unknown(b) => b,
        }
    }

    /// The type of a wire byte.
    pub fn from_u8(b: u8) -> Self {
        match b {
            0x01 => FrameType::Ip,
            0x02 => FrameType::IpVirtio,
            0x03 => FrameType::Keepalive,
            0x04 => FrameType::Control,
            other => FrameType::Unknown(other),
        }
    }

    /// The largest payload of this type.
    pub fn max_payload_len(self) -> u32 {
        match self {
            FrameType::Keepalive => 0,
            FrameType::Control => MAX_CONTROL_LEN,
            FrameType::Ip => MAX_IP_PACKET_LEN as u32,
            FrameType::IpVirtio | FrameType::Unknown(_) => MAX_PAYLOAD_LEN,
        }
    }
}

/// A frame header (DESIGN §3.2, `docs/wire.md`).
///
/// ```text
///  0               1               2               3
/// +---------------+---------------+---------------+---------------+
/// |                 payload length (u32, BE)                      |
/// +---------------+---------------+---------------+---------------+
/// |  frame type   |     class     |     flags     | reserved (0)  |
/// +---------------+---------------+---------------+---------------+
/// |           per-flow sequence number (u32, BE)                  |
/// +---------------+---------------+---------------+---------------+
/// |                 payload (payload length bytes) ...
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// What the payload is.
    pub frame_type: FrameType,
    /// The class of the inner packet (Type I or Type II).
    pub class: Class,
    /// The per-flow sequence number, present ([`FLAG_SEQ`]) when a flow is striped over several
    /// connections and the receiver must resequence.
    pub seq: Option<u32>,
    /// Bytes of payload after the header.
    pub payload_len: u32,
}

impl FrameHeader {
    /// Bytes of header plus payload.
    pub fn frame_len(&self) -> usize {
        FRAME_HEADER_LEN + self.payload_len as usize
    }

    /// Writes the header into the first [`FRAME_HEADER_LEN`] bytes of `dst`. Checks everything the
    /// header alone determines (class, size limit, keepalive rules), not the payload.
    pub fn write(&self, dst: &mut [u8]) -> Result<(), EncodeError> {
        let len = dst.len();
        let Some(hdr) = dst.get_mut(..FRAME_HEADER_LEN) else {
            return Err(EncodeError::NoHeaderRoom(len));
        };
        let class = self
            .class
            .wire()
            .ok_or(EncodeError::NotTunnelled(self.class))?;
        check_header_limits(self.frame_type, self.payload_len, self.seq.is_some())
            .map_err(EncodeError::InvalidPayload)?;
        let (flags, seq) = match self.seq {
            Some(s) => (FLAG_SEQ, s),
            None => (0, 0),
        };
        let l = self.payload_len.to_be_bytes();
        let s = seq.to_be_bytes();
        hdr.copy_from_slice(&[
            l[0],
            l[1],
            l[2],
            l[3],
            self.frame_type.to_u8(),
            class,
            flags,
            0,
            s[0],
            s[1],
            s[2],
            s[3],
        ]);
        Ok(())
    }

    /// Parses and checks a header from the start of `buf`: `Ok(None)` until [`FRAME_HEADER_LEN`]
    /// bytes are there. The size limit is checked here, before any payload is buffered.
    pub fn decode(buf: &[u8]) -> Result<Option<FrameHeader>, FrameError> {
        let Some(&[l0, l1, l2, l3, ty, class, flags, reserved, s0, s1, s2, s3]) =
            buf.get(..FRAME_HEADER_LEN)
        else {
            return Ok(None);
        };
        let payload_len = u32::from_be_bytes([l0, l1, l2, l3]);
        let frame_type = FrameType::from_u8(ty);
        let class = Class::from_wire(class).ok_or(FrameError::InvalidClass(class))?;
        if flags & !KNOWN_FLAGS != 0 {
            return Err(FrameError::UnknownFlags(flags));
        }
        if reserved != 0 {
            return Err(FrameError::Reserved(reserved));
        }
        let seq_raw = u32::from_be_bytes([s0, s1, s2, s3]);
        let seq = if flags & FLAG_SEQ != 0 {
            Some(seq_raw)
        } else if seq_raw != 0 {
            return Err(FrameError::SeqWithoutFlag(seq_raw));
        } else {
            None
        };
        check_header_limits(frame_type, payload_len, seq.is_some())?;
        Ok(Some(FrameHeader {
            frame_type,
            class,
            seq,
            payload_len,
        }))
    }
}

/// The checks that depend on the header alone.
fn check_header_limits(ty: FrameType, len: u32, has_seq: bool) -> Result<(), FrameError> {
    if ty == FrameType::Keepalive && (len != 0 || has_seq) {
        return Err(FrameError::BadKeepalive);
    }
    let max = ty.max_payload_len();
    if len > max {
        return Err(FrameError::Oversize {
            frame_type: ty.to_u8(),
            len,
            max,
        });
    }
    Ok(())
}

/// The checks on a complete payload of type `ty`. Shared by the encoder and the decoder, so whatever
/// we send the peer accepts, and whatever we accept could have been sent.
pub fn check_payload(ty: FrameType, payload: &[u8]) -> Result<(), FrameError> {
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    match ty {
        FrameType::Ip => check_ip(ty, payload, true),
        FrameType::IpVirtio => match payload.get(VIRTIO_NET_HDR_LEN..) {
            Some(ip) => check_ip(ty, ip, false),
            None => Err(FrameError::TooShort {
                frame_type: ty.to_u8(),
                len,
                min: VIRTIO_NET_HDR_LEN as u32 + 1,
            }),
        },
        FrameType::Keepalive | FrameType::Control | FrameType::Unknown(_) => Ok(()),
    }
}

/// Checks that `ip` looks like a whole IP packet. With `exact`, the header's length field must match
/// the packet length (a GSO super-packet behind a virtio header may not, so it is not checked there).
fn check_ip(ty: FrameType, ip: &[u8], exact: bool) -> Result<(), FrameError> {
    let frame_len = u32::try_from(ip.len()).unwrap_or(u32::MAX);
    let Some(&first) = ip.first() else {
        return Err(FrameError::TooShort {
            frame_type: ty.to_u8(),
            len: 0,
            min: 1,
        });
    };
    let (min, ip_len) = match first >> 4 {
        4 => (20u32, be16(ip, 2).map(u32::from)),
        6 => (40u32, be16(ip, 4).map(|l| 40 + u32::from(l))),
        _ => return Err(FrameError::NotIp(first)),
    };
    if !exact {
        return Ok(());
    }
    if frame_len < min {
        return Err(FrameError::TooShort {
            frame_type: ty.to_u8(),
            len: frame_len,
            min,
        });
    }
    match ip_len {
        Some(ip_len) if ip_len == frame_len => Ok(()),
        other => Err(FrameError::IpLengthMismatch {
            ip_len: other.unwrap_or(0),
            frame_len,
        }),
    }
}

/// The big-endian u16 at `at`, if `buf` is long enough.
pub(crate) fn be16(buf: &[u8], at: usize) -> Option<u16> {
    let b = buf.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes(<[u8; 2]>::try_from(b).ok()?))
}

/// Writes a frame header in place: `buf` is [`FRAME_HEADER_LEN`] reserved bytes followed by the
/// payload (read from TUN straight behind the reserved room). The payload is checked with
/// [`check_payload`], so a malformed packet from TUN is refused here (drop and count it) instead of
/// making the peer close the connection. Returns the header written.
pub fn encode_header_in_place(
    buf: &mut [u8],
    frame_type: FrameType,
    class: Class,
    seq: Option<u32>,
) -> Result<FrameHeader, EncodeError> {
    let total = buf.len();
    let Some((hdr, payload)) = buf.split_at_mut_checked(FRAME_HEADER_LEN) else {
        return Err(EncodeError::NoHeaderRoom(total));
    };
    let payload_len =
        u32::try_from(payload.len()).map_err(|_| EncodeError::TooLarge(payload.len()))?;
    check_header_limits(frame_type, payload_len, seq.is_some())
        .map_err(EncodeError::InvalidPayload)?;
    check_payload(frame_type, payload).map_err(EncodeError::InvalidPayload)?;
    let header = FrameHeader {
        frame_type,
        class,
        seq,
        payload_len,
    };
    header.write(hdr)?;
    Ok(header)
}

/// Appends a whole frame (header and a copy of `payload`) to `out`; for keepalive and control
/// frames, tests and benches. Returns the number of bytes written.
pub fn encode_frame(
    frame_type: FrameType,
    class: Class,
    seq: Option<u32>,
    payload: &[u8],
    out: &mut BytesMut,
) -> Result<usize, EncodeError> {
    let payload_len =
        u32::try_from(payload.len()).map_err(|_| EncodeError::TooLarge(payload.len()))?;
    check_header_limits(frame_type, payload_len, seq.is_some())
        .map_err(EncodeError::InvalidPayload)?;
    check_payload(frame_type, payload).map_err(EncodeError::InvalidPayload)?;
    let header = FrameHeader {
        frame_type,
        class,
        seq,
        payload_len,
    };
    let mut hdr = [0u8; FRAME_HEADER_LEN];
    header.write(&mut hdr)?;
    out.reserve(header.frame_len());
    out.put_slice(&hdr);
    out.put_slice(payload);
    Ok(header.frame_len())
}

/// One complete, checked frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The header.
    pub header: FrameHeader,
    /// The payload, split off the receive buffer without copying.
    pub payload: Bytes,
}

impl Frame {
    /// For [`FrameType::IpVirtio`] frames, the virtio header and the IP packet; for [`FrameType::Ip`]
    /// frames, no virtio header and the packet; `None` for other types.
    pub fn ip_packet(&self) -> Option<(Option<&[u8]>, &[u8])> {
        match self.header.frame_type {
            FrameType::Ip => Some((None, &self.payload)),
            FrameType::IpVirtio => {
                let (v, ip) = self.payload.split_at_checked(VIRTIO_NET_HDR_LEN)?;
                Some((Some(v), ip))
            }
            _ => None,
        }
    }
}

/// The streaming frame decoder of one connection (after the hello).
///
/// Stateless apart from a sticky error: once a frame was invalid, the stream is desynchronised and
/// every later call returns the same error.
#[derive(Debug, Clone, Default)]
pub struct Deframer {
    error: Option<FrameError>,
}

impl Deframer {
    /// A decoder at a frame boundary.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the next complete frame off the front of `buf`.
    ///
    /// `Ok(None)`: need more bytes (nothing consumed). `Ok(Some(frame))`: the frame's bytes were
    /// split off `buf` without copying. `Err`: the stream is invalid; close the connection. Never
    /// panics and never returns part of a frame.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let header = match FrameHeader::decode(buf) {
            Ok(Some(h)) => h,
            Ok(None) => return Ok(None),
            Err(e) => return Err(self.fail(e)),
        };
        let Some(payload) = buf.get(FRAME_HEADER_LEN..header.frame_len()) else {
            return Ok(None);
        };
        if let Err(e) = check_payload(header.frame_type, payload) {
            return Err(self.fail(e));
        }
        let mut frame = buf.split_to(header.frame_len());
        let payload = frame.split_off(FRAME_HEADER_LEN).freeze();
        Ok(Some(Frame { header, payload }))
    }

    /// How many more bytes `buf` needs before [`Deframer::decode`] can return the next frame (0 when
    /// it can now). Lets the driver reserve exactly; errors as `decode`.
    pub fn wanted(&mut self, buf: &[u8]) -> Result<usize, FrameError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        match FrameHeader::decode(buf) {
            Ok(Some(h)) => Ok(h.frame_len().saturating_sub(buf.len())),
            Ok(None) => Ok(FRAME_HEADER_LEN - buf.len()),
            Err(e) => Err(self.fail(e)),
        }
    }

    fn fail(&mut self, e: FrameError) -> FrameError {
        self.error = Some(e);
        e
    }
}

/// Why an inbound connection must be closed (count per variant; always the peer's fault).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum InboundError {
    /// The hello was malformed or not acceptable.
    #[error("hello: {0}")]
    Hello(#[from] HelloError),
    /// A frame was malformed.
    #[error("frame: {0}")]
    Frame(#[from] FrameError),
}

/// What an inbound connection yielded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound {
    /// The peer's hello, accepted by [`Hello::check_incoming`]; frames follow.
    Hello(Hello),
    /// A complete frame.
    Frame(Frame),
}

/// The receive side of one accepted connection: first the hello, then frames. Sticky on error: once
/// an `Err` was returned the connection must be closed, and every later call returns it again (the
/// stream is never read further).
#[derive(Debug, Clone)]
pub struct InboundConnection {
    own: BranchId,
    port_group: Option<PathGroupId>,
    hello: Option<Hello>,
    deframer: Deframer,
    error: Option<InboundError>,
}

impl InboundConnection {
    /// A connection accepted by branch `own` (any path group).
    pub fn new(own: BranchId) -> Self {
        InboundConnection {
            own,
            port_group: None,
            hello: None,
            deframer: Deframer::new(),
            error: None,
        }
    }

    /// A connection accepted on TCP port `local_port` of branch `own`: the hello must also name
    /// the path group of that port (`0xA00G`, DESIGN §3.1). `None` if the port is not an MPA port
    /// of `own`.
    pub fn on_port(own: BranchId, local_port: u16) -> Option<Self> {
        let group = PathGroupId::new(u8::try_from(local_port & 0x000F).ok()?).ok()?;
        if mms_types::listen_port(own, group) != local_port {
            return None;
        }
        Some(InboundConnection {
            port_group: Some(group),
            ..Self::new(own)
        })
    }

    /// The accepted hello, once it arrived.
    pub fn hello(&self) -> Option<&Hello> {
        self.hello.as_ref()
    }

    /// Takes the next hello or frame off the front of `buf` (socket bytes appended by the driver).
    /// `Ok(None)`: need more bytes.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Inbound>, InboundError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let result = if self.hello.is_some() {
            self.deframer
                .decode(buf)
                .map(|f| f.map(Inbound::Frame))
                .map_err(InboundError::from)
        } else {
            self.decode_hello(buf)
        };
        if let Err(e) = result {
            self.error = Some(e);
        }
        result
    }

    fn decode_hello(&mut self, buf: &mut BytesMut) -> Result<Option<Inbound>, InboundError> {
        let Some((hello, n)) = Hello::decode(buf)? else {
            return Ok(None);
        };
        hello.check_incoming(self.own)?;
        if let Some(port) = self.port_group {
            if hello.path_group != port {
                return Err(HelloError::WrongPathGroup {
                    got: hello.path_group.get(),
                    port: port.get(),
                }
                .into());
            }
        }
        let _ = buf.split_to(n);
        self.hello = Some(hello.clone());
        Ok(Some(Inbound::Hello(hello)))
    }
}

#[cfg(test)]
mod tests;

/// The invariants the fuzz target (`crates/mpa/fuzz`), the corpus replay test and the property tests
/// check on arbitrary input; panics (an assertion) when one is broken. Not for production use.
///
/// - [`Hello::decode`] never panics; a decoded hello re-encodes to exactly the bytes it consumed.
/// - [`Deframer::decode`] never panics; every frame re-encodes to exactly the bytes it consumed; the
///   same frames come out whether the bytes arrive at once or in chunks; `Ok(None)` consumes nothing.
#[doc(hidden)]
pub fn fuzz_check(data: &[u8]) {
    if let Ok(Some((hello, n))) = Hello::decode(data) {
        let mut out = BytesMut::new();
        let written = hello.encode(&mut out);
        assert_eq!(written, Ok(n), "hello length");
        assert_eq!(
            Some(&out[..]),
            data.get(..n),
            "hello re-encodes to its bytes"
        );
    }

    // All at once.
    let mut whole = BytesMut::from(data);
    let mut d = Deframer::new();
    let mut frames = Vec::new();
    let mut consumed = 0usize;
    let end = loop {
        let before = whole.len();
        match d.decode(&mut whole) {
            Ok(Some(f)) => {
                let mut out = BytesMut::new();
                let n = encode_frame(
                    f.header.frame_type,
                    f.header.class,
                    f.header.seq,
                    &f.payload,
                    &mut out,
                );
                assert_eq!(n, Ok(f.header.frame_len()), "frame length");
                assert_eq!(before - whole.len(), f.header.frame_len(), "bytes consumed");
                assert_eq!(
                    Some(&out[..]),
                    data.get(consumed..consumed + f.header.frame_len()),
                    "frame re-encodes to its bytes"
                );
                consumed += f.header.frame_len();
                frames.push(f);
            }
            Ok(None) => {
                assert_eq!(whole.len(), before, "need-more consumes nothing");
                assert!(
                    matches!(d.wanted(&whole), Ok(w) if w > 0),
                    "need-more wants bytes"
                );
                break Ok(());
            }
            Err(e) => break Err(e),
        }
    };

    // In chunks whose size the first byte picks.
    let chunk = usize::from(data.first().copied().unwrap_or(1)).max(1);
    let mut buf = BytesMut::new();
    let mut d = Deframer::new();
    let mut chunked = Vec::new();
    let mut chunked_end = Ok(());
    'outer: for piece in data.chunks(chunk) {
        buf.extend_from_slice(piece);
        loop {
            match d.decode(&mut buf) {
                Ok(Some(f)) => chunked.push(f),
                Ok(None) => break,
                Err(e) => {
                    chunked_end = Err(e);
                    break 'outer;
                }
            }
        }
    }
    assert_eq!(frames, chunked, "chunking does not change frames");
    assert_eq!(end, chunked_end, "chunking does not change the outcome");
}
