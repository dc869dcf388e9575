//! MMS developer tasks behind `cargo xtask`: the netns testbed of DESIGN §5 with our own WAN
//! emulator (this kernel has no netem), the demo, and the test runner that CI calls.
//!
//! Modules: [`topology`] (the TOML topology and address plan), [`testbed`] (namespaces, links,
//! routing, cut/restore), [`wanem`] (the WAN emulator: pure core + TUN driver), [`ovs`] (one Open
//! vSwitch per gateway), [`bench`] (`bench controller`: ssc programming real OVS), [`scale`] (`bench scale`: more than 15 branches with the extended port plan, issue #20), [`bench_tunnel`] (`bench tunnel`: mmsg against end-to-end MPTCP), [`bench_latency`] (`bench latency`: latency under load, issue #16), [`baseline`] (the single-path VXLAN baseline), [`demo`] (the 2x2 demo), [`demo_paper`] (`cargo xtask demo`: the paper system), [`mdi`] (`experiment mdi`: seed 001 Fig. 3) and [`mdi_diag`] (its per-run diagnostics), [`e2e`] (the whole system on the paper testbed: OVS, `ssc`, five `mmsg`), [`deps`] (system packages), [`dist`], [`dist_bin`], [`dist_deb`] and [`dist_install`] (`cargo xtask dist`: static binaries, Debian packages, install check), [`uplink_lb`] (`experiment uplink-lb`: seed 004's load balancing experiment), [`sh`] (running commands), [`mmsg`] (building `mmsg`/`ssc`, writing `mmsg` configs, TLS of a run, `mmsg status`), [`stats`] (medians).

pub mod adaptive;
pub mod arch;
pub mod auto_paths;
pub mod baseline;
pub mod bench;
pub mod bench_failover;
pub mod bench_latency;
pub mod bench_tunnel;
pub mod bench_tunnel_overhead;
pub mod congestion;
pub mod demo;
pub mod demo_paper;
pub mod deps;
pub mod dist;
pub mod dist_bin;
pub mod dist_deb;
pub mod dist_enrol;
pub mod dist_install;
pub mod e2e;
pub mod experiment;
pub mod iperf;
pub mod mdi;
pub mod mdi_diag;
pub mod mmsg;
pub mod ovs;
pub mod plot;
pub mod scale;
pub mod sh;
pub mod stats;
pub mod stop;
pub mod table1;
pub mod test_run;
pub mod testbed;
pub mod topology;
pub mod uplink_lb;
pub mod wanem;
