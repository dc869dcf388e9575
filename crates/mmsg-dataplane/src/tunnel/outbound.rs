//! The supervisor of one outbound connection ((remote branch, path group, class) on the remote's
//! `0xB00G`): connect from a local uplink (rotating the initial pair), with `[tls]` the TLS
//! handshake (the server must be the dialled branch), the hello, then writer + reader + subflow
//! manager until one ends; then back off (doubling, capped) and connect again. It tells the TUN
//! task when the connection goes up or down ([`TunEvent::Conn`]).

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use mpa::framing::{Deframer, Hello};
use mpa::Class;
use socket2::SockAddr;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tracing::{debug, info, warn};

use super::conn_io::{
    peer_invalidated, publish_core, reader, writer, ConnCounters, ConnEnd, Decoder, RX_CHUNK,
};
use super::socket::{apply_lowat, check_fallback, mark_class, mptcp_socket, nat_keepalive};
use super::subflows::{self, wanted_pairs};
use super::{conn_name, ConnEvent, ConnKey, OutQueue, Shared, TunEvent};
use crate::secure::{self, Rekey};
use crate::stats::{ConnState, ConnStatus, Stats};

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Reconnect backoff: first delay and cap (doubling in between).
const BACKOFF_MIN: Duration = Duration::from_millis(200);
/// See [`BACKOFF_MIN`].
const BACKOFF_MAX: Duration = Duration::from_secs(10);
/// Cap of the backoff for [`FAST_RECONNECT_FOR`] after an established connection ended: the
/// peer is most likely restarting (`mmsg` is up again within about a second), and the doubling
/// would otherwise put the next attempt 1.6–3.2 s later (issue #16 "Restart"). An attempt at a
/// peer without a listener is one SYN answered by a RST.
const BACKOFF_MAX_RECENT: Duration = Duration::from_millis(250);
/// See [`BACKOFF_MAX_RECENT`].
const FAST_RECONNECT_FOR: Duration = Duration::from_secs(30);
/// `MMSG_FAST_RECONNECT=off` keeps the doubling to [`BACKOFF_MAX`] also after a connection
/// ended (the behaviour before; `cargo xtask bench failover` uses it for its `before` pass).
pub const FAST_RECONNECT_ENV: &str = "MMSG_FAST_RECONNECT";

fn fast_reconnect() -> bool {
    std::env::var(FAST_RECONNECT_ENV).map_or(true, |v| v != "off")
}

/// Connects an MPTCP socket from `local` to `remote` (bound to the uplink address, so policy
/// routing picks the uplink), within [`CONNECT_TIMEOUT`].
async fn connect_once(
    sh: &Shared,
    local: Ipv4Addr,
    remote: SocketAddrV4,
    class: Class,
) -> io::Result<TcpStream> {
    let s = mptcp_socket(&sh.opts)?;
    mark_class(&s, class);
    if sh.config().wan.iter().any(|w| w.nat) {
        nat_keepalive(&s);
    }
    s.bind(&SockAddr::from(SocketAddrV4::new(local, 0)))?;
    match s.connect(&SockAddr::from(remote)) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    let stream = TcpStream::from_std(std::net::TcpStream::from(s))?;
    tokio::time::timeout(CONNECT_TIMEOUT, stream.writable())
        .await
        .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
    if let Some(e) = stream.take_error()? {
        return Err(e);
    }
    stream.peer_addr()?;
    apply_lowat(&stream, &sh.opts);
    Ok(stream)
}

/// Keeps one outbound connection up forever: connect (rotating the initial pair), hello, run,
/// back off, repeat.
pub async fn run_outbound(sh: Arc<Shared>, key: ConnKey, remote_addrs: Vec<Ipv4Addr>) {
    let name = conn_name("out", key);
    let Some(oq) = sh.queue(&key) else {
        return;
    };
    let ConnKey {
        branch,
        group,
        class,
        ..
    } = key;
    let plan = sh.config().ports;
    let Some(port) = plan.listen_port(branch, group) else {
        warn!(conn = %name, %plan, "the port plan has no listen port for this branch");
        return;
    };
    let pairs = wanted_pairs(&sh.config(), class, &remote_addrs);
    if pairs.is_empty() {
        warn!(conn = %name, "no (uplink, remote address) pair for this connection");
        return;
    }
    let mut status = ConnStatus {
        direction: "out".into(),
        remote_branch: branch.get(),
        path_group: group.get(),
        class: class.to_string(),
        index: key.index,
        state: ConnState::Connecting,
        subflows_wanted: pairs.len(),
        ..ConnStatus::default()
    };
    sh.stats.set_conn(&name, status.clone());
    let mut backoff = BACKOFF_MIN;
    let mut attempt = 0usize;
    let fast = fast_reconnect();
    let mut ended: Option<Instant> = None;
    loop {
        let Some(&(_, local, remote)) = pairs.get(attempt % pairs.len()) else {
            return;
        };
        attempt += 1;
        let target = SocketAddrV4::new(remote, port);
        match connect_secure(&sh, local, target, key).await {
            Ok(stream) => {
                Stats::inc(&sh.stats.connects);
                backoff = BACKOFF_MIN;
                status.state = ConnState::Up;
                status.established += 1;
                sh.stats.set_conn(&name, status.clone());
                info!(conn = %name, %local, remote = %target, "tunnel connection up");
                let end = run_outbound_conn(&sh, &name, key, &oq, stream, &pairs, port).await;
                {
                    // Queued packets go with the connection (counted): the core's rule.
                    let mut core = oq.core.lock().unwrap_or_else(PoisonError::into_inner);
                    let before = *core.counters();
                    core.handle_down(Instant::now());
                    publish_core(&sh.stats, &before, core.counters());
                }
                oq.up.store(false, Ordering::Relaxed);
                oq.window_bps.store(0, Ordering::Relaxed);
                oq.inflight_bps.store(0, Ordering::Relaxed);
                oq.base_rtt_us.store(0, Ordering::Relaxed);
                oq.inflight_budget.store(0, Ordering::Relaxed);
                oq.delivery_rate.store(0, Ordering::Relaxed);
                oq.stall_cover_us.store(0, Ordering::Relaxed);
                oq.pacing_rate.store(0, Ordering::Relaxed);
                sh.send(TunEvent::Conn(ConnEvent { key, up: false }));
                if matches!(end, ConnEnd::Dead(_)) {
                    Stats::inc(&sh.stats.conn_dead);
                }
                ended = Some(Instant::now());
                warn!(conn = %name, reason = %end, "tunnel connection lost; reconnecting");
            }
            Err(e) => {
                Stats::inc(&sh.stats.connect_failures);
                debug!(conn = %name, %local, remote = %target, error = %e, "connect failed");
            }
        }
        sh.stats.update_conn(&name, |c| {
            c.state = ConnState::Backoff;
            c.subflows.clear();
            c.send_time_budget_bytes = 0;
            c.delivery_rate_bytes_per_second = 0;
            c.stall_cover_us = 0;
            c.pacing = None;
        });
        let recent = fast && ended.is_some_and(|t| t.elapsed() < FAST_RECONNECT_FOR);
        tokio::time::sleep(if recent {
            backoff.min(BACKOFF_MAX_RECENT)
        } else {
            backoff
        })
        .await;
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// A connected tunnel stream: plain MPTCP, or TLS over MPTCP.
enum Transport {
    Clear(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<secure::Buffered>>),
}

/// Connects (MPTCP) and, with `[tls]`, runs the TLS handshake: the server must prove it is the
/// branch we dial. A TLS failure is counted (`tls_connect_failures`) and logged once here.
async fn connect_secure(
    sh: &Shared,
    local: Ipv4Addr,
    target: SocketAddrV4,
    key: ConnKey,
) -> io::Result<Transport> {
    let ConnKey { branch, class, .. } = key;
    let stream = connect_once(sh, local, target, class).await?;
    let Some(tls) = sh.tls.as_ref().map(|t| t.current()) else {
        return Ok(Transport::Clear(stream));
    };
    let connect = tls
        .connector
        .connect(pki::server_name(branch), secure::buffered(stream));
    match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
        Ok(Ok(s)) => {
            Stats::inc(&sh.stats.tls_handshakes_out);
            Ok(Transport::Tls(Box::new(s)))
        }
        Ok(Err(e)) => {
            Stats::inc(&sh.stats.tls_connect_failures);
            warn!(branch = branch.get(), remote = %target, error = %e, "TLS handshake to the peer failed");
            Err(e)
        }
        Err(_) => {
            Stats::inc(&sh.stats.tls_connect_failures);
            warn!(branch = branch.get(), remote = %target, "TLS handshake to the peer timed out");
            Err(io::ErrorKind::TimedOut.into())
        }
    }
}

async fn run_outbound_conn(
    sh: &Shared,
    name: &str,
    key: ConnKey,
    oq: &OutQueue,
    stream: Transport,
    pairs: &[(usize, Ipv4Addr, Ipv4Addr)],
    port: u16,
) -> ConnEnd {
    let hello = Hello {
        src_branch: sh.own,
        dst_branch: key.branch,
        path_group: key.group,
        class: key.class,
        index: key.index,
        auth: Vec::new(),
    };
    let mut hb = BytesMut::with_capacity(hello.encoded_len());
    if let Err(e) = hello.encode(&mut hb) {
        return ConnEnd::Io(io::Error::other(e.to_string()));
    }
    let fd = match &stream {
        Transport::Clear(s) => s.as_fd().try_clone_to_owned(),
        Transport::Tls(s) => s.get_ref().0.get_ref().as_fd().try_clone_to_owned(),
    };
    let fd = match fd {
        Ok(fd) => fd,
        Err(e) => return ConnEnd::Io(e),
    };
    match stream {
        Transport::Clear(mut stream) => {
            if let Err(e) = stream.write_all(&hb).await {
                return ConnEnd::Io(e);
            }
            let (r, w) = stream.into_split();
            run_outbound_halves(sh, name, key, oq, (r, w, None), None, &fd, pairs, port).await
        }
        Transport::Tls(mut stream) => {
            // The hello travels inside TLS (docs/wire.md).
            if let Err(e) = async {
                stream.write_all(&hb).await?;
                stream.flush().await
            }
            .await
            {
                return ConnEnd::Io(e);
            }
            let peer = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .map(|c| {
                    (
                        c.clone().into_owned(),
                        pki::tls::PeerRole::Server(key.branch),
                    )
                });
            let (r, w, rekey) = secure::split(*stream);
            run_outbound_halves(
                sh,
                name,
                key,
                oq,
                (r, w, Some(rekey)),
                peer.as_ref(),
                &fd,
                pairs,
                port,
            )
            .await
        }
    }
}

/// The running part of an outbound connection (hello sent): writer, reader, subflow manager.
#[allow(clippy::too_many_arguments)]
async fn run_outbound_halves<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    sh: &Shared,
    name: &str,
    key: ConnKey,
    oq: &OutQueue,
    (mut r, mut w, mut rekey): (R, W, Option<Rekey>),
    peer: Option<&(
        rustls::pki_types::CertificateDer<'static>,
        pki::tls::PeerRole,
    )>,
    fd: &std::os::fd::OwnedFd,
    pairs: &[(usize, Ipv4Addr, Ipv4Addr)],
    port: u16,
) -> ConnEnd {
    let mut fallback_reported = false;
    check_fallback(sh, fd, name, &mut fallback_reported);
    let cc = ConnCounters::new(sh);
    oq.core
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .handle_up(Instant::now(), cc.lane);
    oq.up.store(true, Ordering::Relaxed);
    sh.send(TunEvent::Conn(ConnEvent { key, up: true }));
    let manage = subflows::run(sh, key, name, fd, pairs, port, oq, &cc, fallback_reported);
    tokio::select! {
        r = writer(sh, &mut w, rekey.as_mut(), &oq.core, Some(oq), fd.as_fd(), &cc) => r.err().unwrap_or(ConnEnd::Eof),
        r = reader(sh, &mut r, Decoder::Out(Deframer::new()), BytesMut::with_capacity(RX_CHUNK), &oq.core, &cc) => r.err().unwrap_or(ConnEnd::Eof),
        () = manage => ConnEnd::Eof,
        e = peer_invalidated(sh, name, peer) => e,
    }
}
