//! `ssc init` (issue #21, docs/install.md §3) and `ssc --version`: the starter config, the CA
//! and the bootstrap token are created once and never overwritten; the config passes
//! `ssc check --config-only` with the token it names.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

fn ssc(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_ssc"))
        .args(args)
        .env_remove("SSC_CONFIG")
        .env_remove("SSC_TOKEN")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ssc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn init_creates_config_ca_and_token_once_and_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("etc/ssc.toml");
    let state = dir.path().join("state");
    let c = cfg.to_str().unwrap();
    let s = state.to_str().unwrap();
    let first = text(&ssc(&["init", "--config", c, "--state-dir", s]));
    // The config: the packaged one with the state directory filled in, commented.
    let written = std::fs::read_to_string(&cfg).unwrap();
    assert!(written.starts_with('#'), "{written}");
    assert!(
        written.contains(&format!("path = \"{s}/ssc.redb\"")),
        "{written}"
    );
    assert!(!written.contains("/var/lib/ssc"), "{written}");
    // The CA next to the database, the token 0600, shown once.
    let ca_key = state.join("ca/ca.key");
    assert!(state.join("ca/ca.pem").exists());
    assert_eq!(mode(&ca_key), 0o600);
    let token_file = state.join("ssc.token");
    assert_eq!(mode(&token_file), 0o600);
    let token = std::fs::read_to_string(&token_file).unwrap();
    let token = token.trim();
    assert_eq!(token.len(), 64, "{token}");
    assert!(first.contains(token), "{first}");
    assert!(first.contains("ssc enrol-token --branch N"), "{first}");
    assert!(
        first.contains("mmsg enrol --controller tls:CONTROLLER:6691"),
        "{first}"
    );
    assert!(first.contains("--ca-fingerprint "), "{first}");
    // The config is valid with that token.
    let check = text(&ssc(&["check", "--config-only", "--config", c]));
    assert!(check.contains(": ok"), "{check}");

    // A second run keeps everything and never shows the token again.
    std::fs::write(&cfg, format!("# edited\n{written}")).unwrap();
    let ca_before = std::fs::read(&ca_key).unwrap();
    let second = text(&ssc(&["init", "--config", c, "--state-dir", s]));
    assert!(second.contains("exists, kept"), "{second}");
    assert!(!second.contains(token), "{second}");
    assert!(std::fs::read_to_string(&cfg)
        .unwrap()
        .starts_with("# edited\n"));
    assert_eq!(std::fs::read(&ca_key).unwrap(), ca_before);
    assert_eq!(std::fs::read_to_string(&token_file).unwrap().trim(), token);
}

#[test]
fn version_names_commit_and_link_mode() {
    let v = text(&ssc(&["--version"]));
    assert!(
        v.starts_with(concat!("ssc ", env!("CARGO_PKG_VERSION"), " (commit ")),
        "{v}"
    );
    assert!(v.contains(", static,") || v.contains(", dynamic,"), "{v}");
    assert!(v.contains("features: "), "{v}");
}
