//! One pass of `bench failover`: the flows ([`super::probe`]) from host 1 to host 2, a ping beside
//! them, and a list of [`Step`]s performed on a [`Target`] (the 2x2 testbed, or the paper system);
//! then every event's figures from the receive records.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use serde::Serialize;

use super::probe;

/// TCP port of the bulk flow at host 2 (the voice stream uses the next one).
const PORT: u16 = 5400;
/// Traffic before the first cut.
const WARMUP: Duration = Duration::from_secs(4);
/// Goodput is averaged over this long at the end of a window (and before an event).
const RATE_WINDOW: Duration = Duration::from_secs(2);

/// One event's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    /// `cut`, `restore`, `mmsg_restart` or `mmsg_kill9`.
    pub kind: String,
    /// The WAN port, e.g. `1a`, or the restarted gateway, e.g. `gw1`.
    pub port: String,
    /// Restarts: from the stop until every connection of both gateways had its n × m subflows
    /// again, ms (`None`: not within the window).
    pub tunnels_up_ms: Option<f64>,
    /// max(`tcp_gap_ms`, `udp_gap_ms`).
    pub gap_ms: f64,
    /// Longest time the TCP receiver got nothing, in the event's window.
    pub tcp_gap_ms: f64,
    /// Longest time between two voice packets at the receiver, in the event's window.
    pub udp_gap_ms: f64,
    /// The longest gap (TCP or voice) in the 2 s before the event: the noise floor.
    pub before_gap_ms: f64,
    /// When the event began (Unix seconds; to line up with the gateways' logs).
    pub at_unix: f64,
    /// When the TCP flow's longest gap began, ms after the event (negative: before it).
    pub tcp_gap_from_ms: f64,
    /// When the voice stream's longest gap began, ms after the event.
    pub udp_gap_from_ms: f64,
    /// Voice packets sent in the window.
    pub udp_sent: u64,
    /// Of those, never received.
    pub udp_lost: u64,
    /// Pings sent in the window.
    pub ping_sent: u64,
    /// Of those, unanswered.
    pub ping_lost: u64,
    /// Worst ping RTT in the window, ms.
    pub ping_max_ms: f64,
    /// Tunnel connections the gateways declared dead in the window (nothing received for 3 s;
    /// `mmsg status` counter `conn_dead`). A single cut or restore must lose none: the other
    /// uplinks carry on. `None` where not read (the paper target; a restarted gateway counts
    /// from 0 again).
    pub conns_dead: Option<u64>,
    /// TCP goodput in the 2 s before the event, Mbit/s.
    pub before_mbps: f64,
    /// TCP goodput in the last 2 s of the window, Mbit/s.
    pub recovered_mbps: f64,
}

/// One pass over every port in one mode.
#[derive(Debug, Clone, Serialize)]
pub struct ModeRun {
    /// `before` (detector off) or `after`.
    pub mode: String,
    /// Repetition (0-based).
    pub rep: u32,
    /// The TCP connection lasted the whole pass without an error.
    pub tcp_survived: bool,
    /// The error that ended it, if one did.
    pub tcp_error: Option<String>,
    /// The events, in order.
    pub events: Vec<Event>,
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// One event's window on both clocks.
#[derive(Debug, Clone)]
struct Window {
    kind: &'static str,
    port: String,
    from: Instant,
    to: Instant,
    from_unix: f64,
    to_unix: f64,
}

/// What a pass acts on: the 2x2 testbed's ports and `mmsg`s, or the paper system
/// ([`super::paper`]).
pub trait Target {
    /// Performs event `kind` on `port` (a WAN port, `gw<b>`, `ssc`); returns, for events that
    /// take tunnels down, how long until they were all up again (ms), if it waited for that.
    fn act(&mut self, kind: &str, port: &str) -> anyhow::Result<Option<f64>>;

    /// Tunnel connections the gateways declared dead so far (nothing received for 3 s), if the
    /// target can tell.
    fn conns_dead(&self) -> Option<u64> {
        None
    }
}

/// One event of a pass: what, on which port or gateway, and how long from its start until the
/// next event.
#[derive(Debug, Clone)]
pub struct Step {
    /// Event kind (`cut`, `restore`, `mmsg_restart`, ...).
    pub kind: &'static str,
    /// Its port or gateway.
    pub port: String,
    /// Time from the event's start to the next one (at least what the action took).
    pub wait: Duration,
}

/// A duration in ms with one decimal.
pub fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e4).round() / 10.0
}

/// `t` relative to `origin`, ms (negative when earlier).
fn offset_ms(origin: Instant, t: Instant) -> f64 {
    if t >= origin {
        ms(t - origin)
    } else {
        -ms(origin - t)
    }
}

/// Runs the flows from host 1 (`h1`) to host 2 (`h2`, address `dst`) and the `steps` on
/// `target`; returns the figures of every event.
pub fn run_pass(
    (h1, h2, dst): (&str, &str, std::net::Ipv4Addr),
    target: &mut dyn Target,
    steps: &[Step],
    mode: &str,
    rep: u32,
) -> anyhow::Result<ModeRun> {
    let mut ping = Command::new("ip")
        .args(["netns", "exec", h1, "ping", "-D", "-n", "-i", "0.02"])
        .arg(dst.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("start ping")?;
    // Read its output as it comes (a full pipe would block ping).
    let out = ping.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut so) = out {
            use std::io::Read as _;
            let _ = so.read_to_string(&mut text);
        }
        text
    });
    let ping = PingChild(Some(ping), Some(reader));
    let flows = probe::start(h1, h2, dst, PORT)?;
    std::thread::sleep(WARMUP);
    let mut windows: Vec<Window> = Vec::new();
    let mut tunnels_up: Vec<Option<f64>> = Vec::new();
    // `conn_dead` at each window's start, and at the end.
    let mut dead_at: Vec<Option<u64>> = Vec::new();
    let mut result = Ok(());
    for step in steps {
        dead_at.push(target.conns_dead());
        let (now, now_u) = (Instant::now(), unix_now());
        if let Some(w) = windows.last_mut() {
            w.to = now;
            w.to_unix = now_u;
        }
        windows.push(Window {
            kind: step.kind,
            port: step.port.clone(),
            from: now,
            to: now,
            from_unix: now_u,
            to_unix: now_u,
        });
        eprintln!("failover {mode}: {} {}", step.kind, step.port);
        match target.act(step.kind, &step.port) {
            Ok(up) => tunnels_up.push(up),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
        if let Some(rest) = step.wait.checked_sub(now.elapsed()) {
            std::thread::sleep(rest);
        }
    }
    dead_at.push(target.conns_dead());
    // Close the last window.
    if let Some(w) = windows.last_mut() {
        w.to = Instant::now();
        w.to_unix = unix_now();
    }
    let rec = flows.stop();
    let ping_text = ping.finish();
    result?;
    let replies = probe::parse_ping(&ping_text);
    let tcp_times: Vec<Instant> = rec.tcp.reads.iter().map(|(t, _)| *t).collect();
    let mut voice_times: Vec<Instant> = rec.voice.received.iter().map(|(_, t)| *t).collect();
    voice_times.sort();
    let events = windows
        .iter()
        .zip(tunnels_up.iter().chain(std::iter::repeat(&None)))
        .zip(dead_at.windows(2))
        .map(|((w, &tunnels_up_ms), dead)| {
            let (tcp_gap, tcp_from) = probe::longest_gap_span(&tcp_times, w.from, w.to);
            let (udp_gap, udp_from) = probe::longest_gap_span(&voice_times, w.from, w.to);
            let (udp_sent, udp_lost) = probe::lost_in(&rec.voice, w.from, w.to);
            let (ping_sent, ping_lost, ping_max_ms) =
                probe::ping_in(&replies, w.from_unix, w.to_unix);
            Event {
                kind: w.kind.to_owned(),
                port: w.port.clone(),
                tunnels_up_ms,
                gap_ms: ms(tcp_gap.max(udp_gap)),
                tcp_gap_ms: ms(tcp_gap),
                udp_gap_ms: ms(udp_gap),
                before_gap_ms: {
                    let quiet = w.from.checked_sub(RATE_WINDOW).unwrap_or(w.from);
                    ms(
                        probe::longest_gap(&tcp_times, quiet, w.from).max(probe::longest_gap(
                            &voice_times,
                            quiet,
                            w.from,
                        )),
                    )
                },
                at_unix: w.from_unix,
                tcp_gap_from_ms: offset_ms(w.from, tcp_from),
                udp_gap_from_ms: offset_ms(w.from, udp_from),
                udp_sent,
                udp_lost,
                ping_sent,
                ping_lost,
                ping_max_ms,
                conns_dead: match dead {
                    // A restart's window spans two processes' counters.
                    [Some(a), Some(b)] if matches!(w.kind, "cut" | "restore") => b.checked_sub(*a),
                    _ => None,
                },
                before_mbps: probe::mbps_in(
                    &rec.tcp.reads,
                    w.from.checked_sub(RATE_WINDOW).unwrap_or(w.from),
                    w.from,
                ),
                recovered_mbps: probe::mbps_in(
                    &rec.tcp.reads,
                    w.to.checked_sub(RATE_WINDOW).unwrap_or(w.from).max(w.from),
                    w.to,
                ),
            }
        })
        .collect();
    let tcp_error = rec.tcp.error.or(rec.tcp_sender_error);
    // Data must have kept arriving up to the end (a silently stalled connection is lost too).
    let last_read = tcp_times.last().copied();
    let end = windows.last().map(|w| w.to);
    let stalled_at_end = match (last_read, end) {
        (Some(l), Some(e)) => e.saturating_duration_since(l) > Duration::from_secs(2),
        _ => true,
    };
    let tcp_error = tcp_error.or(stalled_at_end.then(|| "no TCP data in the last 2 s".to_owned()));
    Ok(ModeRun {
        mode: mode.to_owned(),
        rep,
        tcp_survived: tcp_error.is_none(),
        tcp_error,
        events,
    })
}

/// The ping child and the thread reading its output: interrupted by PID on
/// [`PingChild::finish`], killed on drop.
#[derive(Debug)]
struct PingChild(Option<Child>, Option<std::thread::JoinHandle<String>>);

impl PingChild {
    fn finish(mut self) -> String {
        let Some(mut c) = self.0.take() else {
            return String::new();
        };
        // SAFETY: kill(2) on the PID of the child we spawned (`ip netns exec` execs ping).
        unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGINT) };
        let _ = c.wait();
        self.1
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for PingChild {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Prints one pass as a table.
pub fn print_run(r: &ModeRun) {
    println!(
        "{} (rep {}): TCP connection {}",
        r.mode,
        r.rep,
        r.tcp_error
            .as_deref()
            .map_or("survived".to_owned(), |e| format!("LOST ({e})"))
    );
    println!(
        "{:<17} {:>8} {:>8} {:>8} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6}",
        "event",
        "gap ms",
        "tcp gap",
        "udp gap",
        "udp lost",
        "ping lost",
        "ping max",
        "before",
        "recov.",
        "tun. up",
        "tcp gap@",
        "dead"
    );
    for e in &r.events {
        println!(
            "{:<17} {:>8.0} {:>8.0} {:>8.0} {:>5}/{:<3} {:>6}/{:<3} {:>9.0} {:>9.1} {:>9.1} {:>9} {:>9.0} {:>6}",
            format!("{} {}", e.kind, e.port),
            e.gap_ms,
            e.tcp_gap_ms,
            e.udp_gap_ms,
            e.udp_lost,
            e.udp_sent,
            e.ping_lost,
            e.ping_sent,
            e.ping_max_ms,
            e.before_mbps,
            e.recovered_mbps,
            e.tunnels_up_ms
                .map_or("-".to_owned(), |t| format!("{t:.0}")),
            e.tcp_gap_from_ms,
            e.conns_dead.map_or("-".to_owned(), |n| n.to_string())
        );
    }
}
