//! `ssc ca`, `ssc enrol-token`, `ssc revoke`, `ssc certificates` and `ssc token`: the gateway
//! CA ([`controller::authority`]) and the REST API's own tokens.
use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use controller::inventory::BranchId;
use controller::store::creds::Role;
use controller::ui::api::{ApiToken, ApiTokenList, NewApiToken, NewEnrolToken, RevokeRequest};
use controller::ui::config::Config;

use super::{branch_id, print_json, send, utc, ClientArgs};
use crate::server::ConfigArg;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum TokenRole {
    /// `POST /api/v1/enrol-tokens` only, for the branches given with `--branches`.
    Provisioner,
    /// GET routes only.
    ReadOnly,
    /// Every route.
    Admin,
}

/// `ssc token add --ttl`: a lifetime or `never`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum TokenTtl {
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

#[derive(Debug, Subcommand)]
pub(crate) enum TokenCommand {
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
        /// `provisioner` only: the branches it may create enrolment tokens for (comma-separated).
        #[arg(long, value_delimiter = ',')]
        branches: Vec<u8>,
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
pub(crate) enum CaCommand {
    /// Create the CA (ca.pem, ca.key 0600) in `[ca] dir` if there is none; print its
    /// fingerprint. Works offline (no running ssc needed).
    Init {
        #[command(flatten)]
        config: ConfigArg,
    },
}

#[derive(Debug, Args)]
pub(crate) struct EnrolTokenArgs {
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
pub(crate) struct RevokeArgs {
    #[command(flatten)]
    client: ClientArgs,
    /// Revoke every certificate of this branch.
    #[arg(long, value_parser = branch_id)]
    branch: Option<BranchId>,
    /// Revoke this serial.
    #[arg(long)]
    serial: Option<u64>,
}

impl From<TokenRole> for Role {
    fn from(r: TokenRole) -> Self {
        match r {
            TokenRole::Provisioner => Role::Provisioner,
            TokenRole::ReadOnly => Role::ReadOnly,
            TokenRole::Admin => Role::Admin,
        }
    }
}

/// A token role as the CLI spells it.
fn role_name(r: Role) -> &'static str {
    match r {
        Role::Provisioner => "provisioner",
        Role::ReadOnly => "read-only",
        Role::Admin => "admin",
    }
}

/// `ssc ca init`: works offline, on the config's CA directory.
pub(crate) fn ca(command: CaCommand) -> anyhow::Result<()> {
    let CaCommand::Init { config } = command;
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

/// `ssc enrol-token`.
pub(crate) fn enrol_token(a: EnrolTokenArgs) -> anyhow::Result<()> {
    let body = NewEnrolToken {
        branch: a.branch.get(),
        ttl_s: Some(a.ttl.as_secs()),
    };
    let v = send(&a.client, "POST", "/api/v1/enrol-tokens", &body)?;
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

/// `ssc revoke`: a branch's certificates, or one serial.
pub(crate) fn revoke(a: RevokeArgs) -> anyhow::Result<()> {
    let body = match (a.branch, a.serial) {
        (Some(b), _) => RevokeRequest {
            branch: Some(b.get()),
            serial: None,
        },
        (None, serial) => RevokeRequest {
            branch: None,
            serial,
        },
    };
    print_json(&send(&a.client, "POST", "/api/v1/revoke", &body)?)
}

/// `ssc certificates`.
pub(crate) fn certificates(c: ClientArgs) -> anyhow::Result<()> {
    print_json(&c.client().get("/api/v1/certificates")?)
}

/// `ssc token add|list|remove`.
pub(crate) fn token(command: TokenCommand) -> anyhow::Result<()> {
    match command {
        TokenCommand::Add {
            client,
            name,
            role,
            ttl,
            branches,
        } => {
            let role = Role::from(role);
            let body = match ttl {
                TokenTtl::Never => NewApiToken {
                    name: name.clone(),
                    role,
                    ttl_s: None,
                    never_expires: true,
                    branches,
                },
                TokenTtl::For(d) => NewApiToken {
                    name: name.clone(),
                    role,
                    ttl_s: Some(d.as_secs()),
                    never_expires: false,
                    branches,
                },
            };
            let v = send(&client, "POST", "/api/v1/tokens", &body)?;
            if client.json {
                return print_json(&v);
            }
            let t: ApiToken = serde_json::from_value(v).context("token from the API")?;
            let expires = t.expires.map_or_else(
                || "never expires".to_owned(),
                |e| format!("expires {}", utc(e)),
            );
            println!(
                "{}\n# token {name:?} ({}, {expires}); shown once, only its hash is stored",
                t.token,
                role_name(role)
            );
            Ok(())
        }
        TokenCommand::List(c) => {
            let v = c.client().get("/api/v1/tokens")?;
            if c.json {
                return print_json(&v);
            }
            let list: ApiTokenList =
                serde_json::from_value(v).context("token list from the API")?;
            println!("{:<24} {:<10} {:<21} state", "name", "role", "expires");
            for t in list.tokens {
                println!(
                    "{:<24} {:<10} {:<21} {}",
                    t.name,
                    role_name(t.role),
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
