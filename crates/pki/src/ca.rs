//! The gateway CA: generate, save/load (PEM, 0600), issue gateway certificates with a serial
//! number, and sign revocation lists (CRLs).
//!
//! Loading: rcgen 0.13 signs with an issuer `Certificate` object, which it can only rebuild from a
//! PEM with its x509-parser feature (a large dependency tree, slow to build on 2 cores). A CA
//! here is rebuilt instead from its key and its fixed parameters ([`ca_params`]: same subject,
//! same key, hence same issuer name and authority key identifier): what it signs verifies
//! against the saved CA certificate, which stays the trust anchor the gateways load.

use std::path::Path;
use std::time::Duration;

use mms_types::BranchId;
use rcgen::{
    BasicConstraints, CertificateParams, CertificateRevocationListParams, DistinguishedName,
    DnType, ExtendedKeyUsagePurpose, IsCa, KeyIdMethod, KeyPair, KeyUsagePurpose,
    RevokedCertParams, SerialNumber,
};
use rustls::pki_types::CertificateDer;
use time::OffsetDateTime;

use crate::files::write_private;

/// Validity of a gateway certificate when the caller has no policy of its own: 90 days (the
/// usual short-lived web PKI figure; `ssc` will renew well before).
pub const DEFAULT_VALIDITY: Duration = Duration::from_secs(90 * 24 * 3600);
/// Validity of the CA certificate: 10 years (rotating the CA means re-enrolling every gateway).
pub const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// How far back `not_before` is set, so a gateway whose clock is a little behind accepts a
/// certificate issued a moment ago.
pub const CLOCK_SKEW: Duration = Duration::from_secs(3600);
/// How long a CRL is valid (`next_update`); a gateway refuses everything after that, so the CA
/// must re-sign the list before (`ssc` will, daily).
pub const CRL_VALIDITY: Duration = Duration::from_secs(7 * 24 * 3600);

/// Errors of CA operations.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// rcgen refused (bad key, bad parameters).
    #[error("certificate generation: {0}")]
    Rcgen(#[from] rcgen::Error),
    /// Reading or writing a file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// A time the caller passed cannot be encoded.
    #[error("{0} out of range")]
    OutOfRange(&'static str),
    /// The CA certificate file holds no certificate.
    #[error("{0}: no PEM certificate")]
    NoCertificate(String),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> CaError + '_ {
    move |source| CaError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// A certificate and its private key as issued, PEM and DER.
#[derive(Debug, Clone)]
pub struct Issued {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// The certificate, DER.
    pub cert_der: CertificateDer<'static>,
    /// The private key (PKCS#8), PEM. A secret: write it with [`write_private`] only.
    pub key_pem: String,
    /// The serial number.
    pub serial: u64,
}

/// The CA.
pub struct Ca {
    name: String,
    key: KeyPair,
    /// The rcgen issuer object (see the module docs about loading).
    issuer: rcgen::Certificate,
    /// The CA certificate as saved and distributed (the trust anchor).
    cert_pem: String,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key (secrets are never logged).
        f.debug_struct("Ca")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The CA's fixed parameters (subject `CN=<name>`, CA basic constraints, cert and CRL signing).
fn ca_params(name: &str, now: OffsetDateTime) -> Result<CertificateParams, CaError> {
    let mut p = CertificateParams::new(Vec::<String>::new())?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    dn.push(DnType::OrganizationName, "MMS");
    p.distinguished_name = dn;
    p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    p.key_identifier_method = KeyIdMethod::Sha256;
    p.not_before = now - CLOCK_SKEW;
    p.not_after = now + CA_VALIDITY;
    p.serial_number = Some(SerialNumber::from(1u64));
    Ok(p)
}

/// The parameters of an end-entity certificate: SAN and CN `dns_name`, O=MMS, serverAuth
/// (+ clientAuth for gateways), AKI, serial, validity from now minus [`CLOCK_SKEW`].
fn leaf_params(
    dns_name: &str,
    serial: u64,
    validity: Duration,
    client_auth: bool,
) -> Result<CertificateParams, CaError> {
    let mut p = CertificateParams::new(vec![dns_name.to_owned()])?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, dns_name);
    dn.push(DnType::OrganizationName, "MMS");
    p.distinguished_name = dn;
    p.is_ca = IsCa::ExplicitNoCa;
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    if client_auth {
        p.extended_key_usages
            .push(ExtendedKeyUsagePurpose::ClientAuth);
    }
    p.use_authority_key_identifier_extension = true;
    p.key_identifier_method = KeyIdMethod::Sha256;
    let now = OffsetDateTime::now_utc();
    p.not_before = now - CLOCK_SKEW;
    p.not_after = now + validity;
    p.serial_number = Some(SerialNumber::from(serial));
    Ok(p)
}

impl Ca {
    /// A new CA with a fresh ECDSA P-256 key; `name` becomes its common name.
    pub fn generate(name: &str) -> Result<Ca, CaError> {
        let key = KeyPair::generate()?;
        let issuer = ca_params(name, OffsetDateTime::now_utc())?.self_signed(&key)?;
        let cert_pem = issuer.pem();
        Ok(Ca {
            name: name.to_owned(),
            key,
            issuer,
            cert_pem,
        })
    }

    /// Rebuilds a CA from its certificate and key PEM (`name` must be the one it was generated
    /// with: it is the issuer name of everything it signs).
    pub fn from_pem(name: &str, cert_pem: &str, key_pem: &str) -> Result<Ca, CaError> {
        let key = KeyPair::from_pem(key_pem)?;
        let issuer = ca_params(name, OffsetDateTime::now_utc())?.self_signed(&key)?;
        Ok(Ca {
            name: name.to_owned(),
            key,
            issuer,
            cert_pem: cert_pem.to_owned(),
        })
    }

    /// Loads a CA saved by [`Ca::save`].
    pub fn load(name: &str, cert: &Path, key: &Path) -> Result<Ca, CaError> {
        let cert_pem = std::fs::read_to_string(cert).map_err(io_err(cert))?;
        let key_pem = std::fs::read_to_string(key).map_err(io_err(key))?;
        Ca::from_pem(name, &cert_pem, &key_pem)
    }

    /// Saves the certificate and the key, both 0600, atomically.
    pub fn save(&self, cert: &Path, key: &Path) -> Result<(), CaError> {
        write_private(cert, self.cert_pem.as_bytes()).map_err(io_err(cert))?;
        write_private(key, self.key.serialize_pem().as_bytes()).map_err(io_err(key))
    }

    /// The CA's common name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The CA certificate (the trust anchor), PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// Issues the certificate of branch `b`'s gateway with a fresh key: SAN `branch-<b>.mms`,
    /// EKU serverAuth + clientAuth, serial `serial`, valid from now (minus [`CLOCK_SKEW`]) for
    /// `validity`.
    pub fn issue_gateway(
        &self,
        b: BranchId,
        serial: u64,
        validity: Duration,
    ) -> Result<Issued, CaError> {
        let key = KeyPair::generate()?;
        let cert = leaf_params(&crate::dns_name(b), serial, validity, true)?.signed_by(
            &key,
            &self.issuer,
            &self.key,
        )?;
        Ok(Issued {
            cert_pem: cert.pem(),
            cert_der: cert.der().clone(),
            key_pem: key.serialize_pem(),
            serial,
        })
    }

    /// Issues branch `b`'s gateway certificate for a public key the gateway generated itself
    /// (enrolment and renewal: the private key never leaves the gateway). Same profile as
    /// [`Ca::issue_gateway`]; the returned `key_pem` is empty.
    pub fn issue_for_key(
        &self,
        b: BranchId,
        serial: u64,
        validity: Duration,
        public_key: &crate::enrol::PublicKey,
    ) -> Result<Issued, CaError> {
        let cert = leaf_params(&crate::dns_name(b), serial, validity, true)?.signed_by(
            public_key,
            &self.issuer,
            &self.key,
        )?;
        Ok(Issued {
            cert_pem: cert.pem(),
            cert_der: cert.der().clone(),
            key_pem: String::new(),
            serial,
        })
    }

    /// Issues a server-only certificate (EKU serverAuth) for `dns_name` with a fresh key: the
    /// controller's own (`ssc.mms`, [`crate::tls::CONTROLLER_NAME`]) on its gateway and
    /// OpenFlow listeners. It carries no branch identity, so it never passes as a gateway.
    pub fn issue_server(
        &self,
        dns_name: &str,
        serial: u64,
        validity: Duration,
    ) -> Result<Issued, CaError> {
        let key = KeyPair::generate()?;
        let cert = leaf_params(dns_name, serial, validity, false)?.signed_by(
            &key,
            &self.issuer,
            &self.key,
        )?;
        Ok(Issued {
            cert_pem: cert.pem(),
            cert_der: cert.der().clone(),
            key_pem: key.serialize_pem(),
            serial,
        })
    }

    /// Signs a CRL revoking `serials` (number `crl_number`, monotonic per CA), PEM.
    pub fn crl(&self, serials: &[u64], crl_number: u64) -> Result<String, CaError> {
        let now = OffsetDateTime::now_utc();
        self.crl_at(serials, crl_number, now + CRL_VALIDITY)
    }

    /// [`Ca::crl`] with an explicit `next_update` in Unix seconds (tests of expired lists use
    /// a past one).
    pub fn crl_until(
        &self,
        serials: &[u64],
        crl_number: u64,
        next_update: u64,
    ) -> Result<String, CaError> {
        let t = i64::try_from(next_update).unwrap_or(i64::MAX);
        let next_update = OffsetDateTime::from_unix_timestamp(t)
            .map_err(|_| CaError::OutOfRange("next_update"))?;
        self.crl_at(serials, crl_number, next_update)
    }

    fn crl_at(
        &self,
        serials: &[u64],
        crl_number: u64,
        next_update: OffsetDateTime,
    ) -> Result<String, CaError> {
        let now = OffsetDateTime::now_utc();
        let params = CertificateRevocationListParams {
            this_update: (now - CLOCK_SKEW).min(next_update - Duration::from_secs(1)),
            next_update,
            crl_number: SerialNumber::from(crl_number),
            issuing_distribution_point: None,
            revoked_certs: serials
                .iter()
                .map(|&s| RevokedCertParams {
                    serial_number: SerialNumber::from(s),
                    revocation_time: now - CLOCK_SKEW,
                    reason_code: None,
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: KeyIdMethod::Sha256,
        };
        Ok(params.signed_by(&self.issuer, &self.key)?.pem()?)
    }

    /// Writes an issued certificate and its key (both 0600, as one unit:
    /// [`crate::files::write_pair`]).
    pub fn save_issued(issued: &Issued, cert: &Path, key: &Path) -> Result<(), CaError> {
        crate::files::write_pair(
            cert,
            key,
            issued.cert_pem.as_bytes(),
            issued.key_pem.as_bytes(),
        )
        .map_err(io_err(cert))
    }
}
