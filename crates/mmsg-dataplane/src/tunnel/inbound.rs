//! Inbound connections: the MPTCP listener of each path group on our `0xA00G`, accept, with
//! `[tls]` the handshake (client certificate from our CA, not revoked, of a branch), the hello
//! (checked against the certificate and [`hello_policy`]: the listener's group, a configured
//! source), then reader + keepalive writer until the end. A peer that fails is counted and closed,
//! never read further.
//!
//! Before authentication a connection holds little and not for long ([`super::preauth`]): at
//! accept it needs a [`Permit`] (at most [`MAX_PREAUTH_TOTAL`](super::preauth::MAX_PREAUTH_TOTAL) unauthenticated connections, at
//! most [`MAX_PREAUTH_PER_SOURCE`](super::preauth::MAX_PREAUTH_PER_SOURCE) per source address; otherwise closed at once, no task); in
//! clear mode its source address must be a configured remote's WAN address (and after the hello,
//! that of the hello's branch: the OFS swap restores the sender's own WAN address as source,
//! docs/controller.md §4); TLS handshake and hello share one [`PREAUTH_DEADLINE`]; the hello is
//! read into a [`PREAUTH_BUF`]-byte buffer. Refusals are counted; their log lines are rate-limited
//! per source ([`RefusalLog`](super::preauth::RefusalLog), also over all sources).

use std::fmt::Display;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::AsFd;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::BytesMut;
use mpa::config::Config;
use mpa::framing::{Hello, Inbound, InboundConnection, InboundError};
use mpa::gateway::{ConnCore, ConnKey};
use mpa::{BranchId, PathGroupId};
use socket2::SockAddr;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tracing::{info, warn};

use super::conn_io::{peer_invalidated, reader, writer, ConnCounters, ConnEnd, Decoder};
use super::preauth::{Permit, PREAUTH_BUF, PREAUTH_DEADLINE};
use super::socket::{apply_lowat, check_fallback, mark_class, mptcp_socket};
use super::subflows;
use super::{conn_name, reverse, Shared};
use crate::secure::{self, Rekey};
use crate::stats::{ConnState, ConnStatus, Stats};

/// Counts a refused inbound connection on `counter` and logs it (WARN, "inbound connection
/// refused: …") unless its source, or all sources together, already used their log budget
/// ([`super::preauth::RefusalLog`], in [`Shared`]); suppressed
/// lines are counted (`tunnel_refusal_logs_suppressed`), and the next line says how many.
fn refuse(
    sh: &Shared,
    peer: SocketAddr,
    group: PathGroupId,
    counter: &AtomicU64,
    why: impl Display,
) {
    Stats::inc(counter);
    let logged = sh
        .refusal_log
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .should_log(Instant::now(), peer.ip());
    match logged {
        Some(0) => warn!(%peer, pg = group.get(), "inbound connection refused: {why}"),
        Some(n) => warn!(%peer, pg = group.get(), not_logged = n,
            "inbound connection refused: {why} (and {n} more refusals from this address not logged)"),
        None => Stats::inc(&sh.stats.tunnel_refusal_logs_suppressed),
    }
}

/// Clear mode: whether `peer` is one of the WAN addresses of remote `branch`, or (no hello yet,
/// `branch` `None`) of any remote.
fn clear_source_allowed(config: &Config, peer: IpAddr, branch: Option<BranchId>) -> bool {
    let IpAddr::V4(a) = peer else {
        return false;
    };
    config
        .remote
        .iter()
        .filter(|r| branch.is_none_or(|b| b.get() == r.id))
        .any(|r| r.wan_addresses.contains(&a))
}

/// Opens the MPTCP listener of path group `group` on our port: `0xA00G` in the paper's port
/// plan, `first + G` in the extended one (`Config::ports`).
pub fn listen(
    sh: &Shared,
    group: PathGroupId,
    plan: mms_types::PortPlan,
) -> anyhow::Result<TcpListener> {
    let port = plan
        .listen_port(sh.own, group)
        .with_context(|| format!("branch {} has no listen port in port plan {plan}", sh.own))?;
    let s = mptcp_socket(&sh.opts)?;
    s.set_reuse_address(true)?;
    s.bind(&SockAddr::from(SocketAddrV4::new(
        Ipv4Addr::UNSPECIFIED,
        port,
    )))?;
    s.listen(128)?;
    apply_lowat(&s, &sh.opts);
    let l = TcpListener::from_std(std::net::TcpListener::from(s))?;
    info!(
        port = format_args!("{port:#06x}"),
        pg = group.get(),
        "listening"
    );
    Ok(l)
}

/// Accepts connections of path group `group` forever. A connection over the pre-auth caps, or in
/// clear mode from an address that is no remote's WAN address, is closed here (no task, no
/// buffer).
pub async fn accept_loop(sh: Arc<Shared>, listener: TcpListener, group: PathGroupId) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                if sh.tls.is_none() && !clear_source_allowed(&sh.config(), peer.ip(), None) {
                    refuse(
                        &sh,
                        peer,
                        group,
                        &sh.stats.tunnel_refused_source,
                        "clear mode, source address is no remote branch's WAN address",
                    );
                    continue;
                }
                let permit = match Permit::acquire(&sh.preauth, peer.ip()) {
                    Ok(p) => p,
                    Err(limit) => {
                        refuse(
                            &sh,
                            peer,
                            group,
                            &sh.stats.tunnel_refused_preauth_limit,
                            limit,
                        );
                        continue;
                    }
                };
                let sh = Arc::clone(&sh);
                tokio::spawn(async move { serve_inbound(sh, stream, peer, group, permit).await });
            }
            Err(e) => {
                warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn read_hello<R: AsyncRead + Unpin>(
    r: &mut R,
    ic: &mut InboundConnection,
    buf: &mut BytesMut,
) -> Result<Hello, ConnEnd> {
    loop {
        match ic.decode(buf) {
            Ok(Some(Inbound::Hello(h))) => return Ok(h),
            Ok(Some(Inbound::Frame(_))) => {
                return Err(ConnEnd::Invalid(InboundError::Hello(
                    mpa::framing::HelloError::BadMagic,
                )))
            }
            Ok(None) => {}
            Err(e) => return Err(ConnEnd::Invalid(e)),
        }
        buf.reserve(mpa::framing::MAX_HELLO_LEN);
        if r.read_buf(buf).await? == 0 {
            return Err(ConnEnd::Eof);
        }
    }
}

/// Checks the hello beyond the wire format: the path group must be the listener's and the source
/// a configured remote branch.
fn hello_policy(config: &Config, h: &Hello, group: PathGroupId) -> Result<(), String> {
    if h.path_group != group {
        return Err(format!(
            "hello for path group {} on the port of group {}",
            h.path_group, group
        ));
    }
    let known = config
        .remote
        .iter()
        .any(|r| r.id == h.src_branch.get() && r.path_groups.iter().any(|g| g.id == group.get()));
    if !known {
        return Err(format!(
            "hello from branch {} which is not configured with group {}",
            h.src_branch, group
        ));
    }
    Ok(())
}

/// Counts and logs (rate-limited, [`refuse`]) a failed inbound TLS handshake.
fn reject_handshake(sh: &Shared, peer: SocketAddr, group: PathGroupId, e: &io::Error) {
    let st = &sh.stats;
    let (counter, why) = match secure::rustls_error(e).map(pki::tls::classify) {
        Some(pki::tls::Rejection::Revoked) => (&st.tls_revoked, "revoked certificate"),
        Some(pki::tls::Rejection::UnknownCa) => (&st.tls_unknown_ca, "certificate not from our CA"),
        Some(pki::tls::Rejection::Handshake) | None => {
            (&st.tls_handshake_failed, "TLS handshake failed")
        }
    };
    refuse(sh, peer, group, counter, format_args!("{why} ({e})"));
}

/// An accepted connection: with `[tls]` the handshake first (client certificate from our CA,
/// not revoked, carrying a branch identity), then the hello inside TLS; both within
/// [`PREAUTH_DEADLINE`] of the accept. `permit` is given back once the hello passed.
async fn serve_inbound(
    sh: Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    group: PathGroupId,
    permit: Permit,
) {
    let deadline = tokio::time::Instant::now() + PREAUTH_DEADLINE;
    apply_lowat(&stream, &sh.opts);
    let fd = match stream.as_fd().try_clone_to_owned() {
        Ok(fd) => fd,
        Err(_) => return,
    };
    let Some(tls) = sh.tls.as_ref().map(|t| t.current()) else {
        let (r, w) = stream.into_split();
        serve_inbound_halves(sh, (r, w, None), None, fd, peer, group, (permit, deadline)).await;
        return;
    };
    let st = &sh.stats;
    let s = match tokio::time::timeout_at(
        deadline.min(tokio::time::Instant::now() + secure::HANDSHAKE_TIMEOUT),
        tls.acceptor.accept(secure::buffered_preauth(stream)),
    )
    .await
    {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            reject_handshake(&sh, peer, group, &e);
            return;
        }
        Err(_) => {
            refuse(
                &sh,
                peer,
                group,
                &st.tls_handshake_failed,
                "no TLS handshake in time",
            );
            return;
        }
    };
    // Authenticated (certificate from our CA, not revoked): the full read buffer from now on.
    let mut s = s;
    s.get_mut().0.grow();
    let cert = s
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| {
            (
                pki::identity_of(c),
                pki::serial_of(c),
                c.clone().into_owned(),
            )
        });
    let Some((Ok(identity), Ok(serial), cert)) = cert else {
        refuse(
            &sh,
            peer,
            group,
            &st.tls_wrong_branch,
            "certificate without a branch identity",
        );
        return;
    };
    Stats::inc(&st.tls_handshakes_in);
    let (r, w, rekey) = secure::split(s);
    serve_inbound_halves(
        Arc::clone(&sh),
        (r, w, Some(rekey)),
        Some((identity, serial, cert)),
        fd,
        peer,
        group,
        (permit, deadline),
    )
    .await;
}

/// The rest of an accepted connection: hello (checked against the certificate's identity with
/// TLS, against the source address in clear mode) by the pre-auth deadline, then reader +
/// keepalive writer until the end.
#[allow(clippy::too_many_arguments)]
async fn serve_inbound_halves<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    sh: Arc<Shared>,
    (mut r, mut w, mut rekey): (R, W, Option<Rekey>),
    peer_id: Option<(BranchId, u64, rustls::pki_types::CertificateDer<'static>)>,
    fd: std::os::fd::OwnedFd,
    peer: SocketAddr,
    group: PathGroupId,
    (permit, deadline): (Permit, tokio::time::Instant),
) {
    let st = &sh.stats;
    let mut ic = InboundConnection::new(sh.own);
    // Small until the hello passed; the reader grows it to its RX_CHUNK afterwards.
    let mut buf = BytesMut::with_capacity(PREAUTH_BUF);
    let hello = match tokio::time::timeout_at(deadline, read_hello(&mut r, &mut ic, &mut buf)).await
    {
        Ok(Ok(h)) => h,
        Ok(Err(e)) => {
            refuse(
                &sh,
                peer,
                group,
                &st.hello_rejected,
                format_args!("bad hello ({e})"),
            );
            return;
        }
        Err(_) => {
            refuse(&sh, peer, group, &st.hello_rejected, "no hello in time");
            return;
        }
    };
    if let Some((identity, serial, _)) = &peer_id {
        let (identity, serial) = (*identity, *serial);
        if identity != hello.src_branch {
            refuse(&sh, peer, group, &st.tls_wrong_branch, format_args!(
                "certificate of another branch than the hello's (certificate: branch {identity}, serial {serial}; hello: branch {})",
                hello.src_branch
            ));
            return;
        }
    }
    let config = sh.config();
    if let Err(why) = hello_policy(&config, &hello, group) {
        refuse(&sh, peer, group, &st.hello_rejected, why);
        return;
    }
    if peer_id.is_none() && !clear_source_allowed(&config, peer.ip(), Some(hello.src_branch)) {
        refuse(
            &sh,
            peer,
            group,
            &st.tunnel_refused_source,
            format_args!(
                "clear mode, source address is not a WAN address of branch {} (the hello's)",
                hello.src_branch
            ),
        );
        return;
    }
    let key = ConnKey {
        branch: hello.src_branch,
        group: hello.path_group,
        class: hello.class,
        index: hello.index,
    };
    // A remote behind NAT: this connection carries our traffic to it too (`reverse`).
    let ours = reverse::carries_our_traffic(&config, key)
        .then(|| sh.queue(&key))
        .flatten();
    drop((config, permit));
    Stats::inc(&st.accepts);
    mark_class(&fd, hello.class);
    let name = format!("{} from {peer}", conn_name("in", key));
    info!(conn = %name, "inbound tunnel connection up");
    let mut reported = false;
    let fallback = check_fallback(&sh, &fd, &name, &mut reported);
    sh.stats.set_conn(
        &name,
        ConnStatus {
            direction: "in".into(),
            remote_branch: hello.src_branch.get(),
            path_group: hello.path_group.get(),
            class: hello.class.to_string(),
            index: hello.index,
            state: ConnState::Up,
            fallback,
            established: 1,
            peer_serial: peer_id.as_ref().map(|(_, s, _)| *s),
            ..ConnStatus::default()
        },
    );
    let peer_check = peer_id
        .as_ref()
        .map(|(_, _, c)| (c.clone(), pki::tls::PeerRole::Client));
    if let Some(oq) = ours {
        let c = reverse::Accepted {
            r,
            w,
            rekey,
            decoder: ic,
            buf,
            fd,
        };
        let end = reverse::carry(&sh, &name, key, &oq, c, peer_check.as_ref(), reported).await;
        if matches!(end, ConnEnd::Dead(_)) {
            Stats::inc(&st.conn_dead);
        }
        info!(conn = %name, reason = %end, "inbound tunnel connection (carrying our traffic) closed");
        sh.stats.remove_conn(&name);
        return;
    }
    let cc = ConnCounters::new(&sh);
    // Liveness and keepalives: the core of an inbound connection (no queue).
    let core = Mutex::new(ConnCore::inbound(key));
    core.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .handle_up(Instant::now(), cc.lane);
    let keepalives = async {
        writer(&sh, &mut w, rekey.as_mut(), &core, None, fd.as_fd(), &cc)
            .await
            .err()
            .unwrap_or(ConnEnd::Eof)
    };
    // Its `mmsg status` entry, and fast failover on the subflows the remote dialled.
    let report = subflows::watch_inbound(&sh, &name, &fd, &cc, reported);
    let end: ConnEnd = tokio::select! {
        r = reader(&sh, &mut r, Decoder::In(ic), buf, &core, &cc) => r.err().unwrap_or(ConnEnd::Eof),
        e = keepalives => e,
        () = report => ConnEnd::Eof,
        e = peer_invalidated(&sh, &name, peer_check.as_ref()) => e,
    };
    if matches!(end, ConnEnd::Dead(_)) {
        Stats::inc(&st.conn_dead);
    }
    info!(conn = %name, reason = %end, "inbound tunnel connection closed");
    sh.stats.remove_conn(&name);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use mpa::Class;

    use super::*;
    use crate::tunnel::shared::example_config as config;

    #[test]
    fn hello_policy_checks_group_and_source() {
        let c = config(false);
        let b = |n| BranchId::new(n).unwrap();
        let g = |n| PathGroupId::new(n).unwrap();
        let hello = |src, pg| Hello {
            src_branch: b(src),
            dst_branch: b(1),
            path_group: g(pg),
            class: Class::TypeII,
            index: 0,
            auth: Vec::new(),
        };
        assert!(hello_policy(&c, &hello(2, 0), g(0)).is_ok());
        assert!(hello_policy(&c, &hello(2, 1), g(1)).is_ok());
        // Group of the hello differs from the listener's port.
        assert!(hello_policy(&c, &hello(2, 1), g(0)).is_err());
        // Unknown source branch.
        assert!(hello_policy(&c, &hello(3, 0), g(0)).is_err());
        // A group the remote is not configured with.
        assert!(hello_policy(&c, &hello(2, 5), g(5)).is_err());
    }

    #[test]
    fn clear_mode_accepts_only_the_remotes_wan_addresses() {
        let c = config(false);
        let r = &c.remote[0];
        let b = BranchId::new(r.id).unwrap();
        let other = BranchId::new(if r.id == 3 { 4 } else { 3 }).unwrap();
        for a in &r.wan_addresses {
            let a = IpAddr::V4(*a);
            assert!(clear_source_allowed(&c, a, None));
            assert!(clear_source_allowed(&c, a, Some(b)));
            assert!(
                !clear_source_allowed(&c, a, Some(other)),
                "another branch's hello"
            );
        }
        let rogue: IpAddr = "198.18.252.10".parse().unwrap();
        assert!(!clear_source_allowed(&c, rogue, None));
        assert!(!clear_source_allowed(&c, rogue, Some(b)));
        assert!(!clear_source_allowed(&c, "::1".parse().unwrap(), None));
    }
}
