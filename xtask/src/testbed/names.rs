//! Names of a testbed: its prefix, namespace names, host addresses and state directory, and the
//! namespaces and processes found on the machine by those names.

use std::path::{Path, PathBuf};

use anyhow::bail;

use crate::sh;
use crate::topology;

/// Where run state of all testbeds lives.
pub const STATE_ROOT: &str = "/run/mms-testbed";

/// Checks a prefix: 1..=12 of `[a-z0-9]`, so `P-` never matches another testbed's names.
pub fn validate_prefix(prefix: &str) -> anyhow::Result<()> {
    if prefix.is_empty()
        || prefix.len() > 12
        || !prefix
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    {
        bail!("prefix {prefix:?} must be 1 to 12 characters of a-z and 0-9");
    }
    Ok(())
}

/// The state directory of testbed `prefix`.
pub fn state_dir(prefix: &str) -> PathBuf {
    Path::new(STATE_ROOT).join(prefix)
}

/// Names of the namespaces of a testbed.
pub fn ns_inet(p: &str) -> String {
    format!("{p}-inet")
}
/// Gateway namespace of branch `b`.
pub fn ns_gw(p: &str, b: u8) -> String {
    format!("{p}-gw{b}")
}
/// Namespace of LAN host `j` of branch `b`.
pub fn ns_host(p: &str, b: u8, j: usize) -> String {
    if j == 0 {
        format!("{p}-h{b}")
    } else {
        format!("{p}-h{b}-{j}")
    }
}
/// Address of LAN host `j` of branch `b`.
pub fn host_addr(b: u8, j: usize) -> std::net::Ipv4Addr {
    // j < MAX_HOSTS (200) so 10 + j fits.
    topology::lan_addr(b, 10 + j as u8)
}

/// True when `name` is one of the namespace names testbed `prefix` uses.
pub(super) fn is_our_ns(prefix: &str, name: &str) -> bool {
    let Some(rest) = name.strip_prefix(prefix).and_then(|r| r.strip_prefix('-')) else {
        return false;
    };
    if rest == "inet" {
        return true;
    }
    let digits_then = |s: &str, tag: &str| -> bool {
        s.strip_prefix(tag).is_some_and(|n| {
            let mut parts = n.splitn(2, '-');
            let b = parts.next().unwrap_or("");
            let j = parts.next();
            !b.is_empty()
                && b.bytes().all(|c| c.is_ascii_digit())
                && j.is_none_or(|j| !j.is_empty() && j.bytes().all(|c| c.is_ascii_digit()))
        })
    };
    (digits_then(rest, "gw") && !rest.contains('-')) || digits_then(rest, "h")
}

/// All network namespaces on the machine.
pub fn list_netns() -> anyhow::Result<Vec<String>> {
    let out = sh::run("ip", &["netns", "list"])?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect())
}

/// Namespaces that belong to testbed `prefix`.
pub fn our_netns(prefix: &str) -> anyhow::Result<Vec<String>> {
    Ok(list_netns()?
        .into_iter()
        .filter(|n| is_our_ns(prefix, n))
        .collect())
}

/// PIDs of processes living in namespace `ns`.
pub fn ns_pids(ns: &str) -> Vec<u32> {
    sh::run("ip", &["netns", "pids", ns])
        .map(|o| {
            o.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_names_are_recognised_exactly() {
        assert!(is_our_ns("mms", "mms-inet"));
        assert!(is_our_ns("mms", "mms-gw1"));
        assert!(is_our_ns("mms", "mms-h12"));
        assert!(is_our_ns("mms", "mms-h1-3"));
        assert!(!is_our_ns("mms", "mmsx-gw1"));
        assert!(!is_our_ns("mms", "mms-gw1-2"));
        assert!(!is_our_ns("mms", "mms-h"));
        assert!(!is_our_ns("mms", "mms-hx"));
        assert!(!is_our_ns("mms", "other"));
        assert!(!is_our_ns("mms", "mms-inet2"));
    }

    #[test]
    fn prefixes_are_checked() {
        assert!(validate_prefix("mms").is_ok());
        assert!(validate_prefix("t1234").is_ok());
        assert!(validate_prefix("").is_err());
        assert!(validate_prefix("a-b").is_err());
        assert!(validate_prefix("ABC").is_err());
        assert!(validate_prefix("abcdefghijklm").is_err());
    }
}
