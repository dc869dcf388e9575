//! The gateway CA run by `ssc` (issue #8; docs/security.md, "Enrolment"): the CA key and
//! certificate as files under the CA directory, one-time enrolment tokens, issuing and renewing
//! gateway certificates for keys the gateways generate themselves, revocation and the CRL, and
//! the controller's own `ssc.mms` server certificate for the TLS gateway listener.
//!
//! Files (`[ca] dir`, default `<database dir>/ca`): `ca.pem` (the trust anchor gateways pin) and
//! `ca.key` (mode 0600, refused otherwise), both written atomically by [`pki::files`]. The
//! tokens (only their SHA-256), the issued certificates and the counters live in the ssc
//! database ([`crate::store::creds`]). The `ssc.mms` key exists only in memory: a fresh one per
//! start.
//!
//! Secrets are never logged: the token is checked by its hash and the refusal names only the
//! branch and the reason; `Debug` of [`Authority`] shows neither key.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mpa::gwchan::{Credentials, Enrol, Renew};
use pki::ca::Ca;
use serde::Serialize;

use crate::store::creds::TokenRefusal;
use crate::store::{Store, StoreError};

/// The CA's common name (fixed: [`Ca::load`] rebuilds the issuer from it).
pub const CA_NAME: &str = "MMS gateway CA";
/// Validity of the controller's own server certificate (re-issued at every start).
pub const SERVER_CERT_VALIDITY: Duration = Duration::from_secs(90 * 24 * 3600);
/// Default validity of an enrolment token.
pub const DEFAULT_TOKEN_TTL: Duration = Duration::from_secs(3600);
/// Longest validity of an enrolment token: a forgotten token should not stay usable for long.
pub const MAX_TOKEN_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// The file name of the CA certificate in the CA directory.
pub const CA_CERT_FILE: &str = "ca.pem";
/// The file name of the CA key in the CA directory.
pub const CA_KEY_FILE: &str = "ca.key";
/// A CRL is signed again this long after the last signature: half of its `next_update`
/// window (`pki::ca::CRL_VALIDITY`, 7 days), so a gateway that misses a few pushes (offline,
/// `ssc` down for a day) still holds an unexpired CRL.
pub const CRL_RESIGN_AFTER: Duration = Duration::from_secs(pki::ca::CRL_VALIDITY.as_secs() / 2);
/// How often `ssc run` checks whether the CRL is due: an hour is negligible against 3.5 days.
pub const CRL_CHECK_INTERVAL: Duration = Duration::from_secs(3600);

/// Errors of the authority (IO, database, signing). A refused request is [`Refusal`].
#[derive(Debug, thiserror::Error)]
pub enum AuthorityError {
    /// The CA files.
    #[error("CA: {0}")]
    Ca(#[from] pki::ca::CaError),
    /// The CA key file is readable by others.
    #[error("{0}: CA key must be mode 0600 (it is {1:o})")]
    KeyMode(PathBuf, u32),
    /// IO on the CA directory.
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    /// The database.
    #[error("{0}")]
    Store(#[from] StoreError),
    /// rustls refused the server configuration.
    #[error("TLS: {0}")]
    Tls(#[from] pki::tls::TlsError),
    /// The system RNG failed.
    #[error("{0}")]
    Enrol(#[from] pki::enrol::EnrolError),
    /// A token TTL out of range.
    #[error("token ttl must be between 1 s and {max:?}")]
    Ttl {
        /// The longest allowed.
        max: Duration,
    },
}

/// Why an enrolment or renewal is refused (the code goes to the gateway in an `error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The token is unknown, used, expired or for another branch.
    #[error("{0}")]
    Token(TokenRefusal),
    /// The public key or its proof is bad.
    #[error("key request: {0}")]
    Key(pki::enrol::EnrolError),
    /// The branch id is out of range.
    #[error("branch {0} is not a branch id 1..=250")]
    Branch(u8),
    /// The certificate of a renewing gateway is revoked in our records.
    #[error("certificate serial {0} is revoked")]
    Revoked(u64),
    /// The controller failed (database, signing); logged on our side.
    #[error("the controller could not issue a certificate")]
    Internal,
}

impl Refusal {
    /// The stable label of a refusal (counters).
    pub fn label(&self) -> &'static str {
        match self {
            Self::Token(t) => t.label(),
            Self::Key(_) => "bad_key",
            Self::Branch(_) => "bad_branch",
            Self::Revoked(_) => "revoked",
            Self::Internal => "internal",
        }
    }
}

/// Counters of the authority (in `GET /api/v1/gateways` under `enrolment`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct AuthorityCounters {
    /// Certificates issued by enrolment.
    pub enrolled: u64,
    /// Certificates issued by renewal.
    pub renewed: u64,
    /// Enrolments refused: unknown token.
    pub refused_unknown: u64,
    /// Enrolments refused: token already used.
    pub refused_used: u64,
    /// Enrolments refused: token expired.
    pub refused_expired: u64,
    /// Enrolments refused: token of another branch.
    pub refused_wrong_branch: u64,
    /// Requests refused for a bad key, bad branch, revoked certificate or an internal error.
    pub refused_other: u64,
}

/// A new enrolment token (printed once by `ssc enrol-token`).
#[derive(Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct NewToken {
    /// The token (a secret: shown once, never stored or logged).
    pub token: String,
    /// The branch it enrols.
    pub branch: u8,
    /// Unix seconds of its expiry.
    pub expires: u64,
    /// SHA-256 of the CA certificate (DER), hex: pin it on the gateway when the CA file is not
    /// at hand (`mmsg enrol --ca-fingerprint`).
    pub ca_fingerprint: String,
}

impl std::fmt::Debug for NewToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewToken")
            .field("branch", &self.branch)
            .field("expires", &self.expires)
            .finish_non_exhaustive()
    }
}

/// The CA with its database and the controller's TLS identity.
pub struct Authority {
    ca: Ca,
    store: Arc<Store>,
    validity: Duration,
    /// The current CRL (PEM) and when it was signed (Unix s); gateway sessions of protocol 3
    /// watch it and push every new one ([`Authority::subscribe_crl`]).
    crl: tokio::sync::watch::Sender<Arc<String>>,
    crl_signed: Mutex<u64>,
    /// The `ssc.mms` certificate and key (PEM; the key only in memory).
    server_cert: (String, String),
    /// Rebuilt with every new CRL.
    server: Mutex<Arc<rustls::ServerConfig>>,
    /// The OpenFlow listener's (client certificate required), rebuilt with every new CRL.
    openflow: tokio::sync::watch::Sender<Arc<rustls::ServerConfig>>,
    counters: Mutex<AuthorityCounters>,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority")
            .field("ca", &self.ca)
            .field("validity", &self.validity)
            .finish_non_exhaustive()
    }
}

/// Now in Unix seconds.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Creates the CA in `dir` if there is none (`Ok(true)`), else checks the existing one loads
/// (`Ok(false)`). The directory is created with mode 0700.
pub fn init(dir: &Path) -> Result<bool, AuthorityError> {
    let cert = dir.join(CA_CERT_FILE);
    let key = dir.join(CA_KEY_FILE);
    if cert.exists() || key.exists() {
        load(dir)?;
        return Ok(false);
    }
    std::fs::create_dir_all(dir).map_err(|e| AuthorityError::Io(dir.to_owned(), e))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| AuthorityError::Io(dir.to_owned(), e))?;
    Ca::generate(CA_NAME)?.save(&cert, &key)?;
    Ok(true)
}

/// Loads the CA of `dir`; the key must be mode 0600.
pub fn load(dir: &Path) -> Result<Ca, AuthorityError> {
    let key = dir.join(CA_KEY_FILE);
    let mode = std::fs::metadata(&key)
        .map_err(|e| AuthorityError::Io(key.clone(), e))?
        .permissions()
        .mode()
        & 0o777;
    if mode & 0o077 != 0 {
        return Err(AuthorityError::KeyMode(key, mode));
    }
    Ok(Ca::load(CA_NAME, &dir.join(CA_CERT_FILE), &key)?)
}

impl Authority {
    /// Loads (or creates, see [`init`]) the CA in `dir`, signs the current CRL, and issues the
    /// controller's `ssc.mms` certificate. Gateway certificates get `validity`.
    pub fn open(dir: &Path, store: Arc<Store>, validity: Duration) -> Result<Self, AuthorityError> {
        if init(dir)? {
            tracing::info!(dir = %dir.display(), "gateway CA created");
        }
        let ca = load(dir)?;
        let serial = store.record_cert(0, unix_now() + SERVER_CERT_VALIDITY.as_secs())?;
        let server = ca.issue_server(pki::tls::CONTROLLER_NAME, serial, SERVER_CERT_VALIDITY)?;
        let crl = sign_crl(&ca, &store)?;
        let server_cert = (server.cert_pem, server.key_pem);
        let server_config = server_tls(&ca, &server_cert, &crl)?;
        let openflow = openflow_tls(&ca, &server_cert, &crl)?;
        Ok(Self {
            ca,
            store,
            validity,
            crl: tokio::sync::watch::Sender::new(Arc::new(crl)),
            crl_signed: Mutex::new(unix_now()),
            server_cert,
            server: Mutex::new(server_config),
            openflow: tokio::sync::watch::Sender::new(openflow),
            counters: Mutex::new(AuthorityCounters::default()),
        })
    }

    /// The TLS configuration of the gateway listener (client certificates optional, verified
    /// against the CA and the current CRL).
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        Arc::clone(&self.server.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The TLS configuration of the OpenFlow listener (`ssl:` targets of OVS): the client
    /// (switch) must present a certificate of the CA, not revoked.
    pub fn openflow_config(&self) -> Arc<rustls::ServerConfig> {
        Arc::clone(&self.openflow.borrow())
    }

    /// Watches the OpenFlow listener's configuration (a new one with every new CRL):
    /// `OfcConfig::tls_updates`.
    pub fn subscribe_openflow(&self) -> tokio::sync::watch::Receiver<Arc<rustls::ServerConfig>> {
        self.openflow.subscribe()
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        self.ca.cert_pem()
    }

    /// The current CRL, PEM.
    pub fn crl_pem(&self) -> String {
        self.crl.borrow().as_ref().clone()
    }

    /// Whether the certificate `serial` is revoked (a database read; false if unknown).
    pub fn is_revoked(&self, serial: u64) -> bool {
        self.store
            .certs()
            .is_ok_and(|cs| cs.iter().any(|c| c.serial == serial && c.revoked.is_some()))
    }

    /// Watches the CRL: changes on every revocation and every periodic re-signing.
    pub fn subscribe_crl(&self) -> tokio::sync::watch::Receiver<Arc<String>> {
        self.crl.subscribe()
    }

    /// Whether the CRL signed at `signed` must be signed again at `now`: after
    /// [`CRL_RESIGN_AFTER`], i.e. with half of its `next_update` window still ahead.
    pub fn crl_due(signed: u64, now: u64) -> bool {
        now.saturating_sub(signed) >= CRL_RESIGN_AFTER.as_secs()
    }

    /// Re-signs the CRL (same serials, next CRL number, `next_update` = now + 7 days) when it
    /// is due ([`Authority::crl_due`]) at `now`; the gateways' sessions push it. Returns whether
    /// it did.
    pub fn resign_crl_if_due(&self, now: u64) -> Result<bool, AuthorityError> {
        let signed = *self
            .crl_signed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !Self::crl_due(signed, now) {
            return Ok(false);
        }
        self.install_new_crl()?;
        tracing::info!("CRL re-signed before its next_update");
        Ok(true)
    }

    /// Every [`CRL_CHECK_INTERVAL`]: [`Authority::resign_crl_if_due`] (off the async threads).
    pub async fn resign_crl_periodically(self: Arc<Self>) {
        let mut tick = tokio::time::interval(CRL_CHECK_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let a = Arc::clone(&self);
            match tokio::task::spawn_blocking(move || a.resign_crl_if_due(unix_now())).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::error!(error = %e, "CRL re-signing failed; retrying"),
                Err(e) => tracing::error!(error = %e, "CRL re-signing task failed"),
            }
        }
    }

    /// Signs the CRL of the current revocations and puts it in use everywhere: the listeners'
    /// TLS configurations and the watch the gateway sessions push from.
    fn install_new_crl(&self) -> Result<(), AuthorityError> {
        let crl = sign_crl(&self.ca, &self.store)?;
        let tls = server_tls(&self.ca, &self.server_cert, &crl)?;
        let of = openflow_tls(&self.ca, &self.server_cert, &crl)?;
        *self.server.lock().unwrap_or_else(PoisonError::into_inner) = tls;
        self.openflow.send_replace(of);
        *self
            .crl_signed
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = unix_now();
        self.crl.send_replace(Arc::new(crl));
        Ok(())
    }

    /// The counters.
    pub fn counters(&self) -> AuthorityCounters {
        self.counters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A new one-time token for `branch`, valid for `ttl`; only its hash is stored.
    pub fn new_token(&self, branch: u8, ttl: Duration) -> Result<NewToken, AuthorityError> {
        if ttl.is_zero() || ttl > MAX_TOKEN_TTL {
            return Err(AuthorityError::Ttl { max: MAX_TOKEN_TTL });
        }
        let token = pki::enrol::random_token()?;
        let now = unix_now();
        let expires = now + ttl.as_secs().max(1);
        self.store
            .add_enrol_token(&pki::enrol::token_hash(&token), branch, expires, now)?;
        tracing::info!(branch, expires, "enrolment token created");
        Ok(NewToken {
            token,
            branch,
            expires,
            ca_fingerprint: pki::enrol::fingerprint(self.ca.cert_pem()).unwrap_or_default(),
        })
    }

    /// Enrolment: checks the key request and the token (used once), issues the certificate.
    pub fn enrol(&self, req: &Enrol) -> Result<Credentials, Refusal> {
        let r = self.enrol_inner(req);
        self.count(&r, false);
        if let Err(e) = &r {
            // One line per refusal, never the token.
            tracing::warn!(
                branch = req.branch_id,
                reason = e.label(),
                "enrolment refused: {e}"
            );
        }
        r
    }

    fn enrol_inner(&self, req: &Enrol) -> Result<Credentials, Refusal> {
        let b =
            mms_types::BranchId::new(req.branch_id).map_err(|_| Refusal::Branch(req.branch_id))?;
        let key = pki::enrol::verify_request(&req.public_key, &req.proof).map_err(Refusal::Key)?;
        self.store
            .redeem_enrol_token(
                &pki::enrol::token_hash(&req.token),
                req.branch_id,
                unix_now(),
            )
            .map_err(|e| self.internal(&e))?
            .map_err(Refusal::Token)?;
        let c = self.issue(b, &key)?;
        tracing::info!(
            branch = req.branch_id,
            serial = c.serial,
            "gateway enrolled"
        );
        Ok(c)
    }

    /// Renewal by a gateway authenticated as `branch` with the certificate `serial`.
    pub fn renew(
        &self,
        branch: mpa::BranchId,
        serial: u64,
        req: &Renew,
    ) -> Result<Credentials, Refusal> {
        let r = (|| {
            let revoked = self
                .store
                .certs()
                .map_err(|e| self.internal(&e))?
                .iter()
                .any(|c| c.serial == serial && c.revoked.is_some());
            if revoked {
                return Err(Refusal::Revoked(serial));
            }
            let key =
                pki::enrol::verify_request(&req.public_key, &req.proof).map_err(Refusal::Key)?;
            self.issue(branch, &key)
        })();
        self.count(&r, true);
        match &r {
            Ok(c) => tracing::info!(
                branch = branch.get(),
                old = serial,
                serial = c.serial,
                "gateway certificate renewed"
            ),
            Err(e) => tracing::warn!(
                branch = branch.get(),
                reason = e.label(),
                "renewal refused: {e}"
            ),
        }
        r
    }

    fn issue(&self, b: mpa::BranchId, key: &pki::enrol::PublicKey) -> Result<Credentials, Refusal> {
        let not_after = unix_now() + self.validity.as_secs();
        let serial = self
            .store
            .record_cert(b.get(), not_after)
            .map_err(|e| self.internal(&e))?;
        let issued = self
            .ca
            .issue_for_key(b, serial, self.validity, key)
            .map_err(|e| self.internal(&e))?;
        Ok(Credentials {
            cert_pem: issued.cert_pem,
            serial,
            not_after,
            ca_pem: self.ca.cert_pem().to_owned(),
            crl_pem: self.crl_pem(),
        })
    }

    /// Revokes every certificate of `branch` (or the one with `serial`) and re-signs the CRL;
    /// returns the serials revoked now. Connected gateways of protocol 3 get the new CRL at
    /// once (pushed by their sessions); others with their next credentials.
    pub fn revoke(
        &self,
        branch: Option<u8>,
        serial: Option<u64>,
    ) -> Result<Vec<u64>, AuthorityError> {
        let (serials, _) = self.store.revoke(
            |c| branch.is_some_and(|b| b == c.branch && b != 0) || serial == Some(c.serial),
            unix_now(),
        )?;
        self.install_new_crl()?;
        tracing::info!(?serials, "certificates revoked, CRL re-signed");
        Ok(serials)
    }

    fn internal(&self, e: &dyn std::fmt::Display) -> Refusal {
        tracing::error!(error = %e, "certificate authority failed");
        Refusal::Internal
    }

    fn count(&self, r: &Result<Credentials, Refusal>, renewal: bool) {
        let mut c = self.counters.lock().unwrap_or_else(PoisonError::into_inner);
        match r {
            Ok(_) if renewal => c.renewed += 1,
            Ok(_) => c.enrolled += 1,
            Err(Refusal::Token(TokenRefusal::Unknown)) => c.refused_unknown += 1,
            Err(Refusal::Token(TokenRefusal::Used)) => c.refused_used += 1,
            Err(Refusal::Token(TokenRefusal::Expired)) => c.refused_expired += 1,
            Err(Refusal::Token(TokenRefusal::OtherBranch)) => c.refused_wrong_branch += 1,
            Err(_) => c.refused_other += 1,
        }
    }
}

fn server_tls(
    ca: &Ca,
    (cert, key): &(String, String),
    crl: &str,
) -> Result<Arc<rustls::ServerConfig>, AuthorityError> {
    Ok(pki::tls::controller_server_config(
        ca.cert_pem().as_bytes(),
        cert.as_bytes(),
        key.as_bytes(),
        Some(crl.as_bytes()),
    )?)
}

fn openflow_tls(
    ca: &Ca,
    (cert, key): &(String, String),
    crl: &str,
) -> Result<Arc<rustls::ServerConfig>, AuthorityError> {
    Ok(pki::tls::openflow_server_config(
        ca.cert_pem().as_bytes(),
        cert.as_bytes(),
        key.as_bytes(),
        Some(crl.as_bytes()),
    )?)
}

/// Signs the CRL of every revoked certificate with the next CRL number.
fn sign_crl(ca: &Ca, store: &Store) -> Result<String, AuthorityError> {
    let revoked: Vec<u64> = store
        .certs()?
        .into_iter()
        .filter(|c| c.revoked.is_some())
        .map(|c| c.serial)
        .collect();
    let number = store.next_crl_number()?;
    Ok(ca.crl(&revoked, number)?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn crl_is_due_after_half_its_validity() {
        let half = CRL_RESIGN_AFTER.as_secs();
        assert_eq!(half, 302_400, "3.5 days");
        assert!(!Authority::crl_due(1_000, 1_000));
        assert!(!Authority::crl_due(1_000, 1_000 + half - 1));
        assert!(Authority::crl_due(1_000, 1_000 + half));
        // A clock that went back is not "due".
        assert!(!Authority::crl_due(1_000, 10));
    }

    #[test]
    fn resigning_and_revoking_publish_a_new_crl() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(&tmp.path().join("ssc.redb")).unwrap());
        let a =
            Authority::open(&tmp.path().join("ca"), store, Duration::from_secs(86_400)).unwrap();
        let mut crl = a.subscribe_crl();
        let mut of = a.subscribe_openflow();
        let first = crl.borrow_and_update().clone();
        of.borrow_and_update();
        // Not due now: nothing changes.
        assert!(!a.resign_crl_if_due(unix_now()).unwrap());
        assert!(!crl.has_changed().unwrap());
        // Due later: a new CRL (next number) for the sessions and the OpenFlow listener.
        assert!(a
            .resign_crl_if_due(unix_now() + CRL_RESIGN_AFTER.as_secs())
            .unwrap());
        assert!(crl.has_changed().unwrap() && of.has_changed().unwrap());
        let second = crl.borrow_and_update().clone();
        assert_ne!(first, second);
        assert_eq!(*second, a.crl_pem());
        // A revocation publishes at once too.
        a.revoke(None, Some(12_345)).unwrap();
        assert!(crl.has_changed().unwrap());
        assert!(
            !a.is_revoked(12_345),
            "an unknown serial is not a revoked certificate"
        );
    }
}
