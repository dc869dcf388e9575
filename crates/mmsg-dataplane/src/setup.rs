//! Host set-up that `mmsg run` performs in its own network namespace, idempotently (DESIGN §2, §3.1,
//! §4): MPTCP path manager mode, cubic, the reserved MPA port range, policy routing per WAN address,
//! the TUN device's MTU, state and routes; with `[ovs]` the main default route too (the OVS bridge
//! itself is [`crate::ovs`]). Sysctls are written through `/proc/sys` (per network
//! namespace); links, routes and rules through the `ip` tool (iproute2), which is on every gateway
//! and keeps this driver free of a netlink route library. What was changed is recorded in
//! [`Undo`] and reverted on exit.
//!
//! The original value of every sysctl we change is also written to a state file under the
//! runtime directory ([`Undo::with_sysctl_state`], next to the control socket) before the
//! change, crash-safely (temporary file, fsync, rename). After a kill -9 the next start finds
//! the file and keeps those values as the originals (it does not mistake the values it had set
//! for the host's); a clean exit restores them and removes the file.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};
use mms_types::BranchId;
use mpa::config::Config;
use tracing::{debug, info, warn};

/// First table of the per-WAN policy routing: WAN port k uses table 100 + k (DESIGN §2).
pub const TABLE_BASE: u32 = 100;
/// Rule preference of the per-WAN rules we add (the testbed uses the same).
pub const RULE_PREF_BASE: u32 = 1000;

/// Where sysctls live: `/proc/sys` (per network namespace).
pub const PROC_SYS: &str = "/proc/sys";

/// What to revert on exit.
#[derive(Debug)]
pub struct Undo {
    /// (key, original value), restored in reverse order.
    sysctls: Vec<(String, String)>,
    rules: Vec<Vec<String>>,
    /// (program, arguments), run in reverse order.
    commands: Vec<(String, Vec<String>)>,
    /// The sysctl tree ([`PROC_SYS`]; tests use a directory of their own).
    sysctl_root: PathBuf,
    /// The file the original sysctl values are persisted to, if any.
    sysctl_state: Option<PathBuf>,
}

impl Default for Undo {
    fn default() -> Undo {
        Undo {
            sysctls: Vec::new(),
            rules: Vec::new(),
            commands: Vec::new(),
            sysctl_root: PathBuf::from(PROC_SYS),
            sysctl_state: None,
        }
    }
}

/// The sysctl state file of the daemon whose control socket is `control`:
/// `<control>.sysctls` (e.g. `/run/mmsg/mmsg.sock.sysctls`), one per running instance.
pub fn sysctl_state_path(control: &Path) -> PathBuf {
    let mut s = control.as_os_str().to_owned();
    s.push(".sysctls");
    PathBuf::from(s)
}

/// The state file's text: one `key<TAB>original value` line per sysctl (values never hold a
/// newline: they are read trimmed from `/proc/sys`).
fn format_state(sysctls: &[(String, String)]) -> String {
    sysctls.iter().map(|(k, v)| format!("{k}\t{v}\n")).collect()
}

fn parse_state(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.split_once('\t'))
        .filter(|(k, _)| !k.is_empty())
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

impl Undo {
    /// An undo list whose sysctl originals are persisted in `state` (see the module docs):
    /// when the file exists (the previous run was killed before it restored them), its values
    /// are the originals, restored on [`Undo::revert`] whatever this run changes.
    pub fn with_sysctl_state(state: PathBuf) -> Undo {
        Undo::with_sysctl_root(PathBuf::from(PROC_SYS), state)
    }

    /// [`Undo::with_sysctl_state`] with another sysctl tree than `/proc/sys` (tests).
    pub fn with_sysctl_root(root: PathBuf, state: PathBuf) -> Undo {
        let mut u = Undo {
            sysctl_root: root,
            ..Undo::default()
        };
        match std::fs::read_to_string(&state) {
            Ok(text) => {
                u.sysctls = parse_state(&text);
                warn!(
                    state = %state.display(),
                    sysctls = u.sysctls.len(),
                    "the previous mmsg did not exit cleanly: keeping the sysctl originals it \
                     recorded (restored on exit), not the values it had set"
                );
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => warn!(state = %state.display(), error = %e, "sysctl state unreadable"),
        }
        u.sysctl_state = Some(state);
        u
    }

    /// Writes the originals to the state file (crash-safe) before a sysctl changes.
    fn persist_sysctls(&self) -> anyhow::Result<()> {
        let Some(state) = &self.sysctl_state else {
            return Ok(());
        };
        if let Some(dir) = state.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
        }
        pki::files::write_private(state, format_state(&self.sysctls).as_bytes())
            .with_context(|| format!("write the sysctl originals to {}", state.display()))
    }
}

impl Undo {
    /// Reverts every recorded change (best effort, logged).
    pub fn revert(&mut self) {
        for (program, args) in self.commands.drain(..).rev() {
            if let Err(e) = run(&program, &args) {
                warn!(error = %e, "could not undo a set-up step");
            }
        }
        for args in self.rules.drain(..).rev() {
            let mut del: Vec<String> = vec!["rule".into(), "del".into()];
            del.extend(args.into_iter().skip(2));
            if let Err(e) = ip(&del) {
                warn!(error = %e, "could not remove policy rule");
            }
        }
        let mut restored = true;
        for (key, old) in self.sysctls.drain(..).rev() {
            if let Err(e) = write_sysctl(&self.sysctl_root, &key, &old) {
                warn!(key, error = %e, "could not restore sysctl");
                restored = false;
            }
        }
        // Restored: the state file has done its job. Not restored: it stays, so the next start
        // still knows the originals.
        if let (true, Some(state)) = (restored, &self.sysctl_state) {
            match std::fs::remove_file(state) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    warn!(state = %state.display(), error = %e, "could not remove the sysctl state")
                }
            }
        }
    }
}

impl Undo {
    /// Records an `ip` command that undoes a set-up step.
    pub fn on_exit_ip(&mut self, args: &[&str]) {
        self.on_exit("ip", args);
    }

    /// Records any command that undoes a set-up step (undone in reverse order of recording).
    pub fn on_exit<S: AsRef<str>>(&mut self, program: &str, args: &[S]) {
        self.commands.push((
            program.to_owned(),
            args.iter().map(|a| a.as_ref().to_owned()).collect(),
        ));
    }
}

fn sysctl_path(root: &Path, key: &str) -> PathBuf {
    root.join(key.replace('.', "/"))
}

/// Reads a sysctl (trimmed).
pub fn read_sysctl(key: &str) -> anyhow::Result<String> {
    read_sysctl_in(Path::new(PROC_SYS), key)
}

fn read_sysctl_in(root: &Path, key: &str) -> anyhow::Result<String> {
    let p = sysctl_path(root, key);
    Ok(std::fs::read_to_string(&p)
        .with_context(|| format!("read {}", p.display()))?
        .trim()
        .to_owned())
}

fn write_sysctl(root: &Path, key: &str, value: &str) -> anyhow::Result<()> {
    let p = sysctl_path(root, key);
    // A newline, so that even an empty value reaches the kernel's handler (a 0-byte write does not).
    std::fs::write(&p, format!("{value}\n"))
        .with_context(|| format!("write {value:?} to {}", p.display()))
}

/// Sets a sysctl if it differs, recording the old value (persisted first, with
/// [`Undo::with_sysctl_state`]). A key whose original is already recorded (earlier in this run,
/// or by a killed previous run) keeps that original.
pub fn ensure_sysctl(undo: &mut Undo, key: &str, value: &str) -> anyhow::Result<()> {
    let old = read_sysctl_in(&undo.sysctl_root, key)?;
    if old == value {
        debug!(key, value, "sysctl already set");
        return Ok(());
    }
    if !undo.sysctls.iter().any(|(k, _)| k == key) {
        undo.sysctls.push((key.to_owned(), old.clone()));
        if let Err(e) = undo.persist_sysctls() {
            undo.sysctls.pop();
            return Err(e);
        }
    }
    write_sysctl(&undo.sysctl_root, key, value)?;
    info!(key, old = %old, new = value, "sysctl set");
    Ok(())
}

/// Runs `ip ARGS`; returns stdout.
pub fn ip<S: AsRef<str>>(args: &[S]) -> anyhow::Result<String> {
    run("ip", args)
}

/// Runs `PROGRAM ARGS`; returns stdout, or an error with its stderr.
pub fn run<S: AsRef<str>>(program: &str, args: &[S]) -> anyhow::Result<String> {
    let args: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
    let out = Command::new(program)
        .args(&args)
        .output()
        .with_context(|| format!("run {program} {}", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Parses `ip_local_reserved_ports` ("1000-1010,2000") into inclusive ranges.
pub fn parse_port_ranges(s: &str) -> Vec<(u16, u16)> {
    s.split(',')
        .filter_map(|p| {
            let p = p.trim();
            if p.is_empty() {
                return None;
            }
            match p.split_once('-') {
                Some((a, b)) => Some((a.trim().parse().ok()?, b.trim().parse().ok()?)),
                None => {
                    let v = p.parse().ok()?;
                    Some((v, v))
                }
            }
        })
        .collect()
}

/// Merges ranges (sorted, overlapping or adjacent ones joined) and formats them for the sysctl.
pub fn format_port_ranges(mut r: Vec<(u16, u16)>) -> String {
    r.sort_unstable();
    let mut merged: Vec<(u16, u16)> = Vec::new();
    for (a, b) in r {
        match merged.last_mut() {
            Some(last) if u32::from(a) <= u32::from(last.1) + 1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    merged
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The MPA port ranges to reserve: `0xB000-0xBFFF` for our branch and every configured remote,
/// because after a swap any `0xBASG` of those branches appears as a local port (DESIGN §3.1);
/// with an extended port plan its one range (issue #20).
pub fn mpa_port_ranges(config: &Config) -> Vec<(u16, u16)> {
    let mut branches: BTreeSet<u8> = config.remote.iter().map(|r| r.id).collect();
    branches.insert(config.branch_id);
    config
        .ports
        .reserved(branches.into_iter().filter_map(|b| BranchId::new(b).ok()))
        .into_iter()
        .map(|range| (*range.start(), *range.end()))
        .collect()
}

/// Adds our ranges to `net.ipv4.ip_local_reserved_ports`, keeping what is there.
pub fn reserve_ports(undo: &mut Undo, config: &Config) -> anyhow::Result<()> {
    let key = "net.ipv4.ip_local_reserved_ports";
    let mut ranges = parse_port_ranges(&read_sysctl(key)?);
    ranges.extend(mpa_port_ranges(config));
    let want = format_port_ranges(ranges);
    let have = format_port_ranges(parse_port_ranges(&read_sysctl(key)?));
    if have == want {
        return Ok(());
    }
    ensure_sysctl(undo, key, &want)
}

/// Picks cubic (DESIGN §4: bbr made MPTCP retransmit ~25 %) if the host allows it.
pub fn ensure_cubic(undo: &mut Undo) -> anyhow::Result<()> {
    let allowed = read_sysctl("net.ipv4.tcp_allowed_congestion_control").unwrap_or_default();
    let available = read_sysctl("net.ipv4.tcp_available_congestion_control").unwrap_or_default();
    if !allowed.split_whitespace().any(|c| c == "cubic")
        && !available.split_whitespace().any(|c| c == "cubic")
    {
        warn!(allowed = %allowed, "cubic is not allowed here; keeping the current congestion control");
        return Ok(());
    }
    ensure_sysctl(undo, "net.ipv4.tcp_congestion_control", "cubic")
}

/// Switches the namespace's MPTCP path manager to userspace (new sockets only) or back to kernel.
pub fn ensure_path_manager(undo: &mut Undo, userspace: bool) -> anyhow::Result<()> {
    ensure_sysctl(undo, "net.mptcp.enabled", "1")?;
    let want = if userspace { "userspace" } else { "kernel" };
    if read_sysctl("net.mptcp.path_manager").is_ok() {
        ensure_sysctl(undo, "net.mptcp.path_manager", want)
    } else {
        // Kernels before 6.15 only have the numeric form.
        ensure_sysctl(undo, "net.mptcp.pm_type", if userspace { "1" } else { "0" })
    }
}

/// One `ip rule` as reported by `ip -j rule show`.
fn rule_exists(rules_json: &str, src: Ipv4Addr, table: u32) -> bool {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(rules_json) else {
        return false;
    };
    v.as_array().is_some_and(|rules| {
        rules.iter().any(|r| {
            let src_ok = r.get("src").and_then(|s| s.as_str()) == Some(&src.to_string())
                && r.get("srclen")
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(32)
                    == 32;
            let table_ok = match r.get("table") {
                Some(serde_json::Value::String(t)) => t == &table.to_string(),
                Some(serde_json::Value::Number(n)) => n.as_u64() == Some(u64::from(table)),
                _ => false,
            };
            src_ok && table_ok
        })
    })
}

/// Whether `ip route show` output has a default route leaving by `dev`.
fn default_via_dev(routes: &str, dev: &str) -> bool {
    routes.lines().any(|l| {
        let mut words = l.split_whitespace();
        l.starts_with("default") && words.any(|w| w == "dev") && words.next() == Some(dev)
    })
}

/// Policy routing per WAN address (DESIGN §2): `ip rule from p_k lookup 100+k` and a default route
/// via the port's gateway in that table, leaving by the interface that carries p_k (`wan[k].name`:
/// the WAN NIC, or `mpa{k}` with `[ovs]`, see [`crate::ovs`]). Existing rules are kept (never
/// duplicated); the default route is replaced only when the table has none by that interface.
pub fn ensure_policy_routing(undo: &mut Undo, config: &Config) -> anyhow::Result<()> {
    let rules = ip(&["-j", "-4", "rule", "show"])?;
    for (k, w) in config.wan.iter().enumerate() {
        let k = u32::try_from(k).unwrap_or(0);
        let table = TABLE_BASE + k;
        let src = w.address.addr();
        let t = table.to_string();
        let routes = ip(&["-4", "route", "show", "table", &t]).unwrap_or_default();
        if !default_via_dev(&routes, &w.name) {
            let gw = w.gateway.to_string();
            ip(&[
                "-4", "route", "replace", "default", "via", &gw, "dev", &w.name, "table", &t,
            ])?;
            info!(table, gateway = %gw, dev = %w.name, "policy route set");
        }
        if rule_exists(&rules, src, table) {
            debug!(%src, table, "policy rule already present");
            continue;
        }
        let args: Vec<String> = vec![
            "rule".into(),
            "add".into(),
            "from".into(),
            format!("{src}/32"),
            "lookup".into(),
            t,
            "pref".into(),
            (RULE_PREF_BASE + k).to_string(),
        ];
        ip(&args)?;
        info!(%src, table, "policy rule added");
        undo.rules.push(args);
    }
    Ok(())
}

/// A WAN port's address or next hop changed (learned from the kernel, `crate::wan_watch`):
/// its policy rule follows the new address (the old rule is deleted, the new one added and
/// undone at exit like the others) and its table's default route the new next hop.
pub fn update_policy_routing(undo: &mut Undo, old: &Config, new: &Config) -> anyhow::Result<()> {
    for (k, (o, n)) in old.wan.iter().zip(&new.wan).enumerate() {
        if o.address == n.address && o.gateway == n.gateway {
            continue;
        }
        let k = u32::try_from(k).unwrap_or(0);
        let t = (TABLE_BASE + k).to_string();
        let gw = n.gateway.to_string();
        ip(&[
            "-4", "route", "replace", "default", "via", &gw, "dev", &n.name, "table", &t,
        ])?;
        if o.address.addr() != n.address.addr() {
            let old_src = format!("{}/32", o.address.addr());
            if let Err(e) = ip(&["rule", "del", "from", &old_src, "lookup", &t]) {
                debug!(src = %old_src, error = %e, "old policy rule already gone");
            }
            undo.rules
                .retain(|r| !(r.get(3) == Some(&old_src) && r.get(5) == Some(&t)));
            let args: Vec<String> = vec![
                "rule".into(),
                "add".into(),
                "from".into(),
                format!("{}/32", n.address.addr()),
                "lookup".into(),
                t.clone(),
                "pref".into(),
                (RULE_PREF_BASE + k).to_string(),
            ];
            ip(&args)?;
            undo.rules.push(args);
        }
        info!(port = k, address = %n.address, gateway = %gw, dev = %n.name, "policy routing follows the learned address");
    }
    Ok(())
}

/// The main table's default route via WAN port 0's gateway, by the interface that carries its
/// address (`mpa0` with `[ovs]`): Type III and everything not tunnelled leaves there. Replaced
/// only when it does not already leave by that interface.
pub fn ensure_main_default(config: &Config) -> anyhow::Result<()> {
    let Some(w) = config.wan.first() else {
        return Ok(());
    };
    let routes = ip(&["-4", "route", "show", "default"]).unwrap_or_default();
    if !default_via_dev(&routes, &w.name) {
        let gw = w.gateway.to_string();
        ip(&[
            "-4", "route", "replace", "default", "via", &gw, "dev", &w.name,
        ])?;
        info!(gateway = %gw, dev = %w.name, "main default route set");
    }
    Ok(())
}

/// Brings the TUN device up with `mtu` and routes every remote branch's LAN prefixes into it
/// (`ip route replace`: idempotent). Routes vanish with the device when `mmsg` exits.
pub fn configure_tun(name: &str, mtu: u32, config: &Config) -> anyhow::Result<()> {
    ip(&["link", "set", "dev", name, "mtu", &mtu.to_string(), "up"])?;
    for r in &config.remote {
        for p in &r.lan_prefixes {
            let fam = if p.addr().is_ipv4() { "-4" } else { "-6" };
            ip(&[fam, "route", "replace", &p.to_string(), "dev", name])?;
            info!(prefix = %p, branch = r.id, tun = name, "route into TUN");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn port_ranges_merge() {
        assert_eq!(parse_port_ranges(""), vec![]);
        assert_eq!(
            parse_port_ranges("100-200, 300"),
            vec![(100, 200), (300, 300)]
        );
        assert_eq!(
            format_port_ranges(vec![(0x2000, 0x2FFF), (0x1000, 0x1FFF), (80, 80)]),
            "80,4096-12287"
        );
        assert_eq!(
            format_port_ranges(vec![(5, 10), (8, 20), (22, 22)]),
            "5-20,22"
        );
    }

    #[test]
    fn ranges_of_the_example() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/mmsg-branch1.toml"
        ))
        .unwrap();
        let c = Config::parse(&text).unwrap();
        assert_eq!(
            mpa_port_ranges(&c),
            vec![(0x1000, 0x1FFF), (0x2000, 0x2FFF)]
        );
    }

    #[test]
    fn default_route_by_dev() {
        let r = "default via 198.18.10.1 dev mpa0 proto static\n198.18.10.0/24 dev mpa0\n";
        assert!(default_via_dev(r, "mpa0"));
        assert!(!default_via_dev(r, "wan0"));
        assert!(!default_via_dev("198.18.10.0/24 dev wan0\n", "wan0"));
        assert!(!default_via_dev("", "wan0"));
    }

    #[test]
    fn rules_are_recognised() {
        let j = r#"[{"priority":0,"src":"all","table":"local"},
                    {"priority":1000,"src":"198.18.10.2","table":"100"}]"#;
        assert!(rule_exists(j, Ipv4Addr::new(198, 18, 10, 2), 100));
        assert!(!rule_exists(j, Ipv4Addr::new(198, 18, 11, 2), 101));
        assert!(!rule_exists("garbage", Ipv4Addr::new(198, 18, 10, 2), 100));
    }

    /// A fake sysctl tree (the code takes its root as a parameter): two keys with the host's
    /// values.
    fn fake_proc(d: &Path) -> PathBuf {
        let root = d.join("proc-sys");
        for (k, v) in [
            ("net/ipv4/tcp_congestion_control", "reno\n"),
            ("net/ipv4/ip_local_reserved_ports", "\n"),
        ] {
            let p = root.join(k);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, v).unwrap();
        }
        root
    }

    /// The originals are on disk before the change; a run that dies without reverting (as
    /// after kill -9) leaves them there, and the next run restores them, not the values the
    /// dead run had set; a clean exit removes the file.
    #[test]
    fn sysctl_originals_survive_a_killed_run() {
        let d = tempfile::tempdir().unwrap();
        let root = fake_proc(d.path());
        let state = d.path().join("run/mmsg.sock.sysctls");
        let cc = "net.ipv4.tcp_congestion_control";
        let ports = "net.ipv4.ip_local_reserved_ports";

        // Run 1: changes both, then is "killed" (never reverts).
        let mut run1 = Undo::with_sysctl_root(root.clone(), state.clone());
        ensure_sysctl(&mut run1, cc, "cubic").unwrap();
        ensure_sysctl(&mut run1, ports, "45056-45311").unwrap();
        assert_eq!(read_sysctl_in(&root, cc).unwrap(), "cubic");
        let text = std::fs::read_to_string(&state).unwrap();
        assert_eq!(
            text,
            "net.ipv4.tcp_congestion_control\treno\nnet.ipv4.ip_local_reserved_ports\t\n"
        );
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&state).unwrap().permissions(),
        ) & 0o777;
        assert_eq!(mode, 0o600);
        drop(run1);

        // Without the state file, the next run would take the changed values for the host's:
        // nothing to restore (what happened before this change).
        let mut forgetful = Undo {
            sysctl_root: root.clone(),
            ..Undo::default()
        };
        ensure_sysctl(&mut forgetful, cc, "cubic").unwrap();
        assert!(forgetful.sysctls.is_empty());

        // Run 2 finds the file: the values are already set, the originals are still known.
        let mut run2 = Undo::with_sysctl_root(root.clone(), state.clone());
        ensure_sysctl(&mut run2, cc, "cubic").unwrap();
        ensure_sysctl(&mut run2, ports, "45056-45311,49152-49407").unwrap();
        // A key changed again keeps its first original, recorded once.
        assert_eq!(std::fs::read_to_string(&state).unwrap().lines().count(), 2);
        run2.revert();
        assert_eq!(read_sysctl_in(&root, cc).unwrap(), "reno");
        assert_eq!(read_sysctl_in(&root, ports).unwrap(), "");
        assert!(!state.exists(), "a clean exit removes the state file");

        // Run 3 (clean start, nothing to change): no file is created.
        let mut run3 = Undo::with_sysctl_root(root.clone(), state.clone());
        ensure_sysctl(&mut run3, cc, "reno").unwrap();
        run3.revert();
        assert!(!state.exists());
    }

    #[test]
    fn state_lines_round_trip() {
        let v = vec![
            ("a.b".to_owned(), "1 2\t3".to_owned()),
            ("c".to_owned(), String::new()),
        ];
        assert_eq!(parse_state(&format_state(&v)), v);
        assert_eq!(parse_state("junk\n\tx\n"), vec![]);
    }
}
