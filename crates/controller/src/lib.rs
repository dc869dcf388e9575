//! The MMS SD-WAN system controller (the paper's SSC, seed 000 §IV).
//!
//! Its five modules are named after the paper: UI (inventory and API), PC (path configuration), SDC
//! (statistics), OFC (OpenFlow controller, over [`ofproto`]) and PM (priority). Path computation and
//! the flow compiler are pure; the database, REST API, OpenFlow server and CLI are thin drivers.
//!
//! Pure core modules (no IO, no clock, deterministic iteration; see `docs/controller.md`):
//! - [`inventory`] (UI's data model): branches, LAN prefixes, WAN ports, validation, TOML/JSON.
//! - [`path_group`] (PC, manual form): member paths in the paper's notation (`1a>4a>4b>2a`), path
//!   groups per ordered branch pair, path codes `0xBASG`, the TOML form of the paper's Table II.
//! - [`path_config`] (PC, automatic form): enumerate member paths, max-flow (Edmonds-Karp) group
//!   selection, MDI compatibility (seed 001 eq. 1), semi-permanent replacement.
//! - [`swap`] (the flow compiler for the OFC): inventory + path groups → the exact flow table of
//!   every gateway OVS (IP address swapping, seed 000 §III), cookies, the stage of each flow.
//! - [`priority`] (PM): hop-count and Type I / Type II priority as DSCP marks and flow priorities.
//! - [`adaptive`] (PC, seed 003 §III steps 5–8): add a path group to a pair whose achieved rate
//!   stays below λ × its achievable rate while its groups are saturated; retire groups it no
//!   longer needs (hysteresis, trial with take-back).
//! - [`settings`] (PC): the settings of the automatic PC and of the adaptive path groups, plain
//!   data below `path_config` and `adaptive`.
//! - [`wrr`] (PM/SDC → gateways): per path group weights `w = c / Σc` of each ordered pair from
//!   the SDC's measured rates (seed 001 §III-C, seed 004 Alg. 2), smoothed, with fallbacks, as
//!   integers for the gateways' weighted round robin.
//!
//! - [`catalog`] (UI + PC): the whole inventory as one always-valid value (branches, path
//!   groups, settings, compiled flows); every change is validated through the types above (and
//!   `swap::compile`) before it exists.
//!
//! Drivers (IO):
//! - [`store`] (UI): persists the [`catalog::Catalog`] in an embedded database (redb): schema
//!   migrations, one write transaction per change, the last committed catalog kept in memory
//!   for readers ([`store::Store::snapshot`]).
//! - [`ui`] (UI): configuration, the REST API (axum, bearer token, OpenAPI) and its CLI client.
//! - [`ofc`] (OFC): the OpenFlow 1.3 server; its pure parts are the IR → FLOW_MOD conversion
//!   ([`ofc::flowmod`]) and the reconcile diff and install order ([`ofc::reconcile`]).
//! - [`gwchan`] (SSC → MMSG): the gateway channel server: every gateway connects, registers and gets
//!   its versioned config (remotes, path groups with WRR weights, DSCP marks), pushed on every
//!   change ([`mpa::gwchan`] messages, `docs/gwchan.md`).
//! - [`authority`] (issue #8): the gateway CA run by `ssc`: one-time enrolment tokens, issuing,
//!   renewing and revoking gateway certificates, the controller's own `ssc.mms` TLS identity.
//! - [`preauth`] (issue #17): bounded pre-authentication state of the network listeners (caps
//!   in total and per source, one deadline, rate-limited refusal logs and counters).
//! - [`learned`] (UI, issue #20): a gateway's learned WAN addresses, next hops and next-hop
//!   MACs against the inventory → the port changes to commit (the configured values are hints).
//! - [`sdc`] (SDC): flow and port statistics per switch, member path, path group and pair (a pure
//!   collector fed by the OFC's switch tasks).
//! - [`metrics`] (SDC, issue #19): the Prometheus exposition of what the REST API serves
//!   (`GET /metrics`), and a strict reader of that format for tests.
//! - [`history`] (SDC, issue #19): the last minutes of the SDC's rates and the adaptive
//!   changes, bounded rings in memory for the web dashboard (`/ui/`, `GET /api/v1/history`).
//!
//! Call order: load an [`inventory::Inventory`], build [`path_group::PathGroups`] (manually from
//! TOML or with [`path_config::PathConfigurator`]), then [`swap::compile`] → [`swap::FlowTables`] and
//! [`ofc::reconcile::plan`] (the order of the FLOW_MODs, by [`swap::Stage`]) in the OFC.
#![forbid(unsafe_code)]

pub mod adaptive;
pub mod authority;
pub mod auto_config;
pub mod capacity;
pub mod catalog;
pub mod codes;
pub mod gwchan;
pub mod history;
pub mod inventory;
pub mod learned;
pub mod listen;
pub mod measure;
pub mod metrics;
pub mod nat;
pub mod ofc;
pub mod path_config;
pub mod path_group;
pub mod preauth;
pub mod priority;
pub mod sdc;
pub mod settings;
pub mod store;
pub mod swap;
pub mod ui;
pub mod wrr;
