//! The two halves of a running connection (framing IO): the writer (the only task writing to the
//! socket, so frames never interleave) drains the connection's [`OutQueue`] (strict priority +
//! CoDel), frames whole batches in place and writes them with `write_vectored`, sized by
//! [`WriteSizer`]; it sends keepalives when idle. The reader decodes complete, checked frames
//! (zero-copy splits of a reused receive buffer) and hands their packets to TUN, through the
//! resequencer for sequenced frames. Both run the connection's [`Liveness`].

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use mpa::framing::{
    encode_frame, encode_header_in_place, Deframer, Frame, FrameType, Inbound, InboundConnection,
    InboundError, FRAME_HEADER_LEN, MAX_FRAME_LEN, VIRTIO_NET_HDR_LEN,
};
use mpa::keepalive::{Liveness, LivenessEvent};
use mpa::queue::Dequeued;
use mpa::write_size::WriteSizer;
use mpa::Class;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Notify;
use tracing::{trace, warn};

use super::{OutQueue, Shared};
use crate::deliver::ToTun;
use crate::secure::Rekey;
use crate::stats::Stats;

/// Most packets written per `write_vectored` batch (well under IOV_MAX = 1024).
const MAX_BATCH_PACKETS: usize = 64;
/// Most bytes dequeued per batch: 256 KiB keeps one batch below a typical socket's free space, so
/// packets wait in our CoDel queue (not in the socket) when the paths are full.
const MAX_BATCH_BYTES: usize = 256 * 1024;
/// Receive buffer growth per read. Frames are split off without copying; the buffer reclaims its
/// space once they were written to TUN. Worst case per connection: one chunk + one maximum frame.
pub(super) const RX_CHUNK: usize = 128 * 1024;

/// Writes all of `bufs` with `write_vectored`, at most `sizer.chunk()` bytes per syscall (see
/// [`mpa::write_size`]: small writes on unequal subflows, whole batches on fast ones).
async fn write_all_vectored<W: AsyncWrite + Unpin>(
    w: &mut W,
    bufs: &mut VecDeque<BytesMut>,
    sizer: &mut WriteSizer,
) -> io::Result<()> {
    while !bufs.is_empty() {
        let mut room = sizer.chunk();
        let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(MAX_BATCH_PACKETS);
        for b in bufs.iter().take(MAX_BATCH_PACKETS) {
            if room == 0 {
                break;
            }
            let n = b.len().min(room);
            slices.push(IoSlice::new(b.get(..n).unwrap_or(b)));
            room -= n;
        }
        let mut n = w.write_vectored(&slices).await?;
        drop(slices);
        sizer.on_sent(Instant::now(), n);
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        while n > 0 {
            let Some(front) = bufs.front_mut() else { break };
            if front.len() <= n {
                n -= front.len();
                bufs.pop_front();
            } else {
                front.advance(n);
                n = 0;
            }
        }
    }
    Ok(())
}

/// Why a connection ended.
#[derive(Debug, thiserror::Error)]
pub(super) enum ConnEnd {
    #[error("io: {0}")]
    Io(#[from] io::Error),
    #[error("peer closed the connection")]
    Eof,
    #[error("nothing received for {0:?}")]
    Dead(Duration),
    #[error("peer sent an invalid stream: {0}")]
    Invalid(InboundError),
    #[error("peer certificate no longer valid after a reload: {0}")]
    Invalidated(rustls::Error),
}

/// Resolves when a reload invalidates the peer of this connection (see
/// [`crate::secure::TlsState::peer_invalidated`]); counts and logs it. Never resolves in clear mode.
pub(super) async fn peer_invalidated(
    sh: &Shared,
    name: &str,
    peer: Option<&(
        rustls::pki_types::CertificateDer<'static>,
        pki::tls::PeerRole,
    )>,
) -> ConnEnd {
    let (Some(tls), Some((cert, role))) = (sh.tls.as_ref(), peer) else {
        return std::future::pending().await;
    };
    let e = tls.peer_invalidated(cert, *role).await;
    Stats::inc(&sh.stats.tls_invalidated_closed);
    warn!(conn = name, error = %e, "closing: the peer's certificate is no longer valid (reload)");
    ConnEnd::Invalidated(e)
}

/// Per-connection counters, shared by the halves.
#[derive(Debug, Default)]
pub(super) struct ConnCounters {
    /// The connection's id ([`Shared::new_lane`]): its lane in the resequencer.
    pub(super) lane: u64,
    pub(super) frames_tx: AtomicU64,
    pub(super) bytes_tx: AtomicU64,
    pub(super) frames_rx: AtomicU64,
    pub(super) bytes_rx: AtomicU64,
}

impl ConnCounters {
    /// The counters of a new connection (with a new lane).
    pub(super) fn new(sh: &Shared) -> Self {
        ConnCounters {
            lane: sh.new_lane(),
            ..ConnCounters::default()
        }
    }
}

/// The writer of an outbound connection: drains its queue (strict priority + CoDel), frames and
/// writes batches; sends keepalives when idle; ends when the peer is dead.
pub(super) async fn writer<W: AsyncWrite + Unpin>(
    sh: &Shared,
    w: &mut W,
    mut rekey: Option<&mut Rekey>,
    oq: &OutQueue,
    class: Class,
    liveness: &Mutex<Liveness>,
    cc: &ConnCounters,
) -> Result<(), ConnEnd> {
    let st = &sh.stats;
    let mut batch: VecDeque<BytesMut> = VecDeque::with_capacity(MAX_BATCH_PACKETS);
    let mut sizer = WriteSizer::new(sh.opts.write_chunk, MAX_BATCH_BYTES);
    loop {
        let now = Instant::now();
        let mut bytes = 0usize;
        if let Ok(mut q) = oq.q.lock() {
            while batch.len() < MAX_BATCH_PACKETS && bytes < MAX_BATCH_BYTES {
                let Some(d) = q.poll_dequeue(now) else { break };
                let (mut pkt, ftype, seq, class, mark) = match d {
                    Dequeued::Send((p, t, s), c) => (p, t, s, c, false),
                    Dequeued::Mark((p, t, s), c) => (p, t, s, c, true),
                    Dequeued::Drop(_, _, _) => {
                        Stats::inc(&st.drop_codel);
                        continue;
                    }
                };
                if mark {
                    let ip_at = if ftype == FrameType::IpVirtio {
                        FRAME_HEADER_LEN + VIRTIO_NET_HDR_LEN
                    } else {
                        FRAME_HEADER_LEN
                    };
                    if let Some(ip) = pkt.get_mut(ip_at..) {
                        mpa::classifier::mark_ce(ip);
                    }
                    Stats::inc(&st.codel_marks);
                }
                match encode_header_in_place(&mut pkt, ftype, class, seq) {
                    Ok(_) => {
                        bytes += pkt.len();
                        batch.push_back(pkt);
                    }
                    Err(e) => {
                        trace!(error = %e, "packet refused by the frame encoder");
                        Stats::inc(&st.drop_encode);
                    }
                }
            }
        }
        if !batch.is_empty() {
            let frames = batch.len() as u64;
            let started = Instant::now();
            write_all_vectored(w, &mut batch, &mut sizer).await?;
            if let Some(rk) = rekey.as_deref_mut() {
                if rk.on_written(bytes, Instant::now())? {
                    Stats::inc(&st.tls_key_updates);
                }
            }
            // TLS keeps records it could not send yet; plain TCP: no-op.
            w.flush().await?;
            let blocked = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            Stats::add(&oq.busy_us, blocked);
            Stats::add(&st.frames_tx, frames);
            Stats::add(&cc.frames_tx, frames);
            Stats::add(&cc.bytes_tx, bytes as u64);
            Stats::add(&oq.sent_bytes, bytes as u64);
            if let Ok(mut l) = liveness.lock() {
                l.on_send(Instant::now());
            }
            continue;
        }
        if keepalive_or_wait(
            w,
            rekey.as_deref_mut(),
            Some(&oq.notify),
            class,
            liveness,
            st,
        )
        .await?
        {
            continue;
        }
    }
}

/// Runs the liveness timer: sends a keepalive when due, fails when the peer is dead, otherwise
/// waits for `notify` (new packets) or the next timer. Returns true when woken by `notify`.
pub(super) async fn keepalive_or_wait<W: AsyncWrite + Unpin>(
    w: &mut W,
    rekey: Option<&mut Rekey>,
    notify: Option<&Notify>,
    class: Class,
    liveness: &Mutex<Liveness>,
    st: &Stats,
) -> Result<bool, ConnEnd> {
    let now = Instant::now();
    let (event, deadline) = match liveness.lock() {
        Ok(mut l) => (l.handle_timeout(now), l.poll_timeout()),
        Err(_) => (None, None),
    };
    match event {
        Some(LivenessEvent::Dead) => return Err(ConnEnd::Dead(mpa::keepalive::DEAD_AFTER)),
        Some(LivenessEvent::SendKeepalive) => {
            let mut ka = BytesMut::with_capacity(FRAME_HEADER_LEN);
            if encode_frame(FrameType::Keepalive, class, None, &[], &mut ka).is_ok() {
                w.write_all(&ka).await?;
                if let Some(rk) = rekey {
                    if rk.on_written(ka.len(), Instant::now())? {
                        Stats::inc(&st.tls_key_updates);
                    }
                }
                w.flush().await?;
                Stats::inc(&st.keepalives_tx);
            }
            if let Ok(mut l) = liveness.lock() {
                l.on_send(Instant::now());
            }
            return Ok(false);
        }
        None => {}
    }
    let deadline = deadline.unwrap_or(now + mpa::keepalive::KEEPALIVE_INTERVAL);
    let sleep = tokio::time::sleep_until(tokio::time::Instant::from_std(deadline));
    match notify {
        Some(n) => tokio::select! {
            () = n.notified() => Ok(true),
            () = sleep => Ok(false),
        },
        None => {
            sleep.await;
            Ok(false)
        }
    }
}

/// The frame decoder of a reader: outbound connections see frames only, inbound ones the hello
/// first (consumed before the reader starts).
pub(super) enum Decoder {
    /// Outbound: frames only.
    Out(Deframer),
    /// Inbound: hello, then frames.
    In(InboundConnection),
}

impl Decoder {
    fn next(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, InboundError> {
        match self {
            Decoder::Out(d) => d.decode(buf).map_err(InboundError::from),
            Decoder::In(c) => loop {
                match c.decode(buf)? {
                    Some(Inbound::Frame(f)) => return Ok(Some(f)),
                    // The hello was consumed before the reader started; never a second one.
                    Some(Inbound::Hello(_)) => continue,
                    None => return Ok(None),
                }
            },
        }
    }

    fn wanted(&mut self, buf: &[u8]) -> usize {
        match self {
            Decoder::Out(d) => d.wanted(buf).unwrap_or(0),
            Decoder::In(_) => 0,
        }
    }
}

/// Reads frames and writes their packets to TUN. Never writes a partial or malformed packet: the
/// decoder returns only complete, checked frames, and any error closes the connection.
pub(super) async fn reader<R: AsyncRead + Unpin>(
    sh: &Shared,
    r: &mut R,
    mut dec: Decoder,
    mut buf: BytesMut,
    liveness: &Mutex<Liveness>,
    cc: &ConnCounters,
) -> Result<(), ConnEnd> {
    let st = &sh.stats;
    loop {
        loop {
            match dec.next(&mut buf) {
                Ok(Some(frame)) => on_frame(sh, &frame, cc),
                Ok(None) => break,
                Err(e) => {
                    Stats::inc(&st.frame_errors);
                    return Err(ConnEnd::Invalid(e));
                }
            }
        }
        let want = dec.wanted(&buf).clamp(RX_CHUNK, MAX_FRAME_LEN + RX_CHUNK);
        buf.reserve(want);
        let n = r.read_buf(&mut buf).await?;
        if n == 0 {
            return Err(ConnEnd::Eof);
        }
        if let Ok(mut l) = liveness.lock() {
            l.on_receive(Instant::now());
        }
    }
}

/// What the reader does with one frame: an IP frame goes to TUN ([`crate::deliver`]), through the
/// resequencer when it carries a sequence number and `[striping]` is on; the rest is counted.
/// The IP packet is located once here (`Frame::ip_packet`), both paths take it as it is.
fn on_frame(sh: &Shared, frame: &Frame, cc: &ConnCounters) {
    let st = &sh.stats;
    match frame.header.frame_type {
        FrameType::Ip | FrameType::IpVirtio => {
            let Some((vnet, ip)) = frame.ip_packet() else {
                Stats::inc(&st.frame_errors);
                return;
            };
            Stats::inc(&st.frames_rx);
            Stats::inc(&cc.frames_rx);
            Stats::add(&cc.bytes_rx, ip.len() as u64);
            let to_tun = ToTun {
                tun: &sh.tun,
                stats: st,
            };
            match (&sh.reseq, frame.header.seq) {
                (Some(r), Some(seq)) => r.handle(to_tun, &frame.payload, vnet, ip, cc.lane, seq),
                _ => to_tun.write(vnet, ip),
            }
        }
        FrameType::Keepalive => {}
        FrameType::Control => Stats::inc(&st.frames_control),
        FrameType::Unknown(_) => Stats::inc(&st.frames_unknown),
    }
}
