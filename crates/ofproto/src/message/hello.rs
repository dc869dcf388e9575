//! OFPT_HELLO and its elements (OpenFlow 1.3.5 §7.5.1), the one message decoded whatever its
//! version. ECHO (§7.5.2–§7.5.3) bodies are plain bytes and EXPERIMENTER (§7.5.4) lives in
//! `crate::experimenter`, so this is all of the symmetric messages that needs a module.

use crate::error::{DecodeError, EncodeError};
use crate::wire::{pad8, patch_len16, put_u16, put_u32, put_zeros, Reader};

use super::header::OFP_VERSION_1_3;

/// OFPHET_VERSIONBITMAP.
pub const OFPHET_VERSIONBITMAP: u16 = 1;

/// One HELLO element (§7.5.1).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HelloElement {
    /// OFPHET_VERSIONBITMAP: bit `v` of the bitmap set when version `v` is supported
    /// (bitmap word `i` holds versions `32*i ..= 32*i+31`).
    VersionBitmap(Vec<u32>),
    /// An element type this crate does not know, kept verbatim (without its padding).
    Unknown {
        /// Element type.
        typ: u16,
        /// Bytes after the 4-byte element header.
        data: Vec<u8>,
    },
}

/// OFPT_HELLO (§7.5.1).
///
/// ```text
/// | ofp_header (version = highest the sender supports) | elements ... |
/// element: | type u16 | length u16 (no padding) | body | zero pad to a multiple of 8 |
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Hello {
    /// The header version: the highest version the sender supports. HELLO is the only message
    /// decoded whatever its version.
    pub version: u8,
    /// Elements.
    pub elements: Vec<HelloElement>,
}

impl Hello {
    /// A HELLO advertising only OpenFlow 1.3, with a version bitmap.
    pub fn v1_3() -> Self {
        Hello {
            version: OFP_VERSION_1_3,
            elements: vec![HelloElement::VersionBitmap(vec![1 << OFP_VERSION_1_3])],
        }
    }

    /// The versions the bitmap lists (`None` when there is no bitmap element).
    pub fn bitmap_versions(&self) -> Option<Vec<u8>> {
        self.elements.iter().find_map(|e| match e {
            HelloElement::VersionBitmap(words) => Some(
                words
                    .iter()
                    .enumerate()
                    .flat_map(|(i, w)| {
                        (0u32..32)
                            .filter(move |b| w & (1 << b) != 0)
                            .filter_map(move |b| {
                                u8::try_from(i.saturating_mul(32).saturating_add(b as usize)).ok()
                            })
                    })
                    .collect(),
            ),
            HelloElement::Unknown { .. } => None,
        })
    }

    pub(super) fn body_len(&self) -> usize {
        self.elements
            .iter()
            .map(|e| {
                let l = match e {
                    HelloElement::VersionBitmap(w) => 4 + 4 * w.len(),
                    HelloElement::Unknown { data, .. } => 4 + data.len(),
                };
                l + pad8(l)
            })
            .sum()
    }

    pub(super) fn encode_body(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        for e in &self.elements {
            let start = out.len();
            match e {
                HelloElement::VersionBitmap(words) => {
                    put_u16(out, OFPHET_VERSIONBITMAP);
                    put_u16(out, 0);
                    words.iter().for_each(|w| put_u32(out, *w));
                }
                HelloElement::Unknown { typ, data } => {
                    put_u16(out, *typ);
                    put_u16(out, 0);
                    out.extend_from_slice(data);
                }
            }
            let len = out.len() - start;
            patch_len16(out, start + 2, len, "hello element")?;
            put_zeros(out, pad8(len));
        }
        Ok(())
    }

    pub(super) fn decode_body(version: u8, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut elements = Vec::new();
        while !r.is_empty() {
            let typ = r.u16()?;
            let len = usize::from(r.u16()?);
            if len < 4 {
                return Err(DecodeError::BadLength {
                    what: "hello element",
                    len,
                });
            }
            let mut b = r.sub(len - 4, "hello element")?;
            r.skip(pad8(len))?;
            if typ == OFPHET_VERSIONBITMAP {
                if (len - 4) % 4 != 0 {
                    return Err(DecodeError::BadLength {
                        what: "hello version bitmap",
                        len,
                    });
                }
                let mut words = Vec::new();
                while !b.is_empty() {
                    words.push(b.u32()?);
                }
                elements.push(HelloElement::VersionBitmap(words));
            } else {
                elements.push(HelloElement::Unknown {
                    typ,
                    data: b.rest().to_vec(),
                });
            }
        }
        Ok(Hello { version, elements })
    }
}
