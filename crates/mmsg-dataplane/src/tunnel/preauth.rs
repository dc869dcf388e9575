//! Bounds on what an unauthenticated tunnel connection may hold (docs/security.md "Pre-auth
//! limits on the tunnel listener"), pure logic with time as a parameter:
//! - [`PreAuth`]: how many accepted connections have not passed their handshake and hello yet,
//!   in total and per source address; a connection over either cap is closed at accept, before a
//!   task or a buffer exists for it. A [`Permit`] is held from accept until the hello passed (or
//!   the connection ended).
//! - [`RefusalLog`]: one log line per source address per [`LOG_INTERVAL`] (after a burst), and
//!   over all sources at most [`LOG_GLOBAL_BURST`] lines at once and one per
//!   [`LOG_GLOBAL_PERIOD`] after that; the refusals in between are only counted (and the next
//!   line of their source says how many were not logged), so a flood from one or from many
//!   addresses cannot flood the log.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Most connections accepted but not yet authenticated, over every listener of the gateway. A
/// legitimate peer has at most 2 classes × 16 groups = 32 connections per remote branch, all of
/// them authenticated within a round trip or two; 256 leaves room for 8 branches reconnecting at
/// once. Each holds a task and a [`PREAUTH_BUF`]-byte buffer (TLS: the TLS read buffer too).
pub const MAX_PREAUTH_TOTAL: usize = 256;
/// Most unauthenticated connections from one source address: a remote branch reconnecting all
/// its connections of one WAN address at once (2 classes × up to 8 groups per address in the
/// testbeds) stays below it.
pub const MAX_PREAUTH_PER_SOURCE: usize = 16;
/// Receive buffer of a connection before its hello passed: a maximal hello
/// ([`mpa::framing::MAX_HELLO_LEN`], 524 bytes) fits; the reader's full `RX_CHUNK` (128 KiB) is
/// only reserved once the hello passed.
pub const PREAUTH_BUF: usize = 1024;
/// Longest time from accept to a passed hello, TLS handshake included.
pub const PREAUTH_DEADLINE: Duration = Duration::from_secs(5);
/// After a burst of [`LOG_BURST`] lines, one refusal log line per source address per interval.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);
/// Refusal lines a source may cause at once (a few distinct mistakes of a real peer, or the
/// rogue attempts of `netns_tls`, are each logged); then [`LOG_INTERVAL`] applies.
pub const LOG_BURST: u32 = 10;
/// Refusal lines all sources together may cause at once: the per-source budget alone lets 500
/// addresses write 500 lines. 32 keeps every refusal of a few real peers (and the rogue attempts
/// of `netns_tls`) visible.
pub const LOG_GLOBAL_BURST: u32 = 32;
/// After [`LOG_GLOBAL_BURST`], one refusal line per this period over all sources: a flood from
/// many addresses writes at most 32 + 1 per second.
pub const LOG_GLOBAL_PERIOD: Duration = Duration::from_secs(1);
/// Most source addresses [`RefusalLog`] remembers (~48 bytes each); when full, sources whose
/// bucket would be full again are forgotten, and if none is, refusals from new sources go unlogged
/// (counted) until one is.
pub const MAX_LOG_SOURCES: usize = 4096;

/// Why [`PreAuth::try_admit`] refused a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// [`MAX_PREAUTH_TOTAL`] unauthenticated connections are open.
    Total,
    /// [`MAX_PREAUTH_PER_SOURCE`] unauthenticated connections from this address are open.
    PerSource,
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Limit::Total => "too many unauthenticated connections",
            Limit::PerSource => "too many unauthenticated connections from this address",
        })
    }
}

/// The counts of unauthenticated connections.
#[derive(Debug)]
pub struct PreAuth {
    max_total: usize,
    max_per_source: usize,
    total: usize,
    /// Only sources with at least one connection: at most `max_total` entries.
    per_source: HashMap<IpAddr, usize>,
}

impl PreAuth {
    /// Counts with the given caps.
    pub fn new(max_total: usize, max_per_source: usize) -> Self {
        PreAuth {
            max_total,
            max_per_source,
            total: 0,
            per_source: HashMap::new(),
        }
    }

    /// A connection from `src` was accepted: counted, or refused when a cap is reached.
    pub fn try_admit(&mut self, src: IpAddr) -> Result<(), Limit> {
        if self.total >= self.max_total {
            return Err(Limit::Total);
        }
        let n = self.per_source.entry(src).or_insert(0);
        if *n >= self.max_per_source {
            return Err(Limit::PerSource);
        }
        *n += 1;
        self.total += 1;
        Ok(())
    }

    /// A connection from `src` that [`PreAuth::try_admit`] counted authenticated or ended.
    pub fn release(&mut self, src: IpAddr) {
        if let Some(n) = self.per_source.get_mut(&src) {
            *n -= 1;
            self.total = self.total.saturating_sub(1);
            if *n == 0 {
                self.per_source.remove(&src);
            }
        }
    }

    /// Unauthenticated connections open, in total.
    #[cfg(test)]
    pub fn total(&self) -> usize {
        self.total
    }

    /// Unauthenticated connections open from `src`.
    #[cfg(test)]
    pub fn from(&self, src: IpAddr) -> usize {
        self.per_source.get(&src).copied().unwrap_or(0)
    }
}

/// One admitted connection's place in a shared [`PreAuth`], given back on drop (authenticated,
/// refused or ended, whichever comes first).
#[derive(Debug)]
pub struct Permit {
    pool: Arc<Mutex<PreAuth>>,
    src: IpAddr,
}

impl Permit {
    /// Admits a connection from `src` into `pool`.
    pub fn acquire(pool: &Arc<Mutex<PreAuth>>, src: IpAddr) -> Result<Permit, Limit> {
        pool.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .try_admit(src)?;
        Ok(Permit {
            pool: Arc::clone(pool),
            src,
        })
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .release(self.src);
    }
}

/// Per source: a token bucket of log lines ([`LOG_BURST`] lines, one more per interval) and how
/// many refusals were not logged since the last line; over all sources a second bucket
/// ([`LOG_GLOBAL_BURST`] lines, one more per [`LOG_GLOBAL_PERIOD`]).
#[derive(Debug)]
pub struct RefusalLog {
    interval: Duration,
    max_sources: usize,
    /// Source → (tokens, when the bucket was last refilled, refusals not logged).
    last: HashMap<IpAddr, (u32, Instant, u64)>,
    /// The bucket over all sources: (tokens, when it was last refilled); `None` until the first
    /// refusal.
    global: Option<(u32, Instant)>,
}

impl RefusalLog {
    /// [`LOG_BURST`] lines, then one per source per `interval`; at most `max_sources` sources
    /// remembered; over all sources the global bucket.
    pub fn new(interval: Duration, max_sources: usize) -> Self {
        RefusalLog {
            interval,
            max_sources,
            last: HashMap::new(),
            global: None,
        }
    }

    /// Whether the bucket over all sources has a line left at `now` (refilled first).
    fn global_has_token(&mut self, now: Instant) -> bool {
        let (tokens, at) = self.global.get_or_insert((LOG_GLOBAL_BURST, now));
        let elapsed = now.saturating_duration_since(*at);
        let refill = (elapsed.as_nanos() / LOG_GLOBAL_PERIOD.as_nanos().max(1)) as u32;
        if refill > 0 {
            *tokens = tokens.saturating_add(refill).min(LOG_GLOBAL_BURST);
            *at = now;
        }
        *tokens > 0
    }

    fn take_global(&mut self) {
        if let Some((tokens, _)) = self.global.as_mut() {
            *tokens = tokens.saturating_sub(1);
        }
    }

    /// A refusal of a connection from `src` at `now`: `Some(n)` when it should be logged (`n`
    /// earlier refusals from `src` were not), `None` when it should only be counted.
    pub fn should_log(&mut self, now: Instant, src: IpAddr) -> Option<u64> {
        let interval = self.interval;
        let global = self.global_has_token(now);
        if let Some((tokens, at, skipped)) = self.last.get_mut(&src) {
            let elapsed = now.saturating_duration_since(*at);
            let refill = (elapsed.as_nanos() / interval.as_nanos().max(1)) as u32;
            if refill > 0 {
                *tokens = tokens.saturating_add(refill).min(LOG_BURST);
                *at = now;
            }
            if *tokens == 0 || !global {
                *skipped += 1;
                return None;
            }
            *tokens -= 1;
            let n = std::mem::take(skipped);
            self.take_global();
            return Some(n);
        }
        if self.last.len() >= self.max_sources {
            // Forget sources whose bucket is full again (nothing to remember).
            let full = interval * LOG_BURST;
            self.last
                .retain(|_, (_, at, _)| now.saturating_duration_since(*at) < full);
            if self.last.len() >= self.max_sources {
                return None;
            }
        }
        if !global {
            // Remembered with its count, so its next logged line says how many were not.
            self.last.insert(src, (LOG_BURST, now, 1));
            return None;
        }
        self.last.insert(src, (LOG_BURST - 1, now, 0));
        self.take_global();
        Some(0)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([198, 18, 99, last])
    }

    #[test]
    fn caps_per_source_and_in_total() {
        let mut p = PreAuth::new(5, 3);
        for _ in 0..3 {
            p.try_admit(ip(1)).unwrap();
        }
        assert_eq!(p.try_admit(ip(1)), Err(Limit::PerSource));
        p.try_admit(ip(2)).unwrap();
        p.try_admit(ip(2)).unwrap();
        assert_eq!(p.total(), 5);
        assert_eq!(p.try_admit(ip(3)), Err(Limit::Total));
        p.release(ip(1));
        assert_eq!(p.from(ip(1)), 2);
        p.try_admit(ip(3)).unwrap();
        // Releasing an address never admitted changes nothing.
        p.release(ip(9));
        assert_eq!(p.total(), 5);
        for a in [1, 1, 2, 2, 3] {
            p.release(ip(a));
        }
        assert_eq!(
            (p.total(), p.per_source.len()),
            (0, 0),
            "no entry left behind"
        );
    }

    #[test]
    fn a_permit_is_given_back_on_drop() {
        let pool = Arc::new(Mutex::new(PreAuth::new(2, 1)));
        let a = Permit::acquire(&pool, ip(1)).unwrap();
        assert_eq!(Permit::acquire(&pool, ip(1)).unwrap_err(), Limit::PerSource);
        let b = Permit::acquire(&pool, ip(2)).unwrap();
        assert_eq!(Permit::acquire(&pool, ip(3)).unwrap_err(), Limit::Total);
        drop(a);
        let _c = Permit::acquire(&pool, ip(1)).unwrap();
        drop(b);
        assert_eq!(pool.lock().unwrap().total(), 1);
    }

    #[test]
    fn a_burst_then_one_line_per_source_per_interval() {
        let t0 = Instant::now();
        let sec = Duration::from_secs;
        let mut l = RefusalLog::new(sec(10), 2);
        for _ in 0..LOG_BURST {
            assert_eq!(l.should_log(t0, ip(1)), Some(0));
        }
        for _ in 0..1000 {
            assert_eq!(l.should_log(t0 + sec(1), ip(1)), None);
        }
        // Another source has its own budget.
        assert_eq!(l.should_log(t0, ip(2)), Some(0));
        // Full (2 sources, both recent): a third source is not logged, only counted.
        assert_eq!(l.should_log(t0 + sec(5), ip(3)), None);
        // One interval later: one line, with the count of what was not logged; then silence.
        assert_eq!(l.should_log(t0 + sec(10), ip(1)), Some(1000));
        assert_eq!(l.should_log(t0 + sec(11), ip(1)), None);
        assert_eq!(l.should_log(t0 + sec(20), ip(1)), Some(1));
        // A flood of 2,000 refusals over 60 s: the burst plus one line per interval.
        let mut l = RefusalLog::new(sec(10), 2);
        let logged = (0..2000u64)
            .filter(|i| {
                l.should_log(t0 + Duration::from_millis(i * 30), ip(1))
                    .is_some()
            })
            .count();
        assert_eq!(logged, LOG_BURST as usize + 5);
        // ip(2)'s bucket is full again after LOG_BURST intervals: forgotten to make room.
        let mut l = RefusalLog::new(sec(10), 2);
        l.should_log(t0, ip(1));
        l.should_log(t0, ip(2));
        assert_eq!(l.should_log(t0 + sec(10) * LOG_BURST, ip(3)), Some(0));
        assert!(l.last.len() <= 2);
    }

    #[test]
    fn many_sources_share_one_global_budget() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut l = RefusalLog::new(Duration::from_secs(10), MAX_LOG_SOURCES);
        let src = |i: u32| IpAddr::from([198, 18, (i >> 8) as u8, i as u8]);
        // 500 sources, one refusal each within 10 ms: only the global burst is logged.
        let logged = (0..500)
            .filter(|&i| l.should_log(t0 + ms(u64::from(i) / 50), src(i)).is_some())
            .count();
        assert_eq!(logged, LOG_GLOBAL_BURST as usize);
        // Then one line per period over all sources; a source that was not logged says how many
        // refusals its line stands for.
        assert_eq!(l.should_log(t0 + ms(500), src(400)), None);
        assert_eq!(l.should_log(t0 + ms(1000), src(400)), Some(2));
        assert_eq!(l.should_log(t0 + ms(1500), src(401)), None);
        // 500 sources × 4 refusals spread over 10 s: at most the burst plus one per second.
        let mut l = RefusalLog::new(Duration::from_secs(10), MAX_LOG_SOURCES);
        let logged = (0..2000u32)
            .filter(|&i| {
                l.should_log(t0 + ms(u64::from(i) * 5), src(i % 500))
                    .is_some()
            })
            .count();
        assert_eq!(logged, LOG_GLOBAL_BURST as usize + 9);
    }
}
