//! Installs the Debian packages the testbed needs when they are missing (the README promises a
//! fresh machine needs nothing else).

use anyhow::{bail, Context};

use crate::sh;

/// (program that proves it is installed, Debian package).
const NEEDED: &[(&str, &str)] = &[
    ("ip", "iproute2"),
    ("nft", "nftables"),
    ("iperf3", "iperf3"),
    ("ethtool", "ethtool"),
    ("tcpdump", "tcpdump"),
    ("ovs-vswitchd", "openvswitch-switch"),
    ("ping", "iputils-ping"),
    // `[internet]` load balancing test and experiment: HTTP client and server.
    ("curl", "curl"),
    ("python3", "python3"),
    // The web dashboard's test drives a real headless browser (crates/controller/tests/dashboard.rs).
    ("chromium", "chromium"),
    // `promtool check metrics` on both daemons' `/metrics` (docs/metrics.md; xtask/tests).
    ("promtool", "prometheus"),
    // `cargo xtask dist` (docs/install.md): checks of the static binaries and the packages.
    ("file", "file"),
    ("objcopy", "binutils"),
    ("systemd-analyze", "systemd"),
];

/// Installs whatever of [`NEEDED`] is missing with apt-get (needs root).
pub fn ensure() -> anyhow::Result<()> {
    let missing: Vec<&str> = NEEDED
        .iter()
        .filter(|(prog, _)| !sh::have(prog) && !sh::have(&format!("../sbin/{prog}")))
        .map(|(_, pkg)| *pkg)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("missing packages {missing:?}; run as root or apt-get install them");
    }
    eprintln!("installing {}", missing.join(" "));
    sh::run("apt-get", &["update", "-qq"]).context("apt-get update")?;
    let mut args = vec!["install", "-y", "-qq", "--no-install-recommends"];
    args.extend(&missing);
    std::process::Command::new("apt-get")
        .args(&args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .context("apt-get install")?
        .success()
        .then_some(())
        .context("apt-get install failed")
}
