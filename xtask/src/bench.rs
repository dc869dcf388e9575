//! `cargo xtask bench controller`: how fast `ssc` programs real Open vSwitch instances (the OFC's
//! push path: compile + FLOW_MODs + barriers), for the paper topology and a synthetic 15-branch
//! full mesh with 16 path groups per ordered branch pair (issue 5's benchmark).
//!
//! Per case:
//! 1. `testbed up --ovs` (in-process, [`crate::testbed::up`]) from a topology file: the shipped
//!    `examples/testbed-paper.toml`, or a generated N-branch topology ([`mesh_topology_toml`],
//!    written to a temp file) without impairments (the emulator is not involved: OpenFlow runs
//!    over unix sockets);
//! 2. bridge `br0` per gateway exactly as `crates/controller/tests/ofc_netns.rs` (netdev,
//!    OpenFlow13, fail_mode=secure, datapath id = branch id, `wan{k}` = 1+k, `mpa{k}` = 101+k);
//! 3. `ssc run` (release build, fresh database in a temp dir, one unix socket per gateway OVS,
//!    `stage_timeout_ms`/`request_timeout_ms` 120 s so that CPU contention on this 2-core machine
//!    can never drop a switch mid-measurement, SDC polling every 600 s so that flow-stats dumps
//!    do not compete with the push); every bridge `set-controller`s to it while the inventory is
//!    empty, and we wait until each switch is connected and its (empty) reconcile is done;
//! 4. per repetition: `POST /api/v1/import` of the inventory and all path groups in one
//!    transaction; `ssc` validates and compiles it (`swap::compile`), commits, and its OFC pushes
//!    the difference to every switch in install order, each step's FLOW_MODs pipelined and closed
//!    by one barrier that every switch must answer before the next step
//!    (`controller::ofc` `Coordinator::update`, `switch.rs` `Conn::apply`). We poll
//!    `GET /api/v1/stats` until `last_push` appears: its `ms` is ssc's own clock from the start of
//!    the diff to the last barrier reply of the last step (**`push_ms`**), `flow_mods` the
//!    FLOW_MODs sent (must equal the compiled flow count, i.e. everything was pushed) and
//!    `failed_members` must be 0. `import_ms` is the REST call (validation, compile, database
//!    commit); `total_ms` is import start → `last_push` seen (poll granularity 2 ms).
//!    Then every switch's table is checked with `ovs-ofctl dump-flows`: its set of cookies must
//!    equal the compiled table's (exact; not part of the timing). Between repetitions an empty
//!    import deletes everything again (also checked on the switches).
//! 5. `compile_ms` is `swap::compile` in this process (release, best of 3), the pure part of the
//!    import.
//!
//! Teardown (`ssc` child by PID, `testbed down`) runs in `Drop`, also on error or panic.
//!
//! The synthetic mesh's path groups come from the automatic PC
//! (`path_config::PathConfigurator`, `groups_per_pair` = `--groups`, no measurements: port
//! capacities only), as `tests/ofc_netns.rs` does for the paper topology; its time is reported
//! as `pc_ms`. `--synthetic-groups` uses a deterministic generator instead ([`mesh_groups`]:
//! group 0 the 4 direct members, every other group 4 one-transit members through rotating
//! transit branches and ports). The flow count is always the one `swap::compile` gives.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use controller::inventory::{BranchId, Inventory, PortIndex, PortRef};
use controller::path_config::{Measurements, PathConfigurator, Settings as PcSettings};
use controller::path_group::{MemberPath, PathGroup, PathGroupId, PathGroups, Transit};
use controller::sdc::StatsView;
use controller::ui::client::Client;
use serde::Serialize;
use serde_json::json;

use crate::stats::median_or_nan;
use crate::{sh, testbed, topology};

/// Bearer token of the benchmark's `ssc` (a throwaway instance on loopback).
const TOKEN: &str = "bench-controller-token-0123456789";

/// Longest wait for one whole push (import → every barrier) before the case fails.
const PUSH_DEADLINE: Duration = Duration::from_secs(300);

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Repository root (examples, cargo).
    pub root: PathBuf,
    /// Branches of the synthetic mesh (2..=15).
    pub mesh_branches: u8,
    /// Path groups per ordered pair in the mesh (1..=16).
    pub mesh_groups: u8,
    /// Measured imports per case (the median is reported).
    pub repeat: usize,
    /// Skip the paper case.
    pub skip_paper: bool,
    /// Skip the mesh case.
    pub skip_mesh: bool,
    /// Mesh groups from [`mesh_groups`] instead of the automatic PC.
    pub synthetic_groups: bool,
    /// Testbed prefix stem (the case letter is appended).
    pub prefix: String,
}

/// The result of one case.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    /// What was measured.
    pub description: String,
    /// Where the path groups came from.
    pub groups_from: String,
    /// Time of the automatic PC that computed the groups, ms (release, in this process).
    pub pc_ms: Option<f64>,
    /// Switches (gateways, one ovs-vswitchd each).
    pub switches: usize,
    /// Path groups imported.
    pub groups: usize,
    /// Member paths imported.
    pub members: usize,
    /// Flows of the compiled tables, all switches.
    pub flows: usize,
    /// FLOW_MODs ssc sent for the push (median run; equals `flows` from empty switches).
    pub flow_mods: usize,
    /// Steps of the push (each closed by a barrier on every switch it touches).
    pub steps: usize,
    /// `swap::compile` in-process, ms (best of 3).
    pub compile_ms: f64,
    /// Median of ssc's `last_push.ms`: diff + all FLOW_MODs + every barrier reply.
    pub push_ms: f64,
    /// `flows / push_ms`.
    pub flows_per_s: f64,
    /// Every run's `push_ms`.
    pub push_ms_runs: Vec<f64>,
    /// Median REST import (validate + compile + commit in ssc), ms.
    pub import_ms: f64,
    /// Median import start → push reported done, ms.
    pub total_ms: f64,
}

/// Runs the benchmark; returns the results by case name.
pub fn controller(opts: &Options) -> anyhow::Result<BTreeMap<String, CaseResult>> {
    ensure!(opts.repeat >= 1, "--repeat must be at least 1");
    ensure!(
        (2..=15).contains(&opts.mesh_branches),
        "--branches must be in 2..=15"
    );
    ensure!(
        (1..=16).contains(&opts.mesh_groups),
        "--groups must be in 1..=16"
    );
    let ssc = crate::mmsg::build_release(&opts.root, "controller", "ssc")?;
    let mut out = BTreeMap::new();
    if !opts.skip_paper {
        let inv_text = std::fs::read_to_string(opts.root.join("examples/inventory-paper.toml"))
            .context("read examples/inventory-paper.toml")?;
        let inv = Inventory::from_toml(&inv_text).context("paper inventory")?;
        let groups_text =
            std::fs::read_to_string(opts.root.join("examples/paths-paper-table2.toml"))
                .context("read examples/paths-paper-table2.toml")?;
        let groups = PathGroups::from_toml(&inv, &groups_text).context("paper path groups")?;
        let topo = std::fs::read_to_string(opts.root.join("examples/testbed-paper.toml"))
            .context("read examples/testbed-paper.toml")?;
        let case = Case {
            name: "paper".to_owned(),
            description: "paper topology (5 branches x 2 ports), Table II groups".to_owned(),
            groups_from: "examples/paths-paper-table2.toml".to_owned(),
            pc_ms: None,
            inventory: inv,
            groups,
            topology_toml: topo,
        };
        let r = run_case(opts, &ssc, &case, &format!("{}p", opts.prefix))?;
        out.insert(case.name, r);
    }
    if !opts.skip_mesh {
        let n = opts.mesh_branches;
        let inv = mesh_inventory(n)?;
        let (groups, groups_from, pc_ms) = if opts.synthetic_groups {
            (
                mesh_groups(&inv, opts.mesh_groups)?,
                "deterministic generator (bench::mesh_groups)",
                None,
            )
        } else {
            let t = Instant::now();
            let mut pc = PathConfigurator::new(PcSettings {
                groups_per_pair: opts.mesh_groups,
                ..PcSettings::default()
            });
            pc.update(&inv, &Measurements::new());
            let groups = pc.groups(&inv)?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            println!(
                "bench mesh{n}: automatic PC: {} groups in {ms:.0} ms",
                groups.len()
            );
            (groups, "automatic PC (port capacities)", Some(ms))
        };
        let case = Case {
            groups_from: groups_from.to_owned(),
            pc_ms,
            name: format!("mesh{n}"),
            description: format!(
                "full mesh {n} branches x 2 internet ports, {} groups per ordered pair",
                opts.mesh_groups
            ),
            inventory: inv,
            groups,
            topology_toml: mesh_topology_toml(n),
        };
        let r = run_case(opts, &ssc, &case, &format!("{}m", opts.prefix))?;
        out.insert(case.name, r);
    }
    Ok(out)
}

/// Prints the results as a table.
pub fn print_table(results: &BTreeMap<String, CaseResult>) {
    println!(
        "{:<8} {:>8} {:>7} {:>8} {:>8} {:>10} {:>10} {:>12} {:>10} {:>10}",
        "case",
        "switches",
        "groups",
        "members",
        "flows",
        "compile_ms",
        "push_ms",
        "flows_per_s",
        "import_ms",
        "total_ms"
    );
    for (name, r) in results {
        println!(
            "{:<8} {:>8} {:>7} {:>8} {:>8} {:>10.2} {:>10.1} {:>12.0} {:>10.1} {:>10.1}",
            name,
            r.switches,
            r.groups,
            r.members,
            r.flows,
            r.compile_ms,
            r.push_ms,
            r.flows_per_s,
            r.import_ms,
            r.total_ms
        );
    }
    for (name, r) in results {
        let runs: Vec<String> = r.push_ms_runs.iter().map(|m| format!("{m:.1}")).collect();
        println!("{name}: push_ms of each run: {}", runs.join(", "));
    }
}

struct Case {
    name: String,
    description: String,
    groups_from: String,
    pc_ms: Option<f64>,
    inventory: Inventory,
    groups: PathGroups,
    topology_toml: String,
}

/// The WAN address of port k of branch b in the testbed plan (DESIGN §5): 198.18.(10b+k).2/24.
fn third_octet(b: u8, k: u8) -> u16 {
    10 * u16::from(b) + u16::from(k)
}

/// The inventory of an `n`-branch full mesh, two internet ports per branch, addresses and MACs
/// as `examples/inventory-paper.toml` (the testbed's plan).
pub fn mesh_inventory(n: u8) -> anyhow::Result<Inventory> {
    let mut s = String::new();
    for b in 1..=n {
        s += &format!(
            "[[branches]]\nid = {b}\nname = \"branch-{b}\"\nlan = [\"198.19.{b}.0/24\"]\n\n"
        );
        for (k, letter) in [(0u8, 'a'), (1, 'b')] {
            let t = third_octet(b, k);
            s += &format!(
                "[[branches.wan]]\nport = \"{letter}\"\naddress = \"198.18.{t}.2/24\"\n\
                 gateway = \"198.18.{t}.1\"\nmac = \"02:00:c6:12:{t:02x}:02\"\n\
                 gateway_mac = \"02:00:c6:12:{t:02x}:01\"\nkind = \"internet\"\ncapacity_mbps = 40\n\n"
            );
        }
    }
    Inventory::from_toml(&s).context("generated mesh inventory")
}

/// The testbed topology of the mesh: `n` branches, two internet ports each, no impairment, no
/// LAN hosts (OpenFlow runs over unix sockets; no traffic is sent).
pub fn mesh_topology_toml(n: u8) -> String {
    let mut s = format!("name = \"bench-mesh-{n}\"\n");
    for b in 1..=n {
        s += &format!("\n[[branch]]\nid = {b}\nhosts = 0\nwan = [{{}}, {{}}]\n");
    }
    s
}

/// Deterministic path groups for every ordered pair of a two-port mesh: group 0 the four direct
/// members, group g ≥ 1 four one-transit members (one per source/destination port pair) through
/// transit branch `others[(4(g−1) + slot) mod len]`, ingress port `(g + slot) mod 2`, egress port
/// `(g / 2 + slot) mod 2` (hairpin when they are equal).
pub fn mesh_groups(inv: &Inventory, per_pair: u8) -> anyhow::Result<PathGroups> {
    let ids: Vec<BranchId> = inv.branches().map(|b| b.id).collect();
    let port =
        |b: BranchId, k: u8| -> anyhow::Result<PortRef> { Ok(PortRef::new(b, PortIndex::new(k)?)) };
    let mut groups = Vec::new();
    for &a in &ids {
        for &b in ids.iter().filter(|&&b| b != a) {
            let others: Vec<BranchId> = ids.iter().copied().filter(|&t| t != a && t != b).collect();
            for g in 0..per_pair {
                let mut members = Vec::new();
                for slot in 0..4u8 {
                    let (src, dst) = (port(a, slot / 2)?, port(b, slot % 2)?);
                    let path = if g == 0 || others.is_empty() {
                        MemberPath::direct(src, dst)?
                    } else {
                        let i = (4 * usize::from(g - 1) + usize::from(slot)) % others.len();
                        let t = others.get(i).copied().context("transit index")?;
                        let transit = Transit {
                            ingress: port(t, (g + slot) % 2)?,
                            egress: port(t, (g / 2 + slot) % 2)?,
                        };
                        MemberPath::new(src, vec![transit], dst)?
                    };
                    members.push(path);
                }
                groups.push(PathGroup::from_members(
                    a,
                    b,
                    PathGroupId::new(g)?,
                    members,
                )?);
            }
        }
    }
    Ok(PathGroups::new(inv, groups)?)
}

/// The testbed and `ssc` of one case; both go away in `Drop`, also on error or panic.
struct Bed {
    prefix: String,
    state: PathBuf,
    ssc: Option<Child>,
    dir: tempfile::TempDir,
    up: bool,
}

impl Drop for Bed {
    fn drop(&mut self) {
        if let Some(mut c) = self.ssc.take() {
            // Our own child, by its PID.
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        if self.up {
            if let Err(e) = testbed::down(&self.prefix) {
                eprintln!("bench: testbed down {}: {e:#}", self.prefix);
            }
        }
    }
}

impl Bed {
    fn ovs_dir(&self, b: u8) -> PathBuf {
        crate::ovs::dir(&self.state, b)
    }

    fn vsctl(&self, b: u8, args: &[&str]) -> anyhow::Result<String> {
        let db = crate::ovs::db_arg(&self.state, b);
        let mut a = vec![db.as_str(), "--timeout=30"];
        a.extend(args);
        sh::ns(&testbed::ns_gw(&self.prefix, b), "ovs-vsctl", &a)
    }

    /// The cookies of the flows on `br0` of gateway `b` (`ovs-ofctl dump-flows`).
    fn cookies(&self, b: u8) -> anyhow::Result<BTreeSet<u64>> {
        let mgmt = format!("unix:{}", self.ovs_dir(b).join("br0.mgmt").display());
        let out = sh::run("ovs-ofctl", &["-O", "OpenFlow13", "dump-flows", &mgmt])?;
        let mut set = BTreeSet::new();
        for line in out.lines().filter(|l| l.contains("cookie=")) {
            let c = line
                .split([',', ' '])
                .find_map(|f| f.trim().strip_prefix("cookie=0x"))
                .with_context(|| format!("no cookie in {line}"))?;
            let c = u64::from_str_radix(c, 16).with_context(|| format!("cookie in {line}"))?;
            ensure!(set.insert(c), "gw{b}: cookie {c:#x} twice");
        }
        Ok(set)
    }
}

/// `GET /api/v1/stats`, typed.
fn stats(api: &Client) -> anyhow::Result<StatsView> {
    serde_json::from_value(api.get("/api/v1/stats")?).context("stats from ssc")
}

fn wait_for<T>(
    what: &str,
    timeout: Duration,
    poll: Duration,
    mut f: impl FnMut() -> anyhow::Result<Option<T>>,
) -> anyhow::Result<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(t) = f()? {
            return Ok(t);
        }
        if Instant::now() > deadline {
            bail!("{what}: not within {timeout:?}");
        }
        std::thread::sleep(poll);
    }
}

fn run_case(opts: &Options, ssc: &Path, case: &Case, prefix: &str) -> anyhow::Result<CaseResult> {
    let inv = &case.inventory;
    let branches: Vec<u8> = inv.branches().map(|b| b.id.get()).collect();
    println!(
        "bench {}: {} ({} switches, {} groups from {})",
        case.name,
        case.description,
        branches.len(),
        case.groups.len(),
        case.groups_from
    );

    // The pure part: compile, best of 3; and the table each switch must end up with.
    let mut compile_ms = f64::INFINITY;
    let mut tables = None;
    for _ in 0..3 {
        let t = Instant::now();
        let compiled = controller::swap::compile(inv, &case.groups)?;
        compile_ms = compile_ms.min(t.elapsed().as_secs_f64() * 1e3);
        tables = Some(compiled);
    }
    let tables = tables.context("compiled")?;
    let want: BTreeMap<u8, BTreeSet<u64>> = branches
        .iter()
        .map(|&b| {
            let id = BranchId::new(b)?;
            Ok((b, tables.switch(id).iter().map(|f| f.cookie.0).collect()))
        })
        .collect::<anyhow::Result<_>>()?;
    let flows: usize = want.values().map(BTreeSet::len).sum();
    let members = case.groups.members().count();

    let dir = tempfile::tempdir().context("temp dir")?;
    let topo_file = dir.path().join("topology.toml");
    std::fs::write(&topo_file, &case.topology_toml)?;
    let topo = topology::parse(&std::fs::read_to_string(&topo_file)?)?;
    let mut bed = Bed {
        prefix: prefix.to_owned(),
        state: testbed::state_dir(prefix),
        ssc: None,
        dir,
        up: false,
    };
    let t_up = Instant::now();
    // `up` removes what it built if it fails, and refuses a prefix that exists: only a testbed
    // that we built is ours to tear down.
    testbed::up(
        &topo,
        &testbed::UpOptions {
            prefix: prefix.to_owned(),
            ovs: true,
        },
    )?;
    bed.up = true;
    println!(
        "bench {}: testbed {prefix} up with {} OVS instances in {:.1} s",
        case.name,
        branches.len(),
        t_up.elapsed().as_secs_f64()
    );

    // Bridges as in crates/controller/tests/ofc_netns.rs.
    for b in inv.branches() {
        let id = b.id.get();
        let dpid = format!(
            "other-config:datapath-id={}",
            controller::ofc::datapath_id_of(b.id)
        );
        let mut args: Vec<String> = [
            "add-br",
            "br0",
            "--",
            "set",
            "bridge",
            "br0",
            "datapath_type=netdev",
            "protocols=OpenFlow13",
            "fail_mode=secure",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        args.push(dpid);
        for w in &b.wan {
            let k = w.port.get();
            for (name, extra, ofport) in [
                (format!("wan{k}"), None, 1 + u32::from(k)),
                (format!("mpa{k}"), Some("type=internal"), 101 + u32::from(k)),
            ] {
                args.extend(
                    [
                        "--",
                        "add-port",
                        "br0",
                        &name,
                        "--",
                        "set",
                        "interface",
                        &name,
                    ]
                    .map(str::to_owned),
                );
                if let Some(e) = extra {
                    args.push(e.to_owned());
                }
                args.push(format!("ofport_request={ofport}"));
            }
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        bed.vsctl(id, &refs)
            .with_context(|| format!("create br0 on gw{id}"))?;
    }

    // ssc: fresh database, API on loopback, OpenFlow on one unix socket per gateway only.
    let config = bed.dir.path().join("ssc.toml");
    let sockets: Vec<String> = branches
        .iter()
        .map(|&b| {
            format!(
                "{:?}",
                bed.ovs_dir(b).join("ssc.sock").display().to_string()
            )
        })
        .collect();
    std::fs::write(
        &config,
        format!(
            "[api]\ntoken = \"{TOKEN}\"\nlisten = \"127.0.0.1:0\"\n\n[database]\npath = \"ssc.redb\"\n\n\
             [openflow]\nlisten = \"\"\nunix = [{}]\nrequest_timeout_ms = 120000\n\
             stage_timeout_ms = 120000\nstats_interval_ms = 600000\n",
            sockets.join(", ")
        ),
    )?;
    let log = std::fs::File::create(bed.dir.path().join("ssc.log"))?;
    let mut cmd = Command::new(ssc);
    cmd.args(["run", "--config"]).arg(&config);
    let (child, base) = crate::e2e::spawn_ssc(cmd, log)?;
    bed.ssc = Some(child);
    let api = Client::new(&base, Some(TOKEN), Duration::from_secs(600));

    for &b in &branches {
        let target = format!("unix:{}", bed.ovs_dir(b).join("ssc.sock").display());
        bed.vsctl(b, &["set-controller", "br0", &target])?;
    }
    wait_for(
        "every switch connected and reconciled",
        Duration::from_secs(60),
        Duration::from_millis(20),
        || {
            let s = stats(&api)?;
            let ready = branches.iter().all(|&b| {
                s.branches
                    .iter()
                    .any(|x| x.branch == b && x.connected && x.reconciles >= 1)
            });
            Ok(ready.then_some(()))
        },
    )?;

    let body = json!({"inventory": inv.to_file(), "groups": case.groups.to_file()});
    let empty = json!({"inventory": {"branches": []}, "groups": {"groups": []}});
    let mut push_runs = Vec::new();
    let mut import_runs = Vec::new();
    let mut total_runs = Vec::new();
    let mut last = None;
    for run in 0..opts.repeat {
        if run > 0 {
            // Back to empty switches: an empty import deletes every flow of ours. Wait for its
            // push report too, so the next report we see is the measured import's.
            let before = stats(&api)?.last_push;
            api.call("POST", "/api/v1/import", Some(&empty))?;
            wait_for(
                "switches emptied",
                PUSH_DEADLINE,
                Duration::from_millis(20),
                || {
                    let p = stats(&api)?.last_push;
                    if p.is_none() || p == before {
                        return Ok(None);
                    }
                    for &b in &branches {
                        if !bed.cookies(b)?.is_empty() {
                            return Ok(None);
                        }
                    }
                    Ok(Some(()))
                },
            )?;
        }
        let before = stats(&api)?.last_push;
        let t0 = Instant::now();
        api.call("POST", "/api/v1/import", Some(&body))?;
        let import_ms = t0.elapsed().as_secs_f64() * 1e3;
        let push = wait_for(
            "push reported",
            PUSH_DEADLINE,
            Duration::from_millis(2),
            || {
                let p = stats(&api)?.last_push;
                Ok(p.filter(|p| Some(*p) != before))
            },
        )?;
        let total_ms = t0.elapsed().as_secs_f64() * 1e3;
        ensure!(push.failed_members == 0, "push failed members: {push:?}");
        ensure!(
            push.flow_mods == flows,
            "push sent {} FLOW_MODs, the compiled tables have {flows} flows",
            push.flow_mods
        );
        ensure!(
            push.switches == branches.len(),
            "push reached {} switches of {}",
            push.switches,
            branches.len()
        );
        for &b in &branches {
            let have = bed.cookies(b)?;
            let w = want.get(&b).context("compiled table")?;
            ensure!(
                &have == w,
                "gw{b}: {} flows on the switch, {} compiled",
                have.len(),
                w.len()
            );
        }
        let ms = push.ms;
        println!(
            "bench {} run {}: {flows} flows on {} switches: push {ms:.1} ms ({:.0} flows/s), import {import_ms:.1} ms, import→pushed {total_ms:.1} ms; tables verified",
            case.name,
            run + 1,
            branches.len(),
            flows as f64 / (ms / 1e3)
        );
        push_runs.push(ms);
        import_runs.push(import_ms);
        total_runs.push(total_ms);
        last = Some(push);
    }
    let push_ms = median_or_nan(&push_runs);
    Ok(CaseResult {
        description: case.description.clone(),
        groups_from: case.groups_from.clone(),
        pc_ms: case.pc_ms,
        switches: branches.len(),
        groups: case.groups.len(),
        members,
        flows,
        flow_mods: last.map_or(0, |p| p.flow_mods),
        steps: last.map_or(0, |p| p.steps),
        compile_ms,
        push_ms,
        flows_per_s: flows as f64 / (push_ms / 1e3),
        push_ms_runs: push_runs,
        import_ms: median_or_nan(&import_runs),
        total_ms: median_or_nan(&total_runs),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mesh_groups_are_valid_and_deterministic() {
        let inv = mesh_inventory(15).unwrap();
        let g = mesh_groups(&inv, 16).unwrap();
        assert_eq!(g.len(), 15 * 14 * 16);
        assert_eq!(g.members().count(), 15 * 14 * 16 * 4);
        assert_eq!(g, mesh_groups(&inv, 16).unwrap());
        let tables = controller::swap::compile(&inv, &g).unwrap();
        assert!(tables.iter().count() > 0);
    }

    #[test]
    fn mesh_topology_parses() {
        let t = topology::parse(&mesh_topology_toml(15)).unwrap();
        assert_eq!(t.branches.len(), 15);
        assert_eq!(t.ports().len(), 30);
    }
}
