//! The results of `cargo xtask experiment` (`results/<name>.json`): per figure, per case, the
//! IPoMP and baseline repetitions with the paper's numbers and the model's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::def::Case;

/// Min / median / max of the repetitions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Spread {
    /// Smallest.
    pub min: f64,
    /// Median.
    pub median: f64,
    /// Largest.
    pub max: f64,
    /// Every repetition, in order.
    pub reps: Vec<f64>,
}

impl Spread {
    /// `None` for no repetitions.
    pub(super) fn of(v: &[f64]) -> Option<Spread> {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let (min, max) = (*s.first()?, *s.last()?);
        let mid = s.get(n / 2).copied()?;
        let median = if n % 2 == 1 {
            mid
        } else {
            (s.get(n / 2 - 1).copied()? + mid) / 2.0
        };
        Some(Spread {
            min,
            median,
            max,
            reps: v.to_vec(),
        })
    }
}

/// An `f64` that JSON wrote as `null`: serde_json writes NaN and infinities so (a model with no
/// bound for TCP background, a ratio over a baseline of 0); read back as NaN, so `--merge` and
/// `--replot` can load every report `save` wrote.
fn number_or_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// One case's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaseResult {
    /// Figure id.
    pub figure: String,
    /// The paper's test case number.
    pub id: u32,
    /// The settings.
    pub settings: Case,
    /// Median IPoMP goodput (Mbit/s).
    #[serde(deserialize_with = "number_or_null")]
    pub ipomp_mbps: f64,
    /// Median baseline goodput (Mbit/s).
    #[serde(deserialize_with = "number_or_null")]
    pub baseline_mbps: f64,
    /// The paper's IPoMP number, where it gives one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paper_ipomp_mbps: Option<f64>,
    /// IPoMP repetitions.
    pub ipomp: Spread,
    /// Baseline repetitions.
    pub baseline: Spread,
    /// UDP through the tunnel (Table I).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp: Option<Spread>,
    /// The paper's UDP number (Table I).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paper_udp_mbps: Option<f64>,
    /// End-to-end MPTCP without MMS (Table I).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e2e_mptcp_mbps: Option<f64>,
    /// The paper's end-to-end MPTCP number (Table I).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paper_e2e_mptcp_mbps: Option<f64>,
    /// What the bottlenecks and ports leave for IPoMP (IP Mbit/s, [`model`](super::model)).
    #[serde(deserialize_with = "number_or_null")]
    pub model_ipomp_mbps: f64,
    /// What they leave for the baseline.
    #[serde(deserialize_with = "number_or_null")]
    pub model_baseline_mbps: f64,
    /// `ipomp_mbps / baseline_mbps`.
    #[serde(deserialize_with = "number_or_null")]
    pub ratio: f64,
}

/// One figure's results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FigureResult {
    /// Id, e.g. `fig10a`.
    pub id: String,
    /// Caption.
    pub title: String,
    /// The paper's table.
    pub table: String,
    /// Cases in file order.
    pub cases: Vec<CaseResult>,
}

/// The whole report (`results/<name>.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// Experiment name.
    pub name: String,
    /// Title.
    pub title: String,
    /// Start time (UTC, RFC 3339).
    pub started: String,
    /// Wall time in seconds.
    pub duration_secs: f64,
    /// Seconds per measurement.
    pub secs: u32,
    /// Warm-up seconds not counted.
    pub omit_secs: u32,
    /// Repetitions per case.
    pub reps: u32,
    /// `uname -r`, `nproc`, load average at the start.
    pub machine: BTreeMap<String, String>,
    /// The figures.
    pub figures: Vec<FigureResult>,
    /// Earlier runs whose cases were kept by `--merge`: their start time and machine load.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_runs: Vec<MergedRun>,
}

/// An earlier run merged into a report (`--merge`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MergedRun {
    /// Its start time (UTC, RFC 3339).
    pub started: String,
    /// Its machine facts (load at its start).
    pub machine: BTreeMap<String, String>,
    /// The cases of it that were kept, as `figure:case`.
    pub cases: Vec<String>,
}
