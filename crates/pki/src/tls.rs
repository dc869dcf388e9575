//! The rustls configurations of the tunnel (docs/security.md): TLS 1.3 only, mutual
//! authentication against the gateway CA, optional CRL, no session resumption, no early data
//! (0-RTT would be replayable), the `ring` crypto provider with AES-128-GCM preferred (AES-NI).
//!
//! [`Credentials`] is what a gateway loads from its `[tls]` files; it builds both the acceptor
//! (server) and the dialer (client) configuration. [`classify`] maps a handshake error to the
//! reason counted in `mmsg status`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mms_types::BranchId;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::Resumption;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{
    CertificateDer, CertificateRevocationListDer, PrivateKeyDer, ServerName, UnixTime,
};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{NoServerSessionStorage, WebPkiClientVerifier};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, DistinguishedName, RootCertStore,
    ServerConfig, SignatureScheme,
};

use crate::crl::{CrlError, CrlInfo};
use crate::IdentityError;

/// Errors loading credentials or building a configuration.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or holds no valid PEM of the expected kind.
    #[error("{path}: {what}")]
    File {
        /// The file.
        path: String,
        /// What was wrong.
        what: String,
    },
    /// Our own certificate carries no branch identity.
    #[error("own certificate: {0}")]
    Identity(#[from] IdentityError),
    /// Our own certificate is for another branch than the one we run as.
    #[error("own certificate is for branch {cert}, but this gateway is branch {own}")]
    NotOurs {
        /// The branch in the certificate.
        cert: BranchId,
        /// Our branch.
        own: BranchId,
    },
    /// rustls refused the configuration (key does not match, bad CRL, ...).
    #[error("tls configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// The verifier could not be built (no CA certificate, bad CRL).
    #[error("certificate verifier: {0}")]
    Verifier(String),
    /// The CRL does not parse, is not signed by the CA, or lacks `crl_number`/`next_update`.
    #[error("CRL: {0}")]
    Crl(#[from] CrlError),
}

/// A new handshake refused because our CRL has expired (its `next_update` has passed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrlExpired {
    /// The CRL's `next_update`, Unix s.
    pub next_update: u64,
    /// Its `crl_number`.
    pub number: u128,
    /// The time of the handshake, Unix s.
    pub now: u64,
}

/// Called on every handshake refused for [`CrlExpired`] (the gateway counts and logs it).
pub type CrlExpiredHook = Arc<dyn Fn(&CrlExpired) + Send + Sync>;

/// The files of a gateway's credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The CA certificate(s), PEM: the trust anchor(s).
    pub ca: PathBuf,
    /// Our certificate (chain), PEM.
    pub cert: PathBuf,
    /// Our private key (PKCS#8), PEM. Must be mode 0600 (checked by the loader of the binary).
    pub key: PathBuf,
    /// Revoked certificates as a CRL signed by the CA, PEM (optional).
    pub crl: Option<PathBuf>,
}

/// A gateway's loaded credentials.
#[derive(Clone)]
pub struct Credentials {
    roots: Arc<RootCertStore>,
    chain: Vec<CertificateDer<'static>>,
    key: Arc<PrivateKeyDer<'static>>,
    crls: Vec<CertificateRevocationListDer<'static>>,
    /// Our serial number.
    pub serial: u64,
    /// The branch of our certificate.
    pub identity: BranchId,
    /// The CRL in use (verified against the CA): its number and validity.
    pub crl: Option<CrlInfo>,
    on_crl_expired: Option<CrlExpiredHook>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Credentials")
            .field("identity", &self.identity)
            .field("serial", &self.serial)
            .field("crl", &self.crl)
            .finish_non_exhaustive()
    }
}

/// The crypto provider: ring, cipher suites reordered so AES-128-GCM comes first (cheapest with
/// AES-NI; both ends run ours, so ours is what is negotiated).
pub fn provider() -> Arc<CryptoProvider> {
    let mut p = rustls::crypto::ring::default_provider();
    p.cipher_suites = vec![
        rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256,
        rustls::crypto::ring::cipher_suite::TLS13_AES_256_GCM_SHA384,
        rustls::crypto::ring::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
    ];
    Arc::new(p)
}

fn file_err(path: &Path, what: impl std::fmt::Display) -> TlsError {
    TlsError::File {
        path: path.display().to_string(),
        what: what.to_string(),
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| file_err(path, e))
}

impl Credentials {
    /// Loads the files and checks that our certificate is branch `own`'s.
    pub fn load(files: &TlsFiles, own: BranchId) -> Result<Credentials, TlsError> {
        let ca = read(&files.ca)?;
        let cert = read(&files.cert)?;
        let key = read(&files.key)?;
        let crl = match &files.crl {
            Some(p) => Some(read(p)?),
            None => None,
        };
        Credentials::from_pem(&ca, &cert, &key, crl.as_deref(), own).map_err(|e| match e {
            TlsError::File { path, what } => {
                let path = match path.as_str() {
                    "ca" => files.ca.display().to_string(),
                    "cert" => files.cert.display().to_string(),
                    "key" => files.key.display().to_string(),
                    "crl" => files
                        .crl
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default(),
                    _ => path,
                };
                TlsError::File { path, what }
            }
            e => e,
        })
    }

    /// Builds credentials from PEM contents (errors name the part: `ca`, `cert`, `key`, `crl`).
    pub fn from_pem(
        ca: &[u8],
        cert: &[u8],
        key: &[u8],
        crl: Option<&[u8]>,
        own: BranchId,
    ) -> Result<Credentials, TlsError> {
        let mut roots = RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(ca) {
            let c = c.map_err(|e| file_err(Path::new("ca"), e))?;
            roots
                .add(c)
                .map_err(|e| file_err(Path::new("ca"), format!("not a CA certificate: {e}")))?;
        }
        if roots.is_empty() {
            return Err(file_err(Path::new("ca"), "no PEM certificate"));
        }
        let chain = CertificateDer::pem_slice_iter(cert)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| file_err(Path::new("cert"), e))?;
        let leaf = chain
            .first()
            .ok_or_else(|| file_err(Path::new("cert"), "no PEM certificate"))?;
        let identity = crate::identity_of(leaf)?;
        if identity != own {
            return Err(TlsError::NotOurs {
                cert: identity,
                own,
            });
        }
        let serial = crate::serial_of(leaf)?;
        let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| file_err(Path::new("key"), e))?;
        // The CRL fails closed: exactly one list, signed by one of our CAs, with a crl_number
        // and a next_update (an expired one loads, and then refuses every new handshake).
        let (crls, crl_info) = match crl {
            Some(c) => {
                let der = crate::crl::der_of_pem(c)?;
                let info = crate::crl::verify(&der, &crate::crl::cas_of_pem(ca))?;
                (vec![der], Some(info))
            }
            None => (Vec::new(), None),
        };
        let creds = Credentials {
            roots: Arc::new(roots),
            chain,
            key: Arc::new(key),
            crls,
            serial,
            identity,
            crl: crl_info,
            on_crl_expired: None,
        };
        // Build both once so a bad key or CRL fails at load time, not at the first connection.
        creds.server_config()?;
        creds.client_config()?;
        Ok(creds)
    }

    /// Calls `hook` on every new handshake these credentials refuse because the CRL expired
    /// (set it before building the configurations).
    pub fn set_crl_expired_hook(&mut self, hook: CrlExpiredHook) {
        self.on_crl_expired = Some(hook);
    }

    /// The CRL guard of the verifiers.
    fn guard(&self) -> CrlGuard {
        CrlGuard {
            crl: self.crl,
            hook: self.on_crl_expired.clone(),
        }
    }

    /// The acceptor's configuration: client certificate required, verified against the CA and
    /// the CRL (an expired CRL refuses it); TLS 1.3 only; no tickets, no session cache, no
    /// early data.
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, TlsError> {
        let p = provider();
        let inner =
            WebPkiClientVerifier::builder_with_provider(Arc::clone(&self.roots), Arc::clone(&p))
                .with_crls(self.crls.iter().cloned())
                .enforce_revocation_expiration()
                .build()
                .map_err(|e| TlsError::Verifier(e.to_string()))?;
        let verifier = Arc::new(GuardedClientVerifier {
            inner,
            guard: self.guard(),
        });
        let mut c = ServerConfig::builder_with_provider(p)
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_client_cert_verifier(verifier)
            .with_single_cert(self.chain.clone(), self.key.clone_key())?;
        c.max_early_data_size = 0;
        c.send_tls13_tickets = 0;
        c.session_storage = Arc::new(NoServerSessionStorage {});
        Ok(Arc::new(c))
    }

    /// The dialer's configuration: the server must present a certificate of the CA (not
    /// revoked) valid for the dialled branch's name, while our CRL has not expired; TLS 1.3
    /// only; no resumption, no early data.
    pub fn client_config(&self) -> Result<Arc<ClientConfig>, TlsError> {
        let p = provider();
        let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::clone(&self.roots),
            Arc::clone(&p),
        )
        .with_crls(self.crls.iter().cloned())
        .enforce_revocation_expiration()
        .build()
        .map_err(|e| TlsError::Verifier(e.to_string()))?;
        let verifier = Arc::new(GuardedServerVerifier {
            inner,
            guard: self.guard(),
        });
        let mut c = ClientConfig::builder_with_provider(p)
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_client_auth_cert(self.chain.clone(), self.key.clone_key())?;
        c.resumption = Resumption::disabled();
        c.enable_early_data = false;
        Ok(Arc::new(c))
    }
}

/// Refuses every new handshake once the CRL in use has expired, before the certificate is even
/// looked at: a stale list cannot say whether the peer has been revoked since (fail closed).
/// webpki enforces the same (`enforce_revocation_expiration`) for certificates of the CRL's
/// issuer; this guard adds the hook (counter, log line) and covers every peer alike.
#[derive(Clone)]
struct CrlGuard {
    crl: Option<CrlInfo>,
    hook: Option<CrlExpiredHook>,
}

impl std::fmt::Debug for CrlGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrlGuard").field("crl", &self.crl).finish()
    }
}

impl CrlGuard {
    fn check(&self, now: UnixTime) -> Result<(), rustls::Error> {
        let Some(crl) = self.crl else {
            return Ok(());
        };
        let secs = now.as_secs();
        if !crl.expired_at(secs) {
            return Ok(());
        }
        if let Some(h) = &self.hook {
            h(&CrlExpired {
                next_update: crl.next_update,
                number: crl.number,
                now: secs,
            });
        }
        Err(rustls::Error::InvalidCertificate(
            CertificateError::ExpiredRevocationListContext {
                time: now,
                next_update: UnixTime::since_unix_epoch(std::time::Duration::from_secs(
                    crl.next_update,
                )),
            },
        ))
    }
}

/// [`WebPkiClientVerifier`] behind a [`CrlGuard`].
#[derive(Debug)]
struct GuardedClientVerifier {
    inner: Arc<dyn ClientCertVerifier>,
    guard: CrlGuard,
}

impl ClientCertVerifier for GuardedClientVerifier {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.guard.check(now)?;
        self.inner
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// `WebPkiServerVerifier` behind a [`CrlGuard`].
#[derive(Debug)]
struct GuardedServerVerifier {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
    guard: CrlGuard,
}

impl ServerCertVerifier for GuardedServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.guard.check(now)?;
        self.inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// Who the peer of an established connection is, for [`Credentials::check_peer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerRole {
    /// It connected to us (we are the TLS server).
    Client,
    /// We dialled it as this branch (we are the TLS client).
    Server(BranchId),
}

impl Credentials {
    /// Checks again, with these (possibly newer) credentials and CRL, the certificate a peer
    /// presented on an established connection: after a reload, a connection whose peer is now
    /// revoked (or no longer chains to the CA) must end.
    pub fn check_peer(
        &self,
        end_entity: &CertificateDer<'_>,
        role: PeerRole,
    ) -> Result<(), rustls::Error> {
        let p = provider();
        let now = rustls::pki_types::UnixTime::now();
        let bad = |e: rustls::server::VerifierBuilderError| rustls::Error::General(e.to_string());
        match role {
            PeerRole::Client => {
                WebPkiClientVerifier::builder_with_provider(Arc::clone(&self.roots), p)
                    .with_crls(self.crls.iter().cloned())
                    .build()
                    .map_err(bad)?
                    .verify_client_cert(end_entity, &[], now)?;
            }
            PeerRole::Server(b) => {
                rustls::client::WebPkiServerVerifier::builder_with_provider(
                    Arc::clone(&self.roots),
                    p,
                )
                .with_crls(self.crls.iter().cloned())
                .build()
                .map_err(bad)?
                .verify_server_cert(
                    end_entity,
                    &[],
                    &crate::server_name(b),
                    &[],
                    now,
                )?;
            }
        }
        Ok(())
    }
}

/// Why a TLS handshake was refused (one counter each in `mmsg status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// Not TLS, a broken or replayed handshake, no certificate, a protocol error.
    Handshake,
    /// A certificate not issued by our CA (or not verifiable: bad signature, expired...).
    UnknownCa,
    /// A certificate our CRL revokes.
    Revoked,
}

/// Classifies a handshake error.
pub fn classify(e: &rustls::Error) -> Rejection {
    match e {
        rustls::Error::InvalidCertificate(CertificateError::Revoked) => Rejection::Revoked,
        rustls::Error::InvalidCertificate(_) => Rejection::UnknownCa,
        _ => Rejection::Handshake,
    }
}

/// Whether a handshake error is the refusal of an expired CRL (ours, by [`CrlGuard`], or one
/// webpki found expired).
pub fn is_crl_expired(e: &rustls::Error) -> bool {
    matches!(
        e,
        rustls::Error::InvalidCertificate(
            CertificateError::ExpiredRevocationList
                | CertificateError::ExpiredRevocationListContext { .. }
        )
    )
}

/// The DNS name of the controller's certificate (`ssc`'s gateway channel listener); a gateway
/// verifies it when it dials `tls:HOST:PORT`, whatever HOST is.
pub const CONTROLLER_NAME: &str = "ssc.mms";

fn roots_from_pem(ca_pem: &[u8]) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem) {
        let c = c.map_err(|e| file_err(Path::new("ca"), e))?;
        roots
            .add(c)
            .map_err(|e| file_err(Path::new("ca"), format!("not a CA certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(file_err(Path::new("ca"), "no PEM certificate"));
    }
    Ok(roots)
}

/// The controller's gateway-channel acceptor: our `ssc.mms` certificate (`cert_pem`, `key_pem`);
/// a client certificate is verified against `ca_pem` and `crl_pem` **when presented** (a
/// gateway that enrols has none yet; which messages need one is the session's decision:
/// register and renew do, enrol does not). TLS 1.3 only, no resumption, no early data.
pub fn controller_server_config(
    ca_pem: &[u8],
    cert_pem: &[u8],
    key_pem: &[u8],
    crl_pem: Option<&[u8]>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let p = provider();
    let roots = Arc::new(roots_from_pem(ca_pem)?);
    let crls = match crl_pem {
        Some(c) => CertificateRevocationListDer::pem_slice_iter(c)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| file_err(Path::new("crl"), e))?,
        None => Vec::new(),
    };
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_err(Path::new("cert"), e))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| file_err(Path::new("key"), e))?;
    let verifier = WebPkiClientVerifier::builder_with_provider(roots, Arc::clone(&p))
        .with_crls(crls)
        .allow_unauthenticated()
        .build()
        .map_err(|e| TlsError::Verifier(e.to_string()))?;
    let mut c = ServerConfig::builder_with_provider(p)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)?;
    c.max_early_data_size = 0;
    c.send_tls13_tickets = 0;
    c.session_storage = Arc::new(NoServerSessionStorage {});
    Ok(Arc::new(c))
}

/// A gateway's dialer to the controller: the server must present a certificate of `ca_pem`
/// valid for [`CONTROLLER_NAME`]; with `client` (certificate and key PEM) we authenticate as
/// our branch (register, renew), without it only server authentication happens (enrolment).
pub fn controller_client_config(
    ca_pem: &[u8],
    client: Option<(&[u8], &[u8])>,
) -> Result<Arc<ClientConfig>, TlsError> {
    let p = provider();
    let roots = Arc::new(roots_from_pem(ca_pem)?);
    let verifier =
        rustls::client::WebPkiServerVerifier::builder_with_provider(roots, Arc::clone(&p))
            .build()
            .map_err(|e| TlsError::Verifier(e.to_string()))?;
    let b = ClientConfig::builder_with_provider(p)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_webpki_verifier(verifier);
    let mut c = match client {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| file_err(Path::new("cert"), e))?;
            let key =
                PrivateKeyDer::from_pem_slice(key).map_err(|e| file_err(Path::new("key"), e))?;
            b.with_client_auth_cert(chain, key)?
        }
        None => b.with_no_client_auth(),
    };
    c.resumption = Resumption::disabled();
    c.enable_early_data = false;
    Ok(Arc::new(c))
}

/// The server name a gateway verifies on the controller's certificate.
pub fn controller_server_name() -> rustls::pki_types::ServerName<'static> {
    // A constant valid DNS name; the fallback is unreachable but keeps this total (a wrong name
    // fails verification, it never accepts).
    rustls::pki_types::ServerName::try_from(CONTROLLER_NAME).unwrap_or_else(|_| {
        rustls::pki_types::ServerName::IpAddress(std::net::Ipv4Addr::UNSPECIFIED.into())
    })
}

/// The controller's OpenFlow acceptor for Open vSwitch's `ssl:` controller target: our
/// `ssc.mms` certificate; a client certificate of the CA is **required** (OVS presents the
/// gateway's branch certificate from `ovs-vsctl set-ssl`), checked against the CRL. TLS 1.3
/// only, as everywhere: ovs-vswitchd 3.1 with OpenSSL 3.0 negotiates TLS 1.3 with
/// AES-256-GCM (measured, docs/security.md). No resumption, no early data.
pub fn openflow_server_config(
    ca_pem: &[u8],
    cert_pem: &[u8],
    key_pem: &[u8],
    crl_pem: Option<&[u8]>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let p = provider();
    let roots = Arc::new(roots_from_pem(ca_pem)?);
    let crls = match crl_pem {
        Some(c) => CertificateRevocationListDer::pem_slice_iter(c)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| file_err(Path::new("crl"), e))?,
        None => Vec::new(),
    };
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_err(Path::new("cert"), e))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| file_err(Path::new("key"), e))?;
    let verifier = WebPkiClientVerifier::builder_with_provider(roots, Arc::clone(&p))
        .with_crls(crls)
        .build()
        .map_err(|e| TlsError::Verifier(e.to_string()))?;
    let mut c = ServerConfig::builder_with_provider(p)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)?;
    c.max_early_data_size = 0;
    c.send_tls13_tickets = 0;
    c.session_storage = Arc::new(NoServerSessionStorage {});
    Ok(Arc::new(c))
}
