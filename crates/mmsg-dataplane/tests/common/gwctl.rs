//! A small test controller speaking the gateway channel (`mpa::gwchan`, docs/gwchan.md) over
//! mutual TLS with a valid controller identity (`ssc.mms` from the test CA), for the netns
//! tests that need to push what a real `ssc` never would (a CRL of another CA, an older CRL)
//! and to see exactly when a gateway's renewal is answered. It listens on `127.0.0.1` inside a
//! gateway's network namespace (the socket is opened by a thread that joined the namespace).
//!
//! Registered sessions get every CRL handed to [`TestController::push_crl`]; a `renew` is
//! answered with a certificate for the presented key (proof checked) signed by the CA, the
//! current CRL ([`TestController::set_crl`]) and the CA certificate; every registration and
//! renewal is reported as an [`Event`].
#![allow(dead_code)]

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use mpa::gwchan::{self, ControllerMsg, Credentials, CrlUpdate, GatewayMsg, Hello};
use mpa::BranchId;
use pki::ca::{Ca, DEFAULT_VALIDITY};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// What the controller saw.
#[derive(Debug)]
pub enum Event {
    /// A gateway registered (hello + register over mutual TLS).
    Registered {
        /// The branch it registered as.
        branch: u8,
    },
    /// A renewal was answered.
    Renewed {
        /// The serial of the client certificate the gateway presented.
        presented: u64,
        /// The serial of the certificate sent back.
        serial: u64,
        /// The certificate sent back (PEM).
        cert_pem: String,
        /// When the credentials were written to the socket.
        sent: Instant,
    },
}

/// The running controller (its tokio runtime stops on drop).
#[derive(Debug)]
pub struct TestController {
    /// Where it listens (inside the namespace).
    pub addr: SocketAddr,
    /// Registrations and renewals, in order.
    pub events: mpsc::Receiver<Event>,
    crl: Arc<Mutex<String>>,
    push: tokio::sync::broadcast::Sender<String>,
    rt: tokio::runtime::Runtime,
}

/// A TCP listener on 127.0.0.1 (any port) inside network namespace `ns`.
pub fn listener_in(ns: &str) -> std::net::TcpListener {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let f = std::fs::File::open(&path).unwrap();
        // SAFETY: setns on a valid namespace fd; only this short-lived thread changes namespace.
        let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns {path}");
        std::net::TcpListener::bind("127.0.0.1:0").unwrap()
    })
    .join()
    .unwrap()
}

struct Shared {
    ca: Ca,
    crl: Arc<Mutex<String>>,
    push: tokio::sync::broadcast::Sender<String>,
    events: mpsc::Sender<Event>,
    next_serial: AtomicU64,
}

impl TestController {
    /// Starts the controller in namespace `ns` with the CA `ca` (its `ssc.mms` certificate is
    /// issued here) and `crl` as the current CRL; renewed certificates get serials from
    /// `first_serial` on.
    pub fn start(ns: &str, ca: Ca, crl: String, first_serial: u64) -> TestController {
        let listener = listener_in(ns);
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let server = ca
            .issue_server(pki::tls::CONTROLLER_NAME, 900_000, DEFAULT_VALIDITY)
            .unwrap();
        let config = pki::tls::controller_server_config(
            ca.cert_pem().as_bytes(),
            server.cert_pem.as_bytes(),
            server.key_pem.as_bytes(),
            None,
        )
        .unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (events_tx, events) = mpsc::channel();
        let (push, _) = tokio::sync::broadcast::channel(16);
        let crl = Arc::new(Mutex::new(crl));
        let sh = Arc::new(Shared {
            ca,
            crl: Arc::clone(&crl),
            push: push.clone(),
            events: events_tx,
            next_serial: AtomicU64::new(first_serial),
        });
        rt.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let acceptor = tokio_rustls::TlsAcceptor::from(config);
            loop {
                let Ok((s, _)) = listener.accept().await else {
                    continue;
                };
                let (acceptor, sh) = (acceptor.clone(), Arc::clone(&sh));
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(s).await else {
                        return;
                    };
                    let presented = tls
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .and_then(|c| Some((pki::identity_of(c).ok()?, pki::serial_of(c).ok()?)));
                    let _ = session(tls, presented, &sh).await;
                });
            }
        });
        TestController {
            addr,
            events,
            crl,
            push,
            rt,
        }
    }

    /// `tls:ADDR`, the gateway's `[controller] address`.
    pub fn address(&self) -> String {
        format!("tls:{}", self.addr)
    }

    /// Sends `crl_pem` as a `crl` message to every registered session now.
    pub fn push_crl(&self, crl_pem: &str) {
        let n = self.push.send(crl_pem.to_owned()).unwrap_or(0);
        assert!(n > 0, "no registered session to push the CRL to");
    }

    /// The CRL sent with renewed credentials from now on.
    pub fn set_crl(&self, crl_pem: &str) {
        *self.crl.lock().unwrap() = crl_pem.to_owned();
    }

    /// The next event within `secs`, or a failure naming `what`.
    pub fn next_event(&self, what: &str, secs: u64) -> Event {
        self.events
            .recv_timeout(Duration::from_secs(secs))
            .unwrap_or_else(|_| panic!("test controller: no {what} within {secs} s"))
    }
}

async fn send<W: AsyncWrite + Unpin>(w: &mut W, m: &ControllerMsg) -> std::io::Result<()> {
    let mut out = Vec::new();
    gwchan::encode(m, &mut out).map_err(std::io::Error::other)?;
    w.write_all(&out).await?;
    w.flush().await
}

async fn recv<R: AsyncRead + Unpin>(r: &mut R, buf: &mut Vec<u8>) -> std::io::Result<GatewayMsg> {
    loop {
        if let Some((m, n)) = gwchan::decode::<GatewayMsg>(buf).map_err(std::io::Error::other)? {
            buf.drain(..n);
            return Ok(m);
        }
        let mut chunk = [0u8; 16 * 1024];
        let n = r.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn session<S: AsyncRead + AsyncWrite + Unpin>(
    s: S,
    presented: Option<(BranchId, u64)>,
    sh: &Shared,
) -> std::io::Result<()> {
    let (mut r, mut w) = tokio::io::split(s);
    let mut buf = Vec::new();
    let GatewayMsg::Hello(h) = recv(&mut r, &mut buf).await? else {
        return Ok(());
    };
    send(
        &mut w,
        &ControllerMsg::Hello(Hello::with_protocol(h.negotiated(), "test-controller")),
    )
    .await?;
    match recv(&mut r, &mut buf).await? {
        GatewayMsg::Register(reg) => {
            assert_eq!(
                presented.map(|p| p.0.get()),
                Some(reg.branch_id),
                "register without the branch's certificate"
            );
            let mut rx = sh.push.subscribe();
            let _ = sh.events.send(Event::Registered {
                branch: reg.branch_id,
            });
            loop {
                tokio::select! {
                    pem = rx.recv() => {
                        let Ok(crl_pem) = pem else { continue };
                        send(&mut w, &ControllerMsg::Crl(CrlUpdate { crl_pem })).await?;
                    }
                    m = recv(&mut r, &mut buf) => { m?; }
                }
            }
        }
        GatewayMsg::Renew(req) => {
            let Some((branch, presented)) = presented else {
                return Ok(());
            };
            let key = pki::enrol::verify_request(&req.public_key, &req.proof).unwrap();
            let serial = sh.next_serial.fetch_add(1, Ordering::Relaxed);
            let issued = sh
                .ca
                .issue_for_key(branch, serial, DEFAULT_VALIDITY, &key)
                .unwrap();
            let not_after = pki::validity::validity_of(&issued.cert_der).unwrap().1;
            let crl_pem = sh.crl.lock().unwrap().clone();
            send(
                &mut w,
                &ControllerMsg::Credentials(Credentials {
                    cert_pem: issued.cert_pem.clone(),
                    serial,
                    not_after,
                    ca_pem: sh.ca.cert_pem().to_owned(),
                    crl_pem,
                }),
            )
            .await?;
            let _ = sh.events.send(Event::Renewed {
                presented,
                serial,
                cert_pem: issued.cert_pem,
                sent: Instant::now(),
            });
            let _ = w.shutdown().await;
            Ok(())
        }
        _ => Ok(()),
    }
}
