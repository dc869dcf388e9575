//! `[controller]`: the gateway channel's controller address, config cache and certificate
//! renewal.

use serde::{Deserialize, Serialize};

use super::problems::Problems;

/// `[controller]`: where the gateway channel connects and where it keeps the last good config.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ControllerConfig {
    /// `tls:HOST:PORT` (mutual TLS with the `[tls]` credentials; the controller's certificate
    /// must be `ssc.mms` from `[tls] ca_file`), `tcp:HOST:PORT` (clear) or `unix:/PATH` of
    /// `ssc`'s gateway listener.
    pub address: String,
    /// The last good config from the controller (JSON, written atomically, mode 0600).
    /// Default: `/var/lib/mmsg/controller-config.json`.
    #[serde(default = "default_controller_cache")]
    pub cache: std::path::PathBuf,
    /// With `tls:`: renew the certificate over the channel when less than this percentage of
    /// its lifetime is left (default 33; 0 = never).
    #[serde(default = "default_renew_percent")]
    pub renew_below_percent: u8,
    /// With `tls:`: how often the certificate's remaining lifetime is checked, in seconds
    /// (default 600).
    #[serde(default = "default_renew_check_s")]
    pub renew_check_s: u64,
}

/// The default `[controller] renew_below_percent`: a third of the lifetime (30 days of 90)
/// leaves weeks of retries before expiry.
pub const DEFAULT_RENEW_PERCENT: u8 = 33;
/// The default `[controller] renew_check_s`.
pub const DEFAULT_RENEW_CHECK_S: u64 = 600;

fn default_renew_percent() -> u8 {
    DEFAULT_RENEW_PERCENT
}

fn default_renew_check_s() -> u64 {
    DEFAULT_RENEW_CHECK_S
}

/// The default `[controller] cache`.
pub const DEFAULT_CONTROLLER_CACHE: &str = "/var/lib/mmsg/controller-config.json";

fn default_controller_cache() -> std::path::PathBuf {
    std::path::PathBuf::from(DEFAULT_CONTROLLER_CACHE)
}

impl ControllerConfig {
    /// The address form (`tls:` only with `tls_enabled`), renewal settings and cache path.
    pub(super) fn validate(&self, p: &mut Problems, tls_enabled: bool) {
        let ok = match self.address.split_once(':') {
            Some(("tcp" | "tls", rest)) => rest.rsplit_once(':').is_some_and(|(h, port)| {
                !h.is_empty() && port.parse::<u16>().is_ok_and(|p| p != 0)
            }),
            Some(("unix", path)) => path.starts_with('/'),
            _ => false,
        };
        if !ok {
            p.push(
                "controller.address",
                format!(
                    "{:?} must be \"tls:HOST:PORT\", \"tcp:HOST:PORT\" or \"unix:/PATH\"",
                    self.address
                ),
            );
        }
        if self.address.starts_with("tls:") && !tls_enabled {
            p.push(
                "controller.address",
                "tls: needs the [tls] credentials (mode = \"tls\"): they authenticate this gateway to the controller".into(),
            );
        }
        if self.renew_below_percent > 100 {
            p.push(
                "controller.renew_below_percent",
                format!("{} is out of range 0..=100", self.renew_below_percent),
            );
        }
        if self.renew_check_s == 0 {
            p.push("controller.renew_check_s", "must be at least 1".into());
        }
        if self.cache.as_os_str().is_empty() {
            p.push("controller.cache", "must not be empty".into());
        }
    }
}
