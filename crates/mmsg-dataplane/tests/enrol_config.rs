//! Zero-touch enrolment with the real binaries (issue #21, docs/ops.md "Enrol a gateway"; no
//! root needed, loopback only): `ssc run` with the 2x2 inventory and a TLS gateway listener,
//! `ssc enrol-token`, then `mmsg enrol --write-config` (one token, one command).
//!
//! Proves: the written config is the branch's as the controller's inventory has it (branch id,
//! LAN prefix, both WAN ports with addresses, next hops and `wan{k}` names), with the remote
//! and its two path groups the controller pushes, `[controller]` at the enrolment address and
//! `[tls]` at the enrolled files (absolute paths); `mmsg check` accepts it; an existing file is
//! refused before the token is spent (the same token then works); `--force` replaces it and
//! keeps the old one as `.prev`; `--wan-name` renames the interfaces and must be given once per
//! port.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::Path;
use std::process::Command;

mod common;
use common::ssc::{ssc_bin, start_ssc};
use common::{repo_root, run, run_ok, MMSG};

const TOKEN: &str = "enrol-config-test-token-012345";

fn token(api: &str, branch: u8) -> String {
    let out = run_ok(Command::new(ssc_bin()).args([
        "enrol-token",
        "--branch",
        &branch.to_string(),
        "--api",
        api,
        "--token",
        TOKEN,
    ]));
    out.lines().next().unwrap().to_owned()
}

/// `mmsg enrol --write-config cfg` plus `extra`.
fn enrol(
    ctl: &str,
    token: &str,
    branch: u8,
    ca: &Path,
    dir: &Path,
    cfg: &Path,
    extra: &[&str],
) -> std::process::Output {
    run(Command::new(MMSG)
        .args([
            "enrol",
            "--controller",
            ctl,
            "--branch",
            &branch.to_string(),
        ])
        .arg("--ca")
        .arg(ca)
        .arg("--dir")
        .arg(dir)
        .arg("--write-config")
        .arg(cfg)
        .args(extra)
        .env("MMSG_ENROL_TOKEN", token))
}

#[test]
fn enrol_writes_the_whole_config() {
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
    let (ssc_proc, api, tls) = start_ssc(dir);
    run_ok(
        Command::new(ssc_bin())
            .args(["import", "--api", &api, "--token", TOKEN, "--inventory"])
            .arg(repo_root().join("examples/inventory-2x2.toml"))
            .arg("--paths")
            .arg(repo_root().join("examples/paths-2x2.toml")),
    );
    let ca = dir.join("ca/ca.pem");

    // An existing file: refused before the token is spent.
    let cfg = dir.join("etc/mmsg.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(&cfg, "# the packaged example\n").unwrap();
    let t1 = token(&api, 1);
    let o = enrol(&tls, &t1, 1, &ca, &dir.join("tls1"), &cfg, &[]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not overwritten"), "{err}");
    assert!(!dir.join("tls1").exists(), "nothing enrolled");

    // --force with the same token: written, the old file kept.
    let o = enrol(&tls, &t1, 1, &ca, &dir.join("tls1"), &cfg, &["--force"]);
    assert!(
        o.status.success(),
        "{}\n--- ssc ---\n{}",
        String::from_utf8_lossy(&o.stderr),
        ssc_proc.log()
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("config written to"), "{out}");
    assert_eq!(
        std::fs::read_to_string(dir.join("etc/mmsg.toml.prev")).unwrap(),
        "# the packaged example\n"
    );
    run_ok(Command::new(MMSG).args(["check", "--config"]).arg(&cfg));
    let text = std::fs::read_to_string(&cfg).unwrap();
    let c = mpa::config::Config::parse(&text).unwrap();
    assert_eq!(c.branch_id, 1);
    assert_eq!(c.lan_prefixes, vec!["198.19.1.0/24".parse().unwrap()]);
    let wan: Vec<(String, String, String)> = c
        .wan
        .iter()
        .map(|w| (w.name.clone(), w.address.to_string(), w.gateway.to_string()))
        .collect();
    assert_eq!(
        wan,
        [
            ("wan0".into(), "198.18.10.2/24".into(), "198.18.10.1".into()),
            ("wan1".into(), "198.18.11.2/24".into(), "198.18.11.1".into()),
        ]
    );
    assert_eq!(c.remote.len(), 1, "{text}");
    assert_eq!(c.remote[0].id, 2);
    assert_eq!(
        c.remote[0].wan_addresses,
        vec![
            "198.18.20.2".parse::<std::net::Ipv4Addr>().unwrap(),
            "198.18.21.2".parse().unwrap()
        ]
    );
    let groups: Vec<u8> = c.remote[0].path_groups.iter().map(|g| g.id).collect();
    assert_eq!(groups, [0, 1]);
    assert_eq!(c.controller.as_ref().unwrap().address, tls);
    let t = c.tls_enabled().unwrap();
    let tls_dir = dir.join("tls1");
    assert_eq!(t.ca_file.as_deref(), Some(tls_dir.join("ca.pem").as_path()));
    assert_eq!(
        t.cert_file.as_deref(),
        Some(tls_dir.join("gw.pem").as_path())
    );
    assert_eq!(
        t.key_file.as_deref(),
        Some(tls_dir.join("gw.key").as_path())
    );
    assert_eq!(
        t.crl_file.as_deref(),
        Some(tls_dir.join("crl.pem").as_path())
    );

    // Branch 2 with its own interface names; a relative --dir becomes absolute.
    let cfg2 = dir.join("gw2.toml");
    let t2 = token(&api, 2);
    let o = enrol(
        &tls,
        &t2,
        2,
        &ca,
        &dir.join("tls2"),
        &cfg2,
        &["--wan-name", "eth1"],
    );
    assert!(!o.status.success(), "one name for two ports");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("2 WAN ports"), "{err}");
    assert!(!cfg2.exists());
    let t2 = token(&api, 2);
    let o = run(Command::new(MMSG)
        .current_dir(dir)
        .args([
            "enrol",
            "--controller",
            &tls,
            "--branch",
            "2",
            "--dir",
            "tls2",
        ])
        .arg("--ca")
        .arg(&ca)
        .arg("--write-config")
        .arg(&cfg2)
        .args(["--wan-name", "eth1", "--wan-name", "eth2"])
        .env("MMSG_ENROL_TOKEN", &t2));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    run_ok(Command::new(MMSG).args(["check", "--config"]).arg(&cfg2));
    let c2 = mpa::config::Config::parse(&std::fs::read_to_string(&cfg2).unwrap()).unwrap();
    assert_eq!(c2.branch_id, 2);
    assert_eq!(c2.wan[0].name, "eth1");
    assert_eq!(c2.wan[1].name, "eth2");
    assert_eq!(c2.wan[1].address.to_string(), "198.18.21.2/24");
    assert_eq!(
        c2.tls_enabled().unwrap().cert_file.as_deref(),
        Some(dir.join("tls2/gw.pem").as_path())
    );
    drop(ssc_proc);
}
