//! `ssc settings show|set`: the settings of the automatic path configuration and of the
//! adaptive path groups ([`controller::path_config::Settings`]).
use anyhow::Context;
use clap::Subcommand;
use controller::path_config::Settings;

use super::{print_json, send, ClientArgs};

#[derive(Debug, Subcommand)]
pub(crate) enum SettingsCommand {
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
        /// Automatic path configuration live for every ordered pair: every `--auto-period`
        /// seconds the groups' members are recomputed from the SDC's measurements and a group
        /// is replaced when a member died or a better one has `--replace-margin` more capacity
        /// (docs/ssc.md "Automatic path configuration").
        #[arg(long)]
        auto: Option<bool>,
        /// Automatic path configuration for these ordered pairs only, `A-B` separated by commas
        /// (`1-2,2-1`); an empty string clears the list.
        #[arg(long)]
        auto_pairs: Option<String>,
        /// Seconds between two rounds of the automatic path configuration (default 10).
        #[arg(long)]
        auto_period: Option<f64>,
        /// The outer port plan: `paper` (0xBASG, branch ids 1..=15) or an extended range
        /// `16384-32767` reserved on every gateway, needed for branch ids above 15.
        #[arg(long)]
        ports: Option<mms_types::PortPlan>,
    },
}

/// `ssc settings show|set`; `set` reads the settings, changes the given fields and writes them
/// back whole.
pub(crate) fn settings(cmd: SettingsCommand) -> anyhow::Result<()> {
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
            ports,
            auto,
            auto_pairs,
            auto_period,
        } => {
            let mut s: Settings = serde_json::from_value(client.client().get("/api/v1/settings")?)
                .context("settings from the API")?;
            if let Some(v) = groups_per_pair {
                s.groups_per_pair = v;
            }
            if let Some(v) = mdi_threshold {
                s.mdi_threshold = v;
            }
            if let Some(v) = replace_margin {
                s.replace_margin = v;
            }
            if let Some(v) = allow_transit {
                s.allow_transit = v;
            }
            if let Some(v) = adaptive {
                s.adaptive.enabled = v;
            }
            if let Some(v) = lambda {
                s.adaptive.lambda = v;
            }
            if let Some(v) = min_groups {
                s.adaptive.min_groups = v;
            }
            if let Some(v) = retire_after {
                s.adaptive.retire_after_s = v;
            }
            if let Some(v) = auto {
                s.auto.all_pairs = v;
            }
            if let Some(v) = auto_pairs {
                s.auto.pairs = parse_pairs(&v)?;
            }
            if let Some(v) = auto_period {
                s.auto.period_s = v;
            }
            if let Some(v) = ports {
                s.ports = v;
            }
            print_json(&send(&client, "PUT", "/api/v1/settings", &s)?)
        }
    }
}

/// `1-2,2-1` → `[[1, 2], [2, 1]]`; empty → none.
fn parse_pairs(text: &str) -> anyhow::Result<Vec<[u8; 2]>> {
    text.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (a, b) = p
                .split_once('-')
                .with_context(|| format!("pair {p:?}: expected A-B, e.g. 1-2"))?;
            Ok([
                a.trim().parse().with_context(|| format!("pair {p:?}"))?,
                b.trim().parse().with_context(|| format!("pair {p:?}"))?,
            ])
        })
        .collect()
}
