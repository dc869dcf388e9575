//! Revocation lists that fail closed (issue #17, docs/security.md "Revocation fails closed"):
//! the pure checks a gateway runs on a CRL before it uses one, whether pushed by the controller
//! over the gateway channel or read from `crl_file` at start and on reload.
//!
//! - [`verify`]: the CRL (DER) is signed by one of the CA certificates we trust (the signature is
//!   checked here, before rustls ever sees the list; a forged list is never stored or used). It
//!   returns the list's [`CrlInfo`]: its `crl_number` and its `next_update`.
//! - [`check_update`]: a pushed list (PEM) is accepted only when it verifies, has not expired
//!   and its `crl_number` is higher than the one in use ([`CrlError::Replay`] otherwise: an old
//!   list must never un-revoke a certificate).
//! - [`CrlInfo::expired_at`]: after `next_update` the list no longer says anything about the
//!   present; new handshakes are refused then ([`crate::tls`] enforces it on every verifier).
//!
//! Everything here takes file or peer bytes: nothing panics, anything unexpected is an error.
//! The DER walk is the minimal one of RFC 5280 §5.1:
//!
//! ```text
//! CertificateList ::= SEQUENCE {
//!     tbsCertList          TBSCertList,            -- signed bytes (whole element)
//!     signatureAlgorithm   AlgorithmIdentifier,
//!     signatureValue       BIT STRING }
//! TBSCertList ::= SEQUENCE {
//!     version              INTEGER OPTIONAL,       -- v2 (1)
//!     signature            AlgorithmIdentifier,    -- must equal signatureAlgorithm
//!     issuer               Name,
//!     thisUpdate           Time,
//!     nextUpdate           Time OPTIONAL,          -- required here
//!     revokedCertificates  SEQUENCE OF ... OPTIONAL,
//!     crlExtensions        [0] EXPLICIT Extensions OPTIONAL }  -- cRLNumber 2.5.29.20 required
//! ```

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer};

use crate::validity::{element, time_of};

/// DER of the OID 2.5.29.20 (id-ce-cRLNumber), contents only.
const OID_CRL_NUMBER: &[u8] = &[0x55, 0x1d, 0x14];
/// RFC 5280 §5.2.3: a CRL number is at most 20 octets. We keep numbers as u128 (the controller
/// counts with u64); a longer one is refused rather than truncated.
const MAX_NUMBER_BYTES: usize = 16;

/// What a verified CRL says about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrlInfo {
    /// `crl_number`: increases with every list the CA signs.
    pub number: u128,
    /// `thisUpdate`, Unix seconds.
    pub this_update: u64,
    /// `nextUpdate`, Unix seconds: after it, the list is expired.
    pub next_update: u64,
}

impl CrlInfo {
    /// Whether the list has expired at `now` (Unix s): `now >= next_update`, as webpki decides.
    pub fn expired_at(&self, now: u64) -> bool {
        now >= self.next_update
    }
}

/// Why a CRL is refused. File or peer input: every variant is the input's fault (or an
/// operator's: the wrong CA).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CrlError {
    /// Not PEM with exactly one CRL, or not the DER structure above.
    #[error("not a parsable CRL ({0})")]
    Malformed(&'static str),
    /// The CRL carries no `cRLNumber` extension (or one longer than 16 bytes).
    #[error("the CRL has no usable crl_number")]
    NoNumber,
    /// The CRL carries no `nextUpdate`.
    #[error("the CRL has no next_update")]
    NoNextUpdate,
    /// The signature does not verify with any of our CA certificates (another signer, or
    /// altered bytes).
    #[error("the CRL is not signed by our CA")]
    Signature,
    /// `crl_number` is not higher than the one in use: a replayed (older) list.
    #[error("crl_number {got} is not newer than the CRL in use (crl_number {have}): replayed or old CRL")]
    Replay {
        /// The number in use.
        have: u128,
        /// The number received.
        got: u128,
    },
    /// The list expired before it arrived.
    #[error("the CRL expired at {next_update} (unix), now is {now}")]
    Expired {
        /// Its `nextUpdate`, Unix s.
        next_update: u64,
        /// The time of the check, Unix s.
        now: u64,
    },
}

/// The one CRL of a PEM text (a gateway uses exactly one list, its CA's).
pub fn der_of_pem(pem: &[u8]) -> Result<CertificateRevocationListDer<'static>, CrlError> {
    let mut it = CertificateRevocationListDer::pem_slice_iter(pem);
    let first = match it.next() {
        Some(Ok(c)) => c,
        Some(Err(_)) => return Err(CrlError::Malformed("bad PEM")),
        None => return Err(CrlError::Malformed("no X509 CRL PEM block")),
    };
    if it.next().is_some() {
        return Err(CrlError::Malformed("more than one CRL"));
    }
    Ok(first)
}

/// The parts of a CRL's DER that [`verify`] needs.
struct Parts<'a> {
    /// The whole `tbsCertList` element (tag and length included): the signed bytes.
    tbs_raw: &'a [u8],
    /// `signatureAlgorithm`'s contents (what webpki's `signature_alg_id` holds).
    alg: &'a [u8],
    /// The signature (BIT STRING contents after the unused-bits octet).
    signature: &'a [u8],
    info: CrlInfo,
}

/// One DER element: (tag, contents, whole encoding, rest of the buffer).
type Element<'a> = (u8, &'a [u8], &'a [u8], &'a [u8]);

/// `buf`'s first element and its whole encoding.
fn element_raw(buf: &[u8]) -> Option<Element<'_>> {
    let (tag, contents, rest) = element(buf)?;
    let raw = buf.get(..buf.len() - rest.len())?;
    Some((tag, contents, raw, rest))
}

fn parse(der: &[u8]) -> Result<Parts<'_>, CrlError> {
    let bad = CrlError::Malformed;
    let (0x30, list, _, trailing) = element_raw(der).ok_or(bad("outer"))? else {
        return Err(bad("outer is not a SEQUENCE"));
    };
    if !trailing.is_empty() {
        return Err(bad("trailing bytes"));
    }
    let (0x30, tbs, tbs_raw, rest) = element_raw(list).ok_or(bad("tbsCertList"))? else {
        return Err(bad("tbsCertList is not a SEQUENCE"));
    };
    let (0x30, alg, _, rest) = element_raw(rest).ok_or(bad("signatureAlgorithm"))? else {
        return Err(bad("signatureAlgorithm is not a SEQUENCE"));
    };
    let (0x03, bits, _, rest) = element_raw(rest).ok_or(bad("signatureValue"))? else {
        return Err(bad("signatureValue is not a BIT STRING"));
    };
    if !rest.is_empty() {
        return Err(bad("trailing bytes in CertificateList"));
    }
    let [0, signature @ ..] = bits else {
        return Err(bad("signatureValue has unused bits"));
    };

    // TBSCertList.
    let mut r = tbs;
    let (mut tag, mut contents, _, mut next) = element_raw(r).ok_or(bad("tbs version"))?;
    if tag == 0x02 {
        // version (v2 = 1); then the signature algorithm.
        r = next;
        (tag, contents, _, next) = element_raw(r).ok_or(bad("tbs signature"))?;
    }
    if tag != 0x30 || contents != alg {
        return Err(bad("tbs signature algorithm differs from the outer one"));
    }
    // issuer
    let (0x30, _, _, r) = element_raw(next).ok_or(bad("issuer"))? else {
        return Err(bad("issuer is not a SEQUENCE"));
    };
    let (t, v, _, r) = element_raw(r).ok_or(bad("thisUpdate"))?;
    let this_update = time_of(t, v).ok_or(bad("thisUpdate"))?;
    let (t, v, _, mut r) = element_raw(r).ok_or(CrlError::NoNextUpdate)?;
    let next_update = time_of(t, v).ok_or(CrlError::NoNextUpdate)?;
    // revokedCertificates (optional), then [0] crlExtensions (optional).
    let mut number = None;
    while let Some((t, v, _, rest)) = element_raw(r) {
        r = rest;
        if t != 0xa0 {
            continue;
        }
        let (0x30, mut exts, _, _) = element_raw(v).ok_or(bad("crlExtensions"))? else {
            return Err(bad("crlExtensions is not a SEQUENCE"));
        };
        while !exts.is_empty() {
            let (0x30, ext, _, rest) = element_raw(exts).ok_or(bad("extension"))? else {
                return Err(bad("extension is not a SEQUENCE"));
            };
            exts = rest;
            let (0x06, oid, _, rest) = element_raw(ext).ok_or(bad("extnID"))? else {
                return Err(bad("extnID is not an OID"));
            };
            if oid != OID_CRL_NUMBER {
                continue;
            }
            let mut rest = rest;
            if let Some((0x01, _, _, after)) = element_raw(rest) {
                rest = after; // critical BOOLEAN
            }
            let (0x04, value, _, _) = element_raw(rest).ok_or(bad("extnValue"))? else {
                return Err(bad("extnValue is not an OCTET STRING"));
            };
            let (0x02, int, _, _) = element_raw(value).ok_or(CrlError::NoNumber)? else {
                return Err(CrlError::NoNumber);
            };
            number = Some(unsigned(int).ok_or(CrlError::NoNumber)?);
        }
    }
    if !r.is_empty() {
        return Err(bad("trailing bytes in tbsCertList"));
    }
    Ok(Parts {
        tbs_raw,
        alg,
        signature,
        info: CrlInfo {
            number: number.ok_or(CrlError::NoNumber)?,
            this_update,
            next_update,
        },
    })
}

/// A non-negative DER INTEGER's contents as u128 (None: negative, empty or too long).
fn unsigned(raw: &[u8]) -> Option<u128> {
    if raw.first().is_none_or(|b| b & 0x80 != 0) {
        return None;
    }
    let mut bytes = raw;
    while let [0, rest @ ..] = bytes {
        bytes = rest;
    }
    if bytes.len() > MAX_NUMBER_BYTES {
        return None;
    }
    Some(bytes.iter().fold(0u128, |a, &b| (a << 8) | u128::from(b)))
}

/// Checks that the CRL `der` is signed by one of `cas` (CA certificates, DER) and returns what
/// it says about itself. No time check (see [`CrlInfo::expired_at`]).
pub fn verify(der: &[u8], cas: &[CertificateDer<'_>]) -> Result<CrlInfo, CrlError> {
    let parts = parse(der)?;
    for ca in cas {
        let Ok(cert) = webpki::EndEntityCert::try_from(ca) else {
            continue;
        };
        for alg in webpki::ALL_VERIFICATION_ALGS {
            if alg.signature_alg_id().as_ref() != parts.alg {
                continue;
            }
            if cert
                .verify_signature(*alg, parts.tbs_raw, parts.signature)
                .is_ok()
            {
                return Ok(parts.info);
            }
        }
    }
    Err(CrlError::Signature)
}

/// The CA certificates of a PEM text (the `[tls] ca_file`); unparsable blocks are skipped (the
/// credentials loader reports them).
pub fn cas_of_pem(ca_pem: &[u8]) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(ca_pem)
        .filter_map(Result::ok)
        .collect()
}

/// Verifies the one CRL in `crl_pem` against the CAs of `ca_pem`.
pub fn verify_pem(crl_pem: &[u8], ca_pem: &[u8]) -> Result<CrlInfo, CrlError> {
    verify(&der_of_pem(crl_pem)?, &cas_of_pem(ca_pem))
}

/// The decision on a CRL pushed while `have` (the `crl_number` in use, if any) is in use, at
/// `now` (Unix s): it must verify against `ca_pem`, not be expired, and be newer than `have`.
/// The list in use itself (same number) is a [`CrlError::Replay`] too; the caller may compare
/// bytes first to treat an identical push as a no-op.
pub fn check_update(
    crl_pem: &[u8],
    ca_pem: &[u8],
    have: Option<u128>,
    now: u64,
) -> Result<CrlInfo, CrlError> {
    check_update_der(&der_of_pem(crl_pem)?, &cas_of_pem(ca_pem), have, now)
}

/// [`check_update`] on a DER CRL and parsed CA certificates.
pub fn check_update_der(
    der: &[u8],
    cas: &[CertificateDer<'_>],
    have: Option<u128>,
    now: u64,
) -> Result<CrlInfo, CrlError> {
    let info = verify(der, cas)?;
    if let Some(have) = have {
        if info.number <= have {
            return Err(CrlError::Replay {
                have,
                got: info.number,
            });
        }
    }
    if info.expired_at(now) {
        return Err(CrlError::Expired {
            next_update: info.next_update,
            now,
        });
    }
    Ok(info)
}

/// Seconds since the Unix epoch now (0 before 1970).
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A Unix time as RFC 3339 UTC (`2026-11-25T16:00:00Z`), for log lines; the number itself when
/// it is out of range.
pub fn rfc3339(t: u64) -> String {
    i64::try_from(t)
        .ok()
        .and_then(|t| time::OffsetDateTime::from_unix_timestamp(t).ok())
        .map(|d| {
            format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
                d.year(),
                u8::from(d.month()),
                d.day(),
                d.hour(),
                d.minute(),
                d.second()
            )
        })
        .unwrap_or_else(|| format!("{t} (unix)"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use crate::ca::Ca;

    #[test]
    fn reads_what_the_ca_signs() {
        let ca = Ca::generate("t").unwrap();
        let pem = ca.crl(&[3, 9], 41).unwrap();
        let info = verify_pem(pem.as_bytes(), ca.cert_pem().as_bytes()).unwrap();
        assert_eq!(info.number, 41);
        let now = unix_now();
        assert!(info.next_update > now + 6 * 86_400, "{info:?}");
        assert!(info.this_update < now, "{info:?}");
        assert!(!info.expired_at(now));
        assert!(info.expired_at(info.next_update));
    }

    #[test]
    fn junk_and_every_corruption_is_refused_without_panic() {
        let ca = Ca::generate("t").unwrap();
        let der = der_of_pem(ca.crl(&[3], 7).unwrap().as_bytes()).unwrap();
        let cas = cas_of_pem(ca.cert_pem().as_bytes());
        assert_eq!(verify(&der, &cas).unwrap().number, 7);
        for n in 0..der.len() {
            assert!(verify(&der[..n], &cas).is_err(), "prefix {n} accepted");
        }
        for i in 0..der.len() {
            let mut d = der.to_vec();
            d[i] ^= 0x41;
            assert!(verify(&d, &cas).is_err(), "corruption at {i} accepted");
        }
        assert!(verify(&[], &cas).is_err());
        assert!(matches!(der_of_pem(b"junk"), Err(CrlError::Malformed(_))));
        let two = format!("{}{}", ca.crl(&[], 1).unwrap(), ca.crl(&[], 2).unwrap());
        assert!(matches!(
            der_of_pem(two.as_bytes()),
            Err(CrlError::Malformed("more than one CRL"))
        ));
    }

    #[test]
    fn numbers_decode() {
        assert_eq!(unsigned(&[0]), Some(0));
        assert_eq!(unsigned(&[0, 0x80]), Some(0x80));
        assert_eq!(unsigned(&[0x80]), None);
        assert_eq!(unsigned(&[]), None);
        assert_eq!(unsigned(&[1; 17]), None);
        assert_eq!(unsigned(&[0x7f; 16]), Some(u128::from_be_bytes([0x7f; 16])));
    }

    #[test]
    fn times_format() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(u64::MAX), format!("{} (unix)", u64::MAX));
    }
}
