//! The driver of a connection's [`Pacer`] (`mmsg run --pacing`, [`mpa::queue::pacing`]): the
//! subflow sampler calls [`PacerDriver::tick`] every loop; it reads the subflows' `tcp_info` every
//! [`pacing::SAMPLE_PERIOD`] while the connection is busy ([`pacing::IDLE_SAMPLE_PERIOD`] when it
//! is not), feeds the pacer and hands the rate to the writer (`OutQueue::pacing_rate`), which
//! keeps to it with its [`mpa::queue::pacing::TokenBucket`]. `MMSG_LOG=mmsg_pacer=debug` logs
//! every sample (phase, `BtlBw`, the rate sample, the pacing rate, the paths' queue). A
//! subflow's minimum RTT is the send time budget's where there is one (the kernel's, or a probe's
//! where the path got longer: `mpa::queue::min_rtt`).

use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mpa::queue::inflight::{DeliverySample, InflightBudget};
use mpa::queue::pacing::{self, Pacer, PacerConfig};

use super::conn_io::subflow_queue;
use super::shared::{Backlog, SubflowKey};
use super::OutQueue;
use crate::status::PacingStatus;
use crate::sys;

/// A connection's pacer and when to sample it next.
#[derive(Debug)]
pub(super) struct PacerDriver {
    pacer: Pacer<SubflowKey>,
    next: Instant,
    busy: bool,
    backlog: Backlog,
}

impl PacerDriver {
    /// A pacer in `Startup` (a new establishment: the writer is not paced until it measured).
    pub(super) fn new(oq: &OutQueue, config: PacerConfig) -> Self {
        oq.pacing_rate.store(0, Ordering::Relaxed);
        let now = Instant::now();
        PacerDriver {
            pacer: Pacer::new(now, config),
            next: now,
            busy: false,
            backlog: Backlog::default(),
        }
    }

    /// Samples when due; returns how long until the next sample. `budget`: the connection's
    /// send time budget, whose minimum RTTs the pacer takes.
    pub(super) fn tick(
        &mut self,
        fd: &OwnedFd,
        oq: &OutQueue,
        budget: Option<&InflightBudget<SubflowKey>>,
    ) -> Duration {
        let now = Instant::now();
        if now >= self.next {
            self.sample(fd, oq, now, budget);
            let period = if self.busy {
                pacing::SAMPLE_PERIOD
            } else {
                pacing::IDLE_SAMPLE_PERIOD
            };
            self.next = now + period;
        }
        self.next.saturating_duration_since(now)
    }

    /// The pacer for `mmsg status` and the metrics.
    pub(super) fn status(&self) -> PacingStatus {
        let p = &self.pacer;
        let us = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        PacingStatus {
            phase: p.phase().name().to_owned(),
            gain_percent: (p.phase().gain() * 100.0).round() as u32,
            rate_bytes_per_second: p.pacing_rate(),
            bottleneck_bytes_per_second: p.bottleneck_rate(),
            round_us: us(p.round()),
            queue_delay_us: us(p.queue_delay()),
        }
    }

    fn sample(
        &mut self,
        fd: &OwnedFd,
        oq: &OutQueue,
        now: Instant,
        budget: Option<&InflightBudget<SubflowKey>>,
    ) {
        let (Ok(present), Ok(infos)) =
            (sys::mptcp_subflow_addrs(fd), sys::mptcp_subflow_tcpinfo(fd))
        else {
            // Fallen back to TCP (no MPTCP_TCPINFO): not paced.
            oq.pacing_rate.store(0, Ordering::Relaxed);
            return;
        };
        if present.len() != infos.len() {
            // A subflow came or went between the two calls: the next sample.
            return;
        }
        let backlogged = self.backlog.since_last(oq);
        let mut in_flight = 0;
        self.pacer.handle_sample(
            now,
            backlogged,
            present.iter().zip(&infos).map(|(k, t)| {
                let held = subflow_queue(t).bytes();
                in_flight += held;
                (
                    *k,
                    DeliverySample {
                        established: t.state == sys::TCP_ESTABLISHED,
                        bytes_acked: t.bytes_acked,
                        min_rtt_us: budget.and_then(|b| b.min_rtt(k)).map_or(t.min_rtt_us, |d| {
                            u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
                        }),
                        queued: held,
                        srtt_us: t.rtt_us,
                    },
                )
            }),
        );
        self.busy = backlogged || in_flight > 0;
        tracing::debug!(
            target: "mmsg_pacer",
            phase = ?self.pacer.phase(),
            btl_bw = self.pacer.bottleneck_rate(),
            sample = self.pacer.last_rate_sample(),
            pacing_rate = self.pacer.pacing_rate(),
            queue_us = u64::try_from(self.pacer.queue_delay().as_micros()).unwrap_or(u64::MAX),
            backlogged,
            in_flight,
            "pacer sample"
        );
        oq.pacing_rate
            .store(self.pacer.pacing_rate(), Ordering::Relaxed);
    }
}
