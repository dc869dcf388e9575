//! MMS certificate conventions (docs/security.md): one CA per deployment (run by `ssc`, which
//! enrols and renews the gateways; tests and the bench also make their own) issues one
//! certificate per branch gateway; TLS 1.3 with mutual authentication against that CA protects
//! every tunnel connection and the gateway ⇄ controller channel.
//!
//! The identity convention: a gateway certificate carries exactly one subject alternative name
//! of type dNSName, `branch-<b>.mms` with `b` the decimal branch id (1..=250, no leading zero),
//! and the extended key usages serverAuth and clientAuth (the same certificate serves the
//! gateway's listeners and its outbound connections). [`identity_of`] maps a peer's certificate
//! back to its branch; [`server_name`] is what a client dials.
//!
//! Modules: [`ca`] (generate, load, save, issue, revoke), [`crl`] (revocation lists that fail
//! closed: signature, `crl_number`, `next_update`), [`enrol`] (one-time tokens, key
//! requests with proof of possession), [`tls`] (the rustls configurations
//! and the classification of handshake failures), [`validity`] (a certificate's validity
//! period, for renewal), [`files`] (0600 atomic writes), [`fuzz`]
//! (the fuzz check of the accepting side).

#![forbid(unsafe_code)]

pub mod ca;
pub mod crl;
pub mod enrol;
pub mod files;
pub mod fuzz;
pub mod tls;
pub mod validity;

use mms_types::BranchId;
use rustls::pki_types::CertificateDer;

/// The DNS suffix of gateway identities.
pub const IDENTITY_SUFFIX: &str = ".mms";
/// The DNS prefix of gateway identities.
pub const IDENTITY_PREFIX: &str = "branch-";

/// Why a certificate carries no (single, valid) branch identity. Peer input: never a panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// The bytes are not an X.509 certificate webpki can parse.
    #[error("not a parsable X.509 certificate")]
    BadCertificate,
    /// No dNSName of the form `branch-<b>.mms`.
    #[error("no branch identity (SAN branch-<b>.mms) in the certificate")]
    NoIdentity,
    /// More than one branch identity: ambiguous, refused.
    #[error("more than one branch identity in the certificate")]
    Ambiguous,
    /// The serial number is longer than 8 bytes (we issue u64 serials).
    #[error("serial number longer than 64 bits")]
    SerialTooLong,
}

/// The DNS name that identifies branch `b`, e.g. `branch-2.mms`.
pub fn dns_name(b: BranchId) -> String {
    format!("{IDENTITY_PREFIX}{b}{IDENTITY_SUFFIX}")
}

/// The rustls server name a client verifies when it dials branch `b`.
pub fn server_name(b: BranchId) -> rustls::pki_types::ServerName<'static> {
    // `branch-<1..250>.mms` is always a valid DNS name; the fallback is unreachable but keeps
    // this function total (a wrong name fails verification, it never accepts).
    rustls::pki_types::ServerName::try_from(dns_name(b)).unwrap_or_else(|_| {
        rustls::pki_types::ServerName::IpAddress(std::net::Ipv4Addr::UNSPECIFIED.into())
    })
}

/// Parses `branch-<b>.mms` (exactly; no leading zeros, no other case) into a branch id.
pub fn parse_dns_name(name: &str) -> Option<BranchId> {
    let digits = name
        .strip_prefix(IDENTITY_PREFIX)?
        .strip_suffix(IDENTITY_SUFFIX)?;
    if digits.is_empty()
        || digits.len() > 3
        || digits.starts_with('0')
        || !digits.bytes().all(|c| c.is_ascii_digit())
    {
        return None;
    }
    BranchId::new(digits.parse().ok()?).ok()
}

/// The branch a certificate (DER) identifies. Never panics on any bytes. It does NOT verify the
/// certificate: call it on a certificate rustls already verified against the CA.
pub fn identity_of(der: &[u8]) -> Result<BranchId, IdentityError> {
    let der = CertificateDer::from(der);
    let cert = webpki::EndEntityCert::try_from(&der).map_err(|_| IdentityError::BadCertificate)?;
    let mut found = None;
    for name in cert.valid_dns_names() {
        if let Some(b) = parse_dns_name(name) {
            if found.is_some_and(|f| f != b) {
                return Err(IdentityError::Ambiguous);
            }
            found = Some(b);
        }
    }
    found.ok_or(IdentityError::NoIdentity)
}

/// The serial number of a certificate (DER) as an integer. Never panics on any bytes.
pub fn serial_of(der: &[u8]) -> Result<u64, IdentityError> {
    let der = CertificateDer::from(der);
    let cert = webpki::EndEntityCert::try_from(&der).map_err(|_| IdentityError::BadCertificate)?;
    serial_to_u64(cert.serial())
}

/// A DER INTEGER's content (big-endian two's complement) as u64; a sign byte 0 is allowed.
fn serial_to_u64(raw: &[u8]) -> Result<u64, IdentityError> {
    let mut bytes = raw;
    while let [0, rest @ ..] = bytes {
        bytes = rest;
    }
    if bytes.len() > 8 {
        return Err(IdentityError::SerialTooLong);
    }
    Ok(bytes.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn b(n: u8) -> BranchId {
        BranchId::new(n).unwrap()
    }

    #[test]
    fn dns_names_round_trip() {
        for n in 1..=250 {
            assert_eq!(parse_dns_name(&dns_name(b(n))), Some(b(n)));
        }
        for bad in [
            "branch-0.mms",
            "branch-251.mms",
            "branch-1000.mms",
            "branch-02.mms",
            "branch-.mms",
            "branch-2.mms.",
            "Branch-2.mms",
            "branch-2.example",
            "xbranch-2.mms",
            "branch-+2.mms",
            "branch-255.mms",
        ] {
            assert_eq!(parse_dns_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn identity_of_never_panics_on_junk() {
        assert_eq!(identity_of(&[]), Err(IdentityError::BadCertificate));
        assert_eq!(
            identity_of(&[0x30, 0x82, 0xff, 0xff]),
            Err(IdentityError::BadCertificate)
        );
        // Every prefix of a real certificate, and single-byte corruptions of it.
        let ca = ca::Ca::generate("test").unwrap();
        let issued = ca.issue_gateway(b(4), 77, ca::DEFAULT_VALIDITY).unwrap();
        let der = issued.cert_der.to_vec();
        for n in 0..der.len() {
            let _ = identity_of(&der[..n]);
        }
        for i in 0..der.len() {
            let mut d = der.clone();
            d[i] ^= 0x5a;
            let _ = identity_of(&d);
            let _ = serial_of(&d);
        }
        assert_eq!(identity_of(&der), Ok(b(4)));
        assert_eq!(serial_of(&der), Ok(77));
    }

    #[test]
    fn serials_decode() {
        assert_eq!(serial_to_u64(&[0, 0x80]), Ok(0x80));
        assert_eq!(serial_to_u64(&[1, 2]), Ok(0x102));
        assert_eq!(serial_to_u64(&[]), Ok(0));
        assert_eq!(
            serial_to_u64(&[1, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(IdentityError::SerialTooLong)
        );
    }
}
