//! Bounded big-endian readers and writers shared by every codec in this crate.
//!
//! Decoders never index: every read goes through [`Reader`], which checks the remaining length
//! first and reports [`DecodeError::Truncated`] with the name of the structure being read. Nested
//! TLVs are parsed from sub-readers that cannot run past their declared length (STYLE.md §3).
//! Of the crate it imports only `error`.

use crate::error::{DecodeError, EncodeError};

/// A cursor over a byte slice that never reads past its end.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// A reader over `buf`; `what` names the structure in errors.
    pub(crate) fn new(buf: &'a [u8], what: &'static str) -> Self {
        Self { buf, what }
    }

    /// Bytes left.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// Whether all bytes were consumed.
    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The next `n` bytes.
    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let (head, tail) = self
            .buf
            .split_at_checked(n)
            .ok_or(DecodeError::Truncated { what: self.what })?;
        self.buf = tail;
        Ok(head)
    }

    /// The next `N` bytes as an array.
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let what = self.what;
        let b = self.bytes(N)?;
        <[u8; N]>::try_from(b).map_err(|_| DecodeError::Truncated { what })
    }

    /// Skips `n` bytes (padding).
    pub(crate) fn skip(&mut self, n: usize) -> Result<(), DecodeError> {
        self.bytes(n).map(|_| ())
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(u8::from_be_bytes(self.array()?))
    }

    pub(crate) fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    /// A sub-reader over the next `n` bytes, named `what`.
    pub(crate) fn sub(&mut self, n: usize, what: &'static str) -> Result<Reader<'a>, DecodeError> {
        let b = self.bytes(n)?;
        Ok(Reader::new(b, what))
    }

    /// Everything that is left.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.buf)
    }

    /// Fails when bytes are left over.
    pub(crate) fn finish(self) -> Result<(), DecodeError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes {
                what: self.what,
                len: self.buf.len(),
            })
        }
    }
}

pub(crate) fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_zeros(out: &mut Vec<u8>, n: usize) {
    out.resize(out.len() + n, 0);
}

/// Bytes of zero padding that bring `len` up to a multiple of 8.
pub(crate) const fn pad8(len: usize) -> usize {
    (8 - len % 8) % 8
}

/// Writes `len` as a big-endian u16 at `at` (a length placeholder written earlier).
pub(crate) fn patch_len16(
    out: &mut [u8],
    at: usize,
    len: usize,
    what: &'static str,
) -> Result<(), EncodeError> {
    let v = u16::try_from(len).map_err(|_| EncodeError::TooLong { what, len })?;
    let slot = out
        .get_mut(at..at + 2)
        .ok_or(EncodeError::TooLong { what, len })?;
    slot.copy_from_slice(&v.to_be_bytes());
    Ok(())
}

/// Writes a fixed-size, NUL-padded string field of `n` bytes.
pub(crate) fn put_fixed_str(
    out: &mut Vec<u8>,
    s: &[u8],
    n: usize,
    what: &'static str,
) -> Result<(), EncodeError> {
    if s.len() > n {
        return Err(EncodeError::TooLong { what, len: s.len() });
    }
    out.extend_from_slice(s);
    put_zeros(out, n - s.len());
    Ok(())
}

/// Reads a fixed-size, NUL-padded string field: the bytes before the first NUL.
pub(crate) fn get_fixed_str(r: &mut Reader<'_>, n: usize) -> Result<Vec<u8>, DecodeError> {
    let b = r.bytes(n)?;
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    Ok(b.get(..end).unwrap_or_default().to_vec())
}
