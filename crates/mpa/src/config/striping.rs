//! `[striping]`: which elephant flows are spread over path groups, and the receiver's
//! resequencing parameters.

use std::time::Duration;

use ipnet::IpNet;
use serde::{Deserialize, Deserializer, Serialize};

use crate::Class;

use super::problems::{check_prefixes, Problems};

/// `[striping]`: which flows are striped and the receiver's resequencing parameters.
///
/// A flow is striped once its measured rate ([`crate::flow_table`]) exceeds `threshold_kbit` and
/// its class is in `classes` or its inner source or destination is in `prefixes`. Both gateways of
/// a pair should carry the same table: the sender stripes, the receiver resequences with `S`, `T`
/// and `LRF` from here.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StripingConfig {
    /// Classes whose elephant flows are striped. Default: none.
    #[serde(default)]
    pub classes: Vec<Class>,
    /// Inner prefixes (source or destination) whose elephant flows are striped. Default: none.
    #[serde(default)]
    pub prefixes: Vec<IpNet>,
    /// A flow faster than this is an elephant and is striped (from then on, for its lifetime in
    /// the flow table). Default: 1000 (1 Mbit/s).
    #[serde(default = "default_striping_threshold_kbit")]
    pub threshold_kbit: u64,
    /// The receiver's buffer size `S` in frames per flow, 2..=4096. Default: 1024.
    #[serde(default = "default_striping_buffer_frames")]
    pub buffer_frames: usize,
    /// The loss-recovery factor (seed 001 Alg. 1), 1..=1000. Default: 20.
    #[serde(default = "default_striping_lrf")]
    pub lrf: u32,
    /// The release threshold `T` as a count of buffered frames, below `buffer_frames`, or "auto"
    /// (sized from the MDI and the rates of the paths, `resequencer::Threshold::from_paths`).
    /// Default: "auto".
    #[serde(default)]
    pub release_frames: Auto,
    /// The release threshold `T` as the longest wait of a frame behind a gap in milliseconds,
    /// 1..=1000, or "auto". Default: "auto".
    #[serde(default)]
    pub release_hold_ms: Auto,
    /// Lengthen the hold (and the count with it) to the reordering delay the resequencer measures
    /// (gaps that filled, frames that came after their gap was released), up to 1 s; never shorter
    /// than `release_hold_ms`. Default: true.
    #[serde(default = "default_true")]
    pub release_hold_adapt: bool,
}

fn default_true() -> bool {
    true
}

fn default_striping_threshold_kbit() -> u64 {
    1_000
}
fn default_striping_buffer_frames() -> usize {
    crate::resequencer::DEFAULT_BUFFER_FRAMES
}
fn default_striping_lrf() -> u32 {
    crate::resequencer::DEFAULT_LRF
}

/// A number or the word "auto".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Auto {
    /// Computed at run time.
    #[default]
    Auto,
    /// This value.
    #[serde(untagged)]
    Value(u64),
}

impl<'de> Deserialize<'de> for Auto {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(u64),
            Word(String),
        }
        match Raw::deserialize(d) {
            Ok(Raw::Number(n)) => Ok(Auto::Value(n)),
            Ok(Raw::Word(w)) if w == "auto" => Ok(Auto::Auto),
            Ok(Raw::Word(w)) => Err(serde::de::Error::custom(format!(
                "{w:?}: expected a non-negative integer or \"auto\""
            ))),
            Err(_) => Err(serde::de::Error::custom(
                "expected a non-negative integer or \"auto\"",
            )),
        }
    }
}

impl StripingConfig {
    /// The resequencer parameters for these settings: `T` from the file, or (for "auto")
    /// [`crate::resequencer::Threshold::default`] until the driver sizes it from the paths.
    pub fn reseq_params(&self) -> crate::resequencer::Params {
        use crate::resequencer::{Params, Threshold};
        let auto = Threshold::default();
        let buffer_frames = self.buffer_frames;
        Params {
            buffer_frames,
            threshold: Threshold {
                frames: match self.release_frames {
                    Auto::Auto => auto.frames.min(buffer_frames.saturating_sub(1)),
                    Auto::Value(n) => usize::try_from(n).unwrap_or(usize::MAX),
                },
                hold: match self.release_hold_ms {
                    Auto::Auto => auto.hold,
                    Auto::Value(ms) => Duration::from_millis(ms),
                },
            },
            lrf: self.lrf,
            idle_timeout: crate::resequencer::DEFAULT_IDLE_TIMEOUT,
            adapt_hold: self.release_hold_adapt,
        }
    }

    /// The elephant threshold in bytes per second.
    pub fn threshold_bytes_per_s(&self) -> u64 {
        self.threshold_kbit.saturating_mul(1_000) / 8
    }

    pub(super) fn validate(&self, p: &mut Problems) {
        if self.classes.is_empty() && self.prefixes.is_empty() {
            p.push(
                "striping",
                "names no class and no prefix (remove the table to turn striping off)".into(),
            );
        }
        if !self.prefixes.is_empty() {
            check_prefixes(p, "striping.prefixes", &self.prefixes);
        }
        if self.classes.iter().any(|c| !c.is_tunnelled()) {
            p.push(
                "striping.classes",
                "type3 is never tunnelled: use type1 or type2".into(),
            );
        }
        if !(1..=100_000_000).contains(&self.threshold_kbit) {
            p.push(
                "striping.threshold_kbit",
                format!("{} is out of range 1..=100000000", self.threshold_kbit),
            );
        }
        let max_s = crate::resequencer::MAX_BUFFER_FRAMES;
        if !(2..=max_s).contains(&self.buffer_frames) {
            p.push(
                "striping.buffer_frames",
                format!("{} is out of range 2..={max_s}", self.buffer_frames),
            );
        }
        if !(1..=1_000).contains(&self.lrf) {
            p.push(
                "striping.lrf",
                format!("{} is out of range 1..=1000", self.lrf),
            );
        }
        if let Auto::Value(n) = self.release_frames {
            if n == 0 || n >= self.buffer_frames as u64 {
                p.push(
                    "striping.release_frames",
                    format!(
                        "{n} must be above 0 and below striping.buffer_frames ({})",
                        self.buffer_frames
                    ),
                );
            }
        }
        if let Auto::Value(ms) = self.release_hold_ms {
            if !(1..=1_000).contains(&ms) {
                p.push(
                    "striping.release_hold_ms",
                    format!("{ms} is out of range 1..=1000"),
                );
            }
        }
    }
}
