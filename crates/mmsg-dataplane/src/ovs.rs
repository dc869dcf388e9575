//! The gateway's Open vSwitch (the paper's OFS), set up by `mmsg run` when the config has `[ovs]`
//! (DESIGN §2, §4; the contract of docs/ofc.md §9; docs/e2e.md).
//!
//! Before any socket binds, [`setup`]:
//! 1. checks that OVS is there and answering (`ovs-vsctl --db=DB --timeout=5 show`), else refuses
//!    to start, naming what is missing;
//! 2. in one idempotent `ovs-vsctl` transaction (`--may-exist`, settings replaced): bridge with
//!    `datapath_type=netdev protocols=OpenFlow13 fail_mode=secure
//!    other-config:datapath-id=<branch id, 16 hex digits>`, port `wan{k}` (the config's WAN
//!    interface k) with `ofport_request=1+k`, internal port `mpa{k}` with `ofport_request=101+k`,
//!    and the controller target;
//! 3. moves WAN address p_k from `wan{k}` to `mpa{k}` (MAC `[[wan]] mac`, default
//!    `02:00` + the address), `ip link set wan{k} arp off` (docs/ofc.md §9: otherwise the kernel
//!    answers ARP for p_k on the veth too), `ethtool -K wan{k} tx off` (DESIGN §4), and routes
//!    the main default route through `mpa0`.
//!
//! It returns the config as the rest of `mmsg` must see it: `wan[k].name` is now `mpa{k}`, the
//! interface that carries p_k, so policy routing (`crate::setup`), subflow creation (interface
//! index) and kernel PM endpoints use it unchanged.
//!
//! **Bridge lifetime** ([`crate::ovs_reuse`], docs/mmsg.md "Restart"). By default nothing of
//! this is undone on exit: the bridge, its flows, the controller and SSL settings and the
//! addresses on `mpa{k}` stay, so the switch keeps forwarding while `mmsg` restarts, and the next
//! start verifies and reconciles them instead of rebuilding. With `mmsg run --remove-bridge` the
//! old undo runs on exit (recorded in [`Undo`] before each change is made, run in reverse):
//! `arp on`, the address back on `wan{k}`, the default routes of table 100+k and of the main
//! table via `wan{k}`, then the bridge is deleted; `mmsg down --config FILE` does the same for a
//! stopped gateway. A start after a crash finds the bridge and the moved addresses and converges
//! to the same state either way.
//!
//! **OpenFlow over TLS** (`controller = "ssl:HOST:PORT"`, docs/ofc.md §6). OVS then needs the
//! gateway's own `[tls]` credentials ([`configure_ssl`], before the bridge transaction; `mmsg`
//! refuses to start without `[tls]`). ovs-vswitchd 3.1 re-reads its SSL files on every trip
//! through its main loop when their name or mtime changed (`bridge_run`, `update_ssl_config`),
//! but it loads the key and the certificate separately when only one of them changed, and the
//! renewal writes the key first: a loop in between would pair the new key with the old
//! certificate, which OpenSSL refuses (and drops the other half). So OVS never gets the `[tls]`
//! paths themselves: [`configure_ssl`] checks the key, certificate and CA together
//! (`Credentials::from_pem`), copies them into `<key dir>/ovs-ssl/{key,cert,ca}-<serial>.pem`
//! (0600, atomic) and points OVS at the copies with one `ovs-vsctl set-ssl`, so new names arrive
//! in one database change and OVS loads them together. `mmsg` runs it again after every
//! successful reload (SIGHUP, automatic renewal): the next OpenFlow connection presents the
//! renewed certificate; the established one keeps the certificate it was opened with. Copies of
//! older serials are removed; `del-ssl` on exit.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use mpa::config::{Config, OvsConfig};
use mpa::BranchId;
use pki::tls::TlsFiles;
use tracing::{info, warn};

pub use crate::ovs_reuse::{datapath_id, mpa_iface, MPA_OFPORT_BASE, WAN_OFPORT_BASE};
use crate::setup::{self, Undo, TABLE_BASE};

/// How long ovs-vswitchd may take to create an internal port's kernel device (tap).
const PORT_APPEAR_TIMEOUT: Duration = Duration::from_secs(10);

/// The directory (next to the `[tls]` key file) of OVS's copies of the credentials.
pub const SSL_DIR: &str = "ovs-ssl";

/// Whether the OpenFlow controller target is TLS (`ssl:HOST:PORT`).
pub fn wants_ssl(ovs: &OvsConfig) -> bool {
    ovs.controller.starts_with("ssl:")
}

/// OVS's copies of the key, certificate and CA of certificate `serial`.
pub fn ssl_paths(files: &TlsFiles, serial: u64) -> [std::path::PathBuf; 3] {
    let dir = files
        .key
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .join(SSL_DIR);
    ["key", "cert", "ca"].map(|what| dir.join(format!("{what}-{serial}.pem")))
}

/// The `ovs-vsctl` arguments that point OVS at a key, certificate and CA (after `--db`).
pub fn ssl_args(key: &Path, cert: &Path, ca: &Path) -> Vec<String> {
    vec![
        "set-ssl".to_owned(),
        key.display().to_string(),
        cert.display().to_string(),
        ca.display().to_string(),
    ]
}

/// Gives OVS the gateway's current credentials (module docs "OpenFlow over TLS"): checks the
/// `[tls]` key, certificate and CA together, copies them under their serial and runs
/// `ovs-vsctl set-ssl` on the copies; removes older copies. Returns the serial. Blocking.
pub fn configure_ssl(ovs: &OvsConfig, files: &TlsFiles, own: BranchId) -> anyhow::Result<u64> {
    let read = |p: &Path| std::fs::read(p).with_context(|| format!("read {}", p.display()));
    let (key, cert, ca) = (read(&files.key)?, read(&files.cert)?, read(&files.ca)?);
    let creds = pki::tls::Credentials::from_pem(&ca, &cert, &key, None, own)
        .context("the [tls] key, certificate and CA do not belong together (renewal under way?)")?;
    let serial = creds.serial;
    let paths = ssl_paths(files, serial);
    let [key_p, cert_p, ca_p] = &paths;
    if let Some(dir) = key_p.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("chmod 700 {}", dir.display()))?;
    }
    // A restart with the bridge kept: the same copies, already named by OVS, are left alone
    // (a rewrite would change their mtime and make OVS reload them).
    let same = [(key_p, &key), (cert_p, &cert), (ca_p, &ca)]
        .iter()
        .all(|(p, data)| std::fs::read(p).ok().as_deref() == Some(data.as_slice()));
    if same
        && crate::ovs_reuse::ssl_set_to(
            &vsctl(ovs, 5, &["get-ssl".to_owned()]).unwrap_or_default(),
            &paths,
        )
    {
        info!(serial, bridge = %ovs.bridge, "OVS OpenFlow TLS credentials already set (kept)");
        return Ok(serial);
    }
    for (p, data) in [(key_p, &key), (cert_p, &cert), (ca_p, &ca)] {
        pki::files::write_private(p, data).with_context(|| format!("write {}", p.display()))?;
    }
    vsctl(ovs, 10, &ssl_args(key_p, cert_p, ca_p)).context("ovs-vsctl set-ssl")?;
    // Older copies: OVS no longer names them.
    if let Some(dir) = key_p.parent() {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                let p = e.path();
                if !paths.contains(&p) {
                    let _ = std::fs::remove_file(&p);
                }
            }
        }
    }
    info!(serial, bridge = %ovs.bridge, "OVS OpenFlow TLS credentials set (set-ssl)");
    Ok(serial)
}

/// The `ovs-vsctl` arguments of the bridge transaction (after `--db`/`--timeout`).
pub fn bridge_args(config: &Config, ovs: &OvsConfig) -> Vec<String> {
    let br = ovs.bridge.as_str();
    let mut a: Vec<String> = Vec::new();
    let mut push = |xs: &[&str]| a.extend(xs.iter().map(|x| (*x).to_owned()));
    let dpid = format!("other-config:datapath-id={}", datapath_id(config.branch_id));
    push(&["--", "--may-exist", "add-br", br]);
    push(&[
        "--",
        "set",
        "bridge",
        br,
        "datapath_type=netdev",
        "protocols=OpenFlow13",
        "fail_mode=secure",
        &dpid,
    ]);
    for (k, w) in config.wan.iter().enumerate() {
        let k32 = u32::try_from(k).unwrap_or(u32::MAX - MPA_OFPORT_BASE);
        let wan_of = format!("ofport_request={}", WAN_OFPORT_BASE + k32);
        let mpa_of = format!("ofport_request={}", MPA_OFPORT_BASE + k32);
        let mpa = mpa_iface(k);
        push(&["--", "--may-exist", "add-port", br, &w.name]);
        push(&["--", "set", "interface", &w.name, &wan_of]);
        push(&["--", "--may-exist", "add-port", br, &mpa]);
        push(&["--", "set", "interface", &mpa, "type=internal", &mpa_of]);
    }
    push(&["--", "set-controller", br, &ovs.controller]);
    a
}

fn vsctl(ovs: &OvsConfig, timeout_s: u32, args: &[String]) -> anyhow::Result<String> {
    let mut all = vec![format!("--db={}", ovs.db), format!("--timeout={timeout_s}")];
    all.extend(args.iter().cloned());
    setup::run("ovs-vsctl", &all)
}

/// Refuses to go on unless `ovs-vsctl` exists and the database answers.
fn check_ovs(ovs: &OvsConfig) -> anyhow::Result<()> {
    match std::process::Command::new("ovs-vsctl")
        .arg("--version")
        .output()
    {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "[ovs] is configured but Open vSwitch is missing: `ovs-vsctl` is not installed \
             (apt-get install openvswitch-switch)"
        ),
        Err(e) => bail!("[ovs] is configured but `ovs-vsctl --version` cannot run: {e}"),
        Ok(_) => {}
    }
    vsctl(ovs, 5, &["show".to_owned()]).with_context(|| {
        format!(
            "[ovs] is configured but Open vSwitch is not answering at ovs.db = {:?}: start \
             ovsdb-server and ovs-vswitchd (or fix ovs.db)",
            ovs.db
        )
    })?;
    Ok(())
}

fn wait_for_interface(name: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + PORT_APPEAR_TIMEOUT;
    while !Path::new("/sys/class/net").join(name).exists() {
        if Instant::now() > deadline {
            bail!(
                "internal port {name} did not appear within {PORT_APPEAR_TIMEOUT:?}: is \
                 ovs-vswitchd running in this network namespace?"
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Builds (or reuses, [`crate::ovs_reuse`]) the bridge and moves the WAN addresses (module
/// docs); returns the config with `wan[k].name = mpa{k}`. With `remove_on_exit` every change is
/// recorded in `undo` before it is made (the bridge is deleted on exit); without it the bridge,
/// the addresses and the flows stay for the next start. `tls`: the gateway's `[tls]` files,
/// required for an `ssl:` controller.
pub fn setup(
    config: &Config,
    ovs: &OvsConfig,
    tls: Option<&TlsFiles>,
    undo: &mut Undo,
    remove_on_exit: bool,
) -> anyhow::Result<Config> {
    let own = config
        .branch()
        .context("branch_id is not a valid branch (validate should have caught this)")?;
    let ssl = match (wants_ssl(ovs), tls) {
        (true, None) => bail!(
            "[ovs] controller {:?} is OpenFlow over TLS but there is no [tls] section with \
             mode = \"tls\": OVS needs the gateway's certificate (docs/ofc.md §6)",
            ovs.controller
        ),
        (true, Some(f)) => Some(f),
        (false, _) => None,
    };
    check_ovs(ovs)?;
    for (k, w) in config.wan.iter().enumerate() {
        if !Path::new("/sys/class/net").join(&w.name).exists() {
            bail!("wan[{k}].name: interface {:?} does not exist", w.name);
        }
    }
    let had_main_default = !setup::ip(&["-4", "route", "show", "default"])
        .unwrap_or_default()
        .trim()
        .is_empty();

    if remove_on_exit {
        // Undone last: the bridge (and with it mpa{k} and every route through them).
        undo.on_exit(
            "ovs-vsctl",
            &[
                format!("--db={}", ovs.db),
                "--timeout=10".to_owned(),
                "--if-exists".to_owned(),
                "del-br".to_owned(),
                ovs.bridge.clone(),
            ],
        );
        if ssl.is_some() {
            undo.on_exit(
                "ovs-vsctl",
                &[
                    format!("--db={}", ovs.db),
                    "--timeout=10".to_owned(),
                    "del-ssl".to_owned(),
                ],
            );
        }
    }
    if let Some(files) = ssl {
        configure_ssl(ovs, files, own)
            .context("OpenFlow over TLS: give OVS the [tls] credentials")?;
    }
    let seen = crate::ovs_reuse::observe(ovs).context("read the OVS bridge's state")?;
    let (args, diffs) = crate::ovs_reuse::plan(config, ovs, &seen);
    if seen.exists && diffs.is_empty() {
        info!(bridge = %ovs.bridge, "OVS bridge kept from the previous run matches the config; reused with its flows");
    } else if seen.exists {
        warn!(bridge = %ovs.bridge, differences = ?diffs, "OVS bridge kept from the previous run differs from the config; reconciling");
    }
    vsctl(ovs, 10, &args).context(
        "create the OVS bridge (ovs-vsctl did not finish: is ovs-vswitchd running and \
         reachable through ovs.db?)",
    )?;
    info!(
        bridge = %ovs.bridge,
        datapath_id = %datapath_id(config.branch_id),
        controller = %ovs.controller,
        reused = seen.exists,
        "OVS bridge ready"
    );

    let mut moved = config.clone();
    for (k, w) in config.wan.iter().enumerate() {
        let mpa = mpa_iface(k);
        wait_for_interface(&mpa)?;
        let addr = w.address.to_string();
        // Recorded in reverse order of execution: arp on, address back, routes via wan{k}.
        if remove_on_exit {
            record_wan_undo(undo, w, k, had_main_default);
        }

        setup::ip(&["link", "set", &w.name, "arp", "off"])?;
        if let Err(e) = setup::run("ethtool", &["-K", &w.name, "tx", "off"]) {
            warn!(
                interface = %w.name,
                error = %e,
                "could not turn tx checksum offload off: TCP through OVS may carry bad checksums"
            );
        }
        let mac = w.mpa_mac().to_string();
        setup::ip(&["link", "set", &mpa, "address", &mac])?;
        setup::ip(&["link", "set", &mpa, "up"])?;
        setup::ip(&["addr", "replace", &addr, "dev", &mpa])?;
        // Absent after a crash that left it on mpa{k}: nothing to move then.
        if setup::ip(&["addr", "del", &addr, "dev", &w.name]).is_ok() {
            info!(address = %addr, from = %w.name, to = %mpa, %mac, "WAN address moved");
        }
        if let Some(m) = moved.wan.get_mut(k) {
            m.name = mpa;
        }
    }
    setup::ensure_main_default(&moved).context("main default route through mpa0")?;
    Ok(moved)
}

/// Records the undo of moving WAN port k's address to `mpa{k}` (undone in reverse: ARP on,
/// the address back on `wan{k}`, the default routes via `wan{k}`).
fn record_wan_undo(undo: &mut Undo, w: &mpa::config::WanPort, k: usize, had_main_default: bool) {
    let addr = w.address.to_string();
    let gw = w.gateway.to_string();
    let table = (TABLE_BASE + u32::try_from(k).unwrap_or(0)).to_string();
    undo.on_exit(
        "ip",
        &[
            "-4", "route", "replace", "default", "via", &gw, "dev", &w.name, "table", &table,
        ],
    );
    if k == 0 && had_main_default {
        undo.on_exit(
            "ip",
            &[
                "-4", "route", "replace", "default", "via", &gw, "dev", &w.name,
            ],
        );
    }
    undo.on_exit("ip", &["addr", "replace", &addr, "dev", &w.name]);
    undo.on_exit("ip", &["link", "set", &w.name, "arp", "on"]);
}

/// `mmsg down`: removes what `mmsg run` left for the next start (module docs), from the config:
/// ARP back on `wan{k}`, p_k back on `wan{k}`, table 100+k's and (when it left by `mpa0`) the
/// main table's default route via `wan{k}`, then the SSL settings (with an `ssl:` controller)
/// and the bridge. Best effort: every step is tried and failures are reported together. Run it
/// only while `mmsg` is stopped.
pub fn down(config: &Config) -> anyhow::Result<()> {
    let Some(o) = &config.ovs else {
        info!("no [ovs] section: nothing to remove");
        return Ok(());
    };
    let mut failed: Vec<String> = Vec::new();
    let mut step = |program: &str, args: &[&str]| {
        if let Err(e) = setup::run(program, args) {
            warn!(error = %format!("{e:#}"), "mmsg down: step failed");
            failed.push(format!("{e:#}"));
        }
    };
    let main_via_mpa0 = setup::ip(&["-4", "route", "show", "default"])
        .unwrap_or_default()
        .contains(&format!("dev {}", mpa_iface(0)));
    for (k, w) in config.wan.iter().enumerate() {
        let addr = w.address.to_string();
        let gw = w.gateway.to_string();
        let table = (TABLE_BASE + u32::try_from(k).unwrap_or(0)).to_string();
        step("ip", &["link", "set", &w.name, "arp", "on"]);
        step("ip", &["addr", "replace", &addr, "dev", &w.name]);
        if k == 0 && main_via_mpa0 {
            step(
                "ip",
                &[
                    "-4", "route", "replace", "default", "via", &gw, "dev", &w.name,
                ],
            );
        }
        step(
            "ip",
            &[
                "-4", "route", "replace", "default", "via", &gw, "dev", &w.name, "table", &table,
            ],
        );
    }
    let db = format!("--db={}", o.db);
    if wants_ssl(o) {
        step("ovs-vsctl", &[&db, "--timeout=10", "del-ssl"]);
    }
    step(
        "ovs-vsctl",
        &[&db, "--timeout=10", "--if-exists", "del-br", &o.bridge],
    );
    if failed.is_empty() {
        info!(bridge = %o.bridge, "OVS bridge removed, WAN addresses back on the WAN ports");
        Ok(())
    } else {
        anyhow::bail!("{} step(s) failed: {}", failed.len(), failed.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"
branch_id = 11
lan_prefixes = ["198.19.1.0/24"]
[[wan]]
name = "wan0"
address = "198.18.10.2/24"
gateway = "198.18.10.1"
[[wan]]
name = "eth7"
address = "198.18.11.2/24"
gateway = "198.18.11.1"
[ovs]
controller = "unix:/run/x/ssc.sock"
"#;

    #[test]
    fn bridge_transaction() {
        let c = Config::parse(CONFIG).unwrap();
        let o = c.ovs.clone().unwrap();
        let a = bridge_args(&c, &o).join(" ");
        assert_eq!(
            a,
            "-- --may-exist add-br br0 \
             -- set bridge br0 datapath_type=netdev protocols=OpenFlow13 fail_mode=secure \
             other-config:datapath-id=000000000000000b \
             -- --may-exist add-port br0 wan0 -- set interface wan0 ofport_request=1 \
             -- --may-exist add-port br0 mpa0 -- set interface mpa0 type=internal ofport_request=101 \
             -- --may-exist add-port br0 eth7 -- set interface eth7 ofport_request=2 \
             -- --may-exist add-port br0 mpa1 -- set interface mpa1 type=internal ofport_request=102 \
             -- set-controller br0 unix:/run/x/ssc.sock"
        );
    }

    #[test]
    fn ssl_arguments_and_copies() {
        let files = TlsFiles {
            ca: "/etc/mms/tls/ca.pem".into(),
            cert: "/etc/mms/tls/gw.pem".into(),
            key: "/etc/mms/tls/gw.key".into(),
            crl: Some("/etc/mms/tls/crl.pem".into()),
        };
        let [k, c, ca] = ssl_paths(&files, 42);
        assert_eq!(k, Path::new("/etc/mms/tls/ovs-ssl/key-42.pem"));
        assert_eq!(c, Path::new("/etc/mms/tls/ovs-ssl/cert-42.pem"));
        assert_eq!(ca, Path::new("/etc/mms/tls/ovs-ssl/ca-42.pem"));
        assert_eq!(
            ssl_args(&k, &c, &ca).join(" "),
            "set-ssl /etc/mms/tls/ovs-ssl/key-42.pem /etc/mms/tls/ovs-ssl/cert-42.pem \
             /etc/mms/tls/ovs-ssl/ca-42.pem"
        );
        // A renewed certificate gets new names: OVS sees one change of all three.
        let renewed = ssl_paths(&files, 43);
        assert!(renewed.iter().all(|p| ![&k, &c, &ca].contains(&p)));
        let mut o = Config::parse(CONFIG).unwrap().ovs.unwrap();
        assert!(!wants_ssl(&o));
        o.controller = "ssl:198.18.0.1:6654".to_owned();
        assert!(wants_ssl(&o));
    }

    #[test]
    fn ssl_target_without_tls_is_refused_before_touching_ovs() {
        let mut c = Config::parse(CONFIG).unwrap();
        let mut o = c.ovs.clone().unwrap();
        o.controller = "ssl:198.18.0.1:6654".to_owned();
        // Deliberately no OVS database at all: the refusal must come first.
        o.db = "unix:/nonexistent/s3/db.sock".to_owned();
        c.ovs = Some(o.clone());
        let mut undo = Undo::default();
        let e = setup(&c, &o, None, &mut undo, false).unwrap_err();
        assert!(format!("{e:#}").contains("no [tls] section"), "{e:#}");
    }

    /// A fresh start builds everything; the transaction is today's (`ovs::bridge_args`).
    #[test]
    fn no_bridge_builds_it() {
        let c = Config::parse(CONFIG).unwrap();
        let o = c.ovs.clone().unwrap();
        let (args, diffs) = crate::ovs_reuse::plan(&c, &o, &crate::ovs_reuse::Observed::default());
        assert_eq!(diffs, vec!["bridge br0 missing".to_owned()]);
        assert_eq!(args, bridge_args(&c, &o));
        assert!(args
            .join(" ")
            .ends_with("-- set-controller br0 unix:/run/x/ssc.sock"));
    }

    #[test]
    fn names() {
        assert_eq!(datapath_id(3), "0000000000000003");
        assert_eq!(mpa_iface(1), "mpa1");
    }
}
