//! Experiment definitions: the TOML files under `experiments/` (docs/experiments.md).
//!
//! A file holds figures; a figure holds cases. A case says how much bandwidth every member path's
//! bottleneck leaves for MMS (`pg`: one value per path group, the same for its four members, as in
//! Tables III and IV; `members`: one value per member, the same in every group, as in Tables V and
//! VI; `rates`: the four subflows of Table I), how many path groups carry traffic and how many
//! end-to-end TCP connections run.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{bail, ensure, Context};
use serde::{Deserialize, Serialize};

/// One experiment file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    /// File name without `.toml`.
    pub name: String,
    /// Shown at the top of the report.
    pub title: String,
    /// Seconds of traffic per measurement (iperf3 `-t`, after `omit_secs` of warm-up).
    #[serde(default = "default_secs")]
    pub secs: u32,
    /// Warm-up seconds not counted (iperf3 `-O`).
    #[serde(default = "default_omit")]
    pub omit_secs: u32,
    /// Repetitions per case (`--reps` overrides).
    #[serde(default = "one")]
    pub reps: u32,
    /// The figures, in order.
    #[serde(rename = "figure")]
    pub figures: Vec<Figure>,
}

fn default_secs() -> u32 {
    8
}
fn default_omit() -> u32 {
    2
}
fn one() -> u32 {
    1
}

/// What takes bandwidth from the bottlenecks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Background {
    /// The bottleneck is a rate limiter at the case's value (Table I: the switch's meters).
    Meter,
    /// A `bottleneck_mbit` link carries constant-rate background traffic of `bottleneck_mbit -
    /// value` (the paper's Case A: UDP flows "remove the desired amount of bandwidth").
    Udp,
    /// `value` background TCP flows share a `bottleneck_mbit` link (Case B, Table IV and VI).
    Tcp,
}

/// One figure of the paper.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figure {
    /// Short id, used in file names and `--figures` (e.g. `fig10a`).
    pub id: String,
    /// Caption.
    pub title: String,
    /// Which table of the paper gives the settings.
    pub table: String,
    /// What the values mean.
    pub background: Background,
    /// Capacity of each bottleneck link (Case A/B: 100 Mbit/s as in the paper).
    #[serde(default = "hundred")]
    pub bottleneck_mbit: f64,
    /// Queue of each bottleneck in KiB (default: the emulator's, 100 ms at the rate, at least
    /// 64 KiB). A small queue makes a `meter` bottleneck behave like a policer.
    #[serde(default)]
    pub queue_kib: Option<u32>,
    /// Path groups from branch 1 to branch 2 (groups 1..=n of the paths file).
    #[serde(default)]
    pub groups: Option<u8>,
    /// End-to-end TCP connections (iperf3 `-P`).
    #[serde(default)]
    pub connections: Option<u32>,
    /// Also measure UDP through the tunnel, offered at `udp_offered_mbit` (Table I).
    #[serde(default)]
    pub udp_offered_mbit: Option<f64>,
    /// Also measure end-to-end MPTCP between the gateways without MMS (Table I's last column).
    #[serde(default)]
    pub e2e_mptcp: bool,
    /// Paths file relative to the repository (default: Table II, `examples/paths-paper-table2.toml`).
    #[serde(default)]
    pub paths: Option<String>,
    /// The cases.
    #[serde(rename = "case")]
    pub cases: Vec<CaseDef>,
}

fn hundred() -> f64 {
    100.0
}

fn one_u8() -> u8 {
    1
}

/// One test case.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CaseDef {
    /// The paper's test case number.
    pub id: u32,
    /// Per path group value (its four members alike).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pg: Option<Vec<f64>>,
    /// Per member value (every group alike).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<Vec<f64>>,
    /// Overrides the figure's group count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<u8>,
    /// Overrides the figure's connection count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<u32>,
    /// The paper's IPoMP goodput (Mbit/s), where it gives a number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paper_ipomp_mbps: Option<f64>,
    /// The paper's UDP-over-IPoMP goodput (Table I).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paper_udp_mbps: Option<f64>,
    /// The paper's end-to-end MPTCP goodput (Table I).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paper_e2e_mptcp_mbps: Option<f64>,
}

/// A case resolved against its figure: everything a run needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Case {
    /// Figure id.
    pub figure: String,
    /// The paper's test case number.
    pub id: u32,
    /// Path groups 1..=groups carry traffic.
    pub groups: u8,
    /// End-to-end TCP connections.
    pub connections: u32,
    /// What the values mean.
    pub background: Background,
    /// Capacity of each bottleneck link.
    pub bottleneck_mbit: f64,
    /// Queue of each bottleneck in KiB (`None`: the emulator's default).
    pub queue_kib: Option<u32>,
    /// `values[g][m]`: the value for member m+1 of group g+1 (Mbit/s left, or TCP flows).
    pub values: Vec<[f64; 4]>,
    /// Every `mmsg`'s `connections_per_group` (Type II tunnel connections per path group; 1 in
    /// results written before the option existed): `experiment --connections-per-group`.
    #[serde(default = "one_u8")]
    pub connections_per_group: u8,
    /// The settings as written in the file.
    pub def: CaseDef,
}

impl Figure {
    /// Resolves every case; errors name the figure and case.
    pub fn resolve(&self) -> anyhow::Result<Vec<Case>> {
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for c in &self.cases {
            let key = format!("figure {} case {}", self.id, c.id);
            ensure!(seen.insert(c.id), "{key}: duplicate case id");
            let groups = c.groups.or(self.groups).unwrap_or(4);
            ensure!((1..=4).contains(&groups), "{key}: groups must be 1..=4");
            let connections = c
                .connections
                .or(self.connections)
                .unwrap_or(u32::from(groups));
            ensure!(
                (1..=64).contains(&connections),
                "{key}: connections must be 1..=64"
            );
            let values: Vec<[f64; 4]> = match (&c.pg, &c.members) {
                (Some(pg), None) => {
                    ensure!(
                        pg.len() == usize::from(groups),
                        "{key}: `pg` has {} values for {groups} groups",
                        pg.len()
                    );
                    pg.iter().map(|&v| [v; 4]).collect()
                }
                (None, Some(m)) => {
                    let m: [f64; 4] = m
                        .as_slice()
                        .try_into()
                        .map_err(|_| anyhow::anyhow!("{key}: `members` needs 4 values"))?;
                    vec![m; usize::from(groups)]
                }
                _ => bail!("{key}: give exactly one of `pg` or `members`"),
            };
            for v in values.iter().flatten() {
                match self.background {
                    Background::Meter | Background::Udp => ensure!(
                        v.is_finite() && *v > 0.0 && *v <= self.bottleneck_mbit,
                        "{key}: {v} Mbit/s is not in (0, {}]",
                        self.bottleneck_mbit
                    ),
                    Background::Tcp => ensure!(
                        v.fract() == 0.0 && (0.0..=64.0).contains(v),
                        "{key}: {v} background TCP flows is not a whole number in 0..=64"
                    ),
                }
            }
            out.push(Case {
                figure: self.id.clone(),
                id: c.id,
                groups,
                connections,
                background: self.background,
                bottleneck_mbit: self.bottleneck_mbit,
                queue_kib: self.queue_kib,
                values,
                connections_per_group: 1,
                def: c.clone(),
            });
        }
        Ok(out)
    }
}

impl Experiment {
    /// Reads and checks `experiments/<name>.toml` (or a path).
    pub fn load(root: &Path, name: &str) -> anyhow::Result<Experiment> {
        let path = if name.ends_with(".toml") {
            root.join(name)
        } else {
            root.join("experiments").join(format!("{name}.toml"))
        };
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "read {} (list them with `cargo xtask experiment list`)",
                path.display()
            )
        })?;
        Self::parse(&text).with_context(|| format!("in {}", path.display()))
    }

    /// Parses and checks an experiment file.
    pub fn parse(text: &str) -> anyhow::Result<Experiment> {
        let e: Experiment = toml::from_str(text)?;
        ensure!(e.secs >= 2 && e.secs <= 600, "secs must be 2..=600");
        let mut ids = BTreeSet::new();
        for f in &e.figures {
            ensure!(ids.insert(&f.id), "duplicate figure id {}", f.id);
            ensure!(
                f.bottleneck_mbit.is_finite() && f.bottleneck_mbit > 0.0,
                "figure {}: bottleneck_mbit must be > 0",
                f.id
            );
            f.resolve()?;
        }
        Ok(e)
    }
}

/// `1,2,3,7` → `1-3,7` (the inverse of [`parse_case_list`]).
pub fn case_list(cases: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while let Some(&start) = cases.get(i) {
        let mut end = start;
        while cases.get(i + 1) == Some(&(end + 1)) {
            end += 1;
            i += 1;
        }
        parts.push(if end == start {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// Parses `--cases 1,3,5-9` into a set of case ids.
pub fn parse_case_list(s: &str) -> anyhow::Result<BTreeSet<u32>> {
    let mut out = BTreeSet::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse()?, b.trim().parse()?);
                ensure!(a <= b, "{part}: empty range");
                out.extend(a..=b);
            }
            None => {
                out.insert(
                    part.parse()
                        .with_context(|| format!("{part}: not a case id"))?,
                );
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_experiment_parses() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut n = 0;
        for entry in std::fs::read_dir(root.join("experiments")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
                let e = Experiment::load(&root, &name).unwrap();
                assert_eq!(e.name, name, "{}", path.display());
                n += 1;
            }
        }
        assert!(n >= 5, "found only {n} experiment files");
    }

    #[test]
    fn cases_resolve_per_group_and_per_member() {
        let e = Experiment::parse(
            r#"
name = "t"
title = "t"
[[figure]]
id = "a"
title = "a"
table = "III(a)"
background = "udp"
connections = 8
[[figure.case]]
id = 1
pg = [8, 6, 4, 2]
[[figure.case]]
id = 2
members = [8, 6, 4, 2]
groups = 2
connections = 4
"#,
        )
        .unwrap();
        let cases = e.figures[0].resolve().unwrap();
        assert_eq!(cases[0].values[1], [6.0; 4]);
        assert_eq!(cases[0].connections, 8);
        assert_eq!(cases[1].values, vec![[8.0, 6.0, 4.0, 2.0]; 2]);
        assert_eq!((cases[1].groups, cases[1].connections), (2, 4));
    }

    #[test]
    fn bad_cases_are_refused_with_their_name() {
        let base =
            "name = \"t\"\ntitle = \"t\"\n[[figure]]\nid = \"f\"\ntitle = \"f\"\ntable = \"x\"\n";
        for (case, want) in [
            ("background = \"udp\"\n[[figure.case]]\nid = 1\npg = [8, 8]\n", "2 values for 4"),
            ("background = \"udp\"\n[[figure.case]]\nid = 1\npg = [8, 8, 8, 200]\n", "200"),
            ("background = \"tcp\"\n[[figure.case]]\nid = 1\npg = [8, 8, 8, 2.5]\n", "whole"),
            ("background = \"udp\"\n[[figure.case]]\nid = 1\n", "exactly one"),
            (
                "background = \"udp\"\n[[figure.case]]\nid = 1\npg = [1,1,1,1]\n[[figure.case]]\nid = 1\npg = [1,1,1,1]\n",
                "duplicate",
            ),
        ] {
            let err = format!("{:#}", Experiment::parse(&format!("{base}{case}")).unwrap_err());
            assert!(err.contains("figure f") || err.contains("duplicate"), "{err}");
            assert!(err.contains(want), "{err}");
        }
    }

    #[test]
    fn case_lists() {
        let s = parse_case_list("1, 3,5-7").unwrap();
        assert_eq!(s.into_iter().collect::<Vec<_>>(), vec![1, 3, 5, 6, 7]);
        assert!(parse_case_list("7-5").is_err());
        assert!(parse_case_list("x").is_err());
    }
}
