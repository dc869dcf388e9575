//! The WAN emulator's pure core: per packet, decide "drop" or "deliver at time t".
//!
//! A packet crosses up to three stages in order: the uplink of the port that owns its source
//! address, the bottleneck of its (source, destination) address pair, and the downlink of the port
//! that owns its destination address. Each stage may lose it (independent random loss, or a
//! Gilbert-Elliott burst model), queue it behind a rate limiter (an "earliest departure time" clock:
//! a packet of `len` bytes occupies the stage for `len * 8 / rate`; the queue in front of it is the
//! time until the stage is free, capped by the stage's queue limit, tail drop beyond), then add the
//! stage's propagation delay plus uniform jitter. With `reorder = false` (the default) a packet of an
//! address pair never leaves before an earlier packet of the same pair.
//!
//! Time is a parameter (nanoseconds on the caller's monotonic clock); randomness comes from an
//! injected seeded RNG, so tests are deterministic.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::topology::Impairment;

/// Nanoseconds per second.
const NS_PER_S: u64 = 1_000_000_000;
/// Default queue limit as time at the stage's rate: 100 ms (a common buffer size for access links).
const DEFAULT_QUEUE_NS: u64 = 100_000_000;
/// Smallest default queue, so slow links still hold a few full-size packets: 64 KiB.
const MIN_DEFAULT_QUEUE_BYTES: u64 = 64 * 1024;
/// Default mean burst length of the Gilbert-Elliott model, in packets.
const DEFAULT_BURST_LEN: f64 = 5.0;

/// What the emulator is told to do (written by the testbed as JSON, reloaded on SIGHUP).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmuConfig {
    /// One entry per emulated link (a WAN port's subnet).
    pub links: Vec<LinkConfig>,
    /// Per address pair bottlenecks (one direction each).
    pub pairs: Vec<PairConfig>,
    /// RNG seed.
    #[serde(default)]
    pub seed: u64,
}

/// A link, identified by the subnet its gateway address lives in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkConfig {
    /// Display name, e.g. `1a`.
    pub name: String,
    /// Subnet address.
    pub network: Ipv4Addr,
    /// Subnet prefix length.
    pub prefix_len: u8,
    /// Gateway → network direction.
    pub up: Impairment,
    /// Network → gateway direction.
    pub down: Impairment,
}

/// A one-directional address pair bottleneck.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PairConfig {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Impairment.
    pub imp: Impairment,
    /// Other (source, destination) address pairs whose packets cross this stage too, e.g.
    /// background traffic from hosts on the emulated internet sharing a member path's bottleneck
    /// (the paper's Case B). They skip the uplink and downlink stages unless their addresses
    /// belong to a link.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_with: Vec<(Ipv4Addr, Ipv4Addr)>,
}

/// Why a packet was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Random or burst loss.
    Loss,
    /// The stage's queue was full.
    QueueFull,
}

/// The decision for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Send it back into the network at this time (ns).
    Deliver(u64),
    /// Hold it until `at` (ns), then call [`Emulator::advance`] with `stage`.
    Next {
        /// Arrival time at the next rate-limited stage.
        at: u64,
        /// That stage.
        stage: u8,
    },
    /// Drop it.
    Drop(DropReason),
}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Packets seen.
    pub packets: u64,
    /// Packets dropped by loss.
    pub lost: u64,
    /// Packets dropped because a queue was full.
    pub queue_drops: u64,
    /// Packets that were not IPv4 (delivered untouched).
    pub not_ipv4: u64,
}

/// Run-time state of one stage (one direction of a link, or one pair).
#[derive(Debug, Clone)]
struct Stage {
    /// Rate in bit/s; 0 = unlimited.
    rate_bps: u64,
    delay_ns: u64,
    jitter_ns: u64,
    /// Independent loss probability.
    loss: f64,
    /// Gilbert-Elliott: P(good → bad) per packet.
    ge_enter: f64,
    /// Gilbert-Elliott: P(bad → good) per packet.
    ge_exit: f64,
    ge_bad: bool,
    queue_limit_bytes: u64,
    reorder: bool,
    /// Time at which the rate limiter is free again.
    free_at: u64,
    /// Background stream: interval between its 1500-byte packets (0 = none).
    bg_interval_ns: u64,
    /// Arrival time of the next background packet not yet accounted for.
    bg_next: u64,
    /// Background packets accounted for (fast-forwarded ones are not counted).
    bg_packets: u64,
}

/// Size of one background packet (a full-size UDP datagram on a 1500-byte MTU).
const BG_PACKET_BYTES: u64 = 1500;

impl Stage {
    fn new(imp: &Impairment) -> Option<Stage> {
        if imp.is_none() {
            return None;
        }
        let rate_bps = imp.rate_mbit.map_or(0, |r| (r * 1e6) as u64);
        let ms = |v: Option<f64>| (v.unwrap_or(0.0) * 1e6) as u64;
        let burst = imp.burst_loss_pct.unwrap_or(0.0) / 100.0;
        let len = imp.burst_len_pkts.unwrap_or(DEFAULT_BURST_LEN).max(1.0);
        // Stationary P(bad) = enter / (enter + exit) = burst, with every bad-state packet lost and
        // a mean sojourn in "bad" of 1/exit = len packets.
        let ge_exit = 1.0 / len;
        let ge_enter = if burst > 0.0 {
            (burst * ge_exit / (1.0 - burst)).min(1.0)
        } else {
            0.0
        };
        let queue_limit_bytes = match imp.queue_kib {
            Some(k) => u64::from(k) * 1024,
            None => (rate_bps / 8 * DEFAULT_QUEUE_NS / NS_PER_S).max(MIN_DEFAULT_QUEUE_BYTES),
        };
        Some(Stage {
            rate_bps,
            delay_ns: ms(imp.delay_ms),
            jitter_ns: ms(imp.jitter_ms),
            loss: imp.loss_pct.unwrap_or(0.0) / 100.0,
            ge_enter,
            ge_exit,
            ge_bad: false,
            queue_limit_bytes,
            reorder: imp.reorder.unwrap_or(false),
            free_at: 0,
            bg_interval_ns: match imp.background_mbit {
                Some(bg) if bg > 0.0 && rate_bps > 0 => {
                    (BG_PACKET_BYTES as f64 * 8.0 * NS_PER_S as f64 / (bg * 1e6)) as u64
                }
                _ => 0,
            },
            bg_next: 0,
            bg_packets: 0,
        })
    }

    /// Takes over the run-time state of `old`, the same stage before a reload: what its queue
    /// holds still drains before what arrives next, a burst-loss state and the background
    /// stream continue.
    fn carry(&mut self, old: &Stage) {
        if self.rate_bps > 0 && old.rate_bps > 0 {
            self.free_at = old.free_at;
        }
        self.ge_bad = old.ge_bad;
        if self.bg_interval_ns > 0 && old.bg_interval_ns > 0 {
            self.bg_next = old.bg_next;
        }
        self.bg_packets = old.bg_packets;
    }

    /// Bytes waiting in front of the rate limiter at time `t`.
    fn backlog_bytes(&self, t: u64) -> u128 {
        let backlog_ns = self.free_at.saturating_sub(t);
        u128::from(backlog_ns) * u128::from(self.rate_bps) / u128::from(NS_PER_S) / 8
    }

    /// Occupies the rate limiter with one packet of `len` bytes arriving at `t`; its exit time.
    fn occupy(&mut self, t: u64, len: u64) -> u64 {
        let start = self.free_at.max(t);
        let tx_ns = u128::from(len) * 8 * u128::from(NS_PER_S) / u128::from(self.rate_bps);
        self.free_at = start.saturating_add(u64::try_from(tx_ns).unwrap_or(u64::MAX));
        self.free_at
    }

    /// Accounts for the background packets that arrived before `t`. The background always gets
    /// its rate: its packets join the rate limiter whatever the queue holds (only real packets are
    /// tail-dropped), so the real traffic gets exactly `rate - background` in the long run, the
    /// paper's "available bandwidth", and still queues behind the background (at most the queue
    /// limit plus one background packet). After an idle period the stream is fast-forwarded: a
    /// background packet alone never queues (the background rate is below the stage's rate,
    /// validated), so only the last one before `t` matters.
    fn background_until(&mut self, t: u64) {
        if self.bg_interval_ns == 0 {
            return;
        }
        if self.bg_next == 0 {
            self.bg_next = t;
        }
        while self.bg_next <= t {
            if self.free_at <= self.bg_next {
                let skip = (t - self.bg_next) / self.bg_interval_ns;
                self.bg_next += skip * self.bg_interval_ns;
            }
            let at = self.bg_next;
            self.occupy(at, BG_PACKET_BYTES);
            self.bg_packets += 1;
            self.bg_next = at.saturating_add(self.bg_interval_ns);
        }
    }

    /// Passes a packet arriving at `t` through the stage; returns its exit time.
    fn pass(&mut self, t: u64, len: u64, rng: &mut SmallRng) -> Result<u64, DropReason> {
        if self.loss > 0.0 && rng.gen::<f64>() < self.loss {
            return Err(DropReason::Loss);
        }
        if self.ge_enter > 0.0 {
            let flip = rng.gen::<f64>();
            if self.ge_bad {
                if flip < self.ge_exit {
                    self.ge_bad = false;
                }
            } else if flip < self.ge_enter {
                self.ge_bad = true;
            }
            if self.ge_bad {
                return Err(DropReason::Loss);
            }
        }
        let mut t = t;
        if self.rate_bps > 0 {
            self.background_until(t);
            if self.backlog_bytes(t) + u128::from(len) > u128::from(self.queue_limit_bytes) {
                return Err(DropReason::QueueFull);
            }
            t = self.occupy(t, len);
        }
        t = t.saturating_add(self.delay_ns);
        if self.jitter_ns > 0 {
            t = t.saturating_add(rng.gen_range(0..=self.jitter_ns));
        }
        Ok(t)
    }
}

#[derive(Debug, Clone)]
struct Link {
    network: u32,
    mask: u32,
    up: Option<Stage>,
    down: Option<Stage>,
}

/// The emulator core.
#[derive(Debug)]
pub struct Emulator {
    links: Vec<Link>,
    pairs: HashMap<(u32, u32), Stage>,
    /// (src, dst) of traffic sharing a pair's stage → that pair's key.
    shared: HashMap<(u32, u32), (u32, u32)>,
    /// Last release time per address pair (for `reorder = false`).
    last_release: HashMap<(u32, u32), u64>,
    rng: SmallRng,
    stats: Stats,
}

/// Bound on `last_release` entries; cleared when exceeded (worst case 1 M × 24 B ≈ 24 MiB).
const MAX_PAIR_STATE: usize = 1 << 20;

impl Emulator {
    /// Builds an emulator from a config.
    pub fn new(cfg: &EmuConfig) -> Emulator {
        let links = cfg
            .links
            .iter()
            .map(|l| {
                let mask = if l.prefix_len == 0 {
                    0
                } else {
                    u32::MAX << (32 - u32::from(l.prefix_len.min(32)))
                };
                Link {
                    network: u32::from(l.network) & mask,
                    mask,
                    up: Stage::new(&l.up),
                    down: Stage::new(&l.down),
                }
            })
            .collect();
        let pairs = cfg
            .pairs
            .iter()
            .filter_map(|p| Some(((u32::from(p.src), u32::from(p.dst)), Stage::new(&p.imp)?)))
            .collect();
        let shared = cfg
            .pairs
            .iter()
            .flat_map(|p| {
                p.shared_with.iter().map(|&(a, b)| {
                    (
                        (u32::from(a), u32::from(b)),
                        (u32::from(p.src), u32::from(p.dst)),
                    )
                })
            })
            .collect();
        Emulator {
            links,
            pairs,
            shared,
            last_release: HashMap::new(),
            rng: SmallRng::seed_from_u64(cfg.seed),
            stats: Stats::default(),
        }
    }

    /// This emulator with a new configuration (SIGHUP): links and pairs that stay keep their
    /// queue, loss and background state ([`Stage::carry`]), and no packet overtakes one of its
    /// address pair released before (the per-pair release order is kept). A reload that
    /// started from empty queues let the packets after it overtake the ones still queued at
    /// the old rate (reordering, spurious retransmits) whenever a test changed a bottleneck
    /// under load. The counters start again from zero, as before.
    pub fn reconfigured(self, cfg: &EmuConfig) -> Emulator {
        let mut new = Emulator::new(cfg);
        let carry = |to: &mut Option<Stage>, from: &Option<Stage>| {
            if let (Some(to), Some(from)) = (to.as_mut(), from.as_ref()) {
                to.carry(from);
            }
        };
        for l in &mut new.links {
            if let Some(old) = self
                .links
                .iter()
                .find(|o| o.network == l.network && o.mask == l.mask)
            {
                carry(&mut l.up, &old.up);
                carry(&mut l.down, &old.down);
            }
        }
        for (key, stage) in &mut new.pairs {
            if let Some(old) = self.pairs.get(key) {
                stage.carry(old);
            }
        }
        new.last_release = self.last_release;
        new.rng = self.rng;
        new
    }

    /// Counters so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Decides the fate of one IP packet arriving at `now` (ns).
    pub fn handle_packet(&mut self, now: u64, pkt: &[u8]) -> Verdict {
        self.stats.packets += 1;
        self.advance(now, pkt, 0)
    }

    fn stage_mut(&mut self, stage: u8, src: u32, dst: u32) -> Option<&mut Stage> {
        let key = self.pair_key(src, dst);
        stage_of(&mut self.links, &mut self.pairs, stage, src, dst, key)
    }

    /// The pair stage key of a packet: its own address pair, or the pair it shares a stage with.
    fn pair_key(&self, src: u32, dst: u32) -> (u32, u32) {
        self.shared.get(&(src, dst)).copied().unwrap_or((src, dst))
    }

    /// Continues a packet at stage `from` (0 uplink, 1 pair, 2 downlink) at time `now`, its
    /// arrival time there. A packet that reaches a later rate-limited stage in the future comes
    /// back as [`Verdict::Next`]: the caller holds it until then and calls `advance` again, so
    /// each rate limiter serves packets in the order they really arrive at it.
    pub fn advance(&mut self, now: u64, pkt: &[u8], from: u8) -> Verdict {
        let (Some(&vihl), Some(&[s0, s1, s2, s3]), Some(&[d0, d1, d2, d3])) =
            (pkt.first(), pkt.get(12..16), pkt.get(16..20))
        else {
            self.stats.not_ipv4 += 1;
            return Verdict::Deliver(now);
        };
        if vihl >> 4 != 4 {
            self.stats.not_ipv4 += 1;
            return Verdict::Deliver(now);
        }
        let src = u32::from_be_bytes([s0, s1, s2, s3]);
        let dst = u32::from_be_bytes([d0, d1, d2, d3]);
        let len = pkt.len() as u64;
        let key = self.pair_key(src, dst);
        let mut t = now;
        for s in from..STAGES {
            let step = match stage_of(&mut self.links, &mut self.pairs, s, src, dst, key) {
                None => Ok(None),
                Some(stage) if s > from && stage.rate_bps > 0 && t > now => Ok(Some(t)),
                Some(stage) => stage.pass(t, len, &mut self.rng).map(|exit| {
                    t = exit;
                    None
                }),
            };
            match step {
                Ok(None) => {}
                Ok(Some(at)) => return Verdict::Next { at, stage: s },
                Err(reason) => {
                    match reason {
                        DropReason::Loss => self.stats.lost += 1,
                        DropReason::QueueFull => self.stats.queue_drops += 1,
                    }
                    return Verdict::Drop(reason);
                }
            }
        }
        let reorder = (0..STAGES).all(|s| self.stage_mut(s, src, dst).is_none_or(|st| st.reorder));
        if !reorder {
            if self.last_release.len() >= MAX_PAIR_STATE {
                self.last_release.clear();
            }
            let last = self.last_release.entry((src, dst)).or_insert(0);
            t = t.max(*last);
            *last = t;
        }
        Verdict::Deliver(t)
    }
}

/// Stages a packet crosses: uplink, pair, downlink.
const STAGES: u8 = 3;

/// The link whose subnet holds `addr` (a handful of links: a linear scan is fastest).
fn link_of(links: &[Link], addr: u32) -> Option<usize> {
    links.iter().position(|l| addr & l.mask == l.network)
}

/// Stage `stage` of a packet from `src` to `dst`, if it has one.
fn stage_of<'a>(
    links: &'a mut [Link],
    pairs: &'a mut HashMap<(u32, u32), Stage>,
    stage: u8,
    src: u32,
    dst: u32,
    pair_key: (u32, u32),
) -> Option<&'a mut Stage> {
    match stage {
        0 => {
            let i = link_of(links, src)?;
            links.get_mut(i)?.up.as_mut()
        }
        1 => pairs.get_mut(&pair_key),
        2 => {
            let i = link_of(links, dst)?;
            links.get_mut(i)?.down.as_mut()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4(src: [u8; 4], dst: [u8; 4], len: usize) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[12..16].copy_from_slice(&src);
        p[16..20].copy_from_slice(&dst);
        p
    }

    fn link(name: &str, third: u8, up: Impairment, down: Impairment) -> LinkConfig {
        LinkConfig {
            name: name.into(),
            network: Ipv4Addr::new(198, 18, third, 0),
            prefix_len: 24,
            up,
            down,
        }
    }

    #[test]
    fn delay_adds_up_along_the_path() {
        let d = |ms| Impairment {
            delay_ms: Some(ms),
            ..Impairment::default()
        };
        let cfg = EmuConfig {
            links: vec![
                link("1a", 10, d(20.0), d(1.0)),
                link("2a", 20, d(3.0), d(5.0)),
            ],
            pairs: vec![],
            seed: 1,
        };
        let mut e = Emulator::new(&cfg);
        let p = ipv4([198, 18, 10, 2], [198, 18, 20, 2], 100);
        // Uplink of 1a (20 ms) + downlink of 2a (5 ms).
        assert_eq!(
            e.handle_packet(1_000, &p),
            Verdict::Deliver(1_000 + 25_000_000)
        );
        let back = ipv4([198, 18, 20, 2], [198, 18, 10, 2], 100);
        assert_eq!(e.handle_packet(0, &back), Verdict::Deliver(4_000_000));
        // Unknown addresses pass untouched.
        let other = ipv4([198, 18, 99, 2], [198, 18, 98, 2], 100);
        assert_eq!(e.handle_packet(7, &other), Verdict::Deliver(7));
        // Garbage and IPv6 pass untouched and are counted.
        assert_eq!(e.handle_packet(9, &[0x60, 0, 0]), Verdict::Deliver(9));
        assert_eq!(e.stats().not_ipv4, 1);
    }

    #[test]
    fn a_reload_keeps_the_queue_and_the_order() {
        let rate = |mbit| Impairment {
            rate_mbit: Some(mbit),
            delay_ms: Some(2.0),
            ..Impairment::default()
        };
        let cfg = |mbit| EmuConfig {
            links: vec![link("1a", 10, rate(mbit), Impairment::default())],
            pairs: vec![],
            seed: 1,
        };
        let p = ipv4([198, 18, 10, 2], [198, 18, 20, 2], 1000);
        // 1000 B at 8 Mbit/s: 1 ms each; ten queued at t = 0, the last leaves at 10 ms + 2 ms.
        let mut e = Emulator::new(&cfg(8.0));
        for _ in 0..10 {
            e.handle_packet(0, &p);
        }
        // The rate doubles: the next packet still waits for the queue built at the old rate
        // (12.5 ms, not 0.5 + 2), and is not released before the last one of its pair.
        let mut e = e.reconfigured(&cfg(16.0));
        assert_eq!(e.handle_packet(0, &p), Verdict::Deliver(12_500_000));
        // Without a reload's carry-over (a fresh emulator), it would have overtaken them all.
        assert_eq!(
            Emulator::new(&cfg(16.0)).handle_packet(0, &p),
            Verdict::Deliver(2_500_000)
        );
        // A slower rate: the queue left by the old one still goes first (10.5 + 8 + 2 ms).
        let mut e = e.reconfigured(&cfg(1.0));
        assert_eq!(e.handle_packet(0, &p), Verdict::Deliver(20_500_000));
    }

    #[test]
    fn rate_limiter_spaces_packets_and_tail_drops() {
        let imp = Impairment {
            rate_mbit: Some(8.0),
            queue_kib: Some(3),
            ..Impairment::default()
        };
        let cfg = EmuConfig {
            links: vec![link("1a", 10, imp, Impairment::default())],
            pairs: vec![],
            seed: 1,
        };
        let mut e = Emulator::new(&cfg);
        let p = ipv4([198, 18, 10, 2], [198, 18, 20, 2], 1000);
        // 1000 B at 8 Mbit/s = 1 ms each.
        assert_eq!(e.handle_packet(0, &p), Verdict::Deliver(1_000_000));
        assert_eq!(e.handle_packet(0, &p), Verdict::Deliver(2_000_000));
        assert_eq!(e.handle_packet(0, &p), Verdict::Deliver(3_000_000));
        // Backlog 3000 B + 1000 > 3072 B limit.
        assert_eq!(e.handle_packet(0, &p), Verdict::Drop(DropReason::QueueFull));
        // Later the queue has drained.
        assert_eq!(
            e.handle_packet(10_000_000, &p),
            Verdict::Deliver(11_000_000)
        );
        assert_eq!(e.stats().queue_drops, 1);
    }

    /// A minimal driver on virtual time: feeds arrivals, follows `Next`, returns delivery times.
    fn simulate(e: &mut Emulator, arrivals: &[(u64, Vec<u8>)]) -> Vec<Option<u64>> {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut out = vec![None; arrivals.len()];
        let mut heap = BinaryHeap::new();
        for (i, (t, _)) in arrivals.iter().enumerate() {
            heap.push(Reverse((*t, i, 0u8, true)));
        }
        while let Some(Reverse((t, i, stage, fresh))) = heap.pop() {
            let pkt = &arrivals[i].1;
            let v = if fresh {
                e.handle_packet(t, pkt)
            } else {
                e.advance(t, pkt, stage)
            };
            match v {
                Verdict::Deliver(at) => out[i] = Some(at),
                Verdict::Next { at, stage } => heap.push(Reverse((at, i, stage, false))),
                Verdict::Drop(_) => {}
            }
        }
        out
    }

    #[test]
    fn shared_downlink_serves_packets_in_arrival_order() {
        let d = |ms| Impairment {
            delay_ms: Some(ms),
            ..Impairment::default()
        };
        let r = Impairment {
            rate_mbit: Some(8.0),
            ..Impairment::default()
        };
        let cfg = EmuConfig {
            links: vec![
                link("1a", 10, d(5.0), Impairment::default()),
                link("1b", 11, d(10.0), Impairment::default()),
                link("2a", 20, Impairment::default(), r),
            ],
            pairs: vec![],
            seed: 1,
        };
        let mut e = Emulator::new(&cfg);
        // The packet over the slow uplink is handled first but reaches the downlink later.
        let from_b = ipv4([198, 18, 11, 2], [198, 18, 20, 2], 1000);
        let from_a = ipv4([198, 18, 10, 2], [198, 18, 20, 2], 1000);
        let got = simulate(&mut e, &[(0, from_b), (1_000, from_a)]);
        // 1000 B at 8 Mbit/s take 1 ms on the downlink; no idle hole is left in front of it.
        assert_eq!(got, vec![Some(11_000_000), Some(6_001_000)]);
    }

    #[test]
    fn pair_bottleneck_applies_to_its_pair_only() {
        let cfg = EmuConfig {
            links: vec![],
            pairs: vec![PairConfig {
                src: Ipv4Addr::new(198, 18, 10, 2),
                dst: Ipv4Addr::new(198, 18, 20, 2),
                imp: Impairment {
                    delay_ms: Some(7.0),
                    ..Impairment::default()
                },
                shared_with: vec![],
            }],
            seed: 1,
        };
        let mut e = Emulator::new(&cfg);
        let p = ipv4([198, 18, 10, 2], [198, 18, 20, 2], 100);
        assert_eq!(e.handle_packet(0, &p), Verdict::Deliver(7_000_000));
        let q = ipv4([198, 18, 10, 2], [198, 18, 21, 2], 100);
        assert_eq!(e.handle_packet(0, &q), Verdict::Deliver(0));
    }

    /// A pair of 10 Mbit/s carrying 6 Mbit/s of background: 3 Mbit/s of real traffic pass
    /// untouched with little queueing; 7.3 Mbit/s of real traffic overload the stage and get
    /// exactly the 4 Mbit/s the background leaves, never more.
    #[test]
    fn background_takes_its_share_of_the_bottleneck() {
        let (src, dst) = ([198, 18, 10, 2], [198, 18, 20, 2]);
        let cfg = EmuConfig {
            links: vec![],
            pairs: vec![PairConfig {
                src: Ipv4Addr::from(src),
                dst: Ipv4Addr::from(dst),
                imp: Impairment {
                    rate_mbit: Some(10.0),
                    background_mbit: Some(6.0),
                    ..Impairment::default()
                },
                shared_with: vec![],
            }],
            seed: 1,
        };
        let pkt = ipv4(src, dst, 1500);
        let secs = 20u64;
        for (real_mbit, overloaded) in [(3.0, false), (7.3, true)] {
            let mut e = Emulator::new(&cfg);
            // Idle for a while first: the background stream must fast-forward, not replay.
            let start = 50 * NS_PER_S;
            let gap = (1500.0 * 8.0 * 1e9 / (real_mbit * 1e6)) as u64;
            let n = secs * NS_PER_S / gap;
            let mut delivered = 0u64;
            let mut last = 0u64;
            for i in 0..n {
                match e.handle_packet(start + i * gap, &pkt) {
                    Verdict::Deliver(at) => {
                        delivered += 1;
                        last = last.max(at);
                    }
                    Verdict::Drop(_) => {}
                    Verdict::Next { .. } => unreachable!("one stage only"),
                }
            }
            let stage = &e.pairs[&(u32::from_be_bytes(src), u32::from_be_bytes(dst))];
            // The background ran at its rate the whole time (within one packet).
            let expect_bg = secs * NS_PER_S / stage.bg_interval_ns;
            assert!(
                stage.bg_packets.abs_diff(expect_bg) <= 2,
                "{}",
                stage.bg_packets
            );
            let real_rate = delivered as f64 * 1500.0 * 8.0 / secs as f64 / 1e6;
            if overloaded {
                assert!(e.stats().queue_drops > 0);
                assert!((real_rate - 4.0).abs() < 0.1, "real {real_rate}");
            } else {
                assert_eq!(e.stats().queue_drops, 0);
                assert!((real_rate - 3.0).abs() < 0.05, "real {real_rate}");
                // Never more than a couple of packets of queueing in front of a real packet.
                assert!(last - (start + (n - 1) * gap) < 5 * 1_200_000);
            }
        }
    }

    /// Traffic of another address pair that shares a pair's stage queues behind it, and skips
    /// the links its addresses do not belong to.
    #[test]
    fn shared_pair_stage_serves_both_address_pairs() {
        let (src, dst) = ([198, 18, 10, 2], [198, 18, 30, 2]);
        let (bs, bd) = ([198, 18, 250, 11], [198, 18, 251, 11]);
        let cfg = EmuConfig {
            links: vec![link(
                "1a",
                10,
                Impairment {
                    delay_ms: Some(2.0),
                    ..Impairment::default()
                },
                Impairment::default(),
            )],
            pairs: vec![PairConfig {
                src: Ipv4Addr::from(src),
                dst: Ipv4Addr::from(dst),
                imp: Impairment {
                    rate_mbit: Some(12.0),
                    ..Impairment::default()
                },
                shared_with: vec![(Ipv4Addr::from(bs), Ipv4Addr::from(bd))],
            }],
            seed: 1,
        };
        let mut e = Emulator::new(&cfg);
        // 1500 B at 12 Mbit/s = 1 ms on the wire. A background packet at t=0 occupies the
        // stage until 1 ms (no uplink delay: 198.18.250.11 is on no link).
        assert_eq!(
            e.handle_packet(0, &ipv4(bs, bd, 1500)),
            Verdict::Deliver(1_000_000)
        );
        // A member packet crosses 1a's uplink (2 ms), then waits for nothing: the stage is free.
        let v = e.handle_packet(0, &ipv4(src, dst, 1500));
        assert_eq!(
            v,
            Verdict::Next {
                at: 2_000_000,
                stage: 1
            }
        );
        assert_eq!(
            e.advance(2_000_000, &ipv4(src, dst, 1500), 1),
            Verdict::Deliver(3_000_000)
        );
        // Two background packets back to back at 3 ms: the second one queues behind the first.
        assert_eq!(
            e.handle_packet(3_000_000, &ipv4(bs, bd, 1500)),
            Verdict::Deliver(4_000_000)
        );
        assert_eq!(
            e.handle_packet(3_000_000, &ipv4(bs, bd, 1500)),
            Verdict::Deliver(5_000_000)
        );
        // Reverse background traffic is not on this (one-way) stage.
        assert_eq!(
            e.handle_packet(3_000_000, &ipv4(bd, bs, 1500)),
            Verdict::Deliver(3_000_000)
        );
    }

    #[test]
    fn random_loss_rate_is_close_to_configured() {
        let imp = Impairment {
            loss_pct: Some(1.0),
            ..Impairment::default()
        };
        let cfg = EmuConfig {
            links: vec![link("1a", 10, imp, Impairment::default())],
            pairs: vec![],
            seed: 42,
        };
        let mut e = Emulator::new(&cfg);
        let p = ipv4([198, 18, 10, 2], [198, 18, 20, 2], 100);
        let n = 100_000;
        let lost = (0..n)
            .filter(|_| matches!(e.handle_packet(0, &p), Verdict::Drop(_)))
            .count();
        let pct = lost as f64 * 100.0 / n as f64;
        assert!((0.9..1.1).contains(&pct), "{pct}");
    }

    #[test]
    fn burst_loss_has_configured_rate_and_bursts() {
        let imp = Impairment {
            burst_loss_pct: Some(2.0),
            burst_len_pkts: Some(4.0),
            ..Impairment::default()
        };
        let cfg = EmuConfig {
            links: vec![link("1a", 10, imp, Impairment::default())],
            pairs: vec![],
            seed: 7,
        };
        let mut e = Emulator::new(&cfg);
        let p = ipv4([198, 18, 10, 2], [198, 18, 20, 2], 100);
        let n = 400_000;
        let drops: Vec<bool> = (0..n)
            .map(|_| matches!(e.handle_packet(0, &p), Verdict::Drop(_)))
            .collect();
        let lost = drops.iter().filter(|d| **d).count();
        let bursts = drops.windows(2).filter(|w| !w[0] && w[1]).count();
        let pct = lost as f64 * 100.0 / n as f64;
        let mean_burst = lost as f64 / bursts as f64;
        assert!((1.8..2.2).contains(&pct), "{pct}");
        assert!((3.5..4.5).contains(&mean_burst), "{mean_burst}");
    }

    #[test]
    fn jitter_without_reorder_keeps_order() {
        let imp = Impairment {
            delay_ms: Some(10.0),
            jitter_ms: Some(5.0),
            ..Impairment::default()
        };
        let cfg = EmuConfig {
            links: vec![link("1a", 10, imp.clone(), Impairment::default())],
            pairs: vec![],
            seed: 3,
        };
        let mut e = Emulator::new(&cfg);
        let p = ipv4([198, 18, 10, 2], [198, 18, 20, 2], 100);
        let mut last = 0;
        let mut spread = (u64::MAX, 0);
        for i in 0..1000u64 {
            let now = i * 100_000;
            let Verdict::Deliver(t) = e.handle_packet(now, &p) else {
                panic!()
            };
            assert!(t >= last, "reordered");
            last = t;
            spread = (spread.0.min(t - now), spread.1.max(t - now));
        }
        assert!(
            spread.0 >= 10_000_000 && spread.1 <= 15_100_000,
            "{spread:?}"
        );

        // With reordering allowed, some packet leaves before its predecessor.
        let cfg = EmuConfig {
            links: vec![link(
                "1a",
                10,
                Impairment {
                    reorder: Some(true),
                    ..imp
                },
                Impairment::default(),
            )],
            pairs: vec![],
            seed: 3,
        };
        let mut e = Emulator::new(&cfg);
        let times: Vec<u64> = (0..1000u64)
            .map(|i| match e.handle_packet(i * 100_000, &p) {
                Verdict::Deliver(t) => t,
                other => unreachable!("{other:?}"),
            })
            .collect();
        assert!(times.windows(2).any(|w| w[1] < w[0]));
    }
}
