//! Priority at the WAN egress: the gateway's half of the PM (seed 000 §IV "Priority Management";
//! docs/ofc.md §8; `controller::priority`).
//!
//! OVS rewrites the DSCP of every tunnelled packet per class and WAN hop count (Type I 46/34,
//! Type II 18/10) but cannot queue by it (DESIGN §4: the netdev datapath loses `set_queue`), and
//! transit packets of other branches never reach the MPA. So each shaped WAN port gets a
//! strict-priority qdisc on its egress towards the ISP, keyed by DSCP alone:
//!
//! ```text
//! wan{k} root 1: htb default 14
//!  └─ 1:1  rate R ceil R                         R = rate_mbit × shaping_percent / 100
//!      ├─ 1:10 prio 0  DSCP 46 (Type I, 1 hop)    + ARP   ─ bfifo 10:
//!      ├─ 1:11 prio 1  DSCP 34 (Type I, 2 hops)           ─ bfifo 11:
//!      ├─ 1:12 prio 2  DSCP 18 (Type II, 1 hop)           ─ bfifo 12:
//!      ├─ 1:13 prio 3  DSCP 10 (Type II, 2 hops)          ─ bfifo 13:
//!      └─ 1:14 prio 4  anything else (default)            ─ bfifo 14:
//!      every band: rate R/100 (a floor against starvation), ceil R
//! ```
//!
//! Shaping at a bit under the uplink's rate moves the bottleneck queue from the modem (which we
//! cannot prioritise) into this qdisc, as SQM does. htb lends the parent's spare rate to its
//! children in `prio` order, so band b only gets what bands 0..b leave (beyond each band's small
//! floor). The classifier is u32 on the IPv4 TOS byte (`DSCP << 2`, mask `0xfc`); IPv6 and other
//! protocols fall into band 4, except ARP, which goes to band 0 so neighbour resolution never
//! waits behind bulk traffic.
//!
//! The qdisc goes on the physical port: without `[ovs]` that is `wan[k].name`, which also carries
//! the address; with `[ovs]` it is the OVS port `wan{k}` (the address lives on `mpa{k}`), and the
//! port gets an OVS QoS row of type `linux-noop` first (tagged `external_ids:mms-port`; rows of
//! earlier runs are destroyed then), so `ovs-vswitchd` leaves the qdisc alone.
//! Ports without `rate_mbit` are not touched: behind a modem's queue that we do not own, marks
//! alone cannot give priority.
//!
//! [`plan`] is pure (the `tc` argument lists, unit-tested exactly); [`apply`] runs them. Re-running
//! is idempotent (the old root qdisc is deleted, then everything is replaced) and the root qdisc
//! is deleted on exit ([`Undo`]).

use anyhow::Context;
use mms_types::dscp;
use mpa::config::Config;
use tracing::{debug, info};

use crate::setup::{self, Undo};

/// Number of strict-priority bands (the PM table of `mms_types::dscp`: 4 marks + everything else).
pub const BANDS: u8 = dscp::LAST_BAND + 1;
/// The band of packets without one of the PM's marks.
pub const DEFAULT_BAND: u8 = dscp::LAST_BAND;
/// The PM's DSCP marks and their bands: the one table the controller also writes into the swap
/// flows (`mms_types::dscp::MARKS`).
pub const MARKS: [(u8, u8); 4] = dscp::MARKS;
/// Each band's assured rate is the shaped rate divided by this (1 %): a floor so that a
/// saturated higher band never starves a lower one completely; 5 bands take 5 % in all.
pub const FLOOR_DIVISOR: u64 = 100;
/// Smallest floor in kbit/s (htb needs a positive rate).
pub const MIN_FLOOR_KBIT: u64 = 8;
/// Each band's FIFO holds this much time at the shaped rate …
pub const QUEUE_TIME_MS: u64 = 20;
/// … but at least this many bytes: two 64 KiB GSO super-packets (a locally sent super-packet is
/// queued whole, a smaller limit would drop every one).
pub const MIN_QUEUE_BYTES: u64 = 2 * 65_536;
/// DRR quantum of every class (one Ethernet frame). Bands never share a `prio`, so it only
/// silences htb's "quantum is big" warning at high rates.
pub const QUANTUM_BYTES: u32 = 1_514;
/// u32 filter preference of the DSCP matches (IPv4).
const PREF_IP: u32 = 10;
/// u32 filter preference of the ARP match.
const PREF_ARP: u32 = 20;

/// The band of a packet carrying `dscp` (the PM table; 4 for anything else).
pub use mms_types::dscp::band_of as band_for_dscp;

/// One shaped WAN port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shaper {
    /// The physical egress interface (`wan[k].name` of the config file).
    pub dev: String,
    /// The shaped rate in kbit/s (with `autorate`: the start and the maximum).
    pub rate_kbit: u64,
    /// `[qos] autorate`: the rate of class `1:1` follows the uplink ([`mpa::autorate`],
    /// `crate::autorate`); the bands' floors are then taken from the lowest rate.
    pub autorate: bool,
}

impl Shaper {
    /// Each band's FIFO limit in bytes ([`QUEUE_TIME_MS`] at the shaped rate, at least
    /// [`MIN_QUEUE_BYTES`]).
    pub fn queue_bytes(&self) -> u64 {
        (self.rate_kbit * QUEUE_TIME_MS / 8).max(MIN_QUEUE_BYTES)
    }

    /// Each band's assured rate in kbit/s (htb gives a band its floor whatever the parent's rate,
    /// so with `autorate` it is a share of the lowest rate the port may get).
    pub fn floor_kbit(&self) -> u64 {
        let base = if self.autorate {
            mpa::autorate::MIN_KBIT
        } else {
            self.rate_kbit
        };
        (base / FLOOR_DIVISOR).max(MIN_FLOOR_KBIT)
    }

    /// `tc ARGS` that set the port's rate (class `1:1`) to `kbit`; the bands keep their ceiling
    /// (the start rate, the highest `autorate` may set) and borrow only what `1:1` has.
    pub fn set_rate(&self, kbit: u64) -> Vec<String> {
        self.root_class("change", kbit.max(MIN_FLOOR_KBIT))
    }

    /// `tc class VERB` of class `1:1` at `kbit` (rate = ceil): installed with `replace`, changed
    /// with `change`.
    fn root_class(&self, verb: &str, kbit: u64) -> Vec<String> {
        let rate = format!("{kbit}kbit");
        strings(&[
            "class",
            verb,
            "dev",
            &self.dev,
            "parent",
            "1:",
            "classid",
            "1:1",
            "htb",
            "rate",
            &rate,
            "ceil",
            &rate,
            "quantum",
            &QUANTUM_BYTES.to_string(),
        ])
    }

    /// `tc ARGS` that removes whatever root qdisc the port has (its failure is expected when
    /// there is none; it is also the undo).
    pub fn teardown(&self) -> Vec<String> {
        strings(&["qdisc", "del", "dev", &self.dev, "root"])
    }

    /// The `tc` argument lists that install the qdisc, in order (module docs).
    pub fn install(&self) -> Vec<Vec<String>> {
        let dev = self.dev.as_str();
        let rate = format!("{}kbit", self.rate_kbit);
        let floor = format!("{}kbit", self.floor_kbit());
        let quantum = QUANTUM_BYTES.to_string();
        let limit = self.queue_bytes().to_string();
        let default = format!("1{DEFAULT_BAND}");
        let mut out = vec![
            strings(&[
                "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", &default,
            ]),
            self.root_class("replace", self.rate_kbit),
        ];
        for band in 0..BANDS {
            let classid = format!("1:1{band}");
            let prio = band.to_string();
            let handle = format!("1{band}:");
            out.push(strings(&[
                "class", "replace", "dev", dev, "parent", "1:1", "classid", &classid, "htb",
                "rate", &floor, "ceil", &rate, "prio", &prio, "quantum", &quantum,
            ]));
            out.push(strings(&[
                "qdisc", "replace", "dev", dev, "parent", &classid, "handle", &handle, "bfifo",
                "limit", &limit,
            ]));
        }
        for (i, &(dscp, band)) in MARKS.iter().enumerate() {
            let handle = format!("800::{}", i + 1);
            let tos = format!("{:#04x}", dscp << 2);
            let flowid = format!("1:1{band}");
            out.push(strings(&[
                "filter",
                "replace",
                "dev",
                dev,
                "parent",
                "1:",
                "protocol",
                "ip",
                "pref",
                &PREF_IP.to_string(),
                "handle",
                &handle,
                "u32",
                "match",
                "ip",
                "dsfield",
                &tos,
                "0xfc",
                "flowid",
                &flowid,
            ]));
        }
        out.push(strings(&[
            "filter",
            "replace",
            "dev",
            dev,
            "parent",
            "1:",
            "protocol",
            "arp",
            "pref",
            &PREF_ARP.to_string(),
            "handle",
            "801::1",
            "u32",
            "match",
            "u32",
            "0",
            "0",
            "flowid",
            "1:10",
        ]));
        out
    }
}

fn strings(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|x| (*x).to_owned()).collect()
}

/// The ports to shape: every `wan[k]` with a `rate_mbit`, at `qos.shaping_percent` of it; with
/// `qos.autorate` every port, starting from that or from [`mpa::autorate::DEFAULT_MAX_KBIT`];
/// none when `qos.enabled` is false. `config` is the file's config (physical interface names),
/// not the one [`crate::ovs::setup`] returns.
pub fn plan(config: &Config) -> Vec<Shaper> {
    if !config.qos.enabled {
        return Vec::new();
    }
    let percent = u64::from(config.qos.shaping_percent);
    let auto = config.qos.autorate;
    config
        .wan
        .iter()
        .filter_map(|w| {
            let rate_kbit = match (w.rate_mbit, auto) {
                (Some(mbit), _) => (u64::from(mbit) * 1000 * percent / 100).max(MIN_FLOOR_KBIT),
                (None, true) => mpa::autorate::DEFAULT_MAX_KBIT,
                (None, false) => return None,
            };
            Some(Shaper {
                dev: w.name.clone(),
                rate_kbit,
                autorate: auto,
            })
        })
        .collect()
}

/// The `external_ids` key that marks the OVS QoS rows `mmsg` creates (value: the port).
pub const OVS_QOS_TAG: &str = "mms-port";

/// The `ovs-vsctl` arguments (after `--db`/`--timeout`) that give port `dev` a QoS row of type
/// `linux-noop`, so `ovs-vswitchd` does not replace our qdisc, and destroy our `old` rows of
/// earlier runs (QoS is a root table: a row outlives the port).
pub fn ovs_noop_args(dev: &str, old: &[String]) -> Vec<String> {
    let tag = format!("external_ids:{OVS_QOS_TAG}={dev}");
    let mut a = strings(&[
        "--",
        "set",
        "port",
        dev,
        "qos=@q",
        "--",
        "--id=@q",
        "create",
        "qos",
        "type=linux-noop",
        &tag,
    ]);
    for u in old {
        a.extend(strings(&["--", "destroy", "qos", u]));
    }
    a
}

/// The `ovs-vsctl` arguments that list our QoS rows of port `dev` (one UUID per line).
pub fn ovs_find_args(dev: &str) -> Vec<String> {
    strings(&[
        "--bare",
        "--columns=_uuid",
        "find",
        "qos",
        &format!("external_ids:{OVS_QOS_TAG}={dev}"),
    ])
}

/// Installs [`plan`]'s qdiscs (module docs); records their removal in `undo`. `config` is the
/// file's config (see [`plan`]). Returns the shapers installed (the `autorate` task's ports).
pub fn apply(config: &Config, undo: &mut Undo) -> anyhow::Result<Vec<Shaper>> {
    let shapers = plan(config);
    if shapers.is_empty() {
        debug!("no WAN port has rate_mbit (or [qos] enabled = false): no egress shaping");
        return Ok(shapers);
    }
    for s in &shapers {
        if let Some(o) = &config.ovs {
            let db = format!("--db={}", o.db);
            undo.on_exit(
                "ovs-vsctl",
                &[
                    db.as_str(),
                    "--timeout=10",
                    "--if-exists",
                    "clear",
                    "port",
                    &s.dev,
                    "qos",
                ],
            );
            let mut find = vec![db.clone(), "--timeout=10".to_owned()];
            find.extend(ovs_find_args(&s.dev));
            let old: Vec<String> = setup::run("ovs-vsctl", &find)
                .with_context(|| format!("find the OVS QoS rows of port {}", s.dev))?
                .split_whitespace()
                .map(str::to_owned)
                .collect();
            let mut args = vec![db.clone(), "--timeout=10".to_owned()];
            args.extend(ovs_noop_args(&s.dev, &old));
            setup::run("ovs-vsctl", &args)
                .with_context(|| format!("OVS QoS linux-noop on port {}", s.dev))?;
        }
        undo.on_exit("tc", &s.teardown());
        // A root qdisc of ours from an earlier run (htb cannot "replace" itself), or none.
        if setup::run("tc", &s.teardown()).is_ok() {
            debug!(dev = %s.dev, "old root qdisc removed");
        }
        for args in s.install() {
            setup::run("tc", &args).with_context(|| format!("egress qdisc on {}", s.dev))?;
        }
        info!(
            dev = %s.dev,
            rate_kbit = s.rate_kbit,
            queue_bytes = s.queue_bytes(),
            autorate = s.autorate,
            "WAN egress shaped with strict priority by DSCP"
        );
    }
    Ok(shapers)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"
branch_id = 1
lan_prefixes = ["198.19.1.0/24"]
[[wan]]
name = "wan0"
address = "198.18.10.2/24"
gateway = "198.18.10.1"
rate_mbit = 40
[[wan]]
name = "wan1"
address = "198.18.11.2/24"
gateway = "198.18.11.1"
"#;

    #[test]
    fn bands_follow_the_pm_table() {
        assert_eq!(band_for_dscp(dscp::EF), 0);
        assert_eq!(band_for_dscp(34), 1);
        assert_eq!(band_for_dscp(18), 2);
        assert_eq!(band_for_dscp(10), 3);
        for d in [0, 8, 26, 45, 47, 63] {
            assert_eq!(band_for_dscp(d), DEFAULT_BAND);
        }
    }

    #[test]
    fn only_ports_with_a_rate_are_shaped() {
        let c = Config::parse(CONFIG).unwrap();
        assert_eq!(
            plan(&c),
            vec![Shaper {
                dev: "wan0".into(),
                rate_kbit: 38_000,
                autorate: false,
            }]
        );
        assert!(c.shapes_wan());
        let c = Config::parse(&format!("{CONFIG}[qos]\nshaping_percent = 50\n")).unwrap();
        assert_eq!(plan(&c)[0].rate_kbit, 20_000);
        let c = Config::parse(&format!("{CONFIG}[qos]\nenabled = false\n")).unwrap();
        assert!(plan(&c).is_empty());
        assert!(!c.shapes_wan());
    }

    #[test]
    fn autorate_shapes_every_port_from_its_rate_or_the_default_maximum() {
        let c = Config::parse(&format!("{CONFIG}[qos]\nautorate = true\n")).unwrap();
        assert_eq!(
            plan(&c),
            vec![
                Shaper {
                    dev: "wan0".into(),
                    rate_kbit: 38_000,
                    autorate: true,
                },
                Shaper {
                    dev: "wan1".into(),
                    rate_kbit: mpa::autorate::DEFAULT_MAX_KBIT,
                    autorate: true,
                }
            ]
        );
        assert!(c.shapes_wan());
        assert_eq!(c.sparse_lane_kbit(), mpa::config::DEFAULT_SPARSE_LANE_KBIT);
        let unshaped = CONFIG.replace("rate_mbit = 40\n", "");
        let c = Config::parse(&unshaped).unwrap();
        assert!(!c.shapes_wan());
        assert_eq!(c.sparse_lane_kbit(), 0);
        let c = Config::parse(&format!("{unshaped}[qos]\nautorate = true\n")).unwrap();
        assert!(
            c.shapes_wan(),
            "autorate alone shapes (and turns the sparse lane on)"
        );
        assert_eq!(c.sparse_lane_kbit(), mpa::config::DEFAULT_SPARSE_LANE_KBIT);
        let c = Config::parse(&format!(
            "{unshaped}[qos]\nautorate = true\nenabled = false\n"
        ))
        .unwrap();
        assert!(plan(&c).is_empty() && !c.shapes_wan());
        // The bands' floors come from the lowest rate; the port's rate changes on 1:1 alone.
        let s = &plan(&Config::parse(&format!("{CONFIG}[qos]\nautorate = true\n")).unwrap())[1];
        assert_eq!(s.floor_kbit(), MIN_FLOOR_KBIT);
        assert_eq!(
            s.set_rate(9_500).join(" "),
            "class change dev wan1 parent 1: classid 1:1 htb rate 9500kbit ceil 9500kbit quantum 1514"
        );
    }

    #[test]
    fn config_is_validated_with_the_key() {
        let e = Config::parse(&CONFIG.replace("rate_mbit = 40", "rate_mbit = 0")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "wan[0].rate_mbit: 0 is out of range 1..=100000"
        );
        let e = Config::parse(&format!("{CONFIG}[qos]\nshaping_percent = 101\n")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "qos.shaping_percent: 101 is out of range 1..=100"
        );
        let e = Config::parse(&format!("{CONFIG}[qos]\nbogus = 1\n")).unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
    }

    #[test]
    fn tc_arguments() {
        let s = Shaper {
            dev: "wan0".into(),
            rate_kbit: 38_000,
            autorate: false,
        };
        assert_eq!(s.teardown().join(" "), "qdisc del dev wan0 root");
        let lines: Vec<String> = s.install().iter().map(|a| a.join(" ")).collect();
        // 38 Mbit/s × 20 ms = 95 000 bytes < 2 × 64 KiB.
        assert_eq!(
            lines,
            vec![
                "qdisc replace dev wan0 root handle 1: htb default 14",
                "class replace dev wan0 parent 1: classid 1:1 htb rate 38000kbit ceil 38000kbit quantum 1514",
                "class replace dev wan0 parent 1:1 classid 1:10 htb rate 380kbit ceil 38000kbit prio 0 quantum 1514",
                "qdisc replace dev wan0 parent 1:10 handle 10: bfifo limit 131072",
                "class replace dev wan0 parent 1:1 classid 1:11 htb rate 380kbit ceil 38000kbit prio 1 quantum 1514",
                "qdisc replace dev wan0 parent 1:11 handle 11: bfifo limit 131072",
                "class replace dev wan0 parent 1:1 classid 1:12 htb rate 380kbit ceil 38000kbit prio 2 quantum 1514",
                "qdisc replace dev wan0 parent 1:12 handle 12: bfifo limit 131072",
                "class replace dev wan0 parent 1:1 classid 1:13 htb rate 380kbit ceil 38000kbit prio 3 quantum 1514",
                "qdisc replace dev wan0 parent 1:13 handle 13: bfifo limit 131072",
                "class replace dev wan0 parent 1:1 classid 1:14 htb rate 380kbit ceil 38000kbit prio 4 quantum 1514",
                "qdisc replace dev wan0 parent 1:14 handle 14: bfifo limit 131072",
                "filter replace dev wan0 parent 1: protocol ip pref 10 handle 800::1 u32 match ip dsfield 0xb8 0xfc flowid 1:10",
                "filter replace dev wan0 parent 1: protocol ip pref 10 handle 800::2 u32 match ip dsfield 0x88 0xfc flowid 1:11",
                "filter replace dev wan0 parent 1: protocol ip pref 10 handle 800::3 u32 match ip dsfield 0x48 0xfc flowid 1:12",
                "filter replace dev wan0 parent 1: protocol ip pref 10 handle 800::4 u32 match ip dsfield 0x28 0xfc flowid 1:13",
                "filter replace dev wan0 parent 1: protocol arp pref 20 handle 801::1 u32 match u32 0 0 flowid 1:10",
            ]
        );
        // 1 Gbit/s: 20 ms = 2.5 MB per band.
        let fast = Shaper {
            dev: "wan0".into(),
            rate_kbit: 1_000_000,
            autorate: false,
        };
        assert_eq!(fast.queue_bytes(), 2_500_000);
        assert_eq!(fast.floor_kbit(), 10_000);
    }

    #[test]
    fn ovs_keeps_its_hands_off() {
        assert_eq!(
            ovs_noop_args("wan0", &["u1".into()]).join(" "),
            "-- set port wan0 qos=@q -- --id=@q create qos type=linux-noop \
             external_ids:mms-port=wan0 -- destroy qos u1"
        );
        assert_eq!(
            ovs_find_args("wan0").join(" "),
            "--bare --columns=_uuid find qos external_ids:mms-port=wan0"
        );
    }
}
