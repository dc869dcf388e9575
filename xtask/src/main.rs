//! `cargo xtask`: MMS developer tasks (see the library docs of `xtask`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use xtask::testbed::{self, Direction, UpOptions};
use xtask::topology::{self, Impairment};
use xtask::{
    baseline, bench, bench_failover, bench_latency, bench_tunnel, congestion, demo, demo_paper,
    deps, experiment, table1, wanem,
};

/// MMS developer tasks: testbed, demo, tests.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// The README's main job: bring up the 2x2 testbed, measure every path with iperf3, print a
    /// goodput table, tear down.
    Demo {
        /// Name prefix of the demo's namespaces.
        #[arg(long, default_value = "mmsdemo")]
        prefix: String,
        /// Seconds of traffic (per path in the 2x2 demo).
        #[arg(long, default_value_t = 8)]
        seconds: u32,
        /// Which demo: `paper` (5 branches, ssc, OVS, multi-WAN-hop path groups) or `2x2`
        /// (two branches without OVS: each path alone, all at once, and the tunnel).
        #[arg(long, default_value = "paper", value_parser = ["paper", "2x2"])]
        topology: String,
        /// `paper` only: after the table keep the system up with light traffic until Ctrl-C,
        /// and print the URL of ssc's web dashboard with a read-only token to log in with.
        #[arg(long)]
        keep: bool,
    },
    /// The structure of the workspace from the code's own paths: per crate, every file with its
    /// floor (one above the highest file it imports) and imports; then circles between files and
    /// files over 800 lines of non-test code (docs/ARCHITECTURE.md "Rules"). Exits 1 when a rule
    /// is broken.
    Arch {
        /// Print the module tables of docs/ARCHITECTURE.md instead (markdown).
        #[arg(long)]
        markdown: bool,
        /// Read another checkout (e.g. a worktree of an older commit) instead of this one.
        #[arg(long)]
        root: Option<PathBuf>,
    },
    /// Run every test: unit, property, and netns integration tests (what CI runs).
    Test {
        /// Skip the netns integration tests (unit tests only).
        #[arg(long)]
        unit_only: bool,
    },
    /// Static `mmsg` and `ssc` (+crt-static, `--profile dist`), split debug info, man pages and
    /// completions, the Debian packages `mms-gateway` and `mms-controller`, and their checks:
    /// static (file, ldd), `--version` in an empty netns, package contents, `systemd-analyze
    /// verify`, both daemons started from the unpacked packages up to sd_notify READY=1
    /// (docs/install.md).
    Dist {
        /// Link-time optimisation: fat (smallest), thin (faster build) or off (fastest build,
        /// 16 codegen units: what `cargo xtask test` checks; not for shipped packages).
        #[arg(long, value_enum, default_value = "fat")]
        lto: xtask::dist::Lto,
        /// Output directory (default: `<target dir>/mms-dist`).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Network-namespace testbed (DESIGN §5).
    #[command(subcommand)]
    Testbed(TestbedCmd),
    /// Benchmarks on the testbed (docs/ofc.md "Benchmark").
    #[command(subcommand)]
    Bench(BenchCmd),
    /// The paper's evaluation (Tables I, III-VI) from `experiments/<NAME>.toml`: IPoMP and the
    /// single-path VXLAN baseline side by side; writes results/<NAME>.{json,md} and one SVG per
    /// figure (docs/experiments.md). `list` shows the experiments. `congestion` is seed 001
    /// §IV-A4's timeline instead (a striped flow, one group's path flooded; `--secs` sets its
    /// length): results/congestion.{json,md,svg}.
    Experiment {
        /// Experiment name (`experiments/<NAME>.toml`), e.g. `table1`, `case-a`, `quick`; or `list`;
        /// or `congestion` (seed 001 §IV-A4, `xtask/src/congestion.rs`); or `mdi` (seed 001
        /// Fig. 3, `xtask/src/mdi.rs`); or `uplink-lb` (seed 004: external traffic load
        /// balancing, `xtask/src/uplink_lb.rs`); or `adaptive` (seed 003: adaptive path groups,
        /// `xtask/src/adaptive.rs`, `--secs` sets the transfer); or `all`: every one of them
        /// (`--reps` per case, default 3), the total time estimated first, resuming from the
        /// results already in `--out` (`xtask/src/experiment/all.rs`).
        name: String,
        /// Only these figures (comma-separated ids, e.g. `fig10a,fig10c`).
        #[arg(long, value_delimiter = ',')]
        figures: Vec<String>,
        /// Only these test cases (e.g. `1,4,10-12`).
        #[arg(long)]
        cases: Option<String>,
        /// Repetitions per case (default: the file's `reps`).
        #[arg(long)]
        reps: Option<u32>,
        /// Seconds of traffic per measurement (default: the file's `secs`).
        #[arg(long)]
        secs: Option<u32>,
        /// Output directory.
        #[arg(long, default_value = "results")]
        out: PathBuf,
        /// Skip Table I's end-to-end MPTCP column (its own 2x2 testbed).
        #[arg(long)]
        skip_e2e_mptcp: bool,
        /// Keep the other cases of an existing results/<NAME>.json: the cases run now replace
        /// the same cases there (re-running a few cases of a long experiment).
        #[arg(long)]
        merge: bool,
        /// Every `mmsg`'s `connections_per_group` (1..=8, default 1): with K, a path group's
        /// first K end-to-end connections get a tunnel connection each, as the paper maps each
        /// end-to-end connection to its own MPTCP connection (docs/mmsg.md "Connections per
        /// path group"). Recorded per case in the JSON.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=8))]
        connections_per_group: u8,
        /// Run nothing: rewrite results/<NAME>.md and the SVGs from results/<NAME>.json.
        #[arg(long, conflicts_with_all = ["figures", "cases", "reps", "secs", "merge"])]
        replot: bool,
        /// Name prefix of the testbed.
        #[arg(long, default_value = "mmsexp")]
        prefix: String,
        /// With `all`: print the plan and its time estimate, run nothing.
        #[arg(long)]
        dry_run: bool,
        /// With `mdi`: also run the sender without RACK (`net.ipv4.tcp_recovery = 0`), like
        /// the paper's 2015 hosts.
        #[arg(long)]
        no_rack: bool,
        /// With `mdi`: run the striping gateway with `mmsg run --send-time-budget` this
        /// (e.g. `0s` for off; default: `mmsg`'s, `5ms`).
        #[arg(long)]
        gw1_send_time_budget: Option<String>,
        /// With `mdi`: `net.ipv4.tcp_slow_start_after_idle = 0` in the gateways.
        #[arg(long)]
        no_idle_restart: bool,
        /// With `mdi`: gw2's path-group weights 1000:1, so the inner TCP's ACKs take path A.
        #[arg(long)]
        acks_on_a: bool,
        /// With `all`: forget which runner experiments (congestion, adaptive, mdi, uplink-lb)
        /// this campaign finished (results/all-progress.json) and run them again.
        #[arg(long)]
        restart: bool,
    },
    /// The WAN emulator daemon (started by `testbed up` inside the inet namespace).
    #[command(hide = true)]
    Wanem {
        /// TUN device to attach to.
        #[arg(long)]
        tun: String,
        /// JSON config (reloaded on SIGHUP).
        #[arg(long)]
        config: PathBuf,
        /// Where to write counters.
        #[arg(long)]
        stats: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum BenchCmd {
    /// The paper's Table I on the 2x2 testbed: 4 subflows sharing 40 Mbit/s in four ratios; TCP
    /// and UDP through the IPoMP tunnel and end-to-end MPTCP (see xtask/src/table1.rs).
    Table1 {
        /// Also write the results as JSON to this file (e.g. results/table1.json).
        #[arg(long)]
        json: Option<PathBuf>,
        /// Seconds of traffic per measurement (2 more are sent and omitted for TCP).
        #[arg(long, default_value_t = 10)]
        seconds: u32,
        /// Repetitions of each tunnel measurement (median and min–max are reported; the
        /// end-to-end MPTCP baseline runs once).
        #[arg(long, default_value_t = 1)]
        reps: u32,
        /// Only these rows of the table (1-based, comma-separated: `--rows 4` is 1:2:4:33);
        /// default all four.
        #[arg(long, value_delimiter = ',')]
        rows: Vec<usize>,
        /// Testbed prefix.
        #[arg(long, default_value = "mmst1")]
        prefix: String,
    },
    /// What the IPoMP tunnel costs: iperf3 TCP h1->h2 through mmsg (offload on and off) against
    /// end-to-end MPTCP between the gateways (2x2 subflows) on the 2x2 testbed with no rate
    /// limits, alternating, plus the idle ping overhead per gateway and mmsg CPU per GB (see
    /// xtask/src/bench_tunnel.rs, docs/mmsg.md "bench tunnel").
    Tunnel {
        /// Also write the results as JSON to this file (e.g. results/bench-tunnel.json).
        #[arg(long)]
        json: Option<PathBuf>,
        /// Measured seconds per transfer (2 more are sent first and omitted).
        #[arg(long, default_value_t = 10)]
        secs: u32,
        /// Repetitions of the three measurements (median, min and max are reported).
        #[arg(long, default_value_t = 3)]
        reps: u32,
        /// Testbed prefix.
        #[arg(long, default_value = "mmsbt")]
        prefix: String,
        /// Limit every internet uplink to this rate (Mbit/s, both ways) with the WAN emulator,
        /// as a branch's lines would; default: unlimited (CPU-bound, emulator bypassed).
        #[arg(long)]
        uplink_mbit: Option<f64>,
        /// Instead: what `/metrics` costs (issue #19): the TLS offload tunnel alternately
        /// without and with `--metrics-listen` plus a scraper every 1 s, `--reps` pairs.
        #[arg(long)]
        metrics_overhead: bool,
    },
    /// Latency under load through the tunnel on the 2x2 testbed (issue #16): ping, TCP
    /// request/response, a voice-like UDP flow (Type II and Type I) idle and with 1 and 4 bulk
    /// TCP flows and UDP at twice the capacity; 200-flow fairness; per variant of mmsg's levers
    /// (see xtask/src/bench_latency.rs, docs/mmsg.md "Latency under load").
    Latency {
        /// Also write the results as JSON to this file (e.g. results/bench-latency.json).
        #[arg(long)]
        json: Option<PathBuf>,
        /// Uplink rate (Mbit/s, both ways): one for all four ports, or four (1a,1b,2a,2b).
        #[arg(long, value_delimiter = ',', default_value = "10")]
        rate_mbit: Vec<f64>,
        /// One-way delay of a WAN path (ms; half on each end's uplink).
        #[arg(long, default_value_t = 10.0)]
        delay_ms: f64,
        /// Change every WAN path's one-way delay to this (ms) once a variant's connections are
        /// up, before its loads (restored after them): the paths' RTT rises under live
        /// subflows, whose kernel minimum RTT stays the old one (a route change on the WAN).
        #[arg(long)]
        delay_after_start_ms: Option<f64>,
        /// Measured seconds per load.
        #[arg(long, default_value_t = 8)]
        secs: u32,
        /// Seconds of load before the probes start.
        #[arg(long, default_value_t = 2)]
        warmup: u32,
        /// Variants of mmsg's levers, in order (the first one's figures are the JSON's top
        /// level): `default`, `old` (the socket defaults before issue #16: `--socket-buffer
        /// 4194304 --notsent-lowat 131072 --max-batch 262144 --send-budget 0 --send-time-budget
        /// 0s`, and no sparse lane), `shaped` (WAN egress shaping at 95 % of the uplink rate),
        /// `old-shaped`, or `NAME:FLAGS` with `mmsg run` flags, `shape=PERCENT` and
        /// `sparse=KBIT` (`[qos] sparse_lane_kbit`, 0: off), e.g. `k1:--send-budget 1`.
        #[arg(long = "variant", default_values_t = ["default".to_owned(), "old".to_owned()])]
        variants: Vec<String>,
        /// Loads to run (comma-separated subset of idle,bulk1,bulk4,udp2x).
        #[arg(long, value_delimiter = ',', default_value = "idle,bulk1,bulk4,udp2x")]
        loads: Vec<String>,
        /// Seconds of the 200-flow fairness case per variant (0: skip it).
        #[arg(long, default_value_t = 8)]
        fairness_secs: u32,
        /// Build mmsg in debug instead of release (faster build; fine at these rates).
        #[arg(long)]
        debug_build: bool,
        /// Testbed prefix.
        #[arg(long, default_value = "mmslat")]
        prefix: String,
    },
    /// Uplink failover and mmsg restarts: TCP bulk, a 50 pkt/s UDP voice stream and a ping while
    /// each WAN port of the 2x2 testbed is cut and restored, then a gateway's mmsg is restarted
    /// (SIGTERM, kill -9), with mmsg's failover detector and fast reconnect off (before) and on
    /// (after), alternating (see xtask/src/bench_failover.rs, docs/mmsg.md "Failover").
    Failover {
        /// Also write the results as JSON to this file (e.g. results/bench-failover.json).
        #[arg(long)]
        json: Option<PathBuf>,
        /// Seconds each port stays cut.
        #[arg(long, default_value_t = 5)]
        hold: u64,
        /// Seconds after a restore before the next cut.
        #[arg(long, default_value_t = 5)]
        settle: u64,
        /// Repetitions of each mode.
        #[arg(long, default_value_t = 1)]
        reps: u32,
        /// Ports to cut, in order (`none`: no cuts).
        #[arg(long, value_delimiter = ',', default_value = "1a,1b,2a,2b")]
        ports: Vec<String>,
        /// Testbed prefix.
        #[arg(long, default_value = "mmsfo")]
        prefix: String,
        /// Only the `after` pass (detector on); the CI test uses it.
        #[arg(long)]
        after_only: bool,
        /// Restart events after the cuts: `restart<b>` (gateway b's mmsg SIGTERMed and started
        /// again), `kill<b>` (kill -9); `none` for none.
        #[arg(long, value_delimiter = ',', default_value = "restart1,restart2,kill1")]
        restarts: Vec<String>,
        /// Instead: `ssc_restart`, `mmsg_restart gw2` and `transit_killed gw3` on the paper's
        /// testbed (five branches, OVS, ssc; xtask/src/bench_failover/paper.rs).
        #[arg(long)]
        paper: bool,
        /// The `before` pass runs this `mmsg` binary (e.g. a build of an older commit) with its
        /// defaults, instead of this build with `MMSG_FAILOVER=off`: compares two versions of
        /// fast failover in one run.
        #[arg(long)]
        before_bin: Option<PathBuf>,
    },
    /// ssc programming real OVS: compile + push + barrier for the paper topology and a
    /// synthetic full mesh (see xtask/src/bench.rs).
    Controller {
        /// Also write the results as JSON to this file (e.g. results/bench-controller.json).
        #[arg(long)]
        json: Option<PathBuf>,
        /// Branches of the synthetic full mesh (2..=15).
        #[arg(long, default_value_t = 15)]
        branches: u8,
        /// Path groups per ordered branch pair in the mesh (1..=16).
        #[arg(long, default_value_t = 16)]
        groups: u8,
        /// Measured imports per case (median reported).
        #[arg(long, default_value_t = 3)]
        repeat: usize,
        /// Skip the paper topology.
        #[arg(long)]
        skip_paper: bool,
        /// Skip the synthetic mesh.
        #[arg(long)]
        skip_mesh: bool,
        /// Mesh path groups from a deterministic generator instead of the automatic PC.
        #[arg(long)]
        synthetic_groups: bool,
        /// Testbed name prefix stem (1-10 of a-z, 0-9; default `bc<pid>`).
        #[arg(long)]
        prefix: Option<String>,
    },
    /// More than 15 branches (issue #20): N gateways with the extended port plan, a full mesh of
    /// tunnels between hubs, every member through a transit (see xtask/src/scale.rs).
    Scale {
        /// Branches (3..=250).
        #[arg(long, default_value_t = 17)]
        branches: u8,
        /// Hubs of the full mesh of tunnels.
        #[arg(long, default_value_t = 8)]
        hubs: u8,
        /// Hub pairs pinged (each through its transit).
        #[arg(long, default_value_t = 12)]
        sample: usize,
        /// Also write the report as JSON to this file (e.g. results/bench-scale.json).
        #[arg(long)]
        json: Option<PathBuf>,
        /// Seconds the tunnels may take to come up after the push.
        #[arg(long, default_value_t = 180)]
        up_timeout_s: u64,
        /// Testbed name prefix (default `sc<pid>`).
        #[arg(long)]
        prefix: Option<String>,
        /// Clear tunnels, as in the paper's set-up (default: TLS, as `mmsg`'s own default, with
        /// one CA for the run that `ssc` runs too).
        #[arg(long)]
        clear: bool,
    },
}

#[derive(Debug, Args)]
struct PrefixArg {
    /// Name prefix of the testbed (1-12 of a-z, 0-9); namespaces are `<prefix>-inet`,
    /// `<prefix>-gw<b>`, `<prefix>-h<b>`.
    #[arg(long, default_value = "mms", env = "MMS_TESTBED_PREFIX")]
    prefix: String,
}

#[derive(Debug, Subcommand)]
enum TestbedCmd {
    /// Build a testbed from a topology file.
    Up {
        /// Topology TOML (see examples/testbed-*.toml).
        #[arg(long)]
        topology: PathBuf,
        #[command(flatten)]
        prefix: PrefixArg,
        /// Also start one Open vSwitch (userspace datapath) per gateway.
        #[arg(long)]
        ovs: bool,
    },
    /// Remove a testbed completely (works after a crash too).
    Down {
        #[command(flatten)]
        prefix: PrefixArg,
    },
    /// List testbeds, their namespaces, processes and links.
    Status {
        /// Only this prefix.
        #[arg(long)]
        prefix: Option<String>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Change a link while traffic runs.
    #[command(subcommand)]
    Link(LinkCmd),
    /// Set or remove the bottleneck of a WAN address pair while traffic runs.
    Pair {
        /// Source port, e.g. `1a`.
        from: String,
        /// Destination port, e.g. `4a`.
        to: String,
        #[command(flatten)]
        prefix: PrefixArg,
        /// Only this direction (default: both).
        #[arg(long)]
        one_way: bool,
        /// Rate limit, Mbit/s.
        #[arg(long)]
        rate_mbit: Option<f64>,
        /// One-way delay, ms.
        #[arg(long)]
        delay_ms: Option<f64>,
        /// Jitter, ms.
        #[arg(long)]
        jitter_ms: Option<f64>,
        /// Random loss, percent.
        #[arg(long)]
        loss_pct: Option<f64>,
        /// Queue limit, KiB.
        #[arg(long)]
        queue_kib: Option<u32>,
        /// Constant-rate background traffic sharing the bottleneck, Mbit/s (below the rate).
        #[arg(long)]
        background_mbit: Option<f64>,
    },
    /// The single-path baseline: a kernel VXLAN tunnel between two gateways over one direct hop.
    #[command(subcommand)]
    Baseline(BaselineCmd),
}

#[derive(Debug, Subcommand)]
enum BaselineCmd {
    /// Create the tunnel over a direct hop, e.g. `1a>2b`, and route both LANs through it.
    Up {
        /// Direct hop in the paper's notation.
        hop: String,
        #[command(flatten)]
        prefix: PrefixArg,
    },
    /// Remove the tunnel from every gateway.
    Down {
        #[command(flatten)]
        prefix: PrefixArg,
    },
}

#[derive(Debug, Subcommand)]
enum LinkCmd {
    /// Cut a WAN port (both directions drop everything) until restored.
    Cut {
        /// Port in the paper's notation, e.g. `1a`.
        port: String,
        #[command(flatten)]
        prefix: PrefixArg,
    },
    /// Restore a cut WAN port.
    Restore {
        /// Port, e.g. `1a`.
        port: String,
        #[command(flatten)]
        prefix: PrefixArg,
    },
    /// Replace the impairment of an internet port (fields not given mean "none").
    Set {
        /// Port, e.g. `1a`.
        port: String,
        #[command(flatten)]
        prefix: PrefixArg,
        /// Which direction.
        #[arg(long, value_enum, default_value = "both")]
        dir: Direction,
        /// Rate limit, Mbit/s.
        #[arg(long)]
        rate_mbit: Option<f64>,
        /// One-way delay, ms.
        #[arg(long)]
        delay_ms: Option<f64>,
        /// Jitter, ms.
        #[arg(long)]
        jitter_ms: Option<f64>,
        /// Random loss, percent.
        #[arg(long)]
        loss_pct: Option<f64>,
        /// Burst loss, percent.
        #[arg(long)]
        burst_loss_pct: Option<f64>,
        /// Mean burst length, packets.
        #[arg(long)]
        burst_len_pkts: Option<f64>,
        /// Queue limit, KiB.
        #[arg(long)]
        queue_kib: Option<u32>,
    },
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The experiments with a runner of their own (not an `experiments/<NAME>.toml` file).
const RUNNERS: [&str; 4] = ["uplink-lb", "mdi", "adaptive", "congestion"];

/// After a stop signal ([`xtask::stop`]) whose run has torn its testbed down: prints the error
/// and exits with the signal's conventional code (128 + n) instead of 1.
fn exit_if_stopped(e: anyhow::Error) -> anyhow::Error {
    if let Some(s) = xtask::stop::requested() {
        eprintln!("Error: {e:#}");
        std::process::exit(s.exit_code());
    }
    e
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Demo {
            prefix,
            seconds,
            topology,
            keep,
        } => {
            deps::ensure()?;
            if topology == "2x2" {
                if keep {
                    anyhow::bail!("--keep is for the paper demo (the 2x2 demo has no ssc)");
                }
                demo::run(&repo_root(), &prefix, seconds)
            } else {
                demo_paper::run(&repo_root(), &prefix, seconds, keep)
            }
        }
        Cmd::Test { unit_only } => run_tests(unit_only),
        Cmd::Arch { markdown, root } => {
            let root = root.unwrap_or_else(repo_root);
            let report = xtask::arch::read(&root)?;
            if markdown {
                print!("{}", report.markdown());
                return Ok(());
            }
            print!("{}", report.render());
            if !report.circles().is_empty() || !report.long_files().is_empty() {
                anyhow::bail!("the architecture rules are broken (see above)");
            }
            Ok(())
        }
        Cmd::Experiment {
            name,
            figures,
            cases,
            reps,
            secs,
            out,
            skip_e2e_mptcp,
            merge,
            connections_per_group,
            replot,
            prefix,
            dry_run,
            restart,
            no_rack,
            gw1_send_time_budget,
            no_idle_restart,
            acks_on_a,
        } => {
            anyhow::ensure!(
                name == "all" || !(dry_run || restart),
                "--dry-run and --restart are for `experiment all`"
            );
            if name == "list" {
                for (n, title, cases) in experiment::list(&repo_root())? {
                    println!("{n:<10} {cases:>3} cases  {title}");
                }
                return Ok(());
            }
            let out = if out.is_absolute() {
                out
            } else {
                repo_root().join(out)
            };
            if name == "all" {
                return experiment::all::run(
                    &experiment::all::Options {
                        root: repo_root(),
                        out_dir: out,
                        reps: reps.unwrap_or(3),
                        secs,
                        prefix,
                        dry_run,
                        restart,
                    },
                    &xtask::sh::self_exe()?,
                );
            }
            if !replot && RUNNERS.contains(&name.as_str()) {
                // A stop signal ends these runners between measurements too, tearing their
                // testbed down (`xtask/src/stop.rs`).
                xtask::stop::install();
            }
            if name == "uplink-lb" {
                // Seed 004's experiment: its own runner (the TOML shape is for IPoMP figures).
                if replot {
                    return xtask::uplink_lb::replot(&out);
                }
                let prefix = if prefix == "mmsexp" {
                    format!("mlb{}", std::process::id())
                } else {
                    prefix
                };
                return xtask::uplink_lb::run(&xtask::uplink_lb::Options {
                    root: repo_root(),
                    prefix,
                    reps: reps.unwrap_or(3),
                    out_dir: out,
                })
                .map(|_| ())
                .map_err(exit_if_stopped);
            }
            if name == "mdi" {
                return xtask::mdi::cmd(
                    &repo_root(),
                    &prefix,
                    &out,
                    replot,
                    xtask::mdi::Overrides {
                        secs,
                        reps,
                        cases,
                        no_rack,
                        gw1_send_time_budget,
                        no_idle_restart,
                        acks_on_a,
                    },
                )
                .map_err(exit_if_stopped);
            }
            if replot {
                return experiment::replot(&name, &out).map(|_| ());
            }
            if name == "adaptive" {
                let mut settings = xtask::adaptive::Settings::default();
                if let Some(s) = secs {
                    settings.secs = s.max(20);
                }
                let tl = xtask::adaptive::run(
                    &congestion::RunOptions {
                        root: repo_root(),
                        prefix,
                        xtask: None,
                    },
                    &settings,
                )
                .map_err(exit_if_stopped)?;
                xtask::adaptive::write(&tl, &out)?;
                print!("{}", xtask::adaptive::markdown(&tl));
                return Ok(());
            }
            if name == "congestion" {
                let mut settings = congestion::Settings::default();
                if let Some(s) = secs {
                    // Flood over the middle third.
                    settings.secs = s.max(9);
                    settings.flood_at = settings.secs / 3;
                    settings.flood_end = 2 * settings.secs / 3;
                }
                let tl = congestion::run(
                    &congestion::RunOptions {
                        root: repo_root(),
                        prefix,
                        xtask: None,
                    },
                    &settings,
                )
                .map_err(exit_if_stopped)?;
                congestion::write(&tl, &out)?;
                print!("{}", congestion::markdown(&tl));
                return Ok(());
            }
            experiment::run(
                &name,
                &experiment::RunOptions {
                    root: repo_root(),
                    prefix,
                    figures: (!figures.is_empty()).then(|| figures.into_iter().collect()),
                    cases: cases
                        .as_deref()
                        .map(experiment::def::parse_case_list)
                        .transpose()?,
                    reps,
                    secs,
                    out_dir: out,
                    skip_e2e_mptcp,
                    merge,
                    connections_per_group,
                },
            )
            .map(|_| ())
            .map_err(exit_if_stopped)
        }
        Cmd::Wanem { tun, config, stats } => wanem::run(&tun, &config, &stats),
        Cmd::Dist { lto, out } => xtask::dist::main(repo_root(), lto, out),
        Cmd::Testbed(t) => testbed_cmd(t),
        Cmd::Bench(BenchCmd::Table1 {
            json,
            seconds,
            reps,
            rows,
            prefix,
        }) => {
            let report = table1::run(&repo_root(), &prefix, seconds, reps, &rows)?;
            table1::print_table(&report);
            if let Some(path) = json {
                write_json(&path, &report)?;
            }
            Ok(())
        }
        Cmd::Bench(BenchCmd::Tunnel {
            json,
            secs,
            reps,
            prefix,
            uplink_mbit,
            metrics_overhead,
        }) => {
            let opts = bench_tunnel::Options {
                root: repo_root(),
                prefix,
                secs,
                reps,
                uplink_mbit,
            };
            if metrics_overhead {
                let r = xtask::bench_tunnel_overhead::run_metrics_overhead(&opts)?;
                xtask::bench_tunnel_overhead::print_overhead(&r);
                if let Some(path) = json {
                    write_json(&path, &r)?;
                }
                return Ok(());
            }
            let report = bench_tunnel::run(&opts)?;
            bench_tunnel::print_table(&report);
            if let Some(path) = json {
                write_json(&path, &report)?;
            }
            Ok(())
        }
        Cmd::Bench(BenchCmd::Latency {
            json,
            rate_mbit,
            delay_ms,
            delay_after_start_ms,
            secs,
            warmup,
            variants,
            loads,
            fairness_secs,
            debug_build,
            prefix,
        }) => {
            let mut o = bench_latency::Options::new(&repo_root(), &prefix);
            o.rate_mbit = rate_mbit;
            o.delay_ms = delay_ms;
            o.delay_after_start_ms = delay_after_start_ms;
            o.secs = secs;
            o.warmup = warmup;
            o.variants = variants;
            o.loads = loads;
            o.fairness_secs = fairness_secs;
            if debug_build {
                o.profile = xtask::mmsg::Profile::Debug;
            }
            o.command = std::env::args().collect::<Vec<_>>().join(" ");
            let report = bench_latency::run(&o)?;
            bench_latency::print_table(&report);
            if let Some(path) = json {
                write_json(&path, &report)?;
            }
            Ok(())
        }
        Cmd::Bench(BenchCmd::Failover {
            json,
            hold,
            settle,
            reps,
            ports,
            prefix,
            after_only,
            restarts,
            paper,
            before_bin,
        }) => {
            let mut opts = bench_failover::Options::new(&repo_root(), &prefix);
            opts.before_bin = before_bin;
            opts.after_only = after_only;
            opts.restarts = restarts.into_iter().filter(|r| r != "none").collect();
            opts.paper = paper;
            opts.hold = Duration::from_secs(hold);
            opts.settle = Duration::from_secs(settle);
            opts.reps = reps;
            opts.ports = ports.into_iter().filter(|p| p != "none").collect();
            let report = bench_failover::run(&opts)?;
            if let Some(path) = json {
                write_json(&path, &report)?;
            }
            Ok(())
        }
        Cmd::Bench(BenchCmd::Scale {
            branches,
            hubs,
            sample,
            json,
            up_timeout_s,
            prefix,
            clear,
        }) => {
            deps::ensure()?;
            let opts = xtask::scale::Options {
                root: repo_root(),
                prefix: prefix.unwrap_or_else(|| format!("sc{}", std::process::id() % 1_000_000)),
                branches,
                hubs,
                xtask: None,
                up_timeout: std::time::Duration::from_secs(up_timeout_s),
                tls: !clear,
            };
            xtask::scale::bench(&opts, sample, json.as_deref())?;
            Ok(())
        }
        Cmd::Bench(BenchCmd::Controller {
            json,
            branches,
            groups,
            repeat,
            skip_paper,
            skip_mesh,
            synthetic_groups,
            prefix,
        }) => {
            deps::ensure()?;
            let results = bench::controller(&bench::Options {
                root: repo_root(),
                mesh_branches: branches,
                mesh_groups: groups,
                repeat,
                skip_paper,
                skip_mesh,
                synthetic_groups,
                prefix: prefix.unwrap_or_else(|| format!("bc{}", std::process::id() % 1_000_000)),
            })?;
            bench::print_table(&results);
            if let Some(path) = json {
                write_json(&path, &results)?;
            }
            Ok(())
        }
    }
}

/// Writes `value` as pretty JSON to `path`, creating its directory.
fn write_json(path: &Path, value: &impl serde::Serialize) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    std::fs::write(path, serde_json::to_string_pretty(value)? + "\n")
        .with_context(|| format!("write {}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(())
}

fn testbed_cmd(cmd: TestbedCmd) -> anyhow::Result<()> {
    match cmd {
        TestbedCmd::Up {
            topology: path,
            prefix,
            ovs,
        } => {
            deps::ensure()?;
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("read {}", path.display()))?;
            let topo = topology::parse(&text)?;
            let state = testbed::up(
                &topo,
                &UpOptions {
                    prefix: prefix.prefix,
                    ovs,
                },
            )?;
            println!(
                "testbed {} is up: {} branches, {} ports{}",
                state.prefix,
                topo.branches.len(),
                topo.ports().len(),
                if ovs { ", OVS in every gateway" } else { "" }
            );
            Ok(())
        }
        TestbedCmd::Down { prefix } => {
            testbed::down(&prefix.prefix)?;
            println!("testbed {} is down", prefix.prefix);
            Ok(())
        }
        TestbedCmd::Status { prefix, json } => {
            let s = testbed::status(prefix.as_deref())?;
            if json {
                println!("{}", serde_json::to_string_pretty(&s)?);
            } else {
                testbed::print_status(&s);
            }
            Ok(())
        }
        TestbedCmd::Pair {
            from,
            to,
            prefix,
            one_way,
            rate_mbit,
            delay_ms,
            jitter_ms,
            loss_pct,
            queue_kib,
            background_mbit,
        } => {
            let imp = Impairment {
                rate_mbit,
                delay_ms,
                jitter_ms,
                loss_pct,
                queue_kib,
                background_mbit,
                ..Impairment::default()
            };
            testbed::pair_set(&prefix.prefix, &from, &to, !one_way, &imp)
        }
        TestbedCmd::Baseline(BaselineCmd::Up { hop, prefix }) => baseline::up(&prefix.prefix, &hop),
        TestbedCmd::Baseline(BaselineCmd::Down { prefix }) => baseline::down(&prefix.prefix),
        TestbedCmd::Link(LinkCmd::Cut { port, prefix }) => {
            testbed::link_cut(&prefix.prefix, &port, true)
        }
        TestbedCmd::Link(LinkCmd::Restore { port, prefix }) => {
            testbed::link_cut(&prefix.prefix, &port, false)
        }
        TestbedCmd::Link(LinkCmd::Set {
            port,
            prefix,
            dir,
            rate_mbit,
            delay_ms,
            jitter_ms,
            loss_pct,
            burst_loss_pct,
            burst_len_pkts,
            queue_kib,
        }) => {
            let imp = Impairment {
                rate_mbit,
                delay_ms,
                jitter_ms,
                loss_pct,
                burst_loss_pct,
                burst_len_pkts,
                queue_kib,
                reorder: None,
                background_mbit: None,
            };
            testbed::link_set(&prefix.prefix, &port, dir, &imp)
        }
    }
}

fn run_tests(unit_only: bool) -> anyhow::Result<()> {
    use xtask::test_run::{self, Stage};
    let t = Instant::now();
    if !unit_only {
        deps::ensure()?;
    }
    // One debug build of every test binary (one feature resolution for the whole workspace),
    // then the stages: the crates' tests, xtask's unit tests, and the testbed and emulator
    // tests, which measure timing, one at a time.
    let bins = test_run::build(&repo_root())?;
    let mut timings = Vec::new();
    let stages: &[Stage] = if unit_only {
        &[Stage::Crates, Stage::XtaskUnit]
    } else {
        &[Stage::Crates, Stage::XtaskUnit, Stage::Testbed]
    };
    let result = stages
        .iter()
        .try_for_each(|&s| test_run::run(s, &bins, &mut timings));
    println!(
        "==> the slowest test binaries\n{}",
        test_run::slowest(&timings, 15)
    );
    result?;
    if !unit_only {
        // Static binaries, Debian packages and the install check (docs/install.md). Without LTO:
        // a fat-LTO dist build took ~23 min here, most of the last CI run's 50 min; what is checked here (static linking,
        // packages, units, install, tunnels from the packaged binaries) does not depend on it.
        println!("==> dist: cargo xtask dist --lto off");
        xtask::dist::main(repo_root(), xtask::dist::Lto::Off, None)?;
    }
    println!("==> all tests passed in {:.0} s", t.elapsed().as_secs_f64());
    Ok(())
}
