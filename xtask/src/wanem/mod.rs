//! The testbed's WAN emulator (`cargo xtask wanem`, started by `testbed up` inside the `inet`
//! namespace). This kernel has no netem, so delay, jitter, loss and rate are ours.
//!
//! How packets reach it: `inet` routes the traffic of impaired links and pairs (policy routing
//! rules `from <link subnet>` / `to <link subnet>` / `from A to B`, table 200) into the TUN device
//! `emu0`. The kernel segments GSO super-packets before a TUN without offloads, so the emulator
//! sees wire-size packets and per-packet loss is exact. It decides each packet's fate with the
//! pure [`core::Emulator`], holds it in a time-ordered queue and writes it back into `emu0` at its
//! release time; `inet` then routes it normally (`iif emu0` skips the diversion rules). Links
//! with no impairment are never diverted: the kernel path carries them at full speed.
//!
//! Configuration is a JSON [`core::EmuConfig`]; SIGHUP reloads it (links and pairs that stay keep
//! their queue, and no packet overtakes an earlier one of its address pair:
//! [`core::Emulator::reconfigured`]), SIGTERM exits.

pub mod core;
mod sys;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{ErrorKind, Read, Write};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;

use self::core::{EmuConfig, Emulator, Verdict};

/// Largest packet we read (the TUN MTU is at most 65535).
const MAX_PACKET: usize = 65_536;
/// Most packets read per wake-up before releasing due ones (bounds latency of releases).
const READ_BATCH: usize = 64;
/// Most bytes held in the delay queue; beyond it packets are dropped (counted). 128 MiB holds
/// 1 s of 1 Gbit/s, far more than any configured delay × rate here.
const MAX_HELD_BYTES: usize = 128 << 20;
/// Free buffers kept for reuse (each at most one MTU-size packet usually): 4096 × ~1.5 KiB ≈ 6 MiB.
const POOL_SIZE: usize = 4096;

/// How often the counters file is rewritten (and so the longest a poll may sleep).
const STATS_EVERY: Duration = Duration::from_secs(1);

/// Counters of the driver on top of the core's.
#[derive(Debug, Default, serde::Serialize)]
struct DriverStats {
    delivered: u64,
    overflow_drops: u64,
    write_errors: u64,
}

/// Loads a config file.
pub fn load_config(path: &Path) -> anyhow::Result<EmuConfig> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parse {}", path.display()))
}

/// Runs the emulator on TUN `tun` until SIGTERM. Writes counters to `stats_path` on exit and on
/// every reload.
pub fn run(tun: &str, config_path: &Path, stats_path: &Path) -> anyhow::Result<()> {
    sys::install_signals().context("install signal handlers")?;
    let mut dev = sys::open_tun(tun).with_context(|| format!("attach to TUN {tun}"))?;
    let mut emu = Emulator::new(&load_config(config_path)?);
    let start = Instant::now();
    let now_ns = || u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let mut held = Held {
        pool: Vec::with_capacity(POOL_SIZE),
        ..Held::default()
    };
    let mut buf = vec![0u8; MAX_PACKET];
    let mut dstats = DriverStats::default();
    let write_stats = |emu: &Emulator, d: &DriverStats| {
        let json = serde_json::json!({ "core": emu.stats(), "driver": d });
        let _ = std::fs::write(stats_path, json.to_string());
    };
    let mut stats_written = Instant::now();
    loop {
        if stats_written.elapsed() >= STATS_EVERY {
            write_stats(&emu, &dstats);
            stats_written = Instant::now();
        }
        if sys::STOP.load(Ordering::SeqCst) {
            write_stats(&emu, &dstats);
            return Ok(());
        }
        if sys::RELOAD.swap(false, Ordering::SeqCst) {
            match load_config(config_path) {
                Ok(cfg) => emu = emu.reconfigured(&cfg),
                Err(e) => eprintln!("wanem: keeping the old config: {e:#}"),
            }
            write_stats(&emu, &dstats);
        }
        // Release (or move to their next stage) everything that is due.
        let now = now_ns();
        while let Some(Reverse((at, _, _))) = held.heap.peek() {
            if *at > now {
                break;
            }
            let Some(Reverse((at, _, pkt))) = held.heap.pop() else {
                break;
            };
            held.bytes -= pkt.data.len();
            let verdict = match pkt.next_stage {
                None => Verdict::Deliver(at),
                Some(stage) => emu.advance(at, &pkt.data, stage),
            };
            match step(
                verdict,
                at,
                held.heap.is_empty() || pkt.next_stage.is_none(),
            ) {
                Step::Drop => held.recycle(pkt.data),
                Step::Now => {
                    deliver(&mut dev, &pkt.data, &mut dstats);
                    held.recycle(pkt.data);
                }
                Step::Later(at, stage) => held.push(at, stage, pkt.data, &mut dstats),
            }
        }
        let timeout = held
            .heap
            .peek()
            .map(|Reverse((at, _, _))| Duration::from_nanos(at.saturating_sub(now_ns())))
            .unwrap_or(STATS_EVERY)
            .min(STATS_EVERY);
        if !sys::wait_readable(&dev, Some(timeout)).context("poll TUN")? {
            continue;
        }
        for _ in 0..READ_BATCH {
            let n = match dev.read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => break,
                Err(e) => return Err(e).context("read TUN"),
            };
            let Some(pkt) = buf.get(..n) else { break };
            let now = now_ns();
            match step(emu.handle_packet(now, pkt), now, held.heap.is_empty()) {
                Step::Drop => {}
                Step::Now => deliver(&mut dev, pkt, &mut dstats),
                Step::Later(at, stage) => {
                    let data = held.buffer(pkt);
                    held.push(at, stage, data, &mut dstats);
                }
            }
        }
    }
}

/// What to do with a packet now.
enum Step {
    Drop,
    /// Write it back into the network at once.
    Now,
    /// Hold it until the time; then deliver it (`None`) or continue at that stage.
    Later(u64, Option<u8>),
}

/// Turns a verdict into a step. A packet due now goes out at once only when nothing is held
/// (`idle`), so it cannot overtake an earlier packet still in the heap.
fn step(verdict: Verdict, now: u64, idle: bool) -> Step {
    match verdict {
        Verdict::Drop(_) => Step::Drop,
        Verdict::Deliver(at) if at <= now && idle => Step::Now,
        Verdict::Deliver(at) => Step::Later(at, None),
        Verdict::Next { at, stage } => Step::Later(at, Some(stage)),
    }
}

/// Packets held for later, in release order, with their memory bound and buffer pool.
#[derive(Debug, Default)]
struct Held {
    /// Min-heap of (release time, sequence) → packet; the sequence keeps equal times in order.
    heap: BinaryHeap<Reverse<(u64, u64, Packet)>>,
    bytes: usize,
    seq: u64,
    pool: Vec<Vec<u8>>,
}

impl Held {
    /// A pooled buffer holding a copy of `pkt`.
    fn buffer(&mut self, pkt: &[u8]) -> Vec<u8> {
        let mut v = self.pool.pop().unwrap_or_default();
        v.clear();
        v.extend_from_slice(pkt);
        v
    }

    /// Returns a buffer to the pool.
    fn recycle(&mut self, data: Vec<u8>) {
        if self.pool.len() < POOL_SIZE {
            self.pool.push(data);
        }
    }

    /// Holds `data` until `at`; drops it (counted) beyond [`MAX_HELD_BYTES`].
    fn push(&mut self, at: u64, next_stage: Option<u8>, data: Vec<u8>, dstats: &mut DriverStats) {
        if self.bytes + data.len() > MAX_HELD_BYTES {
            dstats.overflow_drops += 1;
            self.recycle(data);
            return;
        }
        self.bytes += data.len();
        self.seq += 1;
        self.heap
            .push(Reverse((at, self.seq, Packet { data, next_stage })));
    }
}

/// Writes one packet back into the network. A TUN write takes the whole packet or fails.
fn deliver(dev: &mut std::fs::File, pkt: &[u8], dstats: &mut DriverStats) {
    #[allow(clippy::unused_io_amount)]
    match dev.write(pkt) {
        Ok(_) => dstats.delivered += 1,
        Err(_) => dstats.write_errors += 1,
    }
}

/// A held packet; ordered by nothing (the heap orders by time and sequence first).
#[derive(Debug)]
struct Packet {
    data: Vec<u8>,
    /// `None`: deliver at release; `Some(s)`: continue at stage `s`.
    next_stage: Option<u8>,
}

impl PartialEq for Packet {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for Packet {}
impl PartialOrd for Packet {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Packet {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}
