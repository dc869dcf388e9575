//! TLS material for the tests that run `mmsg` (issue #17 "TLS is the default"): one CA per test,
//! per-gateway certificate and key, an empty CRL, and the `[tls]` table that points at them;
//! plus the explicit clear-mode opt-out for the tests that are about clear tunnels.

use std::path::{Path, PathBuf};

use pki::ca::{Ca, DEFAULT_VALIDITY};

/// The command-line flag that confirms `[tls] mode = "clear"` (both are needed).
pub const INSECURE_CLEAR: &str = "--insecure-clear-tunnels";

/// The `[tls]` table of an explicit clear-mode run (with [`INSECURE_CLEAR`] on the command line).
pub const CLEAR_TABLE: &str = "[tls]\nmode = \"clear\"\n";

/// A test CA in `dir` (`ca.pem`, `ca.key`), an empty CRL (`crl.pem`) and, for each branch b,
/// `gw<b>.pem` + `gw<b>.key` (serial = b; keys 0600, as `mmsg` requires).
pub struct TestPki {
    /// Where the files are.
    pub dir: PathBuf,
    /// The CA (to issue more certificates or sign CRLs).
    pub ca: Ca,
}

impl TestPki {
    /// Makes the CA, the CRL and one certificate per branch of `branches` in `dir`.
    pub fn new(dir: &Path, branches: &[u8]) -> TestPki {
        std::fs::create_dir_all(dir).unwrap();
        let ca = Ca::generate("MMS test CA").unwrap();
        ca.save(&dir.join("ca.pem"), &dir.join("ca.key")).unwrap();
        let crl = ca.crl(&[], 1).unwrap();
        pki::files::write_private(&dir.join("crl.pem"), crl.as_bytes()).unwrap();
        for &b in branches {
            let id = mpa::BranchId::new(b).unwrap();
            let issued = ca
                .issue_gateway(id, u64::from(b), DEFAULT_VALIDITY)
                .unwrap();
            let (cert, key) = (
                dir.join(format!("gw{b}.pem")),
                dir.join(format!("gw{b}.key")),
            );
            Ca::save_issued(&issued, &cert, &key).unwrap();
        }
        TestPki {
            dir: dir.to_owned(),
            ca,
        }
    }

    /// The `[tls]` table of branch `b` (mode `tls`, with the CRL).
    pub fn table(&self, b: u8) -> String {
        TestPki::table_in(&self.dir, b)
    }

    /// [`TestPki::table`] for files a [`TestPki::new`] wrote into `dir` earlier.
    pub fn table_in(dir: &Path, b: u8) -> String {
        let d = dir.display();
        format!(
            "[tls]\nmode = \"tls\"\nca_file = \"{d}/ca.pem\"\ncert_file = \"{d}/gw{b}.pem\"\n\
             key_file = \"{d}/gw{b}.key\"\ncrl_file = \"{d}/crl.pem\"\n"
        )
    }

    /// `text` (a gateway config) for branch `b` with its `[tls]` table replaced by
    /// [`TestPki::table`].
    pub fn apply(&self, text: &str, b: u8) -> String {
        with_table(text, &self.table(b))
    }
}

/// `text` without its `[tls]` table (from the `[tls]` line to the next table header).
pub fn without_tls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_tls = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with('[') {
            in_tls = t.starts_with("[tls]");
        }
        if !in_tls {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// `text` with its `[tls]` table (if any) replaced by `table`, appended at the end.
pub fn with_table(text: &str, table: &str) -> String {
    format!("{}\n{table}", without_tls(text))
}

/// `examples/mmsg-branch<b>.toml` with its `[tls]` table replaced by `table`.
pub fn example_with(b: u8, table: &str) -> String {
    let text =
        std::fs::read_to_string(super::repo_root().join(format!("examples/mmsg-branch{b}.toml")))
            .unwrap();
    with_table(&text, table)
}
