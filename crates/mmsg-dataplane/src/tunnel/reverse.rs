//! Accepted connections that carry our traffic (issue #20, docs/nat.md): a remote whose WAN
//! ports are all behind NAT (`[[remote]] nat = true`) cannot be dialled, so we open no outbound
//! connection to it; it dials us, and once such a connection is authenticated (with TLS: the
//! client certificate is the hello's branch, as for every accepted connection) it becomes that
//! remote's outbound connection of its (group, class): our writer drains the [`OutQueue`] onto
//! it, the reader delivers the remote's packets as on any accepted connection, and the subflow
//! sampler (creating no subflows: the NAT'd side dials them) keeps the figures and the fast
//! failover. The dialling side needs no change: its outbound connections already deliver what
//! arrives on them.
//!
//! One accepted connection per key carries the queue: a newer one (the remote reconnected before
//! the old one was found dead) takes over, and the old one ends.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::PoisonError;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use mpa::config::Config;
use mpa::framing::InboundConnection;
use tokio::io::{AsyncRead, AsyncWrite};

use super::conn_io::{
    peer_invalidated, publish_core, reader, writer, ConnCounters, ConnEnd, Decoder,
};
use super::socket::nat_keepalive;
use super::{subflows, ConnEvent, ConnKey, OutQueue, Shared, TunEvent};
use crate::secure::Rekey;

/// How often a new connection repeats its take-over call while the old one still holds the
/// queue (the old one may not be waiting for the call yet when it is first made).
const TAKEOVER_POLL: Duration = Duration::from_millis(50);

/// Whether an accepted connection of `key` carries our traffic: its remote is behind NAT only.
pub(super) fn carries_our_traffic(config: &Config, key: ConnKey) -> bool {
    config
        .remote
        .iter()
        .any(|r| r.nat && r.id == key.branch.get())
}

/// The halves of an authenticated accepted connection with its hello consumed.
pub(super) struct Accepted<R, W> {
    pub(super) r: R,
    pub(super) w: W,
    pub(super) rekey: Option<Rekey>,
    pub(super) decoder: InboundConnection,
    pub(super) buf: BytesMut,
    pub(super) fd: OwnedFd,
}

/// Runs accepted connection `c` of `key` as our outbound connection to that remote until it
/// ends (or a newer one takes over); returns why it ended.
pub(super) async fn carry<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    sh: &Shared,
    name: &str,
    key: ConnKey,
    oq: &OutQueue,
    c: Accepted<R, W>,
    peer: Option<&(
        rustls::pki_types::CertificateDer<'static>,
        pki::tls::PeerRole,
    )>,
    fallback_reported: bool,
) -> ConnEnd {
    let Accepted {
        mut r,
        mut w,
        mut rekey,
        decoder,
        buf,
        fd,
    } = c;
    let _holder = loop {
        oq.takeover.notify_waiters();
        if let Ok(g) = tokio::time::timeout(TAKEOVER_POLL, oq.attach.lock()).await {
            break g;
        }
    };
    nat_keepalive(&fd);
    let cc = ConnCounters::new(sh);
    oq.core
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .handle_up(Instant::now(), cc.lane);
    oq.up.store(true, Ordering::Relaxed);
    sh.send(TunEvent::Conn(ConnEvent { key, up: true }));
    let sample = subflows::run(sh, key, name, &fd, &[], 0, oq, &cc, fallback_reported);
    let end = tokio::select! {
        e = writer(sh, &mut w, rekey.as_mut(), &oq.core, Some(oq), fd.as_fd(), &cc) => e.err().unwrap_or(ConnEnd::Eof),
        e = reader(sh, &mut r, Decoder::In(decoder), buf, &oq.core, &cc) => e.err().unwrap_or(ConnEnd::Eof),
        () = sample => ConnEnd::Eof,
        e = peer_invalidated(sh, name, peer) => e,
        () = oq.takeover.notified() => ConnEnd::Replaced,
    };
    {
        // Queued packets go with the connection (counted), as for a dialled one.
        let mut core = oq.core.lock().unwrap_or_else(PoisonError::into_inner);
        let before = *core.counters();
        core.handle_down(Instant::now());
        publish_core(&sh.stats, &before, core.counters());
    }
    oq.up.store(false, Ordering::Relaxed);
    for a in [
        &oq.window_bps,
        &oq.inflight_bps,
        &oq.base_rtt_us,
        &oq.inflight_budget,
        &oq.delivery_rate,
    ] {
        a.store(0, Ordering::Relaxed);
    }
    sh.send(TunEvent::Conn(ConnEvent { key, up: false }));
    end
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use mpa::{BranchId, Class, PathGroupId};

    use super::*;
    use crate::tunnel::shared::example_config as config;

    #[test]
    fn only_connections_of_a_remote_behind_nat_carry_our_traffic() {
        let mut c = config(false);
        let id = c.remote[0].id;
        let key = ConnKey::first(
            BranchId::new(id).unwrap(),
            PathGroupId::new(0).unwrap(),
            Class::TypeII,
        );
        assert!(!carries_our_traffic(&c, key), "a public remote is dialled");
        c.remote[0].nat = true;
        assert!(carries_our_traffic(&c, key));
        let other = ConnKey {
            branch: BranchId::new(9).unwrap(),
            ..key
        };
        assert!(!carries_our_traffic(&c, other));
    }
}
