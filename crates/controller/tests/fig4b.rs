//! Golden test: the flow entries of the paper's Fig. 4(b) (seed 000 §III-D).
//!
//! Branch 1 → branch 2 over path group 4, routed as in §III-D (this is the Fig. 3/4 example, not
//! Table II's group 4):
//! - subflow 1: MMSG 1 (port 1) → MMSG 3 (port 1), MMSG 3 (port 1) → MMSG 2 (port 1): `1a>3a>3a>2a`
//! - subflow 2: MMSG 1 (port 2) → MMSG 4 (port 1), MMSG 4 (port 2) → MMSG 2 (port 1): `1b>4a>4b>2a`
//! - subflow 3: MMSG 1 (port 1) → MMSG 5 (port 1), MMSG 5 (port 1) → MMSG 2 (port 2): `1a>5a>5a>2b`
//! - subflow 4: MMSG 1 (port 2) → MMSG 2 (port 2): `1b>2b`
//!
//! The paper's p_i^n (i-th WAN port of branch n, 1-based) is port letter i-1 here; its "WAN port i"
//! is OpenFlow port `wan{i-1}` = i, and "the port connected to the MPA" is `mpa{j-1}` = 100 + j.
// Test helpers outside #[test] functions unwrap too (clippy.toml only covers #[test] bodies).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
mod common;

use std::net::Ipv4Addr;

use common::{branch, p, paper_inventory};
use controller::inventory::MacAddr;
use controller::path_group::{MemberPath, PathCode, PathGroup, PathGroupId, PathGroups};
use controller::swap::{
    apply, compile, Action, Cookie, Direction, FlowEntry, FlowMatch, FlowTables, HopRole, Output,
    Packet,
};

fn fig4_groups(inv: &controller::inventory::Inventory) -> PathGroups {
    let members = ["1a>3a>3a>2a", "1b>4a>4b>2a", "1a>5a>5a>2b", "1b>2b"]
        .iter()
        .map(|s| s.parse::<MemberPath>().unwrap())
        .collect();
    let g = PathGroup::from_members(branch(1), branch(2), PathGroupId::new(4).unwrap(), members)
        .unwrap();
    PathGroups::new(inv, vec![g]).unwrap()
}

fn compiled() -> FlowTables {
    let inv = paper_inventory();
    compile(&inv, &fig4_groups(&inv)).unwrap()
}

fn code(port: u16) -> PathCode {
    PathCode::from_port(port).unwrap()
}

/// A TCP match as in the paper: "Src IP, Dest IP and (Dest) port" plus the ingress port.
fn tcp(
    in_port: u32,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    tcp_src: Option<u16>,
    tcp_dst: Option<u16>,
) -> FlowMatch {
    FlowMatch {
        in_port: Some(in_port),
        eth_type: Some(0x0800),
        ip_proto: Some(6),
        ip_dscp: None,
        ipv4_src: Some(src),
        ipv4_dst: Some(dst),
        tcp_src,
        tcp_dst,
    }
}

fn find(tables: &FlowTables, b: u8, cookie: Cookie) -> FlowEntry {
    let flows: Vec<&FlowEntry> = tables
        .switch(branch(b))
        .iter()
        .filter(|f| f.cookie == cookie)
        .collect();
    assert_eq!(flows.len(), 1, "branch {b}: cookie {cookie}");
    flows[0].clone()
}

fn mac(s: &str) -> MacAddr {
    s.parse().unwrap()
}

#[test]
fn addresses_follow_the_testbed_plan() {
    assert_eq!(p(1, 1), Ipv4Addr::new(198, 18, 10, 2));
    assert_eq!(p(2, 1), Ipv4Addr::new(198, 18, 11, 2));
    assert_eq!(p(1, 3), Ipv4Addr::new(198, 18, 30, 2));
    assert_eq!(p(2, 2), Ipv4Addr::new(198, 18, 21, 2));
}

/// MMSG 1, subflow 1: Match "Src IP = p_1^1, Dest IP = p_1^2, TCP port = 0x2004";
/// Action: Write "Src IP = p_1^1, Dest IP = p_1^3, Dest port = 0x2114", output to WAN port 1.
#[test]
fn mmsg1_subflow1_source() {
    let t = compiled();
    let type_ii = find(
        &t,
        1,
        Cookie::swap(code(0x2114), Direction::Forward, HopRole::Source, 0),
    );
    assert_eq!(
        type_ii,
        FlowEntry {
            table: 0,
            priority: 1100, // two WAN hops
            cookie: Cookie(0x4D4D_0100_2114_1100),
            matches: tcp(101, p(1, 1), p(1, 2), None, Some(0x2004)),
            actions: vec![
                Action::SetIpv4Src(p(1, 1)),
                Action::SetIpv4Dst(p(1, 3)),
                Action::SetTcpDst(0x2114),
                Action::SetIpDscp(10), // Type II, 2 hops (AF11)
                Action::Output(Output::Port(1)),
            ],
        }
    );
    // The Type I sibling: same rewrite, matches the MPA's EF mark, marks AF41.
    let type_i = find(
        &t,
        1,
        Cookie::swap(code(0x2114), Direction::Forward, HopRole::Source, 1),
    );
    let mut m = tcp(101, p(1, 1), p(1, 2), None, Some(0x2004));
    m.ip_dscp = Some(46);
    assert_eq!(
        type_i,
        FlowEntry {
            table: 0,
            priority: 1110,
            cookie: Cookie(0x4D4D_0100_2114_1101),
            matches: m,
            actions: vec![
                Action::SetIpv4Src(p(1, 1)),
                Action::SetIpv4Dst(p(1, 3)),
                Action::SetTcpDst(0x2114),
                Action::SetIpDscp(34),
                Action::Output(Output::Port(1)),
            ],
        }
    );
}

/// MMSG 1, subflow 4 (direct): Match "Src IP = p_2^1, Dest IP = p_2^2, Dest port = 0x2004";
/// Action: Write "Src IP = p_2^1, Dest IP = p_2^2, Dest port = 0x2144", output to WAN port 2.
#[test]
fn mmsg1_subflow4_direct_source() {
    let t = compiled();
    assert_eq!(
        find(
            &t,
            1,
            Cookie::swap(code(0x2144), Direction::Forward, HopRole::Source, 0)
        ),
        FlowEntry {
            table: 0,
            priority: 1200, // one WAN hop
            cookie: Cookie(0x4D4D_0100_2144_1100),
            matches: tcp(102, p(2, 1), p(2, 2), None, Some(0x2004)),
            actions: vec![
                Action::SetIpv4Src(p(2, 1)),
                Action::SetIpv4Dst(p(2, 2)),
                Action::SetTcpDst(0x2144),
                Action::SetIpDscp(18), // Type II, 1 hop (AF21)
                Action::Output(Output::Port(2)),
            ],
        }
    );
}

/// MMSG 3 (transit), subflow 1: Match "Src IP = p_1^1, Dest IP = p_1^3, Dest port = 0x2114";
/// Action: Write "Src IP = p_1^3, Dest IP = p_1^2, Dest port = 0x2114", output to WAN port 1.
/// It arrived on WAN port 1 too, so the output is IN_PORT (hairpin) and the MACs are rewritten
/// for the next hop (router of 3a).
#[test]
fn mmsg3_subflow1_transit_hairpin() {
    let t = compiled();
    assert_eq!(
        find(
            &t,
            3,
            Cookie::swap(code(0x2114), Direction::Forward, HopRole::Transit, 0)
        ),
        FlowEntry {
            table: 0,
            priority: 1100,
            cookie: Cookie(0x4D4D_0100_2114_1200),
            matches: tcp(1, p(1, 1), p(1, 3), None, Some(0x2114)),
            actions: vec![
                Action::SetEthSrc(mac("02:00:c6:12:1e:02")), // mpa0 of branch 3
                Action::SetEthDst(mac("02:00:c6:12:1e:01")), // router 198.18.30.1
                Action::SetIpv4Src(p(1, 3)),
                Action::SetIpv4Dst(p(1, 2)),
                Action::SetTcpDst(0x2114),
                Action::Output(Output::InPort),
            ],
        }
    );
}

/// MMSG 2 (destination), subflow 1: Match "Src IP = p_1^3, Dest IP = p_1^2, Dest port = 0x2114";
/// Action: Write "Src IP = p_1^1, Dest IP = p_1^2, Dest port = 0x2004", output to the MPA port.
#[test]
fn mmsg2_subflow1_destination_restores() {
    let t = compiled();
    assert_eq!(
        find(
            &t,
            2,
            Cookie::swap(code(0x2114), Direction::Forward, HopRole::Destination, 0)
        ),
        FlowEntry {
            table: 0,
            priority: 1100,
            cookie: Cookie(0x4D4D_0100_2114_1300),
            matches: tcp(1, p(1, 3), p(1, 2), None, Some(0x2114)),
            actions: vec![
                Action::SetIpv4Src(p(1, 1)),
                Action::SetIpv4Dst(p(1, 2)),
                Action::SetTcpDst(0x2004),
                Action::Output(Output::Port(101)),
            ],
        }
    );
    // Subflow 4 arrives directly on p_2^2 with 0x2144 and is restored to 0x2004 for mpa1.
    assert_eq!(
        find(
            &t,
            2,
            Cookie::swap(code(0x2144), Direction::Forward, HopRole::Destination, 0)
        ),
        FlowEntry {
            table: 0,
            priority: 1200,
            cookie: Cookie(0x4D4D_0100_2144_1300),
            matches: tcp(2, p(2, 1), p(2, 2), None, Some(0x2144)),
            actions: vec![
                Action::SetIpv4Src(p(2, 1)),
                Action::SetIpv4Dst(p(2, 2)),
                Action::SetTcpDst(0x2004),
                Action::Output(Output::Port(102)),
            ],
        }
    );
}

/// The other two-hop subflows of the figure: 2 (`1b>4a>4b>2a`, code 0x2124) and 3 (`1a>5a>5a>2b`,
/// code 0x2134), at their source and transit.
#[test]
fn subflows_2_and_3() {
    let t = compiled();
    // Subflow 2 leaves MMSG 1 by port 2 towards p_1^4; source pair (p_2^1, p_1^2).
    let s2 = find(
        &t,
        1,
        Cookie::swap(code(0x2124), Direction::Forward, HopRole::Source, 0),
    );
    assert_eq!(s2.matches, tcp(102, p(2, 1), p(1, 2), None, Some(0x2004)));
    assert_eq!(
        s2.actions,
        vec![
            Action::SetIpv4Src(p(2, 1)),
            Action::SetIpv4Dst(p(1, 4)),
            Action::SetTcpDst(0x2124),
            Action::SetIpDscp(10),
            Action::Output(Output::Port(2)),
        ]
    );
    // MMSG 4: in on port 1, out on port 2 (no hairpin), source becomes p_2^4.
    let t2 = find(
        &t,
        4,
        Cookie::swap(code(0x2124), Direction::Forward, HopRole::Transit, 0),
    );
    assert_eq!(t2.matches, tcp(1, p(2, 1), p(1, 4), None, Some(0x2124)));
    assert_eq!(
        t2.actions,
        vec![
            Action::SetEthSrc(mac("02:00:c6:12:29:02")),
            Action::SetEthDst(mac("02:00:c6:12:29:01")),
            Action::SetIpv4Src(p(2, 4)),
            Action::SetIpv4Dst(p(1, 2)),
            Action::SetTcpDst(0x2124),
            Action::Output(Output::Port(2)),
        ]
    );
    // Subflow 3: MMSG 5 hairpins on port 1 towards p_2^2.
    let t3 = find(
        &t,
        5,
        Cookie::swap(code(0x2134), Direction::Forward, HopRole::Transit, 0),
    );
    assert_eq!(t3.matches, tcp(1, p(1, 1), p(1, 5), None, Some(0x2134)));
    assert_eq!(
        t3.actions[2..],
        [
            Action::SetIpv4Src(p(1, 5)),
            Action::SetIpv4Dst(p(2, 2)),
            Action::SetTcpDst(0x2134),
            Action::Output(Output::InPort),
        ]
    );
    let d3 = find(
        &t,
        2,
        Cookie::swap(code(0x2134), Direction::Forward, HopRole::Destination, 0),
    );
    assert_eq!(d3.matches, tcp(2, p(1, 5), p(2, 2), None, Some(0x2134)));
    assert_eq!(
        d3.actions[..3],
        [
            Action::SetIpv4Src(p(1, 1)),
            Action::SetIpv4Dst(p(2, 2)),
            Action::SetTcpDst(0x2004),
        ]
    );
}

/// The reverse of subflow 1 (not in the paper; DESIGN §3.1): B's packets from (p_1^2, 0x2004) to
/// p_1^1 go back through MMSG 3 on tcp_src.
#[test]
fn subflow1_reverse() {
    let t = compiled();
    let c = code(0x2114);
    assert_eq!(
        find(
            &t,
            2,
            Cookie::swap(c, Direction::Reverse, HopRole::Source, 0)
        ),
        FlowEntry {
            table: 0,
            priority: 1100,
            cookie: Cookie(0x4D4D_0100_2114_2100),
            matches: tcp(101, p(1, 2), p(1, 1), Some(0x2004), None),
            actions: vec![
                Action::SetIpv4Src(p(1, 2)),
                Action::SetIpv4Dst(p(1, 3)),
                Action::SetTcpSrc(0x2114),
                Action::SetIpDscp(10),
                Action::Output(Output::Port(1)),
            ],
        }
    );
    assert_eq!(
        find(
            &t,
            3,
            Cookie::swap(c, Direction::Reverse, HopRole::Transit, 0)
        ),
        FlowEntry {
            table: 0,
            priority: 1100,
            cookie: Cookie(0x4D4D_0100_2114_2200),
            matches: tcp(1, p(1, 2), p(1, 3), Some(0x2114), None),
            actions: vec![
                Action::SetEthSrc(mac("02:00:c6:12:1e:02")),
                Action::SetEthDst(mac("02:00:c6:12:1e:01")),
                Action::SetIpv4Src(p(1, 3)),
                Action::SetIpv4Dst(p(1, 1)),
                Action::SetTcpSrc(0x2114),
                Action::Output(Output::InPort),
            ],
        }
    );
    assert_eq!(
        find(
            &t,
            1,
            Cookie::swap(c, Direction::Reverse, HopRole::Destination, 0)
        ),
        FlowEntry {
            table: 0,
            priority: 1100,
            cookie: Cookie(0x4D4D_0100_2114_2300),
            matches: tcp(1, p(1, 3), p(1, 1), Some(0x2114), None),
            actions: vec![
                Action::SetIpv4Src(p(1, 2)),
                Action::SetIpv4Dst(p(1, 1)),
                Action::SetTcpSrc(0x2004),
                Action::Output(Output::Port(101)),
            ],
        }
    );
}

/// The whole table of MMSG 3 in `ovs-ofctl` syntax: the forward and reverse transit entries of
/// subflow 1, then the four patch flows.
#[test]
fn mmsg3_full_table() {
    let t = compiled();
    let got: Vec<String> = t
        .switch(branch(3))
        .iter()
        .map(FlowEntry::to_ofctl)
        .collect();
    let want = [
        "cookie=0x4d4d010021141200,table=0,priority=1100,in_port=1,dl_type=0x0800,nw_proto=6,\
         nw_src=198.18.10.2,nw_dst=198.18.30.2,tcp_dst=0x2114,actions=set_field:02:00:c6:12:1e:02->eth_src,\
         set_field:02:00:c6:12:1e:01->eth_dst,set_field:198.18.30.2->ip_src,set_field:198.18.20.2->ip_dst,\
         set_field:0x2114->tcp_dst,in_port",
        "cookie=0x4d4d010021142200,table=0,priority=1100,in_port=1,dl_type=0x0800,nw_proto=6,\
         nw_src=198.18.20.2,nw_dst=198.18.30.2,tcp_src=0x2114,actions=set_field:02:00:c6:12:1e:02->eth_src,\
         set_field:02:00:c6:12:1e:01->eth_dst,set_field:198.18.30.2->ip_src,set_field:198.18.10.2->ip_dst,\
         set_field:0x2114->tcp_src,in_port",
        "cookie=0x4d4d020000001000,table=0,priority=10,in_port=101,actions=output:1",
        "cookie=0x4d4d020000001001,table=0,priority=10,in_port=102,actions=output:2",
        "cookie=0x4d4d020000002000,table=0,priority=10,in_port=1,actions=output:101",
        "cookie=0x4d4d020000002001,table=0,priority=10,in_port=2,actions=output:102",
    ];
    assert_eq!(got, want);
}

#[test]
fn counts_per_switch() {
    let t = compiled();
    let counts: Vec<(u8, usize)> = t.counts().into_iter().map(|(b, n)| (b.get(), n)).collect();
    // Branch 1: 4 members × (2 forward source + 1 reverse destination) + 4 patch; branch 2 the
    // mirror; each transit branch: forward + reverse transit + 4 patch.
    assert_eq!(counts, vec![(1, 16), (2, 16), (3, 6), (4, 6), (5, 6)]);
}

/// Walk subflow 1 through the three tables: the packet leaves MMSG 1 as (p_1^1, p_1^3, 0x2114),
/// leaves MMSG 3 as (p_1^3, p_1^2, 0x2114) and reaches MPA 2 as (p_1^1, p_1^2, 0x2004).
#[test]
fn walk_subflow1() {
    let t = compiled();
    let start = Packet {
        eth_src: mac("02:00:c6:12:0a:02"),
        eth_dst: mac("02:00:c6:12:0a:01"),
        ipv4_src: p(1, 1),
        ipv4_dst: p(1, 2),
        ip_dscp: 0,
        tcp_src: 40000,
        tcp_dst: 0x2004,
    };
    let (at1, out1, _) = apply(t.switch(branch(1)), 101, start).unwrap();
    assert_eq!(
        (at1.ipv4_src, at1.ipv4_dst, at1.tcp_dst, out1),
        (p(1, 1), p(1, 3), 0x2114, 1)
    );
    let (at3, out3, _) = apply(t.switch(branch(3)), 1, at1).unwrap();
    assert_eq!(
        (at3.ipv4_src, at3.ipv4_dst, at3.tcp_dst, out3),
        (p(1, 3), p(1, 2), 0x2114, 1)
    );
    let (at2, out2, _) = apply(t.switch(branch(2)), 1, at3).unwrap();
    assert_eq!(
        (at2.ipv4_src, at2.ipv4_dst, at2.tcp_dst, out2),
        (p(1, 1), p(1, 2), 0x2004, 101)
    );
    assert_eq!(at2.tcp_src, 40000);
    assert_eq!(at2.ip_dscp, 10);
}
