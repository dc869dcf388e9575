//! `ssc import`, `ssc export`, `ssc branch`, `ssc port`, `ssc path-group` and `ssc flows`: the
//! inventory (branches, WAN ports), its path groups and the flows compiled from them.
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use controller::inventory::{
    Branch, BranchId, InventoryFile, MacAddr, PortIndex, WanKind, WanPort,
};
use controller::path_group::{GroupsFile, MemberPath, PathGroupId};
use controller::store::{BranchPatch, NewPort, PortPatch};
use controller::ui::api::{GroupView, Import, SetGroup, Summary};
use ipnet::Ipv4Net;
use serde_json::Value;

use super::{branch_id, group_id, port_letter, print_json, read, send, ClientArgs};

#[derive(Debug, Args)]
pub(crate) struct ImportArgs {
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
pub(crate) struct PortFields {
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
    /// A new port is behind NAT: it can dial out but cannot be dialled (docs/nat.md).
    #[arg(long)]
    nat: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum Kind {
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
    /// The changes to a port: the fields that were given.
    fn patch(&self) -> PortPatch {
        PortPatch {
            address: self.address,
            gateway: self.gateway,
            gateway_mac: self.gateway_mac,
            mac: self.mac,
            kind: self.kind.map(WanKind::from),
            capacity_mbps: self.capacity_mbps,
        }
    }

    /// A new port: `--address`, `--gateway` and `--capacity-mbps` are needed.
    fn new_port(&self, port: Option<PortIndex>) -> anyhow::Result<NewPort> {
        let (Some(address), Some(gateway), Some(capacity_mbps)) =
            (self.address, self.gateway, self.capacity_mbps)
        else {
            let missing: Vec<&str> = [
                ("--address", self.address.is_none()),
                ("--gateway", self.gateway.is_none()),
                ("--capacity-mbps", self.capacity_mbps.is_none()),
            ]
            .into_iter()
            .filter_map(|(flag, absent)| absent.then_some(flag))
            .collect();
            anyhow::bail!("a new WAN port needs {}", missing.join(", "));
        };
        Ok(NewPort {
            port,
            address,
            gateway,
            gateway_mac: self.gateway_mac,
            mac: self.mac,
            kind: self.kind.map(WanKind::from).unwrap_or_default(),
            capacity_mbps,
            nat: self.nat,
        })
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum BranchCommand {
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
pub(crate) enum PortCommand {
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
pub(crate) struct PairArgs {
    /// Source branch A.
    #[arg(long, value_parser = branch_id)]
    source: BranchId,
    /// Destination branch B.
    #[arg(long, value_parser = branch_id)]
    destination: BranchId,
}

#[derive(Debug, Subcommand)]
pub(crate) enum GroupCommand {
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

#[derive(Debug, Args)]
pub(crate) struct FlowsArgs {
    #[command(flatten)]
    client: ClientArgs,
    /// Branch id.
    #[arg(long, value_parser = branch_id)]
    branch: BranchId,
}

/// `ssc import`.
pub(crate) fn import(args: ImportArgs) -> anyhow::Result<()> {
    let inventory: InventoryFile = toml::from_str(&read(&args.inventory)?)
        .with_context(|| format!("inventory {}", args.inventory.display()))?;
    let groups: GroupsFile = match &args.paths {
        Some(p) => toml::from_str(&read(p)?).with_context(|| format!("paths {}", p.display()))?,
        None => GroupsFile { groups: Vec::new() },
    };
    let body = Import {
        inventory,
        groups,
        settings: None,
    };
    let summary = send(&args.client, "POST", "/api/v1/import", &body)?;
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

/// `ssc export`.
pub(crate) fn export(c: ClientArgs) -> anyhow::Result<()> {
    let inv: InventoryFile = serde_json::from_value(c.client().get("/api/v1/inventory")?)
        .context("inventory from the API")?;
    if c.json {
        return print_json(&serde_json::to_value(&inv)?);
    }
    print!("{}", toml::to_string(&inv).context("inventory as TOML")?);
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

/// `ssc branch`.
pub(crate) fn branch(cmd: BranchCommand) -> anyhow::Result<()> {
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
            let body = match (file, id, name) {
                (Some(f), _, _) => {
                    toml::from_str(&read(&f)?).with_context(|| format!("branch {}", f.display()))?
                }
                (None, Some(id), Some(name)) => {
                    let first = PortIndex::from_letter('a')?;
                    let p = port.new_port(Some(first))?;
                    Branch {
                        id,
                        name,
                        lan,
                        wan: vec![WanPort {
                            port: first,
                            address: p.address,
                            gateway: p.gateway,
                            gateway_mac: p.gateway_mac,
                            mac: p.mac,
                            kind: p.kind,
                            capacity_mbps: p.capacity_mbps,
                            nat: p.nat,
                        }],
                    }
                }
                // clap: --id and --name are required unless --file is given.
                (None, _, _) => anyhow::bail!("--id and --name are required without --file"),
            };
            let v = send(&client, "POST", "/api/v1/branches", &body)?;
            show_branch(&client, v)
        }
        BranchCommand::Modify {
            client,
            branch,
            name,
            lan,
        } => {
            let body = BranchPatch {
                name,
                lan: (!lan.is_empty()).then_some(lan),
            };
            let v = send(
                &client,
                "PATCH",
                &format!("/api/v1/branches/{branch}"),
                &body,
            )?;
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

/// `ssc port`.
pub(crate) fn port(cmd: PortCommand) -> anyhow::Result<()> {
    match cmd {
        PortCommand::Add {
            client,
            branch,
            port,
            fields,
        } => {
            let body = fields.new_port(port)?;
            let path = format!("/api/v1/branches/{branch}/ports");
            print_json(&send(&client, "POST", &path, &body)?)
        }
        PortCommand::Modify {
            client,
            branch,
            port,
            fields,
        } => {
            let path = format!("/api/v1/branches/{branch}/ports/{port}");
            print_json(&send(&client, "PATCH", &path, &fields.patch())?)
        }
        PortCommand::Remove {
            client,
            branch,
            port,
        } => {
            let path = format!("/api/v1/branches/{branch}/ports/{port}");
            match client.client().call("DELETE", &path, None)? {
                Some(v) => print_json(&v),
                None => {
                    println!("removed");
                    Ok(())
                }
            }
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

/// `ssc path-group`.
pub(crate) fn path_group(cmd: GroupCommand) -> anyhow::Result<()> {
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
            let body = SetGroup {
                members: members
                    .iter()
                    .map(|m| Value::String(m.to_string()))
                    .collect(),
            };
            let v = send(&client, "PUT", &path, &body)?;
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

/// `ssc flows`.
pub(crate) fn flows(args: FlowsArgs) -> anyhow::Result<()> {
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
