//! The `ssc` configuration file (TOML, every key optional, unknown keys rejected).
//!
//! ```toml
//! [api]
//! listen = "127.0.0.1:8080"          # REST API address
//! token_file = "/etc/mms/ssc.token"  # bearer token (or `token = "..."`, or env SSC_TOKEN)
//! body_limit_bytes = 1048576         # largest request body
//! bootstrap_token_ttl_s = 86400      # the config's token expires 24 h after its first use (0 = never)
//! rest_tls = { cert_file = "rest.pem", key_file = "rest.key" }  # HTTPS (absent: plain HTTP)
//!
//! [database]
//! path = "/var/lib/mms/ssc.redb"     # relative paths are relative to this file's directory
//!
//! [openflow]
//! tls_listen = "0.0.0.0:6654"        # OpenFlow 1.3 over TLS (OVS ssl: targets, branch certificates)
//! unix = ["/run/mms/ofc.sock"]       # and/or unix sockets, mode 0600 (OVS: set-controller br0 unix:PATH)
//! listen = ""                        # clear TCP, UNAUTHENTICATED: off by default; "6653" = 127.0.0.1:6653
//! max_unauthenticated = 256          # pre-auth caps of the TCP listeners, in total ...
//! max_unauthenticated_per_source = 8 # ... and per source address
//! handshake_timeout_ms = 5000        # accept → FEATURES_REPLY (TLS included), at most 5000
//! stats_interval_ms = 5000           # SDC polling period
//!
//! [gateways]
//! tls_listen = "0.0.0.0:6691"        # gateway channel over TLS (enrolment, mutual TLS)
//! listen = ""                        # clear TCP (register only; "" = none, the default)
//! unix = ["/run/mms/gw.sock"]
//! max_unauthenticated = 256          # pre-auth caps of the TCP listeners (as [openflow])
//! max_unauthenticated_per_source = 8
//! handshake_timeout_ms = 5000
//!
//! [ca]
//! dir = "/var/lib/mms/ca"            # ca.pem, ca.key (0600); default: `ca` next to the database
//! cert_validity_days = 90            # gateway certificates
//! ```
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Shortest accepted bearer token, in bytes: a guessable token is no protection.
pub const MIN_TOKEN_LEN: usize = 16;

/// Default request body limit: an inventory of 15 branches × 8 ports with 16 groups per ordered
/// pair (3360 groups) is well under 1 MiB of JSON.
pub const DEFAULT_BODY_LIMIT_BYTES: usize = 1 << 20;

/// The whole file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The REST API.
    #[serde(default)]
    pub api: ApiConfig,
    /// The inventory database.
    #[serde(default)]
    pub database: DatabaseConfig,
    /// The OpenFlow server (OFC) and statistics (SDC).
    #[serde(default)]
    pub openflow: OpenflowConfig,
    /// The gateway channel (`mmsg` connects here for its config, `docs/gwchan.md`).
    #[serde(default)]
    pub gateways: GatewaysConfig,
    /// The gateway CA ([`crate::authority`]).
    #[serde(default)]
    pub ca: CaConfig,
}

/// Default validity of the gateway certificates `ssc` issues, in days.
pub const DEFAULT_CERT_VALIDITY_DAYS: u32 = 90;

/// `[ca]`: the gateway CA `ssc` runs (created on the first `ssc run` or by `ssc ca init`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CaConfig {
    /// Directory of `ca.pem` and `ca.key` (0600); default: `ca` next to the database file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    /// Validity of issued gateway certificates in days (default 90, 1..=825).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert_validity_days: Option<u32>,
}

impl CaConfig {
    /// The CA directory for a database at `db`.
    pub fn dir_for(&self, db: &Path) -> PathBuf {
        self.dir.clone().unwrap_or_else(|| {
            db.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .join("ca")
        })
    }

    /// The validity of issued gateway certificates (clamped to 1..=825 days, the CA/B limit).
    pub fn validity(&self) -> std::time::Duration {
        let days = self
            .cert_validity_days
            .unwrap_or(DEFAULT_CERT_VALIDITY_DAYS)
            .clamp(1, 825);
        std::time::Duration::from_secs(u64::from(days) * 24 * 3600)
    }
}

/// `[gateways]`: the listeners of the gateway channel ([`crate::gwchan`]). None by default.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GatewaysConfig {
    /// TCP listen address, e.g. `0.0.0.0:6690`; default or empty string: no TCP listener.
    /// Clear text: gateways may register but not enrol here. Prefer `tls_listen`.
    #[serde(with = "opt_addr")]
    pub listen: Option<SocketAddr>,
    /// TLS listen address (server certificate `ssc.mms` from the CA, client certificates of the
    /// gateways), e.g. `0.0.0.0:6691`; default or empty string: none. Needs `[ca]`.
    #[serde(with = "opt_addr")]
    pub tls_listen: Option<SocketAddr>,
    /// Unix socket paths to listen on as well (a stale socket file is replaced; mode 0600).
    pub unix: Vec<PathBuf>,
    /// Unauthenticated TCP connections at once, all sources together (default 256).
    pub max_unauthenticated: usize,
    /// Unauthenticated TCP connections at once from one address (IPv6: one /64; default 8).
    pub max_unauthenticated_per_source: usize,
    /// From accept to authenticated, TLS handshake included; at most 5000 (the default).
    pub handshake_timeout_ms: u64,
}

impl Default for GatewaysConfig {
    fn default() -> Self {
        let (total, per_source, ms) = preauth_defaults();
        Self {
            listen: None,
            tls_listen: None,
            unix: Vec::new(),
            max_unauthenticated: total,
            max_unauthenticated_per_source: per_source,
            handshake_timeout_ms: ms,
        }
    }
}

impl GatewaysConfig {
    /// The listeners' settings.
    pub fn to_gwchan(&self) -> crate::gwchan::GwChanConfig {
        crate::gwchan::GwChanConfig {
            listen: self.listen,
            tls_listen: self.tls_listen,
            unix: self.unix.clone(),
            preauth: preauth_limits(
                self.max_unauthenticated,
                self.max_unauthenticated_per_source,
                self.handshake_timeout_ms,
            ),
        }
    }
}

/// The pre-auth limits of `[openflow]` or `[gateways]` ([`crate::preauth`]; deadline clamped
/// to 5 s).
fn preauth_limits(total: usize, per_source: usize, ms: u64) -> crate::preauth::PreAuthLimits {
    crate::preauth::PreAuthLimits {
        total,
        per_source,
        deadline: std::time::Duration::from_millis(ms),
        ..crate::preauth::PreAuthLimits::default()
    }
    .clamped()
}

/// Defaults of the pre-auth keys: (total, per source, deadline ms).
fn preauth_defaults() -> (usize, usize, u64) {
    let d = crate::preauth::PreAuthLimits::default();
    (
        d.total,
        d.per_source,
        u64::try_from(d.deadline.as_millis()).unwrap_or(5000),
    )
}

/// `[openflow]`: the OpenFlow 1.3 server that programs the gateways' OVS, and the SDC's polling.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OpenflowConfig {
    /// Clear TCP listen address; default or empty string: none. Switches on it are
    /// **unauthenticated** (they never replace a TLS or unix-socket switch of their branch, their
    /// statistics are ignored) and `ssc` logs a WARN when it is on. A port alone (`"6653"`)
    /// binds to loopback (`127.0.0.1`); another address must be written out.
    #[serde(with = "opt_addr_loopback")]
    pub listen: Option<SocketAddr>,
    /// TLS listen address for OVS `ssl:` controller targets, e.g. `0.0.0.0:6654` (certificate
    /// `ssc.mms` from the CA; the switch must present its branch certificate, the one its
    /// datapath id names); default or empty string: none.
    #[serde(with = "opt_addr")]
    pub tls_listen: Option<SocketAddr>,
    /// Unix socket paths to listen on as well (a stale socket file is replaced; mode 0600,
    /// which authenticates the switches on it).
    pub unix: Vec<PathBuf>,
    /// Unauthenticated TCP connections at once, all sources together (default 256).
    pub max_unauthenticated: usize,
    /// Unauthenticated TCP connections at once from one address (IPv6: one /64; default 8).
    pub max_unauthenticated_per_source: usize,
    /// From accept to authenticated, TLS handshake included; at most 5000 (the default).
    pub handshake_timeout_ms: u64,
    /// Silence after which an ECHO_REQUEST goes to a switch.
    pub echo_interval_ms: u64,
    /// Silence after which a switch is dead and its connection closed.
    pub dead_timeout_ms: u64,
    /// Longest wait for one reply or barrier from a switch.
    pub request_timeout_ms: u64,
    /// Longest wait for every switch of one install step; a switch later than this is dropped.
    pub stage_timeout_ms: u64,
    /// Flow and port statistics polling period (SDC).
    pub stats_interval_ms: u64,
}

impl Default for OpenflowConfig {
    fn default() -> Self {
        Self {
            listen: None,
            tls_listen: None,
            unix: Vec::new(),
            max_unauthenticated: preauth_defaults().0,
            max_unauthenticated_per_source: preauth_defaults().1,
            handshake_timeout_ms: preauth_defaults().2,
            echo_interval_ms: 5_000,
            dead_timeout_ms: 15_000,
            request_timeout_ms: 10_000,
            stage_timeout_ms: 5_000,
            stats_interval_ms: 5_000,
        }
    }
}

impl OpenflowConfig {
    /// The OFC's settings.
    pub fn to_ofc(&self) -> crate::ofc::OfcConfig {
        use std::time::Duration;
        let ms = |v: u64| Duration::from_millis(v.max(1));
        crate::ofc::OfcConfig {
            listen: self.listen,
            unix: self.unix.clone(),
            tls_listen: self.tls_listen,
            tls: None,
            tls_updates: None,
            channel: ofproto::channel::Config {
                echo_interval: ms(self.echo_interval_ms),
                dead_timeout: ms(self.dead_timeout_ms),
                ..ofproto::channel::Config::default()
            },
            request_timeout: ms(self.request_timeout_ms),
            stage_timeout: ms(self.stage_timeout_ms),
            stats_interval: ms(self.stats_interval_ms),
            preauth: preauth_limits(
                self.max_unauthenticated,
                self.max_unauthenticated_per_source,
                self.handshake_timeout_ms,
            ),
        }
    }
}

/// `listen = "a:p"` or `""` (none).
mod opt_addr {
    use std::net::SocketAddr;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<SocketAddr>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(a) => s.collect_str(a),
            None => s.serialize_str(""),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
        let s = String::deserialize(d)?;
        if s.is_empty() {
            return Ok(None);
        }
        s.parse().map(Some).map_err(serde::de::Error::custom)
    }
}

/// `listen = "a:p"`, `"p"` (loopback, `127.0.0.1:p`) or `""` (none).
mod opt_addr_loopback {
    use std::net::{Ipv4Addr, SocketAddr};

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<SocketAddr>, s: S) -> Result<S::Ok, S::Error> {
        super::opt_addr::serialize(v, s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
        let s = String::deserialize(d)?;
        if s.is_empty() {
            return Ok(None);
        }
        if let Ok(port) = s.parse::<u16>() {
            return Ok(Some(SocketAddr::from((Ipv4Addr::LOCALHOST, port))));
        }
        s.parse().map(Some).map_err(serde::de::Error::custom)
    }
}

/// `[api]`: the REST API.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiConfig {
    /// Listen address; default `127.0.0.1:8080` (loopback: expose it deliberately).
    pub listen: SocketAddr,
    /// The bearer token itself. Prefer `token_file` or the `SSC_TOKEN` environment variable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// A file holding the bearer token (surrounding whitespace is ignored).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    /// Largest request body in bytes.
    pub body_limit_bytes: usize,
    /// Lifetime of the bootstrap token (`token`, `token_file`, `--token`) in seconds, counted
    /// from the first `ssc run` that saw it (recorded in the database as the token named
    /// `bootstrap`; a restart does not re-arm it, a new token does). Default 86400 (24 h);
    /// `0`: never expires (not recommended).
    pub bootstrap_token_ttl_s: u64,
    /// Serve the REST API over HTTPS with this certificate and key (PEM files); absent: plain
    /// HTTP (keep `listen` on loopback then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rest_tls: Option<RestTlsConfig>,
}

/// `[api.rest_tls]`: the REST API's TLS certificate (chain) and private key, PEM.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestTlsConfig {
    /// The certificate, then any intermediates (PEM).
    pub cert_file: PathBuf,
    /// The private key (PEM, PKCS#8, SEC1 or PKCS#1).
    pub key_file: PathBuf,
}

impl ApiConfig {
    /// The bootstrap token's lifetime (`None`: never expires).
    pub fn bootstrap_token_ttl(&self) -> Option<u64> {
        (self.bootstrap_token_ttl_s > 0).then_some(self.bootstrap_token_ttl_s)
    }
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 8080)),
            token: None,
            token_file: None,
            body_limit_bytes: DEFAULT_BODY_LIMIT_BYTES,
            bootstrap_token_ttl_s: crate::ui::api::DEFAULT_BOOTSTRAP_TOKEN_TTL_S,
            rest_tls: None,
        }
    }
}

/// `[database]`: the embedded inventory database (redb).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseConfig {
    /// The database file; created by `ssc run` if missing. Default `ssc.redb`.
    pub path: PathBuf,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        Self {
            path: PathBuf::from("ssc.redb"),
        }
    }
}

/// Why the configuration is unusable.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("config {path}: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The IO error (in the message, so not a `source`: no duplicates in error chains).
        error: std::io::Error,
    },
    /// Not TOML of the expected shape (unknown keys included); the message names the key.
    #[error("config {path}: {error}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parse error (in the message).
        error: Box<toml::de::Error>,
    },
    /// No token anywhere.
    #[error("no API token: set api.token_file or api.token in the config, or SSC_TOKEN / --token")]
    NoToken,
    /// The token file could not be read.
    #[error("api.token_file {path}: {error}")]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// The IO error (in the message, so not a `source`: no duplicates in error chains).
        error: std::io::Error,
    },
    /// A token too short to be a secret.
    #[error(
        "the API token has {0} bytes; use at least 16 (e.g. `head -c 24 /dev/urandom | base64`)"
    )]
    ShortToken(usize),
    /// Both `token` and `token_file`.
    #[error("api.token and api.token_file are both set; keep one")]
    TwoTokens,
}

impl Config {
    /// Parses TOML (`origin` names the source in errors).
    pub fn from_toml(s: &str, origin: &Path) -> Result<Self, ConfigError> {
        toml::from_str(s).map_err(|e| ConfigError::Parse {
            path: origin.to_owned(),
            error: Box::new(e),
        })
    }

    /// Reads and parses a file; relative paths in it are resolved against its directory.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            path: path.to_owned(),
            error,
        })?;
        let mut config = Self::from_toml(&text, path)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        if config.database.path.is_relative() {
            config.database.path = dir.join(&config.database.path);
        }
        if let Some(d) = &mut config.ca.dir {
            if d.is_relative() {
                *d = dir.join(&*d);
            }
        }
        for p in &mut config.gateways.unix {
            if p.is_relative() {
                *p = dir.join(&*p);
            }
        }
        for p in &mut config.openflow.unix {
            if p.is_relative() {
                *p = dir.join(&*p);
            }
        }
        if let Some(f) = config.api.token_file.as_mut() {
            if f.is_relative() {
                *f = dir.join(&*f);
            }
        }
        if let Some(t) = config.api.rest_tls.as_mut() {
            for f in [&mut t.cert_file, &mut t.key_file] {
                if f.is_relative() {
                    *f = dir.join(&*f);
                }
            }
        }
        Ok(config)
    }

    /// The bearer token: `override_token` (flag or env) first, then `api.token`, then the file.
    pub fn token(&self, override_token: Option<&str>) -> Result<String, ConfigError> {
        let token = match (override_token, &self.api.token, &self.api.token_file) {
            (Some(t), _, _) => t.trim().to_owned(),
            (None, Some(_), Some(_)) => return Err(ConfigError::TwoTokens),
            (None, Some(t), None) => t.trim().to_owned(),
            (None, None, Some(path)) => std::fs::read_to_string(path)
                .map_err(|error| ConfigError::TokenFile {
                    path: path.clone(),
                    error,
                })?
                .trim()
                .to_owned(),
            (None, None, None) => return Err(ConfigError::NoToken),
        };
        if token.len() < MIN_TOKEN_LEN {
            return Err(ConfigError::ShortToken(token.len()));
        }
        Ok(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_for_every_key() {
        let c = Config::from_toml("", Path::new("x")).unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.api.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(c.database.path, PathBuf::from("ssc.redb"));
        assert_eq!(
            c.openflow.listen, None,
            "no clear OpenFlow listener by default"
        );
        assert_eq!(c.openflow.to_ofc().listen, None);
        assert!(c.openflow.unix.is_empty());
        assert_eq!(c.openflow.stats_interval_ms, 5000);
    }

    #[test]
    fn openflow_section() {
        let c = Config::from_toml(
            "[openflow]\nlisten = \"\"\nunix = [\"/run/x.sock\"]\nstats_interval_ms = 1000",
            Path::new("t.toml"),
        )
        .unwrap();
        assert_eq!(c.openflow.listen, None);
        assert_eq!(c.openflow.unix, vec![PathBuf::from("/run/x.sock")]);
        let o = c.openflow.to_ofc();
        assert_eq!(o.stats_interval, std::time::Duration::from_secs(1));
        let c = Config::from_toml("[openflow]\nlisten = \"6653\"", Path::new("t.toml")).unwrap();
        assert_eq!(
            c.openflow.listen,
            Some(SocketAddr::from(([127, 0, 0, 1], 6653))),
            "a port alone binds to loopback"
        );
        let c = Config::from_toml(
            "[openflow]\nlisten = \"0.0.0.0:6653\"\nhandshake_timeout_ms = 60000",
            Path::new("t.toml"),
        )
        .unwrap();
        assert_eq!(
            c.openflow.listen,
            Some(SocketAddr::from(([0, 0, 0, 0], 6653)))
        );
        assert_eq!(
            c.openflow.to_ofc().preauth.deadline,
            std::time::Duration::from_secs(5),
            "the pre-auth deadline is at most 5 s"
        );
        let e =
            Config::from_toml("[openflow]\nlisten = \"nope\"", Path::new("t.toml")).unwrap_err();
        assert!(e.to_string().contains("listen"), "{e}");
    }

    #[test]
    fn api_rest_tls_and_bootstrap_ttl() {
        let c = Config::default();
        assert_eq!(c.api.bootstrap_token_ttl(), Some(86_400));
        assert_eq!(c.api.rest_tls, None);
        let c = Config::from_toml(
            "[api]\nbootstrap_token_ttl_s = 0\nrest_tls = { cert_file = \"a.pem\", key_file = \"a.key\" }",
            Path::new("t.toml"),
        )
        .unwrap();
        assert_eq!(c.api.bootstrap_token_ttl(), None);
        assert_eq!(
            c.api.rest_tls.map(|t| (t.cert_file, t.key_file)),
            Some((PathBuf::from("a.pem"), PathBuf::from("a.key")))
        );
        let e = Config::from_toml(
            "[api]\nrest_tls = { cert = \"a.pem\" }",
            Path::new("t.toml"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("cert"), "{e}");
    }

    #[test]
    fn the_example_config_has_no_clear_openflow_listener() {
        let c = Config::from_toml(
            include_str!("../../../../examples/ssc.toml"),
            Path::new("examples/ssc.toml"),
        )
        .unwrap();
        assert_eq!(c.openflow.listen, None);
        assert!(c.openflow.tls_listen.is_some());
        assert_eq!(c.openflow.handshake_timeout_ms, 5000);
    }

    #[test]
    fn unknown_keys_name_the_key() {
        for (text, key) in [
            ("colour = 1", "colour"),
            ("[api]\nlisten_port = 1", "listen_port"),
            ("[database]\nfile = \"x\"", "file"),
            ("[openflow]\nport = 6653", "port"),
        ] {
            let e = Config::from_toml(text, Path::new("t.toml")).unwrap_err();
            assert!(e.to_string().contains(key), "{e}");
            assert!(e.to_string().contains("unknown field"), "{e}");
        }
    }

    #[test]
    fn token_rules() {
        let mut c = Config::default();
        assert!(matches!(c.token(None), Err(ConfigError::NoToken)));
        c.api.token = Some("short".into());
        assert!(matches!(c.token(None), Err(ConfigError::ShortToken(5))));
        assert_eq!(
            c.token(Some("0123456789abcdef")).unwrap(),
            "0123456789abcdef"
        );
        c.api.token_file = Some("/nonexistent".into());
        assert!(matches!(c.token(None), Err(ConfigError::TwoTokens)));
        c.api.token = None;
        assert!(matches!(c.token(None), Err(ConfigError::TokenFile { .. })));
    }
}
