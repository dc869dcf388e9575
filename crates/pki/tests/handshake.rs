//! In-memory TLS handshakes between credentials made by `pki::ca`: the conventions hold end to
//! end (identity, CA pinning, revocation, saved/loaded CA, server name check).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use mms_types::BranchId;
use pki::ca::{Ca, Issued, DEFAULT_VALIDITY};
use pki::tls::{classify, Credentials, Rejection, TlsFiles};
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

/// Runs a handshake client -> server in memory; returns the server's error, the client's error,
/// or the peer certificate the server saw.
fn handshake(
    client: &Credentials,
    server: &Credentials,
    dial: BranchId,
) -> Result<Vec<u8>, (&'static str, rustls::Error)> {
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
            let peer = s.peer_certificates().unwrap()[0].to_vec();
            return Ok(peer);
        }
    }
    panic!("handshake did not finish");
}

#[test]
fn mutual_auth_carries_the_branch_identity() {
    let ca = Ca::generate("MMS test CA").unwrap();
    let g1 = ca.issue_gateway(b(1), 10, DEFAULT_VALIDITY).unwrap();
    let g2 = ca.issue_gateway(b(2), 20, DEFAULT_VALIDITY).unwrap();
    let c1 = creds(&ca, &g1, b(1), None);
    let c2 = creds(&ca, &g2, b(2), None);
    assert_eq!((c1.identity, c1.serial), (b(1), 10));
    let peer = handshake(&c1, &c2, b(2)).unwrap();
    assert_eq!(pki::identity_of(&peer), Ok(b(1)));
    assert_eq!(pki::serial_of(&peer), Ok(10));
}

#[test]
fn client_refuses_a_server_of_another_branch() {
    let ca = Ca::generate("MMS test CA").unwrap();
    let g1 = ca.issue_gateway(b(1), 10, DEFAULT_VALIDITY).unwrap();
    let g3 = ca.issue_gateway(b(3), 30, DEFAULT_VALIDITY).unwrap();
    let (who, e) = handshake(
        &creds(&ca, &g1, b(1), None),
        &creds(&ca, &g3, b(3), None),
        b(2),
    )
    .unwrap_err();
    assert_eq!(who, "client");
    assert!(matches!(e, rustls::Error::InvalidCertificate(_)), "{e:?}");
}

#[test]
fn foreign_ca_and_revoked_certificates_are_classified() {
    let ca = Ca::generate("MMS test CA").unwrap();
    let rogue_ca = Ca::generate("MMS test CA").unwrap();
    let g2 = ca.issue_gateway(b(2), 20, DEFAULT_VALIDITY).unwrap();
    let server = creds(&ca, &g2, b(2), None);
    // Same name, other key: the signature does not verify.
    let forged = rogue_ca.issue_gateway(b(1), 10, DEFAULT_VALIDITY).unwrap();
    let forged_creds = Credentials::from_pem(
        ca.cert_pem().as_bytes(),
        forged.cert_pem.as_bytes(),
        forged.key_pem.as_bytes(),
        None,
        b(1),
    )
    .unwrap();
    let (who, e) = handshake(&forged_creds, &server, b(2)).unwrap_err();
    assert_eq!(
        (who, classify(&e)),
        ("server", Rejection::UnknownCa),
        "{e:?}"
    );

    let g1 = ca.issue_gateway(b(1), 11, DEFAULT_VALIDITY).unwrap();
    let crl = ca.crl(&[11, 99], 1).unwrap();
    let server_crl = creds(&ca, &g2, b(2), Some(&crl));
    let (who, e) = handshake(&creds(&ca, &g1, b(1), None), &server_crl, b(2)).unwrap_err();
    assert_eq!((who, classify(&e)), ("server", Rejection::Revoked), "{e:?}");
    // A re-issued certificate (new serial) passes the same CRL.
    let g1b = ca.issue_gateway(b(1), 12, DEFAULT_VALIDITY).unwrap();
    handshake(&creds(&ca, &g1b, b(1), None), &server_crl, b(2)).unwrap();
}

#[test]
fn saved_and_loaded_ca_keeps_issuing_for_the_same_anchor() {
    let d = tempfile::tempdir().unwrap();
    let (cp, kp) = (d.path().join("ca.pem"), d.path().join("ca.key"));
    let ca = Ca::generate("MMS test CA").unwrap();
    ca.save(&cp, &kp).unwrap();
    let loaded = Ca::load("MMS test CA", &cp, &kp).unwrap();
    assert_eq!(loaded.cert_pem(), ca.cert_pem());
    let g1 = loaded.issue_gateway(b(1), 5, DEFAULT_VALIDITY).unwrap();
    let g2 = ca.issue_gateway(b(2), 6, DEFAULT_VALIDITY).unwrap();
    for (name, bytes) in [("g1.pem", &g1.cert_pem), ("g1.key", &g1.key_pem)] {
        pki::files::write_private(&d.path().join(name), bytes.as_bytes()).unwrap();
    }
    let files = TlsFiles {
        ca: cp.clone(),
        cert: d.path().join("g1.pem"),
        key: d.path().join("g1.key"),
        crl: None,
    };
    let c1 = Credentials::load(&files, b(1)).unwrap();
    // Loading a certificate as the wrong branch is refused.
    assert!(Credentials::load(&files, b(2)).is_err());
    handshake(&c1, &creds(&ca, &g2, b(2), None), b(2)).unwrap();
    // A CRL signed by the reloaded CA verifies too.
    let crl = loaded.crl(&[5], 1).unwrap();
    let (_, e) = handshake(&c1, &creds(&ca, &g2, b(2), Some(&crl)), b(2)).unwrap_err();
    assert_eq!(classify(&e), Rejection::Revoked);
}

#[test]
fn established_peers_are_checked_again_against_a_new_crl() {
    use pki::tls::PeerRole;
    let ca = Ca::generate("MMS test CA").unwrap();
    let g1 = ca.issue_gateway(b(1), 10, DEFAULT_VALIDITY).unwrap();
    let g2 = ca.issue_gateway(b(2), 20, DEFAULT_VALIDITY).unwrap();
    let before = creds(&ca, &g2, b(2), None);
    before.check_peer(&g1.cert_der, PeerRole::Client).unwrap();
    before
        .check_peer(&g1.cert_der, PeerRole::Server(b(1)))
        .unwrap();
    // As a server it must be the dialled branch.
    assert!(before
        .check_peer(&g1.cert_der, PeerRole::Server(b(3)))
        .is_err());
    let crl = ca.crl(&[10], 2).unwrap();
    let after = creds(&ca, &g2, b(2), Some(&crl));
    for role in [PeerRole::Client, PeerRole::Server(b(1))] {
        let e = after.check_peer(&g1.cert_der, role).unwrap_err();
        assert_eq!(classify(&e), Rejection::Revoked, "{role:?}: {e:?}");
    }
}
