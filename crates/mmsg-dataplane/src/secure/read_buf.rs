//! The socket under TLS: reads through a buffer that starts small on an accepted connection
//! ([`TLS_PREAUTH_READ_BUF`]) and grows to [`TLS_READ_BUF`] once the peer authenticated
//! ([`Buffered::grow`]), so an unauthenticated connection cannot make us fill 256 KiB of read
//! buffer (docs/security.md "Pre-auth limits"). Writes go straight to the socket (so a
//! write-capping adapter can still sit right on it).

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// Read buffer under TLS once authenticated: rustls reads its input 4 KiB at a time; this buffer
/// turns those reads into one socket read of up to 256 KiB (the same order as the tunnel's
/// RX_CHUNK), so the syscall count of the encrypted reader stays that of the clear one. 256 KiB
/// per connection, 4 MiB for the 16 connections of a 2-branch, 2-group gateway.
pub const TLS_READ_BUF: usize = 256 * 1024;

/// Read buffer of an accepted connection until its TLS handshake completed: one maximal TLS
/// record (16 KiB of plaintext + 256 bytes of expansion + 5 of header) fits, and a client's whole
/// first flight is a few KiB. 256 unauthenticated connections (`MAX_PREAUTH_TOTAL`) hold at
/// most 4 MiB of it (rustls' own handshake buffer comes on top: it joins a handshake message of
/// up to 64 KiB).
pub const TLS_PREAUTH_READ_BUF: usize = 16 * 1024 + 256 + 5;

/// A TCP socket with a read buffer (see the module docs).
#[derive(Debug)]
pub struct Buffered {
    io: TcpStream,
    buf: Box<[u8]>,
    /// Unread bytes are `buf[pos..filled]`.
    pos: usize,
    filled: usize,
}

impl Buffered {
    /// `io` with a read buffer of `capacity` bytes.
    pub fn with_capacity(capacity: usize, io: TcpStream) -> Buffered {
        Buffered {
            io,
            buf: vec![0; capacity].into_boxed_slice(),
            pos: 0,
            filled: 0,
        }
    }

    /// The socket.
    pub fn get_ref(&self) -> &TcpStream {
        &self.io
    }

    /// The read buffer's size.
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// Grows the read buffer to [`TLS_READ_BUF`] (keeping the bytes not read yet); called once
    /// the peer authenticated.
    pub fn grow(&mut self) {
        if self.buf.len() >= TLS_READ_BUF {
            return;
        }
        let mut big = vec![0; TLS_READ_BUF].into_boxed_slice();
        let unread = self.buf.get(self.pos..self.filled).unwrap_or_default();
        if let Some(dst) = big.get_mut(..unread.len()) {
            dst.copy_from_slice(unread);
        }
        self.filled = unread.len();
        self.pos = 0;
        self.buf = big;
    }
}

impl AsyncRead for Buffered {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.pos >= this.filled {
            if out.remaining() >= this.buf.len() {
                // Nothing buffered and the caller's buffer is as large as ours: no copy.
                return Pin::new(&mut this.io).poll_read(cx, out);
            }
            let mut rb = ReadBuf::new(&mut this.buf);
            ready!(Pin::new(&mut this.io).poll_read(cx, &mut rb))?;
            this.filled = rb.filled().len();
            this.pos = 0;
        }
        let avail = this.buf.get(this.pos..this.filled).unwrap_or_default();
        let n = avail.len().min(out.remaining());
        out.put_slice(avail.get(..n).unwrap_or_default());
        this.pos += n;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Buffered {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Bytes buffered before [`Buffered::grow`] are read after it, in order; small reads and a
    /// read larger than the buffer both see the whole stream.
    #[tokio::test]
    async fn grow_keeps_the_unread_bytes() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let data: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
        let send = data.clone();
        let writer = tokio::spawn(async move {
            let mut c = TcpStream::connect(addr).await.unwrap();
            c.write_all(&send).await.unwrap();
        });
        let (s, _) = l.accept().await.unwrap();
        let mut b = Buffered::with_capacity(TLS_PREAUTH_READ_BUF, s);
        assert_eq!(b.capacity(), TLS_PREAUTH_READ_BUF);
        let mut got = vec![0; 100];
        b.read_exact(&mut got).await.unwrap();
        b.grow();
        assert_eq!(b.capacity(), TLS_READ_BUF);
        let mut small = vec![0; 4096];
        b.read_exact(&mut small).await.unwrap();
        got.extend_from_slice(&small);
        b.read_to_end(&mut got).await.unwrap();
        writer.await.unwrap();
        assert_eq!(got.len(), data.len());
        assert!(got == data, "same bytes in the same order");
    }
}
