//! TLS on the tunnel connections (docs/security.md): the gateway's credentials (loaded from the
//! `[tls]` files, re-read on SIGHUP), the acceptor/connector built from them, the split of a TLS
//! stream into a reader and a writer half that still reach the rustls connection (key update),
//! and the rekey budget.
//!
//! Every connection is mutually authenticated before a byte of it is decoded: the acceptor
//! verifies the client certificate against the CA (and CRL), then reads the hello inside TLS and
//! requires the certificate's branch (`pki::identity_of`) to be the hello's source branch; the
//! dialer verifies the server's certificate is the dialled branch's (`pki::server_name`).

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use mpa::config::TlsConfig;
use mpa::BranchId;
use pki::tls::{Credentials, CrlExpired, CrlExpiredHook, TlsFiles};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::{TlsAcceptor, TlsConnector};
use tracing::warn;

use crate::stats::Stats;

/// At most one log line per this many seconds about handshakes refused for an expired CRL
/// (every refusal is counted in `handshake_refused_crl_expired`): a gateway with an expired
/// list refuses every connection attempt, and the log must not flood.
pub const CRL_EXPIRED_LOG_INTERVAL_S: u64 = 60;

/// Plaintext bytes sent on one connection before the writer asks for a key update (TLS 1.3
/// KeyUpdate with update_requested, so both directions get new keys). 1 GiB: far below the
/// AES-GCM confidentiality limit rustls enforces on its own (2^24.5 records, about 380 GB), so
/// a compromised traffic key exposes at most this much; at 1 Gbit/s that is one update per ~9 s
/// of full load, a 30-byte message each.
pub const REKEY_BYTES: u64 = 1 << 30;
/// Time after which a connection asks for a key update even when idle (keepalives keep it
/// writing): 10 minutes.
pub const REKEY_INTERVAL: Duration = Duration::from_secs(600);
mod read_buf;
pub use read_buf::{Buffered, TLS_PREAUTH_READ_BUF, TLS_READ_BUF};

/// Wraps a connected socket for TLS, with the full read buffer ([`TLS_READ_BUF`]): for the
/// connections we dial (the server proves its identity in the first round trip).
pub fn buffered(s: tokio::net::TcpStream) -> Buffered {
    Buffered::with_capacity(TLS_READ_BUF, s)
}

/// Wraps an accepted socket for TLS with the small pre-auth read buffer
/// ([`TLS_PREAUTH_READ_BUF`]); [`Buffered::grow`] it once the handshake completed.
pub fn buffered_preauth(s: tokio::net::TcpStream) -> Buffered {
    Buffered::with_capacity(TLS_PREAUTH_READ_BUF, s)
}

/// Longest time the handshake plus the hello may take on an accepted connection (the same
/// budget the clear hello had).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// The credentials in use and what was built from them.
#[derive(Clone)]
pub struct TlsCurrent {
    /// Accepts inbound connections.
    pub acceptor: TlsAcceptor,
    /// Dials outbound connections.
    pub connector: TlsConnector,
    /// Our certificate's serial number.
    pub serial: u64,
    /// The credentials themselves (to check established peers again after a reload).
    pub creds: Credentials,
}

impl std::fmt::Debug for TlsCurrent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsCurrent")
            .field("serial", &self.serial)
            .finish_non_exhaustive()
    }
}

/// The gateway's TLS state: the files and the credentials loaded from them (replaced as a whole
/// on reload; connections keep the configuration they started with).
pub struct TlsState {
    files: TlsFiles,
    own: BranchId,
    /// Counts (and logs) handshakes refused for an expired CRL.
    on_crl_expired: CrlExpiredHook,
    current: RwLock<Arc<TlsCurrent>>,
    /// Bumped on every successful reload; established connections check their peer again.
    generation: tokio::sync::watch::Sender<u64>,
}

impl std::fmt::Debug for TlsState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsState")
            .field("files", &self.files)
            .field("own", &self.own)
            .field("current", &self.current)
            .finish_non_exhaustive()
    }
}

/// Errors loading the credentials.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A required `[tls]` file is not configured (validation normally catches this).
    #[error("[tls] {0} is required with mode = \"tls\"")]
    Missing(&'static str),
    /// The private key file can be read by group or others.
    #[error("{path}: private key file has mode {mode:o}; it must be 0600 (chmod 600)")]
    KeyMode {
        /// The file.
        path: String,
        /// Its permission bits.
        mode: u32,
    },
    /// Reading the key file's metadata.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: io::Error,
    },
    /// The credentials themselves.
    #[error(transparent)]
    Tls(#[from] pki::tls::TlsError),
    /// Neither the certificate/key files nor their `.prev` copies form a matching pair.
    #[error(transparent)]
    Pair(#[from] pki::files::PairError),
    /// On reload: the CRL in `crl_file` is older than the one in use (it would un-revoke).
    #[error("{path}: crl_number {got} is older than the CRL in use (crl_number {have}); keeping the current one")]
    CrlReplay {
        /// The CRL file.
        path: String,
        /// The number in use.
        have: u128,
        /// The number in the file.
        got: u128,
    },
    /// On reload: a CRL was in use and the files now have none.
    #[error("a CRL (crl_number {have}) is in use and the [tls] files now have none; keeping the current one")]
    CrlGone {
        /// The number in use.
        have: u128,
    },
}

fn check_key_mode(path: &Path) -> Result<(), LoadError> {
    let meta = std::fs::metadata(path).map_err(|source| LoadError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(LoadError::KeyMode {
            path: path.display().to_string(),
            mode,
        });
    }
    Ok(())
}

fn load_current(
    files: &TlsFiles,
    own: BranchId,
    hook: &CrlExpiredHook,
) -> Result<TlsCurrent, LoadError> {
    check_key_mode(&files.key)?;
    let mut creds = Credentials::load(files, own)?;
    creds.set_crl_expired_hook(Arc::clone(hook));
    Ok(TlsCurrent {
        acceptor: TlsAcceptor::from(creds.server_config()?),
        connector: TlsConnector::from(creds.client_config()?),
        serial: creds.serial,
        creds,
    })
}

/// The hook every verifier calls when it refuses a handshake for an expired CRL: counts it and
/// logs at most one line per [`CRL_EXPIRED_LOG_INTERVAL_S`], naming the CRL's `next_update`.
pub fn crl_expired_hook(stats: Arc<Stats>, crl_file: Option<std::path::PathBuf>) -> CrlExpiredHook {
    let last_log = AtomicU64::new(0);
    Arc::new(move |e: &CrlExpired| {
        Stats::inc(&stats.handshake_refused_crl_expired);
        let prev = last_log.load(Ordering::Relaxed);
        let due = prev == 0 || e.now >= prev.saturating_add(CRL_EXPIRED_LOG_INTERVAL_S);
        if due
            && last_log
                .compare_exchange(prev, e.now.max(1), Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            warn!(
                crl_number = %e.number,
                next_update = %pki::crl::rfc3339(e.next_update),
                crl_file = %crl_file.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
                "TLS handshake refused: the CRL expired at {} (its next_update); revocation fails \
                 closed, so no new tunnel connection is accepted or dialled until a newer CRL is \
                 in crl_file (pushed by the controller, or replaced by hand and SIGHUP)",
                pki::crl::rfc3339(e.next_update)
            );
        }
    })
}

impl TlsState {
    /// Loads the `[tls]` files of branch `own` (mode must be `tls`); handshakes refused for an
    /// expired CRL are counted in `stats`. At start, a certificate/key pair torn by a killed
    /// renewal is replaced by the previous pair first ([`pki::files::recover_pair`]).
    pub fn load(cfg: &TlsConfig, own: BranchId, stats: Arc<Stats>) -> Result<TlsState, LoadError> {
        let files = TlsFiles {
            ca: cfg.ca_file.clone().ok_or(LoadError::Missing("ca_file"))?,
            cert: cfg
                .cert_file
                .clone()
                .ok_or(LoadError::Missing("cert_file"))?,
            key: cfg.key_file.clone().ok_or(LoadError::Missing("key_file"))?,
            crl: cfg.crl_file.clone(),
        };
        // A renewal killed between its two renames left a new key next to the old
        // certificate: the previous pair comes back (pki::files::write_pair).
        if pki::files::recover_pair(&files.cert, &files.key)? == pki::files::PairState::Restored {
            warn!(
                cert = %files.cert.display(),
                key = %files.key.display(),
                "certificate and key did not match (a renewal was interrupted): the previous \
                 pair (.prev) is back in place; the next renewal check renews again"
            );
        }
        let on_crl_expired = crl_expired_hook(stats, files.crl.clone());
        let current = load_current(&files, own, &on_crl_expired)?;
        Ok(TlsState {
            files,
            own,
            on_crl_expired,
            current: RwLock::new(Arc::new(current)),
            generation: tokio::sync::watch::Sender::new(0),
        })
    }

    /// The files the credentials come from.
    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// Re-reads the files (certificate/key rotation, new CRL). On success new connections use
    /// the new credentials and the new serial is returned; on failure the old ones stay.
    /// A CRL older than the one in use (lower `crl_number`), or none after one, is refused: the
    /// files on disk never un-revoke.
    pub fn reload(&self) -> Result<u64, LoadError> {
        let next = load_current(&self.files, self.own, &self.on_crl_expired)?;
        if let Some(have) = self.current().creds.crl {
            match next.creds.crl {
                None => return Err(LoadError::CrlGone { have: have.number }),
                Some(got) if got.number < have.number => {
                    return Err(LoadError::CrlReplay {
                        path: self
                            .files
                            .crl
                            .as_ref()
                            .map(|p| p.display().to_string())
                            .unwrap_or_default(),
                        have: have.number,
                        got: got.number,
                    })
                }
                Some(_) => {}
            }
        }
        let serial = next.serial;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
        self.generation.send_modify(|g| *g += 1);
        Ok(serial)
    }

    /// Resolves when, after a reload, the peer of an established connection (its certificate
    /// `cert`, in `role`) no longer passes the new credentials (revoked by the new CRL, or no
    /// longer from the CA); returns the reason. Never resolves otherwise.
    pub async fn peer_invalidated(
        &self,
        cert: &rustls::pki_types::CertificateDer<'_>,
        role: pki::tls::PeerRole,
    ) -> rustls::Error {
        let mut rx = self.generation.subscribe();
        loop {
            if rx.changed().await.is_err() {
                // The state is gone (shutdown): never resolve.
                std::future::pending::<()>().await;
            }
            if let Err(e) = self.current().creds.check_peer(cert, role) {
                return e;
            }
        }
    }

    /// The credentials for a new connection.
    pub fn current(&self) -> Arc<TlsCurrent> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The rustls error inside an IO error from tokio-rustls, if any.
pub fn rustls_error(e: &io::Error) -> Option<&rustls::Error> {
    e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>())
}

// ---------------------------------------------------------------------------------------------
// Split with access to the connection
// ---------------------------------------------------------------------------------------------

/// A stream whose rustls connection can be asked for a key update.
pub trait KeyUpdate {
    /// Queues a TLS 1.3 KeyUpdate (update_requested); it is sent with the next write or flush.
    fn refresh_traffic_keys(&mut self) -> Result<(), rustls::Error>;
}

impl<IO> KeyUpdate for tokio_rustls::client::TlsStream<IO> {
    fn refresh_traffic_keys(&mut self) -> Result<(), rustls::Error> {
        self.get_mut().1.refresh_traffic_keys()
    }
}

impl<IO> KeyUpdate for tokio_rustls::server::TlsStream<IO> {
    fn refresh_traffic_keys(&mut self) -> Result<(), rustls::Error> {
        self.get_mut().1.refresh_traffic_keys()
    }
}

/// Splits a stream into a read half, a write half and a [`Rekey`] handle, all sharing it behind
/// a mutex. The mutex is only held inside one `poll_*` call (never across an await), and the
/// tunnel polls both halves from one task, so it is never contended.
pub fn split<S>(s: S) -> (ReadHalf<S>, WriteHalf<S>, Rekey)
where
    S: AsyncRead + AsyncWrite + KeyUpdate + Unpin + Send + 'static,
{
    let inner = Arc::new(Mutex::new(s));
    let refresh_inner = Arc::clone(&inner);
    let refresh = Box::new(move || {
        refresh_inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .refresh_traffic_keys()
    });
    (
        ReadHalf(Arc::clone(&inner)),
        WriteHalf(inner),
        Rekey::new(refresh, REKEY_BYTES, REKEY_INTERVAL, Instant::now()),
    )
}

/// The read half of [`split`].
#[derive(Debug)]
pub struct ReadHalf<S>(Arc<Mutex<S>>);

/// The write half of [`split`].
#[derive(Debug)]
pub struct WriteHalf<S>(Arc<Mutex<S>>);

impl<S: AsyncRead + Unpin> AsyncRead for ReadHalf<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut g = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        Pin::new(&mut *g).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteHalf<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut g = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        Pin::new(&mut *g).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut g = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        Pin::new(&mut *g).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut g = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        Pin::new(&mut *g).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut g = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        Pin::new(&mut *g).poll_shutdown(cx)
    }
}

type RefreshFn = Box<dyn FnMut() -> Result<(), rustls::Error> + Send>;

/// The rekey budget of one connection: after `bytes` written or `interval` elapsed, the next
/// [`Rekey::on_written`] queues a key update.
pub struct Rekey {
    refresh: RefreshFn,
    budget_bytes: u64,
    interval: Duration,
    written: u64,
    since: Instant,
    updates: u64,
}

impl std::fmt::Debug for Rekey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rekey")
            .field("written", &self.written)
            .field("updates", &self.updates)
            .finish_non_exhaustive()
    }
}

impl Rekey {
    /// A budget of `bytes` or `interval` from `now`.
    pub fn new(refresh: RefreshFn, bytes: u64, interval: Duration, now: Instant) -> Rekey {
        Rekey {
            refresh,
            budget_bytes: bytes,
            interval,
            written: 0,
            since: now,
            updates: 0,
        }
    }

    /// Replaces the budget (tests use small ones).
    pub fn set_budget(&mut self, bytes: u64, interval: Duration) {
        self.budget_bytes = bytes;
        self.interval = interval;
    }

    /// Records `n` bytes written; queues a key update when the budget is spent (returns true
    /// then). The caller flushes afterwards so the KeyUpdate leaves at once.
    pub fn on_written(&mut self, n: usize, now: Instant) -> io::Result<bool> {
        self.written = self.written.saturating_add(n as u64);
        if self.written < self.budget_bytes && now.duration_since(self.since) < self.interval {
            return Ok(false);
        }
        (self.refresh)().map_err(io::Error::other)?;
        self.written = 0;
        self.since = now;
        self.updates += 1;
        Ok(true)
    }

    /// Key updates queued so far.
    pub fn updates(&self) -> u64 {
        self.updates
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
    use super::*;
    use pki::ca::{Ca, DEFAULT_VALIDITY};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn creds(ca: &Ca, b: u8) -> Credentials {
        let b = BranchId::new(b).unwrap();
        let g = ca
            .issue_gateway(b, u64::from(b.get()), DEFAULT_VALIDITY)
            .unwrap();
        Credentials::from_pem(
            ca.cert_pem().as_bytes(),
            g.cert_pem.as_bytes(),
            g.key_pem.as_bytes(),
            None,
            b,
        )
        .unwrap()
    }

    /// Seconds (wall, one thread) to move `total` bytes in 256 KiB writes and 128 KiB reads
    /// (the tunnel's batch and RX_CHUNK) over an in-memory pipe: clear, or TLS through the
    /// split halves with rustls' send buffer limit (`send_buf`; None: its 64 KiB default).
    async fn move_bytes(total: usize, tls: bool, send_buf: Option<usize>) -> f64 {
        const PIPE: usize = 4 * 1024 * 1024;
        let ca = Ca::generate("t").unwrap();
        let (c1, c2) = (creds(&ca, 1), creds(&ca, 2));
        let (a, b) = tokio::io::duplex(PIPE);
        let batch = vec![0x5au8; 256 * 1024];
        let mut rbuf = vec![0u8; 128 * 1024];
        let (mut w, mut r): (
            Box<dyn tokio::io::AsyncWrite + Unpin + Send>,
            Box<dyn tokio::io::AsyncRead + Unpin + Send>,
        ) = if tls {
            let acceptor = TlsAcceptor::from(c2.server_config().unwrap());
            let connector = TlsConnector::from(c1.client_config().unwrap());
            let server = tokio::spawn(async move { acceptor.accept(b).await.unwrap() });
            let mut c = connector
                .connect(pki::server_name(BranchId::new(2).unwrap()), a)
                .await
                .unwrap();
            if let Some(limit) = send_buf {
                c.get_mut().1.set_buffer_limit(Some(limit));
            }
            let (_cr, cw, _) = split(c);
            let (sr, _sw, _) = split(server.await.unwrap());
            (Box::new(cw), Box::new(sr))
        } else {
            (Box::new(a), Box::new(b))
        };
        let started = Instant::now();
        let writer = async {
            let mut sent = 0;
            while sent < total {
                w.write_all(&batch).await.unwrap();
                w.flush().await.unwrap();
                sent += batch.len();
            }
        };
        let reader = async {
            let mut got = 0;
            while got < total {
                got += r.read(&mut rbuf).await.unwrap();
            }
        };
        tokio::join!(writer, reader);
        started.elapsed().as_secs_f64()
    }

    /// Micro benchmark of the TLS record path (run with `cargo test --release -p
    /// mmsg-dataplane --lib secure::tests::bench_record_path -- --ignored --nocapture`): one
    /// thread moves 1 GiB clear and through the split TLS halves with several send buffer
    /// limits; prints seconds per GB (best of 3, alternating) and ring's AES-128-GCM seal alone
    /// (16 KiB records), the floor no record layer can go under.
    #[tokio::test(flavor = "current_thread")]
    #[ignore = "micro benchmark, prints timings"]
    async fn bench_record_path() {
        const TOTAL: usize = 1 << 30;
        let gb = TOTAL as f64 / 1e9;
        const KIB: usize = 1024;
        // (label, TLS, send buffer limit; None: rustls' 64 KiB default, what the tunnel uses).
        let cases: [(&str, bool, Option<usize>); 6] = [
            ("clear", false, None),
            ("TLS, 64 KiB send buffer (as used)", true, None),
            ("TLS, 16 KiB send buffer", true, Some(16 * KIB)),
            ("TLS, 32 KiB send buffer", true, Some(32 * KIB)),
            ("TLS, 128 KiB send buffer", true, Some(128 * KIB)),
            (
                "TLS, 320 KiB send buffer (a whole batch)",
                true,
                Some(320 * KIB),
            ),
        ];
        let mut best = [f64::MAX; 6];
        for _ in 0..3 {
            for (i, (_, tls, send_buf)) in cases.iter().enumerate() {
                let t = move_bytes(TOTAL, *tls, *send_buf).await / gb;
                best[i] = best[i].min(t);
            }
        }
        for ((label, ..), t) in cases.iter().zip(best) {
            println!("{label}: {t:.3} s/GB");
        }
        // AES-128-GCM seal alone over the same bytes, 16 KiB records.
        let key = ring::aead::LessSafeKey::new(
            ring::aead::UnboundKey::new(&ring::aead::AES_128_GCM, &[7u8; 16]).unwrap(),
        );
        let mut rec = vec![0u8; 16 * 1024];
        let started = Instant::now();
        for i in 0..(TOTAL / rec.len()) as u64 {
            let mut nonce = [0u8; 12];
            nonce[4..].copy_from_slice(&i.to_be_bytes());
            let _tag = key
                .seal_in_place_separate_tag(
                    ring::aead::Nonce::assume_unique_for_key(nonce),
                    ring::aead::Aad::empty(),
                    &mut rec,
                )
                .unwrap();
        }
        let seal = started.elapsed().as_secs_f64() / gb;
        println!("AES-128-GCM seal alone, 16 KiB records: {seal:.3} s/GB");
        assert!(best.iter().all(|t| t.is_finite() && *t > 0.0));
    }

    /// Many key updates in both directions while data flows through the split halves: every byte
    /// arrives intact, in order.
    #[tokio::test]
    async fn data_survives_key_updates_through_the_split() {
        let ca = Ca::generate("t").unwrap();
        let (c1, c2) = (creds(&ca, 1), creds(&ca, 2));
        let (a, b) = tokio::io::duplex(64 * 1024);
        let acceptor = TlsAcceptor::from(c2.server_config().unwrap());
        let connector = TlsConnector::from(c1.client_config().unwrap());
        let server = tokio::spawn(async move {
            let s = acceptor.accept(b).await.unwrap();
            let (mut r, mut w, mut rk) = split(s);
            rk.set_budget(u64::MAX, Duration::ZERO);
            let mut got = Vec::new();
            let mut buf = vec![0u8; 4096];
            loop {
                let n = r.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
                // The acceptor also asks for updates (its keepalive path).
                w.write_all(b"k").await.unwrap();
                rk.on_written(1, Instant::now()).unwrap();
                w.flush().await.unwrap();
            }
            (got, rk.updates())
        });
        let s = connector
            .connect(pki::server_name(BranchId::new(2).unwrap()), a)
            .await
            .unwrap();
        let (mut r, mut w, mut rk) = split(s);
        rk.set_budget(10_000, Duration::from_secs(3600));
        let data: Vec<u8> = (0..400_000u32).map(|i| (i % 251) as u8).collect();
        let drain = tokio::spawn(async move {
            let mut sink = vec![0u8; 4096];
            while r.read(&mut sink).await.is_ok_and(|n| n > 0) {}
        });
        for chunk in data.chunks(3000) {
            w.write_all(chunk).await.unwrap();
            rk.on_written(chunk.len(), Instant::now()).unwrap();
            w.flush().await.unwrap();
        }
        assert!(rk.updates() >= 30, "{} updates", rk.updates());
        w.shutdown().await.unwrap();
        let (got, server_updates) = server.await.unwrap();
        drain.abort();
        assert_eq!(got.len(), data.len());
        assert!(got == data, "payload corrupted across key updates");
        assert!(server_updates > 0);
    }
}
