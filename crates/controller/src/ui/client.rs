//! A small blocking client of the REST API, used by the `ssc` CLI subcommands.
use std::time::Duration;

use serde_json::Value;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The API answered with an error status; `message` is its `error` text.
    #[error("{method} {path}: HTTP {status}: {message}")]
    Status {
        /// Method.
        method: String,
        /// Path.
        path: String,
        /// HTTP status.
        status: u16,
        /// The API's message.
        message: String,
    },
    /// No answer (connection refused, timeout, DNS, ...).
    #[error("{method} {url}: {reason} (is `ssc run` listening there? see --api / SSC_API)")]
    Transport {
        /// Method.
        method: String,
        /// Full URL.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// An answer that is not the JSON we expect.
    #[error("{method} {path}: bad response body: {reason}")]
    Body {
        /// Method.
        method: String,
        /// Path.
        path: String,
        /// What went wrong.
        reason: String,
    },
}

/// A client of one `ssc` API.
#[derive(Debug)]
pub struct Client {
    agent: ureq::Agent,
    base: String,
    auth: Option<String>,
}

impl Client {
    /// A client of the API at `base` (e.g. `http://127.0.0.1:8080`) with bearer `token` (none
    /// for the public routes: the API answers 401 on the others).
    pub fn new(base: &str, token: Option<&str>, timeout: Duration) -> Self {
        Self {
            agent: ureq::AgentBuilder::new().timeout(timeout).build(),
            base: base.trim_end_matches('/').to_owned(),
            auth: token.map(|t| format!("Bearer {t}")),
        }
    }

    /// [`Client::new`] with a prepared `agent` (its timeout, its TLS connector for https://).
    pub fn with_agent(agent: ureq::Agent, base: &str, token: Option<&str>) -> Self {
        Self {
            agent,
            base: base.trim_end_matches('/').to_owned(),
            auth: token.map(|t| format!("Bearer {t}")),
        }
    }

    /// `GET path`, the JSON answer.
    pub fn get(&self, path: &str) -> Result<Value, ClientError> {
        self.call("GET", path, None)
            .map(|v| v.unwrap_or(Value::Null))
    }

    /// Any method with an optional JSON body; `None` for `204 No Content`.
    pub fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Option<Value>, ClientError> {
        let url = format!("{}{path}", self.base);
        let mut req = self.agent.request(method, &url);
        if let Some(auth) = &self.auth {
            req = req.set("Authorization", auth);
        }
        let result = match body {
            Some(b) => req.send_json(b),
            None => req.call(),
        };
        let bad_body = |reason: String| ClientError::Body {
            method: method.to_owned(),
            path: path.to_owned(),
            reason,
        };
        match result {
            Ok(resp) if resp.status() == 204 => Ok(None),
            Ok(resp) => resp
                .into_json::<Value>()
                .map(Some)
                .map_err(|e| bad_body(e.to_string())),
            Err(ureq::Error::Status(status, resp)) => {
                let text = resp.into_string().unwrap_or_default();
                let message = serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_owned))
                    .unwrap_or(text);
                Err(ClientError::Status {
                    method: method.to_owned(),
                    path: path.to_owned(),
                    status,
                    message,
                })
            }
            Err(ureq::Error::Transport(t)) => Err(ClientError::Transport {
                method: method.to_owned(),
                url,
                reason: t.to_string(),
            }),
        }
    }
}
