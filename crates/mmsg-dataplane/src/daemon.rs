//! `mmsg run`: validates the config, performs the host set-up ([`crate::setup`]), opens TUN, the
//! path manager and the listeners, starts one task per outbound connection, serves the control
//! socket, and on SIGINT/SIGTERM undoes the set-up.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use mpa::config::Config;
use mpa::{BranchId, PathGroupId};
use tracing::{error, info, warn};

use crate::control::{self, ReportSource};
use crate::pm::PathManager;
use crate::setup::{self, Undo};
use crate::stats::Stats;
use crate::tun::Tun;
use crate::tunnel::{self, PathManagement, SocketOpts, CLASSES};

/// Which path manager to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PmMode {
    /// Userspace PM over genetlink `mptcp_pm`: exactly one subflow per address pair.
    Userspace,
    /// In-kernel PM: `ip mptcp` limits and fullmesh endpoints.
    Kernel,
}

/// Options of `mmsg run`.
#[derive(Debug, Clone)]
pub struct RunOpts {
    /// The config file.
    pub config: PathBuf,
    /// The TUN device name.
    pub tun_name: String,
    /// The TUN MTU.
    pub tun_mtu: u32,
    /// Try TUN offload.
    pub offload: bool,
    /// Path manager.
    pub pm: PmMode,
    /// Socket options.
    pub sockets: SocketOpts,
    /// Control socket path.
    pub control: PathBuf,
    /// Skip host set-up (sysctls, rules) — for tests without privileges.
    pub no_setup: bool,
}

/// Reads and validates a config file.
pub fn load_config(path: &std::path::Path) -> anyhow::Result<Config> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    Config::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

fn kernel_pm_setup(config: &Config, undo: &mut Undo) -> anyhow::Result<()> {
    // DESIGN §4: limits 8/8, our WAN addresses as subflow fullmesh endpoints.
    setup::ip(&[
        "mptcp",
        "limits",
        "set",
        "subflow",
        "8",
        "add_addr_accepted",
        "8",
    ])?;
    let existing = setup::ip(&["mptcp", "endpoint", "show"]).unwrap_or_default();
    for w in &config.wan {
        let a = w.address.addr().to_string();
        if existing
            .lines()
            .any(|l| l.split_whitespace().next() == Some(a.as_str()))
        {
            continue;
        }
        setup::ip(&[
            "mptcp", "endpoint", "add", &a, "dev", &w.name, "subflow", "fullmesh",
        ])?;
        undo.on_exit_ip(&["mptcp", "endpoint", "delete", "address", &a]);
        info!(address = %a, "MPTCP endpoint added");
    }
    Ok(())
}

/// Runs the gateway until SIGINT/SIGTERM.
pub async fn run(opts: RunOpts) -> anyhow::Result<()> {
    let config = load_config(&opts.config)?;
    let own = config
        .branch()
        .context("branch_id is not a valid branch (validate should have caught this)")?;
    let stats = Arc::new(Stats::default());
    let mut undo = Undo::default();
    let result = run_inner(&opts, config, own, Arc::clone(&stats), &mut undo).await;
    undo.revert();
    let _ = std::fs::remove_file(&opts.control);
    result
}

async fn run_inner(
    opts: &RunOpts,
    config: Config,
    own: BranchId,
    stats: Arc<Stats>,
    undo: &mut Undo,
) -> anyhow::Result<()> {
    if !opts.no_setup {
        setup::ensure_path_manager(undo, opts.pm == PmMode::Userspace)
            .context("set the MPTCP path manager")?;
        if let Err(e) = setup::ensure_cubic(undo) {
            warn!(error = %e, "could not select cubic");
        }
        setup::reserve_ports(undo, &config).context("reserve the MPA port range")?;
        setup::ensure_policy_routing(undo, &config).context("policy routing per WAN address")?;
        if opts.pm == PmMode::Kernel {
            kernel_pm_setup(&config, undo).context("in-kernel MPTCP path manager set-up")?;
        }
    }
    let pm = match opts.pm {
        PmMode::Userspace => {
            let pm = PathManager::open().context("open the MPTCP userspace path manager")?;
            pm.spawn_event_listener(Arc::clone(&stats))
                .context("subscribe to MPTCP path manager events")?;
            info!("MPTCP userspace path manager ready");
            PathManagement::Userspace(Arc::new(pm))
        }
        PmMode::Kernel => PathManagement::Kernel,
    };
    let tun = Tun::open(&opts.tun_name, opts.offload)
        .with_context(|| format!("open TUN {}", opts.tun_name))?;
    let offload = tun.offload();
    setup::configure_tun(tun.name(), opts.tun_mtu, &config).context("configure TUN")?;

    let control_listener = control::bind(&opts.control)?;
    let remotes: Vec<_> = config
        .remote
        .iter()
        .map(|r| (r.id, r.wan_addresses.clone(), r.path_groups.clone()))
        .collect();
    let mut own_groups: Vec<PathGroupId> = config
        .remote
        .iter()
        .flat_map(|r| r.path_groups.iter().filter_map(|g| PathGroupId::new(g.id)))
        .collect();
    own_groups.sort_unstable();
    own_groups.dedup();
    let (sh, events) = tunnel::build(config, own, tun, Arc::clone(&stats), pm, opts.sockets);

    for g in own_groups {
        let l = tunnel::listen(&sh, g).with_context(|| format!("listen for path group {g}"))?;
        tokio::spawn(tunnel::accept_loop(Arc::clone(&sh), l, g));
    }
    for (id, addrs, groups) in remotes {
        let Some(b) = BranchId::new(id) else { continue };
        for g in groups {
            let Some(g) = PathGroupId::new(g.id) else {
                continue;
            };
            for c in CLASSES {
                tokio::spawn(tunnel::run_outbound(
                    Arc::clone(&sh),
                    (b, g, c),
                    addrs.clone(),
                ));
            }
        }
    }
    tokio::spawn(control::serve(
        control_listener,
        ReportSource {
            stats,
            branch: own.get(),
            offload,
            path_manager: match opts.pm {
                PmMode::Userspace => "userspace",
                PmMode::Kernel => "kernel",
            },
        },
    ));
    info!(branch = own.get(), "mmsg running");

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let tun_task = tunnel::tun_loop(Arc::clone(&sh), events);
    tokio::select! {
        r = tun_task => {
            if let Err(e) = &r {
                error!(error = %e, "TUN loop ended");
            }
            r
        }
        _ = tokio::signal::ctrl_c() => { info!("SIGINT: shutting down"); Ok(()) }
        _ = term.recv() => { info!("SIGTERM: shutting down"); Ok(()) }
    }
}
