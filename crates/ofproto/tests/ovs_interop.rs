//! Interop with a real Open vSwitch 3.1 (userspace datapath) in private network namespaces.
//!
//! Topology (all names carry `mmsof<pid>`; addresses from 198.18.0.0/15):
//!
//! ```text
//!  ns A (host "MPA 1")            ns GW (ovsdb-server + ovs-vswitchd, br0)            ns B (host)
//!  eth0 198.18.11.2  ── veth ── wa (ofport 1)   br0   wb (ofport 2) ── veth ── eth0 198.18.31.2
//!                                      │
//!                      controller unix:<tmp>/ctl.sock  ◄── this test (Channel over UnixStream)
//! ```
//!
//! The test plays the SSC: it installs the swap flows of the paper's Fig. 4(b) at the source MMSG
//! (subflow 1: p11→p12:0x2004 becomes p11→p13:0x2114 out port 2; the reverse direction restores
//! on tcp_src), plus subflow 4's pair, checks `ovs-ofctl dump-flows` shows exactly them, runs a
//! TCP transfer from A to the *original* destination p12:0x2004 which OVS swaps to B, and checks
//! that flow and port statistics decoded from OVS grew. An invalid FLOW_MOD comes back as a typed
//! error. The test fails (it does not skip) when OVS is missing.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::io::{Read, Write};
use std::net::Ipv4Addr;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ofproto::channel::{Channel, Config, Event, RequestError};
use ofproto::message::{FlowMod, FlowModCommand, MessageType};
use ofproto::multipart::{
    FlowStats, FlowStatsRequest, MultipartReplyBody, MultipartRequest, MultipartRequestBody,
    PortStats,
};
use ofproto::ofp_error::{BadRequestCode, ErrorCode, FlowModFailedCode};
use ofproto::oxm::{Match, OxmField as F};
use ofproto::port::ofpp;
use ofproto::{Action, Body, Instruction};

const P11: Ipv4Addr = Ipv4Addr::new(198, 18, 11, 2); // p_1^1: host A (MPA of branch 1)
const P12: Ipv4Addr = Ipv4Addr::new(198, 18, 21, 2); // p_1^2: original destination
const P13: Ipv4Addr = Ipv4Addr::new(198, 18, 31, 2); // p_1^3: next hop (host B)
const P21: Ipv4Addr = Ipv4Addr::new(198, 18, 12, 2); // p_2^1
const P22: Ipv4Addr = Ipv4Addr::new(198, 18, 22, 2); // p_2^2
const MAC_A: &str = "02:00:c6:12:0b:02";
const MAC_B: &str = "02:00:c6:12:1f:02";

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e} (is Open vSwitch installed?)"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn sh(args: &[&str]) -> String {
    run(Command::new(args[0]).args(&args[1..]))
}

/// Everything this test created; dropped (even on panic) it kills only our PIDs and removes our
/// namespaces and temp dir.
struct Testbed {
    gw: String,
    a: String,
    b: String,
    dir: PathBuf,
    children: Vec<Child>,
    namespaces: Vec<String>,
}

impl Testbed {
    fn ovs_env(&self, cmd: &mut Command) {
        cmd.env("OVS_RUNDIR", self.dir.join("run"))
            .env("OVS_DBDIR", self.dir.join("db"))
            .env("OVS_LOGDIR", self.dir.join("log"))
            .env("OVS_SYSCONFDIR", self.dir.join("etc"));
    }

    fn in_ns(&self, ns: &str, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns]).args(args);
        self.ovs_env(&mut c);
        c
    }

    fn vsctl(&self, args: &[&str]) -> String {
        let db = format!("--db=unix:{}", self.dir.join("run/db.sock").display());
        let mut c = self.in_ns(&self.gw, &["ovs-vsctl", &db, "--timeout=10"]);
        c.args(args);
        run(&mut c)
    }

    fn ofctl(&self, args: &[&str]) -> String {
        let mut c = self.in_ns(&self.gw, &["ovs-ofctl", "-O", "OpenFlow13"]);
        c.args(args);
        run(&mut c)
    }

    fn setup() -> Testbed {
        let tag = format!("mmsof{}", std::process::id());
        let dir = std::env::temp_dir().join(&tag);
        let _ = std::fs::remove_dir_all(&dir);
        for sub in ["run", "db", "log", "etc"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        let mut tb = Testbed {
            gw: tag.clone(),
            a: format!("{tag}a"),
            b: format!("{tag}b"),
            dir,
            children: Vec::new(),
            namespaces: Vec::new(),
        };
        for ns in [tb.gw.clone(), tb.a.clone(), tb.b.clone()] {
            sh(&["ip", "netns", "add", &ns]);
            tb.namespaces.push(ns.clone());
            sh(&["ip", "-n", &ns, "link", "set", "lo", "up"]);
        }
        // veth pairs created inside the gateway namespace; the host ends go straight to A and B.
        sh(&[
            "ip", "-n", &tb.gw, "link", "add", "wa", "type", "veth", "peer", "name", "eth0",
            "netns", &tb.a,
        ]);
        sh(&[
            "ip", "-n", &tb.gw, "link", "add", "wb", "type", "veth", "peer", "name", "eth0",
            "netns", &tb.b,
        ]);
        for (ns, mac, addr, peer_ip, peer_mac) in [
            (&tb.a, MAC_A, P11, P12, MAC_B),
            (&tb.b, MAC_B, P13, P11, MAC_A),
        ] {
            sh(&["ip", "-n", ns, "link", "set", "eth0", "address", mac]);
            sh(&[
                "ip",
                "-n",
                ns,
                "addr",
                "add",
                &format!("{addr}/15"),
                "dev",
                "eth0",
            ]);
            sh(&["ip", "-n", ns, "link", "set", "eth0", "up"]);
            // Static neighbours: no ARP needed through a fail-secure bridge with only swap flows.
            sh(&[
                "ip",
                "-n",
                ns,
                "neigh",
                "add",
                &peer_ip.to_string(),
                "lladdr",
                peer_mac,
                "dev",
                "eth0",
                "nud",
                "permanent",
            ]);
            // Kernel TCP sending into OVS netdev needs software checksums (DESIGN §4).
            run(Command::new("ip")
                .args(["netns", "exec", ns, "ethtool", "-K", "eth0", "tx", "off"]));
        }
        for dev in ["wa", "wb"] {
            sh(&["ip", "-n", &tb.gw, "link", "set", dev, "up"]);
        }

        let d = tb.dir.clone();
        let db = d.join("db/conf.db");
        sh(&[
            "ovsdb-tool",
            "create",
            db.to_str().unwrap(),
            "/usr/share/openvswitch/vswitch.ovsschema",
        ]);
        let p = |s: &str| d.join(s).display().to_string();
        run(&mut tb.in_ns(
            &tb.gw,
            &[
                "ovsdb-server",
                db.to_str().unwrap(),
                &format!("--remote=punix:{}", p("run/db.sock")),
                &format!("--pidfile={}", p("run/ovsdb-server.pid")),
                &format!("--unixctl={}", p("run/ovsdb-server.ctl")),
                &format!("--log-file={}", p("log/ovsdb-server.log")),
                "--detach",
            ],
        ));
        tb.vsctl(&["--no-wait", "init"]);
        run(&mut tb.in_ns(
            &tb.gw,
            &[
                "ovs-vswitchd",
                &format!("unix:{}", p("run/db.sock")),
                &format!("--pidfile={}", p("run/ovs-vswitchd.pid")),
                &format!("--unixctl={}", p("run/ovs-vswitchd.ctl")),
                &format!("--log-file={}", p("log/ovs-vswitchd.log")),
                "--detach",
            ],
        ));
        tb.vsctl(&[
            "add-br",
            "br0",
            "--",
            "set",
            "bridge",
            "br0",
            "datapath_type=netdev",
            "protocols=OpenFlow13",
            "fail_mode=secure",
        ]);
        tb.vsctl(&[
            "add-port",
            "br0",
            "wa",
            "--",
            "set",
            "interface",
            "wa",
            "ofport_request=1",
        ]);
        tb.vsctl(&[
            "add-port",
            "br0",
            "wb",
            "--",
            "set",
            "interface",
            "wb",
            "ofport_request=2",
        ]);
        tb
    }

    fn pid(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.dir.join("run").join(name))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Ok(log) = std::fs::read_to_string(self.dir.join("log/ovs-vswitchd.log")) {
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                eprintln!("--- ovs-vswitchd.log (last lines) ---");
                tail.iter().rev().for_each(|l| eprintln!("{l}"));
            }
        }
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for name in ["ovs-vswitchd.pid", "ovsdb-server.pid"] {
            if let Some(pid) = self.pid(name) {
                let _ = Command::new("kill").arg(&pid).status();
                // Wait (bounded) for it to exit before removing its files.
                for _ in 0..50 {
                    if !Path::new(&format!("/proc/{pid}")).exists() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
        for ns in &self.namespaces {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A minimal blocking OpenFlow controller driving the sans-IO [`Channel`] over a `UnixStream`.
struct Driver {
    sock: UnixStream,
    chan: Channel,
    /// Events not yet consumed (e.g. PORT_STATUS noise while waiting for a reply).
    backlog: Vec<Event>,
}

impl Driver {
    fn new(sock: UnixStream) -> Driver {
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let chan = Channel::new(Instant::now(), Config::default());
        let mut d = Driver {
            sock,
            chan,
            backlog: Vec::new(),
        };
        d.flush();
        d
    }

    fn flush(&mut self) {
        let mut buf = Vec::new();
        if self.chan.poll_transmit(&mut buf) {
            self.sock.write_all(&buf).unwrap();
        }
    }

    /// Runs IO until `want` matches an event (returned) or 10 s pass.
    fn wait(&mut self, what: &str, mut want: impl FnMut(&Event) -> bool) -> Event {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut buf = vec![0u8; 65536];
        loop {
            if let Some(i) = self.backlog.iter().position(&mut want) {
                return self.backlog.remove(i);
            }
            while let Some(e) = self.chan.poll_event() {
                if let Event::Closed(r) = &e {
                    panic!("channel closed while waiting for {what}: {r:?}");
                }
                self.backlog.push(e);
            }
            if let Some(i) = self.backlog.iter().position(&mut want) {
                return self.backlog.remove(i);
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; got {:?}",
                self.backlog
            );
            match self.sock.read(&mut buf) {
                Ok(0) => panic!("switch closed the connection while waiting for {what}"),
                Ok(n) => self.chan.handle_input(Instant::now(), &buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => panic!("read: {e}"),
            }
            if self
                .chan
                .poll_timeout()
                .is_some_and(|t| t <= Instant::now())
            {
                self.chan.handle_timeout(Instant::now());
            }
            self.flush();
        }
    }

    fn send(&mut self, body: Body) -> u32 {
        let xid = self.chan.send(Instant::now(), body).unwrap();
        self.flush();
        xid
    }

    fn request(&mut self, body: Body) -> Result<Body, RequestError> {
        let xid = self.send(body);
        match self.wait("reply", |e| {
            matches!(e, Event::Reply { xid: x, .. } | Event::RequestFailed { xid: x, .. } if *x == xid)
        }) {
            Event::Reply { reply, .. } => Ok(reply),
            Event::RequestFailed { error, .. } => Err(error),
            _ => unreachable!(),
        }
    }

    fn flow_stats(&mut self) -> Vec<FlowStats> {
        let req = MultipartRequest::new(MultipartRequestBody::Flow(FlowStatsRequest::default()));
        match self.request(Body::MultipartRequest(req)).unwrap() {
            Body::MultipartReply(r) => match r.body {
                MultipartReplyBody::Flow(v) => v,
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    fn port_stats(&mut self) -> Vec<PortStats> {
        let req = MultipartRequest::new(MultipartRequestBody::PortStats(ofpp::ANY));
        match self.request(Body::MultipartRequest(req)).unwrap() {
            Body::MultipartReply(r) => match r.body {
                MultipartReplyBody::PortStats(v) => v,
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }
}

/// One swap flow: match (src, dst, tcp port) and rewrite to (src', dst', port'), then output.
struct Swap {
    cookie: u64,
    from: (Ipv4Addr, Ipv4Addr),
    to: (Ipv4Addr, Ipv4Addr),
    /// `true`: the path code is in tcp_dst (forward); `false`: in tcp_src (reverse).
    forward: bool,
    port_from: u16,
    port_to: u16,
    out: u32,
}

impl Swap {
    fn flow_mod(&self) -> FlowMod {
        let (pf, pa) = if self.forward {
            (
                F::TcpDst(self.port_from, None),
                Action::SetField(F::TcpDst(self.port_to, None)),
            )
        } else {
            (
                F::TcpSrc(self.port_from, None),
                Action::SetField(F::TcpSrc(self.port_to, None)),
            )
        };
        let m = Match::new()
            .with(F::EthType(0x0800, None))
            .with(F::IpProto(6, None))
            .with(F::Ipv4Src(self.from.0, None))
            .with(F::Ipv4Dst(self.from.1, None))
            .with(pf);
        m.validate().unwrap();
        FlowMod {
            cookie: self.cookie,
            priority: 1000,
            match_: m,
            instructions: vec![Instruction::ApplyActions(vec![
                Action::SetField(F::Ipv4Src(self.to.0, None)),
                Action::SetField(F::Ipv4Dst(self.to.1, None)),
                pa,
                Action::Output {
                    port: self.out,
                    max_len: 0,
                },
            ])],
            ..FlowMod::default()
        }
    }

    /// The line `ovs-ofctl -O OpenFlow13 dump-flows` prints, counters and duration removed.
    fn ofctl_line(&self) -> String {
        let (mf, af) = if self.forward {
            ("tp_dst", "tcp_dst")
        } else {
            ("tp_src", "tcp_src")
        };
        format!(
            "cookie={:#x}, table=0, priority=1000,tcp,nw_src={},nw_dst={},{}={} \
             actions=set_field:{}->ip_src,set_field:{}->ip_dst,set_field:{}->{},output:{}",
            self.cookie,
            self.from.0,
            self.from.1,
            mf,
            self.port_from,
            self.to.0,
            self.to.1,
            self.port_to,
            af,
            self.out
        )
    }
}

/// Fig. 4(b) at MMSG 1 (source branch 1, destination branch 2, path group 4): subflow 1 goes via
/// branch 3 (0x2004 → 0x2114), subflow 4 direct (0x2004 → 0x2144); each with its reverse.
/// Port 1 faces host A (the MPA), port 2 faces host B (the next hop).
fn fig4b_swaps() -> Vec<Swap> {
    vec![
        Swap {
            cookie: 0xb214_0000_0000_0001,
            from: (P11, P12),
            to: (P11, P13),
            forward: true,
            port_from: 0x2004,
            port_to: 0x2114,
            out: 2,
        },
        Swap {
            cookie: 0xb214_0000_0000_0002,
            from: (P13, P11),
            to: (P12, P11),
            forward: false,
            port_from: 0x2114,
            port_to: 0x2004,
            out: 1,
        },
        Swap {
            cookie: 0xb244_0000_0000_0001,
            from: (P21, P22),
            to: (P21, P22),
            forward: true,
            port_from: 0x2004,
            port_to: 0x2144,
            out: 2,
        },
        Swap {
            cookie: 0xb244_0000_0000_0002,
            from: (P22, P21),
            to: (P22, P21),
            forward: false,
            port_from: 0x2144,
            port_to: 0x2004,
            out: 1,
        },
    ]
}

fn normalize_dump(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s
        .lines()
        .filter(|l| l.contains("cookie="))
        .map(|l| {
            l.trim()
                .split(", ")
                .filter(|f| {
                    !f.starts_with("duration=")
                        && !f.starts_with("n_packets=")
                        && !f.starts_with("n_bytes=")
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect();
    v.sort();
    v
}

#[test]
fn ovs_swap_flows_stats_and_errors() {
    let tb = Testbed::setup();
    // vswitchd accepts unix: controllers only under its OVS_RUNDIR.
    let sock_path = tb.dir.join("run/ctl.sock");
    let listener = UnixListener::bind(&sock_path).unwrap();
    listener.set_nonblocking(true).unwrap();
    tb.vsctl(&[
        "set-controller",
        "br0",
        &format!("unix:{}", sock_path.display()),
    ]);
    let deadline = Instant::now() + Duration::from_secs(15);
    let stream = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(
                    Instant::now() < deadline,
                    "ovs-vswitchd never connected to the controller"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("accept: {e}"),
        }
    };
    stream.set_nonblocking(false).unwrap();
    let mut tb = tb;
    let mut d = Driver::new(stream);

    // HELLO: OVS offers a bitmap; we negotiate 1.3.
    d.wait("HELLO", |e| matches!(e, Event::Connected { version: 4 }));
    let Body::FeaturesReply(f) = d.request(Body::FeaturesRequest).unwrap() else {
        panic!("features")
    };
    assert!(f.n_tables > 0);

    // Install the swap flows, confirmed by a barrier.
    let swaps = fig4b_swaps();
    let xids: Vec<u32> = swaps
        .iter()
        .map(|s| d.send(Body::FlowMod(s.flow_mod())))
        .collect();
    let b = d.send(Body::BarrierRequest);
    let ev = d.wait(
        "barrier",
        |e| matches!(e, Event::Barrier { xid, .. } if *xid == b),
    );
    assert_eq!(
        ev,
        Event::Barrier {
            xid: b,
            confirmed: xids
        }
    );

    // ovs-ofctl shows exactly those flows.
    let dump = tb.ofctl(&["dump-flows", "br0"]);
    let mut want: Vec<String> = swaps.iter().map(Swap::ofctl_line).collect();
    want.sort();
    assert_eq!(normalize_dump(&dump), want, "dump-flows:\n{dump}");

    // Flow stats decode and list the same flows.
    let before = d.flow_stats();
    assert_eq!(before.len(), 4);
    for s in &swaps {
        let fs = before
            .iter()
            .find(|f| f.cookie == s.cookie)
            .expect("flow in stats");
        assert_eq!(fs.match_, s.flow_mod().match_);
        assert_eq!(fs.instructions, s.flow_mod().instructions);
        assert_eq!(fs.priority, 1000);
    }
    let ports_before = d.port_stats();

    // Traffic: A connects to the *original* destination p12:0x2004; OVS swaps it to B p13:0x2114.
    let srv = tb
        .in_ns(
            &tb.b,
            &[
                "iperf3",
                "-s",
                "-B",
                &P13.to_string(),
                "-p",
                &0x2114.to_string(),
            ],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    tb.children.push(srv);
    // The server needs a moment to listen: retry the client a few times.
    let mut attempts = Vec::new();
    let ok = (0..5).any(|_| {
        std::thread::sleep(Duration::from_millis(300));
        let out = tb
            .in_ns(
                &tb.a,
                &[
                    "iperf3",
                    "-c",
                    &P12.to_string(),
                    "-p",
                    &0x2004.to_string(),
                    "-t",
                    "1",
                    "--connect-timeout",
                    "3000",
                ],
            )
            .output()
            .unwrap();
        attempts.push(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
        out.status.success()
    });
    assert!(ok, "iperf3 through the swap failed: {attempts:#?}");
    // Keep the channel alive while traffic ran (echo requests from OVS).
    let after = d.flow_stats();
    let count = |v: &[FlowStats], c: u64| {
        v.iter()
            .find(|f| f.cookie == c)
            .map(|f| (f.packet_count, f.byte_count))
            .unwrap()
    };
    for c in [swaps[0].cookie, swaps[1].cookie] {
        let (p0, b0) = count(&before, c);
        let (p1, b1) = count(&after, c);
        assert!(
            p1 > p0 && b1 > b0,
            "flow {c:#x}: counters did not grow ({p0},{b0}) -> ({p1},{b1})"
        );
    }
    // The MB of the transfer went forward through subflow 1.
    assert!(count(&after, swaps[0].cookie).1 > 100_000);
    let ports_after = d.port_stats();
    for port in [1u32, 2] {
        let p0 = ports_before.iter().find(|p| p.port_no == port).unwrap();
        let p1 = ports_after.iter().find(|p| p.port_no == port).unwrap();
        assert!(
            p1.rx_packets > p0.rx_packets && p1.tx_packets > p0.tx_packets,
            "port {port}: {p0:?} -> {p1:?}"
        );
        assert!(p1.rx_bytes > p0.rx_bytes && p1.tx_bytes > p0.tx_bytes);
    }

    // An invalid request: a FLOW_MOD ADD into OFPTT_ALL (not a table) comes back typed.
    let bad = FlowMod {
        table_id: 0xff,
        command: FlowModCommand::Add,
        ..swaps[0].flow_mod()
    };
    let xid = d.send(Body::FlowMod(bad));
    let ev = d.wait(
        "error",
        |e| matches!(e, Event::RequestFailed { xid: x, .. } if *x == xid),
    );
    let Event::RequestFailed {
        request,
        error: RequestError::Peer(e),
        ..
    } = ev
    else {
        panic!("{ev:?}")
    };
    assert_eq!(request, MessageType::FlowMod);
    assert_eq!(
        e.code,
        ErrorCode::FlowModFailed(FlowModFailedCode::BadTableId),
        "{e:?}"
    );
    // The error carries the start of our request.
    assert_eq!(e.data.get(..2), Some(&[0x04, 0x0e][..]));

    // A multipart request of a type OVS does not know is refused, typed, to that request.
    let req = MultipartRequest::new(MultipartRequestBody::Unknown {
        typ: 0x77,
        data: vec![],
    });
    let r = d.request(Body::MultipartRequest(req));
    let Err(RequestError::Peer(e)) = r else {
        panic!("{r:?}")
    };
    assert_eq!(
        e.code,
        ErrorCode::BadRequest(BadRequestCode::BadMultipart),
        "{e:?}"
    );

    // OVS's hidden table 254 holds flows with Nicira (NXM) fields and actions: they decode, with
    // the unknown parts kept verbatim, and re-encode to the same bytes.
    let req = MultipartRequest::new(MultipartRequestBody::Flow(FlowStatsRequest {
        table_id: 0xfe,
        ..FlowStatsRequest::default()
    }));
    let Body::MultipartReply(r) = d.request(Body::MultipartRequest(req)).unwrap() else {
        panic!("flow stats")
    };
    let MultipartReplyBody::Flow(hidden) = &r.body else {
        panic!("{r:?}")
    };
    assert!(!hidden.is_empty() && hidden.iter().all(|f| f.table_id == 0xfe));
    assert!(hidden
        .iter()
        .flat_map(|f| f.match_.fields())
        .any(|f| matches!(f, F::Other(o) if o.class == ofproto::oxm::OFPXMC_NXM_1)));
    let m = ofproto::Message::new(1, Body::MultipartReply(r.clone()));
    assert_eq!(
        ofproto::Message::decode_exact(&m.to_bytes().unwrap()).unwrap(),
        m
    );

    // Still exactly the four swap flows.
    assert_eq!(normalize_dump(&tb.ofctl(&["dump-flows", "br0"])), want);
}
