//! Enrolment material (docs/security.md, "Enrolment"): one-time tokens, their hashes, and key
//! requests with proof of possession.
//!
//! A gateway generates its key pair locally ([`KeyRequest::generate`]); only the public key and a
//! signature over it ([`PROOF_CONTEXT`] ‖ public key) leave the gateway. The CA checks the
//! signature ([`verify_request`]), which also proves the bytes are a valid P-256 point, and
//! signs a certificate for exactly that key ([`crate::ca::Ca::issue_for_key`]).
//!
//! Tokens are 256 random bits in hex ([`random_token`]); the controller stores only their
//! SHA-256 ([`token_hash`]). Every decoder here takes peer input and never panics.

use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{self, EcdsaKeyPair, KeyPair as _};

/// Random bytes in a token: 256 bits (the brief asks for at least 128; brute force is moot).
pub const TOKEN_BYTES: usize = 32;
/// What a proof of possession signs, before the public key (domain separation: a signature made
/// for anything else never passes as a proof).
pub const PROOF_CONTEXT: &[u8] = b"mms-enrol-v1\0";
/// Length of an uncompressed P-256 public key (0x04 ‖ X ‖ Y).
pub const P256_POINT_LEN: usize = 65;
/// Longest proof accepted: an ASN.1 ECDSA P-256 signature is at most 72 bytes.
pub const MAX_PROOF_LEN: usize = 80;

/// Errors of enrolment material (the peer's input was bad, or the system RNG failed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnrolError {
    /// Not lowercase/uppercase hex of the right length.
    #[error("{0}: not valid hex of the expected length")]
    Encoding(&'static str),
    /// The public key is not a P-256 point or the proof does not verify.
    #[error("the proof of possession does not verify for this public key")]
    BadProof,
    /// The key could not be generated (system RNG or encoding failure).
    #[error("key generation failed: {0}")]
    KeyGen(String),
}

/// Lowercase hex.
pub fn to_hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Hex (either case) to bytes; `None` for odd length or a non-hex digit.
pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    let b = s.as_bytes();
    if b.len() % 2 != 0 {
        return None;
    }
    b.chunks_exact(2)
        .map(|p| match p {
            [h, l] => Some((nibble(*h)? << 4) | nibble(*l)?),
            _ => None,
        })
        .collect()
}

/// A fresh one-time token: [`TOKEN_BYTES`] from the system RNG, hex.
pub fn random_token() -> Result<String, EnrolError> {
    let mut b = [0u8; TOKEN_BYTES];
    SystemRandom::new()
        .fill(&mut b)
        .map_err(|_| EnrolError::KeyGen("system RNG".into()))?;
    Ok(to_hex(&b))
}

/// What the controller stores for a token: SHA-256 of its text, hex.
pub fn token_hash(token: &str) -> String {
    to_hex(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()).as_ref())
}

/// SHA-256 of the first certificate in a PEM (hex, colon-free): what `ssc enrol-token` prints
/// so an operator can pin the CA without copying a file. `None` if there is no certificate.
pub fn fingerprint(cert_pem: &str) -> Option<String> {
    use rustls::pki_types::pem::PemObject;
    let der = rustls::pki_types::CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .next()?
        .ok()?;
    Some(to_hex(
        ring::digest::digest(&ring::digest::SHA256, &der).as_ref(),
    ))
}

/// A key generated on the gateway, and what it sends to the CA.
pub struct KeyRequest {
    /// The private key (PKCS#8 PEM). A secret: written 0600 on the gateway, never sent.
    pub key_pem: String,
    /// The public key (uncompressed P-256 point), hex.
    pub public_key: String,
    /// ECDSA P-256 SHA-256 (ASN.1) over [`PROOF_CONTEXT`] ‖ public key, hex.
    pub proof: String,
}

impl std::fmt::Debug for KeyRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("KeyRequest")
            .field("public_key", &self.public_key)
            .finish_non_exhaustive()
    }
}

impl KeyRequest {
    /// A new ECDSA P-256 key pair and its proof of possession.
    pub fn generate() -> Result<KeyRequest, EnrolError> {
        let rng = SystemRandom::new();
        let alg = &signature::ECDSA_P256_SHA256_ASN1_SIGNING;
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng)
            .map_err(|e| EnrolError::KeyGen(e.to_string()))?;
        let pair = EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng)
            .map_err(|e| EnrolError::KeyGen(e.to_string()))?;
        let public = pair.public_key().as_ref().to_vec();
        let mut msg = PROOF_CONTEXT.to_vec();
        msg.extend_from_slice(&public);
        let sig = pair
            .sign(&rng, &msg)
            .map_err(|e| EnrolError::KeyGen(e.to_string()))?;
        let key = rcgen::KeyPair::try_from(pkcs8.as_ref())
            .map_err(|e| EnrolError::KeyGen(e.to_string()))?;
        Ok(KeyRequest {
            key_pem: key.serialize_pem(),
            public_key: to_hex(&public),
            proof: to_hex(sig.as_ref()),
        })
    }
}

/// A verified P-256 public key, ready for [`crate::ca::Ca::issue_for_key`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    point: Vec<u8>,
}

impl rcgen::PublicKeyData for PublicKey {
    fn der_bytes(&self) -> &[u8] {
        &self.point
    }

    fn algorithm(&self) -> &rcgen::SignatureAlgorithm {
        &rcgen::PKCS_ECDSA_P256_SHA256
    }
}

/// Checks a key request from the peer: hex of a 65-byte point and a proof that verifies for it.
pub fn verify_request(public_key: &str, proof: &str) -> Result<PublicKey, EnrolError> {
    if public_key.len() != P256_POINT_LEN * 2 {
        return Err(EnrolError::Encoding("public_key"));
    }
    let point = from_hex(public_key).ok_or(EnrolError::Encoding("public_key"))?;
    if proof.is_empty() || proof.len() > MAX_PROOF_LEN * 2 {
        return Err(EnrolError::Encoding("proof"));
    }
    let sig = from_hex(proof).ok_or(EnrolError::Encoding("proof"))?;
    let mut msg = PROOF_CONTEXT.to_vec();
    msg.extend_from_slice(&point);
    signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_ASN1, &point)
        .verify(&msg, &sig)
        .map_err(|_| EnrolError::BadProof)?;
    Ok(PublicKey { point })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn hex_round_trip_and_junk() {
        let b: Vec<u8> = (0..=255).collect();
        assert_eq!(from_hex(&to_hex(&b)).unwrap(), b);
        assert_eq!(from_hex("0"), None);
        assert_eq!(from_hex("zz"), None);
        assert_eq!(from_hex("é1"), None);
        assert_eq!(from_hex("AbCd").unwrap(), vec![0xab, 0xcd]);
    }

    #[test]
    fn tokens_are_random_and_hashed() {
        let a = random_token().unwrap();
        let b = random_token().unwrap();
        assert_eq!(a.len(), TOKEN_BYTES * 2);
        assert_ne!(a, b);
        assert_eq!(token_hash(&a), token_hash(&a));
        assert_ne!(token_hash(&a), token_hash(&b));
        assert_ne!(token_hash(&a), a);
    }

    #[test]
    fn proof_verifies_only_for_its_key() {
        let r = KeyRequest::generate().unwrap();
        verify_request(&r.public_key, &r.proof).unwrap();
        let other = KeyRequest::generate().unwrap();
        assert_eq!(
            verify_request(&other.public_key, &r.proof),
            Err(EnrolError::BadProof)
        );
        // Junk of every kind is an error, never a panic.
        for (k, p) in [
            ("", ""),
            ("04", &r.proof[..]),
            (&r.public_key[..], "zz"),
            (&r.public_key[..], ""),
            (&"0".repeat(130)[..], &r.proof[..]),
        ] {
            assert!(verify_request(k, p).is_err());
        }
        assert!(!format!("{r:?}").contains("PRIVATE"));
    }
}
