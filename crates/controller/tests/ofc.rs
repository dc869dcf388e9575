//! OFC pure core: the flow IR → OpenFlow 1.3 FLOW_MOD conversion (golden: the paper's Fig. 4(b)
//! entries as `ofproto` messages and bytes) and the reconcile diff and install order.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use common::{branch, paper_inventory, table2};
use controller::inventory::{BranchId, Inventory};
use controller::ofc::flowmod::{flow_mod, from_flow_stats};
use controller::ofc::reconcile::{diff, plan, update_diffs, FlowOp, Installed, Phase, PHASES};
use controller::path_group::{MemberPath, PathCode, PathGroup, PathGroupId, PathGroups};
use controller::swap::{
    compile, Action, Cookie, CookieInfo, Direction, FlowEntry, FlowTables, HopRole, Output, Stage,
};
use ofproto::message::{FlowMod, FlowModCommand};
use ofproto::multipart::FlowStats;
use ofproto::port::ofpp;
use ofproto::{Action as OfAction, Body, Instruction, Match, Message, OxmField as F};

fn fig4_tables(inv: &Inventory) -> FlowTables {
    let members = ["1a>3a>3a>2a", "1b>4a>4b>2a", "1a>5a>5a>2b", "1b>2b"]
        .iter()
        .map(|s| s.parse::<MemberPath>().unwrap())
        .collect();
    let g = PathGroup::from_members(branch(1), branch(2), PathGroupId::new(4).unwrap(), members)
        .unwrap();
    compile(inv, &PathGroups::new(inv, vec![g]).unwrap()).unwrap()
}

fn find(tables: &FlowTables, b: u8, cookie: u64) -> FlowEntry {
    tables
        .switch(branch(b))
        .iter()
        .find(|f| f.cookie.0 == cookie)
        .unwrap_or_else(|| panic!("no flow {cookie:#x} on branch {b}"))
        .clone()
}

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn apply(actions: Vec<OfAction>) -> Vec<Instruction> {
    vec![Instruction::ApplyActions(actions)]
}

fn set(f: F) -> OfAction {
    OfAction::SetField(f)
}

fn out(port: u32) -> OfAction {
    OfAction::Output { port, max_len: 0 }
}

/// The four entries of Fig. 4(b) as FLOW_MODs, field by field.
#[test]
fn fig4b_entries_as_flow_mods() {
    let inv = paper_inventory();
    let t = fig4_tables(&inv);
    let tcp = |in_port, src: &str, dst: &str, tcp_dst| {
        Match::new()
            .with(F::InPort(in_port, None))
            .with(F::EthType(0x0800, None))
            .with(F::IpProto(6, None))
            .with(F::Ipv4Src(ip(src), None))
            .with(F::Ipv4Dst(ip(dst), None))
            .with(F::TcpDst(tcp_dst, None))
    };
    let expect = |cookie: u64, priority, match_, instructions| FlowMod {
        cookie,
        cookie_mask: 0,
        table_id: 0,
        command: FlowModCommand::Add,
        priority,
        match_,
        instructions,
        ..FlowMod::default()
    };
    // MMSG 1: (p_1^1, p_1^2, 0x2004) → (p_1^1, p_1^3, 0x2114), WAN port 1.
    let fm = flow_mod(&find(&t, 1, 0x4d4d_0100_2114_1100), FlowModCommand::Add);
    assert_eq!(
        fm,
        expect(
            0x4d4d_0100_2114_1100,
            1100,
            tcp(101, "198.18.10.2", "198.18.20.2", 0x2004),
            apply(vec![
                set(F::Ipv4Src(ip("198.18.10.2"), None)),
                set(F::Ipv4Dst(ip("198.18.30.2"), None)),
                set(F::TcpDst(0x2114, None)),
                set(F::IpDscp(10, None)),
                out(1),
            ])
        )
    );
    // Its Type I sibling matches the mark (DSCP 46) one priority step higher.
    let fm1 = flow_mod(&find(&t, 1, 0x4d4d_0100_2114_1101), FlowModCommand::Add);
    assert_eq!(fm1.priority, 1110);
    assert_eq!(
        fm1.match_,
        tcp(101, "198.18.10.2", "198.18.20.2", 0x2004).with(F::IpDscp(46, None))
    );
    // MMSG 1: (p_2^1, p_2^2, 0x2004) → (p_2^1, p_2^2, 0x2144), WAN port 2 (subflow 4, direct).
    let fm = flow_mod(&find(&t, 1, 0x4d4d_0100_2144_1100), FlowModCommand::Add);
    assert_eq!(
        fm,
        expect(
            0x4d4d_0100_2144_1100,
            1200,
            tcp(102, "198.18.11.2", "198.18.21.2", 0x2004),
            apply(vec![
                set(F::Ipv4Src(ip("198.18.11.2"), None)),
                set(F::Ipv4Dst(ip("198.18.21.2"), None)),
                set(F::TcpDst(0x2144, None)),
                set(F::IpDscp(18, None)),
                out(2),
            ])
        )
    );
    // MMSG 3: (p_1^1, p_1^3, 0x2114) → (p_1^3, p_1^2, 0x2114), back out WAN port 1 (IN_PORT).
    let fm = flow_mod(&find(&t, 3, 0x4d4d_0100_2114_1200), FlowModCommand::Add);
    assert_eq!(
        fm,
        expect(
            0x4d4d_0100_2114_1200,
            1100,
            tcp(1, "198.18.10.2", "198.18.30.2", 0x2114),
            apply(vec![
                set(F::EthSrc(
                    ofproto::oxm::MacAddr([2, 0, 0xc6, 0x12, 0x1e, 2]),
                    None
                )),
                set(F::EthDst(
                    ofproto::oxm::MacAddr([2, 0, 0xc6, 0x12, 0x1e, 1]),
                    None
                )),
                set(F::Ipv4Src(ip("198.18.30.2"), None)),
                set(F::Ipv4Dst(ip("198.18.20.2"), None)),
                set(F::TcpDst(0x2114, None)),
                out(ofpp::IN_PORT),
            ])
        )
    );
    // MMSG 2: (p_1^3, p_1^2, 0x2114) → (p_1^1, p_1^2, 0x2004), MPA port.
    let fm = flow_mod(&find(&t, 2, 0x4d4d_0100_2114_1300), FlowModCommand::Add);
    assert_eq!(
        fm,
        expect(
            0x4d4d_0100_2114_1300,
            1100,
            tcp(1, "198.18.30.2", "198.18.20.2", 0x2114),
            apply(vec![
                set(F::Ipv4Src(ip("198.18.10.2"), None)),
                set(F::Ipv4Dst(ip("198.18.20.2"), None)),
                set(F::TcpDst(0x2004, None)),
                out(101),
            ])
        )
    );
    // Reverse entries match and rewrite tcp_src.
    let rev = flow_mod(&find(&t, 2, 0x4d4d_0100_2114_2100), FlowModCommand::Add);
    assert_eq!(rev.match_.basic(13), Some(&F::TcpSrc(0x2004, None)));
    assert_eq!(rev.match_.basic(14), None);
    // Every FLOW_MOD passes the spec's prerequisite checks.
    for (_, flows) in t.iter() {
        for f in flows {
            assert_eq!(flow_mod(f, FlowModCommand::Add).match_.validate(), Ok(()));
        }
    }
}

/// The MMSG 1 entry of Fig. 4(b) on the wire, field by field (OpenFlow 1.3.5 §7.3.4.1, §7.2.3,
/// §7.2.5; expected bytes computed independently with Python's `struct`).
#[test]
fn fig4b_source_entry_bytes() {
    let inv = paper_inventory();
    let t = fig4_tables(&inv);
    let fm = flow_mod(&find(&t, 1, 0x4d4d_0100_2114_1100), FlowModCommand::Add);
    let bytes = Message::new(1, Body::FlowMod(fm.clone()))
        .to_bytes()
        .unwrap();
    let expected: String = [
        // header: version 4, OFPT_FLOW_MOD (14), length 184, xid 1
        "040e00b800000001",
        // cookie 0x4d4d010021141100 (swap, 0x2114, forward, source, catch-all)
        "4d4d010021141100",
        // cookie_mask 0
        "0000000000000000",
        // table 0, OFPFC_ADD, idle 0, hard 0
        "000000000000",
        // priority 1100
        "044c",
        // buffer_id OFP_NO_BUFFER
        "ffffffff",
        // out_port OFPP_ANY
        "ffffffff",
        // out_group OFPG_ANY
        "ffffffff",
        // flags 0, pad
        "00000000",
        // ofp_match: OFPMT_OXM, length 45
        "0001002d",
        // IN_PORT = 101 (mpa0)
        "8000000400000065",
        // ETH_TYPE = 0x0800
        "80000a020800",
        // IP_PROTO = 6
        "8000140106",
        // IPV4_SRC = 198.18.10.2 (p_1^1)
        "80001604c6120a02",
        // IPV4_DST = 198.18.20.2 (p_1^2)
        "80001804c6121402",
        // TCP_DST = 0x2004 (0xB00G)
        "80001c022004",
        // pad to 8
        "000000",
        // OFPIT_APPLY_ACTIONS, length 88, pad
        "0004005800000000",
        // SET_FIELD IPV4_SRC = 198.18.10.2
        "0019001080001604c6120a0200000000",
        // SET_FIELD IPV4_DST = 198.18.30.2 (p_1^3, the transit)
        "0019001080001804c6121e0200000000",
        // SET_FIELD TCP_DST = 0x2114 (0xBASG)
        "0019001080001c022114000000000000",
        // SET_FIELD IP_DSCP = 10 (Type II, 2 hops)
        "00190010800010010a00000000000000",
        // OUTPUT port 1 (wan0), max_len 0
        "00000010000000010000000000000000",
    ]
    .concat();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, expected);
    assert_eq!(
        Message::decode_exact(&bytes).unwrap(),
        Message::new(1, Body::FlowMod(fm))
    );
}

fn as_stats(fm: &FlowMod, packets: u64) -> FlowStats {
    FlowStats {
        table_id: fm.table_id,
        duration_sec: 3,
        duration_nsec: 0,
        priority: fm.priority,
        idle_timeout: 0,
        hard_timeout: 0,
        flags: 0,
        cookie: fm.cookie,
        packet_count: packets,
        byte_count: packets * 100,
        match_: fm.match_.clone(),
        instructions: fm.instructions.clone(),
    }
}

/// What a switch reports converts back to exactly the compiled flow (all 140 of Table II).
#[test]
fn flow_stats_round_trip_table2() {
    let inv = paper_inventory();
    let t = compile(&inv, &table2(&inv)).unwrap();
    assert_eq!(t.len(), 140);
    for (_, flows) in t.iter() {
        for f in flows {
            let fm = flow_mod(f, FlowModCommand::Add);
            assert_eq!(from_flow_stats(&as_stats(&fm, 7)).as_ref(), Some(f));
            // And through the wire codec, as a switch would send it.
            let m = Message::new(9, Body::FlowMod(fm.clone()))
                .to_bytes()
                .unwrap();
            let Body::FlowMod(back) = Message::decode_exact(&m).unwrap().body else {
                panic!()
            };
            assert_eq!(back, fm);
        }
    }
    // OVS reports OUTPUT max_len as sent; any max_len still means the same port.
    let f = &t.switch(branch(1))[0];
    let mut fm = flow_mod(f, FlowModCommand::Add);
    if let Instruction::ApplyActions(a) = &mut fm.instructions[0] {
        if let Some(OfAction::Output { max_len, .. }) = a.last_mut() {
            *max_len = 0xffe5;
        }
    }
    assert_eq!(from_flow_stats(&as_stats(&fm, 0)).as_ref(), Some(f));
}

fn installed(flows: &[FlowEntry]) -> Vec<Installed> {
    flows.iter().map(Installed::exact).collect()
}

fn switch1() -> Vec<FlowEntry> {
    let inv = paper_inventory();
    compile(&inv, &table2(&inv))
        .unwrap()
        .switch(branch(1))
        .to_vec()
}

#[test]
fn diff_empty_switch_adds_everything_in_install_order() {
    let want = switch1();
    let d = diff(&[], &want);
    assert_eq!(
        (d.adds(), d.modifies(), d.deletes(), d.unchanged),
        (52, 0, 0, 0)
    );
    let steps = plan(&std::iter::once((branch(1), d)).collect());
    let phases: Vec<Phase> = steps.iter().map(|s| s.phase).collect();
    // Branch 1 has patch flows, destinations (reverse direction) and sources; no transit.
    assert_eq!(
        phases,
        vec![
            Phase::Install(Stage::Patch),
            Phase::Install(Stage::Destination),
            Phase::Install(Stage::Source)
        ]
    );
    let counts: Vec<usize> = steps.iter().map(|s| s.ops[&branch(1)].len()).collect();
    assert_eq!(counts, vec![4, 16, 32]);
}

#[test]
fn diff_in_sync_is_empty_and_foreign_flows_are_ignored() {
    let want = switch1();
    let mut have = installed(&want);
    have.push(Installed {
        cookie: Cookie(0x1234),
        flow: None,
    });
    let d = diff(&have, &want);
    assert!(d.is_empty());
    assert_eq!(d.unchanged, 52);
    assert!(plan(&std::iter::once((branch(1), d)).collect()).is_empty());
}

#[test]
fn diff_modify_replace_delete() {
    let want = switch1();
    let mut have = installed(&want);
    // 0: other actions, same match → MODIFY_STRICT.
    let mut f0 = want[0].clone();
    f0.actions.pop();
    have[0].flow = Some(f0);
    // 1: other match → ADD, then DELETE_STRICT of the old one (make before break).
    let mut f1 = want[1].clone();
    f1.matches.in_port = Some(77);
    have[1].flow = Some(f1.clone());
    // 2: installed twice → DELETE (a purge, before every install) + ADD.
    have.push(have[2].clone());
    // 3: something the IR cannot express → DELETE (a purge) + ADD.
    have[3].flow = None;
    // 4: missing → ADD.
    have.remove(4);
    // A stale flow of ours (a member path that is gone) → DELETE.
    let stale = Cookie::swap(
        PathCode::from_port(0x21f9).unwrap(),
        Direction::Forward,
        HopRole::Source,
        0,
    );
    have.push(Installed {
        cookie: stale,
        flow: None,
    });
    // A cookie with our tag that does not decode → DELETE, first of all.
    have.push(Installed {
        cookie: Cookie(Cookie::TAG | 0xff),
        flow: None,
    });
    let d = diff(&have, &want);
    let ops: BTreeSet<String> = d.ops.iter().map(|o| format!("{o:?}")).collect();
    assert_eq!(d.modifies(), 1);
    assert!(d.ops.contains(&FlowOp::Modify(want[0].clone())));
    assert!(d.ops.contains(&FlowOp::Retire(f1.clone())), "{ops:?}");
    assert!(!d.ops.contains(&FlowOp::Delete(want[1].cookie)), "{ops:?}");
    for i in [1, 2, 3] {
        assert!(d.ops.contains(&FlowOp::Add(want[i].clone())));
    }
    for i in [2, 3] {
        assert!(d.ops.contains(&FlowOp::Purge(want[i].cookie)), "{ops:?}");
    }
    assert!(d.ops.contains(&FlowOp::Add(want[4].clone())));
    assert!(d.ops.contains(&FlowOp::Delete(stale)));
    assert!(d.ops.contains(&FlowOp::Delete(Cookie(Cookie::TAG | 0xff))));
    assert_eq!((d.adds(), d.deletes()), (4, 5));
    assert_eq!(d.unchanged, 52 - 5);
    // Make before break: unknown cookies first, then every add, then every delete; the
    // FLOW_MODs are what they say.
    let steps = plan(&std::iter::once((branch(1), d)).collect());
    assert_eq!(steps[0].phase, Phase::Clear);
    // No delete by cookie after an add of that cookie (it would delete the new flow too).
    let flat: Vec<&FlowOp> = steps.iter().flat_map(|s| &s.ops[&branch(1)]).collect();
    for (i, op) in flat.iter().enumerate() {
        if let FlowOp::Add(f) = op {
            assert!(
                !flat[i..]
                    .iter()
                    .any(|o| matches!(o, FlowOp::Delete(c) | FlowOp::Purge(c) if *c == f.cookie)),
                "{:?} deleted after its add",
                f.cookie
            );
        }
    }
    let mut seen_remove = false;
    for s in &steps {
        match s.phase {
            Phase::Clear => {}
            Phase::Install(_) => assert!(!seen_remove, "an install after a delete"),
            Phase::Remove(_) => seen_remove = true,
        }
        for op in &s.ops[&branch(1)] {
            let fm = op.to_flow_mod();
            match op {
                FlowOp::Add(_) => assert_eq!(fm.command, FlowModCommand::Add),
                FlowOp::Modify(_) => assert_eq!(fm.command, FlowModCommand::ModifyStrict),
                FlowOp::Delete(c) | FlowOp::Purge(c) => {
                    assert_eq!(fm.command, FlowModCommand::Delete);
                    assert_eq!((fm.cookie, fm.cookie_mask), (c.0, u64::MAX));
                }
                FlowOp::Retire(f) => {
                    assert_eq!(fm.command, FlowModCommand::DeleteStrict);
                    assert_eq!((fm.cookie, fm.cookie_mask), (f.cookie.0, u64::MAX));
                    assert_eq!((fm.table_id, fm.priority), (f.table, f.priority));
                    assert_eq!(fm.match_, FlowOp::Add(f.clone()).to_flow_mod().match_);
                }
            }
        }
    }
}

/// Applies steps to a model of every switch and checks after each step that no member path is
/// half-installed: whenever a source entry exists, its transit and destination entries exist too
/// (per direction), on the switches the compiled tables put them on.
fn check_never_half_installed(old: &FlowTables, new: &FlowTables) -> usize {
    // Per switch, per cookie, the flows with it (two while a replaced one is not yet retired).
    let mut model: BTreeMap<BranchId, BTreeMap<Cookie, Vec<FlowEntry>>> = old
        .iter()
        .map(|(b, fs)| (b, fs.iter().map(|f| (f.cookie, vec![f.clone()])).collect()))
        .collect();
    let same_slot = |a: &FlowEntry, b: &FlowEntry| {
        (a.table, a.priority, &a.matches) == (b.table, b.priority, &b.matches)
    };
    let diffs = update_diffs(old, new, model.keys().copied().collect::<Vec<_>>());
    let steps = plan(&diffs);
    let order: Vec<usize> = steps
        .iter()
        .map(|s| PHASES.iter().position(|p| *p == s.phase).unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
    let where_ = |t: &FlowTables| -> BTreeMap<Cookie, BranchId> {
        t.iter()
            .flat_map(|(b, fs)| fs.iter().map(move |f| (f.cookie, b)))
            .collect()
    };
    let (w_old, w_new) = (where_(old), where_(new));
    // Whether a flow present on switch `b` comes from table `t` (both if unchanged).
    let from = |t: &FlowTables, b: BranchId, f: &FlowEntry| t.switch(b).contains(f);
    for s in &steps {
        for (b, ops) in &s.ops {
            let m = model.entry(*b).or_default();
            for op in ops {
                match op {
                    FlowOp::Add(f) | FlowOp::Modify(f) => {
                        let fs = m.entry(f.cookie).or_default();
                        fs.retain(|g| !same_slot(g, f));
                        fs.push(f.clone());
                    }
                    FlowOp::Delete(c) | FlowOp::Purge(c) => {
                        m.remove(c);
                    }
                    FlowOp::Retire(f) => {
                        let fs = m.get_mut(&f.cookie).expect("retires a flow the switch has");
                        let before = fs.len();
                        fs.retain(|g| !same_slot(g, f));
                        assert_eq!(fs.len() + 1, before, "retires exactly one flow: {f}");
                        if fs.is_empty() {
                            m.remove(&f.cookie);
                        }
                    }
                }
            }
        }
        // Every source entry present anywhere (each version: the old table's, the new one's)
        // has the transit and destination entries of its own table.
        for (b, flows) in &model {
            for (c, versions) in flows {
                let Some(CookieInfo::Swap {
                    code,
                    direction,
                    role: HopRole::Source,
                    ..
                }) = c.decode()
                else {
                    continue;
                };
                for f in versions {
                    for (table, w) in [(old, &w_old), (new, &w_new)] {
                        if !from(table, *b, f) {
                            continue;
                        }
                        for role in [HopRole::Transit, HopRole::Destination] {
                            let need = Cookie::swap(code, direction, role, 0);
                            let Some(at) = w.get(&need) else { continue };
                            let want = table.switch(*at).iter().find(|g| g.cookie == need);
                            assert!(
                                model[at]
                                    .get(&need)
                                    .is_some_and(|fs| want.is_some_and(|w| fs.contains(w))),
                                "after {:?}: source {c} on {b:?} without its {need} on {at:?}",
                                s.phase
                            );
                        }
                    }
                }
            }
        }
    }
    for (b, fs) in new.iter() {
        let have: Vec<&FlowEntry> = model[&b].values().flatten().collect();
        let mut want: Vec<&FlowEntry> = fs.iter().collect();
        want.sort_by_key(|f| f.cookie);
        assert_eq!(have, want, "switch {b:?} ends equal to the new table");
    }
    diffs.len()
}

#[test]
fn update_touches_only_affected_switches_in_order() {
    let inv = paper_inventory();
    let old = compile(&inv, &table2(&inv)).unwrap();
    // Replace group 4 of 1 → 2: members through 3, 4, 5 become through 5 and 3 only.
    let mut groups: Vec<PathGroup> = table2(&inv).groups().cloned().collect();
    let g4 = groups.iter_mut().find(|g| g.id.get() == 4).unwrap();
    *g4 = PathGroup::from_members(
        branch(1),
        branch(2),
        PathGroupId::new(4).unwrap(),
        ["1b>2b", "1a>5a>5b>2a"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect(),
    )
    .unwrap();
    let new = compile(&inv, &PathGroups::new(&inv, groups).unwrap()).unwrap();
    let diffs = update_diffs(&old, &new, (1..=5).map(branch));
    // 1 and 2 (sources/destinations), 3 and 4 lose transits, 5 gets a new one.
    assert_eq!(
        diffs.keys().map(|b| b.get()).collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5]
    );
    assert_eq!(check_never_half_installed(&old, &new), 5);
    // Removing a group that only uses direct paths touches only its two ends.
    let mut groups: Vec<PathGroup> = table2(&inv).groups().cloned().collect();
    let g1 = groups.iter_mut().find(|g| g.id.get() == 1).unwrap();
    *g1 = PathGroup::from_members(
        branch(1),
        branch(2),
        PathGroupId::new(1).unwrap(),
        ["1a>2a", "1b>3b>3a>2a", "1b>4a>4b>2b"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect(),
    )
    .unwrap();
    let new2 = compile(&inv, &PathGroups::new(&inv, groups).unwrap()).unwrap();
    let d = update_diffs(&old, &new2, (1..=5).map(branch));
    assert_eq!(
        d.keys().map(|b| b.get()).collect::<Vec<_>>(),
        vec![1, 2, 5],
        "member 4 of group 1 went through branch 5"
    );
    check_never_half_installed(&old, &new2);
    // From nothing to everything and back.
    let empty = compile(&inv, &PathGroups::default()).unwrap();
    check_never_half_installed(&empty, &old);
    check_never_half_installed(&old, &empty);
    // Unchanged tables: nothing to do.
    assert!(update_diffs(&old, &old, (1..=5).map(branch)).is_empty());
}

#[test]
fn output_in_port_and_actions_map_one_to_one() {
    use controller::ofc::flowmod::to_action;
    assert_eq!(
        to_action(&Action::Output(Output::InPort)),
        OfAction::Output {
            port: ofpp::IN_PORT,
            max_len: 0
        }
    );
    assert_eq!(
        to_action(&Action::SetTcpSrc(0x2114)),
        OfAction::SetField(F::TcpSrc(0x2114, None))
    );
}
