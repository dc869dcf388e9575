//! The traffic of `bench failover`, on real sockets inside the testbed's namespaces: a bulk TCP
//! flow and a 50 packet/s UDP "voice" stream from host 1 to host 2, each end recording when every
//! byte or packet arrived; and the pure analysis of those records (longest receive gap, lost
//! packets, goodput) over an event's time window.
//!
//! Every socket is opened by a thread that first moved itself into the namespace with
//! `setns(2)` (a thread's network namespace is its own), so no helper process is needed and all
//! timestamps share one monotonic clock.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// Bytes per TCP write/read.
const TCP_CHUNK: usize = 64 * 1024;
/// UDP voice packet size (a G.711 20 ms frame with RTP/UDP/IP, as in `bench latency`).
pub const VOICE_BYTES: usize = 172;
/// UDP voice packet interval (50 packets/s).
pub const VOICE_INTERVAL: Duration = Duration::from_millis(20);
/// Socket timeouts, so that every loop sees the stop flag within this.
const POLL: Duration = Duration::from_millis(200);

/// Moves the calling thread into the network namespace `ns` (`/run/netns/<ns>`).
pub fn enter_netns(ns: &str) -> anyhow::Result<()> {
    let f = std::fs::File::open(format!("/run/netns/{ns}"))
        .with_context(|| format!("open namespace {ns}"))?;
    // SAFETY: setns(2) on an fd we own (open for the call); it only changes this thread's
    // network namespace.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        bail!("setns {ns}: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// What the TCP receiver saw: every read's time and length, and how it ended.
#[derive(Debug, Default)]
pub struct TcpRecord {
    /// (arrival, bytes) per read.
    pub reads: Vec<(Instant, usize)>,
    /// The error that ended the connection, if one did (a reset, a timeout of the sender).
    pub error: Option<String>,
}

/// What the UDP voice ends saw.
#[derive(Debug, Default)]
pub struct VoiceRecord {
    /// Send time of packet `i` (sequence number = index).
    pub sent: Vec<Instant>,
    /// (sequence number, arrival) of every packet received.
    pub received: Vec<(u64, Instant)>,
}

/// The running flows; [`Flows::stop`] ends them and returns the records.
#[derive(Debug)]
pub struct Flows {
    stop: Arc<AtomicBool>,
    tcp_tx: JoinHandle<Option<String>>,
    tcp_rx: JoinHandle<TcpRecord>,
    voice_tx: JoinHandle<Vec<Instant>>,
    voice_rx: JoinHandle<Vec<(u64, Instant)>>,
}

/// What [`Flows::stop`] returns.
#[derive(Debug)]
pub struct Records {
    /// TCP receiver.
    pub tcp: TcpRecord,
    /// The error that ended the TCP sender, if any.
    pub tcp_sender_error: Option<String>,
    /// UDP voice.
    pub voice: VoiceRecord,
}

fn spawn_in<T: Default + Send + 'static>(
    ns: &str,
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> anyhow::Result<(JoinHandle<T>, std::sync::mpsc::Receiver<anyhow::Result<()>>)> {
    let ns = ns.to_owned();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let h = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let r = enter_netns(&ns);
            let ok = r.is_ok();
            let _ = ready_tx.send(r);
            // Never run in the wrong namespace: the caller sees the error on the channel.
            if ok {
                f()
            } else {
                T::default()
            }
        })
        .context("spawn probe thread")?;
    Ok((h, ready_rx))
}

/// Starts the receivers in `rx_ns` (listening on `dst`, TCP port `port` and UDP port
/// `port + 1`) and the senders in `tx_ns`; returns once the TCP connection is up.
pub fn start(tx_ns: &str, rx_ns: &str, dst: Ipv4Addr, port: u16) -> anyhow::Result<Flows> {
    let stop = Arc::new(AtomicBool::new(false));
    // Bind the receivers first (in their namespace) and hand the sockets to their threads.
    let (bind_tx, bind_rx) = std::sync::mpsc::channel();
    let binder = {
        let ns = rx_ns.to_owned();
        std::thread::spawn(move || {
            let r = (|| -> anyhow::Result<(TcpListener, UdpSocket)> {
                enter_netns(&ns)?;
                let l = TcpListener::bind(SocketAddrV4::new(dst, port)).context("bind TCP sink")?;
                let u =
                    UdpSocket::bind(SocketAddrV4::new(dst, port + 1)).context("bind UDP sink")?;
                Ok((l, u))
            })();
            let _ = bind_tx.send(r);
        })
    };
    let (listener, udp_rx) = bind_rx.recv().context("binder thread")??;
    let _ = binder.join();

    let s = Arc::clone(&stop);
    let tcp_rx = std::thread::spawn(move || tcp_receive(&listener, &s));
    let s = Arc::clone(&stop);
    let voice_rx = std::thread::spawn(move || voice_receive(&udp_rx, &s));

    let s = Arc::clone(&stop);
    let (tcp_tx, ready) = spawn_in(tx_ns, "fo-tcp-tx", move || {
        tcp_send(SocketAddrV4::new(dst, port), &s)
    })?;
    ready.recv().context("TCP sender thread")??;
    let s = Arc::clone(&stop);
    let (voice_tx, ready) = spawn_in(tx_ns, "fo-voice-tx", move || {
        voice_send(SocketAddrV4::new(dst, port + 1), &s)
    })?;
    ready.recv().context("voice sender thread")??;
    Ok(Flows {
        stop,
        tcp_tx,
        tcp_rx,
        voice_tx,
        voice_rx,
    })
}

impl Flows {
    /// Stops the senders, lets the receivers drain, returns what every end recorded.
    pub fn stop(self) -> Records {
        self.stop.store(true, Ordering::Relaxed);
        let tcp_sender_error = self
            .tcp_tx
            .join()
            .unwrap_or_else(|_| Some("TCP sender thread panicked".into()));
        let sent = self.voice_tx.join().unwrap_or_default();
        let tcp = self.tcp_rx.join().unwrap_or_else(|_| TcpRecord {
            reads: Vec::new(),
            error: Some("TCP receiver thread panicked".into()),
        });
        let received = self.voice_rx.join().unwrap_or_default();
        Records {
            tcp,
            tcp_sender_error,
            voice: VoiceRecord { sent, received },
        }
    }
}

/// Connects and writes until stopped; the error that ended it, if any.
fn tcp_send(dst: SocketAddrV4, stop: &AtomicBool) -> Option<String> {
    let mut s = match TcpStream::connect_timeout(&dst.into(), Duration::from_secs(5)) {
        Ok(s) => s,
        Err(e) => return Some(format!("connect: {e}")),
    };
    let _ = s.set_write_timeout(Some(POLL));
    let buf = vec![0x5au8; TCP_CHUNK];
    while !stop.load(Ordering::Relaxed) {
        match s.write(&buf) {
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Some(format!("write: {e}")),
        }
    }
    let _ = s.shutdown(std::net::Shutdown::Write);
    None
}

/// Accepts one connection and records every read until EOF (or until stopped and quiet).
fn tcp_receive(l: &TcpListener, stop: &AtomicBool) -> TcpRecord {
    let mut rec = TcpRecord::default();
    let _ = l.set_nonblocking(true);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut s = loop {
        match l.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => {
                rec.error = Some(format!("accept: {e}"));
                return rec;
            }
        }
    };
    let _ = s.set_nonblocking(false);
    let _ = s.set_read_timeout(Some(POLL));
    let mut buf = vec![0u8; TCP_CHUNK];
    // After the stop, give in-flight data this long to arrive (the sender's FIN ends it sooner).
    let mut drain_until: Option<Instant> = None;
    loop {
        if stop.load(Ordering::Relaxed) && drain_until.is_none() {
            drain_until = Some(Instant::now() + Duration::from_secs(3));
        }
        if drain_until.is_some_and(|d| Instant::now() > d) {
            return rec;
        }
        match s.read(&mut buf) {
            Ok(0) => return rec,
            Ok(n) => rec.reads.push((Instant::now(), n)),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                rec.error = Some(format!("read: {e}"));
                return rec;
            }
        }
    }
}

/// Sends a [`VOICE_BYTES`] packet with its sequence number every [`VOICE_INTERVAL`] (on a fixed
/// schedule, no drift) until stopped; the send times.
fn voice_send(dst: SocketAddrV4, stop: &AtomicBool) -> Vec<Instant> {
    let mut sent = Vec::new();
    let Ok(sock) = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)) else {
        return sent;
    };
    let start = Instant::now();
    let mut pkt = [0u8; VOICE_BYTES];
    let mut seq: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        let due = start + VOICE_INTERVAL * u32::try_from(seq).unwrap_or(u32::MAX);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        if let Some(h) = pkt.get_mut(..8) {
            h.copy_from_slice(&seq.to_be_bytes());
        }
        sent.push(Instant::now());
        // A send error (no route while a port is cut) is a lost packet like any other.
        let _ = sock.send_to(&pkt, dst);
        seq += 1;
    }
    sent
}

/// Records (sequence number, arrival) of every voice packet until stopped and quiet.
fn voice_receive(sock: &UdpSocket, stop: &AtomicBool) -> Vec<(u64, Instant)> {
    let mut out = Vec::new();
    let _ = sock.set_read_timeout(Some(POLL));
    let mut buf = [0u8; 2048];
    let mut drain_until: Option<Instant> = None;
    loop {
        if stop.load(Ordering::Relaxed) && drain_until.is_none() {
            drain_until = Some(Instant::now() + Duration::from_secs(2));
        }
        if drain_until.is_some_and(|d| Instant::now() > d) {
            return out;
        }
        if let Ok(n) = sock.recv(&mut buf) {
            if let Some(h) = buf.get(..8).filter(|_| n >= 8) {
                let mut b = [0u8; 8];
                b.copy_from_slice(h);
                out.push((u64::from_be_bytes(b), Instant::now()));
            }
        }
    }
}

/// The longest time without an arrival that ends inside `(from, to]`, spans `from`, or is still
/// open at `to`: for consecutive arrivals a < b with b in (from, to], b − a; and the time from
/// the last arrival up to `to` (a stall that outlasts the window, e.g. a restart whose receiver
/// is still waiting when the next event starts, counts up to the window's end). `times` must be
/// sorted.
pub fn longest_gap(times: &[Instant], from: Instant, to: Instant) -> Duration {
    longest_gap_span(times, from, to).0
}

/// [`longest_gap`] and the arrival (or `from`) it starts at.
pub fn longest_gap_span(times: &[Instant], from: Instant, to: Instant) -> (Duration, Instant) {
    let first_in = times.partition_point(|t| *t <= from);
    let end = times.partition_point(|t| *t <= to);
    let prev = first_in.checked_sub(1).and_then(|i| times.get(i)).copied();
    let inside = times.get(first_in..end).unwrap_or_default();
    let mut gap = (Duration::ZERO, from);
    let mut last = prev.unwrap_or(from);
    for &t in inside {
        if t.saturating_duration_since(last) > gap.0 {
            gap = (t.saturating_duration_since(last), last);
        }
        last = t;
    }
    if to.saturating_duration_since(last) > gap.0 {
        gap = (to.saturating_duration_since(last), last);
    }
    gap
}

/// Packets sent in `[from, to)` that never arrived (each sequence number counted once).
pub fn lost_in(voice: &VoiceRecord, from: Instant, to: Instant) -> (u64, u64) {
    let mut got = vec![false; voice.sent.len()];
    for (seq, _) in &voice.received {
        if let Some(g) = usize::try_from(*seq).ok().and_then(|i| got.get_mut(i)) {
            *g = true;
        }
    }
    let mut sent = 0;
    let mut lost = 0;
    for (t, g) in voice.sent.iter().zip(&got) {
        if *t >= from && *t < to {
            sent += 1;
            if !*g {
                lost += 1;
            }
        }
    }
    (sent, lost)
}

/// TCP goodput in `[from, to)`, Mbit/s.
pub fn mbps_in(reads: &[(Instant, usize)], from: Instant, to: Instant) -> f64 {
    let secs = to.saturating_duration_since(from).as_secs_f64();
    if secs <= 0.0 {
        return 0.0;
    }
    let bytes: usize = reads
        .iter()
        .filter(|(t, _)| *t >= from && *t < to)
        .map(|(_, n)| n)
        .sum();
    bytes as f64 * 8.0 / secs / 1e6
}

/// One ping reply: wall-clock send time (receive time − RTT), sequence number, RTT in ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PingReply {
    /// Seconds since the Unix epoch at which the request left.
    pub sent_unix: f64,
    /// `icmp_seq`.
    pub seq: u64,
    /// Round-trip time, ms.
    pub rtt_ms: f64,
}

/// Parses `ping -D` reply lines (`[1732550000.123456] 64 bytes from ...: icmp_seq=12 ttl=62
/// time=21.5 ms`); other lines are skipped.
pub fn parse_ping(text: &str) -> Vec<PingReply> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix('[') else {
            continue;
        };
        let Some((ts, rest)) = rest.split_once(']') else {
            continue;
        };
        let field = |key: &str| {
            rest.split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .map(str::to_owned)
        };
        let (Ok(ts), Some(seq), Some(time)) =
            (ts.parse::<f64>(), field("icmp_seq="), field("time="))
        else {
            continue;
        };
        let (Ok(seq), Ok(rtt_ms)) = (seq.parse::<u64>(), time.parse::<f64>()) else {
            continue;
        };
        out.push(PingReply {
            sent_unix: ts - rtt_ms / 1000.0,
            seq,
            rtt_ms,
        });
    }
    out.sort_by_key(|r| r.seq);
    out.dedup_by_key(|r| r.seq);
    out
}

/// Pings whose request left in `[from, to)` (Unix seconds): (sent, lost, max RTT ms). The send
/// time of a lost request is interpolated between its answered neighbours.
pub fn ping_in(replies: &[PingReply], from: f64, to: f64) -> (u64, u64, f64) {
    let (mut sent, mut lost, mut max) = (0u64, 0u64, 0.0f64);
    for w in replies.windows(2) {
        let [a, b] = w else { continue };
        if b.seq <= a.seq {
            continue;
        }
        let steps = (b.seq - a.seq) as f64;
        for k in 0..(b.seq - a.seq) {
            let t = a.sent_unix + (b.sent_unix - a.sent_unix) * (k as f64) / steps;
            if t >= from && t < to {
                sent += 1;
                if k == 0 {
                    max = max.max(a.rtt_ms);
                } else {
                    lost += 1;
                }
            }
        }
    }
    if let Some(l) = replies
        .last()
        .filter(|l| l.sent_unix >= from && l.sent_unix < to)
    {
        sent += 1;
        max = max.max(l.rtt_ms);
    }
    (sent, lost, max)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn at(base: Instant, ms: u64) -> Instant {
        base + Duration::from_millis(ms)
    }

    #[test]
    fn the_longest_gap_counts_the_stall_that_spans_the_window_start() {
        let b = Instant::now();
        let times: Vec<Instant> = [0, 10, 20, 30, 450, 460, 470, 900]
            .iter()
            .map(|&m| at(b, m))
            .collect();
        // Window starts at 100 (the cut): the stall 30..450 counts in full.
        assert_eq!(
            longest_gap(&times, at(b, 100), at(b, 800)),
            Duration::from_millis(420)
        );
        // A window with no arrival: from the last arrival to its end.
        assert_eq!(
            longest_gap(&times, at(b, 480), at(b, 880)),
            Duration::from_millis(410)
        );
        // A stall still open at the window's end counts up to the end (470..700).
        assert_eq!(
            longest_gap(&times, at(b, 455), at(b, 700)),
            Duration::from_millis(230)
        );
        // Steady arrivals: the spacing.
        assert_eq!(
            longest_gap(&times, at(b, 5), at(b, 30)),
            Duration::from_millis(10)
        );
    }

    #[test]
    fn lost_voice_packets_are_counted_by_send_time() {
        let b = Instant::now();
        let voice = VoiceRecord {
            sent: (0..10).map(|i| at(b, i * 20)).collect(),
            received: [0u64, 1, 2, 5, 6, 9, 9].iter().map(|&s| (s, b)).collect(),
        };
        assert_eq!(lost_in(&voice, at(b, 0), at(b, 200)), (10, 4));
        assert_eq!(lost_in(&voice, at(b, 60), at(b, 100)), (2, 2));
    }

    #[test]
    fn goodput_counts_bytes_in_the_window() {
        let b = Instant::now();
        let reads = vec![(at(b, 0), 125_000), (at(b, 500), 125_000), (at(b, 1000), 1)];
        assert!((mbps_in(&reads, at(b, 0), at(b, 1000)) - 2.0).abs() < 1e-9);
    }

    #[test]
    fn ping_lines_parse_and_losses_fall_in_their_window() {
        let text = "PING 198.19.2.10 (198.19.2.10) 56(84) bytes of data.\n\
            [100.020000] 64 bytes from 198.19.2.10: icmp_seq=1 ttl=62 time=20.0 ms\n\
            [100.040000] 64 bytes from 198.19.2.10: icmp_seq=2 ttl=62 time=20.0 ms\n\
            [100.120000] 64 bytes from 198.19.2.10: icmp_seq=6 ttl=62 time=40.0 ms\n\
            [100.120000] 64 bytes from 198.19.2.10: icmp_seq=7 ttl=62 time=20.0 ms\n\
            --- 198.19.2.10 ping statistics ---\n";
        let r = parse_ping(text);
        assert_eq!(r.len(), 4);
        assert!((r[0].sent_unix - 100.0).abs() < 1e-9);
        // Requests 3, 4, 5 were lost between 100.02 and 100.08.
        let (sent, lost, max) = ping_in(&r, 100.0, 101.0);
        assert_eq!((sent, lost), (7, 3));
        assert!((max - 40.0).abs() < 1e-9);
        assert_eq!(ping_in(&r, 200.0, 201.0), (0, 0, 0.0));
    }
}
