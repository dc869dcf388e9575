//! The OpenFlow channel as a sans-IO state machine (OpenFlow 1.3.5 §6.3).
//!
//! One [`Channel`] per connection, controller or switch side alike. It owns no socket and reads no
//! clock: the driver feeds received bytes with [`Channel::handle_input`], the current time with
//! [`Channel::handle_timeout`], takes bytes to send with [`Channel::poll_transmit`] and results with
//! [`Channel::poll_event`], and sleeps until [`Channel::poll_timeout`].
//!
//! ```text
//!   driver                        Channel
//!   ──────                        ───────
//!   new(now)           ───────►   queues HELLO (version bitmap {1.3})
//!   bytes from socket  ──handle_input(now, &[u8])──►  frames, decodes, answers ECHO / errors
//!   timer fired        ──handle_timeout(now)──────►   echo keepalive, dead-peer detection
//!   send(now, Body)    ───────►   allocates xid, remembers what reply (or barrier) settles it
//!   poll_transmit(&mut buf)  ◄──  bytes for the socket
//!   poll_event()             ◄──  Connected / Reply / RequestFailed / Barrier / Message / Closed
//!   poll_timeout()           ◄──  next instant handle_timeout must run
//! ```
//!
//! What it does for the caller:
//! - HELLO and version negotiation (§6.3.1): the version bitmap when the peer sends one, else the
//!   lower header version; no common version → OFPT_ERROR HELLO_FAILED/INCOMPATIBLE and close.
//! - xid allocation (never 0, never one still outstanding) and reply correlation; multipart
//!   replies are reassembled across OFPMPF_REPLY_MORE (bounded by
//!   [`Config::max_reply_bytes`]) and delivered once.
//! - Requests without a reply (FLOW_MOD, GROUP_MOD, PACKET_OUT, ...) stay "unconfirmed" until a
//!   later BARRIER reply confirms them ([`Event::Barrier`]); an OFPT_ERROR for one of them is
//!   delivered to it ([`Event::RequestFailed`]).
//! - Echo keepalive: after [`Config::echo_interval`] of silence an ECHO_REQUEST goes out; after
//!   [`Config::dead_timeout`] of silence the peer is dead ([`CloseReason::PeerDead`]).
//! - Answers ECHO_REQUEST, and answers with OFPT_ERROR where the spec requires it: undecodable
//!   messages (BAD_LEN, BAD_MATCH, ...), wrong version (BAD_VERSION), unknown message type
//!   (BAD_TYPE), unknown multipart type in a request (BAD_MULTIPART). The error carries the first
//!   64 bytes of the offending message (§7.4.4).

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use crate::error::{DecodeError, EncodeError};
use crate::message::{frame_len, Body, Header, Hello, Message, MessageType, OFP_VERSION_1_3};
use crate::multipart::{MultipartReply, MultipartReplyBody, MultipartRequestBody};
use crate::ofp_error::{BadRequestCode, ErrorCode, ErrorMsg, HelloFailedCode};

/// Bytes of the offending message copied into an OFPT_ERROR (§7.4.4: "at least 64 bytes").
pub const ERROR_DATA_LEN: usize = 64;

/// Tunables of a [`Channel`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Silence after which an ECHO_REQUEST is sent.
    pub echo_interval: Duration,
    /// Silence after which the peer is declared dead (should exceed `echo_interval` plus an RTT).
    pub dead_timeout: Duration,
    /// Time allowed for the peer's HELLO.
    pub hello_timeout: Duration,
    /// Requests without replies remembered until a barrier; beyond this the oldest is forgotten
    /// (a later error for it is then delivered as an unsolicited [`Event::Message`]).
    /// Worst case memory: this many map entries (~64 bytes each).
    pub max_unconfirmed: usize,
    /// Bound on the encoded size of one reassembled multipart reply (a 10,000-flow table with
    /// swap flows is ~1.6 MB).
    pub max_reply_bytes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            echo_interval: Duration::from_secs(5),
            dead_timeout: Duration::from_secs(15),
            hello_timeout: Duration::from_secs(10),
            max_unconfirmed: 65_536,
            max_reply_bytes: 64 << 20,
        }
    }
}

/// Why the channel closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseReason {
    /// No common version; we sent HELLO_FAILED/INCOMPATIBLE.
    Incompatible {
        /// The peer's HELLO header version.
        peer_version: u8,
    },
    /// The peer's HELLO was not decodable.
    BadHello(DecodeError),
    /// The peer's first message was not a HELLO (§6.3.1).
    NoHello(MessageType),
    /// The peer sent HELLO_FAILED (or another error before HELLO).
    PeerRejected(ErrorMsg),
    /// Nothing received for [`Config::dead_timeout`] (or no HELLO within
    /// [`Config::hello_timeout`]).
    PeerDead,
    /// The byte stream cannot be framed (a length below 8): the connection is unusable.
    Framing(DecodeError),
    /// [`Channel::close_local`] was called.
    Local,
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// The peer answered with OFPT_ERROR.
    Peer(ErrorMsg),
    /// The reassembled multipart reply exceeded [`Config::max_reply_bytes`].
    ReplyTooLarge,
    /// The peer answered with a message of the wrong type.
    UnexpectedReply(MessageType),
}

/// What the channel reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// HELLO exchange done; `version` is the negotiated version (always 0x04 here).
    Connected {
        /// Negotiated version.
        version: u8,
    },
    /// The reply to a request sent with [`Channel::send`]. Multipart replies arrive once, with all
    /// parts merged and `flags` 0.
    Reply {
        /// The request's xid.
        xid: u32,
        /// The request's type.
        request: MessageType,
        /// The reply.
        reply: Body,
    },
    /// A request failed; for FLOW_MOD and other reply-less requests this is the only outcome
    /// besides confirmation by a barrier.
    RequestFailed {
        /// The request's xid.
        xid: u32,
        /// The request's type.
        request: MessageType,
        /// Why.
        error: RequestError,
    },
    /// A BARRIER_REPLY: every reply-less request sent before the barrier that did not fail is
    /// now known to be processed.
    Barrier {
        /// The barrier's xid.
        xid: u32,
        /// xids of the reply-less requests it confirmed, in send order.
        confirmed: Vec<u32>,
    },
    /// A message that answers no request of ours (PACKET_IN, FLOW_REMOVED, PORT_STATUS, an
    /// unsolicited error, or a request from the peer).
    Message(Message),
    /// The channel closed; nothing more will happen.
    Closed(CloseReason),
}

/// Why [`Channel::send`] refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The channel is closed.
    #[error("channel closed")]
    Closed,
    /// The message cannot be encoded (misuse).
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

/// Connection state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Our HELLO is queued; waiting for the peer's.
    AwaitingHello,
    /// Negotiated.
    Connected,
    /// Closed.
    Closed,
}

#[derive(Debug)]
enum Kind {
    /// Waits for a reply of type `expected`; multipart parts accumulate in `parts`.
    Reply {
        expected: MessageType,
        parts: Option<MultipartReplyBody>,
        bytes: usize,
    },
    /// No reply; settled by a barrier or an error.
    Unconfirmed,
}

#[derive(Debug)]
struct Pending {
    request: MessageType,
    seq: u64,
    kind: Kind,
}

/// One OpenFlow connection's protocol state.
#[derive(Debug)]
pub struct Channel {
    config: Config,
    state: State,
    version: u8,
    next_xid: u32,
    seq: u64,
    pending: BTreeMap<u32, Pending>,
    /// Reply-less requests in send order: (xid, seq).
    unconfirmed: VecDeque<(u32, u64)>,
    rx: Vec<u8>,
    tx: Vec<u8>,
    events: VecDeque<Event>,
    last_rx: Instant,
    hello_deadline: Option<Instant>,
    /// Our keepalive ECHO_REQUEST in flight: xid and when it was sent.
    echo: Option<(u32, Instant)>,
}

/// The reply type a request expects, or `None` for reply-less requests.
fn expected_reply(t: MessageType) -> Option<MessageType> {
    Some(match t {
        MessageType::EchoRequest => MessageType::EchoReply,
        MessageType::FeaturesRequest => MessageType::FeaturesReply,
        MessageType::GetConfigRequest => MessageType::GetConfigReply,
        MessageType::MultipartRequest => MessageType::MultipartReply,
        MessageType::BarrierRequest => MessageType::BarrierReply,
        MessageType::QueueGetConfigRequest => MessageType::QueueGetConfigReply,
        MessageType::RoleRequest => MessageType::RoleReply,
        MessageType::GetAsyncRequest => MessageType::GetAsyncReply,
        _ => return None,
    })
}

/// Whether the message is a controller-to-switch command the peer acts on without replying.
fn is_command(t: MessageType) -> bool {
    matches!(
        t,
        MessageType::FlowMod
            | MessageType::GroupMod
            | MessageType::PortMod
            | MessageType::TableMod
            | MessageType::MeterMod
            | MessageType::PacketOut
            | MessageType::SetConfig
            | MessageType::SetAsync
            | MessageType::Experimenter
    )
}

impl Channel {
    /// A channel that has just connected at `now`; its HELLO is queued for transmission.
    pub fn new(now: Instant, config: Config) -> Self {
        let mut c = Channel {
            config,
            state: State::AwaitingHello,
            version: OFP_VERSION_1_3,
            next_xid: 1,
            seq: 0,
            pending: BTreeMap::new(),
            unconfirmed: VecDeque::new(),
            rx: Vec::new(),
            tx: Vec::new(),
            events: VecDeque::new(),
            last_rx: now,
            hello_deadline: now.checked_add(config.hello_timeout),
            echo: None,
        };
        let xid = c.alloc_xid();
        c.queue(&Message::new(xid, Body::Hello(Hello::v1_3())));
        c
    }

    /// Current state.
    pub fn state(&self) -> State {
        self.state
    }

    /// Requests still waiting for a reply, an error or a barrier.
    pub fn outstanding(&self) -> usize {
        self.pending.len()
    }

    fn alloc_xid(&mut self) -> u32 {
        loop {
            let x = self.next_xid;
            self.next_xid = self.next_xid.wrapping_add(1);
            if x != 0 && !self.pending.contains_key(&x) && self.echo.map(|e| e.0) != Some(x) {
                return x;
            }
        }
    }

    fn queue(&mut self, m: &Message) {
        // Only messages built here (HELLO, ECHO, ERROR with data ≤ 64 bytes) take this path;
        // they always fit in 64 KiB, so encoding cannot fail.
        let _ = m.encode(&mut self.tx);
    }

    fn send_error(&mut self, xid: u32, code: ErrorCode, offending: &[u8]) {
        let data = offending
            .get(..ERROR_DATA_LEN)
            .unwrap_or(offending)
            .to_vec();
        self.queue(&Message::new(xid, Body::Error(ErrorMsg { code, data })));
    }

    fn close(&mut self, reason: CloseReason) {
        if self.state != State::Closed {
            self.state = State::Closed;
            self.pending.clear();
            self.unconfirmed.clear();
            self.rx.clear();
            self.events.push_back(Event::Closed(reason));
        }
    }

    /// Closes the channel locally (bytes already queued, such as an error, may still be sent).
    pub fn close_local(&mut self) {
        self.close(CloseReason::Local);
    }

    /// Sends `body` with a fresh xid and tracks it: a request with a reply is settled by
    /// [`Event::Reply`] or [`Event::RequestFailed`]; a command (FLOW_MOD, ...) by a later
    /// [`Event::Barrier`] or [`Event::RequestFailed`]. Other messages are sent untracked.
    pub fn send(&mut self, _now: Instant, body: Body) -> Result<u32, SendError> {
        if self.state == State::Closed {
            return Err(SendError::Closed);
        }
        let xid = self.alloc_xid();
        let t = body.message_type();
        Message::new(xid, body).encode(&mut self.tx)?;
        self.seq += 1;
        let seq = self.seq;
        if let Some(expected) = expected_reply(t) {
            self.pending.insert(
                xid,
                Pending {
                    request: t,
                    seq,
                    kind: Kind::Reply {
                        expected,
                        parts: None,
                        bytes: 0,
                    },
                },
            );
        } else if is_command(t) {
            self.pending.insert(
                xid,
                Pending {
                    request: t,
                    seq,
                    kind: Kind::Unconfirmed,
                },
            );
            self.unconfirmed.push_back((xid, seq));
            while self.unconfirmed.len() > self.config.max_unconfirmed {
                if let Some((old, s)) = self.unconfirmed.pop_front() {
                    if self.pending.get(&old).is_some_and(|p| p.seq == s) {
                        self.pending.remove(&old);
                    }
                }
            }
        }
        Ok(xid)
    }

    /// Sends a message with a caller-chosen xid, untracked (e.g. a switch answering a request).
    pub fn send_with_xid(&mut self, xid: u32, body: Body) -> Result<(), SendError> {
        if self.state == State::Closed {
            return Err(SendError::Closed);
        }
        Message::new(xid, body).encode(&mut self.tx)?;
        Ok(())
    }

    /// Appends the bytes to transmit to `out`; returns whether there were any.
    pub fn poll_transmit(&mut self, out: &mut Vec<u8>) -> bool {
        if self.tx.is_empty() {
            return false;
        }
        out.append(&mut self.tx);
        true
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`Channel::handle_timeout`] must next run (`None` once closed).
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Closed => None,
            State::AwaitingHello => self.hello_deadline,
            State::Connected => {
                let dead = self.last_rx.checked_add(self.config.dead_timeout);
                let echo = self
                    .last_rx
                    .checked_add(self.config.echo_interval)
                    .filter(|_| self.echo_due());
                match (dead, echo) {
                    (Some(d), Some(e)) => Some(d.min(e)),
                    (d, e) => d.or(e),
                }
            }
        }
    }

    /// Whether a keepalive echo may be sent: none in flight, or the peer spoke since the last
    /// one (it is alive, just not answering that echo yet).
    fn echo_due(&self) -> bool {
        self.echo.is_none_or(|(_, sent)| sent < self.last_rx)
    }

    /// Advances timers to `now`: sends the keepalive echo, detects a dead peer.
    pub fn handle_timeout(&mut self, now: Instant) {
        match self.state {
            State::Closed => {}
            State::AwaitingHello => {
                if self.hello_deadline.is_some_and(|d| now >= d) {
                    self.close(CloseReason::PeerDead);
                }
            }
            State::Connected => {
                // A timer whose deadline overflows `Instant` never fires.
                let reached = |d: Duration| self.last_rx.checked_add(d).is_some_and(|t| now >= t);
                if reached(self.config.dead_timeout) {
                    self.close(CloseReason::PeerDead);
                } else if self.echo_due() && reached(self.config.echo_interval) {
                    let xid = self.alloc_xid();
                    self.echo = Some((xid, now));
                    self.queue(&Message::new(xid, Body::EchoRequest(Vec::new())));
                }
            }
        }
    }

    /// Feeds bytes received from the peer at `now`.
    pub fn handle_input(&mut self, now: Instant, data: &[u8]) {
        if self.state == State::Closed {
            return;
        }
        if !data.is_empty() {
            self.last_rx = now;
        }
        self.rx.extend_from_slice(data);
        // Take the buffer so frames can be borrowed from it while `self` is mutated.
        let rx = std::mem::take(&mut self.rx);
        let mut off = 0;
        while self.state != State::Closed {
            let buf = rx.get(off..).unwrap_or_default();
            let len = match frame_len(buf) {
                Ok(Some(len)) if len <= buf.len() => len,
                Ok(_) => break,
                Err(e) => {
                    self.close(CloseReason::Framing(e));
                    return;
                }
            };
            off += len;
            self.handle_frame(buf.get(..len).unwrap_or_default());
        }
        if self.state != State::Closed {
            // At most one partial frame (< 64 KiB) stays buffered.
            self.rx = rx;
            self.rx.drain(..off.min(self.rx.len()));
        }
    }

    fn handle_frame(&mut self, frame: &[u8]) {
        let Some(h) = Header::peek(frame) else {
            return;
        };
        if self.state == State::AwaitingHello {
            self.handle_first(frame, h);
            return;
        }
        if h.version != self.version {
            self.send_error(
                h.xid,
                ErrorCode::BadRequest(BadRequestCode::BadVersion),
                frame,
            );
            return;
        }
        let m = match Message::decode_exact(frame) {
            Ok(m) => m,
            Err(e) => {
                // A reply we cannot decode still settles its request.
                if let Some(p) = self.pending.get(&h.xid) {
                    if matches!(p.kind, Kind::Reply { expected, .. } if expected == h.typ) {
                        let request = p.request;
                        self.pending.remove(&h.xid);
                        self.events.push_back(Event::RequestFailed {
                            xid: h.xid,
                            request,
                            error: RequestError::UnexpectedReply(h.typ),
                        });
                    }
                }
                self.send_error(h.xid, e.to_ofp_error(), frame);
                return;
            }
        };
        self.dispatch(m, frame);
    }

    fn handle_first(&mut self, frame: &[u8], h: Header) {
        if h.typ == MessageType::Error {
            if let Ok(Message {
                body: Body::Error(e),
                ..
            }) = Message::decode_exact(frame)
            {
                self.close(CloseReason::PeerRejected(e));
                return;
            }
        }
        let hello = match Message::decode_exact(frame) {
            Ok(Message {
                body: Body::Hello(hello),
                ..
            }) => hello,
            Ok(_) => {
                // The first message must be HELLO (§6.3.1).
                self.send_error(h.xid, ErrorCode::HelloFailed(HelloFailedCode::Eperm), frame);
                self.close(CloseReason::NoHello(h.typ));
                return;
            }
            Err(e) => {
                self.send_error(h.xid, ErrorCode::HelloFailed(HelloFailedCode::Eperm), frame);
                self.close(CloseReason::BadHello(e));
                return;
            }
        };
        let ok = match hello.bitmap_versions() {
            Some(vs) => vs.contains(&OFP_VERSION_1_3),
            None => hello.version >= OFP_VERSION_1_3,
        };
        if !ok {
            let text = format!(
                "we support only OpenFlow 1.3 (0x04); peer offered version {:#04x}",
                hello.version
            );
            self.queue(&Message::new(
                h.xid,
                Body::Error(ErrorMsg {
                    code: ErrorCode::HelloFailed(HelloFailedCode::Incompatible),
                    data: text.into_bytes(),
                }),
            ));
            self.close(CloseReason::Incompatible {
                peer_version: hello.version,
            });
            return;
        }
        self.state = State::Connected;
        self.hello_deadline = None;
        self.events.push_back(Event::Connected {
            version: self.version,
        });
    }

    fn dispatch(&mut self, m: Message, frame: &[u8]) {
        let xid = m.xid;
        match m.body {
            Body::EchoRequest(data) => {
                self.queue(&Message::new(xid, Body::EchoReply(data)));
            }
            Body::EchoReply(_) if self.echo.map(|e| e.0) == Some(xid) => {
                self.echo = None;
            }
            Body::Hello(_) => {
                // A second HELLO is harmless; ignore it.
            }
            Body::Unknown { .. } => {
                self.send_error(xid, ErrorCode::BadRequest(BadRequestCode::BadType), frame);
            }
            Body::MultipartRequest(ref r)
                if matches!(r.body, MultipartRequestBody::Unknown { .. }) =>
            {
                self.send_error(
                    xid,
                    ErrorCode::BadRequest(BadRequestCode::BadMultipart),
                    frame,
                );
            }
            Body::Error(e) => match self.pending.remove(&xid) {
                Some(p) => self.events.push_back(Event::RequestFailed {
                    xid,
                    request: p.request,
                    error: RequestError::Peer(e),
                }),
                None => self
                    .events
                    .push_back(Event::Message(Message::new(xid, Body::Error(e)))),
            },
            body => self.handle_reply(xid, body, frame.len()),
        }
    }

    fn handle_reply(&mut self, xid: u32, body: Body, wire_len: usize) {
        let t = body.message_type();
        let expected = match self.pending.get(&xid) {
            Some(Pending {
                kind: Kind::Reply { expected, .. },
                ..
            }) => *expected,
            _ => {
                self.events
                    .push_back(Event::Message(Message::new(xid, body)));
                return;
            }
        };
        if t != expected {
            // A reply-type message with our xid but the wrong type: fail the request.
            if expected_reply_of_type(t) {
                if let Some(p) = self.pending.remove(&xid) {
                    self.events.push_back(Event::RequestFailed {
                        xid,
                        request: p.request,
                        error: RequestError::UnexpectedReply(t),
                    });
                }
            } else {
                self.events
                    .push_back(Event::Message(Message::new(xid, body)));
            }
            return;
        }
        match body {
            Body::MultipartReply(part) => self.handle_part(xid, part, wire_len),
            Body::BarrierReply => {
                let seq = self.pending.remove(&xid).map_or(0, |p| p.seq);
                let mut confirmed = Vec::new();
                while let Some(&(x, s)) = self.unconfirmed.front() {
                    if s > seq {
                        break;
                    }
                    self.unconfirmed.pop_front();
                    if self.pending.get(&x).is_some_and(|p| p.seq == s) {
                        self.pending.remove(&x);
                        confirmed.push(x);
                    }
                }
                self.events.push_back(Event::Barrier { xid, confirmed });
            }
            reply => {
                if let Some(p) = self.pending.remove(&xid) {
                    self.events.push_back(Event::Reply {
                        xid,
                        request: p.request,
                        reply,
                    });
                }
            }
        }
    }

    fn handle_part(&mut self, xid: u32, part: MultipartReply, wire_len: usize) {
        let max = self.config.max_reply_bytes;
        let more = part.more();
        let Some(p) = self.pending.get_mut(&xid) else {
            return;
        };
        let Kind::Reply { parts, bytes, .. } = &mut p.kind else {
            return;
        };
        *bytes = bytes.saturating_add(wire_len);
        let too_large = *bytes > max;
        let mismatch = match parts {
            None => {
                *parts = Some(part.body);
                false
            }
            Some(acc) => !acc.extend(part.body),
        };
        if too_large || mismatch {
            let request = p.request;
            self.pending.remove(&xid);
            self.events.push_back(Event::RequestFailed {
                xid,
                request,
                error: if too_large {
                    RequestError::ReplyTooLarge
                } else {
                    RequestError::UnexpectedReply(MessageType::MultipartReply)
                },
            });
            return;
        }
        if more {
            return;
        }
        if let Some(Pending {
            request,
            kind: Kind::Reply {
                parts: Some(body), ..
            },
            ..
        }) = self.pending.remove(&xid)
        {
            self.events.push_back(Event::Reply {
                xid,
                request,
                reply: Body::MultipartReply(MultipartReply { flags: 0, body }),
            });
        }
    }
}

/// Whether `t` is a reply type (it can settle a request).
fn expected_reply_of_type(t: MessageType) -> bool {
    matches!(
        t,
        MessageType::EchoReply
            | MessageType::FeaturesReply
            | MessageType::GetConfigReply
            | MessageType::MultipartReply
            | MessageType::BarrierReply
            | MessageType::QueueGetConfigReply
            | MessageType::RoleReply
            | MessageType::GetAsyncReply
    )
}
