//! The MMS binaries as the testbed jobs use them: one cargo build of `mmsg`/`ssc` that returns
//! their paths, `mmsg` configs as serialized [`mpa::config::Config`] values (never hand-written
//! TOML), the TLS material of a run (a CA and one certificate per gateway) and
//! `mmsg status --json`.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{ensure, Context};
use ipnet::{IpNet, Ipv4Net};
use mpa::config::{Auto, Config, StripingConfig, TlsConfig, TlsMode, WanPort};
use serde::Deserialize;
use serde_json::Value;

/// Which cargo profile to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// `cargo build` (fast to build; enough for tunnels of a few tens of Mbit/s).
    Debug,
    /// `cargo build --release` (benchmarks, the whole system).
    Release,
}

/// The packages every build of the MMS binaries selects, whichever binaries it asks for. Cargo
/// unifies the dependencies' features over the selected packages, so a build of `-p
/// mmsg-dataplane` alone, one of `-p mmsg-dataplane -p controller` and `cargo xtask` (`-p xtask`)
/// each compiled the whole dependency tree again (libc, rustls, ring, ... with other features),
/// minutes each. With the same selection everywhere, and `xtask` depending on both (so `cargo
/// xtask` resolves the same features), one release build serves `cargo xtask`, every test and
/// every benchmark. `crates/*/tests/common` select the same packages.
pub const PACKAGES: [&str; 3] = ["xtask", "mmsg-dataplane", "controller"];

/// Builds every `(package, bin)` in **one** cargo run and returns the executables cargo reports,
/// in the same order. The run selects [`PACKAGES`] (`package` must be one of them), so the
/// dependencies' features are the same in every build and nothing is compiled twice.
pub fn build(root: &Path, profile: Profile, bins: &[(&str, &str)]) -> anyhow::Result<Vec<PathBuf>> {
    let mut cmd = crate::sh::cargo();
    cmd.current_dir(root).arg("build");
    if profile == Profile::Release {
        cmd.arg("--release");
    }
    for package in PACKAGES {
        cmd.args(["-p", package]);
    }
    for (package, bin) in bins {
        ensure!(
            PACKAGES.contains(package),
            "{package} is not among the packages every build selects ({PACKAGES:?})"
        );
        cmd.args(["--bin", bin]);
    }
    let out = cmd
        .arg("--message-format=json-render-diagnostics")
        .stderr(Stdio::inherit())
        .output()
        .context("run cargo build")?;
    ensure!(out.status.success(), "cargo build of {bins:?} failed");
    let mut found: BTreeMap<String, PathBuf> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if v.get("reason").and_then(Value::as_str) != Some("compiler-artifact") {
            continue;
        }
        let name = v
            .get("target")
            .and_then(|t| t.get("name"))
            .and_then(Value::as_str);
        if let (Some(name), Some(exe)) = (name, v.get("executable").and_then(Value::as_str)) {
            found.insert(name.to_owned(), PathBuf::from(exe));
        }
    }
    bins.iter()
        .map(|(_, bin)| {
            found
                .get(*bin)
                .cloned()
                .with_context(|| format!("cargo did not report the {bin} executable"))
        })
        .collect()
}

/// Builds `bin` of `package` in release and returns the executable cargo reports.
pub fn build_release(root: &Path, package: &str, bin: &str) -> anyhow::Result<PathBuf> {
    build_one(root, Profile::Release, package, bin)
}

/// Builds `bin` of `package` with `profile` and returns the executable cargo reports.
pub fn build_one(
    root: &Path,
    profile: Profile,
    package: &str,
    bin: &str,
) -> anyhow::Result<PathBuf> {
    let mut v = build(root, profile, &[(package, bin)])?;
    v.pop().context("cargo reported no executable")
}

/// Builds the `mmsg` binary with `profile` and returns its path.
pub fn build_mmsg(root: &Path, profile: Profile) -> anyhow::Result<PathBuf> {
    build_one(root, profile, "mmsg-dataplane", "mmsg")
}

/// `mmsg status --json` of the daemon behind `control`.
pub fn status(mmsg: &Path, control: &Path) -> anyhow::Result<Value> {
    let out = Command::new(mmsg)
        .args(["status", "--json", "--control"])
        .arg(control)
        .output()
        .context("run mmsg status")?;
    ensure!(
        out.status.success(),
        "mmsg status --control {}: {}",
        control.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    serde_json::from_slice(&out.stdout).context("parse mmsg status --json")
}

/// Serial numbers of the gateway certificates [`provision_tls`] issues: this plus the branch id.
/// Far above the serials a controller's CA hands out (2, 3, ... in `ssc`'s store), so a run that
/// shares its CA with `ssc` (`[ca] dir`, as `xtask::e2e` does) never has two certificates with
/// one serial (a revocation of one would revoke both).
pub const PROVISIONED_SERIALS: u64 = 1 << 40;

/// Makes a CA named `ca_name` for the run in `dir` (`ca.pem`, `ca.key`) and issues branch `b`'s
/// gateway certificate (`gw<b>.pem`, `gw<b>.key`; serial [`PROVISIONED_SERIALS`] + b) and an
/// empty CRL (`gw<b>-crl.pem`, its own file as on a real gateway, which rewrites it when the
/// controller pushes a newer list) for each of `branches`; returns each branch's `[tls]` table.
/// Keys are written 0600 (`pki`), as `mmsg` requires.
///
/// The CRLs have `crl_number` 0, so that the first list a controller running this CA signs
/// (number 1) replaces them; a higher number here would make the gateways refuse it as a replay.
pub fn provision_tls(
    dir: &Path,
    ca_name: &str,
    branches: &[u8],
) -> anyhow::Result<BTreeMap<u8, TlsConfig>> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let ca = pki::ca::Ca::generate(ca_name).context("generate the run's CA")?;
    ca.save(&dir.join("ca.pem"), &dir.join("ca.key"))
        .context("save the run's CA")?;
    // An empty CRL of the run's CA: `crl_file` is required with `[controller]` (issue #17).
    let crl = ca.crl(&[], 0).context("sign the run's CRL")?;
    let mut out = BTreeMap::new();
    for &b in branches {
        let id = mpa::BranchId::new(b).with_context(|| format!("branch id {b}"))?;
        let issued = ca
            .issue_gateway(
                id,
                PROVISIONED_SERIALS + u64::from(b),
                pki::ca::DEFAULT_VALIDITY,
            )
            .with_context(|| format!("issue branch {b}'s certificate"))?;
        let (cert, key) = gateway_files(dir, b);
        pki::ca::Ca::save_issued(&issued, &cert, &key)
            .with_context(|| format!("save branch {b}'s certificate"))?;
        let files = tls_files(dir, b);
        if let Some(path) = &files.crl_file {
            pki::files::write_private(path, crl.as_bytes())
                .with_context(|| format!("write {}", path.display()))?;
        }
        out.insert(b, files);
    }
    Ok(out)
}

/// `ssc.toml`'s `[ca]` table that makes `ssc` run the CA [`provision_tls`] wrote in `dir` (with
/// a leading blank line); empty without one (clear tunnels).
pub fn ssc_ca_table(dir: Option<&Path>) -> String {
    dir.map_or(String::new(), |d| {
        format!("\n[ca]\ndir = {:?}\n", d.display().to_string())
    })
}

/// The `[tls]` table of branch `b` for the files [`provision_tls`] wrote in `dir` (with the
/// branch's own CRL file as `crl_file`).
pub fn tls_files(dir: &Path, b: u8) -> TlsConfig {
    let (cert, key) = gateway_files(dir, b);
    TlsConfig {
        crl_file: Some(dir.join(format!("gw{b}-crl.pem"))),
        ..tls(&dir.join("ca.pem"), &cert, &key)
    }
}

/// Certificate and key of gateway `b` in `dir`.
fn gateway_files(dir: &Path, b: u8) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("gw{b}.pem")),
        dir.join(format!("gw{b}.key")),
    )
}

/// `[tls] mode = "clear"`: the explicit opt-out of TLS for deliberate clear runs (e.g. `bench
/// tunnel`'s clear variant). `mmsg run` refuses it unless [`run_flags`] are passed too (issue #17
/// "TLS is the default").
pub fn clear_tls() -> TlsConfig {
    TlsConfig {
        mode: TlsMode::Clear,
        ca_file: None,
        cert_file: None,
        key_file: None,
        crl_file: None,
    }
}

/// The extra `mmsg run` arguments config `c` needs: `--insecure-clear-tunnels` with `[tls] mode =
/// "clear"` (both are needed), none otherwise.
pub fn run_flags(c: &Config) -> &'static [&'static str] {
    match c.tunnel_security(false) {
        Err(mpa::config::TlsPolicyError::ClearWithoutFlag) => &[mpa::config::INSECURE_CLEAR_FLAG],
        _ => &[],
    }
}

/// [`run_flags`] of the config file at `path`.
pub fn run_flags_of(path: &Path) -> anyhow::Result<&'static [&'static str]> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let c = Config::parse(&text).with_context(|| format!("parse {}", path.display()))?;
    Ok(run_flags(&c))
}

/// A `[tls]` table: mutual TLS with these files.
pub fn tls(ca_file: &Path, cert_file: &Path, key_file: &Path) -> TlsConfig {
    TlsConfig {
        mode: TlsMode::Tls,
        ca_file: Some(ca_file.to_owned()),
        cert_file: Some(cert_file.to_owned()),
        key_file: Some(key_file.to_owned()),
        crl_file: None,
    }
}

/// The LAN prefix of branch `b` in the testbed's address plan (`198.19.<b>.0/24`).
pub fn lan_prefix(b: u8) -> IpNet {
    IpNet::V4(Ipv4Net::new(Ipv4Addr::new(198, 19, b, 0), 24).unwrap_or_default())
}

/// A `[[wan]]` port of kind `internet` with the MAC derived from its address.
pub fn wan_port(name: &str, addr: Ipv4Addr, prefix_len: u8, gateway: Ipv4Addr) -> WanPort {
    WanPort {
        name: name.to_owned(),
        address: Ipv4Net::new(addr, prefix_len).unwrap_or_default(),
        gateway,
        kind: mms_types::WanKind::default(),
        mac: None,
        rate_mbit: None,
        nat: false,
    }
}

/// The config of branch `b` with LAN `198.19.<b>.0/24`, these WAN ports and `mpa`'s defaults for
/// everything else (taken from its deserializer, so they cannot drift).
pub fn config(b: u8, wan: Vec<WanPort>) -> anyhow::Result<Config> {
    let mut c = Config::deserialize(serde_json::json!({
        "branch_id": b,
        "lan_prefixes": [lan_prefix(b)],
        "wan": [],
    }))
    .context("the default mmsg config")?;
    c.wan = wan;
    Ok(c)
}

/// `examples/mmsg-branch<b>.toml` of the repository at `root`, parsed.
pub fn example(root: &Path, b: u8) -> anyhow::Result<Config> {
    let path = root.join(format!("examples/mmsg-branch{b}.toml"));
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
    Config::parse(&text).with_context(|| format!("parse {}", path.display()))
}

/// A `[striping]` table for `classes` and `prefixes` above `threshold_kbit`, `mpa`'s defaults
/// for the resequencer.
pub fn striping(
    classes: Vec<mms_types::Class>,
    prefixes: Vec<IpNet>,
    threshold_kbit: u64,
) -> StripingConfig {
    StripingConfig {
        classes,
        prefixes,
        threshold_kbit,
        buffer_frames: mpa::resequencer::DEFAULT_BUFFER_FRAMES,
        lrf: mpa::resequencer::DEFAULT_LRF,
        release_frames: Auto::Auto,
        release_hold_ms: Auto::Auto,
        release_hold_adapt: true,
    }
}

/// [`striping`] of every class to the one LAN host `host`, above `threshold_kbit`.
pub fn stripe_host(host: Ipv4Addr, threshold_kbit: u64) -> StripingConfig {
    striping(
        Vec::new(),
        vec![IpNet::V4(Ipv4Net::from(host))],
        threshold_kbit,
    )
}

/// The TOML text of `c`, after a `# comment` line.
pub fn to_toml(comment: &str, c: &Config) -> anyhow::Result<String> {
    let body = toml::to_string(c).context("serialize the mmsg config")?;
    Ok(format!("# {comment}\n{body}"))
}

/// Writes `c` as TOML to `path` (see [`to_toml`]).
pub fn write_config(path: &Path, comment: &str, c: &Config) -> anyhow::Result<()> {
    std::fs::write(path, to_toml(comment, c)?).with_context(|| format!("write {}", path.display()))
}

/// `BIN run --config CONFIG [its run flags, `run_flags_of`] --control CONTROL EXTRA...` in
/// branch `b`'s gateway namespace of testbed `prefix`, `MMSG_LOG=info`, output into `log`.
pub fn spawn_run(
    prefix: &str,
    b: u8,
    bin: &Path,
    config: &Path,
    control: &Path,
    log: std::fs::File,
    extra: &[&str],
) -> anyhow::Result<std::process::Child> {
    Command::new("ip")
        .args(["netns", "exec", &crate::testbed::ns_gw(prefix, b)])
        .arg(bin)
        .arg("run")
        .arg("--config")
        .arg(config)
        .args(run_flags_of(config)?)
        .arg("--control")
        .arg(control)
        .args(extra)
        .env("MMSG_LOG", "info")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("start mmsg")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    /// Every config xtask writes, by the functions that make them.
    fn every_written_config() -> Vec<(String, Config)> {
        let topo = crate::topology::parse(
            &std::fs::read_to_string(root().join("examples/testbed-paper.toml")).unwrap(),
        )
        .unwrap();
        let dir = Path::new("/tmp/mms-xtask-test");
        let tls_of = |b: u8| tls_files(dir, b);
        let mut out = Vec::new();
        for b in crate::e2e::BRANCHES {
            let mut c = crate::e2e::mmsg_config(&topo, "t1", b, "rr").unwrap();
            out.push((format!("e2e static {b}"), c.clone()));
            c.striping = Some(stripe_host(Ipv4Addr::new(198, 19, 2, 10), 1000));
            c.tls = Some(tls_of(b));
            out.push((format!("e2e static striped tls {b}"), c));
            let cache = dir.join(format!("mmsg-gw{b}-cache.json"));
            let c = crate::e2e::mmsg_controller_config(
                &topo,
                "t1",
                b,
                "throughput",
                &dir.join("ssc-gw.sock"),
                &cache,
            )
            .unwrap();
            out.push((format!("e2e controller {b}"), c));
        }
        for b in [1u8, 2] {
            let mut c = example(&root(), b).unwrap();
            c.tls = Some(tls_of(b));
            out.push((format!("demo/bench tunnel tls {b}"), c));
            for stripe in [false, true] {
                let c =
                    crate::mdi::gateway_config(example(&root(), b).unwrap(), stripe, true, 1000);
                out.push((format!("mdi {b} {stripe}"), c));
            }
        }
        for policy in ["single", "rr", "mbw", "wrr"] {
            let c = crate::uplink_lb::mmsg_config(policy, &[10, 5]).unwrap();
            out.push((format!("uplink-lb {policy}"), c));
        }
        out
    }

    /// "TLS is the default": every config xtask writes with its `[tls]` runs with the flags xtask
    /// passes (TLS, or clear with `--insecure-clear-tunnels`), and the examples run as they are.
    #[test]
    fn every_written_config_passes_the_tls_policy() {
        let mut all = every_written_config();
        all.push(("bench tunnel clear".into(), {
            let mut c = example(&root(), 1).unwrap();
            c.tls = Some(clear_tls());
            c
        }));
        // Only the configs that already carry their `[tls]` here: the base configs of e2e, mdi
        // and uplink-lb get it from their callers (`e2e` start, `mdi::phases`,
        // `uplink_lb::run`), just before they are written.
        for (what, c) in all.into_iter().filter(|(_, c)| c.tls.is_some()) {
            let flag = run_flags(&c) == [mpa::config::INSECURE_CLEAR_FLAG];
            let got = c.tunnel_security(flag);
            assert!(got.is_ok(), "{what}: {got:?}");
        }
        for b in [1u8, 2] {
            let c = example(&root(), b).unwrap();
            assert_eq!(run_flags(&c), [] as [&str; 0]);
            assert_eq!(
                c.tunnel_security(false),
                Ok(mpa::config::TunnelSecurity::Tls)
            );
        }
    }

    #[test]
    fn every_written_config_parses_back_equal() {
        for (what, c) in every_written_config() {
            let text = to_toml("test", &c).unwrap();
            let back = Config::parse(&text).unwrap_or_else(|e| panic!("{what}: {e}\n{text}"));
            assert_eq!(back, c, "{what}:\n{text}");
        }
    }

    #[test]
    fn defaults_come_from_mpa() {
        let c = config(
            3,
            vec![wan_port(
                "wan0",
                Ipv4Addr::new(198, 18, 30, 2),
                24,
                Ipv4Addr::new(198, 18, 30, 1),
            )],
        )
        .unwrap();
        let text = "branch_id = 3\nlan_prefixes = [\"198.19.3.0/24\"]\n[[wan]]\nname = \"wan0\"\n\
                    address = \"198.18.30.2/24\"\ngateway = \"198.18.30.1\"\n";
        assert_eq!(Config::parse(text).unwrap(), c);
        let s = striping(vec![mms_types::Class::TypeII], Vec::new(), 1000);
        let text = format!("{text}[striping]\nclasses = [\"type2\"]\nthreshold_kbit = 1000\n");
        assert_eq!(Config::parse(&text).unwrap().striping, Some(s));
    }
}
