//! The one place where the flow IR ([`crate::swap`]) meets OpenFlow 1.3 messages ([`ofproto`]).
//!
//! - [`flow_mod`]: a [`FlowEntry`] → OFPT_FLOW_MOD (ADD or MODIFY_STRICT): table 0, its priority
//!   and cookie, no timeouts, the match fields in `ofproto`'s canonical order (IN_PORT, ETH_TYPE,
//!   IP_DSCP, IP_PROTO, IPV4_SRC, IPV4_DST, TCP_SRC, TCP_DST), one APPLY_ACTIONS instruction with
//!   set-field actions and OUTPUT (`IN_PORT` is `OFPP_IN_PORT`).
//! - [`delete_cookie`]: OFPFC_DELETE of every flow carrying one cookie (all tables, cookie mask
//!   all ones): how stale flows go.
//! - [`from_flow_stats`]: what a switch reports (multipart FLOW) → the IR, so the reconcile diff
//!   compares like with like; anything the IR cannot express is `None` (and gets replaced).
//! - [`dump_request`]: the multipart FLOW request for every flow this controller owns
//!   (cookie & [`Cookie::TAG_MASK`] == [`Cookie::TAG`]).
use ofproto::message::{FlowMod, FlowModCommand, OFPTT_ALL};
use ofproto::multipart::{FlowStats, FlowStatsRequest, MultipartRequest, MultipartRequestBody};
use ofproto::oxm::MacAddr as OfMac;
use ofproto::port::ofpp;
use ofproto::{Action as OfAction, Body, Instruction, Match, OxmField as F};

use crate::inventory::MacAddr;
use crate::swap::{Action, Cookie, FlowEntry, FlowMatch, Output};

/// `max_len` of OUTPUT actions: only meaningful towards the controller, which we never use.
const OUTPUT_MAX_LEN: u16 = 0;

fn of_mac(m: MacAddr) -> OfMac {
    OfMac(m.0)
}

/// The OXM match of `m`, fields in canonical order (the [`Match`] keeps them sorted).
pub fn to_match(m: &FlowMatch) -> Match {
    let mut out = Match::new();
    if let Some(p) = m.in_port {
        out.insert(F::InPort(p, None));
    }
    if let Some(t) = m.eth_type {
        out.insert(F::EthType(t, None));
    }
    if let Some(p) = m.ip_proto {
        out.insert(F::IpProto(p, None));
    }
    if let Some(d) = m.ip_dscp {
        out.insert(F::IpDscp(d, None));
    }
    if let Some(a) = m.ipv4_src {
        out.insert(F::Ipv4Src(a, None));
    }
    if let Some(a) = m.ipv4_dst {
        out.insert(F::Ipv4Dst(a, None));
    }
    if let Some(p) = m.tcp_src {
        out.insert(F::TcpSrc(p, None));
    }
    if let Some(p) = m.tcp_dst {
        out.insert(F::TcpDst(p, None));
    }
    out
}

/// The OpenFlow action of one IR action.
pub fn to_action(a: &Action) -> OfAction {
    match *a {
        Action::SetEthSrc(v) => OfAction::SetField(F::EthSrc(of_mac(v), None)),
        Action::SetEthDst(v) => OfAction::SetField(F::EthDst(of_mac(v), None)),
        Action::SetIpv4Src(v) => OfAction::SetField(F::Ipv4Src(v, None)),
        Action::SetIpv4Dst(v) => OfAction::SetField(F::Ipv4Dst(v, None)),
        Action::SetTcpSrc(v) => OfAction::SetField(F::TcpSrc(v, None)),
        Action::SetTcpDst(v) => OfAction::SetField(F::TcpDst(v, None)),
        Action::SetIpDscp(v) => OfAction::SetField(F::IpDscp(v, None)),
        Action::Output(Output::Port(p)) => OfAction::Output {
            port: p,
            max_len: OUTPUT_MAX_LEN,
        },
        Action::Output(Output::InPort) => OfAction::Output {
            port: ofpp::IN_PORT,
            max_len: OUTPUT_MAX_LEN,
        },
    }
}

/// The FLOW_MOD that installs `f` (`command` ADD) or replaces its actions (MODIFY_STRICT: same
/// table, priority and match).
pub fn flow_mod(f: &FlowEntry, command: FlowModCommand) -> FlowMod {
    FlowMod {
        cookie: f.cookie.0,
        cookie_mask: 0,
        table_id: f.table,
        command,
        idle_timeout: 0,
        hard_timeout: 0,
        priority: f.priority,
        match_: to_match(&f.matches),
        instructions: vec![Instruction::ApplyActions(
            f.actions.iter().map(to_action).collect(),
        )],
        ..FlowMod::default()
    }
}

/// OFPFC_DELETE of every flow with exactly `cookie`, in every table.
pub fn delete_cookie(cookie: Cookie) -> FlowMod {
    FlowMod {
        cookie: cookie.0,
        cookie_mask: u64::MAX,
        table_id: OFPTT_ALL,
        command: FlowModCommand::Delete,
        priority: 0,
        ..FlowMod::default()
    }
}

/// OFPFC_DELETE_STRICT of exactly `f` (its table, priority and match, and its cookie).
pub fn delete_strict(f: &FlowEntry) -> FlowMod {
    FlowMod {
        cookie: f.cookie.0,
        cookie_mask: u64::MAX,
        table_id: f.table,
        command: FlowModCommand::DeleteStrict,
        priority: f.priority,
        match_: to_match(&f.matches),
        ..FlowMod::default()
    }
}

/// The multipart FLOW request for every flow this controller owns (our cookie tag).
pub fn dump_request() -> Body {
    Body::MultipartRequest(MultipartRequest::new(MultipartRequestBody::Flow(
        FlowStatsRequest {
            cookie: Cookie::TAG,
            cookie_mask: Cookie::TAG_MASK,
            ..FlowStatsRequest::default()
        },
    )))
}

fn from_match(m: &Match) -> Option<FlowMatch> {
    let mut out = FlowMatch::default();
    for f in m.fields() {
        match *f {
            F::InPort(p, None) => out.in_port = Some(p),
            F::EthType(t, None) => out.eth_type = Some(t),
            F::IpProto(p, None) => out.ip_proto = Some(p),
            F::IpDscp(d, None) => out.ip_dscp = Some(d),
            F::Ipv4Src(a, None) => out.ipv4_src = Some(a),
            F::Ipv4Dst(a, None) => out.ipv4_dst = Some(a),
            F::TcpSrc(p, None) => out.tcp_src = Some(p),
            F::TcpDst(p, None) => out.tcp_dst = Some(p),
            _ => return None,
        }
    }
    Some(out)
}

fn from_action(a: &OfAction) -> Option<Action> {
    Some(match a {
        OfAction::SetField(F::EthSrc(v, None)) => Action::SetEthSrc(MacAddr(v.0)),
        OfAction::SetField(F::EthDst(v, None)) => Action::SetEthDst(MacAddr(v.0)),
        OfAction::SetField(F::Ipv4Src(v, None)) => Action::SetIpv4Src(*v),
        OfAction::SetField(F::Ipv4Dst(v, None)) => Action::SetIpv4Dst(*v),
        OfAction::SetField(F::TcpSrc(v, None)) => Action::SetTcpSrc(*v),
        OfAction::SetField(F::TcpDst(v, None)) => Action::SetTcpDst(*v),
        OfAction::SetField(F::IpDscp(v, None)) => Action::SetIpDscp(*v),
        OfAction::Output { port, .. } if *port == ofpp::IN_PORT => Action::Output(Output::InPort),
        OfAction::Output { port, .. } if *port <= ofpp::MAX => Action::Output(Output::Port(*port)),
        _ => return None,
    })
}

/// A flow as a switch reports it, in the IR; `None` when it uses anything the IR cannot express
/// (other match fields, masks, timeouts, instructions other than one APPLY_ACTIONS, ...).
pub fn from_flow_stats(s: &FlowStats) -> Option<FlowEntry> {
    if s.idle_timeout != 0 || s.hard_timeout != 0 {
        return None;
    }
    let actions = match s.instructions.as_slice() {
        [] => Vec::new(),
        [Instruction::ApplyActions(actions)] => actions
            .iter()
            .map(from_action)
            .collect::<Option<Vec<_>>>()?,
        _ => return None,
    };
    Some(FlowEntry {
        table: s.table_id,
        priority: s.priority,
        cookie: Cookie(s.cookie),
        matches: from_match(&s.match_)?,
        actions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn stats_of(fm: &FlowMod) -> FlowStats {
        FlowStats {
            table_id: fm.table_id,
            duration_sec: 1,
            duration_nsec: 0,
            priority: fm.priority,
            idle_timeout: fm.idle_timeout,
            hard_timeout: fm.hard_timeout,
            flags: 0,
            cookie: fm.cookie,
            packet_count: 3,
            byte_count: 300,
            match_: fm.match_.clone(),
            instructions: fm.instructions.clone(),
        }
    }

    #[test]
    fn unrepresentable_flows_are_none() {
        let f = FlowEntry {
            table: 0,
            priority: 10,
            cookie: Cookie(Cookie::TAG | 1),
            matches: FlowMatch {
                in_port: Some(1),
                ..FlowMatch::default()
            },
            actions: vec![Action::Output(Output::Port(101))],
        };
        let fm = flow_mod(&f, FlowModCommand::Add);
        assert_eq!(from_flow_stats(&stats_of(&fm)), Some(f.clone()));
        let mut s = stats_of(&fm);
        s.idle_timeout = 5;
        assert_eq!(from_flow_stats(&s), None);
        let mut s = stats_of(&fm);
        s.match_.insert(F::Ipv4Src(
            Ipv4Addr::new(198, 18, 0, 0),
            Some(Ipv4Addr::new(255, 255, 0, 0)),
        ));
        assert_eq!(from_flow_stats(&s), None, "masks are not ours");
        let mut s = stats_of(&fm);
        s.instructions.push(Instruction::GotoTable(1));
        assert_eq!(from_flow_stats(&s), None);
        let mut s = stats_of(&fm);
        s.instructions = vec![Instruction::ApplyActions(vec![OfAction::Output {
            port: ofpp::CONTROLLER,
            max_len: 0xffff,
        }])];
        assert_eq!(from_flow_stats(&s), None);
        let mut s = stats_of(&fm);
        s.instructions.clear();
        let dropped = from_flow_stats(&s).unwrap();
        assert!(dropped.actions.is_empty());
    }

    #[test]
    fn delete_and_dump_select_by_cookie() {
        let d = delete_cookie(Cookie(0x4D4D_0100_2114_1100));
        assert_eq!(d.command, FlowModCommand::Delete);
        assert_eq!((d.cookie, d.cookie_mask), (0x4D4D_0100_2114_1100, u64::MAX));
        assert_eq!(d.table_id, OFPTT_ALL);
        assert!(d.match_.is_empty());
        assert_eq!(d.out_port, ofpp::ANY);
        let Body::MultipartRequest(r) = dump_request() else {
            panic!("not a multipart request")
        };
        let MultipartRequestBody::Flow(f) = r.body else {
            panic!("not a flow request")
        };
        assert_eq!((f.cookie, f.cookie_mask), (Cookie::TAG, Cookie::TAG_MASK));
        assert_eq!(f.table_id, OFPTT_ALL);
    }
}
