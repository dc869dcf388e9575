//! A real browser for tests: headless Chromium (Debian's `chromium`) started with its DevTools
//! protocol on a free loopback port and a throwaway profile, one page driven over a WebSocket
//! ([`Cdp`]: navigate, evaluate JavaScript, type text, take screenshots), stopped by its PID.
//! Shared by `crates/controller/tests/dashboard.rs` and `xtask/tests/dashboard_e2e.rs` (which
//! includes this file by path).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The member path rows of the dashboard's table: code, forward bit/s, cell texts.
pub const MEMBER_ROWS: &str = "JSON.stringify([...document.querySelectorAll('#members-table tbody tr')].map(r => ({code: r.dataset.code, bps: Number(r.dataset.fwdBps), cells: [...r.cells].map(c => c.textContent)})))";

/// A child process we started, stopped by its PID when dropped (even when the test fails).
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.0.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(5);
            while self.0.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

pub fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(x) = f() {
            return x;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A DevTools protocol session with one page.
pub struct Cdp {
    ws: tungstenite::WebSocket<TcpStream>,
    id: u64,
}

impl Cdp {
    pub fn connect(url: &str) -> Self {
        let hostport = url.trim_start_matches("ws://").split('/').next().unwrap();
        let stream = TcpStream::connect(hostport).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let (ws, _) = tungstenite::client(url, stream).unwrap();
        Self { ws, id: 0 }
    }

    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.id += 1;
        let msg = json!({"id": self.id, "method": method, "params": params});
        self.ws
            .send(tungstenite::Message::text(msg.to_string()))
            .unwrap();
        loop {
            let m = self.ws.read().unwrap();
            let tungstenite::Message::Text(t) = m else {
                continue;
            };
            let v: Value = serde_json::from_str(t.as_str()).unwrap();
            if v["id"] == self.id {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    /// Evaluates `expr` in the page (awaiting a promise) and returns its JSON value.
    pub fn eval(&mut self, expr: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(r.get("exceptionDetails").is_none(), "{expr}: {r}");
        r["result"]["value"].clone()
    }

    pub fn wait_eval(&mut self, what: &str, expr: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let v = self.eval(expr);
            if v != Value::Null && v != Value::Bool(false) {
                return v;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

pub fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let bytes: Vec<u8> = s.bytes().filter(|&c| c != b'=').map(val).collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (18 - 6 * i));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

/// Starts headless Chromium at 1366x768 with its DevTools on a free loopback port.
pub fn chromium(profile: &Path) -> (Proc, Cdp) {
    let bin = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("chromium is not installed (apt-get install chromium, or cargo xtask deps)");
    let child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--force-device-scale-factor=1",
            "--window-size=1366,768",
            "--remote-debugging-port=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("about:blank")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let proc = Proc(child);
    let port_file = profile.join("DevToolsActivePort");
    let port: u16 = wait_for("DevToolsActivePort", Duration::from_secs(60), || {
        std::fs::read_to_string(&port_file)
            .ok()?
            .lines()
            .next()?
            .trim()
            .parse()
            .ok()
    });
    let list_url = format!("http://127.0.0.1:{port}/json/list");
    let ws = wait_for("a page target", Duration::from_secs(30), || {
        let list: Value = ureq::get(&list_url).call().ok()?.into_json().ok()?;
        list.as_array()?
            .iter()
            .find(|t| t["type"] == "page")
            .and_then(|t| t["webSocketDebuggerUrl"].as_str().map(str::to_owned))
    });
    (proc, Cdp::connect(&ws))
}
