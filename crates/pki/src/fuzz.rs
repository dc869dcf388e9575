//! The fuzz check of the tunnel's accepting side (`crates/pki/fuzz`, replayed on the committed
//! corpus by `tests/fuzz_corpus.rs`): arbitrary client bytes into an in-memory rustls
//! `ServerConnection` built with [`crate::tls::Credentials::server_config`] (the acceptor every
//! gateway runs), then whatever plaintext comes out into the hello decoder and the frame
//! deframer, as the tunnel's reader would.
//!
//! [`crl_push_check`] is the fuzz check of the CRL push handler's decision
//! ([`crate::crl::check_update`], what `mmsg` runs on every CRL the controller pushes).
//!
//! Invariants of the handshake check: no panic; memory bounded (rustls refuses to buffer more than one record it
//! cannot process: `read_tls` errors, and we stop); the handshake never completes without a
//! verified client certificate carrying a branch identity; the frame decoder's round-trip
//! invariants hold on the plaintext (the caller passes `mpa::framing::fuzz_check`, so `pki`
//! stays below `mpa`).

use std::sync::{Arc, OnceLock};

use mms_types::BranchId;
use rustls::{ServerConfig, ServerConnection};

use crate::ca::{Ca, DEFAULT_VALIDITY};
use crate::tls::Credentials;

/// Most bytes of one input fed to the server (libFuzzer's default max_len is 4096; a handshake
/// flight is a few KiB).
pub const MAX_INPUT: usize = 64 * 1024;
/// Most plaintext bytes taken out of the connection per input (bounds the decoder's work).
pub const MAX_PLAINTEXT: usize = 256 * 1024;

/// The acceptor of branch 2 under a CA made once per process (key generation is the slow part).
fn server_config() -> Option<Arc<ServerConfig>> {
    static CONFIG: OnceLock<Option<Arc<ServerConfig>>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let b2 = BranchId::new(2).ok()?;
            let ca = Ca::generate("MMS fuzz CA").ok()?;
            let g2 = ca.issue_gateway(b2, 2, DEFAULT_VALIDITY).ok()?;
            let creds = Credentials::from_pem(
                ca.cert_pem().as_bytes(),
                g2.cert_pem.as_bytes(),
                g2.key_pem.as_bytes(),
                None,
                b2,
            )
            .ok()?;
            creds.server_config().ok()
        })
        .clone()
}

/// Runs one input; panics (an assertion) only when an invariant breaks. `check_plaintext`
/// checks whatever plaintext the handshake let through (the tunnel passes its frame decoder).
#[doc(hidden)]
#[allow(clippy::panic)] // an assertion of the fuzz contract
pub fn handshake_check(data: &[u8], check_plaintext: impl Fn(&[u8])) {
    let Some(config) = server_config() else {
        panic!("fuzz set-up: could not build the server configuration");
    };
    let Ok(mut conn) = ServerConnection::new(config) else {
        return;
    };
    let mut input = data.get(..MAX_INPUT).unwrap_or(data);
    let mut plaintext = Vec::new();
    while !input.is_empty() {
        match conn.read_tls(&mut input) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if conn.process_new_packets().is_err() {
            break;
        }
        let mut chunk = [0u8; 4096];
        while plaintext.len() < MAX_PLAINTEXT {
            match std::io::Read::read(&mut conn.reader(), &mut chunk) {
                Ok(n) if n > 0 => plaintext.extend_from_slice(chunk.get(..n).unwrap_or(&[])),
                _ => break,
            }
        }
        // Drain what the server wants to send, as a socket would.
        let mut sink = Vec::new();
        while conn.wants_write() {
            if conn.write_tls(&mut sink).is_err() {
                break;
            }
            sink.clear();
        }
    }
    if !conn.is_handshaking() {
        let identity = conn
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| crate::identity_of(c));
        assert!(
            matches!(identity, Some(Ok(_))),
            "handshake completed without a verified branch certificate"
        );
    }
    assert!(
        plaintext.is_empty() || !conn.is_handshaking(),
        "plaintext before the handshake completed"
    );
    check_plaintext(&plaintext);
}

/// The `crl_number` in use in [`crl_push_check`]: a pushed list must be newer.
pub const CRL_HAVE: u128 = 4;

/// Runs one pushed CRL (PEM text, or DER when it does not parse as PEM) through the push
/// decision against the CA certificate `ca_pem` with [`CRL_HAVE`] in use, now. Invariants: no
/// panic; an accepted list is newer than [`CRL_HAVE`], not expired, verifies again as DER
/// and is one webpki parses too (our DER walk accepts nothing webpki's would refuse); a list
/// refused as PEM is refused as DER for the same reason.
#[doc(hidden)]
#[allow(clippy::panic)] // an assertion of the fuzz contract
pub fn crl_push_check(ca_pem: &[u8], data: &[u8]) {
    use crate::crl;
    let cas = crl::cas_of_pem(ca_pem);
    assert!(!cas.is_empty(), "fuzz set-up: no CA certificate");
    let now = crl::unix_now();
    let der = match crl::der_of_pem(data) {
        Ok(der) => {
            let pem = crl::check_update(data, ca_pem, Some(CRL_HAVE), now);
            let direct = crl::check_update_der(&der, &cas, Some(CRL_HAVE), now);
            assert_eq!(pem, direct, "PEM and DER decisions differ");
            der.as_ref().to_vec()
        }
        Err(_) => data.to_vec(),
    };
    let Ok(info) = crl::check_update_der(&der, &cas, Some(CRL_HAVE), now) else {
        return;
    };
    assert!(info.number > CRL_HAVE, "accepted a replayed CRL: {info:?}");
    assert!(!info.expired_at(now), "accepted an expired CRL: {info:?}");
    assert_eq!(
        crl::verify(&der, &cas),
        Ok(info),
        "verification not repeatable"
    );
    assert!(
        webpki::OwnedCertRevocationList::from_der(&der).is_ok(),
        "accepted a CRL webpki cannot parse"
    );
}
