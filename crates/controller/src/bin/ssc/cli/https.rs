//! HTTPS for the client commands (`ssc status --api https://HOST:PORT --ca-file ca.pem`): ureq
//! is built without its own TLS stack (no webpki roots, no second crypto provider), so the
//! commands get a rustls connector ([`ureq::TlsConnector`]) with the project's provider
//! (`pki::tls::provider`, ring) that trusts exactly the certificates in `--ca-file` /
//! `SSC_CA_FILE` (the CA of `ssc`'s `api.rest_tls` certificate). The server name checked is the
//! URL's host (a DNS name or an IP address, which the certificate must name). A problem with the
//! CA file is reported at the first request (the commands build their client infallibly).
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

/// A ureq TLS connector trusting the certificates of one CA file, or the reason it cannot.
pub(crate) struct Connector {
    config: Result<Arc<rustls::ClientConfig>, String>,
}

impl Connector {
    /// The connector for `ca_file`; `None`: every https:// request fails, naming the flag.
    pub(crate) fn new(ca_file: Option<&Path>) -> Self {
        let config = match ca_file {
            None => Err(
                "an https:// API needs the CA certificate that signed ssc's api.rest_tls \
                 certificate: --ca-file FILE (or SSC_CA_FILE)"
                    .to_owned(),
            ),
            Some(p) => client_config(p),
        };
        Self { config }
    }
}

fn client_config(ca_file: &Path) -> Result<Arc<rustls::ClientConfig>, String> {
    let what = |e: &dyn std::fmt::Display| format!("--ca-file {}: {e}", ca_file.display());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca_file).map_err(|e| what(&e))? {
        let c = c.map_err(|e| what(&e))?;
        roots
            .add(c)
            .map_err(|e| what(&format!("not a CA certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(what(&"no PEM certificate in it"));
    }
    let cfg = rustls::ClientConfig::builder_with_provider(pki::tls::provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(cfg))
}

impl ureq::TlsConnector for Connector {
    fn connect(
        &self,
        dns_name: &str,
        mut io: Box<dyn ureq::ReadWrite>,
    ) -> Result<Box<dyn ureq::ReadWrite>, ureq::Error> {
        let err = |m: String| ureq::Error::from(std::io::Error::other(m));
        let config = self.config.clone().map_err(err)?;
        let name = ServerName::try_from(dns_name.to_owned())
            .map_err(|e| err(format!("{dns_name:?} is not a server name: {e}")))?;
        let mut conn = rustls::ClientConnection::new(config, name)
            .map_err(|e| err(format!("TLS with {dns_name}: {e}")))?;
        // The whole handshake now: a certificate our CA did not sign fails here, clearly.
        while conn.is_handshaking() {
            conn.complete_io(&mut io).map_err(|e| {
                err(format!(
                    "TLS handshake with {dns_name}: {e} (is --ca-file the CA of ssc's \
                     api.rest_tls certificate, and does that certificate name {dns_name}?)"
                ))
            })?;
        }
        Ok(Box::new(TlsStream(rustls::StreamOwned::new(conn, io))))
    }
}

/// An established client TLS stream over ureq's socket.
struct TlsStream(rustls::StreamOwned<rustls::ClientConnection, Box<dyn ureq::ReadWrite>>);

impl std::fmt::Debug for TlsStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsStream").finish_non_exhaustive()
    }
}

impl Read for TlsStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for TlsStream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl ureq::ReadWrite for TlsStream {
    fn socket(&self) -> Option<&std::net::TcpStream> {
        self.0.sock.socket()
    }
}
