//! The control socket: `mmsg status` connects to the running daemon over a unix socket and gets
//! one JSON [`StatusReport`]. Protocol: the client sends one line (`status`), the server answers
//! with one JSON document and closes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tracing::{debug, info};

use crate::stats::{Stats, StatusReport};

/// Default control socket directory.
pub const DEFAULT_DIR: &str = "/run/mmsg";

/// The default control socket path.
pub fn default_path() -> PathBuf {
    Path::new(DEFAULT_DIR).join("mmsg.sock")
}

/// What the server needs to build a report.
#[derive(Debug, Clone)]
pub struct ReportSource {
    /// The statistics.
    pub stats: Arc<Stats>,
    /// Our branch.
    pub branch: u8,
    /// TUN offload on.
    pub offload: bool,
    /// Path manager name.
    pub path_manager: &'static str,
}

/// Binds the control socket (replacing a stale one).
pub fn bind(path: &Path) -> anyhow::Result<UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    let _ = std::fs::remove_file(path);
    let l = UnixListener::bind(path).with_context(|| format!("bind {}", path.display()))?;
    info!(path = %path.display(), "control socket listening");
    Ok(l)
}

/// Serves status requests forever.
pub async fn serve(listener: UnixListener, src: ReportSource) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let src = src.clone();
        tokio::spawn(async move {
            if let Err(e) = answer(stream, &src).await {
                debug!(error = %e, "control client failed");
            }
        });
    }
}

async fn answer(stream: UnixStream, src: &ReportSource) -> anyhow::Result<()> {
    let (r, mut w) = stream.into_split();
    let mut line = String::new();
    // One request line, bounded.
    BufReader::new(r.take(256)).read_line(&mut line).await?;
    let report = src.stats.report(src.branch, src.offload, src.path_manager);
    let mut out = serde_json::to_vec(&report)?;
    out.push(b'\n');
    w.write_all(&out).await?;
    w.shutdown().await?;
    Ok(())
}

/// Client side: asks the daemon at `path` for its status.
pub async fn query(path: &Path) -> anyhow::Result<StatusReport> {
    let mut s = UnixStream::connect(path)
        .await
        .with_context(|| format!("connect to {} (is mmsg running?)", path.display()))?;
    s.write_all(b"status\n").await?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await?;
    serde_json::from_slice(&buf).context("parse status reply")
}
