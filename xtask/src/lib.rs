//! MMS developer tasks behind `cargo xtask`: the netns testbed of DESIGN §5 with our own WAN
//! emulator (this kernel has no netem), the demo, and the test runner that CI calls.
//!
//! Modules: [`topology`] (the TOML topology and address plan), [`testbed`] (namespaces, links,
//! routing, cut/restore), [`wanem`] (the WAN emulator: pure core + TUN driver), [`ovs`] (one Open
//! vSwitch per gateway), [`bench`] (`bench controller`: ssc programming real OVS), [`baseline`] (the single-path VXLAN baseline), [`demo`], [`deps`] (system packages), [`sh`] (running commands).

pub mod baseline;
pub mod bench;
pub mod demo;
pub mod deps;
pub mod iperf;
pub mod ovs;
pub mod sh;
pub mod table1;
pub mod testbed;
pub mod topology;
pub mod wanem;
