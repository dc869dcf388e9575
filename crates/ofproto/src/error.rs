//! Errors of the codec (STYLE.md §4); this module imports nothing else of the crate.
//!
//! [`DecodeError`] is the peer's fault: the bytes came from the network and were not valid
//! OpenFlow 1.3. It is small and `Copy`, and [`DecodeError::to_ofp_error`] (defined next to the
//! codes, in [`crate::ofp_error`]) is the one place that maps it to the OFPT_ERROR type/code the
//! spec wants sent back. [`EncodeError`] is our own misuse: a message that cannot be expressed on
//! the wire (a length over 65535, a string too long for its fixed field).

/// Why bytes from the peer are not a valid OpenFlow 1.3 message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The header's version is not 0x04 (and the message is not a HELLO, which may carry any version).
    #[error("OpenFlow version {0:#04x} is not 1.3 (0x04)")]
    BadVersion(u8),
    /// A structure ended before its fixed part or before the length its header declared.
    #[error("{what}: truncated")]
    Truncated {
        /// The structure being read.
        what: &'static str,
    },
    /// A length field is smaller than the structure's fixed part, not a multiple the spec requires,
    /// or larger than the enclosing structure.
    #[error("{what}: invalid length {len}")]
    BadLength {
        /// The structure whose length field is wrong.
        what: &'static str,
        /// The length found.
        len: usize,
    },
    /// Bytes were left after a structure that must fill its container exactly.
    #[error("{what}: {len} trailing bytes")]
    TrailingBytes {
        /// The structure that should have ended.
        what: &'static str,
        /// How many bytes were left.
        len: usize,
    },
    /// `ofp_match.type` is not OFPMT_OXM (1); OFPMT_STANDARD is deprecated in 1.3.
    #[error("match type {0} is not OFPMT_OXM")]
    BadMatchType(u16),
    /// An OpenFlow-basic OXM field has the wrong payload length for its type.
    #[error("OXM basic field {field}: payload length {len} is wrong")]
    BadOxmLength {
        /// The OXM field number.
        field: u8,
        /// The payload length found.
        len: u8,
    },
    /// The same OXM field appears twice in one match (OFPBMC_DUP_FIELD).
    #[error("OXM field class {class:#06x} field {field} appears twice")]
    DuplicateOxm {
        /// OXM class.
        class: u16,
        /// OXM field number.
        field: u8,
    },
    /// An action of a known type has the wrong length.
    #[error("action type {typ}: invalid length {len}")]
    BadActionLength {
        /// OFPAT_* type.
        typ: u16,
        /// The length found.
        len: u16,
    },
    /// An instruction of a known type has the wrong length.
    #[error("instruction type {typ}: invalid length {len}")]
    BadInstructionLength {
        /// OFPIT_* type.
        typ: u16,
        /// The length found.
        len: u16,
    },
    /// A message type that needs a body of fixed size got another size.
    #[error("message type {typ}: body length {len} is wrong")]
    BadMessageLength {
        /// OFPT_* type.
        typ: u8,
        /// The body length found.
        len: usize,
    },
    /// A multipart body has the wrong length for its type.
    #[error("multipart type {typ}: body length {len} is wrong")]
    BadMultipartLength {
        /// OFPMP_* type.
        typ: u16,
        /// The body length found.
        len: usize,
    },
}

/// Why a message cannot be encoded: the caller built something the wire cannot carry (misuse).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// A structure would be longer than its length field can say, or a string is longer than its
    /// fixed-size field.
    #[error("{what}: length {len} does not fit its field")]
    TooLong {
        /// The structure that overflowed.
        what: &'static str,
        /// Its length.
        len: usize,
    },
}
