//! SDC: statistics data collection (seed 000 §IV, "Statistics Data Collection").
//!
//! A pure core fed by the OFC's switch tasks: every `stats_interval` each connected switch
//! reports its flows of ours (multipart FLOW, selected by cookie tag) and its ports (multipart
//! PORT_STATS); [`Sdc::record`] keeps the counters and the rates since the previous sample (time
//! is a parameter). [`Sdc::view`] aggregates by the cookies' path codes `0xBASG`:
//!
//! - per branch (switch): connection state, reconcile time, every flow's counters, every port's;
//! - per member path, path group and ordered branch pair: **forward** = the forward source entries
//!   at A (what A's MPA sent into the member path), **reverse** = the reverse source entries at B
//!   (what B sent back on the same subflows). Source entries count each packet once, whichever
//!   transit it crosses.
//!
//! Served by `GET /api/v1/stats` and `ssc stats`; later it feeds `path_config::Measurements`.
use std::collections::BTreeMap;
use std::time::Instant;

use ofproto::multipart::{FlowStats, PortStats};
use serde::{Deserialize, Serialize};

use crate::inventory::BranchId;
use crate::path_group::PathCode;
use crate::swap::{Cookie, CookieInfo, Direction, HopRole};

#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Counter {
    packets: u64,
    bytes: u64,
    pps: f64,
    bps: f64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct PortCounter {
    rx: Counter,
    tx: Counter,
    rx_dropped: u64,
    tx_dropped: u64,
}

#[derive(Clone, Debug)]
struct Sample {
    at: Instant,
    flows: BTreeMap<u64, Counter>,
    ports: BTreeMap<u32, PortCounter>,
}

#[derive(Clone, Debug)]
struct SwitchState {
    conn: u64,
    connected: bool,
    datapath_id: u64,
    peer: String,
    authenticated: bool,
    flows_compiled: usize,
    reconciles: u64,
    last_reconcile_ms: Option<f64>,
    sample: Option<Sample>,
}

/// The collected statistics of every switch seen.
#[derive(Debug, Default)]
pub struct Sdc {
    switches: BTreeMap<BranchId, SwitchState>,
    last_push: Option<PushReport>,
    /// Samples of unauthenticated switches (clear TCP): kept for their branch's view, never
    /// aggregated into members, groups and pairs (what WRR, capacity and adaptive read).
    unauthenticated_samples: u64,
    guard: Option<std::sync::Arc<crate::preauth::Guard>>,
}

/// The last change the OFC pushed to the switches.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PushReport {
    /// Connected switches whose table changed.
    pub switches: usize,
    /// Steps (each closed by a barrier on every switch in it).
    pub steps: usize,
    /// FLOW_MODs sent.
    pub flow_mods: usize,
    /// Member paths not installed because a switch failed or was not connected.
    pub failed_members: usize,
    /// Diff, FLOW_MODs and every barrier reply, ms.
    pub ms: f64,
}

fn rate(new: u64, old: u64, secs: f64) -> f64 {
    if secs > 0.0 && new >= old {
        // Counter deltas fit f64 exactly well enough for rates.
        (new - old) as f64 / secs
    } else {
        0.0
    }
}

fn advance(old: Option<&Counter>, packets: u64, bytes: u64, secs: f64) -> Counter {
    let (pps, bps) = match old {
        Some(o) => (
            rate(packets, o.packets, secs),
            rate(bytes, o.bytes, secs) * 8.0,
        ),
        None => (0.0, 0.0),
    };
    Counter {
        packets,
        bytes,
        pps,
        bps,
    }
}

impl Sdc {
    /// The OFC's pre-auth guard, whose counters [`Self::view`] serves.
    pub fn set_openflow_guard(&mut self, guard: std::sync::Arc<crate::preauth::Guard>) {
        self.guard = Some(guard);
    }

    /// A switch connected (or reconnected on a new connection `conn`); `authenticated`: over
    /// TLS with its branch's certificate or over a unix socket (not the clear TCP listener).
    pub fn connected(
        &mut self,
        branch: BranchId,
        conn: u64,
        datapath_id: u64,
        peer: String,
        authenticated: bool,
    ) {
        let s = self.switches.entry(branch).or_insert(SwitchState {
            conn,
            connected: true,
            datapath_id,
            authenticated,
            peer: peer.clone(),
            flows_compiled: 0,
            reconciles: 0,
            last_reconcile_ms: None,
            sample: None,
        });
        s.conn = conn;
        s.connected = true;
        s.datapath_id = datapath_id;
        s.authenticated = authenticated;
        s.peer = peer;
        // Counters restart with a new switch process: no rate across the gap.
        s.sample = None;
    }

    /// Connection `conn` of `branch` ended.
    pub fn disconnected(&mut self, branch: BranchId, conn: u64) {
        if let Some(s) = self.switches.get_mut(&branch) {
            if s.conn == conn {
                s.connected = false;
            }
        }
    }

    /// A full reconcile of `branch` finished in `ms`, leaving `flows` flows of ours.
    pub fn reconciled(&mut self, branch: BranchId, conn: u64, flows: usize, ms: f64) {
        if let Some(s) = self.switches.get_mut(&branch) {
            if s.conn == conn {
                s.reconciles += 1;
                s.last_reconcile_ms = Some(ms);
                s.flows_compiled = flows;
            }
        }
    }

    /// The OFC pushed a change.
    pub fn pushed(&mut self, report: PushReport) {
        self.last_push = Some(report);
    }

    /// An update left `flows` flows of ours on `branch`.
    pub fn set_flows(&mut self, branch: BranchId, flows: usize) {
        if let Some(s) = self.switches.get_mut(&branch) {
            s.flows_compiled = flows;
        }
    }

    /// One statistics sample of `branch` taken at `now`.
    pub fn record(
        &mut self,
        branch: BranchId,
        conn: u64,
        now: Instant,
        flows: &[FlowStats],
        ports: &[PortStats],
    ) {
        let Some(s) = self.switches.get_mut(&branch) else {
            return;
        };
        if s.conn != conn {
            return;
        }
        if !s.authenticated {
            self.unauthenticated_samples += 1;
        }
        let old = s.sample.take();
        let secs = old
            .as_ref()
            .map_or(0.0, |o| now.saturating_duration_since(o.at).as_secs_f64());
        let mut sample = Sample {
            at: now,
            flows: BTreeMap::new(),
            ports: BTreeMap::new(),
        };
        for f in flows {
            let prev = old.as_ref().and_then(|o| o.flows.get(&f.cookie));
            sample
                .flows
                .insert(f.cookie, advance(prev, f.packet_count, f.byte_count, secs));
        }
        for p in ports {
            let prev = old.as_ref().and_then(|o| o.ports.get(&p.port_no));
            sample.ports.insert(
                p.port_no,
                PortCounter {
                    rx: advance(prev.map(|c| &c.rx), p.rx_packets, p.rx_bytes, secs),
                    tx: advance(prev.map(|c| &c.tx), p.tx_packets, p.tx_bytes, secs),
                    rx_dropped: p.rx_dropped,
                    tx_dropped: p.tx_dropped,
                },
            );
        }
        s.sample = Some(sample);
    }

    /// Everything, aggregated, as served by the API.
    pub fn view(&self, now: Instant) -> StatsView {
        let mut members: BTreeMap<PathCode, Traffic> = BTreeMap::new();
        let mut branches = Vec::new();
        for (&b, s) in &self.switches {
            let mut flows = Vec::new();
            let mut ports = Vec::new();
            let (mut packets, mut bytes) = (0u64, 0u64);
            if let Some(sample) = &s.sample {
                for (&cookie, c) in &sample.flows {
                    packets = packets.saturating_add(c.packets);
                    bytes = bytes.saturating_add(c.bytes);
                    let info = Cookie(cookie).decode();
                    // Only an authenticated switch's counters feed the members, groups and
                    // pairs, which WRR, capacity and the adaptive groups read.
                    if let Some(CookieInfo::Swap {
                        code,
                        direction,
                        role: HopRole::Source,
                        ..
                    }) = info.filter(|_| s.authenticated)
                    {
                        members.entry(code).or_default().add(direction, c);
                    }
                    flows.push(FlowCounters {
                        cookie: format!("{cookie:#018x}"),
                        what: describe(info),
                        packets: c.packets,
                        bytes: c.bytes,
                        packets_per_s: c.pps,
                        bits_per_s: c.bps,
                    });
                }
                for (&port, c) in &sample.ports {
                    ports.push(PortCounters {
                        port,
                        rx_packets: c.rx.packets,
                        rx_bytes: c.rx.bytes,
                        rx_bits_per_s: c.rx.bps,
                        tx_packets: c.tx.packets,
                        tx_bytes: c.tx.bytes,
                        tx_bits_per_s: c.tx.bps,
                        rx_dropped: c.rx_dropped,
                        tx_dropped: c.tx_dropped,
                    });
                }
            }
            branches.push(BranchStats {
                branch: b.get(),
                connected: s.connected,
                datapath_id: format!("{:#018x}", s.datapath_id),
                peer: s.peer.clone(),
                authenticated: s.authenticated,
                flows_compiled: s.flows_compiled,
                flows_reported: flows.len(),
                reconciles: s.reconciles,
                last_reconcile_ms: s.last_reconcile_ms,
                sample_age_ms: s
                    .sample
                    .as_ref()
                    .map(|x| now.saturating_duration_since(x.at).as_millis()),
                packets,
                bytes,
                flows,
                ports,
            });
        }
        let mut groups: BTreeMap<(u8, u8, u8), Traffic> = BTreeMap::new();
        let mut pairs: BTreeMap<(u8, u8), Traffic> = BTreeMap::new();
        let member_views = members
            .iter()
            .map(|(code, t)| {
                let (a, b, g) = (code.source.get(), code.destination.get(), code.group.get());
                groups.entry((a, b, g)).or_default().merge(t);
                pairs.entry((a, b)).or_default().merge(t);
                MemberStats {
                    code: format!("{:#06x}", code.port()),
                    source: a,
                    destination: b,
                    group: g,
                    member: code.member.get(),
                    traffic: *t,
                }
            })
            .collect();
        StatsView {
            available: true,
            last_push: self.last_push,
            openflow_refusals: self
                .guard
                .as_ref()
                .map(|g| g.counters())
                .unwrap_or_default(),
            unauthenticated_samples: self.unauthenticated_samples,
            branches,
            pairs: pairs
                .into_iter()
                .map(|((source, destination), traffic)| PairStats {
                    source,
                    destination,
                    traffic,
                })
                .collect(),
            groups: groups
                .into_iter()
                .map(|((source, destination, group), traffic)| GroupStats {
                    source,
                    destination,
                    group,
                    traffic,
                })
                .collect(),
            members: member_views,
        }
    }
}

fn describe(info: Option<CookieInfo>) -> String {
    match info {
        Some(CookieInfo::Swap {
            code,
            direction,
            role,
            variant,
        }) => format!(
            "{:#06x} {} {}{}",
            code.port(),
            match direction {
                Direction::Forward => "forward",
                Direction::Reverse => "reverse",
            },
            match role {
                HopRole::Source => "source",
                HopRole::Transit => "transit",
                HopRole::Destination => "destination",
            },
            if variant == 1 { " type-i" } else { "" }
        ),
        Some(CookieInfo::Patch { port, to_wan }) => format!(
            "patch {}",
            if to_wan {
                format!("mpa{0}>wan{0}", port.get())
            } else {
                format!("wan{0}>mpa{0}", port.get())
            }
        ),
        None => "unknown".to_owned(),
    }
}

/// Traffic of a member path, group or pair: forward (A → B) and reverse (B → A).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Traffic {
    /// Packets A sent into the path(s).
    pub forward_packets: u64,
    /// Bytes A sent.
    pub forward_bytes: u64,
    /// Rate A sent, bit/s, over the last sampling interval.
    pub forward_bits_per_s: f64,
    /// Packets B sent back.
    pub reverse_packets: u64,
    /// Bytes B sent back.
    pub reverse_bytes: u64,
    /// Rate B sent back, bit/s.
    pub reverse_bits_per_s: f64,
}

impl Traffic {
    fn add(&mut self, d: Direction, c: &Counter) {
        match d {
            Direction::Forward => {
                self.forward_packets = self.forward_packets.saturating_add(c.packets);
                self.forward_bytes = self.forward_bytes.saturating_add(c.bytes);
                self.forward_bits_per_s += c.bps;
            }
            Direction::Reverse => {
                self.reverse_packets = self.reverse_packets.saturating_add(c.packets);
                self.reverse_bytes = self.reverse_bytes.saturating_add(c.bytes);
                self.reverse_bits_per_s += c.bps;
            }
        }
    }

    fn merge(&mut self, o: &Traffic) {
        self.forward_packets = self.forward_packets.saturating_add(o.forward_packets);
        self.forward_bytes = self.forward_bytes.saturating_add(o.forward_bytes);
        self.forward_bits_per_s += o.forward_bits_per_s;
        self.reverse_packets = self.reverse_packets.saturating_add(o.reverse_packets);
        self.reverse_bytes = self.reverse_bytes.saturating_add(o.reverse_bytes);
        self.reverse_bits_per_s += o.reverse_bits_per_s;
    }
}

/// `GET /api/v1/stats`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StatsView {
    /// Whether the SDC runs (the OpenFlow server is on).
    pub available: bool,
    /// The last change pushed to the switches, if any.
    #[serde(default)]
    pub last_push: Option<PushReport>,
    /// Refused and timed-out connections of the OpenFlow TCP listeners (`docs/security.md`).
    #[serde(default)]
    pub openflow_refusals: crate::preauth::Refusals,
    /// Statistics samples of unauthenticated switches (clear TCP listener): shown under their
    /// branch, never counted into members, groups and pairs.
    #[serde(default)]
    pub unauthenticated_samples: u64,
    /// One entry per switch seen since start.
    pub branches: Vec<BranchStats>,
    /// Per ordered branch pair (A, B).
    pub pairs: Vec<PairStats>,
    /// Per path group (A, B, G).
    pub groups: Vec<GroupStats>,
    /// Per member path `0xBASG`.
    pub members: Vec<MemberStats>,
}

/// One switch.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct BranchStats {
    /// Branch id (= datapath id).
    pub branch: u8,
    /// Whether its OpenFlow connection is up.
    pub connected: bool,
    /// Datapath id, hex.
    pub datapath_id: String,
    /// Where it connected from (`ip:port` or `unix:PATH`).
    pub peer: String,
    /// TLS with its branch's certificate, or a unix socket; `false`: the clear TCP listener
    /// (its flows are not counted into members, groups and pairs).
    #[serde(default)]
    pub authenticated: bool,
    /// Flows the compiled table holds for it.
    pub flows_compiled: usize,
    /// Flows of ours it reported in the last sample.
    pub flows_reported: usize,
    /// Full reconciles done (one per connection).
    pub reconciles: u64,
    /// Duration of the last full reconcile (dump + diff + FLOW_MODs + barriers), ms.
    pub last_reconcile_ms: Option<f64>,
    /// Age of the last sample, ms.
    pub sample_age_ms: Option<u128>,
    /// Packets matched by all flows of ours.
    pub packets: u64,
    /// Bytes matched by all flows of ours.
    pub bytes: u64,
    /// Every flow of ours.
    pub flows: Vec<FlowCounters>,
    /// Every port.
    pub ports: Vec<PortCounters>,
}

/// One flow's counters.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FlowCounters {
    /// Cookie, hex (u64 does not fit a JSON number exactly).
    pub cookie: String,
    /// What the cookie says (`0x2114 forward source`, `patch mpa0>wan0`).
    pub what: String,
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
    /// Packets/s over the last interval.
    pub packets_per_s: f64,
    /// Bits/s over the last interval.
    pub bits_per_s: f64,
}

/// One port's counters.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PortCounters {
    /// OpenFlow port number (`wan{k}` = 1 + k, `mpa{k}` = 101 + k, LOCAL = 0xfffffffe).
    pub port: u32,
    /// Received packets.
    pub rx_packets: u64,
    /// Received bytes.
    pub rx_bytes: u64,
    /// Receive rate, bit/s.
    pub rx_bits_per_s: f64,
    /// Sent packets.
    pub tx_packets: u64,
    /// Sent bytes.
    pub tx_bytes: u64,
    /// Send rate, bit/s.
    pub tx_bits_per_s: f64,
    /// Received and dropped.
    pub rx_dropped: u64,
    /// Dropped on send.
    pub tx_dropped: u64,
}

/// One ordered branch pair.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PairStats {
    /// A.
    pub source: u8,
    /// B.
    pub destination: u8,
    /// Its traffic over all groups.
    #[serde(flatten)]
    pub traffic: Traffic,
}

/// One path group.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct GroupStats {
    /// A.
    pub source: u8,
    /// B.
    pub destination: u8,
    /// G.
    pub group: u8,
    /// Its traffic over all members.
    #[serde(flatten)]
    pub traffic: Traffic,
}

/// One member path.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MemberStats {
    /// `0xBASG`.
    pub code: String,
    /// A.
    pub source: u8,
    /// B.
    pub destination: u8,
    /// G.
    pub group: u8,
    /// S.
    pub member: u8,
    /// Its traffic.
    #[serde(flatten)]
    pub traffic: Traffic,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path_group::{MemberId, PathGroupId};
    use std::time::Duration;

    fn flow(cookie: u64, packets: u64, bytes: u64) -> FlowStats {
        FlowStats {
            table_id: 0,
            duration_sec: 0,
            duration_nsec: 0,
            priority: 1200,
            idle_timeout: 0,
            hard_timeout: 0,
            flags: 0,
            cookie,
            packet_count: packets,
            byte_count: bytes,
            match_: ofproto::Match::new(),
            instructions: Vec::new(),
        }
    }

    #[test]
    fn rates_and_aggregation_by_path_code() {
        let b = |n| BranchId::new(n).unwrap();
        let code = |s, g| PathCode {
            destination: b(2),
            source: b(1),
            member: MemberId::new(s).unwrap(),
            group: PathGroupId::new(g).unwrap(),
        };
        let fwd = |c, v| Cookie::swap(c, Direction::Forward, HopRole::Source, v).0;
        let rev = |c| Cookie::swap(c, Direction::Reverse, HopRole::Source, 0).0;
        let transit = Cookie::swap(code(2, 1), Direction::Forward, HopRole::Transit, 0).0;
        let mut sdc = Sdc::default();
        let t0 = Instant::now();
        sdc.connected(b(1), 7, 1, "unix:x".into(), true);
        sdc.connected(b(2), 8, 2, "unix:y".into(), true);
        sdc.connected(b(3), 9, 3, "unix:z".into(), true);
        sdc.record(
            b(1),
            7,
            t0,
            &[
                flow(fwd(code(1, 1), 0), 1, 100),
                flow(fwd(code(1, 1), 1), 0, 0),
            ],
            &[],
        );
        sdc.record(b(1), 99, t0, &[flow(fwd(code(1, 1), 0), 1000, 1000)], &[]);
        let t1 = t0 + Duration::from_secs(2);
        sdc.record(
            b(1),
            7,
            t1,
            &[
                flow(fwd(code(1, 1), 0), 11, 1100),
                flow(fwd(code(1, 1), 1), 5, 500),
                flow(fwd(code(2, 1), 0), 2, 200),
            ],
            &[],
        );
        sdc.record(b(2), 8, t1, &[flow(rev(code(1, 1)), 3, 300)], &[]);
        sdc.record(b(3), 9, t1, &[flow(transit, 2, 200)], &[]);
        let v = sdc.view(t1);
        assert_eq!(v.branches.len(), 3);
        let b1 = &v.branches[0];
        assert_eq!((b1.packets, b1.bytes, b1.flows_reported), (18, 1800, 3));
        let f = &b1.flows[0];
        assert_eq!(f.what, "0x2111 forward source");
        // (1100 - 100) bytes in 2 s = 4000 bit/s.
        assert_eq!(f.bits_per_s, 4000.0);
        assert_eq!(b1.flows[1].what, "0x2111 forward source type-i");
        assert_eq!(v.members.len(), 2);
        let m1 = &v.members[0];
        assert_eq!(m1.code, "0x2111");
        assert_eq!(m1.traffic.forward_bytes, 1600);
        assert_eq!(m1.traffic.forward_bits_per_s, 4000.0 + 2000.0);
        assert_eq!(m1.traffic.reverse_bytes, 300);
        assert_eq!(v.groups.len(), 1);
        assert_eq!(
            v.groups[0].traffic.forward_bytes, 1800,
            "transits are not counted"
        );
        assert_eq!(v.pairs.len(), 1);
        assert_eq!((v.pairs[0].source, v.pairs[0].destination), (1, 2));
        assert_eq!(v.pairs[0].traffic.reverse_packets, 3);
        sdc.disconnected(b(1), 7);
        assert!(!sdc.view(t1).branches[0].connected);
    }
}
