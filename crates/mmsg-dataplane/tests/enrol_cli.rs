//! Enrolment and renewal with the real binaries (no root needed; loopback only): `ssc run` with
//! its CA and a TLS gateway listener, `ssc enrol-token`, `mmsg enrol`, `mmsg renew`,
//! `ssc certificates`, `ssc revoke` (docs/security.md, "Enrolment").
//!
//! Proves: the token is single-use and branch-bound, clear TCP enrolment is refused by mmsg
//! before connecting, a wrong pinned CA fingerprint is refused, the credentials are written
//! 0600 and form a valid `[tls]` set (`mmsg check` with them), `mmsg renew` over mutual TLS
//! replaces them with a new serial (and a new key), and `ssc revoke` puts the old serial in the
//! CRL the next renewal brings; a read-only REST token (`ssc token add`) reads the certificates
//! but may not revoke (403).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

mod common;
use common::ssc::{ssc_bin, start_ssc};
use common::{repo_root, run, run_ok, MMSG};

const TOKEN: &str = "enrol-cli-test-token-0123456789";

fn ssc(api: &str, args: &[&str]) -> String {
    run_ok(
        Command::new(ssc_bin())
            .args(args)
            .args(["--api", api, "--token", TOKEN]),
    )
}

/// `ssc enrol-token`: (token, fingerprint).
fn token(api: &str, branch: u8) -> (String, String) {
    let out = ssc(
        api,
        &[
            "enrol-token",
            "--branch",
            &branch.to_string(),
            "--ttl",
            "10m",
        ],
    );
    let mut lines = out.lines();
    let token = lines.next().unwrap().to_owned();
    let fp = lines
        .next()
        .unwrap()
        .rsplit_once("CA fingerprint ")
        .unwrap()
        .1
        .to_owned();
    (token, fp)
}

fn enrol(controller: &str, token: &str, branch: u8, ca: &Path, dir: &Path) -> std::process::Output {
    run(Command::new(MMSG)
        .args([
            "enrol",
            "--controller",
            controller,
            "--branch",
            &branch.to_string(),
        ])
        .arg("--ca")
        .arg(ca)
        .arg("--dir")
        .arg(dir)
        .env("MMSG_ENROL_TOKEN", token))
}

fn serial_of(pem: &Path) -> u64 {
    use rustls::pki_types::pem::PemObject;
    let der = rustls::pki_types::CertificateDer::from_pem_file(pem).unwrap();
    pki::serial_of(&der).unwrap()
}

#[test]
fn enrol_renew_and_revoke_with_the_binaries() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(
        dir.join("ssc.toml"),
        format!(
            "[api]\nlisten = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\n\n[database]\npath = \"ssc.redb\"\n\n\
             [openflow]\nlisten = \"\"\n\n[gateways]\ntls_listen = \"127.0.0.1:0\"\n"
        ),
    )
    .unwrap();
    // The CA offline first (as an operator would), then the server.
    let init = run_ok(
        Command::new(ssc_bin())
            .args(["ca", "init", "--config"])
            .arg(dir.join("ssc.toml")),
    );
    assert!(init.contains("CA created"), "{init}");
    let ca = dir.join("ca/ca.pem");
    assert_eq!(
        std::fs::metadata(dir.join("ca/ca.key"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    let (ssc_proc, api, tls) = start_ssc(dir);
    run_ok(
        Command::new(ssc_bin())
            .args(["import", "--api", &api, "--token", TOKEN, "--inventory"])
            .arg(repo_root().join("examples/inventory-2x2.toml"))
            .arg("--paths")
            .arg(repo_root().join("examples/paths-2x2.toml")),
    );

    let (t1, fp) = token(&api, 1);
    assert_eq!(t1.len(), 64);
    assert!(
        init.contains(&fp),
        "ssc ca init and enrol-token print the same fingerprint"
    );
    // The token never shows up in ssc's log.
    let gw = dir.join("gw1");

    // Clear TCP: refused by mmsg itself.
    let tcp = tls.replacen("tls:", "tcp:", 1);
    let o = enrol(&tcp, &t1, 1, &ca, &gw);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("clear TCP"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Wrong branch.
    let o = enrol(&tls, &t1, 2, &ca, &gw);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("another branch"));
    // A wrong fingerprint for the pinned CA.
    let o = run(Command::new(MMSG)
        .args([
            "enrol",
            "--controller",
            &tls,
            "--branch",
            "1",
            "--ca-fingerprint",
            &"0".repeat(64),
        ])
        .arg("--ca")
        .arg(&ca)
        .arg("--dir")
        .arg(&gw)
        .env("MMSG_ENROL_TOKEN", &t1));
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("does not match --ca-fingerprint"));
    assert!(!gw.exists(), "nothing written on a refusal");

    // Happy path (with the fingerprint check).
    let o = run(Command::new(MMSG)
        .args([
            "enrol",
            "--controller",
            &tls,
            "--branch",
            "1",
            "--ca-fingerprint",
            &fp,
        ])
        .arg("--ca")
        .arg(&ca)
        .arg("--dir")
        .arg(&gw)
        .env("MMSG_ENROL_TOKEN", &t1));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(out.contains("enrolled branch 1"), "{out}");
    for f in ["ca.pem", "gw.pem", "gw.key", "crl.pem"] {
        let m = std::fs::metadata(gw.join(f)).unwrap().permissions().mode() & 0o777;
        assert_eq!(m, 0o600, "{f}");
    }
    let serial1 = serial_of(&gw.join("gw.pem"));
    // Used once.
    let o = enrol(&tls, &t1, 1, &ca, &dir.join("gw1-again"));
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("already used"));

    // A gateway config with these credentials and the TLS controller address.
    let text = std::fs::read_to_string(repo_root().join("examples/mmsg-branch1.toml")).unwrap();
    let mut v: toml::Value = toml::from_str(&text).unwrap();
    let t = v.as_table_mut().unwrap();
    t.remove("remote");
    let ctl: toml::Value = toml::from_str(&format!(
        "address = \"{tls}\"\ncache = \"{}\"\n",
        dir.join("gw1-cache.json").display()
    ))
    .unwrap();
    t.insert("controller".into(), ctl);
    let tls_section: toml::Value = toml::from_str(&format!(
        "ca_file = \"{0}/ca.pem\"\ncert_file = \"{0}/gw.pem\"\nkey_file = \"{0}/gw.key\"\ncrl_file = \"{0}/crl.pem\"\n",
        gw.display()
    ))
    .unwrap();
    t.insert("tls".into(), tls_section);
    let cfg = dir.join("gw1.toml");
    std::fs::write(&cfg, toml::to_string(&v).unwrap()).unwrap();
    run_ok(Command::new(MMSG).args(["check", "--config"]).arg(&cfg));

    // Renewal over mutual TLS: new serial, new key.
    let key_before = std::fs::read(gw.join("gw.key")).unwrap();
    let out = run_ok(Command::new(MMSG).args(["renew", "--config"]).arg(&cfg));
    assert!(out.contains("renewed: serial"), "{out}");
    let serial2 = serial_of(&gw.join("gw.pem"));
    assert!(serial2 > serial1, "{serial2} > {serial1}");
    assert_ne!(std::fs::read(gw.join("gw.key")).unwrap(), key_before);
    assert_eq!(
        std::fs::metadata(gw.join("gw.key"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );

    // Revoke the old serial; the next renewal brings a CRL that names it.
    let crl_before = std::fs::read_to_string(gw.join("crl.pem")).unwrap();
    let r: serde_json::Value =
        serde_json::from_str(&ssc(&api, &["revoke", "--serial", &serial1.to_string()])).unwrap();
    assert_eq!(r["revoked"], serde_json::json!([serial1]));
    run_ok(Command::new(MMSG).args(["renew", "--config"]).arg(&cfg));
    let crl_after = std::fs::read_to_string(gw.join("crl.pem")).unwrap();
    assert_ne!(crl_before, crl_after);
    // A read-only REST token lists the certificates but may not revoke (403).
    let ro = ssc(
        &api,
        &["token", "add", "--name", "viewer", "--role", "read-only"],
    );
    assert!(
        ro.contains("read-only, expires 20"),
        "default 30 days: {ro}"
    );
    let ro = ro.lines().next().unwrap().to_owned();
    // `--ttl never` only when asked; `ssc token list` shows each expiry.
    let never = ssc(
        &api,
        &[
            "token", "add", "--name", "robot", "--role", "admin", "--ttl", "never",
        ],
    );
    assert!(never.contains("never expires"), "{never}");
    let list = ssc(&api, &["token", "list"]);
    let line = |n: &str| {
        list.lines()
            .find(|l| l.starts_with(n))
            .unwrap_or_else(|| panic!("{n} not in {list}"))
            .to_owned()
    };
    assert!(
        line("robot").contains(" never ") && line("robot").ends_with("valid"),
        "{list}"
    );
    assert!(
        line("viewer").contains(" 20") && line("viewer").ends_with("valid"),
        "{list}"
    );
    let certs_ro =
        run_ok(Command::new(ssc_bin()).args(["certificates", "--api", &api, "--token", &ro]));
    let o = run(Command::new(ssc_bin()).args([
        "revoke",
        "--serial",
        &serial2.to_string(),
        "--api",
        &api,
        "--token",
        &ro,
    ]));
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("403"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let certs: serde_json::Value =
        serde_json::from_str(&ssc(&api, &["certificates", "--json"])).unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&certs_ro).unwrap(),
        certs
    );
    let rows = certs["certificates"].as_array().unwrap();
    let row = |s: u64| rows.iter().find(|r| r["serial"] == s).unwrap();
    assert!(row(serial1)["revoked"].is_u64());
    assert!(row(serial2)["revoked"].is_null());
    assert_eq!(row(serial2)["branch"], 1);
    // The renewed files (with the new CRL) load as tunnel credentials.
    {
        let files = mmsg_dataplane::enrol::files_in(&gw);
        let creds = pki::tls::Credentials::load(&files, mpa::BranchId::new(1).unwrap()).unwrap();
        assert!(creds.serial > serial2);
    }

    let log = ssc_proc.log();
    assert!(!log.contains(&t1), "the token is never logged");
    assert!(log.contains("enrolment refused"), "{log}");
    drop(ssc_proc);
}
