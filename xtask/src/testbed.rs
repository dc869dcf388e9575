//! `cargo xtask testbed up|down|status|link`: the branches of DESIGN §5 in network namespaces.
//!
//! Namespaces of a testbed with prefix `P`: `P-inet` (the emulated internet and the carriers of
//! leased lines, with the WAN emulator), `P-gw<b>` (gateway of branch b) and `P-h<b>`,
//! `P-h<b>-<j>` (LAN hosts). Every veth is created directly inside its two namespaces, so no
//! interface ever exists in the host namespace; inside the namespaces names follow DESIGN §2
//! (`wan<k>`, `lan0`). Run state lives in `/run/mms-testbed/P/` (state.json, the emulator's config,
//! logs, OVS databases). `down` finds everything by name and by the processes living in those
//! namespaces, so it works even when the state file was never written.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::Deserialize;

use crate::sh;
use crate::topology::{self, Impairment, PortKind, PortRef, ResolvedPort, Topology};
use crate::wanem::core::{EmuConfig, LinkConfig, PairConfig};

pub mod names;
mod nat;
mod state;
mod status;
pub use names::{
    host_addr, list_netns, ns_gw, ns_host, ns_inet, ns_pids, our_netns, state_dir, validate_prefix,
    STATE_ROOT,
};
use state::save_state;
pub use state::{load_state, State};
pub use status::{describe, print_status, status, Status};

/// Routing table in `inet` whose default route is the emulator's TUN.
const EMU_TABLE: u32 = 200;
/// TUN device of the emulator inside `inet`.
const EMU_TUN: &str = "emu0";
/// Rule preference of the link-cut blackholes (before everything else).
const PREF_CUT: u32 = 50;
/// Rule preference of "came back from the emulator: route normally".
const PREF_FROM_EMU: u32 = 100;
/// First rule preference of the diversion rules (one preference per rule).
const PREF_DIVERT: u32 = 1000;
/// End (exclusive) of the diversion rules' preferences; the kernel's own `main` (32766) and
/// `default` (32767) rules lie beyond and are never touched.
const PREF_DIVERT_END: u32 = 10_000;
/// Policy routing table of gateway WAN port k: 100 + k (DESIGN §2).
const GW_TABLE_BASE: u32 = 100;

fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Sends SIGTERM, waits up to `grace`, then SIGKILL.
pub fn stop_pids(pids: &[u32], grace: Duration) {
    for &pid in pids {
        // SAFETY: kill(2) with a PID we started (taken from our namespace or our pidfile).
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    }
    let deadline = Instant::now() + grace;
    while pids.iter().any(|&p| pid_alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for &pid in pids.iter().filter(|&&p| pid_alive(p)) {
        // SAFETY: as above.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    }
}

/// Options of `testbed up`.
#[derive(Debug, Clone)]
pub struct UpOptions {
    /// Name prefix.
    pub prefix: String,
    /// Start one OVS (userspace datapath) per gateway.
    pub ovs: bool,
}

/// Runs `f` on a fresh testbed `prefix` of `topo` without OVS, and always tears it down (the
/// error of `f` first, then that of the teardown).
pub fn run_on<T>(
    topo: &Topology,
    prefix: &str,
    f: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    up(
        topo,
        &UpOptions {
            prefix: prefix.to_owned(),
            ovs: false,
        },
    )?;
    let result = f();
    let down = down(prefix);
    let out = result?;
    down?;
    Ok(out)
}

/// Builds the testbed. On error, everything built so far is removed.
pub fn up(topo: &Topology, opts: &UpOptions) -> anyhow::Result<State> {
    validate_prefix(&opts.prefix)?;
    topo.validate()?;
    let existing = our_netns(&opts.prefix)?;
    if !existing.is_empty() || state_dir(&opts.prefix).exists() {
        bail!(
            "testbed {:?} already exists ({} namespaces); run `cargo xtask testbed down --prefix {}` first",
            opts.prefix,
            existing.len(),
            opts.prefix
        );
    }
    let result = build(topo, opts);
    if result.is_err() {
        let _ = down(&opts.prefix);
    }
    result
}

fn build(topo: &Topology, opts: &UpOptions) -> anyhow::Result<State> {
    let p = opts.prefix.as_str();
    let dir = state_dir(p);
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let mut state = State {
        prefix: p.to_owned(),
        topology: topo.clone(),
        cut: BTreeSet::new(),
        pids: BTreeMap::new(),
        ovs: opts.ovs,
    };
    save_state(&state)?;
    allow_cubic()?;

    let inet = ns_inet(p);
    let ports = topo.ports();
    let mut all_ns = vec![inet.clone()];
    for b in &topo.branches {
        all_ns.push(ns_gw(p, b.id));
        for j in 0..b.hosts {
            all_ns.push(ns_host(p, b.id, j));
        }
    }
    for ns in &all_ns {
        sh::run("ip", &["netns", "add", ns])?;
        sh::ip_batch(ns, &["link set lo up".to_owned()])?;
        let mut keys = vec![
            "net.ipv4.tcp_congestion_control=cubic",
            "net.ipv4.conf.all.rp_filter=0",
            "net.ipv4.conf.default.rp_filter=0",
        ];
        if !ns.contains("-h") {
            keys.push("net.ipv4.ip_forward=1");
        }
        let mut args = vec!["-qw"];
        args.extend(keys);
        sh::ns(ns, "sysctl", &args)?;
    }

    // WAN links: gateway wan<k> <-> inet.
    let mut inet_cmds = Vec::new();
    for port in &ports {
        let gw = ns_gw(p, port.id.branch);
        sh::ip_batch(
            &inet,
            &[format!(
                "link add {} type veth peer name {} netns {gw}",
                port.inet_if, port.gw_if
            )],
        )?;
        inet_cmds.push(format!(
            "addr add {}/{} dev {}",
            port.next_hop, port.prefix_len, port.inet_if
        ));
        inet_cmds.push(format!(
            "link set dev {} address {}",
            port.inet_if,
            router_mac(port.next_hop)
        ));
        inet_cmds.push(format!("link set {} up", port.inet_if));
    }
    sh::ip_batch(&inet, &inet_cmds)?;

    for b in &topo.branches {
        let gw = ns_gw(p, b.id);
        let mut cmds = Vec::new();
        let mine: Vec<&ResolvedPort> = ports.iter().filter(|x| x.id.branch == b.id).collect();
        for (k, port) in mine.iter().enumerate() {
            let table = GW_TABLE_BASE + k as u32;
            cmds.push(format!(
                "addr add {}/{} dev {}",
                port.addr, port.prefix_len, port.gw_if
            ));
            cmds.push(format!("link set {} up", port.gw_if));
            cmds.push(format!(
                "route add default via {} dev {} table {table}",
                port.next_hop, port.gw_if
            ));
            cmds.push(format!(
                "rule add pref {} from {} table {table}",
                1000 + k,
                port.addr
            ));
            if port.kind == PortKind::Leased {
                // The other end of the line is reached through this port in the main table too.
                if let Some(other) = ports
                    .iter()
                    .find(|o| o.leased_line == port.leased_line && o.id.branch != port.id.branch)
                {
                    cmds.push(format!(
                        "route add {}/{} via {} dev {}",
                        other.network(),
                        other.prefix_len,
                        port.next_hop,
                        port.gw_if
                    ));
                }
            }
        }
        if let Some(first) = mine.iter().find(|x| x.kind == PortKind::Internet) {
            cmds.push(format!(
                "route add default via {} dev {}",
                first.next_hop, first.gw_if
            ));
        }
        // LAN: bridge lan0 with the hosts' veths.
        cmds.push("link add lan0 type bridge".to_owned());
        cmds.push(format!(
            "addr add {}/24 dev lan0",
            topology::lan_addr(b.id, 1)
        ));
        cmds.push("link set lan0 up".to_owned());
        for j in 0..b.hosts {
            let h = ns_host(p, b.id, j);
            cmds.push(format!(
                "link add lanh{j} type veth peer name eth0 netns {h}"
            ));
            cmds.push(format!("link set lanh{j} master lan0"));
            cmds.push(format!("link set lanh{j} up"));
        }
        sh::ip_batch(&gw, &cmds)?;
        for j in 0..b.hosts {
            let h = ns_host(p, b.id, j);
            sh::ip_batch(
                &h,
                &[
                    format!("addr add {}/24 dev eth0", host_addr(b.id, j)),
                    "link set eth0 up".to_owned(),
                    format!("route add default via {}", topology::lan_addr(b.id, 1)),
                ],
            )?;
        }
    }

    // Carrier isolation of leased lines: a line's /29 talks only to itself.
    let mut nft = String::from("table ip mmstb {\n chain forward {\n  type filter hook forward priority 0; policy accept;\n");
    for (i, _) in topo.leased.iter().enumerate() {
        let net = format!("198.19.{}.0/29", 200 + i);
        let _ = writeln!(nft, "  ip saddr {net} ip daddr != {net} drop");
        let _ = writeln!(nft, "  ip daddr {net} ip saddr != {net} drop");
    }
    nft.push_str(" }\n}\n");
    sh::nft(&inet, &nft)?;
    // Ports behind NAT: the carrier translates and refuses (`nat`).
    if let Some(rules) = nat::ruleset(&ports, EMU_TUN) {
        sh::nft(&inet, &rules)?;
        sh::ns(&inet, "sysctl", &["-qw", nat::CONNTRACK_LIBERAL])?;
    }

    // The WAN emulator.
    sh::ip_batch(
        &inet,
        &[
            format!("tuntap add dev {EMU_TUN} mode tun"),
            format!("link set {EMU_TUN} mtu 65535 up"),
            format!("route add default dev {EMU_TUN} table {EMU_TABLE}"),
            format!("rule add pref {PREF_FROM_EMU} iif {EMU_TUN} lookup main"),
        ],
    )?;
    sh::ns(
        &inet,
        "sysctl",
        &["-qw", &format!("net.ipv4.conf.{EMU_TUN}.rp_filter=0")],
    )?;
    write_emu_config(&state)?;
    let pid = spawn_wanem(&state)?;
    state.pids.insert("wanem".to_owned(), pid);
    save_state(&state)?;
    sync_diversion(&state)?;

    if opts.ovs {
        for b in &topo.branches {
            let (db, vs) = crate::ovs::start(p, b.id, &dir)?;
            state.pids.insert(format!("ovsdb-server-gw{}", b.id), db);
            state.pids.insert(format!("ovs-vswitchd-gw{}", b.id), vs);
            save_state(&state)?;
            // DESIGN §4: a kernel TCP stack sending into OVS through a veth needs tx offload off.
            let gw = ns_gw(p, b.id);
            for port in ports.iter().filter(|x| x.id.branch == b.id) {
                sh::ns(&gw, "ethtool", &["-K", &port.gw_if, "tx", "off"])?;
                sh::ns(&inet, "ethtool", &["-K", &port.inet_if, "tx", "off"])?;
            }
        }
    }
    save_state(&state)?;
    Ok(state)
}

/// The MAC of a router interface: 02:00 + its IPv4 address, the convention of the controller's
/// inventory (`gateway_mac`, `MacAddr::from_ipv4`). Swap entries write the next hop's
/// `gateway_mac` as `eth_dst`; a router interface with the kernel's random MAC would drop those
/// frames as not its own (docs/testbed.md).
pub fn router_mac(addr: std::net::Ipv4Addr) -> String {
    let [a, b, c, d] = addr.octets();
    format!("02:00:{a:02x}:{b:02x}:{c:02x}:{d:02x}")
}

/// Lets namespaces pick cubic (DESIGN §4): adds it to the global allowed list once.
fn allow_cubic() -> anyhow::Result<()> {
    let path = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";
    let cur = std::fs::read_to_string(path).with_context(|| format!("read {path}"))?;
    if !cur.split_whitespace().any(|c| c == "cubic") {
        std::fs::write(path, format!("{} cubic", cur.trim()))
            .with_context(|| format!("add cubic to {path}"))?;
    }
    Ok(())
}

fn spawn_wanem(state: &State) -> anyhow::Result<u32> {
    let dir = state_dir(&state.prefix);
    let exe = crate::sh::self_exe()?;
    let log = std::fs::File::create(dir.join("wanem.log"))?;
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns_inet(&state.prefix)])
        .arg(&*exe)
        .args(["wanem", "--tun", EMU_TUN, "--config"])
        .arg(dir.join("wanem.json"))
        .arg("--stats")
        .arg(dir.join("wanem-stats.json"))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // SAFETY: setsid() is async-signal-safe; it detaches the emulator from our session so a
    // Ctrl-C of `testbed up` does not kill it.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let child = cmd.spawn().context("start the WAN emulator")?;
    let pid = child.id();
    // Wait until it attached to the TUN (the device shows a carrier), or died.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let out = sh::run(
            "ip",
            &["-n", &ns_inet(&state.prefix), "link", "show", EMU_TUN],
        )?;
        if !out.contains("NO-CARRIER") {
            return Ok(pid);
        }
        if !pid_alive(pid) || Instant::now() > deadline {
            let log = std::fs::read_to_string(dir.join("wanem.log")).unwrap_or_default();
            bail!("the WAN emulator did not start: {log}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Writes the emulator's JSON config from the state's topology.
fn write_emu_config(state: &State) -> anyhow::Result<()> {
    let cfg = emu_config(&state.topology);
    let dir = state_dir(&state.prefix);
    let tmp = dir.join("wanem.json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(&cfg)?)?;
    std::fs::rename(&tmp, dir.join("wanem.json"))?;
    Ok(())
}

/// The emulator config of a topology.
pub fn emu_config(topo: &Topology) -> EmuConfig {
    let ports = topo.ports();
    let links = ports
        .iter()
        .filter(|p| !(p.up.is_none() && p.down.is_none()))
        .map(|p| LinkConfig {
            name: p.id.to_string(),
            network: p.network(),
            prefix_len: p.prefix_len,
            up: p.up.clone(),
            down: p.down.clone(),
        })
        .collect();
    let addr = |r: &str| {
        let r = PortRef::parse(r)?;
        ports.iter().find(|p| p.id == r).map(|p| p.addr)
    };
    let mut pairs = Vec::new();
    for pair in &topo.pairs {
        let (Some(a), Some(b)) = (addr(&pair.from), addr(&pair.to)) else {
            continue;
        };
        let imp = pair.impairment();
        if imp.is_none() {
            continue;
        }
        pairs.push(PairConfig {
            src: a,
            dst: b,
            imp: imp.clone(),
            shared_with: pair.shared_with.clone(),
        });
        if pair.both_directions {
            pairs.push(PairConfig {
                src: b,
                dst: a,
                imp,
                shared_with: pair.shared_with.iter().map(|&(x, y)| (y, x)).collect(),
            });
        }
    }
    EmuConfig {
        links,
        pairs,
        seed: 0x6d6d_7300,
    }
}

/// One diversion rule's selector: traffic from and/or to a network goes to the emulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Selector {
    from: Option<(std::net::Ipv4Addr, u8)>,
    to: Option<(std::net::Ipv4Addr, u8)>,
}

impl std::fmt::Display for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut sep = "";
        if let Some((a, l)) = self.from {
            write!(f, "from {a}/{l}")?;
            sep = " ";
        }
        if let Some((a, l)) = self.to {
            write!(f, "{sep}to {a}/{l}")?;
        }
        Ok(())
    }
}

/// The diversion rules (`ip rule` selectors) that send impaired traffic to the emulator.
fn diversion_selectors(topo: &Topology) -> BTreeSet<Selector> {
    let cfg = emu_config(topo);
    let mut sel = BTreeSet::new();
    for l in &cfg.links {
        let net = Some((l.network, l.prefix_len));
        if !l.up.is_none() {
            sel.insert(Selector {
                from: net,
                to: None,
            });
        }
        if !l.down.is_none() {
            sel.insert(Selector {
                from: None,
                to: net,
            });
        }
    }
    for pr in &cfg.pairs {
        sel.insert(Selector {
            from: Some((pr.src, 32)),
            to: Some((pr.dst, 32)),
        });
        for &(a, b) in &pr.shared_with {
            sel.insert(Selector {
                from: Some((a, 32)),
                to: Some((b, 32)),
            });
        }
    }
    sel
}

#[derive(Debug, Deserialize)]
struct RuleJson {
    priority: Option<u32>,
    src: Option<String>,
    srclen: Option<u8>,
    dst: Option<String>,
    dstlen: Option<u8>,
}

impl RuleJson {
    /// The selector of this rule as `ip -j rule show` prints it (`all` or no address: any; no
    /// length: /32); `None` if an address does not parse.
    fn selector(&self) -> Option<Selector> {
        fn side(
            addr: &Option<String>,
            len: Option<u8>,
        ) -> Option<Option<(std::net::Ipv4Addr, u8)>> {
            match addr.as_deref() {
                None | Some("all") => Some(None),
                Some(a) => Some(Some((a.parse().ok()?, len.unwrap_or(32)))),
            }
        }
        Some(Selector {
            from: side(&self.src, self.srclen)?,
            to: side(&self.dst, self.dstlen)?,
        })
    }
}

/// The `ip rule` commands that turn the diversion rules `current` (priority, selector; `None`
/// for one that cannot be read) into `wanted`: make before break, so that traffic that stays
/// diverted never takes the direct route for a moment (that let packets skip the emulator's
/// delay and queue while a bottleneck was changed under load: reordering, spurious
/// retransmits and RTT samples of a few microseconds that the kernel kept as the subflows'
/// minimum RTT for minutes; docs/results.md "Table I with the send time budget"). Rules that
/// stay are not touched; new ones take free priorities first, stale ones go last.
fn diversion_commands(
    current: &[(u32, Option<Selector>)],
    wanted: &BTreeSet<Selector>,
) -> anyhow::Result<Vec<String>> {
    let kept: BTreeSet<Selector> = current.iter().filter_map(|&(_, s)| s).collect();
    let used: BTreeSet<u32> = current.iter().map(|&(p, _)| p).collect();
    let mut free = (PREF_DIVERT..PREF_DIVERT_END).filter(|p| !used.contains(p));
    let mut cmds = Vec::new();
    for sel in wanted.difference(&kept) {
        let pref = free
            .next()
            .context("more diversion rules than the emulator supports")?;
        cmds.push(format!("rule add pref {pref} {sel} lookup {EMU_TABLE}"));
    }
    let mut seen = BTreeSet::new();
    for &(pref, sel) in current {
        // Stale, unreadable, or a duplicate of a rule already kept.
        if !sel.is_some_and(|s| wanted.contains(&s) && seen.insert(s)) {
            cmds.push(format!("rule del pref {pref}"));
        }
    }
    Ok(cmds)
}

/// Makes the `inet` diversion rules match the state's topology ([`diversion_commands`]).
fn sync_diversion(state: &State) -> anyhow::Result<()> {
    let inet = ns_inet(&state.prefix);
    let out = sh::run("ip", &["-n", &inet, "-j", "rule", "show"])?;
    let rules: Vec<RuleJson> = serde_json::from_str(&out).context("parse ip -j rule")?;
    let current: Vec<(u32, Option<Selector>)> = rules
        .iter()
        .filter_map(|r| Some((r.priority?, r)))
        .filter(|(p, _)| (PREF_DIVERT..PREF_DIVERT_END).contains(p))
        .map(|(p, r)| (p, r.selector()))
        .collect();
    let cmds = diversion_commands(&current, &diversion_selectors(&state.topology))?;
    if cmds.is_empty() {
        return Ok(());
    }
    sh::ip_batch(&inet, &cmds)
}

fn port_of(state: &State, name: &str) -> anyhow::Result<ResolvedPort> {
    let r = PortRef::parse(name).with_context(|| format!("{name:?} is not a port like `1a`"))?;
    state
        .topology
        .ports()
        .into_iter()
        .find(|p| p.id == r)
        .with_context(|| format!("port {name} does not exist in testbed {}", state.prefix))
}

/// Cuts (blackholes both directions of) WAN port `name` while everything keeps running, or
/// restores it. Idempotent.
pub fn link_cut(prefix: &str, name: &str, cut: bool) -> anyhow::Result<()> {
    let mut state = load_state(prefix)?;
    let port = port_of(&state, name)?;
    let net = format!("{}/{}", port.network(), port.prefix_len);
    let id = port.id.to_string();
    let changed = if cut {
        state.cut.insert(id)
    } else {
        state.cut.remove(&id)
    };
    if changed {
        let verb = if cut { "add" } else { "del" };
        sh::ip_batch(
            &ns_inet(prefix),
            &[
                format!("rule {verb} pref {PREF_CUT} from {net} blackhole"),
                format!("rule {verb} pref {PREF_CUT} to {net} blackhole"),
            ],
        )?;
        save_state(&state)?;
    }
    Ok(())
}

/// Which direction(s) `link set` changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Direction {
    /// Gateway → network.
    Up,
    /// Network → gateway.
    Down,
    /// Both.
    Both,
}

/// Replaces the impairment of an internet port's direction(s) while traffic runs.
pub fn link_set(prefix: &str, name: &str, dir: Direction, imp: &Impairment) -> anyhow::Result<()> {
    let mut state = load_state(prefix)?;
    let port = port_of(&state, name)?;
    imp.validate(name)?;
    if port.kind != PortKind::Internet {
        bail!("port {name} is a leased line end; set it in the topology file");
    }
    let branch = state
        .topology
        .branches
        .iter_mut()
        .find(|b| b.id == port.id.branch)
        .context("branch vanished")?;
    let wan = branch
        .wan
        .get_mut(usize::from(port.id.port))
        .context("port vanished")?;
    // The per-direction tables win over the shared fields, so write both directions explicitly.
    let (up, down, nat) = (wan.up_impairment(), wan.down_impairment(), wan.nat);
    *wan = crate::topology::WanPort {
        nat,
        up: if dir != Direction::Down {
            imp.clone()
        } else {
            up
        },
        down: if dir != Direction::Up {
            imp.clone()
        } else {
            down
        },
        ..Default::default()
    };
    apply_impairments(&state)
}

/// Saves the state, hands the emulator its new config (SIGHUP) and updates the diversion rules.
fn apply_impairments(state: &State) -> anyhow::Result<()> {
    save_state(state)?;
    write_emu_config(state)?;
    if let Some(&pid) = state.pids.get("wanem") {
        // SAFETY: kill(2) on the emulator PID we started.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGHUP) };
    }
    sync_diversion(state)
}

/// Sets (or, with an empty impairment, removes) the bottleneck of WAN address pair `from` → `to`
/// (and `to` → `from` when `both_directions`) while traffic runs.
pub fn pair_set(
    prefix: &str,
    from: &str,
    to: &str,
    both_directions: bool,
    imp: &Impairment,
) -> anyhow::Result<()> {
    pair_set_shared(prefix, from, to, both_directions, imp, &[])
}

/// [`pair_set`], with other address pairs (e.g. background hosts on the emulated internet)
/// crossing the same bottleneck (`shared_with`; reversed for the reverse direction).
pub fn pair_set_shared(
    prefix: &str,
    from: &str,
    to: &str,
    both_directions: bool,
    imp: &Impairment,
    shared_with: &[(std::net::Ipv4Addr, std::net::Ipv4Addr)],
) -> anyhow::Result<()> {
    let mut state = load_state(prefix)?;
    let (a, b) = (port_of(&state, from)?, port_of(&state, to)?);
    imp.validate(&format!("pair {from}>{to}"))?;
    if imp.burst_loss_pct.is_some() || imp.reorder.is_some() {
        bail!("a pair takes rate, delay, jitter, loss and queue only");
    }
    let (fa, fb) = (a.id.to_string(), b.id.to_string());
    // Drop every entry that covers either direction we are about to set.
    state.topology.pairs.retain(|p| {
        let fwd = p.from == fa && p.to == fb;
        let rev = p.from == fb && p.to == fa;
        !(fwd || (both_directions && rev) || (p.both_directions && rev))
    });
    if !imp.is_none() {
        state.topology.pairs.push(crate::topology::Pair {
            from: fa,
            to: fb,
            both_directions,
            rate_mbit: imp.rate_mbit,
            delay_ms: imp.delay_ms,
            jitter_ms: imp.jitter_ms,
            loss_pct: imp.loss_pct,
            queue_kib: imp.queue_kib,
            background_mbit: imp.background_mbit,
            shared_with: shared_with.to_vec(),
        });
    }
    apply_impairments(&state)
}

/// Removes testbed `prefix` completely: processes in its namespaces (by PID), the namespaces
/// (and with them every veth), and the state directory. Works without a state file.
pub fn down(prefix: &str) -> anyhow::Result<()> {
    validate_prefix(prefix)?;
    let namespaces = our_netns(prefix)?;
    // Every process living in one of our namespaces: the daemons the state file records count
    // only while they live there (a PID may have been reused), so this scan covers them. (It
    // used to check each recorded PID against a fresh scan of every namespace, `ip netns pids`
    // N times per PID: ~3 s per branch at 250 branches.)
    let mut pids: Vec<u32> = namespaces.iter().flat_map(|n| ns_pids(n)).collect();
    pids.sort_unstable();
    pids.dedup();
    stop_pids(&pids, Duration::from_secs(3));
    let mut errors = Vec::new();
    for ns in &namespaces {
        if let Err(e) = sh::run("ip", &["netns", "del", ns]) {
            errors.push(format!("{e:#}"));
        }
    }
    let dir = state_dir(prefix);
    if dir.exists() {
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            errors.push(format!("remove {}: {e}", dir.display()));
        }
    }
    if !errors.is_empty() {
        bail!("testbed down {prefix}: {}", errors.join("; "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn router_macs_follow_the_inventory_convention() {
        assert_eq!(
            router_mac(std::net::Ipv4Addr::new(198, 18, 10, 1)),
            "02:00:c6:12:0a:01"
        );
    }

    #[test]
    fn unimpaired_topology_diverts_nothing() {
        let t = topology::parse("[[branch]]\nid = 1\nwan = [{}, {}]\n").unwrap();
        assert!(diversion_selectors(&t).is_empty());
        let t = topology::parse(
            "[[branch]]\nid = 1\nwan = [{ up = { delay_ms = 5 } }, {}]\n\
             [[branch]]\nid = 2\nwan = [{}]\n[[pair]]\nfrom = \"1b\"\nto = \"2a\"\nrate_mbit = 5\n",
        )
        .unwrap();
        assert_eq!(
            diversion_selectors(&t)
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            vec![
                "from 198.18.10.0/24".to_owned(),
                "from 198.18.11.2/32 to 198.18.20.2/32".to_owned(),
                "from 198.18.20.2/32 to 198.18.11.2/32".to_owned(),
            ]
        );
    }

    fn sel(from: Option<&str>, to: Option<&str>) -> Selector {
        let side = |x: Option<&str>| {
            x.map(|x| {
                let (a, l) = x.split_once('/').unwrap();
                (a.parse().unwrap(), l.parse().unwrap())
            })
        };
        Selector {
            from: side(from),
            to: side(to),
        }
    }

    #[test]
    fn diversion_changes_make_before_break() {
        let link = sel(Some("198.18.10.0/24"), None);
        let pair = sel(Some("198.18.11.2/32"), Some("198.18.20.2/32"));
        let new = sel(None, Some("198.18.21.0/24"));
        let current = vec![(1000, Some(link)), (1001, Some(pair))];
        // A bottleneck's rate changed: the same rules, nothing to do (the old code deleted and
        // re-added every rule, and traffic took the direct route in between).
        let same: BTreeSet<_> = [pair, link].into_iter().collect();
        assert!(diversion_commands(&current, &same).unwrap().is_empty());
        // One rule goes, one comes: the new one first, at a free priority.
        let wanted: BTreeSet<_> = [pair, new].into_iter().collect();
        assert_eq!(
            diversion_commands(&current, &wanted).unwrap(),
            vec![
                "rule add pref 1002 to 198.18.21.0/24 lookup 200".to_owned(),
                "rule del pref 1000".to_owned(),
            ]
        );
        // Duplicates and rules that cannot be read are removed.
        let messy = vec![(1000, Some(pair)), (1003, None), (1005, Some(pair))];
        let only_pair: BTreeSet<_> = [pair].into_iter().collect();
        assert_eq!(
            diversion_commands(&messy, &only_pair).unwrap(),
            vec![
                "rule del pref 1003".to_owned(),
                "rule del pref 1005".to_owned()
            ]
        );
    }

    #[test]
    fn rules_read_back_as_ip_prints_them() {
        let rules: Vec<RuleJson> = serde_json::from_str(
            r#"[{"priority":1000,"src":"198.18.10.0","srclen":24,"table":"200"},
                {"priority":1001,"src":"198.18.10.2","dst":"198.18.20.2","table":"200"},
                {"priority":1002,"src":"all","dst":"198.18.11.0","dstlen":24,"table":"200"},
                {"priority":1003,"src":"fe80::1","table":"200"}]"#,
        )
        .unwrap();
        let got: Vec<_> = rules.iter().map(RuleJson::selector).collect();
        assert_eq!(
            got,
            vec![
                Some(sel(Some("198.18.10.0/24"), None)),
                Some(sel(Some("198.18.10.2/32"), Some("198.18.20.2/32"))),
                Some(sel(None, Some("198.18.11.0/24"))),
                None,
            ]
        );
    }
}
