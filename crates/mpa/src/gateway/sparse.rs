//! The sparse lane: Type II flows that send less than a small rate ride the path group's Type I
//! connection, so a call or an SSH session of the bulk's class never waits behind the bulk's
//! queue in its socket and, on a shaped uplink (`[qos]`), in the egress qdisc (band 0: the Type I
//! socket's DSCP 46).
//!
//! The per-flow queue ([`crate::queue::FairQueue`]) already sends a sparse flow's packet first,
//! but only first of what is *not yet written*: behind it every byte the connection handed to its
//! socket and every byte queued at the bottleneck still goes out before it. fq_codel's sparse-flow
//! rule gives such a flow the head of the one queue it owns; the lane gives it the head of the
//! next queue too, with the same bound: it holds only while the flow stays below its rate.
//!
//! Rules (per flow, in buckets of the keyed flow hash, like the fair queue's):
//! - a flow starts in the lane with a full token bucket (`rate` per second, a burst of a quarter
//!   second of it, at least three full-size packets);
//! - each packet takes its length (at least [`MIN_PACKET_CHARGE`]) from the flow's bucket and
//!   from the lane's shared bucket
//!   (`total` per second, the same quarter second of burst): when either lacks it, the flow leaves
//!   the lane (this packet goes to the class's own connection) until it has been silent for
//!   [`IDLE_RESET`];
//! - nothing comes back into the lane while the flow is busy, so it never reorders: leaving, its
//!   later packets queue behind the earlier ones' lane; coming back after a second of silence,
//!   its earlier packets have long left the bulk's queue (CoDel drops what waits longer).
//!
//! Memory is fixed ([`BUCKETS`] entries); two flows in one bucket share its tokens (a sparse flow
//! beside a bulk one loses the lane, as in fq_codel's collisions).

use std::time::{Duration, Instant};

use crate::queue::FlowHash;

/// Flow buckets (a power of two: the hash's low bits pick one).
pub const BUCKETS: usize = 1024;
/// A flow out of the lane comes back after this much silence.
pub const IDLE_RESET: Duration = Duration::from_secs(1);
/// The burst of each token bucket, as time at its rate.
pub const BURST_TIME: Duration = Duration::from_millis(250);
/// The smallest burst, bytes: three full-size Ethernet packets.
pub const MIN_BURST_BYTES: u64 = 3 * 1_514;
/// Each packet costs at least this many bytes of tokens, so the rate also caps packets per
/// second (125/s at 256 kbit/s): a voice call (50/s), a ping or a request/response stays in
/// the lane, the ACK flow of a download (hundreds of 52-byte packets a second) does not. On
/// unequal uplinks such a flow on the Type I connection sent some ACKs over the slow paths,
/// and MPTCP's in-order delivery held every later frame of the connection behind them: same-class
/// and Type I ping p99 166–180 ms against 94–141 without the lane (20 + 5 Mbit/s uplinks).
pub const MIN_PACKET_CHARGE: u64 = 256;

/// The lane's rates (`[qos] sparse_lane_kbit`, `sparse_lane_total_kbit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SparseLaneConfig {
    /// Per flow, bytes per second.
    pub flow_bytes_per_s: u64,
    /// All flows of the lane together, bytes per second.
    pub total_bytes_per_s: u64,
}

impl SparseLaneConfig {
    /// From kbit/s; `None` when either is 0 (the lane is off).
    pub fn from_kbit(flow_kbit: u32, total_kbit: u32) -> Option<Self> {
        (flow_kbit > 0 && total_kbit > 0).then(|| SparseLaneConfig {
            flow_bytes_per_s: u64::from(flow_kbit) * 1000 / 8,
            total_bytes_per_s: u64::from(total_kbit) * 1000 / 8,
        })
    }
}

/// A token bucket in bytes.
#[derive(Debug, Clone, Copy, Default)]
struct Tokens {
    bytes: u64,
    at: Option<Instant>,
}

impl Tokens {
    /// Refills at `rate` bytes/s up to `burst`; a bucket never used, or unused for
    /// [`IDLE_RESET`], is full.
    fn refill(&mut self, now: Instant, rate: u64, burst: u64) {
        self.bytes = match self.at {
            Some(t) if now.saturating_duration_since(t) < IDLE_RESET => {
                let dt = now.saturating_duration_since(t);
                let earned = u128::from(rate) * dt.as_nanos() / 1_000_000_000;
                burst.min(
                    self.bytes
                        .saturating_add(u64::try_from(earned).unwrap_or(u64::MAX)),
                )
            }
            _ => burst,
        };
        self.at = Some(now);
    }
}

/// One flow bucket.
#[derive(Debug, Clone, Copy, Default)]
struct Flow {
    tokens: Tokens,
    /// Out of the lane until [`IDLE_RESET`] of silence.
    out: bool,
    /// The bucket's last packet.
    last: Option<Instant>,
}

/// The lane's state: one token bucket per flow bucket and one for the lane.
#[derive(Debug, Clone)]
pub struct SparseLane {
    config: SparseLaneConfig,
    flows: Box<[Flow]>,
    total: Tokens,
}

fn burst(rate: u64) -> u64 {
    let b = u128::from(rate) * BURST_TIME.as_nanos() / 1_000_000_000;
    u64::try_from(b).unwrap_or(u64::MAX).max(MIN_BURST_BYTES)
}

impl SparseLane {
    /// An empty lane: every flow starts in it.
    pub fn new(config: SparseLaneConfig) -> Self {
        SparseLane {
            config,
            flows: vec![Flow::default(); BUCKETS].into_boxed_slice(),
            total: Tokens::default(),
        }
    }

    /// The rates.
    pub fn config(&self) -> SparseLaneConfig {
        self.config
    }

    /// New rates; the flows' states are kept.
    pub fn set_config(&mut self, config: SparseLaneConfig) {
        self.config = config;
    }

    /// Whether a packet of `len` bytes of `flow`, arriving at `now`, takes the lane. Call once
    /// per packet of a flow that may take it (Type II, not striped).
    pub fn admit(&mut self, now: Instant, flow: FlowHash, len: usize) -> bool {
        let len = (len as u64).max(MIN_PACKET_CHARGE);
        let c = self.config;
        let Some(f) = self.flows.get_mut(flow.0 as usize % BUCKETS) else {
            return false;
        };
        let silent = f
            .last
            .is_none_or(|t| now.saturating_duration_since(t) >= IDLE_RESET);
        f.last = Some(now);
        if silent {
            f.out = false;
        }
        if f.out {
            return false;
        }
        f.tokens
            .refill(now, c.flow_bytes_per_s, burst(c.flow_bytes_per_s));
        self.total
            .refill(now, c.total_bytes_per_s, burst(c.total_bytes_per_s));
        if f.tokens.bytes >= len && self.total.bytes >= len {
            f.tokens.bytes -= len;
            self.total.bytes -= len;
            true
        } else {
            f.out = true;
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn lane(flow_kbit: u32, total_kbit: u32) -> SparseLane {
        SparseLane::new(SparseLaneConfig::from_kbit(flow_kbit, total_kbit).unwrap())
    }

    #[test]
    fn off_when_either_rate_is_zero() {
        assert_eq!(SparseLaneConfig::from_kbit(0, 2048), None);
        assert_eq!(SparseLaneConfig::from_kbit(256, 0), None);
        let c = SparseLaneConfig::from_kbit(256, 2048).unwrap();
        assert_eq!((c.flow_bytes_per_s, c.total_bytes_per_s), (32_000, 256_000));
    }

    #[test]
    fn a_voice_flow_stays_in_the_lane() {
        // 200 B every 20 ms (10 kB/s) for 60 s against 32 kB/s per flow.
        let mut l = lane(256, 2048);
        let t0 = Instant::now();
        for i in 0..3000u32 {
            assert!(l.admit(t0 + 20 * MS * i, FlowHash(7), 200), "packet {i}");
        }
    }

    #[test]
    fn a_bulk_flow_leaves_after_its_burst_and_stays_out_while_busy() {
        let mut l = lane(256, 100_000);
        let t0 = Instant::now();
        // 1,500 B every 1 ms (1.5 MB/s): the burst (8 kB) lets 5 packets through.
        let admitted: Vec<bool> = (0..1000u32)
            .map(|i| l.admit(t0 + MS * i, FlowHash(3), 1_500))
            .collect();
        assert_eq!(admitted.iter().filter(|a| **a).count(), 5);
        assert!(admitted[..5].iter().all(|a| *a) && !admitted[5]);
        // Slowing down to a trickle does not bring it back while it keeps sending …
        let t1 = t0 + MS * 1000;
        for i in 0..20u32 {
            assert!(!l.admit(t1 + 500 * MS * i, FlowHash(3), 100));
        }
        // … a second of silence does.
        assert!(l.admit(t1 + 500 * MS * 19 + IDLE_RESET, FlowHash(3), 1_500));
    }

    #[test]
    fn the_lane_total_bounds_many_sparse_flows() {
        // 100 flows of 10 kB/s (1 MB/s in all) against a lane of 64 kB/s: most leave it, and
        // the lane carries about its total.
        let mut l = lane(256, 512);
        let t0 = Instant::now();
        let mut carried = 0u64;
        for tick in 0..500u32 {
            for f in 0..100u32 {
                if l.admit(t0 + 20 * MS * tick, FlowHash(f), 200) {
                    carried += 200;
                }
            }
        }
        // 10 s at 64 kB/s plus one burst (16 kB).
        assert!(carried <= 640_000 + 16_000, "{carried}");
        assert!(carried >= 500_000, "{carried}");
    }

    #[test]
    fn an_ack_flow_leaves_the_lane() {
        // 52-byte ACKs at 500/s (26 kB/s of bytes, below the 32 kB/s): charged 256 B each.
        let mut l = lane(256, 2048);
        let t0 = Instant::now();
        let admitted = (0..1000u32)
            .filter(|i| l.admit(t0 + 2 * MS * *i, FlowHash(9), 52))
            .count();
        assert!(admitted < 60, "{admitted}");
        // A ping every 50 ms stays.
        for i in 0..100u32 {
            assert!(l.admit(t0 + 50 * MS * i, FlowHash(10), 84));
        }
    }

    #[test]
    fn a_super_packet_never_takes_the_lane() {
        let mut l = lane(256, 2048);
        assert!(!l.admit(Instant::now(), FlowHash(1), 65_000));
    }

    #[test]
    fn other_flows_keep_the_lane_beside_a_bulk_one() {
        let mut l = lane(256, 2048);
        let t0 = Instant::now();
        for i in 0..1000u32 {
            l.admit(t0 + MS * i, FlowHash(1), 1_500);
            if i % 20 == 0 {
                assert!(l.admit(t0 + MS * i, FlowHash(2), 200), "{i}");
            }
        }
    }
}
