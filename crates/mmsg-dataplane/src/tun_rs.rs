//! The TUN device opened and driven by the `tun-rs` crate (the design card's choice, DESIGN §8),
//! selected at run time with `MMSG_TUN_BACKEND=tun-rs`; the default is our own ioctls
//! (`crate::tun` + `crate::sys`). Measured side by side in `cargo xtask bench tunnel`, see
//! docs/mmsg.md "TUN backend: tun-rs vs own ioctls".
//!
//! Same behaviour as the own backend: `IFF_TUN | IFF_NO_PI | IFF_VNET_HDR`, the 10-byte virtio
//! header read and written whole in front of the packet, GSO super-packets up to 64 KiB, and a
//! plain device when the kernel refuses the offload. Two differences are bridged here:
//! - tun-rs sets `TUN_F_CSUM | TSO4 | TSO6 (| USO4 | USO6)` but not `TUN_F_TSO_ECN`; we add it
//!   with `sys::tun_set_offload` on tun-rs's fd, so CWR-marked TCP bursts stay super-packets.
//! - tun-rs reads only into initialised memory (`&mut [u8]`; its uninitialised read is private on
//!   Linux), so every read first zeroes `MAX_TUN_READ` bytes of the arena's spare capacity.
//!
//! No `unsafe` here; tun-rs's own `unsafe` (ioctls, `AsyncFd::register`) does the rest.

use std::fmt;
use std::io::{self, IoSlice};

use bytes::BytesMut;
use tracing::{info, warn};

use crate::sys;
/// Largest packet a TUN read can return (the same bound as `crate::tun`, from the frame codec).
const MAX_TUN_READ: usize = mpa::framing::MAX_PAYLOAD_LEN as usize;

/// A TUN device opened by tun-rs and registered with tokio by it.
pub struct TunRsDevice {
    dev: ::tun_rs::AsyncDevice,
}

impl fmt::Debug for TunRsDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TunRsDevice")
            .field("tcp_gso", &self.dev.tcp_gso())
            .field("udp_gso", &self.dev.udp_gso())
            .finish()
    }
}

/// Opens (creating) the device `name` with tun-rs; with `want_offload`, the virtio header and GSO
/// first, falling back to plain packets when the kernel refuses (logged once). Returns the device,
/// the name the kernel used and whether packets carry the virtio header.
pub fn open(name: &str, want_offload: bool) -> io::Result<(TunRsDevice, String, bool)> {
    if want_offload {
        match open_offload(name) {
            Ok(t) => return Ok(t),
            Err(e) => warn!(
                tun = name,
                error = %e,
                backend = "tun-rs",
                "TUN offload (IFF_VNET_HDR + TUNSETOFFLOAD) refused; carrying plain packets"
            ),
        }
    }
    let dev = ::tun_rs::DeviceBuilder::new()
        .name(name)
        .offload(false)
        .build_async()?;
    let name = dev.name()?;
    info!(tun = %name, offload = false, backend = "tun-rs", "TUN device open");
    Ok((TunRsDevice { dev }, name, false))
}

fn open_offload(name: &str) -> io::Result<(TunRsDevice, String, bool)> {
    let dev = ::tun_rs::DeviceBuilder::new()
        .name(name)
        .offload(true)
        .build_async()?;
    if !dev.tcp_gso() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "tun-rs opened the device without IFF_VNET_HDR",
        ));
    }
    // tun-rs leaves out TUN_F_TSO_ECN; set the same mask as the own backend.
    let tso = sys::TUN_F_CSUM | sys::TUN_F_TSO4 | sys::TUN_F_TSO6 | sys::TUN_F_TSO_ECN;
    let uso = sys::TUN_F_USO4 | sys::TUN_F_USO6;
    let flags = if dev.udp_gso() && sys::tun_set_offload(&*dev, tso | uso).is_ok() {
        "csum,tso4,tso6,tso_ecn,uso4,uso6"
    } else {
        sys::tun_set_offload(&*dev, tso)?;
        "csum,tso4,tso6,tso_ecn"
    };
    let name = dev.name()?;
    info!(tun = %name, offload = flags, backend = "tun-rs", "TUN device open with virtio header");
    Ok((TunRsDevice { dev }, name, true))
}

impl TunRsDevice {
    /// Waits until the device is readable, then reads one packet (see [`Self::try_read_into`]).
    /// Cancel safe: `buf` is only touched once the device is readable, in one synchronous step.
    pub async fn read_into(&self, buf: &mut BytesMut) -> io::Result<usize> {
        loop {
            self.dev.readable().await?;
            match self.try_read_into(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => return r,
            }
        }
    }

    /// Non-blocking read of one packet appended to `buf`; `WouldBlock` when empty. tun-rs takes an
    /// initialised slice, so `MAX_TUN_READ` bytes are zeroed first and cut back to what was read.
    pub fn try_read_into(&self, buf: &mut BytesMut) -> io::Result<usize> {
        let start = buf.len();
        buf.resize(start + MAX_TUN_READ, 0);
        let res = match buf.get_mut(start..) {
            Some(spare) => self.dev.try_recv(spare),
            None => Ok(0),
        };
        let n = *res.as_ref().unwrap_or(&0);
        buf.truncate(start + n.min(MAX_TUN_READ));
        res
    }

    /// Writes one packet, `hdr` (the virtio header, when the device has one) in front of it, in one
    /// `writev`. A full queue (`WouldBlock`) is a per-packet drop, as in the own backend.
    pub fn write(&self, hdr: Option<&[u8]>, ip: &[u8]) -> io::Result<()> {
        match hdr {
            Some(h) => self
                .dev
                .try_send_vectored(&[IoSlice::new(h), IoSlice::new(ip)]),
            None => self.dev.try_send(ip),
        }
        .map(|_| ())
    }
}
