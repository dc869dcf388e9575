//! "TLS is the default" (issue #17): whether a gateway may run with the config and command line
//! it was given. One pure function, [`tunnel_security`] (as [`super::Config::tunnel_security`]),
//! called by `mmsg check` and `mmsg run` (and by nothing else, so the policy has one home). [`super::Config::parse`] does not apply it:
//! unit tests and the controller's pushed configs parse without `[tls]`.
//!
//! | `[tls]` in the config | `--insecure-clear-tunnels` | result |
//! |---|---|---|
//! | absent | either | refused: [`TlsPolicyError::Missing`] (says how to enrol or opt out) |
//! | `mode = "tls"` (default) | absent | [`TunnelSecurity::Tls`] |
//! | `mode = "tls"` | given | refused: [`TlsPolicyError::FlagWithoutClear`] (a stale flag is a mistake, never ignored) |
//! | `mode = "clear"` | absent | refused: [`TlsPolicyError::ClearWithoutFlag`] |
//! | `mode = "clear"` | given | [`TunnelSecurity::InsecureClear`] (one WARN at start, shown by `mmsg status`) |

use thiserror::Error;

use super::tls::{TlsConfig, TlsMode};

/// The command-line flag that confirms `[tls] mode = "clear"`.
pub const INSECURE_CLEAR_FLAG: &str = "--insecure-clear-tunnels";

/// How the tunnel connections of a gateway are protected, decided once at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TunnelSecurity {
    /// TLS 1.3 with mutual authentication (`[tls] mode = "tls"`).
    Tls,
    /// No protection, asked for twice: `[tls] mode = "clear"` and [`INSECURE_CLEAR_FLAG`].
    InsecureClear,
}

/// Why a config may not run (the operator's fault; every message says what to do).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum TlsPolicyError {
    /// No `[tls]` section: tunnels would run in clear.
    #[error(
        "no [tls] section: mmsg refuses to run tunnels in clear text by default (any host could \
         inject packets into the LAN; docs/security.md \"TLS is the default\").\n\
         To enrol this gateway, get a token with `ssc enrol-token --branch N` and run\n  \
         MMSG_ENROL_TOKEN=<token> mmsg enrol --controller tls:HOST:PORT --branch N --ca ca.pem --dir /etc/mms/tls\n\
         then add the [tls] section it prints (ca_file, cert_file, key_file, crl_file in /etc/mms/tls).\n\
         To run in clear anyway (closed labs, benchmarks), opt out explicitly with BOTH\n  \
         [tls]\n  mode = \"clear\"\n\
         in the config AND the command-line flag --insecure-clear-tunnels"
    )]
    Missing,
    /// `mode = "clear"` without [`INSECURE_CLEAR_FLAG`].
    #[error(
        "[tls] mode = \"clear\" also needs the command-line flag --insecure-clear-tunnels \
         (both are required to run tunnels in clear text; docs/security.md \"TLS is the default\")"
    )]
    ClearWithoutFlag,
    /// [`INSECURE_CLEAR_FLAG`] with `mode = "tls"`.
    #[error(
        "--insecure-clear-tunnels was given but [tls] mode is \"tls\": remove the flag (it only \
         confirms mode = \"clear\")"
    )]
    FlagWithoutClear,
}

/// The policy: a config's `[tls]` (`None`: absent) and whether [`INSECURE_CLEAR_FLAG`] was
/// given → how the tunnel runs, or why it may not (table in the module docs).
pub fn tunnel_security(
    tls: Option<&TlsConfig>,
    insecure_clear_tunnels: bool,
) -> Result<TunnelSecurity, TlsPolicyError> {
    match (tls.map(|t| t.mode), insecure_clear_tunnels) {
        (None, _) => Err(TlsPolicyError::Missing),
        (Some(TlsMode::Tls), false) => Ok(TunnelSecurity::Tls),
        (Some(TlsMode::Tls), true) => Err(TlsPolicyError::FlagWithoutClear),
        (Some(TlsMode::Clear), false) => Err(TlsPolicyError::ClearWithoutFlag),
        (Some(TlsMode::Clear), true) => Ok(TunnelSecurity::InsecureClear),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config::Config;

    const BASE: &str = "branch_id = 1\nlan_prefixes = [\"198.19.1.0/24\"]\n[[wan]]\n\
                        name = \"wan0\"\naddress = \"198.18.10.2/24\"\ngateway = \"198.18.10.1\"\n";
    const TLS: &str =
        "[tls]\nca_file = \"/etc/mms/tls/ca.pem\"\ncert_file = \"/etc/mms/tls/gw.pem\"\n\
                       key_file = \"/etc/mms/tls/gw.key\"\n";

    fn decide(tail: &str, flag: bool) -> Result<TunnelSecurity, TlsPolicyError> {
        Config::parse(&format!("{BASE}{tail}"))
            .unwrap()
            .tunnel_security(flag)
    }

    #[test]
    fn every_row_of_the_table() {
        assert_eq!(decide("", false), Err(TlsPolicyError::Missing));
        assert_eq!(decide("", true), Err(TlsPolicyError::Missing));
        assert_eq!(decide(TLS, false), Ok(TunnelSecurity::Tls));
        assert_eq!(
            decide(&format!("{TLS}mode = \"tls\"\n"), false),
            Ok(TunnelSecurity::Tls)
        );
        assert_eq!(decide(TLS, true), Err(TlsPolicyError::FlagWithoutClear));
        let clear = "[tls]\nmode = \"clear\"\n";
        assert_eq!(decide(clear, false), Err(TlsPolicyError::ClearWithoutFlag));
        assert_eq!(decide(clear, true), Ok(TunnelSecurity::InsecureClear));
    }

    #[test]
    fn the_messages_say_what_to_do() {
        let missing = TlsPolicyError::Missing.to_string();
        for needle in [
            "no [tls] section",
            "mmsg enrol --controller tls:HOST:PORT --branch N --ca ca.pem --dir /etc/mms/tls",
            "ssc enrol-token --branch N",
            "mode = \"clear\"",
            INSECURE_CLEAR_FLAG,
        ] {
            assert!(missing.contains(needle), "{needle:?} not in {missing}");
        }
        assert!(TlsPolicyError::ClearWithoutFlag
            .to_string()
            .contains(INSECURE_CLEAR_FLAG));
        assert!(TlsPolicyError::FlagWithoutClear
            .to_string()
            .contains("remove the flag"));
    }
}
