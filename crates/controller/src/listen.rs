//! Binding the controller's stream listeners: one optional TCP address and any number of unix
//! socket paths (gateways and switches in other network namespaces reach a unix socket through
//! the shared filesystem, without an IP route). Used by the OpenFlow server ([`crate::ofc`]) and
//! the gateway channel ([`crate::gwchan`]).

use std::net::SocketAddr;
use std::path::PathBuf;

use tokio::net::{TcpListener, UnixListener};

/// Bound listeners.
#[derive(Debug)]
pub struct Listeners {
    /// The TCP listener, if an address was given.
    pub tcp: Option<TcpListener>,
    /// The unix listeners with their paths.
    pub unix: Vec<(PathBuf, UnixListener)>,
}

impl Listeners {
    /// Binds `tcp` and every path of `unix` (mode 0600); a stale socket file at a path is
    /// replaced (any other file there is an error). Errors name `what` (e.g. `OpenFlow`) and the address or path.
    pub async fn bind(
        what: &str,
        tcp: Option<SocketAddr>,
        unix: &[PathBuf],
    ) -> std::io::Result<Listeners> {
        let tcp =
            match tcp {
                Some(a) => Some(TcpListener::bind(a).await.map_err(|e| {
                    std::io::Error::new(e.kind(), format!("bind {what} TCP {a}: {e}"))
                })?),
                None => None,
            };
        let mut bound = Vec::new();
        for p in unix {
            use std::os::unix::fs::FileTypeExt;
            if std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_socket()) {
                std::fs::remove_file(p)?;
            }
            let l = UnixListener::bind(p).map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("bind {what} unix socket {}: {e}", p.display()),
                )
            })?;
            // Only the owner (root for OVS and mmsg) may connect: the socket's permissions are
            // what authenticates a peer on it.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600)).map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("chmod 0600 {what} unix socket {}: {e}", p.display()),
                )
            })?;
            bound.push((p.clone(), l));
        }
        Ok(Listeners { tcp, unix: bound })
    }

    /// The TCP address (useful with port 0).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.tcp.as_ref().and_then(|l| l.local_addr().ok())
    }
}
