//! The `ssc` binary end to end on loopback: `ssc run` on 127.0.0.1:0 with a temporary database,
//! the client subcommands against it, `ssc check`, and a stop by PID (only the server we started).
// Test helpers outside #[test] functions unwrap too (clippy.toml only covers #[test] bodies).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use controller::inventory::{BranchId, Inventory};
use controller::path_group::PathGroups;
use controller::swap;

const TOKEN: &str = "cli-test-token-0123456789";

fn ssc() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ssc"));
    c.env_remove("SSC_API")
        .env_remove("SSC_TOKEN")
        .env_remove("SSC_CONFIG")
        .env_remove("SSC_LISTEN")
        .env("RUST_LOG", "warn");
    c
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// The server we started; stopped by its PID (SIGTERM) when dropped, even if the test fails.
struct Server {
    child: Child,
    api: String,
}

impl Server {
    fn start(config: &Path) -> Self {
        let mut child = ssc()
            .args(["run", "--config"])
            .arg(config)
            .args(["--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let api = line
            .trim()
            .strip_prefix("ssc: REST API listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        assert!(api.starts_with("http://127.0.0.1:"), "{api}");
        Self { child, api }
    }

    /// SIGTERM to our child's PID, then wait for a clean exit.
    fn stop(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let kill = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(kill.success());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "ssc run did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn client(server: &Server, args: &[&str]) -> Output {
    ssc()
        .args(args)
        .env("SSC_API", &server.api)
        .env("SSC_TOKEN", TOKEN)
        .output()
        .unwrap()
}

fn ok(server: &Server, args: &[&str]) -> String {
    let out = client(server, args);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "ssc {args:?} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn fails(server: &Server, args: &[&str]) -> String {
    let out = client(server, args);
    assert!(!out.status.success(), "ssc {args:?} should fail");
    String::from_utf8(out.stderr).unwrap()
}

fn write_config(dir: &Path) -> PathBuf {
    std::fs::write(dir.join("ssc.token"), format!("{TOKEN}\n")).unwrap();
    let config = dir.join("ssc.toml");
    std::fs::write(
        &config,
        "[api]\nlisten = \"127.0.0.1:0\"\ntoken_file = \"ssc.token\"\n\n[database]\npath = \"inventory.redb\"\n",
    )
    .unwrap();
    config
}

#[test]
fn cli_scenario_against_a_running_server() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let inventory = examples().join("inventory-paper.toml");
    let paths = examples().join("paths-paper-table2.toml");

    let mut server = Server::start(&config);

    // Health needs no token; the API refuses a missing or wrong one.
    let out = ssc()
        .args(["health", "--api", &server.api])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"status\": \"ok\""));
    let out = ssc()
        .args(["branch", "list", "--api", &server.api])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("HTTP 401: missing bearer token"), "{err}");
    // Typed flags: an out-of-range id never reaches the API.
    let err = fails(&server, &["flows", "--branch", "251"]);
    assert!(
        err.contains("branch id 251 is out of range 1..=250"),
        "{err}"
    );
    let err = fails(
        &server,
        &[
            "path-group",
            "set",
            "--source",
            "1",
            "--destination",
            "2",
            "--group",
            "1",
            "1a>2",
        ],
    );
    assert!(err.contains("\"1a>2\""), "{err}");
    let out = ssc()
        .args([
            "branch",
            "list",
            "--api",
            &server.api,
            "--token",
            "wrong-token-0123456789",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("HTTP 401"));

    // Import the paper topology.
    let out = ok(
        &server,
        &[
            "import",
            "--inventory",
            inventory.to_str().unwrap(),
            "--paths",
            paths.to_str().unwrap(),
        ],
    );
    assert_eq!(
        out.trim(),
        "imported: 5 branches, 10 WAN ports, 4 path groups, 140 flows"
    );

    // List branches.
    let out = ok(&server, &["branch", "list"]);
    assert!(
        out.contains("branch 1 \"branch-1\" lan [198.19.1.0/24]"),
        "{out}"
    );
    assert!(
        out.contains("port 3b Internet 198.18.31.2/24 via 198.18.31.1 40 Mbit/s"),
        "{out}"
    );
    assert!(out.trim_end().ends_with("5 branches"), "{out}");
    let json: serde_json::Value =
        serde_json::from_str(&ok(&server, &["branch", "list", "--json"])).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 5);

    // Set a path group: Fig. 4(b)'s group 4 (replaces Table II's group 4).
    let out = ok(
        &server,
        &[
            "path-group",
            "set",
            "--source",
            "1",
            "--destination",
            "2",
            "--group",
            "4",
            "1a>3a>3a>2a",
            "1b>4a>4b>2a",
            "1a>5a>5a>2b",
            "1b>2b",
        ],
    );
    assert!(out.contains("path group 1>2 #4"), "{out}");
    assert!(out.contains("4 0x2144 1b>2b (1 WAN hops)"), "{out}");
    let out = ok(
        &server,
        &["path-group", "list", "--source", "1", "--destination", "2"],
    );
    assert!(out.trim_end().ends_with("4 path groups"), "{out}");
    let err = fails(
        &server,
        &[
            "path-group",
            "set",
            "--source",
            "1",
            "--destination",
            "2",
            "--group",
            "5",
            "1a>2a",
            "1a>2a",
        ],
    );
    assert!(
        err.contains("HTTP 422") && err.contains("both use the address pair"),
        "{err}"
    );

    // Compiled flows of branch 1: the same count as swap::compile of the same groups.
    let inv = Inventory::from_toml(&std::fs::read_to_string(&inventory).unwrap()).unwrap();
    let mut file = std::fs::read_to_string(&paths).unwrap();
    file = file.replace(
        "members = [\"1b>2b\", \"1a>3b>3a>2b\", \"1a>4a>4b>2a\", \"1b>5a>5b>2a\"]",
        "members = [\"1a>3a>3a>2a\", \"1b>4a>4b>2a\", \"1a>5a>5a>2b\", \"1b>2b\"]",
    );
    let groups = PathGroups::from_toml(&inv, &file).unwrap();
    let tables = swap::compile(&inv, &groups).unwrap();
    let b1 = tables.switch(BranchId::new(1).unwrap());
    let out = ok(&server, &["flows", "--branch", "1", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["count"], b1.len());
    assert_eq!(v["flows"].as_array().unwrap().len(), b1.len());
    let text = ok(&server, &["flows", "--branch", "1"]);
    for f in b1 {
        assert!(text.contains(&f.to_ofctl()), "missing {}", f.to_ofctl());
    }
    assert!(text
        .trim_end()
        .ends_with(&format!("{} flows on branch 1", b1.len())));

    // Branch and port operations.
    ok(
        &server,
        &[
            "branch",
            "add",
            "--id",
            "6",
            "--name",
            "branch-6",
            "--lan",
            "198.19.6.0/24",
            "--address",
            "198.18.60.2/24",
            "--gateway",
            "198.18.60.1",
            "--capacity-mbps",
            "40",
        ],
    );
    ok(
        &server,
        &[
            "port",
            "add",
            "--branch",
            "6",
            "--address",
            "198.18.61.2/24",
            "--gateway",
            "198.18.61.1",
            "--capacity-mbps",
            "20",
            "--kind",
            "internet",
        ],
    );
    let out = ok(
        &server,
        &[
            "port",
            "modify",
            "--branch",
            "6",
            "--port",
            "b",
            "--capacity-mbps",
            "25",
        ],
    );
    assert!(out.contains("\"capacity_mbps\": 25"), "{out}");
    ok(
        &server,
        &["branch", "modify", "--branch", "6", "--name", "six"],
    );
    assert!(ok(&server, &["branch", "show", "--branch", "6"]).contains("\"six\""));
    let err = fails(&server, &["port", "remove", "--branch", "6", "--port", "a"]);
    assert!(
        err.contains("only the last WAN port `b` can be removed"),
        "{err}"
    );
    ok(&server, &["port", "remove", "--branch", "6", "--port", "b"]);
    let err = fails(&server, &["branch", "remove", "--branch", "3"]);
    assert!(
        err.contains("HTTP 409") && err.contains("is used by path groups"),
        "{err}"
    );
    ok(&server, &["branch", "remove", "--branch", "6"]);
    let err = fails(
        &server,
        &[
            "branch",
            "add",
            "--id",
            "7",
            "--name",
            "x",
            "--address",
            "198.18.10.2/24",
            "--gateway",
            "198.18.10.1",
            "--capacity-mbps",
            "1",
        ],
    );
    assert!(
        err.contains("WAN address 198.18.10.2 is used by ports 1a and 7a"),
        "{err}"
    );
    ok(
        &server,
        &[
            "path-group",
            "remove",
            "--source",
            "1",
            "--destination",
            "2",
            "--group",
            "1",
        ],
    );
    let out = ok(&server, &["settings", "set", "--groups-per-pair", "3"]);
    assert!(out.contains("\"groups_per_pair\": 3"), "{out}");
    // The OFC runs with `ssc run`: the SDC answers, with no switch connected yet.
    let stats: serde_json::Value =
        serde_json::from_str(&ok(&server, &["stats", "--json"])).unwrap();
    assert_eq!(stats["available"], true, "{stats}");
    assert_eq!(stats["branches"], serde_json::json!([]), "{stats}");
    assert_eq!(ok(&server, &["stats"]), "no switch has connected yet\n");
    // `ssc status` (issue #19): one screen, problems first; no gateway has registered yet.
    let status = ok(&server, &["status"]);
    let problems = status.find("problems:").unwrap();
    let table = status.find("BRANCH").unwrap();
    let never = status.find("gateway never registered").unwrap();
    assert!(problems < never && never < table, "{status}");
    assert!(status.contains("0 gateways connected"), "{status}");
    assert!(!status.contains('\u{1b}'), "{status}");
    // `GET /metrics` of the running ssc: refused without the token; with it, OpenMetrics for
    // Prometheus (strict reader) and the classic format for curl (promtool, when installed).
    let url = format!("{}/metrics", server.api);
    let curl = |args: &[&str]| {
        Command::new("curl")
            .args(["-s", "-o", "-", "-w", "\n%{http_code}"])
            .args(args)
            .arg(&url)
            .output()
            .unwrap()
    };
    let denied = String::from_utf8(curl(&[]).stdout).unwrap();
    assert!(denied.ends_with("\n401"), "{denied}");
    let bearer = format!("Authorization: Bearer {TOKEN}");
    let om = String::from_utf8(
        curl(&["-H", &bearer, "-H", "Accept: application/openmetrics-text"]).stdout,
    )
    .unwrap();
    let om = om.strip_suffix("\n200").unwrap_or_else(|| panic!("{om}"));
    let (_, samples) = controller::metrics::check(om).unwrap_or_else(|e| panic!("{e}\n{om}"));
    assert_eq!(
        controller::metrics::value_of(&samples, "mms_build_info", &[("component", "ssc")]),
        Some(1.0)
    );
    assert!(
        samples
            .iter()
            .any(|(n, ..)| n == "mms_path_group_weight_ratio"),
        "{om}"
    );
    let classic = String::from_utf8(curl(&["-H", &bearer]).stdout).unwrap();
    let classic = classic
        .strip_suffix("\n200")
        .unwrap_or_else(|| panic!("{classic}"));
    if let Ok(mut p) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        use std::io::Write;
        p.stdin
            .take()
            .unwrap()
            .write_all(classic.as_bytes())
            .unwrap();
        let out = p.wait_with_output().unwrap();
        assert!(out.status.success(), "promtool: {out:?}\n{classic}");
    }
    let exported = ok(&server, &["export"]);
    assert_eq!(Inventory::from_toml(&exported).unwrap(), inv);

    // `ssc check` cannot open the database while the server holds it, and says so.
    let out = ssc()
        .args(["check", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());

    let status = server.stop();
    assert!(status.success(), "ssc run exited with {status}");

    // Stopped: the database checks out with what the CLI did.
    let out = ssc()
        .args(["check", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!(
            "ok (schema v{}, 5 branches, 10 WAN ports, 3 path groups, ",
            controller::store::SCHEMA_VERSION
        )),
        "{stdout}"
    );

    // Restarted on the same file: everything is still there.
    let server = Server::start(&config);
    let out = ok(&server, &["path-group", "list"]);
    assert!(out.trim_end().ends_with("3 path groups"), "{out}");
    let v: serde_json::Value =
        serde_json::from_str(&ok(&server, &["flows", "--branch", "1", "--json"])).unwrap();
    assert!(v["count"].as_u64().unwrap() > 4);
    let mut server = server;
    assert!(server.stop().success());
}

#[test]
fn check_reports_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    // No database yet.
    let out = ssc()
        .args(["check", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("does not exist (`ssc run` creates it)"),
        "{err}"
    );
    // Config only is fine.
    let out = ssc()
        .args(["check", "--config-only", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(out.status.success());
    // Unknown key.
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[api]\nlisten = \"127.0.0.1:0\"\nport = 1\n").unwrap();
    let out = ssc()
        .args(["check", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown field `port`"), "{err}");
    // No token.
    let no_token = dir.path().join("no-token.toml");
    std::fs::write(&no_token, "[database]\npath = \"x.redb\"\n").unwrap();
    let out = ssc()
        .args(["run", "--config"])
        .arg(&no_token)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no API token"), "{err}");
    assert!(
        !dir.path().join("x.redb").exists(),
        "nothing created without a token"
    );
    // A short token.
    let out = ssc()
        .args(["check", "--config-only", "--config"])
        .arg(&config)
        .env("SSC_TOKEN", "short")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("use at least 16"));
}

#[test]
fn ssc_weights_prints_the_published_weights() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let server = Server::start(&config);

    assert_eq!(ok(&server, &["weights"]).trim(), "no path groups");
    let inv = examples().join("inventory-paper.toml");
    let paths = examples().join("paths-paper-table2.toml");
    ok(
        &server,
        &[
            "import",
            "--inventory",
            inv.to_str().unwrap(),
            "--paths",
            paths.to_str().unwrap(),
        ],
    );
    // No traffic (no switch connected): configured capacities, 4 × 80 Mbit/s → equal.
    let text = ok(&server, &["weights"]);
    assert_eq!(
        text.trim_end(),
        " 1 -> 2  configured g1=250 g2=250 g3=250 g4=250 (of 1000)"
    );
    let v: serde_json::Value = serde_json::from_str(&ok(&server, &["weights", "--json"])).unwrap();
    assert_eq!(v["measured"], true, "ssc run feeds the SDC's rates");
    assert_eq!(v["pairs"][0]["groups"][3]["weight"], 250);
    let v: serde_json::Value = serde_json::from_str(&ok(
        &server,
        &["weights", "--source", "1", "--destination", "2", "--json"],
    ))
    .unwrap();
    assert_eq!(v["basis"], "configured");
    assert_eq!(v["scale"], 1000);
    let err = fails(&server, &["weights", "--source", "2", "--destination", "1"]);
    assert!(
        err.contains("no path groups from branch 2 to branch 1"),
        "{err}"
    );
}

/// The commands the scenario above does not reach: tokens, the gateway CA, gateways, adaptive
/// path groups and its settings, a branch from a file, a port that lacks fields.
#[test]
fn credential_status_and_file_commands() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let mut server = Server::start(&config);
    let inventory = examples().join("inventory-paper.toml");
    ok(
        &server,
        &["import", "--inventory", inventory.to_str().unwrap()],
    );

    // A branch from a TOML file.
    let file = dir.path().join("b7.toml");
    std::fs::write(
        &file,
        "id = 7\nname = \"seven\"\nlan = [\"198.19.7.0/24\"]\n[[wan]]\nport = \"a\"\naddress = \"198.18.70.2/24\"\ngateway = \"198.18.70.1\"\ncapacity_mbps = 10\n",
    )
    .unwrap();
    let out = ok(
        &server,
        &["branch", "add", "--file", file.to_str().unwrap()],
    );
    assert_eq!(
        out,
        "branch 7 \"seven\" lan [198.19.7.0/24]\n  port 7a Internet 198.18.70.2/24 via 198.18.70.1 10 Mbit/s mac - gateway_mac -\n"
    );
    // A new port needs its address, gateway and capacity.
    let err = fails(
        &server,
        &[
            "port",
            "add",
            "--branch",
            "7",
            "--address",
            "198.18.71.2/24",
        ],
    );
    assert!(
        err.contains("--gateway") && err.contains("--capacity-mbps"),
        "{err}"
    );

    // Adaptive path groups and their settings.
    assert!(ok(&server, &["adaptive"]).starts_with("adaptive path groups: off\n"));
    let out = ok(
        &server,
        &[
            "settings",
            "set",
            "--adaptive",
            "true",
            "--lambda",
            "0.7",
            "--min-groups",
            "2",
            "--retire-after",
            "30",
            "--allow-transit",
            "false",
        ],
    );
    let s: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(s["adaptive"]["enabled"], true, "{s}");
    assert_eq!(s["adaptive"]["lambda"], 0.7, "{s}");
    assert_eq!(s["adaptive"]["min_groups"], 2, "{s}");
    assert_eq!(s["adaptive"]["retire_after_s"], 30.0, "{s}");
    assert_eq!(s["allow_transit"], false, "{s}");
    assert_eq!(
        s["groups_per_pair"], 4,
        "absent flags keep their value: {s}"
    );
    assert!(ok(&server, &["adaptive"]).starts_with("adaptive path groups: on\n"));

    // Gateways: none registered.
    let out = ok(&server, &["gateways"]);
    assert_eq!(
        out,
        "no gateways registered\nrefused: 0 unknown branch, 0 other; 0 sessions replaced\n"
    );

    // The gateway CA: an enrolment token, revocation, the certificates.
    let out = ok(&server, &["enrol-token", "--branch", "1", "--ttl", "2h"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(
        lines[1].starts_with("# branch 1, expires ")
            && lines[1].contains("single use; CA fingerprint "),
        "{out}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&ok(&server, &["revoke", "--branch", "2"])).unwrap();
    assert_eq!(v["revoked"], serde_json::json!([]), "{v}");
    let v: serde_json::Value =
        serde_json::from_str(&ok(&server, &["revoke", "--serial", "999"])).unwrap();
    assert_eq!(v["revoked"], serde_json::json!([]), "{v}");
    let v: serde_json::Value = serde_json::from_str(&ok(&server, &["certificates"])).unwrap();
    assert!(v["certificates"].is_array(), "{v}");
    let out = ok(
        &server,
        &["ca", "init", "--config", config.to_str().unwrap()],
    );
    assert!(out.starts_with("CA exists in "), "{out}");

    // REST tokens.
    let out = ok(
        &server,
        &[
            "token",
            "add",
            "--name",
            "ops",
            "--role",
            "read-only",
            "--ttl",
            "1h",
        ],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0].len(), 64, "{out}");
    assert!(
        lines[1].starts_with("# token \"ops\" (read-only, expires 20")
            && lines[1].ends_with("); shown once, only its hash is stored"),
        "{out}"
    );
    let out = ok(
        &server,
        &[
            "token", "add", "--name", "forever", "--role", "admin", "--ttl", "never",
        ],
    );
    assert!(
        out.ends_with(
            "\n# token \"forever\" (admin, never expires); shown once, only its hash is stored\n"
        ),
        "{out}"
    );
    let err = fails(
        &server,
        &[
            "token", "add", "--name", "x", "--role", "admin", "--ttl", "0s",
        ],
    );
    assert!(err.contains("must be at least 1s (or never)"), "{err}");
    let out = ok(&server, &["token", "list"]);
    let mut lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(
        lines[0].starts_with("name") && lines[0].ends_with("state"),
        "{out}"
    );
    // The config's bootstrap token, recorded at the first `ssc run` with its 24 h expiry.
    assert!(
        lines[1].starts_with("bootstrap ")
            && lines[1].contains(" admin ")
            && !lines[1].contains(" never ")
            && lines[1].ends_with(" valid"),
        "{out}"
    );
    lines.remove(1);
    assert!(
        lines[1].starts_with("forever ")
            && lines[1].contains(" admin ")
            && lines[1].contains(" never ")
            && lines[1].ends_with(" valid"),
        "{out}"
    );
    assert!(
        lines[2].starts_with("ops ") && lines[2].contains(" read-only "),
        "{out}"
    );
    assert_eq!(
        ok(&server, &["token", "remove", "--name", "ops"]),
        "token \"ops\" removed\n"
    );
    let v: serde_json::Value =
        serde_json::from_str(&ok(&server, &["token", "list", "--json"])).unwrap();
    let names: Vec<&str> = v["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bootstrap", "forever"], "{v}");
    assert!(server.stop().success());
}

/// Reads ssc's machine-readable stdout lines until the `ssl:` one (the last).
fn startup_lines(child: &mut Child) -> Vec<String> {
    let stdout = child.stdout.take().unwrap();
    let mut r = BufReader::new(stdout);
    let mut lines = Vec::new();
    for _ in 0..5 {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        lines.push(l.trim().to_owned());
    }
    lines
}

/// Stops our child by its PID.
fn stop_child(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}

/// Issue #17: no clear OpenFlow TCP listener unless asked for; when asked for, a WARN says so.
/// ssc runs in a network namespace of its own (`unshare --net`), so port 6653 is ours to probe:
/// a connect to it is refused.
#[test]
fn openflow_clear_listener_is_off_by_default_and_warns_when_on() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let mut child = Command::new("unshare")
        .args([
            "--net",
            "sh",
            "-c",
            "ip link set lo up && exec \"$0\" \"$@\"",
        ])
        .arg(env!("CARGO_BIN_EXE_ssc"))
        .args(["run", "--config"])
        .arg(&config)
        .args(["--listen", "127.0.0.1:8080"])
        .env_remove("SSC_OPENFLOW_LISTEN")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = startup_lines(&mut child);
    assert!(
        lines.contains(&"ssc: OpenFlow listening on tcp:-".to_owned()),
        "{lines:?}"
    );
    let probe = |port: u16| {
        Command::new("nsenter")
            .args(["-t", &child.id().to_string(), "-n", "bash", "-c"])
            .arg(format!("exec 3<>/dev/tcp/127.0.0.1/{port}"))
            .output()
            .unwrap()
    };
    let rest = probe(8080);
    assert!(
        rest.status.success(),
        "control: the REST port answers: {rest:?}"
    );
    for port in [6653, 6633] {
        let of = probe(port);
        assert!(!of.status.success(), "something listens on {port}");
        assert!(
            String::from_utf8_lossy(&of.stderr).contains("refused"),
            "{port}: {}",
            String::from_utf8_lossy(&of.stderr)
        );
    }
    stop_child(&mut child);
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!err.contains("clear TCP listener"), "{err}");

    // Asked for: it listens and warns.
    let mut child = ssc()
        .args(["run", "--config"])
        .arg(&config)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--openflow-listen",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = startup_lines(&mut child);
    let of = lines
        .iter()
        .find_map(|l| l.strip_prefix("ssc: OpenFlow listening on tcp:"))
        .unwrap()
        .to_owned();
    assert!(of.starts_with("127.0.0.1:"), "{lines:?}");
    stop_child(&mut child);
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    let warn: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("OpenFlow clear TCP listener enabled"))
        .collect();
    assert_eq!(warn.len(), 1, "{err}");
    assert!(
        warn[0].contains("WARN") && warn[0].contains("UNAUTHENTICATED"),
        "{}",
        warn[0]
    );
    assert!(
        warn[0].contains(&of),
        "the line names the address: {}",
        warn[0]
    );
}

/// `api.rest_tls`: `ssc run` serves HTTPS (its stdout line says so); curl trusting the CA gets
/// `/health`, curl without it is refused.
#[test]
fn ssc_serves_rest_over_tls_with_rest_tls() {
    let dir = tempfile::tempdir().unwrap();
    let ca = pki::ca::Ca::generate("rest test CA").unwrap();
    let issued = ca
        .issue_server("ssc.mms", 9, Duration::from_secs(86_400))
        .unwrap();
    std::fs::write(dir.path().join("rest.pem"), &issued.cert_pem).unwrap();
    pki::files::write_private(&dir.path().join("rest.key"), issued.key_pem.as_bytes()).unwrap();
    std::fs::write(dir.path().join("ca.pem"), ca.cert_pem()).unwrap();
    std::fs::write(dir.path().join("ssc.token"), format!("{TOKEN}\n")).unwrap();
    let config = dir.path().join("ssc.toml");
    std::fs::write(
        &config,
        "[api]\nlisten = \"127.0.0.1:0\"\ntoken_file = \"ssc.token\"\n\
         rest_tls = { cert_file = \"rest.pem\", key_file = \"rest.key\" }\n\n\
         [database]\npath = \"inventory.redb\"\n",
    )
    .unwrap();
    let mut child = ssc()
        .args(["run", "--config"])
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let lines = startup_lines(&mut child);
    let port = lines[0]
        .strip_prefix("ssc: REST API listening on https://127.0.0.1:")
        .unwrap_or_else(|| panic!("{lines:?}"))
        .to_owned();
    let curl = |extra: &[&str]| {
        Command::new("curl")
            .args(["-sS", "--max-time", "10", "--resolve"])
            .arg(format!("ssc.mms:{port}:127.0.0.1"))
            .args(extra)
            .arg(format!("https://ssc.mms:{port}/health"))
            .output()
            .unwrap()
    };
    let ca_file = dir.path().join("ca.pem").display().to_string();
    let trusted = curl(&["--cacert", &ca_file]);
    let body = String::from_utf8_lossy(&trusted.stdout);
    assert!(trusted.status.success(), "{trusted:?}");
    assert!(body.contains("\"status\":\"ok\""), "{body}");
    let untrusted = curl(&[]);
    assert!(
        !untrusted.status.success(),
        "a client that does not trust the CA got in"
    );
    stop_child(&mut child);
}

/// Issue #19: `--log-format json` makes every log line of `ssc run` one JSON object; the text
/// format written to a pipe has no ANSI escape.
#[test]
fn logs_are_json_lines_or_plain_text_without_escapes() {
    for format in ["json", "text"] {
        let dir = tempfile::tempdir().unwrap();
        let config = write_config(dir.path());
        let mut child = Command::new("unshare")
            .args([
                "--net",
                "sh",
                "-c",
                "ip link set lo up && exec \"$0\" \"$@\"",
            ])
            .arg(env!("CARGO_BIN_EXE_ssc"))
            .args(["--log-format", format, "run", "--config"])
            .arg(&config)
            .args(["--listen", "127.0.0.1:8080"])
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let _ = startup_lines(&mut child);
        stop_child(&mut child);
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert!(!err.trim().is_empty(), "{format}: no log line");
        assert!(
            !err.contains('\u{1b}'),
            "{format}: ANSI escape in piped logs: {err}"
        );
        if format == "json" {
            for line in err.lines() {
                let v: serde_json::Value =
                    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
                assert!(v["level"].is_string(), "{line}");
                assert!(v["fields"]["message"].is_string(), "{line}");
            }
        }
    }
}
