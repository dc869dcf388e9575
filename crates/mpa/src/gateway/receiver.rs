//! The delivery side of the gateway core: IP frames from every connection go to TUN, sequenced
//! (striped) ones through the [`Resequencer`] first, with the virtio-or-plain decision for the
//! local TUN device. Held by the driver behind one lock shared by the connection readers and the
//! resequencer's timer.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::time::Instant;

use bytes::Bytes;
use ipnet::IpNet;

use crate::config::Config;
use crate::BranchId;

use crate::classifier::{parse, FlowKey};
use crate::framing::{Frame, FrameType, VIRTIO_NET_HDR_LEN};
use crate::resequencer::{Params, Resequencer, Threshold};

use super::{Counters, PacketDrop};

/// Most bytes of packets waiting for [`Receiver::poll_tun_write`]. The caller drains after every
/// call, so at most one resequencer release (≤ [`crate::resequencer::MAX_TOTAL_BYTES`], 64 MiB)
/// plus one frame is ever pending; the bound only guards against a caller that does not drain.
pub const MAX_PENDING_TUN_BYTES: usize = crate::resequencer::MAX_TOTAL_BYTES + (1 << 20);

/// The all-zero virtio header (no checksum or GSO work) written before plain packets when the
/// local TUN device has offload on.
static ZERO_VNET_HDR: [u8; VIRTIO_NET_HDR_LEN] = [0; VIRTIO_NET_HDR_LEN];

/// One packet to write to TUN: `vnet` then `ip`, in one write. Both are slices of the frame's
/// buffer (no copy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunWrite {
    /// The virtio header: `Some` exactly when the local TUN device has offload on (all zero for a
    /// plain packet), `None` without offload.
    pub vnet: Option<Bytes>,
    /// The IP packet (a GSO super-packet when `vnet` asks for segmentation).
    pub ip: Bytes,
}

/// The virtio-or-plain decision for one received IP frame and a local TUN device with
/// (`offload`) or without `IFF_VNET_HDR`. Stateless, so a multi-task driver may decide
/// unsequenced frames (the bulk) in its readers without the [`Receiver`]'s lock; the
/// [`Receiver`] makes the same decision for what it releases. No copy: both parts are slices of
/// the frame's payload. An `Err` is not counted here.
pub fn tun_write(frame: Frame, offload: bool) -> Result<TunWrite, PacketDrop> {
    let p = frame.payload;
    match (frame.header.frame_type, offload) {
        (FrameType::Ip, true) => Ok(TunWrite {
            vnet: Some(Bytes::from_static(&ZERO_VNET_HDR)),
            ip: p,
        }),
        (FrameType::Ip, false) => Ok(TunWrite { vnet: None, ip: p }),
        (FrameType::IpVirtio, _) if p.len() < VIRTIO_NET_HDR_LEN => Err(PacketDrop::Malformed),
        (FrameType::IpVirtio, true) => Ok(TunWrite {
            vnet: Some(p.slice(..VIRTIO_NET_HDR_LEN)),
            ip: p.slice(VIRTIO_NET_HDR_LEN..),
        }),
        (FrameType::IpVirtio, false) => {
            // Without offload locally a header with no pending work is simply dropped; one
            // that asks for checksum or segmentation cannot be written.
            if p.iter().take(VIRTIO_NET_HDR_LEN).any(|&b| b != 0) {
                return Err(PacketDrop::VirtioUnsupported);
            }
            Ok(TunWrite {
                vnet: None,
                ip: p.slice(VIRTIO_NET_HDR_LEN..),
            })
        }
        // Keepalive, control, unknown: not for TUN.
        _ => Err(PacketDrop::Malformed),
    }
}

/// One prefix of [`AllowedSources`]: IPv4 or IPv6, as masked integers, so a lookup is a few
/// compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prefix {
    V4 { net: u32, mask: u32 },
    V6 { net: u128, mask: u128 },
}

/// Which inner source addresses each remote branch may send from (WireGuard's AllowedIPs): its
/// configured `lan_prefixes`. Built once per config ([`AllowedSources::from_config`]); checking a
/// packet allocates nothing and scans the sender's prefixes only (validation bounds them to
/// [`crate::config::MAX_PREFIXES_PER_BRANCH`]: at most 64 × 15 × 48 bytes ≈ 46 KiB for 15 remotes, plus 24 bytes per possible branch id). Validation keeps the remotes' prefixes disjoint from each other and
/// from ours, so a source address belongs to at most one branch.
///
/// IPv6: an inner IPv6 packet passes only when the sender's `lan_prefixes` include an IPv6 prefix
/// holding its source; a remote with IPv4 prefixes only may send IPv4 only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedSources {
    /// Indexed by branch id (1..=250, `BranchId::MAX`); index 0 unused.
    by_branch: Vec<Vec<Prefix>>,
}

impl Default for AllowedSources {
    fn default() -> Self {
        Self {
            by_branch: vec![Vec::new(); usize::from(BranchId::MAX) + 1],
        }
    }
}

impl AllowedSources {
    /// The table of a validated config's remotes.
    pub fn from_config(config: &Config) -> Self {
        let mut t = AllowedSources::default();
        for r in &config.remote {
            if let Some(v) = t.by_branch.get_mut(usize::from(r.id)) {
                v.clear();
                v.extend(r.lan_prefixes.iter().map(|p| match p {
                    IpNet::V4(n) => Prefix::V4 {
                        net: u32::from(n.network()),
                        mask: u32::from(n.netmask()),
                    },
                    IpNet::V6(n) => Prefix::V6 {
                        net: u128::from(n.network()),
                        mask: u128::from(n.netmask()),
                    },
                }));
            }
        }
        t
    }

    /// Whether `sender` may send a packet from `src`.
    pub fn allows(&self, sender: BranchId, src: IpAddr) -> bool {
        let Some(v) = self.by_branch.get(usize::from(sender.get())) else {
            return false;
        };
        v.iter().any(|p| match (p, src) {
            (Prefix::V4 { net, mask }, IpAddr::V4(a)) => u32::from(a) & mask == *net,
            (Prefix::V6 { net, mask }, IpAddr::V6(a)) => u128::from(a) & mask == *net,
            _ => false,
        })
    }

    /// Checks the inner packet `ip` received from `sender`: [`PacketDrop::Malformed`] when it has
    /// no IPv4/IPv6 source address, [`PacketDrop::SpoofedSource`] when the source is not in the
    /// sender's LAN prefixes.
    pub fn check(&self, sender: BranchId, ip: &[u8]) -> Result<(), PacketDrop> {
        let src = match ip.first().map(|b| b >> 4) {
            Some(4) => match ip.get(12..16) {
                Some(&[a, b, c, d]) => IpAddr::from([a, b, c, d]),
                _ => return Err(PacketDrop::Malformed),
            },
            Some(6) => match ip.get(8..24).and_then(|b| <[u8; 16]>::try_from(b).ok()) {
                Some(a) => IpAddr::from(a),
                None => return Err(PacketDrop::Malformed),
            },
            _ => return Err(PacketDrop::Malformed),
        };
        if self.allows(sender, src) {
            Ok(())
        } else {
            Err(PacketDrop::SpoofedSource)
        }
    }
}

/// The checks every IP frame from a peer passes once, before resequencing and TUN: its inner
/// source lies in `sender`'s LAN prefixes ([`AllowedSources`]) and its virtio header, if any,
/// asks for work that fits the packet ([`crate::virtio::validate`]). `sender` is the branch the
/// connection's hello (and, with TLS, its certificate) named. Not counted here.
pub fn admit(sources: &AllowedSources, sender: BranchId, frame: &Frame) -> Result<(), PacketDrop> {
    let (vnet, ip) = frame.ip_packet().ok_or(PacketDrop::Malformed)?;
    sources.check(sender, ip)?;
    if let Some(v) = vnet {
        crate::virtio::validate(v, ip).map_err(|_| PacketDrop::BadVirtio)?;
    }
    Ok(())
}

/// Delivery and resequencing of received IP frames.
#[derive(Debug)]
pub struct Receiver {
    reseq: Resequencer<FlowKey, Frame>,
    /// `[striping]` is configured here: sequenced frames are resequenced. Without it they pass
    /// in arrival order, as any frame (the seed's "without the resequencer" baseline).
    resequence: bool,
    offload: bool,
    out: VecDeque<TunWrite>,
    out_bytes: usize,
    counters: Counters,
    /// Flows the resequencer started on since the last [`Receiver::poll_new_flow`] (at most
    /// [`MAX_NEW_FLOWS`]; more are not reported).
    new_flows: VecDeque<FlowKey>,
}

/// At most this many new resequenced flows wait for [`Receiver::poll_new_flow`]; the driver
/// drains them with every batch, so more only means a flood of new striped flows, whose
/// low-delay reverse is then skipped (a peer must not grow our memory).
pub const MAX_NEW_FLOWS: usize = 256;

impl Receiver {
    /// A receiver whose TUN device has offload (`IFF_VNET_HDR`) or not; `params` size the
    /// resequencer (from `[striping]`). `None` (no `[striping]` here): sequenced frames pass in
    /// arrival order, unresequenced, as they did before the gateway core.
    pub fn new(params: Option<Params>, offload: bool) -> Self {
        Receiver {
            reseq: Resequencer::new(params.unwrap_or_default()),
            resequence: params.is_some(),
            offload,
            out: VecDeque::new(),
            out_bytes: 0,
            counters: Counters::default(),
            new_flows: VecDeque::new(),
        }
    }

    /// One IP frame from connection `lane` ([`super::ConnCore::lane`]). Unsequenced frames (and
    /// every frame without `[striping]`) are ready at once; sequenced ones go through the resequencer (their payload is copied, so a
    /// held 1.5 KB frame does not pin the connection's 128 KiB receive chunk). Then drain
    /// [`Receiver::poll_tun_write`].
    pub fn handle_frame(&mut self, now: Instant, lane: u64, frame: Frame) {
        let key = match frame.header.seq {
            Some(_) if self.resequence => frame
                .ip_packet()
                .and_then(|(_, ip)| parse(ip).ok())
                .map(|i| i.flow),
            _ => None,
        };
        match (key, frame.header.seq) {
            (Some(key), Some(seq)) => {
                let held = Frame {
                    header: frame.header,
                    payload: Bytes::copy_from_slice(&frame.payload),
                };
                let len = held.payload.len();
                let started = self.reseq.handle_frame_on(now, key, lane, seq, held, len);
                if started && self.new_flows.len() < MAX_NEW_FLOWS {
                    self.new_flows.push_back(key);
                }
                self.drain();
            }
            // Unsequenced, or no flow to resequence by: straight to TUN.
            _ => self.push(frame),
        }
    }

    fn drain(&mut self) {
        while let Some(d) = self.reseq.poll_deliver() {
            self.push(d.packet);
        }
    }

    /// The virtio-or-plain decision for the local TUN device ([`tun_write`]), then the backlog
    /// bound.
    fn push(&mut self, frame: Frame) {
        let w = match tun_write(frame, self.offload) {
            Ok(w) => w,
            Err(d) => {
                self.counters.drop(d);
                return;
            }
        };
        let ip = &w.ip;
        if self.out_bytes + ip.len() > MAX_PENDING_TUN_BYTES {
            self.counters.drop(PacketDrop::TunBacklog);
            return;
        }
        self.out_bytes += ip.len();
        self.out.push_back(w);
    }

    /// A flow the resequencer started on (once per flow, again after it was forgotten): the
    /// driver keeps its reverse on the lowest-delay group ([`super::Router::prefer_low_delay`]).
    pub fn poll_new_flow(&mut self) -> Option<FlowKey> {
        self.new_flows.pop_front()
    }

    /// The next packet to write to TUN, in delivery order.
    pub fn poll_tun_write(&mut self) -> Option<TunWrite> {
        let w = self.out.pop_front()?;
        self.out_bytes = self.out_bytes.saturating_sub(w.ip.len());
        self.counters.tun_tx_packets += 1;
        self.counters.tun_tx_bytes += w.ip.len() as u64;
        Some(w)
    }

    /// When [`Receiver::handle_timeout`] must run (resequencer hold expiry, idle sweep).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.reseq.poll_timeout()
    }

    /// Runs the resequencer's timers; then drain [`Receiver::poll_tun_write`].
    pub fn handle_timeout(&mut self, now: Instant) {
        self.reseq.handle_timeout(now);
        self.drain();
    }

    /// Changes the resequencer's release threshold `T` (sized from the measured paths).
    pub fn set_threshold(&mut self, threshold: Threshold) {
        self.reseq.set_threshold(threshold);
    }

    /// The resequencer, for its counters.
    pub fn resequencer(&self) -> &Resequencer<FlowKey, Frame> {
        &self.reseq
    }

    /// Counters of this part (TUN writes and the drops decided here).
    pub fn counters(&self) -> &Counters {
        &self.counters
    }
}

/// The config the fuzz target checks against: we are branch 2; branch 1 has an IPv4 and an IPv6
/// prefix, branch 3 an IPv4 one.
const FUZZ_CONFIG: &str = r#"
branch_id = 2
lan_prefixes = ["198.19.2.0/24"]
[[wan]]
name = "wan0"
address = "198.18.20.2/24"
gateway = "198.18.20.1"
[[remote]]
id = 1
wan_addresses = ["198.18.10.2"]
lan_prefixes = ["198.19.1.0/24", "fd00:1::/64"]
[[remote]]
id = 3
wan_addresses = ["198.18.30.2"]
lan_prefixes = ["198.19.3.0/24"]
"#;

/// What one decode of an inbound byte stream yields, for comparing two decodes.
#[derive(Debug, PartialEq, Eq)]
enum FuzzEvent {
    Hello(crate::framing::Hello),
    Frame(Frame),
    Error(crate::framing::InboundError),
}

/// The inbound state machine on `chunks` appended one after the other: the hello, then frames,
/// until need-more or an error.
fn fuzz_decode(chunks: &[&[u8]]) -> Vec<FuzzEvent> {
    use crate::framing::{Inbound, InboundConnection};
    let Ok(own) = BranchId::new(2) else {
        return Vec::new();
    };
    let mut ic = InboundConnection::new(own);
    let mut buf = bytes::BytesMut::new();
    let mut out = Vec::new();
    for c in chunks {
        buf.extend_from_slice(c);
        loop {
            match ic.decode(&mut buf) {
                Ok(Some(Inbound::Hello(h))) => out.push(FuzzEvent::Hello(h)),
                Ok(Some(Inbound::Frame(f))) => out.push(FuzzEvent::Frame(f)),
                Ok(None) => break,
                Err(e) => {
                    out.push(FuzzEvent::Error(e));
                    return out;
                }
            }
        }
    }
    out
}

/// The fuzz target `inbound` (`crates/mpa/fuzz`): byte 0 picks a split point, the rest is what a
/// peer sends on an accepted connection. Checks: (1) the inbound state machine
/// ([`crate::framing::InboundConnection`]) yields the same hello, frames and error whether the
/// bytes arrive at once or in two reads; (2) the hello comes first and once; (3) for every frame,
/// [`admit`] (the source filter, [`crate::virtio::validate`]) and [`tun_write`] never panic, an
/// admitted IP frame's inner source lies in the hello's branch's prefixes and its virtio header
/// validates, a frame refused as [`PacketDrop::SpoofedSource`] has a source outside them.
pub fn fuzz_check_inbound(data: &[u8]) {
    static SOURCES: std::sync::OnceLock<AllowedSources> = std::sync::OnceLock::new();
    let sources = SOURCES.get_or_init(|| {
        Config::parse(FUZZ_CONFIG)
            .map(|c| AllowedSources::from_config(&c))
            .unwrap_or_default()
    });
    let Some((&split, stream)) = data.split_first() else {
        return;
    };
    let at = if stream.is_empty() {
        0
    } else {
        usize::from(split) * stream.len() / 255
    };
    let whole = fuzz_decode(&[stream]);
    let (a, b) = stream.split_at(at.min(stream.len()));
    assert_eq!(
        fuzz_decode(&[a, b]),
        whole,
        "split at {at} changes the decode"
    );
    let mut sender = None;
    for (i, ev) in whole.iter().enumerate() {
        match ev {
            FuzzEvent::Hello(h) => {
                assert_eq!(i, 0, "the hello comes first, once");
                sender = Some(h.src_branch);
            }
            FuzzEvent::Frame(f) => {
                assert!(sender.is_some(), "a frame before the hello");
                let Some(sender) = sender else {
                    continue;
                };
                let verdict = admit(sources, sender, f);
                let src = f
                    .ip_packet()
                    .and_then(|(_, ip)| match ip.first().map(|b| b >> 4) {
                        Some(4) => ip
                            .get(12..16)
                            .and_then(|s| <[u8; 4]>::try_from(s).ok())
                            .map(IpAddr::from),
                        Some(6) => ip
                            .get(8..24)
                            .and_then(|s| <[u8; 16]>::try_from(s).ok())
                            .map(IpAddr::from),
                        _ => None,
                    });
                match verdict {
                    Ok(()) => {
                        let (vnet, ip) = f.ip_packet().unwrap_or((None, &[]));
                        assert!(src.is_some_and(|s| sources.allows(sender, s)));
                        if let Some(v) = vnet {
                            assert!(crate::virtio::validate(v, ip).is_ok());
                        }
                    }
                    Err(PacketDrop::SpoofedSource) => {
                        assert!(src.is_some_and(|s| !sources.allows(sender, s)));
                    }
                    Err(_) => {}
                }
                let _ = tun_write(f.clone(), true);
                let _ = tun_write(f.clone(), false);
            }
            FuzzEvent::Error(_) => assert_eq!(i + 1, whole.len(), "nothing after an error"),
        }
    }
}
