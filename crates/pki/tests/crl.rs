//! Revocation fails closed (issue #17): a forged CRL (another signer) and a replayed older CRL
//! are refused; an expired CRL makes every new handshake fail, on both sides, and tells the
//! hook when (its `next_update`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::{Arc, Mutex};

use mms_types::BranchId;
use pki::ca::{Ca, Issued, DEFAULT_VALIDITY};
use pki::crl::{check_update, unix_now, CrlError};
use pki::tls::{is_crl_expired, Credentials, CrlExpired, TlsError};
use rustls::{ClientConnection, ServerConnection};

fn b(n: u8) -> BranchId {
    BranchId::new(n).unwrap()
}

fn creds(ca: &Ca, issued: &Issued, own: BranchId, crl: Option<&str>) -> Credentials {
    Credentials::from_pem(
        ca.cert_pem().as_bytes(),
        issued.cert_pem.as_bytes(),
        issued.key_pem.as_bytes(),
        crl.map(str::as_bytes),
        own,
    )
    .unwrap()
}

/// An in-memory handshake client -> server; the side that failed and its error, or Ok.
fn handshake(
    client: &Credentials,
    server: &Credentials,
    dial: BranchId,
) -> Result<(), (&'static str, rustls::Error)> {
    let mut c =
        ClientConnection::new(client.client_config().unwrap(), pki::server_name(dial)).unwrap();
    let mut s = ServerConnection::new(server.server_config().unwrap()).unwrap();
    for _ in 0..10 {
        let mut buf = Vec::new();
        while c.wants_write() {
            c.write_tls(&mut buf).unwrap();
        }
        let mut rd = &buf[..];
        while !rd.is_empty() {
            s.read_tls(&mut rd).unwrap();
            s.process_new_packets().map_err(|e| ("server", e))?;
        }
        let mut buf = Vec::new();
        while s.wants_write() {
            s.write_tls(&mut buf).unwrap();
        }
        let mut rd = &buf[..];
        while !rd.is_empty() {
            c.read_tls(&mut rd).unwrap();
            c.process_new_packets().map_err(|e| ("client", e))?;
        }
        if !c.is_handshaking() && !s.is_handshaking() {
            return Ok(());
        }
    }
    panic!("handshake did not finish");
}

#[test]
fn a_crl_signed_by_another_ca_is_refused() {
    let ca = Ca::generate("MMS test CA").unwrap();
    // Same subject name, other key: the issuer name matches, the signature does not.
    let rogue = Ca::generate("MMS test CA").unwrap();
    let g2 = ca.issue_gateway(b(2), 20, DEFAULT_VALIDITY).unwrap();
    let forged = rogue.crl(&[], 1_000).unwrap();
    let e = Credentials::from_pem(
        ca.cert_pem().as_bytes(),
        g2.cert_pem.as_bytes(),
        g2.key_pem.as_bytes(),
        Some(forged.as_bytes()),
        b(2),
    )
    .unwrap_err();
    assert!(
        matches!(e, TlsError::Crl(CrlError::Signature)),
        "loaded a forged CRL: {e:?}"
    );
    assert_eq!(
        check_update(
            forged.as_bytes(),
            ca.cert_pem().as_bytes(),
            Some(1),
            unix_now()
        ),
        Err(CrlError::Signature)
    );
    // The genuine list with the same content and number is accepted.
    let genuine = ca.crl(&[], 1_000).unwrap();
    let info = check_update(
        genuine.as_bytes(),
        ca.cert_pem().as_bytes(),
        Some(1),
        unix_now(),
    )
    .unwrap();
    assert_eq!(info.number, 1_000);
    // A CRL altered after signing (a serial removed by flipping its bytes) is refused too.
    let der = pki::crl::der_of_pem(ca.crl(&[77], 5).unwrap().as_bytes()).unwrap();
    let cas = pki::crl::cas_of_pem(ca.cert_pem().as_bytes());
    let pos = der
        .windows(3)
        .position(|w| w == [0x02, 0x01, 77])
        .expect("serial 77 in the list");
    let mut altered = der.to_vec();
    altered[pos + 2] = 78;
    assert_eq!(pki::crl::verify(&altered, &cas), Err(CrlError::Signature));
}

#[test]
fn a_replayed_older_crl_is_refused() {
    let ca = Ca::generate("MMS test CA").unwrap();
    let old = ca.crl(&[], 4).unwrap();
    let new = ca.crl(&[11], 5).unwrap();
    let ca_pem = ca.cert_pem();
    let now = unix_now();
    let have = check_update(new.as_bytes(), ca_pem.as_bytes(), Some(4), now)
        .unwrap()
        .number;
    assert_eq!(have, 5);
    // The older list would un-revoke serial 11.
    assert_eq!(
        check_update(old.as_bytes(), ca_pem.as_bytes(), Some(have), now),
        Err(CrlError::Replay { have: 5, got: 4 })
    );
    // The same number again is not newer either.
    assert_eq!(
        check_update(new.as_bytes(), ca_pem.as_bytes(), Some(have), now),
        Err(CrlError::Replay { have: 5, got: 5 })
    );
    // Without a list in use, any genuine one is newer.
    assert!(check_update(old.as_bytes(), ca_pem.as_bytes(), None, now).is_ok());
}

#[test]
fn an_expired_crl_blocks_new_handshakes_on_both_sides() {
    let ca = Ca::generate("MMS test CA").unwrap();
    let g1 = ca.issue_gateway(b(1), 10, DEFAULT_VALIDITY).unwrap();
    let g2 = ca.issue_gateway(b(2), 20, DEFAULT_VALIDITY).unwrap();
    let want_next = unix_now() - 60;
    let expired = ca.crl_until(&[], 9, want_next).unwrap();
    let fresh = ca.crl(&[], 10).unwrap();

    // A pushed expired list is refused outright.
    assert!(matches!(
        check_update(expired.as_bytes(), ca.cert_pem().as_bytes(), Some(1), unix_now()),
        Err(CrlError::Expired { next_update, .. }) if next_update == want_next
    ));

    // Loaded from crl_file, it loads, and then refuses every new handshake, telling the hook.
    let seen: Arc<Mutex<Vec<CrlExpired>>> = Arc::default();
    let hook = {
        let seen = Arc::clone(&seen);
        Arc::new(move |e: &CrlExpired| seen.lock().unwrap().push(*e))
    };
    let mut server = creds(&ca, &g2, b(2), Some(&expired));
    assert_eq!(server.crl.unwrap().next_update, want_next);
    server.set_crl_expired_hook(hook.clone());
    let client_fresh = creds(&ca, &g1, b(1), Some(&fresh));
    let (who, e) = handshake(&client_fresh, &server, b(2)).unwrap_err();
    assert_eq!(who, "server");
    assert!(is_crl_expired(&e), "{e:?}");
    // The dialer with an expired list refuses the server too.
    let mut client_expired = creds(&ca, &g1, b(1), Some(&expired));
    client_expired.set_crl_expired_hook(hook);
    let server_fresh = creds(&ca, &g2, b(2), Some(&fresh));
    let (who, e) = handshake(&client_expired, &server_fresh, b(2)).unwrap_err();
    assert_eq!(who, "client");
    assert!(is_crl_expired(&e), "{e:?}");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen
        .iter()
        .all(|e| e.next_update == want_next && e.number == 9));
    assert!(seen.iter().all(|e| e.now > e.next_update));

    // Control: the same peers with a fresh list on both sides shake hands.
    handshake(&client_fresh, &server_fresh, b(2)).unwrap();
}
