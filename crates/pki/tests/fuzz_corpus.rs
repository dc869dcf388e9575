//! Replays the committed corpus of the handshake fuzz target (`crates/pki/fuzz/corpus/handshake`)
//! through `pki::fuzz::handshake_check`, so CI covers it on stable without libFuzzer (STYLE §6.4).
//! `generate_seed_corpus` (ignored) rewrote the seeds: `cargo test -p pki --test fuzz_corpus --
//! --ignored`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::PathBuf;

use mms_types::BranchId;
use pki::ca::{Ca, DEFAULT_VALIDITY};
use pki::tls::Credentials;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/handshake")
}

#[test]
fn replay_handshake_corpus() {
    let mut n = 0;
    for entry in std::fs::read_dir(dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let data = std::fs::read(&path).unwrap();
            let r = std::panic::catch_unwind(|| {
                pki::fuzz::handshake_check(&data, mpa::framing::fuzz_check)
            });
            assert!(
                r.is_ok(),
                "corpus file {} broke an invariant",
                path.display()
            );
            n += 1;
        }
    }
    assert!(n >= 8, "expected the committed seeds, found {n} files");
}

/// Everything a real client (branch 1, pki credentials) sends when it talks to a server of its
/// own CA: ClientHello, then its Certificate/CertificateVerify/Finished and one hello + frame.
fn client_stream() -> (Vec<u8>, Vec<u8>) {
    let b1 = BranchId::new(1).unwrap();
    let b2 = BranchId::new(2).unwrap();
    let ca = Ca::generate("seed CA").unwrap();
    let mk = |b, serial| {
        let g = ca.issue_gateway(b, serial, DEFAULT_VALIDITY).unwrap();
        Credentials::from_pem(
            ca.cert_pem().as_bytes(),
            g.cert_pem.as_bytes(),
            g.key_pem.as_bytes(),
            None,
            b,
        )
        .unwrap()
    };
    let (c1, c2) = (mk(b1, 1), mk(b2, 2));
    let mut c =
        rustls::ClientConnection::new(c1.client_config().unwrap(), pki::server_name(b2)).unwrap();
    let mut s = rustls::ServerConnection::new(c2.server_config().unwrap()).unwrap();
    let mut sent = Vec::new();
    let mut first = Vec::new();
    for round in 0..6 {
        let mut buf = Vec::new();
        while c.wants_write() {
            c.write_tls(&mut buf).unwrap();
        }
        if round == 0 {
            first = buf.clone();
        }
        sent.extend_from_slice(&buf);
        let mut rd = &buf[..];
        while !rd.is_empty() {
            s.read_tls(&mut rd).unwrap();
            s.process_new_packets().unwrap();
        }
        let mut buf = Vec::new();
        while s.wants_write() {
            s.write_tls(&mut buf).unwrap();
        }
        let mut rd = &buf[..];
        while !rd.is_empty() {
            c.read_tls(&mut rd).unwrap();
            c.process_new_packets().unwrap();
        }
        if !c.is_handshaking() && round >= 2 {
            break;
        }
    }
    std::io::Write::write_all(&mut c.writer(), &hello_and_frame()).unwrap();
    let mut buf = Vec::new();
    while c.wants_write() {
        c.write_tls(&mut buf).unwrap();
    }
    sent.extend_from_slice(&buf);
    (first, sent)
}

fn hello_and_frame() -> Vec<u8> {
    let mut v = b"MMSH\x01\x01\x02\x00\x02\x00\x00\x00".to_vec();
    let ip = [
        0x45u8, 0, 0, 20, 0, 1, 0, 0, 64, 17, 0, 0, 198, 19, 1, 10, 198, 19, 2, 10,
    ];
    v.extend_from_slice(&(ip.len() as u32).to_be_bytes());
    v.extend_from_slice(&[1, 2, 0, 0, 0, 0, 0, 0]);
    v.extend_from_slice(&ip);
    v
}

#[test]
#[ignore = "rewrites the committed seed corpus"]
fn generate_seed_corpus() {
    let (client_hello, full) = client_stream();
    let d = dir();
    let seeds: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("junk-http", b"GET / HTTP/1.0\r\n\r\n".to_vec()),
        ("plain-hello-and-frame", hello_and_frame()),
        ("client-hello", client_hello.clone()),
        (
            "client-hello-truncated",
            client_hello[..client_hello.len() / 2].to_vec(),
        ),
        ("client-flight-replayed", full),
        // A handshake record header announcing the largest length, then nothing.
        ("record-max-length", vec![0x16, 0x03, 0x01, 0xff, 0xff]),
        // Application data before any handshake.
        (
            "appdata-first",
            vec![0x17, 0x03, 0x03, 0x00, 0x05, 1, 2, 3, 4, 5],
        ),
        // An alert record.
        ("alert", vec![0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28]),
        // ClientHello twice.
        (
            "client-hello-twice",
            [client_hello.clone(), client_hello].concat(),
        ),
    ];
    for (name, bytes) in seeds {
        std::fs::write(d.join(name), bytes).unwrap();
    }
}

fn crl_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/crl_push")
}

fn crl_ca() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/crl_ca.pem")
}

/// The committed seeds of the `crl_push` target through `pki::fuzz::crl_push_check`; the
/// genuine newer one is accepted, the others refused for their reason.
#[test]
fn replay_crl_push_corpus() {
    use pki::crl::{cas_of_pem, check_update_der, unix_now, CrlError};
    let ca = std::fs::read(crl_ca()).unwrap();
    let mut n = 0;
    for entry in std::fs::read_dir(crl_dir()).unwrap() {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let r = std::panic::catch_unwind(|| pki::fuzz::crl_push_check(&ca, &data));
        assert!(
            r.is_ok(),
            "corpus file {} broke an invariant",
            path.display()
        );
        n += 1;
    }
    assert!(n >= 5, "expected the committed seeds, found {n} files");
    let cas = cas_of_pem(&ca);
    let decide = |name: &str| {
        let der = std::fs::read(crl_dir().join(name)).unwrap();
        check_update_der(&der, &cas, Some(pki::fuzz::CRL_HAVE), unix_now())
    };
    assert_eq!(decide("genuine-5").unwrap().number, 5);
    assert_eq!(
        decide("replayed-3"),
        Err(CrlError::Replay { have: 4, got: 3 })
    );
    assert!(matches!(decide("expired-9"), Err(CrlError::Expired { .. })));
    assert_eq!(decide("forged-10"), Err(CrlError::Signature));
}

/// Rewrites the `crl_push` seeds and their CA certificate (the CA key is thrown away).
#[test]
#[ignore = "rewrites the committed crl_push seeds"]
fn generate_crl_push_seeds() {
    let ca = Ca::generate("MMS fuzz CRL CA").unwrap();
    let rogue = Ca::generate("MMS fuzz CRL CA").unwrap();
    std::fs::write(crl_ca(), ca.cert_pem()).unwrap();
    let d = crl_dir();
    std::fs::create_dir_all(&d).unwrap();
    // 2100-01-01: the genuine seeds stay valid for the life of this code.
    const FAR: u64 = 4_102_444_800;
    let der = |pem: String| pki::crl::der_of_pem(pem.as_bytes()).unwrap().to_vec();
    let now = pki::crl::unix_now();
    for (name, data) in [
        (
            "genuine-5",
            der(ca.crl_until(&[3, 1000, u64::MAX], 5, FAR).unwrap()),
        ),
        ("replayed-3", der(ca.crl_until(&[], 3, FAR).unwrap())),
        (
            "expired-9",
            der(ca.crl_until(&[7], 9, now - 86_400).unwrap()),
        ),
        ("forged-10", der(rogue.crl_until(&[], 10, FAR).unwrap())),
        (
            "genuine-6-pem",
            ca.crl_until(&[42], 6, FAR).unwrap().into_bytes(),
        ),
        ("empty", Vec::new()),
    ] {
        std::fs::write(d.join(name), data).unwrap();
    }
}
