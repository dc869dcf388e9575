//! The gateway's certificate from the controller (issue #8, docs/security.md "Enrolment"):
//! enrolment with a one-time token (`mmsg enrol`), renewal over mutual TLS (the daemon, when
//! less than `[controller] renew_below_percent` of the lifetime is left, or `mmsg renew`), and
//! the connection to the controller for every address form (`tls:`, `tcp:`, `unix:`).
//!
//! The key pair is generated here ([`pki::enrol::KeyRequest`]); only the public key and a proof
//! of possession go to `ssc`. The answer (certificate, CA, CRL) and the key are written with
//! [`pki::files::write_private`] (mode 0600, temporary file + fsync + rename); the key and the
//! certificate as one unit with [`pki::files::write_pair`] (the previous pair is kept as
//! `<file>.prev`, and `mmsg run` puts it back at start if a kill -9 fell between the two
//! renames: docs/security.md "Credentials written crash-safe"). A reload that runs in between
//! fails on the key/certificate mismatch and keeps the old credentials. The CRL that comes with
//! the certificate replaces `crl_file` only when its `crl_number` is higher (never back).
//!
//! A token is never sent over clear TCP (refused here before connecting, and by `ssc`), never
//! logged, and not kept after the call.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use mpa::gwchan::{self, ControllerMsg, Credentials, Enrol, GatewayMsg, Hello, Renew};
use mpa::BranchId;
use pki::enrol::KeyRequest;
use pki::tls::TlsFiles;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The file names `mmsg enrol --dir D` writes (the `[tls]` section then names them).
pub const CA_FILE: &str = "ca.pem";
/// See [`CA_FILE`].
pub const CERT_FILE: &str = "gw.pem";
/// See [`CA_FILE`]. Mode 0600.
pub const KEY_FILE: &str = "gw.key";
/// See [`CA_FILE`].
pub const CRL_FILE: &str = "crl.pem";
/// How long a connect, the TLS handshake, and the controller's answer may take.
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes read per call.
const READ_CHUNK: usize = 16 * 1024;

/// A bidirectional stream to the controller.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// Connects to `address` (`tls:HOST:PORT`, `tcp:HOST:PORT`, `unix:/PATH`). `tls:` needs
/// `tls` (the client configuration: CA to verify `ssc.mms`, and our certificate if any).
pub async fn connect(
    address: &str,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> anyhow::Result<Box<dyn Stream>> {
    match address.split_once(':') {
        Some(("tcp", hostport)) => {
            let s = tokio::net::TcpStream::connect(hostport)
                .await
                .with_context(|| format!("connect to {address}"))?;
            let _ = s.set_nodelay(true);
            Ok(Box::new(s))
        }
        Some(("tls", hostport)) => {
            let cfg = tls.with_context(|| format!("{address}: no TLS credentials"))?;
            let s = tokio::net::TcpStream::connect(hostport)
                .await
                .with_context(|| format!("connect to {address}"))?;
            let _ = s.set_nodelay(true);
            let s = tokio_rustls::TlsConnector::from(cfg)
                .connect(pki::tls::controller_server_name(), s)
                .await
                .with_context(|| format!("TLS handshake with {address} (expects ssc.mms)"))?;
            Ok(Box::new(s))
        }
        Some(("unix", path)) => {
            let s = tokio::net::UnixStream::connect(path)
                .await
                .with_context(|| format!("connect to {address}"))?;
            Ok(Box::new(s))
        }
        _ => anyhow::bail!("{address:?} is not tls:HOST:PORT, tcp:HOST:PORT or unix:/PATH"),
    }
}

/// The mutual-TLS client configuration from the `[tls]` files (read now: after a renewal the
/// next connection uses the new certificate).
pub fn mutual_tls(files: &TlsFiles) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let read = |p: &Path| std::fs::read(p).with_context(|| format!("read {}", p.display()));
    let ca = read(&files.ca)?;
    let cert = read(&files.cert)?;
    let key = read(&files.key)?;
    Ok(pki::tls::controller_client_config(
        &ca,
        Some((&cert, &key)),
    )?)
}

/// Hello, `first`, then the controller's hello and its credentials (or its error).
async fn exchange(mut s: Box<dyn Stream>, first: GatewayMsg) -> anyhow::Result<Credentials> {
    let mut out = Vec::new();
    gwchan::encode(
        // Enrolment needs protocol 2 only: it works with a protocol 2 controller too.
        &GatewayMsg::Hello(Hello::with_protocol(
            gwchan::ENROL_PROTOCOL,
            concat!("mmsg ", env!("CARGO_PKG_VERSION")),
        )),
        &mut out,
    )?;
    gwchan::encode(&first, &mut out)?;
    s.write_all(&out).await?;
    s.flush().await?;
    let mut buf = Vec::new();
    let mut answers = Vec::new();
    while answers.len() < 2 {
        if let Some((m, n)) = gwchan::decode::<ControllerMsg>(&buf)? {
            buf.drain(..n);
            if let ControllerMsg::Error(e) = &m {
                anyhow::bail!("controller refused: {} ({})", e.message, e.code);
            }
            answers.push(m);
            continue;
        }
        let mut chunk = [0u8; READ_CHUNK];
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            anyhow::bail!("the controller closed the connection");
        }
        buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
    }
    let mut it = answers.into_iter();
    match (it.next(), it.next()) {
        (Some(ControllerMsg::Hello(h)), Some(ControllerMsg::Credentials(c))) => {
            h.check_controller().map_err(|e| anyhow::anyhow!("{e}"))?;
            Ok(c)
        }
        (a, b) => anyhow::bail!("expected hello and credentials, got {a:?}, {b:?}"),
    }
}

/// Checks what the controller sent before anything is written: the certificate is ours
/// (branch, the key we generated) and verifies against the CA it sent.
fn check(c: &Credentials, key_pem: &str, own: BranchId) -> anyhow::Result<()> {
    pki::tls::Credentials::from_pem(
        c.ca_pem.as_bytes(),
        c.cert_pem.as_bytes(),
        key_pem.as_bytes(),
        Some(c.crl_pem.as_bytes()),
        own,
    )
    .context("the credentials from the controller do not form a valid set")?;
    Ok(())
}

/// Writes checked credentials ([`check`]) and their key to `files`: the CA, the CRL (only when
/// newer than the one in `crl_file`), then the key and certificate as one unit
/// ([`pki::files::write_pair`]). This is the write path of enrolment and renewal.
pub fn store(files: &TlsFiles, key_pem: &str, c: &Credentials) -> anyhow::Result<()> {
    let w = |p: &Path, data: &str| {
        pki::files::write_private(p, data.as_bytes())
            .with_context(|| format!("write {}", p.display()))
    };
    w(&files.ca, &c.ca_pem)?;
    if let Some(crl) = &files.crl {
        let have = std::fs::read(crl)
            .ok()
            .and_then(|old| pki::crl::verify_pem(&old, c.ca_pem.as_bytes()).ok());
        let got = pki::crl::verify_pem(c.crl_pem.as_bytes(), c.ca_pem.as_bytes())
            .context("the CRL from the controller")?;
        match have {
            Some(have) if have.number >= got.number => tracing::debug!(
                have = %have.number,
                got = %got.number,
                "crl_file is as new as the controller's CRL; kept"
            ),
            _ => w(crl, &c.crl_pem)?,
        }
    }
    pki::files::write_pair(
        &files.cert,
        &files.key,
        c.cert_pem.as_bytes(),
        key_pem.as_bytes(),
    )
    .with_context(|| format!("write {} and {}", files.key.display(), files.cert.display()))
}

/// The files `mmsg enrol --dir` writes.
pub fn files_in(dir: &Path) -> TlsFiles {
    TlsFiles {
        ca: dir.join(CA_FILE),
        cert: dir.join(CERT_FILE),
        key: dir.join(KEY_FILE),
        crl: Some(dir.join(CRL_FILE)),
    }
}

/// Enrols branch `own` with `token` at `address`, trusting `ca_pem` for the controller's
/// certificate (`tls:`; a `unix:` socket needs no CA). Writes the [`files_in`] `dir`.
pub async fn enrol(
    address: &str,
    ca_pem: Option<&[u8]>,
    own: BranchId,
    token: &str,
    dir: &Path,
) -> anyhow::Result<Credentials> {
    let tls = match address.split_once(':') {
        Some(("tcp", _)) => anyhow::bail!(
            "refusing to send an enrolment token over clear TCP ({address}): use tls:HOST:PORT (or a unix socket)"
        ),
        Some(("tls", _)) => {
            let ca = ca_pem.context("tls: enrolment needs the CA certificate (--ca)")?;
            Some(pki::tls::controller_client_config(ca, None)?)
        }
        _ => None,
    };
    let key = KeyRequest::generate()?;
    let first = GatewayMsg::Enrol(Enrol {
        branch_id: own.get(),
        token: token.to_owned(),
        public_key: key.public_key.clone(),
        proof: key.proof.clone(),
    });
    let c = tokio::time::timeout(EXCHANGE_TIMEOUT, async {
        exchange(connect(address, tls).await?, first).await
    })
    .await
    .map_err(|_| anyhow::anyhow!("{address}: no answer within {EXCHANGE_TIMEOUT:?}"))??;
    if let (Some(pinned), false) = (ca_pem, address.starts_with("unix:")) {
        anyhow::ensure!(
            c.ca_pem.as_bytes() == pinned,
            "the controller sent another CA certificate than the pinned one"
        );
    }
    check(&c, &key.key_pem, own)?;
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    store(&files_in(dir), &key.key_pem, &c)?;
    Ok(c)
}

/// Renews our certificate over mutual TLS at `address` (`tls:` only) with the current
/// `files`, and replaces them (a new key, the new certificate, CA and CRL).
pub async fn renew(address: &str, files: &TlsFiles, own: BranchId) -> anyhow::Result<Credentials> {
    anyhow::ensure!(
        address.starts_with("tls:"),
        "renewal needs a tls: controller address (mutual TLS), not {address}"
    );
    let tls = mutual_tls(files)?;
    let key = KeyRequest::generate()?;
    let first = GatewayMsg::Renew(Renew {
        public_key: key.public_key.clone(),
        proof: key.proof.clone(),
    });
    let c = tokio::time::timeout(EXCHANGE_TIMEOUT, async {
        exchange(connect(address, Some(tls)).await?, first).await
    })
    .await
    .map_err(|_| anyhow::anyhow!("{address}: no answer within {EXCHANGE_TIMEOUT:?}"))??;
    check(&c, &key.key_pem, own)?;
    store(files, &key.key_pem, &c)?;
    Ok(c)
}

/// The `notAfter` (Unix s) of the certificate in `cert`; `None`: the file does not parse.
pub fn not_after(cert: &Path) -> Option<u64> {
    use rustls::pki_types::pem::PemObject;
    let der = rustls::pki_types::CertificateDer::from_pem_file(cert).ok()?;
    pki::validity::validity_of(&der).map(|(_, na)| na)
}

/// Whether the certificate in `cert` has less than `percent` % of its lifetime left at `now`
/// (Unix s). `None`: the file does not parse.
pub fn due(cert: &Path, percent: u8, now: u64) -> Option<bool> {
    use rustls::pki_types::pem::PemObject;
    let der = rustls::pki_types::CertificateDer::from_pem_file(cert).ok()?;
    let (nb, na) = pki::validity::validity_of(&der)?;
    let life = na.saturating_sub(nb);
    let left = na.saturating_sub(now);
    Some(u128::from(left) * 100 < u128::from(life) * u128::from(percent))
}

/// The `[tls]` files of a config as [`TlsFiles`] (`None` without `[tls]` in tls mode).
pub fn tls_files(config: &mpa::config::Config) -> Option<TlsFiles> {
    let t = config.tls_enabled()?;
    Some(TlsFiles {
        ca: t.ca_file.clone()?,
        cert: t.cert_file.clone()?,
        key: t.key_file.clone()?,
        crl: t.crl_file.clone(),
    })
}

/// Where a `--dir` default points.
pub fn default_dir() -> PathBuf {
    PathBuf::from("/etc/mms/tls")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn renewal_is_due_below_the_fraction() {
        let d = tempfile::tempdir().unwrap();
        let ca = pki::ca::Ca::generate("t").unwrap();
        let day = Duration::from_secs(86_400);
        let c = ca
            .issue_gateway(BranchId::new(1).unwrap(), 3, day * 9)
            .unwrap();
        let p = d.path().join("gw.pem");
        std::fs::write(&p, &c.cert_pem).unwrap();
        let der = c.cert_der.to_vec();
        let (nb, na) = pki::validity::validity_of(&der).unwrap();
        let life = na - nb;
        assert_eq!(due(&p, 33, nb), Some(false));
        assert_eq!(due(&p, 33, na - life / 2), Some(false));
        assert_eq!(due(&p, 33, na - life / 4), Some(true));
        assert_eq!(due(&p, 0, na - 1), Some(false));
        assert_eq!(due(&p, 100, nb + 1), Some(true));
        assert_eq!(due(&d.path().join("none"), 33, nb), None);
    }
}
