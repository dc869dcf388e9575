//! `mmsg`: the MMS gateway daemon (see the crate docs of `mmsg_dataplane` and `docs/mmsg.md`).
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use mmsg_dataplane::control;
use mmsg_dataplane::daemon::{self, PmMode, RunOpts};
use mmsg_dataplane::tunnel::SocketOpts;

/// MMS gateway (MMSG): carries IP traffic between branches over multipath TCP.
#[derive(Debug, Parser)]
#[command(name = "mmsg", version = env!("MMS_VERSION_LONG"), about)]
struct Cli {
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
    Check {
        /// The gateway config (TOML).
        #[arg(long, env = "MMSG_CONFIG")]
        config: PathBuf,
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
    },
    /// Get this gateway's certificate from the controller with a one-time token (from
    /// `ssc enrol-token`). The key is generated here and never leaves the host; writes
    /// ca.pem, gw.pem, gw.key, crl.pem (all 0600) into --dir for the `[tls]` section.
    Enrol(EnrolArgs),
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
    /// Adaptive send budget: every second set each tunnel socket's SO_SNDBUF to this many times
    /// its subflows' congestion windows (Σ cwnd × mss: the measured path rate × RTT), so that
    /// a full path holds the queue in the gateway (CoDel) instead of the socket; 0: off (the
    /// fixed --socket-buffer stays).
    #[arg(long, env = "MMSG_SEND_BUDGET", default_value_t = 3.0)]
    send_budget: f64,
    /// Skip the host set-up (sysctls, policy rules); the TUN device and its routes are still set.
    #[arg(long, env = "MMSG_NO_SETUP")]
    no_setup: bool,
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

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MMSG_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
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
        Command::Check { config } => match daemon::load_config(&config) {
            Ok(_) => {
                println!("{}: ok", config.display());
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                eprintln!("{e}");
                Ok(ExitCode::FAILURE)
            }
        },
        Command::Run(a) => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
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
                },
                control: a.control.control,
                no_setup: a.no_setup,
            }))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Status { control, json } => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let report = rt.block_on(control::query(&control.control))?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", report.to_text());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Enrol(a) => enrol(a),
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
        .with_context(|| format!("--branch {} is not a branch id 1..=15", a.branch))?;
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
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let c = rt.block_on(mmsg_dataplane::enrol::enrol(
        &a.controller,
        ca.as_deref(),
        own,
        &a.token,
        &a.dir,
    ))?;
    let f = mmsg_dataplane::enrol::files_in(&a.dir);
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
