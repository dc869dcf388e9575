//! `ssc`: the MMS SD-WAN system controller (see the crate docs of `controller`).
//!
//! `ssc run` serves the REST API over the inventory database; `ssc check` validates a config and
//! its database; every other subcommand is a client of a running `ssc run` (`--api`, `--token`).
use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use controller::inventory::{Branch, BranchId, InventoryFile, MacAddr, PortIndex, WanKind};
use controller::path_group::{GroupsFile, MemberPath, PathGroupId};
use controller::store::Store;
use controller::ui::api::{GroupView, Summary};
use controller::ui::client::Client;
use controller::ui::config::Config;
use ipnet::Ipv4Net;
use serde_json::{json, Value};

/// MMS SD-WAN system controller (SSC): inventory, path groups and flows for every gateway.
///
/// `ssc run` serves the REST API (inventory, path groups, settings, compiled flows, statistics)
/// and the OpenFlow 1.3 server that programs every gateway's OVS: each switch (datapath id =
/// branch id) is reconciled by cookie when it connects, every change is pushed in the order
/// destination → transit → source with a barrier per step, and flow/port statistics are polled.
/// With `--gateway-listen` / `--gateway-unix` it also serves the gateway channel: every `mmsg`
/// registers and gets its remotes, path groups and WRR weights, pushed on every change
/// (docs/gwchan.md). `ssc` also runs the gateway CA: one-time enrolment tokens
/// (`ssc enrol-token`), issuing, renewing and revoking gateway certificates, mutual TLS on the
/// gateway channel (`--gateway-tls-listen`) and OpenFlow over TLS (`--openflow-tls-listen`).
/// REST tokens have roles (`ssc token add --role read-only|admin`) and expire (`--ttl`,
/// default 30 days, `never` on request). The CRL is re-signed every 3.5 days and pushed to
/// the connected gateways.
#[derive(Debug, Parser)]
#[command(version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the REST API, the OpenFlow server that programs the gateways' OVS, and the gateway
    /// channel that configures every mmsg.
    Run(RunArgs),
    /// Validate the config file and its database (schema version, every rule, flows compile).
    Check(CheckArgs),
    /// Replace the whole inventory (and path groups) from TOML files, through the API.
    Import(ImportArgs),
    /// Print the whole inventory as TOML (the `--inventory` form of `ssc import`).
    Export(ClientArgs),
    /// Branches: list, show, add, modify, remove.
    Branch {
        #[command(subcommand)]
        command: BranchCommand,
    },
    /// WAN ports of a branch: add, modify, remove.
    Port {
        #[command(subcommand)]
        command: PortCommand,
    },
    /// Path groups per ordered branch pair: list, set, remove.
    PathGroup {
        #[command(subcommand)]
        command: GroupCommand,
    },
    /// Settings of the automatic path configuration: show, set.
    Settings {
        #[command(subcommand)]
        command: SettingsCommand,
    },
    /// The compiled flow table of one branch's OVS (read-only).
    Flows(FlowsArgs),
    /// Statistics collected from the switches: per branch, pair, path group and member path.
    Stats(ClientArgs),
    /// WRR weights of the path groups of every ordered pair (or of one pair).
    Weights(WeightsArgs),
    /// Gateways on the gateway channel: connected or not, config version sent and acked, last
    /// report.
    Gateways(ClientArgs),
    /// Adaptive path groups (seed 003): per ordered pair its achieved rate ξ, achievable rate ζ,
    /// status and last change (switch on with `ssc settings set --adaptive true`).
    Adaptive(ClientArgs),
    /// The API's health.
    Health(ClientArgs),
    /// The gateway CA: `ssc ca init` creates it (else the first `ssc run` does).
    Ca {
        #[command(subcommand)]
        command: CaCommand,
    },
    /// Print a one-time enrolment token for a branch (`mmsg enrol --token`); shown once, only
    /// its hash is stored; used once; expires after --ttl.
    EnrolToken(EnrolTokenArgs),
    /// Revoke every certificate of a branch or one serial; the CRL is re-signed, used by the
    /// TLS listeners from the next handshake and pushed at once to every connected gateway of
    /// protocol 3 (older ones get it with their next credentials).
    Revoke(RevokeArgs),
    /// Certificates the gateway CA issued.
    Certificates(ClientArgs),
    /// REST API tokens with roles and expiry: add (prints the token once), list, remove.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum TokenRole {
    /// GET routes only.
    ReadOnly,
    /// Every route.
    Admin,
}

/// `ssc token add --ttl`: a lifetime or `never`.
#[derive(Debug, Clone, Copy)]
enum TokenTtl {
    For(std::time::Duration),
    Never,
}

fn token_ttl(s: &str) -> Result<TokenTtl, String> {
    if s == "never" {
        return Ok(TokenTtl::Never);
    }
    let d: std::time::Duration = s
        .parse::<humantime::Duration>()
        .map_err(|e| format!("{e} (a duration such as 30d, or never)"))?
        .into();
    if d.as_secs() == 0 {
        return Err("must be at least 1s (or never)".into());
    }
    Ok(TokenTtl::For(d))
}

/// Unix seconds as `2026-12-25T05:00:00Z`.
fn utc(unix: u64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(unix))
        .to_string()
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Add a token; prints it once (only its SHA-256 is stored).
    Add {
        #[command(flatten)]
        client: ClientArgs,
        /// A unique name (A-Z a-z 0-9 . _ -).
        #[arg(long)]
        name: String,
        /// What it may do.
        #[arg(long, value_enum)]
        role: TokenRole,
        /// How long it is valid (`30d`, `12h`, at most a year), or `never`; expired tokens get
        /// 401.
        #[arg(long, default_value = "30d", value_parser = token_ttl)]
        ttl: TokenTtl,
    },
    /// Names, roles and expiry of the stored tokens (expired ones are marked).
    List(ClientArgs),
    /// Remove a token by name.
    Remove {
        #[command(flatten)]
        client: ClientArgs,
        /// Its name.
        #[arg(long)]
        name: String,
    },
}

#[derive(Debug, Subcommand)]
enum CaCommand {
    /// Create the CA (ca.pem, ca.key 0600) in `[ca] dir` if there is none; print its
    /// fingerprint. Works offline (no running ssc needed).
    Init {
        #[command(flatten)]
        config: ConfigArg,
    },
}

#[derive(Debug, Args)]
struct EnrolTokenArgs {
    #[command(flatten)]
    client: ClientArgs,
    /// The branch the token enrols.
    #[arg(long, value_parser = branch_id)]
    branch: BranchId,
    /// How long the token is valid (at most 7 days).
    #[arg(long, default_value = "1h")]
    ttl: humantime::Duration,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["branch", "serial"])))]
struct RevokeArgs {
    #[command(flatten)]
    client: ClientArgs,
    /// Revoke every certificate of this branch.
    #[arg(long, value_parser = branch_id)]
    branch: Option<BranchId>,
    /// Revoke this serial.
    #[arg(long)]
    serial: Option<u64>,
}

#[derive(Debug, Args)]
struct ConfigArg {
    /// The configuration file (TOML).
    #[arg(long, short, env = "SSC_CONFIG")]
    config: PathBuf,
}

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    config: ConfigArg,
    /// Listen address of the REST API; overrides `api.listen` (port 0 picks a free port).
    #[arg(long, env = "SSC_LISTEN")]
    listen: Option<SocketAddr>,
    /// Bearer token of the REST API; overrides `api.token` / `api.token_file`.
    #[arg(long, env = "SSC_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// OpenFlow TCP listen address; overrides `openflow.listen` (port 0 picks a free port).
    #[arg(long, env = "SSC_OPENFLOW_LISTEN")]
    openflow_listen: Option<SocketAddr>,
    /// OpenFlow over TLS for OVS `ssl:` targets (`ovs-vsctl set-ssl` with the gateway's
    /// certificate); overrides `openflow.tls_listen` (port 0 picks a free port).
    #[arg(long, env = "SSC_OPENFLOW_TLS_LISTEN")]
    openflow_tls_listen: Option<SocketAddr>,
    /// OpenFlow unix socket to listen on (repeatable or comma-separated); replaces `openflow.unix`.
    #[arg(long, env = "SSC_OPENFLOW_UNIX", value_delimiter = ',')]
    openflow_unix: Vec<PathBuf>,
    /// Statistics polling period; overrides `openflow.stats_interval_ms`.
    #[arg(long, env = "SSC_STATS_INTERVAL")]
    stats_interval: Option<humantime::Duration>,
    /// Gateway channel TCP listen address (mmsg `[controller] address = "tcp:..."`); overrides
    /// `gateways.listen` (port 0 picks a free port).
    #[arg(long, env = "SSC_GATEWAY_LISTEN")]
    gateway_listen: Option<SocketAddr>,
    /// Gateway channel over TLS (mmsg `[controller] address = "tls:..."`: enrolment with a
    /// one-time token, then mutual TLS); overrides `gateways.tls_listen` (port 0 picks a free
    /// port).
    #[arg(long, env = "SSC_GATEWAY_TLS_LISTEN")]
    gateway_tls_listen: Option<SocketAddr>,
    /// Gateway channel unix socket (repeatable or comma-separated); replaces `gateways.unix`.
    #[arg(long, env = "SSC_GATEWAY_UNIX", value_delimiter = ',')]
    gateway_unix: Vec<PathBuf>,
}

#[derive(Debug, Args)]
struct CheckArgs {
    #[command(flatten)]
    config: ConfigArg,
    /// Check only the config file and token, not the database.
    #[arg(long)]
    config_only: bool,
    /// Bearer token to check instead of the config's.
    #[arg(long, env = "SSC_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

/// How to reach a running `ssc run`.
#[derive(Debug, Args)]
struct ClientArgs {
    /// Base URL of the `ssc` REST API.
    #[arg(long, env = "SSC_API", default_value = "http://127.0.0.1:8080")]
    api: axum::http::Uri,
    /// Bearer token of the API (every /api/v1 route needs it).
    #[arg(long, env = "SSC_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Timeout of each request.
    #[arg(long, env = "SSC_TIMEOUT", default_value = "10s")]
    timeout: humantime::Duration,
    /// Print the API's JSON instead of text.
    #[arg(long)]
    json: bool,
}

impl ClientArgs {
    fn client(&self) -> Client {
        Client::new(
            &self.api.to_string(),
            self.token.as_deref(),
            self.timeout.into(),
        )
    }
}

#[derive(Debug, Args)]
struct ImportArgs {
    #[command(flatten)]
    client: ClientArgs,
    /// Inventory TOML (`[[branches]]`, as `examples/inventory-paper.toml`).
    #[arg(long)]
    inventory: PathBuf,
    /// Path groups TOML (`[[groups]]`, as `examples/paths-paper-table2.toml`); none if absent.
    #[arg(long)]
    paths: Option<PathBuf>,
}

/// The fields of a WAN port on the command line.
#[derive(Debug, Args)]
struct PortFields {
    /// Address with prefix length, e.g. 198.18.60.2/24.
    #[arg(long)]
    address: Option<Ipv4Net>,
    /// Next-hop gateway, e.g. 198.18.60.1.
    #[arg(long)]
    gateway: Option<std::net::Ipv4Addr>,
    /// Capacity in Mbit/s.
    #[arg(long)]
    capacity_mbps: Option<u32>,
    /// Internet access or leased line.
    #[arg(long, value_enum)]
    kind: Option<Kind>,
    /// MAC of the port's address (OVS internal port mpa{k}).
    #[arg(long)]
    mac: Option<MacAddr>,
    /// MAC of the gateway.
    #[arg(long)]
    gateway_mac: Option<MacAddr>,
}

fn branch_id(s: &str) -> Result<BranchId, String> {
    let n: u8 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a branch id 1..=15"))?;
    BranchId::new(n).map_err(|e| e.to_string())
}

fn group_id(s: &str) -> Result<PathGroupId, String> {
    let n: u8 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a path group id 0..=15"))?;
    PathGroupId::new(n).map_err(|e| e.to_string())
}

fn port_letter(s: &str) -> Result<PortIndex, String> {
    PortIndex::try_from(s.to_owned()).map_err(|e| e.to_string())
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Kind {
    Internet,
    Leased,
}

impl From<Kind> for WanKind {
    fn from(k: Kind) -> Self {
        match k {
            Kind::Internet => WanKind::Internet,
            Kind::Leased => WanKind::Leased,
        }
    }
}

impl PortFields {
    /// The JSON object of the fields that were given.
    fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        if let Some(v) = self.address {
            m.insert("address".into(), json!(v.to_string()));
        }
        if let Some(v) = self.gateway {
            m.insert("gateway".into(), json!(v.to_string()));
        }
        if let Some(v) = self.capacity_mbps {
            m.insert("capacity_mbps".into(), json!(v));
        }
        if let Some(v) = self.kind {
            m.insert("kind".into(), json!(WanKind::from(v)));
        }
        if let Some(v) = self.mac {
            m.insert("mac".into(), json!(v.to_string()));
        }
        if let Some(v) = self.gateway_mac {
            m.insert("gateway_mac".into(), json!(v.to_string()));
        }
        Value::Object(m)
    }
}

#[derive(Debug, Subcommand)]
enum BranchCommand {
    /// List branches.
    List(ClientArgs),
    /// Show one branch.
    Show {
        #[command(flatten)]
        client: ClientArgs,
        /// Branch id.
        #[arg(long, value_parser = branch_id)]
        branch: BranchId,
    },
    /// Add a branch, from a TOML file (one `[[branches]]` entry's fields) or from flags with
    /// its first WAN port `a`.
    Add {
        #[command(flatten)]
        client: ClientArgs,
        /// A TOML file with the branch (`id`, `name`, `lan`, `[[wan]]`).
        #[arg(long, conflicts_with_all = ["id", "name", "lan"])]
        file: Option<PathBuf>,
        /// Branch id, 1..=15.
        #[arg(long, required_unless_present = "file", value_parser = branch_id)]
        id: Option<BranchId>,
        /// Branch name.
        #[arg(long, required_unless_present = "file")]
        name: Option<String>,
        /// LAN prefix (repeat for several).
        #[arg(long)]
        lan: Vec<Ipv4Net>,
        #[command(flatten)]
        port: PortFields,
    },
    /// Change a branch's name or LAN prefixes.
    Modify {
        #[command(flatten)]
        client: ClientArgs,
        /// Branch id.
        #[arg(long, value_parser = branch_id)]
        branch: BranchId,
        /// New name.
        #[arg(long)]
        name: Option<String>,
        /// New LAN prefixes (replace the list; repeat for several).
        #[arg(long)]
        lan: Vec<Ipv4Net>,
    },
    /// Remove a branch (refused while path groups use it).
    Remove {
        #[command(flatten)]
        client: ClientArgs,
        /// Branch id.
        #[arg(long, value_parser = branch_id)]
        branch: BranchId,
    },
}

#[derive(Debug, Subcommand)]
enum PortCommand {
    /// Add the next WAN port to a branch.
    Add {
        #[command(flatten)]
        client: ClientArgs,
        /// Branch id.
        #[arg(long, value_parser = branch_id)]
        branch: BranchId,
        /// Port letter (default: the next one).
        #[arg(long, value_parser = port_letter)]
        port: Option<PortIndex>,
        #[command(flatten)]
        fields: PortFields,
    },
    /// Change fields of a WAN port.
    Modify {
        #[command(flatten)]
        client: ClientArgs,
        /// Branch id.
        #[arg(long, value_parser = branch_id)]
        branch: BranchId,
        /// Port letter.
        #[arg(long, value_parser = port_letter)]
        port: PortIndex,
        #[command(flatten)]
        fields: PortFields,
    },
    /// Remove the last WAN port of a branch.
    Remove {
        #[command(flatten)]
        client: ClientArgs,
        /// Branch id.
        #[arg(long, value_parser = branch_id)]
        branch: BranchId,
        /// Port letter.
        #[arg(long, value_parser = port_letter)]
        port: PortIndex,
    },
}

#[derive(Debug, Args)]
struct PairArgs {
    /// Source branch A.
    #[arg(long, value_parser = branch_id)]
    source: BranchId,
    /// Destination branch B.
    #[arg(long, value_parser = branch_id)]
    destination: BranchId,
}

#[derive(Debug, Subcommand)]
enum GroupCommand {
    /// List path groups (all, or of one ordered pair).
    List {
        #[command(flatten)]
        client: ClientArgs,
        /// Source branch A (with --destination).
        #[arg(long, requires = "destination", value_parser = branch_id)]
        source: Option<BranchId>,
        /// Destination branch B (with --source).
        #[arg(long, requires = "source", value_parser = branch_id)]
        destination: Option<BranchId>,
    },
    /// Add or replace a path group: members in the paper's notation, member 1 first.
    Set {
        #[command(flatten)]
        client: ClientArgs,
        #[command(flatten)]
        pair: PairArgs,
        /// Group id G, 0..=15.
        #[arg(long, value_parser = group_id)]
        group: PathGroupId,
        /// Member paths in the paper's notation, e.g. `1a>2a 1b>3b>3a>2a`.
        #[arg(required = true)]
        members: Vec<MemberPath>,
    },
    /// Remove a path group.
    Remove {
        #[command(flatten)]
        client: ClientArgs,
        #[command(flatten)]
        pair: PairArgs,
        /// Group id G, 0..=15.
        #[arg(long, value_parser = group_id)]
        group: PathGroupId,
    },
}

#[derive(Debug, Subcommand)]
enum SettingsCommand {
    /// Show the settings.
    Show(ClientArgs),
    /// Change settings (absent flags keep their value).
    Set {
        #[command(flatten)]
        client: ClientArgs,
        /// Groups per ordered pair, 1..=16.
        #[arg(long)]
        groups_per_pair: Option<u8>,
        /// Largest MDI of a group, 0..=0.5.
        #[arg(long)]
        mdi_threshold: Option<f64>,
        /// Replace a group only for this much more capacity (0.2 = 20 %).
        #[arg(long)]
        replace_margin: Option<f64>,
        /// Whether members may go through a transit branch.
        #[arg(long)]
        allow_transit: Option<bool>,
        /// Adaptive path groups (seed 003): add a group to a pair short of capacity, retire
        /// the ones it no longer needs.
        #[arg(long)]
        adaptive: Option<bool>,
        /// λ of the adaptive path groups: add when achieved < λ × achievable, (0, 1].
        #[arg(long)]
        lambda: Option<f64>,
        /// Groups a pair keeps under adaptive path groups, 1..=16.
        #[arg(long)]
        min_groups: Option<u8>,
        /// Seconds a pair must not need its highest group before it is retired.
        #[arg(long)]
        retire_after: Option<f64>,
    },
}

#[derive(Debug, Args)]
struct FlowsArgs {
    #[command(flatten)]
    client: ClientArgs,
    /// Branch id.
    #[arg(long, value_parser = branch_id)]
    branch: BranchId,
}

#[derive(Debug, Args)]
struct WeightsArgs {
    #[command(flatten)]
    client: ClientArgs,
    /// Only the pair from this branch ...
    #[arg(long, value_parser = branch_id, requires = "destination")]
    source: Option<BranchId>,
    /// ... to this branch.
    #[arg(long, value_parser = branch_id, requires = "source")]
    destination: Option<BranchId>,
}

fn main() -> ExitCode {
    match main_inner() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line with the whole context chain, e.g.
            // `ssc: error: database /x.redb: database /x.redb does not exist (...)`.
            eprintln!("ssc: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn main_inner() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => run(args),
        Command::Check(args) => check(args),
        Command::Import(args) => import(args),
        Command::Export(c) => export(c),
        Command::Branch { command } => branch(command),
        Command::Port { command } => port(command),
        Command::PathGroup { command } => path_group(command),
        Command::Settings { command } => settings(command),
        Command::Flows(args) => flows(args),
        Command::Stats(c) => {
            let v = c.client().get("/api/v1/stats")?;
            if c.json {
                print_json(&v)
            } else {
                print_stats(v)
            }
        }
        Command::Health(c) => print_json(&c.client().get("/health")?),
        Command::Ca {
            command: CaCommand::Init { config },
        } => {
            let cfg = Config::load(&config.config)?;
            let dir = cfg.ca.dir_for(&cfg.database.path);
            let created = controller::authority::init(&dir)
                .with_context(|| format!("gateway CA in {}", dir.display()))?;
            let pem = std::fs::read_to_string(dir.join(controller::authority::CA_CERT_FILE))
                .context("read the CA certificate")?;
            println!(
                "CA {} in {}\nfingerprint (SHA-256 of the DER certificate): {}",
                if created { "created" } else { "exists" },
                dir.display(),
                pki::enrol::fingerprint(&pem).unwrap_or_default()
            );
            Ok(())
        }
        Command::EnrolToken(a) => {
            let v = a
                .client
                .client()
                .call(
                    "POST",
                    "/api/v1/enrol-tokens",
                    Some(&json!({"branch": a.branch.get(), "ttl_s": a.ttl.as_secs()})),
                )?
                .unwrap_or(Value::Null);
            if a.client.json {
                return print_json(&v);
            }
            let t: controller::authority::NewToken =
                serde_json::from_value(v).context("token from the API")?;
            println!(
                "{}\n# branch {}, expires {} (unix), single use; CA fingerprint {}",
                t.token, t.branch, t.expires, t.ca_fingerprint
            );
            Ok(())
        }
        Command::Revoke(a) => {
            let body = match (a.branch, a.serial) {
                (Some(b), _) => json!({"branch": b.get()}),
                (None, s) => json!({"serial": s}),
            };
            let v = a
                .client
                .client()
                .call("POST", "/api/v1/revoke", Some(&body))?
                .unwrap_or(Value::Null);
            print_json(&v)
        }
        Command::Certificates(c) => print_json(&c.client().get("/api/v1/certificates")?),
        Command::Token { command } => token(command),
        Command::Weights(args) => weights(args),
        Command::Gateways(c) => gateways(c),
        Command::Adaptive(c) => adaptive(c),
    }
}

fn adaptive(c: ClientArgs) -> anyhow::Result<()> {
    let v = c.client().get("/api/v1/adaptive")?;
    if c.json {
        return print_json(&v);
    }
    let list: controller::ui::api::AdaptiveList =
        serde_json::from_value(v).context("adaptive path groups from the API")?;
    println!(
        "adaptive path groups: {}",
        if list.enabled { "on" } else { "off" }
    );
    for p in &list.pairs {
        let groups: Vec<String> = p.groups.iter().map(ToString::to_string).collect();
        let zeta = p
            .zeta_bps
            .map_or_else(|| "-".to_owned(), |z| format!("{:.1}", z / 1e6));
        println!(
            "{:>2} -> {:<2} groups [{}] xi {:.1} Mbit/s zeta {} Mbit/s {}{} (+{} -{}){}",
            p.source,
            p.destination,
            groups.join(" "),
            p.xi_bps / 1e6,
            zeta,
            serde_json::to_value(p.status)
                .ok()
                .and_then(|s| s.as_str().map(str::to_owned))
                .unwrap_or_default(),
            if p.saturated { ", saturated" } else { "" },
            p.added,
            p.retired,
            p.last_action
                .as_ref()
                .map_or_else(String::new, |a| format!("\n      last: {a}"))
        );
    }
    Ok(())
}

fn run(args: RunArgs) -> anyhow::Result<()> {
    let path = &args.config.config;
    let config = Config::load(path)?;
    let token = config.token(args.token.as_deref())?;
    let listen = args.listen.unwrap_or(config.api.listen);
    let db = config.database.path.clone();
    let store = Store::open(&db).with_context(|| format!("open database {}", db.display()))?;
    let store = Arc::new(store);
    let ca_dir = config.ca.dir_for(&db);
    let authority =
        controller::authority::Authority::open(&ca_dir, Arc::clone(&store), config.ca.validity())
            .with_context(|| format!("gateway CA in {}", ca_dir.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("start tokio runtime")?;
    let mut of = config.openflow.to_ofc();
    if let Some(a) = args.openflow_listen {
        of.listen = Some(a);
    }
    if !args.openflow_unix.is_empty() {
        of.unix = args.openflow_unix.clone();
    }
    if let Some(a) = args.openflow_tls_listen {
        of.tls_listen = Some(a);
    }
    if of.tls_listen.is_some() {
        of.tls = Some(authority.openflow_config());
        of.tls_updates = Some(authority.subscribe_openflow());
    }
    if let Some(d) = args.stats_interval {
        of.stats_interval = d.into();
    }
    let stats_interval = of.stats_interval;
    let mut gw = config.gateways.to_gwc();
    if let Some(a) = args.gateway_listen {
        gw.listen = Some(a);
    }
    if let Some(a) = args.gateway_tls_listen {
        gw.tls_listen = Some(a);
    }
    if !args.gateway_unix.is_empty() {
        gw.unix = args.gateway_unix.clone();
    }
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("bind REST API to {listen}"))?;
        let addr = listener.local_addr().context("REST API address")?;
        let unix = of.unix.clone();
        let ofc = controller::ofc::Ofc::bind(of)
            .await
            .context("start the OpenFlow server")?;
        let of_addr = ofc
            .local_addr()
            .map_or_else(|| "-".to_owned(), |a| a.to_string());
        let of_tls = ofc
            .tls_addr()
            .map_or_else(|| "-".to_owned(), |a| a.to_string());
        let registry = Arc::new(controller::gwc::Registry::new());
        let authority = Arc::new(authority);
        // Re-signs the CRL before its next_update; gateway sessions push every new one.
        tokio::spawn(Arc::clone(&authority).resign_crl_periodically());
        registry.set_authority(authority);
        let gwc = controller::gwc::Gwc::bind(&gw, Arc::clone(&registry))
            .await
            .context("start the gateway channel")?;
        let gw_addr = gwc
            .local_addr()
            .map_or_else(|| "-".to_owned(), |a| a.to_string());
        let gw_tls = gwc
            .tls_addr()
            .map_or_else(|| "-".to_owned(), |a| a.to_string());
        if gw.listen.is_some() {
            tracing::warn!(tcp = %gw_addr, "gateway channel on clear TCP: gateways register unauthenticated there (prefer --gateway-tls-listen)");
        }
        tracing::info!(tcp = %gw_addr, tls = %gw_tls, unix = ?gw.unix, "gateway channel listening");
        tracing::info!(%addr, db = %db.display(), "REST API listening");
        tracing::info!(tcp = %of_addr, unix = ?unix, "OpenFlow server listening (datapath id = branch id)");
        // Machine-readable lines on stdout for scripts and tests (`--listen 127.0.0.1:0`), in
        // one write: a reader that stops after the first line must not make a later write fail.
        // Nobody reading stdout is no reason to stop serving, so a failed write is only logged.
        let lines = format!(
            "ssc: REST API listening on http://{addr}\nssc: OpenFlow listening on tcp:{of_addr}\nssc: gateways listening on tcp:{gw_addr}\nssc: gateways listening on tls:{gw_tls}\nssc: OpenFlow listening on ssl:{of_tls}\n"
        );
        let mut out = std::io::stdout().lock();
        if let Err(e) = out.write_all(lines.as_bytes()).and_then(|()| out.flush()) {
            tracing::debug!(error = %e, "stdout");
        }
        drop(out);
        let sdc = Arc::new(std::sync::Mutex::new(controller::sdc::Sdc::default()));
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let mut ofc_stop = stop_rx.clone();
        let ofc_task = tokio::spawn(ofc.run(store.subscribe(), Arc::clone(&sdc), async move {
            let _ = ofc_stop.wait_for(|s| *s).await;
        }));
        // WRR: feed the SDC's per group rates into the weights every statistics interval (the
        // weights themselves are recomputed against the current catalog on every request).
        let wrr = Arc::new(std::sync::Mutex::new(controller::wrr::Wrr::default()));
        let wrr_changed = Arc::new(tokio::sync::Notify::new());
        let wrr_task = tokio::spawn(feed_wrr(
            Arc::clone(&sdc),
            Arc::clone(&wrr),
            Arc::clone(&wrr_changed),
            stats_interval,
        ));
        // Adaptive path groups (seed 003): every report interval, pairs short of capacity get
        // a group, pairs that no longer need one give it back (off unless the settings say so).
        let adaptive = Arc::new(std::sync::Mutex::new(controller::adaptive::Adaptive::new()));
        let adaptive_task = tokio::spawn(adapt_groups(
            Arc::clone(&store),
            Arc::clone(&wrr),
            Arc::clone(&adaptive),
            ADAPTIVE_INTERVAL,
        ));
        let mut gwc_stop = stop_rx.clone();
        let gwc_task = tokio::spawn(gwc.run(
            store.subscribe(),
            Arc::clone(&wrr),
            wrr_changed,
            async move {
                let _ = gwc_stop.wait_for(|s| *s).await;
            },
        ));
        let state = controller::ui::api::AppState::new(Arc::clone(&store), &token)
            .with_sdc(sdc)
            .with_wrr(wrr)
            .with_gateways(registry)
            .with_adaptive(adaptive);
        let api = controller::ui::serve_state(
            listener,
            state,
            config.api.body_limit_bytes,
            async move {
                shutdown_signal().await;
                let _ = stop_tx.send(true);
            },
        )
        .await
        .context("REST API");
        let _ = ofc_task.await;
        let _ = gwc_task.await;
        wrr_task.abort();
        adaptive_task.abort();
        for p in unix.iter().chain(&gw.unix) {
            let _ = std::fs::remove_file(p);
        }
        api?;
        tracing::info!("stopped");
        Ok(())
    })
}

/// Every `interval`, the SDC's forward rate of each path group → [`controller::wrr::Wrr::observe`];
/// then `changed` wakes the gateway channel, which republishes weights that moved.
async fn feed_wrr(
    sdc: Arc<std::sync::Mutex<controller::sdc::Sdc>>,
    wrr: Arc<std::sync::Mutex<controller::wrr::Wrr>>,
    changed: Arc<tokio::sync::Notify>,
    interval: std::time::Duration,
) {
    let mut tick = tokio::time::interval(interval.max(std::time::Duration::from_millis(10)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let view = sdc
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .view(std::time::Instant::now());
        let mut w = wrr
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for g in &view.groups {
            if let (Ok(a), Ok(b), Ok(id)) = (
                BranchId::new(g.source),
                BranchId::new(g.destination),
                PathGroupId::new(g.group),
            ) {
                w.observe(a, b, id, g.traffic.forward_bits_per_s);
            }
        }
        drop(w);
        if !view.groups.is_empty() {
            changed.notify_one();
        }
    }
}

/// How often the adaptive path groups look at the reports: the gateways' report interval.
const ADAPTIVE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(2);

/// Every `interval`: the gateways' reports (through `wrr`) → [`controller::adaptive::Adaptive::step`]
/// → its actions applied to the store, one write transaction each (the store then pushes flows
/// and gateway configs as for any change). A change the catalog refuses is logged and shown.
async fn adapt_groups(
    store: Arc<Store>,
    wrr: Arc<std::sync::Mutex<controller::wrr::Wrr>>,
    adaptive: Arc<std::sync::Mutex<controller::adaptive::Adaptive>>,
    interval: std::time::Duration,
) {
    use controller::adaptive::Action;
    let catalog = store.subscribe();
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let c = Arc::clone(&catalog.borrow());
        let (store, wrr, adaptive) = (Arc::clone(&store), Arc::clone(&wrr), Arc::clone(&adaptive));
        // Max-flows over every candidate path: off the async threads.
        let r = tokio::task::spawn_blocking(move || {
            let obs = wrr
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .observations();
            let mut ad = adaptive
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let actions = ad.step(
                c.settings(),
                std::time::Instant::now(),
                c.inventory(),
                &controller::path_config::Measurements::new(),
                c.groups(),
                &obs,
            );
            for action in actions {
                let r = match &action {
                    Action::Add { group, reason } => {
                        tracing::info!(
                            source = group.source.get(),
                            destination = group.destination.get(),
                            group = group.id.get(),
                            members = ?group.members.values().map(ToString::to_string).collect::<Vec<_>>(),
                            reason = %reason,
                            "adaptive: path group added"
                        );
                        let members = group.members.values().cloned().collect();
                        store.update(|cat| {
                            cat.set_group(group.source, group.destination, group.id, members)
                        })
                    }
                    Action::Retire {
                        source,
                        destination,
                        group,
                        reason,
                    } => {
                        tracing::info!(
                            source = source.get(),
                            destination = destination.get(),
                            group = group.get(),
                            reason = %reason,
                            "adaptive: path group retired"
                        );
                        store.update(|cat| cat.remove_group(*source, *destination, *group))
                    }
                };
                if let Err(e) = r {
                    tracing::warn!(error = %e, ?action, "adaptive: change refused");
                    ad.refused(&action, &e.to_string());
                }
            }
        })
        .await;
        if let Err(e) = r {
            tracing::warn!(error = %e, "adaptive path groups step failed");
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let term = async {
        match signal(SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch SIGTERM; stop with Ctrl-C");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = term => tracing::info!("SIGTERM: stopping"),
        r = tokio::signal::ctrl_c() => match r {
            Ok(()) => tracing::info!("SIGINT: stopping"),
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch SIGINT");
                std::future::pending::<()>().await;
            }
        },
    }
}

fn token(command: TokenCommand) -> anyhow::Result<()> {
    match command {
        TokenCommand::Add {
            client,
            name,
            role,
            ttl,
        } => {
            let role = match role {
                TokenRole::ReadOnly => "read-only",
                TokenRole::Admin => "admin",
            };
            let body = match ttl {
                TokenTtl::Never => json!({"name": name, "role": role, "never_expires": true}),
                TokenTtl::For(d) => json!({"name": name, "role": role, "ttl_s": d.as_secs()}),
            };
            let v = client
                .client()
                .call("POST", "/api/v1/tokens", Some(&body))?
                .unwrap_or(Value::Null);
            if client.json {
                return print_json(&v);
            }
            let expires = v.get("expires").and_then(Value::as_u64).map_or_else(
                || "never expires".to_owned(),
                |e| format!("expires {}", utc(e)),
            );
            println!(
                "{}\n# token {name:?} ({role}, {expires}); shown once, only its hash is stored",
                v.get("token").and_then(Value::as_str).unwrap_or_default()
            );
            Ok(())
        }
        TokenCommand::List(c) => {
            let v = c.client().get("/api/v1/tokens")?;
            if c.json {
                return print_json(&v);
            }
            let list: controller::ui::api::ApiTokenList =
                serde_json::from_value(v).context("token list from the API")?;
            println!("{:<24} {:<10} {:<21} state", "name", "role", "expires");
            for t in list.tokens {
                let role = match t.role {
                    controller::store::creds::Role::ReadOnly => "read-only",
                    controller::store::creds::Role::Admin => "admin",
                };
                println!(
                    "{:<24} {:<10} {:<21} {}",
                    t.name,
                    role,
                    t.expires.map_or_else(|| "never".to_owned(), utc),
                    if t.expired { "EXPIRED (401)" } else { "valid" }
                );
            }
            Ok(())
        }
        TokenCommand::Remove { client, name } => {
            client
                .client()
                .call("DELETE", &format!("/api/v1/tokens/{name}"), None)?;
            println!("token {name:?} removed");
            Ok(())
        }
    }
}

fn check(args: CheckArgs) -> anyhow::Result<()> {
    let path = &args.config.config;
    let config = Config::load(path)?;
    config
        .token(args.token.as_deref())
        .with_context(|| format!("config {}", path.display()))?;
    println!(
        "config {}: ok (API on {})",
        path.display(),
        config.api.listen
    );
    if args.config_only {
        return Ok(());
    }
    let db = &config.database.path;
    let report = Store::check(db).with_context(|| format!("database {}", db.display()))?;
    println!(
        "database {}: ok (schema v{}, {} branches, {} WAN ports, {} path groups, {} flows)",
        db.display(),
        report.schema_version,
        report.branches,
        report.ports,
        report.groups,
        report.flows
    );
    Ok(())
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))
}

fn import(args: ImportArgs) -> anyhow::Result<()> {
    let inventory: InventoryFile = toml::from_str(&read(&args.inventory)?)
        .with_context(|| format!("inventory {}", args.inventory.display()))?;
    let groups: GroupsFile = match &args.paths {
        Some(p) => toml::from_str(&read(p)?).with_context(|| format!("paths {}", p.display()))?,
        None => GroupsFile { groups: Vec::new() },
    };
    let body = json!({"inventory": inventory, "groups": groups});
    let summary = args
        .client
        .client()
        .call("POST", "/api/v1/import", Some(&body))?
        .unwrap_or(Value::Null);
    if args.client.json {
        return print_json(&summary);
    }
    let s: Summary = serde_json::from_value(summary).context("import summary from the API")?;
    println!(
        "imported: {} branches, {} WAN ports, {} path groups, {} flows",
        s.branches, s.ports, s.groups, s.flows
    );
    Ok(())
}

fn export(c: ClientArgs) -> anyhow::Result<()> {
    let inv: InventoryFile = serde_json::from_value(c.client().get("/api/v1/inventory")?)
        .context("inventory from the API")?;
    if c.json {
        return print_json(&serde_json::to_value(&inv)?);
    }
    print!("{}", toml::to_string(&inv).context("inventory as TOML")?);
    Ok(())
}

/// `ssc stats` as text: one line per switch (and port), pair, group and member path.
fn print_stats(v: Value) -> anyhow::Result<()> {
    use controller::sdc::{StatsView, Traffic};
    let view: StatsView = serde_json::from_value(v).context("statistics")?;
    if !view.available {
        println!("no statistics: the OpenFlow server does not run in that ssc");
        return Ok(());
    }
    if view.branches.is_empty() {
        println!("no switch has connected yet");
    }
    for b in &view.branches {
        println!(
            "branch {:>2} {} {} flows {}/{} reconciles {} (last {} ms) packets {} bytes {}",
            b.branch,
            if b.connected {
                "connected"
            } else {
                "disconnected"
            },
            b.peer,
            b.flows_reported,
            b.flows_compiled,
            b.reconciles,
            b.last_reconcile_ms
                .map_or_else(|| "-".to_owned(), |ms| format!("{ms:.1}")),
            b.packets,
            b.bytes,
        );
        for p in &b.ports {
            println!(
                "    port {:>10} rx {} pkts {:.3} Mbit/s, tx {} pkts {:.3} Mbit/s",
                p.port,
                p.rx_packets,
                p.rx_bits_per_s / 1e6,
                p.tx_packets,
                p.tx_bits_per_s / 1e6,
            );
        }
    }
    let traffic = |t: &Traffic| {
        format!(
            "forward {} pkts {} B {:.3} Mbit/s, reverse {} pkts {} B {:.3} Mbit/s",
            t.forward_packets,
            t.forward_bytes,
            t.forward_bits_per_s / 1e6,
            t.reverse_packets,
            t.reverse_bytes,
            t.reverse_bits_per_s / 1e6,
        )
    };
    for p in &view.pairs {
        println!(
            "pair {} > {}: {}",
            p.source,
            p.destination,
            traffic(&p.traffic)
        );
    }
    for g in &view.groups {
        println!(
            "group {} > {} #{}: {}",
            g.source,
            g.destination,
            g.group,
            traffic(&g.traffic)
        );
    }
    for m in &view.members {
        println!("member {}: {}", m.code, traffic(&m.traffic));
    }
    Ok(())
}

fn print_json(v: &Value) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

fn print_branch(b: &Branch) {
    let lan: Vec<String> = b.lan.iter().map(ToString::to_string).collect();
    println!("branch {} {:?} lan [{}]", b.id, b.name, lan.join(", "));
    for w in &b.wan {
        let mac = |m: Option<MacAddr>| m.map_or_else(|| "-".to_owned(), |m| m.to_string());
        println!(
            "  port {}{} {:?} {} via {} {} Mbit/s mac {} gateway_mac {}",
            b.id,
            w.port,
            w.kind,
            w.address,
            w.gateway,
            w.capacity_mbps,
            mac(w.mac),
            mac(w.gateway_mac)
        );
    }
}

fn show_branch(c: &ClientArgs, v: Value) -> anyhow::Result<()> {
    if c.json {
        return print_json(&v);
    }
    let b: Branch = serde_json::from_value(v).context("branch from the API")?;
    print_branch(&b);
    Ok(())
}

fn branch(cmd: BranchCommand) -> anyhow::Result<()> {
    match cmd {
        BranchCommand::List(c) => {
            let v = c.client().get("/api/v1/branches")?;
            if c.json {
                return print_json(&v);
            }
            let branches: Vec<Branch> =
                serde_json::from_value(v).context("branches from the API")?;
            for b in &branches {
                print_branch(b);
            }
            println!("{} branches", branches.len());
            Ok(())
        }
        BranchCommand::Show { client, branch } => {
            let v = client.client().get(&format!("/api/v1/branches/{branch}"))?;
            show_branch(&client, v)
        }
        BranchCommand::Add {
            client,
            file,
            id,
            name,
            lan,
            port,
        } => {
            let body = match file {
                Some(f) => {
                    let b: Branch = toml::from_str(&read(&f)?)
                        .with_context(|| format!("branch {}", f.display()))?;
                    serde_json::to_value(b)?
                }
                None => {
                    let mut wan = port.to_json();
                    if let Value::Object(m) = &mut wan {
                        m.insert("port".into(), json!("a"));
                    }
                    json!({"id": id, "name": name, "lan": lan, "wan": [wan]})
                }
            };
            let v = client
                .client()
                .call("POST", "/api/v1/branches", Some(&body))?
                .unwrap_or(Value::Null);
            show_branch(&client, v)
        }
        BranchCommand::Modify {
            client,
            branch,
            name,
            lan,
        } => {
            let mut body = serde_json::Map::new();
            if let Some(n) = name {
                body.insert("name".into(), json!(n));
            }
            if !lan.is_empty() {
                body.insert("lan".into(), json!(lan));
            }
            let v = client
                .client()
                .call(
                    "PATCH",
                    &format!("/api/v1/branches/{branch}"),
                    Some(&Value::Object(body)),
                )?
                .unwrap_or(Value::Null);
            show_branch(&client, v)
        }
        BranchCommand::Remove { client, branch } => {
            client
                .client()
                .call("DELETE", &format!("/api/v1/branches/{branch}"), None)?;
            println!("branch {branch} removed");
            Ok(())
        }
    }
}

fn port(cmd: PortCommand) -> anyhow::Result<()> {
    let (client, method, path, body) = match cmd {
        PortCommand::Add {
            client,
            branch,
            port,
            fields,
        } => {
            let mut body = fields.to_json();
            if let (Some(p), Value::Object(m)) = (port, &mut body) {
                m.insert("port".into(), json!(p));
            }
            let path = format!("/api/v1/branches/{branch}/ports");
            (client, "POST", path, Some(body))
        }
        PortCommand::Modify {
            client,
            branch,
            port,
            fields,
        } => {
            let path = format!("/api/v1/branches/{branch}/ports/{port}");
            (client, "PATCH", path, Some(fields.to_json()))
        }
        PortCommand::Remove {
            client,
            branch,
            port,
        } => {
            let path = format!("/api/v1/branches/{branch}/ports/{port}");
            (client, "DELETE", path, None)
        }
    };
    match client.client().call(method, &path, body.as_ref())? {
        Some(v) => print_json(&v),
        None => {
            println!("removed");
            Ok(())
        }
    }
}

fn print_groups(c: &ClientArgs, v: Value) -> anyhow::Result<()> {
    if c.json {
        return print_json(&v);
    }
    let groups: Vec<GroupView> = match v {
        Value::Array(_) => serde_json::from_value(v),
        v => serde_json::from_value(v).map(|g| vec![g]),
    }
    .context("path groups from the API")?;
    for g in &groups {
        println!(
            "path group {}>{} #{} (listen {})",
            g.source, g.destination, g.id, g.listen_port
        );
        for m in &g.members {
            println!("  {} {} {} ({} WAN hops)", m.id, m.code, m.path, m.wan_hops);
        }
    }
    println!("{} path groups", groups.len());
    Ok(())
}

fn path_group(cmd: GroupCommand) -> anyhow::Result<()> {
    match cmd {
        GroupCommand::List {
            client,
            source,
            destination,
        } => {
            let path = match (source, destination) {
                (Some(a), Some(b)) => format!("/api/v1/path-groups/{a}/{b}"),
                _ => "/api/v1/path-groups".to_owned(),
            };
            let v = client.client().get(&path)?;
            print_groups(&client, v)
        }
        GroupCommand::Set {
            client,
            pair,
            group,
            members,
        } => {
            let path = format!(
                "/api/v1/path-groups/{}/{}/{group}",
                pair.source, pair.destination
            );
            let v = client
                .client()
                .call("PUT", &path, Some(&json!({ "members": members })))?
                .unwrap_or(Value::Null);
            print_groups(&client, v)
        }
        GroupCommand::Remove {
            client,
            pair,
            group,
        } => {
            let path = format!(
                "/api/v1/path-groups/{}/{}/{group}",
                pair.source, pair.destination
            );
            client.client().call("DELETE", &path, None)?;
            println!(
                "path group {}>{} #{group} removed",
                pair.source, pair.destination
            );
            Ok(())
        }
    }
}

fn settings(cmd: SettingsCommand) -> anyhow::Result<()> {
    match cmd {
        SettingsCommand::Show(c) => print_json(&c.client().get("/api/v1/settings")?),
        SettingsCommand::Set {
            client,
            groups_per_pair,
            mdi_threshold,
            replace_margin,
            allow_transit,
            adaptive,
            lambda,
            min_groups,
            retire_after,
        } => {
            let api = client.client();
            let mut s = api.get("/api/v1/settings")?;
            if let Value::Object(m) = &mut s {
                if let Some(v) = groups_per_pair {
                    m.insert("groups_per_pair".into(), json!(v));
                }
                if let Some(v) = mdi_threshold {
                    m.insert("mdi_threshold".into(), json!(v));
                }
                if let Some(v) = replace_margin {
                    m.insert("replace_margin".into(), json!(v));
                }
                if let Some(v) = allow_transit {
                    m.insert("allow_transit".into(), json!(v));
                }
                let ad = m.entry("adaptive").or_insert_with(|| json!({}));
                if let Value::Object(ad) = ad {
                    if let Some(v) = adaptive {
                        ad.insert("enabled".into(), json!(v));
                    }
                    if let Some(v) = lambda {
                        ad.insert("lambda".into(), json!(v));
                    }
                    if let Some(v) = min_groups {
                        ad.insert("min_groups".into(), json!(v));
                    }
                    if let Some(v) = retire_after {
                        ad.insert("retire_after_s".into(), json!(v));
                    }
                }
            }
            let v = api
                .call("PUT", "/api/v1/settings", Some(&s))?
                .unwrap_or(Value::Null);
            print_json(&v)
        }
    }
}

/// The part of `GET /api/v1/branches/{branch}/flows` the text output needs.
#[derive(Debug, serde::Deserialize)]
struct FlowsOut {
    count: usize,
    flows: Vec<FlowLine>,
}

#[derive(Debug, serde::Deserialize)]
struct FlowLine {
    ofctl: String,
}

fn flows(args: FlowsArgs) -> anyhow::Result<()> {
    let v = args
        .client
        .client()
        .get(&format!("/api/v1/branches/{}/flows", args.branch))?;
    if args.client.json {
        return print_json(&v);
    }
    let out: FlowsOut = serde_json::from_value(v).context("flows from the API")?;
    for f in &out.flows {
        println!("{}", f.ofctl);
    }
    println!("{} flows on branch {}", out.count, args.branch);
    Ok(())
}

fn weights(args: WeightsArgs) -> anyhow::Result<()> {
    use controller::wrr::PairWeights;
    let client = args.client.client();
    let pairs: Vec<PairWeights> = match (args.source, args.destination) {
        (Some(a), Some(b)) => {
            let v = client.get(&format!("/api/v1/weights/{a}/{b}"))?;
            if args.client.json {
                return print_json(&v);
            }
            vec![serde_json::from_value(v).context("weights from the API")?]
        }
        _ => {
            let v = client.get("/api/v1/weights")?;
            if args.client.json {
                return print_json(&v);
            }
            let list: controller::ui::api::WeightList =
                serde_json::from_value(v).context("weights from the API")?;
            list.pairs
        }
    };
    for p in &pairs {
        let groups: Vec<String> = p
            .groups
            .iter()
            .map(|g| format!("g{}={}", g.group, g.weight))
            .collect();
        println!(
            "{:>2} -> {:<2} {:<10} {} (of {})",
            p.source,
            p.destination,
            format!("{:?}", p.basis).to_lowercase(),
            groups.join(" "),
            p.scale
        );
    }
    if pairs.is_empty() {
        println!("no path groups");
    }
    Ok(())
}

fn gateways(c: ClientArgs) -> anyhow::Result<()> {
    let v = c.client().get("/api/v1/gateways")?;
    if c.json {
        return print_json(&v);
    }
    let list: controller::gwc::GatewayList =
        serde_json::from_value(v).context("gateways from the API")?;
    for g in &list.gateways {
        let report = match (&g.last_report, g.last_report_age_ms) {
            (Some(r), Some(age)) => format!(
                "{} conns {}/{} drops {} ({} ms ago)",
                if r.healthy { "healthy" } else { "degraded" },
                r.connections_up,
                r.connections_total,
                r.drops,
                age
            ),
            _ => "no report".to_owned(),
        };
        println!(
            "branch {:>2} {:<12} config {} acked {}{} {} [{}]",
            g.branch,
            if g.connected {
                "connected"
            } else {
                "disconnected"
            },
            g.config_version,
            g.config_version_acked,
            g.last_error
                .as_deref()
                .map(|e| format!(" (refused: {e})"))
                .unwrap_or_default(),
            report,
            g.software_version,
        );
    }
    if list.gateways.is_empty() {
        println!("no gateways registered");
    }
    println!(
        "refused: {} unknown branch, {} other; {} sessions replaced",
        list.rejected_unknown_branch, list.rejected_other, list.replaced
    );
    Ok(())
}
