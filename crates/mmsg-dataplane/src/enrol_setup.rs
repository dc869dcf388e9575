//! Zero-touch enrolment (issue #21, docs/ops.md "Enrol a gateway"): after `mmsg enrol` got its
//! certificate ([`crate::enrol`]), `--write-config` asks the controller for the gateway's whole
//! config over mutual TLS (protocol 4, [`mpa::gwchan::setup`]) and writes it as a new config
//! file: the branch's LAN prefixes and WAN ports from the controller's inventory, the remotes
//! and path groups it pushes, `[controller]` at the address enrolment used and `[tls]` at the
//! files enrolment wrote. The file is validated as `mmsg check` does before it is written, and
//! an existing file is never replaced without `--force` (which keeps it as `<file>.prev`).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use mpa::config::{Config, ControllerConfig, TlsConfig, TlsMode};
use mpa::gwchan::{self, ControllerMsg, GatewayMsg, GatewaySetup, Hello, SetupRequest};
use mpa::BranchId;
use pki::tls::TlsFiles;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::enrol::{connect, mutual_tls, EXCHANGE_TIMEOUT};

/// Bytes read per call.
const READ_CHUNK: usize = 16 * 1024;

/// Asks the controller at `address` for branch `own`'s set-up: over mutual TLS with `files`
/// (`tls:`), or over the controller's unix socket (`unix:`). Clear `tcp:` is refused.
pub async fn fetch(address: &str, files: &TlsFiles, own: BranchId) -> anyhow::Result<GatewaySetup> {
    let tls = match address.split_once(':') {
        Some(("tls", _)) => Some(mutual_tls(files)?),
        Some(("unix", _)) => None,
        _ => anyhow::bail!("the set-up is fetched over tls:HOST:PORT or unix:/PATH, not {address}"),
    };
    let setup = tokio::time::timeout(EXCHANGE_TIMEOUT, async {
        let mut s = connect(address, tls).await?;
        let mut out = Vec::new();
        gwchan::encode(
            &GatewayMsg::Hello(Hello::with_protocol(
                gwchan::SETUP_PROTOCOL,
                concat!("mmsg ", env!("CARGO_PKG_VERSION")),
            )),
            &mut out,
        )?;
        gwchan::encode(
            &GatewayMsg::Setup(SetupRequest {
                branch_id: own.get(),
            }),
            &mut out,
        )?;
        s.write_all(&out).await?;
        s.flush().await?;
        let mut buf = Vec::new();
        let mut hello = false;
        loop {
            if let Some((m, n)) = gwchan::decode::<ControllerMsg>(&buf)? {
                buf.drain(..n);
                match m {
                    ControllerMsg::Hello(h) if !hello => {
                        anyhow::ensure!(
                            h.protocol >= gwchan::SETUP_PROTOCOL,
                            "the controller speaks protocol {}: zero-touch set-up needs {} \
                             (upgrade ssc, or write the config by hand: docs/ops.md)",
                            h.protocol,
                            gwchan::SETUP_PROTOCOL
                        );
                        hello = true;
                    }
                    ControllerMsg::Setup(setup) if hello => return Ok(setup),
                    ControllerMsg::Error(e) => {
                        anyhow::bail!("controller refused: {} ({})", e.message, e.code)
                    }
                    other => anyhow::bail!("expected hello and setup, got {other:?}"),
                }
                continue;
            }
            let mut chunk = [0u8; READ_CHUNK];
            let n = s.read(&mut chunk).await?;
            anyhow::ensure!(n > 0, "the controller closed the connection");
            buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
        }
    })
    .await
    .map_err(|_| anyhow::anyhow!("{address}: no answer within {EXCHANGE_TIMEOUT:?}"))??;
    anyhow::ensure!(
        setup.branch_id == own.get(),
        "the controller sent the set-up of branch {}, not {own}",
        setup.branch_id
    );
    Ok(setup)
}

/// The config file `mmsg enrol --write-config` writes: `setup` with `[controller] address =
/// address` (and `cache`, default [`mpa::config::DEFAULT_CONTROLLER_CACHE`]) and `[tls]` =
/// `files` (absolute paths), WAN interfaces renamed by `wan_names`. Returns the TOML text
/// (with a header) and the config; the text parses back to it.
pub fn config_text(
    setup: &GatewaySetup,
    address: &str,
    cache: Option<&Path>,
    files: &TlsFiles,
    wan_names: &[String],
) -> anyhow::Result<(String, Config)> {
    let controller = ControllerConfig {
        address: address.to_owned(),
        cache: cache.map_or_else(
            || PathBuf::from(mpa::config::DEFAULT_CONTROLLER_CACHE),
            Path::to_path_buf,
        ),
        renew_below_percent: mpa::config::DEFAULT_RENEW_PERCENT,
        renew_check_s: mpa::config::DEFAULT_RENEW_CHECK_S,
    };
    let tls = TlsConfig {
        mode: TlsMode::Tls,
        ca_file: Some(files.ca.clone()),
        cert_file: Some(files.cert.clone()),
        key_file: Some(files.key.clone()),
        crl_file: files.crl.clone(),
    };
    let config = setup
        .to_config(controller, tls, wan_names)
        .context("the controller's set-up does not make a valid config")?;
    let body = toml::to_string(&config).context("config to TOML")?;
    let text = format!(
        "# Written by `mmsg enrol --write-config` from the controller at {address} (branch {b},\n\
         # controller config version {v}). The remotes, path groups and weights below are\n\
         # replaced by the controller's at run time; branch_id, lan_prefixes and [[wan]] come\n\
         # from its inventory (interface names: --wan-name). Every key: docs/mmsg.md.\n\n{body}",
        b = setup.branch_id,
        v = setup.config.version,
    );
    let back = Config::parse(&text).context("the written config does not parse back")?;
    anyhow::ensure!(
        back == config,
        "the written config does not parse back equal"
    );
    Ok((text, config))
}

/// Fails when `path` exists and `force` is not set (checked before enrolment spends the
/// token, and again when writing).
pub fn check_writable(path: &Path, force: bool) -> anyhow::Result<()> {
    anyhow::ensure!(
        force || !path.exists(),
        "{} exists: not overwritten (--force keeps it as {}.prev and writes the new one)",
        path.display(),
        path.display()
    );
    Ok(())
}

/// Writes `text` to `path` (mode 0644, temporary file + fsync + rename). An existing file is
/// an error unless `force`, which first renames it to `<path>.prev`.
pub fn write_config(path: &Path, text: &str, force: bool) -> anyhow::Result<()> {
    check_writable(path, force)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    {
        let mut f =
            std::fs::File::create(&tmp).with_context(|| format!("create {}", tmp.display()))?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    if path.exists() {
        let mut prev = path.as_os_str().to_owned();
        prev.push(".prev");
        std::fs::rename(path, &prev).with_context(|| format!("keep {}", path.display()))?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("write {}", path.display()))?;
    Ok(())
}
