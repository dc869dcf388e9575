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
    /// Revoked certificates: a CRL (PEM) signed by the CA. Optional.
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
    /// The CA, certificate and key files are named (called with `mode = "tls"` only).
    pub(super) fn validate(&self, p: &mut Problems) {
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
