//! The latency probes of `bench latency`: real sockets, run on threads that entered a testbed
//! namespace (`setns(CLONE_NEWNET)` affects only the calling thread, so the probe needs no
//! binary of its own inside the namespace).
//!
//! - [`udp_echo`] + [`udp_probe`]: a sparse, voice-like flow (172-byte datagrams every 20 ms with
//!   a sequence number, echoed back by the far host): per-packet RTT and loss. With `dscp` set
//!   (46, expedited forwarding) the same flow is Type I by the example classifier's rule
//!   `realtime`; the echo server sends its replies with the same mark.
//! - [`rr_server`] + [`rr_probe`]: a request/response probe like netperf's TCP_RR: one TCP
//!   connection, 1-byte request, 1-byte response, one transaction at a time (at most one per
//!   `RR_PACING`): the transaction times.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// Payload of the voice-like probe (a G.711 20 ms frame + RTP header is 172 bytes).
pub const VOICE_BYTES: usize = 172;
/// Interval of the voice-like probe.
pub const VOICE_INTERVAL: Duration = Duration::from_millis(20);
/// Shortest time between two request/response transactions.
pub const RR_PACING: Duration = Duration::from_millis(10);
/// How long a probe waits for late replies after its last request.
pub const DRAIN: Duration = Duration::from_secs(3);

/// Runs `f` on a new thread inside network namespace `ns` (`/run/netns/<ns>`).
pub fn in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> JoinHandle<anyhow::Result<T>> {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).with_context(|| format!("open {path}"))?;
        // SAFETY: setns(2) on an open namespace file; it changes only this thread's network
        // namespace, and the thread creates all its sockets afterwards.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        if rc != 0 {
            bail!("setns {path}: {}", std::io::Error::last_os_error());
        }
        drop(file);
        f()
    })
}

/// Joins a probe thread.
pub fn join<T>(h: JoinHandle<anyhow::Result<T>>) -> anyhow::Result<T> {
    h.join()
        .map_err(|_| anyhow::anyhow!("probe thread panicked"))?
}

/// Sets `IP_TOS` to `dscp << 2`.
fn set_dscp(fd: &impl AsRawFd, dscp: u8) -> anyhow::Result<()> {
    let tos: libc::c_int = i32::from(dscp & 0x3f) << 2;
    // SAFETY: setsockopt(2) on an open socket with a pointer to a c_int and its size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_TOS,
            std::ptr::addr_of!(tos).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        bail!("IP_TOS: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// A server thread that runs until [`Stop::stop`].
#[derive(Debug)]
pub struct Stop {
    flag: Arc<AtomicBool>,
    handle: Option<JoinHandle<anyhow::Result<()>>>,
}

impl Stop {
    /// Stops the server and returns its error, if any.
    pub fn stop(mut self) -> anyhow::Result<()> {
        self.flag.store(true, Ordering::Relaxed);
        match self.handle.take() {
            Some(h) => join(h),
            None => Ok(()),
        }
    }
}

impl Drop for Stop {
    fn drop(&mut self) {
        self.flag.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// An echo server for [`udp_probe`] in `ns` on `port`, replying with `dscp`.
pub fn udp_echo(ns: &str, port: u16, dscp: u8) -> anyhow::Result<Stop> {
    let flag = Arc::new(AtomicBool::new(false));
    let stop = Arc::clone(&flag);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let handle = in_netns(ns, move || {
        let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))
            .with_context(|| format!("bind UDP {port}"))?;
        set_dscp(&s, dscp)?;
        s.set_read_timeout(Some(Duration::from_millis(100)))?;
        let _ = ready_tx.send(());
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            match s.recv_from(&mut buf) {
                Ok((n, from)) => {
                    let _ = s.send_to(buf.get(..n).unwrap_or_default(), from);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    });
    wait_ready(ready_rx, handle, flag)
}

fn wait_ready(
    ready: std::sync::mpsc::Receiver<()>,
    handle: JoinHandle<anyhow::Result<()>>,
    flag: Arc<AtomicBool>,
) -> anyhow::Result<Stop> {
    match ready.recv_timeout(Duration::from_secs(5)) {
        Ok(()) => Ok(Stop {
            flag,
            handle: Some(handle),
        }),
        Err(_) => {
            flag.store(true, Ordering::Relaxed);
            join(handle)?;
            bail!("probe server did not start")
        }
    }
}

/// What a probe saw: one RTT (ms) per answered request, and the requests sent.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    /// RTTs of the answered requests, ms.
    pub rtt_ms: Vec<f64>,
    /// Requests sent.
    pub sent: u64,
}

impl Samples {
    /// Requests without an answer, percent of those sent.
    pub fn loss_pct(&self) -> f64 {
        if self.sent == 0 {
            return 0.0;
        }
        100.0 * (self.sent.saturating_sub(self.rtt_ms.len() as u64)) as f64 / self.sent as f64
    }
}

/// Sends [`VOICE_BYTES`] datagrams every [`VOICE_INTERVAL`] for `dur` from `ns` to `dst`
/// (marked `dscp`), then waits [`DRAIN`] for late echoes. Duplicates and unknown sequence
/// numbers are ignored; an echo arriving after the drain counts as lost.
pub fn udp_probe(
    ns: &str,
    dst: SocketAddrV4,
    dscp: u8,
    dur: Duration,
) -> JoinHandle<anyhow::Result<Samples>> {
    in_netns(ns, move || {
        let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))?;
        set_dscp(&s, dscp)?;
        s.connect(dst)?;
        let start = Instant::now();
        let end = start + dur;
        let mut sent_at: Vec<Instant> = Vec::new();
        let mut rtt: Vec<Option<f64>> = Vec::new();
        let mut next = start;
        let mut pkt = [0u8; VOICE_BYTES];
        let mut buf = [0u8; 2048];
        loop {
            let now = Instant::now();
            if now >= next && now < end {
                let seq = sent_at.len() as u32;
                pkt.get_mut(..4)
                    .context("packet")?
                    .copy_from_slice(&seq.to_be_bytes());
                // A send error (e.g. ENOBUFS) is a lost packet, as on a real phone.
                let _ = s.send(&pkt);
                sent_at.push(now);
                rtt.push(None);
                next += VOICE_INTERVAL;
                continue;
            }
            if now >= end + DRAIN || (now >= end && rtt.iter().all(Option::is_some)) {
                break;
            }
            let wake = if now < end { next } else { end + DRAIN };
            let wait = wake
                .saturating_duration_since(now)
                .max(Duration::from_micros(100));
            s.set_read_timeout(Some(wait))?;
            if let Ok(n) = s.recv(&mut buf) {
                let got = Instant::now();
                if n == VOICE_BYTES {
                    let mut seq = [0u8; 4];
                    seq.copy_from_slice(buf.get(..4).context("packet")?);
                    let i = u32::from_be_bytes(seq) as usize;
                    if let (Some(slot @ None), Some(t)) = (rtt.get_mut(i), sent_at.get(i)) {
                        *slot = Some(got.duration_since(*t).as_secs_f64() * 1e3);
                    }
                }
            }
        }
        Ok(Samples {
            rtt_ms: rtt.into_iter().flatten().collect(),
            sent: sent_at.len() as u64,
        })
    })
}

/// A TCP request/response server in `ns` on `port`: answers every byte with one byte; one
/// connection at a time.
pub fn rr_server(ns: &str, port: u16) -> anyhow::Result<Stop> {
    let flag = Arc::new(AtomicBool::new(false));
    let stop = Arc::clone(&flag);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let handle = in_netns(ns, move || {
        let l = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))
            .with_context(|| format!("listen TCP {port}"))?;
        l.set_nonblocking(true)?;
        let _ = ready_tx.send(());
        while !stop.load(Ordering::Relaxed) {
            let mut c = match l.accept() {
                Ok((c, _)) => c,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            c.set_nonblocking(false)?;
            c.set_nodelay(true)?;
            c.set_read_timeout(Some(Duration::from_millis(200)))?;
            let mut b = [0u8; 1];
            while !stop.load(Ordering::Relaxed) {
                match c.read(&mut b) {
                    Ok(0) => break,
                    Ok(_) => {
                        if c.write_all(&b).is_err() {
                            break;
                        }
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(_) => break,
                }
            }
        }
        Ok(())
    });
    wait_ready(ready_rx, handle, flag)
}

/// Request/response transactions from `ns` to `dst` for `dur` (one at a time, at most one per
/// [`RR_PACING`]); a transaction unanswered after [`DRAIN`] ends the probe and counts as lost.
pub fn rr_probe(ns: &str, dst: SocketAddrV4, dur: Duration) -> JoinHandle<anyhow::Result<Samples>> {
    in_netns(ns, move || {
        let mut c = TcpStream::connect_timeout(&dst.into(), DRAIN)
            .with_context(|| format!("connect {dst}"))?;
        c.set_nodelay(true)?;
        c.set_read_timeout(Some(DRAIN))?;
        let end = Instant::now() + dur;
        let mut out = Samples::default();
        let mut b = [0u8; 1];
        while Instant::now() < end {
            let t0 = Instant::now();
            out.sent += 1;
            c.write_all(b"x")?;
            match c.read(&mut b) {
                Ok(1) => out.rtt_ms.push(t0.elapsed().as_secs_f64() * 1e3),
                _ => break,
            }
            let next = t0 + RR_PACING;
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
        Ok(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_counts_unanswered_requests() {
        let s = Samples {
            rtt_ms: vec![1.0; 995],
            sent: 1000,
        };
        assert!((s.loss_pct() - 0.5).abs() < 1e-9);
        assert_eq!(Samples::default().loss_pct(), 0.0);
    }
}
