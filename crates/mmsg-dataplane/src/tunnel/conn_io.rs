//! The two halves of a running connection (framing IO): the writer (the only task writing to the
//! socket, so frames never interleave) drains the connection's [`ConnCore`] (strict priority +
//! CoDel, frames already framed in place by the router; keepalives when idle; liveness) in whole
//! batches and writes them with `write_vectored`, sized by [`WriteSizer`]. The reader decodes
//! complete, checked frames (zero-copy splits of a reused receive buffer), tells the core that
//! bytes arrived, and hands their packets to TUN: unsequenced ones at once
//! ([`mpa::gateway::tun_write`], no lock), sequenced ones through [`crate::reseq`].

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use mpa::framing::{
    Deframer, Frame, FrameType, Inbound, InboundConnection, InboundError, MAX_FRAME_LEN,
};
use mpa::gateway::{tun_write, ConnCore, Counters, Event, PacketDrop};
use mpa::queue::pacing::{stricter, TokenBucket};
use mpa::queue::{write_gate, Gate, SubflowQueue};
use mpa::write_size::WriteSizer;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tracing::{info, warn};

use super::batch::{Batch, MAX_BATCH_PACKETS};
use super::{OutQueue, Shared, TunEvent};
use crate::deliver::{PeerCheck, ToTun};
use crate::secure::Rekey;
use crate::stats::Stats;
use crate::sys;

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

/// The shortest wait of a write before the writer looks at the liveness timers again.
const MIN_WRITE_WAIT: Duration = Duration::from_millis(100);

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
    #[error("a newer connection from the peer took over its traffic")]
    Replaced,
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

/// Publishes what the core counted while the caller held its lock (`before` taken under the
/// same lock, so drops counted by the TUN task's `enqueue` in between are not seen twice).
pub(super) fn publish_core(st: &Stats, before: &Counters, after: &Counters) {
    let delta = |r| after.drops(r).saturating_sub(before.drops(r));
    Stats::add(&st.drop_codel, delta(PacketDrop::Codel));
    Stats::add(&st.drop_conn_closed, delta(PacketDrop::ConnClosed));
    Stats::add(
        &st.codel_marks,
        after.ce_marks.saturating_sub(before.ce_marks),
    );
}

/// What counts against the send time budget of the MPTCP socket `fd` now: its unacknowledged
/// bytes (`TIOCOUTQ`, one ioctl) while they are below `budget`; otherwise what its paths hold
/// ([`mpa::queue::path_queued`]: not yet handed to a subflow plus every subflow's queue, one
/// ioctl and one `MPTCP_TCPINFO`), so bytes the data level holds behind a slower subflow do not
/// keep the writer waiting. Measured at each batch, not sampled: the data-level acknowledgement
/// jumps when the slow subflow's byte arrives, and a sampled figure then over-commits.
fn committed_bytes(fd: BorrowedFd<'_>, budget: u64) -> io::Result<u64> {
    let unacked = sys::outq_bytes(fd)?;
    if unacked < budget {
        return Ok(unacked);
    }
    let unsent = sys::outq_unsent_bytes(fd)?;
    let subflows = sys::mptcp_subflow_tcpinfo(fd)?;
    Ok(mpa::queue::path_queued(unsent, subflows.iter().map(subflow_queue)).min(unacked))
}

/// When a subflow of the MPTCP socket `fd` last heard from the peer: the latest data segment
/// or acknowledgement over the established subflows (`tcpi_last_data_recv`,
/// `tcpi_last_ack_recv`); `None` when unknown (no subflow, or not MPTCP). Asked only after the
/// application read nothing for the liveness timeout ([`mpa::keepalive`]): data held behind a
/// retransmission is not readable yet, but it arrived; and a peer whose own writer waits for
/// that retransmission sends nothing new, but its kernel still acknowledges our keepalives.
fn transport_last_receive(fd: BorrowedFd<'_>, now: Instant) -> Option<Instant> {
    let subflows = sys::mptcp_subflow_tcpinfo(fd).ok()?;
    let age = subflows
        .iter()
        .filter(|t| t.state == sys::TCP_ESTABLISHED)
        .map(|t| t.last_data_recv_ms.min(t.last_ack_recv_ms))
        .min()?;
    now.checked_sub(Duration::from_millis(u64::from(age)))
}

/// One subflow's queue ([`mpa::queue::SubflowQueue`]) from its `tcp_info`.
pub(super) fn subflow_queue(t: &sys::SubflowTcpInfo) -> SubflowQueue {
    SubflowQueue {
        established: t.state == sys::TCP_ESTABLISHED,
        unacked_segments: t.unacked,
        mss: t.snd_mss,
        notsent: t.notsent_bytes,
    }
}

/// The writer of a connection: drains its [`ConnCore`] (queued frames, strict priority + CoDel,
/// then a keepalive when one is due) in batches and writes them; ends when the peer is dead. An
/// outbound connection passes its [`OutQueue`] (the wake-up on new packets, the send time budget
/// and the figures of the status report); an inbound one has no queue and only sends
/// keepalives. `fd` is the MPTCP socket: `TIOCOUTQ` for the budget, and the subflows' last
/// receipt when the peer seems silent.
///
/// With a send time budget ([`mpa::queue::inflight`]) the writer asks [`write_gate`] before each
/// batch how much the socket may take (its unacknowledged bytes against the budget) and takes no
/// more than that out of the queue; when the budget is full it sleeps for the estimated drain
/// time instead of waiting for the socket to become writable, so the packets wait in the fair
/// queue (per-flow scheduling, CoDel), not in the socket.
pub(super) async fn writer<W: AsyncWrite + Unpin>(
    sh: &Shared,
    w: &mut W,
    mut rekey: Option<&mut Rekey>,
    core: &Mutex<ConnCore>,
    oq: Option<&OutQueue>,
    fd: BorrowedFd<'_>,
    cc: &ConnCounters,
) -> Result<(), ConnEnd> {
    let st = &sh.stats;
    // It survives a write cut short by the liveness deadline.
    let mut batch = Batch::new();
    let max_batch = sh.opts.max_batch.max(1);
    let mut sizer = WriteSizer::new(sh.opts.write_chunk, max_batch);
    let mut bucket = TokenBucket::new();
    loop {
        let now = Instant::now();
        let gate = match oq {
            Some(q) => {
                let budget = q.inflight_budget.load(Ordering::Relaxed);
                // Without the count (an error) the budget cannot be kept: write as before.
                let committed = if budget == 0 {
                    Ok(0)
                } else {
                    committed_bytes(fd, budget)
                };
                let rate = q.delivery_rate.load(Ordering::Relaxed);
                let window = committed.map_or(Gate::Write(max_batch), |c| {
                    write_gate(c, budget, rate, max_batch)
                });
                // The budget's stall cover: a writer that keeps waking late may catch up.
                bucket.set_stall_cover(Duration::from_micros(
                    q.stall_cover_us.load(Ordering::Relaxed),
                ));
                let paced = bucket.gate(now, q.pacing_rate.load(Ordering::Relaxed), max_batch);
                stricter(window, paced)
            }
            _ => Gate::Write(max_batch),
        };
        let mut budget_wait = None;
        let deadline = {
            let mut c = core.lock().unwrap_or_else(PoisonError::into_inner);
            let before = *c.counters();
            if c.poll_timeout().is_some_and(|t| t <= now) {
                if c.needs_transport_check(now) {
                    if let Some(at) = transport_last_receive(fd, now) {
                        c.on_transport_receive(at);
                        if now.saturating_duration_since(at) < mpa::keepalive::DEAD_AFTER {
                            let id = c.id();
                            info!(
                                dir = ?id.dir,
                                conn = %format_args!(
                                    "b{} g{} {}",
                                    id.key.branch.get(),
                                    id.key.group.get(),
                                    id.key.class
                                ),
                                heard_ms_ago = now.saturating_duration_since(at).as_millis(),
                                "no frame read for the liveness timeout, but a subflow still \
                                 hears from the peer (data held behind a retransmission): not dead"
                            );
                        }
                    }
                }
                if let Some(Event::Close(_)) = c.handle_timeout(now) {
                    publish_core(st, &before, c.counters());
                    return Err(ConnEnd::Dead(mpa::keepalive::DEAD_AFTER));
                }
            }
            let room = match gate {
                Gate::Write(room) => room,
                Gate::Wait(d) => {
                    // Only data waits for the budget; an empty queue waits for packets.
                    if c.queued_bytes() > 0 {
                        budget_wait = Some(d);
                    }
                    0
                }
            };
            batch.fill(room, || {
                c.poll_transmit(now).map(|t| (t.frame, t.keepalive))
            });
            if let Some(q) = oq.filter(|_| c.queued_bytes() > 0) {
                // Data left behind: the paths limit this connection (the pacer's sample may
                // lower its rate).
                q.backlogged.fetch_add(1, Ordering::Relaxed);
            }
            publish_core(st, &before, c.counters());
            c.poll_timeout()
        };
        if batch.must_write() {
            let started = Instant::now();
            // A socket that stays full (every subflow gone, nothing acknowledged) must not keep
            // the writer from the liveness timers: the write waits at most until the next one,
            // then the loop runs them and writes the rest (`batch`: the frames not yet handed to
            // the socket, or the flush of what TLS took; nothing handed to the socket is lost).
            let io = async {
                write_all_vectored(w, batch.frames_mut(), &mut sizer).await?;
                // TLS keeps records it could not send yet; plain TCP: no-op.
                w.flush().await
            };
            // Not sooner than `MIN_WRITE_WAIT`: a keepalive that is due but cannot join the full
            // batch leaves the deadline in the past.
            let until = tokio::time::Instant::from_std(
                deadline
                    .unwrap_or(now + mpa::keepalive::KEEPALIVE_INTERVAL)
                    .max(now + MIN_WRITE_WAIT),
            );
            let written = tokio::time::timeout_at(until, io).await;
            if let Some(oq) = oq {
                let blocked = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                Stats::add(&oq.busy_us, blocked);
            }
            match written {
                Ok(r) => r?,
                Err(_) => {
                    batch.cut_short();
                    continue;
                }
            }
            let done = batch.written();
            bucket.spend(done.bytes);
            if let Some(rk) = rekey.as_deref_mut() {
                if rk.on_written(done.bytes, Instant::now())? {
                    Stats::inc(&st.tls_key_updates);
                }
            }
            Stats::add(&st.frames_tx, done.frames);
            Stats::add(&st.keepalives_tx, done.keepalives);
            Stats::add(&cc.frames_tx, done.frames);
            Stats::add(&cc.bytes_tx, done.bytes as u64);
            if let Some(oq) = oq {
                Stats::add(&oq.sent_bytes, done.bytes as u64);
            }
            continue;
        }
        // Nothing to send: wait for the socket to drain below the budget, or for new packets or
        // the next liveness timer.
        let deadline = deadline.unwrap_or(now + mpa::keepalive::KEEPALIVE_INTERVAL);
        if let Some(d) = budget_wait {
            let until = (now + d).min(deadline);
            let started = Instant::now();
            tokio::time::sleep_until(tokio::time::Instant::from_std(until)).await;
            if let Some(oq) = oq {
                // Woken later than planned: the paths drained meanwhile (the budget's stall
                // cover, `mpa::queue::stall`).
                let late = started
                    .elapsed()
                    .saturating_sub(until.saturating_duration_since(started));
                let late = u64::try_from(late.as_micros()).unwrap_or(u64::MAX - 1);
                oq.writer_late_us.fetch_max(late + 1, Ordering::Relaxed);
            }
            // Data waited because the paths are full: the same capacity signal as a write
            // blocked on the socket without the budget (`busy_us`, what ssc's adaptive groups
            // and weights read as "saturated", controller::capacity).
            if let Some(oq) = oq {
                let waited = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                Stats::add(&oq.busy_us, waited);
            }
            continue;
        }
        let sleep = tokio::time::sleep_until(tokio::time::Instant::from_std(deadline));
        match oq {
            Some(oq) => tokio::select! {
                () = oq.notify.notified() => {}
                () = sleep => {}
            },
            None => sleep.await,
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
    core: &Mutex<ConnCore>,
    cc: &ConnCounters,
) -> Result<(), ConnEnd> {
    let st = &sh.stats;
    let sender = core
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .id()
        .key
        .branch;
    let mut check = PeerCheck::new(sender, sh.config());
    loop {
        loop {
            match dec.next(&mut buf) {
                Ok(Some(frame)) => on_frame(sh, frame, cc, &mut check),
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
        check.refresh(sh.config());
        core.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .on_receive(Instant::now());
    }
}

/// What the reader does with one frame: an IP frame goes to TUN ([`crate::deliver`]); a
/// sequenced one, with `[striping]`, through the resequencer ([`crate::reseq`]), any other at once with the
/// core's virtio-or-plain decision ([`tun_write`], stateless: no lock); the rest is counted.
fn on_frame(sh: &Shared, frame: Frame, cc: &ConnCounters, check: &mut PeerCheck) {
    let st = &sh.stats;
    match frame.header.frame_type {
        FrameType::Ip | FrameType::IpVirtio => {
            let Some((_, ip)) = frame.ip_packet() else {
                Stats::inc(&st.frame_errors);
                return;
            };
            Stats::inc(&st.frames_rx);
            Stats::inc(&cc.frames_rx);
            Stats::add(&cc.bytes_rx, ip.len() as u64);
            // Inner source in the sender's LAN, a sane virtio header: once, before resequencing.
            if !check.admit(&frame, st) {
                return;
            }
            let to_tun = ToTun {
                tun: &sh.tun,
                stats: st,
            };
            // Without `[striping]` here sequenced frames pass like any other (no lock).
            if frame.header.seq.is_some() && sh.reseq.striping() {
                if let Some(flow) = sh.reseq.handle(to_tun, frame, cc.lane) {
                    sh.send(TunEvent::LowDelay(flow.reversed()));
                }
                return;
            }
            match tun_write(frame, sh.tun.offload()) {
                Ok(w) => to_tun.write(&w),
                Err(PacketDrop::VirtioUnsupported) => Stats::inc(&st.drop_virtio_unsupported),
                Err(_) => Stats::inc(&st.frame_errors),
            }
        }
        FrameType::Keepalive => {}
        FrameType::Control => Stats::inc(&st.frames_control),
        FrameType::Unknown(_) => Stats::inc(&st.frames_unknown),
    }
}
