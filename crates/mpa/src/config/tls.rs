//! `[tls]`: the tunnel's TLS mode and credential files.

use serde::{Deserialize, Serialize};

use super::problems::Problems;

/// `[tls]`: TLS 1.3 with mutual authentication on every tunnel connection (docs/security.md).
/// The files are re-read on SIGHUP (certificate rotation, new CRL).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// `tls` (default) or `clear`.
    #[serde(default)]
    pub mode: TlsMode,
    /// The CA certificate (PEM): the trust anchor of every peer. Required with `mode = "tls"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<std::path::PathBuf>,
    /// This gateway's certificate (PEM, SAN `branch-<branch_id>.mms`). Required with `tls`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_file: Option<std::path::PathBuf>,
    /// This gateway's private key (PEM, mode 0600). Required with `tls`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<std::path::PathBuf>,
    /// Revoked certificates: a CRL (PEM) signed by the CA. Required with `[controller]` (the
    /// controller pushes every new CRL, which is verified and written here so the highest
    /// `crl_number` survives a restart); optional otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crl_file: Option<std::path::PathBuf>,
}

/// Whether tunnel connections are protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TlsMode {
    /// TLS 1.3, mutual authentication against `ca_file`.
    #[default]
    Tls,
    /// No protection (the paper's behaviour; for benchmarks and closed labs only).
    Clear,
}

impl TlsConfig {
    /// The CA, certificate and key files are named, and `crl_file` too when `[controller]`
    /// pushes CRLs (`with_controller`) (called with `mode = "tls"` only).
    pub(super) fn validate(&self, p: &mut Problems, with_controller: bool) {
        if with_controller
            && self
                .crl_file
                .as_ref()
                .is_none_or(|f| f.as_os_str().is_empty())
        {
            p.push(
                "tls.crl_file",
                "required with [controller]: the controller pushes revocation lists (CRLs) and \
                 each one must be kept on disk, or a revoked peer would be accepted again after a \
                 restart; add crl_file = \"/etc/mms/tls/crl.pem\" (`mmsg enrol` writes it)"
                    .into(),
            );
        }
        for (key, v) in [
            ("tls.ca_file", &self.ca_file),
            ("tls.cert_file", &self.cert_file),
            ("tls.key_file", &self.key_file),
        ] {
            if v.as_ref().is_none_or(|f| f.as_os_str().is_empty()) {
                p.push(key, "required with mode = \"tls\"".into());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::super::Config;

    const BASE: &str = r#"
branch_id = 1
lan_prefixes = ["198.19.1.0/24"]
[[wan]]
name = "wan0"
address = "198.18.10.2/24"
gateway = "198.18.10.1"
"#;
    const TLS: &str = "[tls]\nca_file = \"/etc/mms/tls/ca.pem\"\ncert_file = \"/etc/mms/tls/gw.pem\"\nkey_file = \"/etc/mms/tls/gw.key\"\n";
    const CTL: &str = "[controller]\naddress = \"tls:198.18.0.1:6690\"\n";

    fn problems(text: &str) -> Vec<String> {
        let c: Config = toml::from_str(text).unwrap();
        match c.validate() {
            Ok(()) => Vec::new(),
            Err(e) => e.problems.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn crl_file_is_required_when_the_controller_pushes_crls() {
        let p = problems(&format!("{BASE}{TLS}{CTL}"));
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].starts_with("tls.crl_file: required with [controller]")
                && p[0].contains("crl_file = \"/etc/mms/tls/crl.pem\""),
            "{p:?}"
        );
        // With crl_file, or without [controller], or in clear mode: no problem.
        assert_eq!(
            problems(&format!(
                "{BASE}{TLS}crl_file = \"/etc/mms/tls/crl.pem\"\n{CTL}"
            )),
            Vec::<String>::new()
        );
        assert_eq!(problems(&format!("{BASE}{TLS}")), Vec::<String>::new());
        assert_eq!(
            problems(&format!(
                "{BASE}[tls]\nmode = \"clear\"\n[controller]\naddress = \"unix:/run/ssc.sock\"\n"
            )),
            Vec::<String>::new()
        );
        // An empty path is no path.
        assert_eq!(
            problems(&format!("{BASE}{TLS}crl_file = \"\"\n{CTL}")).len(),
            1
        );
    }
}
