//! OpenFlow 1.3 (1.3.5) wire codec and a sans-IO channel state machine.
//!
//! The paper's SSC programs each gateway's OFS (Open vSwitch) over OpenFlow 1.3 (seed 000 §IV, the
//! OFC module): the IP-address swap flows of §III, barriers to install a member path in order, and
//! flow/port statistics for the SDC. No maintained Rust crate speaks 1.3, so MMS owns this codec.
//! It is pure: no sockets, no clock reads, no tokio. The controller's OpenFlow server
//! (`crates/controller`, module `ofc`) owns the connections and feeds bytes and time in.
//!
//! - [`message`]: header, framing ([`Message::decode`]) and every message body of §7, one
//!   submodule per message family.
//! - [`oxm`], [`action`], [`instruction`]: match fields, actions, instructions.
//! - [`port`], [`group`], [`meter`]: ports, group buckets, meter bands.
//! - [`multipart`]: statistics requests and replies, one submodule per statistics family.
//! - [`ofp_error`]: OFPT_ERROR with every type and code typed, and the mapping of
//!   [`DecodeError`] to those codes.
//! - [`error`]: [`DecodeError`] (the peer's fault) and [`EncodeError`] (our misuse).
//! - [`channel`]: the per-connection state machine (HELLO, xids, echo, barriers, errors).
//! - private: `macros` (`enum_with_unknown!`), `wire` (bounded reader, big-endian writers);
//!   `table` (`OFPTT_*`) and `experimenter` (the experimenter body), re-exported from [`message`].
//!
//! Imports inside the crate run one way: each module imports only modules to its left (checked
//! with `grep -rn 'crate::' src`; submodules of `message` and `multipart` never import their parent):
//!
//! `error`, `macros`, `table` → `wire` → `experimenter`, `meter`, `ofp_error`, `oxm` → `action`, `port` → `group`, `instruction` → `multipart` → `message` → `channel`
//!
//! Decoders accept any bytes and never panic, never allocate more than the input justifies, and
//! keep unknown types and experimenter bodies verbatim so they re-encode byte-exact. Encoders emit
//! match fields in one canonical order. See `docs/ofproto.md`.
//!
//! ```
//! use std::net::Ipv4Addr;
//! use std::time::Instant;
//! use ofproto::channel::{Channel, Config, Event};
//! use ofproto::message::{FlowMod, Hello};
//! use ofproto::{Action, Body, Instruction, Match, Message, OxmField as F};
//!
//! // The source MMSG's swap flow of the paper's Fig. 4(b), subflow 1.
//! let (p11, p12, p13) = ([198, 18, 11, 2], [198, 18, 21, 2], [198, 18, 31, 2]);
//! let swap = FlowMod {
//!     cookie: 0xb214_0000_0000_0001,
//!     priority: 1000,
//!     match_: Match::new()
//!         .with(F::EthType(0x0800, None))
//!         .with(F::IpProto(6, None))
//!         .with(F::Ipv4Src(Ipv4Addr::from(p11), None))
//!         .with(F::Ipv4Dst(Ipv4Addr::from(p12), None))
//!         .with(F::TcpDst(0x2004, None)),
//!     instructions: vec![Instruction::ApplyActions(vec![
//!         Action::SetField(F::Ipv4Dst(Ipv4Addr::from(p13), None)),
//!         Action::SetField(F::TcpDst(0x2114, None)),
//!         Action::Output { port: 1, max_len: 0 },
//!     ])],
//!     ..FlowMod::default()
//! };
//! assert_eq!(swap.match_.validate(), Ok(()));
//!
//! // Drive a channel: bytes in, bytes and events out, time passed in.
//! let now = Instant::now();
//! let mut ch = Channel::new(now, Config::default());
//! let peer_hello = Message::new(1, Body::Hello(Hello::v1_3())).to_bytes()?;
//! ch.handle_input(now, &peer_hello);
//! assert_eq!(ch.poll_event(), Some(Event::Connected { version: 4 }));
//! let xid = ch.send(now, Body::FlowMod(swap.clone()))?;
//! let mut wire = Vec::new();
//! ch.poll_transmit(&mut wire);
//! // Our HELLO, then the FLOW_MOD; the bytes decode back to what was sent.
//! let (_, n) = Message::decode(&wire)?.expect("whole HELLO");
//! let (m, _) = Message::decode(&wire[n..])?.expect("whole FLOW_MOD");
//! assert_eq!(m, Message::new(xid, Body::FlowMod(swap)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

pub mod action;
pub mod channel;
pub mod error;
mod experimenter;
pub mod group;
pub mod instruction;
mod macros;
pub mod message;
pub mod meter;
pub mod multipart;
pub mod ofp_error;
pub mod oxm;
pub mod port;
mod table;
mod wire;

pub use action::Action;
pub use error::{DecodeError, EncodeError};
pub use instruction::Instruction;
#[doc(inline)]
pub use message::OFP_VERSION_1_3;
pub use message::{Body, Message, MessageType};
pub use ofp_error::{ErrorCode, ErrorMsg};
pub use oxm::{Match, OxmField};

/// IANA-assigned OpenFlow TCP port (OpenFlow 1.3.5 §6.3.1).
pub const OFP_TCP_PORT: u16 = 6653;
