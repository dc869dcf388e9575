//! The client commands of `ssc`: each builds a typed request body (the API's own types),
//! calls a running `ssc run` over REST ([`controller::ui::client`]) and prints its answer as text
//! or, with `--json`, as the API's JSON. One module per resource.
use std::path::Path;

use anyhow::Context;
use clap::Args;
use controller::inventory::{BranchId, PortIndex};
use controller::path_group::PathGroupId;
use controller::ui::client::Client;
use serde_json::Value;

pub(crate) mod credentials;
pub(crate) mod https;
pub(crate) mod init;
pub(crate) mod inventory;
pub(crate) mod overview;
pub(crate) mod settings;
pub(crate) mod status;

/// Unix seconds as `2026-12-25T05:00:00Z`.
pub(crate) fn utc(unix: u64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(unix))
        .to_string()
}

/// How to reach a running `ssc run`.
#[derive(Debug, Args)]
pub(crate) struct ClientArgs {
    /// Base URL of the `ssc` REST API: http://HOST:PORT, or https://HOST:PORT when `ssc`
    /// serves `api.rest_tls` (then also --ca-file; the certificate must name HOST).
    #[arg(long, env = "SSC_API", default_value = "http://127.0.0.1:8080")]
    pub(crate) api: axum::http::Uri,
    /// The CA certificate (PEM) that signed `ssc`'s `api.rest_tls` certificate: the only
    /// certificates an https:// API is trusted with (no system roots).
    #[arg(long, env = "SSC_CA_FILE", value_name = "FILE")]
    pub(crate) ca_file: Option<std::path::PathBuf>,
    /// Bearer token of the API (every /api/v1 route needs it).
    #[arg(long, env = "SSC_TOKEN", hide_env_values = true)]
    pub(crate) token: Option<String>,
    /// Timeout of each request.
    #[arg(long, env = "SSC_TIMEOUT", default_value = "10s")]
    pub(crate) timeout: humantime::Duration,
    /// Print the API's JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

impl ClientArgs {
    pub(crate) fn client(&self) -> Client {
        let agent = ureq::AgentBuilder::new()
            .timeout(self.timeout.into())
            .tls_connector(std::sync::Arc::new(https::Connector::new(
                self.ca_file.as_deref(),
            )))
            .build();
        Client::with_agent(agent, &self.api.to_string(), self.token.as_deref())
    }
}

pub(crate) fn branch_id(s: &str) -> Result<BranchId, String> {
    let n: u8 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a branch id 1..=250"))?;
    BranchId::new(n).map_err(|e| e.to_string())
}

pub(crate) fn group_id(s: &str) -> Result<PathGroupId, String> {
    let n: u8 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a path group id 0..=15"))?;
    PathGroupId::new(n).map_err(|e| e.to_string())
}

pub(crate) fn port_letter(s: &str) -> Result<PortIndex, String> {
    PortIndex::try_from(s.to_owned()).map_err(|e| e.to_string())
}

pub(crate) fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))
}

pub(crate) fn print_json(v: &Value) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// `POST`/`PUT`/`PATCH` with a typed body; the answer (`null` for `204 No Content`).
pub(crate) fn send<T: serde::Serialize>(
    client: &ClientArgs,
    method: &str,
    path: &str,
    body: &T,
) -> anyhow::Result<Value> {
    let body = serde_json::to_value(body).context("request body")?;
    Ok(client
        .client()
        .call(method, path, Some(&body))?
        .unwrap_or(Value::Null))
}
