//! The writer's batch ([`super::conn_io`]): the frames taken out of a connection's core for one
//! vectored write, kept across writes that the liveness deadline cuts short.
//!
//! A write is cut short when the socket stays full until the next liveness timer (every subflow
//! gone: nothing is ever acknowledged). The writer then runs the timers and comes back to the
//! batch. What was cut short is one of two things, and both must be written before the writer
//! waits for new packets:
//! - the rest of the batch (frames not yet handed to the socket);
//! - nothing of the batch, but records the TLS layer accepted and could not flush yet.
//!
//! The second case once stopped a bulk connection for good: the batch was empty, so the writer
//! saw nothing to write, and the bytes of the cut-short batch still counted against the send
//! budget's room, so no new frame (and no keepalive) was taken either (`e2e_adaptive`'s
//! automatic path test in CI: the sender's queue held 450 KB, its socket was empty, and the
//! peer closed the connection 12 s later).

use std::collections::VecDeque;

use bytes::BytesMut;

/// Most packets written per `write_vectored` batch (well under IOV_MAX = 1024).
pub(super) const MAX_BATCH_PACKETS: usize = 64;

/// What a complete write carried, for the counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Written {
    /// Frame bytes (headers included).
    pub bytes: usize,
    /// Data frames.
    pub frames: u64,
    /// Keepalive frames.
    pub keepalives: u64,
}

/// The writer's batch.
#[derive(Debug, Default)]
pub(super) struct Batch {
    /// What is still to be handed to the socket (the front may be a partly written frame).
    frames: VecDeque<BytesMut>,
    /// What the batch carried since its last complete write.
    taken: Written,
    /// A write was cut short: the batch must be written (and flushed) again even if `frames` is
    /// empty.
    unfinished: bool,
}

impl Batch {
    /// An empty batch.
    pub(super) fn new() -> Self {
        Batch {
            frames: VecDeque::with_capacity(MAX_BATCH_PACKETS),
            ..Batch::default()
        }
    }

    /// Takes frames from `next` while the bytes still to write are below `room` (the send
    /// budget's room, or the whole batch size) and the batch has fewer than
    /// [`MAX_BATCH_PACKETS`]. Only what is still to write counts against `room`, never what a
    /// cut-short write already handed to the socket.
    pub(super) fn fill(&mut self, room: usize, mut next: impl FnMut() -> Option<(BytesMut, bool)>) {
        let mut pending: usize = self.frames.iter().map(BytesMut::len).sum();
        while self.frames.len() < MAX_BATCH_PACKETS && pending < room {
            let Some((frame, keepalive)) = next() else {
                break;
            };
            pending += frame.len();
            self.taken.bytes += frame.len();
            if keepalive {
                self.taken.keepalives += 1;
            } else {
                self.taken.frames += 1;
            }
            self.frames.push_back(frame);
        }
    }

    /// Whether the writer must write (and flush) before it may wait for new packets.
    pub(super) fn must_write(&self) -> bool {
        !self.frames.is_empty() || self.unfinished
    }

    /// The frames still to hand to the socket (the write advances and pops them).
    pub(super) fn frames_mut(&mut self) -> &mut VecDeque<BytesMut> {
        &mut self.frames
    }

    /// The write (or its flush) was cut short by the liveness deadline.
    pub(super) fn cut_short(&mut self) {
        self.unfinished = true;
    }

    /// The write and its flush completed: what the batch carried (the batch is empty again).
    pub(super) fn written(&mut self) -> Written {
        debug_assert!(self.frames.is_empty());
        self.unfinished = false;
        std::mem::take(&mut self.taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(n: usize) -> Option<(BytesMut, bool)> {
        Some((BytesMut::from(&vec![0u8; n][..]), false))
    }

    #[test]
    fn a_batch_fills_up_to_its_room_and_counts_what_it_took() {
        let mut b = Batch::new();
        let mut keepalive_sent = false;
        b.fill(2500, || frame(1000));
        assert_eq!(b.frames_mut().len(), 3, "1000 + 1000 < 2500, then one more");
        assert!(b.must_write());
        b.frames_mut().clear();
        assert_eq!(
            b.written(),
            Written {
                bytes: 3000,
                frames: 3,
                keepalives: 0
            }
        );
        b.fill(100, || {
            if keepalive_sent {
                return None;
            }
            keepalive_sent = true;
            Some((BytesMut::from(&[0u8; 12][..]), true))
        });
        b.frames_mut().clear();
        assert_eq!(b.written().keepalives, 1);
        assert!(!b.must_write());
    }

    #[test]
    fn a_write_cut_short_after_the_socket_took_the_whole_batch_is_still_finished() {
        let mut b = Batch::new();
        b.fill(4000, || frame(1000));
        // The TLS layer took every frame but could not flush its records before the deadline.
        b.frames_mut().clear();
        b.cut_short();
        assert!(b.must_write(), "the unflushed records must be flushed");
        // New packets still fit: what the socket took no longer counts against the room.
        b.fill(4000, || frame(1000));
        assert_eq!(b.frames_mut().len(), 4);
        b.frames_mut().clear();
        let w = b.written();
        assert_eq!((w.bytes, w.frames), (8000, 8), "both writes counted once");
        assert!(!b.must_write());
    }

    #[test]
    fn a_batch_cut_short_midway_keeps_its_rest_and_takes_only_what_fits() {
        let mut b = Batch::new();
        b.fill(3000, || frame(1000));
        // One frame and a half were written.
        b.frames_mut().pop_front();
        if let Some(f) = b.frames_mut().front_mut() {
            bytes::Buf::advance(f, 500);
        }
        b.cut_short();
        // 1500 bytes still to write: frames are taken while that is below 3000 (1500, 2500),
        // not while the 3000 the batch took in all is (it would take none).
        b.fill(3000, || frame(1000));
        assert_eq!(b.frames_mut().len(), 4);
        let rest: usize = b.frames_mut().iter().map(BytesMut::len).sum();
        assert_eq!(rest, 3500);
    }
}
