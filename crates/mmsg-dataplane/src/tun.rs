//! The TUN device `mms0`: inter-branch prefixes are routed into it, `mmsg` reads their packets and
//! writes the packets that arrive from other branches (seed 000 §II-B, DESIGN §2).
//!
//! Opened with `IFF_TUN | IFF_NO_PI | IFF_VNET_HDR` and `TUNSETOFFLOAD` (checksum, TSO, USO), so
//! the kernel hands over GSO super-packets (up to 64 KiB) with a 10-byte `virtio_net_hdr` in front,
//! which travel whole in one `IpVirtio` frame. When the kernel refuses the offload, the device is
//! reopened without the virtio header and carries plain packets (logged once).
//!
//! Two backends behind the same API, chosen at start-up by `MMSG_TUN_BACKEND` ([`TunBackend`]):
//! `own` (default: our ioctls in `crate::sys`, reads straight into uninitialised arena space) and
//! `tun-rs` (the `tun-rs` crate, `crate::tun_rs`). docs/mmsg.md "TUN backend: tun-rs vs own
//! ioctls" has the side-by-side numbers behind the default: with offload both are within noise,
//! without it tun-rs carries half (it reads only into zeroed memory, 64 KiB per packet).

use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice, Write};
use std::os::unix::fs::OpenOptionsExt;

use bytes::BytesMut;
use mpa::framing::VIRTIO_NET_HDR_LEN;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tracing::{info, warn};

use crate::sys;
use crate::tun_rs::TunRsDevice;

/// Largest packet a TUN read can return: a 64 KiB GSO super-packet plus its virtio header.
pub const MAX_TUN_READ: usize = mpa::framing::MAX_PAYLOAD_LEN as usize;

/// An all-zero virtio header (`VIRTIO_NET_HDR_GSO_NONE`, no checksum offload), written in front of
/// plain `Ip` frames when the device has the header.
const ZERO_VNET_HDR: [u8; VIRTIO_NET_HDR_LEN] = [0; VIRTIO_NET_HDR_LEN];

/// Which code opens and drives the TUN device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TunBackend {
    /// Our own ioctls (`crate::sys`): `TUNSETIFF`, `TUNSETVNETHDRSZ`, `TUNSETOFFLOAD`.
    #[default]
    Own,
    /// The `tun-rs` crate (`crate::tun_rs`).
    TunRs,
}

impl TunBackend {
    /// The environment variable that selects the backend: `own` (default) or `tun-rs`.
    pub const ENV: &'static str = "MMSG_TUN_BACKEND";

    /// Parses a backend name (`own`, `tun-rs`).
    pub fn parse(s: &str) -> io::Result<TunBackend> {
        match s.trim() {
            "" | "own" => Ok(TunBackend::Own),
            "tun-rs" | "tun_rs" => Ok(TunBackend::TunRs),
            other => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}={other:?}: expected \"own\" or \"tun-rs\"", Self::ENV),
            )),
        }
    }

    /// The backend named by [`Self::ENV`], [`TunBackend::Own`] when it is unset.
    pub fn from_env() -> io::Result<TunBackend> {
        std::env::var(Self::ENV).map_or(Ok(TunBackend::Own), |v| Self::parse(&v))
    }

    /// The name `parse` accepts and the logs show.
    pub fn as_str(self) -> &'static str {
        match self {
            TunBackend::Own => "own",
            TunBackend::TunRs => "tun-rs",
        }
    }
}

/// The device behind [`Tun`], by backend.
#[derive(Debug)]
enum Dev {
    Own(AsyncFd<File>),
    TunRs(TunRsDevice),
}

/// The TUN device.
#[derive(Debug)]
pub struct Tun {
    dev: Dev,
    name: String,
    offload: bool,
}

fn open_dev() -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open("/dev/net/tun")
}

impl Tun {
    /// Opens (creating) the device `name` with the backend [`TunBackend::from_env`] names; with
    /// `want_offload`, tries the virtio header and GSO first and falls back to plain packets when
    /// the kernel refuses.
    pub fn open(name: &str, want_offload: bool) -> io::Result<Tun> {
        Self::open_with(TunBackend::from_env()?, name, want_offload)
    }

    /// [`Tun::open`] with an explicit backend.
    pub fn open_with(backend: TunBackend, name: &str, want_offload: bool) -> io::Result<Tun> {
        if backend == TunBackend::TunRs {
            let (dev, name, offload) = crate::tun_rs::open(name, want_offload)?;
            return Ok(Tun {
                dev: Dev::TunRs(dev),
                name,
                offload,
            });
        }
        if want_offload {
            match Self::open_offload(name) {
                Ok(t) => return Ok(t),
                Err(e) => warn!(
                    tun = name,
                    error = %e,
                    "TUN offload (IFF_VNET_HDR + TUNSETOFFLOAD) refused; carrying plain packets"
                ),
            }
        }
        let f = open_dev()?;
        let name = sys::tun_set_iff(&f, name, sys::IFF_TUN | sys::IFF_NO_PI)?;
        info!(tun = %name, offload = false, "TUN device open");
        Ok(Tun {
            dev: Dev::Own(sys::async_file(f)?),
            name,
            offload: false,
        })
    }

    fn open_offload(name: &str) -> io::Result<Tun> {
        let f = open_dev()?;
        let name = sys::tun_set_iff(&f, name, sys::IFF_TUN | sys::IFF_NO_PI | sys::IFF_VNET_HDR)?;
        sys::tun_set_vnet_hdr_sz(&f, VIRTIO_NET_HDR_LEN as i32)?;
        let tso = sys::TUN_F_CSUM | sys::TUN_F_TSO4 | sys::TUN_F_TSO6 | sys::TUN_F_TSO_ECN;
        let flags = match sys::tun_set_offload(&f, tso | sys::TUN_F_USO4 | sys::TUN_F_USO6) {
            Ok(()) => "csum,tso4,tso6,tso_ecn,uso4,uso6",
            Err(_) => {
                sys::tun_set_offload(&f, tso)?;
                "csum,tso4,tso6,tso_ecn"
            }
        };
        info!(tun = %name, offload = flags, "TUN device open with virtio header");
        Ok(Tun {
            dev: Dev::Own(sys::async_file(f)?),
            name,
            offload: true,
        })
    }

    /// The interface name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether packets carry a virtio header.
    pub fn offload(&self) -> bool {
        self.offload
    }

    /// Reads one packet (with its virtio header when offload is on) and appends it to `buf`.
    pub async fn read_into(&self, buf: &mut BytesMut) -> io::Result<usize> {
        let fd = match &self.dev {
            Dev::Own(fd) => fd,
            Dev::TunRs(d) => return d.read_into(buf).await,
        };
        loop {
            let mut guard = fd.readable().await?;
            match guard.try_io(|fd| sys::read_into_spare(fd, buf, MAX_TUN_READ)) {
                Ok(r) => return r,
                Err(_would_block) => continue,
            }
        }
    }

    /// Non-blocking read of one more packet (batching after a wake-up); `Ok(None)` when empty.
    pub fn try_read_into(&self, buf: &mut BytesMut) -> io::Result<Option<usize>> {
        let res = match &self.dev {
            Dev::Own(fd) => fd.try_io(Interest::READABLE, |fd| {
                sys::read_into_spare(fd, buf, MAX_TUN_READ)
            }),
            Dev::TunRs(d) => d.try_read_into(buf),
        };
        match res {
            Ok(n) => Ok(Some(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes one packet: `vnet` is its virtio header (for `IpVirtio` frames) or `None`. Returns an
    /// error for this packet only; the caller counts it.
    pub fn write_packet(&self, vnet: Option<&[u8]>, ip: &[u8]) -> io::Result<()> {
        let hdr = match (self.offload, vnet) {
            (true, v) => Some(v.unwrap_or(&ZERO_VNET_HDR)),
            (false, None) => None,
            (false, Some(_)) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "virtio frame but TUN has no offload",
                ))
            }
        };
        // TUN writes never block for long: a full queue (EAGAIN) is a per-packet drop.
        match (&self.dev, hdr) {
            (Dev::Own(fd), Some(h)) => fd
                .get_ref()
                .write_vectored(&[IoSlice::new(h), IoSlice::new(ip)])
                .map(|_| ()),
            (Dev::Own(fd), None) => fd.get_ref().write(ip).map(|_| ()),
            (Dev::TunRs(d), h) => d.write(h, ip),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn backend_names() {
        assert_eq!(TunBackend::parse("own").unwrap(), TunBackend::Own);
        assert_eq!(TunBackend::parse("").unwrap(), TunBackend::Own);
        assert_eq!(TunBackend::parse("tun-rs").unwrap(), TunBackend::TunRs);
        assert!(TunBackend::parse("tunrs").is_err());
        for b in [TunBackend::Own, TunBackend::TunRs] {
            assert_eq!(TunBackend::parse(b.as_str()).unwrap(), b);
        }
    }
}
