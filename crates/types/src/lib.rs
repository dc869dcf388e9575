//! The domain types of MMS, one type per idea, shared by every crate (the bottom floor).
//!
//! Seed 000 §III-A codes a member path into the outer TCP port as `0xBASG`: destination branch
//! B, source branch A, member path S, path group G, one nibble each. Every id that travels in
//! that code is a validated newtype here ([`BranchId`], [`PathGroupId`], [`MemberId`]); the
//! port plan ([`PathCode`], [`listen_port`], [`branch_port_range`]) lives only here, as do the
//! traffic [`Class`], the [`WanKind`] of a port, [`MacAddr`] and the DSCP marks ([`dscp`]).
//!
//! Ids are validated once, where they enter (serde `try_from = "u8"`, [`TryFrom`]); code that
//! holds one never checks it again. No IO, no allocation beyond error strings.
//!
//! With the feature `metrics`, [`exposition`] is the Prometheus text both daemons serve (it
//! allocates the scrape's text; still no IO).
#![forbid(unsafe_code)]

mod class;
pub mod dscp;
#[cfg(feature = "metrics")]
pub mod exposition;
mod ids;
mod mac;
mod port_plan;
mod wan;

pub use class::{Class, ClassParseError};
pub use ids::{BranchId, IdError, MemberId, PathGroupId};
pub use mac::{MacAddr, MacParseError};
pub use port_plan::{
    branch_port_range, listen_port, CodeRange, PathCode, PortPlan, PortPlanError, LISTEN_PORTS,
    MIN_EXTENDED_PORT,
};
pub use wan::WanKind;
