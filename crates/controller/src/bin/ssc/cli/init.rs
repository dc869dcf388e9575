//! `ssc init`: the first run of a controller (docs/ops.md §3). Works offline; never
//! overwrites anything. In order: a commented starter config (the packaged
//! `packaging/mms-controller/ssc.toml` with the state directory filled in) unless the file
//! exists, the gateway CA ([`controller::authority::init`]), the bootstrap admin token
//! (printed once, stored 0600 in `api.token_file`) unless the config already names one that
//! exists; then the commands that enrol a gateway.
use std::path::{Path, PathBuf};

use anyhow::{ensure, Context};
use clap::Args;
use controller::ui::config::Config;

/// The starter config: the one the Debian package installs as `/etc/mms/ssc.toml`.
const STARTER: &str = include_str!("../../../../../../packaging/mms-controller/ssc.toml");
/// The state directory the starter config names.
const STARTER_STATE_DIR: &str = "/var/lib/ssc";

#[derive(Debug, Args)]
pub(crate) struct InitArgs {
    /// The config file to write (kept if it exists).
    #[arg(long, short, env = "SSC_CONFIG", default_value = "/etc/mms/ssc.toml")]
    config: PathBuf,
    /// Where a new config puts the database, the CA and the token (the package's unit uses
    /// /var/lib/ssc; run `ssc init` as the service user, `_mms-ssc`, so that it can read them).
    #[arg(long, default_value = STARTER_STATE_DIR)]
    state_dir: PathBuf,
    /// The address gateways reach the controller's gateway TLS listener at, for the printed
    /// `mmsg enrol` command (default: the listener's port on `CONTROLLER`).
    #[arg(long)]
    public_address: Option<String>,
}

/// `ssc init`.
pub(crate) fn init(a: InitArgs) -> anyhow::Result<()> {
    if a.config.exists() {
        println!("config {}: exists, kept", a.config.display());
    } else {
        let state = a.state_dir.to_str().context("--state-dir is not UTF-8")?;
        ensure!(
            !state.contains('"') && !state.contains('\\'),
            "--state-dir must not contain quotes or backslashes"
        );
        let text = STARTER.replace(STARTER_STATE_DIR, state.trim_end_matches('/'));
        if let Some(d) = a.config.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(d).with_context(|| format!("create {}", d.display()))?;
        }
        write_new(&a.config, text.as_bytes(), 0o644)?;
        println!(
            "config {}: written (commented; edit the listen addresses)",
            a.config.display()
        );
    }
    let cfg = Config::load(&a.config)?;
    if let Some(d) = cfg
        .database
        .path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
    {
        std::fs::create_dir_all(d).with_context(|| format!("create {}", d.display()))?;
    }
    let ca_dir = cfg.ca.dir_for(&cfg.database.path);
    let created = controller::authority::init(&ca_dir)
        .with_context(|| format!("gateway CA in {}", ca_dir.display()))?;
    let ca_pem = ca_dir.join(controller::authority::CA_CERT_FILE);
    let pem = std::fs::read_to_string(&ca_pem).context("read the CA certificate")?;
    let fingerprint = pki::enrol::fingerprint(&pem).unwrap_or_default();
    println!(
        "gateway CA {}: {} (fingerprint {fingerprint})",
        ca_dir.display(),
        if created { "created" } else { "exists, kept" }
    );
    match &cfg.api.token_file {
        Some(f) if f.exists() => println!(
            "bootstrap admin token {}: exists, kept (not shown again)",
            f.display()
        ),
        Some(f) => {
            let token = pki::enrol::random_token().context("make the bootstrap token")?;
            write_new(f, format!("{token}\n").as_bytes(), 0o600)?;
            println!(
                "bootstrap admin token (shown once; stored in {}, valid {} s after the first `ssc run`):\n  {token}",
                f.display(),
                cfg.api.bootstrap_token_ttl_s
            );
        }
        None => println!(
            "the config sets no api.token_file: the token comes from api.token or SSC_TOKEN"
        ),
    }
    let port = cfg
        .gateways
        .tls_listen
        .map_or_else(|| "6691".to_owned(), |a| a.port().to_string());
    let public = a
        .public_address
        .unwrap_or_else(|| format!("CONTROLLER:{port}"));
    if cfg.gateways.tls_listen.is_none() {
        println!(
            "note: the config has no [gateways] tls_listen: gateways cannot enrol until it does"
        );
    }
    println!(
        "\nstart the controller (systemctl enable --now ssc, or ssc run --config {cfg}), add the branch\n\
         (ssc import / ssc branch add), then enrol gateway N with two commands:\n  \
         on the controller: SSC_TOKEN=$(cat TOKEN_FILE) ssc enrol-token --branch N\n  \
         on the gateway (copy {ca} there as ca.pem):\n    \
         MMSG_ENROL_TOKEN=<token> mmsg enrol --controller tls:{public} --branch N --ca ca.pem --ca-fingerprint {fingerprint} \\\n      \
         --write-config /etc/mms/mmsg.toml --force   # zero-touch: writes the whole gateway config (docs/ops.md)",
        cfg = a.config.display(),
        ca = ca_pem.display(),
    );
    Ok(())
}

/// Creates `path` with `mode`; fails if it exists (never overwrites).
fn write_new(path: &Path, data: &[u8], mode: u32) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .with_context(|| format!("create {}", path.display()))?;
    f.write_all(data)
        .and_then(|()| f.sync_all())
        .with_context(|| format!("write {}", path.display()))
}
