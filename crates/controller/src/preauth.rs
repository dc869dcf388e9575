//! Bounded pre-authentication state of the controller's network listeners (issue #17): the
//! OpenFlow listeners ([`crate::ofc`]) and the gateway channel ([`crate::gwchan`]).
//!
//! A connection is *pre-auth* from `accept` until its peer proved who it is (TLS handshake with
//! a client certificate plus the first protocol exchange: FEATURES_REPLY for OpenFlow, the
//! registration for the gateway channel). Until then it holds a [`Permit`] of a [`Guard`]:
//!
//! - at most [`PreAuthLimits::total`] pre-auth connections at once, and at most
//!   [`PreAuthLimits::per_source`] from one source (an IPv4 address, or an IPv6 /64); a
//!   connection over the caps is closed at once, counted, never given a task or a buffer;
//! - the whole pre-auth phase has one deadline, [`PreAuthLimits::deadline`] (at most
//!   [`MAX_DEADLINE`]);
//! - refusals (over a cap, handshake timed out or failed, wrong identity, a takeover attempt)
//!   are counted ([`Refusals`]) and logged at most once per source and reason per
//!   [`PreAuthLimits::log_interval`]: one WARN line that says how many were suppressed since the
//!   last one (so a port scan does not hide a takeover attempt from the same address). The table of sources logged is bounded ([`MAX_LOGGED_SOURCES`]); beyond it the
//!   refusals share one line per interval.
//!
//! The core is sans-IO: time is a parameter ([`Guard::admit_at`], [`Guard::refuse_at`]).
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The longest pre-auth deadline accepted (issue #17: 5 s or less).
pub const MAX_DEADLINE: Duration = Duration::from_secs(5);
/// (Source, reason) pairs whose last refusal log line is remembered; beyond that they share one
/// line per reason.
pub const MAX_LOGGED_SOURCES: usize = 1024;

/// The caps of one listener family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PreAuthLimits {
    /// Pre-auth connections at once, all sources together.
    pub total: usize,
    /// Pre-auth connections at once from one source (IPv4 address or IPv6 /64).
    pub per_source: usize,
    /// Time from accept to authenticated (TLS handshake and first exchange), at most
    /// [`MAX_DEADLINE`].
    pub deadline: Duration,
    /// At most one refusal line per source per this interval.
    pub log_interval: Duration,
}

impl Default for PreAuthLimits {
    fn default() -> Self {
        Self {
            total: 256,
            per_source: 8,
            deadline: MAX_DEADLINE,
            log_interval: Duration::from_secs(10),
        }
    }
}

impl PreAuthLimits {
    /// The same limits with the deadline clamped to 1 ms..=[`MAX_DEADLINE`] and the caps to ≥ 1.
    pub fn clamped(self) -> Self {
        Self {
            total: self.total.max(1),
            per_source: self.per_source.max(1),
            deadline: self.deadline.clamp(Duration::from_millis(1), MAX_DEADLINE),
            log_interval: self.log_interval,
        }
    }
}

/// Why a connection was refused or closed before it authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// [`PreAuthLimits::total`] pre-auth connections already.
    OverTotal,
    /// [`PreAuthLimits::per_source`] pre-auth connections from this source already.
    OverSource,
    /// Not authenticated within [`PreAuthLimits::deadline`].
    HandshakeTimeout,
    /// TLS handshake or first exchange failed (bad certificate, garbage, too large, closed).
    HandshakeFailed,
    /// The identity it claims is not the one it authenticated as (datapath id vs certificate,
    /// a certificate without a branch).
    WrongIdentity,
    /// An unauthenticated connection claimed a branch that has an authenticated one.
    Takeover,
}

impl Reason {
    fn as_str(self) -> &'static str {
        match self {
            Reason::OverTotal => "too many unauthenticated connections",
            Reason::OverSource => "too many unauthenticated connections from this source",
            Reason::HandshakeTimeout => "not authenticated in time",
            Reason::HandshakeFailed => "handshake failed",
            Reason::WrongIdentity => "claimed identity differs from the authenticated one",
            Reason::Takeover => {
                "unauthenticated connection claims a branch held by an authenticated one"
            }
        }
    }
}

/// Counters of a listener family (`GET /api/v1/stats` for OpenFlow, `GET /api/v1/gateways` for
/// the gateway channel).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct Refusals {
    /// Unauthenticated connections open now.
    pub pending: u64,
    /// Connections admitted to the pre-auth phase.
    pub admitted: u64,
    /// Refused: over the total cap.
    pub over_total: u64,
    /// Refused: over the per-source cap.
    pub over_source: u64,
    /// Closed: not authenticated within the deadline.
    pub handshake_timeout: u64,
    /// Closed: TLS handshake or first exchange failed.
    pub handshake_failed: u64,
    /// Refused: claimed identity (datapath id, branch) differs from the certificate's.
    pub wrong_identity: u64,
    /// Refused: an unauthenticated connection tried to replace an authenticated one.
    pub takeover: u64,
    /// Refusal lines logged.
    pub log_lines: u64,
    /// Refusals not logged (rate limit).
    pub log_suppressed: u64,
}

#[derive(Debug)]
struct State {
    limits: PreAuthLimits,
    pending: usize,
    per_source: HashMap<IpAddr, usize>,
    /// Per source (None: non-IP peers and the overflow bucket) and reason: last line logged,
    /// refusals suppressed since.
    logged: HashMap<(Option<IpAddr>, Reason), (Instant, u64)>,
    counts: Refusals,
}

/// The pre-auth state of one listener family (shared by its listeners).
#[derive(Debug)]
pub struct Guard {
    what: &'static str,
    state: Mutex<State>,
}

/// One admitted pre-auth connection; dropping it frees its place.
#[derive(Debug)]
pub struct Permit {
    guard: Arc<Guard>,
    source: Option<IpAddr>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut s = self.guard.lock();
        s.pending = s.pending.saturating_sub(1);
        s.counts.pending = s.pending as u64;
        if let Some(ip) = self.source {
            if let Some(n) = s.per_source.get_mut(&ip) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    s.per_source.remove(&ip);
                }
            }
        }
    }
}

/// The per-source key: an IPv4 address (IPv4-mapped IPv6 included), or an IPv6 /64.
pub fn source_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

impl Guard {
    /// A guard for `what` (`OpenFlow`, `gateway`: names the log lines).
    pub fn new(what: &'static str, limits: PreAuthLimits) -> Arc<Self> {
        Arc::new(Self {
            what,
            state: Mutex::new(State {
                limits: limits.clamped(),
                pending: 0,
                per_source: HashMap::new(),
                logged: HashMap::new(),
                counts: Refusals::default(),
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The current limits.
    pub fn limits(&self) -> PreAuthLimits {
        self.lock().limits
    }

    /// Replaces the limits (clamped); admitted connections keep their place.
    pub fn set_limits(&self, limits: PreAuthLimits) {
        self.lock().limits = limits.clamped();
    }

    /// The counters now.
    pub fn counters(&self) -> Refusals {
        self.lock().counts
    }

    /// Admits a connection from `peer` (`None`: not an IP peer, only the total cap applies),
    /// or refuses it (counted and logged, rate-limited).
    pub fn admit(self: &Arc<Self>, peer: Option<IpAddr>) -> Option<Permit> {
        self.admit_at(peer, Instant::now())
    }

    /// [`Self::admit`] at `now`.
    pub fn admit_at(self: &Arc<Self>, peer: Option<IpAddr>, now: Instant) -> Option<Permit> {
        let source = peer.map(source_key);
        let refusal = {
            let mut s = self.lock();
            if s.pending >= s.limits.total {
                Some(Reason::OverTotal)
            } else if source.is_some_and(|ip| {
                s.per_source.get(&ip).copied().unwrap_or(0) >= s.limits.per_source
            }) {
                Some(Reason::OverSource)
            } else {
                s.pending += 1;
                s.counts.pending = s.pending as u64;
                s.counts.admitted += 1;
                if let Some(ip) = source {
                    *s.per_source.entry(ip).or_insert(0) += 1;
                }
                None
            }
        };
        match refusal {
            Some(r) => {
                self.refuse_at(peer, r, "", now);
                None
            }
            None => Some(Permit {
                guard: Arc::clone(self),
                source,
            }),
        }
    }

    /// Counts a refusal of `peer` and logs it unless this source had a line within the log
    /// interval. Returns whether a line was logged.
    pub fn refuse(&self, peer: Option<IpAddr>, reason: Reason, detail: &str) -> bool {
        self.refuse_at(peer, reason, detail, Instant::now())
    }

    /// [`Self::refuse`] at `now`.
    pub fn refuse_at(
        &self,
        peer: Option<IpAddr>,
        reason: Reason,
        detail: &str,
        now: Instant,
    ) -> bool {
        let mut s = self.lock();
        let c = &mut s.counts;
        match reason {
            Reason::OverTotal => c.over_total += 1,
            Reason::OverSource => c.over_source += 1,
            Reason::HandshakeTimeout => c.handshake_timeout += 1,
            Reason::HandshakeFailed => c.handshake_failed += 1,
            Reason::WrongIdentity => c.wrong_identity += 1,
            Reason::Takeover => c.takeover += 1,
        }
        let interval = s.limits.log_interval;
        let mut key = (peer.map(source_key), reason);
        if key.0.is_some() && !s.logged.contains_key(&key) && s.logged.len() >= MAX_LOGGED_SOURCES {
            s.logged
                .retain(|_, (at, _)| now.saturating_duration_since(*at) < interval);
            if s.logged.len() >= MAX_LOGGED_SOURCES {
                key.0 = None;
            }
        }
        let suppressed = match s.logged.get_mut(&key) {
            Some((at, n)) if now.saturating_duration_since(*at) < interval => {
                *n += 1;
                None
            }
            Some(entry) => {
                let n = entry.1;
                *entry = (now, 0);
                Some(n)
            }
            None => {
                s.logged.insert(key, (now, 0));
                Some(0)
            }
        };
        match suppressed {
            None => {
                s.counts.log_suppressed += 1;
                false
            }
            Some(n) => {
                s.counts.log_lines += 1;
                let what = self.what;
                drop(s);
                let source = peer.map_or_else(|| "-".to_owned(), |p| p.to_string());
                tracing::warn!(
                    %source,
                    reason = reason.as_str(),
                    detail,
                    suppressed_since_last = n,
                    "{what} connection refused (one line per source and reason per {}s, the rest counted)",
                    interval.as_secs()
                );
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap_or(IpAddr::from([0, 0, 0, 0])))
    }

    #[test]
    fn caps_per_source_and_total_and_release() {
        let g = Guard::new(
            "test",
            PreAuthLimits {
                total: 3,
                per_source: 2,
                ..PreAuthLimits::default()
            },
        );
        let t = Instant::now();
        let a1 = g.admit_at(ip("198.18.0.1"), t);
        let a2 = g.admit_at(ip("198.18.0.1"), t);
        assert!(a1.is_some() && a2.is_some());
        assert!(g.admit_at(ip("198.18.0.1"), t).is_none(), "per source");
        let b1 = g.admit_at(ip("198.18.0.2"), t);
        assert!(b1.is_some());
        assert!(g.admit_at(ip("198.18.0.3"), t).is_none(), "total");
        let c = g.counters();
        assert_eq!(
            (c.pending, c.admitted, c.over_source, c.over_total),
            (3, 3, 1, 1)
        );
        drop(a1);
        assert_eq!(g.counters().pending, 2);
        assert!(g.admit_at(ip("198.18.0.1"), t).is_some(), "a freed place");
        assert_eq!(g.counters().pending, 2, "the temporary permit was dropped");
        drop((a2, b1));
        assert_eq!(g.counters().pending, 0);
    }

    #[test]
    fn ipv6_sources_share_their_64() {
        let g = Guard::new(
            "test",
            PreAuthLimits {
                per_source: 1,
                ..PreAuthLimits::default()
            },
        );
        let t = Instant::now();
        let _a = g.admit_at(ip("2001:db8:1:2::1"), t).unwrap();
        assert!(g.admit_at(ip("2001:db8:1:2::ffff"), t).is_none());
        assert!(g.admit_at(ip("2001:db8:1:3::1"), t).is_some());
        assert_eq!(
            source_key("::ffff:198.18.0.9".parse().unwrap()),
            IpAddr::from([198, 18, 0, 9])
        );
    }

    #[test]
    fn one_line_per_source_per_interval() {
        let g = Guard::new("test", PreAuthLimits::default());
        let t = Instant::now();
        assert!(g.refuse_at(ip("198.18.0.1"), Reason::HandshakeFailed, "", t));
        for _ in 0..100 {
            assert!(!g.refuse_at(ip("198.18.0.1"), Reason::HandshakeFailed, "", t));
        }
        assert!(g.refuse_at(ip("198.18.0.2"), Reason::Takeover, "", t));
        assert!(
            g.refuse_at(ip("198.18.0.1"), Reason::Takeover, "", t),
            "another reason from the same source gets its own line"
        );
        assert!(!g.refuse_at(ip("198.18.0.1"), Reason::Takeover, "", t));
        let later = t + Duration::from_secs(11);
        assert!(g.refuse_at(ip("198.18.0.1"), Reason::HandshakeTimeout, "", later));
        let c = g.counters();
        assert_eq!((c.log_lines, c.log_suppressed), (4, 101));
        assert_eq!(
            (c.handshake_failed, c.takeover, c.handshake_timeout),
            (101, 3, 1)
        );
    }

    #[test]
    fn the_table_of_logged_sources_is_bounded() {
        let g = Guard::new("test", PreAuthLimits::default());
        let t = Instant::now();
        for i in 0..(MAX_LOGGED_SOURCES as u32 + 500) {
            g.refuse_at(
                Some(IpAddr::from(std::net::Ipv4Addr::from(0xc612_0000 + i))),
                Reason::OverSource,
                "",
                t,
            );
        }
        let c = g.counters();
        // One line per remembered source and one for the shared overflow bucket.
        assert_eq!(c.log_lines, MAX_LOGGED_SOURCES as u64 + 1);
        assert_eq!(c.log_suppressed, 499);
        assert!(g.lock().logged.len() <= MAX_LOGGED_SOURCES + 1);
    }

    #[test]
    fn deadline_is_clamped_to_five_seconds() {
        let l = PreAuthLimits {
            deadline: Duration::from_secs(60),
            total: 0,
            ..PreAuthLimits::default()
        }
        .clamped();
        assert_eq!(l.deadline, MAX_DEADLINE);
        assert_eq!(l.total, 1);
    }
}
