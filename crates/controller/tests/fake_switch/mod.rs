//! A fake OpenFlow switch for tests that run a real `ssc` without OVS: an `ofproto` channel on
//! the switch side of a unix socket, with a flow table it really edits (ADD, MODIFY_STRICT,
//! DELETE by cookie mask) and answers to FLOW and PORT_STATS multipart requests from it, so the
//! SDC sees the counters the test writes into the table (see `count_member_traffic`).
//! (The same idea as the switch in `ofc_server.rs`, without its logging of every message.)
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use controller::swap::{Cookie, CookieInfo, Direction, HopRole};
use ofproto::channel::{Channel, Config, Event};
use ofproto::message::{FlowModCommand, SwitchFeatures};
use ofproto::multipart::{FlowStats, MultipartReply, MultipartReplyBody, MultipartRequestBody};
use ofproto::{Body, Message};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// The switch's flow table.
pub type Table = Arc<Mutex<Vec<FlowStats>>>;

fn stats_of(fm: &ofproto::message::FlowMod) -> FlowStats {
    FlowStats {
        table_id: fm.table_id,
        duration_sec: 0,
        duration_nsec: 0,
        priority: fm.priority,
        idle_timeout: fm.idle_timeout,
        hard_timeout: fm.hard_timeout,
        flags: fm.flags,
        cookie: fm.cookie,
        packet_count: 0,
        byte_count: 0,
        match_: fm.match_.clone(),
        instructions: fm.instructions.clone(),
    }
}

fn apply(flows: &mut Vec<FlowStats>, fm: &ofproto::message::FlowMod) {
    match fm.command {
        FlowModCommand::Add => {
            flows.retain(|f| !(f.priority == fm.priority && f.match_ == fm.match_));
            flows.push(stats_of(fm));
        }
        FlowModCommand::ModifyStrict => {
            for f in flows.iter_mut() {
                if f.priority == fm.priority && f.match_ == fm.match_ {
                    f.instructions = fm.instructions.clone();
                }
            }
        }
        FlowModCommand::Delete => {
            flows.retain(|f| f.cookie & fm.cookie_mask != fm.cookie & fm.cookie_mask);
        }
        other => panic!("unexpected {other:?}"),
    }
}

/// Connects a switch with datapath id `dpid` to the controller's unix socket `path`; the task
/// ends when the controller closes the connection.
pub async fn connect(path: &Path, dpid: u64) -> (Table, tokio::task::JoinHandle<()>) {
    let mut sock = UnixStream::connect(path).await.unwrap();
    let table = Table::default();
    let t = Arc::clone(&table);
    let task = tokio::spawn(async move {
        let mut ch = Channel::new(Instant::now(), Config::default());
        let mut buf = vec![0u8; 65536];
        let mut out = Vec::new();
        loop {
            if ch.poll_transmit(&mut out) {
                if sock.write_all(&out).await.is_err() {
                    break;
                }
                out.clear();
            }
            let n = match tokio::time::timeout(Duration::from_millis(50), sock.read(&mut buf)).await
            {
                Ok(Ok(0) | Err(_)) => break,
                Ok(Ok(n)) => n,
                Err(_) => {
                    ch.handle_timeout(Instant::now());
                    continue;
                }
            };
            ch.handle_input(Instant::now(), &buf[..n]);
            while let Some(ev) = ch.poll_event() {
                let Event::Message(Message { xid, body }) = ev else {
                    continue;
                };
                let reply = |body| Body::MultipartReply(MultipartReply { flags: 0, body });
                let answer = match body {
                    Body::FeaturesRequest => Some(Body::FeaturesReply(SwitchFeatures {
                        datapath_id: dpid,
                        n_tables: 254,
                        ..SwitchFeatures::default()
                    })),
                    Body::MultipartRequest(r) => match r.body {
                        MultipartRequestBody::Flow(req) => {
                            let flows = t
                                .lock()
                                .unwrap()
                                .iter()
                                .filter(|f| f.cookie & req.cookie_mask == req.cookie)
                                .cloned()
                                .collect();
                            Some(reply(MultipartReplyBody::Flow(flows)))
                        }
                        MultipartRequestBody::PortStats(_) => {
                            Some(reply(MultipartReplyBody::PortStats(Vec::new())))
                        }
                        MultipartRequestBody::PortDesc => {
                            Some(reply(MultipartReplyBody::PortDesc(Vec::new())))
                        }
                        _ => None,
                    },
                    Body::FlowMod(fm) => {
                        apply(&mut t.lock().unwrap(), &fm);
                        None
                    }
                    Body::BarrierRequest => Some(Body::BarrierReply),
                    _ => None,
                };
                if let Some(b) = answer {
                    ch.send_with_xid(xid, b).unwrap();
                }
            }
        }
    });
    (table, task)
}

/// Every 10 ms, adds traffic to the source entries of every member path in `table`: forward
/// `(20 + 4·S + G)` kB per tick (≈ 19–26 Mbit/s, distinct per member), reverse a twentieth.
pub fn count_member_traffic(table: Table) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            for f in table.lock().unwrap().iter_mut() {
                if let Some(CookieInfo::Swap {
                    code,
                    direction,
                    role: HopRole::Source,
                    ..
                }) = Cookie(f.cookie).decode()
                {
                    let fwd = 1_000
                        * (20 + 4 * u64::from(code.member.get()) + u64::from(code.group.get()));
                    let add = match direction {
                        Direction::Forward => fwd,
                        Direction::Reverse => fwd / 20,
                    };
                    f.byte_count += add;
                    f.packet_count += add / 1_400 + 1;
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
}
