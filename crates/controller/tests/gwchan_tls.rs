//! The gateway channel over TLS with `ssc`'s CA ([`controller::authority`]), over real sockets
//! (TLS on TCP, clear TCP, a unix socket), with a fake gateway:
//!
//! - enrolment: clear TCP refused (`insecure`); a token of another branch, an unknown, a used
//!   and an expired token refused, each counted once; the happy path over server-authenticated
//!   TLS returns a certificate for the key the gateway generated (identity `branch-1.mms`,
//!   verifies against the returned CA), and over the unix socket too;
//! - mutual TLS: the right certificate registers and gets its config; a certificate of branch 1
//!   registering as branch 2 is refused (`wrong_branch`), no certificate is refused
//!   (`no_certificate`); a certificate of a foreign CA fails the handshake;
//! - renewal over mutual TLS yields a new serial that registers; revoking the old serial makes
//!   the listener refuse it in the handshake;
//! - zero-touch set-up (protocol 4): the certificate's branch gets its LAN, WAN ports and
//!   config; another branch (`wrong_branch`), no certificate, clear TCP (`no_certificate`) and
//!   protocol 3 (`version`) are refused;
//! - CRL push (protocol 3): a registered protocol 3 session gets the current CRL, and at a
//!   revocation the new one at once; the session whose own certificate is revoked then gets
//!   `error` `revoked`; a protocol 2 session is answered with hello 2 and never gets a `crl`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use controller::authority::{unix_now, Authority};
use controller::gwchan::{GwChan, GwChanConfig, Registry};
use controller::inventory::Inventory;
use controller::path_group::PathGroups;
use controller::store::Store;
use controller::wrr::Wrr;
use mpa::gwchan::{
    self, ControllerMsg, Credentials, Enrol, GatewayMsg, Hello, Register, Renew, SetupRequest,
    WanSeen,
};
use pki::enrol::KeyRequest;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};

struct Peer<S> {
    s: S,
    buf: Vec<u8>,
    /// CRLs pushed so far (protocol 3), in order.
    crls: Vec<String>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Peer<S> {
    fn new(s: S) -> Self {
        Peer {
            s,
            buf: Vec::new(),
            crls: Vec::new(),
        }
    }

    /// The next message that is not a pushed CRL (those go to `crls`).
    async fn next(&mut self) -> Option<ControllerMsg> {
        loop {
            match self.recv().await {
                Some(ControllerMsg::Crl(c)) => self.crls.push(c.crl_pem),
                m => return m,
            }
        }
    }

    /// Waits for the next pushed CRL; any other message is a failure.
    async fn next_crl(&mut self) -> String {
        match self.recv().await {
            Some(ControllerMsg::Crl(c)) => c.crl_pem,
            other => panic!("expected a crl, got {other:?}"),
        }
    }

    async fn send(&mut self, m: &GatewayMsg) {
        let mut out = Vec::new();
        gwchan::encode(m, &mut out).unwrap();
        // A server that refused us in the handshake may have closed already.
        let _ = self.s.write_all(&out).await;
    }

    /// The next message, or `None` when the server closed the stream (or the TLS session
    /// failed).
    async fn recv(&mut self) -> Option<ControllerMsg> {
        let fut = async {
            loop {
                if let Some((m, n)) = gwchan::decode::<ControllerMsg>(&self.buf).unwrap() {
                    self.buf.drain(..n);
                    return Some(m);
                }
                let mut chunk = [0u8; 4096];
                let n = self.s.read(&mut chunk).await.unwrap_or(0);
                if n == 0 {
                    return None;
                }
                self.buf.extend_from_slice(&chunk[..n]);
            }
        };
        tokio::time::timeout(Duration::from_secs(5), fut)
            .await
            .expect("no message from ssc within 5 s")
    }

    /// Hello (our protocol) + `first`; returns the first message after the controller's
    /// hello that is not a pushed CRL.
    async fn open(&mut self, first: GatewayMsg) -> Option<ControllerMsg> {
        self.open_as(gwchan::PROTOCOL_VERSION, first).await
    }

    /// As [`Peer::open`], announcing `protocol`; the controller must answer with it.
    async fn open_as(&mut self, protocol: u32, first: GatewayMsg) -> Option<ControllerMsg> {
        self.send(&GatewayMsg::Hello(Hello::with_protocol(
            protocol, "fake-gw",
        )))
        .await;
        self.send(&first).await;
        match self.recv().await {
            Some(ControllerMsg::Hello(h)) => assert_eq!(h.protocol, protocol),
            None => return None,
            other => panic!("expected hello, got {other:?}"),
        }
        self.next().await
    }
}

fn register(branch: u8) -> GatewayMsg {
    GatewayMsg::Register(Register {
        branch_id: branch,
        software_version: "0.0.0-test".into(),
        wan: vec![WanSeen {
            name: "wan0".into(),
            address: format!("198.18.{}.2/24", 10 * branch),
        }],
        config_version: 0,
    })
}

fn enrol(branch: u8, token: &str, key: &KeyRequest) -> GatewayMsg {
    GatewayMsg::Enrol(Enrol {
        branch_id: branch,
        token: token.into(),
        public_key: key.public_key.clone(),
        proof: key.proof.clone(),
    })
}

fn error_code(m: Option<ControllerMsg>) -> (String, String) {
    match m {
        Some(ControllerMsg::Error(e)) => (e.code, e.message),
        other => panic!("expected an error, got {other:?}"),
    }
}

fn credentials(m: Option<ControllerMsg>) -> Credentials {
    match m {
        Some(ControllerMsg::Credentials(c)) => c,
        other => panic!("expected credentials, got {other:?}"),
    }
}

async fn tls(
    addr: SocketAddr,
    ca_pem: &str,
    client: Option<(&str, &str)>,
) -> std::io::Result<Peer<tokio_rustls::client::TlsStream<TcpStream>>> {
    let cfg = pki::tls::controller_client_config(
        ca_pem.as_bytes(),
        client.map(|(c, k)| (c.as_bytes(), k.as_bytes())),
    )
    .unwrap();
    let tcp = TcpStream::connect(addr).await?;
    let s = tokio_rustls::TlsConnector::from(cfg)
        .connect(pki::tls::controller_server_name(), tcp)
        .await?;
    Ok(Peer::new(s))
}

fn store_2x2(dir: &Path) -> Arc<Store> {
    let store = Arc::new(Store::open(&dir.join("ssc.redb")).unwrap());
    let inv = Inventory::from_toml(&common::example("inventory-2x2.toml")).unwrap();
    let groups = PathGroups::from_toml(&inv, &common::example("paths-2x2.toml")).unwrap();
    store.import(inv.to_file(), groups.to_file(), None).unwrap();
    store
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enrolment_mutual_tls_renewal_and_revocation() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_2x2(dir.path());
    let authority = Arc::new(
        Authority::open(
            &dir.path().join("ca"),
            Arc::clone(&store),
            Duration::from_secs(24 * 3600),
        )
        .unwrap(),
    );
    // The CA key is 0600.
    {
        use std::os::unix::fs::PermissionsExt;
        let m = std::fs::metadata(dir.path().join("ca/ca.key")).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o600);
    }
    let registry = Arc::new(Registry::new());
    registry.set_authority(Arc::clone(&authority));
    let sock = dir.path().join("gw.sock");
    let gwc = GwChan::bind(
        &GwChanConfig {
            listen: Some("127.0.0.1:0".parse().unwrap()),
            tls_listen: Some("127.0.0.1:0".parse().unwrap()),
            unix: vec![sock.clone()],
            ..GwChanConfig::default()
        },
        Arc::clone(&registry),
    )
    .await
    .unwrap();
    let clear = gwc.local_addr().unwrap();
    let addr = gwc.tls_addr().unwrap();
    tokio::spawn(gwc.run(
        store.subscribe(),
        Arc::new(Mutex::new(Wrr::default())),
        Arc::new(tokio::sync::Notify::new()),
        std::future::pending(),
    ));
    let ca = authority.ca_pem().to_owned();

    let t1 = authority.new_token(1, Duration::from_secs(3600)).unwrap();
    assert_eq!(t1.token.len(), 64);
    assert_eq!(
        t1.ca_fingerprint,
        pki::enrol::fingerprint(&ca).unwrap(),
        "the printed fingerprint pins this CA"
    );
    assert!(!format!("{t1:?}").contains(&t1.token));
    let key1 = KeyRequest::generate().unwrap();

    // Clear TCP: refused before the token is even looked at (it is not consumed).
    let mut p = Peer::new(TcpStream::connect(clear).await.unwrap());
    let (code, _) = error_code(p.open(enrol(1, &t1.token, &key1)).await);
    assert_eq!(code, "insecure");

    // The token is for branch 1, not 2.
    let mut p = tls(addr, &ca, None).await.unwrap();
    let (code, msg) = error_code(p.open(enrol(2, &t1.token, &key1)).await);
    assert_eq!(code, "enrol_refused");
    assert!(msg.contains("another branch"), "{msg}");
    assert!(!msg.contains(&t1.token));

    // Unknown token.
    let mut p = tls(addr, &ca, None).await.unwrap();
    let (_, msg) = error_code(p.open(enrol(1, "00ff", &key1)).await);
    assert!(msg.contains("unknown"), "{msg}");

    // Expired token (stored with an expiry in the past).
    let expired = pki::enrol::random_token().unwrap();
    store
        .add_enrol_token(
            &pki::enrol::token_hash(&expired),
            2,
            unix_now() - 1,
            unix_now(),
        )
        .unwrap();
    let mut p = tls(addr, &ca, None).await.unwrap();
    let (_, msg) = error_code(p.open(enrol(2, &expired, &key1)).await);
    assert!(msg.contains("expired"), "{msg}");

    // A key request whose proof is for another key.
    let other = KeyRequest::generate().unwrap();
    let mut p = tls(addr, &ca, None).await.unwrap();
    let bad = GatewayMsg::Enrol(Enrol {
        branch_id: 1,
        token: t1.token.clone(),
        public_key: other.public_key.clone(),
        proof: key1.proof.clone(),
    });
    let (_, msg) = error_code(p.open(bad).await);
    assert!(msg.contains("proof"), "{msg}");

    // Happy path: server-authenticated TLS, no client certificate.
    let mut p = tls(addr, &ca, None).await.unwrap();
    let c1 = credentials(p.open(enrol(1, &t1.token, &key1)).await);
    assert!(
        p.recv().await.is_none(),
        "the controller closes after credentials"
    );
    let der = {
        use rustls::pki_types::pem::PemObject;
        rustls::pki_types::CertificateDer::from_pem_slice(c1.cert_pem.as_bytes()).unwrap()
    };
    assert_eq!(pki::identity_of(&der).unwrap().get(), 1);
    assert_eq!(pki::serial_of(&der).unwrap(), c1.serial);
    assert_eq!(c1.ca_pem, ca);
    assert!(c1.crl_pem.contains("BEGIN X509 CRL"));
    // The certificate and the gateway's own key form working tunnel credentials.
    pki::tls::Credentials::from_pem(
        c1.ca_pem.as_bytes(),
        c1.cert_pem.as_bytes(),
        key1.key_pem.as_bytes(),
        Some(c1.crl_pem.as_bytes()),
        mpa::BranchId::new(1).unwrap(),
    )
    .unwrap();

    // Used once.
    let mut p = tls(addr, &ca, None).await.unwrap();
    let (_, msg) = error_code(p.open(enrol(1, &t1.token, &key1)).await);
    assert!(msg.contains("already used"), "{msg}");

    // Enrolment over the unix socket (filesystem permissions protect it).
    let t2 = authority.new_token(2, Duration::from_secs(60)).unwrap();
    let key2 = KeyRequest::generate().unwrap();
    let mut p = Peer::new(UnixStream::connect(&sock).await.unwrap());
    let c2 = credentials(p.open(enrol(2, &t2.token, &key2)).await);
    assert!(c2.serial > c1.serial);

    // Mutual TLS: the right certificate registers and gets its config.
    let mut g1 = tls(addr, &ca, Some((&c1.cert_pem, &key1.key_pem)))
        .await
        .unwrap();
    match g1.open(register(1)).await {
        Some(ControllerMsg::Config(c)) => assert_eq!(c.branch_id, 1),
        other => panic!("expected a config, got {other:?}"),
    }
    // Branch 1's certificate claiming branch 2.
    let mut p = tls(addr, &ca, Some((&c1.cert_pem, &key1.key_pem)))
        .await
        .unwrap();
    assert_eq!(error_code(p.open(register(2)).await).0, "wrong_branch");
    // No certificate.
    let mut p = tls(addr, &ca, None).await.unwrap();
    assert_eq!(error_code(p.open(register(2)).await).0, "no_certificate");
    // Renewal needs a certificate too.
    let mut p = tls(addr, &ca, None).await.unwrap();
    let k = KeyRequest::generate().unwrap();
    let renew = |k: &KeyRequest| {
        GatewayMsg::Renew(Renew {
            public_key: k.public_key.clone(),
            proof: k.proof.clone(),
        })
    };
    assert_eq!(error_code(p.open(renew(&k)).await).0, "no_certificate");
    // Zero-touch set-up (protocol 4): the branch's whole config, only for the certificate's
    // branch, never without a certificate, never below protocol 4.
    let setup = |b: u8| GatewayMsg::Setup(SetupRequest { branch_id: b });
    let mut p = tls(addr, &ca, Some((&c1.cert_pem, &key1.key_pem)))
        .await
        .unwrap();
    match p.open(setup(1)).await {
        Some(ControllerMsg::Setup(s)) => {
            assert_eq!(s.branch_id, 1);
            assert_eq!(s.lan_prefixes, vec!["198.19.1.0/24".parse().unwrap()]);
            let wan: Vec<(String, String)> = s
                .wan
                .iter()
                .map(|w| (w.name.clone(), w.address.to_string()))
                .collect();
            assert_eq!(
                wan,
                [
                    ("wan0".into(), "198.18.10.2/24".into()),
                    ("wan1".into(), "198.18.11.2/24".into())
                ]
            );
            assert_eq!(s.config.branch_id, 1);
            assert_eq!(s.config.remotes.len(), 1);
            assert_eq!(s.config.remotes[0].id, 2);
        }
        other => panic!("expected a setup, got {other:?}"),
    }
    assert!(
        p.recv().await.is_none(),
        "the controller closes after the setup"
    );
    let mut p = tls(addr, &ca, Some((&c1.cert_pem, &key1.key_pem)))
        .await
        .unwrap();
    assert_eq!(error_code(p.open(setup(2)).await).0, "wrong_branch");
    let mut p = tls(addr, &ca, None).await.unwrap();
    assert_eq!(error_code(p.open(setup(1)).await).0, "no_certificate");
    let mut p = Peer::new(TcpStream::connect(clear).await.unwrap());
    assert_eq!(error_code(p.open(setup(1)).await).0, "no_certificate");
    let mut p = tls(addr, &ca, Some((&c1.cert_pem, &key1.key_pem)))
        .await
        .unwrap();
    assert_eq!(error_code(p.open_as(3, setup(1)).await).0, "version");
    // A certificate of a foreign CA: the handshake fails (the server refuses it).
    let foreign = pki::ca::Ca::generate("foreign").unwrap();
    let f = foreign
        .issue_gateway(mpa::BranchId::new(2).unwrap(), 5, Duration::from_secs(3600))
        .unwrap();
    if let Ok(mut p) = tls(addr, &ca, Some((&f.cert_pem, &f.key_pem))).await {
        assert!(p.open(register(2)).await.is_none());
    }

    // Renewal over mutual TLS: a new serial that registers.
    let key1b = KeyRequest::generate().unwrap();
    let mut p = tls(addr, &ca, Some((&c1.cert_pem, &key1.key_pem)))
        .await
        .unwrap();
    let c1b = credentials(p.open(renew(&key1b)).await);
    assert!(c1b.serial > c2.serial);
    let mut p = tls(addr, &ca, Some((&c1b.cert_pem, &key1b.key_pem)))
        .await
        .unwrap();
    assert!(matches!(
        p.open(register(1)).await,
        Some(ControllerMsg::Config(_))
    ));
    // (p replaced g1 as branch 1's session: g1 got `replaced`.) The protocol 3 session got the
    // current CRL right after registering.
    let crl_before = match p.crls.pop() {
        Some(c) => c,
        None => p.next_crl().await,
    };
    assert_eq!(crl_before, authority.crl_pem());
    drop(g1);

    // Revoking the old serial (while a session runs with it): the new CRL is pushed at once,
    // then that session ends with `revoked`.
    let mut old = tls(addr, &ca, Some((&c1.cert_pem, &key1.key_pem)))
        .await
        .unwrap();
    assert!(matches!(
        old.open(register(1)).await,
        Some(ControllerMsg::Config(_))
    ));
    if old.crls.is_empty() {
        old.next_crl().await;
    }
    let revoked = authority.revoke(None, Some(c1.serial)).unwrap();
    assert_eq!(revoked, vec![c1.serial]);
    assert!(authority.crl_pem().contains("BEGIN X509 CRL"));
    let pushed = old.next_crl().await;
    assert_eq!(pushed, authority.crl_pem());
    assert_ne!(pushed, crl_before);
    assert_eq!(error_code(old.recv().await).0, "revoked");
    // A protocol 2 gateway (c1b, not revoked): hello 2, its config, and never a crl, also
    // not at a revocation.
    let mut v2 = tls(addr, &ca, Some((&c1b.cert_pem, &key1b.key_pem)))
        .await
        .unwrap();
    assert!(matches!(
        v2.open_as(2, register(1)).await,
        Some(ControllerMsg::Config(_))
    ));
    authority.revoke(None, Some(c2.serial)).unwrap();
    let quiet = tokio::time::timeout(Duration::from_secs(1), v2.recv()).await;
    assert!(quiet.is_err(), "a protocol 2 session got {quiet:?}");
    assert!(v2.crls.is_empty());
    if let Ok(mut p) = tls(addr, &ca, Some((&c1.cert_pem, &key1.key_pem))).await {
        assert!(p.open(register(1)).await.is_none());
    }
    let mut p = tls(addr, &ca, Some((&c1b.cert_pem, &key1b.key_pem)))
        .await
        .unwrap();
    assert!(matches!(
        p.open(register(1)).await,
        Some(ControllerMsg::Config(_))
    ));

    let list = registry.list();
    let e = list.enrolment.unwrap();
    assert_eq!((e.enrolled, e.renewed), (2, 1));
    assert_eq!(e.refused_wrong_branch, 1);
    assert_eq!(e.refused_unknown, 1);
    assert_eq!(e.refused_expired, 1);
    assert_eq!(e.refused_used, 1);
    assert_eq!(e.refused_other, 1, "the bad proof");
    // insecure, wrong_branch, no_certificate (register), no_certificate (renew), and of the
    // setup: wrong_branch, no_certificate (TLS), no_certificate (clear TCP).
    assert_eq!(list.rejected_auth, 7);
    // The foreign and the revoked certificates failed in the TLS handshake.
    assert!(list.rejected_other >= 2, "{}", list.rejected_other);
}
