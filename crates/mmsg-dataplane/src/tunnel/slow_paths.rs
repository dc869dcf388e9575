//! The slow-subflow policy's driver ([`mpa::slow_subflows`], docs/mmsg.md "Slow subflows"):
//! once per subflow round of an outbound connection, it feeds every subflow's
//! `tcpi_bytes_acked` and smoothed RTT to the policy, and marks the subflows it names backup or
//! active again with `MPTCP_PM_CMD_SET_FLAGS`.

use std::net::SocketAddrV4;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpa::slow_subflows::{RoundSample, SlowSubflows};
use tracing::{debug, info, warn};

use super::{PathManagement, Shared};
use crate::genl::SubflowDestroy;
use crate::stats::Stats;
use crate::sys;

/// The policy of one connection establishment.
#[derive(Debug)]
pub(super) struct SlowPaths {
    policy: SlowSubflows<(SocketAddrV4, SocketAddrV4)>,
}

impl SlowPaths {
    /// `None` when the policy is off (share ≤ 0) or subflows are not ours to mark (in-kernel PM).
    pub(super) fn new(sh: &Shared) -> Option<Self> {
        let share = sh.opts.slow_subflow_share;
        (share > 0.0 && matches!(sh.pm, PathManagement::Userspace(_))).then(|| SlowPaths {
            policy: SlowSubflows::new(share),
        })
    }

    /// One round: `present` and `infos` are the connection's subflow addresses and `tcp_info`
    /// read just now (in the kernel's order; a round where they differ in length is skipped).
    pub(super) async fn round(
        &mut self,
        sh: &Shared,
        name: &str,
        token: u32,
        present: &[(SocketAddrV4, SocketAddrV4)],
        infos: &[sys::SubflowTcpInfo],
    ) {
        let now = Instant::now();
        if token == 0 || present.len() != infos.len() {
            return;
        }
        let samples: Vec<RoundSample<_>> = present
            .iter()
            .zip(infos)
            .map(|(&key, t)| RoundSample {
                key,
                established: t.state == sys::TCP_ESTABLISHED,
                bytes_acked: t.bytes_acked,
                srtt: Duration::from_micros(u64::from(t.rtt_us)),
            })
            .collect();
        let PathManagement::Userspace(pm) = &sh.pm else {
            return;
        };
        for m in self.policy.round(now, &samples) {
            let (local, remote) = m.key;
            let req = SubflowDestroy {
                token,
                local,
                remote,
            };
            let pm = Arc::clone(pm);
            let backup = m.backup;
            match tokio::task::spawn_blocking(move || pm.set_backup(&req, backup)).await {
                Ok(Ok(())) if backup => {
                    Stats::inc(&sh.stats.subflows_demoted);
                    info!(
                        conn = name, %local, %remote,
                        "subflow marked backup: it carried less than {:.2} % of its connection's \
                         rate at over twice (and 10 ms above) the fastest subflow's RTT \
                         (head-of-line cost above its gain)",
                        sh.opts.slow_subflow_share * 100.0
                    );
                }
                Ok(Ok(())) => {
                    Stats::inc(&sh.stats.subflows_probed);
                    debug!(conn = name, %local, %remote, "backup subflow active again (probe)");
                }
                Ok(Err(e)) => {
                    Stats::inc(&sh.stats.subflow_flags_err);
                    warn!(conn = name, %local, %remote, backup, error = %e, "subflow flags refused");
                }
                Err(e) => warn!(error = %e, "subflow flags task failed"),
            }
        }
    }
}
