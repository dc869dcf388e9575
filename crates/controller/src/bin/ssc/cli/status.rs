//! `ssc stats`, `ssc weights`, `ssc gateways`, `ssc adaptive` and `ssc health`: read-only views
//! of what a running `ssc` measured and decided.
use anyhow::Context;
use clap::Args;
use controller::inventory::BranchId;
use serde_json::Value;

use super::{branch_id, print_json, ClientArgs};

/// `ssc stats`.
pub(crate) fn stats(c: ClientArgs) -> anyhow::Result<()> {
    let v = c.client().get("/api/v1/stats")?;
    if c.json {
        print_json(&v)
    } else {
        print_stats(v)
    }
}

/// `ssc health`.
pub(crate) fn health(c: ClientArgs) -> anyhow::Result<()> {
    print_json(&c.client().get("/health")?)
}

#[derive(Debug, Args)]
pub(crate) struct WeightsArgs {
    #[command(flatten)]
    client: ClientArgs,
    /// Only the pair from this branch ...
    #[arg(long, value_parser = branch_id, requires = "destination")]
    source: Option<BranchId>,
    /// ... to this branch.
    #[arg(long, value_parser = branch_id, requires = "source")]
    destination: Option<BranchId>,
}

/// `ssc adaptive`.
pub(crate) fn adaptive(c: ClientArgs) -> anyhow::Result<()> {
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

/// `ssc weights`.
pub(crate) fn weights(args: WeightsArgs) -> anyhow::Result<()> {
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

/// `ssc gateways`.
pub(crate) fn gateways(c: ClientArgs) -> anyhow::Result<()> {
    let v = c.client().get("/api/v1/gateways")?;
    if c.json {
        return print_json(&v);
    }
    let list: controller::gwchan::GatewayList =
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
