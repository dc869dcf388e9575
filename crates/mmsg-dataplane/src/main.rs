//! `mmsg`: the MMS gateway daemon (see the crate docs of `mmsg_dataplane` and `docs/mmsg.md`).
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use mmsg_dataplane::control;
use mmsg_dataplane::daemon::{self, PmMode, RunOpts};
use mmsg_dataplane::log::LogFormat;
use mmsg_dataplane::tunnel::SocketOpts;

/// MMS gateway (MMSG): carries IP traffic between branches over multipath TCP.
#[derive(Debug, Parser)]
#[command(name = "mmsg", version = env!("MMS_VERSION_LONG"), about)]
struct Cli {
    /// Log format on stderr: `text` (colours only on a terminal) or `json` (one object per line).
    #[arg(
        long,
        env = "MMSG_LOG_FORMAT",
        value_enum,
        default_value = "text",
        global = true
    )]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Args)]
struct ControlArgs {
    /// The control socket of the running daemon.
    #[arg(long, env = "MMSG_CONTROL", default_value_os_t = control::default_path())]
    control: PathBuf,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate a config file: prints every problem as `key: reason`, exit code 1 on error.
    /// A config without `[tls]` is refused (TLS is the default: enrol with `mmsg enrol`, or opt
    /// out with `[tls] mode = "clear"` plus --insecure-clear-tunnels).
    Check {
        /// The gateway config (TOML).
        #[arg(long, env = "MMSG_CONFIG")]
        config: PathBuf,
        #[command(flatten)]
        clear: ClearArgs,
    },
    /// Run the gateway.
    Run(RunArgs),
    /// Show the connections, subflows and counters of the running daemon.
    Status {
        #[command(flatten)]
        control: ControlArgs,
        /// Print JSON instead of text.
        #[arg(long, env = "MMSG_STATUS_JSON")]
        json: bool,
        /// Refresh every this often until Ctrl-C (e.g. `2s`); rates over each interval.
        #[arg(long, env = "MMSG_STATUS_WATCH")]
        watch: Option<humantime::Duration>,
        /// The text view takes two reports this far apart for its rates and loss (`0s`: one
        /// report, no rates).
        #[arg(long, env = "MMSG_STATUS_INTERVAL", default_value = "1s")]
        interval: humantime::Duration,
    },
    /// Get this gateway's certificate from the controller with a one-time token (from
    /// `ssc enrol-token`). The key is generated here and never leaves the host; writes
    /// ca.pem, gw.pem, gw.key, crl.pem (all 0600) into --dir for the `[tls]` section. With
    /// --write-config (zero-touch), also fetches this gateway's whole config from the
    /// controller and writes it there.
    Enrol(EnrolArgs),
    /// Remove what `mmsg run` keeps for a fast restart (docs/mmsg.md "Restart"): with `[ovs]`,
    /// the WAN addresses go back from `mpa{k}` to the WAN ports (ARP on, default routes via
    /// them), then the OVS bridge, its flows and the SSL settings are deleted. Run it after
    /// `mmsg run` stopped (or use `mmsg run --remove-bridge`).
    Down {
        /// The gateway config (TOML) the stopped `mmsg run` used.
        #[arg(long, env = "MMSG_CONFIG")]
        config: PathBuf,
    },
    /// Renew the certificate now over mutual TLS (the daemon does it by itself when less than
    /// `[controller] renew_below_percent` of the lifetime is left); then `kill -HUP` the
    /// daemon, or let its next check reload.
    Renew {
        /// The gateway config (TOML): `[controller] address = "tls:..."` and `[tls]` files.
        #[arg(long, env = "MMSG_CONFIG")]
        config: PathBuf,
    },
    /// Write the man pages (`man/`) and shell completions (`completions/`) of `mmsg` into
    /// --out-dir (`cargo xtask dist` packages them).
    #[command(hide = true)]
    GenerateAssets {
        /// Output directory.
        #[arg(long)]
        out_dir: PathBuf,
    },
}

/// The explicit opt-out of TLS (docs/security.md "TLS is the default").
#[derive(Debug, Args)]
struct ClearArgs {
    /// Run the tunnels in clear text: confirms `[tls] mode = "clear"` in the config (both are
    /// needed; refused with mode "tls"). Any host that reaches a WAN port can then inject packets
    /// into the LAN: closed labs and benchmarks only. No environment variable on purpose: the
    /// opt-out shows on the command line.
    #[arg(long)]
    insecure_clear_tunnels: bool,
}

#[derive(Debug, Args)]
struct EnrolArgs {
    /// The controller's gateway listener: `tls:HOST:PORT` (or `unix:/PATH`; clear `tcp:` is
    /// refused: the token would travel in clear).
    #[arg(long, env = "MMSG_CONTROLLER")]
    controller: String,
    /// The one-time token. Prefer the environment variable: command lines are visible to
    /// other users.
    #[arg(long, env = "MMSG_ENROL_TOKEN", hide_env_values = true)]
    token: String,
    /// This gateway's branch id (the token must be for it).
    #[arg(long, env = "MMSG_BRANCH")]
    branch: u8,
    /// The CA certificate to pin for the controller's TLS certificate (`ssc.mms`); copy
    /// `ca.pem` from the controller's CA directory. Required with `tls:`.
    #[arg(long, env = "MMSG_CA")]
    ca: Option<PathBuf>,
    /// SHA-256 of the CA certificate (DER, hex) as printed by `ssc enrol-token`: --ca must
    /// match it (guards against copying the wrong file).
    #[arg(long, env = "MMSG_CA_FINGERPRINT")]
    ca_fingerprint: Option<String>,
    /// Where to write the credentials.
    #[arg(long, env = "MMSG_TLS_DIR", default_value_os_t = mmsg_dataplane::enrol::default_dir())]
    dir: PathBuf,
    /// Zero-touch: after enrolment, fetch this gateway's config from the controller (LAN
    /// prefixes and WAN ports from its inventory, remotes and path groups, `[controller]` at
    /// --controller, `[tls]` at the files in --dir) and write it here, e.g.
    /// `/etc/mms/mmsg.toml`. An existing file is not replaced without --force.
    #[arg(long, env = "MMSG_WRITE_CONFIG")]
    write_config: Option<PathBuf>,
    /// With --write-config: replace an existing file (kept as `<file>.prev`).
    #[arg(long, requires = "write_config")]
    force: bool,
    /// With --write-config: the WAN interface names in port order (once per port; default
    /// `wan0`, `wan1`, ...), e.g. `--wan-name eth1 --wan-name eth2`.
    #[arg(long = "wan-name", requires = "write_config")]
    wan_names: Vec<String>,
    /// With --write-config: `[controller] cache` of the written config (default
    /// `/var/lib/mmsg/controller-config.json`, the package's state directory).
    #[arg(long, requires = "write_config")]
    controller_cache: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The gateway config (TOML).
    #[arg(long, env = "MMSG_CONFIG")]
    config: PathBuf,
    #[command(flatten)]
    control: ControlArgs,
    /// Name of the TUN device.
    #[arg(long, env = "MMSG_TUN", default_value = "mms0")]
    tun: String,
    /// MTU of the TUN device (inner packets; they travel in a byte stream, never fragmented).
    #[arg(long, env = "MMSG_TUN_MTU", default_value_t = 1500)]
    tun_mtu: u32,
    /// Do not ask for TUN offload (virtio header, GSO super-packets).
    #[arg(long, env = "MMSG_NO_OFFLOAD")]
    no_offload: bool,
    /// MPTCP path manager.
    #[arg(
        long,
        env = "MMSG_PATH_MANAGER",
        value_enum,
        default_value = "userspace"
    )]
    path_manager: PmMode,
    /// TCP_MAXSEG pinned on the tunnel sockets, so a subflow never needs PMTU discovery
    /// (0: kernel default).
    #[arg(long, env = "MMSG_MSS", default_value_t = 1360)]
    mss: u16,
    /// TCP_NOTSENT_LOWAT of the tunnel sockets in bytes (0: not set). It only delays the
    /// writable wake-up (a write is accepted while the send buffer has room): the bound on what
    /// a socket holds is --send-budget (docs/mmsg.md "Latency under load").
    #[arg(long, env = "MMSG_NOTSENT_LOWAT", default_value_t = 128 * 1024)]
    notsent_lowat: u32,
    /// SO_SNDBUF/SO_RCVBUF of the tunnel sockets in bytes (0: kernel autotuning). A fixed size
    /// gives a new connection its full window at once instead of after seconds of autotuning;
    /// with --send-budget the send side follows the measured windows after the first second.
    #[arg(long, env = "MMSG_SOCKET_BUFFER", default_value_t = 4 * 1024 * 1024)]
    socket_buffer: u32,
    /// Data per write to a tunnel connection at its measured send rate (e.g. `1ms`), between
    /// 4 KiB and 256 KiB; `0s` writes whole batches. Small writes keep slow subflows from
    /// holding up fast ones (docs/mmsg.md, "Write size").
    #[arg(long, env = "MMSG_WRITE_CHUNK", default_value = "1ms")]
    write_chunk: humantime::Duration,
    /// Most bytes the writer of a connection takes out of its queue per batch (`mmsg` writes
    /// a batch whole before it looks at the queue again).
    #[arg(long, env = "MMSG_MAX_BATCH", default_value_t = 256 * 1024)]
    max_batch: usize,
    /// Congestion control of the tunnel sockets' subflows (TCP_CONGESTION); `default`: the
    /// namespace's `net.ipv4.tcp_congestion_control`.
    #[arg(long, env = "MMSG_CONGESTION", value_enum, default_value = "default")]
    congestion: Congestion,
    /// Adaptive send budget: set each tunnel socket's SO_SNDBUF to this many times its
    /// subflows' congestion windows (Σ cwnd × mss: the measured path rate × RTT) plus what the
    /// socket holds behind a gap for the data-level ACK, every second and, unless
    /// MMSG_FAILOVER=off, every 20 ms while data is in flight, so that a full path holds the
    /// queue in the gateway (CoDel) instead of the socket; 0: off (the fixed --socket-buffer
    /// stays).
    #[arg(long, env = "MMSG_SEND_BUDGET", default_value_t = 3.0)]
    send_budget: f64,
    /// Send time budget: a tunnel connection's writer keeps what its paths hold (not yet handed
    /// to a subflow, or in flight on one) at most the subflows' measured delivery rate ×
    /// (--send-time-gain × their minimum RTT + this), so the standing queue stays in the
    /// gateway's per-flow queue (docs/mmsg.md "Latency under load"); `0s`: off (write while the
    /// socket takes it: the queue then builds in the socket and the WAN, seconds of it under
    /// bulk load).
    #[arg(long, env = "MMSG_SEND_TIME_BUDGET", default_value = "5ms")]
    send_time_budget: humantime::Duration,
    /// Gain of the send time budget on the minimum RTT: the budget is the delivery rate ×
    /// (this × minimum RTT + --send-time-budget). Above 1, so that a connection below its
    /// paths' rate finds the room (docs/mmsg.md "Latency under load").
    #[arg(long, env = "MMSG_SEND_TIME_GAIN", default_value_t = 2.0)]
    send_time_gain: f64,
    /// With --send-time-budget: the most time the budget adds for the gateway's own stalls. A
    /// writer that keeps waking later than planned (a busy CPU, a descheduled VM) lets the paths
    /// drain; the budget then adds the lateness that recurs (more than 10 % of its waits in the
    /// last 10 s) beyond --send-time-budget, up to this, trading that much queue for goodput
    /// (docs/mmsg.md "Stalls"); with --pacing the pacer's token bucket holds as much more;
    /// `0s`: never.
    #[arg(long, env = "MMSG_SEND_TIME_STALL_COVER", default_value = "50ms")]
    send_time_stall_cover: humantime::Duration,
    /// With --send-time-budget: re-measure a subflow's minimum RTT when its smoothed RTT stays
    /// above the budget's aim for a second, or is above it when the budget's start-up ends (a
    /// path that got longer under a live subflow, or other senders' queue on it; the kernel
    /// keeps the minimum of an idle path for 300 s): for three smoothed RTTs (at least 200 ms)
    /// the budget halves so that our queues drain (docs/mmsg.md "A path whose RTT rises");
    /// `false`: trust the kernel's minimum.
    #[arg(long, env = "MMSG_SEND_TIME_RTT_PROBE", default_value_t = true, action = clap::ArgAction::Set)]
    send_time_rtt_probe: bool,
    /// Pace each tunnel connection's writer at its paths' measured bottleneck rate (the
    /// subflows' delivery rate samples, BBR's probe cycle of gains 1.25 / 0.75 / 1), so the
    /// WAN's bottleneck queue stays short and the standing queue is the gateway's per-flow one
    /// (docs/mmsg.md "Pacing"); best with --send-time-budget as the in-flight cap. Off by
    /// default.
    #[arg(long, env = "MMSG_PACING")]
    pacing: bool,
    /// With --pacing: the queue the pacer's drain round leaves on the paths at most (it lasts
    /// until what is in flight is the bandwidth-delay product plus this much, up to 2 rounds).
    #[arg(long, env = "MMSG_PACING_QUEUE_TARGET", default_value = "5ms")]
    pacing_queue_target: humantime::Duration,
    /// With --pacing: a delivery-rate sample spans this many rounds (minimum RTTs) of what the
    /// subflows acknowledged.
    #[arg(long, env = "MMSG_PACING_RATE_ROUNDS", default_value_t = 4)]
    pacing_rate_rounds: u32,
    /// Slow subflows: a subflow that delivers less than this share of its connection's rate
    /// (or of the connection's best second in the last 10 s, if that is more) while its
    /// smoothed RTT is more than twice the fastest subflow's and 10 ms longer (a
    /// queue, not its path), two 1-second rounds in a row, is marked backup (MP_PRIO), so its
    /// head-of-line delay no longer holds the fast subflows' data; it is tried again after 10 s,
    /// then 20, 40, 80 s while it stays slow (only while the connection is busy), one slow second
    /// ending a try (docs/mmsg.md "Slow subflows"); 0:
    /// never (every subflow carries data whatever its rate).
    #[arg(long, env = "MMSG_SLOW_SUBFLOW_SHARE", default_value_t = 0.0625,
          value_parser = parse_share)]
    slow_subflow_share: f64,
    /// Skip the host set-up (sysctls, policy rules); the TUN device and its routes are still set.
    #[arg(long, env = "MMSG_NO_SETUP")]
    no_setup: bool,
    /// Serve Prometheus metrics at `http://ADDR/metrics` (off by default; no authentication, so
    /// keep it on loopback, e.g. `127.0.0.1:9477`, or a management network; docs/metrics.md).
    #[arg(long, env = "MMSG_METRICS_LISTEN")]
    metrics_listen: Option<std::net::SocketAddr>,
    /// With `[ovs]`: on exit delete the OVS bridge (and its flows) and move the WAN addresses
    /// back to the WAN ports. By default they stay, so the switch keeps forwarding while `mmsg`
    /// restarts and the next start reuses them (`mmsg down` removes them later).
    #[arg(long, env = "MMSG_REMOVE_BRIDGE")]
    remove_bridge: bool,
    /// Threads of the async runtime (the TUN reader, every connection's writer and reader).
    #[arg(long, env = "MMSG_WORKER_THREADS", default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    worker_threads: u16,
    #[command(flatten)]
    clear: ClearArgs,
}

/// `--congestion`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Congestion {
    /// The namespace's default.
    Default,
    /// CUBIC (loss-based).
    Cubic,
    /// BBR (model-based: paces at the measured bottleneck rate).
    Bbr,
    /// Reno.
    Reno,
}

impl Congestion {
    fn name(self) -> Option<&'static str> {
        match self {
            Congestion::Default => None,
            Congestion::Cubic => Some("cubic"),
            Congestion::Bbr => Some("bbr"),
            Congestion::Reno => Some("reno"),
        }
    }
}

/// `--slow-subflow-share`: a share of a connection's rate, 0 ≤ x < 0.5 (at 0.5 and above every
/// subflow but the fastest of two would be "slow").
fn parse_share(s: &str) -> Result<f64, String> {
    let x: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if (0.0..0.5).contains(&x) {
        Ok(x)
    } else {
        Err(format!("{x} is not a share in [0, 0.5)"))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    mmsg_dataplane::log::init(cli.log_format, "MMSG_LOG");
    match real_main(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mmsg: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn real_main(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Check { config, clear } => {
            match daemon::load_checked(&config, clear.insecure_clear_tunnels) {
                Ok((_, security)) => {
                    let mode = match security {
                        mpa::config::TunnelSecurity::Tls => "tls",
                        mpa::config::TunnelSecurity::InsecureClear => {
                            "INSECURE: tunnels in clear text (--insecure-clear-tunnels)"
                        }
                    };
                    println!("{}: ok ({mode})", config.display());
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    eprintln!("{e}");
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        Command::Run(a) => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(usize::from(a.worker_threads))
                .enable_all()
                .build()?;
            rt.block_on(daemon::run(RunOpts {
                config: a.config,
                tun_name: a.tun,
                tun_mtu: a.tun_mtu,
                offload: !a.no_offload,
                pm: a.path_manager,
                sockets: SocketOpts {
                    mss: a.mss,
                    notsent_lowat: a.notsent_lowat,
                    buffer: a.socket_buffer,
                    write_chunk: a.write_chunk.into(),
                    max_batch: a.max_batch,
                    congestion: a.congestion.name(),
                    send_budget: a.send_budget,
                    send_time_budget: a.send_time_budget.into(),
                    send_time_gain: a.send_time_gain,
                    send_time_stall_cover: a.send_time_stall_cover.into(),
                    send_time_rtt_probe: a.send_time_rtt_probe,
                    pacing: a.pacing.then_some(mpa::queue::pacing::PacerConfig {
                        queue_target: a.pacing_queue_target.into(),
                        rate_rounds: a.pacing_rate_rounds,
                    }),
                    slow_subflow_share: a.slow_subflow_share,
                },
                control: a.control.control,
                no_setup: a.no_setup,
                metrics_listen: a.metrics_listen,
                remove_bridge: a.remove_bridge,
                insecure_clear_tunnels: a.clear.insecure_clear_tunnels,
            }))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Status {
            control,
            json,
            watch,
            interval,
        } => status(
            &control.control,
            json,
            watch.map(Into::into),
            interval.into(),
        ),
        Command::Enrol(a) => enrol(a),
        Command::Down { config } => {
            let c = daemon::load_config(&config)?;
            mmsg_dataplane::ovs::down(&c).context("mmsg down")?;
            Ok(ExitCode::SUCCESS)
        }
        Command::GenerateAssets { out_dir } => {
            generate_assets(&out_dir)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Renew { config } => {
            let cfg = daemon::load_config(&config)?;
            let own = cfg.branch().context("branch_id")?;
            let ctl = cfg
                .controller
                .as_ref()
                .context("no [controller] section in the config")?;
            let files = mmsg_dataplane::enrol::tls_files(&cfg)
                .context("no [tls] credentials in the config")?;
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let c = rt.block_on(mmsg_dataplane::enrol::renew(&ctl.address, &files, own))?;
            println!(
                "renewed: serial {} valid until {} (unix); {} written",
                c.serial,
                c.not_after,
                files.cert.display()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `mmsg status`: JSON (one report), or the tables of [`mmsg_dataplane::status_view`] with rates
/// over `interval` (or over each `watch` period, refreshed until Ctrl-C).
fn status(
    control: &std::path::Path,
    json: bool,
    watch: Option<std::time::Duration>,
    interval: std::time::Duration,
) -> anyhow::Result<ExitCode> {
    use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let query = || rt.block_on(control::query(control));
    let unix_now = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&query()?)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut prev = None;
    if watch.is_none() && interval > Duration::ZERO {
        prev = Some((query()?, Instant::now()));
        std::thread::sleep(interval);
    }
    loop {
        let report = query()?;
        let at = Instant::now();
        let text = mmsg_dataplane::status_view::render(
            &report,
            prev.as_ref()
                .map(|(p, t): &(_, Instant)| (p, at.duration_since(*t))),
            unix_now(),
        );
        let Some(period) = watch else {
            print!("{text}");
            return Ok(ExitCode::SUCCESS);
        };
        // Clear the screen only on a terminal: piped output stays plain text.
        if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            print!("\x1b[2J\x1b[H");
        }
        print!("{text}");
        println!(
            "(every {}; Ctrl-C to stop)",
            humantime::format_duration(period)
        );
        prev = Some((report, at));
        std::thread::sleep(period);
    }
}

/// `mmsg generate-assets`: `man/mmsg*.1` and `completions/{mmsg.bash,_mmsg,mmsg.fish}`.
fn generate_assets(out: &std::path::Path) -> anyhow::Result<()> {
    use clap::CommandFactory;
    let man = out.join("man");
    let comp = out.join("completions");
    for d in [&man, &comp] {
        std::fs::create_dir_all(d).with_context(|| format!("create {}", d.display()))?;
    }
    clap_mangen::generate_to(Cli::command(), &man).context("man pages")?;
    for shell in [
        clap_complete::Shell::Bash,
        clap_complete::Shell::Zsh,
        clap_complete::Shell::Fish,
    ] {
        clap_complete::generate_to(shell, &mut Cli::command(), "mmsg", &comp)
            .with_context(|| format!("{shell} completions"))?;
    }
    Ok(())
}

fn enrol(a: EnrolArgs) -> anyhow::Result<ExitCode> {
    let own = mpa::BranchId::new(a.branch)
        .with_context(|| format!("--branch {} is not a branch id 1..=250", a.branch))?;
    let ca = match &a.ca {
        Some(p) => Some(std::fs::read(p).with_context(|| format!("read {}", p.display()))?),
        None => None,
    };
    if let Some(want) = &a.ca_fingerprint {
        let got = ca
            .as_deref()
            .and_then(|c| std::str::from_utf8(c).ok())
            .and_then(pki::enrol::fingerprint)
            .context("--ca-fingerprint needs --ca with a PEM certificate")?;
        anyhow::ensure!(
            got.eq_ignore_ascii_case(want.trim()),
            "--ca does not match --ca-fingerprint (the file's SHA-256 is {got})"
        );
    }
    if let Some(p) = &a.write_config {
        // Before the token is spent.
        mmsg_dataplane::enrol_setup::check_writable(p, a.force)?;
    }
    // Absolute: the written config names these files.
    let dir = std::path::absolute(&a.dir).with_context(|| format!("{}", a.dir.display()))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let c = rt.block_on(mmsg_dataplane::enrol::enrol(
        &a.controller,
        ca.as_deref(),
        own,
        &a.token,
        &dir,
    ))?;
    let f = mmsg_dataplane::enrol::files_in(&dir);
    if let Some(p) = &a.write_config {
        let setup = rt
            .block_on(mmsg_dataplane::enrol_setup::fetch(&a.controller, &f, own))
            .context("enrolled, but fetching the config failed (retry with a new token, or write it by hand)")?;
        let (text, cfg) = mmsg_dataplane::enrol_setup::config_text(
            &setup,
            &a.controller,
            a.controller_cache.as_deref(),
            &f,
            &a.wan_names,
        )?;
        cfg.tunnel_security(false)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        mmsg_dataplane::enrol_setup::write_config(p, &text, a.force)?;
        println!(
            "enrolled branch {own}: serial {} valid until {} (unix); config written to {} \
             ({} WAN ports, {} remotes); start it with `mmsg run --config {}` \
             (or `systemctl enable --now mmsg`)",
            c.serial,
            c.not_after,
            p.display(),
            cfg.wan.len(),
            cfg.remote.len(),
            p.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "enrolled branch {own}: serial {} valid until {} (unix)\n[tls]\nca_file = {:?}\ncert_file = {:?}\nkey_file = {:?}\ncrl_file = {:?}",
        c.serial,
        c.not_after,
        f.ca.display().to_string(),
        f.cert.display().to_string(),
        f.key.display().to_string(),
        f.crl.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
    );
    Ok(ExitCode::SUCCESS)
}
