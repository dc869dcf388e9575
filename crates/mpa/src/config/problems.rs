//! The validation errors, the `Problems` collector every table's check pushes into, and the
//! prefix-list check shared by `lan_prefixes`, `remote[r].lan_prefixes` and `striping.prefixes`.

use std::fmt;

use ipnet::IpNet;
use thiserror::Error;

/// Most LAN prefixes per branch (own or remote). The destination lookup is a linear longest-prefix
/// scan over all remote prefixes (≤ 14 × 64 = 896 entries × 24 B ≈ 21 KiB).
pub const MAX_PREFIXES_PER_BRANCH: usize = 64;

/// A configuration that could not be used.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// Not valid TOML, or not this schema (unknown key, wrong type, missing required key). The
    /// message names the key and the line.
    #[error("{0}")]
    Parse(#[from] toml::de::Error),
    /// The file parsed but some values are out of range or inconsistent.
    #[error("{0}")]
    Invalid(#[from] ValidationError),
}

/// Every problem [`Config::validate`] found, one per line.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub struct ValidationError {
    /// The problems, in file order.
    pub problems: Vec<Problem>,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

/// One invalid value: the key as spelled in the file and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The offending key, e.g. `remote[1].path_groups[2].id`.
    pub key: String,
    /// What is wrong, e.g. `17 is out of range 0..=15`.
    pub reason: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.reason)
    }
}

pub(super) fn check_prefixes(p: &mut Problems, key: &str, nets: &[IpNet]) {
    if nets.is_empty() {
        p.push(key, "at least one prefix is required".into());
    }
    if nets.len() > MAX_PREFIXES_PER_BRANCH {
        p.push(
            key,
            format!("{} prefixes, at most {MAX_PREFIXES_PER_BRANCH}", nets.len()),
        );
    }
    for (i, net) in nets.iter().enumerate() {
        if net.trunc() != *net {
            p.push(
                format!("{key}[{i}]"),
                format!("{net} has host bits set (did you mean {}?)", net.trunc()),
            );
        }
        if net.prefix_len() == 0 {
            p.push(
                format!("{key}[{i}]"),
                format!("{net} would tunnel everything"),
            );
        }
    }
}

#[derive(Default)]
pub(super) struct Problems(Vec<Problem>);

impl Problems {
    pub(super) fn push(&mut self, key: impl Into<String>, reason: String) {
        self.0.push(Problem {
            key: key.into(),
            reason,
        });
    }

    pub(super) fn finish(self) -> Result<(), ValidationError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ValidationError { problems: self.0 })
        }
    }
}
