//! Helpers of the security netns tests (`netns_security`, `netns_security_tls`): the rogue
//! namespace (one address, optionally hundreds more), half-open connection floods, a rate-capped
//! iperf3 transfer with gw2's RSS sampled meanwhile, and polling.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mmsg_dataplane::tunnel::{MAX_PREAUTH_PER_SOURCE, PREAUTH_DEADLINE};

use super::{netns, run_ok};

/// gw2's MPA port of path group 0 and its first WAN address.
pub const GW2: (&str, u16) = ("198.18.20.2", 0x2000);
/// The rogue's own address on the emulated internet.
pub const ROGUE: &str = "198.18.253.10";
/// The prefix the rogue's extra source addresses come from (routed to it by the internet
/// namespace): 198.18.254.0 – 198.18.255.255.
pub const MANY_PREFIX: &str = "198.18.254.0/23";
/// The bulk transfer's offered rate: a rate a WAN uplink would have (the tunnel carries 40+
/// Mbit/s here in a debug build), so a goodput ratio measures what a flood does to the tunnel,
/// not how much of the 2 shared cores the test's own flood generators take from iperf3 and mmsg.
pub const TRANSFER_RATE: &str = "20M";

/// The counter `name` of a `mmsg status --json` document.
pub fn counter(s: &serde_json::Value, name: &str) -> u64 {
    s["counters"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {name}"))
}

/// Waits until `cond` holds (polling), or fails with `what`.
pub fn wait_for(what: &str, secs: u64, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Lines of `log` that are refusal lines of the tunnel listener.
pub fn refusals_logged(log: &str) -> usize {
    log.matches("inbound connection refused").count()
}

/// The kernel's TCP counters in namespace `ns`, keyed `Table:Name`: `Tcp:` of `/proc/net/snmp`
/// (`Tcp:PassiveOpens`), `TcpExt:` and `MPTcpExt:` of `/proc/net/netstat` (how a flood met the
/// listener's queues: `TcpExt:ListenOverflows`, `TcpExt:SyncookiesSent`, `TcpExt:SyncookiesRecv`).
pub fn tcp_counters(ns: &str) -> std::collections::BTreeMap<String, u64> {
    let text = run_ok(&mut netns(
        ns,
        &["cat", "/proc/net/snmp", "/proc/net/netstat"],
    ));
    let mut out = std::collections::BTreeMap::new();
    for table in ["Tcp:", "TcpExt:", "MPTcpExt:"] {
        let mut lines = text.lines().filter(|l| l.starts_with(table));
        let (names, values) = (lines.next().unwrap(), lines.next().unwrap());
        for (n, v) in names
            .split_whitespace()
            .zip(values.split_whitespace())
            .skip(1)
        {
            // `Tcp:MaxConn` is -1 (no limit): not a counter, left out.
            if let Ok(v) = v.parse() {
                out.insert(format!("{table}{n}"), v);
            }
        }
    }
    out
}

/// Connections the kernel handed to listeners in `ns` between two [`tcp_counters`] snapshots,
/// MPTCP joins excepted (those go to an existing connection, not to `accept`): every child
/// socket a listener created (`Tcp:PassiveOpens`, a completed handshake or a valid syncookie)
/// less the joins (`MPTcpExt:MPJoinAckRx`).
pub fn kernel_accepts(
    before: &std::collections::BTreeMap<String, u64>,
    after: &std::collections::BTreeMap<String, u64>,
) -> u64 {
    let d = |c: &str| after[c] - before[c];
    d("Tcp:PassiveOpens") - d("MPTcpExt:MPJoinAckRx")
}

/// Every flood connection refused at least once (`refused` of a flood of `n`), and gw2 counted
/// each connection the kernel handed it exactly once (`all_refused`, every refusal of the floods
/// together, against `kernel`, [`kernel_accepts`] over the same time). The kernel can hand a
/// flood connection over a second time after gw2 refused the first (a retransmitted FIN that
/// still carries a valid syncookie, on runs where the listen queue overflowed: 2,002 to 2,028 for
/// 2,000 seen), so the per-flood count alone is not exact; the kernel's own count is.
pub fn assert_refused_once_each(refused: &[(u64, &str)], n: usize, all_refused: u64, kernel: u64) {
    for (r, what) in refused {
        assert!(*r >= n as u64, "{what}: {r} refusals for {n} connections");
    }
    assert_eq!(
        all_refused, kernel,
        "gw2 counted {all_refused} refusals for {kernel} connections the kernel handed it"
    );
}

/// `VmRSS` of process `pid`, KiB.
pub fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// The rogue namespace `<prefix>-rogue` on the emulated internet at [`ROGUE`]; deleted on drop.
pub struct Rogue {
    pub ns: String,
}

impl Rogue {
    /// Creates the namespace and its link to `inet` (the testbed's internet namespace).
    pub fn up(ns: String, inet: &str) -> Rogue {
        run_ok(Command::new("ip").args(["netns", "add", &ns]));
        let r = Rogue { ns: ns.clone() };
        let ip = |target: &str, cmd: &str| {
            let args: Vec<&str> = cmd.split_whitespace().collect();
            run_ok(&mut netns(target, &[&["ip"], &args[..]].concat()));
        };
        ip(
            inet,
            &format!("link add rogue0 type veth peer name eth0 netns {ns}"),
        );
        ip(inet, "addr add 198.18.253.1/24 dev rogue0");
        ip(inet, "link set rogue0 up");
        ip(&ns, "link set lo up");
        ip(&ns, &format!("addr add {ROGUE}/24 dev eth0"));
        ip(&ns, "link set eth0 up");
        ip(&ns, "route add default via 198.18.253.1");
        r
    }

    /// Gives the rogue `n` (≤ 508) more addresses, /32s out of [`MANY_PREFIX`], routed to it by
    /// `inet`; returns them.
    pub fn add_sources(&self, inet: &str, n: usize) -> Vec<String> {
        assert!(n <= 508);
        let addrs: Vec<String> = [254, 255]
            .iter()
            .flat_map(|o| (1..=254).map(move |h| format!("198.18.{o}.{h}")))
            .take(n)
            .collect();
        let batch: String = addrs
            .iter()
            .map(|a| format!("addr add {a}/32 dev eth0\n"))
            .collect();
        let mut child = netns(&self.ns, &["ip", "-batch", "-"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(batch.as_bytes())
                .unwrap();
        }
        assert!(child.wait().unwrap().success(), "ip -batch addr add");
        run_ok(&mut netns(
            inet,
            &["ip", "route", "add", MANY_PREFIX, "via", ROGUE],
        ));
        addrs
    }
}

impl Drop for Rogue {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

/// Opens `n` TCP connections to `host:port`, connection i from source `srcs[i % len]` (`-`: any
/// address), sends `send` bytes on each (0: never sends a byte: half-open), holds them for
/// `hold` seconds, then prints "opened closed_by_peer still_open". The bytes sent are the first
/// `send` (at most 65,556) of a TLS ClientHello that claims 65,535 bytes, in 16 KiB handshake
/// records, cut before its last 3 bytes: a TLS server buffers all of it, waiting for the rest.
const FLOODER: &str = r#"
import resource, select, socket, sys, time
resource.setrlimit(resource.RLIMIT_NOFILE, (16384, 16384))
host, port, n, hold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
srcs, send = sys.argv[5].split(","), int(sys.argv[6])
msg = b"\x01\x00\xff\xff" + bytes(65535)
recs = b"".join(b"\x16\x03\x01" + len(msg[i:i + 16384]).to_bytes(2, "big") + msg[i:i + 16384]
                for i in range(0, len(msg), 16384))
payload = recs[:-8][:send]
socks = []
for i in range(n):
    s = socket.socket()
    s.setblocking(False)
    src = srcs[i % len(srcs)]
    if src != "-":
        s.bind((src, 0))
    try:
        s.connect((host, port))
    except BlockingIOError:
        pass
    socks.append(s)
if payload:
    left = {s: payload for s in socks}
    end = time.time() + hold
    while left and time.time() < end:
        _, w, _ = select.select([], list(left)[:1000], [], 0.2)
        for s in w:
            try:
                k = s.send(left[s])
            except OSError:
                del left[s]
                continue
            left[s] = left[s][k:]
            if not left[s]:
                del left[s]
    time.sleep(max(0, end - time.time()))
else:
    time.sleep(hold)
closed = opened = 0
for s in socks:
    if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) not in (0,):
        closed += 1
        continue
    try:
        b = s.recv(1)
        closed += 1 if b == b"" else 0
        opened += 1
    except BlockingIOError:
        opened += 1
    except OSError:
        opened += 1
        closed += 1
print(opened, closed, len(socks) - closed)
"#;

/// Starts a flood of `n` connections to gw2 ([`GW2`]) from namespace `ns`, sources `srcs`,
/// `send` bytes each, held `hold_s` seconds.
pub fn flood(ns: &str, srcs: &[String], n: usize, send: usize, hold_s: u32) -> Child {
    netns(
        ns,
        &[
            "python3",
            "-c",
            FLOODER,
            GW2.0,
            &GW2.1.to_string(),
            &n.to_string(),
            &hold_s.to_string(),
            &srcs.join(","),
            &send.to_string(),
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap()
}

/// Waits for a flooder; returns its "opened closed_by_peer still_open" line.
pub fn flood_result(f: Child) -> String {
    let out = f.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "flooder: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The "closed_by_peer" count of a [`flood_result`] line: connections gw2 closed while the
/// flooder still held them (refused at accept, or admitted and timed out).
fn closed_by_peer(result: &str) -> u64 {
    result
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("flooder result {result:?}: no closed count"))
}

/// The per-source pre-auth cap engaged for a flood from one address (`result`, its
/// [`flood_result`] line; `hold_s` as given to [`flood`]): of its connections gw2 closed while the
/// flooder held them, only those admitted and then timed out were not refused at accept
/// (`refused`, the growth of `tunnel_refused_preauth_limit`), at most `MAX_PREAUTH_PER_SOURCE`
/// per `PREAUTH_DEADLINE` of the hold. How many gw2 reaches during the hold depends on the
/// machine's speed (those it reaches later end at EOF), so the bound is on that count, and gw2
/// must have reached ten times what the cap admits.
pub fn assert_source_cap_engaged(refused: u64, result: &str, hold_s: u32, what: &str) {
    let closed = closed_by_peer(result);
    let admitted =
        (MAX_PREAUTH_PER_SOURCE as u64) * (1 + u64::from(hold_s) / PREAUTH_DEADLINE.as_secs());
    assert!(
        closed >= 10 * admitted,
        "gw2 closed only {closed} of the {what}'s connections during the hold"
    );
    assert!(
        refused + admitted >= closed,
        "the cap engaged: refused at accept {refused}, {what}'s connections closed by gw2 {closed}"
    );
}

/// iperf3 TCP h1 -> h2 (198.19.2.10) at [`TRANSFER_RATE`] for `secs`, gw2's peak RSS sampled
/// meanwhile: (Mbit/s received, peak KiB).
pub fn transfer(h1: &str, h2: &str, port: u16, secs: u32, gw2_pid: u32) -> (f64, u64) {
    let p = port.to_string();
    run_ok(&mut netns(
        h2,
        &["iperf3", "-s", "-D", "-1", "-p", &p, "-B", "198.19.2.10"],
    ));
    wait_for("iperf3 server", 10, || {
        run_ok(&mut netns(h2, &["ss", "-Hltn", &format!("sport = :{p}")])).contains(&p)
    });
    let client = netns(
        h1,
        &[
            "iperf3",
            "-c",
            "198.19.2.10",
            "-p",
            &p,
            "-t",
            &secs.to_string(),
            "-b",
            TRANSFER_RATE,
            "--json",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut peak = 0;
    let pid = client.id();
    while Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z")
    {
        peak = peak.max(rss_kib(gw2_pid));
        std::thread::sleep(Duration::from_millis(100));
    }
    peak = peak.max(rss_kib(gw2_pid));
    let out = client.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "iperf3: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let bps = v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap();
    (bps / 1e6, peak)
}
