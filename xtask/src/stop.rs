//! Stopping a long run cleanly on SIGINT or SIGTERM (`cargo xtask experiment`).
//!
//! An experiment runs for minutes to hours and owns a testbed: namespaces, `ssc`, five `mmsg`,
//! Open vSwitch, the WAN emulator, background iperf3 hosts. With the default dispositions a
//! signal ended `xtask` at once and left all of that behind (and the cases measured so far were
//! lost: the report is written at the end). [`install`] replaces the default action of both
//! signals with a flag; the run checks it ([`check`]) between measurements, unwinds with an error,
//! and its `Drop` impls tear the testbed down. A second signal ends the process at once (the
//! default action), for when the teardown itself hangs.
//!
//! Children started after [`install`] get the default dispositions back at `exec` (handled
//! signals are reset), so `kill -TERM <xtask>` stops only `xtask`, and a Ctrl-C, which the
//! terminal sends to the whole foreground process group, also ends the measurement's iperf3 at
//! once; either way the step fails, [`requested`] tells why, and the run does not retry it.

use std::sync::atomic::{AtomicI32, Ordering};

/// The first stop signal received (0: none).
static STOP: AtomicI32 = AtomicI32::new(0);

/// Written to stderr on the first signal (from the handler: `write(2)` only).
const FIRST: &[u8] = b"xtask: stopping after the current step and tearing the testbed down \
(a second signal ends xtask at once)\n";

extern "C" fn on_signal(sig: libc::c_int) {
    if STOP.swap(sig, Ordering::SeqCst) == 0 {
        // SAFETY: write(2) is async-signal-safe; a static buffer of known length.
        unsafe {
            libc::write(libc::STDERR_FILENO, FIRST.as_ptr().cast(), FIRST.len());
        }
    } else {
        // SAFETY: signal() and raise() are async-signal-safe; the second signal takes the default
        // action (ends the process) as if no handler had been installed.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }
}

/// Replaces the default action of SIGINT and SIGTERM by a flag that [`requested`] reads.
/// Blocking calls are restarted (`SA_RESTART`): the current step finishes as it would have.
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `sa` is zero-initialised and then filled; the handler only touches an atomic
        // and async-signal-safe libc calls.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// The stop signal received since [`install`], if any.
pub fn requested() -> Option<Signal> {
    match STOP.load(Ordering::SeqCst) {
        libc::SIGINT => Some(Signal::Int),
        libc::SIGTERM => Some(Signal::Term),
        _ => None,
    }
}

/// `Err` once a stop signal arrived: call it between steps and propagate with `?`.
pub fn check() -> anyhow::Result<()> {
    match requested() {
        Some(s) => Err(anyhow::anyhow!("stopped by {s}")),
        None => Ok(()),
    }
}

/// A stop signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT (Ctrl-C).
    Int,
    /// SIGTERM.
    Term,
}

impl Signal {
    /// The signal's number, to forward it to a child.
    pub fn number(self) -> libc::c_int {
        match self {
            Signal::Int => libc::SIGINT,
            Signal::Term => libc::SIGTERM,
        }
    }

    /// The exit code of a process ended by this signal, by the shell's convention (128 + n).
    pub fn exit_code(self) -> i32 {
        128 + self.number()
    }
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Signal::Int => "SIGINT",
            Signal::Term => "SIGTERM",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_sets_the_flag_instead_of_ending_the_process() {
        install();
        assert!(check().is_ok());
        // SAFETY: raising a signal whose handler was installed just above.
        unsafe {
            libc::raise(libc::SIGTERM);
        }
        assert_eq!(requested(), Some(Signal::Term));
        assert_eq!(check().unwrap_err().to_string(), "stopped by SIGTERM");
        assert_eq!(Signal::Term.exit_code(), 143);
        assert_eq!(Signal::Int.exit_code(), 130);
        // Leave the process as it was for the other tests of this binary.
        STOP.store(0, Ordering::SeqCst);
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: restoring the default disposition.
            unsafe {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
    }
}
